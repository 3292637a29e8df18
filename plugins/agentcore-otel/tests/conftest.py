"""Fixtures: instrumentation with the SDK's in-memory exporters, and a local OpenAI-compatible
HTTP server on 127.0.0.1 (no other network)."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Iterator, List, Optional

import agentcore_otel
import pytest
from agentcore_otel import _state
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentcore import Usage, UsageCost, tool


@dataclass
class Otel:
    """What a test reads back: finished spans and collected metric points."""

    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracer_provider: TracerProvider
    meter_provider: MeterProvider

    def spans(self) -> List[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> List[ReadableSpan]:
        return [s for s in self.spans() if s.name.startswith(prefix)]

    def one(self, prefix: str) -> ReadableSpan:
        found = self.named(prefix)
        assert len(found) == 1, [s.name for s in self.spans()]
        return found[0]

    def points(self, metric: str) -> List[Any]:
        """The data points of ``metric`` (histograms: ``.count``, ``.sum``, ``.attributes``)."""
        data = self.reader.get_metrics_data()
        out: List[Any] = []
        for rm in data.resource_metrics if data else ():
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name == metric:
                        out.extend(m.data.data_points)
        return out

    def instrument(self, capture_content: bool = False) -> None:
        agentcore_otel.instrument(self.tracer_provider, self.meter_provider, capture_content=capture_content)


def _reset() -> None:
    agentcore_otel.uninstrument()
    for run in list(_state.runs.values()):
        run.finish(None, abandoned=True)
    _state.paused.clear()


@pytest.fixture
def otel_sdk() -> Iterator[Otel]:
    """In-memory span exporter and metric reader; NOT instrumented yet."""
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    yield Otel(exporter, reader, tracer_provider, meter_provider)
    _reset()
    tracer_provider.shutdown()
    meter_provider.shutdown()


@pytest.fixture
def otel(otel_sdk: Otel) -> Otel:
    """Instrumented with the in-memory providers (content capture off)."""
    otel_sdk.instrument()
    return otel_sdk


# --------------------------------------------------------------------------- a local model server


@dataclass
class ModelServer:
    """An OpenAI chat-completions endpoint on 127.0.0.1 answering from ``replies``.

    A reply is ``("text", str, usage_dict)`` streamed as SSE, or ``("status", code, body)`` (sent
    with ``x-should-retry: false`` so the client fails at once). ``requests`` records each
    request's headers and JSON body.
    """

    url: str
    replies: List[Any] = field(default_factory=list)
    requests: List[Dict[str, Any]] = field(default_factory=list)


def _sse_body(text: str, usage: Dict[str, Any], model: str) -> bytes:
    chunks = [
        {
            "id": "chatcmpl-local-1",
            "model": model,
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}],
        },
        {"id": "chatcmpl-local-1", "model": model, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"id": "chatcmpl-local-1", "model": model, "choices": [], "usage": usage},
    ]
    lines = [f"data: {json.dumps(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]
    return "".join(lines).encode()


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    server_state = ModelServer(url="")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep test output quiet
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server API
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            server_state.requests.append({"headers": dict(self.headers), "body": body})
            kind, value, extra = server_state.replies.pop(0)
            if kind == "status":
                payload = extra.encode() if isinstance(extra, str) else json.dumps(extra).encode()
                self.send_response(value)
                self.send_header("Content-Type", "application/json")
                self.send_header("x-should-retry", "false")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                return
            payload = _sse_body(value, extra, body.get("model", "m"))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    server_state.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    yield server_state
    httpd.shutdown()
    httpd.server_close()
    thread.join(5)


def local_model(url: str, model_id: str = "local-llm", headers: Optional[Dict[str, str]] = None) -> Any:
    from agentcore import Model

    return Model(id=model_id, api="openai-completions", provider="local", base_url=url, headers=headers)


# --------------------------------------------------------------------------- shared test data


@tool
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


def make_usage(inp: int, out: int, cache_read: int = 0, cache_write: int = 0, cost: float = 0.0) -> Usage:
    """A response's usage with ``cost`` USD in total."""
    return Usage(
        input=inp,
        output=out,
        cache_read=cache_read,
        cache_write=cache_write,
        total_tokens=inp + out + cache_read + cache_write,
        cost=UsageCost(input=cost / 2, output=cost / 2, total=cost),
    )

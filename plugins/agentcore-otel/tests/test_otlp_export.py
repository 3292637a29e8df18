"""The real wire path: the SDK's OTLP/HTTP exporters send to a receiver on 127.0.0.1 that decodes
the protobuf payloads with opentelemetry-proto."""

from __future__ import annotations

import gzip
import json
import os
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Iterator, List, Tuple

import pytest

otlp_trace = pytest.importorskip("opentelemetry.exporter.otlp.proto.http.trace_exporter")
otlp_metric = pytest.importorskip("opentelemetry.exporter.otlp.proto.http.metric_exporter")
trace_pb2 = pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")
metrics_pb2 = pytest.importorskip("opentelemetry.proto.collector.metrics.v1.metrics_service_pb2")

import agentcore_otel  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: E402

from agentcore import Agent, tool  # noqa: E402
from agentcore.testing import ScriptedModel, call, response, text  # noqa: E402


@tool
def shout(word: str) -> str:
    """Upper-case a word."""
    return word.upper()


class Receiver:
    """Collects ``(path, decoded request)`` for every OTLP POST."""

    def __init__(self) -> None:
        self.received: List[Tuple[str, Any]] = []
        self.got_traces = threading.Event()
        self.got_metrics = threading.Event()


@pytest.fixture
def receiver() -> Iterator[Tuple[Receiver, str]]:
    state = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server API
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            encoding = (self.headers.get("Content-Encoding") or "").lower()
            if encoding == "gzip":
                raw = gzip.decompress(raw)
            elif encoding == "deflate":
                raw = zlib.decompress(raw)
            assert self.headers.get("Content-Type") == "application/x-protobuf"
            if self.path == "/v1/traces":
                message = trace_pb2.ExportTraceServiceRequest()
                message.ParseFromString(raw)
                state.received.append((self.path, message))
                state.got_traces.set()
            elif self.path == "/v1/metrics":
                message = metrics_pb2.ExportMetricsServiceRequest()
                message.ParseFromString(raw)
                state.received.append((self.path, message))
                state.got_metrics.set()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield state, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
    thread.join(5)


def _value(any_value: Any) -> Any:
    return getattr(any_value, any_value.WhichOneof("value"))


def test_spans_and_metrics_travel_over_otlp_http(receiver: Tuple[Receiver, str]) -> None:
    state, base = receiver
    resource = Resource.create({"service.name": "otel-wire-test"})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(
        BatchSpanProcessor(otlp_trace.OTLPSpanExporter(endpoint=f"{base}/v1/traces", timeout=10))
    )
    reader = PeriodicExportingMetricReader(
        otlp_metric.OTLPMetricExporter(endpoint=f"{base}/v1/metrics", timeout=10), export_interval_millis=3_600_000
    )  # exported by force_flush below, not by the timer
    meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
    agentcore_otel.instrument(tracer_provider, meter_provider)
    try:
        model = ScriptedModel([response(call("shout", {"word": "hey"}, id="call-w1")), text("HEY")])
        agent = Agent(model.model, tools=[shout], stream_fn=model.stream_fn)
        agent.name = "Wire"
        agent.prompt("shout hey")
    finally:
        agentcore_otel.uninstrument()
    assert tracer_provider.force_flush(10_000)
    assert meter_provider.force_flush(10_000)
    assert state.got_traces.wait(10) and state.got_metrics.wait(10)
    tracer_provider.shutdown()
    meter_provider.shutdown()

    spans: Dict[str, Any] = {}
    for path, message in state.received:
        if path != "/v1/traces":
            continue
        for resource_spans in message.resource_spans:
            service = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            assert service["service.name"] == "otel-wire-test"
            for scope_spans in resource_spans.scope_spans:
                assert scope_spans.scope.name == "agentcore_otel"
                for span in scope_spans.spans:
                    spans.setdefault(span.name, []).append(span)
    assert sorted(spans) == ["chat " + model.model.id, "execute_tool shout", "invoke_agent Wire"]
    root = spans["invoke_agent Wire"][0]
    assert root.parent_span_id == b""
    for name in ("chat " + model.model.id, "execute_tool shout"):
        for span in spans[name]:
            assert span.parent_span_id == root.span_id and span.trace_id == root.trace_id
    tool_attrs = {a.key: _value(a.value) for a in spans["execute_tool shout"][0].attributes}
    assert tool_attrs["gen_ai.tool.call.id"] == "call-w1"
    assert tool_attrs["gen_ai.operation.name"] == "execute_tool"
    chat_attrs = {a.key: a.value for a in spans["chat " + model.model.id][0].attributes}
    assert list(chat_attrs["gen_ai.response.finish_reasons"].array_value.values[0:1])[0].string_value == "tool_call"

    metric_names = set()
    for path, message in state.received:
        if path != "/v1/metrics":
            continue
        for resource_metrics in message.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    metric_names.add(metric.name)
                    assert metric.WhichOneof("data") == "histogram"
    assert {
        "gen_ai.client.operation.duration",
        "gen_ai.execute_tool.duration",
        "gen_ai.invoke_agent.duration",
    } <= metric_names


def test_lone_surrogates_never_cost_the_export_of_a_batch(receiver: Tuple[Receiver, str], tmp_path: Any) -> None:
    """A non-UTF-8 file name decodes to a lone surrogate (``\\udcff``), and a model may send one
    as a JSON escape. Recorded as they are, the OTLP exporter cannot encode them: it used to drop
    the captured messages, and a span name or status description with one failed the export of
    the whole batch (every span of the run lost)."""
    state, base = receiver
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(
        BatchSpanProcessor(otlp_trace.OTLPSpanExporter(endpoint=f"{base}/v1/traces", timeout=10))
    )
    (tmp_path / os.fsdecode(b"notes-\xff.txt")).write_text("hello", encoding="utf-8")

    @tool
    def list_files() -> str:
        """List the working directory."""
        return "\n".join(os.listdir(tmp_path))

    agentcore_otel.instrument(tracer_provider, capture_content=True)
    try:
        # the model calls the tool, then a tool whose name it sent as a broken escape
        model = ScriptedModel([response(call("list_files", {}), call("ls\udcff", {})), text("one file")])
        Agent(model.model, tools=[list_files], stream_fn=model.stream_fn).prompt("which files?")
    finally:
        agentcore_otel.uninstrument()
    assert tracer_provider.force_flush(10_000)
    assert state.got_traces.wait(10)
    tracer_provider.shutdown()

    spans: Dict[str, Any] = {}
    for path, message in state.received:
        for resource_spans in message.resource_spans if path == "/v1/traces" else ():
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    spans.setdefault(span.name, []).append(span)
    chat = "chat " + model.model.id
    assert sorted(spans) == [chat, "execute_tool list_files", "execute_tool ls\\udcff", "invoke_agent"]
    assert spans["execute_tool ls\\udcff"][0].status.message == "Tool ls\\udcff not found"
    listed = {a.key: _value(a.value) for a in spans["execute_tool list_files"][0].attributes}
    assert json.loads(listed["gen_ai.tool.call.result"]) == os.fsdecode(b"notes-\xff.txt")  # the same text
    sent = {a.key: _value(a.value) for a in spans[chat][1].attributes}["gen_ai.input.messages"]
    results = [m["parts"][0]["response"] for m in json.loads(sent) if m["role"] == "tool"]
    assert results == [os.fsdecode(b"notes-\xff.txt"), "Tool ls\udcff not found"]

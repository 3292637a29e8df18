"""Per-delta parsing cost of the google-vertex stream against a bare parse of the same bytes.

The body is a Gemini ``streamGenerateContent?alt=sse`` response of N text deltas (the shape of
the recordings: one candidate, one text part per chunk, usage on each chunk, a finish reason at the
end), cut into 1 KiB network chunks. Measured in the same run:

* floor: split the bytes into SSE events and ``json.loads`` each ``data:`` payload;
* vertex: the provider's own path: ``iter_sse`` over the chunks, the handler from
  ``VertexProvider.new_handler`` (the core's GoogleStreamState), StreamWriter events into a list.

Prints microseconds per delta for both and their ratio (the overhead of turning bytes into
events). Asserts nothing.

    python plugins/agentcore-vertex/benchmarks/bench_parse.py [deltas] [repeats]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(_ROOT), str(_ROOT / "plugins" / "agentcore-vertex")]

from agentcore_vertex import VertexProvider  # noqa: E402

from agentcore.providers.base import StreamWriter  # noqa: E402
from agentcore.providers.sse import iter_sse  # noqa: E402
from agentcore.types import AssistantMessage, Model, ModelCost  # noqa: E402

MODEL = Model(
    id="gemini-2.5-flash",
    api="google-vertex",
    provider="google-vertex",
    base_url="https://{location}-aiplatform.googleapis.com",
    cost=ModelCost(0.3, 2.5, 0.03, 0),
)


def body(deltas: int) -> bytes:
    events = []
    for i in range(deltas):
        chunk = {
            "candidates": [{"content": {"role": "model", "parts": [{"text": f"word{i} and some more text "}]}}],
            "usageMetadata": {"promptTokenCount": 34, "candidatesTokenCount": i, "totalTokenCount": 34 + i},
            "modelVersion": "gemini-2.5-flash",
            "responseId": "abc123",
        }
        if i == deltas - 1:
            chunk["candidates"][0]["finishReason"] = "STOP"
        events.append("data: " + json.dumps(chunk) + "\r\n\r\n")
    return "".join(events).encode("utf-8")


def chunks(data: bytes, size: int = 1024):
    return [data[i : i + size] for i in range(0, len(data), size)]


def floor(pieces) -> int:
    text = b"".join(pieces).decode("utf-8")
    n = 0
    for event in text.split("\r\n\r\n"):
        if event.startswith("data: "):
            json.loads(event[6:])
            n += 1
    return n


def vertex(provider: VertexProvider, pieces) -> int:
    output = AssistantMessage(api=MODEL.api, provider=MODEL.provider, model=MODEL.id)
    events = []
    handler = provider.new_handler(MODEL, StreamWriter(MODEL, output, events.append), {})
    for sse in iter_sse(iter(pieces)):
        handler.on_event(sse)
    handler.on_end(True)
    return len(events)


def best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("deltas", nargs="?", type=int, default=2000, help="text deltas per stream (default 2000)")
    parser.add_argument("repeats", nargs="?", type=int, default=15, help="timed repeats (default 15)")
    parsed = parser.parse_args(argv)  # --help prints the docstring; a bad size exits 2
    deltas, repeats = parsed.deltas, parsed.repeats
    pieces = chunks(body(deltas))
    provider = VertexProvider()
    assert floor(pieces) == deltas and vertex(provider, pieces) == deltas + 2  # start, deltas, end
    bare = best(lambda: floor(pieces), repeats) / deltas * 1e6
    full = best(lambda: vertex(provider, pieces), repeats) / deltas * 1e6
    print(f"deltas per stream: {deltas}, body {sum(map(len, pieces))} bytes, median of {repeats}")
    print(f"floor (split + json.loads): {bare:6.2f} us/delta")
    print(f"google-vertex parse:        {full:6.2f} us/delta")
    print(f"ratio vertex/floor:         {full / bare:6.2f}x")


if __name__ == "__main__":
    main(sys.argv[1:])

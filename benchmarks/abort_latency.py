"""How fast an abort ends a provider stream that is blocked on the network (issue 4: <= 100 ms).

A local chat-completions server sends the response headers and one text delta, then stalls. The
provider stream is iterated on a worker thread; once the first delta arrived the signal is aborted
and the time until the stream has ended (its ``error`` event with ``stop_reason="aborted"``) is
measured. The same for an abort while waiting for the response headers. The floor is the time the
same thread needs to notice a ``threading.Event`` set at that moment.

    python benchmarks/abort_latency.py [runs]
"""

from __future__ import annotations

import json
import statistics
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _cli import int_args

from agentcore import AbortController, AgentContext, Model, UserMessage  # noqa: E402
from agentcore.providers import stream  # noqa: E402

RELEASE = threading.Event()


class Stalling(BaseHTTPRequestHandler):
    def log_message(self, *args):  # quiet
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path.endswith("/headers/chat/completions"):
            RELEASE.wait(10)  # never answers before the client gave up
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        chunk = {"choices": [{"index": 0, "delta": {"content": "hello"}, "finish_reason": None}]}
        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.flush()
        RELEASE.wait(10)


def one(base_url: str, stall_headers: bool) -> float:
    model = Model(
        id="m", api="openai-completions", provider="local", base_url=base_url + ("/headers" if stall_headers else "")
    )
    controller = AbortController()
    first = threading.Event()
    ended = threading.Event()
    outcome = {}

    def consume() -> None:
        events = stream(model, AgentContext(messages=[UserMessage("hi")]), signal=controller.signal, max_retries=0)
        for event in events:
            if event.type == "text_delta":
                first.set()
        outcome["message"] = events.result()
        ended.set()

    threading.Thread(target=consume, daemon=True).start()
    if stall_headers:
        time.sleep(0.05)  # the request is out and waiting for headers (timing, not ordering)
    else:
        assert first.wait(5), "no first delta"
    start = time.perf_counter()
    controller.abort()
    assert ended.wait(5), "the stream did not end after the abort"
    took = time.perf_counter() - start
    assert outcome["message"].stop_reason == "aborted"
    return took


def floor() -> float:
    flag = threading.Event()
    done = threading.Event()

    def waiter() -> None:
        flag.wait()
        done.set()

    threading.Thread(target=waiter, daemon=True).start()
    time.sleep(0.005)
    start = time.perf_counter()
    flag.set()
    done.wait()
    return time.perf_counter() - start


def main() -> None:
    (runs,) = int_args(__doc__, [("runs", 20)])
    server = ThreadingHTTPServer(("127.0.0.1", 0), Stalling)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    base_floor = statistics.median(floor() for _ in range(runs)) * 1000
    for label, stall_headers in (("mid-stream", False), ("waiting for headers", True)):
        times = [one(base, stall_headers) * 1000 for _ in range(runs)]
        median = statistics.median(times)
        print(
            f"abort {label:20s}: median {median:6.2f} ms, max {max(times):6.2f} ms over {runs} runs, "
            f"{median / base_floor:.1f}x the floor (Event wake-up {base_floor:.3f} ms); target <= 100 ms"
        )
    RELEASE.set()
    server.shutdown()


if __name__ == "__main__":
    main()

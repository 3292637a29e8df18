"""End-to-end provider overhead against a local scripted chat-completions server (issue 4).

The server (127.0.0.1, port 0) streams turn 1 = 50 text deltas + one tool call, and turn 2 = a short
text answer, one HTTP chunk per SSE event, like real APIs. Measured in the same run:

  (a) floor: plain ``requests`` + line splitting + ``json.loads`` doing the same two requests;
  (b) a full ``Agent`` run (loop, tool execution, events, state) over the openai-completions provider,
      on one long-lived Agent (``reset()`` before each prompt; a new Agent per run is measured by
      agent_cost.py);
  (c) for reference, the provider alone (``agentcore.providers.stream`` for the same two turns).

Prints the median time of each, the ratio b/a (target <= 1.3) and what the Agent adds over the
provider per run and per agent event, then SSE parsing throughput of ``iter_sse`` against the
floor's line splitting on the same bytes (target >= 0.8). Asserts nothing. The machine's other
load moves the ratios by a few hundredths between runs; compare several runs.

    python benchmarks/end_to_end.py [runs]
"""

from __future__ import annotations

import json
import socket
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import requests  # noqa: E402
from _cli import int_args

from agentcore import Agent, Model, tool  # noqa: E402
from agentcore.providers.sse import iter_sse  # noqa: E402


def _chunk(delta, finish=None):
    return {
        "id": "chatcmpl-b",
        "object": "chat.completion.chunk",
        "model": "bench",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _events(*payloads):
    return [f"data: {json.dumps(p)}\n\n".encode() for p in payloads] + [b"data: [DONE]\n\n"]


USAGE = {"choices": [], "usage": {"prompt_tokens": 120, "completion_tokens": 60}}
TURN1 = _events(
    *[_chunk({"content": f"word{i} "}) for i in range(50)],
    _chunk(
        {
            "tool_calls": [
                {"index": 0, "id": "call_1", "type": "function", "function": {"name": "multiply", "arguments": ""}}
            ]
        }
    ),
    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"a": 1231, '}}]}),
    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"b": 2331}'}}]}),
    _chunk({}, "tool_calls"),
    USAGE,
)
TURN2 = _events(_chunk({"content": "The product is 2869461."}), _chunk({}, "stop"), USAGE)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def setup(self):
        super().setup()
        # small event writes must not wait for delayed ACKs (Nagle), as with real streaming servers
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def events_for(self, body):
        """The SSE events answering one request body (a subclass may serve other turns)."""
        return TURN2 if body["messages"][-1]["role"] == "tool" else TURN1

    def do_POST(self):
        events = self.events_for(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event in events:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def floor_turn(session, url, payload):
    """One streamed request with plain requests: post, split lines, json.loads every data line.
    Returns the text deltas and the tool-call argument fragments."""
    body = json.dumps(payload).encode()
    response = session.post(url, data=body, headers={"Content-Type": "application/json"}, stream=True)
    text, args, buffer = [], [], b""
    for data in response.raw.stream(None):
        buffer += data
        lines = buffer.split(b"\n")
        buffer = lines.pop()
        for line in lines:
            if line.startswith(b"data: ") and line != b"data: [DONE]":
                chunk = json.loads(line[6:])
                for choice in chunk["choices"]:
                    delta = choice["delta"]
                    if delta.get("content"):
                        text.append(delta["content"])
                    for call in delta.get("tool_calls") or []:
                        args.append(call["function"].get("arguments") or "")
    response.close()
    return text, args


def floor_run(session, url):
    """Both turns with plain requests (:func:`floor_turn`), the tool executed in between."""
    messages = [{"role": "user", "content": "What is 1231 * 2331?"}]
    tools = [
        {
            "type": "function",
            "function": {"name": "multiply", "description": "Multiply.", "parameters": {"type": "object"}},
        }
    ]
    for _turn in range(2):
        text, args = floor_turn(session, url, {"model": "bench", "messages": messages, "stream": True, "tools": tools})
        if args:
            result = json.loads("".join(args))
            messages += [
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "multiply", "arguments": json.dumps(result)},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": str(result["a"] * result["b"])},
            ]


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def agent_run(agent):
    """One prompt on a long-lived Agent (reset first), as an application would run it."""
    agent.reset()
    new = agent.prompt("What is 1231 * 2331?")
    assert new[-1].text == "The product is 2869461.", new[-1].error_message


def provider_run(model):
    """Both turns through agentcore.providers.stream alone (no Agent): the provider's share."""
    from agentcore.providers import stream
    from agentcore.signals import AbortController
    from agentcore.types import AgentContext, TextContent, ToolResultMessage, UserMessage

    context = AgentContext(messages=[UserMessage("What is 1231 * 2331?")], tools=[multiply])
    first = stream(model, context, signal=AbortController().signal).result()
    call = first.tool_calls[0]
    context.messages += [first, ToolResultMessage(call.id, call.name, [TextContent("2869461")])]
    assert stream(model, context, signal=AbortController().signal).result().stop_reason == "stop"


def _median(fn, runs):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def sse_throughput(repeat=5):
    events = (TURN1 + TURN2) * 400
    data = b"".join(events)
    chunks = events  # one network chunk per event, as the server sends them

    def floor():  # exactly the line handling of floor_run, minus json.loads
        buffer, payloads = b"", []
        for piece in chunks:
            buffer += piece
            lines = buffer.split(b"\n")
            buffer = lines.pop()
            for line in lines:
                if line.startswith(b"data: ") and line != b"data: [DONE]":
                    payloads.append(line[6:])
        return len(payloads) + len(events) // len(TURN1 + TURN2) * 2  # + the [DONE] lines

    def ours():
        payloads = []
        for event in iter_sse(chunks):
            payloads.append(event.data)
        return len(payloads)

    assert floor() == ours()
    floor_s = min(_median(floor, 3) for _ in range(repeat))
    ours_s = min(_median(ours, 3) for _ in range(repeat))
    mb = len(data) / 1e6
    return mb / floor_s, mb / ours_s


class _Server(ThreadingHTTPServer):
    request_queue_size = 512  # socketserver's 5 drops the SYNs of 200 concurrent agents (1 s retries)


def serve(handler=_Handler) -> None:
    """Run the scripted server in this (child) process; print its port, stop when stdin closes."""
    server = _Server(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_address[1], flush=True)
    sys.stdin.read()


def with_server(script, measure, runs: int) -> None:
    """Start ``script --serve`` as a child process (a real API is another process: in-process the
    server would compete with the client for the GIL) and call ``measure(base_url, runs)``."""
    child = subprocess.Popen(
        [sys.executable, script, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        port = int(child.stdout.readline())
        measure(f"http://127.0.0.1:{port}/v1", runs)
    finally:
        child.stdin.close()
        child.wait(10)


def main(runs: int) -> None:
    with_server(__file__, _measure, runs)


def _measure(base: str, runs: int) -> None:
    model = Model(id="bench", api="openai-completions", provider="bench-local", base_url=base)
    session = requests.Session()
    agent = Agent(model, tools=[multiply])
    for _ in range(10):  # warm up every path (imports, pools, caches)
        floor_run(session, base + "/chat/completions")
        agent_run(agent)
        provider_run(model)
    floor_s, agent_s, provider_s = [], [], []
    for _ in range(runs):  # interleave so drift affects all equally
        floor_s.append(_median(lambda: floor_run(session, base + "/chat/completions"), 1))
        agent_s.append(_median(lambda: agent_run(agent), 1))
        provider_s.append(_median(lambda: provider_run(model), 1))
    a, b, c = statistics.median(floor_s), statistics.median(agent_s), statistics.median(provider_s)
    events: list = []
    unsubscribe = agent.subscribe(events.append)
    agent_run(agent)
    unsubscribe()
    print(f"two-turn run (50 text deltas + 1 tool call, then text), {runs} runs, median:")
    print(f"  (a) floor: requests + line split + json.loads   {a * 1000:7.2f} ms")
    print(f"  (b) Agent run over openai-completions          {b * 1000:7.2f} ms")
    print(f"  (c) providers.stream alone, same two turns      {c * 1000:7.2f} ms")
    print(f"  ratio b/a = {b / a:.2f}   (target <= 1.3);  provider share c/a = {c / a:.2f}")
    print(
        f"  the Agent over the provider: {(b - c) * 1000:.2f} ms per run, {len(events)} agent events, "
        f"{(b - c) / len(events) * 1e6:.1f} us per event (thread hand-overs and per-run set-up included)"
    )
    floor_mbs, ours_mbs = sse_throughput()
    print("SSE parsing, one chunk per event:")
    print(
        f"  floor line splitting {floor_mbs:7.1f} MB/s   iter_sse {ours_mbs:7.1f} MB/s   "
        f"ratio {ours_mbs / floor_mbs:.2f}   (target >= 0.8)"
    )


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        main(*int_args(__doc__, [("runs", 100)]))

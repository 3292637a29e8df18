"""What an Agent costs over the raw-requests floor, measured in the same run (issue 11 §7).

A scripted chat-completions server (its own process, 127.0.0.1, port 0) serves the two turns of
``end_to_end.py`` (50 text deltas + one tool call, then a short answer), and, for model id
``deltas-N``, one turn of N text deltas. Printed, each as a ratio against the floor (plain
``requests`` + line splitting + ``json.loads`` doing the same requests):

* ``Agent()`` without plugins of its own, in microseconds (target <= 100 us);
* one two-turn run with a new Agent each time (target <= 1.25x the floor);
* one two-turn run with a reused Agent (``reset()`` before each prompt; target <= 1.10x);
* per streamed delta: the extra time of a 1000-delta turn over a 10-delta turn, divided by the
  extra deltas, for the Agent and for the floor (target <= 1.10x), and for
  ``agentcore.providers.stream`` alone, so the Agent's own share per delta is visible.

Asserts nothing. The machine's other load moves the ratios by a few hundredths; compare runs.

    python benchmarks/agent_cost.py [runs]
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
sys.path.insert(0, str(Path(__file__).resolve().parent))

import requests  # noqa: E402

from agentcore import Agent, Model  # noqa: E402
from end_to_end import TURN1, TURN2, USAGE, _chunk, _events, agent_run, floor_run, multiply  # noqa: E402

FEW, MANY = 10, 1000


def _deltas(n):
    return _events(*[_chunk({"content": f"w{i} "}) for i in range(n)], _chunk({}, "stop"), USAGE)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    turns = {f"deltas-{n}": _deltas(n) for n in (FEW, MANY)}

    def log_message(self, *args):
        pass

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        events = self.turns.get(body["model"])
        if events is None:
            events = TURN2 if body["messages"][-1]["role"] == "tool" else TURN1
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event in events:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def floor_deltas(session, url, n):
    body = json.dumps({"model": f"deltas-{n}", "messages": [{"role": "user", "content": "go"}],
                       "stream": True}).encode()
    response = session.post(url, data=body, headers={"Content-Type": "application/json"}, stream=True)
    text, buffer = [], b""
    for data in response.raw.stream(None):
        buffer += data
        lines = buffer.split(b"\n")
        buffer = lines.pop()
        for line in lines:
            if line.startswith(b"data: ") and line != b"data: [DONE]":
                for choice in json.loads(line[6:])["choices"]:
                    if choice["delta"].get("content"):
                        text.append(choice["delta"]["content"])
    response.close()
    assert len(text) == n


def agent_deltas(agent):
    agent.reset()
    assert agent.prompt("go")[-1].stop_reason == "stop"


def provider_deltas(model):
    from agentcore.providers import stream
    from agentcore.signals import AbortController
    from agentcore.types import AgentContext, UserMessage

    message = stream(model, AgentContext(messages=[UserMessage("go")]), signal=AbortController().signal).result()
    assert message.stop_reason == "stop"


def _once(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _interleaved(fns, runs):
    """Median seconds of each function, calls interleaved so drift affects all equally."""
    samples = [[] for _ in fns]
    for _ in range(runs):
        for index, fn in enumerate(fns):
            samples[index].append(_once(fn))
    return [statistics.median(s) for s in samples]


def creation_us(model, runs=5000):
    Agent(model, tools=[multiply])
    return statistics.median(_once(lambda: Agent(model, tools=[multiply])) for _ in range(runs)) * 1e6


def _measure(base, runs):
    url = base + "/chat/completions"
    model = Model(id="bench", api="openai-completions", provider="bench-local", base_url=base)
    session = requests.Session()
    reused = Agent(model, tools=[multiply])

    def fresh():
        agent_run(Agent(model, tools=[multiply]))

    few_model = Model(id=f"deltas-{FEW}", api="openai-completions", provider="bench-local", base_url=base)
    many_model = Model(id=f"deltas-{MANY}", api="openai-completions", provider="bench-local", base_url=base)
    few, many = Agent(few_model), Agent(many_model)
    for _ in range(10):  # warm every path up (imports, pools, caches)
        floor_run(session, url), agent_run(reused), fresh()
        floor_deltas(session, url, FEW), floor_deltas(session, url, MANY), agent_deltas(few), agent_deltas(many)

    floor_s, reused_s, fresh_s = _interleaved(
        [lambda: floor_run(session, url), lambda: agent_run(reused), fresh], runs)
    f_few, f_many, a_few, a_many, p_few, p_many = _interleaved(
        [lambda: floor_deltas(session, url, FEW), lambda: floor_deltas(session, url, MANY),
         lambda: agent_deltas(few), lambda: agent_deltas(many),
         lambda: provider_deltas(few_model), lambda: provider_deltas(many_model)], max(10, runs // 5))
    floor_delta = (f_many - f_few) / (MANY - FEW)
    agent_delta = (a_many - a_few) / (MANY - FEW)
    provider_delta = (p_many - p_few) / (MANY - FEW)
    created = creation_us(model)

    print(f"floor: plain requests + line split + json.loads, {runs} runs, median")
    print(f"  Agent() (no plugins of its own)       {created:8.1f} us   (target <= 100 us)")
    print(f"  two-turn run, floor                   {floor_s * 1e3:8.2f} ms")
    print(f"  two-turn run, new Agent each time     {fresh_s * 1e3:8.2f} ms   "
          f"ratio {fresh_s / floor_s:.2f}   (target <= 1.25)")
    print(f"  two-turn run, reused Agent            {reused_s * 1e3:8.2f} ms   "
          f"ratio {reused_s / floor_s:.2f}   (target <= 1.10)")
    print(f"  per streamed delta, floor             {floor_delta * 1e6:8.2f} us")
    print(f"  per streamed delta, Agent             {agent_delta * 1e6:8.2f} us   "
          f"ratio {agent_delta / floor_delta:.2f}   (target <= 1.10)")
    print(f"  per streamed delta, provider alone    {provider_delta * 1e6:8.2f} us   "
          f"ratio {provider_delta / floor_delta:.2f}   (the Agent's own share: "
          f"{(agent_delta - provider_delta) * 1e6:.2f} us)")


def serve():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_address[1], flush=True)
    sys.stdin.read()


def main(runs):
    child = subprocess.Popen([sys.executable, __file__, "--serve"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        port = int(child.stdout.readline())
        _measure(f"http://127.0.0.1:{port}/v1", runs)
    finally:
        child.stdin.close()
        child.wait(10)


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 100)

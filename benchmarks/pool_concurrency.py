"""Many concurrent agents against one slow local server: discarded connections and throughput (issue 11 §7).

The server (its own process, 127.0.0.1) streams each chat-completions reply as ``EVENTS`` text
deltas ``DELAY`` seconds apart, so every request holds its connection for about
``EVENTS * DELAY`` and ``AGENTS`` requests are in flight at once. Measured in the same run:

  (a) floor: ``AGENTS`` threads sharing one plain ``requests.Session`` whose pool is sized for
      the load (``HTTPAdapter(pool_maxsize=AGENTS)``), each POSTing ``ROUNDS`` times and parsing
      the SSE lines with ``json.loads``;
  (b) ``AGENTS`` threads, each with its own ``Agent``, each running ``ROUNDS`` prompts over the
      openai-completions provider with the default pool (:func:`agentcore.providers.http.pool_maxsize`);
  (c) for reference, (b) with the pool capped at 32, the size agentcore used before;
  (d) and ``agentcore.providers.stream`` per thread without an Agent (the provider's share).

(a), (b) and (d) run ``REPEATS`` times, in a fresh order each time (a phase that always followed the
same neighbour would inherit its cache and server state: on the 2-core machine a single pass once
put the provider alone at 0.82x while the Agent, which does strictly more, read 0.92x). Prints the median
requests per second of each, the median of the per-repeat ratios b/a with their range (target
>= 0.95) and the most connections urllib3 discarded in any repeat ("Connection pool is full,
discarding connection"; target 0 for b). Asserts nothing. With a faster server (``delay_ms`` 10)
the client's CPU becomes the bottleneck and the ratio measures the Agent's per-run CPU cost against
bare requests instead (see end_to_end.py for that).

    python benchmarks/pool_concurrency.py [agents=200] [rounds=3] [events=20] [delay_ms=50] [repeats=5]
"""

from __future__ import annotations

import json
import logging
import statistics
import subprocess
import sys
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import end_to_end  # noqa: E402  (its server handler)
import requests  # noqa: E402
from _cli import int_args
from _rounds import round_orders  # noqa: E402

from agentcore import Agent, Model  # noqa: E402
from agentcore.providers import http as agentcore_http  # noqa: E402

EVENTS = 20
DELAY = 0.05  # seconds between streamed events: ~1 s per request, so the server is the bottleneck


def _chunk(delta, finish=None):
    return {
        "id": "chatcmpl-p",
        "object": "chat.completion.chunk",
        "model": "bench",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _reply(events):
    return [f"data: {json.dumps(_chunk({'content': f'w{i} '}))}\n\n".encode() for i in range(events)] + [
        f"data: {json.dumps(_chunk({}, 'stop'))}\n\n".encode(),
        b"data: [DONE]\n\n",
    ]


class _Handler(end_to_end._Handler):
    """end_to_end's server (HTTP/1.1, TCP_NODELAY, one chunk per event), slowed down."""

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event in self.server.reply:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
            time.sleep(self.server.delay)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # hundreds of clients connect at once


def serve(events, delay) -> None:
    server = _Server(("127.0.0.1", 0), _Handler)
    server.reply, server.delay = _reply(events), delay
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_address[1], flush=True)
    sys.stdin.read()


class _Discards(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "discarding connection" in record.getMessage():
            self.count += 1


def floor_request(session, url):
    body = json.dumps({"model": "bench", "messages": [{"role": "user", "content": "hi"}], "stream": True}).encode()
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
    assert "".join(text).startswith("w0 ")


def _threads(count, work):
    """Run ``work(i)`` on ``count`` threads started together; return the wall time."""
    barrier = threading.Barrier(count + 1)
    errors = []

    def run(i):
        barrier.wait()
        try:
            work(i)
        except BaseException as exc:  # reported after the run
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    barrier.wait()
    start, cpu = time.perf_counter(), time.process_time()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    _threads.cpu = time.process_time() - cpu  # this process's CPU seconds over the run
    if errors:
        raise errors[0]
    return elapsed


def measure(base, agents, rounds, events, delay, repeats):
    url = base + "/chat/completions"
    discards = _Discards()
    logging.getLogger("urllib3.connectionpool").addHandler(discards)
    threading.stack_size(512 * 1024)

    session = requests.Session()
    adapter = requests.adapters.HTTPAdapter(pool_maxsize=agents)
    session.mount("http://", adapter)

    def floor(_i):
        for _ in range(rounds):
            floor_request(session, url)

    def agent_work(pool_name):
        model = Model(id="bench", api="openai-completions", provider=pool_name, base_url=base)
        crew = [Agent(model) for _ in range(agents)]

        def work(i):
            for _ in range(rounds):
                crew[i].reset()
                new = crew[i].prompt("hi")
                assert new[-1].text.startswith("w0 "), new[-1].error_message

        return work

    from agentcore.providers import stream
    from agentcore.types import AgentContext, UserMessage

    provider_model = Model(id="bench", api="openai-completions", provider="bench-provider", base_url=base)

    def provider_work(_i):
        for _ in range(rounds):
            context = AgentContext(messages=[UserMessage("hi")])
            final = stream(provider_model, context).result()
            assert final.content[0].text.startswith("w0 "), final.error_message

    phases = {"floor": floor, "agentcore": agent_work("bench-default"), "provider": provider_work}
    for work in phases.values():
        _threads(agents, work)  # warm-up: connections, imports, the provider sessions' pools
    samples = {key: [] for key in phases}
    for order in round_orders(list(phases), repeats):  # no phase always follows the same one
        for key in order:
            discards.count = 0
            samples[key].append((_threads(agents, phases[key]), discards.count, _threads.cpu))

    agentcore_http.set_pool_maxsize(32)
    try:
        work = agent_work("bench-32")
        _threads(agents, work)
        discards.count = 0
        samples["pool32"] = [(_threads(agents, work), discards.count, _threads.cpu)]
    finally:
        agentcore_http.set_pool_maxsize(None)

    total = agents * rounds
    print(
        f"{agents} concurrent agents x {rounds} rounds, each reply {events} events {delay * 1000:.0f} ms apart; "
        f"{repeats} repeats in shuffled orders (medians; (c) once):"
    )
    labels = {
        "floor": "(a) floor: requests, pool sized for the load",
        "agentcore": f"(b) Agent per thread, default pool ({agentcore_http.pool_maxsize()})",
        "pool32": "(c) Agent per thread, pool capped at 32 (before)",
        "provider": "(d) providers.stream per thread (no Agent)",
    }
    for key, label in labels.items():
        runs = samples[key]
        seconds = statistics.median(run[0] for run in runs)
        cpu = statistics.median(run[2] for run in runs)
        print(
            f"  {label:50s} {total / seconds:8.1f} req/s   discarded connections {max(run[1] for run in runs):4d}   "
            f"client CPU {cpu / total * 1000:5.2f} ms/request"
        )

    def ratios(key):
        """Per-repeat throughput ratios of ``key`` against the floor of the same repeat."""
        return sorted(floor_run[0] / run[0] for floor_run, run in zip(samples["floor"], samples[key]))

    agent_ratios, provider_ratios = ratios("agentcore"), ratios("provider")
    print(
        f"  ratio b/a = {statistics.median(agent_ratios):.2f} (repeats {agent_ratios[0]:.2f}-{agent_ratios[-1]:.2f}; "
        f"target >= 0.95);  discards in b: {max(run[1] for run in samples['agentcore'])} (target 0);  "
        f"provider alone d/a = {statistics.median(provider_ratios):.2f} "
        f"({provider_ratios[0]:.2f}-{provider_ratios[-1]:.2f})"
    )


def main(agents=200, rounds=3, events=EVENTS, delay_ms=DELAY * 1000, repeats=5):
    delay = delay_ms / 1000.0
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(events), str(delay)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        port = int(child.stdout.readline())
        measure(f"http://127.0.0.1:{port}/v1", agents, rounds, events, delay, repeats)
    finally:
        child.stdin.close()
        child.wait(10)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve(int(sys.argv[2]), float(sys.argv[3]))
    else:
        main(
            *int_args(
                __doc__,
                [("agents", 200), ("rounds", 3), ("events", EVENTS), ("delay_ms", int(DELAY * 1000)), ("repeats", 5)],
            )
        )

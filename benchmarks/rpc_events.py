"""What ``agentcore rpc`` costs per streamed token (the listener runs on the run thread).

A scripted model streams an answer of N words; the events of that run are then written as JSON
lines to /dev/null three ways: by the RPC server's listener (``message_update`` converted once,
the JSON-safe walk only as a fallback), by ``event_to_dict`` plus the same writer (what the
listener did at first, and what ``agentcore run --json`` does), and by ``json.dumps`` of a
constant small dict (the floor: writing a line at all). Ratios are against the floor, measured
in the same run.

    python benchmarks/rpc_events.py [words]
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _cli import int_args

from agentcore import Agent  # noqa: E402
from agentcore.cli._rpc import RpcOutput, RpcServer  # noqa: E402
from agentcore.cli._setup import AgentSetup  # noqa: E402
from agentcore.events import event_to_dict  # noqa: E402
from agentcore.testing import ScriptedModel, text  # noqa: E402


def per_event(events, write) -> float:
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for event in events:
            write(event)
        best = min(best, (time.perf_counter() - started) / len(events))
    return best


def main() -> None:
    (words,) = int_args(__doc__, [("words", 2000)])
    model = ScriptedModel([text(" ".join(["word"] * words))], tokens_per_second=1e9)
    agent = Agent(model.model, stream_fn=model.stream_fn)
    events = []
    agent.subscribe(events.append)
    agent.prompt("go")
    with open(os.devnull, "wb") as sink:
        server = RpcServer(AgentSetup(Agent(model.model), None, None), RpcOutput(sink), sys.stderr, None)
        output = RpcOutput(sink)
        floor = per_event(events, lambda e: output.send({"type": "message_update", "n": 1}))
        listener = per_event(events, server._on_event)
        generic = per_event(events, lambda e: output.send(event_to_dict(e)))
    print(f"{len(events)} events of a {words}-word answer, per event:")
    print(f"  floor (a small line)        {floor * 1e6:7.1f} us")
    print(f"  rpc listener                {listener * 1e6:7.1f} us  {listener / floor:5.1f}x floor")
    print(f"  event_to_dict + write       {generic * 1e6:7.1f} us  {generic / floor:5.1f}x floor")
    print(f"  listener speed-up           {generic / listener:7.1f}x")


if __name__ == "__main__":
    main()

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
  ``agentcore.providers.stream`` alone, so the Agent's own share per delta is visible;
* the reused-Agent run and the per-delta cost again with one observer plugin of the agent's own:
  an ``on_event`` one (it sees every streamed token) and an ``on_lifecycle_event`` one (it does
  not), so what an installed tracing plugin costs per token is visible whatever is installed.

Entry-point plugins installed in the environment are loaded as usual (an installed ``on_event``
plugin makes every row pay per token); ``AGENTCORE_DISABLE_PLUGIN_AUTOLOAD=1`` leaves them out.

Asserts nothing. The machine's other load moves the ratios by a few hundredths; compare runs.

    python benchmarks/agent_cost.py [runs]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import end_to_end  # noqa: E402
import requests  # noqa: E402
from _cli import int_args
from _rounds import round_orders  # noqa: E402
from end_to_end import USAGE, _chunk, _events, agent_run, floor_run, floor_turn, multiply, provider_run  # noqa: E402

from agentcore import Agent, Model, hookimpl  # noqa: E402

FEW, MANY = 10, 1000


def _deltas(n):
    return _events(*[_chunk({"content": f"w{i} "}) for i in range(n)], _chunk({}, "stop"), USAGE)


class _Handler(end_to_end._Handler):
    turns = {f"deltas-{n}": _deltas(n) for n in (FEW, MANY)}

    def events_for(self, body):
        return self.turns.get(body["model"]) or super().events_for(body)


def floor_deltas(session, url, n):
    text, _ = floor_turn(
        session, url, {"model": f"deltas-{n}", "stream": True, "messages": [{"role": "user", "content": "go"}]}
    )
    assert len(text) == n


def agent_deltas(agent):
    agent.reset()
    assert agent.prompt("go")[-1].stop_reason == "stop"


class EveryEvent:
    """An observer of every event (a tracer written against ``on_event``); records the types."""

    def __init__(self):
        self.seen = 0

    @hookimpl
    def on_event(self, event, agent):
        if event.type != "message_update":
            self.seen += 1


class Lifecycle:
    """The same observer written against ``on_lifecycle_event`` (no call per streamed token)."""

    def __init__(self):
        self.seen = 0

    @hookimpl
    def on_lifecycle_event(self, event, agent):
        self.seen += 1


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
    """Median seconds of each function, calls interleaved so drift affects all equally, in a
    fresh order each round (see :func:`_rounds.round_orders`: a call right after the floor's
    requests runs with colder caches and pays about 0.3 ms of a 4 ms run)."""
    samples = [[] for _ in fns]
    for order in round_orders(range(len(fns)), runs):
        for index in order:
            samples[index].append(_once(fns[index]))
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
    observed = {
        name: (
            Agent(model, tools=[multiply], plugins=[cls()]),
            Agent(few_model, plugins=[cls()]),
            Agent(many_model, plugins=[cls()]),
        )
        for name, cls in (("on_event", EveryEvent), ("on_lifecycle_event", Lifecycle))
    }
    for _ in range(10):  # warm every path up (imports, pools, caches)
        floor_run(session, url), agent_run(reused), fresh()
        floor_deltas(session, url, FEW), floor_deltas(session, url, MANY), agent_deltas(few), agent_deltas(many)
        for run_agent, few_agent, many_agent in observed.values():
            agent_run(run_agent), agent_deltas(few_agent), agent_deltas(many_agent)

    ev_run, lc_run = observed["on_event"][0], observed["on_lifecycle_event"][0]
    floor_s, reused_s, fresh_s, ev_s, lc_s, prov_s = _interleaved(
        [
            lambda: floor_run(session, url),
            lambda: agent_run(reused),
            fresh,
            lambda: agent_run(ev_run),
            lambda: agent_run(lc_run),
            lambda: provider_run(model),
        ],
        runs,
    )
    (_, ev_few, ev_many), (_, lc_few, lc_many) = observed["on_event"], observed["on_lifecycle_event"]
    f_few, f_many, a_few, a_many, p_few, p_many, e_few, e_many, l_few, l_many = _interleaved(
        [
            lambda: floor_deltas(session, url, FEW),
            lambda: floor_deltas(session, url, MANY),
            lambda: agent_deltas(few),
            lambda: agent_deltas(many),
            lambda: provider_deltas(few_model),
            lambda: provider_deltas(many_model),
            lambda: agent_deltas(ev_few),
            lambda: agent_deltas(ev_many),
            lambda: agent_deltas(lc_few),
            lambda: agent_deltas(lc_many),
        ],
        max(10, runs // 5),
    )
    floor_delta = (f_many - f_few) / (MANY - FEW)
    agent_delta = (a_many - a_few) / (MANY - FEW)
    provider_delta = (p_many - p_few) / (MANY - FEW)
    every_delta = (e_many - e_few) / (MANY - FEW)
    lifecycle_delta = (l_many - l_few) / (MANY - FEW)
    created = creation_us(model)

    print(f"floor: plain requests + line split + json.loads, {runs} runs, median")
    print(f"  Agent() (no plugins of its own)       {created:8.1f} us   (target <= 100 us)")
    print(f"  two-turn run, floor                   {floor_s * 1e3:8.2f} ms")
    print(
        f"  two-turn run, new Agent each time     {fresh_s * 1e3:8.2f} ms   "
        f"ratio {fresh_s / floor_s:.2f}   (target <= 1.25)"
    )
    print(
        f"  two-turn run, reused Agent            {reused_s * 1e3:8.2f} ms   "
        f"ratio {reused_s / floor_s:.2f}   (target <= 1.10)"
    )
    print(
        f"  two-turn run, provider alone          {prov_s * 1e3:8.2f} ms   "
        f"ratio {prov_s / floor_s:.2f}   (a reused Agent adds {(reused_s - prov_s) * 1e3:.2f} ms)"
    )
    print(f"  per streamed delta, floor             {floor_delta * 1e6:8.2f} us")
    print(
        f"  per streamed delta, Agent             {agent_delta * 1e6:8.2f} us   "
        f"ratio {agent_delta / floor_delta:.2f}   (target <= 1.10)"
    )
    print(
        f"  per streamed delta, provider alone    {provider_delta * 1e6:8.2f} us   "
        f"ratio {provider_delta / floor_delta:.2f}   (the Agent's own share: "
        f"{(agent_delta - provider_delta) * 1e6:.2f} us)"
    )
    print("with one observer plugin of the agent's own:")
    print(f"  two-turn run, reused, on_event        {ev_s * 1e3:8.2f} ms   ratio {ev_s / floor_s:.2f}")
    print(f"  two-turn run, reused, on_lifecycle_.. {lc_s * 1e3:8.2f} ms   ratio {lc_s / floor_s:.2f}")
    print(
        f"  per streamed delta, on_event          {every_delta * 1e6:8.2f} us   ratio {every_delta / floor_delta:.2f}"
    )
    print(
        f"  per streamed delta, on_lifecycle_..   {lifecycle_delta * 1e6:8.2f} us   "
        f"ratio {lifecycle_delta / floor_delta:.2f}   (an observer that skips message_update)"
    )


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        end_to_end.serve(_Handler)
    else:
        end_to_end.with_server(__file__, _measure, *int_args(__doc__, [("runs", 100)]))

"""Core overhead: a two-turn run (one tool call, then text) with the scripted model, no listeners.

Prints the median wall time of one run through the blocking loop core (``run_agent_loop``) and
through ``Agent.prompt`` (which adds the run thread and the state reducer), the events per run,
the time per event, and a floor measured in the same process: handing the same number of
pre-built events to a no-op sink. Targets (issue 2): median <= 1 ms, per-event overhead <= 20 us.

Then the cost of creating an Agent (issues 3 and 11): ``Agent()`` without plugins of its own (it
shares one prebuilt manager), and ``Agent(plugins=[p])`` (which builds its own manager), against a
floor measured in the same run: a bare pluggy manager with the hookspecs and the same
built-in/entry-point plugins registered, which any per-agent plugin manager pays. Asserts nothing.
``agent_cost.py`` measures the same against the raw-requests floor.

    python benchmarks/core_overhead.py [runs]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _cli import int_args

from agentcore import Agent, AgentTool, AgentToolResult  # noqa: E402
from agentcore.loop import AgentLoopConfig, run_agent_loop  # noqa: E402
from agentcore.testing import ScriptedModel, text, tool_call  # noqa: E402
from agentcore.types import AgentContext, TextContent, UserMessage  # noqa: E402

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}


def add(tool_call_id, args, signal, on_update):
    return AgentToolResult([TextContent(str(args["a"] + args["b"]))])


TOOL = AgentTool("add", "Add two integers", SCHEMA, add)


def responses():
    return [tool_call("add", {"a": 1, "b": 2}, id="c1"), text("It is 3.")]


def time_loop(runs: int):
    times, events = [], []
    for _ in range(runs):
        scripted = ScriptedModel(responses())
        sink = []
        start = time.perf_counter()
        run_agent_loop(
            [UserMessage("add 1 and 2")],
            AgentContext("", [], [TOOL]),
            AgentLoopConfig(scripted.model),
            sink.append,
            stream_fn=scripted.stream_fn,
        )
        times.append(time.perf_counter() - start)
        events = sink
    return times, events


def time_agent(runs: int):
    times = []
    for _ in range(runs):
        scripted = ScriptedModel(responses())
        agent = Agent(scripted.model, tools=[TOOL], stream_fn=scripted.stream_fn)
        start = time.perf_counter()
        agent.prompt("add 1 and 2")
        times.append(time.perf_counter() - start)
    return times


def time_floor(events, runs: int):
    """Deliver the same events to a no-op sink through a plain loop: the cost of 'just events'."""
    times = []
    sink = []
    for _ in range(runs):
        start = time.perf_counter()
        for event in events:
            sink.append(event)
        sink.clear()
        times.append(time.perf_counter() - start)
    return times


def time_dispatch(events, runs: int):
    """The Agent's own per-event work: reducer + (empty) listener loop, on the recorded events."""
    times = []
    for _ in range(runs):
        agent = Agent()
        start = time.perf_counter()
        for event in events:
            agent._process_event(event)
        times.append(time.perf_counter() - start)
    return times


def time_creation(runs: int):
    """Median ms of: floor (bare pluggy manager), Agent(), Agent(plugins=[p]) (its own manager)."""
    import pluggy

    from agentcore import _plugin_loading, hookimpl, hookspecs

    model = ScriptedModel(responses()).model
    records = [r for r in _plugin_loading.load_builtins() + _plugin_loading.load_entry_points() if r.obj is not None]

    def floor():
        pm = pluggy.PluginManager("agentcore")
        pm.add_hookspecs(hookspecs)
        for rec in records:
            pm.register(rec.obj, name=rec.name)

    class Plugin:
        @hookimpl
        def on_event(self, event, agent):
            pass

    plugin = Plugin()
    result = []
    for fn in (floor, lambda: Agent(model), lambda: Agent(model, plugins=[plugin])):
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        result.append(statistics.median(times) * 1e3)
    return result


def main() -> None:
    (runs,) = int_args(__doc__, [("runs", 2000)])
    time_loop(50), time_agent(50)  # warm-up: imports, jsonschema validators, thread machinery
    loop_times, events = time_loop(runs)
    agent_times = time_agent(runs)
    floor_times = time_floor(events, runs)
    dispatch_times = time_dispatch(events, runs)
    n = len(events)
    loop_ms = statistics.median(loop_times) * 1e3
    agent_ms = statistics.median(agent_times) * 1e3
    floor_us = statistics.median(floor_times) * 1e6
    per_event_loop = loop_ms * 1e3 / n
    per_event_agent = agent_ms * 1e3 / n
    print(f"two-turn run (1 tool call + text), scripted model, no listeners, {runs} runs, {n} events/run")
    print(f"  run_agent_loop median: {loop_ms:.3f} ms   (target <= 1 ms)")
    print(f"  Agent.prompt   median: {agent_ms:.3f} ms   (target <= 1 ms; adds run thread + reducer)")
    print(f"  per event (loop):  {per_event_loop:.1f} us   (target <= 20 us)")
    print(f"  per event (agent): {per_event_agent:.1f} us   (target <= 20 us)")
    dispatch_us = statistics.median(dispatch_times) * 1e6 / n
    print(f"  Agent event dispatch (reducer + listener loop): {dispatch_us:.2f} us/event (target <= 20 us)")
    print(
        f"  floor: same {n} events through a plain loop: {floor_us:.2f} us per run "
        f"({floor_us / n * 1e3:.0f} ns/event); loop run / floor = {loop_ms * 1e3 / floor_us:.0f}x"
    )
    print(
        "  the per-event figure includes everything a run does (model stream, tool thread, validation),"
        " not only event delivery"
    )
    floor_ms, agent_ms, own_ms = time_creation(max(50, runs // 4))
    print("creating an Agent (built-ins + entry-point plugins):")
    print(f"  floor: bare pluggy manager, hookspecs + the same plugins: {floor_ms:.3f} ms")
    print(f"  Agent() (shares the prebuilt manager):       {agent_ms * 1e3:.1f} us  ({agent_ms / floor_ms:.3f}x floor)")
    print(f"  Agent(plugins=[p]) (its own manager):        {own_ms:.3f} ms  ({own_ms / floor_ms:.1f}x floor)")


if __name__ == "__main__":
    main()

"""Cost of the automatic compaction check on a long transcript (issue 6, item 6).

Before every model request of a run the agent asks ``Compactor.needs_compaction()`` whether the
context is over ``context_window - reserve_tokens``. This script grows a 2,000-message transcript
(user prompt, assistant text + tool call, tool result, assistant answer, repeated; a compaction
summary first, as after a compaction) by one message per "turn" and times that check:

  * before: the previous implementation, ``live_context_tokens(list(messages))`` on every turn
    (a copy of the list, a scan of every message for the newest summary, then estimates after
    the newest usage; with no usage reported, an estimate of every message);
  * after: ``Compactor.needs_compaction()`` (the incremental ``ContextTokenCounter``);
  * floor: ``estimate_tokens`` of the one message added per turn, the least any exact check does.

Two cases: providers that report usage (the common case) and providers that report none (every
message must be estimated). Prints microseconds per check and the ratios.

    python benchmarks/compaction_check.py [--messages 2000] [--turns 200]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any, Callable, List

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentcore.agent import Agent  # noqa: E402
from agentcore.session.compaction_tokens import CompactionSettings, estimate_tokens, live_context_tokens  # noqa: E402
from agentcore.types import (  # noqa: E402
    AssistantMessage,
    CompactionSummaryMessage,
    Model,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)

WORDS = "session tree branch compaction summary model token context message tool result python file".split()


def prose(rng: random.Random, chars: int) -> str:
    out, size = [], 0
    while size < chars:
        out.append(rng.choice(WORDS))
        size += len(out[-1]) + 1
    return " ".join(out)


def message(rng: random.Random, n: int, with_usage: bool) -> Any:
    step = n % 4
    usage = Usage(100_000 + n, 300, 0, 0, 100_300 + n) if with_usage else Usage()
    if step == 0:
        return UserMessage([TextContent(prose(rng, 200))], timestamp=10_000 + n)
    if step == 1:
        return AssistantMessage(
            [TextContent(prose(rng, 300)), ToolCall(f"c{n}", "read", {"path": f"src/m{n}.py"})],
            api="scripted",
            provider="scripted",
            model="m",
            usage=usage,
            stop_reason="toolUse",
            timestamp=10_000 + n,
        )
    if step == 2:
        return ToolResultMessage(f"c{n - 1}", "read", [TextContent(prose(rng, 1500))], timestamp=10_000 + n)
    return AssistantMessage(
        [TextContent(prose(rng, 300))],
        api="scripted",
        provider="scripted",
        model="m",
        usage=usage,
        stop_reason="stop",
        timestamp=10_000 + n,
    )


def per_turn(messages: List[Any], extra: List[Any], check: Callable[[List[Any]], Any]) -> float:
    """Microseconds per check while ``extra`` is appended one message per turn."""
    transcript = list(messages)
    started = time.perf_counter()
    for item in extra:
        transcript.append(item)
        check(transcript)
    return (time.perf_counter() - started) / len(extra) * 1e6


def case(count: int, turns: int, with_usage: bool) -> None:
    rng = random.Random(3)
    messages: List[Any] = [CompactionSummaryMessage("## Goal\n" + prose(rng, 2000), 150_000, timestamp=9_000)]
    messages += [message(rng, n, with_usage) for n in range(count - 1)]
    extra = [message(rng, count + n, with_usage) for n in range(turns)]
    model = Model(id="m", api="scripted", provider="scripted", context_window=10_000_000, max_tokens=8192)
    agent = Agent(model, messages=messages, compaction=CompactionSettings())
    compactor = agent.compactor
    best = {"floor": float("inf"), "before": float("inf"), "after": float("inf")}
    for _ in range(3):
        best["floor"] = min(best["floor"], per_turn(messages, extra, lambda t: estimate_tokens(t[-1])))
        best["before"] = min(best["before"], per_turn(messages, extra, lambda t: live_context_tokens(list(t)).tokens))
        compactor._counter.reset()
        compactor.needs_compaction(agent.state.messages)  # the first check of a run counts everything
        agent.state.messages = messages
        best["after"] = min(
            best["after"], per_turn(agent.state.messages, extra, lambda t: compactor.needs_compaction(t))
        )
    check_before = live_context_tokens(list(messages) + extra).tokens
    check_after = compactor.context_tokens(list(messages) + extra)
    label = "usage reported" if with_usage else "no usage reported"
    print(
        f"{count} messages, {label}: floor {best['floor']:.2f} us, before {best['before']:.1f} us "
        f"({best['before'] / best['floor']:.0f}x floor), after {best['after']:.2f} us "
        f"({best['after'] / best['floor']:.1f}x floor); before/after {best['before'] / best['after']:.0f}x; "
        f"same figure: {check_before == check_after}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args()
    case(args.messages, args.turns, with_usage=True)
    case(args.messages, args.turns, with_usage=False)


if __name__ == "__main__":
    main()

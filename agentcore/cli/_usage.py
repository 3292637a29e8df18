"""Token usage and cost for the CLI: ``run -u``, chat's ``/session`` and ``sessions show``.

Usage is summed per model (``provider/id``) from assistant messages: uncached input, output,
cache reads and writes, and the cost the provider computed from the model's prices (0 for a
model without prices, such as a local server's). Tool results that carry usage (a sub-agent's)
are shown under ``tools (sub-agents)`` but left out of the total: the sub-agent's session records
them, and the session's own totals (``get_session_stats``, the ``sessions show`` header,
``agentcore logs``) do not count tool-result usage (spec session §10), so the total agrees with
them. Compaction and branch summaries count under ``summaries``. Every assistant message counts
as a response, a failed one with the zero usage it carries. A failed compaction's summary
requests count too (from its ``compaction_end`` event's ``usage``): the provider billed them, but
nothing was stored, so ``sessions show`` (which counts entries) does not see them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple

__all__ = ["ModelUsage", "UsageTally", "count_usage", "usage_lines", "usage_table", "SUB_AGENTS"]

#: the row of tool results' usage (sub-agents), shown but not in the total
SUB_AGENTS = "tools (sub-agents)"


class _WireUsage(NamedTuple):
    input: Any
    output: Any
    cache_read: Any
    cache_write: Any
    cost: Any


@dataclass
class ModelUsage:
    """The sums of one model (or ``tools``, ``summaries``, ``total``)."""

    key: str
    requests: int = 0
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost: float = 0.0

    def add(self, usage: Any) -> None:
        """Add a :class:`~agentcore.types.Usage`, or its wire dict (``cacheRead``, ``cost.total``:
        how compaction and branch-summary entries store theirs)."""
        if isinstance(usage, Mapping):
            cost = usage.get("cost")
            usage = _WireUsage(
                usage.get("input"),
                usage.get("output"),
                usage.get("cacheRead"),
                usage.get("cacheWrite"),
                cost.get("total") if isinstance(cost, Mapping) else 0,
            )
        self.requests += 1
        self.input += _int(getattr(usage, "input", 0))
        self.output += _int(getattr(usage, "output", 0))
        self.cache_read += _int(getattr(usage, "cache_read", 0))
        self.cache_write += _int(getattr(usage, "cache_write", 0))
        cost = getattr(usage, "cost", None)
        self.cost += _float(cost if isinstance(cost, (int, float)) else getattr(cost, "total", 0))

    def describe(self) -> str:
        """``"12 input, 5 output, 0 cache read, 0 cache write, $0.0001"``."""
        return (
            f"{self.input:,} input, {self.output:,} output, {self.cache_read:,} cache read, "
            f"{self.cache_write:,} cache write, ${self.cost:.4f}"
        )


class UsageTally:
    """Per-model sums, in the order models first appear."""

    def __init__(self) -> None:
        self.models: Dict[str, ModelUsage] = {}

    def add_messages(self, messages: Iterable[Any]) -> UsageTally:
        """Count the usage of ``messages`` (any roles; only assistant and tool-result usage counts)."""
        for message in messages or ():
            role = getattr(message, "role", None)
            usage = getattr(message, "usage", None)
            if usage is None or role not in ("assistant", "toolResult"):
                continue
            self.add(f"{message.provider}/{message.model}" if role == "assistant" else SUB_AGENTS, usage)
        return self

    def add_event(self, event: Any) -> None:
        """Count an agent event: a ``message_end`` as :meth:`add_messages`, a ``compaction_end``'s
        summary requests (its ``usage``, a failed or aborted compaction's too) under
        ``summaries``, as ``sessions show`` counts the compaction entry; any other event counts
        nothing. An event without ``usage`` (made elsewhere) counts its ``result.usage``."""
        kind = getattr(event, "type", None)
        if kind == "message_end":
            self.add_messages((event.message,))
        elif kind == "compaction_end":
            usage = getattr(event, "usage", None)
            if usage is None:
                usage = getattr(getattr(event, "result", None), "usage", None)
            if usage:
                self.add("summaries", usage)

    def add(self, key: str, usage: Any) -> None:
        """Count ``usage`` (a Usage or its wire dict) under ``key``."""
        row = self.models.get(key)
        if row is None:
            row = self.models[key] = ModelUsage(key)
        row.add(usage)

    def add_entries(self, entries: Iterable[Any]) -> UsageTally:
        """Count session entries: messages as :meth:`add_messages`, compaction and branch-summary
        usage under ``summaries``."""
        for entry in entries:
            kind = getattr(entry, "type", None)
            if kind == "message":
                self.add_messages((entry.message,))
            elif kind in ("compaction", "branch_summary") and getattr(entry, "usage", None):
                self.add("summaries", entry.usage)
        return self

    def total(self) -> ModelUsage:
        """The sum of every row but :data:`SUB_AGENTS` (see the module docstring)."""
        total = ModelUsage("total")
        for row in self.models.values():
            if row.key == SUB_AGENTS:
                continue
            for name in ("requests", "input", "output", "cache_read", "cache_write", "cost"):
                setattr(total, name, getattr(total, name) + getattr(row, name))
        return total


def count_usage(agent: Any) -> UsageTally:
    """A tally kept current from ``agent``'s events (:meth:`UsageTally.add_event`): every message
    of every run after this call (compaction retries and ``ask`` retries included) and the summary
    requests of its compactions, failed ones included."""
    tally = UsageTally()
    agent.subscribe(tally.add_event)
    return tally


def usage_lines(tally: UsageTally) -> List[str]:
    """One ``"Token usage: ..."`` line per model (as ``llm -u`` prints), plus a total for several."""
    if not tally.models:
        return ["Token usage: none reported"]
    lines = [f"Token usage ({row.key}): {row.describe()}" for row in tally.models.values()]
    if len(tally.models) > 1:
        lines.append(f"Token usage (total): {tally.total().describe()}")
    return lines


def usage_table(tally: UsageTally) -> str:
    """The per-model table of ``sessions show`` (a total row when there are several models)."""
    from ._info import format_table

    rows = list(tally.models.values())
    if len(rows) > 1:
        rows.append(tally.total())
    cells = [
        [
            r.key,
            str(r.requests),
            f"{r.input:,}",
            f"{r.output:,}",
            f"{r.cache_read:,}",
            f"{r.cache_write:,}",
            f"${r.cost:.4f}",
        ]
        for r in rows
    ]
    return format_table(cells, ["MODEL", "REQUESTS", "INPUT", "OUTPUT", "CACHE READ", "CACHE WRITE", "COST"])


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _float(value: Any) -> float:
    """A cost as a float; 0 for what is not a number, an infinity for an integer past a float's
    range (a 400-digit cost in a file: ``float()`` raised OverflowError and failed the export)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return 0.0
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf

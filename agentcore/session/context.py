"""What a session contributes to the next model request (spec session.md §6) and its statistics (§10).

:func:`build_context` walks the root→leaf path once:

1. State over the WHOLE path, later wins: ``thinking_level_change`` sets the thinking level (default
   ``"off"``); ``model_change`` and every assistant message set the model; ``active_tools_change`` sets
   the tool names (default None = "all").
2. The newest ``compaction`` on the path cuts history: the context is the compaction's summary, then
   the entries from its ``first_kept_entry_id`` (if found on the path before it; else none), then
   everything after the compaction. Older compactions inside the kept range contribute nothing.
3. Caller ``entry_transforms`` map the entry list; then entries are projected to messages:
   messages as they are (assistant messages with stop reason ``deferred`` skipped), ``custom_message``
   as :class:`~agentcore.types.CustomMessage`, compactions as
   :class:`~agentcore.types.CompactionSummaryMessage` (plus any ``retainedTail``), non-empty branch
   summaries as :class:`~agentcore.types.BranchSummaryMessage`, ``custom`` entries through
   ``projectors[custom_type]`` when given; everything else contributes nothing.
4. Tool results whose call has no assistant message in the list are dropped, and kept results are
   moved right after the assistant message that made the call (original relative order); a call
   id reused by a later turn keeps each result with the nearest call before it.

Only the path and the entries from the cut onward are decoded, so a long compacted session builds
its context in time proportional to what the model will see.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ..types import AssistantMessage, BranchSummaryMessage, CompactionSummaryMessage, CustomMessage, ToolCall
from . import process_state
from .entries import (
    ActiveToolsChangeEntry,
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionEntry,
    ThinkingLevelChangeEntry,
)

if TYPE_CHECKING:  # pragma: no cover
    from .storage import SessionStorage

__all__ = [
    "ModelRef",
    "SessionContext",
    "SessionStats",
    "UsageTotals",
    "usage_of_entry",
    "build_context",
    "get_session_stats",
]

EntryTransform = Callable[[List[SessionEntry]], List[SessionEntry]]
Projector = Callable[[SessionEntry, int, List[SessionEntry]], Any]


@dataclass(frozen=True)
class ModelRef:
    """The model a session last used: ``provider`` and ``model_id`` (e.g. ``"anthropic"``, ``"claude-…"``)."""

    provider: str
    model_id: str

    @property
    def key(self) -> str:
        """``"provider/model_id"``, the form ``get_model`` accepts."""
        return f"{self.provider}/{self.model_id}"

    def to_dict(self) -> Dict[str, str]:
        return {"provider": self.provider, "modelId": self.model_id}


@dataclass
class SessionContext:
    """Messages and settings to resume a conversation from (the result of ``build_context``)."""

    messages: List[Any] = field(default_factory=list)
    thinking_level: str = "off"
    model: Optional[ModelRef] = None
    active_tool_names: Optional[List[str]] = None


@dataclass(frozen=True)
class SessionStats:
    """Whole-session totals (all branches): message entries, tokens and cost in USD."""

    message_count: int = 0
    cached_tokens: int = 0
    uncached_tokens: int = 0
    total_tokens: int = 0
    cost_total: float = 0.0


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class UsageTotals:
    """Running token/cost sums. ``add`` ignores usage whose token counts or ``cost.total`` are missing."""

    __slots__ = ("cached", "uncached", "total", "cost")

    def __init__(self) -> None:
        self.cached = 0
        self.uncached = 0
        self.total = 0
        self.cost: float = 0

    def add(self, usage: Optional[Mapping[str, Any]]) -> None:
        if not isinstance(usage, Mapping):
            return
        cost = usage.get("cost")
        numbers: Tuple[Any, ...] = (
            usage.get("input"),
            usage.get("output"),
            usage.get("cacheRead"),
            usage.get("cacheWrite"),
            cost.get("total") if isinstance(cost, Mapping) else None,
        )
        if not all(_is_number(n) for n in numbers):
            return
        inp, out, read, write, total_cost = numbers
        self.cached += read
        self.uncached += inp + write
        self.total += inp + out + read + write  # the stored totalTokens is ignored (spec §10)
        self.cost += total_cost


def usage_of_entry(entry: Optional[SessionEntry]) -> Optional[Mapping[str, Any]]:
    """The usage counted by statistics: an assistant message's, or a compaction/branch summary's."""
    if isinstance(entry, MessageEntry):
        message = entry.message
        if getattr(message, "role", None) != "assistant":
            return None
        usage = message.to_dict().get("usage")
        return usage if isinstance(usage, Mapping) else None
    if isinstance(entry, (CompactionEntry, BranchSummaryEntry)):
        return entry.usage
    return None


def get_session_stats(storage: SessionStorage) -> SessionStats:
    """Statistics over every entry of ``storage`` (spec §10, H-A rules)."""
    totals = storage.usage_totals()
    return SessionStats(storage.message_count, totals.cached, totals.uncached, totals.total, totals.cost)


# --------------------------------------------------------------------------- build_context

_UNSET: Any = object()


def _resolve_state(storage: SessionStorage, path: Sequence[str]) -> Tuple[str, Optional[ModelRef], Optional[List[str]]]:
    # a kind of state no entry of the session sets stays at its default: stop looking for it
    thinking: Any = _UNSET if storage.count_of("thinking_level_change") else "off"
    model: Any = _UNSET
    tools: Any = _UNSET if storage.count_of("active_tools_change") else None
    type_of = storage.type_of
    for entry_id in reversed(path):
        etype = type_of(entry_id)
        if etype == "thinking_level_change" and thinking is _UNSET:
            entry = storage.get_entry(entry_id)
            assert isinstance(entry, ThinkingLevelChangeEntry)
            thinking = str(entry.thinking_level)
        elif etype == "model_change" and model is _UNSET:
            entry = storage.get_entry(entry_id)
            assert isinstance(entry, ModelChangeEntry)
            model = ModelRef(entry.provider, entry.model_id)
        elif etype == "message" and model is _UNSET and storage.role_of(entry_id) == "assistant":
            message = storage.get_entry(entry_id).message  # type: ignore[union-attr]
            model = ModelRef(message.provider, message.model)
        elif etype == "active_tools_change" and tools is _UNSET:
            entry = storage.get_entry(entry_id)
            assert isinstance(entry, ActiveToolsChangeEntry)
            names = entry.active_tool_names
            if not isinstance(names, list):  # another writer's odd value (a number...): says nothing
                continue
            tools = [name for name in names if isinstance(name, str)]
        if thinking is not _UNSET and model is not _UNSET and tools is not _UNSET:
            break
    return (
        "off" if thinking is _UNSET else thinking,
        None if model is _UNSET else model,
        None if tools is _UNSET else tools,
    )


def _context_ids(storage: SessionStorage, path: List[str]) -> Tuple[List[str], Optional[str]]:
    if not storage.count_of("compaction"):
        return path, None
    type_of = storage.type_of
    for ci in range(len(path) - 1, -1, -1):
        if type_of(path[ci]) == "compaction":
            break
    else:
        return path, None
    compaction = storage.get_entry(path[ci])
    assert isinstance(compaction, CompactionEntry)
    kept: List[str] = []
    first = compaction.first_kept_entry_id
    if compaction.retained_tail is None and first:
        try:
            kept = path[path.index(first, 0, ci) : ci]
        except ValueError:  # not on this path: keep nothing (graceful fallback)
            kept = []
    return [path[ci]] + kept + path[ci + 1 :], compaction.id


def _project(
    entries: List[SessionEntry], compaction_id: Optional[str], projectors: Mapping[str, Projector]
) -> List[Any]:
    out: List[Any] = []
    for index, entry in enumerate(entries):
        if isinstance(entry, MessageEntry):
            message = entry.message
            if getattr(message, "role", None) == "assistant" and message.stop_reason == "deferred":
                continue
            out.append(message)
        elif isinstance(entry, CustomMessageEntry):
            data = {
                "role": "custom",
                "customType": entry.custom_type,
                "content": entry.content,
                "display": entry.display,
                "timestamp": entry.timestamp_ms,
            }
            if entry.details is not None:
                data["details"] = entry.details
            out.append(CustomMessage.from_dict(data))
        elif isinstance(entry, CompactionEntry):
            if compaction_id is not None and entry.id != compaction_id:
                continue  # an older compaction inside the kept range contributes nothing
            out.append(CompactionSummaryMessage(entry.summary, entry.tokens_before, entry.timestamp_ms))
            out.extend(entry.retained_tail or ())
        elif isinstance(entry, BranchSummaryEntry):
            if entry.summary:
                out.append(BranchSummaryMessage(entry.summary, entry.from_id, entry.timestamp_ms))
        elif isinstance(entry, CustomEntry):
            projector = projectors.get(entry.custom_type)
            if projector is not None:
                produced = projector(entry, index, entries)
                if produced is None:
                    continue
                if isinstance(produced, (list, tuple)):
                    out.extend(produced)
                else:
                    out.append(produced)
    return out


def _call_key(result: Any) -> Any:
    """A tool result's ``tool_call_id`` as a dict key (None for an unhashable one: no owner)."""
    key = getattr(result, "tool_call_id", None)
    return key if isinstance(key, Hashable) else None


def _calls_of(message: Any) -> List[Any]:
    """The tool-call ids an assistant message made (unhashable ones, another writer's lists, own
    nothing)."""
    if type(message) is AssistantMessage:
        calls = [block for block in message.content if isinstance(block, ToolCall)]
    else:
        calls = list(getattr(message, "tool_calls", ()))
    return [call.id for call in calls if isinstance(call.id, Hashable)]


def _result_owners(messages: List[Any], roles: List[Any]) -> Dict[int, Optional[int]]:
    """The index of each tool result's owner (None: no assistant made its call).

    The owner is the nearest assistant message before the result that made its call, so a call id
    used again in a later turn (a local server's ``call_0`` in every response) keeps each result
    with its own turn; a result with no such assistant before it goes to the last one that made
    the call."""
    last_owner: Dict[Any, int] = {}
    for index, role in enumerate(roles):
        if role == "assistant":
            for call_id in _calls_of(messages[index]):
                last_owner[call_id] = index
    owners: Dict[int, Optional[int]] = {}
    so_far: Dict[Any, int] = {}
    for index, role in enumerate(roles):
        if role == "assistant":
            for call_id in _calls_of(messages[index]):
                so_far[call_id] = index
        elif role == "toolResult":
            key = _call_key(messages[index])
            owners[index] = so_far.get(key, last_owner.get(key))
    return owners


def repair_tool_results(messages: List[Any]) -> List[Any]:
    """Drop tool results without an owning assistant call; put kept ones right after their owner.

    A result's owner is the nearest assistant message before it that made its call (the last one
    in the list that did, when none precedes it); a call id several turns reuse thus keeps each
    result in its own turn. When every result already sits right after its owner (how sessions
    are written) the list is returned as is.
    """
    roles = [getattr(message, "role", None) for message in messages]
    if "toolResult" not in roles:
        return messages
    owners = _result_owners(messages, roles)
    last = -1
    for index, role in enumerate(roles):
        if role != "toolResult":
            last = index
        elif owners[index] != last:
            break
    else:
        return messages
    results: Dict[int, List[Any]] = defaultdict(list)
    for index, owner in owners.items():
        if owner is not None:
            results[owner].append(messages[index])
    repaired: List[Any] = []
    for index, role in enumerate(roles):
        if role == "toolResult":
            continue
        repaired.append(messages[index])
        repaired.extend(results.get(index, ()))
    return repaired


def build_context(
    storage: SessionStorage,
    leaf_id: Any = _UNSET,
    *,
    entry_transforms: Iterable[EntryTransform] = (),
    projectors: Optional[Mapping[str, Projector]] = None,
) -> SessionContext:
    """The context at ``leaf_id`` (default: the storage's current leaf; None: empty).

    Raises ``not_found`` for an unknown leaf and ``invalid_session`` for a broken parent chain.
    """
    leaf = storage.leaf_id if leaf_id is _UNSET else leaf_id
    if leaf is None:
        return SessionContext()
    with process_state.gc_paused():  # builds many long-lived objects (see process_state.gc_paused)
        path = storage.path_to_root(leaf)
        path.reverse()
        thinking, model, tools = _resolve_state(storage, path)
        ids, compaction_id = _context_ids(storage, path)
        entries = storage.get_entries(ids)
        for transform in entry_transforms:
            entries = list(transform(entries))
        messages = _project(entries, compaction_id, projectors or {})
        return SessionContext(repair_tool_results(messages), thinking, model, tools)

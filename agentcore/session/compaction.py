"""Compaction: replace old history with a summary so a session fits the context window (spec §7).

Three steps, each usable on its own:

1. :func:`prepare_compaction` (pure) looks at a root→leaf path of session entries and decides what
   to summarise: everything from the previous compaction's first kept entry (so messages kept by
   one compaction are summarised by the next one; spec §7.4 fix of the reference's boundary bug;
   a compaction that kept its messages inside its entry, a ``retained_tail``, has them summarised
   first) up to a cut point chosen by :func:`find_cut_point` that keeps about
   ``keep_recent_tokens`` of recent history and never separates a tool call from its results
   (nor a result from its call when other entries were written between them). When the cut falls inside a
   turn, the start of that turn is summarised separately (a *split turn*).
2. :func:`compact` asks a model for the summary (an update of the previous summary when there is
   one) and appends the ``<read-files>``/``<modified-files>`` lists gathered from ``read``/
   ``write``/``edit`` tool calls across compactions.
3. The caller stores it with ``Session.append_compaction``; ``build_context`` then starts with the
   summary (see :class:`agentcore.session.compactor.Compactor` for the Agent integration).

A plugin's ``before_compaction`` hook sees each preparation first and may cancel the compaction
or supply the whole result (:func:`run_before_compaction`, :class:`CompactionDecision`); a supplied
result is stored with ``fromHook`` and makes no model call.

Failures raise :class:`CompactionError` with a ``code``: ``aborted``, ``cancelled``,
``summarization_failed``, ``invalid_session``, ``nothing_to_compact``, ``already_compacted`` or
``storage`` (the session could not be written: raised by the Compactor, the cause chained).
Its ``usage`` sums the summary requests that were answered before the failure (the refused
answer included): the provider billed them although nothing is stored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Dict, Hashable, List, Optional, Sequence, Set, Tuple

from .._errors import PicklableError
from .._safe import describe_exception, exception_message
from ..types import (
    AgentContext,
    AssistantMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    TextContent,
    ToolCall,
    Usage,
    UserMessage,
    add_usage,
)
from .compaction_prompts import (
    NO_PRIOR_HISTORY,
    SPLIT_TURN_SEPARATOR,
    SUMMARIZER_SYSTEM_PROMPT,
    SUMMARY_INSTRUCTIONS,
    TURN_PREFIX_INSTRUCTIONS,
    UPDATE_SUMMARY_INSTRUCTIONS,
    FileOps,
    build_summary_prompt,
    compute_file_lists,
    file_ops_from_messages,
    format_file_lists,
    serialize_conversation,
)
from .compaction_tokens import CompactionSettings, estimate_tokens, live_context_tokens
from .entries import BranchSummaryEntry, CompactionEntry, CustomMessageEntry, MessageEntry, SessionEntry

__all__ = [
    "CompactionError",
    "CutPoint",
    "CompactionPreparation",
    "CompactionResult",
    "find_cut_point",
    "find_turn_start_index",
    "prepare_compaction",
    "path_context_messages",
    "entry_to_message",
    "generate_summary",
    "compact",
    "summarize_with_model",
    "hook_summary",
    "CompactionDecision",
    "run_before_compaction",
    "kept_message_count",
]

StreamFn = Callable[..., Any]

_CUT_ROLES = frozenset(
    {"user", "developer", "assistant", "bashExecution", "custom", "branchSummary", "compactionSummary"}
)
_TURN_START_ROLES = frozenset({"user", "developer", "bashExecution"})


class CompactionError(PicklableError, Exception):
    """Compaction could not be done. ``code``: ``aborted``, ``cancelled`` (by a
    ``before_compaction`` hook), ``summarization_failed``, ``invalid_session``,
    ``nothing_to_compact``, ``already_compacted``, ``storage`` (the session could not be written).

    ``usage`` is the summed :class:`~agentcore.types.Usage` of the summary requests that got a
    response before the failure, the refused one included (a summary cut off at ``max_tokens``,
    empty, aborted or failed still reports what the provider billed); None when no response came
    back (no request was sent, the stream function raised, a hook failed). Nothing of a failed
    compaction is stored, so this (or the ``compaction_end`` event carrying it) is the only
    record of that usage."""

    def __init__(self, code: str, message: str, *, usage: Optional[Usage] = None) -> None:
        super().__init__(message)
        self.code = code
        self.usage = usage

    def __repr__(self) -> str:
        return f"CompactionError(code={self.code!r}, message={str(self)!r})"


# --------------------------------------------------------------------------- entries -> messages


def _role(entry: SessionEntry) -> Optional[str]:
    if isinstance(entry, MessageEntry):
        return getattr(entry.message, "role", None)
    return None


def entry_to_message(entry: SessionEntry, compactions: bool = False) -> Optional[Any]:
    """The message an entry contributes to a summary: a message entry's message, a
    ``custom_message`` as a custom message, a non-empty branch summary as a branch-summary
    message, with ``compactions`` a compaction as its summary message; None for everything else
    (compactions by default, settings, labels, custom state)."""
    if compactions and isinstance(entry, CompactionEntry):
        return CompactionSummaryMessage(entry.summary, entry.tokens_before, entry.timestamp_ms)
    if isinstance(entry, MessageEntry):
        return entry.message
    if isinstance(entry, CustomMessageEntry):
        data = {
            "role": "custom",
            "customType": entry.custom_type,
            "content": entry.content,
            "display": entry.display,
            "timestamp": entry.timestamp_ms,
        }
        if entry.details is not None:
            data["details"] = entry.details
        return CustomMessage.from_dict(data)
    if isinstance(entry, BranchSummaryEntry) and entry.summary:
        return BranchSummaryMessage(entry.summary, entry.from_id, entry.timestamp_ms)
    return None


def _messages_of(entries: Sequence[SessionEntry]) -> List[Any]:
    return [m for m in (entry_to_message(e) for e in entries) if m is not None]


def path_context_messages(path: Sequence[SessionEntry]) -> List[Any]:
    """The messages ``build_context`` gives for a root→leaf ``path`` of entries (spec §6)."""
    from .context import _project, repair_tool_results

    entries = list(path)
    for ci in range(len(entries) - 1, -1, -1):
        if isinstance(entries[ci], CompactionEntry):
            compaction = entries[ci]
            kept: List[SessionEntry] = []
            first = compaction.first_kept_entry_id  # type: ignore[attr-defined]
            if compaction.retained_tail is None and first:  # type: ignore[attr-defined]
                ids = [e.id for e in entries[:ci]]
                if first in ids:
                    kept = entries[ids.index(first) : ci]
            return repair_tool_results(_project([compaction] + kept + entries[ci + 1 :], compaction.id, {}))
    return repair_tool_results(_project(entries, None, {}))


def kept_message_count(path: Sequence[SessionEntry], compaction_index: int) -> int:
    """How many messages ``build_context`` places right after the summary of the compaction at
    ``path[compaction_index]``: the messages that compaction kept, which predate it. Together
    with the summary's position this orders usage by entry instead of by timestamp."""
    return len(path_context_messages(path[: compaction_index + 1])) - 1


# --------------------------------------------------------------------------- cut point


@dataclass(frozen=True)
class CutPoint:
    """Where history is cut: the first kept entry, and for a split turn where that turn starts."""

    first_kept_entry_index: int
    turn_start_index: int = -1
    is_split_turn: bool = False


def _is_valid_cut(entry: SessionEntry) -> bool:
    if isinstance(entry, MessageEntry):
        return _role(entry) in _CUT_ROLES
    return isinstance(entry, (BranchSummaryEntry, CustomMessageEntry))


def _inside_tool_batches(entries: Sequence[SessionEntry], start_index: int, end_index: int) -> Set[int]:
    """Indices in ``entries[start_index:end_index]`` after an assistant's tool call and up to its
    last result: a cut there would keep a result without its call (``build_context`` drops such a
    result, and it is not summarised either). Entries written between a call and its results (a
    custom message a tool sent while the batch ran, a later result of a parallel batch) are
    inside too."""
    owners: Dict[Any, int] = {}
    inside: Set[int] = set()
    for index in range(start_index, end_index):
        entry = entries[index]
        if not isinstance(entry, MessageEntry):
            continue
        role = _role(entry)
        if role == "assistant":
            for block in getattr(entry.message, "content", None) or ():
                call_id = getattr(block, "id", None) if isinstance(block, ToolCall) else None
                if isinstance(call_id, Hashable):
                    owners[call_id] = index
        elif role == "toolResult":
            call_id = getattr(entry.message, "tool_call_id", None)
            owner = owners.get(call_id) if isinstance(call_id, Hashable) else None
            if owner is not None:
                inside.update(range(owner + 1, index + 1))
    return inside


def find_turn_start_index(
    entries: Sequence[SessionEntry], entry_index: int, start_index: int, *, skip: Collection[int] = ()
) -> int:
    """The nearest index ≤ ``entry_index`` and ≥ ``start_index`` that starts a turn (a user,
    developer or shell-run message, a branch summary or a custom message entry), else -1.
    Indices in ``skip`` (those inside a tool batch) start no turn."""
    for index in range(entry_index, start_index - 1, -1):
        if index in skip:
            continue
        entry = entries[index]
        if isinstance(entry, (BranchSummaryEntry, CustomMessageEntry)):
            return index
        if _role(entry) in _TURN_START_ROLES:
            return index
    return -1


def find_cut_point(
    entries: Sequence[SessionEntry],
    start_index: int,
    end_index: int,
    keep_recent_tokens: int,
    *,
    overflowing: bool = False,
) -> CutPoint:
    """Choose the first entry to keep in ``entries[start_index:end_index]`` (spec §7.4 step 4).

    Walking back from the newest message, the cut is the first valid cut position at or after the
    message where the kept messages reach ``keep_recent_tokens``. Tool results are never valid cut
    positions, nor is anything between a tool call and its last result (a custom message written
    while the batch ran), so a call and its results stay on the same side; a split turn's start is
    never inside a batch either. When only tool results follow that message (the newest results alone reach the budget, as after a turn that read big
    files), the cut is the first valid position, keeping everything (the reference's rule: a
    compaction on the threshold then has nothing to do) unless ``overflowing`` (the provider
    said the context overflowed, and keeping everything leaves the retry nothing to gain): then
    it is the newest valid position before that message, the call that made the results.
    Settings and other non-message entries right before the cut are kept with it.
    """
    inside = _inside_tool_batches(entries, start_index, end_index)
    cuts = [i for i in range(start_index, end_index) if _is_valid_cut(entries[i]) and i not in inside]
    if not cuts:
        return CutPoint(start_index, -1, False)
    cut = cuts[0]
    total = 0
    for index in range(end_index - 1, start_index - 1, -1):
        entry = entries[index]
        if not isinstance(entry, MessageEntry):
            continue
        total += estimate_tokens(entry.message)
        if total >= keep_recent_tokens:
            fallback = cuts[-1] if overflowing else cuts[0]  # only tool results follow (see above)
            cut = next((c for c in cuts if c >= index), fallback)
            break
    while cut > start_index:
        previous = entries[cut - 1]
        if isinstance(previous, (CompactionEntry, MessageEntry)):
            break
        cut -= 1
    if _role(entries[cut]) in ("user", "developer"):
        return CutPoint(cut, -1, False)
    turn_start = find_turn_start_index(entries, cut, start_index, skip=inside)
    return CutPoint(cut, turn_start, turn_start != -1)


# --------------------------------------------------------------------------- preparation


@dataclass
class CompactionPreparation:
    """What :func:`compact` summarises and keeps (result of :func:`prepare_compaction`)."""

    first_kept_entry_id: str
    messages_to_summarize: List[Any]
    turn_prefix_messages: List[Any]
    is_split_turn: bool
    tokens_before: int
    previous_summary: Optional[str]
    file_ops: FileOps
    settings: CompactionSettings
    first_kept_entry_index: int = 0

    @property
    def empty(self) -> bool:
        """True when nothing lies before the cut point (the compaction would summarise nothing)."""
        return not self.messages_to_summarize and not self.turn_prefix_messages


def prepare_compaction(
    path_entries: Sequence[SessionEntry],
    settings: Optional[CompactionSettings] = None,
    *,
    overflowing: bool = False,
) -> Optional[CompactionPreparation]:
    """Decide what a compaction of the root→leaf ``path_entries`` summarises (spec §7.4;
    ``overflowing``: for a context-overflow recovery, see :func:`find_cut_point`).

    The history starts at the previous compaction's first kept entry; when that compaction kept
    its messages inside its entry instead (``retained_tail``, which ``build_context`` shows after
    its summary), those messages open ``messages_to_summarize`` and the entries after the
    compaction follow. Returns None for an empty path or a path ending in a compaction. When
    everything fits in ``keep_recent_tokens`` (and no retained tail waits) both message lists are
    empty (check :attr:`CompactionPreparation.empty`; :func:`compact` refuses such a preparation). Raises ``CompactionError("invalid_session")`` when the entry
    to keep has no id (an unmigrated session).
    """
    settings = settings or CompactionSettings()
    path = list(path_entries)
    if not path or isinstance(path[-1], CompactionEntry):
        return None
    prev_index = next((i for i in range(len(path) - 1, -1, -1) if isinstance(path[i], CompactionEntry)), -1)
    previous: Optional[CompactionEntry] = path[prev_index] if prev_index >= 0 else None  # type: ignore[assignment]
    boundary_start = 0
    # messages a previous compaction kept inside its entry (a v4 checkpoint): in the context they
    # follow its summary, before every entry after it, so they are the oldest history to summarise
    retained: List[Any] = []
    if previous is not None:
        boundary_start = prev_index + 1
        ids = [e.id for e in path]
        if previous.retained_tail is not None:  # build_context ignores first_kept_entry_id then
            retained = list(previous.retained_tail)
        elif previous.first_kept_entry_id and previous.first_kept_entry_id in ids:
            boundary_start = ids.index(previous.first_kept_entry_id)
    kept = kept_message_count(path, prev_index) if previous is not None else None
    tokens_before = live_context_tokens(path_context_messages(path), kept).tokens
    cut = find_cut_point(path, boundary_start, len(path), settings.keep_recent_tokens, overflowing=overflowing)
    first_kept = path[cut.first_kept_entry_index]
    if not first_kept.id:
        raise CompactionError(
            "invalid_session",
            "the entry to keep after compaction has no id: the session needs migration (open it with Session.open)",
        )
    history_end = cut.turn_start_index if cut.is_split_turn else cut.first_kept_entry_index
    to_summarize = retained + _messages_of(
        [e for e in path[boundary_start:history_end] if not isinstance(e, CompactionEntry)]
    )
    prefix = (
        _messages_of(
            [e for e in path[cut.turn_start_index : cut.first_kept_entry_index] if not isinstance(e, CompactionEntry)]
        )
        if cut.is_split_turn
        else []
    )
    ops = FileOps()
    if previous is not None and not previous.from_hook:
        ops.add_details(previous.details)
    file_ops_from_messages(to_summarize, ops)
    file_ops_from_messages(prefix, ops)
    return CompactionPreparation(
        first_kept.id,
        to_summarize,
        prefix,
        cut.is_split_turn,
        tokens_before,
        previous.summary if previous is not None else None,
        ops,
        settings,
        cut.first_kept_entry_index,
    )


# --------------------------------------------------------------------------- generation


@dataclass
class CompactionResult:
    """A generated compaction, ready for ``Session.append_compaction``.

    ``details`` is ``{"readFiles": [...], "modifiedFiles": [...]}``; ``usage`` sums the summary
    requests (a reference-shaped dict, or None when no model was called). ``from_hook`` is True
    when a ``before_compaction`` hook supplied the result; ``details`` is then whatever the hook
    gave (possibly None) and the next compaction does not read file lists from it.
    """

    summary: str
    first_kept_entry_id: str
    tokens_before: int
    details: Dict[str, Any] = field(default_factory=dict)
    usage: Optional[Dict[str, Any]] = None
    from_hook: bool = False

    def to_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {
            "summary": self.summary,
            "firstKeptEntryId": self.first_kept_entry_id,
            "tokensBefore": self.tokens_before,
            "details": self.details,
        }
        if self.usage is not None:
            out["usage"] = self.usage
        if self.from_hook:
            out["fromHook"] = True
        return out


@dataclass
class CompactionDecision:
    """What a ``before_compaction`` hook may return (a dict with the same keys, snake_case or the
    reference camelCase, works too).

    ``cancel=True``: no compaction (``reason`` says why, for the error message). Otherwise a
    non-empty ``summary`` supplies the whole compaction: it is stored as is (no model call, no
    file lists appended) with ``fromHook`` set; ``first_kept_entry_id`` and ``tokens_before``
    default to the preparation's, ``details`` is stored but never trusted for file tracking; a
    summary of only whitespace fails the compaction (``summarization_failed``). Neither: the
    built-in compaction proceeds.
    """

    cancel: bool = False
    summary: Optional[str] = None
    first_kept_entry_id: Optional[str] = None
    tokens_before: Optional[int] = None
    details: Any = None
    reason: Optional[str] = None


_DECISION_KEYS = {
    "cancel": "cancel",
    "summary": "summary",
    "first_kept_entry_id": "firstKeptEntryId",
    "tokens_before": "tokensBefore",
    "details": "details",
    "reason": "reason",
}


def _decision_field(value: Any, name: str) -> Any:
    if isinstance(value, dict):
        return value.get(name, value.get(_DECISION_KEYS[name]))
    return getattr(value, name, None)


def _first_result(result: Any) -> Any:
    """A hook caller without a firstresult spec returns a list: take its first non-None item."""
    if isinstance(result, list):
        return next((item for item in result if item is not None), None)
    return result


def run_before_compaction(
    plugins: Any,
    preparation: CompactionPreparation,
    branch_entries: Sequence[SessionEntry],
    custom_instructions: Optional[str],
    reason: str,
    signal: Any,
) -> Optional[CompactionResult]:
    """Ask the ``before_compaction`` hook of ``plugins`` (a plugin manager, may be None) about
    ``preparation``.

    Returns None to go on with the built-in compaction, or the hook-supplied
    :class:`CompactionResult` (``from_hook=True``, ``usage`` None). Raises
    ``CompactionError("cancelled")`` when the hook cancels, and
    ``CompactionError("summarization_failed")`` when it raises, returns something else than
    None, a :class:`CompactionDecision`, a :class:`CompactionResult` or a dict, supplies a
    summary of only whitespace (stored, it would replace the history with nothing) or supplies
    ``details`` that are not JSON (the session could not store them).
    """
    hook = getattr(getattr(plugins, "hook", None), "before_compaction", None)
    if hook is None:
        return None
    try:
        decision = _first_result(
            hook(
                preparation=preparation,
                branch_entries=list(branch_entries),
                custom_instructions=custom_instructions,
                reason=reason,
                signal=signal,
            )
        )
    except Exception as exc:  # noqa: BLE001 - a plugin failure fails this compaction, nothing else
        raise CompactionError(
            "summarization_failed", f"Compaction failed: the before_compaction hook raised {describe_exception(exc)}"
        ) from exc
    if decision is None:
        return None
    if not isinstance(decision, (dict, CompactionDecision, CompactionResult)):
        raise CompactionError(
            "summarization_failed",
            (
                f"Compaction failed: the before_compaction hook returned a {type(decision).__name__}; "
                "return None, a CompactionDecision (cancel=True, or a summary) or a dict with those keys"
            ),
        )
    if _decision_field(decision, "cancel"):
        why = _decision_field(decision, "reason")
        raise CompactionError(
            "cancelled", "compaction cancelled by a before_compaction hook" + (f": {why}" if why else "")
        )
    summary = _decision_field(decision, "summary")
    if not isinstance(summary, str) or not summary:
        return None
    _require_text(summary, "Compaction failed", "the before_compaction hook")
    first_kept = _decision_field(decision, "first_kept_entry_id") or preparation.first_kept_entry_id
    tokens_before = _decision_field(decision, "tokens_before")
    if not isinstance(tokens_before, int) or isinstance(tokens_before, bool):
        tokens_before = preparation.tokens_before
    details = _decision_field(decision, "details")
    _json_details(details, "Compaction failed: the before_compaction hook")
    return CompactionResult(summary, str(first_kept), tokens_before, details, None, True)


def _json_details(details: Any, who: str) -> None:
    """Refuse hook-supplied ``details`` the session cannot store (a set, NaN, an object):
    ``CompactionError("summarization_failed", "<who> returned details that are not JSON ...")``,
    raised before anything is written, instead of a session error halfway through the write."""
    from .entries import encode_line
    from .errors import SessionError

    try:
        encode_line({"details": details})
    except SessionError as exc:
        raise CompactionError(
            "summarization_failed", f"{who} returned details that are not JSON ({exc}); return JSON values only"
        ) from None


def _default_stream_fn() -> StreamFn:
    from ..providers import stream

    return stream


def _add_usage(total: Optional[Usage], usage: Any) -> Optional[Usage]:
    """``total`` plus the summary request's ``usage`` (a new Usage when ``total`` is None: the
    response's own is never changed); ``total`` when the request reported none."""
    if not isinstance(usage, Usage):
        return total
    return add_usage(total if total is not None else Usage(), usage)


def hook_summary(
    plugins: Any,
    messages: List[Any],
    previous_summary: Optional[str],
    custom_instructions: Optional[str],
    kind: str,
    model: Any,
    signal: Any,
) -> Optional[str]:
    """The text of the first ``summarize`` hook implementation of ``plugins`` (a plugin manager)
    that returns one, else None. A raising implementation: ``CompactionError("summarization_failed")``."""
    hook = getattr(getattr(plugins, "hook", None), "summarize", None)
    if hook is None:
        return None
    try:
        result = hook(
            messages=list(messages),
            previous_summary=previous_summary,
            instructions=custom_instructions,
            kind=kind,
            model=model,
            signal=signal,
        )
    except Exception as exc:  # noqa: BLE001 - a plugin failure fails this summary, nothing else
        raise CompactionError(
            "summarization_failed", f"Summarization failed: the summarize hook raised {describe_exception(exc)}"
        ) from exc
    return result if isinstance(result, str) and result else None


def summarize_with_model(
    prompt: str,
    model: Any,
    *,
    max_tokens: int,
    stream_fn: Optional[StreamFn] = None,
    signal: Any = None,
    thinking_level: Optional[str] = None,
    failure_prefix: str = "Summarization failed",
    require_complete: bool = False,
    **options: Any,
) -> Tuple[str, Optional[Usage]]:
    """Send one summary request and return ``(text, usage)``.

    ``reasoning`` is requested only for a reasoning model with a level other than ``"off"``.
    Raises ``CompactionError("aborted")`` when the request was aborted and
    ``CompactionError("summarization_failed", "<failure_prefix>: <error>")`` when it failed
    (the stream function raised, or its stream ended without a done or error event).
    With ``require_complete`` (what compaction asks: its summary replaces the history) an answer
    cut off at ``max_tokens`` (``stop_reason == "length"``) or without text (empty or only
    whitespace) fails the same way. When a response came back, the error's ``usage`` is the
    usage it reported.
    """
    stream_fn = stream_fn or _default_stream_fn()
    request = {k: v for k, v in options.items() if v is not None}
    request["max_tokens"] = max_tokens
    if signal is not None:
        request["signal"] = signal
    if getattr(model, "reasoning", False) and thinking_level and str(thinking_level) != "off":
        request["reasoning"] = str(thinking_level)
    context = AgentContext(SUMMARIZER_SYSTEM_PROMPT, [UserMessage([TextContent(prompt)])], None)
    try:
        message = stream_fn(model, context, **request).result()
    except Exception as exc:  # a stream function must not raise; treat it as a failed request
        raise CompactionError("summarization_failed", f"{failure_prefix}: {exception_message(exc)}") from exc
    if not isinstance(message, AssistantMessage):  # a stream that ended without done or error
        if signal is not None and getattr(signal, "aborted", False):
            raise CompactionError("aborted", "Summarization was aborted")
        raise CompactionError(
            "summarization_failed",
            f"{failure_prefix}: the model stream ended without a done or error event, so no summary came back",
        )
    billed = message.usage if isinstance(message.usage, Usage) else None  # refused or not, it was billed
    if message.stop_reason == "aborted":
        raise CompactionError("aborted", message.error_message or "Summarization was aborted", usage=billed)
    if message.stop_reason == "error":
        raise CompactionError(
            "summarization_failed", f"{failure_prefix}: {message.error_message or 'unknown error'}", usage=billed
        )
    text = "\n".join(b.text for b in message.content if isinstance(b, TextContent))
    if require_complete and message.stop_reason == "length":
        raise CompactionError(
            "summarization_failed",
            (
                f"{failure_prefix}: the summary was cut off at its output limit (max_tokens={max_tokens}), "
                "so nothing was compacted; raise CompactionSettings.reserve_tokens (the limit is a share "
                "of it, capped by the model's max_tokens) or use a compaction_model with a larger output"
            ),
            usage=billed,
        )
    if require_complete:
        _require_text(text, failure_prefix, "the model", billed)
    return text, message.usage


def _require_text(text: str, failure_prefix: str, source: str, usage: Optional[Usage] = None) -> None:
    """Refuse a summary without text: stored, it would replace the history with nothing.
    ``usage``: what the refused answer was billed (None for a hook's text)."""
    if not text.strip():
        raise CompactionError(
            "summarization_failed",
            f"{failure_prefix}: {source} returned an empty summary, so nothing was compacted",
            usage=usage,
        )


def generate_summary(
    messages: Sequence[Any],
    model: Any,
    reserve_tokens: int,
    *,
    stream_fn: Optional[StreamFn] = None,
    previous_summary: Optional[str] = None,
    custom_instructions: Optional[str] = None,
    signal: Any = None,
    thinking_level: Optional[str] = None,
    plugins: Any = None,
    **options: Any,
) -> Tuple[str, Optional[Usage]]:
    """Summarise ``messages`` (updating ``previous_summary`` when given); returns ``(text, usage)``.

    A plugin's ``summarize`` hook is asked first (``kind="compaction"``); its text is used as is.
    Otherwise one request with ``max_tokens = min(0.8 * reserve_tokens, model.max_tokens)``.
    A summary without text (from the hook or the model) or cut off at ``max_tokens`` raises
    ``CompactionError("summarization_failed")``: it would replace the history it summarises.
    """
    hooked = hook_summary(plugins, list(messages), previous_summary, custom_instructions, "compaction", model, signal)
    if hooked is not None:
        _require_text(hooked, "Summarization failed", "the summarize hook")
        return hooked, None
    instructions = UPDATE_SUMMARY_INSTRUCTIONS if previous_summary else SUMMARY_INSTRUCTIONS
    prompt = build_summary_prompt(serialize_conversation(messages), instructions, previous_summary, custom_instructions)
    return summarize_with_model(
        prompt,
        model,
        max_tokens=_cap(0.8, reserve_tokens, model),
        stream_fn=stream_fn,
        signal=signal,
        thinking_level=thinking_level,
        require_complete=True,
        **options,
    )


def _cap(fraction: float, reserve_tokens: int, model: Any) -> int:
    cap = max(int(math.floor(fraction * reserve_tokens)), 1)  # never a request for no output
    model_max = getattr(model, "max_tokens", 0) or 0
    return min(cap, model_max) if model_max > 0 else cap


def _turn_prefix_summary(
    messages: Sequence[Any],
    model: Any,
    reserve_tokens: int,
    *,
    custom_instructions: Optional[str],
    stream_fn: Optional[StreamFn],
    signal: Any,
    thinking_level: Optional[str],
    plugins: Any,
    **options: Any,
) -> Tuple[str, Optional[Usage]]:
    hooked = hook_summary(plugins, list(messages), None, custom_instructions, "turn_prefix", model, signal)
    if hooked is not None:
        _require_text(hooked, "Turn prefix summarization failed", "the summarize hook")
        return hooked, None
    prompt = build_summary_prompt(serialize_conversation(messages), TURN_PREFIX_INSTRUCTIONS, None, custom_instructions)
    return summarize_with_model(
        prompt,
        model,
        max_tokens=_cap(0.5, reserve_tokens, model),
        stream_fn=stream_fn,
        signal=signal,
        thinking_level=thinking_level,
        failure_prefix="Turn prefix summarization failed",
        require_complete=True,
        **options,
    )


def _summarize(
    preparation: CompactionPreparation,
    model: Any,
    custom_instructions: Optional[str],
    common: Dict[str, Any],
    options: Dict[str, Any],
) -> Tuple[str, Optional[Usage]]:
    """The summary text of ``preparation`` (history, then a split turn's prefix) and the summed
    usage of its requests. A failing part raises with the usage of every request answered so far
    added to its ``CompactionError.usage``."""
    reserve = preparation.settings.reserve_tokens
    usage: Optional[Usage] = None
    try:
        if preparation.is_split_turn and not preparation.messages_to_summarize:
            history = preparation.previous_summary or NO_PRIOR_HISTORY
        else:
            history, used = generate_summary(
                preparation.messages_to_summarize,
                model,
                reserve,
                previous_summary=preparation.previous_summary,
                custom_instructions=custom_instructions,
                **common,
                **options,
            )
            usage = _add_usage(usage, used)
        if not (preparation.is_split_turn and preparation.turn_prefix_messages):
            return history, usage
        prefix, used = _turn_prefix_summary(
            preparation.turn_prefix_messages,
            model,
            reserve,
            custom_instructions=custom_instructions,
            **common,
            **options,
        )
    except CompactionError as exc:
        exc.usage = _add_usage(usage, exc.usage)  # a copy when only the failed request answered
        raise
    return history + SPLIT_TURN_SEPARATOR + prefix, _add_usage(usage, used)


def compact(
    preparation: CompactionPreparation,
    model: Any,
    stream_fn: Optional[StreamFn] = None,
    custom_instructions: Optional[str] = None,
    signal: Any = None,
    *,
    thinking_level: Optional[str] = None,
    plugins: Any = None,
    **options: Any,
) -> CompactionResult:
    """Generate the summary for ``preparation`` (spec §7.5). Extra ``options`` (``api_key``,
    ``headers`` ...) are passed to ``stream_fn`` (default: :func:`agentcore.providers.stream`).

    A split turn makes two requests, one after the other: the history (or, when only the turn
    prefix is new, the previous summary is reused) and the turn prefix; they are joined under a
    "Turn Context" heading; ``custom_instructions`` apply to both. Raises
    :class:`CompactionError` (see the module docstring); ``summarization_failed`` also when any
    part of the summary is empty or only whitespace, or was cut off at its ``max_tokens``. The ``before_compaction`` hook is not
    asked here: the caller asks it first (:func:`run_before_compaction`). A failure's
    ``CompactionError.usage`` sums every request answered until then: when the turn-prefix
    request fails, the history request's usage is in it too.
    """
    if not preparation.first_kept_entry_id:
        raise CompactionError(
            "invalid_session",
            "the compaction has no first kept entry id: the session needs migration (open it with Session.open)",
        )
    if preparation.empty:
        raise CompactionError(
            "nothing_to_compact",
            "nothing to compact: the whole context fits in keep_recent_tokens; lower it to compact anyway",
        )
    common = dict(stream_fn=stream_fn, signal=signal, thinking_level=thinking_level, plugins=plugins)
    summary, usage = _summarize(preparation, model, custom_instructions, common, options)
    read_files, modified_files = compute_file_lists(preparation.file_ops)
    summary += format_file_lists(read_files, modified_files)
    return CompactionResult(
        summary,
        preparation.first_kept_entry_id,
        preparation.tokens_before,
        {"readFiles": read_files, "modifiedFiles": modified_files},
        None if usage is None else usage.to_dict(),
    )

"""Token accounting for compaction (spec session.md §7.1-§7.2): settings, estimates, the trigger.

Estimates are deliberately simple: about four characters per token, counted in JavaScript UTF-16
code units so the numbers match the reference implementation; an image counts as 1200 tokens.
When a model reported real usage, the newest *valid* report is trusted and only the messages after
it are estimated (:func:`estimate_context_tokens`).

Every function here is pure and never raises for odd input: a message it does not recognise
counts as 0 tokens, a usage it cannot read counts as none.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, List, Optional, Sequence, Tuple

from .._util import field_of
from ..types import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    _is_mapping,
    message_from_dict,
    role_of,
)

__all__ = [
    "CompactionSettings",
    "ContextEstimate",
    "calculate_context_tokens",
    "usage_tokens",
    "get_last_assistant_usage",
    "estimate_tokens",
    "estimate_context_tokens",
    "estimate_context_tokens_from",
    "live_context_tokens",
    "ContextTokenCounter",
    "should_compact",
    "js_length",
    "IMAGE_CHARS",
]

#: Characters an image block counts for (4800 / 4 = 1200 tokens), as the reference does.
IMAGE_CHARS = 4800


@dataclass
class CompactionSettings:
    """When and how much to compact.

    ``enabled`` switches automatic compaction (threshold and overflow) on or off; a manual
    ``compact()`` works either way. Compaction triggers when the context uses more than
    ``context_window - reserve_tokens`` tokens (half the window when ``reserve_tokens`` is not
    smaller than it, see :func:`should_compact`), keeping roughly the newest ``keep_recent_tokens``
    tokens of history verbatim. The summary request may use up to 80% of ``reserve_tokens``.

    Checked when made and whenever a field is assigned later (``settings.reserve_tokens = 0``
    raises as ``CompactionSettings(reserve_tokens=0)`` does, and the field keeps its value):
    ``enabled`` is a bool, ``reserve_tokens`` an int > 0 and ``keep_recent_tokens`` an int >= 0
    (bools are not token counts); anything else raises TypeError or ValueError naming the field.
    """

    enabled: bool = True
    reserve_tokens: int = 16384
    keep_recent_tokens: int = 20000

    def __setattr__(self, name: str, value: Any) -> None:
        check = _FIELD_CHECKS.get(name)
        if check is not None:
            check(value)
        object.__setattr__(self, name, value)


def _check_enabled(value: Any) -> None:
    if type(value) is not bool:
        raise TypeError(
            "CompactionSettings(enabled=...) takes True or False (automatic compaction on or off), "
            f"not {value!r} ({type(value).__name__})"
        )


def _token_check(name: str, minimum: int, meaning: str) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if type(value) is not int or value < minimum:  # the usual value passes in two tests
            _check_tokens(name, value, minimum, meaning)

    return check


def _check_tokens(name: str, value: Any, minimum: int, meaning: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(
            f"CompactionSettings({name}=...) takes an int >= {minimum} ({meaning}), "
            f"not {value!r} ({type(value).__name__})"
        )
    if value < minimum:
        raise ValueError(f"CompactionSettings({name}=...) must be >= {minimum} ({meaning}), not {value}")


_FIELD_CHECKS = {
    "enabled": _check_enabled,
    "reserve_tokens": _token_check("reserve_tokens", 1, "tokens kept free for the summary and the reply"),
    "keep_recent_tokens": _token_check("keep_recent_tokens", 0, "tokens of recent history kept verbatim"),
}


@dataclass(frozen=True)
class ContextEstimate:
    """Result of :func:`estimate_context_tokens`.

    ``tokens`` = ``usage_tokens`` (the newest valid reported usage, 0 when none) + ``trailing_tokens``
    (estimates of the messages after it, or of every message when ``last_usage_index`` is None).
    """

    tokens: int
    usage_tokens: int
    trailing_tokens: int
    last_usage_index: Optional[int]


def js_length(text: Any) -> int:
    """Length of ``text`` in UTF-16 code units (JavaScript's ``string.length``)."""
    if not isinstance(text, str):
        return 0
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _count(value: Any) -> bool:
    """True for a figure a usage report can count: an int, or a finite float (not a bool; not
    NaN or infinity, which JSON gives for a number like ``1e400`` in a session file)."""
    if type(value) is int:
        return True
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def usage_tokens(usage: Any) -> int:
    """Tokens of one usage report (object or reference dict): its total, else the sum of parts.
    Figures that are not counts (text, None, a bool, NaN, infinity) are skipped."""
    if usage is None:
        return 0
    if type(usage) is Usage:  # the usual report, read without the dict-or-object getter
        total = usage.total_tokens
        if type(total) is int and total > 0:
            return total
        parts: Tuple[Any, ...] = (usage.input, usage.output, usage.cache_read, usage.cache_write)
    else:
        total = field_of(usage, "total_tokens", "totalTokens", 0)
    if _count(total) and total:
        return int(total)
    if type(usage) is not Usage:
        parts = (
            field_of(usage, "input", "input", 0),
            field_of(usage, "output", "output", 0),
            field_of(usage, "cache_read", "cacheRead", 0),
            field_of(usage, "cache_write", "cacheWrite", 0),
        )
    return int(sum(p for p in parts if _count(p)))


def calculate_context_tokens(usage: Any) -> int:
    """Context size a usage report implies: ``total_tokens`` if set, else input+output+cache."""
    return usage_tokens(usage)


def _as_message(message: Any) -> Any:
    if _is_mapping(message):
        try:
            return message_from_dict(message)
        except ValueError:
            return None
    return message


def _valid_usage(message: Any) -> Optional[Any]:
    if type(message) is AssistantMessage:  # the usual case, without the dict-or-object getters
        usage = message.usage
        if message.stop_reason in ("aborted", "error") or usage is None or usage_tokens(usage) <= 0:
            return None
        return usage
    if role_of(message) != "assistant":
        return None
    if field_of(message, "stop_reason", "stopReason") in ("aborted", "error"):
        return None
    usage = field_of(message, "usage", "usage")
    if usage is None or usage_tokens(usage) <= 0:
        return None
    return usage


def get_last_assistant_usage(messages: Sequence[Any]) -> Optional[Any]:
    """Usage of the newest assistant message that neither failed nor was aborted and reported
    more than zero tokens; None when there is none."""
    for message in reversed(messages):
        usage = _valid_usage(message)
        if usage is not None:
            return usage
    return None


def _content_chars(content: Any) -> int:
    if isinstance(content, str):
        return js_length(content)
    chars = 0
    for block in content or ():
        if isinstance(block, TextContent):
            chars += js_length(block.text)
        elif isinstance(block, ImageContent):
            chars += IMAGE_CHARS
        elif _is_mapping(block):
            if block.get("type") == "text":
                chars += js_length(block.get("text"))
            elif block.get("type") == "image":
                chars += IMAGE_CHARS
    return chars


#: ``json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)`` without building
#: an encoder per call (``json.dumps`` does that whenever an argument differs from its defaults).
_compact_json = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str).encode


def _assistant_chars(content: Optional[Iterable[Any]]) -> int:
    chars = 0
    for block in content or ():
        if isinstance(block, TextContent):
            chars += js_length(block.text)
        elif isinstance(block, ThinkingContent):
            chars += js_length(block.thinking)
        elif isinstance(block, ToolCall):
            chars += js_length(block.name) + js_length(_compact_json(block.arguments))
    return chars


def estimate_tokens(message: Any) -> int:
    """Estimated tokens of one message: ceil(characters / 4) (spec §7.2).

    Counted: user/custom/toolResult content (an image is 4800 characters); assistant text,
    thinking and tool calls (name + compact JSON arguments); a shell run's command and output; a
    summary's text; a developer/system message's content. Unknown roles count 0.
    """
    cls = type(message)
    if cls is UserMessage or cls is ToolResultMessage:  # the usual messages: no generic reads
        return int(math.ceil(_content_chars(message.content) / 4))
    if cls is AssistantMessage:
        return int(math.ceil(_assistant_chars(message.content) / 4))
    role = role_of(message)
    message = _as_message(message)
    if message is None:
        return 0
    if role in ("user", "custom", "toolResult"):
        chars = _content_chars(getattr(message, "content", None))
    elif role == "assistant":
        chars = _assistant_chars(getattr(message, "content", None))
    elif role == "bashExecution":
        chars = js_length(message.command) + js_length(message.output)
    elif role in ("compactionSummary", "branchSummary"):
        chars = js_length(message.summary)
    elif role in ("developer", "system"):
        content = getattr(message, "content", None)
        if content is None and hasattr(message, "data"):  # UnknownMessage("developer")
            content = message.data.get("content")
        chars = _content_chars(content)
    else:
        return 0
    return int(math.ceil(chars / 4))


def estimate_context_tokens(messages: Sequence[Any]) -> ContextEstimate:
    """Context size of ``messages``: the newest valid reported usage plus estimates after it."""
    for index in range(len(messages) - 1, -1, -1):
        usage = _valid_usage(messages[index])
        if usage is not None:
            reported = calculate_context_tokens(usage)
            trailing = sum(estimate_tokens(m) for m in messages[index + 1 :])
            return ContextEstimate(reported + trailing, reported, trailing, index)
    trailing = sum(estimate_tokens(m) for m in messages)
    return ContextEstimate(trailing, 0, trailing, None)


def live_context_tokens(messages: Sequence[Any], kept_count: Optional[int] = None) -> ContextEstimate:
    """Like :func:`estimate_context_tokens`, but usage reported before the newest compaction is
    ignored (spec §13 pitfall 3): assistant messages kept by a compaction still carry the usage of
    the larger pre-compaction context, which would re-trigger compaction at once.

    Which messages predate the compaction is decided by *entry order* when ``kept_count`` is given:
    the newest ``compactionSummary`` message is followed by the ``kept_count`` messages it kept,
    and only usage after those counts, whatever the timestamps say (so clock skew cannot break
    it). Without ``kept_count`` timestamps decide: an assistant message is stale when its
    timestamp is not after the summary's. Usage placed before the summary never counts.
    """
    summary_index = None
    for index in range(len(messages) - 1, -1, -1):
        if role_of(messages[index]) == "compactionSummary":
            summary_index = index
            break
    if summary_index is None:
        return estimate_context_tokens(messages)
    if kept_count is not None:
        fresh_from = summary_index + 1 + max(kept_count, 0)
        return estimate_context_tokens_from(messages, fresh_from)
    cutoff = field_of(messages[summary_index], "timestamp", "timestamp", 0) or 0
    for index in range(len(messages) - 1, summary_index, -1):
        message = messages[index]
        usage = _valid_usage(message)
        if usage is not None and (field_of(message, "timestamp", "timestamp", 0) or 0) > cutoff:
            return _with_usage(messages, index, usage)
    trailing = sum(estimate_tokens(m) for m in messages)
    return ContextEstimate(trailing, 0, trailing, None)


def estimate_context_tokens_from(messages: Sequence[Any], fresh_from: int) -> ContextEstimate:
    """:func:`estimate_context_tokens` trusting only usage reported at index ``fresh_from`` or
    later; with none there, every message is estimated. Searches back from the end only as far
    as ``fresh_from``."""
    for index in range(len(messages) - 1, max(fresh_from, 0) - 1, -1):
        usage = _valid_usage(messages[index])
        if usage is not None:
            return _with_usage(messages, index, usage)
    trailing = sum(estimate_tokens(m) for m in messages)
    return ContextEstimate(trailing, 0, trailing, None)


def _with_usage(messages: Sequence[Any], index: int, usage: Any) -> ContextEstimate:
    reported = calculate_context_tokens(usage)
    trailing = sum(estimate_tokens(m) for m in messages[index + 1 :])
    return ContextEstimate(reported + trailing, reported, trailing, index)


class ContextTokenCounter:
    """:func:`live_context_tokens` for a transcript that grows by appending, at a cost per call
    proportional to the messages added since the previous call (the automatic compaction check
    runs before every request of a run, on transcripts of thousands of messages).

    The counter keeps the running sum of per-message estimates, the newest compaction summary and
    the newest usage that counts. It recognises "the same transcript, grown" by identity: the
    first message and the last message it saw must still be at their positions (any list holding
    the same message objects qualifies, so a copy of the transcript is fine). Anything else (a
    shorter list, another first or last message) starts over with a full count. A message
    replaced in place *between* those two positions goes unnoticed until the next full count;
    call :meth:`reset` after such an edit.

    ``kept_count(summary_message)`` (optional) returns how many messages right after that summary
    were kept by its compaction, or None when unknown; known counts decide staleness by entry
    order, unknown ones by timestamp (see :func:`live_context_tokens`). It is called once per
    summary seen. The counter is not thread-safe; callers serialise calls.
    """

    def __init__(self, kept_count: Optional[Callable[[Any], Optional[int]]] = None) -> None:
        self._kept_count = kept_count
        self.reset()

    def reset(self) -> None:
        """Forget everything: the next call counts the whole transcript."""
        self._sums: List[int] = [0]  # _sums[i]: estimated tokens of messages[:i]
        self._first: Any = None
        self._last: Any = None
        self._summary_index: Optional[int] = None
        self._fresh_from: Optional[int] = None  # usage counts from here (entry order) ...
        self._cutoff: Optional[float] = None  # ... or when newer than this (timestamps)
        self._usage_index: Optional[int] = None
        self._usage_tokens = 0

    def estimate(self, messages: Sequence[Any]) -> ContextEstimate:
        """The same figures as ``live_context_tokens(messages, kept)`` for the newest summary."""
        count = len(messages)
        known = len(self._sums) - 1
        if known and (count < known or messages[0] is not self._first or messages[known - 1] is not self._last):
            self.reset()
            known = 0
        for index in range(known, count):
            self._add(index, messages[index])
        if count:
            self._first, self._last = messages[0], messages[count - 1]
        total = self._sums[count]
        if self._usage_index is None:
            return ContextEstimate(total, 0, total, None)
        trailing = total - self._sums[self._usage_index + 1]
        return ContextEstimate(self._usage_tokens + trailing, self._usage_tokens, trailing, self._usage_index)

    def _add(self, index: int, message: Any) -> None:
        self._sums.append(self._sums[-1] + estimate_tokens(message))
        cls = type(message)
        if cls is UserMessage or cls is ToolResultMessage:  # neither a summary nor a usage report
            return
        if cls is not AssistantMessage and role_of(message) == "compactionSummary":
            self._summary_index = index
            self._usage_index = None
            kept = self._kept_count(message) if self._kept_count is not None else None
            if kept is None:
                self._fresh_from = None
                self._cutoff = field_of(message, "timestamp", "timestamp", 0) or 0
            else:
                self._fresh_from, self._cutoff = index + 1 + max(kept, 0), None
            return
        usage = _valid_usage(message)
        if usage is None:
            return
        if (
            self._summary_index is None
            or (self._fresh_from is not None and index >= self._fresh_from)
            or (self._cutoff is not None and (field_of(message, "timestamp", "timestamp", 0) or 0) > self._cutoff)
        ):
            self._usage_index = index
            self._usage_tokens = calculate_context_tokens(usage)


def should_compact(tokens: int, context_window: int, settings: CompactionSettings) -> bool:
    """True when compaction is enabled and ``tokens > context_window - reserve_tokens`` (strict).

    An unknown window (``context_window <= 0``, e.g. the placeholder model) never triggers. When
    ``reserve_tokens`` is not smaller than the window (a small model with the default reserve)
    that threshold would be 0 or less and compact before every request, however little the
    context holds: the threshold is then half the window.
    """
    if context_window <= 0:
        return False
    threshold = context_window - settings.reserve_tokens
    if threshold <= 0:
        threshold = context_window // 2
    return bool(settings.enabled) and tokens > threshold

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
from typing import Any, Iterable, Optional, Sequence

from ..types import (ImageContent, TextContent, ThinkingContent, ToolCall, _is_mapping, message_from_dict,
                     role_of)

__all__ = [
    "CompactionSettings", "ContextEstimate", "calculate_context_tokens", "usage_tokens",
    "get_last_assistant_usage", "estimate_tokens", "estimate_context_tokens", "live_context_tokens",
    "should_compact", "js_length", "IMAGE_CHARS",
]

#: Characters an image block counts for (4800 / 4 = 1200 tokens), as the reference does.
IMAGE_CHARS = 4800


@dataclass
class CompactionSettings:
    """When and how much to compact.

    ``enabled`` switches automatic compaction (threshold and overflow) on or off; a manual
    ``compact()`` works either way. Compaction triggers when the context uses more than
    ``context_window - reserve_tokens`` tokens, keeping roughly the newest ``keep_recent_tokens``
    tokens of history verbatim. The summary request may use up to 80% of ``reserve_tokens``.
    """

    enabled: bool = True
    reserve_tokens: int = 16384
    keep_recent_tokens: int = 20000

    def __post_init__(self) -> None:
        if self.reserve_tokens < 0 or self.keep_recent_tokens < 0:
            raise ValueError("CompactionSettings: reserve_tokens and keep_recent_tokens must be >= 0")


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


def _get(obj: Any, attr: str, key: str, default: Any = None) -> Any:
    if _is_mapping(obj):
        return obj.get(key, default)
    return getattr(obj, attr, default)


def usage_tokens(usage: Any) -> int:
    """Tokens of one usage report (object or reference dict): its total, else the sum of parts."""
    if usage is None:
        return 0
    total = _get(usage, "total_tokens", "totalTokens", 0)
    if isinstance(total, (int, float)) and not isinstance(total, bool) and total:
        return int(total)
    parts = (_get(usage, "input", "input", 0), _get(usage, "output", "output", 0),
             _get(usage, "cache_read", "cacheRead", 0), _get(usage, "cache_write", "cacheWrite", 0))
    return int(sum(p for p in parts if isinstance(p, (int, float)) and not isinstance(p, bool)))


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
    if role_of(message) != "assistant":
        return None
    if _get(message, "stop_reason", "stopReason") in ("aborted", "error"):
        return None
    usage = _get(message, "usage", "usage")
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


def _compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def _assistant_chars(content: Iterable[Any]) -> int:
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
            trailing = sum(estimate_tokens(m) for m in messages[index + 1:])
            return ContextEstimate(reported + trailing, reported, trailing, index)
    trailing = sum(estimate_tokens(m) for m in messages)
    return ContextEstimate(trailing, 0, trailing, None)


def live_context_tokens(messages: Sequence[Any]) -> ContextEstimate:
    """Like :func:`estimate_context_tokens`, but usage reported before the newest compaction is
    ignored (spec §13 pitfall 3): assistant messages kept by a compaction still carry the usage of
    the larger pre-compaction context, which would re-trigger compaction at once. An assistant
    message is stale when its timestamp is not after the newest ``compactionSummary`` message's.
    """
    cutoff = None
    for message in reversed(messages):
        if role_of(message) == "compactionSummary":
            cutoff = _get(message, "timestamp", "timestamp", 0) or 0
            break
    if cutoff is None:
        return estimate_context_tokens(messages)
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        usage = _valid_usage(message)
        if usage is not None and (_get(message, "timestamp", "timestamp", 0) or 0) > cutoff:
            reported = calculate_context_tokens(usage)
            trailing = sum(estimate_tokens(m) for m in messages[index + 1:])
            return ContextEstimate(reported + trailing, reported, trailing, index)
    trailing = sum(estimate_tokens(m) for m in messages)
    return ContextEstimate(trailing, 0, trailing, None)


def should_compact(tokens: int, context_window: int, settings: CompactionSettings) -> bool:
    """True when compaction is enabled and ``tokens > context_window - reserve_tokens`` (strict).

    An unknown window (``context_window <= 0``, e.g. the placeholder model) never triggers.
    """
    if context_window <= 0:
        return False
    return bool(settings.enabled) and tokens > context_window - settings.reserve_tokens

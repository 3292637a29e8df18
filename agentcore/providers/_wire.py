"""The shared provider machinery the Responses, Anthropic and Gemini wire modules use, in one place.

Everything here is re-exported from :mod:`~agentcore.providers.base`, :mod:`.partial_json`,
:mod:`.models` and :mod:`.transform`, plus :class:`ToolArguments` (throttled argument parsing) and
:func:`start_block`/:func:`end_block`, which append a content block and announce its start and end
the same way in every state machine.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional

from ..events import (
    TextEndEvent, TextStartEvent, ThinkingEndEvent, ThinkingStartEvent, ToolCallEndEvent, ToolCallStartEvent,
)
from ..types import AssistantMessage, TextContent, ThinkingContent, ToolCall
from .base import ProviderError, StateHandler, WireProvider, WireRequest, sanitize_surrogates, tool_specs
from .models import calculate_cost
from .partial_json import PartialJsonParser, parse_streaming_json
from .transform import transform_messages

__all__ = [
    "ProviderError", "StateHandler", "WireProvider", "WireRequest", "sanitize_surrogates", "tool_specs",
    "parse_streaming_json", "transform_messages", "calculate_cost", "ToolArguments", "start_block", "end_block",
]

_REPARSE_ALWAYS_BELOW = 16384  # characters; above it, re-parse only after 10 % growth (as base.py)


class ToolArguments:
    """Streamed tool-argument JSON of one call.

    ``feed(fragment)`` returns the best-effort dict so far, or None when re-parsing was skipped:
    past 16 KB the text is re-parsed only after it grew by 10 %, so huge arguments stay cheap.
    ``value()`` always parses everything (use it when the call ends).
    """

    __slots__ = ("_parser", "_parsed_at")

    def __init__(self, initial: str = "") -> None:
        self._parser = PartialJsonParser(initial or "")
        self._parsed_at = 0

    @property
    def text(self) -> str:
        return self._parser.text

    def feed(self, fragment: str) -> Optional[Dict[str, Any]]:
        self._parser.feed(fragment or "")
        size = len(self._parser)
        if size <= _REPARSE_ALWAYS_BELOW or size >= self._parsed_at * 1.1:
            self._parsed_at = size
            return self._parser.value()
        return None

    def value(self) -> Dict[str, Any]:
        return self._parser.value()


_START_EVENTS: Dict[type, Any] = {
    TextContent: TextStartEvent, ThinkingContent: ThinkingStartEvent, ToolCall: ToolCallStartEvent,
}


def start_block(output: AssistantMessage, block: Any, push: Callable[[Any], None]) -> int:
    """Append ``block`` (text, thinking or tool call) to ``output.content`` and push its ``*_start``
    event; returns its content index, which never changes afterwards."""
    output.content.append(block)
    index = len(output.content) - 1
    push(_START_EVENTS[type(block)](content_index=index, partial=output))
    return index


def end_block(output: AssistantMessage, index: int, push: Callable[[Any], None]) -> None:
    """Push the ``*_end`` event of the block at ``index`` with its final text, thinking or call."""
    block = output.content[index]
    if isinstance(block, TextContent):
        push(TextEndEvent(content_index=index, content=block.text, partial=output))
    elif isinstance(block, ThinkingContent):
        push(ThinkingEndEvent(content_index=index, content=block.thinking, partial=output))
    else:
        push(ToolCallEndEvent(content_index=index, tool_call=block, partial=output))

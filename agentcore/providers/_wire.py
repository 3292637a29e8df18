"""The shared provider machinery the Responses, Anthropic and Gemini wire modules use, in one place.

Everything here is re-exported from :mod:`~agentcore.providers.base`, :mod:`.partial_json`,
:mod:`.models` and :mod:`.transform`; the transformation module is imported on first use.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from .base import ProviderError, StateHandler, WireProvider, WireRequest, sanitize_surrogates, tool_specs
from .models import calculate_cost
from .partial_json import PartialJsonParser, parse_streaming_json

__all__ = [
    "ProviderError", "StateHandler", "WireProvider", "WireRequest", "sanitize_surrogates", "tool_specs",
    "parse_streaming_json", "transform_messages", "calculate_cost", "ToolArguments",
]

_REPARSE_ALWAYS_BELOW = 16384  # characters; above it, re-parse only after 10 % growth (as base.py)


def transform_messages(messages: List[Any], model: Any, normalize_id: Callable[[str], str]) -> List[Any]:
    """Cross-provider replay rules of spec §6 (see :mod:`agentcore.providers.transform`)."""
    from .transform import transform_messages as _transform

    return _transform(messages, model, normalize_id)


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

"""Small helpers the Responses, Anthropic and Gemini wire modules share.

Most of them re-export the shared provider machinery (partial JSON, message transformation, cost)
so the three wire modules import from one place.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Tuple

from .partial_json import parse_streaming_json

__all__ = [
    "ProviderStreamError", "sanitize_surrogates", "tool_spec", "parse_streaming_json",
    "transform_messages", "calculate_cost",
]

_SURROGATES = re.compile("[\ud800-\udfff]")


class ProviderStreamError(Exception):
    """A failure reported inside a response stream (error event, refusal, missing terminal event).

    The stream function turns it into an ``error`` result whose ``error_message`` is ``str(exc)``.
    """


def sanitize_surrogates(text: str) -> str:
    """Remove unpaired UTF-16 surrogates (APIs reject them; spec §5)."""
    if not text:
        return text
    return _SURROGATES.sub("", text)


def tool_spec(tool: Any) -> Tuple[str, str, Dict[str, Any]]:
    """``(name, description, parameters)`` of an ``AgentTool`` or a plain tool dict."""
    if isinstance(tool, Mapping):
        return (str(tool.get("name", "")), str(tool.get("description") or ""),
                dict(tool.get("parameters") or {}))
    return (str(tool.name), str(getattr(tool, "description", "") or ""),
            dict(getattr(tool, "parameters", None) or {}))


def transform_messages(messages: List[Any], model: Any, normalize_id: Any) -> List[Any]:
    """Cross-provider replay rules of spec §6 (see :mod:`agentcore.providers.transform`)."""
    from .transform import transform_messages as _transform

    return _transform(messages, model, normalize_id)


def calculate_cost(model: Any, usage: Any) -> Any:
    """Fill ``usage.cost`` from the model's prices (USD per million tokens); returns the cost."""
    cost = usage.cost
    prices = getattr(model, "cost", None)
    cost.input = (getattr(prices, "input", 0) or 0) / 1_000_000 * usage.input
    cost.output = (getattr(prices, "output", 0) or 0) / 1_000_000 * usage.output
    cost.cache_read = (getattr(prices, "cache_read", 0) or 0) / 1_000_000 * usage.cache_read
    cost.cache_write = (getattr(prices, "cache_write", 0) or 0) / 1_000_000 * usage.cache_write
    cost.total = cost.input + cost.output + cost.cache_read + cost.cache_write
    return cost

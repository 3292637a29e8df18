"""Thinking levels and budgets (providers spec §11), shared by the Responses, Anthropic and Gemini wires.

A stream function receives ``reasoning`` as a thinking-level string (``"minimal"`` ... ``"xhigh"``,
``"max"``) or None / ``"off"`` when thinking is off. These helpers turn that level into the numbers
and names each wire API wants. They never raise for an unknown level: it is treated as ``"medium"``.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple

__all__ = [
    "DEFAULT_THINKING_BUDGETS",
    "normalize_level",
    "clamp_level",
    "supports_xhigh",
    "thinking_budget",
    "adjust_max_tokens_for_thinking",
    "base_max_tokens",
]

DEFAULT_THINKING_BUDGETS: Dict[str, int] = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384}

_LEVELS = ("minimal", "low", "medium", "high", "xhigh", "max")


def normalize_level(reasoning: Any) -> Optional[str]:
    """The thinking level as a lower-case string, or None when thinking is off.

    None, ``""``, ``"off"`` and False mean off; an unknown string is kept as ``"medium"``.
    """
    if reasoning is None or reasoning is False:
        return None
    level = str(getattr(reasoning, "value", reasoning)).strip().lower()
    if level in ("", "off", "none", "false"):
        return None
    return level if level in _LEVELS else "medium"


def clamp_level(level: str) -> str:
    """Levels above ``high`` (``xhigh``, ``max``) become ``high`` for budget-based providers."""
    return "high" if level in ("xhigh", "max") else level


def supports_xhigh(model: Any) -> bool:
    """True for models that accept the ``xhigh`` effort (spec §11: gpt-5.2/5.3/5.4, Opus 4.6)."""
    from .models import supports_xhigh as _supports_xhigh

    return _supports_xhigh(model)


def base_max_tokens(model: Any, max_tokens: Optional[int]) -> int:
    """``max_tokens`` if given, else ``min(model.max_tokens, 32000)`` (the simple-stream default)."""
    if max_tokens:
        return int(max_tokens)
    model_max = int(getattr(model, "max_tokens", 0) or 0)
    return min(model_max, 32000) if model_max > 0 else 32000


def thinking_budget(level: str, budgets: Optional[Mapping[str, int]] = None) -> int:
    """The token budget of ``level`` (clamped to ``high``); ``budgets`` overrides the defaults."""
    level = clamp_level(level)
    merged = dict(DEFAULT_THINKING_BUDGETS)
    if budgets:
        merged.update({k: int(v) for k, v in budgets.items() if v is not None})
    return merged.get(level, merged["medium"])


def adjust_max_tokens_for_thinking(
    base: int, model_max_tokens: int, level: str, budgets: Optional[Mapping[str, int]] = None
) -> Tuple[int, int]:
    """``(max_tokens, budget)`` for budget providers: room for the answer on top of the budget.

    ``max_tokens = min(base + budget, model_max_tokens)``; when that leaves no room above the budget
    the budget shrinks to ``max(0, max_tokens - 1024)``.
    """
    budget = thinking_budget(level, budgets)
    max_tokens = base + budget
    if model_max_tokens and model_max_tokens > 0:
        max_tokens = min(max_tokens, model_max_tokens)
    if max_tokens <= budget:
        budget = max(0, max_tokens - 1024)
    return max_tokens, budget

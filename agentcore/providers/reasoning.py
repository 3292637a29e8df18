"""Thinking levels and budgets (providers spec §11), shared by every wire API, plugins included.

A stream function receives ``reasoning`` as a thinking-level string (``"minimal"`` ... ``"xhigh"``,
``"max"``) or None / ``"off"`` when thinking is off. These helpers turn that level into the numbers
and names each wire API wants. They never raise for an unknown level: it is treated as ``"medium"``.

A model's ``thinking_level_map`` (JSON ``thinkingLevelMap``; catalogs older than it carry
``compat.reasoningEffortMap``, still read) maps levels to the provider's own effort value, as the
reference does: a level mapped to ``None`` is unsupported, and ``xhigh``/``max`` are supported only
when mapped. :func:`clamp_to_model` moves an unsupported level to the nearest supported one
(upward first), :func:`mapped_effort` gives the provider value. A model with no map keeps each
wire's built-in mapping (id rules such as :func:`supports_xhigh`).
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple

__all__ = [
    "DEFAULT_THINKING_BUDGETS",
    "thinking_level_map",
    "supported_levels",
    "clamp_to_model",
    "mapped_effort",
    "normalize_level",
    "clamp_level",
    "supports_xhigh",
    "thinking_budget",
    "adjust_max_tokens_for_thinking",
    "base_max_tokens",
]

DEFAULT_THINKING_BUDGETS: Dict[str, int] = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384}

_LEVELS = ("minimal", "low", "medium", "high", "xhigh", "max")
_ALL_LEVELS = ("off",) + _LEVELS


def thinking_level_map(model: Any, compat: Optional[Mapping[str, Any]] = None) -> Optional[Dict[str, Optional[str]]]:
    """The model's level -> provider value map, or None when it has none.

    ``model.thinking_level_map`` wins; else ``compat["reasoningEffortMap"]`` (``compat`` if given,
    e.g. a wire's resolved compat flags, else ``model.compat``). An empty map counts as none. Values
    that are neither strings nor None are ignored (a malformed catalog entry must not break a call).
    """
    raw = getattr(model, "thinking_level_map", None)
    if not raw:
        source = compat if compat is not None else (getattr(model, "compat", None) or {})
        raw = source.get("reasoningEffortMap") if isinstance(source, Mapping) else None
    if not raw or not isinstance(raw, Mapping):
        return None
    return {str(k): v for k, v in raw.items() if v is None or isinstance(v, str)}


def supported_levels(model: Any, compat: Optional[Mapping[str, Any]] = None) -> Tuple[str, ...]:
    """The thinking levels ``model`` accepts (``"off"`` included), in order.

    Not a reasoning model: only ``"off"``. Without a map: ``off`` ... ``high``, plus ``xhigh`` when
    :func:`supports_xhigh`. With a map (reference semantics): every level not mapped to None, where
    ``xhigh`` and ``max`` must be mapped explicitly.
    """
    if not getattr(model, "reasoning", False):
        return ("off",)
    level_map = thinking_level_map(model, compat)
    if level_map is None:
        return ("off", "minimal", "low", "medium", "high") + (("xhigh",) if supports_xhigh(model) else ())
    out = []
    for level in _ALL_LEVELS:
        if level in level_map and level_map[level] is None:
            continue
        if level in ("xhigh", "max") and level not in level_map:
            continue
        out.append(level)
    return tuple(out)


def clamp_to_model(model: Any, level: str, compat: Optional[Mapping[str, Any]] = None) -> str:
    """``level`` if the model's map supports it, else the nearest supported level, searching
    upward first, then downward (the reference's ``clampThinkingLevel``). May return ``"off"``.
    Without a map ``level`` is returned unchanged: the wire's own rules apply."""
    if thinking_level_map(model, compat) is None:
        return level
    available = supported_levels(model, compat)
    if level in available:
        return level
    if level not in _ALL_LEVELS:
        return available[0] if available else "off"
    wanted = _ALL_LEVELS.index(level)
    for candidate in _ALL_LEVELS[wanted:] + tuple(reversed(_ALL_LEVELS[:wanted])):
        if candidate in available:
            return candidate
    return "off"


def mapped_effort(model: Any, level: str, compat: Optional[Mapping[str, Any]] = None) -> Optional[str]:
    """The provider value the model's map gives ``level`` (after :func:`clamp_to_model`), or None
    when the model has no map or the map has no string for it (the wire's default then applies)."""
    level_map = thinking_level_map(model, compat)
    if level_map is None:
        return None
    value = level_map.get(clamp_to_model(model, level, compat))
    return value if isinstance(value, str) else None


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

"""What the plugin registries hold and report: lookup errors and the records of plugins and keys.

Data only (frozen dataclasses, ``KeyError`` subclasses with readable messages) and pure helpers;
public through :mod:`agentcore.plugins`, their documented path.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Optional, Tuple

__all__ = ["UnknownToolError", "UnknownProviderError", "UnknownModelError", "PluginInfo", "RegistryEntry"]


class _LookupError(KeyError):
    """A ``KeyError`` whose ``str()`` is the readable message (KeyError would quote it)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class UnknownToolError(_LookupError):
    """No tool of that name is registered."""


class UnknownProviderError(_LookupError):
    """No provider is registered for that wire API."""


class UnknownModelError(_LookupError):
    """No model of that ``provider/id`` is registered."""


def _not_found(kind: str, key: str, known: Iterable[str], hint: str) -> str:
    known = sorted(known)
    close = difflib.get_close_matches(key, known, n=5, cutoff=0.5)
    text = f"unknown {kind} {key!r}"
    if close:
        text += " (did you mean " + ", ".join(repr(c) for c in close) + "?)"
    elif known:
        shown = ", ".join(known[:20]) + (", ..." if len(known) > 20 else "")
        text += f" (registered: {shown})"
    else:
        text += f" (no {kind}s are registered)"
    return f"{text}. {hint}"


@dataclass(frozen=True)
class PluginInfo:
    """One line of :func:`plugins_info`.

    ``error`` is None for a working plugin, otherwise why it could not be imported or why one of its
    ``register_*`` hooks failed. ``provides`` maps ``"tool"``/``"provider"``/``"model"`` to the keys
    this plugin registered that are in effect (not replaced by a later plugin).
    """

    name: str
    distribution: Optional[str]
    version: Optional[str]
    hooks: Tuple[str, ...]
    error: Optional[str] = None
    builtin: bool = False
    entry_point: Optional[str] = None
    provides: Dict[str, Tuple[str, ...]] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class RegistryEntry:
    """One registry key: the object in effect, the plugin that registered it (``source``) and the
    plugins whose registrations of the same key it replaced or that were ignored (``shadowed``)."""

    kind: str
    key: str
    value: Any = field(hash=False)
    source: str = ""
    shadowed: Tuple[str, ...] = ()


@dataclass
class _Loaded:
    """A plugin imported once per process: built-in module or entry point (``obj`` None on error)."""

    name: str
    obj: Any
    builtin: bool
    distribution: Optional[str] = None
    version: Optional[str] = None
    entry_point: Optional[str] = None
    error: Optional[str] = None


#: What each kind of registered object must be able to do: the method the registry's users call.
_METHODS = {
    "tool": ("execute", "execute(tool_call_id, args, signal, on_update)"),
    "provider": ("stream", "stream(model, context, **options)"),
    "storage": ("open", "open(url, *, read_only, create)"),
}


def _registry_key(kind: str, obj: Any) -> str:
    """The registry key of ``obj`` as a ``kind``; TypeError naming what is missing when ``obj``
    has no usable key or lacks the method callers use (a provider without ``stream`` would
    otherwise replace a working one and fail every model request). Messages name the object's
    type and key, never its repr: a provider's repr may hold its API key."""
    if kind == "tool":
        key = getattr(obj, "name", None)
    elif kind == "provider":
        key = getattr(obj, "api", None)
    elif kind == "storage":
        key = getattr(obj, "scheme", None)
        key = key.lower() if isinstance(key, str) else key
    else:
        provider, model_id = getattr(obj, "provider", None), getattr(obj, "id", None)
        key = f"{provider}/{model_id}" if provider and model_id else None
    if not isinstance(key, str) or not key:
        need = {
            "tool": "a non-empty .name",
            "provider": "a non-empty .api",
            "model": "non-empty .provider and .id",
            "storage": "a non-empty .scheme",
        }[kind]
        raise TypeError(f"cannot register a {type(obj).__name__} object as a {kind}: it needs {need}")
    method = _METHODS.get(kind)
    if method is not None and not callable(getattr(obj, method[0], None)):
        raise TypeError(f"cannot register {kind} {key!r} ({type(obj).__name__}): it needs a callable .{method[1]}")
    return key

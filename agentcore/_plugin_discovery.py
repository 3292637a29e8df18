"""Finding plugins: the ``agentcore`` entry points of installed distributions, and checking one.

Pure functions, no process-wide state (the once-per-process caches are in :mod:`agentcore.plugins`).
Imported on the first plugin load, never at ``import agentcore``.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Optional, Tuple

import pluggy

from . import _DISTRIBUTION, hookspecs
from .hookspecs import PROJECT_NAME

ENTRY_POINT_GROUP = "agentcore"


def _missing_module(exc: ModuleNotFoundError, module: str) -> bool:
    """True when ``exc`` says ``module`` itself (or a parent package of it) does not exist."""
    missing = exc.name or ""
    return bool(missing) and (module == missing or module.startswith(missing + "."))


def _hooks_of(obj: Any, name: str) -> Tuple[str, ...]:
    """Validate ``obj`` as a plugin on a scratch manager and return its hook names (or raise)."""
    scratch = pluggy.PluginManager(PROJECT_NAME)
    scratch.add_hookspecs(hookspecs)
    scratch.register(obj, name=name)
    return tuple(sorted(caller.name for caller in scratch.get_hookcallers(obj) or ()))


def _agentcore_version() -> Optional[str]:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(_DISTRIBUTION)
    except PackageNotFoundError:  # a source tree that was never installed
        return None


def _iter_entry_points() -> Iterable[Tuple[Any, Optional[str], Optional[str]]]:
    """Yield ``(entry_point, distribution name, version)`` for the group, once per distribution.

    Reads each distribution's small ``entry_points.txt`` first and parses the (slow) METADATA only
    of distributions that declare the group: this keeps a scan of a large environment cheap.
    """
    from importlib.metadata import distributions

    seen = set()
    for dist in distributions():
        norm = getattr(dist, "_normalized_name", None)
        try:
            if norm is None:
                norm = _normalize(dist.metadata["Name"])
            if norm in seen:
                continue  # the same distribution found twice on sys.path: the first one wins
            seen.add(norm)
            text = dist.read_text("entry_points.txt") or ""
            if f"[{ENTRY_POINT_GROUP}]" not in text:
                continue
            eps = [ep for ep in dist.entry_points if ep.group == ENTRY_POINT_GROUP]
            name, version = dist.metadata["Name"], dist.version
        except Exception:  # malformed metadata: skip that distribution, not the scan
            continue
        for ep in eps:
            yield ep, name, version


def _normalize(name: Optional[str]) -> str:
    return re.sub(r"[-_.]+", "_", name or "").lower()

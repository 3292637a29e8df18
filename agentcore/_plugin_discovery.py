"""Finding plugins: the ``agentcore`` entry points of installed distributions, and checking one.

Pure functions, no process-wide state (the once-per-process caches are in :mod:`agentcore.plugins`).
Imported on the first plugin load, never at ``import agentcore``.
"""

from __future__ import annotations

import difflib
import inspect
import re
import types
from typing import Any, Iterable, List, Optional, Tuple

import pluggy

from . import _DISTRIBUTION, hookspecs
from .hookspecs import PROJECT_NAME

ENTRY_POINT_GROUP = "agentcore"


def _missing_module(exc: ModuleNotFoundError, module: str) -> bool:
    """True when ``exc`` says ``module`` itself (or a parent package of it) does not exist."""
    missing = exc.name or ""
    return bool(missing) and (module == missing or module.startswith(missing + "."))


def _hooks_of(obj: Any, name: str) -> Tuple[str, ...]:
    """Validate ``obj`` as a plugin on a scratch manager and return its hook names (or raise
    ``pluggy.PluginValidationError``, also for an implementation of a hook that does not exist)."""
    scratch = pluggy.PluginManager(PROJECT_NAME)
    scratch.add_hookspecs(hookspecs)
    scratch.register(obj, name=name)
    check_known_hooks(scratch, obj, name)
    return tuple(sorted(caller.name for caller in scratch.get_hookcallers(obj) or ()))


def check_known_hooks(pm: pluggy.PluginManager, plugin: Any, name: str) -> None:
    """Raise ``pluggy.PluginValidationError`` naming ``name`` for a registered ``plugin`` whose hooks
    pluggy accepted but agentcore would never call correctly:

    * an ``@hookimpl`` of a hook that has no spec (a misspelt ``register_tool``: nothing would ever
      call it); one marked ``optionalhook=True`` is pluggy's way to say so on purpose and passes;
    * a class whose hook implementations are methods (``plugins=[MyPlugin]``, or an entry point
      naming ``module:MyPlugin``): pluggy would call them without ``self``, so every call would
      fail with a TypeError about a missing argument. An instance is what to register.

    Call after ``pm.register(plugin)``; ``pm`` is left as it is.
    """
    if inspect.isclass(plugin):
        methods = sorted(
            attr
            for attr in dir(plugin)
            if isinstance(inspect.getattr_static(plugin, attr, None), types.FunctionType)
            and getattr(getattr(plugin, attr), f"{PROJECT_NAME}_impl", None) is not None
        )
        if methods:
            raise pluggy.PluginValidationError(
                plugin,
                f"Plugin {name!r} is the class {plugin.__name__}, whose hook implementations "
                f"({', '.join(methods)}) are methods: register an instance, {plugin.__name__}() (for an "
                f"entry point, name a module attribute holding one: PLUGIN = {plugin.__name__}())",
            )
    unknown: List[str] = []
    for caller in pm.get_hookcallers(plugin) or ():
        if caller.has_spec():
            continue
        if any(impl.plugin is plugin and not impl.optionalhook for impl in caller.get_hookimpls()):
            unknown.append(caller.name)
    if not unknown:
        return
    known = [n for n in dir(pm.hook) if not n.startswith("_") and getattr(pm.hook, n).has_spec()]
    described = []
    for hook in sorted(unknown):
        close = difflib.get_close_matches(hook, known, n=1, cutoff=0.6)
        described.append(f"{hook!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    raise pluggy.PluginValidationError(
        plugin,
        f"Plugin {name!r} implements unknown hook(s) {', '.join(described)}, which agentcore never calls: "
        f"rename them after a hook of agentcore.hookspecs (or mark one optionalhook=True on purpose)",
    )


def _agentcore_version() -> Optional[str]:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(_DISTRIBUTION)
    except PackageNotFoundError:  # a source tree that was never installed
        return None


def _iter_entry_points() -> Iterable[Tuple[Any, Optional[str], Optional[str]]]:
    """Yield ``(entry_point, distribution name, version)`` for the group, once per distribution,
    ordered by distribution name, then entry-point name: the registration order (and so which of
    two plugins registering the same name wins) is the same on every machine, not the order a
    directory listing of site-packages happens to give.

    Reads each distribution's small ``entry_points.txt`` first and parses the (slow) METADATA only
    of distributions that declare the group: this keeps a scan of a large environment cheap.
    """
    found = list(_scan_entry_points())
    found.sort(key=lambda item: (_normalize(item[1]), item[0].name))
    return found


def _scan_entry_points() -> Iterable[Tuple[Any, Optional[str], Optional[str]]]:
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

"""Loading the built-in and entry-point plugins, once per process, and the tables shared by managers.

What :mod:`agentcore.plugins` builds its managers from: the built-in plugin modules
(:data:`BUILTIN_PLUGINS`, :data:`USER_CONFIG_PLUGINS` and the default ``convert_to_llm``
converter) and the ``agentcore`` entry points, each imported once and remembered with its failure
(warned once, :class:`PluginLoadWarning`), and the provider/model registrations shared by every
manager holding those same plugins. :func:`forget` drops all of it (``plugins.reset_plugins``).
A forked child gets fresh locks (this module's and every manager's, :data:`managers`), so a fork
while another thread loads plugins or builds a registry never leaves the child waiting forever.
Imported with :mod:`agentcore.plugins`, never at ``import agentcore``.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
import warnings
import weakref
from typing import Any, Dict, List, Optional, Set, Tuple

from . import _DISTRIBUTION
from ._agent_plugins import DEFAULT_CONVERTER_NAME
from ._plugin_discovery import _agentcore_version, _hooks_of, _iter_entry_points, _missing_module
from ._plugin_records import RegistryEntry, _Loaded
from ._safe import describe_exception
from .hookspecs import hookimpl

_log = logging.getLogger("agentcore.plugins")  # the records keep the public module's logger name

AUTOLOAD_ENV = "AGENTCORE_DISABLE_PLUGIN_AUTOLOAD"


class PluginLoadWarning(UserWarning):
    """Warned once per process for each plugin that failed to import or to register."""


PluginLoadWarning.__module__ = "agentcore.plugins"  # its documented home (and what reprs show)


class _DefaultConverter:
    """The built-in ``convert_to_llm``: standard roles pass unchanged, agentcore's own message
    types (bash executions, custom messages, compaction and branch summaries) become user
    messages, anything else is dropped (:func:`agentcore.messages.convert_message`).

    A wrapper (``trylast``: the innermost one), so it answers after every implementation, for
    the messages none of them claimed, wherever and whenever the others were registered.
    """

    @hookimpl(wrapper=True, trylast=True)
    def convert_to_llm(self, message: Any) -> Any:
        result = yield
        if result is not None:
            return result
        from .messages import convert_message

        return convert_message(message)


lock = threading.RLock()  # guards the tables below and the managers of agentcore.plugins
#: Every live manager, whose registry lock a forked child renews (see _after_fork_in_child).
managers: weakref.WeakSet[Any] = weakref.WeakSet()
_builtins: Optional[List[_Loaded]] = None
_entry_points: Optional[List[_Loaded]] = None
_warned: Set[Any] = set()
#: (kind, base plugin names and ids) -> (base plugins, table, errors), see AgentPluginManager._base
shared_tables: Dict[Tuple[Any, ...], Tuple[Tuple[Any, ...], Dict[str, RegistryEntry], Dict[str, str]]] = {}
SHARED_KINDS = ("provider", "model")


def _autoload_disabled() -> bool:
    return os.environ.get(AUTOLOAD_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def warn_once(key: str, message: str) -> None:
    if key in _warned:
        return
    _warned.add(key)
    # One report per failure: without logging configured, a log record would be printed to stderr
    # by logging's last-resort handler next to the warning (the same text twice per command).
    if _log.hasHandlers():
        _log.warning("%s", message)
    warnings.warn(message, PluginLoadWarning, stacklevel=3)


def load_builtins() -> List[_Loaded]:
    """The built-in plugins: the default converter and the modules of ``plugins.BUILTIN_PLUGINS``
    and ``plugins.USER_CONFIG_PLUGINS`` (read there, their documented place), imported once."""
    global _builtins
    with lock:
        if _builtins is not None:
            return _builtins
        from . import plugins

        ver = _agentcore_version()
        loaded = [_Loaded(DEFAULT_CONVERTER_NAME, _DefaultConverter(), True, _DISTRIBUTION, ver)]
        for module in plugins.BUILTIN_PLUGINS + plugins.USER_CONFIG_PLUGINS:
            try:
                loaded.append(_Loaded(module, importlib.import_module(module), True, _DISTRIBUTION, ver))
            except ModuleNotFoundError as exc:
                if _missing_module(exc, module):
                    continue  # not part of this installation (yet)
                loaded.append(_Loaded(module, None, True, _DISTRIBUTION, ver, error=describe_exception(exc)))
            except Exception as exc:  # a broken built-in is reported, never fatal
                loaded.append(_Loaded(module, None, True, _DISTRIBUTION, ver, error=describe_exception(exc)))
        for rec in loaded:
            if rec.error:
                warn_once(rec.name, f"agentcore: built-in plugin {rec.name} failed to import: {rec.error}")
        _builtins = loaded
        return loaded


def load_entry_point(ep: Any, dist: Optional[str], version: Optional[str]) -> _Loaded:
    rec = _Loaded(ep.name, None, False, dist, version, entry_point=ep.value)
    try:
        obj = ep.load()
        _hooks_of(obj, ep.name)
        rec.obj = obj
    except BaseException as exc:  # noqa: B902 - a plugin may even call sys.exit() on import
        if isinstance(exc, KeyboardInterrupt):
            raise
        rec.error = describe_exception(exc)
        warn_once(
            f"ep:{dist}:{ep.name}",
            f"agentcore: plugin {ep.name!r} from distribution {dist!r} failed to load "
            f"({ep.value}): {rec.error}. Other plugins are unaffected; fix or uninstall it, "
            f"or set {AUTOLOAD_ENV}=1.",
        )
    return rec


def load_entry_points() -> List[_Loaded]:
    global _entry_points
    with lock:
        if _entry_points is not None:
            return _entry_points
        loaded: List[_Loaded] = []
        if not _autoload_disabled():
            for ep, dist, version in _iter_entry_points():
                loaded.append(load_entry_point(ep, dist, version))
        _entry_points = loaded
        return loaded


def _after_fork_in_child() -> None:
    """Fresh locks for a forked child, whose only thread is the one that forked.

    Another thread of the parent may have held the loading lock (scanning the installed
    distributions) or a manager's registry lock (a ``register_tools`` hook connecting to its
    servers) at the fork: the child would wait forever for a thread it does not have. Nothing it
    guarded is lost: the loaded plugins and the tables are published whole, after they are built,
    so the child builds what was in progress again. (A plugin module another thread was importing
    at the fork stays half-imported in the child, and importing it there waits on CPython's own
    module lock; forking a process whose threads import is unsafe in general.)
    """
    global lock
    lock = threading.RLock()
    for pm in list(managers):
        pm._registry_lock = threading.RLock()


if hasattr(os, "register_at_fork"):  # pragma: no branch - POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)


def forget() -> None:
    """Drop the loaded plugin records, the failures already warned about and the shared tables
    (call with :data:`lock` held)."""
    global _builtins, _entry_points
    _builtins = None
    _entry_points = None
    _warned.clear()
    shared_tables.clear()


def failed_records() -> List[_Loaded]:
    """The built-in and entry-point plugins that failed to import (loaded so far)."""
    return [r for r in (_builtins or []) + (_entry_points or []) if r.error]

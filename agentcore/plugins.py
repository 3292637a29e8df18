"""Plugin managers, entry-point discovery, the tool/provider/model registries and the hook adapter.

An :class:`~agentcore.agent.Agent` without plugins or hooks of its own uses one shared, prebuilt
:class:`AgentPluginManager` (:func:`shared_agent_manager`); one that has some (or whose
``agent.plugins`` is used) owns a manager made by :func:`create_plugin_manager`. A manager holds, in
registration order:

1. the built-in plugins (:data:`BUILTIN_PLUGINS`, plus the built-in ``convert_to_llm`` converter);
2. the third-party plugins of the ``agentcore`` entry-point group, unless
   ``AGENTCORE_DISABLE_PLUGIN_AUTOLOAD=1``;
3. the user's configuration (:data:`USER_CONFIG_PLUGINS`: the user's ``models.json``);
4. the agent's own plugins (``Agent(plugins=[...])``) and its constructor callables.

Entry points are discovered and imported once per process, lazily: on the first manager creation or
the first registry lookup, never at ``import agentcore``. Each entry point loads inside its own
try/except; a failure is warned about once, remembered and listed by :func:`plugins_info`, and never
breaks other plugins.

The registries (tools by name, providers by wire API, models by ``"provider/id"``) are built from the
``register_tools``/``register_providers``/``register_models`` hooks of a manager (and the session
URL schemes from ``register_storages``), each kind on its
first lookup, cached, and rebuilt when a plugin is registered or unregistered. For a duplicate key
the plugin registered later wins; a plugin cannot replace its own earlier registration. The provider
and model registrations of the built-in and entry-point plugins are computed once per process and
shared by every manager holding those plugins (their objects were shared already: the catalog models
and provider instances); only the manager's own plugins are merged on top. Tools are built per
manager, so each agent gets its own tool objects. The module-level functions (:func:`get_tool`,
:func:`get_provider`, :func:`get_model`, :func:`models`, ...) use one process-wide default manager.

The registry errors and records live in ``_plugin_records.py``, entry-point discovery in
``_plugin_discovery.py``, and the once-per-process loading of the built-in and entry-point plugins
(with the tables managers share) in ``_plugin_loading.py``; their public names are re-exported
here, their documented path.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import threading
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

import pluggy

from . import _plugin_loading as _loading
from . import hookspecs
from ._plugin_discovery import ENTRY_POINT_GROUP, check_known_hooks
from ._plugin_loading import AUTOLOAD_ENV, PluginLoadWarning
from ._plugin_records import (
    PluginInfo,
    RegistryEntry,
    UnknownModelError,
    UnknownProviderError,
    UnknownToolError,
    _Loaded,
    _not_found,
    _registry_key,
)
from ._safe import describe_exception
from ._util import awaited
from .hookspecs import PROJECT_NAME

if TYPE_CHECKING:
    from .tools import AgentTool
    from .types import Model

__all__ = [
    "AUTOLOAD_ENV",
    "BUILTIN_PLUGINS",
    "USER_CONFIG_PLUGINS",
    "ENTRY_POINT_GROUP",
    "AgentPluginManager",
    "AgentHooks",
    "PluginInfo",
    "RegistryEntry",
    "PluginLoadWarning",
    "UnknownToolError",
    "UnknownProviderError",
    "UnknownModelError",
    "create_plugin_manager",
    "default_plugin_manager",
    "callables_plugin",
    "merge_after_tool_call",
    "plugins_info",
    "get_tool",
    "tools",
    "get_provider",
    "providers",
    "provider_options",
    "get_model",
    "models",
    "registry_entries",
    "reset_plugins",
]

#: Built-in plugin modules, registered first (so every third-party plugin can override them). A
#: module that does not exist in this installation is skipped quietly; any other import error is
#: reported like a broken third-party plugin.
BUILTIN_PLUGINS: List[str] = [
    "agentcore.messages",
    "agentcore.providers._plugin",
    "agentcore.builtin_tools",
    "agentcore.testing",
    "agentcore._session_schemes",
]

#: Built-in plugins registered after the entry-point plugins: the user's own configuration (the
#: ``models.json`` of :mod:`agentcore.providers.user_models`), which wins over every installed plugin.
USER_CONFIG_PLUGINS: List[str] = ["agentcore.providers.user_models"]


_default_pm: Optional[AgentPluginManager] = None  # behind the module-level registry functions
_shared_pm: Optional[AgentPluginManager] = None  # of every Agent without plugins of its own

_REGISTER_HOOKS = {
    "tool": "register_tools",
    "provider": "register_providers",
    "model": "register_models",
    "storage": "register_storages",
}


def reset_plugins() -> None:
    """Forget discovered entry points, built-ins and the default manager, so the next use re-scans.

    Meant for tests (after changing ``sys.path`` or the autoload switch). Existing managers keep
    the plugins they hold.
    """
    global _default_pm, _shared_pm
    with _loading.lock:
        _loading.forget()
        _default_pm = None
        _shared_pm = None


# --------------------------------------------------------------------------- the manager


class AgentPluginManager(pluggy.PluginManager):
    """A ``pluggy.PluginManager`` for project ``"agentcore"`` with cached registries.

    Registering or unregistering a plugin invalidates the registries, so
    ``agent.plugins.register(obj)`` makes ``obj``'s tools and providers visible at once.
    """

    def __init__(self) -> None:
        super().__init__(PROJECT_NAME)
        self.add_hookspecs(hookspecs)
        self._order: Dict[str, int] = {}
        self._counter = itertools.count()
        self._registry_lock = threading.RLock()
        self._registries: Dict[str, Dict[str, RegistryEntry]] = {}  # kind -> table, built on demand
        self._kind_errors: Dict[str, Dict[str, str]] = {}  # kind -> plugin name -> failure
        self._loaded_records: Dict[str, _Loaded] = {}
        _loading.managers.add(self)  # its registry lock is renewed in a forked child

    def register(self, plugin: Any, name: Optional[str] = None) -> Optional[str]:
        """Register ``plugin`` (named after its ``__name__``/``name``/class when ``name`` is None).

        Raises ``pluggy.PluginValidationError`` naming the plugin, and registers nothing, for an
        implementation pluggy refuses (an argument the hook does not have), of a hook that does
        not exist (a misspelt ``register_tool``, which nothing would ever call), or for a class
        whose hook implementations are methods (``plugins=[MyPlugin]`` where ``MyPlugin()`` was
        meant: each call would fail for the missing ``self``).
        """
        if name is None:
            name = _plugin_name(plugin, self)
        registered = super().register(plugin, name)
        if registered is not None:
            try:
                check_known_hooks(self, plugin, registered)
            except pluggy.PluginValidationError:
                super().unregister(plugin, registered)
                raise
            self._order[registered] = next(self._counter)
            self._invalidate()
        return registered

    def unregister(self, plugin: Any = None, name: Optional[str] = None) -> Any:
        if name is None and plugin is not None:
            name = self.get_name(plugin)
        removed = super().unregister(plugin, name)
        self._order.pop(name or "", None)
        self._invalidate()
        return removed

    def _invalidate(self) -> None:
        with self._registry_lock:
            self._registries = {}
            self._kind_errors = {}

    # -- registries

    def _impls_by_registration(self, hook_name: str) -> List[Any]:
        impls = [
            i
            for i in getattr(self.hook, hook_name).get_hookimpls()
            if not (i.hookwrapper or getattr(i, "wrapper", False))
        ]
        return sorted(impls, key=lambda i: self._order.get(i.plugin_name, -1))

    def _build(self, kind: str) -> Tuple[Dict[str, RegistryEntry], Dict[str, str]]:
        """The ``kind`` table and the failures of its register hooks (plugin name -> message)."""
        impls = self._impls_by_registration(_REGISTER_HOOKS[kind])
        table: Dict[str, RegistryEntry] = {}
        errors: Dict[str, str] = {}
        done = 0
        if kind in _loading.SHARED_KINDS:
            done, table, errors = self._base(kind, impls)
        for impl in impls[done:]:
            err = self._run_register(kind, impl, table)
            if err:
                errors[impl.plugin_name] = err
        hook_name = _REGISTER_HOOKS[kind]
        for impl in getattr(self.hook, hook_name).get_hookimpls():
            if impl.hookwrapper or getattr(impl, "wrapper", False):  # skipped above: say so, never silently
                message = (
                    f"{hook_name} is implemented as a wrapper, which a register_* hook never calls: "
                    "drop wrapper=True (call register() for each object)"
                )
                _loading.warn_once(
                    f"reg:{impl.plugin_name}:{kind}:wrapper", f"agentcore: plugin {impl.plugin_name!r}: {message}"
                )
                errors.setdefault(impl.plugin_name, message)
        return table, errors

    def _base(self, kind: str, impls: List[Any]) -> Tuple[int, Dict[str, RegistryEntry], Dict[str, str]]:
        """Copies of the shared table and errors of the leading built-in/entry-point impls, and
        how many impls they cover. Computed by the first manager with those same plugins in the
        same order; later-registered plugins win over them, so merging on top keeps the rules."""
        count = 0
        for impl in impls:
            rec = self._loaded_records.get(impl.plugin_name)
            if rec is None or rec.obj is not impl.plugin:
                break
            count += 1
        if not count:
            return 0, {}, {}
        plugins = tuple(impl.plugin for impl in impls[:count])
        key = (kind,) + tuple((impl.plugin_name, id(impl.plugin)) for impl in impls[:count])
        with _loading.lock:
            shared = _loading.shared_tables.get(key)
            if shared is None or any(a is not b for a, b in zip(shared[0], plugins)):
                table: Dict[str, RegistryEntry] = {}
                errors: Dict[str, str] = {}
                for impl in impls[:count]:
                    err = self._run_register(kind, impl, table)
                    if err:
                        errors[impl.plugin_name] = err
                if len(_loading.shared_tables) >= 16:  # only tests switch base plugins; stay bounded
                    _loading.shared_tables.clear()
                shared = _loading.shared_tables[key] = (plugins, table, errors)
        return count, dict(shared[1]), dict(shared[2])

    @property
    def _register_errors(self) -> Dict[str, str]:
        """Register-hook failures per plugin name, over the kinds built so far (in kind order)."""
        errors: Dict[str, str] = {}
        with self._registry_lock:
            for kind in _REGISTER_HOOKS:
                for name, err in self._kind_errors.get(kind, {}).items():
                    previous = errors.get(name)
                    errors[name] = f"{previous}; {err}" if previous else err
        return errors

    def _run_register(self, kind: str, impl: Any, table: Dict[str, RegistryEntry]) -> Optional[str]:
        source = impl.plugin_name
        rank = self._order.get(source, -1)

        def register(obj: Any) -> None:
            key = _registry_key(kind, obj)
            old = table.get(key)
            if old is None:
                table[key] = RegistryEntry(kind, key, obj, source)
            elif self._order.get(old.source, -1) < rank:
                table[key] = RegistryEntry(kind, key, obj, source, old.shadowed + (old.source,))
            else:
                table[key] = dataclasses.replace(old, shadowed=old.shadowed + (source,))

        try:
            _check_register_result(kind, awaited(impl.function(*[register for _ in impl.argnames])))
        except Exception as exc:
            message = f"{_REGISTER_HOOKS[kind]} failed: {describe_exception(exc)}"
            _loading.warn_once(f"reg:{source}:{kind}:{exc}", f"agentcore: plugin {source!r}: {message}")
            return message
        return None

    def registry(self, kind: str) -> Dict[str, RegistryEntry]:
        """The ``kind`` registry (``"tool"``, ``"provider"``, ``"model"`` or ``"storage"``): key -> entry."""
        # Built already: no lock. Every model request of every agent thread looks its provider up
        # here; with 200 agents on threads the lock was contended on each one. A table is only
        # ever replaced whole (under the lock), so an unlocked read sees a complete one.
        table = self._registries.get(kind)
        if table is not None:
            return table
        if kind not in _REGISTER_HOOKS:
            raise ValueError(f"unknown registry kind {kind!r}; use one of {sorted(_REGISTER_HOOKS)}")
        with self._registry_lock:
            table = self._registries.get(kind)
            if table is None:
                table, self._kind_errors[kind] = self._build(kind)
                self._registries[kind] = table
            return table

    def _lookup(self, kind: str, key: str, error: type, label: str, hint: str) -> Any:
        table = self.registry(kind)
        entry = table.get(key)
        if entry is None:
            raise error(_not_found(label, key, table, hint))
        return entry.value

    def get_tool(self, name: str) -> AgentTool:
        """The tool registered under ``name``; raises :class:`UnknownToolError` (a KeyError).

        When plugins failed to load, the message names them and their errors first: the tool may
        be one of theirs, and "install the plugin" would be the wrong advice.
        """
        return self._lookup(
            "tool",
            name,
            UnknownToolError,
            "tool",
            _failed_plugins_hint()
            + ("Pass an AgentTool object, or install the plugin that provides it (see `agentcore plugins`)."),
        )

    def tools(self) -> List[AgentTool]:
        """Every registered tool in effect, sorted by name."""
        return [e.value for _, e in sorted(self.registry("tool").items())]

    def get_provider(self, api: str) -> Any:
        """The provider of wire API ``api``; raises :class:`UnknownProviderError` (a KeyError)."""
        return self._lookup(
            "provider",
            api,
            UnknownProviderError,
            "provider api",
            "Set Model.api to a registered wire API, or install the plugin that provides it (see `agentcore plugins`).",
        )

    def providers(self) -> List[Any]:
        """Every registered provider in effect, sorted by API name."""
        return [e.value for _, e in sorted(self.registry("provider").items())]

    def provider_options(self) -> Dict[str, str]:
        """The options the registered providers read beyond :class:`~agentcore.options.StreamOptions`,
        name -> description: each provider may declare them in a ``stream_options`` mapping (name
        -> one line). What ``Agent(name=...)``, ``AgentLoopConfig(name=...)`` and ``-o NAME VALUE``
        accept besides the fields; a name that is a field is not taken from a provider."""
        from .options import declared_options

        declared: Dict[str, str] = {}
        for provider in self.providers():
            for name, doc in declared_options(provider).items():
                declared.setdefault(name, f"{doc} ({getattr(provider, 'api', '?')})")
        return declared

    def get_model(self, ref: str, model_id: Optional[str] = None) -> Model:
        """A registered model: ``get_model("provider/id")`` or ``get_model("provider", "id")``.

        A bare id (no ``/``) is accepted when exactly one provider has a model of that id. Raises
        :class:`UnknownModelError` (a KeyError) listing close matches, and TypeError naming the
        argument for a ``ref`` or ``model_id`` that is not a string.
        """
        for name, value in (("ref", ref), ("model_id", model_id)):
            if not isinstance(value, str) and not (name == "model_id" and value is None):
                raise TypeError(f'get_model({name}=...) takes a "provider/id" string, not {type(value).__name__}')
        table = self.registry("model")
        key = f"{ref}/{model_id}" if model_id is not None else ref
        entry = table.get(key)
        if entry is None and model_id is None and "/" not in ref:
            matches = [e for e in table.values() if getattr(e.value, "id", None) == ref]
            if len(matches) == 1:
                entry = matches[0]
            elif len(matches) > 1:
                raise UnknownModelError(
                    f"model id {ref!r} is ambiguous: "
                    + ", ".join(sorted(e.key for e in matches))
                    + '. Use the "provider/id" form.'
                )
        if entry is None:
            raise UnknownModelError(
                _not_found(
                    "model",
                    key,
                    table,
                    'Use "provider/id" (see `agentcore models`), or build '
                    "agentcore.Model(id=..., api=..., provider=..., base_url=...) yourself.",
                )
            )
        return entry.value

    def models(self, provider: Optional[str] = None) -> List[Model]:
        """Registered models (optionally of one provider), sorted by ``provider/id``."""
        entries = sorted(self.registry("model").items())
        return [e.value for _, e in entries if provider is None or getattr(e.value, "provider", None) == provider]

    def plugins_info(self) -> List[PluginInfo]:
        """One :class:`PluginInfo` per plugin of this manager, plus every plugin that failed to load."""
        provides: Dict[str, Dict[str, List[str]]] = {}
        for kind in _REGISTER_HOOKS:
            for key, entry in sorted(self.registry(kind).items()):
                provides.setdefault(entry.source, {}).setdefault(kind, []).append(key)
        infos: List[PluginInfo] = []
        for name, _ in sorted(self._order.items(), key=lambda item: item[1]):
            plugin = self.get_plugin(name)
            if plugin is None:
                continue
            rec = self._loaded_records.get(name)
            hooks = tuple(sorted(c.name for c in self.get_hookcallers(plugin) or ()))
            infos.append(
                PluginInfo(
                    name=name,
                    distribution=rec.distribution if rec else None,
                    version=rec.version if rec else None,
                    hooks=hooks,
                    error=self._register_errors.get(name),
                    builtin=bool(rec and rec.builtin),
                    entry_point=rec.entry_point if rec else None,
                    provides={k: tuple(v) for k, v in provides.get(name, {}).items()},
                )
            )
        for rec in _loading.failed_records():
            infos.append(
                PluginInfo(rec.name, rec.distribution, rec.version, (), rec.error, rec.builtin, rec.entry_point)
            )
        return infos


def _check_register_result(kind: str, result: Any) -> None:
    """Raise TypeError for what a ``register_*`` implementation returned instead of calling
    ``register``: its objects would be lost without a word (an ``async def`` implementation's
    coroutine was awaited already)."""
    if inspect.isgenerator(result):
        result.close()  # never started: nothing it would register ran
        raise TypeError(
            f"the implementation is a generator (it uses yield), so it never ran: call register({kind}) "
            f"for each {kind} without yield (wrappers do not apply to {_REGISTER_HOOKS[kind]})"
        )
    if result is None or (isinstance(result, (list, tuple)) and all(item is None for item in result)):
        return  # ``return [register(t) for t in ...]`` registered them all
    raise TypeError(
        f"it returned a {type(result).__name__}, which is ignored: call register({kind}) for each {kind} "
        f"and return None"
    )


def _failed_plugins_hint() -> str:
    """``"2 plugins failed to load, ...: 'broken' (RuntimeError: ...). "`` or ``""``."""
    failed = _loading.failed_records()
    if not failed:
        return ""
    shown = "; ".join(f"{r.name!r} ({r.error})" for r in failed[:3]) + ("; ..." if len(failed) > 3 else "")
    return (
        f"{len(failed)} plugin(s) failed to load and may provide it: {shown}. Fix or uninstall them "
        f"(`agentcore plugins` lists the errors). Otherwise: "
    )


def create_plugin_manager(
    plugins: Sequence[Any] = (),
    *,
    before_tool_call: Any = None,
    after_tool_call: Any = None,
    transform_context: Any = None,
) -> AgentPluginManager:
    """A new manager holding the built-ins, the entry-point plugins and ``plugins``.

    The keyword callables are the Agent constructor hooks; when any is given they become one plugin
    (see :func:`callables_plugin`) registered last, so they are called first. (An Agent's list-level
    ``convert_to_llm=`` is not a hook: see :class:`AgentHooks`.) A plugin of
    ``plugins`` that is not a valid plugin raises ``pluggy.PluginValidationError`` here. Entry points
    are discovered on the first call in the process.
    """
    pm = AgentPluginManager()
    builtins = _loading.load_builtins()
    first = [rec for rec in builtins if rec.name not in USER_CONFIG_PLUGINS]
    last = [rec for rec in builtins if rec.name in USER_CONFIG_PLUGINS]
    for rec in first + _loading.load_entry_points() + last:
        if rec.obj is None:
            continue
        try:
            name = pm.register(rec.obj, name=rec.name)
        except ValueError:  # the same module behind two entry points, or a duplicate name
            name = None
            if pm.is_registered(rec.obj):
                continue
            name = pm.register(rec.obj, name=f"{rec.distribution}:{rec.name}")
        if name:
            pm._loaded_records[name] = rec
    for plugin in plugins or ():
        if pm.is_registered(plugin):  # also loaded through its entry point, or listed twice
            continue
        pm.register(plugin)
    adapter = callables_plugin(
        before_tool_call=before_tool_call, after_tool_call=after_tool_call, transform_context=transform_context
    )
    if adapter is not None:
        pm.register(adapter)
    return pm


def _plugin_name(plugin: Any, pm: pluggy.PluginManager) -> str:
    base = getattr(plugin, "__name__", None)
    if not isinstance(base, str) or not base:
        base = getattr(plugin, "name", None)
    if not isinstance(base, str) or not base:
        base = type(plugin).__name__
    name, n = base, 2
    while pm.has_plugin(name):
        name, n = f"{base}#{n}", n + 1
    return name


def shared_agent_manager() -> AgentPluginManager:
    """The manager every Agent without plugins or hooks of its own uses (created on first use).

    It holds only the built-ins and the entry-point plugins, like a fresh
    :func:`create_plugin_manager`; sharing it makes ``Agent()`` cost microseconds instead of the
    ~0.5 ms of building a manager. Nothing registers on it: an agent that adds plugins or hooks
    (or whose ``agent.plugins`` is used) gets its own manager first. Dropped by
    :func:`reset_plugins`.
    """
    global _shared_pm
    pm = _shared_pm
    if pm is not None:
        return pm
    with _loading.lock:
        if _shared_pm is None:
            _shared_pm = create_plugin_manager()
        return _shared_pm


def default_plugin_manager() -> AgentPluginManager:
    """The process-wide manager behind the module-level registry functions (created on first use)."""
    global _default_pm
    with _loading.lock:
        if _default_pm is None:
            _default_pm = create_plugin_manager()
        return _default_pm


def plugins_info() -> List[PluginInfo]:
    """Every plugin of the default manager (built-ins first) and every plugin that failed to load."""
    return default_plugin_manager().plugins_info()


def get_tool(name: str) -> AgentTool:
    """The tool registered under ``name`` (built-ins and plugins); raises :class:`UnknownToolError`."""
    return default_plugin_manager().get_tool(name)


def tools() -> List[AgentTool]:
    """Every registered tool in effect, sorted by name."""
    return default_plugin_manager().tools()


def get_provider(api: str) -> Any:
    """The provider of wire API ``api``; raises :class:`UnknownProviderError` listing close matches."""
    return default_plugin_manager().get_provider(api)


def providers() -> List[Any]:
    """Every registered provider in effect, sorted by wire API name."""
    return default_plugin_manager().providers()


def provider_options() -> Dict[str, str]:
    """The extra options the registered providers declare (see
    :meth:`AgentPluginManager.provider_options`)."""
    return default_plugin_manager().provider_options()


def get_model(ref: str, model_id: Optional[str] = None) -> Model:
    """``get_model("anthropic/claude-sonnet-4-5")`` or ``get_model("anthropic", "claude-sonnet-4-5")``.

    Raises :class:`UnknownModelError` (a KeyError) listing close matches.
    """
    return default_plugin_manager().get_model(ref, model_id)


def models(provider: Optional[str] = None) -> List[Model]:
    """Registered models, optionally only those of ``provider``, sorted by ``provider/id``."""
    return default_plugin_manager().models(provider)


def registry_entries(kind: str) -> List[RegistryEntry]:
    """The default manager's ``kind`` registry with the winning plugin of each key (``source``)."""
    return [e for _, e in sorted(default_plugin_manager().registry(kind).items())]


# The hook adapter lives in its own module (one concept each); it is public from here.
from ._agent_hooks import AgentHooks, callables_plugin, merge_after_tool_call  # noqa: E402

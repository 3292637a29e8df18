"""Which plugin manager an :class:`~agentcore.agent.Agent` uses, and its constructor callables as hooks.

An agent without plugins or hooks of its own uses the process-wide
:func:`~agentcore.plugins.shared_agent_manager` (built-ins and entry points), so ``Agent()`` costs
no manager. It gets its own manager (a fresh :func:`~agentcore.plugins.create_plugin_manager`) as
soon as it has something that must not leak into other agents: ``Agent(plugins=[...])``, a
constructor callable (``before_tool_call``, ``after_tool_call``, ``transform_context``,
``convert_to_llm``) set at run start, or any use of ``agent.plugins`` (which may register things).

At the start of each run, and whenever the agent's own manager is read (``agent.plugins``) or one
of the callables is set while no run is active, the callables are (re)adapted into one plugin of
that own manager by :func:`~agentcore.plugins.callables_plugin`, registered last so it is called
first (so ``agent.plugins.hook.X(...)`` answers as the next run will act); when the agent
has a list-level ``convert_to_llm``, the built-in converter is taken out of its manager (that
callable replaces it). The loop then receives plain-pluggy callables (:class:`AgentHooks`), or None
for a hook nobody implements, so the common case pays nothing for pluggy.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Iterable, Optional, Tuple

from ._agent_hooks import AgentHooks, callables_plugin

__all__ = ["AgentPlugins", "observers_for_run", "registry_stream_fn"]

#: The plugin name of the built-in converter (defined here, where each run reads it).
DEFAULT_CONVERTER_NAME = "agentcore.default_converter"


_shared_manager: Optional[Callable[[], Any]] = None


def _shared_agent_manager() -> Any:
    """``plugins.shared_agent_manager()``; ``agentcore.plugins`` (and pluggy) is imported on the
    first call, not at ``import agentcore``, and no import statement runs on later calls."""
    global _shared_manager
    if _shared_manager is None:
        from .plugins import shared_agent_manager

        _shared_manager = shared_agent_manager
    return _shared_manager()


ADAPTER_NAME = "agentcore.agent-callables"


class AgentPlugins:
    """The manager of one agent: the shared one until the agent needs its own."""

    __slots__ = ("_own", "_adapter", "_adapted", "_lock", "_sync_lock")

    def __init__(self, plugins: Iterable[Any] = ()) -> None:
        self._own: Any = None
        self._lock = threading.Lock()  # one own manager, however many threads ask for it at once
        self._sync_lock = threading.Lock()  # one adapter registered, whichever threads sync at once
        self._adapter: Any = None
        self._adapted: Tuple[Any, ...] = (None, None, None)
        plugins = list(plugins or ())
        if plugins:
            from .plugins import create_plugin_manager

            self._own = create_plugin_manager(plugins)

    def manager(self) -> Any:
        """The manager in use now (the agent's own, else the shared one); never registers on it."""
        if self._own is not None:
            return self._own
        return _shared_agent_manager()

    def own(self) -> Any:
        """The agent's own manager, created on first call (once: two threads asking at the same
        time, say ``agent.plugins.register(...)`` while a run starts, get the same manager)."""
        pm = self._own
        if pm is None:
            with self._lock:
                pm = self._own
                if pm is None:
                    from .plugins import create_plugin_manager

                    pm = self._own = create_plugin_manager()
        return pm

    def has_own(self) -> bool:
        """Whether the agent has its own manager already."""
        return self._own is not None

    def sync(self, before_tool_call: Any, after_tool_call: Any, transform_context: Any, convert_to_llm: Any) -> Any:
        """Make the manager hold the callables set now: their adapter plugin (registered anew when
        they changed) and the built-in converter exactly when no list-level ``convert_to_llm``
        replaces it. Returns that manager: the agent's own one when it has callables, else the one
        in use. Thread-safe."""
        wanted = (before_tool_call, after_tool_call, transform_context)
        if any(fn is not None for fn in wanted) or convert_to_llm is not None:
            pm = self.own()
        else:
            pm = self.manager()
        with self._sync_lock:
            if wanted != self._adapted:
                if self._adapter is not None:
                    pm.unregister(self._adapter)
                self._adapter = callables_plugin(
                    before_tool_call=before_tool_call,
                    after_tool_call=after_tool_call,
                    transform_context=transform_context,
                    name=ADAPTER_NAME,
                )
                if self._adapter is not None:
                    pm.register(self._adapter, name=ADAPTER_NAME)
                self._adapted = wanted
            if pm is self._own:
                _place_default_converter(pm, present=convert_to_llm is None)
        return pm

    def hooks_for_run(
        self, before_tool_call: Any, after_tool_call: Any, transform_context: Any, convert_to_llm: Any
    ) -> AgentHooks:
        """:meth:`sync` with the callables set now; the run's :class:`AgentHooks`."""
        pm = self.sync(before_tool_call, after_tool_call, transform_context, convert_to_llm)
        return AgentHooks(pm, convert_to_llm)


def _place_default_converter(pm: Any, present: bool) -> None:
    """Register or unregister the built-in converter so that it is there exactly when wanted."""
    from ._plugin_loading import load_builtins

    registered = pm.get_plugin(DEFAULT_CONVERTER_NAME)
    if present and registered is None:
        for rec in load_builtins():
            if rec.name == DEFAULT_CONVERTER_NAME and rec.obj is not None:
                pm.register(rec.obj, name=DEFAULT_CONVERTER_NAME)
    elif not present and registered is not None:
        pm.unregister(registered, DEFAULT_CONVERTER_NAME)


def converter_for_run(hooks: AgentHooks, default: Callable[..., Any]) -> Callable[..., Any]:
    """What the loop calls to convert the transcript this run.

    Without any ``convert_to_llm`` implementation but the built-in converter, the answer of the
    hook is known without asking it: ``default`` (the built-in's list form), or the agent's own
    list converter when it replaced the built-in one.
    """
    impls = hooks.pm.hook.convert_to_llm.get_hookimpls()
    if all(impl.plugin_name == DEFAULT_CONVERTER_NAME for impl in impls):
        return hooks.list_converter if hooks.list_converter is not None and not impls else default
    return hooks.convert_to_llm


def optional_hook(hooks: AgentHooks, name: str) -> Optional[Callable[..., Any]]:
    """``hooks.<name>`` when something implements that hook (wrappers included), else None."""
    return getattr(hooks, name) if hooks.has(name) else None


Observer = Callable[[Any, Any], None]


def observers_for_run(hooks: AgentHooks) -> Tuple[Optional[Observer], Optional[Observer]]:
    """``(observe, observe_update)``: what the agent calls with ``(event, agent)`` for each event
    of this run, for every event but ``message_update`` and for ``message_update`` (None: nobody
    observes it, so a streamed token costs no hook call and no copy of the partial message).

    ``on_event`` implementations see every event; ``on_lifecycle_event`` ones every event but
    ``message_update``, after the ``on_event`` ones.
    """
    every = hooks.on_event if hooks.has("on_event") else None
    lifecycle = hooks.on_lifecycle_event if hooks.has("on_lifecycle_event") else None
    if every is None or lifecycle is None:
        return (every or lifecycle), every

    def observe(event: Any, agent: Any) -> None:
        every(event, agent)
        lifecycle(event, agent)

    return observe, every


def registry_stream_fn(pm: Any) -> Callable[..., Any]:
    """A stream function dispatching on ``model.api`` through ``pm``'s provider registry.

    An api nobody registered gives the providers' own clear error stream (never an exception).
    """

    def stream(model: Any, context: Any, **options: Any) -> Any:
        try:
            provider = pm.get_provider(model.api)
        except KeyError:
            from .providers import stream as providers_stream

            return providers_stream(model, context, **options)
        return provider.stream(model, context, **options)

    return stream

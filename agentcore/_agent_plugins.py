"""How an :class:`~agentcore.agent.Agent` routes its hooks through its own pluggy manager.

Every Agent owns a manager (``agent.plugins``) holding the built-ins, the entry-point plugins, the
plugins given to that agent, and one :class:`AgentAttributeHooks` plugin registered last. That
plugin implements ``before_tool_call``/``after_tool_call``/``transform_context``/``convert_to_llm``
by calling the agent's own attributes of the same names, as captured at the start of each run (so,
as in the reference design, changing ``agent.before_tool_call`` mid-run affects the next run).
Being registered last it is called first; the combination rules of ``hookspecs.py`` then apply
across it and every other plugin. Per-agent hooks therefore never leak into other agents.

When no plugin but the agent itself implements a hook, the agent's callable is handed to the loop
directly, so the common case pays nothing for pluggy.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional

from ._agent_hooks import AgentHooks, _call_order
from .hookspecs import hookimpl

__all__ = ["AgentAttributeHooks", "RunHooks", "registry_stream_fn"]

HOOK_ATTRIBUTES = ("before_tool_call", "after_tool_call", "transform_context", "convert_to_llm")


class AgentAttributeHooks:
    """The agent's constructor callables as hook implementations (one instance per agent).

    ``snapshot`` holds the callables captured at run start; None entries mean "not set".
    """

    def __init__(self) -> None:
        self.snapshot: Dict[str, Optional[Callable[..., Any]]] = dict.fromkeys(HOOK_ATTRIBUTES)

    @property
    def _agentcore_convert_list(self) -> Optional[Callable[..., Any]]:
        # AgentHooks.convert_to_llm hands the whole message list to a list-level converter.
        return self.snapshot["convert_to_llm"]

    @hookimpl
    def before_tool_call(self, context: Any, signal: Any) -> Any:
        fn = self.snapshot["before_tool_call"]
        return fn(context, signal) if fn is not None else None

    @hookimpl
    def after_tool_call(self, context: Any, signal: Any) -> Any:
        fn = self.snapshot["after_tool_call"]
        return fn(context, signal) if fn is not None else None

    @hookimpl
    def transform_context(self, messages: Any, signal: Any) -> Any:
        fn = self.snapshot["transform_context"]
        return fn(messages, signal) if fn is not None else None

    @hookimpl(trylast=True)
    def convert_to_llm(self, message: Any) -> Any:
        fn = self.snapshot["convert_to_llm"]
        if fn is None:
            return None
        from .messages import DROP

        out = list(fn([message]))
        return DROP if not out else (out[0] if len(out) == 1 else out)

    def __repr__(self) -> str:
        return "<agent attribute hooks>"


class RunHooks:
    """The four loop callables of one run, chosen from the agent's snapshot and its manager."""

    def __init__(self, pm: Any, own: AgentAttributeHooks, default_converter: Callable[..., Any]) -> None:
        self._pm = pm
        self._own = own
        self._hooks = AgentHooks(pm)
        self._default_converter = default_converter
        # Decided once per run: events are hot (one per streamed token), plugin changes are not.
        self._observes_events = bool(_call_order(pm.hook.on_event))

    def _others(self, hook_name: str) -> bool:
        """True when a plugin other than the agent's own hooks and built-in converter implements it."""
        for impl in _call_order(getattr(self._pm.hook, hook_name)):
            if impl.plugin is self._own:
                continue
            if hook_name == "convert_to_llm" and impl.plugin_name == "agentcore.default_converter":
                continue
            return True
        return False

    def callable_for(self, hook_name: str) -> Optional[Callable[..., Any]]:
        """What the loop should call for ``hook_name`` this run (None: nothing to call)."""
        own = self._own.snapshot[hook_name]
        if not self._others(hook_name):
            if hook_name == "convert_to_llm":
                return own or self._default_converter
            return own
        return getattr(self._hooks, hook_name)

    def observes_events(self) -> bool:
        """True when some plugin implements ``on_event`` (as of the start of the run)."""
        return self._observes_events

    def on_event(self, event: Any, agent: Any) -> None:
        self._hooks.on_event(event, agent)


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

"""The loop's callables built on plain pluggy calls, and the one adapter for constructor callables.

:class:`AgentHooks` wraps one plugin manager; its methods have the signatures of the loop's callables
(``before_tool_call(ctx, signal)``, ``after_tool_call(ctx, signal)``, ``transform_context(messages,
signal)``, ``convert_to_llm(messages)``) plus ``on_event(event, agent)`` and
``on_lifecycle_event(event, agent)``. Each is one plain
``pm.hook.X(...)`` call whose answer is used as the markers and docstrings of
:mod:`agentcore.hookspecs` say, so a third party calling ``pm.hook.X`` gets what the agent acts on,
and hook wrappers (``wrapper=True``/``hookwrapper=True``) work on every hook.

:func:`callables_plugin` turns an Agent's constructor callables (the reference's shapes) into one
plugin object for that agent's own manager. Both are public through :mod:`agentcore.plugins`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Iterable, List, Mapping, Optional, Tuple

from ._loop_types import _OVERRIDE_FIELDS, check_verdict, merge_after_tool_call
from ._util import accepts_signal, awaited, field_of, hook_messages
from .hookspecs import hookimpl

if TYPE_CHECKING:
    import pluggy

__all__ = ["AgentHooks", "callables_plugin", "merge_after_tool_call"]

_log = logging.getLogger("agentcore.plugins")


ERR_TRANSFORM_RETURNED = (
    "a transform_context hook implementation returned a {kind}; implementations change the "
    "`messages` list in place (messages[:] = ..., append, del) and return None, so the next one "
    "sees the change (a wrapper's `yield` gives their results, a list of None: change `messages` "
    "in place after it and return None). An Agent's transform_context= callable may return a list."
)


def _implementers(pm: Any, hook_name: str) -> str:
    """``"plugin 'a'"`` / ``"plugins 'a', 'b'"``: who implements ``hook_name``, in call order (the
    plugin registered last first). pluggy does not say which implementation gave which result,
    so a wrong result is reported with every candidate; usually there is one."""
    names = [i.plugin_name for i in reversed(getattr(pm.hook, hook_name).get_hookimpls())]
    names = list(dict.fromkeys(names))
    return ("plugin " if len(names) == 1 else "plugins ") + ", ".join(repr(n) for n in names)


def _checked(pm: Any, hook_name: str, value: Any, fields: Tuple[str, ...], expected: str) -> Any:
    """``value`` when it is None, a mapping or an object with one of ``fields``; else TypeError
    naming the hook, the type (never the value: it may hold secrets) and the implementers."""
    if value is None or isinstance(value, Mapping) or any(hasattr(value, f) for f in fields):
        return value
    raise TypeError(
        f"a {hook_name} hook returned a {type(value).__name__}, not {expected} "
        f"(implemented by {_implementers(pm, hook_name)})"
    )


def _as_results(answer: Any) -> List[Any]:
    """The result list of a hook that collects results: a wrapper may have replaced pluggy's list
    with None (it changed things in place and returned nothing) or with a single result."""
    if answer is None:
        return []
    if isinstance(answer, list):
        return answer
    return [answer]


class AgentHooks:
    """The loop callables of one manager, each one plain pluggy call.

    ``convert_to_llm`` is the reference's list-level converter of an Agent (``convert_to_llm=``):
    when given it receives the whole list once, after the ``convert_to_llm`` hook converted the
    messages plugins claim; messages nobody claimed reach it unchanged (the Agent then keeps the
    built-in converter out of its manager). Exceptions from ``before_tool_call``,
    ``after_tool_call``, ``transform_context`` and ``convert_to_llm`` propagate (the loop turns
    them into error results or a failed run); ``on_event`` and ``on_lifecycle_event`` log them.
    """

    def __init__(self, pm: pluggy.PluginManager, convert_to_llm: Optional[Callable[[List[Any]], Any]] = None) -> None:
        self.pm = pm
        self.list_converter = convert_to_llm

    def has(self, hook_name: str) -> bool:
        """True when at least one implementation (wrappers included) is registered for ``hook_name``."""
        return bool(getattr(self.pm.hook, hook_name).get_hookimpls())

    def before_tool_call(self, context: Any, signal: Any = None) -> Any:
        """The first non-None result (the first verdict), or None: ``pm.hook.before_tool_call``.

        Raises TypeError naming the hook and its plugins when that result is not a verdict (a
        ``BeforeToolCallResult``, a dict, an object with ``block``): it ended the chain, so the
        plugins after it never had their say, and running the call would ignore all of them.
        """
        verdict = awaited(self.pm.hook.before_tool_call(context=context, signal=signal))
        return _checked(self.pm, "before_tool_call", verdict, ("block",), "a BeforeToolCallResult, a dict or None")

    def after_tool_call(self, context: Any, signal: Any = None) -> Any:
        """Every implementation's override merged field by field in call order (see
        :func:`merge_after_tool_call`), or None.

        Raises TypeError naming the hook and its plugins for an override that is not an
        ``AfterToolCallResult``, a dict or an object with one of its fields (a string meant as the
        new content, say): silently keeping the result would hide what the plugin meant to change.
        """
        results = _as_results(self.pm.hook.after_tool_call(context=context, signal=signal))
        overrides = [
            _checked(self.pm, "after_tool_call", awaited(r), _OVERRIDE_FIELDS, "an AfterToolCallResult, a dict or None")
            for r in results
        ]
        return merge_after_tool_call(overrides)

    def transform_context(self, messages: List[Any], signal: Any = None) -> List[Any]:
        """A copy of ``messages`` after every implementation changed it in place, in call order.

        Raises TypeError when an implementation returned something else than None (or the list
        itself): a returned list cannot reach the implementations called after it. A wrapper
        that returns None (it changed the list in place, as implementations do) counts as no
        results.
        """
        working = list(messages)
        for result in _as_results(self.pm.hook.transform_context(messages=working, signal=signal)):
            result = awaited(result)
            if result is not None and result is not working:
                raise TypeError(
                    ERR_TRANSFORM_RETURNED.format(kind=type(result).__name__)
                    + f" (implemented by {_implementers(self.pm, 'transform_context')})"
                )
        return working

    def convert_to_llm(self, messages: Iterable[Any]) -> List[Any]:
        """``pm.hook.convert_to_llm(message=m)`` for each message (first non-None result wins;
        ``DROP`` leaves it out, a list stands for several messages), then the list converter.

        A None answer (no implementation claimed the message and the built-in converter is not
        registered) keeps the message for the list converter; without one it is left out. Raises
        TypeError naming the hook and its plugins for an answer that is not a message (an object
        or dict with a ``role``), a list of them, ``DROP`` or None.
        """
        from .messages import DROP

        hook = self.pm.hook.convert_to_llm
        keep = self.list_converter is not None
        out: List[Any] = []
        for message in messages:
            result = awaited(hook(message=message))
            if result is None:
                if keep:
                    out.append(message)
            elif result is DROP:
                continue
            elif isinstance(result, (list, tuple)):
                out.extend(self._message(item) for item in result)
            else:
                out.append(self._message(result))
        if keep:
            return list(awaited(self.list_converter(out)))  # type: ignore[misc]
        return out

    def _message(self, value: Any) -> Any:
        """``value`` when it is a message (an object or dict with a ``role``); else TypeError
        naming the hook: a provider would drop what it cannot convert without a word."""
        if isinstance(getattr(value, "role", None), str) or (isinstance(value, Mapping) and "role" in value):
            return value
        raise TypeError(
            f"a convert_to_llm hook returned a {type(value).__name__}, not a message (an object with a "
            f"role), a list of messages, DROP or None (implemented by {_implementers(self.pm, 'convert_to_llm')})"
        )

    def on_event(self, event: Any, agent: Any = None) -> None:
        """``pm.hook.on_event``; an exception is logged (the run is unaffected). As in any pluggy
        call, the observers after the failing one in call order do not see that event."""
        try:
            self.pm.hook.on_event(event=event, agent=agent)
        except Exception as exc:
            _log_observer_failure(self.pm, "on_event", event, exc)

    def on_lifecycle_event(self, event: Any, agent: Any = None) -> None:
        """``pm.hook.on_lifecycle_event`` (never called for ``message_update`` by the agent); an
        exception is logged, as for :meth:`on_event`."""
        try:
            self.pm.hook.on_lifecycle_event(event=event, agent=agent)
        except Exception as exc:
            _log_observer_failure(self.pm, "on_lifecycle_event", event, exc)


def _raiser(pm: Any, hook_name: str, exc: BaseException) -> str:
    """``"plugin 'x'"``: the implementation of ``hook_name`` whose frame is the innermost in
    ``exc``'s traceback (the one that raised, or called what raised), else every implementer."""
    plugin_of = {}
    for impl in getattr(pm.hook, hook_name).get_hookimpls():
        code = getattr(getattr(impl.function, "__func__", impl.function), "__code__", None)
        if code is not None:
            plugin_of[code] = impl.plugin_name
    found = None
    tb = exc.__traceback__
    while tb is not None:
        found = plugin_of.get(tb.tb_frame.f_code, found)
        tb = tb.tb_next
    return f"plugin {found!r}" if found is not None else _implementers(pm, hook_name)


def _log_observer_failure(pm: Any, hook_name: str, event: Any, exc: BaseException) -> None:
    _log.exception(
        "agentcore: the %s hook of %s failed for %s event",
        hook_name,
        _raiser(pm, hook_name, exc),
        getattr(event, "type", type(event).__name__),
    )


# --------------------------------------------------------------------------- constructor callables


class _CallablesPlugin:
    """Holds an Agent's constructor callables as hook implementations (built by callables_plugin)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"


def _with_or_without_signal(fn: Callable[..., Any]) -> Callable[[Any, Any], Any]:
    """``fn`` called as ``fn(ctx, signal)``, or as ``fn(ctx)`` when it takes one required
    positional argument (as ``should_stop_after_turn`` and listeners may): a one-argument hook
    would otherwise fail every call with a TypeError the model sees as the tool's result."""
    if accepts_signal(fn):
        return fn
    return lambda context, signal: fn(context)


def _before_impl(fn: Callable[..., Any]) -> Callable[[Any, Any], Any]:
    fn = _with_or_without_signal(fn)

    def before_tool_call(context: Any, signal: Any) -> Any:
        # an answer that is no verdict ({"blocked": True}, True) is a TypeError, as in the loop:
        # filtered out as "allow" below, it would run the call the callable meant to block
        verdict = check_verdict(awaited(fn(context, signal)))
        # The reference's callable answers {block: false} to allow; as a hook that is "no verdict",
        # so plugins called after it still get their say.
        return verdict if verdict is not None and field_of(verdict, "block") else None

    return before_tool_call


def _after_impl(fn: Callable[..., Any]) -> Callable[[Any, Any], Any]:
    fn = _with_or_without_signal(fn)

    def after_tool_call(context: Any, signal: Any) -> Any:
        return awaited(fn(context, signal))

    return after_tool_call


def _transform_impl(fn: Callable[..., Any]) -> Callable[[List[Any], Any], None]:
    fn = _with_or_without_signal(fn)

    def transform_context(messages: List[Any], signal: Any) -> None:
        result = awaited(fn(list(messages), signal))
        if result is not None:  # a str or a number is refused naming the hook, as by the loop
            messages[:] = hook_messages(result, "transform_context")

    return transform_context


_ADAPTERS = (
    ("before_tool_call", _before_impl),
    ("after_tool_call", _after_impl),
    ("transform_context", _transform_impl),
)


def callables_plugin(
    *,
    before_tool_call: Optional[Callable[..., Any]] = None,
    after_tool_call: Optional[Callable[..., Any]] = None,
    transform_context: Optional[Callable[..., Any]] = None,
    name: str = "agent-callables",
) -> Optional[Any]:
    """Turn an Agent's constructor callables into one plugin object, or None if none is given.

    Register the result on that agent's own manager only, so the hooks never leak into other
    agents. The callables keep the reference's shapes and may be ``async def``:

    * ``before_tool_call(ctx, signal)`` (or ``(ctx)``): a result that blocks is the verdict; any other
      result (``{"block": False}``, None) means "no verdict", so later implementations still run;
    * ``after_tool_call(ctx, signal)`` (or ``(ctx)``): its override is the hook's result;
    * ``transform_context(messages, signal)`` (or ``(messages)``) ``-> list | None``: a returned list replaces the
      ``messages`` list in place, so implementations called after it see it.

    The Agent's list-level ``convert_to_llm=`` is not a hook implementation: it is the fallback
    :class:`AgentHooks` applies after the ``convert_to_llm`` hook.
    """
    plugin = _CallablesPlugin(name)
    given = {
        "before_tool_call": before_tool_call,
        "after_tool_call": after_tool_call,
        "transform_context": transform_context,
    }
    found = False
    for specname, adapt in _ADAPTERS:
        fn = given[specname]
        if fn is not None:
            setattr(plugin, specname, hookimpl(specname=specname)(adapt(fn)))
            found = True
    return plugin if found else None

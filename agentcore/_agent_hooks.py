"""Calling an agent's hooks with agentcore's combination rules, and adapting constructor callables.

:class:`AgentHooks` wraps one plugin manager; its methods have the signatures of the loop's callables
(``before_tool_call(ctx, signal)``, ``after_tool_call(ctx, signal)``, ``transform_context(messages,
signal)``, ``convert_to_llm(messages)``) plus ``on_event(event, agent)``. :func:`callables_plugin`
turns an Agent's constructor callables into a plugin object for that agent's own manager.
Both are public through :mod:`agentcore.plugins`.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import logging
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional

import pluggy

from .hookspecs import hookimpl

__all__ = ["AgentHooks", "callables_plugin"]

_log = logging.getLogger("agentcore.plugins")


def _call_order(caller: Any) -> List[Any]:
    """Implementations in pluggy call order (last registered first, tryfirst/trylast honoured).

    Wrappers (``hookwrapper``/``wrapper``) are not supported on the hooks combined here and are
    skipped.
    """
    impls = caller.get_hookimpls()
    return [i for i in reversed(impls) if not (i.hookwrapper or getattr(i, "wrapper", False))]


def _call(impl: Any, **kwargs: Any) -> Any:
    result = impl.function(*[kwargs[name] for name in impl.argnames])
    if inspect.iscoroutine(result):  # an ``async def`` implementation: run it to completion
        import asyncio

        return asyncio.run(result)
    return result


def _field(obj: Any, name: str) -> Any:
    """A field of a hook result: an attribute, or a key of a plain dict (as the loop accepts)."""
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _override_fields(override: Any) -> Dict[str, Any]:
    names = ("content", "details", "usage", "terminate", "is_error")
    return {n: _field(override, n) for n in names if _field(override, n) is not None}


class AgentHooks:
    """Calls the hooks of one manager with agentcore's combination rules.

    Each method has the signature of the matching Agent/loop callable, so an Agent can pass
    ``hooks.before_tool_call`` etc. straight into its loop configuration. Exceptions from
    ``before_tool_call``, ``after_tool_call``, ``transform_context`` and ``convert_to_llm``
    implementations propagate (the loop turns them into error results or a failed run);
    ``on_event`` isolates each observer.
    """

    def __init__(self, pm: pluggy.PluginManager) -> None:
        self.pm = pm

    def has(self, hook_name: str) -> bool:
        """True when at least one plugin implements ``hook_name``."""
        return bool(_call_order(getattr(self.pm.hook, hook_name)))

    def before_tool_call(self, context: Any, signal: Any = None) -> Any:
        """The first result whose ``block`` is true, or None. Non-blocking results are ignored."""
        for impl in _call_order(self.pm.hook.before_tool_call):
            result = _call(impl, context=context, signal=signal)
            if result is not None and _field(result, "block"):
                return result
        return None

    def after_tool_call(self, context: Any, signal: Any = None) -> Any:
        """Apply every implementation's override in call order; return the combined override.

        Each implementation sees ``context.result``/``context.is_error`` as modified by the earlier
        ones. The return value carries every field some implementation set (later ones win), with
        the type of the last override, or None when nobody overrode anything.
        """
        combined: Dict[str, Any] = {}
        last: Any = None
        current = context
        for impl in _call_order(self.pm.hook.after_tool_call):
            override = _call(impl, context=current, signal=signal)
            if override is None:
                continue
            fields = _override_fields(override)
            if not fields:
                continue
            combined.update(fields)
            last = override
            current = _with_result(current, fields)
        if last is None:
            return None
        if isinstance(last, Mapping):  # a plain-dict override: the loop reads its keys
            return {**last, **combined}
        return dataclasses.replace(last, **combined) if dataclasses.is_dataclass(last) else last

    def transform_context(self, messages: List[Any], signal: Any = None) -> List[Any]:
        """Chain the implementations: each receives (a copy of) the previous one's output."""
        current = list(messages)
        for impl in _call_order(self.pm.hook.transform_context):
            result = _call(impl, messages=list(current), signal=signal)
            if result is not None:
                current = list(result)
        return current

    def convert_to_llm(self, messages: Iterable[Any]) -> List[Any]:
        """Convert the transcript for the model, one message at a time, first non-None result wins.

        A result of ``agentcore.messages.DROP`` leaves the message out; a list result stands for
        several messages. When the Agent's own ``convert_to_llm`` callable is reached (see
        :func:`callables_plugin`), the converters before it convert the messages they claim and the
        callable then receives the whole resulting list once (it converts a whole transcript).
        """
        impls = _call_order(self.pm.hook.convert_to_llm)
        for index, impl in enumerate(impls):
            list_fn = getattr(impl.plugin, "_agentcore_convert_list", None)
            if list_fn is not None:
                return list(list_fn(_convert_each(impls[:index], messages, keep=True)))
        return _convert_each(impls, messages, keep=False)

    def on_event(self, event: Any, agent: Any = None) -> None:
        """Call every observer; an exception in one is logged and the others still run."""
        for impl in _call_order(self.pm.hook.on_event):
            try:
                _call(impl, event=event, agent=agent)
            except Exception:
                _log.exception("agentcore: on_event hook of plugin %s failed for %s event",
                               _label(impl), getattr(event, "type", type(event).__name__))


def _label(impl: Any) -> str:
    """A readable plugin name (pluggy names unnamed plugins by ``id``)."""
    name = impl.plugin_name
    if not str(name).isdigit():
        return repr(name)
    plugin = impl.plugin
    return repr(getattr(plugin, "__name__", None) or type(plugin).__name__)


def _convert_each(impls: List[Any], messages: Iterable[Any], keep: bool) -> List[Any]:
    from .messages import DROP

    out: List[Any] = []
    for message in messages:
        result: Any = None
        for impl in impls:
            result = _call(impl, message=message)
            if result is not None:
                break
        if result is None:
            if keep:
                out.append(message)
            continue  # no converter claimed it (the built-in one always does): leave it out
        if result is DROP:
            continue
        if isinstance(result, (list, tuple)):
            out.extend(result)
        else:
            out.append(result)
    return out


def _with_result(context: Any, fields: Dict[str, Any]) -> Any:
    """A copy of an AfterToolCallContext whose ``result``/``is_error`` carry ``fields``."""
    result = getattr(context, "result", None)
    result_fields = {k: v for k, v in fields.items() if k != "is_error"}
    if result is not None and result_fields:
        if dataclasses.is_dataclass(result):
            result = dataclasses.replace(result, **result_fields)
        else:
            result = _copy_with(result, result_fields)
    changes: Dict[str, Any] = {"result": result}
    if "is_error" in fields:
        changes["is_error"] = fields["is_error"]
    if dataclasses.is_dataclass(context):
        return dataclasses.replace(context, **changes)
    return _copy_with(context, changes)


def _copy_with(obj: Any, changes: Dict[str, Any]) -> Any:
    clone = copy.copy(obj)
    for key, value in changes.items():
        setattr(clone, key, value)
    return clone


# --------------------------------------------------------------------------- constructor callables


class _CallablesPlugin:
    """Holds an Agent's constructor callables as hook implementations (built by callables_plugin)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"


def _tool_call_impl(fn: Callable[..., Any]) -> Callable[[Any, Any], Any]:
    """A fresh function with the hookspec's argument names around ``fn`` (which may name them otherwise)."""

    def impl(context: Any, signal: Any) -> Any:
        return fn(context, signal)

    return impl


def callables_plugin(*, before_tool_call: Optional[Callable[..., Any]] = None,
                     after_tool_call: Optional[Callable[..., Any]] = None,
                     transform_context: Optional[Callable[..., Any]] = None,
                     convert_to_llm: Optional[Callable[[List[Any]], List[Any]]] = None,
                     name: str = "agent-callables") -> Optional[Any]:
    """Turn an Agent's constructor callables into one plugin object, or None if none is given.

    Register the result on that agent's own manager only, so the hooks never leak into other
    agents. ``before_tool_call(ctx, signal)``, ``after_tool_call(ctx, signal)`` and
    ``transform_context(messages, signal)`` become hook implementations as they are.
    ``convert_to_llm(messages) -> messages`` takes the whole list (a transcript in, one out): it
    replaces the built-in converter, runs after other plugins' converters (``trylast``), and
    :meth:`AgentHooks.convert_to_llm` calls it once with the whole list. Called through plain pluggy
    (``pm.hook.convert_to_llm(message=m)``) it is applied to ``[m]``.
    """
    plugin = _CallablesPlugin(name)
    given = False
    for specname, tool_hook in (("before_tool_call", before_tool_call), ("after_tool_call", after_tool_call)):
        if tool_hook is not None:
            setattr(plugin, specname, hookimpl(specname=specname)(_tool_call_impl(tool_hook)))
            given = True
    if transform_context is not None:
        transform_fn = transform_context

        def _transform(messages: List[Any], signal: Any) -> Any:
            return transform_fn(messages, signal)

        plugin.transform_context = hookimpl(specname="transform_context")(_transform)  # type: ignore[attr-defined]
        given = True
    if convert_to_llm is not None:
        convert_fn = convert_to_llm

        def _convert(message: Any) -> Any:
            from .messages import DROP

            out = list(convert_fn([message]))
            return DROP if not out else (out[0] if len(out) == 1 else out)

        plugin.convert_to_llm = hookimpl(specname="convert_to_llm", trylast=True)(_convert)  # type: ignore[attr-defined]
        plugin._agentcore_convert_list = convert_fn  # type: ignore[attr-defined]
        given = True
    return plugin if given else None

"""Every pluggy hook of agentcore (project name ``"agentcore"``).

A plugin is any object or module with functions marked ``@hookimpl``; third-party packages declare
them under the ``agentcore`` entry-point group. Each docstring states when the hook is called (and
on which thread), its arguments, what a return value means and how several implementations combine.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional

import pluggy

__all__ = ["hookspec", "hookimpl", "PROJECT_NAME"]

PROJECT_NAME = "agentcore"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec(firstresult=True)
def before_tool_call(context: Any, signal: Any) -> Optional[Any]:
    """Inspect (and possibly block) one tool call after its arguments were validated.

    Called on the run thread, in source order, once per tool call of an assistant message, before
    the call executes. ``context`` is a :class:`~agentcore.loop.BeforeToolCallContext`
    (``assistant_message``, ``tool_call``, ``args`` — the validated copy the tool will receive, so
    mutating it changes what executes — and ``context``, the run's current ``AgentContext``).
    ``signal`` is the run's :class:`~agentcore.signals.AbortSignal`.

    Return a :class:`~agentcore.loop.BeforeToolCallResult` with ``block=True`` (and optionally
    ``reason`` and ``terminate``) to skip the call with an error result, or None to let it run.

    Combination: the first implementation (in pluggy call order: last registered first) whose
    result blocks wins and later ones are not called; results that do not block are ignored.
    An exception becomes an error tool result for that call; the batch continues.
    """


@hookspec
def after_tool_call(context: Any, signal: Any) -> Optional[Any]:
    """Override fields of one executed tool call's result.

    Called on the run thread after the tool's ``execute`` settled (in completion order for parallel
    batches), before ``tool_execution_end``. ``context`` is an
    :class:`~agentcore.loop.AfterToolCallContext` (``assistant_message``, ``tool_call``, ``args``,
    ``result``, ``is_error``, ``context``).

    Return an :class:`~agentcore.loop.AfterToolCallResult`; every field that is not None replaces
    the corresponding field of the result (no deep merge), or None to keep the result.

    Combination: overrides apply in pluggy call order, each implementation seeing the result as
    modified by the previous ones. An exception turns the result into an error result with that
    message; the batch continues.
    """


@hookspec
def transform_context(messages: List[Any], signal: Any) -> Optional[List[Any]]:
    """Rewrite the conversation before it is converted for the model.

    Called on the run thread before every model request. ``messages`` is a new list the
    implementation may return modified; never mutate the items. Return a list to replace it, or
    None to keep it. Implementations chain: each receives the previous one's result, in pluggy call
    order. Honour ``signal`` if slow. An exception fails the run (the transcript stays valid).
    """


@hookspec(firstresult=True)
def convert_to_llm(message: Any) -> Optional[Any]:
    """Convert one transcript message into what the model should see.

    Called on the run thread before every model request, once per message, after
    ``transform_context``. Return a ``UserMessage``/``AssistantMessage``/``ToolResultMessage``
    (or ``SystemMessage``), or the sentinel :data:`agentcore.messages.DROP` to leave the message
    out, or None to let the next implementation decide.

    Combination: first non-None result per message wins; the built-in converter (which keeps the
    standard roles and drops unknown ones) is called last.
    """


@hookspec
def register_tools(register: Callable[[Any], None]) -> None:
    """Register tools by calling ``register(agent_tool)`` for each.

    Called once per plugin manager when the tool registry is first used. Combination: all
    implementations run; for a duplicate name, the tool of the plugin registered later wins.
    """


@hookspec
def register_providers(register: Callable[[Any], None]) -> None:
    """Register wire-API providers by calling ``register(provider)``.

    A provider has ``api`` (the wire API name, e.g. ``"openai-completions"``) and
    ``stream(model, context, **options)`` returning an iterable of stream events with ``result()``.
    Combination: all implementations run; for a duplicate ``api`` the later-registered plugin wins.
    """


@hookspec
def register_models(register: Callable[[Any], None]) -> None:
    """Register models by calling ``register(model)`` with :class:`~agentcore.types.Model` objects.

    Combination: all implementations run; for a duplicate ``provider/id`` the later-registered
    plugin wins.
    """


@hookspec
def on_event(event: Any, agent: Any) -> None:
    """Observe every agent event.

    Called on the run thread after the agent's own state reducer ran, before the agent's listeners
    see ``event``. Return values are ignored. Combination: every implementation is called; an
    exception in one is logged and does not affect the run or the other observers.
    """

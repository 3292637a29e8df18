"""The agent loop: prompt -> model -> tools -> model ... until the model stops (spec agent-loop §2).

Read top to bottom: the entry points, then one run (:func:`_run_loop`), then one model call
(:func:`stream_assistant_response`), then one tool batch (:func:`execute_tool_calls`), then one
tool call (preparation, execution, finalization).

Threads: the blocking cores (:func:`run_agent_loop`, :func:`run_agent_loop_continue`) run on the
caller's thread and call ``emit(event)`` for every event, waiting for it to return (the Agent's
listeners are a barrier). Tool calls execute on worker threads; their updates and results travel
back to the run thread through a queue, so every event is emitted on the run thread. (A lone
``@tool`` function without an ``on_update`` parameter executes on the run thread itself when that
is not the main thread: nothing else runs meanwhile and it cannot send updates.)
:func:`agent_loop` / :func:`agent_loop_continue` run the same core on a daemon thread and return an
:class:`~agentcore.streams.EventStream` at once.

Failure semantics: tool, ``prepare_arguments``, validation, ``before_tool_call`` and
``after_tool_call`` exceptions become error tool results and never end a run. Exceptions from the
contract hooks (``convert_to_llm``, ``transform_context``, ``get_api_key``, the queue getters,
``should_stop_after_turn``, ``prepare_next_turn``), from a raising ``stream_fn`` or from ``emit``
escape the core; :func:`agent_loop` turns them into ``stream.fail(exc)``, the Agent into a failure
run.

Deviations from the reference, on purpose: a provider stream that ends without a ``done``/``error``
event yields a synthesized error message (instead of hanging); when a run stops early because the
signal was aborted (between turns, before a model call, while injecting queued messages), the loop
closes it with a synthetic ``aborted`` assistant message (``turn_end`` included, no model call) so
the transcript ends the same way as when a model call was aborted.
"""

from __future__ import annotations

import contextvars
import copy
import dataclasses
import inspect
import logging
import queue
import threading
import time
import weakref
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from . import approvals as _approvals
from . import tools as _tools
from ._loop_types import (
    STREAM_OPTIONS,
    AfterToolCallContext,
    AfterToolCallResult,
    AgentLoopConfig,
    AgentLoopTurnUpdate,
    BeforeToolCallContext,
    BeforeToolCallResult,
    PrepareNextTurnContext,
    ShouldStopAfterTurnContext,
    ToolBatchResult,
    check_verdict,
    merge_after_tool_call,
    switch_model,
    turn_update_parts,
)
from ._safe import exception_message
from ._util import awaited, field_of, hook_messages
from .events import (
    AgentEndEvent,
    AgentStartEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ToolApprovalRequestEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from .messages import default_convert_to_llm
from .options import check_api_key, spread_provider_options
from .signals import AbortController, AbortSignal
from .streams import EventStream, start_daemon
from .tools import AgentTool, AgentToolResult
from .types import (
    AgentContext,
    AssistantMessage,
    Model,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    role_of,
)

__all__ = [
    "agent_loop",
    "agent_loop_continue",
    "run_agent_loop",
    "run_agent_loop_continue",
    "set_default_stream_fn",
    "get_default_stream_fn",
    "stream_assistant_response",
    "execute_tool_calls",
    "AgentLoopConfig",
    "BeforeToolCallContext",
    "BeforeToolCallResult",
    "AfterToolCallContext",
    "AfterToolCallResult",
    "ShouldStopAfterTurnContext",
    "PrepareNextTurnContext",
    "AgentLoopTurnUpdate",
    "ToolBatchResult",
]

Emit = Callable[[Any], None]
StreamFn = Callable[..., Iterable[Any]]

# Exact strings of spec agent-loop §2.16.
ERR_CONTINUE_EMPTY = "Cannot continue: no messages in context"
ERR_CONTINUE_ASSISTANT = "Cannot continue from message role: assistant"
ERR_TOOL_BLOCKED = "Tool execution was blocked"
ERR_OPERATION_ABORTED = "Operation aborted"
ERR_NO_STREAM_FN = (
    "No default stream function configured: pass stream_fn=, call set_default_stream_fn(), or install the providers"
)
ERR_STREAM_WITHOUT_END = "The model stream ended without a done or error event"


# =========================================================================== stream function


_default_stream_fn: Optional[StreamFn] = None


def set_default_stream_fn(fn: Optional[StreamFn]) -> None:
    """Use ``fn`` whenever a run is started without ``stream_fn``; None restores the providers."""
    global _default_stream_fn
    _default_stream_fn = fn


def get_default_stream_fn() -> StreamFn:
    """The stream function used when none is passed: the one set by :func:`set_default_stream_fn`,
    else :func:`agentcore.providers.stream`. Raises RuntimeError when neither is available."""
    if _default_stream_fn is not None:
        return _default_stream_fn
    try:
        from .providers import stream  # lazily: the providers import requests
    except ImportError as exc:
        raise RuntimeError(ERR_NO_STREAM_FN) from exc
    return stream


# =========================================================================== entry points


def agent_loop(
    prompts: Sequence[Any],
    context: AgentContext,
    config: AgentLoopConfig,
    signal: Optional[AbortSignal] = None,
    stream_fn: Optional[StreamFn] = None,
) -> EventStream[List[Any]]:
    """Start a prompt run on a daemon thread; return its event stream at once.

    The stream completes on ``agent_end`` and ``result()`` returns the run's new messages. The
    producer never waits for the consumer. An exception inside the run makes iteration and
    ``result()`` re-raise it.
    """
    fn = stream_fn or get_default_stream_fn()
    return _in_background(lambda emit: run_agent_loop(prompts, context, config, emit, signal, fn))


def agent_loop_continue(
    context: AgentContext,
    config: AgentLoopConfig,
    signal: Optional[AbortSignal] = None,
    stream_fn: Optional[StreamFn] = None,
    *,
    resume: Optional[_approvals.Resumption] = None,
) -> EventStream[List[Any]]:
    """Like :func:`agent_loop` but continues from ``context`` without new prompts (``resume``:
    after an approval pause, see :func:`run_agent_loop_continue`).

    Raises ValueError at once (before any thread starts) when the context is empty or ends with an
    assistant message (unless resuming).
    """
    if resume is None:
        _validate_continue(context)
    fn = stream_fn or get_default_stream_fn()
    return _in_background(lambda emit: run_agent_loop_continue(context, config, emit, signal, fn, resume=resume))


def _in_background(run: Callable[[Emit], List[Any]]) -> EventStream[List[Any]]:
    stream: EventStream[List[Any]] = EventStream(lambda e: e.type == "agent_end", lambda e: e.messages)

    def main() -> None:
        try:
            result = run(stream.push)
        except BaseException as exc:  # noqa: BLE001 - delivered to the consumer
            stream.fail(exc)
        else:
            stream.end(result)  # no-op after agent_end; a safety net otherwise

    # the caller's contextvars (a current tracing span, say) are visible inside the run
    start_daemon(contextvars.copy_context().run, "agentcore-loop", main)
    return stream


def run_agent_loop(
    prompts: Sequence[Any],
    context: AgentContext,
    config: AgentLoopConfig,
    emit: Emit,
    signal: Optional[AbortSignal] = None,
    stream_fn: Optional[StreamFn] = None,
) -> List[Any]:
    """Blocking prompt run on the calling thread; returns the new messages (prompts included).

    The caller's context and config are never mutated: the run works on copies.
    """
    run = _Run.start(context, config, emit, signal, stream_fn)
    prompts = list(prompts)
    run.ctx.messages.extend(prompts)
    new_messages: List[Any] = list(prompts)
    emit(AgentStartEvent())
    emit(TurnStartEvent())
    for prompt in prompts:
        emit(MessageStartEvent(prompt))
        emit(MessageEndEvent(prompt))
    _run_loop(run, new_messages)
    return new_messages


def run_agent_loop_continue(
    context: AgentContext,
    config: AgentLoopConfig,
    emit: Emit,
    signal: Optional[AbortSignal] = None,
    stream_fn: Optional[StreamFn] = None,
    *,
    resume: Optional[_approvals.Resumption] = None,
) -> List[Any]:
    """Blocking continue run: no prompt; returns only the messages created by the run.

    ``resume`` (from an approval pause, see :mod:`agentcore.approvals`): the run first finishes
    the paused turn, running the decided calls of ``resume.message`` (denied ones are blocked with
    their reason; results of edited calls say so), then goes on as usual. The context may then end with that assistant message.
    """
    if resume is None:
        _validate_continue(context)
    run = _Run.start(context, config, emit, signal, stream_fn)
    if resume is not None:
        run.cfg.before_tool_call = resume.gate(run.cfg.before_tool_call)
        run.cfg.after_tool_call = resume.annotate(run.cfg.after_tool_call)
    new_messages: List[Any] = []
    emit(AgentStartEvent())
    emit(TurnStartEvent())
    _run_loop(run, new_messages, resume)
    return new_messages


def _validate_continue(context: AgentContext) -> None:
    if not context.messages:
        raise ValueError(ERR_CONTINUE_EMPTY)
    if role_of(context.messages[-1]) == "assistant":
        raise ValueError(ERR_CONTINUE_ASSISTANT)


class _Run:
    """The mutable state of one run: working context, config copy, emit sink, signal, stream fn."""

    __slots__ = ("ctx", "cfg", "emit", "signal", "stream_fn", "turn_open")

    def __init__(
        self, ctx: AgentContext, cfg: AgentLoopConfig, emit: Emit, signal: AbortSignal, stream_fn: StreamFn
    ) -> None:
        self.ctx = ctx
        self.cfg = cfg
        self.emit = emit
        self.signal = signal
        self.stream_fn = stream_fn
        self.turn_open = True  # a turn_start was emitted whose turn_end is still due

    @classmethod
    def start(
        cls,
        context: AgentContext,
        config: AgentLoopConfig,
        emit: Emit,
        signal: Optional[AbortSignal],
        stream_fn: Optional[StreamFn],
    ) -> _Run:
        # a shallow copy (prepare_next_turn may change its model): copy.copy is ~20x cheaper than
        # dataclasses.replace, which re-runs __init__ with every option as a keyword
        return cls(
            context.copy(),
            copy.copy(config),
            emit,
            signal if signal is not None else AbortController().signal,
            stream_fn or get_default_stream_fn(),
        )


# =========================================================================== one run


def _run_loop(run: _Run, new_messages: List[Any], resume: Optional[_approvals.Resumption] = None) -> None:
    """Turns until the model stops and no queued message is left (spec agent-loop §2.3).

    Ends early, with the run settled, when calls of a batch wait for approval (the pause); a
    ``resume`` run starts with the rest of the paused turn instead of a model call."""
    emit, signal = run.emit, run.signal
    if signal.aborted:
        return _finish_aborted(run, new_messages)
    # the initial steering poll; never between a paused turn's calls and their results
    pending = _poll(run.cfg.get_steering_messages) if resume is None else []

    while True:
        has_more_tool_calls = True
        while has_more_tool_calls or pending:
            if not run.turn_open:  # the first turn reuses the turn_start of the run set-up
                emit(TurnStartEvent())
                run.turn_open = True
            if not _inject(run, pending, new_messages) or signal.aborted:
                return _finish_aborted(run, new_messages)
            pending = []

            resumed, resume = resume, None
            if resumed is not None:  # the paused turn's model response is in the context already
                message = resumed.message
            else:
                message = stream_assistant_response(run.ctx, run.cfg, signal, emit, run.stream_fn)
                new_messages.append(message)
                if message.stop_reason in ("error", "aborted"):  # no tools, no hooks, no polling
                    emit(TurnEndEvent(message, []))
                    emit(AgentEndEvent(new_messages))
                    return None

            batch = _run_tools(run, message, new_messages, resumed)
            tool_results, has_more_tool_calls = batch.messages, not batch.terminate
            emit(TurnEndEvent(message, tool_results))
            run.turn_open = False
            if batch.awaiting:  # the pause: the run settles; approve/deny, then continue_()
                if signal.aborted:  # came while the others ran: the run is aborted, the waiting calls abandoned
                    return _finish_aborted(run, new_messages)
                emit(AgentEndEvent(new_messages))
                return None
            _apply_turn_update(run, message, tool_results, new_messages)
            if _should_stop(run, message, tool_results, new_messages):
                emit(AgentEndEvent(new_messages))
                return None
            if signal.aborted:
                return _finish_aborted(run, new_messages)
            pending = _poll(run.cfg.get_steering_messages)

        if signal.aborted:
            return _finish_aborted(run, new_messages)
        pending = _poll(run.cfg.get_follow_up_messages)
        if not pending:
            break

    emit(AgentEndEvent(new_messages))
    return None


def _inject(run: _Run, pending: List[Any], new_messages: List[Any]) -> bool:
    """Emit and append queued messages; False when the signal was aborted after one of them
    (the rest is neither emitted nor appended)."""
    for message in pending:
        run.emit(MessageStartEvent(message))
        run.emit(MessageEndEvent(message))
        run.ctx.messages.append(message)
        new_messages.append(message)
        if run.signal.aborted:
            return False
    return True


def _run_tools(
    run: _Run, message: AssistantMessage, new_messages: List[Any], resumed: Optional[_approvals.Resumption] = None
) -> ToolBatchResult:
    """Run the tool calls of ``message`` (none for a length-truncated response) and append the
    results. Calls whose tool requires approval do not run: one approval request each, and the
    batch lists them as ``awaiting``. ``resumed``: run the decided calls of a paused turn."""
    tool_calls = [block for block in message.content if isinstance(block, ToolCall)]
    if not tool_calls:  # execution follows the blocks, not stop_reason == "toolUse"
        return ToolBatchResult([], True)
    awaiting: List[Any] = []
    if message.stop_reason == "length":
        batch = _reject_truncated_calls(tool_calls, run.emit)
    else:
        if resumed is not None:
            tool_calls = resumed.calls()
        else:
            tool_calls, awaiting = _approvals.split_batch(run.ctx.tools, tool_calls)
        for request in awaiting:
            run.emit(ToolApprovalRequestEvent(request.tool_call_id, request.tool_name, request.args))
        batch = execute_tool_calls(run.ctx, message, tool_calls, run.cfg, run.signal, run.emit)
    run.ctx.messages.extend(batch.messages)
    new_messages.extend(batch.messages)
    batch.awaiting = awaiting
    return batch


def _poll(getter: Optional[Callable[[], List[Any]]]) -> List[Any]:
    if getter is None:
        return []
    return list(awaited(getter()) or [])  # an ``async def`` getter too, as every hook


def _apply_turn_update(run: _Run, message: AssistantMessage, tool_results: List[Any], new_messages: List[Any]) -> None:
    """Call ``prepare_next_turn`` and apply its update. TypeError (ValueError for an unknown
    thinking level) naming the field when the update holds something the next request cannot
    use: the run fails with that message instead of one about a missing attribute. So does an
    answer that is no update at all (a ``Model`` returned as it is, a mapping with an unknown key),
    which would otherwise be ignored without a word (:func:`turn_update_parts`)."""
    hook = run.cfg.prepare_next_turn
    if hook is None:
        return
    update = awaited(hook(PrepareNextTurnContext(message, tool_results, run.ctx, new_messages)))
    if update is None:
        return
    context, model, level = turn_update_parts(update)
    if context is not None:
        run.ctx = context
    switch_model(run.cfg, model, level)


def _should_stop(run: _Run, message: AssistantMessage, tool_results: List[Any], new_messages: List[Any]) -> bool:
    hook = run.cfg.should_stop_after_turn
    if hook is None:
        return False
    return bool(awaited(hook(ShouldStopAfterTurnContext(message, tool_results, run.ctx, new_messages))))


def _finish_aborted(run: _Run, new_messages: List[Any]) -> None:
    """End a run stopped at an abort checkpoint with a synthetic ``aborted`` assistant message."""
    # imported here: agentcore.providers is not loaded by `from agentcore import Agent`, and an
    # aborted run is rare enough that the deferred import costs nothing measurable
    from .providers.base import new_output

    reason = run.signal.reason
    message = new_output(run.cfg.model)  # the same empty message a provider stream starts from
    message.stop_reason = "aborted"
    message.error_message = reason if isinstance(reason, str) and reason else ERR_OPERATION_ABORTED
    if not run.turn_open:
        run.emit(TurnStartEvent())
    run.emit(MessageStartEvent(message.copy()))
    run.emit(MessageEndEvent(message))
    run.ctx.messages.append(message)
    new_messages.append(message)
    run.emit(TurnEndEvent(message, []))
    run.emit(AgentEndEvent(new_messages))


# =========================================================================== one model call


def stream_assistant_response(
    ctx: AgentContext, cfg: AgentLoopConfig, signal: AbortSignal, emit: Emit, stream_fn: StreamFn
) -> AssistantMessage:
    """Transform, convert, call the model and relay its stream as message events (spec §2.4).

    The partial response sits at the end of ``ctx.messages`` while streaming and is replaced by
    the final message. ``message_start``/``message_update`` carry copies; ``message_end`` the
    final object, which is returned. TypeError naming the problem when ``stream_fn`` returns
    something that cannot be iterated or yields an item without a ``type``; it escapes, as
    any exception of ``stream_fn`` does.

    ``emit.observed()`` (an Agent's emitter has it; other sinks get every event) returning False
    means nobody but the sink's reducer sees ``message_update`` and the reducer keeps only the
    partial object: the update then carries the live partial instead of a copy, and is left out
    when it would carry the same object as the previous one (one per streamed token: a token then
    costs the loop no event at all). A sink observed again gets every update, copied.
    """
    messages = list(ctx.messages)
    if cfg.transform_context is not None:
        transformed = awaited(cfg.transform_context(messages, signal))
        if transformed is not None:
            messages = hook_messages(transformed, "transform_context")
    convert = cfg.convert_to_llm or default_convert_to_llm
    converted = awaited(convert(messages))  # an ``async def`` converter too, as every hook
    llm_context = AgentContext(ctx.system_prompt, hook_messages(converted, "convert_to_llm"), ctx.tools)
    stream = stream_fn(cfg.model, llm_context, **_stream_options(cfg, signal))
    if not isinstance(stream, Iterable):
        raise _not_a_stream(stream)

    partial: Optional[AssistantMessage] = None
    final: Optional[AssistantMessage] = None
    working = ctx.messages
    # An Agent's emitter says whether anyone but its reducer sees message_update events; if not,
    # the per-token copy of the partial is skipped (its state copies on read instead), and so is
    # the event once the reducer holds the live partial.
    observed = getattr(emit, "observed", None)
    handed: Optional[AssistantMessage] = None  # the live partial the last update carried uncopied
    for event in stream:
        try:
            kind = event.type
        except AttributeError:
            raise _not_an_event(event) from None
        if partial is not None and kind != "done" and kind != "error" and kind != "start":
            # any intermediate event, known or not (one per streamed token)
            try:
                new_partial = event.partial
            except AttributeError:  # a provider's own event type without a partial
                new_partial = None
            if new_partial is not partial and new_partial is not None:
                partial = new_partial
                working[-1] = partial
            if observed is None or observed():
                handed = None
                emit(MessageUpdateEvent(partial.copy(), event))
            elif handed is not partial:
                handed = partial
                emit(MessageUpdateEvent(partial, event))
        elif kind == "start":
            partial = event.partial
            working.append(partial)
            emit(MessageStartEvent(partial.copy()))
        elif kind == "done":
            final = event.message
            break
        elif kind == "error":
            final = event.error
            break
        # any other event before "start" is ignored
    if final is None:
        final = _result_without_terminal_event(stream, partial, cfg.model, signal)

    if partial is not None:
        ctx.messages[-1] = final
    else:
        ctx.messages.append(final)
        emit(MessageStartEvent(final.copy()))
    emit(MessageEndEvent(final))
    return final


def _not_a_stream(value: Any) -> TypeError:
    """The error for a ``stream_fn`` answer that cannot be iterated (a forgotten ``return``, an
    ``async def``): named, instead of "'NoneType' object is not iterable"."""
    if inspect.iscoroutine(value):
        value.close()  # never awaited, on purpose: no RuntimeWarning about it
    return TypeError(
        f"stream_fn returned a {type(value).__name__}, not an iterable of stream events "
        "(start, text_delta, ..., then done or error)"
    )


def _not_an_event(value: Any) -> TypeError:
    """The error for an item of the model stream without a ``type`` (a reference JSON dict, say);
    its type is named, never its value (it may hold anything)."""
    return TypeError(
        f"stream_fn yielded a {type(value).__name__}, not a stream event (an object with a type: "
        "start, text_delta, ..., then done or error)"
    )


def _stream_options(cfg: AgentLoopConfig, signal: AbortSignal) -> Dict[str, Any]:
    options: Dict[str, Any] = {"signal": signal}
    for name in STREAM_OPTIONS:
        value = getattr(cfg, name)
        if value is not None:
            options[name] = value
    spread_provider_options(options)  # a plugin provider's own options (region ...) are keywords
    api_key = None
    if cfg.get_api_key is not None:
        api_key = awaited(cfg.get_api_key(cfg.model.provider))
        check_api_key(api_key, f"get_api_key({cfg.model.provider!r})", "its result")
    api_key = api_key or cfg.api_key
    if api_key:
        options["api_key"] = api_key
    return options


def _result_without_terminal_event(
    stream: Any, partial: Optional[AssistantMessage], model: Model, signal: AbortSignal
) -> AssistantMessage:
    """A stream that ended without done/error: use its result if it has one, else an error."""
    if isinstance(stream, EventStream) and stream.done:
        result = stream.result(timeout=0)
        if isinstance(result, AssistantMessage):
            return result
    aborted = signal.aborted
    return AssistantMessage(
        content=list(partial.content) if partial is not None else [],
        api=model.api,
        provider=model.provider,
        model=model.id,
        usage=partial.usage if partial is not None else Usage(),
        stop_reason="aborted" if aborted else "error",
        error_message="Request was aborted" if aborted else ERR_STREAM_WITHOUT_END,
        # what the partial knew about the response stays (the reference keeps the live partial)
        response_id=partial.response_id if partial is not None else None,
        response_model=partial.response_model if partial is not None else None,
        diagnostics=list(partial.diagnostics) if partial is not None and partial.diagnostics else None,
    )


# =========================================================================== one tool batch


def execute_tool_calls(
    ctx: AgentContext,
    message: AssistantMessage,
    tool_calls: List[ToolCall],
    cfg: AgentLoopConfig,
    signal: AbortSignal,
    emit: Emit,
) -> ToolBatchResult:
    """Run the tool calls of one assistant message, sequentially or in parallel (spec §2.6-2.9)."""
    if _batch_is_sequential(ctx, tool_calls, cfg):
        outcomes = _run_sequential(ctx, message, tool_calls, cfg, signal, emit)
    else:
        outcomes = _run_parallel(ctx, message, tool_calls, cfg, signal, emit)
    messages = [outcome.message for outcome in outcomes]
    terminate = bool(outcomes) and all(o.result.terminate is True for o in outcomes)
    return ToolBatchResult(messages, terminate)


def _batch_is_sequential(ctx: AgentContext, tool_calls: List[ToolCall], cfg: AgentLoopConfig) -> bool:
    if str(cfg.tool_execution) == "sequential":
        return True
    for call in tool_calls:
        tool = _find_tool(ctx, call.name)
        if tool is not None and str(getattr(tool, "execution_mode", None)) == "sequential":
            return True
    return False


def _find_tool(ctx: AgentContext, name: str) -> Optional[AgentTool]:
    for tool in ctx.tools or ():
        if tool.name == name:
            return tool
    return None


class _Outcome:
    """A finished call: its finalized result and whether it is an error.

    Every tool call ends in exactly one ``_Outcome``, so its creation is where a call's DEBUG
    record is written: ``kind`` names why an error result is one (blocked, invalid, aborted; plain
    "error" when None) and ``started`` is the ``perf_counter`` at which ``execute`` began (None:
    the call never executed)."""

    __slots__ = ("call", "result", "is_error", "_message", "_content", "_added")

    def __init__(
        self,
        call: ToolCall,
        result: AgentToolResult,
        is_error: bool,
        kind: Optional[str] = None,
        started: Optional[float] = None,
    ) -> None:
        # a malformed result (content=42, or content that fails when read) is the call's error
        # result, never a failed run
        try:
            self._content = _tools.result_blocks(result.content)
            self._added = _tools.result_tool_names(result.added_tool_names)
        except Exception as exc:  # noqa: BLE001 - see above
            text = f"Tool {call.name} returned an invalid result: {exception_message(exc)}"
            result, is_error, kind = _error_result(text), True, None
            self._content, self._added = list(result.content), None
        self.call = call
        self.result = result
        self.is_error = is_error
        self._message: Optional[ToolResultMessage] = None
        if _log.isEnabledFor(logging.DEBUG):
            _log_tool_end(call, is_error, kind, started)

    @property
    def message(self) -> ToolResultMessage:
        """The tool-result message, built once (events and the transcript share the object)."""
        if self._message is None:
            self._message = self._build_message()
        return self._message

    def _build_message(self) -> ToolResultMessage:
        result = self.result
        return ToolResultMessage(
            tool_call_id=self.call.id,
            tool_name=self.call.name,
            content=self._content,
            details=result.details,
            is_error=self.is_error,
            usage=result.usage,
            added_tool_names=self._added,
        )


class _Prepared:
    """A call that passed preflight: the tool and the exact args object ``execute`` receives."""

    __slots__ = ("call", "tool", "args", "started", "kind")

    def __init__(self, call: ToolCall, tool: AgentTool, args: Any) -> None:
        self.call = call
        self.tool = tool
        self.args = args
        self.started: Optional[float] = None  # set by _execute, for the call's DEBUG record
        self.kind: Optional[str] = None  # "aborted" when the run was aborted during execute


def _run_sequential(
    ctx: AgentContext,
    message: AssistantMessage,
    tool_calls: List[ToolCall],
    cfg: AgentLoopConfig,
    signal: AbortSignal,
    emit: Emit,
) -> List[_Outcome]:
    """One call at a time; after an abort the remaining calls get no events and no results."""
    outcomes: List[_Outcome] = []
    for call in tool_calls:
        emit(ToolExecutionStartEvent(call.id, call.name, call.arguments))
        prepared = _prepare_tool_call(ctx, message, call, cfg, signal)
        if isinstance(prepared, _Outcome):
            outcome = prepared
            emit(ToolExecutionEndEvent(call.id, call.name, outcome.result, outcome.is_error))
        else:  # emits the updates and tool_execution_end itself
            outcome = _execute_and_finalize([prepared], ctx, message, cfg, signal, emit)[0]
        outcomes.append(outcome)
        emit(MessageStartEvent(outcome.message))
        emit(MessageEndEvent(outcome.message))
        if signal.aborted:
            break
    return outcomes


def _run_parallel(
    ctx: AgentContext,
    message: AssistantMessage,
    tool_calls: List[ToolCall],
    cfg: AgentLoopConfig,
    signal: AbortSignal,
    emit: Emit,
) -> List[_Outcome]:
    """Preflight in source order, execute concurrently, end events in completion order, result
    messages in source order after every call settled."""
    slots: List[Any] = []
    for call in tool_calls:
        emit(ToolExecutionStartEvent(call.id, call.name, call.arguments))
        prepared = _prepare_tool_call(ctx, message, call, cfg, signal)
        if isinstance(prepared, _Outcome):
            emit(ToolExecutionEndEvent(call.id, call.name, prepared.result, prepared.is_error))
        slots.append(prepared)
        if signal.aborted:
            break

    deferred = [slot for slot in slots if isinstance(slot, _Prepared)]
    executed = iter(_execute_and_finalize(deferred, ctx, message, cfg, signal, emit))
    outcomes = [slot if isinstance(slot, _Outcome) else next(executed) for slot in slots]
    for outcome in outcomes:
        emit(MessageStartEvent(outcome.message))
        emit(MessageEndEvent(outcome.message))
    return outcomes


def _reject_truncated_calls(tool_calls: List[ToolCall], emit: Emit) -> ToolBatchResult:
    """``stop_reason == "length"``: the calls may be cut off, so none runs (spec §2.10)."""
    messages: List[ToolResultMessage] = []
    for call in tool_calls:
        text = (
            f"Tool call {call.name} was not executed: the response hit the output token limit, "
            f"so its arguments may be truncated. Issue the tool call again with complete arguments."
        )
        result = _error_result(text)
        emit(ToolExecutionStartEvent(call.id, call.name, call.arguments))
        emit(ToolExecutionEndEvent(call.id, call.name, result, True))
        tool_message = _Outcome(call, result, True, "invalid").message
        emit(MessageStartEvent(tool_message))
        emit(MessageEndEvent(tool_message))
        messages.append(tool_message)
    return ToolBatchResult(messages, False)


# =========================================================================== one tool call


def _error_result(text: str) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text)], details={})


def _prepare_tool_call(
    ctx: AgentContext, message: AssistantMessage, call: ToolCall, cfg: AgentLoopConfig, signal: AbortSignal
) -> Any:
    """Lookup, prepare_arguments, validation, before_tool_call (spec §2.7).

    Returns a :class:`_Prepared` call, or an immediate error :class:`_Outcome`: also when
    ``before_tool_call`` answered something that is no verdict (a mapping with a key that is none
    of ``block``/``reason``/``terminate``, a bool): the call does not run, its error result names
    the problem.
    """
    tool = _find_tool(ctx, call.name)
    if tool is None:
        return _Outcome(call, _error_result(f"Tool {call.name} not found"), True, "invalid")
    try:
        raw_args = call.arguments
        if tool.prepare_arguments is not None:
            raw_args = tool.prepare_arguments(raw_args)
        args = _tools.validate_tool_arguments(tool, raw_args)
        if cfg.before_tool_call is not None:
            verdict = awaited(cfg.before_tool_call(BeforeToolCallContext(message, call, args, ctx), signal))
            if signal.aborted:
                return _Outcome(call, _error_result(ERR_OPERATION_ABORTED), True, "aborted")
            if check_verdict(verdict) is not None and field_of(verdict, "block"):
                reason = field_of(verdict, "reason")
                if reason is not None and not isinstance(reason, str):  # still blocked: the verdict stands
                    _log.warning(
                        "before_tool_call blocked %s with a reason of type %s, not a string",
                        call.name,
                        type(reason).__name__,
                    )
                    reason = f"{ERR_TOOL_BLOCKED} (the hook's reason was not a string: {type(reason).__name__})"
                result = _error_result(reason or ERR_TOOL_BLOCKED)
                if field_of(verdict, "terminate") is True:
                    result.terminate = True
                return _Outcome(call, result, True, "blocked")
    except Exception as exc:  # noqa: BLE001 - becomes an error result, never a run failure
        kind = "invalid" if isinstance(exc, _tools.ToolValidationError) else None
        return _Outcome(call, _error_result(exception_message(exc)), True, kind)
    if signal.aborted:
        return _Outcome(call, _error_result(ERR_OPERATION_ABORTED), True, "aborted")
    return _Prepared(call, tool, args)


def _execute_and_finalize(
    prepared: List[_Prepared],
    ctx: AgentContext,
    message: AssistantMessage,
    cfg: AgentLoopConfig,
    signal: AbortSignal,
    emit: Emit,
) -> List[_Outcome]:
    """Execute ``prepared`` calls concurrently on worker threads and pump their mailbox.

    Updates are emitted as they arrive; a call's result is finalized (``after_tool_call``) and its
    ``tool_execution_end`` emitted on this thread when it settles, in completion order. Returns
    the outcomes in the order of ``prepared``.

    A lone call whose tool cannot report progress (see :func:`_runs_inline`) executes on this
    thread instead, when this is not the main thread: nothing could run concurrently with it and
    no update could be missed, so the result is the same without two thread hand-overs.
    """
    if (
        len(prepared) == 1
        and _runs_inline(prepared[0].tool)
        and threading.current_thread() is not threading.main_thread()
    ):
        item = prepared[0]
        # a copy, as a worker thread gets: a contextvar the tool sets stays inside the tool
        result, is_error = contextvars.copy_context().run(_execute, item, signal, _drop_update)
        outcome = _finalize(item, result, is_error, ctx, message, cfg, signal)
        emit(ToolExecutionEndEvent(item.call.id, item.call.name, outcome.result, outcome.is_error))
        return [outcome]

    mailbox: queue.SimpleQueue[Tuple[str, int, Any]] = queue.SimpleQueue()
    for index, item in enumerate(prepared):
        _start_worker(index, item, signal, mailbox)

    outcomes: List[Optional[_Outcome]] = [None] * len(prepared)
    remaining = len(prepared)
    while remaining:
        kind, index, payload = mailbox.get()
        call = prepared[index].call
        if kind == "update":
            emit(ToolExecutionUpdateEvent(call.id, call.name, call.arguments, _as_partial(payload)))
            continue
        remaining -= 1
        result, is_error = payload
        outcome = _finalize(prepared[index], result, is_error, ctx, message, cfg, signal)
        outcomes[index] = outcome
        emit(ToolExecutionEndEvent(call.id, call.name, outcome.result, outcome.is_error))
    return outcomes  # type: ignore[return-value]


_tool_thread = threading.local()


def running_tool_signal() -> Optional[AbortSignal]:
    """The abort signal of the run whose tool is executing on this (worker) thread, else None."""
    return getattr(_tool_thread, "signal", None)


def _execute(item: _Prepared, signal: AbortSignal, on_update: Callable[[Any], None]) -> Tuple[AgentToolResult, bool]:
    """Call ``execute``; a raised exception (any kind) becomes an error result whose text is the
    exception message (its type name when the message is empty or cannot be read)."""
    item.started = time.perf_counter()
    try:
        return _as_tool_result(item.tool.execute(item.call.id, item.args, signal, on_update)), False
    except BaseException as exc:  # noqa: BLE001 - a failing tool is an error result
        if signal.aborted:
            item.kind = "aborted"
        return _error_result(exception_message(exc)), True


def _drop_update(partial: Any) -> None:
    """The ``on_update`` of an inline call; its tool has no way to call it."""


_reports_no_progress: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def _runs_inline(tool: AgentTool) -> bool:
    """True for a ``@tool`` function without an ``on_update`` parameter whose ``execute`` is the
    generated one: it can never send an update, so it may execute on the run thread."""
    function = getattr(tool, "function", None)
    execute = tool.execute
    if function is None or getattr(execute, "__wrapped__", None) is not function:
        return False
    try:
        return _reports_no_progress[execute]
    except KeyError:
        pass
    except TypeError:  # not weak-referenceable
        return False
    try:  # the test tools.tool uses to decide whether to pass on_update
        known = "on_update" not in inspect.signature(function).parameters
    except (TypeError, ValueError):
        known = False
    _reports_no_progress[execute] = known
    return known


def _start_worker(
    index: int, item: _Prepared, signal: AbortSignal, mailbox: queue.SimpleQueue[Tuple[str, int, Any]]
) -> None:
    """Run one ``execute`` on a (pooled) daemon thread (a hung tool never blocks interpreter exit).

    The worker runs in a copy of the run thread's contextvars context and always posts its
    ``done`` (the run thread waits for it): whatever is raised, an error result at worst."""
    lock = threading.Lock()
    settled = [False]

    def on_update(partial: Any) -> None:
        with lock:  # calls after the call settled are dropped silently (spec §1.7, §8.4)
            if not settled[0]:
                mailbox.put(("update", index, partial))

    def work() -> None:
        _tool_thread.signal = signal  # lets Agent.wait_for_idle refuse to wait for its own run
        payload: Any = None
        try:
            payload = _execute(item, signal, on_update)
        finally:
            _tool_thread.signal = None
            if payload is None:  # _execute itself failed (MemoryError, say): still report
                payload = (_error_result(f"Tool {item.call.name} failed unexpectedly"), True)
            with lock:
                settled[0] = True
                mailbox.put(("done", index, payload))

    start_daemon(contextvars.copy_context().run, "agentcore-tool-" + item.call.name, work)


def _as_partial(value: Any) -> Any:
    """What ``on_update`` was given, as the ``AgentToolResult`` a ``tool_execution_update``
    carries: a ``str`` ("50% done"), blocks or data converted by the rules of a final result. A
    value that cannot be converted is passed on as it is (a progress report never fails a call)."""
    if isinstance(value, AgentToolResult):
        return value
    try:
        return _tools.to_tool_result(value)
    except Exception:  # noqa: BLE001 - see the docstring
        return value


def _as_tool_result(value: Any) -> AgentToolResult:
    """An AgentToolResult as is; other return values (str, blocks, None, JSON-able data) are
    converted with the same rules as ``@tool`` functions (:func:`agentcore.tools.to_tool_result`).

    ``content`` given as an iterator (a generator) is read into a list here, inside the call: an
    exception it raises is the tool's failure (an error result), and ``after_tool_call``, the
    ``tool_execution_end`` listeners and the transcript all see the same blocks."""
    result = value if isinstance(value, AgentToolResult) else _tools.to_tool_result(value)
    if isinstance(result.content, Iterator):
        result = copy.copy(result)
        result.content = list(result.content)
    return result


def _finalize(
    item: _Prepared,
    result: AgentToolResult,
    is_error: bool,
    ctx: AgentContext,
    message: AssistantMessage,
    cfg: AgentLoopConfig,
    signal: AbortSignal,
) -> _Outcome:
    """Apply ``after_tool_call`` overrides field by field (spec §2.8). An override that cannot
    be applied (a mapping with a key that is none of its fields) is the call's error result, as
    an exception of the hook is."""
    if cfg.after_tool_call is None:
        return _Outcome(item.call, result, is_error, item.kind, item.started)
    try:
        override = awaited(
            cfg.after_tool_call(AfterToolCallContext(message, item.call, item.args, result, is_error, ctx), signal)
        )
        override = merge_after_tool_call(override)  # a list: pluggy's answer, applied in order
    except Exception as exc:  # noqa: BLE001 - becomes an error result; the batch continues
        return _Outcome(item.call, _error_result(exception_message(exc)), True, None, item.started)
    if override is None:
        return _Outcome(item.call, result, is_error, item.kind, item.started)
    merged = dataclasses.replace(result)
    for name in ("content", "details", "usage", "terminate"):
        value = field_of(override, name)
        if value is not None:
            setattr(merged, name, value)
    new_is_error = field_of(override, "is_error")
    return _Outcome(
        item.call, merged, is_error if new_is_error is None else bool(new_is_error), item.kind, item.started
    )


_log = logging.getLogger(__name__)


def _log_tool_end(call: ToolCall, is_error: bool, kind: Optional[str], started: Optional[float]) -> None:
    """The DEBUG record of a finished tool call (never its arguments or result: they may hold
    secrets). The outcome is ok, error, blocked, invalid or aborted."""
    outcome = (kind or "error") if is_error else "ok"
    duration = "-" if started is None else f"{(time.perf_counter() - started) * 1000:.1f}"
    _log.debug("tool call %s id=%s outcome=%s duration_ms=%s", call.name, call.id, outcome, duration)

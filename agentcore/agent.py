"""``Agent``: a transcript, tools, queues and listeners around the agent loop (spec agent-loop §3).

Threads: every run executes on a dedicated daemon *run thread*; ``prompt()``/``continue_()`` wait
for it (unless ``wait=False``), so the caller's thread stays interruptible: a ``KeyboardInterrupt``
while waiting aborts the run, waits for it to settle (tools see the abort, the transcript stays
valid) and is re-raised. Events are reduced into :class:`AgentState` and then passed to the
listeners on the run thread, in subscription order, one at a time: a slow listener stalls the run
(it is a barrier, as in the reference design). No asyncio is used, so runs work from threads and
from Jupyter cells alike.

Failures: the busy checks raise ``RuntimeError`` in the caller before any thread starts. An
exception escaping the loop (a raising stream function, a contract hook or a listener) turns the
run into a *failure run*: a synthetic ``error``/``aborted`` assistant message is emitted and
appended, and ``prompt()`` returns normally unless a listener raises again during that sequence,
in which case ``prompt()`` re-raises that exception.
"""

from __future__ import annotations

import inspect
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from . import loop as _loop
from ._agent_plugins import HOOK_ATTRIBUTES, AgentAttributeHooks, RunHooks, registry_stream_fn
from ._agent_state import AgentState, _MessageQueue, check_tool_execution
from .events import (
    AgentEndEvent, MessageEndEvent, MessageStartEvent, TurnEndEvent,
)
from .messages import convert_to_llm as rich_convert_to_llm
from .signals import AbortController, AbortSignal
from .streams import start_daemon
from .types import (
    AgentContext, AssistantMessage, ImageContent, Model, TextContent, Usage, UserMessage, role_of,
)

__all__ = ["Agent", "AgentState", "EventSubscription"]

ERR_PROMPT_BUSY = ("Agent is already processing a prompt. Use steer() or followUp() to queue "
                   "messages, or wait for completion.")
ERR_CONTINUE_BUSY = "Agent is already processing. Wait for completion before continuing."
ERR_RESET_BUSY = "Agent is already processing. Wait for completion before resetting."
ERR_DOUBLE_START = "Agent is already processing."
ERR_NOTHING_TO_CONTINUE = "No messages to continue from"
ERR_WAIT_FROM_RUN_THREAD = (
    "wait_for_idle() was called from the agent's run thread or one of its tool threads (a "
    "listener, hook or tool); it would wait for itself forever. Return instead, or wait from "
    "another thread."
)

_INTERRUPTED = "Interrupted (KeyboardInterrupt)"

Listener = Callable[..., Any]


# =========================================================================== runs


@dataclass
class _ActiveRun:
    controller: AbortController
    settled: threading.Event = field(default_factory=threading.Event)
    thread_ident: Optional[int] = None
    result: List[Any] = field(default_factory=list)
    error: Optional[BaseException] = None
    on_settled: List[Callable[[], None]] = field(default_factory=list)


def _level(value: Any) -> str:
    """A thinking level as a string; None means "off" (not the level "None")."""
    return "off" if value is None else str(value)


def _listener_key(listener: Any) -> Any:
    """The listener itself (the same function subscribed twice is registered once), or its
    identity when it cannot be hashed (a callable dataclass instance, say)."""
    try:
        hash(listener)
    except TypeError:
        return ("agentcore-listener-id", id(listener))
    return listener


def _accepts_signal(fn: Callable[..., Any]) -> bool:
    """True when ``fn`` takes a second *required* positional argument: the
    ``listener(event, signal)`` form. Parameters with defaults and ``*args`` are left alone, so
    ``subscribe(print)`` prints just the event."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # some builtins have no signature: call with one argument
        return False
    required = 0
    for p in params:
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty:
            required += 1
    return required >= 2


class Agent:
    """A stateful agent: ``prompt()`` runs the loop on a run thread and returns the new messages.

    Every keyword option is also a public mutable attribute, read at the start of each run.
    ``model``, ``system_prompt``, ``thinking_level``, ``tools`` and ``messages`` live in
    :attr:`state` (and are mirrored as attributes). Tools may be :class:`~agentcore.tools.AgentTool`
    objects or names resolved through the tool registry at run start.
    """

    def __init__(self, model: Optional[Model] = None, system_prompt: str = "",
                 tools: Iterable[Any] = (), messages: Iterable[Any] = (),
                 thinking_level: str = "off", *,
                 api_key: Optional[str] = None,
                 get_api_key: Optional[Callable[[str], Optional[str]]] = None,
                 stream_fn: Optional[Callable[..., Any]] = None,
                 convert_to_llm: Optional[Callable[[List[Any]], List[Any]]] = None,
                 transform_context: Optional[Callable[..., Any]] = None,
                 before_tool_call: Optional[Callable[..., Any]] = None,
                 after_tool_call: Optional[Callable[..., Any]] = None,
                 should_stop_after_turn: Optional[Callable[..., Any]] = None,
                 prepare_next_turn: Optional[Callable[..., Any]] = None,
                 tool_execution: str = "parallel",
                 steering_mode: str = "one-at-a-time",
                 follow_up_mode: str = "one-at-a-time",
                 plugins: Iterable[Any] = (),
                 session: Any = None,
                 session_id: Optional[str] = None,
                 thinking_budgets: Optional[Dict[str, int]] = None,
                 transport: str = "auto",
                 max_retry_delay_ms: Optional[int] = None,
                 temperature: Optional[float] = None,
                 max_tokens: Optional[int] = None,
                 on_payload: Optional[Callable[..., Any]] = None,
                 on_response: Optional[Callable[..., Any]] = None,
                 cache_retention: Optional[str] = None,
                 headers: Optional[Dict[str, str]] = None,
                 metadata: Optional[Dict[str, Any]] = None,
                 compaction: Any = None,
                 compaction_model: Optional[Model] = None) -> None:
        from .plugins import create_plugin_manager

        self.plugins = create_plugin_manager(plugins or ())
        self._own_hooks = AgentAttributeHooks()
        self.plugins.register(self._own_hooks, name="agentcore.agent-attributes")
        if isinstance(model, str):
            model = self._model_named(model)
        self._state = AgentState(system_prompt, model if model is not None else Model.placeholder(),
                                 _level(thinking_level), tools or (), messages or ())
        self.api_key = api_key
        self.get_api_key = get_api_key
        self.stream_fn = stream_fn
        self.convert_to_llm = convert_to_llm
        self.transform_context = transform_context
        self.before_tool_call = before_tool_call
        self.after_tool_call = after_tool_call
        self.should_stop_after_turn = should_stop_after_turn
        self.prepare_next_turn = prepare_next_turn
        self.tool_execution = check_tool_execution(tool_execution)
        self.session_id = session_id
        self.thinking_budgets = thinking_budgets
        self.transport = transport
        self.max_retry_delay_ms = max_retry_delay_ms
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.on_payload = on_payload
        self.on_response = on_response
        self.cache_retention = cache_retention
        self.headers = headers
        self.metadata = metadata
        self.session = session
        self._steering = _MessageQueue(steering_mode)
        self._follow_ups = _MessageQueue(follow_up_mode)
        # key (the listener, or its id when unhashable) -> (listener, takes (event, signal))
        self._listeners: Dict[Any, Tuple[Listener, bool]] = {}
        self._run_lock = threading.Lock()
        self._active: Optional[_ActiveRun] = None
        self._idle_signal = AbortController().signal
        self._run_hooks: Optional[RunHooks] = None
        from .session.compactor import Compactor

        # compaction: CompactionSettings, None (defaults) or False (no automatic compaction)
        self.compactor = Compactor(self, compaction, model=compaction_model, emit=self._process_event)
        if session is not None:
            self._attach_session(session, restore=not messages, restore_tools=not tools)

    def _attach_session(self, session: Any, *, restore: bool, restore_tools: bool) -> None:
        """Resume from ``session.build_context()`` (messages unless given, the recorded thinking
        level unless one other than "off" was given, the model unless one was given, active tools
        unless tools were given) and record every finished message into the session."""
        from .session.agent_link import attach_session, restore_agent

        if restore:
            chosen_level = self._state.thinking_level
            context = restore_agent(self, session)
            if chosen_level != "off":  # a level passed to the constructor beats the recorded one
                self._state.thinking_level = chosen_level
            if restore_tools and getattr(context, "active_tool_names", None):
                self._state.tools = list(context.active_tool_names)
        self._detach_session = attach_session(self, session)

    def __repr__(self) -> str:  # never shows api_key or headers
        model = self._state.model
        return (f"Agent(model={getattr(model, 'key', model)!r}, messages={len(self._state.messages)}, "
                f"is_streaming={self._state.is_streaming})")

    # ------------------------------------------------------------------ state and properties

    @property
    def state(self) -> AgentState:
        return self._state

    def get_state(self) -> AgentState:
        """Alias of :attr:`state`."""
        return self._state

    @property
    def signal(self) -> Optional[AbortSignal]:
        """The active run's abort signal, or None when idle."""
        run = self._active
        return run.controller.signal if run is not None else None

    @property
    def steering_mode(self) -> str:
        return self._steering.mode

    @steering_mode.setter
    def steering_mode(self, mode: str) -> None:
        self._steering.mode = mode  # ValueError unless "one-at-a-time" or "all"

    @property
    def follow_up_mode(self) -> str:
        return self._follow_ups.mode

    @follow_up_mode.setter
    def follow_up_mode(self, mode: str) -> None:
        self._follow_ups.mode = mode  # ValueError unless "one-at-a-time" or "all"

    def _model_named(self, name: str) -> Model:
        """The registered model ``name`` ("provider/id"), as this agent's own copy: the registry's
        object is shared by every agent, so ``agent.model.base_url = ...`` (or headers) must not
        leak into other agents. Raises ``UnknownModelError`` listing close matches."""
        import copy

        return copy.deepcopy(self.plugins.get_model(name))

    model = property(lambda self: self._state.model,
                     lambda self, value: setattr(self._state, "model", self._model_named(value)
                                                 if isinstance(value, str) else value),
                     doc="Shortcut for ``state.model`` (a \"provider/id\" string is looked up, as in "
                         "the constructor).")
    system_prompt = property(lambda self: self._state.system_prompt,
                             lambda self, value: setattr(self._state, "system_prompt", value),
                             doc="Shortcut for ``state.system_prompt``.")
    thinking_level = property(lambda self: self._state.thinking_level,
                              lambda self, value: setattr(self._state, "thinking_level", _level(value)),
                              doc="Shortcut for ``state.thinking_level``.")
    tools = property(lambda self: self._state.tools,
                     lambda self, value: setattr(self._state, "tools", value),
                     doc="Shortcut for ``state.tools`` (assigning copies the list).")
    messages = property(lambda self: self._state.messages,
                        lambda self, value: setattr(self._state, "messages", value),
                        doc="Shortcut for ``state.messages`` (assigning copies the list).")

    # ------------------------------------------------------------------ listeners

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event)`` or ``listener(event, signal)`` for every event, on the run
        thread, after the state was updated. Returns a function that unsubscribes it.

        Raises TypeError for an ``async def`` listener (it would never run: listeners are called,
        not awaited); use a plain function, or :meth:`events` to consume events elsewhere."""
        if inspect.iscoroutinefunction(listener):
            raise TypeError(f"subscribe() got an async listener ({getattr(listener, '__qualname__', listener)!r}); "
                            f"listeners are plain functions called on the run thread. Use a plain "
                            f"function, or iterate agent.events() from your own code.")
        key = _listener_key(listener)
        self._listeners[key] = (listener, _accepts_signal(listener))

        def unsubscribe() -> None:
            self._listeners.pop(key, None)

        return unsubscribe

    # ------------------------------------------------------------------ queues

    def steer(self, message: Any) -> None:
        """Queue a message delivered after the current tool batch (or at the next run's start).

        Raises TypeError for something that is neither a message nor a str."""
        self._steering.push(self._queueable(message, "steer"))

    def follow_up(self, message: Any) -> None:
        """Queue a message delivered when the agent would otherwise stop.

        Raises TypeError for something that is neither a message nor a str."""
        self._follow_ups.push(self._queueable(message, "follow_up"))

    def _queueable(self, message: Any, method: str) -> Any:
        """``message`` as a message; a non-message would reach the transcript later, far from
        the mistake, and be left out of what the model sees."""
        item = self._as_message(message)
        if role_of(item) is None:
            raise TypeError(f"{method}() takes a message or a str, not {type(message).__name__} "
                            f"(queue a list one message at a time)")
        return item

    followUp = follow_up

    def clear_steering_queue(self) -> None:
        self._steering.clear()

    def clear_follow_up_queue(self) -> None:
        self._follow_ups.clear()

    def clear_all_queues(self) -> None:
        self._steering.clear()
        self._follow_ups.clear()

    def has_queued_messages(self) -> bool:
        return bool(self._steering) or bool(self._follow_ups)

    @staticmethod
    def _as_message(message: Any) -> Any:
        if isinstance(message, str):
            return UserMessage(content=[TextContent(message)])
        return message

    # ------------------------------------------------------------------ runs

    def prompt(self, text_or_messages: Union[str, Any, Sequence[Any]],
               images: Optional[Sequence[ImageContent]] = None, *, wait: bool = True) -> Any:
        """Run the loop with new input; return the run's new messages (None with ``wait=False``).

        Raises RuntimeError at once when a run is active.
        """
        messages = self._normalize_input(text_or_messages, images)
        with self._run_lock:
            if self._active is not None:
                raise RuntimeError(ERR_PROMPT_BUSY)
            run = self._begin_run()
        return self._launch(run, messages, skip_initial_steering_poll=False, wait=wait)

    def continue_(self, *, wait: bool = True) -> Any:
        """Continue from the current transcript.

        At an assistant tail, queued steering (else follow-up) messages start a new run; with both
        queues empty it raises ValueError. Raises RuntimeError when a run is active.
        """
        with self._run_lock:
            if self._active is not None:
                raise RuntimeError(ERR_CONTINUE_BUSY)
            messages = self._state.messages
            if not messages:
                raise ValueError(ERR_NOTHING_TO_CONTINUE)
            prompts: Optional[List[Any]] = None
            skip = False
            if role_of(messages[-1]) == "assistant":
                prompts = self._steering.drain()
                skip = bool(prompts)
                if not prompts:
                    prompts = self._follow_ups.drain()
                if not prompts:
                    raise ValueError(_loop.ERR_CONTINUE_ASSISTANT)
            run = self._begin_run()
        return self._launch(run, prompts, skip_initial_steering_poll=skip, wait=wait)

    def stream(self, text_or_messages: Union[str, Any, Sequence[Any]],
               images: Optional[Sequence[ImageContent]] = None) -> Iterator[Any]:
        """Start a prompt run and return an iterator over its events.

        The run starts at once (busy errors raise here). Events are handed over through a
        ``queue.Queue``, so the consumer does not slow the run down; iteration ends when the run
        has settled. A KeyboardInterrupt while iterating aborts the run, waits, and re-raises.
        Leaving the loop early does not stop the run (call :meth:`abort`).
        """
        import queue

        events: "queue.Queue[Any]" = queue.Queue()
        done = object()
        unsubscribe = self.subscribe(lambda event: events.put(event))
        try:
            messages = self._normalize_input(text_or_messages, images)
            with self._run_lock:
                if self._active is not None:
                    raise RuntimeError(ERR_PROMPT_BUSY)
                run = self._begin_run()
                run.on_settled.append(lambda: events.put(done))
                run.on_settled.append(unsubscribe)
        except BaseException:
            unsubscribe()
            raise
        self._launch(run, messages, skip_initial_steering_poll=False, wait=False)
        return self._iterate_events(run, events, done)

    def _iterate_events(self, run: _ActiveRun, events: Any, done: object) -> Iterator[Any]:
        on_main = threading.current_thread() is threading.main_thread()
        try:
            while True:
                try:
                    item = events.get(timeout=0.05) if on_main else events.get()
                except Exception:  # queue.Empty: poll again so Ctrl+C is noticed
                    continue
                if item is done:
                    break
                yield item
        except KeyboardInterrupt:
            run.controller.abort(_INTERRUPTED)
            run.settled.wait()
            raise
        if run.error is not None:
            raise run.error

    def events(self, *, until_agent_end: bool = False) -> "EventSubscription":
        """Subscribe a consumer-side iterator to every event from now on (fed by a ``queue.Queue``).

        Unlike listeners, the consumer never slows the run down. Iteration blocks until the next
        event; it ends after ``close()`` (also on leaving a ``with`` block) or, with
        ``until_agent_end=True``, after the next ``agent_end``. Handy for a UI thread::

            with agent.events() as events:
                agent.prompt("hi", wait=False)
                for event in events:
                    ...
        """
        return EventSubscription(self, until_agent_end)

    def display(self, prompt: Any, **options: Any) -> Any:
        """Run ``prompt`` in a Jupyter notebook, showing streamed text and tool progress in one
        updating output area (see :func:`agentcore.jupyter.display_run`). Interrupting the kernel
        aborts the run cleanly. Returns the run's new messages."""
        from .jupyter import display_run

        return display_run(self, prompt, **options)

    def compact(self, instructions: Optional[str] = None) -> Any:
        """Summarise older history now so the conversation fits the context window again.

        Idle only (RuntimeError while a run is active; a prompt started meanwhile gets the busy
        error). With a session the summary is stored as a ``compaction`` entry and the transcript
        is rebuilt from the session. ``abort()`` cancels it. Returns the ``CompactionResult``;
        raises ``CompactionError`` (``nothing_to_compact``, ``already_compacted``, ``aborted``,
        ``summarization_failed``).
        """
        return self._while_busy(lambda signal: self.compactor.compact(instructions, signal=signal))

    def navigate_tree(self, target_id: Optional[str], summarize: bool = False, **options: Any) -> Any:
        """Move the session to ``target_id`` (another branch point), optionally summarising the
        branch being left into a ``branch_summary`` entry, and reload the transcript from it.
        Idle only. See :func:`agentcore.session.branch_summary.navigate_tree` for ``options``."""
        return self._while_busy(lambda signal: self.compactor.navigate_tree(target_id, summarize, **options))

    def _while_busy(self, work: Callable[[AbortSignal], Any]) -> Any:
        """Run ``work`` on this thread while the agent counts as busy (prompts are refused)."""
        with self._run_lock:
            if self._active is not None:
                raise RuntimeError(ERR_DOUBLE_START)
            placeholder = _ActiveRun(AbortController())
            placeholder.thread_ident = threading.get_ident()
            self._active = placeholder
        try:
            return work(placeholder.controller.signal)
        finally:
            with self._run_lock:
                self._active = None
            placeholder.settled.set()

    def wait_for_idle(self, timeout: Optional[float] = None) -> bool:
        """Wait until the current run settled (``agent_end`` listeners included); True when idle.

        Raises RuntimeError when called from the run thread (it would wait for itself).
        """
        run = self._active
        if run is None:
            return True
        if run.thread_ident == threading.get_ident() or _loop.running_tool_signal() is run.controller.signal:
            raise RuntimeError(ERR_WAIT_FROM_RUN_THREAD)
        return run.settled.wait(timeout)

    def abort(self, reason: Any = None) -> None:
        """Abort the active run (tools and the provider see the signal); no-op when idle."""
        run = self._active
        if run is not None:
            run.controller.abort(reason)

    def reset(self) -> None:
        """Clear the transcript, runtime fields and both queues; keep model, prompt and tools.

        Raises RuntimeError while a run is active.
        """
        with self._run_lock:
            if self._active is not None:
                raise RuntimeError(ERR_RESET_BUSY)
            state = self._state
            state._messages = []
            state._is_streaming = False
            state._streaming_message = None
            state._pending_tool_calls = frozenset()
            state._error_message = None
            self.clear_all_queues()

    # ------------------------------------------------------------------ run lifecycle

    def _normalize_input(self, value: Any, images: Optional[Sequence[ImageContent]]) -> List[Any]:
        if isinstance(value, str):
            content: List[Any] = [TextContent(value)]
            content.extend(images or ())
            return [UserMessage(content=content)]
        if images:  # they would be dropped silently: the messages already carry their content
            raise TypeError("prompt(images=...) goes with a str prompt; put the images into the "
                            "message's content instead")
        if isinstance(value, (list, tuple)):
            # A str item is one user message (as with steer()); an item without a role would reach
            # the transcript and be silently left out of what the model sees.
            items = [self._as_message(item) for item in value]
            for index, item in enumerate(items):
                if role_of(item) is None:
                    raise TypeError(f"prompt() got a list whose item {index} is a "
                                    f"{type(item).__name__}, not a message or str")
            return items
        if role_of(value) is None:
            raise TypeError(f"prompt() takes a str, a message or a list of messages, "
                            f"not {type(value).__name__}")
        return [value]

    def _begin_run(self) -> _ActiveRun:
        """Called under ``_run_lock`` after the busy check: mark the agent busy."""
        if self._active is not None:
            raise RuntimeError(ERR_DOUBLE_START)
        run = _ActiveRun(AbortController())
        self._active = run
        state = self._state
        state._is_streaming = True
        state._streaming_message = None
        state._error_message = None
        return run

    def _launch(self, run: _ActiveRun, prompts: Optional[List[Any]], *,
                skip_initial_steering_poll: bool, wait: bool) -> Any:
        """Prepare the run's snapshot in the caller (errors raise here), then start the run thread."""
        try:
            context = AgentContext(self._state.system_prompt, list(self._state.messages),
                                   self._resolve_tools())
            config = self._build_loop_config(run.controller.signal, skip_initial_steering_poll)
            stream_fn = self.stream_fn or _loop._default_stream_fn or registry_stream_fn(self.plugins)
        except BaseException:
            self._finish_run(run)
            raise

        def body() -> List[Any]:
            emit = self._emitter(run)
            signal = run.controller.signal
            return self.compactor.run(prompts, context, config, emit, signal, stream_fn)

        try:
            # a reused daemon thread; a Ctrl+C can land here already: the run may be executing tools
            try:
                start_daemon(self._run_with_lifecycle, "agentcore-run", run, body)
            except Exception:  # no thread could be started: the agent must not stay busy
                self._finish_run(run)
                raise
            if not wait:
                return None
            if threading.current_thread() is threading.main_thread():
                while not run.settled.wait(0.05):  # short waits so a pending Ctrl+C is noticed
                    pass
            else:
                run.settled.wait()
        except KeyboardInterrupt:
            run.controller.abort(_INTERRUPTED)
            run.settled.wait()
            raise
        return self._outcome(run)

    @staticmethod
    def _outcome(run: _ActiveRun) -> List[Any]:
        if run.error is not None:
            raise run.error
        return run.result

    def _run_with_lifecycle(self, run: _ActiveRun, body: Callable[[], List[Any]]) -> None:
        run.thread_ident = threading.get_ident()
        try:
            try:
                run.result = body()
            except BaseException as exc:  # noqa: BLE001 - becomes a failure run
                self._fail_run(run, exc)
        finally:
            self._finish_run(run)

    def _fail_run(self, run: _ActiveRun, exc: BaseException) -> None:
        """Emit the failure sequence (spec §3.6): message_start/end, turn_end, agent_end."""
        model = self._state.model  # read defensively: a broken model may be why the run failed
        message = AssistantMessage(
            content=[TextContent("")], api=str(getattr(model, "api", "unknown")),
            provider=str(getattr(model, "provider", "unknown")), model=str(getattr(model, "id", model)),
            usage=Usage(), stop_reason="aborted" if run.controller.signal.aborted else "error",
            error_message=str(exc) or type(exc).__name__,
        )
        run.result = [message]
        # Tools of a parallel batch may still be running: tell them the run is over (spec §8.4).
        run.controller.abort(f"Run failed: {message.error_message}")
        try:
            for event in (MessageStartEvent(message), MessageEndEvent(message),
                          TurnEndEvent(message, []), AgentEndEvent([message])):
                self._process_event(event, run)
        except BaseException as again:  # noqa: BLE001 - a listener failed twice: the caller sees it
            run.error = again

    def _finish_run(self, run: _ActiveRun) -> None:
        state = self._state
        state._is_streaming = False
        state._streaming_message = None
        state._pending_tool_calls = frozenset()
        self._steering.restore()
        self._follow_ups.restore()
        with self._run_lock:
            if self._active is run:
                self._active = None
        for callback in run.on_settled:
            callback()
        run.settled.set()

    def _emitter(self, run: _ActiveRun) -> Callable[[Any], None]:
        """``_process_event`` for the events of ``run`` (one per streamed token: kept lean)."""
        state, reduce, listeners = self._state, self._reduce, self._listeners
        hooks = self._run_hooks
        observe = hooks.on_event if hooks is not None and hooks.observes_events() else None

        def emit(event: Any) -> None:
            if self._active is not run:  # a stale run never reaches state or listeners
                return
            if event.type == "message_update":  # all the reducer does for it
                state._streaming_message = event.message
            else:
                reduce(event)
            if observe is not None:
                observe(event, self)
            if listeners:
                self._call_listeners(event, run)

        return emit

    # ------------------------------------------------------------------ wiring points

    def _resolve_tools(self) -> List[Any]:
        """Tools for this run; names are looked up in this agent's tool registry (built-ins and
        plugins). An unknown name raises ``UnknownToolError`` listing the close matches."""
        return [self.plugins.get_tool(item) if isinstance(item, str) else item
                for item in self._state.tools]

    def _build_loop_config(self, signal: AbortSignal,
                           skip_initial_steering_poll: bool) -> "_loop.AgentLoopConfig":
        """The loop configuration of one run, from the current attribute values (spec §3.2)."""
        level = _level(self._state.thinking_level)
        skip_first = [skip_initial_steering_poll]

        def get_steering_messages() -> List[Any]:
            if skip_first[0]:
                skip_first[0] = False
                return []
            return self._steering.drain()

        should_stop = self.should_stop_after_turn
        for name in HOOK_ATTRIBUTES:
            self._own_hooks.snapshot[name] = getattr(self, name)
        hooks = self._run_hooks = RunHooks(self.plugins, self._own_hooks, rich_convert_to_llm)
        return _loop.AgentLoopConfig(
            model=self._state.model,
            convert_to_llm=hooks.callable_for("convert_to_llm"),
            transform_context=hooks.callable_for("transform_context"),
            get_api_key=self.get_api_key,
            should_stop_after_turn=(lambda ctx: should_stop(ctx, signal)) if should_stop else None,
            prepare_next_turn=self._prepare_next_turn_hook(signal),
            get_steering_messages=get_steering_messages,
            get_follow_up_messages=self._follow_ups.drain,
            tool_execution=check_tool_execution(self.tool_execution),
            before_tool_call=hooks.callable_for("before_tool_call"),
            after_tool_call=hooks.callable_for("after_tool_call"),
            api_key=self.api_key,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            reasoning=None if level == "off" else level,
            thinking_budgets=self.thinking_budgets,
            session_id=self.session_id,
            transport=self.transport,
            cache_retention=self.cache_retention,
            headers=self.headers,
            metadata=self.metadata,
            max_retry_delay_ms=self.max_retry_delay_ms,
            on_payload=self.on_payload,
            on_response=self.on_response,
        )

    def _prepare_next_turn_hook(self, signal: AbortSignal) -> Optional[Callable[[Any], Any]]:
        """Installed when ``prepare_next_turn`` is set at run start; read again at call time.

        ``prepare_next_turn(ctx, signal)`` is the preferred form; a one-argument hook is the legacy
        ``prepare_next_turn(signal)`` form.
        """
        if self.prepare_next_turn is None:
            return None

        def hook(ctx: Any) -> Any:
            current = self.prepare_next_turn
            if current is None:
                return None
            if _accepts_signal(current):
                return current(ctx, signal)
            return current(signal)

        return hook

    def _process_event(self, event: Any, run: Optional[_ActiveRun] = None) -> None:
        """Reduce ``event`` into the state, then call the listeners in order (run thread)."""
        self._reduce(event)
        hooks = self._run_hooks
        if hooks is not None and hooks.observes_events():
            hooks.on_event(event, self)
        if self._listeners:
            self._call_listeners(event, run)

    def _call_listeners(self, event: Any, run: Optional[_ActiveRun]) -> None:
        """The listeners subscribed when the event arrived, in subscription order."""
        signal = run.controller.signal if run is not None else self._idle_signal
        for listener, with_signal in list(self._listeners.values()):
            if with_signal:
                listener(event, signal)
            else:
                listener(event)

    def _reduce(self, event: Any) -> None:
        state = self._state
        kind = event.type
        if kind == "message_start" or kind == "message_update":
            state._streaming_message = event.message
        elif kind == "message_end":
            state._streaming_message = None
            state._messages.append(event.message)
            self._steering.commit(event.message)
            self._follow_ups.commit(event.message)
        elif kind == "tool_execution_start":
            state._pending_tool_calls = state._pending_tool_calls | {event.tool_call_id}
        elif kind == "tool_execution_end":
            state._pending_tool_calls = state._pending_tool_calls - {event.tool_call_id}
        elif kind == "turn_end":
            message = event.message
            if role_of(message) == "assistant" and getattr(message, "error_message", None):
                state._error_message = message.error_message
        elif kind == "agent_end":
            state._streaming_message = None


class EventSubscription:
    """Iterator over an agent's events, returned by :meth:`Agent.events`."""

    def __init__(self, agent: Agent, until_agent_end: bool) -> None:
        import queue

        self._queue: "queue.Queue[Any]" = queue.Queue()
        self._closed = object()
        self._until_agent_end = until_agent_end
        self._unsubscribe = agent.subscribe(self._queue.put)

    def close(self) -> None:
        """Stop receiving events; a blocked iteration ends."""
        self._unsubscribe()
        self._queue.put(self._closed)

    def __iter__(self) -> Iterator[Any]:
        while True:
            item = self._queue.get()
            if item is self._closed:
                return
            yield item
            if self._until_agent_end and item.type == "agent_end":
                self.close()

    def __enter__(self) -> "EventSubscription":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

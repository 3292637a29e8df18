"""``Agent``: a transcript, tools, queues and listeners around the agent loop (spec agent-loop §3).

Threads: a run called from the main thread executes on a daemon *run thread*;
``prompt()``/``continue_()`` wait for it (unless ``wait=False``), so the main thread stays
interruptible: a ``KeyboardInterrupt`` while waiting aborts the run, waits for it to settle (tools
see the abort, the transcript stays valid) and is re-raised. Called with ``wait=True`` from any
other thread (no Ctrl+C reaches it), the run executes on the calling thread itself, in a copy of
its contextvars context; ``wait=False`` and ``stream()`` always use a run thread. Events are reduced into :class:`AgentState` and then passed to the
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

import contextvars
import copy
import inspect
import logging
import os
import sys
import threading
import time
import warnings
import weakref
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Generic,
    Iterable,
    Iterator,
    List,
    Literal,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Type,
    TypeVar,
    Union,
    overload,
)

from . import approvals as _approvals
from . import loop as _loop
from ._agent_plugins import AgentPlugins, converter_for_run, observers_for_run, optional_hook, registry_stream_fn
from ._agent_state import AgentState, _MessageQueue, check_tool_execution
from ._safe import exception_message
from ._util import Latch, wait_interruptibly
from ._util import accepts_signal as _accepts_signal
from .events import (
    AgentEndEvent,
    AgentEvent,
    MessageEndEvent,
    MessageStartEvent,
    TurnEndEvent,
)
from .messages import convert_to_llm as rich_convert_to_llm
from .options import OPTION_NAMES, StreamOptions, check_api_key, check_value, merge_provider_options, split_names
from .signals import AbortController, AbortSignal
from .streams import start_daemon
from .types import (
    AgentContext,
    AssistantMessage,
    ImageContent,
    Model,
    PromptInput,
    TextContent,
    ThinkingLevel,
    ToolCall,
    Usage,
    UserMessage,
    message_from_dict,
    now_ms,
    role_of,
)

if TYPE_CHECKING:
    from ._hook_types import (
        AfterToolCallHook,
        BeforeToolCallHook,
        ConvertToLlm,
        GetApiKey,
        Listener,
        PrepareNextTurnHook,
        ShouldStopAfterTurnHook,
        TransformContextHook,
    )
    from .loop import StreamFn
    from .options import Timeout
    from .plugins import AgentPluginManager
    from .session.compaction import CompactionResult
    from .tools import AgentTool

__all__ = ["Agent", "AgentState", "EventSubscription"]

ERR_PROMPT_BUSY = (
    "Agent is already processing a prompt. Use steer() or follow_up() to queue messages, or wait for completion."
)
ERR_CONTINUE_BUSY = "Agent is already processing. Wait for completion before continuing."
ERR_RESET_BUSY = "Agent is already processing. Wait for completion before resetting."
ERR_DOUBLE_START = "Agent is already processing."
ERR_NOTHING_TO_CONTINUE = "No messages to continue from"
ERR_INTERRUPTED_CALL = (
    "No result: the run stopped before this tool call returned (the process running it ended), so it "
    "was not run again; it may or may not have taken effect."
)
ERR_EMPTY_PROMPT = (
    "prompt() got an empty list of messages: give at least one (continue_() runs from the transcript as it is)"
)
ERR_WAIT_FROM_RUN_THREAD = (
    "wait_for_idle() was called from the agent's run thread or one of its tool threads (a "
    "listener, hook or tool); it would wait for itself forever. Return instead, or wait from "
    "another thread."
)

_INTERRUPTED = "Interrupted (KeyboardInterrupt)"

WARN_BLOCKS_EVENT_LOOP = (
    "Agent.{method}() was called on a thread whose asyncio event loop is running: the loop is "
    "blocked until the run ends. From async code use `await asyncio.to_thread(agent.{method}, ...)`."
)

#: roles a dict message may have (the reference JSON shape, read by message_from_dict)
_MESSAGE_ROLES = (
    "user",
    "assistant",
    "toolResult",
    "system",
    "bashExecution",
    "compactionSummary",
    "branchSummary",
    "custom",
)

#: ``setup(tools, config) -> (tools, config)``: how one run's tools and loop configuration differ
#: from the agent's (``ask()`` uses it); called on the caller's thread while the run is prepared.
_RunSetup = Callable[[List[Any], Any], Tuple[List[Any], Any]]

_T = TypeVar("_T")  # the value type of ask(prompt, SomeClass)

# The agent whose run body executes in this context (the run thread's, inherited by its tools'
# threads): lets a sub-agent tool find its parent's session (agentcore.subagent).
_running_agent: contextvars.ContextVar[Optional[Agent]] = contextvars.ContextVar(
    "agentcore_running_agent", default=None
)


def running_agent() -> Optional[Agent]:
    """The agent whose run (or one of whose tools) is executing on this thread, else None."""
    return _running_agent.get()


# =========================================================================== runs


@dataclass
class _ActiveRun:
    """A run in progress (``streaming``) or a maintenance step that only makes the agent busy."""

    controller: AbortController
    streaming: bool = True
    settled: Latch = field(default_factory=Latch)
    thread_ident: Optional[int] = None
    result: List[Any] = field(default_factory=list)
    error: Optional[BaseException] = None
    on_settled: List[Callable[[], None]] = field(default_factory=list)
    #: None until decided once: True when a thread began executing the run, False when the
    #: caller cancelled it before any did (a Ctrl+C while it was being started)
    began: Optional[bool] = None
    _began_lock: threading.Lock = field(default_factory=threading.Lock)

    def decide(self, begin: bool) -> bool:
        """Decide whether the run executes, once: the first caller's ``begin`` wins (the run
        thread as it starts, or the interrupted caller cancelling it); returns the decision."""
        with self._began_lock:
            if self.began is None:
                self.began = begin
            return self.began


_LEVELS = tuple(level.value for level in ThinkingLevel)


def _abort_and_settle(run: _ActiveRun, reason: Any = None) -> None:
    """After a Ctrl+C in the waiting caller: abort ``run`` and wait until it has settled, so its
    end (the aborted answer, the tools' results) is recorded before the caller re-raises. A further
    KeyboardInterrupt meanwhile (a second key press, or a relayed signal crossing the first) is
    absorbed: one interrupt, one settled run. Every built-in tool ends at once on the abort.
    ``reason``: the abort's reason (default: an interrupt). A no-op abort for a settled run."""
    try:
        run.controller.abort(_INTERRUPTED if reason is None else reason)
    except KeyboardInterrupt:  # it landed while the abort told the listeners: all were told
        pass
    while True:
        try:
            run.settled.wait()
            return
        except KeyboardInterrupt:
            continue


def _always() -> bool:
    return True


def _level(value: Any) -> str:
    """A thinking level as a string; None means "off" (not the level "None"). Raises ValueError
    (with the close matches) for anything but a :class:`~agentcore.types.ThinkingLevel` value: a
    typo would otherwise reach the provider as its reasoning setting."""
    if value is None:
        return "off"
    level = str(value)
    if level not in _LEVELS:
        import difflib

        close = difflib.get_close_matches(level, _LEVELS, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"thinking_level must be one of {', '.join(_LEVELS)}, not {value!r}{hint}")
    return level


def _checked_function(value: Any, name: str) -> Any:
    """``value`` when it is None or callable; TypeError naming the option otherwise (a
    non-callable hook would fail only at the next run, as a tool error the model sees)."""
    if value is not None and not callable(value):
        raise TypeError(f"Agent({name}=...) must be a function or None, not {type(value).__name__}")
    return value


_F = TypeVar("_F")


class _FunctionAttribute(Generic[_F]):
    """An Agent attribute that holds a function or None (a hook, ``get_api_key``, ``stream_fn``):
    assigning anything else raises TypeError naming the attribute, as the constructor does. Kept
    in the instance ``__dict__`` under its own name, so ``vars(agent)`` shows it."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: Optional[type] = None) -> _FunctionAttribute[_F]: ...
    @overload
    def __get__(self, obj: Agent, owner: Optional[type] = None) -> _F: ...
    def __get__(self, obj: Optional[Agent], owner: Optional[type] = None) -> Any:
        if obj is None:
            return self
        return obj.__dict__.get(self.name)

    def __set__(self, obj: Agent, value: _F) -> None:
        if value is not None and not callable(value):
            raise TypeError(f"Agent.{self.name} must be a function or None, not {type(value).__name__}")
        obj.__dict__[self.name] = value


class _HookAttribute(_FunctionAttribute[_F]):
    """A constructor callable that is also a hook (``before_tool_call``, ``after_tool_call``,
    ``transform_context``, ``convert_to_llm``): assigning it while no run is active updates the
    agent's own plugin manager at once, so ``agent.plugins.hook.X(...)`` answers as the next run
    acts (a run in progress keeps the callables it started with)."""

    def __set__(self, obj: Agent, value: _F) -> None:
        super().__set__(obj, value)
        obj._hooks_assigned()


def _checked_messages(value: Any, where: str) -> List[Any]:
    """``value`` as a transcript list. TypeError for a str or mapping (not a list of messages)
    and for an item without a ``role`` (a message object, a reference dict or a custom message
    with a ``role``): a string would become one message per character."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise TypeError(f"{where} must be a list of messages, not {type(value).__name__}")
    messages = list(value)
    for index, message in enumerate(messages):
        if role_of(message) is None:
            raise TypeError(
                f"{where} item {index} has no 'role' (it is {type(message).__name__}): give message "
                "objects (UserMessage, AssistantMessage, ...) or their dicts"
            )
    return messages


_log = logging.getLogger(__name__)


def _interrupted_batch(messages: Sequence[Any]) -> Optional[_approvals.Resumption]:
    """The resumption that answers the last turn's unanswered tool calls with
    :data:`ERR_INTERRUPTED_CALL`, when the transcript ends in that turn (its ``toolUse`` message,
    then results of some of its calls at most): a process killed while they ran. None otherwise."""
    answered = set()
    for message in reversed(messages):
        role = role_of(message)
        if role == "toolResult":
            answered.add(message.tool_call_id)
            continue
        if role != "assistant" or message.stop_reason != "toolUse":
            return None
        missing = [call.id for call in message.tool_calls if call.id not in answered]
        if not missing:
            return None
        denied = _approvals.ApprovalDecision(False, None, ERR_INTERRUPTED_CALL)
        return _approvals.Resumption(message, {call_id: denied for call_id in missing})
    return None


def _log_run_end(run: _ActiveRun, started: float) -> None:
    """The DEBUG record of a finished run: its stop reason (the last assistant message's),
    how many messages it added and how long it took. Never message content."""
    result = run.result or []
    last = next((m for m in reversed(result) if role_of(m) == "assistant"), None)
    _log.debug(
        "run end stop_reason=%s messages=%d duration_ms=%.1f",
        getattr(last, "stop_reason", None) or "-",
        len(result),
        (time.perf_counter() - started) * 1000,
    )


def _field_text(obj: Any, name: str) -> str:
    """``str(obj.name)``, or "unknown" when reading or formatting it raises (a broken model)."""
    try:
        return str(getattr(obj, name, "unknown"))
    except Exception:  # noqa: BLE001 - the failure message must still be built
        return "unknown"


def _listener_key(listener: Any) -> Any:
    """The listener itself (the same function subscribed twice is registered once), or its
    identity when it cannot be hashed (a callable dataclass instance, say)."""
    try:
        hash(listener)
    except TypeError:
        return ("agentcore-listener-id", id(listener))
    return listener


def _with_signal(fn: Optional[Callable[..., Any]], signal: AbortSignal) -> Optional[Callable[[Any], Any]]:
    """``fn`` as the loop's one-argument hook: ``fn(ctx, signal)`` when it takes two required
    positional arguments, else the reference's ``fn(ctx)``."""
    if fn is None:
        return None
    if _accepts_signal(fn):
        return lambda ctx: fn(ctx, signal)
    return fn


ERR_REASONING_OPTION = (
    "Agent() takes thinking_level= (and thinking_budgets=), not reasoning=: the "
    "reasoning option of each request is derived from the thinking level"
)


_AGENT_DEFAULTS = StreamOptions(transport="auto")


def _default_agent_options() -> StreamOptions:
    """A new ``StreamOptions(transport="auto")`` (copied from a checked one: no checks per Agent)."""
    options = object.__new__(StreamOptions)
    options.__dict__.update(_AGENT_DEFAULTS.__dict__)
    return options


def _agent_options(options: Any, given: Dict[str, Any], declared: Callable[[], Mapping[str, Any]]) -> StreamOptions:
    """The agent's :class:`StreamOptions`: ``transport="auto"``, then ``options`` (a
    StreamOptions or a mapping of option names), then keywords. A name that is no field but an
    option an installed provider declares (``declared()``) goes to ``provider_options``.
    Raises TypeError for an unknown name (with a did-you-mean) and for ``reasoning``."""
    if options is None and not given:  # the usual Agent(): the defaults, without checking them again
        return _default_agent_options()
    extra: Dict[str, Any] = {}
    if options is not None and not isinstance(options, StreamOptions):
        if not isinstance(options, Mapping):
            raise TypeError(
                f"Agent(options=...) takes a StreamOptions or a mapping of option names, not {type(options).__name__}"
            )
        fields, extra = split_names(options, "Agent(options=...)", declared)
        options = StreamOptions(**fields)
    fields, more = split_names(given, "Agent()", declared)
    if "reasoning" in fields or (options is not None and options.reasoning is not None):
        raise TypeError(ERR_REASONING_OPTION)
    merged = _default_agent_options()
    provider: Dict[str, Any] = {}
    for source, declared_names in ((options.__dict__ if options is not None else {}, extra), (fields, more)):
        for name, value in source.items():
            if value is None:
                continue
            if name == "provider_options":
                provider.update(value)
            else:
                setattr(merged, name, value)
        provider.update(declared_names)  # Agent(region=...) wins over provider_options={...}
    merged.provider_options = merge_provider_options(None, provider)
    return merged


def _option_property(name: str) -> property:
    """``agent.<name>``: a shortcut for ``agent.options.<name>`` (read at the start of each run)."""

    def get(self: Agent) -> Any:
        return getattr(self.options, name)

    def set_(self: Agent, value: Any) -> None:
        check_value(name, value, "agent")
        setattr(self.options, name, value)

    return property(get, set_, doc=f"Shortcut for ``options.{name}`` (a stream option).")


class Agent:
    """A stateful agent: ``prompt()`` runs the loop on a run thread and returns the new messages.

    Every keyword option is also a public mutable attribute, read at the start of each run; the
    function attributes (hooks, ``get_api_key``, ``stream_fn``) refuse a value that is neither a
    function nor None (TypeError).
    Provider options (every field of :class:`~agentcore.options.StreamOptions`: ``temperature``,
    ``max_tokens``, ``timeout``, ``max_retries``, ``tool_choice``, ``headers`` ...) are given as
    keywords or as one ``options=StreamOptions(...)`` value (keywords win); they live in
    :attr:`options` and each is also an attribute (``agent.temperature = 0.2``). An unknown keyword
    raises TypeError with the closest option names.
    ``model``, ``system_prompt``, ``thinking_level``, ``tools`` and ``messages`` live in
    :attr:`state` (and are mirrored as attributes). Tools may be :class:`~agentcore.tools.AgentTool`
    objects or names resolved through the tool registry at run start.
    """

    # functions (or None), checked when assigned: a non-callable would fail only at the next run
    get_api_key: _FunctionAttribute[Optional[GetApiKey]] = _FunctionAttribute()
    stream_fn: _FunctionAttribute[Optional[StreamFn]] = _FunctionAttribute()
    convert_to_llm: _HookAttribute[Optional[ConvertToLlm]] = _HookAttribute()
    transform_context: _HookAttribute[Optional[TransformContextHook]] = _HookAttribute()
    before_tool_call: _HookAttribute[Optional[BeforeToolCallHook]] = _HookAttribute()
    after_tool_call: _HookAttribute[Optional[AfterToolCallHook]] = _HookAttribute()
    should_stop_after_turn: _FunctionAttribute[Optional[ShouldStopAfterTurnHook]] = _FunctionAttribute()
    prepare_next_turn: _FunctionAttribute[Optional[PrepareNextTurnHook]] = _FunctionAttribute()

    if TYPE_CHECKING:
        # Every stream option but ``reasoning`` is also an attribute (a property set on the class
        # after it, reading and writing ``self.options``); declared here for type checkers and IDEs.
        temperature: Optional[float]
        max_tokens: Optional[int]
        thinking_budgets: Optional[Dict[str, int]]
        session_id: Optional[str]
        transport: Optional[str]
        cache_retention: Optional[str]
        headers: Optional[Dict[str, str]]
        metadata: Optional[Dict[str, Any]]
        timeout: Optional[Timeout]
        timeout_ms: Optional[int]
        max_retries: Optional[int]
        max_retry_delay_ms: Optional[int]
        tool_choice: Optional[Any]
        service_tier: Optional[str]
        reasoning_effort: Optional[str]
        reasoning_summary: Optional[str]
        azure_base_url: Optional[str]
        azure_resource_name: Optional[str]
        azure_deployment_name: Optional[str]
        azure_api_version: Optional[str]
        azure_auth: Optional[str]
        thinking_enabled: Optional[bool]
        thinking_budget_tokens: Optional[int]
        effort: Optional[str]
        output_schema: Optional[Dict[str, Any]]
        on_payload: Optional[Callable[..., Any]]
        on_response: Optional[Callable[..., Any]]
        provider_options: Optional[Dict[str, Any]]

    def __init__(
        self,
        model: Union[Model, str, None] = None,
        system_prompt: str = "",
        tools: Optional[Iterable[Any]] = None,
        messages: Iterable[Any] = (),
        thinking_level: str = "off",
        *,
        api_key: Optional[str] = None,
        get_api_key: Optional[GetApiKey] = None,
        stream_fn: Optional[StreamFn] = None,
        convert_to_llm: Optional[ConvertToLlm] = None,
        transform_context: Optional[TransformContextHook] = None,
        before_tool_call: Optional[BeforeToolCallHook] = None,
        after_tool_call: Optional[AfterToolCallHook] = None,
        should_stop_after_turn: Optional[ShouldStopAfterTurnHook] = None,
        prepare_next_turn: Optional[PrepareNextTurnHook] = None,
        tool_execution: str = "parallel",
        steering_mode: str = "one-at-a-time",
        follow_up_mode: str = "one-at-a-time",
        plugins: Iterable[Any] = (),
        session: Any = None,
        compaction: Any = None,
        compaction_model: Optional[Model] = None,
        options: Union[StreamOptions, Mapping[str, Any], None] = None,
        **stream_options: Any,
    ) -> None:
        self._plugin_args = tuple(plugins or ())  # what as_tool() builds fresh sub-agents with
        self._plugins = AgentPlugins(self._plugin_args)
        if isinstance(model, str):
            model = self._model_named(model)
        elif model is not None and not all(hasattr(model, name) for name in ("id", "api", "provider")):
            hint = " (pass its .model)" if all(hasattr(getattr(model, "model", None), n) for n in ("id", "api")) else ""
            raise TypeError(
                f"Agent(model=...) takes a Model, a 'provider/id' string or None, not {type(model).__name__}{hint}"
            )
        if session is not None and not callable(getattr(session, "build_context", None)):
            hint = (
                " (open a file with Session.open(path) or Session.create(path), a URL with open_session(url))"
                if isinstance(session, (str, os.PathLike))
                else ""
            )
            raise TypeError(f"Agent(session=...) takes a Session or None, not {type(session).__name__}{hint}")
        self._state = AgentState(
            system_prompt,
            model if model is not None else Model.placeholder(),
            _level(thinking_level),
            self._checked_tools(tools or ()),
            _checked_messages(messages, "Agent(messages=...)") if messages else (),
        )
        self._warned_event_loop = False
        check_api_key(api_key, "Agent()")
        self.api_key = api_key
        self.get_api_key = _checked_function(get_api_key, "get_api_key")
        self.stream_fn = _checked_function(stream_fn, "stream_fn")
        self.convert_to_llm = _checked_function(convert_to_llm, "convert_to_llm")
        self.transform_context = _checked_function(transform_context, "transform_context")
        self.before_tool_call = _checked_function(before_tool_call, "before_tool_call")
        self.after_tool_call = _checked_function(after_tool_call, "after_tool_call")
        self.should_stop_after_turn = _checked_function(should_stop_after_turn, "should_stop_after_turn")
        self.prepare_next_turn = _checked_function(prepare_next_turn, "prepare_next_turn")
        self.tool_execution = check_tool_execution(tool_execution)
        self._options = _agent_options(options, stream_options, self._declared_options)
        self.session = session
        self._steering = _MessageQueue(steering_mode)
        self._follow_ups = _MessageQueue(follow_up_mode)
        # key (the listener, or its id when unhashable) -> (listener, takes (event, signal))
        self._listeners: Dict[Any, Tuple[Callable[..., Any], bool]] = {}
        self._run_lock = threading.Lock()
        self._idle_signal = AbortController().signal
        # the plugin observers of the current run: of every event but message_update, of message_update
        self._observe: Optional[Callable[[Any, Any], None]] = None
        self._observe_update: Optional[Callable[[Any, Any], None]] = None
        self._approvals = _approvals.Approvals()
        from .session.compactor import Compactor

        # compaction: CompactionSettings, None (defaults) or False (no automatic compaction)
        self.compactor = Compactor(
            self, compaction, model=compaction_model, emit=self._process_event, owned_by_agent=True
        )
        if session is not None:
            # tools=None (not given) takes the session's recorded tools; tools=[] means none of them
            self._attach_session(session, restore=not messages, restore_tools=tools is None)

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
                self._state.tools = list(context.active_tool_names or ())
        self._detach_session = attach_session(self, session)
        self._approvals.attach_session(session, self._waiting_call)

    def _waiting_call(self, call: ToolCall) -> Optional[_approvals.PendingApproval]:
        """``call`` as it waits for approval with this agent's tools (:func:`~agentcore.approvals.split_batch`:
        arguments prepared and validated as the loop does), or None when it would not wait. What
        the calls a session restores are shown as: the call a resumed run executes."""
        _, waiting = _approvals.split_batch(self._resolve_tools(), [call])
        return waiting[0] if waiting else None

    def __repr__(self) -> str:  # never shows api_key or headers
        model = self._state.model
        return (
            f"Agent(model={getattr(model, 'key', model)!r}, messages={len(self._state.messages)}, "
            f"is_streaming={self._state.is_streaming})"
        )

    # ------------------------------------------------------------------ state and properties

    @property
    def state(self) -> AgentState:
        return self._state

    def get_state(self) -> AgentState:
        """Alias of :attr:`state`."""
        return self._state

    @property
    def _active(self) -> Optional[_ActiveRun]:
        """The run (or maintenance step) in progress: the agent's one busy flag, held by its state."""
        return self._state._run

    @property
    def plugins(self) -> AgentPluginManager:
        """This agent's own plugin manager (an ``AgentPluginManager``), created on first use.

        An agent without plugins or hooks of its own shares one prebuilt manager with every such
        agent; reading this property gives it its own (built-ins and entry-point plugins), so
        ``agent.plugins.register(obj)`` affects this agent only.
        """
        pm = self._plugins.own()
        if self._active is None:  # as the next run will act; a run in progress keeps its callables
            self._plugins.sync(self.before_tool_call, self.after_tool_call, self.transform_context, self.convert_to_llm)
        return pm

    def _hooks_assigned(self) -> None:
        """A hook callable was assigned: bring the agent's own manager (if it has one yet) in line,
        unless a run is active (its start syncs) or the constructor is still assigning them all."""
        plugins = self.__dict__.get("_plugins")
        if plugins is not None and plugins.has_own() and self._active is None and "_listeners" in self.__dict__:
            plugins.sync(self.before_tool_call, self.after_tool_call, self.transform_context, self.convert_to_llm)

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
        return copy.deepcopy(self._plugins.manager().get_model(name))

    @property
    def model(self) -> Model:
        """Shortcut for ``state.model`` (a "provider/id" string is looked up, as in the constructor)."""
        return self._state.model

    @model.setter
    def model(self, value: Union[Model, str]) -> None:
        self._state.model = self._model_named(value) if isinstance(value, str) else value

    @property
    def system_prompt(self) -> str:
        """Shortcut for ``state.system_prompt``."""
        return self._state.system_prompt

    @system_prompt.setter
    def system_prompt(self, value: Optional[str]) -> None:
        self._state.system_prompt = value

    @property
    def thinking_level(self) -> str:
        """Shortcut for ``state.thinking_level``."""
        return self._state.thinking_level

    @thinking_level.setter
    def thinking_level(self, value: str) -> None:
        self._state.thinking_level = _level(value)

    @property
    def tools(self) -> List[Any]:
        """Shortcut for ``state.tools`` (assigning copies the list, checks every item and wraps plain
        functions as ``@tool`` does)."""
        return self._state.tools

    @tools.setter
    def tools(self, value: Iterable[Any]) -> None:
        self._state.tools = self._checked_tools(value)

    def _checked_tools(self, items: Iterable[Any]) -> List[Any]:
        """``items`` as the tools list: tool objects as they are, names checked against the tool
        registry (kept as names, resolved at run start), plain functions wrapped as ``@tool``
        would. Raises ``UnknownToolError`` (with its close matches) for an unknown name and
        TypeError for anything else, so a mistake fails here and not at the next ``prompt()``."""
        if isinstance(items, (str, Mapping)) or not isinstance(items, Iterable):
            raise TypeError(f"tools must be a list of tools, not {type(items).__name__}")
        checked: List[Any] = []
        seen: Dict[str, int] = {}
        for index, item in enumerate(items):
            if isinstance(item, str):
                self._plugins.manager().get_tool(item)  # UnknownToolError listing close matches
            elif not (hasattr(item, "name") and callable(getattr(item, "execute", None))):
                if not (inspect.isfunction(item) or inspect.ismethod(item)):
                    raise TypeError(
                        f"tools item {index} is a {type(item).__name__}: pass AgentTool "
                        f"objects, @tool or plain functions, or registered tool names"
                    )
                from .tools import tool

                item = tool(item)  # TypeError naming the parameter when a hint has no JSON schema
            name = item if isinstance(item, str) else item.name
            if not isinstance(name, str) or not name:
                raise TypeError(f"tools item {index} has no name (a non-empty string): {name!r}")
            if name in seen:  # the model calls tools by name: a second one would be unreachable
                raise ValueError(
                    f"tools items {seen[name]} and {index} are both named {name!r}: tool names must be unique"
                )
            seen[name] = index
            checked.append(item)
        return checked

    def _declared_options(self) -> Mapping[str, Any]:
        return self._plugins.manager().provider_options()

    @property
    def options(self) -> StreamOptions:
        """The provider options of the agent's next runs, one :class:`~agentcore.options.StreamOptions`
        (read at the start of each run); each option is also an attribute of the agent
        (``agent.temperature = 0.2``). Assigning a StreamOptions uses it as is; a mapping of option
        names is checked and converted as ``Agent(options=...)`` is (TypeError naming a bad name)."""
        return self._options

    @options.setter
    def options(self, value: Union[StreamOptions, Mapping[str, Any]]) -> None:
        if not isinstance(value, StreamOptions):
            value = _agent_options(value, {}, self._declared_options)
        self._options = value

    @property
    def messages(self) -> List[Any]:
        """Shortcut for ``state.messages`` (assigning copies the list and checks that every item is a
        message: TypeError otherwise)."""
        return self._state.messages

    @messages.setter
    def messages(self, value: Iterable[Any]) -> None:
        self._state.messages = _checked_messages(value, "agent.messages")

    # ------------------------------------------------------------------ listeners

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event)`` or ``listener(event, signal)`` for every event, on the run
        thread, after the state was updated. Returns a function that unsubscribes it.

        Raises TypeError for an ``async def`` listener (it would never run: listeners are called,
        not awaited); use a plain function, or :meth:`events` to consume events elsewhere."""
        if not callable(listener):
            raise TypeError(f"subscribe() takes a function, not {type(listener).__name__}")
        if inspect.iscoroutinefunction(listener):
            raise TypeError(
                f"subscribe() got an async listener ({getattr(listener, '__qualname__', listener)!r}); "
                f"listeners are plain functions called on the run thread. Use a plain "
                f"function, or iterate agent.events() from your own code."
            )
        key = _listener_key(listener)
        self._listeners[key] = (listener, _accepts_signal(listener))
        this = weakref.ref(self)  # the agent may hold this function (a session's detach): no cycle

        def unsubscribe() -> None:
            agent = this()
            if agent is not None:
                agent._listeners.pop(key, None)

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
        item = self._as_message(message, method)
        if role_of(item) is None:
            raise TypeError(
                f"{method}() takes a message or a str, not {type(message).__name__} "
                f"(queue a list one message at a time)"
            )
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
    def _as_message(message: Any, method: str = "prompt") -> Any:
        """A str as a user message, a dict in the reference JSON shape (``{"role": "user", ...}``)
        read with ``message_from_dict`` (stamped with the current time when it has no
        ``timestamp``), anything else as it is. TypeError for a dict without a
        known role or one that is malformed (it would be stored raw, or silently dropped)."""
        if isinstance(message, str):
            return UserMessage(content=[TextContent(message)])
        if isinstance(message, Mapping):
            role = message.get("role")
            if role not in _MESSAGE_ROLES:
                problem = "has no 'role'" if role is None else f"has the unknown role {role!r}"
                raise TypeError(
                    f"{method}() got a dict message that {problem}; a message dict needs "
                    f"one of the roles {', '.join(_MESSAGE_ROLES)}"
                )
            if "timestamp" not in message:  # stamped now, and so written: a reload keeps the time
                message = {**message, "timestamp": now_ms()}
            try:
                return message_from_dict(message)
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                raise TypeError(f"{method}() got a malformed {role!r} message dict: {exception_message(exc)}") from None
        return message

    # ------------------------------------------------------------------ approvals

    @property
    def pending_approvals(self) -> List[_approvals.PendingApproval]:
        """Tool calls waiting for :meth:`approve` or :meth:`deny` (a tool with
        ``requires_approval``), in request order; restored from the session on resume."""
        return self._approvals.pending

    def approve(self, tool_call_id: str, args: Any = None) -> None:
        """Approve a waiting call; ``args`` replaces its arguments (validated against the tool's
        schema again). :meth:`continue_` executes it. Recorded in the session, if any.

        Raises ValueError for an id that is not waiting, and for edited ``args`` that do not match
        the schema (the call stays pending, undecided)."""
        pending = self._approvals.get(tool_call_id)
        if pending is not None and args is not None:
            tool = next((t for t in self._resolve_tools() if t.name == pending.tool_name), None)
            if tool is None:
                raise ValueError(
                    f"approve({tool_call_id!r}): the agent has no tool {pending.tool_name!r} "
                    f"any more to validate the edited arguments against; add it to agent.tools"
                )
            args = _approvals.validated_args(tool, args, tool_call_id)
        self._approvals.decide("approve", tool_call_id, _approvals.ApprovalDecision(True, args))

    def deny(self, tool_call_id: str, reason: Optional[str] = None) -> None:
        """Deny a waiting call: :meth:`continue_` gives it an error result carrying ``reason``
        (default: "Tool execution was denied"). Raises ValueError for an id that is not waiting."""
        if reason is not None and not isinstance(reason, str):
            raise TypeError(f"deny() takes reason as a str, not {type(reason).__name__}")
        self._approvals.decide("deny", tool_call_id, _approvals.ApprovalDecision(False, None, reason))

    def as_tool(self, name: str, description: str, *, keep_history: bool = False) -> AgentTool:
        """This agent as a tool of another agent (a sub-agent): an ``AgentTool`` taking
        ``{"task": str}`` whose result is the sub-agent's final text. See
        :func:`agentcore.subagent.subagent_tool`."""
        from .subagent import subagent_tool

        return subagent_tool(self, name, description, keep_history=keep_history)

    # ------------------------------------------------------------------ runs

    @overload
    def prompt(
        self,
        text_or_messages: PromptInput,
        images: Optional[Sequence[ImageContent]] = None,
        *,
        wait: Literal[True] = True,
    ) -> List[Any]: ...

    @overload
    def prompt(
        self, text_or_messages: PromptInput, images: Optional[Sequence[ImageContent]] = None, *, wait: bool
    ) -> Optional[List[Any]]: ...

    def prompt(
        self, text_or_messages: PromptInput, images: Optional[Sequence[ImageContent]] = None, *, wait: bool = True
    ) -> Optional[List[Any]]:
        """Run the loop with new input; return the run's new messages (None with ``wait=False``).

        Raises RuntimeError at once when a run is active, TypeError for input that is not a str,
        a message (a dict in the reference JSON shape is read with ``message_from_dict``) or a list
        of them, ValueError for an empty list. Warns once (RuntimeWarning) when waiting would block
        a running asyncio loop.
        """
        return self._start_prompt(self._normalize_input(text_or_messages, images), wait=wait)

    def _start_prompt(
        self, messages: List[Any], *, wait: bool, setup: Optional[_RunSetup] = None, method: str = "prompt"
    ) -> Any:
        """``prompt()`` after its input was read; ``setup`` adjusts the run's tools and loop
        configuration once they are prepared (``ask()`` adds its answer tool and turn hook);
        ``method`` is the public method errors name."""
        if wait:
            self._warn_if_blocking_event_loop(method)
        with self._run_lock:
            if self._active is not None:
                raise RuntimeError(ERR_PROMPT_BUSY)
            self._approvals.check_can_prompt(method)
            run = self._begin_run()
        try:
            return self._launch(run, messages, skip_initial_steering_poll=False, wait=wait, setup=setup)
        except KeyboardInterrupt:
            self._interrupted(run)
            raise

    @overload
    def ask(
        self,
        prompt: PromptInput,
        output_type: Type[_T],
        *,
        images: Optional[Sequence[ImageContent]] = None,
        retries: int = 2,
    ) -> _T: ...

    @overload
    def ask(
        self,
        prompt: PromptInput,
        output_type: Any,
        *,
        images: Optional[Sequence[ImageContent]] = None,
        retries: int = 2,
    ) -> Any: ...

    def ask(
        self,
        prompt: PromptInput,
        output_type: Any,
        *,
        images: Optional[Sequence[ImageContent]] = None,
        retries: int = 2,
    ) -> Any:
        """Run ``prompt`` like :meth:`prompt` (same events, transcript and session records) and
        return the answer as a validated ``output_type`` value (see :mod:`agentcore.structured`:
        a JSON-schema dict, a dataclass, a TypedDict, an Enum, a Literal, str/int/float/bool,
        list[...] or a pydantic model).

        The wire API's native structured output is used where it has one, else a ``final_result``
        tool; the agent's tools stay usable. An answer that fails validation goes back to the
        model with the errors, up to ``retries`` times, then ``OutputValidationError`` (``.errors``,
        ``.raw``). An aborted or failed run raises ``AskError``. TypeError/ValueError at once for
        an output type without a JSON schema; RuntimeError when a run is active.
        """
        from .structured import prepare_ask

        ask = prepare_ask(self, output_type, retries)
        messages = self._start_prompt(self._normalize_input(prompt, images), wait=True, setup=ask.setup, method="ask")
        return ask.outcome(messages)

    @overload
    def continue_(self, *, wait: Literal[True] = True) -> List[Any]: ...

    @overload
    def continue_(self, *, wait: bool) -> Optional[List[Any]]: ...

    def continue_(self, *, wait: bool = True) -> Optional[List[Any]]:
        """Continue from the current transcript.

        At an assistant tail, queued steering (else follow-up) messages start a new run; with both
        queues empty it raises ValueError. Raises RuntimeError when a run is active.

        After an approval pause it resumes the paused turn: approved calls execute, denied ones
        become error results, then the loop goes on. RuntimeError (naming the calls) while a
        waiting call is undecided.

        A transcript whose last turn's tool calls have no result and wait for no decision (a
        session resumed after its process was killed while they ran) is continued too, with
        nothing queued: each such call gets an error result saying it was interrupted (it is not
        run again: it may have taken effect), recorded as any result, then the loop goes on.
        """
        return self._continue(wait)

    def _continue(self, wait: bool, setup: Optional[_RunSetup] = None, *, resume_only: str = "") -> Optional[List[Any]]:
        """:meth:`continue_`, with a run ``setup`` as prompt runs take (``agentcore.structured``
        finishes an ask paused for approval this way). ``resume_only``: the caller's name; the
        run must then resume an approval pause (RuntimeError, with nothing run, when none waits)."""
        if wait:
            self._warn_if_blocking_event_loop(resume_only or "continue_")
        with self._run_lock:
            if self._active is not None:
                raise RuntimeError(ERR_CONTINUE_BUSY)
            resume = self._approvals.resumption(self._state.messages, resume_only or "continue_()")
            if resume is None and resume_only:
                raise RuntimeError(
                    f"{resume_only}: no tool call waits for approval any more (continue_() or reset() "
                    "settled them), so the paused run cannot be resumed"
                )
            decided = resume is not None  # the approval book's: it is told the run resumes it
            if resume is None and not resume_only and not self.has_queued_messages():
                resume = _interrupted_batch(self._state.messages)
            prompts, skip = self._continue_prompts() if resume is None else (None, False)
            try:
                run = self._begin_run()
            except BaseException:  # e.g. the session records another agent's run: nothing ran
                self._steering.restore()
                self._follow_ups.restore()
                raise
            if decided:
                self._approvals.resuming(resume)
        try:
            return self._launch(run, prompts, skip_initial_steering_poll=skip, wait=wait, setup=setup, resume=resume)
        except KeyboardInterrupt:
            self._interrupted(run)
            raise

    def _continue_prompts(self) -> Tuple[Optional[List[Any]], bool]:
        """The prompts of a continue run (None: continue from the transcript) and whether they
        came from the steering queue (under ``_run_lock``). ValueError when there is nothing."""
        messages = self._state.messages
        if not messages:
            raise ValueError(ERR_NOTHING_TO_CONTINUE)
        if role_of(messages[-1]) != "assistant":
            return None, False
        prompts = self._steering.drain()
        if prompts:
            return prompts, True
        prompts = self._follow_ups.drain()
        if not prompts:
            raise ValueError(_loop.ERR_CONTINUE_ASSISTANT)
        return prompts, False

    def _warn_if_blocking_event_loop(self, method: str) -> None:
        """Warn (once per agent) when this thread runs an asyncio loop that waiting would stall.

        Jupyter cells are left alone: their kernel loop (on the main thread) is meant to wait while
        a cell runs. A loop of the user's own on another thread of a kernel is warned about."""
        if self._warned_event_loop or "asyncio" not in sys.modules:
            return  # no loop can be running when asyncio was never imported
        import asyncio

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        ipython = sys.modules.get("IPython")
        if (
            threading.current_thread() is threading.main_thread()  # the kernel's loop runs there alone
            and ipython is not None
            and getattr(ipython, "get_ipython", lambda: None)() is not None
        ):
            return
        self._warned_event_loop = True
        warnings.warn(WARN_BLOCKS_EVENT_LOOP.format(method=method), RuntimeWarning, stacklevel=3)

    def stream(self, text_or_messages: PromptInput, images: Optional[Sequence[ImageContent]] = None) -> _RunEvents:
        """Start a prompt run and return an iterator over its events.

        The run starts at once (busy errors raise here). Events are handed over through a
        ``queue.Queue``, so the consumer does not slow the run down; iteration ends when the run
        has settled. A KeyboardInterrupt while iterating, or while ``stream()`` itself starts the
        run, aborts the run, waits for it to settle, and re-raises (a run no thread began yet
        never executes). Leaving the loop early does not stop the run (call :meth:`abort`).
        The iterator's ``close()`` may be called from any thread: an iteration blocked waiting for
        the next event ends, and the run's later events are not queued for nobody.
        """
        import queue

        events: queue.Queue[Any] = queue.Queue()
        done = object()
        messages = self._normalize_input(text_or_messages, images)
        state = self._state
        with self._run_lock:
            if self._active is not None:
                raise RuntimeError(ERR_PROMPT_BUSY)
            self._approvals.check_can_prompt("stream")
            run = self._begin_run()

            def relay(event: Any) -> None:
                # This run's events only: the agent is idle before this run's on_settled
                # callbacks have unsubscribed, so the next run may already be emitting.
                if state._run is run:
                    events.put(event)

            run.on_settled.append(lambda: events.put(done))
            unsubscribe = self.subscribe(relay)  # before the run starts: no event missed
            run.on_settled.append(unsubscribe)
        try:
            self._launch(run, messages, skip_initial_steering_poll=False, wait=False)
            return _RunEvents(run, self._iterate_events(run, events, done, unsubscribe), events, unsubscribe)
        except KeyboardInterrupt:  # nobody would iterate: the run must not go on unwatched
            self._interrupted(run)
            raise

    def _iterate_events(
        self, run: _ActiveRun, events: Any, done: object, unsubscribe: Callable[[], None]
    ) -> Iterator[AgentEvent]:
        """The events of ``run`` until ``done``; ends early at ``_CLOSED`` (:meth:`_RunEvents.close`
        from another thread). Left in any way (closed, garbage-collected), it stops queueing the
        run's events for nobody."""
        on_main = threading.current_thread() is threading.main_thread()
        try:
            while True:
                try:
                    item = events.get(timeout=0.05) if on_main else events.get()
                except Exception:  # queue.Empty: poll again so Ctrl+C is noticed
                    continue
                if item is _CLOSED:
                    return
                if item is done:
                    break
                yield item
        except KeyboardInterrupt:
            _abort_and_settle(run)
            raise
        finally:
            unsubscribe()
        if run.error is not None:
            raise run.error

    def events(self, *, until_agent_end: bool = False) -> EventSubscription:
        """Subscribe a consumer-side iterator to every event from now on (fed by a ``queue.Queue``).

        Unlike listeners, the consumer never slows the run down. Iteration blocks until the next
        event; it ends after ``close()`` (also on leaving a ``with`` block; events still queued
        are dropped) or, with ``until_agent_end=True``, right after the next ``agent_end`` (events
        of a later run, even ones already queued, are not included). A subscription nothing
        refers to any more unsubscribes (``for e in agent.events(): ... break``, a consumer
        function that returned). Handy for a UI thread::

            with agent.events() as events:
                agent.prompt("hi", wait=False)
                for event in events:
                    ...
        """
        return EventSubscription(self, until_agent_end)

    def display(self, prompt: Any, **options: Any) -> Any:
        """Run ``prompt`` in a Jupyter notebook, showing streamed text and tool progress in one
        updating output area (see :func:`agentcore.jupyter.display_run`). Interrupting the kernel
        aborts the run cleanly. Returns the run's new messages (a list that IPython does not echo
        as the cell's last expression; ``agent.messages`` holds the whole transcript)."""
        from .jupyter import display_run

        return display_run(self, prompt, **options)

    def compact(self, instructions: Optional[str] = None) -> CompactionResult:
        """Summarise older history now so the conversation fits the context window again.

        Idle only (RuntimeError while a run is active; a prompt started meanwhile gets the busy
        error). With a session the summary is stored as a ``compaction`` entry and the transcript
        is rebuilt from the session. ``abort()`` cancels it, until the summary is stored (nothing
        is). Returns the ``CompactionResult``; raises ``CompactionError`` (``nothing_to_compact``,
        ``already_compacted``, ``aborted``, ``summarization_failed``, ``storage``: the session
        could not be written, the cause chained).
        """
        return self._while_busy(lambda signal: self.compactor.compact(instructions, signal=signal))

    def navigate_tree(self, target_id: Optional[str], summarize: bool = False, **options: Any) -> Any:
        """Move the session to ``target_id`` (another branch point), optionally summarising the
        branch being left into a ``branch_summary`` entry, and reload the transcript from it.
        Idle only. ``abort()`` cancels the summary request (``CompactionError("aborted")``, nothing
        written), as it cancels :meth:`compact`; so does a ``signal=`` given in ``options``. The
        calls waiting for approval become those of the branch moved to (none, or the ones still
        waiting on it). See :func:`agentcore.session.branch_summary.navigate_tree` for ``options``."""
        given = options.pop("signal", None)

        def navigate(signal: AbortSignal) -> Any:
            forward = self.abort  # the caller's signal aborts it as abort() does
            if given is not None:
                given.add_listener(forward)
            try:
                outcome = self.compactor.navigate_tree(target_id, summarize, signal=signal, **options)
            finally:
                if given is not None:
                    given.remove_listener(forward)
            if self.session is not None:  # the calls waiting for approval are the new branch's
                self._approvals.load(self.session, self._waiting_call)
            return outcome

        return self._while_busy(navigate)

    def _claim_session(self) -> None:
        """Under ``_run_lock``, as a run (or compaction, or tree move) begins: claim the session it
        records into; RuntimeError while another agent's run records into it (agent_link)."""
        if self.session is not None:
            from .session.agent_link import claim_session_run

            claim_session_run(self.session, self)

    def _release_session(self) -> None:
        """Under ``_run_lock``, as that work ends: undo :meth:`_claim_session`."""
        if self.session is not None:
            from .session.agent_link import release_session_run

            release_session_run(self.session, self)

    def _while_busy(self, work: Callable[[AbortSignal], Any]) -> Any:
        """Run ``work`` on this thread while the agent counts as busy (prompts are refused)."""
        with self._run_lock:
            if self._active is not None:
                raise RuntimeError(ERR_DOUBLE_START)
            self._claim_session()  # compaction and tree moves write it too
            placeholder = _ActiveRun(AbortController(), streaming=False)
            placeholder.thread_ident = threading.get_ident()
            self._state._begin(placeholder)
        try:
            return work(placeholder.controller.signal)
        finally:
            with self._run_lock:
                self._state._end(placeholder)
                self._release_session()
            placeholder.settled.set()

    def wait_for_idle(self, timeout: Optional[float] = None) -> bool:
        """Wait until the current run settled (``agent_end`` listeners included); True when idle,
        False when ``timeout`` (seconds) passed first.

        A KeyboardInterrupt while waiting (Ctrl+C after ``prompt(wait=False)``) aborts the run,
        waits for it to settle and is re-raised, as when ``prompt()`` waits. Raises RuntimeError
        when called from the run thread (it would wait for itself).
        """
        run = self._active
        if run is None:
            return True
        if run.thread_ident == threading.get_ident() or _loop.running_tool_signal() is run.controller.signal:
            raise RuntimeError(ERR_WAIT_FROM_RUN_THREAD)
        try:
            return wait_interruptibly(run.settled, timeout)
        except KeyboardInterrupt:
            _abort_and_settle(run)
            raise

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
            self._state._clear()
            self.clear_all_queues()
            self._approvals.clear()

    # ------------------------------------------------------------------ run lifecycle

    def _normalize_input(self, value: Any, images: Optional[Sequence[ImageContent]]) -> List[Any]:
        if isinstance(value, str):
            content: List[Any] = [TextContent(value)]
            content.extend(images or ())
            return [UserMessage(content=content)]
        if images:  # they would be dropped silently: the messages already carry their content
            raise TypeError(
                "prompt(images=...) goes with a str prompt; put the images into the message's content instead"
            )
        if isinstance(value, (list, tuple)):
            if not value:  # the model would answer its own last message, or get no message at all
                raise ValueError(ERR_EMPTY_PROMPT)
            # A str item is one user message (as with steer()); an item without a role would reach
            # the transcript and be silently left out of what the model sees.
            items = [self._as_message(item) for item in value]
            for index, item in enumerate(items):
                if role_of(item) is None:
                    raise TypeError(
                        f"prompt() got a list whose item {index} is a {type(item).__name__}, not a message or str"
                    )
            return items
        value = self._as_message(value)
        if role_of(value) is None:
            raise TypeError(f"prompt() takes a str, a message or a list of messages, not {type(value).__name__}")
        return [value]

    def _begin_run(self) -> _ActiveRun:
        """Called under ``_run_lock`` after the busy check: mark the agent busy."""
        if self._active is not None:
            raise RuntimeError(ERR_DOUBLE_START)
        self._claim_session()
        run = _ActiveRun(AbortController())
        self._state._begin(run)
        return run

    def _launch(
        self,
        run: _ActiveRun,
        prompts: Optional[List[Any]],
        *,
        skip_initial_steering_poll: bool,
        wait: bool,
        setup: Optional[_RunSetup] = None,
        resume: Optional[_approvals.Resumption] = None,
    ) -> Any:
        """Prepare the run's snapshot in the caller (errors raise here), then start the run thread."""
        try:
            tools = self._resolve_tools()
            config = self._build_loop_config(run.controller.signal, skip_initial_steering_poll)
            if setup is not None:
                tools, config = setup(tools, config)
            context = AgentContext(self._state.system_prompt, list(self._state.messages), tools)
            stream_fn = self.stream_fn or _loop._default_stream_fn or registry_stream_fn(self._plugins.manager())
        except BaseException:
            run.decide(False)
            self._finish_run(run)
            raise

        def body() -> List[Any]:
            return self._run_body(run, prompts, context, config, stream_fn, resume)

        # The run sees the caller's contextvars (a tracing span, say), as asyncio.to_thread does.
        caller_context = contextvars.copy_context()
        if wait and threading.current_thread() is not threading.main_thread():
            # No Ctrl+C can land on this thread and it would only wait: the run executes here,
            # saving two thread hand-overs (and, with many agents at once, one thread each).
            caller_context.run(self._run_with_lifecycle, run, body)
            return self._outcome(run)
        # a reused daemon thread; a Ctrl+C can land in here already (the callers' _interrupted)
        try:
            start_daemon(caller_context.run, "agentcore-run", self._run_with_lifecycle, run, body)
        except Exception:  # no thread could be started: the agent must not stay busy
            if not run.decide(False):
                self._finish_run(run)
            raise
        if not wait:
            return None
        wait_interruptibly(run.settled)
        return self._outcome(run)

    def _interrupted(self, run: _ActiveRun) -> None:
        """A KeyboardInterrupt in the caller while it started or waited for ``run``: a run a thread
        already began is aborted and waited for (:func:`_abort_and_settle`); one no thread began
        yet (the Ctrl+C landed inside ``start_daemon``, before the task was handed over, or before
        the thread took it) is cancelled: it never executes, nothing is recorded, and the agent is
        idle again (waiting for it would wait for ever when no thread will ever run it)."""
        if run.decide(False):
            _abort_and_settle(run)
        elif not run.settled.is_set():  # not already settled by _launch's own failure path
            self._finish_run(run)

    def _run_body(
        self,
        run: _ActiveRun,
        prompts: Optional[List[Any]],
        context: AgentContext,
        config: _loop.AgentLoopConfig,
        stream_fn: Callable[..., Any],
        resume: Optional[_approvals.Resumption] = None,
    ) -> List[Any]:
        """The run (on the run thread): the loop, with compaction at its three documented steps.

        1. before the first request, ``compactor.before_run`` may compact the transcript;
        2. after every turn, the compactor's ``prepare_next_turn`` (chained after the agent's own)
           may compact and swap the loop's context, and its ``transform_context`` shows summaries
           to the model as user messages;
        3. when the run ended with a context overflow, ``compactor.recover_overflow`` compacts
           once and the run continues from the compacted context (one retry).

        The transcript changes only through this agent's reducer (compaction included: its
        ``compaction_end`` event carries the new transcript). ``prompts`` None: a continue run;
        ``resume``: a continue run that first finishes an approval pause's turn.
        """
        emit, signal = self._emitter(run), run.controller.signal
        _running_agent.set(self)  # the run thread's own context copy: nothing to reset
        compactor = self.compactor
        # config was built for this run alone (_launch): set its two hooks in place
        config.transform_context, config.prepare_next_turn = compactor.turn_hooks(config, emit, signal)
        try:
            context = compactor.before_run(context, prompts or (), emit, signal)
            if prompts is None:
                messages = _loop.run_agent_loop_continue(context, config, emit, signal, stream_fn, resume=resume)
            else:
                messages = _loop.run_agent_loop(prompts, context, config, emit, signal, stream_fn)
            retry = compactor.recover_overflow(messages, context, config, emit, signal)
            if retry is None:
                return messages
            more = _loop.run_agent_loop_continue(retry, config, emit, signal, stream_fn)
            compactor.retried(more, config, emit)
            return list(messages) + list(more)
        finally:
            # The turn hook holds this config (and, through the emitter, the run): unhooked, the
            # run's objects are freed when it ends instead of waiting for the cycle collector.
            config.transform_context = config.prepare_next_turn = None

    @staticmethod
    def _outcome(run: _ActiveRun) -> List[Any]:
        if run.error is not None:
            raise run.error
        return run.result

    def _run_with_lifecycle(self, run: _ActiveRun, body: Callable[[], List[Any]]) -> None:
        if not run.decide(True):  # the caller was interrupted first and settled the run itself
            return
        run.thread_ident = threading.get_ident()
        started = time.perf_counter()
        if _log.isEnabledFor(logging.DEBUG):
            _log.debug(
                "run start model=%s/%s",
                _field_text(self._state.model, "provider"),
                _field_text(self._state.model, "id"),
            )
        try:
            try:
                run.result = body()
            except BaseException as exc:  # noqa: BLE001 - becomes a failure run
                self._fail_run(run, exc)
        finally:
            if _log.isEnabledFor(logging.DEBUG):
                _log_run_end(run, started)
            self._finish_run(run)

    def _fail_run(self, run: _ActiveRun, exc: BaseException) -> None:
        """Emit the failure sequence (spec §3.6): message_start/end, turn_end, agent_end.

        When a response was streaming (a stream function that raised after its ``start``: the
        loop lets that through), its ``message_start`` stands: the failure message keeps what had
        streamed and only ends it, so every message_start has one message_end. Any other message
        whose ``message_start`` was emitted (a listener raised at the prompt's or a tool result's
        start) gets its ``message_end`` first, so it is appended and recorded, not lost."""
        model = self._state.model  # read defensively: a broken model may be why the run failed
        started = self._state._streaming_message  # the object message_start carried, not a copy
        partial = self._state.streaming_message
        if role_of(partial) != "assistant":
            partial = None
        unended = () if partial is not None or started is None else (MessageEndEvent(started),)
        content = list(getattr(partial, "content", None) or ()) if partial is not None else []
        message = AssistantMessage(
            content=content or [TextContent("")],
            api=_field_text(model, "api"),
            provider=_field_text(model, "provider"),
            model=_field_text(model, "id"),
            usage=Usage(),
            stop_reason="aborted" if run.controller.signal.aborted else "error",
            error_message=exception_message(exc),
        )
        run.result = [message]
        # Tools of a parallel batch may still be running: tell them the run is over (spec §8.4).
        run.controller.abort(f"Run failed: {message.error_message}")
        sequence = (MessageEndEvent(message), TurnEndEvent(message, []), AgentEndEvent([message]))
        for event in sequence if partial is not None else (*unended, MessageStartEvent(message), *sequence):
            if run.error is not None:
                # A listener failed twice: the rest of the sequence still reaches the state, the
                # plugins (a tracer ends its spans at agent_end) and every listener (the session's
                # records the failure message), their further exceptions only logged.
                self._process_event(event, run, listeners=False)
                self._call_listeners(event, run, quiet=True)
                continue
            try:
                self._process_event(event, run)
            except BaseException as again:  # noqa: BLE001 - the caller sees it
                run.error = again

    def _finish_run(self, run: _ActiveRun) -> None:
        try:
            self._steering.restore()
            self._follow_ups.restore()
        finally:  # whatever failed above, the agent is idle again and its waiters wake up
            with self._run_lock:
                self._approvals.resuming(None)
                self._state._end(run)
                self._release_session()
            try:
                for callback in run.on_settled:
                    callback()
            finally:
                run.settled.set()

    def _emitter(self, run: _ActiveRun) -> Callable[[Any], None]:
        """:meth:`_process_event` for the events of ``run``; a stale run's events are dropped."""
        state, process = self._state, self._process_event

        def emit(event: Any) -> None:
            if state._run is run:
                process(event, run)

        # Only listeners and on_event observers see message_update events: without them the loop
        # passes the live partial uncopied, once (the reducer keeps just that object). Observers
        # are decided when the run starts (_build_loop_config ran); listeners may come and go, so
        # the loop asks per token: the dict's own __len__ is the cheapest way to ask.
        observed: Callable[[], object] = _always if self._observe_update is not None else self._listeners.__len__
        emit.observed = observed  # type: ignore[attr-defined]
        return emit

    # ------------------------------------------------------------------ wiring points

    def _resolve_tools(self) -> List[Any]:
        """Tools for this run; names are looked up in this agent's tool registry (built-ins and
        plugins). An unknown name raises ``UnknownToolError`` listing the close matches."""
        pm = self._plugins.manager()
        # copies: the registry's tool objects are shared by every agent using that manager
        return [copy.copy(pm.get_tool(item)) if isinstance(item, str) else item for item in self._state.tools]

    def _build_loop_config(self, signal: AbortSignal, skip_initial_steering_poll: bool) -> _loop.AgentLoopConfig:
        """The loop configuration of one run, from the current attribute values (spec §3.2)."""
        level = _level(self._state.thinking_level)
        skip_first = [skip_initial_steering_poll]

        def get_steering_messages() -> List[Any]:
            if skip_first[0]:
                skip_first[0] = False
                return []
            return self._steering.drain()

        hooks = self._plugins.hooks_for_run(
            self.before_tool_call, self.after_tool_call, self.transform_context, self.convert_to_llm
        )
        # Decided once per run: events are hot (one per streamed token), plugin changes are not.
        self._observe, self._observe_update = observers_for_run(hooks)
        return _loop.AgentLoopConfig(
            model=self._state.model,
            convert_to_llm=converter_for_run(hooks, rich_convert_to_llm),
            transform_context=optional_hook(hooks, "transform_context"),
            get_api_key=self.get_api_key,
            should_stop_after_turn=_with_signal(self.should_stop_after_turn, signal),
            prepare_next_turn=self._prepare_next_turn_hook(signal),
            get_steering_messages=get_steering_messages,
            get_follow_up_messages=self._follow_ups.drain,
            tool_execution=check_tool_execution(self.tool_execution),
            before_tool_call=optional_hook(hooks, "before_tool_call"),
            after_tool_call=optional_hook(hooks, "after_tool_call"),
            api_key=self.api_key,
            options=self._run_options(),
            reasoning=None if level == "off" else level,
        )

    def _run_options(self) -> StreamOptions:
        """The stream options of a run: with a session and no ``session_id`` of its own, the
        session's id keys provider-side prompt caches (the reference forwards its ``sessionId``)."""
        options = self.options
        session_id = getattr(self.session, "id", None) if options.session_id is None else None
        if isinstance(session_id, str) and session_id:
            options = copy.copy(options)
            options.session_id = session_id
        return options

    def _prepare_next_turn_hook(self, signal: AbortSignal) -> Optional[Callable[[Any], Any]]:
        """Installed when ``prepare_next_turn`` is set at run start; read again at call time.

        ``prepare_next_turn(ctx, signal)`` is the preferred form; a one-argument hook is the legacy
        ``prepare_next_turn(signal)`` form.
        """
        if self.prepare_next_turn is None:
            return None

        def hook(ctx: Any) -> Any:
            current: Optional[Callable[..., Any]] = self.prepare_next_turn  # dispatched on its arity
            if current is None:
                return None
            if _accepts_signal(current):
                return current(ctx, signal)
            return current(signal)

        return hook

    def _process_event(self, event: Any, run: Optional[_ActiveRun] = None, listeners: bool = True) -> None:
        """Reduce ``event`` into the state, then call the plugin observers and (unless
        ``listeners`` is False) the listeners in order (run thread). One call per streamed token:
        kept flat on purpose."""
        self._state.reduce(event)
        kind = event.type
        if kind == "message_update":
            observe = self._observe_update
        else:
            observe = self._observe
            self._approvals.observe(event)
            if kind == "message_end":  # the queues' in-flight commit of a finished message
                self._steering.commit(event.message)
                self._follow_ups.commit(event.message)
        if observe is not None:
            observe(event, self)
        if self._listeners and listeners:
            self._call_listeners(event, run)

    def _call_listeners(self, event: Any, run: Optional[_ActiveRun], quiet: bool = False) -> None:
        """The listeners subscribed when the event arrived, in subscription order, except those
        unsubscribed meanwhile (an earlier listener's teardown of a later one: it must not be
        called after that, as in the reference). ``quiet``: a listener's exception is logged
        (DEBUG) and the others still called (a failed run's end)."""
        signal = run.controller.signal if run is not None else self._idle_signal
        subscribed = self._listeners
        for key, (listener, with_signal) in list(subscribed.items()):
            if key not in subscribed:
                continue
            try:
                if with_signal:
                    listener(event, signal)
                else:
                    listener(event)
            except Exception as exc:
                if not quiet:
                    raise
                _log.debug("listener %r raised again while a failed run ended: %s", listener, exception_message(exc))


# Every stream option but ``reasoning`` (derived from thinking_level) is also an Agent attribute.
for _name in OPTION_NAMES:
    if _name != "reasoning":
        setattr(Agent, _name, _option_property(_name))
del _name


_CLOSED: Any = object()  # put in a stream()'s queue by _RunEvents.close: the iteration ends


class _RunEvents:
    """What :meth:`Agent.stream` returns: an iterator over one run's events that knows its run
    (``_run``), so code of this package can act on that run and never on a later one of the agent
    (``display_run``'s Ctrl+C)."""

    __slots__ = ("_run", "_events", "_queue", "_unsubscribe", "_closed")

    def __init__(
        self, run: _ActiveRun, events: Iterator[AgentEvent], queue: Any, unsubscribe: Callable[[], None]
    ) -> None:
        self._run = run
        self._events = events
        self._queue = queue  # what the run's events are handed over through
        self._unsubscribe = unsubscribe
        self._closed = False

    def __iter__(self) -> _RunEvents:
        return self

    def __next__(self) -> AgentEvent:
        if self._closed:
            raise StopIteration
        return next(self._events)

    def close(self) -> None:
        """Stop iterating; the run goes on, its later events are not queued any more. Works from
        any thread: an iteration waiting for the next event on another thread ends (without
        raising a failed run's exception), and later ``next()`` calls raise StopIteration."""
        self._closed = True
        self._unsubscribe()
        # Wakes an iteration blocked on another thread. The generator is not closed here: that
        # raises ValueError in whichever thread is inside it; the garbage collector closes it.
        self._queue.put(_CLOSED)


class EventSubscription:
    """Iterator over an agent's events, returned by :meth:`Agent.events`.

    It unsubscribes on :meth:`close`, on leaving its ``with`` block, and when nothing refers to
    it any more (``for e in agent.events(): break``, or a consumer function that returns): the
    agent holds only its queue, so a subscription nobody can read never queues events for ever."""

    def __init__(self, agent: Agent, until_agent_end: bool) -> None:
        import queue

        self._queue: queue.Queue[Any] = queue.Queue()
        self._closed = object()
        self._until_agent_end = until_agent_end
        self._ended = False
        # the finalizer holds the unsubscribe callable (the agent and the queue), never self
        self._unsubscribe = weakref.finalize(self, agent.subscribe(self._queue.put))

    def close(self) -> None:
        """Stop receiving events; a blocked iteration ends, and events still queued are dropped."""
        self._ended = True
        self._unsubscribe()  # once: a finalizer runs at most once
        self._queue.put(self._closed)

    def __iter__(self) -> Iterator[Any]:
        try:
            while not self._ended:
                item = self._queue.get()
                if item is self._closed:
                    return
                yield item
                if self._until_agent_end and item.type == "agent_end":
                    self.close()  # events of later runs already queued are not this iteration's
                    return
        except KeyboardInterrupt:  # the usual way out of a blocking loop in a notebook: unsubscribe,
            self.close()  # or the agent would queue every later event for nobody
            raise

    def __enter__(self) -> EventSubscription:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

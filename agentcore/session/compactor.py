"""The link between an Agent and compaction: manual, automatic and overflow compaction (spec §7.3).

A :class:`Compactor` belongs to one agent. It compacts the agent's transcript, and when the agent
has a ``session`` it works on the session instead (the compaction is stored as a ``compaction``
entry and the transcript is rebuilt with ``session.build_context()``):

* **manual**: :meth:`Compactor.compact` (``agent.compact(instructions)``), only while idle;
* **threshold**: before a run's first request (a prompt or ``continue_()``,
  :meth:`Compactor.before_run`) and after every turn (the ``prepare_next_turn`` of
  :meth:`Compactor.turn_hooks`, chained after the agent's own), when the context uses more than
  ``context_window - reserve_tokens`` (half the window when the reserve is not smaller than the
  window), it compacts and the run goes on with the compacted context.
  The check is incremental (:class:`~agentcore.session.compaction_tokens.ContextTokenCounter`):
  its cost grows with the messages added since the last check, not with the transcript;
* **overflow**: when a run ends with a context-overflow error, or with ``stop_reason ==
  "length"`` although it used less output than its cap while the context was over the threshold
  (the context, not the output cap, was exhausted: spec §7.3, v4), :meth:`Compactor.recover_overflow`
  takes that response out of the transcript (a session keeps it on an abandoned branch), compacts
  once and returns the context the Agent continues from. (A recoverable ``length`` stop cut off in
  a tool call does not end the run, its call is rejected: the threshold check after that turn
  compacts before the next request.) A second overflow gives up with a
  :class:`CompactionEndEvent` whose ``error_message`` says what to do (:meth:`Compactor.retried`).

The run body is the Agent's (``Agent._run_body``): it calls these steps at documented points and
is the only caller of the loop. During a run the compactor never writes the agent's state: each
compaction's :class:`CompactionEndEvent` carries the new transcript (``messages``) and the agent's
reducer applies it, so the transcript has one writer.

Before anything is summarised the ``before_compaction`` hook may cancel the compaction or supply
it (stored with ``fromHook``, no model call); see :func:`agentcore.hookspecs.before_compaction`.

Progress is reported as :class:`CompactionStartEvent` / :class:`CompactionEndEvent` through the
``emit`` callable (the agent's listeners); every ``compaction_start`` is followed by one
``compaction_end`` (also when something else than a :class:`CompactionError` stops it: a
KeyboardInterrupt in ``agent.compact()`` ends it ``aborted`` and is re-raised). Automatic compaction failures never fail the run, a session that cannot be
written included (``CompactionError("storage")``): they are reported in
``CompactionEndEvent.error_message`` and the run goes on uncompacted. An abort is honoured until
the compaction is stored: one that arrives after the summary came back stores nothing. Every
``compaction_end`` carries the ``usage`` its summary requests were billed, a failed compaction's
too (nothing of it is stored in the session).
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field
from dataclasses import fields as dataclass_fields
from typing import Any, Callable, ClassVar, Dict, List, Mapping, Optional, Sequence, Tuple

from .._loop_types import AgentLoopTurnUpdate, switch_model, turn_update_parts
from .._safe import describe_exception
from .._util import awaited, field_of
from ..messages import convert_message
from ..options import check_api_key
from ..signals import AbortController
from ..types import (
    AgentContext,
    AssistantMessage,
    CompactionSummaryMessage,
    ToolResultMessage,
    Usage,
    UserMessage,
    now_ms,
    role_of,
)
from .compaction import (
    CompactionError,
    CompactionPreparation,
    CompactionResult,
    compact,
    kept_message_count,
    prepare_compaction,
    run_before_compaction,
)
from .compaction_tokens import CompactionSettings, ContextTokenCounter, should_compact, usage_tokens
from .compaction_tokens import CompactionSettings as _Settings  # for type checks: tests may patch the default factory
from .context import repair_tool_results
from .entries import CompactionEntry, MessageEntry, SessionEntry, iso_from_ms
from .errors import SessionError

__all__ = [
    "Compactor",
    "CompactionStartEvent",
    "CompactionEndEvent",
    "ERR_OVERFLOW_GAVE_UP",
    "ERR_COMPACT_BUSY",
    "summary_request_options",
]

ERR_OVERFLOW_GAVE_UP = (
    "Context overflow: the conversation still does not fit the model's context window after "
    "compacting once. Compact with narrower instructions (agent.compact(...)), lower "
    "keep_recent_tokens, or switch to a model with a larger context window."
)
ERR_COMPACT_BUSY = "Cannot compact while the agent is running: call wait_for_idle() first."


@dataclass
class CompactionStartEvent:
    """A compaction began. ``reason``: ``"manual"``, ``"threshold"`` or ``"overflow"``;
    ``tokens_before`` is the estimated context size being compacted."""

    reason: str
    tokens_before: int = 0
    type: ClassVar[str] = "compaction_start"


@dataclass
class CompactionEndEvent:
    """A compaction ended: with ``result``, or ``aborted``, or ``cancelled`` (by a
    ``before_compaction`` hook), or with ``error_message`` (also set for a cancelled overflow
    recovery, which leaves the run failed). ``will_retry`` is True when an overflowed turn is
    retried on the compacted context; ``result.from_hook`` tells a hook-supplied compaction.
    ``messages`` is the transcript after a successful compaction: the agent's reducer makes it
    the agent's transcript (None when nothing changed).

    ``usage`` is the summed :class:`~agentcore.types.Usage` of this compaction's summary
    requests, whatever the outcome: on success the same figures as ``result.usage``; after a
    failure or an abort, what the answered requests were billed (``CompactionError.usage``),
    although nothing was stored. None when no model answered (a hook-supplied summary, a
    failure before any request). Summing ``usage`` over ``compaction_end`` events counts every
    summary request once."""

    reason: str
    result: Optional[CompactionResult] = None
    aborted: bool = False
    will_retry: bool = False
    error_message: Optional[str] = None
    cancelled: bool = False
    messages: Optional[List[Any]] = field(default=None, repr=False)
    usage: Optional[Usage] = None
    type: ClassVar[str] = "compaction_end"


#: The output cap of a request sent without ``max_tokens``: the smallest default a built-in
#: provider applies (Anthropic sends ``min(model.max_tokens, 32000)``; the others send none).
DEFAULT_OUTPUT_CAP = 32000


def _from_model(message: Any, model: Any) -> bool:
    if model is not None and getattr(model, "id", "unknown") != "unknown":
        return (message.provider, message.model) == (model.provider, model.id)
    return True


def _is_overflow(message: Any, model: Any) -> bool:
    """An overflow *error* of ``model`` (silent overflows are left to the threshold check)."""
    if role_of(message) != "assistant" or getattr(message, "stop_reason", None) != "error":
        return False
    if not _from_model(message, model):
        return False
    from ..providers import is_context_overflow  # the one list of overflow texts

    return bool(is_context_overflow(message))


def output_cap(model: Any, max_tokens: Optional[int]) -> int:
    """The output cap a request was meant to have: the caller's ``max_tokens``, else
    ``min(model.max_tokens, DEFAULT_OUTPUT_CAP)``; 0 when unknown."""
    if max_tokens:
        return int(max_tokens)
    model_max = int(getattr(model, "max_tokens", 0) or 0)
    return min(model_max, DEFAULT_OUTPUT_CAP) if model_max > 0 else 0


def is_recoverable_length(message: Any, model: Any, max_tokens: Optional[int], settings: CompactionSettings) -> bool:
    """A ``length`` stop of ``model`` caused by a full context, not by the output cap (spec §7.3,
    v4): the response used less output than :func:`output_cap` and its reported usage is over the
    compaction threshold. Unknown usage, cap or context window: False (it is a real truncation
    as far as anyone can tell, and stays in the transcript).
    """
    if role_of(message) != "assistant" or getattr(message, "stop_reason", None) != "length":
        return False
    if not _from_model(message, model):
        return False
    usage = getattr(message, "usage", None)
    cap = output_cap(model, max_tokens)
    window = int(getattr(model, "context_window", 0) or 0)
    if usage is None or cap <= 0 or window <= 0:
        return False
    return (getattr(usage, "output", 0) or 0) < cap and should_compact(usage_tokens(usage), window, settings)


#: agent options that shape the answer: a summary request sets its own (max_tokens, reasoning from
#: the thinking level) or goes without (no tools, no schema, the agent's payload hook not applied)
_ANSWER_OPTIONS = frozenset(
    {
        "temperature",
        "max_tokens",
        "reasoning",
        "tool_choice",
        "output_schema",
        "reasoning_effort",
        "reasoning_summary",
        "thinking_enabled",
        "thinking_budget_tokens",
        "effort",
        "on_payload",
        "thinking",  # Gemini's raw thinkingConfig override
    }
)
#: options that say nothing about where a request goes, kept for a summary model of another provider
_NEUTRAL_OPTIONS = frozenset({"timeout", "timeout_ms", "max_retries", "max_retry_delay_ms"})
#: options that name the agent's model itself (an Azure deployment): not for another model
_MODEL_OPTIONS = frozenset({"azure_deployment_name"})


def summary_request_options(options: Any, agent_model: Any, summary_model: Any) -> Dict[str, Any]:
    """The agent's request options that a summary request by ``summary_model`` carries.

    The request goes where the agent's go, as they go: its endpoint and credentials (Azure
    resource, Bedrock region or profile, Vertex project, ...), headers, metadata, cache and
    session settings, timeouts and retries. Options that shape the answer are left out
    (``_ANSWER_OPTIONS``). A summary model of another provider (or wire API) gets only the
    timeouts and retries: the agent's headers and endpoint are never sent to another provider;
    another model of the same provider gets everything but the agent's Azure deployment name.
    """
    if options is None or not hasattr(options, "to_kwargs"):
        return {}
    same_provider = getattr(summary_model, "provider", None) == getattr(agent_model, "provider", None) and (
        getattr(summary_model, "api", None) == getattr(agent_model, "api", None)
    )
    same_model = same_provider and getattr(summary_model, "id", None) == getattr(agent_model, "id", None)
    return {
        name: value
        for name, value in options.to_kwargs().items()
        if name not in _ANSWER_OPTIONS
        and (same_provider or name in _NEUTRAL_OPTIONS)
        and (same_model or name not in _MODEL_OPTIONS)
    }


_SETTING_NAMES = tuple(f.name for f in dataclass_fields(_Settings))


def _checked_settings(settings: Any, where: str) -> CompactionSettings:
    """``settings`` (anything but None) as a :class:`CompactionSettings`, or a TypeError naming
    ``where`` and what it takes."""
    if settings is False:
        return _Settings(enabled=False)
    if isinstance(settings, _Settings):
        return settings
    if isinstance(settings, Mapping) and all(isinstance(key, str) for key in settings):
        unknown = sorted(set(settings) - set(_SETTING_NAMES))
        if unknown:
            raise TypeError(
                f"{where}: unknown compaction setting {', '.join(map(repr, unknown))}; "
                f"the settings are {', '.join(_SETTING_NAMES)}"
            )
        return _Settings(**settings)
    raise TypeError(
        f"{where} takes a CompactionSettings, a mapping of its fields ({', '.join(_SETTING_NAMES)}), "
        f"None for the defaults or False for no automatic compaction, not {settings!r} "
        f"({type(settings).__name__})"
    )


def _settings_of(settings: Any, where: str) -> CompactionSettings:
    """``settings`` as given to the constructor or assigned later, made a :class:`CompactionSettings`."""
    if settings is None:
        return CompactionSettings()
    if type(settings) is _Settings:
        return settings
    return _checked_settings(settings, where)


def _weak_or_strong(obj: Any) -> Callable[[], Any]:
    """A callable returning ``obj``: a weak reference when it takes one, else a strong one."""
    if obj is None:
        return lambda: None
    try:
        return weakref.ref(obj)
    except TypeError:
        return lambda: obj


class Compactor:
    """Compaction for one agent.

    ``settings``: a :class:`CompactionSettings`, a mapping of its field names (made into one, with
    the same checks), None for the defaults, or False to switch automatic compaction off; anything
    else raises TypeError.
    ``model``/``stream_fn``: the model and stream function for summaries (default: the agent's
    model, and the agent's ``stream_fn`` when no separate model is given, else the default stream
    function). ``emit``: callable receiving the compaction events (the Agent passes the function
    that reduces events and calls its listeners). ``plugins``: a plugin manager whose
    ``summarize`` hook may supply summaries (default: ``agent.plugins`` when present).

    ``owned_by_agent=True`` (what ``Agent`` passes for its own ``agent.compactor``): the agent holds
    this compactor, so the compactor holds the agent, and an ``emit`` that is one of the agent's
    bound methods, weakly. No cycle forms, and a discarded agent is freed by reference counting at
    once, with its transcript, not left to the cycle collector; :attr:`agent` is None after that.
    Otherwise (a compactor you make and keep yourself) both are held as given.
    """

    def __init__(
        self,
        agent: Any,
        settings: Any = None,
        *,
        model: Any = None,
        stream_fn: Optional[Callable[..., Any]] = None,
        emit: Optional[Callable[[Any], None]] = None,
        plugins: Any = None,
        owned_by_agent: bool = False,
    ) -> None:
        self._weak = owned_by_agent
        self.agent = agent
        self._settings = _settings_of(
            settings, "Agent(compaction=...)" if owned_by_agent else "Compactor(settings=...)"
        )
        self.model = model
        self.stream_fn = stream_fn
        self.emit = emit
        self.plugins = plugins
        self._lock = threading.RLock()
        self._controller: Optional[AbortController] = None
        # without a session: (summary message, details, from_hook) of the newest compaction
        self._details: Tuple[Any, Any, bool] = (None, None, False)
        # (summary message, number of messages its compaction kept) for entry-order staleness
        self._kept: Tuple[Any, Optional[int]] = (None, None)
        kept_after = weakref.WeakMethod(self._kept_after)  # the counter is the compactor's own
        self._counter = ContextTokenCounter(lambda summary: kept_after()(summary))  # type: ignore[misc]
        self._counter_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Compactor(settings={self.settings!r})"

    @property
    def settings(self) -> CompactionSettings:
        """The :class:`CompactionSettings` in use. Assigning takes what the constructor takes (a
        mapping of field names, None for the defaults, False for no automatic compaction), checked
        at once: anything else raises TypeError and the settings stay as they were."""
        return self._settings

    @settings.setter
    def settings(self, settings: Any) -> None:
        self._settings = _settings_of(settings, "Compactor.settings = ...")

    @property
    def agent(self) -> Any:
        """The agent this compactor serves; None once a weakly held agent is gone."""
        return self._agent()

    @agent.setter
    def agent(self, agent: Any) -> None:
        self._agent = _weak_or_strong(agent) if self._weak else lambda: agent

    @property
    def emit(self) -> Optional[Callable[[Any], None]]:
        """The callable receiving compaction events (see the class docstring)."""
        return self._emit()

    @emit.setter
    def emit(self, emit: Optional[Callable[[Any], None]]) -> None:
        owner = getattr(emit, "__self__", None)
        if self._weak and emit is not None and owner is not None and owner is self.agent:
            self._emit: Callable[[], Any] = weakref.WeakMethod(emit)
        else:
            self._emit = lambda: emit

    # ------------------------------------------------------------------ public operations

    def compact(self, instructions: Optional[str] = None, *, signal: Any = None) -> CompactionResult:
        """Compact now (``reason="manual"``), focusing the summary on ``instructions`` if given.

        Requires an idle agent (RuntimeError otherwise). Raises :class:`CompactionError`:
        ``nothing_to_compact`` (empty transcript, or everything fits ``keep_recent_tokens``),
        ``already_compacted``, ``aborted`` (see :meth:`abort`; also when the abort came after the
        summary, before it was stored: nothing is stored), ``summarization_failed`` (also when the
        agent's ``get_api_key``, awaited if ``async``, raised for the summary model's provider or
        returned something else than a string or None), or
        ``storage`` (the session could not be written; the exception's cause says why).
        """
        if getattr(self.agent.state, "is_streaming", False):
            raise RuntimeError(ERR_COMPACT_BUSY)
        controller = AbortController()

        def forward(reason: Any) -> None:
            controller.abort(reason)

        if signal is not None:
            signal.add_listener(forward)
        self._controller = controller
        try:
            result, _ = self._compact("manual", instructions, self.emit, controller.signal)
        finally:
            self._controller = None
            if signal is not None:
                signal.remove_listener(forward)
        return result

    def abort(self, reason: Any = None) -> None:
        """Abort a manual compaction in progress (no-op otherwise)."""
        controller = self._controller
        if controller is not None:
            controller.abort(reason or "Compaction aborted")

    def navigate_tree(self, target_id: Optional[str], summarize: bool = False, **kwargs: Any) -> Any:
        """``navigate_tree`` on the agent's session with the agent's summary model, then reload the
        transcript from the session. Idle only; needs ``agent.session``. The agent's
        ``get_api_key`` is asked (for the summary model) only when ``summarize`` is true.
        ``model``/``stream_fn`` in ``kwargs`` choose the summary model and stream function for this
        call (as for :meth:`_summary_model`: a model of another provider gets its own key and the
        default stream function unless ``stream_fn`` is given)."""
        from .branch_summary import navigate_tree

        session = getattr(self.agent, "session", None)
        if session is None:
            raise ValueError("navigate_tree needs an agent with a session (Agent(session=...))")
        if getattr(self.agent.state, "is_streaming", False):
            raise RuntimeError("Cannot navigate while the agent is running: call wait_for_idle() first.")
        # only a summary needs the summary model (and its key: get_api_key is not asked otherwise)
        model, stream_fn = kwargs.pop("model", None), kwargs.pop("stream_fn", None)
        options: Dict[str, Any] = {}
        if summarize:
            model, stream_fn, options = self._summary_model(model, stream_fn)
        kwargs.setdefault("plugins", self._plugins())
        kwargs.setdefault("reserve_tokens", self.settings.reserve_tokens)
        kwargs.setdefault("thinking_level", str(self.agent.state.thinking_level))
        for key, value in options.items():
            kwargs.setdefault(key, value)
        with self._lock:
            outcome = navigate_tree(session, target_id, summarize, model=model, stream_fn=stream_fn, **kwargs)
            self.agent.state.messages = session.build_context().messages
        return outcome

    def needs_compaction(self, messages: Optional[Sequence[Any]] = None) -> bool:
        """True when automatic compaction is on and ``messages`` (default: the transcript) use more
        than ``context_window - reserve_tokens`` tokens (half the window when the reserve is not
        smaller than it: :func:`~agentcore.session.compaction_tokens.should_compact`).

        Incremental: the figures of the previous call are reused while the transcript only grew
        (see :class:`~agentcore.session.compaction_tokens.ContextTokenCounter`). Usage from before
        the newest compaction is ignored, by entry order when this compactor made that compaction
        or can find it in the agent's session, else by timestamp.
        """
        return self._over_threshold(messages, self.agent.state.model)

    def _over_threshold(self, messages: Optional[Sequence[Any]], model: Any) -> bool:
        """:meth:`needs_compaction` against the context window of ``model``."""
        if not self.settings.enabled:
            return False
        window = getattr(model, "context_window", 0) or 0
        if window <= 0:
            return False
        return should_compact(self.context_tokens(messages), window, self.settings)

    def context_tokens(self, messages: Optional[Sequence[Any]] = None) -> int:
        """Estimated context size of ``messages`` (default: the transcript), as the threshold
        check sees it."""
        messages = self.agent.state.messages if messages is None else messages
        with self._counter_lock:
            return self._counter.estimate(messages).tokens

    def _kept_after(self, summary: Any) -> Optional[int]:
        """How many messages after ``summary`` its compaction kept; None when unknown."""
        recorded, kept = self._kept
        if summary is recorded:
            return kept
        session = getattr(self.agent, "session", None)
        if session is None:
            return None
        path, _ = _branch_from_last_compaction(session)  # the newest compaction and what it kept
        for index in range(len(path) - 1, -1, -1):
            entry = path[index]
            if isinstance(entry, CompactionEntry):
                if entry.summary != getattr(summary, "summary", None):
                    return None
                kept = kept_message_count(path, index)
                self._kept = (summary, kept)
                return kept
        return None

    # ------------------------------------------------------------------ the agent's run steps
    # The Agent's run body (agent.py) calls these at its documented points; none of them runs the
    # loop. In a run, the transcript changes only through the agent's reducer: each compaction
    # emits a CompactionEndEvent whose ``messages`` the reducer makes the transcript.

    def turn_hooks(
        self, config: Any, emit: Callable[[Any], None], signal: Any
    ) -> Tuple[Callable[..., Any], Callable[[Any], Any]]:
        """``(transform_context, prepare_next_turn)`` for the loop config of one run, chained
        after the config's own: the transform shows compaction and branch summaries to the model
        as user messages (whatever the converter); the turn hook compacts after a turn when the
        context is over the threshold of the model the next request goes to and hands the loop
        the compacted context.

        A model or thinking level the config's own ``prepare_next_turn`` switches to is also set
        on ``config`` (built for this run alone), as the loop sets it on its working copy: the
        threshold is that model's, :meth:`recover_overflow` recognises its overflow errors, and
        the retry after a recovery goes on with it."""
        return (_summaries_as_user(config.transform_context), self._turn_hook(config, emit, signal))

    def before_run(self, context: AgentContext, prompts: Sequence[Any], emit: Any, signal: Any) -> AgentContext:
        """The context the run should start from: compacted first when the transcript plus
        ``prompts`` is over the threshold (before the run's first request)."""
        messages = list(context.messages) + list(prompts) if prompts else context.messages
        if not self.settings.enabled or not self.needs_compaction(messages):
            return context
        try:
            _, messages = self._compact("threshold", None, emit, signal)
        except CompactionError:
            return context
        return AgentContext(context.system_prompt, list(messages), context.tools)

    def recover_overflow(
        self, messages: List[Any], context: AgentContext, config: Any, emit: Any, signal: Any
    ) -> Optional[AgentContext]:
        """After a run: when its last message is a context overflow of the model (or a
        recoverable ``length`` stop), compact once without that message and return the context
        to continue from; None when there is nothing to recover (or compaction failed)."""
        last = messages[-1] if messages else None
        if not self.settings.enabled or signal.aborted or not self._overflowed(last, config):
            return None
        try:
            _, kept = self._compact("overflow", None, emit, signal, drop_last=last)
        except CompactionError:
            return None
        return AgentContext(context.system_prompt, list(kept), context.tools)

    def retried(self, messages: List[Any], config: Any, emit: Any) -> None:
        """After the retry of :meth:`recover_overflow`: a second overflow gives up (event)."""
        if messages and self._overflowed(messages[-1], config):
            emit(CompactionEndEvent("overflow", error_message=ERR_OVERFLOW_GAVE_UP))

    def _turn_hook(self, config: Any, emit: Any, signal: Any) -> Callable[[Any], Any]:
        previous = config.prepare_next_turn

        def hook(ctx: Any) -> Any:
            update = awaited(previous(ctx)) if previous is not None else None  # an async def hook too
            full = self._recoverable_length(ctx.message, config)  # the context ran out mid-answer
            if update is not None:  # checked here too: a compaction would replace it by its own
                _, model, level = turn_update_parts(update)
                switch_model(config, model, level)  # before the check: the next request's model
            if update is not None and field_of(update, "context") is not None:
                return update  # another hook owns the context of this turn
            if (
                not self.settings.enabled
                or signal.aborted
                or getattr(ctx.message, "stop_reason", None) == "aborted"
                # the run ends with it: left to the recovery, which drops it (with tool calls, whose
                # rejected results go back to the model, the run goes on: compact before that request)
                or (full and not ctx.tool_results)
                or not self._over_threshold(None, config.model)
            ):
                return update
            try:
                _, messages = self._compact("threshold", None, emit, signal, overflowing=full)
            except CompactionError:
                return update
            new_context = AgentContext(ctx.context.system_prompt, list(messages), ctx.context.tools)
            return AgentLoopTurnUpdate(new_context, field_of(update, "model"), field_of(update, "thinking_level"))

        return hook

    def _overflowed(self, message: Any, config: Any) -> bool:
        return _is_overflow(message, config.model) or self._recoverable_length(message, config)

    def _recoverable_length(self, message: Any, config: Any) -> bool:
        return is_recoverable_length(message, config.model, getattr(config, "max_tokens", None), self.settings)

    # ------------------------------------------------------------------ the compaction itself

    def _plugins(self) -> Any:
        return self.plugins if self.plugins is not None else getattr(self.agent, "plugins", None)

    def _summary_model(self, given: Any = None, given_stream_fn: Any = None) -> Tuple[Any, Any, Dict[str, Any]]:
        """The summary model, stream function and request options: ``given`` (one call's model),
        else this compactor's ``model``, else the agent's. The stream function: ``given_stream_fn``,
        else this compactor's (for its own model), else the agent's when the model is the agent's,
        else the default one."""
        agent = self.agent
        if given is None:
            model = self.model or agent.state.model
            own = self.stream_fn or (getattr(agent, "stream_fn", None) if self.model is None else None)
        else:
            model = given
            own = getattr(agent, "stream_fn", None) if given is agent.state.model else None
        stream_fn = given_stream_fn or own
        if stream_fn is None:
            from ..loop import get_default_stream_fn

            stream_fn = get_default_stream_fn()
        options = summary_request_options(getattr(agent, "options", None), agent.state.model, model)
        # the agent's own key is for its provider: another provider's model gets its own (or none)
        same_provider = getattr(model, "provider", None) == getattr(agent.state.model, "provider", None)
        key = getattr(agent, "api_key", None) if same_provider else None
        get_key = getattr(agent, "get_api_key", None)
        if get_key is not None:
            key = _hook_api_key(get_key, model.provider) or key
        if key:
            options["api_key"] = key
        return model, stream_fn, options

    def _path(self, drop_last: Any) -> Tuple[List[SessionEntry], int, Any]:
        """The root→leaf entries to compact, how many entries of the branch come before them (0:
        the whole branch), and the session (None: a synthetic path)."""
        session = getattr(self.agent, "session", None)
        if session is not None:
            path, offset = self._branch_to_compact(session)
            if (
                drop_last is not None
                and path
                and isinstance(path[-1], MessageEntry)
                and _same_message(path[-1].message, drop_last)
            ):
                path = path[:-1]
            return path, offset, session
        messages = list(self.agent.state.messages)
        if drop_last is not None and messages and messages[-1] is drop_last:
            messages.pop()
        return self._synthetic_path(messages), 0, None

    def _branch_to_compact(self, session: Any) -> Tuple[List[SessionEntry], int]:
        """``(entries, offset)``: the session's root→leaf branch from the newest compaction's
        first kept entry on (what :func:`prepare_compaction` reads: the history before it is in
        that compaction's summary), and how many branch entries precede it. A long session's
        compaction decodes what the context holds instead of its whole branch (100,000 entries:
        1.5 s and 275 MB per compaction, for every compaction of its life). The whole branch
        (offset 0) before the first compaction, and when a ``before_compaction`` hook is
        registered: its documented ``branch_entries`` is the root→leaf path."""
        if _hook_registered(self._plugins(), "before_compaction"):
            return session.get_branch(), 0
        return _branch_from_last_compaction(session)

    def _synthetic_path(self, messages: Sequence[Any]) -> List[SessionEntry]:
        """Entries ``m0``, ``m1`` ... for a transcript without a session. The messages this
        compactor's newest compaction kept are placed before its entry, as a session stores them,
        so the next preparation knows they predate it (their usage is stale)."""
        summary_message, details, from_hook = self._details
        entries: List[SessionEntry] = []
        parent = None
        for index in _synthetic_order(messages, summary_message, self._kept):
            message = messages[index]
            entry_id = f"m{index}"
            stamp = _synthetic_stamp(message)
            if role_of(message) == "compactionSummary":
                ours = message is summary_message
                entry: SessionEntry = CompactionEntry(
                    entry_id,
                    parent,
                    stamp,
                    message.summary,
                    f"m{index + 1}",
                    message.tokens_before,
                    details if ours else None,
                    True if ours and from_hook else None,
                )
            else:
                entry = MessageEntry(entry_id, parent, stamp, message)
            entries.append(entry)
            parent = entry_id
        return entries

    def _compact(
        self,
        reason: str,
        instructions: Optional[str],
        emit: Any,
        signal: Any,
        drop_last: Any = None,
        *,
        overflowing: bool = False,
    ) -> Tuple[CompactionResult, List[Any]]:
        """``overflowing``: the context ran out (besides ``reason == "overflow"``): the cut may
        fall back to the call of the newest tool results (see :func:`find_cut_point`)."""
        emit = emit or (lambda event: None)
        with self._lock:
            path, offset, session = self._path(drop_last)
            preparation = self._prepare(path, reason, emit, overflowing or reason == "overflow")
            preparation.first_kept_entry_index += offset  # as an index into the whole branch
            emit(CompactionStartEvent(reason, preparation.tokens_before))
            try:
                result = run_before_compaction(self._plugins(), preparation, path, instructions, reason, signal)
                if result is None:
                    model, stream_fn, options = self._summary_model()
                    result = compact(
                        preparation,
                        model,
                        stream_fn,
                        instructions,
                        signal,
                        thinking_level=str(self.agent.state.thinking_level),
                        plugins=self._plugins(),
                        **options,
                    )
                _honour_abort(signal, result)
                messages = self._store(result, preparation, path, session)
            except CompactionError as exc:
                emit(_end_event(reason, exc))
                raise
            except BaseException as exc:  # Ctrl+C in agent.compact() ...: listeners still get the end
                emit(_interrupted_event(reason, exc))
                raise
            if reason == "manual":  # idle: the transcript is the agent's only copy
                self.agent.state.messages = messages
            if messages and role_of(messages[0]) == "compactionSummary":
                self._kept = (messages[0], len(messages) - 1)
        # in a run, the agent's reducer makes ``messages`` the transcript (one writer)
        usage = Usage.from_dict(result.usage) if result.usage else None
        emit(CompactionEndEvent(reason, result, will_retry=reason == "overflow", messages=list(messages), usage=usage))
        return result, messages

    def _prepare(
        self, path: List[SessionEntry], reason: str, emit: Any, overflowing: bool = False
    ) -> CompactionPreparation:
        try:
            preparation = prepare_compaction(path, self.settings, overflowing=overflowing)
            if preparation is None:
                code, text = (
                    ("already_compacted", "already compacted: nothing happened since the last compaction")
                    if path
                    else ("nothing_to_compact", "nothing to compact: the conversation is empty")
                )
                raise CompactionError(code, text)
            if preparation.empty:
                raise CompactionError(
                    "nothing_to_compact", "nothing to compact: the whole context fits in keep_recent_tokens"
                )
        except CompactionError as exc:
            if reason == "overflow":
                emit(CompactionEndEvent(reason, error_message=_failure(reason, exc)))
            raise
        return preparation

    def _store(
        self, result: CompactionResult, preparation: CompactionPreparation, path: List[SessionEntry], session: Any
    ) -> List[Any]:
        if session is not None:
            try:
                if path and session.leaf_id != path[-1].id:
                    session.move_to(path[-1].id)  # leaves the overflow error on an abandoned branch
                session.append_compaction(
                    result.summary,
                    result.first_kept_entry_id,
                    result.tokens_before,
                    result.details,
                    usage=result.usage,
                    from_hook=True if result.from_hook else None,
                )
            except SessionError as exc:  # closed, full disk ...: this compaction failed, not the run
                usage = Usage.from_dict(result.usage) if result.usage else None
                raise CompactionError(
                    "storage", f"Compaction failed: the session could not be written: {exc}", usage=usage
                ) from exc
            return list(session.build_context().messages)
        summary = CompactionSummaryMessage(result.summary, result.tokens_before, now_ms())
        self._details = (summary, result.details, result.from_hook)
        first = preparation.first_kept_entry_index  # a synthetic path is whole: no offset
        if result.first_kept_entry_id != preparation.first_kept_entry_id:  # chosen by a hook
            ids = [entry.id for entry in path]
            first = ids.index(result.first_kept_entry_id) if result.first_kept_entry_id in ids else len(path)
        kept = [entry.message for entry in path[first:] if isinstance(entry, MessageEntry)]
        # as the session's build_context does: a hook may keep from a tool result, whose call is gone
        return [summary] + repair_tool_results(kept)


def _branch_from_last_compaction(session: Any) -> Tuple[List[SessionEntry], int]:
    """``(entries, offset)``: the root→leaf branch of ``session`` from its newest compaction's
    first kept entry on (from the compaction itself when it keeps its messages inside it, or its
    first kept entry is not on the branch; the whole branch without a compaction), and how many
    branch entries precede them. Only those entries are decoded; the rest is walked as ids."""
    with session._lock:  # as get_branch: one consistent read of the branch
        storage = session.storage
        leaf = session.leaf_id
        if leaf is None:
            return [], 0
        ids = storage.path_to_root(leaf)
        ids.reverse()
        start = 0
        for index in range(len(ids) - 1, -1, -1):
            if storage.type_of(ids[index]) == "compaction":
                previous = storage.get_entry(ids[index])
                start = index
                first = getattr(previous, "first_kept_entry_id", None)
                if getattr(previous, "retained_tail", None) is None and first:
                    start = next((i for i in range(index - 1, -1, -1) if ids[i] == first), index)
                break
        return storage.get_entries(ids[start:]), start


def _hook_registered(plugins: Any, name: str) -> bool:
    """Whether ``plugins`` (a plugin manager, may be None) has an implementation of hook ``name``;
    True when it cannot tell (a hook caller without ``get_hookimpls``)."""
    hook = getattr(getattr(plugins, "hook", None), name, None)
    if hook is None:
        return False
    implementations = getattr(hook, "get_hookimpls", None)
    return True if implementations is None else bool(implementations())


def _summaries_as_user(inner: Optional[Callable[..., Any]]) -> Callable[[List[Any], Any], Any]:
    """A ``transform_context`` (after ``inner``) that turns compaction and branch summaries into
    the user messages the model should see, so they reach it even when the converter (like the
    loop's default) keeps only the standard roles."""

    def transform(messages: List[Any], signal: Any) -> List[Any]:
        if inner is not None:
            changed = awaited(inner(messages, signal))
            if changed is not None:
                messages = changed
        for message in messages:  # usually none is a summary: the list is returned as it is
            if type(message) not in _STANDARD_TYPES and role_of(message) in _SUMMARY_ROLES:
                return [convert_message(m) if role_of(m) in _SUMMARY_ROLES else m for m in messages]
        return messages

    return transform


_SUMMARY_ROLES = frozenset({"compactionSummary", "branchSummary"})
#: Message classes that are never summaries (checked by exact type, before the generic role read).
_STANDARD_TYPES = frozenset({UserMessage, AssistantMessage, ToolResultMessage})


def _synthetic_order(messages: Sequence[Any], summary: Any, kept: Tuple[Any, Optional[int]]) -> List[int]:
    """Transcript indices in entry order: the ``kept[1]`` messages after ``summary`` (when it is
    this compactor's newest, ``kept[0]``) move before it; otherwise the transcript's order."""
    order = list(range(len(messages)))
    recorded, count = kept
    if summary is None or recorded is not summary or not count or count < 0:
        return order
    at = next((i for i, message in enumerate(messages) if message is summary), None)
    if at is None or at + count >= len(messages):  # the transcript was changed since
        return order
    return order[:at] + order[at + 1 : at + 1 + count] + [at] + order[at + 1 + count :]


def _synthetic_stamp(message: Any) -> str:
    """The ISO timestamp of a made-up entry for ``message``: its own ``timestamp`` (ms), or the
    epoch when that is no time ``iso_from_ms`` can write (NaN, text, nanoseconds, years past
    9999): the preparation orders by entry, never by these stamps."""
    try:
        return iso_from_ms(getattr(message, "timestamp", 0) or 0)
    except (TypeError, ValueError, OverflowError, OSError):
        return iso_from_ms(0)


def _same_message(stored: Any, message: Any) -> bool:
    """The session's copy of ``message`` (the object itself, or an equal failed/cut-off response)."""
    if stored is message:
        return True
    stop = getattr(message, "stop_reason", None)
    return (
        stop in ("error", "length")
        and getattr(stored, "stop_reason", None) == stop
        and getattr(stored, "timestamp", None) == getattr(message, "timestamp", None)
    )


def _hook_api_key(get_key: Callable[[str], Any], provider: Any) -> Optional[str]:
    """The key the agent's ``get_api_key`` gives for the summary model's ``provider``, awaited when
    it is an ``async def`` (as the loop does). A raising hook or a result that is not a string or
    None fails the summary (``CompactionError("summarization_failed")``), not the caller's run."""
    where = f"get_api_key({provider!r})"
    try:
        key = awaited(get_key(provider))
        check_api_key(key, where, "its result")
    except Exception as exc:  # noqa: BLE001 - the application's hook: a failed summary, nothing else
        raise CompactionError(
            "summarization_failed", f"Summarization failed: {where} raised {describe_exception(exc)}"
        ) from exc
    return key


def _honour_abort(signal: Any, result: CompactionResult) -> None:
    """An abort that arrived after the summary came back, before it was stored: nothing is
    stored (``CompactionError("aborted")`` with the usage the summary was billed)."""
    if signal is not None and getattr(signal, "aborted", False):
        usage = Usage.from_dict(result.usage) if result.usage else None
        raise CompactionError("aborted", "Compaction aborted before the summary was stored", usage=usage)


def _end_event(reason: str, exc: CompactionError) -> CompactionEndEvent:
    """The ``compaction_end`` event of a compaction that raised ``exc``: an abort or a cancel is
    not an error, except that a cancelled overflow recovery leaves the run failed. It carries
    the usage the failed compaction's answered requests were billed (``exc.usage``)."""
    aborted, cancelled = exc.code == "aborted", exc.code == "cancelled"
    quiet = aborted or (cancelled and reason != "overflow")
    return CompactionEndEvent(
        reason,
        aborted=aborted,
        cancelled=cancelled,
        error_message=None if quiet else _failure(reason, exc),
        usage=exc.usage,
    )


def _interrupted_event(reason: str, exc: BaseException) -> CompactionEndEvent:
    """The ``compaction_end`` event of a compaction stopped by something else than a
    :class:`CompactionError`: a KeyboardInterrupt (Ctrl+C while ``agent.compact()`` waits for the
    summary) is an abort; anything else an error naming it."""
    if isinstance(exc, KeyboardInterrupt):
        return CompactionEndEvent(reason, aborted=True)
    return CompactionEndEvent(reason, error_message=f"Compaction failed: {describe_exception(exc)}")


def _failure(reason: str, exc: CompactionError) -> str:
    if reason == "overflow":
        return f"Context overflow recovery failed: {exc}"
    return str(exc)

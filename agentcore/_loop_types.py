"""The data of the agent loop: its configuration and the payloads its hooks receive and return.

All public names are re-exported by :mod:`agentcore.loop`; import them from there (or from
``agentcore``). Kept apart so that ``loop.py`` holds only behaviour and reads top to bottom.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ._agent_state import check_tool_execution
from ._util import field_of
from .options import (
    OPTION_NAMES,
    StreamOptions,
    check_api_key,
    installed_provider_options,
    merge_provider_options,
    split_names,
)
from .signals import AbortSignal
from .tools import AgentToolResult
from .types import AgentContext, AssistantMessage, Model, ThinkingLevel, ToolCall, ToolResultMessage

__all__ = [
    "AgentLoopConfig",
    "BeforeToolCallContext",
    "BeforeToolCallResult",
    "AfterToolCallContext",
    "AfterToolCallResult",
    "ShouldStopAfterTurnContext",
    "PrepareNextTurnContext",
    "AgentLoopTurnUpdate",
    "ToolBatchResult",
    "STREAM_OPTIONS",
]


@dataclass(init=False)
class AgentLoopConfig(StreamOptions):
    """Everything one run needs besides the context: the model, the hooks and the stream options.

    Hooks (all optional; any of them may be ``async def``: the loop runs the coroutine to
    completion on the run thread):

    * ``convert_to_llm(messages) -> messages`` (default: keep the standard roles);
    * ``transform_context(messages, signal) -> messages | None``, called before conversion;
    * ``get_api_key(provider) -> key | None``, called before every model request;
    * ``should_stop_after_turn(ShouldStopAfterTurnContext) -> bool``;
    * ``prepare_next_turn(PrepareNextTurnContext) -> AgentLoopTurnUpdate | None``;
    * ``get_steering_messages() -> list`` and ``get_follow_up_messages() -> list``;
    * ``before_tool_call(BeforeToolCallContext, signal) -> BeforeToolCallResult | None``;
    * ``after_tool_call(AfterToolCallContext, signal) -> AfterToolCallResult | list | None`` (a
      list: pluggy's answer, applied in order).

    The stream options are the fields of :class:`~agentcore.options.StreamOptions` (this class
    extends it), given as keywords (``AgentLoopConfig(model, temperature=0.2)``) and/or as one
    value (``options=StreamOptions(...)``; keywords win). Options that are not None are passed to
    the stream function as keyword arguments. An unknown keyword is a TypeError naming it; a
    ``tool_execution`` other than "parallel" or "sequential" is a ValueError (a typo would
    otherwise run a batch meant to be sequential in parallel).
    """

    model: Model  # type: ignore[misc]  # init=False: __init__ sets every field
    convert_to_llm: Optional[Callable[[List[Any]], List[Any]]]  # type: ignore[misc]
    transform_context: Optional[Callable[[List[Any], AbortSignal], Optional[List[Any]]]]  # type: ignore[misc]
    get_api_key: Optional[Callable[[str], Optional[str]]]  # type: ignore[misc]
    should_stop_after_turn: Optional[Callable[[Any], bool]]  # type: ignore[misc]
    prepare_next_turn: Optional[Callable[[Any], Any]]  # type: ignore[misc]
    get_steering_messages: Optional[Callable[[], List[Any]]]  # type: ignore[misc]
    get_follow_up_messages: Optional[Callable[[], List[Any]]]  # type: ignore[misc]
    tool_execution: str  # type: ignore[misc]
    before_tool_call: Optional[Callable[[Any, AbortSignal], Any]]  # type: ignore[misc]
    after_tool_call: Optional[Callable[[Any, AbortSignal], Any]]  # type: ignore[misc]
    api_key: Optional[str] = field(repr=False)  # type: ignore[misc]

    def __init__(
        self,
        model: Model,
        convert_to_llm: Optional[Callable[[List[Any]], List[Any]]] = None,
        transform_context: Optional[Callable[[List[Any], AbortSignal], Optional[List[Any]]]] = None,
        get_api_key: Optional[Callable[[str], Optional[str]]] = None,
        should_stop_after_turn: Optional[Callable[[Any], bool]] = None,
        prepare_next_turn: Optional[Callable[[Any], Any]] = None,
        get_steering_messages: Optional[Callable[[], List[Any]]] = None,
        get_follow_up_messages: Optional[Callable[[], List[Any]]] = None,
        tool_execution: str = "parallel",
        before_tool_call: Optional[Callable[[Any, AbortSignal], Any]] = None,
        after_tool_call: Optional[Callable[[Any, AbortSignal], Any]] = None,
        api_key: Optional[str] = None,
        *,
        options: Optional[StreamOptions] = None,
        **stream_options: Any,
    ) -> None:
        fields, extra = split_names(stream_options, "AgentLoopConfig()", installed_provider_options)
        self.model = model
        self.convert_to_llm = convert_to_llm
        self.transform_context = transform_context
        self.get_api_key = get_api_key
        self.should_stop_after_turn = should_stop_after_turn
        self.prepare_next_turn = prepare_next_turn
        self.get_steering_messages = get_steering_messages
        self.get_follow_up_messages = get_follow_up_messages
        self.tool_execution = check_tool_execution(tool_execution)
        self.before_tool_call = before_tool_call
        self.after_tool_call = after_tool_call
        check_api_key(api_key, "AgentLoopConfig()")
        self.api_key = api_key
        values = dict.fromkeys(OPTION_NAMES) if options is None else dict(options.__dict__)
        values.update((k, v) for k, v in fields.items() if v is not None)
        if extra:  # names a provider declares (region=...): merged into provider_options
            values["provider_options"] = merge_provider_options(values.get("provider_options"), extra)
        self.__dict__.update(values)

    @property
    def stream_options(self) -> StreamOptions:
        """The stream options of this config as one value (a new :class:`StreamOptions`)."""
        return StreamOptions(**{name: getattr(self, name) for name in OPTION_NAMES})


#: The names of the stream options (kept for callers of the old tuple).
STREAM_OPTIONS = OPTION_NAMES


@dataclass
class BeforeToolCallContext:
    """What ``before_tool_call`` sees: ``args`` is the validated copy ``execute`` will receive."""

    assistant_message: AssistantMessage
    tool_call: ToolCall
    args: Any
    context: AgentContext


@dataclass
class BeforeToolCallResult:
    """``block=True`` skips the call with an error result (``reason`` or a default text);
    ``terminate`` is honoured only together with ``block``."""

    block: bool = False
    reason: Optional[str] = None
    terminate: Optional[bool] = None


@dataclass
class AfterToolCallContext:
    """What ``after_tool_call`` sees: the executed ``result`` before any override."""

    assistant_message: AssistantMessage
    tool_call: ToolCall
    args: Any
    result: AgentToolResult
    is_error: bool
    context: AgentContext


@dataclass
class AfterToolCallResult:
    """A partial override: every field that is not None replaces the executed value (no deep merge)."""

    content: Optional[List[Any]] = None
    details: Any = None
    is_error: Optional[bool] = None
    usage: Any = None
    terminate: Optional[bool] = None


_OVERRIDE_FIELDS = ("content", "details", "usage", "terminate", "is_error")
_VERDICT_FIELDS = ("block", "reason", "terminate")


def _check_keys(value: Any, hook: str, allowed: Tuple[str, ...], kind: str) -> None:
    """TypeError naming the keys of a mapping ``value`` that are none of ``allowed``: a misspelt
    key (``"blocked"``, the reference's ``"isError"``) would otherwise be ignored without a word."""
    if isinstance(value, Mapping):
        unknown = [key for key in value if key not in allowed]
        if unknown:
            raise TypeError(
                f"{hook} returned a mapping with the unknown key(s) {', '.join(map(repr, unknown))}: "
                f"{kind} has {', '.join(allowed)}"
            )


def check_verdict(verdict: Any) -> Any:
    """``verdict``, what ``before_tool_call`` returned, when it is None, a mapping of
    :class:`BeforeToolCallResult` keys or an object with ``block``. TypeError naming the problem
    otherwise (the type, never the value): the loop then makes the call an error result instead of
    running a call the hook may have meant to block (``{"blocked": True}``, ``True``)."""
    if verdict is None:
        return None
    if isinstance(verdict, Mapping):
        _check_keys(verdict, "before_tool_call", _VERDICT_FIELDS, "a verdict")
    elif not hasattr(verdict, "block"):
        raise TypeError(
            f"before_tool_call returned a {type(verdict).__name__}, not a BeforeToolCallResult, a dict or None"
        )
    return verdict


def merge_after_tool_call(overrides: Any) -> Any:
    """One override from pluggy's list of ``after_tool_call`` results (call order).

    Fields that are not None apply in order, so for a field set by several implementations the
    last one called wins. Returns an override of the type of the last one that set something (a
    dict stays a dict) when that type can hold every field set, else an
    :class:`AfterToolCallResult`; None when nothing was overridden. A single override passes
    unchanged. TypeError naming the keys when a mapping override has a key that is none of
    the override's fields (the loop turns it into the call's error result).
    """
    if not isinstance(overrides, (list, tuple)):
        _check_keys(overrides, "after_tool_call", _OVERRIDE_FIELDS, "an override")
        return overrides
    combined: Dict[str, Any] = {}
    last: Any = None
    for override in overrides:
        _check_keys(override, "after_tool_call", _OVERRIDE_FIELDS, "an override")
        fields = {n: field_of(override, n) for n in _OVERRIDE_FIELDS if field_of(override, n) is not None}
        if fields:
            combined.update(fields)
            last = override
    if last is None:
        return None
    if isinstance(last, Mapping):
        return {**last, **combined}
    if dataclasses.is_dataclass(last) and combined.keys() <= {f.name for f in dataclasses.fields(last) if f.init}:
        return dataclasses.replace(last, **combined)  # type: ignore[type-var]
    # an AgentToolResult has no is_error, an object of its own no replace(): keep every field set
    return AfterToolCallResult(**combined)


@dataclass
class ShouldStopAfterTurnContext:
    """The finished turn: its assistant ``message``, its ``tool_results`` (source order), the
    working ``context`` (results already appended) and ``new_messages`` of the run so far."""

    message: AssistantMessage
    tool_results: List[ToolResultMessage]
    context: AgentContext
    new_messages: List[Any]


@dataclass
class PrepareNextTurnContext(ShouldStopAfterTurnContext):
    """Same shape as :class:`ShouldStopAfterTurnContext`."""


@dataclass
class AgentLoopTurnUpdate:
    """Returned by ``prepare_next_turn`` to change the next request of this run. None keeps a field;
    ``thinking_level="off"`` clears the reasoning option."""

    context: Optional[AgentContext] = None
    model: Optional[Model] = None
    thinking_level: Optional[str] = None


_TURN_UPDATE_FIELDS = ("context", "model", "thinking_level")


def turn_update_parts(update: Any) -> Tuple[Any, Any, Optional[str]]:
    """``(context, model, thinking_level)`` of a ``prepare_next_turn`` answer that is not None,
    each None when not given. TypeError (ValueError for an unknown thinking level) naming the
    problem when ``update`` is no update (a ``Model`` or an ``AgentContext`` returned as the update
    itself, a mapping with another key: ignored without a word before) or holds something the next
    request cannot use (a context without a list of messages, a model name instead of a Model)."""
    if isinstance(update, Mapping):
        _check_keys(update, "prepare_next_turn", _TURN_UPDATE_FIELDS, "an update")
    elif not any(hasattr(update, name) for name in _TURN_UPDATE_FIELDS):
        kind = type(update).__name__
        hint = {"Model": "model", "AgentContext": "context"}.get(kind)
        advice = f" (to switch to it, return AgentLoopTurnUpdate({hint}=...))" if hint else ""
        raise TypeError(
            f"prepare_next_turn returned a {kind}, not an AgentLoopTurnUpdate (or a mapping of its fields "
            f"{', '.join(_TURN_UPDATE_FIELDS)}) or None{advice}"
        )
    context, model, level = field_of(update, "context"), field_of(update, "model"), field_of(update, "thinking_level")
    if context is not None and not isinstance(getattr(context, "messages", None), list):
        raise TypeError(
            f"prepare_next_turn returned a context that is a {type(context).__name__}, "
            "not an AgentContext (with a list of messages)"
        )
    if model is not None and not all(hasattr(model, name) for name in ("id", "api", "provider")):
        hint = " (look a 'provider/id' name up with agentcore.get_model())" if isinstance(model, str) else ""
        raise TypeError(f"prepare_next_turn returned a model that is a {type(model).__name__}, not a Model{hint}")
    if level is not None and str(level) not in _THINKING_LEVELS:
        raise ValueError(
            f"prepare_next_turn returned the thinking_level {level!r}: give one of {', '.join(_THINKING_LEVELS)}"
        )
    return context, model, None if level is None else str(level)


def switch_model(config: Any, model: Any, thinking_level: Optional[str]) -> None:
    """Set a turn update's ``model`` and ``thinking_level`` (checked by :func:`turn_update_parts`;
    None: unchanged) on a run's ``config``, as the next request uses them."""
    if model is not None:
        config.model = model
    if thinking_level is not None:
        config.reasoning = None if thinking_level == "off" else thinking_level


_THINKING_LEVELS = tuple(level.value for level in ThinkingLevel)


@dataclass
class ToolBatchResult:
    """The tool-result messages of one batch (source order), whether the batch terminates, and
    the calls that wait for approval instead of running (``PendingApproval`` items)."""

    messages: List[ToolResultMessage]
    terminate: bool
    awaiting: List[Any] = field(default_factory=list)

"""Events: the ten agent events a run emits and the stream events a provider produces.

Every event is a dataclass with ``.type`` holding the reference string (``"agent_start"``,
``"text_delta"`` ...). ``event_to_dict()`` gives a JSON-ready dict (used by ``agentcore run --json``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Dict, List, Literal, Optional, Set

from ._safe import json_safe
from .types import AssistantMessage, ToolCall

if TYPE_CHECKING:
    from .tools import AgentToolResult
    from .types import ToolResultMessage

__all__ = [
    # agent events
    "AgentEvent",
    "AgentStartEvent",
    "AgentEndEvent",
    "TurnStartEvent",
    "TurnEndEvent",
    "MessageStartEvent",
    "MessageUpdateEvent",
    "MessageEndEvent",
    "ToolExecutionStartEvent",
    "ToolExecutionUpdateEvent",
    "ToolExecutionEndEvent",
    "ToolApprovalRequestEvent",
    # provider stream events
    "AssistantMessageEvent",
    "StartEvent",
    "TextStartEvent",
    "TextDeltaEvent",
    "TextEndEvent",
    "ThinkingStartEvent",
    "ThinkingDeltaEvent",
    "ThinkingEndEvent",
    "ToolCallStartEvent",
    "ToolCallDeltaEvent",
    "ToolCallEndEvent",
    "DoneEvent",
    "ErrorEvent",
    "GenericStreamEvent",
    "TERMINAL_STREAM_EVENTS",
    "event_to_dict",
]


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def event_to_dict(event: Any) -> Dict[str, Any]:
    """A JSON-ready dict of any event: ``type`` plus camelCase payload keys.

    Values JSON cannot hold (NaN, bytes, sets, arbitrary objects in a tool result) are given in
    their JSON-safe form (:func:`agentcore._safe.json_safe`), so ``json.dumps(..., allow_nan=False)``
    of the result never fails."""
    return json_safe(_event_fields(event, set()))


def _event_fields(event: Any, active: Set[int]) -> Dict[str, Any]:
    out: Dict[str, Any] = {"type": event.type}
    for f in fields(event):
        if f.name == "type":
            continue
        out[_camel(f.name)] = _event_value(getattr(event, f.name), active)
    return out


def _event_value(value: Any, active: Set[int]) -> Any:
    """The plain form of a field: dataclasses without ``to_dict`` (a nested stream event, a tool
    result) as dicts, lists item by item, messages and blocks by ``to_dict``. Anything else (a dict
    of tool details, an odd object) is left to ``json_safe``, which also marks reference cycles;
    ``active`` holds the containers being converted, so a cycle through them ends as ``"<cycle>"``."""
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    container = isinstance(value, (list, tuple)) or (is_dataclass(value) and not isinstance(value, type))
    if container and not hasattr(value, "to_dict"):
        marker = id(value)
        if marker in active:
            return "<cycle>"
        active.add(marker)
        try:
            if isinstance(value, (list, tuple)):
                return [_event_value(v, active) for v in value]
            if hasattr(value, "type"):
                return _event_fields(value, active)
            return {_camel(f.name): _event_value(getattr(value, f.name), active) for f in fields(value)}
        finally:
            active.discard(marker)
    if hasattr(value, "_wire"):  # a message or block: its JSON shape
        try:
            return value.to_dict()
        except RecursionError:  # a reference cycle in a field (tool details, tool-call arguments)
            return _raw_fields(value, active)
    return value


def _raw_fields(value: Any, active: Set[int]) -> Any:
    """The JSON shape of a message or block whose ``to_dict`` met a reference cycle: its keys with
    each value converted like a field, so nested blocks keep their shape (a tool call stays a
    ``toolCall`` block) and only the cycle itself ends as ``"<cycle>"`` (marked by ``json_safe``
    inside plain dicts and lists)."""
    marker = id(value)
    if marker in active:
        return "<cycle>"
    active.add(marker)
    try:
        return {key: _event_value(item, active) for key, item in value._raw_dict().items()}
    finally:
        active.discard(marker)


# --------------------------------------------------------------------------- agent events


class AgentEvent:
    """Base class of the agent events."""

    type: ClassVar[str] = ""


@dataclass
class AgentStartEvent(AgentEvent):
    type: ClassVar[Literal["agent_start"]] = "agent_start"


@dataclass
class AgentEndEvent(AgentEvent):
    messages: List[Any] = field(default_factory=list)
    type: ClassVar[Literal["agent_end"]] = "agent_end"


@dataclass
class TurnStartEvent(AgentEvent):
    type: ClassVar[Literal["turn_start"]] = "turn_start"


@dataclass
class TurnEndEvent(AgentEvent):
    message: Optional[AssistantMessage] = None
    tool_results: List[ToolResultMessage] = field(default_factory=list)
    type: ClassVar[Literal["turn_end"]] = "turn_end"


@dataclass
class MessageStartEvent(AgentEvent):
    message: Any = None
    type: ClassVar[Literal["message_start"]] = "message_start"


@dataclass
class MessageUpdateEvent(AgentEvent):
    message: Optional[AssistantMessage] = None  # the response so far
    assistant_message_event: Optional[AssistantMessageEvent] = None  # the provider event behind it
    type: ClassVar[Literal["message_update"]] = "message_update"


@dataclass
class MessageEndEvent(AgentEvent):
    message: Any = None
    type: ClassVar[Literal["message_end"]] = "message_end"


@dataclass
class ToolExecutionStartEvent(AgentEvent):
    tool_call_id: str = ""
    tool_name: str = ""
    args: Any = None
    type: ClassVar[Literal["tool_execution_start"]] = "tool_execution_start"


@dataclass
class ToolExecutionUpdateEvent(AgentEvent):
    tool_call_id: str = ""
    tool_name: str = ""
    args: Any = None
    partial_result: Optional[AgentToolResult] = None
    type: ClassVar[Literal["tool_execution_update"]] = "tool_execution_update"


@dataclass
class ToolExecutionEndEvent(AgentEvent):
    tool_call_id: str = ""
    tool_name: str = ""
    result: Optional[AgentToolResult] = None
    is_error: bool = False
    type: ClassVar[Literal["tool_execution_end"]] = "tool_execution_end"


@dataclass
class ToolApprovalRequestEvent(AgentEvent):
    """A tool call waits for a human decision (its tool has ``requires_approval``).

    Emitted on the run thread during the batch's preflight, once per such call, instead of
    ``tool_execution_start``: the call is not executed. The run then settles with the call listed
    in ``agent.pending_approvals``; ``agent.approve``/``agent.deny`` and ``agent.continue_()``
    resume it. ``args`` are the validated arguments."""

    tool_call_id: str = ""
    tool_name: str = ""
    args: Any = None
    type: ClassVar[Literal["tool_approval_request"]] = "tool_approval_request"


# --------------------------------------------------------------------------- provider stream events


class AssistantMessageEvent:
    """Base class of provider stream events. ``partial`` is the response so far."""

    type: ClassVar[str] = ""


@dataclass
class StartEvent(AssistantMessageEvent):
    partial: AssistantMessage
    type: ClassVar[Literal["start"]] = "start"


@dataclass
class TextStartEvent(AssistantMessageEvent):
    content_index: int
    partial: AssistantMessage
    type: ClassVar[Literal["text_start"]] = "text_start"


@dataclass
class TextDeltaEvent(AssistantMessageEvent):
    content_index: int
    delta: str
    partial: AssistantMessage
    type: ClassVar[Literal["text_delta"]] = "text_delta"


@dataclass
class TextEndEvent(AssistantMessageEvent):
    content_index: int
    content: str
    partial: AssistantMessage
    type: ClassVar[Literal["text_end"]] = "text_end"


@dataclass
class ThinkingStartEvent(AssistantMessageEvent):
    content_index: int
    partial: AssistantMessage
    type: ClassVar[Literal["thinking_start"]] = "thinking_start"


@dataclass
class ThinkingDeltaEvent(AssistantMessageEvent):
    content_index: int
    delta: str
    partial: AssistantMessage
    type: ClassVar[Literal["thinking_delta"]] = "thinking_delta"


@dataclass
class ThinkingEndEvent(AssistantMessageEvent):
    content_index: int
    content: str
    partial: AssistantMessage
    type: ClassVar[Literal["thinking_end"]] = "thinking_end"


@dataclass
class ToolCallStartEvent(AssistantMessageEvent):
    content_index: int
    partial: AssistantMessage
    type: ClassVar[Literal["toolcall_start"]] = "toolcall_start"


@dataclass
class ToolCallDeltaEvent(AssistantMessageEvent):
    content_index: int
    delta: str
    partial: AssistantMessage
    type: ClassVar[Literal["toolcall_delta"]] = "toolcall_delta"


@dataclass
class ToolCallEndEvent(AssistantMessageEvent):
    content_index: int
    tool_call: ToolCall
    partial: AssistantMessage
    type: ClassVar[Literal["toolcall_end"]] = "toolcall_end"


@dataclass
class DoneEvent(AssistantMessageEvent):
    """Terminal: the response finished with ``reason`` in stop/length/toolUse."""

    reason: str
    message: AssistantMessage
    type: ClassVar[Literal["done"]] = "done"


@dataclass
class ErrorEvent(AssistantMessageEvent):
    """Terminal: the response failed; ``error`` is the final message with ``error_message`` set."""

    reason: str
    error: AssistantMessage
    type: ClassVar[Literal["error"]] = "error"


@dataclass
class GenericStreamEvent(AssistantMessageEvent):
    """Any other intermediate event (e.g. ``final_answer_delta``); the loop forwards it as-is."""

    event_type: str
    partial: Optional[AssistantMessage] = None
    content_index: Optional[int] = None
    delta: Optional[str] = None
    data: Dict[str, Any] = field(default_factory=dict)

    @property
    def type(self) -> str:  # type: ignore[override]  # noqa: A003
        return self.event_type


TERMINAL_STREAM_EVENTS = frozenset({"done", "error"})

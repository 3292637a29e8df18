"""The shapes of the callables an :class:`~agentcore.agent.Agent` takes (type aliases only).

Imported by other modules under ``TYPE_CHECKING`` only: nothing here runs at ``import agentcore``.
Each alias spells out the call forms the agent accepts (it looks at the number of required
positional parameters to pick one), so a type checker rejects a callable of the wrong shape.
"""

from __future__ import annotations

from typing import Any, Callable, List, Mapping, Optional, Union

from ._loop_types import (
    AfterToolCallContext,
    AfterToolCallResult,
    AgentLoopTurnUpdate,
    BeforeToolCallContext,
    BeforeToolCallResult,
    PrepareNextTurnContext,
    ShouldStopAfterTurnContext,
)
from .events import AgentEvent
from .signals import AbortSignal

__all__ = [
    "Listener",
    "BeforeToolCallHook",
    "AfterToolCallHook",
    "TransformContextHook",
    "ShouldStopAfterTurnHook",
    "PrepareNextTurnHook",
    "GetApiKey",
    "ConvertToLlm",
]

#: ``listener(event)`` or ``listener(event, signal)`` (the run's abort signal).
Listener = Union[Callable[[AgentEvent], Any], Callable[[AgentEvent, AbortSignal], Any]]

_BeforeVerdict = Union[BeforeToolCallResult, Mapping[str, Any], None]
#: ``before_tool_call(ctx)`` or ``before_tool_call(ctx, signal)``; a result that blocks is the verdict.
BeforeToolCallHook = Union[
    Callable[[BeforeToolCallContext], _BeforeVerdict], Callable[[BeforeToolCallContext, AbortSignal], _BeforeVerdict]
]

_AfterOverride = Union[AfterToolCallResult, Mapping[str, Any], None]
#: ``after_tool_call(ctx)`` or ``after_tool_call(ctx, signal)``; its result overrides fields.
AfterToolCallHook = Union[
    Callable[[AfterToolCallContext], _AfterOverride], Callable[[AfterToolCallContext, AbortSignal], _AfterOverride]
]

#: ``transform_context(messages, signal)``: change ``messages`` in place, or return a new list.
TransformContextHook = Callable[[List[Any], AbortSignal], Optional[List[Any]]]

#: ``should_stop_after_turn(ctx)`` or ``should_stop_after_turn(ctx, signal)``.
ShouldStopAfterTurnHook = Union[
    Callable[[ShouldStopAfterTurnContext], bool], Callable[[ShouldStopAfterTurnContext, AbortSignal], bool]
]

#: ``prepare_next_turn(ctx, signal)``, or the legacy one-argument ``prepare_next_turn(signal)``.
PrepareNextTurnHook = Union[
    Callable[[PrepareNextTurnContext, AbortSignal], Optional[AgentLoopTurnUpdate]],
    Callable[[AbortSignal], Optional[AgentLoopTurnUpdate]],
]

#: ``get_api_key(provider) -> key | None``, called before every model request.
GetApiKey = Callable[[str], Optional[str]]

#: ``convert_to_llm(messages) -> messages`` (what the model sees).
ConvertToLlm = Callable[[List[Any]], List[Any]]

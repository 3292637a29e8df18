"""agentcore: a synchronous, dependency-light LLM agent runtime.

The public surface is listed in ``__all__`` (sorted by area). Names are resolved lazily from their
modules on first access, so ``import agentcore`` imports neither ``requests`` nor ``jsonschema`` and
never scans entry points.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any, Dict, List

_EXPORTS: Dict[str, List[str]] = {
    # messages and content
    "types": [
        "TextContent", "ThinkingContent", "ImageContent", "ToolCall",
        "UserMessage", "AssistantMessage", "ToolResultMessage", "SystemMessage",
        "BashExecutionMessage", "CompactionSummaryMessage", "BranchSummaryMessage", "CustomMessage",
        "UnknownMessage", "Usage", "UsageCost", "Model", "ModelCost", "AgentContext",
        "ThinkingLevel", "ToolExecutionMode", "QueueMode", "StopReason",
        "message_from_dict", "message_to_dict",
    ],
    "messages": ["convert_to_llm", "default_convert_to_llm", "DROP"],
    # events and streams
    "events": [
        "AgentEvent", "AgentStartEvent", "AgentEndEvent", "TurnStartEvent", "TurnEndEvent",
        "MessageStartEvent", "MessageUpdateEvent", "MessageEndEvent",
        "ToolExecutionStartEvent", "ToolExecutionUpdateEvent", "ToolExecutionEndEvent",
        "ToolApprovalRequestEvent", "event_to_dict",
    ],
    "streams": ["EventStream", "AssistantMessageEventStream"],
    "signals": ["AbortController", "AbortSignal"],
    # tools
    "tools": ["AgentTool", "AgentToolResult", "FunctionTool", "tool", "validate_tool_arguments",
              "ToolValidationError"],
    # the loop and the agent
    "loop": [
        "agent_loop", "agent_loop_continue", "run_agent_loop", "run_agent_loop_continue",
        "AgentLoopConfig", "BeforeToolCallContext", "BeforeToolCallResult",
        "AfterToolCallContext", "AfterToolCallResult", "ShouldStopAfterTurnContext",
        "PrepareNextTurnContext", "AgentLoopTurnUpdate", "set_default_stream_fn", "get_default_stream_fn",
    ],
    "agent": ["Agent", "AgentState", "EventSubscription"],
    "structured": ["OutputValidationError", "AskError"],
    "approvals": ["PendingApproval"],
    # plugins and registries
    "hookspecs": ["hookimpl", "hookspec"],
    "plugins": [
        "plugins_info", "get_tool", "get_provider", "get_model", "models", "create_plugin_manager",
        "AgentHooks", "PluginInfo", "UnknownToolError", "UnknownProviderError", "UnknownModelError",
    ],
    "builtin_tools": ["create_coding_tools", "create_read_only_tools", "PathOutsideRootError"],
    # providers
    "providers": [
        "stream", "complete", "is_context_overflow", "calculate_cost", "MissingApiKeyError",
        "get_env_api_key",
    ],
    # sessions
    "session": [
        "Session", "JsonlSessionStorage", "SqliteSessionStorage", "MemorySessionStorage",
        "SessionRepository", "SessionError", "SessionLockedError", "SessionContext", "SessionStats",
        "attach_session", "restore_agent",
    ],
    "session.urls": ["open_session"],
    # compaction and branch summaries
    "session.compaction_tokens": ["CompactionSettings"],
    "session.compaction": ["CompactionError", "CompactionDecision"],
    "session.branch_summary": ["TreeDecision", "TreePreparation"],
    "session.compactor": ["Compactor", "CompactionStartEvent", "CompactionEndEvent"],
    # notebooks (IPython is imported only when these are used)
    "jupyter": ["display_run", "Transcript"],
}

# The distribution that installs this package (the import name differs: "agentcore" on the package
# index is another project). Version lookups use this name, never "agentcore".
_DISTRIBUTION = "pyagentcore"

if TYPE_CHECKING:  # real types for checkers and IDEs; at run time names resolve lazily below
    from .types import (
        TextContent as TextContent, ThinkingContent as ThinkingContent,
        ImageContent as ImageContent, ToolCall as ToolCall, UserMessage as UserMessage,
        AssistantMessage as AssistantMessage, ToolResultMessage as ToolResultMessage,
        SystemMessage as SystemMessage, BashExecutionMessage as BashExecutionMessage,
        CompactionSummaryMessage as CompactionSummaryMessage,
        BranchSummaryMessage as BranchSummaryMessage, CustomMessage as CustomMessage,
        UnknownMessage as UnknownMessage, Usage as Usage, UsageCost as UsageCost, Model as Model,
        ModelCost as ModelCost, AgentContext as AgentContext, ThinkingLevel as ThinkingLevel,
        ToolExecutionMode as ToolExecutionMode, QueueMode as QueueMode, StopReason as StopReason,
        message_from_dict as message_from_dict, message_to_dict as message_to_dict,
    )
    from .messages import (
        convert_to_llm as convert_to_llm, default_convert_to_llm as default_convert_to_llm,
        DROP as DROP,
    )
    from .events import (
        AgentEvent as AgentEvent, AgentStartEvent as AgentStartEvent,
        AgentEndEvent as AgentEndEvent, TurnStartEvent as TurnStartEvent,
        TurnEndEvent as TurnEndEvent, MessageStartEvent as MessageStartEvent,
        MessageUpdateEvent as MessageUpdateEvent, MessageEndEvent as MessageEndEvent,
        ToolExecutionStartEvent as ToolExecutionStartEvent,
        ToolExecutionUpdateEvent as ToolExecutionUpdateEvent,
        ToolExecutionEndEvent as ToolExecutionEndEvent, event_to_dict as event_to_dict,
        ToolApprovalRequestEvent as ToolApprovalRequestEvent,
    )
    from .streams import (
        EventStream as EventStream, AssistantMessageEventStream as AssistantMessageEventStream,
    )
    from .signals import (
        AbortController as AbortController, AbortSignal as AbortSignal,
    )
    from .tools import (
        AgentTool as AgentTool, AgentToolResult as AgentToolResult, FunctionTool as FunctionTool,
        tool as tool, validate_tool_arguments as validate_tool_arguments,
        ToolValidationError as ToolValidationError,
    )
    from .loop import (
        agent_loop as agent_loop, agent_loop_continue as agent_loop_continue,
        run_agent_loop as run_agent_loop, run_agent_loop_continue as run_agent_loop_continue,
        AgentLoopConfig as AgentLoopConfig, BeforeToolCallContext as BeforeToolCallContext,
        BeforeToolCallResult as BeforeToolCallResult, AfterToolCallContext as AfterToolCallContext,
        AfterToolCallResult as AfterToolCallResult,
        ShouldStopAfterTurnContext as ShouldStopAfterTurnContext,
        PrepareNextTurnContext as PrepareNextTurnContext,
        AgentLoopTurnUpdate as AgentLoopTurnUpdate, set_default_stream_fn as set_default_stream_fn,
        get_default_stream_fn as get_default_stream_fn,
    )
    from .agent import (
        Agent as Agent, AgentState as AgentState, EventSubscription as EventSubscription,
    )
    from .structured import (
        OutputValidationError as OutputValidationError, AskError as AskError,
    )
    from .approvals import (
        PendingApproval as PendingApproval,
    )
    from .hookspecs import (
        hookimpl as hookimpl, hookspec as hookspec,
    )
    from .plugins import (
        plugins_info as plugins_info, get_tool as get_tool, get_provider as get_provider,
        get_model as get_model, models as models, create_plugin_manager as create_plugin_manager,
        AgentHooks as AgentHooks, PluginInfo as PluginInfo, UnknownToolError as UnknownToolError,
        UnknownProviderError as UnknownProviderError, UnknownModelError as UnknownModelError,
    )
    from .builtin_tools import (
        create_coding_tools as create_coding_tools,
        create_read_only_tools as create_read_only_tools,
        PathOutsideRootError as PathOutsideRootError,
    )
    from .providers import (
        stream as stream, complete as complete, is_context_overflow as is_context_overflow,
        calculate_cost as calculate_cost, MissingApiKeyError as MissingApiKeyError,
        get_env_api_key as get_env_api_key,
    )
    from .session import (
        Session as Session, JsonlSessionStorage as JsonlSessionStorage,
        SqliteSessionStorage as SqliteSessionStorage, MemorySessionStorage as MemorySessionStorage,
        SessionRepository as SessionRepository, SessionError as SessionError,
        SessionLockedError as SessionLockedError, SessionContext as SessionContext,
        SessionStats as SessionStats, attach_session as attach_session,
        restore_agent as restore_agent,
    )
    from .session.urls import open_session as open_session
    from .session.compaction_tokens import (
        CompactionSettings as CompactionSettings,
    )
    from .session.compaction import (
        CompactionError as CompactionError, CompactionDecision as CompactionDecision,
    )
    from .session.branch_summary import (
        TreeDecision as TreeDecision, TreePreparation as TreePreparation,
    )
    from .session.compactor import (
        Compactor as Compactor, CompactionStartEvent as CompactionStartEvent,
        CompactionEndEvent as CompactionEndEvent,
    )
    from .jupyter import (
        display_run as display_run, Transcript as Transcript,
    )

    __version__: str

_MODULE_OF: Dict[str, str] = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = [name for names in _EXPORTS.values() for name in names] + ["__version__"]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            value = version(_DISTRIBUTION)
        except PackageNotFoundError:  # running from a source tree that was never installed
            value = "0+unknown"
    else:
        module = _MODULE_OF.get(name)
        if module is None:
            raise AttributeError(f"module 'agentcore' has no attribute {name!r}")
        value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(__all__))

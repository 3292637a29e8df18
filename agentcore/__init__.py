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
        "TextContent",
        "ThinkingContent",
        "ImageContent",
        "ToolCall",
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
        "SystemMessage",
        "BashExecutionMessage",
        "CompactionSummaryMessage",
        "BranchSummaryMessage",
        "CustomMessage",
        "UnknownMessage",
        "Usage",
        "UsageCost",
        "Model",
        "ModelCost",
        "AgentContext",
        "ThinkingLevel",
        "ToolExecutionMode",
        "QueueMode",
        "StopReason",
        "message_from_dict",
        "message_to_dict",
    ],
    "messages": ["convert_to_llm", "default_convert_to_llm", "DROP"],
    # events and streams
    "events": [
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
        "event_to_dict",
    ],
    "streams": ["EventStream", "AssistantMessageEventStream"],
    "signals": ["AbortController", "AbortSignal"],
    # tools
    "tools": ["AgentTool", "AgentToolResult", "FunctionTool", "tool", "validate_tool_arguments", "ToolValidationError"],
    # the loop and the agent
    "loop": [
        "agent_loop",
        "agent_loop_continue",
        "run_agent_loop",
        "run_agent_loop_continue",
        "AgentLoopConfig",
        "BeforeToolCallContext",
        "BeforeToolCallResult",
        "AfterToolCallContext",
        "AfterToolCallResult",
        "ShouldStopAfterTurnContext",
        "PrepareNextTurnContext",
        "AgentLoopTurnUpdate",
        "set_default_stream_fn",
        "get_default_stream_fn",
    ],
    "agent": ["Agent", "AgentState", "EventSubscription"],
    "structured": ["OutputValidationError", "AskError"],
    "approvals": ["PendingApproval"],
    # many agents (recipes that travel to threads, processes or a Dask cluster)
    "many": ["AgentSpec", "AgentTask", "TaskResult", "run_many"],
    # plugins and registries
    "hookspecs": ["hookimpl", "hookspec"],
    "plugins": [
        "plugins_info",
        "get_tool",
        "get_provider",
        "get_model",
        "models",
        "create_plugin_manager",
        "AgentHooks",
        "PluginInfo",
        "UnknownToolError",
        "UnknownProviderError",
        "UnknownModelError",
    ],
    "builtin_tools": ["create_coding_tools", "create_read_only_tools", "PathOutsideRootError"],
    # providers
    "providers": [
        "stream",
        "complete",
        "is_context_overflow",
        "calculate_cost",
        "MissingApiKeyError",
        "get_env_api_key",
    ],
    # sessions
    "session": [
        "Session",
        "JsonlSessionStorage",
        "SqliteSessionStorage",
        "MemorySessionStorage",
        "SessionRepository",
        "SessionError",
        "SessionLockedError",
        "SessionContext",
        "SessionStats",
        "attach_session",
        "restore_agent",
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
    from .agent import (
        Agent as Agent,
    )
    from .agent import (
        AgentState as AgentState,
    )
    from .agent import (
        EventSubscription as EventSubscription,
    )
    from .approvals import (
        PendingApproval as PendingApproval,
    )
    from .builtin_tools import (
        PathOutsideRootError as PathOutsideRootError,
    )
    from .builtin_tools import (
        create_coding_tools as create_coding_tools,
    )
    from .builtin_tools import (
        create_read_only_tools as create_read_only_tools,
    )
    from .events import (
        AgentEndEvent as AgentEndEvent,
    )
    from .events import (
        AgentEvent as AgentEvent,
    )
    from .events import (
        AgentStartEvent as AgentStartEvent,
    )
    from .events import (
        MessageEndEvent as MessageEndEvent,
    )
    from .events import (
        MessageStartEvent as MessageStartEvent,
    )
    from .events import (
        MessageUpdateEvent as MessageUpdateEvent,
    )
    from .events import (
        ToolApprovalRequestEvent as ToolApprovalRequestEvent,
    )
    from .events import (
        ToolExecutionEndEvent as ToolExecutionEndEvent,
    )
    from .events import (
        ToolExecutionStartEvent as ToolExecutionStartEvent,
    )
    from .events import (
        ToolExecutionUpdateEvent as ToolExecutionUpdateEvent,
    )
    from .events import (
        TurnEndEvent as TurnEndEvent,
    )
    from .events import (
        TurnStartEvent as TurnStartEvent,
    )
    from .events import (
        event_to_dict as event_to_dict,
    )
    from .hookspecs import (
        hookimpl as hookimpl,
    )
    from .hookspecs import (
        hookspec as hookspec,
    )
    from .jupyter import (
        Transcript as Transcript,
    )
    from .jupyter import (
        display_run as display_run,
    )
    from .loop import (
        AfterToolCallContext as AfterToolCallContext,
    )
    from .loop import (
        AfterToolCallResult as AfterToolCallResult,
    )
    from .loop import (
        AgentLoopConfig as AgentLoopConfig,
    )
    from .loop import (
        AgentLoopTurnUpdate as AgentLoopTurnUpdate,
    )
    from .loop import (
        BeforeToolCallContext as BeforeToolCallContext,
    )
    from .loop import (
        BeforeToolCallResult as BeforeToolCallResult,
    )
    from .loop import (
        PrepareNextTurnContext as PrepareNextTurnContext,
    )
    from .loop import (
        ShouldStopAfterTurnContext as ShouldStopAfterTurnContext,
    )
    from .loop import (
        agent_loop as agent_loop,
    )
    from .loop import (
        agent_loop_continue as agent_loop_continue,
    )
    from .loop import (
        get_default_stream_fn as get_default_stream_fn,
    )
    from .loop import (
        run_agent_loop as run_agent_loop,
    )
    from .loop import (
        run_agent_loop_continue as run_agent_loop_continue,
    )
    from .loop import (
        set_default_stream_fn as set_default_stream_fn,
    )
    from .many import (
        AgentSpec as AgentSpec,
    )
    from .many import (
        AgentTask as AgentTask,
    )
    from .many import (
        TaskResult as TaskResult,
    )
    from .many import (
        run_many as run_many,
    )
    from .messages import (
        DROP as DROP,
    )
    from .messages import (
        convert_to_llm as convert_to_llm,
    )
    from .messages import (
        default_convert_to_llm as default_convert_to_llm,
    )
    from .plugins import (
        AgentHooks as AgentHooks,
    )
    from .plugins import (
        PluginInfo as PluginInfo,
    )
    from .plugins import (
        UnknownModelError as UnknownModelError,
    )
    from .plugins import (
        UnknownProviderError as UnknownProviderError,
    )
    from .plugins import (
        UnknownToolError as UnknownToolError,
    )
    from .plugins import (
        create_plugin_manager as create_plugin_manager,
    )
    from .plugins import (
        get_model as get_model,
    )
    from .plugins import (
        get_provider as get_provider,
    )
    from .plugins import (
        get_tool as get_tool,
    )
    from .plugins import (
        models as models,
    )
    from .plugins import (
        plugins_info as plugins_info,
    )
    from .providers import (
        MissingApiKeyError as MissingApiKeyError,
    )
    from .providers import (
        calculate_cost as calculate_cost,
    )
    from .providers import (
        complete as complete,
    )
    from .providers import (
        get_env_api_key as get_env_api_key,
    )
    from .providers import (
        is_context_overflow as is_context_overflow,
    )
    from .providers import (
        stream as stream,
    )
    from .session import (
        JsonlSessionStorage as JsonlSessionStorage,
    )
    from .session import (
        MemorySessionStorage as MemorySessionStorage,
    )
    from .session import (
        Session as Session,
    )
    from .session import (
        SessionContext as SessionContext,
    )
    from .session import (
        SessionError as SessionError,
    )
    from .session import (
        SessionLockedError as SessionLockedError,
    )
    from .session import (
        SessionRepository as SessionRepository,
    )
    from .session import (
        SessionStats as SessionStats,
    )
    from .session import (
        SqliteSessionStorage as SqliteSessionStorage,
    )
    from .session import (
        attach_session as attach_session,
    )
    from .session import (
        restore_agent as restore_agent,
    )
    from .session.branch_summary import (
        TreeDecision as TreeDecision,
    )
    from .session.branch_summary import (
        TreePreparation as TreePreparation,
    )
    from .session.compaction import (
        CompactionDecision as CompactionDecision,
    )
    from .session.compaction import (
        CompactionError as CompactionError,
    )
    from .session.compaction_tokens import (
        CompactionSettings as CompactionSettings,
    )
    from .session.compactor import (
        CompactionEndEvent as CompactionEndEvent,
    )
    from .session.compactor import (
        CompactionStartEvent as CompactionStartEvent,
    )
    from .session.compactor import (
        Compactor as Compactor,
    )
    from .session.urls import open_session as open_session
    from .signals import (
        AbortController as AbortController,
    )
    from .signals import (
        AbortSignal as AbortSignal,
    )
    from .streams import (
        AssistantMessageEventStream as AssistantMessageEventStream,
    )
    from .streams import (
        EventStream as EventStream,
    )
    from .structured import (
        AskError as AskError,
    )
    from .structured import (
        OutputValidationError as OutputValidationError,
    )
    from .tools import (
        AgentTool as AgentTool,
    )
    from .tools import (
        AgentToolResult as AgentToolResult,
    )
    from .tools import (
        FunctionTool as FunctionTool,
    )
    from .tools import (
        ToolValidationError as ToolValidationError,
    )
    from .tools import (
        tool as tool,
    )
    from .tools import (
        validate_tool_arguments as validate_tool_arguments,
    )
    from .types import (
        AgentContext as AgentContext,
    )
    from .types import (
        AssistantMessage as AssistantMessage,
    )
    from .types import (
        BashExecutionMessage as BashExecutionMessage,
    )
    from .types import (
        BranchSummaryMessage as BranchSummaryMessage,
    )
    from .types import (
        CompactionSummaryMessage as CompactionSummaryMessage,
    )
    from .types import (
        CustomMessage as CustomMessage,
    )
    from .types import (
        ImageContent as ImageContent,
    )
    from .types import (
        Model as Model,
    )
    from .types import (
        ModelCost as ModelCost,
    )
    from .types import (
        QueueMode as QueueMode,
    )
    from .types import (
        StopReason as StopReason,
    )
    from .types import (
        SystemMessage as SystemMessage,
    )
    from .types import (
        TextContent as TextContent,
    )
    from .types import (
        ThinkingContent as ThinkingContent,
    )
    from .types import (
        ThinkingLevel as ThinkingLevel,
    )
    from .types import (
        ToolCall as ToolCall,
    )
    from .types import (
        ToolExecutionMode as ToolExecutionMode,
    )
    from .types import (
        ToolResultMessage as ToolResultMessage,
    )
    from .types import (
        UnknownMessage as UnknownMessage,
    )
    from .types import (
        Usage as Usage,
    )
    from .types import (
        UsageCost as UsageCost,
    )
    from .types import (
        UserMessage as UserMessage,
    )
    from .types import (
        message_from_dict as message_from_dict,
    )
    from .types import (
        message_to_dict as message_to_dict,
    )

    __version__: str

_MODULE_OF: Dict[str, str] = {name: module for module, names in _EXPORTS.items() for name in names}

# Spelled out (the same names, in the same order, as _EXPORTS gives): mypy and pyright read only a
# literal __all__, and `from agentcore import *` would define nothing for mypy without one.
__all__ = [
    # types
    "TextContent",
    "ThinkingContent",
    "ImageContent",
    "ToolCall",
    "UserMessage",
    "AssistantMessage",
    "ToolResultMessage",
    "SystemMessage",
    "BashExecutionMessage",
    "CompactionSummaryMessage",
    "BranchSummaryMessage",
    "CustomMessage",
    "UnknownMessage",
    "Usage",
    "UsageCost",
    "Model",
    "ModelCost",
    "AgentContext",
    "ThinkingLevel",
    "ToolExecutionMode",
    "QueueMode",
    "StopReason",
    "message_from_dict",
    "message_to_dict",
    # messages
    "convert_to_llm",
    "default_convert_to_llm",
    "DROP",
    # events
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
    "event_to_dict",
    # streams
    "EventStream",
    "AssistantMessageEventStream",
    # signals
    "AbortController",
    "AbortSignal",
    # tools
    "AgentTool",
    "AgentToolResult",
    "FunctionTool",
    "tool",
    "validate_tool_arguments",
    "ToolValidationError",
    # loop
    "agent_loop",
    "agent_loop_continue",
    "run_agent_loop",
    "run_agent_loop_continue",
    "AgentLoopConfig",
    "BeforeToolCallContext",
    "BeforeToolCallResult",
    "AfterToolCallContext",
    "AfterToolCallResult",
    "ShouldStopAfterTurnContext",
    "PrepareNextTurnContext",
    "AgentLoopTurnUpdate",
    "set_default_stream_fn",
    "get_default_stream_fn",
    # agent
    "Agent",
    "AgentState",
    "EventSubscription",
    # structured
    "OutputValidationError",
    "AskError",
    # approvals
    "PendingApproval",
    # many
    "AgentSpec",
    "AgentTask",
    "TaskResult",
    "run_many",
    # hookspecs
    "hookimpl",
    "hookspec",
    # plugins
    "plugins_info",
    "get_tool",
    "get_provider",
    "get_model",
    "models",
    "create_plugin_manager",
    "AgentHooks",
    "PluginInfo",
    "UnknownToolError",
    "UnknownProviderError",
    "UnknownModelError",
    # builtin_tools
    "create_coding_tools",
    "create_read_only_tools",
    "PathOutsideRootError",
    # providers
    "stream",
    "complete",
    "is_context_overflow",
    "calculate_cost",
    "MissingApiKeyError",
    "get_env_api_key",
    # session
    "Session",
    "JsonlSessionStorage",
    "SqliteSessionStorage",
    "MemorySessionStorage",
    "SessionRepository",
    "SessionError",
    "SessionLockedError",
    "SessionContext",
    "SessionStats",
    "attach_session",
    "restore_agent",
    # session.urls
    "open_session",
    # session.compaction_tokens
    "CompactionSettings",
    # session.compaction
    "CompactionError",
    "CompactionDecision",
    # session.branch_summary
    "TreeDecision",
    "TreePreparation",
    # session.compactor
    "Compactor",
    "CompactionStartEvent",
    "CompactionEndEvent",
    # jupyter
    "display_run",
    "Transcript",
    "__version__",
]


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

"""agentcore: a synchronous, dependency-light LLM agent runtime.

The public surface is listed in ``__all__`` (sorted by area). Names are resolved lazily from their
modules on first access, so ``import agentcore`` imports neither ``requests`` nor ``jsonschema`` and
never scans entry points.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any, Dict, List

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
        "event_to_dict",
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

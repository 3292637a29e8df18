"""The public surface: ``agentcore.__all__`` is exactly the documented list, and importing is light.

STYLE.md: a test guards ``__all__`` so nothing leaks and nothing disappears by accident.
"""

from __future__ import annotations

import subprocess
import sys

import agentcore

DOCUMENTED = {
    # messages and content (DESIGN §3)
    "TextContent", "ThinkingContent", "ImageContent", "ToolCall", "UserMessage", "AssistantMessage",
    "ToolResultMessage", "SystemMessage", "BashExecutionMessage", "CompactionSummaryMessage",
    "BranchSummaryMessage", "CustomMessage", "UnknownMessage", "Usage", "UsageCost", "Model", "ModelCost",
    "AgentContext", "ThinkingLevel", "ToolExecutionMode", "QueueMode", "StopReason", "message_from_dict",
    "message_to_dict", "convert_to_llm", "default_convert_to_llm", "DROP",
    # events, streams, signals
    "AgentEvent", "AgentStartEvent", "AgentEndEvent", "TurnStartEvent", "TurnEndEvent", "MessageStartEvent",
    "MessageUpdateEvent", "MessageEndEvent", "ToolExecutionStartEvent", "ToolExecutionUpdateEvent",
    "ToolExecutionEndEvent", "event_to_dict", "EventStream", "AssistantMessageEventStream",
    "AbortController", "AbortSignal",
    # tools
    "AgentTool", "AgentToolResult", "FunctionTool", "tool", "validate_tool_arguments", "ToolValidationError",
    "create_coding_tools", "create_read_only_tools", "PathOutsideRootError",
    # loop and agent
    "agent_loop", "agent_loop_continue", "run_agent_loop", "run_agent_loop_continue", "AgentLoopConfig",
    "BeforeToolCallContext", "BeforeToolCallResult", "AfterToolCallContext", "AfterToolCallResult",
    "ShouldStopAfterTurnContext", "PrepareNextTurnContext", "AgentLoopTurnUpdate", "set_default_stream_fn",
    "get_default_stream_fn", "Agent", "AgentState", "EventSubscription",
    # plugins and registries
    "hookimpl", "hookspec", "plugins_info", "get_tool", "get_provider", "get_model", "models",
    "create_plugin_manager", "AgentHooks", "PluginInfo", "UnknownToolError", "UnknownProviderError",
    "UnknownModelError",
    # providers
    "stream", "complete", "is_context_overflow", "calculate_cost", "MissingApiKeyError", "get_env_api_key",
    # sessions
    "Session", "JsonlSessionStorage", "SqliteSessionStorage", "MemorySessionStorage", "SessionRepository",
    "SessionError", "SessionLockedError", "SessionContext", "SessionStats", "attach_session", "restore_agent",
    # compaction
    "CompactionSettings", "CompactionError", "CompactionDecision", "Compactor", "CompactionStartEvent",
    "CompactionEndEvent", "TreeDecision", "TreePreparation",
    # notebooks
    "display_run", "Transcript",
    "__version__",
}


def test_all_is_exactly_the_documented_surface():
    assert set(agentcore.__all__) == DOCUMENTED
    assert len(agentcore.__all__) == len(set(agentcore.__all__))


def test_every_public_name_resolves():
    for name in agentcore.__all__:
        assert getattr(agentcore, name) is not None, name


def test_unknown_attribute_raises_attribute_error():
    try:
        agentcore.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected AttributeError")


def test_import_is_light_and_scans_no_entry_points():
    code = (
        "import sys, importlib.metadata as md\n"
        "calls = []\n"
        "real = md.entry_points\n"
        "md.entry_points = lambda *a, **k: calls.append(1) or real(*a, **k)\n"
        "import agentcore\n"
        "heavy = [m for m in ('requests', 'jsonschema', 'pluggy', 'IPython') if m in sys.modules]\n"
        "print(heavy, len(calls))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[] 0"


def _setup_cfg_metadata() -> "configparser.SectionProxy":
    import configparser
    from pathlib import Path

    parser = configparser.ConfigParser()
    parser.read(Path(__file__).resolve().parents[1] / "setup.cfg", encoding="utf-8")
    return parser["metadata"]


def test_version_is_read_from_the_distribution_setup_cfg_names(monkeypatch):
    # "agentcore" on the package index is another project: asking importlib.metadata for it would
    # report that project's version (or none) instead of ours.
    import importlib.metadata

    from agentcore import plugins

    name = _setup_cfg_metadata()["name"]
    assert name == "pyagentcore"
    asked = []
    monkeypatch.setattr(importlib.metadata, "version", lambda dist: asked.append(dist) or "9.9")
    monkeypatch.delitem(agentcore.__dict__, "__version__", raising=False)
    assert agentcore.__version__ == "9.9"
    assert plugins._agentcore_version() == "9.9"
    assert asked == [name, name]
    builtin = [info for info in agentcore.plugins_info() if info.builtin]
    assert builtin and all(info.distribution == name for info in builtin)


def test_installed_version_is_the_setup_cfg_version():
    import importlib.metadata

    import pytest

    try:
        installed = importlib.metadata.version("pyagentcore")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("the pyagentcore distribution is not installed (a source tree)")
    assert installed == _setup_cfg_metadata()["version"]

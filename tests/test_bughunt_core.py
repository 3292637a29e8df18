"""Bug-hunt regressions for the core (agent, loop, hooks, streams, tools): each test pins a bug
found in the final review before release (agent-loop §2.7/§2.8 hook semantics, §3 Agent)."""

from __future__ import annotations

from typing import Any, List

import pytest

from agentcore import Agent
from agentcore.hookspecs import hookimpl
from agentcore.testing import ScriptedModel, text, tool_call
from agentcore.tools import tool


@tool
def echo(x: str) -> str:
    """Echo the argument."""
    return "ran " + x


class _PassiveToolHooks:
    """A plugin that implements the tool hooks but never blocks or overrides anything."""

    @hookimpl
    def before_tool_call(self, context: Any, signal: Any) -> Any:
        return None

    @hookimpl
    def after_tool_call(self, context: Any, signal: Any) -> Any:
        return None


def _tool_results(agent: Agent) -> List[Any]:
    return [m for m in agent.messages if m.role == "toolResult"]


# agent-loop §2.7: a before_tool_call verdict may be a plain dict; an unrelated plugin implementing
# the same hook must not make the agent's own blocking verdict disappear.
@pytest.mark.parametrize("plugins", [[], [_PassiveToolHooks()]], ids=["alone", "with-plugin"])
def test_dict_block_verdict_is_honoured_with_other_plugins(plugins: List[Any]) -> None:
    scripted = ScriptedModel([tool_call("echo", {"x": "a"}), text("ok")])
    agent = Agent(scripted.model, tools=[echo], stream_fn=scripted.stream_fn, plugins=plugins,
                  before_tool_call=lambda ctx, signal: {"block": True, "reason": "not allowed"})
    agent.prompt("go")
    (result,) = _tool_results(agent)
    assert result.is_error is True
    assert result.content[0].text == "not allowed"


# agent-loop §2.8: a plain-dict after_tool_call override applies field by field, plugins or not.
@pytest.mark.parametrize("plugins", [[], [_PassiveToolHooks()]], ids=["alone", "with-plugin"])
def test_dict_after_override_is_honoured_with_other_plugins(plugins: List[Any]) -> None:
    scripted = ScriptedModel([tool_call("echo", {"x": "a"}), text("ok")])
    agent = Agent(scripted.model, tools=[echo], stream_fn=scripted.stream_fn, plugins=plugins,
                  after_tool_call=lambda ctx, signal: {"is_error": True, "details": {"k": 1}})
    agent.prompt("go")
    (result,) = _tool_results(agent)
    assert result.is_error is True
    assert result.details == {"k": 1}
    assert result.content[0].text == "ran a"

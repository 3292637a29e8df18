"""The Agent: spec agent-loop §5.2-5.4 scenarios 23-56 plus the Python-specific behaviour
(listener exceptions, KeyboardInterrupt, concurrent prompts, asyncio threads, stream(), wait=False)."""

from __future__ import annotations

import threading
from typing import Any, List

import pytest

from agentcore.agent import Agent
from agentcore.events import ErrorEvent, StartEvent
from agentcore.loop import set_default_stream_fn
from agentcore.signals import AbortSignal
from agentcore.streams import AssistantMessageEventStream
from agentcore.testing import ScriptedModel, call, response, text, thinking, tool_call
from agentcore.tools import AgentTool, AgentToolResult
from agentcore.types import AssistantMessage, Model, TextContent, ThinkingContent, UserMessage


def roles(messages) -> List[str]:
    return [m.role for m in messages]


def test_default_stream_fn_fallback(asst, mock_llm):  # agent-loop §5 scenario 23
    llm = mock_llm([asst("hi")])
    set_default_stream_fn(llm.stream_fn)
    try:
        agent = Agent()
        agent.prompt("Hello")
    finally:
        set_default_stream_fn(None)
    assert llm.calls == 1


def test_default_state():  # agent-loop §5 scenario 24
    state = Agent().state
    assert state.system_prompt == ""
    assert state.model.id == "unknown" and state.model.api == "unknown" and state.model.provider == "unknown"
    assert state.thinking_level == "off"
    assert state.tools == [] and state.messages == []
    assert state.is_streaming is False and state.streaming_message is None
    assert state.pending_tool_calls == frozenset() and state.error_message is None


def test_basic_prompt_with_scripted_model():  # agent-loop §5 scenario 49
    scripted = ScriptedModel([text("4")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    new = agent.prompt("What is 2+2?")
    assert roles(agent.state.messages) == ["user", "assistant"]
    assert "4" in agent.state.messages[-1].text
    assert new == agent.state.messages
    assert agent.state.is_streaming is False

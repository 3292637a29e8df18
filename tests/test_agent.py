"""The Agent: spec agent-loop §5.2-5.4 scenarios 23-56 plus the Python-specific behaviour
(listener exceptions, KeyboardInterrupt, concurrent prompts, asyncio threads, stream(), wait=False)."""

from __future__ import annotations

import sys
import threading
from typing import Any, List

import pytest
from _echo import Echo

from agentcore.agent import Agent
from agentcore.events import ErrorEvent, StartEvent
from agentcore.hookspecs import hookimpl
from agentcore.loop import set_default_stream_fn
from agentcore.signals import AbortSignal
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


# --------------------------------------------------------------------------- helpers


class Gate:
    """A stream function that emits ``start`` and then waits until released or aborted."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.calls = 0
        self.options: List[dict] = []

    def stream_fn(self, model, context, **options):
        self.calls += 1
        self.options.append(options)
        signal = options["signal"]

        def events():
            partial = AssistantMessage(content=[], api=model.api, provider=model.provider, model=model.id)
            yield StartEvent(partial)
            self.started.set()
            while not self.release.wait(0.01):
                if signal.aborted:
                    aborted = partial.copy()
                    aborted.stop_reason = "aborted"
                    aborted.error_message = "Request was aborted"
                    yield ErrorEvent("aborted", aborted)
                    return
            from agentcore.events import DoneEvent

            final = AssistantMessage(
                content=[TextContent("released")], api=model.api, provider=model.provider, model=model.id
            )
            yield DoneEvent("stop", final)

        return events()


def calculator() -> AgentTool:
    schema = {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}

    def execute(tool_call_id, args, signal, on_update):
        expression = args["expression"]
        value = eval(expression, {"__builtins__": {}})  # test-only: trusted literal input
        return AgentToolResult([TextContent(f"{expression} = {value}")], details={"value": value})

    return AgentTool("calculate", "Evaluate an arithmetic expression", schema, execute)


def noop_tool(name: str = "noop", execute=None, execution_mode=None) -> AgentTool:
    def default(tool_call_id, args, signal, on_update):
        return AgentToolResult([TextContent("ok")])

    return AgentTool(
        name, "does nothing", {"type": "object", "properties": {}}, execute or default, execution_mode=execution_mode
    )


# --------------------------------------------------------------------------- 5.2 Agent


def test_custom_initial_state():  # agent-loop §5 scenario 25
    model = Model(id="m", api="openai-completions", provider="local")
    agent = Agent(model, system_prompt="You are terse.", thinking_level="low")
    assert agent.state.system_prompt == "You are terse."
    assert agent.state.model is model
    assert agent.state.thinking_level == "low"


def test_system_messages_pass_the_default_converter():  # agent-loop §5 scenario 26
    from agentcore.types import SystemMessage

    scripted = ScriptedModel([text("ok")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    agent.prompt(SystemMessage("updated guidance"))
    assert roles(scripted.contexts[0].messages) == ["system"]


def test_subscribe_and_setters_emit_nothing():  # agent-loop §5 scenario 27
    agent = Agent()
    seen = []
    unsubscribe = agent.subscribe(lambda event: seen.append(event))
    agent.state.system_prompt = "changed"
    agent.state.messages = [UserMessage("x")]
    unsubscribe()
    agent.state.thinking_level = "high"
    assert seen == []


def test_thrown_stream_failure_becomes_a_failure_run():  # agent-loop §5 scenario 28
    scripted = ScriptedModel([RuntimeError("provider exploded")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    seen = []
    agent.subscribe(lambda event: seen.append(event.type))
    new = agent.prompt("Hello")
    assert seen == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    last = agent.state.messages[-1]
    assert last.role == "assistant" and last.stop_reason == "error"
    assert last.error_message == "provider exploded"
    assert agent.state.error_message == "provider exploded"
    assert new == [last]
    assert agent.state.is_streaming is False


def test_prompt_waits_for_a_blocking_listener():  # agent-loop §5 scenario 29
    scripted = ScriptedModel([text("ok")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    entered, release, finished = threading.Event(), threading.Event(), threading.Event()

    def listener(event):
        if event.type == "agent_end":
            entered.set()
            release.wait(5)
            finished.set()

    agent.subscribe(listener)
    returned = threading.Event()
    caller = threading.Thread(target=lambda: (agent.prompt("hi"), returned.set()))
    caller.start()
    assert entered.wait(5)
    assert not returned.wait(0.01)
    assert not finished.is_set() and agent.state.is_streaming is True
    release.set()
    caller.join(5)
    assert returned.is_set() and finished.is_set() and agent.state.is_streaming is False


def test_wait_for_idle_waits_for_listeners():  # agent-loop §5 scenario 30
    scripted = ScriptedModel([text("ok")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    entered, release = threading.Event(), threading.Event()

    def listener(event):
        if event.type == "message_end" and event.message.role == "assistant":
            entered.set()
            release.wait(5)

    agent.subscribe(listener)
    assert agent.prompt("hi", wait=False) is None
    assert entered.wait(5)
    assert agent.wait_for_idle(timeout=0.01) is False
    assert agent.state.is_streaming is True
    release.set()
    assert agent.wait_for_idle(timeout=5) is True
    assert agent.state.is_streaming is False


def test_listener_receives_the_active_signal():  # agent-loop §5 scenario 31
    gate = Gate()
    agent = Agent(stream_fn=gate.stream_fn)
    captured = []

    def listener(event, signal):
        if event.type == "agent_start":
            captured.append((signal, signal.aborted))

    agent.subscribe(listener)
    agent.prompt("hi", wait=False)
    assert gate.started.wait(5)
    agent.abort()
    assert agent.wait_for_idle(5)
    ((signal, aborted_then),) = captured
    assert isinstance(signal, AbortSignal) and aborted_then is False
    assert signal.aborted is True
    assert agent.state.messages[-1].stop_reason == "aborted"


def test_late_update_ignored_single_tool():  # agent-loop §5 scenario 32
    kept = []

    def execute(tool_call_id, args, signal, on_update):
        on_update(AgentToolResult([TextContent("running")]))
        kept.append(on_update)
        return AgentToolResult([TextContent("done")], terminate=True)

    scripted = ScriptedModel([tool_call("late", {}, id="call-1")])
    agent = Agent(scripted.model, tools=[noop_tool("late", execute)], stream_fn=scripted.stream_fn)
    seen = []
    agent.subscribe(lambda event: seen.append(event))
    agent.prompt("go")
    count = len(seen)
    kept[0](AgentToolResult([TextContent("too late")]))  # must not raise
    assert len(seen) == count
    assert [e.type for e in seen].count("tool_execution_update") == 1


def test_late_update_ignored_while_sibling_runs():  # agent-loop §5 scenario 33
    kept, slow_started, release = [], threading.Event(), threading.Event()

    def settled(tool_call_id, args, signal, on_update):
        kept.append(on_update)
        return AgentToolResult([TextContent("settled")], terminate=True)

    def slow(tool_call_id, args, signal, on_update):
        slow_started.set()
        release.wait(5)
        return AgentToolResult([TextContent("slow")], terminate=True)

    scripted = ScriptedModel([response(call("settled_tool", {}, "call-1"), call("slow_tool", {}, "call-2"))])
    agent = Agent(
        scripted.model,
        tools=[noop_tool("settled_tool", settled), noop_tool("slow_tool", slow)],
        stream_fn=scripted.stream_fn,
    )
    seen, first_end = [], threading.Event()

    def listener(event):
        seen.append(event)
        if event.type == "tool_execution_end" and event.tool_call_id == "call-1":
            first_end.set()

    agent.subscribe(listener)
    agent.prompt("go", wait=False)
    assert slow_started.wait(5) and first_end.wait(5)
    count = len(seen)
    kept[0](AgentToolResult([TextContent("late")]))
    assert len(seen) == count
    release.set()
    assert agent.wait_for_idle(5)
    assert [e.type for e in seen].count("tool_execution_update") == 0
    assert scripted.calls == 1  # both results terminate


def test_state_mutators():  # agent-loop §5 scenario 34
    agent = Agent()
    model = Model(id="x", api="openai-completions", provider="local")
    agent.state.system_prompt = "sp"
    agent.state.model = model
    agent.state.thinking_level = "high"
    assert (agent.state.system_prompt, agent.state.model, agent.state.thinking_level) == ("sp", model, "high")
    tools = [noop_tool()]
    agent.state.tools = tools
    assert agent.state.tools == tools and agent.state.tools is not tools
    messages = [UserMessage("a")]
    agent.state.messages = messages
    assert agent.state.messages == messages and agent.state.messages is not messages
    extra = UserMessage("b")
    agent.state.messages.append(extra)
    assert len(agent.state.messages) == 2 and agent.state.messages[1] is extra
    agent.state.messages = []
    assert agent.state.messages == []


def test_steer_and_follow_up_while_idle_do_not_touch_messages():  # agent-loop §5 scenarios 35, 36
    agent = Agent()
    agent.steer(UserMessage("s"))
    agent.follow_up("f")
    agent.followUp(UserMessage("g"))
    assert agent.state.messages == []
    assert agent.has_queued_messages() is True


def test_abort_while_idle_is_a_no_op():  # agent-loop §5 scenario 37
    agent = Agent()
    agent.abort()
    agent.abort("again")
    assert agent.signal is None


def test_reset_rejected_mid_run():  # agent-loop §5 scenario 38
    gate = Gate()
    agent = Agent(stream_fn=gate.stream_fn)
    agent.prompt("hi", wait=False)
    assert gate.started.wait(5)
    assert agent.state.is_streaming is True
    assert roles(agent.state.messages) == ["user"]
    with pytest.raises(RuntimeError, match="^Agent is already processing. Wait for completion before resetting.$"):
        agent.reset()
    assert roles(agent.state.messages) == ["user"]
    gate.release.set()
    assert agent.wait_for_idle(5)
    assert agent.state.is_streaming is False
    assert roles(agent.state.messages) == ["user", "assistant"]


def test_prompt_while_streaming_raises():  # agent-loop §5 scenario 39
    gate = Gate()
    agent = Agent(stream_fn=gate.stream_fn)
    agent.prompt("hi", wait=False)
    assert gate.started.wait(5)
    with pytest.raises(RuntimeError) as info:
        agent.prompt("again")
    assert str(info.value) == (
        "Agent is already processing a prompt. Use steer() or follow_up() to queue messages, or wait for completion."
    )
    agent.abort()
    assert agent.wait_for_idle(5)
    assert gate.calls == 1


def test_continue_while_streaming_raises():  # agent-loop §5 scenario 40
    gate = Gate()
    agent = Agent(stream_fn=gate.stream_fn)
    agent.prompt("hi", wait=False)
    assert gate.started.wait(5)
    with pytest.raises(RuntimeError, match="^Agent is already processing. Wait for completion before continuing.$"):
        agent.continue_()
    agent.abort()
    assert agent.wait_for_idle(5)


def test_continue_drains_a_follow_up_at_an_assistant_tail(asst):  # agent-loop §5 scenario 41
    scripted = ScriptedModel([text("answer")])
    agent = Agent(scripted.model, messages=[UserMessage("Initial"), asst("first")], stream_fn=scripted.stream_fn)
    queued = UserMessage("Queued follow-up")
    agent.follow_up(queued)
    new = agent.continue_()
    assert any(m is queued for m in agent.state.messages)
    assert agent.state.messages[-1].role == "assistant"
    assert new[0] is queued and roles(new) == ["user", "assistant"]


def test_continue_keeps_one_at_a_time_steering(asst):  # agent-loop §5 scenario 42
    scripted = ScriptedModel([text("r1"), text("r2")])
    agent = Agent(scripted.model, messages=[UserMessage("Initial"), asst("first")], stream_fn=scripted.stream_fn)
    agent.steer(UserMessage("S1"))
    agent.steer(UserMessage("S2"))
    agent.continue_()
    assert roles(agent.state.messages[-4:]) == ["user", "assistant", "user", "assistant"]
    assert [m.content for m in agent.state.messages if m.role == "user"] == ["Initial", "S1", "S2"]
    assert scripted.calls == 2


def test_legacy_prepare_next_turn_receives_the_signal():  # agent-loop §5 scenario 43
    scripted = ScriptedModel([tool_call("noop", {}), text("done")])
    received = []
    agent = Agent(
        scripted.model,
        tools=[noop_tool()],
        stream_fn=scripted.stream_fn,
        prepare_next_turn=lambda signal: received.append(signal),
    )
    agent.prompt("go")
    assert received and all(isinstance(s, AbortSignal) for s in received)
    assert scripted.calls == 2


def test_prepare_next_turn_with_context_form():  # agent-loop §3.2 (preferred two-argument form)
    scripted = ScriptedModel([tool_call("noop", {}), text("done")])
    seen = []

    def prepare(ctx, signal):
        seen.append((roles(ctx.context.messages), isinstance(signal, AbortSignal)))
        return {"thinking_level": "high"}

    agent = Agent(scripted.model, tools=[noop_tool()], stream_fn=scripted.stream_fn, prepare_next_turn=prepare)
    agent.prompt("go")
    assert seen[0] == (["user", "assistant", "toolResult"], True)
    assert scripted.options[1]["reasoning"] == "high"
    assert agent.state.thinking_level == "off"  # in-run changes are not written back


def test_should_stop_after_turn_via_options():  # agent-loop §5 scenario 44
    scripted = ScriptedModel([tool_call("noop", {}), text("never")])
    seen = []

    def should_stop(ctx, signal):
        seen.append((roles(ctx.context.messages), isinstance(signal, AbortSignal)))
        return True

    agent = Agent(scripted.model, tools=[noop_tool()], stream_fn=scripted.stream_fn, should_stop_after_turn=should_stop)
    agent.prompt("go")
    assert scripted.calls == 1
    assert seen == [(["user", "assistant", "toolResult"], True)]


def test_session_id_forwarding():  # agent-loop §5 scenario 45
    scripted = ScriptedModel([text("a"), text("b")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn, session_id="session-abc")
    agent.prompt("one")
    agent.session_id = "session-def"
    agent.prompt("two")
    assert [o["session_id"] for o in scripted.options] == ["session-abc", "session-def"]


def test_a_session_s_id_keys_the_provider_cache_unless_session_id_is_set():  # issue 17: prompt caching
    from agentcore import Session

    scripted = ScriptedModel([text("a"), text("b")])
    session = Session.in_memory(session_id="sess-42")
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn, session=session)
    agent.prompt("one")
    agent.session_id = "explicit"
    agent.prompt("two")
    assert [o["session_id"] for o in scripted.options] == ["sess-42", "explicit"]
    assert agent.options.session_id == "explicit"  # the agent's own options are not rewritten


def test_stream_options_forwarded_and_off_reasoning_absent():  # agent-loop §1.6, §3.2
    scripted = ScriptedModel([text("a"), text("b")])
    agent = Agent(
        scripted.model,
        stream_fn=scripted.stream_fn,
        api_key="sk-test",
        temperature=0.2,
        max_tokens=99,
        thinking_budgets={"low": 10},
        max_retry_delay_ms=5,
    )
    agent.prompt("one")
    first = scripted.options[0]
    assert "reasoning" not in first and first["transport"] == "auto"
    assert (first["api_key"], first["temperature"], first["max_tokens"]) == ("sk-test", 0.2, 99)
    assert first["thinking_budgets"] == {"low": 10} and first["max_retry_delay_ms"] == 5
    assert isinstance(first["signal"], AbortSignal)
    agent.thinking_level = "medium"
    agent.get_api_key = lambda provider: f"key-for-{provider}"
    agent.prompt("two")
    assert scripted.options[1]["reasoning"] == "medium"
    assert scripted.options[1]["api_key"] == "key-for-scripted"
    assert "sk-test" not in repr(agent)


# --------------------------------------------------------------------------- 5.3 queues under abort


def _originals():
    from agentcore.types import ImageContent

    image = ImageContent(data="aGVsbG8=", mime_type="image/png")
    return [UserMessage([TextContent(f"queued-{n}"), image], timestamp=n) for n in (1, 2)]


def _context_text(context) -> str:
    parts = []
    for m in context.messages:
        content = getattr(m, "content", "")
        if isinstance(content, str):
            parts.append(content)
        else:
            parts.extend(getattr(b, "text", "") for b in content)
    return " ".join(parts)


@pytest.mark.parametrize("kind", ["steer", "follow_up"])
@pytest.mark.parametrize("mode", ["one-at-a-time", "all"])
@pytest.mark.parametrize("clear", [False, True])
def test_reserved_originals_survive_a_preparation_abort(kind, mode, clear):  # agent-loop §5 scenario 46
    scripted = ScriptedModel([text("first"), text("unexpected")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn, steering_mode=mode, follow_up_mode=mode)
    originals = _originals()
    queued = []

    def listener(event):
        if event.type == "turn_end" and not queued:
            queued.append(True)
            for message in originals:
                getattr(agent, kind)(message)

    def prepare(signal):
        agent.abort()
        if clear:
            agent.clear_all_queues()
        return None

    agent.subscribe(listener)
    agent.prepare_next_turn = prepare
    agent.prompt("old")
    assert scripted.calls == 1
    assert not any(m is o for m in agent.state.messages for o in originals)
    assert agent.has_queued_messages() is (not clear)

    agent.prepare_next_turn = None
    contexts = []

    def answer(context):
        contexts.append(_context_text(context))
        return text("ok")

    scripted.responses[:] = [answer] * 4
    agent.prompt("fresh")
    users = [m for m in agent.state.messages if m.role == "user"]
    expected = [] if clear else originals
    assert len(users[2:]) == len(expected) and all(a is b for a, b in zip(users[2:], expected))
    for original in originals:
        count = sum(1 for m in agent.state.messages if m is original)
        assert count == (0 if clear else 1)
    assert any("queued-1" in c for c in contexts) is (not clear)
    assert agent.has_queued_messages() is False


def test_all_mode_batch_stopped_after_first_accepted_message():  # agent-loop §5 scenario 47
    scripted = ScriptedModel([text("unused")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn, steering_mode="all")
    accepted, pending = UserMessage("accepted"), UserMessage("pending")
    agent.steer(accepted)
    agent.steer(pending)

    def listener(event):
        if event.type == "message_end" and event.message is accepted:
            agent.abort()

    unsubscribe = agent.subscribe(listener)
    agent.prompt("old")
    assert scripted.calls == 0
    assert any(m is accepted for m in agent.state.messages)
    assert not any(m is pending for m in agent.state.messages)
    unsubscribe()
    scripted.responses[:] = [text("fresh")]
    agent.prompt("fresh")
    assert sum(m is accepted for m in agent.state.messages) == 1
    assert sum(m is pending for m in agent.state.messages) == 1
    assert agent.has_queued_messages() is False


def test_steer_queued_at_message_end_then_aborted_is_never_polled():  # agent-loop §5 scenario 48
    scripted = ScriptedModel([text("answer"), text("unexpected")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    queued = UserMessage("queued")

    def listener(event):
        if event.type == "message_end" and event.message.role == "assistant" and not agent.signal.aborted:
            agent.steer(queued)
            agent.abort()

    agent.subscribe(listener)
    agent.prompt("go")
    assert scripted.calls == 1
    assert not any(m is queued for m in agent.state.messages)
    assert agent.has_queued_messages() is True


# --------------------------------------------------------------------------- 5.4 end to end


def test_tools_and_pending_ids():  # agent-loop §5 scenario 50
    scripted = ScriptedModel(
        [
            response("Let me calculate.", call("calculate", {"expression": "123 * 456"}, "calc-1")),
            text("The result is 56088."),
        ]
    )
    agent = Agent(scripted.model, tools=[calculator()], stream_fn=scripted.stream_fn)
    snapshots = []

    def listener(event):
        if event.type in ("tool_execution_start", "tool_execution_end"):
            snapshots.append((event.type, sorted(agent.state.pending_tool_calls)))

    agent.subscribe(listener)
    agent.prompt("What is 123 * 456?")
    result = [m for m in agent.state.messages if m.role == "toolResult"][0]
    assert "123 * 456 = 56088" in result.text
    assert "56088" in agent.state.messages[-1].text
    assert agent.state.pending_tool_calls == frozenset()
    assert snapshots == [("tool_execution_start", ["calc-1"]), ("tool_execution_end", [])]


def test_abort_during_streaming():  # agent-loop §5 scenario 51
    scripted = ScriptedModel([text("one two three four five six seven eight nine ten " * 5)], tokens_per_second=20)
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    first_delta = threading.Event()

    def listener(event):
        if event.type == "message_update" and event.assistant_message_event.type == "text_delta":
            first_delta.set()

    agent.subscribe(listener)
    agent.prompt("count", wait=False)
    assert first_delta.wait(5)
    agent.abort()
    assert agent.wait_for_idle(5)
    last = agent.state.messages[-1]
    assert last.role == "assistant" and last.stop_reason == "aborted" and last.error_message
    assert agent.state.error_message == last.error_message


def test_streaming_lifecycle():  # agent-loop §5 scenario 52
    scripted = ScriptedModel([text("Hello there")], tokens_per_second=10000)
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    seen = []
    agent.subscribe(lambda event: seen.append(event.type))
    agent.prompt("hi")
    for kind in (
        "agent_start",
        "turn_start",
        "message_start",
        "message_update",
        "message_end",
        "turn_end",
        "agent_end",
    ):
        assert kind in seen
    last_end = len(seen) - 1 - seen[::-1].index("agent_end")
    assert seen.index("agent_start") < seen.index("message_start") < seen.index("message_end") < last_end
    assert len(agent.state.messages) == 2


def test_multi_turn_context():  # agent-loop §5 scenario 53
    def second(context):
        seen_alice = "Alice" in _context_text(context)
        return text("Your name is Alice." if seen_alice else "I don't know.")

    scripted = ScriptedModel([text("Nice to meet you, Alice."), second])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    agent.prompt("My name is Alice.")
    assert len(agent.state.messages) == 2
    agent.prompt("What is my name?")
    assert len(agent.state.messages) == 4
    assert "Alice" in agent.state.messages[-1].text


def test_thinking_preserved():  # agent-loop §5 scenario 54
    scripted = ScriptedModel([thinking("step by step", "4")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    agent.prompt("2+2?")
    content = agent.state.messages[-1].content
    assert content == [ThinkingContent("step by step"), TextContent("4")]
    assert [b.to_dict() for b in content] == [
        {"type": "thinking", "thinking": "step by step"},
        {"type": "text", "text": "4"},
    ]


def test_continue_validation(asst):  # agent-loop §5 scenario 55
    agent = Agent(stream_fn=ScriptedModel().stream_fn)
    with pytest.raises(ValueError, match="^No messages to continue from$"):
        agent.continue_()
    agent.state.messages = [asst("alone")]
    with pytest.raises(ValueError, match="^Cannot continue from message role: assistant$"):
        agent.continue_()
    assert agent.state.is_streaming is False and agent.signal is None


def test_continue_from_user_and_tool_result(asst):  # agent-loop §5 scenario 56
    from agentcore.types import ToolCall, ToolResultMessage

    scripted = ScriptedModel([text("hello"), text("The answer is 8.")])
    agent = Agent(scripted.model, messages=[UserMessage("hi")], stream_fn=scripted.stream_fn)
    agent.continue_()
    assert roles(agent.state.messages) == ["user", "assistant"]
    agent.state.messages = [
        UserMessage("what is 5 + 3?"),
        asst([ToolCall("calc-1", "calculate", {"expression": "5 + 3"})], "toolUse"),
        ToolResultMessage("calc-1", "calculate", [TextContent("5 + 3 = 8")]),
    ]
    new = agent.continue_()
    assert roles(new) == ["assistant"] and "8" in agent.state.messages[-1].text


# --------------------------------------------------------------------------- Python-specific behaviour


def test_listener_exception_fails_the_run_once():  # agent-loop §3.4, §3.6
    scripted = ScriptedModel([text("answer")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    seen = []

    def listener(event):
        seen.append(event.type)
        if event.type == "message_end" and getattr(event.message, "text", None) == "answer":
            raise ValueError("listener broke")

    agent.subscribe(listener)
    new = agent.prompt("hi")
    assert roles(agent.state.messages) == ["user", "assistant", "assistant"]
    failure = agent.state.messages[-1]
    assert failure.stop_reason == "error" and failure.error_message == "listener broke"
    assert new == [failure] and agent.state.error_message == "listener broke"
    assert seen[-4:] == ["message_start", "message_end", "turn_end", "agent_end"]
    assert agent.state.is_streaming is False


def test_a_listener_raising_at_the_prompts_start_keeps_the_prompt():  # agent-loop §3.6
    """The prompt's message_start was emitted, then the failure sequence began with a second
    message_start: the prompt never got its message_end, so it vanished from the transcript and
    the session (a transcript of one error message, the user's question lost)."""
    from agentcore import Session

    session = Session.in_memory()
    scripted = ScriptedModel([text("answer")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn, session=session)
    seen = []

    def listener(event):
        seen.append((event.type, getattr(getattr(event, "message", None), "role", None)))
        if event.type == "message_start" and event.message.role == "user":
            raise ValueError("ui broke")

    agent.subscribe(listener)
    new = agent.prompt("my question")
    assert roles(agent.messages) == ["user", "assistant"]
    assert agent.messages[0].text == "my question" and agent.messages[1].error_message == "ui broke"
    assert new == [agent.messages[1]]
    assert seen[2:] == [
        ("message_start", "user"),
        ("message_end", "user"),
        ("message_start", "assistant"),
        ("message_end", "assistant"),
        ("turn_end", "assistant"),
        ("agent_end", None),
    ]
    assert roles(session.build_context().messages) == ["user", "assistant"]


def test_a_listener_raising_at_a_steering_messages_start_delivers_it_once():  # agent-loop §3.5, §3.6
    scripted = ScriptedModel([text("first"), text("second")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    agent.steer("steered")

    def listener(event):
        if event.type == "message_start" and getattr(event.message, "text", None) == "steered":
            raise ValueError("ui broke")

    unsubscribe = agent.subscribe(listener)
    agent.prompt("hi")
    assert [m.text for m in agent.messages[:2]] == ["hi", "steered"]
    assert not agent.has_queued_messages()  # it reached the transcript: not queued again
    unsubscribe()


def test_listener_raising_again_during_failure_reaches_the_caller():  # agent-loop §3.4
    scripted = ScriptedModel([text("answer"), text("second")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)

    def listener(event):
        if event.type == "message_end":
            raise ValueError("always broken")

    unsubscribe = agent.subscribe(listener)
    with pytest.raises(ValueError, match="always broken"):
        agent.prompt("hi")
    assert agent.state.is_streaming is False and agent.signal is None
    assert scripted.calls == 0  # the prompt's own message_end failed, before any model call
    unsubscribe()
    agent.prompt("again")  # the agent is usable afterwards
    assert agent.state.messages[-1].text == "answer"


def test_a_listener_raising_again_still_lets_state_and_plugins_see_the_run_end():  # agent-loop §3.4
    """The failure sequence used to stop at the event the listener failed on again: agent_end never
    reached the plugins (a tracer's run span stayed open, holding the agent) and the failure
    message never reached the transcript nor the session. The rest reaches everyone now, the failing
    listener's further exceptions only logged."""
    seen = []

    class Observer:
        @hookimpl
        def on_event(self, event, agent):
            seen.append(event.type)

    from agentcore import Session

    session = Session.in_memory()
    scripted = ScriptedModel([text("answer")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn, plugins=[Observer()], session=session)

    def listener(event):
        if event.type == "message_start":
            raise ValueError("always broken")

    agent.subscribe(listener)  # after the session's recorder
    ended = []
    agent.subscribe(lambda event: ended.append(event.type) if event.type == "agent_end" else None)
    with pytest.raises(ValueError, match="always broken"):
        agent.prompt("hi")
    assert seen[-4:] == ["message_start", "message_end", "turn_end", "agent_end"]
    assert agent.state.messages[-1].error_message == "always broken"
    assert agent.state.is_streaming is False
    assert ended == ["agent_end"]  # the other listeners get the rest of the sequence
    recorded = session.build_context().messages
    assert recorded[-1].role == "assistant" and recorded[-1].error_message == "always broken"


def _interrupting_agent(waiting_in: str = "prompt"):
    """An agent whose one tool raises a Ctrl+C in the main thread once that thread waits inside
    the function ``waiting_in`` (so it never lands before the test expects it: after
    ``prompt(wait=False)`` the tool may run before the main thread reached ``wait_for_idle``) and
    records whether its signal fired within 5 s: ``(agent, scripted, tool_saw_abort)``."""
    import _thread
    import sys

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("KeyboardInterrupt delivery needs the main thread")
    main = threading.main_thread().ident
    tool_saw_abort: List[bool] = []

    def main_waits_in() -> bool:
        frame = sys._current_frames().get(main)  # type: ignore[arg-type]
        while frame is not None:
            if frame.f_code.co_name == waiting_in:
                return True
            frame = frame.f_back
        return False

    def execute(tool_call_id, args, signal, on_update):
        pause = threading.Event()  # never set: a sleep that is no busy loop
        for _ in range(2000):  # at most 10 s: the main thread's stack, until it waits in waiting_in
            if main_waits_in():
                break
            pause.wait(0.005)
        _thread.interrupt_main()
        tool_saw_abort.append(signal.wait(5))
        return AgentToolResult([TextContent("stopped")])

    scripted = ScriptedModel([tool_call("interrupting", {}), text("never")])
    agent = Agent(scripted.model, tools=[noop_tool("interrupting", execute)], stream_fn=scripted.stream_fn)
    return agent, scripted, tool_saw_abort


def test_keyboard_interrupt_during_prompt_aborts_cleanly(sigint_handled):  # DESIGN §2: Ctrl+C in the waiting caller
    agent, scripted, tool_saw_abort = _interrupting_agent()
    with pytest.raises(KeyboardInterrupt):
        agent.prompt("go")
    assert tool_saw_abort == [True]
    assert agent.state.is_streaming is False and agent.signal is None
    assert roles(agent.state.messages) == ["user", "assistant", "toolResult", "assistant"]
    last = agent.state.messages[-1]
    assert last.stop_reason == "aborted" and last.error_message
    assert scripted.calls == 1
    # the transcript is valid: it serialises and a new prompt works
    assert [m.to_dict()["role"] for m in agent.state.messages]
    scripted.responses[:] = [text("fine")]
    agent.prompt("again")
    assert agent.state.messages[-1].text == "fine"


def test_keyboard_interrupt_in_wait_for_idle_aborts_the_run(sigint_handled):  # DESIGN §2, docs/threads.rst
    """prompt(wait=False) then wait_for_idle(): Ctrl+C in that wait used to leave the run going
    (the tool never heard of it, the model was called again) with the agent busy behind the
    caller's back."""
    agent, scripted, tool_saw_abort = _interrupting_agent(waiting_in="wait_for_idle")
    agent.prompt("go", wait=False)
    with pytest.raises(KeyboardInterrupt):
        agent.wait_for_idle()
    assert tool_saw_abort == [True]
    assert agent.state.is_streaming is False and agent.signal is None
    assert roles(agent.state.messages) == ["user", "assistant", "toolResult", "assistant"]
    assert agent.state.messages[-1].stop_reason == "aborted" and scripted.calls == 1


def test_a_second_interrupt_while_the_aborted_run_settles_is_absorbed(sigint_handled):  # DESIGN §2
    """A second Ctrl+C (or the CLI's relayed SIGINT crossing the first) while prompt() aborted the
    run used to escape from the abort, so later abort listeners were never called (a parallel
    call never heard of it), and from the wait, so prompt() raised with the run still going and
    the CLI closed the session before the aborted answer was recorded."""
    import _thread

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("KeyboardInterrupt delivery needs the main thread")
    first_listening, heard = threading.Event(), []

    def interrupts_again(tool_call_id, args, signal, on_update):
        signal.add_listener(lambda _reason: _thread.interrupt_main())  # the second Ctrl+C
        first_listening.set()
        signal.wait(10)
        return AgentToolResult([TextContent("stopped")])

    def listens(tool_call_id, args, signal, on_update):
        assert first_listening.wait(10)
        told = threading.Event()
        signal.add_listener(lambda _reason: told.set())  # told after the listener above
        _thread.interrupt_main()  # the first Ctrl+C
        heard.append(told.wait(10))
        return AgentToolResult([TextContent("stopped")])

    tools = [noop_tool("interrupts_again", interrupts_again), noop_tool("listens", listens)]
    scripted = ScriptedModel([response(call("interrupts_again", {}), call("listens", {})), text("never")])
    agent = Agent(scripted.model, tools=tools, stream_fn=scripted.stream_fn)
    with pytest.raises(KeyboardInterrupt):
        agent.prompt("go")
    assert agent.state.is_streaming is False  # settled before prompt() raised
    assert heard == [True]
    assert roles(agent.state.messages) == ["user", "assistant", "toolResult", "toolResult", "assistant"]
    assert agent.state.messages[-1].stop_reason == "aborted"


class _CtrlCOnEntering:
    """A Ctrl+C that lands in this thread just as ``function`` is entered (a KeyboardInterrupt
    from its first line), as a real one may between any two bytecodes of the main thread."""

    def __init__(self, function: Any) -> None:
        import sys

        self._code, self._sys, self.landed = function.__code__, sys, False

    def _trace(self, frame, event, arg):
        if event == "call" and frame.f_code is self._code and not self.landed:
            self.landed = True
            raise KeyboardInterrupt  # a trace function's exception is raised in the traced code
        return None

    def __enter__(self) -> _CtrlCOnEntering:
        self._previous = self._sys.gettrace()
        self._sys.settrace(self._trace)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._sys.settrace(self._previous)


def test_ctrl_c_as_stream_returns_aborts_and_settles_the_run():  # DESIGN §2, docs/threads.rst
    """A Ctrl+C between stream() starting the run and returning its iterator used to leave the
    run going with nobody watching: the agent stayed busy, the model kept streaming."""
    from agentcore.agent import _RunEvents

    gate = Gate()
    agent = Agent(stream_fn=gate.stream_fn)
    try:
        with _CtrlCOnEntering(_RunEvents.__init__) as ctrl_c, pytest.raises(KeyboardInterrupt):
            agent.stream("go")
        assert ctrl_c.landed
        assert agent.state.is_streaming is False and agent.signal is None  # settled before the raise
        if agent.state.messages:  # the run had begun: it ended aborted, the transcript valid
            assert roles(agent.state.messages) == ["user", "assistant"]
            assert agent.state.messages[-1].stop_reason == "aborted"
    finally:
        agent.abort()
        gate.release.set()
        agent.wait_for_idle(10)


def test_ctrl_c_before_the_run_thread_got_the_run_cancels_it():  # DESIGN §2, docs/threads.rst
    """A Ctrl+C landing inside start_daemon before the run was handed to a thread used to make
    prompt() wait for ever for a run that no thread would ever execute."""
    from agentcore import agent as agent_module

    scripted = ScriptedModel([text("never"), text("fine")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    finished, hung = threading.Event(), []

    def watchdog() -> None:  # on the old code: release the caller stuck waiting, and say so
        if not finished.wait(10):
            hung.append(True)
            run = agent._active
            if run is not None:
                run.settled.set()

    threading.Thread(target=watchdog, daemon=True).start()
    try:
        with _CtrlCOnEntering(agent_module.start_daemon), pytest.raises(KeyboardInterrupt):
            agent.prompt("go")
    finally:
        finished.set()
    assert hung == []
    assert agent.state.is_streaming is False and agent.signal is None
    assert agent.state.messages == [] and scripted.calls == 0  # nothing ran, nothing recorded
    assert agent.prompt("again")[-1].text == "never"  # the agent is usable; the run never ran


@pytest.mark.parametrize("method", ["prompt", "stream", "continue_"])
def test_ctrl_c_before_launch_leaves_the_agent_idle(method):  # DESIGN §2
    """A Ctrl+C right after the busy flag was set, before the run was launched, used to leave the
    agent busy for ever ("Agent is already processing" on every later prompt)."""
    scripted = ScriptedModel([text("one"), text("two")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    if method == "continue_":
        agent.prompt("first")
        agent.follow_up("queued")
    with _CtrlCOnEntering(Agent._launch), pytest.raises(KeyboardInterrupt):
        getattr(agent, method)(*(() if method == "continue_" else ("go",)))
    assert agent.state.is_streaming is False and agent.signal is None
    assert agent.has_queued_messages() == (method == "continue_")  # the drained follow-up is back
    agent.prompt("again")
    assert agent.state.messages[-1].role == "assistant"


def test_concurrent_prompts_exactly_one_runs():  # agent-loop §8.1 thread-safe busy check
    gate = Gate()
    agent = Agent(stream_fn=gate.stream_fn)
    barrier = threading.Barrier(2)
    outcomes, errors = [], []
    lost = threading.Event()

    def caller(label):
        barrier.wait()
        try:
            outcomes.append((label, agent.prompt(label)))
        except RuntimeError as exc:
            errors.append(str(exc))
            lost.set()

    threads = [threading.Thread(target=caller, args=(f"p{i}",)) for i in range(2)]
    for t in threads:
        t.start()
    assert lost.wait(5)
    gate.release.set()
    for t in threads:
        t.join(5)
    assert len(errors) == 1 and errors[0].startswith("Agent is already processing a prompt.")
    assert len(outcomes) == 1 and gate.calls == 1
    assert roles(agent.state.messages) == ["user", "assistant"]


def test_run_from_a_thread_with_a_running_asyncio_loop():  # DESIGN §2: Jupyter-style callers
    import asyncio

    scripted = ScriptedModel([tool_call("noop", {}), text("from asyncio")])
    agent = Agent(scripted.model, tools=[noop_tool()], stream_fn=scripted.stream_fn)

    async def cell():
        asyncio.get_running_loop()  # a loop is running, as in a notebook cell
        with pytest.warns(RuntimeWarning, match="asyncio.to_thread"):  # it works, but blocks the loop
            return agent.prompt("hi")

    result = {}
    worker = threading.Thread(target=lambda: result.setdefault("new", asyncio.run(cell())))
    worker.start()
    worker.join(10)
    assert roles(result["new"]) == ["user", "assistant", "toolResult", "assistant"]
    assert agent.state.messages[-1].text == "from asyncio"


def test_wait_for_idle_from_a_listener_raises():  # agent-loop §8.1 deadlock guard
    scripted = ScriptedModel([text("ok")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    caught = []

    def listener(event):
        if event.type == "agent_end":
            try:
                agent.wait_for_idle()
            except RuntimeError as exc:
                caught.append(str(exc))

    agent.subscribe(listener)
    agent.prompt("hi")
    assert len(caught) == 1 and "run thread" in caught[0]
    assert agent.wait_for_idle() is True


def test_stream_yields_events_until_settled():  # DESIGN §2: consumer-side iterator
    scripted = ScriptedModel([tool_call("noop", {}), text("streamed")])
    agent = Agent(scripted.model, tools=[noop_tool()], stream_fn=scripted.stream_fn)
    events = list(agent.stream("hi"))
    kinds = [e.type for e in events]
    assert kinds[0] == "agent_start" and kinds[-1] == "agent_end"
    assert "tool_execution_end" in kinds and "message_update" in kinds
    assert agent.state.is_streaming is False
    assert events[-1].messages[-1].text == "streamed"
    assert agent._listeners == {}  # the stream's listener is gone


def test_stream_yields_its_own_runs_events_only(monkeypatch):
    """The agent is idle before a finished run's ``on_settled`` callbacks end its stream. A run
    another thread started in that moment used to send its events into the first stream too (two
    ``agent_end`` events, another prompt's messages). The test holds the first run there."""
    scripted = ScriptedModel([text("first answer"), text("second answer")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    idle, go = threading.Event(), threading.Event()
    begin_run = Agent._begin_run

    def hold_first_run(self):
        run = begin_run(self)
        if not idle.is_set():
            run.on_settled.insert(0, lambda: (idle.set(), go.wait(30)))
        return run

    monkeypatch.setattr(Agent, "_begin_run", hold_first_run)
    events = agent.stream("one")
    assert idle.wait(30)
    second = []
    other = threading.Thread(target=lambda: second.extend(agent.prompt("two")))
    other.start()
    other.join(30)
    go.set()
    texts = [e.message.text for e in events if e.type == "message_end"]
    assert texts == ["one", "first answer"]
    assert [m.text for m in second] == ["two", "second answer"]


def test_a_stream_closed_from_another_thread_ends_the_blocked_iteration():  # docs/threads.rst
    """close() of stream()'s iterator was a generator's close: called while the consumer thread
    waited inside it for the next event, it raised "ValueError: generator already executing" and
    the consumer stayed blocked until the run ended (a UI's cancel button could not stop it)."""
    import time

    gate = Gate()
    agent = Agent(stream_fn=gate.stream_fn)
    events = agent.stream("go")
    seen: List[str] = []
    finished = threading.Event()

    def consume() -> None:
        for event in events:
            seen.append(event.type)
        finished.set()

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    try:
        assert gate.started.wait(5)
        deadline = time.monotonic() + 5  # until the consumer waits inside it for the answer's next event
        while seen.count("message_start") < 2 or not events._events.gi_running:
            assert time.monotonic() < deadline
            threading.Event().wait(0.001)
        events.close()
        assert finished.wait(5) and agent.state.is_streaming  # ended while the run goes on
        assert "agent_end" not in seen
        assert len(agent._listeners) == 0  # the run's later events are not queued for nobody
        with pytest.raises(StopIteration):
            next(events)
    finally:
        agent.abort()
        assert agent.wait_for_idle(5)
    assert agent.messages[-1].stop_reason == "aborted"


def test_a_stream_left_with_break_stops_queueing_the_runs_events():  # docs/events.rst
    """The events of a run whose stream() loop was left used to be queued, one copy per streamed
    token, for nobody until the run ended (as agent.events() already avoids)."""
    import gc

    gate = Gate()
    agent = Agent(stream_fn=gate.stream_fn)
    try:
        for event in agent.stream("go"):
            if event.type == "agent_start":
                break
        gc.collect()  # the abandoned iterator is collected (at once in CPython, without cycles)
        assert agent.state.is_streaming and len(agent._listeners) == 0
    finally:
        agent.abort()
        assert agent.wait_for_idle(5)


def test_stream_busy_error_raises_at_call_time():  # agent-loop §2.16
    gate = Gate()
    agent = Agent(stream_fn=gate.stream_fn)
    agent.prompt("hi", wait=False)
    assert gate.started.wait(5)
    with pytest.raises(RuntimeError, match="already processing a prompt"):
        agent.stream("again")
    assert len(agent._listeners) == 0
    agent.abort()
    assert agent.wait_for_idle(5)


def test_prompt_without_waiting():  # DESIGN §2: wait=False then wait_for_idle
    gate = Gate()
    agent = Agent(stream_fn=gate.stream_fn)
    assert agent.prompt("hi", wait=False) is None
    assert agent.state.is_streaming is True and isinstance(agent.signal, AbortSignal)
    assert gate.started.wait(5)
    gate.release.set()
    assert agent.wait_for_idle(5) is True
    assert roles(agent.state.messages) == ["user", "assistant"]
    assert agent.signal is None


def test_prompt_with_images_and_message_list():  # agent-loop §3.6 input normalisation
    from agentcore.types import ImageContent

    scripted = ScriptedModel([text("a"), text("b")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    image = ImageContent(data="aGk=", mime_type="image/png")
    agent.prompt("look", images=[image])
    assert agent.state.messages[0].content == [TextContent("look"), image]
    batch = [UserMessage("x"), UserMessage("y")]
    new = agent.prompt(batch)
    assert new[0] is batch[0] and new[1] is batch[1]
    with pytest.raises(TypeError, match="prompt"):
        agent.prompt(42)
    assert agent.state.is_streaming is False


def test_reset_clears_transcript_and_queues():  # agent-loop §3.6 reset
    scripted = ScriptedModel([text("a")])
    agent = Agent(scripted.model, system_prompt="keep", stream_fn=scripted.stream_fn)
    agent.prompt("hi")
    agent.steer("later")
    agent.reset()
    assert agent.state.messages == [] and not agent.has_queued_messages()
    assert agent.state.error_message is None and agent.state.system_prompt == "keep"


def test_queue_modes_are_live_properties():  # agent-loop §3.1
    agent = Agent(steering_mode="all")
    assert agent.steering_mode == "all" and agent.follow_up_mode == "one-at-a-time"
    agent.follow_up_mode = "all"
    assert agent.follow_up_mode == "all"


def test_listener_subscribed_twice_is_called_once():  # agent-loop §3.4 listeners are a set
    scripted = ScriptedModel([text("a")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    seen = []

    def listener(event):
        seen.append(event.type)

    agent.subscribe(listener)
    agent.subscribe(listener)
    agent.prompt("hi")
    assert seen.count("agent_start") == 1


def test_model_without_provider_ends_with_an_error_naming_the_api(monkeypatch):  # agent-loop §2.1
    import agentcore.loop as loop_module

    monkeypatch.setattr(loop_module, "_default_stream_fn", None)
    agent = Agent()  # the placeholder model: api "unknown", which no plugin provides
    new = agent.prompt("hi")
    assert [m.role for m in new] == ["user", "assistant"]
    assert new[-1].stop_reason == "error"
    assert 'No provider registered for api "unknown"' in new[-1].error_message
    assert agent.state.error_message == new[-1].error_message
    assert agent.state.is_streaming is False


# agent-loop §3.6 step 2: prompt() takes a list of messages. A list of strings used to put raw str
# objects into the transcript that the converter then dropped, so the model saw no prompt at all.
def test_prompt_list_of_strings_reaches_the_model_and_bad_items_raise() -> None:
    seen: List[Any] = []

    def answer(context: Any) -> Any:
        seen.append([(m.role, m.content[0].text) for m in context.messages])
        return text("ok")

    scripted = ScriptedModel([answer])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    agent.prompt(["hello", "world"])
    assert seen == [[("user", "hello"), ("user", "world")]]
    assert [m.role for m in agent.messages] == ["user", "user", "assistant"]

    with pytest.raises(TypeError, match="item 1"):
        agent.prompt(["fine", 42])
    assert not agent.state.is_streaming and len(agent.messages) == 3


# An empty prompt list used to start a run anyway: the model answered its own last message (two
# assistant messages in a row) or, on a new agent, was called with no message at all.
def test_an_empty_prompt_list_is_refused_before_anything_runs() -> None:
    scripted = ScriptedModel([text("first"), text("unexpected")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    for empty in ([], ()):
        with pytest.raises(ValueError, match="empty list of messages"):
            agent.prompt(empty)
    assert scripted.calls == 0 and agent.messages == []
    agent.prompt("hi")
    with pytest.raises(ValueError, match="continue_"):
        agent.prompt([], wait=False)
    assert scripted.calls == 1 and roles(agent.messages) == ["user", "assistant"]
    assert not agent.state.is_streaming


# agent-loop §3.6 step 2: images join a *string* prompt. With a message (or list) they used to be
# dropped without a word, so the model never saw the picture the caller attached.
def test_images_with_a_message_prompt_are_not_dropped_silently() -> None:
    from agentcore.types import ImageContent, TextContent, UserMessage

    scripted = ScriptedModel([text("ok")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    image = ImageContent(data="aGk=", mime_type="image/png")
    with pytest.raises(TypeError, match="images"):
        agent.prompt(UserMessage(content=[TextContent("look")]), images=[image])
    assert agent.messages == [] and not agent.state.is_streaming
    agent.prompt("look", images=[image])
    assert [b.type for b in agent.messages[0].content] == ["text", "image"]


# agent-loop §3.6 finishRun (always): when the run thread cannot be started (the interpreter is out
# of threads), prompt() must raise and leave the agent idle, not busy forever.
def test_run_thread_start_failure_leaves_the_agent_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    import agentcore.agent as agent_module

    scripted = ScriptedModel([text("ok")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    agent.steer("queued")

    def no_threads(*args: Any) -> None:
        raise RuntimeError("can't start new thread")

    with monkeypatch.context() as patch:
        patch.setattr(agent_module, "start_daemon", no_threads)
        with pytest.raises(RuntimeError, match="can't start new thread"):
            agent.prompt("go")
        assert agent.state.is_streaming is False
        assert agent.signal is None
        assert agent.wait_for_idle(timeout=1) is True
        with pytest.raises(RuntimeError, match="can't start new thread"):
            agent.stream("go")
        assert agent.state.is_streaming is False
    assert agent.has_queued_messages()
    assert [m.role for m in agent.prompt("again")] == ["user", "user", "assistant"]


# agent-loop §3.4: subscribe() takes any callable. A callable dataclass instance (unhashable, as
# dataclasses with eq=True are) used to make subscribe() raise TypeError.
def test_a_listener_unsubscribed_by_an_earlier_one_is_not_called_for_that_event():  # agent-loop §3.4
    """A listener tearing down a later one (closing its log file and unsubscribing it) used to see
    that later listener still called with the same event: its write to the closed file raised and
    turned a good run into a failure run."""
    import io

    scripted = ScriptedModel([text("hi")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    log = io.StringIO()

    def teardown(event):
        if event.type == "agent_end":
            log.close()
            unsubscribe_writer()

    agent.subscribe(teardown)
    unsubscribe_writer = agent.subscribe(lambda event: log.write(event.type + "\n"))
    agent.prompt("go")
    assert agent.state.error_message is None
    assert roles(agent.state.messages) == ["user", "assistant"]
    assert agent.state.messages[-1].stop_reason == "stop"


def test_unhashable_callable_listener_can_subscribe_and_unsubscribe() -> None:
    from dataclasses import dataclass, field

    @dataclass
    class Recorder:
        seen: List[str] = field(default_factory=list)

        def __call__(self, event: Any) -> None:
            self.seen.append(event.type)

    scripted = ScriptedModel([text("one"), text("two")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    first, second = Recorder(), Recorder()
    unsubscribe_first = agent.subscribe(first)
    agent.subscribe(second)
    agent.prompt("go")
    assert first.seen[0] == "agent_start" and first.seen[-1] == "agent_end"
    assert second.seen == first.seen
    unsubscribe_first()
    agent.prompt("again")
    assert len(second.seen) == 2 * len(first.seen)


# agent-loop §3.4/§8.1: listeners are called synchronously; async listeners are not supported. An
# ``async def`` listener used to be accepted and then silently never run ("never awaited").
def test_async_listener_is_refused_at_subscribe() -> None:
    scripted = ScriptedModel([text("ok")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)

    async def listener(event: Any) -> None:
        pass

    with pytest.raises(TypeError, match="async listener"):
        agent.subscribe(listener)
    assert agent.prompt("go")[-1].text == "ok"


# agent-loop §3.5: steer()/follow_up() queue messages. A list (or any non-message) used to be queued
# as one "message" and injected into the transcript as is, where the model never saw it.
def test_steer_and_follow_up_refuse_non_messages() -> None:
    scripted = ScriptedModel([text("ok")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    with pytest.raises(TypeError, match="steer"):
        agent.steer(["a", "b"])
    with pytest.raises(TypeError, match="follow_up"):
        agent.follow_up(None)
    assert not agent.has_queued_messages()
    agent.steer({"role": "custom", "customType": "note", "content": "x", "display": False, "timestamp": 1})
    agent.follow_up("later")
    assert agent.has_queued_messages()


# agent-loop §2.12/§2.6: queue modes are "one-at-a-time" or "all", tool execution "parallel" or
# "sequential". A typo ("All", "sequental") used to mean the default silently.
def test_a_thinking_level_typo_is_refused_with_a_did_you_mean() -> None:
    scripted = ScriptedModel([text("ok")])
    with pytest.raises(ValueError, match=r"thinking_level must be one of off, .*not 'hgih'; did you mean 'high'\?"):
        Agent(scripted.model, thinking_level="hgih")
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn, thinking_level="low")
    with pytest.raises(ValueError, match="not 'bogus'"):
        agent.thinking_level = "bogus"
    assert agent.thinking_level == "low"
    agent.thinking_level = None  # "off", as before
    assert agent.thinking_level == "off"


def _echo_tool(name: str) -> AgentTool:
    return AgentTool(name, "d", {"type": "object", "properties": {}}, lambda i, a, s, u: AgentToolResult(content=name))


def test_constructor_arguments_of_the_wrong_kind_are_refused_naming_them() -> None:
    scripted = ScriptedModel([text("ok")])
    with pytest.raises(TypeError, match=r"Agent\(model=...\) takes a Model, a 'provider/id' string or None, not int"):
        Agent(5)
    with pytest.raises(TypeError, match="not dict"):
        Agent({"id": "x"})
    with pytest.raises(TypeError, match=r"Agent\(session=...\) takes a Session or None, not int"):
        Agent(scripted.model, session=5)
    # the two mistakes a first script makes get told what to pass instead
    with pytest.raises(TypeError, match=r"not ScriptedModel \(pass its \.model\)"):
        Agent(scripted)
    with pytest.raises(TypeError, match=r"not str \(open a file with Session\.open\(path\)"):
        Agent(scripted.model, session="chat.jsonl")
    for name in ("stream_fn", "get_api_key", "before_tool_call", "should_stop_after_turn", "convert_to_llm"):
        with pytest.raises(TypeError, match=rf"Agent\({name}=...\) must be a function or None, not int"):
            Agent(scripted.model, **{name: 5})
    with pytest.raises(TypeError, match=r"subscribe\(\) takes a function, not NoneType"):
        Agent(scripted.model).subscribe(None)  # type: ignore[arg-type]


# every Agent attribute that holds a function: the hooks, get_api_key and stream_fn
FUNCTION_ATTRIBUTES = tuple(
    name for name, value in vars(Agent).items() if type(value).__name__ in ("_FunctionAttribute", "_HookAttribute")
)
assert len(FUNCTION_ATTRIBUTES) == 8 and {"before_tool_call", "stream_fn", "prepare_next_turn"} <= set(
    FUNCTION_ATTRIBUTES
)


@pytest.mark.parametrize("name", FUNCTION_ATTRIBUTES)
def test_a_function_attribute_refuses_a_value_that_is_not_one(name) -> None:
    """``agent.before_tool_call = 5`` was accepted; the next run then gave the model the tool error
    "'int' object is not callable" (or failed the run, for transform_context)."""
    scripted = ScriptedModel([text("ok")])
    agent = Agent(scripted.model)
    with pytest.raises(TypeError, match=rf"Agent\.{name} must be a function or None, not int"):
        setattr(agent, name, 5)
    assert getattr(agent, name) is None  # unchanged
    hook = lambda *args: None  # noqa: E731
    setattr(agent, name, hook)
    assert getattr(agent, name) is hook and vars(agent)[name] is hook
    setattr(agent, name, None)
    assert getattr(agent, name) is None


def test_a_hook_assigned_after_construction_is_used() -> None:
    seen = []
    scripted = ScriptedModel([tool_call("echo", {}), text("done")])
    agent = Agent(scripted.model, tools=[_echo_tool("echo")])
    agent.before_tool_call = lambda ctx, signal=None: seen.append(ctx.tool_call.name)
    agent.prompt("go")
    assert seen == ["echo"]


def test_messages_must_be_a_list_of_messages() -> None:
    scripted = ScriptedModel([text("ok")])
    with pytest.raises(TypeError, match=r"Agent\(messages=...\) must be a list of messages, not str"):
        Agent(scripted.model, messages="hello")
    with pytest.raises(TypeError, match=r"Agent\(messages=...\) item 1 has no 'role' \(it is int\)"):
        Agent(scripted.model, messages=[UserMessage("hi"), 5])
    agent = Agent(
        scripted.model, stream_fn=scripted.stream_fn, messages=[{"role": "user", "content": "hi", "timestamp": 1}]
    )
    with pytest.raises(TypeError, match=r"agent.messages must be a list of messages, not str"):
        agent.messages = "abc"
    assert len(agent.messages) == 1  # unchanged


def test_tool_names_must_be_unique_and_non_empty() -> None:
    """The model calls tools by name: a second tool of one name could never be reached, and the
    loop and the approval check would have to agree on which one runs."""
    scripted = ScriptedModel([text("ok")])
    with pytest.raises(ValueError, match=r"tools items 0 and 1 are both named 'shell': tool names must be unique"):
        Agent(scripted.model, tools=[_echo_tool("shell"), _echo_tool("shell")])
    agent = Agent(scripted.model, tools=[_echo_tool("a")])
    with pytest.raises(ValueError, match="both named 'read'"):
        agent.tools = ["read", _echo_tool("read")]  # a registered name and an object
    with pytest.raises(TypeError, match="tools item 0 has no name"):
        Agent(scripted.model, tools=[_echo_tool("")])
    assert [t.name for t in agent.tools] == ["a"]


def test_mode_typos_raise_instead_of_meaning_the_default() -> None:
    scripted = ScriptedModel([text("ok")])
    with pytest.raises(ValueError, match="queue mode"):
        Agent(scripted.model, steering_mode="All")
    with pytest.raises(ValueError, match="tool_execution"):
        Agent(scripted.model, tool_execution="sequental")
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn, follow_up_mode="all")
    with pytest.raises(ValueError, match="queue mode"):
        agent.follow_up_mode = "every"
    assert agent.follow_up_mode == "all"
    agent.tool_execution = "paralel"
    with pytest.raises(ValueError, match="tool_execution"):
        agent.prompt("go")
    assert not agent.state.is_streaming and agent.messages == []
    agent.tool_execution = "sequential"
    assert agent.prompt("go")[-1].text == "ok"


# agent-loop §3.2: reasoning comes from thinking_level, "off" becomes none. None (the natural way
# to say "no thinking" in Python) used to reach the provider as the level "None".
def test_thinking_level_none_means_off() -> None:
    from agentcore.types import Model

    model = Model(id="thinker", api="scripted", provider="scripted", reasoning=True)
    scripted = ScriptedModel([text("a"), text("b"), text("c")], model=model)
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn, thinking_level=None)
    agent.prompt("one")
    assert agent.thinking_level == "off"
    agent.thinking_level = "high"
    agent.prompt("two")
    agent.state.thinking_level = None
    agent.prompt("three")
    assert [options.get("reasoning") for options in scripted.options] == [None, "high", None]


# Agent(model="provider/id") resolves through the registry, whose Model objects are shared. An
# agent changing its own model (base_url, headers with credentials, max_tokens) used to change the
# registry's model and so every other agent built from the same name.
def test_model_by_name_is_the_agents_own_copy() -> None:
    from agentcore.plugins import get_model, models

    key = models()[0].key
    original_url = get_model(key).base_url
    first, second = Agent(key), Agent(key)
    assert first.model == get_model(key)
    first.model.base_url = "http://127.0.0.1:9/v1"
    first.model.headers = {"Authorization": "Bearer secret"}
    assert second.model.base_url == original_url and not second.model.headers
    assert get_model(key).base_url == original_url and not get_model(key).headers


# agent-loop §3.6 failure run: whatever broke the run, listeners get the failure sequence and the
# transcript ends with the failure message. A state.model that is not a Model (a "provider/id"
# string assigned through state) made the failure path itself crash: no agent_end, prompt() → [].
def test_model_setter_resolves_names_and_a_broken_model_still_fails_cleanly() -> None:
    from agentcore.plugins import UnknownModelError, get_model, models

    key = models()[0].key
    scripted = ScriptedModel([text("ok")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    agent.model = key
    assert agent.model == get_model(key) and agent.model is not get_model(key)
    with pytest.raises(UnknownModelError):
        agent.model = "no-such-provider/no-such-model"

    agent = Agent(scripted.model)
    seen: List[str] = []
    agent.subscribe(lambda event: seen.append(event.type))
    agent.state.model = "no-such-provider/no-such-model"
    result = agent.prompt("hi")
    assert [m.stop_reason for m in result] == ["error"]
    assert result[0].error_message
    assert seen[-1] == "agent_end"
    assert agent.messages[-1] is result[0] and not agent.state.is_streaming


# --------------------------------------------------------------------------- the scripted model


def test_scripted_model_through_the_provider_registry():  # DESIGN §4: built-ins are plugins too
    scripted = ScriptedModel([text("via the registry")])
    agent = Agent(scripted.model)  # no stream_fn: agentcore.providers.stream -> api "scripted"
    agent.prompt("hi")
    assert agent.state.messages[-1].text == "via the registry"
    assert scripted.calls == 1


def test_scripted_model_streams_words_and_records_calls():
    scripted = ScriptedModel([text("one two three"), "plain string"], tokens_per_second=100000)
    agent = Agent(scripted.model, system_prompt="sp", stream_fn=scripted.stream_fn)
    deltas = []
    agent.subscribe(
        lambda e: (
            e.type == "message_update"
            and e.assistant_message_event.type == "text_delta"
            and deltas.append(e.assistant_message_event.delta)
        )
    )
    agent.prompt("a")
    agent.prompt("b")
    assert deltas == ["one ", "two ", "three", "plain ", "string"]
    assert scripted.calls == 2 and scripted.remaining == 0
    assert [c.system_prompt for c in scripted.contexts] == ["sp", "sp"]
    assert len(scripted.contexts[0].messages) == 1 and len(scripted.contexts[1].messages) == 3
    agent.prompt("c")
    assert agent.state.messages[-1].error_message == "No more scripted responses"
    assert scripted.calls == 3


def test_scripted_error_and_pre_aborted_calls():
    from agentcore.signals import AbortController
    from agentcore.types import AgentContext

    scripted = ScriptedModel([ScriptedModel.error("rate limited"), text("kept")])
    controller = AbortController()
    controller.abort()
    aborted = scripted.stream_fn(scripted.model, AgentContext(), signal=controller.signal).result()
    assert aborted.stop_reason == "aborted" and aborted.error_message == "Request was aborted"
    assert scripted.remaining == 2  # an aborted call does not use up a response
    failed = scripted.stream_fn(scripted.model, AgentContext(), unknown_option=True).result()
    assert failed.stop_reason == "error" and failed.error_message == "rate limited"
    events = list(scripted.stream_fn(scripted.model, AgentContext()))
    assert [e.type for e in events] == ["start", "text_start", "text_delta", "text_end", "done"]


def test_scripted_stream_is_a_provider_stream():
    """The scripted stream's result() took no timeout: code written against a provider's
    ``stream(...).result(timeout=...)`` failed with TypeError against the scripted model."""
    from agentcore.streams import ProviderStream
    from agentcore.types import AgentContext

    scripted = ScriptedModel(["hello there"])
    stream = scripted.stream_fn(scripted.model, AgentContext())
    assert isinstance(stream, ProviderStream)
    assert stream.result(timeout=5).content[0].text == "hello there"
    assert [e.type for e in stream] == ["start", "text_start", "text_delta", "text_end", "done"]


def test_scripted_tool_call_with_arguments_json_cannot_hold_still_streams():
    """The toolcall_delta text was json.dumps(arguments): a date (or a set) raised TypeError in
    the middle of the stream, and result() then failed with a bare AssertionError."""
    import datetime

    from agentcore.types import AgentContext

    when = datetime.date(2024, 1, 2)
    scripted = ScriptedModel([response(call("book", {"when": when, "tags": {"a"}}, id="c1"))])
    stream = scripted.stream_fn(scripted.model, AgentContext())
    events = list(stream)
    assert [e.type for e in events][-2:] == ["toolcall_end", "done"]
    assert '"when": "2024-01-02"' in events[2].delta  # json_safe writes a date as its ISO text
    assert stream.result(timeout=0).content[0].arguments["when"] is when  # the tool gets them as scripted


def test_scripted_token_rate_paces_without_a_signal_and_aborts_promptly():
    """Without a signal the token rate was ignored (its only wait was ``signal.wait``)."""
    import time

    from agentcore.signals import AbortController
    from agentcore.types import AgentContext

    scripted = ScriptedModel(["a b c d e"], tokens_per_second=50)
    started = time.monotonic()
    assert scripted.stream_fn(scripted.model, AgentContext()).result().content[0].text == "a b c d e"
    assert time.monotonic() - started >= 4 / 50  # five words: at least four pauses of 1/50 s

    slow = ScriptedModel(["one two three"], tokens_per_second=0.01)  # 100 s a word
    controller = AbortController()
    stream = slow.stream_fn(slow.model, AgentContext(), signal=controller.signal)
    iterator = iter(stream)
    assert [next(iterator).type, next(iterator).type] == ["start", "text_start"]
    threading.Thread(target=controller.abort).start()  # while the stream waits out the first word
    final = stream.result(timeout=10)
    assert final.stop_reason == "aborted" and final.content[0].text == ""


def test_tools_given_by_name_resolve_through_the_registry(tmp_path):  # DESIGN §3: tools as names
    (tmp_path / "marker.txt").write_text("x")
    scripted = ScriptedModel([tool_call("ls", {"path": str(tmp_path)}), text("listed")])
    agent = Agent(scripted.model, tools=["ls"], stream_fn=scripted.stream_fn)
    agent.prompt("list")
    result = [m for m in agent.state.messages if m.role == "toolResult"][0]
    assert not result.is_error and "marker.txt" in result.text
    assert agent.state.tools == ["ls"]  # the state keeps what was given


def test_a_system_prompt_that_is_no_text_is_refused_where_it_is_given():
    """``Agent(model, [tool])`` put the tools into the system prompt: the agent was built, and
    every run then failed with "expected string or bytes-like object, got 'list'"."""
    scripted = ScriptedModel([text("ok")])
    with pytest.raises(TypeError, match=r"system_prompt must be a str, not list \(tools go in tools=\.\.\.\)"):
        Agent(scripted.model, [noop_tool("t", lambda *a: "x")], stream_fn=scripted.stream_fn)
    agent = Agent(scripted.model, None, stream_fn=scripted.stream_fn)
    assert agent.system_prompt == ""
    for target in (agent, agent.state):
        with pytest.raises(TypeError, match="system_prompt must be a str, not int"):
            target.system_prompt = 5
    agent.prompt("hi")
    assert agent.messages[-1].text == "ok"


def test_unknown_tool_names_fail_at_construction_and_assignment():  # issue 10 item 10
    from agentcore.plugins import UnknownToolError

    scripted = ScriptedModel([text("ok")])
    with pytest.raises(UnknownToolError, match="'reed'.*read"):  # the did-you-mean list
        Agent(scripted.model, tools=["reed"], stream_fn=scripted.stream_fn)
    agent = Agent(scripted.model, tools=["read"], stream_fn=scripted.stream_fn)
    with pytest.raises(UnknownToolError, match="no-such-tool"):
        agent.tools = ["ls", "no-such-tool"]
    assert agent.tools == ["read"]  # a refused assignment changes nothing
    with pytest.raises(TypeError, match="tools item 0 is a int"):
        agent.tools = [42]
    with pytest.raises(TypeError, match="list of tools, not str"):
        agent.tools = "read"


def test_plain_functions_are_wrapped_as_tool_would():  # issue 10 item 10
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    scripted = ScriptedModel([tool_call("add", {"a": 2, "b": 3}), text("5")])
    agent = Agent(scripted.model, tools=[add], stream_fn=scripted.stream_fn)
    assert agent.tools[0].name == "add" and agent.tools[0].description == "Add two numbers."
    agent.prompt("2+3?")
    result = [m for m in agent.state.messages if m.role == "toolResult"][0]
    assert not result.is_error and result.text == "5"
    agent.tools = [add]
    assert isinstance(agent.tools[0], AgentTool)


def test_prompt_reads_message_dicts_and_refuses_bad_ones():  # issue 10 item 10
    scripted = ScriptedModel([text("one"), text("two"), text("three")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    agent.prompt({"role": "user", "content": "hi", "timestamp": 1})
    first = agent.state.messages[0]
    assert isinstance(first, UserMessage) and first.role == "user" and first.text == "hi"
    agent.prompt([{"role": "user", "content": [{"type": "text", "text": "a"}], "timestamp": 2}, "b"])
    assert [m.text for m in agent.state.messages if m.role == "user"] == ["hi", "a", "b"]
    agent.follow_up({"role": "user", "content": "later", "timestamp": 3})
    agent.steer({"role": "user", "content": "now", "timestamp": 4})
    agent.prompt("go")
    assert all(isinstance(m, UserMessage) for m in agent.state.messages if m.role == "user")

    for bad, problem in (({"role": "usr", "content": "x"}, "unknown role 'usr'"), ({"content": "x"}, "has no 'role'")):
        with pytest.raises(TypeError, match=problem):
            agent.prompt(bad)
        with pytest.raises(TypeError, match=problem):
            agent.steer(bad)
        with pytest.raises(TypeError, match=problem):
            agent.prompt([bad])
    with pytest.raises(TypeError, match="malformed 'user' message"):
        agent.follow_up({"role": "user"})
    assert not agent.state.is_streaming


def test_prompt_on_a_thread_running_an_event_loop_warns_once():  # issue 10 item 13
    import asyncio
    import warnings

    scripted = ScriptedModel([text("a"), text("b"), text("c")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)

    async def main():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            agent.prompt("one")
            agent.prompt("two")
            return caught

    caught = asyncio.run(main())
    assert [w.category for w in caught] == [RuntimeWarning]
    assert "await asyncio.to_thread(agent.prompt" in str(caught[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        agent.prompt("no loop here, no warning")


def test_in_a_kernel_only_the_cells_own_loop_is_left_unwarned(monkeypatch):  # issue 10 item 13
    """Inside Jupyter every loop was exempt, so a user's own ``asyncio.run(main())`` on a worker
    thread of a notebook, whose loop ``prompt()`` stalls, got no warning."""
    import asyncio
    import types
    import warnings

    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: object()))
    scripted = ScriptedModel([text("a"), text("b")])

    async def prompt_in_a_loop():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            Agent(scripted.model, stream_fn=scripted.stream_fn).prompt("hi")
            return [w.category for w in caught]

    assert asyncio.run(prompt_in_a_loop()) == []  # the main thread: a cell's loop
    seen: List[Any] = []
    worker = threading.Thread(target=lambda: seen.append(asyncio.run(prompt_in_a_loop())))
    worker.start()
    worker.join(30)
    assert seen == [[RuntimeWarning]]


def test_listener_arity_detection():  # agent-loop §3.4: listener(event) or listener(event, signal)
    from agentcore.agent import _accepts_signal

    class Sink:
        def one(self, event):
            pass

        def two(self, event, signal):
            pass

    assert _accepts_signal(lambda event, signal: None) and _accepts_signal(Sink().two)
    assert not _accepts_signal(lambda *args: None)
    assert not _accepts_signal(Sink().one) and not _accepts_signal(lambda event, verbose=False: None)
    assert not _accepts_signal(print)


def test_should_stop_after_turn_accepts_the_references_one_argument_shape():  # issue 10 item 12
    from agentcore.testing import ScriptedModel

    seen = []
    scripted = ScriptedModel(
        [ScriptedModel.tool_call("echo", {"value": "x"}, id="t1"), ScriptedModel.text("never requested")]
    )
    echo = Echo()
    agent = Agent(
        scripted.model,
        tools=[echo.tool],
        should_stop_after_turn=lambda ctx: seen.append(ctx.message.stop_reason) or True,
    )
    new = agent.prompt("go")
    assert seen == ["toolUse"] and [m.role for m in new] == ["user", "assistant", "toolResult"]

    def two_arguments(ctx, signal):
        seen.append(signal is not None)
        return True

    scripted.push(ScriptedModel.tool_call("echo", {"value": "y"}, id="t2"))
    agent.should_stop_after_turn = two_arguments
    agent.prompt("again")
    assert seen[-1] is True


def test_plugins_registered_on_one_agent_never_reach_an_agent_sharing_the_default_manager():
    from agentcore import BeforeToolCallResult, hookimpl
    from agentcore.testing import ScriptedModel

    class Blocks:
        @hookimpl
        def before_tool_call(self, context, signal):
            return BeforeToolCallResult(block=True, reason="blocked")

    first, second = (
        ScriptedModel([ScriptedModel.tool_call("echo", {"value": "a"}), ScriptedModel.text("ok")]),
        ScriptedModel([ScriptedModel.tool_call("echo", {"value": "b"}), ScriptedModel.text("ok")]),
    )
    echo = Echo()
    plain = Agent(second.model, tools=[echo.tool])
    blocked = Agent(first.model, tools=[echo.tool])
    blocked.plugins.register(Blocks())
    blocked.before_tool_call = lambda ctx, signal: None  # a callable set later: its own manager too
    blocked.prompt("go")
    plain.prompt("go")
    assert echo.executed == ["b"]
    assert plain.plugins.hook.before_tool_call(context=None, signal=None) is None


def test_every_provider_option_is_settable_on_the_agent():  # issue 10 item 11, issue 11 §3
    from agentcore.options import OPTION_NAMES, StreamOptions

    scripted = ScriptedModel([text("a"), text("b"), text("c")])
    agent = Agent(
        scripted.model,
        stream_fn=scripted.stream_fn,
        max_retries=2,
        timeout=(3, 30),
        tool_choice="auto",
        service_tier="flex",
    )
    agent.prompt("one")
    first = scripted.options[0]
    assert (first["max_retries"], first["timeout"], first["tool_choice"]) == (2, (3, 30), "auto")
    assert first["service_tier"] == "flex"
    agent.max_retries = 0  # an attribute, read when the next run starts
    agent.prompt("two")
    assert scripted.options[1]["max_retries"] == 0 and agent.options.max_retries == 0
    # one value for all of them; keywords win over it
    other = Agent(
        scripted.model, stream_fn=scripted.stream_fn, options=StreamOptions(temperature=0.1, max_tokens=7), max_tokens=8
    )
    other.prompt("three")
    assert (scripted.options[2]["temperature"], scripted.options[2]["max_tokens"]) == (0.1, 8)
    assert all(hasattr(agent, name) for name in OPTION_NAMES if name != "reasoning")


def test_an_unknown_or_misplaced_agent_option_is_a_clear_type_error():
    with pytest.raises(TypeError, match=r"unknown option 'temprature' \(did you mean 'temperature'\?\)"):
        Agent(temprature=0.2)
    with pytest.raises(TypeError, match="thinking_level"):
        Agent(reasoning="high")


def test_headers_option_never_shows_in_reprs():
    agent = Agent(headers={"Authorization": "Bearer sk-secret"})
    assert "sk-secret" not in repr(agent) and "sk-secret" not in repr(agent.options)


def test_state_runtime_fields_are_read_only_and_change_through_its_reducer():  # issue 11 §5
    from agentcore.events import MessageEndEvent, ToolExecutionEndEvent, ToolExecutionStartEvent

    agent = Agent()
    state = agent.state
    for name in ("is_streaming", "streaming_message", "pending_tool_calls", "error_message"):
        with pytest.raises(AttributeError):
            setattr(state, name, None)
    with pytest.raises(AttributeError):
        state._is_streaming = True  # no second busy flag to set behind the run's back
    state.reduce(ToolExecutionStartEvent("c1", "echo", {}))
    assert state.pending_tool_calls == frozenset({"c1"})
    state.reduce(ToolExecutionEndEvent("c1", "echo", None, False))
    message = UserMessage("hi")
    state.reduce(MessageEndEvent(message))
    assert state.pending_tool_calls == frozenset() and state.messages == [message]


def test_busy_is_one_fact_a_compaction_is_busy_but_not_streaming():  # issue 11 §5
    seen = []

    def work(signal):
        seen.append(agent.state.is_streaming)
        with pytest.raises(RuntimeError, match="already processing"):
            agent.prompt("hi")

    agent = Agent(ScriptedModel([text("ok")]).model)
    agent._while_busy(work)  # what compact() and navigate_tree() run in
    assert seen == [False] and agent.state.is_streaming is False
    assert agent.prompt("hi")[-1].text == "ok"  # idle again


# --------------------------------------------------------------------------- exceptions whose str() raises


class Unprintable(Exception):
    """An exception whose message cannot be read: formatting it raises ZeroDivisionError."""

    def __str__(self) -> str:
        return str(1 / 0)

    __repr__ = __str__


def _settles(agent: Agent, text: str = "go") -> List[Any]:
    """Prompt without waiting, then wait (a hang guard, not a timing assertion)."""
    agent.prompt(text, wait=False)
    assert agent.wait_for_idle(timeout=60), "the run never settled"
    assert agent.state.is_streaming is False
    return agent.state.messages


def _raising_tool(name: str, inline: bool) -> AgentTool:
    from agentcore.tools import tool

    if inline:  # a lone @tool without on_update executes on the run thread

        def boom() -> str:
            """Fail."""
            raise Unprintable()

        return tool(boom, name=name)

    def execute(tool_call_id, args, signal, on_update):
        raise Unprintable()

    return AgentTool(name=name, label=name, description="fails", parameters={"type": "object"}, execute=execute)


@pytest.mark.parametrize("inline", [True, False], ids=["run-thread", "worker-thread"])
def test_tool_exception_whose_str_raises_ends_the_run(inline):  # issue 10 item 1
    scripted = ScriptedModel([tool_call("boom", {}), text("done")])
    agent = Agent(scripted.model, tools=[_raising_tool("boom", inline)], stream_fn=scripted.stream_fn)
    messages = _settles(agent)
    result = [m for m in messages if m.role == "toolResult"][0]
    assert result.is_error and "Unprintable" in result.text
    assert messages[-1].role == "assistant" and messages[-1].text == "done"


def test_listener_exception_whose_str_raises_fails_the_run_cleanly():  # issue 10 item 1
    scripted = ScriptedModel([text("hi")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)

    def listener(event):
        if event.type == "message_end" and event.message.role == "assistant":
            raise Unprintable()

    agent.subscribe(listener)
    messages = _settles(agent)
    assert messages[-1].stop_reason == "error" and "Unprintable" in messages[-1].error_message


def test_update_listener_exception_whose_str_raises_fails_the_run_cleanly():  # issue 10 item 1
    released = threading.Event()

    def execute(tool_call_id, args, signal, on_update):
        on_update(AgentToolResult(content=[TextContent("partial")]))
        released.wait(30)  # the failure run aborts the signal ...
        return AgentToolResult(content=[TextContent("late")])

    tool_obj = AgentTool(name="slow", label="slow", description="", parameters={"type": "object"}, execute=execute)
    scripted = ScriptedModel([tool_call("slow", {}), text("done")])
    agent = Agent(scripted.model, tools=[tool_obj], stream_fn=scripted.stream_fn)

    def listener(event):
        if event.type == "tool_execution_update":
            raise Unprintable()

    agent.subscribe(listener)
    try:
        messages = _settles(agent)
    finally:
        released.set()
    assert messages[-1].stop_reason in ("error", "aborted") and "Unprintable" in messages[-1].error_message


@pytest.mark.parametrize("hook", ["before_tool_call", "after_tool_call"])
def test_tool_hook_exception_whose_str_raises_is_an_error_result(hook):  # issue 10 item 1
    from agentcore.tools import tool

    @tool
    def fine() -> str:
        """Works."""
        return "ok"

    def raising(ctx, signal):
        raise Unprintable()

    scripted = ScriptedModel([tool_call("fine", {}), text("done")])
    agent = Agent(scripted.model, tools=[fine], stream_fn=scripted.stream_fn, **{hook: raising})
    messages = _settles(agent)
    result = [m for m in messages if m.role == "toolResult"][0]
    assert result.is_error and "Unprintable" in result.text
    assert messages[-1].text == "done"


def test_contextvars_of_the_caller_reach_listeners_hooks_tools_and_the_provider():  # tracing needs it
    import contextvars

    from agentcore.tools import tool

    span: contextvars.ContextVar[str] = contextvars.ContextVar("span", default="none")
    seen: dict = {}

    @tool
    def probe() -> str:
        """Reads the contextvar."""
        seen["tool"] = span.get()
        span.set("changed-by-tool")  # stays inside the tool's own copy
        return "ok"

    @tool
    def probe2(on_update=None) -> str:  # on_update: a worker thread, not the run thread
        """Reads the contextvar too."""
        seen["worker"] = span.get()
        return "ok"

    scripted = ScriptedModel([response(call("probe", {}, "c1")), response(call("probe2", {}, "c2")), text("done")])

    def stream_fn(model, context, **options):
        seen.setdefault("provider", span.get())
        return scripted.stream_fn(model, context, **options)

    def before(ctx, signal):
        seen.setdefault("hook", span.get())

    agent = Agent(scripted.model, tools=[probe, probe2], stream_fn=stream_fn, before_tool_call=before)
    agent.subscribe(lambda event: seen.setdefault("listener", span.get()))
    token = span.set("caller-span")
    try:
        agent.prompt("go")
    finally:
        span.reset(token)
    assert seen == {
        "tool": "caller-span",
        "worker": "caller-span",
        "provider": "caller-span",
        "hook": "caller-span",
        "listener": "caller-span",
    }
    assert span.get() == "none"


def test_streaming_message_is_a_copy_even_when_no_listener_takes_update_copies():  # issue 11 §7
    from agentcore.events import DoneEvent, TextDeltaEvent, TextStartEvent

    seen = []

    def stream_fn(model, context, **options):
        partial = AssistantMessage([], api="x", provider="x", model="x")
        yield StartEvent(partial)
        partial.content.append(TextContent(""))
        yield TextStartEvent(0, partial)
        for word in ("a", "b"):
            partial.content[0].text += word
            yield TextDeltaEvent(0, word, partial)
            current = agent.state.streaming_message
            seen.append((current is partial, current.content[0].text))
        final = partial.copy()
        final.stop_reason = "stop"
        yield DoneEvent("stop", final)

    agent = Agent(Model.placeholder(), stream_fn=stream_fn)
    assert agent.prompt("go")[-1].text == "ab"
    assert seen == [(False, "a"), (False, "ab")] and agent.state.streaming_message is None


def test_unobserved_tokens_cost_no_event_and_a_late_listener_gets_copies(monkeypatch):  # issue 11 §7
    from agentcore import loop
    from agentcore.events import DoneEvent, MessageUpdateEvent, TextDeltaEvent, TextStartEvent

    made: List[Any] = []

    class CountedUpdate(MessageUpdateEvent):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            made.append(self)

    monkeypatch.setattr(loop, "MessageUpdateEvent", CountedUpdate)
    late: List[Any] = []
    texts: List[str] = []

    def stream_fn(model, context, **options):
        partial = AssistantMessage([], api="x", provider="x", model="x")
        yield StartEvent(partial)
        partial.content.append(TextContent(""))
        yield TextStartEvent(0, partial)
        for index, word in enumerate("abcdef"):
            partial.content[0] = TextContent(partial.content[0].text + word)  # as providers do
            yield TextDeltaEvent(0, word, partial)
            texts.append(agent.state.streaming_message.content[0].text)
            if index == 3:
                agent.subscribe(lambda event: late.append(event))
        final = partial.copy()
        final.stop_reason = "stop"
        yield DoneEvent("stop", final)

    agent = Agent(Model.placeholder(), stream_fn=stream_fn)
    for impl in agent.plugins.hook.on_event.get_hookimpls():  # installed observers aside
        agent.plugins.unregister(impl.plugin)
    assert agent.prompt("go")[-1].text == "abcdef"
    assert texts == ["a", "ab", "abc", "abcd", "abcde", "abcdef"]  # the state follows every token
    assert len(made) == 1 + 2  # one uncopied update for the live partial, then one per token seen
    updates = [e for e in late if e.type == "message_update"]
    assert [u.message.content[0].text for u in updates] == ["abcde", "abcdef"]
    assert len({id(u.message) for u in updates}) == 2  # copies, not the live partial


def test_prompt_from_another_thread_runs_there_in_a_copy_of_its_context():  # issue 11 §7
    import contextvars

    request = contextvars.ContextVar("request", default=None)
    scripted = ScriptedModel([tool_call("echo", {"value": "v"}), text("done")])
    agent = Agent(scripted.model, tools=[Echo().tool], stream_fn=scripted.stream_fn)
    seen: List[Any] = []
    refused: List[Any] = []

    def listener(event: Any) -> None:
        seen.append((threading.get_ident(), request.get()))
        if event.type == "agent_start":
            request.set("set by a listener")  # stays inside the run
            try:
                agent.wait_for_idle()  # it would wait for itself
            except RuntimeError as exc:
                refused.append(str(exc))

    agent.subscribe(listener)
    caller: dict = {}

    def call_prompt() -> None:
        request.set("req-1")
        caller["new"] = agent.prompt("go")
        caller["ident"], caller["after"] = threading.get_ident(), request.get()

    thread = threading.Thread(target=call_prompt)
    thread.start()
    thread.join()
    assert [m.role for m in caller["new"]] == ["user", "assistant", "toolResult", "assistant"]
    assert {ident for ident, _ in seen} == {caller["ident"]}  # no run thread, no hand-over
    assert seen[0] == (caller["ident"], "req-1") and caller["after"] == "req-1"
    assert refused and "run thread" in refused[0]
    assert not agent.state.is_streaming and agent.wait_for_idle()


def test_a_finished_run_leaves_no_reference_cycles():  # issue 11 §7: runs freed by refcounting
    """A run's config, hooks, emitter, signal and streams are freed when it ends, not left for the
    cycle collector (a reused Agent made about 90 such objects per run, each collection's work)."""
    import gc

    from agentcore.tools import tool

    @tool
    def multiply(a: int, b: int) -> int:
        """Multiply."""
        return a * b

    scripted = ScriptedModel([tool_call("multiply", {"a": 6, "b": 7}), text("42")] * 4)
    agent = Agent(scripted.model, tools=[multiply])
    agent.prompt("warm up")  # first-use imports and caches are not the run's garbage

    def ours(obj: Any) -> bool:
        module = getattr(type(obj), "__module__", "") or ""
        if type(obj).__name__ in ("function", "cell"):
            module = getattr(obj, "__module__", None) or ""
        return module.startswith("agentcore")

    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for _ in range(3):
            agent.reset()
            assert agent.prompt("what is 6 * 7?")[-1].text == "42"
        gc.collect()
        left = [type(o).__name__ for o in gc.garbage if ours(o)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert left == []


def test_a_discarded_agent_is_freed_at_once_with_its_transcript():  # no agent <-> compactor cycle
    """Reference counting frees an agent dropped after a run (and its transcript, which may be a
    long one), not the cycle collector at some later collection."""
    import gc
    import weakref

    from agentcore.session import Session
    from agentcore.tools import tool

    @tool
    def multiply(a: int, b: int) -> int:
        """Multiply."""
        return a * b

    scripted = ScriptedModel([tool_call("multiply", {"a": 6, "b": 7}), text("42")] * 3)
    seen: List[str] = []
    gc.collect()
    gc.disable()
    try:
        for kind in ("plain", "listener", "session"):
            session = Session.in_memory() if kind == "session" else None
            agent = Agent(scripted.model, tools=[multiply], session=session)
            if kind == "listener":
                agent.subscribe(lambda event: seen.append(event.type))
            assert agent.prompt("what is 6 * 7?")[-1].text == "42"
            transcript = weakref.ref(agent.state.messages[-1])
            gone = weakref.ref(agent)
            del agent
            assert gone() is None and transcript() is None, kind
    finally:
        gc.enable()
    assert "agent_end" in seen
    # a compactor made on its own keeps its agent; an agent's own holds it weakly, even one that
    # takes no weak reference is kept
    from agentcore.session.compactor import Compactor

    assert Compactor(Agent(scripted.model)).agent.model is scripted.model

    class Slotted:
        __slots__ = ("state",)

    holder = Slotted()
    assert Compactor(holder, owned_by_agent=True).agent is holder


class _RegionalProvider:
    """A plugin provider with an option of its own (as Bedrock's ``region``)."""

    api = "regional-test"
    stream_options = {"zone": "where the requests go", "auth_token": "a credential", "timeout": "ignored"}

    def __init__(self) -> None:
        self.received: List[Any] = []

    def stream(self, model: Any, context: Any, **options: Any) -> Any:
        from agentcore.events import DoneEvent
        from agentcore.streams import AssistantMessageEventStream

        self.received.append(options)
        out = AssistantMessage([TextContent("ok")], api=model.api, provider=model.provider, model=model.id)
        events = AssistantMessageEventStream()
        events.push(StartEvent(out))
        events.push(DoneEvent("stop", out))
        return events


class _Registers:
    def __init__(self, provider: Any) -> None:
        self.provider = provider

    @hookimpl
    def register_providers(self, register: Any) -> None:
        register(self.provider)


def test_options_a_plugin_provider_declares_reach_it_from_the_agent():  # issue 11 §3: one definition
    """Agent(zone=...) works for a name the installed provider declares in stream_options: it is
    kept in provider_options and reaches the provider as a keyword of its own, like a field."""
    from agentcore.options import StreamOptions

    provider = _RegionalProvider()
    model = Model(id="m", api="regional-test", provider="regional")
    agent = Agent(model, plugins=[_Registers(provider)], zone="eu-west-1", max_tokens=64, auth_token="tok-9")
    assert agent.options.provider_options == {"zone": "eu-west-1", "auth_token": "tok-9"}
    assert "tok-9" not in repr(agent.options) and "zone='eu-west-1'" in repr(agent.options)
    assert agent.prompt("hi")[-1].text == "ok"
    sent = provider.received[-1]
    assert (sent["zone"], sent["max_tokens"], sent["auth_token"]) == ("eu-west-1", 64, "tok-9")
    assert "provider_options" not in sent

    # keywords win over options=, whether a StreamOptions or a mapping; a field is never a provider's
    agent = Agent(
        model,
        plugins=[_Registers(provider)],
        options=StreamOptions(provider_options={"zone": "us-east-1"}, timeout=5.0),
        zone="ap-south-1",
    )
    assert agent.options.provider_options == {"zone": "ap-south-1"} and agent.options.timeout == 5.0
    agent = Agent(model, plugins=[_Registers(provider)], options={"zone": "us-east-2", "temperature": 0.5})
    assert (agent.options.provider_options, agent.options.temperature) == ({"zone": "us-east-2"}, 0.5)

    with pytest.raises(TypeError, match=r"unknown option 'zoen' \(did you mean 'zone'"):
        Agent(model, plugins=[_Registers(provider)], zoen="x")
    with pytest.raises(TypeError, match="unknown option 'zone'"):  # no installed provider declares it
        Agent(model, zone="x")
    with pytest.raises(TypeError, match="StreamOptions or a mapping"):
        Agent(model, options=["temperature"])


def test_command_line_and_loop_config_take_declared_provider_options(monkeypatch):
    from agentcore import options as options_module
    from agentcore.loop import AgentLoopConfig

    declared = {"zone": "where the requests go"}
    assert options_module.parse_cli_option("zone", "eu-west-1", lambda: declared) == ("zone", "eu-west-1")
    assert options_module.parse_cli_option("zone", '["a", 1]', lambda: declared) == ("zone", ["a", 1])
    with pytest.raises(ValueError, match="did you mean 'zone'"):
        options_module.parse_cli_option("zoen", "x", lambda: declared)
    monkeypatch.setattr(options_module, "installed_provider_options", lambda: declared)
    from agentcore import _loop_types

    monkeypatch.setattr(_loop_types, "installed_provider_options", lambda: declared)
    config = AgentLoopConfig(Model(id="m", api="regional-test", provider="regional"), zone="eu-west-1")
    assert config.provider_options == {"zone": "eu-west-1"}
    assert config.stream_options.to_kwargs() == {"zone": "eu-west-1"}


def test_an_option_value_that_cannot_be_right_is_refused_where_it_is_given():  # standards: bad input
    """The command line's rules for option values hold in code too, at the call that sets them
    (before, max_tokens="5" reached the API as a string and timeout=-1 failed inside requests)."""
    from agentcore.loop import AgentLoopConfig
    from agentcore.many import AgentSpec
    from agentcore.options import StreamOptions

    with pytest.raises(TypeError, match=r"Agent\(\): max_tokens must be an integer, not '5' \(a str\)"):
        Agent(max_tokens="5")
    with pytest.raises(ValueError, match=r"Agent\(\): timeout -1: must be greater than 0"):
        Agent(timeout=-1)
    with pytest.raises(ValueError, match=r"transport 'ws': choose one of auto, sse, websocket"):
        StreamOptions(transport="ws")
    with pytest.raises(TypeError, match="AgentLoopConfig.*temperature must be a number"):
        AgentLoopConfig(Model.placeholder(), temperature="hot")
    with pytest.raises(TypeError, match="AgentSpec.options: max_retries must be an integer"):
        AgentSpec("openai/gpt-4o-mini", options={"max_retries": 2.5})
    with pytest.raises(TypeError, match="headers must be a mapping, not a str") as refused:
        Agent(headers="Authorization: Bearer sk-never-shown")
    assert "sk-never-shown" not in str(refused.value)
    agent = Agent(timeout=(5, None), max_tokens=800)  # requests' "no read limit" pair is fine
    with pytest.raises(ValueError, match=r"agent: max_tokens 0: must be greater than 0"):
        agent.max_tokens = 0
    assert agent.max_tokens == 800
    agent.tool_choice = {"type": "function", "function": {"name": "x"}}  # the API's own objects pass


def test_each_agent_has_options_of_its_own():  # Agent() copies its defaults (no checks per Agent)
    first, second = Agent(), Agent()
    first.temperature = 0.5
    first.options.provider_options = {"zone": "a"}
    assert first.options is not second.options
    assert (second.temperature, second.options.provider_options, second.options.transport) == (None, None, "auto")


def test_one_argument_tool_hooks_are_called_with_the_context_alone() -> None:
    """before_tool_call(ctx), after_tool_call(ctx) and transform_context(messages), as Python
    users write them: each used to fail every call with a TypeError the model saw."""
    seen: List[str] = []

    def before(ctx):
        seen.append("before " + ctx.tool_call.name)

    def after(ctx):
        seen.append("after " + ctx.tool_call.name)
        return {"content": "replaced"}

    def transform(messages):
        seen.append(f"transform {len(messages)}")
        return None

    scripted = ScriptedModel([tool_call("echo", {"x": 1}), text("ok")])
    agent = Agent(
        scripted.model,
        tools=[_echo_tool("echo")],
        stream_fn=scripted.stream_fn,
        before_tool_call=before,
        after_tool_call=after,
        transform_context=transform,
    )
    agent.prompt("go")
    result = agent.messages[2]
    assert not result.is_error and result.content[0].text == "replaced"
    assert seen == ["transform 1", "before echo", "after echo", "transform 3"]


def test_assigning_options_takes_a_mapping_and_checks_it() -> None:
    scripted = ScriptedModel([text("ok")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    agent.options = {"temperature": 0.2, "max_tokens": 100}  # used to fail the next run: no .session_id
    assert agent.temperature == 0.2 and agent.options.max_tokens == 100
    assert agent.prompt("go")[-1].text == "ok"
    with pytest.raises(TypeError, match=r"unknown option 'temprature' \(did you mean 'temperature'\?\)"):
        agent.options = {"temprature": 1}
    with pytest.raises(TypeError, match="takes a StreamOptions or a mapping"):
        agent.options = 5  # type: ignore[assignment]
    assert agent.temperature == 0.2


def _held_in_a_tool(session, answer):
    """An Agent on ``session`` whose first response calls a tool that waits: its run records into
    the session from ``entered`` until ``release`` is set, then it answers ``answer``."""
    model = ScriptedModel([tool_call("wait", {}), text(answer)])
    entered, release = threading.Event(), threading.Event()

    def slow_tool(tool_call_id, args, signal, on_update):
        entered.set()
        release.wait(30)
        return AgentToolResult([TextContent("done")])

    tool = AgentTool("wait", "waits", {"type": "object", "properties": {}}, slow_tool)
    return Agent(model.model, stream_fn=model.stream_fn, session=session, tools=[tool]), entered, release


def test_two_agents_on_one_session_take_turns_instead_of_interleaving():
    """Two Agents attached to one Session and prompted from two threads wrote into one branch at
    once: one agent's prompts were followed by the other's answers. A run is refused while
    another agent's run records into the session; attaching twice (a notebook cell run again)
    and taking turns still work."""
    from agentcore import Session

    session = Session.in_memory()
    first, entered, release = _held_in_a_tool(session, "A")
    second_model = ScriptedModel([text("B")])
    second = Agent(second_model.model, stream_fn=second_model.stream_fn, session=session)
    first.prompt("a0", wait=False)
    assert entered.wait(10)
    with pytest.raises(RuntimeError, match="recording another Agent's run"):
        second.prompt("b0")
    with pytest.raises(RuntimeError, match="recording another Agent's run"):
        second.compact()  # compaction writes the session too
    assert second.state.messages == [] and not second.state.is_streaming  # nothing was started
    release.set()
    assert first.wait_for_idle(10)
    assert [m.role for m in second.prompt("b1")] == ["user", "assistant"]  # its turn now
    roles_and_texts = [(m.role, getattr(m, "text", None)) for m in session.build_context().messages]
    assert [r for r, _ in roles_and_texts] == ["user", "assistant", "toolResult", "assistant", "user", "assistant"]


def test_a_continue_refused_at_its_start_keeps_the_queued_follow_up():
    """``continue_()`` took the follow-up message from its queue, then was refused because another
    agent's run recorded into the session: the message was gone from the queue and from every
    later run. Nothing ran, so it stays queued."""
    from agentcore import Session

    session = Session.in_memory()
    busy, entered, release = _held_in_a_tool(session, "B")
    scripted = ScriptedModel([text("first"), text("about X")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn, session=session)
    agent.prompt("hi")
    busy.prompt("work", wait=False)
    try:
        assert entered.wait(30)
        agent.follow_up("also X")
        with pytest.raises(RuntimeError, match="recording another Agent's run"):
            agent.continue_()
        assert agent.has_queued_messages()
    finally:
        release.set()
    assert busy.wait_for_idle(30)
    assert [m.text for m in agent.continue_()] == ["also X", "about X"]


def test_a_stream_function_that_raises_mid_answer_ends_the_started_message() -> None:
    """A third-party stream function that raised after its ``start`` (the loop lets that through,
    spec §2.15) left the partial's message_start without an end, and the failure sequence began a
    second message: a UI drew two answers, one never finished, and what had streamed was lost."""
    from agentcore.events import StartEvent, TextDeltaEvent, TextStartEvent
    from agentcore.streams import ProviderStream
    from agentcore.types import AssistantMessage, TextContent

    scripted = ScriptedModel([])

    def broken(model, context, **options):
        def events():
            partial = AssistantMessage([TextContent("")], api="x", provider="x", model="x")
            yield StartEvent(partial)
            yield TextStartEvent(0, partial)
            partial.content[0].text = "Half an ans"
            yield TextDeltaEvent(0, "Half an ans", partial)
            raise ConnectionError("the socket went away")

        return ProviderStream(events())

    agent = Agent(scripted.model, stream_fn=broken)
    seen: List[Any] = []
    agent.subscribe(lambda event: seen.append(event))
    new = agent.prompt("hi")
    kinds = [e.type for e in seen if e.type in ("message_start", "message_end") and e.message.role == "assistant"]
    assert kinds == ["message_start", "message_end"]
    last = new[-1]
    assert last.stop_reason == "error" and "the socket went away" in last.error_message
    assert last.content[0].text == "Half an ans"  # what streamed is kept
    assert agent.messages[-1] is last and agent.state.streaming_message is None


def test_prepare_next_turn_model_and_context_are_not_written_back():  # agent-loop §2.13, §8.7 item 8
    import dataclasses

    from agentcore.loop import AgentLoopTurnUpdate
    from agentcore.types import AgentContext

    scripted = ScriptedModel([tool_call("noop", {}), text("done")])
    other = dataclasses.replace(scripted.model, id="other-model")
    models: List[Any] = []

    def stream_fn(model, context, **options):
        models.append((model.id, context.system_prompt))
        return scripted.stream_fn(model, context, **options)

    def prepare(ctx, signal):
        swapped = AgentContext("swapped prompt", list(ctx.context.messages), ctx.context.tools)
        return AgentLoopTurnUpdate(context=swapped, model=other)

    agent = Agent(
        scripted.model, system_prompt="own prompt", tools=[noop_tool()], stream_fn=stream_fn, prepare_next_turn=prepare
    )
    agent.prompt("go")
    assert models == [(scripted.model.id, "own prompt"), ("other-model", "swapped prompt")]
    assert agent.state.model is scripted.model and agent.state.system_prompt == "own prompt"
    # the transcript grows through message_end alone, whichever context the loop works on
    assert roles(agent.state.messages) == ["user", "assistant", "toolResult", "assistant"]

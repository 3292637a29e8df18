"""The low-level agent loop: spec agent-loop §5.1 scenarios 1-22, plus loop-level details
(options, abort checkpoints, stream edge cases, after_tool_call merging)."""

from __future__ import annotations

import threading
from typing import Any, List

import pytest

from agentcore.events import (
    DoneEvent, GenericStreamEvent, StartEvent, TextDeltaEvent, TextStartEvent,
)
from agentcore.loop import (
    AfterToolCallResult, AgentLoopConfig, AgentLoopTurnUpdate, BeforeToolCallResult, agent_loop,
    agent_loop_continue, run_agent_loop, run_agent_loop_continue, set_default_stream_fn,
)
from agentcore.signals import AbortController
from agentcore.streams import AssistantMessageEventStream
from agentcore.tools import AgentTool, AgentToolResult
from agentcore.types import AgentContext, TextContent, ToolCall, UserMessage


def collect(stream) -> List[Any]:
    return list(stream)


def types(events) -> List[str]:
    return [e.type for e in events]


# --------------------------------------------------------------------------- 5.1 scenarios


def test_basic_prompt_events(user, asst, mock_llm, mock_model):  # agent-loop §5 scenario 1
    llm = mock_llm([asst("Hi there!")])
    stream = agent_loop([user("Hello")], AgentContext("You are helpful.", [], []),
                        AgentLoopConfig(mock_model), stream_fn=llm.stream_fn)
    events = collect(stream)
    result = stream.result()
    assert [m.role for m in result] == ["user", "assistant"]
    assert types(events) == ["agent_start", "turn_start", "message_start", "message_end",
                             "message_start", "message_end", "turn_end", "agent_end"]
    assert events[-1].messages == result


def test_unknown_stream_events_are_forwarded(user, mock_model, asst):  # agent-loop §5 scenario 2
    def stream_fn(model, context, **options):
        final = asst("Done")
        partial = asst("")
        s = AssistantMessageEventStream()
        s.push(StartEvent(partial))
        s.push(GenericStreamEvent("final_answer_start", partial=partial, content_index=0))
        s.push(GenericStreamEvent("final_answer_delta", partial=partial, content_index=0, delta="Done"))
        s.push(GenericStreamEvent("final_answer_end", partial=partial, content_index=0))
        s.push(DoneEvent("stop", final))
        return s

    stream = agent_loop([user("Hi")], AgentContext(), AgentLoopConfig(mock_model), stream_fn=stream_fn)
    updates = [e for e in stream if e.type == "message_update"]
    assert [u.assistant_message_event.type for u in updates] == [
        "final_answer_start", "final_answer_delta", "final_answer_end"]
    assert stream.result()[-1].text == "Done"


def test_custom_message_filtered_by_convert_to_llm(user, asst, mock_llm, mock_model):  # §5 scenario 3
    llm = mock_llm([asst("ok")])
    converted = []

    def convert(messages):
        out = [m for m in messages if getattr(m, "role", None) != "notification" and not isinstance(m, dict)]
        converted.append(out)
        return out

    notification = {"role": "notification", "text": "ping"}
    stream = agent_loop([user("Hello")], AgentContext("", [notification], []),
                        AgentLoopConfig(mock_model, convert_to_llm=convert), stream_fn=llm.stream_fn)
    stream.result()
    assert len(converted[0]) == 1 and converted[0][0].role == "user"
    assert [m.role for m in llm.contexts[0].messages] == ["user"]


def test_transform_context_runs_before_convert(user, asst, mock_llm, mock_model):  # §5 scenario 4
    llm = mock_llm([asst("ok")])
    seen = {}

    def transform(messages, signal):
        seen["transform_in"] = len(messages)
        return messages[-2:]

    def convert(messages):
        seen["convert_in"] = len(messages)
        return list(messages)

    old = [user("a"), asst("b"), user("c"), asst("d")]
    stream = agent_loop([user("new message")], AgentContext("", old, []),
                        AgentLoopConfig(mock_model, convert_to_llm=convert, transform_context=transform),
                        stream_fn=llm.stream_fn)
    stream.result()
    assert seen == {"transform_in": 5, "convert_in": 2}
    assert len(llm.contexts[0].messages) == 2


def test_tool_call_round_trip(user, asst, echo, mock_llm, mock_model, tool_call_block):  # §5 scenario 5
    llm = mock_llm([asst([tool_call_block("hello", "tool-1")], "toolUse"), asst("done")])
    stream = agent_loop([user("echo")], AgentContext("", [], [echo.tool]), AgentLoopConfig(mock_model),
                        stream_fn=llm.stream_fn)
    events = collect(stream)
    assert echo.executed == ["hello"]
    assert types(events) == [
        "agent_start", "turn_start", "message_start", "message_end", "message_start", "message_end",
        "tool_execution_start", "tool_execution_end", "message_start", "message_end", "turn_end",
        "turn_start", "message_start", "message_end", "turn_end", "agent_end"]
    end = [e for e in events if e.type == "tool_execution_end"][0]
    assert end.is_error is False
    assert end.result.content[0].text == "echoed: hello"
    result = stream.result()
    assert [m.role for m in result] == ["user", "assistant", "toolResult", "assistant"]
    assert result[2].tool_call_id == "tool-1" and result[2].details == {"value": "hello"}


def test_length_truncated_tool_calls_are_not_executed(user, asst, echo, mock_llm, mock_model,
                                                      tool_call_block):  # §5 scenario 6
    llm = mock_llm([asst([tool_call_block("hel", "tool-1")], "length"), asst("done")])
    stream = agent_loop([user("echo")], AgentContext("", [], [echo.tool]), AgentLoopConfig(mock_model),
                        stream_fn=llm.stream_fn)
    events = collect(stream)
    assert echo.executed == []
    first_end = [e for e in events if e.type == "tool_execution_end"][0]
    assert first_end.is_error is True
    assert "output token limit" in first_end.result.content[0].text
    assert llm.calls == 2
    assert stream.result()[-1].role == "assistant"


def test_before_tool_call_mutation_is_not_revalidated(user, asst, echo, mock_llm, mock_model,
                                                      tool_call_block):  # §5 scenario 7
    def before(ctx, signal):
        ctx.args["value"] = 123

    llm = mock_llm([asst([tool_call_block("hello", "tool-1")], "toolUse"), asst("done")])
    run_agent_loop([user("x")], AgentContext("", [], [echo.tool]),
                   AgentLoopConfig(mock_model, before_tool_call=before), lambda e: None,
                   stream_fn=llm.stream_fn)
    assert echo.executed == [123]


def test_prepare_arguments_shim_runs_before_validation(user, asst, mock_llm, mock_model):  # §5 scenario 8
    executed = []
    schema = {"type": "object", "required": ["edits"], "properties": {"edits": {"type": "array", "items": {
        "type": "object", "required": ["oldText", "newText"],
        "properties": {"oldText": {"type": "string"}, "newText": {"type": "string"}}}}}}

    def prepare(raw):
        if "oldText" in raw:
            return {"edits": [{"oldText": raw["oldText"], "newText": raw["newText"]}]}
        return raw

    def execute(tool_call_id, args, signal, on_update):
        executed.append(args["edits"])
        return AgentToolResult([TextContent("ok")])

    edit = AgentTool("edit", "edit", schema, execute, prepare_arguments=prepare)
    raw = {"oldText": "before", "newText": "after"}
    llm = mock_llm([asst([ToolCall("tool-1", "edit", raw)], "toolUse"), asst("done")])
    run_agent_loop([user("x")], AgentContext("", [], [edit]), AgentLoopConfig(mock_model),
                   lambda e: None, stream_fn=llm.stream_fn)
    assert executed == [[{"oldText": "before", "newText": "after"}]]
    assert raw == {"oldText": "before", "newText": "after"}  # the original block is unchanged


def _parallel_probe(make_echo, execution_mode=None):
    """Echo whose "first" call blocks until released; "second" records whether "first" is running."""
    state = {"first_started": threading.Event(), "first_done": False, "parallel": False}
    release = threading.Event()

    def before(args):
        if args["value"] == "first":
            state["first_started"].set()
            release.wait(5)
            state["first_done"] = True
        else:
            state["parallel"] = state["first_started"].wait(0.5) and not state["first_done"]

    return make_echo(execution_mode=execution_mode, before=before), state, release


def test_parallel_batch_end_events_in_completion_order(user, asst, make_echo, mock_llm, mock_model,
                                                        tool_call_block, recorder):  # §5 scenario 9
    echo, state, release = _parallel_probe(make_echo)

    def emit(event):
        recorder(event)
        if event.type == "tool_execution_end" and event.tool_call_id == "tool-2":
            release.set()  # "first" finishes only after "second" has ended

    llm = mock_llm([asst([tool_call_block("first", "tool-1"), tool_call_block("second", "tool-2")], "toolUse"),
                    asst("done")])
    run_agent_loop([user("x")], AgentContext("", [], [echo.tool]),
                   AgentLoopConfig(mock_model, tool_execution="parallel"), emit, stream_fn=llm.stream_fn)
    assert state["parallel"] is True
    assert [e.tool_call_id for e in recorder.of("tool_execution_end")] == ["tool-2", "tool-1"]
    result_ends = [e.message.tool_call_id for e in recorder.of("message_end") if e.message.role == "toolResult"]
    assert result_ends == ["tool-1", "tool-2"]
    turn_end = recorder.of("turn_end")[0]
    assert [r.tool_call_id for r in turn_end.tool_results] == ["tool-1", "tool-2"]
    # all starts before any execution end; result messages after every end
    kinds = [e.type for e in recorder.events if e.type.startswith("tool_execution") or
             (e.type == "message_start" and e.message.role == "toolResult")]
    assert kinds == ["tool_execution_start", "tool_execution_start", "tool_execution_end",
                     "tool_execution_end", "message_start", "message_start"]


def test_steering_waits_for_the_whole_batch(user, asst, echo, mock_llm, mock_model, tool_call_block,
                                            recorder):  # §5 scenario 10
    delivered = []

    def steering():
        if echo.executed and not delivered:
            delivered.append(True)
            return [user("interrupt")]
        return []

    llm = mock_llm([asst([tool_call_block("first", "tool-1"), tool_call_block("second", "tool-2")], "toolUse"),
                    asst("done")])
    run_agent_loop([user("x")], AgentContext("", [], [echo.tool]),
                   AgentLoopConfig(mock_model, tool_execution="sequential", get_steering_messages=steering),
                   recorder, stream_fn=llm.stream_fn)
    assert echo.executed == ["first", "second"]
    ends = recorder.of("tool_execution_end")
    assert len(ends) == 2 and not any(e.is_error for e in ends)
    order = []
    for e in recorder.of("message_start"):
        if e.message.role == "user":
            order.append(e.message.content)
        elif e.message.role == "toolResult":
            order.append(f"tool:{e.message.tool_call_id}")
    assert order.index("tool:tool-1") < order.index("interrupt")
    assert order.index("tool:tool-2") < order.index("interrupt")
    assert any(getattr(m, "content", None) == "interrupt" for m in llm.contexts[1].messages)


def test_per_tool_sequential_override(user, asst, make_echo, mock_llm, mock_model, tool_call_block,
                                      recorder):  # §5 scenario 11
    echo, state, release = _parallel_probe(make_echo, execution_mode="sequential")
    threading.Timer(0.02, release.set).start()
    llm = mock_llm([asst([tool_call_block("first", "tool-1"), tool_call_block("second", "tool-2")], "toolUse"),
                    asst("done")])
    run_agent_loop([user("x")], AgentContext("", [], [echo.tool]), AgentLoopConfig(mock_model), recorder,
                   stream_fn=llm.stream_fn)
    assert state["parallel"] is False
    assert [e.message.tool_call_id for e in recorder.of("message_end")
            if e.message.role == "toolResult"] == ["tool-1", "tool-2"]


def test_one_sequential_tool_forces_the_batch(user, asst, mock_llm, mock_model):  # §5 scenario 12
    order = []
    done_a = threading.Event()

    def slow(tool_call_id, args, signal, on_update):
        done_a.wait(0.02)
        order.append(f"slow:{args['value']}")
        return AgentToolResult([TextContent("ok")])

    def fast(tool_call_id, args, signal, on_update):
        order.append(f"fast:{args['value']}")
        return AgentToolResult([TextContent("ok")])

    schema = {"type": "object", "properties": {"value": {"type": "string"}}}
    tools = [AgentTool("slow", "", schema, slow, execution_mode="sequential"),
             AgentTool("fast", "", schema, fast)]
    calls = [ToolCall("t1", "slow", {"value": "a"}), ToolCall("t2", "fast", {"value": "b"})]
    llm = mock_llm([asst(calls, "toolUse"), asst("done")])
    run_agent_loop([user("x")], AgentContext("", [], tools), AgentLoopConfig(mock_model), lambda e: None,
                   stream_fn=llm.stream_fn)
    assert order == ["slow:a", "fast:b"]


def test_tools_marked_parallel_run_in_parallel(user, asst, make_echo, mock_llm, mock_model,
                                               tool_call_block):  # §5 scenario 13
    echo, state, release = _parallel_probe(make_echo, execution_mode="parallel")

    def emit(event):
        if event.type == "tool_execution_end" and event.tool_call_id == "tool-2":
            release.set()

    llm = mock_llm([asst([tool_call_block("first", "tool-1"), tool_call_block("second", "tool-2")], "toolUse"),
                    asst("done")])
    run_agent_loop([user("x")], AgentContext("", [], [echo.tool]), AgentLoopConfig(mock_model), emit,
                   stream_fn=llm.stream_fn)
    assert state["parallel"] is True


def test_config_sequential_beats_tool_parallel(user, asst, make_echo, mock_llm, mock_model, tool_call_block):
    # agent-loop §2.6: a tool's "parallel" never forces parallelism when the config says sequential
    echo, state, release = _parallel_probe(make_echo, execution_mode="parallel")
    threading.Timer(0.02, release.set).start()
    llm = mock_llm([asst([tool_call_block("first", "tool-1"), tool_call_block("second", "tool-2")], "toolUse"),
                    asst("done")])
    run_agent_loop([user("x")], AgentContext("", [], [echo.tool]),
                   AgentLoopConfig(mock_model, tool_execution="sequential"), lambda e: None,
                   stream_fn=llm.stream_fn)
    assert state["parallel"] is False


def test_prepare_next_turn_swaps_context(user, asst, echo, mock_llm, mock_model, tool_call_block):
    # agent-loop §5 scenario 14
    swapped = []

    def prepare(ctx):
        if swapped:
            return None
        swapped.append(True)
        return AgentLoopTurnUpdate(context=AgentContext("second prompt", ctx.context.messages, ctx.context.tools))

    llm = mock_llm([asst([tool_call_block("hello", "tool-1")], "toolUse"), asst("done")])
    run_agent_loop([user("x")], AgentContext("first prompt", [], [echo.tool]),
                   AgentLoopConfig(mock_model, prepare_next_turn=prepare), lambda e: None,
                   stream_fn=llm.stream_fn)
    assert llm.calls == 2
    assert llm.contexts[0].system_prompt == "first prompt"
    assert llm.contexts[1].system_prompt == "second prompt"


def test_prepare_next_turn_model_and_thinking_level(user, asst, echo, mock_llm, mock_model, tool_call_block):
    # agent-loop §2.3 step 8: model and thinking level swap for the next request; "off" clears
    from agentcore.types import Model
    other = Model(id="other", api="openai-responses", provider="openai")
    updates = [AgentLoopTurnUpdate(model=other, thinking_level="high"),
               AgentLoopTurnUpdate(thinking_level="off")]
    models = []

    def stream_fn(model, context, **options):
        models.append((model.id, options.get("reasoning")))
        return llm.stream_fn(model, context, **options)

    llm = mock_llm([asst([tool_call_block("a", "t1")], "toolUse"), asst([tool_call_block("b", "t2")], "toolUse"),
                    asst("done")])
    config = AgentLoopConfig(mock_model, reasoning="low",
                             prepare_next_turn=lambda ctx: updates.pop(0) if updates else None)
    run_agent_loop([user("x")], AgentContext("", [], [echo.tool]), config, lambda e: None, stream_fn=stream_fn)
    assert models == [("mock", "low"), ("other", "high"), ("other", None)]
    assert config.model is mock_model and config.reasoning == "low"  # the caller's config is untouched


def test_should_stop_after_turn(user, asst, echo, mock_llm, mock_model, tool_call_block, recorder):
    # agent-loop §5 scenario 15
    polls = {"steering": 0, "follow": 0}
    hook_seen = {}

    def steering():
        polls["steering"] += 1
        return []

    def follow():
        polls["follow"] += 1
        return [user("follow")]

    def should_stop(ctx):
        hook_seen["ids"] = [r.tool_call_id for r in ctx.tool_results]
        hook_seen["roles"] = [m.role for m in ctx.context.messages]
        return True

    llm = mock_llm([asst([tool_call_block("hello", "tool-1")], "toolUse"), asst("never")])
    result = run_agent_loop([user("x")], AgentContext("", [], [echo.tool]),
                            AgentLoopConfig(mock_model, get_steering_messages=steering,
                                            get_follow_up_messages=follow, should_stop_after_turn=should_stop),
                            recorder, stream_fn=llm.stream_fn)
    assert llm.calls == 1 and echo.executed == ["hello"]
    assert polls == {"steering": 1, "follow": 0}
    assert hook_seen == {"ids": ["tool-1"], "roles": ["user", "assistant", "toolResult"]}
    assert [m.role for m in result] == ["user", "assistant", "toolResult"]
    assert recorder.types == ["agent_start", "turn_start", "message_start", "message_end", "message_start",
                              "message_end", "tool_execution_start", "tool_execution_end", "message_start",
                              "message_end", "turn_end", "agent_end"]


def test_terminate_on_every_result_stops(user, asst, make_echo, mock_llm, mock_model, tool_call_block,
                                         recorder):  # §5 scenario 16
    echo = make_echo(terminate=lambda value: True)
    llm = mock_llm([asst([tool_call_block("hello", "tool-1")], "toolUse")])
    result = run_agent_loop([user("x")], AgentContext("", [], [echo.tool]), AgentLoopConfig(mock_model),
                            recorder, stream_fn=llm.stream_fn)
    assert llm.calls == 1
    assert [m.role for m in result] == ["user", "assistant", "toolResult"]
    assert len(recorder.of("turn_end")) == 1


def test_mixed_terminate_continues(user, asst, make_echo, mock_llm, mock_model, tool_call_block):
    # agent-loop §5 scenario 17
    echo = make_echo(terminate=lambda value: True if value == "first" else None)
    llm = mock_llm([asst([tool_call_block("first", "tool-1"), tool_call_block("second", "tool-2")], "toolUse"),
                    asst("done")])
    result = run_agent_loop([user("x")], AgentContext("", [], [echo.tool]), AgentLoopConfig(mock_model),
                            lambda e: None, stream_fn=llm.stream_fn)
    assert llm.calls == 2
    assert [m.role for m in result] == ["user", "assistant", "toolResult", "toolResult", "assistant"]


def test_after_tool_call_sets_terminate(user, asst, echo, mock_llm, mock_model, tool_call_block):
    # agent-loop §5 scenario 18
    llm = mock_llm([asst([tool_call_block("hello", "tool-1")], "toolUse")])
    run_agent_loop([user("x")], AgentContext("", [], [echo.tool]),
                   AgentLoopConfig(mock_model, after_tool_call=lambda ctx, signal: AfterToolCallResult(terminate=True)),
                   lambda e: None, stream_fn=llm.stream_fn)
    assert llm.calls == 1


def test_continue_with_empty_context_raises_at_once(mock_llm, asst, mock_model):  # §5 scenario 19
    llm = mock_llm([asst("x")])
    with pytest.raises(ValueError, match="^Cannot continue: no messages in context$"):
        agent_loop_continue(AgentContext(), AgentLoopConfig(mock_model), stream_fn=llm.stream_fn)
    assert llm.calls == 0


def test_continue_from_user_message(user, asst, mock_llm, mock_model):  # §5 scenario 20
    llm = mock_llm([asst("Hi")])
    context = AgentContext("", [user("Hello")], [])
    stream = agent_loop_continue(context, AgentLoopConfig(mock_model), stream_fn=llm.stream_fn)
    events = collect(stream)
    result = stream.result()
    assert [m.role for m in result] == ["assistant"]
    assert types(events) == ["agent_start", "turn_start", "message_start", "message_end", "turn_end", "agent_end"]
    assert len(context.messages) == 1  # the caller's context is not mutated


def test_continue_with_custom_last_message(asst, mock_llm, mock_model):  # §5 scenario 21
    def convert(messages):
        out = []
        for m in messages:
            if isinstance(m, dict) and m.get("role") == "custom":
                out.append(UserMessage(m["text"]))
            else:
                out.append(m)
        return out

    llm = mock_llm([asst("ok")])
    stream = agent_loop_continue(AgentContext("", [{"role": "custom", "text": "Hook content"}], []),
                                 AgentLoopConfig(mock_model, convert_to_llm=convert), stream_fn=llm.stream_fn)
    assert [m.role for m in stream.result()] == ["assistant"]
    assert llm.contexts[0].messages[0].content == "Hook content"


def test_continue_with_assistant_tail_raises(user, asst, mock_llm, mock_model):  # §5 scenario 22
    with pytest.raises(ValueError, match="^Cannot continue from message role: assistant$"):
        agent_loop_continue(AgentContext("", [user("a"), asst("b")], []), AgentLoopConfig(mock_model),
                            stream_fn=mock_llm([asst("x")]).stream_fn)
    with pytest.raises(ValueError, match="assistant"):
        run_agent_loop_continue(AgentContext("", [user("a"), asst("b")], []), AgentLoopConfig(mock_model),
                                lambda e: None, stream_fn=mock_llm([asst("x")]).stream_fn)

"""The low-level agent loop: spec agent-loop §5.1 scenarios 1-22, plus loop-level details
(options, abort checkpoints, stream edge cases, after_tool_call merging)."""

from __future__ import annotations

import threading
from typing import Any, List

import pytest

from agentcore import Agent
from agentcore.events import (
    DoneEvent,
    GenericStreamEvent,
    StartEvent,
    TextDeltaEvent,
    TextStartEvent,
)
from agentcore.hookspecs import hookimpl
from agentcore.loop import (
    AfterToolCallResult,
    AgentLoopConfig,
    AgentLoopTurnUpdate,
    BeforeToolCallResult,
    agent_loop,
    agent_loop_continue,
    run_agent_loop,
    run_agent_loop_continue,
    set_default_stream_fn,
)
from agentcore.signals import AbortController
from agentcore.streams import AssistantMessageEventStream
from agentcore.testing import ScriptedModel, call, response, text, tool_call
from agentcore.tools import AgentTool, AgentToolResult, tool
from agentcore.types import AgentContext, ImageContent, Model, TextContent, ToolCall, UserMessage


def collect(stream) -> List[Any]:
    return list(stream)


def types(events) -> List[str]:
    return [e.type for e in events]


# --------------------------------------------------------------------------- 5.1 scenarios


def test_basic_prompt_events(user, asst, mock_llm, mock_model):  # agent-loop §5 scenario 1
    llm = mock_llm([asst("Hi there!")])
    stream = agent_loop(
        [user("Hello")], AgentContext("You are helpful.", [], []), AgentLoopConfig(mock_model), stream_fn=llm.stream_fn
    )
    events = collect(stream)
    result = stream.result()
    assert [m.role for m in result] == ["user", "assistant"]
    assert types(events) == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
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
        "final_answer_start",
        "final_answer_delta",
        "final_answer_end",
    ]
    assert stream.result()[-1].text == "Done"


def test_custom_message_filtered_by_convert_to_llm(user, asst, mock_llm, mock_model):  # §5 scenario 3
    llm = mock_llm([asst("ok")])
    converted = []

    def convert(messages):
        out = [m for m in messages if getattr(m, "role", None) != "notification" and not isinstance(m, dict)]
        converted.append(out)
        return out

    notification = {"role": "notification", "text": "ping"}
    stream = agent_loop(
        [user("Hello")],
        AgentContext("", [notification], []),
        AgentLoopConfig(mock_model, convert_to_llm=convert),
        stream_fn=llm.stream_fn,
    )
    stream.result()
    assert len(converted[0]) == 1 and converted[0][0].role == "user"
    assert [m.role for m in llm.contexts[0].messages] == ["user"]


# A converter that forgot its `return` failed the run with "'NoneType' object is not iterable",
# and a transform_context returning a str sent the model one "message" per character.
@pytest.mark.parametrize(
    "hooks, problem",
    [
        ({"convert_to_llm": lambda messages: None}, "convert_to_llm must return a list of messages, not NoneType"),
        (
            {"transform_context": lambda messages, signal: "hi"},
            "transform_context must return a list of messages, not str",
        ),
    ],
)
def test_a_conversion_hook_returning_no_list_is_an_error_naming_it(user, asst, mock_llm, mock_model, hooks, problem):
    llm = mock_llm([asst("ok")])
    with pytest.raises(TypeError) as caught:
        run_agent_loop(
            [user("Hello")],
            AgentContext("", [], []),
            AgentLoopConfig(mock_model, **hooks),
            lambda e: None,
            None,
            llm.stream_fn,
        )
    assert str(caught.value) == problem
    assert llm.calls == 0


def test_an_async_convert_to_llm_is_awaited(user, asst, mock_llm, mock_model):  # docs/agent.rst "Async tools and hooks"
    # it failed every request with "convert_to_llm must return a list of messages, not coroutine"
    llm = mock_llm([asst("ok")])

    async def convert(messages):
        return [m for m in messages if not isinstance(m, dict)]

    stream = agent_loop(
        [user("Hello")],
        AgentContext("", [{"role": "notification"}], []),
        AgentLoopConfig(mock_model, convert_to_llm=convert),
        stream_fn=llm.stream_fn,
    )
    assert stream.result()[-1].text == "ok"
    assert [m.role for m in llm.contexts[0].messages] == ["user"]


def test_an_agents_async_convert_to_llm_is_awaited():  # docs/agent.rst "Async tools and hooks"
    scripted = ScriptedModel(["fine"])
    converted: List[int] = []

    async def convert(messages):
        converted.append(len(messages))
        return list(messages)

    agent = Agent(scripted.model, stream_fn=scripted.stream_fn, convert_to_llm=convert)
    agent.prompt("hi")
    assert converted == [1] and agent.state.messages[-1].text == "fine"


def test_async_queue_getters_are_awaited(user, asst, mock_llm, mock_model):  # agent-loop §2.12
    # they failed the run with "'coroutine' object is not iterable"
    llm = mock_llm([asst("first"), asst("second")])
    queued = [[user("steer")], [user("follow up")]]

    async def steering():
        return queued.pop(0) if len(queued) == 2 else []

    async def follow_ups():
        return queued.pop(0) if queued else []

    config = AgentLoopConfig(mock_model, get_steering_messages=steering, get_follow_up_messages=follow_ups)
    new = run_agent_loop([user("hi")], AgentContext("", [], []), config, lambda e: None, stream_fn=llm.stream_fn)
    assert [m.role for m in new] == ["user", "user", "assistant", "user", "assistant"]
    assert [m.text for m in new if m.role == "assistant"] == ["first", "second"]


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
    stream = agent_loop(
        [user("new message")],
        AgentContext("", old, []),
        AgentLoopConfig(mock_model, convert_to_llm=convert, transform_context=transform),
        stream_fn=llm.stream_fn,
    )
    stream.result()
    assert seen == {"transform_in": 5, "convert_in": 2}
    assert len(llm.contexts[0].messages) == 2


def test_tool_call_round_trip(user, asst, echo, mock_llm, mock_model, tool_call_block):  # §5 scenario 5
    llm = mock_llm([asst([tool_call_block("hello", "tool-1")], "toolUse"), asst("done")])
    stream = agent_loop(
        [user("echo")], AgentContext("", [], [echo.tool]), AgentLoopConfig(mock_model), stream_fn=llm.stream_fn
    )
    events = collect(stream)
    assert echo.executed == ["hello"]
    assert types(events) == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "message_start",
        "message_end",
        "tool_execution_start",
        "tool_execution_end",
        "message_start",
        "message_end",
        "turn_end",
        "turn_start",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    end = [e for e in events if e.type == "tool_execution_end"][0]
    assert end.is_error is False
    assert end.result.content[0].text == "echoed: hello"
    result = stream.result()
    assert [m.role for m in result] == ["user", "assistant", "toolResult", "assistant"]
    assert result[2].tool_call_id == "tool-1" and result[2].details == {"value": "hello"}


def test_length_truncated_tool_calls_are_not_executed(
    user, asst, echo, mock_llm, mock_model, tool_call_block
):  # §5 scenario 6
    llm = mock_llm([asst([tool_call_block("hel", "tool-1")], "length"), asst("done")])
    stream = agent_loop(
        [user("echo")], AgentContext("", [], [echo.tool]), AgentLoopConfig(mock_model), stream_fn=llm.stream_fn
    )
    events = collect(stream)
    assert echo.executed == []
    first_end = [e for e in events if e.type == "tool_execution_end"][0]
    assert first_end.is_error is True
    assert "output token limit" in first_end.result.content[0].text
    assert llm.calls == 2
    assert stream.result()[-1].role == "assistant"


def test_before_tool_call_mutation_is_not_revalidated(
    user, asst, echo, mock_llm, mock_model, tool_call_block
):  # §5 scenario 7
    def before(ctx, signal):
        ctx.args["value"] = 123

    llm = mock_llm([asst([tool_call_block("hello", "tool-1")], "toolUse"), asst("done")])
    run_agent_loop(
        [user("x")],
        AgentContext("", [], [echo.tool]),
        AgentLoopConfig(mock_model, before_tool_call=before),
        lambda e: None,
        stream_fn=llm.stream_fn,
    )
    assert echo.executed == [123]


def test_prepare_arguments_shim_runs_before_validation(user, asst, mock_llm, mock_model):  # §5 scenario 8
    executed = []
    schema = {
        "type": "object",
        "required": ["edits"],
        "properties": {
            "edits": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["oldText", "newText"],
                    "properties": {"oldText": {"type": "string"}, "newText": {"type": "string"}},
                },
            }
        },
    }

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
    run_agent_loop(
        [user("x")], AgentContext("", [], [edit]), AgentLoopConfig(mock_model), lambda e: None, stream_fn=llm.stream_fn
    )
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
            state["parallel"] = state["first_started"].wait(5) and not state["first_done"]

    return make_echo(execution_mode=execution_mode, before=before), state, release


def test_parallel_batch_end_events_in_completion_order(
    user, asst, make_echo, mock_llm, mock_model, tool_call_block, recorder
):  # §5 scenario 9
    echo, state, release = _parallel_probe(make_echo)

    def emit(event):
        recorder(event)
        if event.type == "tool_execution_end" and event.tool_call_id == "tool-2":
            release.set()  # "first" finishes only after "second" has ended

    llm = mock_llm(
        [asst([tool_call_block("first", "tool-1"), tool_call_block("second", "tool-2")], "toolUse"), asst("done")]
    )
    run_agent_loop(
        [user("x")],
        AgentContext("", [], [echo.tool]),
        AgentLoopConfig(mock_model, tool_execution="parallel"),
        emit,
        stream_fn=llm.stream_fn,
    )
    assert state["parallel"] is True
    assert [e.tool_call_id for e in recorder.of("tool_execution_end")] == ["tool-2", "tool-1"]
    result_ends = [e.message.tool_call_id for e in recorder.of("message_end") if e.message.role == "toolResult"]
    assert result_ends == ["tool-1", "tool-2"]
    turn_end = recorder.of("turn_end")[0]
    assert [r.tool_call_id for r in turn_end.tool_results] == ["tool-1", "tool-2"]
    # all starts before any execution end; result messages after every end
    kinds = [
        e.type
        for e in recorder.events
        if e.type.startswith("tool_execution") or (e.type == "message_start" and e.message.role == "toolResult")
    ]
    assert kinds == [
        "tool_execution_start",
        "tool_execution_start",
        "tool_execution_end",
        "tool_execution_end",
        "message_start",
        "message_start",
    ]


def test_steering_waits_for_the_whole_batch(
    user, asst, echo, mock_llm, mock_model, tool_call_block, recorder
):  # §5 scenario 10
    delivered = []

    def steering():
        if echo.executed and not delivered:
            delivered.append(True)
            return [user("interrupt")]
        return []

    llm = mock_llm(
        [asst([tool_call_block("first", "tool-1"), tool_call_block("second", "tool-2")], "toolUse"), asst("done")]
    )
    run_agent_loop(
        [user("x")],
        AgentContext("", [], [echo.tool]),
        AgentLoopConfig(mock_model, tool_execution="sequential", get_steering_messages=steering),
        recorder,
        stream_fn=llm.stream_fn,
    )
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


def test_per_tool_sequential_override(
    user, asst, make_echo, mock_llm, mock_model, tool_call_block, recorder
):  # §5 scenario 11
    echo, state, release = _parallel_probe(make_echo, execution_mode="sequential")
    threading.Timer(0.02, release.set).start()
    llm = mock_llm(
        [asst([tool_call_block("first", "tool-1"), tool_call_block("second", "tool-2")], "toolUse"), asst("done")]
    )
    run_agent_loop(
        [user("x")], AgentContext("", [], [echo.tool]), AgentLoopConfig(mock_model), recorder, stream_fn=llm.stream_fn
    )
    assert state["parallel"] is False
    assert [e.message.tool_call_id for e in recorder.of("message_end") if e.message.role == "toolResult"] == [
        "tool-1",
        "tool-2",
    ]


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
    tools = [AgentTool("slow", "", schema, slow, execution_mode="sequential"), AgentTool("fast", "", schema, fast)]
    calls = [ToolCall("t1", "slow", {"value": "a"}), ToolCall("t2", "fast", {"value": "b"})]
    llm = mock_llm([asst(calls, "toolUse"), asst("done")])
    run_agent_loop(
        [user("x")], AgentContext("", [], tools), AgentLoopConfig(mock_model), lambda e: None, stream_fn=llm.stream_fn
    )
    assert order == ["slow:a", "fast:b"]


def test_tools_marked_parallel_run_in_parallel(
    user, asst, make_echo, mock_llm, mock_model, tool_call_block
):  # §5 scenario 13
    echo, state, release = _parallel_probe(make_echo, execution_mode="parallel")

    def emit(event):
        if event.type == "tool_execution_end" and event.tool_call_id == "tool-2":
            release.set()

    llm = mock_llm(
        [asst([tool_call_block("first", "tool-1"), tool_call_block("second", "tool-2")], "toolUse"), asst("done")]
    )
    run_agent_loop(
        [user("x")], AgentContext("", [], [echo.tool]), AgentLoopConfig(mock_model), emit, stream_fn=llm.stream_fn
    )
    assert state["parallel"] is True


def test_config_sequential_beats_tool_parallel(user, asst, make_echo, mock_llm, mock_model, tool_call_block):
    # agent-loop §2.6: a tool's "parallel" never forces parallelism when the config says sequential
    echo, state, release = _parallel_probe(make_echo, execution_mode="parallel")
    threading.Timer(0.02, release.set).start()
    llm = mock_llm(
        [asst([tool_call_block("first", "tool-1"), tool_call_block("second", "tool-2")], "toolUse"), asst("done")]
    )
    run_agent_loop(
        [user("x")],
        AgentContext("", [], [echo.tool]),
        AgentLoopConfig(mock_model, tool_execution="sequential"),
        lambda e: None,
        stream_fn=llm.stream_fn,
    )
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
    run_agent_loop(
        [user("x")],
        AgentContext("first prompt", [], [echo.tool]),
        AgentLoopConfig(mock_model, prepare_next_turn=prepare),
        lambda e: None,
        stream_fn=llm.stream_fn,
    )
    assert llm.calls == 2
    assert llm.contexts[0].system_prompt == "first prompt"
    assert llm.contexts[1].system_prompt == "second prompt"


def test_prepare_next_turn_model_and_thinking_level(user, asst, echo, mock_llm, mock_model, tool_call_block):
    # agent-loop §2.3 step 8: model and thinking level swap for the next request; "off" clears
    from agentcore.types import Model

    other = Model(id="other", api="openai-responses", provider="openai")
    updates = [AgentLoopTurnUpdate(model=other, thinking_level="high"), AgentLoopTurnUpdate(thinking_level="off")]
    models = []

    def stream_fn(model, context, **options):
        models.append((model.id, options.get("reasoning")))
        return llm.stream_fn(model, context, **options)

    llm = mock_llm(
        [asst([tool_call_block("a", "t1")], "toolUse"), asst([tool_call_block("b", "t2")], "toolUse"), asst("done")]
    )
    config = AgentLoopConfig(
        mock_model, reasoning="low", prepare_next_turn=lambda ctx: updates.pop(0) if updates else None
    )
    run_agent_loop([user("x")], AgentContext("", [], [echo.tool]), config, lambda e: None, stream_fn=stream_fn)
    assert models == [("mock", "low"), ("other", "high"), ("other", None)]
    assert config.model is mock_model and config.reasoning == "low"  # the caller's config is untouched


@pytest.mark.parametrize(
    "update, error",
    [
        (AgentLoopTurnUpdate(model="openai/gpt-4o"), "returned a model that is a str, not a Model"),
        (AgentLoopTurnUpdate(context=[]), "returned a context that is a list, not an AgentContext"),
        ({"context": {"messages": []}}, "returned a context that is a dict, not an AgentContext"),
        (AgentLoopTurnUpdate(thinking_level="hgih"), "returned the thinking_level 'hgih'"),
        # the whole answer is no update: it used to be ignored without a word
        (
            Model(id="other", api="mock", provider="mock"),
            r"returned a Model, not an AgentLoopTurnUpdate .*model=\.\.\.",
        ),
        (AgentContext("", []), r"returned a AgentContext, not an AgentLoopTurnUpdate .*context=\.\.\."),
        ({"thinkingLevel": "high"}, "returned a mapping with the unknown key\\(s\\) 'thinkingLevel'"),
        ("high", "returned a str, not an AgentLoopTurnUpdate"),
    ],
)
def test_prepare_next_turn_unusable_update_names_the_field(
    update, error, user, asst, echo, mock_llm, mock_model, tool_call_block
):
    # agent-loop §2.3 step 8: a model name, a message list or a typo used to fail the next request
    # with "'str' object has no attribute 'api'" (or reach the provider as its reasoning setting)
    reasoning: List[Any] = []

    def stream_fn(model, context, **options):
        reasoning.append(options.get("reasoning"))
        return llm.stream_fn(model, context, **options)

    llm = mock_llm([asst([tool_call_block("a", "t1")], "toolUse"), asst("done")])
    config = AgentLoopConfig(mock_model, prepare_next_turn=lambda ctx: update)
    with pytest.raises((TypeError, ValueError), match=error):
        run_agent_loop([user("x")], AgentContext("", [], [echo.tool]), config, lambda e: None, stream_fn=stream_fn)
    assert reasoning == [None]  # no request was made with the unusable update


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
    result = run_agent_loop(
        [user("x")],
        AgentContext("", [], [echo.tool]),
        AgentLoopConfig(
            mock_model,
            get_steering_messages=steering,
            get_follow_up_messages=follow,
            should_stop_after_turn=should_stop,
        ),
        recorder,
        stream_fn=llm.stream_fn,
    )
    assert llm.calls == 1 and echo.executed == ["hello"]
    assert polls == {"steering": 1, "follow": 0}
    assert hook_seen == {"ids": ["tool-1"], "roles": ["user", "assistant", "toolResult"]}
    assert [m.role for m in result] == ["user", "assistant", "toolResult"]
    assert recorder.types == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "message_start",
        "message_end",
        "tool_execution_start",
        "tool_execution_end",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]


def test_terminate_on_every_result_stops(
    user, asst, make_echo, mock_llm, mock_model, tool_call_block, recorder
):  # §5 scenario 16
    echo = make_echo(terminate=lambda value: True)
    llm = mock_llm([asst([tool_call_block("hello", "tool-1")], "toolUse")])
    result = run_agent_loop(
        [user("x")], AgentContext("", [], [echo.tool]), AgentLoopConfig(mock_model), recorder, stream_fn=llm.stream_fn
    )
    assert llm.calls == 1
    assert [m.role for m in result] == ["user", "assistant", "toolResult"]
    assert len(recorder.of("turn_end")) == 1


def test_mixed_terminate_continues(user, asst, make_echo, mock_llm, mock_model, tool_call_block):
    # agent-loop §5 scenario 17
    echo = make_echo(terminate=lambda value: True if value == "first" else None)
    llm = mock_llm(
        [asst([tool_call_block("first", "tool-1"), tool_call_block("second", "tool-2")], "toolUse"), asst("done")]
    )
    result = run_agent_loop(
        [user("x")],
        AgentContext("", [], [echo.tool]),
        AgentLoopConfig(mock_model),
        lambda e: None,
        stream_fn=llm.stream_fn,
    )
    assert llm.calls == 2
    assert [m.role for m in result] == ["user", "assistant", "toolResult", "toolResult", "assistant"]


def test_after_tool_call_sets_terminate(user, asst, echo, mock_llm, mock_model, tool_call_block):
    # agent-loop §5 scenario 18
    llm = mock_llm([asst([tool_call_block("hello", "tool-1")], "toolUse")])
    run_agent_loop(
        [user("x")],
        AgentContext("", [], [echo.tool]),
        AgentLoopConfig(mock_model, after_tool_call=lambda ctx, signal: AfterToolCallResult(terminate=True)),
        lambda e: None,
        stream_fn=llm.stream_fn,
    )
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
    stream = agent_loop_continue(
        AgentContext("", [{"role": "custom", "text": "Hook content"}], []),
        AgentLoopConfig(mock_model, convert_to_llm=convert),
        stream_fn=llm.stream_fn,
    )
    assert [m.role for m in stream.result()] == ["assistant"]
    assert llm.contexts[0].messages[0].content == "Hook content"


def test_continue_with_assistant_tail_raises(user, asst, mock_llm, mock_model):  # §5 scenario 22
    with pytest.raises(ValueError, match="^Cannot continue from message role: assistant$"):
        agent_loop_continue(
            AgentContext("", [user("a"), asst("b")], []),
            AgentLoopConfig(mock_model),
            stream_fn=mock_llm([asst("x")]).stream_fn,
        )
    with pytest.raises(ValueError, match="assistant"):
        run_agent_loop_continue(
            AgentContext("", [user("a"), asst("b")], []),
            AgentLoopConfig(mock_model),
            lambda e: None,
            stream_fn=mock_llm([asst("x")]).stream_fn,
        )


# --------------------------------------------------------------------------- preparation (§2.7)


def _one_call_run(asst, mock_llm, mock_model, user, tools, calls, recorder, **config):
    llm = mock_llm([asst(calls, "toolUse"), asst("done")])
    result = run_agent_loop(
        [user("x")],
        AgentContext("", [], tools),
        AgentLoopConfig(mock_model, **config),
        recorder,
        stream_fn=llm.stream_fn,
    )
    return result, llm


def test_unknown_tool_is_an_immediate_error(user, asst, echo, mock_llm, mock_model, recorder):
    # agent-loop §2.7 step 1, §2.16
    result, llm = _one_call_run(asst, mock_llm, mock_model, user, [echo.tool], [ToolCall("t1", "nope", {})], recorder)
    assert result[2].is_error is True and result[2].text == "Tool nope not found"
    assert result[2].details == {}
    assert llm.calls == 2  # an error result does not stop the run


def test_validation_error_message(user, asst, echo, mock_llm, mock_model, recorder):  # agent-loop §2.7b
    result, _ = _one_call_run(asst, mock_llm, mock_model, user, [echo.tool], [ToolCall("t1", "echo", {})], recorder)
    assert result[2].is_error is True
    assert result[2].text.splitlines()[0] == 'Validation failed for tool "echo":'
    assert echo.executed == []


def test_blocked_call_default_reason_and_terminate(
    user, asst, echo, mock_llm, mock_model, recorder, tool_call_block
):  # agent-loop §2.7c, §2.11
    def before(ctx, signal):
        return BeforeToolCallResult(block=True, terminate=True)

    result, llm = _one_call_run(
        asst, mock_llm, mock_model, user, [echo.tool], [tool_call_block("a", "t1")], recorder, before_tool_call=before
    )
    assert result[2].text == "Tool execution was blocked" and result[2].is_error
    assert echo.executed == [] and llm.calls == 1  # a blocked call with terminate=True ends the run


def test_blocked_call_with_reason_and_dict_result(
    user, asst, echo, mock_llm, mock_model, recorder, tool_call_block
):  # agent-loop §2.7c
    result, llm = _one_call_run(
        asst,
        mock_llm,
        mock_model,
        user,
        [echo.tool],
        [tool_call_block("a", "t1")],
        recorder,
        before_tool_call=lambda ctx, signal: {"block": True, "reason": "no"},
    )
    assert result[2].text == "no" and llm.calls == 2  # terminate only when asked for


def test_before_tool_call_context(user, asst, echo, mock_llm, mock_model, recorder, tool_call_block):
    # agent-loop §1.9: args is a validated clone; context already holds the assistant message
    seen = {}

    def before(ctx, signal):
        seen["clone"] = ctx.args is not ctx.tool_call.arguments and ctx.args == ctx.tool_call.arguments
        seen["last"] = ctx.context.messages[-1] is ctx.assistant_message

    _one_call_run(
        asst, mock_llm, mock_model, user, [echo.tool], [tool_call_block("a", "t1")], recorder, before_tool_call=before
    )
    assert seen == {"clone": True, "last": True}


def test_hook_and_shim_exceptions_become_error_results(user, asst, mock_llm, mock_model, recorder):
    # agent-loop §2.7 step 3, §8.5
    def boom(raw):
        raise KeyError("bad shape")

    shim_tool = AgentTool("shim", "", {"type": "object"}, lambda *a: AgentToolResult([]), prepare_arguments=boom)
    result, llm = _one_call_run(
        asst,
        mock_llm,
        mock_model,
        user,
        [shim_tool],
        [ToolCall("t1", "shim", {})],
        recorder,
        before_tool_call=lambda ctx, signal: 1 / 0,
    )
    assert result[2].is_error and result[2].text == "'bad shape'"
    assert llm.calls == 2


def test_abort_inside_before_tool_call(user, asst, echo, mock_llm, mock_model, recorder, tool_call_block):
    # agent-loop §2.7c, §2.9: "Operation aborted"; parallel preflight stops, later calls get no events
    controller = AbortController()

    def before(ctx, signal):
        controller.abort()
        return None

    llm = mock_llm([asst([tool_call_block("a", "t1"), tool_call_block("b", "t2")], "toolUse"), asst("done")])
    result = run_agent_loop(
        [user("x")],
        AgentContext("", [], [echo.tool]),
        AgentLoopConfig(mock_model, before_tool_call=before),
        recorder,
        signal=controller.signal,
        stream_fn=llm.stream_fn,
    )
    assert [e.tool_call_id for e in recorder.of("tool_execution_start")] == ["t1"]
    tool_results = [m for m in result if m.role == "toolResult"]
    assert [m.text for m in tool_results] == ["Operation aborted"]
    assert echo.executed == [] and llm.calls == 1
    assert result[-1].role == "assistant" and result[-1].stop_reason == "aborted"  # our design choice
    assert recorder.types[-1] == "agent_end"


# --------------------------------------------------------------------------- execution (§2.8, §2.9)


def test_tool_exception_and_string_results(user, asst, mock_llm, mock_model, recorder):  # agent-loop §2.8
    def failing(tool_call_id, args, signal, on_update):
        raise RuntimeError("disk full")

    def plain(tool_call_id, args, signal, on_update):
        return "just text"

    tools = [AgentTool("failing", "", {"type": "object"}, failing), AgentTool("plain", "", {"type": "object"}, plain)]
    result, llm = _one_call_run(
        asst, mock_llm, mock_model, user, tools, [ToolCall("t1", "failing", {}), ToolCall("t2", "plain", {})], recorder
    )
    failed, ok = result[2], result[3]
    assert failed.is_error and failed.text == "disk full"
    assert not ok.is_error and ok.text == "just text"
    assert [e.is_error for e in recorder.of("tool_execution_end")] in ([True, False], [False, True])


def test_updates_are_emitted_between_start_and_end(user, asst, mock_llm, mock_model, recorder):
    # agent-loop §2.9 sequential order with updates
    def progress(tool_call_id, args, signal, on_update):
        on_update(AgentToolResult([TextContent("half")]))
        on_update(AgentToolResult([TextContent("almost")]))
        return AgentToolResult([TextContent("done")])

    tool = AgentTool("progress", "", {"type": "object"}, progress)
    _one_call_run(
        asst,
        mock_llm,
        mock_model,
        user,
        [tool],
        [ToolCall("t1", "progress", {"n": 1})],
        recorder,
        tool_execution="sequential",
    )
    kinds = [e.type for e in recorder.events if e.type.startswith("tool_execution")]
    assert kinds == ["tool_execution_start", "tool_execution_update", "tool_execution_update", "tool_execution_end"]
    update = recorder.of("tool_execution_update")[0]
    assert update.args == {"n": 1} and update.partial_result.content[0].text == "half"


def test_progress_given_as_a_string_is_an_agent_tool_result(user, asst, mock_llm, mock_model, recorder):
    """``on_update("50% done")`` reached listeners as a bare string, so ``run --json`` printed
    ``"partialResult": "50% done"`` where the documented shape is a result object."""
    from agentcore.events import event_to_dict

    def progress(tool_call_id, args, signal, on_update):
        on_update("50% done")
        return "done"

    tool = AgentTool("progress", "", {"type": "object"}, progress)
    _one_call_run(asst, mock_llm, mock_model, user, [tool], [ToolCall("t1", "progress", {})], recorder)
    (update,) = recorder.of("tool_execution_update")
    assert isinstance(update.partial_result, AgentToolResult) and update.partial_result.content[0].text == "50% done"
    assert event_to_dict(update)["partialResult"]["content"] == [{"type": "text", "text": "50% done"}]


def test_after_tool_call_merges_field_by_field(user, asst, mock_llm, mock_model, recorder):  # agent-loop §2.8
    def execute(tool_call_id, args, signal, on_update):
        return AgentToolResult([TextContent("raw")], details={"keep": 1}, added_tool_names=["extra"])

    seen = {}

    def after(ctx, signal):
        seen["result"] = ctx.result.content[0].text
        seen["is_error"] = ctx.is_error
        return AfterToolCallResult(content=[TextContent("rewritten")], details=None, is_error=True)

    tool = AgentTool("t", "", {"type": "object"}, execute)
    result, _ = _one_call_run(
        asst, mock_llm, mock_model, user, [tool], [ToolCall("c1", "t", {})], recorder, after_tool_call=after
    )
    message = result[2]
    assert seen == {"result": "raw", "is_error": False}
    assert message.text == "rewritten" and message.details == {"keep": 1} and message.is_error is True
    assert message.added_tool_names == ["extra"]
    assert recorder.of("tool_execution_end")[0].result.content[0].text == "rewritten"


def test_after_tool_call_exception_becomes_error(
    user, asst, echo, mock_llm, mock_model, recorder, tool_call_block
):  # agent-loop §2.8
    def after(ctx, signal):
        raise ValueError("hook failed")

    result, llm = _one_call_run(
        asst, mock_llm, mock_model, user, [echo.tool], [tool_call_block("a", "t1")], recorder, after_tool_call=after
    )
    assert result[2].is_error and result[2].text == "hook failed" and llm.calls == 2


def test_tool_result_message_fields(user, asst, mock_llm, mock_model, recorder):  # agent-loop §2.8
    from agentcore.types import Usage

    def execute(tool_call_id, args, signal, on_update):
        return AgentToolResult(None, details=None, usage=Usage(input=3), added_tool_names=[], terminate=False)

    tool = AgentTool("t", "", {"type": "object"}, execute)
    result, _ = _one_call_run(asst, mock_llm, mock_model, user, [tool], [ToolCall("c1", "t", {})], recorder)
    message = result[2]
    assert message.content == [] and message.usage.input == 3 and message.added_tool_names is None
    assert "terminate" not in message.to_dict() and "addedToolNames" not in message.to_dict()


def test_sequential_abort_drops_remaining_calls(user, asst, mock_llm, mock_model, recorder):  # agent-loop §2.9
    controller = AbortController()
    ran = []

    def execute(tool_call_id, args, signal, on_update):
        ran.append(tool_call_id)
        controller.abort()
        return AgentToolResult([TextContent("stopped")])

    tool = AgentTool("t", "", {"type": "object"}, execute)
    llm = mock_llm([asst([ToolCall("c1", "t", {}), ToolCall("c2", "t", {})], "toolUse"), asst("never")])
    result = run_agent_loop(
        [user("x")],
        AgentContext("", [], [tool]),
        AgentLoopConfig(mock_model, tool_execution="sequential"),
        recorder,
        signal=controller.signal,
        stream_fn=llm.stream_fn,
    )
    assert ran == ["c1"] and llm.calls == 1
    assert [e.tool_call_id for e in recorder.of("tool_execution_start")] == ["c1"]
    assert [m.role for m in result] == ["user", "assistant", "toolResult", "assistant"]
    assert result[-1].stop_reason == "aborted"


def test_parallel_prepared_calls_still_run_after_abort(user, asst, mock_llm, mock_model, recorder):
    # agent-loop §2.15: mid-tool abort; prepared calls run, whatever they return is recorded
    controller = AbortController()
    both_started = threading.Barrier(2, timeout=5)

    def execute(tool_call_id, args, signal, on_update):
        both_started.wait()
        controller.abort()
        return AgentToolResult([TextContent(f"{tool_call_id} saw abort={signal.wait(5)}")])

    tool = AgentTool("t", "", {"type": "object"}, execute)
    llm = mock_llm([asst([ToolCall("c1", "t", {}), ToolCall("c2", "t", {})], "toolUse"), asst("never")])
    result = run_agent_loop(
        [user("x")],
        AgentContext("", [], [tool]),
        AgentLoopConfig(mock_model),
        recorder,
        signal=controller.signal,
        stream_fn=llm.stream_fn,
    )
    assert [m.text for m in result if m.role == "toolResult"] == ["c1 saw abort=True", "c2 saw abort=True"]
    assert llm.calls == 1


# --------------------------------------------------------------------------- hooks and results through the Agent (§2.7, §2.8, §2.13)


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
    agent = Agent(
        scripted.model,
        tools=[echo],
        stream_fn=scripted.stream_fn,
        plugins=plugins,
        before_tool_call=lambda ctx, signal: {"block": True, "reason": "not allowed"},
    )
    agent.prompt("go")
    (result,) = _tool_results(agent)
    assert result.is_error is True
    assert result.content[0].text == "not allowed"


# agent-loop §2.8: a plain-dict after_tool_call override applies field by field, plugins or not.
@pytest.mark.parametrize("plugins", [[], [_PassiveToolHooks()]], ids=["alone", "with-plugin"])
def test_dict_after_override_is_honoured_with_other_plugins(plugins: List[Any]) -> None:
    scripted = ScriptedModel([tool_call("echo", {"x": "a"}), text("ok")])
    agent = Agent(
        scripted.model,
        tools=[echo],
        stream_fn=scripted.stream_fn,
        plugins=plugins,
        after_tool_call=lambda ctx, signal: {"is_error": True, "details": {"k": 1}},
    )
    agent.prompt("go")
    (result,) = _tool_results(agent)
    assert result.is_error is True
    assert result.details == {"k": 1}
    assert result.content[0].text == "ran a"


# Overrides of several plugins merge field by field. When the last one was an AgentToolResult
# (an object with some of the fields) an earlier is_error made the merge raise, and the call's
# result became "AgentToolResult.__init__() got an unexpected keyword argument 'is_error'"; a
# last override of a type of its own replaced the earlier ones instead of adding to them.
class _Rewrite:  # an override object of its own, with one of the fields
    def __init__(self) -> None:
        self.content = ["rewritten"]


class _Rewriter:
    def __init__(self, override: Any) -> None:
        self.override = override

    @hookimpl
    def after_tool_call(self, context: Any, signal: Any) -> Any:
        return self.override


@pytest.mark.parametrize(
    "last", [AgentToolResult(content=["rewritten"]), _Rewrite()], ids=["agent-tool-result", "own-object"]
)
def test_overrides_of_several_plugins_merge_whatever_the_last_ones_type(last: Any) -> None:
    scripted = ScriptedModel([tool_call("echo", {"x": "a"}), text("ok")])
    agent = Agent(
        scripted.model,
        tools=[echo],
        stream_fn=scripted.stream_fn,
        plugins=[_Rewriter(last)],  # called after the agent's own hook
        after_tool_call=lambda ctx, signal: AfterToolCallResult(is_error=True, details={"marked": True}),
    )
    agent.prompt("go")
    (result,) = _tool_results(agent)
    assert [b.text for b in result.content] == ["rewritten"]
    assert result.is_error is True and result.details == {"marked": True}


# agent-loop §2.8 tool-result message: content is a block list. A bare string returned as
# ``AgentToolResult(content="done")`` (or set by after_tool_call) must not become one block per
# character, which no provider or session can encode.
def test_string_result_content_becomes_one_text_block() -> None:
    from agentcore.loop import AfterToolCallResult
    from agentcore.tools import AgentTool, AgentToolResult
    from agentcore.types import TextContent

    raw = AgentTool(
        "raw",
        "Returns a bare string as content.",
        {"type": "object", "properties": {}},
        lambda call_id, args, signal, on_update: AgentToolResult(content="hello"),
    )
    single = AgentTool(
        "single",
        "Returns one block, not a list.",
        {"type": "object", "properties": {}},
        lambda call_id, args, signal, on_update: AgentToolResult(content=TextContent("one")),
    )
    from agentcore.testing import call, response

    scripted = ScriptedModel([response(call("raw", {}), call("single", {})), text("ok")])
    agent = Agent(scripted.model, tools=[raw, single], stream_fn=scripted.stream_fn)
    agent.prompt("go")
    first, second = _tool_results(agent)
    assert [(b.type, b.text) for b in first.content] == [("text", "hello")]
    assert [(b.type, b.text) for b in second.content] == [("text", "one")]

    scripted = ScriptedModel([tool_call("echo", {"x": "a"}), text("ok")])
    agent = Agent(
        scripted.model,
        tools=[echo],
        stream_fn=scripted.stream_fn,
        after_tool_call=lambda ctx, signal: AfterToolCallResult(content="replaced"),
    )
    agent.prompt("go")
    (result,) = _tool_results(agent)
    assert [(b.type, b.text) for b in result.content] == [("text", "replaced")]


# A result whose content is not blocks (content=42, [None], bytes) or whose added_tool_names is
# not a list of names used to raise while the result message was built, on the run thread: the
# run failed and the call was left without a result. Strings and reference dict blocks inside the
# list were kept as they were, and providers dropped them, so the model saw an empty result.
@pytest.mark.parametrize(
    "content, added, problem",
    [
        (42, None, "'content' must be a list of text and image blocks or a string, not int 42"),
        ([None], None, "content[0] is None, not a text or image block"),
        (b"raw", None, "'content' must be a list of text and image blocks or a string, not bytes b'raw'"),
        ([{"type": "toolCall", "id": "x"}], None, "content[0] is a dict, not a text or image block"),
        ([{"type": "text", "text": 5}], None, "content[0]: "),
        ([TextContent(b"\xff")], None, "content[0] is TextContent whose text is bytes b'\\xff', not a str"),
        ([ImageContent(data=b"x", mime_type="image/png")], None, "content[0] is ImageContent whose data is bytes"),
        ("ok", 5, "'added_tool_names' must be a list of tool names (strings), not int 5"),
    ],
)
def test_a_malformed_tool_result_is_the_calls_error_result(tmp_path, content, added, problem) -> None:
    from agentcore.session import Session
    from agentcore.tools import AgentTool, AgentToolResult

    bad = AgentTool(
        "bad",
        "Returns a malformed result.",
        {"type": "object", "properties": {}},
        lambda call_id, args, signal, on_update: AgentToolResult(content=content, added_tool_names=added),
    )
    scripted = ScriptedModel([tool_call("bad", {}), text("went on")])
    session = Session.create(tmp_path / "s.jsonl")
    agent = Agent(scripted.model, tools=[bad], stream_fn=scripted.stream_fn, session=session)
    agent.prompt("go")
    assert [m.role for m in agent.messages] == ["user", "assistant", "toolResult", "assistant"]
    (result,) = _tool_results(agent)
    assert result.is_error and result.content[0].text.startswith("Tool bad returned an invalid result: " + problem)
    assert agent.messages[-1].text == "went on"
    assert [e.message.role for e in session.get_branch() if e.type == "message"] == [m.role for m in agent.messages]


# Result content given as a generator was read only when the result message was built: after
# after_tool_call (which may read it first, leaving nothing for the transcript) and outside any
# exception handling, so a generator that raised failed the whole run with the call unanswered.
def test_result_content_given_as_a_generator_is_read_once_inside_the_call() -> None:
    def lines(fail: bool) -> Any:
        yield "first"
        if fail:
            raise RuntimeError("disk vanished")
        yield TextContent("second")

    lazy = AgentTool(
        "lazy",
        "Returns its content as a generator.",
        {"type": "object", "properties": {"fail": {"type": "boolean"}}},
        lambda call_id, args, signal, on_update: AgentToolResult(content=lines(args["fail"])),
    )
    seen: List[Any] = []

    def after(ctx: Any, signal: Any) -> None:  # an observer, as a tracing plugin is
        seen.append([getattr(b, "text", b) for b in ctx.result.content])

    scripted = ScriptedModel([response(call("lazy", {"fail": False}), call("lazy", {"fail": True})), text("went on")])
    agent = Agent(scripted.model, tools=[lazy], stream_fn=scripted.stream_fn, after_tool_call=after)
    ends: List[Any] = []
    agent.subscribe(lambda event: ends.append(event) if event.type == "tool_execution_end" else None)
    agent.prompt("go")
    assert [m.role for m in agent.messages] == ["user", "assistant", "toolResult", "toolResult", "assistant"]
    ok, failed = _tool_results(agent)
    assert not ok.is_error and [b.text for b in ok.content] == ["first", "second"]
    assert failed.is_error and [b.text for b in failed.content] == ["disk vanished"]
    assert sorted(seen) == [["disk vanished"], ["first", "second"]]
    assert sorted([getattr(b, "text", b) for b in e.result.content] for e in ends) == sorted(seen)
    assert agent.messages[-1].text == "went on"


# An override whose content fails when read (its own exception, even one whose str() raises) is
# the call's error result, as a malformed one is.
def test_an_override_whose_content_fails_when_read_is_the_calls_error_result() -> None:
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no text")

    class Broken:
        def __iter__(self) -> Any:
            raise Unprintable()

    echo_tool = AgentTool(
        "echo",
        "Echo.",
        {"type": "object", "properties": {}},
        lambda call_id, args, signal, on_update: "echoed",
    )
    scripted = ScriptedModel([tool_call("echo", {}), text("went on")])
    agent = Agent(
        scripted.model,
        tools=[echo_tool],
        stream_fn=scripted.stream_fn,
        after_tool_call=lambda ctx, signal: AfterToolCallResult(content=Broken()),
    )
    agent.prompt("go")
    assert [m.role for m in agent.messages] == ["user", "assistant", "toolResult", "assistant"]
    (result,) = _tool_results(agent)
    assert result.is_error and result.content[0].text.startswith("Tool echo returned an invalid result: ")
    assert "Unprintable" in result.content[0].text
    assert agent.messages[-1].text == "went on"


def test_strings_and_reference_dict_blocks_in_result_content_are_text_blocks() -> None:
    from agentcore.tools import AgentTool, AgentToolResult
    from agentcore.types import ImageContent, TextContent

    mixed = AgentTool(
        "mixed",
        "Returns strings and dict blocks.",
        {"type": "object", "properties": {}},
        lambda call_id, args, signal, on_update: AgentToolResult(
            content=[
                "plain",
                {"type": "text", "text": "dict"},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            ]
        ),
    )
    scripted = ScriptedModel([tool_call("mixed", {}), text("ok")])
    agent = Agent(scripted.model, tools=[mixed], stream_fn=scripted.stream_fn)
    agent.prompt("go")
    (result,) = _tool_results(agent)
    assert not result.is_error
    assert [type(b) for b in result.content] == [TextContent, TextContent, ImageContent]
    assert [b.text for b in result.content[:2]] == ["plain", "dict"] and result.content[2].mime_type == "image/png"


def test_a_block_reason_that_is_not_a_string_still_blocks_with_a_text_result(caplog) -> None:
    ran = []
    guarded = AgentTool(
        "guarded",
        "Must not run.",
        {"type": "object", "properties": {}},
        lambda call_id, args, signal, on_update: ran.append(1) or AgentToolResult(content="ran"),
    )
    scripted = ScriptedModel([tool_call("guarded", {}), text("ok")])
    agent = Agent(
        scripted.model,
        tools=[guarded],
        stream_fn=scripted.stream_fn,
        before_tool_call=lambda ctx, signal: {"block": True, "reason": 403},
    )
    with caplog.at_level("WARNING", logger="agentcore.loop"):
        agent.prompt("go")
    (result,) = _tool_results(agent)
    assert ran == [] and result.is_error
    assert result.content[0].text == "Tool execution was blocked (the hook's reason was not a string: int)"
    assert "reason of type int" in caplog.text


# prompt() called from a coroutine on a worker thread (asyncio.run there): agentcore runs the loop,
# and a lone tool, on that thread, whose event loop is running, so asyncio.run() of an async tool
# or hook failed ("cannot be called from a running event loop").
def test_async_tools_and_hooks_work_under_a_running_loop_on_a_worker_thread() -> None:
    import asyncio
    import warnings

    @tool
    async def fetch(name: str) -> str:
        """Fetch a greeting."""
        await asyncio.sleep(0)
        return "hello " + name

    async def before(ctx, signal):
        await asyncio.sleep(0)
        seen.append(ctx.tool_call.name)

    seen: List[str] = []
    results: List[Any] = []

    async def main() -> None:
        scripted = ScriptedModel([tool_call("fetch", {"name": "ada"}), text("ok")])
        agent = Agent(scripted.model, tools=[fetch], stream_fn=scripted.stream_fn, before_tool_call=before)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # "prompt() blocks this thread's event loop"
            agent.prompt("go")
        results.extend(_tool_results(agent))

    worker = threading.Thread(target=lambda: asyncio.run(main()))
    worker.start()
    worker.join()
    (result,) = results
    assert not result.is_error and result.content[0].text == "hello ada" and seen == ["fetch"]


# @tool on an ``async def`` function (common when porting async code): its coroutine used to be
# reported as a successful result whose text was "<coroutine object ...>", never awaited.
def test_async_tool_functions_are_awaited() -> None:
    import asyncio
    import warnings

    @tool
    async def fetch(name: str) -> str:
        """Fetch a greeting."""
        await asyncio.sleep(0)
        return "hello " + name

    scripted = ScriptedModel([tool_call("fetch", {"name": "ada"}), text("ok")])
    agent = Agent(scripted.model, tools=[fetch], stream_fn=scripted.stream_fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "coroutine was never awaited" must not happen
        agent.prompt("go")
    (result,) = _tool_results(agent)
    assert result.is_error is False
    assert result.content[0].text == "hello ada"


# agent-loop §2.7c/§2.8 with ``async def`` hooks: the coroutine of an async before_tool_call used to
# be read as "no verdict", so an async permission gate let every call run.
@pytest.mark.parametrize("plugins", [[], [_PassiveToolHooks()]], ids=["alone", "with-plugin"])
def test_async_tool_hooks_are_awaited(plugins: List[Any]) -> None:
    import warnings

    from agentcore.loop import AfterToolCallResult, BeforeToolCallResult

    async def gate(ctx: Any, signal: Any) -> Any:
        return BeforeToolCallResult(block=True, reason="denied")

    async def rewrite(ctx: Any, signal: Any) -> Any:
        return AfterToolCallResult(details={"seen": True})

    ran: List[str] = []

    @tool
    def act(x: str) -> str:
        """Act."""
        ran.append(x)
        return "done"

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scripted = ScriptedModel([tool_call("act", {"x": "a"}), text("ok")])
        agent = Agent(scripted.model, tools=[act], stream_fn=scripted.stream_fn, before_tool_call=gate, plugins=plugins)
        agent.prompt("go")
        (blocked,) = _tool_results(agent)
        scripted = ScriptedModel([tool_call("act", {"x": "b"}), text("ok")])
        agent = Agent(
            scripted.model, tools=[act], stream_fn=scripted.stream_fn, after_tool_call=rewrite, plugins=plugins
        )
        agent.prompt("go")
        (rewritten,) = _tool_results(agent)
    assert blocked.is_error and blocked.content[0].text == "denied"
    assert ran == ["b"] and rewritten.details == {"seen": True}


# agent-loop §2.13 with ``async def`` hooks: an unawaited should_stop_after_turn coroutine is truthy,
# so the run stopped after the first turn; an async prepare_next_turn was ignored.
def test_async_turn_hooks_are_awaited() -> None:
    import warnings

    async def never_stop(ctx: Any, signal: Any) -> bool:
        return False

    calls: List[int] = []

    async def prepare(ctx: Any, signal: Any) -> Any:
        calls.append(len(ctx.new_messages))
        return None

    scripted = ScriptedModel([tool_call("echo", {"x": "a"}), text("ok")])
    agent = Agent(
        scripted.model,
        tools=[echo],
        stream_fn=scripted.stream_fn,
        should_stop_after_turn=never_stop,
        prepare_next_turn=prepare,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        agent.prompt("go")
    assert scripted.calls == 2 and agent.messages[-1].text == "ok"
    assert calls == [3, 4]


# --------------------------------------------------------------------------- fast paths (issue 4) behave like the general paths


# A lone ``@tool`` call that cannot send updates executes on the run thread (agent-loop §8.4);
# tools that can send updates, several calls, and blocking runs on the main thread keep workers.


def _thread_of_events(agent: Agent) -> List[Any]:
    seen: List[Any] = []
    agent.subscribe(lambda event: seen.append((event.type, threading.get_ident())))
    return seen


def test_lone_tool_without_on_update_runs_on_the_run_thread():  # agent-loop §8.4, §2.9 parallel order
    where: List[int] = []

    @tool
    def multiply(a: int, b: int) -> int:
        """Multiply."""
        where.append(threading.get_ident())
        return a * b

    scripted = ScriptedModel([tool_call("multiply", {"a": 6, "b": 7}), text("42")])
    agent = Agent(scripted.model, tools=[multiply], stream_fn=scripted.stream_fn)
    seen = _thread_of_events(agent)
    agent.prompt("go")
    run_threads = {ident for _, ident in seen}
    assert len(run_threads) == 1 and where[0] in run_threads  # no worker thread was involved
    assert where[0] != threading.get_ident()
    kinds = [kind for kind, _ in seen if kind.startswith("tool_") or kind == "turn_end"]
    assert kinds == ["tool_execution_start", "tool_execution_end", "turn_end", "turn_end"]
    result = agent.state.messages[2]
    assert result.role == "toolResult" and result.content[0].text == "42" and not result.is_error


def test_lone_tool_that_raises_still_gives_an_error_result_inline():  # agent-loop §2.8
    @tool
    def broken() -> str:
        """Fails."""
        raise RuntimeError("disk on fire")

    scripted = ScriptedModel([tool_call("broken", {}), text("sorry")])
    agent = Agent(scripted.model, tools=[broken], stream_fn=scripted.stream_fn)
    agent.prompt("go")
    result = agent.state.messages[2]
    assert result.is_error and result.content[0].text == "disk on fire"


def test_tool_with_on_update_runs_on_a_worker_and_its_updates_arrive_live():  # agent-loop §2.8, §8.4
    update_seen = threading.Event()
    where: List[int] = []

    @tool
    def slow(on_update: Any) -> str:
        """Reports progress, then waits until the listener saw it."""
        where.append(threading.get_ident())
        on_update("half way")
        assert update_seen.wait(5), "the update was not emitted while the tool was running"
        return "done"

    scripted = ScriptedModel([tool_call("slow", {}), text("ok")])
    agent = Agent(scripted.model, tools=[slow], stream_fn=scripted.stream_fn)
    run_thread: List[int] = []

    def listener(event: Any) -> None:
        if event.type == "tool_execution_update":
            run_thread.append(threading.get_ident())
            update_seen.set()

    agent.subscribe(listener)
    agent.prompt("go")
    assert agent.state.messages[2].content[0].text == "done"
    assert run_thread and where and where[0] != run_thread[0]


def test_two_calls_of_one_batch_still_run_concurrently():  # agent-loop §2.9 parallel
    barrier = threading.Barrier(2, timeout=5)

    @tool
    def meet(name: str) -> str:
        """Waits for the other call."""
        barrier.wait()  # would time out if the calls ran one after the other
        return name

    both = response(call("meet", {"name": "a"}, id="c1"), call("meet", {"name": "b"}, id="c2"))
    scripted = ScriptedModel([both, text("met")])
    agent = Agent(scripted.model, tools=[meet], stream_fn=scripted.stream_fn)
    agent.prompt("go")
    results = [m for m in agent.state.messages if m.role == "toolResult"]
    assert [r.content[0].text for r in results] == ["a", "b"] and not any(r.is_error for r in results)


def test_blocking_core_on_the_main_thread_keeps_the_tool_off_it():  # DESIGN §2: Ctrl+C reaches the loop
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("needs the main thread")
    where: List[int] = []

    @tool
    def ping() -> str:
        """Pong."""
        where.append(threading.get_ident())
        return "pong"

    scripted = ScriptedModel([tool_call("ping", {}), text("done")])
    events: List[Any] = []
    run_agent_loop(
        [UserMessage("go")],
        AgentContext("", [], [ping]),
        AgentLoopConfig(scripted.model),
        events.append,
        stream_fn=scripted.stream_fn,
    )
    assert where and where[0] != threading.get_ident()
    assert [e.type for e in events].count("tool_execution_end") == 1


# --------------------------------------------------------------------------- runs and streams


def test_event_order_with_initial_steering_and_follow_up(user, asst, mock_llm, mock_model, recorder):
    # agent-loop §6: steering at start joins the first turn; a follow-up starts a new turn
    steer, follow = user("steer"), user("follow")
    steering = [[steer]]
    follow_ups = [[follow]]
    llm = mock_llm([asst("one"), asst("two")])
    result = run_agent_loop(
        [user("prompt")],
        AgentContext(),
        AgentLoopConfig(
            mock_model,
            get_steering_messages=lambda: steering.pop(0) if steering else [],
            get_follow_up_messages=lambda: follow_ups.pop(0) if follow_ups else [],
        ),
        recorder,
        stream_fn=llm.stream_fn,
    )
    compact = []
    for e in recorder.events:
        if e.type in ("message_start", "message_end"):
            label = e.message.content if e.message.role == "user" else e.message.role
            compact.append(f"{e.type[8:]}:{label}")
        else:
            compact.append(e.type)
    assert compact == [
        "agent_start",
        "turn_start",
        "start:prompt",
        "end:prompt",
        "start:steer",
        "end:steer",
        "start:assistant",
        "end:assistant",
        "turn_end",
        "turn_start",
        "start:follow",
        "end:follow",
        "start:assistant",
        "end:assistant",
        "turn_end",
        "agent_end",
    ]
    assert result[2] is follow or result[1] is steer
    assert [m.content for m in llm.contexts[0].messages] == ["prompt", "steer"]


def test_error_response_ends_the_run_without_tools(
    user, asst, echo, mock_llm, mock_model, recorder, tool_call_block
):  # agent-loop §2.5
    failing = asst([tool_call_block("a", "t1")], "error", error_message="overloaded")
    polled = []
    llm = mock_llm([failing])
    result = run_agent_loop(
        [user("x")],
        AgentContext("", [], [echo.tool]),
        AgentLoopConfig(mock_model, get_follow_up_messages=lambda: polled.append(1) or []),
        recorder,
        stream_fn=llm.stream_fn,
    )
    assert recorder.types[-4:] == ["message_start", "message_end", "turn_end", "agent_end"]
    assert echo.executed == [] and polled == [] and result[-1].error_message == "overloaded"
    assert recorder.of("turn_end")[0].tool_results == []


def test_already_aborted_signal_makes_no_model_call(user, mock_llm, asst, mock_model, recorder):
    # agent-loop §2.3 step 1 [NEWEST]; closing aborted message is our documented choice
    controller = AbortController()
    controller.abort("stop now")
    llm = mock_llm([asst("x")])
    result = run_agent_loop(
        [user("x")],
        AgentContext(),
        AgentLoopConfig(mock_model),
        recorder,
        signal=controller.signal,
        stream_fn=llm.stream_fn,
    )
    assert llm.calls == 0
    assert recorder.types == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    assert result[-1].stop_reason == "aborted" and result[-1].error_message == "stop now"


def test_stream_without_terminal_event_yields_an_error(user, mock_model, recorder):  # agent-loop §8.3
    def stream_fn(model, context, **options):
        from agentcore.types import AssistantMessage

        partial = AssistantMessage(content=[TextContent("par")], response_id="r-1", response_model="m-2024")
        yield StartEvent(partial)
        yield TextDeltaEvent(0, "par", partial)

    result = run_agent_loop([user("x")], AgentContext(), AgentLoopConfig(mock_model), recorder, stream_fn=stream_fn)
    last = result[-1]
    assert last.role == "assistant" and last.stop_reason == "error"
    assert last.error_message == "The model stream ended without a done or error event"
    assert last.content == [TextContent("par")]
    assert (last.response_id, last.response_model) == ("r-1", "m-2024")  # issue 17: the partial's ids stay
    assert recorder.types[-3:] == ["message_end", "turn_end", "agent_end"]


def test_a_provider_event_without_partial_is_relayed_with_the_current_one(user, mock_model, recorder):
    # a plugin provider may stream its own event types; one without .partial keeps the partial
    from types import SimpleNamespace

    from agentcore.types import AssistantMessage

    partial = AssistantMessage(content=[TextContent("so far")])
    final = AssistantMessage(content=[TextContent("so far")], stop_reason="stop")

    def stream_fn(model, context, **options):
        yield StartEvent(partial)
        yield SimpleNamespace(type="heartbeat")
        yield DoneEvent("stop", final)

    result = run_agent_loop([user("x")], AgentContext(), AgentLoopConfig(mock_model), recorder, stream_fn=stream_fn)
    updates = [e for e in recorder.events if e.type == "message_update"]
    assert [u.assistant_message_event.type for u in updates] == ["heartbeat"]
    assert updates[0].message.text == "so far" and updates[0].message is not partial  # a copy
    assert result[-1] is final


def test_message_updates_carry_copies(user, mock_model, recorder):  # agent-loop §8.3
    from agentcore.types import AssistantMessage

    partial = AssistantMessage(content=[])

    def stream_fn(model, context, **options):
        yield StartEvent(partial)
        partial.content.append(TextContent("a"))
        yield TextStartEvent(0, partial)
        final = AssistantMessage(content=[TextContent("a")])
        yield DoneEvent("stop", final)

    result = run_agent_loop([user("x")], AgentContext(), AgentLoopConfig(mock_model), recorder, stream_fn=stream_fn)
    starts = [e.message for e in recorder.of("message_start") if e.message.role == "assistant"]
    update = recorder.of("message_update")[0]
    assert starts[0] is not partial and starts[0].content == []
    assert update.message is not partial and update.message.content == [TextContent("a")]
    assert recorder.of("message_end")[-1].message is result[-1]


def test_stream_options_only_when_set(user, asst, mock_llm, mock_model):  # COMMON: stream-function contract
    llm = mock_llm([asst("a")])
    run_agent_loop(
        [user("x")],
        AgentContext(),
        AgentLoopConfig(
            mock_model, api_key="static", get_api_key=lambda provider: None, session_id="s1", temperature=0.0
        ),
        lambda e: None,
        stream_fn=llm.stream_fn,
    )
    options = llm.options[0]
    assert set(options) == {"signal", "api_key", "session_id", "temperature"}
    assert options["api_key"] == "static" and options["temperature"] == 0.0


def test_agent_loop_failure_reaches_the_consumer(user, asst, mock_llm, mock_model):  # agent-loop §8.3
    def convert(messages):
        raise RuntimeError("converter broke")

    stream = agent_loop(
        [user("x")],
        AgentContext(),
        AgentLoopConfig(mock_model, convert_to_llm=convert),
        stream_fn=mock_llm([asst("a")]).stream_fn,
    )
    with pytest.raises(RuntimeError, match="converter broke"):
        list(stream)
    with pytest.raises(RuntimeError, match="converter broke"):
        stream.result(timeout=5)


def test_default_stream_fn_is_used(user, asst, mock_llm, mock_model):  # agent-loop §2.1
    llm = mock_llm([asst("a")])
    set_default_stream_fn(llm.stream_fn)
    try:
        agent_loop([user("x")], AgentContext(), AgentLoopConfig(mock_model)).result(timeout=5)
    finally:
        set_default_stream_fn(None)
    assert llm.calls == 1


def test_loop_config_takes_every_stream_option_once_defined(mock_llm, mock_model, asst):  # issue 11 §3
    from agentcore.options import StreamOptions

    llm = mock_llm([asst("ok")])
    config = AgentLoopConfig(mock_model, options=StreamOptions(timeout=5.0, max_retries=1), tool_choice="none")
    run_agent_loop([UserMessage("hi")], AgentContext("", [], []), config, lambda e: None, stream_fn=llm.stream_fn)
    sent = llm.options[0]
    assert (sent["timeout"], sent["max_retries"], sent["tool_choice"]) == (5.0, 1, "none")
    assert config.stream_options == StreamOptions(timeout=5.0, max_retries=1, tool_choice="none")
    with pytest.raises(TypeError, match="did you mean 'max_tokens'"):
        AgentLoopConfig(mock_model, max_token=5)


def test_event_to_dict_survives_values_json_cannot_hold():  # issue 10 item 2 (class: JSON encoders)
    import json

    from agentcore.events import ToolExecutionEndEvent, event_to_dict

    result = AgentToolResult(
        content=[TextContent("ok")], details={"nan": float("nan"), "raw": b"hi", "set": {1}, "obj": object()}
    )
    data = event_to_dict(ToolExecutionEndEvent("c1", "t", result, False))
    text = json.dumps(data, allow_nan=False)  # raised ValueError / TypeError before
    details = json.loads(text)["result"]["details"]
    assert details["nan"] is None and details["raw"] == {"type": "bytes", "base64": "aGk="}
    assert details["set"] == [1] and details["obj"].startswith("<object object")


# --------------------------------------------------------------------------- bad hook answers, config typos


def test_a_misspelt_tool_execution_mode_is_refused_naming_it(mock_model):  # agent-loop §2.6
    # it used to mean "parallel" without a word: a batch meant to run one call at a time ran at once
    with pytest.raises(ValueError, match='tool_execution must be "parallel" or "sequential", not \'sequental\''):
        AgentLoopConfig(mock_model, tool_execution="sequental")
    assert AgentLoopConfig(mock_model, tool_execution="sequential").tool_execution == "sequential"


@pytest.mark.parametrize(
    "verdict, problem",
    [
        ({"blocked": True, "reason": "no"}, "returned a mapping with the unknown key(s) 'blocked'"),
        (True, "returned a bool, not a BeforeToolCallResult"),
    ],
)
def test_a_before_tool_call_answer_that_is_no_verdict_never_runs_the_call(
    user, asst, echo, mock_llm, mock_model, recorder, tool_call_block, verdict, problem
):  # agent-loop §2.7c, §8.5
    # a misspelt verdict used to be read as "not blocked": the guarded call ran
    result, llm = _one_call_run(
        asst,
        mock_llm,
        mock_model,
        user,
        [echo.tool],
        [tool_call_block("rm -rf", "t1")],
        recorder,
        before_tool_call=lambda ctx, signal: verdict,
    )
    assert echo.executed == []
    assert result[2].is_error is True and problem in result[2].text
    assert llm.calls == 2  # an error result like any hook failure: the run goes on


@pytest.mark.parametrize(
    "override",
    [{"isError": True}, [{"is_error": True}, {"contents": "x"}]],
    ids=["reference-spelling", "one-of-several-plugins"],
)
def test_an_after_tool_call_override_with_an_unknown_key_is_the_calls_error_result(
    user, asst, echo, mock_llm, mock_model, recorder, tool_call_block, override
):  # agent-loop §2.8
    # the key used to be ignored without a word: the executed result stood as if nothing was said
    result, llm = _one_call_run(
        asst,
        mock_llm,
        mock_model,
        user,
        [echo.tool],
        [tool_call_block("a", "t1")],
        recorder,
        after_tool_call=lambda ctx, signal: override,
    )
    assert echo.executed == ["a"]
    assert result[2].is_error is True and "after_tool_call returned a mapping with the unknown key(s)" in result[2].text
    end = recorder.of("tool_execution_end")[0]
    assert end.is_error is True and end.result.content == result[2].content
    assert llm.calls == 2


class _MisspeltBlock:
    """A plugin whose verdict misspells ``block``."""

    @hookimpl
    def before_tool_call(self, context: Any, signal: Any) -> Any:
        return {"blocked": True}


def test_a_plugins_misspelt_verdict_never_runs_the_call() -> None:  # agent-loop §2.7c; hookspecs
    scripted = ScriptedModel([tool_call("echo", {"x": "a"}), text("ok")])
    ran: List[str] = []
    guarded = AgentTool("echo", "", {"type": "object"}, lambda *a: ran.append("ran") or "ran")
    agent = Agent(scripted.model, tools=[guarded], stream_fn=scripted.stream_fn, plugins=[_MisspeltBlock()])
    agent.prompt("go")
    (result,) = _tool_results(agent)
    assert ran == []
    assert result.is_error is True and "unknown key(s) 'blocked'" in result.content[0].text


# --------------------------------------------------------------------------- rules pinned by no scenario


@pytest.mark.parametrize("stop_reason", ["stop", "pending", "deferred"])
def test_tool_calls_run_whatever_the_stop_reason_and_pending_deferred_act_like_stop(
    user, asst, echo, mock_llm, mock_model, tool_call_block, stop_reason
):  # agent-loop §2.3 step 6 (blocks, not "toolUse", drive execution), §2.5
    llm = mock_llm([asst([tool_call_block("a", "t1")], stop_reason), asst("done", stop_reason)])
    polls: List[str] = []
    result = run_agent_loop(
        [user("x")],
        AgentContext("", [], [echo.tool]),
        AgentLoopConfig(mock_model, get_follow_up_messages=lambda: polls.append("f") or []),
        lambda e: None,
        stream_fn=llm.stream_fn,
    )
    assert echo.executed == ["a"] and llm.calls == 2
    assert [m.role for m in result] == ["user", "assistant", "toolResult", "assistant"]
    assert polls == ["f"]  # the final response ends the run as "stop" does: one follow-up poll


def test_turn_hooks_order_context_and_polling_points(
    user, asst, echo, mock_llm, mock_model, tool_call_block, recorder
):  # agent-loop §2.3 steps 7-11, §2.12, §2.13
    order: List[str] = []
    swapped: List[AgentContext] = []

    def prepare(ctx):
        order.append("prepare")
        if swapped:
            return None
        swapped.append(AgentContext("second", list(ctx.context.messages), ctx.context.tools))
        return AgentLoopTurnUpdate(context=swapped[0])

    def should_stop(ctx):
        order.append("stop?")
        assert ctx.context is swapped[0]  # it sees the context prepare_next_turn handed over
        return False

    def emit(event):
        recorder(event)
        if event.type == "turn_end":
            order.append("turn_end")

    llm = mock_llm([asst([tool_call_block("a", "t1")], "toolUse"), asst("done")])
    run_agent_loop(
        [user("x")],
        AgentContext("first", [], [echo.tool]),
        AgentLoopConfig(
            mock_model,
            prepare_next_turn=prepare,
            should_stop_after_turn=should_stop,
            get_steering_messages=lambda: order.append("steer?") or [],
            get_follow_up_messages=lambda: order.append("follow?") or [],
        ),
        emit,
        stream_fn=llm.stream_fn,
    )
    # hooks after every completed turn (the last one too), prepare first; steering after them;
    # follow-ups only when no tool call is left and steering came back empty
    assert order == [
        "steer?",
        "turn_end",
        "prepare",
        "stop?",
        "steer?",
        "turn_end",
        "prepare",
        "stop?",
        "steer?",
        "follow?",
    ]
    # the swapped context is the working one from then on: the second answer was appended to it
    assert [m.role for m in swapped[0].messages] == ["user", "assistant", "toolResult", "assistant"]
    assert llm.contexts[1].system_prompt == "second"


def test_parallel_immediate_errors_end_first_and_results_keep_source_order(
    user, asst, echo, mock_llm, mock_model, tool_call_block, recorder
):  # agent-loop §2.9 parallel, §6
    calls = [tool_call_block("a", "t1"), tool_call_block("b", "t2", name="nope"), tool_call_block("c", "t3")]
    result, _ = _one_call_run(asst, mock_llm, mock_model, user, [echo.tool], calls, recorder)
    batch = [
        (e.type, getattr(e, "tool_call_id", None) or e.message.tool_call_id)
        for e in recorder.events
        if e.type.startswith("tool_execution") or (e.type == "message_start" and e.message.role == "toolResult")
    ]
    starts, rest = batch[:4], batch[4:]
    # preflight in source order: the unknown tool's end comes at once, before any execution's end
    assert starts == [
        ("tool_execution_start", "t1"),
        ("tool_execution_start", "t2"),
        ("tool_execution_end", "t2"),
        ("tool_execution_start", "t3"),
    ]
    assert sorted(rest[:2]) == [("tool_execution_end", "t1"), ("tool_execution_end", "t3")]
    assert rest[2:] == [("message_start", "t1"), ("message_start", "t2"), ("message_start", "t3")]
    assert [m.tool_call_id for m in result if m.role == "toolResult"] == ["t1", "t2", "t3"]


def test_updates_carry_the_raw_arguments_and_the_block_stays_as_the_model_sent_it(
    user, asst, mock_llm, mock_model, recorder
):  # agent-loop §1.12, §2.7a, §2.8
    received: List[Any] = []

    def execute(tool_call_id, args, signal, on_update):
        received.append(args)
        on_update(AgentToolResult([TextContent("half")]))
        return AgentToolResult([TextContent("done")])

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    shimmed = AgentTool("count", "", schema, execute, prepare_arguments=lambda raw: {"n": raw["legacy"]})
    block = ToolCall("t1", "count", {"legacy": "5"})
    _one_call_run(asst, mock_llm, mock_model, user, [shimmed], [block], recorder)
    assert received == [{"n": 5}]  # shimmed, then validated (coerced)
    assert recorder.of("tool_execution_start")[0].args == {"legacy": "5"}
    assert recorder.of("tool_execution_update")[0].args == {"legacy": "5"}
    assert block.arguments == {"legacy": "5"}


def _returns_nothing(model, context, **options):
    pass  # a forgotten return


async def _async_stream_fn(model, context, **options):
    return []


def _yields_dicts(model, context, **options):
    return [{"type": "done", "reason": "stop"}]  # the reference JSON shape, not event objects


@pytest.mark.parametrize(
    "stream_fn, problem",
    [
        (_returns_nothing, "stream_fn returned a NoneType, not an iterable of stream events"),
        (_async_stream_fn, "stream_fn returned a coroutine, not an iterable of stream events"),
        (_yields_dicts, "stream_fn yielded a dict, not a stream event"),
    ],
)
def test_a_stream_fn_breaking_its_contract_fails_the_run_naming_the_problem(
    user, mock_model, stream_fn, problem
):  # agent-loop §1.11, §2.15 (a raising stream_fn escapes); standards: bad input
    # the run used to fail with "'NoneType' object is not iterable" or "'dict' object has no attribute 'type'"
    agent = Agent(mock_model, stream_fn=stream_fn)
    agent.prompt("x")
    last = agent.messages[-1]
    assert last.stop_reason == "error" and last.error_message.startswith(problem)
    with pytest.raises(TypeError, match=problem):
        run_agent_loop([user("x")], AgentContext("", []), AgentLoopConfig(mock_model), lambda e: None, None, stream_fn)

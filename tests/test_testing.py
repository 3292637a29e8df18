"""agentcore.testing as a user testing their own agent: ScriptedModel against the provider contract."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from typing import Any, List

import pytest

from agentcore import Agent, AgentSpec, AgentTask, run_many
from agentcore.testing import ScriptedModel, response, text, tool_call
from agentcore.types import AgentContext, AssistantMessage, TextContent, ThinkingContent, UserMessage


def _stream_events(scripted: ScriptedModel) -> List[Any]:
    stream = scripted.stream_fn(scripted.model, AgentContext(messages=[UserMessage("hi")]))
    return list(stream)


def _failed(
    content: List[Any], stop_reason: str = "error", error_message: Any = "connection reset"
) -> AssistantMessage:
    return AssistantMessage(
        content=content,
        api="scripted",
        provider="scripted",
        model="x",
        stop_reason=stop_reason,
        error_message=error_message,
    )


def test_failed_response_with_content_streams_it_before_the_error():  # providers §3 rules 2 and 6
    # A real provider that fails mid-answer has streamed what it got: start, the block's deltas,
    # then error without closing the open block; the UI under test shows the partial text.
    scripted = ScriptedModel([_failed([TextContent("Hello wor")])])
    events = _stream_events(scripted)
    assert [e.type for e in events] == ["start", "text_start", "text_delta", "error"]
    assert events[-1].error.content[0].text == "Hello wor"
    assert events[-1].error.error_message == "connection reset"
    assert [e.type for e in _stream_events(ScriptedModel([_failed([])]))] == ["error"]  # as an HTTP failure

    agent = Agent(ScriptedModel([_failed([TextContent("Hello wor")])]).model)
    seen: List[str] = []
    agent.subscribe(lambda event: seen.append(event.type))
    agent.prompt("hi")
    assert "message_update" in seen
    assert agent.messages[-1].content[0].text == "Hello wor"


def test_failed_response_closes_every_block_but_the_last():  # providers §3 rule 6
    scripted = ScriptedModel([_failed([TextContent("done"), TextContent("half")], stop_reason="aborted")])
    types = [e.type for e in _stream_events(scripted)]
    assert types == ["start", "text_start", "text_delta", "text_end", "text_start", "text_delta", "error"]


def test_failed_response_scripted_without_a_message_still_carries_one():  # providers §3: error has errorMessage
    scripted_message = _failed([], error_message=None)
    events = _stream_events(ScriptedModel([text("partial", stop_reason="error"), scripted_message]))
    assert events[-1].error.error_message == "An unknown error occurred"
    scripted = ScriptedModel([scripted_message, response("x", stop_reason="aborted")])
    assert _stream_events(scripted)[-1].error.error_message == "An unknown error occurred"
    assert _stream_events(scripted)[-1].error.error_message == "Request was aborted"
    assert scripted_message.error_message is None  # the script's own object is left alone


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs the fork start method")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")  # forks on purpose
def test_scripted_model_refuses_a_forked_process_pool_instead_of_replaying_a_copy():
    # Linux's default ProcessPoolExecutor forks: each worker held a copy of the script and
    # answered from it ("A", "B", "A" for three tasks), while scripted.calls stayed 0 here.
    scripted = ScriptedModel(["A", "B", "C"])
    tasks = [AgentTask(AgentSpec(scripted.model), "go", id=n) for n in range(2)]
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
        results = list(run_many(tasks, executor=pool, progress=False))
    assert [r.ok for r in results] == [False, False]
    assert all("lives in another process" in str(r.error) for r in results)
    assert (scripted.calls, scripted.remaining) == (0, 3)


def test_scripted_exception_class_is_raised_not_called_with_the_context():
    # ScriptedModel([ConnectionError]) was taken for a callable response: ConnectionError(context)
    # was raised, so the error message was the whole request (system prompt, messages) as text.
    scripted = ScriptedModel([ConnectionError, lambda context: TimeoutError])
    agent = Agent(scripted.model, system_prompt="Be terse.")
    with pytest.raises(ConnectionError) as raised:
        scripted.stream_fn(scripted.model, AgentContext("Be terse.", [UserMessage("hi")]))
    assert raised.value.args == ()
    agent.prompt("hi")
    assert agent.messages[-1].stop_reason == "error"
    assert agent.messages[-1].error_message == "TimeoutError"  # not the request it was given


@pytest.mark.parametrize("arguments", ['{"a": 1, "b": 2}', b'{"a": 1}', 3])
def test_tool_call_arguments_that_are_not_a_dict_are_refused_by_name(arguments):
    # a JSON string was a bare "dictionary update sequence element #0 has length 1; 2 is required"
    with pytest.raises(TypeError, match=r"call\('add'\): arguments must be a dict .* not "):
        tool_call("add", arguments)


def test_contexts_of_a_long_run_share_the_conversation():  # scale: memory linear in the turns
    # Each call used to keep its own list of the whole conversation: n turns held O(n^2)
    # references (5,000 turns: 25 million). Counting the references to the first message counts
    # the lists that hold it, without timing anything.
    import sys

    from agentcore import tool

    @tool(description="")
    def ping() -> str:
        return "pong"

    turns = 300
    scripted = ScriptedModel([tool_call("ping", {}) for _ in range(turns)] + [text("done")])
    agent = Agent(scripted.model, tools=[ping])
    agent.prompt("go")
    first = agent.messages[0]
    assert scripted.calls == turns + 1 and len(agent.messages) == 2 * turns + 2
    assert sys.getrefcount(first) < 20  # old code: one per recorded call, over 300
    assert sys.getrefcount(scripted.contexts[0].tools[0]) < 20  # the tool list is kept once too
    # every call still reads as what it received, in its own lists
    for index in (0, 1, 150, turns):
        context = scripted.contexts[index]
        assert context.messages == agent.messages[: 2 * index + 1]
        assert [t.name for t in context.tools] == ["ping"]
    assert scripted.contexts[-1].messages is not scripted.contexts[-1].messages
    assert [len(c.messages) for c in scripted.contexts[-2:]] == [2 * turns - 1, 2 * turns + 1]

    # a transform_context hook (or compaction) may replace earlier messages: such a call gets
    # its own list, and the calls before keep theirs
    scripted = ScriptedModel()
    one, two, three = UserMessage("one"), UserMessage("two"), UserMessage("three")
    for messages in ([one], [one, two], [three, two], [three, two, one], [three]):
        scripted.stream_fn(scripted.model, AgentContext(messages=list(messages)))
    assert [c.messages for c in scripted.contexts] == [[one], [one, two], [three, two], [three, two, one], [three]]
    assert scripted.contexts[1:3] == [AgentContext(messages=[one, two]), AgentContext(messages=[three, two])]
    scripted.contexts.clear()
    assert len(scripted.contexts) == 0 and scripted.contexts == []


def test_a_long_streamed_answer_grows_one_block_in_place():  # scale: linear in the words
    # With a token rate, every word used to get a new block holding a new copy of the text so
    # far: quadratic copying (400,000 words took 12 s). Counting the blocks built counts those
    # copies; the partials now share one growing block, as the providers' stream writer does.
    words = 2000
    body = "word " * words
    scripted = ScriptedModel([response(TextContent(body), ThinkingContent(body))], tokens_per_second=1e9)
    events = _stream_events(scripted)
    for kind, field in (("text_delta", "text"), ("thinking_delta", "thinking")):
        deltas = [e for e in events if e.type == kind]
        assert len(deltas) == words and "".join(e.delta for e in deltas) == body
        blocks = {id(e.partial.content[e.content_index]) for e in deltas}
        assert len(blocks) == 1  # old code: one per word
        assert getattr(deltas[0].partial.content[deltas[0].content_index], field) == body
    assert events[-1].type == "done" and events[-1].message.content == [TextContent(body), ThinkingContent(body)]

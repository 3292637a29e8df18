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


# agent-loop §2.8 tool-result message: content is a block list. A bare string returned as
# ``AgentToolResult(content="done")`` (or set by after_tool_call) must not become one block per
# character, which no provider or session can encode.
def test_string_result_content_becomes_one_text_block() -> None:
    from agentcore.loop import AfterToolCallResult
    from agentcore.tools import AgentTool, AgentToolResult
    from agentcore.types import TextContent

    raw = AgentTool("raw", "Returns a bare string as content.", {"type": "object", "properties": {}},
                    lambda call_id, args, signal, on_update: AgentToolResult(content="hello"))
    single = AgentTool("single", "Returns one block, not a list.", {"type": "object", "properties": {}},
                       lambda call_id, args, signal, on_update: AgentToolResult(content=TextContent("one")))
    from agentcore.testing import call, response

    scripted = ScriptedModel([response(call("raw", {}), call("single", {})), text("ok")])
    agent = Agent(scripted.model, tools=[raw, single], stream_fn=scripted.stream_fn)
    agent.prompt("go")
    first, second = _tool_results(agent)
    assert [(b.type, b.text) for b in first.content] == [("text", "hello")]
    assert [(b.type, b.text) for b in second.content] == [("text", "one")]

    scripted = ScriptedModel([tool_call("echo", {"x": "a"}), text("ok")])
    agent = Agent(scripted.model, tools=[echo], stream_fn=scripted.stream_fn,
                  after_tool_call=lambda ctx, signal: AfterToolCallResult(content="replaced"))
    agent.prompt("go")
    (result,) = _tool_results(agent)
    assert [(b.type, b.text) for b in result.content] == [("text", "replaced")]


# agent-loop §2.7b (AJV coerceTypes): a numeric string for an integer parameter becomes that
# integer exactly; big ids sent as strings must not lose digits through a float.
def test_integer_string_coercion_is_exact_for_big_numbers() -> None:
    from agentcore.tools import validate_tool_arguments

    @tool
    def lookup(item_id: int, weight: float = 0.0) -> str:
        """Look an item up."""
        return str(item_id)

    args = validate_tool_arguments(lookup, {"item_id": "12345678901234567891", "weight": "-98765432109876543210"})
    assert args["item_id"] == 12345678901234567891
    assert args["weight"] == -98765432109876543210
    assert validate_tool_arguments(lookup, {"item_id": " 42.00 ", "weight": "1.5"}) == {"item_id": 42, "weight": 1.5}


# agent-loop §1.5: the rich converter never raises; a summary message whose summary is null
# (a hand-written or older session) converts to the preamble with an empty summary.
def test_summary_messages_with_null_summary_convert() -> None:
    from agentcore.messages import (
        BRANCH_SUMMARY_PREFIX, BRANCH_SUMMARY_SUFFIX, COMPACTION_SUMMARY_PREFIX,
        COMPACTION_SUMMARY_SUFFIX, convert_to_llm,
    )

    out = convert_to_llm([{"role": "compactionSummary", "summary": None, "timestamp": 1},
                          {"role": "branchSummary", "summary": None, "timestamp": 2}])
    assert [m.content[0].text for m in out] == [COMPACTION_SUMMARY_PREFIX + COMPACTION_SUMMARY_SUFFIX,
                                                BRANCH_SUMMARY_PREFIX + BRANCH_SUMMARY_SUFFIX]


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


# The @tool return rules ("anything else JSON text of it ... dataclasses via asdict"): a dataclass
# or enum nested in a returned dict/list used to reach the model as its repr ("Point(x=3, y=0)").
def test_tool_return_value_nests_dataclasses_and_enums_as_json() -> None:
    import enum
    import json
    from dataclasses import dataclass

    class Color(enum.Enum):
        RED = "red"

    @dataclass
    class Point:
        x: int
        y: int = 0

    @tool
    def shapes(n: int) -> Any:
        """Return shapes."""
        return {"points": [Point(n)], "color": Color.RED, "tags": {"a"}}

    result = shapes.execute("call-1", {"n": 3})
    assert json.loads(result.content[0].text) == {"points": [{"x": 3, "y": 0}], "color": "red", "tags": ["a"]}


# EventStream contract (agent-loop §8.3): a producer failure reaches the consumer. A completing
# event whose result cannot be extracted used to close the stream without an end marker, so the
# producer's fail(exc) was ignored and the consumer waited forever.
def test_stream_stays_failable_when_the_result_cannot_be_extracted() -> None:
    from types import SimpleNamespace

    from agentcore.streams import AssistantMessageEventStream

    stream = AssistantMessageEventStream()
    broken_done = SimpleNamespace(type="done")  # no .message
    with pytest.raises(AttributeError) as info:
        stream.push(broken_done)
    stream.fail(info.value)
    with pytest.raises(AttributeError):
        stream.result(timeout=5)
    with pytest.raises(AttributeError):
        list(stream)


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


# @tool return rules: "a content block (or a list of them) as content". A tuple of blocks (say
# ``return text_block, image_block``) used to become JSON text describing the blocks.
def test_tool_returning_a_tuple_of_blocks_gives_content() -> None:
    from agentcore.types import ImageContent, TextContent

    @tool
    def picture() -> Any:
        """Return a caption and an image."""
        return TextContent("caption"), ImageContent(data="aGk=", mime_type="image/png")

    result = picture.execute("call-1", {})
    assert [block.type for block in result.content] == ["text", "image"]


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


# Plugins: an installed plugin is loaded through its entry point; passing the same object to
# Agent(plugins=[...]) as well (or listing it twice) used to raise pluggy's ValueError with a dump
# of every registered plugin. None for tools/messages/plugins means "none", as () does.
def test_agent_accepts_already_loaded_plugins_and_none_collections() -> None:
    import agentcore.testing as testing_module

    class Observer:
        def __init__(self) -> None:
            self.count = 0

        @hookimpl
        def on_event(self, event: Any, agent: Any) -> None:
            self.count += 1

    observer = Observer()
    scripted = ScriptedModel([text("ok")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn, tools=None, messages=None,
                  plugins=[testing_module, observer, observer])
    events: List[Any] = []
    agent.subscribe(events.append)
    agent.prompt("go")
    assert observer.count == len(events) > 0  # the observer saw each event once
    assert Agent(scripted.model, plugins=None).messages == []


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
        agent = Agent(scripted.model, tools=[act], stream_fn=scripted.stream_fn, before_tool_call=gate,
                      plugins=plugins)
        agent.prompt("go")
        (blocked,) = _tool_results(agent)
        scripted = ScriptedModel([tool_call("act", {"x": "b"}), text("ok")])
        agent = Agent(scripted.model, tools=[act], stream_fn=scripted.stream_fn, after_tool_call=rewrite,
                      plugins=plugins)
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
    agent = Agent(scripted.model, tools=[echo], stream_fn=scripted.stream_fn,
                  should_stop_after_turn=never_stop, prepare_next_turn=prepare)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        agent.prompt("go")
    assert scripted.calls == 2 and agent.messages[-1].text == "ok"
    assert calls == [3, 4]


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


# agent-loop §2.12/§2.6: queue modes are "one-at-a-time" or "all", tool execution "parallel" or
# "sequential". A typo ("All", "sequental") used to mean the default silently.
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


# agent-loop §2.6: a tool's execution_mode "sequential" forces its batch to run one call at a time.
# A typo used to be accepted and meant "parallel", for exactly the tools that must not overlap.
def test_tool_execution_mode_typo_raises() -> None:
    from agentcore.tools import AgentTool
    from agentcore.types import ToolExecutionMode

    with pytest.raises(ValueError, match="execution_mode"):
        AgentTool("t", "d", {"type": "object"}, lambda *a: None, execution_mode="sequental")
    with pytest.raises(ValueError, match="execution_mode"):
        tool(execution_mode="serial")(lambda: None)
    assert AgentTool("t", "d", {}, lambda *a: None, execution_mode=ToolExecutionMode("sequential")).execution_mode

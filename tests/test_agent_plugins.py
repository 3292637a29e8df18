"""The Agent routes its hooks, tools, providers and sessions through its own plugin manager.

DESIGN §4: constructor callables become hook implementations of that agent's own manager, so
per-agent hooks never leak into other agents; built-ins and plugins register through the same hooks.
"""

from __future__ import annotations

import gc
import logging
import threading
from typing import Any, List

import pytest
from _echo import ECHO_SCHEMA

from agentcore import (
    Agent,
    AgentTool,
    AgentToolResult,
    BeforeToolCallResult,
    CustomMessage,
    Model,
    Session,
    TextContent,
    UserMessage,
    hookimpl,
)
from agentcore.messages import DROP
from agentcore.testing import ScriptedModel, text


def _echo_tool(executed: List[Any]) -> AgentTool:
    def execute(tool_call_id, args, signal, on_update):
        executed.append(args["value"])
        return AgentToolResult(content=[TextContent(f"echoed: {args['value']}")])

    return AgentTool("echo", "Echo a value", ECHO_SCHEMA, execute)


def _tool_then_text(scripted_cls=ScriptedModel) -> ScriptedModel:
    return scripted_cls([ScriptedModel.tool_call("echo", {"value": "hello"}, id="t1"), ScriptedModel.text("done")])


class Blocker:
    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.calls = 0

    @hookimpl
    def before_tool_call(self, context, signal):
        self.calls += 1
        return BeforeToolCallResult(block=True, reason=self.reason)


def test_agent_plugin_blocks_a_tool_call_and_does_not_leak_into_other_agents():
    executed: List[Any] = []
    scripted = _tool_then_text()
    agent = Agent(scripted.model, tools=[_echo_tool(executed)], plugins=[Blocker("no echo today")])
    agent.prompt("go")
    result = [m for m in agent.state.messages if m.role == "toolResult"][0]
    assert result.is_error and result.content[0].text == "no echo today"
    assert executed == []

    other_scripted = _tool_then_text()
    other = Agent(other_scripted.model, tools=[_echo_tool(executed)])
    other.prompt("go")
    assert executed == ["hello"]


def test_constructor_callable_is_called_before_plugins_and_the_first_block_wins():
    order: List[str] = []

    def own(context, signal):
        order.append("own")
        return None  # does not block: the plugin decides

    blocker = Blocker("blocked by plugin")
    scripted = _tool_then_text()
    agent = Agent(scripted.model, tools=[_echo_tool([])], before_tool_call=own, plugins=[blocker])
    agent.prompt("go")
    assert order == ["own"] and blocker.calls == 1
    assert agent.state.messages[2].content[0].text == "blocked by plugin"

    def own_blocks(context, signal):
        return BeforeToolCallResult(block=True, reason="blocked by agent")

    agent.before_tool_call = own_blocks  # an attribute change applies to the next run
    scripted.push(ScriptedModel.tool_call("echo", {"value": "again"}, id="t2"), ScriptedModel.text("ok"))
    agent.prompt("again")
    assert blocker.calls == 1  # not consulted: the agent's own hook blocked first
    assert agent.state.messages[-2].content[0].text == "blocked by agent"


def test_agent_plugins_hook_answers_as_the_agent_acts_before_and_between_runs():  # issue 11 §2
    """``agent.plugins.hook.before_tool_call(...)`` answered None before the first run of an agent
    built with ``before_tool_call=`` (the callables were adapted at run start only), and with the
    old callable after it was replaced, until the next run: not what the agent acts on."""

    def deny(context, signal):
        return BeforeToolCallResult(block=True, reason="denied")

    scripted = _tool_then_text()
    agent = Agent(scripted.model, tools=[_echo_tool([])], before_tool_call=deny)
    pm = agent.plugins
    assert pm.hook.before_tool_call(context=None, signal=None) == BeforeToolCallResult(block=True, reason="denied")
    agent.before_tool_call = None
    assert pm.hook.before_tool_call(context=None, signal=None) is None
    agent.before_tool_call = deny
    agent.prompt("go")
    assert agent.state.messages[2].content[0].text == "denied"
    assert pm.hook.before_tool_call(context=None, signal=None) == BeforeToolCallResult(block=True, reason="denied")

    def seen_transform(messages, signal):
        return messages[-1:]

    agent.transform_context = seen_transform
    kept = [UserMessage("a"), UserMessage("b")]
    pm.hook.transform_context(messages=kept, signal=None)
    assert [m.content for m in kept] == ["b"]


def test_transform_context_of_agent_and_plugin_chain():
    class AddNote:
        @hookimpl
        def transform_context(self, messages, signal):  # plugins change the list in place
            messages.append(UserMessage("note from plugin"))

    def own(messages, signal):
        return [m for m in messages if "secret" not in str(getattr(m, "content", ""))]

    scripted = ScriptedModel([ScriptedModel.text("ok")])
    agent = Agent(scripted.model, transform_context=own, plugins=[AddNote()], messages=[UserMessage("secret stuff")])
    agent.prompt("hello")
    sent = [str(m.content) for m in scripted.contexts[0].messages]
    assert "note from plugin" in sent[-1]
    assert not any("secret" in s for s in sent)


@pytest.mark.parametrize("answer", ["a forgotten list", 5])
def test_an_agent_transform_context_returning_no_list_fails_the_run_naming_it(answer):
    """The constructor callable's answer went through ``list()``: a str emptied the context
    into one message per character (the model got nonsense), a number failed with a bare
    TypeError."""
    scripted = ScriptedModel([ScriptedModel.text("ok")])
    agent = Agent(scripted.model, transform_context=lambda messages, signal: answer)
    agent.prompt("hello")
    assert scripted.calls == 0
    assert agent.state.error_message == f"transform_context must return a list of messages, not {type(answer).__name__}"


def test_convert_to_llm_plugin_claims_custom_messages_and_the_builtin_drops_the_rest():
    class CustomToUser:
        @hookimpl
        def convert_to_llm(self, message):
            if getattr(message, "role", None) == "custom":
                return UserMessage(f"[{message.custom_type}] {message.content}")
            if getattr(message, "role", None) == "bashExecution":
                return DROP
            return None

    scripted = ScriptedModel([ScriptedModel.text("ok")])
    agent = Agent(
        scripted.model,
        plugins=[CustomToUser()],
        messages=[CustomMessage("reminder", "water the plants"), {"role": "notification"}],
    )
    agent.prompt("hello")
    roles = [m.role for m in scripted.contexts[0].messages]
    assert roles == ["user", "user"]
    assert scripted.contexts[0].messages[0].content == "[reminder] water the plants"


def test_on_event_observers_see_reduced_state_and_their_failures_are_not_fatal(caplog):
    seen: List[Any] = []

    class Observer:
        @hookimpl
        def on_event(self, event, agent):
            if event.type == "message_end":
                seen.append(event.message in agent.state.messages)  # the reducer ran first

    class Broken:
        @hookimpl
        def on_event(self, event, agent):
            raise RuntimeError("observer bug")

    scripted = ScriptedModel([ScriptedModel.text("ok")])
    # Observer registered last: called first (a failing observer ends that pluggy call)
    agent = Agent(scripted.model, plugins=[Broken(), Observer()])
    with caplog.at_level(logging.ERROR, logger="agentcore.plugins"):
        new = agent.prompt("hello")
    assert [m.role for m in new] == ["user", "assistant"] and new[-1].stop_reason == "stop"
    assert seen == [True, True]
    assert "observer bug" in caplog.text


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
    agent = Agent(
        scripted.model,
        stream_fn=scripted.stream_fn,
        tools=None,
        messages=None,
        plugins=[testing_module, observer, observer],
    )
    events: List[Any] = []
    agent.subscribe(events.append)
    agent.prompt("go")
    assert observer.count == len(events) > 0  # the observer saw each event once
    assert Agent(scripted.model, plugins=None).messages == []


class _Every:
    def __init__(self, calls: List[Any]) -> None:
        self.calls = calls

    @hookimpl
    def on_event(self, event, agent):
        self.calls.append(("every", event.type))


class _Lifecycle:
    def __init__(self, calls: List[Any]) -> None:
        self.calls = calls

    @hookimpl
    def on_lifecycle_event(self, event, agent):
        self.calls.append(
            ("lifecycle", event.type, event.type != "message_end" or event.message in agent.state.messages)
        )


def test_on_lifecycle_event_sees_every_event_but_message_update_after_on_event():  # issue 11 §7
    calls: List[Any] = []
    listened: List[str] = []
    scripted = _tool_then_text()
    agent = Agent(scripted.model, tools=[_echo_tool([])], plugins=[_Every(calls), _Lifecycle(calls)])
    agent.subscribe(lambda event: listened.append(event.type))
    agent.prompt("go")
    assert "message_update" in listened  # the scripted model streams
    assert [c[0:2] for c in calls if c[0] == "every"] == [("every", t) for t in listened]
    lifecycle = [c for c in calls if c[0] == "lifecycle"]
    assert [c[1] for c in lifecycle] == [t for t in listened if t != "message_update"]
    assert all(c[2] for c in lifecycle)  # after the reducer
    for index, call in enumerate(calls):  # on_event first, then on_lifecycle_event, per event
        if call[0] == "lifecycle":
            assert calls[index - 1] == ("every", call[1])


def test_lifecycle_observers_make_no_hook_call_per_streamed_token(caplog):  # issue 11 §7
    calls: List[Any] = []
    hook_calls: List[Any] = []

    class Broken:
        @hookimpl
        def on_lifecycle_event(self, event, agent):
            raise RuntimeError("tracer bug")

    scripted = ScriptedModel([ScriptedModel.text("a few streamed words"), ScriptedModel.text("more")])
    agent = Agent(scripted.model, plugins=[Broken(), _Lifecycle(calls)])
    for impl in agent.plugins.hook.on_event.get_hookimpls():  # installed observers of every event
        agent.plugins.unregister(impl.plugin)
    agent.plugins.add_hookcall_monitoring(
        lambda name, impls, kwargs: hook_calls.append((name, getattr(kwargs.get("event"), "type", None))),
        lambda outcome, name, impls, kwargs: None,
    )
    listened: List[str] = []
    with caplog.at_level(logging.ERROR, logger="agentcore.plugins"):
        new = agent.prompt("hello")
        unsubscribe = agent.subscribe(lambda event: listened.append(event.type))
        agent.prompt("again")
        unsubscribe()
    assert new[-1].stop_reason == "stop" and agent.messages[-1].stop_reason == "stop"
    assert "message_update" in listened
    assert hook_calls and not [c for c in hook_calls if c[1] == "message_update"]
    assert ("on_lifecycle_event", "message_end") in hook_calls
    assert ("lifecycle", "message_end", True) in calls
    assert "tracer bug" in caplog.text and "on_lifecycle_event" in caplog.text


def test_tools_and_providers_registered_on_an_agent_are_resolved_by_name():
    executed: List[Any] = []
    scripted = _tool_then_text()

    class Toolbox:
        @hookimpl
        def register_tools(self, register):
            register(_echo_tool(executed))

    class MyProvider:
        api = "my-wire-api"

        def stream(self, model, context, **options):
            return scripted.stream_fn(model, context, **options)

    class Providers:
        @hookimpl
        def register_providers(self, register):
            register(MyProvider())

    model = Model(id="m", api="my-wire-api", provider="mine")
    agent = Agent(model)
    agent.plugins.register(Toolbox())  # registered after construction: visible from now on
    agent.plugins.register(Providers())
    agent.tools = ["echo"]  # names are checked when assigned (issue 10 item 10)
    agent.prompt("go")
    assert executed == ["hello"]
    assert [m.role for m in agent.state.messages] == ["user", "assistant", "toolResult", "assistant"]


def test_model_given_as_provider_slash_id_is_looked_up_in_the_catalog():
    agent = Agent("anthropic/claude-sonnet-4-5")
    assert agent.state.model.provider == "anthropic"
    assert agent.state.model.api == "anthropic-messages"


def test_session_records_a_run_and_a_new_agent_resumes_from_it(tmp_path):
    path = tmp_path / "s.jsonl"
    session = Session.create(path)
    scripted = ScriptedModel([ScriptedModel.text("first answer")])
    agent = Agent(scripted.model, session=session, thinking_level="low")
    agent.prompt("first question")
    session.close()

    reopened = Session.open(path)
    scripted.push(ScriptedModel.text("second answer"))
    resumed = Agent(scripted.model, session=reopened)
    assert [m.role for m in resumed.state.messages] == ["user", "assistant"]
    assert resumed.state.thinking_level == "low"
    resumed.prompt("second question")
    assert "first question" in str(scripted.contexts[-1].messages[0].content)
    reopened.close()
    texts = [str(getattr(m, "content", "")) for m in Session.open(path, read_only=True).build_context().messages]
    assert len(texts) == 4 and "second question" in texts[2]


def test_events_iterator_receives_a_runs_events_from_another_thread():  # DESIGN §2
    scripted = ScriptedModel([ScriptedModel.text("ok")])
    agent = Agent(scripted.model)
    with agent.events(until_agent_end=True) as events:
        agent.prompt("hello", wait=False)
        types = [event.type for event in events]
    assert types[0] == "agent_start" and types[-1] == "agent_end"
    assert "message_end" in types
    assert agent.wait_for_idle(5)


def test_events_until_agent_end_stops_at_the_first_agent_end_with_later_runs_queued():
    """Two runs that finished before the consumer read anything: the iterator yielded both (its
    stop marker went behind the events already queued)."""
    scripted = ScriptedModel([ScriptedModel.text("one"), ScriptedModel.text("two")])
    agent = Agent(scripted.model)
    events = agent.events(until_agent_end=True)
    agent.prompt("first")
    agent.prompt("second")
    types = [event.type for event in events]
    assert types.count("agent_start") == 1 and types[-1] == "agent_end"
    assert list(events) == []  # closed: nothing more, and no later event is received


def test_an_interrupted_events_loop_unsubscribes():
    """Ctrl-C (a kernel interrupt) is the usual way out of a blocking ``for e in agent.events()``;
    the subscription stayed and queued every later event for nobody."""
    scripted = ScriptedModel([ScriptedModel.text("one")])
    agent = Agent(scripted.model)
    listeners = len(agent._listeners)
    events = agent.events()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt  # what SIGINT raises in the main thread blocked in the queue's get

    events._queue.get = interrupted  # type: ignore[method-assign]
    try:
        for _ in events:
            pass
    except KeyboardInterrupt:
        pass
    else:
        raise AssertionError("the interrupt did not reach the loop")
    assert len(agent._listeners) == listeners
    agent.prompt("later")


def test_an_events_loop_left_early_without_with_unsubscribes():
    """``for e in agent.events(until_agent_end=True): ... break`` (no ``with``, no ``close()``)
    kept the subscription for ever: a thousand such consumers left a thousand queues that every
    later event was copied into (5.5 million events queued for nobody, each run slower)."""
    scripted = ScriptedModel()
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    listeners = len(agent._listeners)

    def consume_first_message() -> str:
        scripted.push(ScriptedModel.text("hello there"))
        events = agent.events(until_agent_end=True)
        agent.prompt("hi", wait=False)
        for event in events:
            if event.type == "message_end":
                return event.message.role  # leaves the loop, and the function, early
        raise AssertionError("no message_end")

    for _ in range(3):
        assert consume_first_message() == "user"
        agent.wait_for_idle(10)
    gc.collect()
    assert len(agent._listeners) == listeners
    scripted.push(ScriptedModel.text("x"))
    with agent.events() as kept:  # a subscription still referred to keeps receiving
        agent.prompt("again")
        assert next(iter(kept)).type == "agent_start"


def test_agent_default_converter_shows_summaries_and_bash_runs_and_drops_unknown_roles():
    # A resumed, compacted session starts with a summary message: the model must see it.
    from agentcore import BashExecutionMessage, CompactionSummaryMessage

    scripted = ScriptedModel([ScriptedModel.text("ok")])
    agent = Agent(
        scripted.model,
        messages=[
            CompactionSummaryMessage("we fixed the parser", tokens_before=1234),
            BashExecutionMessage("ls", "a.py", exit_code=0),
            {"role": "notification", "text": "ui only"},
        ],
    )
    agent.prompt("next")
    sent = scripted.contexts[0].messages
    assert [m.role for m in sent] == ["user", "user", "user"]
    assert "<summary>\nwe fixed the parser\n</summary>" in sent[0].content[0].text
    assert sent[1].content[0].text.startswith("Ran `ls`")


def test_a_failed_run_aborts_tools_still_running_in_its_parallel_batch():  # agent-loop §8.4
    saw_abort = threading.Event()
    fast_done = threading.Event()

    def fast(tool_call_id, args, signal, on_update):
        fast_done.set()
        return AgentToolResult(content=[TextContent("fast")])

    def slow(tool_call_id, args, signal, on_update):
        assert fast_done.wait(5)
        if signal.wait(5):  # the run failed while this call was still working
            saw_abort.set()
        return AgentToolResult(content=[TextContent("slow")])

    schema = {"type": "object", "properties": {}}
    scripted = ScriptedModel(
        [ScriptedModel.response(ScriptedModel.call("fast", {}, id="a"), ScriptedModel.call("slow", {}, id="b"))]
    )
    agent = Agent(scripted.model, tools=[AgentTool("fast", "", schema, fast), AgentTool("slow", "", schema, slow)])

    def listener(event):
        if event.type == "tool_execution_end" and event.tool_call_id == "a":
            raise RuntimeError("listener bug")

    agent.subscribe(listener)
    new = agent.prompt("go")
    assert new[-1].stop_reason == "error" and new[-1].error_message == "listener bug"
    assert saw_abort.wait(5)


def test_wait_for_idle_from_a_tool_on_a_worker_thread_raises_instead_of_deadlocking():
    outcome: List[Any] = []

    def waits(tool_call_id, args, signal, on_update):  # an AgentTool: runs on a worker thread
        try:
            agent.wait_for_idle(5)
        except RuntimeError as exc:
            outcome.append(str(exc))
        return AgentToolResult(content=[TextContent("ok")])

    scripted = ScriptedModel([ScriptedModel.tool_call("waits", {}), ScriptedModel.text("done")])
    agent = Agent(scripted.model, tools=[AgentTool("waits", "", {"type": "object", "properties": {}}, waits)])
    agent.prompt("go")
    assert outcome and "would wait for itself forever" in outcome[0]


def test_a_resumed_agent_gets_its_own_copy_of_the_recorded_catalog_model():
    from agentcore import get_model

    session = Session.in_memory()
    session.append_model_change("anthropic", "claude-sonnet-4-5")
    agent = Agent(session=session)
    assert agent.state.model.id == "claude-sonnet-4-5"
    agent.state.model.base_url = "http://127.0.0.1:1/changed"
    assert get_model("anthropic/claude-sonnet-4-5").base_url != "http://127.0.0.1:1/changed"


def test_a_before_tool_call_verdict_of_the_wrong_type_refuses_the_call_and_names_the_plugins():
    class SaysTrue:  # meant "block"; it ended the chain, so the blocker registered before never ran
        @hookimpl
        def before_tool_call(self, context, signal):
            return True

    executed: List[Any] = []
    blocker = Blocker("never consulted")
    agent = Agent(_tool_then_text().model, tools=[_echo_tool(executed)], plugins=[blocker, SaysTrue()])
    agent.prompt("go")
    result = [m for m in agent.state.messages if m.role == "toolResult"][0]
    assert executed == [] and result.is_error
    assert "before_tool_call hook returned a bool" in result.content[0].text
    assert "plugins 'SaysTrue', 'Blocker'" in result.content[0].text


def test_a_convert_to_llm_answer_that_is_not_a_message_fails_the_run_naming_the_hook():
    class AnswersText:  # a string is no message: providers would drop it without a word
        @hookimpl
        def convert_to_llm(self, message):
            return "hello" if getattr(message, "role", None) == "user" else None

    scripted = ScriptedModel([text("never asked")])
    agent = Agent(scripted.model, plugins=[AnswersText()])
    agent.prompt("go")
    assert "convert_to_llm hook returned a str" in agent.state.error_message
    assert "'AnswersText'" in agent.state.error_message
    assert [m.role for m in agent.state.messages] == ["user", "assistant"]  # the transcript stays valid


def test_two_threads_asking_for_an_agents_own_manager_get_the_same_one(monkeypatch):
    from agentcore import plugins

    real = plugins.create_plugin_manager
    entered, release = threading.Event(), threading.Event()

    def slow_first(*args, **kwargs):
        if not entered.is_set():
            entered.set()
            release.wait(10)
        return real(*args, **kwargs)

    monkeypatch.setattr(plugins, "create_plugin_manager", slow_first)
    agent = Agent()
    got: List[Any] = []
    first = threading.Thread(target=lambda: got.append(agent.plugins))
    first.start()
    assert entered.wait(10)
    second = threading.Thread(target=lambda: got.append(agent.plugins))
    second.start()
    second.join(0.5)  # fixed: waits for the first thread's manager; before: built a second one
    release.set()
    first.join(10)
    second.join(10)
    assert len(got) == 2 and got[0] is got[1] is agent.plugins


@pytest.mark.parametrize("answer", [{"blocked": True}, True])
def test_an_agent_before_tool_call_answer_that_is_no_verdict_never_runs_the_call(answer):
    """``Agent(before_tool_call=...)`` answering ``{"blocked": True}`` (a misspelt key) or ``True``
    was taken as "no verdict" by the adapter and the call ran; as in the loop, it is now the
    call's error result naming the problem."""
    executed: List[Any] = []
    scripted = _tool_then_text()
    agent = Agent(scripted.model, tools=[_echo_tool(executed)], before_tool_call=lambda context, signal: answer)
    agent.prompt("go")
    result = [m for m in agent.state.messages if m.role == "toolResult"][0]
    assert executed == [] and result.is_error
    assert "before_tool_call" in result.content[0].text

"""Sub-agents (issue 13, DESIGN §6): ``agent.as_tool(name, description, *, keep_history=False)``."""

from __future__ import annotations

import json
import threading

import pytest

from agentcore import Agent, AgentTool, AgentToolResult, Session, SqliteSessionStorage, Usage, UsageCost
from agentcore.testing import ScriptedModel, call, response, text


def _usage(tokens, cost):
    return Usage(
        input=tokens, output=tokens, total_tokens=2 * tokens, cost=UsageCost(input=cost, output=cost, total=2 * cost)
    )


def _parent(responses, sub_tool, **kwargs):
    scripted = ScriptedModel(responses)
    return Agent(model=scripted.model, stream_fn=scripted.stream_fn, tools=[sub_tool], **kwargs), scripted


def _results(agent):
    return {m.tool_call_id: m for m in agent.messages if m.role == "toolResult"}


def test_as_tool_prompts_the_agent_and_returns_its_final_text():
    worker = ScriptedModel([text("the answer is 42", usage=_usage(10, 0.5))])
    sub = Agent(model=worker.model, stream_fn=worker.stream_fn, system_prompt="You research.")
    research = sub.as_tool("research", "Research a question")
    assert isinstance(research, AgentTool)
    assert research.parameters["required"] == ["task"]

    parent, _ = _parent([response(call("research", {"task": "what is 6*7?"}, id="r")), text("42")], research)
    parent.prompt("go")
    result = _results(parent)["r"]
    assert result.is_error is False
    assert result.content[0].text == "the answer is 42"
    assert worker.contexts[0].system_prompt == "You research."
    assert worker.contexts[0].messages[0].content[0].text == "what is 6*7?"
    assert sub.messages == []  # a fresh agent ran, not the template


def test_a_fresh_sub_agent_carries_its_templates_name_and_description():
    """An application names its agents (``agent.name = "Researcher"``, read by tracing plugins as
    ``gen_ai.agent.name``); the fresh agent a call ran was nameless, so its spans were too."""
    from agentcore.hookspecs import hookimpl

    class Names:
        def __init__(self):
            self.seen = []

        @hookimpl
        def on_event(self, event, agent):
            if event.type == "agent_start":
                self.seen.append((getattr(agent, "name", None), getattr(agent, "description", None)))

    names = Names()
    worker = ScriptedModel([text("found")])
    sub = Agent(model=worker.model, stream_fn=worker.stream_fn, plugins=[names])
    sub.name, sub.description = "Researcher", "Looks things up"
    parent, _ = _parent([response(call("research", {"task": "x"}, id="r")), text("ok")], sub.as_tool("research", "d"))
    parent.prompt("go")
    assert names.seen == [("Researcher", "Looks things up")]  # the fresh agent's own run


def test_usage_rolls_up_into_the_tool_result():
    inner_tool = AgentTool(
        "noop",
        "x",
        {"type": "object", "properties": {}},
        lambda *a: AgentToolResult(content="ok", usage=_usage(1, 0.01)),
    )
    worker = ScriptedModel([response(call("noop", {}), usage=_usage(10, 0.5)), text("done", usage=_usage(5, 0.25))])
    sub = Agent(model=worker.model, stream_fn=worker.stream_fn, tools=[inner_tool])
    parent, _ = _parent([response(call("helper", {"task": "t"}, id="h")), text("ok")], sub.as_tool("helper", "h"))
    parent.prompt("go")
    usage = _results(parent)["h"].usage
    assert (usage.input, usage.output, usage.total_tokens) == (16, 16, 32)
    assert usage.cost.total == pytest.approx(2 * (0.5 + 0.25 + 0.01))


def test_sub_agent_events_reach_the_parent_as_tool_execution_updates():
    worker = ScriptedModel([text("hello there")])
    sub = Agent(model=worker.model, stream_fn=worker.stream_fn)
    parent, _ = _parent([response(call("helper", {"task": "t"}, id="h")), text("ok")], sub.as_tool("helper", "h"))
    updates = []
    parent.subscribe(lambda e: updates.append(e) if e.type == "tool_execution_update" else None)
    parent.prompt("go")
    kinds = [u.partial_result.details["event"].type for u in updates]
    assert kinds[0] == "agent_start" and kinds[-1] == "agent_end"
    assert "message_update" in kinds
    assert all(u.tool_call_id == "h" and u.partial_result.details["subagent"] == "helper" for u in updates)
    assert updates[-2].partial_result.content[0].text == "hello there"


def test_a_failing_sub_agent_gives_an_error_result():
    worker = ScriptedModel([ScriptedModel.error("provider down")])
    sub = Agent(model=worker.model, stream_fn=worker.stream_fn)
    parent, _ = _parent([response(call("helper", {"task": "t"}, id="h")), text("ok")], sub.as_tool("helper", "h"))
    parent.prompt("go")
    result = _results(parent)["h"]
    assert result.is_error
    assert "sub-agent 'helper' failed: provider down" in result.content[0].text
    assert parent.messages[-1].content[0].text == "ok"


def test_parent_abort_aborts_the_sub_agent_mid_run():
    started = threading.Event()

    def slow(tool_call_id, args, signal, on_update):
        started.set()
        signal.wait(30)  # returns as soon as the sub-agent's run is aborted
        return AgentToolResult(content="late")

    worker = ScriptedModel([response(call("slow", {})), text("never")])
    sub = Agent(
        model=worker.model,
        stream_fn=worker.stream_fn,
        tools=[AgentTool("slow", "x", {"type": "object", "properties": {}}, slow)],
    )
    parent, _ = _parent([response(call("helper", {"task": "t"}, id="h"))], sub.as_tool("helper", "h"))
    parent.prompt("go", wait=False)
    assert started.wait(10)
    parent.abort("stop")
    assert parent.wait_for_idle(30)
    result = _results(parent)["h"]
    assert result.is_error and "was aborted" in result.content[0].text
    assert worker.calls == 1  # the sub-agent never called its model again


def test_parallel_calls_never_share_a_transcript():
    both = threading.Barrier(2, timeout=10)

    def meet(tool_call_id, args, signal, on_update):
        both.wait()  # both sub-agents are mid-run at the same time
        return AgentToolResult(content="met")

    worker = ScriptedModel([response(call("meet", {})), response(call("meet", {})), text("a"), text("b")])
    sub = Agent(
        model=worker.model,
        stream_fn=worker.stream_fn,
        tools=[AgentTool("meet", "x", {"type": "object", "properties": {}}, meet)],
    )
    parent, _ = _parent(
        [response(call("helper", {"task": "one"}, id="h1"), call("helper", {"task": "two"}, id="h2")), text("ok")],
        sub.as_tool("helper", "h"),
    )
    parent.prompt("go")
    results = _results(parent)
    assert not results["h1"].is_error and not results["h2"].is_error
    # every model request of a sub-agent saw exactly one task
    for context in worker.contexts:
        users = [m for m in context.messages if m.role == "user"]
        assert len(users) == 1
    assert {r.details["messages"] for r in results.values()} == {4}


def test_keep_history_uses_the_one_agent_and_serialises_calls():
    worker = ScriptedModel([text("first"), text("second")])
    sub = Agent(model=worker.model, stream_fn=worker.stream_fn)
    parent, _ = _parent(
        [response(call("helper", {"task": "one"}, id="h1"), call("helper", {"task": "two"}, id="h2")), text("ok")],
        sub.as_tool("helper", "h", keep_history=True),
    )
    parent.prompt("go")
    assert [m.role for m in sub.messages] == ["user", "assistant", "user", "assistant"]
    assert len(worker.contexts[1].messages) == 3  # the second call saw the first one's history


def test_with_a_jsonl_parent_session_the_run_is_recorded_next_to_it(tmp_path):
    worker = ScriptedModel([text("sub answer")])
    sub = Agent(model=worker.model, stream_fn=worker.stream_fn)
    path = tmp_path / "parent.jsonl"
    parent, _ = _parent(
        [response(call("helper", {"task": "t"}, id="h/1")), text("ok")],
        sub.as_tool("helper", "h"),
        session=Session.create(path),
    )
    parent.prompt("go")
    link = _results(parent)["h/1"].details["session"]
    assert link["path"] == str(tmp_path / "parent.helper-h_1.jsonl")
    child = Session.open(link["path"], read_only=True)
    assert child.header.parent_session == str(path)
    assert [m.role for m in child.build_context().messages] == ["user", "assistant"]
    # the link is in the parent's file too
    parent_lines = [json.loads(line) for line in path.read_text().splitlines()]
    recorded = [
        line["message"]
        for line in parent_lines
        if line.get("type") == "message" and line["message"]["role"] == "toolResult"
    ]
    assert recorded[0]["details"]["session"] == link


def test_with_a_sqlite_parent_session_the_run_is_a_session_in_the_same_db(tmp_path):
    worker = ScriptedModel([text("sub answer")])
    sub = Agent(model=worker.model, stream_fn=worker.stream_fn)
    db = tmp_path / "s.db"
    parent, _ = _parent(
        [response(call("helper", {"task": "t"}, id="h")), text("ok")],
        sub.as_tool("helper", "h"),
        session=Session(SqliteSessionStorage.create(db)),
    )
    parent.prompt("go")
    link = _results(parent)["h"].details["session"]
    assert link["path"] == str(db) and link["id"] != parent.session.id
    child = Session(SqliteSessionStorage(db, link["id"], read_only=True))
    assert [m.role for m in child.build_context().messages] == ["user", "assistant"]


def test_a_sub_agent_that_would_pause_for_approval_is_an_error():
    guarded = AgentTool("rm", "x", {"type": "object", "properties": {}}, lambda *a: None, requires_approval=True)
    worker = ScriptedModel([response(call("rm", {}))])
    sub = Agent(model=worker.model, stream_fn=worker.stream_fn, tools=[guarded])
    parent, _ = _parent([response(call("helper", {"task": "t"}, id="h")), text("ok")], sub.as_tool("helper", "h"))
    parent.prompt("go")
    result = _results(parent)["h"]
    assert result.is_error and "paused for approval of rm" in result.content[0].text


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_a_paused_sub_agent_s_error_says_where_its_waiting_calls_are_recorded(tmp_path, kind):
    """A fresh sub-agent that paused recorded its waiting calls in a session of its own, but the
    parent's error result (no details) named no session: nobody could find them to decide."""
    ran = []
    guarded = AgentTool(
        "rm", "x", {"type": "object", "properties": {}}, lambda *a: ran.append(1) or "removed", requires_approval=True
    )
    worker = ScriptedModel([response(call("rm", {}, id="r1")), text("cleaned up")])
    sub = Agent(model=worker.model, stream_fn=worker.stream_fn, tools=[guarded])
    if kind == "jsonl":
        session = Session.create(tmp_path / "parent.jsonl")
    else:
        session = Session(SqliteSessionStorage.create(tmp_path / "parent.db"))
    parent, _ = _parent(
        [response(call("helper", {"task": "t"}, id="h")), text("ok")], sub.as_tool("helper", "h"), session=session
    )
    parent.prompt("go")
    error = _results(parent)["h"].content[0].text
    assert _results(parent)["h"].is_error and "paused for approval of rm r1" in error
    if kind == "jsonl":
        path = str(tmp_path / "parent.helper-h.jsonl")
        assert error.endswith(f"(its run is recorded in {path})")
        child = Session.open(path)
    else:
        [child_id] = [i.id for i in SqliteSessionStorage.list_sessions(tmp_path / "parent.db") if i.id != session.id]
        assert error.endswith(f"(its run is recorded in session {child_id} of {tmp_path / 'parent.db'})")
        child = Session(SqliteSessionStorage(tmp_path / "parent.db", child_id))
    with child:  # decided and continued there
        resumed = Agent(model=worker.model, stream_fn=worker.stream_fn, tools=[guarded], session=child)
        assert [p.tool_call_id for p in resumed.pending_approvals] == ["r1"]
        resumed.approve("r1")
        resumed.continue_()
    assert ran == [1] and resumed.messages[-1].content[0].text == "cleaned up"


def test_a_sub_agent_s_session_records_the_transcript_it_started_from(tmp_path):
    """A fresh sub-agent starts from a copy of its template's transcript, but its session recorded
    only the run: resumed from it (to decide the calls it paused for), the sub-agent went on
    without the history it had been given, which the model then never saw again."""
    from agentcore import AssistantMessage, TextContent, UserMessage

    guarded = AgentTool("rm", "x", {"type": "object", "properties": {}}, lambda *a: "removed", requires_approval=True)
    worker = ScriptedModel([response(call("rm", {}, id="r1")), text("cleaned up")])
    primer = [
        UserMessage("Only ever clean the build directory."),
        AssistantMessage([TextContent("Understood.")], api="scripted", provider="scripted", model="m"),
    ]
    sub = Agent(model=worker.model, stream_fn=worker.stream_fn, tools=[guarded], messages=primer)
    parent, _ = _parent(
        [response(call("helper", {"task": "clean"}, id="h")), text("ok")],
        sub.as_tool("helper", "h"),
        session=Session.create(tmp_path / "parent.jsonl"),
    )
    parent.prompt("go")
    assert [m.role for m in worker.contexts[0].messages] == ["user", "assistant", "user"]
    with Session.open(tmp_path / "parent.helper-h.jsonl") as child:
        recorded = child.build_context().messages
        assert [m.role for m in recorded] == ["user", "assistant", "user", "assistant"]
        texts = [m.content if isinstance(m.content, str) else m.content[0].text for m in recorded[:3]]
        assert texts == ["Only ever clean the build directory.", "Understood.", "clean"]
        resumed = Agent(model=worker.model, stream_fn=worker.stream_fn, tools=[guarded], session=child)
        resumed.approve("r1")
        resumed.continue_()
    assert [m.role for m in worker.contexts[1].messages] == ["user", "assistant", "user", "assistant", "toolResult"]
    assert sub.messages == primer  # the template is untouched


def _compacting_worker(summary):
    """A sub-agent whose transcript is over its compaction threshold: every call compacts before
    its first request. Summary requests answer ``summary`` (blank: the compaction fails, billed
    all the same) with usage ``_usage(100, 1.0)``; the task's answer has ``_usage(5, 0.25)``."""
    from agentcore import AssistantMessage, CompactionSettings, Model, TextContent, UserMessage
    from agentcore.session.compaction_prompts import SUMMARIZER_SYSTEM_PROMPT

    def answer(context):
        if context.system_prompt == SUMMARIZER_SYSTEM_PROMPT:
            return text(summary, usage=_usage(100, 1.0))
        return text("done", usage=_usage(5, 0.25))

    worker = ScriptedModel([answer] * 4)
    model = Model(id=worker.model.id, api="scripted", provider="scripted", context_window=4000)
    history = []
    for i in range(6):
        history.append(UserMessage(f"q{i} " + "q" * 2000))
        history.append(AssistantMessage([TextContent(f"a{i} " + "a" * 2000)], api="scripted", provider="scripted"))
    sub = Agent(
        model=model,
        stream_fn=worker.stream_fn,
        messages=history,
        compaction=CompactionSettings(reserve_tokens=1000, keep_recent_tokens=1000),
    )
    return sub, worker


@pytest.mark.parametrize("outcome", ["compacted", "failed"])
def test_usage_includes_the_sub_agent_s_compaction_summaries(outcome):
    sub, worker = _compacting_worker("## Goal\nsummary" if outcome == "compacted" else "   ")
    parent, _ = _parent([response(call("helper", {"task": "t"}, id="h")), text("ok")], sub.as_tool("helper", "h"))
    parent.prompt("go")
    result = _results(parent)["h"]
    assert not result.is_error, result.content
    assert worker.calls == 2  # one summary request, one answer
    assert (result.usage.input, result.usage.output) == (105, 105)
    assert result.usage.cost.total == pytest.approx(2 * (1.0 + 0.25))


def test_a_keep_history_sub_agent_called_from_its_own_run_is_an_error_not_a_hang():
    worker = ScriptedModel([response(call("me", {"task": "again"}, id="inner")), text("gave up"), text("x")])
    sub = Agent(model=worker.model, stream_fn=worker.stream_fn)
    me = sub.as_tool("me", "x", keep_history=True)
    sub.tools = [me]
    parent, _ = _parent([response(call("me", {"task": "t"}, id="outer")), text("ok")], me)
    parent.prompt("go", wait=False)
    assert parent.wait_for_idle(10), "the nested call waited for the call that led to it"
    inner = next(m for m in sub.messages if m.role == "toolResult")
    assert inner.is_error and "called from within its own run" in inner.content[0].text
    assert _results(parent)["outer"].content[0].text == "gave up"


def test_parent_abort_ends_a_keep_history_call_waiting_for_the_one_before():
    started, release = threading.Event(), threading.Event()

    def slow(tool_call_id, args, signal, on_update):
        started.set()
        release.wait(30)  # ignores the abort: the second call must not wait for it
        return AgentToolResult(content="late")

    worker = ScriptedModel([response(call("slow", {})), text("first done")])
    sub = Agent(
        model=worker.model,
        stream_fn=worker.stream_fn,
        tools=[AgentTool("slow", "x", {"type": "object", "properties": {}}, slow)],
    )
    helper = sub.as_tool("helper", "h", keep_history=True)
    entered = threading.Event()

    def entering(tool_call_id, args, signal, on_update):
        entered.set()  # the abort comes once the call executes: it waits for the first one
        return helper.execute(tool_call_id, args, signal, on_update)

    first, _ = _parent([response(call("helper", {"task": "one"}, id="h1")), text("ok")], helper)
    second, _ = _parent(
        [response(call("helper", {"task": "two"}, id="h2")), text("ok")],
        AgentTool("helper", "h", helper.parameters, entering),
    )
    first.prompt("go", wait=False)
    assert started.wait(10)
    second.prompt("go", wait=False)
    assert entered.wait(10)
    second.abort("stop")
    try:
        assert second.wait_for_idle(10), "the abort waited for the other parent's call"
        result = _results(second)["h2"]
        assert result.is_error and "aborted while sub-agent 'helper' was busy" in result.content[0].text
    finally:
        release.set()
        assert first.wait_for_idle(10)
    assert not _results(first)["h1"].is_error
    assert [m.content[0].text for m in sub.messages if m.role == "user"] == ["one"]


def test_execute_called_directly_needs_neither_signal_nor_on_update():
    worker = ScriptedModel([text("direct answer")])
    sub = Agent(model=worker.model, stream_fn=worker.stream_fn)
    result = sub.as_tool("helper", "h").execute("id", {"task": "t"}, None, None)
    assert result.content[0].text == "direct answer"


def test_a_keep_history_tool_of_the_agent_itself_says_why_it_cannot_run():
    worker = ScriptedModel([response(call("me", {"task": "again"}, id="inner")), text("done")])
    agent = Agent(model=worker.model, stream_fn=worker.stream_fn)
    agent.tools = [agent.as_tool("me", "x", keep_history=True)]
    agent.prompt("go")
    inner = _results(agent)["inner"]
    assert inner.is_error and "called from within its own run" in inner.content[0].text


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_the_sub_agent_s_session_syncs_to_disk_as_the_parent_s_does(tmp_path, kind):
    from agentcore.agent import running_agent

    seen = []

    def note(tool_call_id, args, signal, on_update):
        seen.append(running_agent().session.storage.fsync)
        return AgentToolResult(content="noted")

    worker = ScriptedModel([response(call("note", {})), text("sub answer")])
    sub = Agent(
        model=worker.model,
        stream_fn=worker.stream_fn,
        tools=[AgentTool("note", "x", {"type": "object", "properties": {}}, note)],
    )
    if kind == "jsonl":
        session = Session.create(tmp_path / "parent.jsonl", fsync="always")
    else:
        session = Session(SqliteSessionStorage.create(tmp_path / "s.db", fsync="close"))
    parent, _ = _parent(
        [response(call("helper", {"task": "t"}, id="h")), text("ok")], sub.as_tool("helper", "h"), session=session
    )
    parent.prompt("go")
    assert not _results(parent)["h"].is_error
    assert seen == [session.storage.fsync]

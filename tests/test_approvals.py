"""Approvals that pause and resume (issue 13, DESIGN §6): ``requires_approval``, the pause as a loop
outcome, ``approve``/``deny``/``continue_``, and resuming from a session in a new process."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from agentcore import Agent, AgentTool, AgentToolResult, PendingApproval, Session, tool
from agentcore.testing import ScriptedModel, call, response, text

REPO = Path(__file__).resolve().parents[1]


@tool(requires_approval=True)
def delete(path: str) -> str:
    """Delete a file.

    Args:
        path: the file
    """
    return f"deleted {path}"


@tool
def listing(path: str) -> str:
    """List a directory."""
    return f"listed {path}"


def _shell_rule(args):
    return args["command"].startswith("rm")


@tool(requires_approval=_shell_rule)
def shell(command: str) -> str:
    """Run a command."""
    return f"ran {command}"


def _agent(responses, **kwargs):
    scripted = ScriptedModel(responses)
    kwargs.setdefault("tools", [delete, listing, shell])
    agent = Agent(model=scripted.model, stream_fn=scripted.stream_fn, **kwargs)
    return agent, scripted


def _types(events):
    return [e.type for e in events]


def _tool_results(agent):
    return {m.tool_call_id: m for m in agent.messages if m.role == "toolResult"}


def _assert_every_call_answered(messages):
    calls = [b.id for m in messages if m.role == "assistant" for b in m.content if b.type == "toolCall"]
    results = [m.tool_call_id for m in messages if m.role == "toolResult"]
    assert sorted(calls) == sorted(results)


# --------------------------------------------------------------------------- the pause


def test_pause_in_a_parallel_batch_runs_the_others_and_settles():
    agent, scripted = _agent(
        [
            response(
                call("listing", {"path": "/"}, id="a"),
                call("delete", {"path": "/x"}, id="b"),
                call("shell", {"command": "ls"}, id="c"),
                call("shell", {"command": "rm -r /"}, id="d"),
            ),
            text("done"),
        ]
    )
    events = []
    agent.subscribe(events.append)
    agent.prompt("clean up")

    requests = [e for e in events if e.type == "tool_approval_request"]
    assert [(e.tool_call_id, e.tool_name, e.args) for e in requests] == [
        ("b", "delete", {"path": "/x"}),
        ("d", "shell", {"command": "rm -r /"}),
    ]
    assert agent.pending_approvals == [
        PendingApproval("b", "delete", {"path": "/x"}),
        PendingApproval("d", "shell", {"command": "rm -r /"}),
    ]
    # the others ran; the waiting ones did not start
    started = [e.tool_call_id for e in events if e.type == "tool_execution_start"]
    assert started == ["a", "c"]
    assert set(_tool_results(agent)) == {"a", "c"}
    assert scripted.calls == 1  # the run settled without calling the model again
    assert _types(events)[-2:] == ["turn_end", "agent_end"]
    assert not agent.state.is_streaming


def test_approve_and_deny_then_continue_executes_and_goes_on():
    agent, scripted = _agent(
        [
            response(call("delete", {"path": "/x"}, id="b"), call("delete", {"path": "/y"}, id="c")),
            text("done"),
        ]
    )
    agent.prompt("clean up")
    agent.approve("b")
    agent.deny("c", reason="not that one")
    events = []
    agent.subscribe(events.append)
    new = agent.continue_()

    results = _tool_results(agent)
    assert results["b"].is_error is False and results["b"].content[0].text == "deleted /x"
    assert results["c"].is_error is True and results["c"].content[0].text == "not that one"
    assert new[-1].content[0].text == "done"
    assert agent.pending_approvals == []
    _assert_every_call_answered(agent.messages)
    # the model saw both results
    assert [m.role for m in scripted.contexts[-1].messages][-2:] == ["toolResult", "toolResult"]
    assert _types(events)[:2] == ["agent_start", "turn_start"]
    assert "tool_approval_request" not in _types(events)


def test_deny_without_reason_gives_the_default_error():
    agent, _ = _agent([response(call("delete", {"path": "/x"}, id="b")), text("ok")])
    agent.prompt("go")
    agent.deny("b")
    agent.continue_()
    assert _tool_results(agent)["b"].content[0].text == "Tool execution was denied"


def test_approve_with_edited_args_runs_them_and_tells_the_model():
    agent, scripted = _agent([response(call("delete", {"path": "/x"}, id="b")), text("ok")])
    agent.prompt("go")
    agent.approve("b", args={"path": "/tmp/x"})
    agent.continue_()
    content = _tool_results(agent)["b"].content
    assert content[0].text == "deleted /tmp/x"
    assert content[1].text == (
        '[The user edited the arguments before approving this call; it ran with: {"path": "/tmp/x"}]'
    )
    assert scripted.contexts[-1].messages[-1].content[1].text == content[1].text


def test_the_edit_note_follows_an_after_tool_call_override():
    def after(context, signal):
        return {"content": [{"type": "text", "text": "rewritten"}]} if context.tool_call.id == "b" else None

    agent, _ = _agent(
        [response(call("delete", {"path": "/x"}, id="b"), call("delete", {"path": "/y"}, id="c")), text("ok")],
        after_tool_call=after,
    )
    agent.prompt("go")
    agent.approve("b", args={"path": "/z"})
    agent.approve("c")
    agent.continue_()
    results = _tool_results(agent)
    texts = [getattr(b, "text", None) or b["text"] for b in results["b"].content]
    assert texts[0] == "rewritten" and texts[1].startswith("[The user edited the arguments")
    assert [b.text for b in results["c"].content] == ["deleted /y"]


class _ArgvTool:
    """A ``run`` tool whose ``prepare_arguments`` is not idempotent (``{"cmd"}`` -> ``{"argv"}``),
    recording what the shim and ``execute`` were given."""

    SCHEMA = {
        "type": "object",
        "properties": {"argv": {"type": "array", "items": {"type": "string"}}},
        "required": ["argv"],
        "additionalProperties": False,
    }

    def __init__(self):
        self.shim_inputs = []
        self.executed = []
        self.tool = AgentTool(
            "run", "Run argv.", self.SCHEMA, self._execute, prepare_arguments=self._shim, requires_approval=True
        )

    def _shim(self, raw):
        self.shim_inputs.append(raw)
        return {"argv": raw["cmd"].split()}

    def _execute(self, tool_call_id, args, signal, on_update):
        self.executed.append(args)
        return AgentToolResult(content="ran " + " ".join(args["argv"]))


def _paused_argv_agent(**kwargs):
    argv = _ArgvTool()
    agent, scripted = _agent(
        [response(call("run", {"cmd": "rm -r build"}, id="r")), text("ok")], tools=[argv.tool], **kwargs
    )
    agent.prompt("clean")
    return agent, argv


def test_pending_args_of_a_prepared_call_are_the_prepared_shape_and_run_unchanged():
    agent, argv = _paused_argv_agent()
    assert agent.pending_approvals == [PendingApproval("r", "run", {"argv": ["rm", "-r", "build"]})]
    agent.approve("r")
    agent.continue_()
    result = _tool_results(agent)["r"]
    assert (result.is_error, [b.text for b in result.content]) == (False, ["ran rm -r build"])
    assert argv.executed == [{"argv": ["rm", "-r", "build"]}]
    # the shim only ever saw what the model sent, never its own output
    assert argv.shim_inputs and all(raw == {"cmd": "rm -r build"} for raw in argv.shim_inputs)


def test_edited_args_take_the_pending_shape_and_skip_prepare_arguments():
    seen = []
    agent, argv = _paused_argv_agent(before_tool_call=lambda ctx, signal: seen.append(dict(ctx.args)))
    with pytest.raises(ValueError, match="still pending") as info:
        agent.approve("r", args={"cmd": "rm -r build/tmp"})  # the model's shape is not the schema's
    assert "pending_approvals" in str(info.value) and 'Validation failed for tool "run"' in str(info.value)
    assert agent.pending_approvals[0].args == {"argv": ["rm", "-r", "build"]}

    agent.approve("r", args={"argv": ["rm", "-r", "build/tmp"]})
    events = []
    agent.subscribe(events.append)
    agent.continue_()
    assert [e.args for e in events if e.type == "tool_execution_start"] == [{"cmd": "rm -r build"}]  # the block's
    result = _tool_results(agent)["r"]
    assert result.is_error is False
    assert [b.text for b in result.content] == [
        "ran rm -r build/tmp",
        '[The user edited the arguments before approving this call; it ran with: {"argv": ["rm", "-r", "build/tmp"]}]',
    ]
    assert argv.executed == [{"argv": ["rm", "-r", "build/tmp"]}]
    assert seen == [{"argv": ["rm", "-r", "build/tmp"]}]  # before_tool_call sees what will run
    assert all(raw == {"cmd": "rm -r build"} for raw in argv.shim_inputs)


def _pop_cmd(raw):
    raw["argv"] = raw.pop("cmd").split()  # changes the model's arguments in place
    return raw


def _run_argv(tool_call_id, args, signal, on_update):
    return "ran " + " ".join(args["argv"])


def _argv_rule(args):
    return args["argv"][0] == "rm"


@pytest.mark.parametrize("rule", [True, _argv_rule], ids=["waits", "rule-says-no"])
def test_a_shim_that_changes_its_input_in_place_runs_as_without_approval(rule):
    """Judging a call ran ``prepare_arguments`` on the block's own arguments, and the loop then
    prepared those again: a shim that pops the model's key failed the call with KeyError 'cmd'
    (whether it waited or not), where the same tool without requires_approval runs."""
    schema = {"type": "object", "properties": {"argv": {"type": "array", "items": {"type": "string"}}}}
    schema["required"] = ["argv"]
    runner = AgentTool("run", "x", schema, _run_argv, prepare_arguments=_pop_cmd, requires_approval=rule)
    agent, _ = _agent([response(call("run", {"cmd": "ls -l"}, id="r")), text("ok")], tools=[runner])
    agent.prompt("go")
    if rule is True:
        assert agent.pending_approvals == [PendingApproval("r", "run", {"argv": ["ls", "-l"]})]
        agent.approve("r")
        agent.continue_()
    result = _tool_results(agent)["r"]
    assert (result.is_error, result.content[0].text) == (False, "ran ls -l")


def test_denying_a_prepared_call_never_executes_it():
    agent, argv = _paused_argv_agent()
    agent.deny("r", "not today")
    agent.continue_()
    result = _tool_results(agent)["r"]
    assert (result.is_error, result.content[0].text) == (True, "not today")
    assert argv.executed == []
    assert agent.messages[-1].content[0].text == "ok"


def test_approve_with_edited_args_that_fail_validation_stays_pending():
    agent, _ = _agent([response(call("delete", {"path": "/x"}, id="b")), text("ok")])
    agent.prompt("go")
    with pytest.raises(ValueError, match="still pending") as info:
        agent.approve("b", args={"wrong": 1})
    assert 'Validation failed for tool "delete"' in str(info.value)
    assert [p.tool_call_id for p in agent.pending_approvals] == ["b"]
    with pytest.raises(RuntimeError, match="still wait for a decision"):
        agent.continue_()  # the failed approve decided nothing
    agent.approve("b", args={"path": "/ok"})
    agent.continue_()
    assert _tool_results(agent)["b"].content[0].text == "deleted /ok"


def test_errors_name_what_to_do():
    agent, _ = _agent([response(call("delete", {"path": "/x"}, id="b")), text("ok")])
    agent.prompt("go")
    with pytest.raises(ValueError, match=r"approve\('nope'\).*pending: delete b"):
        agent.approve("nope")
    with pytest.raises(ValueError, match=r"deny\('nope'\)"):
        agent.deny("nope")
    with pytest.raises(RuntimeError, match=r"delete b.*approve\(id\) or agent.deny\(id\)"):
        agent.continue_()
    with pytest.raises(RuntimeError, match=r"prompt\(\): 1 tool call\(s\) wait for approval"):
        agent.prompt("something else")
    with pytest.raises(RuntimeError, match=r"stream\(\)"):
        agent.stream("something else")
    with pytest.raises(RuntimeError, match=r"^ask\(\): 1 tool call\(s\) wait"):  # it said "prompt()"
        agent.ask("something else", int)
    assert [m.role for m in agent.messages] == ["user", "assistant"]  # nothing changed


def test_the_rule_callable_decides_per_call_and_a_raising_rule_asks():
    def broken(args):
        raise RuntimeError("boom")

    risky = AgentTool(
        "risky",
        "x",
        {"type": "object", "properties": {}},
        lambda *a: AgentToolResult(content="ran"),
        requires_approval=broken,
    )
    agent, _ = _agent(
        [response(call("risky", {}, id="r"), call("shell", {"command": "ls"}, id="s")), text("ok")],
        tools=[risky, shell],
    )
    agent.prompt("go")
    assert [p.tool_call_id for p in agent.pending_approvals] == ["r"]


def test_requires_approval_must_be_a_bool_or_callable():
    with pytest.raises(TypeError, match="requires_approval must be a bool or a callable"):
        AgentTool("t", "x", {"type": "object"}, lambda *a: None, requires_approval="yes")


def test_invalid_args_are_an_error_result_not_a_request():
    agent, _ = _agent([response(call("delete", {}, id="b")), text("ok")])
    agent.prompt("go")
    assert agent.pending_approvals == []
    assert _tool_results(agent)["b"].is_error


def test_all_calls_waiting_then_resume_from_the_assistant_tail():
    agent, scripted = _agent([response(call("delete", {"path": "/x"}, id="b")), text("ok")])
    agent.prompt("go")
    assert agent.messages[-1].role == "assistant"
    agent.approve("b")
    agent.continue_()
    assert [m.role for m in agent.messages] == ["user", "assistant", "toolResult", "assistant"]


def test_a_resumed_run_can_pause_again():
    agent, _ = _agent(
        [
            response(call("delete", {"path": "/1"}, id="b")),
            response(call("delete", {"path": "/2"}, id="c")),
            text("ok"),
        ]
    )
    agent.prompt("go")
    agent.approve("b")
    agent.continue_()
    assert [p.tool_call_id for p in agent.pending_approvals] == ["c"]
    agent.approve("c")
    agent.continue_()
    assert agent.messages[-1].content[0].text == "ok"
    _assert_every_call_answered(agent.messages)


def test_steering_waits_until_the_paused_calls_have_results():
    agent, scripted = _agent([response(call("delete", {"path": "/x"}, id="b")), text("ok")])
    agent.prompt("go")
    agent.approve("b")
    agent.steer("also this")
    agent.continue_()
    roles = [m.role for m in agent.messages]
    assert roles[:4] == ["user", "assistant", "toolResult", "user"]


def test_approving_from_a_listener_during_the_run_is_taken_at_continue():
    agent, _ = _agent([response(call("delete", {"path": "/x"}, id="b")), text("ok")])
    agent.subscribe(lambda e: agent.approve(e.tool_call_id) if e.type == "tool_approval_request" else None)
    agent.prompt("go")
    agent.continue_()
    assert _tool_results(agent)["b"].content[0].text == "deleted /x"


def test_a_call_the_resumed_run_executes_takes_no_new_decision():
    """``deny()`` while ``continue_()``'s run executes the approved call used to be accepted and
    recorded, and ignored: the run acts on the decisions it started with. The call is no longer
    waiting, so it is not listed and a decision is refused."""
    inside, release = threading.Event(), threading.Event()

    @tool(requires_approval=True)
    def slow_delete(path: str) -> str:
        """Delete a file."""
        inside.set()
        assert release.wait(30)
        return f"deleted {path}"

    agent, _ = _agent([response(call("slow_delete", {"path": "/x"}, id="b")), text("ok")], tools=[slow_delete])
    agent.prompt("go")
    agent.approve("b")
    agent.continue_(wait=False)
    try:
        assert inside.wait(30)
        assert agent.pending_approvals == []
        with pytest.raises(ValueError, match="no longer waits"):
            agent.deny("b", "changed my mind")
    finally:
        release.set()
    assert agent.wait_for_idle(30)
    assert _tool_results(agent)["b"].content[0].text == "deleted /x"


def test_a_decision_being_recorded_as_continue_starts_is_the_one_that_runs(tmp_path):
    """``deny()`` on one thread, still writing its record, while ``continue_()`` starts on another:
    the run used to execute the call with the earlier approval, and ``deny()`` then returned as if
    it had been taken. ``continue_()`` now waits for the decision and runs with it."""
    ran, writing = threading.Event(), threading.Event()

    @tool(requires_approval=True)
    def remove(path: str) -> str:
        """Delete a file."""
        ran.set()
        return f"deleted {path}"

    session = Session.create(tmp_path / "s.jsonl")
    agent, _ = _agent([response(call("remove", {"path": "/x"}, id="b")), text("ok")], tools=[remove], session=session)
    agent.prompt("go")
    agent.approve("b")
    record = session.append_custom

    def slow_record(custom_type, data):
        if data.get("kind") == "decision":
            writing.set()
            ran.wait(0.5)  # the old code ran the call meanwhile; now continue_() waits for us
        return record(custom_type, data)

    session.append_custom = slow_record
    denied = []
    change_mind = threading.Thread(target=lambda: denied.append(agent.deny("b", "changed my mind")))
    change_mind.start()
    assert writing.wait(30)
    agent.continue_()
    change_mind.join(30)
    assert denied == [None]  # deny() returned: so it must be the decision that counted
    assert not ran.is_set()
    result = _tool_results(agent)["b"]
    assert result.is_error and result.content[0].text == "changed my mind"


def test_a_decision_for_an_id_that_is_not_a_str_names_the_problem():
    agent, _ = _agent([response(call("delete", {"path": "/x"}, id="b")), text("ok")])
    agent.prompt("go")
    pending = agent.pending_approvals[0]
    with pytest.raises(TypeError, match=r"approve\(\) takes the id .* str, not a PendingApproval \(its tool_call_id\)"):
        agent.approve(pending)
    with pytest.raises(TypeError, match=r"deny\(\) takes the id of a waiting tool call as a str, not a list"):
        agent.deny(["b"])
    with pytest.raises(TypeError, match=r"approve\(\) takes .* not a list"):
        agent.approve(["b"], args={"path": "/y"})
    agent.approve(pending.tool_call_id)
    agent.continue_()
    assert _tool_results(agent)["b"].content[0].text == "deleted /x"


def test_a_resumed_run_that_cannot_start_leaves_its_calls_waiting_and_decided(tmp_path):
    """A continue_() refused at its start (the session records another agent's run) ran nothing:
    the calls are pending again, with the decisions taken, and a later continue_() runs them."""
    inside, release = threading.Event(), threading.Event()

    @tool
    def block() -> str:
        """Wait until released."""
        inside.set()
        assert release.wait(30)
        return "done"

    session = Session.create(tmp_path / "s.jsonl")
    busy = ScriptedModel([response(call("block", {})), text("done")])
    other = Agent(model=busy.model, stream_fn=busy.stream_fn, tools=[block], session=session)
    agent, _ = _agent([response(call("delete", {"path": "/x"}, id="b")), text("ok")], session=session)
    agent.prompt("go")
    agent.approve("b")
    other.prompt("work", wait=False)
    try:
        assert inside.wait(30)
        with pytest.raises(RuntimeError, match="recording another Agent"):
            agent.continue_()
        assert [p.tool_call_id for p in agent.pending_approvals] == ["b"]
    finally:
        release.set()
    assert other.wait_for_idle(30)
    agent.continue_()
    assert _tool_results(agent)["b"].content[0].text == "deleted /x"


def test_reset_drops_pending_approvals():
    agent, _ = _agent([response(call("delete", {"path": "/x"}, id="b"))])
    agent.prompt("go")
    agent.reset()
    assert agent.pending_approvals == []


def test_continue_after_the_transcript_was_replaced_says_so():
    agent, _ = _agent([response(call("delete", {"path": "/x"}, id="b"))])
    agent.prompt("go")
    agent.approve("b")
    agent.messages = []
    with pytest.raises(RuntimeError, match=r"agent.reset\(\)"):
        agent.continue_()


def test_parallel_tools_still_run_concurrently_beside_a_waiting_call():
    both = threading.Barrier(2, timeout=10)

    def meet(tool_call_id, args, signal, on_update):
        both.wait()
        return AgentToolResult(content="met")

    meeter = AgentTool("meet", "x", {"type": "object", "properties": {}}, meet)
    agent, _ = _agent(
        [response(call("meet", {}, id="m1"), call("delete", {"path": "/x"}, id="b"), call("meet", {}, id="m2"))],
        tools=[meeter, delete],
    )
    agent.prompt("go")
    results = _tool_results(agent)
    assert results["m1"].content[0].text == "met" and results["m2"].content[0].text == "met"
    assert [p.tool_call_id for p in agent.pending_approvals] == ["b"]


@pytest.mark.parametrize("execution", ["parallel", "sequential"])
def test_an_abort_while_the_others_run_ends_the_run_aborted_not_paused(execution):
    """An abort that came while the batch's other calls ran was reported as a pause: no aborted
    message, no error, the call still pending (and ``ask()`` raised AskPaused)."""
    started = threading.Event()

    def slow(tool_call_id, args, signal, on_update):
        started.set()
        signal.wait(10)
        return AgentToolResult(content="stopped early" if signal.aborted else "finished")

    waiter = AgentTool("slow", "x", {"type": "object", "properties": {}}, slow)
    agent, scripted = _agent(
        [response(call("slow", {}, id="s1"), call("delete", {"path": "/x"}, id="d1")), text("never")],
        tools=[waiter, delete],
        tool_execution=execution,
    )
    events = []
    agent.subscribe(events.append)
    runner = threading.Thread(target=agent.prompt, args=("go",))
    runner.start()
    assert started.wait(10)
    agent.abort()
    runner.join(10)
    assert not runner.is_alive()
    last = agent.messages[-1]
    assert last.role == "assistant" and last.stop_reason == "aborted"
    assert agent.state.error_message and agent.pending_approvals == []
    assert _tool_results(agent)["s1"].content[0].text == "stopped early"
    assert scripted.calls == 1 and _types(events)[-2:] == ["turn_end", "agent_end"]
    with pytest.raises(Exception, match="Cannot continue from message role: assistant"):
        agent.continue_()  # nothing is left waiting: the next prompt starts afresh


def _finisher(tool_call_id, args, signal, on_update):
    return AgentToolResult(content="finished", terminate=True)


#: a call whose result asks the loop not to call the model again
FINISH = AgentTool("finish", "x", {"type": "object", "properties": {}}, _finisher)
GUARDED_FINISH = AgentTool(
    "guarded_finish", "x", {"type": "object", "properties": {}}, _finisher, requires_approval=True
)


@pytest.mark.parametrize("other", ["listing", "finish"])
def test_a_resumed_call_that_terminates_ends_the_run_only_if_the_whole_batch_did(other):
    """A batch ends the run only when every result asks to terminate. The resumed calls finish the
    paused batch, but their results alone decided: the run ended after them although the call that
    ran before the pause wanted the model to go on, and the model never answered."""
    arguments = {"path": "/"} if other == "listing" else {}
    agent, scripted = _agent(
        [response(call(other, arguments, id="o"), call("guarded_finish", {}, id="g")), text("summed up")],
        tools=[listing, FINISH, GUARDED_FINISH],
    )
    agent.prompt("go")
    agent.approve("g")
    agent.continue_()
    if other == "listing":
        assert scripted.calls == 2 and agent.messages[-1].content[0].text == "summed up"
    else:  # every call of the batch asked to terminate: the run ends after the batch
        assert scripted.calls == 1 and agent.messages[-1].role == "toolResult"


def test_after_a_reload_a_resumed_call_that_terminates_lets_the_batch_go_on(tmp_path):
    """What the calls that ran before the pause asked is not in the session: a resumed batch with
    such calls goes on to the model, as a batch does unless every result asks to terminate."""
    path = tmp_path / "s.jsonl"
    tools = [FINISH, GUARDED_FINISH]
    agent, _ = _agent(
        [response(call("finish", {}, id="o"), call("guarded_finish", {}, id="g"))],
        tools=tools,
        session=Session.create(path),
    )
    agent.prompt("go")
    agent.session.close()
    again, scripted = _agent([text("summed up")], tools=tools, session=Session.open(path))
    again.approve("g")
    again.continue_()
    assert scripted.calls == 1 and again.messages[-1].content[0].text == "summed up"
    again.session.close()


# --------------------------------------------------------------------------- sessions


def test_session_records_requests_and_decisions_as_custom_entries(tmp_path):
    path = tmp_path / "s.jsonl"
    agent, _ = _agent([response(call("delete", {"path": "/x"}, id="b")), text("ok")], session=Session.create(path))
    agent.prompt("go")
    agent.deny("b", "no")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    customs = [line for line in lines if line["type"] == "custom"]
    assert [c["customType"] for c in customs] == ["agentcore.approval"] * 2
    assert customs[0]["data"] == {"kind": "request", "toolCallId": "b", "toolName": "delete", "args": {"path": "/x"}}
    assert customs[1]["data"] == {"kind": "decision", "toolCallId": "b", "approved": False, "reason": "no"}
    # nothing but the reference's own message roles in message entries
    assert {line["message"]["role"] for line in lines if line["type"] == "message"} <= {
        "user",
        "assistant",
        "toolResult",
    }


@pytest.mark.parametrize(
    "forged",
    [{"toolName": "listing", "args": {"path": "."}}, {"toolName": "shell", "args": {"command": "rm old.log"}}],
    ids=["another tool", "other arguments"],
)
def test_a_restored_call_is_the_one_a_resumed_run_executes_whatever_its_request_says(tmp_path, caplog, forged):
    """A request entry says which call waits, but a resumed run executes the assistant message's
    call of that id: a session file whose request named ``listing {"path": "."}`` (or the same tool
    with harmless arguments) for a ``shell`` call ``rm -rf /srv`` had the user approve one call and
    ran another. The restored pending call is now the call itself, prepared as the loop prepares it."""
    path = tmp_path / "s.jsonl"
    agent, _ = _agent([response(call("shell", {"command": "rm -rf /srv"}, id="b"))], session=Session.create(path))
    agent.prompt("go")
    agent.session.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for line in lines:
        if line["type"] == "custom" and line["data"].get("kind") == "request":
            line["data"].update(forged)  # another program wrote the file
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))

    with caplog.at_level(logging.WARNING, logger="agentcore.approvals"):
        again, _ = _agent([text("done")], session=Session.open(path))
    assert again.pending_approvals == [PendingApproval("b", "shell", {"command": "rm -rf /srv"})]
    assert f"names {forged['toolName']!r} with other arguments than the call of that id ('shell')" in caplog.text
    assert "rm" not in caplog.text  # the arguments may hold anything: never logged
    again.approve("b")
    again.continue_()
    assert _tool_results(again)["b"].content[0].text == "ran rm -rf /srv"  # what was shown ran
    again.session.close()


def test_a_decision_taken_as_the_call_shows_up_is_recorded_after_its_request(tmp_path):
    """A plugin's ``on_event`` observer runs before the listeners. One that approves each call as
    its request arrives used to have its decision written before the request (recorded by a
    listener), and a reopened session dropped a decision for a call not yet requested."""
    from agentcore.hookspecs import hookimpl

    class AutoApprove:
        @hookimpl
        def on_event(self, event, agent):
            if event.type == "tool_approval_request":
                agent.approve(event.tool_call_id)

    path = tmp_path / "s.jsonl"
    agent, _ = _agent(
        [response(call("delete", {"path": "/x"}, id="b"))], session=Session.create(path), plugins=[AutoApprove()]
    )
    agent.prompt("go")
    agent.session.close()
    kinds = [
        line["data"]["kind"] for line in map(json.loads, path.read_text().splitlines()) if line["type"] == "custom"
    ]
    assert kinds == ["request", "decision"]
    again, _ = _agent([text("ok")], session=Session.open(path))
    assert again._approvals.undecided() == []
    again.continue_()  # runs the call approved in the earlier process
    assert _tool_results(again)["b"].content[0].text == "deleted /x"
    again.session.close()


def test_an_approved_call_a_killed_process_was_running_never_runs_again(tmp_path):
    """A person approved one run of a side-effecting call. The process resuming it was killed
    while the call ran (nothing of its result on disk), and an agent opened on the session then
    ran the call a second time on ``continue_()``: the approval and its decision were all the
    session said. The resumed run now marks the call started before it runs; the reload answers
    it as interrupted."""
    from agentcore.agent import ERR_INTERRUPTED_CALL

    path, killed = tmp_path / "s.jsonl", tmp_path / "killed.jsonl"
    charges = []

    @tool(requires_approval=True)
    def charge(amount: int) -> str:
        """Charge the card."""
        charges.append(amount)
        killed.write_bytes(path.read_bytes())  # what a process killed at this moment leaves
        return "charged"

    agent, _ = _agent(
        [response(call("charge", {"amount": 5}, id="b")), text("done")], tools=[charge], session=Session.create(path)
    )
    agent.prompt("pay")
    agent.approve("b")
    agent.continue_()
    agent.session.close()
    assert charges == [5]
    again, _ = _agent([text("It may have gone through; check first.")], tools=[charge], session=Session.open(killed))
    assert again.pending_approvals == []  # nothing waits: the call was under way
    again.continue_()
    assert charges == [5]  # not charged twice
    assert _tool_results(again)["b"].is_error and _tool_results(again)["b"].content[0].text == ERR_INTERRUPTED_CALL
    again.session.close()


def test_session_resume_in_the_same_process_sees_pending_and_decisions(tmp_path):
    path = tmp_path / "s.jsonl"
    agent, _ = _agent(
        [response(call("delete", {"path": "/x"}, id="b"), call("delete", {"path": "/y"}, id="c"))],
        session=Session.create(path),
    )
    agent.prompt("go")
    agent.approve("b", args={"path": "/edited"})
    agent.session.close()

    again, _ = _agent([text("ok")], session=Session.open(path))
    assert [p.tool_call_id for p in again.pending_approvals] == ["b", "c"]
    with pytest.raises(RuntimeError, match="delete c"):
        again.continue_()  # b's decision was recorded, c's was not taken
    again.deny("c")
    again.continue_()
    assert _tool_results(again)["b"].content[0].text == "deleted /edited"
    again.session.close()
    third, _ = _agent([], session=Session.open(path))
    assert third.pending_approvals == []
    _assert_every_call_answered(third.messages)


_CHILD = textwrap.dedent('''
    import json, sys
    from agentcore import Agent, Session, tool
    from agentcore.session import SqliteSessionStorage
    from agentcore.testing import ScriptedModel, call, response, text

    @tool(requires_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        return "deleted " + path

    kind, where, step = sys.argv[1], sys.argv[2], sys.argv[3]
    if kind == "jsonl":
        session = Session.create(where) if step == "pause" else Session.open(where)
    else:
        storage = (SqliteSessionStorage.create(where, session_id="s1") if step == "pause"
                   else SqliteSessionStorage(where, "s1"))
        session = Session(storage)
    if step == "pause":
        scripted = ScriptedModel([response(call("delete", {"path": "/x"}, id="b"),
                                           call("delete", {"path": "/y"}, id="c"))])
    else:
        scripted = ScriptedModel([text("all done")])
    agent = Agent(model=scripted.model, stream_fn=scripted.stream_fn, tools=[delete], session=session)
    out = {}
    if step == "pause":
        agent.prompt("clean up")
    elif step == "decide":
        agent.approve("b")
        agent.deny("c", "keep it")
    else:
        agent.continue_()
        out["results"] = {m.tool_call_id: [m.content[0].text, m.is_error]
                          for m in agent.messages if m.role == "toolResult"}
        out["last"] = agent.messages[-1].content[0].text
    out["pending"] = [[p.tool_call_id, p.tool_name, p.args] for p in agent.pending_approvals]
    session.close()
    print(json.dumps(out))
''')


def _child(tmp_path, *argv):
    script = tmp_path / "child.py"
    script.write_text(_CHILD)
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, str(script), *argv], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_resume_in_fresh_processes(tmp_path, kind):
    where = str(tmp_path / ("s.jsonl" if kind == "jsonl" else "s.db"))
    paused = _child(tmp_path, kind, where, "pause")
    assert paused["pending"] == [["b", "delete", {"path": "/x"}], ["c", "delete", {"path": "/y"}]]
    decided = _child(tmp_path, kind, where, "decide")
    assert decided["pending"] == paused["pending"]  # decided, still waiting for continue_()
    resumed = _child(tmp_path, kind, where, "continue")
    assert resumed["results"] == {"b": ["deleted /x", False], "c": ["keep it", True]}
    assert resumed["last"] == "all done"
    assert resumed["pending"] == []


def test_a_call_id_an_earlier_turn_used_still_waits_after_a_resume(tmp_path):
    """Some servers reuse call ids across turns (a Mistral call without an id gets one derived
    from its index). The earlier turn's result used to settle the waiting call on load, so a
    reopened session lost it; in memory it was waiting all along."""
    path = tmp_path / "s.jsonl"
    agent, _ = _agent(
        [response(call("listing", {"path": "/"}, id="call_0")), response(call("delete", {"path": "/x"}, id="call_0"))],
        session=Session.create(path),
    )
    agent.prompt("go")
    agent.approve("call_0")
    assert [p.tool_call_id for p in agent.pending_approvals] == ["call_0"]
    agent.session.close()
    again, _ = _agent([text("done")], session=Session.open(path))
    assert again.pending_approvals == [PendingApproval("call_0", "delete", {"path": "/x"})]
    again.continue_()  # with the approval taken in the first process
    assert [m.content[0].text for m in again.messages if m.role == "toolResult"] == ["listed /", "deleted /x"]
    again.session.close()


def test_a_tree_move_brings_the_waiting_calls_of_the_branch_moved_to(tmp_path):
    """``navigate_tree`` reloaded the transcript but not the approvals: after moving off a paused
    branch the call still waited, ``prompt()`` was refused, and a decision for it then made
    ``continue_()`` fail ("the transcript was replaced"), leaving ``reset()`` as the only way out."""
    agent, _ = _agent(
        [text("hi"), response(call("delete", {"path": "/x"}, id="d")), text("done")],
        session=Session.create(tmp_path / "s.jsonl"),
    )
    agent.prompt("hello")
    agent.prompt("go")
    assert [p.tool_call_id for p in agent.pending_approvals] == ["d"]
    branch = agent.session.get_branch()
    greeted = next(e.id for e in branch if e.type == "message" and e.message.role == "assistant")
    paused = branch[-1].id
    agent.navigate_tree(greeted)
    assert agent.pending_approvals == []
    agent.prompt("something else")  # refused while the other branch's call counted as waiting
    assert agent.messages[-1].content[0].text == "done"
    agent.navigate_tree(paused)  # back on the paused branch: its call waits again
    assert agent.pending_approvals == [PendingApproval("d", "delete", {"path": "/x"})]
    agent.session.close()


def test_a_later_assistant_message_drops_abandoned_requests(tmp_path):
    path = tmp_path / "s.jsonl"
    agent, _ = _agent([response(call("delete", {"path": "/x"}, id="b")), text("later")], session=Session.create(path))
    agent.prompt("go")
    # the transcript moves on without the waiting call (a caller replacing it, an aborted resume)
    from agentcore import AssistantMessage, TextContent, Usage
    from agentcore.events import MessageEndEvent

    later = AssistantMessage(
        content=[TextContent("x")], api="a", provider="p", model="m", usage=Usage(), stop_reason="aborted"
    )
    agent._process_event(MessageEndEvent(later))  # reduced, and recorded by the session link
    assert agent.pending_approvals == []
    agent.session.close()
    again, _ = _agent([], session=Session.open(path))
    assert again.pending_approvals == []


def test_the_low_level_loop_pauses_and_resumes_with_a_resumption():
    from agentcore import AgentContext, AgentLoopConfig, UserMessage, agent_loop, agent_loop_continue
    from agentcore.approvals import ApprovalDecision, Resumption

    scripted = ScriptedModel([response(call("delete", {"path": "/x"}, id="b")), text("ok")])
    context = AgentContext("", [], [delete])
    config = AgentLoopConfig(model=scripted.model)
    prompt = UserMessage("go")
    stream = agent_loop([prompt], context, config, stream_fn=scripted.stream_fn)
    events = list(stream)
    assert [e.tool_call_id for e in events if e.type == "tool_approval_request"] == ["b"]
    paused = stream.result()
    assert paused[-1].role == "assistant"
    context.messages = list(paused)  # the caller keeps the transcript at this level
    resumed = agent_loop_continue(
        context,
        config,
        stream_fn=scripted.stream_fn,
        resume=Resumption(paused[-1], {"b": ApprovalDecision(False, None, "no")}),
    )
    list(resumed)
    roles = [(m.role, getattr(m, "is_error", None)) for m in resumed.result()]
    assert roles == [("toolResult", True), ("assistant", None)]


def _loop_run(tools, decisions=None):
    """Pause (and, given ``decisions``, resume) a ``shell`` call through ``agent_loop`` directly."""
    from agentcore import AgentContext, AgentLoopConfig, UserMessage, agent_loop, agent_loop_continue
    from agentcore.approvals import Resumption

    scripted = ScriptedModel([response(call("shell", {"command": "rm -r /"}, id="s")), text("ok")])
    context = AgentContext("", [], tools)
    config = AgentLoopConfig(model=scripted.model)
    stream = agent_loop([UserMessage("go")], context, config, stream_fn=scripted.stream_fn)
    events = list(stream)
    context.messages = list(stream.result())
    if decisions is not None:
        resumed = agent_loop_continue(
            context, config, stream_fn=scripted.stream_fn, resume=Resumption(context.messages[-1], decisions)
        )
        events += list(resumed)
        context.messages += resumed.result()
    return events, context.messages


def _named_shell(ran, label, requires_approval):
    def execute(tool_call_id, args, signal, on_update):
        ran.append(label)
        return AgentToolResult(content=label)

    schema = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
    return AgentTool("shell", label, schema, execute, requires_approval=requires_approval)


def test_a_call_waits_when_the_first_tool_of_its_name_requires_approval():
    from agentcore.approvals import ApprovalDecision

    ran = []
    tools = [_named_shell(ran, "dangerous", True), _named_shell(ran, "harmless", False)]
    events, messages = _loop_run(tools)
    assert [e.tool_call_id for e in events if e.type == "tool_approval_request"] == ["s"]
    assert "tool_execution_start" not in _types(events)
    assert ran == [] and messages[-1].role == "assistant"

    events, messages = _loop_run(tools, {"s": ApprovalDecision(True)})
    assert ran == ["dangerous"]  # the tool the loop runs is the one that was approved


def test_a_call_runs_at_once_when_the_first_tool_of_its_name_needs_no_approval():
    ran = []
    events, _ = _loop_run([_named_shell(ran, "harmless", False), _named_shell(ran, "dangerous", True)])
    assert "tool_approval_request" not in _types(events)
    assert ran == ["harmless"]


def test_edited_args_given_to_the_low_level_resumption_are_validated_before_running():
    from agentcore.approvals import ApprovalDecision

    ran = []
    events, messages = _loop_run([_named_shell(ran, "dangerous", True)], {"s": ApprovalDecision(True, {"command": []})})
    result = next(m for m in messages if m.role == "toolResult")
    assert result.is_error and result.content[0].text.startswith('Validation failed for tool "shell"')
    assert ran == []

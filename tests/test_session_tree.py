"""Session entry model and tree API (spec session.md §2, §3.1, §5) and the Agent link (issue 5 item 4)."""

from __future__ import annotations

import json
import threading

import pytest

from agentcore.session import (
    CompactionEntry,
    LeafEntry,
    MemorySessionStorage,
    MessageEntry,
    Session,
    SessionError,
    UnknownEntry,
    attach_session,
    entry_from_dict,
    restore_agent,
)
from agentcore.session.entries import encode_line, iso_from_ms, js_number, ms_from_iso, new_entry_id, new_session_id
from agentcore.types import UserMessage


def test_every_entry_type_round_trips():  # session §2 table
    base = {"id": "abcd1234", "parentId": "00000000", "timestamp": "2025-01-01T00:00:00.000Z"}
    payloads = [
        {"type": "message", "message": {"role": "user", "content": "hi", "timestamp": 1}},
        {"type": "thinking_level_change", "thinkingLevel": "high"},
        {"type": "model_change", "provider": "openai", "modelId": "gpt-4"},
        {"type": "active_tools_change", "activeToolNames": ["read"]},
        {
            "type": "compaction",
            "summary": "S",
            "firstKeptEntryId": "x",
            "tokensBefore": 3,
            "details": {"readFiles": []},
            "fromHook": True,
            "usage": {"input": 1},
        },
        {"type": "branch_summary", "fromId": "root", "summary": "B", "details": None},
        {"type": "custom", "customType": "t", "data": {"k": [1, 2]}},
        {
            "type": "custom_message",
            "customType": "t",
            "content": [{"type": "text", "text": "x"}],
            "display": False,
            "details": {"d": 1},
        },
        {"type": "label", "targetId": "x", "label": "L"},
        {"type": "session_info", "name": "N"},
        {"type": "leaf", "targetId": None},
        {"type": "from_the_future", "whatever": [1]},
    ]
    for payload in payloads:
        data = {"type": payload["type"], **base, **{k: v for k, v in payload.items() if k != "type"}}
        entry = entry_from_dict(data)
        assert entry.type == data["type"]
        assert entry.to_dict() == data
        assert list(entry.to_dict()) == list(data)  # key order: type, id, parentId, timestamp, payload
    assert isinstance(entry_from_dict({"type": "x", **base}), UnknownEntry)
    with pytest.raises(ValueError):
        entry_from_dict({"type": "message", **base})  # message entry without a message
    with pytest.raises(ValueError):
        entry_from_dict({"type": "message", "id": "", "parentId": None, "timestamp": "t", "message": {}})


def test_typed_accessors():
    entry = entry_from_dict(
        {
            "type": "compaction",
            "id": "c",
            "parentId": None,
            "timestamp": "2025-11-20T23:33:50.805Z",
            "summary": "S",
            "firstKeptEntryId": "k",
            "tokensBefore": 9,
        }
    )
    assert isinstance(entry, CompactionEntry)
    assert (entry.first_kept_entry_id, entry.tokens_before, entry.details) == ("k", 9, None)
    assert entry.timestamp_ms == 1763681630805
    message = entry_from_dict(
        {
            "type": "message",
            "id": "m",
            "parentId": None,
            "timestamp": "t",
            "message": {"role": "user", "content": "x", "timestamp": 1},
        }
    )
    assert isinstance(message, MessageEntry) and isinstance(message.message, UserMessage)
    assert message.timestamp_ms == 0  # unparsable timestamp


def test_time_and_id_helpers():  # session §3.1
    assert iso_from_ms(1763681630805) == "2025-11-20T23:33:50.805Z"
    assert ms_from_iso("2025-11-20T23:33:50.805Z") == 1763681630805
    assert ms_from_iso("2025-11-20T23:33:50+00:00") == 1763681630000
    taken = set()
    for _ in range(200):
        new = new_entry_id(taken.__contains__)
        assert len(new) == 8 and new not in taken
        taken.add(new)
    assert len(new_entry_id(lambda candidate: True)) == 36  # 100 collisions: a full UUID
    a, b = new_session_id(), new_session_id()
    assert a != b and a[14] == "7" and len(a) == 36


@pytest.mark.parametrize(
    "value,text",
    [
        (0.0, "0"),
        (3.0, "3"),
        (9e-06, "0.000009"),
        (1e-07, "1e-7"),
        (2.1000000000000002e-05, "0.000021000000000000002"),
        (0.5, "0.5"),
        (1e16, "10000000000000000"),
        (1e21, "1e+21"),
        (-3e-06, "-0.000003"),
        (1.5e-10, "1.5e-10"),
        # whole numbers from 1e16 on: the shortest digits padded with zeros, not the exact binary value
        (2.0**60, "1152921504606847000"),
        (-(2.0**60), "-1152921504606847000"),
        (1.2345678901234568e20, "123456789012345680000"),
        (2.0**54 + 4, "18014398509481988"),
    ],
)
def test_numbers_are_written_like_javascript(value, text):  # JSON.stringify compatibility
    assert js_number(value) == text
    assert encode_line({"v": value}) == f'{{"v":{text}}}\n'.encode()
    assert float(json.loads(text)) == value  # the same number read back (JavaScript reads every number as a float)


def test_timestamps_with_an_offset_or_another_precision_are_read_as_times(monkeypatch):  # session §2
    """Another writer's ISO timestamps (an offset, another fraction) mean the time they say, in any
    local time zone; text that is no such timestamp is refused, never read as some other time."""
    import time

    monkeypatch.setenv("TZ", "America/New_York")  # a zone with DST: nothing here may depend on it
    time.tzset()
    try:
        midnight = 1735689600000  # 2025-01-01T00:00:00Z
        assert ms_from_iso("2025-01-01T02:00:00.000+02:00") == midnight
        assert ms_from_iso("2024-12-31T19:00:00-05:00") == midnight
        assert ms_from_iso("2025-01-01T05:30:00.250+0530") == midnight + 250
        assert ms_from_iso("2025-01-01T00:00:00.123456789Z") == midnight + 123
        assert ms_from_iso("2025-01-01T00:00:00") == midnight  # no zone: UTC
        for bad in ("2025-01-01T00:00:00.-5Z", "2025-01-01T00:00:00.+1Z", "2025-01-01T00:00:00+24:00", "x"):
            with pytest.raises(ValueError):
                ms_from_iso(bad)
        assert iso_from_ms(-1) == "1969-12-31T23:59:59.999Z"  # a clock before 1970: still a time
        dst = 1741503600000  # 2025-03-09T07:00:00Z, the hour New York skips
        assert iso_from_ms(dst) == "2025-03-09T07:00:00.000Z" and ms_from_iso(iso_from_ms(dst)) == dst
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_children_and_roots_are_in_time_order_whatever_the_timestamp_form():  # session §5 getTree
    def message(entry_id, parent, stamp):
        content = {"role": "user", "content": entry_id, "timestamp": 1}
        return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": stamp, "message": content}

    entries = [
        message("root", None, "2025-01-01T00:00:00.500Z"),
        message("late", "root", "2025-01-01T00:00:01.200Z"),
        message("early", "root", "2025-01-01T00:00:01Z"),  # same second, no fraction: before .200
        message("middle", "root", "2025-01-01T02:00:01.100+02:00"),  # 00:00:01.100 UTC
        message("orphan2", "gone", "2025-01-01T00:00:00.200Z"),
        message("orphan1", "gone", "2025-01-01T00:00:00Z"),
    ]
    session = Session(MemorySessionStorage(entries=entries))
    assert [e.id for e in session.children("root")] == ["early", "middle", "late"]
    assert [n.entry.id for n in session.get_tree()] == ["orphan1", "orphan2", "root"]
    assert [n.entry.id for n in session.get_tree()[2].children] == ["early", "middle", "late"]


def test_injected_clock_and_ids():  # session §13: deterministic ids and times for tests
    counter = iter(range(1, 100))
    s = Session.in_memory(
        cwd="/w",
        session_id="fixed",
        clock=lambda: 1_700_000_000_000,
        id_factory=lambda exists: f"entry-{next(counter)}",
    )
    first = s.append_message(UserMessage("a", timestamp=1))
    second = s.append_message(UserMessage("b", timestamp=2))
    assert (first, second, s.id, s.cwd) == ("entry-1", "entry-2", "fixed", "/w")
    assert s.get_entry(second).timestamp == "2023-11-14T22:13:20.000Z"


def test_reads_return_copies():  # session §9.2: callers can never mutate stored data
    s = Session.in_memory()
    data = {"k": [1]}
    custom = s.append_custom("t", data)
    data["k"].append(2)
    assert s.get_entry(custom).data == {"k": [1]}
    message = UserMessage("original", timestamp=1)
    m = s.append_message(message)
    message.content = "changed"
    assert s.get_entry(m).message.content == "original"


def test_memory_storage_prefill_and_dangling_leaf():  # session §9.2
    entries = [
        {
            "type": "message",
            "id": "a",
            "parentId": None,
            "timestamp": "t",
            "message": {"role": "user", "content": "x", "timestamp": 1},
        },
        {"type": "leaf", "id": "l", "parentId": "a", "timestamp": "t", "targetId": None},
    ]
    assert Session(MemorySessionStorage(entries=entries)).leaf_id is None
    entries[1]["targetId"] = "missing"
    with pytest.raises(SessionError) as info:
        MemorySessionStorage(entries=entries)
    assert info.value.code == "invalid_session"


def test_deep_chain_is_walked_iteratively():  # session §13: chains can be very deep, never recurse
    s = Session.in_memory()
    for n in range(5000):
        s.append_custom("step", n)
    assert len(s.get_branch()) == 5000
    assert len(s.get_tree()) == 1
    assert s.build_context().messages == []


def test_concurrent_appends_from_threads_stay_a_chain():  # one lock per session
    s = Session.in_memory()
    barrier = threading.Barrier(4)

    def worker(n):
        barrier.wait()
        for i in range(200):
            s.append_custom("t", [n, i])

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    entries = s.entries()
    assert len(entries) == 800 and len({e.id for e in entries}) == 800
    assert all(b.parent_id == a.id for a, b in zip(entries, entries[1:]))


def test_children_and_leaf_entries():  # session §5: leaf entries are not tree nodes
    s = Session.in_memory()
    a = s.append_message(UserMessage("a", timestamp=1))
    b = s.append_message(UserMessage("b", timestamp=2))
    s.move_to(a)
    assert [e.id for e in s.children(a)] == [b]
    leaf = s.entries()[-1]
    assert isinstance(leaf, LeafEntry) and leaf.target_id == a and leaf.parent_id == a  # issue 10.3
    with pytest.raises(SessionError):
        s.move_to(leaf.id)  # a bookkeeping entry is not a position
    assert s.move_to(a) is None and len(s.entries()) == 3  # moving to the current leaf writes nothing


@pytest.mark.parametrize(
    "summary, problem",
    [
        ({"summary": "s", "usage": "lots"}, "'usage' must be an object"),
        ({"summary": "s", "details": [float("nan")]}, "nan is not JSON"),
    ],
)
def test_a_summary_the_storage_refuses_leaves_the_leaf_where_it_was(tmp_path, summary, problem):
    """move_to wrote the leaf move, then the branch summary was refused: the session was moved
    without its summary (what a reader of the file then resumes on)."""
    s = Session.create(str(tmp_path / "s.jsonl"))
    a = s.append_message(UserMessage("a", timestamp=1))
    b = s.append_message(UserMessage("b", timestamp=2))
    with pytest.raises(SessionError, match=problem) as caught:
        s.move_to(a, summary)
    assert caught.value.code == "invalid_payload"
    assert len(s.entries()) == 2 and s.leaf_id == b
    s.close()
    with Session.open(str(tmp_path / "s.jsonl")) as reopened:
        assert reopened.leaf_id == b


# --------------------------------------------------------------------------- agent link


def _agent(responses, session=None):
    from agentcore import Agent
    from agentcore.testing import ScriptedModel

    scripted = ScriptedModel(responses)
    return Agent(scripted.model, stream_fn=scripted.stream_fn), scripted


def test_attach_session_records_a_run_and_resumes(tmp_path):  # issue 5: run, reopen, continue, branch
    path = tmp_path / "agent.jsonl"
    session = Session.create(path, cwd="/w")
    agent, _ = _agent(["first answer"])
    attach_session(agent, session)
    agent.prompt("first question")
    session.close()

    reopened = Session.open(path)
    entries = reopened.entries()
    roles = [e.message.role for e in entries if e.type == "message"]
    assert roles == ["user", "assistant"]
    assert any(e.type == "model_change" for e in entries)

    agent2, scripted2 = _agent(["second answer"])
    context = restore_agent(agent2, reopened)
    assert [m.role for m in context.messages] == ["user", "assistant"]
    attach_session(agent2, reopened)
    agent2.prompt("second question")
    texts = [m.content if isinstance(m.content, str) else m.content[0].text for m in reopened.build_context().messages]
    assert texts == ["first question", "first answer", "second question", "second answer"]

    first_user = reopened.get_branch()[1 if entries[0].type != "message" else 0]
    fork_point = next(e for e in reopened.get_branch() if e.type == "message" and e.message.role == "assistant")
    reopened.move_to(fork_point.id)
    agent3, _ = _agent(["branch answer"])
    restore_agent(agent3, reopened)
    attach_session(agent3, reopened)
    agent3.prompt("another direction")
    branch_texts = [
        m.content if isinstance(m.content, str) else m.content[0].text for m in reopened.build_context().messages
    ]
    assert branch_texts == ["first question", "first answer", "another direction", "branch answer"]
    assert first_user is not None
    reopened.close()
    with Session.open(path) as final:
        assert [m.role for m in final.build_context().messages] == ["user", "assistant", "user", "assistant"]


def test_attach_session_records_thinking_level_changes():
    session = Session.in_memory()
    agent, _ = _agent(["one", "two"])
    attach_session(agent, session)
    agent.prompt("a")
    agent.state.thinking_level = "high"
    agent.prompt("b")
    assert session.build_context().thinking_level == "high"
    types = [e.type for e in session.entries()]
    assert types.count("thinking_level_change") == 1


def test_failed_run_leaves_a_loadable_session(tmp_path):  # issue 5: aborted or failed run
    from agentcore.testing import error

    path = tmp_path / "fail.jsonl"
    session = Session.create(path, cwd="/w")
    agent, _ = _agent([error("provider exploded")])
    attach_session(agent, session)
    agent.prompt("hello")
    session.close()
    with Session.open(path) as again:
        messages = again.build_context().messages
        assert [m.role for m in messages] == ["user", "assistant"]
        assert messages[-1].stop_reason == "error"


def test_recorder_stores_a_json_safe_form_of_values_json_cannot_hold(tmp_path):  # issue 10 item 2
    import socket
    import warnings

    from agentcore.agent import Agent
    from agentcore.testing import ScriptedModel, call, response, text
    from agentcore.tools import AgentToolResult, tool

    sock = socket.socket()
    values = {"obj": object(), "objects": {object()}, "nan": float("nan"), "raw": b"\x00\xff", "sock": sock}

    @tool
    def give(which: str) -> object:
        """Return something JSON cannot hold."""
        return values[which]

    @tool
    def handmade() -> object:
        """A hand-built result with odd details."""
        return AgentToolResult(content="ok", details={"inf": float("inf"), "tuple": (1, b"x"), 1: {object()}})

    calls = [call("give", {"which": name}, f"c-{name}") for name in values] + [call("handmade", {}, "c-h")]
    scripted = ScriptedModel([response(*calls), text("done")])
    path = tmp_path / "odd.jsonl"
    session = Session.create(path, cwd="/w")
    agent = Agent(scripted.model, tools=[give, handmade], stream_fn=scripted.stream_fn, session=session)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            agent.prompt("go")
    finally:
        sock.close()
    assert agent.state.messages[-1].text == "done" and agent.state.messages[-1].stop_reason == "stop"
    assert len([w for w in caught if issubclass(w.category, RuntimeWarning)]) == 1
    session.close()

    def refuse(token):
        raise AssertionError(f"{token} is not JSON")

    lines = [json.loads(line, parse_constant=refuse) for line in path.read_text("utf-8").splitlines()]
    results = {
        e["message"]["toolCallId"]: e["message"]
        for e in lines
        if e["type"] == "message" and e["message"]["role"] == "toolResult"
    }
    assert sorted(results) == sorted([f"c-{name}" for name in values] + ["c-h"])
    assert results["c-h"]["details"] == {
        "inf": None,
        "tuple": [1, {"type": "bytes", "base64": "eA=="}],
        "1": [results["c-h"]["details"]["1"][0]],
    }
    assert results["c-h"]["details"]["1"][0].startswith("<object object")
    text_of = {key: json.dumps(m) for key, m in results.items()}
    assert "socket" in text_of["c-sock"] and "object object" in text_of["c-obj"]
    reopened = Session.open(path)
    assert [m.role for m in reopened.build_context().messages] == ["user", "assistant"] + ["toolResult"] * 6 + [
        "assistant"
    ]
    reopened.close()


def test_recorder_stores_details_nested_too_deeply_in_a_readable_form(tmp_path):  # issue 10 item 2 (class)
    """Details nested 600 levels deep made the append raise RecursionError: the run failed and
    the session kept the tool call without its result."""
    import warnings

    from agentcore.agent import Agent
    from agentcore.testing import ScriptedModel, call, response, text
    from agentcore.tools import AgentToolResult, tool

    deep: list = []
    inner = deep
    for _ in range(600):
        inner.append([])
        inner = inner[0]

    @tool
    def nest() -> object:
        """A result whose details are nested very deeply."""
        return AgentToolResult(content="ok", details={"deep": deep})

    scripted = ScriptedModel([response(call("nest", {}, "c-n")), text("done")])
    path = tmp_path / "deep.jsonl"
    session = Session.create(path, cwd="/w")
    agent = Agent(scripted.model, tools=[nest], stream_fn=scripted.stream_fn, session=session)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        agent.prompt("go")
    assert agent.state.messages[-1].text == "done" and agent.state.messages[-1].stop_reason == "stop"
    assert [w.category for w in caught] == [RuntimeWarning]
    session.close()
    reopened = Session.open(path)
    (result,) = [m for m in reopened.build_context().messages if m.role == "toolResult"]
    assert result.content[0].text == "ok" and "<nested too deeply>" in json.dumps(result.details)
    reopened.close()

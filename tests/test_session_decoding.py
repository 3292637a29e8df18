"""Fast decoding paths give exactly what the generic readers give (issue 5: long sessions load fast).

Messages and entries of the common shapes are built by direct constructor calls; every other input
takes the generic reader. A ``dict`` subclass never takes a fast path, so reading the same data once
as plain dicts and once as subclass instances compares the two paths object by object, including the
hidden ``extra`` and ``_absent`` state that decides what ``to_dict`` writes back (session.md §3.4).
"""

from __future__ import annotations

import copy
import json
import os
import re
import threading
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any, Iterator, List

import _processes
import pytest

from agentcore.session import MemorySessionStorage, Session, entry_from_dict
from agentcore.session.context import repair_tool_results
from agentcore.types import AssistantMessage, TextContent, ToolCall, ToolResultMessage, UserMessage, message_from_dict

SHARED = Path(__file__).resolve().parents[2] / "shared"


class _Slow(dict):
    """A mapping the fast paths do not recognise (they only take plain dicts)."""


def _slow(value: Any) -> Any:
    if isinstance(value, dict):
        return _Slow({k: _slow(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_slow(v) for v in value]
    return value


def _state(value: Any) -> Any:
    """Everything an object holds, hidden fields included, as comparable plain data (a timestamp
    that was absent is the read time, so it is left out)."""
    if is_dataclass(value) and not isinstance(value, type):
        absent = getattr(value, "_absent", ())
        return (
            type(value).__name__,
            {
                f.name: ("now", None)
                if f.name == "timestamp" and "timestamp" in absent
                else _state(getattr(value, f.name))
                for f in fields(value)
            },
        )
    if isinstance(value, dict):
        return ("dict", {k: _state(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_state(v) for v in value])
    if isinstance(value, frozenset):
        return ("frozenset", sorted(value))
    return (type(value).__name__, value)


USAGE = {
    "input": 1,
    "output": 2,
    "cacheRead": 3,
    "cacheWrite": 4,
    "totalTokens": 10,
    "cost": {"input": 0.1, "output": 0.2, "cacheRead": 0.3, "cacheWrite": 0.4, "total": 1.0},
}
BASE = [
    {"role": "user", "content": "plain", "timestamp": 1},
    {
        "role": "user",
        "content": [{"type": "text", "text": "hi"}, {"type": "image", "data": "aGk=", "mimeType": "image/png"}],
        "timestamp": 2,
    },
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "hmm", "thinkingSignature": "sig"},
            {"type": "thinking", "thinking": "", "thinkingSignature": "opaque", "redacted": True},
            {"type": "text", "text": "answer"},
            {"type": "text", "text": "signed", "textSignature": "ts"},
            {"type": "toolCall", "id": "c1", "name": "echo", "arguments": {"value": "x"}},
            {"type": "toolCall", "id": "c2", "name": "echo", "arguments": {}, "thoughtSignature": "g"},
            {"type": "mystery", "payload": 1},
        ],
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "claude",
        "usage": USAGE,
        "stopReason": "toolUse",
        "timestamp": 4,
    },
    {
        "role": "assistant",
        "content": [],
        "api": "x",
        "provider": "y",
        "model": "z",
        "usage": USAGE,
        "stopReason": "error",
        "errorMessage": "boom",
        "timestamp": 5,
    },
    {
        "role": "toolResult",
        "toolCallId": "c1",
        "toolName": "echo",
        "content": [{"type": "text", "text": "ok"}],
        "isError": False,
        "timestamp": 6,
    },
    {
        "role": "toolResult",
        "toolCallId": "c1",
        "toolName": "echo",
        "content": [{"type": "text", "text": "ok"}],
        "details": {"diff": "+x"},
        "isError": False,
        "timestamp": 6,
    },
]


def _variants(data: Any) -> Iterator[Any]:
    """``data``, then for every key of every nested object: without it, set to None, plus an unknown key."""
    yield data
    stack: List[List[Any]] = [[]]
    while stack:
        path = stack.pop()
        target = data
        for step in path:
            target = target[step]
        items = list(target.items()) if isinstance(target, dict) else list(enumerate(target))
        if isinstance(target, dict):
            for change in ("drop", "none", "add"):
                for key, _ in items:
                    copied = copy.deepcopy(data)
                    node = copied
                    for step in path:
                        node = node[step]
                    if change == "drop":
                        del node[key]
                    elif change == "none":
                        node[key] = None
                    else:
                        node["unknownKey"] = {"kept": [key]}
                    yield copied
        for key, value in items:
            if isinstance(value, (dict, list)):
                stack.append(path + [key])


def _read(reader: Any, data: Any) -> Any:
    try:
        return _state(reader(data))
    except Exception as exc:  # both paths must fail the same way
        return ("raised", type(exc).__name__)


@pytest.mark.parametrize("base", BASE, ids=lambda d: d["role"])
def test_fast_message_decoding_matches_the_generic_reader(base):  # session.md §3.4 round trips
    count = 0
    for data in _variants(base):
        snapshot = copy.deepcopy(data)
        assert _read(message_from_dict, data) == _read(message_from_dict, _slow(data)), data
        assert data == snapshot  # reading never mutates
        count += 1
    assert count >= 3 * len(base) + 1


def test_fast_paths_are_taken_for_the_common_shapes():  # issue 5: the shapes agentcore itself writes
    assistant = message_from_dict(BASE[2])
    text, call = assistant.content[2], assistant.content[4]
    # the fast path shares one absent-key set per shape instead of building one per object
    assert text._absent is message_from_dict(BASE[2]).content[2]._absent
    assert isinstance(text, TextContent) and isinstance(call, ToolCall)
    assert assistant.to_dict() == BASE[2]
    assert message_from_dict(BASE[5]).to_dict() == BASE[5]


def test_reference_file_messages_decode_alike_on_both_paths(shared_dir):  # session.md: reference files
    path = shared_dir / "sessions" / "pi-v1-large-session.jsonl"
    if not path.exists():
        pytest.skip(f"{path} not found")
    count = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        if "message" in entry:
            assert _read(message_from_dict, entry["message"]) == _read(message_from_dict, _slow(entry["message"]))
            count += 1
    assert count > 900


ENTRY = {
    "type": "message",
    "id": "a1b2c3d4",
    "parentId": None,
    "timestamp": "2025-11-20T23:33:50.805Z",
    "message": {"role": "user", "content": "hi", "timestamp": 1},
}


def test_fast_entry_decoding_matches_the_generic_reader():  # session.md §3.3 message entries
    for data in _variants(ENTRY):
        assert _read(entry_from_dict, data) == _read(entry_from_dict, _slow(data)), data


def _assistant(*call_ids: str) -> AssistantMessage:
    return AssistantMessage([ToolCall(c, "t", {}) for c in call_ids], timestamp=0)


def _result(call_id: str) -> ToolResultMessage:
    return ToolResultMessage(call_id, "t", [TextContent(call_id)], timestamp=0)


def _reference_repair(messages: List[Any]) -> List[Any]:
    """session.md §6 step 4 written plainly: drop orphan results, move kept ones after their owner,
    the nearest assistant before the result that made the call (else the last one that made it:
    a result written before its call)."""
    calls = [
        (index, {call.id for call in message.tool_calls})
        for index, message in enumerate(messages)
        if getattr(message, "role", None) == "assistant"
    ]

    def owner(position: int, call_id: str) -> Any:
        before = [index for index, ids in calls if index < position and call_id in ids]
        anywhere = [index for index, ids in calls if call_id in ids]
        return before[-1] if before else (anywhere[-1] if anywhere else None)

    owners = {
        position: owner(position, m.tool_call_id)
        for position, m in enumerate(messages)
        if getattr(m, "role", None) == "toolResult"
    }
    out = []
    for index, message in enumerate(messages):
        if getattr(message, "role", None) == "toolResult":
            continue
        out.append(message)
        out.extend(messages[position] for position, found in owners.items() if found == index)
    return out


@pytest.mark.parametrize(
    "layout",
    [
        "A(a) r(a) U A(b,c) r(c) r(b)",  # already in place
        "r(a) A(a) U",  # result before its call: moved after it
        "A(a) U r(a)",  # result after a later message: moved up
        "A(a) r(x) r(a)",  # orphan dropped
        "A(a) r(a) A(a) r(a)",  # a repeated call id: each result stays with its nearest call
        "U {dict} r(a) A(a)",  # dict messages are never owners
    ],
)
def test_tool_result_repair_matches_the_spec_rule(layout):  # session.md §6 step 4
    messages: List[Any] = []
    for token in layout.split():
        if token == "U":
            messages.append(UserMessage("u", timestamp=0))
        elif token == "{dict}":
            messages.append({"role": "assistant", "tool_calls": []})
        elif token.startswith("A("):
            messages.append(_assistant(*token[2:-1].split(",")))
        else:
            messages.append(_result(token[2:-1]))
    repaired = repair_tool_results(list(messages))
    assert [id(m) for m in repaired] == [id(m) for m in _reference_repair(messages)]


def test_bulk_reads_return_the_entries_single_reads_return():  # session.md §5 reads
    storage = MemorySessionStorage()
    session = Session(storage)
    ids = [session.append_message(UserMessage(f"m{i}", timestamp=i)) for i in range(50)]
    context = session.build_context()
    assert [m.content for m in context.messages] == [f"m{i}" for i in range(50)]
    assert [e.to_dict() for e in session.get_branch()] == [storage.get_entry(i).to_dict() for i in ids]


# --------------------------------------------------------------------------- JSONL lines read back from the file


def _jsonl_with_messages(tmp_path: Path, count: int) -> Any:
    path = tmp_path / "s.jsonl"
    with Session.create(path, cwd="/w") as session:
        ids = [session.append_message(UserMessage(f"m{i}", timestamp=i)) for i in range(count)]
    return path, ids


def test_jsonl_entries_are_read_back_from_the_file_not_kept(tmp_path):  # issue 5: memory <= 3x the file
    path, ids = _jsonl_with_messages(tmp_path, 20)
    with Session.open(path, read_only=True) as session:
        nodes = session.storage._nodes
        assert all(nodes[i].raw is None and nodes[i].at is not None for i in ids)
        assert [m.content for m in session.build_context().messages] == [f"m{i}" for i in range(20)]
        assert session.storage.raw_line(ids[3]) == path.read_bytes().splitlines()[4]


def test_crlf_and_blank_lines_are_read_back_exactly(tmp_path):  # session.md §3.5 lenient line endings
    path, ids = _jsonl_with_messages(tmp_path, 4)
    lines = path.read_bytes().splitlines()
    path.write_bytes(lines[0] + b"\r\n\n" + b"\r\n   \n".join(lines[1:]) + b"\n")
    with Session.open(path, read_only=True) as session:
        assert [m.content for m in session.build_context().messages] == ["m0", "m1", "m2", "m3"]
        assert [session.storage.raw_line(i) for i in ids] == lines[1:]
    with Session.open(path, verify=True) as session:
        new = session.append_message(UserMessage("m4", timestamp=4))
        session.storage._cache.clear()
        assert session.get_entry(new).message.content == "m4"
        assert [m.content for m in session.build_context().messages] == ["m0", "m1", "m2", "m3", "m4"]


def test_reads_after_close_reopen_the_file(tmp_path):  # session.md §5: reads work after close
    path, ids = _jsonl_with_messages(tmp_path, 3)
    session = Session.open(path)
    appended = session.append_message(UserMessage("late", timestamp=9))
    session.close()
    assert session.get_entry(ids[1]).message.content == "m1"
    assert session.get_entry(appended).message.content == "late"
    assert [m.content for m in session.build_context().messages] == ["m0", "m1", "m2", "late"]


def test_a_file_cut_under_a_reader_is_reported_not_misread(tmp_path):  # session.md §3.5: never invent data
    from agentcore.session import SessionError

    path, ids = _jsonl_with_messages(tmp_path, 3)
    with Session.open(path, read_only=True) as session:
        data = path.read_bytes()
        with open(path, "r+b") as handle:  # another program cuts the file short behind our back
            handle.truncate(len(data) - 20)
        with pytest.raises(SessionError) as info:
            session.get_entry(ids[2])
        assert info.value.code == "invalid_session" and ids[2] in str(info.value)
        assert session.get_entry(ids[0]).message.content == "m0"


@pytest.mark.parametrize("branch_at", [29, 2])  # dense rows (one range scan) and sparse rows (IN lists)
def test_sqlite_bulk_fetch_returns_the_branch(tmp_path, branch_at):  # session.md §9.4, §6
    from agentcore.session import SqliteSessionStorage

    db = tmp_path / "s.db"
    session = Session(SqliteSessionStorage.create(db, cwd="/w", session_id="s"))
    ids = [session.append_message(UserMessage(f"a{i}", timestamp=i)) for i in range(30)]
    session.move_to(ids[branch_at])
    for i in range(20):
        session.append_message(UserMessage(f"b{i}", timestamp=100 + i))
    expected = [f"a{i}" for i in range(branch_at + 1)] + [f"b{i}" for i in range(20)]
    session.close()
    with Session(SqliteSessionStorage(db, "s", read_only=True)) as again:
        assert [m.content for m in again.build_context().messages] == expected


def _bulk_scan_starts(monkeypatch: Any) -> List[int]:
    """Record where bulk decodes start scanning each line (0: the whole line is parsed)."""
    import agentcore.session.storage as storage_module

    starts: List[int] = []
    real = storage_module._scan_once

    def scan(text: str, start: int) -> Any:
        starts.append(start)
        return real(text, start)

    monkeypatch.setattr(storage_module, "_scan_once", scan)
    return starts


@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
def test_bulk_reads_scan_the_message_not_the_envelope_again(tmp_path, monkeypatch, backend):  # issue 11 item 7
    from agentcore.session import SqliteSessionStorage

    if backend == "jsonl":
        path, _ = _jsonl_with_messages(tmp_path, 12)
        opened = Session.open(path, read_only=True)
    else:
        db = tmp_path / "s.db"
        with Session(SqliteSessionStorage.create(db, cwd="/w", session_id="s")) as writer:
            for i in range(12):
                writer.append_message(UserMessage(f"m{i}", timestamp=i))
        opened = Session(SqliteSessionStorage(db, "s", read_only=True))
    starts = _bulk_scan_starts(monkeypatch)
    with opened as session:
        assert [m.content for m in session.build_context().messages] == [f"m{i}" for i in range(12)]
    # the envelope the index recorded is checked as text; only the message object is decoded
    assert len(starts) == 12 and all(start > 60 for start in starts)


def test_sqlite_rows_whose_columns_are_not_their_json_take_the_full_parser(tmp_path):  # session.md §3.5
    import sqlite3

    from agentcore.session import SessionError, SqliteSessionStorage

    db = tmp_path / "s.db"
    with Session(SqliteSessionStorage.create(db, cwd="/w", session_id="s")) as writer:
        first = writer.append_message(UserMessage("m0", timestamp=0))
        writer.append_message(UserMessage("m1", timestamp=1))
    # a row whose id column holds a quote, and a payload that starts with that id unescaped: text
    # that matches the envelope built from the columns but is not JSON; it must be reported
    odd = 'x"y'
    payload = (
        f'{{"type":"message","id":"{odd}","parentId":"{first}","timestamp":"2025-01-01T00:00:00.000Z",'
        '"message":{"role":"user","content":"m2","timestamp":2}}'
    )
    conn = sqlite3.connect(db)
    with conn:
        conn.execute(
            "INSERT INTO entries VALUES (?,?,?,?,?,?,?,?)",
            ("s", 3, odd, first, "message", "2025-01-01T00:00:00.000Z", "user", payload),
        )
    conn.close()
    with Session(SqliteSessionStorage(db, "s", read_only=True)) as session:
        session.move_to(odd)
        with pytest.raises(SessionError) as info:
            session.build_context()
        assert info.value.code == "invalid_entry" and odd in str(info.value)


# --------------------------------------------------------------------------- the collector during bulk decodes


def test_bulk_decode_leaves_the_garbage_collector_as_it_found_it(tmp_path):  # issue 5: process-wide state
    import gc

    path, ids = _jsonl_with_messages(tmp_path, 12)
    assert gc.isenabled()
    frozen = gc.get_freeze_count()  # 0, or (Python 3.12) the objects the interpreter froze at start
    with Session.open(path, read_only=True) as session:
        assert len(session.build_context().messages) == 12
    assert gc.isenabled() and gc.get_freeze_count() == frozen
    gc.disable()
    try:
        with Session.open(path, read_only=True) as session:
            assert len(session.build_context().messages) == 12
        assert not gc.isenabled()  # the application's choice is kept
    finally:
        gc.enable()


def test_objects_the_application_froze_stay_frozen(tmp_path):  # issue 5: pre-fork servers freeze objects
    import gc

    path, ids = _jsonl_with_messages(tmp_path, 12)
    keep = [[n] for n in range(100)]
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        with Session.open(path, read_only=True) as session:
            assert len(session.build_context().messages) == 12
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
    assert keep


def test_bulk_decode_leaves_the_callers_objects_in_their_generation(tmp_path):  # issue 11 item 6
    """gc.freeze()+unfreeze() after a decode moved every object of the process to the oldest
    generation: young cyclic garbage of the caller (or of other threads) then outlived every young
    collection. A decode may pause the collector, not rearrange the caller's heap."""
    import gc

    path, ids = _jsonl_with_messages(tmp_path, 12)
    thresholds = gc.get_threshold()
    gc.collect()
    gc.set_threshold(10**9)  # no automatic collection can move the probe during the test
    frozen = gc.get_freeze_count()  # 0, or (Python 3.12) the objects the interpreter froze at start
    try:
        probe = [[n] for n in range(3)]
        young = {id(o) for o in gc.get_objects(generation=0)}
        assert id(probe) in young
        with Session.open(path, read_only=True) as session:
            assert len(session.build_context().messages) == 12
        assert id(probe) in {id(o) for o in gc.get_objects(generation=0)}
        assert gc.isenabled() and gc.get_freeze_count() == frozen
    finally:
        gc.set_threshold(*thresholds)


def test_decodes_in_two_threads_share_one_pause():  # issue 11 item 6: the last one out re-enables
    """One thread's decode re-enabled the collector under another thread's decode."""
    import gc

    from agentcore.session.process_state import gc_paused

    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def first():
        with gc_paused():
            first_in.set()
            second_in.wait(10)
        first_out.set()

    def second():
        first_in.wait(10)
        with gc_paused():
            second_in.set()
            first_out.wait(10)
            seen["during"] = gc.isenabled()  # the first decode ended, this one still runs

    assert gc.isenabled()
    frozen = gc.get_freeze_count()  # 0, or (Python 3.12) the objects the interpreter froze at start
    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == {"during": False} and gc.isenabled() and gc.get_freeze_count() == frozen


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.parametrize("forker_paused", [False, True], ids=["forker-idle", "forker-paused-too"])
def test_a_child_forked_during_another_threads_pause_gets_its_collector_back(forker_paused):
    """The pause is a process-wide count: a child forked while another thread was inside a bulk
    decode kept that thread's pause, which no thread of the child ever ends, so the child's
    collector stayed disabled for good (each later decode there ended with the count above zero).
    The child keeps only the forking thread's own pauses."""
    import gc

    from agentcore.session import process_state

    inside, release = threading.Event(), threading.Event()

    def decoder():  # another thread opening a session or building a context
        with process_state.gc_paused():
            inside.set()
            release.wait(10)

    def fork_inside_a_pause():
        with process_state.gc_paused():
            return _processes.fork()  # parent and child both leave the pause here

    assert gc.isenabled()
    thread = threading.Thread(target=decoder)
    thread.start()
    try:
        assert inside.wait(10)
        pid = fork_inside_a_pause() if forker_paused else _processes.fork()
        if pid == 0:  # pragma: no cover - the child reports through its exit status
            code = 1
            try:
                with process_state.gc_paused():  # the child decodes something itself
                    pass
                code = 0 if gc.isenabled() and process_state._pause_depth == 0 else 3
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
    finally:
        release.set()
        thread.join(10)
    assert os.waitstatus_to_exitcode(status) == 0, "the child's collector stays disabled"
    assert gc.isenabled()


def test_reset_process_state_empties_the_caches(tmp_path):  # issue 11 item 6: resettable singletons
    from agentcore.session import entries, process_state, storage

    path, ids = _jsonl_with_messages(tmp_path, 3)
    Session.open(path, read_only=True).close()
    assert storage._WORDS and entries._last_second[0] is not None
    process_state.reset()
    assert not storage._WORDS and entries._last_second == (None, "")
    with Session.open(path, read_only=True) as session:
        assert len(session.build_context().messages) == 3


def test_entries_and_branch_read_in_bulk_match_single_reads():  # session.md §5 reads
    session = Session.in_memory()
    ids = [session.append_message(UserMessage(f"m{i}", timestamp=i)) for i in range(10)]
    session.move_to(ids[4])
    session.append_message(UserMessage("side", timestamp=20))
    storage = session.storage
    for after, limit in [(0, None), (3, 4), (8, 10), (-3, None), (-3, 2), (2, 0), (2, -1), (20, None)]:
        bulk = [e.to_dict() for e in session.entries(after, limit)]
        assert bulk == [e.to_dict() for e in storage.iter_entries(after, limit)], (after, limit)
    branch = session.get_branch()
    assert [e.id for e in branch] == ids[:5] + [session.leaf_id]


# --------------------------------------------------------------------------- wrong JSON types
# session.md §3.5 and the mission standard: a field of the wrong JSON type (a string for an object,
# a number for a list, null, nested wrong types) is a reported ``invalid_entry`` naming the line and
# the field, or a tolerated value; never an exception escaping to the user, never a lost entry.

WRONG_TYPES = ["text", 5, None, True, [5], {"a": 5}]


def _library_session_lines(tmp_path: Path) -> List[str]:
    from agentcore.types import BashExecutionMessage, ImageContent, ThinkingContent, Usage, UsageCost

    path = tmp_path / "library.jsonl"
    s = Session.create(str(path), cwd="/w")
    user = s.append_message(UserMessage("hi", 1))
    s.append_model_change("prov", "mod")
    s.append_thinking_level_change("low")
    s.append_active_tools_change(["read", "bash"])
    call = ToolCall("c1", "read", {"path": "a.txt"})
    usage = Usage(1, 2, 3, 4, 10, UsageCost(1, 1, 1, 1, 4))
    content = [TextContent("t"), ThinkingContent("th", "sig"), call]
    s.append_message(AssistantMessage(content, "api", "prov", "mod", usage, "toolUse", timestamp=2))
    s.append_message(ToolResultMessage("c1", "read", [TextContent("out"), ImageContent("aGk=", "image/png")], {"d": 1}))
    s.append_message(BashExecutionMessage("ls", "x", 0, timestamp=4))
    s.append_custom_message("note", "content", True, {"x": 1})
    s.append_custom("state", {"y": 1})
    s.append_label(user, "start")
    s.set_name("named")
    s.append_compaction("summary", user, 100)
    s.append_message(UserMessage([TextContent("x"), ImageContent("aGk=", "image/png")], 5))
    s.close()
    return path.read_text(encoding="utf-8").splitlines()


def _reference_session_lines(tmp_path: Path) -> List[str]:
    """The reference's file, migrated by opening it, then one line per shape (type, role, keys)."""
    source = SHARED / "sessions" / "pi-v1-large-session.jsonl"
    if not source.exists():
        pytest.skip(f"{source} not found")
    path = tmp_path / "reference.jsonl"
    path.write_bytes(source.read_bytes())
    Session.open(str(path)).close()  # migrates v1 -> v3 in place
    lines = path.read_text(encoding="utf-8").splitlines()
    kept, seen = [lines[0]], set()
    for line in lines[1:]:
        data = json.loads(line)
        message = data.get("message") if isinstance(data.get("message"), dict) else {}
        shape = (data["type"], message.get("role"), tuple(sorted(message)), tuple(sorted(data)))
        if shape not in seen:
            seen.add(shape)
            kept.append(line)
    return kept


def _field_paths(value: Any, prefix: tuple = ()) -> Iterator[tuple]:
    """Every key path inside ``value`` (objects and arrays), the value itself first."""
    if prefix:
        yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _field_paths(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _field_paths(item, prefix + (index,))


def _replaced(data: Any, path: tuple, value: Any) -> Any:
    out = copy.deepcopy(data)
    target = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return out


def _variants_of(lines: List[str]) -> Iterator[tuple]:
    """(line number, field path, lines) for each field of each entry replaced by each wrong type."""
    for index in range(1, len(lines)):
        data = json.loads(lines[index])
        for path in _field_paths(data):
            if path[0] == "type":
                continue  # another type is another entry (or unknown, kept verbatim): not a wrong type
            for wrong in WRONG_TYPES:
                changed = _replaced(data, path, wrong)
                if changed == data:
                    continue
                yield index + 1, path, lines[:index] + [json.dumps(changed)] + lines[index + 1 :]


def _exercise(session: Session) -> int:
    """What sessions show/export and the UIs read; returns the number of entries seen."""
    session.build_context()
    session.get_tree()
    session.get_branch()
    session.get_session_stats()
    return len(session.entries())


def _check_cli(file: Path, where: str) -> None:
    """``agentcore sessions show`` and the logs index read the file, or say what is wrong with it."""
    import io

    from agentcore.cli import main
    from agentcore.cli._logindex import read_conversation

    read_conversation(str(file))
    out, err = io.StringIO(), io.StringIO()
    if main(["sessions", "show", str(file)], stdout=out, stderr=err) != 0:
        assert str(file) in err.getvalue(), f"{where}: sessions show: {err.getvalue()}"


def _check_variant(tmp_path: Path, backend: str, number: int, line_no: int, path: tuple, lines: List[str]) -> None:
    from agentcore.session import SessionError, SqliteSessionStorage

    where = f"line {line_no}, field {path!r}"
    try:
        if backend == "jsonl":
            file = tmp_path / "variant.jsonl"
            file.write_text("\n".join(lines) + "\n", encoding="utf-8")
            _check_cli(file, where)
            session = Session.open(str(file))
        else:
            db = str(tmp_path / "variants.db")  # one database, a session per variant (creating one is slow)
            rows = [line.encode("utf-8") for line in lines[1:]]
            header = json.loads(lines[0])
            SqliteSessionStorage.create(db, cwd=header["cwd"], session_id=f"v{number}", lines=rows).close()
            session = Session(SqliteSessionStorage(db, f"v{number}", read_only=True))
        try:
            seen = _exercise(session)
        finally:
            session.close()
    except SessionError as exc:
        assert exc.code in ("invalid_entry", "invalid_session"), f"{where}: {exc.code}: {exc}"
        if exc.code == "invalid_entry" and backend == "jsonl":
            assert f":{line_no}:" in str(exc), f"{where}: the error does not name the line: {exc}"
            named = [str(key) for key in path if isinstance(key, str)] + ["message", "entry"]
            assert any(name in str(exc) for name in named), f"{where}: the error does not name the field: {exc}"
        return
    except Exception as exc:  # pragma: no cover - what this test exists to catch
        pytest.fail(f"{where}: {type(exc).__name__} escaped: {exc}")
    assert seen == len(lines) - 1, f"{where}: an entry was lost"


@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
@pytest.mark.parametrize("source", ["library", "reference"])
def test_wrong_json_types_are_reported_or_tolerated(tmp_path, backend, source):  # session.md §3.5
    lines = (_library_session_lines if source == "library" else _reference_session_lines)(tmp_path)
    count = 0
    for line_no, path, variant in _variants_of(lines):
        _check_variant(tmp_path, backend, count, line_no, path, variant)
        count += 1
    assert count > 200


def test_a_string_usage_is_an_invalid_entry_naming_the_line(tmp_path):  # found by the HTML export work
    from agentcore.session import SessionError

    lines = _library_session_lines(tmp_path)
    index = next(i for i, line in enumerate(lines) if '"role":"assistant"' in line)
    data = json.loads(lines[index])
    data["message"]["usage"] = "lots"
    file = tmp_path / "bad.jsonl"
    file.write_text("\n".join(lines[:index] + [json.dumps(data)] + lines[index + 1 :]) + "\n", encoding="utf-8")
    with pytest.raises(SessionError) as caught:
        with Session.open(str(file)) as session:
            session.build_context()
    assert caught.value.code == "invalid_entry" and caught.value.line == index + 1
    assert f"{file}:{index + 1}:" in str(caught.value) and "'usage' must be a JSON object" in str(caught.value)


def test_active_tool_names_of_the_wrong_type_are_tolerated(tmp_path):  # sessions show crashed
    # another writer's odd value loads (the HTML export renders it as stored) and says nothing
    # about the tools: build_context no longer raises TypeError on it
    lines = _library_session_lines(tmp_path)
    index = next(i for i, line in enumerate(lines) if '"active_tools_change"' in line)
    for odd, expected in ((5, None), (None, None), (["read", 7, ["x"]], ["read"])):
        data = json.loads(lines[index])
        data["activeToolNames"] = odd
        file = tmp_path / "odd.jsonl"
        file.write_text("\n".join(lines[:index] + [json.dumps(data)] + lines[index + 1 :]) + "\n", encoding="utf-8")
        with Session.open(str(file)) as session:
            assert session.build_context().active_tool_names == expected


@pytest.mark.parametrize(
    "data, problem",
    [
        (
            {"type": "compaction", "summary": 5, "firstKeptEntryId": None, "tokensBefore": 1},
            "compaction entry: 'summary' must be a string, got a number",
        ),
        (
            {"type": "branch_summary", "fromId": "root", "summary": ["a"]},
            "branch_summary entry: 'summary' must be a string, got an array",
        ),
    ],
)
def test_fields_every_later_request_reads_are_checked_on_load(data, problem):
    """A compaction's non-string summary passed the load and then failed every later prompt
    ("can only concatenate str (not "int") to str", naming nothing)."""
    from agentcore.session.entries import entry_from_dict

    entry = {"id": "e1", "parentId": None, "timestamp": "2026-01-01T00:00:00.000Z", **data}
    with pytest.raises(ValueError, match=re.escape(problem)):
        entry_from_dict(entry)


@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
def test_a_malformed_custom_message_block_is_an_invalid_entry_naming_where(tmp_path, backend):
    """A custom_message whose block another writer got wrong passed the load and failed
    build_context with a bare ValueError naming the block but not the file, line or entry."""
    from agentcore.session import SessionError, SqliteSessionStorage

    lines = _library_session_lines(tmp_path)
    index = next(i for i, line in enumerate(lines) if '"custom_message"' in line)
    data = json.loads(lines[index])
    data["content"] = [{"type": "text", "text": "fine"}, {"type": "image", "mimeType": "image/png"}]
    bad = lines[:index] + [json.dumps(data)] + lines[index + 1 :]
    if backend == "jsonl":
        file = tmp_path / "bad.jsonl"
        file.write_text("\n".join(bad) + "\n", encoding="utf-8")
        opener = lambda: Session.open(str(file))  # noqa: E731
        where = f"{file}:{index + 1}:"
    else:
        import sqlite3

        file = tmp_path / "bad.db"  # the import checks its lines: the row is changed afterwards
        SqliteSessionStorage.create(file, session_id="s", lines=[line.encode() for line in lines[1:]]).close()
        with sqlite3.connect(file) as conn:
            conn.execute("UPDATE entries SET payload = ? WHERE id = ?", (json.dumps(data), data["id"]))
        conn.close()
        opener = lambda: Session(SqliteSessionStorage(file, "s"))  # noqa: E731
        where = f"entry {data['id']}"
    with pytest.raises(SessionError) as caught:
        with opener() as session:
            session.build_context()
    assert caught.value.code in ("invalid_entry", "invalid_payload"), caught.value
    assert where in str(caught.value) and "content[1]: an 'image' block: the required key 'data'" in str(caught.value)


@pytest.mark.parametrize(
    "content, problem",
    [
        ([{"type": "image", "mimeType": "image/png"}], "content[0]: an 'image' block: the required key 'data'"),
        ([TextContent("ok"), {"type": "text", "text": 3}], "content[1]: a 'text' block: 'text' must be a string"),
        (5, "content must be a string or a list of blocks, not int"),
    ],
)
def test_a_malformed_custom_message_is_refused_before_it_is_written(tmp_path, content, problem):
    """append_custom_message wrote any content; a malformed block then failed every later context
    of the session (every prompt of an agent on it)."""
    from agentcore.session import SessionError

    with Session.create(str(tmp_path / "s.jsonl")) as session:
        session.append_message(UserMessage("hi"))
        with pytest.raises(SessionError, match=re.escape(problem)) as caught:
            session.append_custom_message("note", content)
        assert caught.value.code == "invalid_payload"
        assert len(session.storage) == 1 and [m.role for m in session.build_context().messages] == ["user"]

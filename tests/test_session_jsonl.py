"""JSONL session files: spec session.md §12 D (migration, parsing), E (persistence and repair), F
(repository and fork), the reference file from ../shared/sessions, and byte-level output shape."""

from __future__ import annotations

import json
import logging
import os
import re
import select
import signal
import stat
import threading
from pathlib import Path

import _processes
import pytest
from _processes import append_in_forked_child

from agentcore.session import Session, SessionError, SessionRepository
from agentcore.session.entries import encode_line
from agentcore.types import AssistantMessage, TextContent, Usage, UsageCost, UserMessage

SHARED = Path(__file__).resolve().parents[2] / "shared"
REFERENCE = SHARED / "sessions" / "pi-v1-large-session.jsonl"
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def U(text):
    return UserMessage([TextContent(text)], timestamp=1)


def A(text):
    return AssistantMessage(
        [TextContent(text)],
        api="anthropic-messages",
        provider="anthropic",
        model="claude-sonnet-4-5",
        usage=Usage(cost=UsageCost()),
    )


def write_lines(path, objects, tail=b"\n"):
    path.write_bytes(b"\n".join(json.dumps(o, separators=(",", ":")).encode() for o in objects) + tail)


V1_HEADER = {"type": "session", "id": "sess-1", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/w"}


def user_entry(text, **extra):
    return dict(
        {
            "type": "message",
            "timestamp": "2025-01-01T00:00:01.000Z",
            "message": {"role": "user", "content": text, "timestamp": 1},
        },
        **extra,
    )


def v3_entry(entry_id, parent, text="x"):
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": "2025-01-01T00:00:01.000Z",
        "message": {"role": "user", "content": text, "timestamp": 1},
    }


V3_HEADER = dict(V1_HEADER, version=3)


# --------------------------------------------------------------------------- D. migration and parsing


def test_v1_file_is_migrated(tmp_path):  # session §12 D36
    path = tmp_path / "v1.jsonl"
    write_lines(path, [V1_HEADER, user_entry("one"), user_entry("two")])
    with Session.open(path) as s:
        entries = s.entries()
        assert [len(e.id) for e in entries] == [8, 8]
        assert entries[0].parent_id is None and entries[1].parent_id == entries[0].id
    lines = path.read_bytes().decode().splitlines()
    header = json.loads(lines[0])
    assert header["version"] == 3 and list(header)[:5] == ["type", "version", "id", "timestamp", "cwd"]
    assert [list(json.loads(line))[:4] for line in lines[1:]] == [["type", "id", "parentId", "timestamp"]] * 2
    assert not list(tmp_path.glob("*.tmp"))
    with Session.open(path) as again:  # idempotent: ids stable once written
        assert [e.id for e in again.entries()] == [e.id for e in entries]


def test_v1_entry_ids_are_the_same_on_every_open(tmp_path):
    """A v1 file (the reference's, no ids) gets its entry ids at each read-only open and when a
    writable open rewrites it: an id read in one open names the same entry in the next, so a
    listing's reader can fork at it or move to it once the file is opened for writing."""
    repo = SessionRepository(tmp_path / "repo")
    directory = Path(repo.session_dir("/w"))
    directory.mkdir(parents=True)
    path = directory / "2025-01-01T00-00-00-000Z_sess-1.jsonl"
    write_lines(path, [V1_HEADER, user_entry("one"), user_entry("two"), user_entry("three")])
    with repo.open("sess-1", read_only=True) as first:
        ids = [e.id for e in first.entries()]
    with repo.open("sess-1", read_only=True) as second:
        assert [e.id for e in second.entries()] == ids
    with repo.fork("sess-1", ids[2]) as fork:  # the fork opens the v1 source again
        assert [e.id for e in fork.entries()] == ids[:2]
    with repo.open("sess-1") as written:  # migrated and rewritten in version 3
        assert [e.id for e in written.entries()] == ids
        written.move_to(ids[0])
    assert [json.loads(line).get("id") for line in path.read_bytes().splitlines()[1:4]] == ids


def test_v2_keeps_ids_and_hook_messages_become_custom(tmp_path):  # session §12 D37
    path = tmp_path / "v2.jsonl"
    hook = {
        "type": "message",
        "id": "def67890",
        "parentId": "abc12345",
        "timestamp": "2025-01-01T00:00:02.000Z",
        "message": {"role": "hookMessage", "customType": "h", "content": "c", "display": True, "timestamp": 2},
    }
    write_lines(path, [dict(V1_HEADER, version=2), v3_entry("abc12345", None), hook])
    with Session.open(path) as s:
        assert [(e.id, e.parent_id) for e in s.entries()] == [("abc12345", None), ("def67890", "abc12345")]
        assert s.get_entry("def67890").message.role == "custom"
    assert json.loads(path.read_text().splitlines()[0])["version"] == 3


def test_v1_compaction_index_becomes_id(tmp_path):  # session §12 D38
    path = tmp_path / "v1c.jsonl"
    compaction = {
        "type": "compaction",
        "timestamp": "2025-01-01T00:00:03.000Z",
        "summary": "S",
        "firstKeptEntryIndex": 2,
        "tokensBefore": 5,
    }
    write_lines(path, [V1_HEADER, user_entry("one"), user_entry("two"), compaction])
    with Session.open(path) as s:
        entries = s.entries()
        assert entries[2].first_kept_entry_id == entries[1].id
        assert "firstKeptEntryIndex" not in json.loads(s.storage.raw_line(entries[2].id))
        assert [m.content for m in s.build_context().messages[1:]] == ["two"]


@pytest.mark.parametrize(
    "content",
    [b"", b"\n\n", b"not json\n", b'{"type":"message","id":"a"}\n'],
    ids=["empty", "blank", "non-json", "headerless"],
)
def test_missing_or_bad_header_is_invalid_session(tmp_path, content):  # session §12 D39 (strict port)
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(SessionError) as info:
        Session.open(path)
    assert info.value.code == "invalid_session" and str(path) in str(info.value)
    assert path.read_bytes() == content  # the strict loader never discards data
    with pytest.raises(SessionError) as missing:
        Session.open(tmp_path / "missing.jsonl")
    assert missing.value.code == "not_found"


@pytest.mark.parametrize("read_only", [False, True])
@pytest.mark.parametrize(
    "header, says",
    [
        (dict(V1_HEADER, version=4), "upgrade agentcore"),  # a newer agentcore's file
        ({"kind": "header", "version": 4, "id": "s", "createdAt": 1, "cwd": "/w"}, "does not read"),  # pi v4
    ],
)
def test_a_newer_format_is_refused_saying_what_to_do(tmp_path, read_only, header, says):
    """A file in a format version this library does not read is a session file all the same: the
    error names the file and the version and says what to do; the file is left as it was."""
    path = tmp_path / "newer.jsonl"
    write_lines(path, [header, v3_entry("a1", None)])
    content = path.read_bytes()
    with pytest.raises(SessionError) as info:
        Session.open(path, read_only=read_only)
    message = str(info.value)
    assert info.value.code == "invalid_session" and f"{path}:1" in message
    assert "format version 4" in message and says in message and "not a session file" not in message
    assert path.read_bytes() == content


def test_strict_loader(tmp_path):  # session §12 D40
    path = tmp_path / "v2hdr.jsonl"
    write_lines(path, [dict(V1_HEADER, version=4)])
    with pytest.raises(SessionError) as info:
        Session.open(path)
    assert info.value.code == "invalid_session" and "version 4" in str(info.value)
    middle = tmp_path / "middle.jsonl"
    content = (
        b"\n".join(
            [
                json.dumps(V3_HEADER).encode(),
                json.dumps(v3_entry("a1", None)).encode(),
                b"not-json",
                json.dumps(v3_entry("a2", "a1")).encode(),
            ]
        )
        + b"\n"
    )
    middle.write_bytes(content)
    with pytest.raises(SessionError) as bad:
        Session.open(middle)
    assert bad.value.code == "invalid_entry" and bad.value.line == 3 and f"{middle}:3" in str(bad.value)
    assert middle.read_bytes() == content


def test_bad_envelope_and_duplicate_ids(tmp_path):  # session §3.5 strict entry rules
    path = tmp_path / "dup.jsonl"
    write_lines(path, [V3_HEADER, v3_entry("a1", None), v3_entry("a1", None), v3_entry("a3", "a1")])
    with pytest.raises(SessionError) as dup:
        Session.open(path)
    assert dup.value.code == "invalid_entry" and "duplicate" in str(dup.value) and dup.value.line == 3
    no_id = tmp_path / "noid.jsonl"
    write_lines(no_id, [V3_HEADER, {"type": "message", "parentId": None, "timestamp": "t"}, v3_entry("b", None)])
    with pytest.raises(SessionError) as info:
        Session.open(no_id)
    assert info.value.code == "invalid_entry" and info.value.line == 2


def test_dangling_leaf_is_invalid_session(tmp_path):  # session §3.2
    path = tmp_path / "leaf.jsonl"
    leaf = {"type": "leaf", "id": "l1", "parentId": "a1", "timestamp": "t", "targetId": "ghost"}
    write_lines(path, [V3_HEADER, v3_entry("a1", None), leaf])
    with pytest.raises(SessionError) as info:
        Session.open(path)
    assert info.value.code == "invalid_session" and "ghost" in str(info.value)


def test_damaged_payload_is_reported_with_its_line(tmp_path):  # lazy decode keeps strictness
    path = tmp_path / "payload.jsonl"
    good = json.dumps(v3_entry("a1", None), separators=(",", ":")).encode()
    broken = good.replace(b'"a1"', b'"a2"', 1).replace(b'"parentId":null', b'"parentId":"a1"')
    broken = broken.replace(b'"content":"x"', b'"content":"x"]')
    path.write_bytes(
        json.dumps(V3_HEADER).encode()
        + b"\n"
        + good
        + b"\n"
        + broken
        + b"\n"
        + good.replace(b'"a1"', b'"a3"', 1)
        + b"\n"
    )
    with pytest.raises(SessionError) as verified:
        Session.open(path, verify=True)
    assert verified.value.code == "invalid_entry" and verified.value.line == 3
    with Session.open(path, read_only=True) as lazy:  # envelope fine: the problem shows when read
        with pytest.raises(SessionError) as info:
            lazy.get_entry("a2")
        assert info.value.line == 3 and f"{path}:3" in str(info.value)


@pytest.mark.parametrize("read_only", [False, True])
def test_a_migrated_file_reports_the_line_the_entry_is_on(tmp_path, read_only):
    """Opening a v2 file for writing rewrites it as v3 without its blank lines; errors found later
    named the line the entry had before the rewrite."""
    path = tmp_path / "v2.jsonl"
    bad = dict(v3_entry("a2", "a1"), message={"role": "assistant", "content": 42, "timestamp": 1})
    lines = [dict(V1_HEADER, version=2), v3_entry("a1", None), bad]
    path.write_bytes(b"\n\n".join(json.dumps(o).encode() for o in lines) + b"\n")  # a blank line between each
    with Session.open(path, read_only=read_only) as s:
        with pytest.raises(SessionError) as info:
            s.get_entry("a2")
    on_disk = path.read_bytes().split(b"\n")
    assert info.value.code == "invalid_entry" and b'"a2"' in on_disk[info.value.line - 1]
    assert f"{path}:{info.value.line}:" in str(info.value)
    assert info.value.line == (5 if read_only else 3)  # read only: the file is not rewritten


# --------------------------------------------------------------------------- E. persistence and repair


def test_missing_final_newline_is_added(tmp_path):  # session §12 E41
    path = tmp_path / "nl.jsonl"
    write_lines(path, [V3_HEADER, v3_entry("first", None)], tail=b"")
    with Session.open(path) as s:
        assert path.read_bytes().endswith(b"}\n")
        s.append_message(U("second"))
    with Session.open(path) as s:
        assert [e.id for e in s.entries()][0] == "first" and len(s.entries()) == 2
        assert s.entries()[1].parent_id == "first"


@pytest.mark.parametrize("torn", [b'{"type":"message","id":"x', b'{"type":"message"', b"{"])
def test_torn_last_line_is_truncated(tmp_path, torn):  # session §12 E42
    path = tmp_path / "torn.jsonl"
    write_lines(path, [V3_HEADER, v3_entry("first", None)])
    prefix = path.read_bytes()
    path.write_bytes(prefix + torn)
    with Session.open(path) as s:
        assert path.read_bytes() == prefix
        assert [e.id for e in s.entries()] == ["first"]
        nxt = s.append_message(U("next"))
    with Session.open(path) as s:
        assert [e.id for e in s.entries()] == ["first", nxt]


def test_torn_last_line_of_an_old_version_file_is_logged_when_the_rewrite_drops_it(tmp_path, caplog):
    path = tmp_path / "torn-v1.jsonl"
    write_lines(path, [V1_HEADER, user_entry("one")])
    path.write_bytes(path.read_bytes() + b'{"type":"message","timest')
    with caplog.at_level(logging.WARNING, logger="agentcore.session.jsonl"):
        with Session.open(path) as s:
            assert [e.message.content for e in s.entries()] == ["one"]
    assert len(path.read_bytes().splitlines()) == 2 and path.read_bytes().endswith(b"}\n")  # v3, no torn line
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert f"{path}: the last line was torn" in caplog.records[0].getMessage()
    assert "line 3" in caplog.records[0].getMessage()


@pytest.mark.parametrize("read_only", [False, True])
@pytest.mark.parametrize("damaged", [b'{"type":"mess\n', b'{"type":"custom","id":"c","customType":"x",}\n'])
def test_complete_invalid_last_line_is_corruption_not_a_torn_write(tmp_path, read_only, damaged):  # §4.4
    path = tmp_path / "damaged.jsonl"
    write_lines(path, [V3_HEADER, v3_entry("first", None)])
    content = path.read_bytes() + damaged  # ends in "\n": written whole, so not cut short by a crash
    path.write_bytes(content)
    with pytest.raises(SessionError) as info:
        Session.open(path, read_only=read_only)
    assert info.value.code == "invalid_entry" and info.value.line == 3 and f"{path}:3" in str(info.value)
    assert "not an interrupted write" in str(info.value)
    assert path.read_bytes() == content


def test_torn_last_line_after_blank_lines_is_still_repaired(tmp_path):  # only the missing "\n" makes it torn
    path = tmp_path / "torn3.jsonl"
    write_lines(path, [V3_HEADER, v3_entry("first", None)])
    prefix = path.read_bytes() + b"\n"
    path.write_bytes(prefix + b'{"type":"custom","id":"c",')
    with Session.open(path) as s:
        assert [e.id for e in s.entries()] == ["first"]
    assert path.read_bytes() == prefix


def test_read_only_open_never_repairs(tmp_path):  # session §13 readers tolerate a growing tail
    path = tmp_path / "ro.jsonl"
    write_lines(path, [V3_HEADER, v3_entry("first", None)])
    content = path.read_bytes() + b'{"type":"mess'
    path.write_bytes(content)
    with Session.open(path, read_only=True) as s:
        assert [e.id for e in s.entries()] == ["first"]
        with pytest.raises(SessionError) as info:
            s.append_message(U("x"))
        assert info.value.code == "storage" and "read-only" in str(info.value)
    assert path.read_bytes() == content


def test_malformed_interior_line_leaves_file_identical(tmp_path):  # session §12 E43
    path = tmp_path / "interior.jsonl"
    content = (
        json.dumps(V3_HEADER)
        + "\n"
        + json.dumps(v3_entry("a", None))
        + "\n{broken\n"
        + json.dumps(v3_entry("b", "a"))
        + "\n"
    ).encode()
    path.write_bytes(content)
    with pytest.raises(SessionError) as info:
        Session.open(path)
    assert info.value.code == "invalid_entry" and info.value.line == 3
    assert path.read_bytes() == content


def test_repair_failure_is_a_storage_error(tmp_path, monkeypatch):  # session §12 E44/E45
    path = tmp_path / "fail.jsonl"
    write_lines(path, [V3_HEADER, v3_entry("first", None)], tail=b"")
    content = path.read_bytes()

    def refuse(fd, data):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "write", refuse)
    with pytest.raises(SessionError) as info:
        Session.open(path)
    monkeypatch.undo()
    assert info.value.code == "storage" and isinstance(info.value.__cause__, PermissionError)
    assert path.read_bytes() == content and not list(tmp_path.glob("*.tmp"))
    with Session.open(path) as s:  # the lock was released with the failed open
        assert len(s.entries()) == 1


def test_migration_failure_leaves_original(tmp_path, monkeypatch):  # atomic rewrite
    path = tmp_path / "v1.jsonl"
    write_lines(path, [V1_HEADER, user_entry("one")])
    content = path.read_bytes()

    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(SessionError) as info:
        Session.open(path)
    assert info.value.code == "storage" and "unchanged" in str(info.value)
    assert path.read_bytes() == content and not list(tmp_path.glob("*.tmp"))


@pytest.mark.skipif(os.name == "nt", reason="POSIX permission bits and symlinks")
def test_migration_keeps_a_symlink_a_link_and_a_private_file_private(tmp_path):
    """The migration rewrote ``path + ".tmp"`` (opened with O_TRUNC, following a link planted
    there) and renamed it over the path: a symlinked session became a regular file (its target
    stayed version 1 and never saw the new entries), and a 0600 file became 0644."""
    target = tmp_path / "private" / "v1.jsonl"
    target.parent.mkdir()
    write_lines(target, [V1_HEADER, user_entry("one")])
    target.chmod(0o600)
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    planted = tmp_path / "elsewhere.txt"
    planted.write_text("keep me")
    (tmp_path / "private" / "v1.jsonl.tmp").symlink_to(planted)  # what the old name would have followed
    with Session.open(link) as s:
        s.append_message(U("two"))
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert json.loads(target.read_text().splitlines()[0])["version"] == 3
    assert len(target.read_text().splitlines()) == 3  # the header, "one" and the new "two"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert planted.read_text() == "keep me"


def test_a_v1_line_migration_cannot_write_names_its_line(tmp_path):
    """A v1 line holding ``1e999`` (which JSON reads as infinity) failed the migration with "inf is
    not JSON", naming neither the file nor the line."""
    path = tmp_path / "v1.jsonl"
    write_lines(path, [V1_HEADER, user_entry("one")])
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(user_entry("two"))[:-1] + ', "cost": 1e999}\n')
    content = path.read_bytes()
    with pytest.raises(SessionError) as info:
        Session.open(path)
    assert info.value.code == "invalid_entry" and str(info.value).startswith(f"{path}:3: cannot migrate it (inf")
    assert path.read_bytes() == content


def test_failed_append_is_rolled_back(tmp_path, monkeypatch):  # one whole line or nothing
    s = Session.create(tmp_path / "s.jsonl", cwd="/w")
    first = s.append_message(U("first"))
    real_write = os.write
    calls = []

    def half(fd, data):
        if not calls:
            calls.append(1)
            return real_write(fd, bytes(data)[:10])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", half)
    with pytest.raises(SessionError) as info:
        s.append_message(U("lost"))
    monkeypatch.undo()
    assert info.value.code == "storage" and s.leaf_id == first
    second = s.append_message(U("second"))
    s.close()
    with Session.open(tmp_path / "s.jsonl") as again:
        assert [e.id for e in again.entries()] == [first, second]


def _foreign_line(entry_id, parent):
    entry = {"type": "custom", "id": entry_id, "parentId": parent, "timestamp": "2030-01-01T00:00:00.000Z"}
    return encode_line(dict(entry, customType="other", data=1))


def test_appends_after_another_writer_are_read_back(tmp_path):  # the reference appends without a lock
    path = tmp_path / "ext.jsonl"
    s = Session.create(path, cwd="/w")
    first = s.append_message(U("A"))
    with open(path, "a") as other:  # another process's append: a plain O_APPEND write, no lock
        other.write(_foreign_line("other001", first).decode())
    second = s.append_message(U("B"))
    third = s.append_message(U("C"))
    s.storage._cache.clear()  # read B and C back from the file, not from the decode cache
    assert [s.get_entry(i).message.content[0].text for i in (second, third)] == ["B", "C"]
    assert [m.content[0].text for m in s.build_context().messages] == ["A", "B", "C"]
    assert [s.storage._nodes[i].line for i in (first, second, third)] == [2, 4, 5]  # line numbers count it
    s.close()
    with Session.open(path) as again:
        assert [e.id for e in again.entries()] == [first, "other001", second, third]


@pytest.mark.parametrize("fails", ["write", "fsync"])
def test_failed_append_never_cuts_another_writers_lines(tmp_path, monkeypatch, fails):
    path = tmp_path / "ext.jsonl"
    s = Session.create(path, cwd="/w", fsync="always")
    first = s.append_message(U("A"))
    foreign = _foreign_line("other001", first)
    with open(path, "ab") as other:
        other.write(foreign)
    before = path.read_bytes()

    def refuse(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, fails, refuse)
    with pytest.raises(SessionError) as info:
        s.append_message(U("lost"))
    monkeypatch.undo()
    assert info.value.code == "storage" and s.leaf_id == first
    assert path.read_bytes() == before  # the other writer's line is kept; only our own bytes are cut
    s.close()


@pytest.mark.parametrize("policy", ["never", "always", "close"])
def test_fsync_policies(tmp_path, monkeypatch, policy):  # brief: fsync never | always | close
    synced = []
    real = os.fsync
    s = Session.create(tmp_path / f"{policy}.jsonl", cwd="/w", fsync=policy)
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd)))
    s.append_message(U("a"))
    s.append_message(U("b"))
    appended = len(synced)
    s.close()
    assert (appended, len(synced)) == {"never": (0, 0), "always": (2, 3), "close": (0, 1)}[policy]
    with pytest.raises(ValueError):
        Session.create(tmp_path / "x.jsonl", fsync="sometimes")


def test_create_refuses_existing_file(tmp_path):
    path = tmp_path / "s.jsonl"
    Session.create(path, cwd="/w").close()
    before = path.read_bytes()
    with pytest.raises(SessionError) as info:
        Session.create(path, cwd="/w")
    assert info.value.code == "already_exists" and path.read_bytes() == before


def test_session_stores_text_with_lone_surrogates(tmp_path):
    # A streamed answer whose emoji was split between two deltas ("\ud83d" then "\ude00", as
    # servers counting UTF-16 units send it) holds two surrogate code points; a truncated one holds
    # one. JSON.stringify (the reference writer) escapes them; here the append raised
    # UnicodeEncodeError (not even a SessionError) and the message was never saved.
    from agentcore.session import Session
    from agentcore.session.entries import encode_line
    from agentcore.types import UserMessage

    split_pair = "smile \ud83d" + "\ude00 ok"
    lone = "cut \ud83d"
    line = encode_line({"text": lone})
    assert b"\\ud83d" in line and json_loads(line) == {"text": lone}
    path = tmp_path / "s.jsonl"
    session = Session.create(path, cwd="/w")
    try:
        session.append_message(UserMessage(split_pair))
        session.append_message(UserMessage(lone))
    finally:
        session.close()
    path.read_bytes().decode("utf-8")  # the file stays valid UTF-8
    reopened = Session.open(path)
    try:
        texts = [
            e.message.content[0].text if isinstance(e.message.content, list) else e.message.content
            for e in reopened.get_branch()
            if e.type == "message"
        ]
    finally:
        reopened.close()
    assert texts == ["smile \U0001f600 ok", lone]


def json_loads(line):
    import json

    return json.loads(line)


# --------------------------------------------------------------------------- output shape


def test_written_file_has_the_reference_shape(tmp_path):  # issue 5: byte-compatible in shape
    path = tmp_path / "shape.jsonl"
    with Session.create(path, cwd="/w/proj", session_id="abc") as s:
        u = s.append_message(U("héllo ✓"))
        s.append_message(
            AssistantMessage(
                [TextContent("hi")],
                api="anthropic-messages",
                provider="anthropic",
                model="m",
                usage=Usage(1, 2, 0, 0, 3, UsageCost(0.000009, 0.5, 0, 0, 0.500009)),
            )
        )
        s.append_thinking_level_change("high")
        s.append_model_change("openai", "gpt-4")
        s.append_label(u, "first")
        s.move_to(u)
        s.set_name("n")
    raw = path.read_bytes()
    assert raw.endswith(b"\n") and b"\r" not in raw
    lines = raw.decode("utf-8").splitlines()
    header = json.loads(lines[0])
    assert list(header) == ["type", "version", "id", "timestamp", "cwd"]
    assert header["version"] == 3 and header["id"] == "abc" and ISO.match(header["timestamp"])
    for line in lines[1:]:
        entry = json.loads(line)
        assert list(entry)[:4] == ["type", "id", "parentId", "timestamp"]
        assert ISO.match(entry["timestamp"]) and len(entry["id"]) == 8
        assert encode_line(entry) == (line + "\n").encode("utf-8")  # compact, stable, no spaces
    assert "héllo ✓" in lines[1]  # no ASCII escaping, like JSON.stringify
    # numbers as JavaScript writes them: 0 not 0.0, 0.000009 not 9e-06
    assert '"cost":{"input":0.000009,"output":0.5,"cacheRead":0,"cacheWrite":0,"total":0.500009}' in lines[2]
    leaf = json.loads(lines[-2])
    assert (leaf["type"], leaf["targetId"], list(leaf)[4:]) == ("leaf", u, ["targetId"])
    assert list(json.loads(lines[3])) == ["type", "id", "parentId", "timestamp", "thinkingLevel"]
    assert list(json.loads(lines[4]))[4:] == ["provider", "modelId"]
    assert list(json.loads(lines[5]))[4:] == ["targetId", "label"]


def test_unknown_fields_survive(tmp_path):  # session §2: unknown extra fields preserved
    path = tmp_path / "extra.jsonl"
    entry = dict(v3_entry("a1", None), futureField={"x": [1, 2]})
    entry["message"]["futureMessageField"] = True
    strange = {
        "type": "future_entry",
        "id": "f1",
        "parentId": "a1",
        "timestamp": "2025-01-01T00:00:02.000Z",
        "payload": {"k": "v"},
    }
    write_lines(path, [dict(V3_HEADER, metadata={"m": 1}, futureHeader=1), entry, strange])
    with Session.open(path) as s:
        assert s.header.metadata == {"m": 1} and s.header.extra == {"futureHeader": 1}
        e = s.get_entry("a1")
        assert e.extra == {"futureField": {"x": [1, 2]}} and e.message.extra == {"futureMessageField": True}
        assert encode_line(e.to_dict()) == encode_line(entry)
        assert s.get_entry("f1").type == "future_entry" and s.get_entry("f1").to_dict() == strange
        assert s.leaf_id == "f1"
        forked = SessionRepository(tmp_path / "repo").fork(s)
        assert encode_line(forked.get_entry("a1").to_dict()) == encode_line(entry)
        forked.close()


# --------------------------------------------------------------------------- what the reference reads


def reference_read(path):
    """How the reference's SessionManager reads a v3 file: the leaf is the LAST entry; the context is
    the messages on its root path; entry types it does not know (``leaf``) contribute nothing."""
    entries = [json.loads(line) for line in path.read_text().splitlines()[1:] if line.strip()]
    by_id = {e["id"]: e for e in entries}
    leaf = entries[-1]["id"] if entries else None
    path_ids = []
    while leaf is not None and leaf in by_id:
        path_ids.append(leaf)
        leaf = by_id[leaf]["parentId"]
    texts = [by_id[i]["message"]["content"][0]["text"] for i in reversed(path_ids) if by_id[i]["type"] == "message"]
    return texts, entries


def reference_append(path, entry_id, text):
    """What the reference does on its next append: a child of the last entry of the file."""
    texts, entries = reference_read(path)
    entry = {
        "type": "message",
        "id": entry_id,
        "parentId": entries[-1]["id"],
        "timestamp": "2030-01-01T00:00:00.000Z",
        "message": {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 9},
    }
    with open(path, "ab") as handle:
        handle.write(encode_line(entry))


def tree_ids(session):
    out, stack = [], list(session.get_tree())
    while stack:
        node = stack.pop()
        out.append(node.entry.id)
        stack.extend(node.children)
    return out


def _four_turns(path):
    s = Session.create(path, cwd="/w")
    ids = [s.append_message(m) for m in (U("u1"), A("a1"), U("u2"), A("a2"))]
    return s, ids


def test_a_move_is_read_by_the_reference_as_the_branch_moved_to(tmp_path):  # issue 10 item 3
    path = tmp_path / "moved.jsonl"
    s, (u1, a1, u2, a2) = _four_turns(path)
    s.move_to(a1)
    assert reference_read(path)[0] == ["u1", "a1"]  # before: the leaf entry hung under a2: u1 a1 u2 a2
    s.move_to(None)
    assert reference_read(path)[0] == []
    s.move_to(u2, summary="explored")  # a summary hangs at the target: both readers agree there too
    assert reference_read(path)[0] == ["u1", "a1", "u2"]
    s.close()
    with Session.open(path) as again:
        assert [e.id for e in again.get_branch() if e.type == "message"] == [u1, a1, u2]


def test_reference_appends_after_a_move_hang_on_the_branch_moved_to(tmp_path):  # issue 10 items 3, 4
    path = tmp_path / "moved.jsonl"
    s, (u1, a1, u2, a2) = _four_turns(path)
    s.move_to(a1)
    s.close()
    reference_append(path, "ref00001", "u3")
    reference_append(path, "ref00002", "a3")
    assert reference_read(path)[0] == ["u1", "a1", "u3", "a3"]
    with Session.open(path) as again:
        assert again.leaf_id == "ref00002"
        assert [m.content[0].text for m in again.build_context().messages] == ["u1", "a1", "u3", "a3"]
        leaf_entry = again.entries()[4].id
        # every entry of the file is in the tree, the leaf entry the reference appended under too
        assert sorted(tree_ids(again)) == sorted([u1, a1, u2, a2, leaf_entry, "ref00001", "ref00002"])
        assert [e.id for e in again.children(a1)] == [u2, leaf_entry]
        assert [e.id for e in again.children(leaf_entry)] == ["ref00001"]
        nxt = again.append_message(U("u4"))
        assert again.get_entry(nxt).parent_id == "ref00002"


def test_old_leaf_entries_keep_reading_and_what_hangs_under_them_is_in_the_tree(tmp_path):  # issue 10.4
    """A file from before 10.3: the leaf entry is parented at the leaf it left (a2), and the reference
    appended two entries under it. The reference shows 7 nodes; the tree lost 3 of them."""
    path = tmp_path / "old.jsonl"
    ts = "2025-01-01T00:00:0{}.000Z"
    lines = [V3_HEADER]
    parent = None
    for n, text in enumerate(["u1", "a1", "u2", "a2"]):
        lines.append(dict(v3_entry(text, parent, text), timestamp=ts.format(n)))
        parent = text
    lines.append({"type": "leaf", "id": "L", "parentId": "a2", "timestamp": ts.format(5), "targetId": "a1"})
    lines.append(dict(v3_entry("u3", "L", "u3"), timestamp=ts.format(6)))
    lines.append(dict(v3_entry("a3", "u3", "a3"), timestamp=ts.format(7)))
    lines.append({"type": "leaf", "id": "L2", "parentId": "a3", "timestamp": ts.format(8), "targetId": "a3"})
    write_lines(path, lines)
    with Session.open(path) as s:
        assert s.leaf_id == "a3"
        assert [m.content for m in s.build_context().messages] == ["u1", "a1", "u2", "a2", "u3", "a3"]
        assert sorted(tree_ids(s)) == sorted(["u1", "a1", "u2", "a2", "L", "u3", "a3"])  # not L2: nothing under it
        assert [e.id for e in s.children("a2")] == ["L"]
        assert [e.id for e in s.get_branch()] == ["u1", "a1", "u2", "a2", "L", "u3", "a3"]


def test_fork_through_a_leaf_entry_ends_where_its_path_ends(tmp_path):  # issue 10.4 class: fork copies such a path
    path = tmp_path / "old.jsonl"
    write_lines(
        path,
        [
            V3_HEADER,
            v3_entry("u1", None),
            v3_entry("a1", "u1"),
            v3_entry("u2", "a1"),
            {"type": "leaf", "id": "L", "parentId": "u2", "timestamp": "t", "targetId": "u1"},
            v3_entry("u3", "L", "u3"),
        ],
    )
    repo = SessionRepository(tmp_path / "repo")
    with Session.open(path, read_only=True) as s:
        with repo.fork(s, entry_id="u3") as forked:  # before u3: ends at L, which targets u1
            assert [e.id for e in forked.get_branch()] == ["u1", "a1", "u2"]  # where u3 was asked
        with repo.fork(s, entry_id="u3", position="at") as forked:
            assert [e.id for e in forked.get_branch()] == ["u1", "a1", "u2", "L", "u3"]


def test_entries_on_a_parent_cycle_are_in_the_tree(tmp_path):  # issue 10.4 class: no entry vanishes
    path = tmp_path / "cycle.jsonl"
    write_lines(
        path, [V3_HEADER, v3_entry("r", None), v3_entry("c1", "c2"), v3_entry("c2", "c1"), v3_entry("tip", "r")]
    )
    with Session.open(path, read_only=True) as s:
        assert sorted(tree_ids(s)) == ["c1", "c2", "r", "tip"]
        assert [n.entry.id for n in s.get_tree()] == ["r", "c1"]


# --------------------------------------------------------------------------- the reference file


@pytest.fixture
def reference_copy(tmp_path):
    if not REFERENCE.exists():
        pytest.skip("shared reference session not available")
    path = tmp_path / "reference.jsonl"
    path.write_bytes(REFERENCE.read_bytes())  # a temporary copy: never stored in the repository
    return path


def test_reference_v1_session_migrates(reference_copy):  # issue 5: the reference file
    original = [json.loads(line) for line in REFERENCE.read_text(encoding="utf-8").splitlines() if line.strip()]
    originals = [o["message"] for o in original[1:] if o["type"] == "message"]
    assert len(originals) == 914
    with Session.open(reference_copy) as s:
        entries = s.entries()
        assert len(entries) == len(original) - 1
        assert entries[0].parent_id is None
        assert all(b.parent_id == a.id for a, b in zip(entries, entries[1:]))
        assert s.leaf_id == entries[-1].id
        context = s.build_context()
        assert [m.to_dict() for m in context.messages] == originals
        assert context.model.to_dict() == {"provider": "anthropic", "modelId": "claude-sonnet-4-5"}
        assert s.get_session_stats().message_count == 914
    migrated = reference_copy.read_text(encoding="utf-8").splitlines()
    header = json.loads(migrated[0])
    assert header["version"] == 3 and header["id"] == original[0]["id"]
    assert header["provider"] == "anthropic"  # unknown header keys kept
    for old, new_line in zip(original[1:], migrated[1:]):
        new = json.loads(new_line)
        assert {k: v for k, v in new.items() if k not in ("id", "parentId")} == old
    with Session.open(reference_copy, verify=True) as again:  # a v3 file now; reopens unchanged
        assert [m.to_dict() for m in again.build_context().messages] == originals
    assert reference_copy.read_text(encoding="utf-8").splitlines() == migrated


def test_reference_messages_round_trip_byte_for_byte(reference_copy):  # shape compatibility
    for line in REFERENCE.read_bytes().splitlines():
        entry = json.loads(line)
        assert encode_line(entry) == line + b"\n"


# --------------------------------------------------------------------------- F. repository and fork


def test_repository_create_and_list(tmp_path):  # session §12 F51
    repo = SessionRepository(tmp_path / "sessions")
    s = repo.create(cwd="/home/user/my-project", session_id="X")
    assert "--home-user-my-project--" in s.path and s.path.endswith("_X.jsonl") and os.path.exists(s.path)
    s.append_message(U("hello"))
    s.set_name("first try")
    other = repo.create(cwd="/other/place", session_id="Y")
    assert [i.id for i in repo.list(cwd="/home/user/my-project")] == ["X"]
    assert {i.id for i in repo.list()} == {"X", "Y"}
    assert repo.list(cwd="/nowhere") == []
    info = repo.list(cwd="/home/user/my-project")[0]
    assert (info.name, info.message_count, info.cwd) == ("first try", 1, "/home/user/my-project")
    s.close()
    other.close()


def test_repository_open_and_ids(tmp_path):  # session §12 F52
    repo = SessionRepository(tmp_path)
    with repo.create(cwd="/p", session_id="same") as s:
        s.append_message(U("x"))
    info = repo.list(cwd="/p")[0]
    with repo.open(info, read_only=True) as opened:
        assert opened.id == info.id and opened.cwd == info.cwd
    with repo.open("same") as by_id:
        assert len(by_id.entries()) == 1
    with pytest.raises(SessionError) as dup:
        repo.create(cwd="/p", session_id="same")
    assert dup.value.code == "already_exists"
    repo.create(cwd="/q", session_id="same").close()  # same id in another cwd is fine
    with pytest.raises(SessionError) as bad:
        repo.create(cwd="/p", session_id="../escape")
    assert bad.value.code == "invalid_payload"


def test_repository_concurrent_create_of_one_id(tmp_path):  # session §12 F52 (two concurrent creates)
    import threading

    repo = SessionRepository(tmp_path)
    barrier = threading.Barrier(2)
    results = []

    def create():
        barrier.wait()
        try:
            results.append(repo.create(cwd="/p", session_id="dup"))
        except SessionError as exc:
            results.append(exc.code)

    threads = [threading.Thread(target=create) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r if isinstance(r, str) else "ok" for r in results) == ["already_exists", "ok"]
    assert len(repo.list(cwd="/p")) == 1
    for r in results:
        if not isinstance(r, str):
            r.close()


def test_repository_delete(tmp_path):  # session §12 F53
    repo = SessionRepository(tmp_path)
    repo.create(cwd="/p", session_id="gone").close()
    info = repo.list()[0]
    repo.delete(info)
    with pytest.raises(SessionError) as info_err:
        repo.open("gone")
    assert info_err.value.code == "not_found"
    repo.delete(info)  # idempotent
    held = repo.create(cwd="/p", session_id="held")
    with pytest.raises(SessionError):
        repo.delete("held")  # an open writer holds it
    held.close()
    repo.delete("held")
    assert repo.list() == []


def test_repository_delete_refuses_what_is_not_its_session(tmp_path):  # session §12 F53
    repo = SessionRepository(tmp_path / "repo")
    kept = repo.create(cwd="/p", session_id="kept")
    kept.close()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    precious = outside / "precious.txt"
    precious.write_text("keep me")
    foreign = Session.create(outside / "other.jsonl", cwd="/p")  # a session, but of no repository
    foreign.close()
    notes = Path(kept.path).parent / "notes.jsonl"  # inside, but not a session file
    notes.write_text('{"todo": 1}\n')
    inner_dir = Path(kept.path).parent / "dir.jsonl"
    inner_dir.mkdir()
    for path, why in [
        (precious, "not inside the repository"),
        (outside / "other.jsonl", "not inside the repository"),
        (outside, "not inside the repository"),
        (notes, "not a session header"),
        (inner_dir, "not a file"),
    ]:
        with pytest.raises(SessionError) as info:
            repo.delete(str(path))
        assert info.value.code == "invalid_session" and str(path) in str(info.value), path
        assert why in str(info.value) and "nothing was deleted" in str(info.value)
    assert precious.read_text() == "keep me" and notes.exists() and inner_dir.is_dir()
    assert (outside / "other.jsonl").exists()
    repo.delete(kept.path)  # a session file of the repository, by path
    assert not os.path.exists(kept.path)


def test_repository_list_counts_messages_of_any_valid_file(tmp_path):  # not only compact, "type" first
    repo = SessionRepository(tmp_path)
    with repo.create(cwd="/p", session_id="loose") as s:
        s.append_message(U("one"))
        s.append_message(A("two"))
        s.append_custom("note", 1)
        s.set_name("loose one")
        path = Path(s.path)
    compact = repo.list()[0]
    lines = path.read_bytes().splitlines()
    rewritten = [lines[0]]
    for line in lines[1:]:
        entry = json.loads(line)
        entry = {"id": entry.pop("id"), **entry}  # another key order, and spaces after ":" and ","
        rewritten.append(json.dumps(entry).encode())
    path.write_bytes(b"\n".join(rewritten) + b"\n")
    with Session.open(path, read_only=True) as again:  # still a valid session file
        assert len(again.entries()) == 4
    info = repo.list()[0]
    assert (compact.message_count, compact.name) == (2, "loose one")
    assert (info.message_count, info.name) == (2, "loose one")


@pytest.mark.parametrize("layout", ["compact", "crlf", "loose"])
@pytest.mark.parametrize("where", [2, 4])  # the second message line (lines follow it), the last line
def test_repository_list_does_not_count_a_damaged_message_line(tmp_path, layout, where):
    """A message line cut short (it ends in a newline, so opening the session reports it as damage)
    is no message in the listing, whichever way the file's lines are counted."""
    repo = SessionRepository(tmp_path)
    with repo.create(cwd="/p", session_id="damaged") as s:
        for text in ("one", "two", "three"):
            s.append_message(U(text))
        path = Path(s.path)
    lines = path.read_bytes().split(b"\n")[:-1]
    lines[where - 1] = lines[where - 1][:60]  # '{"type":"message","id":...' without its end
    if layout == "loose":  # a header another writer formatted: the file is read line by line
        lines[0] = json.dumps(json.loads(lines[0])).encode()
    end = b"\r\n" if layout == "crlf" else b"\n"
    path.write_bytes(end.join(lines) + end)
    with pytest.raises(SessionError) as info:
        Session.open(path, read_only=True)
    assert info.value.code == "invalid_entry" and info.value.line == where
    assert [i.message_count for i in repo.list()] == [2]


def test_fork(tmp_path):  # session §12 F54 (+ C35 label handling)
    repo = SessionRepository(tmp_path / "repo")
    src = repo.create(cwd="/p", session_id="src")
    u1 = src.append_message(U("u1"))
    a1 = src.append_message(A("a1"))
    src.append_label(u1, "start")
    src.append_label(a1, "answer")
    u2 = src.append_message(U("u2"))
    src.append_label(u2, "cut")
    leaf = src.leaf_id

    before = repo.fork(src, u2, cwd="/elsewhere")
    assert [e.id for e in before.entries() if e.type == "message"] == [u1, a1]
    assert before.labels == {u1: "start", a1: "answer"}  # re-created label entries; u2's label is gone
    assert [e.type for e in before.entries()] == ["message", "message", "label", "label"]
    assert before.header.parent_session == src.path and before.cwd == "/elsewhere"
    assert [m.role for m in before.build_context().messages] == ["user", "assistant"]
    everything = repo.fork(src)
    assert [e.id for e in everything.entries()] == [e.id for e in src.entries()]
    assert [everything.storage.raw_line(i) for i in everything.storage.entry_ids()] == [
        src.storage.raw_line(i) for i in src.storage.entry_ids()
    ]
    at = repo.fork(src, a1, position="at")
    assert [e.id for e in at.entries() if e.type == "message"] == [u1, a1]
    for target in (a1, "unknown"):
        with pytest.raises(SessionError) as info:
            repo.fork(src, target)
        assert info.value.code == "invalid_fork_target"
    assert src.leaf_id == leaf
    for s in (before, everything, at, src):
        s.close()
    assert len(repo.list()) == 4


def test_fork_publication_failure_leaves_nothing(tmp_path, monkeypatch):  # session §12 F58
    repo = SessionRepository(tmp_path)
    src = repo.create(cwd="/p", session_id="src")
    src.append_message(U("u"))

    def refuse(*args, **kwargs):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "link", refuse)
    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(SessionError) as info:
        repo.fork(src)
    monkeypatch.undo()
    assert info.value.code == "storage"
    assert [i.id for i in repo.list()] == ["src"]
    assert not list(tmp_path.rglob("*.tmp"))
    src.close()


def test_list_order_newest_first(tmp_path):  # session §12 F59 (by header creation time)
    repo = SessionRepository(tmp_path)
    directory = tmp_path / "--p--"
    directory.mkdir()
    for name, created in (("older", "2025-01-01T00:00:01.000Z"), ("newer", "2025-01-01T00:00:02.000Z")):
        write_lines(directory / f"x_{name}.jsonl", [dict(V3_HEADER, id=name, cwd="/p", timestamp=created)])
    (directory / "x_junk.jsonl").write_text("not a session\n")
    listed = repo.list()
    assert [i.id for i in listed] == ["newer", "older"]  # invalid files are skipped
    assert [i.id for i in repo.list(cwd="/p")] == ["newer", "older"]
    assert listed[0].modified == os.stat(listed[0].path).st_mtime


def test_list_order_is_by_time_whatever_the_header_timestamp_form(tmp_path):  # session §12 F59
    repo = SessionRepository(tmp_path)
    directory = tmp_path / "--p--"
    directory.mkdir()
    for name, created in (
        ("first", "2025-01-01T00:00:01Z"),  # no fraction: before .500 of the same second
        ("second", "2025-01-01T00:00:01.500Z"),
        ("third", "2025-01-01T02:00:02+02:00"),  # 00:00:02 UTC
    ):
        write_lines(directory / f"x_{name}.jsonl", [dict(V3_HEADER, id=name, cwd="/p", timestamp=created)])
    assert [i.id for i in repo.list(cwd="/p")] == ["third", "second", "first"]


_OUT_OF_DESCRIPTORS = """
import json, os, resource, sys
from agentcore.session import SessionError, SessionRepository
repo = SessionRepository(sys.argv[1])
resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
held = []
try:
    while True:
        held.append(os.open(os.devnull, os.O_RDONLY))
except OSError:
    pass
outcomes = {}
for name, call in (("list", repo.list), ("create", lambda: repo.create(cwd="/p/new"))):
    try:
        outcomes[name] = repr(call())
    except SessionError as exc:
        outcomes[name] = [exc.code, str(exc)]
    except OSError as exc:
        outcomes[name] = ["OSError", str(exc)]
for fd in held:
    os.close(fd)
outcomes["listed after"] = [info.id for info in repo.list()]
print(json.dumps(outcomes))
"""


@pytest.mark.skipif(os.name != "posix", reason="RLIMIT_NOFILE is POSIX")
def test_repository_out_of_file_descriptors_is_an_error_not_an_empty_list(tmp_path):  # EMFILE
    """With every descriptor of the process in use (EMFILE), list() returned [] (the glob took the
    failure for "no files": ``--continue`` then says there is nothing to continue) and create()
    raised a bare OSError from the directory lock."""
    import subprocess
    import sys

    repo = SessionRepository(tmp_path)
    with repo.create(cwd="/p", session_id="kept"):
        pass
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    done = subprocess.run(
        [sys.executable, "-c", _OUT_OF_DESCRIPTORS, str(tmp_path)], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    outcomes = json.loads(done.stdout)
    assert outcomes["list"][0] == "storage" and str(tmp_path) in outcomes["list"][1]
    assert outcomes["create"][0] == "storage" and "--p-new--" in outcomes["create"][1]
    assert outcomes["listed after"] == ["kept"]  # nothing was created by the failed create


def test_open_indexes_every_line_as_the_line_by_line_reader_does(tmp_path, index_state):  # session.md §3.2, §3.5
    """Opening indexes the usual lines inline (issue 11 item 7); the result must be what indexing the
    lines one by one gives: leaf moves, entries appended under a leaf entry by a foreign writer,
    labels, custom entries, CRLF and blank lines, a parent that comes later in the file."""
    from agentcore.session.storage import SessionStorage

    path = tmp_path / "mixed.jsonl"
    with Session.create(path, cwd="/w") as session:
        first = session.append_message(UserMessage("a", timestamp=0))
        second = session.append_message(UserMessage("b", timestamp=1))
        session.append_custom("note", {"k": 1})
        session.append_label(first, "start")
        session.move_to(first)  # a leaf entry
        session.append_message(UserMessage("c", timestamp=2))
        leaf_id = session.leaf_id
    lines = path.read_bytes().split(b"\n")
    leaf_line = next(json.loads(line) for line in lines if line and json.loads(line)["type"] == "leaf")

    # a writer that does not know leaf entries appends under one; another line names a later parent
    extra = [v3_entry("f1", leaf_line["id"], "foreign"), v3_entry("f2", "f3", "early"), v3_entry("f3", second, "late")]
    body = [line for line in lines if line] + [json.dumps(e, separators=(",", ":")).encode() for e in extra]
    body[2] = body[2] + b"\r"
    path.write_bytes(b"\n".join(body[:3] + [b""] + body[3:]) + b"\n")

    with Session.open(path, read_only=True) as opened:
        fast = index_state(opened.storage, "at", "size")
        reference = SessionStorage()
        data = path.read_bytes().split(b"\n")
        at = len(data[0]) + 1
        for number, raw in enumerate(data[1:], 2):
            stripped = raw.rstrip(b"\r")
            if stripped.strip():
                reference._index_line(stripped, number, at)
            at += len(raw) + 1
        assert fast == index_state(reference, "at", "size")
        assert "f1" in opened.storage.child_ids(leaf_line["id"]) and opened.storage.leaf_id == "f3" != leaf_id


@pytest.mark.parametrize("change", ["deleted", "replaced", "cut short"])
def test_appends_to_a_file_deleted_replaced_or_cut_short_meanwhile_are_refused(tmp_path, change):
    """A session file deleted while open took every later append into the unlinked inode without
    a word (prompt() and close() reported nothing; the conversation was gone), and one cut short
    by another program was appended to after its lost header (a file no open accepts)."""
    path = tmp_path / "s.jsonl"
    session = Session.create(path, cwd="/w")
    session.append_custom("kept", 1)
    if change == "deleted":
        path.unlink()
    elif change == "replaced":  # an editor's save: a new file renamed over the old
        other = tmp_path / "other.jsonl"
        other.write_bytes(path.read_bytes())
        os.replace(other, path)
    else:
        os.truncate(path, 0)
    with pytest.raises(SessionError, match=f"the file was {change}") as info:
        session.append_custom("lost", 2)
    assert info.value.code == "storage" and "the entry was not recorded" in str(info.value)
    session.close()
    if change == "replaced":
        with Session.open(path) as reopened:  # the replacement is left as it was
            assert [e.custom_type for e in reopened.entries()] == ["kept"]
    elif change == "deleted":
        assert not path.exists()
    else:
        assert path.read_bytes() == b""


def _session_with_a_bad_message_line(tmp_path: Path, bad: bytes, last: bool = False) -> Path:
    """A session of three messages whose second line's message text is replaced by ``bad``
    (bytes inside the JSON string), or, with ``last``, followed by ``bad`` as a torn last line."""
    path = tmp_path / "s.jsonl"
    with Session.create(path, cwd="/w") as session:
        for text in ("one", "MARK", "three"):
            session.append_message(UserMessage(text))
    data = path.read_bytes()
    path.write_bytes(data + bad if last else data.replace(b"MARK", bad))
    return path


def test_a_message_line_that_is_not_utf8_is_named_not_a_bare_unicode_error(tmp_path):
    path = _session_with_a_bad_message_line(tmp_path, b"caf\xff")
    with Session.open(path, read_only=True) as session:  # the index reads the envelope only
        with pytest.raises(SessionError, match=r"s\.jsonl:3: invalid entry: 'utf-8' codec") as info:
            session.build_context()  # was a bare UnicodeDecodeError naming no file or line
    assert info.value.code == "invalid_entry"


def test_json_nested_too_deeply_is_an_invalid_line_and_a_torn_one_is_repaired(tmp_path):
    deep = b"[" * 5000 + b"]" * 5000
    path = _session_with_a_bad_message_line(tmp_path, b'", "x": ' + deep + b', "y": "')
    with Session.open(path, read_only=True) as session:
        with pytest.raises(SessionError, match=r"s\.jsonl:3: invalid entry: JSON nested too deeply"):
            session.build_context()  # was a RecursionError
    (tmp_path / "torn").mkdir()
    torn = _session_with_a_bad_message_line(tmp_path / "torn", b'{"type":"message","x":' + b"[" * 5000, last=True)
    with Session.open(torn) as session:  # a crash cut a deep line short: repaired like any torn line
        assert [m.text for m in session.build_context().messages] == ["one", "MARK", "three"]


# --------------------------------------------------------------------------- writers racing a migration or a close


@pytest.mark.parametrize("migrator", ["still open", "closed"])
def test_an_opener_that_locks_after_another_writers_migration_opens_the_migrated_file(tmp_path, monkeypatch, migrator):
    """Writer B opens a version 2 file, writer A opens it too, migrates it (a rewrite renamed over
    the path), appends and (maybe) closes; only then does B take its lock: on the old, unlinked
    file, which nobody locks any more. B migrated that stale content again over the path, and the
    entry A's append had returned for was gone. B now opens the path again: locked while A is open,
    A's file with A's entry once A closed."""
    from agentcore.session import SessionLockedError, jsonl

    path = tmp_path / "v2.jsonl"
    write_lines(path, [dict(V3_HEADER, version=2), v3_entry("abc12345", None)])
    real_lock = jsonl._lock
    state = {}

    def lock(fd, where):
        if not state and where == str(path):  # B has opened the old file: run writer A now
            state["armed"] = False
            state["a"] = a = Session.open(path)
            state["appended"] = a.append_message(U("written by A"))
            if migrator == "closed":
                a.close()
        return real_lock(fd, where)

    monkeypatch.setattr(jsonl, "_lock", lock)
    if migrator == "still open":
        with pytest.raises(SessionLockedError):
            Session.open(path)  # B
        state["a"].close()
    else:
        with Session.open(path) as b:
            assert [e.id for e in b.entries()] == ["abc12345", state["appended"]]
            b.append_message(U("written by B"))
    monkeypatch.undo()
    with Session.open(path, read_only=True) as reopened:
        texts = [e.message.content[0].text for e in reopened.entries()[1:]]
    assert texts == ["written by A"] + (["written by B"] if migrator == "closed" else [])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_during_an_append_on_another_thread_closes_without_waiting(tmp_path):
    """The parent's append held the storage's and the session's locks when the process forked: in
    the child no thread will ever release them, so its close() must not wait for them."""
    session = Session.create(tmp_path / "s.jsonl", cwd="/w")
    storage = session.storage
    writing, release = threading.Event(), threading.Event()
    write = storage._write

    def held_write(line, entry):
        writing.set()
        assert release.wait(30)
        write(line, entry)

    storage._write = held_write
    appender = threading.Thread(target=session.append_message, args=(U("in flight"),))
    appender.start()
    try:
        assert writing.wait(30)
        read_end, write_end = os.pipe()
        pid = _processes.fork()
        if pid == 0:  # pragma: no cover - the child reports through the pipe
            try:
                session.close()
                os.write(write_end, b"closed")
            finally:
                os._exit(0)
        os.close(write_end)
        ready, _, _ = select.select([read_end], [], [], 30)
        closed = os.read(read_end, 16) if ready else b""
        os.close(read_end)
        if not closed:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        assert closed == b"closed", "the child's close() waited for a lock held by the parent's thread"
    finally:
        release.set()
        appender.join(30)
    session.close()
    assert [e.message.text for e in Session.open(tmp_path / "s.jsonl", read_only=True).entries()] == ["in flight"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_neither_appends_through_nor_unlocks_the_parents_handle(tmp_path):
    """A handle belongs to the process that opened it: the child shares the parent's lock, so its
    appends would go into the parent's session behind its back; they are refused, and the child's
    close() releases nothing of the parent's."""
    from agentcore.session import SessionLockedError

    path = tmp_path / "s.jsonl"
    session = Session.create(path, cwd="/w")
    first = session.append_message(U("one"))
    assert append_in_forked_child(session, U("from the child")), "the child's append was not refused"
    with pytest.raises(SessionLockedError):
        Session.open(path)  # the parent still holds the lock
    second = session.append_message(U("two"))
    session.close()
    with Session.open(path, read_only=True) as reopened:
        assert [e.id for e in reopened.entries()] == [first, second]


@pytest.mark.skipif(os.name == "nt", reason="POSIX permission bits")
@pytest.mark.parametrize("bits, umask", [(0o600, 0o022), (0o640, 0o077), (0o400, 0o022)])
def test_a_fork_keeps_the_source_files_permission_bits_from_the_start(tmp_path, monkeypatch, bits, umask):
    """A fork was created with the umask's bits: a session made private (0600) forked into a
    world-readable file (and one the umask made stricter than the source lost its group bits)."""
    repo = SessionRepository(tmp_path)
    src = repo.create(cwd="/p", session_id="src")
    src.append_message(U("u"))
    src.close()
    source = repo.path_of("src")
    os.chmod(source, bits)
    seen = []
    link = os.link

    def watching_link(temp, path, *args, **kwargs):
        seen.append(stat.S_IMODE(os.stat(temp).st_mode))  # the bits the file has once it is at path
        return link(temp, path, *args, **kwargs)

    monkeypatch.setattr(os, "link", watching_link)
    old = os.umask(umask)
    try:
        with Session.open(source, read_only=True) as opened:
            forks = [repo.fork("src"), repo.fork(opened)]
        for fork in forks:
            expected = bits | 0o600  # the owner keeps read and write: a fork is appended to
            assert stat.S_IMODE(os.stat(fork.path).st_mode) == expected
            assert seen.pop() == expected
            fork.append_message(U("more"))
            fork.close()
    finally:
        os.umask(old)


def test_two_creates_of_one_path_never_overwrite_the_winner(tmp_path, monkeypatch):
    """Both creates wrote the temp file ``<path>.<pid>.tmp`` (opened with truncation): the loser
    truncated and rewrote the winner's file through that name (a hard link to it until the winner
    unlinked it), so the winner's session held the loser's header; a link planted there was
    followed."""
    path = tmp_path / "s.jsonl"
    planted = tmp_path / "elsewhere.txt"
    planted.write_text("keep me")
    os.symlink(planted, f"{path}.{os.getpid()}.tmp")  # the name the old temp file had
    linked, loser_done = threading.Event(), threading.Event()
    link = os.link

    def ordered_link(temp, target, *args, **kwargs):
        if not linked.is_set():  # the winner: published, not yet done
            link(temp, target, *args, **kwargs)
            linked.set()
            assert loser_done.wait(10)
            return None
        try:
            return link(temp, target, *args, **kwargs)
        finally:
            loser_done.set()

    monkeypatch.setattr(os, "link", ordered_link)
    results = {}

    def create(name):
        try:
            results[name] = Session.create(path, cwd="/p", session_id=name)
        except SessionError as exc:
            results[name] = exc
            loser_done.set()  # a loser stopped before its link

    winner = threading.Thread(target=create, args=("winner",))
    winner.start()
    assert linked.wait(10)
    create("loser")
    winner.join(10)
    monkeypatch.undo()
    assert isinstance(results["loser"], SessionError) and results["loser"].code == "already_exists"
    session = results["winner"]
    assert session.id == "winner" and json.loads(path.read_text())["id"] == "winner"
    session.close()
    assert planted.read_text() == "keep me"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp") and not p.is_symlink()] == []


def test_a_fork_through_a_label_entry_keeps_its_path_whole(tmp_path):  # session §12 C35, F54
    """Label entries on the path were dropped from a fork but the entry after one kept it as its
    parent: the fork named a missing parent and neither its context nor its branch could be read."""
    repo = SessionRepository(tmp_path)
    src = repo.create(cwd="/p", session_id="src")
    u1 = src.append_message(U("u1"))
    src.append_label(u1, "start")  # a tree node under u1: what follows hangs under the label
    a1 = src.append_message(A("a1"))
    src.append_label(a1, "answer")
    src.append_label(a1, "answer, renamed")
    u2 = src.append_message(U("u2"))
    for fork, last in ((repo.fork(src, u2, position="at"), u2), (repo.fork(src, u2), a1)):
        messages = [e for e in fork.entries() if e.type == "message"]
        assert [e.id for e in messages] == [u1, a1, u2][: [u1, a1, u2].index(last) + 1]
        assert [e.parent_id for e in messages] == [None, u1, a1][: len(messages)]
        assert json.loads(fork.storage.raw_line(a1)) == dict(json.loads(src.storage.raw_line(a1)), parentId=u1)
        assert fork.labels == {u1: "start", a1: "answer, renamed"}
        fork.close()
        with repo.open(fork.id) as reopened:
            assert [m.content[0].text for m in reopened.build_context().messages] == [
                m.content[0].text for m in reopened.build_context(last).messages
            ]
            assert [e.id for e in reopened.get_branch() if e.type == "message"] == [e.id for e in messages]
    src.close()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
def test_a_named_pipe_at_the_path_is_not_a_session_and_never_blocks_the_open(tmp_path):
    """A read-only open of a named pipe blocked until some process opened it for writing (for
    ever, in a session directory); a writable open called it "an empty file"."""
    path = tmp_path / "pipe.jsonl"
    os.mkfifo(path)
    outcome = {}

    def open_it(read_only):
        try:
            Session.open(path, read_only=read_only)
        except SessionError as exc:
            outcome[read_only] = exc

    for read_only in (True, False):
        opener = threading.Thread(target=open_it, args=(read_only,), daemon=True)
        opener.start()
        opener.join(10)
        blocked = opener.is_alive()
        if blocked:  # in open(): a writer end lets it go
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            opener.join(10)
        assert not blocked
        assert outcome[read_only].code == "invalid_session", outcome
        assert "not a regular file" in str(outcome[read_only]) and str(path) in str(outcome[read_only])
    outcome.clear()

    def delete_it():
        try:
            SessionRepository(tmp_path).delete(str(path))
        except SessionError as exc:
            outcome["delete"] = exc

    deleter = threading.Thread(target=delete_it, daemon=True)
    deleter.start()
    deleter.join(10)
    blocked = deleter.is_alive()
    if blocked:
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        deleter.join(10)
    assert not blocked
    assert outcome["delete"].code == "invalid_session" and "not a file" in str(outcome["delete"])
    assert stat.S_ISFIFO(os.stat(path).st_mode)


def test_delete_never_removes_a_file_a_writer_migrated_and_holds_meanwhile(tmp_path, monkeypatch):  # §12 F53
    """``delete`` opened the file, then locked it: when a writer's migration replaced the file in
    between, the lock taken was the old file's (free once the writer let it go) and the new file,
    open for writing, was unlinked under the writer."""
    import agentcore.session.repository as repository_module

    repo = SessionRepository(tmp_path)
    directory = tmp_path / "--w--"
    directory.mkdir()
    path = directory / "2025-01-01T00-00-00-000Z_sess-1.jsonl"
    write_lines(path, [V1_HEADER, user_entry("one")])
    writers = []
    read_header = repository_module.read_header

    def migrated_meanwhile(name):
        if not writers:
            writers.append(Session.open(path))  # migrates: a new file at the path, locked by it
        return read_header(name)

    monkeypatch.setattr(repository_module, "read_header", migrated_meanwhile)
    with pytest.raises(SessionError) as info:
        repo.delete("sess-1")
    assert "open for writing" in str(info.value)
    writer = writers[0]
    writer.append_message(U("two"))
    writer.close()
    with Session.open(path, read_only=True) as reopened:
        texts = [
            m.content if isinstance(m.content, str) else m.content[0].text for m in reopened.build_context().messages
        ]
        assert texts == ["one", "two"]


@pytest.mark.parametrize(
    "lines, code",
    [
        ([b"not json"], "invalid_entry"),
        ([encode_line(v3_entry("a1", None))[:-1]] * 2, "invalid_entry"),  # a duplicate id
        (
            [encode_line({"type": "leaf", "id": "l1", "parentId": None, "timestamp": "t", "targetId": "x"})],
            "invalid_session",
        ),
    ],
)
def test_a_create_from_lines_that_make_no_session_leaves_no_file(tmp_path, lines, code):
    """The file was published before it was opened: lines that do not make a session left a file
    that listing shows and no open accepts (SQLite checks them before the database is touched)."""
    repo = SessionRepository(tmp_path)
    with pytest.raises(SessionError) as info:
        repo.create(cwd="/p", session_id="s", lines=lines)
    assert repo.list() == [] and not list(tmp_path.rglob("*.jsonl"))
    assert info.value.code == code and "not created" in str(info.value)


def test_creates_of_one_id_by_two_repositories_make_one_session(tmp_path, monkeypatch):  # session §12 F52
    """Only creates through one repository object were kept apart: two processes (two CLIs given
    the same ``--session`` id, two repository objects) both found no file, both created one (the
    names differ by their creation time) and the id was ambiguous for ever after."""
    import agentcore.session.repository as repository_module

    both_checked = threading.Barrier(2, timeout=2)  # times out when the other is kept waiting
    stamp = repository_module.iso_from_ms
    apart = iter(range(2))  # the creates run a millisecond apart: two file names

    def after_the_check(ms):  # called once a create found no session of that id
        try:
            both_checked.wait()
        except threading.BrokenBarrierError:
            pass
        return stamp(ms + next(apart))

    monkeypatch.setattr(repository_module, "iso_from_ms", after_the_check)
    results = []

    def create():
        try:
            results.append(SessionRepository(tmp_path).create(cwd="/p", session_id="dup"))
        except SessionError as exc:
            results.append(exc.code)

    threads = [threading.Thread(target=create) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    monkeypatch.undo()
    assert len(SessionRepository(tmp_path).list(cwd="/p")) == 1
    assert sorted(r if isinstance(r, str) else "ok" for r in results) == ["already_exists", "ok"]
    for result in results:
        if not isinstance(result, str):
            result.close()


@pytest.mark.parametrize("field", ["id", "parentId", "timestamp"])
@pytest.mark.parametrize("read_only", [True, False])
def test_an_envelope_that_is_not_utf8_is_named_not_a_bare_unicode_error(tmp_path, field, read_only):
    """The index read the envelope of a line before the last with a regular expression and decoded
    its id, parent and timestamp bytes as UTF-8 unchecked: a byte from another encoding there (a
    file edited by hand) failed the open with a bare UnicodeDecodeError naming no file or line."""
    entry = v3_entry("b1", "a1")
    entry[field] = "caf\udcff"  # written below as the byte 0xff
    bad = json.dumps(entry, separators=(",", ":")).encode().replace(b"\\udcff", b"\xff")
    path = tmp_path / "s.jsonl"
    lines = [json.dumps(o, separators=(",", ":")).encode() for o in (V3_HEADER, v3_entry("a1", None))]
    path.write_bytes(b"\n".join([*lines, bad, json.dumps(v3_entry("c1", "a1")).encode(), b""]))
    with pytest.raises(SessionError, match=r"s\.jsonl:3: invalid entry: 'utf-8' codec") as info:
        Session.open(path, read_only=read_only)
    assert info.value.code == "invalid_entry" and info.value.line == 3


def test_a_fork_keeps_the_history_a_compaction_kept_from_a_label_entry(tmp_path):  # session §12 F54, §7.4
    """The compaction cut takes the label entry before it along, so ``firstKeptEntryId`` can be a
    label; a fork drops label entries, and its context lost every message the compaction kept."""
    from agentcore.session.compaction import CompactionSettings, prepare_compaction

    repo = SessionRepository(tmp_path)
    src = repo.create(cwd="/p", session_id="src")
    u1 = src.append_message(U("u1 " * 400))
    src.append_message(A("a1 " * 400))
    src.append_label(u1, "start")
    u2 = src.append_message(U("u2 " * 400))
    src.append_message(A("a2 " * 400))
    preparation = prepare_compaction(src.get_branch(), CompactionSettings(keep_recent_tokens=500))
    assert src.storage.type_of(preparation.first_kept_entry_id) == "label"
    src.append_compaction("summary", preparation.first_kept_entry_id, preparation.tokens_before)
    u3 = src.append_message(U("u3"))
    expected = [type(m).__name__ for m in src.build_context().messages]
    assert expected == ["CompactionSummaryMessage", "UserMessage", "AssistantMessage", "UserMessage"]
    for fork in (repo.fork(src, u3, position="at"), repo.fork(src, u3)):
        compaction = next(e for e in fork.entries() if e.type == "compaction")
        assert compaction.first_kept_entry_id == u2
        assert [type(m).__name__ for m in fork.build_context().messages][:3] == expected[:3]
        fork.close()
    src.close()


def test_opening_many_foreign_appends_under_leaf_entries_scans_the_file_once(tmp_path, monkeypatch):
    """Each leaf entry another writer appended under (the reference takes the last line as its
    leaf, so every branch switch followed by one of its appends makes one) was put among its
    siblings by numbering every entry indexed so far: opening a file with k of them cost k scans
    of the index (2,000 branch switches off one entry: 4 million entries visited; 4,000 took 10
    times as long as 1,000). The file's line numbers give the order without a scan."""
    from agentcore.session.storage import SessionStorage

    moves = 2000
    objects = [V3_HEADER, v3_entry("root", None)]
    for k in range(moves):
        objects.append(
            {
                "type": "leaf",
                "id": f"L{k}",
                "parentId": "root",
                "timestamp": "2025-01-01T00:00:01.000Z",
                "targetId": "root",
            }
        )
        objects.append(v3_entry(f"m{k}", f"L{k}", f"branch {k}"))  # the foreign writer's append
    # a leaf entry appended under after a later sibling: it still goes before that sibling
    late = {"type": "leaf", "id": "Lz", "parentId": "root", "timestamp": "2025-01-01T00:00:01.000Z", "targetId": "root"}
    objects += [late, v3_entry("r2", "root"), v3_entry("mz", "Lz")]
    path = tmp_path / "switches.jsonl"
    write_lines(path, objects)
    visited = [0]

    class CountingOrder(list):  # the storage's entries in append order, counting every walk over them
        def __iter__(self):
            for node in super().__iter__():
                visited[0] += 1
                yield node

    init = SessionStorage.__init__

    def counting_init(self):
        init(self)
        self._order = CountingOrder()

    monkeypatch.setattr(SessionStorage, "__init__", counting_init)
    with Session.open(path, read_only=True) as session:
        opened = visited[0]
        assert session.storage.child_ids("root") == [f"L{k}" for k in range(moves)] + ["Lz", "r2"]  # append order
        assert session.storage.child_ids("L7") == ["m7"]
        assert [e.id for e in session.get_branch("m5")] == ["root", "L5", "m5"]
    assert opened < 10 * len(objects), f"{opened} entries visited to open {len(objects)} lines"

"""SQLite session storage specifics (spec session.md §9.4, §13): WAL, payload identical to the JSONL
line, many sessions per database, read-only opens, listing and deleting. The shared tree scenarios
run against SQLite in test_session_conformance.py."""

from __future__ import annotations

import json
import os
import sqlite3
import threading

import pytest
from _processes import append_in_forked_child

from agentcore.session import JsonlSessionStorage, Session, SessionError, SqliteSessionStorage
from agentcore.types import AssistantMessage, TextContent, Usage, UsageCost, UserMessage


def fill(session):
    u = session.append_message(UserMessage([TextContent("héllo")], timestamp=1))
    session.append_message(
        AssistantMessage(
            [TextContent("hi")],
            api="a",
            provider="p",
            model="m",
            usage=Usage(1, 2, 3, 4, 10, UsageCost(total=0.000009)),
            timestamp=2,
        )
    )
    session.append_label(u, "start")
    session.move_to(u)
    session.append_compaction("S", u, 5, {"readFiles": []})
    return u


def test_payload_is_the_jsonl_line(tmp_path):  # brief: stored JSON identical to the JSONL line
    clock = iter(range(1_700_000_000_000, 1_700_000_100_000, 1000))
    ids = iter(f"id{n:06d}" for n in range(100))
    sq = Session(
        SqliteSessionStorage.create(tmp_path / "s.db", cwd="/w", session_id="one"),
        clock=lambda: next(clock),
        id_factory=lambda exists: next(ids),
    )
    fill(sq)
    clock = iter(range(1_700_000_000_000, 1_700_000_100_000, 1000))
    ids = iter(f"id{n:06d}" for n in range(100))
    js = Session(
        JsonlSessionStorage.create(tmp_path / "s.jsonl", cwd="/w", session_id="one"),
        clock=lambda: next(clock),
        id_factory=lambda exists: next(ids),
    )
    fill(js)
    sq.close()
    js.close()
    file_lines = (tmp_path / "s.jsonl").read_bytes().decode("utf-8").splitlines()[1:]
    conn = sqlite3.connect(tmp_path / "s.db")
    rows = [r[0] for r in conn.execute("SELECT payload FROM entries WHERE session_id='one' ORDER BY seq")]
    assert rows == file_lines
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    indexes = {r[1] for r in conn.execute("PRAGMA index_list(entries)")}
    assert "entries_by_parent" not in indexes  # issue 11.7: a B-tree per append no query here reads
    assert len(indexes) == 2  # the (session_id, seq) and (session_id, id) keys
    conn.close()


def test_many_sessions_in_one_database(tmp_path):
    db = tmp_path / "many.db"
    a = Session(SqliteSessionStorage.create(db, cwd="/a", session_id="a"))
    b = Session(SqliteSessionStorage.create(db, cwd="/b", session_id="b"))
    a.append_message(UserMessage("for a", timestamp=1))
    b.append_message(UserMessage("for b", timestamp=1))
    b.append_message(UserMessage("again b", timestamp=2))
    a.close()
    b.close()
    listed = {i.id: i.message_count for i in SqliteSessionStorage.list_sessions(db)}
    assert listed == {"a": 1, "b": 2}
    with pytest.raises(SessionError) as ambiguous:
        SqliteSessionStorage(db)
    # issue 10.5: says how to choose, and which ids there are
    assert ambiguous.value.code == "not_found" and "session_id=" in str(ambiguous.value)
    assert "a" in str(ambiguous.value).split("(")[1] and "list_sessions" in str(ambiguous.value)
    with Session(SqliteSessionStorage(db, "b")) as again:
        assert [m.content for m in again.build_context().messages] == ["for b", "again b"]
    with pytest.raises(SessionError) as dup:
        SqliteSessionStorage.create(db, session_id="a")
    assert dup.value.code == "already_exists"
    SqliteSessionStorage.delete_session(db, "a")
    assert [i.id for i in SqliteSessionStorage.list_sessions(db)] == ["b"]
    with pytest.raises(SessionError) as gone:
        SqliteSessionStorage.delete_session(db, "a")
    assert gone.value.code == "not_found"


def test_opening_a_new_or_empty_database_creates_a_session(tmp_path):  # issue 10 item 5
    db = tmp_path / "new.db"
    with Session(SqliteSessionStorage(db)) as s:  # like sqlite3.connect: the file and a session
        s.append_message(UserMessage("hello", timestamp=1))
        created = s.id
    assert [i.id for i in SqliteSessionStorage.list_sessions(db)] == [created]
    with Session(SqliteSessionStorage(db)) as again:  # one session: opened, not a second one made
        assert again.id == created and len(again.build_context().messages) == 1
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    with pytest.raises(SessionError) as ro:
        SqliteSessionStorage(empty, read_only=True)
    assert ro.value.code == "not_found" and "no sessions" in str(ro.value)
    with pytest.raises(SessionError) as foreign:
        SqliteSessionStorage(empty, "x", read_only=True)
    assert foreign.value.code == "storage" and "no such table" in str(foreign.value)
    with Session(SqliteSessionStorage(empty)) as s:
        assert s.leaf_id is None and s.cwd == os.getcwd()
    with pytest.raises(SessionError) as typo:
        SqliteSessionStorage(db, "no-such-id")
    assert typo.value.code == "not_found" and "SqliteSessionStorage.create" in str(typo.value)
    assert len(SqliteSessionStorage.list_sessions(db)) == 1


@pytest.mark.parametrize(
    "schema",
    [
        "CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users(name) VALUES ('ann');",
        "CREATE TABLE sessions(token TEXT PRIMARY KEY, user_id INTEGER);",  # our table's name, not ours
        "CREATE TABLE schema_version(version INTEGER); INSERT INTO schema_version VALUES (1);"
        "CREATE TABLE sessions(token TEXT);",
    ],
)
def test_a_database_of_something_else_is_refused_untouched(tmp_path, schema):
    db = tmp_path / "app.db"
    conn = sqlite3.connect(db)
    conn.executescript(schema)
    conn.close()
    content = db.read_bytes()
    for attempt in (
        lambda: SqliteSessionStorage(db),
        lambda: SqliteSessionStorage(db, "abc"),
        lambda: SqliteSessionStorage(db, read_only=True),
        lambda: SqliteSessionStorage.create(db, cwd="/w"),
    ):
        with pytest.raises(SessionError) as info:
            attempt()
        assert info.value.code == "invalid_session" and info.value.path == str(db)
        assert f"{db}: not an agentcore session database" in str(info.value)
    assert db.read_bytes() == content and not os.path.exists(f"{db}-wal")
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # not switched to WAL
    conn.close()


def test_several_sessions_error_lists_a_few_ids(tmp_path):  # issue 10 item 5
    db = tmp_path / "many.db"
    for n in range(8):
        SqliteSessionStorage.create(db, cwd="/w", session_id=f"sess-{n}").close()
    with pytest.raises(SessionError) as info:
        SqliteSessionStorage(db)
    text = str(info.value)
    assert text.count("sess-") == 5 and ", ..." in text and "session_id=ID" in text


def test_read_only_open(tmp_path):
    db = tmp_path / "ro.db"
    with Session(SqliteSessionStorage.create(db, cwd="/w")) as s:
        u = fill(s)
    with Session(SqliteSessionStorage(db, read_only=True)) as reader:
        assert reader.leaf_id is not None and reader.get_label(u) == "start"
        assert [m.role for m in reader.build_context().messages] == ["compactionSummary", "user"]
        with pytest.raises(SessionError) as info:
            reader.append_custom("x")
        assert info.value.code == "storage"
    with pytest.raises(SessionError) as missing:
        SqliteSessionStorage(tmp_path / "missing.db", read_only=True)
    assert missing.value.code == "not_found"


def test_lazy_payloads_and_stats_after_reopen(tmp_path):
    db = tmp_path / "lazy.db"
    with Session(SqliteSessionStorage.create(db, cwd="/w")) as s:
        fill(s)
    with Session(SqliteSessionStorage(db)) as s:
        nodes = s.storage._order
        assert [n.entry is None for n in nodes if n.type == "message"] == [True, True]  # not decoded at open
        stats = s.get_session_stats()
        assert (
            stats.message_count,
            stats.cached_tokens,
            stats.uncached_tokens,
            stats.total_tokens,
            stats.cost_total,
        ) == (2, 3, 5, 10, 0.000009)


def _execute(db, statement):
    """Change the database behind the storage's back, as another program would."""
    conn = sqlite3.connect(db)
    conn.execute(statement)
    conn.commit()
    conn.close()


def test_unsupported_schema_version(tmp_path):
    db = tmp_path / "future.db"
    SqliteSessionStorage.create(db, cwd="/w", session_id="x").close()
    _execute(db, "UPDATE schema_version SET version = 99")
    content = db.read_bytes()
    for read_only in (False, True):
        with pytest.raises(SessionError) as info:
            SqliteSessionStorage(db, "x", read_only=read_only)
        assert info.value.code == "storage" and str(db) in str(info.value) and "version 99" in str(info.value)
        assert "upgrade agentcore" in str(info.value)  # what to do: it was written by a newer version
    assert db.read_bytes() == content


def test_corrupt_row_is_reported(tmp_path):
    db = tmp_path / "bad.db"
    with Session(SqliteSessionStorage.create(db, cwd="/w", session_id="x")) as s:
        s.append_message(UserMessage("ok", timestamp=1))
        s.append_thinking_level_change("high")
    _execute(db, "UPDATE entries SET payload = '{broken' WHERE type = 'thinking_level_change'")
    with pytest.raises(SessionError) as info:
        SqliteSessionStorage(db, "x")
    assert info.value.code == "invalid_entry" and "seq 2" in str(info.value)


def test_open_indexes_every_row_as_the_row_by_row_reader_does(tmp_path, index_state):  # session.md §3.2, §9.4
    """Opening indexes the usual rows inline (issue 11 item 7); the result must be what adding the
    rows one by one gives, including a row a foreign writer appended under a leaf entry."""
    import json

    from agentcore.session.storage import EAGER_TYPES, IndexNode, SessionStorage

    db = tmp_path / "s.db"
    with Session(SqliteSessionStorage.create(db, cwd="/w", session_id="s")) as session:
        first = session.append_message(UserMessage("a", timestamp=0))
        session.append_message(UserMessage("b", timestamp=1))
        session.append_custom("note", {"k": 1})
        session.append_label(first, "start")
        session.move_to(first)
        leaf_entry = session.storage._order[-1].id
        session.append_message(UserMessage("c", timestamp=2))
    conn = sqlite3.connect(db)
    with conn:  # a writer that does not know leaf entries appends under one
        payload = json.dumps(
            {
                "type": "message",
                "id": "f1",
                "parentId": leaf_entry,
                "timestamp": "t",
                "message": {"role": "user", "content": "foreign", "timestamp": 3},
            },
            separators=(",", ":"),
        )
        conn.execute("INSERT INTO entries VALUES ('s', 100, 'f1', ?, 'message', 't', 'user', ?)", (leaf_entry, payload))
    rows = conn.execute(
        "SELECT seq, id, parent_id, type, timestamp, role, payload FROM entries WHERE session_id='s' ORDER BY seq"
    ).fetchall()
    conn.close()

    reference = SessionStorage()
    for seq, entry_id, parent, etype, ts, role, payload in rows:
        if etype in EAGER_TYPES:
            reference._add(reference._node_for(reference._parse(payload, seq, entry_id), seq, None))
        else:
            reference._add(IndexNode(entry_id, parent, etype, role, ts, seq, None, None))
    with SqliteSessionStorage(db, "s", read_only=True) as opened:
        assert index_state(opened) == index_state(reference)
        assert "f1" in opened.child_ids(leaf_entry) and opened.leaf_id == "f1"


def test_appends_leave_checkpoints_to_a_background_thread(tmp_path, monkeypatch):  # issue 11 item 7
    """An append never runs a checkpoint itself (SQLite's automatic one is off on the writer's
    connection); a daemon thread runs them, one every _CHECKPOINT_PAGES pages, the writer catches
    up on its own connection every _CATCH_UP_PAGES, so the WAL stays bounded, and close() waits for
    a checkpoint in flight."""

    import agentcore.session.sqlite as sqlite_module

    monkeypatch.setattr(sqlite_module, "_CHECKPOINT_PAGES", 30)
    monkeypatch.setattr(sqlite_module, "_CATCH_UP_PAGES", 120)
    started: list = []
    release = threading.Event()
    real_start = sqlite_module.streams.start_daemon

    def start(target, name, *args):
        started.append(name)

        def held():
            release.wait(10)
            target(*args)

        real_start(held, name)

    monkeypatch.setattr(sqlite_module.streams, "start_daemon", start)
    db = tmp_path / "s.db"
    session = Session(SqliteSessionStorage.create(db, cwd="/w", session_id="s"))
    assert session.storage._conn.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)
    for i in range(10):
        session.append_message(UserMessage(f"m{i}", timestamp=i))
    assert started == ["agentcore-sqlite-checkpoint"]  # 10 appends of 3 pages: one checkpoint asked for
    for i in range(30):  # it is held: no second one starts meanwhile
        session.append_message(UserMessage(f"n{i}", timestamp=i))
    assert len(started) == 1
    release.set()
    checkpointer = session.storage._checkpointer
    for i in range(400):  # each checkpoint finishes before the next append: the count is exact
        assert checkpointer.idle.wait(10)
        session.append_message(UserMessage(f"o{i}", timestamp=i))
    wal = os.path.getsize(f"{db}-wal")
    closer = threading.Thread(target=session.close)
    closer.start()
    closer.join(10)
    assert not closer.is_alive()
    # o0 finds 93 pages and a backlog of 123: the writer catches up itself; then every 10 appends
    # ask for one, and every fourth of those is a catch-up again: 1 + 39 - 9 checkpoints in all
    assert len(started) == 31
    assert wal < 440 * 3 * 4096 / 2  # bounded: without checkpoints every append's pages stay in the WAL
    with Session(SqliteSessionStorage(db, "s", read_only=True)) as again:
        assert len(again.build_context().messages) == 440


def test_a_checkpoint_thread_that_cannot_start_never_fails_the_committed_append(tmp_path, monkeypatch, caplog):
    """The checkpoint step runs after the row committed. A thread that could not start (a thread
    limit, an append made from an atexit handler at interpreter shutdown) made append() raise
    with its row in the database but not in memory, and left the checkpointer marked busy for
    good: no checkpoint ever again, and close() waited 30 s for one."""
    import logging

    import agentcore.session.sqlite as sqlite_module

    db = tmp_path / "s.db"
    session = Session(SqliteSessionStorage.create(db, cwd="/w", session_id="s"))
    first = session.append_message(UserMessage("one", timestamp=1))
    monkeypatch.setattr(sqlite_module, "_CHECKPOINT_PAGES", 1)  # every append asks for a checkpoint

    def no_thread(*args):
        raise RuntimeError("can't create new thread at interpreter shutdown")

    monkeypatch.setattr(sqlite_module.streams, "start_daemon", no_thread)
    with caplog.at_level(logging.DEBUG, logger="agentcore.session.sqlite"):
        second = session.append_message(UserMessage("two", timestamp=2))
    assert session.leaf_id == second and [e.id for e in session.entries()] == [first, second]
    assert session.storage._checkpointer.idle.is_set()
    assert "cannot start a background checkpoint" in caplog.text
    monkeypatch.setattr(sqlite_module.streams, "start_daemon", lambda target, name, *args: target(*args))
    third = session.append_message(UserMessage("three", timestamp=3))  # the next one runs
    assert session.storage._checkpointer.idle.is_set()
    session.close()
    with Session(SqliteSessionStorage(db, "s", read_only=True)) as again:
        assert [e.id for e in again.entries()] == [first, second, third]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_neither_uses_nor_releases_the_parents_handle(tmp_path):
    """close() in a forked child deleted the parent's writer lease over the inherited connection:
    another writer could then open the session the parent still wrote, and the parent's next append
    failed with SessionLockedError. In the child an inherited handle now refuses appends (SQLite
    connections must not cross fork()), and its close() touches nothing of the parent's."""
    from agentcore.session import SessionLockedError

    db = tmp_path / "s.db"
    session = Session(SqliteSessionStorage.create(db, cwd="/w", session_id="s"))
    first = session.append_message(UserMessage("one", timestamp=1))
    assert append_in_forked_child(session, UserMessage("from the child", timestamp=2)), (
        "the child's append was not refused"
    )
    with pytest.raises(SessionLockedError):
        SqliteSessionStorage(db, "s")  # the parent still holds the lease
    second = session.append_message(UserMessage("two", timestamp=3))
    session.close()
    with Session(SqliteSessionStorage(db, "s", read_only=True)) as again:
        assert [e.id for e in again.entries()] == [first, second]


def test_usage_totals_of_a_corrupt_row_name_it(tmp_path):
    """A damaged assistant payload (decoded lazily, so opening works) made usage totals raise a
    bare JSONDecodeError; it is ``invalid_entry`` naming the entry, and nothing is cached."""
    db = str(tmp_path / "u.db")
    with Session(SqliteSessionStorage.create(db, cwd="/w", session_id="u")) as session:
        session.append_message(UserMessage("q", timestamp=1))
        answer_id = session.append_message(
            AssistantMessage([TextContent("a")], api="x", provider="p", model="m", usage=Usage(1, 2), timestamp=2)
        )
    with sqlite3.connect(db) as raw:
        raw.execute("UPDATE entries SET payload = '{broken' WHERE id = ?", (answer_id,))
    storage = SqliteSessionStorage(db, "u", read_only=True)
    try:
        for _ in range(2):  # a failed call caches nothing: the second reads (and fails) again
            with pytest.raises(SessionError) as failed:
                storage.usage_totals()
            assert failed.value.code == "invalid_entry" and answer_id in str(failed.value)
    finally:
        storage.close()


def test_a_cwd_sqlite_text_cannot_hold_is_listed_escaped(tmp_path):
    """``os.getcwd()`` in a directory whose name is not UTF-8 holds a lone surrogate: creating a
    session there raised UnicodeEncodeError. The header keeps the exact text; the listing column
    holds its JSON escape. An id holding one is refused by name."""
    db = str(tmp_path / "c.db")
    with Session(SqliteSessionStorage.create(db, cwd="/tmp/caf\udce9", session_id="c")) as session:
        assert session.cwd == "/tmp/caf\udce9"
    (info,) = SqliteSessionStorage.list_sessions(db)
    assert info.cwd == "/tmp/caf\\udce9"
    with Session(SqliteSessionStorage(db, "c", read_only=True)) as reopened:
        assert reopened.cwd == "/tmp/caf\udce9"
    with pytest.raises(ValueError, match="session_id 'x\\\\udcff' holds a lone surrogate"):
        SqliteSessionStorage.create(db, session_id="x\udcff")


@pytest.mark.parametrize("directory", ["c#-project", "what?", "100%25", "a b"])
def test_read_only_opens_and_listing_of_a_path_a_uri_would_misread(tmp_path, directory):
    """Read-only opens pass the path in a ``file:`` URI, unescaped: ``#`` or ``?`` ended its path
    (and dropped ``mode=ro``: an empty database was created at the cut-off path) and ``%25`` was
    decoded, so a database in such a directory could not be opened read-only or listed."""
    db = tmp_path / directory / "s.db"
    db.parent.mkdir()
    with Session(SqliteSessionStorage.create(db, cwd="/w", session_id="s")) as s:
        s.append_message(UserMessage([TextContent("one")], timestamp=1))
    before = sorted(p.name for p in tmp_path.iterdir())
    with Session(SqliteSessionStorage(db, read_only=True)) as reader:
        assert [m.content[0].text for m in reader.build_context().messages] == ["one"]
    assert [(i.id, i.message_count) for i in SqliteSessionStorage.list_sessions(db)] == [("s", 1)]
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing created beside it


@pytest.mark.parametrize("read_only", [True, False])
def test_a_payload_that_is_not_utf8_names_its_entry(tmp_path, read_only):  # session.md §3.5, §9.4
    """A payload row whose text is not UTF-8 (another program wrote it) made every read of it a
    bare sqlite3.OperationalError ("Could not decode to UTF-8 column") naming no database or entry."""
    db = tmp_path / "s.db"
    with Session(SqliteSessionStorage.create(db, cwd="/w", session_id="s")) as s:
        ids = [s.append_message(UserMessage([TextContent(f"m{n}")], timestamp=1)) for n in range(10)]
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE entries SET payload = CAST(X'7BFF7D' AS TEXT) WHERE id = ?", (ids[3],))
    conn.close()
    with Session(SqliteSessionStorage(db, "s", read_only=read_only)) as reader:
        for read in (lambda: reader.get_entry(ids[3]), reader.build_context):  # one row, then in bulk
            with pytest.raises(SessionError) as info:
                read()
            assert info.value.code == "invalid_entry"
            assert f"entry {ids[3]}, seq 4" in str(info.value) and str(db) in str(info.value)
        assert reader.get_entry(ids[4]).message.content[0].text == "m4"


def _line(entry):
    return json.dumps(entry, separators=(",", ":")).encode()


_IMPORTED = {
    "type": "message",
    "id": "a1",
    "parentId": None,
    "timestamp": "2025-01-01T00:00:01.000Z",
    "message": {"role": "user", "content": "x", "timestamp": 1},
}
_MISSING_MOVE = {
    "type": "leaf",
    "id": "l1",
    "parentId": None,
    "timestamp": "2025-01-01T00:00:01.000Z",
    "targetId": "zz",
}


@pytest.mark.parametrize(
    "lines, code, problem",
    [
        ([_line(_IMPORTED)] * 2, "invalid_entry", "imported line 2: entry a1: duplicate entry id 'a1'"),
        ([_line(_MISSING_MOVE)], "invalid_session", "leaf points at missing entry 'zz'"),
    ],
)
def test_a_create_from_lines_that_make_no_session_writes_nothing(tmp_path, lines, code, problem):
    """A duplicate entry id among the imported lines was reported as "a session with id 's'
    already exists" (the UNIQUE constraint of the entries table); a leaf move to a missing entry
    was committed: a listed session that no open accepts."""
    db = tmp_path / "s.db"
    SqliteSessionStorage.create(db, cwd="/w", session_id="other").close()
    with pytest.raises(SessionError) as info:
        SqliteSessionStorage.create(db, cwd="/w", session_id="s", lines=lines)
    assert [i.id for i in SqliteSessionStorage.list_sessions(db)] == ["other"]
    assert info.value.code == code and problem in str(info.value) and "not created" in str(info.value)


def test_an_imported_line_nested_too_deeply_is_an_invalid_entry(tmp_path):
    """A JSONL line of thousands of nested brackets: the import let the parser's RecursionError
    out instead of naming the line."""
    db = tmp_path / "s.db"
    deep = b'{"type": "custom", "data": ' + b"[" * 100_000 + b"\n"
    with pytest.raises(SessionError, match="imported line 2: invalid entry: JSON nested too deeply to read") as info:
        SqliteSessionStorage.create(db, cwd="/w", session_id="s", lines=[_line(_IMPORTED), deep])
    assert info.value.code == "invalid_entry" and info.value.line == 2
    assert SqliteSessionStorage.list_sessions(db) == []


def test_an_entry_column_sqlite_text_cannot_hold_is_refused_by_name(tmp_path):
    """A message role holding a lone surrogate (legal JSON: an rpc client's ``"\\udcff"``) made
    the append fail with a bare UnicodeEncodeError from sqlite3; the session stays writable."""
    from agentcore.session import Session, SessionError, SqliteSessionStorage

    path = tmp_path / "s.db"
    with Session(SqliteSessionStorage.create(path)) as session:
        with pytest.raises(SessionError, match=r"message role 'r\\udcff' holds a lone surrogate") as caught:
            session.append_message({"role": "r\udcff", "content": "x", "timestamp": 1})
        assert caught.value.code == "invalid_payload"
        session.append_message({"role": "user", "content": "fine", "timestamp": 2})
    with Session(SqliteSessionStorage(path, read_only=True)) as reopened:
        assert [m.role for m in reopened.build_context().messages] == ["user"]


def test_a_writing_handle_does_not_keep_the_lines_it_appended(tmp_path):  # issue: scale, memory per entry
    """Every entry appended through a SQLite handle kept its whole JSON line in memory for as long
    as the handle lived (about 1.4 KB per entry of a coding-agent run, four times what an open of
    the same session holds): 100,000 appends in one process held the whole session twice, once in
    the database and once in memory, for nothing (the row is read back like a loaded one)."""
    import gc
    import tracemalloc

    session = Session(SqliteSessionStorage.create(tmp_path / "s.db", cwd="/w", session_id="big"))
    text = "x" * 8000
    payload = 200 * len(text)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        ids = [session.append_message(UserMessage(text, timestamp=n)) for n in range(200)]
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < payload // 10, f"{held} bytes kept after appending {payload} bytes of messages"
    assert session.get_entry(ids[7]).message.content == text  # read back from its row
    assert len(session.build_context().messages) == 200
    session.close()


def test_reads_after_close_read_the_database_again(tmp_path):  # session.md §5: reads work after close
    """A closed SQLite session read its stored payloads on the closed connection: every entry not
    decoded before the close was ``SessionError("storage")`` (a JSONL session reopens its file)."""
    db = tmp_path / "s.db"
    with Session(SqliteSessionStorage.create(db, cwd="/w", session_id="one")) as first:
        loaded = [first.append_message(UserMessage(f"m{n}", timestamp=n)) for n in range(3)]
    session = Session(SqliteSessionStorage(db, "one"))
    appended = session.append_message(UserMessage("late", timestamp=9))
    session.storage._cache.clear()
    session.close()
    assert session.get_entry(loaded[1]).message.content == "m1"
    assert session.get_entry(appended).message.content == "late"
    assert [m.content for m in session.build_context().messages] == ["m0", "m1", "m2", "late"]
    assert session.get_session_stats().message_count == 4
    with pytest.raises(SessionError) as info:
        session.append_message(UserMessage("after", timestamp=10))
    assert info.value.code == "storage" and "closed" in str(info.value)

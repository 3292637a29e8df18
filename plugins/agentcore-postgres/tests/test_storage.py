"""PostgresSessionStorage beyond the conformance suite: transactional appends under SIGKILL, one
writer per session (and a crashed writer's lock released by the server), lost connections,
creation and ids, listing by index, deletion."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import textwrap
import time
import tracemalloc
import uuid

import psycopg
import pytest
from agentcore_postgres import PostgresSessionInfo, PostgresSessionStorage
from agentcore_postgres.storage import _LOCK_KEY
from conftest import PLUGIN, ROOT

if str(ROOT / "tests") not in sys.path:  # the core's test helpers, as test_dask_cluster.py imports them
    sys.path.append(str(ROOT / "tests"))
from _processes import append_in_forked_child  # noqa: E402

from agentcore.session import Session, SessionError, SessionLockedError  # noqa: E402
from agentcore.session.entries import LeafEntry, encode_line  # noqa: E402
from agentcore.types import TextContent, UserMessage  # noqa: E402


def U(text):
    return UserMessage([TextContent(text)], timestamp=1)


def text_of(entry):
    return entry.message.content[0].text


def backend_pid(storage):
    return storage._conn.info.backend_pid


def wait_for_lock_release(dsn, session_id):
    """Block until the server has released the session's writer lock (the holder's connection
    ended), by waiting for the lock itself; the statement timeout only bounds a broken test."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET statement_timeout = '60s'")
        conn.execute(f"SELECT pg_advisory_lock({_LOCK_KEY})", (session_id,))
        conn.execute(f"SELECT pg_advisory_unlock({_LOCK_KEY})", (session_id,))


def start_writer(dsn, session_id, body):
    """A subprocess holding ``Session(PostgresSessionStorage(dsn, session_id))`` as ``s``; it prints
    its server backend pid first. The DSN travels in the environment, never on a command line."""
    code = textwrap.dedent("""
        import os, sys
        from agentcore.session import Session
        from agentcore.types import TextContent, UserMessage
        from agentcore_postgres import PostgresSessionStorage
        s = Session(PostgresSessionStorage(os.environ["PG_DSN"], os.environ["PG_SESSION"]))
        print(s.storage._conn.info.backend_pid, flush=True)
    """) + textwrap.dedent(body)
    env = dict(
        os.environ,
        PG_DSN=dsn,
        PG_SESSION=session_id,
        PYTHONPATH=os.pathsep.join([str(ROOT), str(PLUGIN), os.environ.get("PYTHONPATH", "")]),
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stdin=subprocess.PIPE, env=env, text=True
    )
    return proc, int(proc.stdout.readline())


# --------------------------------------------------------------------------- transactional appends


def test_a_killed_writer_leaves_only_complete_entries(pg_dsn):
    sid = PostgresSessionStorage.create(pg_dsn, cwd="/w").session_id  # closed by the garbage collector
    wait_for_lock_release(pg_dsn, sid)
    # Large entries: the kill lands while a statement is being sent or committed most of the time.
    proc, _ = start_writer(
        pg_dsn,
        sid,
        """
        big = "x" * 300_000
        n = 0
        while True:
            s.append_message(UserMessage([TextContent(f"{n}:" + big)], timestamp=1))
            n += 1
            print(n, flush=True)
    """,
    )
    try:
        for _ in range(25):
            confirmed = int(proc.stdout.readline())
        os.kill(proc.pid, signal.SIGKILL)
        for line in proc.stdout:  # appends confirmed before the kill took effect
            confirmed = int(line)
    finally:
        proc.kill()
        proc.wait()
    wait_for_lock_release(pg_dsn, sid)  # the server released the dead writer's lock by itself
    with Session(PostgresSessionStorage(pg_dsn, sid)) as s:  # a writer can take over at once
        entries = s.entries()
        assert confirmed <= len(entries) <= confirmed + 1  # the last may have committed unconfirmed
        assert [text_of(e).split(":")[0] for e in entries] == [str(i) for i in range(len(entries))]
        assert all(len(text_of(e)) == len(f"{i}:") + 300_000 for i, e in enumerate(entries))
        assert len(s.build_context().messages) == len(entries)
        s.append_message(U("after the crash"))
    info = [i for i in PostgresSessionStorage.list_sessions(pg_dsn, cwd="/w", limit=1000) if i.id == sid]
    assert info[0].message_count == len(entries) + 1  # the counter moved with every committed row


def test_a_failed_statement_records_nothing(pg_dsn):
    with Session(PostgresSessionStorage.create(pg_dsn, cwd="/w")) as s:
        kept = s.append_message(U("kept"))
        with psycopg.connect(pg_dsn, autocommit=True) as other:  # a row appears under the next seq
            other.execute(
                "INSERT INTO agentcore_entries VALUES (%s, 2, 'intruder', NULL, 'custom', "
                "'2025-01-01T00:00:00.000Z', NULL, '{}')",
                (s.id,),
            )
        with pytest.raises(SessionError) as info:
            s.append_message(U("lost"))
        assert info.value.code == "storage" and "the entry was not recorded" in str(info.value)
        assert [e.id for e in s.entries()] == [kept] and s.leaf_id == kept


# --------------------------------------------------------------------------- one writer per session


def test_a_second_writer_is_refused_naming_the_holder_and_readers_work(pg_dsn):
    with Session(PostgresSessionStorage.create(pg_dsn, cwd="/w")) as s:
        first = s.append_message(U("one"))
        with pytest.raises(SessionLockedError) as info:
            PostgresSessionStorage(pg_dsn, s.id)
        message = str(info.value)
        assert f"session {s.id} is open for writing by agentcore pid {os.getpid()}" in message
        assert f"server backend {backend_pid(s.storage)}" in message and "read_only=True" in message
        with Session(PostgresSessionStorage(pg_dsn, s.id, read_only=True)) as reader:
            assert [e.id for e in reader.entries()] == [first]
            with pytest.raises(SessionError, match="read-only"):
                reader.append_message(U("no"))
        s.append_message(U("two"))  # the refused opener and the reader changed nothing
    with Session(PostgresSessionStorage(pg_dsn, s.id)) as again:  # closing released the lock
        assert len(again.entries()) == 2


def test_close_releases_the_lock_before_returning(pg_dsn):
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        for n in range(5):  # without an explicit unlock the backend usually still holds it here
            storage = PostgresSessionStorage(pg_dsn, f"close-{n}", create=True)
            storage.close()
            assert admin.execute(f"SELECT pg_try_advisory_lock({_LOCK_KEY})", (f"close-{n}",)).fetchone()[0]
            admin.execute(f"SELECT pg_advisory_unlock({_LOCK_KEY})", (f"close-{n}",))


def test_a_crashed_writers_lock_is_released_by_the_server(pg_dsn):
    sid = PostgresSessionStorage.create(pg_dsn, cwd="/w").session_id
    wait_for_lock_release(pg_dsn, sid)
    proc, pid = start_writer(
        pg_dsn,
        sid,
        """
        s.append_message(UserMessage([TextContent("before the crash")], timestamp=1))
        print("ready", flush=True)
        sys.stdin.readline()
    """,
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        with pytest.raises(SessionLockedError, match=f"server backend {pid}"):
            PostgresSessionStorage(pg_dsn, sid)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    wait_for_lock_release(pg_dsn, sid)
    with Session(PostgresSessionStorage(pg_dsn, sid)) as s:
        assert [text_of(e) for e in s.entries()] == ["before the crash"]


def test_a_lost_connection_is_a_lost_lock(pg_dsn):
    s = Session(PostgresSessionStorage.create(pg_dsn, cwd="/w"))
    kept = s.append_message(U("kept"))
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (backend_pid(s.storage),))
    with pytest.raises(SessionLockedError) as info:
        s.append_message(U("lost"))
    assert "connection to the server was lost" in str(info.value) and "reopen the session" in str(info.value)
    assert [e.id for e in s.entries()] == [kept]
    s.close()
    with Session(PostgresSessionStorage(pg_dsn, s.id)) as again:
        assert [e.id for e in again.entries()] == [kept]


def test_a_lost_connection_says_the_append_may_have_been_recorded(pg_dsn):
    """The connection can drop after the server committed the row and before the client heard: the
    error must not claim the entry was not recorded (a caller would append it again)."""
    s = Session(PostgresSessionStorage.create(pg_dsn, cwd="/w"))
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (backend_pid(s.storage),))
    with pytest.raises(SessionLockedError) as info:
        s.append_message(U("lost"))
    message = str(info.value)
    assert "may or may not have been recorded" in message and "was not recorded" not in message, message
    s.close()


class _InterruptedAfterCommit:
    """The storage's connection, raising KeyboardInterrupt once after an INSERT returned: what
    psycopg does when Ctrl+C lands after the server committed (it cancels, waits for the result,
    re-raises). On a real server that window is a synchronous-replication wait (reproduced with
    ``synchronous_standby_names`` set, which a shared test server must not be given)."""

    def __init__(self, conn):
        self._conn, self.armed = conn, True

    def execute(self, sql, *args, **kwargs):
        result = self._conn.execute(sql, *args, **kwargs)
        if self.armed and "INSERT" in sql:
            self.armed = False
            raise KeyboardInterrupt
        return result

    def __getattr__(self, name):
        return getattr(self._conn, name)


def test_an_append_interrupted_after_its_commit_does_not_wedge_the_session(pg_dsn):
    """The next append reused the committed row's seq: every append after it failed on the
    primary key until the session was reopened."""
    s = Session(PostgresSessionStorage.create(pg_dsn, cwd="/w"))
    s.append_message(U("one"))
    real = s.storage._conn
    s.storage._conn = _InterruptedAfterCommit(real)
    with pytest.raises(KeyboardInterrupt):
        s.append_message(U("two"))
    s.storage._conn = real
    s.append_message(U("three"))
    s.append_message(U("four"))
    assert [text_of(e) for e in s.entries()] == ["one", "three", "four"]
    s.close()
    with Session(PostgresSessionStorage(pg_dsn, s.id, read_only=True)) as again:
        assert [text_of(e) for e in again.entries()] == ["one", "two", "three", "four"]  # nothing lost
        assert [m.content[0].text for m in again.build_context().messages] == ["one", "three", "four"]
    [info] = [i for i in PostgresSessionStorage.list_sessions(pg_dsn, cwd="/w", limit=1000) if i.id == s.id]
    assert info.message_count == 4


def test_a_reader_losing_its_connection_is_not_told_of_a_writer_lock(pg_dsn):
    with Session(PostgresSessionStorage.create(pg_dsn, cwd="/w")) as writer:
        writer.append_message(U("one"))
    with Session(PostgresSessionStorage(pg_dsn, writer.id, read_only=True)) as reader:
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (backend_pid(reader.storage),))
        with pytest.raises(SessionError) as info:
            reader.build_context()  # the message payload is fetched now
        assert not isinstance(info.value, SessionLockedError) and info.value.code == "storage"
        assert "connection to the server was lost" in str(info.value) and "writer lock" not in str(info.value)


def with_lock_timeout(dsn):
    options = psycopg.conninfo.conninfo_to_dict(dsn).get("options", "")
    return psycopg.conninfo.make_conninfo(dsn, options=f"{options} -clock_timeout=100")


def test_a_timeout_while_opening_is_a_storage_error_not_a_locked_session(pg_dsn):
    """A statement or lock timeout during open (the connection is fine) was reported as a lost
    connection and a ``SessionLockedError``, which the command line words as another writer."""
    sid = PostgresSessionStorage.create(pg_dsn, cwd="/w").session_id
    wait_for_lock_release(pg_dsn, sid)
    with psycopg.connect(pg_dsn) as blocker:
        blocker.execute("LOCK TABLE agentcore_entries IN ACCESS EXCLUSIVE MODE")  # the load waits for it
        for read_only in (False, True):
            with pytest.raises(SessionError) as info:
                PostgresSessionStorage(with_lock_timeout(pg_dsn), sid, read_only=read_only)
            message = str(info.value)
            assert not isinstance(info.value, SessionLockedError) and info.value.code == "storage", message
            assert "cannot open the session" in message and "lock timeout" in message, message
            assert "connection to the server was lost" not in message, message
    with Session(PostgresSessionStorage(pg_dsn, sid)) as s:  # the failed opens left no lock behind
        s.append_message(U("after"))


def test_usage_totals_failures_are_session_errors(pg_dsn):
    """The usage query raised the driver's own exceptions, and a corrupt payload a bare ValueError."""
    from agentcore.types import AssistantMessage

    with Session(PostgresSessionStorage.create(pg_dsn, cwd="/w")) as s:
        s.append_message(U("q"))
        answer = s.append_message(AssistantMessage([TextContent("a")], timestamp=1))
    with Session(PostgresSessionStorage(with_lock_timeout(pg_dsn), s.id)) as again:
        with psycopg.connect(pg_dsn) as blocker:
            blocker.execute("LOCK TABLE agentcore_entries IN ACCESS EXCLUSIVE MODE")
            with pytest.raises(SessionError) as info:
                again.get_session_stats()
            assert info.value.code == "storage" and "lock timeout" in str(info.value)
        assert again.get_session_stats().message_count == 2  # nothing was kept: read again
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute(
            "UPDATE agentcore_entries SET payload = '{broken' WHERE session_id = %s AND id = %s", (s.id, answer)
        )
    with Session(PostgresSessionStorage(pg_dsn, s.id)) as broken:
        with pytest.raises(SessionError) as info:
            broken.get_session_stats()
        assert info.value.code == "invalid_entry" and f"entry {answer}, seq 2" in str(info.value)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_neither_uses_nor_releases_the_parents_connection(pg_dsn):
    """A forked child shares the parent's server connection (its socket). Its close() ran
    pg_advisory_unlock_all() and closed that connection: the parent lost its lock (another writer
    got in) and its server session (its next append failed). In the child an inherited handle now
    refuses to use the connection at all, and its close() touches nothing."""
    session = Session(PostgresSessionStorage.create(pg_dsn, cwd="/w"))
    first = session.append_message(U("one"))
    assert append_in_forked_child(session, U("from the child")), "the child's append was not refused"
    with pytest.raises(SessionLockedError):
        PostgresSessionStorage(pg_dsn, session.id)  # the parent still holds the lock
    second = session.append_message(U("two"))  # and its server session
    session.close()
    with Session(PostgresSessionStorage(pg_dsn, session.id, read_only=True)) as again:
        assert [e.id for e in again.entries()] == [first, second]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_killed_writers_lock_is_released_while_a_forked_child_of_it_runs(pg_dsn):
    """The child's copy of the writer's socket kept the server session, and so the lock, alive:
    the session stayed locked by a dead pid for as long as the child (a multiprocessing worker,
    say) ran."""
    sid = PostgresSessionStorage.create(pg_dsn, cwd="/w").session_id
    wait_for_lock_release(pg_dsn, sid)
    proc, _ = start_writer(
        pg_dsn,
        sid,
        """
        child = os.fork()
        if child == 0:
            sys.stdin.read()  # until the test closes the pipe
            os._exit(0)
        print(child, flush=True)
        sys.stdin.read()
    """,
    )
    child = int(proc.stdout.readline())
    try:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("SET statement_timeout = '10s'")  # released at once now; this bounds the old wait
            conn.execute(f"SELECT pg_advisory_lock({_LOCK_KEY})", (sid,))
            conn.execute(f"SELECT pg_advisory_unlock({_LOCK_KEY})", (sid,))
        with Session(PostgresSessionStorage(pg_dsn, sid)) as s:  # taken over while the child still runs
            s.append_message(U("after the crash"))
        os.kill(child, 0)
    finally:
        proc.stdin.close()
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass


# --------------------------------------------------------------------------- creation and ids


def test_ids_creation_and_not_found(pg_dsn):
    with PostgresSessionStorage(pg_dsn, cwd="/new") as fresh:  # no id: a new session
        assert fresh.header.cwd == "/new" and len(fresh.session_id) > 8
    with pytest.raises(SessionError) as info:
        PostgresSessionStorage(pg_dsn, "no-such-session")
    assert info.value.code == "not_found" and "create=True" in str(info.value)
    with PostgresSessionStorage(pg_dsn, "named-1", create=True) as made:
        assert made.session_id == "named-1"
        Session(made).append_message(U("hi"))
    with PostgresSessionStorage(pg_dsn, "named-1", create=True) as same:  # exists: opened, not replaced
        assert len(same) == 1
    with pytest.raises(SessionError) as info:
        PostgresSessionStorage.create(pg_dsn, "named-1")
    assert info.value.code == "already_exists"
    with pytest.raises(SessionError) as info:
        PostgresSessionStorage(pg_dsn, read_only=True)
    assert info.value.code == "not_found" and "needs a session_id" in str(info.value)


def test_create_with_lines_is_one_transaction(pg_dsn):
    with Session.in_memory() as source:
        source.append_message(U("a"))
        source.append_message(U("b"))
        lines = [source.storage.raw_line(i) for i in source.storage.entry_ids()]
    with Session(PostgresSessionStorage.create(pg_dsn, cwd="/w", lines=lines)) as s:
        assert [text_of(e) for e in s.entries()] == ["a", "b"]
        assert [s.storage.raw_line(i) for i in s.storage.entry_ids()] == lines  # byte for byte
    with pytest.raises(SessionError) as info:
        PostgresSessionStorage.create(pg_dsn, "dup-lines", lines=lines + lines)  # duplicate entry ids
    assert info.value.code == "invalid_entry" and info.value.line == 3
    assert "imported line 3" in str(info.value) and "nothing imported" in str(info.value)
    with pytest.raises(SessionError) as info:
        PostgresSessionStorage(pg_dsn, "dup-lines")
    assert info.value.code == "not_found"  # nothing written: no half-made session


def test_an_imported_named_session_is_listed_and_found_by_its_name(fresh_dsn):
    """Imported lines set the message count but not the name: a named session forked or imported
    was listed unnamed, and list_sessions(name=...) never found it."""
    with Session.in_memory() as source:
        source.set_name("first name")
        source.append_message(U("a"))
        source.set_name("imported\r\nchat \x00")  # the last one wins, cleaned as an append cleans it
        lines = [source.storage.raw_line(i) for i in source.storage.entry_ids()]
    with PostgresSessionStorage.create(fresh_dsn, cwd="/w", lines=lines) as made:
        pass
    [info] = PostgresSessionStorage.list_sessions(fresh_dsn, name="CHAT")
    assert (info.id, info.name, info.message_count) == (made.session_id, "imported chat \\u0000", 1)


def test_imported_lines_that_would_not_open_are_refused_and_nothing_is_written(fresh_dsn):
    """A leaf move to an entry the lines do not hold was committed, and the session it made could
    never be opened (invalid_session), nor deleted, yet stayed listed; a duplicate entry id was the
    server's unique-key violation, a storage error naming no line."""
    leaf = LeafEntry(id="moved", parent_id=None, timestamp="2025-01-01T00:00:00.000Z", target_id="missing")
    with pytest.raises(SessionError) as info:
        PostgresSessionStorage.create(fresh_dsn, "dangling", cwd="/w", lines=[encode_line(leaf.to_dict())])
    assert info.value.code == "invalid_session" and "missing" in str(info.value)
    assert "nothing imported" in str(info.value)
    assert PostgresSessionStorage.list_sessions(fresh_dsn) == []


def test_ids_postgresql_text_cannot_hold_are_refused_by_name(pg_dsn):
    """A lone surrogate reached the driver, which raised a bare UnicodeEncodeError."""
    for sid in ("id\udcffx", "id\x00x"):
        with pytest.raises(ValueError, match="holds a NUL character or a lone surrogate"):
            PostgresSessionStorage(pg_dsn, sid, create=True)
        with pytest.raises(ValueError, match="session id"):
            PostgresSessionStorage.create(pg_dsn, sid)
    with pytest.raises(ValueError, match="parent session id"):
        PostgresSessionStorage.create(pg_dsn, parent_session="p\udcff")
    line = b'{"type":"message","id":"a\\ud800","parentId":null,"timestamp":"2025-01-01T00:00:00.000Z",' + (
        b'"message":{"role":"user","content":"x","timestamp":1}}'
    )
    with pytest.raises(SessionError) as info:
        PostgresSessionStorage.create(pg_dsn, lines=[line])
    assert info.value.code == "invalid_entry" and "imported line 1" in str(info.value)


# --------------------------------------------------------------------------- listing and deleting


def test_listing_and_searching(fresh_dsn):
    made = []
    for n, (cwd, name) in enumerate([("/a", "Fix the parser"), ("/b", None), ("/a", "Write 100% docs")]):
        with Session(PostgresSessionStorage(fresh_dsn, f"s{n}", create=True, cwd=cwd)) as s:
            for _ in range(n + 1):
                s.append_message(U("m"))
            if name:
                s.set_name(name)
            made.append(s.id)
    listed = PostgresSessionStorage.list_sessions(fresh_dsn)
    assert {i.id for i in listed} == set(made)
    assert [i.created for i in listed] == sorted((i.created for i in listed), reverse=True)
    by_id = {i.id: i for i in listed}
    assert by_id["s2"] == PostgresSessionInfo("s2", "/a", by_id["s2"].created, None, "Write 100% docs", 3)
    assert [i.id for i in PostgresSessionStorage.list_sessions(fresh_dsn, cwd="/b")] == ["s1"]
    assert [i.id for i in PostgresSessionStorage.list_sessions(fresh_dsn, name="PARSER")] == ["s0"]
    assert [i.id for i in PostgresSessionStorage.list_sessions(fresh_dsn, name="100%")] == ["s2"]
    assert PostgresSessionStorage.list_sessions(fresh_dsn, name="x%") == []  # % is literal, not a wildcard
    assert len(PostgresSessionStorage.list_sessions(fresh_dsn, limit=2)) == 2


def test_listing_is_an_index_query(fresh_dsn):
    with PostgresSessionStorage(fresh_dsn, "one", create=True):
        pass
    with psycopg.connect(fresh_dsn, autocommit=True) as conn:
        conn.execute("SET enable_seqscan = off")  # a table this small would be scanned otherwise
        conn.execute("SET enable_bitmapscan = off")
        for where, index in (("", "agentcore_sessions_by_created"), ("WHERE cwd = 'x'", "agentcore_sessions_by_cwd")):
            plan = "\n".join(
                r[0]
                for r in conn.execute(
                    f"EXPLAIN SELECT id FROM agentcore_sessions {where} ORDER BY created DESC, id DESC LIMIT 100"
                )
            )
            assert f"Scan using {index}" in plan and "Sort" not in plan, plan  # read in index order


def test_delete_session(pg_dsn):
    with Session(PostgresSessionStorage(pg_dsn, "to-delete", create=True)) as s:
        s.append_message(U("x"))
        with pytest.raises(SessionLockedError):
            PostgresSessionStorage.delete_session(pg_dsn, "to-delete")
    PostgresSessionStorage.delete_session(pg_dsn, "to-delete")
    with pytest.raises(SessionError) as info:
        PostgresSessionStorage.delete_session(pg_dsn, "to-delete")
    assert info.value.code == "not_found"
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM agentcore_entries WHERE session_id = 'to-delete'").fetchone()[0] == 0


def test_a_session_that_cannot_be_opened_can_be_deleted(pg_dsn):
    """delete_session opened the session to lock it, so one whose header or an entry was corrupt
    (invalid_session / invalid_entry on open) could never be deleted, as it can in SQLite."""
    ids = []
    for corrupt in (
        "UPDATE agentcore_sessions SET header = 'not json' WHERE id = %s",
        "INSERT INTO agentcore_entries VALUES (%s, 1, 'x', NULL, 'model_change', 't', NULL, '{cut')",
    ):
        with PostgresSessionStorage(pg_dsn, cwd="/w") as made:
            ids.append(made.session_id)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(corrupt, (ids[-1],))
        with pytest.raises(SessionError) as info:
            PostgresSessionStorage(pg_dsn, ids[-1])
        assert info.value.code in ("invalid_session", "invalid_entry")
        PostgresSessionStorage.delete_session(pg_dsn, ids[-1])
    with psycopg.connect(pg_dsn) as conn:
        for table, column in (("agentcore_sessions", "id"), ("agentcore_entries", "session_id")):
            query = f"SELECT count(*) FROM {table} WHERE {column} = ANY(%s)"
            assert conn.execute(query, (ids,)).fetchone()[0] == 0


def test_deleting_a_session_open_for_writing_deletes_nothing(pg_dsn):
    with Session(PostgresSessionStorage(pg_dsn, cwd="/w")) as s:
        kept = s.append_message(U("kept"))
        with pytest.raises(SessionLockedError) as info:
            PostgresSessionStorage.delete_session(pg_dsn, s.id)
        assert "nothing was deleted" in str(info.value) and f"pid {os.getpid()}" in str(info.value)
        s.append_message(U("still writable"))
    with PostgresSessionStorage(pg_dsn, s.id) as again:  # the delete let go of the lock at once
        assert again.entry_ids()[0] == kept and len(again) == 2


def test_a_cwd_or_name_postgresql_text_cannot_hold_is_listed_escaped(fresh_dsn):
    """A non-UTF-8 directory (os.getcwd() gives lone surrogates) made opening raise a bare
    UnicodeEncodeError; a name with NUL or half an emoji made set_name fail. The header and the
    entries keep the exact text; the listing columns hold JSON escapes, and listing filters alike."""
    cwd = "/srv/caf\udce9"
    with Session(PostgresSessionStorage(fresh_dsn, cwd=cwd)) as s:
        s.append_message(U("x"))
        s.set_name("half \ud83d and nul \x00")
    with Session(PostgresSessionStorage(fresh_dsn, s.id, read_only=True)) as again:
        assert again.storage.header.cwd == cwd and again.name == "half \ud83d and nul \x00"
    [info] = PostgresSessionStorage.list_sessions(fresh_dsn, cwd=cwd)
    assert (info.id, info.cwd, info.name) == (s.id, "/srv/caf\\udce9", "half \\ud83d and nul \\u0000")
    assert [i.id for i in PostgresSessionStorage.list_sessions(fresh_dsn, name="\ud83d and nul \x00")] == [s.id]


def test_an_entry_column_postgresql_text_cannot_hold_is_refused_by_name(pg_dsn):
    """A message role holding a lone surrogate (a JSON client's "\\udcff") reached the driver, which
    raised a bare UnicodeEncodeError; a NUL got the server's words, naming no field."""
    s = Session(PostgresSessionStorage(pg_dsn, cwd="/w"))
    try:
        for role in ("r\udcff", "r\x00"):
            with pytest.raises(SessionError) as info:
                s.append_message({"role": role, "content": "x", "timestamp": 1})
            assert info.value.code == "invalid_payload"
            assert f"message role {role!r}" in str(info.value) and "not recorded" in str(info.value)
        kept = s.append_message(U("after"))
        assert s.storage.entry_ids() == [kept]
    finally:
        s.close()
    with PostgresSessionStorage(pg_dsn, s.id, read_only=True) as reader:
        assert reader.entry_ids() == [kept] and text_of(reader.get_entry(kept)) == "after"


def _backend_waiting_for_a_lock(admin, within=30.0):
    """The server pid of this process's connection that waits for a table lock, polled until there
    is one (another process's state: no event to wait for)."""
    import time

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        row = admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name LIKE %s AND wait_event_type = 'Lock'",
            (f"agentcore pid {os.getpid()} %",),
        ).fetchone()
        if row:
            return row[0]
        time.sleep(0.01)
    raise AssertionError("no connection of this process waited for the table lock")


@pytest.mark.parametrize("failure", ["lock timeout", "lost connection"])
def test_a_failed_open_names_the_session_even_while_creating_it(pg_dsn, failure):
    """A server opening many users' sessions must tell whose open failed: one that failed while
    the session row was being inserted (``create=True``) said ``session None`` when the connection
    was lost, and named no session at all for any other database error."""
    import threading

    sid = f"created-{failure.replace(' ', '-')}-{os.getpid()}"
    PostgresSessionStorage.create(pg_dsn, cwd="/w").close()  # the tables exist: the insert is what waits
    errors = []

    def open_it(dsn):
        try:
            PostgresSessionStorage(dsn, sid, create=True)
        except SessionError as exc:
            errors.append(exc)

    with psycopg.connect(pg_dsn) as blocker, psycopg.connect(pg_dsn, autocommit=True) as admin:
        blocker.execute("LOCK TABLE agentcore_sessions IN ACCESS EXCLUSIVE MODE")  # the insert waits for it
        if failure == "lock timeout":
            open_it(with_lock_timeout(pg_dsn))
        else:
            opener = threading.Thread(target=open_it, args=(pg_dsn,))
            opener.start()
            admin.execute("SELECT pg_terminate_backend(%s)", (_backend_waiting_for_a_lock(admin),))
            opener.join(30)
    [error] = errors
    message = str(error)
    assert f"session {sid}: cannot open the session" in message, message
    assert "session None" not in message, message


# --------------------------------------------------------------------------- a long life


def test_a_writer_keeps_no_line_it_appended(pg_dsn):
    """A writing handle kept every line it appended (about the session's size: 4.4 KB per entry
    here, against 0.4 KB for a fresh open of the same session); it now reads them back from their
    rows like a loaded entry's."""
    count, text = 300, "x" * 4000
    with Session(PostgresSessionStorage.create(pg_dsn, cwd="/w")) as s:
        gc.collect()
        tracemalloc.start()
        try:
            start = tracemalloc.get_traced_memory()[0]
            ids = [s.append_message(U(f"{text}{n}")) for n in range(count)]
            gc.collect()
            writer = tracemalloc.get_traced_memory()[0] - start
            ids = ids[-1:]  # drop the list of ids before the fresh open is measured
            start = tracemalloc.get_traced_memory()[0]
            fresh = PostgresSessionStorage(pg_dsn, s.id, read_only=True)
            gc.collect()
            opened = tracemalloc.get_traced_memory()[0] - start
        finally:
            tracemalloc.stop()
        fresh.close()
        assert writer / count < opened / count + 1000, (writer / count, opened / count)
        assert text_of(s.get_entry(ids[-1])) == f"{text}{count - 1}"  # read back from its row
        assert s.storage.raw_line(ids[-1]) == encode_line(s.get_entry(ids[-1]).to_dict())[:-1]


def test_reads_after_close_fetch_what_is_not_in_memory(pg_dsn):
    """Session.close says reads still work afterwards; a closed handle failed ("is closed") for any
    payload it had not read yet: every message of a reopened session, the usage totals."""
    from agentcore.types import AssistantMessage

    with Session(PostgresSessionStorage.create(pg_dsn, cwd="/w")) as s:
        first = s.append_message(U("one"))
        s.append_message(AssistantMessage([TextContent("two")], timestamp=1))
    reopened = Session(PostgresSessionStorage(pg_dsn, s.id))
    reopened.close()
    reader = Session(PostgresSessionStorage(pg_dsn, s.id, read_only=True))
    reader.close()
    for closed in (s, reopened, reader):
        assert closed.storage._conn is None
        assert [text_of(e) for e in closed.entries()] == ["one", "two"]
        assert b'"one"' in closed.storage.raw_line(first)
        assert closed.get_session_stats().message_count == 2
    with Session(PostgresSessionStorage(pg_dsn, s.id)) as again:  # the reads took no lock
        again.append_message(U("three"))


def test_a_read_after_close_that_cannot_connect_is_a_password_free_session_error(pg_dsn):
    role, secret = f"t_{uuid.uuid4().hex[:12]}", f"pw-{uuid.uuid4().hex}"
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN SUPERUSER PASSWORD '{secret}'")
        try:
            dsn = psycopg.conninfo.make_conninfo(pg_dsn, user=role, password=secret)
            with Session(PostgresSessionStorage.create(dsn, cwd="/w")) as s:
                s.append_message(U("one"))
            admin.execute(f"ALTER ROLE {role} NOLOGIN")  # the server now refuses this user
            with pytest.raises(SessionError) as info:
                s.entries()
        finally:
            admin.execute(f"REASSIGN OWNED BY {role} TO CURRENT_USER")
            admin.execute(f"DROP OWNED BY {role}")
            admin.execute(f"DROP ROLE {role}")
    message = str(info.value)
    assert info.value.code == "storage" and "cannot connect to PostgreSQL" in message, message
    assert f"{role}@" in message and "not permitted to log in" in message, message
    for text in (message, repr(info.value), repr(s.storage), repr(vars(s.storage))):
        assert secret not in text, text


def test_a_handle_outlives_the_servers_idle_session_timeout(pg_dsn):
    """With ``idle_session_timeout`` set (here through the DSN; an administrator sets it for a
    role or the server), the server ended a writer's connection while its user thought, and
    with it the writer lock: the next append was refused (and a reader's reads failed)."""
    options = psycopg.conninfo.conninfo_to_dict(pg_dsn).get("options", "")
    dsn = psycopg.conninfo.make_conninfo(pg_dsn, options=f"{options} -cidle_session_timeout=100")
    with Session(PostgresSessionStorage.create(dsn, cwd="/w")) as s:
        s.append_message(U("before the pause"))
        with Session(PostgresSessionStorage(dsn, s.id, read_only=True)) as reader:
            time.sleep(0.5)  # idle for five times the timeout: what is measured is the pause itself
            s.append_message(U("after the pause"))
            assert [text_of(e) for e in reader.entries()] == ["before the pause"]
        with pytest.raises(SessionLockedError):
            PostgresSessionStorage(pg_dsn, s.id)  # the writer still holds its lock


def test_a_handle_whose_connection_was_lost_reads_over_a_new_one(pg_dsn):
    """A lost connection (a server restart, an idle timeout, here pg_terminate_backend) left a
    reader unable to read anything not in memory until it was reopened, though it holds no lock:
    the read that finds the connection lost fails, the next ones read over a new connection."""
    with Session(PostgresSessionStorage.create(pg_dsn, cwd="/w")) as writer:
        writer.append_message(U("one"))
    with Session(PostgresSessionStorage(pg_dsn, writer.id, read_only=True)) as reader:
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (backend_pid(reader.storage),))
        with pytest.raises(SessionError, match="connection to the server was lost"):
            reader.entries()
        assert [text_of(e) for e in reader.entries()] == ["one"]
        assert reader.get_session_stats().message_count == 1

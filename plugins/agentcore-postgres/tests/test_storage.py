"""PostgresSessionStorage beyond the conformance suite: transactional appends under SIGKILL, one
writer per session (and a crashed writer's lock released by the server), lost connections,
creation and ids, listing by index, deletion."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import psycopg
import pytest
from agentcore_postgres import PostgresSessionInfo, PostgresSessionStorage
from agentcore_postgres.storage import _LOCK_KEY
from conftest import PLUGIN, ROOT

if str(ROOT / "tests") not in sys.path:  # the core's test helpers, as test_dask_cluster.py imports them
    sys.path.append(str(ROOT / "tests"))
from _processes import append_in_forked_child  # noqa: E402

from agentcore.session import Session, SessionError, SessionLockedError  # noqa: E402
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
    assert info.value.code == "storage"
    with pytest.raises(SessionError) as info:
        PostgresSessionStorage(pg_dsn, "dup-lines")
    assert info.value.code == "not_found"  # rolled back: no half-made session


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

"""Session crash safety and multi-process locking (issue 5 corruption cases; spec session.md §4.4, §9.6).

Child processes are plain ``python -c`` subprocesses; ordering uses their stdout ("ready" lines) and
the file's growth, never a sleep alone.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentcore.session import Session, SessionLockedError, SqliteSessionStorage

ROOT = str(Path(__file__).resolve().parents[1])

HOLDER = """
import sys
from agentcore.session import Session, SqliteSessionStorage
kind, path = sys.argv[1], sys.argv[2]
if kind == "jsonl":
    s = Session.open(path)
else:
    s = Session(SqliteSessionStorage(path))
print("ready", flush=True)
sys.stdin.readline()
s.close()
print("closed", flush=True)
"""

WRITER = """
import sys
from agentcore.session import Session
from agentcore.types import UserMessage
s = Session.open(sys.argv[1])
print("ready", flush=True)
for n in range(10000):
    s.append_message(UserMessage("message %05d " % n + "x" * 200, timestamp=n))
print("done", flush=True)
"""


def _spawn(code, *args):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen(
        [sys.executable, "-c", code, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )


def _create(tmp_path, kind):
    """A new, closed session file of ``kind`` ("jsonl" or "sqlite"); returns its path."""
    if kind == "jsonl":
        path = tmp_path / "locked.jsonl"
        Session.create(path, cwd="/w").close()
    else:
        path = tmp_path / "locked.db"
        SqliteSessionStorage.create(path, cwd="/w").close()
    return path


def _open_writer(kind, path):
    return Session.open(path) if kind == "jsonl" else Session(SqliteSessionStorage(path))


@pytest.mark.skipif(sys.platform.startswith("win"), reason="advisory locks are POSIX-only (documented)")
@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_second_writer_process_gets_a_clear_error(tmp_path, kind):  # issue 5: a file locked by another process
    path = _create(tmp_path, kind)
    child = _spawn(HOLDER, kind, str(path))
    try:
        assert child.stdout.readline().strip() == "ready"
        with pytest.raises(SessionLockedError) as info:
            Session.open(path) if kind == "jsonl" else SqliteSessionStorage(path)
        message = str(info.value)
        assert str(path) in message and "read_only=True" in message
        with (
            Session.open(path, read_only=True)
            if kind == "jsonl"
            else Session(SqliteSessionStorage(path, read_only=True))
        ) as reader:  # readers never lock
            assert reader.entries() == []
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "closed"
    finally:
        child.stdin.close()
        child.wait(timeout=30)
    opened = _open_writer(kind, path)
    opened.append_custom("after", 1)  # the lock is free once the holder closed
    opened.close()


def test_second_writer_in_the_same_process_is_refused(tmp_path):
    path = tmp_path / "s.jsonl"
    first = Session.create(path, cwd="/w")
    with pytest.raises(SessionLockedError):
        Session.open(path)
    first.close()
    Session.open(path).close()


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_a_writer_collected_without_close_frees_the_session(tmp_path, kind):  # a notebook cell re-run
    """A JSONL file's lock went with its descriptor, but an SQLite handle collected without
    close() kept its writer lease until the process exited: re-running the cell that opened it
    raised "open for writing by another Session in this process" until the kernel restarted."""
    if kind == "jsonl":
        path = tmp_path / "s.jsonl"
        Session.create(path, cwd="/w").close()

        def open_writer() -> Session:
            return Session.open(path)
    else:
        path = tmp_path / "s.db"
        Session(SqliteSessionStorage.create(path, session_id="t1")).close()

        def open_writer() -> Session:
            return Session(SqliteSessionStorage(path, session_id="t1"))

    first = open_writer()
    first.append_custom("from the first cell", 1)
    with pytest.raises(SessionLockedError):
        open_writer()  # while it is alive, a second writer is refused as before
    del first
    gc.collect()
    again = open_writer()  # the re-run cell
    again.append_custom("from the re-run", 2)
    again.close()
    with open_writer() as reopened:
        assert [e.custom_type for e in reopened.entries()] == ["from the first cell", "from the re-run"]


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkill_during_appends_loses_no_complete_entry(tmp_path):  # issue 5: SIGKILL mid 10,000 appends
    path = tmp_path / "crash.jsonl"
    Session.create(path, cwd="/w").close()
    header_size = path.stat().st_size
    child = _spawn(WRITER, str(path))
    try:
        assert child.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 60
        while path.stat().st_size < header_size + 200_000 and child.poll() is None:
            assert time.monotonic() < deadline, "the writer did not make progress"
            time.sleep(0.01)
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(timeout=30)
        child.stdout.close()
        child.stdin.close()
    raw = path.read_bytes()
    complete = raw[: raw.rfind(b"\n") + 1].splitlines()[1:]
    assert len(complete) > 0
    with Session.open(path) as s:
        entries = s.entries()
        assert len(entries) == len(complete)  # every complete line, nothing partial
        assert [e.message.timestamp for e in entries] == list(range(len(entries)))
        assert all(b.parent_id == a.id for a, b in zip(entries, entries[1:]))
        assert s.leaf_id == entries[-1].id
        s.append_message({"role": "user", "content": "after the crash", "timestamp": 1})
    repaired = path.read_bytes()
    assert repaired.endswith(b"\n")
    for line in repaired.splitlines():
        json.loads(line)


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_lock_of_a_killed_process_is_taken_over(tmp_path, kind):  # jsonl: flock dies with its process; sqlite: lease
    path = _create(tmp_path, kind)
    child = _spawn(HOLDER, kind, str(path))
    assert child.stdout.readline().strip() == "ready"
    child.kill()
    child.wait(timeout=30)
    child.stdout.close()
    child.stdin.close()
    with _open_writer(kind, path) as s:
        s.append_custom("x", 1)
        assert len(s.entries()) == 1


def test_a_lease_an_earlier_process_with_this_pid_left_is_taken_over(tmp_path):  # sqlite lease
    """A lease naming this pid and host was always taken for another Session of this process: one
    left by a process that crashed and had the same pid (a container's PID 1, restarted with its
    hostname) locked the session against every later writer, for ever."""
    import socket
    import sqlite3

    path = _create(tmp_path, "sqlite")
    with Session(SqliteSessionStorage(path)) as first:
        session_id = first.id
    conn = sqlite3.connect(path)
    with conn:  # what the crashed process left: its lease, never deleted
        conn.execute(
            "INSERT INTO writer_leases VALUES (?,?,?,?,?)",
            (session_id, "token-of-the-earlier-process", os.getpid(), socket.gethostname(), 1),
        )
    conn.close()
    with _open_writer("sqlite", path) as s:
        s.append_custom("x", 1)
        with pytest.raises(SessionLockedError, match="another Session in this process"):
            _open_writer("sqlite", path)  # a live handle of this process still locks it
    with _open_writer("sqlite", path) as s:
        assert len(s.entries()) == 1


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to tell processes apart")
@pytest.mark.parametrize("left_by", ["a process whose pid is reused", "a process of an earlier boot"])
def test_a_lease_whose_pid_another_process_now_has_is_taken_over(tmp_path, left_by):  # sqlite lease
    """A writer that crashed (or whose machine rebooted) left its lease; the pid it names belongs
    to another, live process now. The lease counted as held by that process, so the session could
    not be opened for writing (nor deleted) until that unrelated process ended, maybe never."""
    import socket
    import sqlite3

    path = _create(tmp_path, "sqlite")
    with Session(SqliteSessionStorage(path)) as first:
        session_id = first.id
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    namespace = os.readlink("/proc/self/ns/pid")
    start = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19]  # field 22: start time
    record = f"{boot}/{namespace}/{int(start) + 1}" if left_by.endswith("reused") else f"other-boot/{namespace}/{start}"
    unrelated = _spawn(HOLDER, "jsonl", str(_create(tmp_path, "jsonl")))  # alive, holding nothing of ours
    try:
        assert unrelated.stdout.readline().strip() == "ready"
        conn = sqlite3.connect(path)
        with conn:  # the crashed writer's lease, naming the pid the unrelated process has now
            conn.execute(
                "INSERT INTO writer_leases VALUES (?,?,?,?,?)",
                (session_id, f"token-of-the-crashed-writer@{record}", unrelated.pid, socket.gethostname(), 1),
            )
        conn.close()
        with _open_writer("sqlite", path) as s:
            s.append_custom("resumed", 1)
    finally:
        unrelated.stdin.close()
        unrelated.wait(timeout=30)
        unrelated.stdout.close()
    with _open_writer("sqlite", path) as s:
        assert [e.custom_type for e in s.entries()] == ["resumed"]


def _zombie(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to see a zombie")
@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_a_killed_writer_not_yet_reaped_frees_the_session(tmp_path, kind):  # resume after the OOM killer
    """A writer killed with SIGKILL stays a zombie until its parent waits for it (for ever under an
    init that does not reap): its JSONL lock went with it, but its SQLite lease counted as held by
    a live process, so resuming the session raised SessionLockedError "open for writing by process N"."""
    path = _create(tmp_path, kind)
    child = _spawn(HOLDER, kind, str(path))
    try:
        assert child.stdout.readline().strip() == "ready"
        child.send_signal(signal.SIGKILL)
        deadline = time.monotonic() + 30
        while not _zombie(child.pid):  # killed, and not reaped: child.wait() comes last
            assert time.monotonic() < deadline, "the killed child never became a zombie"
            time.sleep(0.01)
        with _open_writer(kind, path) as s:
            s.append_custom("resumed", 1)
    finally:
        child.wait(timeout=30)
        child.stdout.close()
        child.stdin.close()
    with _open_writer(kind, path) as s:
        assert [e.custom_type for e in s.entries()] == ["resumed"]


def test_a_session_another_process_writes_is_not_deleted_under_it(tmp_path):  # sqlite lease
    """``SqliteSessionStorage.delete_session`` deleted a session whose writer lease a live process
    held (a JSONL file open for writing is refused with SessionLockedError): the writer's next
    append failed with "lost its writer lease; reopen the session", and there was nothing to reopen."""
    path = _create(tmp_path, "sqlite")
    with Session(SqliteSessionStorage(path)) as first:
        session_id = first.id
        first.append_custom("recorded", 1)
    child = _spawn(HOLDER, "sqlite", str(path))
    try:
        assert child.stdout.readline().strip() == "ready"
        with pytest.raises(SessionLockedError, match=f"process {child.pid} on .*nothing was deleted"):
            SqliteSessionStorage.delete_session(path, session_id)
        with Session(SqliteSessionStorage(path, read_only=True)) as reader:
            assert [e.custom_type for e in reader.entries()] == ["recorded"]
    finally:
        child.kill()  # the lease it leaves is stale, as every lease of a crashed process
        child.wait(timeout=30)
        child.stdout.close()
        child.stdin.close()
    with _open_writer("sqlite", path):  # a Session of this process holds it now
        with pytest.raises(SessionLockedError, match="another Session in this process"):
            SqliteSessionStorage.delete_session(path, session_id)
    SqliteSessionStorage.delete_session(path, session_id)  # closed: deleted
    assert SqliteSessionStorage.list_sessions(path) == []

"""SQLite session storage (stdlib ``sqlite3``): many sessions in one database file.

Same semantics as the JSONL storage: each row's ``payload`` is byte for byte the JSONL line of the
entry, rows are ordered by ``seq`` (append order), and the tree index is rebuilt from the rows at
open (message payloads are fetched when first read; an appended entry's payload too, so a writing
handle holds no more per entry than an open does). Every append is one transaction; memory is
updated only after it committed. Reads after :meth:`~SqliteSessionStorage.close` fetch payloads
over a read-only connection opened for the time of the read, as a closed JSONL session reopens its
file.

One writer per session: opening for writing takes a lease row (``writer_leases``) naming this
process; a second writer whose lease holder is alive gets :class:`SessionLockedError`. A lease left
by a crashed process on this host is taken over, also while that process is an unreaped zombie
(killed, its parent not yet waiting for it) and when it had this process's pid (a container's PID 1
restarted: this process knows the leases its own handles hold), and when its pid now belongs to
another process (the machine rebooted, or the pid was reused: the lease records the writer's boot
id and start time where ``/proc`` has them). Staleness never depends on the wall clock.
``read_only=True`` takes no lease.

Indexes are the two keys only: ``(session_id, seq)`` and ``(session_id, id)``. The tree is indexed
in memory, so no query here needs ``parent_id``; an index on it (databases made before this
version have ``entries_by_parent``, left as it is) costs a fourth B-tree page per append, about a
quarter of a bare INSERT's time (``benchmarks/session_scale.py``).

Opening checks the schema before changing anything: a new or empty database gets the tables (and
WAL), one of another application is refused untouched (:func:`_check_schema`).

The database runs in WAL mode. ``fsync``: ``"never"``/``"close"`` use ``synchronous=NORMAL``
(committed appends survive a process crash; an OS crash or power loss may lose the latest ones but
leaves the database intact), ``"always"`` uses ``synchronous=FULL``. ``synchronous=OFF`` is not
used even for ``"never"``: an OS crash could then corrupt the whole database, every session in it.

Checkpoints (copying the WAL back into the database file, with its disk flushes) do not run inside
an append: a writing handle turns SQLite's automatic checkpoint off on its connection and, once its
appends have written about as many WAL pages as SQLite's default threshold (1000), runs a
``PASSIVE`` checkpoint on a daemon thread over a short-lived connection of its own (one at a time
per handle; :meth:`~SqliteSessionStorage.close` waits for it). Durability is the same (a commit is
in the WAL either way); the WAL stays about as small as with SQLite's default. Without this an
append paid about half of its time for the checkpoints (``benchmarks/session_scale.py``). The
checkpoint step never fails a committed append: when its thread cannot start (a thread limit, an
append made during interpreter shutdown) it is skipped until the next threshold (DEBUG log).

Threads and processes: :meth:`~SqliteSessionStorage.close` waits for an append in flight on
another thread (the storage's ``_io_lock``; appends and reads use the connection read once under
it), so an append is committed or refused with ``SessionError``, never cut off by the close. A
handle belongs to the process that opened it: SQLite connections must not be used, nor even closed,
in a forked child, so there appends and reads of stored payloads are refused
(``SessionError("storage")``) and ``close()`` (or collecting the handle) only drops the child's
reference to the connection, kept unclosed until the child exits: the parent's writer lease stays.

Logging (logger ``agentcore.session.sqlite``): DEBUG for each open and create (path, session id,
entry count).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pathlib
import socket
import sqlite3
import sys
import threading
import time
import uuid
import weakref
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Iterator, List, Optional, Set, Tuple, Union

from .. import streams
from .._surrogates import HAS_SURROGATE, escape_lone_surrogates
from . import process_state
from .context import UsageTotals
from .entries import (
    SessionEntry,
    SessionHeader,
    encode_line,
    header_from_dict,
    new_header,
)
from .errors import SessionError, SessionLockedError
from .storage import (
    EAGER_TYPES,
    IndexNode,
    SessionStorage,
    check_imported_rows,
    entry_row,
    import_rows,
    unstorable_column,
)

__all__ = ["SqliteSessionStorage", "SqliteSessionInfo"]

SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS schema_version(version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS sessions(
    id TEXT PRIMARY KEY, header TEXT NOT NULL, cwd TEXT NOT NULL, created TEXT NOT NULL,
    parent_session TEXT);
CREATE TABLE IF NOT EXISTS entries(
    session_id TEXT NOT NULL, seq INTEGER NOT NULL, id TEXT NOT NULL, parent_id TEXT,
    type TEXT NOT NULL, timestamp TEXT NOT NULL, role TEXT, payload TEXT NOT NULL,
    PRIMARY KEY(session_id, seq), UNIQUE(session_id, id));
CREATE TABLE IF NOT EXISTS writer_leases(
    session_id TEXT PRIMARY KEY, owner TEXT NOT NULL, pid INTEGER NOT NULL, host TEXT NOT NULL,
    acquired_ms INTEGER NOT NULL);
"""
#: The columns of our tables (a database whose table of that name lacks one is not ours).
_COLUMNS = {
    "schema_version": {"version"},
    "sessions": {"id", "header", "cwd", "created", "parent_session"},
    "entries": {"session_id", "seq", "id", "parent_id", "type", "timestamp", "role", "payload"},
    "writer_leases": {"session_id", "owner", "pid", "host", "acquired_ms"},
}
_EAGER_SQL = ",".join(f"'{t}'" for t in sorted(EAGER_TYPES))


@dataclass(frozen=True)
class SqliteSessionInfo:
    """One session of a database, as listed by :meth:`SqliteSessionStorage.list_sessions`."""

    id: str
    cwd: str
    created: str
    parent_session: Optional[str]
    message_count: int


_log = logging.getLogger(__name__)

#: Connections a forked child inherited and let go of: never closed there (SQLite: "do not even
#: call sqlite3_close() on a database connection from a child process if the connection was
#: opened in the parent"), so kept referenced until the child exits.
_INHERITED: List[sqlite3.Connection] = []

#: Owner tokens of the writer leases this process holds (added before a lease is written, dropped
#: when it is released): a lease that names this pid and host with another token was left by an
#: earlier process that had the same pid (a container's PID 1 after a crash and restart), not by
#: another Session of this one, and is taken over like any lease of a process that is gone.
_OWNERS: Set[str] = set()


def _pid_alive(pid: int) -> bool:
    """Whether ``pid`` still runs. A zombie is dead: a writer killed (SIGKILL, the OOM killer)
    stays a zombie until its parent reaps it, for ever when it was re-parented to an init that
    does not reap (some containers), yet ``os.kill(pid, 0)`` succeeds on it; its lease must be
    taken over as that of any process that is gone (its JSONL ``flock`` went with it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - alive, owned by someone else
        return True
    except OSError:  # pragma: no cover - e.g. Windows without the process
        return False
    return not _zombie(pid)


def _lease_holder(row: Tuple[Any, ...], host: str) -> Optional[str]:
    """Who holds the writer lease ``row`` (``owner, pid, host``), or None when it is stale. A lease
    naming this pid and host is ours only while one of our handles holds it (see ``_OWNERS``); one
    of another host counts as held (its process cannot be asked). One of this host is stale when
    its process is gone, also when its pid now belongs to another process: the owner token records
    the writer's boot and start time (:func:`_owner_token`), so a lease left before a reboot or a
    crash is not kept for ever by whatever process got that pid since."""
    owner, pid, lease_host = row[0], row[1], row[2]
    if pid == os.getpid() and lease_host == host:
        return "another Session in this process" if owner in _OWNERS else None
    if lease_host == host and (not _same_process(pid, str(owner)) or not _pid_alive(pid)):
        return None
    return f"process {pid} on {lease_host}"


def _read_proc(path: str) -> Optional[str]:
    """The text of a ``/proc`` file, None where it cannot be read (no ``/proc``, a process gone)."""
    try:
        with open(path, "rb") as proc_file:
            return proc_file.read().decode("ascii", "replace").strip()
    except OSError:
        return None


def _start_time(pid: Union[int, str]) -> Optional[str]:
    """When ``pid`` (or ``"self"``) started, in clock ticks since boot (``/proc/<pid>/stat`` field 22)."""
    status = _read_proc(f"/proc/{pid}/stat")
    fields = status.rpartition(")")[2].split() if status else []  # the name may hold spaces or ")"
    return fields[19] if len(fields) > 19 else None


def _pid_namespace() -> Optional[str]:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def _owner_token() -> str:
    """A new lease owner token: random, then ``@boot id/PID namespace/start time`` of this process
    where ``/proc`` tells them (read again per handle: a forked child is another process)."""
    token = uuid.uuid4().hex
    boot, namespace, start = _read_proc("/proc/sys/kernel/random/boot_id"), _pid_namespace(), _start_time("self")
    if boot and namespace and start and "/" not in boot + namespace:
        token += f"@{boot}/{namespace}/{start}"
    return token


def _same_process(pid: int, owner: str) -> bool:
    """False when ``owner`` (a lease's token) proves the process now at ``pid`` is not the one
    that took the lease: the machine booted again since, or in the same PID namespace the process
    at ``pid`` started at another time. True when it cannot tell (a token without that record,
    from an older version; no ``/proc``; another PID namespace, whose pids mean nothing here)."""
    _, at, record = owner.partition("@")
    parts = record.split("/")
    if not at or len(parts) != 3:
        return True
    boot, namespace, start = parts
    boot_now = _read_proc("/proc/sys/kernel/random/boot_id")
    if boot_now is None:
        return True
    if boot != boot_now:
        return False  # every process of that boot is gone
    if namespace != _pid_namespace():
        return True
    start_now = _start_time(pid)
    return start_now is None or start_now == start  # None: gone (``_pid_alive`` says so)


def _zombie(pid: int) -> bool:
    """True when ``/proc`` says ``pid`` is a zombie (False where there is no ``/proc``)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            status = stat_file.read()
    except OSError:
        return False
    fields = status.rpartition(b")")[2].split()  # the name in parentheses may hold spaces or ")"
    return bool(fields) and fields[0] == b"Z"


def _set_wal(conn: sqlite3.Connection) -> None:
    """Switch to WAL. The switch can report "database is locked" at once, without the busy
    handler, while other connections open the same new database (many agents starting together):
    retry it for up to ~5 s, as the busy timeout would."""
    import time

    for attempt in range(100):
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == 99:
                raise
            time.sleep(0.05)


def _check_schema(conn: sqlite3.Connection, path: str) -> None:
    """Refuse a database that is not ours, before anything changes it (no WAL switch, no tables).

    A database without any schema object (a new or 0-byte file) is fine: it gets the schema. One
    with objects must have our ``schema_version`` table at our version, and each of our tables it
    has must have our columns; anything else is ``invalid_session`` naming the file (a database of
    another application, opened by mistake). A newer schema version is ``storage``.
    """
    names = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE name NOT GLOB 'sqlite_*'")]
    if not names:
        return
    if "schema_version" not in names:
        shown = ", ".join(sorted(names)[:5]) + (", ..." if len(names) > 5 else "")
        raise SessionError(
            "invalid_session",
            f"{path}: not an agentcore session database (it holds {shown} and no schema_version table); "
            "it was left unchanged: give a new or empty file, or a database made by SqliteSessionStorage",
            path=path,
        )
    for table, wanted in _COLUMNS.items():
        if table in names:
            columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
            missing = sorted(wanted - columns)
            if missing:
                raise SessionError(
                    "invalid_session",
                    f"{path}: not an agentcore session database (its table {table} has no column "
                    f"{', '.join(missing)}); it was left unchanged",
                    path=path,
                )
    row = conn.execute("SELECT version FROM schema_version").fetchone()
    if row is not None and row[0] != SCHEMA_VERSION:
        newer = type(row[0]) is int and row[0] > SCHEMA_VERSION
        raise SessionError(
            "storage",
            f"{path}: unsupported session schema version {row[0]!r} (this library uses {SCHEMA_VERSION})"
            + (": the database was written by a newer agentcore; upgrade agentcore to open it" if newer else "")
            + "; the database was left unchanged",
            path=path,
        )


def _create_schema(conn: sqlite3.Connection) -> None:
    """Create the missing tables and the version row, in one transaction (concurrent openers agree)."""
    with conn:
        conn.execute("BEGIN IMMEDIATE")
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        if conn.execute("SELECT version FROM schema_version").fetchone() is None:
            conn.execute("INSERT INTO schema_version(version) VALUES (?)", (SCHEMA_VERSION,))


def _release_lease(conn: sqlite3.Connection, session_id: str, owner: str, pid: int) -> None:
    """What :meth:`SqliteSessionStorage.close` does for a writing handle collected without it
    (best effort: the database may be gone): drop its writer lease and close its connection. In a
    forked child (another pid) nothing: the lease is the parent's, and so is the connection, which
    is kept unclosed (:data:`_INHERITED`)."""
    if os.getpid() != pid:
        _INHERITED.append(conn)
        return
    _OWNERS.discard(owner)
    try:
        with conn:
            conn.execute("DELETE FROM writer_leases WHERE session_id = ? AND owner = ?", (session_id, owner))
    except sqlite3.Error:
        pass
    finally:
        conn.close()


def _connect(path: str, read_only: bool) -> sqlite3.Connection:
    """A connection to the session database at ``path``; writable ones get WAL and the schema.

    The schema is checked first (:func:`_check_schema`): a database of something else raises
    ``SessionError`` and is left byte-identical. SQLite failures are ``storage``.
    """
    try:
        if read_only:
            # the path percent-encoded: a "#", "?" or "%" in it would end or change the URI's path
            # (and lose "mode=ro": a read-only open that creates a database somewhere else)
            uri = f"{pathlib.Path(path).as_uri()}?mode=ro"
            conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        else:
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise SessionError("storage", f"{path}: cannot open the session database ({exc})", path=path) from exc
    try:
        conn.execute("PRAGMA busy_timeout=5000")
        _check_schema(conn, path)
        if not read_only:
            _set_wal(conn)
            _create_schema(conn)
        return conn
    except BaseException as exc:
        conn.close()
        if isinstance(exc, sqlite3.Error):
            raise SessionError("storage", f"{path}: cannot open the session database ({exc})", path=path) from exc
        raise


#: WAL pages a writing handle lets its appends write before it starts a background checkpoint
#: (SQLite's own automatic-checkpoint default); an append is counted as its payload's pages plus
#: three (the table leaf and the two index leaves it changes).
_CHECKPOINT_PAGES = 1000
#: WAL pages after which the writer checkpoints on its own connection: the log restarts from its
#: beginning only once a checkpoint has caught up with the last commit, which one running beside a
#: steady stream of appends never does; this bounds the WAL (about 32 MB) during bulk appends.
_CATCH_UP_PAGES = 8000


class _Checkpointer:
    """The background checkpoints of one writing handle: at most one runs at a time."""

    def __init__(self, path: str, synchronous: str) -> None:
        self.path = path
        self.synchronous = synchronous
        self.idle = threading.Event()  # set while no checkpoint runs
        self.idle.set()
        self.pages = 0  # pages appended since the last checkpoint started
        self.backlog = 0  # pages appended since the writer last checkpointed on its own connection

    def appended(self, pages: int, conn: sqlite3.Connection) -> None:
        """Count an append's WAL pages; start a checkpoint when enough have been written."""
        self.pages += pages
        if self.pages < _CHECKPOINT_PAGES or not self.idle.is_set():
            return
        self.backlog += self.pages
        self.pages = 0
        if self.backlog >= _CATCH_UP_PAGES:  # one checkpoint in eight: copies what the others left
            self.backlog = 0
            try:
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            except sqlite3.Error as exc:  # pragma: no cover - best effort, as in the background
                _log.debug("checkpoint of %s failed: %s", self.path, exc)
            return
        self.idle.clear()
        try:
            streams.start_daemon(self._run, "agentcore-sqlite-checkpoint")
        except Exception as exc:  # no thread (a thread limit, interpreter shutdown): the append committed
            self.idle.set()
            _log.debug("cannot start a background checkpoint of %s (skipped until the next one): %s", self.path, exc)

    def _run(self) -> None:
        """One ``PASSIVE`` checkpoint over a short-lived connection (on a daemon thread). Best
        effort: a failure (a busy or vanished database) leaves the frames for the next one or the
        last connection's close."""
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            try:
                conn.execute(f"PRAGMA synchronous={self.synchronous}")
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            finally:
                conn.close()
        except sqlite3.Error as exc:
            _log.debug("background checkpoint of %s failed: %s", self.path, exc)
        finally:
            self.idle.set()


class _CreatedMeanwhile(Exception):
    """Another opener created the first session of an empty database first."""


def _listable(text: str) -> str:
    """``text`` as SQLite can store it: a lone surrogate (a directory whose name is not UTF-8 read
    by ``os.getcwd()``) written as its JSON escape (``\\udcff``); the header keeps the exact text."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return escape_lone_surrogates(text)
    return text


def _insert_session(conn: sqlite3.Connection, header: SessionHeader, rows: List[Tuple[Any, ...]]) -> None:
    """Insert a session row and its entry rows (inside the caller's transaction)."""
    conn.execute(
        "INSERT INTO sessions(id, header, cwd, created, parent_session) VALUES (?,?,?,?,?)",
        (
            header.id,
            encode_line(header.to_dict())[:-1].decode("utf-8"),
            _listable(header.cwd),
            header.timestamp,
            header.parent_session,
        ),
    )
    conn.executemany("INSERT INTO entries VALUES (?,?,?,?,?,?,?,?)", rows)


class SqliteSessionStorage(SessionStorage):
    """One session inside a SQLite database. Open with ``SqliteSessionStorage(db, session_id)``.

    Without ``session_id``: a new or empty database gets a new session (cwd: the current
    directory), as ``sqlite3.connect`` creates the file; a database with one session opens it; one
    with several raises ``SessionError("not_found")`` listing some of their ids (choose with
    ``session_id=``, list them with :meth:`list_sessions`). ``read_only=True`` never creates: an
    empty or missing database is ``not_found``. An unknown ``session_id`` is ``not_found`` (create
    it with :meth:`create`), so a mistyped id never starts a new session. A database with tables
    but without the session schema (another application's) is ``invalid_session`` and is left
    byte-identical, writable open or not (checked before the WAL switch and the schema).
    """

    path: str  # always a database file here (the base class allows None: storage without a file)

    def __init__(
        self, db_path: Any, session_id: Optional[str] = None, *, read_only: bool = False, fsync: str = "never"
    ) -> None:
        super().__init__()
        if fsync not in ("never", "always", "close"):
            raise ValueError(f"fsync must be one of never, always, close, got {fsync!r}")
        self.path = os.path.abspath(os.fspath(db_path))
        self.read_only = read_only
        self.fsync = fsync
        self._synchronous = "FULL" if fsync == "always" else "NORMAL"
        self._checkpointer = _Checkpointer(self.path, self._synchronous)
        self._owner = _owner_token()
        self._seq = 0
        if read_only and not os.path.exists(self.path):
            raise SessionError("not_found", f"{self.path}: no such session database", path=self.path)
        self._conn: Optional[sqlite3.Connection] = _connect(self.path, read_only)
        try:
            self._conn.execute(f"PRAGMA synchronous={self._synchronous}")
            if not read_only:
                self._conn.execute("PRAGMA wal_autocheckpoint=0")  # checkpoints run off the append path
            self.session_id = self._resolve_id(session_id)
            if not read_only:
                self._acquire_lease()
                # a handle collected without close() (a notebook cell re-run) releases its lease,
                # as a JSONL file's lock goes with its descriptor; the finalizer never holds self
                self._release = weakref.finalize(
                    self, _release_lease, self._conn, self.session_id, self._owner, self._pid
                )
            with process_state.gc_paused():
                self._load()
        except sqlite3.Error as exc:  # e.g. a read-only open of a database that is not a session store
            self.close()
            raise SessionError(
                "storage", f"{self.path}: cannot read the session database ({exc})", path=self.path
            ) from exc
        except BaseException:
            self.close()
            raise
        _log.debug("opened session %s in %s entries=%d read_only=%s", self.session_id, self.path, len(self), read_only)

    # ------------------------------------------------------------------ creation and listing

    @classmethod
    def create(
        cls,
        db_path: Any,
        cwd: Optional[str] = None,
        session_id: Optional[str] = None,
        *,
        fsync: str = "never",
        parent_session: Optional[str] = None,
        metadata: Optional[Dict[str, Any]] = None,
        lines: Iterable[bytes] = (),
    ) -> SqliteSessionStorage:
        """Add a new session to the database (created if missing); ``already_exists`` for a used id.

        Entry ``lines`` (JSONL lines, imported in order) that are not entries, or that would not
        open as a session (a duplicate entry id, a leaf move to a missing entry), raise
        ``invalid_entry`` / ``invalid_session`` naming the imported line, before the database is
        touched."""
        path = os.path.abspath(os.fspath(db_path))
        header = new_header(cwd, session_id, parent_session, metadata)
        for what, value in (("session_id", header.id), ("parent_session", header.parent_session)):
            if value is not None and _listable(value) != value:
                raise ValueError(f"{what} {value!r} holds a lone surrogate, which SQLite text cannot store")
        rows = import_rows(header.id, lines, path)  # a bad line is reported before the database is touched
        check_imported_rows(rows, path)  # and so are lines that would not open as a session
        conn = _connect(path, False)
        try:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                _insert_session(conn, header, rows)
        except sqlite3.IntegrityError:
            raise SessionError(
                "already_exists", f"{path}: a session with id {header.id!r} already exists", path=path
            ) from None
        except sqlite3.Error as exc:
            raise SessionError("storage", f"{path}: cannot create the session ({exc})", path=path) from exc
        finally:
            conn.close()
        _log.debug("created session %s in %s", header.id, path)
        return cls(path, header.id, fsync=fsync)

    @staticmethod
    def list_sessions(db_path: Any) -> List[SqliteSessionInfo]:
        """Sessions of a database, newest first, with their message counts (one query)."""
        path = os.path.abspath(os.fspath(db_path))
        if not os.path.exists(path):
            return []
        conn = _connect(path, True)
        try:
            rows = conn.execute(
                "SELECT s.id, s.cwd, s.created, s.parent_session, "
                "(SELECT count(*) FROM entries e WHERE e.session_id = s.id AND e.type = 'message') "
                "FROM sessions s ORDER BY s.created DESC"
            ).fetchall()
        except sqlite3.Error as exc:
            raise SessionError("storage", f"{path}: cannot list sessions ({exc})", path=path) from exc
        finally:
            conn.close()
        return [SqliteSessionInfo(*row) for row in rows]

    @staticmethod
    def delete_session(db_path: Any, session_id: str) -> None:
        """Remove a session and its entries in one transaction; ``not_found`` if there is none.

        A session open for writing (its writer lease held by a live process, this one included)
        raises :class:`SessionLockedError` and nothing is deleted, as a JSONL session's file stays
        while it is locked: the writer's conversation would be gone under it. A lease left by a
        process that is gone does not stop the delete."""
        path = os.path.abspath(os.fspath(db_path))
        conn = _connect(path, False)
        try:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                row = conn.execute(
                    "SELECT owner, pid, host FROM writer_leases WHERE session_id = ?", (session_id,)
                ).fetchone()
                who = _lease_holder(row, socket.gethostname()) if row is not None else None
                if who is not None:
                    raise SessionLockedError(
                        f"{path}: session {session_id} is open for writing by {who}; close it there "
                        "first: nothing was deleted",
                        path=path,
                    )
                if conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,)).rowcount == 0:
                    raise SessionError("not_found", f"{path}: no session {session_id!r}", path=path)
                conn.execute("DELETE FROM entries WHERE session_id = ?", (session_id,))
                conn.execute("DELETE FROM writer_leases WHERE session_id = ?", (session_id,))
        finally:
            conn.close()

    # ------------------------------------------------------------------ opening

    def _resolve_id(self, session_id: Optional[str]) -> str:
        assert self._conn is not None
        conn = self._conn
        if session_id is not None:
            return session_id
        shown = 5
        try:
            ids = [r[0] for r in conn.execute(f"SELECT id FROM sessions ORDER BY created DESC LIMIT {shown + 1}")]
        except sqlite3.OperationalError:  # read-only open of a database without our tables
            if not self.read_only:
                raise
            ids = []
        if len(ids) == 1:
            return ids[0]
        if ids:
            more = ", ..." if len(ids) > shown else ""
            raise SessionError(
                "not_found",
                f"{self.path} holds several sessions ({', '.join(ids[:shown])}{more}); "
                "choose one with SqliteSessionStorage(path, session_id=ID) (all of them: "
                "SqliteSessionStorage.list_sessions(path))",
                path=self.path,
            )
        if self.read_only:
            raise SessionError(
                "not_found", f"{self.path} holds no sessions (read_only=True creates none)", path=self.path
            )
        header = new_header(None, None, None, None)
        try:
            with conn:
                conn.execute("BEGIN IMMEDIATE")  # two openers of an empty database: one creates
                row = conn.execute("SELECT id FROM sessions LIMIT 1").fetchone()
                if row is not None:
                    raise _CreatedMeanwhile()
                _insert_session(conn, header, [])
        except _CreatedMeanwhile:
            return self._resolve_id(None)
        except sqlite3.Error as exc:
            raise SessionError("storage", f"{self.path}: cannot create a session ({exc})", path=self.path) from exc
        return header.id

    def _acquire_lease(self) -> None:
        assert self._conn is not None
        conn = self._conn
        host = socket.gethostname()
        with conn:
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute(
                "SELECT owner, pid, host FROM writer_leases WHERE session_id = ?", (self.session_id,)
            ).fetchone()
            if row is not None and row[0] != self._owner:
                who = _lease_holder(row, host)
                if who is not None:
                    raise SessionLockedError(
                        f"{self.path}: session {self.session_id} is open for writing by {who}; close it "
                        "there first, or open with read_only=True",
                        path=self.path,
                    )
            _OWNERS.add(self._owner)  # before the commit: another opener waits for it, then sees ours
            try:
                conn.execute(
                    "INSERT OR REPLACE INTO writer_leases VALUES (?,?,?,?,?)",
                    (self.session_id, self._owner, os.getpid(), host, int(time.time() * 1000)),
                )
            except BaseException:
                _OWNERS.discard(self._owner)
                raise

    def _load(self) -> None:
        assert self._conn is not None
        row = self._conn.execute("SELECT header FROM sessions WHERE id = ?", (self.session_id,)).fetchone()
        if row is None:
            raise SessionError(
                "not_found",
                f"{self.path}: no session {self.session_id!r} (create it with "
                "SqliteSessionStorage.create(path, session_id=...); see list_sessions(path))",
                path=self.path,
            )
        try:
            self.header = header_from_dict(json.loads(row[0]))
        except ValueError as exc:
            raise SessionError(
                "invalid_session", f"{self.path}: session {self.session_id}: {exc}", path=self.path
            ) from None
        cursor = self._conn.execute(
            f"SELECT seq, id, parent_id, type, timestamp, role, CASE WHEN type IN ({_EAGER_SQL}) THEN payload "
            "END FROM entries WHERE session_id = ? ORDER BY seq",
            (self.session_id,),
        )
        # The usual row (a lazily decoded entry with a new id whose parent is not a leaf entry) is
        # indexed inline, as JSONL lines are (SessionStorage._index_lines); every other row takes _add.
        nodes = self._nodes
        get_node = nodes.get
        add_node = nodes.setdefault
        order = self._order
        link = self._link_new
        words: Dict[str, str] = {}
        fast: Dict[str, int] = {}
        previous: Optional[IndexNode] = None
        seq = 0
        for seq, entry_id, parent, etype, ts, role, payload in cursor:
            if payload is not None:
                entry = self._parse(payload, seq, entry_id)
                self._add(self._node_for(entry, seq, None))
                previous = order[-1]
                continue
            etype = words.get(etype) or words.setdefault(etype, sys.intern(etype))
            if role is not None:
                role = words.get(role) or words.setdefault(role, sys.intern(role))
            if parent is None:
                parent_node = None
            elif previous is not None and previous.id == parent:  # a chain: the parent is the row before
                parent_node = previous
            else:
                parent_node = get_node(parent)
            if parent_node is not None:
                parent = parent_node.id  # share one string per id
            node = IndexNode(entry_id, parent, etype, role or None, ts, seq, None, None)
            if (parent_node is not None and parent_node.type == "leaf") or add_node(entry_id, node) is not node:
                self._add(node)  # promotes the leaf entry, or reports the duplicate id
            else:
                link(node, fast)
            previous = node
        self._seq = seq
        self._count_linked(fast)
        self._finish_load()

    def _where(self, line: Optional[int], entry_id: Optional[str] = None) -> str:
        return f"{self.path} (session {getattr(self, 'session_id', '?')}, entry {entry_id}, seq {line})"

    def _connection(self) -> sqlite3.Connection:
        """The connection, read once (the caller holds ``_io_lock``, as :meth:`close` does);
        ``SessionError("storage")`` when closed, or in a forked child (it is the parent's)."""
        conn = self._conn
        if conn is None:
            raise SessionError("storage", f"{self.path}: the session is closed", path=self.path)
        self._check_owner("its SQLite connection (connections do not survive fork())")
        return conn

    # Payloads are read as their bytes (CAST AS BLOB): a row whose text is not UTF-8 (written by
    # another program) is then an ``invalid_entry`` naming it, where sqlite3 would raise a bare
    # OperationalError ("Could not decode to UTF-8 column") naming neither database nor entry.

    def _read_failed(self, exc: sqlite3.Error) -> SessionError:
        return SessionError("storage", f"{self.path}: cannot read session {self.session_id} ({exc})", path=self.path)

    @contextlib.contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """A connection to read payloads on (the caller holds ``_io_lock``, as :meth:`close`
        does): the handle's own, or once the handle is closed a read-only one for the time of the
        read, as a closed JSONL session reopens its file, so reads keep working after ``close()``.
        ``SessionError("storage")`` in a forked child (the connection is the parent's) and when
        the database cannot be opened again."""
        if self._conn is not None:
            yield self._connection()
            return
        self._check_owner("its SQLite connection (connections do not survive fork())")
        conn = _connect(self.path, True)
        try:
            yield conn
        finally:
            conn.close()

    def _fetch_raw(self, node: IndexNode) -> Union[bytes, str]:
        with self._io_lock, self._reading() as conn:
            try:
                row = conn.execute(
                    "SELECT CAST(payload AS BLOB) FROM entries WHERE session_id = ? AND id = ?",
                    (self.session_id, node.id),
                ).fetchone()
            except sqlite3.Error as exc:
                raise self._read_failed(exc) from exc
        if row is None:
            raise SessionError("invalid_session", f"{self._where(node.line, node.id)}: row vanished", path=self.path)
        return row[0]

    def _fetch_raws(self, nodes: List[IndexNode]) -> List[Union[bytes, str]]:
        """Payloads of many entries in few queries: a range scan when they are dense in ``seq``
        order (a branch read from its root), else ``IN`` lists of up to 500 sequence numbers."""
        if len(nodes) < 8:
            return [self._fetch_raw(node) for node in nodes]
        seqs = [node.line for node in nodes]
        low, high = min(seqs), max(seqs)  # type: ignore[type-var]
        payloads: Dict[int, bytes] = {}
        with self._io_lock, self._reading() as conn:
            try:
                if high - low < 2 * len(seqs):  # type: ignore[operator]
                    wanted = set(seqs)
                    for seq, payload in conn.execute(
                        "SELECT seq, CAST(payload AS BLOB) FROM entries WHERE session_id = ? AND seq BETWEEN ? AND ?",
                        (self.session_id, low, high),
                    ):
                        if seq in wanted:
                            payloads[seq] = payload
                else:
                    for start in range(0, len(seqs), 500):
                        chunk = seqs[start : start + 500]
                        payloads.update(
                            conn.execute(
                                "SELECT seq, CAST(payload AS BLOB) FROM entries WHERE session_id = ? AND seq IN "
                                f"({','.join('?' * len(chunk))})",
                                [self.session_id, *chunk],
                            )
                        )
            except sqlite3.Error as exc:
                raise self._read_failed(exc) from exc
        out: List[Union[bytes, str]] = []
        for node in nodes:
            payload = payloads.get(node.line)  # type: ignore[arg-type]
            if payload is None:
                raise SessionError(
                    "invalid_session", f"{self._where(node.line, node.id)}: row vanished", path=self.path
                )
            out.append(payload)
        return out

    # ------------------------------------------------------------------ writing

    def _write(self, line: bytes, entry: SessionEntry) -> None:
        conn = self._connection()  # under _io_lock (held by append): close() waits for this append
        seq = self._seq + 1
        row = entry_row(self.session_id, seq, entry, line[:-1].decode("utf-8"))
        unstorable = unstorable_column(row, HAS_SURROGATE)  # sqlite3: a bare UnicodeEncodeError
        if unstorable is not None:
            raise SessionError(
                "invalid_payload",
                f"{self.path}: cannot append entry {entry.id!r}: its {unstorable[0]} {unstorable[1]!r} holds a "
                "lone surrogate, which SQLite text cannot store; the entry was not recorded",
                path=self.path,
            )
        try:
            # One autocommit statement: the row is written only while this handle holds the lease.
            inserted = conn.execute(
                "INSERT INTO entries SELECT ?,?,?,?,?,?,?,? WHERE EXISTS (SELECT 1 FROM writer_leases "
                "WHERE session_id = ? AND owner = ?)",
                (*row, self.session_id, self._owner),
            )
        except sqlite3.Error as exc:
            raise SessionError(
                "storage", f"{self.path}: append failed ({exc}); the entry was not recorded", path=self.path
            ) from exc
        if inserted.rowcount != 1:
            raise SessionLockedError(
                f"{self.path}: this handle lost its writer lease for session {self.session_id}; reopen the session",
                path=self.path,
            )
        self._seq = seq
        self._checkpointer.appended(3 + len(line) // 4096, conn)  # never raises: the row is committed

    def append(self, entry: SessionEntry) -> None:
        """``SessionStorage.append``; the entry's line is not kept in memory but read back
        from its row like a loaded entry's (a long run would otherwise hold every line it wrote)."""
        with self._io_lock:
            super().append(entry)
            node = self._order[-1]
            node.line = self._seq
            node.raw = None

    def usage_totals(self) -> UsageTotals:
        with self._io_lock:  # the query and the kept totals as one
            return super().usage_totals()

    def _usage_rows(self) -> Optional[List[Tuple[int, str, Union[bytes, str]]]]:
        conn = self._conn
        if conn is None or self._pid != os.getpid():
            return None
        try:
            return conn.execute(
                "SELECT seq, id, payload FROM entries WHERE session_id = ? AND (type IN "
                "('compaction','branch_summary') OR (type = 'message' AND (role = 'assistant' OR role IS NULL)))",
                (self.session_id,),
            ).fetchall()
        except sqlite3.Error as exc:
            raise SessionError("storage", f"{self.path}: cannot read the usage totals ({exc})", path=self.path) from exc

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Release the writer lease and the connection (checkpointing with ``fsync="close"``). Idempotent.

        Waits for an append in flight on another thread. In a forked child nothing of the parent's
        is touched: no lease delete, no checkpoint, and the connection is not closed (the child keeps
        it, unused, until it exits: :data:`_INHERITED`)."""
        with self._io_exclusion():
            conn, self._conn = self._conn, None
            release = getattr(self, "_release", None)
            if release is not None:
                release.detach()  # released below, after the checkpoint
            if conn is not None and self._pid != os.getpid():
                _INHERITED.append(conn)  # a forked child: the lease and the connection are the parent's
                conn = None
            if conn is not None:
                self._checkpointer.idle.wait(30)
                _OWNERS.discard(self._owner)
                try:
                    if not self.read_only:
                        with conn:
                            conn.execute(
                                "DELETE FROM writer_leases WHERE session_id = ? AND owner = ?",
                                (getattr(self, "session_id", None), self._owner),
                            )
                        if self.fsync == "close":
                            conn.execute("PRAGMA wal_checkpoint(FULL)")
                except sqlite3.Error:  # pragma: no cover - best effort on shutdown
                    pass
                finally:
                    conn.close()
            super().close()

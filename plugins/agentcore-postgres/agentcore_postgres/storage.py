"""PostgreSQL session storage: many sessions, many machines, one database.

Same semantics as agentcore's SQLite storage: each row's ``payload`` is byte for byte the JSONL
line of the entry, rows are ordered by ``seq`` (append order), and the tree index is rebuilt from
the rows at open (message payloads are fetched when first read, in batches; an appended entry's
payload too, so a writing handle holds no more per entry than an open does). Reads after
:meth:`~PostgresSessionStorage.close` fetch payloads over a connection opened for the time of the
read, as do reads after the handle's connection was found lost (rows never change once written).
Every append is one autocommit statement, so it is one transaction: a writer killed at any
moment leaves only complete entries, and memory is updated only after the server confirmed the
commit. An append interrupted (Ctrl+C) after the server committed it stays stored, and the
handle's next append follows it (see :meth:`PostgresSessionStorage._write`).

One writer per session, across machines: a writer holds a session-level advisory lock
(``pg_try_advisory_lock``) on its own connection for as long as it is open. A second writer gets
:class:`~agentcore.session.SessionLockedError` naming the holder (its ``application_name``: pid and
host). The server releases the lock when the holder's connection ends, so a crashed or killed
writer never holds it forever (as soon as the server notices the connection is gone: at once for a
killed process, after the server's TCP keepalive for a vanished machine: its ``tcp_keepalives_*``
settings, about two hours by default on Linux, which ``options=-ctcp_keepalives_idle=60`` in the DSN
shortens for this connection; libpq's ``keepalives_idle`` sets the client's probes, not the
server's). Advisory locks belong to a server connection, so connect directly or through a
session-mode pooler, never a transaction-mode one. A handle's connection turns the server's
``idle_session_timeout`` off for itself (a writer idles for as long as its user thinks); a pooler's
own idle timeouts cannot be turned off from here: a writer whose connection one of them ends has
lost its lock, and its next append is refused (``SessionLockedError``), so set them above the
longest pause.
``read_only=True`` takes no lock and reads a snapshot as of opening.

Threads and processes: :meth:`~PostgresSessionStorage.close` waits for an append in flight on
another thread (the storage's ``_io_lock``; appends and reads use the connection read once under
it), so the lock is never released, nor the connection closed, under an append: it is committed
while the lock is held, or refused with ``SessionError``. A handle belongs to the process that
opened it: a forked child shares the parent's server connection (its socket), so there it is never
used: appends and reads of stored payloads are refused (``SessionError("storage")``), and
``close()`` neither unlocks nor closes it (closing would end the parent's server session). At the
fork the child lets go of its copy of every such socket (the descriptor then points at
``/dev/null``), so a writer killed while a forked worker of it runs loses its lock at once, not when
the worker exits (psycopg itself never closes a connection it collects in a forked child).

The DSN's password never appears in reprs, errors or ``storage.path`` (which shows
``postgresql://user@host:port/db``). After connecting, the storage keeps the password only to
scrub it from the driver's error messages and to connect for a read after ``close()``, inside an
object whose repr shows the display form.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import sys
import weakref
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple, Union

from agentcore.session import SessionError, SessionLockedError, SessionStorage
from agentcore.session.context import UsageTotals
from agentcore.session.entries import (
    SessionEntry,
    SessionHeader,
    encode_line,
    header_from_dict,
    new_header,
)
from agentcore.session.storage import (
    EAGER_TYPES,
    IndexNode,
    check_imported_rows,
    clean_name,
    entry_row,
    import_rows,
    unstorable_column,
)

from .dsn import Dsn, parse_dsn
from .schema import READ_COMMITTED, SCHEMA_VERSION, SchemaTooNewError, migrate, schema_version

__all__ = ["PostgresSessionStorage", "PostgresSessionInfo"]

_EAGER_SQL = ",".join(f"'{t}'" for t in sorted(EAGER_TYPES))
_INSERT = "INSERT INTO agentcore_entries VALUES (%s,%s,%s,%s,%s,%s,%s,%s)"
# A message or a name change also updates the session row (what listing reads), in the same statement.
_INSERT_COUNTED = (
    "WITH e AS (" + _INSERT + " RETURNING 1) UPDATE agentcore_sessions SET message_count = "
    "message_count + 1 WHERE id = %s AND EXISTS (SELECT 1 FROM e)"
)
_INSERT_NAMED = (
    "WITH e AS (" + _INSERT + " RETURNING 1) UPDATE agentcore_sessions SET name = %s "
    "WHERE id = %s AND EXISTS (SELECT 1 FROM e)"
)
#: Connections a forked child inherited and let go of: never used or closed there (closing sends
#: the server the end of the parent's session over the shared socket), so kept until it exits.
_INHERITED: List[Any] = []
#: Server connections this process opened (weakly: a collected or closed one drops out or is
#: skipped); a forked child lets go of its copies of their sockets at once (:func:`_forget_sockets_in_child`).
_OPENED: weakref.WeakSet[Any] = weakref.WeakSet()
# The advisory lock key of a session: unique per table (its oid) and session id within a database.
_LOCK_KEY = "hashtextextended('agentcore_sessions'::regclass::oid::text || '/' || %s, 0)"


@dataclass(frozen=True)
class PostgresSessionInfo:
    """One session, as listed by :meth:`PostgresSessionStorage.list_sessions`."""

    id: str
    cwd: str
    created: str
    parent_session: Optional[str]
    name: Optional[str]
    message_count: int


def _psycopg() -> Any:
    import psycopg

    return psycopg


def _application_name() -> str:
    return f"agentcore pid {os.getpid()} on {socket.gethostname()}"[:63]


def _connect(dsn: Dsn) -> Any:
    """An autocommit connection; ``SessionError("storage")`` (password-free) when it fails."""
    psycopg = _psycopg()
    try:
        conn = psycopg.connect(dsn.conninfo, autocommit=True, application_name=_application_name())
    except psycopg.Error as exc:
        raise SessionError(
            "storage", f"{dsn.display}: cannot connect to PostgreSQL: {dsn.scrub(str(exc).strip())}", path=dsn.display
        ) from None
    _OPENED.add(conn)
    return conn


def _forget_sockets_in_child() -> None:
    """In a forked child, point the descriptor of every server connection the parent had open at
    ``/dev/null``. The child never uses them (they are the parent's), but its copies of their
    sockets kept the parent's server sessions, and so its writer locks, alive after the parent
    died: a writer killed while a forked worker of it ran left its session locked, naming a dead
    pid, until that worker exited. Whatever psycopg may still send there goes nowhere."""
    conns = list(_OPENED)
    if not conns:
        return
    try:
        null = os.open(os.devnull, os.O_RDWR)
    except OSError:  # pragma: no cover - no /dev/null: keep the copies
        return
    try:
        for conn in conns:
            try:
                fd = conn.pgconn.socket  # raises once the connection is closed
            except Exception:
                continue
            try:
                os.dup2(null, fd, inheritable=False)
            except OSError:  # pragma: no cover - best effort
                pass
    finally:
        os.close(null)


if hasattr(os, "register_at_fork"):  # pragma: no branch - POSIX
    os.register_at_fork(after_in_child=_forget_sockets_in_child)


def _never_idle_out(conn: Any) -> None:
    """Turn the server's ``idle_session_timeout`` (PostgreSQL 14+; set by an administrator, a role
    or the DSN's options) off for ``conn``, a handle's connection: a writer waits on its user for as
    long as it likes, and its lock lives as long as this connection. With the timeout, the server
    ended the idle connection, and with it the lock (and a reader's ability to read payloads).
    A no-op on older servers, which have no such setting."""
    conn.execute(
        "SELECT set_config(name, '0', false) FROM pg_settings WHERE name = 'idle_session_timeout' AND setting <> '0'"
    )


def _prepare_schema(conn: Any, display: str, read_only: bool) -> None:
    """Check (``read_only``) or create/upgrade the tables; password-free ``SessionError`` otherwise."""
    if read_only:
        version = schema_version(conn)
        if version is None:
            raise SessionError(
                "not_found",
                f"{display}: no agentcore session tables in this database (read_only=True creates none)",
                path=display,
            )
        if version > SCHEMA_VERSION:
            raise SessionError("storage", f"{display}: {SchemaTooNewError(version)}", path=display)
        if version < SCHEMA_VERSION:
            raise SessionError(
                "storage",
                f"{display}: the session tables have schema version {version}; "
                "open a session once without read_only=True to upgrade them to "
                f"{SCHEMA_VERSION}",
                path=display,
            )
        return
    try:
        migrate(conn)
    except SchemaTooNewError as exc:
        raise SessionError("storage", f"{display}: {exc}", path=display) from None


# What PostgreSQL text cannot hold: NUL, and lone surrogates (a non-UTF-8 file name as os.getcwd()
# returns it, half of an emoji a model sent in two pieces); psycopg raises a bare UnicodeEncodeError
# for the latter.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _column_text(text: str) -> str:
    """``text`` as the ``cwd`` and ``name`` columns (what listing shows and filters on) hold it: NUL and
    lone surrogates written as their JSON escapes (``\\u0000``, ``\\udcff``); the session header and
    the entries keep the exact text."""
    if not _UNSTORABLE.search(text):
        return text
    joined = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")  # pairs: characters
    return _UNSTORABLE.sub(lambda found: f"\\u{ord(found.group()):04x}", joined)


def _check_id(display: str, what: str, value: Optional[str]) -> None:
    """``ValueError`` naming ``value`` when PostgreSQL text cannot store it (ids are keys: never rewritten)."""
    if value is not None and _UNSTORABLE.search(value):
        raise ValueError(
            f"{display}: {what} {value!r} holds a NUL character or a lone surrogate, which PostgreSQL text cannot store"
        )


def _insert_session(
    conn: Any, display: str, header: SessionHeader, exist_ok: bool, rows: Iterable[Tuple[Any, ...]] = ()
) -> str:
    """Insert a session row (and entry ``rows``) in one transaction; ``already_exists`` unless ``exist_ok``
    (read committed whatever the server's default isolation: a session another opener created
    meanwhile is a conflict to report, never a serialization failure)."""
    with conn.transaction():
        conn.execute(READ_COMMITTED)
        cursor = conn.execute(
            "INSERT INTO agentcore_sessions(id, header, cwd, created, parent_session) VALUES (%s,%s,%s,%s,%s) "
            "ON CONFLICT (id) DO NOTHING",
            (
                header.id,
                encode_line(header.to_dict())[:-1].decode("utf-8"),
                _column_text(header.cwd),
                header.timestamp,
                header.parent_session,
            ),
        )
        if cursor.rowcount == 0 and not exist_ok:
            raise SessionError(
                "already_exists",
                f"{display}: a session with id {header.id!r} already "
                "exists; open it with PostgresSessionStorage(dsn, session_id)",
                path=display,
            )
        rows = list(rows)
        if rows:
            conn.cursor().executemany(_INSERT, rows)
            conn.execute(
                "UPDATE agentcore_sessions SET message_count = %s, name = %s WHERE id = %s",
                (sum(1 for row in rows if row[4] == "message"), _imported_name(rows), header.id),
            )
    return header.id


def _imported_name(rows: List[Tuple[Any, ...]]) -> Optional[str]:
    """The ``name`` column for imported entry ``rows``: the last ``session_info`` entry's name, as an
    append of it sets the column (the rows were checked to be valid entries)."""
    for row in reversed(rows):
        if row[4] == "session_info":
            name = clean_name(json.loads(row[7]).get("name"))
            return name if name is None else _column_text(name)
    return None


def _lock_session(conn: Any, display: str, session_id: str, refusal: str = "") -> None:
    """Take the session's writer lock (on ``conn``, until it is unlocked or the connection ends);
    :class:`SessionLockedError` naming the holder when another connection has it (``refusal`` ends
    that message; by default it says how to read the session meanwhile)."""
    row = conn.execute(f"SELECT pg_try_advisory_lock({_LOCK_KEY}), {_LOCK_KEY}", (session_id, session_id)).fetchone()
    if row[0]:
        return
    key = row[1]
    holder = conn.execute(
        "SELECT a.pid, a.application_name, a.client_addr::text FROM pg_locks l JOIN pg_stat_activity a "
        "ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s AND l.objid = %s "
        "AND l.objsubid = 1 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        ((key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF),
    ).fetchone()
    if holder is None:
        who = "another connection"
    else:
        pid, app, addr = holder
        who = f"{app or 'a client'} (server backend {pid}{', from ' + addr if addr else ''})"
    raise SessionLockedError(
        f"{display}: session {session_id} is open for writing by {who}; close it there first"
        + (refusal or ", or open with read_only=True (a crashed writer's lock is released when its connection ends)"),
        path=display,
    )


def _db_error(
    display: str,
    dsn_scrub: Any,
    conn: Any,
    session_id: Optional[str],
    what: str,
    exc: BaseException,
    *,
    locked: bool = False,
    appending: bool = False,
) -> SessionError:
    """A password-free ``SessionError("storage")`` for a database failure (the driver's words,
    scrubbed), naming session ``session_id`` when there is one. A lost connection (``conn`` broken
    or closed: the caller passes the connection as it was when the statement failed) is said to be
    one; for a writer that held the session's lock
    (``locked``) it is a ``SessionLockedError``, the lock went with it. ``appending``: the failed
    statement was an append, which a lost connection may have committed or not; any other failure
    recorded nothing."""
    detail = dsn_scrub(str(exc).strip())
    if isinstance(exc, _psycopg().OperationalError) and (conn is None or conn.broken or conn.closed):
        outcome = "; the entry may or may not have been recorded" if appending else ""
        if locked:
            return SessionLockedError(
                f"{display}: session {session_id}: {what}: the connection to the server was lost ({detail}), "
                f"and with it the writer lock{outcome}; reopen the session (it shows what was recorded)",
                path=display,
            )
        return SessionError(
            "storage",
            f"{display}: session {session_id}: {what}: the connection to the server was lost ({detail}){outcome}",
            path=display,
        )
    outcome = "; the entry was not recorded" if appending else ""
    where = f"{display}: session {session_id}" if session_id is not None else display
    return SessionError("storage", f"{where}: {what}{outcome}: {detail}", path=display)


class PostgresSessionStorage(SessionStorage):
    """One session in a PostgreSQL database: ``PostgresSessionStorage(dsn, session_id)``.

    ``dsn`` is a libpq connection string (URL or ``key=value`` form). Without ``session_id`` a new
    session is created (cwd: the current directory; its id is ``storage.session_id``). An unknown
    ``session_id`` is ``SessionError("not_found")`` unless ``create=True``, so a mistyped id never
    starts an empty session. ``read_only=True`` takes no writer lock and never creates or migrates.

    Opening as a writer creates or upgrades the tables (see :mod:`agentcore_postgres.schema`).
    Errors: ``SessionLockedError`` when another connection writes the session; ``SessionError``
    ``"storage"`` for connection and database failures, a timeout among them (and a schema newer
    than this library); ``ValueError`` for a DSN libpq cannot parse, or a session id holding a NUL
    or a lone surrogate (PostgreSQL text cannot store them).
    """

    def __init__(
        self,
        dsn: str,
        session_id: Optional[str] = None,
        *,
        read_only: bool = False,
        create: bool = False,
        cwd: Optional[str] = None,
    ) -> None:
        super().__init__()
        parsed = parse_dsn(dsn)
        _check_id(parsed.display, "session id", session_id)
        self.path = parsed.display
        self.read_only = read_only
        self._dsn = parsed  # to read after close(); its repr shows only the display form
        self._scrub = parsed.scrub
        self._seq = 0
        self._conn: Any = None
        self._locked = False  # a writer, open: holding the session's lock (on ``_conn``)
        self._seq_unknown = False  # an append was interrupted: read the last seq back before the next
        if read_only and session_id is None:
            raise SessionError(
                "not_found",
                f"{self.path}: read_only=True needs a session_id (list them "
                "with PostgresSessionStorage.list_sessions(dsn))",
                path=self.path,
            )
        psycopg = _psycopg()
        self._conn = _connect(parsed)
        try:
            # the id first: an error while preparing or inserting names the session (a server
            # serving many users must tell whose open failed)
            header = None
            if session_id is None or create:
                header = new_header(cwd, session_id, None, None)
                session_id = header.id
            self.session_id = session_id
            _never_idle_out(self._conn)
            _prepare_schema(self._conn, self.path, read_only)
            if header is not None:
                _insert_session(self._conn, self.path, header, exist_ok=create)
            if not read_only:
                self._acquire_lock()
            self._load()
            self._locked = not read_only
        except psycopg.Error as exc:
            error = self._db_error("cannot open the session", exc)  # before close(): is the connection lost?
            self.close()
            raise error from None
        except BaseException:
            self.close()
            raise

    def __repr__(self) -> str:
        mode = "read-only" if self.read_only else "writer"
        return (
            f"<PostgresSessionStorage {getattr(self, 'session_id', '?')} at {self.path} ({mode}, {len(self)} entries)>"
        )

    # ------------------------------------------------------------------ helpers

    def _db_error(self, what: str, exc: BaseException, *, appending: bool = False, conn: Any = None) -> SessionError:
        """:func:`_db_error` for this handle; ``conn``: the connection the statement ran on, when
        not the handle's own (a read after ``close()``)."""
        return _db_error(
            self.path or "postgresql",
            self._scrub,
            self._conn if conn is None else conn,
            getattr(self, "session_id", None),
            what,
            exc,
            locked=self._locked,
            appending=appending,
        )

    def _where(self, line: Optional[int], entry_id: Optional[str] = None) -> str:
        return f"{self.path} (session {getattr(self, 'session_id', '?')}, entry {entry_id}, seq {line})"

    def _acquire_lock(self) -> None:
        _lock_session(self._conn, self.path or "postgresql", self.session_id)

    def _load(self) -> None:
        row = self._conn.execute("SELECT header FROM agentcore_sessions WHERE id = %s", (self.session_id,)).fetchone()
        if row is None:
            raise SessionError(
                "not_found",
                f"{self.path}: no session {self.session_id!r} (create it with "
                "create=True or PostgresSessionStorage.create(dsn, session_id=...); see "
                "PostgresSessionStorage.list_sessions(dsn))",
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
            "END FROM agentcore_entries WHERE session_id = %s ORDER BY seq",
            (self.session_id,),
        )
        intern = sys.intern
        from agentcore.session import process_state

        with process_state.gc_paused():
            for seq, entry_id, parent, etype, ts, role, payload in cursor:
                if payload is not None:
                    self._add(self._node_for(self._parse(payload, seq, entry_id), seq, None))
                else:
                    self._add(
                        IndexNode(entry_id, parent, intern(etype), intern(role) if role else None, ts, seq, None, None)
                    )
                self._seq = seq
        self._finish_load()

    # ------------------------------------------------------------------ creation, listing, deletion

    @classmethod
    def create(
        cls,
        dsn: str,
        session_id: Optional[str] = None,
        *,
        cwd: Optional[str] = None,
        parent_session: Optional[str] = None,
        metadata: Optional[Dict[str, Any]] = None,
        lines: Iterable[bytes] = (),
    ) -> PostgresSessionStorage:
        """Add a new session (with optional raw JSONL entry ``lines``) and open it for writing.

        A used ``session_id`` is ``already_exists``; the session and its lines are inserted in one
        transaction. Lines that are not valid entries, or that would not open as a session (a
        duplicate entry id, a leaf move to a missing entry), are ``SessionError("invalid_entry")`` /
        ``("invalid_session")`` naming the imported line, before anything is written.
        """
        parsed = parse_dsn(dsn)
        _check_id(parsed.display, "session id", session_id)
        _check_id(parsed.display, "parent session id", parent_session)
        header = new_header(cwd, session_id, parent_session, metadata)
        rows = import_rows(header.id, lines, parsed.display)
        for seq, row in enumerate(rows, 1):
            if unstorable_column(row, _UNSTORABLE) is not None:
                raise SessionError(
                    "invalid_entry",
                    f"{parsed.display}: imported line {seq}: entry {row[2]!r} holds a NUL character or a lone "
                    "surrogate in its id, parent id, type, timestamp or role, which PostgreSQL text cannot store; "
                    "nothing imported",
                    line=seq,
                )
        check_imported_rows(rows, parsed.display)
        conn = _connect(parsed)
        try:
            _prepare_schema(conn, parsed.display, False)
            _insert_session(conn, parsed.display, header, exist_ok=False, rows=rows)
        except _psycopg().Error as exc:
            raise _db_error(parsed.display, parsed.scrub, conn, header.id, "cannot create the session", exc) from None
        finally:
            conn.close()
        return cls(dsn, header.id)

    @staticmethod
    def list_sessions(
        dsn: str, *, cwd: Optional[str] = None, name: Optional[str] = None, limit: int = 100, offset: int = 0
    ) -> List[PostgresSessionInfo]:
        """Sessions newest first, optionally of one ``cwd`` and/or whose name contains ``name``
        (case-insensitive); at most ``limit``, after skipping ``offset``.

        One query over the sessions table, read in creation order through an index
        (``agentcore_sessions_by_created``, or ``agentcore_sessions_by_cwd`` with ``cwd``); message
        counts and names are columns kept current by the appends, so no entry is read.
        """
        parsed = parse_dsn(dsn)
        psycopg = _psycopg()
        conn = _connect(parsed)
        try:
            version = schema_version(conn)
            if version is None:
                return []
            if version < 2:
                raise SessionError(
                    "storage",
                    f"{parsed.display}: the session tables have schema version "
                    f"{version}; open any session for writing once to upgrade them",
                    path=parsed.display,
                )
            where, args = [], []
            if cwd is not None:
                where.append("cwd = %s")
                args.append(_column_text(os.path.abspath(cwd)))
            if name:
                where.append("name ILIKE %s")
                args.append(
                    "%" + _column_text(name).replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
                )
            sql = (
                "SELECT id, cwd, created, parent_session, name, message_count FROM agentcore_sessions"
                + (" WHERE " + " AND ".join(where) if where else "")
                + " ORDER BY created DESC, id DESC LIMIT %s OFFSET %s"
            )
            rows = conn.execute(sql, (*args, limit, offset)).fetchall()
        except psycopg.Error as exc:
            raise SessionError(
                "storage",
                f"{parsed.display}: cannot list sessions: {parsed.scrub(str(exc).strip())}",
                path=parsed.display,
            ) from None
        finally:
            conn.close()
        return [PostgresSessionInfo(*row) for row in rows]

    @staticmethod
    def delete_session(dsn: str, session_id: str) -> None:
        """Remove a session and its entries in one transaction.

        ``not_found`` if there is none. A session open for writing (its writer lock held by any
        connection, of this process too) is :class:`SessionLockedError` and nothing is deleted: the
        writer's conversation would be gone under it. The session is not read, so one whose
        header or entries are corrupt (it cannot be opened) can still be deleted.
        """
        parsed = parse_dsn(dsn)
        _check_id(parsed.display, "session id", session_id)
        conn = _connect(parsed)
        try:
            _prepare_schema(conn, parsed.display, False)
            _lock_session(conn, parsed.display, session_id, ": nothing was deleted")
            with conn.transaction():
                deleted = conn.execute("DELETE FROM agentcore_sessions WHERE id = %s", (session_id,)).rowcount
            if not deleted:
                raise SessionError("not_found", f"{parsed.display}: no session {session_id!r}", path=parsed.display)
        except _psycopg().Error as exc:
            raise _db_error(parsed.display, parsed.scrub, conn, session_id, "cannot delete the session", exc) from None
        finally:
            try:
                if not conn.broken:  # at once: the server drops a closed connection's locks only later
                    conn.execute("SELECT pg_advisory_unlock_all()")
            except Exception:  # best effort: closing the connection releases it anyway
                pass
            conn.close()

    # ------------------------------------------------------------------ reading back

    def _closed_error(self) -> SessionError:
        return SessionError("storage", f"{self.path}: session {self.session_id} is closed", path=self.path)

    def _connection(self) -> Any:
        """The connection, read once (the caller holds ``_io_lock``, as :meth:`close` does);
        ``SessionError("storage")`` when closed, or in a forked child (the connection is the parent's)."""
        conn = self._conn
        if conn is None:
            raise self._closed_error()
        self._check_owner("its server connection")
        return conn

    @contextlib.contextmanager
    def _reading(self) -> Iterator[Any]:
        """A connection to read stored payloads on (the caller holds ``_io_lock``, as :meth:`close`
        does): the handle's own, or once the handle is closed or its connection known lost (a
        statement failed on it: a server restart, an idle timeout) a new one for the time of the
        read, so reads keep working after ``close()`` and a writer that lost its lock can still
        read its transcript (rows never change once written). ``SessionError("storage")`` in a
        forked child (the connection is the parent's) and when the server cannot be reached
        (password-free)."""
        own = self._conn
        if own is not None and not (own.broken or own.closed):
            yield self._connection()
            return
        self._check_owner("its server connection")
        conn = _connect(self._dsn)
        try:
            yield conn
        finally:
            conn.close()

    def _fetch_raw(self, node: IndexNode) -> Union[bytes, str]:
        return self._fetch_raws([node])[0]

    def _fetch_raws(self, nodes: List[IndexNode]) -> List[Union[bytes, str]]:
        """Payloads of many entries in one query: a range scan when they are dense in ``seq`` order
        (a branch read from its root), else ``seq = ANY(array)``."""
        seqs = [node.line for node in nodes]
        low, high = min(seqs), max(seqs)  # type: ignore[type-var]
        with self._io_lock, self._reading() as conn:
            try:
                if high - low < 2 * len(seqs):  # type: ignore[operator]
                    rows = conn.execute(
                        "SELECT seq, payload FROM agentcore_entries WHERE session_id = %s AND seq BETWEEN %s AND %s",
                        (self.session_id, low, high),
                    )
                else:
                    rows = conn.execute(
                        "SELECT seq, payload FROM agentcore_entries WHERE session_id = %s AND seq = ANY(%s)",
                        (self.session_id, seqs),
                    )
                payloads: Dict[int, str] = dict(rows.fetchall())
            except _psycopg().Error as exc:
                raise self._db_error("cannot read entries", exc, conn=conn) from None
        out: List[Union[bytes, str]] = []
        for node in nodes:
            payload = payloads.get(node.line)  # type: ignore[arg-type]
            if payload is None:
                raise SessionError(
                    "invalid_session", f"{self._where(node.line, node.id)}: row vanished", path=self.path
                )
            out.append(payload)
        return out

    def usage_totals(self) -> UsageTotals:
        """Token and cost sums over the whole session, read with one query the first time.

        A database failure is ``SessionError("storage")`` (a lost connection says so), a stored
        payload that is not a valid entry ``SessionError("invalid_entry")`` naming its seq, as
        when the entry itself is read; nothing is kept then, so a later call reads again."""
        with self._io_lock:  # the query and the kept totals as one
            return super().usage_totals()

    def _usage_rows(self) -> Optional[List[Tuple[int, str, Any]]]:
        if self._pid != os.getpid():
            return None
        with self._reading() as conn:  # under _io_lock (held by usage_totals)
            try:
                return conn.execute(
                    "SELECT seq, id, payload FROM agentcore_entries WHERE session_id = %s AND (type IN "
                    "('compaction', 'branch_summary') OR (type = 'message' AND (role = 'assistant' OR "
                    "role IS NULL)))",
                    (self.session_id,),
                ).fetchall()
            except _psycopg().Error as exc:
                raise self._db_error("cannot read the usage totals", exc, conn=conn) from None

    # ------------------------------------------------------------------ writing

    def _write(self, line: bytes, entry: SessionEntry) -> None:
        """Insert the entry's row at the next ``seq``. An append interrupted by an exception that is
        not the driver's (Ctrl+C: psycopg cancels the statement, and re-raises even when the server
        had already committed it) leaves the next ``seq`` unknown: the next append reads it back
        first, so it neither collides with a row committed unconfirmed nor leaves a gap. Such a row
        stays in the session (the handle goes on without it; reopening shows it as a branch).

        An entry whose id, parent id, type, timestamp or message role holds a NUL or a lone surrogate
        (a message dict with such a ``role``, say) is ``SessionError("invalid_payload")`` naming it,
        before anything is sent: those columns are PostgreSQL text, which cannot hold them."""
        conn = self._connection()  # under _io_lock (held by append): close() waits for this append
        unstorable = unstorable_column(entry_row(self.session_id, 0, entry, ""), _UNSTORABLE)
        if unstorable is not None:  # the driver: a bare UnicodeEncodeError for a lone surrogate
            raise SessionError(
                "invalid_payload",
                f"{self.path}: cannot append entry {entry.id!r}: its {unstorable[0]} {unstorable[1]!r} holds a "
                "NUL character or a lone surrogate, which PostgreSQL text cannot store; the entry was not recorded",
                path=self.path,
            )
        try:
            if self._seq_unknown:
                found = conn.execute(
                    "SELECT coalesce(max(seq), 0) FROM agentcore_entries WHERE session_id = %s", (self.session_id,)
                ).fetchone()
                self._seq, self._seq_unknown = found[0], False
            seq = self._seq + 1
            row = entry_row(self.session_id, seq, entry, line[:-1].decode("utf-8"))
            if entry.type == "message":
                conn.execute(_INSERT_COUNTED, (*row, self.session_id))
            elif entry.type == "session_info":
                name = clean_name(getattr(entry, "name", None))
                conn.execute(_INSERT_NAMED, (*row, name if name is None else _column_text(name), self.session_id))
            else:
                conn.execute(_INSERT, row)
        except _psycopg().Error as exc:
            raise self._db_error("append failed", exc, appending=True) from None
        except BaseException:
            self._seq_unknown = True  # interrupted: committed or not, the server knows
            raise
        self._seq = seq

    def append(self, entry: SessionEntry) -> None:
        """:meth:`~agentcore.session.storage.SessionStorage.append`; the entry's line is not kept in
        memory but read back from its row like a loaded entry's (a long run would otherwise hold
        every line it wrote)."""
        with self._io_lock:
            super().append(entry)
            node = self._order[-1]
            node.line = self._seq
            node.raw = None

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Release the writer lock and close the connection. Idempotent; reads keep working: a
        payload not in memory (any message, as after opening) is read over a connection opened for
        the time of the read (a ``SessionError("storage")`` when the server cannot be reached).

        The lock is released explicitly before the connection closes: the server drops a closed
        connection's locks only when its backend has exited, after ``close()`` returned, so a
        writer reopening the session at once could otherwise find it still locked.

        Waits for an append in flight on another thread. In a forked child the connection is the
        parent's: it is neither unlocked nor closed, only kept unused until the child exits.
        """
        with self._io_exclusion():
            conn, self._conn = self._conn, None
            self._locked = False
            if conn is not None and self._pid != os.getpid():
                _INHERITED.append(conn)
                conn = None
            if conn is not None:
                try:
                    if not self.read_only and not conn.broken:
                        conn.execute("SELECT pg_advisory_unlock_all()")
                except Exception:  # best effort: closing the connection releases it anyway
                    pass
                try:
                    conn.close()
                except Exception:  # pragma: no cover - best effort on shutdown
                    pass
            super().close()

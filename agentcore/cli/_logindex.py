"""The index behind ``agentcore logs``: one SQLite database, ``<sessions dir>/logs.db``.

It holds one row per JSONL session file of the sessions directory (id, cwd, model, first prompt,
message count, tokens, cost, and the file's ``mtime_ns``/``size`` it was read at) and the text of
its prompts and answers in a full-text table (SQLite FTS5; where this Python's sqlite3 lacks FTS5
a plain table searched with ``LIKE``, and :attr:`LogIndex.fts` is False).

The session files are the truth; the index is a cache of them. :meth:`LogIndex.update` re-reads
one file (the CLI calls it after each run and chat turn); :meth:`LogIndex.refresh` brings the
whole index up to date by comparing each file's ``mtime_ns`` and size with the row (new files,
changed files, deleted files), so sessions written by the library directly are found as well. A
missing, corrupt or older-schema database is rebuilt from the files, also when the damage only
shows in a later read or write (a page of a table, not the schema): :meth:`LogIndex.refresh`,
:meth:`LogIndex.update` and :meth:`LogIndex.latest` then delete the database, build it anew and
do their work once more.

One file never fails the whole index: a line that is not JSON (torn, nested too deeply to
decode) is skipped, a usage holding NaN, an infinity or a count past 64 bits is left out of the
sums, and a modification time past 2262 (beyond SQLite's 64-bit nanoseconds) is stored clamped.

Several processes may write at once: every write is one short transaction (``BEGIN IMMEDIATE``)
and waits up to :data:`BUSY_TIMEOUT` seconds for another writer. Errors surface as
``sqlite3.Error`` or ``OSError``; callers turn them into warnings, never into a failed run.
"""

from __future__ import annotations

import glob
import json
import math
import os
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, TypeVar, Union

from ..session.context import UsageTotals

__all__ = ["Conversation", "LogIndex", "INDEX_FILE", "BUSY_TIMEOUT", "read_conversation", "fts5_available", "busy"]

INDEX_FILE = "logs.db"
BUSY_TIMEOUT = 10.0
_SCHEMA = 3  # PRAGMA user_version; another value: the database is rebuilt (2: tokens by spec §10, 3: cwd as bytes)
_T = TypeVar("_T")
_INT64_MAX = 2**63 - 1  # the largest INTEGER SQLite stores; a larger Python int is an OverflowError
_COLUMNS = (
    "id",
    "path",
    "cwd",
    "created",
    "updated",
    "model",
    "first_prompt",
    "messages",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cost",
)


@dataclass(frozen=True)
class Conversation:
    """One session file as ``agentcore logs`` shows it (all branches counted)."""

    id: str
    path: str
    cwd: str
    created: str  # the header's ISO timestamp
    updated: float  # the file's modification time (seconds since the epoch)
    model: Optional[str]  # provider/id of the last assistant message (or model change)
    first_prompt: str
    messages: int
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cost: float

    def to_dict(self) -> Dict[str, Any]:
        data = asdict(self)
        return {
            "id": data["id"],
            "path": data["path"],
            "cwd": data["cwd"],
            "created": data["created"],
            "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.updated)),
            "model": data["model"],
            "firstPrompt": data["first_prompt"],
            "messages": data["messages"],
            "inputTokens": data["input_tokens"],
            "outputTokens": data["output_tokens"],
            "totalTokens": data["total_tokens"],
            "cost": data["cost"],
        }


# --------------------------------------------------------------------------- reading a session file


def _text(content: Any) -> str:
    if isinstance(content, str):
        return _storable(content)
    if not isinstance(content, list):
        return ""
    return _storable(
        "\n".join(
            str(block.get("text", "")) for block in content if isinstance(block, dict) and block.get("type") == "text"
        )
    )


def _storable(text: str) -> str:
    """``text`` with ``?`` for a lone surrogate (JSON may escape half an emoji, ``"\\ud83d"``),
    which SQLite cannot store: one such file would fail every ``agentcore logs``."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def _db_path(path: str) -> Union[str, bytes]:
    """``path`` as the index stores it: its text, or its bytes (``os.fsencode``) when it holds a
    name that is not UTF-8 (a session of a directory such as ``caf\xe9``: SQLite text cannot hold
    the lone surrogates Python reads such a name into, and one such file failed every ``logs``
    and every logged ``run``)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(path)
    return path


def _path_of(stored: Union[str, bytes]) -> str:
    """The path :func:`_db_path` stored."""
    return os.fsdecode(stored) if isinstance(stored, bytes) else stored


def _db_cwd(cwd: str) -> Union[str, bytes]:
    """A session's working directory as the index stores and compares it: as :func:`_db_path`
    does, so that ``logs --cwd`` run in a directory whose name is not UTF-8 finds its sessions
    (stored with ``?`` in its place, the query failed with UnicodeEncodeError and exit 1); a lone
    surrogate no file name holds (half an emoji in a header written by another program) as ``?``."""
    try:
        return _db_path(cwd)
    except UnicodeEncodeError:
        return _storable(cwd)


def read_conversation(path: str) -> Optional[Tuple[Conversation, str]]:
    """``(conversation, searchable text)`` of a JSONL session file; None when it has no valid
    header (not a session file). Lines that do not decode (a line being written, one nested too
    deeply) are skipped, and so is a usage with a number that cannot be summed
    (:func:`_add_usage`); token sums past 64 bits are clamped.

    The text is every user prompt and assistant answer (text blocks), in file order."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
        updated = os.stat(path).st_mtime
    except OSError:
        return None
    lines = data.split(b"\n")
    try:
        header = json.loads(lines[0])
    except (ValueError, RecursionError):  # RecursionError: nested too deeply to decode
        return None
    if not isinstance(header, dict) or header.get("type") != "session" or not isinstance(header.get("id"), str):
        return None
    model: Optional[str] = None
    first = ""
    texts: List[str] = []
    count = 0
    # the rule of ``sessions show`` (session spec §10): the parts are summed, the stored
    # totalTokens is ignored, usage with a missing count or cost is skipped
    usage = UsageTotals()
    for raw in lines[1:]:
        if not raw.strip():
            continue
        try:
            entry = json.loads(raw)
        except (ValueError, RecursionError):  # torn by a writer, or nested too deeply to decode
            continue
        if not isinstance(entry, dict):
            continue
        kind = entry.get("type")
        if kind == "model_change" and entry.get("provider") and entry.get("modelId"):
            model = f"{entry['provider']}/{entry['modelId']}"
            continue
        if kind in ("compaction", "branch_summary"):
            _add_usage(usage, entry.get("usage"))
            continue
        message = entry.get("message") if kind == "message" else None
        if not isinstance(message, dict):
            continue
        count += 1
        role = message.get("role")
        if role == "user":
            text = _text(message.get("content"))
            texts.append(text)
            first = first or text
        elif role == "assistant":
            texts.append(_text(message.get("content")))
            if message.get("provider") and message.get("model"):
                model = f"{message['provider']}/{message['model']}"
            _add_usage(usage, message.get("usage"))
    conversation = Conversation(
        id=_storable(header["id"]),
        path=path,
        cwd=str(header.get("cwd") or ""),  # stored as _db_cwd says
        created=_storable(str(header.get("timestamp") or "")),
        updated=updated,
        model=None if model is None else _storable(model),
        first_prompt=first,
        messages=count,
        input_tokens=_int64(usage.cached + usage.uncached),
        output_tokens=_int64(usage.total - usage.cached - usage.uncached),
        total_tokens=_int64(usage.total),
        cost=float(usage.cost),
    )
    return conversation, "\n".join(t for t in texts if t)


def _storable_number(value: Any) -> bool:
    """False for NaN, an infinity and an integer past 64 bits (JSON allows ``1e400`` and a
    400-digit count, Python's json reads ``NaN``): summed, one of them failed every
    ``agentcore logs`` with ValueError or OverflowError."""
    if isinstance(value, float):
        return math.isfinite(value)
    return not isinstance(value, int) or -_INT64_MAX <= value <= _INT64_MAX


def _add_usage(totals: UsageTotals, usage: Any) -> None:
    """``totals.add(usage)``, leaving out a usage with a number that cannot be summed and stored
    (see :func:`_storable_number`), as the sums leave out one with a missing count."""
    if isinstance(usage, dict):
        cost = usage.get("cost")
        numbers = [usage.get(key) for key in ("input", "output", "cacheRead", "cacheWrite")]
        numbers.append(cost.get("total") if isinstance(cost, dict) else None)
        if not all(_storable_number(n) for n in numbers):
            return
    totals.add(usage)


def _int64(value: float) -> int:
    """``value`` as an integer SQLite stores: a sum past 64 bits is clamped to the largest one."""
    return max(-_INT64_MAX - 1, min(_INT64_MAX, int(value)))


def _stat_key(stat: os.stat_result) -> Tuple[int, int]:
    """``(mtime_ns, size)`` as stored and compared: an mtime past 2262 (``touch -d 2300-01-01``, a
    clock that was wrong) does not fit SQLite's 64 bits and is clamped; the size still tells a
    change of such a file."""
    return _int64(stat.st_mtime_ns), stat.st_size


# --------------------------------------------------------------------------- the database


def fts5_available(connection: Any) -> bool:
    """Whether this sqlite3 build has FTS5 (tried on a temporary table)."""
    import sqlite3

    try:
        connection.execute("CREATE VIRTUAL TABLE temp._agentcore_fts_probe USING fts5(body)")
        connection.execute("DROP TABLE temp._agentcore_fts_probe")
    except sqlite3.OperationalError:
        return False
    return True


def _fts_query(text: str) -> str:
    """An FTS5 query matching every word of ``text`` (each quoted: no operators, no syntax errors)."""
    words = text.split()
    return " ".join('"' + word.replace('"', '""') + '"' for word in words)


def _searchable(word: str) -> bool:
    """Whether FTS5's default tokenizer (unicode61) finds ``word`` in a text: it holds a letter or
    a digit. A word of symbols alone (an emoji, ``->``, ``==``) is no token: as a phrase it matched
    nothing, alone, or was ignored beside other words."""
    return any(char.isalnum() for char in word)


def _like_pattern(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class LogIndex:
    """The ``logs.db`` index of the sessions directory ``directory`` (see the module docstring).

    ``in_memory``: a private index in memory instead of ``logs.db`` (for a sessions directory
    whose index cannot be opened: read-only, or locked by a stuck writer); it starts empty, so
    :meth:`refresh` reads every file. ``busy_timeout``: how long each statement waits for another
    writer (default :data:`BUSY_TIMEOUT`), for a caller that waits in shorter slices to check for
    an interrupt between them. Use as a context manager or call :meth:`close`."""

    def __init__(self, directory: str, *, in_memory: bool = False, busy_timeout: Optional[float] = None) -> None:
        self.directory = os.path.abspath(directory)
        self.path = ":memory:" if in_memory else os.path.join(self.directory, INDEX_FILE)
        self.busy_timeout = BUSY_TIMEOUT if busy_timeout is None else busy_timeout
        self.fts = True
        self._db: Any = None
        # what a write read before it found the database locked, by (path, mtime_ns, size): a
        # caller trying again (agentcore.cli._logs waits in slices) does not read the files anew
        self._read: Dict[Tuple[str, int, int], Optional[Tuple[Conversation, str]]] = {}
        self._open()

    # ------------------------------------------------------------------ open

    def _open(self) -> None:
        import sqlite3

        try:
            self._connect()
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError) and not _corrupt(exc):
                raise  # locked, read-only, no such directory: not a reason to delete anything
            self.close()
            if self.path == ":memory:":
                raise
            self._rebuild()

    def _rebuild(self) -> None:
        """Delete the database (and its journals) and create it anew, empty."""
        self.close()
        for suffix in ("", "-journal", "-wal", "-shm"):
            try:
                os.unlink(self.path + suffix)
            except FileNotFoundError:
                pass
        self._connect()

    def _repairing(self, action: Callable[[], _T], *, refill: bool) -> _T:
        """``action()``; when it finds the database damaged (a corrupt page of a table or of the
        full-text index, which opening does not read), the database is rebuilt (``refill``: and
        filled from the files) and ``action`` runs once more."""
        import sqlite3

        try:
            return action()
        except sqlite3.DatabaseError as exc:
            if self.path == ":memory:" or not _corrupt(exc):
                raise
        self._rebuild()
        if refill:
            self._refresh()
        return action()

    def _connect(self) -> None:
        import sqlite3

        if self.path != ":memory:":
            os.makedirs(self.directory, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None)
        self._db.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        tables = {row[0]: row[1] or "" for row in self._db.execute("SELECT name, sql FROM sqlite_master")}
        if version == _SCHEMA and "conversations" in tables and "texts" in tables:
            self.fts = "fts5" in tables["texts"].lower()
            return
        self._create(tables)

    def _create(self, existing: Dict[str, str]) -> None:
        self.fts = fts5_available(self._db)
        self._db.execute("BEGIN IMMEDIATE")
        try:
            for name in ("texts", "conversations"):
                if name in existing:
                    self._db.execute(f"DROP TABLE IF EXISTS {name}")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS conversations (rowid INTEGER PRIMARY KEY, path TEXT UNIQUE NOT NULL, "
                "mtime_ns INTEGER, size INTEGER, id TEXT, cwd TEXT, created TEXT, updated REAL, model TEXT, "
                "first_prompt TEXT, messages INTEGER, input_tokens INTEGER, output_tokens INTEGER, "
                "total_tokens INTEGER, cost REAL)"
            )
            self._db.execute("CREATE INDEX IF NOT EXISTS conversations_updated ON conversations (updated)")
            if self.fts:
                self._db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS texts USING fts5(body)")
            else:
                self._db.execute("CREATE TABLE IF NOT EXISTS texts (rowid INTEGER PRIMARY KEY, body TEXT)")
            self._db.execute(f"PRAGMA user_version = {_SCHEMA}")
            self._db.execute("COMMIT")
        except BaseException:
            _rollback(self._db)
            raise

    def close(self) -> None:
        self._read.clear()
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> LogIndex:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ writes

    def update(self, path: str) -> None:
        """Re-read one session file into the index (a file that is gone is removed from it).
        A damaged database is rebuilt first (the other files return at the next :meth:`refresh`)."""
        self._repairing(lambda: self._update(path), refill=False)

    def _update(self, path: str) -> None:
        path = os.path.abspath(path)
        try:
            stat = os.stat(path)
        except FileNotFoundError:
            self._write([], [path])
            return
        self._write([(path, *_stat_key(stat))], [])

    def refresh(self) -> int:
        """Bring the index up to date with the files; returns how many files were (re)read.
        A damaged database is rebuilt and filled from every file."""
        return self._repairing(self._refresh, refill=False)

    def _refresh(self) -> int:
        known = {
            _path_of(row[0]): (row[1], row[2])
            for row in self._db.execute("SELECT path, mtime_ns, size FROM conversations")
        }
        changed: List[Tuple[str, int, int]] = []
        seen = set()
        for path in glob.glob(os.path.join(glob.escape(self.directory), "*", "*.jsonl")):
            try:
                stat = os.stat(path)
            except OSError:
                continue
            seen.add(path)
            key = _stat_key(stat)
            if known.get(path) != key:
                changed.append((path, *key))
        gone = [path for path in known if path not in seen]
        if changed or gone:
            self._write(changed, gone)
        return len(changed)

    def _write(self, files: Iterable[Tuple[str, int, int]], gone: Iterable[str]) -> None:
        read = []
        for path, mtime_ns, size in files:  # read the files before taking the write lock
            key = (path, mtime_ns, size)
            if key not in self._read:
                self._read[key] = read_conversation(path)
            read.append((path, mtime_ns, size, self._read[key]))
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            for path in gone:
                self._delete(path)
            for path, mtime_ns, size, found in read:
                self._delete(path)
                if found is None:  # not a session file: remember its stat so it is not re-read
                    db.execute(
                        "INSERT INTO conversations (path, mtime_ns, size) VALUES (?, ?, ?)",
                        (_db_path(path), mtime_ns, size),
                    )
                    continue
                c, text = found
                cursor = db.execute(
                    "INSERT INTO conversations (path, mtime_ns, size, id, cwd, created, updated, model, first_prompt, "
                    "messages, input_tokens, output_tokens, total_tokens, cost) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        _db_path(path),
                        mtime_ns,
                        size,
                        c.id,
                        _db_cwd(c.cwd),
                        c.created,
                        c.updated,
                        c.model,
                        c.first_prompt,
                        c.messages,
                        c.input_tokens,
                        c.output_tokens,
                        c.total_tokens,
                        c.cost,
                    ),
                )
                db.execute("INSERT INTO texts (rowid, body) VALUES (?, ?)", (cursor.lastrowid, text))
            db.execute("COMMIT")
            self._read.clear()
        except BaseException:
            _rollback(db)
            raise

    def _delete(self, path: str) -> None:
        row = self._db.execute("SELECT rowid FROM conversations WHERE path = ?", (_db_path(path),)).fetchone()
        if row is not None:
            self._db.execute("DELETE FROM texts WHERE rowid = ?", (row[0],))
            self._db.execute("DELETE FROM conversations WHERE rowid = ?", (row[0],))

    # ------------------------------------------------------------------ reads

    def latest(
        self, limit: Optional[int] = 3, query: Optional[str] = None, cwd: Optional[str] = None
    ) -> List[Conversation]:
        """Conversations with at least one message, most recently updated first; with ``query``
        only those whose prompts or answers contain every word of it (FTS5; a word of symbols
        alone, such as an emoji, which FTS5 does not index, as typed), or the text as typed
        (LIKE, case-insensitive for ASCII, when FTS5 is missing). ``limit`` None (or one past
        SQLite's 64-bit integers): all. A damaged database is rebuilt from the files first."""
        return self._repairing(lambda: self._latest(limit, query, cwd), refill=True)

    def _latest(self, limit: Optional[int], query: Optional[str], cwd: Optional[str]) -> List[Conversation]:
        select = ", ".join(f"c.{name}" for name in _COLUMNS)
        where = ["c.messages > 0"]
        params: List[Any] = []
        source = "conversations c"
        if query is not None and query.strip():
            if self.fts:
                source += " JOIN texts ON texts.rowid = c.rowid"
                words = query.split()
                tokens = [word for word in words if _searchable(word)]
                if tokens:
                    where.append("texts MATCH ?")
                    params.append(_fts_query(" ".join(tokens)))
                for word in words:  # symbols alone (an emoji): matched as typed
                    if not _searchable(word):
                        where.append("texts.body LIKE ? ESCAPE '\\'")
                        params.append(_like_pattern(word))
            else:
                source += " JOIN texts t ON t.rowid = c.rowid"
                where.append("t.body LIKE ? ESCAPE '\\'")
                params.append(_like_pattern(query.strip()))
        if cwd is not None:
            where.append("c.cwd = ?")
            params.append(_db_cwd(cwd))
        sql = f"SELECT {select} FROM {source} WHERE {' AND '.join(where)} ORDER BY c.updated DESC, c.rowid DESC"
        if limit is not None and limit <= _INT64_MAX:
            sql += " LIMIT ?"
            params.append(limit)
        rows = self._db.execute(sql, params)
        return [Conversation(row[0], _path_of(row[1]), _path_of(row[2]), *row[3:]) for row in rows]


def _rollback(db: Any) -> None:
    """Roll back the open transaction, if SQLite has not already: on a full disk or an I/O error it
    rolls back by itself, and a second ROLLBACK would raise "no transaction is active" in place of
    the error that says what went wrong."""
    if db.in_transaction:
        db.execute("ROLLBACK")


def busy(exc: Exception) -> bool:
    """Whether ``exc`` is SQLite's "database is locked": another connection holds the lock."""
    name = str(getattr(exc, "sqlite_errorname", ""))  # Python 3.11+
    return name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "database is locked" in str(exc).lower()


def _corrupt(exc: Exception) -> bool:
    """Whether ``exc`` says the database is damaged (SQLITE_CORRUPT, SQLITE_NOTADB, a table or the
    full-text index's own tables missing), not locked or unwritable."""
    name = str(getattr(exc, "sqlite_errorname", ""))  # Python 3.11+
    if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")):
        return True
    text = str(exc).lower()
    return any(words in text for words in ("malformed", "not a database", "no such table", "vtable constructor failed"))

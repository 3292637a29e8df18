"""The database schema and its versioned migrations.

Tables live in the connection's current schema (``search_path``; choose one with
``options=-csearch_path=NAME`` in the DSN), all prefixed ``agentcore_``:

* ``agentcore_schema_version(version)``: one row, the schema version of these tables.
* ``agentcore_sessions``: one row per session (its JSONL header, cwd, creation time, parent
  session; since version 2 also its name and message count, kept current by every append, so
  listing sessions reads no entries).
* ``agentcore_entries``: one row per entry, keyed ``(session_id, seq)`` (append order) and unique
  on ``(session_id, id)``; ``payload`` is byte for byte the entry's JSONL line.

:func:`migrate` brings the tables to :data:`SCHEMA_VERSION` inside one transaction holding a
transaction-level advisory lock, so concurrent openers (many workers starting at once) migrate
once (that transaction is read committed even where the server's ``default_transaction_isolation``
is ``repeatable read`` or ``serializable``). A database whose version is newer than this library's
is refused with an error saying to upgrade ``agentcore-postgres``; nothing is changed then.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

__all__ = ["SCHEMA_VERSION", "MIGRATIONS", "migrate", "schema_version", "SchemaTooNewError"]

#: The version this library reads and writes.
SCHEMA_VERSION = 2

#: Statements that take the tables from version ``n - 1`` to ``n``.
MIGRATIONS: Dict[int, List[str]] = {
    1: [
        """CREATE TABLE agentcore_sessions(
               id text PRIMARY KEY, header text NOT NULL, cwd text NOT NULL, created text NOT NULL,
               parent_session text)""",
        "CREATE INDEX agentcore_sessions_by_created ON agentcore_sessions(created DESC, id DESC)",
        """CREATE TABLE agentcore_entries(
               session_id text NOT NULL REFERENCES agentcore_sessions(id) ON DELETE CASCADE,
               seq integer NOT NULL, id text NOT NULL, parent_id text, type text NOT NULL,
               timestamp text NOT NULL, role text, payload text NOT NULL,
               PRIMARY KEY(session_id, seq), UNIQUE(session_id, id))""",
    ],
    2: [
        # Listing and searching sessions read these columns through an index, never the entries.
        "ALTER TABLE agentcore_sessions ADD COLUMN name text",
        "ALTER TABLE agentcore_sessions ADD COLUMN message_count integer NOT NULL DEFAULT 0",
        """UPDATE agentcore_sessions s SET
               message_count = (SELECT count(*) FROM agentcore_entries e
                                WHERE e.session_id = s.id AND e.type = 'message'),
               name = (SELECT nullif(btrim(regexp_replace(e.payload::json->>'name', '[\\r\\n]+', ' ', 'g')), '')
                       FROM agentcore_entries e WHERE e.session_id = s.id AND e.type = 'session_info'
                       ORDER BY e.seq DESC LIMIT 1)""",
        "CREATE INDEX agentcore_sessions_by_cwd ON agentcore_sessions(cwd, created DESC, id DESC)",
    ],
}

#: The first statement of a transaction that must see what others committed while it waited.
READ_COMMITTED = "SET TRANSACTION ISOLATION LEVEL READ COMMITTED"

# Any constant: the transaction-level advisory lock key that serialises migrations.
_MIGRATION_LOCK = 0x6167_6E74_636F_7265 & 0x7FFF_FFFF_FFFF_FFFF


class SchemaTooNewError(Exception):
    """The tables were written by a newer agentcore-postgres (``version`` > :data:`SCHEMA_VERSION`)."""

    def __init__(self, version: int) -> None:
        super().__init__(
            f"the agentcore tables have schema version {version}, newer than this "
            f"agentcore-postgres supports ({SCHEMA_VERSION}); upgrade agentcore-postgres "
            "(pip install -U agentcore-postgres) on every machine that opens them"
        )
        self.version = version

    def __reduce__(self) -> Any:  # pickled as what it was made from (the default passes the message)
        return (type(self), (self.version,))


def schema_version(conn: Any) -> Optional[int]:
    """The tables' version, or None when there are none (no ``agentcore_schema_version`` table)."""
    row = conn.execute("SELECT to_regclass('agentcore_schema_version') IS NOT NULL").fetchone()
    if not row[0]:
        return None
    row = conn.execute("SELECT max(version) FROM agentcore_schema_version").fetchone()
    return row[0] if row and row[0] is not None else 0


def migrate(conn: Any, target: int = SCHEMA_VERSION) -> int:
    """Create or upgrade the tables to ``target`` (one transaction); returns the version found.

    ``conn`` is an autocommit psycopg connection; the transaction is read committed whatever the
    server's default isolation, so it sees the tables a concurrent migration committed. Raises
    :class:`SchemaTooNewError` (nothing changed) when the tables are newer than ``target``.
    """
    with conn.transaction():
        # Read committed whatever the server's default_transaction_isolation: a repeatable-read or
        # serializable snapshot taken before the lock was granted would not see the tables another
        # opener created meanwhile, and this one would create them again.
        conn.execute(READ_COMMITTED)
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        found = schema_version(conn)
        if found is None:
            conn.execute("CREATE TABLE agentcore_schema_version(version integer NOT NULL)")
            current = 0
        else:
            current = found
        if current > target:
            raise SchemaTooNewError(current)
        for version in range(current + 1, target + 1):
            for statement in MIGRATIONS[version]:
                conn.execute(statement)
        if current != target:
            conn.execute("DELETE FROM agentcore_schema_version")
            conn.execute("INSERT INTO agentcore_schema_version(version) VALUES (%s)", (target,))
    return current if found is not None else 0

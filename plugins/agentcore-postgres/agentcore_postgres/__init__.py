"""agentcore-postgres: agentcore sessions in PostgreSQL (psycopg 3).

``PostgresSessionStorage(dsn, session_id=None)`` stores one session of a shared database, and the
``postgresql://...?session=ID`` URL scheme makes it reachable through ``agentcore.open_session``.
See README.rst for the DSN, the schema, locking and the URL scheme.
"""

from __future__ import annotations

from .storage import PostgresSessionInfo, PostgresSessionStorage

__all__ = ["PostgresSessionStorage", "PostgresSessionInfo"]

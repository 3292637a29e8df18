"""The ``postgresql://`` (and ``postgres://``) session URL scheme, registered through agentcore's
``register_storages`` hook (entry point ``postgres`` of the ``agentcore`` group).

``open_session("postgresql://user:secret@host:5432/db?session=ID")``: the ``session`` query
parameter names the session (without it a new session is created); every other query parameter
is libpq's (``sslmode``, ``options``, ``connect_timeout``, ...) and goes to the connection as it is.
``create=True`` creates a missing ``session=ID``.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple
from urllib.parse import unquote_plus, urlsplit, urlunsplit

from agentcore import hookimpl
from agentcore.session.urls import StorageScheme

__all__ = ["open_url", "register_storages", "split_session_url"]


def split_session_url(url: str) -> Tuple[str, Optional[str]]:
    """``(dsn, session_id)``: the URL without its ``session`` parameter, and that parameter.

    The other parameters stay exactly as written: libpq decodes ``%20`` but not ``+``, so
    re-encoding them (``options=-c%20search_path%3Dx`` as ``-c+search_path...``) would change
    what the server is told."""
    parts = urlsplit(url)
    session_ids: List[str] = []
    rest: List[str] = []
    for piece in parts.query.split("&") if parts.query else ():
        key, _, value = piece.partition("=")
        if unquote_plus(key) == "session":
            session_ids.append(unquote_plus(value))
        else:
            rest.append(piece)
    dsn = urlunsplit(parts._replace(query="&".join(rest)))
    return dsn, (session_ids[-1] or None) if session_ids else None


def open_url(url: str, *, read_only: bool = False, create: bool = False) -> Any:
    """The storage of a ``postgresql://...?session=ID`` URL (see the module docstring)."""
    from .storage import PostgresSessionStorage

    dsn, session_id = split_session_url(url)
    return PostgresSessionStorage(dsn, session_id, read_only=read_only, create=create)


@hookimpl
def register_storages(register: Callable[[Any], None]) -> None:
    for scheme in ("postgresql", "postgres"):
        register(StorageScheme(scheme, open_url, "a session in PostgreSQL: postgresql://user@host/db?session=ID"))

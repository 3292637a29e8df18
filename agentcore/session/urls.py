"""Sessions by URL: :func:`open_session` and the session-storage schemes (``register_storages``).

A URL names a session wherever it lives, so a recipe (``AgentTask(session=url)``) can travel to
another process or machine and reopen it there:

* ``jsonl:///abs/path/file.jsonl`` (or ``jsonl:relative/file.jsonl``): one JSONL session file.
* ``sqlite:///abs/path/sessions.db?session=ID``: one session of a SQLite database; without
  ``session=`` the database's own rules apply (a new or empty database gets a new session, one with
  a single session opens it).
* ``memory:`` (optionally ``memory:?session=ID``): a new in-memory session.
* any scheme a plugin registers through the ``register_storages`` hook, e.g. ``postgresql://`` from
  ``agentcore-postgres``.

Paths are percent-decoded (``%20`` for a space). The built-in schemes take one optional query
parameter besides ``session``: ``fsync`` (``never``, ``always``, ``close``; see the storages).
Unknown query parameters are refused, so a mistyped one is never ignored silently.

Errors: a malformed URL, an unknown scheme (the message lists the known ones) or an unknown query
parameter is a ``ValueError``; a missing session is ``SessionError("not_found")`` unless
``create=True``. Messages never contain the URL's password.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional
from urllib.parse import parse_qs, unquote, urlsplit, urlunsplit

from ..hookspecs import hookimpl
from .errors import SessionError
from .session import Session
from .storage import SessionStorage

__all__ = ["StorageScheme", "open_session", "open_storage", "redact_url", "query_params",
           "register_storages"]

#: ``open(url, *, read_only, create) -> SessionStorage``
Opener = Callable[..., SessionStorage]


@dataclass(frozen=True)
class StorageScheme:
    """One URL scheme of the storage registry: what :func:`open_session` calls for it.

    ``open(url, *, read_only, create)`` gets the whole URL (parse it with :func:`query_params`) and
    returns an open storage, or raises ``ValueError`` (bad URL) or ``SessionError`` (the session
    cannot be opened); neither may contain the URL's password. ``create=True`` asks it to create a
    missing session (never to overwrite one).
    """

    scheme: str
    open: Opener
    description: str = ""


def redact_url(url: str) -> str:
    """``url`` with the password of its authority (``user:secret@host``) replaced by ``***``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    if parts.password is None:
        return url
    user, _, host = parts.netloc.rpartition("@")
    name = user.split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{name}:***@{host}"))


def query_params(url: str, allowed: List[str]) -> Dict[str, str]:
    """The query parameters of ``url`` (last value wins). ``ValueError`` names any not in ``allowed``."""
    params = {key: values[-1] for key, values in parse_qs(urlsplit(url).query, keep_blank_values=True).items()}
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        scheme = urlsplit(url).scheme
        known = ", ".join(allowed) if allowed else "none"
        raise ValueError(f"{scheme}: URL: unknown query parameter(s) {', '.join(unknown)} (known: {known})")
    return params


def _local_path(url: str) -> str:
    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost"):  # named by host only: the netloc may hold a password
        raise ValueError(f"{parts.scheme}: URL names host {parts.hostname or '?'!r}; only local files are "
                         f"supported (write {parts.scheme}:///absolute/path)")
    path = unquote(parts.path)
    if not path:
        raise ValueError(f"{parts.scheme}: URL has no path (write {parts.scheme}:///absolute/path)")
    return path


def _open_jsonl(url: str, *, read_only: bool = False, create: bool = False) -> SessionStorage:
    from .jsonl import JsonlSessionStorage

    params = query_params(url, ["fsync"])
    path = _local_path(url)
    fsync = params.get("fsync", "never")
    try:
        return JsonlSessionStorage(path, read_only=read_only, fsync=fsync)
    except SessionError as exc:
        if exc.code != "not_found" or not create or read_only:
            raise
    try:
        return JsonlSessionStorage.create(path, fsync=fsync)
    except SessionError as exc:
        if exc.code != "already_exists":
            raise
        return JsonlSessionStorage(path, fsync=fsync)  # created meanwhile by another opener


def _open_sqlite(url: str, *, read_only: bool = False, create: bool = False) -> SessionStorage:
    from .sqlite import SqliteSessionStorage

    params = query_params(url, ["session", "fsync"])
    path = _local_path(url)
    session_id = params.get("session") or None
    fsync = params.get("fsync", "never")
    try:
        return SqliteSessionStorage(path, session_id, read_only=read_only, fsync=fsync)
    except SessionError as exc:
        if exc.code != "not_found" or not create or read_only or session_id is None:
            raise
    try:
        return SqliteSessionStorage.create(path, session_id=session_id, fsync=fsync)
    except SessionError as exc:
        if exc.code != "already_exists":
            raise
        return SqliteSessionStorage(path, session_id, fsync=fsync)


def _open_memory(url: str, *, read_only: bool = False, create: bool = False) -> SessionStorage:
    from .memory import MemorySessionStorage

    parts = urlsplit(url)
    if parts.netloc or parts.path:
        raise ValueError("memory: URL takes no path (write memory: or memory:?session=ID)")
    params = query_params(url, ["session"])
    return MemorySessionStorage(session_id=params.get("session") or None)


_BUILTIN = (
    StorageScheme("jsonl", _open_jsonl, "one JSONL session file: jsonl:///path/file.jsonl"),
    StorageScheme("sqlite", _open_sqlite, "a session of a SQLite database: sqlite:///path/db?session=ID"),
    StorageScheme("memory", _open_memory, "a new in-memory session: memory:"),
)


@hookimpl
def register_storages(register: Callable[[Any], None]) -> None:
    """The built-in schemes, registered through the same hook as a plugin's."""
    for scheme in _BUILTIN:
        register(scheme)


def _scheme_of(url: str) -> str:
    if not isinstance(url, str):
        raise TypeError(f"a session URL must be a str, got {type(url).__name__}")
    head, sep, _ = url.partition(":")
    if not sep or not head or not head[0].isalpha() or len(head) == 1:  # "C:\\x" is a path, not a scheme
        raise ValueError("not a session URL (expected scheme:..., e.g. jsonl:///path/file.jsonl, "
                         "sqlite:///path/db?session=ID, memory:)")
    return head.lower()


def open_storage(url: str, *, read_only: bool = False, create: bool = False,
                 plugin_manager: Optional[Any] = None) -> SessionStorage:
    """The storage named by ``url`` (see the module docstring), from the storage registry.

    ``plugin_manager`` defaults to the process-wide default manager (built-ins and entry-point
    plugins); the first call loads the entry points.
    """
    scheme = _scheme_of(url)
    if plugin_manager is None:
        from ..plugins import default_plugin_manager

        plugin_manager = default_plugin_manager()
    table = plugin_manager.registry("storage")
    entry = table.get(scheme)
    if entry is None:
        known = ", ".join(f"{key}:" for key in sorted(table)) or "none"
        raise ValueError(f"unknown session URL scheme {scheme!r} (known: {known}); install the plugin that "
                         "provides it (see `agentcore plugins`)")
    storage = entry.value.open(url, read_only=read_only, create=create)
    if not isinstance(storage, SessionStorage):
        raise TypeError(f"the {scheme!r} storage scheme (plugin {entry.source!r}) returned "
                        f"{type(storage).__name__}, not a SessionStorage")
    return storage


def open_session(url: str, *, read_only: bool = False, create: bool = False, **session_kwargs: Any) -> Session:
    """Open the session named by ``url``: ``jsonl:///path``, ``sqlite:///path?session=ID``, ``memory:``,
    or a plugin's scheme (``postgresql://...?session=ID``).

    ``read_only=True`` opens without taking the writer lock (appends then raise). ``create=True``
    creates the session when it does not exist (a new file, or the given ``session=ID``); an
    existing one is opened, never overwritten. Without it a missing session is
    ``SessionError("not_found")``, so a mistyped URL never starts an empty session.
    ``session_kwargs`` go to :class:`Session` (``clock``, ``id_factory``).

    Raises ``ValueError`` for a malformed URL, an unknown scheme (listing the known ones) or an
    unknown query parameter, and ``SessionError`` when the storage cannot open the session; no
    message contains the URL's password. Close the session (or use ``with``) to release its lock.
    """
    return Session(open_storage(url, read_only=read_only, create=create), **session_kwargs)

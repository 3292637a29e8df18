"""The built-in session URL schemes (``jsonl:``, ``sqlite:``, ``memory:``) as a built-in plugin.

They are registered through the same ``register_storages`` hook as a plugin's schemes; this module
lives outside :mod:`agentcore.session` so that building a plugin manager imports no session module
(the storages are imported when a URL is opened). :func:`agentcore.open_session` is the public
entry point; its module, :mod:`agentcore.session.urls`, documents the URL forms.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, List
from urllib.parse import SplitResult, parse_qs, unquote_to_bytes, urlsplit

from .hookspecs import hookimpl

__all__ = ["StorageScheme", "query_params", "register_storages"]


#: ``open(url, *, read_only, create) -> SessionStorage``
Opener = Callable[..., Any]


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


_DROPPED = (("\t", "a tab", "%09"), ("\n", "a line break", "%0A"), ("\r", "a carriage return", "%0D"))


def _split(url: str) -> SplitResult:
    """``urlsplit(url)``, refusing what it would drop silently: a tab, CR or LF anywhere (urllib
    removes them, so ``jsonl:/tmp/a<TAB>b.jsonl`` would open ``/tmp/ab.jsonl``, and
    ``?session=a<LF>`` session ``a``). ``ValueError`` names the character and its escape, never
    the URL (it may hold a password)."""
    for char, name, escape in _DROPPED:
        if char in url:
            scheme = urlsplit(url).scheme or "session"
            raise ValueError(
                f"{scheme}: URL holds {name}, which a URL cannot carry (it would be dropped and "
                f"another name used); write it as {escape}, or strip it if it came with the URL's text"
            )
    return urlsplit(url)


def query_params(url: str, allowed: List[str]) -> Dict[str, str]:
    """The query parameters of ``url``. ``ValueError`` names any not in ``allowed``, and any given
    twice with different values (``?session=a&session=b``: neither is picked silently); the
    same value repeated is that value. A tab, CR or LF in ``url`` is a ``ValueError`` too (see
    :func:`_split`)."""
    parts = _split(url)
    found = parse_qs(parts.query, keep_blank_values=True)
    unknown = sorted(set(found) - set(allowed))
    if unknown:
        known = ", ".join(allowed) if allowed else "none"
        raise ValueError(f"{parts.scheme}: URL: unknown query parameter(s) {', '.join(unknown)} (known: {known})")
    repeated = sorted(key for key, values in found.items() if len(set(values)) > 1)
    if repeated:
        raise ValueError(
            f"{parts.scheme}: URL gives query parameter(s) {', '.join(repeated)} more than once with "
            "different values; give each once"
        )
    return {key: values[-1] for key, values in found.items()}


_WINDOWS = os.name == "nt"
_DRIVE_URL_PATH = re.compile(r"/[A-Za-z]:([/\\]|$)")


def _local_path(url: str) -> str:
    """The file a ``jsonl:``/``sqlite:`` URL names: ``scheme:///abs/path``, ``scheme:rel/path``,
    ``scheme:~/path`` (the home directory, as a shell would expand it), on Windows also
    ``scheme:///C:/path``. Percent-escapes are decoded to the bytes they stand for (``%FF`` is
    the byte 0xFF of a file name that is not UTF-8, as ``pathlib.Path.as_uri`` writes it).
    ``ValueError`` for a host, a ``#``, no path, a NUL character (``%00``), or a raw tab, CR or LF
    (see :func:`_split`)."""
    parts = _split(url)
    if parts.netloc not in ("", "localhost"):  # named by host only: the netloc may hold a password
        raise ValueError(
            f"{parts.scheme}: URL names host {parts.hostname or '?'!r}; only local files are "
            f"supported (write {parts.scheme}:///absolute/path)"
        )
    if parts.fragment:  # a "#" in a file name ends the URL's path: "x#y.jsonl" would open "x"
        raise ValueError(
            f"{parts.scheme}: URL has a '#' (the path would end before it); write it as %23 in a file name"
        )
    raw = parts.path
    if _WINDOWS and _DRIVE_URL_PATH.match(raw):  # file-URL form of a drive: /C:/x is C:/x
        raw = raw[1:]
    try:
        path = os.fsdecode(unquote_to_bytes(os.fsencode(raw)))
    except UnicodeError:
        raise ValueError(
            f"{parts.scheme}: URL path is not a file name of this system (its escapes are not UTF-8)"
        ) from None
    if not path:
        raise ValueError(f"{parts.scheme}: URL has no path (write {parts.scheme}:///absolute/path)")
    if "\x00" in path:
        raise ValueError(f"{parts.scheme}: URL path holds a NUL character (%00), which no file name can")
    if path.startswith("~") and not parts.netloc:
        path = os.path.expanduser(path)
    return path


def _open_jsonl(url: str, *, read_only: bool = False, create: bool = False) -> Any:
    from .session.jsonl import JsonlSessionStorage

    params = query_params(url, ["fsync"])
    path = _local_path(url)
    fsync = params.get("fsync", "never")
    from .session.errors import SessionError

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


def _open_sqlite(url: str, *, read_only: bool = False, create: bool = False) -> Any:
    """The session of a ``sqlite:`` URL. Without ``create`` a missing database file is
    ``not_found`` and nothing is created (``sqlite3`` would otherwise make the file, and a session in
    it), so a mistyped path never leaves a new database behind; an existing database follows
    :class:`SqliteSessionStorage`'s rules."""
    from .session.sqlite import SqliteSessionStorage

    params = query_params(url, ["session", "fsync"])
    path = _local_path(url)
    if path in (":memory:", "/:memory:"):  # SQLite's own name would be a file here, never memory
        raise ValueError(
            "sqlite: URL names ':memory:', which would be a file of that name; "
            "for a session held in memory only write memory: (or memory:?session=ID)"
        )
    session_id = params.get("session") or None
    fsync = params.get("fsync", "never")
    from .session.errors import SessionError

    if not create and not os.path.exists(path):
        where = os.path.abspath(path)
        raise SessionError(
            "not_found", f"{where}: no such session database (open_session(url, create=True) creates it)", path=where
        )
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


def _open_memory(url: str, *, read_only: bool = False, create: bool = False) -> Any:
    from .session.memory import MemorySessionStorage

    parts = _split(url)
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

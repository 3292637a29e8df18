"""Sessions by URL: :func:`open_session` and the session-storage schemes (``register_storages``).

A URL names a session wherever it lives, so a recipe (``AgentTask(session=url)``) can travel to
another process or machine and reopen it there:

* ``jsonl:///abs/path/file.jsonl`` (or ``jsonl:relative/file.jsonl``): one JSONL session file.
* ``sqlite:///abs/path/sessions.db?session=ID``: one session of a SQLite database; without
  ``session=`` the database's own rules apply (an empty database gets a new session, one with a
  single session opens it); a missing file is ``not_found`` unless ``create=True``.
* ``memory:`` (optionally ``memory:?session=ID``): a new in-memory session.
* any scheme a plugin registers through the ``register_storages`` hook, e.g. ``postgresql://`` from
  ``agentcore-postgres``.

Paths are percent-decoded (``%20`` for a space; ``%FF`` is byte 0xFF of a file name that is not
UTF-8, as ``pathlib.Path.as_uri()`` writes it); ``jsonl:~/file.jsonl`` starts in the home directory,
and on Windows ``jsonl:///C:/dir/file.jsonl`` names drive C:. ``sqlite::memory:`` is refused (it
would be a file named ``:memory:``): write ``memory:``. The built-in schemes take one optional query
parameter besides ``session``: ``fsync`` (``never``, ``always``, ``close``; see the storages).
Unknown query parameters are refused, so a mistyped one is never ignored silently; so is one given
twice with different values (``?session=a&session=b``), and a raw tab, CR or LF anywhere in the URL
(urllib would drop it and name another file or session: write ``%09``, ``%0A``, ``%0D``).

The built-in schemes are plugin ``agentcore._session_schemes`` (outside this package, so that
registering them imports no session module).

Errors: a malformed URL (a host, a ``#``, a NUL, a raw tab or line break), an unknown scheme (the
message lists the known ones) or an unknown or conflicting query parameter is a ``ValueError``; a missing session is
``SessionError("not_found")`` unless ``create=True``. Messages never contain the URL's password.
"""

from __future__ import annotations

from typing import Any, Optional

from .._safe import redact_url
from .._session_schemes import StorageScheme, query_params
from .session import Session
from .storage import SessionStorage

__all__ = ["StorageScheme", "open_session", "open_storage", "redact_url", "query_params"]


def _scheme_of(url: str) -> str:
    if not isinstance(url, str):
        raise TypeError(f"a session URL must be a str, got {type(url).__name__}")
    head, sep, _ = url.partition(":")
    if not sep or not head or not head[0].isalpha() or len(head) == 1:  # "C:\\x" is a path, not a scheme
        raise ValueError(
            "not a session URL (expected scheme:..., e.g. jsonl:///path/file.jsonl, "
            "sqlite:///path/db?session=ID, memory:)"
        )
    return head.lower()


def open_storage(
    url: str, *, read_only: bool = False, create: bool = False, plugin_manager: Optional[Any] = None
) -> SessionStorage:
    """The storage named by ``url`` (see the module docstring), from the storage registry.

    ``plugin_manager`` defaults to the process-wide default manager (built-ins and entry-point
    plugins); the first call loads the entry points. The ``ValueError`` for an unknown scheme lists
    the known ones and names the plugins that failed to load (one of them may provide it).
    """
    scheme = _scheme_of(url)
    if plugin_manager is None:
        from ..plugins import default_plugin_manager

        plugin_manager = default_plugin_manager()
    table = plugin_manager.registry("storage")
    entry = table.get(scheme)
    if entry is None:
        known = ", ".join(f"{key}:" for key in sorted(table)) or "none"
        raise ValueError(f"unknown session URL scheme {scheme!r} (known: {known}); {_missing_hint(plugin_manager)}")
    storage = entry.value.open(url, read_only=read_only, create=create)
    if not isinstance(storage, SessionStorage):
        raise TypeError(
            f"the {scheme!r} storage scheme (plugin {entry.source!r}) returned "
            f"{type(storage).__name__}, not a SessionStorage"
        )
    return storage


def _missing_hint(plugin_manager: Any) -> str:
    """What to do about a scheme no plugin registers: fix the plugins that failed to import or that
    implement ``register_storages`` and failed (one of them may be the one providing it), else
    install one."""
    info = getattr(plugin_manager, "plugins_info", None)
    infos = info() if callable(info) else []
    failed = [i for i in infos if i.error and (not i.hooks or "register_storages" in i.hooks)]
    if not failed:
        return "install the plugin that provides it (see `agentcore plugins`)"
    shown = "; ".join(f"{i.name!r} ({i.error})" for i in failed[:3]) + ("; ..." if len(failed) > 3 else "")
    return (
        f"{len(failed)} plugin(s) failed to load and may provide it: {shown}. Fix or uninstall them "
        "(`agentcore plugins` lists the errors), or install the plugin that provides it"
    )


def open_session(url: str, *, read_only: bool = False, create: bool = False, **session_kwargs: Any) -> Session:
    """Open the session named by ``url``: ``jsonl:///path``, ``sqlite:///path?session=ID``, ``memory:``,
    or a plugin's scheme (``postgresql://...?session=ID``).

    ``read_only=True`` opens without taking the writer lock (appends then raise). ``create=True``
    creates the session when it does not exist (a new file, or the given ``session=ID``); an
    existing one is opened, never overwritten. Without it a missing session is
    ``SessionError("not_found")``, so a mistyped URL never starts an empty session.
    ``session_kwargs`` go to :class:`Session` (``clock``, ``id_factory``).

    Raises ``ValueError`` for a malformed URL, an unknown scheme (listing the known ones) or an
    unknown or conflicting query parameter, and ``SessionError`` when the storage cannot open the session; no
    message contains the URL's password. Close the session (or use ``with``) to release its lock.
    """
    return Session(open_storage(url, read_only=read_only, create=create), **session_kwargs)

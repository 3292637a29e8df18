"""In-memory session storage: the tree index without a file. For tests, scratch agents and caching.

Entries are kept as their encoded JSON lines, exactly what the file backends store, so every read
returns a fresh decoded object and callers can never change stored data by mutating a result.
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Mapping, Optional, Union

from .entries import (
    SessionEntry,
    SessionHeader,
    check_envelope,
    encode_line,
    entry_from_dict,
    iso_from_ms,
    new_session_id,
)
from .errors import SessionError
from .storage import EAGER_TYPES, SessionStorage

__all__ = ["MemorySessionStorage"]


class MemorySessionStorage(SessionStorage):
    """A session held in memory only.

    ``entries`` pre-fills the storage (entry objects or reference JSON dicts, in append order); the
    leaf is folded over them as on load, and a leaf naming a missing entry raises
    ``SessionError("invalid_session")`` here, at construction. An item that is neither raises
    ``TypeError``; a dict that is no valid entry (no ``id``, a ``model_change`` without
    ``provider``...) ``SessionError("invalid_entry")``, values JSON cannot carry
    ``SessionError("invalid_payload")``, each naming the item (``entries[3]``) and the problem; a
    repeated id is ``SessionError("invalid_entry")`` naming the id.
    """

    def __init__(
        self,
        header: Optional[SessionHeader] = None,
        entries: Iterable[Union[SessionEntry, Mapping[str, Any]]] = (),
        *,
        cwd: Optional[str] = None,
        session_id: Optional[str] = None,
    ) -> None:
        super().__init__()
        if header is None:
            import time

            header = SessionHeader(
                id=session_id or new_session_id(),
                timestamp=iso_from_ms(int(time.time() * 1000)),
                cwd=cwd if cwd is not None else os.getcwd(),
            )
        self.header = header
        for index, item in enumerate(entries):
            self._index_line(_line_of(item, f"MemorySessionStorage(entries=...): entries[{index}]"), None)
        self._finish_load()


def _line_of(item: Any, where: str) -> bytes:
    """The stored line of one pre-filled entry; errors name ``where`` (the file backends' name a
    file and line, which a list does not have)."""
    if isinstance(item, SessionEntry):
        data = item.to_dict()
    elif isinstance(item, Mapping):
        data = dict(item)
    else:
        raise TypeError(f"{where} must be a SessionEntry or a dict, not {type(item).__name__}")
    try:
        line = encode_line(data)
    except SessionError as exc:
        raise SessionError(exc.code, f"{where}: {exc}") from None
    problem = check_envelope(data)
    if problem is None and data["type"] in EAGER_TYPES:  # decoded as indexed: check the payload too
        try:
            entry_from_dict(data)
        except ValueError as exc:
            problem = str(exc)
    if problem:
        raise SessionError("invalid_entry", f"{where}: invalid entry: {problem}")
    return line[:-1]

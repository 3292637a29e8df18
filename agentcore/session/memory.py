"""In-memory session storage: the tree index without a file. For tests, scratch agents and caching.

Entries are kept as their encoded JSON lines, exactly what the file backends store, so every read
returns a fresh decoded object and callers can never change stored data by mutating a result.
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Mapping, Optional, Union

from .entries import SessionEntry, SessionHeader, encode_line, iso_from_ms, new_session_id
from .storage import SessionStorage

__all__ = ["MemorySessionStorage"]


class MemorySessionStorage(SessionStorage):
    """A session held in memory only.

    ``entries`` pre-fills the storage (entry objects or reference JSON dicts, in append order); the
    leaf is folded over them as on load, and a leaf naming a missing entry raises
    ``SessionError("invalid_session")`` here, at construction.
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
        for item in entries:
            data = item.to_dict() if isinstance(item, SessionEntry) else dict(item)
            self._index_line(encode_line(data)[:-1], None)
        self._finish_load()

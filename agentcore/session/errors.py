"""Session errors: one exception type with a stable ``code`` (spec session.md §5).

Codes: ``not_found``, ``already_exists``, ``invalid_session``, ``invalid_entry``, ``invalid_payload``,
``invalid_fork_target``, ``invalid_query`` (an ambiguous or malformed lookup, e.g. a session id
that sessions of several cwds share), ``storage``. Messages name the file, line or entry id they are about and what
to do next; they never contain message contents.
"""

from __future__ import annotations

from typing import Optional

from .._errors import PicklableError

__all__ = ["SessionError", "SessionLockedError"]


class SessionError(PicklableError, Exception):
    """A session operation failed. ``code`` says why; ``path``/``line`` locate file problems."""

    def __init__(self, code: str, message: str, *, path: Optional[str] = None, line: Optional[int] = None) -> None:
        super().__init__(message)
        self.code = code
        self.path = path
        self.line = line

    def __repr__(self) -> str:
        return f"SessionError(code={self.code!r}, message={str(self)!r})"


class SessionLockedError(SessionError):
    """Another process (or another open handle) is writing this session."""

    def __init__(self, message: str, *, path: Optional[str] = None) -> None:
        super().__init__("storage", message, path=path)

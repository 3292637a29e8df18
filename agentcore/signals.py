"""Abort signals: one flag that reaches the provider, every hook and every tool of a run.

``AbortController.abort()`` may be called from any thread, any number of times; only the first call
counts. Callbacks registered with ``AbortSignal.add_listener`` run once, on the aborting thread, so a
provider can close a blocked HTTP response and a tool can kill its subprocess.
"""

from __future__ import annotations

import collections
import logging
import threading
from typing import Any, Callable, Deque, Optional

from ._util import Latch

__all__ = ["AbortController", "AbortSignal", "AbortError"]

_log = logging.getLogger("agentcore.signals")


class AbortError(Exception):
    """Raised by :meth:`AbortSignal.raise_if_aborted`; its message is the abort reason."""


def _reason_text(reason: Any) -> str:
    """The message of the AbortError for ``reason``; never raises (an exception given as the
    reason may have a ``__str__`` that raises, and the AbortError must still be the one raised)."""
    if reason is None:
        return "Operation aborted"
    if isinstance(reason, BaseException):
        from ._safe import exception_message

        return exception_message(reason)
    try:
        return str(reason)
    except Exception:  # noqa: BLE001 - an object whose __str__ raises
        from ._safe import safe_repr

        return safe_repr(reason)


class AbortSignal:
    """Read side of an abort: poll ``aborted``, block on ``wait()``, or register a callback."""

    __slots__ = ("_flag", "_lock", "_reason", "_listeners")

    def __init__(self) -> None:
        # set under _lock; a Latch: its Event is made only by a wait() (most runs are never
        # waited on; an Event costs 4-5 us, and a run makes one signal)
        self._flag = Latch()
        self._lock = threading.Lock()
        self._reason: Any = None
        self._listeners: Deque[Callable[[Any], Any]] = collections.deque()  # not yet called

    @property
    def aborted(self) -> bool:
        """True once the run was aborted. Never goes back to False."""
        return self._flag.is_set()

    @property
    def reason(self) -> Any:
        """What ``abort(reason)`` was given (None when no reason was given or not aborted)."""
        return self._reason

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Block until aborted or ``timeout`` seconds passed; return ``aborted``."""
        return self._flag.wait(timeout)

    def raise_if_aborted(self) -> None:
        """Raise :class:`AbortError` if aborted (handy inside long tool loops)."""
        if self.aborted:
            raise AbortError(_reason_text(self._reason))

    def add_listener(self, callback: Callable[[Any], Any]) -> None:
        """Call ``callback(reason)`` once on abort; at once (on this thread) if already aborted.

        Exceptions from callbacks are logged and never reach the aborting thread.
        """
        with self._lock:
            if not self._flag.is_set():
                self._listeners.append(callback)
                return
        self._call(callback)

    def remove_listener(self, callback: Callable[[Any], Any]) -> None:
        """Forget ``callback``; does nothing if it was not registered or already called.

        Also while an abort is notifying (from another listener or another thread): a callback
        removed before its turn is not called."""
        with self._lock:
            try:
                self._listeners.remove(callback)
            except ValueError:
                pass

    def _abort(self, reason: Any) -> bool:
        with self._lock:
            if self._flag.is_set():
                return False
            self._reason = reason
            self._flag.set()
        # Listeners are taken one at a time, so one removed meanwhile (by an earlier listener or
        # another thread) is not called; one added meanwhile runs at once on its adding thread.
        interrupted: Optional[BaseException] = None
        while True:
            try:
                with self._lock:
                    if not self._listeners:
                        break
                    callback = self._listeners.popleft()
                self._call(callback)
            except BaseException as exc:  # noqa: BLE001 - a Ctrl+C meanwhile: raised once all were told
                interrupted = interrupted or exc
        if interrupted is not None:
            raise interrupted  # (each listener was taken off: none would ever be called again)
        return True

    def _call(self, callback: Callable[[Any], Any]) -> None:
        try:
            callback(self._reason)
        except Exception:  # a broken callback must not stop the others or the aborting caller
            _log.exception("abort listener %r raised", callback)

    def __repr__(self) -> str:
        return f"AbortSignal(aborted={self.aborted})"


class AbortController:
    """Write side of an abort. Each run gets a fresh controller; its ``signal`` stays aborted after."""

    __slots__ = ("signal",)

    def __init__(self) -> None:
        self.signal = AbortSignal()

    def abort(self, reason: Any = None) -> bool:
        """Abort the signal; idempotent and thread-safe. Returns True only for the call that aborted."""
        return self.signal._abort(reason)

    def __repr__(self) -> str:
        return f"AbortController(aborted={self.signal.aborted})"

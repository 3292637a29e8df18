"""Every Ctrl-C becomes one KeyboardInterrupt in the main thread, even at the readline prompt.

CPython's readline waits for a key in ``select()`` and runs Python's signal handlers only when
that call fails with EINTR. A SIGINT that arrives just outside the call (readline echoing the
previous key, redrawing the line; on a loaded machine that window is wide) sets Python's
"signal tripped" flag and nothing else: ``select()`` then blocks until the next key, so the
Ctrl-C seems ignored. The same happens to any blocking call in the main thread when the kernel
hands the signal to another thread.

:func:`interrupts_reach_main_thread` closes that gap for a command's duration: the C-level signal
handler also writes a byte to a wake-up pipe (:func:`signal.set_wakeup_fd`); a watcher thread
(which blocks SIGINT itself) reads it and, if the main thread has not run the Python handler
shortly after, sends SIGINT to the main thread again while it is blocked, so the blocking call
fails with EINTR and the handler runs. A re-sent signal that finds the first one still pending
merges with it, so one key press gives one KeyboardInterrupt.

SIGTERM (a supervisor, ``timeout``, a CI runner stopping the command) is relayed the same way and
raises :class:`Terminated`, a ``KeyboardInterrupt``: the command stops as after Ctrl-C (a run is
aborted and its aborted answer recorded, the session closed) and exits with status 143 instead of
dying with the partial answer lost.

It does nothing off the main thread and on platforms without :func:`signal.pthread_kill`; a signal
whose handler is not Python's default one (SIGINT ignored by a parent shell, a handler the caller
installed) is left alone: the caller's choice stands. A handler installed inside the block (``agentcore
rpc`` installs its own for SIGTERM) is never re-sent to. On exit the previous handlers and wake-up
fd are restored.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from typing import Any, Dict, Iterator, Tuple, Type

__all__ = ["interrupts_reach_main_thread", "Terminated"]

GRACE_SECONDS = 0.05  # how long the main thread gets to run the handler on its own before a re-send
MAX_RESENDS = 40  # per signal: a main thread busy in C code that never checks signals gives up


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: stop as after Ctrl-C, then exit with status 143 (128 + SIGTERM)."""


class _Relay:
    """Counts each relayed signal delivered (the watcher, from the wake-up pipe) and handled (the
    main thread).

    Each counter has one writer, and the handlers take no lock (a second Ctrl-C may run one again
    while it is running)."""

    def __init__(self, main_id: int, read_fd: int, signals: Dict[int, Type[BaseException]]) -> None:
        self.main_id = main_id
        self.read_fd = read_fd
        self.raises = signals  # signal number -> the exception its handler raises
        self.handled = dict.fromkeys(signals, 0)  # written by the main thread only (in the handlers)
        self.delivered = dict.fromkeys(signals, 0)  # written by the watcher only
        self.resent = dict.fromkeys(signals, 0)  # bytes in the pipe that are our own re-sends
        self.closing = False  # set by the main thread when the block ends: no more re-sends

    def handle(self, signum: int, frame: Any) -> None:
        """The handler of every relayed signal, in the main thread: count it, then raise as
        Python's default SIGINT handler does (:class:`Terminated` for SIGTERM)."""
        self.handled[signum] += 1
        raise self.raises[signum]()

    def watch(self) -> None:
        """The watcher thread's body (started with the relayed signals blocked); ends when the
        pipe's write end closes, and closes the read end itself (the main thread may stop waiting
        for it)."""
        try:
            self._relay()
        finally:
            os.close(self.read_fd)

    def _relay(self) -> None:
        while True:
            data = os.read(self.read_fd, 512)
            if not data:
                return
            for signum in self.raises:
                count = data.count(signum)
                if not count:
                    continue
                own = min(count, self.resent[signum])
                self.resent[signum] -= own
                self.delivered[signum] += count - own
                self._see_handled(signum)

    def _see_handled(self, signum: int) -> None:
        """Re-send ``signum`` to the main thread until it has handled every delivered one (while
        the handler is still ours: a handler installed meanwhile is the caller's business)."""
        resends = 0
        while resends < MAX_RESENDS:
            time.sleep(GRACE_SECONDS)  # the usual case: the main thread ran the handler at once
            if self.handled[signum] >= self.delivered[signum] or self.closing:
                break
            if getattr(signal.getsignal(signum), "__self__", None) is not self:
                break
            self.resent[signum] += 1
            resends += 1
            try:
                signal.pthread_kill(self.main_id, signum)
            except (OSError, ValueError):  # the main thread is gone: nothing to interrupt
                return
        # a re-send that crossed a handler already running counts once more; it must not stand
        # in for the next one
        self.delivered[signum] = max(self.delivered[signum], self.handled[signum])


_DEFAULTS: Dict[int, Tuple[Any, Type[BaseException]]] = {
    signal.SIGINT: (signal.default_int_handler, KeyboardInterrupt),
    signal.SIGTERM: (signal.SIG_DFL, Terminated),
}


@contextlib.contextmanager
def interrupts_reach_main_thread() -> Iterator[None]:
    """Make every SIGINT (and SIGTERM) during the block raise KeyboardInterrupt (:class:`Terminated`)
    in the main thread promptly."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_kill"):
        yield
        return
    relayed = {signum: raises for signum, (default, raises) in _DEFAULTS.items() if signal.getsignal(signum) is default}
    if not relayed:
        yield
        return
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)  # the C-level handler must never block
    relay = _Relay(threading.get_ident(), read_fd, relayed)
    watcher = threading.Thread(target=relay.watch, name="agentcore-sigint-relay", daemon=True)
    previous_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    try:
        for signum in relayed:
            signal.signal(signum, relay.handle)
        # the watcher inherits a mask with the relayed signals blocked: the kernel never picks it
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, set(relayed))
        try:
            watcher.start()
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        yield
    finally:
        signal.set_wakeup_fd(previous_fd)  # first: the C handler stops writing to our pipe
        relay.closing = True
        os.close(write_fd)  # the watcher reads end of file, closes the read end and finishes
        try:
            if watcher.is_alive():
                watcher.join()
        finally:
            for signum in relayed:
                signal.signal(signum, _DEFAULTS[signum][0])

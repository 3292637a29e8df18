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

It does nothing off the main thread, on platforms without :func:`signal.pthread_kill`, and when
SIGINT is not Python's default handler (ignored by a parent shell, or the caller installed its own
handler): the caller's choice stands. On exit the previous handler and wake-up fd are restored.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from typing import Any, Iterator

__all__ = ["interrupts_reach_main_thread"]

GRACE_SECONDS = 0.05  # how long the main thread gets to run the handler on its own before a re-send
MAX_RESENDS = 40  # per key press: a main thread busy in C code that never checks signals gives up


class _Relay:
    """Counts SIGINTs delivered (the watcher, from the wake-up pipe) and handled (the main thread).

    Each counter has one writer, and the handler takes no lock (a second Ctrl-C may run it again
    while it is running)."""

    def __init__(self, main_id: int, read_fd: int) -> None:
        self.main_id = main_id
        self.read_fd = read_fd
        self.handled = 0  # written by the main thread only (in the handler)
        self.delivered = 0  # written by the watcher only
        self.resent = 0  # bytes in the pipe that are our own re-sends, not key presses
        self.closing = False  # set by the main thread when the block ends: no more re-sends

    def handle(self, signum: int, frame: Any) -> None:
        """The SIGINT handler, in the main thread: count it, then behave as Python's default one."""
        self.handled += 1
        raise KeyboardInterrupt

    def watch(self) -> None:
        """The watcher thread's body (started with SIGINT blocked); ends when the pipe's write
        end closes, and closes the read end itself (the main thread may stop waiting for it)."""
        try:
            self._relay()
        finally:
            os.close(self.read_fd)

    def _relay(self) -> None:
        while True:
            data = os.read(self.read_fd, 512)
            if not data:
                return
            presses = data.count(signal.SIGINT)
            own = min(presses, self.resent)
            self.resent -= own
            self.delivered += presses - own
            self._see_handled()

    def _see_handled(self) -> None:
        """Re-send SIGINT to the main thread until it has handled every delivered press."""
        resends = 0
        while resends < MAX_RESENDS:
            time.sleep(GRACE_SECONDS)  # the usual case: the main thread ran the handler at once
            if self.handled >= self.delivered or self.closing:
                break
            self.resent += 1
            resends += 1
            try:
                signal.pthread_kill(self.main_id, signal.SIGINT)
            except (OSError, ValueError):  # the main thread is gone: nothing to interrupt
                return
        # a re-send that crossed a handler already running counts once more; it must not stand
        # in for the next press
        self.delivered = max(self.delivered, self.handled)


@contextlib.contextmanager
def interrupts_reach_main_thread() -> Iterator[None]:
    """Make every SIGINT during the block raise KeyboardInterrupt in the main thread promptly."""
    if (
        threading.current_thread() is not threading.main_thread()
        or not hasattr(signal, "pthread_kill")
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)  # the C-level handler must never block
    relay = _Relay(threading.get_ident(), read_fd)
    watcher = threading.Thread(target=relay.watch, name="agentcore-sigint-relay", daemon=True)
    previous_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    try:
        signal.signal(signal.SIGINT, relay.handle)
        # the watcher inherits a mask with SIGINT blocked: the kernel never picks it
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
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
            signal.signal(signal.SIGINT, signal.default_int_handler)

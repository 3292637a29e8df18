"""Progress of a ``run_many`` call: the :class:`ManyProgress` snapshot and its displays.

``progress=None`` (the default) picks a display: an updating output area in a Jupyter kernel, a
live line on stderr when stderr is a terminal, nothing otherwise (a log file or CI stays clean).
``progress=True`` forces the display (the stderr line when not in a kernel; nothing when there
is no stderr, ``sys.stderr is None`` under pythonw), ``False`` shows nothing, a callable
receives every snapshot (on the thread iterating ``run_many``).

The two displays are each a :class:`LiveDisplay`: ``run_many`` shows the first snapshot from the
calling thread (so a notebook's output area belongs to the calling cell) and then also refreshes
them from a thread of its own every quarter second, so the line keeps moving while the loop
consuming the results is busy with one (a callable only hears from the iterating thread).
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, TextIO

__all__ = ["ManyProgress", "LiveDisplay", "make_reporter"]


@dataclass(frozen=True)
class ManyProgress:
    """One moment of a ``run_many`` call.

    A task counts as ``done`` or ``failed`` as soon as it completes (``run_many``'s scheduler
    thread has its result), whether or not the loop iterating ``run_many`` has received that
    result yet, so a slow consumer does not make finished tasks look pending; ``running`` counts
    the tasks started and not completed (on a process pool, at most one per worker process:
    the pool marks a task running already as it queues it for a process; on Dask,
    every task submitted and not completed: its futures do not tell when they start);
    ``pending`` the rest. Tokens and cost sum the
    ``TaskResult.usage`` of the completed tasks (a worker reports usage with its result),
    compaction summaries included. ``rate`` is completed tasks per second since the start.
    Snapshots are made and passed to the ``progress`` callable on the iterating thread only,
    while it waits for the next result (at least every quarter second) and before each result is
    yielded; the built-in displays are refreshed in between too (see the module docstring).
    """

    total: int
    done: int
    failed: int
    running: int
    input_tokens: int
    output_tokens: int
    cost: float
    elapsed: float
    finished: bool = False
    #: the call was interrupted (Ctrl+C, or the iterator closed): ``pending`` tasks never finished
    #: (never started, cancelled, or aborted by the interruption: a re-run runs them again; what
    #: an aborted one was billed is in the tokens and cost); tasks that completed before it,
    #: their results consumed or not, are ``done`` or ``failed``
    interrupted: bool = False

    @property
    def pending(self) -> int:
        return self.total - self.done - self.failed - self.running

    @property
    def rate(self) -> float:
        return (self.done + self.failed) / self.elapsed if self.elapsed > 0 else 0.0

    def line(self) -> str:
        """``"37/200 done, 1 failed, 8 running | 12.3k tokens $0.0412 | 4.1 tasks/s | 9s"``."""
        tokens = self.input_tokens + self.output_tokens
        shown = f"{tokens / 1000:.1f}k" if tokens >= 1000 else str(tokens)
        stopped = f" | interrupted: {self.pending} not finished" if self.interrupted else ""
        return (
            f"{self.done}/{self.total} done, {self.failed} failed, {self.running} running | "
            f"{shown} tokens ${self.cost:.4f} | {self.rate:.1f} tasks/s | {self.elapsed:.0f}s{stopped}"
        )

    def _repr_html_(self) -> str:
        fraction = (self.done + self.failed) / self.total if self.total else 1.0
        return (
            f"<div><progress value='{fraction:.3f}' max='1' style='width:20em'></progress> "
            f"<code>{self.line()}</code></div>"
        )


class LiveDisplay:
    """A display that may be called from two threads (the iterating one and ``run_many``'s
    refresher): calls are serialised, and it draws at most every ``throttle`` seconds and always
    the final snapshot; nothing is drawn after the final one."""

    def __init__(self, throttle: float = 0.2) -> None:
        self._throttle = throttle
        self._last: Optional[float] = None  # when it last drew, None before the first drawing
        self._lock = threading.Lock()
        self._closed = False

    def __call__(self, snapshot: ManyProgress) -> None:
        with self._lock:
            if self._closed:
                return
            now = time.monotonic()
            if not snapshot.finished and self._last is not None and now - self._last < self._throttle:
                return
            self._draw(snapshot)
            self._last = now
            self._closed = snapshot.finished

    def _draw(self, snapshot: ManyProgress) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


class _TerminalLine(LiveDisplay):
    """Rewrites one line of ``stream``."""

    def __init__(self, stream: TextIO, throttle: float = 0.2) -> None:
        super().__init__(throttle)
        self._stream = stream

    def _draw(self, snapshot: ManyProgress) -> None:
        self._stream.write("\r\x1b[2K" + snapshot.line() + ("\n" if snapshot.finished else ""))
        self._stream.flush()


class _NotebookDisplay(LiveDisplay):
    """One updating output area in a Jupyter kernel (through ``IPython.display``)."""

    def __init__(self, throttle: float = 0.2) -> None:
        super().__init__(throttle)
        self._handle: Any = None

    def _draw(self, snapshot: ManyProgress) -> None:
        from IPython.display import display

        if self._handle is None:
            self._handle = display(snapshot, display_id=True)  # type: ignore[no-untyped-call]
        else:
            self._handle.update(snapshot)


def _in_kernel() -> bool:
    shell = sys.modules.get("IPython")
    if shell is None:
        return False
    try:
        ip = shell.get_ipython()
    except Exception:
        return False
    return ip is not None and "IPKernelApp" in getattr(ip, "config", {})


def make_reporter(progress: Any) -> Optional[Callable[[ManyProgress], Any]]:
    """The callable receiving snapshots for a ``progress=`` argument, or None for no progress."""
    if progress is False:
        return None
    if callable(progress) and progress is not True:
        return progress
    if progress not in (None, True):
        raise TypeError(f"progress must be None, True, False or a callable, not {type(progress).__name__}")
    if _in_kernel():
        return _NotebookDisplay()
    stream = sys.stderr
    if stream is None:  # pythonw, a service: nowhere to draw the line
        return None
    if progress is True or getattr(stream, "isatty", lambda: False)():
        return _TerminalLine(stream)
    return None

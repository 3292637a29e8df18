"""Process-wide state of the session package, in one place (issue 11 item 6).

* ``storage._WORDS``: entry types and roles by their envelope bytes, at most 256 (one shared str
  per word across 100,000 index nodes instead of one per node). A cache of immutable values.
* ``entries._last_second``: the last formatted ISO second (appends come many per second).
* the collector pause of bulk decodes (:func:`gc_paused`: ``_pause_depth``, ``_pause_resume``,
  ``_pause_lock`` and the per-thread ``_pause_held``): set only while a decode runs, and back to
  what the caller had when the last one ends. A child forked while decodes ran in other threads
  (which it does not have) starts without their pauses: an ``os.register_at_fork`` handler gives it
  a fresh lock, keeps only the forking thread's own pauses, and, when that leaves none, restores
  the collector state the first pause saved.

:func:`reset` puts all of it back to its initial state (for a test fixture). Nothing here is
needed for correctness: the caches hold immutable values, and the pause ends with its decodes.
"""

from __future__ import annotations

import gc
import os
import threading
from contextlib import contextmanager
from typing import Iterator

__all__ = ["gc_paused", "reset"]

_pause_lock = threading.Lock()
_pause_depth = 0  # bulk decodes in progress, in any thread
_pause_resume = False  # whether the collector was enabled when the first of them began
_pause_held = threading.local()  # .depth: the pauses the current thread is inside (for a fork)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Keep the cyclic garbage collector out of a bulk decode that builds many long-lived objects.

    Decoding 100,000 messages creates about half a million objects that all survive and hold no
    cycles; a running collector traverses the growing heap again and again while they are built.
    So the collector is disabled for the decode and re-enabled after, and nothing else: no
    ``gc.freeze()`` (which would move every object of the process, other threads' too, to the oldest
    generation, and whose ``gc.unfreeze()`` would undo a freeze another thread, e.g. a pre-fork
    server, made meanwhile), no collection, no threshold change. What the caller had is restored
    exactly: a collector the application disabled stays disabled, and ``gc.get_freeze_count()`` is
    untouched. Decodes in several threads share one pause (a lock-protected count): the first one
    in disables, the last one out re-enables, so one thread's decode never re-enables the collector
    under another's. (An application that calls ``gc.disable()`` or ``gc.enable()`` itself while a
    decode runs in another thread races with it, as with any process-wide switch.)

    A child forked while another thread was inside a pause does not inherit that pause (the thread
    that would end it is not in the child): see the module docstring.

    Pauses cover the open of a session and the whole of ``build_context()`` (decode and projection),
    not only the decode: a collection between them would traverse everything the open built.

    Worth it (``benchmarks/session_scale.py`` prints the figure: CPU seconds, median of 3 runs, the
    pause against a no-op, on the loaded 2-core CI machine): on the uncompacted 100,000-message
    branch open + ``build_context()`` takes 0.79x the CPU time (4.19 s against 5.27 s), and 0.80x
    counting an allocation workload after it, where the collector catches up on the new objects
    (5.19 s against 6.49 s); on the compacted session 0.78x and 0.85x. The ``gc.freeze()`` +
    ``gc.unfreeze()`` this replaces was cheaper still (0.92x the pause's time for the call, 0.87x
    with the catch-up: it hid the new objects from later collections) but did so by moving every
    object of the process, which is not this library's to move.
    """
    global _pause_depth, _pause_resume
    with _pause_lock:
        if _pause_depth == 0:
            _pause_resume = gc.isenabled()
            gc.disable()
        _pause_depth += 1
        _pause_held.depth = getattr(_pause_held, "depth", 0) + 1
    try:
        yield
    finally:
        with _pause_lock:
            _pause_held.depth -= 1
            _pause_depth -= 1
            if _pause_depth == 0 and _pause_resume:
                gc.enable()


def _before_fork() -> None:
    _pause_lock.acquire()  # the count and the collector state are consistent in the child


def _after_fork_in_parent() -> None:
    _pause_lock.release()


def _after_fork_in_child() -> None:
    """The child has only the forking thread: only its pauses are still in progress. If that leaves
    none, the collector goes back to what the first pause found (the other threads' pauses would
    have restored it on their way out)."""
    global _pause_lock, _pause_depth
    _pause_lock = threading.Lock()
    mine = getattr(_pause_held, "depth", 0)
    if _pause_depth and not mine:
        _pause_depth = 0
        if _pause_resume:
            gc.enable()
    else:
        _pause_depth = mine


if hasattr(os, "register_at_fork"):  # pragma: no branch - POSIX
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child)


def reset() -> None:
    """Reset the package's process-wide state (see the module docstring); for tests.

    Refuses while a bulk decode holds the collector pause (its end restores the caller's state).
    """
    from . import entries, storage

    with _pause_lock:
        if _pause_depth:
            raise RuntimeError("a session decode is in progress; reset after it ends")
    storage._WORDS.clear()
    entries._last_second = (None, "")

"""Process-wide state of the session package, in one place (issue 11 item 6).

* ``storage._WORDS``: entry types and roles by their envelope bytes, at most 256 (one shared str
  per word across 100,000 index nodes instead of one per node). A cache of immutable values.
* ``entries._last_second``: the last formatted ISO second (appends come many per second).
* the collector pause of bulk decodes (:func:`gc_paused`: ``_pause_depth``, ``_pause_resume``): set
  only while a decode runs, and back to what the caller had when the last one ends.

:func:`reset` puts all of it back to its initial state (for a test fixture). Nothing here is
needed for correctness: the caches hold immutable values, and the pause ends with its decodes.
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from typing import Iterator

__all__ = ["gc_paused", "reset"]

_pause_lock = threading.Lock()
_pause_depth = 0  # bulk decodes in progress, in any thread
_pause_resume = False  # whether the collector was enabled when the first of them began


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
    try:
        yield
    finally:
        with _pause_lock:
            _pause_depth -= 1
            if _pause_depth == 0 and _pause_resume:
                gc.enable()


def reset() -> None:
    """Reset the package's process-wide state (see the module docstring); for tests.

    Refuses while a bulk decode holds the collector pause (its end restores the caller's state).
    """
    from . import entries, storage

    with _pause_lock:
        if _pause_depth:
            raise RuntimeError("a session decode is in progress; reset after it ends")
    storage._WORDS.clear()
    entries._last_second = (-1, "")

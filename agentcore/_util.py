"""Tiny helpers every part of the core needs, defined once.

* :func:`awaited` runs a hook's or tool's coroutine to completion (``async def`` callables are
  accepted everywhere a callable is; agentcore itself never runs an event loop otherwise);
* :func:`field_of` reads a field of a result object or of the plain dict a user returned instead;
* :func:`hook_messages` checks that a context hook returned a list of messages;
* :class:`Latch` is a set-once flag that builds its ``threading.Event`` only for a waiter;
* :func:`wait_interruptibly` waits for an event so that a Ctrl+C in the main thread lands;
  :class:`ctrl_c_raises` makes Ctrl+C raise there during a wait, also in a Jupyter cell with
  top-level ``await``.
"""

from __future__ import annotations

import inspect
import threading
import time
from typing import Any, Callable, Iterable, List, Mapping, Optional, Tuple

from .types import _is_mapping

__all__ = ["Latch", "awaited", "ctrl_c_raises", "field_of", "hook_messages", "wait_interruptibly"]


def awaited(value: Any) -> Any:
    """``value``, or the result of running it to completion when it is a coroutine.

    The coroutine runs with ``asyncio.run`` on the calling thread. When that thread already runs an
    event loop (``prompt()`` called from a coroutine on a worker thread, where agentcore runs the
    loop, and a lone tool, on the caller's thread), it runs on a new loop in a helper thread
    instead, and the calling thread waits for it: its own loop is blocked by the synchronous call
    either way. The coroutine's exception is raised here in both cases.
    """
    if inspect.iscoroutine(value):
        import asyncio  # only when someone handed agentcore an ``async def``

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(value)
        return _run_elsewhere(value)
    return value


def _run_elsewhere(coroutine: Any) -> Any:
    """``asyncio.run(coroutine)`` on a helper thread (with this context's variables); its result."""
    import asyncio
    import contextvars
    import threading

    outcome: List[Tuple[bool, Any]] = []

    def run() -> None:
        try:
            outcome.append((True, asyncio.run(coroutine)))
        except BaseException as exc:  # noqa: BLE001 - re-raised on the calling thread
            outcome.append((False, exc))

    context = contextvars.copy_context()
    thread = threading.Thread(target=context.run, args=(run,), name="agentcore-await", daemon=True)
    thread.start()
    thread.join()
    ok, result = outcome[0]
    if ok:
        return result
    raise result


def field_of(obj: Any, name: str, key: Optional[str] = None, default: Any = None) -> Any:
    """``obj.name``, or ``obj[key or name]`` when ``obj`` is a mapping; ``default`` when absent.

    ``key`` is the mapping spelling when it differs (the reference JSON's camelCase keys).
    """
    if _is_mapping(obj):  # isinstance(obj, typing.Mapping) costs ~1 us; this is a set lookup for ours
        return obj.get(name if key is None else key, default)
    return getattr(obj, name, default)


def accepts_signal(fn: Callable[..., Any]) -> bool:
    """True when ``fn`` takes a second *required* positional argument: the
    ``listener(event, signal)`` form. Parameters with defaults and ``*args`` are left alone, so
    ``subscribe(print)`` prints just the event."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # some builtins have no signature: call with one argument
        return False
    required = 0
    for p in params:
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty:
            required += 1
    return required >= 2


def hook_messages(value: Any, hook: str) -> List[Any]:
    """What ``transform_context``/``convert_to_llm`` returned, as a new list. TypeError naming the
    hook for anything but a list (or other iterable) of messages: a forgotten ``return`` would
    otherwise fail the run with "'NoneType' object is not iterable", and a str would become one
    message per character."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise TypeError(f"{hook} must return a list of messages, not {type(value).__name__}")
    return list(value)


class Latch:
    """A flag set once, with the ``is_set``/``set``/``wait`` of a ``threading.Event``, that makes
    its Event only for a waiter: an Event costs 4-5 us to build (its Condition probes the lock for
    methods a plain lock lacks), and every run and model request has one that is mostly only set
    and read. ``set`` and the first ``wait`` meet under a lock, so no waiter misses the wake-up."""

    __slots__ = ("_set", "_event", "_lock")

    def __init__(self) -> None:
        self._set = False
        self._event: Optional[threading.Event] = None
        self._lock = threading.Lock()

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        with self._lock:
            self._set = True
            event = self._event
        if event is not None:
            event.set()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """True once set; False when ``timeout`` seconds passed first (None: no limit)."""
        if self._set:
            return True
        with self._lock:
            if self._set:
                return True
            event = self._event
            if event is None:
                event = self._event = threading.Event()
        return event.wait(timeout)


def wait_interruptibly(event: Any, timeout: Optional[float] = None) -> bool:
    """``event.wait(timeout)`` (a ``threading.Event`` or a :class:`Latch`); on the main thread in
    short waits, so that a pending Ctrl+C (a
    KeyboardInterrupt, raised from here) is noticed at once rather than when the event is set.
    True when the event is set, False when ``timeout`` seconds passed first."""
    if threading.current_thread() is not threading.main_thread():  # no Ctrl+C lands there
        return event.wait(timeout)
    deadline = None if timeout is None else time.monotonic() + timeout
    with ctrl_c_raises():
        while True:
            left = 0.05 if deadline is None else min(0.05, max(deadline - time.monotonic(), 0.0))
            if event.wait(left):
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False


class ctrl_c_raises:
    """While the main thread blocks in a wait: Ctrl+C raises ``KeyboardInterrupt`` there, in a
    Jupyter cell with top-level ``await`` too. For such a cell ipykernel replaces the SIGINT
    handler with one that only asks its event loop to cancel the cell, and the loop runs nothing
    while the cell blocks: interrupting the kernel did nothing until the run had ended (a tool
    waiting for the abort signal waited out its own timeout). Python's own handler is installed
    for the wait and the kernel's put back after it (so the cell is cancelled as before once it
    awaits again). Anywhere else (another thread, another handler) it does nothing."""

    __slots__ = ("_saved",)

    def __enter__(self) -> None:
        self._saved = None
        if threading.current_thread() is not threading.main_thread():
            return
        import signal

        handler = signal.getsignal(signal.SIGINT)
        if "_cancel_on_sigint" in getattr(handler, "__qualname__", ""):  # ipykernel's, for an async cell
            self._saved = handler
            signal.signal(signal.SIGINT, signal.default_int_handler)

    def __exit__(self, *exc: Any) -> None:
        if self._saved is not None:
            import signal

            signal.signal(signal.SIGINT, self._saved)

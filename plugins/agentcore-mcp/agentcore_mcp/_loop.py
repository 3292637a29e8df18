"""The plugin's one private asyncio event loop, on its own daemon thread.

The MCP SDK is asyncio code; agentcore is synchronous. Every MCP session of the process lives on
this loop, and callers hand work to it with :func:`submit` (``asyncio.run_coroutine_threadsafe``)
and block on the returned ``concurrent.futures.Future``. The caller's thread never runs or needs a
loop, so this works from plain scripts, tool threads and Jupyter (whose own loop is untouched).

Process-wide state (owner: this module): one loop and its thread, started on first use and kept
for the life of the process (a daemon thread, so it never blocks interpreter exit). Starting it
costs about a millisecond; tests never need to reset it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Coroutine, Optional, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: Optional[asyncio.AbstractEventLoop] = None
_thread: Optional[threading.Thread] = None


def get_loop() -> asyncio.AbstractEventLoop:
    """The private loop, started on first call."""
    global _loop, _thread
    with _lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            started = threading.Event()

            def run() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(started.set)
                loop.run_forever()

            _thread = threading.Thread(target=run, name="agentcore-mcp-loop", daemon=True)
            _thread.start()
            started.wait()
            _loop = loop
        return _loop


def in_loop_thread() -> bool:
    """True when called on the private loop's own thread (where blocking on it would deadlock)."""
    return _thread is not None and threading.current_thread() is _thread


def submit(coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    """Schedule ``coro`` on the private loop; cancelling the returned future cancels the task.

    Raises ``RuntimeError`` (and closes ``coro``) when called from the loop thread itself: the
    caller would block the loop it waits for.
    """
    if in_loop_thread():
        coro.close()
        raise RuntimeError(
            "agentcore_mcp: a blocking MCPServer method was called on the MCP event-loop "
            "thread (from a callback); call it from another thread"
        )
    return asyncio.run_coroutine_threadsafe(coro, get_loop())


def call_soon(callback: Any, *args: Any) -> None:
    """Run ``callback(*args)`` on the loop thread, soon (thread-safe; takes no lock once the loop
    runs, so a finalizer the garbage collector calls inside :func:`get_loop` cannot deadlock)."""
    loop = _loop if _loop is not None else get_loop()
    loop.call_soon_threadsafe(callback, *args)

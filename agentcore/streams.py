"""Event streams: a producer thread pushes, a consumer iterates; ``result()`` gives the final value.

``EventStream`` is backed by a ``queue.SimpleQueue``: ``push`` never blocks the producer, pushes
after the completing event are ignored, and the completing event is still delivered to the consumer.
If the producer fails, ``fail(exc)`` makes both iteration and ``result()`` re-raise ``exc`` in the
consumer (the reference design leaves such a stream hanging; we do not).

``AssistantMessageEventStream`` is the same over provider stream events: it completes on ``done`` or
``error`` and ``result()`` returns the final :class:`~agentcore.types.AssistantMessage`.

``start_daemon(target, name, *args)`` runs ``target(*args)`` on a daemon thread, reusing an idle one
when there is one (run threads and tool calls start several times per run; a new thread costs
about three times a hand-over to an idle one).
"""

from __future__ import annotations

import os
import queue
import threading
from typing import Any, Callable, Generic, Iterator, List, Optional, Tuple, TypeVar

__all__ = ["EventStream", "AssistantMessageEventStream", "start_daemon"]

T = TypeVar("T")

_END = object()


class _Failure:
    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


class EventStream(Generic[T]):
    """An iterable of events with ``result()``; safe to push from one thread and read from another."""

    def __init__(self, is_complete: Callable[[Any], bool], extract_result: Callable[[Any], T]) -> None:
        self._queue: "queue.SimpleQueue[Any]" = queue.SimpleQueue()  # unbounded; cheap to create
        self._is_complete = is_complete
        self._extract = extract_result
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._closed = False
        self._result: Optional[T] = None
        self._error: Optional[BaseException] = None

    # -- producer side -----------------------------------------------------------------------
    def push(self, event: Any) -> None:
        """Deliver ``event``; ignored once the stream completed. Completing events set the result."""
        with self._lock:
            if self._closed:
                return
            if self._is_complete(event):
                result = self._extract(event)  # may raise: the stream stays open for fail()
                self._closed = True
                self._result = result
                self._queue.put(event)
                self._queue.put(_END)
                self._done.set()
                return
            self._queue.put(event)

    def end(self, result: Optional[T] = None) -> None:
        """Finish iteration early with ``result`` (ignored if already complete)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._result = result
            self._queue.put(_END)
            self._done.set()

    def fail(self, exc: BaseException) -> None:
        """Finish with an exception that iteration and ``result()`` re-raise in the consumer."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._error = exc
            self._queue.put(_Failure(exc))
            self._done.set()

    # -- consumer side -----------------------------------------------------------------------
    def __iter__(self) -> Iterator[Any]:
        while True:
            item = self._queue.get()
            if item is _END:
                self._queue.put(_END)  # let a second iterator (or result()) see the end too
                return
            if isinstance(item, _Failure):
                self._queue.put(item)
                raise item.exc
            yield item

    def result(self, timeout: Optional[float] = None) -> T:
        """Wait for completion and return the final value; re-raise the producer's failure."""
        if not self._done.wait(timeout):
            raise TimeoutError("the stream did not complete in time")
        if self._error is not None:
            raise self._error
        return self._result  # type: ignore[return-value]

    @property
    def done(self) -> bool:
        return self._done.is_set()


def _is_terminal(event: Any) -> bool:
    return getattr(event, "type", None) in ("done", "error")


def _final_message(event: Any) -> Any:
    return event.message if event.type == "done" else event.error


class AssistantMessageEventStream(EventStream[Any]):
    """Provider stream: completes on ``done``/``error``; ``result()`` is the final AssistantMessage."""

    def __init__(self) -> None:
        super().__init__(_is_terminal, _final_message)


# --------------------------------------------------------------------------- reusable daemon threads

_MAX_IDLE = 8  # idle threads kept for reuse; more finish when their task is done
_IDLE_SECONDS = 30.0  # an idle thread that got no task for this long finishes

_Task = Tuple[Callable[..., Any], Tuple[Any, ...], str]


class _Worker:
    """One pooled daemon thread's inbox (a task is handed to exactly one worker)."""

    __slots__ = ("inbox",)

    def __init__(self) -> None:
        self.inbox: "queue.SimpleQueue[_Task]" = queue.SimpleQueue()


_idle: List[_Worker] = []
_idle_lock = threading.Lock()


def start_daemon(target: Callable[..., Any], name: str, *args: Any) -> None:
    """Run ``target(*args)`` on a daemon thread named ``name`` and return at once.

    Behaves like ``threading.Thread(target=..., name=..., daemon=True).start()``: an exception
    escaping ``target`` is reported by ``threading.excepthook`` (even one whose ``str()`` raises;
    a failing hook is ignored) and the thread goes on serving (a target that never returns keeps
    its thread). The thread may have run earlier tasks, so a target must not rely on fresh
    ``threading.local`` values.
    """
    task = (target, args, name)
    with _idle_lock:
        worker = _idle.pop() if _idle else None
    if worker is not None:
        worker.inbox.put(task)
        return
    worker = _Worker()
    worker.inbox.put(task)
    threading.Thread(target=_serve, args=(worker,), name=name, daemon=True).start()


def _serve(worker: _Worker) -> None:
    thread = threading.current_thread()
    inbox = worker.inbox
    task: Optional[_Task] = inbox.get()
    while task is not None:
        target, args, thread.name = task
        task = None
        try:
            target(*args)
        except Exception as exc:  # noqa: BLE001 - reported like any thread's; the worker lives on
            _report(exc, thread)
            del exc
        target = args = None  # type: ignore[assignment]  # drop references while idle
        thread.name = "agentcore-idle"
        with _idle_lock:
            if len(_idle) >= _MAX_IDLE:
                return
            _idle.append(worker)
        task = _next_task(worker)


def _report(exc: BaseException, thread: threading.Thread) -> None:
    """Hand ``exc`` to ``threading.excepthook``; a hook that fails (formatting an exception whose
    ``str()`` raises, say) must not kill the worker, so its own failure is dropped."""
    try:
        threading.excepthook(threading.ExceptHookArgs((type(exc), exc, exc.__traceback__, thread)))
    except Exception:  # noqa: BLE001 - nothing is left to report it to
        pass


def _next_task(worker: _Worker) -> Optional[_Task]:
    """Wait for the next task; None when none came in time (the worker then finishes)."""
    try:
        return worker.inbox.get(timeout=_IDLE_SECONDS)
    except queue.Empty:
        with _idle_lock:
            if worker in _idle:
                _idle.remove(worker)
                return None
        return worker.inbox.get()  # it was taken from the idle list: its task is on the way


def _forget_workers_after_fork() -> None:
    """A forked child has none of the parent's threads: start from an empty pool."""
    global _idle_lock
    _idle_lock = threading.Lock()
    _idle.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_workers_after_fork)

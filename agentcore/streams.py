"""Event streams: a producer thread pushes, a consumer iterates; ``result()`` gives the final value.

``EventStream`` is backed by a ``queue.SimpleQueue``: ``push`` never blocks the producer, pushes
after the completing event are ignored, and the completing event is still delivered to the consumer.
If the producer fails, ``fail(exc)`` makes both iteration and ``result()`` re-raise ``exc`` in the
consumer (the reference design leaves such a stream hanging; we do not).

``AssistantMessageEventStream`` is the same over provider stream events: it completes on ``done`` or
``error`` and ``result()`` returns the final :class:`~agentcore.types.AssistantMessage`.
``ProviderStream`` is an ``AssistantMessageEventStream`` whose producer is a generator that the
consumer runs as it iterates (no thread, no queue hand-over per event), with the same contract.

``start_daemon(target, name, *args)`` runs ``target(*args)`` on a daemon thread, reusing an idle one
when there is one (run threads and tool calls start several times per run; a new thread costs
about three times a hand-over to an idle one).
"""

from __future__ import annotations

import collections
import os
import queue
import threading
from typing import TYPE_CHECKING, Any, Callable, Generic, Iterator, List, Optional, Tuple, TypeVar

from ._util import Latch

if TYPE_CHECKING:
    from .types import AssistantMessage

__all__ = ["EventStream", "AssistantMessageEventStream", "ProviderStream", "start_daemon"]

T = TypeVar("T")

_END: Any = object()  # Any: compared by identity only, next() may return it


class _Failure:
    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


class EventStream(Generic[T]):
    """An iterable of events with ``result()``; safe to push from one thread and read from another."""

    def __init__(self, is_complete: Callable[[Any], bool], extract_result: Callable[[Any], T]) -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()  # unbounded; cheap to create
        self._put: Callable[[Any], None] = self._queue.put  # how push/end/fail deliver (under _lock)
        self._is_complete = is_complete
        self._extract = extract_result
        self._done = Latch()  # set once; a threading.Event only if someone waits (most readers iterate)
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
                self._put(event)
                self._put(_END)
                self._done.set()
                return
            self._put(event)

    def end(self, result: Optional[T] = None) -> None:
        """Finish iteration early with ``result`` (ignored if already complete)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._result = result
            self._put(_END)
            self._done.set()

    def fail(self, exc: BaseException) -> None:
        """Finish with an exception that iteration and ``result()`` re-raise in the consumer."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._error = exc
            self._put(_Failure(exc))
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


_TERMINAL = ("done", "error")  # the event types that complete a provider stream


def _is_terminal(event: Any) -> bool:
    return getattr(event, "type", None) in _TERMINAL


def _final_message(event: Any) -> Any:
    return event.message if event.type == "done" else event.error


class AssistantMessageEventStream(EventStream["AssistantMessage"]):
    """Provider stream: completes on ``done``/``error``; ``result()`` is the final AssistantMessage."""

    def __init__(self) -> None:
        super().__init__(_is_terminal, _final_message)


class ProviderStream(AssistantMessageEventStream):
    """An :class:`AssistantMessageEventStream` whose producer is a generator run by the consumer.

    What built-in providers return: no thread is involved, iterating pulls the next event off the
    network (one hand-over less per event than a producer thread and a queue). It keeps the
    contract of :class:`EventStream`:

    * iteration yields every event once, in order, up to and including ``done``/``error``;
    * ``result(timeout=None)`` waits for the final message and does not consume events: the events
      it had to read are kept for a later iteration. With ``timeout=None`` it reads on the calling
      thread; with a timeout the reading moves to a helper thread and ``TimeoutError`` is raised
      when the stream has not completed in time (the stream goes on; call again);
    * ``push`` adds an event (a completing one sets the result and stops reading the generator),
      ``end(result)`` and ``fail(exc)`` finish it early (``fail``: iteration and ``result()``
      re-raise ``exc``); once complete, pushes are ignored. The generator is closed (releasing its
      connection) by the next read after that, or by :meth:`close`;
    * a generator that raises fails the stream with that exception, as ``fail`` would: the read
      that met it raises it, and so do every later iteration and ``result()`` (also one waiting
      with a timeout on another thread);
    * ``done`` is True once the result is known.

    Reads are serialised: with several consumers each event goes to whichever pulled it.
    """

    def __init__(self, events: Iterator[Any]) -> None:
        super().__init__()
        self._events = events
        self._pull_lock = threading.Lock()  # one generator step at a time
        self._exhausted = False  # the generator is finished or closed
        self._unread: collections.deque[Any] = collections.deque()  # pulled or pushed, not yet iterated
        self._slow = False  # unread items, or complete/exhausted: _pull takes _pull_slow (under _lock)
        self._draining = False
        # push/end/fail deliver through the _put method below instead of EventStream's queue (a
        # class attribute: an instance attribute bound to self would make every stream a cycle)
        del self._put

    # -- producer side: the generator, or push/end/fail (EventStream's) from anywhere ------------
    def _put(self, item: Any) -> None:
        """Where push/end/fail put events and failures (called with ``_lock`` held)."""
        if item is not _END:  # completion is _closed here; the generator is closed on the next read
            self._unread.append(item)
        self._slow = True

    def _pull(self) -> Any:
        """The next event, or ``_END``; raises a :meth:`fail` exception. Called with ``_pull_lock`` held.

        :meth:`__iter__` has this body inlined (one call less per streamed token)."""
        if self._slow:
            return self._pull_slow()
        try:
            event = next(self._events, _END)
        except BaseException as exc:  # noqa: BLE001 - the producer died: the stream fails with it
            self._generator_failed(exc)
            return self._pull_slow()
        if event is _END or event.type in _TERMINAL:
            return self._settle(event)
        if self._closed:  # completed (close/push/end/fail) while this read was in flight: too late
            return self._pull_slow()
        return event

    def _generator_failed(self, exc: BaseException) -> None:
        """The generator raised ``exc`` (and is finished): the stream fails with it, as by
        :meth:`fail`, so that every later read and ``result()`` re-raise it instead of reporting a
        stream that ended without result. Raises ``exc`` unless the stream was already complete."""
        with self._lock:
            self._exhausted = self._slow = True
            if self._closed:  # push/end/fail completed it first: the pushed items are still read
                return
            self._closed = True
            self._error = exc
            self._unread.append(_Failure(exc))
            self._done.set()
        raise exc

    def _settle(self, event: Any) -> Any:
        """What :meth:`_pull` returns for ``_END`` from the generator or a completing event."""
        if event is _END:
            self._exhausted = True
            self.end(None)  # a generator that ended without done/error (WireProvider never does)
            return self._pull_slow()
        with self._lock:
            if self._closed:  # push/end/fail won the race: this event comes too late
                return self._pull_slow_locked()
            self._result = event.message if event.type == "done" else event.error
            self._closed = self._slow = True
            self._done.set()
        return event

    def _pull_slow(self) -> Any:
        with self._lock:
            return self._pull_slow_locked()

    def _pull_slow_locked(self) -> Any:
        unread = self._unread
        if unread:
            item = unread.popleft()
            if type(item) is _Failure:
                unread.appendleft(item)  # every later iterator and result() see it too
                raise item.exc
            if not unread and not self._closed and not self._exhausted:
                self._slow = False
            return item
        if self._closed and not self._exhausted:  # the generator's remaining events are dropped
            self._close_events()
        return _END

    def _close_events(self) -> None:
        self._exhausted = self._slow = True
        close = getattr(self._events, "close", None)
        if close is not None:
            close()

    # -- consumer side -------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Any]:
        lock, events = self._pull_lock, self._events
        while True:
            with lock:  # _pull, inlined
                if self._slow:
                    event = self._pull_slow()
                else:
                    try:
                        event = next(events, _END)
                    except BaseException as exc:  # noqa: BLE001 - see _pull
                        self._generator_failed(exc)
                        event = self._pull_slow()
                    else:
                        if event is _END or event.type in _TERMINAL:
                            event = self._settle(event)
                        elif self._closed:  # see _pull
                            event = self._pull_slow()
            if event is _END:
                return
            yield event

    def _drain(self) -> None:
        """Read every remaining event into ``_unread`` (they stay there for an iterator)."""
        with self._pull_lock:
            buffer = []
            try:
                while True:
                    event = self._pull()
                    if event is _END:
                        break
                    buffer.append(event)
            except BaseException:  # fail(): the failure stays first in _unread for result()
                if self._error is None:
                    raise  # the generator itself raised
            finally:
                with self._lock:
                    if buffer:
                        self._unread.extendleft(reversed(buffer))
                        self._slow = True

    def result(self, timeout: Optional[float] = None) -> AssistantMessage:
        """The final ``AssistantMessage``; see the class docstring for ``timeout``.

        Raises ``TimeoutError`` when a ``timeout`` passed first, and the failure given to
        :meth:`fail`.
        """
        if not self._done.is_set():
            if timeout is None:
                self._drain()
            else:
                with self._lock:
                    start, self._draining = not self._draining, True
                if start:
                    start_daemon(self._drain, "agentcore-stream-drain")
        return super().result(timeout)

    def close(self) -> None:
        """Stop reading and release the connection; a stream not yet complete ends without result.

        Returns at once, also while another thread is reading (a read blocked on the network, or
        the helper thread of ``result(timeout)``): the stream is complete when ``close`` returns
        (``result()`` gives None, the event being read is dropped, iterators stop), and the thread
        reading closes the generator as soon as its read returns."""
        self.end(None)
        if not self._pull_lock.acquire(blocking=False):
            return  # end() set _slow: the reader's next step is _pull_slow, which closes the generator
        try:
            with self._lock:
                if not self._exhausted:
                    self._close_events()
        finally:
            self._pull_lock.release()


# --------------------------------------------------------------------------- reusable daemon threads

_MAX_IDLE = 8  # idle threads kept for reuse; more finish when their task is done
_IDLE_SECONDS = 30.0  # an idle thread that got no task for this long finishes

_Task = Tuple[Callable[..., Any], Tuple[Any, ...], str]


class _Worker:
    """One pooled daemon thread's inbox (a task is handed to exactly one worker)."""

    __slots__ = ("inbox",)

    def __init__(self) -> None:
        self.inbox: queue.SimpleQueue[Optional[_Task]] = queue.SimpleQueue()  # None: finish


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
    worker: Optional[_Worker] = None
    handed = False
    try:
        with _idle_lock:
            worker = _idle.pop() if _idle else None
        if worker is not None:
            worker.inbox.put(task)
            handed = True
            return
    finally:
        if worker is not None and not handed:  # a KeyboardInterrupt between taking and handing over:
            worker.inbox.put(None)  # the worker, no longer idle, would wait for a task for ever; it ends
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

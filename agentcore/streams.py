"""Event streams: a producer thread pushes, a consumer iterates; ``result()`` gives the final value.

``EventStream`` is backed by a ``queue.Queue``: ``push`` never blocks the producer, pushes after the
completing event are ignored, and the completing event is still delivered to the consumer. If the
producer fails, ``fail(exc)`` makes both iteration and ``result()`` re-raise ``exc`` in the consumer
(the reference design leaves such a stream hanging; we do not).

``AssistantMessageEventStream`` is the same over provider stream events: it completes on ``done`` or
``error`` and ``result()`` returns the final :class:`~agentcore.types.AssistantMessage`.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Generic, Iterator, Optional, TypeVar

__all__ = ["EventStream", "AssistantMessageEventStream"]

T = TypeVar("T")

_END = object()


class _Failure:
    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


class EventStream(Generic[T]):
    """An iterable of events with ``result()``; safe to push from one thread and read from another."""

    def __init__(self, is_complete: Callable[[Any], bool], extract_result: Callable[[Any], T]) -> None:
        self._queue: "queue.Queue[Any]" = queue.Queue()
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
                self._closed = True
                self._result = self._extract(event)
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

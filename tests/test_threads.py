"""The reused daemon threads behind runs and tool calls (agentcore.streams.start_daemon)."""

from __future__ import annotations

import threading
from typing import Any, List

from agentcore.streams import start_daemon


def _run_and_wait(target: Any, *args: Any) -> None:
    done = threading.Event()

    def wrapped() -> None:
        try:
            target(*args)
        finally:
            done.set()

    start_daemon(wrapped, "agentcore-test")
    assert done.wait(5)


def _wait_until_parked(ident: int) -> None:
    """The worker parks itself (renamed "agentcore-idle") right after its task returned."""
    import time

    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if any(t.ident == ident and t.name == "agentcore-idle" for t in threading.enumerate()):
            return
        threading.Event().wait(0.001)
    raise AssertionError("the worker thread did not go back to the idle pool")


def test_a_finished_thread_is_reused_for_the_next_task_and_named_after_it():
    seen: List[Any] = []
    record = lambda: seen.append((threading.get_ident(), threading.current_thread().name))  # noqa: E731
    _run_and_wait(record)
    _wait_until_parked(seen[0][0])  # our first thread waits for work instead of finishing
    parked = {t.ident for t in threading.enumerate() if t.name == "agentcore-idle"}
    _run_and_wait(record)
    assert seen[1][0] in parked  # the second task ran on a parked thread: no new thread started
    assert [name for _, name in seen] == ["agentcore-test", "agentcore-test"]
    assert all(t.daemon for t in threading.enumerate() if t.name.startswith("agentcore"))


def test_concurrent_tasks_get_their_own_threads():
    barrier = threading.Barrier(4, timeout=5)
    idents: List[int] = []
    finished = threading.Event()
    lock = threading.Lock()

    def task() -> None:
        barrier.wait()  # all four must be running at the same time
        with lock:
            idents.append(threading.get_ident())
            if len(idents) == 4:
                finished.set()

    for _ in range(4):
        start_daemon(task, "agentcore-test")
    assert finished.wait(5)
    assert len(set(idents)) == 4


def test_an_escaping_exception_is_reported_by_threading_excepthook(monkeypatch):
    reported: List[Any] = []
    got = threading.Event()

    def hook(args: Any) -> None:
        reported.append(args.exc_value)
        got.set()

    monkeypatch.setattr(threading, "excepthook", hook)

    def boom() -> None:
        raise ValueError("tool thread failed")

    start_daemon(boom, "agentcore-test")
    assert got.wait(5)
    assert isinstance(reported[0], ValueError) and str(reported[0]) == "tool thread failed"
    _run_and_wait(lambda: None)  # the pool still works afterwards

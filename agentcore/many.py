"""Running many agents: :func:`run_many` over any ``concurrent.futures.Executor``.

Agents are recipes (:class:`AgentSpec`, :class:`AgentTask`, see :mod:`agentcore._many_spec`) so
that the same tasks run on a thread pool in this process, a ``ProcessPoolExecutor`` (CPU-bound
tools, one GIL per process) or a Dask cluster (``Client.get_executor()``): agentcore does not
schedule anything itself, except the order of the tasks on one session. Dask is never imported
here.

Tasks that name the same session URL (but ``memory:``, a new session each time) run one after
another, in the caller's order (two agents cannot write one session at once): the first is
submitted with the others, each next one the moment the one before it completes, by a thread
of ``run_many``'s own (:class:`_Scheduler`) that the futures' done-callbacks wake; how fast the
caller consumes the results does not matter.

Cancellation (``KeyboardInterrupt`` while iterating, or closing the iterator): tasks that have
not started are cancelled (their futures, or, on threads, they return at once), and tasks still
waiting for an earlier task on their session are never submitted (the task after one whose result
was yielded is not waiting: it was submitted before that result was handed over). What is running:

* on a ``ThreadPoolExecutor`` (the default), each running agent is aborted (``agent.abort()``:
  the provider request and tools see the signal), and ``run_many`` waits for them to settle
  (at most ``_CANCEL_GRACE`` seconds; a second Ctrl+C ends the wait), so their sessions end
  with the aborted message, closed;
* on a process pool or Dask, a running task cannot be reached from here: its future is cancelled
  (Dask forgets the result; a process pool lets the task finish in its worker process and drops
  it). Its session stays valid (every entry is complete), possibly without an end. Dask's
  cancel is a message its scheduler and workers handle after ``close()`` returns: a task a
  worker already holds may still start if one of its threads frees up before the message
  arrives.
"""

from __future__ import annotations

import contextvars
import pickle
import threading
import time
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, replace
from queue import Empty, SimpleQueue
from typing import Any, Callable, Collection, Dict, Iterable, Iterator, List, Optional, Union

from ._many_progress import LiveDisplay, ManyProgress, make_reporter
from ._many_spec import AgentSpec, AgentTask, SpecNotPortableError, check_portable
from ._many_worker import (
    Lineup,
    LocalRuns,
    TaskAborted,
    TaskError,
    TaskResult,
    _portable,
    attempt_key,
    result_from_worker,
    run_task,
    run_task_from_bytes,
    run_task_pickled,
)
from ._util import ctrl_c_raises

__all__ = [
    "AgentSpec",
    "AgentTask",
    "TaskResult",
    "TaskError",
    "TaskAborted",
    "SpecNotPortableError",
    "ManyProgress",
    "run_many",
    "DEFAULT_MAX_THREADS",
]

#: Threads of the default pool. An agent thread spends nearly all its time waiting for the model's
#: stream (agentcore runs 200 concurrent agents on 2 cores), so the bound is not the CPU but the
#: provider: 32 requests in flight stay under typical per-account rate limits (and requests'
#: connection pools) while a batch of short prompts still overlaps well. Pass your own executor
#: for more.
DEFAULT_MAX_THREADS = 32

#: how long a cancelled run_many waits for aborted thread agents to settle (they normally take
#: milliseconds; a tool that ignores its abort signal is not waited for longer than this)
_CANCEL_GRACE = 10.0
_TICK = 0.25  # progress refresh while no task finishes


def run_many(
    tasks: Iterable[AgentTask],
    *,
    executor: Optional[Executor] = None,
    progress: Union[None, bool, Callable[[ManyProgress], Any]] = None,
) -> Iterator[TaskResult]:
    """Run every task on ``executor``; yield a :class:`TaskResult` for each as it finishes.

    Every task that can start is submitted before ``run_many`` returns; the iterator yields the
    results. ``executor``: any ``concurrent.futures.Executor`` (anything else is a TypeError);
    None: a thread pool of ``min(DEFAULT_MAX_THREADS, len(tasks))`` threads, shut down at the
    end. Every task is checked before anything is submitted: a task that is not an :class:`AgentTask` is a TypeError, one that
    cannot be pickled is :exc:`~agentcore.many.SpecNotPortableError` naming the field (``tools[0]``...), even on
    threads, so that what runs here also runs on a cluster.

    Tasks naming the same session URL (the same string, as given) run one after another in the
    order given, each continuing the conversation of the one before it: the first is submitted at
    once, each next one as soon as the one before it completes (whatever its outcome), however
    slowly the results are consumed; its result is yielded after the one before it. Tasks without
    a session, on different sessions or on ``memory:`` (a new session at each open: they share
    nothing) run in parallel.

    A failing task (unknown model, provider error, a worker process that died, a task that a
    process pool's worker cannot unpickle, a run that paused for the approval of a tool call:
    nobody can decide there; a task on a session whose calls already wait for approval...) yields
    a result whose ``error`` is set, picklable; the others go on. A paused task that a person
    continued to an end in its session is not run again: a re-run returns that result.
    ``KeyboardInterrupt`` or closing the iterator cancels the rest (see the
    module docstring for what can be aborted where) and returns promptly; KeyboardInterrupt is
    re-raised (a second one while aborted thread agents settle stops the wait for them). ``progress``: see :mod:`agentcore._many_progress`.
    """
    if executor is not None and not callable(getattr(executor, "submit", None)):
        raise TypeError(
            "run_many: executor must be a concurrent.futures.Executor (a thread or process pool, "
            f"Dask's client.get_executor()), not {type(executor).__name__}"
        )
    items = list(tasks)
    for index, task in enumerate(items):
        if not isinstance(task, AgentTask):
            raise TypeError(f"run_many: tasks[{index}] is a {type(task).__name__}, not an AgentTask")
        try:
            check_portable(task)
        except SpecNotPortableError as exc:
            exc.args = (f"tasks[{index}] (id={task.id!r}): {exc}",)
            raise
    results = _run(items, executor, make_reporter(progress))
    next(results)  # submit now: the work starts with the call, not with the first next()
    return results


def _run(
    tasks: List[AgentTask], executor: Optional[Executor], report: Optional[Callable[[ManyProgress], Any]]
) -> Iterator[TaskResult]:
    owned = executor is None
    pool = (
        executor
        if executor is not None
        else ThreadPoolExecutor(
            max_workers=max(1, min(DEFAULT_MAX_THREADS, len(tasks))), thread_name_prefix="agentcore-many"
        )
    )
    local = LocalRuns() if isinstance(pool, ThreadPoolExecutor) else None
    counts = _Counts(
        len(tasks), time.monotonic(), isinstance(pool, (ThreadPoolExecutor, ProcessPoolExecutor)), _workers(pool)
    )
    scheduler = _Scheduler(pool, tasks, local, counts)
    refresher: Optional[_Refresher] = None
    settled = True
    try:
        scheduler.start()
        if isinstance(report, LiveDisplay):
            report(scheduler.progress())  # drawn from the calling thread (a notebook cell's output)
            refresher = _Refresher(report, scheduler)
        yield None  # type: ignore[misc]  # primed by run_many: everything that can start is submitted
        for _ in tasks:  # every task finishes exactly once: completed, or refused by the executor
            with ctrl_c_raises():  # in a notebook cell with top-level await too
                result = scheduler.next_result(_TICK)
                while result is None:
                    _emit(report, scheduler.progress)
                    result = scheduler.next_result(_TICK)
            _emit(report, scheduler.progress)
            yield result
        _emit(report, scheduler.progress, finished=True)
    except BaseException:  # KeyboardInterrupt, GeneratorExit (close()), or a failing submit
        settled = False  # a second Ctrl+C while _cancel waits: shutting down must not wait either
        settled = _cancel(scheduler, local)
        scheduler.close()  # counts the completions queued until now: the last snapshot is final
        _emit(report, scheduler.progress, finished=True, interrupted=True)
        raise
    finally:
        if refresher is not None:  # its draws after the final snapshot are no-ops (LiveDisplay)
            refresher.stop()
        scheduler.close()
        if owned:
            pool.shutdown(wait=settled, cancel_futures=True)


class _Refresher:
    """Redraws a :class:`LiveDisplay` every ``_TICK`` seconds on a daemon thread of its own, so
    it keeps moving while the consumer of the results is busy. A display that raises (a closed
    stream, say) is not redrawn from here again; the iterating thread's next draw reports it."""

    def __init__(self, display: LiveDisplay, scheduler: _Scheduler) -> None:
        self._display = display
        self._scheduler = scheduler
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="agentcore-many-progress", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.wait(_TICK):
            try:
                self._display(self._scheduler.progress())
            except Exception:  # noqa: BLE001 - see the class docstring
                return

    def stop(self) -> None:
        """No redraw after this returns."""
        self._stopped.set()
        if self._thread is not threading.current_thread():
            self._thread.join()


class _Scheduler:
    """Submits the tasks of one call: at :meth:`start`, every task without a session and the first
    on each session; then each next task on a session the moment the one before it completes.

    A future's done-callback runs on whatever thread completed it (a pool thread, a process pool's
    manager thread, Dask's event loop), where an exception is logged and lost and where submitting
    could stall the thread that completes futures; so it only queues the future (``_completed``)
    for this scheduler's thread, which turns it into a result for :meth:`next_result`, then
    submits the next task on its session. ``_lock`` guards what both threads touch: the futures
    in flight, ``_stopped`` (checked in the same hold as a submission so that nothing is
    submitted after :meth:`stop`) and the progress counts (:class:`_Counts`), which this thread
    updates as it completes a task, in the same hold as it takes the task's future out of
    flight, so that a snapshot (:meth:`progress`, on the iterating thread) counts every task
    once, whether or not the consumer has its result yet.
    """

    def __init__(self, pool: Executor, tasks: List[AgentTask], local: Optional[LocalRuns], counts: _Counts) -> None:
        self._pool = pool
        self._tasks = tasks
        self._local = local
        self._counts = counts
        # the caller's context (made in its thread: run_many primes the generator): tasks on this
        # process's threads run in a copy of it, so a trace span around run_many is their parent,
        # as it is of a prompt() (later tasks are submitted from the scheduler's own thread)
        self._context = contextvars.copy_context()
        self._plan = _plan(tasks)
        self._lock = threading.Lock()
        self._handled = threading.Condition(self._lock)  # notified as a completion is counted
        self._in_flight: Dict[Future[Any], int] = {}  # submitted and not yet completed: the task's index
        self._stopped = False
        self._completed: SimpleQueue[Optional[Future[Any]]] = SimpleQueue()  # None: the thread ends
        self._results: SimpleQueue[Union[TaskResult, BaseException]] = SimpleQueue()
        # joined by close(); a daemon so that an iterator dropped unclosed at exit cannot hang it
        self._thread = threading.Thread(target=self._follow, name="agentcore-many-scheduler", daemon=True)

    def start(self) -> None:
        """Submit what can start at once, then start this scheduler's thread (also when the
        executor refused a task: its error is raised, and the thread handles what was submitted
        before it). The thread starts after the first submissions: a process pool started by
        ``fork`` (Linux's default before Python 3.14) forks all its workers at the first, which
        Python 3.12+ warns about (``DeprecationWarning: This process is multi-threaded, use of
        fork() may lead to deadlocks in the child``) while a thread of ours runs. A future
        completing meanwhile waits in ``_completed``."""
        try:
            with self._lock:
                for index in self._plan.first:
                    self._submit(index)
        finally:
            self._thread.start()

    def next_result(self, timeout: float) -> Optional[TaskResult]:
        """The result of the next task to finish, or None when none did within ``timeout`` seconds."""
        try:
            result = self._results.get(timeout=timeout)
        except Empty:
            return None
        if isinstance(result, BaseException):
            raise RuntimeError("run_many: the thread submitting the tasks failed") from result
        return result

    def progress(self, finished: bool = False, interrupted: bool = False) -> ManyProgress:
        """A snapshot of the counts: the tasks completed so far, and those running."""
        with self._lock:
            return self._counts.snapshot(list(self._in_flight), finished, interrupted)

    def stop(self) -> List[Future[Any]]:
        """Submit nothing more; return the futures still in flight (to cancel)."""
        with self._lock:
            self._stopped = True
            return list(self._in_flight)

    def wait_counted(self, futures: Collection[Future[Any]], timeout: float) -> bool:
        """Wait until this scheduler's thread has counted the completion of each of ``futures``
        (a future is done, and its waiters woken, before its done-callback queues it here); False
        when ``timeout`` seconds passed first."""
        with self._handled:
            return self._handled.wait_for(lambda: not any(f in self._in_flight for f in futures), timeout)

    def close(self) -> None:
        """Stop, and join the thread once it has handled the completions queued before."""
        self.stop()
        if self._thread.ident is not None:
            self._completed.put(None)
            self._thread.join()

    def _submit(self, index: int) -> None:  # with _lock held
        task, lineup = self._tasks[index], self._plan.lineups[index]
        future: Future[Any]
        if self._local is not None:  # on this process's threads: in the caller's context (a trace span)
            future = self._pool.submit(self._context.copy().run, run_task, task, self._local, lineup)
        elif isinstance(self._pool, ProcessPoolExecutor):  # unpickled by the worker's own code
            future = self._pool.submit(run_task_from_bytes, pickle.dumps((task, lineup)))
        else:  # another process: the result travels pickled (run_task_pickled)
            future = self._pool.submit(run_task_pickled, task, lineup)
        self._in_flight[future] = index
        future.add_done_callback(self._completed.put)

    def _follow(self) -> None:
        try:
            future = self._completed.get()
            while future is not None:
                self._complete(future)
                future = self._completed.get()
        except BaseException as exc:  # a bug here must reach the iterator, never leave it waiting
            self._results.put(exc)

    def _complete(self, future: Future[Any]) -> None:
        """Submit the task after ``future``'s on its session, count ``future``'s result and those
        of the tasks the executor refused, then hand them over: once the consumer has a task's
        result, the next task on its session is submitted (or failed), unless the call was
        stopped."""
        with self._lock:
            index = self._in_flight[future]
        task = self._tasks[index]
        try:
            result = _result_of(future, task)
        except Exception as exc:  # the task's outcome is lost, not its place in the results
            result = TaskResult(task, error=_portable(exc))
        finished = [result, *self._start_next(index)]
        with self._lock:
            del self._in_flight[future]
            for outcome in finished:
                self._counts.add(outcome, self._stopped)
            self._handled.notify_all()
        for outcome in finished:
            self._results.put(outcome)

    def _start_next(self, index: int) -> List[TaskResult]:
        """Submit the task that continues ``index``'s session; one the executor refuses (a broken
        pool) fails, and the task after it on that session is tried. The failed ones' results."""
        refused: List[TaskResult] = []
        follower = self._plan.after.get(index)
        with self._lock:
            while follower is not None and not self._stopped:
                try:
                    self._submit(follower)
                    break
                except Exception as exc:
                    refused.append(TaskResult(self._tasks[follower], error=_portable(exc)))
                follower = self._plan.after.get(follower)
        return refused


@dataclass
class _Plan:
    """What to submit at once (``first``: indices into the tasks, in the caller's order) and, for
    a task on a session, the index of the task that continues that session (``after``) and its
    :class:`~agentcore._many_worker.Lineup` (``lineups``, None without a session)."""

    first: List[int]
    after: Dict[int, int]
    lineups: List[Optional[Lineup]]


def _plan(tasks: List[AgentTask]) -> _Plan:
    """Tasks on the same session URL (compared as given) form a chain in the caller's order; only
    the first of each chain, and every task without a session or on a ``memory:`` one (a new
    session each time), starts at once."""
    plan = _Plan([], {}, [None] * len(tasks))
    chains: Dict[str, List[int]] = {}
    for index, task in enumerate(tasks):
        if task.session is None or _new_at_each_open(task.session):
            plan.first.append(index)
            continue
        chain = chains.setdefault(task.session, [])
        if chain:
            plan.after[chain[-1]] = index
        else:
            plan.first.append(index)
        chain.append(index)
    for chain in chains.values():
        keys = tuple(attempt_key(tasks[index]) for index in chain)
        for place, index in enumerate(chain):
            plan.lineups[index] = Lineup(keys, place)
    return plan


def _new_at_each_open(url: str) -> bool:
    """Whether ``url`` opens a new session every time (``memory:``, ``memory:?session=ID``): the
    tasks naming it share no conversation, so nothing orders them."""
    return url.partition(":")[0].strip().lower() == "memory"


def _emit(report: Optional[Callable[[ManyProgress], Any]], snapshot: Callable[..., ManyProgress], **how: bool) -> None:
    """``report(snapshot(**how))``; nothing, not even the snapshot (a look at every future in
    flight, under the scheduler's lock), when nobody is told (``progress=False``)."""
    if report is not None:
        report(snapshot(**how))


def _cancel(scheduler: _Scheduler, local: Optional[LocalRuns]) -> bool:
    """Stop ``scheduler``, cancel what has not started, abort what runs on threads; True when all
    of it settled, its completions counted (so that the final snapshot includes them)."""
    pending = scheduler.stop()
    for future in pending:
        future.cancel()
    if local is None:
        return True
    local.abort_all()
    return scheduler.wait_counted([f for f in pending if not f.cancelled()], _CANCEL_GRACE)


def _result_of(future: Future[Any], task: AgentTask) -> TaskResult:
    """The task's result, with the caller's own task object; a future that failed or was
    cancelled (a dead worker, Dask's KilledWorker, a broken process pool) becomes an error."""
    if future.cancelled():
        return TaskResult(task, error=TaskAborted("cancelled"))
    error = future.exception()
    if error is not None:
        return TaskResult(task, error=_portable(error))
    result = future.result()
    if isinstance(result, bytes):  # from another process
        result = result_from_worker(result, task)
    return (
        replace(result, task=task)
        if isinstance(result, TaskResult)
        else TaskResult(task, error=TaskError("TypeError", f"the worker returned {type(result).__name__}"))
    )


def _workers(pool: Executor) -> Optional[int]:
    """How many tasks a process pool runs at once (its processes), None for other executors."""
    workers = getattr(pool, "_max_workers", None) if isinstance(pool, ProcessPoolExecutor) else None
    return workers if isinstance(workers, int) and workers > 0 else None


class _Counts:
    """The figures of :class:`ManyProgress`, kept by the scheduler thread (with its lock held).
    ``workers``: the most tasks that can run at once, when the executor says (a process pool)."""

    def __init__(self, total: int, start: float, reports_running: bool, workers: Optional[int] = None) -> None:
        self.total = total
        self.reports_running = reports_running
        self.workers = workers
        self.start = start
        self.done = self.failed = 0
        self.input_tokens = self.output_tokens = 0
        self.cost = 0.0

    def add(self, result: TaskResult, stopped: bool) -> None:
        """Count a completed task. After the call was ``stopped``, a task the stop aborted or
        cancelled (:class:`TaskAborted`) did not finish: it stays out of ``done`` and ``failed``
        (a re-run runs it again), though what it was billed counts."""
        if result.error is None:
            self.done += 1
        elif not (stopped and isinstance(result.error, TaskAborted)):
            self.failed += 1
        self.input_tokens += result.usage.input
        self.output_tokens += result.usage.output
        self.cost += result.usage.cost.total

    def snapshot(
        self, in_flight: Collection[Future[Any]], finished: bool = False, interrupted: bool = False
    ) -> ManyProgress:
        # A task in flight runs from its start until the scheduler thread counts its completion
        # (its future may be done a moment before). Futures of a thread or process pool say when
        # they start; Dask's never do (they go from pending to done), so there "running" counts
        # every task in flight. A process pool marks a future running as it moves the task to its
        # call queue, a task or more before a worker process takes it: there at most one task per
        # process runs.
        running = sum(1 for f in in_flight if f.running() or f.done()) if self.reports_running else len(in_flight)
        if self.workers is not None:
            running = min(running, self.workers)
        return ManyProgress(
            self.total,
            self.done,
            self.failed,
            0 if finished else running,
            self.input_tokens,
            self.output_tokens,
            self.cost,
            time.monotonic() - self.start,
            finished,
            interrupted,
        )

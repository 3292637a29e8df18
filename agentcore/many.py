"""Running many agents: :func:`run_many` over any ``concurrent.futures.Executor``.

Agents are recipes (:class:`AgentSpec`, :class:`AgentTask`, see :mod:`agentcore._many_spec`) so
that the same tasks run on a thread pool in this process, a ``ProcessPoolExecutor`` (CPU-bound
tools, one GIL per process) or a Dask cluster (``Client.get_executor()``): agentcore does not
schedule anything itself. Dask is never imported here.

Tasks that name the same session URL run one after another, in the caller's order (two agents
cannot write one session at once): the first is submitted with the others, each next one when
the iterator, having yielded the result of the one before it, is asked for the next result.

Cancellation (``KeyboardInterrupt`` while iterating, or closing the iterator): tasks that have
not started are cancelled (their futures, or, on threads, they return at once), and tasks still
waiting for an earlier task on their session are never submitted. What is running:

* on a ``ThreadPoolExecutor`` (the default), each running agent is aborted (``agent.abort()``:
  the provider request and tools see the signal), and ``run_many`` waits for them to settle, so
  their sessions end with the aborted message, closed;
* on a process pool or Dask, a running task cannot be reached from here: its future is cancelled
  (Dask forgets the result; a process pool lets the task finish in its worker process and drops
  it). Its session stays valid (every entry is complete), possibly without an end.
"""

from __future__ import annotations

import time
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from typing import Any, Callable, Collection, Dict, Iterable, Iterator, List, Optional, Union

from ._many_progress import ManyProgress, make_reporter
from ._many_spec import AgentSpec, AgentTask, SpecNotPortableError, check_portable
from ._many_worker import (
    Lineup,
    LocalRuns,
    TaskAborted,
    TaskError,
    TaskResult,
    _portable,
    attempt_key,
    run_task,
)

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
    results. ``executor``: any ``concurrent.futures.Executor``; None: a thread pool of
    ``min(DEFAULT_MAX_THREADS, len(tasks))`` threads, shut down at the end. Every task is checked
    before anything is submitted: a task that is not an :class:`AgentTask` is a TypeError, one that
    cannot be pickled is :exc:`~agentcore.many.SpecNotPortableError` naming the field (``tools[0]``...), even on
    threads, so that what runs here also runs on a cluster.

    Tasks naming the same session URL (the same string, as given) run one after another in the
    order given, each continuing the conversation of the one before it: the first is submitted at
    once, each next one once the iterator has yielded the result of the one before it (whatever
    its outcome) and is asked for more, so closing the iterator after a result leaves the tasks
    that would continue that session unstarted. Tasks without a session, or on different
    sessions, run in parallel.

    A failing task (unknown model, provider error, a worker process that died...) yields a result
    whose ``error`` is set, picklable; the others go on. ``KeyboardInterrupt`` or closing the
    iterator cancels the rest (see the module docstring for what can be aborted where) and returns
    promptly; KeyboardInterrupt is re-raised. ``progress``: see :mod:`agentcore._many_progress`.
    """
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
    counts = _Counts(len(tasks), time.monotonic(), isinstance(pool, (ThreadPoolExecutor, ProcessPoolExecutor)))
    plan = _plan(tasks)
    futures: Dict[Future[Any], int] = {}  # submitted and not yet yielded: the task's index
    settled = True

    def submit(index: int) -> None:
        futures[pool.submit(run_task, tasks[index], local, plan.lineups[index])] = index

    def settle(result: TaskResult) -> TaskResult:
        counts.add(result)
        _emit(report, counts.snapshot(futures))
        return result

    def start_next(index: int) -> Iterator[TaskResult]:
        """Submit the task that continues ``index``'s session; one the executor refuses (a broken
        pool) fails, and the task after it on that session is tried."""
        follower = plan.after.get(index)
        while follower is not None:
            try:
                submit(follower)
                return
            except Exception as exc:
                yield settle(TaskResult(tasks[follower], error=_portable(exc)))
            follower = plan.after.get(follower)

    try:
        for index in plan.first:
            submit(index)
        yield None  # type: ignore[misc]  # primed by run_many: everything that can start is submitted
        while futures:
            done, _ = wait(futures, timeout=_TICK, return_when=FIRST_COMPLETED)
            for future in done:
                index = futures.pop(future)
                yield settle(_result_of(future, tasks[index]))
                # submitted only now that the caller wants more: closing the iterator after a
                # task's result leaves the tasks that continue its session unstarted
                yield from start_next(index)
            if not done:
                _emit(report, counts.snapshot(futures))
        _emit(report, counts.snapshot(futures, finished=True))
    except BaseException:  # KeyboardInterrupt, GeneratorExit (close()), or a failing submit
        settled = _cancel(futures, local)
        _emit(report, counts.snapshot(futures, finished=True, interrupted=True))
        raise
    finally:
        if owned:
            pool.shutdown(wait=settled, cancel_futures=True)


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
    the first of each chain, and every task without a session, starts at once."""
    plan = _Plan([], {}, [None] * len(tasks))
    chains: Dict[str, List[int]] = {}
    for index, task in enumerate(tasks):
        if task.session is None:
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


def _emit(report: Optional[Callable[[ManyProgress], Any]], snapshot: ManyProgress) -> None:
    if report is not None:
        report(snapshot)


def _cancel(pending: Collection[Future[Any]], local: Optional[LocalRuns]) -> bool:
    """Cancel what has not started, abort what runs on threads; True when all of it settled."""
    for future in pending:
        future.cancel()
    if local is None:
        return True
    local.abort_all()
    running = [f for f in pending if not f.cancelled()]
    _, still = wait(running, timeout=_CANCEL_GRACE)
    return not still


def _result_of(future: Future[Any], task: AgentTask) -> TaskResult:
    """The task's result, with the caller's own task object; a future that failed or was
    cancelled (a dead worker, Dask's KilledWorker, a broken process pool) becomes an error."""
    if future.cancelled():
        return TaskResult(task, error=TaskAborted("cancelled"))
    error = future.exception()
    if error is not None:
        return TaskResult(task, error=_portable(error))
    result = future.result()
    return (
        replace(result, task=task)
        if isinstance(result, TaskResult)
        else TaskResult(task, error=TaskError("TypeError", f"the worker returned {type(result).__name__}"))
    )


class _Counts:
    def __init__(self, total: int, start: float, reports_running: bool) -> None:
        self.total = total
        self.reports_running = reports_running
        self.start = start
        self.done = self.failed = 0
        self.input_tokens = self.output_tokens = 0
        self.cost = 0.0

    def add(self, result: TaskResult) -> None:
        if result.error is None:
            self.done += 1
        else:
            self.failed += 1
        self.input_tokens += result.usage.input
        self.output_tokens += result.usage.output
        self.cost += result.usage.cost.total

    def snapshot(
        self, pending: Collection[Future[Any]], finished: bool = False, interrupted: bool = False
    ) -> ManyProgress:
        # Futures of a thread or process pool say when they run; Dask's never do (they go from
        # pending to done), so there "running" counts every task in flight.
        running = sum(1 for f in pending if (f.running() if self.reports_running else not f.done()))
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

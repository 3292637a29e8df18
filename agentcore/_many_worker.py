"""What runs on a worker for one :class:`~agentcore.many.AgentTask`: open the session, build the
agent, run the prompt, close the session, return a picklable :class:`TaskResult`.

Re-runs are safe: a task records ``agentcore.run_many`` custom entries around its run (``start``
with the task id, the task's submission token, attempt and a digest of the prompt; ``end`` with
whether it succeeded). A scheduler runs a task again when a worker died while running it, or after
it finished but before its result reached the client (Dask recomputes lost results). The new
attempt looks at the last attempt on the session's current branch (the last ``start``, of any
task) and asks whether it is an attempt of *this* task: with an ``id``, the same id and the same
prompt; with ``id=None``, the same submission token (the same ``AgentTask`` object, or the copies
a scheduler unpickles from it; a new ``AgentTask`` never matches, even with the same prompt).

* same task, finished successfully: nothing runs; the recorded messages are the result (the
  session is not extended with a duplicate conversation, the model is not paid twice);
* same task, unfinished or failed: the session's leaf moves back to where that attempt began (a
  ``leaf`` entry: the earlier attempt stays in the file as an abandoned branch, nothing is
  rewritten) and the task runs from the transcript the first attempt saw;
* anything else (no attempt, another task, the same id with another prompt): the task continues
  the session after what is there; nothing is ever moved back past another task's attempt.

Every failure is caught and returned as ``TaskResult.error``; an exception that does not survive
:mod:`pickle` (a provider's exception holding a socket...) is replaced by :class:`TaskError`
carrying its type name, message and traceback text.
"""

from __future__ import annotations

import pickle
import threading
import traceback
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .types import Usage

__all__ = ["TaskResult", "TaskError", "run_task", "open_session_url", "LocalRuns", "MARKER"]

MARKER = "agentcore.run_many"


@dataclass
class TaskResult:
    """The outcome of one task: the run's new ``messages`` (empty when it failed before running),
    ``error`` (None on success; an exception otherwise, always picklable) and the summed ``usage``
    of the run's assistant messages."""

    task: Any
    messages: List[Any] = field(default_factory=list)
    error: Optional[BaseException] = None
    usage: Usage = field(default_factory=Usage)

    @property
    def ok(self) -> bool:
        """True when the task ran to a normal end."""
        return self.error is None


class TaskError(Exception):
    """A task failure that crossed a process boundary: ``kind`` is the original exception's type
    name, ``traceback`` its formatted traceback (from the worker)."""

    def __init__(self, kind: str, message: str, traceback: str = "") -> None:
        super().__init__(f"{kind}: {message}" if kind else message)
        self.kind = kind
        self.message = message
        self.traceback = traceback

    def __reduce__(self) -> Any:
        return (TaskError, (self.kind, self.message, self.traceback))


class LocalRuns:
    """The agents running in this process for one ``run_many`` call (thread executors only):
    :meth:`abort_all` aborts those running and makes those not yet started return at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._agents: Dict[int, Any] = {}
        self.cancelled = threading.Event()

    def add(self, agent: Any) -> bool:
        with self._lock:
            if self.cancelled.is_set():
                return False
            self._agents[id(agent)] = agent
            return True

    def remove(self, agent: Any) -> None:
        with self._lock:
            self._agents.pop(id(agent), None)

    def abort_all(self) -> None:
        with self._lock:
            self.cancelled.set()
            agents = list(self._agents.values())
        for agent in agents:
            agent.abort("run_many cancelled")


def open_session_url(url: str) -> Any:
    """Open the session at ``url``, creating it when missing (``open_session(url, create=True)``:
    ``jsonl:``, ``sqlite:``, ``memory:`` and the schemes plugins register, ``postgresql:`` say).
    Raises ValueError naming an unknown scheme."""
    from .session.urls import open_session

    return open_session(url, create=True)


@dataclass
class _Resume:
    attempt: int = 1
    recorded: Optional[List[Any]] = None  # the messages of a finished attempt, to return as they are


@dataclass
class _Attempt:
    start: Any  # the ``start`` entry
    end: Optional[Dict[str, Any]] = None  # the data of its ``end`` entry
    messages: List[Any] = field(default_factory=list)  # recorded between the two


def _resume_point(session: Any, task: Any) -> _Resume:
    """Where this attempt starts (see the module docstring); moves the leaf back when needed."""
    last = _last_attempt(session)
    if last is None or not _is_attempt_of(last.start.data, task):
        return _Resume(1)
    number = int(last.start.data.get("attempt", 0))
    if last.end is not None and last.end.get("ok"):
        return _Resume(number, recorded=last.messages)
    session.move_to(last.start.parent_id)
    return _Resume(number + 1)


def _last_attempt(session: Any) -> Optional[_Attempt]:
    """The last attempt recorded on the current branch, with its end and messages."""
    last: Optional[_Attempt] = None
    for entry in session.get_branch():
        data = getattr(entry, "data", None)
        if getattr(entry, "custom_type", None) == MARKER and isinstance(data, dict):
            if data.get("event") == "start":
                last = _Attempt(entry)
            elif data.get("event") == "end" and last is not None and last.end is None and _same_run(data, last):
                last.end = data
        elif last is not None and last.end is None and getattr(entry, "type", None) == "message":
            last.messages.append(entry.message)
    return last


def _same_run(end: Dict[str, Any], attempt: _Attempt) -> bool:
    start = attempt.start.data
    return end.get("task") == start.get("task") and end.get("token") == start.get("token")


def _is_attempt_of(start: Dict[str, Any], task: Any) -> bool:
    """Whether ``start`` began an attempt of ``task``: the same id and prompt, or, without an id,
    the same submission (a marker that records no prompt matches on its id)."""
    if task.id is None:
        return start.get("task") is None and start.get("token") == task._token
    digest = _digest(task.prompt)
    return start.get("task") == _jsonable(task.id) and start.get("prompt", digest) == digest


def _digest(prompt: str) -> str:
    import hashlib

    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:16]


def _jsonable(value: Any) -> Any:
    return value if isinstance(value, (str, int, float, bool)) or value is None else repr(value)


def sum_usage(messages: List[Any]) -> Usage:
    total = Usage()
    for message in messages:
        usage = getattr(message, "usage", None)
        if getattr(message, "role", None) != "assistant" or usage is None:
            continue
        total.input += usage.input
        total.output += usage.output
        total.cache_read += usage.cache_read
        total.cache_write += usage.cache_write
        total.total_tokens += usage.total_tokens
        cost = total.cost
        cost.input += usage.cost.input
        cost.output += usage.cost.output
        cost.cache_read += usage.cost.cache_read
        cost.cache_write += usage.cost.cache_write
        cost.total += usage.cost.total
    return total


def _portable(error: BaseException) -> BaseException:
    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:
        text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        return TaskError(type(error).__name__, str(error), text)


class TaskAborted(Exception):
    """The task was cancelled (``run_many`` was interrupted or closed) before it finished."""


def run_task(task: Any, local: Optional[LocalRuns] = None) -> TaskResult:
    """Run ``task`` here; never raises (except KeyboardInterrupt/SystemExit), see module docs."""
    if local is not None and local.cancelled.is_set():
        return TaskResult(task, error=TaskAborted("cancelled before it started"))
    session = None
    messages: List[Any] = []
    try:
        if task.session is not None:
            session = open_session_url(task.session)
        resume = _resume_point(session, task) if session is not None else _Resume(1)
        if resume.recorded is not None:
            return TaskResult(task, resume.recorded, None, sum_usage(resume.recorded))
        agent = task.spec.build(session=session)
        if local is not None and not local.add(agent):
            return TaskResult(task, error=TaskAborted("cancelled before it started"))
        if session is not None:
            session.append_custom(
                MARKER,
                {
                    "event": "start",
                    "task": _jsonable(task.id),
                    "token": task._token,
                    "attempt": resume.attempt,
                    "prompt": _digest(task.prompt),
                },
            )
        try:
            messages = list(agent.prompt(task.prompt) or [])
        finally:
            if local is not None:
                local.remove(agent)
        error = _run_error(messages)
        if session is not None:
            session.append_custom(
                MARKER, {"event": "end", "task": _jsonable(task.id), "token": task._token, "ok": error is None}
            )
        return TaskResult(task, messages, error, sum_usage(messages))
    except Exception as exc:
        return TaskResult(task, messages, _portable(exc), sum_usage(messages))
    finally:
        if session is not None:
            try:
                session.close()
            except Exception:  # the result (or the first error) matters more than a close failure
                pass


def _run_error(messages: List[Any]) -> Optional[BaseException]:
    """The failure of a run that returned: its last assistant message ended in error or abort."""
    last = next((m for m in reversed(messages) if getattr(m, "role", None) == "assistant"), None)
    reason = getattr(last, "stop_reason", None)
    if reason == "aborted":
        return TaskAborted(getattr(last, "error_message", None) or "the run was aborted")
    if reason == "error":
        return TaskError("AgentRunError", getattr(last, "error_message", None) or "the model request failed")
    return None

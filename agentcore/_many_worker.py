"""What runs on a worker for one :class:`~agentcore.many.AgentTask`: open the session, build the
agent, run the prompt, close the session, return a picklable :class:`TaskResult`.

Re-runs are safe: a task records ``agentcore.run_many`` custom entries around its run (``start``
with the task id, the task's submission token, attempt and a digest of the prompt; ``end`` with
whether it succeeded). A scheduler runs a task again when a worker died while running it, or after
it finished but before its result reached the client (Dask recomputes lost results). The new
attempt looks at the last attempt on the session's current branch (the last ``start``, of any
task) and asks whether it is an attempt of *this* task: with an ``id``, the same id and the same
prompt; with ``id=None``, the same submission token (the same ``AgentTask`` object, or the copies
a scheduler unpickles from it; a new ``AgentTask`` never matches, even with the same prompt). An
id that is no str, number, bool or None is recorded as its ``repr`` taken by ``run_many`` in the
caller's process: a call made again in another process knows it only if that repr is stable
(a dataclass's, not an address).

* same task, finished successfully: nothing runs; the recorded messages are the result (the
  session is not extended with a duplicate conversation, the model is not paid twice);
* same task, paused for approval (its ``end`` says ``paused``) and continued to an end in the
  session since (a person approved or denied its calls and ran ``continue_()`` there: every tool
  call of the last response has a result, and that response neither failed nor was aborted):
  it finished there; nothing runs, and the messages of the attempt and of its continuation are
  the result;
* same task, unfinished or failed (a pause nobody continued to an end included): the session's
  leaf moves back to where that attempt began (a ``leaf`` entry: the earlier attempt stays in the
  file as an abandoned branch, nothing is rewritten) and the task runs from the transcript the
  first attempt saw;
* anything else (no attempt, another task, the same id with another prompt): the task continues
  the session after what is there; nothing is ever moved back past another task's attempt.

Tasks of one ``run_many`` call that name the same session run one after another (a
:class:`Lineup`: their keys in the caller's order, and this task's place). The task's own attempt
is then looked for in the longest run of attempts that ends the branch and is, in order, attempts
of the first tasks of its lineup: a re-run of the whole call skips each task that finished, and
rewinds to the first that did not (the ones after it run again after it). A task alone on its
session has a lineup of one, which is the rule above.

A task whose session already has tool calls waiting for approval when it starts (the task before
it on the session paused) fails at once (``TaskError`` of kind ``ApprovalPending``), recording
nothing: its prompt cannot be sent before they are decided.

Every failure is caught and returned as ``TaskResult.error``; an exception that does not survive
:mod:`pickle` (a provider's exception holding a socket...) is replaced by :class:`TaskError`
carrying its type name, message and traceback text.
"""

from __future__ import annotations

import pickle
import threading
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from ._safe import exception_message
from .types import Usage, add_usage

__all__ = [
    "TaskResult",
    "TaskError",
    "run_task",
    "run_task_pickled",
    "run_task_from_bytes",
    "result_from_worker",
    "open_session_url",
    "LocalRuns",
    "Lineup",
    "attempt_key",
    "MARKER",
]

MARKER = "agentcore.run_many"


@dataclass
class TaskResult:
    """The outcome of one task: the run's new ``messages`` (empty when it failed before running),
    ``error`` (None on success; an exception otherwise, always picklable) and ``usage``, what the
    task's model requests were billed: the summed usage of the run's assistant messages plus
    ``summary_usage``.

    ``summary_usage`` is the part of ``usage`` spent on compaction summaries: the summed ``usage``
    of the ``compaction_end`` events of the task's run (automatic compactions on the threshold or
    an overflow, failed and aborted ones included: their answered requests were billed although
    nothing was stored). A result recorded by an earlier attempt (a re-run that skips a finished
    task) counts the compactions stored in that attempt; a failed compaction stores nothing, so
    it is not in a recorded result. Tool results' usage (a sub-agent's) is in neither: the
    sub-agent's own session records it."""

    task: Any
    messages: List[Any] = field(default_factory=list)
    error: Optional[BaseException] = None
    usage: Usage = field(default_factory=Usage)
    summary_usage: Usage = field(default_factory=Usage)

    def __setstate__(self, state: Dict[str, Any]) -> None:
        # a result pickled by a worker with an older agentcore (a Dask cluster upgraded client
        # first) has no ``summary_usage``: it reported none
        self.__dict__.update(state)
        self.__dict__.setdefault("summary_usage", Usage())

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
        """Abort every agent; a KeyboardInterrupt that one ``abort()`` raises (a Ctrl+C while its
        listeners were told) is raised once all of them were aborted."""
        with self._lock:
            self.cancelled.set()
            agents = list(self._agents.values())
        interrupted: Optional[BaseException] = None
        for agent in agents:
            try:
                agent.abort("run_many cancelled")
            except BaseException as exc:  # noqa: BLE001 - raised below, after the others
                interrupted = interrupted or exc
        if interrupted is not None:
            raise interrupted


def _abort_if_cancelled(agent: Any, local: LocalRuns) -> Callable[[Any], None]:
    """A listener that aborts the run at its ``agent_start`` when the call was cancelled before
    the run began (between :meth:`LocalRuns.add` and ``prompt()``, the agent idle, abort_all's
    ``abort()`` did nothing); once the run has begun, ``abort()`` reaches it."""

    def listener(event: Any) -> None:
        if event.type == "agent_start" and local.cancelled.is_set():
            agent.abort("run_many cancelled")

    return listener


def open_session_url(url: str) -> Any:
    """Open the session at ``url``, creating it when missing (``open_session(url, create=True)``:
    ``jsonl:``, ``sqlite:``, ``memory:`` and the schemes plugins register, ``postgresql:`` say).
    Raises ValueError naming an unknown scheme."""
    from .session.urls import open_session

    return open_session(url, create=True)


@dataclass(frozen=True)
class Lineup:
    """The tasks of one ``run_many`` call on one session, which run one after another: their
    :func:`attempt_key` in the caller's order, and ``index``, this task's place among them."""

    keys: Tuple[Dict[str, Any], ...]
    index: int = 0


def attempt_key(task: Any) -> Dict[str, Any]:
    """What a ``start`` entry records to recognise ``task``'s attempts: id, submission token and
    a digest of the prompt."""
    return {"task": _jsonable(task.id), "token": task._token, "prompt": _digest(task.prompt)}


@dataclass
class _Resume:
    attempt: int = 1
    recorded: Optional[List[Any]] = None  # the messages of a finished attempt, to return as they are
    summaries: Usage = field(default_factory=Usage)  # the usage of that attempt's stored compactions


@dataclass
class _Attempt:
    start: Any  # the ``start`` entry
    end: Optional[Dict[str, Any]] = None  # the data of its ``end`` entry
    messages: List[Any] = field(default_factory=list)  # recorded between the two
    summaries: Usage = field(default_factory=Usage)  # the usage of the compactions stored between them
    # after the ``end`` of an attempt that paused for approval, up to the next ``start``: the run a
    # person continued in the session (decisions taken, ``continue_()``), and its compactions
    continued: List[Any] = field(default_factory=list)
    continued_summaries: Usage = field(default_factory=Usage)


def _resume_point(session: Any, lineup: Lineup) -> _Resume:
    """Where this attempt starts (see the module docstring); moves the leaf back when needed."""
    own = _own_attempt(_attempts(session), lineup)
    if own is None:
        return _Resume(1)
    number = int(own.start.data.get("attempt", 0))
    if own.end is not None and own.end.get("ok"):
        return _Resume(number, recorded=own.messages, summaries=own.summaries)
    if own.end is not None and own.end.get("paused") and _settled(own.messages + own.continued):
        summaries = Usage()
        add_usage(summaries, own.summaries)
        add_usage(summaries, own.continued_summaries)
        return _Resume(number, recorded=own.messages + own.continued, summaries=summaries)
    session.move_to(own.start.parent_id)
    return _Resume(number + 1)


def _settled(messages: List[Any]) -> bool:
    """Whether a run that paused for approval was continued to an end: its last assistant
    message neither failed nor was aborted, and each of its tool calls has a result after it."""
    for place in range(len(messages) - 1, -1, -1):
        last = messages[place]
        if getattr(last, "role", None) != "assistant":
            continue
        if _run_error([last]) is not None:
            return False
        calls = {
            getattr(b, "id", None) for b in getattr(last, "content", ()) or () if getattr(b, "type", None) == "toolCall"
        }
        answered = {
            getattr(m, "tool_call_id", None) for m in messages[place + 1 :] if getattr(m, "role", None) == "toolResult"
        }
        return calls <= answered
    return False


def _own_attempt(attempts: List[_Attempt], lineup: Lineup) -> Optional[_Attempt]:
    """This task's attempt in the longest run of ``attempts`` that ends them and is, in order, an
    attempt of each of the first tasks of ``lineup``; None when no such run reaches this task."""
    for count in range(min(len(lineup.keys), len(attempts)), lineup.index, -1):
        tail = attempts[len(attempts) - count :]
        if all(_is_attempt_of(attempt.start.data, key) for attempt, key in zip(tail, lineup.keys)):
            return tail[lineup.index]
    return None


def _attempts(session: Any) -> List[_Attempt]:
    """The attempts recorded on the current branch, in order, with their ends and messages."""
    attempts: List[_Attempt] = []
    for entry in session.get_branch():
        data = getattr(entry, "data", None)
        last = attempts[-1] if attempts else None
        if getattr(entry, "custom_type", None) == MARKER and isinstance(data, dict):
            if data.get("event") == "start":
                attempts.append(_Attempt(entry))
            elif data.get("event") == "end" and last is not None and last.end is None and _same_run(data, last):
                last.end = data
        elif last is not None and last.end is None and getattr(entry, "type", None) == "message":
            last.messages.append(entry.message)
        elif last is not None and last.end is None and getattr(entry, "type", None) == "compaction":
            add_usage(last.summaries, getattr(entry, "usage", None))
        elif last is not None and last.end is not None and last.end.get("paused"):
            if getattr(entry, "type", None) == "message":
                last.continued.append(entry.message)
            elif getattr(entry, "type", None) == "compaction":
                add_usage(last.continued_summaries, getattr(entry, "usage", None))
    return attempts


def _same_run(end: Dict[str, Any], attempt: _Attempt) -> bool:
    start = attempt.start.data
    return end.get("task") == start.get("task") and end.get("token") == start.get("token")


def _is_attempt_of(start: Dict[str, Any], key: Dict[str, Any]) -> bool:
    """Whether ``start`` began an attempt of the task with :func:`attempt_key` ``key``: the same id
    and prompt, or, without an id, the same submission (a marker that records no prompt matches on
    its id)."""
    if key["task"] is None:
        return start.get("task") is None and start.get("token") == key["token"]
    return start.get("task") == key["task"] and start.get("prompt", key["prompt"]) == key["prompt"]


def _digest(prompt: str) -> str:
    import hashlib

    # surrogatepass: a prompt may hold lone surrogates (text read with surrogateescape), which the
    # agent sends escaped; any other prompt digests as plain UTF-8, as recorded sessions expect
    return hashlib.sha256(prompt.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _jsonable(value: Any) -> Any:
    return value if isinstance(value, (str, int, float, bool)) or value is None else repr(value)


def sum_usage(messages: List[Any], summaries: Optional[Usage] = None) -> Usage:
    """The usage of the assistant ``messages``, plus ``summaries`` (a compaction's) when given."""
    total = Usage()
    for message in messages:
        if getattr(message, "role", None) == "assistant":
            add_usage(total, getattr(message, "usage", None))
    if summaries is not None:
        add_usage(total, summaries)
    return total


class _SummaryUsage:
    """A listener summing the ``usage`` of the ``compaction_end`` events it receives."""

    def __init__(self) -> None:
        self.total = Usage()

    def __call__(self, event: Any) -> None:
        if getattr(event, "type", None) == "compaction_end":
            add_usage(self.total, getattr(event, "usage", None))


def _portable(error: BaseException) -> BaseException:
    """``error`` if it survives :mod:`pickle`, else a :class:`TaskError` with its type name,
    message and traceback text (read even when the exception's ``str()`` raises)."""
    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:
        try:
            text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        except Exception:  # noqa: BLE001 - formatting calls str() too; the type name is kept
            text = ""
        return TaskError(type(error).__name__, exception_message(error), text)


def run_task_pickled(task: Any, lineup: Optional[Lineup] = None) -> bytes:
    """:func:`run_task` for a worker in another process (a process pool, a Dask worker), its
    result pickled here. A result that cannot cross (a tool's ``details`` holding a lock) is that
    task's error, without its messages (its session, if any, has them), where it used to break the
    process pool or, on Dask, leave the future (and results fetched with it) never completed. The
    client reads it with :func:`result_from_worker`."""
    result = run_task(task, None, lineup)
    try:
        return pickle.dumps(result)
    except Exception as exc:  # noqa: BLE001 - any pickling failure of the run's objects
        problem = TaskError(
            type(exc).__name__,
            f"the task's result cannot be pickled to return it from the worker ({exception_message(exc)}); "
            "its messages are in its session, if it has one",
        )
        return pickle.dumps(TaskResult(task, [], problem, result.usage, result.summary_usage))


def run_task_from_bytes(data: bytes) -> bytes:
    """:func:`run_task_pickled` for a ``ProcessPoolExecutor``: the task and its lineup arrive as
    ``pickle.dumps((task, lineup))`` and are unpickled here, so that a task this process cannot
    load (a function defined under ``if __name__ == "__main__":``, which a spawned worker never
    runs; a class it cannot import) is that task's error. Left to the pool, the unpickling failure
    would kill the worker process and break the pool for every task."""
    try:
        task, lineup = pickle.loads(data)
    except Exception as exc:  # noqa: BLE001 - whatever unpickling the task's objects raises
        # a LookupError says itself what to do (a ScriptedModel serves only its own process)
        hint = (
            ""
            if isinstance(exc, LookupError)
            else "; what it names must be importable there (defined at module level, outside "
            "`if __name__ == '__main__':`)"
        )
        problem = TaskError(
            type(exc).__name__,
            f"the task cannot be unpickled in the worker process ({exception_message(exc)}){hint}",
        )
        return pickle.dumps(TaskResult(None, error=problem))  # run_many puts the caller's task back
    return run_task_pickled(task, lineup)


def result_from_worker(data: bytes, task: Any) -> Any:
    """What a :func:`run_task_pickled` returned (a :class:`TaskResult`); one this process cannot
    unpickle (a class only the workers can import) is that task's error."""
    try:
        return pickle.loads(data)
    except Exception as exc:  # noqa: BLE001 - whatever the unpickling of the run's objects raises
        return TaskResult(
            task,
            error=TaskError(
                type(exc).__name__,
                f"the task's result cannot be unpickled here ({exception_message(exc)}); "
                "its messages are in its session, if it has one",
            ),
        )


class TaskAborted(Exception):
    """The task was cancelled (``run_many`` was interrupted or closed) before it finished."""


def run_task(task: Any, local: Optional[LocalRuns] = None, lineup: Optional[Lineup] = None) -> TaskResult:
    """Run ``task`` here; never raises (except KeyboardInterrupt/SystemExit), see module docs.
    ``lineup``: where it stands among its call's tasks on its session (None: alone); its markers
    record the lineup's key for it, made by the caller from the caller's own task object."""
    if local is not None and local.cancelled.is_set():
        return TaskResult(task, error=TaskAborted("cancelled before it started"))
    session = None
    messages: List[Any] = []
    summaries = _SummaryUsage()  # the compactions of the run, failed ones included
    try:
        if task.session is not None:
            session = open_session_url(task.session)
        # the caller's key: an id's repr may be an address, which differs in this unpickled copy
        key = lineup.keys[lineup.index] if lineup is not None else attempt_key(task)
        resume = _resume_point(session, lineup or Lineup((key,))) if session is not None else _Resume(1)
        if resume.recorded is not None:
            recorded = resume.recorded
            return TaskResult(task, recorded, None, sum_usage(recorded, resume.summaries), resume.summaries)
        agent = task.spec.build(session=session)
        waiting = _waiting_error(agent)
        if waiting is not None:  # prompt() would refuse: nothing is recorded, nothing runs
            return TaskResult(task, error=waiting)
        if local is not None and not local.add(agent):
            return TaskResult(task, error=TaskAborted("cancelled before it started"))
        if session is not None:
            session.append_custom(MARKER, {"event": "start", **key, "attempt": resume.attempt})
        unsubscribe = agent.subscribe(summaries)
        if local is not None:  # abort_all() before the run began aborted an idle agent: a no-op
            stop_late_start = agent.subscribe(_abort_if_cancelled(agent, local))
        try:
            messages = list(agent.prompt(task.prompt) or [])
        finally:
            unsubscribe()
            if local is not None:
                stop_late_start()
                local.remove(agent)
        paused = _run_error(messages) is None and bool(agent.pending_approvals)
        error = _run_error(messages) or _paused_error(agent)
        if session is not None:
            end = {"event": "end", "task": key["task"], "token": key["token"], "ok": error is None}
            if paused:
                end["paused"] = True
            session.append_custom(MARKER, end)
        return TaskResult(task, messages, error, sum_usage(messages, summaries.total), summaries.total)
    except Exception as exc:
        return TaskResult(task, messages, _portable(exc), sum_usage(messages, summaries.total), summaries.total)
    finally:
        if session is not None:
            try:
                session.close()
            except Exception:  # the result (or the first error) matters more than a close failure
                pass


def _paused_error(agent: Any) -> Optional[BaseException]:
    """The failure of a run that paused for approval (a tool with ``requires_approval``): nobody
    can decide for a task, so it did not finish, and its ``end`` marker must not say it did (a
    re-run would skip it, see :func:`_resume_point`). Its session keeps the waiting calls for a
    person to decide there."""
    return _approval_pending(
        agent,
        "the run paused for approval of {calls}; a run_many task cannot wait for a decision: give "
        "the spec tools without requires_approval, or open the task's session, approve or deny "
        "each call and continue_() there (running the task again then returns that result)",
    )


def _waiting_error(agent: Any) -> Optional[BaseException]:
    """The failure of a task whose session already has tool calls waiting for approval (an earlier
    task on it paused, or a person's own run did): its prompt cannot run before they are decided."""
    return _approval_pending(
        agent,
        "the task did not start: its session has tool calls waiting for approval ({calls}), left "
        "by an earlier run on it (an earlier task that paused); open the session, approve or deny "
        "each call and continue_() there, then run the task again",
    )


def _approval_pending(agent: Any, template: str) -> Optional[BaseException]:
    """``TaskError("ApprovalPending", template)`` naming the agent's waiting calls, or None."""
    pending = agent.pending_approvals
    if not pending:
        return None
    calls = ", ".join(f"{p.tool_name} {p.tool_call_id}" for p in pending)
    return TaskError("ApprovalPending", template.format(calls=calls))


def _run_error(messages: List[Any]) -> Optional[BaseException]:
    """The failure of a run that returned: its last assistant message ended in error or abort."""
    last = next((m for m in reversed(messages) if getattr(m, "role", None) == "assistant"), None)
    reason = getattr(last, "stop_reason", None)
    if reason == "aborted":
        return TaskAborted(getattr(last, "error_message", None) or "the run was aborted")
    if reason == "error":
        return TaskError("AgentRunError", getattr(last, "error_message", None) or "the model request failed")
    return None

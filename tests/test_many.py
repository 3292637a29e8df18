"""run_many and agents as recipes (issue 16): specs that travel, thread and process pools, a real
Dask LocalCluster with two worker processes, a worker killed mid-run, cancellation.

Every task talks to a loopback OpenAI-compatible server in this process (``_many_helpers``), does
one tool call (a tool registered by name through the ``_many_helpers:plugin`` plugin) and records
into a session URL under ``tmp_path``.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, List

import _many_helpers as helpers
import _processes
import pytest

from agentcore import Agent, AgentSpec, AgentTask, Model, TaskResult, run_many
from agentcore.many import SpecNotPortableError, TaskAborted, TaskError
from agentcore.options import StreamOptions
from agentcore.session import Session
from agentcore.session.sqlite import SqliteSessionStorage

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = "_many_helpers:plugin"


@pytest.fixture(scope="module")
def server():
    with helpers.LoopbackServer() as srv:
        yield srv


@pytest.fixture
def spec(server):
    return AgentSpec(server.model(), tools=("many_add",), plugins=(PLUGIN,), get_api_key=helpers.api_key)


@pytest.fixture
def worker_path(monkeypatch):
    """Spawned worker processes import this worktree's agentcore and ``_many_helpers``."""
    paths = [str(ROOT), helpers.TESTS_DIR] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))


def add_task(spec: AgentSpec, i: int, session: Any = None) -> AgentTask:
    return AgentTask(spec, f'many_add {{"a": {i}, "b": 1000}}', session=session, id=i)


def sqlite_url(tmp_path: Path, i: int) -> str:
    return f"sqlite:///{tmp_path / 'sessions.db'}?session=task-{i}"


def branch_markers(session: Session) -> List[Dict[str, Any]]:
    return [e.data for e in session.get_branch() if getattr(e, "custom_type", None) == "agentcore.run_many"]


def assert_complete(session: Session, i: int) -> None:
    """The session's current branch is one finished attempt: prompt, tool call, result, answer."""
    roles = [getattr(m, "role", None) for m in session.build_context().messages]
    assert roles == ["user", "assistant", "toolResult", "assistant"], (i, roles)
    assert session.build_context().messages[-1].text == f"result {i + 1000}"
    markers = branch_markers(session)
    assert [m["event"] for m in markers] == ["start", "end"], (i, markers)
    assert markers[-1]["ok"] is True


# --------------------------------------------------------------------------- recipes


def test_spec_and_task_pickle_round_trip(server):
    spec = AgentSpec(
        server.model(),
        "be brief",
        ("many_add", "_many_helpers:many_spin"),
        "low",
        StreamOptions(temperature=0.5, max_tokens=99),
        (PLUGIN,),
        get_api_key=helpers.api_key,
    )
    task = AgentTask(spec, "many_add {}", session="jsonl:///tmp/x.jsonl", id=("batch", 7))
    back = pickle.loads(pickle.dumps(task))
    assert back == task
    assert back.spec.options.temperature == 0.5
    assert [getattr(t, "name", t) for t in back.spec.build().state.tools] == ["many_add", "many_spin"]
    mapping = AgentSpec("openai/gpt-4o-mini", options={"temperature": 0.1})
    assert pickle.loads(pickle.dumps(mapping)).option_kwargs() == {"temperature": 0.1}


def test_a_task_repr_hides_the_session_url_password(spec):
    task = AgentTask(spec, "hi", session="postgresql://u:s3cret-pw@db.example/agents?session=t-1", id=1)
    for text in (repr(task), repr(TaskResult(task)), str(TaskResult(task))):
        assert "s3cret-pw" not in text and "postgresql://u:***@db.example/agents?session=t-1" in text


def test_spec_build_resolves_names_in_this_process(spec):
    agent = spec.build()
    assert [getattr(t, "name", t) for t in agent.state.tools] == ["many_add"]
    assert agent.model.base_url == spec.model.base_url


class _Unreadable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no message")


class _KeyVault:
    """A get_api_key whose pickling raises an exception that cannot be printed (it used to
    escape check_portable as that RuntimeError, naming no field)."""

    def __call__(self, provider: str) -> str:
        return "k"

    def __reduce__(self) -> Any:
        raise _Unreadable()


@pytest.mark.parametrize(
    "change, field",
    [
        (dict(get_api_key=_KeyVault()), "get_api_key"),
        (dict(tools=(lambda a: a,)), "tools[0]"),
        (dict(tools=("many_add", helpers.many_spin)), "tools[1]"),  # a @tool object: name it by path
        (dict(options=StreamOptions(on_payload=lambda body: body)), "options.on_payload"),
        (dict(options={"on_response": lambda *a: None}), "options.on_response"),
        (dict(get_api_key=lambda provider: "k"), "get_api_key"),
    ],
)
def test_a_spec_that_cannot_travel_is_refused_at_submission_naming_the_field(spec, server, change, field):
    bad = AgentSpec(**{**spec.__dict__, **change})
    before = server.requests
    with pytest.raises(SpecNotPortableError) as info:
        run_many([add_task(spec, 0), add_task(bad, 1)], progress=False)
    assert info.value.field == field
    assert f"AgentSpec.{field}" in str(info.value) and "tasks[1] (id=1)" in str(info.value)
    assert server.requests == before  # refused before anything was submitted


def test_spec_refuses_keys_plugin_objects_and_unknown_options(server):
    keyed = Model(
        id="m",
        api="openai-completions",
        provider="p",
        base_url=server.base_url,
        headers={"Authorization": "Bearer sk-secret"},
    )
    with pytest.raises(SpecNotPortableError) as info:
        AgentSpec(keyed)
    assert info.value.field == "model.headers" and "sk-secret" not in str(info.value)
    with pytest.raises(SpecNotPortableError, match="options.headers"):
        AgentSpec("openai/gpt-4o-mini", options={"headers": {"x-api-key": "sk-secret"}})
    with pytest.raises(SpecNotPortableError, match="cf-aig-authorization"):  # issue 17: gateway headers too
        AgentSpec("openai/gpt-4o-mini", options={"headers": {"cf-aig-authorization": "Bearer sk-secret"}})
    with pytest.raises(SpecNotPortableError, match=r"plugins\[0\]"):
        AgentSpec("openai/gpt-4o-mini", plugins=(helpers.plugin,))
    with pytest.raises(TypeError, match="did you mean 'temperature'"):
        AgentSpec("openai/gpt-4o-mini", options={"temprature": 1})
    with pytest.raises(TypeError, match=r"tasks\[0\] is a str"):
        run_many(["not a task"])
    with pytest.raises(TypeError, match="session URL"):
        AgentTask(AgentSpec("openai/gpt-4o-mini"), "hi", session=Session.in_memory())


def test_an_executor_that_is_no_executor_is_refused_before_anything_runs():
    """``executor=4`` (max_workers meant) used to fail deep in the scheduler with AttributeError."""
    with pytest.raises(TypeError, match="executor must be a concurrent.futures.Executor .*, not int"):
        run_many([AgentTask(AgentSpec("openai/gpt-4o-mini"), "hi")], executor=4)


def test_a_spec_whose_system_prompt_is_no_text_is_refused_naming_the_field(server):
    """Tools given positionally land in ``system_prompt``: every task used to fail on the worker
    with the provider's "expected string or bytes-like object, got 'tuple'"."""
    with pytest.raises(TypeError, match=r"AgentSpec.system_prompt must be a str, not tuple \(tools go in tools="):
        AgentSpec(server.model(), ("many_add",))
    with pytest.raises(TypeError, match="AgentSpec.system_prompt must be a str, not int"):
        AgentSpec(server.model(), 5)
    assert AgentSpec(server.model(), None).system_prompt is None  # as an Agent takes it: no prompt


def test_an_empty_plugin_name_is_refused_as_empty():
    with pytest.raises(SpecNotPortableError, match="not an empty name") as info:
        AgentSpec("openai/gpt-4o-mini", plugins=("",))
    assert info.value.field == "plugins[0]" and "not a str" not in str(info.value)


def test_unknown_plugin_entry_point_fails_the_task_with_a_clear_error(server):
    spec = AgentSpec(server.model(), plugins=("no-such-plugin",))
    [result] = run_many([AgentTask(spec, "hi", id="x")], progress=False)
    assert isinstance(result.error, LookupError)
    assert "plugins[0]" in str(result.error) and "no-such-plugin" in str(result.error)


# --------------------------------------------------------------------------- threads


def test_a_scripted_model_runs_on_threads_and_pickles_as_a_reference():
    from agentcore.testing import ScriptedModel, text

    scripted = ScriptedModel([text("one"), text("two")])
    assert pickle.loads(pickle.dumps(scripted.model))._scripted is scripted
    spec = AgentSpec(scripted.model)
    results = list(run_many([AgentTask(spec, "a", id=1), AgentTask(spec, "b", id=2)], progress=False))
    assert sorted(r.messages[-1].text for r in results) == ["one", "two"]


def test_tasks_on_threads_run_in_the_callers_context():
    """A trace span (any contextvar) set around run_many did not reach the tasks on threads: each
    run's span had no parent and started a trace of its own, where prompt() carries the caller's
    context to its run. Later tasks are submitted from the scheduler's thread, so they count too."""
    import contextvars

    from agentcore.testing import ScriptedModel, text

    current = contextvars.ContextVar("current_span", default=None)
    seen: List[Any] = []

    def answer(context: Any) -> Any:
        seen.append(current.get())
        return text("ok")

    scripted = ScriptedModel([answer] * 4)
    token = current.set("batch-span")
    try:
        tasks = [AgentTask(AgentSpec(scripted.model), f"q{n}", id=n) for n in range(4)]
        results = list(run_many(tasks, executor=ThreadPoolExecutor(max_workers=1), progress=False))
    finally:
        current.reset(token)
    assert [r.ok for r in results] == [True] * 4
    assert seen == ["batch-span"] * 4


def test_thread_pool_runs_tasks_into_sqlite_sessions(spec, tmp_path):
    tasks = [add_task(spec, i, sqlite_url(tmp_path, i)) for i in range(12)]
    snapshots = []
    results = list(run_many(tasks, progress=snapshots.append))
    assert sorted(r.task.id for r in results) == list(range(12))
    assert all(r.error is None for r in results), [r.error for r in results if r.error]
    assert all(r.task is tasks[r.task.id] for r in results)  # the caller's own task objects
    assert results[0].usage.input == 200 and results[0].usage.output == 40
    assert results[0].messages[-1].text == f"result {results[0].task.id + 1000}"
    final = snapshots[-1]
    assert (final.total, final.done, final.failed, final.running, final.finished) == (12, 12, 0, 0, True)
    assert final.input_tokens == 12 * 200
    for i in range(12):
        with Session(SqliteSessionStorage(tmp_path / "sessions.db", f"task-{i}", read_only=True)) as session:
            assert_complete(session, i)


def test_a_failing_task_yields_its_error_and_the_others_go_on(spec, tmp_path):
    broken = AgentSpec("nobody/no-such-model")
    tasks = [
        add_task(spec, 0),
        AgentTask(broken, "hi", id="broken"),
        add_task(spec, 2),
        AgentTask(spec, "hi", session="ftp://host/x", id="bad-url"),
    ]
    results = {r.task.id: r for r in run_many(tasks, progress=False)}
    assert results[0].ok and results[2].ok
    assert isinstance(results["broken"].error, KeyError) and "no-such-model" in str(results["broken"].error)
    assert isinstance(results["bad-url"].error, ValueError) and "ftp" in str(results["bad-url"].error)
    for result in results.values():
        pickle.loads(pickle.dumps(result))  # errors included: a result always crosses processes


def test_an_error_that_cannot_travel_nor_be_printed_keeps_its_type():
    """An exception pickle refuses becomes a TaskError; one whose str() raised too escaped from
    run_task as that RuntimeError, and its own type was lost."""
    from agentcore._many_worker import _portable

    class BadStr(Exception):  # a local class: pickle cannot find it
        def __str__(self) -> str:
            raise RuntimeError("str() failed")

    error = _portable(BadStr())
    assert isinstance(error, TaskError) and error.kind == "BadStr"
    assert "could not be read" in error.message


def test_rerun_after_an_interrupted_attempt_branches_back(spec, tmp_path):
    """A worker that died mid-run leaves ``start`` without ``end``; the re-run resumes from before it."""
    url = f"jsonl:///{tmp_path / 's.jsonl'}"
    with Session.create(tmp_path / "s.jsonl") as session:
        session.append_custom("agentcore.run_many", {"event": "start", "task": 5, "attempt": 1})
        session.append_message(helpers_user('many_add {"a": 5, "b": 1000}'))
    [result] = run_many([add_task(spec, 5, url)], progress=False)
    assert result.ok, result.error
    with Session.open(tmp_path / "s.jsonl", read_only=True) as session:
        assert_complete(session, 5)
        assert branch_markers(session)[0]["attempt"] == 2
        assert len(session.entries()) > len(session.get_branch())  # the first attempt is kept


def test_rerun_of_a_finished_task_returns_its_recorded_result(spec, server, tmp_path):
    """Dask recomputes a task whose result was lost with its worker: no second conversation."""
    url = sqlite_url(tmp_path, 3)
    [first] = run_many([add_task(spec, 3, url)], progress=False)
    requests, db = server.requests, tmp_path / "sessions.db"
    with Session(SqliteSessionStorage(db, "task-3", read_only=True)) as session:
        entries = len(session.entries())
    [again] = run_many([add_task(spec, 3, url)], progress=False)
    assert again.ok and [m.role for m in again.messages] == [m.role for m in first.messages]
    assert again.messages[-1].text == "result 1003" and again.usage.input == first.usage.input
    assert server.requests == requests  # the model was not asked again
    with Session(SqliteSessionStorage(db, "task-3", read_only=True)) as session:
        assert len(session.entries()) == entries
        assert_complete(session, 3)
    [other] = run_many([AgentTask(spec, 'many_add {"a": 4, "b": 1000}', session=url, id=3)], progress=False)
    assert other.messages[-1].text == "result 1004"  # another prompt with that id runs


def test_rerun_after_a_failed_attempt_branches_back(spec, tmp_path):
    url = f"jsonl:///{tmp_path / 's.jsonl'}"
    with Session.create(tmp_path / "s.jsonl") as session:
        session.append_custom("agentcore.run_many", {"event": "start", "task": 5, "attempt": 1})
        session.append_message(helpers_user('many_add {"a": 5, "b": 1000}'))
        session.append_custom("agentcore.run_many", {"event": "end", "task": 5, "ok": False})
    [result] = run_many([add_task(spec, 5, url)], progress=False)
    with Session.open(tmp_path / "s.jsonl", read_only=True) as session:
        assert_complete(session, 5)


def conversation(context: Any) -> List[str]:
    """A model request's messages as ``role: text``."""
    return [f"{m.role}: {m.text}" for m in context.messages]


def open_sqlite(tmp_path: Path) -> Session:
    return Session(SqliteSessionStorage(tmp_path / "s.db", "S", read_only=True))


@pytest.mark.parametrize("ids", [(None, None), (1, 1), ("a", "b")], ids=["no ids", "same id", "other ids"])
def test_a_later_task_with_another_prompt_continues_the_session(tmp_path, ids):
    """A finished attempt is never rewound: the next task's model sees the earlier conversation."""
    from agentcore.testing import ScriptedModel, text

    scripted = ScriptedModel([text("ans1"), text("ans2")])
    spec, url = AgentSpec(scripted.model), f"sqlite:///{tmp_path / 's.db'}?session=S"
    [first] = run_many([AgentTask(spec, "step 1", session=url, id=ids[0])], progress=False)
    [second] = run_many([AgentTask(spec, "step 2", session=url, id=ids[1])], progress=False)
    assert first.ok and second.ok and [m.text for m in second.messages] == ["step 2", "ans2"]
    assert conversation(scripted.contexts[1]) == ["user: step 1", "assistant: ans1", "user: step 2"]
    with open_sqlite(tmp_path) as session:
        assert len(session.entries()) == len(session.get_branch())  # no abandoned branch
        assert [m["event"] for m in branch_markers(session)] == ["start", "end", "start", "end"]


def test_a_new_task_without_id_runs_its_prompt_again_into_the_session(tmp_path):
    """Only the submission itself is recognised: a new AgentTask with the same prompt is new work."""
    from agentcore.testing import ScriptedModel, text

    scripted = ScriptedModel([text("ans1"), text("ans2")])
    spec, url = AgentSpec(scripted.model), f"sqlite:///{tmp_path / 's.db'}?session=S"
    list(run_many([AgentTask(spec, "again", session=url)], progress=False))
    [second] = run_many([AgentTask(spec, "again", session=url)], progress=False)
    assert scripted.calls == 2 and second.messages[-1].text == "ans2"
    assert conversation(scripted.contexts[1]) == ["user: again", "assistant: ans1", "user: again"]


def test_the_same_submission_delivered_twice_runs_once(tmp_path):
    """What a scheduler does after losing a result: run the task's pickled copy again."""
    from agentcore._many_worker import run_task
    from agentcore.testing import ScriptedModel, text

    scripted = ScriptedModel([text("ans1"), text("ans2")])
    task = AgentTask(AgentSpec(scripted.model), "once", session=f"sqlite:///{tmp_path / 's.db'}?session=S")
    first = run_task(task)
    again = run_task(pickle.loads(pickle.dumps(task)))
    assert first.ok and again.ok and scripted.calls == 1
    assert [m.text for m in again.messages] == [m.text for m in first.messages] == ["once", "ans1"]
    with open_sqlite(tmp_path) as session:
        assert [m["event"] for m in branch_markers(session)] == ["start", "end"]


def test_an_interrupted_attempt_is_rewound_only_for_its_own_submission(tmp_path):
    from agentcore.testing import ScriptedModel, text

    scripted = ScriptedModel([text("ans1"), text("ans2")])
    spec = AgentSpec(scripted.model)
    mine, other = tmp_path / "mine.jsonl", tmp_path / "other.jsonl"
    task = AgentTask(spec, "go", session=f"jsonl:///{mine}")
    for path, token in ((mine, task._token), (other, "another-submission")):
        with Session.create(path) as session:  # a worker died after the prompt was recorded
            session.append_custom("agentcore.run_many", {"event": "start", "task": None, "token": token, "attempt": 1})
            session.append_message(helpers_user("go"))
    [rerun] = run_many([task], progress=False)
    assert rerun.ok and conversation(scripted.contexts[0]) == ["user: go"]  # from where attempt 1 began
    with Session.open(mine, read_only=True) as session:
        assert [(m["event"], m.get("attempt")) for m in branch_markers(session)] == [("start", 2), ("end", None)]
        assert len(session.entries()) > len(session.get_branch())  # attempt 1 is kept aside
    [new] = run_many([AgentTask(spec, "go", session=f"jsonl:///{other}")], progress=False)
    assert new.ok and conversation(scripted.contexts[1]) == ["user: go", "user: go"]  # after what is there
    with Session.open(other, read_only=True) as session:
        assert len(session.entries()) == len(session.get_branch())


def test_a_failed_task_run_again_later_does_not_rewind_past_another_task(tmp_path):
    """Only the last attempt on the branch is ever rewound: task 2's conversation stays in context."""
    from agentcore.testing import ScriptedModel, error, text

    scripted = ScriptedModel([error("overloaded"), text("two"), text("one")])
    spec, url = AgentSpec(scripted.model), f"sqlite:///{tmp_path / 's.db'}?session=S"
    [failed] = run_many([AgentTask(spec, "task 1", session=url, id=1)], progress=False)
    list(run_many([AgentTask(spec, "task 2", session=url, id=2)], progress=False))
    [retried] = run_many([AgentTask(spec, "task 1", session=url, id=1)], progress=False)
    assert not failed.ok and retried.ok and retried.messages[-1].text == "one"
    assert "assistant: two" in conversation(scripted.contexts[2])
    with open_sqlite(tmp_path) as session:
        assert len(session.entries()) == len(session.get_branch())


def describe(session: Session) -> str:
    return "; ".join(
        f"{e.type}:{getattr(e, 'custom_type', '')}{getattr(e, 'data', '') or ''}"
        f"{getattr(getattr(e, 'message', None), 'role', '')}/"
        f"{getattr(getattr(e, 'message', None), 'stop_reason', '')}"
        f"{getattr(getattr(e, 'message', None), 'error_message', '') or ''}"
        for e in session.entries()
    )


def helpers_user(text: str) -> Any:
    from agentcore import UserMessage

    return UserMessage(text, timestamp=0)


def test_keyboard_interrupt_aborts_running_thread_agents_and_cancels_the_rest(spec, server, tmp_path):
    helpers.STARTED.clear()
    helpers.RELEASE.clear()
    blocking = AgentSpec(**{**spec.__dict__, "tools": ("many_block",)})
    tasks = [AgentTask(blocking, 'many_block {"note": "x"}', session=sqlite_url(tmp_path, 0), id=0)]
    tasks += [add_task(spec, i, sqlite_url(tmp_path, i)) for i in range(1, 30)]

    snapshots = []

    def interrupt(snapshot):
        snapshots.append(snapshot)
        if helpers.STARTED.is_set() and not snapshot.finished:
            raise KeyboardInterrupt

    executor = ThreadPoolExecutor(max_workers=1)  # task 0 runs, the others wait behind it
    try:
        with pytest.raises(KeyboardInterrupt):
            for _ in run_many(tasks, executor=executor, progress=interrupt):
                pass
    finally:
        executor.shutdown(wait=True)
    assert not helpers.RELEASE.is_set()  # it ended because it was aborted, not released
    last = snapshots[-1]  # the final line said "0/30 done, 0 failed, 0 running" and nothing more
    assert last.finished and last.interrupted and last.pending == 30 - last.done - last.failed
    assert f"interrupted: {last.pending} not finished" in last.line()
    with Session(SqliteSessionStorage(tmp_path / "sessions.db", "task-0", read_only=True)) as session:
        messages = session.build_context().messages
        assert messages[-1].role == "assistant" and messages[-1].stop_reason == "aborted"
    listed = {info.id for info in SqliteSessionStorage.list_sessions(tmp_path / "sessions.db")}
    assert len(listed) <= 2  # the cancelled tasks never opened their sessions


def test_closing_the_iterator_cancels_what_has_not_started(spec, server):
    helpers.STARTED.clear()
    helpers.RELEASE.clear()
    blocking = AgentSpec(**{**spec.__dict__, "tools": ("many_block",)})
    tasks = [AgentTask(blocking, 'many_block {"note": "x"}', id="b")] + [add_task(spec, i) for i in range(20)]
    executor = ThreadPoolExecutor(max_workers=2)
    before = server.requests
    results = run_many(tasks, executor=executor, progress=False)
    first = next(results)  # one add task finished while many_block holds the other thread
    assert helpers.STARTED.wait(10)
    results.close()
    executor.shutdown(wait=True)
    assert first.ok
    assert server.requests - before < 2 * 20  # most tasks never ran


# --------------------------------------------------------------------------- processes


def test_process_pool_spawn_runs_tasks_into_jsonl_sessions(spec, tmp_path, worker_path):
    tasks = [add_task(spec, i, f"jsonl:///{tmp_path / f'{i}.jsonl'}") for i in range(8)]
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        results = list(run_many(tasks, executor=pool, progress=False))
    assert sorted(r.task.id for r in results) == list(range(8))
    assert all(r.ok for r in results), [r.error for r in results]
    for i in range(8):
        with Session.open(tmp_path / f"{i}.jsonl", read_only=True) as session:
            assert_complete(session, i)


def test_a_fork_started_process_pool_forks_before_run_many_starts_its_thread(spec, monkeypatch):
    """Python 3.12+ warns "DeprecationWarning: This process is multi-threaded, use of fork() may
    lead to deadlocks in the child" when a process forks with threads running: run_many started its
    scheduler thread before the first submission, at which a ``fork`` pool (Linux's default
    before Python 3.14) forks its workers. The forked child here exits at once: only the threads
    alive at the fork matter, and nothing runs in a copy of this multi-threaded test process."""
    seen: List[List[str]] = []

    def watched_fork() -> int:
        seen.append([t.name for t in threading.enumerate() if t.name.startswith("agentcore-many")])
        pid = _processes.fork()
        if pid == 0:
            os._exit(0)
        return pid

    monkeypatch.setattr(os, "fork", watched_fork)
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
        [result] = run_many([add_task(spec, 1)], executor=pool, progress=False)
    assert seen == [[]], "run_many's own thread was running when the pool forked its worker"
    assert result.error is not None  # the worker died at once: the pool broke, the task failed


def test_a_task_its_worker_process_cannot_unpickle_fails_alone_and_the_pool_goes_on(spec, tmp_path, worker_path):
    """What pickles here may not load in a spawned worker (a function defined under ``if __name__
    == "__main__":``, a scripted model): that task's error names the cause, where the process
    pool used to break and fail every task with BrokenProcessPool."""
    from agentcore.testing import ScriptedModel, text

    local_only = AgentSpec(ScriptedModel([text("never")]).model)  # loads only in this process
    tasks = [AgentTask(local_only, "hi", session=f"jsonl:///{tmp_path / 'x.jsonl'}", id="x")]
    tasks += [add_task(spec, i, f"jsonl:///{tmp_path / f'{i}.jsonl'}") for i in range(3)]
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        results = {r.task.id: r for r in run_many(tasks, executor=pool, progress=False)}
        [after] = run_many([add_task(spec, 3)], executor=pool, progress=False)  # the pool still works
    failed = results.pop("x")
    assert isinstance(failed.error, TaskError) and failed.error.kind == "LookupError"
    assert "cannot be unpickled in the worker" in str(failed.error) and "another process" in str(failed.error)
    assert "module level" not in str(failed.error)  # the scripted model's own message says what to do
    assert failed.task is tasks[0] and not (tmp_path / "x.jsonl").exists()
    assert all(r.ok for r in results.values()) and after.ok, [r.error for r in results.values()]
    for i in range(3):
        with Session.open(tmp_path / f"{i}.jsonl", read_only=True) as session:
            assert_complete(session, i)


def test_a_call_run_again_on_worker_processes_knows_its_finished_tasks_by_any_id(spec, server, tmp_path, worker_path):
    """An id is recorded as its repr, which for a user's object is an address: each worker used to
    record the address of its own unpickled copy, so the call run again did not know its finished
    tasks (its keys are this process's) and ran them into the session a second time."""
    url = f"jsonl:///{tmp_path / 's.jsonl'}"
    tasks = [AgentTask(spec, f'many_add {{"a": {i}, "b": 1000}}', session=url, id=helpers.Record()) for i in range(2)]
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        assert all(r.ok for r in run_many(tasks, executor=pool, progress=False))
        requests = server.requests
        with Session.open(tmp_path / "s.jsonl", read_only=True) as session:
            entries = len(session.entries())
        again = list(run_many(tasks, executor=pool, progress=False))
    assert all(r.ok for r in again) and [r.messages[-1].text for r in again] == ["result 1000", "result 1001"]
    assert server.requests == requests  # the model was not asked again
    with Session.open(tmp_path / "s.jsonl", read_only=True) as session:
        assert len(session.entries()) == entries


def test_process_pool_close_cancels_queued_tasks(spec, server, tmp_path, worker_path):
    gate = tmp_path / "gate"
    waiting = AgentSpec(**{**spec.__dict__, "tools": ("many_wait",)})
    tasks = [AgentTask(waiting, f'many_wait {{"path": "{gate}"}}', id="w")]
    tasks += [add_task(spec, i, f"jsonl:///{tmp_path / f'{i}.jsonl'}") for i in range(12)]
    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    try:
        results = run_many(tasks, executor=pool, progress=False)
        _wait_for_file(Path(str(gate) + ".started"))
        results.close()  # returns with the gate still shut: it does not wait for the running task
    finally:
        gate.touch()
        pool.shutdown(wait=True)
    ran = [i for i in range(12) if (tmp_path / f"{i}.jsonl").exists()]
    assert len(ran) <= 2  # the pool's call queue may hold one or two beyond the running task


def _wait_for_file(path: Path, timeout: float = 60.0) -> None:
    """Another process creates ``path``: poll for it (no cross-process event without setup)."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


# --------------------------------------------------------------------------- Dask


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip(
        "distributed", reason="dask[distributed] is not installed (pip install pyagentcore[dask])"
    )
    paths = [str(ROOT), helpers.TESTS_DIR] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)
    try:
        cluster = distributed.LocalCluster(
            n_workers=2, threads_per_worker=4, processes=True, dashboard_address=None, silence_logs=40
        )
        client = distributed.Client(cluster)
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old
    try:
        yield client
    finally:
        client.close()
        cluster.close()


def test_dask_cluster_runs_many_tasks_into_sqlite_sessions(spec, tmp_path, dask_client):
    pids = set(dask_client.run(os.getpid).values())
    assert len(pids) == 2 and os.getpid() not in pids  # two real worker processes
    n = 200  # the proof; tools by import path: no per-agent plugin manager, so it stays fast
    light = AgentSpec(spec.model, tools=("_many_helpers:many_add",), get_api_key=helpers.api_key)
    tasks = [add_task(light, i, sqlite_url(tmp_path, i)) for i in range(n)]
    results = list(run_many(tasks, executor=dask_client.get_executor(), progress=False))
    assert sorted(r.task.id for r in results) == list(range(n))
    assert all(r.ok for r in results), [r.error for r in results if r.error][:3]
    for i in range(n):
        with Session(SqliteSessionStorage(tmp_path / "sessions.db", f"task-{i}", read_only=True)) as session:
            assert_complete(session, i)


def test_a_result_that_cannot_travel_back_is_that_tasks_error(spec, tmp_path, dask_client):
    """A tool result holding something pickle refuses: Dask failed to send the TaskResult back,
    the future never completed and run_many waited for good, losing a healthy task fetched with
    it. The worker now pickles the result itself; one that cannot travel is that task's error,
    its messages being in its session."""
    light = AgentSpec(
        spec.model, tools=("_many_helpers:many_add", "_many_helpers:many_unpicklable"), get_api_key=helpers.api_key
    )
    bad = AgentTask(light, "many_unpicklable {}", session=sqlite_url(tmp_path, 99), id=99)
    tasks = [bad] + [add_task(light, i) for i in range(3)]
    results: List[Any] = []
    done = threading.Event()

    def consume() -> None:
        results.extend(run_many(tasks, executor=dask_client.get_executor(), progress=False))
        done.set()

    threading.Thread(target=consume, daemon=True).start()
    assert done.wait(120), "run_many never finished"
    by_id = {r.task.id: r for r in results}
    assert sorted(by_id) == [0, 1, 2, 99]
    assert all(by_id[i].ok for i in range(3)), [by_id[i].error for i in range(3)]
    assert "cannot be pickled to return it" in str(by_id[99].error) and by_id[99].messages == []
    with Session(SqliteSessionStorage(tmp_path / "sessions.db", "task-99", read_only=True)) as session:
        roles = [m.role for m in session.build_context().messages]
    assert roles == ["user", "assistant", "toolResult", "assistant"]


def test_dask_worker_killed_mid_run_reruns_its_tasks_and_corrupts_no_session(spec, tmp_path, dask_client):
    gate = tmp_path / "gate"
    waiting = AgentSpec(**{**spec.__dict__, "tools": ("many_wait",)})
    tasks = [AgentTask(waiting, f'many_wait {{"path": "{gate}"}}', session=sqlite_url(tmp_path, -1), id=-1)]
    tasks += [add_task(spec, i, sqlite_url(tmp_path, i)) for i in range(30)]
    results = run_many(tasks, executor=dask_client.get_executor(), progress=False)
    collected: List[TaskResult] = []
    started = Path(str(gate) + ".started")
    _wait_for_file(started)
    victim = int(started.read_text())
    os.kill(victim, signal.SIGKILL)
    gate.touch()  # the re-run (on the other worker or a restarted one) goes through
    collected += list(results)
    assert sorted(r.task.id for r in collected) == list(range(-1, 30))  # nothing silently lost
    by_id = {r.task.id: r for r in collected}
    assert by_id[-1].ok or by_id[-1].error is not None
    for r in collected:
        assert r.ok or r.error is not None
    for i in range(30):
        with Session(SqliteSessionStorage(tmp_path / "sessions.db", f"task-{i}", read_only=True)) as session:
            if by_id[i].ok:
                try:
                    assert_complete(session, i)
                except AssertionError:
                    raise AssertionError(describe(session)) from None
            else:
                session.build_context()  # failed: still a valid, reopenable session
    with Session(SqliteSessionStorage(tmp_path / "sessions.db", "task--1", read_only=True)) as session:
        markers = branch_markers(session)
        if by_id[-1].ok:  # re-run: its branch is one attempt, number 2; attempt 1 is kept aside
            assert [m["event"] for m in markers] == ["start", "end"] and markers[0]["attempt"] == 2
            assert session.build_context().messages[-1].text == "result released"


def test_an_entry_point_plugin_is_named_and_costs_no_manager_of_its_own(server):
    from agentcore import _plugin_loading

    names = [rec.name for rec in _plugin_loading.load_entry_points() if rec.obj is not None]
    if "web" not in names:
        pytest.skip("the agentcore-web plugin (plugins/agentcore-web) is not installed")
    agent = AgentSpec(server.model(), plugins=("web",)).build()
    assert agent._plugins._own is None  # the shared manager, which has every entry point already


def test_dask_close_cancels_tasks_that_have_not_started(spec, tmp_path, dask_client):
    waiting = AgentSpec(**{**spec.__dict__, "tools": ("many_wait",)})
    gates = [tmp_path / f"gate{i}" for i in range(40)]
    tasks = [AgentTask(waiting, f'many_wait {{"path": "{gate}"}}', id=i) for i, gate in enumerate(gates)]
    results = run_many(tasks, executor=dask_client.get_executor(), progress=False)
    while not any(Path(str(g) + ".started").exists() for g in gates):
        time.sleep(0.02)  # a worker process reports through the file system
    results.close()  # with every gate shut: close does not wait for the running tasks
    # Dask's cancel is a message the scheduler, then each worker, handles later; opening the gates
    # before it arrived would let a freed worker thread start a queued task. Wait for both.
    deadline = time.monotonic() + 30
    while dask_client.run_on_scheduler(_scheduler_task_count) or any(dask_client.run(_worker_queued).values()):
        assert time.monotonic() < deadline, "the cluster did not drop the cancelled tasks"
        time.sleep(0.05)
    for gate in gates:
        gate.touch()
    started = [g for g in gates if Path(str(g) + ".started").exists()]
    assert 1 <= len(started) <= 8  # at most one per worker thread (2 x 4) ran past close, not all 40


def _scheduler_task_count(dask_scheduler) -> int:
    """Tasks the scheduler still means to run (a cancelled one is released and forgotten)."""
    return sum(ts.state in ("waiting", "queued", "no-worker", "processing") for ts in dask_scheduler.tasks.values())


def _worker_queued(dask_worker) -> int:
    """Tasks a worker holds and could still start (one it runs is "executing", then "cancelled")."""
    return sum(ts.state in ("waiting", "ready", "constrained") for ts in dask_worker.state.tasks.values())


# --------------------------------------------------------------------------- one session, one call


def free_and_chained(tmp_path: Path, spec: AgentSpec) -> List[AgentTask]:
    """Three steps on one JSONL session, interleaved with two tasks without a session."""
    url = f"jsonl:///{tmp_path / 's.jsonl'}"
    return [
        AgentTask(spec, "step 1", session=url, id=1),
        AgentTask(spec, "free 1", id="f1"),
        AgentTask(spec, "step 2", session=url, id=2),
        AgentTask(spec, "free 2", id="f2"),
        AgentTask(spec, "step 3", session=url, id=3),
    ]


def test_tasks_on_one_session_run_in_the_order_given_beside_the_others(tmp_path):
    """docs/many.rst "Sessions carry on": a later task of the same call sees the earlier conversation."""
    from agentcore.testing import ScriptedModel, text

    meet = threading.Barrier(3)  # step 1 and both free tasks get past it only by running at once

    def answer(context: Any) -> Any:
        prompt = context.messages[-1].text
        if prompt in ("step 1", "free 1", "free 2"):
            meet.wait(10)
        return text(f"ans {prompt}")

    scripted = ScriptedModel([answer] * 5)
    tasks = free_and_chained(tmp_path, AgentSpec(scripted.model))
    snapshots: List[Any] = []
    results = list(run_many(tasks, progress=snapshots.append))
    assert all(r.ok for r in results), [r.error for r in results if r.error]
    assert [r.task.id for r in results if r.task.session] == [1, 2, 3]
    steps = ["user: step 1", "assistant: ans step 1", "user: step 2", "assistant: ans step 2", "user: step 3"]
    assert [conversation(c) for c in scripted.contexts if "step" in conversation(c)[-1]] == [
        steps[:1],
        steps[:3],
        steps,
    ]
    with Session.open(tmp_path / "s.jsonl", read_only=True) as session:
        assert conversation(session.build_context()) == steps + ["assistant: ans step 3"]
        assert [(m["event"], m["task"]) for m in branch_markers(session)] == [
            (event, n) for n in (1, 2, 3) for event in ("start", "end")
        ]
        assert len(session.entries()) == len(session.get_branch())
    assert all(s.pending >= 0 and s.running <= 3 for s in snapshots)  # one step at a time, plus two
    final = snapshots[-1]
    assert (final.done, final.failed, final.running, final.pending, final.finished) == (5, 0, 0, 0, True)


def test_tasks_on_memory_sessions_run_side_by_side_each_on_a_session_of_its_own():
    """``memory:`` opens a new session each time: tasks naming it share nothing, so they run at
    once (they used to run one after another, as steps of one conversation they never were)."""
    from agentcore.testing import ScriptedModel, text

    meet = threading.Barrier(3)  # passed only by the three tasks at the model at once

    def answer(context: Any) -> Any:
        meet.wait(10)
        return text(f"ans {context.messages[-1].text}")

    scripted = ScriptedModel([answer] * 3)
    spec = AgentSpec(scripted.model)
    urls = ("memory:", "memory:?session=m", "memory:")
    tasks = [AgentTask(spec, f"p{n}", session=url, id=n) for n, url in enumerate(urls, 1)]
    results = {r.task.id: r for r in run_many(tasks, progress=False)}
    assert all(r.ok for r in results.values()), [r.error for r in results.values()]
    assert sorted(conversation(c)[0] for c in scripted.contexts) == ["user: p1", "user: p2", "user: p3"]
    assert all(len(c.messages) == 1 for c in scripted.contexts)  # nobody saw another's conversation


def test_running_the_same_call_again_skips_finished_steps_and_redoes_from_a_failed_one(tmp_path):
    from agentcore.testing import ScriptedModel, error, text

    scripted = ScriptedModel([text("ans 1"), error("overloaded"), text("ans 3")])
    spec, url = AgentSpec(scripted.model), f"sqlite:///{tmp_path / 's.db'}?session=S"

    def the_call() -> Dict[Any, TaskResult]:
        tasks = [AgentTask(spec, f"step {n}", session=url, id=n) for n in (1, 2, 3)]
        return {r.task.id: r for r in run_many(tasks, progress=False)}

    first = the_call()
    assert first[1].ok and not first[2].ok and first[3].ok
    scripted.push(text("ans 2"), text("ans 3 again"))
    again = the_call()
    assert all(r.ok for r in again.values()) and scripted.calls == 5  # step 1 was not run again
    assert [m.text for m in again[1].messages] == ["step 1", "ans 1"]  # its recorded result
    steps = ["user: step 1", "assistant: ans 1", "user: step 2", "assistant: ans 2"]
    with open_sqlite(tmp_path) as session:
        assert conversation(session.build_context()) == steps + ["user: step 3", "assistant: ans 3 again"]
        assert [(m["event"], m["task"], m.get("attempt")) for m in branch_markers(session)] == [
            ("start", 1, 1),
            ("end", 1, None),
            ("start", 2, 2),  # rewound to where its failed attempt began
            ("end", 2, None),
            ("start", 3, 1),  # after the new step 2: the first step 3 is aside with the failed step 2
            ("end", 3, None),
        ]
        entries = len(session.entries())
        assert entries > len(session.get_branch())
    third = the_call()
    assert all(r.ok for r in third.values()) and scripted.calls == 5  # all finished: nothing runs
    assert third[3].messages[-1].text == "ans 3 again"
    with open_sqlite(tmp_path) as session:
        assert len(session.entries()) == entries


def test_the_next_task_on_a_session_starts_while_the_consumer_holds_the_result_before_it(tmp_path):
    """docs/many.rst "Sessions carry on": a chain goes on at the pace of its tasks, not of the loop
    consuming the results."""
    from agentcore.testing import ScriptedModel, text

    release = threading.Event()  # what the consumer waits for after its first result: step 2's start

    def step_2(context: Any) -> Any:
        release.set()
        return text("ans 2")

    scripted = ScriptedModel([text("ans 1"), step_2])
    spec, url = AgentSpec(scripted.model), f"jsonl:///{tmp_path / 's.jsonl'}"
    before = set(threading.enumerate())
    results = run_many([AgentTask(spec, f"step {n}", session=url, id=n) for n in (1, 2)], progress=False)
    first = next(results)
    assert first.task.id == 1 and first.ok
    assert release.wait(10), "step 2 waited for the consumer to ask for the next result"
    [second] = list(results)
    assert second.task.id == 2 and second.ok
    assert conversation(scripted.contexts[1]) == ["user: step 1", "assistant: ans 1", "user: step 2"]
    assert not [t.name for t in set(threading.enumerate()) - before if t.name.startswith("agentcore-many")]


def test_two_sessions_go_on_side_by_side_while_the_consumer_holds_a_result(tmp_path):
    from agentcore.testing import ScriptedModel, text

    meet = threading.Barrier(3)  # both second steps and the consumer: passed only by all three at once

    def answer(context: Any) -> Any:
        prompt = context.messages[-1].text
        if prompt.endswith(" 2"):
            meet.wait(10)
        return text(f"ans {prompt}")

    scripted = ScriptedModel([answer] * 4)
    spec = AgentSpec(scripted.model)
    tasks = [
        AgentTask(spec, f"{s} {n}", session=f"jsonl:///{tmp_path / s}.jsonl", id=f"{s}{n}")
        for n in (1, 2)
        for s in "ab"
    ]
    results = run_many(tasks, progress=False)
    first = next(results)
    meet.wait(10)  # BrokenBarrierError unless both sessions went on while the consumer held `first`
    collected = [first] + list(results)
    assert all(r.ok for r in collected), [r.error for r in collected if r.error]
    assert [r.task.id for r in collected if r.task.id[0] == "a"] == ["a1", "a2"]
    assert [r.task.id for r in collected if r.task.id[0] == "b"] == ["b1", "b2"]
    for s in "ab":
        with Session.open(tmp_path / f"{s}.jsonl", read_only=True) as session:
            assert conversation(session.build_context()) == [
                f"user: {s} 1",
                f"assistant: ans {s} 1",
                f"user: {s} 2",
                f"assistant: ans {s} 2",
            ]


@pytest.mark.parametrize("where", ["process pool", "dask"])
def test_the_next_task_on_a_session_starts_on_worker_processes_while_the_consumer_holds_a_result(
    spec, tmp_path, worker_path, request, where
):
    gate, url = tmp_path / "gate", f"jsonl:///{tmp_path / 's.jsonl'}"
    waiting = AgentSpec(**{**spec.__dict__, "tools": ("many_wait",)})
    tasks = [add_task(spec, 0, url), AgentTask(waiting, f'many_wait {{"path": "{gate}"}}', session=url, id=1)]

    def consume(executor: Any) -> List[TaskResult]:
        results = run_many(tasks, executor=executor, progress=False)
        try:
            first = next(results)
            _wait_for_file(Path(str(gate) + ".started"), timeout=30)  # task 1 runs while we hold task 0's result
        finally:
            gate.touch()
        return [first] + list(results)

    if where == "dask":
        collected = consume(request.getfixturevalue("dask_client").get_executor())
    else:
        with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
            collected = consume(pool)
    assert [(r.task.id, r.ok) for r in collected] == [(0, True), (1, True)], [r.error for r in collected]
    assert collected[1].messages[-1].text == "result released"


@pytest.mark.parametrize("stop", ["close", "ctrl-c"])
def test_stopping_after_a_result_aborts_the_next_task_on_its_session_and_never_starts_the_rest(tmp_path, stop):
    """The task after a finished one has started by the time its predecessor's result is yielded:
    stopping then aborts it like any running task (on threads); the task after it never starts."""
    from agentcore.testing import ScriptedModel, text, tool_call

    helpers.STARTED.clear()
    helpers.RELEASE.clear()
    scripted = ScriptedModel([text("ans 1"), tool_call("many_block", {"note": "step 2"}), text("ans 3")])
    spec, url = AgentSpec(scripted.model, tools=("_many_helpers:many_block",)), f"jsonl:///{tmp_path / 's.jsonl'}"
    tasks = [AgentTask(spec, f"step {n}", session=url, id=n) for n in (1, 2, 3)]
    snapshots: List[Any] = []

    def progress(snapshot: Any) -> None:
        snapshots.append(snapshot)
        if stop == "ctrl-c" and helpers.STARTED.is_set() and not snapshot.finished:
            raise KeyboardInterrupt

    if stop == "close":
        results = run_many(tasks, progress=progress)
        first = next(results)
        assert helpers.STARTED.wait(10)  # step 2 is in its tool while the consumer holds step 1
        results.close()
        assert first.task is tasks[0] and first.ok
    else:
        with pytest.raises(KeyboardInterrupt):
            list(run_many(tasks, progress=progress))
    assert not helpers.RELEASE.is_set() and scripted.remaining == 1  # step 3 never reached the model
    final = snapshots[-1]
    assert (final.done, final.failed, final.running, final.pending) == (1, 0, 0, 2)
    assert final.finished and final.interrupted
    with Session.open(tmp_path / "s.jsonl", read_only=True) as session:
        assert [(m["event"], m["task"], m.get("ok")) for m in branch_markers(session)] == [
            ("start", 1, None),
            ("end", 1, True),
            ("start", 2, None),
            ("end", 2, False),
        ]
        assert session.build_context().messages[-1].stop_reason == "aborted"


def test_what_fails_between_a_task_and_its_result_is_that_task_s_error_and_the_session_goes_on(tmp_path, monkeypatch):
    """Completions are handled on run_many's own thread: an exception there becomes the task's
    error (it neither vanishes nor hangs the iterator) and the next task on the session runs."""
    from agentcore import many
    from agentcore.testing import ScriptedModel, text

    real = many._result_of

    def lossy(future: Any, task: AgentTask) -> TaskResult:
        if task.id == 1:
            raise RuntimeError("lost on the way")
        return real(future, task)

    monkeypatch.setattr(many, "_result_of", lossy)
    scripted = ScriptedModel([text("ans 1"), text("ans 2")])
    spec, url = AgentSpec(scripted.model), f"jsonl:///{tmp_path / 's.jsonl'}"
    results = list(run_many([AgentTask(spec, f"step {n}", session=url, id=n) for n in (1, 2)], progress=False))
    assert [(r.task.id, r.ok) for r in results] == [(1, False), (2, True)]
    assert isinstance(results[0].error, RuntimeError) and "lost on the way" in str(results[0].error)


def test_a_progress_callback_that_raises_stops_the_call_with_its_exception(tmp_path):
    from agentcore.testing import ScriptedModel, text

    scripted = ScriptedModel([text("ans 1"), text("ans 2"), text("ans 3")])
    spec, url = AgentSpec(scripted.model), f"jsonl:///{tmp_path / 's.jsonl'}"
    tasks = [AgentTask(spec, f"step {n}", session=url, id=n) for n in (1, 2, 3)]

    def progress(snapshot: Any) -> None:
        if snapshot.done and not snapshot.finished:
            raise ValueError("the display broke")

    before = set(threading.enumerate())
    with pytest.raises(ValueError, match="the display broke"):
        list(run_many(tasks, progress=progress))
    assert not [t.name for t in set(threading.enumerate()) - before if t.name.startswith("agentcore-many")]


class _Screen:
    """A terminal stand-in for ``sys.stderr``: what was written, and a condition to wait on it."""

    def __init__(self) -> None:
        self.text = ""
        self.changed = threading.Condition()

    def isatty(self) -> bool:
        return True

    def write(self, data: str) -> int:
        with self.changed:
            self.text += data
            self.changed.notify_all()
        return len(data)

    def flush(self) -> None:
        pass

    def shows(self, words: str, within: float = 10.0) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: words in self.text.rsplit("\r", 1)[-1], within)


def test_the_progress_line_moves_while_the_consumer_holds_a_result(monkeypatch):
    from agentcore.testing import ScriptedModel, text

    release = threading.Event()

    def answer(context: Any) -> Any:
        if context.messages[-1].text == "slow":
            release.wait(10)
        return text("ok")

    screen = _Screen()
    monkeypatch.setattr(sys, "stderr", screen)
    scripted = ScriptedModel([answer, answer])
    tasks = [AgentTask(AgentSpec(scripted.model), prompt, id=prompt) for prompt in ("fast", "slow")]
    results = run_many(tasks)  # progress=None: the line, since "stderr" is a terminal
    assert screen.shows("0/2 done") or screen.shows("1/2 done")  # drawn from the call itself
    first = next(results)
    assert first.task.id == "fast"
    release.set()
    # the consumer is busy with its first result: the line still reaches the second task's end
    assert screen.shows("2/2 done, 0 failed, 0 running"), screen.text[-200:]
    assert [r.task.id for r in results] == ["slow"]
    assert screen.text.endswith("\n") and screen.text.count("\n") == 1  # nothing after the final line
    assert "agentcore-many-progress" not in [t.name for t in threading.enumerate()]


def test_a_progress_line_whose_stream_breaks_stops_the_call_with_its_error(monkeypatch):
    from agentcore.testing import ScriptedModel, text

    class Broken(_Screen):
        def write(self, data: str) -> int:
            if "1/2" in data or "2/2" in data:
                raise OSError("the terminal went away")
            return super().write(data)

    monkeypatch.setattr(sys, "stderr", Broken())
    scripted = ScriptedModel([text("a"), text("b")])
    tasks = [AgentTask(AgentSpec(scripted.model), f"p{n}", id=n) for n in (1, 2)]
    with pytest.raises(OSError, match="the terminal went away"):
        list(run_many(tasks, progress=True))
    assert not [t.name for t in threading.enumerate() if t.name.startswith("agentcore-many")]


class _RefusingPool(ThreadPoolExecutor):
    """Refuses every submission after the first (as a broken process pool does)."""

    def __init__(self) -> None:
        super().__init__(max_workers=1)
        self.submitted = 0

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        self.submitted += 1
        if self.submitted > 1:
            raise RuntimeError("the pool is broken")
        return super().submit(fn, *args, **kwargs)


def test_a_next_task_the_executor_refuses_fails_and_so_do_the_ones_after_it(tmp_path):
    from agentcore.testing import ScriptedModel, text

    scripted = ScriptedModel([text("ans 1")])
    spec, url = AgentSpec(scripted.model), f"jsonl:///{tmp_path / 's.jsonl'}"
    tasks = [AgentTask(spec, f"step {n}", session=url, id=n) for n in (1, 2, 3)]
    with _RefusingPool() as pool:
        results = list(run_many(tasks, executor=pool, progress=False))
    assert [(r.task.id, r.ok) for r in results] == [(1, True), (2, False), (3, False)]
    assert all(isinstance(r.error, RuntimeError) and "broken" in str(r.error) for r in results[1:])


@pytest.mark.parametrize("where", ["process pool", "dask"])
def test_tasks_on_one_session_run_in_order_on_worker_processes(spec, tmp_path, worker_path, request, where):
    jsonl, sqlite = f"jsonl:///{tmp_path / 's.jsonl'}", f"sqlite:///{tmp_path / 's.db'}?session=S"
    tasks = [add_task(spec, i, jsonl if i < 3 else sqlite) for i in (0, 3, 1, 4, 2, 5)]
    if where == "dask":
        results = list(run_many(tasks, executor=request.getfixturevalue("dask_client").get_executor(), progress=False))
    else:
        with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
            results = list(run_many(tasks, executor=pool, progress=False))
    assert all(r.ok for r in results), [r.error for r in results if r.error]
    jsonl_session = Session.open(tmp_path / "s.jsonl", read_only=True)
    sqlite_session = Session(SqliteSessionStorage(tmp_path / "s.db", "S", read_only=True))
    for session, ids in ((jsonl_session, [0, 1, 2]), (sqlite_session, [3, 4, 5])):
        with session:
            answers = [m.text for m in session.build_context().messages if m.role == "assistant" and m.text]
            assert answers == [f"result {i + 1000}" for i in ids]
            assert [m["task"] for m in branch_markers(session)] == [i for i in ids for _ in range(2)]
            assert len(session.entries()) == len(session.get_branch())


# --------------------------------------------------------------------------- progress


def test_progress_true_without_a_stderr_runs_the_tasks_without_a_line(monkeypatch):
    """``sys.stderr is None`` (pythonw, a service): the forced line used to write to None, which
    raised AttributeError from the first draw and aborted the whole call."""
    from agentcore.testing import ScriptedModel, text

    monkeypatch.setattr(sys, "stderr", None)
    scripted = ScriptedModel([text("a"), text("b")])
    tasks = [AgentTask(AgentSpec(scripted.model), f"p{n}", id=n) for n in (1, 2)]
    assert sorted(r.task.id for r in run_many(tasks, progress=True) if r.ok) == [1, 2]


def test_progress_choices_and_the_terminal_line(monkeypatch):
    import io

    from agentcore._many_progress import ManyProgress, _TerminalLine, make_reporter

    assert make_reporter(False) is None
    assert make_reporter(print) is print
    with pytest.raises(TypeError, match="progress must be"):
        make_reporter("yes")
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # not a terminal: no line by default
    assert make_reporter(None) is None
    assert isinstance(make_reporter(True), _TerminalLine)
    out = io.StringIO()
    line = _TerminalLine(out)
    snapshot = ManyProgress(
        total=200, done=37, failed=1, running=8, input_tokens=10_000, output_tokens=2_300, cost=0.0412, elapsed=9.2
    )
    line(snapshot)
    line(ManyProgress(200, 199, 1, 0, 10_000, 2_300, 0.05, 20.0, finished=True))
    text = out.getvalue()
    assert "37/200 done, 1 failed, 8 running | 12.3k tokens $0.0412 | 4.1 tasks/s" in text
    assert text.endswith("0 running | 12.3k tokens $0.0500 | 10.0 tasks/s | 20s\n")
    assert "<progress" in snapshot._repr_html_() and snapshot.pending == 154


def test_progress_in_a_jupyter_kernel_updates_one_display(monkeypatch):
    from agentcore import _many_progress

    shown: List[Any] = []

    class Handle:
        def update(self, obj):
            shown.append(("update", obj))

    def display(obj, display_id=False):
        shown.append(("display", obj))
        return Handle()

    fake_display = type(sys)("IPython.display")
    fake_display.display = display
    monkeypatch.setitem(sys.modules, "IPython.display", fake_display)
    monkeypatch.setattr(_many_progress, "_in_kernel", lambda: True)
    report = _many_progress.make_reporter(None)
    report(_many_progress.ManyProgress(2, 0, 0, 2, 0, 0, 0.0, 0.1))
    report(_many_progress.ManyProgress(2, 2, 0, 0, 0, 0, 0.0, 0.2, finished=True))
    assert [kind for kind, _ in shown] == ["display", "update"] and shown[-1][1].finished


def test_a_thread_task_after_cancel_returns_aborted_without_running(spec, server):
    from agentcore._many_worker import LocalRuns, run_task

    local = LocalRuns()
    local.abort_all()
    before = server.requests
    result = run_task(add_task(spec, 1), local)
    assert isinstance(result.error, TaskAborted) and server.requests == before


def test_a_cancel_between_start_and_prompt_still_aborts_the_run(tmp_path, monkeypatch):
    """Cancelling while a task had registered its agent but not yet prompted it (its session
    writing the start marker: an fsync, a network database) aborted an idle agent, a no-op: the
    task then ran to the end after run_many was closed, and close() waited for it."""
    from agentcore._many_worker import MARKER, LocalRuns, run_task
    from agentcore.testing import ScriptedModel

    scripted = ScriptedModel(["never sent"])
    local = LocalRuns()
    write = Session.append_custom

    def cancelled_meanwhile(self: Session, custom_type: str, data: Any = None) -> str:
        if custom_type == MARKER and data.get("event") == "start":
            local.abort_all()  # run_many is closed while the marker is being written
        return write(self, custom_type, data)

    monkeypatch.setattr(Session, "append_custom", cancelled_meanwhile)
    task = AgentTask(AgentSpec(scripted.model), "talk", session=f"jsonl://{tmp_path}/a.jsonl", id=1)
    result = run_task(task, local)
    assert result.messages and result.messages[-1].stop_reason == "aborted"
    assert scripted.calls == 0  # no request was made
    with Session.open(tmp_path / "a.jsonl", read_only=True) as session:
        assert session.build_context().messages[-1].stop_reason == "aborted"


# --------------------------------------------------------------------------- what a task cost


SUMMARY_USAGE = (1000, 100, 0.5)  # input, output, cost of one summary request
ANSWER_USAGE = (10, 5, 0.01)


def priced(figures: Any) -> Any:
    from agentcore import Usage, UsageCost

    inp, out, cost = figures
    return Usage(inp, out, 0, 0, inp + out, UsageCost(input=cost / 2, output=cost / 2, total=cost))


def compacting_task(tmp_path: Path, summary: str) -> AgentTask:
    """A task on a session whose history is over the compaction threshold of its model's window:
    its run compacts before its first request (the default ``CompactionSettings``). Summary
    requests answer ``summary`` (blank: the compaction fails, billed all the same)."""
    import uuid

    from agentcore import AssistantMessage, TextContent, UserMessage
    from agentcore.session.compaction_prompts import SUMMARIZER_SYSTEM_PROMPT
    from agentcore.testing import ScriptedModel, text

    path = tmp_path / "s.jsonl"
    with Session.create(path) as session:
        for i in range(4):  # ~40k tokens: over 40000 - reserve_tokens, more than keep_recent_tokens
            session.append_message(UserMessage(f"q{i} " + "q" * 40000))
            session.append_message(
                AssistantMessage([TextContent(f"a{i} " + "a" * 40000)], api="scripted", provider="scripted", model="m")
            )

    def answer(context: Any) -> Any:
        if context.system_prompt == SUMMARIZER_SYSTEM_PROMPT:
            return text(summary, usage=priced(SUMMARY_USAGE))
        return text("done", usage=priced(ANSWER_USAGE))

    model = Model(id=f"small-{uuid.uuid4().hex}", api="scripted", provider="scripted", context_window=40000)
    scripted = ScriptedModel([answer] * 4, model=model)
    return AgentTask(AgentSpec(scripted.model), "next", session=f"jsonl://{path}", id="compacting")


def figures(usage: Any) -> Any:
    return (usage.input, usage.output, usage.cost.total)


@pytest.mark.parametrize("outcome", ["compacted", "failed"])
def test_a_task_s_usage_includes_its_compaction_summaries(tmp_path, outcome):
    """docs/many.rst "What a task cost": the summary requests of a compaction (a failed one's too)
    are billed calls of the task."""
    task = compacting_task(tmp_path, "## Goal\nsummary" if outcome == "compacted" else "   ")
    snapshots: List[Any] = []
    [result] = list(run_many([task], progress=snapshots.append))
    assert result.ok, result.error
    with Session.open(tmp_path / "s.jsonl", read_only=True) as session:
        compactions = [e for e in session.get_branch() if e.type == "compaction"]
    assert len(compactions) == (1 if outcome == "compacted" else 0)
    (inp, out, cost), answer = SUMMARY_USAGE, ANSWER_USAGE  # one summary request: the failed one was answered
    assert figures(result.usage) == pytest.approx((answer[0] + inp, answer[1] + out, answer[2] + cost))
    assert figures(result.summary_usage) == pytest.approx(SUMMARY_USAGE)
    final = snapshots[-1]
    assert (final.input_tokens, final.output_tokens) == (result.usage.input, result.usage.output)
    assert final.cost == pytest.approx(result.usage.cost.total)


def test_a_recorded_result_includes_the_summaries_stored_in_its_attempt(tmp_path):
    task = compacting_task(tmp_path, "## Goal\nsummary")
    [first] = list(run_many([task], progress=False))
    [again] = list(run_many([task], progress=False))  # finished: its recorded result, nothing runs
    assert task.spec.model._scripted.calls == 2  # the summary and the answer, once
    assert [m.text for m in again.messages] == [m.text for m in first.messages]
    assert figures(again.usage) == pytest.approx(figures(first.usage))
    assert figures(again.summary_usage) == pytest.approx(figures(first.summary_usage)) == SUMMARY_USAGE


def test_a_result_from_a_worker_without_summary_usage_still_reads():
    from agentcore import Usage

    result = TaskResult("task", usage=priced(ANSWER_USAGE))
    del result.summary_usage  # what an older worker pickles
    back = pickle.loads(pickle.dumps(result))
    assert back.summary_usage == Usage() and figures(back.usage) == pytest.approx(ANSWER_USAGE)


# --------------------------------------------------------------------------- progress counts completion


class _RecordingPool(ThreadPoolExecutor):
    """A thread pool that keeps the futures it returns (``futures``, in submission order)."""

    def __init__(self, workers: int) -> None:
        super().__init__(max_workers=workers)
        self.futures: List[Any] = []

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        future = super().submit(fn, *args, **kwargs)
        self.futures.append(future)
        return future


def test_a_task_counts_as_done_when_it_completes_not_when_its_result_is_consumed():
    """docs/many.rst "Progress": with a slow consumer the counts still follow the tasks, so the
    interrupted line names only what did not finish (what a re-run would run again)."""
    from agentcore.testing import ScriptedModel, text, tool_call

    helpers.STARTED.clear()
    helpers.RELEASE.clear()
    go = threading.Event()

    def slow(context: Any) -> Any:
        assert go.wait(10)
        return text("b")

    fast, held = ScriptedModel([text("a")]), ScriptedModel([slow])
    blocked = ScriptedModel([tool_call("many_block", {"note": "c"}), text("never")])
    tasks = [
        AgentTask(AgentSpec(fast.model), "a", id="a"),
        AgentTask(AgentSpec(held.model), "b", id="b"),
        AgentTask(AgentSpec(blocked.model, tools=("_many_helpers:many_block",)), "c", id="c"),
    ]
    snapshots: List[Any] = []
    with _RecordingPool(3) as pool:
        results = run_many(tasks, executor=pool, progress=snapshots.append)
        completed = threading.Event()
        first = next(results)
        assert first.task.id == "a"
        # run_many's own done-callback was added first, so it has run when this one runs
        pool.futures[1].add_done_callback(lambda future: completed.set())
        go.set()
        assert completed.wait(10) and helpers.STARTED.wait(10)
        results.close()  # the consumer never asked for b's result: b completed all the same
    final = snapshots[-1]
    assert final.interrupted and (final.done, final.failed, final.running, final.pending) == (2, 0, 0, 1)
    assert final.line().endswith("interrupted: 1 not finished")


# --------------------------------------------------------------------------- odd input


def test_prompts_and_ids_with_lone_surrogates_run_record_and_rerun_like_any_other(tmp_path):
    """Text read with ``surrogateescape`` (a file name that is no UTF-8) runs on an Agent: in a
    call it used to fail the task, and on a session the whole call, with a bare UnicodeEncodeError
    from the attempt key's digest."""
    from agentcore.testing import ScriptedModel, text

    scripted = ScriptedModel([lambda context: text(f"ans {context.messages[-1].text}")] * 3)
    spec, url = AgentSpec(scripted.model), f"jsonl:///{tmp_path / 's.jsonl'}"
    tasks = [
        AgentTask(spec, "read caf\udce9.txt", session=url, id=1),
        AgentTask(spec, "then \udcff", session=url, id="step-\udcff"),
        AgentTask(spec, "free \udcff", id=3),
    ]
    results = {r.task.id: r for r in run_many(tasks, progress=False)}
    assert all(r.ok for r in results.values()), [r.error for r in results.values()]
    assert results["step-\udcff"].messages[-1].text == "ans then \udcff"
    again = {r.task.id: r for r in run_many(tasks[:2], progress=False)}
    assert all(r.ok for r in again.values()) and scripted.calls == 3  # both recognised as finished
    with Session.open(tmp_path / "s.jsonl", read_only=True) as session:
        assert conversation(session.build_context()) == [
            "user: read caf\udce9.txt",
            "assistant: ans read caf\udce9.txt",
            "user: then \udcff",
            "assistant: ans then \udcff",
        ]


# --------------------------------------------------------------------------- a second Ctrl+C


def test_a_second_ctrl_c_while_aborted_agents_settle_does_not_wait_for_a_stubborn_tool():
    """A tool that ignores its abort is waited for at most the grace period; a second Ctrl+C in
    that wait used to leave the call waiting for the tool without any bound (it shut the default
    pool down with ``wait=True``)."""
    from agentcore.testing import ScriptedModel, text, tool_call

    for event in (helpers.STARTED, helpers.RELEASE, helpers.ABORT_SEEN):
        event.clear()
    scripted = ScriptedModel([tool_call("many_stubborn", {"note": "x"}), text("never")])
    spec = AgentSpec(scripted.model, tools=("_many_helpers:many_stubborn",))
    returned, waited_for_the_tool = threading.Event(), threading.Event()
    main = threading.main_thread().ident
    assert main is not None

    def second_ctrl_c() -> None:
        if helpers.ABORT_SEEN.wait(10):  # the first Ctrl+C aborted the run: run_many now waits
            signal.pthread_kill(main, signal.SIGINT)
        if not returned.wait(5):  # a bound on the failure only: release the tool so the test ends
            waited_for_the_tool.set()
        helpers.RELEASE.set()

    def first_ctrl_c(snapshot: Any) -> None:
        if helpers.STARTED.is_set() and not snapshot.finished:
            raise KeyboardInterrupt

    pressing = threading.Thread(target=second_ctrl_c)
    pressing.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            list(run_many([AgentTask(spec, "go", id=1)], progress=first_ctrl_c))
        returned.set()
    finally:
        helpers.RELEASE.set()
        pressing.join()
    assert helpers.ABORT_SEEN.is_set()
    assert not waited_for_the_tool.is_set(), "run_many waited for the tool that ignores its abort"
    for thread in threading.enumerate():  # the released tool ends its task on the pool's thread
        if thread.name.startswith("agentcore-many"):
            thread.join(10)


class _LateCallbackPool(ThreadPoolExecutor):
    """Each future's first done-callback (added before run_many's) waits for ``late`` (at most
    half a second): a thread completing a future runs its callbacks after it wakes the waiters."""

    def __init__(self) -> None:
        super().__init__(max_workers=1)
        self.late = threading.Event()

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        future = super().submit(fn, *args, **kwargs)
        future.add_done_callback(lambda done: self.late.wait(0.5))
        return future


def test_an_interrupted_call_counts_what_its_aborted_agents_were_billed():
    """The final snapshot of an interrupted call counts each task the interruption aborted (what
    it was billed): it used to be drawn as soon as the task's future was done, before run_many's
    done-callback had queued it, so the task and its tokens were left out."""
    from agentcore.testing import ScriptedModel, call, response, text
    from agentcore.types import Usage

    helpers.STARTED.clear()
    helpers.RELEASE.clear()
    billed = Usage(input=100, output=20)
    scripted = ScriptedModel([response(call("many_block", {"note": "x"}), usage=billed), text("never")])
    spec = AgentSpec(scripted.model, tools=("_many_helpers:many_block",))
    snapshots: List[Any] = []
    pool = _LateCallbackPool()

    def interrupt(snapshot: Any) -> None:
        snapshots.append(snapshot)
        if snapshot.finished:
            pool.late.set()
        elif helpers.STARTED.is_set():
            raise KeyboardInterrupt

    try:
        with pytest.raises(KeyboardInterrupt):
            list(run_many([AgentTask(spec, "go", id=1)], executor=pool, progress=interrupt))
    finally:
        pool.shutdown(wait=True)
    assert not helpers.RELEASE.is_set()  # the task ended because it was aborted
    final = snapshots[-1]
    assert final.interrupted and (final.done, final.failed, final.pending) == (0, 0, 1)
    assert (final.input_tokens, final.output_tokens) == (100, 20)


def test_a_ctrl_c_while_one_agent_is_aborted_still_aborts_the_others():
    """A second Ctrl+C landing while the first one's abort reaches an agent (the abort re-raises
    it once that agent's listeners were told) used to leave every later agent running."""
    from agentcore.testing import ScriptedModel, text, tool_call

    helpers.RELEASE.clear()
    helpers.TOUCHY.update(started=0, aborted=0)
    specs = [
        AgentSpec(
            ScriptedModel([tool_call("many_touchy", {"note": n}), text("never")]).model,
            tools=("_many_helpers:many_touchy",),
        )
        for n in "ab"
    ]

    def first_ctrl_c(snapshot: Any) -> None:
        if helpers.TOUCHY["started"] == 2 and not snapshot.finished:
            raise KeyboardInterrupt

    pool = ThreadPoolExecutor(2)
    try:
        with pytest.raises(KeyboardInterrupt):
            list(
                run_many(
                    [AgentTask(spec, "go", id=n) for n, spec in enumerate(specs)], executor=pool, progress=first_ctrl_c
                )
            )
        with helpers.TOUCHY_CHANGED:
            both = helpers.TOUCHY_CHANGED.wait_for(lambda: helpers.TOUCHY["aborted"] == 2, 5)
    finally:
        helpers.RELEASE.set()
        pool.shutdown(wait=True)
    assert both, helpers.TOUCHY


# --------------------------------------------------------------------------- tool objects and approvals


def _add_object(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> Any:
    return str(args["a"] + args["b"])


def _tool_object(name: str, requires_approval: bool = False) -> Any:
    """A tool object a recipe carries (pickled by reference to this module's ``_add_object``)."""
    from agentcore import AgentTool

    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
    return AgentTool(name, "Add two integers.", schema, _add_object, requires_approval=requires_approval)


ADD_OBJECT = _tool_object("add_object")
GUARDED_ADD = _tool_object("guarded_add", requires_approval=True)  # waits for a person's approval


def test_a_recipe_s_tool_object_runs_on_worker_processes(server, tmp_path, worker_path):
    """docs/many.rst: tools may be "tool objects that the standard pickle can carry". Running one
    cached its compiled schema validator on the worker's copy, which the worker then pickled back
    inside the result's task: every such task failed with "Can't pickle local object"."""
    spec = AgentSpec(server.model(), tools=(ADD_OBJECT,), get_api_key=helpers.api_key)
    tasks = [AgentTask(spec, f'add_object {{"a": {i}, "b": 1000}}', id=i) for i in range(2)]
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        results = sorted(run_many(tasks, executor=pool, progress=False), key=lambda r: r.task.id)
    assert all(r.ok for r in results), [r.error for r in results]
    assert [r.messages[-1].text for r in results] == ["result 1000", "result 1001"]
    assert [r.task for r in results] == tasks and results[0].task is tasks[0]


def test_a_recipe_with_a_tool_object_can_be_submitted_again_after_running_on_threads(server):
    """Running on threads used the recipe's own tool object, which then held its compiled validator:
    the next run_many with the same recipe refused it as SpecNotPortableError (tools[0])."""
    tool = _tool_object("add_object")
    spec = AgentSpec(server.model(), tools=(tool,), get_api_key=helpers.api_key)
    for i in range(2):
        [result] = list(run_many([AgentTask(spec, f'add_object {{"a": {i}, "b": 1}}')], progress=False))
        assert result.ok and result.messages[-1].text == f"result {i + 1}", result.error
    pickle.dumps(tool)


def test_a_task_whose_run_pauses_for_approval_fails_and_a_rerun_does_not_skip_it(tmp_path):
    """A run_many task has nobody to approve its calls: a run that paused did not finish. It was
    ok, and its end marker said so, so running the call again skipped it as done."""
    from agentcore.testing import ScriptedModel, call, response

    scripted = ScriptedModel([response(call("guarded_add", {"a": 1, "b": 2}, id="g1"))] * 2)
    url = f"jsonl://{tmp_path / 's.jsonl'}"
    task = AgentTask(AgentSpec(scripted.model, tools=(GUARDED_ADD,)), "add 1 and 2", session=url, id="add")
    [result] = list(run_many([task], progress=False))
    assert not result.ok
    assert isinstance(result.error, TaskError) and result.error.kind == "ApprovalPending"
    assert "guarded_add g1" in str(result.error) and "requires_approval" in str(result.error)
    pickle.loads(pickle.dumps(result))
    with Session.open(tmp_path / "s.jsonl", read_only=True) as session:
        assert branch_markers(session)[-1]["ok"] is False
        assert [p.tool_call_id for p in Agent(scripted.model, session=session).pending_approvals] == ["g1"]
    [again] = list(run_many([task], progress=False))  # not skipped as finished: it runs again
    assert scripted.calls == 2 and not again.ok


def test_a_paused_task_continued_in_its_session_is_not_run_again(tmp_path):
    """The ApprovalPending error says to approve the calls in the task's session and continue_()
    there. Doing so and running the call again rewound the session past that work (abandoning the
    decision and the answer), paid the model again and paused once more: the task never finished."""
    from agentcore.testing import ScriptedModel, call, response, text

    scripted = ScriptedModel(
        [response(call("guarded_add", {"a": 1, "b": 2}, id="g1")), text("3", usage=priced((7, 7, 1.0)))]
        + [response(call("guarded_add", {"a": 1, "b": 2}, id="g2"))]
    )
    url = f"jsonl://{tmp_path / 's.jsonl'}"
    task = AgentTask(AgentSpec(scripted.model, tools=(GUARDED_ADD,)), "add 1 and 2", session=url, id="add")
    [paused] = list(run_many([task], progress=False))
    assert paused.error.kind == "ApprovalPending"
    with Session.open(tmp_path / "s.jsonl") as session:
        person = Agent(scripted.model, tools=[GUARDED_ADD], session=session)
        person.approve("g1")
        person.continue_()
    [again] = list(run_many([task], progress=False))
    assert again.ok, again.error
    assert scripted.calls == 2  # the model was not asked again
    assert [m.role for m in again.messages] == ["user", "assistant", "toolResult", "assistant"]
    assert again.messages[-1].content[0].text == "3" and figures(again.usage) == (7, 7, 1.0)
    with Session.open(tmp_path / "s.jsonl", read_only=True) as session:
        assert [m.role for m in session.build_context().messages] == ["user", "assistant", "toolResult", "assistant"]


def test_a_paused_task_nobody_continued_to_an_end_runs_again(tmp_path):
    from agentcore.testing import ScriptedModel, call, response

    scripted = ScriptedModel([response(call("guarded_add", {"a": 1, "b": 2}, id=f"g{i}")) for i in range(3)])
    url = f"jsonl://{tmp_path / 's.jsonl'}"
    task = AgentTask(AgentSpec(scripted.model, tools=(GUARDED_ADD,)), "add 1 and 2", session=url, id="add")
    list(run_many([task], progress=False))
    with Session.open(tmp_path / "s.jsonl") as session:  # approved, continued: it paused again
        person = Agent(scripted.model, tools=[GUARDED_ADD], session=session)
        person.approve("g0")
        person.continue_()
        assert [p.tool_call_id for p in person.pending_approvals] == ["g1"]
    [again] = list(run_many([task], progress=False))
    assert scripted.calls == 3 and again.error.kind == "ApprovalPending" and "g2" in str(again.error)


def test_a_task_after_one_that_paused_on_its_session_fails_at_once_and_runs_once_it_is_decided(tmp_path):
    """The second task on a session whose first task paused failed with prompt()'s advice to call
    agent.approve() and continue_(), after recording a start marker: once a person had decided and
    continued there, running the call again found that marker last and rewound the session past
    the person's work, running the first task again."""
    from agentcore.testing import ScriptedModel, call, response, text

    scripted = ScriptedModel(
        [response(call("guarded_add", {"a": 1, "b": 2}, id="g1")), text("3"), text("second answer")]
    )
    url = f"jsonl://{tmp_path / 's.jsonl'}"
    spec = AgentSpec(scripted.model, tools=(GUARDED_ADD,))
    tasks = [AgentTask(spec, "add 1 and 2", session=url, id="first"), AgentTask(spec, "then?", session=url, id="then")]
    first, second = list(run_many(tasks, progress=False))
    assert second.error.kind == "ApprovalPending" and "did not start" in str(second.error)
    assert "guarded_add g1" in str(second.error) and scripted.calls == 1
    with Session.open(tmp_path / "s.jsonl") as session:
        assert [m["task"] for m in branch_markers(session)] == ["first", "first"]  # start and end
        person = Agent(scripted.model, tools=[GUARDED_ADD], session=session)
        person.approve("g1")
        person.continue_()
    first, second = list(run_many(tasks, progress=False))
    assert first.ok and second.ok, (first.error, second.error)
    assert scripted.calls == 3 and second.messages[-1].content[0].text == "second answer"
    with Session.open(tmp_path / "s.jsonl", read_only=True) as session:
        texts = [m.role for m in session.build_context().messages]
        assert texts == ["user", "assistant", "toolResult", "assistant", "user", "assistant"]


def test_a_process_pool_reports_no_more_tasks_running_than_it_has_processes(spec, tmp_path, worker_path):
    """A process pool marks a future running as it moves the task to its call queue, a task
    beyond what its processes run: a pool of one process used to show "2 running" throughout."""
    gate = tmp_path / "gate"
    waiting = AgentSpec(**{**spec.__dict__, "tools": ("many_wait",)})
    tasks = [AgentTask(waiting, f'many_wait {{"path": "{gate}"}}', id=i) for i in range(4)]
    while_running: List[Any] = []

    def progress(snapshot: Any) -> None:  # on the iterating thread, at least every quarter second
        if not gate.exists() and Path(str(gate) + ".started").exists():
            while_running.append(snapshot)  # task 0 runs in the only process, the others wait
            gate.touch()

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        results = list(run_many(tasks, executor=pool, progress=progress))
    assert all(r.ok for r in results), [r.error for r in results]
    [snapshot] = while_running
    assert (snapshot.running, snapshot.pending) == (1, 3), snapshot


def test_a_spec_s_repr_shows_no_header_nor_credential_given_in_an_options_mapping(server):
    """A StreamOptions never shows its headers and masks credential-like provider options; the
    same options given to a spec as a mapping were shown as they are, in every task's and
    result's repr (logs, tracebacks)."""
    from agentcore.options import installed_provider_options

    options: Dict[str, Any] = {"headers": {"X-Session": "hdr-secret"}, "temperature": 0.5}
    credentials = "credentials" in installed_provider_options()  # the Vertex plugin's option
    if credentials:
        options["credentials"] = "cred-secret"
    spec = AgentSpec(server.model(), options=options)
    shown = repr(TaskResult(AgentTask(spec, "hi", id=1)))
    assert "hdr-secret" not in shown and "cred-secret" not in shown and "'temperature': 0.5" in shown
    assert not credentials or "'credentials': '***'" in shown
    assert spec.option_kwargs()["headers"] == {"X-Session": "hdr-secret"}  # the agent still gets them

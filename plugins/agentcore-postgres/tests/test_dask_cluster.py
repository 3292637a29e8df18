"""Issue 16's proof: a real Dask LocalCluster (two worker processes) runs 200 agent tasks, each
recording into its own ``postgresql://...?session=task-N`` session in this test run's schema;
then a worker process is SIGKILLed mid-run and no task is lost and no session corrupted.

The tasks talk to the core's loopback OpenAI-compatible server and tools (``tests/_many_helpers``,
imported from the core's tests the way test_conformance.py imports the conformance suite). The
workers reach PostgreSQL through the DSN in each task's session URL; the scheme is found through
the plugin's entry point (the plugin is installed, as in CI). Skips only without dask or a
PostgreSQL server binary.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, Dict, List
from urllib.parse import quote

import pytest
from conftest import ROOT, drop_schema, make_schema, with_schema
from psycopg import conninfo

# stays on sys.path: Dask's spawned workers start with this process's sys.path, and unpickle
# the tasks' tools from _many_helpers
if str(ROOT / "tests") not in sys.path:
    sys.path.append(str(ROOT / "tests"))
import _many_helpers as helpers  # noqa: E402
import test_many as core_many  # noqa: E402
from agentcore_postgres import PostgresSessionStorage  # noqa: E402

from agentcore import AgentSpec, AgentTask, TaskResult, run_many  # noqa: E402
from agentcore.session import Session  # noqa: E402

pytest.importorskip("distributed", reason="dask[distributed] is not installed (pip install agentcore[dask])")

#: the core's fixture: a LocalCluster of two spawned worker processes, 4 threads each
dask_client = core_many.dask_client


def as_url(dsn: str, **query: Any) -> str:
    """The DSN in URL form (libpq's parameters, the schema's search_path among them), plus ``query``."""
    params = conninfo.conninfo_to_dict(dsn)
    user, password = params.pop("user", None), params.pop("password", None)
    host, port, db = params.pop("host", "127.0.0.1"), params.pop("port", "5432"), params.pop("dbname", "postgres")
    auth = (quote(user, safe="") + (":" + quote(password, safe="") if password else "") + "@") if user else ""
    params.update(query)
    qs = "&".join(f"{k}={quote(str(v), safe='')}" for k, v in params.items())
    return f"postgresql://{auth}{host}:{port}/{db}?{qs}"


@pytest.fixture(scope="module")
def schema_dsn(pg_server_dsn):
    """A schema of this module's own (dropped at the end): the workers' sessions go there."""
    schema = make_schema(pg_server_dsn)
    yield with_schema(pg_server_dsn, schema)
    drop_schema(pg_server_dsn, schema)


@pytest.fixture(scope="module")
def secret(pg_server_dsn):
    return conninfo.conninfo_to_dict(pg_server_dsn).get("password")


@pytest.fixture(scope="module")
def server():
    with helpers.LoopbackServer() as srv:
        yield srv


def markers(session: Session) -> List[Dict[str, Any]]:
    return [e.data for e in session.get_branch() if getattr(e, "custom_type", None) == "agentcore.run_many"]


def assert_complete(session: Session, i: int) -> None:
    """The current branch is one finished attempt: prompt, tool call, tool result, final answer."""
    messages = session.build_context().messages
    roles = [getattr(m, "role", None) for m in messages]
    assert roles == ["user", "assistant", "toolResult", "assistant"], (i, roles)
    assert any(getattr(c, "name", None) == "many_add" for c in messages[1].content), (i, messages[1])
    assert messages[-1].text == f"result {i + 1000}"
    assert [m["event"] for m in markers(session)] == ["start", "end"], (i, markers(session))
    assert markers(session)[-1]["ok"] is True


def add_task(spec: AgentSpec, url: str, i: int) -> AgentTask:
    return AgentTask(spec, f'many_add {{"a": {i}, "b": 1000}}', session=url, id=i)


def assert_no_secret(results: List[TaskResult], secret: Any) -> None:
    if not secret:
        return
    for r in results:
        assert secret not in str(r.error) and secret not in repr(r), r.task.id


def test_200_tasks_on_two_dask_workers_record_into_postgres(schema_dsn, server, dask_client, secret):
    pids = set(dask_client.run(os.getpid).values())
    assert len(pids) == 2 and os.getpid() not in pids  # two real worker processes
    n = 200
    spec = AgentSpec(server.model(), tools=("_many_helpers:many_add",), get_api_key=helpers.api_key)
    tasks = [add_task(spec, as_url(schema_dsn, session=f"task-{i}"), i) for i in range(n)]
    results = list(run_many(tasks, executor=dask_client.get_executor(), progress=False))
    assert sorted(r.task.id for r in results) == list(range(n))
    assert_no_secret(results, secret)
    assert all(r.ok for r in results), [repr(r.error) for r in results if r.error][:3]
    for i in range(n):
        with Session(PostgresSessionStorage(schema_dsn, f"task-{i}", read_only=True)) as session:
            assert_complete(session, i)


def _wait_for_file(path: Path, timeout: float = 60.0) -> None:
    """Another process creates ``path``: poll for it (no cross-process event without setup)."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def test_a_killed_worker_loses_no_task_and_corrupts_no_postgres_session(
    schema_dsn, server, dask_client, secret, tmp_path
):
    gate = tmp_path / "gate"
    waiting = AgentSpec(server.model(), tools=("_many_helpers:many_wait",), get_api_key=helpers.api_key)
    spec = AgentSpec(server.model(), tools=("_many_helpers:many_add",), get_api_key=helpers.api_key)
    url = {i: as_url(schema_dsn, session=f"kill-{i}") for i in range(-1, 40)}
    tasks = [AgentTask(waiting, f'many_wait {{"path": "{gate}"}}', session=url[-1], id=-1)]
    tasks += [add_task(spec, url[i], i) for i in range(40)]
    results = run_many(tasks, executor=dask_client.get_executor(), progress=False)
    started = Path(str(gate) + ".started")
    _wait_for_file(started)
    os.kill(int(started.read_text()), signal.SIGKILL)  # the worker holding task -1 (and others)
    gate.touch()  # the re-run (on the other worker or a restarted one) goes through
    collected = list(results)
    assert sorted(r.task.id for r in collected) == list(range(-1, 40))  # nothing silently lost
    assert all(r.ok or r.error is not None for r in collected)
    assert_no_secret(collected, secret)
    by_id = {r.task.id: r for r in collected}
    for i in range(40):
        # every session opens for writing: a killed worker's advisory lock went with its connection
        with Session(PostgresSessionStorage(schema_dsn, f"kill-{i}")) as session:
            if by_id[i].ok:
                assert_complete(session, i)
            else:
                session.build_context()  # failed: still a valid, reopenable session
    with Session(PostgresSessionStorage(schema_dsn, "kill--1")) as session:
        branch = markers(session)
        if by_id[-1].ok:  # re-run: its branch is one attempt, number 2; attempt 1 is kept aside
            assert [m["event"] for m in branch] == ["start", "end"] and branch[0]["attempt"] == 2
            assert session.build_context().messages[-1].text == "result released"
            assert len(session.entries()) > len(session.get_branch())
        else:
            session.build_context()

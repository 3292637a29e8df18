"""A real PostgreSQL server for the tests (never a mock).

``AGENTCORE_TEST_PG_DSN`` names one when set (CI starts one with ``tests/pg-server.sh``); otherwise
the session starts its own with ``pg-server.sh`` (``initdb`` in a temporary directory, 127.0.0.1
at a free port) and stops it at the end. The tests skip, saying why, only when no server binary
can be found. Every test session works in a schema of its own (dropped at the end), so a shared
server is left as it was; ``fresh_dsn`` gives a test an empty schema of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
PLUGIN = HERE.parent
ROOT = PLUGIN.parent.parent
SERVER_SCRIPT = HERE / "pg-server.sh"

# The plugin importable without being installed (and the core of this checkout first).
for path in (str(PLUGIN), str(ROOT)):
    if path not in sys.path:
        sys.path.insert(0, path)

psycopg = pytest.importorskip("psycopg", reason="agentcore-postgres needs psycopg 3: pip install 'psycopg[binary]'")
from psycopg import conninfo  # noqa: E402


def _start_server():
    directory = tempfile.mkdtemp(prefix="agentcore-pg-")
    os.chmod(directory, 0o755)  # the server may run as the postgres user
    result = subprocess.run(
        ["bash", str(SERVER_SCRIPT), "start", os.path.join(directory, "pg"), "--no-install"],
        capture_output=True,
        text=True,
    )
    if result.returncode == 3:
        os.rmdir(directory)
        pytest.skip(
            "no PostgreSQL server binary (initdb) found: install the Debian postgresql package or "
            "set AGENTCORE_TEST_PG_DSN to a server's DSN"
        )
    if result.returncode != 0:
        raise RuntimeError(f"pg-server.sh start failed:\n{result.stderr}")
    return directory, result.stdout.strip().splitlines()[-1]


def with_schema(dsn: str, schema: str) -> str:
    return conninfo.make_conninfo(dsn, options=f"-csearch_path={schema}")


def make_schema(dsn: str) -> str:
    schema = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return schema


def drop_schema(dsn: str, schema: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.fixture(scope="session")
def pg_server_dsn():
    """The DSN of a running server (with its password): the environment's, or one started here."""
    dsn = os.environ.get("AGENTCORE_TEST_PG_DSN")
    if dsn:
        yield dsn
        return
    directory, dsn = _start_server()
    try:
        yield dsn
    finally:
        subprocess.run(["bash", str(SERVER_SCRIPT), "stop", os.path.join(directory, "pg")], capture_output=True)
        try:
            os.rmdir(directory)
        except OSError:
            pass


@pytest.fixture(scope="session")
def pg_dsn(pg_server_dsn):
    """A DSN whose search_path is a schema of this test session (dropped at the end)."""
    schema = make_schema(pg_server_dsn)
    yield with_schema(pg_server_dsn, schema)
    drop_schema(pg_server_dsn, schema)


@pytest.fixture
def fresh_dsn(pg_server_dsn):
    """A DSN whose search_path is a new, empty schema (for schema and listing tests)."""
    schema = make_schema(pg_server_dsn)
    yield with_schema(pg_server_dsn, schema)
    drop_schema(pg_server_dsn, schema)


@pytest.fixture
def password(pg_server_dsn):
    found = conninfo.conninfo_to_dict(pg_server_dsn).get("password")
    if not found:
        pytest.skip("the test server's DSN has no password to look for")
    return found

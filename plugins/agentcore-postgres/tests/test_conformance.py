"""The core's session conformance suite (tests/test_session_conformance.py), run against
PostgresSessionStorage: every test of it that takes the ``backend`` or ``s`` fixture, imported
here with a PostgreSQL backend. The core's tests do not know this plugin exists."""

from __future__ import annotations

import inspect
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tests"))
import test_session_conformance as core  # noqa: E402

sys.path.remove(str(ROOT / "tests"))

from agentcore.session import Session  # noqa: E402
from agentcore_postgres import PostgresSessionStorage  # noqa: E402


class PostgresBackend(core.Backend):
    """New sessions in the test schema; reopening closes the writer and opens the session again."""

    def __init__(self, dsn, tmp_path):
        super().__init__("postgresql", tmp_path)
        self.dsn = dsn

    def new(self):
        return Session(PostgresSessionStorage.create(self.dsn, cwd="/w"), **self._kwargs())

    def reopen(self, session):
        session.close()
        return Session(PostgresSessionStorage(self.dsn, session.storage.session_id), **self._kwargs())


@pytest.fixture
def backend(pg_dsn, tmp_path):
    return PostgresBackend(pg_dsn, tmp_path)


s = core.s
_SUITE = []
for _name, _test in vars(core).items():
    if _name.startswith("test_") and callable(_test):
        _params = inspect.signature(_test).parameters
        if "backend" in _params or "s" in _params:
            globals()[_name] = _test
            _SUITE.append(_name)


def test_the_suite_was_imported():
    assert len(_SUITE) >= 35, _SUITE  # the import found the suite (39 tests when this was written)

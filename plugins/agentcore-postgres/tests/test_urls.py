"""The postgresql:// scheme of agentcore.open_session, through register_storages and through the
distribution's entry point (as an installed plugin is found)."""

from __future__ import annotations

import os
import subprocess
import sys
from urllib.parse import quote

import pytest
from agentcore_postgres import PostgresSessionStorage, plugin
from agentcore_postgres.plugin import split_session_url
from conftest import PLUGIN, ROOT
from psycopg import conninfo

from agentcore.plugins import create_plugin_manager
from agentcore.session import Session, SessionError, SessionLockedError
from agentcore.session.urls import open_storage
from agentcore.types import TextContent, UserMessage


def U(text):
    return UserMessage([TextContent(text)], timestamp=1)


def as_url(dsn, **query):
    """The DSN in URL form (libpq's parameters), plus ``query``."""
    params = conninfo.conninfo_to_dict(dsn)
    user, password = params.pop("user"), params.pop("password")
    host, port, db = params.pop("host"), params.pop("port"), params.pop("dbname")
    params.update(query)
    qs = "&".join(f"{k}={quote(str(v), safe='')}" for k, v in params.items())
    return f"postgresql://{user}:{quote(password, safe='')}@{host}:{port}/{db}?{qs}"


@pytest.fixture
def pm():
    return create_plugin_manager([plugin])


def test_split_session_url():
    assert split_session_url("postgresql://u:p@h/db?sslmode=disable&session=abc") == (
        "postgresql://u:p@h/db?sslmode=disable",
        "abc",
    )
    assert split_session_url("postgres://h/db") == ("postgres://h/db", None)
    # the other parameters exactly as written: libpq reads %20 as a space but not +
    assert split_session_url("postgresql://h/db?options=-c%20statement_timeout%3D4321&session=a%20b") == (
        "postgresql://h/db?options=-c%20statement_timeout%3D4321",
        "a b",
    )


def test_libpq_options_with_spaces_reach_the_server_through_a_session_url(pg_dsn, pm):
    url = as_url(pg_dsn, options="-c statement_timeout=4321", session="opts")
    assert "options=-c%20statement_timeout%3D4321" in url
    with Session(open_storage(url, create=True, plugin_manager=pm)) as s:
        shown = s.storage._conn.execute("SHOW statement_timeout").fetchone()[0]  # the storage's connection
    assert shown == "4321ms"


def test_open_by_url(pg_dsn, pm, password):
    url = as_url(pg_dsn, session="by-url")
    with pytest.raises(SessionError) as info:
        open_storage(url, plugin_manager=pm)
    assert info.value.code == "not_found" and password not in str(info.value)
    with Session(open_storage(url, create=True, plugin_manager=pm)) as s:
        assert isinstance(s.storage, PostgresSessionStorage) and s.id == "by-url"
        first = s.append_message(U("hi"))
        with pytest.raises(SessionLockedError):
            open_storage(url, plugin_manager=pm)
        with Session(open_storage(url, read_only=True, plugin_manager=pm)) as reader:
            assert [e.id for e in reader.entries()] == [first]
        assert password not in repr(s)
    alias = url.replace("postgresql://", "postgres://", 1)
    with Session(open_storage(alias, plugin_manager=pm)) as again:
        assert [e.id for e in again.entries()] == [first]
    with Session(open_storage(as_url(pg_dsn), plugin_manager=pm)) as new:  # no session=: a new one
        assert new.id != "by-url" and new.entries() == []


def test_the_entry_point_makes_open_session_find_the_scheme(pg_dsn, tmp_path):
    """Without installing anything: a dist-info directory declaring the plugin's entry point, on the
    path of a fresh interpreter, is what pip would leave behind."""
    dist = tmp_path / "agentcore_postgres-0.1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: agentcore-postgres\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text("[agentcore]\npostgres = agentcore_postgres.plugin\n")
    code = (
        "import os\nfrom agentcore import open_session\nfrom agentcore.types import TextContent, UserMessage\n"
        "with open_session(os.environ['PG_URL'], create=True) as s:\n"
        "    s.append_message(UserMessage([TextContent('via entry point')], timestamp=1))\n"
        "    print(type(s.storage).__name__, s.id)\n"
    )
    env = dict(
        os.environ,
        PG_URL=as_url(pg_dsn, session="entry-point"),
        PYTHONPATH=os.pathsep.join([str(ROOT), str(PLUGIN), str(tmp_path)]),
    )
    env.pop("AGENTCORE_DISABLE_PLUGIN_AUTOLOAD", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["PostgresSessionStorage", "entry-point"]
    with Session(PostgresSessionStorage(pg_dsn, "entry-point", read_only=True)) as s:
        assert [e.message.content[0].text for e in s.entries()] == ["via entry point"]


def test_the_command_line_records_into_a_postgres_session_url(pg_dsn, password, tmp_path):
    """``agentcore run --session postgresql://...?session=ID`` (the plugin found by its entry
    point): the run is recorded in that session, resumed by the next run, and no output shows
    the password, also when the server refuses it."""
    dist = tmp_path / "agentcore_postgres-0.1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: agentcore-postgres\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text("[agentcore]\npostgres = agentcore_postgres.plugin\n")
    env = dict(
        os.environ,
        AGENTCORE_SESSIONS_DIR=str(tmp_path / "sessions"),
        PYTHONPATH=os.pathsep.join([str(ROOT), str(PLUGIN), str(tmp_path)]),
    )
    env.pop("AGENTCORE_DISABLE_PLUGIN_AUTOLOAD", None)
    env.pop("AGENTCORE_MODEL", None)
    url = as_url(pg_dsn, session="from-cli")

    def cli(*argv):
        return subprocess.run(
            [sys.executable, "-m", "agentcore", *argv], env=env, cwd=str(tmp_path), capture_output=True, text=True
        )

    first = cli("run", "--model", "scripted", "--session", url, "first prompt")
    assert first.returncode == 0, first.stderr
    again = cli("run", "--session", url, "second prompt")  # the model comes from the session
    assert again.returncode == 0, again.stderr
    for done in (first, again):
        assert password not in done.stdout + done.stderr and quote(password, safe="") not in done.stderr
    assert "[session from-cli: postgresql://" in first.stderr  # where it is recorded, without the password
    with Session(PostgresSessionStorage(pg_dsn, "from-cli", read_only=True)) as s:
        texts = [m.content[0].text for m in s.build_context().messages if m.role == "user"]
    assert texts == ["first prompt", "second prompt"]
    wrong = url.replace(quote(password, safe=""), "not-the-password-77", 1)
    refused = cli("run", "--model", "scripted", "--session", wrong, "x")
    assert refused.returncode == 2 and "not-the-password-77" not in refused.stderr, refused.stderr
    assert "--session postgresql://" in refused.stderr

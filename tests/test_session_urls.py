"""open_session(url): the built-in schemes, plugin schemes through register_storages, and errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import agentcore
from agentcore import hookimpl, open_session
from agentcore.plugins import create_plugin_manager
from agentcore.session import (
    JsonlSessionStorage,
    MemorySessionStorage,
    SessionError,
    SessionLockedError,
    SqliteSessionStorage,
)
from agentcore.session.urls import StorageScheme, open_storage, redact_url
from agentcore.types import TextContent, UserMessage


def U(text):
    return UserMessage([TextContent(text)], timestamp=1)


def test_open_session_is_public():
    assert "open_session" in agentcore.__all__
    assert agentcore.open_session is open_session


def test_jsonl_url_opens_and_creates(tmp_path):
    path = tmp_path / "a b.jsonl"
    url = "jsonl://" + str(path).replace(" ", "%20")
    with pytest.raises(SessionError) as info:
        open_session(url)
    assert info.value.code == "not_found" and not path.exists()
    with open_session(url, create=True) as s:
        assert isinstance(s.storage, JsonlSessionStorage) and s.storage.path == str(path)
        first = s.append_message(U("hi"))
    with open_session(url, create=True) as s:  # exists: opened, not overwritten
        assert [e.id for e in s.entries()] == [first]
    with open_session(url, read_only=True) as s:
        assert s.storage.read_only


def test_jsonl_relative_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with open_session("jsonl:rel.jsonl", create=True) as s:
        assert s.storage.path == str(tmp_path / "rel.jsonl")


def test_sqlite_url_with_session_id(tmp_path):
    db = tmp_path / "s.db"
    url = f"sqlite://{db}?session=task-1"
    with pytest.raises(SessionError) as info:
        open_session(url)
    assert info.value.code == "not_found"
    with open_session(url, create=True) as s:
        assert isinstance(s.storage, SqliteSessionStorage) and s.id == "task-1"
        kept = s.append_message(U("one"))
        with pytest.raises(SessionLockedError):
            open_session(url)  # one writer per session, as with the storage itself
    with open_session(url) as s:
        assert [e.id for e in s.entries()] == [kept]
    with open_session(f"sqlite://{db}?session=task-2", create=True) as other:
        assert other.id == "task-2"
    assert {i.id for i in SqliteSessionStorage.list_sessions(db)} == {"task-1", "task-2"}


def test_sqlite_url_without_session_follows_the_database_rules(tmp_path):
    db = tmp_path / "one.db"
    with open_session(f"sqlite://{db}", create=True) as s:  # a new database gets a new session
        sid = s.id
    with open_session(f"sqlite://{db}") as s:  # a database of one session opens it
        assert s.id == sid


@pytest.mark.parametrize("query", ["", "?session=abc"])
def test_sqlite_url_of_a_missing_database_creates_nothing_without_create(tmp_path, query):
    db = tmp_path / "typo.db"
    for read_only in (False, True):
        with pytest.raises(SessionError) as info:
            open_session(f"sqlite://{db}{query}", read_only=read_only)
        assert info.value.code == "not_found" and str(db) in str(info.value) and "create=True" in str(info.value)
    assert list(tmp_path.iterdir()) == []  # no database file, no -wal/-shm
    with open_session(f"sqlite://{db}{query}", create=True) as s:  # create=True still makes it
        assert s.id == "abc" or not query
    assert db.exists()


def test_memory_url():
    s = open_session("memory:")
    assert isinstance(s.storage, MemorySessionStorage)
    s.append_message(U("x"))
    assert open_session("memory:?session=abc").id == "abc"
    assert open_session("MEMORY:").storage.path is None  # schemes are case-insensitive


def test_session_kwargs_reach_the_session():
    s = open_session("memory:", clock=lambda: 1_700_000_000_000)
    s.append_message(U("x"))
    assert s.entries()[0].timestamp.startswith("2023-11-14")


@pytest.mark.parametrize(
    "url, words",
    [
        ("nosuch:///x", ["unknown session URL scheme 'nosuch'", "jsonl:", "memory:", "sqlite:"]),
        ("/just/a/path.jsonl", ["not a session URL", "jsonl:///"]),
        ("C:\\sessions\\a.jsonl", ["not a session URL"]),
        ("jsonl:///x.jsonl?fsink=always", ["unknown query parameter(s) fsink", "known: fsync"]),
        ("sqlite://otherhost/x.db", ["names host 'otherhost'", "only local files"]),
        ("jsonl://", ["has no path"]),
        ("memory:/x", ["takes no path"]),
    ],
)
def test_bad_urls_are_refused_clearly(url, words):
    with pytest.raises(ValueError) as info:
        open_session(url)
    for word in words:
        assert word in str(info.value)


def test_plugin_scheme_through_register_storages():
    opened = []

    class Plugin:
        @hookimpl
        def register_storages(self, register):
            def open_(url, *, read_only, create):
                opened.append((url, read_only, create))
                return MemorySessionStorage(session_id="from-plugin")

            register(StorageScheme("Custom", open_))
            register(StorageScheme("memory", open_))  # a later plugin wins over the built-in

    pm = create_plugin_manager([Plugin()])
    storage = open_storage("custom://h/db?session=1", read_only=True, create=True, plugin_manager=pm)
    assert storage.header.id == "from-plugin" and opened == [("custom://h/db?session=1", True, True)]
    assert open_storage("memory:", plugin_manager=pm).header.id == "from-plugin"
    entries = pm.registry("storage")
    assert entries["jsonl"].source == "agentcore._session_schemes"
    assert entries["memory"].shadowed == ("agentcore._session_schemes",)


def test_a_scheme_returning_something_else_is_named():
    class Plugin:
        @hookimpl
        def register_storages(self, register):
            register(StorageScheme("bad", lambda url, **kw: object()))

    with pytest.raises(TypeError, match="'bad' storage scheme .* returned object, not a SessionStorage"):
        open_storage("bad:x", plugin_manager=create_plugin_manager([Plugin()]))


@pytest.mark.parametrize(
    "url",
    [
        "mysql://user:s3cret@db/x?session=1",
        "sqlite://user:s3cret@db/x.db",
        "jsonl://user:s3cret@db/x.jsonl",
        "memory://user:s3cret@db",
    ],
)
def test_url_errors_never_show_the_password(url):
    with pytest.raises(ValueError) as info:
        open_session(url)
    assert "s3cret" not in str(info.value) and url.split(":")[0] in str(info.value)


def test_redact_url():
    assert redact_url("postgresql://me:s3cret@h:5432/db?session=1") == "postgresql://me:***@h:5432/db?session=1"
    assert redact_url("postgresql://me@h/db") == "postgresql://me@h/db"
    assert redact_url("postgresql://me:p%40ss@h/db") == "postgresql://me:***@h/db"


@pytest.mark.parametrize(
    "url, secret, shown",
    [
        ("postgresql://me:pa?ss@h/db?session=1", "pa?ss", "postgresql://me:***@h/db?session=1"),
        ("postgresql://me:pa/ss@h/db", "pa/ss", "postgresql://me:***@h/db"),
        ("https://me:pa#ss@proxy.example/v1", "pa#ss", "https://me:***@proxy.example/v1"),
    ],
)
def test_a_password_with_an_unencoded_delimiter_is_hidden_whole(url, secret, shown):
    """URL parsers end the authority at an unencoded "/", "?" or "#", read the password's start as
    a port and see no password at all: redact_url left the URL as it was."""
    from agentcore.providers.failures import redact, secret_url_values

    assert redact_url(url) == shown
    assert secret in secret_url_values(url)
    assert redact(f"could not connect to {url}", secret_url_values(url), min_length=1).count(secret) == 0


def test_an_at_sign_in_a_path_or_query_is_not_taken_for_a_password():
    for url in ("https://host/users/me@x.com", "https://host:8080/me@x", "http://h/?email=a@b"):
        assert redact_url(url) == url


def test_registering_the_builtin_schemes_imports_no_session_module():
    code = (
        "import sys, agentcore.plugins as p\n"
        "assert 'jsonl' in p.default_plugin_manager().registry('storage')\n"
        "print(sorted(m for m in sys.modules if m.startswith('agentcore.session')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "AGENTCORE_DISABLE_PLUGIN_AUTOLOAD": "1"},
    ).stdout
    assert out.strip() == "[]"


def test_redact_url_hides_query_passwords_too():  # libpq takes password= in the query string
    from agentcore.session.urls import redact_url

    url = "postgresql://u:pw1@db:5432/app?password=pw2&sslmode=require&session=s1&sslpassword=pw3"
    shown = redact_url(url)
    assert "pw1" not in shown and "pw2" not in shown and "pw3" not in shown
    assert "sslmode=require" in shown and "session=s1" in shown and "u:***@db:5432" in shown
    assert redact_url("jsonl:///tmp/a.jsonl") == "jsonl:///tmp/a.jsonl"


def test_a_hash_in_a_local_session_url_is_refused_not_cut(tmp_path):  # "#" ends a URL's path
    cut = tmp_path / "x"
    with pytest.raises(ValueError, match="%23"):
        open_session(f"jsonl://{tmp_path}/x#y.jsonl", create=True)
    assert not cut.exists()  # used to create the session at .../x
    with open_session(f"jsonl://{tmp_path}/x%23y.jsonl", create=True) as session:
        assert session.path == str(tmp_path / "x#y.jsonl")


# --------------------------------------------------------------------------- the repository's ids


def test_a_session_id_never_names_a_session_whose_id_ends_with_it(tmp_path):  # session §9.5 open/delete
    """Files are ``<created>_<id>.jsonl``: looking up "main" used to match ``..._a_main.jsonl``
    too, so ``delete("main")`` deleted session "a_main" and ``create(session_id="main")`` was
    refused as already existing."""
    from agentcore.session import SessionRepository

    repo = SessionRepository(tmp_path / "repo")
    repo.create(str(tmp_path), "a_main").close()
    repo.delete("main")  # no session "main": nothing happens
    assert [info.id for info in repo.list()] == ["a_main"]
    with pytest.raises(SessionError) as missing:
        repo.open("main")
    assert missing.value.code == "not_found"
    with repo.create(str(tmp_path), "main") as created:
        assert created.id == "main"
    with repo.open("main", read_only=True) as opened:
        assert opened.id == "main"
    assert sorted(info.id for info in repo.list()) == ["a_main", "main"]


def test_an_id_shared_by_two_cwds_is_ambiguous_not_a_silent_pick(tmp_path):  # session §9.5
    """``open``/``delete`` by an id that sessions of two cwds share used to take the first file in
    sorted order: another project's session was opened, or deleted."""
    from agentcore.session import SessionRepository

    repo = SessionRepository(tmp_path / "repo")
    for cwd in ("proj-a", "proj-b"):
        repo.create(str(tmp_path / cwd), "main").close()
    for call in (repo.open, repo.delete, repo.path_of):
        with pytest.raises(SessionError) as ambiguous:
            call("main")
        assert ambiguous.value.code == "invalid_query" and "ambiguous" in str(ambiguous.value)
        assert "proj-a" in str(ambiguous.value) and "proj-b" in str(ambiguous.value)
    assert len(repo.list()) == 2  # nothing deleted
    for info in repo.list():  # a listing entry still names one of them exactly
        with repo.open(info, read_only=True) as opened:
            assert opened.cwd == info.cwd


def test_listing_skips_a_named_pipe_instead_of_blocking(tmp_path):  # session §9.5 list
    import threading

    from agentcore.session import SessionRepository

    repo = SessionRepository(tmp_path / "repo")
    repo.create(str(tmp_path), "real").close()
    (info,) = repo.list()
    os.mkfifo(os.path.join(os.path.dirname(info.path), "2026-01-01T00-00-00-000Z_pipe.jsonl"))
    listed = []
    lister = threading.Thread(target=lambda: listed.append(repo.list()), daemon=True)
    lister.start()
    lister.join(30)  # an open() of the pipe would wait for a writer forever
    assert not lister.is_alive(), "listing blocked on a named pipe"
    assert [i.id for i in listed[0]] == ["real"]


def test_a_deeply_nested_file_in_the_directory_is_skipped_not_a_crash(tmp_path):  # session §9.5 list
    """``json`` raises RecursionError (not ValueError) for a line nested ~1000 levels deep: one such
    file among the sessions made ``list()`` raise, ``delete`` of it raise RecursionError instead of
    refusing, and ``create`` of an id it carries raise too."""
    from agentcore.session import SessionRepository

    repo = SessionRepository(tmp_path / "repo")
    with repo.create(str(tmp_path), "real") as session:
        session.append_message(U("hi"))
        session.set_name("kept")
    folder = repo.session_dir(str(tmp_path))
    deep_header = os.path.join(folder, "2026-01-01T00-00-00-000Z_deep.jsonl")
    with open(deep_header, "w") as handle:
        handle.write("[" * 100_000 + "\n")
    header = json.dumps({"type": "session", "version": 3, "id": "nested", "timestamp": "t", "cwd": str(tmp_path)})
    header += "\n"
    for name, line in (("a", '{"type":"session_info","name":'), ("b", ' {"type":"session_info","name":')):
        with open(os.path.join(folder, f"2026-01-01T00-00-00-000Z_nested-{name}.jsonl"), "w") as handle:
            handle.write(header + line + "[" * 100_000 + "}\n")
    for cwd in (None, str(tmp_path)):
        listed = {info.id: (info.name, info.message_count) for info in repo.list(cwd)}
        assert listed == {"real": ("kept", 1), "nested": (None, 0)}
    with pytest.raises(SessionError) as refused:
        repo.delete(deep_header)
    assert refused.value.code == "invalid_session" and os.path.exists(deep_header)
    with pytest.raises(SessionError) as claimed:
        repo.create(str(tmp_path), "deep")  # a file with that id is there, and it is no session
    assert claimed.value.code == "invalid_session" and "deep.jsonl" in str(claimed.value)


def test_listing_leaves_out_a_last_line_still_being_written(tmp_path):  # session §9.5, §13 readers
    """Another process appends a ``session_info`` line (or a message) while we list: its unfinished
    line used to hide the session's name and count as a message, unlike opening the session."""
    from agentcore.session import Session, SessionRepository

    repo = SessionRepository(tmp_path / "repo")
    with repo.create(str(tmp_path), "busy") as session:
        session.append_message(U("hi"))
        session.set_name("first name")
        path = session.path
    for torn in (
        b'{"type":"session_info","id":"x1","parentId":null,"timestamp":"t","name":"sec',
        b'{"type":"message","id"',
    ):
        with open(path, "ab") as handle:
            handle.write(torn)
        (info,) = repo.list()
        with Session.open(path, read_only=True) as opened:
            assert (info.name, info.message_count) == (opened.name, opened.get_session_stats().message_count)
        assert (info.name, info.message_count) == ("first name", 1)
        with open(path, "rb+") as handle:  # the writer's next attempt starts over
            handle.truncate(os.path.getsize(path) - len(torn))


def test_a_cwd_too_long_for_a_directory_name_still_gets_sessions(tmp_path):  # session §9.3 naming
    """The encoded cwd is one directory name: a cwd of some 250 characters made ``create`` fail
    with a bare ``OSError: File name too long`` (so ``agentcore chat`` could not start there)."""
    from agentcore.session import SessionRepository
    from agentcore.session.repository import encode_cwd

    repo = SessionRepository(tmp_path / "repo")
    deep = "/" + "/".join(["a-rather-long-directory-name"] * 10)
    other = deep[:-1] + "X"  # the same start: the hash keeps them apart
    with repo.create(deep, "one") as first, repo.create(other, "two") as second:
        assert len(os.fsencode(os.path.basename(os.path.dirname(first.path)))) <= 255
        assert os.path.dirname(first.path) != os.path.dirname(second.path)
    assert [info.id for info in repo.list(deep)] == ["one"]
    assert [info.id for info in repo.list(other)] == ["two"]
    assert encode_cwd("/home/u/proj") == "--home-u-proj--"  # short ones as before
    assert len(os.fsencode(encode_cwd("/" + "ü" * 300))) <= 255


@pytest.mark.parametrize(
    "item, error, words",
    [
        ("not an entry", TypeError, "entries[1] must be a SessionEntry or a dict, not str"),
        (None, TypeError, "entries[1] must be a SessionEntry or a dict, not NoneType"),
        (
            {"type": "custom", "parentId": None, "timestamp": "t"},
            SessionError,
            "entries[1]: invalid entry: an entry needs",
        ),
        (
            {"type": "model_change", "id": "m", "parentId": "a", "timestamp": "t"},
            SessionError,
            "entries[1]: invalid entry",
        ),
        (
            {"type": "custom", "id": "c", "parentId": "a", "timestamp": "t", "data": float("nan")},
            SessionError,
            "entries[1]: nan",
        ),
    ],
)
def test_memory_storage_prefill_errors_name_the_item(item, error, words):  # session §9.2
    """A bad pre-filled entry raised ``ValueError: dictionary update sequence element #0 ...``,
    ``TypeError: 'NoneType' object is not iterable``, or a message about "entry None" and a file
    to repair (a list has neither), never saying which item was wrong."""
    first = {"type": "custom", "id": "a", "parentId": None, "timestamp": "t", "customType": "x"}
    with pytest.raises(error) as info:
        MemorySessionStorage(entries=[first, item])
    assert words in str(info.value) and "file" not in str(info.value)


# --------------------------------------------------------------------------- local paths in URLs


def test_a_url_of_a_file_name_that_is_not_utf8_opens_that_file(tmp_path):
    """``%FF`` (how ``Path.as_uri()`` and ``quote(os.fsencode(path))`` write byte 0xFF) was decoded
    as U+FFFD: the URL named another file, so the session was "not found", or a new empty one
    was created beside it with ``create=True``."""
    from urllib.parse import quote

    path = os.fsdecode(os.path.join(os.fsencode(str(tmp_path)), b"caf\xe9.jsonl"))  # Latin-1 name
    with agentcore.Session.create(path) as session:
        first = session.append_message(U("hi"))
    url = "jsonl://" + quote(os.fsencode(path))
    assert "%E9" in url
    with open_session(url) as reopened:
        assert reopened.path == path and [e.id for e in reopened.entries()] == [first]
    with open_session(url, create=True) as again:
        assert again.path == path
    assert os.listdir(os.fsencode(str(tmp_path))) == [b"caf\xe9.jsonl"]


def test_a_tilde_url_starts_in_the_home_directory(tmp_path, monkeypatch):
    """``jsonl:~/notes.jsonl`` (as ``--session jsonl:~/notes.jsonl``: no shell expands a ``~``
    after ``jsonl:``) named a directory called ``~`` in the current directory."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    with open_session("jsonl:~/notes.jsonl", create=True) as session:
        assert session.path == str(home / "notes.jsonl")
    with open_session("sqlite:~/sessions.db?session=s1", create=True) as session:
        assert session.path == str(home / "sessions.db")
    assert sorted(os.listdir(tmp_path)) == ["home"]


def test_a_nul_in_a_url_path_is_named(tmp_path):
    """``%00`` reached ``os.open``: ``ValueError: embedded null byte``, saying nothing of the URL."""
    for url in (f"jsonl://{tmp_path}/a%00b.jsonl", f"sqlite://{tmp_path}/a%00b.db?session=s"):
        with pytest.raises(ValueError, match=r"URL path holds a NUL character \(%00\)"):
            open_session(url, create=True)


@pytest.mark.parametrize("url", ["sqlite::memory:", "sqlite:///:memory:?session=s1"])
def test_sqlite_memory_urls_are_refused_not_made_a_file(tmp_path, monkeypatch, url):
    """SQLite's ``:memory:`` name, in a URL, created a file named ``:memory:`` in the current
    directory (holding the conversation the user meant to keep in memory)."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="write memory:"):
        open_session(url, create=True)
    assert os.listdir(tmp_path) == []


def test_a_drive_url_names_the_drive_on_windows(monkeypatch):
    """``jsonl:///C:/Users/me/s.jsonl`` (the file-URL form of a drive path) gave the path
    ``/C:/Users/me/s.jsonl``, which Windows reads as a directory ``C:`` on the current drive
    (``ntpath.abspath`` makes it ``\\C:\\Users\\me\\s.jsonl``, an invalid name)."""
    from agentcore import _session_schemes

    monkeypatch.setattr(_session_schemes, "_WINDOWS", True)
    assert _session_schemes._local_path("jsonl:///C:/Users/me/a%20b.jsonl") == "C:/Users/me/a b.jsonl"
    assert _session_schemes._local_path("sqlite:///d:?session=x") == "d:"
    assert _session_schemes._local_path("jsonl:///srv/C:/x.jsonl") == "/srv/C:/x.jsonl"
    monkeypatch.setattr(_session_schemes, "_WINDOWS", False)  # elsewhere /C: is a directory name
    assert _session_schemes._local_path("jsonl:///C:/Users/me/x.jsonl") == "/C:/Users/me/x.jsonl"


def test_an_unknown_scheme_names_the_plugins_that_failed_to_load():  # the tools' lookups do too
    """A storage plugin whose ``register_storages`` failed (or that failed to import) left its
    scheme unknown, and the message said to install the plugin: it is installed, and broken."""

    class BrokenPostgres:
        @hookimpl
        def register_storages(self, register):
            raise RuntimeError("psycopg is not installed")

    pm = create_plugin_manager([BrokenPostgres()])
    with pytest.warns(Warning, match="psycopg is not installed"):
        with pytest.raises(ValueError) as info:
            open_storage("pgx://db/x?session=1", plugin_manager=pm)
    text = str(info.value)
    assert "unknown session URL scheme 'pgx' (known: jsonl:, memory:" in text
    assert "failed to load" in text and "psycopg is not installed" in text
    with pytest.raises(ValueError, match="install the plugin that provides it"):
        open_storage("nope:x", plugin_manager=create_plugin_manager())


@pytest.mark.parametrize("char, escape", [("\t", "%09"), ("\n", "%0A"), ("\r", "%0D")])
def test_a_tab_or_line_break_in_a_url_is_refused_not_dropped(tmp_path, char, escape):
    # urllib drops tabs, CR and LF anywhere in a URL: the session of another name was opened
    dropped = tmp_path / "ab.jsonl"
    with pytest.raises(ValueError, match=escape):
        open_session(f"jsonl://{tmp_path}/a{char}b.jsonl", create=True)
    assert not dropped.exists()  # used to create the session at .../ab.jsonl
    with pytest.raises(ValueError, match=escape):
        open_session(f"memory:?session=ab{char}")
    with pytest.raises(ValueError, match=escape) as info:
        open_session(f"sqlite://{tmp_path}/db.sqlite?session=a{char}b&x=pw-SECRET", create=True)
    assert "pw-SECRET" not in str(info.value)
    assert not (tmp_path / "db.sqlite").exists()
    with open_session(f"jsonl://{tmp_path}/a{escape}b.jsonl", create=True) as session:
        assert session.path == str(tmp_path / f"a{char}b.jsonl")


def test_a_query_parameter_given_twice_with_different_values_is_refused(tmp_path):
    db = tmp_path / "db.sqlite"
    with open_session(f"sqlite://{db}?session=a", create=True), open_session(f"sqlite://{db}?session=b", create=True):
        pass
    with pytest.raises(ValueError, match="session more than once"):  # which one? it used to open b
        open_session(f"sqlite://{db}?session=a&session=b")
    with pytest.raises(ValueError, match="fsync more than once"):
        open_session(f"jsonl://{tmp_path}/x.jsonl?fsync=always&fsync=never", create=True)
    with pytest.raises(ValueError, match="session more than once"):
        open_session("memory:?session=a&session=b")
    with open_session(f"sqlite://{db}?session=a&session=a") as same:  # the same value twice is that value
        assert same.id == "a"

"""Versioned schema migrations (upgrade from version 1, a newer schema refused) and the DSN's
password never appearing in reprs, errors or logs."""

from __future__ import annotations

import json
import logging

import psycopg
import pytest
from agentcore_postgres import PostgresSessionStorage
from agentcore_postgres.dsn import _secrets_of, display_name, parse_dsn, scrub
from agentcore_postgres.schema import SCHEMA_VERSION, migrate, schema_version
from conftest import with_schema

from agentcore import open_session
from agentcore.session import Session, SessionError, SessionLockedError
from agentcore.types import TextContent, UserMessage


def U(text):
    return UserMessage([TextContent(text)], timestamp=1)


def version_of(dsn):
    with psycopg.connect(dsn, autocommit=True) as conn:
        return schema_version(conn)


# --------------------------------------------------------------------------- migrations


def test_a_fresh_database_gets_the_current_schema(fresh_dsn):
    assert version_of(fresh_dsn) is None
    PostgresSessionStorage(fresh_dsn).close()
    assert version_of(fresh_dsn) == SCHEMA_VERSION == 2


def test_upgrade_from_version_1_keeps_sessions_and_fills_the_listing_columns(fresh_dsn):
    with Session.in_memory(cwd="/old") as source:  # entries as a version-1 writer stored them
        source.append_message(U("q"))
        source.set_name(" Old\nname ")
        source.append_message(U("r"))
        rows = [json.loads(source.storage.raw_line(i)) for i in source.storage.entry_ids()]
        header = source.storage.header
    with psycopg.connect(fresh_dsn, autocommit=True) as conn:
        assert migrate(conn, target=1) == 0
        conn.execute(
            "INSERT INTO agentcore_sessions VALUES ('v1', %s, '/old', %s, NULL)",
            (json.dumps(header.to_dict()), header.timestamp),
        )
        for seq, row in enumerate(rows, 1):
            conn.execute(
                "INSERT INTO agentcore_entries VALUES ('v1', %s, %s, %s, %s, %s, %s, %s)",
                (
                    seq,
                    row["id"],
                    row["parentId"],
                    row["type"],
                    row["timestamp"],
                    row.get("message", {}).get("role"),
                    json.dumps(row),
                ),
            )
    assert version_of(fresh_dsn) == 1
    with pytest.raises(SessionError, match="schema version 1; open a session once without read_only"):
        PostgresSessionStorage(fresh_dsn, "v1", read_only=True)  # readers never migrate
    with pytest.raises(SessionError, match="schema version 1"):
        PostgresSessionStorage.list_sessions(fresh_dsn)
    with Session(PostgresSessionStorage(fresh_dsn, "v1")) as s:  # a writer upgrades
        assert [e.type for e in s.entries()] == ["message", "session_info", "message"]
        assert s.name == "Old name"
        s.append_message(U("new"))
    assert version_of(fresh_dsn) == 2
    [info] = PostgresSessionStorage.list_sessions(fresh_dsn)
    assert (info.id, info.name, info.message_count) == ("v1", "Old name", 3)


def test_a_newer_schema_is_refused_and_left_unchanged(fresh_dsn):
    PostgresSessionStorage(fresh_dsn, "kept", create=True).close()
    with psycopg.connect(fresh_dsn, autocommit=True) as conn:
        conn.execute("UPDATE agentcore_schema_version SET version = 7")
    for opener in (
        lambda: PostgresSessionStorage(fresh_dsn, "kept"),
        lambda: PostgresSessionStorage(fresh_dsn, "kept", read_only=True),
        lambda: PostgresSessionStorage.create(fresh_dsn),
    ):
        with pytest.raises(SessionError) as info:
            opener()
        assert info.value.code == "storage"
        assert "schema version 7, newer than this agentcore-postgres supports (2)" in str(info.value)
        assert "upgrade agentcore-postgres" in str(info.value)
    assert version_of(fresh_dsn) == 7
    with psycopg.connect(fresh_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM agentcore_sessions").fetchone()[0] == 1


def with_isolation(dsn, isolation):
    """``dsn`` whose transactions default to ``isolation`` (as a server configured so makes them)."""
    options = psycopg.conninfo.conninfo_to_dict(dsn)["options"]
    setting = isolation.replace(" ", "\\ ")  # a space inside one -c option is escaped
    dsn = psycopg.conninfo.make_conninfo(dsn, options=f"{options} -cdefault_transaction_isolation={setting}")
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.execute("SHOW default_transaction_isolation").fetchone()[0] == isolation
    return dsn


@pytest.mark.parametrize("isolation", [None, "repeatable read", "serializable"])
def test_concurrent_first_openers_migrate_once(fresh_dsn, isolation):
    """Many workers opening at once migrate once, also on a database whose
    default_transaction_isolation is not read committed: there the migration's snapshot predated
    its lock, so every opener but the first created the tables again ("relation already exists")."""
    import threading

    dsn = with_isolation(fresh_dsn, isolation) if isolation else fresh_dsn
    barrier = threading.Barrier(4)
    errors = []

    def open_one(n):
        barrier.wait()
        try:
            PostgresSessionStorage(dsn, f"c{n}", create=True).close()
        except Exception as exc:  # pragma: no cover - the failure is reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_one, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and version_of(fresh_dsn) == 2
    assert len(PostgresSessionStorage.list_sessions(dsn)) == 4


def test_a_session_created_meanwhile_is_already_exists_whatever_the_default_isolation(fresh_dsn):
    """Under a serializable default the creator's snapshot predated the other creator's commit, so
    it got "could not serialize access" (a storage error) instead of already_exists."""
    import threading
    import time

    dsn = with_isolation(fresh_dsn, "serializable")
    PostgresSessionStorage(dsn, "warm", create=True).close()  # the tables exist
    errors = []
    with psycopg.connect(dsn) as other:  # a transaction: the other creator, not yet committed
        other.execute("INSERT INTO agentcore_sessions(id, header, cwd, created) VALUES ('same', '{}', '/w', 'x')")
        creator = threading.Thread(target=lambda: errors.append(catch(PostgresSessionStorage.create, dsn, "same")))
        creator.start()
        with psycopg.connect(dsn, autocommit=True) as watcher:  # until the creator waits for that row
            deadline = time.monotonic() + 30
            while not watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND query LIKE 'INSERT INTO agentcore_sessions%%'"
            ).fetchone()[0]:
                assert time.monotonic() < deadline and creator.is_alive()
                time.sleep(0.01)
        other.commit()
        creator.join()
    assert errors[0].code == "already_exists", errors[0]


def catch(function, *args):
    try:
        function(*args)
    except SessionError as exc:
        return exc
    raise AssertionError("no error")


# --------------------------------------------------------------------------- secrets


def test_the_password_never_appears(pg_dsn, pg_server_dsn, password, caplog, fresh_dsn):
    caplog.set_level(logging.DEBUG)
    seen = []
    storage = PostgresSessionStorage(pg_dsn, "secret-check", create=True)
    session = Session(storage)
    session.append_message(U("x"))
    seen += [
        repr(storage),
        str(storage),
        repr(session),
        storage.path,
        repr(vars(storage)),
        repr(parse_dsn(pg_dsn)),
        str(parse_dsn(pg_dsn)),
    ]
    assert storage.path.startswith("postgresql://agentcore@127.0.0.1:") or "@" in storage.path
    with pytest.raises(SessionLockedError) as locked:
        PostgresSessionStorage(pg_dsn, "secret-check")
    seen.append(str(locked.value))
    session.close()
    wrong = pg_server_dsn.replace(password, password[::-1])
    bad_password_words = wrong.split(":")[2].split("@")[0]
    for opener in (
        lambda: PostgresSessionStorage(pg_dsn, "missing"),  # not_found
        lambda: PostgresSessionStorage(wrong),  # authentication fails
        lambda: PostgresSessionStorage(pg_server_dsn.replace("127.0.0.1:", "127.0.0.1:1")),  # no server
        lambda: PostgresSessionStorage(f"host=127.0.0.1 password={password} nonsense"),  # libpq parse error
        lambda: PostgresSessionStorage(f"host=127.0.0.1 password='{password}' bogus_option=1"),
        lambda: open_session(with_schema(pg_dsn, "s") + " x"),  # not a URL
        lambda: PostgresSessionStorage.list_sessions(wrong),
    ):
        with pytest.raises((SessionError, ValueError)) as info:
            opener()
        seen += [str(info.value), repr(info.value)]
        cause = info.value.__cause__ or info.value.__context__
        assert cause is None or password not in str(cause)
    assert any("password authentication failed" in text for text in seen)
    for text in seen + [caplog.text]:
        assert password not in text and bad_password_words not in text, text


def test_display_forms_of_dsns():
    assert (
        parse_dsn("postgresql://me:pw@db.example:5433/app?sslmode=require").display
        == "postgresql://me@db.example:5433/app"
    )
    assert parse_dsn("host=/run/pg dbname=x password='a b'").display == "postgresql://[/run/pg]/x"
    assert parse_dsn("host=/run/pg dbname=x password='a b'").scrub("said a b and 'a b'") == "said *** and ***"
    with pytest.raises(ValueError, match="invalid PostgreSQL DSN") as info:
        parse_dsn("password=hunter2 what")
    assert "hunter2" not in str(info.value)


@pytest.mark.parametrize(
    "dsn, pieces",
    [
        ("host=x password=se cret", ("se", "cret")),  # an unquoted space: libpq quotes "cret" back
        ("password=hunter2 what", ("hunter2", "what")),
        ("postgresql://u:p%40ss word@h/db", ("p@ss word", "p%40ss word", "ss word")),
        ("host=x sslpassword=tls key", ("tls", " key")),
        ("postgresql://u@h/db?oauth_client_secret=zz9top&bad", ("zz9top",)),
    ],
)
def test_an_unparsable_dsn_quotes_no_piece_of_a_secret(dsn, pieces):
    with pytest.raises(ValueError, match="invalid PostgreSQL DSN") as info:
        parse_dsn(dsn)
    message = str(info.value)
    for piece in pieces:
        assert piece not in message, message
    assert '"***"' in message  # where libpq quoted a piece of the DSN


def test_an_unparsable_dsn_still_names_the_parameters():
    with pytest.raises(ValueError) as info:
        parse_dsn("host=x port")
    assert str(info.value) == 'invalid PostgreSQL DSN: missing "=" after "port" in connection info string'


def test_secret_parameters_besides_the_password_are_scrubbed():
    kv = parse_dsn("host=h sslpassword=tlskey9 oauth_client_secret='o s'")
    assert kv.scrub("tlskey9 o s 'tlskey9'") == "*** *** '***'"
    url = parse_dsn("postgresql://u:pw%2Fx@h/db?sslpassword=tls%20k+y&sslmode=require")
    assert url.display == "postgresql://u@h/db"
    assert url.scrub("pw/x tls k+y tls%20k+y") == "*** *** ***"
    assert parse_dsn("host=h password=a\\\\b").scrub("said 'a\\\\b' and a\\b") == "said '***' and ***"


@pytest.mark.parametrize(
    "dsn, shown, pieces",
    [
        # libpq ends the password at the first "@" (host "sq7z@127.0.0.1"), URL parsers at the last
        (
            "postgresql://agentcore:hunter2@sq7z@127.0.0.1:1/db",
            "postgresql://agentcore@127.0.0.1:1/db",
            ("hunter2", "sq7z"),
        ),
        ("postgres://:hunter2@sq7z@[::1]:1/db", "postgres://[::1]:1/db", ("hunter2", "sq7z")),
        ("postgresql://me@srv9:hunter2@127.0.0.1:1/db", "postgresql://me@127.0.0.1:1/db", ("hunter2", "srv9")),
        # libpq: host "u", port "pa7", database "sq9@127.0.0.1:1/db"; URL parsers the same
        ("postgresql://u:pa7/sq9@127.0.0.1:1/db", "postgresql://u@127.0.0.1:1/db", ("pa7", "sq9")),
        ("postgresql://u:pa7@127.0.0.1/sq9@127.0.0.1:1/db", "postgresql://u@127.0.0.1:1/db", ("pa7", "sq9")),
        # libpq's password "pa7?sq9" (or "pa7#sq9"); URL parsers: host "u", port "pa7", no password
        (
            "postgresql://u:pa7?sq9@127.0.0.1:1/db?sslpassword=tls8x",
            "postgresql://u@127.0.0.1:1/db",
            ("pa7", "sq9", "tls8x"),
        ),
        ("postgresql://u:pa7#sq9@127.0.0.1:1/db", "postgresql://u@127.0.0.1:1/db", ("pa7", "sq9")),
    ],
)
def test_a_url_whose_parsers_disagree_on_the_password_is_refused_before_connecting(dsn, shown, pieces):
    """Nothing listens on port 1: a ValueError, not a failure to connect, proves nothing was tried."""
    for opener in (lambda: PostgresSessionStorage(dsn), lambda: open_session(dsn, create=True)):
        with pytest.raises(ValueError) as info:
            opener()
        message = str(info.value)
        assert message.startswith(f"invalid PostgreSQL DSN {shown}: "), message
        assert "percent-encode '@'" in message and "%40" in message
        for piece in pieces:
            assert piece not in message and piece not in repr(info.value), message


def test_only_a_user_info_with_unencoded_at_slash_question_or_hash_signs_is_refused():
    with pytest.raises(ValueError) as info:
        parse_dsn("postgresql://agentcore:hunter2@ss@127.0.0.1:1/db")
    assert str(info.value) == (
        "invalid PostgreSQL DSN postgresql://agentcore@127.0.0.1:1/db: libpq and URL parsers end its user "
        "name and password in different places; percent-encode '@' in the password (and user name) as %40"
    )
    assert parse_dsn("postgresql://me%40srv:hunter2%40sq7z@h/d%40b").display == "postgresql://me@srv@h/d@b"
    assert parse_dsn("postgresql://u:pa7%2Fsq9%3Fx%23y@h/db").scrub("pa7/sq9?x#y") == "***"
    assert parse_dsn("postgresql://u:pw@h/db?application_name=me@work").display == "postgresql://u@h/db"
    assert parse_dsn("postgresql://h/db?application_name=me@work").display == "postgresql://h/db"
    assert parse_dsn("host=h password=pa7@sq9/x?y#z").scrub("pa7@sq9/x?y#z") == "***"


def test_every_piece_of_a_misread_user_info_is_a_secret():
    """In depth, should an ambiguous URL get past the refusal: a driver quotes what libpq took for
    the host, the tail of the password."""
    secrets = _secrets_of("postgresql://agentcore:hunter2@sq7z@127.0.0.1:1/db")
    said = "failed to resolve host 'sq7z@127.0.0.1' for agentcore (hunter2, hunter2@sq7z)"
    assert scrub(said, tuple(secrets)) == "failed to resolve host '***@127.0.0.1' for agentcore (***, ***)"
    assert "" not in secrets and "agentcore" not in secrets
    assert {"pa7", "sq9"} <= set(_secrets_of("postgresql://u:pa7:sq9@h/db"))
    assert {"pa7/sq9", "pa7?sq9", "pa7#sq9"} <= {
        s for d in ("u:pa7/sq9@h/db", "u:pa7?sq9@h/db", "u:pa7#sq9@h/db") for s in _secrets_of(f"postgresql://{d}")
    }


def test_a_host_holding_an_at_sign_is_never_shown():
    assert display_name({"user": "u", "host": "sq7z@127.0.0.1,h2", "port": "1", "dbname": "db"}) == (
        "postgresql://u@***,h2:1/db"
    )
    assert parse_dsn("host=sq7z@127.0.0.1 user=u").display == "postgresql://u@***/"

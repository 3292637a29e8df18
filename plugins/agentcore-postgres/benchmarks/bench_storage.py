"""PostgreSQL session storage against SQLite's: append latency, and open + build_context of a
10,000-entry session (issue 16, "The proof").

Both storages get the same entries (a user/assistant chain with ~400-byte messages). Appends are
timed one by one (median and 99th percentile, µs); open + build_context is the wall time to open
the session as a writer and build the context of its leaf (median of ``--rounds``). Rounds of the
two backends alternate so drift on a shared machine hits both alike; each PostgreSQL figure is
printed as a ratio to SQLite's from the same run (SQLite = 1.00, the floor). PostgreSQL runs twice:
with the server's default ``synchronous_commit=on`` (every append waits for its WAL flush) and with
``options=-csynchronous_commit=off`` in the DSN (what SQLite's default ``fsync="never"`` promises:
committed appends survive a client crash; a server crash may lose the last few, never corrupt).

The server: ``AGENTCORE_TEST_PG_DSN`` when set, else one started with tests/pg-server.sh (loopback
TCP, so each append is one round trip to a local server).

    python plugins/agentcore-postgres/benchmarks/bench_storage.py [--appends 2000] [--entries 10000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent.parent.parent)]

from agentcore_postgres import PostgresSessionStorage  # noqa: E402
from psycopg import conninfo  # noqa: E402

from agentcore.session import Session, SqliteSessionStorage  # noqa: E402
from agentcore.types import AssistantMessage, TextContent, Usage, UserMessage  # noqa: E402

TEXT = "The quick brown fox jumps over the lazy dog. " * 9  # ~400 bytes


def message(n: int):
    if n % 2 == 0:
        return UserMessage([TextContent(f"{n} {TEXT}")], timestamp=n)
    return AssistantMessage(
        [TextContent(f"{n} {TEXT}")],
        api="anthropic-messages",
        provider="anthropic",
        model="claude-sonnet-4-5",
        usage=Usage(input=100, output=50),
        stop_reason="stop",
    )


def entry_lines(count: int) -> List[bytes]:
    with Session.in_memory(cwd="/bench") as s:
        for n in range(count):
            s.append_message(message(n))
        return [s.storage.raw_line(i) for i in s.storage.entry_ids()]


def append_latencies(make: Callable[[], Session], count: int) -> List[float]:
    out = []
    with make() as s:
        for n in range(count):
            m = message(n)
            start = time.perf_counter()
            s.append_message(m)
            out.append(time.perf_counter() - start)
    return out


def open_and_build(open_: Callable[[], Session]) -> float:
    start = time.perf_counter()
    with open_() as s:
        context = s.build_context()
    elapsed = time.perf_counter() - start
    assert context.messages
    return elapsed


def start_server(directory: str) -> str:
    script = HERE.parent / "tests" / "pg-server.sh"
    out = subprocess.run(["bash", str(script), "start", directory], capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=2000)
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    server_dir = None
    dsn = os.environ.get("AGENTCORE_TEST_PG_DSN")
    if not dsn:
        server_dir = tempfile.mkdtemp(prefix="agentcore-pg-bench-")
        os.chmod(server_dir, 0o755)
        dsn = start_server(os.path.join(server_dir, "pg"))
    work = tempfile.mkdtemp(prefix="agentcore-bench-")
    schema = "bench_" + str(os.getpid())
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    pg = conninfo.make_conninfo(dsn, options=f"-csearch_path={schema}")
    pg_async = conninfo.make_conninfo(dsn, options=f"-csearch_path={schema} -csynchronous_commit=off")
    db = os.path.join(work, "bench.db")
    backends: Dict[str, Dict[str, Callable[..., Session]]] = {
        "sqlite": {
            "new": lambda: Session(SqliteSessionStorage.create(db, cwd="/bench")),
            "create": lambda lines: SqliteSessionStorage.create(db, cwd="/bench", lines=lines),
            "open": lambda sid: Session(SqliteSessionStorage(db, sid)),
        },
        "postgres": {
            "new": lambda: Session(PostgresSessionStorage.create(pg, cwd="/bench")),
            "create": lambda lines: PostgresSessionStorage.create(pg, cwd="/bench", lines=lines),
            "open": lambda sid: Session(PostgresSessionStorage(pg, sid)),
        },
        "postgres async commit": {
            "new": lambda: Session(PostgresSessionStorage.create(pg_async, cwd="/bench")),
            "create": lambda lines: PostgresSessionStorage.create(pg_async, cwd="/bench", lines=lines),
            "open": lambda sid: Session(PostgresSessionStorage(pg_async, sid)),
        },
    }
    try:
        lines = entry_lines(args.entries)
        big = {}
        for name, b in backends.items():
            storage = b["create"](lines)
            big[name] = storage.session_id if hasattr(storage, "session_id") else None
            storage.close()
        appends: Dict[str, List[float]] = {name: [] for name in backends}
        opens: Dict[str, List[float]] = {name: [] for name in backends}
        per_round = max(1, args.appends // args.rounds)
        for _ in range(args.rounds):
            for name, b in backends.items():
                appends[name] += append_latencies(b["new"], per_round)
                sid = big[name]
                opens[name].append(open_and_build(lambda b=b, sid=sid: b["open"](sid)))
        base_median = statistics.median(appends["sqlite"])
        base_p99 = statistics.quantiles(appends["sqlite"], n=100)[98]
        base_open = statistics.median(opens["sqlite"])
        print(
            f"{len(appends['sqlite'])} appends per backend; open + build_context of {args.entries} entries, "
            f"median of {args.rounds}"
        )
        print(
            f"{'backend':24} {'append p50':>12} {'ratio':>7} {'append p99':>12} {'ratio':>7} "
            f"{'open+ctx':>10} {'ratio':>7}"
        )
        for name in backends:
            median = statistics.median(appends[name])
            p99 = statistics.quantiles(appends[name], n=100)[98]
            opened = statistics.median(opens[name])
            print(
                f"{name:24} {median * 1e6:10.0f}µs {median / base_median:7.2f} {p99 * 1e6:10.0f}µs "
                f"{p99 / base_p99:7.2f} {opened * 1e3:8.0f}ms {opened / base_open:7.2f}"
            )
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
        if server_dir:
            subprocess.run(
                ["bash", str(HERE.parent / "tests" / "pg-server.sh"), "stop", os.path.join(server_dir, "pg")],
                capture_output=True,
            )
            os.rmdir(server_dir)
        for name in os.listdir(work):
            os.unlink(os.path.join(work, name))
        os.rmdir(work)


if __name__ == "__main__":
    main()

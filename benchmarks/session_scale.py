"""Session scale benchmark: a 100,000-entry session with realistic message sizes (issues 5 and 11).

Prints, each with its ratio against a floor measured in the same run (the machine is shared, so
absolute figures vary with load; the ratios are what to compare across runs):
  * append per entry, amortized (JSONL with fsync off; SQLite with the default durability)
      floors: a raw ``os.write`` of the line; a bare autocommit INSERT of the line
      targets: JSONL <= 100 us, SQLite <= 50 us
  * open + build_context() (JSONL and SQLite), in ``--rounds`` rounds (default 5), each of which
    times the floor and both backends in a shuffled order, on a heap holding nothing else of size
      floor: plain ``json.loads`` of the same lines, results kept, collector running as usual
      figure: the median over the rounds of each round's ratio (wall time, then CPU time), and the
      median seconds; the range of the ratios shows how much the machine moved meanwhile
      target (issue 11 item 7, uncompacted): <= 1.0x that floor. The issue wrote it as "<= 1.0 s
      (today 1.65 s and 1.55 s)" on a day the JSONL figure was 1.5x and the SQLite one 1.25x the
      floor, i.e. when the floor took about 1.1-1.2 s; the strict reading of that day's numbers,
      <= 0.91x (JSONL) and <= 0.81x (SQLite), is printed too
  * what the collector pause of bulk decodes is worth: open + build_context() with the pause and
    with it replaced by a no-op, each followed by the same allocation workload (which is where
    the collector catches up on what a pause left it); CPU seconds, median of 3
  * memory of the loaded session vs the file size (tracemalloc)      target <= 3x
    counted twice: right after opening, and after build_context() including the returned messages
  * the file size

The SQLite append floor is a bare autocommit INSERT of the same line under the storage's own
pragmas (WAL, synchronous=NORMAL) and SQLite's automatic checkpoint (every 1000 pages, its
default); the same INSERT without checkpoints (what the storage's appends pay, its checkpoints
running on a background thread) and under synchronous=OFF (what giving up crash safety of the
database file would gain, which the storage does not do) are printed for comparison.

The session looks like a long coding-agent run: turns of user prompt, assistant text + tool call,
tool result (1-3 KB of output), assistant answer; a compaction every ~400 entries (what a 200k-token
context window forces), a model/thinking change now and then, a few branches. ``--no-compaction``
builds one uncompacted branch instead, so build_context must decode all 100,000 messages (worst case,
the one the issue 11 target is about).

    python benchmarks/session_scale.py [--entries 100000] [--no-compaction] [--rounds 5] [--dir /tmp/x]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import random
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _rounds import round_orders  # noqa: E402

import agentcore.session.process_state as session_process_state  # noqa: E402
from agentcore.session import Session, SqliteSessionStorage  # noqa: E402
from agentcore.types import AssistantMessage, TextContent, ToolCall, ToolResultMessage, Usage, UsageCost, UserMessage  # noqa: E402

WORDS = (
    "session tree branch compaction summary model provider token context message tool result "
    "python file error test assert function class module import return value list dict"
).split()


def prose(rng: random.Random, chars: int) -> str:
    out, size = [], 0
    while size < chars:
        word = rng.choice(WORDS)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)


def usage(rng: random.Random) -> Usage:
    inp, out, read = rng.randint(10, 3000), rng.randint(50, 1500), rng.randint(0, 150000)
    return Usage(
        inp,
        out,
        read,
        0,
        inp + out + read,
        UsageCost(inp * 3e-6, out * 1.5e-5, read * 3e-7, 0, inp * 3e-6 + out * 1.5e-5 + read * 3e-7),
    )


def generate(session: Session, count: int, compaction: bool, seed: int = 7) -> float:
    """Append ``count`` entries; returns the seconds spent inside the append calls."""
    rng = random.Random(seed)
    spent = 0.0
    n = 0
    turn_start = None
    since_compaction = 0
    while n < count:
        step = n % 4
        if step == 0:
            message = UserMessage([TextContent(prose(rng, rng.randint(60, 400)))], timestamp=n)
        elif step == 1:
            message = AssistantMessage(
                [
                    TextContent(prose(rng, rng.randint(100, 600))),
                    ToolCall(f"call_{n}", "read", {"path": f"src/module_{n % 97}.py"}),
                ],
                api="anthropic-messages",
                provider="anthropic",
                model="claude-sonnet-4-5",
                usage=usage(rng),
                stop_reason="toolUse",
                timestamp=n,
            )
        elif step == 2:
            message = ToolResultMessage(
                f"call_{n - 1}", "read", [TextContent(prose(rng, rng.randint(800, 3000)))], timestamp=n
            )
        else:
            message = AssistantMessage(
                [TextContent(prose(rng, rng.randint(100, 500)))],
                api="anthropic-messages",
                provider="anthropic",
                model="claude-sonnet-4-5",
                usage=usage(rng),
                timestamp=n,
            )
        started = time.perf_counter()
        entry_id = session.append_message(message)
        spent += time.perf_counter() - started
        n += 1
        since_compaction += 1
        if step == 0:
            turn_start = entry_id
        if compaction and since_compaction >= 400 and step == 3 and n < count:
            started = time.perf_counter()
            session.append_compaction(prose(rng, 3000), turn_start, 150000, {"readFiles": [], "modifiedFiles": []})
            spent += time.perf_counter() - started
            n += 1
            since_compaction = 0
        if n % 5000 == 4 and n < count:
            started = time.perf_counter()
            session.append_thinking_level_change(rng.choice(["off", "low", "high"]))
            spent += time.perf_counter() - started
            n += 1
    return spent


def timed(fn):
    started = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - started


#: issue 11's "<= 1.0 s (today 1.65 s and 1.55 s)", read with that day's ratios to the floor
#: (1.5x and 1.25x): 1.0 s / (1.65 s / 1.5) and 1.0 s / (1.55 s / 1.25)
STRICT = {"JSONL": 1.0 / (1.65 / 1.5), "SQLite": 1.0 / (1.55 / 1.25)}


def open_build_rounds(openers, lines, rounds: int, compaction: bool) -> None:
    """open + build_context() of each backend (``openers``: name -> a function opening its
    Session) against the json.loads floor, ``rounds`` times.

    Each round measures the floor and every opener once, in a fresh order (so no backend always
    runs right after another's teardown; see :func:`_rounds.round_orders`), each after a full collection and with
    nothing else of size alive, and divides each backend's wall and CPU seconds by the floor's of
    the same round. Printed: the median of those per-round ratios, their range, and the median
    seconds. Per-round ratios cancel the machine's drift between rounds; their median discards a
    round that a neighbour's load hit.
    """
    names = ["floor", *openers]
    wall = {name: [] for name in names}
    cpu = {name: [] for name in names}
    messages = {}

    def floor():
        return [json.loads(line) for line in lines]

    def open_and_build(name):
        s = openers[name]()
        return s, s.build_context()

    def run(name):
        gc.collect()
        started, started_cpu = time.perf_counter(), time.process_time()
        kept = floor() if name == "floor" else open_and_build(name)
        wall[name].append(time.perf_counter() - started)
        cpu[name].append(time.process_time() - started_cpu)
        if name != "floor":
            messages[name] = len(kept[1].messages)
            kept[0].close()
        del kept
        gc.collect()

    for order in round_orders(names, rounds):
        for name in order:
            run(name)
    print(
        f"json.loads floor of the same {len(lines)} lines (collector running as usual): median "
        f"{statistics.median(wall['floor']):.3f} s wall, {statistics.median(cpu['floor']):.3f} s CPU over {rounds} rounds"
    )
    for name in names[1:]:
        ratios = [w / f for w, f in zip(wall[name], wall["floor"])]
        cpu_ratios = [c / f for c, f in zip(cpu[name], cpu["floor"])]
        goal = "[target <= 1.5 s]" if compaction else f"[target <= 1.0x; strict reading <= {STRICT[name]:.2f}x]"
        print(
            f"open + build_context {name}: {statistics.median(ratios):.2f}x the floor (rounds {min(ratios):.2f}-"
            f"{max(ratios):.2f}x), CPU {statistics.median(cpu_ratios):.2f}x; median {statistics.median(wall[name]):.3f} s wall, "
            f"{statistics.median(cpu[name]):.3f} s CPU; context of {messages[name]} messages  {goal}"
        )


def gc_pause_figure(opener, runs: int = 3) -> None:
    """What the collector pause of bulk decodes is worth: open + build_context with the library's
    pause and with it replaced by a no-op, each followed by the same allocation workload (where the
    collector catches up on what a pause left it). CPU seconds (less sensitive to other processes
    on a shared machine than wall time), median of ``runs`` interleaved runs."""

    @contextlib.contextmanager
    def no_pause():
        yield

    def workload():
        return [[n] for n in range(300_000)]

    def one() -> tuple:
        gc.collect()
        started = time.process_time()
        s = opener()
        context = s.build_context()
        call = time.process_time() - started
        started = time.process_time()
        junk = workload()
        after = time.process_time() - started
        s.close()
        del s, context, junk
        gc.collect()
        return call, after

    real = session_process_state.gc_paused
    results: dict = {"paused": [], "not paused": []}
    for _ in range(runs):
        for label in results:
            pause = real if label == "paused" else no_pause
            session_process_state.gc_paused = pause
            try:
                results[label].append(one())
            finally:
                session_process_state.gc_paused = real

    p_call, n_call = (statistics.median([r[0] for r in results[k]]) for k in ("paused", "not paused"))
    p_all, n_all = (statistics.median([r[0] + r[1] for r in results[k]]) for k in ("paused", "not paused"))
    print(
        f"collector pause of bulk decodes (JSONL, CPU s, median of {runs}): open + build_context "
        f"{p_call:.3f} s paused vs {n_call:.3f} s not = {p_call / n_call:.2f}x; counting a workload after "
        f"it (300k small lists, where the collector catches up) {p_all:.3f} s vs {n_all:.3f} s = "
        f"{p_all / n_all:.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--no-compaction", action="store_true")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the open + build_context phase")
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    workdir = Path(args.dir or tempfile.mkdtemp(prefix="session-scale-"))
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "big.jsonl"
    db = workdir / "big.db"
    for stale in (path, db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        if stale.exists():
            stale.unlink()
    compaction = not args.no_compaction
    print(f"entries={args.entries} compaction={'every ~400 entries' if compaction else 'none (worst case)'}")

    session = Session.create(path, cwd="/bench")
    append_s = generate(session, args.entries, compaction)
    session.close()
    size = path.stat().st_size
    lines = path.read_bytes().splitlines(keepends=True)[1:]
    per_append = append_s / args.entries * 1e6

    floor_fd = os.open(workdir / "floor.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND)
    _, floor_write = timed(lambda: [os.write(floor_fd, line) for line in lines])
    os.close(floor_fd)
    os.unlink(workdir / "floor.bin")
    floor_per_write = floor_write / len(lines) * 1e6
    sample = lines[: min(len(lines), 20000)]
    _, floor_dumps = timed(
        lambda: [json.dumps(json.loads(line), separators=(",", ":"), ensure_ascii=False) for line in sample]
    )
    floor_json = floor_dumps / len(sample) * 1e6

    print(f"file size: {size / 1e6:.1f} MB ({size / args.entries:.0f} bytes per entry)")
    print(
        f"append JSONL (fsync never): {per_append:.1f} us/entry  [target <= 100 us]  "
        f"ratio vs raw os.write of the line {per_append / floor_per_write:.1f}x ({floor_per_write:.1f} us), "
        f"vs json loads+dumps of it {per_append / floor_json:.1f}x ({floor_json:.1f} us)"
    )

    session = None  # the generator's index: nothing of size may stay alive for the phases below
    gc.collect()
    openers = {
        "JSONL": lambda: Session.open(path, read_only=True),
        "SQLite": lambda: Session(SqliteSessionStorage(db, "big", read_only=True)),  # db: filled by the import below
    }
    gc_pause_figure(openers["JSONL"])

    _, import_s = timed(lambda: SqliteSessionStorage.create(db, cwd="/bench", session_id="big", lines=lines).close())
    small = SqliteSessionStorage.create(db, cwd="/bench", session_id="appends")
    small_session = Session(small)
    sqlite_append = generate(small_session, 5000, compaction) / 5000 * 1e6
    conn = small._conn
    small._checkpointer.idle.wait(30)
    conn.execute("PRAGMA wal_autocheckpoint=1000")  # the floor: a bare INSERT under SQLite's defaults

    floor_rows = min(2000, len(lines))  # a small --entries has fewer lines than that

    def insert_floor(label: str) -> float:
        """Seconds for ``floor_rows`` bare autocommit INSERTs of the lines on the storage's connection."""
        _, seconds = timed(
            lambda: [
                conn.execute(
                    "INSERT INTO entries VALUES (?,?,?,?,?,?,?,?)",
                    (label, i, f"f{i}", None, "message", "t", "user", lines[i].decode("utf-8")),
                )
                for i in range(floor_rows)
            ]
        )
        return seconds

    sqlite_floor = insert_floor("floor") / floor_rows * 1e6
    conn.execute("PRAGMA wal_autocheckpoint=0")
    raw_insert_no_checkpoint = insert_floor("floor-nc")
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
    conn.execute("PRAGMA wal_autocheckpoint=1000")
    conn.execute("PRAGMA synchronous=OFF")
    raw_insert_off = insert_floor("floor-off")
    conn.execute("PRAGMA synchronous=NORMAL")
    small_session.close()
    print(
        f"append SQLite (synchronous=NORMAL, 5000 entries): {sqlite_append:.1f} us/entry  [target <= 50 us]; "
        f"ratio vs a bare autocommit INSERT of the line {sqlite_append / sqlite_floor:.1f}x ({sqlite_floor:.1f} us; "
        f"{raw_insert_no_checkpoint / floor_rows * 1e6:.1f} us without checkpoints, "
        f"{raw_insert_off / floor_rows * 1e6:.1f} us with synchronous=OFF); "
        f"bulk import of all {len(lines)} lines {import_s:.1f} s"
    )

    small_session = small = conn = None
    gc.collect()

    open_build_rounds(openers, lines, args.rounds, compaction)

    for label, opener in openers.items():
        tracemalloc.start()
        s = opener()
        loaded = tracemalloc.get_traced_memory()[0]
        context = s.build_context()
        after_context = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        print(
            f"memory of the loaded {label} session: {loaded / 1e6:.1f} MB = {loaded / size:.2f}x the file size "
            f"[target <= 3x]; after build_context (incl. the returned context of {len(context.messages)} "
            f"messages and the decode cache) {after_context / 1e6:.1f} MB = {after_context / size:.2f}x"
        )
        s.close()
        del s, context
    print(f"files in {workdir}")


if __name__ == "__main__":
    main()

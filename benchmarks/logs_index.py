"""``agentcore logs`` on many sessions: the logs.db index against a brute-force scan (issue 18).

Generates N session files (default 10,000) in a sessions directory laid out like the CLI's, each
a short conversation (2-6 prompts, answers of a few hundred characters), then prints:

  * build: the first ``refresh()`` of an empty index (reads and indexes every file)
  * refresh, nothing changed: what every ``agentcore logs`` pays (one stat per file)
  * refresh after 10 files changed
  * latest 3 conversations, and a full-text query (``-q``) of a rare word and of a common one,
    via FTS5 and via the LIKE fallback
  * floor: a brute-force scan reading and decoding every file and searching its text (what
    ``logs -q`` would cost without an index), measured in the same run

The machine is shared, so compare the ratios against the floor rather than absolute figures.

    python benchmarks/logs_index.py [--sessions 10000] [--dir /tmp/x]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, List

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentcore.cli import _logindex  # noqa: E402
from agentcore.cli._logindex import LogIndex, read_conversation  # noqa: E402

WORDS = (
    "session tree branch compaction summary model provider token context message tool result "
    "python file error test assert function class module import return value list dict retry"
).split()


def prose(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def _message_line(entry_id: str, parent: str, message: dict) -> str:
    return json.dumps(
        {
            "type": "message",
            "id": entry_id,
            "parentId": parent,
            "timestamp": "2026-01-01T00:00:00.000Z",
            "message": message,
        }
    )


def generate(directory: Path, count: int, rng: random.Random) -> List[Path]:
    paths = []
    for n in range(count):
        cwd = f"/home/user/project{n % 40}"
        folder = directory / ("--" + cwd.strip("/").replace("/", "-") + "--")
        folder.mkdir(parents=True, exist_ok=True)
        session_id = f"{n:08d}-bench"
        path = folder / f"2026-01-01T00-00-00-000Z_{session_id}.jsonl"
        lines = [
            json.dumps(
                {"type": "session", "version": 3, "id": session_id, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": cwd}
            )
        ]
        parent = "null"
        for turn in range(rng.randint(1, 3) * 2):
            prompt = prose(rng, 12) + (" zanzibar" if n == count // 2 and turn == 0 else "")
            user = {"role": "user", "content": [{"type": "text", "text": prompt}], "timestamp": 1}
            answer = {
                "role": "assistant",
                "content": [{"type": "text", "text": prose(rng, 60)}],
                "api": "openai-completions",
                "provider": "openai",
                "model": "gpt-4o",
                "usage": {
                    "input": 100,
                    "output": 50,
                    "cacheRead": 0,
                    "cacheWrite": 0,
                    "totalTokens": 150,
                    "cost": {"total": 0.001},
                },
                "stopReason": "stop",
                "timestamp": 2,
            }
            lines.append(_message_line(f"u{turn}", parent, user))
            lines.append(_message_line(f"a{turn}", f"u{turn}", answer))
            parent = f"a{turn}"
        path.write_text("\n".join(lines) + "\n")
        paths.append(path)
    return paths


def timed(fn: Callable[[], object], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def brute_force(directory: Path, word: str) -> int:
    hits = 0
    for path in directory.glob("*/*.jsonl"):
        found = read_conversation(str(path))
        if found is not None and word in found[1].lower():
            hits += 1
    return hits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10000)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    root = Path(args.dir or tempfile.mkdtemp(prefix="agentcore-logs-bench-"))
    rng = random.Random(18)
    print(f"generating {args.sessions} sessions in {root} ...")
    paths = generate(root, args.sessions, rng)
    size = sum(p.stat().st_size for p in paths)
    print(f"  {size / 1e6:.1f} MB of session files")

    floor = timed(lambda: brute_force(root, "zanzibar"), repeat=1)
    print(f"floor, brute-force scan of every file for one word: {floor * 1000:8.1f} ms")

    start = time.perf_counter()
    with LogIndex(str(root)) as index:
        index.refresh()
    build = time.perf_counter() - start
    print(f"build (first refresh):                         {build * 1000:8.1f} ms  {build / floor:5.2f}x floor")

    with LogIndex(str(root)) as index:
        idle = timed(index.refresh)
        print(f"refresh, nothing changed:                      {idle * 1000:8.1f} ms  {idle / floor:5.3f}x floor")
        for path in paths[:10]:
            with open(path, "a") as handle:
                handle.write(_message_line("x", "a0", {"role": "user", "content": "more", "timestamp": 3}) + "\n")
        start = time.perf_counter()
        index.refresh()
        changed = time.perf_counter() - start
        print(f"refresh after 10 files changed:                {changed * 1000:8.1f} ms  {changed / floor:5.3f}x floor")
        latest = timed(lambda: index.latest(3))
        print(f"latest 3:                                      {latest * 1000:8.2f} ms  {latest / floor:6.4f}x floor")
        rare = timed(lambda: index.latest(3, "zanzibar"))
        common = timed(lambda: index.latest(3, "retry"))
        print(f"-q rare word (FTS5):                           {rare * 1000:8.2f} ms  {rare / floor:6.4f}x floor")
        print(f"-q common word (FTS5):                         {common * 1000:8.2f} ms  {common / floor:6.4f}x floor")
        assert [c.first_prompt.endswith("zanzibar") for c in index.latest(3, "zanzibar")] == [True]

    like_dir = root / "like"  # the fallback on the same files: a second index without FTS5
    like_dir.mkdir()
    for path in paths:
        target = like_dir / path.parent.name
        target.mkdir(exist_ok=True)
        os.link(path, target / path.name)
    _logindex.fts5_available = lambda connection: False  # type: ignore[assignment]  # a build without FTS5
    with LogIndex(str(like_dir)) as index:
        index.refresh()
        assert not index.fts
        rare = timed(lambda: index.latest(3, "zanzibar"))
        common = timed(lambda: index.latest(3, "retry"))
    print(f"-q rare word (LIKE fallback):                  {rare * 1000:8.2f} ms  {rare / floor:6.4f}x floor")
    print(f"-q common word (LIKE fallback):                {common * 1000:8.2f} ms  {common / floor:6.4f}x floor")


if __name__ == "__main__":
    main()

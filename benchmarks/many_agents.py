"""run_many throughput on 1, 2 and 4 worker processes, against a loopback OpenAI-compatible server.

Two mixes, each task one tool call (two model requests):

* I/O-bound: the model takes ``--latency`` seconds per request, the tool is trivial (``many_add``);
* CPU-bound: no model latency, the tool burns the CPU in pure Python (``many_spin``).

Each worker process runs one task at a time (``ProcessPoolExecutor``, spawn), so the I/O mix shows
how the pool overlaps waiting, the CPU mix whether processes scale where threads cannot (the same
CPU mix on a 4-thread pool is printed as the threads' figure). Scaling efficiency is throughput
with N processes over N times the throughput with one, measured in this run. Pools are warmed up
(worker start, imports, plugin loading) before timing. On a machine with C cores, the CPU mix
cannot scale beyond C.

    python benchmarks/many_agents.py [--tasks 24] [--latency 0.05] [--spin 400000]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import List

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])

import _many_helpers as helpers  # noqa: E402

from agentcore import AgentSpec, AgentTask, run_many  # noqa: E402


def tasks_for(server: helpers.LoopbackServer, mix: str, n: int, spin: int) -> List[AgentTask]:
    # tools by import path: no plugin, so each agent uses the process's shared plugin manager
    tool = "_many_helpers:many_add" if mix == "io" else "_many_helpers:many_spin"
    spec = AgentSpec(server.model(), tools=(tool,), get_api_key=helpers.api_key)
    prompt = 'many_add {"a": 1, "b": 2}' if mix == "io" else f'many_spin {{"n": {spin}}}'
    return [AgentTask(spec, prompt, id=i) for i in range(n)]


def throughput(executor: Executor, tasks: List[AgentTask]) -> float:
    start = time.perf_counter()
    results = list(run_many(tasks, executor=executor, progress=False))
    elapsed = time.perf_counter() - start
    failed = [r.error for r in results if r.error is not None]
    assert not failed, failed[:3]
    return len(results) / elapsed


def measure(server: helpers.LoopbackServer, mix: str, workers: int, n: int, spin: int, threads: bool = False) -> float:
    if threads:
        executor: Executor = ThreadPoolExecutor(workers)
    else:
        executor = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
    with executor:
        throughput(executor, tasks_for(server, mix, 2 * workers, spin))  # warm-up
        return throughput(executor, tasks_for(server, mix, n, spin))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=24)
    parser.add_argument("--latency", type=float, default=0.05, help="model latency per request (s)")
    parser.add_argument("--spin", type=int, default=400_000, help="CPU-bound tool loop length")
    args = parser.parse_args()
    print(f"run_many throughput, {args.tasks} tasks per measure, {os.cpu_count()} CPU cores")
    for mix, latency in (("io", args.latency), ("cpu", 0.0)):
        with helpers.LoopbackServer(latency=latency) as server:
            label = (
                f"I/O-bound (model latency {latency * 1000:.0f} ms)"
                if mix == "io"
                else f"CPU-bound (tool spin {args.spin})"
            )
            print(f"\n{label}")
            base = None
            for workers in (1, 2, 4):
                rate = measure(server, mix, workers, args.tasks, args.spin)
                base = base or rate
                print(
                    f"  {workers} process(es): {rate:7.2f} tasks/s   speed-up {rate / base:4.2f}x   "
                    f"efficiency {rate / (workers * base):5.0%}"
                )
            rate = measure(server, mix, 4, args.tasks, args.spin, threads=True)
            print(f"  4 threads (1 process): {rate:7.2f} tasks/s   speed-up {rate / base:4.2f}x")


if __name__ == "__main__":
    main()

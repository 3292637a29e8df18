"""``import agentcore`` cost: cumulative import time and which heavy modules got imported.

Runs ``python -X importtime -c "import agentcore"`` in a fresh subprocess (several times, the
median is printed), against a floor measured the same way: ``import json`` (a small stdlib
package). Also reports whether ``requests``, ``jsonschema`` or ``pluggy`` ended up in
``sys.modules``. Target (issue 2): <= 40 ms cumulative, requests and jsonschema not imported.
Asserts nothing.

    python benchmarks/import_time.py [repeats]
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _cli import int_args

ROOT = Path(__file__).resolve().parents[1]
# Bytecode goes to a private cache (warmed before timing) so the figures are those of an installed
# package, even when PYTHONDONTWRITEBYTECODE is set, and nothing is written into the source tree.
_CACHE = tempfile.mkdtemp(prefix="agentcore-importtime-")


def _env() -> dict:
    env = dict(
        os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), PYTHONPYCACHEPREFIX=_CACHE
    )
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def cumulative_us(module: str) -> int:
    """Cumulative import time of ``module`` in microseconds, from ``-X importtime``."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        capture_output=True,
        text=True,
        env=_env(),
        check=True,
    )
    for line in proc.stderr.splitlines():
        # "import time: self [us] | cumulative | imported package"
        parts = [p.strip() for p in line.split("|")]
        if len(parts) == 3 and parts[2] == module:
            return int(parts[1])
    raise RuntimeError(f"no importtime line for {module!r}:\n{proc.stderr[-2000:]}")


def heavy_modules() -> str:
    code = (
        "import sys, agentcore; "
        "print(','.join(m for m in ('requests', 'jsonschema', 'pluggy', 'importlib.metadata') "
        "if m in sys.modules))"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_env(), check=True
    ).stdout.strip()


def main() -> None:
    (repeats,) = int_args(__doc__, [("repeats", 7)])
    subprocess.run([sys.executable, "-c", "import agentcore.agent, json"], env=_env(), check=True)  # warm
    agentcore_ms = statistics.median(cumulative_us("agentcore") for _ in range(repeats)) / 1000
    floor_ms = statistics.median(cumulative_us("json") for _ in range(repeats)) / 1000
    agent_ms = statistics.median(cumulative_us("agentcore.agent") for _ in range(repeats)) / 1000
    loaded = heavy_modules() or "none"
    print(f"import agentcore: {agentcore_ms:.1f} ms cumulative (median of {repeats}; target <= 40 ms)")
    print(f"import agentcore.agent (what agentcore.Agent pulls in): {agent_ms:.1f} ms cumulative")
    print(f"floor (import json): {floor_ms:.1f} ms; ratio {agentcore_ms / floor_ms:.1f}x")
    print(f"heavy modules in sys.modules after import: {loaded} (requests/jsonschema must not appear)")


if __name__ == "__main__":
    try:
        main()
    finally:
        shutil.rmtree(_CACHE, ignore_errors=True)

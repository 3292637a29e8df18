"""Tool-argument validation: median time for a typical 5-field argument object.

Target (issue 3): median <= 50 µs with the compiled validator. The floor, measured in the same
run, is a plain deep copy of the same arguments (the least any validator that clones must do).
Run: python benchmarks/validation.py
"""

from __future__ import annotations

import copy
import statistics
import time
from typing import Any, Callable, Dict

from agentcore.tools import AgentTool, AgentToolResult, validate_tool_arguments

SCHEMA: Dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "File to read"},
        "offset": {"type": "integer", "minimum": 0},
        "limit": {"type": "integer", "minimum": 1},
        "encoding": {"type": "string", "enum": ["utf-8", "latin-1"]},
        "follow_links": {"type": "boolean"},
    },
    "required": ["path"],
    "additionalProperties": False,
}
VALID = {"path": "src/main.py", "offset": 10, "limit": 200, "encoding": "utf-8", "follow_links": True}
COERCED = {"path": "src/main.py", "offset": "10", "limit": "200", "encoding": "utf-8", "follow_links": "true"}


def median_us(fn: Callable[[], Any], rounds: int = 5000) -> float:
    for _ in range(200):  # warm-up (and the one-time compile)
        fn()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


def main() -> None:
    tool = AgentTool("read", "Read a file", SCHEMA, lambda *a: AgentToolResult())
    first = time.perf_counter()
    validate_tool_arguments(AgentTool("fresh", "", dict(SCHEMA), tool.execute), VALID)
    compile_us = (time.perf_counter() - first) * 1e6
    floor = median_us(lambda: copy.deepcopy(VALID))
    valid = median_us(lambda: validate_tool_arguments(tool, VALID))
    coerced = median_us(lambda: validate_tool_arguments(tool, COERCED))
    print(f"floor  copy.deepcopy of the arguments : {floor:8.1f} µs")
    print(f"validate, already-typed arguments     : {valid:8.1f} µs  ({valid / floor:4.1f}x floor)")
    print(f"validate, 4 fields need coercion      : {coerced:8.1f} µs  ({coerced / floor:4.1f}x floor)")
    print(f"first validation of the process (imports jsonschema, compiles): {compile_us / 1000:.1f} ms")
    verdict = "OK" if max(valid, coerced) <= 50 else "OVER TARGET"
    print(f"target: median <= 50 µs -> {verdict}")


if __name__ == "__main__":
    main()

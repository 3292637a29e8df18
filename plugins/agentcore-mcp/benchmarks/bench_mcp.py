"""Benchmark: per-call overhead of an MCP tool call over stdio, and server start time.

    python plugins/agentcore-mcp/benchmarks/bench_mcp.py [--calls 200] [--starts 3] [--server python|everything]

The floor is measured in the same run on the same server program: a direct JSON-RPC round trip
(one ``tools/call`` line written to the server's stdin, one line read from its stdout, after a
hand-made ``initialize``), and for start time a bare spawn plus ``initialize``. Printed: per-call
times and the ratio MCPServer.call_tool / raw round trip; start times and their ratio. The
``everything`` server needs $AGENTCORE_MCP_NODE_DIR (see tests/install-servers.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Tuple

HERE = Path(__file__).resolve().parent


def server_command(kind: str) -> Tuple[List[str], str, dict]:
    if kind == "everything":
        folder = os.environ.get("AGENTCORE_MCP_NODE_DIR")
        if not folder:
            raise SystemExit("--server everything needs $AGENTCORE_MCP_NODE_DIR (tests/install-servers.sh DIR)")
        return [str(Path(folder, "node_modules", ".bin", "mcp-server-everything")), "stdio"], "echo", {"message": "hi"}
    return [sys.executable, str(HERE.parent / "tests" / "mcp_test_server.py")], "echo", {"text": "hi"}


class RawServer:
    """The server driven by hand: newline-delimited JSON-RPC on its pipes."""

    def __init__(self, command: List[str]) -> None:
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1
        )
        self.next_id = 0
        self.request(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}},
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        assert self.proc.stdout is not None
        while True:
            reply = json.loads(self.proc.stdout.readline())
            if reply.get("id") == self.next_id:
                return reply

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def per_call(fn, calls: int) -> float:
    for _ in range(min(20, calls)):  # warm up
        fn()
    started = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - started) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--starts", type=int, default=3)
    parser.add_argument("--server", choices=("python", "everything"), default="python")
    opts = parser.parse_args()
    from agentcore_mcp import MCPServer

    command, tool, args = server_command(opts.server)

    raw = RawServer(command)
    raw_call = per_call(lambda: raw.request("tools/call", {"name": tool, "arguments": args}), opts.calls)
    raw.close()

    with MCPServer.stdio(command[0], command[1:], name="bench") as server:
        mcp_call = per_call(lambda: server.call_tool(tool, args), opts.calls)
        agent_tool = {t.name: t for t in server.tools()}[tool]
        tool_call = per_call(lambda: agent_tool.execute("id", args, None, None), opts.calls)

    raw_starts, mcp_starts = [], []
    for _ in range(opts.starts):
        started = time.perf_counter()
        bare = RawServer(command)
        raw_starts.append(time.perf_counter() - started)
        bare.close()
        started = time.perf_counter()
        server = MCPServer.stdio(command[0], command[1:], name="bench").connect()
        mcp_starts.append(time.perf_counter() - started)
        server.close()

    raw_start, mcp_start = statistics.median(raw_starts), statistics.median(mcp_starts)
    print(f"server: {opts.server} ({' '.join(Path(c).name for c in command)}), {opts.calls} calls of {tool!r}")
    print(f"raw JSON-RPC round trip     {raw_call * 1e3:8.3f} ms/call  (floor)")
    print(f"MCPServer.call_tool         {mcp_call * 1e3:8.3f} ms/call  ratio {mcp_call / raw_call:5.2f}x")
    print(f"AgentTool.execute           {tool_call * 1e3:8.3f} ms/call  ratio {tool_call / raw_call:5.2f}x")
    print(f"start: spawn + initialize   {raw_start * 1e3:8.1f} ms      (floor, median of {opts.starts})")
    print(f"start: MCPServer.connect()  {mcp_start * 1e3:8.1f} ms      ratio {mcp_start / raw_start:5.2f}x")


if __name__ == "__main__":
    main()

"""A bare stdio MCP server that answers tools/call in one scripted way (``MODE``), for the
failures an SDK-built server cannot produce: a JSON-RPC error of code -32000 (the generic
"server error" many servers send) and results that are not valid MCP."""

import json
import os
import sys

MODE = os.environ.get("MODE", "")


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    try:
        request = json.loads(line)
    except ValueError:
        continue
    method, rid = request.get("method"), request.get("id")
    if rid is None:  # a notification
        continue
    if method == "initialize":
        send(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "result": {
                    "protocolVersion": request["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "raw", "version": "1"},
                },
            }
        )
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}})
    elif method == "tools/call" and MODE == "server-error":
        send(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "error": {"code": -32000, "message": "backend unavailable: " + os.environ["TOKEN"]},
            }
        )
    elif method == "tools/call" and MODE == "not-a-list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"content": "notalist"}})
    elif method.startswith("tools/"):
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})
    else:
        send({"jsonrpc": "2.0", "id": rid, "result": {}})

"""A bare stdio MCP server that answers tools/call in one scripted way (``MODE``), for the
failures an SDK-built server cannot produce: a JSON-RPC error of code -32000 (the generic
"server error" many servers send; ``PAD=N`` makes its message N characters longer), results that are not valid MCP or (``MODE=bad-output``) not of the tool's output schema,
(``MODE=odd-schemas``) tool lists whose input schemas the SDK's strict validation refuses, and
(``MODE=unusable-tools``) a valid tool list (of two pages) no agent could use whole: tools of one name and
a schema that is not JSON schema, (``MODE=long-description``) a description of megabytes, a result
holding half an emoji as a lone surrogate escape (``MODE=cut-emoji``), one of megabytes
(``MODE=big-result``), one with content blocks the SDK cannot read (``MODE=unknown-block``), one whose
``structuredContent`` is nested ``DEPTH`` levels deep (``MODE=deep-result``), one whose ``result`` is
not an object (``MODE=bad-envelope``), a listing of ``COUNT`` tools (``MODE=many-tools``), input schemas with ``$ref`` cycles
(``MODE=ref-cycle``), and (``MODE=stderr-flood``) megabytes of stderr without a
line break, written before the server reads anything."""

import json
import os
import sys

MODE = os.environ.get("MODE", "")
MODE_ERROR = os.environ.get("IS_ERROR") == "1"  # MODE=unknown-block: the result says isError
DEPTH = int(os.environ.get("DEPTH", "0"))

if MODE == "stderr-flood":  # a progress bar redrawn with \r: 20 MB, never a line break
    sys.stderr.write("".join(f"\rprogress {i:07d}" for i in range(1_000_000)))
    sys.stderr.flush()


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
    elif method == "tools/list" and MODE == "odd-schemas":
        odd = [
            {
                "name": "no_params",
                "description": "A schema of {}, as servers write for no parameters.",
                "inputSchema": {},
            },
            {"name": "nullable", "inputSchema": {"type": ["object", "null"], "properties": {"x": {"type": "integer"}}}},
            {"name": "stringy", "inputSchema": {"type": "string"}},
            {"name": "dotted.name", "inputSchema": {"type": "object"}},
            {"name": "dotted_name", "inputSchema": {"type": "object"}},
            {"name": "fine", "inputSchema": {"type": "object", "properties": {"y": {"type": "string"}}}},
        ]
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": odd}})
    elif method == "tools/list" and MODE == "unusable-tools":  # two pages
        if (request.get("params") or {}).get("cursor") != "page-2":
            tools = [
                {"name": "dup", "description": "the first", "inputSchema": {"type": "object"}},
                {"name": "dup", "description": "the second", "inputSchema": {"type": "object"}},
                {"name": "bad_schema", "inputSchema": {"type": "object", "properties": {"x": {"type": "nonsense"}}}},
            ]
            send({"jsonrpc": "2.0", "id": rid, "result": {"tools": tools, "nextCursor": "page-2"}})
        else:
            tools = [
                {"name": "fine", "inputSchema": {"type": "object", "properties": {"y": {"type": "string"}}}},
                {"name": "dup", "description": "the third", "inputSchema": {"type": "object"}},
            ]
            send({"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}})
    elif method == "tools/list" and MODE == "long-description":  # generated from API docs, say
        tools = [{"name": "verbose", "description": "word " * 1_000_000, "inputSchema": {"type": "object"}}]
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}})
    elif method == "tools/list" and MODE == "many-tools":
        schema = {"type": "object", "properties": {"x": {"type": "string"}}}
        tools = [{"name": f"tool_{i}", "inputSchema": schema} for i in range(int(os.environ["COUNT"]))]
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}})
    elif method == "tools/list" and MODE == "ref-cycle":
        loop = {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}
        tools = [
            {"name": "itself", "inputSchema": {"type": "object", "$ref": "#"}},
            {"name": "round", "inputSchema": {"type": "object", "$ref": "#/$defs/a", "$defs": loop}},
            {"name": "tree", "inputSchema": {"type": "object", "properties": {"child": {"$ref": "#"}}}},
        ]
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}})
    elif method == "tools/list" and MODE == "bad-output":
        typed = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
        tools = [{"name": "t", "inputSchema": {"type": "object"}, "outputSchema": typed}]
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}})
    elif method == "tools/call" and MODE == "bad-output":
        content = [{"type": "text", "text": "n is one"}]
        send({"jsonrpc": "2.0", "id": rid, "result": {"content": content, "structuredContent": {"n": "one"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}})
    elif method == "tools/call" and MODE in ("odd-schemas", "unusable-tools", "ref-cycle"):
        text = json.dumps(request["params"].get("arguments"))
        send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}})
    elif method == "tools/call" and MODE == "server-error":
        send(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "error": {
                    "code": -32000,
                    "message": "backend unavailable: " + os.environ["TOKEN"] + "x" * int(os.environ.get("PAD", "0")),
                },
            }
        )
    elif method == "tools/call" and MODE == "cut-emoji":  # json.dumps writes the lone half as "\ud83d"
        send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": "half \ud83d here"}]}})
    elif method == "tools/call" and MODE == "big-result":  # one line of megabytes: many pipe reads
        text = "".join(f"{i:09d}\n" for i in range(300_000))
        send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}})
    elif method == "tools/call" and MODE == "unknown-block":  # a later protocol's type, a broken resource
        content = [
            {"type": "text", "text": "before"},
            {"type": "audio2", "data": "AAAA", "mimeType": "audio/x"},
            {"type": "resource", "resource": {"uri": "file:///r.txt"}},
            {"type": "text", "text": "after"},
        ]
        send({"jsonrpc": "2.0", "id": rid, "result": {"content": content, "isError": MODE_ERROR}})
    elif method == "tools/call" and MODE == "deep-result":  # written by hand: json.dumps would recurse
        nested = "[" * DEPTH + '"leaf"' + "]" * DEPTH
        result = '{"content": [{"type": "text", "text": "deep"}], "structuredContent": {"tree": ' + nested + "}}"
        sys.stdout.write('{"jsonrpc": "2.0", "id": ' + json.dumps(rid) + ', "result": ' + result + "}\n")
        sys.stdout.flush()
    elif method == "tools/call" and MODE == "bad-envelope":
        send({"jsonrpc": "2.0", "id": rid, "result": []})
    elif method == "tools/call" and MODE == "stderr-flood":
        send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": "ok"}]}})
    elif method == "tools/call" and MODE == "not-a-list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"content": "notalist"}})
    elif method.startswith("tools/"):
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})
    else:
        send({"jsonrpc": "2.0", "id": rid, "result": {}})

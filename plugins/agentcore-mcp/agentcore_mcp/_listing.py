"""Reading a ``tools/list`` answer as other clients do: one odd tool never costs the others.

The SDK validates a ``tools/list`` result as a whole and strictly (every ``inputSchema`` must say
``"type": "object"``), so a single tool written with ``{}`` as its schema (common for tools
without parameters) makes the whole listing, and so the server, unusable. The streams between
the SDK and the transport (any of them) pass through :func:`tolerant_tool_lists`: an answer to a
``tools/list`` request that the protocol would refuse has each tool repaired where the intent is
clear (no ``type``, or ``["object", "null"]``: an object) and the others dropped (``"type":
"string"``: MCP arguments are always an object), each drop logged as a warning naming the tool.
A valid answer passes untouched.
"""

from __future__ import annotations

import json
import logging
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable, Dict, List, Optional, Set, Tuple

import anyio
import mcp_types
from mcp_types.methods import validate_server_result
from pydantic import ValidationError

_log = logging.getLogger("agentcore_mcp")

_FALLBACK_VERSION = "2025-11-25"  # what the SDK assumes before the handshake settles one


@asynccontextmanager
async def tolerant_tool_lists(
    transport: Any, server: str, version: Callable[[], Optional[str]]
) -> AsyncIterator[Tuple[Any, Any]]:
    """``transport`` (an async context manager of ``(read_stream, write_stream)``) with its
    ``tools/list`` answers repaired; ``version()`` is the negotiated protocol version."""
    async with transport as (read_stream, write_stream):
        pending: Set[Any] = set()  # ids of the tools/list requests sent and not yet answered
        yield _Reader(read_stream, pending, server, version), _Writer(write_stream, pending)


class _Writer:
    def __init__(self, inner: Any, pending: Set[Any]) -> None:
        self._inner = inner
        self._pending = pending

    async def send(self, item: Any) -> None:
        message = getattr(item, "message", None)
        if isinstance(message, mcp_types.JSONRPCRequest) and message.method == "tools/list":
            self._pending.add(message.id)
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _Writer:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _Reader:
    def __init__(self, inner: Any, pending: Set[Any], server: str, version: Callable[[], Optional[str]]) -> None:
        self._inner = inner
        self._pending = pending
        self._server = server
        self._version = version

    async def receive(self) -> Any:
        item = await self._inner.receive()
        message = getattr(item, "message", None)
        if isinstance(message, (mcp_types.JSONRPCResponse, mcp_types.JSONRPCError)) and message.id in self._pending:
            self._pending.discard(message.id)
            if isinstance(message, mcp_types.JSONRPCResponse):
                message.result = repaired(message.result, self._server, self._version() or _FALLBACK_VERSION)
        return item

    def __aiter__(self) -> _Reader:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _Reader:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def __getattr__(self, name: str) -> Any:  # last_context and whatever else a transport offers
        return getattr(self._inner, name)


def repaired(result: Dict[str, Any], server: str, version: str) -> Dict[str, Any]:
    """A ``tools/list`` ``result`` the protocol accepts: ``result`` itself when it already does,
    else a copy with each tool repaired or dropped (logged)."""
    if _valid(result, version) or not isinstance(result.get("tools"), list):
        return result
    kept: List[Any] = []
    for tool in result["tools"]:
        fixed, problem = _repaired_tool(tool)
        if fixed is not None and not _valid({"tools": [fixed]}, version):
            fixed, problem = None, "it is not a valid MCP tool"
        if fixed is None:
            name = tool.get("name") if isinstance(tool, dict) else None
            _log.warning("MCP server %r: tool %r skipped: %s", server, name, problem)
            continue
        kept.append(fixed)
    return {**result, "tools": kept}


def _repaired_tool(tool: Any) -> Tuple[Optional[Dict[str, Any]], str]:
    if not isinstance(tool, dict):
        return None, "it is not an object"
    schema = tool.get("inputSchema")
    if schema is None:
        schema = {}
    if not isinstance(schema, dict):
        return None, "its inputSchema is not an object"
    kind = schema.get("type")
    if kind == "object":
        return tool, ""
    if kind is None or (isinstance(kind, list) and "object" in kind):
        return {**tool, "inputSchema": {**schema, "type": "object"}}, ""
    return None, f'its inputSchema has "type": {json.dumps(kind)}, but MCP arguments are always an object'


def _valid(result: Dict[str, Any], version: str) -> bool:
    try:
        validate_server_result("tools/list", version, result)
    except ValidationError:
        return False
    except (KeyError, ValueError):  # a version the SDK has no tools/list table for: its call
        return True
    return True

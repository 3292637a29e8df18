"""Reading ``tools/list`` and ``tools/call`` answers as other clients do: one odd tool never
costs the others, nor one odd content block the rest of a result.

The SDK validates a ``tools/list`` result as a whole and strictly (every ``inputSchema`` must say
``"type": "object"``), so a single tool written with ``{}`` as its schema (common for tools
without parameters) makes the whole listing, and so the server, unusable. The streams between
the SDK and the transport (any of them) pass through :func:`tolerant_tool_lists`: an answer to a
``tools/list`` request that the protocol would refuse has each tool repaired where the intent is
clear (no ``type``, or ``["object", "null"]``: an object) and the others dropped (``"type":
"string"``: MCP arguments are always an object). Two kinds of tool the protocol accepts are
dropped too, from any answer, because an agent could not use them and they would cost the others:
a second tool of a name already listed, on that page or an earlier page of the same listing (an
agent refuses two tools of one name; the first is kept), and one whose ``inputSchema`` is not a valid JSON schema (agentcore refuses every call of
it, and a provider refuses every request that lists it, whatever tool the model wants) or refers
to itself without end (``{"$ref": "#"}``: checking any call's arguments recurses until Python's
recursion limit). Each drop
is logged as a warning naming the tool and why. A description longer than
:data:`MAX_DESCRIPTION_CHARS` is cut there, with a note saying so (logged too): it goes with every
model request, and one of megabytes (generated from API docs) fills the context window, failing
every request. Of a listing of more than :data:`MAX_TOOLS` tools only the first
:data:`MAX_TOOLS` are kept (logged), and its later pages are not fetched. An answer without such
tools passes untouched.
The answers to ``tools/call`` pass through :func:`~agentcore_mcp.results.repaired_call_result`
there too: the SDK refuses a whole result for one content block it cannot read (a type of a later
protocol, a ``resource`` with neither ``text`` nor ``blob``), so such a block becomes a text block
naming it and the others reach the agent.
The checks run on a worker thread (checking a schema takes milliseconds), not on the plugin's
event loop.
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

from .results import repaired_call_result

_log = logging.getLogger("agentcore_mcp")

_FALLBACK_VERSION = "2025-11-25"  # what the SDK assumes before the handshake settles one

#: characters of a tool's description kept: ten times a long hand-written one (the built-in
#: tools' are under 2,000); the rest of a longer one is cut (see the module docstring)
MAX_DESCRIPTION_CHARS = 20_000
#: tools kept of one listing (all its pages): ten times the largest real servers'. Checking a tool
#: takes a millisecond or two, so a listing of 100,000 took minutes: past the handshake limit,
#: which then called the server hung and restarted it on every call. The rest are skipped
#: (logged), and the pages after the one that reaches the limit are not fetched.
MAX_TOOLS = 1000


@asynccontextmanager
async def tolerant_tool_lists(
    transport: Any,
    server: str,
    version: Callable[[], Optional[str]],
    http_error: Optional[Callable[[Any], Optional[str]]] = None,
) -> AsyncIterator[Tuple[Any, Any]]:
    """``transport`` (an async context manager of ``(read_stream, write_stream)``) with its
    ``tools/list`` answers repaired; ``version()`` is the negotiated protocol version.
    ``http_error(id)``, when given, is the HTTP status the server refused request ``id`` with
    (``"HTTP 401 Unauthorized"``) or None: the error answering that request then ends with it."""
    async with transport as (read_stream, write_stream):
        # the tools/list requests sent and not yet answered: id -> the cursor asked for
        pending: Dict[Any, Optional[str]] = {}
        calls: Set[Any] = set()  # the ids of the tools/call requests sent and not yet answered
        reader = _Reader(read_stream, pending, calls, server, version, http_error)
        yield reader, _Writer(write_stream, pending, calls)


class _Writer:
    def __init__(self, inner: Any, pending: Dict[Any, Optional[str]], calls: Set[Any]) -> None:
        self._inner = inner
        self._pending = pending
        self._calls = calls

    async def send(self, item: Any) -> None:
        message = getattr(item, "message", None)
        if isinstance(message, mcp_types.JSONRPCRequest) and message.method == "tools/list":
            cursor = (message.params or {}).get("cursor")
            self._pending[message.id] = cursor if isinstance(cursor, str) else None
        elif isinstance(message, mcp_types.JSONRPCRequest) and message.method == "tools/call":
            self._calls.add(message.id)
        elif isinstance(message, mcp_types.JSONRPCNotification) and message.method == "notifications/cancelled":
            self._calls.discard((message.params or {}).get("requestId"))  # its answer, if any, is dropped
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
    def __init__(
        self,
        inner: Any,
        pending: Dict[Any, Optional[str]],
        calls: Set[Any],
        server: str,
        version: Callable[[], Optional[str]],
        http_error: Optional[Callable[[Any], Optional[str]]] = None,
    ) -> None:
        self._inner = inner
        self._http_error = http_error
        self._pending = pending
        self._calls = calls
        self._server = server
        self._version = version
        # the names listed so far by each listing that goes on, by the cursor of its next page
        self._listed: Dict[str, Set[Any]] = {}

    async def receive(self) -> Any:
        item = await self._inner.receive()
        message = getattr(item, "message", None)
        if not isinstance(message, (mcp_types.JSONRPCResponse, mcp_types.JSONRPCError)):
            return item
        if isinstance(message, mcp_types.JSONRPCError) and self._http_error is not None:
            status = self._http_error(message.id)
            if status:  # the SDK's error for an HTTP refusal says only "Server returned an error response"
                message.error.message = f"{message.error.message} ({status})"
        if message.id in self._calls:
            self._calls.discard(message.id)
            if isinstance(message, mcp_types.JSONRPCResponse):
                version = self._version() or _FALLBACK_VERSION
                try:
                    message.result = await anyio.to_thread.run_sync(repaired_call_result, message.result, version)
                except Exception as exc:  # noqa: BLE001 - the SDK reads it as it is; the session goes on
                    _log.debug(
                        "MCP server %r: a tools/call result could not be checked (%s)", self._server, type(exc).__name__
                    )
            return item
        if message.id in self._pending:
            cursor = self._pending.pop(message.id)
            names = self._listed.pop(cursor, set()) if cursor is not None else set()
            if isinstance(message, mcp_types.JSONRPCResponse):
                version = self._version() or _FALLBACK_VERSION
                result = await anyio.to_thread.run_sync(repaired, message.result, self._server, version, names)
                message.result = result
                following = result.get("nextCursor")
                if isinstance(following, str) and following:
                    if len(self._listed) >= 16:  # listings given up half-way: forget them
                        self._listed.clear()
                    self._listed[following] = names
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


def repaired(result: Dict[str, Any], server: str, version: str, names: Optional[Set[Any]] = None) -> Dict[str, Any]:
    """A ``tools/list`` ``result`` the protocol accepts, each of whose tools an agent can use:
    ``result`` itself when it already is, else a copy with each tool repaired or dropped (logged;
    see the module docstring). ``names`` are those listed on the listing's earlier pages; the
    names this page keeps are added to it."""
    tools = result.get("tools")
    if not isinstance(tools, list):
        return result
    names = set() if names is None else names
    capped = _capped(result, tools, server, len(names))
    if capped is not result:
        return repaired(capped, server, version, names)
    valid = _valid(result, version)
    kept: List[Any] = []
    changed = not valid
    for tool in tools:
        fixed, problem = (tool, "") if valid else _repaired_tool(tool)
        if fixed is not None and not valid and not _valid({"tools": [fixed]}, version):
            fixed, problem = None, "it is not a valid MCP tool"
        if fixed is not None:
            problem = _unusable(fixed, names)
            if problem:
                fixed = None
        if fixed is None:
            name = tool.get("name") if isinstance(tool, dict) else None
            _log.warning("MCP server %r: tool %r skipped: %s", server, name, problem)
            changed = True
            continue
        names.add(fixed.get("name"))
        fixed = _short_description(fixed, server)
        changed = changed or fixed is not tool
        kept.append(fixed)
    return {**result, "tools": kept} if changed else result


def _capped(result: Dict[str, Any], tools: List[Any], server: str, listed: int) -> Dict[str, Any]:
    """``result`` itself, or, when its ``tools`` would take the listing past :data:`MAX_TOOLS`
    (``listed`` kept from its earlier pages), a copy with only those that fit and no
    ``nextCursor`` (the listing ends there); logged as a warning."""
    room = max(0, MAX_TOOLS - listed)
    if len(tools) <= room:
        return result
    _log.warning(
        "MCP server %r lists more than %d tools, more than an agent can use: the %d after the first %d are skipped%s",
        server,
        MAX_TOOLS,
        len(tools) - room,
        MAX_TOOLS,
        ", and its further pages are not read" if result.get("nextCursor") else "",
    )
    return {**{k: v for k, v in result.items() if k != "nextCursor"}, "tools": tools[:room]}


def _short_description(tool: Dict[str, Any], server: str) -> Dict[str, Any]:
    """``tool`` itself, or a copy with its description cut to :data:`MAX_DESCRIPTION_CHARS`."""
    description = tool.get("description")
    if not isinstance(description, str) or len(description) <= MAX_DESCRIPTION_CHARS:
        return tool
    _log.warning(
        "MCP server %r: the description of tool %r has %d characters; only the first %d are kept",
        server,
        tool.get("name"),
        len(description),
        MAX_DESCRIPTION_CHARS,
    )
    note = f"\n\n[Description cut: showing the first {MAX_DESCRIPTION_CHARS:,} of {len(description):,} characters.]"
    return {**tool, "description": description[:MAX_DESCRIPTION_CHARS] + note}


def _unusable(tool: Dict[str, Any], names: Set[Any]) -> str:
    """Why an agent cannot use ``tool`` (a valid MCP tool), given the ``names`` kept before it;
    empty when it can."""
    if tool.get("name") in names:
        return "the server lists another tool of that name before it"
    return _schema_problem(tool.get("inputSchema") or {})


def _schema_problem(schema: Dict[str, Any]) -> str:
    """Why ``schema`` is not a JSON schema of its dialect (draft 2020-12 unless it names another
    ``$schema``), as agentcore checks a tool's schema before a call, or is one no arguments can be
    checked against (a ``$ref`` cycle: agentcore's check of every call would recurse without end);
    empty when it is a usable one."""
    from jsonschema import Draft202012Validator, validators  # on first use: it takes a while
    from jsonschema.exceptions import SchemaError

    try:
        validator = validators.validator_for(schema, default=Draft202012Validator)
        validator.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(part) for part in exc.path) or "its root"
        message = exc.message if len(exc.message) <= 200 else exc.message[:199] + "\u2026"
        return f"its inputSchema is not a valid JSON schema (at {where}: {message})"
    except Exception as exc:  # noqa: BLE001 - one the checker cannot even read (nested too deep...)
        return f"its inputSchema cannot be checked as a JSON schema ({type(exc).__name__})"
    try:  # a "$ref" cycle with no value in between ({"$ref": "#"}): every check recurses without end
        validator(schema).is_valid({})
    except RecursionError:
        return 'its inputSchema refers to itself without end (a "$ref" cycle): no arguments can be checked against it'
    except Exception:  # noqa: BLE001 - a "$ref" to nowhere...: agentcore names it at the call
        pass
    return ""


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

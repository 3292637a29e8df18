"""``MCPServer``: an MCP server (a subprocess over stdio, or a URL) whose tools are AgentTools.

Synchronous facade over :mod:`agentcore_mcp._connection`: every method blocks the calling thread
on a future of the plugin's private event loop (:mod:`agentcore_mcp._loop`) and never runs a loop
itself. Thread-safe: tool calls from the agent's parallel tool threads run concurrently on one
session.

Failure semantics, per call: a crash, a closed connection or a hang (no result within ``timeout``
and no answer to a liveness probe after it: ``ping``, or ``tools/list`` on 2026-07-28 sessions)
raises :class:`MCPServerError` naming the server and what happened, and drops the session; the
next call starts the server again. A call that merely took too long raises :class:`MCPTimeoutError` and the session stays. Aborting the run's signal cancels
the request on the server (``notifications/cancelled``) and raises :class:`MCPAbortedError` at
once. The agent loop turns each of these into an error tool result.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import logging
import re
import threading
import weakref
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from agentcore.providers.base import clean_header_value
from agentcore.tools import AgentTool, AgentToolResult

from . import _loop
from ._connection import Connection, Spec
from .errors import MCPAbortedError, MCPConnectionError, MCPServerError, MCPTimeoutError
from .results import progress_update, to_tool_result

__all__ = ["MCPServer", "DEFAULT_TIMEOUT", "DEFAULT_CONNECT_TIMEOUT", "DEFAULT_MAX_OUTPUT_CHARS"]

_log = logging.getLogger("agentcore_mcp")

DEFAULT_TIMEOUT = 300.0  # seconds one tools/call may take
DEFAULT_CONNECT_TIMEOUT = 60.0  # seconds to start the server and finish the handshake
# characters of text one tool result may bring into the transcript: what the built-in read/bash
# tools and fetch_url keep too (a file or page read whole would otherwise fill the context window)
DEFAULT_MAX_OUTPUT_CHARS = 50_000
PING_TIMEOUT = 5.0  # after a timed-out call: is the server still answering?
CLOSE_TIMEOUT = 10.0  # close() waits this long for a clean end, then kills

_TOOL_NAME = re.compile(r"[^A-Za-z0-9_-]")

# Process-wide state (owner: this module): the servers not closed yet, held weakly, so that
# interpreter exit closes them (and kills their process groups) even when the user did not.
_open_servers: weakref.WeakSet[MCPServer] = weakref.WeakSet()
_atexit_lock = threading.Lock()
_atexit_registered = False


def _close_open_servers() -> None:
    for server in list(_open_servers):
        try:
            server.close()
        except Exception:  # noqa: BLE001 - at exit, close the rest
            _log.exception("closing MCP server %r at exit failed", server.name)


def valid_max_output_chars(value: Any) -> bool:
    """Whether ``value`` is a ``max_output_chars``: a positive integer (not a bool) or None."""
    return value is None or (type(value) is not bool and isinstance(value, int) and value > 0)


def _track(server: MCPServer) -> None:
    global _atexit_registered
    _open_servers.add(server)
    with _atexit_lock:
        if not _atexit_registered:
            atexit.register(_close_open_servers)
            _atexit_registered = True


class MCPServer:
    """One MCP server. Make it with :meth:`stdio` or :meth:`http`; use it as a context manager.

    The server starts (or is connected to) on first use: :meth:`connect`, ``with``,
    :meth:`tools` or a tool call. :meth:`close` ends the session and, for stdio, the process and
    its whole process group. ``name`` appears in every error message and log line; ``timeout`` is
    the default per-call limit in seconds (``None`` for none), ``connect_timeout`` the limit for
    starting and the handshake; ``max_output_chars`` the characters of text a tool result keeps,
    the rest replaced by a note saying how much was cut (``None`` for no limit; see
    :mod:`agentcore_mcp.results`). Raises ``ValueError`` for a ``max_output_chars`` that is not a
    positive integer.
    """

    def __init__(
        self,
        spec: Spec,
        *,
        name: Optional[str] = None,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        max_output_chars: Optional[int] = DEFAULT_MAX_OUTPUT_CHARS,
    ) -> None:
        if not valid_max_output_chars(max_output_chars):
            raise ValueError(
                f"MCPServer: max_output_chars must be a positive integer or None, not {max_output_chars!r}"
            )
        self._spec = spec
        self.max_output_chars = max_output_chars
        self.name = name or _default_name(spec)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._lock = threading.RLock()  # connection changes; held while starting or stopping one
        # the tool-list state; never held while waiting, because the loop thread takes it too
        self._tools_lock = threading.Lock()
        self._conn: Optional[Connection] = None
        self._starting: Optional[Connection] = None  # the connection whose handshake is awaited
        # Ends the session (and process group) of a server dropped without close(): collected
        # with the agent and tools that used it. Holds the connections, never the server.
        self._live: List[Connection] = []
        self._finalizer = weakref.finalize(self, _abandon, self._live)
        self._finalizer.atexit = False  # type: ignore[misc]  # documented; at exit _close_open_servers closes
        self._closed = False
        self._restarts = 0
        self._mcp_tools: Optional[List[Any]] = None
        self._tools_stale = True
        self._made: Dict[Any, AgentTool] = {}
        self._listeners: List[Callable[[List[AgentTool]], None]] = []
        self._refreshing = False

    # ------------------------------------------------------------------ construction

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
        *,
        name: Optional[str] = None,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        max_output_chars: Optional[int] = DEFAULT_MAX_OUTPUT_CHARS,
    ) -> MCPServer:
        """A server started as ``command *args`` in ``cwd``, speaking JSON-RPC on stdin/stdout.

        Its environment is a safe minimum (HOME, PATH, USER, SHELL, TERM, LOGNAME) plus ``env``,
        as desktop MCP clients do; the values of ``env``, and credentials in ``args`` (a URL's
        password and query values, the value of ``--api-key``, ``--token=``, ``PASSWORD=``...:
        see the README's "Secrets"), never appear in reprs, errors or logs.
        """
        if not isinstance(command, str) or not command:
            raise TypeError(f"MCPServer.stdio: command must be a non-empty string, not {command!r}")
        if isinstance(args, str):
            raise TypeError("MCPServer.stdio: args must be a sequence of strings, not one string")
        spec = Spec(
            "stdio",
            command=command,
            args=[str(a) for a in args],
            cwd=None if cwd is None else str(cwd),
            env={str(k): str(v) for k, v in (env or {}).items()},
        )
        return cls(spec, name=name, timeout=timeout, connect_timeout=connect_timeout, max_output_chars=max_output_chars)

    @classmethod
    def http(
        cls,
        url: str,
        headers: Optional[Mapping[str, str]] = None,
        *,
        name: Optional[str] = None,
        transport: str = "auto",
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        max_output_chars: Optional[int] = DEFAULT_MAX_OUTPUT_CHARS,
    ) -> MCPServer:
        """A server at ``url`` over Streamable HTTP, falling back to the older HTTP+SSE transport
        when the server answers the Streamable HTTP POST with 400/404/405 (``transport="auto"``;
        ``"streamable-http"`` or ``"sse"`` force one). ``headers`` (e.g. ``Authorization``) go with
        every request and never appear in reprs, errors or logs."""
        if not isinstance(url, str) or not re.match(r"^https?://", url):
            raise ValueError(f"MCPServer.http: url must start with http:// or https://, not {url!r}")
        if transport not in ("auto", "streamable-http", "sse"):
            raise ValueError(f'MCPServer.http: transport must be "auto", "streamable-http" or "sse", not {transport!r}')
        try:
            clean = {str(k): clean_header_value(str(k), v) for k, v in (headers or {}).items()}
        except ValueError as exc:
            raise ValueError(f"MCPServer.http: {exc}") from None
        spec = Spec("http", url=url, headers=clean, transport=transport)
        return cls(spec, name=name, timeout=timeout, connect_timeout=connect_timeout, max_output_chars=max_output_chars)

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> MCPServer:
        self.connect()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def connect(self) -> MCPServer:
        """Start the server and finish the MCP handshake now (idempotent). Raises
        :class:`MCPConnectionError` naming the server, what failed and the end of its stderr."""
        self._connection()
        return self

    def _connection(self, signal: Any = None) -> Connection:
        with self._lock:
            if self._closed:
                raise MCPConnectionError(f"MCP server {self.name!r} is closed", server=self.name)
            conn = self._conn
            if conn is not None and conn.alive:
                return conn
            if conn is not None:  # it died, or its start failed: a fresh one once it is gone
                if conn.ready.done() and conn.ready.exception() is None:
                    _log.info("MCP server %r %s; restarting it", self.name, conn.dead_reason or "is gone")
                    self._restarts += 1
                self._end(conn)
                self._conn = None
                with self._tools_lock:
                    self._tools_stale = True
            conn = Connection(self.name, self._spec, self._tools_changed)
            self._live[:] = [conn]
            # close() and interpreter exit end a start in progress too (never an orphan)
            self._conn = self._starting = conn
            if self._closed:  # close() ran between the check above and now
                conn.closing = True
                conn.mark_dead("closed")
            _track(self)
            try:
                _loop.submit(conn.run())
                self._wait_ready(conn, signal)
            finally:
                self._starting = None
            return conn

    def _wait_ready(self, conn: Connection, signal: Any) -> None:
        """Wait for ``conn``'s handshake, at most ``connect_timeout``, returning early when the
        run is aborted or the server closed. On failure the connection winds down on the loop
        (``close()`` and the next call wait for that) and the error is raised at once."""
        aborted: concurrent.futures.Future[None] = concurrent.futures.Future()

        def abort(_reason: Any = None) -> None:
            if not aborted.done():
                aborted.set_result(None)

        if signal is not None:
            signal.add_listener(abort)
        try:
            concurrent.futures.wait(
                [conn.ready, conn.stopped, aborted], self.connect_timeout, concurrent.futures.FIRST_COMPLETED
            )
        finally:
            if signal is not None:
                signal.remove_listener(abort)
        if conn.ready.done() and conn.ready.exception() is None:
            return  # (a server that died right after the handshake: the call reports it)
        if self._closed or conn.closing:
            conn.mark_dead("closed")
            raise MCPConnectionError(f"MCP server {self.name!r} was closed while it was starting", server=self.name)
        if aborted.done():
            conn.mark_dead("aborted while starting")
            raise MCPAbortedError(
                f"MCP server {self.name!r} ({self._spec.describe()}): the run was aborted while the "
                "server was starting; it will be started again on the next call",
                server=self.name,
            )
        if conn.ready.done():
            error = conn.ready.exception()
            assert error is not None
            raise error
        conn.mark_dead("handshake timed out")
        raise MCPConnectionError(
            f"MCP server {self.name!r} ({self._spec.describe()}) did not finish "
            f"the MCP handshake within {self.connect_timeout:g}s",
            server=self.name,
        )

    def close(self) -> None:
        """End the session and (stdio) the process group: stdin closed, then SIGTERM and SIGKILL
        if it ignores that. Idempotent; afterwards every call raises :class:`MCPConnectionError`."""
        self._closed = True
        starting = self._starting
        if starting is not None:  # the starting thread holds the lock: make it give up first
            starting.closing = True
            starting.mark_dead("closed")
        with self._lock:
            conn, self._conn = self._conn, None
        _open_servers.discard(self)
        if conn is not None:
            conn.closing = True
            self._end(conn)

    def _end(self, conn: Connection) -> None:
        conn.mark_dead(conn.dead_reason or "closed")
        try:
            conn.done.result(CLOSE_TIMEOUT)
        except concurrent.futures.TimeoutError:
            _log.warning("MCP server %r did not shut down within %ss; killing it", self.name, CLOSE_TIMEOUT)
        from ._stdio import group_alive, kill_group

        pid = conn.state.pid
        if pid is not None and group_alive(pid):
            kill_group(pid)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def pid(self) -> Optional[int]:
        """The server process id (stdio, once started), also its process group id."""
        conn = self._conn
        return None if conn is None else conn.state.pid

    @property
    def transport(self) -> Optional[str]:
        """``"stdio"``, ``"streamable-http"`` or ``"sse"`` once connected."""
        conn = self._conn
        return None if conn is None else conn.transport_used

    @property
    def restarts(self) -> int:
        """How many times the session was started again after a failure."""
        return self._restarts

    # ------------------------------------------------------------------ tools

    def tools(self, prefix: Optional[str] = None) -> List[AgentTool]:
        """The server's tools as AgentTools, named ``<prefix>_<name>`` when ``prefix`` is given.

        Names are made valid for model APIs (characters outside ``A-Za-z0-9_-`` become ``_``, at
        most 64 characters). Description and input JSON schema are passed through. After the
        server sent ``notifications/tools/list_changed`` the list is fetched again, and the
        AgentTool objects returned before are updated in place (description, schema). Connects
        first if needed.
        """
        conn = self._connection()
        with self._tools_lock:
            stale = self._tools_stale or self._mcp_tools is None
        if stale:
            listed = self._wait(conn, conn.list_tools(), self.connect_timeout, "tools/list")
            with self._tools_lock:
                self._mcp_tools, self._tools_stale = listed, False
                self._update_made()
        with self._tools_lock:
            made = [(t.name, self._agent_tool(t, prefix)) for t in self._mcp_tools or ()]
        return self._unique(made)

    def _unique(self, made: List[Any]) -> List[AgentTool]:
        """The tools without a second one whose name, made valid for model APIs, equals an
        earlier one's (``a.b`` and ``a_b``): an agent refuses two tools of one name."""
        first: Dict[str, str] = {}
        kept: List[AgentTool] = []
        for mcp_name, tool in made:
            taken = first.setdefault(tool.name, mcp_name)
            if taken == mcp_name:
                kept.append(tool)
            else:
                _log.warning(
                    "MCP server %r: tool %r skipped: its name as an agent tool, %r, is that of tool %r",
                    self.name,
                    mcp_name,
                    tool.name,
                    taken,
                )
        return kept

    def on_tools_changed(self, callback: Callable[[List[AgentTool]], None]) -> Callable[[], None]:
        """Call ``callback(tools)`` (unprefixed, refreshed) after each tool-list change the
        server announces; on a short-lived thread of its own, so it may call this server.
        Returns a function that unsubscribes."""
        self._listeners.append(callback)
        return lambda: self._listeners.remove(callback) if callback in self._listeners else None

    def _tools_changed(self) -> None:  # loop thread
        with self._tools_lock:
            self._tools_stale = True
            if self._refreshing:  # the running refresh fetches again when it sees the flag
                return
            self._refreshing = True

        def refresh() -> None:
            try:
                while True:
                    with self._tools_lock:
                        if not self._tools_stale:
                            self._refreshing = False
                            break
                    tools = self.tools()
            except Exception as exc:  # noqa: BLE001 - the next tools() call retries
                with self._tools_lock:
                    self._refreshing = False
                if self._closed:  # closed by its owner meanwhile: nothing went wrong
                    _log.debug("MCP server %r: tool-list refresh ended by close(): %s", self.name, exc)
                else:
                    _log.warning("MCP server %r: refreshing the tool list failed: %s", self.name, exc)
                return
            for callback in list(self._listeners):
                try:
                    callback(tools)
                except Exception:  # noqa: BLE001
                    _log.exception("MCP server %r: on_tools_changed callback failed", self.name)

        threading.Thread(target=refresh, name=f"agentcore-mcp-refresh-{self.name}", daemon=True).start()

    def _agent_tool(self, tool: Any, prefix: Optional[str]) -> AgentTool:
        key = (prefix, tool.name)
        made = self._made.get(key)
        if made is not None:
            return made
        mcp_name = tool.name

        def execute(tool_call_id: str, args: Any, signal: Any = None, on_update: Any = None) -> AgentToolResult:
            return self.call_tool(mcp_name, args, signal=signal, on_update=on_update)

        made = AgentTool(
            name=_tool_name(prefix, mcp_name),
            description=_description(tool),
            parameters=_schema(tool),
            execute=execute,
            label=getattr(tool, "title", None) or None,
        )
        self._made[key] = made
        return made

    def _update_made(self) -> None:
        current = {t.name: t for t in self._mcp_tools or ()}
        for (_, mcp_name), made in self._made.items():
            tool = current.get(mcp_name)
            if tool is not None:
                made.description, made.parameters = _description(tool), _schema(tool)

    # ------------------------------------------------------------------ calls

    def call_tool(
        self,
        name: str,
        arguments: Optional[Mapping[str, Any]] = None,
        *,
        signal: Any = None,
        on_update: Optional[Callable[[Any], None]] = None,
        timeout: Any = "default",
    ) -> AgentToolResult:
        """Call MCP tool ``name``; the result mapped as described in :mod:`agentcore_mcp.results`.

        ``signal`` (an agentcore ``AbortSignal``) cancels the request on the server when aborted;
        ``on_update`` receives progress as partial ``AgentToolResult``s; ``timeout`` overrides the
        server's default (``None``: no limit). Raises :class:`MCPToolError` (``isError`` or a
        refused call), :class:`MCPAbortedError`, :class:`MCPTimeoutError`, :class:`MCPServerError`
        (crash or hang: the server is restarted on the next call) or :class:`MCPConnectionError`.
        """
        limit = self.timeout if timeout == "default" else timeout
        if signal is not None and signal.aborted:
            raise MCPAbortedError(
                f"MCP server {self.name!r}: call to tool {name!r} not sent, the run was aborted",
                server=self.name,
                tool=name,
            )
        conn = self._connection(signal)

        def progress(p: float, total: Optional[float], message: Optional[str]) -> None:
            assert on_update is not None
            on_update(progress_update(p, total, message))

        future = _loop.submit(conn.call_tool(name, dict(arguments or {}), progress if on_update else None))

        def abort(_reason: Any = None) -> None:
            future.cancel()

        if signal is not None:
            signal.add_listener(abort)
        try:
            result = future.result(limit)
        except concurrent.futures.CancelledError:
            raise MCPAbortedError(
                f"MCP server {self.name!r}: call to tool {name!r} was aborted; the server was told to cancel it",
                server=self.name,
                tool=name,
            ) from None
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise self._timed_out(conn, name, limit) from None
        except BaseException:  # KeyboardInterrupt in the caller's thread: the server stops too
            future.cancel()
            raise
        finally:
            if signal is not None:
                signal.remove_listener(abort)
        return to_tool_result(result, self.name, name, self._spec.secrets.redact, self.max_output_chars)

    def _timed_out(self, conn: Connection, tool: str, limit: Optional[float]) -> MCPServerError:
        message = f"MCP server {self.name!r}: tool {tool!r} gave no result within {limit:g}s; the request was cancelled"
        try:
            _loop.submit(conn.probe()).result(PING_TIMEOUT)
        except Exception:  # noqa: BLE001 - no pong: the server hangs
            conn.mark_dead("stopped answering")
            return MCPServerError(
                message + f", and the server did not answer a ping within {PING_TIMEOUT:g}s "
                "either (hung); it will be restarted on the next call",
                server=self.name,
                tool=tool,
            )
        return MCPTimeoutError(message, server=self.name, tool=tool)

    def _wait(self, conn: Connection, coro: Any, limit: Optional[float], what: str) -> Any:
        future = _loop.submit(coro)
        try:
            return future.result(limit)
        except concurrent.futures.TimeoutError:
            future.cancel()
            conn.mark_dead(f"{what} timed out")
            raise MCPServerError(
                f"MCP server {self.name!r}: {what} gave no answer within {limit:g}s; "
                "it will be restarted on the next call",
                server=self.name,
            ) from None

    def __repr__(self) -> str:
        conn = self._conn
        if self._closed:
            state = "closed"
        elif self._starting is not None:
            state = "starting"
        else:
            state = "connected" if conn is not None and conn.alive else "idle"
        return f"MCPServer.{self._spec!r}[name={self.name!r}, {state}]"


def _abandon(connections: List[Connection]) -> None:
    """The finalizer of an MCPServer nobody closed (any thread, maybe inside the garbage
    collector): its session ends on the loop, without waiting here."""
    for conn in connections:
        conn.closing = True
        conn.mark_dead("closed")


def _default_name(spec: Spec) -> str:
    if spec.kind == "stdio":
        import os

        parts = [os.path.basename(str(spec.command))] + [a for a in spec.args if not a.startswith("-")]
        return (
            parts[-1]
            if parts[0] in ("npx", "uvx", "node", "python", "python3", "docker") and len(parts) > 1
            else parts[0]
        )
    from urllib.parse import urlsplit

    return urlsplit(str(spec.url)).hostname or "http"


def _tool_name(prefix: Optional[str], name: str) -> str:
    full = name if not prefix else (prefix + name if prefix.endswith(("_", "-")) else f"{prefix}_{name}")
    return _TOOL_NAME.sub("_", full)[:64] or "_"


def _description(tool: Any) -> str:
    return tool.description or getattr(tool, "title", None) or tool.name


def _schema(tool: Any) -> Dict[str, Any]:
    schema = dict(tool.input_schema or {})
    schema.setdefault("type", "object")
    if schema.get("type") == "object":
        schema.setdefault("properties", {})
    return schema

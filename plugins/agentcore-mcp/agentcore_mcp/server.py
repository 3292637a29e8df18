"""``MCPServer``: an MCP server (a subprocess over stdio, or a URL) whose tools are AgentTools.

Synchronous facade over :mod:`agentcore_mcp._connection`: every method blocks the calling thread
on a future of the plugin's private event loop (:mod:`agentcore_mcp._loop`) and never runs a loop
itself. Thread-safe: tool calls from the agent's parallel tool threads run concurrently on one
session.

Failure semantics, per call: a crash, a closed connection, a Streamable HTTP session the server
no longer knows (HTTP 404 to its session id: the server restarted) or a hang (no result within
``timeout`` and no answer to a liveness probe after it: ``ping``, or ``tools/list`` on 2026-07-28 sessions)
raises :class:`MCPServerError` naming the server and what happened, and drops the session; the
next call starts the server again. A call that merely took too long raises :class:`MCPTimeoutError` and the session stays. Aborting the run's signal cancels
the request on the server (``notifications/cancelled``) and raises :class:`MCPAbortedError` at
once. The agent loop turns each of these into an error tool result.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import logging
import math
import re
import threading
import time
import weakref
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from agentcore.providers.base import clean_header_value
from agentcore.tools import AgentTool, AgentToolResult

from . import _loop
from ._connection import Connection, Spec
from .errors import MCPAbortedError, MCPConnectionError, MCPError, MCPServerError, MCPTimeoutError, MCPToolError
from .results import progress_update, to_tool_result, truncation_notice

__all__ = ["MCPServer", "close_servers", "DEFAULT_TIMEOUT", "DEFAULT_CONNECT_TIMEOUT", "DEFAULT_MAX_OUTPUT_CHARS"]

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
    close_servers(list(_open_servers))


def close_servers(servers: Sequence[MCPServer]) -> None:
    """Close ``servers`` at once: every shutdown begins before the first is waited for, so that
    closing many takes as long as the slowest (a server that ignores stdin EOF takes seconds),
    not the sum; no threads (interpreter exit, where this runs, may refuse new ones). A failure
    is logged and the others are closed all the same."""
    begun: List[Tuple[MCPServer, Optional[Connection]]] = []
    for server in servers:
        try:
            begun.append((server, server._begin_close()))
        except Exception:  # noqa: BLE001 - close the rest
            _log.exception("closing MCP server %r failed", server.name)
    for server, conn in begun:
        try:
            if conn is not None:
                server._end(conn)
        except Exception:  # noqa: BLE001 - close the rest
            _log.exception("closing MCP server %r failed", server.name)


def valid_timeout(value: Any) -> bool:
    """Whether ``value`` is a number of seconds a thread can wait: positive, finite, at most
    ``threading.TIMEOUT_MAX`` (NaN, Infinity and ``1e10`` are refused: a wait for them fails at
    once, or with ``OverflowError``, on every call)."""
    return (
        not isinstance(value, bool)
        and isinstance(value, (int, float))
        and math.isfinite(value)
        and 0 < value <= threading.TIMEOUT_MAX
    )


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
        for option, value in (("timeout", timeout), ("connect_timeout", connect_timeout)):
            if not (value is None and option == "timeout") and not valid_timeout(value):
                raise ValueError(
                    f"MCPServer: {option} must be a positive number of seconds (at most "
                    f"{threading.TIMEOUT_MAX:.0f}){' or None' if option == 'timeout' else ''}, not {value!r}"
                )
        if not valid_max_output_chars(max_output_chars):
            raise ValueError(
                f"MCPServer: max_output_chars must be a positive integer or None, not {max_output_chars!r}"
            )
        self._spec = spec
        self.max_output_chars = max_output_chars
        self.name = name or _default_name(spec)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        # connection changes: held while one is replaced (a dead one ended, a new one started),
        # never while a handshake is awaited
        self._lock = threading.RLock()
        self._waiting_lock = threading.Lock()  # the count of callers waiting for a start; never waits
        # the tool-list state; never held while waiting, because the loop thread takes it too
        self._tools_lock = threading.Lock()
        self._conn: Optional[Connection] = None
        # Ends the session (and process group) of a server dropped without close(): collected
        # with the agent and tools that used it. Holds the connections, never the server.
        self._live: List[Connection] = []
        self._finalizer = weakref.finalize(self, _abandon, self._live)
        self._finalizer.atexit = False  # type: ignore[misc]  # documented; at exit _close_open_servers closes
        self._closed = False
        self._restarts = 0
        self._mcp_tools: Optional[List[Any]] = None
        self._tools_stale = True
        # bumped by each announced change and restart: a fetch that began before one is not fresh
        self._tools_gen = 0
        self._listed_gen = -1  # the generation at which the kept list's fetch began
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
        secrets: Sequence[str] = (),
    ) -> MCPServer:
        """A server started as ``command *args`` in ``cwd``, speaking JSON-RPC on stdin/stdout.

        Its environment is a safe minimum (HOME, PATH, USER, SHELL, TERM, LOGNAME) plus ``env``,
        as desktop MCP clients do; the values of ``env``, credentials in ``args`` (a URL's
        password and query values, the value of ``--api-key``, ``--token=``, ``PASSWORD=``...:
        see the README's "Secrets") and the strings of ``secrets`` (any other secret, e.g. a
        token inside an argument such as ``"Authorization: Bearer TOKEN"``) never appear in reprs,
        errors or logs.
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
            secrets=secrets,
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
        secrets: Sequence[str] = (),
    ) -> MCPServer:
        """A server at ``url`` over Streamable HTTP, falling back to the older HTTP+SSE transport
        when the server answers the Streamable HTTP POST with 400/404/405 (``transport="auto"``;
        ``"streamable-http"`` or ``"sse"`` force one). ``headers`` (e.g. ``Authorization``) go with
        every request and never appear in reprs, errors or logs; nor do the URL's password and
        query values, nor the strings of ``secrets`` (e.g. a key in the URL's path)."""
        if not isinstance(url, str) or not re.match(r"^https?://", url):
            raise ValueError(f"MCPServer.http: url must start with http:// or https://, not {url!r}")
        if transport not in ("auto", "streamable-http", "sse"):
            raise ValueError(f'MCPServer.http: transport must be "auto", "streamable-http" or "sse", not {transport!r}')
        try:
            clean = {str(k): clean_header_value(str(k), v) for k, v in (headers or {}).items()}
        except ValueError as exc:
            raise ValueError(f"MCPServer.http: {exc}") from None
        spec = Spec("http", url=url, headers=clean, transport=transport, secrets=secrets)
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
        """The live connection, started first when there is none (or it died). A caller that
        finds a start in progress, another thread's or its own, waits for that one handshake with
        its own ``signal``: the lock is held only while the connection changes, never during the
        wait, so an abort returns at once wherever the caller waits."""
        with self._lock:
            conn, wait = self._current(signal)
        if wait:
            self._wait_ready(conn, signal)
        return conn

    def _current(self, signal: Any) -> Tuple[Connection, bool]:
        """Under the lock: the ready connection (``False``: no wait), or the start to wait for
        (``True``, this caller counted among its waiters): the one in progress, or a new one, the
        dead one ended first. Raises when closed, or when ``signal`` was aborted meanwhile."""
        if self._closed:
            raise MCPConnectionError(f"MCP server {self.name!r} is closed", server=self.name)
        if signal is not None and signal.aborted:  # while this caller waited for the lock
            raise MCPAbortedError(
                f"MCP server {self.name!r}: the run was aborted while the call waited for the server; nothing was sent",
                server=self.name,
            )
        conn = self._conn
        if conn is not None:
            with self._waiting_lock:  # one look: a start that ends meanwhile is over, never lost
                if _starting(conn):
                    conn.waiters += 1
                    return conn, True
            if _handshake_done(conn) and conn.alive:
                return conn, False
            # it died, or its start failed: a fresh one, which starts once the dead one is gone;
            # waited for on the loop, never here: this lock is held, and an abort must be heard
            if _handshake_done(conn):
                _log.info("MCP server %r %s; restarting it", self.name, conn.dead_reason or "is gone")
                self._restarts += 1
            conn.mark_dead(conn.dead_reason or "closed")
            self._conn = None
            with self._tools_lock:
                self._tools_gen += 1
                self._tools_stale = True
            return self._start(previous=conn), True
        return self._start(), True

    def _start(self, previous: Optional[Connection] = None) -> Connection:
        """Under the lock: a new connection, started on the loop, its starter its one waiter; it
        waits (on the loop, up to ``CLOSE_TIMEOUT``) until ``previous`` has ended, then kills
        what is left of it, and only then starts the server again."""
        conn = Connection(self.name, self._spec, self._tools_changed, previous=previous, previous_wait=CLOSE_TIMEOUT)
        due = self.connect_timeout + (CLOSE_TIMEOUT if previous is not None else 0.0)
        conn.waiters, conn.handshake_due = 1, time.monotonic() + due
        self._live[:] = [conn]
        # close() and interpreter exit end a start in progress too (never an orphan)
        self._conn = conn
        if self._closed:  # close() ran between the check in _current and now
            conn.closing = True
            conn.mark_dead("closed")
        _track(self)
        _loop.submit(conn.run())
        return conn

    def _wait_ready(self, conn: Connection, signal: Any) -> None:
        """Wait for ``conn``'s handshake until it is due (``connect_timeout`` after its start, plus
        ``CLOSE_TIMEOUT`` for a restart, which first waits for the dead process to end), returning
        early when this caller's run is aborted or the server closed. An aborted caller ends the
        start only when no other caller waits for it. On failure the connection winds down on the
        loop (``close()`` waits for that, and a restart starts the server only after it) and the
        error is raised at once."""
        aborted: concurrent.futures.Future[None] = concurrent.futures.Future()

        def abort(_reason: Any = None) -> None:
            if not aborted.done():
                aborted.set_result(None)

        if signal is not None:
            signal.add_listener(abort)
        try:
            concurrent.futures.wait(
                [conn.ready, conn.stopped, aborted],
                max(0.0, conn.handshake_due - time.monotonic()),
                concurrent.futures.FIRST_COMPLETED,
            )
        finally:
            if signal is not None:
                signal.remove_listener(abort)
            with self._waiting_lock:  # one decision with the count: nobody joins a start given up
                conn.waiters -= 1
                if aborted.done() and conn.waiters == 0 and _starting(conn):
                    conn.mark_dead("aborted while starting")
        if _handshake_done(conn):
            return  # (a server that died right after the handshake: the call reports it)
        if self._closed or conn.closing:
            conn.mark_dead("closed")
            raise MCPConnectionError(f"MCP server {self.name!r} was closed while it was starting", server=self.name)
        if aborted.done():
            after = "it goes on for the other calls waiting" if _starting(conn) else "it starts on the next call"
            raise MCPAbortedError(
                f"MCP server {self.name!r} ({self._spec.describe()}): the run was aborted while the "
                f"server was starting; {after}",
                server=self.name,
            )
        if conn.ready.done():
            error = conn.ready.exception()
            assert error is not None
            raise error
        conn.mark_dead("handshake timed out")  # (another caller's wait may have ended it first)
        raise MCPConnectionError(
            f"MCP server {self.name!r} ({self._spec.describe()}) did not finish "
            f"the MCP handshake within {self.connect_timeout:g}s",
            server=self.name,
        )

    def close(self) -> None:
        """End the session and (stdio) the process group: stdin closed, then SIGTERM and SIGKILL
        if it ignores that. Idempotent; afterwards every call raises :class:`MCPConnectionError`.
        Callers waiting for a start in progress get that error at once."""
        conn = self._begin_close()
        if conn is not None:
            self._end(conn)

    def _begin_close(self) -> Optional[Connection]:
        """Mark the server closed and start ending its session without waiting; the connection
        to wait for with :meth:`_end` (None when there was none)."""
        self._closed = True
        with self._lock:
            conn, self._conn = self._conn, None
        _open_servers.discard(self)
        if conn is not None:
            conn.closing = True
            conn.mark_dead(conn.dead_reason or "closed")
        return conn

    def _end(self, conn: Connection) -> None:
        """End ``conn`` and the dead connections it replaced that may still be ending (a restart
        waits for them on the loop): each waited for up to ``CLOSE_TIMEOUT``, then killed."""
        conn.mark_dead(conn.dead_reason or "closed")
        from ._stdio import group_alive, kill_group

        for ending in [conn, *conn.ended_before()]:
            try:
                ending.done.result(CLOSE_TIMEOUT)
            except concurrent.futures.TimeoutError:
                _log.warning("MCP server %r did not shut down within %ss; killing it", self.name, CLOSE_TIMEOUT)
            pid = ending.state.pid
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

        Names are made valid for model APIs (characters outside ``A-Za-z0-9_-`` become ``_``, a
        ``_`` goes before a first character that is not a letter, at most 64 characters).
        Description and input JSON schema are passed through. After the server sent
        ``notifications/tools/list_changed`` the list is fetched again (also when the
        notification arrived while a list was being fetched: that list may predate the change),
        and the AgentTool objects returned before are updated in place (description, schema).
        Connects first if needed.
        """
        conn = self._connection()
        with self._tools_lock:
            stale = self._tools_stale or self._mcp_tools is None
            generation = self._tools_gen
        if stale:
            listed = self._wait(conn, conn.list_tools(), self.connect_timeout, "tools/list")
            self._keep_tools(listed, generation)
        with self._tools_lock:
            made = [(t.name, self._agent_tool(t, prefix)) for t in self._mcp_tools or ()]
        return self._unique(made)

    def _keep_tools(self, listed: List[Any], generation: int) -> None:
        """Keep a list whose fetch began at ``generation``, unless a list fetched later was kept
        meanwhile. It is fresh only when no change was announced (and no restart happened) since
        its fetch began; otherwise the flag stays up and the next ``tools()`` fetches again."""
        with self._tools_lock:
            if generation < self._listed_gen:
                return
            self._mcp_tools, self._listed_gen = listed, generation
            self._tools_stale = generation != self._tools_gen
            self._update_made()

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
        One refresh runs at a time and calls the callbacks in the order of the lists it fetched,
        so the last list a callback got is the newest (a callback that blocks holds back the
        lists of later changes, not ``tools()``). Returns a function that unsubscribes."""
        self._listeners.append(callback)
        return lambda: self._listeners.remove(callback) if callback in self._listeners else None

    def _tools_changed(self) -> None:  # loop thread
        """The server announced a tool-list change: the list is stale, and a refresh thread
        starts unless one runs (that one fetches and calls the callbacks again when it is done)."""
        with self._tools_lock:
            self._tools_gen += 1
            self._tools_stale = True
            if self._refreshing:
                return
            self._refreshing = True
        threading.Thread(target=self._refresh, name=f"agentcore-mcp-refresh-{self.name}", daemon=True).start()

    def _refresh(self) -> None:
        """Fetch the list until it is fresh, call the callbacks with it, and start over while a
        change arrived meanwhile. Stays "refreshing" until the callbacks returned, so an older
        list never reaches them after a newer one."""
        running = True
        try:
            while True:
                self._call_listeners(self._fresh_tools())
                with self._tools_lock:
                    if not self._tools_stale:
                        self._refreshing = running = False
                        return
        except Exception as exc:  # noqa: BLE001 - the next tools() call retries
            if self._closed:  # closed by its owner meanwhile: nothing went wrong
                _log.debug("MCP server %r: tool-list refresh ended by close(): %s", self.name, exc)
            else:
                _log.warning("MCP server %r: refreshing the tool list failed: %s", self.name, exc)
        finally:
            if running:  # failed (or a callback raised a BaseException): the next change refreshes
                with self._tools_lock:
                    self._refreshing = False

    def _fresh_tools(self) -> List[AgentTool]:
        """``tools()``, fetched again while a change arrived during the fetch."""
        while True:
            tools = self.tools()
            with self._tools_lock:
                if not self._tools_stale:
                    return tools

    def _call_listeners(self, tools: List[AgentTool]) -> None:
        for callback in list(self._listeners):
            try:
                callback(tools)
            except Exception:  # noqa: BLE001
                _log.exception("MCP server %r: on_tools_changed callback failed", self.name)

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
        server's default (``None``: no limit); one no wait can use (not positive, NaN, infinite,
        not a number) raises ``ValueError`` before anything is sent. Raises :class:`MCPToolError`
        (``isError`` or a refused call; its text cut to ``max_output_chars`` as a result's is),
        :class:`MCPAbortedError`, :class:`MCPTimeoutError`,
        :class:`MCPServerError` (crash, hang, or an HTTP session the server no longer knows: the
        server is restarted, or reconnected to, on the next call) or :class:`MCPConnectionError`.
        """
        limit = self.timeout if timeout == "default" else timeout
        if limit is not None and not valid_timeout(limit):  # before anything is sent
            raise ValueError(
                f"MCPServer.call_tool: timeout must be a positive number of seconds (at most "
                f"{threading.TIMEOUT_MAX:.0f}) or None, not {limit!r} (server {self.name!r}, tool {name!r})"
            )
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
            result = self._outcome(future, conn, name, limit, signal)
        except MCPToolError as exc:  # a refused call: the server's message, as long as it likes
            raise self._capped(exc) from None
        finally:
            if signal is not None:
                signal.remove_listener(abort)
        return to_tool_result(result, self.name, name, self._spec.secrets.redact, self.max_output_chars)

    def _outcome(
        self, future: concurrent.futures.Future[Any], conn: Connection, tool: str, limit: Optional[float], signal: Any
    ) -> Any:
        """The call's result within ``limit``, or the error saying it was aborted or timed out
        (the request cancelled). A result that lands as the time runs out, too late for the
        cancel, is the outcome after all: the call completed, so it is neither "cancelled" nor
        a timeout."""
        try:
            return future.result(limit)
        except concurrent.futures.CancelledError:
            raise MCPAbortedError(
                f"MCP server {self.name!r}: call to tool {tool!r} was aborted; the server was told to cancel it",
                server=self.name,
                tool=tool,
            ) from None
        except concurrent.futures.TimeoutError:
            if future.cancel():
                raise self._timed_out(conn, tool, limit, signal) from None
        except BaseException:  # KeyboardInterrupt in the caller's thread: the server stops too
            future.cancel()
            raise
        # cancel() failed: the outcome is set, or being set on the loop thread this instant
        return future.result()

    def _capped(self, error: MCPToolError) -> MCPToolError:
        """``error`` with its text cut to ``max_output_chars`` as a result's is: the text of a
        refused call (a JSON-RPC error's message) goes into the transcript like any result."""
        text, limit = str(error), self.max_output_chars
        if limit is None or len(text) <= limit:
            return error
        return MCPToolError(
            f"{text[:limit]}\n\n{truncation_notice(limit, len(text))}", server=error.server, tool=error.tool
        )

    def _timed_out(self, conn: Connection, tool: str, limit: Optional[float], signal: Any) -> MCPError:
        """The error for a call that gave no result within ``limit``: a liveness probe (up to
        ``PING_TIMEOUT``) tells a slow tool (:class:`MCPTimeoutError`) from a hung server
        (:class:`MCPServerError`, marked for a restart). An abort of ``signal`` during the probe
        stops the wait at once (:class:`MCPAbortedError`); the server is then left as it is, since
        nothing showed it hung (the next call finds out)."""
        message = f"MCP server {self.name!r}: tool {tool!r} gave no result within {limit:g}s; the request was cancelled"
        probe = _loop.submit(conn.probe())

        def stop(_reason: Any = None) -> None:
            probe.cancel()

        if signal is not None:
            signal.add_listener(stop)
        try:
            probe.result(PING_TIMEOUT)
        except concurrent.futures.CancelledError:
            return MCPAbortedError(
                message + ", and the run was aborted while the server was being checked for a hang",
                server=self.name,
                tool=tool,
            )
        except Exception:  # noqa: BLE001 - no pong: the server hangs
            conn.mark_dead("stopped answering")
            return MCPServerError(
                message + f", and the server did not answer a ping within {PING_TIMEOUT:g}s "
                "either (hung); it will be restarted on the next call",
                server=self.name,
                tool=tool,
            )
        finally:
            if signal is not None:
                signal.remove_listener(stop)
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
        elif conn is not None and _starting(conn):
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


def _handshake_done(conn: Connection) -> bool:
    """Whether ``conn`` finished its handshake (it may have died since)."""
    return conn.ready.done() and conn.ready.exception() is None


def _starting(conn: Connection) -> bool:
    """Whether ``conn``'s handshake is still awaited: neither finished nor given up."""
    return not conn.ready.done() and not conn.stopped.done()


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
    """The agent tool name of MCP tool ``name``: what every provider accepts, ``[A-Za-z0-9_-]``,
    at most 64, and a letter or ``_`` first (Gemini refuses every request naming a tool that
    starts with a digit or ``-``, such as ``2fa_check`` or, with prefix ``1password``, any)."""
    full = name if not prefix else (prefix + name if prefix.endswith(("_", "-")) else f"{prefix}_{name}")
    valid = _TOOL_NAME.sub("_", full)
    if not re.match(r"[A-Za-z_]", valid):  # (also the empty name: "_")
        valid = "_" + valid
    return valid[:64]


def _description(tool: Any) -> str:
    return tool.description or getattr(tool, "title", None) or tool.name


def _schema(tool: Any) -> Dict[str, Any]:
    schema = dict(tool.input_schema or {})
    schema.setdefault("type", "object")
    if schema.get("type") == "object":
        schema.setdefault("properties", {})
    return schema

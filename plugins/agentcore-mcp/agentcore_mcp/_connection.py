"""One live MCP session, owned by one task on the private loop (the async side of MCPServer).

``run()`` enters the SDK ``Client`` (and its transport) and then waits for ``stop()``: anyio's
cancel scopes must be entered and left by the same task, so the session has one owner task and
every request runs in its own task beside it. ``ready`` (a ``concurrent.futures.Future``) tells the
caller's thread when the handshake finished or failed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import json
import logging
import sys
import weakref
from contextlib import AsyncExitStack, suppress
from typing import Any, AsyncIterator, Callable, Dict, List, Optional, Sequence, Tuple

import mcp_types
from mcp import Client
from mcp.shared.exceptions import MCPError as SdkMCPError

from . import _stdio
from ._listing import tolerant_tool_lists
from ._secrets import Secrets, safe_url, watch_logs
from .errors import MCPConnectionError, MCPServerError, MCPToolError

_log = logging.getLogger("agentcore_mcp")

_LOST = (ConnectionError, OSError, EOFError)

# MCP's (syslog's) log levels as logging's: "notice" has no level of its own, nor do the two above
# "critical"
_LOG_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}
SERVER_LOGGER = "agentcore_mcp.server"  # + "." + the server's name: where its log messages go

_GROUPS: Tuple[type, ...]
if sys.version_info >= (3, 11):
    _GROUPS = (BaseExceptionGroup,)  # noqa: F821 - a builtin from Python 3.11 (guarded above)
else:  # pragma: no cover - Python 3.10: anyio depends on the exceptiongroup backport
    from exceptiongroup import BaseExceptionGroup as _BackportGroup

    _GROUPS = (_BackportGroup,)


class Spec:
    """How to reach a server. Secrets stay in here and never reach a repr."""

    def __init__(
        self,
        kind: str,
        *,
        command: Optional[str] = None,
        args: List[str] = (),  # type: ignore[assignment]
        env: Optional[Dict[str, str]] = None,
        cwd: Optional[str] = None,
        url: Optional[str] = None,
        headers: Optional[Dict[str, str]] = None,
        transport: str = "auto",
        secrets: Sequence[str] = (),
    ) -> None:
        self.kind = kind
        self.command = command
        self.args = list(args)
        self.env = dict(env) if env else None
        self.cwd = cwd
        self.url = url
        self.headers = dict(headers) if headers else None
        self.transport = transport  # http only: "auto" (Streamable HTTP, then SSE), "streamable-http", "sse"
        self.mode = "auto"  # the SDK's protocol negotiation; tests set "legacy" to force a 2025-era session
        # env and header values, the URL's password and query values, credentials in args, and
        # the caller's own (the values a config file's ${VAR}s brought in)
        self.secrets = Secrets.of(self.env, self.headers, url, args=self.args, extra=[str(v) for v in secrets])
        if kind == "http":
            watch_logs(self.secrets)

    def describe(self) -> str:
        """The server's address for messages: the command line or the URL, secrets masked."""
        if self.kind == "stdio":
            return self.secrets.redact(" ".join([str(self.command), *map(str, self.args)]))
        return self.secrets.redact(safe_url(str(self.url)))

    def __repr__(self) -> str:
        if self.kind == "stdio":
            env = f", env=<{len(self.env)} hidden: {', '.join(sorted(self.env))}>" if self.env else ""
            return f"stdio({self.describe()!r}{env})"
        headers = f", headers=<{len(self.headers)} hidden: {', '.join(sorted(self.headers))}>" if self.headers else ""
        return f"http({self.describe()!r}{headers})"


class Connection:
    """A session with the server; ``dead`` once it failed (the owner then starts a new one)."""

    def __init__(
        self,
        name: str,
        spec: Spec,
        on_tools_changed: Callable[[], None],
        *,
        previous: Optional[Connection] = None,
        previous_wait: float = 10.0,
    ) -> None:
        self.name = name
        # the dead connection this one replaces: run() starts the server again only once that
        # one ended (at most ``previous_wait`` seconds, then what is left of it is killed)
        self.previous = previous
        self._previous_wait = previous_wait
        self.spec = spec
        self.state = _stdio.ProcessState(name, spec.secrets)
        self.client: Any = None
        self.transport_used: Optional[str] = None
        self.ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self.done: concurrent.futures.Future[None] = concurrent.futures.Future()
        # set by mark_dead: a caller waiting for ``ready`` gives up at once (``ready`` itself is
        # only settled once the transport has shut the server down, which may take seconds)
        self.stopped: concurrent.futures.Future[None] = concurrent.futures.Future()
        self.dead_reason: Optional[str] = None
        self.closing = False  # the owner closed it: calls in flight say so, not "crashed"
        self.session_gone = False  # Streamable HTTP: the server answered 404 to our session id
        # Streamable HTTP: "HTTP 401 Unauthorized" by the JSON-RPC id of a request the server
        # refused so, until the SDK's error for it passes the reader (see _http_error)
        self._http_errors: Dict[Any, str] = {}
        # the owner's bookkeeping of the start (MCPServer, under its locks): how many callers
        # wait for ``ready``, and when the handshake is due (``time.monotonic()``)
        self.waiters = 0
        self.handshake_due = 0.0
        self._stop = asyncio.Event()  # not bound to a loop until first awaited (Python 3.10+)
        self._task: Optional[asyncio.Task[Any]] = None
        # weakly: the session task on the loop must not keep an abandoned MCPServer alive (its
        # finalizer is what ends the session of a server nobody closed)
        self._tools_changed_ref = weakref.WeakMethod(on_tools_changed)

    # ------------------------------------------------------------------ lifecycle (loop thread)

    async def run(self) -> None:
        self._task = asyncio.current_task()
        try:
            if self._stop.is_set():  # given up before the loop got to it
                raise ConnectionError(self.dead_reason or "closed")
            await self._previous_gone()
            async with AsyncExitStack() as stack:
                await self._connect(stack)
                if not self.ready.done():
                    self.ready.set_result(None)
                await self._maybe_listen(stack)
                await self._stop.wait()
        except BaseException as exc:  # noqa: BLE001 - reported through the futures
            if not self.ready.done():
                self.ready.set_exception(self._start_error(exc))
            elif self.dead_reason is None:
                self.dead_reason = self._redact(_describe(exc))
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            if self.dead_reason is None:
                self.dead_reason = "closed"
            if not self.done.done():
                self.done.set_result(None)
            # the last word on orphans: whatever is left of the process group goes
            _stdio.kill_group(self.state.pid if self.state.pid and _stdio.group_alive(self.state.pid) else None)

    async def _previous_gone(self) -> None:
        """Wait until the connections this one replaces have ended (``previous``, and the one
        that one replaced if a start aborted meanwhile left it ending; ``previous_wait`` seconds
        in all), then kill what is left of their process groups: never two processes of one
        server at once."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._previous_wait
        for previous in self.ended_before():
            # asyncio.wait, not wait_for: a timeout must not cancel the previous one's ``done``
            await asyncio.wait([asyncio.wrap_future(previous.done)], timeout=max(0.0, deadline - loop.time()))
            pid = previous.state.pid
            if pid is not None and _stdio.group_alive(pid):
                _log.warning("MCP server %r did not shut down within %ss; killing it", self.name, self._previous_wait)
                _stdio.kill_group(pid)
        self.previous = None  # ended: nothing to wait for, and no chain of dead sessions kept

    def ended_before(self) -> List[Connection]:
        """The connections this one replaces that may still be ending, newest first."""
        chain: List[Connection] = []
        previous = self.previous
        while previous is not None:
            chain.append(previous)
            previous = previous.previous
        return chain

    async def _connect(self, stack: AsyncExitStack) -> None:
        if self.spec.kind == "stdio":
            transport = _stdio.stdio_transport(
                str(self.spec.command), self.spec.args, self.spec.env, self.spec.cwd, self.state
            )
            self.client = await stack.enter_async_context(self._client(transport))
            self.transport_used = "stdio"
            return
        if self.spec.transport == "sse":
            self.client = await stack.enter_async_context(self._client(self._sse()))
            self.transport_used = "sse"
            return
        try:
            http_client = self._http_client()
            # the SDK closes an HTTP client it made, never one it was given: its connections
            # (sockets, transports) would be left to the garbage collector
            stack.push_async_callback(http_client.aclose)
            self.client = await stack.enter_async_context(self._client(self._streamable(http_client)))
            self.transport_used = "streamable-http"
            return
        except Exception as exc:  # noqa: BLE001 - maybe a server that speaks only the old HTTP+SSE
            if self.spec.transport != "auto":
                raise
            first = exc
        # The SDK folds the HTTP status of a refused POST (404/405) into a generic JSON-RPC error,
        # so any failure of Streamable HTTP is worth one try of HTTP+SSE, as other clients do.
        _log.debug("%s: Streamable HTTP failed (%s); trying HTTP+SSE", self.name, self._redact(_describe(first)))
        try:
            self.client = await stack.enter_async_context(self._client(self._sse()))
        except Exception as exc:  # noqa: BLE001 - report both attempts
            raise ConnectionError(f"Streamable HTTP: {_describe(first)}; HTTP+SSE: {_describe(exc)}") from None
        self.transport_used = "sse"

    # No read timeout on the HTTP streams: the SDK's default (300 s without an event) ended any
    # call that ran longer, whatever its ``timeout``, as a "closed connection"; the per-call
    # timeout (and the liveness probe after it) is the one limit of a call, as over stdio.

    def _sse(self) -> Any:
        from mcp.client.sse import sse_client

        return sse_client(str(self.spec.url), headers=self.spec.headers, sse_read_timeout=None)  # type: ignore[arg-type]

    def _http_client(self) -> Any:
        """The HTTP client of a Streamable HTTP session (the caller closes it)."""
        import httpx2
        from mcp.shared._httpx_utils import MCP_DEFAULT_TIMEOUT, create_mcp_http_client

        timeout = httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=None)
        http_client = create_mcp_http_client(headers=self.spec.headers, timeout=timeout)
        http_client.event_hooks["response"].append(self._on_http_response)
        return http_client

    def _streamable(self, http_client: Any) -> Any:
        from mcp.client.streamable_http import streamable_http_client

        # one SSE event is one message: as long as a stdio server's may be (the SDK's 1 MiB
        # default failed a result of 2 MB, as a lost connection)
        limit = _stdio.MAX_MESSAGE_BYTES
        return streamable_http_client(str(self.spec.url), http_client=http_client, max_sse_event_size=limit)

    async def _on_http_response(self, response: Any) -> None:
        """Note a session the server no longer knows: by the Streamable HTTP spec, a 404 to a
        request carrying the session id (a server that restarted or ended the session). The
        SDK turns it into an ordinary JSON-RPC error, which would fail every later call too.
        Note the HTTP status of any refused request too: the SDK's error for it says only
        "Server returned an error response" (an expired token's 401, a proxy's 502, a 429).
        A POST's answer that is not an SSE stream (one JSON message) is read up to
        ``MAX_MESSAGE_BYTES``, as a stdio server's message is: past it the SDK's read fails and the
        request gets a JSON-RPC error saying so (a body of a gigabyte was read whole)."""
        if response.status_code == 404 and "mcp-session-id" in response.request.headers:
            self.session_gone = True
        if response.request.method == "POST" and not _is_event_stream(response):
            response.stream = _capped_stream_type()(response.stream, _stdio.MAX_MESSAGE_BYTES)
        if response.status_code >= 400 and response.request.method == "POST":
            request_id = _request_id(response.request)
            if request_id is not None:
                if len(self._http_errors) >= 256:  # errors of requests nobody waits for any more
                    self._http_errors.clear()
                reason = str(getattr(response, "reason_phrase", "") or "")
                self._http_errors[request_id] = f"HTTP {response.status_code} {reason}".strip()

    def _http_error(self, request_id: Any) -> Optional[str]:
        """The HTTP status the server refused request ``request_id`` with (once), or None."""
        return self._http_errors.pop(request_id, None)

    def _client(self, transport: Any) -> Any:
        return Client(
            tolerant_tool_lists(
                transport, self.name, lambda: getattr(self.client, "protocol_version", None), self._http_error
            ),
            mode=self.spec.mode,
            message_handler=self._on_message,
            logging_callback=self._on_log,
            # 2026-07-28+ servers send log messages only to requests that ask for them; ask for
            # all of them, logging's levels and handlers decide what is kept (no effect on older
            # sessions, whose servers send what they like)
            log_level="debug",
            cache=None,
            client_info=mcp_types.Implementation(name="agentcore-mcp", version="0.1.0"),
        )

    async def _maybe_listen(self, stack: AsyncExitStack) -> None:
        """On 2026-07-28+ sessions list changes arrive through ``subscriptions/listen``."""
        caps = getattr(self.client.server_capabilities, "tools", None)
        if not (caps and getattr(caps, "list_changed", False)):
            return
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        if self.client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return  # older sessions get notifications/tools/list_changed in _on_message

        async def listen() -> None:
            try:
                async with self.client.listen(tools_list_changed=True) as sub:
                    async for _ in sub:
                        self._on_tools_changed()
            except Exception as exc:  # noqa: BLE001 - refresh on change is best effort
                _log.debug("%s: subscriptions/listen ended: %s", self.name, self._redact(_describe(exc)))

        task = asyncio.ensure_future(listen())
        stack.callback(task.cancel)

    def _on_tools_changed(self) -> None:
        callback = self._tools_changed_ref()
        if callback is not None:
            callback()

    async def _on_message(self, message: Any) -> None:
        root = getattr(message, "root", message)
        if isinstance(root, mcp_types.ToolListChangedNotification):
            self._on_tools_changed()

    async def _on_log(self, params: mcp_types.LoggingMessageNotificationParams) -> None:
        """A ``notifications/message`` of the server, logged on ``agentcore_mcp.server.<name>`` at
        the matching level: its ``data`` as text (a string as it is, anything else as JSON),
        prefixed with the server's logger name when it gives one, the server's secrets masked.
        The record also carries ``mcp_level`` and ``mcp_logger``. Never raises into the SDK."""
        try:
            level = _LOG_LEVELS.get(str(params.level), logging.WARNING)
            logger = logging.getLogger(f"{SERVER_LOGGER}.{self.name}")
            if not logger.isEnabledFor(level):
                return
            data = params.data
            # ASCII JSON: Secrets knows each secret's JSON-escaped form (ensure_ascii, as here)
            text = data if isinstance(data, str) else json.dumps(data, default=str)
            if params.logger:
                text = f"{params.logger}: {text}"
            logger.log(level, "%s", self._redact(text), extra={"mcp_level": params.level, "mcp_logger": params.logger})
        except Exception as exc:  # noqa: BLE001 - a bad message must not disturb the session
            _log.debug("MCP server %r: a log message could not be logged (%s)", self.name, type(exc).__name__)

    def stop(self) -> None:
        """Ask ``run`` to end the session (any thread); a handshake in progress is cancelled."""
        from . import _loop

        _loop.call_soon(self._stop_now)

    def _stop_now(self) -> None:  # loop thread
        self._stop.set()
        if self._task is not None and not self.ready.done():
            self._task.cancel()  # still connecting: nothing else would end the wait for the server

    @property
    def alive(self) -> bool:
        if self.dead_reason is not None or self.done.done():
            return False
        if self.spec.kind == "stdio":
            return self.state.alive
        return True

    def mark_dead(self, reason: str) -> None:
        if self.dead_reason is None:
            self.dead_reason = reason
        if not self.stopped.done():
            with suppress(concurrent.futures.InvalidStateError):  # two threads at once
                self.stopped.set_result(None)
        self.stop()

    # ------------------------------------------------------------------ requests (loop thread)

    async def call_tool(
        self, tool: str, arguments: Optional[Dict[str, Any]], on_progress: Optional[Callable[..., Any]]
    ) -> Any:
        async def forward(progress: float, total: Optional[float], message: Optional[str]) -> None:
            assert on_progress is not None
            on_progress(progress, total, message)  # thread-safe: the agent loop's on_update queues

        callback = forward if on_progress is not None else None  # no callback: no progress token sent
        try:
            return await self.client.call_tool(tool, arguments or {}, progress_callback=callback)
        except SdkMCPError as exc:
            if self._lost(exc):
                raise await self.lost(f"during the call to tool {tool!r}") from None
            raise MCPToolError(
                self._redact(
                    f"MCP server {self.name!r}: tool {tool!r} failed: {exc.message} (JSON-RPC error {exc.code})"
                ),
                server=self.name,
                tool=tool,
            ) from None
        except _LOST as exc:
            raise await self.lost(f"during the call to tool {tool!r} ({_describe(exc)})") from None
        except Exception as exc:
            if not self.alive or _is_transport_error(exc):
                raise await self.lost(f"during the call to tool {tool!r} ({_describe(exc)})") from None
            if type(exc).__name__ == "ValidationError":  # pydantic: the SDK could not read the result
                raise MCPToolError(
                    self._redact(
                        f"MCP server {self.name!r}: tool {tool!r} returned a result that is not valid MCP: "
                        f"{_first_validation_error(exc)}"
                    ),
                    server=self.name,
                    tool=tool,
                ) from None
            # the SDK's own checks of the result (structuredContent against the tool's
            # outputSchema) raise a bare RuntimeError of several lines; anything else too
            what = (
                "returned a result that does not match its outputSchema"
                if isinstance(exc, RuntimeError) and "structured content" in str(exc).lower()
                else "failed in the client"
            )
            detail = " ".join(_describe(exc).split("\n\n")[0].split())
            raise MCPToolError(
                self._redact(f"MCP server {self.name!r}: tool {tool!r} {what}: {detail}"), server=self.name, tool=tool
            ) from None

    async def list_tools(self) -> List[Any]:
        tools: List[Any] = []
        cursor = None
        try:
            for _ in range(100):  # a paginator that never ends cannot hang us
                page = await self.client.list_tools(cursor=cursor)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
        except SdkMCPError as exc:
            if self._lost(exc):
                raise await self.lost("while listing its tools") from None
            raise MCPServerError(
                self._redact(f"MCP server {self.name!r}: tools/list failed: {exc.message}"), server=self.name
            ) from None
        except _LOST as exc:
            raise await self.lost(f"while listing its tools ({_describe(exc)})") from None
        return tools

    async def probe(self) -> None:
        """A cheap request that any live server answers: ``ping`` on handshake-era sessions,
        ``tools/list`` on 2026-07-28+ ones (where ``ping`` no longer exists)."""
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        if self.client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            await self.client.list_tools()
        else:
            await self.client.send_ping()

    def _lost(self, exc: SdkMCPError) -> bool:
        """Whether an SDK error of a request means the session is gone, not the server's answer:
        the connection closed, or the server no longer knows the session (any error but "method
        not found", which a server may also send with HTTP status 404)."""
        gone = self.session_gone and exc.code != mcp_types.METHOD_NOT_FOUND
        return gone or _lost_connection(exc) or not self.alive

    async def lost(self, when: str) -> MCPServerError:
        """Mark the connection dead and build the error that says what happened."""
        if self.closing:
            self.mark_dead("closed")
            return MCPServerError(f"MCP server {self.name!r} was closed {when}", server=self.name)
        words: List[str] = []
        if self.spec.kind == "stdio":
            await self.state.wait_exit(1.0)  # let the exit code arrive
            words = _stdio.describe_exit(self.state)
        if words:
            what = " and ".join(words)
        elif self.session_gone:
            what = "no longer knows this session (HTTP 404: it restarted or ended the session)"
        else:
            what = "closed the connection"
        message = f"MCP server {self.name!r} {what} {when}; it will be restarted on the next call"
        stderr = self.state.stderr_text()
        if stderr:
            message += f". Its stderr ended with: {stderr}"
        self.mark_dead(what)
        return MCPServerError(self._redact(message), server=self.name)

    # ------------------------------------------------------------------ helpers

    def _start_error(self, exc: BaseException) -> MCPConnectionError:
        words = [f"MCP server {self.name!r} ({self.spec.describe()}) could not be started: {_describe(exc)}"]
        if self.spec.kind == "stdio":
            words += _stdio.describe_exit(self.state)
            stderr = self.state.stderr_text()
            if stderr:
                words.append(f"its stderr ended with: {stderr}")
        return MCPConnectionError(self._redact("; ".join(words)), server=self.name)

    def _redact(self, text: str) -> str:
        return self.spec.secrets.redact(text)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, _GROUPS):  # the SDK's task groups wrap what failed
        return "; ".join(_describe(e) for e in exc.exceptions)  # type: ignore[attr-defined]
    if isinstance(exc, SdkMCPError):
        return f"{exc.message} (JSON-RPC error {exc.code})"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _first_validation_error(exc: Any) -> str:
    """The first problem of a pydantic ValidationError, as "where: what" (its whole text is long)."""
    try:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or "result"
        return f"{where}: {first.get('msg', 'invalid')} ({exc.error_count()} problem(s))"
    except Exception:  # noqa: BLE001 - any other shape: the first line of its text
        return str(exc).splitlines()[0]


def _lost_connection(exc: Any) -> bool:
    """Whether an SDK ``MCPError`` is the SDK saying the connection is gone, not the server's
    answer. Both use code -32000 (``CONNECTION_CLOSED`` is the JSON-RPC "server error" code many
    servers send for their own failures), so the SDK's own messages tell them apart: "Connection
    closed" and its streamable-HTTP "SSE stream ..." ones."""
    message = str(getattr(exc, "message", "") or "")
    return exc.code == mcp_types.CONNECTION_CLOSED and (
        message == "Connection closed" or message.startswith("SSE stream ")
    )


def _request_id(request: Any) -> Any:
    """The JSON-RPC id of an HTTP request's body, or None (a notification, not JSON)."""
    try:
        body = json.loads(request.content)
    except Exception:  # noqa: BLE001 - a streamed or odd body: no id to note
        return None
    return body.get("id") if isinstance(body, dict) else None


def _is_event_stream(response: Any) -> bool:
    return str(response.headers.get("content-type", "")).lower().startswith("text/event-stream")


@functools.cache
def _capped_stream_type() -> Any:
    """The class of a response body that fails once more than ``limit`` bytes arrived
    (``httpx2.StreamError``, which the SDK turns into a JSON-RPC error of the request the body
    answers); made on first use, since httpx2 is imported only for HTTP servers."""
    import httpx2

    class CappedStream(httpx2.AsyncByteStream):
        def __init__(self, inner: Any, limit: int) -> None:
            self._inner = inner
            self._limit = limit

        async def __aiter__(self) -> AsyncIterator[bytes]:
            size = 0
            async for chunk in self._inner:
                size += len(chunk)
                if size > self._limit:
                    mib = self._limit // (1024 * 1024)
                    raise httpx2.StreamError(f"the server's answer is larger than {mib} MiB; the rest was not read")
                yield chunk

        async def aclose(self) -> None:
            await self._inner.aclose()

    return CappedStream


def _is_transport_error(exc: BaseException) -> bool:
    name = type(exc).__module__
    return name.startswith(("httpx", "httpcore", "anyio"))

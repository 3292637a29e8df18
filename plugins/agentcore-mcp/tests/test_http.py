"""MCPServer.http against the test server over Streamable HTTP and over the old HTTP+SSE."""

from __future__ import annotations

import logging
import threading

import pytest
from agentcore_mcp import MCPAbortedError, MCPConnectionError, MCPServer, MCPServerError, MCPToolError
from conftest import abort_when_marked, eventually, free_port

from agentcore.signals import AbortController
from agentcore.types import TextContent


def test_streamable_http_lists_and_calls(http_server):
    with MCPServer.http(http_server.url, name="web") as server:
        assert server.transport == "streamable-http"
        assert "add" in {t.name for t in server.tools()}
        assert server.call_tool("add", {"a": 1, "b": 2}).content == [TextContent("3")]
        with pytest.raises(MCPToolError, match="cannot do it"):
            server.call_tool("fail", {"reason": "x"})


def test_a_closed_streamable_http_session_leaves_no_socket_to_the_garbage_collector(http_server):
    """The SDK closes an HTTP client only when it made it; ours was given, so every session's
    connection was left open until the garbage collector found it ("ResourceWarning: unclosed
    transport", an error under ``-W error`` and a socket per session in a long-lived process)."""
    import gc
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        for _ in range(2):
            with MCPServer.http(http_server.url, name="web") as server:
                assert server.call_tool("add", {"a": 1, "b": 2}).content == [TextContent("3")]
        gc.collect()
    leaked = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert leaked == []


def test_streamable_http_progress_and_abort(http_server, marker_dir):
    updates = []
    controller = AbortController()
    with MCPServer.http(http_server.url, name="web") as server:
        server.call_tool("progress", {"steps": 2}, on_update=updates.append)
        assert [u.details["progress"] for u in updates] == [1.0, 2.0]

        abort_when_marked(controller, marker_dir / "started-h")
        with pytest.raises(MCPAbortedError):
            server.call_tool("hang", {"tag": "h"}, signal=controller.signal)
        assert eventually(lambda: (marker_dir / "cancelled-h").exists()), "the server never saw the cancellation"


def test_list_changed_over_http(http_server):
    changed = threading.Event()
    with MCPServer.http(http_server.url, name="web") as server:
        server.tools()
        server.on_tools_changed(lambda tools: changed.set())
        server.call_tool("add_tool", {})
        assert changed.wait(10)
        assert "extra" in {t.name for t in server.tools()}


def test_a_server_restarted_under_a_2025_era_session_is_reconnected(http_server):
    """A restarted server answers the old session id with HTTP 404, which the SDK reports as an
    ordinary JSON-RPC error: the call says the session is gone, and the next one reconnects
    (before, every later call failed with "Session not found")."""
    server = MCPServer.http(http_server.url, name="web")
    server._spec.mode = "legacy"  # a session id: 2026-07-28 sessions are stateless
    with server:
        assert server.call_tool("echo", {"text": "one"}).content == [TextContent("one")]
        http_server.restart()
        with pytest.raises(MCPServerError, match="'web' no longer knows this session \\(HTTP 404"):
            server.call_tool("echo", {"text": "two"})
        assert server.call_tool("echo", {"text": "three"}).content == [TextContent("three")]
        assert server.restarts == 1


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
def test_a_call_longer_than_the_sdks_stream_read_timeout_gets_its_result(transport, request, monkeypatch):
    """The SDK's HTTP streams time out after 300 s without an event: a tool that worked longer,
    within its own ``timeout``, failed as "closed the connection" and the session restarted.
    Here that SDK default is 1 s, the tool works 3 s."""
    import mcp.client.sse
    import mcp.shared._httpx_utils

    monkeypatch.setattr(mcp.shared._httpx_utils, "MCP_DEFAULT_SSE_READ_TIMEOUT", 1.0)
    sse_client = mcp.client.sse.sse_client

    def short_sse_client(url, headers=None, timeout=5.0, sse_read_timeout=1.0, **kwargs):
        return sse_client(url, headers, timeout, sse_read_timeout, **kwargs)

    monkeypatch.setattr(mcp.client.sse, "sse_client", short_sse_client)
    url = request.getfixturevalue("http_server" if transport == "streamable-http" else "sse_server").url
    with MCPServer.http(url, name="web", transport=transport, timeout=30) as server:
        assert server.call_tool("slow", {"seconds": 3}).content == [TextContent("slept")]
        assert server.restarts == 0


def test_falls_back_to_http_sse_for_an_old_server(sse_server):
    with MCPServer.http(sse_server.url, name="old") as server:
        assert server.transport == "sse"
        assert server.call_tool("echo", {"text": "over sse"}).content == [TextContent("over sse")]


def test_forced_sse_transport(sse_server):
    with MCPServer.http(sse_server.url, transport="sse") as server:
        assert server.transport == "sse"
        assert server.call_tool("add", {"a": 2, "b": 2}).content == [TextContent("4")]


def test_nothing_listening_is_a_connection_error_naming_the_url_without_secrets(caplog):
    caplog.set_level(logging.DEBUG)
    port = free_port()
    server = MCPServer.http(
        f"http://user:pa55word@127.0.0.1:{port}/mcp?token=qs-secret-123",
        headers={"Authorization": "Bearer hdr-secret-456"},
        name="down",
        connect_timeout=20,
    )
    text = repr(server)
    with pytest.raises(MCPConnectionError) as info:
        server.connect()
    server.close()
    message = str(info.value)
    assert f"127.0.0.1:{port}/mcp" in message and "MCP server 'down'" in message
    for secret in ("pa55word", "qs-secret-123", "hdr-secret-456"):
        assert secret not in message and secret not in text
    assert "hdr-secret-456" not in caplog.text and "pa55word" not in caplog.text
    assert "Authorization" in text


def test_percent_encoded_secrets_in_the_url_never_reach_the_logs(http_server, caplog):
    """httpx and the SDK log the URL as written: a query value and a password percent-encoded
    there must be masked in that form too, not only decoded."""
    from urllib.parse import quote

    caplog.set_level(logging.DEBUG)
    query_secret, password = "s3cr3t/key+val==", "pa@ss:w0rd"
    base = http_server.url.replace("http://", f"http://user:{quote(password, safe='')}@")
    url = f"{base}?api_key={quote(query_secret, safe='')}"
    with MCPServer.http(url, name="q") as server:
        assert server.call_tool("echo", {"text": "ok"}).content == [TextContent("ok")]
    assert caplog.text  # httpx's request records were emitted
    for form in (query_secret, quote(query_secret, safe=""), password, quote(password, safe="")):
        assert form not in caplog.text


def test_headers_are_sent(http_server):
    # the test server ignores auth; a header that httpx refuses would fail the handshake
    with MCPServer.http(http_server.url, headers={"Authorization": "Bearer abc123456"}) as server:
        assert server.call_tool("echo", {"text": "ok"}).content == [TextContent("ok")]


def test_bad_url_and_transport_are_refused():
    with pytest.raises(ValueError, match="http:// or https://"):
        MCPServer.http("ftp://example")
    with pytest.raises(ValueError, match="transport"):
        MCPServer.http("http://127.0.0.1/mcp", transport="websocket")


def test_header_values_are_stripped_and_a_line_break_is_refused_unseen(http_server, caplog):
    # a token read from a file keeps its newline; httpx refused the header and quoted its value
    # (in its own debug log too, which no redaction of ours reaches)
    caplog.set_level(logging.DEBUG)
    with MCPServer.http(http_server.url, headers={"Authorization": "Bearer hdr-secret-456\n"}) as server:
        assert server.call_tool("echo", {"text": "ok"}).content == [TextContent("ok")]
    assert "hdr-secret-456" not in caplog.text
    for value in ("Bearer hdr-secret-456\nX-Other: 1", "hdr-secret-456\x00"):
        with pytest.raises(ValueError, match="header 'Authorization' has a line break or another control") as info:
            MCPServer.http(http_server.url, headers={"Authorization": value})
        assert "hdr-secret-456" not in str(info.value)


def test_secrets_are_masked_however_an_error_quotes_them():
    from agentcore_mcp._secrets import Secrets

    secrets = Secrets.of(env={"API_TOKEN": "env-secret-789\n"}, headers={"X-Key": "hdr-secret-456"})
    text = "refused b'env-secret-789\\n' and \"hdr-secret-456\" and env-secret-789"
    assert secrets.redact(text) == "refused b'***' and \"***\" and ***"


@pytest.mark.parametrize("url", ["http://user:s3c/ret-9876@127.0.0.1:9/mcp", "http://[::1/mcp", "http://h:99999/mcp"])
def test_a_url_whose_host_or_port_cannot_be_read_fails_at_once_and_unseen(url):
    """Showing such a URL raised (urlsplit's ValueError quoting the password's start as the port):
    the repr failed, and the start's failure was lost, so ``connect`` waited its whole timeout
    and then raised that bare ValueError."""
    server = MCPServer.http(url, name="odd", connect_timeout=5)
    try:
        assert repr(server) == "MCPServer.http('http://<a URL whose host or port cannot be read>')[name='odd', idle]"
        with pytest.raises(MCPConnectionError, match=r"^MCP server 'odd' \(http://<a URL whose host or port") as info:
            server.connect()
        assert "s3c" not in str(info.value) and "s3c" not in repr(server)
    finally:
        server.close()


class _Gateway:
    """A Streamable HTTP endpoint on 127.0.0.1 that answers JSON: the handshake and tools/list as
    a server would, ``tools/call`` (and, with ``refuse_all``, every request) with HTTP ``status``
    and a body that is no JSON-RPC error, as a proxy, a rate limiter or an auth layer does. With
    ``status`` 200, ``tools/call`` gets a text result of ``size`` characters, as one SSE event
    when ``sse``."""

    def __init__(self, status: int, refuse_all: bool = False, size: int = 0, sse: bool = False) -> None:
        import http.server
        import json

        gateway = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                message = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
                if "id" not in message:  # a notification
                    return self._send(202, b"")
                if status == 200 and message["method"] == "tools/call":
                    result = {"content": [{"type": "text", "text": "y" * size}]}
                    body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
                    if sse:
                        return self._send(200, b"event: message\ndata: " + body + b"\n\n", "text/event-stream")
                    return self._send(200, body)
                if refuse_all or message["method"] == "tools/call":
                    return self._send(status, b'{"error": "rate limited or expired"}')
                result = {
                    "initialize": {
                        "protocolVersion": message.get("params", {}).get("protocolVersion"),
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "gateway", "version": "1"},
                    },
                    "tools/list": {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]},
                }.get(message["method"])
                if result is None:
                    answer = {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "no"}}
                else:
                    answer = {"jsonrpc": "2.0", "id": message["id"], "result": result}
                self._send(200, json.dumps(answer).encode())

            def do_GET(self) -> None:  # noqa: N802 - no SSE stream offered
                self._send(405, b"")

            def do_DELETE(self) -> None:  # noqa: N802
                self._send(200, b"")

            def _send(self, code: int, body: bytes, kind: str = "application/json") -> None:
                self.send_response(code)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                gateway.seen.append(code)

            def log_message(self, *args: object) -> None:
                pass

        self.seen: list = []
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/mcp"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.parametrize(
    "status, phrase", [(401, "Unauthorized"), (429, "Too Many Requests"), (503, "Service Unavailable")]
)
def test_an_http_refusal_names_its_status(status, phrase):
    """The SDK reports a refused Streamable HTTP request (no JSON-RPC error in the body) only as
    "Server returned an error response": an expired token, a rate limit and a proxy's 503 must
    say which, at the handshake and for a call."""
    refusing = _Gateway(status, refuse_all=True)
    try:
        server = MCPServer.http(
            refusing.url, {"Authorization": "Bearer sk-gateway-123456"}, transport="streamable-http"
        )
        with pytest.raises(MCPConnectionError) as info:
            server.connect()
        server.close()
    finally:
        refusing.stop()
    assert f"(HTTP {status} {phrase})" in str(info.value) and "sk-gateway-123456" not in str(info.value)
    gateway = _Gateway(status)
    try:
        with MCPServer.http(gateway.url, name="gw", transport="streamable-http") as server:
            with pytest.raises(MCPToolError, match=rf"MCP server 'gw': tool 't' failed: .*\(HTTP {status} {phrase}\)"):
                server.call_tool("t", {})
    finally:
        gateway.stop()


def test_a_result_of_megabytes_in_one_sse_event_arrives_whole():
    """The SDK reads at most 1 MiB of one SSE event by default: a 2 MB result (a file read
    whole) that a stdio server delivers failed over Streamable HTTP as "closed the connection",
    and the session was dropped. One event may be as long as a stdio server's message."""
    gateway = _Gateway(200, size=2_000_000, sse=True)
    try:
        with MCPServer.http(gateway.url, name="gw", transport="streamable-http", max_output_chars=None) as server:
            result = server.call_tool("t", {})
            assert server.call_tool("t", {}).content == result.content and server.restarts == 0
    finally:
        gateway.stop()
    assert result.content == [TextContent("y" * 2_000_000)]


def test_a_json_answer_larger_than_the_limit_is_refused_unread(monkeypatch):
    """A JSON answer was read whole however large (a server answering with a gigabyte took
    gigabytes of memory); past MAX_MESSAGE_BYTES, as for a stdio server's message, its request
    fails saying so and the session goes on."""
    from agentcore_mcp import _stdio

    monkeypatch.setattr(_stdio, "MAX_MESSAGE_BYTES", 1024 * 1024)
    gateway = _Gateway(200, size=3_000_000)
    try:
        with MCPServer.http(gateway.url, name="gw", transport="streamable-http") as server:
            with pytest.raises(MCPToolError, match=r"MCP server 'gw': tool 't' failed: .*larger than 1 MiB; the rest"):
                server.call_tool("t", {})
            assert [t.name for t in server.tools()] == ["t"] and server.restarts == 0
    finally:
        gateway.stop()

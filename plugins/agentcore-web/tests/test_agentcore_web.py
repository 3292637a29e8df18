"""Tests of the fetch_url tool against a local HTTP server on 127.0.0.1 (no other network)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Iterator, Optional, Tuple

import pytest
from agentcore_web import FetchError, create_fetch_url_tool, html_to_text

from agentcore.signals import AbortController

PAGE = b"""<!doctype html><html><head><title>Local  Page</title>
<style>body { color: red }</style><script>alert("no")</script></head>
<body><nav><a href="/home">Home</a></nav><h1>Welcome</h1>
<p>Some <b>bold</b> words and a <a href="docs/intro.html">relative link</a>.</p>
<ul><li>first</li><li>second</li></ul><pre>  keep   this
    indented</pre><noscript>enable js</noscript></body></html>"""


class _Handler(BaseHTTPRequestHandler):
    release = threading.Event()
    slow_started = threading.Event()
    headers_requested = threading.Event()
    headers_gate = threading.Event()

    def log_message(self, *args: Any) -> None:  # keep test output quiet
        pass

    def _send(self, status: int, ctype: str, body: bytes, length: bool = True) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        if length:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _stall(self, started: Optional[threading.Event]) -> None:
        """Promise 100000 bytes, send 10, set ``started`` (if any), then wait for ``release``."""
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", "100000")
        self.end_headers()
        self.wfile.write(b"z" * 10)
        self.wfile.flush()
        if started is not None:
            started.set()
        type(self).release.wait(10)

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        routes: Dict[str, Tuple[int, str, bytes]] = {
            "/page.html": (200, "text/html; charset=utf-8", PAGE),
            "/plain.txt": (200, "text/plain; charset=latin-1", "caf\xe9".encode("latin-1")),
            "/data.json": (200, "application/json", b'{"ok": true}'),
            "/missing": (404, "text/html", b"<h1>nope</h1>"),
            "/image.png": (200, "image/png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 64),
            "/big": (200, "text/plain", b"x" * 5000),
        }
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/page.html")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/big-unsized":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b"y" * 5000)
        elif self.path == "/late-headers":  # the client is aborted while it waits for headers
            type(self).headers_requested.set()
            type(self).headers_gate.wait(10)
            self._stall(started=None)
        elif self.path == "/slow":
            self._stall(started=type(self).slow_started)
        elif self.path in routes:
            self._send(*routes[self.path])
        else:
            self._send(404, "text/plain", b"unknown")


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    _Handler.release.set()
    server.shutdown()
    server.server_close()


def _run(tool: Any, url: str, signal: Any = None) -> Any:
    return tool.execute("call-1", {"url": url}, signal, None)


def test_html_page_becomes_readable_text(base_url: str) -> None:
    result = _run(create_fetch_url_tool(), base_url + "/page.html")
    text = result.content[0].text
    assert text.startswith(f"URL: {base_url}/page.html\nTitle: Local Page\n")
    assert "# Welcome" in text
    assert f"[relative link]({base_url}/docs/intro.html)" in text
    assert "- first\n- second" in text
    assert "  keep   this\n    indented" in text
    for hidden in ("alert", "color: red", "enable js"):
        assert hidden not in text
    assert result.details["status"] == 200 and result.details["title"] == "Local Page"


def test_plain_text_and_json_use_the_declared_charset(base_url: str) -> None:
    assert _run(create_fetch_url_tool(), base_url + "/plain.txt").content[0].text.endswith("café")
    assert '{"ok": true}' in _run(create_fetch_url_tool(), base_url + "/data.json").content[0].text


def test_redirect_is_followed_and_reported(base_url: str) -> None:
    result = _run(create_fetch_url_tool(), base_url + "/redirect")
    assert result.details["final_url"] == base_url + "/page.html"


def test_non_2xx_is_an_error_naming_the_status(base_url: str) -> None:
    with pytest.raises(FetchError, match=r"^HTTP 404 Not Found for .*/missing$"):
        _run(create_fetch_url_tool(), base_url + "/missing")


def test_binary_content_is_refused(base_url: str) -> None:
    with pytest.raises(FetchError, match=r"binary content \(image/png\)"):
        _run(create_fetch_url_tool(), base_url + "/image.png")


@pytest.mark.parametrize("path", ["/big", "/big-unsized"])
def test_oversize_bodies_are_refused(base_url: str, path: str) -> None:
    with pytest.raises(FetchError, match="exceeds the limit of 1000 bytes"):
        _run(create_fetch_url_tool(max_bytes=1000), base_url + path)


def test_long_text_is_truncated_with_a_note(base_url: str) -> None:
    result = _run(create_fetch_url_tool(max_chars=100), base_url + "/big")
    assert result.details["truncated"] is True
    assert result.content[0].text.endswith("[Truncated: showing 100 of 5000 characters]")


def test_only_http_urls_are_accepted() -> None:
    with pytest.raises(FetchError, match="only absolute http:// and https:// URLs"):
        _run(create_fetch_url_tool(), "file:///etc/passwd")


def _fetch_in_thread(url: str, controller: AbortController) -> Tuple[threading.Thread, Dict[str, Any]]:
    """Fetch ``url`` on a started thread; its ``result`` or ``error`` lands in the returned dict."""
    outcome: Dict[str, Any] = {}

    def worker() -> None:
        try:
            outcome["result"] = _run(create_fetch_url_tool(timeout=30), url, controller.signal)
        except Exception as exc:  # the outcome is checked on the test thread
            outcome["error"] = exc

    thread = threading.Thread(target=worker)
    thread.start()
    return thread, outcome


def test_abort_closes_the_response_of_a_stalled_download(base_url: str) -> None:
    controller = AbortController()
    thread, outcome = _fetch_in_thread(base_url + "/slow", controller)
    assert _Handler.slow_started.wait(10)
    controller.abort()
    thread.join(10)
    assert not thread.is_alive(), "the aborted download did not return"
    assert str(outcome.get("error")) == "Operation aborted"


def test_abort_while_waiting_for_headers_is_not_reported_as_a_short_page(base_url: str) -> None:
    controller = AbortController()
    thread, outcome = _fetch_in_thread(base_url + "/late-headers", controller)
    assert _Handler.headers_requested.wait(10)
    controller.abort()  # before the response exists: the listener closes it once registered
    _Handler.headers_gate.set()
    thread.join(10)
    assert not thread.is_alive()
    assert "result" not in outcome
    assert str(outcome.get("error")) == "Operation aborted"


def test_abort_interrupts_the_wait_for_headers_that_never_come(base_url: str) -> None:
    """Headers withheld until after the fetch must have returned: the abort alone ends the wait
    (a plain requests.get would hold the run for the whole 30 s timeout)."""
    controller = AbortController()
    _Handler.headers_gate.clear()
    _Handler.headers_requested.clear()
    thread, outcome = _fetch_in_thread(base_url + "/late-headers", controller)
    try:
        assert _Handler.headers_requested.wait(10)
        controller.abort()
        thread.join(5)  # the handler withholds the headers for 10 s
        assert not thread.is_alive(), "the abort did not interrupt the wait for headers"
    finally:
        _Handler.headers_gate.set()  # let the server's handler finish
    assert str(outcome.get("error")) == "Operation aborted"


def test_already_aborted_signal_fails_before_any_request() -> None:
    controller = AbortController()
    controller.abort()
    with pytest.raises(FetchError, match="Operation aborted"):
        _run(create_fetch_url_tool(), "http://127.0.0.1:9/never", controller.signal)


def test_html_to_text_resolves_links_and_drops_invisible_parts() -> None:
    title, text = html_to_text(
        '<title>T</title><p>a <a href="/x">b</a></p><script>s()</script>', "https://example.org/dir/"
    )
    assert title == "T"
    assert text == "a [b](https://example.org/x)"

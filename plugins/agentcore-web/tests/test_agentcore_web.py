"""Tests of the fetch_url tool against a local HTTP server on 127.0.0.1 (no other network)."""

from __future__ import annotations

import base64
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
from agentcore_web import FetchError, create_fetch_url_tool, fetch_text, html_to_text

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
    drip_stop = threading.Event()
    header_drip_stop = threading.Event()
    huge_chunk_done = threading.Event()
    huge_chunk_sent: Dict[str, Any] = {}
    redirect_body_done = threading.Event()
    redirect_body_sent: Dict[str, Any] = {}
    authorizations: List[Tuple[int, str, Optional[str]]] = []  # (server port, path, header)

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

    def _chunked_head(self, ctype: str = "text/plain") -> None:
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _drip_one_chunk(self) -> None:
        """One 100000-byte chunk, a byte every 50 ms until ``drip_stop`` (then the rest at once)."""
        self._chunked_head()
        self.wfile.write(b"%x\r\n" % 100000)
        sent = 0
        try:
            while sent < 100000 and not type(self).drip_stop.wait(0.05):
                self.wfile.write(b"d")
                self.wfile.flush()
                sent += 1
            self.wfile.write(b"d" * (100000 - sent) + b"\r\n0\r\n\r\n")
        except OSError:  # the client gave up
            pass

    def _drip_headers(self) -> None:
        """A header line a byte every 50 ms (each wait far below any read timeout) until
        ``header_drip_stop``, then the end of the headers."""
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Slow: ")
        try:
            while not type(self).header_drip_stop.wait(0.05):
                self.wfile.write(b"s")
                self.wfile.flush()
            self.wfile.write(b"\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        except OSError:  # the client gave up
            pass

    def _huge_chunk(self) -> None:
        """One 64 MB chunk; records whether all of it could be sent before the client hung up."""
        self._chunked_head()
        size, block = 64 * 2**20, b"h" * 2**16
        self.wfile.write(b"%x\r\n" % size)
        sent = 0
        try:
            while sent < size:
                self.wfile.write(block)
                sent += len(block)
            self.wfile.write(b"\r\n0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            pass
        type(self).huge_chunk_sent["all"] = sent >= size
        type(self).huge_chunk_done.set()

    def _huge_body_redirect(self) -> None:
        """A redirect to /plain.txt with a 64 MB body; records whether all of it could be sent."""
        size, block = 64 * 2**20, b"r" * 2**16
        self.send_response(302)
        self.send_header("Location", "/plain.txt")
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(size))
        self.end_headers()
        sent = 0
        try:
            while sent < size:
                self.wfile.write(block)
                sent += len(block)
            self.wfile.flush()
        except OSError:
            pass
        type(self).redirect_body_sent["all"] = sent >= size
        type(self).redirect_body_done.set()

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        routes: Dict[str, Tuple[int, str, bytes]] = {
            "/page.html": (200, "text/html; charset=utf-8", PAGE),
            "/plain.txt": (200, "text/plain; charset=latin-1", "caf\xe9".encode("latin-1")),
            "/data.json": (200, "application/json", b'{"ok": true}'),
            "/missing": (404, "text/html", b"<h1>nope</h1>"),
            "/image.png": (200, "image/png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 64),
            "/big": (200, "text/plain", b"x" * 5000),
            "/no-head-end.html": (200, "text/html", b"<html><head><title>T</title><body><p>Hello</p></body></html>"),
            "/codec-charset": (200, "text/plain; charset=base64", b"plain words"),
            "/pdf-as-text": (200, "text/plain", b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\x00\x01\x02stream"),
            "/utf16-text": (200, "text/plain", "\ufeffcaf\xe9 \u2013 ok".encode("utf-16-le")),
            "/set-cookie": (200, "text/plain", b"cookie set"),
            "/latin1-quotes": (200, "text/html; charset=ISO-8859-1", b"<p>\x93quoted\x94 \x96 caf\xe9 \x80 5</p>"),
            "/ascii-labelled": (200, "text/plain; charset=us-ascii", b"it\x92s"),
            "/moved.html": (
                200,
                "text/html",
                b'<html><head><meta http-equiv="Refresh" content="0; URL=\'new/home.html\'"></head><body></body></html>',
            ),
            "/echo-cookie": (200, "text/plain", b""),
            "/utf16-label": (200, "text/plain; charset=UTF16", "caf\xe9".encode("utf-16-le")),
            "/feed.xml": (
                200,
                "application/rss+xml",
                b'<?xml version="1.0" encoding="ISO-8859-1"?>\n<rss><title>caf\xe9 \x93news\x94</title></rss>',
            ),
            "/odd-markup.html": (200, "text/html", b"<p>Index x<![0]> of the list</p><p>Read <![ endif ]>on</p>"),
            "/long-title.html": (200, "text/html", b"<title>" + b"T" * 100_000 + b"</title><p>short body</p>"),
            "/undefined-charset": (200, "text/plain; charset=undefined", "caf\xe9".encode()),
            "/idna-meta": (200, "text/html; charset=undefined", b'<meta charset="idna"><p>caf\xc3\xa9 \xff</p>'),
        }
        if self.path in ("/set-cookie", "/login"):
            self.send_response(200 if self.path == "/set-cookie" else 302)
            self.send_header("Set-Cookie", "sid=run-a-session; Path=/")
            if self.path == "/login":
                self.send_header("Location", "/echo-cookie")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path == "/unknown-coding":  # LZW ("compress"), which no client decodes
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Encoding", "compress")
            self.end_headers()
            self.wfile.write(b"\x1f\x9d\x90<\xde\xa8\xc1\x83\x07\x13*\\\xc8\xb0\xa1")
            self.close_connection = True
            return
        if self.path == "/charset-as-coding":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Encoding", "UTF-8")
            self.send_header("Content-Length", "5")
            self.end_headers()
            self.wfile.write(b"plain")
            return
        if self.path == "/echo-cookie":
            self._send(200, "text/plain", ("cookie: " + (self.headers.get("Cookie") or "none")).encode())
            return
        type(self).authorizations.append((self.server.server_address[1], self.path, self.headers.get("Authorization")))
        if self.path.startswith("http://example.invalid/"):  # a request to this server as a proxy
            self.path = self.path[len("http://example.invalid") :]
        if self.path.startswith("/to/"):  # /to/<location>: a redirect there
            self.send_response(302)
            self.send_header("Location", self.path[len("/to/") :])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path == "/loop":
            self.send_response(301)
            self.send_header("Location", "/loop")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path == "/redirect-with-huge-body":
            self._huge_body_redirect()
            return
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
        elif self.path == "/drip-chunk":
            self._drip_one_chunk()
        elif self.path == "/drip-headers":
            self._drip_headers()
        elif self.path == "/huge-chunk":
            self._huge_chunk()
        elif self.path == "/slow":
            self._stall(started=type(self).slow_started)
        elif self.path in routes:
            self._send(*routes[self.path])
        else:
            self._send(404, "text/plain", b"unknown")


def _serve() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    _Handler.release.set()
    _Handler.drip_stop.set()
    _Handler.header_drip_stop.set()
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    yield from _serve()


@pytest.fixture(scope="module")
def other_url() -> Iterator[str]:
    """A second server (another port: another origin) with the same routes."""
    yield from _serve()


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


def test_head_without_its_end_tag_does_not_swallow_the_page(base_url: str) -> None:
    """``</head>`` is optional in HTML: the body starts at ``<body>`` (or any body element, or
    text) all the same, instead of the whole page being dropped with the head."""
    result = _run(create_fetch_url_tool(), base_url + "/no-head-end.html")
    assert result.content[0].text.endswith("Title: T\n\nHello")
    assert html_to_text("<head><title>T</title><p>one</p>")[1] == "one"
    assert html_to_text("<html><head><meta charset=utf-8>\nloose text")[1] == "loose text"


def test_title_is_the_documents_not_an_svg_icons() -> None:
    title, text = html_to_text(
        "<head><title>Docs</title></head><body><svg><title>Close</title><path/></svg><p>x</p><title>late</title></body>"
    )
    assert (title, text) == ("Docs", "x")


def test_links_resolve_against_the_base_element() -> None:
    page = '<head><base href="/v2/guide/"><title>T</title></head><a href="intro.html">Intro</a>'
    assert html_to_text(page, "https://example.org/start")[1] == "[Intro](https://example.org/v2/guide/intro.html)"


def _fetch_failure(url: str, stop: threading.Event, what: str) -> BaseException:
    """The error of a ``timeout=0.5`` fetch of ``url`` (a server dripping until ``stop``), which
    must end within 10 s: ``what`` ran past its deadline otherwise."""
    outcome: Dict[str, Any] = {}

    def worker() -> None:
        try:
            _run(create_fetch_url_tool(timeout=0.5), url)
        except Exception as exc:  # checked on the test thread
            outcome["error"] = exc

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        thread.join(10)
        assert not thread.is_alive(), f"{what} ran past its deadline"
    finally:
        stop.set()
        thread.join(10)
    return outcome["error"]


def test_a_trickle_inside_one_chunk_ends_at_the_deadline(base_url: str) -> None:
    """A chunked body read a whole HTTP chunk at a time never came back to check the deadline:
    a server sending one byte per 50 ms of a 100000-byte chunk held the tool for 83 minutes."""
    error = _fetch_failure(base_url + "/drip-chunk", _Handler.drip_stop, "the download")
    assert str(error).endswith("/drip-chunk timed out while reading the body")


def test_headers_trickling_in_end_at_the_deadline(base_url: str) -> None:
    """Each byte of the headers arrives well within the read timeout, so only a deadline for the
    whole wait ends it (a header line may be 64 KB: at a byte per 50 ms, almost an hour)."""
    error = _fetch_failure(base_url + "/drip-headers", _Handler.header_drip_stop, "the wait for headers")
    assert str(error).endswith("/drip-headers timed out after 0.5 s")


def test_max_bytes_stops_reading_inside_one_huge_chunk(base_url: str) -> None:
    """The limit is checked every 16 KB, not after a whole HTTP chunk (a 64 MB one was read, or
    a gzip-compressed one inflated, into memory first)."""
    with pytest.raises(FetchError, match="exceeds the limit of 1000 bytes"):
        _run(create_fetch_url_tool(max_bytes=1000), base_url + "/huge-chunk")
    assert _Handler.huge_chunk_done.wait(10)
    assert _Handler.huge_chunk_sent == {"all": False}, "the client read the whole chunk"


def test_url_credentials_are_never_shown(base_url: str) -> None:
    secret_base = base_url.replace("http://", "http://agent:s3cret-pw@")
    tool = create_fetch_url_tool()
    result = _run(tool, secret_base + "/redirect")  # a relative redirect keeps the credentials
    shown = result.content[0].text + repr(result.details)
    assert "s3cret-pw" not in shown and "agent" not in shown
    assert result.details["final_url"] == base_url.replace("http://", "http://***@") + "/page.html"
    assert f"[relative link]({base_url}/docs/intro.html)" in result.content[0].text
    for url, error in [
        (secret_base + "/missing", "HTTP 404 Not Found for http://***@127.0.0.1"),
        ("http://agent:s3cret-pw@127.0.0.1:99999/", "InvalidURL"),
        ("http://agent:s3cret/pw@127.0.0.1:9/x", "cannot fetch"),
        ("http://agent:s3cret-pw@[::1/", "Invalid IPv6 URL"),
    ]:
        with pytest.raises(FetchError, match=re.escape(error)) as caught:
            _run(tool, url)
        assert "s3cret" not in str(caught.value), str(caught.value)


def test_a_charset_naming_a_non_text_codec_reads_as_utf8(base_url: str) -> None:
    # "base64" is a codec, but not one bytes.decode accepts: the page was unreadable
    assert _run(create_fetch_url_tool(), base_url + "/codec-charset").content[0].text.endswith("\n\nplain words")


def test_binary_served_as_text_is_refused(base_url: str) -> None:
    with pytest.raises(FetchError, match=r"/pdf-as-text returned binary content \(declared as text/plain\)"):
        _run(create_fetch_url_tool(), base_url + "/pdf-as-text")


def test_a_byte_order_mark_names_the_encoding(base_url: str) -> None:
    text = _run(create_fetch_url_tool(), base_url + "/utf16-text").content[0].text
    assert text.endswith("\n\ncaf\xe9 \u2013 ok")


def test_cookies_last_one_fetch_only(base_url: str) -> None:
    """A cookie one run's fetch received is not sent by the next fetch (another run's, possibly
    another user's: the tool's session is shared by the process); within one fetch's redirects
    it is."""
    tool = create_fetch_url_tool()
    assert _run(tool, base_url + "/login").content[0].text.endswith("cookie: sid=run-a-session")
    _run(tool, base_url + "/set-cookie")
    assert _run(create_fetch_url_tool(), base_url + "/echo-cookie").content[0].text.endswith("cookie: none")


def test_malformed_url_arguments_are_named() -> None:
    with pytest.raises(FetchError, match="url must be a string .* not int"):
        fetch_text(5)  # type: ignore[arg-type]
    with pytest.raises(FetchError, match=r"cannot fetch 'http://\[::1/': Invalid IPv6 URL"):
        fetch_text("http://[::1/")


def test_netrc_credentials_are_never_sent(
    base_url: str, other_url: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """requests sends the ~/.netrc entry of the host ($NETRC names the file) and re-applies it
    for the host of every redirect: a page the model fetched (or a redirect a page injected)
    read the user's stored credentials back into the transcript. Only the URL's own user info
    is sent, and only to its own host."""
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login stored-user password netrc-secret\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    _Handler.authorizations.clear()
    port, other_port = int(base_url.rsplit(":", 1)[1]), int(other_url.rsplit(":", 1)[1])
    tool = create_fetch_url_tool()
    _run(tool, base_url + "/plain.txt")
    _run(tool, base_url + "/to/" + other_url + "/plain.txt")  # to another origin
    _run(tool, base_url.replace("http://", "http://agent:s3cret-pw@") + "/to/" + other_url + "/plain.txt")
    _run(tool, base_url.replace("http://", "http://agent:s3cret-pw@") + "/to//plain.txt")  # the same host
    given = "Basic " + base64.b64encode(b"agent:s3cret-pw").decode()
    assert _Handler.authorizations == [
        (port, "/plain.txt", None),
        (port, f"/to/{other_url}/plain.txt", None),
        (other_port, "/plain.txt", None),
        (port, f"/to/{other_url}/plain.txt", given),
        (other_port, "/plain.txt", None),
        (port, "/to//plain.txt", given),
        (port, "/plain.txt", given),
    ]


def test_a_redirects_body_is_not_read(base_url: str) -> None:
    """requests read the whole body of every redirect into memory, whatever ``max_bytes`` said
    (a 302 with an endless body held the tool until the deadline and filled the memory)."""
    result = _run(create_fetch_url_tool(max_bytes=1000), base_url + "/redirect-with-huge-body")
    assert result.content[0].text.endswith("caf\xe9")
    assert _Handler.redirect_body_done.wait(10)
    assert _Handler.redirect_body_sent == {"all": False}, "the client read the whole redirect body"


def test_redirect_loops_and_other_schemes_are_named(base_url: str) -> None:
    with pytest.raises(FetchError, match=r"/loop redirected more than 20 times .*: a redirect loop"):
        _run(create_fetch_url_tool(), base_url + "/loop")
    secret_base = base_url.replace("http://", "http://agent:s3cret-pw@")
    with pytest.raises(FetchError) as caught:
        _run(create_fetch_url_tool(), secret_base + "/to/file:///etc/passwd")
    assert str(caught.value) == (
        f"{base_url.replace('http://', 'http://***@')}/to/file:///etc/passwd redirected to file:///etc/passwd: "
        "fetch_url follows only http:// and https:// URLs"
    )


def test_proxies_from_the_environment_are_used_for_every_redirect(
    base_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The local server acts as the proxy of example.invalid: it receives each hop's URL."""
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", base_url)
    monkeypatch.setenv("http_proxy", base_url)
    _Handler.authorizations.clear()
    port = int(base_url.rsplit(":", 1)[1])
    result = _run(create_fetch_url_tool(), "http://example.invalid/to/http://example.invalid/plain.txt")
    assert result.details["final_url"] == "http://example.invalid/plain.txt"
    assert _Handler.authorizations == [
        (port, "http://example.invalid/to/http://example.invalid/plain.txt", None),
        (port, "http://example.invalid/plain.txt", None),
    ]


def test_latin1_and_ascii_labels_read_as_windows_1252(base_url: str) -> None:
    """Browsers read an ISO-8859-1 or US-ASCII label as windows-1252 (the Encoding Standard):
    such pages hold its curly quotes, dashes and euro sign, which ISO-8859-1 turned into
    invisible C1 control characters and ASCII into replacement characters."""
    text = _run(create_fetch_url_tool(), base_url + "/latin1-quotes").content[0].text
    assert text.endswith("\n\n\u201cquoted\u201d \u2013 caf\xe9 \u20ac 5")
    assert _run(create_fetch_url_tool(), base_url + "/ascii-labelled").content[0].text.endswith("\n\nit\u2019s")


def test_a_meta_refresh_names_where_the_page_went(base_url: str) -> None:
    """A page that only redirects with <meta http-equiv="refresh"> came back empty: the model
    could not tell where the content moved."""
    text = _run(create_fetch_url_tool(), base_url + "/moved.html").content[0].text
    assert text == f"URL: {base_url}/moved.html\n\n[Redirects to {base_url}/new/home.html]"
    assert html_to_text('<meta http-equiv="refresh" content="30">reloads')[1] == "reloads"


def test_abort_and_deadline_end_a_slow_name_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    """Resolving the host name ignored the abort and the deadline: the fetch waited for the
    resolver (seconds per name server and attempt). The resolver is replaced by one that waits
    for the test, the only way to hold a lookup without a DNS server."""
    import socket

    entered, release = threading.Event(), threading.Event()
    real = socket.getaddrinfo

    def slow_getaddrinfo(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        release.wait(10)
        return real(*args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", slow_getaddrinfo)
    try:
        controller = AbortController()
        thread, outcome = _fetch_in_thread("http://slow-dns.invalid/", controller)
        assert entered.wait(10)
        controller.abort()
        thread.join(5)
        assert not thread.is_alive(), "the abort did not end the wait for the resolver"
        assert str(outcome.get("error")) == "Operation aborted"
        with pytest.raises(FetchError, match=r"^http://slow-dns.invalid/ timed out after 0.2 s$"):
            _run(create_fetch_url_tool(timeout=0.2), "http://slow-dns.invalid/")
    finally:
        release.set()


def test_a_bogus_marked_section_does_not_lose_the_page(base_url: str) -> None:
    """``<![`` not followed by a marked-section keyword (``<![0]>``, ``<![ endif ]>``) made
    html.parser raise AssertionError: the tool failed with "cannot read" for a page it had read,
    and html_to_text raised. Browsers skip it as a bogus comment."""
    text = _run(create_fetch_url_tool(), base_url + "/odd-markup.html").content[0].text
    assert text.endswith("\n\nIndex x of the list\n\nRead on")
    assert html_to_text("<p>a<![;b]>c</p><![unknown x]><p>d</p>")[1] == "ac\n\nd"


def test_a_feeds_xml_declaration_names_its_encoding(base_url: str) -> None:
    """An RSS feed served without a charset but declaring ``encoding="ISO-8859-1"`` in its XML
    declaration (RFC 7303: the declaration counts when the header names none) was read as
    UTF-8: every accented letter and curly quote became U+FFFD."""
    text = _run(create_fetch_url_tool(), base_url + "/feed.xml").content[0].text
    assert text.endswith("<rss><title>caf\xe9 \u201cnews\u201d</title></rss>")


def test_an_unfinished_tail_is_read_in_linear_time() -> None:
    """html.parser's close() scanned to the end of the document again for every "<" of an
    unfinished tail: 100 KB of "<a<a<a" took 16 s (2 MB, the default limit, hours), and
    nothing interrupts it, not the run's abort nor the deadline. Browsers drop a tag, comment
    or declaration the document never ends; so does html_to_text, at once."""
    import time

    for tail in ("<a" * 50_000, "</" * 50_000, "<!--" + "<b" * 50_000):
        started = time.monotonic()
        assert html_to_text("<p>kept</p>" + tail) == (None, "kept")
        assert time.monotonic() - started < 2, tail[:4]
    assert html_to_text('x <a b="y <p>hello</p> more')[1] == 'x <a b="y\n\nhello\n\nmore'


def test_a_utf16_label_without_a_hyphen_is_text(base_url: str) -> None:
    """``charset=UTF16`` names UTF-16 as well as ``utf-16`` does, but only the hyphenated
    spelling was exempt from the NUL-byte test: the text was refused as binary content."""
    assert _run(create_fetch_url_tool(), base_url + "/utf16-label").content[0].text.endswith("\n\ncaf\xe9")


def test_a_link_inside_a_link_ends_it_in_linear_time() -> None:
    """Links do not nest: browsers end an open ``<a>`` at the next one. html_to_text nested them,
    copying the whole inner text again at every ``</a>``: a 2 MB page of ``<a href=x>y`` then
    as many ``</a>`` took 23 s, ignoring the run's abort and the deadline, for a page of
    ``[[[[...`` no reader could follow."""
    import time

    assert html_to_text('<a href="/1">one<a href="/2">two</a></a>', "http://h/")[1] == (
        "[one](http://h/1) [two](http://h/2)"
    )
    count = 40_000
    started = time.monotonic()
    text = html_to_text("<a href=x>y" * count + "</a>" * count, "http://h/")[1]
    assert time.monotonic() - started < 3
    assert text.startswith("[y](http://h/x) [y](http://h/x)") and text.count("[y](http://h/x)") == count


def test_a_charset_no_bytes_can_be_read_with_reads_as_utf8(base_url: str) -> None:
    """``charset=undefined`` (sent by misconfigured servers), ``idna`` and ``punycode`` are text
    codecs to Python, but they raise for bytes they cannot read even with ``errors="replace"``:
    the tool failed with "cannot read ...: UnicodeError" for a page browsers show."""
    tool = create_fetch_url_tool()
    assert _run(tool, base_url + "/undefined-charset").content[0].text.endswith("\n\ncaf\xe9")
    assert _run(tool, base_url + "/idna-meta").content[0].text.endswith("\n\ncaf\xe9 \ufffd")


def test_a_huge_title_does_not_escape_the_size_cap(base_url: str) -> None:
    """The title is shown above the text, outside ``max_chars``: a page whose ``<title>`` held
    100 KB (up to ``max_bytes``, 2 MB) put all of it in the result and its details."""
    result = _run(create_fetch_url_tool(max_chars=1000), base_url + "/long-title.html")
    assert len(result.content[0].text) < 1000
    assert result.details["title"] == "T" * 200 + "..."
    assert result.content[0].text.endswith("Title: " + "T" * 200 + "...\n\nshort body")


def test_a_body_in_a_content_encoding_not_decoded_is_refused(base_url: str) -> None:
    """urllib3 passes a body in a coding it does not decode (``compress``; ``br`` or ``zstd``
    without their packages) through as it came: the compressed bytes reached the model as the
    page's text."""
    with pytest.raises(FetchError, match=r"/unknown-coding is compressed with 'compress' \(Content-Encoding\)"):
        _run(create_fetch_url_tool(), base_url + "/unknown-coding")
    # a label that names no coding (a misconfigured server's charset) is ignored, as in browsers
    assert _run(create_fetch_url_tool(), base_url + "/charset-as-coding").content[0].text.endswith("\n\nplain")


def test_a_long_run_of_blanks_is_read_in_linear_time() -> None:
    """Trailing blanks were removed with ``re.sub(r"[ \\t]+\\n")``, which tries every position of a
    run of blanks that no line break ends: a ``<pre>`` of 200000 tabs took 104 s (2 MB, hours),
    and nothing interrupts it, not the run's abort nor the deadline."""
    import time

    started = time.monotonic()
    page = "<pre>a" + "\t" * 100_000 + "b\t \nc</pre><pre>d" + " <b>" * 50_000 + "</pre>"
    assert html_to_text(page) == (None, "a" + "\t" * 100_000 + "b\nc\n\nd")
    assert time.monotonic() - started < 3

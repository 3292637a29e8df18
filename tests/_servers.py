"""A scripted HTTP server on 127.0.0.1 for provider tests (no other network is ever used).

``ScriptedServer`` answers each request with the next queued :class:`Reply` (FIFO) and records
every request (method, path, query, headers, body). A reply can stream its body in small chunks
(chunked transfer encoding, so every chunk reaches the client as it is written), reset the TCP
connection after N body bytes, or stall before the headers / after N body bytes until the test
sets ``server.release`` (used by abort tests). ``replies_from_recording`` turns the interactions
of a ``shared/recordings`` file into replies.

    with ScriptedServer() as server:
        server.enqueue(Reply(body="data: {...}\\n\\n", chunk_size=7))
        model = Model(id="m", api="openai-completions", provider="local", base_url=server.url + "/v1")
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Union
from urllib.parse import urlsplit

SHARED = Path(__file__).resolve().parents[2] / "shared"
RECORDINGS = SHARED / "recordings"


@dataclass
class Reply:
    """One scripted response."""

    status: int = 200
    body: Union[bytes, str] = b""
    content_type: str = "text/event-stream"
    headers: Dict[str, str] = field(default_factory=dict)
    chunk_size: int = 0  # 0: the whole body in one write
    chunked: bool = True  # False: Content-Length framing
    reset_after: Optional[int] = None  # send this many body bytes, then reset the connection
    close_after: Optional[int] = None  # send this many body bytes, then close the connection cleanly
    stall_before_headers: bool = False  # wait for server.release before answering at all
    stall_after: Optional[int] = None  # send this many body bytes, then wait for server.release

    @property
    def data(self) -> bytes:
        return self.body.encode("utf-8") if isinstance(self.body, str) else bytes(self.body)


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: str
    headers: Dict[str, str]
    body: bytes
    client_port: int = 0  # the client's source port: equal ports mean a reused (pooled) connection

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))


def sse(*payloads: Any, done: bool = False) -> str:
    """An SSE body of ``data:`` events (dicts are JSON-encoded), optionally ending in [DONE]."""
    parts = [f"data: {p if isinstance(p, str) else json.dumps(p)}\n\n" for p in payloads]
    if done:
        parts.append("data: [DONE]\n\n")
    return "".join(parts)


def load_recording(api: str, name: str) -> Optional[Dict[str, Any]]:
    """A recording from ``shared/recordings/<api>/<name>.json``, or None when it is absent."""
    path = RECORDINGS / api / f"{name}.json"
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def replies_from_recording(recording: Dict[str, Any], chunk_size: int = 7) -> List[Reply]:
    """One reply per recorded interaction: status, content type and body, written in small chunks."""
    replies = []
    for interaction in recording["interactions"]:
        response = interaction["response"]
        replies.append(
            Reply(
                status=response["status"],
                body=response["body"],
                content_type=response.get("content_type") or "text/event-stream",
                chunk_size=chunk_size,
            )
        )
    return replies


class _BackloggedHTTPServer(ThreadingHTTPServer):
    # socketserver listens with a backlog of 5: 40 concurrent connects overflow it, the kernel drops
    # the extra SYNs and the clients retry after 1 s, 3 s, 7 s ... (a loaded machine then misses a
    # test's deadline). Concurrency tests open up to a few hundred connections at once.
    request_queue_size = 512


class ScriptedServer:
    """Threaded HTTP/1.1 server on 127.0.0.1 (port 0) answering with queued replies."""

    def __init__(self, replies: Iterable[Reply] = ()) -> None:
        self._replies: List[Reply] = list(replies)
        self._lock = threading.Lock()
        self.requests: List[RecordedRequest] = []
        self.release = threading.Event()  # lets stalled replies continue
        self.request_received = threading.Event()  # set whenever a request arrived
        self.headers_sent = threading.Event()  # set whenever a reply's headers were written
        self.body_started = threading.Event()  # set once a stalled reply wrote its first bytes
        self.stall_timeout = 30.0
        self._httpd = _BackloggedHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="scripted-server", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def enqueue(self, *replies: Reply) -> None:
        with self._lock:
            self._replies.extend(replies)

    def replay(self, recording: Dict[str, Any], chunk_size: int = 7) -> None:
        self.enqueue(*replies_from_recording(recording, chunk_size))

    def _next_reply(self) -> Reply:
        with self._lock:
            if self._replies:
                return self._replies.pop(0)
        return Reply(
            status=500,
            content_type="application/json",
            body=json.dumps({"error": {"message": "scripted server: no reply left"}}),
        )

    def close(self) -> None:
        self.release.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> ScriptedServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _make_handler(server: ScriptedServer) -> type:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

        def do_GET(self) -> None:
            self._handle()

        def do_POST(self) -> None:
            self._handle()

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            parts = urlsplit(self.path)
            server.requests.append(
                RecordedRequest(
                    self.command,
                    parts.path,
                    parts.query,
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                    self.client_address[1],
                )
            )
            server.request_received.set()
            reply = server._next_reply()
            if reply.stall_before_headers:
                server.release.wait(server.stall_timeout)
            data = reply.data
            try:
                self.send_response(reply.status)
                if reply.content_type:  # "": no Content-Type header at all
                    self.send_header("Content-Type", reply.content_type)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                if reply.chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                else:
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.flush()
                server.headers_sent.set()
                self._write_body(reply, data)
            except (BrokenPipeError, ConnectionResetError, OSError):
                self.close_connection = True

        def _write_body(self, reply: Reply, data: bytes) -> None:
            limit = len(data)
            if reply.reset_after is not None:
                limit = min(limit, reply.reset_after)
            if reply.close_after is not None:
                limit = min(limit, reply.close_after)
            if reply.stall_after is not None:
                limit = min(limit, reply.stall_after)
            step = reply.chunk_size or max(1, limit)
            for start in range(0, limit, step):
                self._write(reply, data[start : min(start + step, limit)])
            if reply.reset_after is not None:
                self.close_connection = True
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.connection.close()  # linger 0: the peer sees a reset
                return
            if reply.close_after is not None:
                self.close_connection = True  # the peer reads the bytes sent, then the end of the stream
                return
            if reply.stall_after is not None:
                server.body_started.set()
                server.release.wait(server.stall_timeout)
                step = reply.chunk_size or max(1, len(data) - limit)
                for start in range(limit, len(data), step):
                    self._write(reply, data[start : start + step])
            if reply.chunked:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        def _write(self, reply: Reply, piece: bytes) -> None:
            if not piece:
                return
            if reply.chunked:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            else:
                self.wfile.write(piece)
            self.wfile.flush()

        def handle(self) -> None:
            try:
                super().handle()
            except OSError:  # the client went away (abort tests, abandoned requests)
                pass

        def finish(self) -> None:
            try:
                super().finish()
            except OSError:
                pass

    return Handler


class _TLSHTTPServer(_BackloggedHTTPServer):
    """The scripted server's listener, every accepted connection wrapped in TLS (the handshake
    runs on the handler's thread, at its first read; a client refusing the certificate ends it
    there, as a reset client does)."""

    context: Any = None
    accepted = 0

    def get_request(self) -> Any:
        connection, address = super().get_request()
        self.accepted += 1
        return self.context.wrap_socket(connection, server_side=True, do_handshake_on_connect=False), address


def self_signed_certificate(directory: Path) -> tuple:
    """``(certificate, key)``: PEM files in ``directory`` of a self-signed certificate for
    127.0.0.1 and localhost, valid for a day; it is its own CA, so a client trusts it when told
    to (``REQUESTS_CA_BUNDLE``). Made with the ``openssl`` command (the OS package); the calling
    test is skipped without it."""
    import shutil
    import subprocess

    import pytest

    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command (the OS package) is not installed: no certificate to test TLS with")
    cert_path, key_path = Path(directory) / "server.pem", Path(directory) / "server.key"
    subprocess.run(
        [
            openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", str(key_path), "-out", str(cert_path), "-days", "1", "-subj", "/CN=agentcore test server",
            "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,digitalSignature",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert_path, key_path


class TLSScriptedServer(ScriptedServer):
    """A :class:`ScriptedServer` speaking HTTPS with a self-signed certificate (see
    :func:`self_signed_certificate`, written to ``directory``); ``certificate`` is its PEM file
    and ``accepted`` counts the TCP connections accepted (attempts, whether their TLS handshake
    succeeded or not)."""

    def __init__(self, directory: Path, replies: Iterable[Reply] = ()) -> None:
        import ssl

        super().__init__(replies)
        self._httpd.shutdown()  # the plain listener the base class started
        self._httpd.server_close()
        self.certificate, key = self_signed_certificate(directory)
        self._httpd = _TLSHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._httpd.daemon_threads = True
        self._httpd.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._httpd.context.load_cert_chain(str(self.certificate), str(key))
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="scripted-tls-server", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        return super().url.replace("http://", "https://", 1)

    @property
    def accepted(self) -> int:
        return int(self._httpd.accepted)


class RefusingProxy:
    """An HTTP proxy on 127.0.0.1 that answers every request, a ``CONNECT`` included, with
    ``status`` (default 407 Proxy Authentication Required) and closes; ``requests`` holds the
    request lines received (``"CONNECT host:port HTTP/1.0"``)."""

    def __init__(self, status: int = 407, reason: str = "Proxy Authentication Required") -> None:
        self.requests: List[str] = []
        self._answer = (
            f'HTTP/1.1 {status} {reason}\r\nProxy-Authenticate: Basic realm="proxy"\r\n'
            "Content-Length: 0\r\nConnection: close\r\n\r\n"
        ).encode("ascii")
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._serve, name="refusing-proxy", daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:  # closed
                return
            with connection:
                try:
                    head = b""
                    while b"\r\n\r\n" not in head:
                        data = connection.recv(65536)
                        if not data:
                            break
                        head += data
                    self.requests.append(head.split(b"\r\n", 1)[0].decode("latin-1"))
                    connection.sendall(self._answer)
                except OSError:
                    pass

    def close(self) -> None:
        self._listener.close()

    def __enter__(self) -> RefusingProxy:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

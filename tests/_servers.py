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

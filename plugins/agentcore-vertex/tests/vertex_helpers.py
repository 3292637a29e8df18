"""Test helpers: a local HTTP server answering at Vertex-shaped paths and google-auth credentials
that never touch the network (a uniquely named module, so plugin test suites can run together).

Recordings are read from ``../shared/recordings`` next to the repository (never copied here);
tests that need one skip when it is absent.
"""

from __future__ import annotations

import datetime
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, List, Optional
from urllib.parse import urlsplit

import google.auth.credentials
import google.auth.exceptions
import pytest

RECORDINGS = Path(__file__).resolve().parents[4] / "shared" / "recordings"
GOOGLE_ENV = (
    "GOOGLE_CLOUD_PROJECT",
    "GCLOUD_PROJECT",
    "GOOGLE_CLOUD_LOCATION",
    "GOOGLE_CLOUD_API_KEY",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GOOGLE_CLOUD_QUOTA_PROJECT",
    "GEMINI_API_KEY",
)  # cleared for every test


def load_recording(name: str) -> Dict[str, Any]:
    path = RECORDINGS / "google-generative-ai" / f"{name}.json"
    if not path.is_file():
        pytest.skip(f"recording google-generative-ai/{name} not available (needs {RECORDINGS})")
    return json.loads(path.read_text(encoding="utf-8"))


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


class FakeCredentials(google.auth.credentials.Credentials):
    """Credentials whose ``refresh`` hands out ``tokens`` in turn, each valid for ``lifetime``."""

    def __init__(
        self, *tokens: str, lifetime: datetime.timedelta = datetime.timedelta(hours=1), now: Any = utcnow
    ) -> None:
        super().__init__()
        self._tokens = list(tokens)
        self.lifetime = lifetime
        self._now = now
        self.refreshes = 0
        self.refresh_started = threading.Event()
        self.hold: Optional[threading.Event] = None  # set by a test to keep refresh() waiting

    def refresh(self, request: Any) -> None:
        self.refreshes += 1
        self.refresh_started.set()
        if self.hold is not None:
            self.hold.wait(30)
        if not self._tokens:
            raise google.auth.exceptions.RefreshError(f"no more tokens (old token {self.token})")
        self.token = self._tokens.pop(0)
        self.expiry = self._now() + self.lifetime


@dataclass
class Reply:
    status: int = 200
    body: str = ""
    content_type: str = "text/event-stream"
    chunk_size: int = 7
    stall_after: Optional[int] = None  # write this many bytes, then wait for server.release


@dataclass
class Request:
    path: str
    query: str
    headers: Dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))


@dataclass
class VertexServer:
    """Answers POSTs with queued replies in order (500 when none is left) and records them."""

    replies: List[Reply] = field(default_factory=list)
    requests: List[Request] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    stalled: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def replay(self, recording: Dict[str, Any], chunk_size: int = 7) -> None:
        for interaction in recording["interactions"]:
            response = interaction["response"]
            self.replies.append(
                Reply(
                    response["status"],
                    response["body"],
                    response.get("content_type") or "text/event-stream",
                    chunk_size,
                )
            )

    def close(self) -> None:
        self.release.set()
        self._httpd.shutdown()
        self._httpd.server_close()


def _handler(server: VertexServer) -> type:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            parts = urlsplit(self.path)
            server.requests.append(
                Request(parts.path, parts.query, {k.lower(): v for k, v in self.headers.items()}, body)
            )
            reply = (
                server.replies.pop(0)
                if server.replies
                else Reply(500, '{"error": {"message": "no reply"}}', "application/json")
            )
            data = reply.body.encode("utf-8")
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                limit = len(data) if reply.stall_after is None else reply.stall_after
                self._write(data[:limit], reply.chunk_size)
                if reply.stall_after is not None:
                    server.stalled.set()
                    server.release.wait(30)
                    self._write(data[limit:], reply.chunk_size)
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:  # the client went away (abort tests)
                self.close_connection = True

        def _write(self, data: bytes, size: int) -> None:
            for start in range(0, len(data), size or max(1, len(data))):
                piece = data[start : start + (size or len(data))]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()

    return Handler

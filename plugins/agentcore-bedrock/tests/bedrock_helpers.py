"""Test helpers: a scripted HTTP server on 127.0.0.1 (no other network), event-stream frame builders,
the recorded Bedrock streams from ``../shared/recordings`` (skipped cleanly when absent)."""

from __future__ import annotations

import base64
import calendar
import email.utils
import json
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import pytest
from agentcore_bedrock.eventstream import encode_message

from agentcore.types import Model

# tests/ -> agentcore-bedrock -> plugins -> repository root; shared/ sits beside the repository
SHARED = Path(__file__).resolve().parents[4] / "shared"
RECORDINGS = SHARED / "recordings" / "bedrock-converse-stream"

ACCESS_KEY = "AKIDEXAMPLE0000000000"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"


def load_recording(name: str) -> Dict[str, Any]:
    path = RECORDINGS / f"{name}.json"
    if not path.is_file():
        pytest.skip(f"recording bedrock-converse-stream/{name} not available (needs {RECORDINGS})")
    return json.loads(path.read_text(encoding="utf-8"))


def recorded_body(recording: Dict[str, Any], index: int = 0) -> bytes:
    return base64.b64decode(recording["interactions"][index]["response"]["body_b64"])


def event(name: str, payload: Any) -> bytes:
    """One ``event`` frame with a JSON payload."""
    return encode_message(
        {":event-type": name, ":content-type": "application/json", ":message-type": "event"},
        json.dumps(payload).encode("utf-8"),
    )


def exception(name: str, message: str) -> bytes:
    return encode_message(
        {":exception-type": name, ":content-type": "application/json", ":message-type": "exception"},
        json.dumps({"message": message}).encode("utf-8"),
    )


def text_stream(text: str = "Hi", stop: str = "end_turn", usage: Optional[Dict[str, int]] = None) -> bytes:
    usage = usage or {"inputTokens": 3, "outputTokens": 1, "totalTokens": 4}
    return b"".join(
        [
            event("messageStart", {"role": "assistant"}),
            event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": text}}),
            event("contentBlockStop", {"contentBlockIndex": 0}),
            event("messageStop", {"stopReason": stop}),
            event("metadata", {"usage": usage, "metrics": {"latencyMs": 1}}),
        ]
    )


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/vnd.amazon.eventstream"
    headers: Dict[str, str] = field(default_factory=dict)
    chunk_size: int = 0  # 0: one write
    stall_after: Optional[int] = None  # write this many bytes, then wait for server.release
    echo: Optional[Callable[[Received], bytes]] = None  # the body made from the request (a proxy echoing it)
    # after the body, wait for server.release (the client has read what it needs), then reset
    # the connection (RST) instead of ending the chunked body
    reset: bool = False


@dataclass
class Received:
    method: str
    path: str
    headers: Dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))


class Server:
    """Answers each POST with the next queued :class:`Reply`, in chunks; records every request."""

    def __init__(self) -> None:
        self.replies: List[Reply] = []
        self.requests: List[Received] = []
        self.release = threading.Event()
        self.stalled = threading.Event()
        self.lock = threading.Lock()
        # a fake AWS clock: when set (seconds from this machine's), a request whose X-Amz-Date is
        # more than 5 minutes off it gets AWS's 403 InvalidSignatureException; the Date header
        # says date_offset (default clock_offset), or nothing when send_date is False
        self.clock_offset: Optional[float] = None
        self.date_offset: Optional[float] = None
        self.send_date = True
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def date_time_string(self, timestamp: Optional[float] = None) -> str:
                offset = server.clock_offset if server.date_offset is None else server.date_offset
                return email.utils.formatdate(time.time() + (offset or 0), usegmt=True)

            def send_header(self, keyword: str, value: str) -> None:
                if keyword != "Date" or server.send_date:
                    super().send_header(keyword, value)

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                with server.lock:
                    server.requests.append(Received("POST", self.path, dict(self.headers.items()), body))
                    reply = server.refused_time(self.headers.get("X-Amz-Date") or "")
                    if reply is None:
                        reply = (
                            server.replies.pop(0)
                            if server.replies
                            else Reply(404, b'{"message":"no reply"}', "application/json")
                        )
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Transfer-Encoding", "chunked")
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                data = reply.echo(server.requests[-1]) if reply.echo is not None else reply.body
                size = reply.chunk_size or len(data) or 1
                sent = 0
                try:
                    for start in range(0, len(data), size):
                        if reply.stall_after is not None and sent >= reply.stall_after:
                            server.stalled.set()
                            server.release.wait(30)
                            return
                        piece = data[start : start + size]
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                        self.wfile.flush()
                        sent += len(piece)
                    if reply.stall_after is not None:
                        server.stalled.set()
                        server.release.wait(30)
                        return
                    if reply.reset:  # SO_LINGER 0: close() sends RST, the client's read fails
                        server.release.wait(30)  # an RST discards what the client has not read yet
                        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        self.connection.close()
                        self.close_connection = True
                        return
                    self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    pass

        class Quiet(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a client that aborted mid-body is expected here

        self.httpd = Quiet(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def refused_time(self, amz_date: str) -> Optional[Reply]:
        """AWS's answer to a signature more than 5 minutes off the fake clock, else None."""
        if self.clock_offset is None:
            return None
        now = time.time() + self.clock_offset
        signed = calendar.timegm(time.strptime(amz_date, "%Y%m%dT%H%M%SZ"))
        stamp = lambda t: time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(t))  # noqa: E731
        if signed < now - 300:
            text = f"Signature expired: {stamp(signed)} is now earlier than {stamp(now - 300)} ({stamp(now)} - 5 min.)"
        elif signed > now + 300:
            text = f"Signature not yet current: {stamp(signed)} is still later than {stamp(now + 300)} ({stamp(now)} + 5 min.)"
        else:
            return None
        return Reply(
            403,
            json.dumps({"message": text}).encode(),
            "application/json",
            headers={
                "x-amzn-ErrorType": "InvalidSignatureException:http://internal.amazon.com/coral/com.amazon.coral.service/"
            },
        )

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def enqueue(self, *replies: Reply) -> None:
        with self.lock:
            self.replies.extend(replies)

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def local_model(server: Server, model_id: str = "us.amazon.nova-micro-v1:0", **fields: Any) -> Model:
    """A Bedrock model whose endpoint is the local server."""
    defaults: Dict[str, Any] = dict(
        id=model_id, api="bedrock-converse-stream", provider="amazon-bedrock", base_url=server.url, max_tokens=4096
    )
    defaults.update(fields)
    return Model(**defaults)

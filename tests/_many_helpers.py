"""What run_many's tests and benchmark send to worker processes: a plugin registering tools by
name (``many_add``, ``many_spin``, ``many_wait``), a picklable ``get_api_key``, and a loopback
OpenAI-compatible server that answers every conversation statelessly from its request body.

Workers import this module by name (``plugins=("_many_helpers:plugin",)``), so it must stay
importable from ``tests/`` (on ``sys.path`` under pytest; set ``PYTHONPATH`` for spawned
processes) and keep everything at module level.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List

from agentcore import hookimpl, tool

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


@tool
def many_add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def many_spin(n: int) -> int:
    """A CPU-bound tool: sum of i*i below n, in pure Python (holds the GIL)."""
    total = 0
    for i in range(n):
        total += i * i
    return total


@tool
def many_wait(path: str) -> str:
    """Wait until the file ``path`` exists (a test's gate for a task that must be running)."""
    with open(path + ".starting", "w") as started:  # which process runs it: the test may kill it
        started.write(str(os.getpid()))
    os.replace(path + ".starting", path + ".started")  # appears with its content
    while not os.path.exists(path):
        time.sleep(0.01)  # polling a file: the only signal that crosses processes without setup
    return "released"


class _Locked:
    """A tool's result detail that cannot be pickled (it holds a lock)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def __repr__(self) -> str:
        return "_Locked()"


@tool
def many_unpicklable() -> Any:
    """Return an object that cannot be pickled (it ends up in the tool result's details)."""
    return _Locked()


#: thread-pool tests: set when a many_block call started; many_block returns when RELEASE is set
#: or its run is aborted
STARTED = threading.Event()
RELEASE = threading.Event()


@tool
def many_block(note: str, signal: Any = None) -> str:
    """Block until released or aborted (thread-pool cancellation tests)."""
    STARTED.set()
    while not RELEASE.is_set():  # two events to watch: alternate short waits on each
        if signal is not None and signal.wait(0.02):
            return "aborted"
        RELEASE.wait(0.02)
    return "released"


#: set when a many_stubborn call saw its run aborted; many_stubborn returns only when RELEASE is set
ABORT_SEEN = threading.Event()


@tool
def many_stubborn(note: str, signal: Any = None) -> str:
    """Ignore the abort signal (a tool that cannot be stopped): wait for RELEASE, noting the abort."""
    STARTED.set()
    while not RELEASE.wait(0.02):
        if signal is not None and signal.aborted:
            ABORT_SEEN.set()
    return "released"


#: many_touchy calls started, and those that saw their run aborted; TOUCHY_CHANGED is notified
TOUCHY = {"started": 0, "aborted": 0}
TOUCHY_CHANGED = threading.Condition()


def _count(what: str) -> None:
    with TOUCHY_CHANGED:
        TOUCHY[what] += 1
        TOUCHY_CHANGED.notify_all()


@tool
def many_touchy(note: str, signal: Any = None) -> str:
    """Like many_block, but delivering its run's abort raises KeyboardInterrupt on the aborting
    thread (a second Ctrl+C landing while the abort is delivered)."""

    def interrupted(reason: Any) -> None:
        raise KeyboardInterrupt

    signal.add_listener(interrupted)
    _count("started")
    while not RELEASE.is_set():
        if signal.wait(0.02):
            _count("aborted")
            return "aborted"
    return "released"


class _Plugin:
    @hookimpl
    def register_tools(self, register: Any) -> None:
        register(many_add)
        register(many_spin)
        register(many_wait)
        register(many_block)


plugin = _Plugin()


class Record:
    """A task id as a user's own object: picklable, its repr the default one (an address)."""


def api_key(provider: str) -> str:
    """A picklable get_api_key: the loopback server accepts any key."""
    return "loopback-key"


def _chunk(delta: Dict[str, Any], finish: Any = None) -> Dict[str, Any]:
    return {
        "id": "chatcmpl-l",
        "object": "chat.completion.chunk",
        "model": "loopback",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _events(*payloads: Any) -> List[bytes]:
    return [f"data: {json.dumps(p)}\n\n".encode() for p in payloads] + [b"data: [DONE]\n\n"]


USAGE = {"choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 20}}


def answer_for(body: Dict[str, Any]) -> List[bytes]:
    """Turn 1: call the tool named in the user's prompt ``"<tool> <json args>"``; turn 2: report
    the tool's result as text."""
    messages = body["messages"]
    if messages[-1]["role"] == "tool":
        content = messages[-1]["content"]
        text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
        return _events(_chunk({"content": f"result {text}"}), _chunk({}, "stop"), USAGE)
    prompt = next(m for m in reversed(messages) if m["role"] == "user")["content"]
    if not isinstance(prompt, str):
        prompt = "".join(p.get("text", "") for p in prompt)
    name, _, args = prompt.partition(" ")
    return _events(
        _chunk(
            {
                "tool_calls": [
                    {"index": 0, "id": "call_1", "type": "function", "function": {"name": name, "arguments": args}}
                ]
            }
        ),
        _chunk({}, "tool_calls"),
        USAGE,
    )


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # a worker process killed mid-request (the kill test) resets its connection: expected
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionError, BrokenPipeError)):
            super().handle_error(request, client_address)


class LoopbackServer:
    """An OpenAI-compatible chat-completions server on 127.0.0.1; ``latency`` seconds before each
    answer (the model's think time). Usable from any process on this machine."""

    def __init__(self, latency: float = 0.0) -> None:
        self.latency = latency
        self.requests = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.requests += 1
                if owner.latency:
                    time.sleep(owner.latency)  # simulated model latency, not test ordering
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for event in answer_for(body):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        self._httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._httpd.request_queue_size = 128
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True, name="loopback-llm"
        )
        self._thread.start()

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def model(self) -> Any:
        from agentcore import Model

        return Model(id="loopback", api="openai-completions", provider="loopback", base_url=self.base_url)

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> LoopbackServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

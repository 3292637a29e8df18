"""Fixtures: the FastMCP-style test server (stdio and HTTP), the npm reference servers, helpers.

The reference servers are found in ``$AGENTCORE_MCP_NODE_DIR/node_modules/.bin`` (installed by
``install-servers.sh DIR``); their tests skip with the reason when node or the servers are absent.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterator, List, Optional

import pytest

HERE = Path(__file__).resolve().parent
TEST_SERVER = str(HERE / "mcp_test_server.py")
NODE_DIR_ENV = "AGENTCORE_MCP_NODE_DIR"


def pytest_configure(config: pytest.Config) -> None:
    # The SDK warns on its own deprecated calls the plugin does not make; keep output readable.
    config.addinivalue_line("filterwarnings", "ignore::DeprecationWarning:mcp.*")


def _stat(pid: int) -> Optional[List[str]]:
    """The fields of /proc/<pid>/stat after the command name (state first), None when gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie counts as dead (some containers' init never reaps)."""
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"


def group_members(pgid: int) -> List[int]:
    """Live (non-zombie) processes of process group ``pgid`` (Linux /proc)."""
    members = []
    for entry in Path("/proc").iterdir():
        fields = _stat(int(entry.name)) if entry.name.isdigit() else None
        if fields is not None and fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


def lifelines_of(pgid: int) -> List[int]:
    """Live lifeline watchdogs (agentcore_mcp._stdio.Lifeline) of process group ``pgid``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = Path(entry, "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"agentcore-mcp-lifeline" in argv and str(pgid).encode() in argv and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def eventually(predicate: Callable[[], bool], within: float = 10.0) -> bool:
    """Poll ``predicate`` until true or ``within`` seconds passed (for events in other processes,
    which a threading.Event cannot see); returns its last value."""
    deadline = time.monotonic() + within
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


def abort_when_marked(controller: object, marker: Path) -> None:
    """Abort ``controller`` (an AbortController) from a thread once file ``marker`` exists."""
    import threading

    def wait_then_abort() -> None:
        eventually(marker.exists, within=30)
        controller.abort("test abort")  # type: ignore[attr-defined]

    threading.Thread(target=wait_then_abort, daemon=True).start()


@pytest.fixture
def marker_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "markers"
    folder.mkdir()
    return folder


@pytest.fixture
def test_server(marker_dir: Path) -> Iterator[Callable[..., object]]:
    """A factory of stdio MCPServers running mcp_test_server.py; all closed at teardown."""
    from agentcore_mcp import MCPServer

    made: List[MCPServer] = []

    def make(name: str = "testsrv", env: Optional[dict] = None, **kwargs: object) -> MCPServer:
        server = MCPServer.stdio(
            sys.executable, [TEST_SERVER], env={"MARKER_DIR": str(marker_dir), **(env or {})}, name=name, **kwargs
        )
        made.append(server)
        return server

    yield make
    for server in made:
        server.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class HttpServerProcess:
    """mcp_test_server.py in ``http`` or ``sse`` mode on 127.0.0.1, a random free port."""

    def __init__(self, mode: str, marker_dir: Path) -> None:
        self.mode = mode
        self.marker_dir = marker_dir
        self.port = free_port()
        path = "/mcp" if mode == "http" else "/sse"
        self.url = f"http://127.0.0.1:{self.port}{path}"
        self._launch()

    def _launch(self) -> None:
        env = {**os.environ, "MARKER_DIR": str(self.marker_dir)}
        self.process = subprocess.Popen(
            [sys.executable, TEST_SERVER, self.mode, str(self.port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        if not eventually(self._accepting, within=30):
            self.stop()
            raise RuntimeError(f"the {self.mode} test server did not start listening on port {self.port}")

    def restart(self) -> None:
        """Kill the server and start a new one on the same port (it knows no earlier session)."""
        self.stop()
        self._launch()

    def _accepting(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"test server exited: {self.process.stderr.read().decode()[-2000:]}")
        with socket.socket() as sock:
            sock.settimeout(0.2)
            return sock.connect_ex(("127.0.0.1", self.port)) == 0

    def stop(self) -> None:
        try:
            os.killpg(self.process.pid, 9)
        except ProcessLookupError:
            pass
        self.process.wait(10)
        self.process.stderr.close()


@pytest.fixture
def http_server(marker_dir: Path) -> Iterator[HttpServerProcess]:
    server = HttpServerProcess("http", marker_dir)
    yield server
    server.stop()


@pytest.fixture
def sse_server(marker_dir: Path) -> Iterator[HttpServerProcess]:
    server = HttpServerProcess("sse", marker_dir)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def node_bin() -> Path:
    """``node_modules/.bin`` with the reference servers, or skip saying what is missing."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed: the npm reference-server tests need node >= 18")
    folder = os.environ.get(NODE_DIR_ENV)
    if not folder:
        pytest.skip(f"${NODE_DIR_ENV} is not set: run tests/install-servers.sh DIR and set it to DIR")
    bin_dir = Path(folder) / "node_modules" / ".bin"
    for name in ("mcp-server-everything", "mcp-server-filesystem"):
        if not (bin_dir / name).exists():
            pytest.skip(f"{bin_dir / name} is missing: run tests/install-servers.sh {folder}")
    return bin_dir

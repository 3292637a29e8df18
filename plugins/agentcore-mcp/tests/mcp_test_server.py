"""A small MCP server (the SDK's MCPServer, formerly FastMCP) for the cases the reference servers
do not cover. Run as ``python mcp_test_server.py [stdio | http PORT | sse PORT]``.

Tools: ``echo``, ``add``, ``structured``, ``fail`` (isError), ``progress`` (progress
notifications), ``hang`` (waits until cancelled; writes ``cancelled-<tag>`` into $MARKER_DIR when
the client cancels it, ``started-<tag>`` when it starts), ``slow`` (sleeps), ``freeze`` (blocks the
whole server: no pings answered), ``die`` (exits mid-call with code 3 after a line on stderr),
``wait_for``/``go`` (one call waits for the other, maybe on another server), ``add_tool`` (registers ``extra`` and announces tools/list_changed), ``pid``, ``env`` (one
environment variable), ``spawn_child`` (a child in the server's process group that ignores
SIGTERM and stdin EOF), ``image``, ``resource``, ``log`` (sends a ``notifications/message``),
``big`` (text blocks of a given size).
"""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TypedDict

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import EmbeddedResource, ImageContent, ResourceLink, TextContent, TextResourceContents

server = MCPServer("agentcore-test")
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16).decode()


def _mark(name: str) -> None:
    folder = os.environ.get("MARKER_DIR")
    if folder:
        Path(folder, name).write_text(str(os.getpid()))


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class Weather(TypedDict):
    city: str
    temperature: int


@server.tool()
def structured(city: str) -> Weather:
    """Weather as structured content."""
    return {"city": city, "temperature": 21}


@server.tool()
def fail(reason: str) -> str:
    """Always fails with the reason."""
    raise ToolError(f"cannot do it: {reason}")


@server.tool()
async def progress(steps: int, ctx: Context) -> str:
    """Report `steps` progress notifications, then finish."""
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"step {i} of {steps}")
    return f"done after {steps} steps"


@server.tool()
async def hang(tag: str) -> str:
    """Never finishes on its own; records its cancellation."""
    _mark(f"started-{tag}")
    try:
        await asyncio.Event().wait()
    except BaseException:
        _mark(f"cancelled-{tag}")
        raise
    return "unreachable"


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer (the server keeps answering pings meanwhile)."""
    await asyncio.sleep(seconds)
    return "slept"


@server.tool()
async def freeze(seconds: float) -> str:
    """Block the whole server (a hung server: it answers nothing, not even pings)."""
    time.sleep(seconds)
    return "thawed"


@server.tool()
def die(code: int = 3, say_env: str = "") -> str:
    """Exit in the middle of the call, after writing a fatal line (and the value of environment
    variable ``say_env``, as a careless server might) to stderr."""
    if say_env:
        print(f"{say_env} was {os.environ.get(say_env)}", file=sys.stderr, flush=True)
    print("fatal: the test server dies on request", file=sys.stderr, flush=True)
    os._exit(code)


@server.tool()
async def wait_for(tag: str) -> str:
    """Wait (up to 60 s) until the tool ``go`` was called with the same tag, on any server."""
    marker = Path(os.environ["MARKER_DIR"], f"go-{tag}")
    for _ in range(6000):
        if marker.exists():
            return f"{tag} arrived"
        await asyncio.sleep(0.01)
    raise ToolError(f"{tag} never arrived")


@server.tool()
def go(tag: str) -> str:
    """Release ``wait_for(tag)``."""
    _mark(f"go-{tag}")
    return f"released {tag}"


@server.tool()
async def add_tool(ctx: Context, via: str = "both") -> str:
    """Register a new tool `extra` and announce the change: through the 2026-07-28 subscription
    bus (``via="bus"``), a plain notification (``"notification"``) or both."""
    if "extra" not in [t.name for t in await server.list_tools()]:
        server.add_tool(lambda: "extra!", name="extra", description="Added at run time.")
    if via in ("both", "bus"):
        try:
            await ctx.notify_tools_changed()
        except Exception:  # noqa: BLE001 - a handshake-era session has no subscription bus
            pass
    if via in ("both", "notification"):
        try:
            await ctx.session.send_tool_list_changed()
        except Exception:  # noqa: BLE001 - a 2026-era session announces through the bus above
            pass
    return "added"


@server.tool()
async def log(ctx: Context, message: str, level: str = "info", say_env: str = "", as_object: bool = False) -> str:
    """Send one log message (logger ``test-logger``) at ``level``: ``message``, followed by the
    value of environment variable ``say_env`` (as a careless server might), as a string or as
    ``{"message": ...}``."""
    text = f"{message} {say_env}={os.environ.get(say_env)}" if say_env else message
    await ctx.log(level, {"message": text} if as_object else text, logger_name="test-logger")  # type: ignore[arg-type]
    return "logged"


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
def env(name: str) -> str:
    """The value of one environment variable."""
    return os.environ.get(name, "<unset>")


@server.tool()
def spawn_child() -> int:
    """Start a child that ignores SIGTERM and stdin EOF, in this process group; its pid."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(600)"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return child.pid


@server.tool()
def big(chars: int, blocks: int = 1) -> list:
    """``blocks`` text blocks of ``chars`` characters each, block i made of the letter a + i."""
    return [TextContent(type="text", text=chr(ord("a") + i) * chars) for i in range(blocks)]


@server.tool()
def image() -> list:
    """An image, an embedded text resource and a resource link."""
    return [
        ImageContent(type="image", data=PNG, mime_type="image/png"),
        EmbeddedResource(
            type="resource",
            resource=TextResourceContents(uri="test://notes/1", text="note one", mime_type="text/plain"),
        ),
        ResourceLink(type="resource_link", uri="test://notes/2", name="note two", description="the second"),
    ]


def main(argv: list) -> None:
    mode = argv[1] if len(argv) > 1 else "stdio"
    if mode == "stdio":
        server.run("stdio")
    elif mode == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(argv[2]))
    elif mode == "sse":
        server.run("sse", host="127.0.0.1", port=int(argv[2]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv)

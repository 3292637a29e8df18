"""agentcore-mcp: the tools of any MCP server as agentcore ``AgentTool``s, for synchronous code.

    from agentcore_mcp import MCPServer

    with MCPServer.stdio("npx", ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]) as fs:
        agent = Agent(model=..., tools=fs.tools(prefix="fs"))
        agent.prompt("What is in /tmp?")

The MCP SDK runs on one private event-loop thread owned by this package; callers never need a
loop (scripts, threads and Jupyter alike). Installing the distribution also registers the tools of
the servers in the config file named by ``$AGENTCORE_MCP_CONFIG`` (see :mod:`agentcore_mcp.plugin`).
Requires Python 3.10+ (the MCP SDK does).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import (
    MCPAbortedError,
    MCPConfigError,
    MCPConnectionError,
    MCPError,
    MCPServerError,
    MCPTimeoutError,
    MCPToolError,
)

if TYPE_CHECKING:
    from .config import load_config
    from .server import MCPServer

# The SDK takes ~1.5 s to import; agentcore imports the plugin module (and so this package) on
# every first registry use, so the names that need the SDK load on first access only.
_LAZY = {"MCPServer": "server", "load_config": "config"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "MCPServer",
    "load_config",
    "MCPError",
    "MCPConfigError",
    "MCPConnectionError",
    "MCPServerError",
    "MCPTimeoutError",
    "MCPAbortedError",
    "MCPToolError",
]

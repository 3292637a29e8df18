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

from .config import load_config
from .errors import (MCPAbortedError, MCPConfigError, MCPConnectionError, MCPError, MCPServerError,
                     MCPTimeoutError, MCPToolError)
from .server import MCPServer

__all__ = ["MCPServer", "load_config", "MCPError", "MCPConfigError", "MCPConnectionError",
           "MCPServerError", "MCPTimeoutError", "MCPAbortedError", "MCPToolError"]

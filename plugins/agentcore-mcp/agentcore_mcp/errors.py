"""The plugin's exceptions. Every message names the server; none contains a secret.

A tool's ``execute`` raises them, and the agent loop turns a raised exception into an error tool
result whose text is the message, so these messages are what the model reads.
"""

from __future__ import annotations

from typing import Optional

__all__ = [
    "MCPError",
    "MCPConfigError",
    "MCPConnectionError",
    "MCPServerError",
    "MCPTimeoutError",
    "MCPAbortedError",
    "MCPToolError",
]


class MCPError(Exception):
    """Base class. ``server`` is the server's name, ``tool`` the MCP tool name (when a call)."""

    def __init__(self, message: str, *, server: Optional[str] = None, tool: Optional[str] = None) -> None:
        super().__init__(message)
        self.server = server
        self.tool = tool


class MCPConfigError(MCPError, ValueError):
    """A config file or entry is malformed (the message names the file, the server and the key)."""


class MCPConnectionError(MCPError):
    """The server could not be started or reached, or the MCP handshake failed."""


class MCPServerError(MCPError):
    """The server crashed, closed the connection or stopped answering during a call.

    The connection is dropped; the next call starts (or reconnects to) the server again."""


class MCPTimeoutError(MCPServerError):
    """A call got no result within its timeout; the request was cancelled on the server."""


class MCPAbortedError(MCPError):
    """The run was aborted during the call; the request was cancelled on the server."""


class MCPToolError(MCPError):
    """The server ran the tool and it reported failure (``isError``) or refused the call."""

"""The agentcore plugin module named by the entry point ``agentcore = mcp = agentcore_mcp.plugin``.

With ``AGENTCORE_MCP_CONFIG=/path/to/mcp.json`` set, the first use of the tool registry (an
``Agent(tools=["fs_read_file"])``, ``agentcore plugins``, ...) starts the servers of that file, in
parallel, and registers their tools, each named ``<prefix>_<tool>`` (prefix: the entry's
``"prefix"``, by default the server's name). A server that fails to start is skipped with a
warning naming it and why; the other servers' tools are registered. A malformed file makes this
plugin's ``register_tools`` fail, which agentcore reports like any plugin failure (``agentcore
plugins`` lists it) without affecting other plugins. Without the variable the plugin does nothing
and imports nothing heavy.

The CLI hooks below (agentcore's ``add_cli_options`` and ``cli_tools``) give ``agentcore run`` and
``agentcore chat`` the option ``--mcp CONFIG`` (repeatable): the servers of each file are started
when the command builds its agent and their tools follow the ``--tools`` tools; a bad file stops
the command with exit status 2 and a message naming this plugin and the file.
"""

from __future__ import annotations

import os
from typing import Any, Callable, List, Optional

from agentcore.hookspecs import hookimpl

CONFIG_ENV = "AGENTCORE_MCP_CONFIG"


@hookimpl
def register_tools(register: Callable[[Any], None]) -> None:
    """Register the tools of the servers in ``$AGENTCORE_MCP_CONFIG`` (nothing when unset)."""
    path = os.environ.get(CONFIG_ENV, "").strip()
    if not path:
        return
    from ._registry import config_tools

    for tool in config_tools(path):
        register(tool)


@hookimpl
def add_cli_options(parser: Any, command: str) -> None:
    """``--mcp CONFIG`` (repeatable) on ``agentcore run``, ``agentcore chat`` and ``agentcore rpc``."""
    if command in ("run", "chat", "rpc"):
        parser.add_argument(
            "--mcp",
            metavar="CONFIG",
            action="append",
            default=None,
            dest="mcp_configs",
            help='add the tools of the MCP servers in CONFIG (a {"mcpServers": ...} JSON file)',
        )


@hookimpl
def cli_tools(args: Any, command: str) -> Optional[List[Any]]:
    """The tools of the servers in every ``--mcp CONFIG`` given (started now, closed at exit)."""
    paths = getattr(args, "mcp_configs", None) or []
    if not paths:
        return None
    from ._registry import config_tools, unique_across

    return unique_across([config_tools(path) for path in paths], paths)

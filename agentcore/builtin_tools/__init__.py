"""Built-in coding tools: ``read``, ``bash``, ``edit``, ``write``, ``grep``, ``find``, ``ls``.

Each tool is an :class:`~agentcore.tools.AgentTool` made by a factory (``create_read_tool(cwd=...,
root=...)`` and so on). File tools take paths relative to ``cwd`` (the process's current directory
at call time when None) and, given ``root``, refuse any path that resolves outside it; ``bash``
runs in ``cwd`` and is never confined. Tools report failure by raising.

This module is also a plugin: its ``register_tools`` hook registers default instances (current
directory at call time, no root), exactly as a third-party plugin would.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, List, Optional

from ..hookspecs import hookimpl
from ..tools import AgentTool
from ._paths import PathOutsideRootError
from .bash import BashError, create_bash_tool
from .edit import EditError, create_edit_tool
from .find import create_find_tool
from .grep import create_grep_tool
from .ls import create_ls_tool
from .read import create_read_tool
from .write import create_write_tool

__all__ = [
    "ALL_TOOL_NAMES",
    "READ_ONLY_TOOL_NAMES",
    "create_coding_tools",
    "create_read_only_tools",
    "create_bash_tool",
    "create_read_tool",
    "create_write_tool",
    "create_edit_tool",
    "create_ls_tool",
    "create_find_tool",
    "create_grep_tool",
    "BashError",
    "EditError",
    "PathOutsideRootError",
    "register_tools",
]

ALL_TOOL_NAMES = ("read", "bash", "edit", "write", "grep", "find", "ls")
READ_ONLY_TOOL_NAMES = ("read", "grep", "find", "ls")


def create_coding_tools(
    cwd: Optional[str] = None, root: Optional[str] = None, names: Iterable[str] = ALL_TOOL_NAMES
) -> List[AgentTool]:
    """The built-in tools named in ``names`` (default: all seven), in that order.

    ``root`` confines the file tools; ``bash`` runs in ``cwd``, or in ``root`` when only ``root``
    is given. Raises ``ValueError`` for an unknown name.
    """
    factories = {
        "read": lambda: create_read_tool(cwd, root=root),
        "bash": lambda: create_bash_tool(cwd if cwd is not None else root),
        "edit": lambda: create_edit_tool(cwd, root=root),
        "write": lambda: create_write_tool(cwd, root=root),
        "grep": lambda: create_grep_tool(cwd, root=root),
        "find": lambda: create_find_tool(cwd, root=root),
        "ls": lambda: create_ls_tool(cwd, root=root),
    }
    tools = []
    for name in names:
        factory = factories.get(name)
        if factory is None:
            raise ValueError(f"unknown built-in tool {name!r}; choose from {', '.join(ALL_TOOL_NAMES)}")
        tools.append(factory())
    return tools


def create_read_only_tools(cwd: Optional[str] = None, root: Optional[str] = None) -> List[AgentTool]:
    """``read``, ``grep``, ``find`` and ``ls``: tools that cannot change anything."""
    return create_coding_tools(cwd, root, READ_ONLY_TOOL_NAMES)


@hookimpl
def register_tools(register: Callable[[Any], None]) -> None:
    """Register the seven built-in tools, working in the current directory at call time."""
    for tool in create_coding_tools():
        register(tool)

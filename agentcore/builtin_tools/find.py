"""The ``find`` tool: files and folders matching a glob, under a folder.

Paths come back one per line, relative to the working directory (``/`` separators, folders ending
in ``/``; bytes that are not UTF-8 shown as U+FFFD), in walk order (sorted by name, depth first).
Version-control folders are skipped; see
:mod:`agentcore.builtin_tools._walk` for the glob rules. A pattern ending in ``/`` matches only
folders (``tests/`` finds every folder named ``tests``, ``src/*/`` the folders in ``src``). At
most ``limit`` results (default 1000) are listed, with a notice when there were more. Fails
(raises) for a missing folder, a path that is not a folder, a path outside ``root``, one behind a
folder this process may not search (``PermissionError``), an invalid glob (``ValueError`` naming
it), or an abort.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping, Optional

from ..tools import AgentTool, AgentToolResult
from ..types import TextContent
from ._args import positive_int
from ._listing import listing_result, take_at_most
from ._paths import PathResolver, require_reachable
from ._walk import compile_glob, walk

__all__ = ["create_find_tool"]

DEFAULT_FIND_LIMIT = 1000


def create_find_tool(
    cwd: Optional[str] = None, *, root: Optional[str] = None, limit: int = DEFAULT_FIND_LIMIT
) -> AgentTool:
    """A ``find`` tool resolving paths against ``cwd`` and, when given, confined to ``root``."""
    paths = PathResolver(cwd, root)

    def execute(
        tool_call_id: str,
        args: Mapping[str, Any],
        signal: Any = None,
        on_update: Optional[Callable[[AgentToolResult], None]] = None,
    ) -> AgentToolResult:
        pattern = args.get("pattern")
        if not isinstance(pattern, str) or not pattern.strip():
            raise ValueError("pattern is empty: pass a glob such as '*.py' or 'src/**/*.ts'")
        shown = args.get("path") or "."
        top = paths.resolve(shown)
        most = positive_int(args, "limit") or limit
        require_reachable(top, shown)
        if not os.path.isdir(top):
            raise FileNotFoundError(f"Path not found or not a directory: {shown}")
        folders_only = pattern.rstrip().endswith("/")  # "tests/", as the results write folders
        matches = compile_glob(pattern.rstrip().rstrip("/") if folders_only else pattern)
        found, more = take_at_most(
            (
                paths.display(path) + ("/" if is_dir else "")
                for rel, path, is_dir in walk(top, signal)
                if (is_dir or not folders_only) and matches(rel)
            ),
            most,
        )
        if not found:
            return AgentToolResult(
                content=[TextContent(f"No files found matching pattern {pattern}")], details={"count": 0}
            )
        return listing_result(found, {"count": len(found)}, most, more, "results")

    return AgentTool(
        name="find",
        label="find",
        description=(
            "Find files by glob pattern ('*.py' matches names at any depth, 'src/**/*.ts' matches paths "
            "under the search folder; a pattern ending in '/' matches folders only). Skips .git and other "
            f"VCS folders. At most {limit} results unless "
            "limit is given; paths are relative to the working directory."
        ),
        parameters={
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Glob pattern, e.g. '*.py', '**/*.json', 'src/**/test_*'"},
                "path": {"type": "string", "description": "Folder to search (default: the working directory)"},
                "limit": {"type": "integer", "minimum": 1, "description": f"Maximum results (default {limit})"},
            },
            "required": ["pattern"],
        },
        execute=execute,
    )

"""The ``ls`` tool: the entries of one folder, sorted case-insensitively, folders marked with ``/``.

Dot files are included; bytes of a name that are not UTF-8 are shown as U+FFFD (Python's lone
surrogate, which providers drop, would show the model another name). At most ``limit`` entries
(default 500) are listed, followed by a notice
when there were more (or, when the 50KB output cap cut the list, how many were shown). Fails
(raises) for a missing path, a file, a path outside ``root``, or one behind a folder this process
may not search (``PermissionError``, not "not found").
Symlinks are listed, never followed out of ``root``.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, Mapping, Optional

from ..tools import AgentTool, AgentToolResult
from ..types import TextContent
from ._args import positive_int
from ._paths import PathResolver, require_reachable, shown_name
from ._truncate import DEFAULT_MAX_BYTES, truncate_items

__all__ = ["create_ls_tool"]

DEFAULT_LS_LIMIT = 500


def create_ls_tool(
    cwd: Optional[str] = None, *, root: Optional[str] = None, limit: int = DEFAULT_LS_LIMIT
) -> AgentTool:
    """An ``ls`` tool resolving paths against ``cwd`` and, when given, confined to ``root``."""
    paths = PathResolver(cwd, root)

    def execute(
        tool_call_id: str,
        args: Mapping[str, Any],
        signal: Any = None,
        on_update: Optional[Callable[[AgentToolResult], None]] = None,
    ) -> AgentToolResult:
        shown = args.get("path") or "."
        target = paths.resolve(shown)
        most = positive_int(args, "limit") or limit
        if signal is not None:
            signal.raise_if_aborted()
        require_reachable(target, shown)
        if not os.path.exists(target):
            raise FileNotFoundError(f"Path not found: {shown}")
        if not os.path.isdir(target):
            raise NotADirectoryError(f"{shown} is not a directory; use read for files")
        with os.scandir(target) as it:
            entries = sorted(((e.name, _is_dir(e)) for e in it), key=lambda x: (x[0].lower(), x[0]))
        names = [shown_name(name) + ("/" if is_dir else "") for name, is_dir in entries]
        details: Dict[str, Any] = {"entries": len(names)}
        if not names:
            return AgentToolResult(content=[TextContent("(empty directory)")], details=details)
        shown_names = names[:most]
        cut = truncate_items(shown_names, DEFAULT_MAX_BYTES)
        text = cut.content
        if len(names) > most:
            details["limitReached"] = most
        if cut.truncated:  # fewer than `most` shown, and a higher limit would not show more
            text += (
                f"\n\n[output cut at {DEFAULT_MAX_BYTES // 1024}KB: {cut.output_lines} of {len(names)} entries "
                "shown; use find with a pattern to see the others]"
            )
            details["truncation"] = cut.to_dict()
        elif len(names) > most:
            text += f"\n\n[{most} of {len(names)} entries shown. Use limit={most * 2} for more]"
        return AgentToolResult(content=[TextContent(text)], details=details)

    return AgentTool(
        name="ls",
        label="ls",
        description=(
            f"List a directory's entries, sorted alphabetically, folders ending in '/', dot files "
            f"included. At most {limit} entries unless limit is given."
        ),
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Directory to list (default: the working directory)"},
                "limit": {"type": "integer", "minimum": 1, "description": f"Maximum entries (default {limit})"},
            },
        },
        execute=execute,
    )


def _is_dir(entry: os.DirEntry[str]) -> bool:
    """Whether an entry is a folder (following links); False for one that cannot be followed (a
    symlink loop, a link into a folder this process may not enter), listed as a plain name
    instead of failing the whole listing."""
    try:
        return entry.is_dir()
    except OSError:
        return False

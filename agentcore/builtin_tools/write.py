"""The ``write`` tool: create or overwrite a file atomically.

Missing parent folders are created. The content (UTF-8) goes to a temp file in the same folder,
which then replaces the target with ``os.replace``: readers see the old file or the new one, never
half of it, and a failure leaves the old file untouched. An existing file keeps its permission
bits; a new one gets the usual ``0o666 & ~umask``. Writing through a symlink replaces the file it
points to, not the link. Fails (raises) for a path outside ``root``, a folder, or a named pipe,
device or socket (which ``os.replace`` would swap for a plain file).
"""

from __future__ import annotations

import os
import stat
import tempfile
from typing import Any, Callable, Mapping, Optional

from ..tools import AgentTool, AgentToolResult
from ..types import TextContent
from ._paths import NotARegularFileError, PathResolver, file_lock, special_file_kind

__all__ = ["create_write_tool", "atomic_write"]


def _umask() -> int:
    try:  # reading it is thread-safe; setting it (the portable way) is not
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def atomic_write(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically (temp file in the same folder, fsync, ``os.replace``)."""
    target = os.path.realpath(path)
    folder = os.path.dirname(target)
    os.makedirs(folder, exist_ok=True)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def create_write_tool(cwd: Optional[str] = None, *, root: Optional[str] = None) -> AgentTool:
    """A ``write`` tool resolving paths against ``cwd`` and, when given, confined to ``root``."""
    paths = PathResolver(cwd, root)

    def execute(
        tool_call_id: str,
        args: Mapping[str, Any],
        signal: Any = None,
        on_update: Optional[Callable[[AgentToolResult], None]] = None,
    ) -> AgentToolResult:
        shown = args.get("path")
        target = paths.resolve(shown)  # type: ignore[arg-type]
        content = args.get("content")
        if not isinstance(content, str):
            raise ValueError("content must be a string: pass the complete new file content")
        if os.path.isdir(target):
            raise IsADirectoryError(f"{shown} is a directory; pass a file path")
        if isinstance(shown, str) and shown.endswith(("/", os.sep)):  # resolve() drops the slash
            raise IsADirectoryError(f"{shown} ends with a '/', so it names a folder; pass a file path")
        kind = special_file_kind(target)
        if kind is not None:  # os.replace would swap the pipe or device node for a plain file
            raise NotARegularFileError(f"{shown} is {kind}, not a regular file; write only replaces regular files")
        if signal is not None:
            signal.raise_if_aborted()
        data = content.encode("utf-8")
        with file_lock(target):
            atomic_write(target, data)
        return AgentToolResult(
            content=[TextContent(f"Successfully wrote {len(data)} bytes to {shown}")],
            details={"path": target, "bytes": len(data)},
        )

    return AgentTool(
        name="write",
        label="write",
        description=(
            "Write content to a file. Creates the file if it does not exist, overwrites it if it "
            "does, and creates parent folders."
        ),
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Path to the file (relative to the working directory)"},
                "content": {"type": "string", "description": "The complete content to write"},
            },
            "required": ["path", "content"],
        },
        execute=execute,
    )

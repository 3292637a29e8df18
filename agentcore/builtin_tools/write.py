"""The ``write`` tool: create or overwrite a file atomically.

Missing parent folders are created. The content (UTF-8) goes to a temp file in the same folder,
which then replaces the target with ``os.replace``: readers see the old file or the new one, never
half of it, and a failure leaves the old file untouched. An existing file keeps its permission
bits, and its owner and group as far as the process may set them (root always can); a new one
gets the usual ``0o666 & ~umask``. Writing through a symlink replaces the file it points to, not
the link. Fails (raises) for content holding a lone UTF-16 surrogate (``ValueError`` naming it:
UTF-8 cannot encode one), a path outside ``root``, a folder, a named pipe,
device or socket (which ``os.replace`` would swap for a plain file), an existing file this process
may not write (read-only), or a folder it may not create files in.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from typing import Any, Callable, Mapping, Optional

from ..tools import AgentTool, AgentToolResult
from ..types import TextContent
from ._args import utf8
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


def _writable(path: str) -> bool:
    if os.access in os.supports_effective_ids:
        return os.access(path, os.W_OK, effective_ids=True)
    return os.access(path, os.W_OK)


def _keep_owner(tmp: str, existing: os.stat_result) -> None:
    """Give the temp file the owner and group of the file it replaces, as far as allowed: root
    editing a user's file must not leave it owned by root; others can usually keep the group."""
    if not hasattr(os, "chown"):
        return
    for uid in (existing.st_uid, -1):
        try:
            os.chown(tmp, uid, existing.st_gid)
            return
        except OSError:
            continue


_TEMP_NAME_BYTES = 64  # of the target's name kept in the temp file's name


def _temp_prefix(target: str) -> str:
    """``.{name}.`` for the temp file beside ``target``, the name cut short: a name near the
    255-byte limit plus the temp file's own 15 bytes would not fit (``File name too long``)."""
    name = os.fsencode(os.path.basename(target))[:_TEMP_NAME_BYTES]
    return "." + os.fsdecode(name) + "."


def atomic_write(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically (temp file in the same folder, fsync, ``os.replace``).

    Raises ``NotADirectoryError`` when a file stands where a parent folder should be, ``OSError``
    naming the loop for a symbolic link that leads back to itself, and
    ``PermissionError`` for an existing file this process may not write (``os.replace``
    would otherwise swap a read-only file for a new one) and for a folder it may not create the
    temp file in; the file is then left as it was.
    """
    target = os.path.realpath(path)
    folder = os.path.dirname(target)
    try:
        os.makedirs(folder, exist_ok=True)
    except (FileExistsError, NotADirectoryError):  # "File exists: a" for a/b.txt would be a riddle
        blocker = folder
        while not os.path.lexists(blocker):
            blocker = os.path.dirname(blocker)
        raise NotADirectoryError(f"Cannot write {path}: {blocker} is a file, not a folder") from None
    try:
        existing: Optional[os.stat_result] = os.stat(target)
    except FileNotFoundError:
        existing = None
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise OSError(f"Cannot write {path}: it is a symbolic link loop, which leads to no file") from None
    mode = 0o666 & ~_umask() if existing is None else stat.S_IMODE(existing.st_mode)
    if existing is not None and not _writable(target):
        raise PermissionError(f"Permission denied: {path} is read-only (mode {mode:o}); it was not changed")
    try:
        fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(target), suffix=".tmp", dir=folder)
    except PermissionError:
        raise PermissionError(
            f"Permission denied: cannot create files in {folder}, so {path} cannot be written "
            "(the new content goes to a temporary file there first)"
        ) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if existing is not None:
            _keep_owner(tmp, existing)
        os.chmod(tmp, mode)  # after chown, which clears set-user-ID bits
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
        data = utf8(content, "content")
        with file_lock(target):
            if signal is not None:  # again: an abort may have come while another call held the lock
                signal.raise_if_aborted()
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

"""Resolving the paths a model passes to the file tools, optionally confined to a root folder.

A path is taken relative to the tool's working directory (``cwd``; the process's current directory
at call time when None). With ``root`` set, every path must resolve, after following symlinks, to
``root`` itself or something inside it; anything else (``..``, an absolute path elsewhere, a
symlink pointing out) raises :class:`PathOutsideRootError` before the tool touches the file system.

The check is made when the path is resolved; a symlink swapped in between the check and the use
is not detected (confinement protects against model mistakes, it is not an OS sandbox). The bash
tool runs in ``cwd`` but is never confined: a shell can reach anything the process can.
"""

from __future__ import annotations

import os
import stat
import threading
import weakref
from typing import IO, Optional

__all__ = [
    "NotARegularFileError",
    "PathOutsideRootError",
    "PathResolver",
    "file_lock",
    "open_regular_file",
    "require_file",
    "require_reachable",
    "shown_name",
    "special_file_kind",
]


class PathOutsideRootError(PermissionError):
    """A path resolves outside the tool's ``root`` folder."""


class PathResolver:
    """Turns model-supplied paths into absolute paths, enforcing ``root`` when given.

    ``cwd`` defaults to ``root`` when only ``root`` is given, and to the process's current
    directory (read at each call) when neither is given.
    """

    def __init__(self, cwd: Optional[str] = None, root: Optional[str] = None) -> None:
        # Relative paths given here are fixed now; only cwd=None follows the process's directory.
        self._cwd = None if cwd is None else os.path.abspath(os.path.expanduser(os.fspath(cwd)))
        self._root = None if root is None else os.path.abspath(os.path.expanduser(os.fspath(root)))

    @property
    def root(self) -> Optional[str]:
        """The confinement folder as an absolute, symlink-free path (None when unconfined)."""
        return None if self._root is None else os.path.realpath(self._root)

    def cwd(self) -> str:
        """The absolute working directory; raises if it lies outside ``root``."""
        base = self._cwd if self._cwd is not None else (self._root if self._root is not None else os.getcwd())
        base = os.path.abspath(os.path.expanduser(base))
        if self._root is not None:
            self._check_inside(base, base)
        return base

    def resolve(self, path: str) -> str:
        """The absolute, normalised path for ``path``; raises :class:`PathOutsideRootError`.

        ``~`` is expanded. Raises ``ValueError`` for an empty path and one holding a NUL character.
        """
        if not isinstance(path, str) or not path.strip():
            raise ValueError("path is empty: pass a file or folder path relative to the working directory")
        if "\0" in path:  # no file name can hold one: the tools said "File not found" or "embedded null byte"
            raise ValueError(f"path {path!r} contains a NUL character, which no file name can hold")
        joined = os.path.normpath(os.path.join(self.cwd(), os.path.expanduser(path)))
        if self._root is not None:
            self._check_inside(joined, path)
        return joined

    def is_inside(self, absolute: str) -> bool:
        """True when ``absolute`` (after following symlinks) is inside ``root`` or no root is set."""
        root = self.root
        if root is None:
            return True
        real = os.path.realpath(absolute)
        return real == root or os.path.commonpath([real, root]) == root

    def display(self, absolute: str) -> str:
        """``absolute`` relative to the working directory when inside it (``/`` separators), else
        as is; bytes of a name that are not UTF-8 shown as U+FFFD (see :func:`shown_name`)."""
        base = self.cwd()
        try:
            rel = os.path.relpath(absolute, base)
        except ValueError:  # another drive on Windows
            return shown_name(absolute)
        if rel == os.curdir:
            return "."
        if rel == os.pardir or rel.startswith(os.pardir + os.sep):
            return shown_name(absolute)
        return shown_name(rel.replace(os.sep, "/"))

    def _check_inside(self, absolute: str, shown: str) -> None:
        if self.is_inside(absolute):
            return
        root = self.root
        raise PathOutsideRootError(
            f'path "{shown}" is outside the allowed root {root} (it resolves to '
            f"{os.path.realpath(absolute)}); use a path inside {root}"
        )


def shown_name(name: str) -> str:
    """A file name as a model can be shown it: a byte that is not UTF-8 (which Python keeps as a
    lone surrogate, ``caf\\udce9.txt``) becomes U+FFFD, as ripgrep shows it. Providers drop lone
    surrogates, so the model would otherwise see ``caf.txt``: another file's name."""
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def require_reachable(target: str, shown: str) -> None:
    """Raise ``PermissionError`` when ``target`` cannot be looked at because a folder on its path
    may not be searched by this process (``os.path.exists`` would call it missing)."""
    try:
        os.stat(target)
    except PermissionError:
        raise PermissionError(
            f"Permission denied: cannot reach {shown} (a folder on its path is not searchable by this process)"
        ) from None
    except (OSError, ValueError):
        pass  # missing, a loop, a NUL in the name...: the callers' own checks name these


def require_file(target: str, shown: str, directory_hint: str) -> None:
    """Raise ``IsADirectoryError`` (``"{shown} is a directory{directory_hint}"``) for a folder,
    ``PermissionError`` when a folder on the path may not be searched, and ``FileNotFoundError``
    when nothing can be read at ``target``: ``"File not found: {shown}"``, or, for a symbolic link
    that leads nowhere (a loop, a missing target), a message saying so."""
    require_reachable(target, shown)
    if os.path.isdir(target):
        raise IsADirectoryError(f"{shown} is a directory{directory_hint}")
    if not os.path.exists(target):
        if os.path.islink(target):
            raise FileNotFoundError(f"{shown} is a symbolic link that leads nowhere (a loop or a missing target)")
        raise FileNotFoundError(f"File not found: {shown}")


class NotARegularFileError(ValueError):
    """A path names a named pipe, a device or a socket: reading it could block forever."""


def _kind(mode: int) -> Optional[str]:
    """What a non-regular, non-folder file is, from its ``st_mode``; None for a regular file or folder."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"


def special_file_kind(target: str) -> Optional[str]:
    """``"a named pipe (FIFO)"``, ``"a character device"``... for an existing special file (links
    followed); None for a regular file, a folder or nothing at all."""
    try:
        return _kind(os.stat(target).st_mode)
    except OSError:
        return None


def _refuse(kind: Optional[str], shown: str) -> None:
    if kind is not None:
        raise NotARegularFileError(
            f"{shown} is {kind}, not a regular file; the file tools only open regular files (use bash for it)"
        )


# Opening a FIFO for reading blocks until a writer appears (an abort cannot interrupt that);
# O_NONBLOCK makes the open return at once, so the check after it also closes the race with a
# FIFO swapped in after the stat. Windows has neither FIFOs nor the flag.
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


def open_regular_file(target: str, shown: str) -> IO[bytes]:
    """Open ``target`` for reading in binary mode; raise :class:`NotARegularFileError` (naming what
    it is) instead of opening a named pipe, a device or a socket."""
    _refuse(_kind(os.stat(target).st_mode), shown)  # before open(): opening a device can act on it
    fd = os.open(target, os.O_RDONLY | _NONBLOCK | getattr(os, "O_BINARY", 0))
    try:
        _refuse(_kind(os.fstat(fd).st_mode), shown)
        if _NONBLOCK:
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


_locks_guard = threading.Lock()
# weak values: a lock lives while a call holds or waits for it, so a long-lived process that
# writes many different files does not keep one lock per file it ever wrote
_locks: weakref.WeakValueDictionary[str, threading.Lock] = weakref.WeakValueDictionary()


def file_lock(absolute: str) -> threading.Lock:
    """A process-wide lock for one file, so parallel edit/write calls on it do not interleave.
    Every caller holding (or waiting for) the lock of a file gets the same one; it is forgotten
    once none does."""
    key = os.path.normcase(os.path.realpath(absolute))
    with _locks_guard:
        lock = _locks.get(key)
        if lock is None:
            lock = _locks[key] = threading.Lock()
        return lock

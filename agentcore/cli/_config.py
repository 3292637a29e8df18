"""The user's configuration directory of the ``agentcore`` command and its small JSON files.

The directory is ``$AGENTCORE_CONFIG_DIR``, else ``~/.agentcore`` (the sessions directory's
default parent). It holds ``keys.json`` (:mod:`agentcore.cli._keys`), ``aliases.json``
(:mod:`agentcore.cli._aliases`) and the ``logs-off`` marker (:mod:`agentcore.cli._logs`).

Files are replaced atomically: the new content goes to a temporary file created in the same
directory with its final permissions (``os.open(..., O_CREAT | O_EXCL, mode)``, so a key file is
never readable by others, not even for a moment), then ``os.replace`` puts it in place. A reader
therefore sees the old file or the new one, never half of one. A file that is a symbolic link (a
dotfiles manager's) is replaced at the link's target, so the link stays a link.

A change (``keys set``, ``aliases set``/``remove``) reads, changes and writes the file under an
exclusive lock (:func:`update_json_map`: ``flock`` on a ``.NAME.lock`` file beside it), so two
commands run at once both land: neither writes back a copy read before the other's change. The
lock is advisory and POSIX-only; readers take none (they see a whole file either way).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import stat
from typing import Callable, Dict, Iterator, Tuple

from ._setup import UsageError, remove_quietly

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no lock (changes are rare and made by hand)
    fcntl = None  # type: ignore[assignment]

__all__ = ["CONFIG_DIR_ENV", "config_dir", "config_path", "read_json_map", "write_json_map", "update_json_map"]

CONFIG_DIR_ENV = "AGENTCORE_CONFIG_DIR"


def config_dir() -> str:
    """``$AGENTCORE_CONFIG_DIR``, else ``~/.agentcore`` (not created here)."""
    return os.environ.get(CONFIG_DIR_ENV) or os.path.join(os.path.expanduser("~"), ".agentcore")


def config_path(name: str) -> str:
    """The path of the configuration file ``name`` in :func:`config_dir`."""
    return os.path.join(config_dir(), name)


def read_json_map(path: str) -> Dict[str, str]:
    """The ``{name: text}`` object stored at ``path``; ``{}`` when the file does not exist (nor
    can: a folder on its path is a file, as for ``HOME=/dev/null``).

    A file that is not such an object (edited by hand and broken) is a :class:`UsageError` naming
    the file, so that a bad keys or aliases file is never silently ignored or overwritten. A file
    that cannot be read (too many open files, an I/O error) is one too, naming the reason without
    the advice to fix or delete it: what it holds may be fine (the user's only copy of a key). A byte
    order mark before the JSON (Windows' Notepad saves one) is not part of it, as CRLF line ends
    are not.
    """
    try:
        with open(path, encoding="utf-8-sig") as handle:
            data = json.load(handle)
    except (FileNotFoundError, NotADirectoryError):  # NotADirectory: HOME=/dev/null, a daemon's
        return {}
    except OSError as exc:  # not about what it holds (too many open files, an I/O error): keep it
        raise UsageError(f"{path}: cannot read it ({_reason(exc)})") from None
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply to decode
        raise UsageError(f"{path}: cannot read it ({_reason(exc)}); fix or delete the file") from None
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise UsageError(f'{path}: expected a JSON object of strings ({{"name": "value"}}); fix or delete the file')
    return data


def write_json_map(path: str, data: Dict[str, str], *, mode: int = 0o644) -> None:
    """Replace ``path`` atomically with ``data`` as JSON; a new file has permissions ``mode``, an
    existing one keeps its own within ``mode`` (a ``chmod 600 aliases.json`` is not widened to
    ``0644``, a keys file made readable by others is narrowed to ``0600``; its owner may always
    read and write it).

    The directory is created (``0700``) when missing. A ``path`` that is a symbolic link is
    replaced at its target (the link stays). The temporary file is created with ``mode`` already
    (never wider), and its mode is set again explicitly so a restrictive umask cannot make it
    unreadable to its owner. Failure: :class:`UsageError` naming the path; the old file is kept.
    A read-change-write must hold the file's lock: :func:`update_json_map`.
    """
    target = os.path.realpath(path) if os.path.islink(path) else path
    directory = os.path.dirname(target) or "."
    mode = _kept_mode(target, mode)
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        fd, temp = _create_temp(directory, mode)
    except OSError as exc:
        raise UsageError(f"{path}: cannot write it ({_reason(exc)})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), mode)
            json.dump(data, handle, indent=2, sort_keys=True, ensure_ascii=False)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except OSError as exc:
        remove_quietly(temp)
        raise UsageError(f"{path}: cannot write it ({_reason(exc)})") from None
    except BaseException:
        remove_quietly(temp)
        raise


def _kept_mode(target: str, mode: int) -> int:
    """The permissions of the file replacing ``target``: ``mode`` for a new file, else the
    existing file's bits that ``mode`` allows, with the owner's read and write of ``mode``."""
    try:
        existing = stat.S_IMODE(os.stat(target).st_mode)
    except (OSError, ValueError):
        return mode
    return (existing & mode) | (mode & 0o600)


def update_json_map(path: str, change: Callable[[Dict[str, str]], None], *, mode: int = 0o644) -> Dict[str, str]:
    """Apply ``change`` to the map stored at ``path`` and write the result back, under the file's
    exclusive lock; returns the map written.

    ``change`` receives the current map (:func:`read_json_map`: ``{}`` without a file) and mutates
    it; when it raises, nothing is written and the exception propagates. Another process changing
    the same file waits for the lock (a blocking ``flock``; Ctrl-C interrupts the wait), then reads
    the file this one wrote. Failure to take the lock or write: :class:`UsageError` naming the path.
    """
    with _locked(path):
        data = read_json_map(path)
        change(data)
        write_json_map(path, data, mode=mode)
    return data


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    """Hold the exclusive lock of ``path``: a ``flock`` on ``.NAME.lock`` in its directory (a file
    of its own, since ``path`` itself is replaced by every write)."""
    if fcntl is None:  # pragma: no cover - Windows
        yield
        return
    directory, name = os.path.split(path)
    lock_path = os.path.join(directory, f".{name}.lock")
    try:
        os.makedirs(directory or ".", mode=0o700, exist_ok=True)
        fd = _open_lock_file(lock_path)
    except OSError as exc:
        raise UsageError(f"{path}: cannot lock it ({lock_path}: {_reason(exc)})") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as exc:  # a filesystem without locks
            raise UsageError(f"{path}: cannot lock it ({lock_path}: {_reason(exc)})") from None
        yield
    finally:
        os.close(fd)  # releases the lock


def _open_lock_file(lock_path: str) -> int:
    """The lock file opened for writing: created (``0600``, O_EXCL) or, when it exists, opened as
    it is (never through a planted symlink)."""
    flags = os.O_RDWR | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(100):
        try:
            return os.open(lock_path, flags | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        try:
            return os.open(lock_path, flags)
        except FileNotFoundError:  # removed in between: create it again
            continue
    raise FileExistsError(f"{lock_path} keeps appearing and disappearing")


def _create_temp(directory: str, mode: int) -> Tuple[int, str]:
    """A new file in ``directory`` opened for writing, created with ``mode`` (O_EXCL: never an
    existing file or a planted symlink)."""
    for _ in range(100):
        name = os.path.join(directory, f".tmp-{secrets.token_hex(8)}")
        try:
            return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), mode), name
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name in {directory}")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)

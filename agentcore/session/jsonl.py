"""JSONL session files: the reference format version 3, one file per session (spec session.md §3).

Line 1 is the header, every other line one entry. Opening a file:

* takes an exclusive advisory lock (``flock``) for as long as the storage is open, so a second writer
  (another process, or another open handle) gets :class:`SessionLockedError` naming the file; readers
  (``read_only=True``, repository listing) never lock. The lock is taken on the file that is at the
  path once locked: a file another writer replaced between our ``open`` and our lock (its migration
  rewrite) is opened again, so a writer never works on a file that is no longer the session;
* validates strictly: a bad header is ``invalid_session``; a malformed line before the last one is
  ``invalid_entry`` naming ``file:line``, and the file is left untouched;
* repairs a crash: if only the LAST line is not valid JSON and lacks its final newline (a torn
  append: each append is one write of a whole line including its ``\n``, and a JSON line holds no
  raw newline, so a torn tail never ends in one) the file is truncated to the complete lines before
  it; a valid last line without its newline gets one. A last line that ends in ``\n`` but is not
  valid JSON is damage, not a crash: ``invalid_entry`` naming ``file:line``, the file untouched
  (read-only opens alike);
* migrates versions 1 and 2 to 3 with an atomic rewrite (temp file, fsync, ``os.replace``, fsync of
  the directory); the original stays intact if anything fails. Read-only opens migrate in memory
  only; the ids a version-1 file's entries get are the same on every open and in the rewrite;
* refuses a header of a format version it does not read (a newer one, or the reference's
  version-4 layout) with ``invalid_session`` naming the file, the version and what to do.

Message payloads are indexed from their envelope at open; the line itself is not kept in memory but
read back from the file (by offset, on the descriptor opened at load, so a later rename does not
matter) and decoded on first read. ``verify=True`` parses every line at open instead, so a damaged
payload is reported then rather than when first read. A file cut short under an open session makes
the lost entries ``invalid_session`` when read; reads after :meth:`close` reopen the file by path.
Each append is one ``os.write`` of a whole line on an ``O_APPEND`` descriptor, and the line's offset
is read back from the descriptor afterwards (one ``lseek``), so lines another process appended in
between (the reference takes no lock) do not shift where this handle reads its own lines; a failed
write is rolled back by truncating the bytes it wrote, only while nothing follows them.
``fsync``: ``"never"`` (default, what the reference does), ``"always"`` (after every append) or
``"close"``.

Threads and processes: :meth:`~JsonlSessionStorage.close` waits for an append in flight on another
thread (the storage's ``_io_lock``), so a line is never written to a descriptor number that close
released and something else reused. A handle belongs to the process that opened it: in a forked
child appends are refused (``SessionError("storage")``: the parent holds the lock and writes the
session), reads work, and ``close()`` only closes the child's copies of the descriptors, which
releases nothing of the parent's (an ``flock`` goes with the parent's descriptor).

Logging (logger ``agentcore.session.jsonl``): DEBUG for each open and create (path, entry
count), WARNING when a torn last line was cut off (the entry it held is lost).
"""

from __future__ import annotations

import json
import logging
import os
import stat
import sys
import uuid
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

from . import process_state
from .entries import (
    CURRENT_VERSION,
    SessionEntry,
    SessionHeader,
    _UnsupportedVersionError,
    check_envelope,
    encode_line,
    header_from_dict,
    iso_from_ms,
    new_session_id,
)
from .errors import SessionError, SessionLockedError
from .migrate import migrate
from .storage import IndexNode, SessionStorage

try:  # pragma: no cover - platform dependent
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory locks, documented
    fcntl = None  # type: ignore[assignment]

__all__ = ["JsonlSessionStorage", "FSYNC_POLICIES", "read_header", "fsync_directory"]

FSYNC_POLICIES = ("never", "always", "close")
_GAP = 1 << 16  # lines closer than this are read back with one pread ...
_RUN = 1 << 20  # ... of at most about this many bytes (larger blocks cost page faults, not speed)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_BINARY = getattr(os, "O_BINARY", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_OPEN_TRIES = 5  # opens of a writable file that another writer keeps replacing before we lock it


def fsync_directory(directory: str) -> None:
    """fsync a directory so a rename inside it is durable (no-op where unsupported)."""
    if sys.platform.startswith("win"):  # pragma: no cover
        return
    try:
        fd = os.open(directory or ".", os.O_RDONLY)
    except OSError:  # pragma: no cover
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some filesystems refuse directory fsync
        pass
    finally:
        os.close(fd)


def _lock(fd: int, path: str) -> None:
    if fcntl is None:  # pragma: no cover
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        raise SessionLockedError(
            f"{path} is already open for writing (by another process, or another Session in this one); "
            "close it there first, or open it with read_only=True to read it",
            path=path,
        ) from None


def _same_file(fd: int, path: str) -> bool:
    """Whether ``fd`` is the file now at ``path`` (False when nothing is there); a status that
    cannot be read is taken as yes (the write reports what is wrong)."""
    try:
        status = os.fstat(fd)
        at_path = os.stat(path)
    except FileNotFoundError:
        return False
    except OSError:  # pragma: no cover - fstat of an open descriptor, stat of a path just opened
        return True
    return (status.st_dev, status.st_ino) == (at_path.st_dev, at_path.st_ino)


def _loads_shallow(line: bytes) -> Any:
    """``json.loads(line)``, a line nested too deeply to decode (RecursionError) being a ValueError
    like any other line that is not JSON (a torn one is repaired, a whole one reported)."""
    try:
        return json.loads(line)
    except RecursionError:
        raise ValueError("JSON nested too deeply to read") from None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_all(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    first = os.pread(fd, size, 0) if size else b""
    if len(first) == size:  # one read, no joining copy (the usual case for a regular file)
        return first
    chunks = [first]
    offset = len(first)
    while offset < size:
        chunk = os.pread(fd, min(size - offset, 1 << 24), offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _read_span(fd: int, at: int, size: int) -> bytes:
    chunks = []
    while size > 0:
        chunk = os.pread(fd, min(size, 1 << 24), at)
        if not chunk:
            break
        chunks.append(chunk)
        at += len(chunk)
        size -= len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _set_mode(fd: int, path: str, mode: int) -> None:
    """Give the file open as ``fd`` the permission bits ``mode``."""
    if hasattr(os, "fchmod"):
        os.fchmod(fd, mode)
    else:  # pragma: no cover - Windows before 3.13
        os.chmod(path, mode)


def read_header(path: str) -> Dict[str, Any]:
    """The parsed first line of a session file, without locking or reading further.

    Raises ``invalid_session`` if the first line is not a session header or ``path`` is no regular
    file (a named pipe there would block the caller forever), ``not_found`` if missing, ``storage``
    (the ``OSError`` as its cause) when it cannot be read (too many open files, a permission).
    """
    try:
        fd = os.open(path, os.O_RDONLY | _O_NONBLOCK | _O_CLOEXEC | _O_BINARY)
    except FileNotFoundError:
        raise SessionError("not_found", f"{path}: no such session file", path=path) from None
    except OSError as exc:
        raise SessionError("storage", f"{path}: cannot read the session file ({exc.strerror})", path=path) from exc
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SessionError("invalid_session", f"{path}: not a regular file, not a session", path=path)
        try:
            first = handle.readline()
            while first and not first.strip():
                first = handle.readline()
        except OSError as exc:  # pragma: no cover - EIO
            raise SessionError("storage", f"{path}: cannot read the session file ({exc.strerror})", path=path) from exc
    try:
        data = json.loads(first)
        header_from_dict(data, versions=(1, 2, 3))
    except _UnsupportedVersionError as exc:
        raise SessionError("invalid_session", f"{path}:1: {exc}", path=path) from None
    except (ValueError, RecursionError) as exc:  # RecursionError: a first line nested ~1000 deep
        reason = "JSON nested too deeply to read" if isinstance(exc, RecursionError) else exc
        raise SessionError("invalid_session", f"{path}:1: not a session file: {reason}", path=path) from None
    return data


def _warn_torn(path: str, outcome: str, dropped: int, line: int, kept: int) -> None:
    """The WARNING of a torn last line (an interrupted write) that was dropped: ``outcome`` says how."""
    _log.warning(
        "%s: the last line was torn (an interrupted write) and was %s: "
        "%d bytes of line %d dropped, the %d entries before it are intact",
        path,
        outcome,
        dropped,
        line,
        kept,
    )


class JsonlSessionStorage(SessionStorage):
    """One session in one JSONL file. Open with ``JsonlSessionStorage(path)``, make one with :meth:`create`."""

    path: str  # always a file here (the base class allows None: storage without a file)

    def __init__(self, path: Any, *, read_only: bool = False, fsync: str = "never", verify: bool = False) -> None:
        super().__init__()
        if fsync not in FSYNC_POLICIES:
            raise ValueError(f"fsync must be one of {', '.join(FSYNC_POLICIES)}, got {fsync!r}")
        self.path = os.path.abspath(os.fspath(path))
        self.read_only = read_only
        self.fsync = fsync
        self._fd: Optional[int] = None
        self._rfd: Optional[int] = None  # read-only handles keep the file open to read entries back
        self._size = 0
        self._lines = 0
        try:
            self._open(verify)
        except BaseException:
            self._release()
            raise
        _log.debug("opened session file %s entries=%d read_only=%s", self.path, len(self), read_only)

    # ------------------------------------------------------------------ creation

    @classmethod
    def create(
        cls,
        path: Any,
        *,
        cwd: Optional[str] = None,
        session_id: Optional[str] = None,
        fsync: str = "never",
        parent_session: Optional[str] = None,
        metadata: Optional[Dict[str, Any]] = None,
        timestamp: Optional[str] = None,
        lines: Iterable[bytes] = (),
    ) -> JsonlSessionStorage:
        """Write a new session file (header, then optional raw entry ``lines``) atomically and open it.

        An existing file at ``path`` is ``already_exists``; nothing is overwritten. The file gets
        the umask's permission bits. ``lines`` that do not make a valid session (a line that is not
        an entry, a duplicate id, a leaf move to a missing entry) raise the ``invalid_entry`` or
        ``invalid_session`` an open would, naming the line, and no file is left at ``path``.
        """
        return cls._create(
            path,
            cwd=cwd,
            session_id=session_id,
            fsync=fsync,
            parent_session=parent_session,
            metadata=metadata,
            timestamp=timestamp,
            lines=lines,
            mode=None,
        )

    @classmethod
    def _create(
        cls,
        path: Any,
        *,
        cwd: Optional[str],
        session_id: Optional[str],
        fsync: str,
        parent_session: Optional[str],
        metadata: Optional[Dict[str, Any]],
        timestamp: Optional[str],
        lines: Iterable[bytes],
        mode: Optional[int],
    ) -> JsonlSessionStorage:
        """:meth:`create`, the new file having the permission bits ``mode`` (None: the umask's) from
        the moment it is at ``path`` (a copy of a private session is never readable by others)."""
        import time

        path = os.path.abspath(os.fspath(path))
        header = SessionHeader(
            id=session_id or new_session_id(),
            timestamp=timestamp or iso_from_ms(int(time.time() * 1000)),
            cwd=os.path.abspath(cwd) if cwd is not None else os.getcwd(),
            parent_session=parent_session,
            metadata=metadata,
        )
        body = [encode_line(header.to_dict())]
        body.extend(line if line.endswith(b"\n") else line + b"\n" for line in lines)
        _publish(path, b"".join(body), mode)
        _log.debug("created session file %s id=%s", path, header.id)
        try:
            storage = cls(path, fsync=fsync)
        except SessionError as exc:
            if exc.code not in ("invalid_entry", "invalid_session"):
                raise  # not about what we wrote (a writer that locked it meanwhile): the file stays
            try:
                os.unlink(path)  # the lines do not make a session: leave no file that cannot open
            except OSError:  # pragma: no cover - the directory became read-only meanwhile
                raise exc from None
            raise SessionError(
                exc.code,
                f"{path}: not created: the entry lines given do not make a valid session (line 1 "
                f"would be the header, lines[0] line 2): {exc}; no file was left",
                path=path,
                line=exc.line,
            ) from None
        return storage

    # ------------------------------------------------------------------ opening

    def _open(self, verify: bool) -> None:
        if self.read_only:
            try:
                # O_NONBLOCK: a named pipe at the path would block the open until a writer came
                self._rfd = os.open(self.path, os.O_RDONLY | _O_NONBLOCK | _O_CLOEXEC | _O_BINARY)
                self._check_regular(self._rfd)
                data = _read_all(self._rfd)
            except FileNotFoundError:
                raise SessionError("not_found", f"{self.path}: no such session file", path=self.path) from None
            except OSError as exc:
                raise SessionError("storage", f"{self.path}: cannot read: {exc.strerror}", path=self.path) from exc
        else:
            self._open_locked()
            assert self._fd is not None
            data = _read_all(self._fd)
        with process_state.gc_paused():  # the index is ~100 bytes of long-lived objects per entry, no cycles
            self._load(data, verify)

    def _open_locked(self) -> None:
        """Open the file for appending (``self._fd``) and lock it, then make sure the locked file is
        still the one at the path: another writer's migration rewrite (``os.replace``) between our
        ``open`` and our lock leaves us holding the old, unlinked file, which nobody else locks any
        more; writing to it, or migrating it again over the path, would lose what that writer
        appended. Such a file is closed and the path opened again (at most ``_OPEN_TRIES`` times).
        """
        for _ in range(_OPEN_TRIES):
            try:
                self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | _O_CLOEXEC | _O_BINARY)
            except FileNotFoundError:
                raise SessionError(
                    "not_found", f"{self.path}: no such session file; create it with Session.create()", path=self.path
                ) from None
            except OSError as exc:
                raise SessionError(
                    "storage",
                    f"{self.path}: cannot open for writing ({exc.strerror}); "
                    "check permissions or open with read_only=True",
                    path=self.path,
                ) from exc
            self._check_regular(self._fd)
            _lock(self._fd, self.path)
            if _same_file(self._fd, self.path):
                return
            fd, self._fd = self._fd, None
            os.close(fd)  # replaced meanwhile: open what is at the path now
        raise SessionLockedError(
            f"{self.path} was replaced by another file each time it was opened (another writer is "
            "rewriting it); try again once that writer is done",
            path=self.path,
        )

    def _check_regular(self, fd: int) -> None:
        """``invalid_session`` unless ``fd`` is a regular file (a named pipe, a device or a
        directory at the path is not a session, and reading one could block or never end)."""
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise self._fail("invalid_session", None, "not a regular file, not a session")

    def _fail(self, code: str, line: Optional[int], problem: str) -> SessionError:
        where = f"{self.path}:{line}" if line else self.path
        return SessionError(code, f"{where}: {problem}", path=self.path, line=line)

    def _load(self, data: bytes, verify: bool) -> None:
        lines = data.split(b"\n")
        first = next((i for i, line in enumerate(lines) if line.strip()), None)
        if first is None:
            raise self._fail(
                "invalid_session", None, "empty file, not a session (no header line); delete it or create a new session"
            )
        try:
            header_data = json.loads(lines[first])
            header = header_from_dict(header_data, versions=(1, 2, 3))
        except RecursionError:
            raise self._fail("invalid_session", first + 1, "not a session file: JSON nested too deeply") from None
        except _UnsupportedVersionError as exc:
            raise self._fail("invalid_session", first + 1, str(exc)) from None
        except ValueError as exc:
            raise self._fail("invalid_session", first + 1, f"not a session file: {exc}") from None
        last = next(i for i in range(len(lines) - 1, first - 1, -1) if lines[i].strip())
        torn = False
        if last > first:
            try:
                tail = _loads_shallow(lines[last])
            except ValueError as exc:
                if last < len(lines) - 1:  # the line ends in "\n": a whole line, so damage, not a crash
                    raise self._fail(
                        "invalid_entry",
                        last + 1,
                        f"not JSON ({exc}); the line is complete (it ends in a newline), so it is damage, not "
                        "an interrupted write: the file is left unchanged, repair or remove that line",
                    ) from None
                torn = True  # a crash cut the final append short; everything before it is intact
            else:
                problem = (
                    check_envelope(tail)
                    if header.version >= CURRENT_VERSION
                    else (
                        None
                        if isinstance(tail, dict) and isinstance(tail.get("type"), str)
                        else "an entry must be an object with a string 'type'"
                    )
                )
                if problem:
                    raise self._fail(
                        "invalid_entry",
                        last + 1,
                        f"invalid entry: {problem}; the file is left unchanged, repair or remove that line",
                    )
        end = last if torn else last + 1
        if header.version < CURRENT_VERSION:
            self._load_migrating(header_data, lines, first, end)
            if torn and not self.read_only:  # the rewrite left the torn line out: say so, as _repair does
                _warn_torn(
                    self.path,
                    f"left out when the file was rewritten in version {CURRENT_VERSION}",
                    len(lines[last]),
                    last + 1,
                    len(self),
                )
        else:
            self.header = header
            at = sum(len(line) + 1 for line in lines[: first + 1])
            self._index_lines(lines, first + 1, end, at)  # entries are read back from the file when needed
            self._finish_load()
            if verify:
                for node in self._order:
                    if node.entry is None:
                        self._decode(node, lines[node.line - 1].rstrip(b"\r"))  # type: ignore[operator]
            self._lines = end
            if not self.read_only:
                self._repair(data, lines, last, torn)
        del lines
        self._size = os.fstat(self._fd).st_size if self._fd is not None else len(data)

    def _repair(self, data: bytes, lines: List[bytes], last: int, torn: bool) -> None:
        assert self._fd is not None
        try:
            if torn:
                keep = sum(len(line) + 1 for line in lines[:last])
                os.ftruncate(self._fd, keep)
                _warn_torn(self.path, "removed", len(data) - keep, last + 1, len(self))
            elif not data.endswith(b"\n"):
                _write_all(self._fd, b"\n")
            else:
                return
            if self.fsync != "never":
                os.fsync(self._fd)
        except OSError as exc:
            raise self._fail(
                "storage", None, f"cannot repair the end of the file ({exc.strerror}); the file was not changed"
            ) from exc

    def _load_migrating(self, header_data: Dict[str, Any], lines: List[bytes], first: int, end: int) -> None:
        entries = []
        numbers = []
        for index in range(first + 1, end):
            if not lines[index].strip():
                continue
            try:
                entry = json.loads(lines[index])
            except (ValueError, RecursionError) as exc:  # RecursionError: nested ~1000 levels deep
                reason = "nested too deeply to read" if isinstance(exc, RecursionError) else str(exc)
                raise self._fail(
                    "invalid_entry",
                    index + 1,
                    f"not JSON ({reason}); the file is left unchanged, repair or remove that line",
                ) from None
            if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
                raise self._fail(
                    "invalid_entry",
                    index + 1,
                    "an entry must be an object with a string 'type'; the file is left unchanged",
                )
            entries.append(entry)
            numbers.append(index + 1)
        new_header, new_entries, _ = migrate(header_data, entries)
        encoded = []
        for entry, number in zip(new_entries, numbers):
            try:
                encoded.append(encode_line(entry))
            except (ValueError, RecursionError, SessionError) as exc:  # 1e999 reads as inf: not JSON
                problem = "nested too deeply to store" if isinstance(exc, RecursionError) else str(exc)
                raise self._fail(
                    "invalid_entry", number, f"cannot migrate it ({problem}); the file is left unchanged"
                ) from None
        self.header = header_from_dict(new_header)
        for line, number in zip(encoded, numbers):
            self._index_line(line[:-1], number)
        self._finish_load()
        self._lines = len(encoded) + 1
        if not self.read_only:
            self._rewrite(encode_line(new_header) + b"".join(encoded))
            # errors found from now on name the line of the rewritten file (header, then one entry per line)
            for number, node in enumerate(self._order, 2):
                node.line = number

    def _rewrite(self, content: bytes) -> None:
        """Replace the file atomically with ``content``, keeping the lock (the temp file is locked
        first). A symlinked session stays a link (its target is rewritten) and the file keeps its
        permission bits (a private 0600 file stays private); the temp file is a new one of a name
        of its own (``O_EXCL``: never a file or link someone put there)."""
        target = os.path.realpath(self.path)
        temp = f"{target}.{uuid.uuid4().hex[:12]}.tmp"
        fd = -1
        try:
            mode = stat.S_IMODE(os.stat(target).st_mode)
            fd = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND | _O_CLOEXEC | _O_BINARY, mode & 0o777)
            _set_mode(fd, temp, mode)  # exactly the original's, whatever the umask took away
            _lock(fd, temp)
            _write_all(fd, content)
            os.fsync(fd)
            os.replace(temp, target)
        except BaseException as exc:
            if fd >= 0:
                os.close(fd)
            try:
                os.unlink(temp)
            except OSError:
                pass
            if isinstance(exc, OSError):
                raise self._fail(
                    "storage",
                    None,
                    f"cannot rewrite the file in version {CURRENT_VERSION} ({exc.strerror}); the original is unchanged",
                ) from exc
            raise
        fsync_directory(os.path.dirname(target))
        old, self._fd = self._fd, fd
        if old is not None:
            os.close(old)

    # ------------------------------------------------------------------ writing

    def _write(self, line: bytes, entry: SessionEntry) -> None:
        """Append ``line`` at the real end of the file and record where it landed.

        Another process may append to the file between our appends (the reference runtime takes no
        lock), so the line's offset is taken from the descriptor after the ``O_APPEND`` write (one
        ``lseek``), not from the size this handle last saw; lines written by others in between are
        counted so that line numbers in later messages stay right. A failed write or fsync removes
        only the bytes this append wrote, and only while they are still the end of the file: a line
        another writer put after them is never truncated away (the partial line then stays, and
        the next open reports it as ``invalid_entry``). Raises ``SessionError("storage")``.

        Runs under ``_io_lock`` (held by :meth:`append`), as :meth:`close` does: the descriptor read
        here stays open until the line is written.
        """
        fd = self._fd
        if fd is None:
            raise self._fail("storage", None, "the session is closed")
        self._check_owner("the file's lock")
        self._check_still_the_file(fd)
        start = -1
        try:
            written = os.write(fd, line)
            end = os.lseek(fd, 0, os.SEEK_CUR)  # O_APPEND wrote at the real end: ours ends here
            start = end - written
            if written < len(line):  # a short write (a full disk, a signal): write the rest
                _write_all(fd, line[written:])
                end = os.lseek(fd, 0, os.SEEK_CUR)
            if self.fsync == "always":
                os.fsync(fd)
        except OSError as exc:
            if start >= 0:
                self._undo(fd, start)
            raise self._fail("storage", None, f"append failed ({exc.strerror}); the entry was not recorded") from exc
        if start != self._size:  # another writer appended (or truncated) since our last line
            self._lines += self._foreign_lines(fd, start)
        self._size = end
        self._lines += 1

    def _check_still_the_file(self, fd: int) -> None:
        """Refuse to append when the open file is no longer the session at :attr:`path`: deleted
        (appends would go to a file nobody can open again: the whole conversation lost without a
        word), replaced by another file at that path, or cut short by another program (appends
        would follow a missing header). Raises ``SessionError("storage")``; an unreadable status
        is left for the write itself to report."""
        try:
            status = os.fstat(fd)
            try:
                at_path: Optional[os.stat_result] = os.stat(self.path)
            except FileNotFoundError:
                at_path = None
        except OSError:
            return
        if at_path is not None and (at_path.st_dev, at_path.st_ino) != (status.st_dev, status.st_ino):
            problem = "was replaced by another file"
        elif status.st_nlink == 0 or at_path is None:
            problem = "was deleted"
        elif status.st_size < self._size:
            problem = f"was cut short by another program ({status.st_size} bytes of the {self._size} written)"
        else:
            return
        raise self._fail(
            "storage",
            None,
            f"the file {problem} while the session was open; the entry was not recorded (the agent "
            "keeps its messages in memory: record them into a new session)",
        )

    def _undo(self, fd: int, start: int) -> None:
        """Cut a failed append's bytes (from ``start``) if nothing was appended after them."""
        try:
            if os.fstat(fd).st_size == os.lseek(fd, 0, os.SEEK_CUR):
                os.ftruncate(fd, start)  # never leave half a line that later appends would follow
        except OSError:
            pass

    def _foreign_lines(self, fd: int, start: int) -> int:
        """How many lines another writer added between our previous line and ``start``."""
        if start < self._size:
            return 0  # the file was cut short meanwhile; reads of lost lines report it
        try:
            return _read_span(fd, self._size, start - self._size).count(b"\n")
        except OSError:  # pragma: no cover - only line numbers in messages depend on it
            return 0

    def append(self, entry: SessionEntry) -> None:
        with self._io_lock:
            super().append(entry)
            node = self._order[-1]
            node.line = self._lines
            if node.raw is not None and self._fd is not None:  # read back from the file like loaded lines
                node.size = len(node.raw)
                node.at = self._size - node.size - 1  # _write set _size to the real end of this line
                node.raw = None

    # ------------------------------------------------------------------ reading back

    def _reader(self) -> Tuple[int, bool]:
        """A descriptor to read entry lines from (reopening the file by path once closed)."""
        fd = self._fd if self._fd is not None else self._rfd
        if fd is not None:
            return fd, False
        try:
            return os.open(self.path, os.O_RDONLY | _O_CLOEXEC | _O_BINARY), True
        except OSError as exc:
            raise self._fail(
                "storage", None, f"the session is closed and its file cannot be read again ({exc.strerror}); reopen it"
            ) from exc

    def _fetch_raw(self, node: IndexNode) -> Union[bytes, str]:
        return self._fetch_raws([node])[0]

    def _fetch_raws(self, nodes: List[IndexNode]) -> List[Union[bytes, str]]:
        """Lines of entries not held in memory, read with one ``pread`` per run of nearby lines."""
        ats = [node.at for node in nodes]
        if None in ats:
            missing = nodes[ats.index(None)]
            raise self._fail("storage", missing.line, f"entry {missing.id} has no stored line")
        order = list(range(len(nodes)))
        if any(a > b for a, b in zip(ats, ats[1:])):  # type: ignore[operator]  # a branch read root first is sorted
            order.sort(key=ats.__getitem__)  # type: ignore[arg-type]  # no None: checked above
        out: List[Any] = [None] * len(nodes)
        with self._io_lock:  # close() on another thread must not close (and free) the descriptor read here
            fd, temporary = self._reader()
            try:
                run: List[int] = []
                first = end = 0
                for index in order:
                    at: int = ats[index]  # type: ignore[assignment]
                    if run and (at > end + _GAP or at + nodes[index].size - first > _RUN):
                        self._read_run(fd, [nodes[i] for i in run], run, out)
                        run = []
                    if not run:
                        first = at
                    run.append(index)
                    end = max(end, at + nodes[index].size) if len(run) > 1 else at + nodes[index].size
                if run:
                    self._read_run(fd, [nodes[i] for i in run], run, out)
            except OSError as exc:
                raise self._fail("storage", None, f"cannot read the session file ({exc.strerror})") from exc
            finally:
                if temporary:
                    os.close(fd)
        return out

    def _read_run(self, fd: int, run: List[IndexNode], slots: List[int], out: List[Any]) -> None:
        start = run[0].at
        assert start is not None
        end = max(node.at + node.size for node in run)  # type: ignore[operator]
        block = _read_span(fd, start, end - start)
        if len(block) != end - start:
            node = next(n for n in run if n.at + n.size > start + len(block))  # type: ignore[operator]
            raise self._fail(
                "invalid_session",
                node.line,
                f"entry {node.id} is no longer in the file (it was truncated or replaced); reopen the session",
            )
        for node, slot in zip(run, slots):
            offset = node.at - start  # type: ignore[operator]
            out[slot] = block[offset : offset + node.size]

    # ------------------------------------------------------------------ closing

    def _release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the descriptor releases the flock
        if self._rfd is not None:
            fd, self._rfd = self._rfd, None
            os.close(fd)

    def close(self) -> None:
        """fsync (policy ``"close"``/``"always"``), release the lock and close the file. Idempotent.

        Waits for an append in flight on another thread. In a forked child only the child's copies
        of the descriptors are closed: the parent keeps its lock.
        """
        with self._io_exclusion():
            fd = self._fd
            if fd is not None and self.fsync in ("close", "always") and self._pid == os.getpid():
                try:
                    os.fsync(fd)
                except OSError:  # pragma: no cover
                    pass
            self._release()
            super().close()

    def __del__(self) -> None:  # pragma: no cover - best effort for forgotten handles
        try:
            self._release()
        except Exception:
            pass


_log = logging.getLogger(__name__)


def publish_new(path: str, content: bytes) -> None:
    """Create ``path`` with ``content`` atomically; ``already_exists`` if it exists. No temp file remains."""
    _publish(path, content, None)


def _publish(path: str, content: bytes, mode: Optional[int]) -> None:
    """:func:`publish_new`, the file having the permission bits ``mode`` (None: the umask's).

    The content is written to a temp file of a name of its own (``O_EXCL``: never a file or link
    someone put there, nor another thread's temp file) that gets ``mode`` before it is linked to
    ``path``, so the file is never laxer than ``mode`` at ``path``."""
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        raise SessionError("not_found", f"{directory}: no such directory for the session file", path=path)
    temp = f"{path}.{uuid.uuid4().hex[:12]}.tmp"
    fd = -1
    try:
        fd = os.open(
            temp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_CLOEXEC | _O_BINARY,
            0o666 if mode is None else 0o600,  # the owner only, until the bits are set
        )
        if mode is not None:
            try:
                _set_mode(fd, temp, mode)  # exactly these, whatever the umask took away
            except OSError:  # a filesystem without permission bits (FAT): it stays owner-only
                pass
        _write_all(fd, content)
        os.fsync(fd)
        written, fd = fd, -1
        os.close(written)
        try:
            os.link(temp, path)  # fails if path exists: never overwrite a session
        except FileExistsError:
            raise SessionError(
                "already_exists",
                f"{path} already exists; open it with Session.open() or choose another path",
                path=path,
            ) from None
        except OSError:  # pragma: no cover - filesystems without hard links
            if os.path.exists(path):
                raise SessionError("already_exists", f"{path} already exists", path=path) from None
            os.replace(temp, path)
    except OSError as exc:
        raise SessionError("storage", f"{path}: cannot create the session file ({exc.strerror})", path=path) from exc
    finally:
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(temp)
        except OSError:
            pass
    fsync_directory(directory)

"""A directory of JSONL sessions, laid out like the reference (spec session.md §9.3, §9.5).

``<root>/--<cwd with / \\ : replaced by ->--/<created, : and . replaced by ->_<id>.jsonl``. Two cwds can
encode to the same directory name (``/a/b-c`` and ``/a-b/c``); listing by cwd therefore also checks
the header's ``cwd``. A cwd whose directory name would pass the file-name limit (255 bytes) is cut
short and ends in a hash of the whole cwd instead (``--<start of the name>-<16 hex digits>--``).
Listing reads only each file's bytes (no JSON parse of messages, no lock), so it is cheap and safe
while other processes write: a last line still being written (no newline yet, not JSON yet) is
left out, as opening the session would.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import stat
import threading
import time
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Iterator, List, Optional, Set, Tuple, Union

from .entries import LabelEntry, LeafEntry, encode_line, iso_from_ms, new_entry_id, new_session_id, timestamp_order
from .errors import SessionError, SessionLockedError
from .jsonl import _O_CLOEXEC, _O_NONBLOCK, _OPEN_TRIES, JsonlSessionStorage, _lock, _same_file, read_header
from .session import Session
from .storage import _ENVELOPE, clean_name

try:  # pragma: no cover - platform dependent
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory locks
    fcntl = None  # type: ignore[assignment]

__all__ = ["SessionRepository", "SessionInfo"]

_ID_PATTERN = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")
_TYPED_LINE = b'}\n{"type":"'  # how every line our writer (and the reference) produces ends, and the next starts
_MESSAGE_LINE = b'\n{"type":"message"'  # the closing quote: the type is exactly "message"
_INFO_LINE = b'\n{"type":"session_info"'


@dataclass(frozen=True)
class SessionInfo:
    """What :meth:`SessionRepository.list` knows about a session without opening it."""

    id: str
    path: str
    cwd: str
    created: str
    name: Optional[str]
    message_count: int
    parent_session: Optional[str]
    modified: float


_NAME_MAX = 255  # bytes in one file name (ext4, APFS, NTFS...)


def encode_cwd(cwd: str) -> str:
    """The directory name of a cwd: ``/home/u/proj`` -> ``--home-u-proj--``.

    A name longer than a file name may be (255 bytes) keeps its start and ends in 16 hex digits of
    the SHA-256 of the cwd, so a deep cwd still gets a directory of its own."""
    stripped = re.sub(r"^[/\\]", "", cwd)
    encoded = re.sub(r"[/\\:]", "-", stripped)
    name = "--" + encoded + "--"
    if len(os.fsencode(name)) <= _NAME_MAX:
        return name
    digest = hashlib.sha256(os.fsencode(cwd)).hexdigest()[:16]
    room = _NAME_MAX - len(f"---{digest}--")
    head = encoded[:room]
    while len(os.fsencode(head)) > room:  # multi-byte characters: whole ones only
        head = head[:-1]
    return f"--{head}-{digest}--"


def _loads(line: bytes) -> Any:
    """The JSON value of ``line``; ValueError also for nesting too deep to parse."""
    try:
        return json.loads(line)
    except RecursionError:
        raise ValueError("JSON nested too deeply to read") from None


def _complete(data: bytes) -> bytes:
    """``data`` without a last line that another writer has not finished: no newline yet and not
    JSON yet (what opening the session drops as a torn append)."""
    if data.endswith(b"\n"):
        return data
    cut = data.rfind(b"\n") + 1
    if not data[cut:].strip():
        return data
    try:
        _loads(data[cut:])
    except ValueError:
        return data[:cut]
    return data


#: Failures of the process or the system, not of a file: a listing that skipped the files they hit
#: would leave sessions out without a word (``--continue`` resuming an older one, or none).
_EXHAUSTED = frozenset((errno.EMFILE, errno.ENFILE, errno.ENOMEM))


def _names(directory: str) -> List[str]:
    """The names in ``directory`` that do not start with ``.`` (what a glob's ``*`` matches); none
    when it is missing or no directory. Unlike a glob, which takes any failure for "no files",
    ``SessionError("storage")`` when this process cannot open the directory now."""
    try:
        return [name for name in os.listdir(directory) if not name.startswith(".")]
    except OSError as exc:
        if exc.errno in _EXHAUSTED:
            raise SessionError(
                "storage", f"{directory}: cannot list its sessions ({exc.strerror}); nothing was listed"
            ) from exc
        return []


def _info(path: str) -> Optional[SessionInfo]:
    """What :meth:`SessionRepository.list` shows of ``path``; None for a file that is no session
    (or went away). ``SessionError("storage")`` when this process cannot open files now."""
    try:
        header = read_header(path)
        with open(path, "rb") as handle:
            data = _complete(handle.read())
        modified = os.stat(path).st_mtime
    except (SessionError, OSError) as exc:
        cause = exc if isinstance(exc, OSError) else exc.__cause__
        if isinstance(cause, OSError) and cause.errno in _EXHAUSTED:
            raise SessionError(
                "storage", f"{path}: cannot read the session file ({cause.strerror}); nothing was listed", path=path
            ) from cause
        return None
    starts = data.count(b"\n") - data.endswith(b"\n")  # lines after the first
    # every line compact with "type" first, and whole: each ends in "}" (a line cut short and
    # followed by others is damage, not a message, and takes the line-by-line count)
    if data.count(_TYPED_LINE) == starts and data.endswith((b"}\n", b"}")):
        messages, name = data.count(_MESSAGE_LINE), _last_name(data)
    else:
        messages, name = _scan(data)
    return SessionInfo(
        id=header["id"],
        path=path,
        cwd=header["cwd"],
        created=header["timestamp"],
        name=name,
        message_count=messages,
        parent_session=header.get("parentSession"),
        modified=modified,
    )


def _last_name(data: bytes) -> Optional[str]:
    """The session name of the last ``session_info`` line of a file whose lines all start ``{"type":"``."""
    at = data.rfind(_INFO_LINE)
    if at < 0:
        return None
    end = data.find(b"\n", at + 1)
    try:
        return clean_name(_loads(data[at + 1 : end if end >= 0 else None]).get("name"))
    except ValueError:
        return None


def _scan(data: bytes) -> Tuple[int, Optional[str]]:
    """Message count and session name of any file, line by line: a message line whose envelope
    opening the session reads without a parse (compact, envelope keys first, ending in ``}``) is
    counted by its bytes, other lines (another writer's key order or spacing) are parsed. A line
    that is not a JSON object counts for nothing (listing never fails on a damaged file)."""
    messages = 0
    name: Optional[str] = None
    for line in data.split(b"\n"):
        line = line.rstrip(b"\r")
        if line.startswith(b'{"type":"'):
            if line.startswith(b'{"type":"message"'):
                if line.endswith(b"}") and _ENVELOPE.match(line) is not None:
                    messages += 1
                    continue
            elif not line.startswith(b'{"type":"session_info"'):
                continue
        elif not line.strip():
            continue
        try:
            entry = _loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict):
            continue
        if entry.get("type") == "message":
            messages += 1
        elif entry.get("type") == "session_info":
            name = clean_name(entry.get("name"))
    return messages, name


class SessionRepository:
    """Sessions stored as JSONL files under ``directory`` (created if missing)."""

    def __init__(self, directory: Any, *, fsync: str = "never") -> None:
        self.directory = os.path.abspath(os.fspath(directory))
        self.fsync = fsync
        os.makedirs(self.directory, exist_ok=True)
        self._claims: Set[str] = set()
        self._claims_lock = threading.Lock()

    def session_dir(self, cwd: str) -> str:
        return os.path.join(self.directory, encode_cwd(os.path.abspath(cwd)))

    def _find(self, session_id: str, cwd: Optional[str] = None) -> List[str]:
        if cwd:
            folders = [self.session_dir(cwd)]
        else:
            folders = [os.path.join(self.directory, folder) for folder in _names(self.directory)]
        # ``<created>_<id>.jsonl``: ``created`` has no ``_``, an id may (``*_main`` also matches ``a_main``)
        name = f"{session_id}.jsonl"
        return sorted(os.path.join(f, n) for f in folders for n in _names(f) if n.partition("_")[2] == name)

    def create(
        self,
        cwd: Optional[str] = None,
        session_id: Optional[str] = None,
        *,
        metadata: Optional[Dict[str, Any]] = None,
        parent_session: Optional[str] = None,
        lines: Iterable[bytes] = (),
    ) -> Session:
        """A new session for ``cwd`` (default: the current directory).

        ``session_id`` must match ``[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?`` (``invalid_payload``); an
        id already used in the same cwd is ``already_exists``, also when another process or
        repository object creates it at the same moment (creation takes a lock on the cwd's
        directory for the check and the new file). A directory or file that cannot be made or
        opened (no space, too many open files) is ``SessionError("storage")`` naming it, the
        ``OSError`` as its cause.
        """
        return self._create(cwd, session_id, metadata, parent_session, lines, None)

    def _create(
        self,
        cwd: Optional[str],
        session_id: Optional[str],
        metadata: Optional[Dict[str, Any]],
        parent_session: Optional[str],
        lines: Iterable[bytes],
        mode: Optional[int],
    ) -> Session:
        """:meth:`create` of a file with the permission bits ``mode`` (None: the umask's)."""
        cwd = os.path.abspath(cwd if cwd is not None else os.getcwd())
        if session_id is not None and not _ID_PATTERN.match(session_id):
            raise SessionError(
                "invalid_payload",
                f"invalid session id {session_id!r}: use letters, digits, "
                "'.', '_' and '-', starting and ending with a letter or digit",
            )
        session_id = session_id or new_session_id()
        claim = f"{cwd}\0{session_id}"
        with self._claims_lock:
            if claim in self._claims or any(self._cwd_of(p) == cwd for p in self._find(session_id, cwd)):
                raise SessionError("already_exists", f"a session {session_id!r} already exists for {cwd}")
            self._claims.add(claim)
        try:
            directory = self.session_dir(cwd)
            try:
                os.makedirs(directory, exist_ok=True)
            except OSError as exc:
                raise SessionError(
                    "storage", f"{directory}: cannot make the directory of the session ({exc.strerror})"
                ) from exc
            with _directory_lock(directory):  # other processes and repository objects: one at a time
                if any(self._cwd_of(p) == cwd for p in self._find(session_id, cwd)):
                    raise SessionError("already_exists", f"a session {session_id!r} already exists for {cwd}")
                created = iso_from_ms(int(time.time() * 1000))
                path = os.path.join(directory, f"{re.sub(r'[:.]', '-', created)}_{session_id}.jsonl")
                storage = JsonlSessionStorage._create(
                    path,
                    cwd=cwd,
                    session_id=session_id,
                    fsync=self.fsync,
                    parent_session=parent_session,
                    metadata=metadata,
                    timestamp=created,
                    lines=lines,
                    mode=mode,
                )
            return Session(storage)
        finally:
            with self._claims_lock:
                self._claims.discard(claim)

    @staticmethod
    def _cwd_of(path: str) -> Optional[str]:
        """The header cwd of a session file; None when the file went away meanwhile."""
        try:
            return read_header(path).get("cwd")
        except SessionError as exc:
            if exc.code == "not_found":
                return None
            raise

    def list(self, cwd: Optional[str] = None) -> List[SessionInfo]:
        """Sessions (of one cwd, or all), newest first by the header's time (``...00Z`` is older
        than ``...00.500Z``, an offset counts),
        then by modification time. Files without a valid header (also those of
        a format version this library does not read) are skipped, and so are files that cannot be
        read; but when this process cannot open files at all (too many open files, no memory) the
        listing raises ``SessionError("storage")`` rather than leave sessions out. ``message_count`` counts the
        message lines an open reads as entries: a damaged line (one cut short) counts for nothing."""
        if cwd is not None:
            cwd = os.path.abspath(cwd)
            folders = [self.session_dir(cwd)]
        else:
            folders = [os.path.join(self.directory, name) for name in _names(self.directory)]
        paths = [os.path.join(f, name) for f in folders for name in _names(f) if name.endswith(".jsonl")]
        infos = [i for i in map(_info, paths) if i is not None and (cwd is None or i.cwd == cwd)]
        infos.sort(key=lambda i: (timestamp_order(i.created), i.modified), reverse=True)
        return infos

    def path_of(self, session: Union[str, SessionInfo]) -> str:
        """The file of a session given by id, path or :class:`SessionInfo`; ``not_found`` if none.

        An id names the session with exactly that id in any cwd directory; when sessions of several
        cwds share it, ``SessionError("invalid_query")`` lists their files (pass the path or a
        :class:`SessionInfo` instead): an id never picks one of them silently."""
        if isinstance(session, SessionInfo):
            return session.path
        if os.sep in session or session.endswith(".jsonl"):
            if not os.path.exists(session):
                raise SessionError("not_found", f"{session}: no such session file", path=session)
            return os.path.abspath(session)
        found = self._find(session)
        if not found:
            raise SessionError("not_found", f"no session {session!r} in {self.directory}")
        if len(found) > 1:
            raise SessionError(
                "invalid_query",
                f"session id {session!r} is ambiguous: {len(found)} files in {self.directory} have it "
                f"({', '.join(os.path.relpath(p, self.directory) for p in found)}); give the path or a "
                "SessionInfo from list(cwd) instead",
            )
        return found[0]

    def open(self, session: Union[str, SessionInfo], *, read_only: bool = False) -> Session:
        """Open a session by id, path or listing entry."""
        path = self.path_of(session)
        opened = Session.open(path, read_only=read_only, fsync=self.fsync)
        expected = (
            session.id
            if isinstance(session, SessionInfo)
            else (None if os.sep in session or session.endswith(".jsonl") else session)
        )
        if expected is not None and opened.id != expected:
            opened.close()
            raise SessionError(
                "invalid_entry", f"{path}: header id {opened.id!r} does not match {expected!r}", path=path
            )
        return opened

    def delete(self, session: Union[str, SessionInfo]) -> None:
        """Delete a session file of this repository, given by id, path or listing entry.

        Only a regular file inside the repository's ``directory`` whose first line is a session header is
        deleted; any other path (outside the repository, a directory, a file that is not a session)
        raises ``SessionError("invalid_session")`` naming it and why, and nothing is deleted.
        Deleting a missing session does nothing; a session open for writing raises
        :class:`SessionLockedError` (the file stays); an id several cwds share raises
        ``invalid_query`` (see :meth:`path_of`) and nothing is deleted.
        """
        try:
            path = self.path_of(session)
        except SessionError as exc:
            if exc.code == "not_found":
                return
            raise
        self._check_inside(path)
        for _ in range(_OPEN_TRIES):
            try:
                fd = os.open(path, os.O_RDONLY | _O_NONBLOCK)
            except FileNotFoundError:
                return
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise self._refuse(path, "it is not a file")
                try:
                    read_header(path)
                except SessionError as exc:
                    if exc.code == "not_found":
                        return
                    if exc.code == "storage":
                        raise  # it cannot be read now (too many open files): not a verdict on the file
                    raise self._refuse(path, "its first line is not a session header") from None
                _lock(fd, path)
                # a writer's migration may have replaced the file meanwhile: the lock we hold is
                # then the old file's, and the one at the path may be open for writing
                if _same_file(fd, path):
                    os.unlink(path)
                    return
            finally:
                os.close(fd)
        raise SessionLockedError(
            f"{path} was replaced by another file each time it was opened (another writer is rewriting "
            "it); nothing was deleted, try again once that writer is done",
            path=path,
        )

    def _check_inside(self, path: str) -> None:
        root = os.path.realpath(self.directory)
        real = os.path.realpath(path)
        if real == root or os.path.commonpath([root, real]) != root:
            raise self._refuse(path, f"it is not inside the repository {self.directory}")

    @staticmethod
    def _refuse(path: str, why: str) -> SessionError:
        return SessionError(
            "invalid_session", f"{path}: not a session file of this repository ({why}); nothing was deleted", path=path
        )

    def fork(
        self,
        source: Union[Session, str, SessionInfo],
        entry_id: Optional[str] = None,
        *,
        position: str = "before",
        cwd: Optional[str] = None,
        session_id: Optional[str] = None,
    ) -> Session:
        """A new session holding a copy of ``source`` (which is not changed).

        Without ``entry_id`` every entry is copied (all branches). With it, the root→entry path is
        copied: ``position="at"`` ends at the entry; ``"before"`` (default) requires a user message and
        ends at its parent, so the fork re-asks that question. Label entries on the path are replaced
        by fresh ones for the labels of copied entries; a compaction whose kept history started at
        such a label entry starts at the next copied entry, so the fork builds the same context.
        Unknown or unsuitable entry: ``invalid_fork_target``. The new header's ``parentSession`` is the source file's path.
        The new file has the source file's permission bits (a private 0600 session forks into a
        private file, never readable by others even for a moment), its owner keeping read and
        write; a source without a file gives the umask's.
        """
        src = source if isinstance(source, Session) else self.open(source, read_only=True)
        owned = src is not source
        try:
            lines = self._fork_lines(src, entry_id, position)
            target_cwd = cwd if cwd is not None else src.cwd
            return self._create(target_cwd, session_id, None, src.path, lines, _mode_of(src.path))
        finally:
            if owned:
                src.close()

    @staticmethod
    def _fork_lines(src: Session, entry_id: Optional[str], position: str) -> List[bytes]:
        storage = src.storage
        if entry_id is None:
            return [storage.raw_line(i) for i in storage.entry_ids()]
        if position not in ("at", "before"):
            raise ValueError(f"position must be 'at' or 'before', got {position!r}")
        if entry_id not in storage or not storage.is_tree_node(entry_id):
            raise SessionError("invalid_fork_target", f"cannot fork at {entry_id!r}: no such entry")
        if position == "before":
            if storage.type_of(entry_id) != "message" or storage.role_of(entry_id) != "user":
                raise SessionError(
                    "invalid_fork_target",
                    f"cannot fork before {entry_id!r}: it is not a user message (use position='at')",
                )
            end = storage.parent_of(entry_id)
            path = [] if end is None else storage.path_to_root(end)[::-1]
        else:
            path = storage.path_to_root(entry_id)[::-1]
        kept = [i for i in path if storage.type_of(i) != "label"]
        # a dropped label may be where a compaction's kept history starts (the cut takes the
        # non-message entries before it along): it then starts at the next entry that is copied
        moved: Dict[str, str] = {}
        following: Optional[str] = None
        for node in reversed(path):
            if storage.type_of(node) != "label":
                following = node
            elif following is not None:
                moved[node] = following
        lines = [_fork_line(storage, i, p, moved) for i, p in zip(kept, [None, *kept])]
        parent = kept[-1] if kept else None
        used = set(kept)
        for target in kept:
            label = storage.get_label(target)
            if label is None:
                continue
            new_id = new_entry_id(lambda c: c in used or c in storage)
            used.add(new_id)
            entry = LabelEntry(new_id, parent, iso_from_ms(int(time.time() * 1000)), target, label)
            lines.append(encode_line(entry.to_dict())[:-1])
            parent = new_id
        return lines


@contextlib.contextmanager
def _directory_lock(directory: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``directory`` (blocking; nothing on platforms without it), so
    that "no session has this id" stays true until the new file is in place, across processes.
    Only session creation takes it, each for the time of one check and one file publication."""
    if fcntl is None:  # pragma: no cover - Windows
        yield
        return
    try:
        fd = os.open(directory, os.O_RDONLY | _O_CLOEXEC)
    except OSError as exc:
        raise SessionError("storage", f"{directory}: cannot lock it to create a session ({exc.strerror})") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _mode_of(path: Optional[str]) -> Optional[int]:
    """The permission bits a copy of the session file at ``path`` gets: the source's, the owner
    keeping read and write (a fork is a session to append to); None (the umask's) without a file."""
    if path is None:
        return None
    try:
        return (stat.S_IMODE(os.stat(path).st_mode) & 0o777) | 0o600
    except OSError:
        return None


def _fork_line(storage: Any, entry_id: str, parent: Optional[str], moved: Dict[str, str]) -> bytes:
    """The line of a path entry for a fork, hanging under ``parent`` (the copied entry before it
    on the path, None for the first).

    A ``compaction`` whose ``firstKeptEntryId`` is a label entry of the path (not copied) keeps its
    history from ``moved[that id]``, the next copied entry, which gives the fork the same context.

    An entry whose parent on the path is not copied (a ``label`` entry: labels are re-created at
    the end) is re-parented to the copied entry before it, its line otherwise unchanged, so the
    fork's path is whole. A ``leaf`` entry is on a path only when another writer appended under
    it; in the copy it targets its own parent (where the path runs), because its target may be on
    a branch the fork does not copy and the fork would not open."""
    if storage.type_of(entry_id) == "leaf":
        entry = storage.get_entry(entry_id)
        return encode_line(LeafEntry(entry.id, parent, entry.timestamp, parent).to_dict())[:-1]
    first_kept = None
    if storage.type_of(entry_id) == "compaction":
        kept_from = getattr(storage.get_entry(entry_id), "first_kept_entry_id", None)
        first_kept = kept_from if isinstance(kept_from, str) else None  # another writer's odd value: as is
    if storage.parent_of(entry_id) == parent and first_kept not in moved:
        return storage.raw_line(entry_id)
    storage.get_entry(entry_id)  # a damaged line is reported here, naming its file and line
    data = json.loads(storage.raw_line(entry_id))
    data["parentId"] = parent
    if first_kept in moved:
        data["firstKeptEntryId"] = moved[first_kept]
    return encode_line(data)[:-1]

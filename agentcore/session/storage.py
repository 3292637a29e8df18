"""The storage interface every backend implements, and the tree index they share.

A storage persists entries and answers tree queries; the :class:`~agentcore.session.Session` façade
assigns ids, parents and timestamps. :class:`SessionStorage` keeps, per entry, a small index node
(id, parent, type, message role, timestamp, position) and either the entry's encoded JSON line (memory
storage) or where to read it back (the JSONL file offset, the SQLite row), so a loaded session costs
about half its file size in memory. Message and custom payloads are decoded only when asked for (a
small LRU cache keeps recent ones; ``get_entries`` decodes many at once), so opening a 100,000-entry
session does not parse every message; control entries (leaf moves, labels, names, model and thinking
changes, compactions, branch summaries) are decoded at load because the tree state needs them.

Backends override four hooks: ``_write(line, entry)`` persists one encoded line (raising
``SessionError("storage")`` leaves memory unchanged), ``_fetch_raw(node)`` returns a payload that is
not held in memory, ``_fetch_raws(nodes)`` the same for many (batched), and ``close()``. Load rules
(spec §3.2, §3.5): the leaf is folded over the entries in order (a ``leaf`` entry moves it to its
``targetId``, any other entry to itself); a duplicate id is ``invalid_entry``; a folded leaf that
names a missing entry is ``invalid_session``. Storages are not thread-safe on their own; the Session
serialises calls. One exclusion is the storage's own: :meth:`SessionStorage.append` holds
``_io_lock`` (a re-entrant lock) around ``_write`` and the index update, and the built-in backends
take it in ``close()`` and wherever they use their descriptor or connection, each reading it once,
so a ``close()`` from another thread waits for an append in flight instead of closing what it
writes to.

The package's process-wide state (caches, the collector pause) is listed in
:mod:`agentcore.session.process_state`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import threading
from collections import OrderedDict
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple, Union

from .._compat import json_scanner
from ..types import message_from_dict
from . import process_state
from .context import UsageTotals, usage_of_entry
from .entries import (
    LabelEntry,
    MessageEntry,
    SessionEntry,
    SessionHeader,
    SessionInfoEntry,
    encode_line,
    entry_from_dict,
)
from .errors import SessionError

__all__ = [
    "SessionStorage",
    "IndexNode",
    "EAGER_TYPES",
    "EntryRow",
    "entry_row",
    "import_rows",
    "check_imported_rows",
    "unstorable_column",
    "clean_label",
    "clean_name",
]

#: Entry types decoded at load time (small, and needed for the leaf, labels, name and context state).
EAGER_TYPES = frozenset(
    {
        "leaf",
        "label",
        "session_info",
        "compaction",
        "branch_summary",
        "model_change",
        "thinking_level_change",
        "active_tools_change",
    }
)

# The reference writes the envelope keys first, in this order; lines that match are indexed without a
# JSON parse. Anything else is parsed in full.
# The strings exclude quotes, backslashes and control characters, so their bytes are their JSON
# value (what _decode_known relies on when it checks a line's envelope as text), and bytes past
# ASCII: a line whose envelope is not UTF-8 then takes the full parser, which names its line (a
# hand-edited or damaged file), and the strings decode without error.
_ENVELOPE = re.compile(
    rb'\{"type":"([A-Za-z_]+)","id":"([^"\\\x00-\x1f\x80-\xff]+)","parentId":(?:null|"([^"\\\x00-\x1f\x80-\xff]*)"),'
    rb'"timestamp":"([^"\\\x00-\x1f\x80-\xff]+)"(?:,"message":\{"role":"([A-Za-z]+)")?'
)

_CACHE_SIZE = 4096
_intern = sys.intern
_WORDS: Dict[bytes, str] = {}  # entry types and roles as shared str, by their bytes in the envelope


def _word(raw: bytes) -> str:
    text = _intern(raw.decode())
    if len(_WORDS) < 256:
        _WORDS[raw] = text
    return text


_loads = json.loads
_scan_once = json_scanner()  # the C scanner behind json.loads (agentcore._compat: a private name)


def _parse_json(raw: Union[bytes, str]) -> Any:
    """``json.loads(raw)`` for one stored line, without its wrappers when the line is a bare object.

    ``json.loads`` sniffs the encoding of bytes, strips whitespace around the value and then runs
    the same scanner called here; a line that opens an object at its first byte (every line any
    writer produces) needs none of that. Anything else, including trailing data, takes
    ``json.loads`` itself, so results and errors are the same.
    """
    if type(raw) is bytes:
        if raw[:1] != b"{" or raw[1:2] == b"\x00":  # not a bare object, or UTF-16: json.loads decides
            return _loads(raw)
        text = raw.decode("utf-8", "surrogatepass")  # what json.loads does for UTF-8 bytes
    else:
        text = raw  # type: ignore[assignment]  # type(raw) is bytes was False: a str
        if text[:1] != "{":
            return _loads(text)
    try:
        value, end = _scan_once(text, 0)
    except StopIteration:  # pragma: no cover - cannot happen at "{"; json.loads words the error
        return _loads(text)
    if end != len(text):
        return _loads(text)
    return value


def clean_label(label: Optional[str]) -> Optional[str]:
    """Labels are trimmed; blank means "no label"."""
    if label is None:
        return None
    text = str(label).strip()
    return text or None


def clean_name(name: Optional[str]) -> Optional[str]:
    """Session names: runs of CR/LF become one space, then trimmed; blank means "no name"."""
    if name is None:
        return None
    text = re.sub(r"[\r\n]+", " ", str(name)).strip()
    return text or None


class IndexNode:
    """Index record of one entry. ``raw`` is the encoded line, or None when the backend fetches it
    (a file backend records where: ``at``, the byte offset of the line, and ``size``, its length).

    Part of the storage-backend interface: a database backend that loads only the index columns
    builds one per row, ``IndexNode(id, parent_id, type, role, timestamp, seq, None, None)``, adds it
    with ``SessionStorage._add`` and returns the payload from its ``_fetch_raw`` override."""

    __slots__ = ("id", "parent", "type", "role", "ts", "line", "raw", "entry", "at", "size")

    def __init__(
        self,
        id: str,
        parent: Optional[str],
        type: str,
        role: Optional[str],
        ts: str,
        line: Optional[int],
        raw: Optional[Union[bytes, str]],
        entry: Optional[SessionEntry],
        at: Optional[int] = None,
        size: int = 0,
    ):
        self.id = id
        self.parent = parent
        self.type = type
        self.role = role
        self.ts = ts
        self.line = line
        self.raw = raw
        self.entry = entry
        self.at = at
        self.size = size


#: One row of a database backend's entries table: (session id, seq, entry id, parent id, type,
#: timestamp, message role or None, the entry's JSON line without newline).
EntryRow = Tuple[str, int, str, Optional[str], str, str, Optional[str], str]


def entry_row(session_id: str, seq: int, entry: SessionEntry, text: str) -> EntryRow:
    """The row a database backend stores for ``entry``, whose encoded JSON line is ``text``."""
    role = getattr(getattr(entry, "message", None), "role", None)
    return (session_id, seq, entry.id, entry.parent_id, entry.type, entry.timestamp, role, text)


_ROW_TEXT_COLUMNS = ("id", "parent id", "type", "timestamp", "message role")  # EntryRow[2:7]


def unstorable_column(row: EntryRow, unstorable: re.Pattern[str]) -> Optional[Tuple[str, str]]:
    """``(name, value)`` of the first index column of an entry ``row`` (id, parent id, type,
    timestamp, message role) in which ``unstorable`` finds what the backend's text type cannot
    hold (a lone surrogate, a NUL), or None. The payload column is JSON, whose escapes make any
    text storable."""
    for name, text in zip(_ROW_TEXT_COLUMNS, row[2:7]):
        if text is not None and unstorable.search(text):
            return name, text
    return None


def import_rows(session_id: str, lines: Iterable[bytes], where: str = "session") -> List[EntryRow]:
    """Rows for JSONL entry ``lines`` imported into a new database session (seq 1, 2, ...).

    Raises ``SessionError("invalid_entry")`` naming the 1-based line (``where`` names the target
    in the message) when a line is not UTF-8 JSON or not a valid entry; nothing is imported then.
    """
    rows: List[EntryRow] = []
    for seq, line in enumerate(lines, 1):
        try:
            text = line.rstrip(b"\n").decode("utf-8")
            entry = entry_from_dict(json.loads(text))
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            reason = "JSON nested too deeply to read" if isinstance(exc, RecursionError) else exc
            raise SessionError(
                "invalid_entry", f"{where}: imported line {seq}: invalid entry: {reason}; nothing imported", line=seq
            ) from None
        rows.append(entry_row(session_id, seq, entry, text))
    return rows


def check_imported_rows(rows: Sequence[EntryRow], where: str) -> None:
    """Refuse rows from :func:`import_rows` that an open would refuse (a duplicate entry id, a leaf
    move to a missing entry): ``SessionError`` ``invalid_entry`` / ``invalid_session`` naming
    ``where`` and the imported line, to raise before anything is written (a committed session that
    cannot be opened would stay listed for good). The database storages call it in ``create``."""
    probe = SessionStorage()  # the index an open builds, without a database
    try:
        for row in rows:
            probe._index_line(row[7], row[1])
        probe._finish_load()
    except SessionError as exc:
        at = f"imported line {exc.line}: " if exc.line else ""
        raise SessionError(
            exc.code,
            f"{where}: not created: the entry lines given do not make a valid session ({at}{exc}); nothing imported",
            path=where,
            line=exc.line,
        ) from None


class SessionStorage:
    """Base class and interface of session storages (memory, JSONL, SQLite)."""

    #: Where the session lives (file path or database path), None in memory.
    path: Optional[str] = None

    def __init__(self) -> None:
        self.header: Optional[SessionHeader] = None
        self.read_only = False
        self._nodes: Dict[str, IndexNode] = {}
        self._order: List[IndexNode] = []
        # children by parent id: a str for the only child (the usual case: a long chain allocates no
        # list per entry, and the collector has 100,000 fewer objects to traverse), else a list
        self._children: Dict[Optional[str], Union[str, List[str]]] = {}
        self._promoted: Set[str] = set()  # leaf entries another writer appended under: tree nodes after all
        self._labels: Dict[str, str] = {}
        self._name: Optional[str] = None
        self._leaf: Optional[str] = None
        self._messages = 0
        self._type_counts: Dict[str, int] = {}
        self._usage: Optional[UsageTotals] = None
        self._cache: OrderedDict[str, SessionEntry] = OrderedDict()
        self._closed = False
        # held by append around _write, and by a backend's close() and descriptor/connection use
        self._io_lock = threading.RLock()
        self._pid = os.getpid()  # the process that opened it (a forked child's copy is not its own)

    # ------------------------------------------------------------------ backend hooks

    def _write(self, line: bytes, entry: SessionEntry) -> None:
        """Persist one encoded line. Raise ``SessionError("storage")`` on failure."""

    def _fetch_raw(self, node: IndexNode) -> Union[bytes, str]:
        raise SessionError("storage", f"entry {node.id} has no stored payload", path=self.path)

    def _fetch_raws(self, nodes: List[IndexNode]) -> List[Union[bytes, str]]:
        """Payloads of several nodes that are not held in memory (backends may batch the reads)."""
        return [self._fetch_raw(node) for node in nodes]

    def close(self) -> None:
        """Release files, locks and connections. Reads keep working on what is in memory.

        A backend's override holds :meth:`_io_exclusion` (waiting for an append in flight) and
        calls this.
        """
        self._closed = True

    def _check_owner(self, holding: str) -> None:
        """``SessionError("storage")`` in a forked child: ``holding`` (the file's lock, the
        connection) is the parent's, so the child must open the session itself."""
        if self._pid != os.getpid():
            raise SessionError(
                "storage",
                f"{self.path or 'session'}: this handle was opened by process {self._pid}, which holds "
                f"{holding}; a forked child cannot use it: open the session in this process (once the "
                "parent closed it, to write)",
                path=self.path,
            )

    def _io_exclusion(self) -> Any:
        """``_io_lock`` for ``close()``, in the process that opened the storage; nothing in a forked
        child, where the lock may have been held by a thread of the parent at the fork, which is
        not there to release it (a child's ``close()`` must not hang; it appends nothing anyway)."""
        return self._io_lock if self._pid == os.getpid() else contextlib.nullcontext()

    def __enter__(self) -> SessionStorage:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ loading

    def _where(self, line: Optional[int], entry_id: Optional[str] = None) -> str:
        if self.path and line:
            return f"{self.path}:{line}"
        if self.path:
            return f"{self.path} (entry {entry_id})"
        return f"entry {entry_id}"

    def _index_line(self, raw: Union[bytes, str], line: Optional[int], at: Optional[int] = None) -> None:
        """Index one stored line (without its newline), decoding it only when needed.

        With ``at`` (the line's byte offset in the backend's file) the node records where the line is
        instead of keeping it; :meth:`_fetch_raw` reads it back when the entry is first needed.
        """
        match = _ENVELOPE.match(raw) if type(raw) is bytes else None
        if match is not None and raw[-1] == 125:  # ends with "}": the regex did not stop at a stray quote
            etype, entry_id, parent, ts, role = match.groups()
            etype_text = _WORDS.get(etype) or _word(etype)
            if etype_text not in EAGER_TYPES:
                self._add(
                    IndexNode(
                        entry_id.decode(),
                        parent.decode() if parent is not None else None,
                        etype_text,
                        (_WORDS.get(role) or _word(role)) if role else None,
                        ts.decode(),
                        line,
                        raw if at is None else None,
                        None,
                        at,
                        len(raw),
                    )
                )
                return
        entry = self._parse(raw, line)
        lazy = entry.type not in EAGER_TYPES
        self._add(self._node_for(entry, line, raw if lazy and at is None else None))
        if lazy and at is not None:
            node = self._order[-1]
            node.at, node.size = at, len(raw)

    def _index_lines(self, lines: List[bytes], start: int, end: int, at: Optional[int] = None) -> None:
        """Index ``lines[start:end]`` (split file content; line numbers are 1-based), skipping blanks.

        ``at`` is the byte offset of ``lines[start]`` when the lines should be read back from the
        file rather than kept (see :meth:`_index_line`).

        The usual line (a lazily decoded entry whose envelope the regex reads, with a new id and a
        parent that is not a ``leaf`` entry) is indexed inline, doing what :meth:`_index_line` and
        :meth:`_add` do for it, without their two calls per line (about a third of the open of a
        100,000-entry file); every other line takes :meth:`_index_line`.
        """
        index_line = self._index_line
        envelope = _ENVELOPE.match
        words = _WORDS
        eager = EAGER_TYPES
        nodes = self._nodes
        get_node = nodes.get
        add_node = nodes.setdefault
        order = self._order
        link = self._link_new
        node_type = IndexNode
        keep = at is None
        offset = 0 if at is None else at
        fast: Dict[str, int] = {}  # entries indexed inline, by type (added to the counts at the end)
        previous: Optional[IndexNode] = order[-1] if order else None
        for index in range(start, end):
            raw = lines[index]
            size = len(raw) + 1
            if raw[:1] != b"{" or raw[-1:] != b"}":  # blank, CRLF, or something the full parser judges
                raw = raw.rstrip(b"\r")
                if not raw.strip():
                    offset += size
                    continue
            else:
                match = envelope(raw)
                if match is not None:
                    etype, entry_id, parent, ts, role = match.groups()
                    etype_text = words.get(etype) or _word(etype)
                    if etype_text not in eager:
                        entry_text = entry_id.decode()
                        if parent is None:
                            parent_text = parent_node = None
                        else:
                            parent_text = parent.decode()
                            # in a long chain the parent is the line before: no lookup
                            if previous is not None and previous.id == parent_text:
                                parent_node = previous
                            else:
                                parent_node = get_node(parent_text)
                            if parent_node is not None:
                                parent_text = parent_node.id  # share one string per id
                        if parent_node is None or parent_node.type != "leaf":
                            node = node_type(
                                entry_text,
                                parent_text,
                                etype_text,
                                (words.get(role) or _word(role)) if role else None,
                                ts.decode(),
                                index + 1,
                                raw if keep else None,
                                None,
                                None if keep else offset,
                                size - 1,
                            )
                            if add_node(entry_text, node) is node:  # else a duplicate: _add reports it
                                link(node, fast)
                                previous = node
                                offset += size
                                continue
            index_line(raw, index + 1, None if keep else offset)
            previous = order[-1] if order else None
            offset += size
        self._count_linked(fast)

    def _link_new(self, node: IndexNode, counts: Dict[str, int]) -> None:
        """The rest of :meth:`_add` for a lazy entry already in ``_nodes``, with a new id and a parent
        that is not a ``leaf`` entry (what a fast index loop checked): ordered, counted in ``counts``
        (merged by :meth:`_count_linked` when the loop ends), linked to its parent, the leaf."""
        self._order.append(node)
        entry_id, parent = node.id, node.parent
        counts[node.type] = counts.get(node.type, 0) + 1
        siblings: Any = self._children.setdefault(parent, entry_id)  # as in _add
        if siblings is not entry_id:
            if type(siblings) is str:
                self._children[parent] = [siblings, entry_id]
            else:
                siblings.append(entry_id)
        self._leaf = entry_id

    def _count_linked(self, counts: Dict[str, int]) -> None:
        """Add the type counts of the entries :meth:`_link_new` linked to the storage's."""
        totals = self._type_counts
        for etype, count in counts.items():
            totals[etype] = totals.get(etype, 0) + count
        self._messages += counts.get("message", 0)

    def _parse(self, raw: Union[bytes, str], line: Optional[int], entry_id: Optional[str] = None) -> SessionEntry:
        try:
            return entry_from_dict(_parse_json(raw))
        except (ValueError, RecursionError) as exc:  # RecursionError: JSON nested ~1000 levels deep
            if isinstance(exc, RecursionError):
                exc = ValueError("JSON nested too deeply to read")
            where = self._where(line, entry_id)
            raise SessionError(
                "invalid_entry",
                f"{where}: invalid entry: {exc}; the file is left unchanged, repair or remove that line",
                path=self.path,
                line=line,
            ) from None

    @staticmethod
    def _node_for(entry: SessionEntry, line: Optional[int], raw: Any) -> IndexNode:
        role = None
        if isinstance(entry, MessageEntry):
            role = getattr(entry.message, "role", None)
        keep = entry if raw is None and entry.type in EAGER_TYPES else None
        return IndexNode(entry.id, entry.parent_id, _intern(entry.type), role, entry.timestamp, line, raw, keep)

    def _add(self, node: IndexNode) -> None:
        nodes = self._nodes
        entry_id = node.id
        if entry_id in nodes:
            raise SessionError(
                "invalid_entry",
                f"{self._where(node.line, entry_id)}: duplicate entry id {entry_id!r}",
                path=self.path,
                line=node.line,
            )
        parent = nodes.get(node.parent)  # type: ignore[arg-type]
        if parent is not None:
            node.parent = parent.id  # share one string per id
            if parent.type == "leaf" and node.type != "leaf" and parent.id not in self._promoted:
                self._promote(parent)
        nodes[entry_id] = node
        self._order.append(node)
        etype = node.type
        counts = self._type_counts
        counts[etype] = counts.get(etype, 0) + 1
        if etype == "leaf":
            self._leaf = node.entry.target_id  # type: ignore[union-attr]
            return
        children: Any = self._children.get(node.parent)  # None, one id (str) or a list of ids
        if children is None:
            self._children[node.parent] = entry_id
        elif type(children) is str:
            self._children[node.parent] = [children, entry_id]
        else:
            children.append(entry_id)
        self._leaf = entry_id
        if etype == "message":
            self._messages += 1
        elif node.type == "label":
            entry = node.entry
            assert isinstance(entry, LabelEntry)
            label = clean_label(entry.label)
            if label is None:
                self._labels.pop(entry.target_id, None)
            else:
                self._labels[entry.target_id] = label
        elif node.type == "session_info":
            assert isinstance(node.entry, SessionInfoEntry)
            self._name = clean_name(node.entry.name)

    def _promote(self, node: IndexNode) -> None:
        """Make a ``leaf`` entry (and any ``leaf`` ancestors) a tree node: something hangs under it.

        A writer that does not know ``leaf`` entries (the reference's SessionManager) takes one as
        its leaf and appends under it; the tree must still reach what it wrote. The entry joins its
        siblings in append order (see :meth:`_insert_in_append_order`).
        """
        nodes = self._nodes
        while node.type == "leaf" and node.id not in self._promoted:
            self._promoted.add(node.id)
            siblings: Any = self._children.get(node.parent)  # as children in _add
            if siblings is None:
                siblings = []
            elif type(siblings) is str:
                siblings = [siblings]
            self._children[node.parent] = siblings
            self._insert_in_append_order(siblings, node.id)
            parent = nodes.get(node.parent)  # type: ignore[arg-type]
            if parent is None:
                return
            node = parent

    def _insert_in_append_order(self, siblings: List[str], entry_id: str) -> None:
        """Insert ``entry_id`` into ``siblings`` (ids in append order), where its append order puts it.

        By line numbers (file line, database seq: what a load records), walking back from the end
        (a leaf entry is promoted when an entry is appended under it, so later siblings are rare):
        a file with thousands of foreign appends under leaf entries of one parent opens without a
        sort or a scan of the index per append. Without line numbers (entries given in memory) the
        positions come from one scan of the index."""
        nodes = self._nodes
        line = nodes[entry_id].line
        at = len(siblings)
        while line is not None:
            before = nodes[siblings[at - 1]].line if at else -1
            if before is None:
                break  # a sibling without a line number: take the scan below
            if before < line:
                siblings.insert(at, entry_id)
                return
            at -= 1
        siblings.append(entry_id)
        wanted = set(siblings)
        position = {n.id: i for i, n in enumerate(self._order) if n.id in wanted}
        siblings.sort(key=position.__getitem__)

    def _finish_load(self) -> None:
        if self._leaf is not None and self._leaf not in self._nodes:
            raise SessionError(
                "invalid_session",
                f"{self.path or 'session'}: the current leaf points at missing entry {self._leaf!r}",
                path=self.path,
            )

    # ------------------------------------------------------------------ writing

    def append(self, entry: SessionEntry) -> None:
        """Persist ``entry`` and index it; memory changes only after the write succeeded.

        The caller (Session) has set id, parent and timestamp. Raises ``invalid_payload`` for non-JSON
        data (also data nested too deeply to encode), and for an entry decoded at load (a control
        entry, see ``EAGER_TYPES``) that the reader would refuse (a compaction whose ``usage`` is not an object): such an entry is decoded
        back before it is written, since once stored it would make the session fail to open.
        Raises ``storage`` for write failures. In every case nothing is written or recorded.
        Holds ``_io_lock`` throughout, so a backend's ``close()`` waits for it.
        """
        with self._io_lock:
            if self.read_only:
                raise SessionError(
                    "storage",
                    f"{self.path or 'session'} was opened read-only; open it without read_only=True to append",
                    path=self.path,
                )
            if self._closed:
                raise SessionError("storage", f"{self.path or 'session'} is closed", path=self.path)
            if entry.id in self._nodes:
                raise SessionError("already_exists", f"entry id {entry.id!r} already exists", path=self.path)
            data, line, stored = self._encoded(entry)
            raw = line[:-1]
            self._write(line, entry)
            node = self._node_for(stored or entry, None, None if stored is not None else raw)
            self._add(node)
            if self._usage is not None:
                if stored is not None:
                    self._usage.add(usage_of_entry(stored))
                elif node.type == "message" and node.role in ("assistant", None):
                    message = data.get("message")  # what was written: no need to decode the line again
                    if isinstance(message, dict) and message.get("role") == "assistant":
                        self._usage.add(message.get("usage"))

    def _encoded(self, entry: SessionEntry) -> Tuple[Dict[str, Any], bytes, Optional[SessionEntry]]:
        """``(dict, line, decoded)`` of ``entry`` as :meth:`append` writes it: ``decoded`` is the
        entry read back from its line for a control entry (``EAGER_TYPES``, decoded at load), else
        None. ``SessionError("invalid_payload")`` for what cannot be stored or read back; nothing
        is written here, so a caller may check an entry before a write that must not happen alone."""
        try:
            data = entry.to_dict()
            line = encode_line(data)
        except RecursionError as exc:  # details nested hundreds of levels deep, or holding themselves
            problem = "holds a reference cycle" if "reference cycle" in str(exc) else "is nested too deeply to store"
            raise SessionError(
                "invalid_payload",
                f"{self.path or 'session'}: cannot append: the entry {problem}; the entry was not recorded",
                path=self.path,
            ) from None
        stored: Optional[SessionEntry] = None
        if entry.type in EAGER_TYPES:  # what a load would decode: check it reads back before writing
            try:
                stored = entry_from_dict(json.loads(line[:-1]))
            except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply to read
                problem = "JSON nested too deeply to read" if isinstance(exc, RecursionError) else str(exc)
                raise SessionError(
                    "invalid_payload",
                    f"{self.path or 'session'}: cannot append: {problem}; the entry was not recorded",
                    path=self.path,
                ) from None
        return data, line, stored

    # ------------------------------------------------------------------ reading

    @property
    def leaf_id(self) -> Optional[str]:
        return self._leaf

    @property
    def name(self) -> Optional[str]:
        return self._name

    @property
    def labels(self) -> Dict[str, str]:
        return dict(self._labels)

    def get_label(self, entry_id: str) -> Optional[str]:
        return self._labels.get(entry_id)

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, entry_id: object) -> bool:
        return entry_id in self._nodes

    def type_of(self, entry_id: str) -> str:
        return self._nodes[entry_id].type

    def count_of(self, entry_type: str) -> int:
        """How many entries of ``entry_type`` the session holds (all branches, leaf entries included)."""
        return self._type_counts.get(entry_type, 0)

    def parent_of(self, entry_id: str) -> Optional[str]:
        return self._nodes[entry_id].parent

    def timestamp_of(self, entry_id: str) -> str:
        return self._nodes[entry_id].ts

    def role_of(self, entry_id: str) -> Optional[str]:
        """The message role of a ``message`` entry (decoding it if the index does not know it)."""
        node = self._nodes[entry_id]
        if node.type != "message":
            return None
        if node.role is None:
            entry = self.get_entry(entry_id)
            node.role = getattr(getattr(entry, "message", None), "role", None)
        return node.role

    def get_entry(self, entry_id: str) -> Optional[SessionEntry]:
        """The entry with this id, or None. Returned entries are shared: treat them as read-only."""
        node = self._nodes.get(entry_id)
        if node is None:
            return None
        if node.entry is not None:
            return node.entry
        cached = self._cache.get(entry_id)
        if cached is not None:
            self._cache.move_to_end(entry_id)
            return cached
        entry = self._decode(node)
        self._cache[entry_id] = entry
        if len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)
        return entry

    def get_entries(self, entry_ids: Iterable[str]) -> List[SessionEntry]:
        """The entries with these ids, in order (``not_found`` for an unknown id).

        The bulk form of :meth:`get_entry` (what ``build_context`` uses): payloads not in memory are
        fetched together and decoded with the garbage collector paused; the decode cache ends up as
        if each entry had been read with :meth:`get_entry` in turn (it keeps the most recent ones).
        """
        nodes = self._nodes
        cache = self._cache
        try:
            wanted = [nodes[i] for i in entry_ids]
        except KeyError as exc:
            raise SessionError("not_found", f"no entry with id {exc.args[0]!r}", path=self.path) from None
        out: List[Any] = [node.entry or cache.get(node.id) for node in wanted]
        missing = [index for index, entry in enumerate(out) if entry is None]
        if missing:
            fetch = [wanted[i] for i in missing if wanted[i].raw is None]
            fetched = iter(self._fetch_raws(fetch) if fetch else ())
            with process_state.gc_paused():
                decode = self._decode_known
                for index in missing:
                    node = wanted[index]
                    out[index] = decode(node, node.raw if node.raw is not None else next(fetched))
        recent = len(wanted) - _CACHE_SIZE  # what an LRU of _CACHE_SIZE keeps after these reads
        for index in range(max(0, recent), len(wanted)):
            node = wanted[index]
            if node.entry is None:
                cache[node.id] = out[index]
                cache.move_to_end(node.id)
        while len(cache) > _CACHE_SIZE:
            cache.popitem(last=False)
        return out

    def _decode_known(self, node: IndexNode, raw: Union[bytes, str]) -> SessionEntry:
        """:meth:`_decode` for a bulk read: a message line that still starts with exactly the
        envelope the index recorded at load (id, parent, timestamp: validated then) is decoded from
        its ``message`` object on, and built by one constructor call; anything else takes
        :meth:`_decode`.

        The line is ``{"type":"message","id":…,"parentId":…,"timestamp":…,"message":`` + the
        message object + ``}`` (what every writer produces); checking the envelope as text and
        scanning only the message is the same judgement as parsing the whole line and comparing
        its five keys, without decoding four strings and a dict per entry.
        """
        if node.type == "message":
            try:
                text: str = raw.decode("utf-8", "surrogatepass") if type(raw) is bytes else raw  # type: ignore[assignment]
            except UnicodeDecodeError:  # not UTF-8: _decode words the error with the line
                return self._decode(node, raw)
            parent = node.parent
            if parent is not None:
                prefix = f'{{"type":"message","id":"{node.id}","parentId":"{parent}","timestamp":"{node.ts}","message":'
                quotes = 18
            else:
                prefix = f'{{"type":"message","id":"{node.id}","parentId":null,"timestamp":"{node.ts}","message":'
                quotes = 16
            start = len(prefix)
            if (
                text.startswith(prefix)
                and text[start : start + 1] == "{"
                and text[-1:] == "}"
                # the index's strings are their own JSON (no quote, backslash or control character:
                # a SQLite row's columns are not read from its payload)
                and prefix.count('"') == quotes
                and "\\" not in prefix
                and prefix.isprintable()
            ):
                try:
                    message, end = _scan_once(text, start)
                except (StopIteration, ValueError, RecursionError):
                    end = 0
                if end == len(text) - 1:
                    try:
                        return MessageEntry(node.id, node.parent, node.ts, message_from_dict(message), {})
                    except (ValueError, RecursionError):  # RecursionError: a value nested too deep
                        pass  # _decode words the error with the line
        return self._decode(node, raw)

    def _decode(self, node: IndexNode, raw: Union[bytes, str, None] = None) -> SessionEntry:
        if raw is None:
            raw = node.raw if node.raw is not None else self._fetch_raw(node)
        entry = self._parse(raw, node.line, node.id)
        if entry.id != node.id:
            raise SessionError(
                "invalid_entry",
                f"{self._where(node.line, node.id)}: entry id changed on disk",
                path=self.path,
                line=node.line,
            )
        return entry

    def raw_line(self, entry_id: str) -> bytes:
        """The stored JSON line of an entry (without newline), exactly as persisted."""
        node = self._nodes[entry_id]
        if node.raw is not None:
            raw = node.raw
        elif node.entry is not None:
            return encode_line(node.entry.to_dict())[:-1]
        else:
            raw = self._fetch_raw(node)
        return raw if isinstance(raw, bytes) else raw.encode("utf-8")

    def entry_ids(self) -> List[str]:
        """Every entry id in append order (including ``leaf`` bookkeeping entries)."""
        return [node.id for node in self._order]

    def iter_entries(self, after: int = 0, limit: Optional[int] = None) -> Iterator[SessionEntry]:
        """Entries in append order, from position ``after`` (0-based), at most ``limit`` of them."""
        end = len(self._order) if limit is None else min(len(self._order), after + max(0, limit))
        for node in self._order[after:end]:
            entry = self.get_entry(node.id)
            assert entry is not None
            yield entry

    def find_entries(self, entry_type: str) -> List[SessionEntry]:
        """Every entry of one type, in append order."""
        return [self.get_entry(n.id) for n in self._order if n.type == entry_type]  # type: ignore[misc]

    def is_tree_node(self, entry_id: str) -> bool:
        """Whether an entry is a node of the tree: every entry except ``leaf`` bookkeeping entries
        that nothing hangs under (one another writer appended under is a node, so its children are
        reachable)."""
        return self._nodes[entry_id].type != "leaf" or entry_id in self._promoted

    def child_ids(self, entry_id: Optional[str]) -> List[str]:
        """Ids of the tree children of ``entry_id`` (None: entries with a null parent), in append
        order; ``leaf`` entries only when they are tree nodes (see :meth:`is_tree_node`)."""
        children = self._children.get(entry_id)
        if children is None:
            return []
        return [children] if type(children) is str else list(children)

    def path_to_root(self, entry_id: str) -> List[str]:
        """Ids from ``entry_id`` up to its root (leaf first). Iterative; chains may be very deep.

        Raises ``not_found`` for an unknown start and ``invalid_session`` for a missing parent or a cycle.
        """
        if entry_id not in self._nodes:
            raise SessionError("not_found", f"no entry with id {entry_id!r}", path=self.path)
        nodes = self._nodes
        path: List[str] = []
        current: Optional[str] = entry_id
        limit = len(nodes)
        while current is not None:
            node = nodes.get(current)
            if node is None:
                raise SessionError(
                    "invalid_session",
                    f"{self.path or 'session'}: entry {path[-1]!r} names missing parent {current!r}",
                    path=self.path,
                )
            path.append(current)
            if len(path) > limit:
                raise SessionError(
                    "invalid_session", f"{self.path or 'session'}: parent cycle at entry {current!r}", path=self.path
                )
            current = node.parent
        return path

    # ------------------------------------------------------------------ statistics

    @property
    def message_count(self) -> int:
        return self._messages

    def usage_totals(self) -> UsageTotals:
        """Token and cost sums over the whole session (all branches), computed once then kept current.

        From :meth:`_usage_rows` when the backend gives them (one query), else by walking the
        index. A row that is not a valid entry is ``SessionError("invalid_entry")`` naming it;
        nothing is kept after a failure, so a later call computes again."""
        if self._usage is None:
            totals = UsageTotals()
            rows = self._usage_rows()
            if rows is not None:
                for line, entry_id, raw in rows:
                    totals.add(usage_of_entry(self._parse(raw, line, entry_id)))
            else:
                for node in self._order:
                    if node.type in ("compaction", "branch_summary"):
                        totals.add(usage_of_entry(node.entry))
                    elif node.type == "message" and node.role in ("assistant", None):
                        entry = node.entry or self._cache.get(node.id) or self._decode(node)
                        totals.add(usage_of_entry(entry))
            self._usage = totals
        return self._usage

    def _usage_rows(self) -> Optional[Iterable[Tuple[int, str, Union[bytes, str]]]]:
        """``(line, entry id, raw entry)`` of every entry whose usage counts (compactions, branch
        summaries, assistant messages), read at once by a database backend; None (the default,
        and a backend that cannot query now): :meth:`usage_totals` walks the index instead.
        Raises ``SessionError`` when the read fails."""
        return None

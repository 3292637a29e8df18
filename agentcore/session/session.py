"""The Session: a branching conversation tree over one storage (spec session.md §5).

Every append creates a child of the current leaf and moves the leaf to it, so a session is a tree
whose current branch is the root→leaf path. ``move_to`` moves the leaf elsewhere (persisted as a
``leaf`` entry, so a reopened session resumes where it was); the next append starts a new branch
there. Entries are never changed or deleted; compaction changes what the context contains, not what
is stored.

``Session`` is backend-agnostic: it assigns ids, parents and timestamps and validates input; the
storage (:class:`MemorySessionStorage`, :class:`JsonlSessionStorage`, :class:`SqliteSessionStorage`)
persists and indexes. A per-session lock makes appends from several threads safe (for example the
agent's run thread and the caller's thread); :meth:`Session.close` takes it too, so a close on one
thread waits for an append in progress on another (which is then recorded, or refused whole).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from ..types import MessageLike, _is_mapping, message_to_dict, role_of
from .context import EntryTransform, Projector, SessionContext, SessionStats, build_context, get_session_stats
from .entries import (
    ActiveToolsChangeEntry,
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionEntry,
    SessionHeader,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
    checked_custom_content,
    iso_from_ms,
    new_entry_id,
    timestamp_order,
)
from .errors import SessionError
from .storage import SessionStorage, clean_name

__all__ = ["Session", "TreeNode"]

#: A file path: a str or an ``os.PathLike`` (``pathlib.Path``).
StrPath = Union[str, "os.PathLike[str]"]

_CURRENT: Any = object()


@dataclass
class TreeNode:
    """One node of :meth:`Session.get_tree`: the entry, its resolved label and its children."""

    entry: SessionEntry
    label: Optional[str] = None
    children: List[TreeNode] = field(default_factory=list)


class Session:
    """A conversation tree. Create with :meth:`create`, :meth:`open`, :meth:`in_memory` or
    ``Session(storage)``.

    ``clock`` (Unix ms) and ``id_factory`` (``exists -> id``) can be injected for deterministic tests.
    Use as a context manager, or call :meth:`close`, to release the file lock.
    """

    def __init__(
        self,
        storage: SessionStorage,
        *,
        clock: Optional[Callable[[], int]] = None,
        id_factory: Optional[Callable[[Callable[[str], bool]], str]] = None,
    ) -> None:
        self.storage = storage
        self._clock = clock or (lambda: int(time.time() * 1000))
        self._new_id = id_factory or new_entry_id
        self._lock = threading.RLock()
        self._pid = os.getpid()  # close() in a forked child does not wait for the parent's threads
        #: the agent whose run records into this session now (agentcore.session.agent_link)
        self._recording_run: Optional[Callable[[], Any]] = None

    # ------------------------------------------------------------------ constructors

    @classmethod
    def create(
        cls,
        path: StrPath,
        cwd: Optional[str] = None,
        session_id: Optional[str] = None,
        *,
        fsync: str = "never",
        parent_session: Optional[str] = None,
        metadata: Optional[Dict[str, Any]] = None,
        **kwargs: Any,
    ) -> Session:
        """A new JSONL session file at ``path`` (header written now). Existing file: ``already_exists``."""
        from .jsonl import JsonlSessionStorage

        storage = JsonlSessionStorage.create(
            path, cwd=cwd, session_id=session_id, fsync=fsync, parent_session=parent_session, metadata=metadata
        )
        return cls(storage, **kwargs)

    @classmethod
    def open(
        cls, path: StrPath, *, read_only: bool = False, fsync: str = "never", verify: bool = False, **kwargs: Any
    ) -> Session:
        """Open a JSONL session file (migrating version 1/2 files, repairing a torn last line).

        A ``.db``/``.sqlite``/``.sqlite3`` path must be opened with ``SqliteSessionStorage`` instead.
        """
        from .jsonl import JsonlSessionStorage

        return cls(JsonlSessionStorage(path, read_only=read_only, fsync=fsync, verify=verify), **kwargs)

    @classmethod
    def in_memory(cls, cwd: Optional[str] = None, session_id: Optional[str] = None, **kwargs: Any) -> Session:
        """A session that lives in memory only."""
        from .memory import MemorySessionStorage

        return cls(MemorySessionStorage(cwd=cwd, session_id=session_id), **kwargs)

    def close(self) -> None:
        """Flush (per the fsync policy) and release the storage. Reads still work afterwards.

        Takes the session lock: an append in progress on another thread finishes first (not in a
        forked child, where the lock may be held by a parent's thread that is not there).
        """
        with self._lock if self._pid == os.getpid() else contextlib.nullcontext():
            self.storage.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        where = self.storage.path or "memory"
        return f"<Session {self.id} at {where}: {len(self.storage)} entries, leaf {self.leaf_id}>"

    # ------------------------------------------------------------------ header facts

    @property
    def header(self) -> SessionHeader:
        assert self.storage.header is not None
        return self.storage.header

    @property
    def id(self) -> str:
        return self.header.id

    @property
    def cwd(self) -> str:
        return self.header.cwd

    @property
    def path(self) -> Optional[str]:
        return self.storage.path

    # ------------------------------------------------------------------ appends

    def _append(self, make: Callable[[str, Optional[str], str], SessionEntry]) -> str:
        with self._lock:
            entry_id = self._new_id(self.storage.__contains__)
            entry = make(entry_id, self.storage.leaf_id, iso_from_ms(self._clock()))
            self.storage.append(entry)
            return entry_id

    def append_message(self, message: Union[MessageLike, Mapping[str, Any]]) -> str:
        """Append a message (a message dataclass or its reference dict); returns the entry id."""
        if role_of(message) is None:
            raise SessionError("invalid_payload", "append_message needs a message with a 'role'")
        if _is_mapping(message):
            from ..types import message_from_dict

            message = message_from_dict(message)  # type: ignore[arg-type]  # _is_mapping said so
        return self._append(lambda i, p, t: MessageEntry(i, p, t, message))

    def append_thinking_level_change(self, level: str) -> str:
        """Record a thinking-level change (``"off"`` … ``"xhigh"``)."""
        return self._append(lambda i, p, t: ThinkingLevelChangeEntry(i, p, t, str(level)))

    def append_model_change(self, provider: str, model_id: str, *, extra: Optional[Dict[str, Any]] = None) -> str:
        """Record a model change to ``provider``/``model_id``.

        ``extra``: more JSON fields stored on the entry (the reference keeps and ignores them);
        agentcore's recorder stores the model's endpoint there (``api``, ``baseUrl``, ...).
        """
        fields = dict(extra or {})
        return self._append(lambda i, p, t: ModelChangeEntry(i, p, t, provider, model_id, fields))

    def append_active_tools_change(self, names: Iterable[str]) -> str:
        """Record the names of the tools offered to the model from now on (the list is copied).

        ``names`` is an iterable of strings; a single string (``"read"``, which would otherwise
        become the tools ``r``, ``e``, ``a``, ``d``) or an item that is not a string (a tool object
        instead of its name) is ``SessionError("invalid_payload")`` naming it, and nothing is written.
        """
        if isinstance(names, (str, bytes)):
            raise SessionError(
                "invalid_payload",
                f"append_active_tools_change: names must be a list of tool names, not one {type(names).__name__} "
                f"({names!r}); pass [{names!r}]; nothing was written",
            )
        copied = list(names)
        for index, name in enumerate(copied):
            if not isinstance(name, str):
                raise SessionError(
                    "invalid_payload",
                    f"append_active_tools_change: names[{index}] is a {type(name).__name__}, not a tool name "
                    "(a string); nothing was written",
                )
        plain = [str.__str__(name) for name in copied]  # a str subclass (an Enum) stored as its text
        return self._append(lambda i, p, t: ActiveToolsChangeEntry(i, p, t, plain))

    def append_compaction(
        self,
        summary: str,
        first_kept_entry_id: Optional[str],
        tokens_before: int,
        details: Any = None,
        *,
        from_hook: Optional[bool] = None,
        usage: Optional[Dict[str, Any]] = None,
        retained_tail: Optional[Sequence[Any]] = None,
    ) -> str:
        """Record a compaction: the context starts with ``summary`` then ``first_kept_entry_id`` onward.

        ``first_kept_entry_id`` is not validated: an id off the path keeps no older entries.
        """
        tail = None if retained_tail is None else [message_to_dict(m) for m in retained_tail]
        from ..types import message_from_dict

        tail_messages = None if tail is None else [message_from_dict(m) for m in tail]
        return self._append(
            lambda i, p, t: CompactionEntry(
                i, p, t, summary, first_kept_entry_id, int(tokens_before), details, from_hook, usage, tail_messages
            )
        )

    def append_branch_summary(
        self,
        from_id: Optional[str],
        summary: str,
        details: Any = None,
        *,
        from_hook: Optional[bool] = None,
        usage: Optional[Dict[str, Any]] = None,
    ) -> str:
        """Append a ``branch_summary`` under the current leaf (``from_id`` None is stored as ``"root"``)."""
        source = from_id if from_id is not None else "root"
        return self._append(lambda i, p, t: BranchSummaryEntry(i, p, t, source, summary, details, from_hook, usage))

    def append_custom(self, custom_type: str, data: Any = None) -> str:
        """Append application state (not sent to the model unless a projector maps it).

        ``custom_type`` must be a string: anything else is ``SessionError("invalid_payload")`` and
        nothing is written (a stored one would make every later read of the entry fail).
        """
        if not isinstance(custom_type, str):
            raise SessionError(
                "invalid_payload",
                f"append_custom: custom_type must be a string, not {type(custom_type).__name__}; nothing was written",
            )
        return self._append(lambda i, p, t: CustomEntry(i, p, t, custom_type, data))

    def append_custom_message(self, custom_type: str, content: Any, display: bool = True, details: Any = None) -> str:
        """Append an application message that the model sees as a user message. ``content``: a
        string or a list of blocks (objects or their dicts); anything else, or a malformed block,
        is ``SessionError("invalid_payload")`` naming it, and nothing is written (a stored one
        would fail every later context)."""
        if not isinstance(content, str):
            if not isinstance(content, (list, tuple)):
                raise SessionError(
                    "invalid_payload",
                    f"append_custom_message: content must be a string or a list of blocks, not {type(content).__name__}",
                )
            content = [message_to_dict(b) if hasattr(b, "to_dict") else b for b in content]
            try:
                checked_custom_content(content)
            except ValueError as exc:
                raise SessionError("invalid_payload", f"append_custom_message: {exc}; nothing was written") from None
        return self._append(lambda i, p, t: CustomMessageEntry(i, p, t, custom_type, content, bool(display), details))

    def append_label(self, target_id: str, label: Optional[str]) -> str:
        """Label an entry (trimmed; None or blank clears). Unknown target: ``not_found``, nothing written."""
        with self._lock:
            if target_id not in self.storage or not self.storage.is_tree_node(target_id):
                raise SessionError("not_found", f"cannot label {target_id!r}: no such entry")
            return self._append(lambda i, p, t: LabelEntry(i, p, t, target_id, label))

    def set_name(self, name: Optional[str]) -> str:
        """Name the session (CR/LF runs become a space, trimmed; blank clears). Returns the entry id."""
        cleaned = clean_name(name)
        return self._append(lambda i, p, t: SessionInfoEntry(i, p, t, cleaned or ""))

    # ------------------------------------------------------------------ navigation

    @property
    def leaf_id(self) -> Optional[str]:
        """The entry the next append will hang under, the current position (None for a new root)."""
        return self.storage.leaf_id

    def move_to(self, entry_id: Optional[str], summary: Union[None, str, Mapping[str, Any]] = None) -> Optional[str]:
        """Move the leaf to ``entry_id`` (None: before the first root) and persist the move.

        The move is a ``leaf`` entry whose ``parentId`` and ``targetId`` are both ``entry_id``, so
        readers that ignore ``leaf`` entries and take the file's last entry as the leaf (the
        reference's ``SessionManager``) build the same branch as this one does.

        With ``summary`` (text, or a dict with ``summary`` and optional ``details``, ``usage``,
        ``from_hook``) a ``branch_summary`` entry is appended under the new position (its ``from_id``
        is ``entry_id`` or ``"root"``) and becomes the leaf; its id is returned, else None. A
        summary the storage would refuse (``invalid_payload``: details that are not JSON, a usage
        that is not an object) is refused before the move is written: nothing is. A write failure
        of the summary (``storage``: a full disk) comes after the move was recorded: the leaf is at
        ``entry_id`` in memory and in the file, and calling ``move_to`` again with the summary
        appends only the summary. Unknown ``entry_id``: ``not_found`` and nothing is written.
        """
        with self._lock:
            if entry_id is not None and (entry_id not in self.storage or not self.storage.is_tree_node(entry_id)):
                raise SessionError("not_found", f"cannot move to {entry_id!r}: no such entry")
            spec: Dict[str, Any] = {}
            if summary is not None:
                spec = {"summary": summary} if isinstance(summary, str) else dict(summary)
                source = entry_id if entry_id is not None else "root"
                probe = BranchSummaryEntry(
                    "summary-check", entry_id, iso_from_ms(self._clock()), source, str(spec.get("summary", "")),
                    spec.get("details"), spec.get("from_hook", spec.get("fromHook")), spec.get("usage"),
                )  # fmt: skip
                check = getattr(self.storage, "_encoded", None)  # a SessionStorage's (append's own check)
                if check is not None:
                    check(probe)  # invalid_payload now, before the leaf move is written
            if entry_id != self.storage.leaf_id:
                # Parented at its target, not at the leaf we leave: a reader that does not know
                # ``leaf`` entries (the reference's SessionManager takes the last entry as the leaf
                # and walks its parents) then resumes on the branch we moved to, and what it appends
                # after this entry hangs there too.
                self._append(lambda i, p, t: LeafEntry(i, entry_id, t, entry_id))
            if summary is None:
                return None
            return self.append_branch_summary(
                entry_id,
                str(spec.get("summary", "")),
                spec.get("details"),
                from_hook=spec.get("from_hook", spec.get("fromHook")),
                usage=spec.get("usage"),
            )

    # ------------------------------------------------------------------ reads

    def get_entry(self, entry_id: str) -> Optional[SessionEntry]:
        """The entry with this id, or None."""
        return self.storage.get_entry(entry_id)

    def entries(self, after: int = 0, limit: Optional[int] = None) -> List[SessionEntry]:
        """All entries in append order (``leaf`` bookkeeping entries included); ``after``/``limit`` slice."""
        with self._lock:
            ids = self.storage.entry_ids()
            end = len(ids) if limit is None else min(len(ids), after + max(0, limit))
            return self.storage.get_entries(ids[after:end])  # what iter_entries yields, decoded in bulk

    def _sorted_children(self, entry_id: Optional[str]) -> List[str]:
        ids = self.storage.child_ids(entry_id)
        timestamp_of = self.storage.timestamp_of
        ids.sort(key=lambda i: timestamp_order(timestamp_of(i)))  # stable: append order breaks ties
        return ids

    def children(self, entry_id: str) -> List[SessionEntry]:
        """Tree children of an entry, oldest first (a ``leaf`` entry only when something hangs under it).

        Oldest by time, not by the text of the timestamps: ``...00Z`` (no fraction) is before
        ``...00.500Z``, ``02:00+02:00`` is midnight UTC; timestamps that are no ISO time sort by
        their text; equal ones stay in append order (also when the clock went backwards meanwhile:
        then a later child sorts first, as its timestamp says)."""
        return [self.storage.get_entry(i) for i in self._sorted_children(entry_id)]  # type: ignore[misc]

    def get_branch(self, leaf_id: Any = _CURRENT) -> List[SessionEntry]:
        """The root→``leaf_id`` path (default: the current leaf; None gives []).

        Unknown id: ``not_found``; a missing parent on the way: ``invalid_session``.
        """
        with self._lock:
            start = self.storage.leaf_id if leaf_id is _CURRENT else leaf_id
            if start is None:
                return []
            ids = self.storage.path_to_root(start)
            ids.reverse()
            return self.storage.get_entries(ids)

    def get_tree(self) -> List[TreeNode]:
        """The whole tree: roots (null, self or unknown parent) with children oldest first (by time,
        as :meth:`children`). Iterative.

        Every entry of the session is reachable except ``leaf`` bookkeeping entries nothing hangs
        under; one that another writer appended under (a reader that does not know them takes one
        as its leaf) is a node, so what was written after it shows up where that writer put it.
        """
        with self._lock:
            storage = self.storage
            roots = []
            for entry_id in storage.entry_ids():
                if not storage.is_tree_node(entry_id):
                    continue
                parent = storage.parent_of(entry_id)
                if parent is None or parent == entry_id or parent not in storage:
                    roots.append(entry_id)
            roots.sort(key=lambda i: timestamp_order(storage.timestamp_of(i)))
            labels = storage.labels

            def node(entry_id: str) -> TreeNode:
                return TreeNode(storage.get_entry(entry_id), labels.get(entry_id))  # type: ignore[arg-type]

            result: List[TreeNode] = []
            seen = set()

            def grow(root_ids: List[str]) -> None:
                tops = [node(r) for r in root_ids]
                seen.update(root_ids)
                result.extend(tops)
                stack = list(tops)
                while stack:
                    current = stack.pop()
                    kids = [k for k in self._sorted_children(current.entry.id) if k not in seen]
                    seen.update(kids)
                    current.children = [node(k) for k in kids]
                    stack.extend(current.children)

            grow(roots)
            if len(seen) < len(storage):  # entries on a parent cycle have no root: show them anyway
                for entry_id in storage.entry_ids():
                    if entry_id not in seen and storage.is_tree_node(entry_id):
                        grow([entry_id])  # the earliest entry of the cycle stands in as its root
            return result

    @property
    def labels(self) -> Dict[str, str]:
        """Current labels by entry id."""
        return self.storage.labels

    def get_label(self, entry_id: str) -> Optional[str]:
        return self.storage.get_label(entry_id)

    @property
    def name(self) -> Optional[str]:
        """The session name (latest ``session_info``), or None."""
        return self.storage.name

    def build_context(
        self,
        leaf_id: Any = _CURRENT,
        *,
        entry_transforms: Iterable[EntryTransform] = (),
        projectors: Optional[Mapping[str, Projector]] = None,
    ) -> SessionContext:
        """Messages, model, thinking level and active tools to resume from."""
        with self._lock:
            if leaf_id is _CURRENT:
                return build_context(self.storage, entry_transforms=entry_transforms, projectors=projectors)
            return build_context(self.storage, leaf_id, entry_transforms=entry_transforms, projectors=projectors)

    def get_session_stats(self) -> SessionStats:
        """Message count, tokens and cost over the whole session (all branches)."""
        with self._lock:
            return get_session_stats(self.storage)

"""Upgrade parsed session files of format versions 1 and 2 to version 3 (spec session.md §3.4).

* v1 (header without ``version``): entries have no ids. Each entry gets an 8-character id and
  ``parentId`` = the previous entry's id (the first is a root); a compaction's ``firstKeptEntryIndex``
  (an index into the file's non-blank lines, header = 0) becomes ``firstKeptEntryId``. The ids
  are derived from the session id and the entry's position (unless ``new_id`` is given), so every
  read-only open of a v1 file, and the file a writable open rewrites, give an entry the same id:
  an id read from one open names the same entry in the next (to fork or move to it).
* v2 -> v3: messages with role ``hookMessage`` become role ``custom``.

Migration is idempotent: version-3 input is returned unchanged. Entries that gain ids are rewritten
in the reference key order (``type``, ``id``, ``parentId``, ``timestamp``, then the rest, in order).
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from .entries import CURRENT_VERSION

__all__ = ["migrate", "canonical_order"]


def canonical_order(entry: Dict[str, Any]) -> Dict[str, Any]:
    """The same entry with its envelope keys first, in reference order."""
    out = {key: entry[key] for key in ("type", "id", "parentId", "timestamp") if key in entry}
    out.update((k, v) for k, v in entry.items() if k not in out)
    return out


def _stable_ids(session_id: str) -> Callable[[Callable[[str], bool]], str]:
    """An id maker for the entries of one v1 file, in order: 8 hex digits of a hash of the session
    id, the entry's position and an attempt number (the next attempt on a collision; a full
    UUID-shaped id after 100), the same on every open of the file."""
    counter = iter(range(1 << 62))

    def new_id(exists: Callable[[str], bool]) -> str:
        position = next(counter)
        for attempt in range(100):
            digest = hashlib.sha256(f"{session_id}\0{position}\0{attempt}".encode("utf-8", "surrogatepass")).digest()
            if not exists(digest[:4].hex()):
                return digest[:4].hex()
        return str(uuid.UUID(bytes=digest[:16]))

    return new_id


def _v1_to_v2(entries: List[Dict[str, Any]], new_id: Callable[[Callable[[str], bool]], str]) -> List[Dict[str, Any]]:
    used: Set[str] = set()
    ids: List[str] = []
    for _ in entries:
        entry_id = new_id(used.__contains__)
        used.add(entry_id)
        ids.append(entry_id)
    migrated = []
    for index, entry in enumerate(entries):
        entry = dict(entry)
        entry["id"] = ids[index]
        entry["parentId"] = ids[index - 1] if index else None
        if entry.get("type") == "compaction" and "firstKeptEntryIndex" in entry:
            raw_index = entry.pop("firstKeptEntryIndex")
            if isinstance(raw_index, int) and 1 <= raw_index <= len(entries):
                entry["firstKeptEntryId"] = ids[raw_index - 1]
        migrated.append(canonical_order(entry))
    return migrated


def _v2_to_v3(entries: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    out = []
    for entry in entries:
        message = entry.get("message")
        if entry.get("type") == "message" and isinstance(message, dict) and message.get("role") == "hookMessage":
            entry = dict(entry)
            entry["message"] = dict(message, role="custom")
        out.append(entry)
    return out


def migrate(
    header: Dict[str, Any],
    entries: List[Dict[str, Any]],
    new_id: Optional[Callable[[Callable[[str], bool]], str]] = None,
) -> Tuple[Dict[str, Any], List[Dict[str, Any]], bool]:
    """``(header, entries, changed)`` upgraded to version 3. Inputs are not mutated.

    ``new_id(exists)`` makes the id of each v1 entry in turn; by default ids derived from the
    header's ``id`` and the entry's position (the same on every call for the same file)."""
    version = header.get("version", 1)
    if version >= CURRENT_VERSION:
        return header, entries, False
    if version < 2:
        entries = _v1_to_v2(entries, new_id or _stable_ids(str(header.get("id"))))
    entries = _v2_to_v3(entries)
    upgraded = {"type": "session", "version": CURRENT_VERSION}
    upgraded.update((k, v) for k, v in header.items() if k not in ("type", "version"))
    return upgraded, entries, True

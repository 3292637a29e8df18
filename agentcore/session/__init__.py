"""Sessions: a branching conversation tree stored as reference-compatible JSONL, in SQLite or in memory.

Start with :class:`Session` (``Session.create(path)``, ``Session.open(path)``, ``Session.in_memory()``
or ``Session(storage)``). Storages are imported lazily so ``import agentcore.session`` stays cheap.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any, Dict

from .context import ModelRef, SessionContext, SessionStats, build_context, get_session_stats
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
    UnknownEntry,
    entry_from_dict,
)
from .errors import SessionError, SessionLockedError
from .memory import MemorySessionStorage
from .session import Session, TreeNode
from .storage import SessionStorage

_LAZY: Dict[str, str] = {
    "JsonlSessionStorage": "jsonl",
    "SqliteSessionStorage": "sqlite",
    "SessionRepository": "repository",
    "SessionInfo": "repository",
    "attach_session": "agent_link",
    "restore_agent": "agent_link",
}

__all__ = [
    "Session",
    "TreeNode",
    "SessionStorage",
    "MemorySessionStorage",
    "JsonlSessionStorage",
    "SqliteSessionStorage",
    "SessionRepository",
    "SessionInfo",
    "SessionContext",
    "SessionStats",
    "ModelRef",
    "SessionError",
    "SessionLockedError",
    "SessionHeader",
    "SessionEntry",
    "MessageEntry",
    "ThinkingLevelChangeEntry",
    "ModelChangeEntry",
    "ActiveToolsChangeEntry",
    "CompactionEntry",
    "BranchSummaryEntry",
    "CustomEntry",
    "CustomMessageEntry",
    "LabelEntry",
    "SessionInfoEntry",
    "LeafEntry",
    "UnknownEntry",
    "entry_from_dict",
    "build_context",
    "get_session_stats",
    "attach_session",
    "restore_agent",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentcore.session' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value

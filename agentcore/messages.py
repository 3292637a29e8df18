"""Converting a transcript into what a model sees.

Two converters, for two needs:

* :func:`default_convert_to_llm` is the low-level loop's default (as in the reference design): a
  *filter* that keeps the standard roles (``user``, ``assistant``, ``toolResult``, ``system``) as
  the very same objects and drops everything else (application messages, notifications ...).
* :func:`convert_to_llm` is the rich converter, and the :class:`~agentcore.Agent`'s default: it
  additionally turns the standard custom messages (``bashExecution``, ``custom``,
  ``compactionSummary``, ``branchSummary``) into user messages, following spec agent-loop §1.5, so
  a session resumed after a compaction shows the model its summary. Unknown roles are dropped.

:data:`DROP` is the sentinel a ``convert_to_llm`` hook implementation returns to leave one message
out (see :mod:`agentcore.hookspecs`).

Neither converter raises for unknown input: a message without a recognised role is dropped.
"""

from __future__ import annotations

from typing import Any, Iterable, List, Optional

from ._util import field_of
from .types import TextContent, UserMessage, _is_mapping, content_from_dict, role_of

__all__ = [
    "DROP",
    "LLM_ROLES",
    "default_convert_to_llm",
    "convert_to_llm",
    "convert_message",
    "bash_execution_to_text",
    "COMPACTION_SUMMARY_PREFIX",
    "COMPACTION_SUMMARY_SUFFIX",
    "BRANCH_SUMMARY_PREFIX",
    "BRANCH_SUMMARY_SUFFIX",
]


class _Drop:
    """Sentinel type: "leave this message out of the model's context"."""

    _instance: Optional[_Drop] = None

    def __new__(cls) -> _Drop:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "DROP"

    def __bool__(self) -> bool:
        return False


DROP = _Drop()

LLM_ROLES = frozenset({"user", "assistant", "toolResult", "system"})

# Our own wording of the reference preambles. Note the reference asymmetry, kept on purpose: the
# compaction suffix starts with a newline, the branch suffix does not.
COMPACTION_SUMMARY_PREFIX = (
    "Earlier parts of this conversation were compacted to save space; what happened there is "
    "summarised below:\n\n<summary>\n"
)
COMPACTION_SUMMARY_SUFFIX = "\n</summary>"
BRANCH_SUMMARY_PREFIX = (
    "The conversation returns here from another branch it explored; that branch is summarised below:\n\n<summary>\n"
)
BRANCH_SUMMARY_SUFFIX = "</summary>"


def default_convert_to_llm(messages: Iterable[Any]) -> List[Any]:
    """Keep messages whose role is user/assistant/toolResult/system (same objects, same order)."""
    return [m for m in messages if role_of(m) in LLM_ROLES]


def bash_execution_to_text(message: Any) -> str:
    """The text a user-run shell command shows the model (spec agent-loop §1.5 bash format)."""
    command = field_of(message, "command", "command", "")
    output = field_of(message, "output", "output", "") or ""
    text = f"Ran `{command}`\n"
    text += f"```\n{output}\n```" if output else "(no output)"
    exit_code = field_of(message, "exit_code", "exitCode")
    if field_of(message, "cancelled", "cancelled", False):
        text += "\n\n(command cancelled)"
    elif exit_code is not None and exit_code != 0:
        text += f"\n\nCommand exited with code {exit_code}"
    full_path = field_of(message, "full_output_path", "fullOutputPath")
    if field_of(message, "truncated", "truncated", False) and full_path:
        text += f"\n\n[Output truncated. Full output: {full_path}]"
    return text


def _block(block: Any) -> Any:
    """A block of a custom message's content as a block object: a dict block (a custom message
    given as a dict) is read, since providers send block objects only; one that does not read is
    kept as it is (the converters never raise)."""
    if not _is_mapping(block):
        return block
    try:
        return content_from_dict(block)
    except (TypeError, ValueError):
        return block


def _user(text_or_blocks: Any, timestamp: Any) -> UserMessage:
    if isinstance(text_or_blocks, str):
        content: Any = [TextContent(text_or_blocks)]
    else:
        content = [_block(b) for b in text_or_blocks or []]
    if timestamp is None:
        return UserMessage(content=content)
    return UserMessage(content=content, timestamp=timestamp)


def convert_message(message: Any) -> Any:
    """Convert one message for the model, or return :data:`DROP` to leave it out."""
    role = role_of(message)
    if role in LLM_ROLES:
        return message
    timestamp = field_of(message, "timestamp", "timestamp")
    if role == "bashExecution":
        if field_of(message, "exclude_from_context", "excludeFromContext", False):
            return DROP
        return _user(bash_execution_to_text(message), timestamp)
    if role == "custom":
        return _user(field_of(message, "content", "content", ""), timestamp)
    if role == "compactionSummary":
        summary = field_of(message, "summary", "summary", "") or ""
        return _user(COMPACTION_SUMMARY_PREFIX + summary + COMPACTION_SUMMARY_SUFFIX, timestamp)
    if role == "branchSummary":
        summary = field_of(message, "summary", "summary", "") or ""
        return _user(BRANCH_SUMMARY_PREFIX + summary + BRANCH_SUMMARY_SUFFIX, timestamp)
    return DROP


def convert_to_llm(messages: Iterable[Any]) -> List[Any]:
    """The Agent's default converter: standard roles pass through unchanged, the
    standard custom messages become user messages, everything else is dropped."""
    out = []
    for message in messages:
        converted = convert_message(message)
        if converted is not DROP:
            out.append(converted)
    return out

"""Replaying a conversation to a (possibly different) model: spec/providers.md §6.

``transform_messages(messages, model, normalize_id)`` is run by every wire API before converting
messages to its wire shape. It never mutates its input; changed messages are copies.

Pass 1, per message ("same model" = same ``provider``, ``api`` and ``model`` id as the target):

* user messages are unchanged;
* assistant thinking: redacted -> kept only for the same model; signed and same model -> kept;
  blank -> dropped; otherwise kept for the same model and turned into plain text for another
  (no ``<thinking>`` tags, so models do not imitate them);
* assistant text: the same model keeps its signature, another model gets a fresh text block;
* tool calls for another model lose ``thought_signature`` and get ``normalize_id(id)``; tool
  results that follow are rewritten to the new id. Two different ids that ``normalize_id`` makes
  alike (cut to the same 40 or 64 characters: Google's ``{tool name}_{ms}_{n}`` ids of a long
  tool name) stay apart: the later one keeps all but 9 of those characters and ends in ``_`` and
  8 hex digits of a hash of its own id (no longer, and in the ``[A-Za-z0-9_]`` every API takes).
* tool call ``arguments`` that are not an object (a session file written by another program, a
  hand-edited one, a ``ToolCall`` built in code) are sent as one: a JSON text of an object is
  decoded, anything else is sent as ``{}`` (what a streamed call whose arguments were not an object
  gets, spec §5). Every API refuses a request whose tool call input is not an object, so one such
  call would fail every later turn of the session. The stored message is unchanged.

Pass 2: assistant messages that ended in ``error``/``aborted`` are dropped, and tool calls left
without results when the next assistant or user message arrives get a synthetic error result
("No result provided") inserted right there. Tool calls at the very end are left alone, unless
some of their results follow (a batch cut short, say by a killed process, whose other calls nothing
will answer): those get the synthetic result too, at the end.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any, Callable, Dict, List, Optional

from ..types import (
    AssistantMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    _is_mapping,
    message_from_dict,
    role_of,
)

__all__ = ["transform_messages", "is_same_model"]

NO_RESULT_TEXT = "No result provided"


def is_same_model(message: AssistantMessage, model: Any) -> bool:
    """True when ``message`` was produced by ``model`` (provider, api and id all equal)."""
    return message.provider == model.provider and message.api == model.api and message.model == model.id


def transform_messages(
    messages: List[Any], model: Any, normalize_id: Optional[Callable[[str], str]] = None
) -> List[Any]:
    """Apply both passes of spec §6; ``messages`` may hold message objects or reference dicts."""
    first = _pass_one([_as_message(m) for m in messages], model, normalize_id)
    return _pass_two(first)


def _as_message(message: Any) -> Any:
    return message_from_dict(message) if _is_mapping(message) else message  # fast for our own types


def _pass_one(messages: List[Any], model: Any, normalize_id: Optional[Callable[[str], str]]) -> List[Any]:
    remapped: Dict[str, str] = {}  # original id -> the id sent
    owners: Dict[str, str] = {}  # the id sent -> its original id
    out: List[Any] = []
    for message in messages:
        role = role_of(message)
        if role == "assistant":
            out.append(_transform_assistant(message, model, normalize_id, remapped, owners))
        elif role == "toolResult" and message.tool_call_id in remapped:
            clone = copy.copy(message)
            clone.tool_call_id = remapped[message.tool_call_id]
            out.append(clone)
        else:
            out.append(message)
    return out


def _transform_assistant(
    message: AssistantMessage,
    model: Any,
    normalize_id: Optional[Callable[[str], str]],
    remapped: Dict[str, str],
    owners: Dict[str, str],
) -> AssistantMessage:
    same = is_same_model(message, model)
    blocks: List[Any] = []
    changed = False
    for block in message.content:
        new = _transform_block(block, same, normalize_id, remapped, owners)
        if new is not block:
            changed = True
        if new is not None:
            blocks.append(new)
    if not changed:
        return message
    clone = copy.copy(message)
    clone.content = blocks
    return clone


def _transform_block(
    block: Any,
    same: bool,
    normalize_id: Optional[Callable[[str], str]],
    remapped: Dict[str, str],
    owners: Dict[str, str],
) -> Any:
    """The block to replay (``block`` itself when unchanged), or None to drop it."""
    if isinstance(block, ThinkingContent):
        if block.redacted:
            return block if same else None
        if same and block.thinking_signature:
            return block
        if not block.thinking or not block.thinking.strip():
            return None
        return block if same else TextContent(text=block.thinking)
    if isinstance(block, TextContent):
        if same or block.text_signature is None:
            return block
        return TextContent(text=block.text)
    if isinstance(block, ToolCall):
        arguments = block.arguments
        if type(arguments) is not dict:
            arguments = _object_arguments(arguments)
        if same:
            owners.setdefault(block.id, block.id)
            if arguments is block.arguments:
                return block
            clone = copy.copy(block)
            clone.arguments = arguments
            return clone
        new_id = normalize_id(block.id) if normalize_id is not None else block.id
        new_id = _distinct(new_id, block.id, owners)
        if new_id != block.id:
            remapped[block.id] = new_id
        if new_id == block.id and block.thought_signature is None and arguments is block.arguments:
            return block
        return ToolCall(id=new_id, name=block.name, arguments=arguments)
    return block


def _object_arguments(arguments: Any) -> Dict[str, Any]:
    """``arguments`` (not a dict) as the object a request must carry: a mapping as a dict, the JSON
    text of an object decoded, anything else (None, a list, a number, other text) ``{}``."""
    if _is_mapping(arguments):
        return dict(arguments)
    if isinstance(arguments, str):
        try:
            decoded = json.loads(arguments)
        except (ValueError, RecursionError):
            return {}
        if type(decoded) is dict:
            return decoded
    return {}


def _distinct(new_id: str, original: str, owners: Dict[str, str]) -> str:
    """``new_id``, or a variant of it when another id of the request was already sent as it."""
    candidate = new_id
    attempt = 0
    while owners.setdefault(candidate, original) != original:
        attempt += 1
        digest = hashlib.sha256(f"{original}:{attempt}".encode("utf-8", "surrogatepass")).hexdigest()
        candidate = f"{new_id[: max(len(new_id) - 9, 0)]}_{digest[:8]}"
    return candidate


def _pass_two(messages: List[Any]) -> List[Any]:
    out: List[Any] = []
    pending: List[ToolCall] = []  # tool calls of the last assistant message still without a result
    for message in messages:
        role = role_of(message)
        if role == "assistant":
            if message.stop_reason in ("error", "aborted"):
                continue
            _flush_orphans(pending, out)
            pending = list(message.tool_calls)
        elif role == "toolResult":
            pending = [c for c in pending if c.id != message.tool_call_id]
        elif role == "user":
            _flush_orphans(pending, out)
            pending = []
        out.append(message)
    if pending and out and role_of(out[-1]) == "toolResult":
        # calls of a batch whose other results were recorded (a process killed while it ran):
        # nothing will answer them, and an unanswered call fails every request (continue_())
        _flush_orphans(pending, out)
    return out


def _flush_orphans(pending: List[ToolCall], out: List[Any]) -> None:
    for call in pending:
        out.append(
            ToolResultMessage(
                tool_call_id=call.id, tool_name=call.name, content=[TextContent(text=NO_RESULT_TEXT)], is_error=True
            )
        )
    pending.clear()

"""Mistral on the ``openai-completions`` wire API: typed content chunks and tool-call ids.

Mistral's chat completions endpoint (``provider`` ``"mistral"`` or an ``api.mistral.ai`` base URL)
speaks the OpenAI shape with three differences the reference's Mistral provider handles:

* reasoning models (Magistral) stream ``delta.content`` as a *list* of typed chunks:
  ``{"type": "thinking", "thinking": [{"type": "text", "text": ...}]}`` and
  ``{"type": "text", "text": ...}`` (plain strings also occur). :func:`iter_content_parts` turns
  such a list into ``("thinking" | "text", text)`` pieces; unknown chunk types are skipped.
* the same chunks go back on the next request: :func:`assistant_content_parts` replays an
  assistant turn's thinking and text blocks, in order, as that list (thinking from another model
  was already turned into text by ``transform_messages``).
* tool-call ids must be exactly 9 characters of ``[A-Za-z0-9]``. :class:`MistralIdNormalizer`
  maps other providers' ids to such ids, deterministically and without collisions within one
  request; ``transform_messages`` applies the same mapping to the tool results that follow.
  A streamed id that is literally ``"null"`` (seen from Mistral) is replaced by
  :func:`stream_tool_call_id` of the call's index.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Dict, Iterator, List, Optional, Tuple

from ..types import TextContent, ThinkingContent
from .base import sanitize_surrogates
from .writer import StreamWriter

__all__ = [
    "MISTRAL_TOOL_CALL_ID_LENGTH",
    "mistral_tool_call_id",
    "MistralIdNormalizer",
    "stream_tool_call_id",
    "iter_content_parts",
    "feed_content_parts",
    "assistant_content_parts",
]

MISTRAL_TOOL_CALL_ID_LENGTH = 9
_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]")
_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def mistral_tool_call_id(tool_call_id: str, attempt: int = 0) -> str:
    """A 9-character alphanumeric id for ``tool_call_id``.

    An id that is 9 alphanumerics once other characters are removed keeps them (first attempt
    only); any other id becomes 9 base-36 digits of a hash of the id and ``attempt``, so a
    collision is resolved by asking again with the next attempt.
    """
    alnum = _NOT_ALNUM.sub("", tool_call_id)
    if attempt == 0 and len(alnum) == MISTRAL_TOOL_CALL_ID_LENGTH:
        return alnum
    digest = hashlib.sha256(f"{tool_call_id}:{attempt}".encode()).digest()
    number = int.from_bytes(digest[:8], "big")
    out = []
    for _ in range(MISTRAL_TOOL_CALL_ID_LENGTH):
        number, rem = divmod(number, 36)
        out.append(_BASE36[rem])
    return "".join(out)


class MistralIdNormalizer:
    """Maps tool-call ids to Mistral ids for one request: the same id always gets the same new
    id, and two different ids never share one (the second is re-hashed)."""

    def __init__(self) -> None:
        self._new: Dict[str, str] = {}
        self._owner: Dict[str, str] = {}

    def __call__(self, tool_call_id: str) -> str:
        known = self._new.get(tool_call_id)
        if known is not None:
            return known
        attempt = 0
        new = mistral_tool_call_id(tool_call_id)
        while self._owner.get(new, tool_call_id) != tool_call_id:
            attempt += 1
            new = mistral_tool_call_id(tool_call_id, attempt)
        self._new[tool_call_id] = new
        self._owner[new] = tool_call_id
        return new


def stream_tool_call_id(call_id: Any, index: Any) -> str:
    """The id of a streamed Mistral tool call: its own, or one derived from its ``index`` when
    the server sent none or the string ``"null"`` (so the call and its result still match)."""
    if call_id and call_id != "null":
        return str(call_id)
    return mistral_tool_call_id(f"toolcall:{index if isinstance(index, int) else 0}", 1)


def iter_content_parts(content: List[Any]) -> Iterator[Tuple[str, str]]:
    """``("text" | "thinking", text)`` for each non-empty piece of a list-valued ``delta.content``.

    A thinking chunk's inner text parts are joined; strings and ``text`` chunks are text; chunks
    of other types (and malformed ones) are skipped, as the reference does.
    """
    for part in content:
        if type(part) is str:
            if part:
                yield "text", part
            continue
        if type(part) is not dict:
            continue
        kind = part.get("type")
        if kind == "thinking":
            inner = part.get("thinking")
            if type(inner) is str:
                text = inner
            elif type(inner) is list:
                text = "".join(p["text"] for p in inner if type(p) is dict and type(p.get("text")) is str and p["text"])
            else:
                continue
            if text:
                yield "thinking", text
        elif kind == "text" or kind is None:
            value = part.get("text")
            if type(value) is str and value:
                yield "text", value


def feed_content_parts(writer: StreamWriter, content: List[Any]) -> None:
    """Stream a list-valued ``delta.content`` into ``writer``: text pieces extend the open text
    block (or open one), thinking pieces the open unsigned thinking block (or open one), so a
    switch of kind ends the previous block as for every other chunk."""
    if len(content) == 1:  # Magistral's usual delta: one thinking chunk with one text part
        part = content[0]
        if type(part) is dict and part.get("type") == "thinking":
            inner = part.get("thinking")
            if type(inner) is list and len(inner) == 1 and type(inner[0]) is dict:
                text = inner[0].get("text")
                if type(text) is str:
                    if text:
                        _thinking(writer, text)
                    return
    for kind, piece in iter_content_parts(content):
        if kind == "thinking":
            _thinking(writer, piece)
            continue
        if writer.current_kind != "text":
            writer.end_current()
            writer.start_text()
        writer.append_text(writer.current, piece)  # type: ignore[arg-type]


def _thinking(writer: StreamWriter, text: str) -> None:
    # unsigned, unlike reasoning_content blocks: it goes back as a thinking chunk (compat
    # supportsThinkingContentParts), not under a delta field name
    current = writer.current
    if not (writer.current_kind == "thinking" and writer.block(current).thinking_signature is None):  # type: ignore[arg-type]
        writer.end_current()
        current = writer.start_thinking()
    writer.append_thinking(current, text)  # type: ignore[arg-type]


def assistant_content_parts(content: List[Any]) -> Optional[List[Dict[str, Any]]]:
    """The Mistral ``content`` list of an assistant turn: its non-blank thinking and text blocks
    in order, or None when there are none. Redacted thinking is never sent."""
    parts: List[Dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextContent):
            if block.text and block.text.strip():
                parts.append({"type": "text", "text": sanitize_surrogates(block.text)})
        elif isinstance(block, ThinkingContent):
            if not block.redacted and block.thinking and block.thinking.strip():
                thought = sanitize_surrogates(block.thinking)
                parts.append({"type": "thinking", "thinking": [{"type": "text", "text": thought}]})
    return parts or None

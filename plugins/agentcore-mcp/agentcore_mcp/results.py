"""MCP ``tools/call`` results and progress notifications as agentcore values.

=====================================  ==========================================================
MCP                                    agentcore
=====================================  ==========================================================
``text``                               ``TextContent(text)``
``image`` (base64 + mimeType)          ``ImageContent(data, mime_type)`` for PNG, JPEG, GIF and
                                       WebP with valid base64 (what every provider accepts); else
                                       ``TextContent("[image <mime>, N bytes base64, not shown:
                                       <why>]")``, since a provider refuses every later request of
                                       a conversation holding such an image
``audio``                              ``TextContent("[audio <mime>, N bytes base64]")``
``resource`` with ``text``             ``TextContent("[resource <uri>]\\n<text>")``
``resource`` with an image ``blob``    ``ImageContent(blob, mime_type)`` (PNG, JPEG, GIF, WebP with
                                       valid base64 as above)
``resource`` with another ``blob``     ``TextContent("[resource <uri> (<mime>), N bytes base64]")``
``resource_link``                      ``TextContent("[resource link <uri>] <name>: <description>")``
another type, or an invalid block      ``TextContent("[MCP content of type '<type>' not shown:
                                       <why>]")`` (a future type, or say a ``resource`` with
                                       neither ``text`` nor ``blob``); the result's other
                                       blocks stay (see :func:`repaired_call_result`)
``structuredContent``                  ``details`` (the object); also a JSON text block when the
                                       content has no text block of its own
``isError: true``                      :class:`MCPToolError` raised with the server's text (the
                                       ``structuredContent`` as JSON when there is no text), which
                                       the agent loop turns into an error tool result
``notifications/progress``             ``on_update(AgentToolResult(text, details={"progress",
                                       "total", "message"}))`` -> ``tool_execution_update``
=====================================  ==========================================================

Text is capped (``max_chars``; :class:`~agentcore_mcp.MCPServer` passes its ``max_output_chars``,
50,000 by default, what the built-in ``read``/``bash`` tools and ``fetch_url`` keep too): the text
blocks of a result, an error's text included, keep their first ``max_chars`` characters in order,
later text blocks are dropped, and a last text block says how much was cut and how to see the rest.
Images are not counted and stay. ``details`` (``structuredContent``) is not cut.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any, Callable, Dict, List, Optional

import mcp_types
from mcp_types.methods import validate_server_result
from pydantic import ValidationError

from agentcore.tools import AgentToolResult
from agentcore.types import ImageContent, TextContent

from .errors import MCPToolError


def to_tool_result(
    result: Any,
    server: str,
    tool: str,
    redact: Optional[Callable[[str], str]] = None,
    max_chars: Optional[int] = None,
) -> AgentToolResult:
    """The ``AgentToolResult`` of an MCP ``CallToolResult``, its text cut to ``max_chars``
    characters (None: not cut; see the module docstring); raises :class:`MCPToolError` when the
    result says ``isError`` (its text passed through ``redact``: the server's secrets masked)."""
    blocks: List[Any] = []
    for item in result.content or ():
        blocks.extend(content_blocks(item))
    structured = getattr(result, "structured_content", None)
    if result.is_error:
        text = "\n".join(b.text for b in blocks if isinstance(b, TextContent)).strip()
        if not text and structured is not None:  # an error told only as data: still the model's to read
            text = json.dumps(structured, ensure_ascii=False)
        if redact is not None:
            text = redact(text)
        if max_chars is not None and len(text) > max_chars:
            text = f"{text[:max_chars]}\n\n{truncation_notice(max_chars, len(text))}"
        raise MCPToolError(
            text or f"MCP tool {tool!r} on server {server!r} reported an error without a message",
            server=server,
            tool=tool,
        )
    if structured is not None and not any(isinstance(b, TextContent) for b in blocks):
        blocks.append(TextContent(json.dumps(structured, ensure_ascii=False)))
    if max_chars is not None:
        blocks = cap_text(blocks, max_chars)
    return AgentToolResult(content=blocks, details=structured)


def cap_text(blocks: List[Any], max_chars: int) -> List[Any]:
    """``blocks`` with their text cut to ``max_chars`` characters in all (see the module
    docstring); the same list when it holds no more than that."""
    total = sum(len(b.text) for b in blocks if isinstance(b, TextContent))
    if total <= max_chars:
        return blocks
    kept: List[Any] = []
    left = max_chars
    for block in blocks:
        if isinstance(block, TextContent):
            if left == 0:
                continue
            if len(block.text) > left:
                block = TextContent(block.text[:left])
            left -= len(block.text)
        kept.append(block)
    kept.append(TextContent(truncation_notice(max_chars, total)))
    return kept


def truncation_notice(shown: int, total: int) -> str:
    """What a cut result ends with: the sizes, and how the model can see the rest."""
    return (
        f"[Output truncated: showing the first {shown:,} of {total:,} characters. "
        "Ask the tool for less (a narrower query, a range, a page) to see the rest.]"
    )


def content_blocks(item: Any) -> List[Any]:
    """One MCP content item as agentcore content blocks (see the module table)."""
    kind = getattr(item, "type", None)
    if kind == "text":
        return [TextContent(item.text)]
    if kind == "image":
        return [_image_block(item.data, item.mime_type)]
    if kind == "audio":
        return [TextContent(f"[audio {item.mime_type}, {len(item.data)} bytes base64]")]
    if kind == "resource_link":
        text = f"[resource link {item.uri}] {item.name}"
        if getattr(item, "description", None):
            text += f": {item.description}"
        return [TextContent(text)]
    if kind == "resource":
        return [_resource_block(item.resource)]
    return [TextContent(f"[unsupported MCP content of type {kind!r}]")]


def _resource_block(res: Any) -> Any:
    uri = str(res.uri)
    mime = getattr(res, "mime_type", None)
    text = getattr(res, "text", None)
    if text is not None:
        return TextContent(f"[resource {uri}]\n{text}")
    blob = getattr(res, "blob", "") or ""
    if _image_problem(blob, mime) is None:
        return _image_block(blob, mime)
    return TextContent(f"[resource {uri} ({mime or 'application/octet-stream'}), {len(blob)} bytes base64]")


#: the image types every provider accepts (Anthropic, OpenAI and Gemini alike); the built-in
#: ``read`` tool attaches no other
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_WHITESPACE = re.compile(r"\s+")


def _image_block(data: str, mime: Optional[str]) -> Any:
    """An ``ImageContent`` for an image a provider accepts (type lower-cased, line breaks taken
    out of the base64), else a text block saying what the image was and why it is not shown."""
    problem = _image_problem(data, mime)
    if problem is not None:
        return TextContent(f"[image {mime}, {len(data)} bytes base64, not shown: {problem}]")
    return ImageContent(_WHITESPACE.sub("", data), str(mime).strip().lower())


def _image_problem(data: str, mime: Optional[str]) -> Optional[str]:
    """Why a provider would refuse the image, or None when it is fine."""
    if not isinstance(mime, str) or mime.strip().lower() not in IMAGE_TYPES:
        return "models accept only PNG, JPEG, GIF and WebP images"
    compact = _WHITESPACE.sub("", data)
    try:
        base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        return "its data is not valid base64"
    return None if compact else "it is empty"


def progress_update(progress: float, total: Optional[float], message: Optional[str]) -> AgentToolResult:
    """The partial result a progress notification becomes."""
    if message:
        text = message
    elif total:
        text = f"progress {progress:g}/{total:g}"
    else:
        text = f"progress {progress:g}"
    details: Dict[str, Any] = {"progress": progress, "total": total, "message": message}
    return AgentToolResult(content=[TextContent(text)], details=details)


#: the content types of MCP and the SDK's model of each (for saying what is wrong with one)
_CONTENT_MODELS = {
    "text": "TextContent",
    "image": "ImageContent",
    "audio": "AudioContent",
    "resource_link": "ResourceLink",
    "resource": "EmbeddedResource",
}


def repaired_call_result(result: Any, version: str) -> Any:
    """A raw ``tools/call`` ``result`` the SDK accepts although some of its content blocks are
    of a type it does not know (a later protocol's) or not valid MCP: ``result`` itself when it
    is valid, else a copy with each such block replaced by a text block naming its type and the
    problem (the SDK validates a result as a whole, so one such block would otherwise cost the
    whole result). A result that is invalid for another reason is returned unchanged: the SDK's
    error then says what is wrong with it."""
    content = result.get("content") if isinstance(result, dict) else None
    if not isinstance(content, list) or _call_result_valid(result, version):
        return result
    if not _call_result_valid({**result, "content": []}, version):
        return result  # something other than a block is wrong
    blocks = [
        block if _call_result_valid({**result, "content": [block]}, version) else _unknown_block_note(block)
        for block in content
    ]
    fixed = {**result, "content": blocks}
    return fixed if _call_result_valid(fixed, version) else result


def _call_result_valid(result: Dict[str, Any], version: str) -> bool:
    """Whether the SDK reads ``result`` as a ``CallToolResult`` of protocol ``version``."""
    try:
        validate_server_result("tools/call", version, result)
    except ValidationError:
        return False
    except (KeyError, ValueError):  # a version the SDK has no table for: the model decides
        pass
    try:
        mcp_types.CallToolResult.model_validate(result, by_name=False)
    except ValidationError:
        return False
    return True


def _unknown_block_note(block: Any) -> Dict[str, str]:
    """The text block that stands for a content ``block`` the SDK would refuse."""
    if not isinstance(block, dict):
        text = f"[MCP content not shown: it is not an object ({json.dumps(block)[:40]})]"
    else:
        kind = block.get("type")
        if isinstance(kind, str) and kind in _CONTENT_MODELS:
            why = f"it is not valid MCP ({_block_problem(block, _CONTENT_MODELS[kind])})"
        else:
            why = "this client does not know that type"
        text = f"[MCP content of type {kind!r} not shown: {why}]"
    return {"type": "text", "text": text}


def _block_problem(block: Dict[str, Any], model: str) -> str:
    """The first problem the SDK finds with ``block``, as ``"where: what"``."""
    try:
        getattr(mcp_types, model).model_validate(block, by_name=False)
    except ValidationError as exc:
        first = exc.errors()[0]
        # the union's branch names (TextResourceContents...) say nothing to a reader
        where = ".".join(str(p) for p in first.get("loc", ()) if not str(p)[:1].isupper()) or "the block"
        return f"{where}: {first.get('msg', 'invalid')}"
    return "not accepted in this protocol version"

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

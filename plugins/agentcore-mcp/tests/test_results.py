"""The mapping of MCP results to agentcore values, without a server."""

from __future__ import annotations

import mcp_types as t
import pytest
from agentcore_mcp import MCPToolError
from agentcore_mcp.results import content_blocks, progress_update, to_tool_result

from agentcore.types import ImageContent, TextContent

PNG = "iVBORw0KGgo="


def test_text_and_image():
    assert content_blocks(t.TextContent(type="text", text="hi")) == [TextContent("hi")]
    assert content_blocks(t.ImageContent(type="image", data=PNG, mime_type="image/png")) == [
        ImageContent(PNG, "image/png")
    ]


def test_embedded_resources_text_image_and_other_blob():
    text = t.EmbeddedResource(type="resource", resource=t.TextResourceContents(uri="file:///a.txt", text="A"))
    image = t.EmbeddedResource(
        type="resource", resource=t.BlobResourceContents(uri="file:///a.png", blob=PNG, mime_type="image/png")
    )
    other = t.EmbeddedResource(
        type="resource", resource=t.BlobResourceContents(uri="file:///a.gz", blob="AAAA", mime_type="application/gzip")
    )
    assert content_blocks(text) == [TextContent("[resource file:///a.txt]\nA")]
    assert content_blocks(image) == [ImageContent(PNG, "image/png")]
    assert content_blocks(other) == [TextContent("[resource file:///a.gz (application/gzip), 4 bytes base64]")]


def test_resource_link_and_audio():
    link = t.ResourceLink(type="resource_link", uri="file:///b", name="b", description="the b file")
    assert content_blocks(link) == [TextContent("[resource link file:///b] b: the b file")]
    audio = t.AudioContent(type="audio", data="AAAA", mime_type="audio/wav")
    assert content_blocks(audio) == [TextContent("[audio audio/wav, 4 bytes base64]")]


def test_structured_content_becomes_details_and_json_text_when_no_text():
    only = to_tool_result(t.CallToolResult(content=[], structured_content={"x": 1}), "s", "tool")
    assert only.content == [TextContent('{"x": 1}')] and only.details == {"x": 1}
    both = to_tool_result(
        t.CallToolResult(content=[t.TextContent(type="text", text="x is 1")], structured_content={"x": 1}), "s", "tool"
    )
    assert both.content == [TextContent("x is 1")] and both.details == {"x": 1}


def test_is_error_raises_with_the_text_redacted():
    result = t.CallToolResult(content=[t.TextContent(type="text", text="bad key sk-123456")], is_error=True)
    with pytest.raises(MCPToolError) as info:
        to_tool_result(result, "srv", "tool", lambda s: s.replace("sk-123456", "***"))
    assert str(info.value) == "bad key ***" and info.value.server == "srv" and info.value.tool == "tool"
    with pytest.raises(MCPToolError, match="'tool' on server 'srv' reported an error without a message"):
        to_tool_result(t.CallToolResult(content=[], is_error=True), "srv", "tool")


def test_progress_update_text():
    assert progress_update(1, 4, None).content == [TextContent("progress 1/4")]
    assert progress_update(1, None, None).content == [TextContent("progress 1")]
    assert progress_update(2, 4, "halfway").details == {"progress": 2, "total": 4, "message": "halfway"}

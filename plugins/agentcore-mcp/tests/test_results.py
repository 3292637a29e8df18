"""The mapping of MCP results to agentcore values, without a server."""

from __future__ import annotations

import mcp_types as t
import pytest
from agentcore_mcp import MCPToolError
from agentcore_mcp.results import cap_text, content_blocks, progress_update, to_tool_result

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


def _text(value):
    return t.TextContent(type="text", text=value)


def test_text_over_the_cap_is_cut_in_order_images_stay_and_a_note_says_how_much():
    image = t.ImageContent(type="image", data=PNG, mime_type="image/png")
    result = t.CallToolResult(content=[_text("a" * 30), image, _text("b" * 30), _text("c" * 10)])
    out = to_tool_result(result, "s", "tool", max_chars=40)
    assert out.content[:3] == [TextContent("a" * 30), ImageContent(PNG, "image/png"), TextContent("b" * 10)]
    assert len(out.content) == 4  # the c block is dropped whole
    note = out.content[3].text
    assert (
        note.startswith("[Output truncated: showing the first 40 of 70 characters.") and "Ask the tool for less" in note
    )


def test_text_within_the_cap_or_without_one_is_unchanged():
    content = [_text("a" * 30), _text("b" * 40)]
    for max_chars in (70, 1000, None):
        out = to_tool_result(t.CallToolResult(content=content), "s", "tool", max_chars=max_chars)
        assert out.content == [TextContent("a" * 30), TextContent("b" * 40)]
    blocks = [TextContent("x")]
    assert cap_text(blocks, 1) is blocks


def test_the_json_text_of_structured_content_is_capped_but_details_are_whole():
    data = {"rows": ["r" * 50] * 4}
    out = to_tool_result(t.CallToolResult(content=[], structured_content=data), "s", "tool", max_chars=60)
    assert out.details == data
    assert out.content[0].text == '{"rows": ["' + "r" * 49 and "of 226 characters" in out.content[1].text


def test_an_error_text_over_the_cap_is_cut_after_its_secrets_are_masked():
    secret = "sk-" + "9" * 30
    result = t.CallToolResult(content=[_text("e" * 5 + secret + "e" * 500)], is_error=True)
    with pytest.raises(MCPToolError) as info:
        to_tool_result(result, "srv", "tool", lambda s: s.replace(secret, "***"), max_chars=10)
    message = str(info.value)
    assert message.startswith("eeeee***ee\n\n[Output truncated: showing the first 10 of 508 characters.")
    assert "9999" not in message


def test_an_image_a_provider_would_refuse_becomes_a_note_not_an_image():
    # an SVG, or data that is not base64, in the transcript makes the provider refuse every later
    # request of the conversation (HTTP 400), so it never becomes an ImageContent
    svg = t.ImageContent(type="image", data="PHN2Zz48L3N2Zz4=", mime_type="image/svg+xml")
    assert content_blocks(svg) == [
        TextContent(
            "[image image/svg+xml, 16 bytes base64, not shown: models accept only PNG, JPEG, GIF and WebP images]"
        )
    ]
    broken = t.ImageContent(type="image", data="!!not base64", mime_type="image/png")
    assert content_blocks(broken) == [
        TextContent("[image image/png, 12 bytes base64, not shown: its data is not valid base64]")
    ]
    empty = t.ImageContent(type="image", data="", mime_type="image/png")
    assert content_blocks(empty) == [TextContent("[image image/png, 0 bytes base64, not shown: it is empty]")]
    # line-wrapped base64 and an upper-case type are what providers take once normalised
    wrapped = t.ImageContent(type="image", data=PNG[:4] + "\r\n" + PNG[4:], mime_type=" Image/PNG")
    assert content_blocks(wrapped) == [ImageContent(PNG, "image/png")]
    blob = t.EmbeddedResource(
        type="resource",
        resource=t.BlobResourceContents(uri="file:///a.svg", blob="PHN2Zz48L3N2Zz4=", mime_type="image/svg+xml"),
    )
    assert content_blocks(blob) == [TextContent("[resource file:///a.svg (image/svg+xml), 16 bytes base64]")]


def test_an_error_given_only_as_structured_content_keeps_it_as_its_message():
    result = t.CallToolResult(content=[], structured_content={"error": "quota exceeded"}, is_error=True)
    with pytest.raises(MCPToolError) as info:
        to_tool_result(result, "srv", "tool")
    assert str(info.value) == '{"error": "quota exceeded"}'


def test_blocks_the_sdk_cannot_read_become_notes_and_the_rest_stays():
    from agentcore_mcp.results import repaired_call_result

    fine = {"type": "text", "text": "kept"}
    raw = {"content": [fine, {"type": "video", "url": "x"}, 7, {"type": "text", "text": 5}], "isError": False}
    for version in ("2025-06-18", "2025-11-25"):
        fixed = repaired_call_result(raw, version)
        assert [b["text"] for b in fixed["content"]] == [
            "kept",
            "[MCP content of type 'video' not shown: this client does not know that type]",
            "[MCP content not shown: it is not an object (7)]",
            "[MCP content of type 'text' not shown: it is not valid MCP (text: Input should be a valid string)]",
        ]
        assert t.CallToolResult.model_validate(fixed, by_name=False).content[0].text == "kept"
    modern = {**raw, "resultType": "complete"}
    assert repaired_call_result(modern, "2026-07-28")["resultType"] == "complete"
    assert len(repaired_call_result(modern, "2026-07-28")["content"]) == 4
    valid = {"content": [fine]}
    assert repaired_call_result(valid, "2025-11-25") is valid
    odd = repaired_call_result({"content": [{"type": {"x": 1}}, {"text": "no type"}]}, "2025-11-25")
    assert [b["text"] for b in odd["content"]] == [
        "[MCP content of type {'x': 1} not shown: this client does not know that type]",
        "[MCP content of type None not shown: this client does not know that type]",
    ]
    broken = {"content": [{"type": "video"}], "isError": "maybe"}  # wrong beyond its blocks: the SDK says what
    assert repaired_call_result(broken, "2025-11-25") is broken

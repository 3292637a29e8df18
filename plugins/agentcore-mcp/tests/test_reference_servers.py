"""Against servers no one here wrote: the npm reference servers ``server-everything`` and
``server-filesystem`` (installed by install-servers.sh; skipped with the reason when absent)."""

from __future__ import annotations

import threading

import pytest
from agentcore_mcp import MCPAbortedError, MCPServer, MCPToolError
from conftest import alive, eventually, group_members

from agentcore.signals import AbortController
from agentcore.types import ImageContent, TextContent


@pytest.fixture(scope="module")
def everything(node_bin):
    with MCPServer.stdio(str(node_bin / "mcp-server-everything"), ["stdio"], name="everything") as server:
        yield server


@pytest.fixture
def filesystem(node_bin, tmp_path):
    (tmp_path / "notes.txt").write_text("first line\nsecond line\n")
    with MCPServer.stdio(str(node_bin / "mcp-server-filesystem"), [str(tmp_path)], name="fs") as server:
        yield server, tmp_path


def test_everything_lists_its_tools_with_schemas(everything):
    tools = {t.name: t for t in everything.tools(prefix="ev")}
    assert {"ev_echo", "ev_get-sum", "ev_get-tiny-image", "ev_trigger-long-running-operation"} <= set(tools)
    assert set(tools["ev_get-sum"].parameters["properties"]) == {"a", "b"}


def test_everything_echo_and_sum(everything):
    assert everything.call_tool("echo", {"message": "hi"}).content == [TextContent("Echo: hi")]
    assert "3" in everything.call_tool("get-sum", {"a": 1, "b": 2}).content[0].text


def test_everything_image_result(everything):
    result = everything.call_tool("get-tiny-image", {})
    images = [b for b in result.content if isinstance(b, ImageContent)]
    assert len(images) == 1 and images[0].mime_type == "image/png" and len(images[0].data) > 100


def test_everything_structured_content(everything):
    result = everything.call_tool("get-structured-content", {"location": "New York"})
    assert set(result.details) == {"temperature", "conditions", "humidity"}
    assert '"temperature"' in result.content[0].text


def test_everything_embedded_resource_and_links(everything):
    reference = everything.call_tool("get-resource-reference", {})
    assert any(b.text.startswith("[resource demo://resource/") for b in reference.content)
    links = everything.call_tool("get-resource-links", {"count": 2})
    assert sum(b.text.startswith("[resource link demo://") for b in links.content) == 2


def test_everything_progress(everything):
    updates = []
    result = everything.call_tool(
        "trigger-long-running-operation", {"duration": 0.3, "steps": 3}, on_update=updates.append
    )
    assert "completed" in result.content[0].text
    assert [u.details["progress"] for u in updates] == [1.0, 2.0, 3.0]
    assert updates[0].details["total"] == 3.0


def test_everything_abort_returns_promptly_and_the_session_goes_on(everything):
    controller = AbortController()
    first_update = threading.Event()

    def on_update(_partial):
        first_update.set()
        controller.abort()

    with pytest.raises(MCPAbortedError):
        everything.call_tool(
            "trigger-long-running-operation",
            {"duration": 60, "steps": 60},
            signal=controller.signal,
            on_update=on_update,
        )
    assert first_update.is_set()
    assert everything.call_tool("echo", {"message": "still here"}).content == [TextContent("Echo: still here")]


def test_everything_invalid_arguments_are_a_tool_error(everything):
    with pytest.raises(MCPToolError):
        everything.call_tool("get-sum", {"a": "one"})


def test_filesystem_reads_lists_and_refuses_outside(filesystem):
    server, root = filesystem
    names = {t.name for t in server.tools(prefix="fs")}
    assert {"fs_read_text_file", "fs_list_directory", "fs_write_file"} <= names
    text = server.call_tool("read_text_file", {"path": str(root / "notes.txt")}).content[0].text
    assert "second line" in text
    listing = server.call_tool("list_directory", {"path": str(root)}).content[0].text
    assert "notes.txt" in listing
    server.call_tool("write_file", {"path": str(root / "new.txt"), "content": "written by MCP"})
    assert (root / "new.txt").read_text() == "written by MCP"
    with pytest.raises(MCPToolError, match="(?i)denied|outside|not allowed"):
        server.call_tool("read_text_file", {"path": "/etc/hostname"})


def test_filesystem_a_large_file_reaches_the_model_cut_to_the_limit(filesystem):
    server, root = filesystem
    (root / "big.log").write_text("".join(f"line {i:06d} of the log\n" for i in range(10_000)))  # 230,000 chars
    whole, note = server.call_tool("read_text_file", {"path": str(root / "big.log")}).content
    assert whole.text.startswith("line 000000 of the log\n") and len(whole.text) == 50_000
    assert note.text.startswith("[Output truncated: showing the first 50,000 of 230,000 characters.")


def test_close_leaves_no_node_process(node_bin):
    server = MCPServer.stdio(str(node_bin / "mcp-server-everything"), ["stdio"], name="everything")
    server.connect()
    pgid = server.pid
    assert alive(pgid)
    server.close()
    assert eventually(lambda: not group_members(pgid), within=5)


def test_closing_while_the_tool_list_refreshes_warns_about_nothing(node_bin, caplog):
    """server-everything announces tools/list_changed right after the handshake, so closing at
    once races the refresh that notification starts: the refresh must end quietly."""
    import logging

    caplog.set_level(logging.WARNING, logger="agentcore_mcp")
    for _ in range(3):
        with MCPServer.stdio(str(node_bin / "mcp-server-everything"), ["stdio"], name="everything") as server:
            server.tools()
    for thread in threading.enumerate():
        if thread.name.startswith("agentcore-mcp-refresh-"):
            thread.join(10)
    assert not [r.getMessage() for r in caplog.records if r.name.startswith("agentcore_mcp")]

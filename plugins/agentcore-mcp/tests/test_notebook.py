"""A notebook cell (a real kernel via nbclient, where an asyncio loop already runs) using an MCP
tool through an Agent. Skipped when nbclient/ipykernel are not installed (the ``test`` extra)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import TEST_SERVER

nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
import nbformat  # noqa: E402  (a dependency of nbclient)

CELLS = [
    f"""import asyncio, sys
from agentcore import Agent
from agentcore.testing import ScriptedModel, text, tool_call
from agentcore_mcp import MCPServer
server = MCPServer.stdio(sys.executable, [{TEST_SERVER!r}], name="nb")
print("kernel loop running:", asyncio.get_event_loop().is_running())""",
    """scripted = ScriptedModel([tool_call("nb_add", {"a": 20, "b": 22}), text("The sum is 42.")])
agent = Agent(scripted.model, tools=server.tools(prefix="nb"), stream_fn=scripted.stream_fn)
messages = agent.prompt("What is 20 + 22?")
print("tool said:", [m.content[0].text for m in messages if m.role == "toolResult"])
print("agent said:", messages[-1].content[0].text)""",
    """pid = server.pid
server.close()
import os
try:
    os.kill(pid, 0)
    print("server still running")
except ProcessLookupError:
    print("server gone")""",
]


def test_a_notebook_cell_uses_an_mcp_tool(tmp_path, monkeypatch):
    repo = Path(__file__).resolve().parents[3]
    monkeypatch.setenv("PYTHONPATH", str(repo))
    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(c) for c in CELLS],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    )
    client = nbclient.NotebookClient(
        notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    out = [
        "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream") for cell in notebook.cells
    ]
    assert "kernel loop running: True" in out[0]
    assert "tool said: ['42']" in out[1] and "agent said: The sum is 42." in out[1]
    assert "server gone" in out[2]

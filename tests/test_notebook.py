"""A notebook executed headless (issue 7 item 3): nbclient runs an ipykernel that drives an Agent
with a tool against a scripted local OpenAI-compatible server; the test checks the cell outputs.

The notebook is built here with nbformat. It streams a tool-using run with ``display_run`` (one
updating output area), renders the transcript, is interrupted mid-stream (nbclient interrupts the
kernel on a short timeout, as the user's stop button does) and then keeps working. Needs the
``jupyter`` extra (nbclient, ipykernel, nbformat); skipped only when nbclient is not importable.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

nbclient = pytest.importorskip("nbclient")
import nbformat  # noqa: E402  (a dependency of nbclient)
from _servers import Reply, ScriptedServer, sse  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
INTERRUPT_AFTER_S = 7  # the interrupted cell's timeout (margin for a loaded machine); others get CELL_TIMEOUT_S
CELL_TIMEOUT_S = 120

SETUP = '''\
import os
from agentcore import Agent, Model, tool
from agentcore.jupyter import Transcript, display_run

model = Model(id="llama3", api="openai-completions", provider="local",
              base_url=os.environ["AGENTCORE_NOTEBOOK_BASE_URL"])

@tool
def word_count(text: str) -> str:
    """Count the words in a text.

    Args:
        text: The text whose words are counted.
    """
    return str(len(text.split()))

agent = Agent(model, system_prompt="Use the tools when they help.", tools=[word_count])
'''

RUN = "messages = display_run(agent, \"How many words are in 'the quick brown fox'?\")"
TRANSCRIPT = "Transcript(agent.messages)"
INTERRUPTED = 'display_run(agent, "Tell me a very long story.")'
STATE = """\
last = agent.messages[-1]
print("streaming:", agent.state.is_streaming, "| pending tools:", len(agent.state.pending_tool_calls),
      "| last:", last.role, last.stop_reason, repr(last.content[0].text if last.content else ""))
"""
AGAIN = 'again = agent.display("Are you still there?")\nprint(again[-1].content[0].text)'


def _chunk(delta: Optional[Dict[str, Any]] = None, finish: Optional[str] = None) -> Dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}


def _answer(text: str) -> Reply:
    words = text.split(" ")
    pieces = [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]
    return Reply(body=sse(*[_chunk({"content": p}) for p in pieces], _chunk(finish="stop"), done=True), chunk_size=17)


def _tool_call() -> Reply:
    call = {
        "index": 0,
        "id": "call_wc",
        "function": {"name": "word_count", "arguments": json.dumps({"text": "the quick brown fox"})},
    }
    return Reply(body=sse(_chunk({"tool_calls": [call]}), _chunk(finish="tool_calls"), done=True))


def _stalled() -> Reply:
    head = sse(_chunk({"content": "Once upon a time"}))
    return Reply(
        body=head + sse(_chunk({"content": " THE END"}), _chunk(finish="stop"), done=True), stall_after=len(head)
    )


def _notebook() -> Any:
    cells = [
        nbformat.v4.new_markdown_cell("# agentcore in a notebook\nA tool-using agent, streamed live."),
        nbformat.v4.new_code_cell(SETUP),
        nbformat.v4.new_code_cell(RUN),
        nbformat.v4.new_code_cell(TRANSCRIPT),
        nbformat.v4.new_code_cell(INTERRUPTED, metadata={"tags": ["interrupt"]}),
        nbformat.v4.new_code_cell(STATE),
        nbformat.v4.new_code_cell(AGAIN),
    ]
    return nbformat.v4.new_notebook(
        cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    )


def _timeout(cell: Any) -> int:
    return INTERRUPT_AFTER_S if "interrupt" in cell.get("metadata", {}).get("tags", []) else CELL_TIMEOUT_S


def _html(outputs: List[Any]) -> str:
    return "".join(o.get("data", {}).get("text/html", "") for o in outputs)


def _stdout(outputs: List[Any]) -> str:
    return "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream" and o.get("name") == "stdout")


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """Run the notebook once against the scripted server; yields (cells, server requests)."""
    pytest.importorskip("ipykernel")
    work = tmp_path_factory.mktemp("notebook")
    replies = [_tool_call(), _answer("The text has <b>4</b> words."), _stalled(), _answer("Yes, still here.")]
    with ScriptedServer(replies) as server, pytest.MonkeyPatch.context() as mp:
        mp.setenv("AGENTCORE_NOTEBOOK_BASE_URL", server.url + "/v1")
        mp.setenv("PYTHONPATH", str(REPO))
        notebook = _notebook()
        client = nbclient.NotebookClient(
            notebook,
            timeout_func=_timeout,
            interrupt_on_timeout=True,
            allow_errors=True,
            kernel_name="python3",
            resources={"metadata": {"path": str(work)}},
        )
        client.execute()
        stalled_reached = server.body_started.is_set()
        requests = [r.json() for r in server.requests]
    nbformat.write(notebook, str(work / "agent_demo.ipynb"))  # kept for inspection on failure
    assert stalled_reached, "the interrupted cell never reached the model request"
    return notebook.cells, requests


def test_setup_cells_run_without_errors(executed):
    cells, _ = executed
    setup = cells[1]
    assert [o for o in setup.outputs if o.output_type == "error"] == []


def test_display_run_shows_the_tool_and_the_escaped_answer_in_one_output(executed):
    cells, requests = executed
    outputs = cells[2].outputs
    displays = [o for o in outputs if o.output_type == "display_data"]
    assert len(displays) == 1  # updated in place, not appended
    html = _html(displays)
    assert "word_count" in html and "the quick brown fox" in html  # the call and its arguments
    assert "Tool result" in html and ">4<" in html.replace("\n", "")  # the tool's output
    assert "The text has &lt;b&gt;4&lt;/b&gt; words." in html and "<b>4</b>" not in html
    assert ">done<" in html
    assert "The text has" in displays[0].data["text/markdown"]
    tool_message = [m for m in requests[1]["messages"] if m["role"] == "tool"]
    assert tool_message == [{"role": "tool", "tool_call_id": "call_wc", "content": "4"}]


def test_transcript_renders_as_the_cell_result(executed):
    cells, _ = executed
    result = [o for o in cells[3].outputs if o.output_type == "execute_result"]
    assert len(result) == 1
    html = result[0].data["text/html"]
    for text in ("How many words", "word_count", "The text has &lt;b&gt;4&lt;/b&gt; words."):
        assert text in html
    assert "User" in result[0].data["text/markdown"] and "Assistant" in result[0].data["text/markdown"]


def test_interrupting_the_kernel_aborts_the_run_cleanly(executed):
    cells, _ = executed
    outputs = cells[4].outputs
    errors = [o for o in outputs if o.output_type == "error"]
    assert [e.ename for e in errors] == ["KeyboardInterrupt"]
    html = _html([o for o in outputs if o.output_type == "display_data"])
    assert "interrupted: run aborted" in html and "Once upon a time" in html and "THE END" not in html
    state = _stdout(cells[5].outputs)
    assert state.strip() == "streaming: False | pending tools: 0 | last: assistant aborted 'Once upon a time'"


def test_the_agent_keeps_working_after_the_interrupt(executed):
    cells, requests = executed
    assert _stdout(cells[6].outputs).strip() == "Yes, still here."
    assert len(requests) == 4
    last_user = requests[3]["messages"][-1]
    assert last_user["role"] == "user" and "Are you still there?" in json.dumps(last_user)

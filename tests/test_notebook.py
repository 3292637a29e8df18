"""A notebook executed headless (issue 7 item 3): nbclient runs an ipykernel that drives an Agent
with a tool against a scripted local OpenAI-compatible server; the test checks the cell outputs.

The notebook is built here with nbformat. It streams a tool-using run with ``display_run`` (an
output per finished message, one updating output below them), renders the transcript, is
interrupted mid-stream (nbclient interrupts the kernel on a short timeout, as the user's stop
button does), keeps working, and streams a long run whose display messages are counted. The
tests read the notebook as saved and reopened. Needs the ``jupyter`` extra (nbclient, ipykernel,
nbformat); skipped only when nbclient is not importable.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
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
LONG = '''\
@tool
def dump(i: int) -> str:
    """Return file number i (50 KB).

    Args:
        i: Which file.
    """
    return f"RESULT {i}\\n" + "\\n".join(f"{i}:{n:04d} " + "x" * 44 for n in range(1000))

reader = Agent(model, tools=[dump])
read = display_run(reader, "Read all five files.", throttle=0)  # every event drawn: the worst case
'''
MANY = """\
import threading
from agentcore import AgentSpec, AgentTask, run_many
from agentcore.testing import ScriptedModel, text

release, shown, published = threading.Event(), threading.Condition(), []
publish = get_ipython().display_pub.publish

def recording(data, *args, **kwargs):  # what the kernel publishes, to wait on it below
    with shown:
        published.append(str(data.get("text/plain", "")) + str(data.get("text/html", "")))
        shown.notify_all()
    return publish(data, *args, **kwargs)

def answer(context):
    if context.messages[-1].text == "slow":
        release.wait(30)
    return text("ok")

get_ipython().display_pub.publish = recording
scripted = ScriptedModel([answer, answer])
results = run_many([AgentTask(AgentSpec(scripted.model), p, id=p) for p in ("fast", "slow")])
first = next(results)
release.set()
with shown:  # busy with the first result: meanwhile the progress display reaches the end
    seen = shown.wait_for(lambda: any("2/2 done" in p for p in published), 30)
print("while busy the display showed 2/2 done:", seen)
rest = list(results)
get_ipython().display_pub.publish = publish
print("results:", first.task.id, [r.task.id for r in rest])
"""
ASYNC_INTERRUPTED = """\
import asyncio, signal, time
from agentcore.testing import ScriptedModel, text, tool_call

waited = []

@tool
def wait_for_abort(signal=None) -> str:
    \"\"\"Wait until the run is aborted (60 s at most).\"\"\"
    start = time.monotonic()
    signal.wait(60)
    waited.append((signal.aborted, time.monotonic() - start))
    return "stopped"

waiter = Agent(ScriptedModel([tool_call("wait_for_abort", {}), text("never reached"), text("quick")]).model,
               tools=[wait_for_abort])
await asyncio.sleep(0)  # top-level await: ipykernel runs the cell as a coroutine
display_run(waiter, "Wait.")
"""
ASYNC_STATE = """\
await asyncio.sleep(0)
display_run(waiter, "Quick.")
aborted, seconds = waited[0]
print("aborted:", aborted, "| within 20 s:", seconds < 20, "| last:", waiter.messages[3].stop_reason,
      "| handler:", signal.getsignal(signal.SIGINT).__qualname__.split(".")[-1])
"""
ASYNC_PROMPT_INTERRUPTED = """\
waited.clear()
prompter = Agent(ScriptedModel([tool_call("wait_for_abort", {}), text("never reached")]).model,
                 tools=[wait_for_abort])
await asyncio.sleep(0)
prompter.prompt("Wait.")  # no display: the agent's own wait
"""
ASYNC_PROMPT_STATE = """\
await asyncio.sleep(0)  # an async cell: ipykernel's handler is the one in place (put back)
aborted, seconds = waited[0]
print("aborted:", aborted, "| within 20 s:", seconds < 20, "| last:", prompter.messages[-1].stop_reason,
      "| handler:", signal.getsignal(signal.SIGINT).__qualname__.split(".")[-1])
"""
LONG_ANSWER = " ".join(f"part{n}-" + "y" * 2000 for n in range(10))  # 20 KB, streamed in 10 pieces
RESULT_BYTES = 5 * len("RESULT 0\n" + "\n".join(f"0:{n:04d} " + "x" * 44 for n in range(1000)))


def _chunk(delta: Optional[Dict[str, Any]] = None, finish: Optional[str] = None) -> Dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}


def _answer(text: str) -> Reply:
    words = text.split(" ")
    pieces = [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]
    return Reply(body=sse(*[_chunk({"content": p}) for p in pieces], _chunk(finish="stop"), done=True), chunk_size=17)


def _tool_call(name: str = "word_count", arguments: Any = None, id: str = "call_wc") -> Reply:
    arguments = {"text": "the quick brown fox"} if arguments is None else arguments
    call = {"index": 0, "id": id, "function": {"name": name, "arguments": json.dumps(arguments)}}
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
        nbformat.v4.new_code_cell(LONG),
        nbformat.v4.new_code_cell(MANY),
        nbformat.v4.new_code_cell(ASYNC_INTERRUPTED, metadata={"tags": ["interrupt"]}),
        nbformat.v4.new_code_cell(ASYNC_STATE),
        nbformat.v4.new_code_cell(ASYNC_PROMPT_INTERRUPTED, metadata={"tags": ["interrupt"]}),
        nbformat.v4.new_code_cell(ASYNC_PROMPT_STATE),
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


class _CountingClient(nbclient.NotebookClient):
    """Keeps, per cell, the content of every display message the kernel sent, as JSON."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.display_messages: Dict[int, List[str]] = {}

    def process_message(self, msg: Dict[str, Any], cell: Any, cell_index: int) -> Any:
        if msg["msg_type"] in ("display_data", "update_display_data"):
            self.display_messages.setdefault(cell_index, []).append(json.dumps(msg["content"]))
        return super().process_message(msg, cell, cell_index)


@dataclass
class Executed:
    cells: List[Any]  # as saved to disk and read back
    requests: List[Any]  # what the scripted server received, in order
    display_messages: Dict[int, List[str]]  # cell index -> the JSON of each display message it sent


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """Run the notebook once against the scripted server, save it and read it back."""
    pytest.importorskip("ipykernel")
    work = tmp_path_factory.mktemp("notebook")
    replies = [_tool_call(), _answer("The text has <b>4</b> words."), _stalled(), _answer("Yes, still here.")]
    replies += [_tool_call("dump", {"i": i}, id=f"call_dump{i}") for i in range(5)] + [_answer(LONG_ANSWER)]
    with ScriptedServer(replies) as server, pytest.MonkeyPatch.context() as mp:
        mp.setenv("AGENTCORE_NOTEBOOK_BASE_URL", server.url + "/v1")
        mp.setenv("PYTHONPATH", str(REPO))
        notebook = _notebook()
        client = _CountingClient(
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
    saved = work / "agent_demo.ipynb"  # kept for inspection on failure
    nbformat.write(notebook, str(saved))
    assert stalled_reached, "the interrupted cell never reached the model request"
    return Executed(nbformat.read(str(saved), as_version=4).cells, requests, client.display_messages)


def test_setup_cells_run_without_errors(executed):
    setup = executed.cells[1]
    assert [o for o in setup.outputs if o.output_type == "error"] == []


def test_display_run_shows_each_message_in_its_own_output_then_the_status(executed):
    outputs = executed.cells[2].outputs
    displays = [o for o in outputs if o.output_type == "display_data"]
    user, call, result, answer, status = [_html([d]) for d in displays]  # top to bottom, as the run went
    assert "How many words" in user
    assert "word_count" in call and "the quick brown fox" in call  # the call and its arguments
    assert "Tool result" in result and ">4<" in result.replace("\n", "")  # the tool's output
    assert "The text has &lt;b&gt;4&lt;/b&gt; words." in answer and "<b>4</b>" not in answer
    assert ">done<" in status and "agentcore-message" not in status
    assert "The text has" in displays[3].data["text/markdown"]
    tool_message = [m for m in executed.requests[1]["messages"] if m["role"] == "tool"]
    assert tool_message == [{"role": "tool", "tool_call_id": "call_wc", "content": "4"}]


def test_transcript_renders_as_the_cell_result(executed):
    result = [o for o in executed.cells[3].outputs if o.output_type == "execute_result"]
    assert len(result) == 1
    html = result[0].data["text/html"]
    for text in ("How many words", "word_count", "The text has &lt;b&gt;4&lt;/b&gt; words."):
        assert text in html
    assert "User" in result[0].data["text/markdown"] and "Assistant" in result[0].data["text/markdown"]


def test_interrupting_the_kernel_aborts_the_run_cleanly(executed):
    cells = executed.cells
    outputs = cells[4].outputs
    errors = [o for o in outputs if o.output_type == "error"]
    assert [e.ename for e in errors] == ["KeyboardInterrupt"]
    html = _html([o for o in outputs if o.output_type == "display_data"])
    assert "interrupted: run aborted" in html and "Once upon a time" in html and "THE END" not in html
    assert html.count('class="agentcore-status"') == 1 and "(running)" not in html
    state = _stdout(cells[5].outputs)
    assert state.strip() == "streaming: False | pending tools: 0 | last: assistant aborted 'Once upon a time'"


def test_the_agent_keeps_working_after_the_interrupt(executed):
    assert _stdout(executed.cells[6].outputs).strip() == "Yes, still here."
    last_user = executed.requests[3]["messages"][-1]
    assert last_user["role"] == "user" and "Are you still there?" in json.dumps(last_user)


def test_a_long_run_sends_each_finished_message_once(executed):
    """Every update re-sent the whole run: with 5 tool results of 50 KB, each went through the
    kernel's iopub channel with every later event: 35 MB for 280 KB of content."""
    cells, sent = executed.cells, executed.display_messages[7]
    assert [o for o in cells[7].outputs if o.output_type == "error"] == []
    assert len(executed.requests) == 4 + 6  # the earlier cells' requests, then 5 tool calls and the answer
    for i in range(5):
        assert sum(f"RESULT {i}" in message for message in sent) == 1, f"result {i} sent more than once"
    content = RESULT_BYTES + len(LONG_ANSWER)
    payload = sum(len(message.encode("utf-8")) for message in sent)
    # each finished message once in three formats (3x), plus the streaming answer redrawn with each
    # of its ~12 events (up to 2.6x here), plus JSON escaping; it was 124x
    assert payload < 8 * content, f"{payload} bytes of display messages for {content} bytes of content"


def test_the_saved_notebook_shows_the_whole_long_run_in_order(executed):
    displays = [o for o in executed.cells[7].outputs if o.output_type == "display_data"]
    assert len(displays) == 1 + 2 * 5 + 1 + 1  # the prompt, 5 calls and results, the answer, the status
    html = _html(displays)
    where = [html.find(text) for text in ["Read all five files."] + [f"RESULT {i}" for i in range(5)]]
    assert -1 not in where and where == sorted(where)
    assert html.index("RESULT 4") < html.index("part9-") < html.index(">done<") and "(running)" not in html
    assert all(d.data["text/markdown"] and d.data["text/plain"] for d in displays[:-1])


def test_run_many_progress_moves_while_the_consumer_is_busy(executed):
    """The run_many display is refreshed from a thread of its own: the cell, busy with its first
    result, sees the display reach the second task's end before it asks for that result."""
    cell = executed.cells[8]
    assert [o for o in cell.outputs if o.output_type == "error"] == []
    assert _stdout(cell.outputs).splitlines() == [
        "while busy the display showed 2/2 done: True",
        "results: fast ['slow']",
    ]
    sent = executed.display_messages[8]
    assert "0/2 done" in sent[0] or "1/2 done" in sent[0]  # the area, made by the calling thread
    assert any("2/2 done, 0 failed, 0 running" in message for message in sent[1:])
    displays = [o for o in cell.outputs if o.output_type == "display_data"]
    assert len(displays) == 1 and "2/2 done" in _html(displays)  # one area, updated in place


def test_interrupting_a_cell_with_top_level_await_aborts_the_run(executed):
    """A cell with ``await`` in it runs as a coroutine, and ipykernel's interrupt then only asks
    its event loop (blocked by the cell) to cancel it: the stop button did nothing, and the cell
    went on until the tool gave up waiting for the abort 60 s later."""
    outputs = executed.cells[9].outputs
    assert [e.ename for e in outputs if e.output_type == "error"] == ["KeyboardInterrupt"]
    html = _html([o for o in outputs if o.output_type == "display_data"])
    assert "interrupted: run aborted" in html and "(running)" not in html
    after = executed.cells[10]
    assert [o for o in after.outputs if o.output_type == "error"] == []
    # the kernel's own handler is back once display_run returns: the cell can be cancelled as before
    assert _stdout(after.outputs).strip() == (
        "aborted: True | within 20 s: True | last: aborted | handler: handle_sigint"
    )


def test_interrupting_agent_prompt_in_a_cell_with_top_level_await_aborts_the_run(executed):
    """The same for ``agent.prompt`` without a display (and so ``continue_``, ``ask``,
    ``wait_for_idle``, ``run_many``): its wait ignored the stop button until the run had ended."""
    outputs = executed.cells[11].outputs
    assert [e.ename for e in outputs if e.output_type == "error"] == ["KeyboardInterrupt"]
    assert _stdout(executed.cells[12].outputs).strip() == (
        "aborted: True | within 20 s: True | last: aborted | handler: handle_sigint"
    )

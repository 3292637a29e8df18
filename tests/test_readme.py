"""README.rst's Python code blocks run, so the documentation cannot rot.

Every ``.. code-block:: python`` block of README.rst is named below by a substring that occurs in
that block only, and belongs to exactly one of three kinds:

* offline sections: blocks run in order in one namespace per section (later blocks of a section
  continue earlier ones, as the README reads), in a temporary working directory; what the README's
  comments say a block prints is asserted;
* hosted providers: blocks that call Anthropic or Groq run with the key variables removed and
  every socket connection refused (the ``offline`` fixture), so they end in the documented "no API
  key" error without touching the network;
* a local server: compiled only (it would talk to a server on 127.0.0.1:11434).

``test_every_python_block_is_named`` fails when a block is added, removed or renamed without
updating the lists, so no block is left unchecked silently.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

README = Path(__file__).resolve().parents[1] / "README.rst"

# section -> markers of its blocks, in README order
OFFLINE: Dict[str, List[str]] = {
    "agent": ['new_messages = agent.prompt("What is 2 + 3?")', "unsubscribe = agent.subscribe(show)",
              'for event in agent.stream("Hi"):', "threading.Timer(0.2, agent.abort).start()"],
    "async": ["async def greet(name: str) -> str:"],
    "tool": ["def convert(amount: float"],
    "plugin module": ["def register_tools(register):"],
    "plugins_info": ["for info in agentcore.plugins_info():"],
    "vllm model": ['Model(id="Qwen/Qwen3-8B"'],
    "compatible endpoints": ["claude_like = Model("],
    "session": ['with Session.create("chat.jsonl", cwd=".") as session:',
                'session.append_label(first_answer.id, "cache design")'],
    "compaction": ["settings = CompactionSettings(", 'print("compacted; files read so far:"',
                   "class ShortSummaries:"],
    "compaction hook": ["class KeepDrafts:"],
    "branch summary": ["summarizer = ScriptedModel([\"The regex approach failed"],
    "branch summary hook": ["class FixedBranchNotes:"],
    "coding tools": ['tools = create_coding_tools(root="/path/to/project")'],
    "confinement": ['read = create_read_tool(root="/srv/project")'],
    "jupyter": ['display_run(agent, "Say hello with bash")'],
    "threads": ["def where() -> str:"],
}
HOSTED = ["Shout 'hello', then find TODOs", 'model = get_model("groq/llama-3.3-70b-versatile")',
          "def word_length(word: str) -> int:"]
LOCAL_SERVER = ['base_url="http://127.0.0.1:11434/v1"']


def python_blocks() -> List[Tuple[int, str]]:
    """(line of the directive, dedented code) of every ``.. code-block:: python`` in README.rst."""
    lines = README.read_text(encoding="utf-8").split("\n")
    blocks = []
    i = 0
    while i < len(lines):
        if lines[i].strip() != ".. code-block:: python":
            i += 1
            continue
        start, i = i + 1, i + 1
        body = []
        while i < len(lines) and (not lines[i].strip() or lines[i].startswith((" ", "\t"))):
            body.append(lines[i])
            i += 1
        blocks.append((start, textwrap.dedent("\n".join(body)).strip("\n") + "\n"))
    return blocks


def block(marker: str) -> Tuple[int, str]:
    found = [b for b in python_blocks() if marker in b[1]]
    assert len(found) == 1, f"README marker {marker!r} must occur in exactly one python block, found {len(found)}"
    return found[0]


def run_block(marker: str, namespace: Dict[str, Any]) -> None:
    line, code = block(marker)
    exec(compile(code, f"{README}:{line}", "exec"), namespace)


def test_every_python_block_is_named():
    named = [m for markers in OFFLINE.values() for m in markers] + HOSTED + LOCAL_SERVER
    lines = [block(m)[0] for m in named]
    assert len(set(lines)) == len(lines), "two markers name the same block"
    assert sorted(lines) == [line for line, _ in python_blocks()], "a README python block is not named here"


def _section_namespace(section: str) -> Dict[str, Any]:
    namespace: Dict[str, Any] = {"__name__": "readme"}
    if section in ("compaction", "coding tools"):
        # these blocks write ``model`` (and ``small``) for whatever model the reader uses
        from agentcore import Agent
        from agentcore.testing import ScriptedModel

        namespace.update(Agent=Agent, model=ScriptedModel([]).model, small=ScriptedModel(["short"]).model)
    return namespace


@pytest.mark.parametrize("section", list(OFFLINE))
def test_offline_section_runs(section, offline, capsys, check_shout_plugin):
    if section == "jupyter":  # live display needs IPython, from the jupyter extra
        pytest.importorskip("IPython", reason="the README's notebook example needs the jupyter extra")
    namespace = _section_namespace(section)
    for marker in OFFLINE[section]:
        run_block(marker, namespace)
    assert offline == [], f"README section {section!r} tried to reach the network"
    _check_output(section, capsys.readouterr().out, namespace, check_shout_plugin)


def _check_output(section: str, out: str, namespace: Dict[str, Any], check_shout_plugin: Any) -> None:
    """What the README's comments promise for the section."""
    lines = out.splitlines()
    if section == "agent":
        assert lines[:2] == ["['user', 'assistant', 'toolResult', 'assistant']", "2 + 3 = 5."]
        assert "Streaming works." in out and "agent_start" in lines and "agent_end" in lines
        assert lines[-1] == "aborted"
    elif section == "tool":
        assert lines[0] == "['amount']" and float(lines[1]) == pytest.approx(6.21371)
    elif section == "plugin module":
        check_shout_plugin(namespace)
    elif section == "plugins_info":
        assert any(line.startswith("agentcore.builtin_tools ") and line.endswith(" ok") for line in lines)
    elif section == "session":
        assert lines[0] == "4" and (Path.cwd() / "chat.jsonl").exists()
    elif section == "branch summary":
        assert lines[0] == "fix the parser"
    elif section == "compaction hook":
        assert lines == ["cancelled", "Drafting (3 earlier messages)", "True", "2"]
    elif section == "branch summary hook":
        assert lines == ["Abandoned 1 entries.", "branch point"]
    elif section == "confinement":
        assert 'path "../../etc/passwd" is outside the allowed root' in out
    elif section == "threads":
        assert lines == ["agentcore-run"]
    elif section == "jupyter":
        assert "hello" in out and "It printed hello." in out


@pytest.mark.parametrize("marker", HOSTED)
def test_hosted_provider_block_ends_with_missing_key(marker, offline, capsys):
    run_block(marker, {"__name__": "readme"})
    assert offline == []
    out = capsys.readouterr().out
    if "groq" in marker:
        assert out.splitlines()[-1].startswith("error ")  # stop_reason, then usage and cost


@pytest.mark.parametrize("marker", LOCAL_SERVER)
def test_local_server_block_compiles(marker):
    line, code = block(marker)
    compile(code, f"{README}:{line}", "exec")

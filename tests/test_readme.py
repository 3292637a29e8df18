"""README.rst's Python code blocks run, so the documentation cannot rot.

Every ``.. code-block:: python`` block of README.rst is named below by a substring that occurs in
that block only, and belongs to exactly one of two kinds:

* offline sections: blocks run in order in one namespace per section (later blocks of a section
  continue earlier ones, as the README reads), in a temporary working directory; what the README's
  comments say a block prints is asserted;
* hosted providers: blocks that call a hosted model (Anthropic) run with the key variables removed and
  every socket connection refused (the ``offline`` fixture), so they end in the documented "no API
  key" error without touching the network;

The README keeps only the tour, sessions and plugins examples; every other example lives in the
docs pages, whose blocks tests/test_docs.py runs the same way.

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
    "tour": ['new_messages = agent.prompt("What is 2 + 3?")'],
    "session": ['with Session.create("chat.jsonl", cwd=".") as session:'],
    "plugin module": ["def register_tools(register):"],
    "plugins_info": ["for info in agentcore.plugins_info():"],
}
HOSTED = ["Shout 'hello', then find TODOs"]


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
    # dont_inherit: run as a reader's script would, without this module's ``from __future__``
    # (string annotations would make a README dataclass look up the unimported module "readme")
    exec(compile(code, f"{README}:{line}", "exec", dont_inherit=True), namespace)


def test_every_python_block_is_named():
    named = [m for markers in OFFLINE.values() for m in markers] + HOSTED
    lines = [block(m)[0] for m in named]
    assert len(set(lines)) == len(lines), "two markers name the same block"
    assert sorted(lines) == [line for line, _ in python_blocks()], "a README python block is not named here"


@pytest.mark.parametrize("section", list(OFFLINE))
def test_offline_section_runs(section, offline, capsys, check_shout_plugin):
    namespace: Dict[str, Any] = {"__name__": "readme"}
    for marker in OFFLINE[section]:
        run_block(marker, namespace)
    assert offline == [], f"README section {section!r} tried to reach the network"
    _check_output(section, capsys.readouterr().out, namespace, check_shout_plugin)


def _check_output(section: str, out: str, namespace: Dict[str, Any], check_shout_plugin: Any) -> None:
    """What the README's comments promise for the section."""
    lines = out.splitlines()
    if section == "tour":
        assert lines[:2] == ["['user', 'assistant', 'toolResult', 'assistant']", "2 + 3 = 5."]
    elif section == "plugin module":
        check_shout_plugin(namespace)
    elif section == "plugins_info":
        assert any(line.startswith("agentcore.builtin_tools ") and line.endswith(" ok") for line in lines)
    elif section == "session":
        assert lines[0] == "4" and (Path.cwd() / "chat.jsonl").exists()


@pytest.mark.parametrize("marker", HOSTED)
def test_hosted_provider_block_ends_with_missing_key(marker, offline, capsys):
    namespace: Dict[str, Any] = {"__name__": "readme"}
    run_block(marker, namespace)
    assert offline == []
    assert "agent_end" in capsys.readouterr().out  # the run ended ...
    last = namespace["messages"][-1]  # ... as the README says: an error naming the variable to set
    assert last.stop_reason == "error" and "ANTHROPIC_API_KEY" in last.error_message


def test_chat_sentence_names_every_chat_command():
    """The README's summary of ``agentcore chat`` names each of its commands (``/help`` and
    ``/quit`` aside) and the ``!multi`` ... ``!end`` multi-line prompt, so a new one is not
    left for readers of docs/cli.rst alone."""
    from agentcore.cli._chat import COMMANDS

    text = " ".join(README.read_text(encoding="utf-8").split())
    words = {command.split()[0] for command in COMMANDS} - {"/help", "/quit"}
    missing = sorted(word for word in words if f"``{word}``" not in text)
    assert not missing, f"README.rst's agentcore chat sentence lacks: {missing}"

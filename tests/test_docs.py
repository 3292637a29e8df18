"""The documentation under docs/ stays true: its Python examples run, and its reference pages cover
the whole public surface without mentioning notes a reader cannot see.

Convention for ``docs/*.rst`` (also stated in docs/development.rst):

* every ``.. code-block:: python`` runs; the blocks of one page run in order in one namespace (a
  later block continues an earlier one, as the page reads), in a temporary working directory, with
  the API-key variables removed and every socket connection refused (the ``offline`` fixture of
  conftest.py), so an example can never reach a network (hosted-provider examples end in their documented "no API key" error);
* a block preceded by the comment ``.. skip: next (why)`` is only compiled (it talks to a local
  server);
* what a page's comments say its examples print is asserted below (``PRINTS``); a page whose
  examples need an optional extra skips without it (``REQUIRES``).
"""

from __future__ import annotations

import inspect
import logging
import re
import sys
import textwrap
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List

import pytest

import agentcore

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = sorted(p.stem for p in DOCS.glob("*.rst"))
SKIP = re.compile(r"^\.\. skip: next\b")
# Words that point at material only the developers have (design notes, spec sections).
# internal design notes: "§", DESIGN, "spec agent-loop ...", "(spec: ...)", "spec/..."; not the
# word "spec" itself, which the API uses (AgentSpec, a task's spec)
INTERNAL = re.compile(
    r"§|\bDESIGN\b|\(spec\b|\bspec (?:section|agent-loop|session|providers)\b|\bspec/|reference design"
)

# page -> the optional package its examples need (from an extra); without it the page skips
REQUIRES = {"jupyter": "IPython"}

# page -> lines its examples print, in this order (other lines may come between them)
PRINTS: Dict[str, List[str]] = {
    "agent": [
        "['user', 'assistant', 'toolResult', 'assistant']",
        "2 + 3 = 5.",
        "['user', 'assistant', 'user', 'assistant']",
        "10 km is 6.2 miles.",
    ],
    "events": ["Streaming works.", "agent_start", "message_update", "agent_end"],
    "tools": ["['amount']", "6.21371", "cba", "[Output truncated: showing the first 2000 of 51000 characters]"],
    "sessions": ["4", "hello"],
    "compaction": [
        "fix the parser",
        "cancelled",
        "Drafting (3 earlier messages)",
        "True",
        "2",
        "Abandoned 1 entries.",
        "branch point",
    ],
    "threads": ["aborted"],
    "performance": ["agentcore-run"],
    "testing": ["It is 3.", "You said: ping"],
    "hooks": ["about to run ping"],
    "structured": ["Movie(title='Dune', year=1965, genres=['sf'])"],
    "approvals": ["Cleaned up.", "Paris has about 2.1 million inhabitants.", "132"],
    "plugins": ["not allowed here"],
    "tour": ["agent_start", "agent_end", "['user', 'assistant', 'toolResult', 'assistant']", "HELLO"],
}


@dataclass
class Block:
    page: str
    line: int  # of the directive, 1-based
    code: str
    runnable: bool


def python_blocks(page: str) -> List[Block]:
    """Every ``.. code-block:: python`` of ``docs/<page>.rst``, dedented."""
    path = DOCS / f"{page}.rst"
    lines = path.read_text(encoding="utf-8").split("\n")
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() != ".. code-block:: python":
            continue
        previous = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        j = i + 1
        while j < len(lines) and lines[j].strip().startswith(":"):  # directive options
            j += 1
        body = []
        while j < len(lines) and (not lines[j].strip() or lines[j].startswith((" ", "\t"))):
            body.append(lines[j])
            j += 1
        code = textwrap.dedent("\n".join(body)).strip("\n") + "\n"
        blocks.append(Block(page, i + 1, code, not SKIP.match(previous.strip())))
    return blocks


def _compile(block: Block) -> Any:
    # dont_inherit: run as a reader's script would, without this module's ``from __future__``
    # (string annotations would make an example's dataclass look up an unimported module)
    return compile(block.code, f"{DOCS / block.page}.rst:{block.line}", "exec", dont_inherit=True)


def test_there_are_pages_with_examples():
    assert {"index", "installation", "tour", "api", "hooks"} <= set(PAGES)
    assert sum(len(python_blocks(p)) for p in PAGES) >= 30


@pytest.mark.parametrize("page", [p for p in PAGES if python_blocks(p)])
def test_page_examples_run(page, offline, capsys, check_shout_plugin, monkeypatch):
    if page in REQUIRES:
        pytest.importorskip(
            REQUIRES[page], reason=f"docs/{page}.rst needs {REQUIRES[page]} (pip install 'pyagentcore[jupyter]')"
        )
    # a real module in sys.modules: on Python 3.9, typing.get_type_hints (dataclasses, @tool) looks
    # up sys.modules[cls.__module__] and raises KeyError for a namespace that is not one
    module = types.ModuleType(f"docs_{page.replace('-', '_')}")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace: Dict[str, Any] = module.__dict__
    for block in python_blocks(page):
        code = _compile(block)
        if block.runnable:
            exec(code, namespace)
    assert offline == [], f"{page}: an example tried to reach the network"
    out = capsys.readouterr().out
    _check_prints(page, out)
    if page == "plugins":
        check_shout_plugin(namespace)
    elif page == "coding-tools":
        assert 'path "../../etc/passwd" is outside the allowed root' in out
    elif page == "jupyter":
        assert "hello" in out and "It printed hello." in out
    elif page == "providers":
        assert "error" in out  # the hosted-provider examples end in "no API key"


def test_jupyter_page_skips_naming_ipython_when_it_is_missing(offline, capsys, check_shout_plugin, monkeypatch):
    """Without the jupyter extra the notebook page skips, saying what to install (it used to fail
    with ImportError)."""
    monkeypatch.setitem(sys.modules, "IPython", None)  # ``import IPython`` now raises ImportError
    with pytest.raises(pytest.skip.Exception, match="needs IPython"):
        test_page_examples_run("jupyter", offline, capsys, check_shout_plugin, monkeypatch)


def _check_prints(page: str, out: str) -> None:
    lines = [line.strip() for line in out.splitlines()]
    position = 0
    for expected in PRINTS.get(page, []):
        try:
            position = lines.index(expected, position) + 1
        except ValueError:
            pytest.fail(
                f"{page}: expected the examples to print {expected!r} (after line {position}); they printed:\n{out}"
            )


def test_skip_marker_applies_to_the_next_block_only():
    skipped = [b for p in PAGES for b in python_blocks(p) if not b.runnable]
    assert skipped, "the local-server examples are marked '.. skip: next'"
    assert all("127.0.0.1" in b.code for b in skipped), "only examples that need a local server are skipped"


# ------------------------------------------------------------------------------ reference pages


def _documented(page: str) -> List[str]:
    """Full names of the objects ``docs/<page>.rst`` documents with autodoc or ``.. data::``."""
    names, module = [], ""
    for line in (DOCS / f"{page}.rst").read_text(encoding="utf-8").splitlines():
        match = re.match(r"\.\. (?:py:)?currentmodule:: (\S+)", line)
        if match:
            module = match.group(1)
            continue
        match = re.match(r"\.\. (?:auto)?(?:class|function|data|exception):: (\S+)", line)
        if match:
            name = match.group(1)
            names.append(name if name.startswith("agentcore.") else f"{module}.{name}")
    return names


def _resolve(full_name: str) -> Any:
    import importlib

    parts = full_name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(full_name)


def test_api_reference_covers_every_public_name():
    documented = {name.rpartition(".")[2] for name in _documented("api") if name.count(".") == 1}
    missing = sorted(set(agentcore.__all__) - documented)
    assert not missing, f"docs/api.rst does not document: {missing}"


def test_hook_reference_lists_every_hookspec():
    from agentcore import hookspecs

    specs = {name for name, f in vars(hookspecs).items() if inspect.isfunction(f) and hasattr(f, "agentcore_spec")}
    listed = {name.rpartition(".")[2] for name in _documented("hooks")}
    assert specs and listed == specs


def _rendered_docstrings(full_name: str) -> Dict[str, str]:
    """The docstrings autodoc shows for ``full_name``: its own and, for a class, its members'."""
    obj = _resolve(full_name)
    if not (inspect.isclass(obj) or inspect.isfunction(obj)):
        return {}  # plain data: the page writes its text itself
    docs = {full_name: inspect.getdoc(obj) or ""}
    if inspect.isclass(obj):
        for attr, value in vars(obj).items():
            if attr.startswith("_"):
                continue
            doc = getattr(getattr(value, "__func__", value), "__doc__", None)
            if isinstance(value, property) or inspect.isfunction(getattr(value, "__func__", value)):
                docs[f"{full_name}.{attr}"] = doc or ""
    return docs


def test_rendered_docstrings_and_pages_name_no_internal_notes():
    found = []
    for page in ("api", "hooks"):
        for name in _documented(page):
            for where, doc in _rendered_docstrings(name).items():
                found += [f"{where}: {line.strip()}" for line in doc.splitlines() if INTERNAL.search(line)]
    for page in PAGES:
        text = (DOCS / f"{page}.rst").read_text(encoding="utf-8")
        found += [f"docs/{page}.rst: {line.strip()}" for line in text.splitlines() if INTERNAL.search(line)]
    assert not found, "internal notes a reader cannot see:\n" + "\n".join(found)


# --------------------------------------------------------------------------- the CLI reference

_REPO = DOCS.parent
_ENV_READ = re.compile(
    r"""(?:environ\.get|env\.get|getenv)\(\s*["']([A-Z][A-Z0-9_]+)["']|environ\[["']([A-Z][A-Z0-9_]+)["']\]"""
)


def _cli_reference() -> Dict[str, str]:
    """The subsections of docs/cli.rst's "Command reference": title -> text."""
    text = (DOCS / "cli.rst").read_text(encoding="utf-8")
    start = text.index("\nCommand reference\n-----")
    sections: Dict[str, str] = {}
    title = ""
    lines = text[start:].splitlines()
    for line, underline in zip(lines, lines[1:] + [""]):
        if underline.startswith("~~~") and len(underline) >= len(line) > 0:
            title = line.strip()
            sections[title] = ""
        elif title and not line.startswith("~~~"):
            sections[title] += line + "\n"
    return sections


def _commands(parser: Any, name: str = "agentcore") -> Any:
    """``(command name, parser)`` for the parser and every sub-command, depth first."""
    import argparse

    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, subparser in action.choices.items():
                yield from _commands(subparser, f"{name} {sub}")


def _documents(section: str, action: Any) -> List[str]:
    """The option strings (or the positional's metavar) of ``action`` missing from ``section``."""
    names = list(action.option_strings) or [action.metavar or action.dest.upper()]
    return [n for n in names if not re.search("``" + re.escape(n) + r"[`\s]", section)]


def test_cli_page_lists_every_command_and_option():
    """Each command of the parser has a subsection in the reference, listing each of its options
    (the options ``run`` and ``chat`` share are in their common subsection). A new option or
    command fails this until docs/cli.rst lists it."""
    import argparse

    from agentcore.cli import _common_options, build_parser

    sections = _cli_reference()
    shared_title = "``agentcore run`` and ``agentcore chat``"
    shared = {a.dest for a in _common_options()._actions if not isinstance(a, argparse._HelpAction)}
    missing = []
    for name, parser in _commands(build_parser(plugin_options=False)):
        own = [a for a in parser._actions if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]
        has_subcommands = any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)
        if has_subcommands and name != "agentcore" and not own:
            continue  # a group such as `sessions`: its actions have their own subsections
        title = f"``{name}``"
        if title not in sections:
            missing.append(f"no subsection {title}")
            continue
        for action in own:
            where = (
                shared_title
                if name in ("agentcore", "agentcore run", "agentcore chat", "agentcore rpc") and action.dest in shared
                else title
            )
            missing += [f"{where}: {n}" for n in _documents(sections.get(where, ""), action)]
    assert not missing, "docs/cli.rst, Command reference, lacks:\n" + "\n".join(dict.fromkeys(missing))


def test_cli_page_lists_every_environment_variable():
    """Every variable the runtime or a bundled plugin reads (``AGENTCORE_*``, provider keys and
    credentials, ...) is in the page's "Environment variables" table."""
    from agentcore.providers.base import ENV_API_KEYS

    sources = list((_REPO / "agentcore").rglob("*.py")) + list((_REPO / "plugins").glob("*/agentcore_*/**/*.py"))
    names = {name for keys in ENV_API_KEYS.values() for name in keys}
    for path in sources:
        text = path.read_text(encoding="utf-8")
        names.update(n for n in re.findall(r"\bAGENTCORE_[A-Z0-9_]+", text) if "TEST" not in n)
        names.update(a or b for a, b in _ENV_READ.findall(text))
    table = _cli_reference().get("Environment variables", "")
    missing = sorted(n for n in names if f"``{n}" not in table)
    assert not missing, "docs/cli.rst, Environment variables, lacks: " + ", ".join(missing)


def test_approvals_page_gives_every_entry_kind_a_session_records(tmp_path):
    """Each ``agentcore.approval`` entry kind a paused, approved and resumed run writes to its
    session (``request``, ``decision`` and the ``started`` mark that keeps a killed process from
    running an approved call twice) is spelled out on the approvals page, for readers of the file."""
    from agentcore import Agent, Session, tool
    from agentcore.testing import ScriptedModel, call, response, text

    @tool(requires_approval=True)
    def remove(path: str) -> str:
        """Remove a file."""
        return f"removed {path}"

    scripted = ScriptedModel([response(call("remove", {"path": "build"}, id="c1")), text("Done.")])
    with Session.create(str(tmp_path / "s.jsonl")) as session:
        agent = Agent(scripted.model, session=session, tools=[remove])
        agent.prompt("clean up")
        agent.approve("c1")
        agent.continue_()
        kinds = {
            entry.data["kind"]
            for entry in session.get_branch()
            if entry.type == "custom" and entry.custom_type == "agentcore.approval"
        }
    assert kinds == {"request", "decision", "started"}
    page = " ".join((DOCS / "approvals.rst").read_text(encoding="utf-8").split())
    missing = sorted(kind for kind in kinds if f'{{"kind": "{kind}"' not in page)
    assert not missing, f"docs/approvals.rst does not give the entries of kind {missing}"


def test_logging_page_names_the_level_and_logger_of_a_failing_observer(caplog):
    """An ``on_event`` hook that raises is logged (the run goes on); the logging page's bullet for
    that record's level names its logger, so a reader configuring handlers knows to expect it."""
    from agentcore import Agent, hookimpl
    from agentcore.testing import ScriptedModel

    class Broken:
        @hookimpl
        def on_event(self, event, agent):
            raise RuntimeError("observer broke")

    scripted = ScriptedModel(["hi"])
    with caplog.at_level(logging.DEBUG, logger="agentcore"):
        assert Agent(scripted.model, plugins=[Broken()]).prompt("x")[-1].text == "hi"
    records = {(r.levelname, r.name) for r in caplog.records if "on_event hook" in r.getMessage()}
    assert records == {("ERROR", "agentcore.plugins")}
    page = (DOCS / "logging.rst").read_text(encoding="utf-8")
    bullets = {m.group(1): m.group(2) for m in re.finditer(r"^\* ``([A-Z]+)``(.*?)(?=^\S|\Z)", page, re.M | re.S)}
    missing = [f"{level}: {name}" for level, name in records if f"``{name}``" not in bullets.get(level, "")]
    assert not missing, f"docs/logging.rst does not list {missing}"


def test_pages_give_the_output_limits_of_the_built_in_read_and_bash_tools():
    """The tools page and the coding-tools page quote the limits ``read`` and ``bash`` cut their
    output at, in the factories' own figures (lines and KB, not the characters ``fetch_url`` and
    MCP servers count), so a reader sizing a tool of their own compares like with like."""
    import inspect

    from agentcore.builtin_tools import create_bash_tool, create_read_tool

    figures = set()
    for factory in (create_read_tool, create_bash_tool):
        params = inspect.signature(factory).parameters
        figures.add((params["max_lines"].default, params["max_bytes"].default))
    assert len(figures) == 1, f"read and bash cut at different limits: {figures}"
    lines, size = figures.pop()
    assert size % 1024 == 0
    for page, phrase in (
        ("tools", f"``bash`` tools ({lines} lines or {size // 1024} KB)"),
        ("coding-tools", f"{lines} lines / {size // 1024} KB"),
    ):
        text = " ".join((DOCS / f"{page}.rst").read_text(encoding="utf-8").split())
        assert phrase in text, f"docs/{page}.rst does not give read/bash's limit as {phrase!r}"

"""The public types: well-typed uses of the API (checked by mypy, run by pytest), and a mypy run
that must reject wrong calls.

This module is in the ``files`` of ``[tool.mypy]`` (pyproject.toml), so ``mypy`` checks the
typed uses below under the project's strict settings. :func:`test_wrong_calls_fail_the_type_check`
runs mypy on a snippet of wrong calls and asserts that each one is reported (and that this
module still checks clean); it is skipped when mypy is not installed (the ``dev`` extra).
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest

from agentcore import (
    AbortSignal,
    Agent,
    AgentEvent,
    AgentTool,
    AgentToolResult,
    AssistantMessage,
    BeforeToolCallContext,
    BeforeToolCallResult,
    FunctionTool,
    Model,
    Session,
    SessionStats,
    TextContent,
    UserMessage,
    attach_session,
    tool,
)
from agentcore.options import StreamOptions
from agentcore.testing import ScriptedModel, text, tool_call

ROOT = Path(__file__).resolve().parent.parent


# --------------------------------------------------------------------------- typed uses


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


@tool(name="shout", description="Upper-case a text.")
def shout(value: str) -> str:
    return value.upper()


def _gate(ctx: BeforeToolCallContext, signal: AbortSignal) -> Optional[BeforeToolCallResult]:
    if ctx.tool_call.name == "shout":
        return BeforeToolCallResult(block=True, reason="too loud")
    return None


def _events_of(agent: Agent, prompt: str) -> Iterator[AgentEvent]:
    return agent.stream(prompt)


def test_typed_agent_run_with_a_tool_and_a_gate() -> None:
    scripted = ScriptedModel([tool_call("add", {"a": 2, "b": 3}), text("5")])
    seen: List[str] = []
    agent = Agent(
        scripted.model,
        tools=[add, shout],
        stream_fn=scripted.stream_fn,
        before_tool_call=_gate,
        options=StreamOptions(temperature=0.0),
    )
    unsubscribe = agent.subscribe(lambda event: seen.append(event.type))
    new_messages: List[Any] = agent.prompt("what is 2 + 3?")
    unsubscribe()
    final = new_messages[-1]
    assert isinstance(final, AssistantMessage)
    assert [b.text for b in final.content if isinstance(b, TextContent)] == ["5"]
    assert seen[0] == "agent_start" and seen[-1] == "agent_end"


def test_typed_tools() -> None:
    typed_add: AgentTool = add
    assert isinstance(shout, FunctionTool) and shout.name == "shout"
    result: AgentToolResult = typed_add.execute("call-1", {"a": 1, "b": 2}, None, None)
    assert [b.text for b in result.content if isinstance(b, TextContent)] == ["3"]
    assert add(1, 2) == 3  # a FunctionTool still calls the function


def test_typed_stream_and_messages() -> None:
    scripted = ScriptedModel([text("hi")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    types = [event.type for event in _events_of(agent, "hello")]
    assert types[0] == "agent_start" and types[-1] == "agent_end"
    scripted.push(text("again"), text("and more"))
    more = agent.prompt([UserMessage(content=[TextContent("and again")])])
    assert len(more) == 2
    assert agent.prompt({"role": "user", "content": "a dict message", "timestamp": 0}, wait=False) is None
    agent.wait_for_idle()


def test_typed_session(tmp_path: Path) -> None:
    scripted = ScriptedModel([text("noted")])
    session = Session.create(tmp_path / "s.jsonl", cwd=str(tmp_path))
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    detach = attach_session(agent, session)
    agent.prompt("remember this")
    detach()
    stats: SessionStats = session.get_session_stats()
    assert stats.message_count == 2
    session.close()


def test_typed_model_value() -> None:
    model = Model(id="m", name="M", api="openai-completions", provider="local", base_url="http://127.0.0.1:1/v1")
    agent = Agent(model)
    assert agent.state.model.id == "m"


def test_every_public_name_is_visible_to_type_checkers() -> None:
    """``agentcore.__all__`` resolves lazily; a name missing from the ``TYPE_CHECKING`` imports
    next to ``__getattr__`` would be Any for mypy and IDEs (and ``X as X`` re-exports it)."""
    import agentcore

    tree = ast.parse((ROOT / "agentcore" / "__init__.py").read_text())
    seen = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom):
                    seen |= {alias.asname for alias in inner.names if alias.asname == alias.name}
                elif isinstance(inner, ast.AnnAssign) and isinstance(inner.target, ast.Name):
                    seen.add(inner.target.id)
    assert sorted(set(agentcore.__all__) - seen) == []
    assert sorted(seen - set(agentcore.__all__)) == []


# --------------------------------------------------------------------------- wrong calls

#: Each line marked ``# wrong`` must be reported by mypy; no other line may be.
WRONG_CALLS = textwrap.dedent("""
    from agentcore import Agent, get_model, tool, AgentTool, Session, BeforeToolCallContext
    from agentcore.providers import complete

    @tool
    def add(a: int, b: int) -> int:
        return a + b

    def gate(ctx: BeforeToolCallContext, signal: object, extra: int) -> None:
        return None

    agent = Agent()
    agent.prompt(123)  # wrong
    agent.prompt("hi", images=["not an image"])  # wrong
    Agent(model=1)  # wrong
    Agent(before_tool_call=gate)  # wrong
    Agent(tool_execution=3)  # wrong
    add.execute("call-1")  # wrong
    get_model(1)  # wrong
    name: int = get_model("openai/gpt-4o").id  # wrong
    messages: int = agent.prompt("hi")  # wrong
    for event in agent.stream("hi"):
        event.no_such_field  # wrong
    tool_obj: AgentTool = tool(name="x")  # wrong
    Session.create(42)  # wrong
    agent.continue_(wait="no")  # wrong
    complete(agent.state.model, "not a context")  # wrong
    answer: str = agent.ask("how many?", int)  # wrong
    agent.ask(123, int)  # wrong
""")


def _mypy_command() -> List[str]:
    try:
        import mypy.api  # noqa: F401
    except ImportError:
        pytest.skip("mypy is not installed (pip install -e .[dev])")
    return [sys.executable, "-m", "mypy"]


def test_wrong_calls_fail_the_type_check(tmp_path: Path) -> None:
    snippet = tmp_path / "wrong_calls.py"
    snippet.write_text(WRONG_CALLS)
    env: Dict[str, str] = dict(os.environ, MYPYPATH=str(ROOT))
    proc = subprocess.run(
        _mypy_command()
        + [
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--no-incremental",
            "--cache-dir",
            str(tmp_path / "mypy_cache"),
            "--hide-error-context",
            "--no-pretty",
            str(snippet),
            str(Path(__file__)),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    output = proc.stdout + proc.stderr
    reported = {int(m.group(1)) for m in re.finditer(rf"^{re.escape(str(snippet))}:(\d+): error:", output, re.M)}
    expected = {n for n, line in enumerate(WRONG_CALLS.splitlines(), 1) if line.endswith("# wrong")}
    assert expected - reported == set(), f"wrong calls mypy accepted: {sorted(expected - reported)}\n{output}"
    assert reported - expected == set(), f"unexpected mypy errors:\n{output}"
    elsewhere = [line for line in output.splitlines() if ": error:" in line and str(snippet) not in line]
    assert elsewhere == [], "the typed uses (or agentcore) no longer check clean:\n" + "\n".join(elsewhere)

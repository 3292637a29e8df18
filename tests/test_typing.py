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
from typing import Any, Dict, Iterator, List, Optional, Union

import pytest

from agentcore import (
    AbortSignal,
    Agent,
    AgentEndEvent,
    AgentEvent,
    AgentTool,
    AgentToolResult,
    AssistantMessage,
    BeforeToolCallContext,
    BeforeToolCallResult,
    FunctionTool,
    MessageUpdateEvent,
    Model,
    Session,
    SessionStats,
    TextContent,
    ToolExecutionStartEvent,
    UserMessage,
    attach_session,
    tool,
)
from agentcore.options import OPTION_NAMES, StreamOptions
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


def test_typed_agent_attributes() -> None:
    """The state shortcuts and the stream-option attributes have their real types."""
    scripted = ScriptedModel([text("hi")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    agent.temperature = 0.2
    agent.timeout = (5.0, 60.0)
    agent.max_tokens = None
    agent.system_prompt = "Be brief."
    agent.tools = [add]
    model: Model = agent.model
    prompt: str = agent.system_prompt
    temperature: Optional[float] = agent.temperature
    assert (model.id, prompt, temperature, agent.options.timeout) == (scripted.model.id, "Be brief.", 0.2, (5.0, 60.0))
    agent.prompt("hello")
    last = agent.messages[-1]
    assert isinstance(last, AssistantMessage) and agent.tools == [add]


def test_typed_tool_keeps_the_call_signature() -> None:
    total: int = add(1, 2)
    loud: str = shout("hi")
    assert (total, loud) == (3, "HI")


def test_typed_stream_can_be_closed() -> None:
    """``stream()`` returns an iterator whose ``close()`` (documented: from any thread) type-checks."""
    scripted = ScriptedModel([text("hi")])
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    events = agent.stream("hello")
    first: AgentEvent = next(events)
    events.close()
    assert first.type == "agent_start" and list(events) == []
    agent.wait_for_idle()


def _describe(event: Union[MessageUpdateEvent, ToolExecutionStartEvent, AgentEndEvent]) -> str:
    """Narrowing a union of events by ``event.type``, as the events guide does."""
    if event.type == "tool_execution_start":
        return f"-> {event.tool_name}({event.args})"
    if event.type == "agent_end":
        return f"{len(event.messages)} new messages"
    return "update" if event.assistant_message_event is not None else "start"


def test_typed_events_narrow_by_type() -> None:
    scripted = ScriptedModel([tool_call("add", {"a": 1, "b": 2}), text("3")])
    agent = Agent(scripted.model, tools=[add], stream_fn=scripted.stream_fn)
    lines = [
        _describe(event)
        for event in agent.stream("add")
        if isinstance(event, (MessageUpdateEvent, ToolExecutionStartEvent, AgentEndEvent))
    ]
    assert "-> add({'a': 1, 'b': 2})" in lines and lines[-1] == "4 new messages"


def test_agent_declares_every_option_attribute_for_type_checkers() -> None:
    """Every stream option but ``reasoning`` is an ``Agent`` attribute (a property set after the
    class); its ``TYPE_CHECKING`` declaration in the class body must name each, with the type
    ``StreamOptions`` gives it, or mypy and IDEs reject ``agent.temperature = 0.2``."""
    tree = ast.parse((ROOT / "agentcore" / "agent.py").read_text())
    agent_class = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Agent")
    declared = {
        inner.target.id: ast.unparse(inner.annotation)
        for node in agent_class.body
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
        for inner in node.body
        if isinstance(inner, ast.AnnAssign) and isinstance(inner.target, ast.Name)
    }
    expected = {name: StreamOptions.__annotations__[name] for name in OPTION_NAMES if name != "reasoning"}
    assert declared == expected
    assert all(hasattr(Agent, name) for name in declared)


def test_all_is_a_literal_list_of_the_exports() -> None:
    """Type checkers read ``__all__`` only as a literal list (mypy's ``from agentcore import *``
    defined no name at all when it was computed); it must list what ``__getattr__`` resolves."""
    import agentcore

    tree = ast.parse((ROOT / "agentcore" / "__init__.py").read_text())
    assigned = next(
        n.value
        for n in tree.body
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets)
    )
    assert isinstance(assigned, ast.List)
    literal = [ast.literal_eval(item) for item in assigned.elts]
    assert literal == [name for names in agentcore._EXPORTS.values() for name in names] + ["__version__"]


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
    from typing import Union
    from agentcore import Agent, get_model, tool, AgentTool, Session, BeforeToolCallContext
    from agentcore import AgentEndEvent, TurnEndEvent
    from agentcore.providers import complete
    from agentcore.structured import resume_ask

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
    agent.temperature = "hot"  # wrong
    agent.max_tokens = 1.5  # wrong
    agent.model = 3  # wrong
    agent.system_prompt = 1  # wrong
    agent.thinking_level = 2  # wrong
    model_id: int = agent.model  # wrong
    prompt_length: int = agent.system_prompt  # wrong
    add("1", 2)  # wrong
    sum_text: str = add(1, 2)  # wrong
    word: str = resume_ask(agent, int)  # wrong
    resume_ask("agent", int)  # wrong

    def on_end(event: Union[AgentEndEvent, TurnEndEvent]) -> None:
        if event.type == "agent_stop":  # wrong
            pass
        if event.type == "turn_end":
            event.messages  # wrong
""")

#: Must check clean: the names ``from agentcore import *`` gives mypy (those of ``__all__``).
STAR_IMPORT = textwrap.dedent("""
    from agentcore import *

    agent: Agent = Agent()
    version: str = __version__

    @tool
    def add(a: int, b: int) -> int:
        return a + b

    tools: list[AgentTool] = [add, *create_read_only_tools(".")]
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
    star_import = tmp_path / "star_import.py"
    star_import.write_text(STAR_IMPORT)
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
            str(star_import),
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

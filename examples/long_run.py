"""A long agent run that stays inside a small context window thanks to compaction (offline).

A scripted model reads 40 files, one tool call per turn, in an 8000-token window. After every
prompt the compactor checks the context size; over ``context_window - reserve_tokens`` it
summarises older history (keeping the newest ~2000 tokens verbatim and a list of the files read)
and stores a ``compaction`` entry in the session. Run: ``python examples/long_run.py``.
"""

from __future__ import annotations

import itertools

from agentcore import Agent, AgentTool, AgentToolResult, Model, TextContent, ToolCall
from agentcore.session import Session
from agentcore.session.compaction_prompts import SUMMARIZER_SYSTEM_PROMPT
from agentcore.session.compaction_tokens import CompactionSettings, live_context_tokens
from agentcore.session.compactor import Compactor
from agentcore.testing import ScriptedModel, response

MODEL = Model(id="scripted-small", api="scripted", provider="scripted", context_window=8000, max_tokens=2048)
turns = itertools.count()


def respond(context):
    """The scripted model: summaries for the summariser, otherwise read a file then report."""
    if context.system_prompt == SUMMARIZER_SYSTEM_PROMPT:
        return "## Goal\nRead the project files one by one.\n\n## Progress\n### Done\n- [x] Earlier files read"
    n = next(turns)
    if n % 2 == 0:
        return response(ToolCall(f"call{n}", "read", {"path": f"src/module_{n // 2}.py"}))
    return f"module_{n // 2}.py defines a handful of helpers."


def read(tool_call_id, args, signal, on_update):
    return AgentToolResult([TextContent(f"# {args['path']}\n" + "def helper(x):\n    return x * 2\n" * 40)])


def show(event):
    if event.type == "compaction_start":
        print(f"  … compacting ({event.reason}, about {event.tokens_before} tokens)")
    elif event.type == "compaction_end" and event.result is not None:
        files = event.result.details["readFiles"]
        print(
            f"  … compacted: {len(files)} files remembered, context now "
            f"{live_context_tokens(agent.state.messages).tokens} tokens"
        )
    elif event.type == "compaction_end":
        print(f"  … compaction failed: {event.error_message}")


scripted = ScriptedModel([respond] * 200, model=MODEL)
session = Session.in_memory()
read_tool = AgentTool("read", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}}, read)
agent = Agent(MODEL, "You read files.", [read_tool], stream_fn=scripted.stream_fn, session=session)
compactor = Compactor(agent, CompactionSettings(reserve_tokens=2000, keep_recent_tokens=2000), emit=show)

for i in range(40):
    agent.prompt(f"Read module_{i}.py")
    tokens = live_context_tokens(agent.state.messages).tokens
    print(f"prompt {i + 1:2d}: {len(agent.state.messages):3d} messages, ~{tokens} tokens")
    if compactor.needs_compaction():
        compactor.compact()

compactions = [e for e in session.entries() if e.type == "compaction"]
print(
    f"\n{len(session.entries())} session entries, {len(compactions)} compactions; "
    f"the model's context starts with: {agent.state.messages[0].role}"
)
print(
    "latest summary begins:",
    compactions[-1].summary.splitlines()[0],
    "| files remembered:",
    len(compactions[-1].details["readFiles"]),
)

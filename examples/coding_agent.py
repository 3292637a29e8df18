"""A coding agent fixing a bug with the built-in tools, offline: the model is scripted.

It reads a file, edits it, runs it with bash and answers. Swap the scripted model for a real one
(``Agent(get_model("anthropic/claude-sonnet-4-5"), tools=create_coding_tools(root=workdir))``)
and the same tools work on your own files. Run: ``python examples/coding_agent.py``.
"""

from __future__ import annotations

import shlex
import sys
import tempfile
from pathlib import Path

from agentcore import Agent
from agentcore.builtin_tools import create_coding_tools
from agentcore.testing import ScriptedModel, text, tool_call

BUGGY = "def add(a, b):\n    return a - b\n\n\nprint('2 + 3 =', add(2, 3))\n"


def main() -> int:
    with tempfile.TemporaryDirectory() as workdir:
        Path(workdir, "calc.py").write_text(BUGGY)
        model = ScriptedModel(
            [
                tool_call("read", {"path": "calc.py"}, text="Let me look at the file."),
                tool_call(
                    "edit",
                    {"path": "calc.py", "edits": [{"oldText": "return a - b", "newText": "return a + b"}]},
                    text="add() subtracts; fixing it.",
                ),
                tool_call("bash", {"command": f"{shlex.quote(sys.executable)} calc.py"}, text="Checking the result."),
                text("Fixed: add() now adds, and calc.py prints 2 + 3 = 5."),
            ]
        )
        # root= confines the file tools to the temp folder; bash runs there too.
        agent = Agent(
            model.model,
            system_prompt="You are a careful coding assistant.",
            tools=create_coding_tools(root=workdir),
            stream_fn=model.stream_fn,
        )
        agent.subscribe(show)
        agent.prompt("calc.py prints the wrong sum. Fix it and check.")
        fixed = Path(workdir, "calc.py").read_text()
    failed = [m for m in agent.state.messages if m.role == "toolResult" and m.is_error]
    ok = "return a + b" in fixed and agent.state.error_message is None and not failed
    return 0 if ok else 1


def show(event) -> None:
    """Print the transcript as it happens: assistant text, tool calls and their results."""
    if event.type == "message_end" and event.message.role == "assistant":
        for block in event.message.content:
            if block.type == "text":
                print(f"assistant: {block.text}")
            elif block.type == "toolCall":
                print(f"  -> {block.name}({block.arguments})")
    elif event.type == "tool_execution_end":
        status = "error" if event.is_error else "ok"
        body = "\n".join(c.text for c in event.result.content if c.type == "text")
        print(f"  <- {event.tool_name} [{status}]\n" + "\n".join("     " + line for line in body.splitlines()))
        details = event.result.details or {}
        if "diff" in details:
            print("\n".join("     " + line for line in details["diff"].splitlines()))


if __name__ == "__main__":
    sys.exit(main())

"""Claude with extended thinking and a tool, streamed to the terminal (anthropic-messages API).

Needs ``ANTHROPIC_API_KEY`` (or ``ANTHROPIC_OAUTH_TOKEN``); without it the script says so and exits 0.
Run: ``ANTHROPIC_API_KEY=sk-ant-... python examples/anthropic.py``. Set ``AGENTCORE_MODEL`` to try
another ``anthropic/`` catalog model, e.g. ``anthropic/claude-sonnet-4-5`` (any other value,
such as the CLI's ``scripted``, an alias or another provider's model, is ignored).
"""

from __future__ import annotations

import os
import sys

from agentcore import Agent, UnknownModelError, get_model, tool


@tool
def word_length(word: str) -> int:
    """Count the letters of a word.

    Args:
        word: the word to measure.
    """
    return len(word)


def main() -> int:
    if not (os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_OAUTH_TOKEN")):
        print("Set ANTHROPIC_API_KEY to run this example (https://console.anthropic.com/).")
        return 0
    wanted = os.environ.get("AGENTCORE_MODEL", "")  # the CLI's too: "scripted", an alias, ...
    try:
        model = get_model(wanted if wanted.startswith("anthropic/") else "anthropic/claude-haiku-4-5")
    except UnknownModelError as exc:
        print(f"AGENTCORE_MODEL={wanted}: {exc}")
        return 2
    agent = Agent(
        model,
        system_prompt="Answer briefly. Use tools for counting.",
        tools=[word_length],
        thinking_level="low",
        max_tokens=4096,
    )
    for event in agent.stream("Which is longer, 'pelican' or 'albatross'? Check with the tool."):
        update = getattr(event, "assistant_message_event", None)
        if update is not None and update.type in ("thinking_delta", "text_delta"):
            dim = update.type == "thinking_delta"  # thinking in dim grey, the answer plain
            print(f"\033[2m{update.delta}\033[0m" if dim else update.delta, end="", flush=True)
        elif event.type == "tool_execution_end":
            print(f"\n  [{event.tool_name} -> {event.result.content[0].text}]")
    last = agent.state.messages[-1]
    usage = last.usage
    print(f"\n\nstop: {last.stop_reason}  tokens in/out: {usage.input}/{usage.output}  cost: ${usage.cost.total:.5f}")
    if last.stop_reason == "error":
        print(f"error: {last.error_message}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

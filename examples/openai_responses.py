"""OpenAI through the Responses API: reasoning summaries, a tool, and a follow-up turn.

Needs ``OPENAI_API_KEY``; without it the script says so and exits 0.
Run: ``OPENAI_API_KEY=sk-... python examples/openai_responses.py``. Set ``AGENTCORE_MODEL`` to try
another ``openai/`` catalog model (they use the ``openai-responses`` wire API; any other value is ignored).
"""

from __future__ import annotations

import os
import sys

from agentcore import Agent, UnknownModelError, get_model, tool


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers exactly.

    Args:
        a: first factor.
        b: second factor.
    """
    return a * b


def main() -> int:
    if not os.environ.get("OPENAI_API_KEY"):
        print("Set OPENAI_API_KEY to run this example (https://platform.openai.com/api-keys).")
        return 0
    wanted = os.environ.get("AGENTCORE_MODEL", "")  # the CLI's too: "scripted", an alias, ...
    try:
        model = get_model(wanted if wanted.startswith("openai/") else "openai/gpt-5-mini")
    except UnknownModelError as exc:
        print(f"AGENTCORE_MODEL={wanted}: {exc}")
        return 2
    # session_id becomes the prompt_cache_key, so the second turn can reuse the cached prefix
    agent = Agent(
        model,
        system_prompt="Use the multiply tool for arithmetic.",
        tools=[multiply],
        thinking_level="low",
        session_id="example-session",
    )

    def show(event) -> None:
        update = getattr(event, "assistant_message_event", None)
        if update is not None and update.type == "text_delta":
            print(update.delta, end="", flush=True)
        elif event.type == "tool_execution_start":
            print(f"-> {event.tool_name}({event.args})")

    agent.subscribe(show)
    for question in ("What is 1231 * 2331?", "And that result times 3?"):
        print(f"\n> {question}")
        agent.prompt(question)
        last = agent.state.messages[-1]
        usage = last.usage
        print(
            f"\n  [stop: {last.stop_reason}, input {usage.input} (+{usage.cache_read} cached), "
            f"output {usage.output}, ${usage.cost.total:.5f}]"
        )
        if last.stop_reason == "error":
            print(f"error: {last.error_message}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

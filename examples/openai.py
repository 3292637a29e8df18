"""OpenAI Chat Completions with a tool, streamed to the terminal (openai-completions API).

Needs ``OPENAI_API_KEY``; without it the script says so and exits 0.
Run: ``OPENAI_API_KEY=sk-... python examples/openai.py``. ``OPENAI_MODEL`` picks another model id
(default ``gpt-4o-mini``). The same code talks to Groq, xAI, OpenRouter or DeepSeek: change
``provider``/``base_url`` (for catalog models simply use ``get_model("groq/llama-3.3-70b-versatile")``).
"""

from __future__ import annotations

import os
import sys

from agentcore import Agent, Model, ModelCost, tool


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers exactly.

    Args:
        a: the first factor.
        b: the second factor.
    """
    return a * b


def main() -> int:
    if not os.environ.get("OPENAI_API_KEY"):
        print("Set OPENAI_API_KEY to run this example (https://platform.openai.com/api-keys).")
        return 0
    model = Model(
        id=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"),
        api="openai-completions",
        provider="openai",
        base_url="https://api.openai.com/v1",
        input=("text", "image"),
        cost=ModelCost(input=0.15, output=0.6, cache_read=0.075),
    )
    agent = Agent(model, system_prompt="Use the tool for arithmetic. Answer in one sentence.", tools=[multiply])
    for event in agent.stream("What is 1231 * 2331?"):
        update = getattr(event, "assistant_message_event", None)
        if update is not None and update.type == "text_delta":
            print(update.delta, end="", flush=True)
        elif event.type == "tool_execution_end":
            print(f"[{event.tool_name} -> {event.result.content[0].text}]")
    last = agent.state.messages[-1]
    print(
        f"\n\nstop: {last.stop_reason}  tokens in/out: {last.usage.input}/{last.usage.output}  "
        f"cost: ${last.usage.cost.total:.6f}"
    )
    if last.stop_reason == "error":
        print(f"error: {last.error_message}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

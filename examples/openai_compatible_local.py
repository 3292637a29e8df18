"""A local OpenAI-compatible server (Ollama, llama.cpp, vLLM, LM Studio) as the agent's model.

Start a server first, e.g. ``ollama serve`` + ``ollama pull llama3.2`` (default below), or
``llama-server -m model.gguf --port 8080 --jinja`` and set ``OPENAI_BASE_URL``. If nothing
answers at the URL the script says so and exits 0.

    OPENAI_BASE_URL=http://127.0.0.1:11434/v1 OPENAI_MODEL=llama3.2 python examples/openai_compatible_local.py

No API key is needed: the provider name "local" has no key variable, so no Authorization header
is sent (pass ``api_key=`` if your server wants one). Loopback URLs get the local-server profile
(no ``store``/``developer`` role/``reasoning_effort``, ``max_tokens``); override with ``compat=``.
"""

from __future__ import annotations

import os
import sys

from agentcore import Agent, Model, tool


@tool
def add(a: float, b: float) -> float:
    """Add two numbers.

    Args:
        a: the first number.
        b: the second number.
    """
    return a + b


def server_is_up(base_url: str) -> bool:
    import requests

    try:
        requests.get(base_url.rstrip("/") + "/models", timeout=2)
    except requests.RequestException:
        return False
    return True


def main() -> int:
    base_url = os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")
    if not server_is_up(base_url):
        print(
            f"No OpenAI-compatible server answers at {base_url}; start one (e.g. `ollama serve`) "
            "or set OPENAI_BASE_URL."
        )
        return 0
    model = Model(
        id=os.environ.get("OPENAI_MODEL", "llama3.2"),
        api="openai-completions",
        provider="local",
        base_url=base_url,
        context_window=32768,
        max_tokens=4096,
    )
    agent = Agent(model, system_prompt="You are terse. Use the add tool for sums.", tools=[add])
    for event in agent.stream("What is 17.5 + 24.25? Use the tool."):
        update = getattr(event, "assistant_message_event", None)
        if update is not None and update.type in ("text_delta", "thinking_delta"):
            print(update.delta, end="", flush=True)
        elif event.type == "tool_execution_end":
            print(f"[{event.tool_name} -> {event.result.content[0].text}]")
    last = agent.state.messages[-1]
    print(f"\n\nstop: {last.stop_reason}  tokens in/out: {last.usage.input}/{last.usage.output}")
    if last.stop_reason == "error":
        print(f"error: {last.error_message}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Gemini with thinking and two tools (google-generative-ai API, ``alt=sse`` streaming).

Needs ``GEMINI_API_KEY``; without it the script says so and exits 0.
Run: ``GEMINI_API_KEY=... python examples/gemini.py``. Set ``AGENTCORE_MODEL`` to try another
``google/`` catalog model, e.g. ``google/gemini-2.5-pro`` (any other value is ignored).
"""

from __future__ import annotations

import os
import sys

from agentcore import Agent, UnknownModelError, get_model, tool

CAPITALS = {"france": "Paris", "japan": "Tokyo", "peru": "Lima"}
TEMPERATURES = {"Paris": 18, "Tokyo": 24, "Lima": 21}


@tool
def get_capital(country: str) -> str:
    """Get the capital of a country.

    Args:
        country: the country name in English.
    """
    return CAPITALS[country.lower()]


@tool
def get_temperature(city: str) -> str:
    """Get today's temperature in a city, in degrees Celsius.

    Args:
        city: the city name.
    """
    return f"{TEMPERATURES[city]}°C"


def main() -> int:
    if not os.environ.get("GEMINI_API_KEY"):
        print("Set GEMINI_API_KEY to run this example (https://aistudio.google.com/apikey).")
        return 0
    wanted = os.environ.get("AGENTCORE_MODEL", "")  # the CLI's too: "scripted", an alias, ...
    try:
        model = get_model(wanted if wanted.startswith("google/") else "google/gemini-2.5-flash")
    except UnknownModelError as exc:
        print(f"AGENTCORE_MODEL={wanted}: {exc}")
        return 2
    agent = Agent(
        model,
        system_prompt="You are a concise travel assistant.",
        tools=[get_capital, get_temperature],
        thinking_level="low",
    )

    def show(event) -> None:
        if event.type == "message_end" and event.message.role == "assistant":
            for block in event.message.content:
                if block.type == "thinking":
                    print(f"(thinking) {block.thinking.strip()[:200]}")
                elif block.type == "text":
                    print(block.text)
                elif block.type == "toolCall":
                    print(f"-> {block.name}({block.arguments})")

    agent.subscribe(show)
    agent.prompt("How warm is it today in the capitals of France and Japan?")
    last = agent.state.messages[-1]
    print(f"\nstop: {last.stop_reason}  tokens in/out: {last.usage.input}/{last.usage.output}")
    if last.stop_reason == "error":
        print(f"error: {last.error_message}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

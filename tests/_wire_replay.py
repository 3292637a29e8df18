"""Helpers for the Responses / Anthropic / Gemini wire tests: recordings and pure replays.

Recordings are read from ``../shared/recordings`` (never copied into the repo); a test that needs
one is skipped when the folder is absent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import pytest

from agentcore.providers.sse import iter_sse
from agentcore.types import AssistantMessage, TextContent, ToolResultMessage

SHARED = Path(__file__).resolve().parents[2] / "shared"
RECORDINGS = SHARED / "recordings"

#: the tool of the recorded OpenAI tool-call streams (``multiply(a, b)``)
MULTIPLY = {
    "name": "multiply",
    "description": "Multiply two numbers.",
    "parameters": {
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
        "type": "object",
    },
}


def load_recording(api: str, name: str) -> Dict[str, Any]:
    path = RECORDINGS / api / f"{name}.json"
    if not path.exists():
        pytest.skip(f"recording {api}/{name} not available (needs {RECORDINGS})")
    return json.loads(path.read_text(encoding="utf-8"))


def chunked(data: bytes, size: int = 7) -> List[bytes]:
    """``data`` cut into small pieces, so events and UTF-8 characters straddle chunk borders."""
    return [data[i : i + size] for i in range(0, len(data), size)]


def replay_pure(
    make_state: Callable[[AssistantMessage, Callable[[Any], None]], Any], body: str, model: Any, chunk_size: int = 7
) -> Tuple[AssistantMessage, List[Any]]:
    """Feed a recorded SSE body through a wire state machine without HTTP; return (output, events)."""
    output = AssistantMessage(api=model.api, provider=model.provider, model=model.id)
    events: List[Any] = []
    state = make_state(output, events.append)
    for sse in iter_sse(chunked(body.encode("utf-8"), chunk_size)):
        data: Any = sse.data
        try:
            data = json.loads(sse.data)
        except ValueError:
            pass
        state.handle(sse.event, data)
    state.finish()
    return output, events


def event_types(events: List[Any]) -> List[str]:
    return [e.type for e in events]


def run_stream(provider: Any, model: Any, context: Any, **options: Any) -> Tuple[AssistantMessage, List[Any]]:
    """Run ``provider.stream`` to the end; return (final message, all events)."""
    stream = provider.stream(model, context, **options)
    events = list(stream)
    return stream.result(), events


def first_user_text(request_body: Dict[str, Any]) -> str:
    """The first user text of a recorded Anthropic/OpenAI/Gemini request body."""
    if "messages" in request_body:
        content = request_body["messages"][0]["content"]
        return content if isinstance(content, str) else content[0]["text"]
    if "input" in request_body:
        content = request_body["input"][0]["content"]
        return content if isinstance(content, str) else content[0]["text"]
    return request_body["contents"][0]["parts"][0]["text"]


def tool_result(call: Any, text: str) -> ToolResultMessage:
    """The successful text result of tool call ``call`` (a :class:`~agentcore.types.ToolCall`)."""
    return ToolResultMessage(tool_call_id=call.id, tool_name=call.name, content=[TextContent(text)])


def responses_tool_results(recording: Dict[str, Any], turn: int, message: Any) -> List[ToolResultMessage]:
    """The results of ``message``'s tool calls, with the outputs the Responses recording sent in
    the request of interaction ``turn + 1`` (none after the last interaction)."""
    if turn + 1 >= len(recording["interactions"]):
        return []
    outputs = {
        item["call_id"]: item["output"]
        for item in recording["interactions"][turn + 1]["request"]["body"]["input"]
        if item.get("type") == "function_call_output"
    }
    return [tool_result(call, outputs[call.id.split("|")[0]]) for call in message.tool_calls]

"""Replays of REAL recorded ConverseStream traffic through a local server, in small chunks, with
exact expectations; the request bodies built for the same conversations match the recorded ones."""

from __future__ import annotations

from typing import Any, List, Tuple

import pytest
from agentcore_bedrock import BedrockProvider
from bedrock_helpers import Reply, Server, load_recording, local_model, recorded_body

from agentcore.types import (
    AgentContext,
    AssistantMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

NOVA_PRICES = dict(input=0.035, output=0.14, cache_read=0.00875, cache_write=0.0)


def _run(server: Server, model: Any, context: AgentContext, **options: Any) -> Tuple[AssistantMessage, List[Any]]:
    stream = BedrockProvider().stream(model, context, **options)
    events = list(stream)
    return stream.result(), events


def _replay(server: Server, recording: dict, index: int = 0, chunk_size: int = 7) -> None:
    response = recording["interactions"][index]["response"]
    server.enqueue(
        Reply(
            status=response["status"],
            body=recorded_body(recording, index),
            content_type=response["content_type"],
            chunk_size=chunk_size,
        )
    )


def _nova(server: Server) -> Any:
    from agentcore.types import ModelCost

    return local_model(server, "us.amazon.nova-micro-v1:0", cost=ModelCost(**NOVA_PRICES))


def _user_text(body: dict) -> str:
    return body["messages"][0]["content"][0]["text"]


@pytest.mark.parametrize("chunk_size", [1, 7, 4096])
def test_text_stream_replay(server: Server, aws_env: dict, chunk_size: int) -> None:
    recording = load_recording("text-stream")
    sent = recording["interactions"][0]["request"]
    _replay(server, recording, chunk_size=chunk_size)
    model = _nova(server)
    context = AgentContext(system_prompt="You are a helpful chatbot.", messages=[UserMessage(_user_text(sent["body"]))])
    message, events = _run(server, model, context, temperature=0.0)

    assert message.stop_reason == "stop" and message.error_message is None
    text = (
        "The capital of France is Paris. Paris is not only the capital city but also the most populous "
        "city in France, and it is a major center for culture, commerce, fashion, and international "
        "diplomacy. Known for its historical landmarks, such as the Eiffel Tower, the Louvre Museum, and "
        'Notre-Dame Cathedral, Paris is often referred to as "The City of Light" or "The City of Love."'
    )
    assert [type(b) for b in message.content] == [TextContent]
    assert message.content[0].text == text
    assert [e.type for e in events] == ["start", "text_start"] + ["text_delta"] * 29 + ["text_end", "done"]
    assert "".join(e.delta for e in events if e.type == "text_delta") == text
    usage = message.usage
    assert (usage.input, usage.output, usage.cache_read, usage.cache_write, usage.total_tokens) == (13, 82, 0, 0, 95)
    assert usage.cost.input == pytest.approx(13 * 0.035 / 1e6)
    assert usage.cost.total == pytest.approx((13 * 0.035 + 82 * 0.14) / 1e6)

    (request,) = server.requests
    assert request.path == sent["path"] == "/model/us.amazon.nova-micro-v1%3A0/converse-stream"
    body = request.json()
    assert body["messages"] == sent["body"]["messages"]
    assert body["system"] == sent["body"]["system"]
    assert body["inferenceConfig"] == {"maxTokens": 4096, "temperature": 0.0}


def test_reasoning_with_signature_replay(server: Server, aws_env: dict) -> None:
    recording = load_recording("reasoning-with-signature")
    sent = recording["interactions"][0]["request"]
    _replay(server, recording)
    model = local_model(server, "us.anthropic.claude-sonnet-4-20250514-v1:0", reasoning=True, max_tokens=64000)
    message, events = _run(
        server, model, AgentContext(messages=[UserMessage("Hello")]), reasoning="minimal", max_tokens=4096
    )

    assert message.stop_reason == "stop"
    thinking, text = message.content
    assert isinstance(thinking, ThinkingContent) and isinstance(text, TextContent)
    assert thinking.thinking == (
        'The user has greeted me with a simple "Hello". I should respond in a friendly '
        "and welcoming manner. This is a straightforward greeting, so I'll respond warmly "
        "and ask how I can help them today."
    )
    assert thinking.thinking_signature.startswith("Eu0CCkgIBxABGAIqQJDccbDQkr81n7Qj")
    assert thinking.thinking_signature.endswith("Gtiq".replace("q", "Q") + "LMIm1o471iEYAQ==")
    assert len(thinking.thinking_signature) == 496 and not thinking.redacted
    assert text.text == "Hello! It's nice to meet you. How can I help you today?"
    kinds = [e.type for e in events]
    assert kinds == (
        ["start", "thinking_start"]
        + ["thinking_delta"] * 14
        + ["thinking_end", "text_start"]
        + ["text_delta"] * 5
        + ["text_end", "done"]
    )
    assert (message.usage.input, message.usage.output, message.usage.total_tokens) == (36, 73, 109)

    body = server.requests[0].json()
    assert body["messages"][0]["content"][0] == sent["body"]["messages"][0]["content"][0]
    assert body["additionalModelRequestFields"]["thinking"] == sent["body"]["additionalModelRequestFields"]["thinking"]
    assert body["inferenceConfig"] == {"maxTokens": 4096 + 1024}  # room for the answer above the budget
    assert "temperature" not in body["inferenceConfig"]

    # the signed reasoning is replayed verbatim to the same model
    follow_up = AgentContext(messages=[UserMessage("Hello"), message, UserMessage("Bye")])
    from agentcore_bedrock import build_request_body

    replayed = build_request_body(model, follow_up, cache_retention="none")["messages"][1]
    assert replayed == {
        "role": "assistant",
        "content": [
            {
                "reasoningContent": {
                    "reasoningText": {"text": thinking.thinking, "signature": thinking.thinking_signature}
                }
            },
            {"text": text.text},
        ],
    }


def test_tool_use_then_text_replay(server: Server, aws_env: dict) -> None:
    recording = load_recording("tool-use-then-text")
    first, second = (i["request"] for i in recording["interactions"])
    _replay(server, recording, 0)
    _replay(server, recording, 1)
    model = _nova(server)
    tools = [
        {
            "name": spec["toolSpec"]["name"],
            "description": spec["toolSpec"]["description"],
            "parameters": spec["toolSpec"]["inputSchema"]["json"],
        }
        for spec in first["body"]["toolConfig"]["tools"]
    ]
    context = AgentContext(
        system_prompt="You are a helpful chatbot.", tools=tools, messages=[UserMessage(_user_text(first["body"]))]
    )
    message, events = _run(server, model, context)

    assert message.stop_reason == "toolUse"
    text, call = message.content
    assert text.text.startswith("<thinking> To find the temperature") and text.text.endswith("</thinking>\n")
    assert isinstance(call, ToolCall)
    assert (call.id, call.name, call.arguments) == (
        "tooluse_lAG_zP8QRHmSYOwZzzaCqA",
        "get_temperature",
        {"city": "Paris"},
    )
    kinds = [e.type for e in events]
    assert kinds[-5:] == ["text_end", "toolcall_start", "toolcall_delta", "toolcall_end", "done"]
    assert (message.usage.input, message.usage.output, message.usage.total_tokens) == (471, 91, 562)
    body = server.requests[0].json()
    assert body["toolConfig"] == first["body"]["toolConfig"]
    assert body["messages"] == first["body"]["messages"] and body["system"] == first["body"]["system"]

    result = ToolResultMessage(tool_call_id=call.id, tool_name=call.name, content=[TextContent("30°C")])
    context.messages.extend([message, result])
    answer, _ = _run(server, model, context)
    assert answer.stop_reason == "stop"
    assert answer.content[0].text == "The current temperature in Paris, the capital of France, is 30°C."
    assert (answer.usage.input, answer.usage.output, answer.usage.total_tokens) == (577, 18, 595)
    assert server.requests[1].json()["messages"] == second["body"]["messages"]  # how the result goes back

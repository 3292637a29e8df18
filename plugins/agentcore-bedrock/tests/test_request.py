"""Request bodies (no HTTP): message shapes, tools, caching, thinking, and what is never sent."""

from __future__ import annotations

from typing import Any

import pytest
from agentcore_bedrock import build_request_body

from agentcore.types import (
    AgentContext,
    AssistantMessage,
    ImageContent,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

API = "bedrock-converse-stream"
TOOL = {
    "name": "get_weather",
    "description": "Weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def _model(model_id: str, **fields: Any) -> Model:
    return Model(
        id=model_id,
        api=API,
        provider="amazon-bedrock",
        base_url="https://bedrock-runtime.us-east-1.amazonaws.com",
        **fields,
    )


CLAUDE = _model("us.anthropic.claude-sonnet-4-5-20250929-v1:0", reasoning=True, max_tokens=64000)
NOVA = _model("us.amazon.nova-micro-v1:0", max_tokens=10000)  # text only, like the catalog's
NOVA_LITE = _model("us.amazon.nova-lite-v1:0", max_tokens=10000, input=("text", "image"))


def _asst(model: Model, *content: Any, stop_reason: str = "stop") -> AssistantMessage:
    return AssistantMessage(
        content=list(content), api=API, provider=model.provider, model=model.id, stop_reason=stop_reason
    )


def test_system_messages_and_cache_points_for_claude(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PI_CACHE_RETENTION", raising=False)
    context = AgentContext(system_prompt="Be brief.", messages=[UserMessage("Hi")])
    body = build_request_body(CLAUDE, context)
    assert body["system"] == [{"text": "Be brief."}, {"cachePoint": {"type": "default"}}]
    assert body["messages"] == [{"role": "user", "content": [{"text": "Hi"}, {"cachePoint": {"type": "default"}}]}]
    assert body["inferenceConfig"] == {"maxTokens": 32000}
    long = build_request_body(CLAUDE, context, cache_retention="long")
    assert long["system"][1] == {"cachePoint": {"type": "default", "ttl": "1h"}}
    none = build_request_body(CLAUDE, context, cache_retention="none")
    assert none["system"] == [{"text": "Be brief."}] and none["messages"][0]["content"] == [{"text": "Hi"}]
    nova = build_request_body(NOVA, context, temperature=0.2, max_tokens=100)
    assert nova["system"] == [{"text": "Be brief."}]  # Nova caches by itself: no cache points
    assert nova["inferenceConfig"] == {"maxTokens": 100, "temperature": 0.2}
    assert "toolConfig" not in nova and "additionalModelRequestFields" not in nova


def test_images_tools_and_tool_results() -> None:
    call_a = ToolCall(id="tooluse_a", name="get_weather", arguments={"city": "Paris"})
    call_b = ToolCall(id="tooluse_b", name="get_weather", arguments={"city": "Rome"})
    messages = [
        UserMessage(
            [TextContent("What is here?"), ImageContent(data="aGVsbG8=", mime_type="image/png"), TextContent("   ")]
        ),
        _asst(NOVA_LITE, TextContent("Let me check."), TextContent(""), call_a, call_b, stop_reason="toolUse"),
        ToolResultMessage(tool_call_id="tooluse_a", tool_name="get_weather", content=[TextContent("sunny")]),
        ToolResultMessage(
            tool_call_id="tooluse_b",
            tool_name="get_weather",
            content=[TextContent("rain"), ImageContent(data="AAAA", mime_type="image/jpeg")],
            is_error=True,
        ),
    ]
    body = build_request_body(NOVA_LITE, AgentContext(messages=messages, tools=[TOOL]), tool_choice="any")
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"text": "What is here?"}, {"image": {"format": "png", "source": {"bytes": "aGVsbG8="}}}],
        },
        {
            "role": "assistant",
            "content": [
                {"text": "Let me check."},
                {"toolUse": {"toolUseId": "tooluse_a", "name": "get_weather", "input": {"city": "Paris"}}},
                {"toolUse": {"toolUseId": "tooluse_b", "name": "get_weather", "input": {"city": "Rome"}}},
            ],
        },
        {
            "role": "user",
            "content": [  # consecutive results share one user message
                {"toolResult": {"toolUseId": "tooluse_a", "content": [{"text": "sunny"}], "status": "success"}},
                {
                    "toolResult": {
                        "toolUseId": "tooluse_b",
                        "status": "error",
                        "content": [{"text": "rain"}, {"image": {"format": "jpeg", "source": {"bytes": "AAAA"}}}],
                    }
                },
            ],
        },
    ]
    assert body["toolConfig"] == {
        "tools": [
            {
                "toolSpec": {
                    "name": "get_weather",
                    "description": "Weather of a city.",
                    "inputSchema": {"json": TOOL["parameters"]},
                }
            }
        ],
        "toolChoice": {"any": {}},
    }
    named = build_request_body(
        NOVA, AgentContext(messages=messages, tools=[TOOL]), tool_choice={"type": "tool", "name": "get_weather"}
    )
    assert named["toolConfig"]["toolChoice"] == {"tool": {"name": "get_weather"}}
    # tool_choice="none" sends no real tools, but the history's toolUse blocks need a toolConfig
    # (Bedrock refuses them without one): stubs of the names used, no toolChoice.
    stub = {"type": "object", "properties": {}}
    gone = "No longer available in this conversation."
    expected = {"tools": [{"toolSpec": {"name": "get_weather", "description": gone, "inputSchema": {"json": stub}}}]}
    for context, choice in (
        (AgentContext(messages=messages, tools=[TOOL]), "none"),
        (AgentContext(messages=messages), None),
    ):
        assert build_request_body(NOVA, context, tool_choice=choice)["toolConfig"] == expected
    plain = AgentContext(messages=[UserMessage("hi")], tools=[TOOL])
    assert "toolConfig" not in build_request_body(NOVA, plain, tool_choice="none")


def test_unsupported_image_type_is_a_clear_error() -> None:
    context = AgentContext(messages=[UserMessage([ImageContent(data="AAAA", mime_type="image/tiff")])])
    with pytest.raises(ValueError, match="image/tiff"):
        build_request_body(NOVA_LITE, context)


def test_thinking_replay_per_model_family() -> None:
    signed = ThinkingContent(thinking="ponder", thinking_signature="c2ln")
    unsigned = ThinkingContent(thinking="half a thought", thinking_signature="")
    redacted = ThinkingContent(thinking="[Reasoning redacted]", thinking_signature="YmxvYg==", redacted=True)
    history = [UserMessage("q"), _asst(CLAUDE, signed, unsigned, redacted, TextContent("a")), UserMessage("more")]
    claude = build_request_body(CLAUDE, AgentContext(messages=history), cache_retention="none")["messages"][1]
    assert claude["content"] == [
        {"reasoningContent": {"reasoningText": {"text": "ponder", "signature": "c2ln"}}},
        {"text": "half a thought"},  # unsigned Claude reasoning is rejected by Bedrock: sent as text
        {"reasoningContent": {"redactedContent": "YmxvYg=="}},
        {"text": "a"},
    ]
    qwen = _model("qwen.qwen3-32b-v1:0", reasoning=True)
    own = [UserMessage("q"), _asst(qwen, signed, TextContent("a")), UserMessage("more")]
    assert build_request_body(qwen, AgentContext(messages=own))["messages"][1]["content"] == [
        {"reasoningContent": {"reasoningText": {"text": "ponder"}}},
        {"text": "a"},
    ]  # no signature field
    # another model's thinking becomes plain text, its redacted thinking is dropped, ids normalised
    other = [
        UserMessage("q"),
        AssistantMessage(
            content=[signed, redacted, ToolCall(id="call|x.y", name="t")],
            api="openai-responses",
            provider="openai",
            model="gpt-5",
            stop_reason="toolUse",
        ),
        ToolResultMessage(tool_call_id="call|x.y", tool_name="t", content=[TextContent("ok")]),
    ]
    converted = build_request_body(CLAUDE, AgentContext(messages=other), cache_retention="none")["messages"]
    assert converted[1]["content"] == [
        {"text": "ponder"},
        {"toolUse": {"toolUseId": "call_x_y", "name": "t", "input": {}}},
    ]
    assert converted[2]["content"][0]["toolResult"]["toolUseId"] == "call_x_y"


def test_signed_claude_reasoning_with_blank_text_is_replayed() -> None:
    # Claude's omitted thinking display (Opus 4.7's default) streams only a signature; with tools,
    # Bedrock refuses the next request unless the toolUse turn carries its signed reasoning back
    opus = _model("us.anthropic.claude-opus-4-7", reasoning=True, max_tokens=128000)
    call = ToolCall(id="tooluse_1", name="get_weather", arguments={"city": "Paris"})
    history = [
        UserMessage("q"),
        _asst(opus, ThinkingContent(thinking="", thinking_signature="c2ln"), call, stop_reason="toolUse"),
        ToolResultMessage(tool_call_id="tooluse_1", tool_name="get_weather", content=[TextContent("sunny")]),
    ]
    body = build_request_body(opus, AgentContext(messages=history, tools=[TOOL]), reasoning="high")
    assert body["messages"][1]["content"] == [
        {"reasoningContent": {"reasoningText": {"text": "", "signature": "c2ln"}}},
        {"toolUse": {"toolUseId": "tooluse_1", "name": "get_weather", "input": {"city": "Paris"}}},
    ]


def test_blank_tool_results_and_system_prompts_send_no_empty_text() -> None:
    # Bedrock refuses empty text blocks, and the tool result stays in the history: every later
    # request of the conversation would fail the same way
    call_a = ToolCall(id="t1", name="get_weather", arguments={"city": "Paris"})
    call_b = ToolCall(id="t2", name="get_weather", arguments={"city": "Rome"})
    history = [
        UserMessage("q"),
        _asst(NOVA_LITE, call_a, call_b, stop_reason="toolUse"),
        ToolResultMessage(tool_call_id="t1", tool_name="get_weather", content=[TextContent(""), TextContent(" \n")]),
        ToolResultMessage(
            tool_call_id="t2",
            tool_name="get_weather",
            content=[TextContent(""), ImageContent(data="AAAA", mime_type="image/png")],
            is_error=True,
        ),
        ToolResultMessage(tool_call_id="t2", tool_name="get_weather", content=[]),
    ]
    body = build_request_body(NOVA_LITE, AgentContext(messages=history, system_prompt="  \n"))
    assert "system" not in body
    results = [block["toolResult"] for block in body["messages"][2]["content"]]
    assert [r["content"] for r in results] == [
        [{"text": "(no output)"}],
        [{"image": {"format": "png", "source": {"bytes": "AAAA"}}}],
        [{"text": "(no output)"}],
    ]
    text_only = build_request_body(NOVA, AgentContext(messages=history))["messages"][2]["content"][1]
    assert text_only["toolResult"]["content"] == [{"text": "(image omitted: this model does not accept images)"}]


def test_failed_and_empty_assistant_turns_are_not_replayed() -> None:
    history = [
        UserMessage("q"),
        _asst(CLAUDE, TextContent("partial"), stop_reason="error"),
        _asst(CLAUDE, TextContent("  ")),
        UserMessage("again"),
    ]
    body = build_request_body(CLAUDE, AgentContext(messages=history), cache_retention="none")
    assert body["messages"] == [{"role": "user", "content": [{"text": "q"}, {"text": "again"}]}]  # roles alternate


def _roles(model: Model, messages: Any) -> Any:
    body = build_request_body(model, AgentContext(messages=messages), cache_retention="none")
    return [(m["role"], [next(iter(block)) for block in m["content"]]) for m in body["messages"]]


@pytest.mark.parametrize(
    "dropped",
    [
        _asst(NOVA, TextContent("par"), stop_reason="error"),
        _asst(NOVA, stop_reason="aborted"),
        _asst(NOVA, TextContent("  ")),  # a blank answer
        _asst(NOVA, ThinkingContent(thinking=" ", thinking_signature="")),  # nothing left to send
    ],
)
def test_a_dropped_assistant_turn_leaves_alternating_roles(dropped: AssistantMessage) -> None:
    # Bedrock answers 400 "A conversation must alternate between user and assistant roles"
    assert _roles(NOVA, [UserMessage("hi"), dropped, UserMessage("again")]) == [("user", ["text", "text"])]


def test_a_steer_after_tool_results_joins_their_user_message() -> None:
    call = ToolCall(id="t1", name="get_weather", arguments={"city": "Paris"})
    history = [
        UserMessage("hi"),
        _asst(NOVA, call, stop_reason="toolUse"),
        ToolResultMessage(tool_call_id="t1", tool_name="get_weather", content=[TextContent("sunny")]),
        UserMessage("also Rome"),
        _asst(NOVA, TextContent("ok"), stop_reason="error"),
        UserMessage("and Oslo"),
    ]
    assert _roles(NOVA, history) == [
        ("user", ["text"]),
        ("assistant", ["toolUse"]),
        ("user", ["toolResult", "text", "text"]),  # results first, then the steering texts
    ]
    cached = build_request_body(CLAUDE, AgentContext(messages=history))["messages"]
    assert len(cached) == 3 and cached[-1]["content"][-1] == {"cachePoint": {"type": "default"}}  # once, at the end
    assert [b for m in cached for b in m["content"]].count({"cachePoint": {"type": "default"}}) == 1


def test_images_are_dropped_for_a_text_only_model() -> None:  # as every core wire API does (spec §10)
    image = ImageContent(data="aGVsbG8=", mime_type="image/png")
    call = ToolCall(id="t1", name="read", arguments={"path": "chart.png"})
    history = [
        UserMessage([TextContent("what is this"), image]),
        _asst(NOVA, call, stop_reason="toolUse"),
        ToolResultMessage(tool_call_id="t1", tool_name="read", content=[TextContent("Read chart.png"), image]),
        UserMessage([image]),  # nothing left: merged away, not sent empty
    ]
    messages = build_request_body(NOVA, AgentContext(messages=history))["messages"]
    assert "image" not in str(messages).replace("image omitted", "")
    assert messages[2] == {
        "role": "user",
        "content": [{"toolResult": {"toolUseId": "t1", "content": [{"text": "Read chart.png"}], "status": "success"}}],
    }
    only_image = ToolResultMessage(tool_call_id="t1", tool_name="read", content=[image])
    result = build_request_body(NOVA, AgentContext(messages=history[:2] + [only_image]))["messages"][2]
    assert result["content"][0]["toolResult"]["content"] == [
        {"text": "(image omitted: this model does not accept images)"}
    ]
    vision = build_request_body(NOVA_LITE, AgentContext(messages=history))["messages"]
    assert str(vision).count("'image': {'format': 'png'") == 3


@pytest.mark.parametrize(
    "level, budget, max_tokens",
    [
        ("minimal", 1024, 33024),
        ("low", 2048, 34048),
        ("medium", 8192, 40192),
        ("high", 16384, 48384),
        ("xhigh", 16384, 48384),
    ],
)
def test_budget_thinking_for_claude(level: str, budget: int, max_tokens: int) -> None:
    body = build_request_body(CLAUDE, AgentContext(messages=[UserMessage("q")]), reasoning=level, temperature=0.5)
    assert body["additionalModelRequestFields"] == {
        "thinking": {"type": "enabled", "budget_tokens": budget},
        "anthropic_beta": ["interleaved-thinking-2025-05-14"],
    }
    assert body["inferenceConfig"] == {"maxTokens": max_tokens}  # no temperature while thinking


def test_budget_shrinks_to_leave_room_and_custom_budgets_win() -> None:
    small = _model("anthropic.claude-3-7-sonnet-20250219-v1:0", reasoning=True, max_tokens=8192)
    body = build_request_body(
        small, AgentContext(messages=[UserMessage("q")]), reasoning="high", interleaved_thinking=False
    )
    assert body["inferenceConfig"]["maxTokens"] == 8192
    assert body["additionalModelRequestFields"] == {"thinking": {"type": "enabled", "budget_tokens": 7168}}
    custom = build_request_body(
        CLAUDE, AgentContext(messages=[UserMessage("q")]), reasoning="low", thinking_budgets={"low": 3000}
    )
    assert custom["additionalModelRequestFields"]["thinking"]["budget_tokens"] == 3000


def test_adaptive_thinking_on_claude_4_6_and_later() -> None:
    opus46 = Model.from_dict(
        {
            "id": "global.anthropic.claude-opus-4-6-v1",
            "api": API,
            "provider": "amazon-bedrock",
            "baseUrl": "",
            "reasoning": True,
            "input": ["text"],
            "cost": {"input": 5, "output": 25, "cacheRead": 0.5, "cacheWrite": 6.25},
            "contextWindow": 1000000,
            "maxTokens": 128000,
            "thinkingLevelMap": {"xhigh": "max"},
        }
    )
    body = build_request_body(opus46, AgentContext(messages=[UserMessage("q")]), reasoning="xhigh")
    assert body["additionalModelRequestFields"] == {
        "thinking": {"type": "adaptive", "display": "summarized"},
        "output_config": {"effort": "max"},
    }
    sonnet46 = _model("us.anthropic.claude-sonnet-4-6", reasoning=True, max_tokens=64000)
    for level, effort in (("minimal", "low"), ("medium", "medium"), ("high", "high"), ("xhigh", "high")):
        fields = build_request_body(sonnet46, AgentContext(messages=[UserMessage("q")]), reasoning=level)[
            "additionalModelRequestFields"
        ]
        assert fields == {
            "thinking": {"type": "adaptive", "display": "summarized"},
            "output_config": {"effort": effort},
        }


@pytest.mark.parametrize(
    "model_id",
    [
        "us.anthropic.claude-sonnet-4-20250514-v1:0",
        "anthropic.claude-opus-4-1-20250805-v1:0",
        "eu.anthropic.claude-haiku-4-5-20251001-v1:0",
    ],
)
def test_dated_claude_4_ids_use_budget_thinking(model_id: str) -> None:
    # regression: the date after "-4-" was read as the minor version (4.20250514 >= 4.6: adaptive)
    body = build_request_body(
        _model(model_id, reasoning=True, max_tokens=32000), AgentContext(messages=[UserMessage("q")]), reasoning="low"
    )
    assert body["additionalModelRequestFields"]["thinking"]["type"] == "enabled"


def test_no_thinking_fields_when_off_or_not_claude() -> None:
    context = AgentContext(messages=[UserMessage("q")])
    assert "additionalModelRequestFields" not in build_request_body(CLAUDE, context, reasoning="off")
    assert "additionalModelRequestFields" not in build_request_body(
        _model("deepseek.r1-v1:0", reasoning=True), context, reasoning="high"
    )


def test_surrogates_are_removed_and_metadata_passes_through() -> None:
    context = AgentContext(system_prompt="sys\ud800", messages=[UserMessage("hi\udfff there")])
    body = build_request_body(NOVA, context, request_metadata={"team": "a"})
    assert body["system"] == [{"text": "sys"}]
    assert body["messages"][0]["content"] == [{"text": "hi there"}]
    assert body["requestMetadata"] == {"team": "a"}


@pytest.mark.parametrize(
    "choice, expected",
    [
        ("required", {"any": {}}),  # the generic word (agentcore.options) forces a tool here too
        ({"type": "any"}, {"any": {}}),
        ({"type": "function", "function": {"name": "get_weather"}}, {"tool": {"name": "get_weather"}}),
    ],
)
def test_every_documented_tool_choice_is_sent(choice: Any, expected: Any) -> None:
    context = AgentContext(messages=[UserMessage("weather?")], tools=[TOOL])
    assert build_request_body(NOVA, context, tool_choice=choice)["toolConfig"]["toolChoice"] == expected


@pytest.mark.parametrize("choice", [{"type": "tool"}, "always", {"type": "function", "function": "get_weather"}])
def test_a_tool_choice_bedrock_cannot_send_is_named(choice: Any) -> None:
    # {"type": "tool"} without a name was a bare KeyError: 'name'; other values were dropped silently
    context = AgentContext(messages=[UserMessage("weather?")], tools=[TOOL])
    with pytest.raises(ValueError, match=r"^Bedrock cannot use tool_choice .*: use \"auto\", \"any\""):
        build_request_body(NOVA, context, tool_choice=choice)

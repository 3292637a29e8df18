"""anthropic-messages wire API (providers spec §14): request bodies, stream state machine, replays."""

from __future__ import annotations

import dataclasses
import json

import pytest
from _wire_replay import event_types, load_recording, replay_pure, tool_result

from agentcore.providers import anthropic as wire
from agentcore.providers.base import ProviderError, StreamWriter, encode_body
from agentcore.types import (
    AgentContext,
    AssistantMessage,
    ImageContent,
    Model,
    ModelCost,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)

API = "anthropic-messages"
HAIKU = Model(
    id="claude-haiku-4-5-20251001",
    api=API,
    provider="anthropic",
    base_url="https://api.anthropic.com",
    reasoning=True,
    input=("text", "image"),
    cost=ModelCost(1, 5, 0.1, 1.25),
    context_window=200000,
    max_tokens=64000,
)
OPUS46 = Model(
    id="claude-opus-4-6",
    api=API,
    provider="anthropic",
    base_url="https://api.anthropic.com",
    reasoning=True,
    input=("text", "image"),
    max_tokens=128000,
)
TOOL = {
    "name": "fixed_version",
    "description": "Return a fixed test version string",
    "parameters": {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
        "$defs": {"x": {"type": "string"}},
    },
}


def _replay(name: str, turn: int = 0, model: Model = HAIKU):
    rec = load_recording(API, name)
    body = rec["interactions"][turn]["response"]["body"]
    return replay_pure(lambda out, push: wire.AnthropicStreamState(model, StreamWriter(model, out, push)), body, model)


def _assistant(content, stop="toolUse", model=HAIKU):
    return AssistantMessage(
        content=content, api=model.api, provider=model.provider, model=model.id, usage=Usage(), stop_reason=stop
    )


# --------------------------------------------------------------------------- recorded streams


def test_thinking_stream_keeps_thinking_signature_and_text():  # spec §14 stream handling, §7 usage
    out, events = _replay("thinking-stream")
    assert event_types(events) == (
        ["thinking_start"]
        + ["thinking_delta"] * 6
        + ["thinking_end", "text_start", "text_delta", "text_delta", "text_end"]
    )
    thinking, text = out.content
    assert isinstance(thinking, ThinkingContent) and isinstance(text, TextContent)
    assert thinking.thinking.startswith("The user wants two names for a pet pelican")
    assert thinking.thinking.endswith("Let me give two brief, catchy names:")
    assert thinking.thinking_signature.startswith("EuYDCmMIDBgCKkC05Zda4P") and thinking.thinking_signature.endswith(
        "GAE="
    )
    assert text.text == ('1. **Pouch** - references their iconic bill pouch\n2. **Pelé** - playful take on "pelican"')
    assert out.stop_reason == "stop"
    u = out.usage
    assert (u.input, u.output, u.cache_read, u.cache_write, u.total_tokens) == (46, 133, 0, 0, 179)
    assert u.cost.input == pytest.approx(46 * 1 / 1e6) and u.cost.output == pytest.approx(133 * 5 / 1e6)
    assert u.cost.total == pytest.approx(u.cost.input + u.cost.output)


def test_two_parallel_tool_calls_without_arguments():  # spec §21: empty partial_json -> {}
    out, events = _replay("two-parallel-tool-calls-then-text")
    assert event_types(events) == ["toolcall_start", "toolcall_delta", "toolcall_end"] * 2
    assert [(c.id, c.name, c.arguments) for c in out.content] == [
        ("toolu_01LtHJmixrs9NcWQkK8hu8hj", "pelican_name_generator", {}),
        ("toolu_01N8a4jWyf116qKTMqKKmjyt", "pelican_name_generator", {}),
    ]
    assert [e.content_index for e in events if e.type == "toolcall_end"] == [0, 1]
    assert out.stop_reason == "toolUse"
    assert (out.usage.input, out.usage.output, out.usage.total_tokens) == (542, 62, 604)


def test_server_tool_blocks_and_citations_are_ignored():  # spec §14: unknown block types ignored
    out, events = _replay("server-tool-blocks")
    assert all(isinstance(b, TextContent) for b in out.content)
    assert len(out.content) == 10  # blocks 2..11 of the API are text; 0 and 1 are server-tool blocks
    assert "toolcall_start" not in event_types(events)
    text = out.text
    assert text.startswith("Based on the search results, here's the current weather in San Francisco:\n\n")
    assert "high of 63°F." in text and text.endswith("this weekend.")
    assert out.stop_reason == "stop"
    assert (out.usage.input, out.usage.output) == (10423, 341)


def test_thinking_then_tool_call_chain_first_turn():  # spec §14, recording thinking-then-tool-call-chain
    out, _ = _replay("thinking-then-tool-call-chain")
    thinking, call = out.content
    assert thinking.thinking.startswith("The user wants me to:\n1. Use the fixed_version tool")
    assert thinking.thinking_signature.startswith("EoQDCm0IDhgCKkCDzGs2")
    assert (call.id, call.name, call.arguments) == ("toolu_01825dXWLSoJwCst1qTsiWdb", "fixed_version", {})
    assert out.stop_reason == "toolUse"
    assert (out.usage.input, out.usage.output, out.usage.total_tokens) == (598, 92, 690)


def test_next_turn_body_has_recorded_shape():  # issue 4: multi-turn request shape
    rec = load_recording(API, "thinking-then-tool-call-chain")
    first, _ = _replay("thinking-then-tool-call-chain")
    call = first.content[1]
    context = AgentContext(
        messages=[
            UserMessage(content=rec["interactions"][0]["request"]["body"]["messages"][0]["content"][0]["text"]),
            first,
            tool_result(call, "0.32a0"),
        ],
        tools=[TOOL],
    )
    body = wire.build_request_body(HAIKU, context, reasoning="minimal", cache_retention="none")
    recorded = rec["interactions"][1]["request"]["body"]
    assert [m["role"] for m in body["messages"]] == [m["role"] for m in recorded["messages"]]
    assert body["messages"][1]["content"] == recorded["messages"][1]["content"]  # thinking + signature + tool_use
    assert body["messages"][2]["content"] == [dict(recorded["messages"][2]["content"][0], is_error=False)]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert body["tools"][0]["input_schema"] == {"type": "object", "properties": {}, "required": []}


def test_definitions_the_properties_refer_to_are_kept():  # spec §14 tools
    """A schema whose properties point into its ``$defs`` (a nested pydantic model, an MCP tool)
    lost the definitions, and the API refuses a ``$ref`` to nowhere ("input_schema: JSON schema
    is invalid"); definitions nothing refers to are still left out, as the spec says."""
    point = {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}
    nested = {
        "name": "plot",
        "description": "Plot points",
        "parameters": {
            "type": "object",
            "properties": {"points": {"type": "array", "items": {"$ref": "#/$defs/Point"}}},
            "required": ["points"],
            "$defs": {"Point": point},
        },
    }
    legacy = {
        "name": "move",
        "description": "Move to a point",
        "parameters": {
            "type": "object",
            "properties": {"to": {"$ref": "#/definitions/P"}},
            "definitions": {"P": point},
        },
    }
    tools = wire.convert_tools(AgentContext(tools=[nested, legacy, TOOL]))
    assert tools[0]["input_schema"] == {
        "type": "object",
        "properties": {"points": {"type": "array", "items": {"$ref": "#/$defs/Point"}}},
        "required": ["points"],
        "$defs": {"Point": point},
    }
    assert tools[1]["input_schema"]["definitions"] == {"P": point}
    assert tools[2]["input_schema"] == {"type": "object", "properties": {}, "required": []}


def test_parallel_tool_results_merge_into_one_user_message():  # spec §14 conversion
    rec = load_recording(API, "two-parallel-tool-calls-then-text")
    first, _ = _replay("two-parallel-tool-calls-then-text")
    results = [tool_result(c, t) for c, t in zip(first.content, ("Charles", "Sammy"))]
    context = AgentContext(messages=[UserMessage(content="Two names for a pet pelican"), first, *results])
    body = wire.build_request_body(HAIKU, context)
    recorded = rec["interactions"][1]["request"]["body"]["messages"]
    assert [m["role"] for m in body["messages"]] == [m["role"] for m in recorded]
    sent_uses = [b["id"] for b in body["messages"][1]["content"] if b["type"] == "tool_use"]
    assert sent_uses == [b["id"] for b in recorded[1]["content"] if b["type"] == "tool_use"]
    sent_results = [(b["tool_use_id"], b["content"]) for b in body["messages"][2]["content"]]
    assert sent_results == [(b["tool_use_id"], b["content"]) for b in recorded[2]["content"]]
    # default cache retention marks the last block of the final user message only
    assert body["messages"][2]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in body["messages"][2]["content"][0]


def test_history_tool_calls_without_tools_declare_stubs_and_forbid_calls():
    # Anthropic 400s ("must define tools") when tool_use blocks come back without tool definitions,
    # e.g. after /tools none or the final_result tool of a finished ask().
    first, _ = _replay("two-parallel-tool-calls-then-text")
    results = [tool_result(c, t) for c, t in zip(first.content, ("Charles", "Sammy"))]
    messages = [UserMessage(content="Two names for a pet pelican"), first, *results, UserMessage(content="thanks")]
    body = wire.build_request_body(HAIKU, AgentContext(messages=messages))
    used = sorted({b.name for b in first.content if isinstance(b, ToolCall)})
    assert sorted(t["name"] for t in body["tools"]) == used
    assert body["tool_choice"] == {"type": "none"}
    chosen = wire.build_request_body(HAIKU, AgentContext(messages=messages), tool_choice="auto")
    assert chosen["tool_choice"] == {"type": "auto"}
    plain = wire.build_request_body(HAIKU, AgentContext(messages=[UserMessage(content="hi")]))
    assert "tools" not in plain and "tool_choice" not in plain


# --------------------------------------------------------------------------- request body


def test_body_basics_system_cache_and_temperature():  # spec §14 body, §18 caching
    ctx = AgentContext(system_prompt="Be terse.", messages=[UserMessage(content="hi")])
    body = wire.build_request_body(HAIKU, ctx, temperature=0.2, cache_retention="long")
    assert body["model"] == HAIKU.id and body["stream"] is True
    assert body["max_tokens"] == 32000  # min(model.max_tokens, 32000)
    assert body["system"] == [
        {"type": "text", "text": "Be terse.", "cache_control": {"type": "ephemeral", "ttl": "1h"}}
    ]
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
        }
    ]
    assert body["temperature"] == 0.2 and "thinking" not in body


def test_thinking_budget_raises_max_tokens_and_drops_temperature():  # spec §11 budget helper
    ctx = AgentContext(messages=[UserMessage(content="hi")])
    body = wire.build_request_body(HAIKU, ctx, reasoning="medium", temperature=0.5, max_tokens=1000)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert body["max_tokens"] == 9192 and "temperature" not in body
    tight = Model(id="claude-x", api=API, provider="anthropic", reasoning=True, max_tokens=4000)
    body = wire.build_request_body(tight, ctx, reasoning="high", thinking_budgets={"high": 5000})
    assert body["max_tokens"] == 4000 and body["thinking"]["budget_tokens"] == 2976


def test_adaptive_thinking_for_opus_46():  # spec §11 adaptive models
    ctx = AgentContext(messages=[UserMessage(content="hi")])
    body = wire.build_request_body(OPUS46, ctx, reasoning="xhigh")
    assert body["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert body["output_config"] == {"effort": "max"}
    assert wire.build_request_body(OPUS46, ctx, reasoning="minimal")["output_config"] == {"effort": "low"}
    assert "thinking" not in wire.build_request_body(OPUS46, ctx)


def test_adaptive_thinking_asks_for_summarized_thinking():  # spec §22: display "summarized" by default
    """Opus 4.7 and later default to ``display: "omitted"``: thinking blocks arrive with a
    signature and no text, so ``reasoning="high"`` showed the user no thinking at all (Opus 4.6
    and earlier default to "summarized"). Adaptive thinking asks for the summaries explicitly."""
    ctx = AgentContext(messages=[UserMessage(content="hi")])
    opus47 = dataclasses.replace(OPUS46, id="claude-opus-4-7")
    assert wire.build_request_body(opus47, ctx, reasoning="high")["thinking"].get("display") == "summarized"
    assert "display" not in wire.build_request_body(HAIKU, ctx, reasoning="high")["thinking"]  # budget models


def test_thinking_level_map_effort_and_unsupported_levels():  # issue 17: Model.thinking_level_map
    ctx = AgentContext(messages=[UserMessage(content="hi")])
    opus = dataclasses.replace(OPUS46, thinking_level_map={"minimal": None, "xhigh": "xhigh", "max": "max"})
    assert wire.build_request_body(opus, ctx, reasoning="xhigh")["output_config"] == {"effort": "xhigh"}
    assert wire.build_request_body(opus, ctx, reasoning="minimal")["output_config"] == {"effort": "low"}
    never = dataclasses.replace(HAIKU, thinking_level_map={lv: None for lv in ("minimal", "low", "medium", "high")})
    assert "thinking" not in wire.build_request_body(never, ctx, reasoning="high")  # nothing supported: off


def test_headers_betas_and_key_precedence():  # spec §11 beta header, §4 header merge
    h = wire.build_headers(HAIKU, "sk-test")
    assert h["x-api-key"] == "sk-test" and h["anthropic-version"] == "2023-06-01"
    # tools stream eagerly per tool (issue 17): the fine-grained streaming beta is not needed
    assert h["anthropic-beta"] == "interleaved-thinking-2025-05-14"
    assert "anthropic-beta" not in wire.build_headers(OPUS46, "k")  # adaptive: interleaved built in
    assert wire.request_url(HAIKU) == "https://api.anthropic.com/v1/messages"


def _with_tools(*names):
    tools = [dict(TOOL, name=name) for name in names]
    return AgentContext(system_prompt="Be terse.", messages=[UserMessage(content="hi")], tools=tools)


def test_cache_breakpoint_on_last_tool_and_eager_input_streaming():  # issue 17: reference parity
    body = wire.build_request_body(HAIKU, _with_tools("a", "b"))
    assert [t["name"] for t in body["tools"]] == ["a", "b"]
    assert all(t["eager_input_streaming"] is True for t in body["tools"])
    assert "cache_control" not in body["tools"][0]
    assert body["tools"][1]["cache_control"] == {"type": "ephemeral"}
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    long_ = wire.build_request_body(HAIKU, _with_tools("a"), cache_retention="long")
    assert long_["tools"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    none = wire.build_request_body(HAIKU, _with_tools("a"), cache_retention="none")
    assert "cache_control" not in none["tools"][0] and "cache_control" not in none["system"][0]


def test_compat_without_eager_streaming_uses_the_beta_header():  # issue 17: supportsEagerToolInputStreaming
    fireworks = Model(id="accounts/fireworks/models/x", api=API, provider="fireworks", base_url="https://f.example")
    ctx = _with_tools("a")
    body = wire.build_request_body(fireworks, ctx, cache_retention="long")
    assert "eager_input_streaming" not in body["tools"][0] and "cache_control" not in body["tools"][0]
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}  # no 1h TTL there
    headers = wire.build_headers(fireworks, "k", {"session_id": "s-1"}, ctx)
    assert headers["anthropic-beta"].split(",")[0] == "fine-grained-tool-streaming-2025-05-14"
    assert headers["x-session-affinity"] == "s-1"
    no_tools = AgentContext(messages=[UserMessage(content="hi")])
    assert "fine-grained" not in wire.build_headers(fireworks, "k", {}, no_tools).get("anthropic-beta", "")
    assert "x-session-affinity" not in wire.build_headers(
        fireworks, "k", {"session_id": "s", "cache_retention": "none"}
    )
    # the compat flags of a catalog or custom model override the detected defaults
    custom = Model(
        id="m",
        api=API,
        provider="proxy",
        base_url="https://p.example",
        compat={
            "supportsEagerToolInputStreaming": False,
            "sendSessionAffinityHeaders": True,
            "supportsCacheControlOnTools": False,
            "supportsLongCacheRetention": False,
        },
    )
    body = wire.build_request_body(custom, ctx, cache_retention="long")
    assert "eager_input_streaming" not in body["tools"][0] and "cache_control" not in body["tools"][0]
    assert body["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert wire.build_headers(custom, "k", {"session_id": "s-2"}, ctx)["x-session-affinity"] == "s-2"
    assert "x-session-affinity" not in wire.build_headers(HAIKU, "k", {"session_id": "s-2"}, ctx)


def test_cache_retention_from_the_environment_and_bad_values(monkeypatch):  # issue 17: AGENTCORE_CACHE_RETENTION
    ctx = _with_tools("a")
    monkeypatch.setenv("AGENTCORE_CACHE_RETENTION", "long")
    assert wire.build_request_body(HAIKU, ctx)["system"][0]["cache_control"]["ttl"] == "1h"
    assert "ttl" not in wire.build_request_body(HAIKU, ctx, cache_retention="short")["system"][0]["cache_control"]
    monkeypatch.setenv("AGENTCORE_CACHE_RETENTION", "none")
    assert "cache_control" not in wire.build_request_body(HAIKU, ctx)["system"][0]
    monkeypatch.delenv("AGENTCORE_CACHE_RETENTION")
    monkeypatch.setenv("PI_CACHE_RETENTION", "long")  # the reference's variable
    assert wire.build_request_body(HAIKU, ctx)["system"][0]["cache_control"]["ttl"] == "1h"
    with pytest.raises(ValueError, match="cache_retention option is 'forever': use one of 'none', 'short', 'long'"):
        wire.build_request_body(HAIKU, ctx, cache_retention="forever")
    monkeypatch.setenv("AGENTCORE_CACHE_RETENTION", "1h")
    with pytest.raises(ValueError, match=r"\$AGENTCORE_CACHE_RETENTION is '1h'"):
        wire.build_request_body(HAIKU, ctx)


def test_assistant_replay_rules():  # spec §14 messages: redacted, unsigned, blank blocks
    msg = _assistant(
        [
            ThinkingContent(thinking="[Reasoning redacted]", thinking_signature="opaque", redacted=True),
            ThinkingContent(thinking="   ", thinking_signature="sig"),
            ThinkingContent(thinking="unsigned thought"),
            ThinkingContent(thinking=" ", thinking_signature=""),
            TextContent(text="  "),
            TextContent(text="answer"),
            ToolCall(id="toolu_1", name="t", arguments={"a": 1}),
        ]
    )
    body = wire.build_request_body(
        HAIKU, AgentContext(messages=[UserMessage(content="q"), msg]), cache_retention="none"
    )
    assert body["messages"][1]["content"] == [
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "thinking", "thinking": "   ", "signature": "sig"},  # signed: sent back as it came
        {"type": "text", "text": "unsigned thought"},
        {"type": "text", "text": "answer"},
        {"type": "tool_use", "id": "toolu_1", "name": "t", "input": {"a": 1}},
    ]


def test_images_in_user_and_tool_results():  # spec §10 anthropic
    img = ImageContent(data="AAAA", mime_type="image/png")
    call = ToolCall(id="toolu_9", name="shot", arguments={})
    ctx = AgentContext(
        messages=[
            UserMessage(content=[TextContent("look"), img]),
            _assistant([call]),
            ToolResultMessage(tool_call_id="toolu_9", tool_name="shot", content=[img], is_error=False),
        ]
    )
    body = wire.build_request_body(HAIKU, ctx, cache_retention="none")
    assert body["messages"][0]["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
    }
    assert body["messages"][2]["content"][0]["content"] == [
        {"type": "text", "text": "(see attached image)"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
    ]
    text_only = Model(id="claude-t", api=API, provider="anthropic", input=("text",))
    body = wire.build_request_body(text_only, ctx, cache_retention="none")
    assert body["messages"][0]["content"] == [{"type": "text", "text": "look"}]


def test_a_tool_result_image_with_a_blank_caption_sends_no_empty_text_block():  # spec §10 anthropic
    """A tool returning an image with an empty caption sent ``{"type": "text", "text": ""}`` next
    to it, which the API refuses (400 "text content blocks must be non-empty")."""
    img = ImageContent(data="AAAA", mime_type="image/png")
    call = ToolCall(id="toolu_9", name="shot", arguments={})
    result = ToolResultMessage(
        tool_call_id="toolu_9", tool_name="shot", content=[TextContent(""), img, TextContent(" ")]
    )
    ctx = AgentContext(messages=[UserMessage(content="look"), _assistant([call]), result])
    content = wire.build_request_body(HAIKU, ctx, cache_retention="none")["messages"][2]["content"][0]["content"]
    assert content == [
        {"type": "text", "text": "(see attached image)"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
    ]


def test_an_error_result_without_text_is_sent_with_a_placeholder():  # spec §14 tool results
    """An error result with no text (a hook that blocked a call with an empty reason, an image a
    text-only model cannot take) was sent as ``content: ""``, which the API refuses (400
    "content cannot be empty if `is_error` is true") on this and every later request."""
    img = ImageContent(data="AAAA", mime_type="image/png")
    calls = [ToolCall(id=f"toolu_{n}", name="f", arguments={}) for n in range(4)]
    results = [
        ToolResultMessage(tool_call_id="toolu_0", tool_name="f", content=[], is_error=True),
        ToolResultMessage(tool_call_id="toolu_1", tool_name="f", content=[TextContent(" \n")], is_error=True),
        ToolResultMessage(tool_call_id="toolu_2", tool_name="f", content=[img], is_error=True),
        ToolResultMessage(tool_call_id="toolu_3", tool_name="f", content=[], is_error=False),
    ]
    ctx = AgentContext(messages=[UserMessage(content="go"), _assistant(calls), *results])
    text_only = Model(id="claude-t", api=API, provider="anthropic", input=("text",))
    blocks = wire.build_request_body(text_only, ctx, cache_retention="none")["messages"][2]["content"]
    assert [b["content"] for b in blocks] == ["(the tool failed without output)"] * 3 + [""]
    assert [b["is_error"] for b in blocks] == [True, True, True, False]


def test_a_signed_thought_without_text_is_sent_back_in_the_tool_loop():  # spec §6: signed thinking is kept
    """With ``display: "omitted"`` (Opus 4.7's default) a thinking block streams no text, only its
    signature. It was dropped from the next request as "blank", so the tool loop's assistant turn
    started with ``tool_use``: the API wants the turn's thinking blocks back unmodified ("a final
    assistant message must start with a thinking block") and the reasoning was lost."""
    opus47 = dataclasses.replace(OPUS46, id="claude-opus-4-7")
    _, first, _ = _feed(
        [
            _START,
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}},
            ),
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQB"}},
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 1,
                    "content_block": {"type": "tool_use", "id": "toolu_7", "name": "fixed_version", "input": {}},
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 1}),
            ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}}),
            ("message_stop", {"type": "message_stop"}),
        ],
        model=opus47,
    )
    first.stop_reason = "toolUse"
    result = ToolResultMessage(tool_call_id="toolu_7", tool_name="fixed_version", content=[TextContent("0.32")])
    ctx = AgentContext(messages=[UserMessage(content="q"), first, result], tools=[TOOL])
    body = wire.build_request_body(opus47, ctx, reasoning="high", cache_retention="none")
    assert body["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "", "signature": "EqQB"},
        {"type": "tool_use", "id": "toolu_7", "name": "fixed_version", "input": {}},
    ]


def test_opus_47_and_later_models_think_adaptively():  # spec §22: adaptive thinking beyond Opus 4.6
    """Opus 4.7 refuses ``thinking: {type: "enabled", budget_tokens}`` (400 "thinking.type.enabled
    is not supported for this model"): every reasoning request to it failed. Claude 4.6 and later
    take adaptive thinking and an effort; older ids, dated ones included, keep the token budget."""
    ctx = AgentContext(messages=[UserMessage(content="hi")], tools=[TOOL])
    for model_id in ("claude-opus-4-7", "claude-opus-4.7", "claude-sonnet-5", "claude-opus-4-8-20270101"):
        model = dataclasses.replace(OPUS46, id=model_id)
        body = wire.build_request_body(model, ctx, reasoning="medium")
        assert body["thinking"] == {"type": "adaptive", "display": "summarized"}, model_id
        assert body["output_config"] == {"effort": "medium"}
        assert "interleaved-thinking" not in wire.build_headers(model, "k", {}, ctx).get("anthropic-beta", "")
    assert wire.build_request_body(dataclasses.replace(OPUS46, id="claude-opus-4-8"), ctx, reasoning="max")[
        "output_config"
    ] == {"effort": "max"}
    for model_id in ("claude-opus-4-20250514", "claude-3-7-sonnet-20250219", "claude-sonnet-4-5", HAIKU.id):
        body = wire.build_request_body(dataclasses.replace(HAIKU, id=model_id), ctx, reasoning="medium")
        assert body["thinking"] == {"type": "enabled", "budget_tokens": 8192}, model_id


def test_tool_choice_required_is_anthropics_any():  # options: "any"/"required" are one choice
    """``tool_choice="required"`` (a value the options accept, OpenAI's word) was sent as
    ``{"type": "required"}``, which Anthropic refuses with a 400; its word is ``"any"``."""
    ctx = _with_tools("a")
    assert wire.build_request_body(HAIKU, ctx, tool_choice="required")["tool_choice"] == {"type": "any"}
    assert wire.build_request_body(HAIKU, ctx, tool_choice="any")["tool_choice"] == {"type": "any"}
    named = {"type": "tool", "name": "a"}
    assert wire.build_request_body(HAIKU, ctx, tool_choice=named)["tool_choice"] == named


def test_tool_choice_is_left_out_of_a_request_without_tools():  # spec §14 body
    """A ``tool_choice`` with no tools to choose from (an agent's choice outliving its tools, a
    sub-run without tools) was sent, which Anthropic refuses with a 400 ("tool_choice may only be
    specified while providing tools"); stub tools of the history still take the caller's choice."""
    body = wire.build_request_body(HAIKU, AgentContext(messages=[UserMessage(content="hi")]), tool_choice="any")
    assert "tool_choice" not in body and "tools" not in body
    assert wire.build_request_body(HAIKU, _with_tools("a"), tool_choice="auto")["tool_choice"] == {"type": "auto"}


def test_a_blank_system_prompt_is_left_out():  # spec §14: no blank text blocks
    """A whitespace-only system prompt (a template that rendered nothing) was sent as a system
    text block, which the API refuses ("text content blocks must contain non-whitespace text")."""
    body = wire.build_request_body(HAIKU, AgentContext(system_prompt=" \n", messages=[UserMessage("q")]))
    assert "system" not in body
    oauth = wire.build_request_body(
        HAIKU, AgentContext(system_prompt="\n", messages=[UserMessage("q")]), api_key="sk-ant-oat01-x"
    )
    assert [b["text"] for b in oauth["system"]] == ["You are Claude Code, Anthropic's official CLI for Claude."]


def test_tool_arguments_cut_inside_an_emoji_escape_still_encode():  # spec §5 unicode hygiene
    """A tool call cut by ``max_tokens`` between the two halves of an escaped emoji keeps half a
    surrogate pair in its lenient arguments. Replayed as ``tool_use.input`` it made the body
    impossible to encode (bare ``UnicodeEncodeError``) on every later turn of the conversation."""
    fragment = '{"text": "smile \\ud83d'
    _, cut, _ = _feed(
        [
            _START,
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "tool_use", "id": "toolu_8", "name": "say", "input": {}},
                },
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": fragment},
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {}}),
            ("message_stop", {"type": "message_stop"}),
        ]
    )
    assert cut.stop_reason == "length" and cut.content[0].arguments == {"text": "smile \ud83d"}
    ctx = AgentContext(messages=[UserMessage(content="q"), cut, UserMessage(content="go on")])
    body = wire.build_request_body(HAIKU, ctx, cache_retention="none")
    sent = json.loads(encode_body(body, HAIKU, {}))  # no UnicodeEncodeError
    assert sent["messages"][1]["content"][0]["input"] == {"text": "smile "}
    assert cut.content[0].arguments == {"text": "smile \ud83d"}  # the history itself is not changed


def test_unpaired_surrogates_are_removed():  # spec §5 unicode hygiene
    ctx = AgentContext(system_prompt="sys\ud800", messages=[UserMessage(content="a\udc00b")])
    body = wire.build_request_body(HAIKU, ctx, cache_retention="none")
    assert body["system"][0]["text"] == "sys" and body["messages"][0]["content"] == "ab"
    json.dumps(body).encode("utf-8")  # encodable


def test_a_surrogate_pair_in_the_history_is_joined_not_dropped():  # an emoji cut over two deltas
    ctx = AgentContext(messages=[UserMessage(content="a\ud83d\ude00b\udc00")])
    body = wire.build_request_body(HAIKU, ctx, cache_retention="none")
    assert body["messages"][0]["content"] == "a\U0001f600b"


# --------------------------------------------------------------------------- synthetic streams


def _feed(events, model=HAIKU):
    out = AssistantMessage(api=API, provider="anthropic", model=model.id)
    pushed = []
    state = wire.AnthropicStreamState(model, StreamWriter(model, out, pushed.append))
    for name, data in events:
        state.handle(name, data)
    return state, out, pushed


_START = (
    "message_start",
    {
        "type": "message_start",
        "message": {
            "usage": {
                "input_tokens": 10,
                "output_tokens": 1,
                "cache_read_input_tokens": 5,
                "cache_creation_input_tokens": 7,
            }
        },
    },
)


def test_usage_from_message_start_survives_a_truncated_stream():  # spec §7 anthropic
    state, out, _ = _feed(
        [
            _START,
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            ),
        ]
    )
    assert (out.usage.input, out.usage.cache_read, out.usage.cache_write, out.usage.total_tokens) == (10, 5, 7, 23)
    with pytest.raises(ProviderError, match="before message_stop"):
        state.finish()


def test_one_hour_cache_writes_are_priced_at_twice_the_input_price():
    """With cache_retention="long" Anthropic bills 1-hour writes at 2x the input price; all cache
    writes were priced at the catalog's 5-minute cacheWrite rate (1.25x), 37.5% too low."""
    sonnet = dataclasses.replace(HAIKU, cost=ModelCost(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75))
    start = {
        "type": "message_start",
        "message": {
            "usage": {
                "input_tokens": 10,
                "output_tokens": 1,
                "cache_read_input_tokens": 0,
                "cache_creation_input_tokens": 100_000,
                "cache_creation": {"ephemeral_5m_input_tokens": 40_000, "ephemeral_1h_input_tokens": 60_000},
            }
        },
    }
    delta = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}}
    _, out, _ = _feed([("message_start", start), ("message_delta", delta)], model=sonnet)
    assert out.usage.cache_write == 100_000  # the token counts are the API's
    assert out.usage.cost.cache_write == pytest.approx(40_000 * 3.75e-6 + 60_000 * 6.0e-6)  # 0.15 + 0.36
    assert out.usage.cost.total == pytest.approx(10 * 3e-6 + 5 * 15e-6 + 0.51)
    five_minutes = dict(start, message={"usage": dict(start["message"]["usage"], cache_creation=None)})
    _, plain, _ = _feed([("message_start", five_minutes)], model=sonnet)
    assert plain.usage.cost.cache_write == pytest.approx(100_000 * 3.75e-6)  # no split given: the catalog price


def test_error_event_raises_with_payload():  # spec §5: event: error -> raise with the data text
    payload = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    with pytest.raises(ProviderError, match="overloaded_error"):
        _feed([_START, ("error", payload)])


def test_refusal_and_unknown_stop_reasons_are_errors():  # spec §8 anthropic
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": "refusal", "stop_details": {"explanation": "policy"}},
        "usage": {},
    }
    state, out, _ = _feed([_START, ("message_delta", delta), ("message_stop", {"type": "message_stop"})])
    with pytest.raises(ProviderError, match="refusal: policy"):
        state.finish()
    bad = {"type": "message_delta", "delta": {"stop_reason": "weird"}, "usage": {}}
    with pytest.raises(ProviderError, match="Unhandled stop reason: weird"):
        _feed([_START, ("message_delta", bad)])


def test_context_window_stop_reason_keeps_the_answer_as_length():  # spec §8 anthropic
    """``model_context_window_exceeded`` (the answer ran into the context window) is a stop
    reason the API documents: the answer so far is a "length" stop, not an unhandled error."""
    events = [
        _START,
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}),
        (
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Part"}},
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": "model_context_window_exceeded"}, "usage": {}},
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    state, out, _ = _feed(events)
    state.finish()
    assert out.stop_reason == "length" and out.text == "Part"


def test_redacted_thinking_and_streamed_arguments():  # spec §14 stream handling
    events = [
        _START,
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "redacted_thinking", "data": "blob"}},
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "tool_use", "id": "toolu_01X", "name": "get_weather", "input": {}},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": '{"city": "Ber'},
            },
        ),
        (
            "content_block_delta",
            {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": 'lin"}'}},
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 1}),
        (
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 41}},
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    state, out, pushed = _feed(events)
    state.finish()
    redacted, call = out.content
    assert (redacted.redacted, redacted.thinking_signature, redacted.thinking) == (True, "blob", "[Reasoning redacted]")
    assert [e.delta for e in pushed if e.type == "toolcall_delta"] == ['{"city": "Ber', 'lin"}']
    assert call.arguments == {"city": "Berlin"}
    assert pushed[-1].type == "toolcall_end" and pushed[-1].tool_call is call
    assert out.stop_reason == "toolUse" and (out.usage.input, out.usage.output) == (10, 41)


# --------------------------------------------------------------------------- over HTTP (local server)

import threading  # noqa: E402
import time  # noqa: E402

from _servers import Reply, ScriptedServer  # noqa: E402
from _wire_replay import first_user_text, run_stream  # noqa: E402

from agentcore.signals import AbortController  # noqa: E402

RECORDINGS = [
    "server-tool-blocks",
    "thinking-stream",
    "thinking-then-tool-call-chain",
    "two-parallel-tool-calls-then-text",
]


def _served(server, **kw):
    fields = dict(
        id=HAIKU.id,
        api=API,
        provider="anthropic",
        base_url=server.url,
        reasoning=True,
        input=("text", "image"),
        cost=HAIKU.cost,
        max_tokens=64000,
    )
    fields.update(kw)
    return Model(**fields)


def _events(*payloads) -> str:
    return "".join(f"event: {p['type']}\ndata: {json.dumps(p)}\n\n" for p in payloads)


RESPONSE_IDS = {  # issue 17: message_start id (and model, when not the requested haiku) per turn
    "server-tool-blocks": [("msg_01TRpkkgb2QsnyjsGSVdRtGr", "claude-opus-4-1-20250805")],
    "thinking-stream": [("msg_01Eg56TYRnKCEgWtZu2yjR1t", None)],
    "thinking-then-tool-call-chain": [("msg_01JdU4xqNHXL9QCFWkwCDKGr", None), ("msg_01Qb3MMmP6RUjBckfsEVddrQ", None)],
    "two-parallel-tool-calls-then-text": [
        ("msg_01V2noLbAb2NgKnjaNw6Cn3w", None),
        ("msg_01XMATm4UFnjP841TckVuNF4", None),
    ],
}


@pytest.mark.parametrize("name", RECORDINGS)
def test_recording_replays_over_http(name):  # issue 4: every recording through a local server
    rec = load_recording(API, name)
    provider = wire.AnthropicProvider()
    with ScriptedServer() as server:
        server.replay(rec, chunk_size=7)
        model = _served(server)
        messages = [UserMessage(content=first_user_text(rec["interactions"][0]["request"]["body"]))]
        for turn, interaction in enumerate(rec["interactions"]):
            result, events = run_stream(
                provider, model, AgentContext(messages=list(messages), tools=[TOOL]), api_key="sk-test"
            )
            expected, _ = _replay(name, turn, model)
            assert events[0].type == "start" and events[-1].type == "done"
            assert [b.to_dict() for b in result.content] == [b.to_dict() for b in expected.content]
            assert result.usage.to_dict() == expected.usage.to_dict() and result.stop_reason == expected.stop_reason
            assert (result.response_id, result.response_model) == RESPONSE_IDS[name][turn]
            request = server.requests[turn]
            assert (request.method, request.path) == ("POST", "/v1/messages")
            assert request.headers["x-api-key"] == "sk-test" and request.headers["anthropic-version"] == "2023-06-01"
            sent = request.json()
            assert [m["role"] for m in sent["messages"]] == [
                m["role"] for m in interaction["request"]["body"]["messages"]
            ]
            messages.append(result)
            if turn + 1 < len(rec["interactions"]):  # answer the tool calls as the recording did
                recorded_next = rec["interactions"][turn + 1]["request"]["body"]["messages"][-1]["content"]
                outputs = {b["tool_use_id"]: b["content"] for b in recorded_next if b.get("type") == "tool_result"}
                messages.extend(tool_result(call, outputs[call.id]) for call in result.tool_calls)


def test_http_errors_carry_the_anthropic_body(monkeypatch):  # spec §9 anthropic
    err = {"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens"}}
    with ScriptedServer([Reply(status=400, body=json.dumps(err), content_type="application/json")]) as server:
        result, events = run_stream(
            wire.AnthropicProvider(), _served(server), AgentContext(messages=[UserMessage(content="hi")]), api_key="k"
        )
    assert [e.type for e in events] == ["error"]  # no start before a failed request
    assert result.stop_reason == "error"
    assert result.error_message.startswith("400 ") and "prompt is too long" in result.error_message
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_OAUTH_TOKEN", raising=False)
    result, _ = run_stream(
        wire.AnthropicProvider(), _served(server), AgentContext(messages=[UserMessage(content="hi")])
    )
    assert "ANTHROPIC_API_KEY" in result.error_message and result.stop_reason == "error"


def test_retry_after_then_success_and_header_layers():  # spec §9 retries, §4 header merge
    ok = _events(
        {"type": "message_start", "message": {"usage": {"input_tokens": 3, "output_tokens": 1}}},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
        {"type": "message_stop"},
    )
    with ScriptedServer([Reply(status=429, body="{}", headers={"retry-after": "0"}), Reply(body=ok)]) as server:
        model = _served(server, headers={"x-model": "m", "anthropic-version": "2099-01-01"})
        result, _ = run_stream(
            wire.AnthropicProvider(),
            model,
            AgentContext(messages=[UserMessage(content="hi")]),
            api_key="k",
            headers={"X-Model": "opt"},
        )
        assert result.stop_reason == "stop" and result.usage.output == 2
        assert len(server.requests) == 2
        headers = server.requests[1].headers
        assert headers["x-model"] == "opt" and headers["anthropic-version"] == "2099-01-01"


def test_stream_closed_early_keeps_partial_text():  # spec §3 rule 6, upstream message_stop check
    body = _events(
        {"type": "message_start", "message": {"usage": {"input_tokens": 3}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}},
    )
    with ScriptedServer([Reply(body=body, chunk_size=5)]) as server:
        result, events = run_stream(
            wire.AnthropicProvider(), _served(server), AgentContext(messages=[UserMessage(content="hi")]), api_key="k"
        )
    assert result.stop_reason == "error" and "before message_stop" in result.error_message
    assert result.text == "Hel" and result.usage.input == 3
    assert "text_end" not in [e.type for e in events]  # open blocks are not closed on error


def test_malformed_json_and_in_stream_error_event():  # spec §5, §9
    bad = 'event: message_start\ndata: {"type": "message_start", \n\n'
    overloaded = 'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'
    plain = "event: error\ndata: upstream proxy timeout\n\n"
    with ScriptedServer([Reply(body=bad), Reply(body=overloaded), Reply(body=plain)]) as server:
        ctx = AgentContext(messages=[UserMessage(content="hi")])
        first, _ = run_stream(wire.AnthropicProvider(), _served(server), ctx, api_key="k")
        # an overload before any content is retried (issue 17): with no retries left it is the error
        second, _ = run_stream(wire.AnthropicProvider(), _served(server), ctx, api_key="k", max_retries=0)
        third, _ = run_stream(wire.AnthropicProvider(), _served(server), ctx, api_key="k")
    assert first.stop_reason == "error" and "malformed JSON" in first.error_message
    assert second.stop_reason == "error" and "overloaded_error" in second.error_message
    assert second.error_message.endswith("(gave up after 1 attempt, max_retries=0)")
    assert third.error_message == "upstream proxy timeout"


def test_connection_reset_mid_stream_and_non_utf8_bytes():  # issue 4 synthetic cases
    head = _events(
        {"type": "message_start", "message": {"usage": {"input_tokens": 3}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    )
    raw = (
        head.encode() + b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","text":"caf\xff!"}}\n\n'
    )
    with ScriptedServer(
        [
            Reply(body=raw, reset_after=len(raw)),
            Reply(
                body=raw + _events({"type": "content_block_stop", "index": 0}, {"type": "message_stop"}).encode(),
                chunk_size=3,
            ),
        ]
    ) as server:
        ctx = AgentContext(messages=[UserMessage(content="hi")])
        reset, _ = run_stream(wire.AnthropicProvider(), _served(server), ctx, api_key="k")
        replaced, _ = run_stream(wire.AnthropicProvider(), _served(server), ctx, api_key="k")
    assert reset.stop_reason == "error" and reset.text == "caf\ufffd!"
    assert replaced.stop_reason == "stop" and replaced.text == "caf\ufffd!"


def test_abort_mid_stream_returns_promptly():  # spec §9 abort; issue 4: blocked read returns quickly
    head = _events(
        {"type": "message_start", "message": {"usage": {"input_tokens": 3}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "partial"}},
    )
    body = head + _events({"type": "message_stop"})
    controller = AbortController()
    aborted_at = []

    with ScriptedServer([Reply(body=body, stall_after=len(head.encode()))]) as server:

        def abort_when_stalled():
            server.body_started.wait(10)
            aborted_at.append(time.monotonic())
            controller.abort()

        threading.Thread(target=abort_when_stalled, daemon=True).start()
        result, events = run_stream(
            wire.AnthropicProvider(),
            _served(server),
            AgentContext(messages=[UserMessage(content="hi")]),
            api_key="k",
            signal=controller.signal,
        )
        returned = time.monotonic()
    assert result.stop_reason == "aborted" and result.error_message == "Request was aborted"
    assert events[-1].type == "error" and events[-1].reason == "aborted"
    assert returned - aborted_at[0] < 1.0  # the stalled server would hold the read for 30 s


def test_oversize_tool_arguments_stream_in_thousands_of_fragments():  # issue 4 synthetic: oversize args
    payload = {"blob": "x" * 400_000, "n": 1}
    text = json.dumps(payload)
    pieces = [text[i : i + 200] for i in range(0, len(text), 200)]
    body = _events(
        {"type": "message_start", "message": {"usage": {"input_tokens": 3}}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_big", "name": "store", "input": {}},
        },
        *[
            {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": p}}
            for p in pieces
        ],
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    )
    with ScriptedServer([Reply(body=body, chunk_size=65536)]) as server:
        result, events = run_stream(
            wire.AnthropicProvider(), _served(server), AgentContext(messages=[UserMessage(content="hi")]), api_key="k"
        )
    assert result.stop_reason == "toolUse" and result.tool_calls[0].arguments == payload
    assert sum(1 for e in events if e.type == "toolcall_delta") == len(pieces)


def test_agent_run_with_parallel_tools_end_to_end():  # issue 4: end-to-end Agent run per wire API
    from agentcore import Agent, tool

    rec = load_recording(API, "two-parallel-tool-calls-then-text")
    names = iter(["Charles", "Sammy"])
    lock = threading.Lock()

    @tool(description="")
    def pelican_name_generator() -> str:
        with lock:
            return next(names)

    with ScriptedServer() as server:
        server.replay(rec, chunk_size=13)
        agent = Agent(
            model=_served(server, reasoning=False),
            tools=[pelican_name_generator],
            api_key="sk-test",
            tool_execution="sequential",
        )
        new = agent.prompt("Two names for a pet pelican")
        second = server.requests[1].json()
    assert [m.role for m in new] == ["user", "assistant", "toolResult", "toolResult", "assistant"]
    assert new[-1].text.startswith("Here are two great names") and new[-1].stop_reason == "stop"
    recorded = rec["interactions"][1]["request"]["body"]["messages"]
    assert [(b["tool_use_id"], b["content"]) for b in second["messages"][-1]["content"]] == [
        (b["tool_use_id"], b["content"]) for b in recorded[-1]["content"]
    ]
    assert [b["id"] for b in second["messages"][1]["content"]] == [
        b["id"] for b in recorded[1]["content"] if b["type"] == "tool_use"
    ]


def test_foreign_history_is_replayed_with_anthropic_ids():  # spec §6 cross-provider replay
    foreign = AssistantMessage(
        content=[
            ThinkingContent(thinking="reasoned elsewhere", thinking_signature='{"type":"reasoning"}'),
            ToolCall(id="call_abc|fc_1.2", name="t", arguments={}),
        ],
        api="openai-responses",
        provider="openai",
        model="gpt-5",
        usage=Usage(),
        stop_reason="toolUse",
    )
    ctx = AgentContext(
        messages=[
            UserMessage(content="q"),
            foreign,
            ToolResultMessage(tool_call_id="call_abc|fc_1.2", tool_name="t", content=[TextContent("ok")]),
            _assistant([TextContent("aborted half")], stop="aborted"),
            UserMessage(content="again"),
        ]
    )
    body = wire.build_request_body(HAIKU, ctx, cache_retention="none")
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user", "user"]
    assert body["messages"][1]["content"] == [
        {"type": "text", "text": "reasoned elsewhere"},
        {"type": "tool_use", "id": "call_abc_fc_1_2", "name": "t", "input": {}},
    ]
    assert body["messages"][2]["content"][0]["tool_use_id"] == "call_abc_fc_1_2"


def test_output_schema_joins_output_config_next_to_effort():  # issue 13: native structured output
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "additionalProperties": False,
        "title": "answer",
    }
    ctx = AgentContext(messages=[UserMessage("q")])
    body = wire.build_request_body(OPUS46, ctx, reasoning="high", output_schema=schema)
    untitled = {k: v for k, v in schema.items() if k != "title"}
    assert body["output_config"] == {"effort": "high", "format": {"type": "json_schema", "schema": untitled}}
    assert wire.build_request_body(HAIKU, ctx, output_schema=schema)["output_config"] == {
        "format": {"type": "json_schema", "schema": untitled}
    }


def _ok_stream():
    return _events(
        {"type": "message_start", "message": {"usage": {"input_tokens": 3, "output_tokens": 1}}},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
        {"type": "message_stop"},
    )


def test_caching_fields_reach_the_server():  # issue 17: the request body and headers a server receives
    with ScriptedServer([Reply(body=_ok_stream()), Reply(body=_ok_stream())]) as server:
        ctx = _with_tools("a", "b")
        for compat in (None, {"sendSessionAffinityHeaders": True, "supportsEagerToolInputStreaming": False}):
            result, _ = run_stream(
                wire.AnthropicProvider(),
                _served(server, compat=compat),
                ctx,
                api_key="k",
                session_id="sess-3",
                cache_retention="long",
            )
            assert result.stop_reason == "stop", result.error_message
        first, second = server.requests
    body = first.json()
    ttl = {"type": "ephemeral", "ttl": "1h"}
    assert [t.get("cache_control") for t in body["tools"]] == [None, ttl]
    assert [t.get("eager_input_streaming") for t in body["tools"]] == [True, True]
    assert body["system"][0]["cache_control"] == ttl and body["messages"][-1]["content"][-1]["cache_control"] == ttl
    headers = {k.lower(): v for k, v in first.headers.items()}
    assert "x-session-affinity" not in headers and "fine-grained" not in headers.get("anthropic-beta", "")
    headers = {k.lower(): v for k, v in second.headers.items()}
    assert headers["x-session-affinity"] == "sess-3"
    assert "fine-grained-tool-streaming-2025-05-14" in headers["anthropic-beta"]
    assert "eager_input_streaming" not in second.json()["tools"][0]


def test_interleaved_thinking_is_an_option_of_the_agent_and_of_stream():  # issue 11 §3: declared options
    from agentcore import Agent
    from agentcore.providers import complete

    with ScriptedServer([Reply(body=_ok_stream()) for _ in range(3)]) as server:
        model = _served(server)
        Agent(model, api_key="k", interleaved_thinking=False).prompt("hi")
        complete(model, AgentContext(messages=[UserMessage(content="hi")]), api_key="k", interleaved_thinking=True)
        Agent(model, api_key="k").prompt("hi")
        betas = [r.headers.get("anthropic-beta", "") for r in server.requests]
    assert ["interleaved-thinking" in b for b in betas] == [False, True, True]  # the default: on
    assert "interleaved_thinking" in wire.AnthropicProvider.stream_options


def test_an_error_event_nested_too_deeply_is_still_the_error():  # spec §5
    data = '{"type": "error", "error": ' + "[" * 100_000
    error = wire.stream_error(data)
    assert str(error) == data and not error.retryable

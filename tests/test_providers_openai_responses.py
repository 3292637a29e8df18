"""openai-responses wire API (providers spec §13): request bodies, stream state machine, replays."""

from __future__ import annotations

import json

import pytest
from _wire_replay import MULTIPLY, event_types, load_recording, replay_pure, tool_result

from agentcore.providers import openai_responses as wire
from agentcore.providers.base import ProviderError, StreamWriter
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

API = "openai-responses"
GPT55 = Model(
    id="gpt-5.5",
    name="GPT-5.5",
    api=API,
    provider="openai",
    base_url="https://api.openai.com/v1",
    reasoning=True,
    input=("text", "image"),
    cost=ModelCost(1.25, 10, 0.125, 0),
    context_window=400000,
    max_tokens=128000,
)
MINI = Model(
    id="gpt-4o-mini",
    api=API,
    provider="openai",
    base_url="https://api.openai.com/v1",
    reasoning=False,
    input=("text", "image"),
    cost=ModelCost(0.15, 0.6, 0.08, 0),
)


def _replay(name: str, turn: int = 0, model: Model = GPT55, tier=None):
    rec = load_recording(API, name)
    body = rec["interactions"][turn]["response"]["body"]
    return replay_pure(
        lambda out, push: wire.ResponsesStreamState(model, StreamWriter(model, out, push), tier), body, model
    )


def _feed(events, model=GPT55):
    out = AssistantMessage(api=API, provider=model.provider, model=model.id)
    pushed = []
    state = wire.ResponsesStreamState(model, StreamWriter(model, out, pushed.append))
    for data in events:
        state.handle(data["type"], data)
    return state, out, pushed


# --------------------------------------------------------------------------- recorded streams


def test_text_stream():  # spec §13, recording text-stream
    out, events = _replay("text-stream")
    assert event_types(events) == ["text_start", "text_delta", "text_end"]
    (block,) = out.content
    assert block.text == "pong"
    assert json.loads(block.text_signature) == {
        "v": 1,
        "id": "msg_00592e63e61b66660169fab1bada8481a28ef92eb62c168ead",
        "phase": "final_answer",
    }
    assert out.stop_reason == "stop"
    u = out.usage
    assert (u.input, u.output, u.cache_read, u.cache_write, u.total_tokens) == (11, 5, 0, 0, 16)
    assert u.cost.total == pytest.approx((11 * 1.25 + 5 * 10) / 1e6)


def test_tool_call_arguments_in_eleven_deltas():  # spec §13, recording tool-call-with-reasoning
    out, events = _replay("tool-call-with-reasoning")
    assert event_types(events) == ["toolcall_start"] + ["toolcall_delta"] * 11 + ["toolcall_end"]
    (call,) = out.content
    assert call.id == "call_sVidsfFJ6zlzRpelrPkTPlpd|fc_00d64fa806f333310169fab1bf324481a0852cda3180856290"
    assert (call.name, call.arguments) == ("multiply", {"a": 1231, "b": 2331})
    assert out.stop_reason == "toolUse"
    assert (out.usage.input, out.usage.output, out.usage.total_tokens) == (58, 23, 81)


def test_second_turn_text_and_request_shape():  # issue 4: multi-turn request shape
    rec = load_recording(API, "tool-call-with-reasoning")
    first, _ = _replay("tool-call-with-reasoning")
    call = first.content[0]
    context = AgentContext(
        messages=[
            UserMessage(content="What is 1231 * 2331? Use the multiply tool."),
            first,
            tool_result(call, "2869461"),
        ],
        tools=[MULTIPLY],
    )
    body = wire.build_request_body(GPT55, context, reasoning="low")
    recorded = rec["interactions"][1]["request"]["body"]
    shape = lambda items: [(i.get("role"), i.get("type"), i.get("call_id")) for i in items]  # noqa: E731
    assert shape(body["input"]) == shape(recorded["input"])
    sent_call, sent_output = body["input"][1], body["input"][2]
    assert json.loads(sent_call["arguments"]) == json.loads(recorded["input"][1]["arguments"])
    assert sent_call["id"] == "fc_00d64fa806f333310169fab1bf324481a0852cda3180856290"
    assert sent_output == recorded["input"][2]
    assert body["reasoning"] == {"effort": "low", "summary": "auto"}
    assert body["include"] == recorded["include"] and body["store"] is False
    assert body["tools"] == [dict(recorded["tools"][0], strict=False)]
    out, _ = _replay("tool-call-with-reasoning", turn=1)
    assert out.text == "1231 × 2331 = **2,869,461**" and out.stop_reason == "stop"


# --------------------------------------------------------------------------- request body


def test_body_options_and_caching():  # spec §13 body, §18 caching
    ctx = AgentContext(system_prompt="sys", messages=[UserMessage(content="hi")])
    body = wire.build_request_body(
        MINI, ctx, session_id="s1", cache_retention="long", max_tokens=100, temperature=0.3, service_tier="flex"
    )
    assert body["input"][0] == {"role": "system", "content": "sys"}
    assert body["input"][1] == {"role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    assert (body["prompt_cache_key"], body["prompt_cache_retention"]) == ("s1", "24h")
    assert (body["max_output_tokens"], body["temperature"], body["service_tier"]) == (100, 0.3, "flex")
    assert "reasoning" not in body
    none = wire.build_request_body(MINI, ctx, session_id="s1", cache_retention="none")
    assert "prompt_cache_key" not in none and "prompt_cache_retention" not in none


def test_tool_choice_any_is_openais_required_and_needs_tools():  # options: "any"/"required" are one choice
    """``tool_choice="any"`` (a word the options accept) was sent as is, which OpenAI refuses with a
    400 (supported: none, auto, required); and a choice without tools (an agent whose tool_choice
    outlives its tools) got a 400 "'tool_choice' is only allowed when 'tools' are specified"."""
    tools = AgentContext(messages=[UserMessage(content="hi")], tools=[MULTIPLY])
    assert wire.build_request_body(MINI, tools, tool_choice="any")["tool_choice"] == "required"
    assert wire.build_request_body(MINI, tools, tool_choice="required")["tool_choice"] == "required"
    named = {"type": "function", "name": "multiply"}
    assert wire.build_request_body(MINI, tools, tool_choice=named)["tool_choice"] == named
    bare = wire.build_request_body(MINI, AgentContext(messages=[UserMessage(content="hi")]), tool_choice="none")
    assert "tool_choice" not in bare and "tools" not in bare


def test_reasoning_levels_and_developer_role():  # spec §11 openai-responses
    ctx = AgentContext(system_prompt="sys", messages=[UserMessage(content="hi")])
    body = wire.build_request_body(GPT55, ctx, reasoning="xhigh")
    assert body["input"][0]["role"] == "developer"
    assert body["reasoning"] == {"effort": "high", "summary": "auto"}  # gpt-5.5 has no xhigh
    gpt52 = Model(id="gpt-5.2", name="gpt-5.2", api=API, provider="openai", reasoning=True)
    assert wire.build_request_body(gpt52, ctx, reasoning="xhigh")["reasoning"]["effort"] == "xhigh"
    off = wire.build_request_body(gpt52, ctx)  # name starts with gpt-5: the "Juice: 0" note is appended
    assert "reasoning" not in off and off["input"][-1]["content"][0]["text"] == "# Juice: 0 !important"


def test_thinking_level_map_effort_and_off_value():  # issue 17: Model.thinking_level_map
    ctx = AgentContext(messages=[UserMessage(content="hi")])
    model = Model(
        id="gpt-x", api=API, provider="openai", reasoning=True, thinking_level_map={"off": "none", "max": "xhigh"}
    )
    assert wire.build_request_body(model, ctx, reasoning="max")["reasoning"]["effort"] == "xhigh"
    assert wire.build_request_body(model, ctx, reasoning="xhigh")["reasoning"]["effort"] == "xhigh"  # up to max
    assert wire.build_request_body(model, ctx)["reasoning"] == {"effort": "none"}  # off, as the map says


def test_replay_of_reasoning_text_and_foreign_ids():  # spec §13 input items
    reasoning_item = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "ENC"}
    mine = AssistantMessage(
        content=[
            ThinkingContent(thinking="", thinking_signature=json.dumps(reasoning_item)),
            TextContent(
                text="partial answer", text_signature=json.dumps({"v": 1, "id": "msg_a", "phase": "commentary"})
            ),
            TextContent(text="legacy", text_signature="msg_" + "x" * 80),
            ToolCall(id="call_1|fc_1", name="multiply", arguments={"a": 1, "b": 2}),
        ],
        api=API,
        provider="openai",
        model="gpt-5.5",
        usage=Usage(),
        stop_reason="toolUse",
    )
    ctx = AgentContext(
        messages=[
            UserMessage(content="q"),
            mine,
            ToolResultMessage(tool_call_id="call_1|fc_1", tool_name="multiply", content=[TextContent("2")]),
        ]
    )
    items = wire.build_request_body(GPT55, ctx)["input"]
    assert items[1] == reasoning_item
    assert items[2]["id"] == "msg_a" and items[2]["phase"] == "commentary"
    assert items[3]["id"].startswith("msg_") and len(items[3]["id"]) <= 64
    assert items[4] == {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "multiply",
        "arguments": '{"a": 1, "b": 2}',
    }
    assert items[5] == {"type": "function_call_output", "call_id": "call_1", "output": "2"}


def test_a_reasoning_item_without_encrypted_content_is_not_replayed():  # spec §13 input items
    """Thinking off: the body asks for no ``reasoning.encrypted_content``, yet the model reasons
    and streams a bare reasoning item. Replayed as ``{"id": "rs_1", ...}`` with ``store: false``,
    OpenAI answers 400 "Item with id 'rs_1' not found. Items are not persisted when `store` is
    set to false" for every later turn of the session. Such an item (and its call's fc_ id)
    stays out; one with encrypted content still goes back."""
    assert "include" not in wire.build_request_body(GPT55, AgentContext(messages=[UserMessage("q")]))
    state, out, _ = _feed(
        [
            {"type": "response.output_item.added", "output_index": 0, "item": {"type": "reasoning", "id": "rs_1"}},
            {"type": "response.output_item.done", "output_index": 0, "item": {"type": "reasoning", "id": "rs_1"}},
            {"type": "response.output_item.added", "output_index": 1, "item": {**_CALL, "arguments": ""}},
            {"type": "response.output_item.done", "output_index": 1, "item": _CALL},
            {"type": "response.completed", "response": {"status": "completed"}},
        ]
    )
    state.finish()
    result = ToolResultMessage(tool_call_id="call_1|fc_1", tool_name="multiply", content=[TextContent("2")])
    items = wire.build_request_body(GPT55, AgentContext(messages=[UserMessage("q"), out, result]))["input"]
    assert [item.get("type") for item in items] == [None, "function_call", "function_call_output"]
    assert "id" not in items[1] and items[1]["call_id"] == "call_1"
    encrypted = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "ENC"}
    out.content[0].thinking_signature = json.dumps(encrypted)
    items = wire.build_request_body(GPT55, AgentContext(messages=[UserMessage("q"), out, result]))["input"]
    assert items[1] == encrypted and items[2]["id"] == "fc_1"


_CALL = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "multiply", "arguments": '{"a":1}'}


def test_a_function_call_item_without_an_id_keeps_a_clean_call_id():  # spec §13 ids
    """Compatible servers leave the item ``id`` out (llama.cpp's /v1/responses, Bedrock Mantle's
    done items) or send ``"id": null`` in ``output_item.done`` (vLLM): the call's id became
    ``"call_1|None"`` (overwriting the ``fc_1`` announced first) and ``"None"`` went back as the
    item id of every later request. The announced id is kept; with none the id is left out."""
    no_id = {k: v for k, v in _CALL.items() if k != "id"}
    state, out, pushed = _feed(
        [
            {"type": "response.output_item.added", "output_index": 0, "item": {**_CALL, "arguments": ""}},
            {"type": "response.output_item.done", "output_index": 0, "item": {**_CALL, "id": None}},
            {"type": "response.output_item.added", "output_index": 1, "item": {**no_id, "call_id": "call_2"}},
            {"type": "response.output_item.done", "output_index": 1, "item": {**no_id, "call_id": "call_2"}},
            {"type": "response.completed", "response": {"status": "completed"}},
        ]
    )
    state.finish()
    assert [c.id for c in out.tool_calls] == ["call_1|fc_1", "call_2|"]
    results = [
        ToolResultMessage(tool_call_id=c.id, tool_name="multiply", content=[TextContent("2")]) for c in out.tool_calls
    ]
    for model in (GPT55, MINI):  # the same model, and another one (its ids normalised)
        items = wire.build_request_body(model, AgentContext(messages=[UserMessage("q"), out, *results]))["input"]
        calls = [(i["call_id"], i.get("id")) for i in items if i.get("type") == "function_call"]
        assert calls == [("call_1", "fc_1" if model is GPT55 else None), ("call_2", None)], model.id
        assert [i["call_id"] for i in items if i.get("type") == "function_call_output"] == ["call_1", "call_2"]


def test_fc_id_omitted_for_a_different_model_of_the_same_provider():  # spec §13
    other = AssistantMessage(
        content=[ToolCall(id="call_1|fc_1", name="t", arguments={})],
        api=API,
        provider="openai",
        model="gpt-4o",
        usage=Usage(),
        stop_reason="toolUse",
    )
    items = wire.build_request_body(GPT55, AgentContext(messages=[UserMessage(content="q"), other]))["input"]
    assert "id" not in items[1] and items[1]["call_id"] == "call_1"


def test_replayed_message_items_never_repeat_an_id():  # spec §13 input items
    """A Claude turn with thinking and text, replayed to GPT-5.5, became two message items both
    named ``msg_1`` (the thinking turns into text): the API answers 400 "Duplicate item found
    with id msg_1". A stored id repeated later in the conversation is renamed the same way."""
    claude = AssistantMessage(
        content=[
            ThinkingContent(thinking="Check the file.", thinking_signature="sig"),
            TextContent(text="I'll read it."),
            ToolCall(id="toolu_1", name="read", arguments={}),
        ],
        api="anthropic-messages",
        provider="anthropic",
        model="claude-sonnet-4-5",
        usage=Usage(),
        stop_reason="toolUse",
    )
    own = AssistantMessage(
        content=[TextContent(text="Done.", text_signature='{"v":1,"id":"msg_1"}')],
        api=API,
        provider="openai",
        model=GPT55.id,
        usage=Usage(),
        stop_reason="stop",
    )
    result = ToolResultMessage(tool_call_id="toolu_1", tool_name="read", content=[TextContent("x")])
    context = AgentContext(messages=[UserMessage(content="q"), claude, result, own, UserMessage(content="more")])
    items = wire.build_request_body(GPT55, context)["input"]
    ids = [item["id"] for item in items if item.get("type") == "message"]
    assert [i["content"][0]["text"] for i in items if i.get("type") == "message"] == [
        "Check the file.",
        "I'll read it.",
        "Done.",
    ]
    assert len(ids) == len(set(ids)) == 3 and all(i.startswith("msg_") and len(i) <= 64 for i in ids)


def test_id_normalizer_for_foreign_pipe_ids():  # spec §6 openai-responses normalisation
    normalize = wire.make_id_normalizer(GPT55)
    assert normalize("call.1|item:2") == "call_1|fc_item_2"
    assert normalize("plain") == "plain"
    assert wire.make_id_normalizer(Model(id="x", provider="azure"))("a.b|c") == "a.b|c"


def test_long_foreign_call_ids_fit_in_64_characters_and_stay_distinct():  # spec §6 openai-responses
    """Gemini's made-up ids (``{tool name}_{ms}_{n}``) of a long tool name went to OpenAI as they
    were: 400 "Invalid 'input[1].call_id': string too long ... maximum length 64". Cut to 64,
    two calls of the tool would share one id: the second gets a hashed ending instead."""
    name = "mcp__github_enterprise__create_pull_request_review_comment"
    ids = [f"{name}_1796647726339_1", f"{name}_1796647726339_2"]
    calls = [ToolCall(id=i, name=name, arguments={"n": n}) for n, i in enumerate(ids)]
    turn = AssistantMessage(calls, api="google-generative-ai", provider="google", model="gemini", stop_reason="toolUse")
    results = [ToolResultMessage(i, name, [TextContent(f"result {n}")]) for n, i in enumerate(ids)]
    ctx = AgentContext(messages=[UserMessage("q"), turn, *results])
    items = wire.build_request_body(GPT55, ctx)["input"]
    call_ids = [item["call_id"] for item in items[1:3]]
    assert len(set(call_ids)) == 2 and all(len(i) <= 64 for i in call_ids)
    assert [(item["call_id"], item["output"]) for item in items[3:]] == [
        (call_ids[0], "result 0"),
        (call_ids[1], "result 1"),
    ]
    assert wire.build_request_body(GPT55, ctx)["input"] == items


def test_images_in_user_and_tool_output():  # spec §10 responses
    img = ImageContent(data="QUJD", mime_type="image/jpeg")
    ctx = AgentContext(
        messages=[
            UserMessage(content=[TextContent("see"), img]),
            ToolResultMessage(tool_call_id="c|fc", tool_name="t", content=[img]),
        ]
    )
    items = wire.build_request_body(MINI, ctx)["input"]
    part = {"type": "input_image", "detail": "auto", "image_url": "data:image/jpeg;base64,QUJD"}
    assert items[0]["content"][1] == part
    assert items[1] == {"type": "function_call_output", "call_id": "c", "output": [part]}
    text_only = Model(id="t", api=API, provider="openai", input=("text",))
    items = wire.build_request_body(text_only, ctx)["input"]
    assert items[0]["content"] == [{"type": "input_text", "text": "see"}] and items[1]["output"] == ""


# --------------------------------------------------------------------------- synthetic streams


def _reasoning_stream():
    return [
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"type": "reasoning", "id": "rs_1", "summary": []},
        },
        {
            "type": "response.reasoning_summary_part.added",
            "output_index": 0,
            "part": {"type": "summary_text", "text": ""},
        },
        {"type": "response.reasoning_summary_text.delta", "output_index": 0, "delta": "Think"},
        {"type": "response.reasoning_summary_part.done", "output_index": 0},
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Think"}]},
        },
    ]


def test_reasoning_summary_becomes_signed_thinking():  # spec §13 stream handling, §3 rule 7
    completed = {
        "type": "response.completed",
        "response": {
            "status": "completed",
            "output": [{"type": "reasoning", "id": "rs_1", "encrypted_content": "ENC"}],
            "usage": {
                "input_tokens": 100,
                "input_tokens_details": {"cached_tokens": 40},
                "output_tokens": 10,
                "total_tokens": 110,
            },
        },
    }
    state, out, pushed = _feed(_reasoning_stream() + [completed])
    state.finish()
    assert [e.delta for e in pushed if e.type == "thinking_delta"] == ["Think", "\n\n"]
    (block,) = out.content
    assert block.thinking == "Think"
    assert json.loads(block.thinking_signature)["encrypted_content"] == "ENC"  # backfilled from the response
    assert (out.usage.input, out.usage.cache_read, out.usage.total_tokens) == (60, 40, 110)


def test_incomplete_max_output_tokens_is_length_other_reasons_error():  # spec §13 gap fixed
    inc = {
        "type": "response.incomplete",
        "response": {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}},
    }
    state, out, _ = _feed([inc])
    state.finish()
    assert out.stop_reason == "length"
    inc["response"]["incomplete_details"]["reason"] = "content_filter"
    state, out, _ = _feed([inc])
    with pytest.raises(ProviderError, match="incomplete: content_filter"):
        state.finish()


def test_error_events_and_missing_terminal_event():  # spec §9 responses errors
    with pytest.raises(ProviderError, match="Error Code rate_limit: slow down"):
        _feed([{"type": "error", "code": "rate_limit", "message": "slow down"}])
    failed = {"type": "response.failed", "response": {"error": {"code": "server_error", "message": "boom"}}}
    with pytest.raises(ProviderError, match="^server_error: boom$"):
        _feed([failed])
    with pytest.raises(ProviderError, match="Unknown error"):
        _feed([{"type": "response.failed", "response": {}}])
    state, _, _ = _feed(_reasoning_stream())
    with pytest.raises(ProviderError, match="without response.completed"):
        state.finish()


def test_service_tier_pricing():  # spec §7 responses service tier
    completed = {
        "type": "response.completed",
        "response": {
            "status": "completed",
            "service_tier": "priority",
            "usage": {"input_tokens": 1000000, "output_tokens": 0, "total_tokens": 1000000},
        },
    }
    state, out, _ = _feed([completed], model=MINI)
    assert out.usage.cost.input == pytest.approx(0.30) and out.usage.cost.total == pytest.approx(0.30)


def test_interleaved_items_are_kept_apart_by_output_index():  # upstream: blocks keyed by output_index
    events = [
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"type": "function_call", "id": "fc_a", "call_id": "call_a", "name": "f", "arguments": ""},
        },
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {"type": "function_call", "id": "fc_b", "call_id": "call_b", "name": "g", "arguments": ""},
        },
        {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": '{"y":2}'},
        {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": '{"x":1}'},
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {"type": "function_call", "id": "fc_a", "call_id": "call_a", "name": "f", "arguments": '{"x":1}'},
        },
        {
            "type": "response.output_item.done",
            "output_index": 1,
            "item": {"type": "function_call", "id": "fc_b", "call_id": "call_b", "name": "g", "arguments": '{"y":2}'},
        },
        {"type": "response.completed", "response": {"status": "completed"}},
    ]
    state, out, _ = _feed(events)
    state.finish()
    assert [(c.id, c.arguments) for c in out.content] == [("call_a|fc_a", {"x": 1}), ("call_b|fc_b", {"y": 2})]
    assert out.stop_reason == "toolUse"


# --------------------------------------------------------------------------- over HTTP (local server)

from _servers import Reply, ScriptedServer  # noqa: E402
from _wire_replay import first_user_text, responses_tool_results, run_stream  # noqa: E402


def _served(server, **kw):
    fields = dict(
        id="gpt-5.5",
        name="GPT-5.5",
        api=API,
        provider="openai",
        base_url=server.url + "/v1",
        reasoning=True,
        input=("text", "image"),
        cost=GPT55.cost,
    )
    fields.update(kw)
    return Model(**fields)


def _sse(*payloads) -> str:
    return "".join(f"event: {p['type']}\ndata: {json.dumps(p)}\n\n" for p in payloads)


RESPONSE_IDS = {  # issue 17: response.id per turn; the dated snapshot differs from the requested gpt-5.5
    "text-stream": ["resp_00592e63e61b66660169fab1b9f8e481a2b321356198d7ac1b"],
    "tool-call-with-reasoning": [
        "resp_00d64fa806f333310169fab1be69d081a08f8285661855594c",
        "resp_0dacb603de1c9e6b0169fab1c2314081a3b1df3cc5c09e0c60",
    ],
}


@pytest.mark.parametrize("name", ["text-stream", "tool-call-with-reasoning"])
def test_recording_replays_over_http(name):  # issue 4: every recording through a local server
    rec = load_recording(API, name)
    provider = wire.OpenAIResponsesProvider()
    with ScriptedServer() as server:
        server.replay(rec, chunk_size=7)
        model = _served(server)
        messages = [UserMessage(content=first_user_text(rec["interactions"][0]["request"]["body"]))]
        for turn, interaction in enumerate(rec["interactions"]):
            result, events = run_stream(
                provider,
                model,
                AgentContext(messages=list(messages), tools=[MULTIPLY]),
                api_key="sk-test",
                reasoning="low",
            )
            expected, _ = _replay(name, turn, model)
            assert events[0].type == "start" and events[-1].type == "done"
            assert [b.to_dict() for b in result.content] == [b.to_dict() for b in expected.content]
            assert result.usage.to_dict() == expected.usage.to_dict() and result.stop_reason == expected.stop_reason
            assert (result.response_id, result.response_model) == (RESPONSE_IDS[name][turn], "gpt-5.5-2026-04-23")
            request = server.requests[turn]
            assert (request.method, request.path) == ("POST", "/v1/responses")
            assert request.headers["authorization"] == "Bearer sk-test"
            sent = request.json()
            recorded = interaction["request"]["body"]
            assert [i.get("type", "message") for i in sent["input"]] == [
                i.get("type", "message") for i in recorded["input"]
            ]
            assert sent["reasoning"]["effort"] == recorded["reasoning"]["effort"]
            messages.append(result)
            messages.extend(responses_tool_results(rec, turn, result))


def test_http_error_uses_openai_error_message():  # spec §9 OpenAI-style errors
    body = json.dumps({"error": {"message": "Your input exceeds the context window of this model.", "code": "x"}})
    with ScriptedServer(
        [
            Reply(status=400, body=body, content_type="application/json"),
            Reply(status=401, body="", content_type="application/json"),
        ]
    ) as server:
        ctx = AgentContext(messages=[UserMessage(content="hi")])
        first, events = run_stream(wire.OpenAIResponsesProvider(), _served(server), ctx, api_key="k")
        second, _ = run_stream(wire.OpenAIResponsesProvider(), _served(server), ctx, api_key="k")
    assert [e.type for e in events] == ["error"]
    assert first.error_message == "400 Your input exceeds the context window of this model."
    assert second.error_message == "401 status code (no body)"


def test_in_stream_failure_and_truncated_stream_over_http():  # spec §9, §13 terminal event
    added = {
        "type": "response.output_item.added",
        "output_index": 0,
        "item": {"type": "message", "id": "msg_1", "content": []},
    }
    delta = {"type": "response.output_text.delta", "output_index": 0, "delta": "Hi"}
    failed = {"type": "response.failed", "response": {"error": {"code": "server_error", "message": "boom"}}}
    with ScriptedServer(
        [Reply(body=_sse(added, delta, failed), chunk_size=9), Reply(body=_sse(added, delta), chunk_size=9)]
    ) as server:
        ctx = AgentContext(messages=[UserMessage(content="hi")])
        failed_result, _ = run_stream(wire.OpenAIResponsesProvider(), _served(server), ctx, api_key="k")
        cut, events = run_stream(wire.OpenAIResponsesProvider(), _served(server), ctx, api_key="k")
    assert failed_result.error_message == "server_error: boom" and failed_result.text == "Hi"
    assert cut.stop_reason == "error" and "without response.completed" in cut.error_message
    assert [e.type for e in events] == ["start", "text_start", "text_delta", "error"]


def test_an_error_event_with_a_nested_error_object_is_reported_in_its_words():  # spec §9 responses errors
    """The API also sends ``{"type": "error", "error": {"type", "code", "message"}}``: that was
    reported as "Error Code None: None", losing the text overflow detection and retries need."""
    from agentcore.providers import is_context_overflow

    added = {"type": "response.output_item.added", "output_index": 0, "item": {"type": "message", "id": "m"}}
    overflow = {
        "type": "error",
        "sequence_number": 2,
        "error": {
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
            "message": "Your input exceeds the context window of this model.",
            "param": "input",
        },
    }
    busy = {"type": "error", "error": {"type": "server_error", "code": None, "message": "The server had an error"}}
    fine = _sse(
        added,
        {"type": "response.output_text.delta", "output_index": 0, "delta": "ok"},
        {"type": "response.completed", "response": {"status": "completed"}},
    )
    with ScriptedServer([Reply(body=_sse(added, overflow)), Reply(body=_sse(busy)), Reply(body=fine)]) as server:
        ctx = AgentContext(messages=[UserMessage(content="hi")])
        first, _ = run_stream(wire.OpenAIResponsesProvider(), _served(server), ctx, api_key="k")
        retried, _ = run_stream(wire.OpenAIResponsesProvider(), _served(server), ctx, api_key="k", max_retries=1)
    assert first.stop_reason == "error"
    assert first.error_message == (
        "Error Code context_length_exceeded: Your input exceeds the context window of this model."
    )
    assert is_context_overflow(first)
    assert retried.stop_reason == "stop" and retried.text == "ok" and len(server.requests) == 3  # server_error


def test_agent_run_with_a_tool_end_to_end():  # issue 4: end-to-end Agent run per wire API
    from agentcore import Agent, tool

    rec = load_recording(API, "tool-call-with-reasoning")

    @tool
    def multiply(a: int, b: int) -> str:
        """Multiply two numbers."""
        return str(a * b)

    with ScriptedServer() as server:
        server.replay(rec, chunk_size=11)
        agent = Agent(model=_served(server), tools=[multiply], thinking_level="low", api_key="sk-test")
        new = agent.prompt("What is 1231 * 2331? Use the multiply tool.")
        second = server.requests[1].json()
    assert [m.role for m in new] == ["user", "assistant", "toolResult", "assistant"]
    assert new[2].tool_call_id == new[1].tool_calls[0].id and new[2].text == "2869461"
    assert new[3].text == "1231 × 2331 = **2,869,461**" and new[3].stop_reason == "stop"
    recorded = rec["interactions"][1]["request"]["body"]["input"]
    assert second["input"][-1] == recorded[-1]  # the function_call_output the recording sent
    assert second["input"][-2]["call_id"] == recorded[-2]["call_id"]
    assert agent.state.messages[-1].text == new[-1].text


def test_output_schema_becomes_text_format():  # issue 13: native structured output
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "title": "answer"}
    body = wire.build_request_body(GPT55, AgentContext(messages=[UserMessage("q")]), output_schema=schema)
    assert body["text"] == {"format": {"type": "json_schema", "name": "answer", "schema": schema, "strict": False}}
    assert "text" not in wire.build_request_body(GPT55, AgentContext(messages=[UserMessage("q")]))


def _completed_stream():
    done = {"type": "response.completed", "response": {"status": "completed", "usage": {"input_tokens": 1}}}
    return f"event: response.completed\ndata: {json.dumps(done)}\n\n"


def test_prompt_cache_key_retention_and_session_headers_on_the_wire():  # issue 17: reference parity
    styles = ({}, {"sessionAffinityFormat": "openai-nosession"}, {"sessionAffinityFormat": "openrouter"})
    with ScriptedServer([Reply(body=_completed_stream()) for _ in range(4)]) as server:
        ctx = AgentContext(messages=[UserMessage(content="hi")])
        for compat in styles:
            model = _served(server, compat=dict(compat, supportsLongCacheRetention=not compat))
            result, _ = run_stream(
                wire.OpenAIResponsesProvider(), model, ctx, api_key="k", session_id="sess-7", cache_retention="long"
            )
            assert result.stop_reason == "stop", result.error_message
        result, _ = run_stream(
            wire.OpenAIResponsesProvider(), _served(server), ctx, api_key="k", session_id="s", cache_retention="none"
        )
        sent = server.requests
    bodies = [r.json() for r in sent]
    assert [b.get("prompt_cache_key") for b in bodies] == ["sess-7", "sess-7", "sess-7", None]
    assert [b.get("prompt_cache_retention") for b in bodies] == ["24h", None, None, None]
    headers = [{k.lower(): v for k, v in r.headers.items()} for r in sent]
    assert (headers[0]["session_id"], headers[0]["x-client-request-id"]) == ("sess-7", "sess-7")
    assert "session_id" not in headers[1] and headers[1]["x-client-request-id"] == "sess-7"
    assert headers[2]["x-session-id"] == "sess-7" and "x-client-request-id" not in headers[2]
    assert not {"session_id", "x-client-request-id", "x-session-id"} & set(headers[3])

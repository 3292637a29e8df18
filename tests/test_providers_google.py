"""google-generative-ai wire API (providers spec §15): request bodies, stream state machine, replays."""

from __future__ import annotations

import pytest
from _wire_replay import event_types, load_recording, replay_pure, tool_result

from agentcore.providers import google as wire
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

API = "google-generative-ai"
BASE = "https://generativelanguage.googleapis.com/v1beta"
FLASH2 = Model(
    id="gemini-2.0-flash",
    api=API,
    provider="google",
    base_url=BASE,
    reasoning=False,
    input=("text", "image"),
    cost=ModelCost(0.1, 0.4, 0.025, 0),
)
PRO25 = Model(
    id="gemini-2.5-pro",
    api=API,
    provider="google",
    base_url=BASE,
    reasoning=True,
    input=("text", "image"),
    cost=ModelCost(1.25, 10, 0.31, 0),
)
GEMINI3 = Model(
    id="gemini-3-pro-preview", api=API, provider="google", base_url=BASE, reasoning=True, input=("text", "image")
)
TOOLS = [
    {
        "name": "get_capital",
        "description": "Get the capital of a country.",
        "parameters": {
            "type": "object",
            "properties": {"country": {"type": "string", "description": "The country name."}},
            "required": ["country"],
        },
    },
    {
        "name": "get_temperature",
        "description": "Get the temperature in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city name."}},
            "required": ["city"],
        },
    },
]
SIG = "CiQBcsjafQ=="


def _replay(name: str, turn: int = 0, model: Model = FLASH2):
    rec = load_recording(API, name)
    body = rec["interactions"][turn]["response"]["body"]
    return replay_pure(lambda out, push: wire.GoogleStreamState(model, StreamWriter(model, out, push)), body, model)


def _feed(chunks, model=PRO25):
    out = AssistantMessage(api=API, provider="google", model=model.id)
    pushed = []
    state = wire.GoogleStreamState(model, StreamWriter(model, out, pushed.append))
    for chunk in chunks:
        state.handle("message", chunk)
    return state, out, pushed


# --------------------------------------------------------------------------- recorded streams


def test_function_call_three_turns():  # spec §15, recording function-call-three-turns
    rec = load_recording(API, "function-call-three-turns")
    first, events = _replay("function-call-three-turns", 0)
    assert event_types(events) == ["toolcall_start", "toolcall_delta", "toolcall_end"]
    (call1,) = first.content
    assert (call1.name, call1.arguments) == ("get_capital", {"country": "France"})
    assert call1.id.startswith("get_capital_")
    assert first.stop_reason == "toolUse"
    assert (first.usage.input, first.usage.output, first.usage.total_tokens) == (52, 5, 57)

    second, _ = _replay("function-call-three-turns", 1)
    (call2,) = second.content
    assert (call2.name, call2.arguments) == ("get_temperature", {"city": "Paris"})
    assert call2.id != call1.id

    third, events = _replay("function-call-three-turns", 2)
    assert event_types(events) == ["text_start", "text_delta", "text_delta", "text_end"]
    assert third.text == "The temperature in Paris is 30°C.\n" and third.stop_reason == "stop"
    assert (third.usage.input, third.usage.output, third.usage.total_tokens) == (79, 12, 91)  # last usage wins

    # the third request replays both calls and both results, one turn each (recorded shape)
    context = AgentContext(
        system_prompt="You are a helpful chatbot.",
        tools=TOOLS,
        messages=[
            UserMessage(content="What is the temperature of the capital of France?"),
            first,
            ToolResultMessage(tool_call_id=call1.id, tool_name="get_capital", content=[TextContent("Paris")]),
            second,
            ToolResultMessage(tool_call_id=call2.id, tool_name="get_temperature", content=[TextContent("30°C")]),
        ],
    )
    body = wire.build_request_body(FLASH2, context)
    recorded = rec["interactions"][2]["request"]["body"]
    shape = lambda contents: [(c["role"], [next(iter(p)) for p in c["parts"]]) for c in contents]  # noqa: E731
    assert shape(body["contents"]) == shape(recorded["contents"])
    sent_calls = [p["functionCall"] for c in body["contents"] for p in c["parts"] if "functionCall" in p]
    assert sent_calls == [
        {"name": "get_capital", "args": {"country": "France"}},
        {"name": "get_temperature", "args": {"city": "Paris"}},
    ]
    sent_results = [p["functionResponse"] for c in body["contents"] for p in c["parts"] if "functionResponse" in p]
    assert sent_results == [
        {"name": "get_capital", "response": {"output": "Paris"}},
        {"name": "get_temperature", "response": {"output": "30°C"}},
    ]
    assert body["systemInstruction"] == {"parts": [{"text": "You are a helpful chatbot."}]}
    assert [d["name"] for d in body["tools"][0]["functionDeclarations"]] == ["get_capital", "get_temperature"]
    assert body["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"] == TOOLS[0]["parameters"]


def test_thinking_parts_then_text_with_signature():  # spec §15, recording thinking-parts
    out, events = _replay("thinking-parts", model=PRO25)
    types = event_types(events)
    assert types[:6] == ["thinking_start"] + ["thinking_delta"] * 4 + ["thinking_end"]
    assert types[6] == "text_start" and types[-1] == "text_end" and types.count("text_end") == 1
    thinking, text = out.content
    assert (
        thinking.thinking.startswith("**Clarifying User Goals**")
        and "**Crafting Safe Instructions**" in thinking.thinking
    )
    assert text.text.startswith("This is a great question!")
    assert text.text.endswith("Always assume a driver might not see you.")
    assert text.text_signature.startswith("CiIB0e2Kb6Syj1a961Ef")
    assert out.stop_reason == "stop"
    u = out.usage
    assert (u.input, u.output, u.total_tokens) == (34, 469 + 787, 1290)


def test_thinking_request_shape_of_recording():  # spec §11 google, recording thinking-parts
    rec = load_recording(API, "thinking-parts")
    ctx = AgentContext(
        system_prompt="You are a helpful assistant.",
        messages=[UserMessage(content="How do I cross the street?")],
        tools=[{"name": "dummy", "description": "", "parameters": {"type": "object", "properties": {}}}],
    )
    body = wire.build_request_body(PRO25, ctx, reasoning="medium")
    recorded = rec["interactions"][0]["request"]["body"]
    assert body["contents"] == recorded["contents"]
    assert body["generationConfig"]["thinkingConfig"] == dict(
        recorded["generationConfig"]["thinkingConfig"], thinkingBudget=8192
    )


# --------------------------------------------------------------------------- request body


def test_thinking_config_per_model_family():  # spec §11 google
    flash3 = Model(id="gemini-3-flash-preview", api=API, provider="google", reasoning=True)
    flash25 = Model(id="gemini-2.5-flash", api=API, provider="google", reasoning=True)
    other = Model(id="gemini-exp", api=API, provider="google", reasoning=True)
    assert wire.thinking_config(GEMINI3, "minimal") == {"includeThoughts": True, "thinkingLevel": "LOW"}
    assert wire.thinking_config(GEMINI3, "medium")["thinkingLevel"] == "HIGH"
    assert wire.thinking_config(flash3, "minimal")["thinkingLevel"] == "MINIMAL"
    assert wire.thinking_config(flash25, "high")["thinkingBudget"] == 24576
    assert wire.thinking_config(PRO25, "xhigh")["thinkingBudget"] == 32768
    assert wire.thinking_config(other, "low")["thinkingBudget"] == -1
    assert wire.thinking_config(flash25, "low", {"low": 777})["thinkingBudget"] == 777
    assert wire.thinking_config(PRO25, None) is None and wire.thinking_config(FLASH2, "high") is None


def test_thinking_level_map_clamps_before_the_family_rules():  # issue 17: Model.thinking_level_map
    pro = Model(id="gemini-2.5-pro", api=API, provider="google", reasoning=True, thinking_level_map={"high": None})
    assert wire.thinking_config(pro, "high")["thinkingBudget"] == 8192  # high unsupported: medium's budget
    assert wire.thinking_config(pro, "max")["thinkingBudget"] == 8192  # max unmapped: down past high


def test_flash_lite_minimal_budget_is_one_the_model_accepts():  # spec §11 google
    # Gemini 2.5 Flash-Lite takes budgets of 512 to 24576: minimal used to send 128 (a 400)
    from agentcore.providers.models import find_model

    lite = find_model("google", "gemini-2.5-flash-lite")
    ctx = AgentContext(messages=[UserMessage(content="hi")])
    body = wire.build_request_body(lite, ctx, reasoning="minimal")
    assert body["generationConfig"]["thinkingConfig"] == {"includeThoughts": True, "thinkingBudget": 512}
    assert wire.thinking_config(lite, "high")["thinkingBudget"] == 24576


def test_thinking_levels_of_the_model_map_are_sent_as_the_thinking_level():  # catalog thinkingLevelMap
    # gemma-4 maps minimal to "MINIMAL" and high to "HIGH": every level used to send thinkingBudget -1
    from agentcore.providers.models import find_model

    gemma = find_model("google", "gemma-4-31b-it")
    ctx = AgentContext(messages=[UserMessage(content="hi")])
    sent = {
        level: wire.build_request_body(gemma, ctx, reasoning=level)["generationConfig"]["thinkingConfig"]
        for level in ("minimal", "medium", "xhigh")
    }
    assert sent == {
        "minimal": {"includeThoughts": True, "thinkingLevel": "MINIMAL"},
        "medium": {"includeThoughts": True, "thinkingLevel": "HIGH"},  # unsupported: the next level up
        "xhigh": {"includeThoughts": True, "thinkingLevel": "HIGH"},
    }
    mine = Model(id="gemma-4-e4b-it", api=API, provider="google", reasoning=True)  # a user's, without a map
    assert wire.thinking_config(mine, "low") == {"includeThoughts": True, "thinkingLevel": "MINIMAL"}
    custom = Model(  # a level the family rule would send as HIGH
        id="gemini-3.1-pro-preview", api=API, provider="google", reasoning=True, thinking_level_map={"medium": "MEDIUM"}
    )
    assert wire.thinking_config(custom, "medium")["thinkingLevel"] == "MEDIUM"


def test_url_headers_and_generation_config():  # spec §15 request
    assert wire.request_url(FLASH2) == f"{BASE}/models/gemini-2.0-flash:streamGenerateContent?alt=sse"
    assert wire.build_headers(FLASH2, "g-key")["x-goog-api-key"] == "g-key"
    ctx = AgentContext(messages=[UserMessage(content="hi")], tools=TOOLS)
    body = wire.build_request_body(FLASH2, ctx, temperature=0.1, max_tokens=50, tool_choice="any")
    assert body["generationConfig"] == {"temperature": 0.1, "maxOutputTokens": 50}
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
    assert "generationConfig" not in wire.build_request_body(FLASH2, AgentContext(messages=[UserMessage(content="x")]))


def test_signatures_replayed_only_to_the_same_model():  # spec §15 conversion
    msg = AssistantMessage(
        content=[
            ThinkingContent(thinking="plan", thinking_signature=SIG),
            TextContent(text="answer", text_signature="not base64!"),
            ToolCall(id="c1", name="f", arguments={"a": 1}, thought_signature=SIG),
        ],
        api=API,
        provider="google",
        model=PRO25.id,
        usage=Usage(),
        stop_reason="toolUse",
    )
    ctx = AgentContext(messages=[UserMessage(content="q"), msg])
    same = wire.build_request_body(PRO25, ctx)["contents"][1]["parts"]
    assert same == [
        {"thought": True, "text": "plan", "thoughtSignature": SIG},
        {"text": "answer"},
        {"functionCall": {"name": "f", "args": {"a": 1}}, "thoughtSignature": SIG},
    ]
    other = wire.build_request_body(GEMINI3, ctx)["contents"][1]["parts"]
    assert other[0] == {"text": "plan"}
    assert other[2]["thoughtSignature"] == wire.SKIP_SIGNATURE  # Gemini 3 needs a signature on calls


def test_tool_results_images_and_errors():  # spec §10 google, §15 tool results
    img = ImageContent(data="QUJD", mime_type="image/png")
    call = ToolCall(id="c1", name="shot", arguments={})
    prev = AssistantMessage(
        content=[call, ToolCall(id="c2", name="boom", arguments={})],
        api=API,
        provider="google",
        model="x",
        usage=Usage(),
        stop_reason="toolUse",
    )
    msgs = [
        UserMessage(content=[TextContent("see"), img]),
        prev,
        ToolResultMessage(tool_call_id="c1", tool_name="shot", content=[img]),
        ToolResultMessage(tool_call_id="c2", tool_name="boom", content=[TextContent("bad")], is_error=True),
    ]
    contents = wire.build_request_body(PRO25, AgentContext(messages=msgs))["contents"]
    assert contents[0]["parts"][1] == {"inlineData": {"mimeType": "image/png", "data": "QUJD"}}
    assert contents[2]["parts"] == [  # both results share one user turn, the image follows it
        {"functionResponse": {"name": "shot", "response": {"output": "(see attached image)"}}},
        {"functionResponse": {"name": "boom", "response": {"error": "bad"}}},
    ]
    assert contents[3] == {
        "role": "user",
        "parts": [{"text": "Tool result image:"}, {"inlineData": {"mimeType": "image/png", "data": "QUJD"}}],
    }
    assert len(contents) == 4
    nested = wire.build_request_body(GEMINI3, AgentContext(messages=msgs))["contents"]
    assert nested[2]["parts"][0]["functionResponse"]["parts"] == [
        {"inlineData": {"mimeType": "image/png", "data": "QUJD"}}
    ]
    assert len(nested[2]["parts"]) == 2  # both results share one user turn
    claude = Model(id="claude-sonnet-4-5", api=API, provider="google-vertex", input=("text",))
    ids = wire.build_request_body(claude, AgentContext(messages=msgs))["contents"]
    assert ids[1]["parts"][0]["functionCall"]["id"] == "c1" and ids[2]["parts"][0]["functionResponse"]["id"] == "c1"


def test_parallel_results_with_images_stay_one_turn_before_the_images():  # spec §10 google, §15 tool results
    # Gemini answers 400 "Please ensure that the number of function response parts is equal to the
    # number of function call parts of the function call turn" when an image turn splits the batch
    img = ImageContent(data="QUJD", mime_type="image/png")
    calls = [ToolCall(id=f"c{i}", name="shot", arguments={"n": i}) for i in range(3)]
    prev = AssistantMessage(
        content=calls, api=API, provider="google", model=FLASH2.id, usage=Usage(), stop_reason="toolUse"
    )
    results = [
        ToolResultMessage(tool_call_id="c0", tool_name="shot", content=[img]),
        ToolResultMessage(tool_call_id="c1", tool_name="shot", content=[TextContent("none")]),
        ToolResultMessage(tool_call_id="c2", tool_name="shot", content=[TextContent("two"), img]),
    ]
    msgs = [UserMessage(content="go"), prev, *results, UserMessage(content="and now?")]
    contents = wire.build_request_body(FLASH2, AgentContext(messages=msgs))["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user", "user", "user", "user"]
    assert [p["functionResponse"]["response"]["output"] for p in contents[2]["parts"]] == [
        "(see attached image)",
        "none",
        "two",
    ]
    image = {"inlineData": {"mimeType": "image/png", "data": "QUJD"}}
    assert contents[3]["parts"] == contents[4]["parts"] == [{"text": "Tool result image:"}, image]
    assert contents[5]["parts"] == [{"text": "and now?"}]
    ended = wire.build_request_body(FLASH2, AgentContext(messages=msgs[:-1]))["contents"]
    assert len(ended) == 5 and len(ended[2]["parts"]) == 3  # a batch that ends the context too


def test_empty_texts_are_not_sent_as_parts():  # spec §15 conversion; Gemini refuses {"text": ""}
    # 400 "GenerateContentRequest.contents[0].parts[0].data: required oneof field 'data' must have
    # one initialized field"
    img = ImageContent(data="QUJD", mime_type="image/png")
    msgs = [
        UserMessage(content=""),
        UserMessage(content=[TextContent(""), img, TextContent("\ud800")]),  # a lone surrogate is dropped
        UserMessage(content=[TextContent(""), TextContent("real")]),
    ]
    body = wire.build_request_body(FLASH2, AgentContext(messages=msgs, system_prompt="\udc00"))
    assert body["contents"] == [
        {"role": "user", "parts": [{"inlineData": {"mimeType": "image/png", "data": "QUJD"}}]},
        {"role": "user", "parts": [{"text": "real"}]},
    ]
    assert "systemInstruction" not in body
    assert all(p.get("text") != "" for c in body["contents"] for p in c["parts"])


# --------------------------------------------------------------------------- synthetic streams


def test_function_call_with_signature_and_duplicate_ids():  # spec §15 example
    chunks = [
        {
            "candidates": [{"content": {"role": "model", "parts": [{"text": "Checking.", "thought": True}]}}],
            "usageMetadata": {"promptTokenCount": 40, "totalTokenCount": 62, "thoughtsTokenCount": 22},
        },
        {
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [
                            {
                                "functionCall": {"name": "get_weather", "args": {"city": "Rome"}, "id": "x"},
                                "thoughtSignature": SIG,
                            },
                            {"functionCall": {"name": "get_weather", "id": "x"}},
                            {"text": ""},
                        ],
                    },
                    "finishReason": "STOP",
                }
            ],
            "usageMetadata": {
                "promptTokenCount": 40,
                "candidatesTokenCount": 9,
                "totalTokenCount": 71,
                "thoughtsTokenCount": 22,
                "cachedContentTokenCount": 10,
            },
        },
    ]
    state, out, pushed = _feed(chunks)
    state.finish()
    thinking, first, second = out.content  # the empty trailing text part opens no block
    assert thinking.thinking == "Checking."
    assert (first.id, first.arguments, first.thought_signature) == ("x", {"city": "Rome"}, SIG)
    assert second.id.startswith("get_weather_") and second.arguments == {}
    assert [e.delta for e in pushed if e.type == "toolcall_delta"] == ['{"city": "Rome"}', "{}"]
    assert out.stop_reason == "toolUse"
    assert (out.usage.input, out.usage.output, out.usage.cache_read, out.usage.total_tokens) == (30, 31, 10, 71)


def test_safety_finish_reason_and_truncated_stream_are_errors():  # spec §8 google
    state, out, _ = _feed([{"candidates": [{"content": {"parts": [{"text": "Hel"}]}, "finishReason": "SAFETY"}]}])
    with pytest.raises(ProviderError, match="finish reason SAFETY"):
        state.finish()
    assert out.text == "Hel"
    state, _, pushed = _feed([{"candidates": [{"content": {"parts": [{"text": "Hel"}]}}]}])
    with pytest.raises(ProviderError, match="without a finish reason"):
        state.finish()
    assert pushed[-1].type == "text_end"
    state, _, _ = _feed([{"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}}])
    with pytest.raises(ProviderError, match="blocked the prompt: PROHIBITED_CONTENT"):
        state.finish()


@pytest.mark.parametrize("reason", ["MALFORMED_FUNCTION_CALL", "SAFETY", "OTHER"])
def test_error_finish_reason_after_a_function_call_is_an_error_not_tool_use(reason):  # spec §8 google
    # the call before the failure made the turn "toolUse": the agent ran it and the failure was lost
    call = {"functionCall": {"name": "get_capital", "args": {"country": "France"}}}
    finish = {"candidates": [{"content": {"parts": []}, "finishReason": reason, "finishMessage": "cut"}]}
    state, out, _ = _feed([{"candidates": [{"content": {"parts": [call]}}]}, finish])
    with pytest.raises(ProviderError, match=f"finish reason {reason}: cut"):
        state.finish()
    assert out.stop_reason == "error" and [b.name for b in out.content] == ["get_capital"]  # kept, not run
    state, out, _ = _feed([{"candidates": [{"content": {"parts": [call]}, "finishReason": "MAX_TOKENS"}]}])
    state.finish()
    assert out.stop_reason == "toolUse"  # a whole call before the token limit still runs


def test_error_chunk_raises():  # spec §9 google errors keep status and message
    with pytest.raises(ProviderError, match="RESOURCE_EXHAUSTED"):
        _feed([{"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}])


# --------------------------------------------------------------------------- over HTTP (local server)

import json  # noqa: E402

from _servers import Reply, ScriptedServer  # noqa: E402
from _wire_replay import first_user_text, run_stream  # noqa: E402


def _served(server, model_id="gemini-2.0-flash", reasoning=False):
    return Model(
        id=model_id,
        api=API,
        provider="google",
        base_url=server.url + "/v1beta",
        reasoning=reasoning,
        input=("text", "image"),
        cost=PRO25.cost,
    )


RESPONSE_IDS = {  # responseId per turn; modelVersion equals the requested id in both recordings
    "function-call-three-turns": ["1lpeaMTxIpW1nvgP-O3vwQY", "11peaOXwBPH_2PgPh_z--AY", "11peaI_ZJLq3nvgP0vasuQk"],
    "thinking-parts": ["beHBaJfEMIi-qtsP3769-Q8"],
}


@pytest.mark.parametrize(
    "name,model_id,tools",
    [
        ("function-call-three-turns", "gemini-2.0-flash", TOOLS),
        ("thinking-parts", "gemini-2.5-pro", [{"name": "dummy", "description": "", "parameters": {"type": "object"}}]),
    ],
)
def test_recording_replays_over_http(name, model_id, tools):  # issue 4: every recording through a local server
    rec = load_recording(API, name)
    provider = wire.GoogleProvider()
    with ScriptedServer() as server:
        server.replay(rec, chunk_size=7)
        model = _served(server, model_id, reasoning=True)
        messages = [UserMessage(content=first_user_text(rec["interactions"][0]["request"]["body"]))]
        for turn, interaction in enumerate(rec["interactions"]):
            result, events = run_stream(
                provider,
                model,
                AgentContext(messages=list(messages), tools=tools),
                api_key="g-test",
                reasoning="medium",
            )
            expected, _ = _replay(name, turn, model)
            assert events[0].type == "start" and events[-1].type == "done"
            strip = lambda blocks: [{k: v for k, v in b.to_dict().items() if k != "id"} for b in blocks]  # noqa: E731
            assert strip(result.content) == strip(expected.content)  # call ids are generated per stream
            assert result.usage.to_dict() == expected.usage.to_dict() and result.stop_reason == expected.stop_reason
            assert (result.response_id, result.response_model) == (RESPONSE_IDS[name][turn], None)  # issue 17
            request = server.requests[turn]
            assert request.path == f"/v1beta/models/{model_id}:streamGenerateContent" and request.query == "alt=sse"
            assert request.headers["x-goog-api-key"] == "g-test"
            sent = request.json()["contents"]
            assert [c["role"] for c in sent] == [c["role"] for c in interaction["request"]["body"]["contents"]]
            messages.append(result)
            if turn + 1 < len(rec["interactions"]):
                recorded = rec["interactions"][turn + 1]["request"]["body"]["contents"][-1]["parts"]
                outputs = {
                    p["functionResponse"]["name"]: p["functionResponse"]["response"]["return_value"]
                    for p in recorded
                    if "functionResponse" in p
                }
                messages.extend(tool_result(call, outputs[call.name]) for call in result.tool_calls)


def test_http_error_keeps_status_and_google_json():  # spec §9 google
    err = {
        "error": {
            "code": 400,
            "message": "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
            "status": "INVALID_ARGUMENT",
        }
    }
    with ScriptedServer([Reply(status=400, body=json.dumps(err), content_type="application/json")]) as server:
        result, events = run_stream(
            wire.GoogleProvider(), _served(server), AgentContext(messages=[UserMessage(content="hi")]), api_key="g"
        )
    assert [e.type for e in events] == ["error"]
    assert result.error_message.startswith("400 ") and "INVALID_ARGUMENT" in result.error_message
    assert "exceeds the maximum" in result.error_message


def test_reset_and_early_end_over_http_keep_partial_text():  # spec §4 step 5, §15; issue 4 reset mid-stream
    first = 'data: {"candidates": [{"content": {"parts": [{"text": "Hel"}], "role": "model"}}]}\r\n\r\n'
    second = 'data: {"candidates": [{"content": {"parts": [{"text": "lo"}], "role": "model"}}]}\r\n\r\n'
    body = first + second
    with ScriptedServer([Reply(body=body, reset_after=len(first) + 10), Reply(body=body, chunk_size=4)]) as server:
        ctx = AgentContext(messages=[UserMessage(content="hi")])
        reset, _ = run_stream(wire.GoogleProvider(), _served(server), ctx, api_key="g")
        ended, events = run_stream(wire.GoogleProvider(), _served(server), ctx, api_key="g")
    assert reset.stop_reason == "error" and reset.text == "Hel"
    assert ended.stop_reason == "error" and ended.error_message == "Gemini stream ended without a finish reason"
    assert ended.text == "Hello"
    assert [e.type for e in events] == ["start", "text_start", "text_delta", "text_delta", "text_end", "error"]


def test_agent_run_with_two_tools_end_to_end():  # issue 4: end-to-end Agent run per wire API
    from agentcore import Agent, tool

    rec = load_recording(API, "function-call-three-turns")

    @tool
    def get_capital(country: str) -> str:
        """Get the capital of a country."""
        return {"France": "Paris"}[country]

    @tool
    def get_temperature(city: str) -> str:
        """Get the temperature in a city."""
        return {"Paris": "30°C"}[city]

    with ScriptedServer() as server:
        server.replay(rec, chunk_size=5)
        agent = Agent(
            model=_served(server),
            system_prompt="You are a helpful chatbot.",
            tools=[get_capital, get_temperature],
            api_key="g-test",
        )
        new = agent.prompt("What is the temperature of the capital of France?")
        third = server.requests[2].json()
    assert [m.role for m in new] == ["user", "assistant", "toolResult", "assistant", "toolResult", "assistant"]
    assert [m.text for m in new if m.role == "toolResult"] == ["Paris", "30°C"]
    assert new[-1].text == "The temperature in Paris is 30°C.\n"
    recorded = rec["interactions"][2]["request"]["body"]["contents"]
    assert [c["role"] for c in third["contents"]] == [c["role"] for c in recorded]
    assert [
        p["functionResponse"]["response"] for c in third["contents"] for p in c["parts"] if "functionResponse" in p
    ] == [{"output": "Paris"}, {"output": "30°C"}]


def test_public_complete_dispatches_to_the_gemini_provider():  # spec §2: stream/complete by model.api
    from agentcore.providers import complete

    body = 'data: {"candidates": [{"content": {"parts": [{"text": "pong"}], "role": "model"}, "finishReason": "STOP"}]}\r\n\r\n'
    with ScriptedServer([Reply(body=body)]) as server:
        result = complete(_served(server), AgentContext(messages=[UserMessage(content="ping")]), api_key="g")
    assert (result.text, result.stop_reason, result.api) == ("pong", "stop", API)


def test_raw_thinking_override_is_an_option_of_the_agent_and_of_the_command_line():  # issue 11 §3
    from agentcore import Agent
    from agentcore.options import installed_provider_options, parse_cli_option

    body = 'data: {"candidates": [{"content": {"parts": [{"text": "ok"}], "role": "model"}, "finishReason": "STOP"}]}\r\n\r\n'
    name, value = parse_cli_option("thinking", '{"enabled": true, "budget_tokens": 512}', installed_provider_options)
    with ScriptedServer([Reply(body=body), Reply(body=body)]) as server:
        model = _served(server, "gemini-2.5-pro", reasoning=True)
        Agent(model, api_key="g", thinking_level="high", **{name: value}).prompt("hi")
        Agent(model, api_key="g", thinking_level="high").prompt("hi")
        configs = [r.json()["generationConfig"]["thinkingConfig"] for r in server.requests]
    assert configs == [
        {"includeThoughts": True, "thinkingBudget": 512},
        {"includeThoughts": True, "thinkingBudget": 32768},
    ]


def test_thinking_enabled_and_budget_tokens_options_reach_gemini():  # StreamOptions: "Anthropic/Google"
    from agentcore import Agent

    body = 'data: {"candidates": [{"content": {"parts": [{"text": "ok"}], "role": "model"}, "finishReason": "STOP"}]}\r\n\r\n'
    with ScriptedServer([Reply(body=body) for _ in range(3)]) as server:
        model = _served(server, "gemini-2.5-pro", reasoning=True)
        Agent(model, api_key="g", thinking_level="high", thinking_budget_tokens=512).prompt("hi")
        Agent(model, api_key="g", thinking_level="high", thinking_enabled=False).prompt("hi")
        Agent(model, api_key="g", thinking_enabled=True, thinking_budget_tokens=0).prompt("hi")
        configs = [r.json().get("generationConfig", {}).get("thinkingConfig") for r in server.requests]
    assert configs == [
        {"includeThoughts": True, "thinkingBudget": 512},
        None,  # switched off, whatever the thinking level says
        {"includeThoughts": True, "thinkingBudget": 0},
    ]
    ctx = AgentContext(messages=[UserMessage("q")])
    with pytest.raises(ProviderError, match="budget_tokens must be a whole number of tokens, got 'lots'"):
        wire.build_request_body(PRO25, ctx, thinking={"enabled": True, "budget_tokens": "lots"})
    for given in ("high", True):  # -o thinking high / -o thinking true: were silently ignored
        with pytest.raises(ProviderError, match=r'"thinking" option must be an object .* use reasoning='):
            wire.build_request_body(PRO25, ctx, thinking=given)


def test_tool_choice_object_is_sent_as_the_tool_config():  # StreamOptions tool_choice: "or the API's object"
    ctx = AgentContext(messages=[UserMessage(content="hi")], tools=TOOLS)
    only = {"mode": "ANY", "allowedFunctionNames": ["get_capital"]}
    body = wire.build_request_body(FLASH2, ctx, tool_choice=only)
    assert body["toolConfig"] == {"functionCallingConfig": only}
    whole = {"functionCallingConfig": {"mode": "NONE"}}
    assert wire.build_request_body(FLASH2, ctx, tool_choice=whole)["toolConfig"] == whole
    assert "toolConfig" not in wire.build_request_body(FLASH2, ctx)


def test_output_schema_becomes_response_json_schema():  # issue 13: native structured output
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "title": "answer"}
    body = wire.build_request_body(
        PRO25, AgentContext(messages=[UserMessage("q")]), output_schema=schema, temperature=0.1
    )
    assert body["generationConfig"] == {
        "temperature": 0.1,
        "responseMimeType": "application/json",
        "responseJsonSchema": schema,
    }

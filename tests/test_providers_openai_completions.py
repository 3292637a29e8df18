"""The openai-completions wire API: recording replays, stream handling and request bodies (spec §12, §17)."""

from __future__ import annotations

import json

import pytest
from _servers import Reply, ScriptedServer, load_recording, sse

from agentcore.providers import stream
from agentcore.providers.base import encode_body
from agentcore.providers.openai_completions import (
    OpenAICompletionsProvider,
    build_headers,
    build_request_body,
    normalize_tool_call_id,
    parse_usage,
    resolve_compat,
)
from agentcore.tools import AgentTool
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
    UserMessage,
)

API = "openai-completions"


def _recording(name):
    recording = load_recording(API, name)
    if recording is None:
        pytest.skip(f"recording {API}/{name} not available")
    return recording


def _tool_from(body):
    function = body["tools"][0]["function"]
    return AgentTool(function["name"], function["description"], function["parameters"], execute=lambda *a: None)


def _conversation_shape(messages):
    """Roles with tool-call ids and tool results; empty assistant placeholders are ignored and
    consecutive assistant entries merged (clients differ only in that)."""
    shape = []
    for message in messages:
        role = message["role"]
        if role == "assistant":
            ids = [c["id"] for c in message.get("tool_calls") or []]
            calls = [
                (c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message.get("tool_calls") or []
            ]
            if not ids and not message.get("content"):
                continue
            if shape and shape[-1][0] == "assistant":
                shape[-1] = ("assistant", shape[-1][1] + ids, shape[-1][2] + calls)
                continue
            shape.append(("assistant", ids, calls))
        elif role == "tool":
            shape.append(("tool", message["tool_call_id"], message["content"]))
        else:
            shape.append((role, message["content"]))
    return shape


RECORDED = {
    # name: (tool result text, expected tool call, expected usage of turn 1, usage of turn 2, final text)
    "tool-call-args-in-fragments": (
        "2869461",
        ("call_1EYWDzueHEp8OsB8jJSEp7WB", "multiply", {"a": 1231, "b": 2331}),
        (54, 20, 74),
        (87, 26, 113),
        "The result of \\( 1231 \\times 2331 \\) is \\( 2,869,461 \\).",
    ),
    "openrouter-tool-call-no-finish-reason": (
        "0.fixed-version",
        ("0", "llm_version", {}),
        (57, 17, 74),
        (107, 15, 122),
        "The current version of *llm* is **0.fixed-version**.",
    ),
}


RESPONSE_IDS = {
    "tool-call-args-in-fragments": (
        ["chatcmpl-BWlJBDk2xe66hjff60joVYpXi1hh4", "chatcmpl-BWlJCN7VZTtSHROczp0AbrjFGhRMA"],
        "gpt-4o-mini-2024-07-18",
    ),
    "openrouter-tool-call-no-finish-reason": (  # OpenRouter routed gpt-4.1-mini to another model
        ["gen-1753242299-QZRAt5HJHd1ptY8sdS0s", "gen-1753242300-j60LWi6MpN4lMZw1zTHK"],
        "moonshotai/kimi-k2",
    ),
}


@pytest.mark.parametrize("name", sorted(RECORDED))
@pytest.mark.parametrize("chunk_size", [1, 7, 4096])
def test_recording_replay_two_turns(name, chunk_size):  # issue 4: replay every recording
    recording = _recording(name)
    result_text, (call_id, call_name, call_args), usage1, usage2, final_text = RECORDED[name]
    first, second = recording["interactions"]
    with ScriptedServer() as server:
        server.replay(recording, chunk_size=chunk_size)
        model = Model(
            id=first["request"]["body"]["model"],
            api=API,
            provider="openai",
            base_url=server.url + "/v1",
            cost=ModelCost(input=1.0, output=2.0),
        )
        context = AgentContext(
            messages=[UserMessage(first["request"]["body"]["messages"][0]["content"])],
            tools=[_tool_from(first["request"]["body"])],
        )

        events = stream(model, context, api_key="sk-test")
        types = [e.type for e in events]
        message = events.result()
        assert types[0] == "start" and types[1] == "toolcall_start" and types[-2:] == ["toolcall_end", "done"]
        assert set(types[2:-2]) == {"toolcall_delta"}
        assert [(c.id, c.name, c.arguments) for c in message.content] == [(call_id, call_name, call_args)]
        assert message.stop_reason == "toolUse"  # also when the server sent no finish_reason
        ids, served = RESPONSE_IDS[name]  # issue 17: chunk id, and chunk model when not the requested one
        assert (message.response_id, message.response_model) == (ids[0], served)
        assert (message.usage.input, message.usage.output, message.usage.total_tokens) == usage1
        assert message.usage.cost.total == pytest.approx(usage1[0] * 1e-6 + usage1[1] * 2e-6)

        sent = server.requests[0].json()
        recorded = first["request"]["body"]
        assert sent["messages"] == recorded["messages"]
        assert (sent["model"], sent["stream"], sent["stream_options"]) == (
            recorded["model"],
            recorded["stream"],
            recorded["stream_options"],
        )
        assert [{k: v for k, v in t["function"].items() if k != "strict"} for t in sent["tools"]] == [
            t["function"] for t in recorded["tools"]
        ]

        context.messages += [message, ToolResultMessage(call_id, call_name, [TextContent(result_text)])]
        final = stream(model, context, api_key="sk-test").result()
        assert final.content == [TextContent(final_text)] and final.stop_reason == "stop"
        assert (final.response_id, final.response_model) == (ids[1], served)
        assert (final.usage.input, final.usage.output, final.usage.total_tokens) == usage2
        assert _conversation_shape(server.requests[1].json()["messages"]) == _conversation_shape(
            second["request"]["body"]["messages"]
        )


# --------------------------------------------------------------------------- stream handling


def _chunk(delta=None, finish=None, **extra):
    chunk = {"choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}
    chunk.update(extra)
    return chunk


def _replay(body, model_kw=None, chunk_size=11, **options):
    with ScriptedServer([Reply(body=body, chunk_size=chunk_size)]) as server:
        model = Model(id="m", api=API, provider="local", base_url=server.url + "/v1", **(model_kw or {}))
        events = stream(model, AgentContext(messages=[UserMessage("q")]), **options)
        return [e.type for e in events], events.result()


def test_reasoning_content_then_text():  # spec §12 (b): DeepSeek / llama.cpp reasoning_content
    body = sse(
        _chunk({"reasoning_content": "Let me "}),
        _chunk({"reasoning_content": "think."}),
        _chunk({"content": "Answer"}),
        _chunk(finish="stop"),
        {
            "choices": [],
            "usage": {
                "prompt_tokens": 10,
                "completion_tokens": 5,
                "prompt_tokens_details": {"cached_tokens": 4},
                "completion_tokens_details": {"reasoning_tokens": 3},
            },
        },
        done=True,
    )
    types, message = _replay(body)
    assert types == [
        "start",
        "thinking_start",
        "thinking_delta",
        "thinking_delta",
        "thinking_end",
        "text_start",
        "text_delta",
        "text_end",
        "done",
    ]
    assert message.content == [
        ThinkingContent("Let me think.", thinking_signature="reasoning_content"),
        TextContent("Answer"),
    ]
    assert (message.usage.input, message.usage.output, message.usage.cache_read, message.usage.total_tokens) == (
        6,
        5,
        4,
        15,
    )


def test_parallel_tool_calls_by_id_and_index():  # spec §12 (c)
    body = sse(
        _chunk({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f", "arguments": '{"x":'}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}),
        _chunk({"tool_calls": [{"index": 1, "id": "b", "function": {"name": "g", "arguments": ""}}]}),
        _chunk({"tool_calls": [{"index": 1, "function": {"arguments": '{"y": "z"}'}}]}),
        _chunk({"tool_calls": [{"index": 2, "function": {"name": "h", "arguments": {"as": "object"}}}]}),
        _chunk(finish="tool_calls"),
        done=True,
    )
    types, message = _replay(body)
    assert [(c.id, c.name, c.arguments) for c in message.content] == [
        ("a", "f", {"x": 1}),
        ("b", "g", {"y": "z"}),
        ("", "h", {"as": "object"}),
    ]
    assert types.count("toolcall_end") == 3 and message.stop_reason == "toolUse"


def test_interleaved_parallel_tool_call_fragments_go_to_their_own_call():  # spec §12 (c), §3 rule 4
    """Fragments of parallel calls that alternate (index 0, 1, 0, 1: the later ones without an id)
    belonged to a new nameless call with an empty id; each goes to the call of its index."""
    body = sse(
        _chunk({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f", "arguments": ""}}]}),
        _chunk({"tool_calls": [{"index": 1, "id": "b", "function": {"name": "g", "arguments": ""}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"x":'}}]}),
        _chunk({"tool_calls": [{"index": 1, "function": {"arguments": '{"y":'}}]}),
        _chunk({"tool_calls": [{"index": 0, "id": "a", "function": {"arguments": "1}"}}]}),
        _chunk({"tool_calls": [{"index": 1, "function": {"arguments": "2}"}}]}),
        _chunk({"content": "done"}),
        _chunk(finish="tool_calls"),
        done=True,
    )
    types, message = _replay(body)
    calls = [(c.id, c.name, c.arguments) for c in message.content if isinstance(c, ToolCall)]
    assert calls == [("a", "f", {"x": 1}), ("b", "g", {"y": 2})]
    assert message.text == "done" and message.stop_reason == "toolUse" and not message.diagnostics
    assert types.count("toolcall_start") == types.count("toolcall_end") == 2
    assert types.index("toolcall_end") > len(types) - types[::-1].index("toolcall_delta") - 1  # ends follow deltas
    assert types[types.index("text_start") - 2 : types.index("text_start")] == ["toolcall_end", "toolcall_end"]


def test_parallel_tool_calls_sharing_one_id_stay_apart():  # spec §12 (c), §3 rule 4
    """DeepSeek and GLM give parallel calls (indexes 0 and 1) the same id: the second call's
    fragments went into the first (its name replaced, its arguments "{...}{...}" repaired to the
    first object), so one call was lost. Each index is its own call, with an id of its own."""
    body = sse(
        _chunk({"tool_calls": [{"index": 0, "id": "call_0", "function": {"name": "f", "arguments": ""}}]}),
        _chunk({"tool_calls": [{"index": 0, "id": "call_0", "function": {"arguments": '{"x": 1}'}}]}),
        _chunk({"tool_calls": [{"index": 1, "id": "call_0", "function": {"name": "g", "arguments": ""}}]}),
        _chunk({"tool_calls": [{"index": 1, "id": "call_0", "function": {"arguments": '{"y": 2}'}}]}),
        _chunk(finish="tool_calls"),
        done=True,
    )
    types, message = _replay(body, chunk_size=5)
    calls = [(c.id, c.name, c.arguments) for c in message.tool_calls]
    assert calls == [("call_0", "f", {"x": 1}), ("call_0_2", "g", {"y": 2})]
    assert types.count("toolcall_end") == 2 and not message.diagnostics and message.stop_reason == "toolUse"


def test_a_tool_call_id_that_arrives_late_names_the_call_of_its_index():  # spec §12 (c), §3 rule 4
    """A server that names a call in a later fragment of the same ``index`` (no id on the first):
    the call was split in two, an unnamed one with ``{"a":`` (repaired to ``{}``) and a nameless
    one with ``1}``, so the tool ran with the wrong arguments or not at all."""
    body = sse(
        _chunk({"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": '{"a":'}}]}),
        _chunk({"tool_calls": [{"index": 0, "id": "call_1", "function": {"arguments": "1}"}}]}),
        _chunk({"tool_calls": [{"index": 1, "function": {"name": "g", "arguments": "{}"}}]}),
        _chunk({"tool_calls": [{"index": 1, "id": "call_2", "function": {"arguments": ""}}]}),
        _chunk(finish="tool_calls"),
        done=True,
    )
    types, message = _replay(body, chunk_size=5)
    assert [(c.id, c.name, c.arguments) for c in message.tool_calls] == [("call_1", "f", {"a": 1}), ("call_2", "g", {})]
    assert types.count("toolcall_start") == types.count("toolcall_end") == 2 and not message.diagnostics


def test_nan_in_streamed_arguments_does_not_poison_the_next_request():  # spec §12 (c), §5
    """A model wrote ``NaN`` in a tool call's arguments: the call kept a float nan, so the next
    request replaying it carried ``NaN`` (not JSON: the API refuses every later turn)."""
    args = '{"value": NaN, "limit": 1e999, "n": 3}'
    body = sse(
        _chunk({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "f", "arguments": args}}]}),
        _chunk(finish="tool_calls"),
        done=True,
    )
    _, message = _replay(body)
    assert message.tool_calls[0].arguments == {"value": None, "limit": None, "n": 3}
    result = ToolResultMessage(tool_call_id="c1", tool_name="f", content=[TextContent("ok")])
    context = AgentContext(messages=[UserMessage("q"), message, result])
    model = Model(id="m", api=API, provider="local", base_url="http://127.0.0.1:9/v1")
    sent = encode_body(build_request_body(model, context, {}), model, {})

    def refuse(name):
        raise ValueError(f"{name} is not JSON")

    json.loads(sent, parse_constant=refuse)


def test_toolcall_delta_partial_arguments():  # spec §12 composed example
    body = sse(
        _chunk({"tool_calls": [{"index": 0, "id": "call_w1", "function": {"name": "get_weather", "arguments": ""}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":"Ly'}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'on"}'}}]}),
        _chunk(finish="tool_calls"),
        done=True,
    )
    with ScriptedServer([Reply(body=body)]) as server:
        model = Model(id="m", api=API, provider="local", base_url=server.url + "/v1")
        seen = [
            (e.delta, dict(e.partial.content[0].arguments))
            for e in stream(model, AgentContext(messages=[UserMessage("q")]))
            if e.type == "toolcall_delta"
        ]
    assert seen == [("", {}), ('{"city":"Ly', {"city": "Ly"}), ('on"}', {"city": "Lyon"})]


def test_oversize_tool_arguments_stream():  # issue 4: oversize tool arguments
    content = "line of a large file\n" * 50000
    text = json.dumps({"path": "big.txt", "content": content})
    pieces = [text[i : i + 97] for i in range(0, len(text), 97)]
    body = sse(
        _chunk({"tool_calls": [{"index": 0, "id": "w", "function": {"name": "write", "arguments": ""}}]}),
        *[_chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in pieces],
        _chunk(finish="tool_calls"),
        done=True,
    )
    types, message = _replay(body, chunk_size=4096)
    assert message.content[0].arguments == {"path": "big.txt", "content": content}
    assert types.count("toolcall_delta") == len(pieces) + 1


def test_openrouter_reasoning_details_become_thought_signature():  # spec §12 (d)
    detail = {"type": "reasoning.encrypted", "id": "t1", "data": "opaque"}
    body = sse(
        _chunk({"reasoning": "hmm"}),
        _chunk({"tool_calls": [{"index": 0, "id": "t1", "function": {"name": "f", "arguments": "{}"}}]}),
        _chunk({"reasoning_details": [detail]}),
        _chunk(finish="tool_calls"),
        done=True,
    )
    _, message = _replay(body)
    assert message.content[0] == ThinkingContent("hmm", thinking_signature="reasoning")
    assert json.loads(message.content[1].thought_signature) == detail


@pytest.mark.parametrize(
    "finish, stop, error",
    [
        ("length", "length", None),
        ("content_filter", "error", "content filter"),
        ("model_length", "length", None),  # Mistral: the context window is full (spec §8 mistral)
        ("error", "error", "(finish_reason 'error'): it reported an error"),  # Mistral
        ("weird_reason", "error", "Unhandled stop reason: weird_reason"),
    ],
)
def test_finish_reasons(finish, stop, error):  # spec §8
    types, message = _replay(sse(_chunk({"content": "x"}), _chunk(finish=finish), done=True))
    assert message.stop_reason == stop
    if error:
        assert types[-1] == "error" and error in message.error_message
    else:
        assert types[-1] == "done"


def test_a_refusal_is_the_answer_text():  # spec §12 stream consumption (a)
    """OpenAI streams a refusal in ``delta.refusal`` (no ``content``): it was dropped, so the turn
    ended as an empty "stop" message and the user never saw why (Responses keeps it as text)."""
    body = sse(
        _chunk({"role": "assistant", "content": None, "refusal": ""}),
        _chunk({"refusal": "I can't help"}),
        _chunk({"refusal": " with that."}),
        _chunk(finish="stop"),
        done=True,
    )
    types, message = _replay(body, output_schema={"type": "object"})
    assert message.content == [TextContent("I can't help with that.")] and message.stop_reason == "stop"
    assert types == ["start", "text_start", "text_delta", "text_delta", "text_end", "done"]


def test_usage_inside_choice_and_cost():  # spec §7: Moonshot-style usage
    body = sse(
        _chunk(
            {"content": "x"},
            "stop",
        ),
        {"choices": [{"index": 0, "delta": {}, "usage": {"prompt_tokens": 1000, "completion_tokens": 10}}]},
        done=True,
    )
    _, message = _replay(body, {"cost": ModelCost(input=3.0, output=15.0)})
    assert (message.usage.input, message.usage.output) == (1000, 10)
    assert message.usage.cost.input == pytest.approx(0.003) and message.usage.cost.total == pytest.approx(0.00315)


def test_usage_reasoning_tokens_rule():
    assert (
        parse_usage(
            {"prompt_tokens": 5, "completion_tokens": 20, "completion_tokens_details": {"reasoning_tokens": 12}}
        ).output
        == 20
    )
    assert (
        parse_usage(
            {"prompt_tokens": 5, "completion_tokens": 8, "completion_tokens_details": {"reasoning_tokens": 12}}
        ).output
        == 20
    )


# --------------------------------------------------------------------------- request bodies


def _model(**kw):
    base = dict(id="gpt-x", api=API, provider="openai", base_url="https://api.openai.com/v1")
    base.update(kw)
    return Model(**base)


TOOL = AgentTool(
    "calc", "Calculate.", {"type": "object", "properties": {"e": {"type": "string"}}}, execute=lambda *a: None
)


def test_body_basics_openai():  # spec §12 body
    model = _model(reasoning=True)
    ctx = AgentContext(system_prompt="Be brief.", messages=[UserMessage("hi")], tools=[TOOL])
    body = build_request_body(
        model, ctx, {"max_tokens": 100, "temperature": 0.5, "reasoning": "high", "tool_choice": "auto"}
    )
    assert body == {
        "model": "gpt-x",
        "messages": [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "store": False,
        "max_completion_tokens": 100,
        "temperature": 0.5,
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "calc",
                    "description": "Calculate.",
                    "parameters": TOOL.parameters,
                    "strict": False,
                },
            }
        ],
        "tool_choice": "auto",
        "reasoning_effort": "high",
    }


def test_tool_choice_any_is_openais_required_and_needs_tools():  # options: "any"/"required" are one choice
    """``tool_choice="any"`` (a word the options accept) was sent as is, which OpenAI refuses with a
    400 (supported: none, auto, required); and a choice without tools got a 400 "'tool_choice' is
    only allowed when 'tools' are specified"."""
    model = _model()
    ctx = AgentContext(messages=[UserMessage("hi")], tools=[TOOL])
    assert build_request_body(model, ctx, {"tool_choice": "any"})["tool_choice"] == "required"
    assert build_request_body(model, ctx, {"tool_choice": "none"})["tool_choice"] == "none"
    named = {"type": "function", "function": {"name": "calc"}}
    assert build_request_body(model, ctx, {"tool_choice": named})["tool_choice"] == named
    bare = build_request_body(model, AgentContext(messages=[UserMessage("hi")]), {"tool_choice": "auto"})
    assert "tool_choice" not in bare and "tools" not in bare


@pytest.mark.parametrize(
    "kw, expected",
    [
        (
            dict(provider="xai", base_url="https://api.x.ai/v1"),
            dict(supportsStore=False, supportsDeveloperRole=False, supportsReasoningEffort=False),
        ),
        (
            dict(provider="zai", base_url="https://api.z.ai/api/coding/paas/v4"),
            dict(supportsStore=False, thinkingFormat="zai", supportsReasoningEffort=False),
        ),
        (
            dict(provider="deepseek", base_url="https://api.deepseek.com/v1"),
            dict(supportsStore=False, supportsDeveloperRole=False, supportsReasoningEffort=True),
        ),
        (
            dict(provider="local", base_url="http://localhost:11434/v1"),
            dict(
                supportsStore=False,
                supportsDeveloperRole=False,
                supportsReasoningEffort=False,
                maxTokensField="max_tokens",
            ),
        ),
        (
            dict(provider="mistral", base_url="https://api.mistral.ai/v1"),
            dict(
                requiresToolResultName=True,
                requiresThinkingAsText=False,  # issue 17: thinking goes back as typed chunks instead
                supportsThinkingContentParts=True,
                thinkingFormat="mistral",
                maxTokensField="max_tokens",
            ),
        ),
        (
            dict(provider="groq", base_url="https://api.groq.com/openai/v1", id="qwen/qwen3-32b"),
            dict(
                reasoningEffortMap={
                    "minimal": "default",
                    "low": "default",
                    "medium": "default",
                    "high": "default",
                    "xhigh": "default",
                }
            ),
        ),
        (
            dict(provider="local", base_url="http://127.0.0.1:8080/v1", compat={"supportsDeveloperRole": True}),
            dict(supportsDeveloperRole=True),
        ),
    ],
)
def test_compat_detection_and_overrides(kw, expected):  # spec §17
    compat = resolve_compat(_model(**kw))
    assert {k: compat[k] for k in expected} == expected


def test_reasoning_levels_and_formats():  # spec §11
    ctx = AgentContext(messages=[UserMessage("q")])
    assert build_request_body(_model(reasoning=True), ctx, {"reasoning": "xhigh"})["reasoning_effort"] == "high"
    assert (
        build_request_body(_model(id="gpt-5.2", reasoning=True), ctx, {"reasoning": "xhigh"})["reasoning_effort"]
        == "xhigh"
    )
    assert "reasoning_effort" not in build_request_body(_model(reasoning=False), ctx, {"reasoning": "high"})
    assert "reasoning_effort" not in build_request_body(_model(reasoning=True), ctx, {"reasoning": None})
    zai = _model(provider="zai", base_url="https://api.z.ai/api/paas/v4", reasoning=True)
    assert build_request_body(zai, ctx, {"reasoning": "low"})["enable_thinking"] is True
    assert build_request_body(zai, ctx, {})["enable_thinking"] is False
    qwen = _model(
        provider="local",
        base_url="http://localhost:8000/v1",
        reasoning=True,
        compat={"thinkingFormat": "qwen-chat-template"},
    )
    assert build_request_body(qwen, ctx, {"reasoning": "medium"})["chat_template_kwargs"] == {"enable_thinking": True}


def test_thinking_level_map_maps_and_clamps_reasoning_effort():  # issue 17: Model.thinking_level_map
    ctx = AgentContext(messages=[UserMessage("q")])
    mapped = _model(reasoning=True, thinking_level_map={"off": "none", "minimal": None, "xhigh": "xhigh"})
    efforts = [build_request_body(mapped, ctx, {"reasoning": lv}).get("reasoning_effort") for lv in LEVELS]
    # off is sent as the map's "none"; minimal is unsupported (up to low); max is unmapped (down to xhigh)
    assert efforts == ["none", "low", "low", "medium", "high", "xhigh", "xhigh"]
    old = _model(reasoning=True, compat={"reasoningEffortMap": {"high": "max-ish"}})
    assert build_request_body(old, ctx, {"reasoning": "high"})["reasoning_effort"] == "max-ish"
    assert build_request_body(old, ctx, {"reasoning": "xhigh"})["reasoning_effort"] == "max-ish"  # clamped down
    assert "reasoning_effort" not in build_request_body(old, ctx, {})


LEVELS = ["off", "minimal", "low", "medium", "high", "xhigh", "max"]


def test_replay_shapes_tool_history_images_and_names():  # spec §10, §12 messages
    model = _model(provider="mistral", base_url="https://api.mistral.ai/v1", id="mistral-x", input=("text", "image"))
    mine = dict(api=API, provider="mistral", model="mistral-x")
    image = ImageContent("QUJD", "image/png")
    ctx = AgentContext(
        messages=[
            UserMessage([TextContent("look"), image]),
            AssistantMessage(
                [
                    ThinkingContent("ponder", thinking_signature="reasoning_content"),
                    TextContent("ok"),
                    ToolCall("abcdefghi", "shot", {}),
                ],
                stop_reason="toolUse",
                **mine,
            ),
            ToolResultMessage("abcdefghi", "shot", [image]),
            UserMessage("thanks \ud800"),
        ]
    )
    messages = build_request_body(model, ctx, {})["messages"]
    assert messages == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}},
            ],
        },
        {
            "role": "assistant",
            "content": [  # issue 17: Mistral's typed chunks, as the reference sends them
                {"type": "thinking", "thinking": [{"type": "text", "text": "ponder"}]},
                {"type": "text", "text": "ok"},
            ],
            "tool_calls": [{"id": "abcdefghi", "type": "function", "function": {"name": "shot", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "abcdefghi", "content": "(see attached image)", "name": "shot"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Attached image(s) from tool result:"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}},
            ],
        },
        {"role": "user", "content": "thanks "},  # unpaired surrogate removed
    ]
    text_only = build_request_body(_model(), AgentContext(messages=[UserMessage([image])]), {})
    assert text_only["messages"] == []  # images dropped for a text-only model; the empty message skipped


def test_tool_result_images_follow_the_bridge_when_an_assistant_must_follow_tool_results():  # spec §12
    """``requiresAssistantAfterToolResult``: the user message carrying a tool result's images came
    straight after the tool message, the very order such a server refuses (the reference puts
    its "I have processed the tool results." turn first); no second bridge before the next user."""
    compat = {"requiresAssistantAfterToolResult": True}
    model = _model(provider="x", base_url="https://x.example/v1", input=("text", "image"), compat=compat)
    image = ImageContent(data="QUJD", mime_type="image/png")
    ctx = AgentContext(
        messages=[
            UserMessage("look"),
            AssistantMessage(
                [ToolCall("c1", "shot", {})], api=API, provider="x", model=model.id, stop_reason="toolUse"
            ),
            ToolResultMessage("c1", "shot", [image]),
            UserMessage("thanks"),
        ]
    )
    roles = [(m["role"], m["content"]) for m in build_request_body(model, ctx, {})["messages"]]
    assert roles[2:] == [
        ("tool", "(see attached image)"),
        ("assistant", "I have processed the tool results."),
        (
            "user",
            [
                {"type": "text", "text": "Attached image(s) from tool result:"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}},
            ],
        ),
        ("user", "thanks"),
    ]


def test_same_model_reasoning_is_replayed_under_its_field_and_tools_empty_list():
    model = _model(provider="local", base_url="http://localhost:8080/v1", id="qwq")
    prior = AssistantMessage(
        [ThinkingContent("think", thinking_signature="reasoning_content"), ToolCall("c1", "calc", {"e": "1+1"})],
        api=API,
        provider="local",
        model="qwq",
        stop_reason="toolUse",
    )
    ctx = AgentContext(messages=[UserMessage("q"), prior, ToolResultMessage("c1", "calc", [TextContent("2")])])
    body = build_request_body(model, ctx, {"max_tokens": 50})
    assert body["messages"][1]["reasoning_content"] == "think" and body["messages"][1]["content"] is None
    assert body["tools"] == []  # history has tool traffic but no tools are offered now
    assert body["max_tokens"] == 50 and "store" not in body


def test_cross_provider_replay_normalises_ids_and_repairs_sequence():  # spec §6 through this API
    responses = dict(api="openai-responses", provider="openai", model="gpt-5")
    ctx = AgentContext(
        messages=[
            UserMessage("q"),
            AssistantMessage(
                [
                    ThinkingContent("secret", thinking_signature='{"type":"reasoning"}'),
                    ToolCall("call_1|fc_abc", "calc", {"e": "1"}),
                    ToolCall("call_2|fc_def", "calc", {}),
                ],
                stop_reason="toolUse",
                **responses,
            ),
            ToolResultMessage("call_1|fc_abc", "calc", [TextContent("1")]),
            AssistantMessage([TextContent("partial")], stop_reason="aborted", **responses),
            UserMessage("again"),
        ]
    )
    body = build_request_body(_model(provider="groq", base_url="https://api.groq.com/openai/v1"), ctx, {})
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "tool", "tool", "user"]
    assistant = body["messages"][1]
    assert assistant["content"] == "secret"  # foreign thinking becomes plain text
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_1", "call_2"]
    assert body["messages"][2] == {"role": "tool", "tool_call_id": "call_1", "content": "1"}
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "call_2", "content": "No result provided"}


def test_openrouter_anthropic_cache_control_and_routing():  # spec §12, §17; issue 17 cacheControlFormat
    model = _model(
        provider="openrouter",
        base_url="https://openrouter.ai/api/v1",
        id="anthropic/claude-x",
        compat={"openRouterRouting": {"order": ["anthropic"]}},
    )
    body = build_request_body(model, AgentContext(messages=[UserMessage("hello")]), {})
    assert body["messages"][-1]["content"] == [
        {"type": "text", "text": "hello", "cache_control": {"type": "ephemeral"}}
    ]
    assert body["provider"] == {"order": ["anthropic"]}
    none = build_request_body(model, AgentContext(messages=[UserMessage("hello")]), {"cache_retention": "none"})
    assert none["messages"][-1]["content"] == "hello"
    # as the reference: the system prompt and the last tool are cache breakpoints too
    ctx = AgentContext(system_prompt="sys", messages=[UserMessage("hello")], tools=[TOOL, TOOL])
    body = build_request_body(model, ctx, {"cache_retention": "long"})
    ttl = {"type": "ephemeral", "ttl": "1h"}
    assert body["messages"][0]["content"] == [{"type": "text", "text": "sys", "cache_control": ttl}]
    assert "cache_control" not in body["tools"][0] and body["tools"][1]["cache_control"] == ttl
    assert body["messages"][-1]["content"][0]["cache_control"] == ttl


def test_copilot_dynamic_headers():  # spec §17: X-Initiator, Openai-Intent, Copilot-Vision-Request
    model = _model(provider="github-copilot", base_url="https://api.individual.githubcopilot.com")
    call = ToolCall("call_1", "calc", {"e": "1"})
    asked = AgentContext(messages=[UserMessage("hi")])
    headers = build_headers(model, asked, "key")
    assert headers["X-Initiator"] == "user" and headers["Openai-Intent"] == "conversation-edits"
    assert "Copilot-Vision-Request" not in headers
    img = ImageContent(data="AAAA", mime_type="image/png")
    tool_loop = AgentContext(
        messages=[
            UserMessage("shoot"),
            AssistantMessage([call], api=API, provider="github-copilot", model="gpt-x", stop_reason="toolUse"),
            ToolResultMessage("call_1", "calc", [img]),
        ]
    )
    headers = build_headers(model, tool_loop, "key")
    assert headers["X-Initiator"] == "agent" and headers["Copilot-Vision-Request"] == "true"
    assert "X-Initiator" not in build_headers(_model(), asked, "key")  # Copilot only


def test_vercel_gateway_routing_and_compat_switches_for_tools_and_usage():  # spec §12 body, §17
    routing = {"only": ["anthropic"], "order": ["anthropic", "bedrock"]}
    model = _model(
        provider="vercel-ai-gateway",
        base_url="https://ai-gateway.vercel.sh/v1",
        compat={"vercelGatewayRouting": routing, "supportsStrictMode": False, "supportsUsageInStreaming": False},
    )
    body = build_request_body(model, AgentContext(messages=[UserMessage("hi")], tools=[TOOL]), {})
    assert body["providerOptions"] == {"gateway": routing}
    assert "strict" not in body["tools"][0]["function"] and "stream_options" not in body
    elsewhere = build_request_body(
        _model(compat={"vercelGatewayRouting": routing}), AgentContext(messages=[UserMessage("hi")]), {}
    )
    assert "providerOptions" not in elsewhere  # only to the gateway's base URL


def test_prompt_cache_key_and_retention():  # issue 17: the reference's prompt_cache_key rules
    ctx = AgentContext(messages=[UserMessage("hi")])
    openai = build_request_body(_model(), ctx, {"session_id": "sess-1"})
    assert openai["prompt_cache_key"] == "sess-1" and "prompt_cache_retention" not in openai
    long_ = build_request_body(_model(), ctx, {"session_id": "sess-1", "cache_retention": "long"})
    assert (long_["prompt_cache_key"], long_["prompt_cache_retention"]) == ("sess-1", "24h")
    none = build_request_body(_model(), ctx, {"session_id": "sess-1", "cache_retention": "none"})
    assert "prompt_cache_key" not in none and "prompt_cache_retention" not in none
    assert "prompt_cache_key" not in build_request_body(_model(), ctx, {})  # no session: no key
    long_id = "s" * 70 + "é"
    assert build_request_body(_model(), ctx, {"session_id": long_id})["prompt_cache_key"] == "s" * 64  # OpenAI's limit
    other = _model(provider="groq", base_url="https://api.groq.com/openai/v1")
    assert "prompt_cache_key" not in build_request_body(other, ctx, {"session_id": "sess-1"})
    together = _model(provider="together", base_url="https://api.together.xyz/v1")
    body = build_request_body(together, ctx, {"session_id": "sess-1", "cache_retention": "long"})
    assert "prompt_cache_key" not in body and "prompt_cache_retention" not in body  # no long retention there


def test_long_retention_and_session_affinity_reach_the_server():  # issue 17: body + headers on the wire
    with ScriptedServer([Reply(body=sse(_chunk({"content": "ok"}), _chunk(finish="stop"), done=True))] * 3) as server:
        affinity = {"sendSessionAffinityHeaders": True}
        for compat in (affinity, dict(affinity, sessionAffinityFormat="openai-nosession"), {}):
            model = Model(id="m", api=API, provider="local", base_url=server.url + "/v1", compat=compat)
            ctx = AgentContext(messages=[UserMessage("hi")])
            result = stream(model, ctx, session_id="sess-9", cache_retention="long").result()
            assert result.stop_reason == "stop", result.error_message
        sent = server.requests
    assert [(r.json()["prompt_cache_key"], r.json()["prompt_cache_retention"]) for r in sent] == [("sess-9", "24h")] * 3
    headers = [{k.lower(): v for k, v in r.headers.items()} for r in sent]
    assert (headers[0]["session_id"], headers[0]["x-client-request-id"], headers[0]["x-session-affinity"]) == (
        "sess-9",
        "sess-9",
        "sess-9",
    )
    assert "session_id" not in headers[1] and headers[1]["x-session-affinity"] == "sess-9"
    assert not {"session_id", "x-client-request-id", "x-session-affinity"} & set(headers[2])


def test_mistral_gets_the_session_id_as_x_affinity():  # issue 17: the reference's Mistral prefix caching
    mistral = _model(provider="mistral", base_url="https://api.mistral.ai/v1", id="mistral-large-latest")
    compat = resolve_compat(mistral)
    assert build_headers(mistral, None, "k", {"session_id": "s-5"}, compat)["x-affinity"] == "s-5"
    assert "x-affinity" not in build_headers(mistral, None, "k", {"session_id": "s-5", "cache_retention": "none"})
    assert "x-affinity" not in build_headers(_model(), None, "k", {"session_id": "s-5"})


def test_mistral_bodies_hold_only_fields_its_chat_endpoint_accepts():  # issue 17: 422 extra_forbidden
    # Mistral validates the body strictly ("Extra inputs are not permitted"): no stream_options
    # (usage comes in the last chunk anyway), no empty tools list after the tools were removed,
    # no OpenAI prompt-cache fields (its cache routing is the x-affinity header)
    mistral = _model(provider="mistral", base_url="https://api.mistral.ai/v1", id="mistral-large-latest")
    call = ToolCall("abcDEF123", "calc", {"e": "1+1"})
    context = AgentContext(
        messages=[
            UserMessage("add"),
            AssistantMessage([call], api=API, provider="mistral", model=mistral.id, stop_reason="toolUse"),
            ToolResultMessage("abcDEF123", "calc", [TextContent("2")]),
            UserMessage("thanks"),
        ]
    )
    body = build_request_body(mistral, context, {"session_id": "s-1", "cache_retention": "long"})
    assert not {"stream_options", "tools", "prompt_cache_key", "prompt_cache_retention", "store"} & set(body)
    assert body["messages"][1]["tool_calls"][0]["id"] == "abcDEF123"
    assert build_request_body(_model(), context, {})["tools"] == []  # others keep the empty list


def test_a_bad_cache_retention_ends_the_stream_with_a_clear_error():  # issue 17: bad input names the problem
    with ScriptedServer() as server:
        model = Model(id="m", api=API, provider="local", base_url=server.url + "/v1")
        result = stream(model, AgentContext(messages=[UserMessage("hi")]), cache_retention="forever").result()
        # the provider itself checks too (the agent loop calls it directly, past stream()'s check)
        direct = (
            OpenAICompletionsProvider()
            .stream(model, AgentContext(messages=[UserMessage("hi")]), cache_retention="forever")
            .result()
        )
        assert not server.requests
    assert result.stop_reason == "error" and direct.stop_reason == "error"
    assert result.error_message == "stream(): cache_retention 'forever': choose one of none, short, long"
    assert direct.error_message == "ValueError: cache_retention option is 'forever': use one of 'none', 'short', 'long'"


def _gemini_calls_of_a_long_tool(name):
    """Two parallel calls from Gemini with the ids the Google provider makes up (``{name}_{ms}_{n}``),
    and their results."""
    ids = [f"{name}_1796647726339_1", f"{name}_1796647726339_2"]
    calls = [ToolCall(id=i, name=name, arguments={"n": n}) for n, i in enumerate(ids)]
    turn = AssistantMessage(calls, api="google-generative-ai", provider="google", model="gemini", stop_reason="toolUse")
    results = [ToolResultMessage(i, name, [TextContent(f"result {n}")]) for n, i in enumerate(ids)]
    return AgentContext(messages=[UserMessage("q"), turn, *results])


def test_ids_cut_to_40_characters_stay_distinct():  # spec §6 openai-completions
    """Two calls of one long-named tool (an MCP tool, say) made by Gemini, replayed to OpenAI: cut
    to 40 characters both ids were the same, so the two results could not be told apart (and
    the API got one id twice). The second id now differs, within 40 characters, and its result
    follows it; the same id always gets the same replacement."""
    ctx = _gemini_calls_of_a_long_tool("mcp__github__create_pull_request_review_comment")
    messages = build_request_body(_model(), ctx, {})["messages"]
    ids = [c["id"] for c in messages[1]["tool_calls"]]
    assert len(set(ids)) == 2 and all(len(i) <= 40 for i in ids)
    assert ids[0] == "mcp__github__create_pull_request_review_"  # the spec's cut when nothing collides
    assert [(m["tool_call_id"], m["content"]) for m in messages[2:]] == [(ids[0], "result 0"), (ids[1], "result 1")]
    assert build_request_body(_model(), ctx, {})["messages"] == messages


def test_tool_call_id_normalisation():  # spec §6
    openai = _model()
    assert normalize_tool_call_id("call_1|fc_x", openai) == "call_1"
    assert normalize_tool_call_id("x" * 50, openai) == "x" * 40
    assert normalize_tool_call_id("y" * 50, _model(provider="groq")) == "y" * 50
    mistral = _model(provider="mistral", base_url="https://api.mistral.ai/v1")
    short = normalize_tool_call_id("toolu_01ABCdef-xyz", mistral)
    assert len(short) == 9 and short.isalnum() and short == normalize_tool_call_id("toolu_01ABCdef-xyz", mistral)
    assert normalize_tool_call_id("abc-DEF-123", mistral) == "abcDEF123"


# --------------------------------------------------------------------------- end to end


def test_agent_run_with_tool_over_recorded_traffic():  # issue 4: end-to-end Agent run per wire API
    from agentcore import Agent, tool

    recording = _recording("tool-call-args-in-fragments")
    calls = []

    @tool
    def multiply(a: int, b: int) -> str:
        """Multiply two numbers."""
        calls.append((a, b))
        return str(a * b)

    with ScriptedServer() as server:
        server.replay(recording, chunk_size=9)
        model = Model(id="gpt-4o-mini", api=API, provider="openai", base_url=server.url + "/v1")
        agent = Agent(model=model, tools=[multiply], api_key="sk-test")
        seen = []
        agent.subscribe(lambda event: seen.append(event.type))
        new = agent.prompt("What is 1231 * 2331?")
        second = server.requests[1].json()["messages"]
    assert calls == [(1231, 2331)]
    assert [m.role for m in new] == ["user", "assistant", "toolResult", "assistant"]
    assert new[2].text == "2869461" and not new[2].is_error
    assert new[-1].text == RECORDED["tool-call-args-in-fragments"][-1] and new[-1].stop_reason == "stop"
    assert second[-1] == {"role": "tool", "tool_call_id": "call_1EYWDzueHEp8OsB8jJSEp7WB", "content": "2869461"}
    assert seen[0] == "agent_start" and seen[-1] == "agent_end" and "tool_execution_end" in seen


def test_agent_run_parallel_tools_against_local_server():  # issue 4: local OpenAI-compatible server
    from agentcore import Agent, tool

    @tool
    def echo(word: str) -> str:
        """Echo a word."""
        return word.upper()

    first = sse(
        _chunk({"tool_calls": [{"index": 0, "id": "e1", "function": {"name": "echo", "arguments": '{"word":"a"}'}}]}),
        _chunk({"tool_calls": [{"index": 1, "id": "e2", "function": {"name": "echo", "arguments": '{"word":"b"}'}}]}),
        _chunk(finish="tool_calls"),
        done=True,
    )
    second = sse(_chunk({"content": "A and B"}), _chunk(finish="stop"), done=True)
    with ScriptedServer([Reply(body=first, chunk_size=16), Reply(body=second)]) as server:
        model = Model(id="llama3", api=API, provider="ollama", base_url=server.url + "/v1")
        agent = Agent(model=model, system_prompt="Be terse.", tools=[echo])
        new = agent.prompt("echo a and b")
        body = server.requests[1].json()
    assert [(m.role, getattr(m, "tool_call_id", None)) for m in new] == [
        ("user", None),
        ("assistant", None),
        ("toolResult", "e1"),
        ("toolResult", "e2"),
        ("assistant", None),
    ]
    assert new[-1].text == "A and B"
    assert body["messages"][0] == {"role": "system", "content": "Be terse."}
    assert [(m["tool_call_id"], m["content"]) for m in body["messages"] if m["role"] == "tool"] == [
        ("e1", "A"),
        ("e2", "B"),
    ]


OUTPUT_SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer"}},
    "required": ["n"],
    "additionalProperties": False,
    "title": "My answer!",
}


def test_output_schema_becomes_response_format():  # issue 13: native structured output
    model = Model(id="m", api=API, provider="local", base_url="http://127.0.0.1:1/v1")
    body = build_request_body(model, AgentContext(messages=[UserMessage("q")]), {"output_schema": OUTPUT_SCHEMA})
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "My_answer", "schema": OUTPUT_SCHEMA, "strict": False},
    }
    assert "response_format" not in build_request_body(model, AgentContext(messages=[UserMessage("q")]), {})


# --------------------------------------------------------------------------- Mistral (issue 17)

MISTRAL_THINKING = (
    "Okay, the user is asking how to cross the street. I know that crossing the street safely involves a few key "
    "steps: first, look both ways to check for oncoming traffic; second, use a crosswalk if one is available; "
    "third, obey any traffic signals or signs that may be present; and finally, proceed with caution until you "
    "have safely reached the other side. Let me compile this information into a clear and concise response."
)
_MISTRAL_STEPS = (
    "To cross the street safely, follow these steps:\n\n1. Look both ways to check for oncoming traffic.\n"
    "2. Use a crosswalk if one is available.\n3. Obey any traffic signals or signs that may be present.\n"
    "4. Proceed with caution until you have safely reached the other side.\n"
)
MISTRAL_TEXT = (
    _MISTRAL_STEPS
    + "\n```markdown\n"
    + _MISTRAL_STEPS
    + "```\n\nBy following these steps, you can ensure a safe crossing."
)


def _mistral_model(server, **kw):
    return Model(api=API, provider="mistral", base_url=server.url + "/v1", **kw)


@pytest.mark.parametrize("chunk_size", [1, 7, 4096])
def test_mistral_thinking_parts_recording(chunk_size):  # issue 17: Magistral typed content chunks
    recording = _recording("mistral-thinking-parts")
    (interaction,) = recording["interactions"]
    recorded = interaction["request"]["body"]
    with ScriptedServer() as server:
        server.replay(recording, chunk_size=chunk_size)
        model = _mistral_model(server, id=recorded["model"], reasoning=True)
        context = AgentContext(messages=[UserMessage(recorded["messages"][0]["content"])])
        events = stream(model, context, api_key="sk-test")
        seen = list(events)
        types = [e.type for e in seen]
        message = events.result()
        sent = server.requests[0].json()
    assert types == (
        ["start", "thinking_start"]
        + ["thinking_delta"] * 57  # one recorded chunk is an empty thinking list
        + ["thinking_end", "text_start"]
        + ["text_delta"] * 97
        + ["text_end", "done"]
    )
    deltas = [e.delta for e in seen if e.type == "thinking_delta"]
    assert deltas[:3] == ["Okay", ", the", " user"]
    assert message.content == [ThinkingContent(MISTRAL_THINKING), TextContent(MISTRAL_TEXT)]
    assert message.stop_reason == "stop" and message.error_message is None
    assert (message.usage.input, message.usage.output, message.usage.total_tokens) == (10, 232, 242)
    assert message.response_id == "9f9d90210f194076abeee223863eaaf0"
    assert message.response_model is None  # the chunks name the requested model
    assert (sent["model"], sent["messages"], sent["stream"]) == (recorded["model"], recorded["messages"], True)
    assert "prompt_mode" not in sent  # no thinking level asked for

    # the next request sends the thinking back as Mistral's typed chunks, in order
    context.messages += [message, UserMessage("thanks")]
    body = build_request_body(model, context, {"reasoning": "high"})
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": [{"type": "text", "text": MISTRAL_THINKING}]},
            {"type": "text", "text": MISTRAL_TEXT},
        ],
    }
    assert body["prompt_mode"] == "reasoning" and "reasoning_effort" not in body


@pytest.mark.parametrize("chunk_size", [1, 4096])
def test_mistral_tool_call_recording(chunk_size):  # issue 17: id, finish reason and usage in one chunk
    recording = _recording("mistral-tool-call")
    (interaction,) = recording["interactions"]
    recorded = interaction["request"]["body"]
    with ScriptedServer() as server:
        server.replay(recording, chunk_size=chunk_size)
        model = _mistral_model(server, id=recorded["model"])
        context = AgentContext(messages=[UserMessage(recorded["messages"][0]["content"])], tools=[_tool_from(recorded)])
        events = stream(model, context, api_key="sk-test", max_tokens=100, temperature=0.7)
        types = [e.type for e in events]
        message = events.result()
        sent = server.requests[0].json()
    assert types == ["start", "toolcall_start", "toolcall_delta", "toolcall_end", "done"]
    assert message.content == [ToolCall("aX2gaLIyo", "get_weather", {"location": "New York City"})]
    assert message.stop_reason == "toolUse"
    assert (message.usage.input, message.usage.output, message.usage.total_tokens) == (72, 14, 86)
    assert message.response_id == "378d4d9fd4914db088d7c448257ed0d2" and message.response_model is None
    assert (sent["max_tokens"], sent["temperature"], sent["messages"]) == (100, 0.7, recorded["messages"])
    assert [t["function"]["name"] for t in sent["tools"]] == ["get_weather"]

    call = message.content[0]
    context.messages += [message, ToolResultMessage(call.id, call.name, [TextContent("sunny")])]
    replay = build_request_body(model, context, {})["messages"]
    assert replay[1]["tool_calls"][0]["id"] == "aX2gaLIyo" and replay[1]["content"] is None
    assert replay[2] == {"role": "tool", "tool_call_id": "aX2gaLIyo", "content": "sunny", "name": "get_weather"}


def test_mistral_ids_for_other_providers_calls_match_their_results():  # issue 17: 9 alphanumerics
    model = _model(provider="mistral", base_url="https://api.mistral.ai/v1", id="mistral-large-latest")
    other = dict(api="anthropic-messages", provider="anthropic", model="claude")
    ids = ["toolu_01ABCdef-xyz", "call_1|fc_2", "abc-DEF-123", "abcDEF123"]
    messages = [UserMessage("go")]
    for call_id in ids:
        messages += [
            AssistantMessage([ToolCall(call_id, "t", {})], stop_reason="toolUse", **other),
            ToolResultMessage(call_id, "t", [TextContent("r")]),
        ]
    sent = build_request_body(model, AgentContext(messages=messages), {})["messages"]
    calls = [m["tool_calls"][0]["id"] for m in sent if m["role"] == "assistant"]
    results = [m["tool_call_id"] for m in sent if m["role"] == "tool"]
    assert calls == results
    assert all(len(i) == 9 and i.isalnum() for i in calls)
    assert calls[2] == "abcDEF123" and len(set(calls)) == 4  # the collision is re-hashed


def test_mistral_null_tool_call_id_and_mixed_chunks():  # issue 17: stream shapes seen from Mistral
    call = {"index": 0, "id": "null", "function": {"name": "t", "arguments": '{"a":'}}
    more = {"index": 0, "function": {"arguments": "1}"}}
    body = sse(
        _chunk(
            {
                "content": [
                    {"type": "text", "text": "A"},
                    {"type": "thinking", "thinking": [{"type": "text", "text": "t1"}]},
                ]
            }
        ),
        _chunk({"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "t2"}, {"type": "image"}]}]}),
        _chunk({"content": [{"type": "reference", "ids": [1]}, "B"]}),
        _chunk({"content": {"type": "text", "text": "C"}}),  # one chunk without the list
        _chunk({"tool_calls": [call]}),
        _chunk({"tool_calls": [more]}, finish="tool_calls"),
        done=True,
    )
    with ScriptedServer([Reply(body=body, chunk_size=5)]) as server:
        model = _mistral_model(server, id="magistral-small")
        message = stream(model, AgentContext(messages=[UserMessage("q")]), api_key="k").result()
    text, thinking, text2, tool = message.content
    assert (text, thinking, text2) == (TextContent("A"), ThinkingContent("t1t2"), TextContent("BC"))
    assert tool.name == "t" and tool.arguments == {"a": 1}
    assert len(tool.id) == 9 and tool.id.isalnum() and tool.id != "null"


# --------------------------------------------------------------------------- diagnostics (issue 17)


def test_failures_carry_a_provider_error_diagnostic_without_secrets():  # reference provider_error
    denied = Reply(status=401, content_type="application/json", body=json.dumps({"error": {"message": "bad key"}}))
    cut = Reply(body="data: " + json.dumps(_chunk({"content": "par"})) + "\n\n")  # no finish, no [DONE]
    with ScriptedServer([denied, cut]) as server:
        model = Model(id="m", api=API, provider="local", base_url=server.url + "/v1")
        ctx = AgentContext(messages=[UserMessage("q")])
        first = stream(model, ctx, api_key="sk-secret-key-123").result()
        second = stream(model, ctx, api_key="sk-secret-key-123").result()
    (failure,) = first.diagnostics
    assert failure.type == "provider_error" and failure.error["code"] == 401
    assert failure.details == {"phase": "before_message_stream_start", "status": 401}
    assert failure.error["message"] == first.error_message and "sk-secret" not in json.dumps(first.to_dict())
    (cut_off,) = second.diagnostics
    assert cut_off.details == {"phase": "after_message_stream_start"} and cut_off.error["name"] == "ProviderError"
    assert second.content == [TextContent("par")]


def test_repaired_tool_arguments_are_noted():  # a stream parse problem recovered from
    call = {"index": 0, "id": "c1", "function": {"name": "calc", "arguments": '{"e": "1+1'}}  # cut off
    good = {"index": 1, "id": "c2", "function": {"name": "calc", "arguments": '{"e": "2"}'}}
    _, message = _replay(sse(_chunk({"tool_calls": [call]}), _chunk({"tool_calls": [good]}, finish="tool_calls")))
    assert [c.arguments for c in message.tool_calls] == [{"e": "1+1"}, {"e": "2"}]
    (note,) = message.diagnostics
    assert note.type == "tool_arguments_repaired" and note.error["name"] == "JSONDecodeError"
    assert note.details == {"toolCallId": "c1", "toolName": "calc", "argumentChars": 10}
    _, clean = _replay(sse(_chunk({"tool_calls": [good]}, finish="tool_calls"), done=True))
    assert clean.diagnostics is None and "diagnostics" not in clean.to_dict()


def test_arguments_with_nan_or_nested_too_deeply_are_noted_not_fatal():  # the strict check's own limits
    nan = {"index": 0, "id": "c1", "function": {"name": "calc", "arguments": '{"e": NaN, "f": 1e999}'}}
    deep = {"index": 1, "id": "c2", "function": {"name": "calc", "arguments": "[" * 100_000}}
    _, message = _replay(sse(_chunk({"tool_calls": [nan]}), _chunk({"tool_calls": [deep]}, finish="tool_calls")))
    assert message.stop_reason == "toolUse", message.error_message
    assert [c.arguments for c in message.tool_calls] == [{"e": None, "f": None}, {}]
    first, second = message.diagnostics
    assert (first.type, first.error["name"], first.details["toolCallId"]) == (
        "tool_arguments_repaired",
        "JSONDecodeError",
        "c1",
    )
    assert "NaN is not JSON" in first.error["message"]
    assert (second.error["name"], second.details["toolCallId"]) == ("RecursionError", "c2")


def test_an_emoji_split_over_two_deltas_is_one_character():  # two \\u escapes, one per chunk
    first = 'data: {"choices": [{"index": 0, "delta": {"content": "hi \\ud83d"}}]}\n\n'
    second = 'data: {"choices": [{"index": 0, "delta": {"content": "\\ude00!"}, "finish_reason": "stop"}]}\n\n'
    _, message = _replay(first + second)
    assert message.stop_reason == "stop" and message.content == [TextContent("hi \U0001f600!")]
    message.content[0].text.encode("utf-8")  # printable: no lone surrogates left


def test_deepseek_thinking_format_sends_thinking_type_and_mapped_effort():  # issue 17: catalog compat
    import agentcore

    # the shipped DeepSeek V4 entries say thinkingFormat "deepseek": the reference sends
    # thinking {type: enabled|disabled} and the level through the model's thinkingLevelMap
    flash = agentcore.get_model("deepseek/deepseek-v4-flash")
    assert flash.compat["thinkingFormat"] == "deepseek"
    context = AgentContext(messages=[UserMessage("hi")])
    off = build_request_body(flash, context, {})
    assert off["thinking"] == {"type": "disabled"} and "reasoning_effort" not in off
    for level, effort in (("minimal", "high"), ("medium", "high"), ("high", "high"), ("xhigh", "max"), ("max", "max")):
        body = build_request_body(flash, context, {"reasoning": level})
        assert (body["thinking"], body["reasoning_effort"]) == ({"type": "enabled"}, effort), level
    # re-pointed at a local proxy (models.json baseUrl): the catalog's format still decides
    local = Model.from_dict(dict(flash.to_dict(), baseUrl="http://127.0.0.1:9/v1"))
    body = build_request_body(local, context, {"reasoning": "high"})
    assert (body["thinking"], body["reasoning_effort"]) == ({"type": "enabled"}, "high")


def test_deepseek_replayed_assistant_messages_carry_reasoning_content():  # issue 17: V4 400s without it
    flash = Model(
        id="deepseek-v4-flash",
        api=API,
        provider="deepseek",
        base_url="https://api.deepseek.com",
        reasoning=True,
        compat={"thinkingFormat": "deepseek", "requiresReasoningContentOnAssistantMessages": True},
    )
    assert resolve_compat(Model(id="deepseek-chat", api=API, provider="deepseek", base_url="https://api.deepseek.com"))[
        "requiresReasoningContentOnAssistantMessages"
    ]
    call = ToolCall("call_1", "read", {"path": "a"})
    other = AssistantMessage([TextContent("from elsewhere"), call], api=API, provider="openai", model="gpt-4o")
    own = AssistantMessage(
        [ThinkingContent("mine", thinking_signature="reasoning_content"), TextContent("ok")],
        api=API,
        provider="deepseek",
        model=flash.id,
    )
    context = AgentContext(
        messages=[
            UserMessage("go"),
            other,
            ToolResultMessage("call_1", "read", [TextContent("data")]),
            own,
            UserMessage("more"),
        ]
    )
    assistants = [m for m in build_request_body(flash, context, {})["messages"] if m["role"] == "assistant"]
    assert [m.get("reasoning_content") for m in assistants] == ["", "mine"]
    plain = Model(id="gpt-4o", api=API, provider="openai", base_url="https://api.openai.com/v1")
    assert all("reasoning_content" not in m for m in build_request_body(plain, context, {})["messages"])


def test_zai_tool_stream_compat_streams_tool_arguments():  # issue 17: catalog compat zaiToolStream
    import agentcore

    glm = agentcore.get_model("zai/glm-4.7")
    assert glm.compat["zaiToolStream"] is True
    with_tools = AgentContext(messages=[UserMessage("hi")], tools=[TOOL])
    assert build_request_body(glm, with_tools, {})["tool_stream"] is True
    assert "tool_stream" not in build_request_body(glm, AgentContext(messages=[UserMessage("hi")]), {})
    assert "tool_stream" not in build_request_body(_model(provider="zai", base_url=glm.base_url), with_tools, {})


def test_detected_compat_is_a_fresh_dict_per_call_and_follows_the_model():
    """Detection is remembered per provider, base URL and model id; callers still get their own
    dict, and a changed URL or model id is detected again."""
    local = Model(id="m", api=API, provider="custom", base_url="http://127.0.0.1:8080/v1")
    first = resolve_compat(local)
    first["maxTokensField"] = "changed by a caller"
    second = resolve_compat(local)
    assert second is not first and second["maxTokensField"] == "max_tokens"  # a loopback server
    local.base_url = "https://api.example.com/v1"
    assert resolve_compat(local)["maxTokensField"] == "max_completion_tokens"
    qwen = Model(id="qwen/qwen3-32b", api=API, provider="groq", base_url="https://api.groq.com/openai/v1")
    mapped = resolve_compat(qwen)["reasoningEffortMap"]
    mapped["high"] = "changed by a caller"
    assert resolve_compat(qwen)["reasoningEffortMap"]["high"] == "default"
    local.compat = {"maxTokensField": "max_tokens"}  # explicit entries still win
    assert resolve_compat(local)["maxTokensField"] == "max_tokens"


def test_a_call_nested_too_deeply_to_parse_then_another_call_keeps_the_response():  # spec §5
    """When the next parallel call opens, the open one ends if its arguments are a whole JSON
    document; that check let the parser's RecursionError out for a call a model had nested
    thousands of ``[`` deep, and the whole response ended as an error instead of that call
    getting ``{}`` (with the repaired note) and the other call its arguments."""
    deep = '{"a": ' + "[" * 5000
    body = sse(
        _chunk(
            {"tool_calls": [{"index": 0, "id": "c0", "type": "function", "function": {"name": "f", "arguments": deep}}]}
        ),
        _chunk(
            {
                "tool_calls": [
                    {"index": 1, "id": "c1", "type": "function", "function": {"name": "g", "arguments": '{"b": 1}'}}
                ]
            }
        ),
        _chunk(finish="tool_calls"),
        done=True,
    )
    _, message = _replay(body)
    assert message.stop_reason == "toolUse", message.error_message
    assert [(c.name, c.arguments) for c in message.tool_calls] == [("f", {}), ("g", {"b": 1})]


def test_a_base_url_missing_its_variable_is_named_without_its_credentials(monkeypatch):
    """The "needs VAR: set it in the environment (<url>)" error quoted the URL as given, password
    and ``?token=`` included, into the transcript's error_message (and the session file): the URL's
    secrets were collected for redaction only once the URL was complete."""
    monkeypatch.delenv("GW_ACCOUNT_ID", raising=False)
    model = _model(base_url="https://me:pw-1234567@gw.example/{GW_ACCOUNT_ID}/v1?token=tk-7654321")
    result = stream(model, AgentContext(messages=[UserMessage("hi")]), api_key="sk-test-key-123").result()
    assert result.stop_reason == "error"
    assert result.error_message == (
        "the base URL of openai/gpt-x needs GW_ACCOUNT_ID: set it in the environment "
        "(https://me:***@gw.example/{GW_ACCOUNT_ID}/v1/chat/completions?token=***)"
    )

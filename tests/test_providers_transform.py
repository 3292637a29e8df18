"""Cross-provider message transformation (providers spec §6)."""

from __future__ import annotations

import json

from agentcore.providers.transform import transform_messages
from agentcore.types import (
    AssistantMessage,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

TARGET = Model(id="claude-x", api="anthropic-messages", provider="anthropic", base_url="")
SAME = dict(api="anthropic-messages", provider="anthropic", model="claude-x")
OTHER = dict(api="openai-responses", provider="openai", model="gpt-5")


def _assistant(blocks, stop="stop", **origin):
    return AssistantMessage(list(blocks), stop_reason=stop, **(origin or SAME))


def _upper(tool_call_id):
    return tool_call_id.upper()


def test_same_model_keeps_everything_verbatim():  # §6 pass 1, same model
    message = _assistant(
        [
            ThinkingContent("", thinking_signature="enc"),
            ThinkingContent("r", redacted=True, thinking_signature="blob"),
            TextContent("t", text_signature="sig"),
            ToolCall("id|1", "f", {}, thought_signature="ts"),
        ]
    )
    out = transform_messages([UserMessage("q"), message], TARGET, _upper)
    assert out[1] is message  # untouched messages are not copied


def test_cross_model_blocks():  # §6 pass 1, different model
    message = _assistant(
        [
            ThinkingContent("secret", thinking_signature="x", redacted=True),  # redacted: dropped
            ThinkingContent("   "),  # blank: dropped
            ThinkingContent("reasoned", thinking_signature="sig"),  # becomes plain text
            TextContent("answer", text_signature="msg_1"),  # loses its signature
            ToolCall("call|item", "f", {"a": 1}, thought_signature="ts"),  # id normalised, signature dropped
        ],
        stop="toolUse",
        **OTHER,
    )
    result = ToolResultMessage("call|item", "f", [TextContent("ok")])
    out = transform_messages([UserMessage("q"), message, result], TARGET, _upper)
    assert out[1].content == [TextContent("reasoned"), TextContent("answer"), ToolCall("CALL|ITEM", "f", {"a": 1})]
    assert out[2].tool_call_id == "CALL|ITEM"
    assert message.content[4].id == "call|item" and result.tool_call_id == "call|item"  # inputs not mutated


def test_errored_and_aborted_turns_are_dropped():  # §6 pass 2
    messages = [
        UserMessage("q"),
        _assistant([TextContent("half")], stop="error"),
        _assistant([TextContent("cut")], stop="aborted"),
        UserMessage("again"),
    ]
    out = transform_messages(messages, TARGET)
    assert [m.role for m in out] == ["user", "user"]


def test_orphaned_tool_calls_get_synthetic_results():  # §6 pass 2
    calls = _assistant([ToolCall("a", "f", {}), ToolCall("b", "g", {})], stop="toolUse")
    messages = [UserMessage("q"), calls, ToolResultMessage("a", "f", [TextContent("1")]), UserMessage("next")]
    out = transform_messages(messages, TARGET)
    assert [(m.role, getattr(m, "tool_call_id", None)) for m in out] == [
        ("user", None),
        ("assistant", None),
        ("toolResult", "a"),
        ("toolResult", "b"),
        ("user", None),
    ]
    synthetic = out[3]
    assert (
        synthetic.is_error and synthetic.tool_name == "g" and synthetic.content == [TextContent("No result provided")]
    )


def test_orphans_before_next_assistant_and_trailing_calls_left_alone():
    first = _assistant([ToolCall("a", "f", {})], stop="toolUse")
    second = _assistant([ToolCall("b", "f", {})], stop="toolUse")
    out = transform_messages([UserMessage("q"), first, second], TARGET)
    assert [m.role for m in out] == ["user", "assistant", "toolResult", "assistant"]  # trailing "b" untouched


def test_a_batch_cut_short_at_the_end_gets_its_missing_results():
    """A process killed while a batch ran leaves ``[assistant(a, b), toolResult(a)]``: call b
    stayed unanswered at the end, and every ``continue_()`` was refused by the provider (OpenAI
    and Anthropic answer 400 for a call without its result)."""
    calls = _assistant([ToolCall("a", "f", {}), ToolCall("b", "g", {})], stop="toolUse")
    out = transform_messages([UserMessage("q"), calls, ToolResultMessage("a", "f", [TextContent("1")])], TARGET)
    assert [(m.role, getattr(m, "tool_call_id", None)) for m in out] == [
        ("user", None),
        ("assistant", None),
        ("toolResult", "a"),
        ("toolResult", "b"),
    ]
    assert out[3].is_error and out[3].content == [TextContent("No result provided")]


def test_reference_dicts_are_accepted():
    out = transform_messages([{"role": "user", "content": "hi", "timestamp": 1}], TARGET)
    assert isinstance(out[0], UserMessage) and out[0].content == "hi"


def test_ids_a_normaliser_cuts_alike_stay_apart_and_their_results_follow():  # §6 pass 1
    """Google makes up ``{tool name}_{ms}_{n}`` ids; for a long (MCP) tool name two calls of one
    turn came out of a 64-character cut as one id, so Anthropic or Bedrock got a duplicate
    ``tool_use`` id and the two results could no longer be told apart."""
    from agentcore.providers.anthropic import normalize_tool_call_id

    name = "mcp__github__create_pull_request_review_comment_on_a_line"
    first, second = f"{name}_1733000000000_0", f"{name}_1733000000000_1"
    google = dict(api="google-generative-ai", provider="google", model="gemini-2.5-pro")
    messages = [
        UserMessage("review"),
        _assistant([ToolCall(first, name, {"n": 1}), ToolCall(second, name, {"n": 2})], stop="toolUse", **google),
        ToolResultMessage(tool_call_id=second, tool_name=name, content=[TextContent("two")]),
        ToolResultMessage(tool_call_id=first, tool_name=name, content=[TextContent("one")]),
        _assistant([ToolCall(first, name, {"n": 1})], stop="toolUse", **google),  # an id seen again
    ]
    out = transform_messages(messages, TARGET, normalize_tool_call_id)
    sent = [call.id for call in out[1].content]
    assert len(set(sent)) == 2 and all(len(i) <= 64 for i in sent)
    assert sent[0] == normalize_tool_call_id(first)  # the first keeps the plain cut
    assert out[2].tool_call_id == sent[1] and out[3].tool_call_id == sent[0]
    assert out[4].content[0].id == sent[0]  # the same original id, the same id sent
    again = transform_messages(messages, TARGET, normalize_tool_call_id)
    assert [call.id for call in again[1].content] == sent  # deterministic: prompt caches hold


def test_tool_call_arguments_that_are_not_an_object_are_sent_as_one():  # §6 pass 1
    """A session line written by another program (``"arguments": "{\\"path\\": \\"a\\"}"``) or a
    ``ToolCall`` built in code with a list: every API refuses a tool call whose input is not an
    object, so each later turn of the session failed. The stored message stays as it was."""
    odd = ['{"path": "a"}', "[1, 2]", "not json", None, 7, ["x"], "[" * 100_000]
    calls = [ToolCall(f"c{i}", "read", {}) for i in range(len(odd))]
    for call, arguments in zip(calls, odd):
        call.arguments = arguments
    results = [ToolResultMessage(c.id, "read", [TextContent("ok")]) for c in calls]
    for origin in (SAME, OTHER):
        message = _assistant(calls, stop="toolUse", **origin)
        out = transform_messages([UserMessage("q"), message, *results], TARGET, _upper)
        sent = [block.arguments for block in out[1].content]
        assert sent == [{"path": "a"}, {}, {}, {}, {}, {}, {}]
        assert [c.arguments for c in message.content] == odd  # the input is not mutated
    fine = _assistant([ToolCall("ok", "read", {"path": "b"})], stop="toolUse")
    assert transform_messages([fine], TARGET)[0] is fine  # an object is not copied


def test_every_wire_sends_a_decoded_object_for_arguments_read_as_text():
    from agentcore.providers import anthropic, google, openai_completions, openai_responses
    from agentcore.types import AgentContext, message_from_dict

    stored = {
        "role": "assistant",
        "content": [{"type": "toolCall", "id": "call_1", "name": "read", "arguments": '{"path": "a"}'}],
        "api": "x",
        "provider": "x",
        "model": "x",
        "usage": {},
        "stopReason": "toolUse",
        "timestamp": 1,
    }
    messages = [UserMessage("q"), message_from_dict(stored), ToolResultMessage("call_1", "read", [TextContent("ok")])]
    context = AgentContext(system_prompt="", messages=messages, tools=[])
    bodies = {
        "anthropic": anthropic.build_request_body(TARGET, context),
        "google": google.build_request_body(
            Model(id="g", api="google-generative-ai", provider="google", base_url=""), context
        ),
        "completions": openai_completions.build_request_body(
            Model(id="o", api="openai-completions", provider="openai", base_url=""), context, {}
        ),
        "responses": openai_responses.build_request_body(
            Model(id="r", api="openai-responses", provider="openai", base_url=""), context
        ),
    }
    assert bodies["anthropic"]["messages"][1]["content"][0]["input"] == {"path": "a"}
    assert bodies["google"]["contents"][1]["parts"][0]["functionCall"]["args"] == {"path": "a"}
    call = bodies["completions"]["messages"][1]["tool_calls"][0]["function"]
    assert json.loads(call["arguments"]) == {"path": "a"}
    item = next(i for i in bodies["responses"]["input"] if i.get("type") == "function_call")
    assert json.loads(item["arguments"]) == {"path": "a"}

"""Message and content types: reference JSON round trips (spec agent-loop §1, session.md) and the
message converters of agentcore.messages (spec agent-loop §1.5)."""

from __future__ import annotations

import copy
import json

import pytest

from agentcore.messages import (
    BRANCH_SUMMARY_PREFIX,
    BRANCH_SUMMARY_SUFFIX,
    COMPACTION_SUMMARY_PREFIX,
    COMPACTION_SUMMARY_SUFFIX,
    DROP,
    convert_message,
    convert_to_llm,
    default_convert_to_llm,
)
from agentcore.types import (
    AgentContext,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    Diagnostic,
    ImageContent,
    Model,
    ModelCost,
    QueueMode,
    StopReason,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ThinkingLevel,
    ToolCall,
    ToolExecutionMode,
    ToolResultMessage,
    UnknownMessage,
    Usage,
    UsageCost,
    UserMessage,
    message_from_dict,
    message_to_dict,
    role_of,
    text_of,
)


def test_reference_session_messages_round_trip(shared_dir):  # session.md: files from the reference open here
    path = shared_dir / "sessions" / "pi-v1-large-session.jsonl"
    if not path.exists():
        pytest.skip(f"{path} not found")
    count = 0
    roles = set()
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            entry = json.loads(line)
            if "message" not in entry:
                continue
            original = entry["message"]
            snapshot = copy.deepcopy(original)
            message = message_from_dict(original)
            assert message.to_dict() == snapshot, f"line {number} ({original.get('role')}) changed on round trip"
            assert original == snapshot  # reading never mutates the input
            roles.add(message.role)
            count += 1
    assert count > 900 and roles == {"user", "assistant", "toolResult"}


SYNTHETIC = [
    {"role": "user", "content": "plain", "timestamp": 1},
    {
        "role": "user",
        "content": [{"type": "text", "text": "hi"}, {"type": "image", "data": "aGk=", "mimeType": "image/png"}],
        "timestamp": 2,
    },
    {"role": "system", "content": "guidance", "timestamp": 3},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "hmm", "thinkingSignature": "sig"},
            {"type": "thinking", "thinking": "", "thinkingSignature": "opaque", "redacted": True},
            {"type": "text", "text": "answer", "textSignature": "ts"},
            {"type": "toolCall", "id": "c1", "name": "echo", "arguments": {"value": "x"}, "thoughtSignature": "g"},
        ],
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "claude",
        "usage": {
            "input": 1,
            "output": 2,
            "cacheRead": 3,
            "cacheWrite": 4,
            "totalTokens": 10,
            "cost": {"input": 0.1, "output": 0.2, "cacheRead": 0.3, "cacheWrite": 0.4, "total": 1.0},
        },
        "stopReason": "toolUse",
        "timestamp": 4,
        "responseId": "kept-as-extra",
    },
    {
        "role": "assistant",
        "content": [],
        "api": "x",
        "provider": "y",
        "model": "z",
        "usage": {
            "input": 0,
            "output": 0,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": 0,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
        },
        "stopReason": "error",
        "errorMessage": "boom",
        "timestamp": 5,
    },
    {
        "role": "toolResult",
        "toolCallId": "c1",
        "toolName": "echo",
        "content": [{"type": "text", "text": "ok"}],
        "details": {"value": "x"},
        "isError": False,
        "addedToolNames": ["more"],
        "timestamp": 6,
    },
    {
        "role": "toolResult",
        "toolCallId": "c2",
        "toolName": "echo",
        "content": [],
        "details": None,
        "isError": True,
        "timestamp": 7,
    },
    {
        "role": "bashExecution",
        "command": "ls",
        "output": "a\nb",
        "exitCode": 0,
        "cancelled": False,
        "truncated": True,
        "fullOutputPath": "/tmp/out",
        "timestamp": 8,
    },
    {"role": "compactionSummary", "summary": "earlier", "tokensBefore": 1234, "timestamp": 9},
    {"role": "branchSummary", "summary": "elsewhere", "fromId": "abc", "timestamp": 10},
    {"role": "custom", "customType": "note", "content": "shown", "display": True, "details": {"k": 1}, "timestamp": 11},
    {"role": "notification", "anything": [1, 2], "timestamp": 12},
]


@pytest.mark.parametrize("data", SYNTHETIC, ids=lambda d: d["role"])
def test_every_message_type_round_trips(data):  # agent-loop §1.4, §1.5
    message = message_from_dict(copy.deepcopy(data))
    assert message.role == data["role"]
    assert message.to_dict() == data
    assert message_to_dict(message) == data
    assert json.loads(json.dumps(message.to_dict())) == data


def test_typed_attributes_after_reading():  # DESIGN §3 snake_case attributes
    assistant = message_from_dict(SYNTHETIC[3])
    assert isinstance(assistant, AssistantMessage)
    thinking, redacted, text, call = assistant.content
    assert isinstance(thinking, ThinkingContent) and thinking.thinking_signature == "sig"
    assert redacted.redacted is True
    assert isinstance(text, TextContent) and text.text_signature == "ts"
    assert isinstance(call, ToolCall) and call.arguments == {"value": "x"} and call.thought_signature == "g"
    assert assistant.usage.cache_read == 3 and assistant.usage.cost.total == 1.0
    assert assistant.stop_reason == "toolUse" and assistant.tool_calls == [call] and assistant.text == "answer"
    result = message_from_dict(SYNTHETIC[5])
    assert isinstance(result, ToolResultMessage) and result.added_tool_names == ["more"] and not result.is_error
    assert isinstance(message_from_dict(SYNTHETIC[-1]), UnknownMessage)
    image = message_from_dict(SYNTHETIC[1]).content[1]
    assert isinstance(image, ImageContent) and image.mime_type == "image/png"


def test_constructed_messages_write_reference_keys():  # agent-loop §1.4
    message = ToolResultMessage("c1", "echo", [TextContent("ok")], is_error=False, timestamp=5)
    assert message.to_dict() == {
        "role": "toolResult",
        "toolCallId": "c1",
        "toolName": "echo",
        "content": [{"type": "text", "text": "ok"}],
        "isError": False,
        "timestamp": 5,
    }
    user = UserMessage("hi", timestamp=1)
    assert user.to_dict() == {"role": "user", "content": "hi", "timestamp": 1}
    usage = Usage(1, 2, 3, 4, 10, UsageCost(total=0.5)).to_dict()
    assert usage["cacheWrite"] == 4 and usage["totalTokens"] == 10 and usage["cost"]["total"] == 0.5


def test_malformed_messages_are_reported():  # STYLE: errors name the problem
    with pytest.raises(ValueError, match="role"):
        message_from_dict({"content": "x"})
    with pytest.raises(ValueError, match="JSON object"):
        message_from_dict(["not", "a", "dict"])
    with pytest.raises(ValueError, match="toolResult"):
        message_from_dict({"role": "toolResult"})


def test_model_round_trip_and_placeholder():  # agent-loop §1.6
    model = Model(
        id="m",
        api="openai-completions",
        provider="local",
        base_url="http://127.0.0.1:1/v1",
        cost=ModelCost(input=1.0),
        input=["text", "image"],
    )
    again = Model.from_dict(model.to_dict())
    assert again == model and again.key == "local/m" and again.name == "m"
    placeholder = Model.placeholder()
    assert (placeholder.id, placeholder.api, placeholder.provider, placeholder.base_url) == ("unknown",) * 3 + ("",)
    assert placeholder.input == () and placeholder.context_window == 0 and placeholder.max_tokens == 0


def test_enum_values_are_the_reference_strings():  # DESIGN §3
    assert [v.value for v in ThinkingLevel] == ["off", "minimal", "low", "medium", "high", "xhigh", "max"]
    assert [v.value for v in ToolExecutionMode] == ["sequential", "parallel"]
    assert [v.value for v in QueueMode] == ["one-at-a-time", "all"]
    assert {"stop", "length", "toolUse", "error", "aborted"} <= {v.value for v in StopReason}
    assert ThinkingLevel.HIGH == "high" and str(QueueMode.ALL) == "all"


def test_helpers_and_context_copy():  # agent-loop §1.8
    assert role_of({"role": "custom"}) == "custom" and role_of(UserMessage("x")) == "user"
    assert text_of([TextContent("a"), ImageContent("x", "image/png"), {"type": "text", "text": "b"}]) == "ab"
    context = AgentContext("sp", [UserMessage("x")], [])
    clone = context.copy()
    clone.messages.append(UserMessage("y"))
    assert len(context.messages) == 1
    message = AssistantMessage(content=[TextContent("a")])
    copied = message.copy()
    copied.content.append(TextContent("b"))
    assert len(message.content) == 1


# --------------------------------------------------------------------------- converters (§1.5)


def test_default_converter_is_a_role_filter():  # agent-loop §1.5 note, §5 scenario 26
    keep = [UserMessage("u"), AssistantMessage(), ToolResultMessage("c", "t"), SystemMessage("s")]
    drop = [CustomMessage("note", "x"), BashExecutionMessage("ls", "out"), {"role": "notification"}]
    result = default_convert_to_llm(drop[:1] + keep + drop[1:])
    assert len(result) == 4 and all(a is b for a, b in zip(result, keep))


def test_bash_execution_text_format():  # agent-loop §1.5 bash format
    def text(**kw):
        fields = dict(command="ls", output="", exit_code=0, cancelled=False, truncated=False)
        fields.update(kw)
        return convert_message(BashExecutionMessage(timestamp=7, **fields))

    ok = text(output="a.txt")
    assert isinstance(ok, UserMessage) and ok.timestamp == 7
    assert ok.content == [TextContent("Ran `ls`\n```\na.txt\n```")]
    assert text().content[0].text == "Ran `ls`\n(no output)"
    assert text(exit_code=2).content[0].text == "Ran `ls`\n(no output)\n\nCommand exited with code 2"
    assert text(cancelled=True, exit_code=2).content[0].text == "Ran `ls`\n(no output)\n\n(command cancelled)"
    assert text(exit_code=None).content[0].text == "Ran `ls`\n(no output)"
    truncated = text(output="x", truncated=True, full_output_path="/tmp/full")
    assert truncated.content[0].text == "Ran `ls`\n```\nx\n```\n\n[Output truncated. Full output: /tmp/full]"
    assert text(output="x", truncated=True).content[0].text == "Ran `ls`\n```\nx\n```"
    assert convert_message(BashExecutionMessage("ls", "x", exclude_from_context=True)) is DROP


def test_custom_and_summary_conversion():  # agent-loop §1.5 table
    images = [TextContent("see"), ImageContent("aGk=", "image/png")]
    assert convert_message(CustomMessage("note", "hello", timestamp=3)).content == [TextContent("hello")]
    assert convert_message(CustomMessage("note", images)).content == images
    compaction = convert_message(CompactionSummaryMessage("S1", 100, timestamp=4)).content[0].text
    assert compaction == COMPACTION_SUMMARY_PREFIX + "S1" + COMPACTION_SUMMARY_SUFFIX
    assert compaction.endswith("<summary>\nS1\n</summary>")
    branch = convert_message(BranchSummaryMessage("S2", "id1")).content[0].text
    assert branch == BRANCH_SUMMARY_PREFIX + "S2" + BRANCH_SUMMARY_SUFFIX
    assert branch.endswith("<summary>\nS2</summary>")  # upstream asymmetry: no newline before the tag


# agent-loop §1.5: the rich converter never raises; a summary message whose summary is null
# (a hand-written or older session) converts to the preamble with an empty summary.
def test_summary_messages_with_null_summary_convert() -> None:
    from agentcore.messages import (
        BRANCH_SUMMARY_PREFIX,
        BRANCH_SUMMARY_SUFFIX,
        COMPACTION_SUMMARY_PREFIX,
        COMPACTION_SUMMARY_SUFFIX,
        convert_to_llm,
    )

    out = convert_to_llm(
        [
            {"role": "compactionSummary", "summary": None, "timestamp": 1},
            {"role": "branchSummary", "summary": None, "timestamp": 2},
        ]
    )
    assert [m.content[0].text for m in out] == [
        COMPACTION_SUMMARY_PREFIX + COMPACTION_SUMMARY_SUFFIX,
        BRANCH_SUMMARY_PREFIX + BRANCH_SUMMARY_SUFFIX,
    ]


def test_rich_converter_keeps_order_and_identity():  # agent-loop §1.5
    user = UserMessage("u")
    dict_custom = {"role": "custom", "customType": "x", "content": "from dict", "display": False}
    result = convert_to_llm([user, {"role": "notification"}, dict_custom, UnknownMessage("weird")])
    assert result[0] is user and len(result) == 2
    assert result[1].content == [TextContent("from dict")]
    assert repr(DROP) == "DROP" and not DROP


def test_model_repr_never_shows_header_values():  # secrets stay out of reprs
    from agentcore.types import Model

    model = Model(id="m", api="openai-completions", provider="p", headers={"Authorization": "Bearer sk-secret-123"})
    assert "sk-secret-123" not in repr(model)
    assert model.to_dict()["headers"] == {"Authorization": "Bearer sk-secret-123"}  # still serialisable


def test_model_repr_masks_credentials_in_the_base_url():  # a proxy URL with user:key or ?key=
    from agentcore.types import Model

    model = Model(
        id="m", api="openai-completions", provider="p", base_url="https://me:sk-inurl-42@proxy/v1?key=k-99&v=2"
    )
    shown = repr(model)
    assert "sk-inurl-42" not in shown and "k-99" not in shown
    assert "base_url='https://me:***@proxy/v1?key=***&v=2'" in shown and shown.startswith("Model(id='m', name='m',")
    assert model.base_url == "https://me:sk-inurl-42@proxy/v1?key=k-99&v=2"  # only the repr masks it
    plain = Model(id="m", api="openai-completions", provider="p", base_url="http://127.0.0.1:8080/v1")
    assert "base_url='http://127.0.0.1:8080/v1'" in repr(plain)
    # the words error messages mask, "sig" (an Azure SAS signature, a presigned URL) included
    signed = Model(id="m", api="openai-completions", provider="p", base_url="https://h/v1?sig=SEKRET1&signature=S2")
    assert "SEKRET1" not in repr(signed) and "S2" not in repr(signed)


def test_user_message_text_like_assistant_text():  # issue 10 item 13
    assert UserMessage("plain string").text == "plain string"
    blocks = UserMessage([TextContent("a"), ImageContent("AAAA", "image/png"), TextContent("b")])
    assert blocks.text == "ab"
    assert (
        UserMessage.from_dict({"role": "user", "content": [{"type": "text", "text": "x"}], "timestamp": 1}).text == "x"
    )


def test_response_fields_and_diagnostics_round_trip():  # issue 17: reference 0.73 AssistantMessage
    data = {
        "role": "assistant",
        "content": [{"type": "text", "text": "hi"}],
        "api": "openai-completions",
        "provider": "openrouter",
        "model": "openrouter/auto",
        "usage": {
            "input": 1,
            "output": 2,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": 3,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
        },
        "stopReason": "error",
        "timestamp": 7,
        "responseId": "gen-123",
        "responseModel": "anthropic/claude-sonnet-4",
        "errorMessage": "boom",
        "diagnostics": [
            {"type": "provider_error", "timestamp": 8, "error": {"name": "Error", "message": "boom"}, "details": {}},
            {"type": "future", "timestamp": 9, "newKey": [1]},
        ],
    }
    message = message_from_dict(copy.deepcopy(data))
    assert (message.response_id, message.response_model) == ("gen-123", "anthropic/claude-sonnet-4")
    first, second = message.diagnostics
    assert isinstance(first, Diagnostic) and first.error == {"name": "Error", "message": "boom"}
    assert second.type == "future" and second.details is None
    assert message.to_dict() == data
    assert json.dumps(message.to_dict()) == json.dumps(data)  # same key order as the reference writes


def test_new_assistant_fields_are_absent_by_default():  # issue 17: old session files stay byte-identical
    message = AssistantMessage(content=[TextContent("x")], timestamp=1)
    assert not {"responseId", "responseModel", "diagnostics"} & set(message.to_dict())
    message.diagnostics = [Diagnostic("stream_recovery", timestamp=2, details={"skipped": 1})]
    assert message.to_dict()["diagnostics"] == [{"type": "stream_recovery", "timestamp": 2, "details": {"skipped": 1}}]


def test_model_thinking_level_map_round_trips_with_null_levels():  # issue 17: Model.thinking_level_map
    data = Model(id="m", api="openai-completions", provider="p").to_dict()
    assert "thinkingLevelMap" not in data
    data["thinkingLevelMap"] = {"off": None, "minimal": None, "low": "low", "xhigh": "max"}
    model = Model.from_dict(data)
    assert model.thinking_level_map == {"off": None, "minimal": None, "low": "low", "xhigh": "max"}
    assert model.to_dict() == data


def test_add_usage_sums_reports_and_wire_dicts_and_skips_what_is_not_a_number():
    from agentcore.types import add_usage

    total = Usage(1, 2, 3, 4, 10, UsageCost(0.1, 0.2, 0.3, 0.4, 1.0))
    assert add_usage(total, Usage(10, 20, 0, 0, 30, UsageCost(1.0, 2.0, 0, 0, 3.0))) is total
    stored = {"input": 100, "output": 200, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 300, "cost": None}
    add_usage(total, stored)  # a recorded null cost: the tokens count
    add_usage(total, None)
    add_usage(total, {"input": "7", "output": True, "totalTokens": None})  # a hand-edited file: nothing
    assert (total.input, total.output, total.cache_read, total.cache_write, total.total_tokens) == (111, 222, 3, 4, 340)
    assert total.cost.total == pytest.approx(4.0) and total.cost.input == pytest.approx(1.1)


# --------------------------------------------------------------------------- review: decoding edge cases


def test_image_repr_shows_the_size_not_the_base64_data():  # reprs never carry an image's data
    image = ImageContent("QUJD" * 250_000, "image/png")  # a 1 MB screenshot
    assert repr(image) == "ImageContent(data=<1000000 characters>, mime_type='image/png')"
    message = UserMessage([TextContent("see"), image], timestamp=1)
    assert "QUJDQUJD" not in repr(message) and len(repr(message)) < 200
    assert message.to_dict()["content"][1]["data"] == image.data  # only the repr leaves it out


def test_missing_required_keys_are_named_by_their_json_key():  # STYLE: errors name the problem
    with pytest.raises(ValueError, match=r"^malformed 'toolResult' message: the required key 'toolName' is missing$"):
        message_from_dict({"role": "toolResult", "toolCallId": "c1", "content": [], "isError": False, "timestamp": 1})
    assistant = copy.deepcopy(SYNTHETIC[3])
    del assistant["content"][3]["id"]
    with pytest.raises(ValueError, match=r"content\[3\]: a 'toolCall' block: the required key 'id' is missing$"):
        message_from_dict(assistant)
    user = {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image", "mimeType": "image/png"}]}
    with pytest.raises(ValueError, match=r"content\[1\]: an 'image' block: the required key 'data' is missing$"):
        message_from_dict(user)
    with pytest.raises(ValueError, match=r"^a 'text' block: the required key 'text' is missing$"):
        TextContent.from_dict({"type": "text"})  # a plugin's block: ValueError, not a bare TypeError


def test_a_block_whose_type_is_not_a_string_is_kept_as_an_unknown_block():  # spec §1: unknown blocks kept
    data = {"role": "user", "content": [{"type": ["text"], "text": "x"}, {"type": 5}], "timestamp": 1}
    message = message_from_dict(copy.deepcopy(data))
    assert message.content == data["content"] and message.to_dict() == data


def test_values_set_after_reading_are_written():  # nothing is lost: absent keys stay absent only unchanged
    assistant = message_from_dict(copy.deepcopy(SYNTHETIC[4]))  # read without responseId or diagnostics
    result = message_from_dict(
        {"role": "toolResult", "toolCallId": "c", "toolName": "t", "content": [], "isError": False, "timestamp": 1}
    )
    call = ToolCall.from_dict({"type": "toolCall", "id": "c", "name": "n", "arguments": {}})
    thinking = ThinkingContent.from_dict({"type": "thinking", "thinking": "x"})
    assert message_from_dict({"role": "user", "content": "x"}).to_dict() == {"role": "user", "content": "x"}
    assistant.response_id = "resp-1"
    assistant.diagnostics = [Diagnostic("stream_recovery", timestamp=2)]
    result.details = {"diff": "+x"}
    result.usage = Usage(1, 2, 0, 0, 3)
    call.thought_signature = "g"
    thinking.thinking_signature = "sig"
    assert assistant.to_dict()["responseId"] == "resp-1"
    assert assistant.to_dict()["diagnostics"] == [{"type": "stream_recovery", "timestamp": 2}]
    assert result.to_dict()["details"] == {"diff": "+x"} and result.to_dict()["usage"]["totalTokens"] == 3
    assert call.to_dict()["thoughtSignature"] == "g" and thinking.to_dict()["thinkingSignature"] == "sig"
    partial = message_from_dict({"role": "bashExecution", "command": "ls", "output": "", "timestamp": 1})
    partial.exit_code, partial.cancelled = 130, True
    assert partial.to_dict() == {
        "role": "bashExecution",
        "command": "ls",
        "output": "",
        "exitCode": 130,
        "cancelled": True,
        "timestamp": 1,
    }


def test_text_of_a_null_text_block_is_empty():  # a hand-edited block: not the word "None"
    assert text_of([{"type": "text", "text": None}, {"type": "text", "text": "a"}, {"type": "text"}]) == "a"


def test_text_of_a_string_content_is_that_string():  # another writer's assistant/tool-result shape
    base = copy.deepcopy(SYNTHETIC[4])
    base["content"] = "plain answer"
    assert message_from_dict(base).text == "plain answer"
    result = {"role": "toolResult", "toolCallId": "c", "toolName": "t", "content": "out", "isError": False}
    assert message_from_dict(result).text == "out"


def test_custom_message_dict_blocks_become_block_objects_for_the_model():  # agent-loop §1.5 custom
    image = {"type": "image", "data": "aGk=", "mimeType": "image/png"}
    custom = {"role": "custom", "customType": "memo", "content": [{"type": "text", "text": "remember"}, image]}
    converted = convert_message(custom)  # e.g. added by a transform_context plugin
    assert converted.content == [TextContent("remember"), ImageContent("aGk=", "image/png")]
    odd = convert_message({"role": "custom", "content": [{"type": "text"}, {"type": "audio"}]})
    assert odd.content == [{"type": "text"}, {"type": "audio"}]  # converters never raise
    from agentcore.providers.openai_completions import convert_messages

    sent = convert_messages(Model(id="m", api="openai-completions", provider="p"), AgentContext("", [converted]), {})
    assert sent == [{"role": "user", "content": "remember"}]  # the model sees it (images: not declared)


def test_event_to_dict_survives_reference_cycles():  # event_to_dict never fails
    from agentcore.events import MessageEndEvent, ToolExecutionEndEvent, ToolExecutionStartEvent, event_to_dict
    from agentcore.tools import AgentToolResult

    tree: dict = {"name": "root", "children": []}
    tree["children"].append({"name": "leaf", "parent": tree})  # a tool's details with back references
    loop: list = [1]
    loop.append(loop)
    events = [
        ToolExecutionStartEvent("c", "t", {"items": loop}),
        ToolExecutionEndEvent("c", "t", AgentToolResult(content=[TextContent("ok")], details=tree)),
        MessageEndEvent(ToolResultMessage("c", "t", [TextContent("ok")], details=tree, timestamp=1)),
    ]
    start, end, message = [json.loads(json.dumps(event_to_dict(e), allow_nan=False)) for e in events]
    assert start["args"] == {"items": [1, "<cycle>"]}
    assert end["result"]["details"]["children"][0] == {"name": "leaf", "parent": "<cycle>"}
    assert message["message"]["content"] == [{"type": "text", "text": "ok"}]
    assert message["message"]["details"]["children"][0]["parent"] == "<cycle>"


def test_a_reference_cycle_is_found_far_from_the_recursion_limit():  # event_to_dict, session appends
    """A message whose tool details hold a cycle was recognised by running into the interpreter's
    recursion limit: whatever ran down there (a finalizer the garbage collector started, a
    ``to_dict`` of an object in the cycle) failed for want of stack, and pytest reported an
    "Exception ignored in ..." from an unrelated object now and then. The walk now stops the
    cycle within a few dozen levels."""
    import sys

    from agentcore.events import MessageEndEvent, event_to_dict

    depths = []

    class Probe:
        def to_dict(self):
            frame, depth = sys._getframe(), 0
            while frame is not None:
                frame, depth = frame.f_back, depth + 1
            depths.append(depth)
            return {"probe": True}

    cycle: dict = {"probe": Probe()}
    cycle["self"] = cycle
    message = ToolResultMessage("c", "t", [TextContent("ok")], details=cycle, timestamp=1)
    with pytest.raises(RecursionError, match="reference cycle"):
        message.to_dict()
    data = json.loads(json.dumps(event_to_dict(MessageEndEvent(message)), allow_nan=False))
    assert data["message"]["details"] == {"probe": {"probe": True}, "self": "<cycle>"}
    assert max(depths) < sys.getrecursionlimit() // 2, max(depths)
    from agentcore import Session, SessionError

    with pytest.raises(SessionError, match="the entry holds a reference cycle; the entry was not recorded"):
        Session.in_memory().append_message(message)


def test_event_to_dict_of_an_integer_too_long_for_decimal_still_dumps():  # event_to_dict never fails
    """A calculator tool's ``2**20000`` in its details passed through ``json_safe``, and the
    ``json.dumps`` of ``agentcore run --json`` then failed (Python writes at most 4300 digits)."""
    from agentcore.events import ToolExecutionEndEvent, event_to_dict
    from agentcore.tools import AgentToolResult

    event = ToolExecutionEndEvent(
        "c", "calc", AgentToolResult(content=[TextContent("big")], details={"n": 2**20000, "m": 7})
    )
    shown = json.loads(json.dumps(event_to_dict(event)))
    assert shown["result"]["details"] == {"n": "<integer of 20001 bits>", "m": 7}


def test_json_safe_writes_dates_uuids_paths_and_decimals_as_their_text():
    """A tool's ``details`` holding a date went into the session (and ``run --json``) as its
    repr, ``"datetime.date(2026, 1, 2)"``: no reader could use it, and the ``@tool`` arguments of
    those types take the ISO/canonical text."""
    import datetime
    import decimal
    import pathlib
    import uuid

    from agentcore._safe import json_safe

    when = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
    value = {
        "when": when,
        "day": when.date(),
        "at": datetime.time(15, 4),
        "ref": uuid.UUID(int=5),
        "path": pathlib.PurePosixPath("/srv/data"),
        "amount": decimal.Decimal("12.30"),
    }
    assert json_safe(value) == {
        "when": "2026-01-02T03:04:05+00:00",
        "day": "2026-01-02",
        "at": "15:04:00",
        "ref": "00000000-0000-0000-0000-000000000005",
        "path": "/srv/data",
        "amount": "12.30",
    }


# --------------------------------------------------------------------------- review: -o values


def test_cli_timeout_pair_refuses_a_boolean():  # STYLE: bad input gets a clear error
    from agentcore.options import parse_cli_option

    with pytest.raises(ValueError, match=r"^-o/--option timeout '\[1, true\]': expected seconds or \[connect, read\]"):
        parse_cli_option("timeout", "[1, true]")  # was accepted as (1.0, 1.0)
    assert parse_cli_option("timeout", "[5, 60]") == ("timeout", (5.0, 60.0))
    # the options -o cannot set say why in a sentence ("reasoning use --thinking LEVEL" did not)
    with pytest.raises(
        ValueError, match=r"^-o/--option reasoning: reasoning is set from the thinking level: use --thinking"
    ):
        parse_cli_option("reasoning", "high")
    with pytest.raises(ValueError, match=r"provider_options holds the providers' own options: give each its own name"):
        parse_cli_option("provider_options", "{}")
    deep = "[" * 100_000  # nested past the parser's stack: a clear error, not a RecursionError
    with pytest.raises(ValueError, match=r"^-o/--option metadata .*expected a JSON object \(JSON nested too deeply\)"):
        parse_cli_option("metadata", deep)
    assert parse_cli_option("region", deep, lambda: {"region": "AWS region"}) == ("region", deep)  # a word


def test_cli_declared_option_booleans_in_any_case_and_null_refused():  # -o NAME VALUE of a provider's option
    from agentcore.options import parse_cli_option

    def declared():
        return {"interleaved_thinking": "Claude's interleaved thinking (default true)", "region": "AWS region"}

    assert parse_cli_option("interleaved_thinking", "False", declared) == ("interleaved_thinking", False)
    assert parse_cli_option("interleaved-thinking", " TRUE ", declared) == ("interleaved_thinking", True)
    assert parse_cli_option("interleaved_thinking", "false", declared) == ("interleaved_thinking", False)
    assert parse_cli_option("region", "eu-west-1", declared) == ("region", "eu-west-1")
    assert parse_cli_option("region", '"null"', declared) == ("region", "null")  # JSON still says a word
    with pytest.raises(ValueError, match=r"^-o/--option region 'null': null is no value"):
        parse_cli_option("region", "null", declared)  # was None: silently not set


def test_add_usage_skips_nan_and_infinity_and_fills_a_null_total_cost():  # nothing is lost: sums stay numbers
    from agentcore.types import add_usage

    total = Usage(1, 1, 0, 0, 2, UsageCost(0.5, 0, 0, 0, 0.5))
    odd = {
        "input": float("nan"),
        "output": 3,
        "totalTokens": float("inf"),
        "cost": {"total": float("nan"), "input": 1.0},
    }
    add_usage(total, odd)  # a session line written with NaN (Python's json reads it back)
    assert (total.input, total.output, total.total_tokens) == (1, 4, 2)
    assert (total.cost.total, total.cost.input) == (0.5, 1.5)
    read = message_from_dict({**copy.deepcopy(SYNTHETIC[4])}).usage
    read.cost = None  # a recorded null cost
    add_usage(read, Usage(1, 1, 0, 0, 2, UsageCost(0.1, 0.2, 0, 0, 0.3)))  # was AttributeError on None
    assert read.cost.total == pytest.approx(0.3)
    assert add_usage(Usage(), {"input": 2**20000}).input == 2**20000  # a huge int: no OverflowError

"""Compaction: token accounting, cut points, preparation and summary generation (spec session.md §7,
§12 H and I), then the Agent integration (manual, threshold, overflow, long runs) and the issue 6
gaps (before_compaction hook, continue_ threshold, length stops, entry-order staleness, cost)."""

from __future__ import annotations

from typing import Any, List, Optional

import pluggy
import pytest

from agentcore import hookspecs
from agentcore.hookspecs import hookimpl
from agentcore.session import Session, SessionError
from agentcore.session.compaction import (
    CompactionError,
    CutPoint,
    compact,
    find_cut_point,
    find_turn_start_index,
    generate_summary,
    path_context_messages,
    prepare_compaction,
)
from agentcore.session.compaction_prompts import (
    SUMMARIZER_SYSTEM_PROMPT,
    FileOps,
    compute_file_lists,
    format_file_lists,
    serialize_conversation,
)
from agentcore.session.compaction_tokens import (
    CompactionSettings,
    calculate_context_tokens,
    estimate_context_tokens,
    estimate_tokens,
    get_last_assistant_usage,
    live_context_tokens,
    should_compact,
)
from agentcore.session.entries import (
    BranchSummaryEntry,
    CompactionEntry,
    CustomMessageEntry,
    MessageEntry,
    ModelChangeEntry,
    ThinkingLevelChangeEntry,
)
from agentcore.testing import ScriptedModel, error, text
from agentcore.types import (
    AssistantMessage,
    BashExecutionMessage,
    ImageContent,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    message_from_dict,
)

TS = "2025-01-01T00:00:00.000Z"


# --------------------------------------------------------------------------- builders (spec §12 notation)


def U(t: str, timestamp: int = 1) -> UserMessage:
    return UserMessage([TextContent(t)], timestamp=timestamp)


def A(
    t: str = "",
    inp: int = 0,
    out: int = 0,
    cache_read: int = 0,
    cache_write: int = 0,
    total: int = 0,
    stop: str = "stop",
    content: Optional[List[Any]] = None,
    timestamp: int = 1,
) -> AssistantMessage:
    return AssistantMessage(
        content if content is not None else [TextContent(t)],
        api="anthropic-messages",
        provider="anthropic",
        model="claude-sonnet-4-5",
        usage=Usage(inp, out, cache_read, cache_write, total),
        stop_reason=stop,
        timestamp=timestamp,
    )


class Path:
    """Builds a root→leaf list of entries with ids e1, e2, ..."""

    def __init__(self) -> None:
        self.entries: List[Any] = []

    def _next(self) -> tuple:
        parent = self.entries[-1].id if self.entries else None
        return f"e{len(self.entries) + 1}", parent, TS

    def msg(self, message: Any) -> str:
        entry = MessageEntry(*self._next(), message)
        self.entries.append(entry)
        return entry.id

    def add(self, cls: Any, *payload: Any, **kw: Any) -> str:
        entry = cls(*self._next(), *payload, **kw)
        self.entries.append(entry)
        return entry.id


def model(max_tokens: int = 16384, reasoning: bool = False, window: int = 200000) -> Model:
    return Model(
        id="summarizer",
        api="scripted",
        provider="scripted",
        reasoning=reasoning,
        context_window=window,
        max_tokens=max_tokens,
    )


def prompt_of(scripted: ScriptedModel, index: int = -1) -> str:
    return scripted.contexts[index].messages[0].content[0].text


# --------------------------------------------------------------------------- H. pure functions


def test_calculate_context_tokens():  # session §12 scenario 64
    assert calculate_context_tokens(Usage(1000, 500, 200, 100, 1800)) == 1800
    assert calculate_context_tokens(Usage(1000, 500, 200, 100, 0)) == 1800
    assert calculate_context_tokens(Usage()) == 0
    assert calculate_context_tokens({"input": 1, "output": 2, "cacheRead": 3, "cacheWrite": 4}) == 10


def test_should_compact_is_strict_and_switchable():  # session §12 scenario 65
    settings = CompactionSettings(reserve_tokens=10000)
    assert should_compact(95000, 100000, settings)
    assert not should_compact(89000, 100000, settings)
    assert not should_compact(90000, 100000, settings)
    assert not should_compact(95000, 100000, CompactionSettings(enabled=False, reserve_tokens=10000))


def test_a_reserve_as_large_as_the_window_compacts_at_half_the_window():  # session §7.1 settings vs the model
    settings = CompactionSettings()  # reserve 16384: more than a small model's whole window
    assert not should_compact(1, 8000, settings)  # not "compact before every request"
    assert not should_compact(4000, 8000, settings)
    assert should_compact(4001, 8000, settings)
    assert should_compact(8193, 16384, settings) and not should_compact(8192, 16384, settings)


def test_get_last_assistant_usage_skips_failed_and_empty():  # session §12 scenario 66
    assert get_last_assistant_usage([U("a"), A(inp=100, out=50), U("b"), A(inp=200, out=100)]).input == 200
    assert get_last_assistant_usage([U("a"), A(inp=100, out=50), A(inp=200, stop="aborted")]).input == 100
    assert get_last_assistant_usage([A(inp=1, stop="aborted"), A(inp=2, stop="error")]) is None
    assert get_last_assistant_usage([A(inp=100, out=1), A("tail")]).input == 100
    assert get_last_assistant_usage([U("only")]) is None


def test_estimate_tokens_per_role():  # session §12 scenario 67
    assert estimate_tokens(U("plain user")) == 3
    call = ToolCall("c1", "read", {"path": "file.ts"})
    assert estimate_tokens(A(content=[ThinkingContent("thinking"), call])) == 8
    result = ToolResultMessage("c1", "read", [TextContent("tool text"), ImageContent("aGk=", "image/png")])
    assert estimate_tokens(result) == 1203
    assert estimate_tokens(BashExecutionMessage("npm run check", "ok")) == 4
    assert estimate_tokens(message_from_dict({"role": "mystery", "content": "x" * 400})) == 0
    assert estimate_tokens(message_from_dict({"role": "developer", "content": "12345678"})) == 2
    assert estimate_tokens(U("\U0001f600" * 2)) == 1  # UTF-16 code units, as the reference counts


def test_token_figures_of_message_objects_match_their_reference_dicts():
    """The exact-type fast paths for the usual messages and Usage give the figures of the generic
    reads (the reference JSON dicts, and subclasses, take those)."""
    from agentcore.session.compaction_tokens import ContextTokenCounter, _valid_usage, usage_tokens
    from agentcore.types import message_to_dict

    class MyUsage(Usage):
        pass

    class MyAssistant(AssistantMessage):
        pass

    call = ToolCall("c1", "edit", {"path": "caf\u00e9.py", "n": 1.5, "nested": [1, {"x": None}]})
    messages = [
        U("plain user"),
        UserMessage("a string prompt \U0001f600"),
        UserMessage([TextContent("look"), ImageContent("aGk=", "image/png")]),
        A("answer", inp=100, out=50, total=150),
        A("parts only", inp=100, out=50, cache_read=7, cache_write=3),  # total 0: the sum of parts
        A(content=[ThinkingContent("hmm"), call], total=99),
        A("failed", inp=10, stop="error"),
        A("stopped", inp=10, stop="aborted"),
        AssistantMessage([TextContent("no usage")], usage=None),
        ToolResultMessage("c1", "edit", [TextContent("done " * 30)]),
        ToolResultMessage("c1", "edit", [TextContent("x")], is_error=True),
    ]
    for message in messages:
        as_dict = message_to_dict(message)
        assert estimate_tokens(message) == estimate_tokens(as_dict), message
        usage = _valid_usage(message)
        assert (usage is None) == (_valid_usage(as_dict) is None), message
        if usage is not None:
            assert usage_tokens(usage) == usage_tokens(message_to_dict(message)["usage"]) > 0
    assert usage_tokens(Usage(1, 2, 3, 4, 0)) == usage_tokens(MyUsage(1, 2, 3, 4, 0)) == 10
    assert usage_tokens(Usage(1, 2, 3, 4, -5)) == usage_tokens({"input": 1, "totalTokens": -5}) == -5
    sub = MyAssistant([TextContent("sub")], usage=Usage(5, 5, 0, 0, 10))
    assert estimate_tokens(sub) == estimate_tokens(AssistantMessage([TextContent("sub")])) == 1
    assert usage_tokens(_valid_usage(sub)) == 10
    objects, dicts = ContextTokenCounter(), ContextTokenCounter()
    assert objects.estimate(messages) == dicts.estimate([message_to_dict(m) for m in messages])


def test_estimate_context_tokens():  # session §12 scenario 68
    assert estimate_context_tokens([U("no usage")]).last_usage_index is None
    est = estimate_context_tokens([A(inp=10, out=5, cache_read=3, cache_write=2, total=20), U("tail")])
    assert (est.usage_tokens, est.last_usage_index, est.tokens) == (20, 0, 21)
    est = estimate_context_tokens(
        [U("Hello"), A(total=20), U("continue"), A(content=[ThinkingContent("Partial thinking")])]
    )
    assert (est.usage_tokens, est.last_usage_index, est.trailing_tokens, est.tokens) == (20, 1, 6, 26)


def test_live_context_tokens_ignores_usage_from_before_the_compaction():  # session §13 pitfall 3
    from agentcore.types import CompactionSummaryMessage

    kept = A("kept answer", total=90000, timestamp=100)
    messages = [
        CompactionSummaryMessage("S", 90000, timestamp=200),
        U("kept", timestamp=50),
        kept,
        U("new", timestamp=300),
    ]
    assert estimate_context_tokens(messages).tokens > 90000
    live = live_context_tokens(messages)
    assert live.last_usage_index is None and live.tokens == sum(estimate_tokens(m) for m in messages)
    messages.append(A("fresh", total=500, timestamp=400))
    assert live_context_tokens(messages).tokens == 500


def test_find_cut_point_without_valid_cut():  # session §12 scenario 69
    p = Path()
    p.add(ThinkingLevelChangeEntry, "high")
    p.add(ModelChangeEntry, "openai", "gpt-4")
    cut = find_cut_point(p.entries, 0, 2, 1)
    assert (cut.first_kept_entry_index, cut.turn_start_index, cut.is_split_turn) == (0, -1, False)


def test_find_turn_start_index():  # session §12 scenario 69
    p = Path()
    p.add(ThinkingLevelChangeEntry, "high")
    p.add(BranchSummaryEntry, "root", "s")
    assert find_turn_start_index(p.entries, 1, 0) == 1
    q = Path()
    q.add(ThinkingLevelChangeEntry, "high")
    q.add(CustomMessageEntry, "note", "hello", True)
    assert find_turn_start_index(q.entries, 1, 0) == 1
    r = Path()
    r.add(ThinkingLevelChangeEntry, "high")
    r.add(ModelChangeEntry, "openai", "gpt-4")
    assert find_turn_start_index(r.entries, 1, 0) == -1


def test_find_cut_point_edge_cases():  # session §12 scenario 70
    p = Path()
    p.add(ThinkingLevelChangeEntry, "high")
    p.add(BranchSummaryEntry, "root", "s")
    p.add(CustomMessageEntry, "note", "hello", True)
    assert find_cut_point(p.entries, 0, 3, 1).first_kept_entry_index == 0

    q = Path()
    q.msg(U("u"))
    q.msg(A("a"))
    q.msg(message_from_dict({"role": "developer", "content": "be brief"}))
    cut = find_cut_point(q.entries, 0, 3, 1)
    assert (cut.first_kept_entry_index, cut.turn_start_index, cut.is_split_turn) == (2, -1, False)

    r = Path()
    r.msg(ToolResultMessage("c1", "read", [TextContent("x")]))
    cut = find_cut_point(r.entries, 0, 1, 1)
    assert (cut.first_kept_entry_index, cut.turn_start_index, cut.is_split_turn) == (0, -1, False)

    s = Path()
    first = s.msg(U("u"))
    s.add(CompactionEntry, "summary", first, 10)
    s.msg(A("a"))
    assert find_cut_point(s.entries, 0, 3, 1).first_kept_entry_index == 2


def test_cut_lands_on_user_or_assistant_and_budget_keeps_all():  # session §12 scenario 71
    p = Path()
    for i in range(10):
        p.msg(U(f"question {i} " + "q" * 800))
        p.msg(A(f"answer {i} " + "a" * 800))
    cut = find_cut_point(p.entries, 0, len(p.entries), 2500)
    kept = p.entries[cut.first_kept_entry_index]
    assert kept.message.role in ("user", "assistant")
    assert 0 < cut.first_kept_entry_index < len(p.entries)
    kept_tokens = sum(estimate_tokens(e.message) for e in p.entries[cut.first_kept_entry_index :])
    assert kept_tokens >= 2500
    q = Path()
    for m in (U("a"), A("b"), U("c"), A("d")):
        q.msg(m)
    assert find_cut_point(q.entries, 0, 4, 50000).first_kept_entry_index == 0


def test_cut_inside_a_turn_is_a_split_turn():  # session §12 scenario 72
    p = Path()
    p.msg(U("Turn 1"))
    p.msg(A("A1 " + "x" * 4000))
    p.msg(U("Turn 2"))
    for i in range(3):
        p.msg(A(f"A2-{i} " + "y" * 4000))
    cut = find_cut_point(p.entries, 0, len(p.entries), 3000)
    assert p.entries[cut.first_kept_entry_index].message.role == "assistant"
    assert cut.is_split_turn and cut.turn_start_index == 2


def test_cut_never_separates_a_tool_call_from_its_result():  # session §7.4 step 4a
    p = Path()
    p.msg(U("go"))
    for i in range(6):
        p.msg(A(content=[ToolCall(f"c{i}", "read", {"path": f"f{i}"})]))
        p.msg(ToolResultMessage(f"c{i}", "read", [TextContent("r" * 2000)]))
    for budget in range(1, 4000, 250):
        cut = find_cut_point(p.entries, 0, len(p.entries), budget)
        assert p.entries[cut.first_kept_entry_index].message.role != "toolResult"


def test_a_custom_message_written_during_a_tool_batch_is_no_cut():  # session §7.4 step 4a, §6 step 6
    s = Session.in_memory()
    s.append_message(U("read both"))
    calls = [ToolCall("c1", "read", {"path": "a.py"}), ToolCall("c2", "read", {"path": "b.py"})]
    s.append_message(A(content=calls, stop="toolUse"))
    s.append_message(ToolResultMessage("c1", "read", [TextContent("A-CONTENT " * 100)]))
    s.append_custom_message("note", "a tool reported progress while c2 ran")
    s.append_message(ToolResultMessage("c2", "read", [TextContent("B-CONTENT " * 100)]))
    s.append_message(A("done"))
    path = s.get_branch()
    for budget in range(781, 0, -20):
        prep = prepare_compaction(path, CompactionSettings(keep_recent_tokens=budget))
        first_kept = prep.first_kept_entry_index
        assert first_kept in (0, 1, 5), budget  # never after the calls and before c2's result
        if first_kept == 5:  # the whole batch is summarised, c2's result included
            summarised = prep.messages_to_summarize + prep.turn_prefix_messages
            assert "B-CONTENT" in serialize_conversation(summarised)
            assert prep.turn_prefix_messages[0].role == "user"  # the turn starts at "read both"


def _compacted_path() -> Path:
    base = 1735689600000  # TS in Unix ms: message times are realistic around the compaction
    p = Path()
    p.msg(U("u1", base + 10))
    p.msg(A("a1", timestamp=base + 20))
    u2 = p.msg(U("u2", base + 30))
    p.msg(A("a2", inp=5000, out=1000, timestamp=base + 40))
    p.entries.append(CompactionEntry("c1", p.entries[-1].id, "2025-01-01T00:00:00.050Z", "First summary", u2, 6000))
    p.msg(U("u3", base + 60))
    p.msg(A("a3", inp=8000, out=2000, timestamp=base + 70))
    return p


def test_prepare_compaction_uses_previous_summary_and_context_tokens():  # session §12 scenario 73
    p = _compacted_path()
    prep = prepare_compaction(p.entries, CompactionSettings())
    assert prep is not None
    assert prep.previous_summary == "First summary"
    assert prep.first_kept_entry_id
    assert prep.tokens_before == estimate_context_tokens(path_context_messages(p.entries)).tokens == 10000


def test_messages_kept_by_a_compaction_are_summarised_by_the_next():  # session §7.4 step 2 (upstream bug fix)
    p = _compacted_path()
    prep = prepare_compaction(p.entries, CompactionSettings(keep_recent_tokens=1))
    texts = [m.content[0].text for m in prep.messages_to_summarize]
    assert texts[:2] == ["u2", "a2"]  # kept by c1, now summarised
    assert "u1" not in texts  # already inside "First summary"


def test_messages_a_compaction_retained_in_its_entry_are_summarised_by_the_next():  # session §6 step 3, §7.4 step 2
    s = Session.in_memory()
    s.append_message(U("old"))
    s.append_compaction("S", None, 5, retained_tail=[U("RETAINED " * 2000), A("answer")])  # a v4 checkpoint
    s.append_message(U("hi"))
    s.append_message(A("hello"))
    prep = prepare_compaction(s.get_branch(), CompactionSettings())  # "hi"/"hello" fit keep_recent_tokens
    assert not prep.empty  # the 4000-token tail is history, not "nothing to compact"
    assert [m.content[0].text[:8] for m in prep.messages_to_summarize] == ["RETAINED", "answer"]
    scripted = ScriptedModel(["the new summary"])
    result = compact(prep, model(), scripted.stream_fn)
    assert "RETAINED" in prompt_of(scripted) and "<previous-summary>\nS\n" in prompt_of(scripted)
    s.append_compaction(result.summary, result.first_kept_entry_id, result.tokens_before, result.details)
    texts = [getattr(m, "summary", None) or m.content[0].text for m in s.build_context().messages]
    assert texts == ["the new summary", "hi", "hello"]


def test_split_turn_with_prior_details():  # session §12 scenario 74
    p = Path()
    u1 = p.msg(U("u1"))
    p.msg(A(content=[ToolCall("w", "write", {"path": "written.ts", "content": "x"})]))
    p.add(CompactionEntry, "summary", u1, 10, {"readFiles": ["old-read.ts"], "modifiedFiles": ["old-edit.ts"]})
    p.msg(U("u2"))
    p.msg(A("a2"))
    prep = prepare_compaction(p.entries, CompactionSettings(reserve_tokens=100, keep_recent_tokens=1))
    assert prep.is_split_turn
    assert [m.role for m in prep.turn_prefix_messages] == ["user"]
    assert "old-read.ts" in prep.file_ops.read
    assert "old-edit.ts" in prep.file_ops.edited
    assert "written.ts" in prep.file_ops.written


def test_hook_written_details_are_not_trusted():  # session §2 fromHook
    p = Path()
    u1 = p.msg(U("u1"))
    p.add(CompactionEntry, "summary", u1, 10, {"readFiles": ["x.ts"]}, True)
    p.msg(U("u2"))
    p.msg(A("a2"))
    prep = prepare_compaction(p.entries, CompactionSettings(keep_recent_tokens=1))
    assert "x.ts" not in prep.file_ops.read


def test_summarised_roles_include_branch_summary_and_custom():  # session §12 scenario 75
    p = Path()
    p.add(BranchSummaryEntry, "root", "branch work")
    p.add(CustomMessageEntry, "note", "hello", True)
    p.msg(U("keep"))
    p.msg(A("a"))
    prep = prepare_compaction(p.entries, CompactionSettings(keep_recent_tokens=1))
    assert [m.role for m in prep.messages_to_summarize] == ["branchSummary", "custom"]


def test_prepare_compaction_nothing_to_do():  # session §12 scenario 76
    p = Path()
    p.msg(U("u"))
    p.add(CompactionEntry, "s", "e1", 1)
    assert prepare_compaction(p.entries, CompactionSettings()) is None
    assert prepare_compaction([], CompactionSettings()) is None
    q = Path()
    q.msg(U("small"))
    prep = prepare_compaction(q.entries, CompactionSettings())
    assert prep is not None and prep.empty


def test_serialize_truncates_long_tool_results():  # session §12 scenario 77
    text = serialize_conversation([ToolResultMessage("c", "bash", [TextContent("z" * 5000)])])
    assert "[Tool result]: " in text and "[... 3000 more characters truncated]" in text


def test_serialize_conversation_layout():  # session §7.5 serialisation
    call = ToolCall("c", "edit", {"path": "a.py", "n": 2})
    text = serialize_conversation(
        [
            U("hi"),
            A(content=[ThinkingContent("hmm"), TextContent("ok"), call]),
            ToolResultMessage("c", "edit", [TextContent("done")]),
            A(""),
        ]
    )
    assert text == (
        "[User]: hi\n\n[Assistant thinking]: hmm\n\n[Assistant]: ok\n\n"
        '[Assistant tool calls]: edit(path="a.py", n=2)\n\n[Tool result]: done'
    )


def test_file_lists():  # session §12 scenario 78
    read, modified = compute_file_lists(FileOps({"a.ts", "b.ts"}, {"c.ts"}, {"b.ts"}))
    assert (read, modified) == (["a.ts"], ["b.ts", "c.ts"])
    assert format_file_lists(read, modified) == (
        "\n\n<read-files>\na.ts\n</read-files>\n\n<modified-files>\nb.ts\nc.ts\n</modified-files>"
    )
    assert format_file_lists([], []) == ""


# --------------------------------------------------------------------------- I. with a scripted model


def test_generate_summary_prompt_shape():  # session §12 scenario 79
    scripted = ScriptedModel(["the summary"])
    out, _ = generate_summary(
        [U("do it"), A("done")],
        model(),
        16384,
        stream_fn=scripted.stream_fn,
        previous_summary="old summary",
        custom_instructions="focus",
    )
    assert out == "the summary"
    prompt = prompt_of(scripted)
    assert prompt.startswith("<conversation>\n[User]: do it\n\n[Assistant]: done\n</conversation>\n\n")
    assert "<previous-summary>\nold summary\n</previous-summary>" in prompt
    assert prompt.endswith("\n\nAdditional focus: focus")
    assert scripted.contexts[0].system_prompt == SUMMARIZER_SYSTEM_PROMPT
    assert scripted.options[0]["max_tokens"] == 13107  # floor(0.8 * 16384)


def test_reasoning_option_only_for_reasoning_models():  # session §12 scenario 80
    for reasoning, level, expected in ((True, "medium", "medium"), (True, "off", None), (False, "medium", None)):
        scripted = ScriptedModel(["s"])
        generate_summary([U("x")], model(reasoning=reasoning), 1000, stream_fn=scripted.stream_fn, thinking_level=level)
        assert scripted.options[0].get("reasoning") == expected


def test_summary_errors_are_mapped():  # session §12 scenario 81
    with pytest.raises(CompactionError) as failed:
        generate_summary([U("x")], model(), 1000, stream_fn=ScriptedModel([error("boom")]).stream_fn)
    assert (failed.value.code, str(failed.value)) == ("summarization_failed", "Summarization failed: boom")
    with pytest.raises(CompactionError) as aborted:
        generate_summary(
            [U("x")], model(), 1000, stream_fn=ScriptedModel([error("stopped", stop_reason="aborted")]).stream_fn
        )
    assert (aborted.value.code, str(aborted.value)) == ("aborted", "stopped")


def _split_preparation(reserve: int) -> Any:
    p = Path()
    p.msg(U("first"))
    p.msg(A("old answer"))
    p.msg(U("second"))
    p.msg(A(content=[ToolCall("c1", "read", {"path": "src/a.py"})]))
    p.msg(ToolResultMessage("c1", "read", [TextContent("content")]))
    p.msg(A("tail " + "t" * 400))
    prep = prepare_compaction(p.entries, CompactionSettings(reserve_tokens=reserve, keep_recent_tokens=50))
    assert prep.is_split_turn and prep.messages_to_summarize and prep.turn_prefix_messages
    return prep


def test_max_tokens_clamped_to_the_model():  # session §12 scenario 82
    scripted = ScriptedModel(["history", "prefix"])
    result = compact(_split_preparation(500000), model(max_tokens=128000), scripted.stream_fn)
    assert [o["max_tokens"] for o in scripted.options] == [128000, 128000]
    assert result.summary.startswith("history\n\n---\n\n**Turn Context (split turn):**\n\nprefix")
    assert "Original Request" in prompt_of(scripted, 1)
    scripted = ScriptedModel(["history", "prefix"])
    compact(_split_preparation(1000), model(max_tokens=128000), scripted.stream_fn)
    assert [o["max_tokens"] for o in scripted.options] == [800, 500]


def test_compact_refuses_missing_id_and_reports_prefix_failure():  # session §12 scenario 83
    prep = _split_preparation(1000)
    prep.first_kept_entry_id = ""
    with pytest.raises(CompactionError) as invalid:
        compact(prep, model(), ScriptedModel(["x"]).stream_fn)
    assert invalid.value.code == "invalid_session"
    with pytest.raises(CompactionError) as failed:
        compact(_split_preparation(1000), model(), ScriptedModel(["history", error("prefix failed")]).stream_fn)
    assert str(failed.value) == "Turn prefix summarization failed: prefix failed"


def test_end_to_end_prepare_and_compact_tracks_read_files():  # session §12 scenario 84
    p = Path()
    p.msg(U("read a file"))
    p.msg(A(content=[ToolCall("c1", "read", {"path": "src/index.ts"})], inp=1000, out=200))
    p.msg(U("continue"))
    p.msg(A("x" * 400, inp=4000, out=500))
    prep = prepare_compaction(p.entries, CompactionSettings(keep_recent_tokens=101))
    assert not prep.is_split_turn
    scripted = ScriptedModel(["## Goal\nRead files"])
    result = compact(prep, model(), scripted.stream_fn)
    assert result.summary and result.first_kept_entry_id and result.details is not None
    assert result.summary.endswith("<read-files>\nsrc/index.ts\n</read-files>")
    assert result.details == {"readFiles": ["src/index.ts"], "modifiedFiles": []}


def test_split_turn_without_new_history_reuses_the_previous_summary():  # session §13 pitfall 2
    p = Path()
    p.msg(U("old"))
    u = p.msg(U("the turn"))
    p.add(CompactionEntry, "previous summary", u, 10)
    p.msg(A("step " + "s" * 400))
    p.msg(A("step " + "s" * 400))
    prep = prepare_compaction(p.entries, CompactionSettings(keep_recent_tokens=50))
    assert prep.is_split_turn and not prep.messages_to_summarize
    scripted = ScriptedModel(["prefix summary"])
    result = compact(prep, model(), scripted.stream_fn)
    assert scripted.calls == 1
    assert result.summary.startswith("previous summary\n\n---\n\n")


def test_compaction_flow_on_a_session_and_the_summarize_hook():  # session §12 scenario 85
    session = Session.in_memory()
    assert prepare_compaction(session.get_branch()) is None  # nothing to compact

    class Plugin:
        seen: List[Any] = []

        @hookimpl
        def summarize(self, messages, kind, previous_summary):
            self.seen.append((kind, [m.role for m in messages], previous_summary))
            return "summary from a plugin"

    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    pm.register(Plugin())
    for m in (U("u1"), A("a1"), U("u2"), A("a2" + "x" * 400)):
        session.append_message(m)
    prep = prepare_compaction(session.get_branch(), CompactionSettings(keep_recent_tokens=102))
    scripted = ScriptedModel([])
    result = compact(prep, model(), scripted.stream_fn, plugins=pm)
    assert scripted.calls == 0
    assert Plugin.seen == [("compaction", ["user", "assistant"], None)]
    session.append_compaction(result.summary, result.first_kept_entry_id, result.tokens_before, result.details)
    context = session.build_context().messages
    assert context[0].role == "compactionSummary" and context[0].summary == "summary from a plugin"


def test_a_raising_summarize_hook_fails_the_compaction():  # hookspecs.summarize combination rule
    class Broken:
        @hookimpl
        def summarize(self):
            raise RuntimeError("no")

    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    pm.register(Broken())
    with pytest.raises(CompactionError) as failed:
        generate_summary([U("x")], model(), 1000, stream_fn=ScriptedModel(["s"]).stream_fn, plugins=pm)
    assert failed.value.code == "summarization_failed" and "RuntimeError: no" in str(failed.value)


def test_usage_of_summary_requests_is_summed():  # session §7.5 (usage of the summarisation request)
    usage = Usage(100, 20, 0, 0, 120)
    scripted = ScriptedModel([text("history", usage=usage), text("prefix", usage=usage)])
    result = compact(_split_preparation(1000), model(), scripted.stream_fn)
    assert result.usage["input"] == 200 and result.usage["output"] == 40


# =========================================================================== the Agent link
# Real Agents: the run thread calls agent.compactor.run instead of the bare loop, agent.compact()
# compacts on demand (Agent(compaction=..., compaction_model=...)).

import threading  # noqa: E402

from agentcore.agent import Agent  # noqa: E402
from agentcore.session.compactor import ERR_OVERFLOW_GAVE_UP, Compactor  # noqa: E402
from agentcore.tools import AgentTool, AgentToolResult  # noqa: E402

OVERFLOW = "prompt is too long: 250000 tokens > 200000 maximum"


class Brain:
    """One scripted model for an agent and its summaries. ``plan(context, n)`` answers the n-th
    agent request (a str, a list of blocks, an AssistantMessage, or ``("error", text)``); summary
    requests get ``summary_text(n)``. With ``report_usage`` every answer reports input = the
    estimated tokens of the request and output = its own estimate, like a real provider."""

    def __init__(
        self,
        plan: Any,
        *,
        window: int = 200000,
        report_usage: bool = False,
        summary_text: Any = None,
        tokens_per_second: Optional[float] = None,
    ) -> None:
        self.plan = plan
        self.report_usage = report_usage
        self.summary_text = summary_text or (lambda n: f"## Goal\nSummary number {n}")
        self.agent_contexts: List[Any] = []
        self.summary_contexts: List[Any] = []
        self.summary_options: List[dict] = []
        self.summary_started = threading.Event()
        self.model = Model(id="brain", api="scripted", provider="scripted", context_window=window, max_tokens=8192)
        self.scripted = ScriptedModel([self._respond] * 20000, model=self.model, tokens_per_second=tokens_per_second)

    def stream_fn(self, model: Any, context: Any, **options: Any) -> Any:
        if context.system_prompt == SUMMARIZER_SYSTEM_PROMPT:
            self.summary_options.append(options)
        return self.scripted.stream_fn(model, context, **options)

    def _message(
        self, content: Any, context: Any, stop: Optional[str] = None, err: Optional[str] = None
    ) -> AssistantMessage:
        if isinstance(content, str):
            content = [TextContent(content)]
        if stop is None:
            stop = "toolUse" if any(isinstance(b, ToolCall) for b in content) else "stop"
        usage = Usage()
        if self.report_usage and err is None:
            inp = sum(estimate_tokens(m) for m in context.messages)
            out = estimate_tokens(AssistantMessage(content))
            usage = Usage(inp, out, 0, 0, inp + out)
        m = self.model
        return AssistantMessage(
            list(content), api=m.api, provider=m.provider, model=m.id, usage=usage, stop_reason=stop, error_message=err
        )

    def _respond(self, context: Any) -> Any:
        if context.system_prompt == SUMMARIZER_SYSTEM_PROMPT:
            self.summary_contexts.append(context)
            self.summary_started.set()
            return self._message(self.summary_text(len(self.summary_contexts)), context)
        self.agent_contexts.append(context)
        answer = self.plan(context, len(self.agent_contexts) - 1)
        if isinstance(answer, AssistantMessage):
            return answer
        if isinstance(answer, tuple) and answer[0] == "error":
            return self._message([], context, "error", answer[1])
        return self._message(answer, context)


@pytest.fixture
def make_agent():
    def make(
        brain: Brain,
        *,
        compaction: Any = None,
        compaction_model: Any = None,
        compaction_stream_fn: Any = None,
        **kwargs: Any,
    ) -> Agent:
        agent = Agent(
            brain.model, stream_fn=brain.stream_fn, compaction=compaction, compaction_model=compaction_model, **kwargs
        )
        if compaction_stream_fn is not None:  # a separate stream function just for summaries
            agent.compactor = Compactor(
                agent, compaction, model=compaction_model, stream_fn=compaction_stream_fn, emit=agent._process_event
            )
        agent.seen = []
        agent.subscribe(agent.seen.append)
        return agent

    return make


def kinds(agent: Agent, prefix: str = "compaction") -> List[str]:
    return [e.type for e in agent.seen if e.type.startswith(prefix)]


def test_manual_compaction_writes_an_entry_and_the_model_sees_the_summary(make_agent):  # session §7.3 manual
    brain = Brain(lambda ctx, n: f"answer {n} " + "x" * 300)
    session = Session.in_memory()
    agent = make_agent(brain, session=session, compaction=CompactionSettings(keep_recent_tokens=100))
    agent.prompt("first question")
    agent.prompt("second question")
    result = agent.compact("focus on the tests")
    assert kinds(agent) == ["compaction_start", "compaction_end"]
    assert agent.seen[-1].reason == "manual" and agent.seen[-1].result is result
    prompts = [c.messages[0].content[0].text for c in brain.summary_contexts]
    assert prompts and all(p.endswith("Additional focus: focus on the tests") for p in prompts)
    entry = session.get_branch()[-1]
    assert entry.type == "compaction" and entry.summary == result.summary
    assert agent.state.messages[0].role == "compactionSummary"
    assert [m.role for m in agent.state.messages] == [m.role for m in session.build_context().messages]
    agent.prompt("third question")
    first = brain.agent_contexts[-1].messages[0]
    assert first.role == "user" and "<summary>\n" + result.summary + "\n</summary>" in first.content[0].text
    second = agent.compact()  # the update request carries the previous summary
    update = brain.summary_contexts[-2].messages[0].content[0].text
    assert f"<previous-summary>\n{result.summary}\n</previous-summary>" in update
    assert second.summary != result.summary


def test_manual_compaction_refusals(make_agent):  # session §7.3 manual: "nothing to compact" / "already compacted"
    agent = make_agent(Brain(lambda ctx, n: "ok"), session=Session.in_memory())
    with pytest.raises(CompactionError) as empty:
        agent.compact()
    assert empty.value.code == "nothing_to_compact" and kinds(agent) == []
    agent.compactor.settings = CompactionSettings(keep_recent_tokens=1)
    agent.prompt("one")
    agent.prompt("two")
    agent.compact()
    with pytest.raises(CompactionError) as again:
        agent.compact()
    assert again.value.code == "already_compacted"


def test_compaction_without_a_session_keeps_file_details(make_agent):  # session §7.5 details across compactions
    def plan(ctx, n):
        return [ToolCall(f"r{n}", "read", {"path": f"src/f{n}.py"})] if n % 2 == 0 else "done " + "y" * 200

    read = AgentTool(
        "read",
        "read a file",
        {"type": "object", "properties": {"path": {"type": "string"}}},
        lambda call_id, args, signal, on_update: AgentToolResult([TextContent("data")]),
    )
    agent = make_agent(Brain(plan), tools=[read], compaction=CompactionSettings(keep_recent_tokens=10))
    agent.prompt("read one")
    first = agent.compact()
    assert "src/f0.py" in first.details["readFiles"]
    agent.prompt("read another")
    second = agent.compact()
    assert {"src/f0.py", "src/f2.py"} <= set(second.details["readFiles"])
    assert second.summary.count("<read-files>") == 1


@pytest.mark.parametrize("with_session", [False, True])
def test_a_second_compaction_without_a_session_ignores_the_kept_messages_usage(make_agent, with_session):
    # session §13 pitfall 3: the messages a compaction kept still carry the usage of the larger
    # context before it; without a session too, the next compaction must not report that size
    def plan(ctx, n):
        return ("error", "server exploded") if "five" in str(ctx.messages[-1].content) else "answer " + "x" * 400

    brain = Brain(plan, report_usage=True)
    session = Session.in_memory() if with_session else None
    agent = make_agent(brain, session=session, compaction=CompactionSettings(keep_recent_tokens=300))
    for text_ in ("one " * 300, "two " * 300, "three " * 300, "four"):
        agent.prompt(text_)
    first = agent.compact()
    agent.prompt("five")  # fails: no new usage since the compaction
    agent.compactor.settings.keep_recent_tokens = 10
    live = agent.compactor.context_tokens()
    assert live < first.tokens_before // 2
    second = agent.compact()
    assert second.tokens_before == live  # not the pre-compaction usage of a kept answer
    with pytest.raises(CompactionError) as again:  # as with a session: nothing new to compact
        agent.compact()
    assert again.value.code == "already_compacted"


def test_manual_compaction_can_be_aborted(make_agent):  # session §7.5 error mapping: aborted
    brain = Brain(
        lambda ctx, n: "answer " + "x" * 200, tokens_per_second=20, summary_text=lambda n: " ".join(["word"] * 200)
    )
    session = Session.in_memory()
    agent = make_agent(brain, session=session, compaction=CompactionSettings(keep_recent_tokens=1))
    brain.scripted.tokens_per_second = None
    agent.prompt("one")
    agent.prompt("two")
    brain.scripted.tokens_per_second = 20
    before = len(session.entries())
    outcome: List[Any] = []

    def run() -> None:
        try:
            agent.compact()
        except CompactionError as exc:
            outcome.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    assert brain.summary_started.wait(5)
    with pytest.raises(RuntimeError, match="already processing"):
        agent.prompt("not now")  # the agent is busy compacting
    agent.abort()
    worker.join(5)
    assert outcome and outcome[0].code == "aborted"
    assert agent.seen[-1].type == "compaction_end" and agent.seen[-1].aborted
    assert len(session.entries()) == before


def test_compact_refuses_while_the_agent_runs(make_agent):  # session §7.3 "requires idle"
    release = threading.Event()
    started = threading.Event()

    def wait(call_id, args, signal, on_update):
        started.set()
        release.wait(5)
        return AgentToolResult([TextContent("done")])

    tool = AgentTool("wait", "wait", {"type": "object", "properties": {}}, wait)
    agent = make_agent(Brain(lambda ctx, n: [ToolCall("w", "wait", {})] if n == 0 else "ok"), tools=[tool])
    agent.prompt("go", wait=False)
    assert started.wait(5)
    try:
        with pytest.raises(RuntimeError):
            agent.compact()
    finally:
        release.set()
        agent.wait_for_idle(5)


def test_threshold_compaction_before_the_prompt_is_sent(make_agent):  # session §7.3 threshold (pre-prompt)
    history: List[Any] = []
    for i in range(6):
        history += [U(f"q{i} " + "q" * 2000), A(f"a{i} " + "a" * 2000)]
    brain = Brain(lambda ctx, n: "fine", window=4000)
    agent = make_agent(
        brain, messages=history, compaction=CompactionSettings(reserve_tokens=1000, keep_recent_tokens=1000)
    )
    agent.prompt("next")
    types = [e.type for e in agent.seen]
    assert types.index("compaction_end") < types.index("agent_start")
    request = brain.agent_contexts[0].messages
    assert "<summary>" in request[0].content[0].text
    assert sum(estimate_tokens(m) for m in request) <= 3000


def test_overflow_is_compacted_once_and_the_turn_retried(make_agent):  # session §7.3 overflow
    brain = Brain(lambda ctx, n: ("error", OVERFLOW) if n == 2 else f"answer {n} " + "x" * 400)
    session = Session.in_memory()
    agent = make_agent(brain, session=session, compaction=CompactionSettings(keep_recent_tokens=10))
    agent.prompt("one")
    agent.prompt("two")
    new = agent.prompt("three")
    assert [(e.type, e.reason) for e in agent.seen if e.type.startswith("compaction")] == [
        ("compaction_start", "overflow"),
        ("compaction_end", "overflow"),
    ]
    assert agent.seen[-1].type == "agent_end"
    end = next(e for e in agent.seen if e.type == "compaction_end")
    assert end.will_retry and end.error_message is None
    assert new[-1].text.startswith("answer 3") and any(m.role == "assistant" and m.stop_reason == "error" for m in new)
    assert not any(getattr(m, "stop_reason", None) == "error" for m in agent.state.messages)
    assert any(getattr(getattr(e, "message", None), "error_message", None) == OVERFLOW for e in session.entries())
    assert not any(
        getattr(getattr(e, "message", None), "error_message", None) == OVERFLOW for e in session.get_branch()
    )
    assert session.build_context().messages[-1].text.startswith("answer 3")
    retry = brain.agent_contexts[3].messages
    assert retry[0].role == "user" and "<summary>" in retry[0].content[0].text and retry[-1].role == "user"


def test_second_overflow_gives_up_with_a_clear_error(make_agent):  # session §7.3 overflow: give up
    brain = Brain(lambda ctx, n: ("error", OVERFLOW) if n >= 2 else f"answer {n} " + "x" * 400)
    agent = make_agent(brain, compaction=CompactionSettings(keep_recent_tokens=10))
    agent.prompt("one")
    agent.prompt("two")
    agent.prompt("three")
    assert kinds(agent) == ["compaction_start", "compaction_end", "compaction_end"]
    assert agent.seen[-1].type == "compaction_end" and agent.seen[-1].error_message == ERR_OVERFLOW_GAVE_UP
    assert len(brain.agent_contexts) == 4


def test_overflow_with_nothing_to_compact_reports_failure(make_agent):  # session §7.3 overflow
    agent = make_agent(Brain(lambda ctx, n: ("error", OVERFLOW)))
    agent.prompt("a huge first prompt")
    assert kinds(agent) == ["compaction_end"]
    assert agent.seen[-1].error_message.startswith("Context overflow recovery failed: nothing to compact")
    assert agent.state.messages[-1].stop_reason == "error"


def test_compaction_off_switch(make_agent):  # session §7.3 "skip if disabled"
    brain = Brain(lambda ctx, n: ("error", OVERFLOW) if n == 2 else "answer " + "x" * 4000, window=2000)
    agent = make_agent(brain, compaction=False)
    for text_ in ("one", "two", "three"):
        agent.prompt(text_)
    assert kinds(agent) == [] and brain.summary_contexts == []
    assert agent.compactor.settings.enabled is False
    agent.compactor.settings = CompactionSettings(enabled=False, keep_recent_tokens=10)
    assert agent.compact().summary  # manual compaction still works


def test_a_small_window_with_the_default_reserve_does_not_compact_every_turn(make_agent):  # session §7.1
    brain = Brain(lambda ctx, n: f"answer {n} " + "x" * 400, window=8000)  # reserve 16384 > window
    agent = make_agent(brain, compaction=CompactionSettings(keep_recent_tokens=200))
    for text_ in ("one", "two", "three"):
        agent.prompt(text_ + " " + "y" * 400)
    assert kinds(agent) == [] and brain.summary_contexts == []  # about 700 tokens of 8000 in use
    assert [m.role for m in agent.messages] == ["user", "assistant"] * 3
    agent.prompt("big " + "z" * 14000)  # now over half the window: compacted before the request
    assert kinds(agent) == ["compaction_start", "compaction_end"] and len(brain.summary_contexts) == 1


def test_a_separate_summary_model(make_agent):  # issue 6: "or a model given for summaries"
    other = ScriptedModel(["summary by the small model"] * 3)
    brain = Brain(lambda ctx, n: "answer " + "x" * 400)
    agent = make_agent(
        brain,
        compaction=CompactionSettings(keep_recent_tokens=10),
        compaction_model=other.model,
        compaction_stream_fn=other.stream_fn,
    )
    agent.prompt("one")
    agent.prompt("two")
    result = agent.compact()
    assert result.summary.startswith("summary by the small model")
    assert brain.summary_contexts == [] and other.calls >= 1


@pytest.mark.parametrize("with_session", [False, True])
def test_long_run_stays_under_the_threshold(make_agent, with_session):  # issue 6: 500 turns with tool calls
    window, settings = 16000, CompactionSettings(reserve_tokens=4000, keep_recent_tokens=3000)
    threshold = window - settings.reserve_tokens
    problems: List[str] = []

    def plan(ctx, n):
        messages = ctx.messages
        size = sum(estimate_tokens(m) for m in messages)
        if size > threshold:
            problems.append(f"request {n}: {size} tokens > {threshold}")
        calls = {c.id for m in messages if m.role == "assistant" for c in m.tool_calls}
        results = {m.tool_call_id for m in messages if m.role == "toolResult"}
        if calls != results:
            problems.append(f"request {n}: unpaired tool calls {sorted(calls ^ results)}")
        if n % 5 == 4:
            return f"Finished batch {n // 5}."
        return [TextContent("reading"), ToolCall(f"call{n}", "read", {"path": f"src/file{n}.py"})]

    read = AgentTool(
        "read",
        "read a file",
        {"type": "object", "properties": {"path": {"type": "string"}}},
        lambda call_id, args, signal, on_update: AgentToolResult(
            [TextContent(f"contents of {args['path']}\n" + "line of code\n" * 100)]
        ),
    )
    brain = Brain(plan, window=window, report_usage=True)
    agent = make_agent(brain, tools=[read], compaction=settings, session=Session.in_memory() if with_session else None)
    for batch in range(100):
        agent.prompt(f"batch {batch}: read the next four files")
    assert len(brain.agent_contexts) == 500
    assert problems == []
    ends = [e for e in agent.seen if e.type == "compaction_end"]
    assert len(ends) >= 5 and all(e.error_message is None for e in ends)
    for context in brain.summary_contexts:
        assert sum(estimate_tokens(m) for m in context.messages) < window
    assert "src/file0.py" in ends[-1].result.details["readFiles"]  # carried across every compaction
    assert agent.state.messages[0].role == "compactionSummary"


# =========================================================================== issue 6 gaps
# before_compaction hook (cancel / supply), threshold before continue_(), recoverable length stops,
# entry-order staleness, the incremental threshold check.

from agentcore.session.compaction import CompactionDecision, kept_message_count, run_before_compaction  # noqa: E402
from agentcore.session.compaction_tokens import ContextTokenCounter  # noqa: E402
from agentcore.session.compactor import is_recoverable_length  # noqa: E402
from agentcore.types import CompactionSummaryMessage  # noqa: E402


class BeforeCompaction:
    """A before_compaction plugin returning ``answer`` and recording what it was given."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.calls: List[Any] = []

    @hookimpl
    def before_compaction(self, preparation, branch_entries, custom_instructions, reason, signal):
        self.calls.append(
            {
                "reason": reason,
                "instructions": custom_instructions,
                "signal": signal,
                "entries": [e.id for e in branch_entries],
                "first_kept": preparation.first_kept_entry_id,
                "summarised": len(preparation.messages_to_summarize) + len(preparation.turn_prefix_messages),
            }
        )
        return self.answer(preparation) if callable(self.answer) else self.answer


def _plugin_manager(*plugins: Any) -> Any:
    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    for plugin in plugins:
        pm.register(plugin)
    return pm


def _talk(agent: Agent, *texts: str) -> None:
    for t in texts:
        agent.prompt(t)


def test_a_hook_returning_cancel_aborts_a_manual_compaction_without_writing(make_agent):  # session §12 scenario 85
    brain = Brain(lambda ctx, n: f"answer {n} " + "x" * 300)
    session = Session.in_memory()
    hook = BeforeCompaction(CompactionDecision(cancel=True, reason="the user is reviewing"))
    agent = make_agent(brain, session=session, plugins=[hook], compaction=CompactionSettings(keep_recent_tokens=100))
    _talk(agent, "one", "two")
    before = [e.id for e in session.entries()]
    with pytest.raises(CompactionError) as cancelled:
        agent.compact("keep the tests")
    assert cancelled.value.code == "cancelled" and "the user is reviewing" in str(cancelled.value)
    assert [e.id for e in session.entries()] == before and brain.summary_contexts == []
    assert agent.state.messages[0].role == "user"
    call = hook.calls[0]
    assert (call["reason"], call["instructions"]) == ("manual", "keep the tests")
    assert call["entries"] == [e.id for e in session.get_branch()] and call["summarised"] > 0
    assert not call["signal"].aborted
    end = agent.seen[-1]
    assert (end.type, end.cancelled, end.aborted, end.error_message, end.result) == (
        "compaction_end",
        True,
        False,
        None,
        None,
    )


def test_a_hook_supplied_compaction_is_stored_from_hook_without_a_model_call(make_agent):  # session §12 scenario 85
    def read(n: int) -> Any:
        return [ToolCall(f"r{n}", "read", {"path": f"src/f{n}.py"})] if n % 2 == 0 else "done " + "y" * 300

    read_tool = AgentTool(
        "read",
        "read a file",
        {"type": "object", "properties": {"path": {"type": "string"}}},
        lambda call_id, args, signal, on_update: AgentToolResult([TextContent("data")]),
    )
    supplied = {
        "summary": "## Goal\nwritten by the hook",
        "details": {"readFiles": ["hooked-only.py"]},
        "tokensBefore": 1234,
    }
    hook = BeforeCompaction(lambda prep: supplied if len(hook.calls) == 1 else None)
    brain = Brain(lambda ctx, n: read(n))
    session = Session.in_memory()
    agent = make_agent(
        brain, session=session, plugins=[hook], tools=[read_tool], compaction=CompactionSettings(keep_recent_tokens=10)
    )
    _talk(agent, "read one")
    result = agent.compact()
    assert brain.summary_contexts == [] and result.from_hook
    entry = session.get_branch()[-1]
    assert (entry.type, entry.summary, entry.from_hook, entry.tokens_before) == (
        "compaction",
        supplied["summary"],
        True,
        1234,
    )
    assert entry.details == supplied["details"] and entry.first_kept_entry_id == hook.calls[0]["first_kept"]
    assert entry.to_dict()["fromHook"] is True
    assert agent.state.messages[0].summary == supplied["summary"]  # stored as given: no file lists added
    assert session.build_context().messages[0].summary == supplied["summary"]
    _talk(agent, "read another")
    second = agent.compact()  # built-in: the hook's details are not trusted for file tracking
    assert len(brain.summary_contexts) >= 1 and not second.from_hook
    assert "hooked-only.py" not in second.details["readFiles"]
    assert "src/f2.py" in second.details["readFiles"]


def test_hook_details_are_not_trusted_without_a_session_either(make_agent):  # session §7.4 step 7 (fromHook)
    hook = BeforeCompaction(
        lambda prep: (
            {"summary": "hooked", "details": {"readFiles": ["hooked-only.py"]}} if len(hook.calls) == 1 else None
        )
    )
    agent = make_agent(
        Brain(lambda ctx, n: "answer " + "x" * 300),
        plugins=[hook],
        compaction=CompactionSettings(keep_recent_tokens=10),
    )
    _talk(agent, "one", "two")
    assert agent.compact().summary == "hooked"
    _talk(agent, "three")
    assert "hooked-only.py" not in agent.compact().details["readFiles"]


def test_a_cancelled_threshold_compaction_lets_the_run_go_on(make_agent):  # session §7.3 hook: decline
    history: List[Any] = []
    for i in range(6):
        history += [U(f"q{i} " + "q" * 2000), A(f"a{i} " + "a" * 2000)]
    brain = Brain(lambda ctx, n: "fine", window=4000)
    hook = BeforeCompaction({"cancel": True})
    agent = make_agent(
        brain,
        messages=history,
        plugins=[hook],
        compaction=CompactionSettings(reserve_tokens=1000, keep_recent_tokens=1000),
    )
    new = agent.prompt("next")
    assert new[-1].text == "fine" and brain.summary_contexts == []
    assert hook.calls and all(c["reason"] == "threshold" for c in hook.calls)
    ends = [e for e in agent.seen if e.type == "compaction_end"]
    assert ends and all(e.cancelled and e.error_message is None for e in ends)
    assert len(brain.agent_contexts[0].messages) == len(history) + 1  # nothing was compacted


def test_a_cancelled_overflow_recovery_fails_the_run(make_agent):  # session §7.3 v4: "if the hook declines"
    brain = Brain(lambda ctx, n: ("error", OVERFLOW) if n == 2 else f"answer {n} " + "x" * 400)
    agent = make_agent(
        brain,
        plugins=[BeforeCompaction(CompactionDecision(cancel=True))],
        compaction=CompactionSettings(keep_recent_tokens=10),
    )
    _talk(agent, "one", "two", "three")
    end = [e for e in agent.seen if e.type == "compaction_end"][-1]
    assert end.cancelled and end.error_message.startswith("Context overflow recovery failed: compaction cancelled")
    assert agent.state.messages[-1].stop_reason == "error" and len(brain.agent_contexts) == 3


def test_before_compaction_results_and_failures():  # hookspecs.before_compaction return and combination rules
    p = Path()
    for m in (U("u1"), A("a1" + "x" * 400), U("u2"), A("a2" + "x" * 400)):
        p.msg(m)
    prep = prepare_compaction(p.entries, CompactionSettings(keep_recent_tokens=50))

    def ask(*plugins: Any) -> Any:
        return run_before_compaction(_plugin_manager(*plugins), prep, p.entries, None, "manual", None)

    assert run_before_compaction(None, prep, p.entries, None, "manual", None) is None
    assert ask(BeforeCompaction(None)) is None and ask(BeforeCompaction({"cancel": False})) is None
    supplied = ask(BeforeCompaction(CompactionDecision(summary="S", first_kept_entry_id="e1")))
    assert (
        supplied.summary,
        supplied.first_kept_entry_id,
        supplied.tokens_before,
        supplied.from_hook,
        supplied.usage,
    ) == ("S", "e1", prep.tokens_before, True, None)
    camel = ask(BeforeCompaction({"summary": "T", "firstKeptEntryId": "e3", "tokensBefore": 7}))
    assert (camel.first_kept_entry_id, camel.tokens_before, camel.details) == ("e3", 7, None)
    assert camel.to_dict()["fromHook"] is True
    # first result wins: the plugin registered last is called first; the other is never asked
    first, second = BeforeCompaction({"summary": "from first"}), BeforeCompaction({"cancel": True})
    with pytest.raises(CompactionError) as cancelled:
        ask(first, second)
    assert cancelled.value.code == "cancelled" and first.calls == []

    class Raising:
        @hookimpl
        def before_compaction(self):
            raise KeyError("boom")

    for plugin, text_ in ((Raising(), "raised KeyError"), (BeforeCompaction("just text"), "returned a str")):
        with pytest.raises(CompactionError) as failed:
            ask(plugin)
        assert failed.value.code == "summarization_failed" and text_ in str(failed.value)


def test_a_failing_hook_fails_only_the_compaction(make_agent):  # hookspecs.before_compaction: exceptions
    class Raising:
        @hookimpl
        def before_compaction(self):
            raise RuntimeError("plugin bug")

    session = Session.in_memory()
    agent = make_agent(
        Brain(lambda ctx, n: "answer " + "x" * 300),
        session=session,
        plugins=[Raising()],
        compaction=CompactionSettings(keep_recent_tokens=10),
    )
    _talk(agent, "one", "two")
    count = len(session.entries())
    with pytest.raises(CompactionError, match="RuntimeError: plugin bug"):
        agent.compact()
    assert len(session.entries()) == count and "plugin bug" in agent.seen[-1].error_message


def test_threshold_compaction_before_continue(make_agent):  # session §7.3 threshold before any run (continue_)
    history: List[Any] = []
    for i in range(6):
        history += [U(f"q{i} " + "q" * 2000), A(f"a{i} " + "a" * 2000)]
    history.append(U("and now?"))
    brain = Brain(lambda ctx, n: "continued", window=4000)
    agent = make_agent(
        brain, messages=history, compaction=CompactionSettings(reserve_tokens=1000, keep_recent_tokens=1000)
    )
    new = agent.continue_()
    types = [e.type for e in agent.seen]
    assert types.index("compaction_end") < types.index("agent_start")
    assert [e.reason for e in agent.seen if e.type == "compaction_start"] == ["threshold"]
    request = brain.agent_contexts[0].messages
    assert "<summary>" in request[0].content[0].text and request[-1].content[0].text == "and now?"
    assert sum(estimate_tokens(m) for m in request) <= 3000 and new[-1].text == "continued"


def _cut_off(brain: Brain, output: int, inp: int = 3900) -> AssistantMessage:
    m = brain.model
    return AssistantMessage(
        [TextContent("partial answer")],
        api=m.api,
        provider=m.provider,
        model=m.id,
        usage=Usage(inp, output, 0, 0, inp + output),
        stop_reason="length",
    )


def test_is_recoverable_length():  # session §7.3 v4: length stop below the intended output cap
    brain = Brain(lambda ctx, n: "x", window=4000)  # model max_tokens 8192
    settings = CompactionSettings(reserve_tokens=1000)
    assert is_recoverable_length(_cut_off(brain, 50), brain.model, None, settings)
    assert not is_recoverable_length(_cut_off(brain, 50), brain.model, 50, settings)  # hit the caller's cap
    assert is_recoverable_length(_cut_off(brain, 49), brain.model, 50, settings)
    assert not is_recoverable_length(_cut_off(brain, 50, inp=100), brain.model, None, settings)  # context not full
    no_usage = _cut_off(brain, 0)
    no_usage.usage = Usage()
    assert not is_recoverable_length(no_usage, brain.model, None, settings)
    other = _cut_off(brain, 50)
    other.model = "another-model"
    assert not is_recoverable_length(other, brain.model, None, settings)
    done = _cut_off(brain, 50)
    done.stop_reason = "stop"
    assert not is_recoverable_length(done, brain.model, None, settings)
    big = Model(id="brain", api="scripted", provider="scripted", context_window=4000, max_tokens=64000)
    assert not is_recoverable_length(_cut_off(brain, 32000), big, None, settings)  # providers' default cap


def test_a_recoverable_length_stop_is_discarded_compacted_and_retried(make_agent):  # session §7.3 v4
    brain = Brain(lambda ctx, n: _cut_off(brain, 40) if n == 2 else f"answer {n} " + "x" * 400, window=4000)
    session = Session.in_memory()
    agent = make_agent(
        brain, session=session, compaction=CompactionSettings(reserve_tokens=1000, keep_recent_tokens=10)
    )
    _talk(agent, "one", "two")
    new = agent.prompt("three")
    assert [(e.type, e.reason) for e in agent.seen if e.type.startswith("compaction")] == [
        ("compaction_start", "overflow"),
        ("compaction_end", "overflow"),
    ]
    assert new[-1].text.startswith("answer 3") and any(getattr(m, "stop_reason", None) == "length" for m in new)
    assert not any(getattr(m, "stop_reason", None) == "length" for m in agent.state.messages)
    assert not any(getattr(getattr(e, "message", None), "stop_reason", None) == "length" for e in session.get_branch())
    assert any(getattr(getattr(e, "message", None), "stop_reason", None) == "length" for e in session.entries())
    retry = brain.agent_contexts[3].messages
    assert "<summary>" in retry[0].content[0].text and retry[-1].role == "user"


def test_a_length_stop_at_the_output_cap_is_a_real_truncation(make_agent):  # session §7.3 v4 (not recoverable)
    brain = Brain(lambda ctx, n: _cut_off(brain, 8192, inp=100) if n == 1 else "answer", window=200000)
    agent = make_agent(brain, compaction=CompactionSettings(keep_recent_tokens=10))
    _talk(agent, "one", "two")
    assert kinds(agent) == [] and agent.state.messages[-1].stop_reason == "length"


def test_entry_order_beats_timestamps_for_stale_usage():  # issue 6 item 5: clock skew
    summary = CompactionSummaryMessage("S", 90000, timestamp=1000)
    kept = A("kept", total=90000, timestamp=5000)  # clock jumped forward before the compaction
    fresh = A("fresh", total=700, timestamp=10)  # clock went back after it
    messages = [summary, U("kept q", timestamp=900), kept, U("new q", timestamp=5), fresh]
    assert live_context_tokens(messages).usage_tokens == 90000  # timestamps get both wrong
    by_order = live_context_tokens(messages, kept_count=2)
    assert (by_order.usage_tokens, by_order.last_usage_index) == (700, 4)
    assert live_context_tokens(messages[:4], kept_count=2).last_usage_index is None
    counter = ContextTokenCounter(lambda s: 2 if s is summary else None)
    assert counter.estimate(messages) == by_order
    assert ContextTokenCounter().estimate(messages) == live_context_tokens(messages)


def test_kept_message_count_and_tokens_before_use_entry_order():  # issue 6 item 5 (prepare_compaction)
    p = _compacted_path()
    ci = next(i for i, e in enumerate(p.entries) if isinstance(e, CompactionEntry))
    assert kept_message_count(p.entries, ci) == 2  # u2, a2
    p.entries.pop()  # no answer after the compaction yet ...
    p.entries[ci - 1].message.timestamp = 10**13  # ... and the kept a2 looks newer than it
    messages = path_context_messages(p.entries)
    prep = prepare_compaction(p.entries)
    assert prep.tokens_before == sum(estimate_tokens(m) for m in messages) < 6000
    assert live_context_tokens(messages).tokens > 6000  # what the timestamps alone would say


def test_the_agent_orders_usage_by_entry_after_its_compaction(make_agent):  # issue 6 item 5 (Compactor)
    brain = Brain(lambda ctx, n: f"answer {n} " + "x" * 300)
    session = Session.in_memory()
    agent = make_agent(brain, session=session, compaction=CompactionSettings(keep_recent_tokens=100))
    _talk(agent, "one", "two")
    agent.compact()
    stale = agent.state.messages[-1]
    stale.usage = Usage(150000, 10, 0, 0, 150010)  # a kept message
    stale.timestamp = now = 10**14  # ... stamped after the compaction by a skewed clock
    assert agent.compactor.context_tokens() < 150000
    skewed = A("fresh", total=4321, timestamp=1)  # a new message stamped before it
    agent.state.messages.append(skewed)
    assert agent.compactor.context_tokens() == 4321
    resumed = Compactor(Agent(brain.model, stream_fn=brain.stream_fn, session=session))  # found in the session
    resumed.agent.state.messages[-1].timestamp = now
    assert resumed.context_tokens() < 150000


def test_the_threshold_check_only_estimates_new_messages(monkeypatch):  # issue 6 item 6: per-turn cost
    from agentcore.session import compaction_tokens

    messages: List[Any] = [CompactionSummaryMessage("S", 5, timestamp=1)]
    for i in range(300):
        messages += [U(f"question {i}", timestamp=i + 2), A(f"answer {i}", total=1000 + i, timestamp=i + 2)]
    calls: List[Any] = []
    real = compaction_tokens.estimate_tokens
    counter = ContextTokenCounter(lambda s: 0)

    def counted(transcript: List[Any]) -> Any:
        calls.clear()
        monkeypatch.setattr(compaction_tokens, "estimate_tokens", lambda m: calls.append(m) or real(m))
        try:
            figures = counter.estimate(transcript)
        finally:
            monkeypatch.setattr(compaction_tokens, "estimate_tokens", real)
        assert figures == live_context_tokens(transcript, kept_count=0)
        return list(calls)

    assert len(counted(messages)) == len(messages)
    messages.append(U("one more question"))
    grown = list(messages)  # a copy holding the same objects still counts as the same transcript
    assert counted(grown) == [grown[-1]]
    grown.append(A("reply", total=5000))
    assert counted(grown) == [grown[-1]]
    grown[-1] = A("edited", total=6000)  # not append-only any more: a full recount
    assert len(counted(grown)) == len(grown)
    assert len(counted(grown[:10])) == 10


def test_in_a_run_compaction_changes_the_transcript_only_through_the_agents_reducer(make_agent):  # issue 11 §1
    brain = Brain(lambda ctx, n: ("error", OVERFLOW) if n == 2 else f"answer {n} " + "x" * 400)
    agent = make_agent(brain, compaction=CompactionSettings(keep_recent_tokens=10))
    agent.prompt("one")
    agent.prompt("two")
    writes: List[Any] = []
    state_type = type(agent.state)
    setter = state_type.messages.fset

    def recording_setter(state: Any, value: Any) -> None:  # nobody assigns the transcript mid-run
        writes.append(threading.current_thread().name)
        setter(state, value)

    at_end: List[Any] = []
    agent.subscribe(lambda e: at_end.append(list(agent.state.messages)) if e.type == "compaction_end" else None)
    state_type.messages = property(state_type.messages.fget, recording_setter)
    try:
        new = agent.prompt("three")
    finally:
        state_type.messages = property(state_type.messages.fget, setter)
    end = next(e for e in agent.seen if e.type == "compaction_end")
    assert writes == [] and at_end == [end.messages]  # the reducer applied the event's transcript
    assert new[-1].text.startswith("answer 3")
    assert not hasattr(Compactor, "run")  # compaction no longer wraps or re-enters the loop


def test_summary_requests_go_where_the_agents_requests_go():  # options defined once (issue 11 §3)
    """A summary request carries the agent's endpoint options (headers, timeouts, Azure resource,
    Bedrock region ...), not those that shape the answer; another provider gets none of them."""
    import json

    from _servers import Reply, ScriptedServer, sse

    from agentcore.types import Model

    def answer(words: str) -> str:
        chunks = [
            {"choices": [{"index": 0, "delta": {"content": w + " "}, "finish_reason": None}]} for w in words.split()
        ]
        return sse(*chunks, {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}, done=True)

    with (
        ScriptedServer([Reply(body=answer("x " * 200)) for _ in range(12)]) as gateway,
        ScriptedServer([Reply(body=answer("y " * 200)) for _ in range(4)]) as other,
    ):
        model = Model(
            id="m", api="openai-completions", provider="gw", base_url=gateway.url + "/v1", context_window=100000
        )
        cheap = Model(id="s", api="openai-completions", provider="elsewhere", base_url=other.url + "/v1")
        settings = CompactionSettings(keep_recent_tokens=50)
        options = dict(headers={"X-Gateway-Key": "gk-1"}, timeout=30.0, temperature=0.3, tool_choice="none")
        agent = Agent(model, api_key="k", compaction=settings, **options)
        _talk(agent, "one " * 100, "two " * 100)
        agent.compact()
        other_agent = Agent(model, api_key="k", compaction=settings, compaction_model=cheap, **options)
        _talk(other_agent, "three " * 100, "four " * 100)
        other_agent.compact()
        summaries = [r for r in gateway.requests if b"<conversation>" in r.body]
        turns = [r for r in gateway.requests if b"<conversation>" not in r.body]
        foreign = other.requests
    assert len(turns) == 4 and summaries and foreign  # every summary of the second agent went elsewhere
    assert len(gateway.requests) + len(foreign) <= 16  # no reply ran out (no retried 500s)
    assert all(r.headers["x-gateway-key"] == "gk-1" and json.loads(r.body)["temperature"] == 0.3 for r in turns)
    for summary in summaries:
        sent = json.loads(summary.body)
        assert summary.headers["x-gateway-key"] == "gk-1"  # the agent's gateway, reached as the agent reaches it
        assert "temperature" not in sent and "tool_choice" not in sent  # the answer's shape is the summary's own
    assert all("x-gateway-key" not in r.headers for r in foreign)  # never sent to another provider
    assert all(r.headers["authorization"] == "Bearer k" for r in turns + summaries)
    assert all("authorization" not in r.headers for r in foreign)  # nor is the agent's API key
    assert all(b"<conversation>" in r.body for r in foreign)


def test_summary_request_options_by_model():
    from agentcore.options import StreamOptions
    from agentcore.session.compactor import summary_request_options
    from agentcore.types import Model

    azure = Model(id="gpt-5", api="azure-openai-responses", provider="azure-openai-responses")
    mini = Model(id="gpt-5-mini", api="azure-openai-responses", provider="azure-openai-responses")
    options = StreamOptions(
        azure_resource_name="res",
        azure_deployment_name="prod-gpt5",
        max_retries=5,
        reasoning_effort="high",
        provider_options={"region": "eu-west-1", "thinking": {"enabled": True}},
    )
    assert summary_request_options(options, azure, azure) == {
        "azure_resource_name": "res",
        "azure_deployment_name": "prod-gpt5",
        "max_retries": 5,
        "region": "eu-west-1",
    }
    assert "azure_deployment_name" not in summary_request_options(options, azure, mini)  # names the agent's model
    other = Model(id="claude", api="anthropic-messages", provider="anthropic")
    assert summary_request_options(options, azure, other) == {"max_retries": 5}
    assert summary_request_options(None, azure, azure) == {}


# =========================================================================== checked settings, checked summaries


@pytest.mark.parametrize("value", ["off", True, 0, "false", 1.0, ["enabled"]])
def test_agent_compaction_refuses_anything_but_settings_none_false_or_a_mapping(value):  # session §7.1
    with pytest.raises(TypeError) as refused:
        Agent(ScriptedModel(["x"]).model, compaction=value)
    message = str(refused.value)
    assert message.startswith("Agent(compaction=...) takes a CompactionSettings")
    assert "None for the defaults or False for no automatic compaction" in message
    assert f"not {value!r} ({type(value).__name__})" in message


def test_agent_compaction_takes_a_mapping_of_setting_names_with_the_same_checks():  # session §7.1
    agent = Agent(ScriptedModel(["x"]).model, compaction={"reserve_tokens": 10, "keep_recent_tokens": 5})
    assert agent.compactor.settings == CompactionSettings(reserve_tokens=10, keep_recent_tokens=5)
    with pytest.raises(TypeError, match=r"unknown compaction setting 'reserveTokens'; the settings are enabled, "):
        Agent(ScriptedModel(["x"]).model, compaction={"reserveTokens": 10})
    with pytest.raises(TypeError, match=r"CompactionSettings\(reserve_tokens=\.\.\.\) takes an int >= 1"):
        Agent(ScriptedModel(["x"]).model, compaction={"reserve_tokens": "10"})
    assert Agent(ScriptedModel(["x"]).model, compaction=False).compactor.settings.enabled is False
    with pytest.raises(TypeError, match=r"^Compactor\(settings=\.\.\.\) takes a CompactionSettings"):
        Compactor(agent, "off")


def test_settings_assigned_to_a_compactor_later_are_taken_and_checked_as_when_made(make_agent):  # session §7.1
    brain = Brain(lambda ctx, n: "answer " + "x" * 400)
    agent = make_agent(brain)
    agent.compactor.settings = {"keep_recent_tokens": 10}  # as Agent(compaction=...) takes it
    assert agent.compactor.settings == CompactionSettings(keep_recent_tokens=10)
    agent.prompt("one")  # the run reads the settings: no "'dict' object has no attribute 'enabled'"
    agent.prompt("two")
    assert [m.role for m in agent.messages] == ["user", "assistant"] * 2
    assert agent.compact().summary  # and compaction keeps 10 tokens
    agent.compactor.settings = False
    assert agent.compactor.settings.enabled is False
    agent.compactor.settings = None
    assert agent.compactor.settings == CompactionSettings()
    with pytest.raises(TypeError, match=r"^Compactor\.settings = \.\.\. takes a CompactionSettings"):
        agent.compactor.settings = "off"
    with pytest.raises(TypeError, match=r"unknown compaction setting 'keepRecentTokens'"):
        agent.compactor.settings = {"keepRecentTokens": 10}
    assert agent.compactor.settings == CompactionSettings()  # unchanged by a refused assignment


@pytest.mark.parametrize(
    "fields, error, text",
    [
        ({"enabled": "no"}, TypeError, "CompactionSettings(enabled=...) takes True or False"),
        ({"enabled": None}, TypeError, "CompactionSettings(enabled=...) takes True or False"),
        ({"reserve_tokens": "100"}, TypeError, "CompactionSettings(reserve_tokens=...) takes an int >= 1"),
        ({"reserve_tokens": None}, TypeError, "CompactionSettings(reserve_tokens=...) takes an int >= 1"),
        ({"reserve_tokens": True}, TypeError, "not True (bool)"),
        ({"reserve_tokens": float("nan")}, TypeError, "not nan (float)"),
        ({"reserve_tokens": 0}, ValueError, "CompactionSettings(reserve_tokens=...) must be >= 1"),
        ({"keep_recent_tokens": 1.5}, TypeError, "CompactionSettings(keep_recent_tokens=...) takes an int >= 0"),
        ({"keep_recent_tokens": -1}, ValueError, "CompactionSettings(keep_recent_tokens=...) must be >= 0"),
    ],
)
def test_compaction_settings_are_checked_when_made(fields, error, text):  # session §7.1
    with pytest.raises(error) as refused:
        CompactionSettings(**fields)
    assert type(refused.value) is error and text in str(refused.value)


@pytest.mark.parametrize(
    "fields, error, text",
    [
        ({"enabled": "no"}, TypeError, "CompactionSettings(enabled=...) takes True or False"),
        ({"reserve_tokens": 0}, ValueError, "CompactionSettings(reserve_tokens=...) must be >= 1"),
        ({"keep_recent_tokens": 1.5}, TypeError, "CompactionSettings(keep_recent_tokens=...) takes an int >= 0"),
    ],
)
def test_compaction_settings_are_checked_when_a_field_is_assigned(fields, error, text):  # session §7.1
    """``agent.compactor.settings.reserve_tokens = 0`` was accepted, and the next threshold check
    or summary request worked with it (a summary of max_tokens 0); it now raises as the
    constructor does, and the field keeps its value."""
    settings = Agent(ScriptedModel(["x"]).model).compactor.settings
    before = CompactionSettings(settings.enabled, settings.reserve_tokens, settings.keep_recent_tokens)
    ((name, value),) = fields.items()
    with pytest.raises(error) as refused:
        setattr(settings, name, value)
    assert type(refused.value) is error and text in str(refused.value)
    assert settings == before
    settings.reserve_tokens = 4096  # a valid value is taken
    assert settings.reserve_tokens == 4096


def test_the_smallest_settings_still_ask_for_some_output():  # session §7.5 maxTokens, never 0
    CompactionSettings(reserve_tokens=1, keep_recent_tokens=0)  # the limits themselves are allowed
    scripted = ScriptedModel(["s"])
    generate_summary([U("x")], model(), 1, stream_fn=scripted.stream_fn)
    assert scripted.options[0]["max_tokens"] == 1


def _three_long_answers(with_session: bool, summaries: List[Any]) -> tuple:
    scripted = ScriptedModel(["a " * 400, "b " * 400, "c " * 400, *summaries])
    session = Session.in_memory() if with_session else None
    agent = Agent(
        scripted.model,
        stream_fn=scripted.stream_fn,
        session=session,
        compaction=CompactionSettings(keep_recent_tokens=50),
    )
    for question in ("one", "two", "three"):
        agent.prompt(question)
    return agent, session


@pytest.mark.parametrize("with_session", [False, True])
@pytest.mark.parametrize(
    "summaries, reason",
    [
        (["", ""], "Summarization failed: the model returned an empty summary"),
        ([" \n\t ", "prefix"], "Summarization failed: the model returned an empty summary"),
        (["history", "  "], "Turn prefix summarization failed: the model returned an empty summary"),
        ([text("## Goal\nhalf a summ", stop_reason="length"), "prefix"], "cut off at its output limit"),
        (["history", text("## Original Request", stop_reason="length")], "Turn prefix summarization failed"),
    ],
)
def test_an_empty_or_cut_off_summary_fails_and_leaves_the_history(with_session, summaries, reason):  # §7.5
    agent, session = _three_long_answers(with_session, summaries)
    before = list(agent.state.messages)
    entries = len(session.entries()) if session is not None else 0
    with pytest.raises(CompactionError) as failed:
        agent.compact()
    assert failed.value.code == "summarization_failed" and reason in str(failed.value)
    assert "nothing was compacted" in str(failed.value)
    assert agent.state.messages == before and not any(m.role == "compactionSummary" for m in before)
    if session is not None:
        assert len(session.entries()) == entries and session.get_branch()[-1].type == "message"


def test_a_cut_off_summary_says_which_limit_it_reached():  # session §7.5 maxTokens = 0.8 * reserve
    with pytest.raises(CompactionError) as failed:
        generate_summary(
            [U("x")], model(), 1000, stream_fn=ScriptedModel([text("## Go", stop_reason="length")]).stream_fn
        )
    assert "max_tokens=800" in str(failed.value) and "reserve_tokens" in str(failed.value)


def test_a_whitespace_summary_from_the_summarize_hook_fails_too():  # hookspecs.summarize
    class Blank:
        @hookimpl
        def summarize(self):
            return "   "

    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    pm.register(Blank())
    scripted = ScriptedModel(["never asked"])
    with pytest.raises(CompactionError) as failed:
        generate_summary([U("x")], model(), 1000, stream_fn=scripted.stream_fn, plugins=pm)
    assert failed.value.code == "summarization_failed" and "the summarize hook returned an empty summary" in str(
        failed.value
    )
    assert scripted.calls == 0


def test_an_empty_automatic_summary_is_reported_and_the_run_goes_on(make_agent):  # session §7.3 threshold
    history: List[Any] = []
    for i in range(6):
        history += [U(f"q{i} " + "q" * 2000), A(f"a{i} " + "a" * 2000)]
    brain = Brain(lambda ctx, n: "fine", window=4000, summary_text=lambda n: "")
    agent = make_agent(
        brain, messages=history, compaction=CompactionSettings(reserve_tokens=1000, keep_recent_tokens=1000)
    )
    new = agent.prompt("next")
    assert new[-1].text == "fine" and brain.summary_contexts  # the summary was asked for, the run went on
    end = next(e for e in agent.seen if e.type == "compaction_end")
    assert end.result is None and end.messages is None
    assert end.error_message.startswith("Summarization failed: the model returned an empty summary")
    assert not any(m.role == "compactionSummary" for m in agent.state.messages)
    assert agent.state.messages[: len(history)] == history


# =========================================================================== usage of refused summaries
# A summary request the provider answered is billed even when compaction refuses the answer (cut
# off, empty, aborted): its usage reaches the caller through CompactionError.usage and the
# compaction_end event (the session is left unchanged, so sessions show cannot count it).

from agentcore.cli._usage import UsageTally, count_usage  # noqa: E402
from agentcore.events import event_to_dict  # noqa: E402
from agentcore.streams import AssistantMessageEventStream  # noqa: E402
from agentcore.testing import ScriptedResponse  # noqa: E402
from agentcore.types import UsageCost  # noqa: E402

BILLED = Usage(1000, 300, 50, 20, 1370, UsageCost(0.003, 0.0045, 0.0001, 0.00005, 0.00765))
PREFIX_BILLED = Usage(400, 100, 0, 10, 510, UsageCost(0.0012, 0.0015, 0, 0.00002, 0.00272))


def _figures(usage: Any) -> tuple:
    """The token counts and total cost of a Usage (or None), for comparing sums."""
    if usage is None:
        return None
    return (usage.input, usage.output, usage.cache_read, usage.cache_write, usage.total_tokens, usage.cost.total)


def _sum(*usages: Usage) -> tuple:
    return tuple(map(sum, zip(*(_figures(u) for u in usages))))


@pytest.mark.parametrize("with_session", [False, True])
@pytest.mark.parametrize(
    "refused, code",
    [
        (text("## Goal\nhalf a summ", stop_reason="length", usage=BILLED), "summarization_failed"),
        (text(" \n ", usage=BILLED), "summarization_failed"),
        (ScriptedResponse([TextContent("## Goal")], "aborted", "stopped", usage=BILLED), "aborted"),
    ],
    ids=["cut-off", "empty", "aborted"],
)
def test_a_refused_summary_reports_the_usage_it_was_billed(with_session, refused, code):  # §7.5 usage
    agent, session = _three_long_answers(with_session, [refused, "prefix"])
    entries = len(session.entries()) if session is not None else 0
    seen: List[Any] = []
    agent.subscribe(seen.append)
    tally = count_usage(agent)
    with pytest.raises(CompactionError) as failed:
        agent.compact()
    assert failed.value.code == code
    assert _figures(failed.value.usage) == _figures(BILLED)
    end = [e for e in seen if e.type == "compaction_end"]
    assert len(end) == 1 and end[0].result is None and _figures(end[0].usage) == _figures(BILLED)
    summaries = tally.models["summaries"]
    assert (summaries.requests, summaries.input, summaries.output) == (1, 1000, 300)
    assert summaries.cost == pytest.approx(BILLED.cost.total)
    if session is not None:  # nothing new is written: the session format follows the reference
        assert len(session.entries()) == entries and session.get_branch()[-1].type == "message"


@pytest.mark.parametrize(
    "prefix_answer",
    [
        text("## Original Request", stop_reason="length", usage=PREFIX_BILLED),
        text("", usage=PREFIX_BILLED),
        ScriptedResponse([], "aborted", "stopped", usage=PREFIX_BILLED),
        ScriptedResponse([], "error", "overloaded", usage=PREFIX_BILLED),
    ],
    ids=["cut-off", "empty", "aborted", "error"],
)
def test_a_failed_turn_prefix_request_reports_both_requests_usage(prefix_answer):  # §7.5 split turn usage
    scripted = ScriptedModel([text("history", usage=BILLED), prefix_answer])
    with pytest.raises(CompactionError) as failed:
        compact(_split_preparation(1000), model(), scripted.stream_fn)
    assert scripted.calls == 2
    assert _figures(failed.value.usage) == pytest.approx(_sum(BILLED, PREFIX_BILLED))


def test_a_turn_prefix_failing_without_an_answer_still_reports_the_history_usage():  # §7.5 split turn usage
    def raising(model: Any, context: Any, **options: Any) -> Any:
        raise ConnectionError("connection reset")

    answers = iter([ScriptedModel([text("history", usage=BILLED)]).stream_fn, raising])
    with pytest.raises(CompactionError) as failed:
        compact(_split_preparation(1000), model(), lambda *a, **k: next(answers)(*a, **k))
    assert "connection reset" in str(failed.value)
    assert _figures(failed.value.usage) == _figures(BILLED)

    class PrefixHookFails:
        @hookimpl
        def summarize(self, kind):
            if kind == "turn_prefix":
                raise RuntimeError("no prefix today")
            return None

    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    pm.register(PrefixHookFails())
    scripted = ScriptedModel([text("history", usage=BILLED)])
    with pytest.raises(CompactionError) as hooked:
        compact(_split_preparation(1000), model(), scripted.stream_fn, plugins=pm)
    assert "no prefix today" in str(hooked.value) and _figures(hooked.value.usage) == _figures(BILLED)


def test_usage_is_none_only_when_no_response_came_back():  # CompactionError.usage
    with pytest.raises(CompactionError) as aborted:  # a response, with the zero usage it reports
        compact(_split_preparation(1000), model(), ScriptedModel([]).stream_fn, signal=_aborted_signal())
    assert aborted.value.code == "aborted" and _figures(aborted.value.usage) == _figures(Usage())
    prep = _split_preparation(1000)
    prep.first_kept_entry_id = ""
    with pytest.raises(CompactionError) as invalid:
        compact(prep, model(), ScriptedModel(["x"]).stream_fn)
    assert invalid.value.usage is None
    assert repr(CompactionError("aborted", "stopped", usage=BILLED)) == (
        "CompactionError(code='aborted', message='stopped')"
    )


def _aborted_signal() -> Any:
    from agentcore.signals import AbortController

    controller = AbortController()
    controller.abort("before the request")
    return controller.signal


def test_a_failed_two_request_compaction_reaches_the_event_and_the_tally():  # §7.5 split turn, agent path
    cut_off = text("## Original Request", stop_reason="length", usage=PREFIX_BILLED)
    agent, _ = _three_long_answers(False, [text("history", usage=BILLED), cut_off])
    seen: List[Any] = []
    agent.subscribe(seen.append)
    tally = count_usage(agent)
    with pytest.raises(CompactionError) as failed:
        agent.compact()
    expected = _sum(BILLED, PREFIX_BILLED)
    assert _figures(failed.value.usage) == pytest.approx(expected)
    end = next(e for e in seen if e.type == "compaction_end")
    assert _figures(end.usage) == pytest.approx(expected)
    summaries = tally.models["summaries"]
    assert (summaries.input, summaries.output, summaries.cache_write) == expected[:2] + (expected[3],)
    assert summaries.cost == pytest.approx(expected[-1])


def test_a_refused_automatic_summary_is_counted_by_the_runs_usage(make_agent):  # §7.3 threshold, run -u
    history: List[Any] = []
    for i in range(6):
        history += [U(f"q{i} " + "q" * 2000), A(f"a{i} " + "a" * 2000)]
    brain = Brain(lambda ctx, n: "fine", window=4000, report_usage=True, summary_text=lambda n: "")
    agent = make_agent(
        brain, messages=history, compaction=CompactionSettings(reserve_tokens=1000, keep_recent_tokens=1000)
    )
    tally = count_usage(agent)
    assert agent.prompt("next")[-1].text == "fine"
    ends = [e for e in agent.seen if e.type == "compaction_end"]
    assert ends and all(e.result is None and e.error_message for e in ends)
    assert all(e.usage is not None and e.usage.input > 0 for e in ends)
    assert event_to_dict(ends[0])["usage"]["input"] == ends[0].usage.input
    assert tally.models["summaries"].input == sum(e.usage.input for e in ends)


def test_a_successful_compaction_event_carries_its_usage_once():  # compaction_end.usage == result.usage
    agent, _ = _three_long_answers(False, [text("history", usage=BILLED), text("prefix", usage=PREFIX_BILLED)])
    seen: List[Any] = []
    agent.subscribe(seen.append)
    tally = count_usage(agent)
    result = agent.compact()
    end = next(e for e in seen if e.type == "compaction_end")
    assert end.result is result and _figures(end.usage) == pytest.approx(_figures(Usage.from_dict(result.usage)))
    assert tally.models["summaries"].input == BILLED.input + PREFIX_BILLED.input  # counted once, not twice


def test_the_usage_tally_counts_a_failed_compactions_usage():  # UsageTally.add_event
    tally = UsageTally()
    tally.add_event(type("End", (), {"type": "compaction_end", "result": None, "usage": BILLED})())
    tally.add_event(type("End", (), {"type": "compaction_end", "result": None, "usage": None})())
    old_style = type("Result", (), {"usage": PREFIX_BILLED.to_dict()})()
    tally.add_event(type("End", (), {"type": "compaction_end", "result": old_style})())  # no usage attribute
    both = type("End", (), {"type": "compaction_end", "result": old_style, "usage": PREFIX_BILLED})()
    tally.add_event(both)  # a success carries its usage twice: counted once
    summaries = tally.models["summaries"]
    assert (summaries.requests, summaries.input) == (3, BILLED.input + 2 * PREFIX_BILLED.input)


def test_a_refused_summary_with_a_null_cost_still_fails_as_a_compaction_error():  # Usage.cost None round-trips
    no_cost = Usage.from_dict(
        {"input": 7, "output": 3, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 10, "cost": None}
    )
    scripted = ScriptedModel([text("history", usage=BILLED), text("", usage=no_cost)])
    with pytest.raises(CompactionError) as failed:
        compact(_split_preparation(1000), model(), scripted.stream_fn)
    assert _figures(failed.value.usage)[:2] == (BILLED.input + 7, BILLED.output + 3)
    assert failed.value.usage.cost.total == pytest.approx(BILLED.cost.total)


# =========================================================================== writing the compaction
# What a compaction writes must be storable, the write must be able to fail without failing the
# run, and an abort before the write means nothing is written.


def test_hook_details_the_session_cannot_store_fail_only_the_compaction(make_agent):  # hookspecs.before_compaction
    """A hook-supplied compaction whose ``details`` are not JSON (a set) used to reach the session
    write: a bare ``SessionError("entry is not pure JSON")``, a ``compaction_start`` without its
    ``compaction_end``, and in a run every turn failed with that text as the assistant's error."""
    hook = BeforeCompaction(CompactionDecision(summary="from the hook", details={"files": {"a.py"}}))
    session = Session.in_memory()
    brain = Brain(lambda ctx, n: "fine", window=4000)
    history: List[Any] = []
    for i in range(6):
        history += [U(f"q{i} " + "q" * 2000), A(f"a{i} " + "a" * 2000)]
    for message in history:
        session.append_message(message)
    agent = make_agent(
        brain,
        session=session,
        plugins=[hook],
        compaction=CompactionSettings(reserve_tokens=1000, keep_recent_tokens=1000),
    )
    count = len(session.entries())
    new = agent.prompt("next")  # over the threshold: compacted before the request
    assert new[-1].text == "fine" and hook.calls  # the run went on, uncompacted
    ends = [e for e in agent.seen if e.type == "compaction_end"]
    assert ends and kinds(agent) == ["compaction_start", "compaction_end"] * len(ends)  # before the run, after the turn
    assert all("before_compaction hook returned details that are not JSON" in e.error_message for e in ends)
    assert not any(e.type == "compaction" for e in session.entries()[count:])
    with pytest.raises(CompactionError) as manual:
        agent.compact()
    assert manual.value.code == "summarization_failed" and "not JSON" in str(manual.value)
    assert not any(e.type == "compaction" for e in session.entries())


def test_a_session_write_failure_fails_the_compaction_with_its_end_event(make_agent, tmp_path):  # close-during-use
    """The session closed (or its disk full) while the summary streamed: the write raised a
    ``SessionError`` past the compactor, so listeners saw ``compaction_start`` and never
    ``compaction_end``, and an automatic compaction failed the run."""
    session = Session.create(str(tmp_path / "s.jsonl"))
    brain = Brain(lambda ctx, n: f"answer {n} " + "x" * 300)
    agent = make_agent(brain, session=session, compaction=CompactionSettings(keep_recent_tokens=100))
    _talk(agent, "one", "two")
    inner = brain.stream_fn

    def closing(model: Any, context: Any, **options: Any) -> Any:
        stream = inner(model, context, **options)
        stream.result()
        session.close()  # another thread closed the session meanwhile
        return stream

    agent.compactor.stream_fn = closing
    agent.compactor.model = brain.model
    with pytest.raises(CompactionError) as failed:
        agent.compact()
    assert failed.value.code == "storage" and "could not be written" in str(failed.value)
    assert isinstance(failed.value.__cause__, SessionError)
    assert kinds(agent) == ["compaction_start", "compaction_end"]
    assert "could not be written" in agent.seen[-1].error_message
    with Session.open(str(tmp_path / "s.jsonl"), read_only=True) as reopened:
        assert not any(e.type == "compaction" for e in reopened.entries())


def test_an_abort_after_the_summary_came_back_stores_nothing(make_agent):  # abort before the write
    """``agent.abort()`` that lands after the summary answered but before it is stored used to be
    ignored: the compaction was stored and ``compact()`` returned as if not aborted."""
    session = Session.in_memory()
    brain = Brain(lambda ctx, n: f"answer {n} " + "x" * 300)
    agent = make_agent(brain, session=session, compaction=CompactionSettings(keep_recent_tokens=100))
    _talk(agent, "one", "two")
    inner = brain.stream_fn

    def aborting(model: Any, context: Any, **options: Any) -> Any:
        stream = inner(model, context, **options)
        stream.result()
        agent.compactor.abort("the user pressed Ctrl+C")  # the answer is complete, not yet stored
        return stream

    agent.compactor.stream_fn = aborting
    agent.compactor.model = brain.model
    before = [e.id for e in session.entries()]
    with pytest.raises(CompactionError) as aborted:
        agent.compact()
    assert aborted.value.code == "aborted" and brain.summary_contexts
    assert [e.id for e in session.entries()] == before
    assert agent.state.messages[0].role == "user"
    end = agent.seen[-1]
    assert (end.type, end.aborted, end.result, end.error_message) == ("compaction_end", True, None, None)


# =========================================================================== odd inputs and interruptions
# Figures JSON reads as infinity, the application's get_api_key, hooks choosing odd values, a
# summary stream without an answer and Ctrl+C: each fails (or survives) one compaction, cleanly.


def test_a_usage_that_json_reads_as_infinity_does_not_fail_every_prompt(tmp_path):  # session §7.2 valid usage
    """A session line whose usage holds a number beyond float range (``1e400``, which JSON reads as
    infinity) or NaN made the threshold check raise ``OverflowError: cannot convert float infinity
    to integer``: every later prompt of that session failed with that text."""
    path = str(tmp_path / "s.jsonl")
    with Session.create(path) as session:
        session.append_message(U("hello"))
        session.append_message(A("hi", 1, 1, total=2))
    with open(path, encoding="utf-8") as handle:
        content = handle.read()
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(content.replace('"totalTokens":2', '"totalTokens":1e400'))
    for figure in (float("inf"), float("nan")):
        estimate = estimate_context_tokens([A("hi", 3, 4, total=figure)])
        assert (estimate.usage_tokens, estimate.last_usage_index) == (7, 0)  # the parts, as for no total
        assert estimate_context_tokens([A("hi", figure, 4)]).usage_tokens == 4
    brain = Brain(lambda ctx, n: "fine", window=4000)
    with Session.open(path) as session:
        agent = Agent(brain.model, stream_fn=brain.stream_fn, session=session)
        new = agent.prompt("next")
    assert new[-1].stop_reason == "stop" and new[-1].text == "fine"


def test_an_async_get_api_key_gives_summary_requests_its_key(make_agent):  # docs: hooks may be async def
    """The loop awaits an ``async def get_api_key``; summary requests were sent with the coroutine
    object as their ``api_key`` (and the coroutine was never awaited)."""

    async def get_api_key(provider: str) -> str:
        return f"key-for-{provider}"

    brain = Brain(lambda ctx, n: f"answer {n} " + "x" * 300)
    agent = make_agent(
        brain,
        get_api_key=get_api_key,
        session=Session.in_memory(),
        compaction=CompactionSettings(keep_recent_tokens=100),
    )
    _talk(agent, "one", "two")
    agent.compact()
    assert brain.summary_options and all(o["api_key"] == "key-for-scripted" for o in brain.summary_options)


def test_a_raising_get_api_key_fails_only_the_compaction(make_agent):  # session §7.3: failures never fail the run
    """``get_api_key`` raising for the summary model's provider (one the application has no key for)
    escaped the compactor: ``compaction_start`` without ``compaction_end``, a bare KeyError from
    ``agent.compact()``, and an automatic compaction failed the run."""
    summarizer = Model(id="small", api="other", provider="other", context_window=200000, max_tokens=4096)
    keys = {"scripted": "sk-agent"}

    def get_api_key(provider: str) -> str:
        return keys[provider]  # KeyError for "other"

    history: List[Any] = []
    for i in range(6):
        history += [U(f"q{i} " + "q" * 2000), A(f"a{i} " + "a" * 2000)]
    brain = Brain(lambda ctx, n: "fine", window=4000)
    agent = make_agent(
        brain,
        messages=history,
        get_api_key=get_api_key,
        compaction_model=summarizer,
        compaction=CompactionSettings(reserve_tokens=1000, keep_recent_tokens=1000),
    )
    new = agent.prompt("next")  # over the threshold: the compaction fails, the run goes on
    assert new[-1].text == "fine" and brain.summary_contexts == []
    assert kinds(agent)[:2] == ["compaction_start", "compaction_end"]
    end = next(e for e in agent.seen if e.type == "compaction_end")
    assert "get_api_key('other') raised KeyError" in end.error_message
    agent.seen.clear()
    with pytest.raises(CompactionError) as failed:
        agent.compact()
    assert failed.value.code == "summarization_failed" and isinstance(failed.value.__cause__, KeyError)
    assert kinds(agent) == ["compaction_start", "compaction_end"]
    assert agent.state.messages[0].role == "user"


def test_a_whitespace_summary_from_before_compaction_replaces_nothing(make_agent):  # hookspecs.before_compaction
    """A hook-supplied summary of only whitespace (its own model said nothing) was stored: the
    history was replaced by an empty summary, although the same text from the ``summarize`` hook
    or the model fails the compaction."""
    session = Session.in_memory()
    hook = BeforeCompaction(CompactionDecision(summary=" \n\t"))
    agent = make_agent(
        Brain(lambda ctx, n: f"answer {n} " + "x" * 300),
        session=session,
        plugins=[hook],
        compaction=CompactionSettings(keep_recent_tokens=100),
    )
    _talk(agent, "one", "two")
    before = [e.id for e in session.entries()]
    with pytest.raises(CompactionError) as failed:
        agent.compact()
    assert failed.value.code == "summarization_failed" and "before_compaction hook returned an empty" in str(
        failed.value
    )
    assert [e.id for e in session.entries()] == before and agent.state.messages[0].role == "user"
    assert kinds(agent) == ["compaction_start", "compaction_end"] and agent.seen[-1].error_message


def test_a_summary_stream_that_ends_without_an_answer_fails_the_compaction(make_agent):  # session §7.5 errors
    """A stream function whose stream ended without a done or error event (``result()`` None) made
    ``compact()`` raise ``AttributeError: 'NoneType' object has no attribute 'usage'`` with no
    ``compaction_end``; the loop reports such a stream as an error."""
    session = Session.in_memory()
    brain = Brain(lambda ctx, n: f"answer {n} " + "x" * 300)
    agent = make_agent(brain, session=session, compaction=CompactionSettings(keep_recent_tokens=100))
    _talk(agent, "one", "two")

    def ended(model: Any, context: Any, **options: Any) -> Any:
        stream = AssistantMessageEventStream()
        stream.end()
        return stream

    agent.compactor.stream_fn, agent.compactor.model = ended, brain.model
    before = [e.id for e in session.entries()]
    with pytest.raises(CompactionError) as failed:
        agent.compact()
    assert failed.value.code == "summarization_failed" and "ended without a done or error event" in str(failed.value)
    assert [e.id for e in session.entries()] == before
    assert kinds(agent) == ["compaction_start", "compaction_end"] and agent.seen[-1].error_message


def test_ctrl_c_during_a_manual_compaction_still_ends_it(make_agent):  # compaction_start is always ended
    """A KeyboardInterrupt while ``agent.compact()`` waited for the summary propagated without a
    ``compaction_end``: a listener showing "compacting..." never learnt it stopped."""
    session = Session.in_memory()
    brain = Brain(lambda ctx, n: f"answer {n} " + "x" * 300)
    agent = make_agent(brain, session=session, compaction=CompactionSettings(keep_recent_tokens=100))
    _talk(agent, "one", "two")

    def interrupted(model: Any, context: Any, **options: Any) -> Any:
        raise KeyboardInterrupt  # Ctrl+C lands on the caller's thread, in the request

    agent.compactor.stream_fn, agent.compactor.model = interrupted, brain.model
    before = [e.id for e in session.entries()]
    with pytest.raises(KeyboardInterrupt):
        agent.compact()
    assert kinds(agent) == ["compaction_start", "compaction_end"]
    end = agent.seen[-1]
    assert (end.aborted, end.result, end.error_message) == (True, None, None)
    assert [e.id for e in session.entries()] == before and not agent.state.is_streaming
    agent.compactor.stream_fn = brain.stream_fn
    assert agent.compact().summary  # the next one works


@pytest.mark.parametrize("with_session", [False, True])
def test_a_hook_keeping_from_a_tool_result_never_keeps_it_without_its_call(make_agent, with_session):  # §7.4 4a
    """A hook's ``first_kept_entry_id`` naming a tool result: the session's context drops that
    result (its call was summarised), but without a session the transcript started with the
    orphan result, which a provider refuses on every later request."""
    history = [
        U("q1"),
        A(content=[ToolCall("c1", "read", {"path": "a.py"})], stop="toolUse"),
        ToolResultMessage("c1", "read", [TextContent("contents of a.py")]),
        A("read it"),
        U("q2"),
        A("a2"),
    ]
    options: dict = {}
    if with_session:
        session = Session.in_memory()
        for message in history:
            session.append_message(message)
        ids = [e.id for e in session.entries()]
        options["session"] = session
    else:
        ids = [f"m{i}" for i in range(len(history))]  # the ids the hook sees without a session
        options["messages"] = list(history)
    hook = BeforeCompaction(lambda preparation: CompactionDecision(summary="from the hook", first_kept_entry_id=ids[2]))
    settings = CompactionSettings(keep_recent_tokens=1)
    agent = make_agent(Brain(lambda ctx, n: "fine"), plugins=[hook], compaction=settings, **options)
    agent.compact()
    assert [m.role for m in agent.state.messages] == ["compactionSummary", "assistant", "user", "assistant"]


@pytest.mark.parametrize("stamp", [float("nan"), float("inf"), 10**20])
def test_a_message_timestamp_that_is_no_time_does_not_fail_the_run(make_agent, stamp):  # session §7.3 threshold
    """Without a session the compactor gives each transcript message a made-up entry stamped with
    its ``timestamp``: NaN, infinity or a time past what ``gmtime`` takes raised ``ValueError``/
    ``OverflowError``/``OSError`` there, before ``compaction_start``, and every prompt over the
    threshold failed with that text."""
    history: List[Any] = []
    for i in range(6):
        history += [U(f"q{i} " + "q" * 2000), A(f"a{i} " + "a" * 2000)]
    history[2] = U("q1 " + "q" * 2000, timestamp=stamp)
    brain = Brain(lambda ctx, n: "fine", window=4000)
    agent = make_agent(
        brain, messages=history, compaction=CompactionSettings(reserve_tokens=1000, keep_recent_tokens=1000)
    )
    new = agent.prompt("next")
    assert (new[-1].stop_reason, new[-1].text) == ("stop", "fine")
    ends = [e for e in agent.seen if e.type == "compaction_end"]
    assert kinds(agent)[:2] == ["compaction_start", "compaction_end"] and ends[0].result is not None
    assert agent.state.messages[0].role == "compactionSummary"


def test_newest_tool_results_over_the_budget_still_leave_something_to_compact():  # session §7.4 step 4c
    """When the newest tool results alone reach ``keep_recent_tokens``, no valid cut follows them and
    the reference falls back to the first valid cut: everything is kept and there is nothing to
    compact, whatever the settings. That stays the rule on the threshold; when the context
    overflowed, the cut is the call that made those results."""
    path = Path()
    path.msg(U("old question " + "q" * 400))
    path.msg(A("old answer " + "a" * 400))
    path.msg(U("read the big files"))
    path.msg(A(content=[ToolCall("c1", "read", {"path": "a.py"}), ToolCall("c2", "read", {"path": "b.py"})]))
    path.msg(ToolResultMessage("c1", "read", [TextContent("x" * 4000)]))
    path.msg(ToolResultMessage("c2", "read", [TextContent("y" * 4000)]))
    for budget in (0, 10, 1500):
        assert find_cut_point(path.entries, 0, 6, budget, overflowing=True) == CutPoint(3, 2, True)  # the call
        assert find_cut_point(path.entries, 0, 6, budget) == CutPoint(0, -1, False)  # the reference's rule
    assert prepare_compaction(path.entries, CompactionSettings(keep_recent_tokens=10)).empty  # type: ignore[union-attr]
    preparation = prepare_compaction(path.entries, CompactionSettings(keep_recent_tokens=10), overflowing=True)
    assert preparation is not None and not preparation.empty
    assert [m.role for m in preparation.messages_to_summarize] == ["user", "assistant"]
    assert [m.role for m in preparation.turn_prefix_messages] == ["user"]


@pytest.mark.parametrize("with_session", [False, True])
def test_an_overflow_right_after_big_tool_results_is_recovered(make_agent, with_session):  # session §7.3 overflow
    """A turn read two big files; the next request overflowed. The recovery found "nothing to
    compact: the whole context fits in keep_recent_tokens" (the newest results alone reached the
    budget) and the run failed, although everything before that turn could be summarised."""

    def plan(ctx: Any, n: int) -> Any:
        if n == 1:
            return [ToolCall("c1", "read", {"path": "a.py"}), ToolCall("c2", "read", {"path": "b.py"})]
        if n == 2 and not any(getattr(m, "role", None) == "compactionSummary" for m in ctx.messages):
            return ("error", OVERFLOW)
        return f"answer {n} " + "x" * 400

    read = AgentTool(
        "read",
        "read a file",
        {"type": "object", "properties": {"path": {"type": "string"}}},
        lambda call_id, args, signal, on_update: AgentToolResult([TextContent(args["path"] + " " + "z" * 40000)]),
    )
    brain = Brain(plan)
    options = {"session": Session.in_memory()} if with_session else {}
    agent = make_agent(brain, tools=[read], compaction=CompactionSettings(keep_recent_tokens=1000), **options)
    agent.prompt("one")
    new = agent.prompt("read both files")
    ends = [e for e in agent.seen if e.type == "compaction_end"]
    assert len(ends) == 1 and ends[0].error_message is None and ends[0].result is not None
    assert new[-1].stop_reason == "stop" and new[-1].text.startswith("answer 3")
    roles = [m.role for m in agent.state.messages]
    assert roles == ["compactionSummary", "assistant", "toolResult", "toolResult", "assistant"]


def test_a_recoverable_length_stop_with_tool_calls_is_compacted_before_the_next_request(make_agent):  # §7.3 v4
    """A response cut off by a full context in the middle of a tool call: its call is rejected and
    the run goes on, so the recovery at the end of the run never sees it. The turn hook still left
    it "to the recovery" and sent the next request on the full context (a wasted request that
    overflows or is cut off again)."""

    def plan(ctx: Any, n: int) -> Any:
        if n == 2:
            cut = _cut_off(brain, 40)
            cut.content = [TextContent("writing it"), ToolCall("w1", "write", {"path": "big.py", "content": "..."})]
            return cut
        return f"answer {n} " + "x" * 400

    brain = Brain(plan, window=4000)
    agent = make_agent(brain, compaction=CompactionSettings(reserve_tokens=1000, keep_recent_tokens=10))
    _talk(agent, "one", "two")
    new = agent.prompt("three")
    assert [(e.type, e.reason) for e in agent.seen if e.type.startswith("compaction")][:2] == [
        ("compaction_start", "threshold"),
        ("compaction_end", "threshold"),
    ]
    after_cut = brain.agent_contexts[3].messages  # the request after the rejected call
    assert after_cut[0].role == "user" and "<summary>" in after_cut[0].content[0].text
    assert new[-1].text.startswith("answer 3")


def test_an_async_prepare_next_turn_keeps_its_update_when_the_turn_compacts(make_agent):  # agent-loop §5
    """The compactor chains the agent's ``prepare_next_turn`` and called it without awaiting: with
    an ``async def`` hook, a turn that compacted dropped the hook's coroutine unrun (its update
    lost, "coroutine was never awaited")."""
    window, settings = 16000, CompactionSettings(reserve_tokens=4000, keep_recent_tokens=3000)

    def plan(ctx, n):
        if n == 0:
            return [TextContent("reading"), ToolCall("c1", "read", {"path": "big.py"})]
        return "done"

    read = AgentTool(
        "read",
        "read a file",
        {"type": "object", "properties": {"path": {"type": "string"}}},
        lambda call_id, args, signal, on_update: AgentToolResult([TextContent("line of code\n" * 4000)]),
    )
    ran: List[str] = []

    async def escalate(ctx: Any, signal: Any) -> Any:
        ran.append(ctx.message.stop_reason)
        return {"thinking_level": "high"}

    brain = Brain(plan, window=window, report_usage=True)
    agent = make_agent(brain, tools=[read], compaction=settings, prepare_next_turn=escalate)
    agent.prompt("read big.py")
    assert [e.reason for e in agent.seen if e.type == "compaction_end"] == ["threshold"]
    assert ran == ["toolUse", "stop"]  # the hook ran after the compacting turn too
    scripted = brain.scripted
    levels = [
        o.get("reasoning")
        for c, o in zip(scripted.contexts, scripted.options)
        if c.system_prompt != SUMMARIZER_SYSTEM_PROMPT
    ]
    assert levels == [None, "high"]  # the request after the compacting turn took the hook's level


def _switch_to(model: Model) -> Any:
    """A ``prepare_next_turn`` that moves the rest of the run to ``model``."""
    return lambda ctx, signal: {"model": model}


def test_the_threshold_after_a_turn_is_the_model_prepare_next_turn_switched_to(make_agent):  # agent-loop §2.13
    """The run goes on with a model of a smaller window: compacted for that window before the
    request (the agent's own model would have let 3000 tokens through to a 4000-token window)."""
    small = Model(id="small", api="scripted", provider="scripted", context_window=4000, max_tokens=1000)
    history: List[Any] = []
    for i in range(3):
        history += [U(f"q{i} " + "q" * 2000), A(f"a{i} " + "a" * 2000)]
    look = AgentTool("look", "look", {"type": "object"}, lambda call_id, args, signal, on_update: "ok")
    brain = Brain(lambda ctx, n: [ToolCall("c1", "look", {})] if n == 0 else "done")
    agent = make_agent(
        brain,
        tools=[look],
        messages=history,
        prepare_next_turn=_switch_to(small),
        compaction=CompactionSettings(reserve_tokens=1000, keep_recent_tokens=1000),
    )
    agent.prompt("next")
    assert [(e.type, e.reason) for e in agent.seen if e.type.startswith("compaction")] == [
        ("compaction_start", "threshold"),
        ("compaction_end", "threshold"),
    ]
    request = brain.agent_contexts[1].messages
    assert "<summary>" in request[0].content[0].text
    assert sum(estimate_tokens(m) for m in request) <= 4000 - 1000
    assert agent.state.model is brain.model  # the switch is the run's, not the agent's


def test_an_overflow_of_the_model_prepare_next_turn_switched_to_is_recovered(make_agent):  # session §7.3 overflow
    """The model the run switched to overflows: compacted once and retried with that model."""
    small = Model(id="small", api="scripted", provider="scripted", context_window=200000, max_tokens=1000)
    look = AgentTool("look", "look", {"type": "object"}, lambda call_id, args, signal, on_update: "ok")

    def plan(ctx: Any, n: int) -> Any:
        if n == 1:  # a provider stamps its answer with the model it was asked
            return AssistantMessage(
                [], api="scripted", provider="scripted", model="small", stop_reason="error", error_message=OVERFLOW
            )
        return [ToolCall("c1", "look", {})] if n == 0 else f"answer {n} " + "x" * 400

    brain = Brain(plan)
    models: List[str] = []

    def stream_fn(model: Any, context: Any, **options: Any) -> Any:
        if context.system_prompt != SUMMARIZER_SYSTEM_PROMPT:
            models.append(model.id)
        return brain.stream_fn(model, context, **options)

    agent = make_agent(
        brain,
        messages=[U("q " + "q" * 2000), A("a " + "a" * 2000)],
        tools=[look],
        prepare_next_turn=_switch_to(small),
        compaction=CompactionSettings(keep_recent_tokens=10),
    )
    agent.stream_fn = stream_fn
    new = agent.prompt("next")
    assert [(e.type, e.reason) for e in agent.seen if e.type.startswith("compaction")] == [
        ("compaction_start", "overflow"),
        ("compaction_end", "overflow"),
    ]
    assert models == ["brain", "small", "small"]  # the retry goes on with the run's model
    assert new[-1].text.startswith("answer 2")
    assert not any(getattr(m, "stop_reason", None) == "error" for m in agent.state.messages)


def test_a_model_returned_as_the_whole_turn_update_fails_the_run_when_compacting(make_agent):  # agent-loop §2.13
    """``return small`` instead of ``{"model": small}``: the run fails naming the mistake at once,
    also after a turn that compacts (the compaction's update used to replace the answer without a
    word, and the run made one more request)."""
    small = Model(id="small", api="scripted", provider="scripted", context_window=4000, max_tokens=1000)
    history: List[Any] = []
    for i in range(3):  # under the threshold before the run, over it after the tool's result
        history += [U(f"q{i} " + "q" * 1600), A(f"a{i} " + "a" * 1600)]
    look = AgentTool("look", "look", {"type": "object"}, lambda call_id, args, signal, on_update: "x" * 3000)
    brain = Brain(lambda ctx, n: [ToolCall("c1", "look", {})] if n == 0 else "done", window=4000)
    agent = make_agent(
        brain,
        tools=[look],
        messages=history,
        prepare_next_turn=lambda ctx, signal: small,
        compaction=CompactionSettings(reserve_tokens=1000, keep_recent_tokens=1000),
    )
    agent.prompt("next")
    last = agent.state.messages[-1]
    assert last.stop_reason == "error" and "prepare_next_turn returned a Model, not an AgentLoopTurnUpdate" in (
        last.error_message or ""
    )
    assert len(brain.agent_contexts) == 1  # no request after the unusable answer


def test_a_compaction_of_a_long_session_decodes_what_the_context_holds(make_agent, tmp_path, count_decodes):  # scale
    """Every compaction decoded the session's whole root→leaf branch (100,000 entries: 1.5 s and
    275 MB, for each compaction of a long session's life), though it reads only what follows the
    newest compaction's first kept entry. That part alone is decoded now, and the compaction is
    the one the whole branch gives; a ``before_compaction`` hook still gets the whole branch."""
    path = tmp_path / "long.jsonl"
    with Session.create(path, cwd="/w") as s:
        for n in range(1500):
            s.append_message(UserMessage(f"question {n}"))
            s.append_message(AssistantMessage([TextContent(f"answer {n} " + "x" * 200)]))
        kept = s.storage.entry_ids()[-4]
        s.append_compaction("## Goal\nthe long story", kept, 90000, {"readFiles": [], "modifiedFiles": []})
        for n in range(1500, 1510):
            s.append_message(UserMessage(f"question {n}"))
            s.append_message(AssistantMessage([TextContent(f"answer {n} " + "x" * 200)]))
    settings = CompactionSettings(keep_recent_tokens=100)
    with Session.open(path) as session:
        expected = prepare_compaction(session.get_branch(), settings)
        fetched = count_decodes(session.storage)
        agent = make_agent(Brain(lambda ctx, n: "ok"), session=session, compaction=settings)
        fetched.clear()  # what resuming read (its context) is not the compaction's
        agent.compact()
        assert len(fetched) < 40, f"{len(fetched)} entries decoded for a compaction of the last 24"
        entry = session.get_branch()[-1]
        assert entry.first_kept_entry_id == expected.first_kept_entry_id
        assert entry.tokens_before == agent.seen[0].tokens_before == expected.tokens_before

    seen: List[int] = []

    class Watcher:
        @hookimpl
        def before_compaction(self, preparation, branch_entries, custom_instructions, reason, signal):
            seen.append(len(branch_entries))
            seen.append(preparation.first_kept_entry_index)

    with Session.open(path) as session:
        brief = CompactionSettings(keep_recent_tokens=1)
        agent = make_agent(Brain(lambda ctx, n: "ok"), session=session, compaction=brief, plugins=[Watcher()])
        agent.prompt("one more")
        agent.compact()
        branch = session.get_branch()
        assert seen[0] == len(branch) - 1  # the whole root→leaf branch (the new compaction excluded)
        assert branch[seen[1]].id == branch[-1].first_kept_entry_id

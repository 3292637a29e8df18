"""Compaction: token accounting, cut points, preparation and summary generation (spec session.md §7,
§12 H and I). Agent integration (manual, threshold, overflow, long runs) is in test_compaction_agent.py."""

from __future__ import annotations

from typing import Any, List, Optional

import pluggy
import pytest

from agentcore import hookspecs
from agentcore.hookspecs import hookimpl
from agentcore.session import Session
from agentcore.session.compaction import (CompactionError, compact, find_cut_point,
                                          find_turn_start_index, generate_summary,
                                          path_context_messages, prepare_compaction)
from agentcore.session.compaction_prompts import (SUMMARIZER_SYSTEM_PROMPT, FileOps,
                                                  compute_file_lists, format_file_lists,
                                                  serialize_conversation)
from agentcore.session.compaction_tokens import (CompactionSettings, calculate_context_tokens,
                                                 estimate_context_tokens, estimate_tokens,
                                                 get_last_assistant_usage, live_context_tokens,
                                                 should_compact)
from agentcore.session.entries import (BranchSummaryEntry, CompactionEntry, CustomMessageEntry,
                                       MessageEntry, ModelChangeEntry, ThinkingLevelChangeEntry)
from agentcore.testing import ScriptedModel, error, text
from agentcore.types import (AssistantMessage, BashExecutionMessage, ImageContent, Model, TextContent,
                             ThinkingContent, ToolCall, ToolResultMessage, Usage, UserMessage,
                             message_from_dict)

TS = "2025-01-01T00:00:00.000Z"


# --------------------------------------------------------------------------- builders (spec §12 notation)


def U(t: str, timestamp: int = 1) -> UserMessage:
    return UserMessage([TextContent(t)], timestamp=timestamp)


def A(t: str = "", inp: int = 0, out: int = 0, cache_read: int = 0, cache_write: int = 0,
      total: int = 0, stop: str = "stop", content: Optional[List[Any]] = None, timestamp: int = 1) -> AssistantMessage:
    return AssistantMessage(content if content is not None else [TextContent(t)], api="anthropic-messages",
                            provider="anthropic", model="claude-sonnet-4-5",
                            usage=Usage(inp, out, cache_read, cache_write, total), stop_reason=stop,
                            timestamp=timestamp)


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
    return Model(id="summarizer", api="scripted", provider="scripted", reasoning=reasoning,
                 context_window=window, max_tokens=max_tokens)


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
    assert estimate_tokens(U("\U0001F600" * 2)) == 1  # UTF-16 code units, as the reference counts


def test_estimate_context_tokens():  # session §12 scenario 68
    assert estimate_context_tokens([U("no usage")]).last_usage_index is None
    est = estimate_context_tokens([A(inp=10, out=5, cache_read=3, cache_write=2, total=20), U("tail")])
    assert (est.usage_tokens, est.last_usage_index, est.tokens) == (20, 0, 21)
    est = estimate_context_tokens([U("Hello"), A(total=20), U("continue"),
                                   A(content=[ThinkingContent("Partial thinking")])])
    assert (est.usage_tokens, est.last_usage_index, est.trailing_tokens, est.tokens) == (20, 1, 6, 26)


def test_live_context_tokens_ignores_usage_from_before_the_compaction():  # session §13 pitfall 3
    from agentcore.types import CompactionSummaryMessage

    kept = A("kept answer", total=90000, timestamp=100)
    messages = [CompactionSummaryMessage("S", 90000, timestamp=200), U("kept", timestamp=50), kept,
                U("new", timestamp=300)]
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
    kept_tokens = sum(estimate_tokens(e.message) for e in p.entries[cut.first_kept_entry_index:])
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
    text = serialize_conversation([
        U("hi"), A(content=[ThinkingContent("hmm"), TextContent("ok"), call]),
        ToolResultMessage("c", "edit", [TextContent("done")]), A(""),
    ])
    assert text == ('[User]: hi\n\n[Assistant thinking]: hmm\n\n[Assistant]: ok\n\n'
                    '[Assistant tool calls]: edit(path="a.py", n=2)\n\n[Tool result]: done')


def test_file_lists():  # session §12 scenario 78
    read, modified = compute_file_lists(FileOps({"a.ts", "b.ts"}, {"c.ts"}, {"b.ts"}))
    assert (read, modified) == (["a.ts"], ["b.ts", "c.ts"])
    assert format_file_lists(read, modified) == (
        "\n\n<read-files>\na.ts\n</read-files>\n\n<modified-files>\nb.ts\nc.ts\n</modified-files>")
    assert format_file_lists([], []) == ""


# --------------------------------------------------------------------------- I. with a scripted model


def test_generate_summary_prompt_shape():  # session §12 scenario 79
    scripted = ScriptedModel(["the summary"])
    out, _ = generate_summary([U("do it"), A("done")], model(), 16384, stream_fn=scripted.stream_fn,
                              previous_summary="old summary", custom_instructions="focus")
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
        generate_summary([U("x")], model(reasoning=reasoning), 1000, stream_fn=scripted.stream_fn,
                         thinking_level=level)
        assert scripted.options[0].get("reasoning") == expected


def test_summary_errors_are_mapped():  # session §12 scenario 81
    with pytest.raises(CompactionError) as failed:
        generate_summary([U("x")], model(), 1000, stream_fn=ScriptedModel([error("boom")]).stream_fn)
    assert (failed.value.code, str(failed.value)) == ("summarization_failed", "Summarization failed: boom")
    with pytest.raises(CompactionError) as aborted:
        generate_summary([U("x")], model(), 1000,
                         stream_fn=ScriptedModel([error("stopped", stop_reason="aborted")]).stream_fn)
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

"""Branch navigation and branch summaries (spec session.md §8, §12 J)."""

from __future__ import annotations

from typing import Any, List

import pluggy
import pytest

from agentcore import hookspecs
from agentcore.hookspecs import hookimpl
from agentcore.session import Session, SessionError
from agentcore.session.branch_summary import (
    BRANCH_SUMMARY_MAX_TOKENS,
    NO_CONTENT_SUMMARY,
    collect_entries_for_branch_summary,
    generate_branch_summary,
    navigate_tree,
    prepare_branch_entries,
)
from agentcore.session.compaction import CompactionError
from agentcore.session.compaction_prompts import BRANCH_SUMMARY_PREAMBLE
from agentcore.testing import ScriptedModel, error
from agentcore.types import AssistantMessage, Model, TextContent, ToolCall, ToolResultMessage, Usage, UserMessage


def U(t: str) -> UserMessage:
    return UserMessage([TextContent(t)], timestamp=1)


def A(t: str = "", content: Any = None) -> AssistantMessage:
    return AssistantMessage(
        content if content is not None else [TextContent(t)],
        api="anthropic-messages",
        provider="anthropic",
        model="claude-sonnet-4-5",
        usage=Usage(),
        stop_reason="stop",
    )


def model(window: int = 200000) -> Model:
    return Model(id="summarizer", api="scripted", provider="scripted", context_window=window, max_tokens=8192)


def tree() -> Any:
    """root → common → a1 → a2 (leaf) and common → target."""
    s = Session.in_memory()
    ids = {"root": s.append_message(U("root")), "common": s.append_message(A("common"))}
    ids["a1"] = s.append_message(U("explore: read the config"))
    ids["a2"] = s.append_message(A(content=[ToolCall("c1", "read", {"path": "config.toml"})]))
    ids["r"] = s.append_message(ToolResultMessage("c1", "read", [TextContent("key = 1")]))
    ids["a3"] = s.append_message(A("the key is 1"))
    s.move_to(ids["common"])
    ids["target"] = s.append_message(U("target question"))
    s.move_to(ids["a3"])
    return s, ids


def test_collect_entries_stops_at_the_common_ancestor():  # session §12 scenario 86
    s, ids = tree()
    collected = collect_entries_for_branch_summary(s, ids["a3"], ids["target"])
    assert [e.id for e in collected.entries] == [ids["a1"], ids["a2"], ids["r"], ids["a3"]]
    assert collected.common_ancestor_id == ids["common"]
    assert ids["root"] not in [e.id for e in collected.entries]
    none = collect_entries_for_branch_summary(s, None, ids["target"])
    assert (none.entries, none.common_ancestor_id) == ([], None)


def test_prepare_branch_entries_skips_results_tracks_files_and_budget():  # session §12 scenario 87
    s, ids = tree()
    entries = collect_entries_for_branch_summary(s, ids["a3"], ids["target"]).entries
    prep = prepare_branch_entries(entries)
    assert [m.role for m in prep.messages] == ["user", "assistant", "assistant"]
    assert prep.file_ops.read == {"config.toml"}

    s.move_to(ids["common"])
    s.append_branch_summary(
        ids["common"],
        "earlier branch " + "s" * 385,  # 100 tokens
        {"readFiles": ["old.py"], "modifiedFiles": ["changed.py"]},
    )
    s.append_message(U("x" * 400))
    s.append_message(A("y" * 400))
    entries = s.get_branch()[2:]
    prep = prepare_branch_entries(entries)
    assert "old.py" in prep.file_ops.read and "changed.py" in prep.file_ops.edited
    assert [m.role for m in prepare_branch_entries(entries, token_budget=150).messages] == ["assistant"]
    newest_only = prepare_branch_entries(entries, token_budget=210)  # 200 used > 90%: summary left out
    assert [m.role for m in newest_only.messages] == ["user", "assistant"]  # newest first within budget
    squeezed = prepare_branch_entries(entries, token_budget=250)  # < 90% used: the summary still goes in
    assert [m.role for m in squeezed.messages] == ["branchSummary", "user", "assistant"]


def test_a_reserve_as_large_as_the_window_still_limits_what_is_sent():  # session §8 budget
    s = Session.in_memory()
    for i in range(20):
        s.append_message(U(f"question {i} " + "q" * 4000))  # about 1000 tokens each
        s.append_message(A(f"answer {i}"))
    scripted = ScriptedModel(["what happened"])
    small = model(window=8000)  # the default reserve (16384) is larger than the whole window
    generate_branch_summary(s.get_branch(), small, stream_fn=scripted.stream_fn)
    prompt = scripted.contexts[0].messages[0].content[0].text
    assert "question 19 " in prompt  # the newest messages are sent ...
    assert "question 0 " not in prompt  # ... not the whole branch, which cannot fit
    assert len(prompt) // 4 < 8000


def test_hook_written_branch_details_are_not_trusted():  # session §8 pass 1 (fromHook)
    s = Session.in_memory()
    s.append_branch_summary(None, "by a plugin", {"readFiles": ["x.py"]}, from_hook=True)
    assert prepare_branch_entries(s.get_branch()).file_ops.read == set()


def test_no_content_means_no_model_call():  # session §12 scenario 88
    s = Session.in_memory()
    s.append_thinking_level_change("high")
    scripted = ScriptedModel([])
    result = generate_branch_summary(s.get_branch(), model(), stream_fn=scripted.stream_fn)
    assert result.summary == NO_CONTENT_SUMMARY and scripted.calls == 0


def test_generated_branch_summary_layout():  # session §8 generation
    s, ids = tree()
    entries = collect_entries_for_branch_summary(s, ids["a3"], ids["target"]).entries
    scripted = ScriptedModel(["## Goal\nFind the key"])
    result = generate_branch_summary(
        entries, model(), stream_fn=scripted.stream_fn, custom_instructions="mention the key"
    )
    assert result.summary == (
        BRANCH_SUMMARY_PREAMBLE + "## Goal\nFind the key" + "\n\n<read-files>\nconfig.toml\n</read-files>"
    )
    assert result.details == {"readFiles": ["config.toml"], "modifiedFiles": []}
    prompt = scripted.contexts[0].messages[0].content[0].text
    assert prompt.startswith("<conversation>\n[User]: explore: read the config")
    assert "[Tool result]" not in prompt and prompt.endswith("Additional focus: mention the key")
    assert scripted.options[0]["max_tokens"] == BRANCH_SUMMARY_MAX_TOKENS
    replaced = ScriptedModel(["x"])
    generate_branch_summary(
        entries, model(), stream_fn=replaced.stream_fn, custom_instructions="ONLY THIS", replace_instructions=True
    )
    assert replaced.contexts[0].messages[0].content[0].text.endswith("</conversation>\n\nONLY THIS")


def test_branch_summary_errors():  # session §8 error mapping
    s, ids = tree()
    entries = collect_entries_for_branch_summary(s, ids["a3"], ids["target"]).entries
    with pytest.raises(CompactionError) as failed:
        generate_branch_summary(entries, model(), stream_fn=ScriptedModel([error("down")]).stream_fn)
    assert (failed.value.code, str(failed.value)) == ("summarization_failed", "Branch summary failed: down")
    with pytest.raises(CompactionError) as aborted:
        generate_branch_summary(
            entries, model(), stream_fn=ScriptedModel([error("stop", stop_reason="aborted")]).stream_fn
        )
    assert aborted.value.code == "aborted"


def test_navigate_to_a_user_message_summarises_and_returns_its_text():  # session §12 scenario 89
    s, ids = tree()
    scripted = ScriptedModel(["branch summary text"])
    before = len(s.entries())
    outcome = navigate_tree(s, ids["target"], summarize=True, model=model(), stream_fn=scripted.stream_fn)
    assert outcome.leaf_id == ids["common"]  # the target's parent
    assert outcome.editor_text == "target question"
    summary_entry = s.get_entry(outcome.summary_entry_id)
    assert summary_entry.type == "branch_summary" and summary_entry.parent_id == ids["common"]
    assert s.leaf_id == summary_entry.id and summary_entry.details == {
        "readFiles": ["config.toml"],
        "modifiedFiles": [],
    }
    context = s.build_context().messages
    assert [m.role for m in context] == ["user", "assistant", "branchSummary"]
    assert "branch summary text" in context[-1].summary
    assert len(s.entries()) == before + 2  # a leaf move and the summary; nothing deleted
    same = navigate_tree(s, s.leaf_id, summarize=True, model=model(), stream_fn=scripted.stream_fn)
    assert not same.moved and len(s.entries()) == before + 2 and scripted.calls == 1


def test_navigate_without_summary_and_to_a_non_user_entry():  # session §8 step 5
    s, ids = tree()
    outcome = navigate_tree(s, ids["common"])
    assert (outcome.leaf_id, outcome.editor_text, outcome.summary_entry_id) == (ids["common"], None, None)
    assert s.leaf_id == ids["common"]


def test_navigate_errors_write_nothing():  # session §8 step 1 and failure semantics
    s, ids = tree()
    count = len(s.entries())
    with pytest.raises(SessionError) as missing:
        navigate_tree(s, "nope")
    assert missing.value.code == "not_found"
    with pytest.raises(CompactionError):
        navigate_tree(
            s, ids["target"], summarize=True, model=model(), stream_fn=ScriptedModel([error("down")]).stream_fn
        )
    assert len(s.entries()) == count and s.leaf_id == ids["a3"]


def test_navigate_with_a_label_and_a_summarize_hook():  # hookspecs.summarize kind "branch"
    seen: List[str] = []

    class Plugin:
        @hookimpl
        def summarize(self, kind, messages):
            seen.append(kind)
            return f"{len(messages)} messages explored"

    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    pm.register(Plugin())
    s, ids = tree()
    scripted = ScriptedModel([])
    outcome = navigate_tree(
        s, ids["common"], summarize=True, model=model(), stream_fn=scripted.stream_fn, plugins=pm, label="fork point"
    )
    assert seen == ["branch"] and scripted.calls == 0
    assert "3 messages explored" in outcome.summary.summary
    assert s.get_label(ids["common"]) == "fork point"


def test_agent_navigation_reloads_the_transcript():  # issue 6 item 6: the Agent equivalent
    from agentcore.agent import Agent
    from agentcore.session.compactor import Compactor

    s, ids = tree()
    scripted = ScriptedModel(["what happened"], model=model())
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn, session=s)
    assert len(agent.state.messages) == 6
    outcome = Compactor(agent).navigate_tree(ids["target"], summarize=True)
    assert outcome.editor_text == "target question"
    assert [m.role for m in agent.state.messages] == ["user", "assistant", "branchSummary"]


# --------------------------------------------------------------------------- before_branch_summary hook
# session §8 step 3: the hook may cancel, replace the summary, or override instructions/label.

from agentcore.session.branch_summary import TreeDecision, TreePreparation  # noqa: E402


class BeforeBranch:
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.seen: List[TreePreparation] = []

    @hookimpl
    def before_branch_summary(self, preparation, signal):
        assert not signal.aborted
        self.seen.append(preparation)
        return self.answer


def _pm(*plugins: Any) -> Any:
    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    for plugin in plugins:
        pm.register(plugin)
    return pm


def test_a_hook_can_cancel_a_navigation():  # session §8 step 3 (cancel) / §12 scenario 85 analogue
    s, ids = tree()
    hook = BeforeBranch(TreeDecision(cancel=True))
    count = len(s.entries())
    scripted = ScriptedModel(["never"])
    outcome = navigate_tree(
        s, ids["target"], summarize=True, model=model(), stream_fn=scripted.stream_fn, plugins=_pm(hook), label="x"
    )
    assert outcome.cancelled and not outcome.moved and outcome.leaf_id == ids["a3"]
    assert len(s.entries()) == count and s.leaf_id == ids["a3"] and scripted.calls == 0
    prep = hook.seen[0]
    assert (prep.target_id, prep.old_leaf_id, prep.common_ancestor_id, prep.user_wants_summary, prep.label) == (
        ids["target"],
        ids["a3"],
        ids["common"],
        True,
        "x",
    )
    assert [e.id for e in prep.entries_to_summarize] == [ids["a1"], ids["a2"], ids["r"], ids["a3"]]


def test_a_hook_supplied_branch_summary_is_stored_from_hook():  # session §8 step 3 (replace the summary)
    s, ids = tree()
    hook = BeforeBranch({"summary": {"summary": "tried the config", "details": {"readFiles": ["hook.toml"]}}})
    scripted = ScriptedModel([])
    outcome = navigate_tree(
        s, ids["target"], summarize=True, model=model(), stream_fn=scripted.stream_fn, plugins=_pm(hook)
    )
    assert scripted.calls == 0 and outcome.summary.from_hook
    entry = s.get_entry(outcome.summary_entry_id)
    assert (entry.summary, entry.from_hook, entry.details) == ("tried the config", True, {"readFiles": ["hook.toml"]})
    assert entry.to_dict()["fromHook"] is True
    assert prepare_branch_entries([entry]).file_ops.read == set()  # hook details are not trusted later


def test_a_hook_summary_is_ignored_when_no_summary_was_requested():  # session §8 step 3 (userWantsSummary)
    s, ids = tree()
    hook = BeforeBranch({"summary": "unwanted"})
    outcome = navigate_tree(s, ids["target"], plugins=_pm(hook))
    assert outcome.summary is None and outcome.summary_entry_id is None and not hook.seen[0].user_wants_summary
    assert [e.id for e in hook.seen[0].entries_to_summarize] == [ids["a1"], ids["a2"], ids["r"], ids["a3"]]


def test_a_hook_can_override_instructions_and_label():  # session §8 step 3 (override instructions/label)
    s, ids = tree()
    hook = BeforeBranch({"customInstructions": "only the config", "replaceInstructions": True, "label": "hooked"})
    scripted = ScriptedModel(["summary"])
    navigate_tree(
        s,
        ids["common"],
        summarize=True,
        model=model(),
        stream_fn=scripted.stream_fn,
        plugins=_pm(hook),
        custom_instructions="everything",
        label="mine",
    )
    prompt = scripted.contexts[0].messages[0].content[0].text
    assert prompt.endswith("only the config") and "everything" not in prompt and "Additional focus" not in prompt
    assert s.get_label(ids["common"]) == "hooked"
    s2, ids2 = tree()
    scripted2 = ScriptedModel(["summary"])
    navigate_tree(
        s2,
        ids2["common"],
        summarize=True,
        model=model(),
        stream_fn=scripted2.stream_fn,
        plugins=_pm(BeforeBranch(TreeDecision(custom_instructions="focus from hook"))),
    )
    assert scripted2.contexts[0].messages[0].content[0].text.endswith("Additional focus: focus from hook")


def test_a_failing_branch_hook_writes_nothing():  # hookspecs.before_branch_summary: exceptions and bad results
    class Raising:
        @hookimpl
        def before_branch_summary(self):
            raise ValueError("broken plugin")

    for plugin, text in ((Raising(), "raised ValueError: broken plugin"), (BeforeBranch(42), "returned a int")):
        s, ids = tree()
        count = len(s.entries())
        with pytest.raises(CompactionError) as failed:
            navigate_tree(s, ids["target"], summarize=True, model=model(), plugins=_pm(plugin))
        assert failed.value.code == "summarization_failed" and text in str(failed.value)
        assert len(s.entries()) == count and s.leaf_id == ids["a3"]


def test_agent_navigation_asks_the_agents_plugins():  # session §8 step 3 through agent.navigate_tree
    from agentcore.agent import Agent

    s, ids = tree()
    scripted = ScriptedModel([], model=model())
    hook = BeforeBranch(TreeDecision(summary="agent hook summary"))
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn, session=s, plugins=[hook])
    outcome = agent.navigate_tree(ids["target"], summarize=True)
    assert scripted.calls == 0 and hook.seen and outcome.summary.summary == "agent hook summary"
    assert agent.state.messages[-1].role == "branchSummary"
    assert agent.state.messages[-1].summary == "agent hook summary"


def test_navigate_to_a_leaf_entry_that_holds_a_branch(tmp_path):  # issue 10.4 class: move_to's tree rule
    """A file written before leaf entries were parented at their target: another writer appended
    under the leaf entry "L", which is therefore a tree node (it holds u3) and a valid target."""
    import json

    def entry(entry_id: str, parent: Any) -> dict:
        return {
            "type": "message",
            "id": entry_id,
            "parentId": parent,
            "timestamp": "2025-01-01T00:00:01.000Z",
            "message": {"role": "user", "content": entry_id, "timestamp": 1},
        }

    lines = [
        {"type": "session", "version": 3, "id": "s", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/w"},
        entry("u1", None),
        entry("u2", "u1"),
        {"type": "leaf", "id": "L", "parentId": "u2", "timestamp": "2025-01-01T00:00:02.000Z", "targetId": "u1"},
        entry("u3", "L"),
    ]
    path = tmp_path / "old.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with Session.open(path) as s:
        outcome = navigate_tree(s, "L")  # move_to("L") accepts it too
        assert s.leaf_id == "L" and outcome.leaf_id == "L"


# --------------------------------------------------------------------------- usage of failed summaries
# session §8: a branch summary request the provider answered is billed even when it fails; its
# usage reaches the caller in CompactionError.usage, and nothing is written to the session.

from agentcore.testing import ScriptedResponse  # noqa: E402
from agentcore.types import UsageCost  # noqa: E402

BILLED = Usage(900, 120, 30, 0, 1050, UsageCost(0.0027, 0.0018, 0.00001, 0, 0.00451))


def _figures(usage: Any) -> Any:
    if usage is None:
        return None
    return (usage.input, usage.output, usage.cache_read, usage.cache_write, usage.total_tokens, usage.cost.total)


@pytest.mark.parametrize(
    "answer, code",
    [
        (ScriptedResponse([TextContent("## Goal")], "aborted", "stopped", usage=BILLED), "aborted"),
        (ScriptedResponse([], "error", "overloaded", usage=BILLED), "summarization_failed"),
    ],
    ids=["aborted", "error"],
)
def test_a_failed_branch_summary_reports_the_usage_it_was_billed(answer, code):  # session §8 errors
    s, ids = tree()
    entries = collect_entries_for_branch_summary(s, ids["a3"], ids["target"]).entries
    with pytest.raises(CompactionError) as failed:
        generate_branch_summary(entries, model(), stream_fn=ScriptedModel([answer]).stream_fn)
    assert failed.value.code == code and _figures(failed.value.usage) == _figures(BILLED)
    count = len(s.entries())
    with pytest.raises(CompactionError) as navigated:
        navigate_tree(s, ids["target"], summarize=True, model=model(), stream_fn=ScriptedModel([answer]).stream_fn)
    assert _figures(navigated.value.usage) == _figures(BILLED)
    assert len(s.entries()) == count and s.leaf_id == ids["a3"]  # nothing written


def test_agent_navigation_failure_reports_the_usage_too():  # session §8 through agent.navigate_tree
    from agentcore.agent import Agent

    s, ids = tree()
    failing = ScriptedResponse([TextContent("## Go")], "aborted", "stopped", usage=BILLED)
    scripted = ScriptedModel([failing], model=model())
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn, session=s)
    with pytest.raises(CompactionError) as failed:
        agent.navigate_tree(ids["target"], summarize=True)
    assert failed.value.code == "aborted" and _figures(failed.value.usage) == _figures(BILLED)
    assert s.leaf_id == ids["a3"] and len(agent.state.messages) == 6


def test_a_failing_summarize_hook_has_no_usage_to_report():  # hookspecs.summarize: no model call
    class Broken:
        @hookimpl
        def summarize(self):
            raise RuntimeError("no")

    s, ids = tree()
    entries = collect_entries_for_branch_summary(s, ids["a3"], ids["target"]).entries
    with pytest.raises(CompactionError) as failed:
        generate_branch_summary(entries, model(), stream_fn=ScriptedModel([]).stream_fn, plugins=_pm(Broken()))
    assert failed.value.usage is None


def test_agent_abort_cancels_the_summary_of_a_navigation():  # agent.abort() as for compact()
    """``agent.abort()`` during ``agent.navigate_tree(..., summarize=True)`` ends the summary
    request: ``CompactionError("aborted")``, nothing written. It used to be ignored (the busy
    signal was not passed on), so the navigation could not be stopped, from rpc's ``abort`` or
    chat's Ctrl+C alike."""
    import threading

    from agentcore.agent import Agent

    s, ids = tree()
    scripted = ScriptedModel([" ".join(["slow"] * 200)], tokens_per_second=2, model=model())
    started = threading.Event()

    def stream_fn(*args: Any, **options: Any) -> Any:
        started.set()
        return scripted.stream_fn(*args, **options)

    agent = Agent(scripted.model, stream_fn=stream_fn, session=s)
    count = len(s.entries())
    failures: List[BaseException] = []

    def navigate() -> None:
        try:
            agent.navigate_tree(ids["target"], summarize=True)
        except BaseException as exc:  # noqa: BLE001 - asserted below
            failures.append(exc)

    worker = threading.Thread(target=navigate)
    worker.start()
    assert started.wait(10)
    agent.abort("stop")
    worker.join(30)  # the summary alone would stream for 100 s
    assert not worker.is_alive()
    assert len(failures) == 1 and isinstance(failures[0], CompactionError) and failures[0].code == "aborted"
    assert len(s.entries()) == count and s.leaf_id == ids["a3"] and len(agent.state.messages) == 6


# --------------------------------------------------------------------------- nothing half-written


@pytest.mark.parametrize("answer", ["", "  \n "], ids=["empty", "whitespace"])
def test_an_empty_branch_summary_writes_nothing(answer):  # session §8 generation: a summary that says nothing
    """A model answering without text used to store a branch summary that was only the preamble
    ("This is what happened there:" and nothing after it), and the navigation went through."""
    s, ids = tree()
    count = len(s.entries())
    scripted = ScriptedModel([ScriptedResponse([TextContent(answer)], "stop", usage=BILLED)])
    with pytest.raises(CompactionError) as failed:
        navigate_tree(s, ids["target"], summarize=True, model=model(), stream_fn=scripted.stream_fn)
    assert failed.value.code == "summarization_failed" and "empty summary" in str(failed.value)
    assert _figures(failed.value.usage) == _figures(BILLED)
    assert len(s.entries()) == count and s.leaf_id == ids["a3"]


def test_an_abort_after_the_branch_summary_came_back_writes_nothing():  # abort before the write
    """An abort that lands after the summary answered, before the move: the navigation used to
    go through (leaf moved, summary stored) as if the abort had not happened."""
    from agentcore.signals import AbortController

    s, ids = tree()
    count = len(s.entries())
    controller = AbortController()
    scripted = ScriptedModel([ScriptedResponse([TextContent("## Goal")], "stop", usage=BILLED)])

    def aborting(*args: Any, **options: Any) -> Any:
        stream = scripted.stream_fn(*args, **options)
        stream.result()
        controller.abort("stop")  # complete answer, nothing written yet
        return stream

    with pytest.raises(CompactionError) as aborted:
        navigate_tree(
            s, ids["target"], summarize=True, model=model(), stream_fn=aborting, signal=controller.signal, label="x"
        )
    assert aborted.value.code == "aborted" and _figures(aborted.value.usage) == _figures(BILLED)
    assert len(s.entries()) == count and s.leaf_id == ids["a3"] and s.get_label(ids["target"]) is None


@pytest.mark.parametrize(
    "hook_answer, label, error, text_",
    [
        ({"summary": "hooked", "details": {"files": {"a.py"}}}, None, CompactionError, "details that are not JSON"),
        ({"summary": "hooked", "details": [float("nan")]}, None, CompactionError, "details that are not JSON"),
        ({"label": 5}, "x", CompactionError, "label that is not a string"),
        (None, 5, TypeError, "takes a string or None"),
    ],
    ids=["set-details", "nan-details", "hook-label", "caller-label"],
)
def test_what_the_session_cannot_store_is_refused_before_the_move(hook_answer, label, error, text_):
    """A hook's details that are not JSON, or a label that is not a string, used to be refused by
    the session only after ``move_to`` had written the leaf move: the session was moved, with no
    summary or label, and the caller got a bare ``SessionError``."""
    s, ids = tree()
    count = len(s.entries())
    plugins = _pm(BeforeBranch(hook_answer)) if hook_answer is not None else None
    with pytest.raises(error, match=text_):
        navigate_tree(s, ids["target"], summarize=label is None, plugins=plugins, label=label, model=model())
    assert len(s.entries()) == count and s.leaf_id == ids["a3"]


def test_agent_navigation_asks_get_api_key_only_for_a_summary_and_awaits_it():  # docs: hooks may be async def
    """``agent.navigate_tree`` asked ``get_api_key`` even without a summary, so an application's
    hook that raised for the summary model's provider blocked a plain move; and an ``async def``
    hook's coroutine object was sent as the summary request's ``api_key``."""
    from agentcore.agent import Agent

    s, ids = tree()
    scripted = ScriptedModel(["what happened"], model=model())
    sent: List[Any] = []

    def stream_fn(model_: Any, context: Any, **options: Any) -> Any:
        sent.append(options.get("api_key"))
        return scripted.stream_fn(model_, context, **options)

    def refusing(provider: str) -> str:
        raise KeyError(provider)

    agent = Agent(scripted.model, stream_fn=stream_fn, session=s, get_api_key=refusing)
    outcome = agent.navigate_tree(ids["target"])  # no summary: no request, no key
    assert outcome.leaf_id == ids["common"] and agent.navigate_tree(ids["a3"]).leaf_id == ids["a3"]
    with pytest.raises(CompactionError) as failed:
        agent.navigate_tree(ids["target"], summarize=True)
    assert failed.value.code == "summarization_failed" and "get_api_key('scripted') raised KeyError" in str(
        failed.value
    )
    assert s.leaf_id == ids["a3"] and sent == []  # nothing written, nothing sent

    async def get_api_key(provider: str) -> str:
        return f"key-for-{provider}"

    agent.get_api_key = get_api_key
    agent.navigate_tree(ids["target"], summarize=True)
    assert sent == ["key-for-scripted"] and s.get_entry(s.leaf_id).type == "branch_summary"


def test_collecting_a_branch_decodes_only_the_entries_it_collects(tmp_path, count_decodes):  # session §8, scale
    """Collecting the abandoned branch decoded both whole root→leaf branches to find their common
    ancestor: a switch two entries back on a 3,000-entry chain decoded 6,000 entries to collect
    two (each branch switch of a long session cost a full decode of it, time and memory). The
    ancestor is found on the ids; only the collected entries are decoded."""
    path = tmp_path / "deep.jsonl"
    with Session.create(path, cwd="/w") as s:
        for n in range(1500):
            s.append_message(U(f"q{n}"))
            s.append_message(A(f"a{n}"))
    with Session.open(path, read_only=True) as s:
        leaf = s.leaf_id
        target = s.storage.parent_of(s.storage.parent_of(leaf))
        fetched = count_decodes(s.storage)
        collected = collect_entries_for_branch_summary(s, leaf, target)
        assert collected.common_ancestor_id == target
        assert [e.message.content[0].text for e in collected.entries] == ["q1499", "a1499"]
        assert len(fetched) <= 2, f"{len(fetched)} entries read to collect 2"

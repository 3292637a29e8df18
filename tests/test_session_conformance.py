"""Session conformance suite: spec session.md §12 sections A, B, C and G (and §12.E 49/50) run
against every storage (memory, JSONL, SQLite) through one parametrized fixture, as upstream runs its
conformance suite against each backend. File-format scenarios (§12 D, E, F) live in
test_session_jsonl.py; SQLite-specific ones in test_session_sqlite.py."""

from __future__ import annotations

import itertools
import json
import threading

import pytest

from agentcore.messages import (
    BRANCH_SUMMARY_SUFFIX,
    COMPACTION_SUMMARY_PREFIX,
    COMPACTION_SUMMARY_SUFFIX,
    convert_to_llm,
)
from agentcore.session import JsonlSessionStorage, MemorySessionStorage, Session, SessionError, SqliteSessionStorage
from agentcore.types import (
    AssistantMessage,
    BashExecutionMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UsageCost,
    UserMessage,
)


def U(text, timestamp=1):
    return UserMessage([TextContent(text)], timestamp=timestamp)


def A(text, usage=None, provider="anthropic", model="claude-sonnet-4-5", stop_reason="stop", content=None):
    return AssistantMessage(
        content if content is not None else [TextContent(text)],
        api="anthropic-messages",
        provider=provider,
        model=model,
        usage=usage or Usage(),
        stop_reason=stop_reason,
    )


def texts(messages):
    out = []
    for m in messages:
        if m.role in ("compactionSummary", "branchSummary"):
            out.append(m.summary)
        elif isinstance(m.content, str):
            out.append(m.content)
        else:
            out.append("".join(b.text for b in m.content if isinstance(b, TextContent)))
    return out


class Backend:
    """Makes sessions on one storage kind and reopens them (memory: rebuilt from its stored lines)."""

    def __init__(self, kind, tmp_path):
        self.kind = kind
        self.tmp_path = tmp_path
        self.count = itertools.count()
        self.clock = itertools.count(1_700_000_000_000, 1000)

    def _kwargs(self):
        return {"clock": lambda: next(self.clock)}

    def new(self):
        n = next(self.count)
        if self.kind == "memory":
            storage = MemorySessionStorage(cwd="/w")
        elif self.kind == "jsonl":
            storage = JsonlSessionStorage.create(self.tmp_path / f"s{n}.jsonl", cwd="/w")
        else:
            storage = SqliteSessionStorage.create(self.tmp_path / "sessions.db", cwd="/w")
        return Session(storage, **self._kwargs())

    def reopen(self, session):
        storage = session.storage
        if self.kind == "memory":
            lines = [json.loads(storage.raw_line(i)) for i in storage.entry_ids()]
            return Session(MemorySessionStorage(storage.header, lines), **self._kwargs())
        session.close()
        if self.kind == "jsonl":
            return Session(JsonlSessionStorage(storage.path), **self._kwargs())
        return Session(SqliteSessionStorage(storage.path, storage.session_id), **self._kwargs())


@pytest.fixture(params=["memory", "jsonl", "sqlite"])
def backend(request, tmp_path):
    return Backend(request.param, tmp_path)


@pytest.fixture
def s(backend):
    session = backend.new()
    yield session
    session.close()


def ids(entries):
    return [e.id for e in entries]


def tree_children(nodes):
    return {n.entry.id: [c.entry.id for c in n.children] for n in walk(nodes)}


def walk(nodes):
    stack = list(nodes)
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node.children)


# --------------------------------------------------------------------------- A. tree and appends


def test_empty_session(s):  # session §12 A1
    assert s.leaf_id is None
    assert s.get_branch() == []
    assert s.get_tree() == []
    context = s.build_context()
    assert (context.messages, context.thinking_level, context.model, context.active_tool_names) == (
        [],
        "off",
        None,
        None,
    )


def test_appends_chain_under_the_leaf(s):  # session §12 A2
    i1 = s.append_message(U("1"))
    assert s.leaf_id == i1
    i2 = s.append_message(A("2"))
    assert s.leaf_id == i2
    i3 = s.append_message(U("3"))
    assert s.leaf_id == i3
    entries = s.entries()
    assert ids(entries) == [i1, i2, i3]
    assert [e.parent_id for e in entries] == [None, i1, i2]
    assert all(len(e.id) == 8 for e in entries)


def test_thinking_level_change_is_a_tree_node(s):  # session §12 A3
    m = s.append_message(U("m"))
    t = s.append_thinking_level_change("high")
    assert s.leaf_id == t
    a = s.append_message(A("a"))
    assert s.get_entry(t).parent_id == m and s.get_entry(a).parent_id == t
    assert s.get_entry(t).thinking_level == "high"


def test_model_custom_and_tools_entries_store_their_payload(s):  # session §12 A4
    s.append_message(U("m"))
    mc = s.append_model_change("openai", "gpt-4")
    cu = s.append_custom("my_data", {"key": "value"})
    at = s.append_active_tools_change(["read", "bash"])
    assert (s.get_entry(mc).provider, s.get_entry(mc).model_id) == ("openai", "gpt-4")
    assert (s.get_entry(cu).custom_type, s.get_entry(cu).data) == ("my_data", {"key": "value"})
    assert s.get_entry(at).active_tool_names == ["read", "bash"]
    assert [e.parent_id for e in s.entries()[1:]] == [s.entries()[0].id, mc, cu]
    assert "data" not in json.loads(s.storage.raw_line(s.append_custom("empty")))  # data omitted when None


@pytest.mark.parametrize(
    "names,says",
    [("read", "pass ['read']"), (["read", 3], "names[1] is a int"), ([None], "names[0] is a NoneType")],
    ids=["one-string", "a-number", "none"],
)
def test_active_tools_must_be_names(s, names, says):  # session §2: activeToolNames is string[]
    s.append_message(U("m"))
    before = [e.id for e in s.entries()]
    with pytest.raises(SessionError) as caught:
        s.append_active_tools_change(names)
    assert caught.value.code == "invalid_payload" and says in str(caught.value)
    assert [e.id for e in s.entries()] == before and s.build_context().active_tool_names is None


def test_a_custom_entry_needs_a_string_type(backend):  # session §2: custom entries carry customType: string
    s = backend.new()
    s.append_message(U("m"))
    with pytest.raises(SessionError) as caught:
        s.append_custom(5, {"k": 1})
    assert caught.value.code == "invalid_payload" and "custom_type must be a string" in str(caught.value)
    s = backend.reopen(s)  # nothing was written: the session still reads and builds its context
    assert [e.type for e in s.entries()] == ["message"]
    assert texts(s.build_context().messages) == ["m"]
    s.close()


def test_compaction_entry_fields(s):  # session §12 A5
    i1 = s.append_message(U("1"))
    i2 = s.append_message(A("2"))
    c = s.append_compaction("summary", i1, 1000)
    i3 = s.append_message(U("3"))
    entry = s.get_entry(c)
    assert (entry.parent_id, entry.summary, entry.first_kept_entry_id, entry.tokens_before) == (i2, "summary", i1, 1000)
    assert s.get_entry(i3).parent_id == c


def test_get_branch(s):  # session §12 A6
    i1 = s.append_message(U("1"))
    i2 = s.append_message(A("2"))
    t = s.append_thinking_level_change("high")
    i4 = s.append_message(U("4"))
    assert ids(s.get_branch()) == [i1, i2, t, i4]
    assert ids(s.get_branch(i2)) == [i1, i2]
    with pytest.raises(SessionError) as info:
        s.get_branch("missing")
    assert info.value.code == "not_found"


def test_branching_with_move_to(s):  # session §12 A7
    i1 = s.append_message(U("1"))
    i2 = s.append_message(A("2"))
    s.append_message(U("3"))
    s.move_to(i1)
    assert s.leaf_id == i1
    x = s.append_message(U("x"))
    assert s.get_entry(x).parent_id == i1
    tree = s.get_tree()
    assert [n.entry.id for n in tree] == [i1]
    assert sorted(c.entry.id for c in tree[0].children) == sorted([i2, x])
    assert all(n.entry.type != "leaf" for n in walk(tree))


def test_three_siblings(s):  # session §12 A8
    s.append_message(U("1"))
    i2 = s.append_message(A("2"))
    for n in range(3):
        s.move_to(i2)
        s.append_message(U(f"sibling {n}"))
    assert len(tree_children(s.get_tree())[i2]) == 3
    assert len(s.children(i2)) == 3


def test_deep_branching(s):  # session §12 A9
    e1 = s.append_message(U("1"))
    e2 = s.append_message(A("2"))
    e3 = s.append_message(U("3"))
    e4 = s.append_message(A("4"))
    s.move_to(e2)
    e5 = s.append_message(U("5"))
    e6 = s.append_message(A("6"))
    s.move_to(e5)
    e7 = s.append_message(A("7"))
    children = tree_children(s.get_tree())
    assert children[e1] == [e2]
    assert set(children[e2]) == {e3, e5}
    assert set(children[e5]) == {e6, e7}
    assert children[e3] == [e4]


def test_move_to_unknown_entry(s):  # session §12 A10
    i1 = s.append_message(U("1"))
    before = len(s.entries())
    with pytest.raises(SessionError) as info:
        s.move_to("nonexistent")
    assert info.value.code == "not_found"
    assert s.leaf_id == i1 and len(s.entries()) == before


def test_move_to_with_summary(s):  # session §12 A11
    i1 = s.append_message(U("1"))
    s.append_message(A("2"))
    summary_id = s.move_to(i1, {"summary": "Summary of abandoned work"})
    assert s.leaf_id == summary_id
    entry = s.get_entry(summary_id)
    assert (entry.type, entry.parent_id, entry.from_id, entry.summary) == (
        "branch_summary",
        i1,
        i1,
        "Summary of abandoned work",
    )
    with pytest.raises(SessionError) as info:
        s.move_to("nope", {"summary": "x"})
    assert info.value.code == "not_found"


def test_move_to_none_starts_a_new_root(s):  # session §12 A12
    i1 = s.append_message(U("1"))
    s.move_to(None)
    assert s.leaf_id is None
    assert s.build_context().messages == []
    r = s.append_message(U("new root"))
    assert s.get_entry(r).parent_id is None
    assert [n.entry.id for n in s.get_tree()] == [i1, r]


def test_leaf_moves_are_persisted(backend):  # session §12 A13, issue 10 item 3
    s = backend.new()
    i1 = s.append_message(U("1"))
    s.append_message(A("2"))
    s.move_to(i1)
    last = json.loads(s.storage.raw_line(s.storage.entry_ids()[-1]))
    # parented at the target (A13 has the old leaf): a reader that takes the last entry as its leaf
    # and ignores ``leaf`` entries (the reference's SessionManager) then resumes at the target too
    assert (last["type"], last["targetId"], last["parentId"]) == ("leaf", i1, i1)
    s = backend.reopen(s)
    assert s.leaf_id == i1
    s.move_to(None)
    last = json.loads(s.storage.raw_line(s.storage.entry_ids()[-1]))
    assert (last["type"], last["targetId"], last["parentId"]) == ("leaf", None, None)
    s = backend.reopen(s)
    assert s.leaf_id is None
    s.close()


def test_tree_orders_children_by_timestamp_and_keeps_orphans():  # session §12 A14
    ts = iter([5000, 1000, 3000, 2000])
    storage = MemorySessionStorage(
        cwd="/w",
        entries=[
            {
                "type": "message",
                "id": "root",
                "parentId": None,
                "timestamp": "2025-01-01T00:00:00.000Z",
                "message": {"role": "user", "content": "r", "timestamp": 1},
            },
            {
                "type": "message",
                "id": "late",
                "parentId": "root",
                "timestamp": "2025-01-01T00:00:09.000Z",
                "message": {"role": "user", "content": "l", "timestamp": 1},
            },
            {
                "type": "message",
                "id": "early",
                "parentId": "root",
                "timestamp": "2025-01-01T00:00:01.000Z",
                "message": {"role": "user", "content": "e", "timestamp": 1},
            },
            {
                "type": "message",
                "id": "orphan",
                "parentId": "gone",
                "timestamp": "2025-01-01T00:00:02.000Z",
                "message": {"role": "user", "content": "o", "timestamp": 1},
            },
        ],
    )
    s = Session(storage, clock=lambda: next(ts))
    tree = s.get_tree()
    assert [n.entry.id for n in tree] == ["root", "orphan"]
    assert [c.entry.id for c in tree[0].children] == ["early", "late"]
    with pytest.raises(SessionError) as info:
        s.get_branch("orphan")
    assert info.value.code == "invalid_session"


# --------------------------------------------------------------------------- B. build_context


def test_context_roles(s):  # session §12 B15
    s.append_message(U("1"))
    assert [m.role for m in s.build_context().messages] == ["user"]
    s.append_message(A("2"))
    s.append_message(U("3"))
    s.append_message(A("4"))
    assert [m.role for m in s.build_context().messages] == ["user", "assistant", "user", "assistant"]


def test_context_thinking_level(s):  # session §12 B16
    s.append_message(U("1"))
    s.append_thinking_level_change("high")
    s.append_message(A("2"))
    context = s.build_context()
    assert context.thinking_level == "high" and len(context.messages) == 2


def test_context_model_later_wins(backend):  # session §12 B17
    s = backend.new()
    s.append_message(U("1"))
    s.append_message(A("2", provider="anthropic", model="claude-test"))
    assert s.build_context().model.to_dict() == {"provider": "anthropic", "modelId": "claude-test"}
    s2 = backend.new()
    s2.append_message(U("1"))
    s2.append_model_change("openai", "gpt-4")
    s2.append_message(A("2"))
    assert (s2.build_context().model.provider, s2.build_context().model.model_id) == ("anthropic", "claude-sonnet-4-5")
    s2.append_thinking_level_change("high")
    context = s2.build_context()
    assert context.model.provider == "anthropic" and context.thinking_level == "high"
    s3 = backend.new()
    s3.append_message(U("1"))
    s3.append_model_change("openai", "gpt-4")
    assert s3.build_context().model.key == "openai/gpt-4"
    for x in (s, s2, s3):
        x.close()


def test_compaction_keeps_the_middle(s):  # session §12 B18
    s.append_message(U("u1"))
    s.append_message(A("a1"))
    u2 = s.append_message(U("u2"))
    s.append_message(A("a2"))
    s.append_compaction("S", u2, 1000)
    s.append_message(U("u3"))
    s.append_message(A("a3"))
    messages = s.build_context().messages
    assert [m.role for m in messages] == ["compactionSummary", "user", "assistant", "user", "assistant"]
    assert texts(messages) == ["S", "u2", "a2", "u3", "a3"]
    assert messages[0].tokens_before == 1000


def test_compaction_keeps_from_first(s):  # session §12 B19
    u1 = s.append_message(U("u1"))
    s.append_message(A("a1"))
    s.append_compaction("S", u1, 10)
    s.append_message(U("u2"))
    assert texts(s.build_context().messages) == ["S", "u1", "a1", "u2"]


def test_latest_compaction_wins(s):  # session §12 B20
    u1 = s.append_message(U("u1"))
    s.append_message(A("a"))
    s.append_compaction("C1", u1, 10)
    s.append_message(U("u2"))
    s.append_message(A("b"))
    u3 = s.append_message(U("u3"))
    s.append_message(A("c"))
    s.append_compaction("C2", u3, 20)
    s.append_message(U("u4"))
    s.append_message(A("d"))
    assert texts(s.build_context().messages) == ["C2", "u3", "c", "u4", "d"]


def test_compaction_with_unknown_first_kept_keeps_nothing(s):  # session §6 step 3 fallback
    s.append_message(U("u1"))
    s.append_compaction("S", "not-on-path", 10)
    s.append_message(U("u2"))
    assert texts(s.build_context().messages) == ["S", "u2"]


def test_an_older_compaction_in_the_kept_range_contributes_nothing(s):  # session §6 step 3
    u1 = s.append_message(U("u1"))
    s.append_message(A("a1"))
    s.append_compaction("C1", u1, 10)
    s.append_message(U("u2"))
    s.append_compaction("C2", u1, 20)  # keeps from before C1: C1 lies inside the kept range
    s.append_message(U("u3"))
    assert texts(s.build_context().messages) == ["C2", "u1", "a1", "u2", "u3"]


def test_branch_selection(s):  # session §12 B21
    e1 = s.append_message(U("1"))
    e2 = s.append_message(A("2"))
    e3 = s.append_message(U("3"))
    s.move_to(e2)
    e4 = s.append_message(U("4"))
    assert texts(s.build_context(e3).messages) == ["1", "2", "3"]
    assert texts(s.build_context(e4).messages) == ["1", "2", "4"]
    assert texts(s.build_context().messages) == ["1", "2", "4"]
    assert e1


def test_branch_summary_on_path(s):  # session §12 B22
    s.append_message(U("1"))
    e2 = s.append_message(A("2"))
    s.append_message(U("3"))
    s.move_to(e2, "Summary of abandoned work")
    s.append_message(U("5"))
    messages = s.build_context().messages
    assert [m.role for m in messages] == ["user", "assistant", "branchSummary", "user"]
    assert messages[2].summary == "Summary of abandoned work" and messages[2].from_id == e2


def test_complex_tree(s):  # session §12 B23
    s.append_message(U("1"))
    s.append_message(A("2"))
    q2 = s.append_message(U("q2"))
    s.append_message(A("r2"))
    s.append_compaction("C5", q2, 100)
    s.append_message(U("q3"))
    e7 = s.append_message(A("r3"))
    s.move_to(q2)
    s.append_message(A("8"))
    s.append_message(U("9"))
    s.move_to(q2, "BS10")
    e11 = s.append_message(U("11"))
    assert texts(s.build_context(e7).messages) == ["C5", "q2", "r2", "q3", "r3"]
    ctx11 = s.build_context(e11).messages
    assert texts(ctx11) == ["1", "2", "q2", "BS10", "11"]
    assert ctx11[3].role == "branchSummary"


def test_custom_entries_and_labels_do_not_enter_context(s):  # session §12 B24
    u = s.append_message(U("u"))
    s.append_custom("state", {"x": 1})
    s.append_message(A("a"))
    assert len(s.build_context().messages) == 2
    s.append_label(u, "mark")
    assert len(s.build_context().messages) == 2


def test_custom_message_entry(s):  # session §12 B25
    s.append_custom_message("note", [TextContent("hello")], display=False, details={"k": 1})
    messages = s.build_context().messages
    assert [m.role for m in messages] == ["custom"]
    assert messages[0].custom_type == "note" and messages[0].details == {"k": 1}
    assert messages[0].timestamp == 1_700_000_000_000  # the entry time, in ms
    converted = convert_to_llm(messages)
    assert converted[0].role == "user"
    assert [b.text for b in converted[0].content] == ["hello"]


def test_retained_tail_compaction(s):  # session §12 B26
    s.append_message(U("old"))
    s.append_compaction("S", None, 5, retained_tail=[U("retained"), A("answer")])
    s.append_model_change("openai", "gpt-5")
    s.append_thinking_level_change("high")
    s.append_message(U("tail"))
    context = s.build_context()
    assert [m.role for m in context.messages] == ["compactionSummary", "user", "assistant", "user"]
    assert texts(context.messages) == ["S", "retained", "answer", "tail"]
    assert context.model.key == "openai/gpt-5" and context.thinking_level == "high"


def test_entry_transforms(s):  # session §12 B27
    s.append_message(U("old"))
    s.append_compaction("S", None, 5, retained_tail=[])
    s.append_branch_summary("x", "went elsewhere")
    s.append_message(U("tail"))

    def drop_compactions(entries):
        return [e for e in entries if e.type != "compaction"]

    roles = [m.role for m in s.build_context(entry_transforms=[drop_compactions]).messages]
    assert roles == ["branchSummary", "user"]


def test_projector_and_deferred(s):  # session §12 B28
    s.append_message(U("u"))
    s.append_message(A("", stop_reason="deferred", content=[]))
    s.append_custom("note", "project me")

    def project(entry, index, entries):
        return [U("note: " + entry.data)]

    messages = s.build_context(projectors={"note": project}).messages
    assert [m.role for m in messages] == ["user", "user"]
    assert texts(messages)[1] == "note: project me"


def test_tool_result_repair(s):  # session §12 B29
    s.append_message(A("", content=[ToolCall("c1", "read", {"path": "a"})], stop_reason="toolUse"))
    s.append_custom_message("note", "between")
    s.append_message(ToolResultMessage("c1", "read", [TextContent("ok")]))
    s.append_message(ToolResultMessage("c9", "read", [TextContent("orphan")]))
    messages = s.build_context().messages
    assert [m.role for m in messages] == ["assistant", "toolResult", "custom"]
    assert messages[1].tool_call_id == "c1"


def test_a_call_id_reused_by_a_later_turn_keeps_each_result_in_its_turn(s):  # session §6 step 6
    """A local server that numbers calls per response (``call_0`` every turn): every result went
    after the LAST call with that id, so a resumed (or compacted) transcript had turn 1's call
    without a result and turn 2's call with two."""
    for path, seen in (("a", "A"), ("b", "B")):
        s.append_message(U(f"read {path}"))
        s.append_message(A("", content=[ToolCall("call_0", "read", {"path": path})], stop_reason="toolUse"))
        s.append_custom_message("note", "between")  # still moved right after its own call
        s.append_message(ToolResultMessage("call_0", "read", [TextContent(seen)]))
        s.append_message(A(f"read {seen}"))
    messages = s.build_context().messages
    assert [m.role for m in messages] == ["user", "assistant", "toolResult", "custom", "assistant"] * 2
    assert texts(messages)[2::5] == ["A", "B"]


def test_convert_custom_roles():  # session §12 B30
    bash = BashExecutionMessage("ls", "x", exit_code=0, exclude_from_context=True)
    s = Session.in_memory()
    s.append_message(U("u"))
    s.append_compaction("the summary", None, 1, retained_tail=[])
    s.move_to(s.leaf_id, "branch text")
    s.append_message(bash)
    converted = convert_to_llm(s.build_context().messages)
    assert len(converted) == 2  # bash execution excluded from context is dropped
    compaction_text = converted[0].content[0].text
    assert compaction_text.startswith(COMPACTION_SUMMARY_PREFIX) and compaction_text.endswith("\n</summary>")
    assert compaction_text == COMPACTION_SUMMARY_PREFIX + "the summary" + COMPACTION_SUMMARY_SUFFIX
    branch_text = converted[1].content[0].text
    assert branch_text.endswith("branch text" + BRANCH_SUMMARY_SUFFIX) and branch_text.endswith("text</summary>")


def test_state_survives_compaction_and_reopen(backend):  # session §6 step 1 + pitfall 6
    s = backend.new()
    s.append_model_change("openai", "gpt-4")
    s.append_thinking_level_change("medium")
    s.append_active_tools_change(["read"])
    u = s.append_message(U("u"))
    s.append_compaction("S", u, 1)
    s.append_message(U("after"))
    s = backend.reopen(s)
    context = s.build_context()
    assert (context.model.key, context.thinking_level, context.active_tool_names) == (
        "openai/gpt-4",
        "medium",
        ["read"],
    )
    assert texts(context.messages) == ["S", "u", "after"]
    s.close()


# --------------------------------------------------------------------------- C. labels and names


def test_labels(s):  # session §12 C31
    m = s.append_message(U("m"))
    label_id = s.append_label(m, "checkpoint")
    assert s.get_label(m) == "checkpoint" and s.get_entry(label_id).target_id == m
    s.append_label(m, None)
    assert s.get_label(m) is None
    for text in ("first", "second", "third"):
        s.append_label(m, text)
    assert s.get_label(m) == "third" and s.labels == {m: "third"}


def test_labels_on_tree_and_unknown_target(s):  # session §12 C32
    m = s.append_message(U("m"))
    s.append_label(m, "here")
    assert [n.label for n in s.get_tree() if n.entry.id == m] == ["here"]
    assert len(s.build_context().messages) == 1
    before = len(s.entries())
    with pytest.raises(SessionError) as info:
        s.append_label("non-existent", "x")
    assert info.value.code == "not_found" and len(s.entries()) == before


def test_labels_are_trimmed(s):  # session §12 C33
    m = s.append_message(U("m"))
    s.append_label(m, "  a  ")
    assert s.get_label(m) == "a"
    s.append_label(m, "   ")
    assert s.get_label(m) is None


def test_session_name(backend):  # session §12 C34
    s = backend.new()
    assert s.name is None
    s.set_name("  My\r\nName ")
    assert s.name == "My Name"
    s.set_name("Later")
    s = backend.reopen(s)
    assert s.name == "Later"
    s.set_name("")
    assert s.name is None
    s.close()


def test_labels_and_names_survive_reopen(backend):  # session §3.3 fold on load
    s = backend.new()
    m = s.append_message(U("m"))
    s.append_label(m, "keep")
    s = backend.reopen(s)
    assert s.labels == {m: "keep"}
    s.close()


# --------------------------------------------------------------------------- E. payload validation


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param("cycle", id="cycle"),
        float("nan"),
        float("inf"),
        b"bytes",
        {1, 2},
        object(),
        pytest.param({1: "int key"}, id="non-string-key"),
    ],
)
def test_non_json_payload_is_refused(backend, bad):  # session §12 E49
    s = backend.new()
    if bad == "cycle":
        bad = {}
        bad["self"] = bad
    before = len(s.entries())
    with pytest.raises(SessionError) as info:
        s.append_custom("x", {"value": bad})
    assert info.value.code == "invalid_payload"
    assert len(s.entries()) == before and s.leaf_id is None
    ok = s.append_custom("x", {"value": 1})
    s = backend.reopen(s)
    assert [e.id for e in s.entries()] == [ok]
    s.close()


@pytest.mark.parametrize(
    "append, problem",
    [
        (lambda s, first: s.append_compaction("summary", first, 10, usage="lots"), "'usage' must be"),
        (lambda s, first: s.append_compaction(5, first, 10), "'summary' must be a string"),
        (lambda s, first: s.append_branch_summary(first, ["a"]), "'summary' must be a string"),
    ],
    ids=["compaction-usage", "compaction-summary", "branch-summary"],
)
def test_a_control_entry_its_reader_refuses_is_not_written(backend, append, problem):
    """Control entries are decoded at load, strictly. One the reader refuses used to be written
    first and checked after: append() raised ValueError, memory lacked the entry, the file or the
    row had it, and every later open of the session failed with invalid_entry."""
    s = backend.new()
    first = s.append_message(U("hi"))
    with pytest.raises(SessionError) as info:
        append(s, first)
    assert info.value.code == "invalid_payload" and problem in str(info.value)
    assert ids(s.entries()) == [first] and s.leaf_id == first
    second = s.append_message(U("after"))
    s = backend.reopen(s)
    assert ids(s.entries()) == [first, second]
    s.close()


def test_failed_write_records_nothing(backend, monkeypatch):  # session §12 E50
    s = backend.new()

    def broken(line, entry):
        raise SessionError("storage", "disk full")

    monkeypatch.setattr(s.storage, "_write", broken)
    with pytest.raises(SessionError) as info:
        s.append_message(U("lost"))
    assert info.value.code == "storage"
    assert s.entries() == [] and s.leaf_id is None
    monkeypatch.undo()
    kept = s.append_message(U("kept"))
    s = backend.reopen(s)
    assert ids(s.entries()) == [kept]
    s.close()


class _AnnouncingLock:
    """A lock that sets ``event`` when the thread named ``name`` tries to take it."""

    def __init__(self, lock, name, event):
        self.lock, self.name, self.event = lock, name, event

    def acquire(self, *args, **kwargs):
        if threading.current_thread().name == self.name:
            self.event.set()
        return self.lock.acquire(*args, **kwargs)

    def release(self):
        self.lock.release()

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()


@pytest.mark.parametrize("closer", ["Session.close", "storage.close"])
def test_a_close_on_another_thread_waits_for_the_append_in_flight(backend, monkeypatch, closer):
    """close() on the caller's thread took no lock: it closed what an append on the agent's thread
    was writing to (JSONL: a descriptor number something else could reuse; SQLite, PostgreSQL: the
    connection, or the writer lock under an INSERT on its way). Now close() waits and the append in
    flight is recorded. The write is held until close() is known to be waiting (its attempt to take
    the lock) or has returned (the old behaviour: the write then fails or goes astray)."""
    s = backend.new()
    storage = s.storage
    first = s.append_message(U("one"))
    writing, close_tried = threading.Event(), threading.Event()
    if closer == "Session.close":
        s._lock = _AnnouncingLock(s._lock, "closer", close_tried)
    else:
        storage._io_lock = _AnnouncingLock(storage._io_lock, "closer", close_tried)
    write = storage._write

    def held_write(line, entry):
        writing.set()
        assert close_tried.wait(10)
        write(line, entry)

    monkeypatch.setattr(storage, "_write", held_write)
    outcome = {}

    def append():
        try:
            outcome["id"] = s.append_message(U("two"))
        except Exception as exc:  # pragma: no cover - what this test exists to catch
            outcome["error"] = exc

    def close():
        (s.close if closer == "Session.close" else storage.close)()
        close_tried.set()

    appender = threading.Thread(target=append)
    appender.start()
    assert writing.wait(10)
    closing = threading.Thread(target=close, name="closer")
    closing.start()
    appender.join(10)
    closing.join(10)
    assert "error" not in outcome, outcome
    monkeypatch.undo()
    s = backend.reopen(s)
    assert ids(s.entries()) == [first, outcome["id"]]
    s.close()


# --------------------------------------------------------------------------- G. statistics


def test_session_stats(backend):  # session §12 G60
    s = backend.new()
    s.append_message(U("u"))
    usage = Usage(input=10, output=5, cache_read=3, cache_write=2, total_tokens=20, cost=UsageCost(total=10))
    s.append_message(A("a", usage=usage))
    stats = s.get_session_stats()
    assert (stats.message_count, stats.cached_tokens, stats.uncached_tokens, stats.total_tokens, stats.cost_total) == (
        2,
        3,
        12,
        20,
        10,
    )
    s.append_branch_summary(
        "x", "bs", usage={"input": 1, "output": 1, "cacheRead": 1, "cacheWrite": 1, "cost": {"total": 0.5}}
    )
    s.append_branch_summary(
        "x", "no cost", usage={"input": 1, "output": 1, "cacheRead": 1, "cacheWrite": 1, "cost": {}}
    )
    stats = s.get_session_stats()
    assert (stats.cached_tokens, stats.uncached_tokens, stats.total_tokens, stats.cost_total) == (4, 14, 24, 10.5)
    s = backend.reopen(s)  # recomputed from storage
    stats = s.get_session_stats()
    assert (stats.message_count, stats.cached_tokens, stats.uncached_tokens, stats.total_tokens, stats.cost_total) == (
        2,
        4,
        14,
        24,
        10.5,
    )
    s.close()


def test_stats_follow_the_entry_rules(backend):  # session §10
    """The stored totalTokens is ignored (the sum of the four counts is used), tool-result usage
    is not counted, compaction usage is, and usage with a missing cost.total or a non-number
    (a boolean) count is skipped whole; a reopen recomputes the same totals."""
    s = backend.new()
    s.append_message(A("a", usage=Usage(input=10, output=5, cache_read=3, cache_write=2, total_tokens=999)))
    s.append_message(
        {
            "role": "toolResult",
            "toolCallId": "c1",
            "toolName": "t",
            "content": [{"type": "text", "text": "r"}],
            "isError": False,
            "usage": {"input": 7, "output": 7, "cacheRead": 7, "cacheWrite": 7, "cost": {"total": 7}},
            "timestamp": 1,
        }
    )
    full = {"input": 1, "output": 2, "cacheRead": 3, "cacheWrite": 4, "cost": {"total": 0.25}}
    s.append_compaction("C", None, 5, usage=full)
    s.append_compaction("no cost total", None, 5, usage={**full, "cost": {"input": 1}})
    s.append_branch_summary(None, "bool", usage={**full, "input": True})
    expected = (2, 3 + 3, (10 + 2) + (1 + 4), 20 + 10, 0.25)
    for session in (s, backend.reopen(s)):
        stats = session.get_session_stats()
        got = (stats.message_count, stats.cached_tokens, stats.uncached_tokens, stats.total_tokens, stats.cost_total)
        assert got == expected
    session.close()


def test_stats_count_all_branches(s):  # session §10: whole file, all branches
    u = s.append_message(U("u"))
    one = Usage(input=1, output=1, cost=UsageCost(total=1))
    s.append_message(A("a", usage=one))
    s.move_to(u)
    s.append_message(A("b", usage=one))
    stats = s.get_session_stats()
    assert (stats.message_count, stats.total_tokens, stats.cost_total) == (3, 4, 2)

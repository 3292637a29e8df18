"""Branch summaries: move to another point of the tree and summarise the branch left behind (spec §8).

:func:`navigate_tree` is the whole operation: collect the entries between the old leaf and the
deepest common ancestor with the target (:func:`collect_entries_for_branch_summary`), optionally
summarise them (:func:`generate_branch_summary`, newest messages first within a token budget,
tool results left out, file operations tracked), then ``session.move_to`` with the summary so a
``branch_summary`` entry hangs under the new position and enters the context there.

Navigating to a user message (or a custom message entry) positions the session at its *parent*
and returns the message text as ``editor_text``, so an application can let the user re-edit it.

A plugin's ``before_branch_summary`` hook sees every navigation first (a :class:`TreePreparation`)
and may cancel it, supply the summary (stored with ``fromHook``, no model call) or override the
instructions and label (:class:`TreeDecision`).

Failures: an unknown target raises ``SessionError("not_found")``; a failed summary raises
:class:`~agentcore.session.compaction.CompactionError` (``aborted`` or ``summarization_failed``
with "Branch summary failed: ..."), and the session is then left unchanged. When the model had
answered, the error's ``usage`` is what that request was billed: it is recorded nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

from .._safe import describe_exception
from ..types import Usage, role_of, text_of
from .compaction import CompactionError, _json_details, hook_summary, summarize_with_model
from .compaction_prompts import (
    BRANCH_SUMMARY_INSTRUCTIONS,
    BRANCH_SUMMARY_PREAMBLE,
    FileOps,
    build_summary_prompt,
    compute_file_lists,
    format_file_lists,
    serialize_conversation,
)
from .compaction_tokens import estimate_tokens
from .entries import BranchSummaryEntry, CompactionEntry, CustomMessageEntry, MessageEntry, SessionEntry
from .errors import SessionError

__all__ = [
    "BranchCollection",
    "BranchPreparation",
    "BranchSummaryResult",
    "NavigationResult",
    "collect_entries_for_branch_summary",
    "prepare_branch_entries",
    "generate_branch_summary",
    "navigate_tree",
    "NO_CONTENT_SUMMARY",
    "BRANCH_SUMMARY_MAX_TOKENS",
    "TreePreparation",
    "TreeDecision",
    "run_before_branch_summary",
]

NO_CONTENT_SUMMARY = "No content to summarize"
BRANCH_SUMMARY_MAX_TOKENS = 2048
_DEFAULT_WINDOW = 128000
_DEFAULT_RESERVE = 16384


@dataclass
class BranchCollection:
    """Entries of the abandoned branch (oldest first) and the deepest common ancestor's id."""

    entries: List[SessionEntry]
    common_ancestor_id: Optional[str]


@dataclass
class BranchPreparation:
    """Messages to summarise (oldest first), file operations and their estimated tokens."""

    messages: List[Any]
    file_ops: FileOps
    total_tokens: int


@dataclass
class BranchSummaryResult:
    """A generated branch summary; ``usage`` is a reference-shaped dict or None (no model call).

    ``from_hook`` is True when a ``before_branch_summary`` hook supplied the summary; its
    ``hook_details`` (any JSON value, or None) are then stored as the entry's ``details``.
    """

    summary: str
    read_files: List[str] = field(default_factory=list)
    modified_files: List[str] = field(default_factory=list)
    usage: Optional[Dict[str, Any]] = None
    from_hook: bool = False
    hook_details: Any = None

    @property
    def details(self) -> Any:
        """What is stored in the entry's ``details``."""
        if self.from_hook:
            return self.hook_details
        return {"readFiles": list(self.read_files), "modifiedFiles": list(self.modified_files)}


@dataclass
class NavigationResult:
    """Outcome of :func:`navigate_tree`: ``leaf_id`` is the position moved to (the summary entry,
    if any, hangs under it and is the session's leaf), ``editor_text`` the text to re-edit when the
    target was a user or custom message, then the new ``branch_summary`` entry id and summary."""

    leaf_id: Optional[str]
    editor_text: Optional[str] = None
    summary_entry_id: Optional[str] = None
    summary: Optional[BranchSummaryResult] = None
    moved: bool = True
    cancelled: bool = False


@dataclass
class TreePreparation:
    """What the ``before_branch_summary`` hook sees about a navigation, before anything is written.

    ``entries_to_summarize`` are the entries of the abandoned branch, oldest first (empty when
    there is no old leaf); ``user_wants_summary`` is the caller's ``summarize`` flag; the last
    three fields are the caller's options.
    """

    target_id: Optional[str]
    old_leaf_id: Optional[str]
    common_ancestor_id: Optional[str]
    entries_to_summarize: List[SessionEntry]
    user_wants_summary: bool
    custom_instructions: Optional[str] = None
    replace_instructions: bool = False
    label: Optional[str] = None


@dataclass
class TreeDecision:
    """What a ``before_branch_summary`` hook may return (a dict with these keys works too).

    ``cancel=True`` stops the navigation. ``summary`` (text, or a dict with ``summary`` and
    ``details``) replaces the generated summary, stored with ``fromHook``; ``details`` may also be
    given here. ``custom_instructions``, ``replace_instructions`` and ``label`` override the
    caller's values when not None.
    """

    cancel: bool = False
    summary: Any = None
    details: Any = None
    custom_instructions: Optional[str] = None
    replace_instructions: Optional[bool] = None
    label: Optional[str] = None


def collect_entries_for_branch_summary(
    session: Any, old_leaf_id: Optional[str], target_id: Optional[str]
) -> BranchCollection:
    """Entries from the old leaf back to (not including) the deepest common ancestor with
    ``target_id``, oldest first. Compaction boundaries are not respected. No old leaf: nothing.

    The ancestor is found on the two branches' ids; only the collected entries are decoded (a
    switch near the end of a long branch reads a few entries, not both whole branches). An
    unknown id is ``SessionError("not_found")``, a broken parent chain ``invalid_session``."""
    if old_leaf_id is None:
        return BranchCollection([], None)
    storage = session.storage
    old_ids = storage.path_to_root(old_leaf_id)  # leaf first
    ancestor: Optional[str] = None
    if target_id is not None:
        on_old = set(old_ids)
        for entry_id in storage.path_to_root(target_id):  # the deepest first
            if entry_id in on_old:
                ancestor = entry_id
                break
    ids: List[str] = []
    for entry_id in old_ids:
        if entry_id == ancestor:
            break
        ids.append(entry_id)
    ids.reverse()
    return BranchCollection(storage.get_entries(ids), ancestor)


def _branch_message(entry: SessionEntry) -> Optional[Any]:
    from .compaction import entry_to_message

    if isinstance(entry, MessageEntry) and role_of(entry.message) == "toolResult":
        return None
    return entry_to_message(entry, compactions=True)


def prepare_branch_entries(entries: Sequence[SessionEntry], token_budget: int = 0) -> BranchPreparation:
    """Messages of ``entries`` to summarise, newest first within ``token_budget`` (0: unlimited).

    Tool results are left out. File operations come from tool calls and from the ``details`` of
    contained branch summaries (not of hook-written ones). When the budget is exceeded, one more
    summary message is still taken if less than 90% of the budget is used, then it stops.
    """
    ops = FileOps()
    for entry in entries:
        if isinstance(entry, BranchSummaryEntry) and not entry.from_hook:
            ops.add_details(entry.details)
    newest_first: List[Any] = []  # reversed at the end (inserting at the front is quadratic)
    total = 0
    for entry in reversed(entries):
        message = _branch_message(entry)
        if message is None:
            continue
        ops.add_message(message)
        tokens = estimate_tokens(message)
        if token_budget > 0 and total + tokens > token_budget:
            if isinstance(entry, (CompactionEntry, BranchSummaryEntry)) and total < 0.9 * token_budget:
                newest_first.append(message)
                total += tokens
            break
        newest_first.append(message)
        total += tokens
    newest_first.reverse()
    return BranchPreparation(newest_first, ops, total)


def generate_branch_summary(
    entries: Sequence[SessionEntry],
    model: Any,
    *,
    stream_fn: Optional[Callable[..., Any]] = None,
    reserve_tokens: int = _DEFAULT_RESERVE,
    custom_instructions: Optional[str] = None,
    replace_instructions: bool = False,
    signal: Any = None,
    thinking_level: Optional[str] = None,
    plugins: Any = None,
    **options: Any,
) -> BranchSummaryResult:
    """Summarise an abandoned branch (spec §8). The newest messages are sent, as many as fit in
    the model's context window (128000 when unknown) less ``reserve_tokens`` (half the window when
    the reserve is not smaller than the window). Without messages: ``"No content to summarize"``
    and no model call. With ``replace_instructions`` the custom text replaces the built-in
    instructions; otherwise it is added as "Additional focus". A failed or aborted request, or an
    answer without text, raises :class:`~agentcore.session.compaction.CompactionError`
    (``aborted`` or ``summarization_failed``) with the ``usage`` the response reported (None when
    none came back). An answer cut off at its ``max_tokens`` is kept."""
    prep = prepare_branch_entries(entries, _token_budget(model, reserve_tokens))
    read_files, modified_files = compute_file_lists(prep.file_ops)
    if not prep.messages:
        return BranchSummaryResult(NO_CONTENT_SUMMARY, read_files, modified_files)
    text = hook_summary(plugins, prep.messages, None, custom_instructions, "branch", model, signal)
    usage = None
    if text is None:
        if model is None:
            raise ValueError("generate_branch_summary needs a model (or a summarize hook)")
        if replace_instructions and custom_instructions:
            instructions, extra = custom_instructions, None
        else:
            instructions, extra = BRANCH_SUMMARY_INSTRUCTIONS, custom_instructions
        prompt = build_summary_prompt(serialize_conversation(prep.messages), instructions, None, extra)
        text, used = summarize_with_model(
            prompt,
            model,
            max_tokens=BRANCH_SUMMARY_MAX_TOKENS,
            stream_fn=stream_fn,
            signal=signal,
            thinking_level=thinking_level,
            failure_prefix="Branch summary failed",
            **options,
        )
        if not text.strip():  # stored, it would announce a summary and say nothing
            raise CompactionError(
                "summarization_failed",
                "Branch summary failed: the model returned an empty summary, so nothing was written",
                usage=used,
            )
        usage = used.to_dict() if used is not None else None
    summary = BRANCH_SUMMARY_PREAMBLE + text + format_file_lists(read_files, modified_files)
    return BranchSummaryResult(summary, read_files, modified_files, usage)


def _token_budget(model: Any, reserve_tokens: int) -> int:
    """Tokens of messages a branch summary request may carry: the model's context window (128000
    when unknown) less ``reserve_tokens``; half the window when the reserve leaves nothing (a
    small model with the default reserve), since a budget of 0 would mean "no limit"."""
    window = getattr(model, "context_window", 0) or _DEFAULT_WINDOW
    budget = window - reserve_tokens
    return budget if budget > 0 else max(window // 2, 1)


def _editor_text(entry: SessionEntry) -> Optional[str]:
    if isinstance(entry, MessageEntry) and role_of(entry.message) == "user":
        return text_of(entry.message.content)
    if isinstance(entry, CustomMessageEntry):
        return text_of(entry.content)
    return None


_TREE_KEYS = {
    "cancel": "cancel",
    "summary": "summary",
    "details": "details",
    "custom_instructions": "customInstructions",
    "replace_instructions": "replaceInstructions",
    "label": "label",
}


def _hook_caller(plugins: Any, name: str) -> Any:
    """The hook caller ``name`` of ``plugins`` when some plugin implements it, else None."""
    caller = getattr(getattr(plugins, "hook", None), name, None)
    if caller is None:
        return None
    get_impls = getattr(caller, "get_hookimpls", None)
    return caller if get_impls is None or get_impls() else None


def run_before_branch_summary(plugins: Any, preparation: TreePreparation, signal: Any) -> Optional[TreeDecision]:
    """Ask the ``before_branch_summary`` hook of ``plugins`` (a plugin manager, may be None).

    Returns None (no implementation, or all returned None) or the :class:`TreeDecision`, with a
    ``summary`` given as a dict split into ``summary`` text and ``details`` and an empty summary
    turned into None. Raises ``CompactionError("summarization_failed", "Branch summary failed:
    ...")`` when the hook raises or returns another type.
    """
    hook = _hook_caller(plugins, "before_branch_summary")
    if hook is None:
        return None
    try:
        result = hook(preparation=preparation, signal=signal)
    except Exception as exc:  # noqa: BLE001 - a plugin failure fails this navigation, nothing else
        raise CompactionError(
            "summarization_failed",
            f"Branch summary failed: the before_branch_summary hook raised {describe_exception(exc)}",
        ) from exc
    if isinstance(result, list):  # a caller without the firstresult spec
        result = next((item for item in result if item is not None), None)
    if result is None:
        return None
    if isinstance(result, dict):
        fields: Dict[str, Any] = {name: result.get(name, result.get(key)) for name, key in _TREE_KEYS.items()}
        result = TreeDecision(**fields)
    elif not isinstance(result, TreeDecision):
        raise CompactionError(
            "summarization_failed",
            (
                f"Branch summary failed: the before_branch_summary hook returned a {type(result).__name__}; "
                "return None, a TreeDecision or a dict with its keys"
            ),
        )
    summary: Any = result.summary  # text, or a dict with summary and details
    details = result.details
    if isinstance(summary, dict):
        summary, details = summary.get("summary"), summary.get("details", details)
    if not isinstance(summary, str) or not summary:
        summary = None
    return TreeDecision(
        bool(result.cancel), summary, details, result.custom_instructions, result.replace_instructions, result.label
    )


def navigate_tree(
    session: Any,
    target_id: Optional[str],
    summarize: bool = False,
    *,
    model: Any = None,
    stream_fn: Optional[Callable[..., Any]] = None,
    custom_instructions: Optional[str] = None,
    replace_instructions: bool = False,
    label: Optional[str] = None,
    signal: Any = None,
    reserve_tokens: int = _DEFAULT_RESERVE,
    thinking_level: Optional[str] = None,
    plugins: Any = None,
    **options: Any,
) -> NavigationResult:
    """Move ``session`` to ``target_id``, optionally summarising the branch left behind.

    Target == current leaf: nothing happens (``moved`` False). A user message or custom message
    target moves to its parent and returns its text as ``editor_text``. With ``summarize`` and a
    non-empty abandoned branch, a ``branch_summary`` entry (``details`` = file lists, ``usage``)
    is appended under the new position and becomes the leaf. ``label`` labels the target.
    The ``before_branch_summary`` hook of ``plugins`` is asked first: it may cancel (nothing is
    written, ``cancelled`` True), supply the summary (its ``details`` must be JSON, else
    ``summarization_failed``), or override the instructions and label.
    Errors: unknown target ``SessionError("not_found")``; summary failures
    :class:`~agentcore.session.compaction.CompactionError` (its ``usage``: what the failed
    request was billed); an abort of ``signal`` at any point before the move, also after the
    summary came back, is ``CompactionError("aborted")``; a ``label`` that is not a string is a
    TypeError (a hook's: ``summarization_failed``); nothing is written on failure.
    """
    if label is not None and not isinstance(label, str):  # refused before the move, not after it
        raise TypeError(f"navigate_tree(label=...) takes a string or None, not {type(label).__name__}")
    old_leaf = session.leaf_id
    if target_id == old_leaf:
        return NavigationResult(old_leaf, moved=False)
    target = session.get_entry(target_id) if target_id is not None else None
    if target_id is not None and (target is None or not session.storage.is_tree_node(target_id)):
        raise SessionError("not_found", f"cannot navigate to {target_id!r}: no such entry")
    hooked = _hook_caller(plugins, "before_branch_summary") is not None
    collected = (
        collect_entries_for_branch_summary(session, old_leaf, target_id)
        if summarize or hooked
        else BranchCollection([], None)
    )
    decision = None
    if hooked:
        if signal is None:
            from ..signals import AbortController

            signal = AbortController().signal
        decision = run_before_branch_summary(
            plugins,
            TreePreparation(
                target_id,
                old_leaf,
                collected.common_ancestor_id,
                list(collected.entries),
                bool(summarize),
                custom_instructions,
                replace_instructions,
                label,
            ),
            signal,
        )
    if decision is not None:
        if decision.cancel:
            return NavigationResult(old_leaf, moved=False, cancelled=True)
        if decision.custom_instructions is not None:
            custom_instructions = decision.custom_instructions
        if decision.replace_instructions is not None:
            replace_instructions = bool(decision.replace_instructions)
        if decision.label is not None:
            if not isinstance(decision.label, str):
                raise CompactionError(
                    "summarization_failed",
                    f"Branch summary failed: the before_branch_summary hook returned a label that is not "
                    f"a string ({type(decision.label).__name__}); nothing was written",
                )
            label = decision.label
    summary: Optional[BranchSummaryResult] = None
    if summarize and collected.entries:
        if decision is not None and decision.summary is not None:
            _json_details(decision.details, "Branch summary failed: the before_branch_summary hook")
            summary = BranchSummaryResult(decision.summary, from_hook=True, hook_details=decision.details)
        else:
            summary = generate_branch_summary(
                collected.entries,
                model,
                stream_fn=stream_fn,
                reserve_tokens=reserve_tokens,
                custom_instructions=custom_instructions,
                replace_instructions=replace_instructions,
                signal=signal,
                thinking_level=thinking_level,
                plugins=plugins,
                **options,
            )
    if signal is not None and getattr(signal, "aborted", False):  # came after the summary: write nothing
        billed = summary.usage if summary is not None else None
        raise CompactionError(
            "aborted",
            "Navigation aborted before anything was written",
            usage=Usage.from_dict(billed) if billed else None,
        )
    editor_text = _editor_text(target) if target is not None else None
    new_leaf = target.parent_id if editor_text is not None and target is not None else target_id
    summary_id = session.move_to(new_leaf, _summary_spec(summary))
    if label is not None and target_id is not None:
        session.append_label(target_id, label)
    return NavigationResult(new_leaf, editor_text, summary_id, summary)


def _summary_spec(summary: Optional[BranchSummaryResult]) -> Optional[Dict[str, Any]]:
    """What ``session.move_to`` stores for ``summary`` (None: no branch_summary entry)."""
    if summary is None:
        return None
    spec = {"summary": summary.summary, "details": summary.details}
    if summary.usage is not None:
        spec["usage"] = summary.usage
    if summary.from_hook:
        spec["from_hook"] = True
    return spec

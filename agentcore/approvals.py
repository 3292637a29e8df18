"""Approvals that pause: tool calls that wait for a human decision (issue 13, DESIGN §6).

A tool with ``requires_approval`` (``True``, or a callable ``args -> bool`` given the validated
arguments) is not executed when the model calls it. The loop asks :func:`split_batch` which calls
of a batch must wait, emits one :class:`~agentcore.events.ToolApprovalRequestEvent` per such call,
runs the others as usual and then settles the run (the pause is a loop outcome, see
:mod:`agentcore.loop`). The agent keeps an :class:`Approvals` book of the waiting calls and of the
decisions taken with ``agent.approve(id, args=None)`` / ``agent.deny(id, reason=None)``;
``agent.continue_()`` hands a :class:`Resumption` to the loop, which runs the approved calls
(with edited arguments, validated again), turns the denied ones into error results carrying the
reason (exactly as a blocking ``before_tool_call`` does) and goes on with the model.

Arguments: ``prepare_arguments`` is a shim for what the *model* sends, so it is only ever applied
to the model's arguments (by :func:`split_batch` and by the loop's preflight), never to its own
output. ``PendingApproval.args`` are the result (prepared and validated: what ``execute`` would
receive), and edited ``args`` of ``approve()`` take that same shape: they are validated against
the tool's schema, never passed through the shim, and replace the prepared arguments of the call
when it runs (through the resumed run's ``before_tool_call``, see :meth:`Resumption.gate`). A tool
is resolved by name as the loop resolves it: the first tool of that name.

Events: the pausing run emits, for that batch, the requests and the events of the calls that ran,
then ``turn_end`` (with the results so far) and ``agent_end``. The resumed run emits
``agent_start``, ``turn_start``, the decided calls' tool events and results, and a second
``turn_end`` for the same assistant message (with the resumed results), then goes on as usual.
The tool events of a call carry its block's (the model's) arguments, edited or not; the result of
an edited call ends with a note giving the arguments that ran (:meth:`Resumption.annotate`).
The tool results of the resumed calls follow the others in the transcript. They finish the paused
batch: a resumed result asking to ``terminate`` ends the run only when the batch's calls that ran
before the pause asked for it too (which only the pausing process knows: after a reload, a batch
with such calls goes on to the model).

Sessions: every request and decision is a ``custom`` entry of type ``"agentcore.approval"``
(data ``{"kind": "request", "toolCallId", "toolName", "args"}`` or ``{"kind": "decision",
"toolCallId", "approved", "args"?, "reason"?}``, and ``{"kind": "started", "toolCallId"}`` when a
resumed run is about to execute an approved call): extension state the reference ignores, never a
message. :meth:`Approvals.load` folds them over the current branch, so an agent opened on the
session in another process sees the same pending calls and decisions. A call whose tool result is
on the branch is settled and no longer pending; a later assistant message (a response after the
pause: the calls were abandoned, e.g. by an abort) drops the waiting calls, in memory and on load.
A call marked started without a result after it (its process was killed while it ran) is not
pending either: it never runs a second time on a human's one approval, and ``continue_()`` answers
it as interrupted (see :meth:`agentcore.agent.Agent.continue_`).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, FrozenSet, Iterable, List, Optional, Sequence, Set, Tuple

from . import tools as _tools
from ._safe import exception_message, json_safe
from .types import TextContent, ToolCall

__all__ = ["PendingApproval", "ApprovalDecision", "Approvals", "Resumption", "split_batch", "CUSTOM_TYPE", "ERR_DENIED"]

_log = logging.getLogger("agentcore.approvals")

#: the ``customType`` of the session entries that record requests and decisions
CUSTOM_TYPE = "agentcore.approval"
#: the error text of a call denied without a reason
ERR_DENIED = "Tool execution was denied"


@dataclass(frozen=True)
class PendingApproval:
    """A tool call waiting for ``agent.approve()`` or ``agent.deny()``.

    ``args`` are the call's arguments after ``prepare_arguments`` and validation: what the tool's
    ``execute`` receives if the call is approved unchanged, and the shape ``approve(args=)`` takes.
    """

    tool_call_id: str
    tool_name: str
    args: Any


#: what :meth:`Approvals.load` asks how a call would wait (the agent's :func:`split_batch` of one call)
_Prepare = Callable[[ToolCall], Optional[PendingApproval]]


@dataclass(frozen=True)
class ApprovalDecision:
    """What was decided about one call.

    ``args``, when not None, replaces the call's prepared arguments: it has the shape of
    ``PendingApproval.args`` (the tool's schema) and is validated but never given to
    ``prepare_arguments``."""

    approved: bool
    args: Any = None
    reason: Optional[str] = None


# =========================================================================== the loop's side


def needs_approval(tool: Any, args: Any) -> bool:
    """Whether a call of ``tool`` with the validated ``args`` must wait for a decision.

    A callable ``requires_approval`` that raises counts as "yes": failing open would execute a
    call its author wanted to see first."""
    rule = getattr(tool, "requires_approval", False)
    if rule is True or rule is False:
        return rule
    if not callable(rule):
        return bool(rule)
    try:
        return bool(rule(args))
    except Exception:  # noqa: BLE001 - see the docstring
        return True


def find_tool(tools: Optional[Sequence[Any]], name: str) -> Any:
    """The tool the loop runs for a call of ``name``: the first of ``tools`` with that name, or None.

    Must resolve exactly as ``agentcore.loop._find_tool`` does: when two tools share a name, asking
    about any other one would let the call run without the approval its tool requires."""
    for tool in tools or ():
        if tool.name == name:
            return tool
    return None


def split_batch(
    tools: Optional[Sequence[Any]], calls: Sequence[ToolCall]
) -> Tuple[List[ToolCall], List[PendingApproval]]:
    """``calls`` split into those that run now and those that wait for approval (source order).

    Each call is judged by the tool the loop would execute for it (:func:`find_tool`), on its
    arguments prepared and validated as the loop does. A call whose arguments fail preparation or
    validation runs now: the loop turns it into the usual error result, and nobody is asked about a
    call that could not run anyway. ``prepare_arguments`` is given a copy of the model's arguments:
    the loop prepares the call's own arguments again when it runs, so a shim that changes its input
    in place must find them as the model sent them."""
    runnable: List[ToolCall] = []
    waiting: List[PendingApproval] = []
    for call in calls:
        tool = find_tool(tools, call.name)
        if tool is None or getattr(tool, "requires_approval", False) is False:
            runnable.append(call)
            continue
        try:
            raw = call.arguments
            if tool.prepare_arguments is not None:
                raw = tool.prepare_arguments(_copy_of(raw))
            args = _tools.validate_tool_arguments(tool, raw)
        except Exception:  # noqa: BLE001 - the loop reports it as the call's error result
            runnable.append(call)
            continue
        if needs_approval(tool, args):
            waiting.append(PendingApproval(call.id, call.name, args))
        else:
            runnable.append(call)
    return runnable, waiting


def _copy_of(arguments: Any) -> Any:
    """A deep copy of a call's arguments (parsed JSON); themselves when they cannot be copied."""
    try:
        return copy.deepcopy(arguments)
    except Exception:  # noqa: BLE001 - not JSON: judged on the originals, as before
        return arguments


@dataclass
class Resumption:
    """The decisions ``continue_()`` resumes a paused run with.

    ``message`` is the assistant message whose calls were waiting; ``decisions`` maps each waiting
    call id to its :class:`ApprovalDecision`.

    The resumed calls finish the paused batch, so a result asking to ``terminate`` ends the run only
    when the results of the batch's other calls (those that ran before the pause) asked for it too
    (the loop's rule for a batch). Only the agent's :class:`Approvals` book saw those results:
    it tells the Resumption it makes (see :meth:`annotate`); one built by hand trusts the resumed
    results alone."""

    message: Any
    decisions: Dict[str, ApprovalDecision]
    #: False: a call of the paused batch that ran before the pause did not ask to terminate
    _others_terminate: bool = dataclasses.field(default=True, init=False, repr=False, compare=False)

    def calls(self) -> List[ToolCall]:
        """The decided tool call blocks of ``message``, in source order and unchanged.

        They carry the model's arguments, so the loop's preflight prepares (``prepare_arguments``,
        once) and validates them as for any call; the edited arguments of an approval are put in
        by :meth:`gate`, after that preparation, because the shim must not see them."""
        return [b for b in self.message.content if isinstance(b, ToolCall) and b.id in self.decisions]

    def gate(self, before_tool_call: Optional[Callable[..., Any]]) -> Callable[..., Any]:
        """``before_tool_call`` for the resumed run.

        A denied call is blocked with its reason (the reference's blocked-call result). For a call
        approved with edited arguments, they are validated against the schema of the tool the loop
        runs (:func:`find_tool`) and replace, in place, the prepared arguments the hook receives:
        the loop hands ``execute`` that same object without validating it again (as the reference's
        loop does). Then every call that is not denied goes to ``before_tool_call``, which so sees the
        arguments that will run. Edited arguments that fail validation raise
        :class:`~agentcore.tools.ToolValidationError`, and the loop turns that into the call's
        error result."""
        from ._loop_types import BeforeToolCallResult

        denied = {call_id: d.reason or ERR_DENIED for call_id, d in self.decisions.items() if not d.approved}
        edited = {i: d.args for i, d in self.decisions.items() if d.approved and d.args is not None}

        def hook(context: Any, signal: Any) -> Any:
            call = context.tool_call
            reason = denied.get(call.id)
            if reason is not None:
                return BeforeToolCallResult(block=True, reason=reason)
            if call.id in edited:
                _replace_args(context, edited[call.id])
            if before_tool_call is None:
                return None
            return before_tool_call(context, signal)

        return hook

    def annotate(self, after_tool_call: Optional[Callable[..., Any]]) -> Optional[Callable[..., Any]]:
        """``after_tool_call`` for the resumed run: the result of a call approved with edited
        arguments ends with a note giving them. The transcript's tool call keeps the model's own
        arguments, so without it the model would believe those ran. When a call of the paused
        batch that ran before the pause did not ask to ``terminate``, no resumed result does either
        (the batch goes on to the model, as it would have without the pause)."""
        edited = {i: d.args for i, d in self.decisions.items() if d.approved and d.args is not None}
        if not edited and self._others_terminate:
            return after_tool_call
        from ._loop_types import AfterToolCallResult, merge_after_tool_call
        from ._util import field_of

        go_on = not self._others_terminate

        def hook(context: Any, signal: Any) -> Any:
            override = None if after_tool_call is None else merge_after_tool_call(after_tool_call(context, signal))
            if go_on:
                override = _no_terminate(override)
            call_id = context.tool_call.id
            if call_id not in edited:
                return override
            content = field_of(override, "content") if override is not None else None
            content = context.result.content if content is None else content
            blocks = [TextContent(content)] if isinstance(content, str) else list(content or [])
            args = json.dumps(json_safe(edited[call_id]), ensure_ascii=False)
            blocks.append(
                TextContent(f"[The user edited the arguments before approving this call; it ran with: {args}]")
            )
            if override is None:
                return AfterToolCallResult(content=blocks)
            if isinstance(override, dict):
                return {**override, "content": blocks}
            return dataclasses.replace(override, content=blocks)

        return hook


def _no_terminate(override: Any) -> Any:
    """``override`` (an ``after_tool_call`` answer, or None) also setting ``terminate`` to False."""
    from ._loop_types import AfterToolCallResult

    if override is None:
        return AfterToolCallResult(terminate=False)
    if isinstance(override, dict):
        return {**override, "terminate": False}
    return dataclasses.replace(override, terminate=False)


def _replace_args(context: Any, edited: Any) -> None:
    """Put the validated ``edited`` arguments into ``context.args``, the object ``execute`` gets."""
    call = context.tool_call
    tool = find_tool(getattr(context.context, "tools", None), call.name)
    if tool is None:  # not while ``context.context`` is the loop's: the call's tool came from it
        raise ValueError(f"Tool {call.name} not found to validate the edited arguments of call {call.id}")
    args = _tools.validate_tool_arguments(tool, edited)
    target = context.args
    if not isinstance(target, dict) or not isinstance(args, dict):
        raise TypeError(
            f"the edited arguments of call {call.id} ({call.name}) cannot replace its prepared "
            f"arguments: both must be JSON objects, not {type(target).__name__} and {type(args).__name__}"
        )
    target.clear()
    target.update(args)


# =========================================================================== the agent's side


ERR_UNKNOWN_ID = (
    "{method}({call_id!r}): no tool call with that id waits for approval; "
    "pending: {pending}. See agent.pending_approvals"
)
ERR_RESUMING = (
    "{method}({call_id!r}): that call no longer waits: the run continue_() started is executing "
    "it with the decision taken before"
)
ERR_UNDECIDED = (
    "{method}: {count} tool call(s) still wait for a decision ({calls}); call "
    "agent.approve(id) or agent.deny(id) for each of them, then {method}"
)
ERR_PENDING_PROMPT = (
    "{method}(): {count} tool call(s) wait for approval ({calls}); decide each with "
    "agent.approve(id) or agent.deny(id, reason), then call agent.continue_() "
    "before prompting again"
)
ERR_NOT_IN_TRANSCRIPT = (
    "continue_(): the tool calls waiting for approval ({calls}) are not calls "
    "of the transcript's last assistant message any more; the transcript was "
    "replaced. Call agent.reset() to drop them"
)


def _describe(pending: Iterable[PendingApproval]) -> str:
    items = [f"{p.tool_name} {p.tool_call_id}" for p in pending]
    return ", ".join(items) if items else "none"


class Approvals:
    """One agent's book of waiting calls and their decisions (thread-safe).

    Changed by :meth:`observe` (the agent's events: a ``tool_approval_request`` adds a call, the
    ``message_end`` of its tool result settles it), by :meth:`decide` and by :meth:`load`. With a
    session attached every request and decision is also recorded there (see the module doc)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # held by decide() from its check to its record, and by resuming() as it takes the
        # decisions: a decision is either in the resumed run or refused, never silently dropped
        self._deciding = threading.Lock()
        self._pending: Dict[str, PendingApproval] = {}
        self._decisions: Dict[str, ApprovalDecision] = {}
        self._resuming: FrozenSet[str] = frozenset()  # the calls a resumed run is executing
        # the calls of the latest batch whose result asked to terminate (known in this process only)
        self._terminating: Set[str] = set()
        self._session: Any = None

    # -- reading

    @property
    def pending(self) -> List[PendingApproval]:
        """The waiting calls, in the order they were requested (not those a resumed run executes)."""
        with self._lock:
            return [p for i, p in self._pending.items() if i not in self._resuming]

    def get(self, call_id: str) -> Optional[PendingApproval]:
        if not isinstance(call_id, str):
            return None
        with self._lock:
            return None if call_id in self._resuming else self._pending.get(call_id)

    def __bool__(self) -> bool:
        return bool(self._pending)

    def undecided(self) -> List[PendingApproval]:
        with self._lock:
            return [p for i, p in self._pending.items() if i not in self._decisions]

    def check_can_prompt(self, method: str) -> None:
        """RuntimeError naming what to do when calls wait for approval (a new prompt would leave
        their tool calls without results, which providers reject)."""
        pending = self.pending
        if pending:
            raise RuntimeError(ERR_PENDING_PROMPT.format(method=method, count=len(pending), calls=_describe(pending)))

    def resumption(self, messages: Sequence[Any], method: str = "continue_()") -> Optional[Resumption]:
        """The :class:`Resumption` for ``continue_()`` (or ``method``, as errors name it), or None
        when nothing waits.

        Raises RuntimeError when a waiting call is undecided, or when the transcript's last
        assistant message is not the one holding the waiting calls."""
        with self._lock:
            pending = list(self._pending.values())
            decisions = dict(self._decisions)
        if not pending:
            return None
        undecided = [p for p in pending if p.tool_call_id not in decisions]
        if undecided:
            raise RuntimeError(ERR_UNDECIDED.format(method=method, count=len(undecided), calls=_describe(undecided)))
        owner = _last_assistant(messages)
        ids = {getattr(b, "id", None) for b in getattr(owner, "content", ()) if isinstance(b, ToolCall)}
        if owner is None or any(p.tool_call_id not in ids for p in pending):
            raise RuntimeError(ERR_NOT_IN_TRANSCRIPT.format(calls=_describe(pending)))
        resumption = Resumption(owner, {p.tool_call_id: decisions[p.tool_call_id] for p in pending})
        with self._lock:  # after a reload nothing is known of the others: the batch goes on
            resumption._others_terminate = (ids - set(resumption.decisions)) <= self._terminating
        return resumption

    # -- changing

    def decide(self, method: str, call_id: str, decision: ApprovalDecision) -> None:
        """Record ``decision`` (the latest one counts). TypeError for an id that is not a str,
        ValueError for an id that is not pending, or that a resumed run is executing (its decision
        was taken when the run started). A ``continue_()`` that starts meanwhile waits for this
        call to return and runs with the decision it recorded."""
        if not isinstance(call_id, str):
            hint = " (its tool_call_id)" if isinstance(call_id, PendingApproval) else ""
            raise TypeError(
                f"{method}() takes the id of a waiting tool call as a str, not a "
                f"{type(call_id).__name__}{hint}; see agent.pending_approvals"
            )
        with self._deciding:
            self._decide(method, call_id, decision)

    def _decide(self, method: str, call_id: str, decision: ApprovalDecision) -> None:
        with self._lock:
            if call_id in self._resuming:
                raise ValueError(ERR_RESUMING.format(method=method, call_id=call_id))
            if call_id not in self._pending:
                raise ValueError(
                    ERR_UNKNOWN_ID.format(method=method, call_id=call_id, pending=_describe(self._pending.values()))
                )
            session = self._session
        if session is not None:  # on disk first: a failed write leaves the call undecided
            data: Dict[str, Any] = {"kind": "decision", "toolCallId": call_id, "approved": decision.approved}
            if decision.args is not None:
                data["args"] = json_safe(decision.args)
            if decision.reason is not None:
                data["reason"] = decision.reason
            session.append_custom(CUSTOM_TYPE, data)
        with self._lock:
            if call_id in self._pending:
                self._decisions[call_id] = decision

    def observe(self, event: Any) -> None:
        """Follow the agent's events (called by its reducer, on the run thread).

        A request is recorded in the attached session before the call becomes pending, so a
        decision taken as soon as it shows up (from a listener, or another thread) is never on
        disk before its request (:meth:`load` ignores a decision for a call not yet requested). A
        failed write raises here, before anything changed: the run fails as for a listener error."""
        kind = event.type
        if kind == "tool_approval_request":
            session = self._session
            if session is not None:
                session.append_custom(
                    CUSTOM_TYPE,
                    {
                        "kind": "request",
                        "toolCallId": event.tool_call_id,
                        "toolName": event.tool_name,
                        "args": json_safe(event.args),
                    },
                )
            with self._lock:
                self._pending[event.tool_call_id] = PendingApproval(event.tool_call_id, event.tool_name, event.args)
                self._decisions.pop(event.tool_call_id, None)
        elif kind == "tool_execution_start":
            session = self._session
            with self._lock:
                decision = self._decisions.get(event.tool_call_id) if event.tool_call_id in self._resuming else None
            if session is not None and decision is not None and decision.approved:
                # on disk before it runs: a process killed meanwhile must not run it again on reload
                session.append_custom(CUSTOM_TYPE, {"kind": "started", "toolCallId": event.tool_call_id})
        elif kind == "tool_execution_end":
            if getattr(event.result, "terminate", None) is True:
                with self._lock:
                    self._terminating.add(event.tool_call_id)
        elif kind == "message_end" and getattr(event.message, "role", None) == "assistant":
            with self._lock:  # a new batch
                self._terminating.clear()
            if self._pending:  # a later response: the waiting calls can never run now
                self.clear()
        elif kind == "message_end" and self._pending:
            role = getattr(event.message, "role", None)
            if role == "toolResult":
                call_id = str(getattr(event.message, "tool_call_id", ""))
                with self._lock:
                    self._pending.pop(call_id, None)
                    self._decisions.pop(call_id, None)

    def clear(self) -> None:
        with self._lock:
            self._pending.clear()
            self._decisions.clear()
            self._terminating.clear()

    def resuming(self, resumption: Optional[Resumption]) -> None:
        """The run that resumes ``resumption`` has begun (None: the agent's run has ended). Until
        it ends, its calls are neither listed as pending nor open to a new decision: the run acts
        on the decisions it started with. Calls it did not finish because it failed before the
        loop began are pending again afterwards, with their decisions; an abort (or a run failure)
        ends it with an assistant message, which abandons the calls still without a result (see
        :meth:`observe`).

        A decision being recorded meanwhile (:meth:`decide` on another thread) is waited for and
        put into ``resumption``: the run acts on the latest decision of each call."""
        if resumption is None:
            with self._lock:
                self._resuming = frozenset()
            return
        with self._deciding, self._lock:
            for call_id, decision in resumption.decisions.items():
                resumption.decisions[call_id] = self._decisions.get(call_id, decision)
            self._resuming = frozenset(resumption.decisions)

    # -- sessions

    def attach_session(self, session: Any, prepare: Optional[_Prepare] = None) -> Callable[[], None]:
        """Load the session's waiting calls and decisions (``prepare``: see :meth:`load`), and
        record new requests (through :meth:`observe`) and decisions (through :meth:`decide`) into
        it. Returns the function that stops recording."""
        self.load(session, prepare)
        self._session = session

        def detach() -> None:
            if self._session is session:
                self._session = None

        return detach

    def load(self, session: Any, prepare: Optional[_Prepare] = None) -> None:
        """Replace the book with the requests and decisions on ``session``'s current branch
        made after its last assistant message whose calls have no tool result after it yet (a
        result of an earlier turn does not count: some providers reuse call ids across turns).

        A request only says which call waits: the call is the one a resumed run executes, the
        tool call of that id in that assistant message. Its tool name is the call's, and its
        arguments are what ``prepare(call)`` answers (the agent's :func:`split_batch` over its
        tools: the arguments prepared and validated as the loop prepares them), else the call's
        own (no ``prepare``, or the call would not wait with these tools). A request naming
        another tool or other arguments (a session file from another program) would otherwise
        have the user approve one call and run another; it is logged (WARNING, the tool names
        only). Without ``prepare``, a request naming the call's own tool keeps its arguments."""
        pending: Dict[str, PendingApproval] = {}
        decisions: Dict[str, ApprovalDecision] = {}
        storage = getattr(session, "storage", None)
        count_of = getattr(storage, "count_of", None)
        if count_of is None or count_of("custom"):
            settled: Set[str] = set()
            owner: Any = None  # the last assistant message: whose calls the requests are
            for entry in session.get_branch():
                if entry.type == "message":
                    if getattr(entry.message, "role", None) == "assistant":
                        pending.clear()  # requests of earlier turns can never run now
                        decisions.clear()
                        settled.clear()  # nor do their results settle this turn's calls (ids recur)
                        owner = entry.message
                    call_id = getattr(entry.message, "tool_call_id", None)
                    if call_id is not None:
                        settled.add(call_id)
                elif entry.type == "custom" and getattr(entry, "custom_type", None) == CUSTOM_TYPE:
                    _fold(entry.data, pending, decisions)
            for call_id in settled:
                pending.pop(call_id, None)
            pending = {i: _as_executed(p, owner, prepare, session) for i, p in pending.items()}
            decisions = {i: d for i, d in decisions.items() if i in pending}
        with self._lock:
            self._pending, self._decisions = pending, decisions
            self._terminating = set()  # nothing known of the loaded batch's results


def _as_executed(request: PendingApproval, owner: Any, prepare: Optional[_Prepare], session: Any) -> PendingApproval:
    """The waiting call ``request`` names as the resumed run executes it (see :meth:`Approvals.load`).
    A request whose call is not in ``owner`` stays as recorded: ``continue_()`` refuses it by name."""
    call = next(
        (b for b in getattr(owner, "content", None) or () if isinstance(b, ToolCall) and b.id == request.tool_call_id),
        None,
    )
    if call is None:
        return request
    waiting: Optional[PendingApproval] = None
    if prepare is not None:
        try:
            waiting = prepare(call)
        except Exception:  # noqa: BLE001 - a tool list that cannot be resolved: the call's own arguments
            waiting = None
    if waiting is None:
        same = prepare is None and request.tool_name == call.name
        waiting = PendingApproval(call.id, call.name, request.args if same else call.arguments)
    if request.tool_name != waiting.tool_name or (
        prepare is not None and _json_text(request.args) != _json_text(waiting.args)
    ):
        _log.warning(
            "%s: the approval request of tool call %r names %r with other arguments than the call of that id "
            "(%r), which is what a resumed run executes: that call is the one waiting",
            getattr(session, "path", None) or "session",
            request.tool_call_id,
            request.tool_name,
            waiting.tool_name,
        )
    return waiting


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True, default=repr)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


def _fold(data: Any, pending: Dict[str, PendingApproval], decisions: Dict[str, ApprovalDecision]) -> None:
    """Apply one recorded request or decision; malformed data (another writer's) is ignored."""
    if not isinstance(data, dict) or not isinstance(data.get("toolCallId"), str):
        return
    call_id = data["toolCallId"]
    if data.get("kind") == "request":
        pending[call_id] = PendingApproval(call_id, str(data.get("toolName", "")), data.get("args"))
        decisions.pop(call_id, None)
    elif data.get("kind") == "started":  # a resumed run began it: never pending again
        pending.pop(call_id, None)
        decisions.pop(call_id, None)
    elif data.get("kind") == "decision" and call_id in pending:
        reason = data.get("reason")
        decisions[call_id] = ApprovalDecision(
            bool(data.get("approved")), data.get("args"), reason if isinstance(reason, str) else None
        )


def _last_assistant(messages: Sequence[Any]) -> Any:
    for message in reversed(messages):
        role = getattr(message, "role", None)
        if role == "assistant":
            return message
        if role != "toolResult":
            return None
    return None


def validated_args(tool: Any, args: Any, call_id: str) -> Any:
    """Edited ``args`` for ``approve()``, validated against ``tool``'s schema (a coerced copy).

    They have the shape of ``PendingApproval.args``: ``prepare_arguments`` is not applied (it
    already ran on the model's arguments and will not run on these). Raises ValueError saying the
    call is still pending when they do not match the schema."""
    try:
        return _tools.validate_tool_arguments(tool, args)
    except Exception as exc:  # noqa: BLE001 - reported with what to do
        raise ValueError(
            f"approve({call_id!r}): the edited arguments were rejected, so the call is "
            f"still pending; approve it again with args in the shape of its "
            f"agent.pending_approvals entry (the tool's schema; prepare_arguments is not "
            f"applied to them), or deny it.\n"
            f"{exception_message(exc)}"
        ) from None

"""Sub-agents: an :class:`~agentcore.agent.Agent` used as a tool of another (``agent.as_tool``).

The tool takes ``{"task": str}``, prompts the sub-agent with the task and returns its final text.

* A fresh agent per call, built from the template agent's settings (model, system prompt, tools,
  thinking level, hooks, stream options, constructor plugins, compaction settings) and starting
  from a copy of its transcript: two calls, parallel or not, never share a transcript. With
  ``keep_history=True`` every call prompts the template agent itself, one call at a time (a call
  waits for the one before to end), so the history carries over. Such a tool called from within
  its own agent's run (directly or through other sub-agents) could never start: it raises at once.
* Usage: the tokens and cost of every sub-agent response (and of its own tool results, nested
  sub-agents included) and of its compactions' summary requests (the ``usage`` of its
  ``compaction_end`` events, a failed compaction's too) are summed into the tool result's
  ``usage``.
* Events: every event of the sub-agent's run reaches the parent's listeners as a
  ``tool_execution_update`` whose ``partial_result`` is an ``AgentToolResult`` with the text so
  far and ``details={"subagent": name, "event": event}``.
* Abort: the parent's abort aborts the sub-agent's run, and ends at once a ``keep_history`` call
  still waiting for the one before. A sub-agent run that fails, is aborted or pauses for an
  approval raises, so the parent gets an error result (never a hung parent); its text ends with
  where the run is recorded, when it has a session (a paused run's waiting calls can be approved
  there and continued).
* Sessions: when the parent agent has a session, a fresh sub-agent records its run in a session
  of its own (after the copy of the template's transcript it starts from, so that an agent
  resumed from that session sees what the sub-agent saw), linked from the result's
  ``details["session"]``: a JSONL file next to the parent's
  (``<parent>.<tool name>-<call id>.jsonl``, its header's ``parentSession`` naming the parent
  file), or a new session in the parent's SQLite database (``{"path", "id"}``). A
  ``keep_history`` sub-agent records into its own session, if it has one. In-memory parents link
  nothing.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import os
import re
import threading
from contextvars import ContextVar
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from .signals import AbortController, AbortSignal
from .tools import AgentTool, AgentToolResult
from .types import TextContent, Usage, add_usage

__all__ = ["subagent_tool", "TASK_PARAMETERS"]

TASK_PARAMETERS: Dict[str, Any] = {
    "type": "object",
    "properties": {"task": {"type": "string", "description": "What the sub-agent should do"}},
    "required": ["task"],
    "additionalProperties": False,
}

# The sub-agent tools whose runs enclose the current one (outermost first): a sub-agent's run and
# its tool calls execute in copies of the calling tool's contextvars context.
_calling: ContextVar[Tuple[Any, ...]] = ContextVar("agentcore_subagent_calls", default=())


def subagent_tool(agent: Any, name: str, description: str, *, keep_history: bool = False) -> AgentTool:
    """An :class:`AgentTool` named ``name`` that runs ``agent`` (see the module doc)."""
    if not isinstance(name, str) or not name:
        raise ValueError("as_tool() needs a non-empty tool name")
    runner = _SubAgent(agent, name, keep_history)
    return AgentTool(
        name=name, description=description, parameters=copy.deepcopy(TASK_PARAMETERS), execute=runner.execute
    )


class _SubAgent:
    """The ``execute`` of one sub-agent tool."""

    def __init__(self, template: Any, name: str, keep_history: bool) -> None:
        self.template = template
        self.name = name
        self.keep_history = keep_history
        self._turn = threading.Condition()  # serialises keep_history calls on the one agent
        self._busy = False

    def execute(self, tool_call_id: str, args: Any, signal: Optional[AbortSignal], on_update: Any) -> AgentToolResult:
        task = args["task"]
        signal = signal if signal is not None else AbortController().signal
        chain, parent = _calling.get(), _running_parent()
        if self.keep_history and (self in chain or parent is self.template):
            raise RuntimeError(
                f"sub-agent {self.name!r} (keep_history=True) was called from within its own run; its "
                f"agent is busy with the call that led here, so this call could never start. Give the "
                f"agent a tool made with keep_history=False to let it call itself"
            )
        token = _calling.set(chain + (self,))  # the sub-agent's run copies this context
        try:
            with self._one_at_a_time(signal) if self.keep_history else contextlib.nullcontext():
                if self.keep_history:
                    agent, link = self.template, _session_link(self.template.session)
                else:
                    session = _child_session(parent, self.name, tool_call_id)
                    agent, link = _fresh_agent(self.template, session), _session_link(session)
                summaries: List[Any] = []
                try:
                    messages = _run(agent, task, signal, self._updates(on_update), summaries)
                finally:
                    if not self.keep_history and agent.session is not None:
                        agent.session.close()
        finally:
            _calling.reset(token)
        details: Dict[str, Any] = {"subagent": self.name, "messages": len(messages)}
        if link is not None:
            details["session"] = link
        return AgentToolResult(
            content=[TextContent(_final_text(self.name, agent, messages, link))],
            details=details,
            usage=total_usage(messages, summaries),
        )

    @contextlib.contextmanager
    def _one_at_a_time(self, signal: AbortSignal) -> Iterator[None]:
        """Hold the keep_history agent for one call; waiting for an earlier call to end stops
        (RuntimeError) as soon as ``signal`` is aborted."""

        def wake(reason: Any) -> None:
            with self._turn:
                self._turn.notify_all()

        with self._turn:
            if self._busy:
                signal.add_listener(wake)
                try:
                    while self._busy and not signal.aborted:
                        self._turn.wait()
                finally:
                    signal.remove_listener(wake)
            if signal.aborted:
                raise RuntimeError(f"aborted while sub-agent {self.name!r} was busy with another call")
            self._busy = True
        try:
            yield
        finally:
            with self._turn:
                self._busy = False
                self._turn.notify_all()

    def _updates(self, on_update: Any) -> Any:
        """A listener passing the sub-agent's events to the parent as partial results."""
        name = self.name

        def forward(event: Any) -> None:
            if on_update is None:  # execute() called directly, without a progress callback
                return
            message = getattr(event, "message", None)
            text = _text_of(message) if getattr(message, "role", None) == "assistant" else ""
            on_update(
                AgentToolResult(content=[TextContent(text)] if text else [], details={"subagent": name, "event": event})
            )

        return forward


def _run(agent: Any, task: str, signal: Any, forward: Any, summaries: List[Any]) -> List[Any]:
    """Prompt ``agent`` with ``task`` on this (tool) thread; return the run's messages, and append
    to ``summaries`` the ``usage`` of its compactions (their ``compaction_end`` events).

    The messages are collected from ``message_end`` events, so a compaction that rewrites the
    transcript meanwhile does not confuse them. The parent's ``signal`` aborts the run, also when it
    fires between the check and the start of the run."""
    messages: List[Any] = []

    def listener(event: Any) -> None:
        if event.type == "message_end":
            messages.append(event.message)
        elif event.type == "compaction_end" and getattr(event, "usage", None) is not None:
            summaries.append(event.usage)
        forward(event)

    def on_abort(reason: Any) -> None:
        agent.abort(reason)

    if signal.aborted:
        raise RuntimeError("aborted before the sub-agent started")
    unsubscribe = agent.subscribe(listener)
    try:
        agent.prompt(task, wait=False)
        signal.add_listener(on_abort)  # called at once when the parent was aborted meanwhile
        try:
            agent.wait_for_idle()
        finally:
            signal.remove_listener(on_abort)
    finally:
        unsubscribe()
    return messages


def _final_text(name: str, agent: Any, messages: List[Any], link: Optional[Dict[str, Any]] = None) -> str:
    """The text of the run's last assistant message; RuntimeError when the run did not end with
    an answer (failed, aborted, or paused for approvals). Its message ends with where the run is
    recorded when it has a session (``link``, see :func:`_session_link`): the error result carries
    no ``details``, and a paused run's waiting calls can be decided there."""
    where = _where(link)
    last = next((m for m in reversed(messages) if getattr(m, "role", None) == "assistant"), None)
    if last is None:
        raise RuntimeError(f"sub-agent {name!r} produced no answer{where}")
    if last.stop_reason in ("error", "aborted"):
        what = "was aborted" if last.stop_reason == "aborted" else "failed"
        raise RuntimeError(f"sub-agent {name!r} {what}: {last.error_message or 'no details'}{where}")
    pending = agent.pending_approvals
    if pending:
        calls = ", ".join(f"{p.tool_name} {p.tool_call_id}" for p in pending)
        raise RuntimeError(
            f"sub-agent {name!r} paused for approval of {calls}; a sub-agent cannot "
            f"wait for approvals, give it tools without requires_approval{where}"
        )
    return _text_of(last)


def _where(link: Optional[Dict[str, Any]]) -> str:
    """`` (its run is recorded in ...)`` for a sub-agent run with a session, else ``""``."""
    if link is None:
        return ""
    if "id" in link:
        return f" (its run is recorded in session {link['id']} of {link['path']})"
    return f" (its run is recorded in {link['path']})"


def _text_of(message: Any) -> str:
    return "".join(b.text for b in getattr(message, "content", ()) or () if getattr(b, "type", None) == "text")


def total_usage(messages: List[Any], summaries: Iterable[Any] = ()) -> Usage:
    """The sum of the ``usage`` of ``messages`` (responses and tool results) and of the
    :class:`~agentcore.types.Usage` objects in ``summaries`` (compactions'), cost included."""
    total = Usage()
    for usage in itertools.chain((getattr(m, "usage", None) for m in messages), summaries):
        if isinstance(usage, Usage):
            add_usage(total, usage)
    return total


# --------------------------------------------------------------------------- building the fresh agent


#: attributes an application may set on an agent to name it (agentcore-otel's
#: ``gen_ai.agent.name``/``description``): a fresh sub-agent carries its template's
_LABELS = ("name", "description")

_COPIED = (
    "api_key",
    "get_api_key",
    "stream_fn",
    "convert_to_llm",
    "transform_context",
    "before_tool_call",
    "after_tool_call",
    "should_stop_after_turn",
    "prepare_next_turn",
    "tool_execution",
    "steering_mode",
    "follow_up_mode",
)


def _fresh_agent(template: Any, session: Any) -> Any:
    """A new Agent with ``template``'s settings and a copy of its transcript, which is recorded
    first into ``session`` (when given): the session then holds all the sub-agent saw, and an
    agent resumed from it goes on from there. ``session`` is closed when this fails."""
    from .agent import Agent

    history = list(template.messages)
    settings = {name: getattr(template, name) for name in _COPIED}
    compactor = template.compactor
    try:
        if session is not None:
            _record_history(session, history)
        agent = Agent(
            model=template.model,
            system_prompt=template.system_prompt,
            tools=list(template.tools),
            messages=history,
            thinking_level=template.thinking_level,
            plugins=template._plugin_args,
            compaction=compactor.settings,
            compaction_model=compactor.model,
            options=copy.copy(template.options),
            session=session,
            **settings,
        )
        for label in _LABELS:  # an application's own labels (a tracer names the sub-agent's spans)
            if label in vars(template):
                setattr(agent, label, vars(template)[label])
        return agent
    except BaseException:
        if session is not None:
            session.close()
        raise


def _record_history(session: Any, messages: List[Any]) -> None:
    """Append ``messages`` to ``session``; one that JSON cannot carry in its JSON-safe form, as the
    agent's recorder does (:func:`agentcore.session.agent_link.attach_session`)."""
    from .session.agent_link import _json_safe_message
    from .session.errors import SessionError

    for message in messages:
        try:
            session.append_message(message)
        except SessionError as exc:
            if exc.code != "invalid_payload":
                raise
            session.append_message(_json_safe_message(message))


def _running_parent() -> Any:
    from .agent import running_agent

    return running_agent()


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def _child_session(parent: Any, name: str, tool_call_id: str) -> Any:
    """A new session for a fresh sub-agent next to ``parent``'s session, or None (no parent
    session, or one that is neither JSONL nor SQLite). It syncs to disk as the parent's does
    (its storage's ``fsync`` setting)."""
    session = getattr(parent, "session", None)
    storage = getattr(session, "storage", None)
    path = getattr(storage, "path", None)
    if session is None or path is None:
        return None
    from .session import Session, SqliteSessionStorage
    from .session.jsonl import JsonlSessionStorage

    metadata = {"subagent": name, "toolCallId": tool_call_id, "parentSessionId": session.id}
    fsync = getattr(storage, "fsync", "never")  # as durable as the parent's record
    if isinstance(storage, SqliteSessionStorage):
        return Session(
            SqliteSessionStorage.create(
                path, cwd=session.cwd, parent_session=session.id, metadata=metadata, fsync=fsync
            )
        )
    if not isinstance(storage, JsonlSessionStorage):
        return None
    stem = path[: -len(".jsonl")] if path.endswith(".jsonl") else path
    base = f"{stem}.{_UNSAFE.sub('_', name)}-{_UNSAFE.sub('_', tool_call_id)}"
    candidate, n = base + ".jsonl", 1
    while os.path.exists(candidate):  # the same call id again (a resumed or repeated run)
        n += 1
        candidate = f"{base}-{n}.jsonl"
    return Session.create(candidate, cwd=session.cwd, parent_session=path, metadata=metadata, fsync=fsync)


def _session_link(session: Any) -> Optional[Dict[str, Any]]:
    """Where a reader finds the sub-agent's run: ``{"path"}`` (JSONL) or ``{"path", "id"}``."""
    storage = getattr(session, "storage", None)
    path = getattr(storage, "path", None)
    if session is None or path is None:
        return None
    from .session import SqliteSessionStorage

    if isinstance(storage, SqliteSessionStorage):
        return {"path": path, "id": session.id}
    return {"path": path}

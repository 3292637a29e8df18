"""The Agent's state and its two message queues (re-exported by :mod:`agentcore.agent`).

``AgentState`` is what ``agent.state`` returns; ``_MessageQueue`` implements the steering and
follow-up queues with the in-flight ownership rule of spec agent-loop §3.5.
"""

from __future__ import annotations

import threading
from typing import Any, FrozenSet, Iterable, List, Optional

from .types import Model, role_of

__all__ = ["AgentState"]

QUEUE_MODES = ("one-at-a-time", "all")
TOOL_EXECUTION_MODES = ("parallel", "sequential")


def check_tool_execution(value: Any) -> str:
    """``value`` as a tool execution mode; ValueError for anything else (a typo would silently
    mean "parallel")."""
    mode = str(value)
    if mode not in TOOL_EXECUTION_MODES:
        raise ValueError(f'tool_execution must be "parallel" or "sequential", not {mode!r}')
    return mode


class AgentState:
    """The agent's observable state, and the one place it changes.

    ``tools``/``messages`` setters copy the given list; the getters return the live list. The
    runtime fields (``is_streaming``, ``streaming_message``, ``pending_tool_calls``,
    ``error_message``) are read-only properties: they change only through :meth:`reduce` (the
    reducer of agent events) and the run lifecycle of the owning Agent (``_begin``/``_end``/
    ``_clear``). The active run is held here too, so "busy" is one fact: an Agent is busy while
    ``_run`` is set (a run, or a maintenance step such as ``compact()`` that is not streaming).
    """

    __slots__ = (
        "_system_prompt",
        "model",
        "thinking_level",
        "_tools",
        "_messages",
        "_run",
        "_streaming_message",
        "_pending_tool_calls",
        "_error_message",
    )

    def __init__(
        self, system_prompt: str, model: Model, thinking_level: str, tools: Iterable[Any], messages: Iterable[Any]
    ) -> None:
        self.system_prompt = system_prompt
        self.model = model
        self.thinking_level = thinking_level
        self._tools: List[Any] = list(tools)
        self._messages: List[Any] = list(messages)
        self._run: Any = None  # the Agent's active run (or maintenance placeholder), None when idle
        self._streaming_message: Any = None
        self._pending_tool_calls: FrozenSet[str] = frozenset()
        self._error_message: Optional[str] = None

    @property
    def system_prompt(self) -> str:
        return self._system_prompt

    @system_prompt.setter
    def system_prompt(self, value: Optional[str]) -> None:
        """A str (None: ""); anything else is a TypeError here, where every later request would
        fail with one naming nothing (``Agent(model, [tool])`` put the tools here)."""
        if value is None:
            value = ""
        elif not isinstance(value, str):
            hint = " (tools go in tools=...)" if isinstance(value, (list, tuple)) else ""
            raise TypeError(f"system_prompt must be a str, not {type(value).__name__}{hint}")
        self._system_prompt = value

    @property
    def tools(self) -> List[Any]:
        return self._tools

    @tools.setter
    def tools(self, value: Iterable[Any]) -> None:
        self._tools = list(value)

    @property
    def messages(self) -> List[Any]:
        return self._messages

    @messages.setter
    def messages(self, value: Iterable[Any]) -> None:
        self._messages = list(value)

    @property
    def is_streaming(self) -> bool:
        """True from run start until the run settled (``agent_end`` listeners included)."""
        run = self._run
        return run is not None and run.streaming

    @property
    def streaming_message(self) -> Any:
        """The message being streamed (a new copy of the partial response per read), else None."""
        message = self._streaming_message
        copy = getattr(message, "copy", None)
        return copy() if copy is not None else message

    @property
    def pending_tool_calls(self) -> FrozenSet[str]:
        """Ids of tool calls started and not yet ended; a new frozenset on every change."""
        return self._pending_tool_calls

    @property
    def error_message(self) -> Optional[str]:
        """The error of the last failed turn of the current/last run (reset at run start)."""
        return self._error_message

    # -- the reducer and the run lifecycle (called by the owning Agent only)

    def reduce(self, event: Any) -> None:
        """Apply one agent event. ``message_end`` appends the message; a
        ``compaction_end`` event with ``messages`` replaces the transcript with them."""
        kind = event.type
        if kind == "message_update" or kind == "message_start":  # one per streamed token first
            self._streaming_message = event.message
        elif kind == "message_end":
            self._streaming_message = None
            self._messages.append(event.message)
        elif kind == "tool_execution_start":
            self._pending_tool_calls = self._pending_tool_calls | {event.tool_call_id}
        elif kind == "tool_execution_end":
            self._pending_tool_calls = self._pending_tool_calls - {event.tool_call_id}
        elif kind == "turn_end":
            message = event.message
            if role_of(message) == "assistant" and getattr(message, "error_message", None):
                self._error_message = message.error_message
        elif kind == "agent_end":
            self._streaming_message = None
        elif kind == "compaction_end":
            messages = getattr(event, "messages", None)
            if messages is not None:  # compaction replaced the transcript
                self._messages = list(messages)

    def _begin(self, run: Any) -> None:
        """Mark ``run`` active (the caller checked that none is); a streaming run also resets the
        runtime fields."""
        self._run = run
        if run.streaming:
            self._streaming_message = None
            self._error_message = None

    def _end(self, run: Any) -> bool:
        """Settle ``run``: clear the runtime fields and the run slot if ``run`` holds it."""
        if run.streaming:
            self._streaming_message = None
            self._pending_tool_calls = frozenset()
        if self._run is run:
            self._run = None
            return True
        return False

    def _clear(self) -> None:
        """``Agent.reset()``: an empty transcript and idle runtime fields."""
        self._messages = []
        self._streaming_message = None
        self._pending_tool_calls = frozenset()
        self._error_message = None

    def __repr__(self) -> str:
        return (
            f"AgentState(model={self.model.key if hasattr(self.model, 'key') else self.model!r}, "
            f"messages={len(self._messages)}, tools={len(self._tools)}, "
            f"is_streaming={self.is_streaming}, error_message={self._error_message!r})"
        )


class _MessageQueue:
    """Steering or follow-up queue. A drain moves messages to *in flight*; they are committed when
    their ``message_end`` is reduced and put back at the front when the run settles otherwise."""

    def __init__(self, mode: str) -> None:
        self.mode = mode  # validated by the property
        self._items: List[Any] = []
        self._in_flight: List[Any] = []
        self._lock = threading.Lock()

    @property
    def mode(self) -> str:
        return self._mode

    @mode.setter
    def mode(self, value: Any) -> None:
        mode = str(value)
        if mode not in QUEUE_MODES:  # a typo would silently mean "one-at-a-time"
            raise ValueError(f'queue mode must be "one-at-a-time" or "all", not {mode!r}')
        self._mode = mode

    def push(self, message: Any) -> None:
        with self._lock:
            self._items.append(message)

    def drain(self) -> List[Any]:
        with self._lock:
            if not self._items:
                return []
            if self.mode == "all":
                taken, self._items = self._items, []
            else:
                taken = [self._items.pop(0)]
            self._in_flight.extend(taken)
            return list(taken)

    def commit(self, message: Any) -> None:
        # Called for every finished message; only the run thread drains, so an empty in-flight
        # list read without the lock stays empty until this thread drains again.
        if not self._in_flight:
            return
        with self._lock:
            for index, item in enumerate(self._in_flight):
                if item is message:
                    del self._in_flight[index]
                    return

    def restore(self) -> None:
        with self._lock:
            if self._in_flight:
                self._items[:0] = self._in_flight
                self._in_flight = []

    def clear(self) -> None:
        with self._lock:
            self._items = []
            self._in_flight = []

    def __bool__(self) -> bool:
        return bool(self._items)

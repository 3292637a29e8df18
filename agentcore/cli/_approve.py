"""``--approve`` for ``agentcore run`` and ``chat``: every tool call waits for a y/n at the terminal.

The agent's tools are given ``requires_approval=True`` (copies; the registry's objects are shared),
so a run pauses with its calls in ``agent.pending_approvals`` (see :mod:`agentcore.approvals`).
:meth:`TerminalApprover.settle` then asks about each call on stderr (its tool name on one line and its
arguments as JSON, both without terminal control characters: a resumed session file's waiting
call may name anything; past 2000 characters its beginning and its end with how much is
left out between them, never just a beginning: a command's dangerous end must show), reading one
answer line per call:
``y``/``yes`` approves, ``n``/``no`` denies, ``a``/``always`` approves this call and every later
call of the same tool without asking; for arguments shown shortened, ``s``/``show`` prints them in
full and asks again (a command padded to hide its middle cannot be approved unread). The call
asked about is the one the run executes, also for a resumed session file whose approval request
names another (see :meth:`agentcore.approvals.Approvals.load`). End of input denies what is left
(the model is told so). It continues the run and repeats until no call waits, so a run ends only with an answer.
Ctrl-C while asking leaves the calls pending: with ``--session`` they are saved, and the next
``agentcore run/chat --session ... --approve`` asks about them first.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Callable, List, Optional, Set, TextIO

from .._safe import terminal_text
from ._render import shown_name

__all__ = ["TerminalApprover", "DENIED_AT_TERMINAL", "NO_ANSWER", "waiting_calls"]

DENIED_AT_TERMINAL = "The user denied this tool call at the terminal"
NO_ANSWER = "The tool call was not approved: no answer (end of input)"

_YES, _NO, _ALWAYS, _SHOW = ("y", "yes"), ("n", "no"), ("a", "always"), ("s", "show")


def waiting_calls(agent: Any, command: str, session: Any) -> Optional[str]:
    """Without ``--approve``: what to say when the resumed session's tool calls wait for approval
    (the agent refuses a prompt then), naming them and how to decide them. None when none waits."""
    import shlex

    pending = agent.pending_approvals  # their names and arguments may come from another's session file
    if not pending:
        return None
    calls = ", ".join(
        f"{shown_name(p.tool_name)} {terminal_text(json.dumps(p.args, ensure_ascii=False, default=str)[:80])}"
        for p in pending
    )
    where = getattr(session, "path", None) or getattr(session, "id", None) or "SESSION"
    return (
        f"{len(pending)} tool call(s) of this session wait for approval ({calls}): decide them with "
        f"agentcore {command} --approve -s {shlex.quote(str(where))}"
    )


class TerminalApprover:
    """Asks about pending tool calls; ``read_line()`` returns one answer line, None at end of input."""

    def __init__(self, read_line: Callable[[], Optional[str]], err: TextIO) -> None:
        self.read_line = read_line
        self.err = err
        self.always: Set[str] = set()  # tools approved "always" in this process

    @staticmethod
    def require_approval(agent: Any) -> None:
        """Give every tool of ``agent`` ``requires_approval=True`` (registry names resolved)."""
        tools = []
        for item in agent.tools:
            tool = agent.plugins.get_tool(item) if isinstance(item, str) else item
            tool = copy.copy(tool)
            tool.requires_approval = True
            tools.append(tool)
        agent.tools = tools

    def settle(self, agent: Any, new_messages: Optional[List[Any]]) -> List[Any]:
        """Decide every pending call, continue, and repeat; returns all the new messages."""
        messages = list(new_messages or ())
        while agent.pending_approvals:
            self.decide(agent)
            messages.extend(agent.continue_() or ())
        return messages

    def decide(self, agent: Any) -> None:
        """Decide every call that waits now, asking about each, without continuing the run (an
        ``ask`` that paused goes on with its own ``resume()``: ``run --approve --schema``)."""
        for pending in agent.pending_approvals:
            self._decide(agent, pending)

    def _decide(self, agent: Any, pending: Any) -> None:
        # the call a resumed run executes (agentcore.approvals: Approvals.load), whose name a
        # session file or a model chose: shown on one line, without terminal controls
        tool_name, tool_args = pending.tool_name, pending.args
        name = shown_name(tool_name)
        if tool_name in self.always:
            self._note(f"[approved {name} (always)]")
            agent.approve(pending.tool_call_id)
            return
        # JSON escapes the C0 controls, not DEL or the C1 ones (U+009B is CSI to some terminals)
        full = terminal_text(_json(tool_args))
        args = _shown(full)
        show = " / [s]how all" if args != full else ""  # what is left out can be read before deciding
        while True:
            self.err.write(f"[approve] {name} {args}\n  run it? [y]es / [n]o / [a]lways for {name}{show}: ")
            self.err.flush()
            line = self.read_line()
            if line is None:
                self._note("\n[no answer: denied]")
                agent.deny(pending.tool_call_id, NO_ANSWER)
                return
            answer = line.strip().lower()
            if answer in _YES:
                agent.approve(pending.tool_call_id)
                return
            if answer in _ALWAYS:
                self.always.add(tool_name)
                agent.approve(pending.tool_call_id)
                return
            if answer in _NO:
                agent.deny(pending.tool_call_id, DENIED_AT_TERMINAL)
                return
            if show and answer in _SHOW:
                self._note(f"[arguments of {name} in full ({len(full)} characters)]\n{full}\n[end of the arguments]")
                continue
            self._note(f"[answer y, n or a{', s' if show else ''}, not {line.strip()!r}]")

    def _note(self, text: str) -> None:
        self.err.write(text + "\n")
        self.err.flush()


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


_SHOWN = 2000  # characters of a call's arguments shown whole in the approval question


def _shown(args: str) -> str:
    """``args`` whole up to :data:`_SHOWN` characters, else its first 1200 and last 600 with the
    count left out between them. Cut after 300 characters, ``ls <300 spaces>; rm -rf ~`` showed
    only the ``ls``, and the user approved what they could not see."""
    if len(args) <= _SHOWN:
        return args
    return f"{args[:1200]} ...[{len(args) - 1800} characters not shown]... {args[-600:]}"

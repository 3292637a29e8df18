"""``agentcore chat``: a REPL over one Agent. Lines are prompts; lines starting with ``/`` are commands.
A prompt of several lines (a pasted snippet) goes between a line ``!multi`` and a line ``!end``, as in
``llm chat`` (``!multi X`` ends at ``!end X``, for a text holding a line ``!end``): the lines
between are sent as one prompt; end of input before the end line sends nothing.

Ctrl-C during a run aborts it (tools get the abort signal, the transcript stays valid) and returns
to the prompt; during ``/compact`` it aborts the compaction and waits for it to end, so the session
and the conversation are both compacted (the summary was already stored) or both unchanged; Ctrl-C
at the prompt only clears the line; Ctrl-D (end of input), a stdin that cannot be read (with a
notice) or ``/quit`` leaves, and so does a reader of stdout that went away (``chat | head``: status
0, as for ``run``).
Answers stream to stdout; tool activity, notices and the banner go to stderr, so piping stdin in
and stdout out gives just the answers and command output. With ``--json`` stdout carries only the
event lines (one JSON object each), and the answers of commands go to stderr.

A session write that fails during a turn (a full disk) ends the chat as it ends ``run``: the turn's
outcome is shown, then :class:`~agentcore.session.SessionError` leaves :meth:`Chat.run` and
``main()`` prints it (the file and the reason) and exits with status 1. No further line is read,
so the conversation never goes on beyond what the session file holds.
"""

from __future__ import annotations

import contextvars
import os
import threading
from typing import Any, Callable, Dict, List, Optional, TextIO, Tuple

from .._safe import redact_url, terminal_text
from .._util import wait_interruptibly
from ..providers.reasoning import clamp_to_model, supported_levels
from ._approve import waiting_calls
from ._attach import MAX_ATTACHMENT_BYTES, Attachments, attach_command, check_model_input, prompt_with
from ._context import ContextFile, describe_context
from ._interrupts import Terminated
from ._keys import stored_key
from ._names import uncatalogued_notice
from ._render import TextPrinter, abort_when_closed, run_outcome, shown_name
from ._setup import (
    AgentSetup,
    CliOptions,
    UsageError,
    check_api_key,
    check_thinking,
    record_system,
    resolve_model,
    resolve_tools,
)
from ._usage import count_usage

__all__ = ["Chat", "COMMANDS"]

COMMANDS: Dict[str, str] = {
    "/model [provider/id]": "show the model, or switch to another",
    "/tools [a,b|none]": "show the active tools, or replace them",
    "/thinking [level]": "show or set the thinking level",
    "/session": "where this conversation is saved, its tokens and the running cost of this chat",
    "/branch [N]": "list the prompts on this branch; /branch N goes back to just before prompt N "
    "(saved in the session with the next prompt)",
    "/compact [focus]": "summarise older turns to free context (optional focus instructions)",
    "/attach [PATH|clear]": "send a file (image or text) with the next prompt; no PATH lists them",
    "/context": "the AGENTS.md/CLAUDE.md files in the system prompt, with their sizes",
    "/help": "this list",
    "/quit": "leave (Ctrl-D works too)",
    "!multi ... !end": "a prompt of several lines (a pasted snippet): the lines between them, sent as one",
}

#: the lines that open and close a multi-line prompt, as in ``llm chat`` (``!multi X`` ... ``!end X``
#: when the text itself holds a line ``!end``)
_MULTI, _END = "!multi", "!end"

_QUIT = object()


class Chat:
    """The REPL. ``run()`` returns the exit status: 1 when the last run failed, else 0 (0 too when
    the reader of stdout went away); it raises ``SessionError`` when the session could not record
    a turn (see the module docstring)."""

    def __init__(
        self,
        setup: AgentSetup,
        options: CliOptions,
        stdin: TextIO,
        out: TextIO,
        err: TextIO,
        printer: Optional[Callable[[Any], None]] = None,
    ) -> None:
        self.setup = setup
        self.agent = setup.agent
        self.session = setup.session
        self.options = options
        self.stdin = stdin
        self.out = out
        self.err = err
        self.text = TextPrinter(out, err, secret=setup.api_key)
        self._printer: Any = printer or self.text
        # a printer of its own (--json): stdout carries only its event lines, command answers go to stderr
        self._answers = out if printer is None else err
        self.agent.subscribe(self._printer)
        abort_when_closed(self.agent, self._printer)  # stdout gone: the run ends too
        self.usage = count_usage(self.agent)  # the running cost /session shows
        self.status = 0
        self.approver: Any = None  # --approve: a TerminalApprover (agentcore.cli._approve)
        # --api-key-env's key stays with the provider it was given for (the first model's, or the
        # first one switched to from a model that needs no key): /model to another provider takes
        # that provider's own key, never sending one vendor's key to another (--base-url: one
        # endpoint, the key goes with it)
        self._option_key = setup.agent.api_key if setup.key_from_option else None
        self._option_provider = (
            setup.agent.model.provider if self._option_key is not None and setup.agent.stream_fn is None else None
        )
        self._compactor_obj: Any = None
        # /branch N in a session: the prompt entry to move back before, applied (written) only when
        # the next prompt or /compact needs it, as the reference does: quitting right after /branch
        # leaves the session file as it was (its export is still the whole conversation)
        self._pending_branch: Optional[str] = None
        self._view_leaf: Optional[str] = None  # the leaf the pending move goes to (None: the root)
        self.interactive = _isatty(stdin) and _isatty(out)
        self.attachments = Attachments()  # -a and /attach: sent with the next prompt
        self.context_files: List[ContextFile] = []  # the project context (cmd_chat loads it)
        self._handlers: Dict[str, Callable[[str], Any]] = {
            "/model": self._model,
            "/tools": self._tools,
            "/thinking": self._thinking,
            "/session": self._session,
            "/branch": self._branch,
            "/compact": self._compact,
            "/attach": self._attach,
            "/context": lambda _: self._say(describe_context(self.context_files)),
            "/help": self._help,
            "/quit": lambda _: _QUIT,
            "/exit": lambda _: _QUIT,
        }

    # ------------------------------------------------------------------ loop

    def run(self) -> int:
        self._banner()
        try:
            self._loop()
        finally:
            if self._pending_branch is not None:
                self.text.note(
                    "[/branch was not saved: no prompt followed it, so the session still ends at its last answer]"
                )
        return self.status

    def _loop(self) -> None:
        while True:
            try:
                try:
                    line = self._read()
                    if line is not None:
                        line.encode("utf-8")  # undecodable bytes arrive as surrogates (C locale)
                except UnicodeError as exc:
                    self.text.note(_skipped(exc))
                    continue
                if line is None:
                    break
                line = line.strip()
                if not line:
                    continue
                if line.split()[0].lower() == _MULTI:
                    line = self._read_block(line)
                    if line is None:  # end of input inside the block
                        break
                    if not line:
                        continue
                    self._prompt(line)
                elif line.startswith("/"):
                    if self._command(line) is _QUIT:
                        break
                    continue
                else:
                    self._prompt(line)
                if self._printer.out.closed:  # the reader of stdout is gone (chat ... | head): leave
                    self.status = 0  # how a pipe ends, not a failure (as for run)
                    break
            except Terminated:  # SIGTERM: leave (whatever ran was aborted and recorded)
                raise
            except KeyboardInterrupt:  # at the prompt (or between runs): keep chatting
                self.text.note("(Ctrl-C: use /quit or Ctrl-D to leave)")

    def _read_block(self, opening: str) -> Optional[str]:
        """The prompt of a ``!multi`` block: the lines after ``opening`` up to the line ``!end``
        (``!end X`` after ``!multi X``), kept as typed (indentation, blank lines inside), without
        the blank lines around them; "" when there are none (said in a notice). None at end of
        input before the end line: nothing is sent (a notice says so) and the chat leaves. A line
        that is not UTF-8 is skipped with a notice. Ctrl-C drops the block (the loop's notice)."""
        words = opening.split(None, 1)
        token = words[1].strip() if len(words) > 1 else ""
        end = f"{_END} {token}" if token else _END
        lines: List[str] = []
        while True:
            try:
                line = self._read("... ")
                if line is not None:
                    line.encode("utf-8")
            except UnicodeError as exc:
                self.text.note(_skipped(exc))
                continue
            if line is None:
                self.text.note(f"[end of input before {end}: the {_MULTI} prompt was not sent]")
                return None
            line = line[:-1] if line.endswith("\n") else line
            if line.strip() == end:
                break
            lines.append(line.rstrip("\r"))
        while lines and not lines[-1].strip():
            lines.pop()
        while lines and not lines[0].strip():
            lines.pop(0)
        if not lines:
            self.text.note(f"[nothing between {opening} and {end}: nothing sent]")
        return "\n".join(lines)

    def _read(self, prompt: str = "> ") -> Optional[str]:
        """The next line; None at end of input, and when stdin cannot be read (said in a notice).
        Raises UnicodeError for a piped line that is not UTF-8 (the loop skips it)."""
        try:
            if self.interactive:
                try:
                    return input(prompt)
                except EOFError:
                    self.out.write("\n")
                    return None
                except KeyboardInterrupt:
                    self.out.write("\n")  # leave the prompt line before the notice
                    raise
            return _read_line(self.stdin)
        except UnicodeError:
            raise
        except (OSError, ValueError) as exc:  # descriptor 0 write-only (0>FILE), closed, a terminal hung up
            self.text.note(f"[stdin cannot be read ({getattr(exc, 'strerror', None) or exc}): leaving]")
            return None

    def read_answer(self) -> Optional[str]:
        """One answer line for ``--approve`` (None at end of input)."""
        if self.interactive:
            try:
                return input()
            except EOFError:
                return None
        try:
            return _read_line(self.stdin)
        except UnicodeError:
            return ""  # not text: no answer (the question is asked again)

    def _prompt(self, line: str) -> None:
        attached = self.attachments
        try:
            check_model_input(self.agent.model, attached, local=self.agent.model.provider == "local", flag="attached")
        except UsageError as exc:
            self._say(f"{exc}. Not sent: /model switches, /attach clear drops the attachments")
            return
        if self._refused_for_approvals():
            return
        self._apply_branch()
        record_system(self.setup)
        from ..session import SessionError

        new: List[Any] = []
        clean = False  # the turn ended with a good answer: every message was recorded
        try:
            if self.approver is not None:
                self.approver.settle(self.agent, [])  # calls a resumed session left waiting
            self.attachments = Attachments()
            new = self.agent.prompt(prompt_with(attached, line), attached.images or None)
            if self.approver is not None:
                new = self.approver.settle(self.agent, new)
        except Terminated:
            self.text.note("[terminated: run aborted]")
            raise
        except KeyboardInterrupt:
            self.text.note("[interrupted: run aborted; back at the prompt]")
            self.status = 0
        except SessionError as exc:  # the run's failure could not be recorded either
            raise self._unsaved(str(exc)) from exc
        else:
            self.status = run_outcome(new)
            clean = self.status == 0
        if not clean and self._lost_messages():
            raise self._unsaved(_failure_of(new))

    def _lost_messages(self) -> bool:
        """True when the transcript holds messages the session does not: a session write failed
        during the turn. The agent fails such a run and records that failure when it still can (a
        short entry may fit where a long one did not), so the run alone raises nothing. Asked only
        after a turn that failed or was interrupted: a write failure always fails the run, and
        this rebuilds the session's context."""
        session = self.session
        return session is not None and len(self.agent.messages) > len(session.build_context().messages)

    def _unsaved(self, reason: str) -> Exception:
        """The ``SessionError`` that ends the chat after a failed session write, as it ends ``run``:
        ``main()`` prints it (the file and ``reason``) and exits with status 1."""
        from ..session import SessionError

        path = getattr(self.session, "path", None)
        if path and path not in reason:
            reason = f"{path}: {reason}"
        resume = f"; --session {path} resumes it" if path else ""
        message = (
            f"{reason}. The chat stopped: its conversation can no longer be saved. The session keeps "
            f"every entry written before the failure{resume} once the cause is fixed"
        )
        return SessionError("storage", self.text.masker(message), path=path)

    def _refused_for_approvals(self) -> bool:
        """Without --approve, a resumed session's waiting tool calls block a prompt (the agent
        refuses it): say so, and that the line was not sent; the REPL goes on."""
        waiting = None if self.approver is not None else waiting_calls(self.agent, "chat", self.session)
        if waiting is None:
            return False
        self._say(f"Not sent: {waiting} (/quit first)")
        return True

    def _say(self, text: str) -> None:
        """A command's answer on stdout (on stderr with ``--json``: its stdout is JSON lines only,
        one per event), as :func:`terminal_text`: it may quote a model's text (the /compact
        summary) or a session's prompts, whose escape sequences must not reach the terminal."""
        self._answers.write(terminal_text(text.rstrip("\n")) + "\n")
        self._answers.flush()

    def _banner(self) -> None:
        model = self.agent.model
        tools = ", ".join(shown_name(getattr(t, "name", str(t))) for t in self.agent.tools) or "none"  # a name restored
        where = f"session {self.session.id} ({self.session.path or 'memory'})" if self.session else "not saved"
        files = len(self.context_files)
        context = f", context: {files} file{'s' if files != 1 else ''} (/context)" if files else ""
        self.err.write(  # a resumed session file names the model, the tools and the id: terminal_text
            terminal_text(
                f"agentcore chat: model {model.key}, tools: {tools}, {where}{context}. "
                "/help lists commands, /quit or Ctrl-D leaves.\n"
            )
        )
        resumed = _resumed_line(self.agent.messages)
        if resumed:  # -c/-s: say where the conversation stands before the first prompt
            self.err.write(resumed + "\n")
        self.err.flush()

    # ------------------------------------------------------------------ commands

    def _command(self, line: str) -> Any:
        name, _, rest = line.partition(" ")
        handler = self._handlers.get(name.lower())
        if handler is None:
            self._say(f"unknown command {name}; /help lists the commands")
            return None
        try:
            return handler(rest.strip())
        except UsageError as exc:
            self._say(str(exc))
            return None

    def _help(self, _: str) -> None:
        width = max(len(k) for k in COMMANDS)
        self._say("\n".join(f"{k.ljust(width)}  {v}" for k, v in COMMANDS.items()))

    def _model(self, ref: str) -> None:
        if ref:
            from ..providers.base import get_env_api_key

            # with --api-key-env's key, a bare id several providers list is refused, never guessed
            model, stream_fn = resolve_model(ref, self.options.base_url, key_given=self.setup.key_from_option)
            if stream_fn is None:  # the new provider's key (--api-key-env's only for its own provider)
                own = self._option_key is not None and (
                    self.options.base_url or self._option_provider in (None, model.provider)
                )
                key = self._option_key if own else stored_key(model.provider)
                check_api_key(model, key)
                if own:
                    self._option_provider = model.provider
                self.agent.api_key = key
                self.text.mask(key)
                self.text.mask(get_env_api_key(str(model.provider)))  # the key the provider will take
            notice = uncatalogued_notice(ref, model)
            if notice is not None:
                self._say(notice)
            self.agent.model = model
            self.agent.stream_fn = stream_fn
        model = self.agent.model
        url = f", {redact_url(model.base_url)}" if model.base_url else ""  # a proxy's user:password@ too
        self._say(f"model: {model.key} ({model.api}{url})")

    def _tools(self, spec: str) -> None:
        if spec:
            self.agent.tools = resolve_tools(spec, self.setup.plugin_tools)
            if self.approver is not None:
                self.approver.require_approval(self.agent)
        names = [getattr(t, "name", str(t)) for t in self.agent.tools]
        self._say("tools: " + (", ".join(names) if names else "none"))

    def _attach(self, arg: str) -> None:
        self.attachments, shown = attach_command(self.attachments, arg)
        self._say(shown)

    def _thinking(self, level: str) -> None:
        if not level:
            self._say(f"thinking: {self.agent.thinking_level}")
            return
        wanted = check_thinking(level)
        self.agent.thinking_level = clamp_to_model(self.agent.model, wanted)
        if str(self.agent.thinking_level) == wanted:
            self._say(f"thinking: {wanted}")
        else:  # the model's thinking-level map has no entry for it
            supported = ", ".join(supported_levels(self.agent.model))
            self._say(f"thinking: {self.agent.thinking_level} ({wanted} is not supported by this model: {supported})")

    def _session(self, _: str) -> None:
        session = self.session
        running = self._running_cost()
        if session is None:
            self._say(
                "no session: this chat is not saved (--no-log, AGENTCORE_NO_LOG or `agentcore logs "
                "off`). Chats are logged by default; or name one with --session PATH.jsonl, "
                f"--session ID or --session new\n{running}"
            )
            return
        stats = session.get_session_stats()
        self._say(
            f"session {session.id}\n  path: {session.path or 'memory'}\n  cwd: {session.cwd}\n"
            f"  entries: {len(session.storage)}, messages: {stats.message_count} (all branches)\n"
            f"  tokens: {stats.total_tokens}, cost: ${stats.cost_total:.4f} (whole session)\n"
            f"{running}\n  leaf: {session.leaf_id}"
            + (
                ""
                if self._pending_branch is None
                else f" (moves to {self._view_leaf or 'the start'} with the next prompt: /branch)"
            )
        )

    def _running_cost(self) -> str:
        """The ``this chat:`` lines of /session: the usage of the runs since the chat started."""
        rows = list(self.usage.models.values())
        total = self.usage.total()  # sub-agents' tool results are shown below, not counted here
        text = f"  this chat: {total.requests} responses, {total.describe()}"
        if len(rows) > 1:
            text += "".join(f"\n    {row.key}: {row.describe()}" for row in rows)
        return text

    def _user_prompts(self) -> List[Tuple[Any, Any]]:
        """``(entry_or_index, message)`` for each user message on the branch the chat is on (a
        pending /branch included)."""
        if self.session is not None:
            branch = (
                self.session.get_branch() if self._pending_branch is None else self.session.get_branch(self._view_leaf)
            )
            return [
                (e, e.message) for e in branch if e.type == "message" and getattr(e.message, "role", None) == "user"
            ]
        return [(i, m) for i, m in enumerate(self.agent.messages) if getattr(m, "role", None) == "user"]

    def _branch(self, arg: str) -> None:
        from ..types import text_of

        prompts = self._user_prompts()
        if not arg:
            if not prompts:
                self._say("no prompts yet on this branch")
                return
            for n, (_, message) in enumerate(prompts, 1):
                self._say(f"{n:>3}. {_short(text_of(message.content))}")
            self._say("/branch N goes back to just before prompt N; the next prompt starts a new branch")
            return
        if not prompts:
            raise UsageError(f"/branch {arg}: no prompts yet on this branch")
        # isdecimal, not isdigit: int() refuses a superscript or circled digit ("²", "①")
        if not arg.isdecimal() or not 1 <= int(arg) <= len(prompts):
            raise UsageError(f"/branch {arg}: give a prompt number from 1 to {len(prompts)} (/branch lists them)")
        where, message = prompts[int(arg) - 1]
        if self.session is not None:  # the leaf moves to the prompt's parent with the next prompt
            self._pending_branch, self._view_leaf = where.id, where.parent_id
            self.agent.messages = self.session.build_context(where.parent_id).messages
        else:
            self.agent.messages = self.agent.messages[:where]
        self._say(
            f"back before prompt {arg} ({len(self.agent.messages)} messages kept); it was:\n"
            f"  {_short(text_of(message.content), 200)}"
        )

    def _apply_branch(self) -> None:
        """Write a pending /branch move into the session (before a prompt or /compact)."""
        target = self._pending_branch
        if target is None:
            return
        self._compactor().navigate_tree(target)  # moves the leaf to the prompt's parent, reloads
        self._pending_branch = self._view_leaf = None

    def _compactor(self) -> Any:
        if self._compactor_obj is None:
            from ..session.compactor import Compactor

            self._compactor_obj = Compactor(self.agent, emit=self._compaction_event)
        return self._compactor_obj

    def _compaction_event(self, event: Any) -> None:
        self.usage.add_event(event)  # /compact's summary requests count in /session's "this chat"
        if event.type == "compaction_start":
            self.text.note(f"[compacting about {event.tokens_before} tokens]")

    def _compact(self, instructions: str) -> None:
        try:
            compactor = self._compactor()
        except ImportError:
            self._say(
                "compaction is not available in this installation of agentcore; "
                "the conversation is unchanged. /branch N drops the turns after prompt N instead."
            )
            return
        from ..session.compaction import CompactionError

        self._apply_branch()
        before = len(self.agent.messages)
        result, error, interrupt = _compact_interruptibly(compactor, instructions or None)
        if isinstance(error, CompactionError):
            aborted = interrupt is not None and error.code == "aborted"
            self._say("compaction interrupted; the conversation is unchanged" if aborted else f"not compacted: {error}")
        elif error is not None:
            raise error
        else:  # done, even when the Ctrl-C came too late to stop it: the summary was stored
            self._say(
                f"compacted: {before} -> {len(self.agent.messages)} messages, about {result.tokens_before} "
                f"tokens summarised\nsummary: {_short(result.summary, 300)}"
            )
        if isinstance(interrupt, Terminated):
            raise interrupt


def _compact_interruptibly(compactor: Any, instructions: Optional[str]) -> Tuple[Any, Any, Any]:
    """``compactor.compact(instructions)`` on a worker thread while this (the main) thread waits:
    ``(result, error, interrupt)``. A Ctrl-C (or SIGTERM) while waiting aborts the compaction and
    waits for it to end, so the session and the transcript are both compacted or both unchanged:
    the interrupt could otherwise land between storing the summary and reloading the transcript.
    ``interrupt`` is the first KeyboardInterrupt taken, or a :class:`Terminated` taken after it
    (further ones are absorbed), else None."""
    from ..signals import AbortController

    controller = AbortController()
    context = contextvars.copy_context()  # the worker sees what this thread set (as a run thread does)
    outcome: Dict[str, Any] = {}
    done = threading.Event()

    def work() -> None:
        try:
            outcome["result"] = context.run(compactor.compact, instructions, signal=controller.signal)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            outcome["error"] = exc
        finally:
            done.set()

    interrupt: Optional[KeyboardInterrupt] = None
    threading.Thread(target=work, name="agentcore-compact", daemon=True).start()
    while True:
        try:
            wait_interruptibly(done)
            break
        except KeyboardInterrupt as exc:
            if interrupt is None or isinstance(exc, Terminated):  # a SIGTERM after a Ctrl-C still ends chat
                interrupt = exc
            controller.abort("interrupted")
    return outcome.get("result"), outcome.get("error"), interrupt


def _failure_of(new: List[Any]) -> str:
    """The error of the turn's failed answer (a session write error names the file and why)."""
    for message in reversed(new):
        if getattr(message, "role", None) == "assistant" and getattr(message, "error_message", None):
            return str(message.error_message)
    return "a session write failed"


def _short(text: str, limit: int = 70) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty()) and not os.environ.get("AGENTCORE_CLI_PLAIN")
    except (AttributeError, ValueError):
        return False


def _resumed_line(messages: Any) -> str:
    """``resumed: N messages; last prompt: "..."`` for a chat that continues a conversation
    (``-c``, ``-s ID``), or "" for a new one."""
    from ..types import role_of, text_of

    if not messages:
        return ""
    prompts = [m for m in messages if role_of(m) == "user"]
    last = " ".join(text_of(getattr(prompts[-1], "content", "")).split()) if prompts else ""
    if len(last) > 80:
        last = last[:77] + "..."
    return f"resumed: {len(messages)} messages" + (f"; last prompt: {last!r}" if last else "")


#: the longest piped line read as one prompt, as ``run`` caps its piped prompt (20 MiB)
MAX_LINE_BYTES = MAX_ATTACHMENT_BYTES


class _LineTooLong(UnicodeError):
    """A piped line longer than :data:`MAX_LINE_BYTES`: skipped whole (it was read and dropped)."""


def _skipped(exc: BaseException) -> str:
    if isinstance(exc, _LineTooLong):
        return f"[skipped a line longer than {MAX_LINE_BYTES >> 20} MiB]"
    return "[skipped a line that is not UTF-8 text]"


def _read_line(stdin: Any) -> Optional[str]:
    """One piped line as UTF-8 text whatever the locale's encoding (as ``run`` reads its piped
    prompt: Windows' cp1252 would make UTF-8 text mojibake), with the text layer's newlines; None
    at end of input, and for no stdin at all (None: descriptor 0 closed, ``<&-``). Raises
    UnicodeError for a line that is not UTF-8, and OSError/ValueError for a stdin that cannot be
    read; a line longer than :data:`MAX_LINE_BYTES` is read to its end, dropped, and raises
    :class:`_LineTooLong` (a UnicodeError: skipped with its own notice). A byte order mark starting a line is dropped (a script saved with one keeps its first
    ``/command`` a command). A stream without a byte layer (a StringIO) is read as text."""
    if stdin is None:
        return None
    buffer = getattr(stdin, "buffer", None)
    if buffer is None:
        line = stdin.readline()
    else:
        raw = buffer.readline(MAX_LINE_BYTES + 1)
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):  # held in memory whole: refused
            while raw and not raw.endswith(b"\n"):
                raw = buffer.readline(1 << 16)  # the rest of it, read and dropped
            raise _LineTooLong(f"a line longer than {MAX_LINE_BYTES} bytes")
        line = raw.decode("utf-8")
        if line.endswith("\r\n"):
            line = line[:-2] + "\n"
    if line.startswith("\ufeff"):  # a byte order mark (a script saved by Notepad): not part of the line
        line = line[1:] or "\n"
    return line if line else None

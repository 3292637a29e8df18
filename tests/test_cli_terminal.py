"""``agentcore chat`` driven in a pseudo-terminal, as a person uses it (issue 18): type a prompt
and watch the answer stream in, press Ctrl-C mid-answer, recall a line with the up arrow
(readline), mistype ``/model``, leave with Ctrl-D, resume with ``-c``.

The chat runs as a real process whose controlling terminal is the pty (so Ctrl-C typed on the
master reaches it as SIGINT, like a key press); its model is a scripted local server on
127.0.0.1. Every step waits for output (read until a string appears, with a generous overall
timeout), never for time to pass.
"""

from __future__ import annotations

import io
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

import pytest
import test_cli
from _servers import Reply, ScriptedServer, sse
from test_cli import answer, local, tool_reply

from agentcore import Agent
from agentcore.cli._render import TextPrinter
from agentcore.testing import ScriptedModel, thinking, tool_call
from agentcore.tools import AgentTool, AgentToolResult
from agentcore.types import TextContent

pty = pytest.importorskip("pty")
termios = pytest.importorskip("termios")

env = test_cli.env  # the clean-environment fixture of the CLI tests
TIMEOUT = 60.0  # overall limit of one expect(); the steps themselves synchronise on output

# The child becomes a session leader (start_new_session) and takes the pty on fd 0 as its
# controlling terminal, then runs the command: the line discipline turns ^C into SIGINT for it.
# The child takes the pty as its controlling terminal, and SIGINT back to its default: a shell
# script that started the test run in the background (`.ci/run &`) hands SIG_IGN down through
# every exec, and Python keeps an ignored SIGINT ignored, so ^C would do nothing.
_WITH_CTTY = (
    "import fcntl, os, signal, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable] + sys.argv[1:])"
)

UP = "\x1b[A"
CTRL_C = "\x03"
CTRL_D = "\x04"


class Terminal:
    """A process on a pseudo-terminal: :meth:`type` keys, :meth:`expect` output."""

    def __init__(self, argv: List[str], env: Dict[str, str], cwd: Path) -> None:
        master, slave = pty.openpty()
        import fcntl
        import struct

        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 200, 0, 0))  # wide: no wrapping
        self.master = master
        self.output = ""  # everything read so far
        self._seen = 0  # expect() searches from here
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _WITH_CTTY, "-m", "agentcore", *argv],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env={**env, "TERM": "xterm"},
            cwd=str(cwd),
            start_new_session=True,
            close_fds=True,
        )
        os.close(slave)

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode("utf-8"))

    def _read(self, deadline: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return False
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the child closed the terminal
            return False
        if not data:
            return False
        self.output += data.decode("utf-8", "replace").replace("\r\n", "\n")
        return True

    def expect(self, text: str, timeout: float = TIMEOUT) -> str:
        """Read until ``text`` appears after the previous match; return the output in between."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.output.find(text, self._seen)
            if found >= 0:
                between = self.output[self._seen : found]
                self._seen = found + len(text)
                return between
            if time.monotonic() >= deadline or not self._read(deadline):
                raise AssertionError(f"did not see {text!r}; the terminal shows:\n{self.output[-3000:]}")

    def at_prompt(self, timeout: float = TIMEOUT) -> None:
        """Wait for the ``> `` prompt and for readline to hold the terminal (canonical mode off).

        input() writes the prompt before readline switches the terminal to raw mode and flushes
        what was typed in between; a person reads the prompt first, a test must wait for it too."""
        self.expect("> ", timeout)
        deadline = time.monotonic() + timeout
        while termios.tcgetattr(self.master)[3] & termios.ICANON:
            if time.monotonic() >= deadline or self.proc.poll() is not None:
                raise AssertionError(f"readline never took the terminal; it shows:\n{self.output[-3000:]}")
            self._read(min(deadline, time.monotonic() + 0.01))  # poll the mode; keep reading output

    def wait(self, timeout: float = TIMEOUT) -> int:
        """The exit status, reading (and keeping) the output until the process ends."""
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            self._read(min(deadline, time.monotonic() + 0.5))
        return self.proc.wait(timeout=max(0.1, deadline - time.monotonic()))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        os.close(self.master)


@pytest.fixture
def terminal(env, tmp_path):
    opened: List[Terminal] = []

    def start(*argv: str, cwd: Optional[Path] = None) -> Terminal:
        term = Terminal(list(argv), env, cwd or tmp_path)
        opened.append(term)
        return term

    yield start
    for term in opened:
        term.close()


def _chunk(content: Optional[str] = None, finish: Optional[str] = None) -> Dict[str, object]:
    delta = {"content": content} if content is not None else {}
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def test_typed_prompt_streams_and_ctrl_c_stops_the_answer(terminal):
    """The first piece shows while the server holds back the rest: the answer streams. Ctrl-C
    then stops it, the prompt returns and the next prompt carries a valid conversation."""
    first = sse(_chunk("The first piece"))
    held = Reply(body=first + sse(_chunk(" NEVER SHOWN"), _chunk(finish="stop"), done=True), stall_after=len(first))
    with ScriptedServer([held, answer("second", " answer")]) as server:
        term = terminal("chat", *local(server))
        term.expect("/quit or Ctrl-D leaves.")
        term.at_prompt()
        term.type("tell me a long story\r")
        term.expect("The first piece")
        assert "NEVER SHOWN" not in term.output  # the rest is still held by the server
        term.type(CTRL_C)
        term.expect("[interrupted: run aborted; back at the prompt]")
        term.at_prompt()
        term.type("and now?\r")
        term.expect("second answer")
        term.at_prompt()
        term.type(CTRL_D)
        assert term.wait() == 0
        server.release.set()
        second = server.requests[1].json()["messages"]
    assert "NEVER SHOWN" not in term.output and "Traceback" not in term.output
    roles = [m["role"] for m in second]
    assert roles[0] == "user" and roles[-1] == "user"
    assert "tell me a long story" in json.dumps(second[0]) and "and now?" in json.dumps(second[-1])


def test_up_arrow_recalls_the_previous_line(terminal):
    with ScriptedServer([answer("one"), answer("two")]) as server:
        term = terminal("chat", *local(server))
        term.at_prompt()
        term.type("what is the time\r")
        term.expect("one")
        term.at_prompt()
        term.type(UP)
        term.expect("what is the time")  # readline shows the recalled line
        term.type("\r")
        term.expect("two")
        term.at_prompt()
        term.type("/quit\r")
        assert term.wait() == 0
        second = server.requests[1].json()["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert json.dumps(second[0]["content"]) == json.dumps(second[2]["content"])  # the same line again
    assert "what is the time" in json.dumps(second[2])


def test_model_typo_shows_a_did_you_mean_and_ctrl_d_leaves_with_status_0(terminal):
    term = terminal("chat", "--model", "scripted")
    term.at_prompt()
    term.type("/model gpt-4o-mnii\r")
    term.expect("unknown model 'gpt-4o-mnii' (did you mean 'openai/gpt-4o-mini'")
    term.at_prompt()
    term.type("/model\r")
    term.expect("model: scripted/scripted-demo")  # still the model it was
    term.at_prompt()
    term.type("hello there\r")
    term.expect("You said: hello there")
    term.at_prompt()
    term.type(CTRL_D)
    assert term.wait() == 0


def test_ctrl_c_at_the_prompt_keeps_chatting(terminal):
    """Each ^C typed at the prompt gives one notice, however soon after the echo it comes: CPython's
    readline loses a SIGINT that lands between two select() calls; the CLI re-delivers it."""
    term = terminal("chat", "--model", "scripted")
    for attempt in range(3):
        term.at_prompt()
        term.type(f"half a line {attempt}")
        term.expect(f"half a line {attempt}")  # readline echoed it: it is reading, as a person sees
        term.type(CTRL_C)
        term.expect("(Ctrl-C: use /quit or Ctrl-D to leave)")
    term.at_prompt()
    term.type("hello\r")
    between = term.expect("You said: hello")
    assert "Ctrl-C" not in between  # one press, one notice
    term.at_prompt()
    term.type(CTRL_D)
    assert term.wait() == 0


def test_continue_resumes_the_latest_conversation(terminal, env, tmp_path):
    with ScriptedServer([answer("noted: 42"), answer("it was 42")]) as server:
        term = terminal("chat", *local(server), "--session", "new")
        term.at_prompt()
        term.type("remember the number 42\r")
        term.expect("noted: 42")
        term.at_prompt()
        term.type(CTRL_D)
        assert term.wait() == 0
        again = terminal("chat", *local(server), "-c")
        again.at_prompt()
        again.type("which number?\r")
        again.expect("it was 42")
        again.at_prompt()
        again.type(CTRL_D)
        assert again.wait() == 0
        resumed = server.requests[1].json()["messages"]
    assert "remember the number 42" in json.dumps(resumed) and "which number?" in json.dumps(resumed[-1])


def test_sigint_reaches_the_chat_through_the_terminal(terminal):
    """The harness itself: ^C on the master is a SIGINT of the child's process group (so the
    tests above press a key, not send a signal)."""
    term = terminal("chat", "--model", "scripted")
    term.at_prompt()
    assert os.tcgetpgrp(term.master) == os.getpgid(term.proc.pid)
    assert termios.tcgetattr(term.master)[6][termios.VINTR] == CTRL_C.encode()
    term.type(CTRL_D)
    assert term.wait() == 0


# --------------------------------------------------------------------------- what reaches the terminal

SCREEN_CONTROLS = ["\x1b[2J", "\x1b[H", "\x1b]0;", "\x1b]8;;", "\x08", "\x9b"]


def test_escape_sequences_from_the_model_and_a_tool_never_reach_the_terminal(terminal):
    """A model's answer or a tool's output that holds terminal controls (clear the screen, move the
    cursor home, retitle the window, a hyperlink, a carriage return or backspaces that overwrite
    what was shown) is printed as its text alone: the chat shows what was said, it is not
    rewritten by it."""
    command = r"printf 'tool-start\033[2J\033[H\033]0;pwned-title\007 tool-end\rHIDDEN\b\b\bXY\n'"
    with ScriptedServer(
        [
            answer("model-start\x1b[2J\x1b[H\x1b]0;pwned-title\x07", " \x1b]8;;http://x\x07link\x1b]8;;\x07 model-end"),
            tool_reply("bash", {"command": command}),
            answer("after \x9b2J the tool"),
        ]
    ) as server:
        term = terminal("chat", *local(server), "--tools", "bash")
        term.at_prompt()
        term.type("first\r")
        term.expect("model-start link model-end")
        term.at_prompt()
        term.type("second\r")
        term.expect("tool-start tool-end")
        term.expect("HIDDENXY")  # the carriage return is a line break, the backspaces are dropped
        term.expect("after 2J the tool")
        term.at_prompt()
        term.type(CTRL_D)
        assert term.wait() == 0
    shown = [c for c in SCREEN_CONTROLS if c in term.output]
    assert not shown, f"terminal controls reached the terminal: {shown!r}"


def test_the_printer_masks_the_key_in_thinking_and_behind_colour_codes():
    """Everything on stderr is masked, the streamed thinking too, and a key that a tool printed
    with a colour code inside it is masked, not put back together by dropping the code."""
    key = "sk-test-SECRET-1234"
    colored = AgentTool(
        name="env",
        description="Print the environment.",
        parameters={"type": "object", "properties": {}},
        execute=lambda *_: AgentToolResult([TextContent("KEY=sk-test-\x1b[1mSECRET\x1b[0m-1234")]),
    )
    model = ScriptedModel([tool_call("env", {}), thinking(f"the key is {key}", "done")])
    agent = Agent(model.model, tools=[colored], stream_fn=model.stream_fn)
    out, err = io.StringIO(), io.StringIO()
    agent.subscribe(TextPrinter(out, err, secret=key))
    agent.prompt("go")
    assert "the key is ***" in err.getvalue() and "KEY=***" in err.getvalue()
    assert "SECRET" not in err.getvalue() + out.getvalue()


def _stream_thinking(printer: TextPrinter, pieces: List[str], *, end: bool = True, reason: str = "stop") -> None:
    """Feed ``printer`` a thinking block streamed as ``pieces`` (as a provider's deltas arrive),
    then the message's end (``end`` False: the stream stopped inside the thinking)."""
    from agentcore.events import (
        MessageEndEvent,
        MessageStartEvent,
        MessageUpdateEvent,
        ThinkingDeltaEvent,
        ThinkingEndEvent,
        ThinkingStartEvent,
    )
    from agentcore.types import AssistantMessage, ThinkingContent

    message = AssistantMessage(content=[ThinkingContent("".join(pieces))], stop_reason=reason)
    printer(MessageStartEvent(message))
    printer(MessageUpdateEvent(message, ThinkingStartEvent(0, message)))
    for piece in pieces:
        printer(MessageUpdateEvent(message, ThinkingDeltaEvent(0, piece, message)))
    if end:
        printer(MessageUpdateEvent(message, ThinkingEndEvent(0, "".join(pieces), message)))
    printer(MessageEndEvent(message))


def test_a_key_streamed_over_several_thinking_deltas_is_masked():
    """A model streams a key it read a few characters per delta: masking each delta alone showed
    the key whole on stderr. The thinking around it still streams, and nothing is lost."""
    key = "sk-test-SECRET-1234"
    thought = f"the .env file says OPENAI_API_KEY={key} so the setup is fine"
    pieces = [thought[i : i + 3] for i in range(0, len(thought), 3)]
    out, err = io.StringIO(), io.StringIO()
    _stream_thinking(TextPrinter(out, err, secret=key), pieces)
    assert "SECRET" not in err.getvalue() + out.getvalue()
    assert err.getvalue() == "[thinking] the .env file says OPENAI_API_KEY=*** so the setup is fine\n"


def test_the_held_back_end_of_streamed_thinking_is_shown_when_the_stream_stops():
    """The end of a delta that might begin the key is held back, and shown when the message ends
    without its thinking_end (an aborted or failed stream): masked when it is the start of the key,
    as it is when no key followed."""
    key = "sk-test-SECRET-1234"
    out, err = io.StringIO(), io.StringIO()
    _stream_thinking(TextPrinter(out, err, secret=key), ["checking sk", "-test-SEC"], end=False, reason="aborted")
    assert err.getvalue() == "[thinking] checking ***\n[aborted]\n"
    out, err = io.StringIO(), io.StringIO()
    _stream_thinking(TextPrinter(out, err, secret=key), ["asks", " for sk"], end=True)
    assert err.getvalue() == "[thinking] asks for sk\n"

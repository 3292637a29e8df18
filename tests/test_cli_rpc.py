"""``agentcore rpc`` (issue 18): the JSON-lines protocol of the reference's RPC mode, driven as a
real subprocess through pipes (``python -m agentcore rpc``): prompt and events, abort mid-stream,
malformed lines, messages, sessions, approvals, the tree, end of input and SIGTERM."""

from __future__ import annotations

import io
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Set

import pytest
from _servers import Reply, ScriptedServer, sse
from test_cli import _chunk, answer

from agentcore.cli import main
from agentcore.session import Session

REPO = Path(__file__).resolve().parents[1]
SECRET = "sk-rpc-SECRET-77e0b1"
WAIT = 60.0  # a bound for a hung child, never a timing assertion


@pytest.fixture
def env(tmp_path: Path) -> Dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if k != "AGENTCORE_MODEL" and not k.endswith("_API_KEY")}
    clean["AGENTCORE_SESSIONS_DIR"] = str(tmp_path / "sessions")
    clean["HOME"] = str(tmp_path / "home")
    clean["PYTHONPATH"] = os.pathsep.join([str(REPO), clean.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return clean


class Rpc:
    """The child process: ``send`` a command, ``read_until`` a line matching a predicate."""

    def __init__(self, *args: str, env: Dict[str, str], cwd: Path, setup: str = "") -> None:
        # with ``setup`` (Python run first in the child): ``main(["rpc", ...])`` after it
        command = ["-m", "agentcore", "rpc"]
        if setup:
            command = [
                "-c",
                f"{setup}\nimport sys\nfrom agentcore.cli import main\nsys.exit(main(['rpc'] + sys.argv[1:]))",
            ]
        self.proc = subprocess.Popen(
            [sys.executable, *command, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=str(cwd),
        )
        self.buffer = b""
        self.seen: List[Dict[str, Any]] = []

    def send(self, command: Any) -> None:
        raw = command if isinstance(command, bytes) else (json.dumps(command) + "\n").encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(raw)
        self.proc.stdin.flush()

    def _line(self) -> Dict[str, Any]:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + WAIT
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            assert left > 0, f"no line from agentcore rpc; so far {self.seen[-5:]}"
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                assert chunk, f"stdout closed; stderr: {self.proc.stderr.read().decode() if self.proc.stderr else ''}"
                self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        obj = json.loads(line)  # every line is valid JSON
        self.seen.append(obj)
        return obj

    def read_until(self, match: Callable[[Dict[str, Any]], bool]) -> List[Dict[str, Any]]:
        """The lines read up to and including the first one ``match`` accepts."""
        lines = []
        while True:
            obj = self._line()
            lines.append(obj)
            if match(obj):
                return lines

    def call(self, command: Dict[str, Any]) -> Dict[str, Any]:
        """Send ``command`` (given an id) and return its response."""
        command = dict(command, id=command.get("id", f"req-{len(self.seen)}"))
        self.send(command)
        return self.read_until(lambda o: o.get("type") == "response" and o.get("id") == command["id"])[-1]

    def close(self) -> subprocess.CompletedProcess:
        rest, err = self.proc.communicate(timeout=WAIT)  # closes stdin: end of input
        for line in (self.buffer + rest).splitlines():
            self.seen.append(json.loads(line))
        return subprocess.CompletedProcess(self.proc.args, self.proc.returncode, rest, err.decode())

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


@pytest.fixture
def rpc(env: Dict[str, str], tmp_path: Path):
    started: List[Rpc] = []

    def start(*args: str, setup: str = "") -> Rpc:
        child = Rpc(*args, env=env, cwd=tmp_path, setup=setup)
        started.append(child)
        return child

    yield start
    for child in started:
        child.kill()


def is_type(kind: str) -> Callable[[Dict[str, Any]], bool]:
    return lambda o: o.get("type") == kind


def local(server: ScriptedServer) -> List[str]:
    return ["--base-url", server.url + "/v1", "--model", "llama3"]


def stalled(text: str) -> Reply:
    """A completion that streams ``text`` and then stalls until ``server.release`` is set."""
    first = sse(_chunk({"content": text}))
    return Reply(
        body=first + sse(_chunk({"content": " never"}), _chunk(finish="stop"), done=True), stall_after=len(first)
    )


# --------------------------------------------------------------------------- prompting


def test_prompt_answers_at_once_then_streams_events_to_agent_end(rpc):
    child = rpc("--model", "scripted", "--no-session")
    child.send({"id": "p1", "type": "prompt", "message": "hello there"})
    lines = child.read_until(is_type("agent_end"))
    assert lines[0] == {"type": "response", "command": "prompt", "success": True, "id": "p1"}
    kinds = [o["type"] for o in lines[1:]]
    assert kinds[:4] == ["agent_start", "turn_start", "message_start", "message_end"]
    assert kinds[-2:] == ["turn_end", "agent_end"]
    deltas = [o["assistantMessageEvent"] for o in lines if o["type"] == "message_update"]
    assert any(d["type"] == "text_delta" for d in deltas)
    assert all("id" not in o for o in lines[1:])  # events carry no id, as in the reference
    end = lines[-1]
    assert end["messages"][-1]["role"] == "assistant" and "hello there" in end["messages"][-1]["content"][0]["text"]
    assert child.close().returncode == 0


def test_get_messages_after_two_prompts(rpc):
    child = rpc("--model", "scripted", "--no-session")
    for text in ("first question", "second question"):
        assert child.call({"type": "prompt", "message": text})["success"]
        child.read_until(is_type("agent_end"))
    got = child.call({"type": "get_messages"})
    roles = [m["role"] for m in got["data"]["messages"]]
    assert roles == ["user", "assistant", "user", "assistant"]
    assert got["data"]["messages"][2]["content"][0]["text"] == "second question"
    text = child.call({"type": "get_last_assistant_text"})["data"]["text"]
    assert "second question" in text
    state = child.call({"type": "get_state"})["data"]
    assert state["messageCount"] == 4 and state["isStreaming"] is False and "sessionFile" not in state
    assert child.close().returncode == 0


def test_abort_mid_stream_ends_the_run_aborted_and_the_process_answers(rpc, env):
    with ScriptedServer([stalled("partial")]) as server:
        child = rpc(*local(server), "--no-session")
        child.send({"id": "p", "type": "prompt", "message": "a long answer please"})
        child.read_until(lambda o: o.get("assistantMessageEvent", {}).get("type") == "text_delta")
        # the server now stalls mid-answer: the run is streaming
        assert child.call({"type": "get_state"})["data"]["isStreaming"] is True
        child.send({"id": "a", "type": "abort"})
        lines = child.read_until(lambda o: o.get("id") == "a")
        ends = [o for o in lines if o["type"] == "message_end"]
        assert ends[-1]["message"]["stopReason"] == "aborted"
        assert [o["type"] for o in lines][-2:] == ["agent_end", "response"]  # abort answers once idle
        assert lines[-1]["success"] is True
        state = child.call({"type": "get_state"})
        assert state["success"] and state["data"]["isStreaming"] is False
        server.release.set()
        assert child.close().returncode == 0


def test_prompt_while_streaming_needs_a_streaming_behaviour(rpc):
    with ScriptedServer([stalled("partial"), answer("steered answer")]) as server:
        child = rpc(*local(server), "--no-session")
        child.call({"type": "prompt", "message": "first"})
        child.read_until(lambda o: o.get("assistantMessageEvent", {}).get("type") == "text_delta")
        refused = child.call({"type": "prompt", "message": "second"})
        assert refused["success"] is False and "streamingBehavior" in refused["error"]
        child.send({"id": "q", "type": "prompt", "message": "then this", "streamingBehavior": "followUp"})
        update, queued = child.read_until(lambda o: o.get("id") == "q")[-2:]
        assert update == {"type": "queue_update", "steering": [], "followUp": ["then this"]}
        assert queued["success"] is True
        assert child.call({"type": "get_state"})["data"]["pendingMessageCount"] == 1
        server.release.set()  # the first answer ends; the follow-up is delivered and answered
        lines = child.read_until(lambda o: o.get("type") == "queue_update" and not o["followUp"])
        lines = child.read_until(is_type("agent_end"))
        assert lines[-1]["messages"][-1]["content"][0]["text"] == "steered answer"
        assert child.close().returncode == 0


@pytest.mark.parametrize("move", ["new_session", "switch_session"])
def test_a_session_move_tells_the_client_its_queued_messages_are_gone(rpc, tmp_path, move):
    """Messages queued for the run a session move aborts stay with the old agent; the client was
    never told, so its queue display kept them for ever."""
    other = tmp_path / "other.jsonl"
    Session.create(other).close()
    with ScriptedServer([stalled("partial")]) as server:
        child = rpc(*local(server), "--sessions-dir", str(tmp_path / "sessions"))
        child.call({"type": "prompt", "message": "first"})
        child.read_until(lambda o: o.get("assistantMessageEvent", {}).get("type") == "text_delta")
        child.send({"id": "q", "type": "follow_up", "message": "then this"})
        child.read_until(lambda o: o.get("id") == "q")
        command: Dict[str, Any] = {"id": "m", "type": move}
        if move == "switch_session":
            command["sessionPath"] = str(other)
        child.send(command)
        lines = child.read_until(lambda o: o.get("id") == "m")
        assert lines[-1]["success"] is True
        assert {"type": "queue_update", "steering": [], "followUp": []} in lines
        assert child.call({"type": "get_state"})["data"]["pendingMessageCount"] == 0
        server.release.set()
        assert child.close().returncode == 0


HOLD_AT_AGENT_END = """
import sys
from agentcore.cli import _rpc
_on_event = _rpc.RpcServer._on_event
held = []
def holding(self, event):
    if event.type == "agent_end" and not held:  # the run's loop has taken its last look at the queues
        held.append(event)
        sys.stderr.write("held at agent_end\\n")
        sys.stderr.flush()
        with open(FIFO) as fifo:
            fifo.read()
    _on_event(self, event)
_rpc.RpcServer._on_event = holding
"""


def _wait_for_note(child: Any, words: str = "held at agent_end") -> None:
    """Read the child's stderr until a line holds ``words`` (default: its run is held at
    agent_end, the HOLD_AT_AGENT_END setup)."""
    assert child.proc.stderr is not None
    note = ""
    while words not in note:
        note = child.proc.stderr.readline().decode()
        assert note, f"agentcore rpc exited before writing {words!r}"


@pytest.mark.parametrize("command", ["prompt", "steer", "follow_up"])
def test_a_message_queued_as_the_run_ends_is_answered_by_a_next_run(rpc, tmp_path, command):
    """A message queued after the run's last look at its queues but before its agent_end (the
    run still counts as active) was answered success and then never delivered: no run took it,
    and at end of input it was gone. A run now starts for it once the ending run has settled."""
    fifo = tmp_path / "hold"
    os.mkfifo(fifo)
    child = rpc("--model", "scripted", "--no-session", setup=f"FIFO = {str(fifo)!r}" + HOLD_AT_AGENT_END)
    child.call({"type": "prompt", "message": "first question"})
    _wait_for_note(child)
    late: Dict[str, Any] = {"id": "late", "type": command, "message": "a late question"}
    if command == "prompt":
        late["streamingBehavior"] = "followUp"
    child.send(late)
    update, queued = child.read_until(lambda o: o.get("id") == "late")[-2:]
    assert queued["success"] is True and update["type"] == "queue_update"
    with open(fifo, "w"):
        pass  # let the first run end
    first = child.read_until(is_type("agent_end"))[-1]
    assert [m["role"] for m in first["messages"]] == ["user", "assistant"]
    second = child.read_until(is_type("agent_end"))
    assert second[0]["type"] == "agent_start"
    assert second[-1]["messages"][0]["content"][0]["text"] == "a late question"
    assert "a late question" in second[-1]["messages"][-1]["content"][0]["text"]
    assert any(o["type"] == "queue_update" and not o["steering"] and not o["followUp"] for o in second)
    assert child.call({"type": "get_state"})["data"]["pendingMessageCount"] == 0
    assert child.close().returncode == 0


NOTE_THE_ABORT = """
from agentcore.cli import _rpc_commands
real_settle = _rpc_commands.settle
def settle(server):
    sys.stderr.write("abort read\\n")
    sys.stderr.flush()
    real_settle(server)
_rpc_commands.settle = settle
"""


def test_an_abort_sent_during_the_run_also_stops_the_run_for_a_late_message(rpc, tmp_path):
    """A follow-up queued after the run's last look at its queues, then ``abort`` before its
    ``agent_end``: the abort came too late to change the run's answer (it ended normally), and a
    new run used to start for the late message anyway, though the user had aborted. An abort
    during a run leaves queued messages for the next prompt; the late message waits too."""
    fifo = tmp_path / "hold"
    os.mkfifo(fifo)
    setup = f"FIFO = {str(fifo)!r}" + HOLD_AT_AGENT_END + NOTE_THE_ABORT
    child = rpc("--model", "scripted", "--no-session", setup=setup)
    child.call({"type": "prompt", "message": "first question"})
    _wait_for_note(child)
    child.call({"type": "follow_up", "message": "a late question"})
    child.send({"id": "a", "type": "abort"})  # the reader waits in it for the run to end
    _wait_for_note(child, "abort read")
    with open(fifo, "w"):
        pass  # let the run end
    lines = child.read_until(lambda o: o.get("id") == "a")
    assert lines[-1]["success"] is True
    assert child.close().returncode == 0  # end of input waits for whatever would start a run
    assert [o["type"] for o in child.seen].count("agent_start") == 1
    updates = [o for o in child.seen if o["type"] == "queue_update"]
    assert updates[-1]["followUp"] == ["a late question"]  # still waiting for the next prompt


PROMPT_RACES_THE_LATE_RUN = (
    HOLD_AT_AGENT_END
    + """
import threading
started, checked = threading.Event(), threading.Event()
prompts = []
real_send_after, real_resume = _rpc.RpcServer.send_after, _rpc.RpcServer._resume_late
real_start_resumer = _rpc.RpcServer._start_resumer

def start_resumer(self):
    real_start_resumer(self)
    started.set()

def send_after(self, kind, request_id, start, data=_rpc._NO_DATA):
    prompts.append(kind)
    if prompts.count("prompt") == 2:  # the second prompt found no run going
        assert started.wait(30), "no run was to start for the late message"
        checked.set()
        self.resumer.join(30)  # the run for the late message starts now
    return real_send_after(self, kind, request_id, start, data)

def resume_late(self, agent):
    assert checked.wait(30), "the prompt was never read"
    return real_resume(self, agent)

_rpc.RpcServer.send_after, _rpc.RpcServer._resume_late = send_after, resume_late
_rpc.RpcServer._start_resumer = start_resumer
"""
)


def test_a_queued_prompt_read_as_a_late_run_starts_is_queued_not_refused(rpc, tmp_path):
    """A ``prompt`` with ``streamingBehavior`` read just as the run for a late message starts
    (it found no run going, then that run began before its own could): it used to be refused
    with the agent's "Use steer() or follow_up()" RuntimeError, though the client had asked for
    exactly that, and the message was lost. It is queued for the run that began."""
    fifo = tmp_path / "hold"
    os.mkfifo(fifo)
    child = rpc("--model", "scripted", "--no-session", setup=f"FIFO = {str(fifo)!r}" + PROMPT_RACES_THE_LATE_RUN)
    child.call({"type": "prompt", "message": "first question"})
    _wait_for_note(child)
    child.call({"type": "follow_up", "message": "a late question"})
    with open(fifo, "w"):
        pass  # let the first run end: a run starts for the late question
    child.read_until(is_type("agent_end"))
    queued = child.call({"type": "prompt", "message": "and this", "streamingBehavior": "followUp"})
    assert queued["success"] is True, queued
    assert child.close().returncode == 0
    asked = [o["messages"] for o in child.seen if o["type"] == "agent_end"][-1]
    texts = [m["content"][0]["text"] for m in asked if m["role"] == "user"]
    assert texts[-2:] == ["a late question", "and this"]


# --------------------------------------------------------------------------- malformed input


def test_malformed_lines_get_a_clear_error_and_the_process_keeps_running(rpc):
    child = rpc("--model", "scripted", "--no-session")
    child.send(b"this is not json\n")
    assert child.read_until(is_type("response"))[-1] == {
        "type": "response",
        "command": "parse",
        "success": False,
        "error": "Failed to parse command: Expecting value: line 1 column 1 (char 0)",
    }
    child.send(b"[1, 2]\n")
    assert "got an array" in child.read_until(is_type("response"))[-1]["error"]
    child.send(b"\xff\xfe{}\n")
    assert "not UTF-8" in child.read_until(is_type("response"))[-1]["error"]
    child.send(b'{"type": "get_state", "id": NaN}\n')  # Python's json accepts NaN; JSON does not
    assert "NaN is not a JSON value" in child.read_until(is_type("response"))[-1]["error"]
    child.send(b"[" * 100_000 + b"\n")
    assert "nested too deeply" in child.read_until(is_type("response"))[-1]["error"]
    child.send(b"\n   \n")  # blank lines are skipped, no answer
    unknown = child.call({"id": 7, "type": "promt", "message": "x"})
    assert unknown["id"] == 7 and unknown["success"] is False and "did you mean 'prompt'" in unknown["error"]
    missing = child.call({"id": "m", "type": "prompt"})
    assert missing["command"] == "prompt" and missing["error"] == "prompt: missing field 'message' (a string)"
    typed = child.call({"id": "t", "type": "set_steering_mode", "mode": "sometimes"})
    assert "'one-at-a-time', 'all'" in typed["error"]
    no_type = child.call({"id": "n", "message": "x"})
    assert no_type["id"] == "n" and 'no "type"' in no_type["error"]
    child.send(b'{"type": "get_state", "id": "crlf"}\r\n')  # CRLF framing is accepted
    assert child.read_until(is_type("response"))[-1]["id"] == "crlf"
    # U+2028 inside a string is data, not a line break (strict LF framing)
    child.send(json.dumps({"type": "prompt", "message": "a\u2028b", "id": "u"}, ensure_ascii=False).encode() + b"\n")
    end = child.read_until(is_type("agent_end"))[-1]
    assert end["messages"][0]["content"][0]["text"] == "a\u2028b"
    assert child.call({"type": "get_state"})["success"] is True
    done = child.close()
    assert done.returncode == 0 and "Traceback" not in done.stderr


SMALL_LINE_LIMIT = """
from agentcore.cli import _rpc
_rpc.MAX_LINE_BYTES = 4096
"""


def test_a_line_longer_than_the_limit_is_answered_at_once_and_dropped(rpc, tmp_path):
    """A client that writes a line without end (no LF) made the server buffer all of it: no
    answer, memory without bound. Past the limit it now gets one error naming the limit and the
    length read so far, while the line is still coming; the rest is dropped, the next line is
    served, and SIGTERM still ends a server reading a line."""
    path = tmp_path / "long.jsonl"
    child = rpc("--model", "scripted", "--session", str(path), setup=SMALL_LINE_LIMIT)
    child.send(b'{"type": "prompt", "id": "huge", "message": "' + b"x" * 5000)  # no LF yet
    error = child.read_until(is_type("response"))[-1]
    assert error == {
        "type": "response",
        "command": "parse",
        "success": False,
        "error": "Failed to parse command: the line is longer than the limit of 4096 bytes (4 KiB): "
        "4097 bytes read so far; the rest of the line is skipped",
    }
    child.send(b"y" * 200_000 + b'"}\n')  # the rest of that line: dropped, no second answer
    assert child.call({"type": "get_state", "id": "next"})["success"] is True
    assert [o.get("id") for o in child.seen] == [None, "next"]
    end = child.call({"type": "prompt", "message": "x" * 4000, "id": "fits"})  # up to the limit is fine
    assert end["success"] is True
    child.read_until(is_type("agent_end"))
    child.send(b'{"type": "prompt", "message": "half a line')  # SIGTERM while it reads a line
    assert child.proc.stdin is not None
    child.proc.send_signal(signal.SIGTERM)
    assert child.proc.wait(timeout=WAIT) == 0
    with Session.open(path, read_only=True) as session:
        messages = session.build_context().messages
    assert [m.role for m in messages] == ["user", "assistant"] and messages[0].text == "x" * 4000


def test_the_default_line_limit_is_64_mib():
    """The documented limit (image attachments as base64 fit): a line of 64 MiB and one byte is
    refused with one error, and the next line is served."""
    from agentcore.cli import _rpc

    out, err = io.StringIO(), io.StringIO()
    commands = b'{"type": "get_state", "pad": "' + b"p" * (64 << 20) + b'"}\n{"type": "get_commands", "id": 2}\n'
    stdin = io.TextIOWrapper(io.BytesIO(commands), encoding="utf-8")  # read through its buffer: no copy
    status = main(["rpc", "--model", "scripted", "--no-session"], stdin=stdin, stdout=out, stderr=err)
    assert status == 0, err.getvalue()
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(o["command"], o["success"], o.get("id")) for o in lines] == [
        ("parse", False, None),
        ("get_commands", True, 2),
    ]
    assert "limit of 67108864 bytes (64 MiB): 67108865 bytes read so far" in lines[0]["error"]
    assert _rpc.MAX_LINE_BYTES == 64 << 20


# --------------------------------------------------------------------------- sessions and the tree


def test_session_file_is_written_and_end_of_input_flushes_it(rpc, tmp_path):
    path = tmp_path / "rpc.jsonl"
    child = rpc("--model", "scripted", "--session", str(path))
    state = child.call({"type": "get_state"})["data"]
    assert state["sessionFile"] == str(path)
    child.call({"type": "prompt", "message": "remember me"})
    child.read_until(is_type("agent_end"))
    assert child.call({"type": "set_session_name", "name": "rpc test"})["success"]
    assert child.close().returncode == 0
    with Session.open(path, read_only=True) as session:
        messages = session.build_context().messages
        assert [m.role for m in messages] == ["user", "assistant"]
        assert session.name == "rpc test"


def test_a_new_session_is_recorded_by_default(rpc, tmp_path):
    child = rpc("--model", "scripted")
    state = child.call({"type": "get_state"})["data"]
    assert state["sessionFile"].startswith(str(tmp_path / "sessions"))
    child.call({"type": "prompt", "message": "hi"})
    child.read_until(is_type("agent_end"))
    fresh = child.call({"type": "new_session"})
    assert fresh["data"] == {"cancelled": False}
    after = child.call({"type": "get_state"})["data"]
    assert after["sessionFile"] != state["sessionFile"] and after["messageCount"] == 0
    missing = child.call({"type": "switch_session", "sessionPath": str(tmp_path / "missing.jsonl")})
    assert missing["success"] is False and "no session file" in missing["error"]
    assert not (tmp_path / "missing.jsonl").exists()
    unknown = child.call({"type": "switch_session", "sessionPath": "no-such-id"})
    assert unknown["success"] is False and "no-such-id" in unknown["error"]
    switched = child.call({"type": "switch_session", "sessionPath": state["sessionId"]})  # by id
    assert switched["success"], switched
    assert child.call({"type": "get_state"})["data"]["messageCount"] == 2
    assert child.close().returncode == 0


def test_switch_session_to_the_current_session_by_id_is_a_no_op(rpc, tmp_path):
    """By its id as by its path; by id it used to fail with "already open for writing"."""
    child = rpc("--model", "scripted")
    child.call({"type": "prompt", "message": "hi"})
    child.read_until(is_type("agent_end"))
    state = child.call({"type": "get_state"})["data"]
    for value in (state["sessionId"], state["sessionFile"]):
        switched = child.call({"type": "switch_session", "sessionPath": value})
        assert switched["success"] and switched["data"] == {"cancelled": False}, switched
    after = child.call({"type": "get_state"})["data"]
    assert after["sessionFile"] == state["sessionFile"] and after["messageCount"] == 2
    assert child.close().returncode == 0


@pytest.mark.parametrize("store", ["jsonl", "sqlite"])
def test_switch_session_to_the_current_session_by_url_is_a_no_op(rpc, tmp_path, store):
    """The current session named by its URL (for a SQLite database holding several sessions the
    only way to name one) used to be opened a second time, which fails on its writer lock: "open
    for writing by another Session in this process; close it there first"."""
    path = tmp_path / ("cur.jsonl" if store == "jsonl" else "cur.db")
    child = rpc("--model", "scripted", "--session", str(path))
    child.call({"type": "prompt", "message": "remember me"})
    child.read_until(is_type("agent_end"))
    state = child.call({"type": "get_state"})["data"]
    url = f"jsonl://{path}" if store == "jsonl" else f"sqlite://{path}?session={state['sessionId']}"
    switched = child.call({"type": "switch_session", "sessionPath": url})
    assert switched["success"] is True, switched
    assert child.call({"type": "get_state"})["data"]["messageCount"] == 2
    child.call({"type": "prompt", "message": "still here"})
    child.read_until(is_type("agent_end"))
    assert child.close().returncode == 0
    opened = Session.open(path, read_only=True) if store == "jsonl" else None
    if opened is not None:
        with opened as session:
            assert len(session.build_context().messages) == 4


def test_new_session_under_no_session_stays_in_memory_after_a_switch(rpc, tmp_path):
    """--no-session: a new_session after switch_session to a file is in memory; it used to be
    created in the sessions directory."""
    Session.create(tmp_path / "existing.jsonl").close()
    child = rpc("--model", "scripted", "--no-session")
    assert child.call({"type": "switch_session", "sessionPath": str(tmp_path / "existing.jsonl")})["success"]
    assert child.call({"type": "new_session"})["data"] == {"cancelled": False}
    child.call({"type": "prompt", "message": "not to be saved"})
    child.read_until(is_type("agent_end"))
    assert "sessionFile" not in child.call({"type": "get_state"})["data"]
    assert child.close().returncode == 0
    sessions = tmp_path / "sessions"
    assert not sessions.exists() or not any(p.is_file() for p in sessions.rglob("*"))


def test_switch_session_takes_a_session_url_and_never_creates(rpc, tmp_path):
    from agentcore.session import SqliteSessionStorage

    db = tmp_path / "many.db"
    for session_id in ("alpha", "beta"):
        SqliteSessionStorage.create(db, session_id=session_id).close()
    child = rpc("--model", "scripted")
    missing = child.call({"type": "switch_session", "sessionPath": f"sqlite://{db}?session=gamma"})
    assert missing["success"] is False and "gamma" in missing["error"]
    switched = child.call({"type": "switch_session", "sessionPath": f"sqlite://{db}?session=beta"})
    assert switched["success"], switched
    assert child.call({"type": "get_state"})["data"]["sessionId"] == "beta"
    child.call({"type": "prompt", "message": "into beta"})
    child.read_until(is_type("agent_end"))
    assert child.close().returncode == 0
    assert {info.id for info in SqliteSessionStorage.list_sessions(db)} == {"alpha", "beta"}
    with SqliteSessionStorage(db, "beta", read_only=True) as beta:
        assert beta.message_count == 2


def _store_key(env, cwd, provider, secret):
    """``agentcore keys set PROVIDER`` with ``secret`` on stdin (into the env's config dir)."""
    stored = subprocess.run(
        [sys.executable, "-m", "agentcore", "keys", "set", provider],
        input=secret + "\n", capture_output=True, text=True, env=env, cwd=str(cwd),
    )  # fmt: skip
    assert stored.returncode == 0, stored.stderr


def test_a_switch_session_that_cannot_open_leaves_the_run_going(rpc, tmp_path):
    """switch_session aborted the run before it opened the other session: a path that is not a
    session (a typo, a directory, another file) failed, and the answer streaming meanwhile was
    lost with it. The session is now opened first; the run goes on and ends normally."""
    (tmp_path / "notes.jsonl").write_text("not a session\n")
    with ScriptedServer([stalled("partial")]) as server:
        child = rpc(*local(server), "--session", str(tmp_path / "current.jsonl"))
        child.call({"type": "prompt", "message": "a long answer"})
        child.read_until(lambda o: o.get("assistantMessageEvent", {}).get("type") == "text_delta")
        for target in (tmp_path / "notes.jsonl", tmp_path):
            failed = child.call({"type": "switch_session", "sessionPath": str(target)})
            assert failed["success"] is False and str(target) in failed["error"]
        state = child.call({"type": "get_state"})["data"]
        assert state["isStreaming"] is True and state["sessionFile"] == str(tmp_path / "current.jsonl")
        server.release.set()
        end = child.read_until(is_type("agent_end"))[-1]
        assert end["messages"][-1]["stopReason"] == "stop"
        assert end["messages"][-1]["content"][0]["text"] == "partial never"
        assert child.close().returncode == 0


def test_a_switch_session_to_a_damaged_session_leaves_the_run_going(rpc, tmp_path):
    """switch_session to a session whose header opens but whose entry on line 2 is damaged: the
    run was aborted for the switch before the conversation was read, then the read failed, so the
    streaming answer was lost, and the error (a bare "SessionError: ...") did not name the
    command. The conversation is now read before the abort: the run goes on and ends normally."""
    damaged = tmp_path / "damaged.jsonl"
    with Session.create(str(damaged)) as session:
        for text in ("hello", "again"):
            session.append_message({"role": "user", "content": text, "timestamp": 0})
    lines = damaged.read_text(encoding="utf-8").splitlines()
    entry = json.loads(lines[1])
    entry["message"]["content"] = 5  # not the last line: the file opens, its conversation does not read
    compact = json.dumps(entry, separators=(",", ":"))  # as the library writes its lines
    damaged.write_text("\n".join([lines[0], compact, lines[2]]) + "\n", encoding="utf-8")
    before = damaged.read_bytes()
    with ScriptedServer([stalled("partial")]) as server:
        child = rpc(*local(server), "--session", str(tmp_path / "current.jsonl"))
        child.call({"type": "prompt", "message": "a long answer"})
        child.read_until(lambda o: o.get("assistantMessageEvent", {}).get("type") == "text_delta")
        failed = child.call({"type": "switch_session", "sessionPath": str(damaged)})
        assert failed["success"] is False
        assert failed["error"].startswith("switch_session: ") and f"{damaged}:2: invalid entry" in failed["error"]
        assert child.call({"type": "get_state"})["data"]["isStreaming"] is True
        server.release.set()
        end = child.read_until(is_type("agent_end"))[-1]
        assert end["messages"][-1]["stopReason"] == "stop"
        assert child.close().returncode == 0
    assert damaged.read_bytes() == before  # left as it was


def test_switch_session_to_a_session_another_process_writes_names_the_rpc_way_out(rpc, tmp_path):
    """switch_session to a session locked by another writer: the error told the client to "start
    a separate one with new" (the command line's ``--session new`` with its flag cut off). It now
    names the command to send."""
    busy = tmp_path / "busy.jsonl"
    with Session.create(str(busy)):  # this process writes it: the child cannot take its lock
        child = rpc("--model", "scripted", "--no-session")
        failed = child.call({"type": "switch_session", "sessionPath": str(busy)})
        assert failed["success"] is False and "already open for writing" in failed["error"]
        assert 'start a separate one with {"type": "new_session"}' in failed["error"]
        assert child.close().returncode == 0


def test_switch_session_to_another_providers_model_never_sends_it_the_api_key_env_key(rpc, env, tmp_path):
    """switch_session resumes the session's model, and the new agent took the old agent's key
    with it: the --api-key-env key meant for OpenAI went to the endpoint of the session's local
    model, in its Authorization header. set_model's rule now holds: that key for its provider only."""
    with ScriptedServer([answer("recorded"), answer("resumed")]) as server:
        local_path = tmp_path / "local.jsonl"
        child = rpc(*local(server), "--session", str(local_path))
        child.call({"type": "prompt", "message": "hi"})
        child.read_until(is_type("agent_end"))
        assert child.close().returncode == 0
        openai_path = tmp_path / "openai.jsonl"
        with Session.create(str(openai_path)) as session:
            session.append_model_change("openai", "gpt-4o")
        env["RPC_TEST_KEY"] = SECRET
        child = rpc("--api-key-env", "RPC_TEST_KEY", "--session", str(openai_path))
        assert child.call({"type": "get_state"})["data"]["model"]["provider"] == "openai"
        assert child.call({"type": "switch_session", "sessionPath": str(local_path)})["success"] is True
        assert child.call({"type": "get_state"})["data"]["model"]["provider"] == "local"
        child.call({"type": "prompt", "message": "again"})
        assert child.read_until(is_type("agent_end"))[-1]["messages"][-1]["content"][0]["text"] == "resumed"
        assert child.close().returncode == 0
    assert len(server.requests) == 2
    assert all(SECRET not in json.dumps(request.headers) for request in server.requests)


def test_set_model_and_available_models_use_keys_stored_by_keys_set(rpc, env, tmp_path):
    """``agentcore keys set groq`` then ``set_model`` groq: refused with "no API key ... store
    one with: agentcore keys set groq" (the key just stored), and get_available_models and
    cycle_model left the provider out; chat's /model used the stored key all along."""
    secret = "gsk-stored-in-keys-json-5150"
    _store_key(env, tmp_path, "groq", secret)
    with ScriptedServer([answer("keyed answer")]) as server:
        child = rpc("--model", "scripted", "--no-session", "--base-url", server.url + "/v1")
        listed = child.call({"type": "get_available_models"})["data"]["models"]
        assert "groq" in {m["provider"] for m in listed}
        switched = child.call({"type": "set_model", "provider": "groq", "modelId": "llama-3.3-70b-versatile"})
        assert switched["success"], switched
        child.call({"type": "prompt", "message": "hi"})
        end = child.read_until(is_type("agent_end"))[-1]
        assert child.close().returncode == 0
        sent = server.requests[0].headers
    assert end["messages"][-1]["content"][0]["text"] == "keyed answer"
    assert sent.get("authorization") == f"Bearer {secret}"
    assert all(secret not in json.dumps(line) for line in child.seen)


def test_sessions_left_without_a_prompt_are_not_left_behind(rpc, tmp_path):
    """An rpc started and closed without a prompt (an editor opened and quit), or a
    ``new_session`` never used, used to leave header-only files that ``sessions list`` showed as
    empty conversations; ``chat`` quit before its first prompt leaves nothing, and so does rpc."""
    child = rpc("--model", "scripted")
    unused = child.call({"type": "get_state"})["data"]["sessionFile"]
    assert Path(unused).exists()
    child.call({"type": "new_session"})  # the unused first session is dropped on switching
    assert not Path(unused).exists()
    child.call({"type": "prompt", "message": "keep me"})
    child.read_until(is_type("agent_end"))
    kept = child.call({"type": "get_state"})["data"]["sessionFile"]
    child.call({"type": "new_session"})
    unused_too = child.call({"type": "get_state"})["data"]["sessionFile"]
    assert child.close().returncode == 0
    assert Path(kept).exists() and not Path(unused_too).exists()
    assert [p.name for p in (tmp_path / "sessions").glob("*/*.jsonl")] == [Path(kept).name]
    named = tmp_path / "named.jsonl"  # a file the user named stays, even empty
    again = rpc("--model", "scripted", "--session", str(named))
    assert again.call({"type": "get_state"})["data"]["sessionFile"] == str(named)
    assert again.close().returncode == 0 and named.exists()


def test_run_and_chat_options_mean_the_same_on_rpc(rpc, env, tmp_path):  # issue 18: none silently ignored
    first = rpc("--model", "scripted")
    state = first.call({"type": "get_state"})["data"]
    first.call({"type": "prompt", "message": "remember 42"})
    first.read_until(is_type("agent_end"))
    assert first.close().returncode == 0
    again = rpc("--model", "scripted", "-c")  # the latest conversation of this directory
    resumed = again.call({"type": "get_state"})["data"]
    assert (resumed["sessionId"], resumed["messageCount"]) == (state["sessionId"], 2)
    assert again.close().returncode == 0
    prefix = rpc("--model", "scripted", "-s", state["sessionId"][:13])  # an id prefix, as run/chat
    assert prefix.call({"type": "get_state"})["data"]["sessionId"] == state["sessionId"]
    assert prefix.close().returncode == 0
    unlogged = rpc("--model", "scripted", "--no-log")
    assert unlogged.call({"type": "get_state"})["data"].get("sessionFile") is None
    assert unlogged.close().returncode == 0
    for refused in (["-a", str(tmp_path)], ["--no-stream"], ["-c", "--no-log"]):
        done = subprocess.run(
            [sys.executable, "-m", "agentcore", "rpc", "--model", "scripted", *refused],
            input=b"",
            capture_output=True,
            env=env,
            cwd=str(tmp_path),
            timeout=WAIT,
        )
        assert done.returncode == 2 and b"agentcore rpc:" in done.stderr, (refused, done.stderr)


def test_rpc_loads_the_project_context_unless_no_context(rpc, tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "AGENTS.md").write_text("Always answer in French.\n", encoding="utf-8")
    with ScriptedServer([answer("oui"), answer("yes")]) as server:
        for extra in ([], ["--no-context"]):
            child = rpc(*local(server), "--no-session", *extra)
            child.call({"type": "prompt", "message": "hi"})
            child.read_until(is_type("agent_end"))
            assert child.close().returncode == 0
        systems = [json.dumps(r.json()["messages"][0]) for r in server.requests]
    assert "Always answer in French." in systems[0] and "French" not in systems[1]


def test_fork_get_tree_and_navigate_tree(rpc, tmp_path):
    child = rpc("--model", "scripted", "--session", str(tmp_path / "tree.jsonl"))
    for text in ("one", "two"):
        child.call({"type": "prompt", "message": text})
        child.read_until(is_type("agent_end"))
    forks = child.call({"type": "get_fork_messages"})["data"]["messages"]
    assert [f["text"] for f in forks] == ["one", "two"]
    tree = child.call({"type": "get_tree"})["data"]
    ids = [e["id"] for e in tree["entries"]]
    assert forks[1]["entryId"] in ids and tree["leafId"] == ids[-1]
    moved = child.call({"type": "navigate_tree", "targetId": forks[1]["entryId"]})["data"]
    parent = next(e["parentId"] for e in tree["entries"] if e["id"] == forks[1]["entryId"])
    assert moved["editorText"] == "two" and moved["leafId"] == parent  # just before the prompt
    assert child.call({"type": "get_state"})["data"]["messageCount"] == 2
    bad = child.call({"type": "navigate_tree", "targetId": "nope"})
    assert bad["success"] is False and "nope" in bad["error"]
    forked = child.call({"type": "fork", "entryId": forks[0]["entryId"]})
    assert forked["data"] == {"text": "one", "cancelled": False}
    state = child.call({"type": "get_state"})["data"]
    assert state["messageCount"] == 0 and state["sessionFile"] != str(tmp_path / "tree.jsonl")
    assert child.close().returncode == 0


def test_fork_refuses_a_user_message_off_the_current_branch(rpc, tmp_path):
    child = rpc("--model", "scripted", "--session", str(tmp_path / "tree.jsonl"))
    for text in ("one", "two"):
        child.call({"type": "prompt", "message": text})
        child.read_until(is_type("agent_end"))
    two = child.call({"type": "get_fork_messages"})["data"]["messages"][1]["entryId"]
    child.call({"type": "navigate_tree", "targetId": two})  # to just before "two"
    child.call({"type": "prompt", "message": "three"})
    child.read_until(is_type("agent_end"))
    off = child.call({"type": "fork", "entryId": two})
    assert off["success"] is False and "is not a user message of this session" in off["error"]
    assert child.call({"type": "get_state"})["data"]["sessionFile"] == str(tmp_path / "tree.jsonl")
    assert child.close().returncode == 0


def navigating(rpc: Callable[..., Rpc], server: ScriptedServer, tmp_path: Path) -> Rpc:
    """A child that answered two prompts and was sent ``navigate_tree`` (id ``n``) back to the
    second, summarising: its branch summary request is being written (``server``'s third reply
    stalls until ``server.release``), so the move is not done."""
    child = rpc(*local(server), "--session", str(tmp_path / "tree.jsonl"))
    for text in ("one", "two"):
        child.call({"type": "prompt", "message": text})
        child.read_until(is_type("agent_end"))
    forks = child.call({"type": "get_fork_messages"})["data"]["messages"]
    child.send({"id": "n", "type": "navigate_tree", "targetId": forks[1]["entryId"], "summarize": True})
    assert server.body_started.wait(WAIT)
    return child


def test_clone_sent_during_navigate_tree_copies_the_branch_it_moved_to(rpc, tmp_path):
    """Piped ``navigate_tree`` then ``clone``: the clone waits for the move (it used to copy the
    branch from before it, and the agent went on there)."""
    with ScriptedServer([answer("first"), answer("second"), stalled("the summary")]) as server:
        child = navigating(rpc, server, tmp_path)
        child.send({"id": "c", "type": "clone"})
        child.send({"id": "s", "type": "get_state"})
        server.release.set()
        lines = child.read_until(lambda o: o.get("id") == "s")
    responses = {o["id"]: o for o in lines if o["type"] == "response"}
    assert [o["id"] for o in lines if o["type"] == "response"] == ["n", "c", "s"]
    moved = responses["n"]["data"]
    assert moved["moved"] is True and moved["summaryEntryId"]
    state = responses["s"]["data"]
    assert state["sessionFile"] != str(tmp_path / "tree.jsonl")
    assert child.close().returncode == 0
    with Session.open(state["sessionFile"], read_only=True) as clone:
        messages = clone.build_context().messages
    assert [m.role for m in messages] == ["user", "assistant", "branchSummary"]


@pytest.mark.parametrize("move", ["new_session", "clone"])
def test_bash_run_during_a_run_stays_in_its_session_after_a_move(rpc, tmp_path, move):
    """A bash result queued while a run is active joins the session it ran in; it used to leak
    into the next session's first prompt."""
    with ScriptedServer([stalled("partial"), answer("fresh")]) as server:
        child = rpc(*local(server), "--session", str(tmp_path / "old.jsonl"))
        child.call({"type": "prompt", "message": "first"})
        child.read_until(lambda o: o.get("assistantMessageEvent", {}).get("type") == "text_delta")
        assert child.call({"type": "bash", "command": "echo from-the-old-session"})["success"]
        assert child.call({"type": move})["success"]
        if move == "new_session":
            child.call({"type": "prompt", "message": "hello new"})
            child.read_until(is_type("agent_end"))
            assert "from-the-old-session" not in server.requests[-1].body.decode()
        new_file = child.call({"type": "get_state"})["data"]["sessionFile"]
        assert child.close().returncode == 0
    with Session.open(str(tmp_path / "old.jsonl"), read_only=True) as old:
        assert [m.role for m in old.build_context().messages][-1] == "bashExecution"
    if move == "clone":  # the clone copies the branch, the bash result with it, once
        with Session.open(new_file, read_only=True) as clone:
            assert [m.role for m in clone.build_context().messages].count("bashExecution") == 1


@pytest.mark.parametrize("move", ["new_session", "switch_session"])
def test_bash_still_running_at_a_move_records_its_result_in_the_session_it_ran_in(rpc, tmp_path, move):
    """A bash command still running when the client moves to another session finished into the
    new session: its output became the first message of a fresh conversation (or joined an
    unrelated one) and the session it ran in never had it."""
    fifo = tmp_path / "gate"
    os.mkfifo(fifo)
    other = tmp_path / "other.jsonl"
    Session.create(str(other)).close()
    child = rpc("--model", "scripted", "--session", str(tmp_path / "old.jsonl"))
    child.call({"type": "prompt", "message": "first"})
    child.read_until(is_type("agent_end"))
    child.send({"type": "bash", "command": f"cat {fifo}", "id": "slow-bash"})
    with open(fifo, "w") as gate:  # opened once the command runs: it waits for this line
        command = {"type": "new_session"} if move == "new_session" else {"type": move, "sessionPath": str(other)}
        assert child.call(command)["success"]
        new_file = child.call({"type": "get_state"})["data"]["sessionFile"]
        gate.write("ran-in-the-old-session\n")
    bash = child.read_until(lambda o: o.get("id") == "slow-bash")[-1]
    assert bash["success"] and bash["data"]["output"] == "ran-in-the-old-session\n"
    assert child.call({"type": "get_messages"})["data"]["messages"] == []
    assert child.close().returncode == 0
    with Session.open(str(tmp_path / "old.jsonl"), read_only=True) as old:
        messages = old.build_context().messages
    assert [m.role for m in messages] == ["user", "assistant", "bashExecution"]
    assert messages[-1].output == "ran-in-the-old-session\n"
    if os.path.exists(new_file):  # an unused new session is deleted at the end
        with Session.open(new_file, read_only=True) as new:
            assert new.build_context().messages == []


def test_switching_back_to_a_session_held_for_a_running_bash_says_so(rpc, tmp_path):
    """The session a move left while a bash command ran in it stays open (locked) for its result:
    switching back meanwhile is refused with what to do, not as "another process" writing it."""
    fifo = tmp_path / "gate"
    os.mkfifo(fifo)
    child = rpc("--model", "scripted", "--session", str(tmp_path / "old.jsonl"))
    child.call({"type": "prompt", "message": "first"})
    child.read_until(is_type("agent_end"))
    child.send({"type": "bash", "command": f"cat {fifo}", "id": "slow-bash"})
    with open(fifo, "w") as gate:
        assert child.call({"type": "new_session"})["success"]
        back = child.call({"type": "switch_session", "sessionPath": str(tmp_path / "old.jsonl")})
        gate.write("done\n")
    assert not back["success"] and "bash command" in back["error"] and "abort_bash" in back["error"]
    assert child.read_until(lambda o: o.get("id") == "slow-bash")[-1]["success"]
    assert child.call({"type": "switch_session", "sessionPath": str(tmp_path / "old.jsonl")})["success"]
    roles = [m["role"] for m in child.call({"type": "get_messages"})["data"]["messages"]]
    assert roles == ["user", "assistant", "bashExecution"]
    assert child.close().returncode == 0


@pytest.mark.parametrize("start", ["", "setsid "])
def test_bash_answers_when_the_shell_exits_though_a_background_process_holds_its_output(rpc, tmp_path, start):
    """``server &`` (or a daemon in a session of its own) keeps the output pipe open after the
    shell has exited: bash never answered, and end of input waited for the background process
    (abort_bash could not reach one in its own session)."""
    fifo = tmp_path / "gate"
    os.mkfifo(fifo)
    child = rpc("--model", "scripted", "--no-session")
    try:
        child.send({"type": "bash", "command": f"{start}cat {fifo} & echo started", "id": "bg"})
        bash = child.read_until(lambda o: o.get("id") == "bg")[-1]
        assert bash["success"], bash
        assert bash["data"]["output"] == "started\n" and bash["data"]["exitCode"] == 0
        assert child.call({"type": "get_messages"})["data"]["messages"][-1]["role"] == "bashExecution"
    finally:
        with open(fifo, "w"):  # the background cat reads to its end and exits
            pass
    assert child.close().returncode == 0


def test_a_bash_result_waiting_for_a_prompt_is_recorded_at_the_end(rpc, tmp_path):
    """A bash command that finished during a run waits for the next prompt to join the
    transcript; when none came (end of input), it was dropped: the client had its response, the
    session never held it. The shutdown now records it."""
    path = tmp_path / "bash.jsonl"
    with ScriptedServer([stalled("partial")]) as server:
        child = rpc(*local(server), "--session", str(path))
        child.call({"type": "prompt", "message": "first"})
        child.read_until(lambda o: o.get("assistantMessageEvent", {}).get("type") == "text_delta")
        assert child.call({"type": "bash", "command": "echo ran-during-the-run"})["success"]
        server.release.set()
        child.read_until(is_type("agent_end"))
        assert child.close().returncode == 0
    with Session.open(path, read_only=True) as session:
        messages = session.build_context().messages
    assert [m.role for m in messages] == ["user", "assistant", "bashExecution"]
    assert messages[-1].output == "ran-during-the-run\n"


def test_clone_during_a_run_copies_the_settled_branch(rpc, tmp_path):
    """``clone`` aborts the run first; it used to read the leaf before that, so the clone ended
    on the prompt without its (aborted) answer."""
    with ScriptedServer([stalled("partial")]) as server:
        child = rpc(*local(server), "--session", str(tmp_path / "old.jsonl"))
        child.call({"type": "prompt", "message": "first"})
        child.read_until(lambda o: o.get("assistantMessageEvent", {}).get("type") == "text_delta")
        assert child.call({"type": "clone"})["success"]
        clone_file = child.call({"type": "get_state"})["data"]["sessionFile"]
        assert child.close().returncode == 0
    with Session.open(clone_file, read_only=True) as clone:
        messages = clone.build_context().messages
    assert [m.role for m in messages] == ["user", "assistant"] and messages[-1].stop_reason == "aborted"


# --------------------------------------------------------------------------- approvals


@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_approve_or_deny_a_tool_call_that_waits(rpc, tmp_path, decision):
    (tmp_path / "marker.txt").write_text("x")
    child = rpc("--model", "scripted", "--no-session", "--tools", "ls", "--approve")
    child.call({"type": "prompt", "message": "look around"})
    lines = child.read_until(is_type("agent_end"))
    request = next(o for o in lines if o["type"] == "tool_approval_request")
    assert request["toolName"] == "ls" and request["args"] == {"path": "."}
    assert not any(o["type"] == "tool_execution_start" for o in lines)
    pending = child.call({"type": "get_pending_approvals"})["data"]["approvals"]
    assert pending == [{"toolCallId": request["toolCallId"], "toolName": "ls", "args": {"path": "."}, "decided": False}]
    refused = child.call({"type": "prompt", "message": "something else"})
    assert refused["success"] is False and "approve" in refused["error"]
    command: Dict[str, Any] = {"type": decision, "toolCallId": request["toolCallId"]}
    if decision == "deny":
        command["reason"] = "not in this folder"
    answer = child.call(command)
    assert answer["success"] is True and answer["data"]["continued"] is True
    lines = child.read_until(is_type("agent_end"))
    end = next(o for o in lines if o["type"] == "tool_execution_end")
    text = end["result"]["content"][0]["text"]
    if decision == "approve":
        assert end["isError"] is False and "marker.txt" in text
    else:
        assert end["isError"] is True and "not in this folder" in text
    assert child.call({"type": "get_pending_approvals"})["data"]["approvals"] == []
    unknown = child.call({"type": "approve", "toolCallId": "call_nope"})
    assert unknown["success"] is False and "call_nope" in unknown["error"]
    assert child.close().returncode == 0


# --------------------------------------------------------------------------- model, bash, keys, shutdown


def test_model_and_thinking_commands(rpc):
    child = rpc("--model", "scripted", "--no-session")
    bad = child.call({"type": "set_model", "provider": "nope", "modelId": "nothing"})
    assert bad["success"] is False and bad["error"].startswith("Model not found: nope/nothing")
    keyless = child.call({"type": "set_model", "provider": "anthropic", "modelId": "claude-sonnet-4-5"})
    assert keyless["success"] is False and "ANTHROPIC_API_KEY" in keyless["error"]
    assert child.call({"type": "cycle_model"}) == {
        "type": "response",
        "command": "cycle_model",
        "success": True,
        "id": child.seen[-1]["id"],
        "data": None,
    }
    models = child.call({"type": "get_available_models"})["data"]["models"]
    assert [m["id"] for m in models] == ["scripted-demo"]
    assert child.call({"type": "set_thinking_level", "level": "high"})["success"]
    assert child.call({"type": "get_state"})["data"]["thinkingLevel"] == "high"
    assert child.call({"type": "set_thinking_level", "level": "loud"})["success"] is False
    assert child.call({"type": "set_follow_up_mode", "mode": "all"})["success"]
    assert child.call({"type": "get_state"})["data"]["followUpMode"] == "all"
    assert child.call({"type": "abort_retry"})["success"] is False
    assert child.close().returncode == 0


def test_bash_joins_the_transcript_and_keys_are_never_printed(rpc, env):
    env["RPC_TEST_KEY"] = SECRET
    child = rpc("--model", "scripted", "--no-session", "--api-key-env", "RPC_TEST_KEY")
    done = child.call({"type": "bash", "command": "echo key=$RPC_TEST_KEY; echo out; exit 3"})
    assert done["data"]["exitCode"] == 3 and done["data"]["output"] == "key=***\nout\n"
    messages = child.call({"type": "get_messages"})["data"]["messages"]
    assert messages[0]["role"] == "bashExecution" and messages[0]["command"].startswith("echo key=")
    finished = child.close()
    assert SECRET not in json.dumps(child.seen) and SECRET not in finished.stderr


def test_a_long_bash_output_keeps_its_full_copy_under_a_non_utf8_locale(rpc, env):
    """Past 50,000 characters the whole output goes to a temporary file. It was written in the
    locale's encoding: under an ASCII locale (or any that lacks U+FFFD, the decoded form of a
    byte that is not UTF-8) the ``bash`` command failed with a UnicodeEncodeError, its output
    never joined the transcript and a partial file was left behind. The file holds the output's
    bytes as the command wrote them."""
    env.update(LC_ALL="C", PYTHONUTF8="0", PYTHONCOERCECLOCALE="0")
    child = rpc("--model", "scripted", "--no-session")
    done = child.call({"type": "bash", "command": "head -c 60000 /dev/zero | tr '\\0' '\\351'; echo; echo end"})
    assert done["success"] is True, done
    data = done["data"]
    assert data["truncated"] is True and data["output"].endswith("\ufffd\nend\n")
    with open(data["fullOutputPath"], "rb") as handle:
        assert handle.read() == b"\xe9" * 60000 + b"\nend\n"
    os.unlink(data["fullOutputPath"])
    messages = child.call({"type": "get_messages"})["data"]["messages"]
    assert messages[0]["role"] == "bashExecution" and messages[0]["fullOutputPath"] == data["fullOutputPath"]
    assert child.close().returncode == 0


def _peak_memory(pid: int) -> int:
    """The process's peak resident set (VmHWM), in bytes."""
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads the peak memory from /proc")
def test_a_huge_bash_output_goes_to_the_file_not_into_memory(rpc, env, tmp_path):
    """``bash`` read the command's whole output into memory (and decoded it whole) before keeping
    its last 50,000 characters: 200 MB of output cost the server some 400 MB, and a command
    that prints without end (``yes``) grew it until the machine ran out. Past the limit the
    output now streams to the temporary file; the server keeps the tail only."""
    env["TMPDIR"] = str(tmp_path)
    child = rpc("--model", "scripted", "--no-session")
    assert child.call({"type": "get_state"})["success"] is True
    before = _peak_memory(child.proc.pid)
    size = 200_000_000
    done = child.call({"type": "bash", "command": f"yes 0123456789abcdef | head -c {size}; printf '\\351end'"})
    grown = _peak_memory(child.proc.pid) - before
    assert done["success"] is True, done
    data = done["data"]
    assert data["truncated"] is True and data["exitCode"] == 0
    assert len(data["output"]) == 50_000 and data["output"].endswith("\ufffdend")
    assert os.path.dirname(data["fullOutputPath"]) == str(tmp_path)
    assert os.path.getsize(data["fullOutputPath"]) == size + 4
    with open(data["fullOutputPath"], "rb") as handle:
        assert handle.read(17) == b"0123456789abcdef\n"
    assert grown < 64 << 20, f"the server grew by {grown >> 20} MiB"
    assert child.close().returncode == 0


def test_every_known_key_is_masked_from_the_start(rpc, env, tmp_path):
    """docs/rpc.rst: keys are masked in every line. A provider's key used to be masked only once
    that provider was selected."""
    stored = "gsk-stored-in-keys-json-6161"
    _store_key(env, tmp_path, "groq", stored)
    env["OPENAI_API_KEY"] = "sk-openai-from-the-env-1234"
    env["ANTHROPIC_API_KEY"] = "sk-ant-from-the-env-5678"
    child = rpc("--model", "scripted", "--no-session")
    done = child.call({"type": "bash", "command": f"echo $OPENAI_API_KEY $ANTHROPIC_API_KEY {stored}"})
    assert done["data"]["output"] == "*** *** ***\n"
    finished = child.close()
    for secret in (stored, env["OPENAI_API_KEY"], env["ANTHROPIC_API_KEY"]):
        assert secret not in json.dumps(child.seen) and secret not in finished.stderr


NOISY_PLUGIN = """
import os
import sys
from agentcore.hookspecs import hookimpl
from agentcore.plugins import default_plugin_manager
from agentcore.tools import AgentTool, AgentToolResult
from agentcore.types import TextContent

def noisy(call_id, args, signal, on_update):
    print("python print from a tool")
    os.system("echo output of a child process")
    os.system("cat > /dev/null")  # a child reading stdin: at /dev/null it ends at once
    print("the tool's stdin holds", repr(sys.stdin.read()))
    return AgentToolResult([TextContent("quiet result")])

class Noisy:
    @hookimpl
    def cli_tools(self, args, command):
        return [AgentTool("ls", "list files", {"type": "object", "properties": {}}, noisy)]

default_plugin_manager().register(Noisy(), name="noisy")
"""


def test_print_in_a_tool_never_reaches_the_protocol_stream(rpc):
    """``print()`` in a tool and a child process writing to the inherited fd 1 land on stderr;
    stdout carries only protocol lines (each parsed as JSON by the helper). A tool or child
    reading stdin gets /dev/null, not the command lines."""
    child = rpc("--model", "scripted", "--no-session", setup=NOISY_PLUGIN)
    child.call({"type": "prompt", "message": "list the files"})  # the demo calls "ls" when offered
    lines = child.read_until(is_type("agent_end"))
    result = next(o for o in lines if o["type"] == "tool_execution_end")["result"]
    assert result["content"] == [{"type": "text", "text": "quiet result"}]
    done = child.close()
    assert done.returncode == 0
    assert "python print from a tool" in done.stderr and "output of a child process" in done.stderr
    assert "the tool's stdin holds ''" in done.stderr


SMALL_COMPACTION = """
from agentcore.session import compactor
from agentcore.session.compaction_tokens import CompactionSettings
compactor.CompactionSettings = lambda: CompactionSettings(keep_recent_tokens=1)
"""


def test_compact_streams_its_events_and_answers_with_the_result(rpc):
    child = rpc("--model", "scripted", "--no-session", setup=SMALL_COMPACTION)
    assert child.call({"type": "compact"})["success"] is False  # nothing to compact yet
    for text in ("one", "two", "three"):
        child.call({"type": "prompt", "message": text})
        child.read_until(is_type("agent_end"))
    child.send({"id": "c", "type": "compact", "customInstructions": "focus on numbers"})
    lines = child.read_until(lambda o: o.get("id") == "c")
    assert [o["type"] for o in lines] == ["compaction_start", "compaction_end", "response"]
    assert lines[1]["reason"] == "manual" and "messages" not in lines[1]
    data = lines[-1]["data"]
    assert data["summary"].startswith("## Goal") and data["tokensBefore"] > 0 and data["firstKeptEntryId"]
    messages = child.call({"type": "get_messages"})["data"]["messages"]
    assert messages[0]["role"] == "compactionSummary"
    assert child.close().returncode == 0


def test_a_prompt_sent_during_compact_runs_after_it_and_is_never_lost(rpc):
    """A prompt read while a compact runs (no run is active) used to be queued as a follow-up and
    answered success, and then never ran: nothing takes a queued message without a run, and at
    end of input it was gone. It now waits for the compaction and runs after it."""
    body = sse(_chunk({"content": "## Goal\nsummary"}), _chunk(finish="stop"), done=True)
    summary = Reply(body=body, stall_before_headers=True)
    replies = [answer("a1"), answer("a2"), answer("a3"), summary] + [answer("the answer")] * 3
    with ScriptedServer(replies) as server:
        child = rpc(*local(server), "--no-session", setup=SMALL_COMPACTION)
        for text in ("one", "two", "three"):
            child.call({"type": "prompt", "message": text})
            child.read_until(is_type("agent_end"))
        child.send({"id": "c", "type": "compact"})
        child.read_until(is_type("compaction_start"))  # the summary request now stalls
        child.send({"id": "p", "type": "prompt", "message": "sent during compact", "streamingBehavior": "followUp"})
        server.release.set()
        lines = child.read_until(is_type("agent_end"))
        responses = [(o["id"], o["success"]) for o in lines if o["type"] == "response"]
        assert responses == [("c", True), ("p", True)]
        assert [m["role"] for m in lines[-1]["messages"]][-2:] == ["user", "assistant"]
        assert lines[-1]["messages"][-2]["content"][0]["text"] == "sent during compact"
        assert child.call({"type": "get_state"})["data"]["pendingMessageCount"] == 0
        assert child.close().returncode == 0


def test_end_of_input_mid_run_lets_the_run_finish_then_exits_0(rpc, tmp_path):
    """``printf '{"type":"prompt",...}' | agentcore rpc`` prints the answer: closing stdin is not
    an abort (it used to abort the run, so a piped prompt never got its answer)."""
    path = tmp_path / "piped.jsonl"
    with ScriptedServer([stalled("partial")]) as server:
        child = rpc(*local(server), "--session", str(path))
        child.call({"type": "prompt", "message": "stream then stall"})
        child.read_until(lambda o: o.get("assistantMessageEvent", {}).get("type") == "text_delta")
        assert child.proc.stdin is not None and child.proc.stderr is not None
        child.proc.stdin.close()  # end of input while the answer is stalled mid-stream
        notes = []
        while not notes or "end of input" not in notes[-1]:
            notes.append(child.proc.stderr.readline().decode())
            assert notes[-1], f"agentcore rpc exited without finishing the run: {notes}"
        server.release.set()  # only now may the answer go on
        end = child.read_until(is_type("agent_end"))[-1]
        assert child.proc.wait(timeout=WAIT) == 0
    assert end["messages"][-1]["stopReason"] == "stop"
    with Session.open(path, read_only=True) as session:
        messages = session.build_context().messages
    assert [m.role for m in messages] == ["user", "assistant"] and messages[-1].text == "partial never"


def test_a_client_that_closed_both_pipes_mid_run_gets_the_run_aborted(rpc, tmp_path):
    """The client went away (a crashed editor closes stdin and stdout): nobody reads the answer,
    so the run is aborted, the session closed and the process exits 0. It used to be let finish
    as at a plain end of input, running tools and paid requests unattended, for ever when the
    model stalled."""
    path = tmp_path / "gone.jsonl"
    with ScriptedServer([stalled("partial")]) as server:
        child = rpc(*local(server), "--session", str(path))
        child.call({"type": "prompt", "message": "stream then stall"})
        child.read_until(lambda o: o.get("assistantMessageEvent", {}).get("type") == "text_delta")
        assert child.proc.stdin is not None and child.proc.stdout is not None
        child.proc.stdout.close()
        child.proc.stdin.close()
        try:
            status = child.proc.wait(timeout=WAIT)
        finally:
            server.release.set()
    assert status == 0
    with Session.open(path, read_only=True) as session:
        messages = session.build_context().messages
    assert messages[-1].stop_reason == "aborted"
    assert child.proc.stderr is not None and "closed its output" in child.proc.stderr.read().decode()


def test_sigterm_mid_run_aborts_flushes_and_exits_0(rpc, tmp_path):
    path = tmp_path / "mid.jsonl"
    with ScriptedServer([stalled("partial")]) as server:
        child = rpc(*local(server), "--session", str(path))
        child.call({"type": "prompt", "message": "stream forever"})
        child.read_until(lambda o: o.get("assistantMessageEvent", {}).get("type") == "text_delta")
        child.proc.send_signal(signal.SIGTERM)
        done = child.close()
        server.release.set()
    assert done.returncode == 0, done.stderr
    assert [o["type"] for o in child.seen][-1] == "agent_end"
    with Session.open(path, read_only=True) as session:
        messages = session.build_context().messages
    assert [m.role for m in messages] == ["user", "assistant"] and messages[-1].stop_reason == "aborted"


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 0), (signal.SIGINT, 130)])
def test_a_signal_while_a_long_response_is_written_never_cuts_the_line(rpc, tmp_path, signum, status):
    """SIGTERM or Ctrl-C while the server writes a long ``get_messages`` response to a client
    that reads slowly: the signal interrupted the write, the handler raised in the middle of it
    and the client got half a JSON object followed by the shutdown's lines. The response is now
    written whole, then the server shuts down: exit 0 (130 after Ctrl-C), the session intact."""
    path = tmp_path / "term.jsonl"
    big = "x" * (100 << 10)  # more than a pipe holds (64 KiB), far less than the context window
    child = rpc("--model", "scripted", "--session", str(path))
    child.call({"type": "prompt", "message": big})
    child.read_until(is_type("agent_end"))
    child.send({"type": "get_messages", "id": "all"})
    assert child.proc.stdout is not None
    ready, _, _ = select.select([child.proc.stdout], [], [], WAIT)
    assert ready
    head = os.read(child.proc.stdout.fileno(), 100)  # the response has begun: the pipe holds 64 KiB at most
    assert head.startswith(b'{"type":"response","command":"get_messages"')
    child.proc.send_signal(signum)
    rest, err = child.proc.communicate(timeout=WAIT)
    lines = (head + rest).splitlines()
    answer = json.loads(lines[0])  # whole, valid JSON
    assert answer["id"] == "all" and [m["role"] for m in answer["data"]["messages"]] == ["user", "assistant"]
    assert answer["data"]["messages"][0]["content"][0]["text"] == big
    assert [json.loads(line) for line in lines[1:]] == []
    assert child.proc.returncode == status, err.decode()
    with Session.open(path, read_only=True) as session:
        messages = session.build_context().messages
    assert [m.role for m in messages] == ["user", "assistant"] and messages[0].text == big


def test_sigterm_sent_as_a_line_arrives_is_never_missed(rpc):
    """A client writes (part of) a line and sends SIGTERM at once: the signal landed while the
    reader was between two reads, in C code where Python's handler cannot run, and the next read
    blocked with the handler pending: the server ran on until the client wrote again (for ever,
    when it only waits for the exit). The reader now wakes up to run it."""
    for _ in range(3):
        child = rpc("--model", "scripted", "--no-session")
        assert child.call({"type": "prompt", "message": "hello"})["success"] is True
        child.read_until(is_type("agent_end"))
        child.send(b'{"type": "prompt", "message": "half a line')
        child.proc.send_signal(signal.SIGTERM)
        assert child.proc.wait(timeout=WAIT) == 0


HOLD_AT_CLOSE = """
import sys
from agentcore.cli import _rpc
_close = _rpc.RpcServer.close_session
def holding(self, session):
    sys.stderr.write("held at close\\n")
    sys.stderr.flush()
    with open(FIFO) as fifo:
        fifo.read()
    _close(self, session)
_rpc.RpcServer.close_session = holding
"""


def test_sigterm_while_the_session_closes_at_end_of_input_exits_0(rpc, tmp_path):
    """SIGTERM after end of input, while the server closes the session (a supervisor's stop
    landing late): the handler raised in the middle of the close, the exception escaped the
    shutdown and the process died with a traceback and status 1. The shutdown now goes on."""
    fifo = tmp_path / "hold"
    os.mkfifo(fifo)
    path = tmp_path / "late.jsonl"
    child = rpc("--model", "scripted", "--session", str(path), setup=f"FIFO = {str(fifo)!r}" + HOLD_AT_CLOSE)
    child.call({"type": "prompt", "message": "hello"})
    child.read_until(is_type("agent_end"))
    assert child.proc.stdin is not None
    child.proc.stdin.close()
    _wait_for_note(child, "held at close")
    child.proc.send_signal(signal.SIGTERM)
    while child.proc.poll() is None:  # let the close go on (if the child still waits for it)
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            break
        except OSError:  # no reader: the signal interrupted the open (retried), or ended the child
            try:
                child.proc.wait(timeout=0.05)
            except subprocess.TimeoutExpired:
                pass
    status = child.proc.wait(timeout=WAIT)
    assert child.proc.stderr is not None
    assert (status, "Traceback" in child.proc.stderr.read().decode()) == (0, False)
    with Session.open(path, read_only=True) as session:
        assert [m.role for m in session.build_context().messages] == ["user", "assistant"]


def test_sighup_mid_run_and_mid_bash_shuts_down_as_sigterm_does(rpc, tmp_path):
    """SIGHUP (the terminal or the editor's session went away) while a run streams and a ``bash``
    command runs: the default action killed the server at once, the bash command's process
    group lived on (orphaned), and the session kept neither the aborted answer nor the bash
    result. It now shuts down as on SIGTERM: the command killed, both recorded, status 0."""
    path = tmp_path / "hup.jsonl"
    fifo = tmp_path / "bash-pid"
    os.mkfifo(fifo)
    pid = None
    with ScriptedServer([stalled("partial")]) as server:
        child = rpc(*local(server), "--session", str(path))
        child.call({"type": "prompt", "message": "stream forever"})
        child.read_until(lambda o: o.get("assistantMessageEvent", {}).get("type") == "text_delta")
        child.send({"id": "b", "type": "bash", "command": f"echo $$ > '{fifo}'; echo started; exec sleep 600"})
        try:
            with open(fifo) as pid_file:  # the command runs
                pid = int(pid_file.read())
            child.proc.send_signal(signal.SIGHUP)
            done = child.close()
            server.release.set()
            assert done.returncode == 0, done.stderr
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)  # killed and reaped, not left running
        finally:
            if pid is not None:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
    assert any(o["type"] == "agent_end" for o in child.seen)
    assert [o["data"]["cancelled"] for o in child.seen if o.get("id") == "b"] == [True]
    with Session.open(path, read_only=True) as session:
        messages = session.build_context().messages
    assert [m.role for m in messages] == ["user", "assistant", "bashExecution"]
    assert messages[1].stop_reason == "aborted" and messages[2].cancelled is True


def _wait_until_the_pipe_is_full(child: Rpc) -> None:
    """Return once the child's stdout pipe is full but for at most a page (written in pieces of
    a page, it may not fill to the byte): the writer of a longer line is blocked."""
    import fcntl
    import termios

    assert child.proc.stdout is not None
    fd = child.proc.stdout.fileno()
    size = fcntl.fcntl(fd, getattr(fcntl, "F_GETPIPE_SZ", 1032))  # Linux's value; Python 3.10+ names it
    held = bytearray(4)
    deadline = time.monotonic() + WAIT
    while fcntl.ioctl(fd, termios.FIONREAD, held) == 0 and int.from_bytes(held, sys.byteorder) < size - 4096:
        assert time.monotonic() < deadline, "the pipe never filled"
        select.select([], [], [], 0.01)  # poll the condition; nothing is ordered by this wait


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="F_GETPIPE_SZ and FIONREAD on a pipe: Linux")
@pytest.mark.parametrize("writer", ["response", "run"])
def test_sigterm_while_the_client_reads_nothing_stops_and_keeps_the_session(rpc, tmp_path, writer):
    """A client that stopped reading (a hung editor) and then sends SIGTERM. A response blocked
    on the full pipe kept the main thread in its write for ever: the signal was never acted on
    and the process never exited. A run's event blocked there kept the run from ending: the
    shutdown gave up after 30 s and closed the session without the prompt. Once stopping, a line
    the client takes nothing of for STALLED_WAIT seconds now ends the output: exit 0, and the
    session holds the prompt."""
    path = tmp_path / "stalled.jsonl"
    big = "x" * (100 << 10)  # a line longer than the pipe holds (64 KiB)
    setup = "from agentcore.cli import _rpc\n_rpc.STALLED_WAIT = 0.5"
    child = rpc("--model", "scripted", "--session", str(path), setup=setup)
    if writer == "response":  # the main thread writes the 100 KiB get_state response
        child.call({"type": "prompt", "message": "hello"})
        child.read_until(is_type("agent_end"))
        assert child.call({"type": "set_session_name", "name": big})["success"]
        child.send({"id": "s", "type": "get_state"})
    else:  # the run thread writes the 100 KiB message_start of the prompt
        child.send({"id": "p", "type": "prompt", "message": big})
    _wait_until_the_pipe_is_full(child)
    started = time.monotonic()
    child.proc.send_signal(signal.SIGTERM)
    try:
        status = child.proc.wait(timeout=WAIT)  # reading nothing meanwhile
    except subprocess.TimeoutExpired:
        pytest.fail("agentcore rpc never exited after SIGTERM while its client read nothing")
    assert status == 0
    assert time.monotonic() - started < 25  # not the 30 s the shutdown waits for a run that never ends
    with Session.open(path, read_only=True) as session:
        messages = session.build_context().messages
    assert messages[0].role == "user"
    assert messages[0].content[0].text == ("hello" if writer == "response" else big)


def test_in_process_main_serves_text_streams_and_restores_sigterm(tmp_path):
    """``main()`` called with text streams (an embedding program, a test): the protocol goes to
    the given stdout, and the SIGTERM and SIGINT handlers the server installs are removed afterwards."""
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    out, err = io.StringIO(), io.StringIO()
    commands = '{"type": "get_state", "id": 1}\nnot json\n{"type": "get_commands", "id": 2}\n'
    status = main(["rpc", "--model", "scripted", "--no-session"], stdin=io.StringIO(commands), stdout=out, stderr=err)
    assert status == 0, err.getvalue()
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(o.get("id"), o["success"]) for o in lines] == [(1, True), (None, False), (2, True)]
    assert lines[2]["data"] == {"commands": []}
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_a_byte_order_mark_at_the_start_of_the_input_is_skipped():
    """A commands file saved with a UTF-8 BOM (Notepad, PowerShell's ``Set-Content -Encoding
    UTF8``) piped in: its first command used to be refused ("Unexpected UTF-8 BOM (decode using
    utf-8-sig)") and never run. A BOM anywhere else is still an error."""
    out, err = io.StringIO(), io.StringIO()
    commands = '\ufeff{"type": "get_commands", "id": 1}\n\ufeff{"type": "get_commands", "id": 2}\n'
    status = main(["rpc", "--model", "scripted", "--no-session"], stdin=io.StringIO(commands), stdout=out, stderr=err)
    assert status == 0, err.getvalue()
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(o["command"], o["success"], o.get("id")) for o in lines] == [
        ("get_commands", True, 1),
        ("parse", False, None),
    ]


def test_an_id_that_is_not_a_string_or_a_finite_number_is_refused():
    """docs/rpc.rst: the id is a string or a number. Objects and booleans used to be echoed,
    and 1e400 came back as null; a number "type" was said to be "a a number"."""
    commands = [
        '{"type": "get_commands", "id": {"a": 1}}',
        '{"type": "get_commands", "id": true}',
        '{"type": "get_commands", "id": [1]}',
        '{"type": "get_commands", "id": 1e400}',
        '{"type": "get_commands", "id": 1' + "0" * 400 + "}",  # an int too large for a double too
        '{"type": "get_commands", "id": ' + str(-(10**300)) + "}",
        '{"type": 5, "id": 7}',
        '{"type": "get_commands", "id": 2.5}',
        '{"type": "get_commands", "id": "ok"}',
    ]
    out, err = io.StringIO(), io.StringIO()
    status = main(
        ["rpc", "--model", "scripted", "--no-session"], stdin=io.StringIO("\n".join(commands)), stdout=out, stderr=err
    )
    assert status == 0, err.getvalue()
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(o["command"], o["success"], o.get("id")) for o in lines] == [
        ("get_commands", False, None),
        ("get_commands", False, None),
        ("get_commands", False, None),
        ("get_commands", False, None),
        ("get_commands", False, None),
        ("get_commands", True, -(10**300)),
        ("parse", False, 7),
        ("get_commands", True, 2.5),
        ("get_commands", True, "ok"),
    ]
    errors = [o.get("error", "") for o in lines]
    assert all('"id" must be a string or a number' in e for e in errors[:3])
    assert "an object" in errors[0] and "a boolean" in errors[1] and "an array" in errors[2]
    assert '"id" is a number too large' in errors[3] and '"id" is a number too large' in errors[4]
    assert errors[6].startswith('the command has a number as its "type"')


def test_prompt_images_that_are_not_base64_images_of_their_mime_type_are_refused():
    """Any ``data`` string and any ``mimeType`` (even a number, turned into "5") used to be
    accepted: the bad image was recorded in the session, and a provider refuses it on that request
    and on every later one, which resends it."""
    import base64

    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()
    jpeg = base64.b64encode(b"\xff\xd8\xff\xe0" + b"\0" * 16).decode()
    bad = [
        {"type": "image", "data": "not base64!", "mimeType": "image/png"},
        {"type": "image", "data": "data:image/png;base64," + png, "mimeType": "image/png"},
        {"type": "image", "data": png, "mimeType": 5},
        {"type": "image", "data": base64.b64encode(b"plain text").decode(), "mimeType": "text/plain"},
        {"type": "image", "data": base64.b64encode(b"plain text").decode(), "mimeType": "image/png"},
        {"type": "image", "data": jpeg, "mimeType": "image/png"},
    ]
    commands = [{"type": "steer", "id": i, "message": "look", "images": [image]} for i, image in enumerate(bad)]
    commands.append(
        {"type": "prompt", "id": "ok", "message": "look", "images": [{"data": png, "mimeType": "image/png"}]}
    )
    out, err = io.StringIO(), io.StringIO()
    stdin = io.StringIO("".join(json.dumps(c) + "\n" for c in commands))
    assert main(["rpc", "--model", "scripted", "--no-session"], stdin=stdin, stdout=out, stderr=err) == 0
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    responses = [o for o in lines if o["type"] == "response"]
    assert [(o["id"], o["success"]) for o in responses] == [(i, False) for i in range(len(bad))] + [("ok", True)]
    errors = [o["error"] for o in responses[:-1]]
    assert all(e.startswith("steer: images[0]: ") for e in errors)
    assert "not valid base64" in errors[0] and "without a data: URL prefix" in errors[1]
    assert "mimeType must be one of image/png" in errors[2] and "not 5" in errors[2] and "'text/plain'" in errors[3]
    assert "not a PNG, JPEG, GIF or WebP image" in errors[4]
    assert errors[5] == 'steer: images[0]: data is an image/jpeg image, not image/png: send "mimeType": "image/jpeg"'
    assert not any(o["type"] == "queue_update" for o in lines)  # nothing was queued
    sent = next(o for o in lines if o["type"] == "message_end")["message"]
    assert sent["content"][1] == {"type": "image", "data": png, "mimeType": "image/png"}


def test_approve_with_edited_args_then_continue(rpc, tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "inner.txt").write_text("x")
    child = rpc("--model", "scripted", "--no-session", "--tools", "ls", "--approve")
    child.call({"type": "prompt", "message": "look around"})
    request = next(o for o in child.read_until(is_type("agent_end")) if o["type"] == "tool_approval_request")
    bad = child.call({"type": "approve", "toolCallId": request["toolCallId"], "args": {"limit": 0}})
    assert bad["success"] is False and "limit" in bad["error"]  # validated against the tool's schema
    held = child.call(
        {"type": "approve", "toolCallId": request["toolCallId"], "args": {"path": "sub"}, "continue": False}
    )
    assert held["data"]["continued"] is False and held["data"]["pending"][0]["decided"] is True
    child.send({"id": "go", "type": "continue"})
    lines = child.read_until(is_type("agent_end"))
    assert lines[0] == {"type": "response", "command": "continue", "success": True, "id": "go"}
    end = next(o for o in lines if o["type"] == "tool_execution_end")
    assert "inner.txt" in end["result"]["content"][0]["text"]
    nothing = child.call({"type": "continue"})
    assert nothing["success"] is False and "continue" in nothing["error"]
    assert child.close().returncode == 0


def test_continue_after_an_error_answer_retries(rpc, tmp_path):
    """docs/rpc.rst: ``continue`` retries after an error. It used to answer "Cannot continue
    from message role: assistant"; the failed answer stays in the session file, off the live
    transcript."""
    refused = Reply(status=400, content_type="application/json", body=json.dumps({"error": {"message": "nope"}}))
    with ScriptedServer([refused, answer("second try")]) as server:
        child = rpc(*local(server), "--session", str(tmp_path / "retry.jsonl"))
        child.call({"type": "prompt", "message": "hello"})
        assert child.read_until(is_type("agent_end"))[-1]["messages"][-1]["stopReason"] == "error"
        child.send({"id": "again", "type": "continue"})
        lines = child.read_until(is_type("agent_end"))
        assert lines[0] == {"type": "response", "command": "continue", "success": True, "id": "again"}
        messages = child.call({"type": "get_messages"})["data"]["messages"]
        assert [(m["role"], m.get("stopReason")) for m in messages] == [("user", None), ("assistant", "stop")]
        assert [m["role"] for m in server.requests[-1].json()["messages"]] == ["user"]
        assert child.close().returncode == 0
    with Session.open(tmp_path / "retry.jsonl", read_only=True) as session:
        kept = session.build_context().messages
    assert [getattr(m, "stop_reason", None) for m in kept] == [None, "error", "stop"]


def start_long_bash(child: Rpc, request_id: str, tmp_path: Path) -> None:
    """Send a ``bash`` command that runs for two minutes; return once its shell is running (an
    observable fact, a file it creates, not a guessed delay)."""
    marker = tmp_path / f"started-{request_id}"
    child.send({"id": request_id, "type": "bash", "command": f"touch {marker}; sleep 120"})
    deadline = time.monotonic() + WAIT
    while not marker.exists():
        assert time.monotonic() < deadline, "the bash command never started"
        time.sleep(0.01)


def test_abort_bash_kills_the_command_and_steer_is_queued(rpc, tmp_path):
    child = rpc("--model", "scripted", "--no-session")
    start_long_bash(child, "b", tmp_path)
    assert child.call({"type": "abort_bash"})["success"]
    done = child.read_until(lambda o: o.get("id") == "b")[-1]
    assert done["data"]["cancelled"] is True and done["data"]["exitCode"] is None
    steer = child.call({"type": "steer", "message": "mind the tests"})
    assert steer["success"] and child.seen[-2] == {
        "type": "queue_update",
        "steering": ["mind the tests"],
        "followUp": [],
    }
    child.call({"type": "prompt", "message": "go"})  # the queued steering message joins this run
    end = child.read_until(is_type("agent_end"))[-1]
    texts = [m["content"][0]["text"] for m in end["messages"] if m["role"] == "user"]
    assert texts == ["go", "mind the tests"] or texts == ["mind the tests", "go"]
    assert child.close().returncode == 0


NEXT_BASH_IN_THE_WINDOW = """
import threading
from agentcore.cli import _rpc

window, second = threading.Event(), threading.Event()
first = []  # the first bash's worker
real_setattr, real_dispatch = _rpc.RpcServer.__setattr__, _rpc.RpcServer._dispatch

class HeldLock:
    \"\"\"The bash lock; the first bash's worker waits after its last release for the next bash.\"\"\"

    def __init__(self, server, lock):
        self.server, self.lock = server, lock

    def __enter__(self):
        self.lock.acquire()

    def __exit__(self, *exc):
        self.lock.release()
        worker = threading.current_thread()
        if worker.name == "rpc-bash" and self.server.bash is None and not window.is_set():
            first.append(worker)
            window.set()
            assert second.wait(30), "the second bash never started"

def setattr_(self, name, value):
    if name == "bash_lock":
        value = HeldLock(self, value)
    real_setattr(self, name, value)
    if name == "bash_cancelled" and value is False and window.is_set():
        second.set()

def dispatch(self, command, spec):
    if command.get("id") == "b2":  # read once the first bash no longer counts as running
        assert window.wait(30)
    return real_dispatch(self, command, spec)

_rpc.RpcServer.__setattr__, _rpc.RpcServer._dispatch = setattr_, dispatch
"""


def test_an_aborted_bash_stays_cancelled_when_the_next_one_starts_at_once(rpc, tmp_path):
    """``abort_bash``, then a new ``bash`` read just after the aborted one stopped counting as
    running: the aborted one used to read its cancelled flag after the new one had reset it, and
    answered with an exit code instead of ``cancelled``. (The child's setup holds the threads at
    the two points of that window.)"""
    child = rpc("--model", "scripted", "--no-session", setup=NEXT_BASH_IN_THE_WINDOW)
    start_long_bash(child, "b1", tmp_path)
    child.send({"id": "a", "type": "abort_bash"})
    child.send({"id": "b2", "type": "bash", "command": "echo second"})
    answered: Set[str] = set()  # responses are matched by id: under load b2's may come before b1's

    def both_answered(o: Dict[str, Any]) -> bool:
        if o.get("type") == "response":
            answered.add(o.get("id"))
        return {"b1", "b2"} <= answered

    lines = child.read_until(both_answered)
    responses = {o["id"]: o for o in lines if o["type"] == "response"}
    assert responses["a"]["success"] is True
    assert responses["b1"]["data"]["cancelled"] is True and responses["b1"]["data"]["exitCode"] is None
    assert responses["b2"]["data"] == {"output": "second\n", "exitCode": 0, "cancelled": False, "truncated": False}
    assert child.close().returncode == 0


def test_two_bash_results_flushed_at_once_each_join_the_transcript_once():
    """Two ``bash`` commands ending together flush at once: both saw a waiting result, one took
    the last, and the other's ``pop`` failed (an error response for a command that had run), or
    one's read-modify-write of the transcript lost the other's message. The list below holds
    the loop's checks of both threads together, the window both used to enter."""
    from types import SimpleNamespace

    from agentcore.cli._rpc_bash import flush_bash

    both_checked = threading.Barrier(2)

    class Waiting(list):  # type: ignore[type-arg]
        def __bool__(self) -> bool:
            waiting = len(self) > 0
            if waiting:
                try:
                    both_checked.wait(0.5)  # only reached together without the flush lock
                except threading.BrokenBarrierError:
                    pass
            return waiting

    server = SimpleNamespace(
        pending_bash=Waiting(["m1"]),
        agent=SimpleNamespace(messages=[]),
        session=None,
        bash_flush_lock=threading.Lock(),
    )
    errors: List[BaseException] = []

    def flush() -> None:
        try:
            flush_bash(server)  # type: ignore[arg-type]
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=flush) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert errors == [] and server.agent.messages == ["m1"]


def test_export_html_writes_the_sessions_page(rpc, tmp_path):
    child = rpc("--model", "scripted", "--session", str(tmp_path / "e.jsonl"))
    child.call({"type": "prompt", "message": "export <me>"})
    child.read_until(is_type("agent_end"))
    data = child.call({"type": "export_html", "outputPath": str(tmp_path / "page.html")})["data"]
    assert data == {"path": str(tmp_path / "page.html")}
    page = (tmp_path / "page.html").read_text()
    assert "export &lt;me&gt;" in page and "export <me>" not in page
    bad = child.call({"type": "export_html", "outputPath": str(tmp_path / "missing-dir" / "p.html")})
    assert bad["success"] is False and "FileNotFoundError" not in bad["error"]  # it used to be the class name
    assert (
        bad["error"]
        == f"export_html: outputPath {tmp_path / 'missing-dir' / 'p.html'}: cannot write it (No such file or directory)"
    )
    assert child.close().returncode == 0


def test_the_fast_message_update_json_equals_event_to_dict():
    """The RPC listener converts message_update events itself (speed); for text, thinking and
    tool-call streams, and for odd argument values, a line reads back as ``event_to_dict``."""
    from agentcore import Agent
    from agentcore.cli._rpc import RpcOutput, update_json
    from agentcore.events import event_to_dict
    from agentcore.testing import ScriptedModel, call, response, text
    from agentcore.types import ThinkingContent

    odd_args = {"q": "x", "limit": float("nan"), "range": (1, 2)}  # NaN: not JSON
    model = ScriptedModel(
        [response(ThinkingContent("let me think about it"), "calling", call("lookup", odd_args)), text("done")],
        tokens_per_second=1e9,
    )
    agent = Agent(model.model, stream_fn=model.stream_fn)
    updates: List[Any] = []
    agent.subscribe(lambda e: updates.append(e) if e.type == "message_update" else None)
    agent.prompt("go")
    kinds = {e.assistant_message_event.type for e in updates}
    assert {"thinking_delta", "text_delta", "toolcall_end"} <= kinds
    sink = io.BytesIO()
    output = RpcOutput(sink)
    for event in updates:
        output.send(update_json(event))
    lines = [json.loads(line) for line in sink.getvalue().splitlines()]
    assert lines == [event_to_dict(e) for e in updates]


def test_thinking_levels_follow_the_models_map(rpc, env, tmp_path):
    """cycle_thinking_level steps through the levels the model's map supports (minimal is mapped
    to null here, xhigh is mapped), and set_thinking_level moves an unsupported level upward."""
    models = tmp_path / "models.json"
    models.write_text(
        json.dumps(
            {
                "models": [
                    {
                        "id": "thinker",
                        "provider": "rpc-local",
                        "api": "openai-completions",
                        "baseUrl": "http://127.0.0.1:9/v1",
                        "reasoning": True,
                        "thinkingLevelMap": {"minimal": None, "low": "low", "xhigh": "max"},
                    }
                ]
            }
        ),
        encoding="utf-8",
    )
    env["AGENTCORE_MODELS"] = str(models)
    env["RPC_LOCAL_API_KEY"] = "not-used"
    child = rpc("--model", "rpc-local/thinker", "--no-session", "--api-key-env", "RPC_LOCAL_API_KEY")
    cycled = [child.call({"type": "cycle_thinking_level"})["data"]["level"] for _ in range(6)]
    assert cycled == ["low", "medium", "high", "xhigh", "off", "low"]
    assert child.call({"type": "set_thinking_level", "level": "minimal"})["success"]
    assert child.call({"type": "get_state"})["data"]["thinkingLevel"] == "low"
    assert child.call({"type": "set_thinking_level", "level": "max"})["success"]  # not mapped: downward
    assert child.call({"type": "get_state"})["data"]["thinkingLevel"] == "xhigh"
    assert child.close().returncode == 0


def test_model_replies_never_carry_a_models_json_credential(rpc, env, tmp_path):
    """A models.json header ``Authorization: Bearer ...`` and a ``user:password@`` base URL were
    sent back whole by get_state, set_model and get_available_models."""
    models = tmp_path / "models.json"
    proxied = {"id": "guarded", "provider": "rpc-guarded", "api": "openai-completions"}
    proxied.update(
        baseUrl="http://user:pw-Secret-42@127.0.0.1:9/v1",
        headers={"Authorization": "Bearer sk-Secret-42", "X-Team": "blue"},
    )
    models.write_text(json.dumps({"models": [proxied]}), encoding="utf-8")
    env["AGENTCORE_MODELS"] = str(models)
    env["RPC_GUARDED_API_KEY"] = "not-used"
    child = rpc("--model", "rpc-guarded/guarded", "--no-session", "--api-key-env", "RPC_GUARDED_API_KEY")
    replies = [
        child.call({"type": "get_state"}),
        child.call({"type": "get_available_models"}),
        child.call({"type": "set_model", "provider": "rpc-guarded", "modelId": "guarded"}),
    ]
    assert all(reply["success"] for reply in replies), replies
    assert "Secret-42" not in json.dumps(replies)
    model = replies[0]["data"]["model"]
    assert model["headers"] == {"Authorization": "***", "X-Team": "blue"} and "127.0.0.1:9" in model["baseUrl"]
    assert child.close().returncode == 0


def test_abort_is_read_while_a_command_waits_for_navigate_tree(rpc, tmp_path):
    """``navigate_tree`` (summarising), then ``clone`` (which waits for the move), then ``abort``:
    the abort is read at once and stops the summary, instead of waiting behind the clone until
    the summary has been written; the clone then answers, after the navigation."""
    with ScriptedServer([answer("first"), answer("second"), stalled("the summary")]) as server:
        child = navigating(rpc, server, tmp_path)
        child.send({"id": "c", "type": "clone"})
        child.send({"id": "a", "type": "abort"})
        lines = child.read_until(lambda o: o.get("id") == "a")  # the server is never released
        child.send({"id": "s", "type": "get_state"})
        lines += child.read_until(lambda o: o.get("id") == "s")
        server.release.set()
    responses = {o["id"]: o for o in lines if o["type"] == "response"}
    assert sorted(responses) == ["a", "c", "n", "s"]
    order = [o["id"] for o in lines if o["type"] == "response"]
    assert order.index("n") < order.index("c") < order.index("s")  # the line kept its order
    assert responses["a"]["success"] is True
    assert responses["n"]["success"] is False and "abort" in responses["n"]["error"].lower()
    assert responses["c"]["success"] is True
    assert child.close().returncode == 0


def two_turns(child: Rpc):
    """Prompt "one" and "two" (each to its agent_end); the user messages one may fork from, and
    the leaf."""
    for text in ("one", "two"):
        child.call({"type": "prompt", "message": text})
        child.read_until(is_type("agent_end"))
    forks = child.call({"type": "get_fork_messages"})["data"]["messages"]
    return forks, child.call({"type": "get_state"})["data"]["leafId"]


ABORT_BEFORE_NAVIGATION_BEGINS = """
import threading
from agentcore.agent import Agent
from agentcore.cli import _rpc_commands

handled = threading.Event()
real_settle, real_navigate = _rpc_commands.settle, Agent.navigate_tree

def settle(server):
    real_settle(server)
    handled.set()

def navigate_tree(self, *args, **options):
    assert handled.wait(30), "the abort was never handled"
    return real_navigate(self, *args, **options)

_rpc_commands.settle, Agent.navigate_tree = settle, navigate_tree
"""


def test_an_abort_read_before_navigate_tree_began_still_stops_its_summary(rpc, tmp_path):
    """``navigate_tree`` then ``abort`` at once: the abort can be handled while the navigation's
    worker has not yet made the agent busy (it first waits for the run before it to settle), when
    ``agent.abort()`` finds nothing to abort. The abort used to be lost: the summary was written
    and the branch moved. (The child's setup holds the navigation until the abort was handled.)"""
    with ScriptedServer([answer("first"), answer("second"), answer("the summary")]) as server:
        child = rpc(*local(server), "--session", str(tmp_path / "tree.jsonl"), setup=ABORT_BEFORE_NAVIGATION_BEGINS)
        forks, leaf = two_turns(child)
        child.send({"id": "n", "type": "navigate_tree", "targetId": forks[1]["entryId"], "summarize": True})
        child.send({"id": "a", "type": "abort"})
        lines = child.read_until(lambda o: o.get("id") == "n")
        state = child.call({"type": "get_state"})["data"]
    navigated = lines[-1]
    assert navigated["success"] is False and "abort" in navigated["error"].lower()
    assert state["leafId"] == leaf  # nothing moved, no summary written
    assert len(server.requests) == 2  # the summary request was never sent
    assert child.close().returncode == 0


NEXT_BUSY_COMMAND_IN_THE_WINDOW = """
import threading
from agentcore.agent import Agent
from agentcore.cli import _rpc, _rpc_commands

window, dispatched, handled = threading.Event(), threading.Event(), threading.Event()
first = []  # the first navigation's worker, held where its command is no longer busy
real_setattr, real_dispatch = _rpc.RpcServer.__setattr__, _rpc.RpcServer._dispatch
real_settle, real_navigate = _rpc_commands.settle, Agent.navigate_tree

def setattr_(self, name, value):
    real_setattr(self, name, value)
    worker = threading.current_thread()
    if name == "busy_with" and value is None and worker.name == "rpc-navigate_tree" and not window.is_set():
        first.append(worker)
        window.set()
        assert dispatched.wait(30), "the second navigate_tree was never dispatched"
    elif name == "busy_abort" and value is not None and window.is_set():
        dispatched.set()

def dispatch(self, command, spec):
    if command.get("id") == "n2":  # read while the first navigation's worker is still finishing
        assert window.wait(30)
    if command.get("id") == "a":  # whatever that worker does last, it has done
        first[0].join(30)
    return real_dispatch(self, command, spec)

def settle(server):
    real_settle(server)
    handled.set()

def navigate_tree(self, *args, **options):
    if window.is_set():
        assert handled.wait(30), "the abort was never handled"
    return real_navigate(self, *args, **options)

_rpc.RpcServer.__setattr__, _rpc.RpcServer._dispatch = setattr_, dispatch
_rpc_commands.settle, Agent.navigate_tree = settle, navigate_tree
"""


def test_an_abort_of_a_busy_command_sent_as_the_last_one_answers_is_not_lost(rpc, tmp_path):
    """A ``navigate_tree`` read just after the previous one stopped being busy, but before that
    one's worker had finished, then ``abort``: the worker used to clear the abort made for the new
    command after the new command had set it, so the abort was lost and the summary written.
    (The child's setup holds the threads at the two points of that window.)"""
    with ScriptedServer([answer("first"), answer("second"), answer("the summary")]) as server:
        child = rpc(*local(server), "--session", str(tmp_path / "tree.jsonl"), setup=NEXT_BUSY_COMMAND_IN_THE_WINDOW)
        forks, leaf = two_turns(child)
        child.send({"id": "n1", "type": "navigate_tree", "targetId": leaf})  # where it is: nothing moves
        child.send({"id": "n2", "type": "navigate_tree", "targetId": forks[1]["entryId"], "summarize": True})
        child.send({"id": "a", "type": "abort"})
        lines = child.read_until(lambda o: o.get("id") == "n2")
        moved = child.call({"type": "get_state"})["data"]["leafId"]
    responses = {o["id"]: o for o in lines if o["type"] == "response"}
    assert responses["n1"]["success"] is True
    assert responses["n2"]["success"] is False and "abort" in responses["n2"]["error"].lower()
    assert moved == leaf  # the second navigation did not happen
    assert len(server.requests) == 2  # the summary request was never sent
    assert child.close().returncode == 0


def test_sigterm_answers_the_commands_waiting_in_line_and_runs_none(rpc, tmp_path):
    """SIGTERM while ``clone`` and ``get_messages`` wait for a ``navigate_tree``: the navigation is
    aborted and neither waiting command runs (a clone used to run during the shutdown, leaving a
    new session file behind, while stderr said the waiting commands were not run); each gets an
    error response, so a client waiting on its id is answered."""
    with ScriptedServer([answer("first"), answer("second"), stalled("the summary")]) as server:
        child = navigating(rpc, server, tmp_path)
        child.send({"id": "c", "type": "clone"})
        child.send({"id": "g", "type": "get_messages"})
        child.call({"type": "abort_bash"})  # answered at once: the two before it are in line now
        child.proc.send_signal(signal.SIGTERM)
        done = child.close()
        server.release.set()
    assert done.returncode == 0, done.stderr
    responses = {o["id"]: o for o in child.seen if o["type"] == "response" and o.get("id") in ("n", "c", "g")}
    assert responses["n"]["success"] is False
    for waiting in ("c", "g"):
        assert responses[waiting]["success"] is False
        assert "not run, the server shut down" in responses[waiting]["error"]
    assert not (tmp_path / "sessions").exists() or not list((tmp_path / "sessions").rglob("*.jsonl"))
    assert "2 command(s) waiting in line were not run" in done.stderr


def test_switch_session_never_sends_the_key_to_an_endpoint_a_session_recorded(rpc, env, tmp_path):
    """An rpc started with a local server and its key: switch_session to a session whose local
    model records another URL. A session file never decides where a key is sent: with --base-url
    the recorded URL is not used at all (the model goes to the given server, with its key)."""
    env["RPC_TEST_KEY"] = SECRET
    with ScriptedServer([answer("never")]) as elsewhere, ScriptedServer([answer("here")]) as server:
        crafted = tmp_path / "crafted.jsonl"
        with Session.create(str(crafted)) as session:
            session.append_model_change(
                "local", "llama3", extra={"api": "openai-completions", "baseUrl": elsewhere.url + "/v1"}
            )
        child = rpc(*local(server), "--api-key-env", "RPC_TEST_KEY", "--no-session")
        assert child.call({"type": "switch_session", "sessionPath": str(crafted)})["success"] is True
        child.call({"type": "prompt", "message": "hi"})
        assert child.read_until(is_type("agent_end"))[-1]["messages"][-1]["content"][0]["text"] == "here"
        assert child.close().returncode == 0
        assert elsewhere.requests == []


def test_export_html_default_name_stays_in_the_working_directory_whatever_the_session_id(rpc, tmp_path):
    """Without ``outputPath`` the page went to ``agentcore-session-ID.html`` with the id of the
    session file's header as written: another person's file with the id ``x/../../NAME`` had the
    page written over ``NAME.html`` two folders up (any ``.html`` file the user can write)."""
    escaped = f"escaped-{tmp_path.name}"
    header = {"type": "session", "version": 3, "id": f"x/../../{escaped}", "timestamp": "2026-01-01T00:00:00.000Z"}
    path = tmp_path / "theirs.jsonl"
    path.write_text(json.dumps(dict(header, cwd="/")) + "\n", encoding="utf-8")
    child = rpc("--model", "scripted", "--session", str(path))
    data = child.call({"type": "export_html"})["data"]
    assert data == {"path": str(tmp_path / f"agentcore-session-x_.._.._{escaped}.html")}
    assert os.path.isfile(data["path"])
    assert not (tmp_path.parent / f"{escaped}.html").exists()
    assert child.close().returncode == 0

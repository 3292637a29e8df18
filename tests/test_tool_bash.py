"""The built-in bash tool (issue 7 item 1): output, streaming, truncation, timeout and abort.

Tool failure is reported by raising (agent-loop §1.7, §2.8); these tests call ``execute`` directly.
"""

from __future__ import annotations

import os
import re
import signal as _signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, List

import pytest
from _processes import wait_dead

from agentcore.builtin_tools import BashError, create_bash_tool
from agentcore.signals import AbortController, AbortSignal
from agentcore.tools import AgentToolResult

pytestmark = pytest.mark.skipif(os.name != "posix", reason="process groups are POSIX-only")


def _cleanup(pids: List[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, _signal.SIGKILL)
        except OSError:
            pass


GRANDCHILDREN = 'sleep 100 & echo "pid:$!"; sleep 100 & echo "pid:$!"; wait'


def _pids(text: str) -> List[int]:
    return [int(p) for p in re.findall(r"pid:(\d+)", text)]


def test_runs_command_in_cwd_and_merges_stderr(tmp_path):
    tool = create_bash_tool(cwd=str(tmp_path))
    result = tool.execute("c1", {"command": "pwd; echo oops >&2"}, None, None)
    text = result.content[0].text
    assert text.splitlines() == [os.path.realpath(tmp_path), "oops"]
    assert result.details["exitCode"] == 0


def test_empty_output_says_so(tmp_path):
    result = create_bash_tool(cwd=str(tmp_path)).execute("c1", {"command": "true"}, None, None)
    assert result.content[0].text == "(no output)"


def test_nonzero_exit_raises_with_output_and_code(tmp_path):
    tool = create_bash_tool(cwd=str(tmp_path))
    with pytest.raises(BashError) as info:
        tool.execute("c1", {"command": "echo partial; exit 3"}, None, None)
    assert str(info.value) == "partial\n\nCommand exited with code 3"
    assert info.value.exit_code == 3 and info.value.reason == "exit"
    assert info.value.details["exitCode"] == 3


def test_nonzero_exit_as_result_when_asked(tmp_path):
    tool = create_bash_tool(cwd=str(tmp_path), raise_on_error=False)
    result = tool.execute("c1", {"command": "echo partial; exit 4"}, None, None)
    assert result.details["exitCode"] == 4
    assert result.content[0].text == "partial"


def test_output_streams_through_on_update(tmp_path):
    # The command waits for a file that the update callback creates once it saw the first line,
    # so a partial result with only that line must have been delivered while the command ran.
    go = tmp_path / "go"
    seen_first = threading.Event()
    updates: List[str] = []

    def on_update(partial: AgentToolResult) -> None:
        text = partial.content[0].text
        updates.append(text)
        if "first" in text and not seen_first.is_set():
            seen_first.set()
            go.touch()

    command = "echo first; for i in $(seq 1000); do [ -e go ] && break; sleep 0.01; done; echo second"
    tool = create_bash_tool(cwd=str(tmp_path), update_interval=0.0)
    result = tool.execute("c1", {"command": command}, None, on_update)
    assert seen_first.is_set()
    assert any("first" in u and "second" not in u for u in updates)
    assert result.content[0].text == "first\nsecond"


def test_timeout_kills_the_whole_process_group(tmp_path):
    tool = create_bash_tool(cwd=str(tmp_path), update_interval=0.0)
    pids: List[int] = []
    started = time.monotonic()
    try:
        with pytest.raises(BashError) as info:
            tool.execute("c1", {"command": GRANDCHILDREN, "timeout": 0.5}, None, None)
        elapsed = time.monotonic() - started
        pids = _pids(info.value.output)
        assert len(pids) == 2
        assert str(info.value).endswith("Command timed out after 0.5 seconds")
        assert info.value.reason == "timeout" and info.value.exit_code is None
        assert wait_dead(pids) == []
        assert elapsed < 0.5 + 10.0  # killed promptly, not after the sleeps' 100 s
    finally:
        _cleanup(pids)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="sessions are listed from Linux's /proc")
@pytest.mark.parametrize("how", ["timeout", "abort"])
def test_timeout_and_abort_kill_a_child_that_made_its_own_process_group(tmp_path, how):
    """``timeout 60 pytest; echo done`` (GNU timeout calls setpgid, as ``set -m`` jobs do) left
    ``timeout`` and its command running after the tool's timeout or abort: only the shell's own
    process group was signalled, not the rest of the command's session."""
    own_group = (
        f"{sys.executable} -c \"import os, time; os.setpgid(0, 0); print('pid:%d' % os.getpid(), flush=True); "
        f'time.sleep(100)"; echo done'
    )
    controller = AbortController()

    def on_update(partial: AgentToolResult) -> None:
        if how == "abort" and _pids(partial.content[0].text):
            controller.abort()

    tool = create_bash_tool(cwd=str(tmp_path), update_interval=0.0)
    pids: List[int] = []
    try:
        with pytest.raises(BashError) as info:
            tool.execute(
                "c1", {"command": own_group, "timeout": 30 if how == "abort" else 1}, controller.signal, on_update
            )
        pids = _pids(info.value.output)
        assert len(pids) == 1 and info.value.reason == ("aborted" if how == "abort" else "timeout")
        assert wait_dead(pids) == []
    finally:
        _cleanup(pids)


def test_abort_kills_the_whole_process_group(tmp_path):
    controller = AbortController()
    both_started = threading.Event()
    outcome: List[BaseException] = []

    def on_update(partial: AgentToolResult) -> None:
        if len(_pids(partial.content[0].text)) == 2:
            both_started.set()

    tool = create_bash_tool(cwd=str(tmp_path), update_interval=0.0)

    def run() -> None:
        try:
            tool.execute("c1", {"command": GRANDCHILDREN}, controller.signal, on_update)
        except BaseException as exc:  # recorded for the main thread
            outcome.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    pids: List[int] = []
    try:
        assert both_started.wait(10)
        aborted_at = time.monotonic()
        controller.abort("stop")
        worker.join(10)
        assert not worker.is_alive()
        assert time.monotonic() - aborted_at < 10.0  # not the sleeps' 100 s
        assert len(outcome) == 1 and isinstance(outcome[0], BashError)
        error = outcome[0]
        pids = _pids(error.output)
        assert len(pids) == 2
        assert str(error).endswith("Command aborted") and error.reason == "aborted"
        assert wait_dead(pids) == []
    finally:
        controller.abort()
        worker.join(10)
        _cleanup(pids)


class _DeafSignal(AbortSignal):
    """A signal whose listeners are never called: an abort whose call of them was cut short."""

    def add_listener(self, callback):
        pass

    def remove_listener(self, callback):
        pass


def test_an_abort_whose_listener_call_was_missed_still_ends_the_command(tmp_path):
    """The tool learnt of an abort only through its listener. When the abort's call of the
    listeners was cut short (a Ctrl+C landing while it told an earlier one), the command ran on to
    its end or timeout, and survived a CLI that exited. The flag is checked too now."""
    signal = _DeafSignal()
    started = threading.Event()
    outcome: List[BaseException] = []

    def on_update(partial: AgentToolResult) -> None:
        if "started" in partial.content[0].text:
            started.set()

    tool = create_bash_tool(cwd=str(tmp_path), update_interval=0.0)

    def run() -> None:
        try:
            tool.execute("c1", {"command": "echo started; exec sleep 100"}, signal, on_update)
        except BaseException as exc:  # recorded for the main thread
            outcome.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    assert started.wait(10)
    signal._abort("stop")
    worker.join(10)
    assert not worker.is_alive(), "the command ran on after the abort"
    assert len(outcome) == 1 and isinstance(outcome[0], BashError) and outcome[0].reason == "aborted"


def test_already_aborted_signal_runs_nothing(tmp_path):
    controller = AbortController()
    controller.abort()
    tool = create_bash_tool(cwd=str(tmp_path))
    with pytest.raises(BashError, match="Command aborted"):
        tool.execute("c1", {"command": "touch ran"}, controller.signal, None)
    assert not (tmp_path / "ran").exists()


def test_background_job_does_not_block_the_result(tmp_path):
    # The job inherits the output pipe; the tool must return once the shell exits.
    tool = create_bash_tool(cwd=str(tmp_path))
    result = tool.execute("c1", {"command": 'sleep 100 & echo "pid:$!"', "timeout": 5}, None, None)
    pids = _pids(result.content[0].text)
    try:
        assert len(pids) == 1 and result.details["exitCode"] == 0
    finally:
        _cleanup(pids)


@pytest.mark.skipif(os.name != "posix", reason="process groups are POSIX-only")
def test_bash_kills_the_command_when_on_update_raises(tmp_path):
    # A failing on_update callback (a UI that crashed) must not leave the command running.
    tool = create_bash_tool(str(tmp_path), update_interval=0.0)
    seen: List[str] = []

    def on_update(partial):
        seen.append(partial.content[0].text)
        raise RuntimeError("display crashed")

    with pytest.raises(RuntimeError, match="display crashed"):
        tool.execute("c1", {"command": 'sleep 100 & echo "pid:$!"; wait'}, None, on_update)
    pids = [int(p) for p in re.findall(r"pid:(\d+)", "".join(seen))]
    assert pids, seen
    try:
        assert wait_dead(pids, within=2.0) == []
    finally:
        for pid in pids:
            try:
                os.kill(pid, _signal.SIGKILL)
            except OSError:
                pass


def test_long_output_keeps_the_tail_and_saves_everything(tmp_path):
    tool = create_bash_tool(cwd=str(tmp_path), max_lines=100)
    result = tool.execute("c1", {"command": "seq 1 5000"}, None, None)
    text = result.content[0].text
    path = result.details["fullOutputPath"]
    try:
        body, notice = text.split("\n\n")
        assert body.splitlines() == [str(i) for i in range(4901, 5001)]
        assert notice == f"[Showing lines 4901-5000 of 5000. Full output: {path}]"
        assert Path(path).read_text().splitlines() == [str(i) for i in range(1, 5001)]
        truncation = result.details["truncation"]
        assert truncation["truncatedBy"] == "lines" and truncation["totalLines"] == 5000
    finally:
        os.unlink(path)


def test_byte_limit_and_a_single_huge_line(tmp_path):
    tool = create_bash_tool(cwd=str(tmp_path), max_bytes=1000)
    result = tool.execute("c1", {"command": "head -c 5000 /dev/zero | tr '\\0' a; echo; echo end"}, None, None)
    path = result.details["fullOutputPath"]
    try:
        text = result.content[0].text
        assert text.startswith("end\n\n[Showing lines 2-2 of 2 (1000B limit)")
        assert os.path.getsize(path) == 5000 + 1 + 4
    finally:
        os.unlink(path)
    result = tool.execute("c2", {"command": "head -c 5000 /dev/zero | tr '\\0' b"}, None, None)
    path = result.details["fullOutputPath"]
    try:
        body = result.content[0].text.split("\n\n")[0]
        assert body == "b" * 1000
        assert result.details["truncation"]["lastLinePartial"] is True
    finally:
        os.unlink(path)


def test_bash_long_crlf_output_never_shows_a_cut_first_line():
    # Output with \r\n line ends (Windows tools, progress bars, `script`): the kept tail is cut
    # at a byte offset, and once \r\n became \n the fragment before the first line break fitted
    # the byte budget, so the result started with half a line ("37" for "000037") and counted it.
    from agentcore.builtin_tools.bash import _Output, _render

    for lines in (55, 96, 137, 506):  # the kept tail was just cut back to its minimum size
        output = _Output(max_lines=1000, max_bytes=100)
        for i in range(lines):
            output.append(b"%06d\r\n" % i)  # one write per line, as a shell loop makes them
        try:
            cut, path = output.snapshot()
            text, details = _render(cut, path)
        finally:
            output.close()
            if output.path:
                os.unlink(output.path)
        shown = text.split("\n\n[Showing")[0].split("\n")
        assert all(re.fullmatch(r"\d{6}", line) for line in shown), (lines, shown)
        assert shown[-1] == f"{lines - 1:06d}"
        info = details["truncation"]
        assert info["outputLines"] == len(shown) and info["totalLines"] == lines


def test_output_cut_with_an_unterminated_last_line_is_saved(tmp_path):
    # newlines were counted instead of lines: 100 lines plus "tail" (101 lines) were cut to 100
    # without spilling to a file, and the notice said "Full output: None"
    tool = create_bash_tool(cwd=str(tmp_path), max_lines=100)
    result = tool.execute("c1", {"command": "seq 1 100; printf tail"}, None, None)
    path = result.details["fullOutputPath"]
    try:
        assert path is not None and "None" not in result.content[0].text
        assert result.content[0].text.endswith(f"[Showing lines 2-101 of 101. Full output: {path}]")
        assert Path(path).read_text() == "".join(f"{i}\n" for i in range(1, 101)) + "tail"
    finally:
        if path:
            os.unlink(path)


def test_output_that_grows_when_decoded_is_still_saved_when_cut():
    # invalid UTF-8 becomes U+FFFD (3 bytes each): 400 raw bytes fit the 1000-byte budget, the
    # decoded text does not, so the cut happened without the output ever being saved
    from agentcore.builtin_tools.bash import _Output, _render

    output = _Output(max_lines=1000, max_bytes=1000)
    output.append(b"\xff" * 400)
    try:
        cut, path = output.snapshot()
        text, details = _render(cut, path)
        assert path is not None and details["fullOutputPath"] == path and text.endswith(f"Full output: {path}]")
        output.close()
        assert Path(path).read_bytes() == b"\xff" * 400
    finally:
        output.close()
        if output.path:
            os.unlink(output.path)


def test_short_output_has_no_file(tmp_path):
    result = create_bash_tool(cwd=str(tmp_path)).execute("c1", {"command": "echo hi"}, None, None)
    assert "fullOutputPath" not in result.details and "truncation" not in result.details


@pytest.mark.parametrize("value", [-1, "soon", float("nan")])
def test_invalid_timeout_is_refused(tmp_path, value):
    tool = create_bash_tool(cwd=str(tmp_path))
    with pytest.raises(ValueError, match="invalid timeout"):
        tool.execute("c1", {"command": "true", "timeout": value}, None, None)


def test_missing_working_directory_is_reported(tmp_path):
    tool = create_bash_tool(cwd=str(tmp_path / "gone"))
    with pytest.raises(FileNotFoundError, match="working directory does not exist"):
        tool.execute("c1", {"command": "true"}, None, None)


def test_default_timeout_applies_and_zero_disables_it(tmp_path):
    tool = create_bash_tool(cwd=str(tmp_path), timeout=0.3)
    with pytest.raises(BashError, match="timed out after 0.3 seconds"):
        tool.execute("c1", {"command": "sleep 30"}, None, None)
    result = tool.execute("c2", {"command": "sleep 0.5; echo done", "timeout": 0}, None, None)
    assert result.content[0].text == "done"


class _AbortOnRead(AbortSignal):
    """Aborts itself the first time ``aborted`` is read once ``armed``, waits for the shell
    (``pid``) to die of the SIGTERM that sends, and answers False: the flag as it was read just
    before the abort landed."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = threading.Event()
        self.pid = 0

    @property
    def aborted(self) -> bool:
        if self.armed.is_set() and not self._flag.is_set():
            self._abort("stop")
            os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)  # the shell died of the SIGTERM
            return False
        return self._flag.is_set()


def test_an_abort_landing_between_the_checks_is_reported_as_an_abort(tmp_path):
    """The run loop checked the abort flag, then whether the shell had exited. An abort between
    the two (its SIGTERM killed the shell at once) made a plain exit of it: the result said
    ``Command was killed by signal 15`` with reason "exit" instead of ``Command aborted``."""
    signal = _AbortOnRead()

    def on_update(partial: AgentToolResult) -> None:
        found = _pids(partial.content[0].text)
        if found and not signal.armed.is_set():
            signal.pid = found[0]
            signal.armed.set()

    tool = create_bash_tool(cwd=str(tmp_path), update_interval=0.0)
    with pytest.raises(BashError) as info:
        tool.execute("c1", {"command": 'echo "pid:$$"; exec sleep 100'}, signal, on_update)
    assert info.value.reason == "aborted" and str(info.value).endswith("Command aborted")
    assert info.value.exit_code is None and info.value.details["exitCode"] is None


def test_a_group_gone_at_sigterm_is_not_waited_for_the_whole_grace(tmp_path):
    """After SIGTERM the tool waited for the group to go, but the shell (kept unreaped until the
    last signal) still counted as a member as a zombie: every timeout and abort took the whole
    ``kill_grace``, however fast the command quit. A member that ignores SIGTERM still gets
    SIGKILL once the grace is over."""
    tool = create_bash_tool(cwd=str(tmp_path), update_interval=0.0, kill_grace=20.0)
    started = time.monotonic()
    with pytest.raises(BashError, match="timed out after 0.2 seconds"):
        tool.execute("c1", {"command": GRANDCHILDREN, "timeout": 0.2}, None, None)
    assert time.monotonic() - started < 10.0  # not the 20 s grace

    stubborn = "trap '' TERM; sleep 100 & echo \"pid:$!\"; wait"  # the ignored SIGTERM is inherited
    tool = create_bash_tool(cwd=str(tmp_path), update_interval=0.0, kill_grace=0.2)
    pids: List[int] = []
    try:
        with pytest.raises(BashError, match="timed out after 0.2 seconds") as info:
            tool.execute("c2", {"command": stubborn, "timeout": 0.2}, None, None)
        pids = _pids(info.value.output)
        assert len(pids) == 1 and wait_dead(pids) == []
    finally:
        _cleanup(pids)


@pytest.mark.parametrize(
    "env, error, named",
    [
        ({"PORT": 8080}, TypeError, "env['PORT'] is int, not str"),
        ({"API_KEY": "sk-live-1234\0"}, ValueError, "env['API_KEY']: the value contains a NUL byte"),
        ({"API_KEY=sk-live-1234": "x"}, ValueError, "name starting 'API_KEY' contains '='"),
    ],
)
def test_an_unusable_env_is_refused_naming_the_variable_not_its_value(tmp_path, env, error, named):
    """An env the OS refuses failed every call, deep in subprocess, with "expected str, bytes or
    os.PathLike object, not int", "embedded null byte" or "illegal environment variable name":
    no variable named. It is refused when the tool is made, naming the variable only."""
    with pytest.raises(error) as info:
        create_bash_tool(cwd=str(tmp_path), env=env)
    assert named in str(info.value) and "sk-live" not in str(info.value)
    changing: dict = {}
    tool = create_bash_tool(cwd=str(tmp_path), env=changing)
    changing.update(env)  # changed after the tool was made: refused when a call reads it
    with pytest.raises(error) as info:
        tool.execute("c1", {"command": "true"}, None, None)
    assert named in str(info.value) and "sk-live" not in str(info.value)


def test_a_ctrl_c_during_the_kill_grace_still_kills_the_group_and_reaps_the_shell(tmp_path):
    """A second Ctrl+C landing while the tool gave the group its ``kill_grace`` after SIGTERM
    (the impatient user) ended the wait before SIGKILL was sent: a command that survives SIGTERM
    ran on after the tool had gone. The same interrupt also skipped reaping the shell: it stayed
    a zombie and its output pipe an open descriptor until the garbage collector warned
    "ResourceWarning: subprocess N is still running" (a leak per interrupted command in a
    long-lived kernel)."""
    import _thread

    termed = tmp_path / "termed"
    survivor = f"trap 'touch {termed}' TERM; while :; do sleep 0.05; done"
    command = f'echo "shell:$$"; sh -c "{survivor}" & echo "pid:$!"; wait'
    tool = create_bash_tool(cwd=str(tmp_path), update_interval=0.0, kill_grace=30.0)
    seen: List[str] = []
    pipes: List[str] = []  # the shell's output pipe ("pipe:[inode]"), noted while the shell runs

    def on_update(partial: Any) -> None:
        seen.append(partial.content[0].text)
        found = re.findall(r"shell:(\d+)", "".join(seen))
        if found and not pipes:
            pipes.append(os.readlink(f"/proc/{found[0]}/fd/1"))

    def interrupt_once_terminated() -> None:  # the grace has begun once the survivor saw SIGTERM
        deadline = time.monotonic() + 10
        while not termed.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        _thread.interrupt_main()

    interrupter = threading.Thread(target=interrupt_once_terminated)
    interrupter.start()
    try:
        with pytest.raises(KeyboardInterrupt) as info:  # holds the frames, as a kernel's last traceback does
            tool.execute("c1", {"command": command, "timeout": 0.5}, None, on_update)
    finally:
        interrupter.join()
    assert info.traceback
    output = "".join(seen)
    pids = _pids(output)
    try:
        assert termed.exists() and len(pids) == 1
        assert wait_dead(pids) == [], "the command outlived the interrupted kill"
        shell = int(re.findall(r"shell:(\d+)", output)[0])
        assert not os.path.exists(f"/proc/{shell}"), "the interrupted shell was left unreaped (a zombie)"
        assert pipes and pipes[0].startswith("pipe:")
        ours = {os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd") if _link(fd)}
        assert pipes[0] not in ours, "the shell's output pipe was left open"
    finally:
        _cleanup(pids)


def _link(fd: str) -> bool:
    """Whether /proc/self/fd/``fd`` is still there to be read (a descriptor closed meanwhile is not)."""
    try:
        os.readlink(f"/proc/self/fd/{fd}")
        return True
    except OSError:
        return False


def test_a_command_longer_than_linux_takes_as_one_argument_still_runs(tmp_path):
    """A 150 KB heredoc failed with "[Errno 7] Argument list too long: '/usr/bin/bash'": Linux
    takes at most 128 KB in one argument. It is now sourced from a temp file, removed afterwards."""
    body = ("x" * 99 + "\n") * 1500
    command = f"cat > big.txt <<'EOF'\n{body}EOF\nwc -c < big.txt; exit 3"
    tool = create_bash_tool(cwd=str(tmp_path))
    before = set(Path(tempfile.gettempdir()).glob("agentcore-bash-*.sh"))
    with pytest.raises(BashError) as info:
        tool.execute("c1", {"command": command}, None, None)
    assert info.value.exit_code == 3 and info.value.output == str(len(body))  # exit ends the script too
    assert (tmp_path / "big.txt").read_text() == body
    assert set(Path(tempfile.gettempdir()).glob("agentcore-bash-*.sh")) == before


@pytest.mark.parametrize(
    "command, named",
    [
        ("echo one\necho a\0b", r"^command contains a NUL character \(line 2\)"),
        ("echo \ud83d", r"^command holds an unpaired UTF-16 surrogate '\\ud83d' \(line 1\)"),
    ],
)
def test_a_command_no_shell_can_take_is_refused_saying_why(tmp_path, command, named):
    # "embedded null byte" and a bare UnicodeEncodeError from inside subprocess, before
    tool = create_bash_tool(cwd=str(tmp_path))
    with pytest.raises(ValueError, match=named):
        tool.execute("c1", {"command": command}, None, None)

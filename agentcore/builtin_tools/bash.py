"""The ``bash`` tool: run a shell command, stream its output, stop it on timeout or abort.

Behaviour (and failure semantics, since a tool reports failure by raising):

* The command runs as ``<shell> -c <command>`` in the tool's working directory, in a new process
  group, with stdin closed and stderr merged into stdout. A command over 100 KB (a big heredoc),
  longer than Linux accepts as one argument, is written to a private temporary file that the
  shell sources (``. file``), removed once the shell has ended. A command holding a NUL
  character or a lone UTF-16 surrogate raises ``ValueError`` saying so.
* Output streams through ``on_update`` as partial results (the output so far, tail-truncated),
  at most once per ``update_interval`` seconds, plus a final flush.
* The result keeps the last ``max_lines`` lines / ``max_bytes`` bytes. When output is cut, all of it
  is saved to a temp file; its path is in the text notice and in ``details["fullOutputPath"]``.
  ``details`` also holds ``exitCode`` and, when cut, ``truncation`` (reference camelCase keys).
* A non-zero exit code raises :class:`BashError` (so the loop records an error result whose text
  is the output followed by ``Command exited with code N``), like the reference tool. Pass
  ``raise_on_error=False`` to get a normal result with the code in ``details["exitCode"]`` instead.
* Timeout (the ``timeout`` argument in seconds, else the tool's default; 0 disables it) and abort
  kill the whole process group (SIGTERM, then SIGKILL after ``kill_grace`` seconds, or as soon as
  every process of the group is gone, on Linux; SIGKILL is sent even when that wait is interrupted)
  and raise :class:`BashError` ending in ``Command timed out after N seconds`` or
  ``Command aborted`` (also when the abort's SIGTERM is what ended the shell). Background jobs of a
  command that finished normally are left running.
* ``env`` must map strings to strings the OS accepts (no ``=`` in a name, no NUL byte); otherwise
  TypeError or ValueError names the variable, never its value.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal as _sig
import tempfile
import threading
import time
from typing import IO, Any, Callable, Dict, Mapping, Optional, Tuple

from .._errors import PicklableError
from ..tools import AgentTool, AgentToolResult
from ..types import TextContent
from ._args import utf8
from ._process import ShellProcess
from ._truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, Truncation, format_size, truncate_tail

__all__ = ["BashError", "create_bash_tool", "DEFAULT_TIMEOUT"]

DEFAULT_TIMEOUT = 180.0


class BashError(PicklableError, RuntimeError):
    """A command failed: ``reason`` is ``"exit"``, ``"timeout"`` or ``"aborted"``.

    ``str(error)`` is what the model sees (output, then the status line); ``exit_code`` (None when
    killed by the tool), ``output`` and ``details`` (same shape as a successful result's) are for
    programs.
    """

    def __init__(
        self, message: str, reason: str, exit_code: Optional[int], output: str, details: Dict[str, Any]
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.exit_code = exit_code
        self.output = output
        self.details = details


class _Output:
    """Accumulates output bytes with bounded memory; spills everything to a temp file once the
    output is larger than the limits."""

    def __init__(self, max_lines: int, max_bytes: int) -> None:
        self.max_lines = max_lines
        self.max_bytes = max_bytes
        self._tail = bytearray()
        self._keep = max_bytes + 8  # a little more than shown, so a cut first line is detectable
        self.total_bytes = 0
        self._newlines = 0
        self._ends_with_newline = False
        self._file: Optional[IO[bytes]] = None
        self.path: Optional[str] = None
        self._cut_mid_line = False  # the tail was trimmed inside a line: its first line is a fragment

    def _lines(self) -> int:
        """Lines so far, counted as ``truncate_tail`` counts them: an unterminated last line counts."""
        return self._newlines + (0 if self._ends_with_newline or not self.total_bytes else 1)

    def _spill(self) -> IO[bytes]:
        fd, self.path = tempfile.mkstemp(prefix="agentcore-bash-", suffix=".log")
        self._file = os.fdopen(fd, "wb")
        self._file.write(bytes(self._tail))  # not trimmed yet: this is all output so far
        return self._file

    def append(self, chunk: bytes) -> None:
        self.total_bytes += len(chunk)
        self._newlines += chunk.count(b"\n")
        self._ends_with_newline = chunk.endswith(b"\n")
        self._tail += chunk
        if self._file is not None:
            self._file.write(chunk)
        elif self.total_bytes > self.max_bytes or self._lines() > self.max_lines:
            self._spill()
        if self._file is not None and len(self._tail) > 4 * self._keep:
            drop = len(self._tail) - self._keep
            self._cut_mid_line = self._tail[drop - 1] != 10  # 10: b"\n"
            del self._tail[:drop]

    def snapshot(self) -> Tuple[Truncation, Optional[str]]:
        """The tail-truncated text so far, and the full-output file path (None when not cut)."""
        if self._file is not None:
            self._file.flush()
        tail = bytes(self._tail)
        if self._cut_mid_line:
            # never show the fragment: \r\n -> \n can make it fit the byte budget (a lone huge
            # last line, with no other line break, is still shown as its partial end)
            newline = tail.find(b"\n", 0, len(tail) - 1)
            if newline >= 0:
                tail = tail[newline + 1 :]
        text = tail.decode("utf-8", "replace").replace("\r\n", "\n")
        cut = truncate_tail(text, self.max_lines, self.max_bytes)
        if cut.truncated and self._file is None:  # e.g. invalid UTF-8 grew when decoded: save it all
            self._spill().flush()
        if self._file is not None:
            cut.truncated = True
            cut.truncated_by = cut.truncated_by or "bytes"
            cut.total_bytes = self.total_bytes
            cut.total_lines = self._lines()
        return cut, self.path

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def _render(cut: Truncation, path: Optional[str]) -> Tuple[str, Dict[str, Any]]:
    text = cut.content.rstrip("\n")
    details: Dict[str, Any] = {}
    if cut.truncated:
        details = {"truncation": cut.to_dict(), "fullOutputPath": path}
        start, end = cut.total_lines - cut.output_lines + 1, cut.total_lines
        if cut.last_line_partial:
            notice = f"[Showing last {format_size(cut.output_bytes)} of line {end}. Full output: {path}]"
        elif cut.truncated_by == "lines":
            notice = f"[Showing lines {start}-{end} of {cut.total_lines}. Full output: {path}]"
        else:
            notice = (
                f"[Showing lines {start}-{end} of {cut.total_lines} ({format_size(cut.max_bytes)} limit). "
                f"Full output: {path}]"
            )
        text = f"{text}\n\n{notice}" if text else notice
    return text, details


def _with_status(text: str, status: str) -> str:
    return f"{text}\n\n{status}" if text else status


def _default_shell() -> str:
    found = shutil.which("bash")
    if found:
        return found
    if os.name == "posix" and os.path.exists("/bin/sh"):
        return "/bin/sh"
    raise FileNotFoundError("no bash found on PATH; install bash or pass shell= to create_bash_tool()")


#: Bytes of a command passed as ``-c`` text. Linux refuses a longer single argument (128 KB,
#: ``MAX_ARG_STRLEN``: "Argument list too long"); a longer command (a big heredoc) is sourced from a
#: temporary file instead.
_ARG_BYTES = 100 * 1024


def _command_bytes(command: str) -> bytes:
    """``command`` as the OS gets it (as ``subprocess`` encodes it); ``ValueError`` naming the
    problem for a NUL character or a lone UTF-16 surrogate, which no command line can hold."""
    if "\0" in command:
        line = command.count("\n", 0, command.index("\0")) + 1
        raise ValueError(
            f"command contains a NUL character (line {line}), which a shell command cannot hold; "
            "to output one, write printf '\\0'"
        )
    return utf8(command, "command", encode=os.fsencode)  # as subprocess encodes it


def _script_file(data: bytes) -> str:
    """A private temporary file holding ``data``; the caller removes it."""
    fd, path = tempfile.mkstemp(prefix="agentcore-bash-", suffix=".sh")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    except BaseException:
        os.unlink(path)
        raise
    return path


def _timeout_of(args: Mapping[str, Any], default: Optional[float]) -> Optional[float]:
    value = args.get("timeout")
    if value is None:
        return default if default else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value < 0:
        raise ValueError(f"invalid timeout {value!r}: pass a number of seconds, or 0 for no timeout")
    return float(value) or None


def _env_error(env: Mapping[str, str]) -> Optional[Exception]:
    """Why ``env`` cannot be a process environment, naming the variable and never its value (it
    may be a key); None when it can."""
    for key, value in env.items():
        if not isinstance(key, str):
            return TypeError(f"env: a variable name is {type(key).__name__}, not str: pass names as strings")
        if not key:
            return ValueError("env: a variable name is empty")
        if "=" in key or "\0" in key:
            shown = key.partition("=")[0].partition("\0")[0]  # "NAME=value" given as a name: show NAME
            return ValueError(f"env: the variable name starting {shown!r} contains '=' or a NUL byte")
        if not isinstance(value, str):
            return TypeError(f"env[{key!r}] is {type(value).__name__}, not str: pass values as strings")
        if "\0" in value:
            return ValueError(f"env[{key!r}]: the value contains a NUL byte, which no environment can hold")
    return None


def create_bash_tool(
    cwd: Optional[str] = None,
    *,
    timeout: Optional[float] = DEFAULT_TIMEOUT,
    shell: Optional[str] = None,
    env: Optional[Mapping[str, str]] = None,
    max_lines: int = DEFAULT_MAX_LINES,
    max_bytes: int = DEFAULT_MAX_BYTES,
    update_interval: float = 0.1,
    kill_grace: float = 0.3,
    raise_on_error: bool = True,
    name: str = "bash",
) -> AgentTool:
    """A ``bash`` tool running in ``cwd`` (the process's current directory at call time when None).

    ``timeout`` is the default limit in seconds (None or 0: none); ``env`` adds to ``os.environ``
    (string names and values; anything else raises TypeError or ValueError naming the variable,
    never showing its value, here and when a later change of the mapping reaches a call);
    ``shell`` defaults to ``bash`` on PATH, else ``/bin/sh``. See the module docstring for output,
    truncation and error behaviour.
    """
    problem = None if env is None else _env_error(env)
    if problem is not None:
        raise problem
    fixed_cwd = None if cwd is None else os.path.abspath(os.path.expanduser(os.fspath(cwd)))

    def execute(
        tool_call_id: str,
        args: Mapping[str, Any],
        signal: Any = None,
        on_update: Optional[Callable[[AgentToolResult], None]] = None,
    ) -> AgentToolResult:
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ValueError("command is empty: pass the shell command to run")
        limit = _timeout_of(args, timeout)
        if signal is not None and signal.aborted:
            raise BashError("Command aborted", "aborted", None, "", {})
        workdir = fixed_cwd if fixed_cwd is not None else os.getcwd()
        full_env = dict(os.environ)
        if env:
            problem = _env_error(env)
            if problem is not None:
                raise problem
            full_env.update(env)
        data = _command_bytes(command)
        script = _script_file(data) if len(data) > _ARG_BYTES and os.name == "posix" else None
        try:
            text = command if script is None else f". {shlex.quote(script)}"  # "." keeps $0 and exit
            process = ShellProcess([shell or _default_shell(), "-c", text], workdir, full_env)
            return _run(process, limit, signal, on_update)
        finally:
            if script is not None:  # the shell was reaped: nothing reads it any more
                os.unlink(script)

    def _run(
        process: ShellProcess,
        limit: Optional[float],
        signal: Any,
        on_update: Optional[Callable[[AgentToolResult], None]],
    ) -> AgentToolResult:
        output = _Output(max_lines, max_bytes)
        stop = threading.Event()

        def on_abort(_reason: Any) -> None:
            stop.set()
            process.signal_group(_sig.SIGTERM)  # SIGTERM at once; the run thread finishes the kill

        if signal is not None:
            signal.add_listener(on_abort)
        code: Optional[int] = None
        try:
            try:
                outcome = _pump(process, output, limit, stop, signal, on_update)
            except BaseException:  # on_update raised (or an interrupt): never leave the command running
                process.kill_group(kill_grace)
                raise
            if outcome is not None:
                process.kill_group(kill_grace)
            _drain(process, output)
            code = process.reap()
            return _finish(output, code, outcome, limit)
        finally:
            try:
                if code is None:  # an error or an interrupt (also one ending the kill's grace, after
                    process.reap()  # SIGKILL was sent): the shell is reaped, its pipe closed all the same
            finally:
                if signal is not None:
                    signal.remove_listener(on_abort)
                output.close()

    def _pump(
        process: ShellProcess,
        output: _Output,
        limit: Optional[float],
        stop: threading.Event,
        signal: Any,
        on_update: Optional[Callable[[AgentToolResult], None]],
    ) -> Optional[str]:
        deadline = None if limit is None else time.monotonic() + limit
        last_update = 0.0
        dirty = False
        pause = 0.001
        while True:
            chunk = process.read(0.05)
            if chunk:
                output.append(chunk)
                dirty = True
            elif chunk is None:  # output closed; the shell is usually exiting: poll soon, then less often
                stop.wait(pause)
                pause = min(pause * 2, 0.05)
            if dirty and on_update is not None and time.monotonic() - last_update >= update_interval:
                _emit(output, on_update)
                last_update, dirty = time.monotonic(), False
            # Whether the shell exited is asked before the abort flag: an abort landing between
            # the two would otherwise make its own SIGTERM look like the command's plain death.
            exited = process.exited()
            if stop.is_set() or (signal is not None and signal.aborted):  # the flag too: a listener
                return "aborted"  # can be skipped (a Ctrl+C while the abort called the others)
            if deadline is not None and time.monotonic() >= deadline:
                return "timeout"
            if exited:
                if dirty and on_update is not None:
                    _emit(output, on_update)
                return None

    def _drain(process: ShellProcess, output: _Output) -> None:
        # Read what the shell wrote before exiting; stop at the first quiet moment, because a
        # background job may keep the pipe open for as long as it likes.
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            chunk = process.read(0.05)
            if not chunk:
                return
            output.append(chunk)

    def _finish(output: _Output, code: int, outcome: Optional[str], limit: Optional[float]) -> AgentToolResult:
        cut, path = output.snapshot()
        text, details = _render(cut, path)
        details["exitCode"] = None if outcome else code
        if outcome == "aborted":
            raise BashError(_with_status(text, "Command aborted"), "aborted", None, text, details)
        if outcome == "timeout":
            raise BashError(
                _with_status(text, f"Command timed out after {limit:g} seconds"), "timeout", None, text, details
            )
        if code != 0 and raise_on_error:
            status = f"Command was killed by signal {-code}" if code < 0 else f"Command exited with code {code}"
            raise BashError(_with_status(text, status), "exit", code, text, details)
        return AgentToolResult(content=[TextContent(text or "(no output)")], details=details)

    return AgentTool(
        name=name,
        label=name,
        description=(
            f"Execute a bash command in the current working directory. Returns stdout and stderr. "
            f"Output is truncated to the last {max_lines} lines or {max_bytes // 1024}KB (whichever is hit "
            f"first); if truncated, the full output is saved to a temp file whose path is given. "
            + (f"Timeout defaults to {timeout:g} seconds; " if timeout else "No timeout by default; ")
            + "pass timeout in seconds for another limit, or 0 for none."
        ),
        parameters={
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "Bash command to execute"},
                "timeout": {"type": "number", "description": "Timeout in seconds (0: no timeout)"},
            },
            "required": ["command"],
        },
        execute=execute,
    )


def _emit(output: _Output, on_update: Callable[[AgentToolResult], None]) -> None:
    cut, path = output.snapshot()
    text, details = _render(cut, path)
    on_update(AgentToolResult(content=[TextContent(text)], details=details or None))

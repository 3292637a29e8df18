"""The ``bash`` and ``abort_bash`` commands of ``agentcore rpc``: a shell command the user runs
(not a tool call), whose output joins the transcript as a ``bashExecution`` message.

The command runs in its own process group (``abort_bash`` and the server's shutdown kill the
group); its output is read in chunks as it comes. Past :data:`BASH_OUTPUT_LIMIT` characters only
the tail is kept (in memory and in the message) while the whole output, its bytes as the command
wrote them, goes to a temporary file: a command that prints without end (``yes``, a huge file)
costs disk, not the server's memory. When reading fails (the temporary file cannot be written)
the command's process group is killed and ``bash`` answers with the error.
"""

from __future__ import annotations

import codecs
import os
import signal
import subprocess
import tempfile
from typing import Any, Dict, Optional, Tuple

from ._rpc import SHUTDOWN_WAIT, RpcError, RpcServer

__all__ = ["BASH_OUTPUT_LIMIT", "cmd_bash", "cmd_abort_bash", "flush_bash", "stop_bash"]

#: ``bash`` output kept in the message (the tail); the whole output goes to a temporary file.
BASH_OUTPUT_LIMIT = 50_000
#: ``server.bash`` while the shell's process is being created
_STARTING: Any = object()


def cmd_bash(server: RpcServer, command: Dict[str, Any]) -> Any:
    """Run a shell command (not a tool call); its BashExecutionMessage joins the transcript (now,
    or before the next prompt when a run is active), so the model sees it with the next prompt."""
    from ..types import BashExecutionMessage

    with server.bash_lock:
        if server.bash is not None:
            raise RpcError('bash: a command is running already; wait for its response or send {"type": "abort_bash"}')
        server.bash = _STARTING
        server.bash_cancelled = False
    try:
        process = subprocess.Popen(
            command["command"],
            shell=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # abort_bash kills the whole process group
        )
        with server.bash_lock:
            server.bash = process
        if server.bash_cancelled:  # abort_bash arrived while the process was being started
            stop_bash(server)
        stdout: Any = process.stdout
        try:
            text, full_path = _read_output(stdout)
        except BaseException:  # nobody reads the pipe any more: the command must not block on it
            _kill(process)
            raise
        finally:
            stdout.close()
            process.wait()
    finally:
        with server.bash_lock:  # read together: once bash is None, a next bash resets the flag
            server.bash = None
            cancelled = server.bash_cancelled
    truncated = full_path is not None
    message = BashExecutionMessage(
        command=command["command"],
        output=text,
        exit_code=None if cancelled else process.returncode,
        cancelled=cancelled,
        truncated=truncated,
        full_output_path=full_path,
    )
    server.pending_bash.append(message)
    if not server.running and server.busy_with is None and server.agent.wait_for_idle(SHUTDOWN_WAIT):
        flush_bash(server)
    data = {"output": text, "exitCode": message.exit_code, "cancelled": cancelled, "truncated": truncated}
    if full_path is not None:
        data["fullOutputPath"] = full_path
    return data


def _read_output(stream: Any) -> Tuple[str, Optional[str]]:
    """Read ``stream`` to its end: its text (decoded as UTF-8, bad bytes replaced), or its last
    :data:`BASH_OUTPUT_LIMIT` characters and the temporary file holding all its bytes when it is
    longer. Memory stays bounded: the bytes are kept only while the text fits."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    kept = bytearray()  # every byte so far, while the text fits the limit
    tail = ""  # the text's last BASH_OUTPUT_LIMIT characters
    length = 0
    spill: Any = None  # the temporary file, once the text is past the limit
    try:
        while True:
            chunk = stream.read1(1 << 16)
            text = decoder.decode(chunk, final=not chunk)
            length += len(text)
            tail = (tail + text)[-BASH_OUTPUT_LIMIT:]
            if spill is None:
                kept += chunk
                if length > BASH_OUTPUT_LIMIT:
                    # its bytes: a text file in the locale's encoding may not hold the decoded text
                    spill = tempfile.NamedTemporaryFile("wb", prefix="agentcore-bash-", suffix=".log", delete=False)
                    spill.write(kept)
                    kept = bytearray()
            elif chunk:
                spill.write(chunk)
            if not chunk:
                break
    finally:
        if spill is not None:
            spill.close()
    return tail, spill.name if spill is not None else None


def _kill(process: Any) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def flush_bash(server: RpcServer) -> None:
    """Add the waiting bash results to the transcript (and the session), oldest first. Two
    commands finishing together (two flushes at once) add each result exactly once."""
    with server.bash_flush_lock:
        while server.pending_bash:
            message = server.pending_bash.pop(0)
            server.agent.messages = list(server.agent.messages) + [message]
            if server.session is not None:
                server.session.append_message(message)


def stop_bash(server: RpcServer) -> None:
    """Kill the running ``bash`` command's process group (no-op when none runs; one being
    started is killed as soon as it exists)."""
    with server.bash_lock:
        process = server.bash
        if process is None:
            return
        server.bash_cancelled = True
    if process is _STARTING:
        return
    _kill(process)


def cmd_abort_bash(server: RpcServer, command: Dict[str, Any]) -> Any:
    stop_bash(server)

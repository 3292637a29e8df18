"""The ``bash`` and ``abort_bash`` commands of ``agentcore rpc``: a shell command the user runs
(not a tool call), whose output joins the transcript as a ``bashExecution`` message.

The command runs in its own process group (``abort_bash`` and the server's shutdown kill the
group); its output is read whole, and past :data:`BASH_OUTPUT_LIMIT` characters only the tail is
kept in the message while the whole output, its bytes as the command wrote them, goes to a
temporary file.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from typing import Any, Dict

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
        output, _ = process.communicate()
    finally:
        with server.bash_lock:  # read together: once bash is None, a next bash resets the flag
            server.bash = None
            cancelled = server.bash_cancelled
    text = output.decode("utf-8", "replace")
    truncated = len(text) > BASH_OUTPUT_LIMIT
    full_path = None
    if truncated:  # its bytes: a text file in the locale's encoding may not hold the decoded text
        with tempfile.NamedTemporaryFile("wb", prefix="agentcore-bash-", suffix=".log", delete=False) as handle:
            full_path = handle.name
            handle.write(output)
        text = text[-BASH_OUTPUT_LIMIT:]
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
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def cmd_abort_bash(server: RpcServer, command: Dict[str, Any]) -> Any:
    stop_bash(server)

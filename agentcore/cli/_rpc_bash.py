"""The ``bash`` and ``abort_bash`` commands of ``agentcore rpc``: a shell command the user runs
(not a tool call), whose output joins the transcript as a ``bashExecution`` message.

The command runs in its own process group (``abort_bash`` and the server's shutdown kill the
group); its output is read in chunks as it comes. Past :data:`BASH_OUTPUT_LIMIT` characters only
the tail is kept (in memory and in the message) while the whole output, its bytes as the command
wrote them, goes to a temporary file: a command that prints without end (``yes``, a huge file)
costs disk, not the server's memory. The command is done when the shell has exited and what it
left in the pipe is read: a background process it started (``server &``, a daemon in a session of
its own) may keep writing, and that is read and dropped, not waited for. When reading fails (the temporary file cannot be written)
the command's process group is killed and ``bash`` answers with the error.
"""

from __future__ import annotations

import codecs
import os
import select
import signal
import subprocess
import tempfile
import threading
from typing import Any, Dict, Iterator, Optional, Tuple

from ._rpc import SHUTDOWN_WAIT, RpcError, RpcServer

__all__ = ["BASH_OUTPUT_LIMIT", "cmd_bash", "cmd_abort_bash", "flush_bash", "release_session", "stop_bash"]

#: ``bash`` output kept in the message (the tail); the whole output goes to a temporary file.
BASH_OUTPUT_LIMIT = 50_000
#: Seconds between looks at whether the shell has exited while its output pipe is quiet (a
#: background process it started may keep the pipe open after it).
_EXIT_POLL = 0.2
#: The most bytes read once the shell has exited (what it left in the pipe is at most the pipe's
#: capacity, 64 KiB by default; more comes from a background process writing on).
_AFTER_EXIT = 1 << 20
#: ``server.bash`` while the shell's process is being created
_STARTING: Any = object()


def cmd_bash(server: RpcServer, command: Dict[str, Any]) -> Any:
    """Run a shell command (not a tool call); its BashExecutionMessage joins the transcript (now,
    or before the next prompt when a run is active), so the model sees it with the next prompt.
    It joins the session it ran in: after a session move made while it ran (new_session,
    switch_session, fork, clone) it is recorded in the session left, which the move keeps open
    until then, never in the new one."""
    with server.bash_lock:
        if server.bash is not None:
            raise RpcError('bash: a command is running already; wait for its response or send {"type": "abort_bash"}')
        server.bash = _STARTING
        server.bash_cancelled = False
    with server.bash_flush_lock:  # a session move is not half done: this is the session it ran in
        origin = server.setup
        server.bash_origins.append(origin)
    try:
        return _run_bash(server, command, origin)
    finally:
        with server.bash_flush_lock:  # decided with the move's own look (release_session)
            server.bash_origins.remove(origin)
            left = origin is not server.setup and not any(o is origin for o in server.bash_origins)
        if left:
            _close_left(server, origin)


def _run_bash(server: RpcServer, command: Dict[str, Any], origin: Any) -> Any:
    from ..types import BashExecutionMessage

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
            text, full_path = _read_output(stdout, process)
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
    with server.bash_flush_lock:
        moved = origin is not server.setup
        if not moved:
            server.pending_bash.append(message)
    if moved:  # a session move came while it ran: it joins the session it ran in, not the new one
        _record_left(server, origin, message)
    elif not server.running and server.busy_with is None and server.agent.wait_for_idle(SHUTDOWN_WAIT):
        flush_bash(server)
    data = {"output": text, "exitCode": message.exit_code, "cancelled": cancelled, "truncated": truncated}
    if full_path is not None:
        data["fullOutputPath"] = full_path
    return data


def _record_left(server: RpcServer, origin: Any, message: Any) -> None:
    """Record ``message`` in ``origin``'s session, which a session move left while the command
    ran (the move kept it open for this); a failure is a note on stderr."""
    session = origin.session
    if session is None:
        return
    try:
        session.append_message(message)
    except Exception as exc:  # noqa: BLE001 - the client has the output; say why the session has not
        server.note(f"bash: the result of {message.command!r:.80} was not recorded in its session: {exc}")


def release_session(server: RpcServer, old: Any, session: Any) -> None:
    """A session move attached a new setup (on ``session``), leaving ``old``: close its session,
    unless a ``bash`` command that started in it still runs (it records its result there and
    closes it then). Call with ``server.bash_flush_lock`` held, the attach done under it."""
    if old.session is None or old.session is session:
        return
    if any(o is old for o in server.bash_origins):
        return
    server.close_session(old.session)


def _close_left(server: RpcServer, origin: Any) -> None:
    """Close the session a move left while a ``bash`` command ran in it (the move did not)."""
    if origin.session is None:
        return
    try:
        server.close_session(origin.session)
    except Exception as exc:  # noqa: BLE001
        server.note(f"closing the session: {exc}")


def _output_chunks(stream: Any, process: Any) -> Iterator[bytes]:
    """The bytes of the command's output pipe ``stream`` as they come, until its end or, once the
    shell ``process`` has exited, until what it left in the pipe has been read: a background
    process it started (``server &``, a daemon in a session of its own that ``abort_bash`` does
    not reach) may hold the pipe open for ever. The rest of the output is then read and dropped
    by a thread of its own (the background process is not stopped by a broken pipe)."""
    fd = stream.fileno()
    poller = select.poll()  # not select(): the pipe's descriptor may be past FD_SETSIZE
    poller.register(fd, select.POLLIN)
    after_exit = 0  # bytes read since the shell was seen to have exited
    while True:
        exited = process.poll() is not None
        ready = poller.poll(0 if exited else int(_EXIT_POLL * 1000))  # POLLHUP too: the end of the pipe
        if ready and after_exit <= _AFTER_EXIT:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return
            if exited:
                after_exit += len(chunk)
            yield chunk
        elif exited:
            _drain(fd)
            return


def _drain(fd: int) -> None:
    """Read and drop what a background process of the command still writes to its pipe."""
    copy = os.dup(fd)

    def drain() -> None:
        try:
            while os.read(copy, 1 << 16):
                pass
        except OSError:
            pass
        finally:
            os.close(copy)

    threading.Thread(target=drain, name="rpc-bash-drain", daemon=True).start()


def _read_output(stream: Any, process: Any) -> Tuple[str, Optional[str]]:
    """Read the command's output (:func:`_output_chunks`): its text (decoded as UTF-8, bad bytes
    replaced), or its last :data:`BASH_OUTPUT_LIMIT` characters and the temporary file holding
    all its bytes when it is longer. Memory stays bounded: the bytes are kept only while the
    text fits."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    kept = bytearray()  # every byte so far, while the text fits the limit
    tail = ""  # the text's last BASH_OUTPUT_LIMIT characters
    length = 0
    spill: Any = None  # the temporary file, once the text is past the limit
    chunks = _output_chunks(stream, process)
    try:
        while True:
            chunk = next(chunks, b"")
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

"""The stdio transport: a server subprocess in its own process group, JSON-RPC lines on its pipes.

Written here rather than taken from the SDK's ``stdio_client`` because the plugin needs three
things that one hides: the process id (to kill the whole process group on close, even when the
leader exited and left children behind), the exit code (to say "exited with code 3" when a call
fails) and the tail of stderr (to say why). Shutdown follows the MCP lifecycle: close stdin, wait
``grace`` seconds, SIGTERM the group, wait, SIGKILL the group; every wait is bounded.

That shutdown needs this process alive. For when it is not (SIGKILL, the OOM killer, a Jupyter
kernel restarted by force, ``os._exit``), each server gets a *lifeline* (POSIX): a ``/bin/sh``
watchdog in a session of its own that reads a pipe only this process writes to. The kernel closes
the pipe when this process ends, however it ends; the watchdog then does what :func:`_stop` would
have done: waits the grace period (the server saw stdin close at the same moment), SIGTERMs the
group, waits, SIGKILLs it. A server that ignores stdin EOF, or children it left in its group, so
never outlive the agent. On a normal close the watchdog is killed first and never signals. A
child made with ``fork`` (a process pool, say) closes its inherited copies of the pipes at once, so
it neither keeps a lifeline alive nor can cut one.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import os
import re
import signal
import subprocess
import weakref
from contextlib import asynccontextmanager, suppress
from typing import Any, AsyncIterator, Deque, Dict, List, Optional, Sequence, Tuple

import anyio
import mcp_types
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from ._secrets import Secrets

_log = logging.getLogger("agentcore_mcp.stdio")

GRACE_SECONDS = 2.0  # for the server to exit on its own once stdin is closed
TERM_SECONDS = 2.0  # after SIGTERM to the group, before SIGKILL
_POLL = 0.01
#: The longest message a server may send (one line of JSON): a server writing without end (a bug,
#: a binary dumped to stdout) would otherwise grow memory until the process is killed. Past it the
#: connection is closed and the call fails saying so; the server is restarted on the next call.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
#: The longest stderr line kept whole: a server writing stderr without line breaks (a progress bar
#: redrawn with ``\r``, a binary) has each piece this long taken as a line of its own, so memory
#: and the work per read stay bounded.
MAX_STDERR_LINE = 8192


class ProcessState:
    """What the connection knows about its server process (read from any thread)."""

    def __init__(self, label: str, secrets: Secrets) -> None:
        self.label = label
        self.secrets = secrets
        self.pid: Optional[int] = None
        self.process: Any = None
        self.stdout_closed = False
        self.refused: Optional[str] = None  # why the reader stopped reading the server (too large)
        self.stderr_tail: Deque[str] = collections.deque(maxlen=20)

    @property
    def returncode(self) -> Optional[int]:
        return None if self.process is None else self.process.returncode

    @property
    def alive(self) -> bool:
        """False once the process exited, even before the event loop reaped it: a server killed
        while idle must be restarted before the next call, not found dead by that call."""
        if self.process is None or self.returncode is not None or self.stdout_closed:
            return False
        return self.pid is None or not exited(self.pid)

    def stderr_text(self) -> str:
        """The last lines the server wrote to stderr, redacted (empty when it wrote none)."""
        return self.secrets.redact(" | ".join(line for line in self.stderr_tail if line.strip()))[-1000:]

    def add_stderr(self, line: str) -> None:
        self.stderr_tail.append(line)
        _log.debug("%s stderr: %s", self.label, self.secrets.redact(line))

    async def wait_exit(self, timeout: float) -> Optional[int]:
        """The exit code once the process was reaped, waiting at most ``timeout`` seconds."""
        with anyio.move_on_after(timeout):
            while self.process is not None and self.process.returncode is None:
                await anyio.sleep(_POLL)
        return self.returncode


def exited(pid: int) -> bool:
    """True when child ``pid`` has exited, without reaping it (``WNOWAIT``: the event loop's child
    watcher still collects its exit code). False where ``os.waitid`` does not exist."""
    waitid = getattr(os, "waitid", None)
    if waitid is None:
        return False
    try:
        return waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:  # already reaped: gone
        return True
    except OSError:
        return False


def group_alive(pgid: int) -> bool:
    """True while any process of group ``pgid`` exists (signal 0; only ESRCH proves it gone)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_group(pgid: Optional[int], sig: int = signal.SIGKILL) -> None:
    """Signal every process of group ``pgid``; nothing when it is gone."""
    if pgid is None:
        return
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


# $1 the process group, $2 and $3 the waits; `read` returns at EOF: the writer, this process, ended
# or closed it. A group already gone ends the watchdog before anything could signal a reused id.
_LIFELINE_SCRIPT = (
    'read -r _; sleep "$2"; kill -s TERM -- "-$1" 2>/dev/null || exit 0; sleep "$3"; kill -s KILL -- "-$1" 2>/dev/null'
)


class Lifeline:
    """The watchdog of one server's process group (see the module docstring)."""

    _live: weakref.WeakSet[Lifeline] = weakref.WeakSet()

    def __init__(self, pgid: int) -> None:
        read_end, self._write_end = os.pipe()  # not inherited by any other child (O_CLOEXEC)
        try:
            self._watchdog: Optional[subprocess.Popen[bytes]] = subprocess.Popen(
                [
                    "/bin/sh",
                    "-c",
                    _LIFELINE_SCRIPT,
                    "agentcore-mcp-lifeline",
                    str(pgid),
                    f"{GRACE_SECONDS:g}",
                    f"{TERM_SECONDS:g}",
                ],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl+C in the terminal does not end it
            )
        except BaseException:
            os.close(self._write_end)
            raise
        finally:
            os.close(read_end)
        Lifeline._live.add(self)

    def cut(self) -> None:
        """End the watchdog without it signalling anything, then close the pipe. Idempotent."""
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is None:
            return
        with suppress(OSError):
            watchdog.kill()
        with suppress(OSError, subprocess.TimeoutExpired):
            watchdog.wait(5)
        os.close(self._write_end)

    def _forget_in_child(self) -> None:
        """In a forked child: close the inherited pipe, leave the parent's watchdog alone."""
        if self._watchdog is not None:
            self._watchdog = None
            with suppress(OSError):
                os.close(self._write_end)


def _forget_lifelines_in_child() -> None:
    for lifeline in list(Lifeline._live):
        lifeline._forget_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_lifelines_in_child)


def start_lifeline(pgid: int, label: str) -> Optional[Lifeline]:
    """A :class:`Lifeline` for group ``pgid``, or None where there is none (not POSIX, or no
    ``/bin/sh`` could be started: logged as a warning naming server ``label``; the server still
    runs)."""
    if os.name != "posix":
        return None
    try:
        return Lifeline(pgid)
    except (OSError, subprocess.SubprocessError) as exc:
        _log.warning(
            "MCP server %r: no lifeline watchdog (%s); if this process is killed, the server may outlive it", label, exc
        )
        return None


def _watch_stderr(fd: int, state: ProcessState) -> None:
    """Read the server's stderr pipe from the loop (no thread), line by line into ``state``; a
    line longer than :data:`MAX_STDERR_LINE` bytes is kept as its last ``MAX_STDERR_LINE``."""
    loop = asyncio.get_running_loop()
    os.set_blocking(fd, False)
    pending = [b""]

    def readable() -> None:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            loop.remove_reader(fd)
            os.close(fd)
            if pending[0]:
                state.add_stderr(pending[0].decode("utf-8", "replace"))
            return
        lines = (pending[0] + chunk).split(b"\n")
        pending[0] = lines.pop()
        if len(pending[0]) > MAX_STDERR_LINE:  # never ended: its end stands for it
            lines.append(pending[0][-MAX_STDERR_LINE:])
            pending[0] = b""
        for line in lines:
            state.add_stderr(line.decode("utf-8", "replace").rstrip("\r"))

    loop.add_reader(fd, readable)


@asynccontextmanager
async def stdio_transport(
    command: str, args: Sequence[str], env: Optional[Dict[str, str]], cwd: Optional[str], state: ProcessState
) -> AsyncIterator[Tuple[Any, Any]]:
    """Start the server and yield ``(read_stream, write_stream)`` of ``SessionMessage``s.

    The environment is the SDK's safe default (HOME, PATH, USER, ...) plus ``env``, as desktop MCP
    clients do. Raises ``OSError`` when the command cannot be started.
    """
    full_env = {**get_default_environment(), **(env or {})}
    err_r, err_w = os.pipe()
    try:
        process = await anyio.open_process(
            [command, *args], env=full_env, cwd=cwd, stderr=err_w, start_new_session=True
        )
    except BaseException:
        os.close(err_r)
        raise
    finally:
        os.close(err_w)
    state.process, state.pid = process, process.pid
    _watch_stderr(err_r, state)
    lifeline = start_lifeline(process.pid, state.label)

    read_writer, read_stream = anyio.create_memory_object_stream[Any](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    def too_large() -> None:
        state.refused = f"sent a message larger than {MAX_MESSAGE_BYTES // (1024 * 1024)} MiB"

    async def stdout_reader() -> None:
        pending: List[bytes] = []  # the pieces of a line not yet ended: joined once, at its end
        pending_size = 0
        try:
            async with read_writer:  # leaving it ends the session: the calls fail as on a lost server
                async for chunk in process.stdout:  # type: ignore[union-attr]  # opened with a pipe
                    if b"\n" not in chunk:  # a long message arrives in many chunks: linear, not quadratic
                        pending.append(chunk)
                        pending_size += len(chunk)
                        if pending_size > MAX_MESSAGE_BYTES:
                            return too_large()
                        continue
                    lines = chunk.split(b"\n")
                    pending.append(lines[0])
                    lines[0] = b"".join(pending)
                    if len(lines[0]) > MAX_MESSAGE_BYTES:
                        return too_large()
                    pending = [lines.pop()]
                    pending_size = len(pending[0])
                    for line in lines:
                        if line.strip():
                            await read_writer.send(_parse(line))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError):
            pass
        finally:
            state.stdout_closed = True

    async def stdin_writer() -> None:
        try:
            async with write_reader:
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await process.stdin.send(data.encode("utf-8"))  # type: ignore[union-attr]  # a pipe
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()  # the session then sees the connection end, never a hang

    async with anyio.create_task_group() as tg:
        tg.start_soon(stdout_reader)
        tg.start_soon(stdin_writer)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                try:
                    await _stop(process, state)
                finally:
                    if lifeline is not None:
                        lifeline.cut()
            tg.cancel_scope.cancel()


def _parse(line: bytes) -> Any:
    """One JSON-RPC message; the error answering it when it is a response that cannot be read;
    else the ``ValueError`` the session reports (the connection goes on).

    A lone surrogate escape (``"\\ud800"``, half an emoji a server cut) is refused by the SDK's
    strict JSON reader, and so is a message nested deeper than about 200 levels (a result's
    ``structuredContent`` holding a syntax tree, say): such a message is read with Python's reader
    instead, each lone surrogate becoming U+FFFD. A response even that cannot read (nested
    thousands of levels deep, or not of JSON-RPC's shape: ``"result": []``) becomes a JSON-RPC
    error (code -32700) for its ``id`` saying so: dropped, it left the request it answers waiting
    for its whole timeout."""
    adapter = mcp_types.jsonrpc_message_adapter
    try:
        return SessionMessage(adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        first = exc
    data: Any = None
    try:
        data = json.loads(line)
        if b"\\u" in line:
            data = _without_lone_surrogates(data)
        return SessionMessage(adapter.validate_python(data, by_name=False))
    except RecursionError:
        request_id, why = _response_id(line), "it is nested too deeply to be read"
    except ValueError as exc:
        request_id = data.get("id") if isinstance(data, dict) and "method" not in data else None
        why = f"it is not a valid JSON-RPC response ({_first_problem(exc, data)})"
    if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
        return first
    error = mcp_types.ErrorData(code=mcp_types.PARSE_ERROR, message=f"the server's answer could not be read: {why}")
    return SessionMessage(mcp_types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def _first_problem(exc: ValueError, data: Any) -> str:
    """What is wrong with response ``data``: the first problem its own model (a result's, or an
    error's) finds, as ``"where: what"``; else the first line of ``exc``."""
    model = mcp_types.JSONRPCError if isinstance(data, dict) and "error" in data else mcp_types.JSONRPCResponse
    try:
        model.model_validate(data, by_name=False)
    except ValueError as problem:
        errors = getattr(problem, "errors", None)
        if callable(errors) and errors():
            first = errors()[0]
            where = ".".join(str(part) for part in first.get("loc", ())) or "the message"
            return f"{where}: {first.get('msg', 'invalid')}"[:200]
    return str(exc).splitlines()[0][:200]


# a JSON string, or a bracket: all a scan of the nesting needs to see. A string left open runs to
# the end of the line (else every escaped quote inside it started another scan to the end: a
# hostile line of "\"\"\"... took time quadratic in its length)
_JSON_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*(?:"|\\?\Z)|[\[\]{}]')
_KEY_END = re.compile(rb"\s*:\s*")


def _response_id(line: bytes) -> Any:
    """The top-level ``id`` of a response too deeply nested for any JSON reader (a scan of its
    strings and brackets, without recursion), or None when it has none or is a request. The
    scan ends once ``id`` and ``result`` or ``error`` were seen (JSON-RPC writers put them first)."""
    depth, found, answer = 0, None, False
    for token in _JSON_TOKEN.finditer(line):
        text = token.group()
        if text in (b"{", b"["):
            depth += 1
        elif text in (b"}", b"]"):
            depth -= 1
        elif depth == 1 and _KEY_END.match(line, token.end()):
            key = text[1:-1]
            if key == b"method":
                return None
            if key == b"id":
                value = _KEY_END.match(line, token.end())
                assert value is not None
                try:
                    head = line[value.end() : value.end() + 200].decode("utf-8", "replace")
                    found, _ = json.JSONDecoder().raw_decode(head)
                except ValueError:
                    return None
            answer = answer or key in (b"result", b"error")
        if found is not None and answer:
            return found
    return None


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # json.loads joins the pairs: what is left is lone


def _without_lone_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_without_lone_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {_without_lone_surrogates(k): _without_lone_surrogates(v) for k, v in value.items()}
    return value


async def _stop(process: Any, state: ProcessState) -> None:
    """Close stdin, wait, SIGTERM the group, wait, SIGKILL the group; then reap. Bounded."""
    with suppress(Exception):
        await process.stdin.aclose()
    if await state.wait_exit(GRACE_SECONDS) is None:
        kill_group(process.pid, signal.SIGTERM)
        with anyio.move_on_after(TERM_SECONDS):
            while group_alive(process.pid):
                _ = process.returncode  # reaps the leader
                await anyio.sleep(_POLL)
    # the leader may have exited and left its children in the group: no orphans either way
    if group_alive(process.pid):
        kill_group(process.pid, signal.SIGKILL)
    await state.wait_exit(TERM_SECONDS)
    for stream in (process.stdout,):
        with suppress(Exception):
            await stream.aclose()
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    with suppress(Exception):
        if transport is not None:
            transport.close()


def describe_exit(state: ProcessState) -> List[str]:
    """Words for how the process ended: ``["exited with code 3"]``, ``["was killed by SIGKILL"]``,
    or why agentcore stopped reading it (``["sent a message larger than 64 MiB"]``)."""
    if state.refused is not None:
        return [state.refused]
    code = state.returncode
    if code is None:
        return ["closed its stdout"] if state.stdout_closed else []
    if code < 0:
        try:
            return [f"was killed by {signal.Signals(-code).name}"]
        except ValueError:
            return [f"was killed by signal {-code}"]
    return [f"exited with code {code}"]

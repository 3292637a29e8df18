"""``agentcore rpc``: drive an agent with JSON lines on stdin/stdout (the reference's RPC mode).

The protocol follows the reference coding agent's ``--mode rpc`` (its ``docs/rpc.md``): every
stdin line is one command object ``{"type": ..., "id"?: ...}``; every stdout line is one JSON
object, either a response ``{"type": "response", "command", "success", "id"?, "data"? | "error"?}``
or an agent event in the reference's event JSON (``agentcore.event_to_dict``). The commands and
the differences from the reference are in :mod:`agentcore.cli._rpc_commands`,
:mod:`agentcore.cli._rpc_sessions` and docs/rpc.rst.

Behaviour, and how it fails:

* Lines are split on LF only (a trailing CR is dropped), so U+2028/U+2029 inside JSON strings
  are data; blank lines and a UTF-8 BOM at the start of the input are skipped. A line that is
  not UTF-8 or not JSON, not an object, an unknown ``type`` or a missing/mistyped field gets an
  error response naming the problem (with the ``id`` when one could be read) and the process
  reads on. stdin is read in chunks of 64 KiB; a line longer than :data:`MAX_LINE_BYTES` (64 MiB,
  its LF not counted) gets one error response naming the limit and its length so far as soon as
  the limit is passed, the rest of it is read and dropped, and the next line is served.
* Output lines are written under one lock (responses come from the reader thread, events from
  the run thread), each whole (a write a signal interrupted goes on), each flushed, each valid
  JSON (:func:`agentcore._safe.json_safe`), the API key masked. Nothing else reaches stdout: ``print()`` in a tool or plugin and the output of child
  processes go to stderr while the server runs, and their stdin is /dev/null (a child cannot
  swallow command lines). Diagnostics go to stderr.
* Commands are handled in order on the reader thread, except those that may take long (``bash``,
  ``compact``, ``navigate_tree``), which answer from a worker thread so that ``abort`` and
  ``abort_bash`` are read meanwhile. A command that moves to another session or reads it, and a
  ``prompt``, waits for a running ``compact``/``navigate_tree`` first (``Command.after``), so
  piped commands see its result and a prompt is run after it (never queued while no run could
  take it). It waits in a line served by its own thread, not on the reader: every command read
  after it joins that line (order is kept), except ``abort`` and ``abort_bash``, which act at once
  on what runs. An ``id`` must be a string or a finite number.
* A message queued during a run (``prompt`` with ``streamingBehavior``, ``steer``,
  ``follow_up``) that arrives after the run's loop took its last look at the queues, just
  before its ``agent_end``, starts a run of its own once that run has settled (when it ended
  normally and no ``abort`` was read since it began; after an abort, an error or an approval
  pause it waits for the next prompt or ``continue``, as a message queued while idle does).
* End of input: the run in progress (with its queued steering and follow-up messages) and a
  running ``bash``/``compact``/``navigate_tree`` are let finish, then the session is closed
  (flushed) and the command exits 0; when the client has closed stdout too (it went away, nobody
  reads the answer), they are aborted instead, as on SIGTERM. SIGTERM, also while finishing,
  aborts the run and awaits its end (up to :data:`SHUTDOWN_WAIT` seconds) instead, then closes
  the session and exits 0. It acts at once while the server waits for input or for the work to
  finish; a command being handled is answered first (a line being written is finished, never
  cut: the signal handler only sets a flag there). SIGINT (Ctrl-C) does the same and exits 130,
  unless the server started with it ignored (a background job); SIGHUP (the terminal or the
  client's session went away) is SIGTERM's twin (exit 0), unless ignored at start (``nohup``).
  Once stopping (a signal, the shutdown), a client that reads nothing cannot hold the server up:
  a line it takes nothing of for :data:`STALLED_WAIT` seconds (5) ends the output there, as a
  closed pipe does, so the run ends, its transcript is recorded and the process exits.
"""

from __future__ import annotations

import io
import json
import math
import os
import select
import signal
import stat
import sys
import threading
import time
from collections import deque
from typing import Any, Callable, Deque, Dict, Iterator, List, Optional, Set, TextIO, Tuple

from .._safe import describe_exception, json_safe
from ._render import Masker

__all__ = [
    "RpcOutput",
    "RpcError",
    "RunStarted",
    "RpcServer",
    "cmd_rpc",
    "read_lines",
    "LineTooLong",
    "SHUTDOWN_WAIT",
    "STALLED_WAIT",
    "MAX_LINE_BYTES",
]

#: Seconds the shutdown waits for an aborted run to settle before closing the session anyway.
SHUTDOWN_WAIT = 30.0

#: Seconds a line may wait for a client that reads nothing once the server is stopping (a signal,
#: the shutdown): then output stops, as for a closed pipe, so a stalled client cannot hold up the
#: shutdown (a blocked write would keep the run from ending and the signal from being acted on).
STALLED_WAIT = 5.0

#: The longest command line read (bytes, its LF not counted): 64 MiB, room for a prompt with
#: images as base64. A longer line gets one error response naming the limit, the rest of it is
#: read and dropped, and the next line is served.
MAX_LINE_BYTES = 64 << 20

#: The most bytes read from stdin at once (a line is assembled from such chunks).
_CHUNK = 1 << 16

#: Seconds between the wake-ups of the main thread while it waits for stdin (see :func:`_chunks`).
_WAKE = 0.2

#: Commands never held back behind a command that waits for a compact/navigate_tree: they act on
#: what runs when they are read.
_NEVER_WAIT = frozenset(("abort", "abort_bash"))


#: Compact strict JSON, one encoder for every line (``json.dumps`` with these arguments builds a
#: new encoder per call, ~2 us of each streamed event).
_encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode


class RpcError(Exception):
    """A command failed; the message goes into the error response as it is (say what to send)."""


class RunStarted(RpcError):
    """:meth:`RpcServer.send_after` found a run begun since the command checked for one (the run
    for messages queued as the last run ended): nothing was started."""


class RpcOutput:
    """Writes one JSON object per line to a binary stream, serialised by one lock.

    ``send`` never raises: an unserialisable value is written in its JSON-safe form, and once the
    reader has gone away (a closed pipe) output stops quietly. ``secret`` is masked in every line.
    Once :meth:`stopping` was called, a line the client takes nothing of for :data:`STALLED_WAIT`
    seconds (a client that stopped reading a pipe or socket) stops the output too: the line is
    left cut, and nothing more is written."""

    def __init__(self, stream: Any, secret: Optional[str] = None) -> None:
        self.stream = stream
        self.masker = Masker()
        self.mask(secret)
        # re-entrant: the prompt command holds it while starting a run, and a listener called on
        # the same thread must not deadlock (see RpcServer.send_after)
        self.lock = threading.RLock()
        self.closed = False
        self.stopping_since: Optional[float] = None  # time.monotonic() when the server began to stop
        self._fd = _pollable_fd(stream)  # written with poll(), so that a stalled client is noticed
        if self._fd is not None:
            self._poller = select.poll()
            self._poller.register(self._fd, select.POLLOUT)

    def stopping(self) -> None:
        """The server is stopping: from now on, a write the client takes nothing of for
        :data:`STALLED_WAIT` seconds is given up. Safe in a signal handler (sets one attribute)."""
        if self.stopping_since is None:
            self.stopping_since = time.monotonic()

    def send(self, obj: Dict[str, Any]) -> None:
        try:
            line = _encode(obj)
        except (TypeError, ValueError):
            line = _encode(json_safe(obj))
        data = (self.redact(line) + "\n").encode("utf-8", "backslashreplace")
        with self.lock:
            if self.closed:
                return
            try:
                if self._fd is None:
                    _write_all(self.stream, data)
                    self.stream.flush()
                else:
                    self._write_polled(self._fd, data)
            except (BrokenPipeError, ValueError, OSError):
                self.closed = True

    def _write_polled(self, fd: int, data: bytes) -> None:
        """Write ``data`` to the pipe or socket ``fd`` in pieces the client has room for (a write
        of at most ``PIPE_BUF`` bytes, 4 KiB on Linux, to a pipe that ``poll`` reports writable
        does not block), waiting with ``poll``; OSError (output stopped) when the server is
        stopping and the client has taken nothing for :data:`STALLED_WAIT` seconds."""
        poller = self._poller
        view = memoryview(data)
        while view:
            if not poller.poll(0):
                waiting = time.monotonic()
                while not poller.poll(_WAKE_MS):
                    since = self.stopping_since
                    if since is not None and time.monotonic() - max(since, waiting) >= STALLED_WAIT:
                        raise OSError(f"the client has read nothing for {STALLED_WAIT:g} s while the server stops")
            view = view[os.write(fd, view[:_PIPE_BUF]) :]

    def gone(self) -> bool:
        """True once the reader has gone away: a write failed, or the stream is a pipe or socket
        whose other end was closed (seen without writing, so a run that is silent, a stalled
        model or a long tool, is noticed too). False for a stream without a file descriptor."""
        if self.closed:
            return True
        try:
            fd = self.stream.fileno()
        except (AttributeError, ValueError, OSError):
            return False
        try:
            poller = select.poll()
            poller.register(fd, 0)  # POLLERR and POLLHUP are always reported
            return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
        except (AttributeError, ValueError, OSError):  # no poll() (Windows), a closed fd
            return False

    def mask(self, secret: Optional[str]) -> None:
        """Mask ``secret`` (an API key) in every later line."""
        self.masker.add(secret)

    def mask_known_keys(self) -> None:
        """Mask every provider key the environment holds and every key ``agentcore keys set``
        stored (any of them may reach a line: bash output, a tool result, a server's echo)."""
        from ..providers.base import ENV_API_KEYS
        from ._keys import stored_keys

        for names in ENV_API_KEYS.values():
            for name in names:
                self.mask(os.environ.get(name))
        for key in stored_keys():
            self.mask(key)

    def redact(self, text: str) -> str:
        return self.masker(text)


class LineTooLong:
    """What :func:`read_lines` yields for a line longer than its limit, as soon as the limit is
    passed: ``length`` is the line's length read so far (bytes). The rest of the line is read and
    dropped when the iteration goes on; the next line is read as usual."""

    def __init__(self, length: int, limit: int) -> None:
        self.length = length
        self.limit = limit

    def message(self) -> str:
        limit = f"{self.limit} bytes"
        if self.limit >= 1 << 10:
            limit += f" ({_binary_size(self.limit)})"
        return (
            f"Failed to parse command: the line is longer than the limit of {limit}: "
            f"{self.length} bytes read so far; the rest of the line is skipped"
        )


def _binary_size(count: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20)):
        if count >= scale:
            return f"{count / scale:g} {unit}"
    return f"{count / (1 << 10):g} KiB"


#: The most bytes written to a pipe at once: a write no longer than ``PIPE_BUF`` to a pipe that
#: ``poll`` reports writable does not block (Linux: 4096, a page; POSIX: at least 512).
_PIPE_BUF = 4096 if sys.platform.startswith("linux") else 512
_WAKE_MS = int(_WAKE * 1000)


def _pollable_fd(stream: Any) -> Optional[int]:
    """The descriptor of ``stream`` when it is an unbuffered file on a pipe or socket (the
    server's stdout), which :meth:`RpcOutput._write_polled` writes; else None (a regular file, a
    terminal, a buffered or in-memory stream: written as it is)."""
    if not isinstance(stream, io.RawIOBase):
        return None
    try:
        fd = stream.fileno()
        mode = os.fstat(fd).st_mode
    except (AttributeError, ValueError, OSError):
        return None
    if not hasattr(select, "poll") or not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        return None
    return fd


def _write_all(stream: Any, data: bytes) -> None:
    """Write all of ``data``: an unbuffered file writes what the pipe takes before a signal
    interrupts it and returns the count, and a line written in part is a broken line for the
    client. A stream that returns no count (a text adapter) took it all."""
    written = stream.write(data)
    while written is not None and written < len(data):
        data = data[written:]
        written = stream.write(data)


def read_lines(stream: Any, limit: Optional[int] = None) -> Iterator[Any]:
    """The LF-terminated records of ``stream`` (bytes; a text stream is read through its buffer),
    without the LF and one trailing CR, and without a UTF-8 byte order mark at the start of the
    stream (a file saved by a Windows editor; RFC 8259 lets a parser ignore it). The last record
    may lack its LF.

    The stream is read in chunks of at most :data:`_CHUNK` bytes (:func:`_chunks`), and a line is
    held in memory up to ``limit`` bytes (its LF not counted; default :data:`MAX_LINE_BYTES`,
    read when the iteration starts): as soon as more has been read, a :class:`LineTooLong` is
    yielded in its place and the rest of the line is read and dropped, so a client that writes
    without end costs no memory."""
    bound = MAX_LINE_BYTES if limit is None else limit
    line = bytearray()  # the line so far, while it fits
    state = {"size": 0, "over": False}  # its length read so far; past the limit (being dropped)
    first = True
    for chunk in _chunks(stream, lambda: _CHUNK if state["over"] else min(_CHUNK, bound + 1 - state["size"])):
        if first:
            first = False
            if chunk.startswith(b"\xef\xbb\xbf"):
                chunk = chunk[3:]
        start = 0
        while start < len(chunk):
            end = chunk.find(b"\n", start)
            stop = len(chunk) if end < 0 else end
            state["size"] += stop - start
            if not state["over"]:
                if state["size"] > bound:
                    state["over"] = True
                    line.clear()
                    yield LineTooLong(state["size"], bound)
                else:
                    line += chunk[start:stop]
            if end < 0:
                break
            if not state["over"]:
                yield _without_cr(line)
            line.clear()
            state["size"], state["over"] = 0, False
            start = end + 1
    if line:
        yield _without_cr(line)


def _without_cr(line: bytearray) -> bytes:
    return bytes(line[:-1] if line.endswith(b"\r") else line)


def _chunks(stream: Any, size: Callable[[], int]) -> Iterator[bytes]:
    """The bytes of ``stream`` in chunks of at most ``size()`` bytes (asked before each read).

    An unbuffered file (the server's stdin) is read with ``os.read`` once ``select`` says it is
    readable, waking every :data:`_WAKE` seconds meanwhile: a SIGTERM that the kernel handed to
    another thread, or that landed just before a blocking read began (while the main thread ran
    C code), has its Python handler run only in the main thread at its next bytecode, which a
    blocking read would put off until the client writes again. Other streams: ``readline`` with
    a size (a line never spans two chunks)."""
    fd: Optional[int] = None
    if isinstance(stream, io.RawIOBase):
        try:
            fd = stream.fileno()
        except (OSError, ValueError):
            fd = None
    if fd is not None:
        while True:
            _wait_readable(fd)
            chunk = os.read(fd, size())
            if not chunk:
                return
            yield chunk
    binary: Any = getattr(stream, "buffer", stream)
    while True:
        raw = binary.readline(size())
        if not raw:
            return
        if isinstance(raw, str):  # a text stream without .buffer (an in-process caller's StringIO)
            raw = raw.encode("utf-8", "surrogateescape")
        yield raw


def _wait_readable(fd: int) -> None:
    """Return once ``fd`` is readable (or at end of file), waking every :data:`_WAKE` seconds so
    that a pending signal handler runs. Returns at once where ``select`` cannot wait for ``fd``
    (a pipe on Windows): the read then blocks."""
    while True:
        try:
            ready, _, _ = select.select([fd], [], [], _WAKE)
        except (OSError, ValueError):
            return
        if ready:
            return


class _Terminated(BaseException):
    """Raised in the main thread by the SIGTERM/SIGINT handler: leave the read loop and shut down."""


def response(command: str, request_id: Any, *, data: Any = None, error: Optional[str] = None) -> Dict[str, Any]:
    """A response object in the reference's shape (``id`` only when the command had one; ``data``
    only when there is some, ``null`` data as the reference sends it for cycle commands)."""
    out: Dict[str, Any] = {"type": "response", "command": command, "success": error is None}
    if request_id is not None:
        out["id"] = request_id
    if error is not None:
        out["error"] = error
    elif data is not _NO_DATA:
        out["data"] = data
    return out


_NO_DATA: Any = object()


class RpcServer:
    """One agent behind the protocol. ``serve(lines)`` returns the exit status (0).

    ``setup`` is the :class:`~agentcore.cli._setup.AgentSetup` of the command line; the commands
    that move to another session (new_session, switch_session, fork, clone) build a new agent and
    :meth:`attach` it. The command handlers live in :mod:`agentcore.cli._rpc_commands`.
    """

    def __init__(self, setup: Any, out: RpcOutput, err: TextIO, context: Any) -> None:
        from ._rpc_commands import COMMANDS

        self.setup = setup
        self.out = out
        self.err = err
        self.context = context  # the command line (CliOptions, argparse args, --approve, ...)
        self.commands = COMMANDS
        self.queued: List[Tuple[str, Any]] = []  # ("steer"|"followUp", message) not yet delivered
        self.queued_lock = threading.Lock()
        # a run was started and its agent_end not yet written (changed under the output lock)
        self.running = False
        self.busy_with: Optional[str] = None  # "compact" / "navigate_tree" from dispatch to response
        # the latest compact/navigate_tree worker and its command: a command whose Command.after
        # names it waits for it to end (response written) before it runs
        self.busy_worker: Optional[Tuple[str, threading.Thread]] = None
        # an abort arrived after the latest compact was dispatched: the compaction_start event
        # aborts it (an abort read before the compaction made the agent busy would be lost)
        self.abort_requested = False
        # the abort of the busy command in progress, made at its dispatch (so an abort read before
        # its work began is not lost): navigate_tree passes its signal to the agent
        self.busy_abort: Optional[Any] = None
        self.bash: Any = None  # the running `bash` command's process
        self.bash_cancelled = False
        self.bash_lock = threading.Lock()
        self.pending_bash: List[Any] = []  # bash results waiting for the next prompt (run active)
        # one flush_bash at a time: none is lost or doubled; a session move holds it too, so a
        # bash result is recorded in the session it ran in (re-entrant: the move flushes)
        self.bash_flush_lock = threading.RLock()
        # the setups (agent and session) that running bash commands started in, one per command:
        # a session move leaves such a session open, and the command records its result there
        self.bash_origins: List[Any] = []
        self.decided: Set[str] = set()  # tool-call ids approved/denied through the protocol
        self.retries_on: Optional[int] = None  # max_retries before set_auto_retry false
        self.workers: List[threading.Thread] = []
        # the thread that starts a run for messages queued as the last run ended (_resume_late)
        self.resumer: Optional[threading.Thread] = None
        # abort commands read so far, and their count when the latest run began (both changed
        # under the output lock): an abort read during a run also cancels the run _resume_late
        # would start for its late messages
        self.aborts = 0
        self.aborts_at_start = 0
        # commands waiting for a running compact/navigate_tree, and the commands read after them,
        # served in order by their own thread (``_line_worker``) while the reader reads on
        self._line: Deque[Dict[str, Any]] = deque()
        self._line_lock = threading.Lock()
        self._line_worker: Optional[threading.Thread] = None
        self._closing = False  # shutting down: the line takes nothing more
        self._unsubscribe: Callable[[], None] = lambda: None
        self.attach(setup)

    # ------------------------------------------------------------------ the agent

    @property
    def agent(self) -> Any:
        return self.setup.agent

    @property
    def session(self) -> Any:
        return self.setup.session

    def attach(self, setup: Any) -> None:
        """Serve ``setup``'s agent: its events are streamed from now on (the previous agent's not).
        Messages still queued for the previous agent (a session move) are dropped with it, and a
        ``queue_update`` with empty queues tells the client so."""
        self._unsubscribe()
        self.setup = setup
        self.out.mask(setup.api_key)
        with self.queued_lock:
            dropped = bool(getattr(self, "queued", None))
            self.queued = []
        self.decided = set()
        self._unsubscribe = setup.agent.subscribe(self._on_event)
        if dropped:
            self.send_queue_update()

    def _on_event(self, event: Any) -> None:
        kind = event.type
        data = update_json(event) if kind == "message_update" else _event_json(event)
        if kind == "compaction_end":
            data.pop("messages", None)  # agentcore's reducer input; the reference's event has none
        with self.out.lock:
            if kind == "agent_end":
                self.running = False
            elif kind == "agent_start":
                self.running = True
                self.aborts_at_start = self.aborts
            self.out.send(data)
        if kind == "message_end" and self.queued:
            self._delivered(event.message)
        elif kind == "agent_end" and self.agent.has_queued_messages():
            self._start_resumer()
        elif kind == "compaction_start" and self.abort_requested and getattr(event, "reason", None) == "manual":
            self.agent.abort("agentcore rpc: abort")

    def _start_resumer(self) -> None:
        """The run ends with messages still queued: they came after its loop took its last look
        at the queues (the run still counted as active, so the prompt/steer/follow_up was
        accepted). Start a run for them once this one has settled (on the run thread the agent
        is still busy); :meth:`finish` waits for it."""
        resumer = threading.Thread(target=self._resume_late, args=(self.agent,), name="rpc-resume", daemon=True)
        self.resumer = resumer
        resumer.start()

    def _resume_late(self, agent: Any) -> None:
        """Continue ``agent`` for its queued messages when the run ended normally (not aborted,
        failed or waiting for approvals: then they wait for the next prompt or ``continue``, as
        messages queued while idle do), no ``abort`` was read since it began (one that came too
        late to change its answer still stops this run) and nothing else took them meanwhile: a
        prompt run started by the client delivers them itself, a session move or a shutdown drops
        them."""
        from ..types import role_of

        if not agent.wait_for_idle(SHUTDOWN_WAIT):
            return
        with self._line_lock, self.out.lock:  # _line_lock: a shutdown (``_closing``) is not raced
            if self._closing or agent is not self.agent or self.running or self.busy_with is not None:
                return
            if self.aborts != self.aborts_at_start:
                self.note("queued messages wait for the next prompt: the run was aborted")
                return
            messages = agent.messages
            last: Any = messages[-1] if messages else None
            if role_of(last) != "assistant" or last.stop_reason in ("aborted", "error"):
                return
            if agent.pending_approvals or not agent.has_queued_messages():
                return
            try:
                agent.continue_(wait=False)
            except (RuntimeError, ValueError) as exc:  # a run began meanwhile (it takes them), or none left
                self.note(f"queued messages wait for the next prompt: {describe_exception(exc)}")
                return
            self.running = True

    def _delivered(self, message: Any) -> None:
        """A queued steering/follow-up message reached the transcript: tell the client."""
        with self.queued_lock:
            kept = [(kind, m) for kind, m in self.queued if m is not message]
            changed = len(kept) != len(self.queued)
            self.queued = kept
        if changed:
            self.send_queue_update()

    def send_queue_update(self) -> None:
        """Write the queues as they are now. The snapshot is taken under the output lock, so the
        last queue_update written (by the reader or the run thread) is never a stale one."""
        from ..types import text_of

        with self.out.lock:
            with self.queued_lock:
                items = list(self.queued)
            self.out.send(
                {
                    "type": "queue_update",
                    "steering": [text_of(m.content) for kind, m in items if kind == "steer"],
                    "followUp": [text_of(m.content) for kind, m in items if kind == "followUp"],
                }
            )

    def note(self, text: str) -> None:
        """A diagnostic line on stderr (never stdout: that is the protocol's)."""
        try:
            self.err.write(self.out.redact(f"agentcore rpc: {text}") + "\n")
            self.err.flush()
        except (OSError, ValueError):
            pass

    # ------------------------------------------------------------------ the loop

    def serve(self, lines: Iterator[Any], signals: Optional[_StopSignals] = None) -> int:
        """Handle every line until end of input, let the work in progress finish (the run with
        its queued messages, a ``bash`` or ``compact``), then shut down. A :class:`LineTooLong`
        among ``lines`` gets an error response. SIGTERM or Ctrl-C (``signals``: the handlers
        :func:`cmd_rpc` installed) aborts instead: at once while the server waits for a line or
        for the work to finish, else once the command being handled has answered (a line being
        written is never cut). Returns 0, or 130 when Ctrl-C stopped it."""
        stop = signals if signals is not None else _StopSignals()
        stop.on_stop = self.out.stopping
        status = 0
        try:
            for raw in stop.waiting(lines):
                if isinstance(raw, LineTooLong):
                    self.out.send(response("parse", None, error=raw.message()))
                elif raw.strip():
                    self.handle_line(raw)
            # End of input is not an abort: ``printf '{"type":"prompt",...}' | agentcore rpc``
            # must print the answer; a client that wants to stop sends abort or SIGTERM.
            stop.wait(self.finish)
        except _Terminated:
            self.note(f"{stop.name()}: aborting the run and closing the session")
            status = stop.status()
        finally:
            self.shutdown()
        return status

    def finish(self) -> None:
        """Wait, without a bound, until the run, the slow commands and the waiting line have ended
        (end of input). Polls so that SIGTERM, raised in this (main) thread, is handled promptly.
        When the client has closed stdout too (it went away: nobody can read the answer), stop
        waiting at once and leave the work in progress to :meth:`shutdown`, which aborts it."""
        if not self.agent.wait_for_idle(0) or any(worker.is_alive() for worker in self.workers):
            if self._client_gone():
                return
            self.note("end of input: letting the work in progress finish (SIGTERM aborts it)")
        while True:
            while not self.agent.wait_for_idle(1.0):
                if self._client_gone():
                    return
            alive = [worker for worker in self.workers + [self.resumer] if worker is not None and worker.is_alive()]
            if not alive:  # nothing can start a run any more
                return
            for worker in alive:  # a compact, navigate_tree or waiting prompt may start a run
                while worker.is_alive():
                    worker.join(1.0)
                    if self._client_gone():
                        return

    def _client_gone(self) -> bool:
        if not self.out.gone():
            return False
        self.note("end of input and the client closed its output: aborting the work in progress")
        return True

    def handle_line(self, raw: bytes) -> None:
        """Parse and run one command line; every failure becomes an error response."""
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.out.send(response("parse", None, error=f"Failed to parse command: the line is not UTF-8 ({exc})"))
            return
        try:
            command = json.loads(text, parse_constant=_not_json)
        except ValueError as exc:
            self.out.send(response("parse", None, error=f"Failed to parse command: {exc}"))
            return
        except RecursionError:  # thousands of nested brackets: the decoder's stack ran out
            self.out.send(response("parse", None, error="Failed to parse command: nested too deeply"))
            return
        if not isinstance(command, dict):
            self.out.send(
                response(
                    "parse",
                    None,
                    error=f'Failed to parse command: expected a JSON object like {{"type": "prompt", '
                    f'"message": "..."}}, got {_json_kind(command)}',
                )
            )
            return
        self.dispatch(command)

    def dispatch(self, command: Dict[str, Any]) -> None:
        request_id = command.get("id")
        kind = command.get("type")
        bad_id = _bad_id(request_id)
        if bad_id is not None:
            self.out.send(response(kind if isinstance(kind, str) and kind else "parse", None, error=bad_id))
            return
        if not isinstance(kind, str) or not kind:
            problem = "has no" if kind is None else "has an empty" if kind == "" else f"has {_json_kind(kind)} as its"
            self.out.send(
                response("parse", request_id, error=f'the command {problem} "type"; e.g. {{"type": "get_state"}}')
            )
            return
        if kind == "extension_ui_response":
            return  # agentcore has no extension UI: nothing waits for an answer (the reference ignores strays too)
        spec = self.commands.get(kind)
        if spec is None:
            self.out.send(response(kind, request_id, error=_unknown_command(kind, list(self.commands))))
            return
        if kind not in _NEVER_WAIT and self._wait_in_line(command, spec):
            return
        self._dispatch(command, spec)

    def _dispatch(self, command: Dict[str, Any], spec: Any) -> None:
        """Run a command whose turn it is (on the reader thread, or the waiting line's)."""
        request_id = command.get("id")
        kind = command["type"]
        try:
            spec.check(command)
        except RpcError as exc:
            self.out.send(response(kind, request_id, error=str(exc)))
            return
        if spec.busy:
            if self.busy_with is not None:
                self.out.send(response(kind, request_id, error=f"{kind}: the agent is busy ({self.busy_with})"))
                return
            from ..signals import AbortController

            self.busy_with = kind  # here, on the reader thread: a prompt read next is queued or refused
            self.abort_requested = False
            self.busy_abort = AbortController()
        if spec.slow:
            worker = threading.Thread(
                target=self._run, args=(spec, command, kind, request_id), name=f"rpc-{kind}", daemon=True
            )
            self.workers = [w for w in self.workers if w.is_alive()] + [worker]
            if spec.busy:
                self.busy_worker = (kind, worker)
            worker.start()
        else:
            self._run(spec, command, kind, request_id)

    def _wait_in_line(self, command: Dict[str, Any], spec: Any) -> bool:
        """Queue ``command`` when it must wait: behind the commands already waiting, or, when it
        is the first, because its ``Command.after`` names the running ``compact``/``navigate_tree``
        (a ``clone`` sent after ``navigate_tree`` copies the branch it moved to). The waiting line
        is served by its own thread, so the reader reads on and ``abort`` reaches what runs.
        False: nothing waits, run the command now."""
        with self._line_lock:
            if self._line_worker is None:
                running = self.busy_worker
                if running is None or running[0] not in spec.after or not running[1].is_alive():
                    return False
                worker = threading.Thread(target=self._serve_line, name="rpc-waiting", daemon=True)
                self._line_worker = worker
                self.workers = [w for w in self.workers if w.is_alive()] + [worker]
                self._line.append(command)
                worker.start()
                return True
            self._line.append(command)
            return True

    def _serve_line(self) -> None:
        """The waiting line's thread: each command, in order, once what it waits for has
        answered; the line closes when it is empty (later commands run on the reader again)."""
        while True:
            with self._line_lock:
                if not self._line or self._closing:
                    self._drop_line()
                    self._line_worker = None
                    return
                command = self._line[0]
            spec = self.commands[command["type"]]
            running = self.busy_worker
            if running is not None and running[0] in spec.after:
                running[1].join()
            with self._line_lock:
                if self._closing:  # SIGTERM while it waited: it is not run either
                    continue
                self._line.popleft()
            try:
                self._dispatch(command, spec)
            except Exception as exc:  # noqa: BLE001 - answered, and the line goes on
                self.out.send(response(command["type"], command.get("id"), error=describe_exception(exc)))

    def _drop_line(self) -> None:  # with _line_lock held
        """Shutting down: answer what still waits in line with an error, and run none of it."""
        if not self._line:
            return
        self.note(f"shutting down: {len(self._line)} command(s) waiting in line were not run")
        while self._line:
            command = self._line.popleft()
            self.out.send(
                response(command["type"], command.get("id"), error=f"{command['type']}: not run, the server shut down")
            )

    def _run(self, spec: Any, command: Dict[str, Any], kind: str, request_id: Any) -> None:
        error: Optional[str] = None
        try:
            data = spec.handler(self, command)
        except RpcError as exc:
            error = str(exc)
        except Exception as exc:  # noqa: BLE001 - a clear error line; the server keeps running
            error = describe_exception(exc)
        finally:
            if spec.busy:  # before the response: a command sent on reading it must not see "busy"
                # In this order: once busy_with is None the reader may dispatch the next busy
                # command, which sets busy_abort for itself; clearing it after that loses its abort.
                self.busy_abort = None
                self.busy_with = None
        if error is not None:
            self.out.send(response(kind, request_id, error=error))
            return
        if isinstance(data, _Deferred):  # the handler wrote its response itself (prompt: before the run's events)
            return
        if data is None:
            data = _NO_DATA
        elif data is NULL:
            data = None
        self.out.send(response(kind, request_id, data=data))

    def send_after(self, kind: str, request_id: Any, start: Callable[[], Any], data: Any = _NO_DATA) -> Any:
        """Call ``start()`` (which starts a run) and write the success response before any event
        of that run: the run thread's first listener call waits for the output lock held here.

        A run whose ``agent_end`` was written may still be finishing (its last listeners, the
        session append): that is waited for first, so a command sent right after ``agent_end``
        is not refused as busy. :class:`RunStarted` (nothing started) when a run began after the
        caller checked that none was going: the one :meth:`_resume_late` starts for messages
        queued as the last run ended (it is not waited for: ``abort`` must be read meanwhile)."""
        if not self.running and self.busy_with is None:
            waited = 0.0
            while not self.running and waited < SHUTDOWN_WAIT and not self.agent.wait_for_idle(0.05):
                waited += 0.05
        with self.out.lock:
            if self.running:
                raise RunStarted(f"{kind}: the agent is processing (a run began meanwhile); wait for agent_end")
            start()
            self.running = True
            self.out.send(response(kind, request_id, data=data))
        return DEFERRED

    # ------------------------------------------------------------------ shutdown

    def shutdown(self) -> None:
        """Abort what runs, wait for it (bounded), record the ``bash`` results still waiting for
        a next prompt (one that finished during a run: they join the session, not the void),
        close the session. Never raises."""
        self.out.stopping()  # a client that reads nothing any more cannot hold the run up
        try:
            with self._line_lock:
                self._closing = True  # what still waits in line is not run
            from ._rpc_bash import flush_bash, stop_bash

            stop_bash(self)
            agent = self.agent
            agent.abort("agentcore rpc: shutting down")  # a no-op after finish(): nothing runs then
            if not agent.wait_for_idle(SHUTDOWN_WAIT):
                self.note(f"the run did not stop within {SHUTDOWN_WAIT:.0f} s of the abort; closing anyway")
            for worker in self.workers:
                worker.join(SHUTDOWN_WAIT)
            if self.pending_bash and agent.wait_for_idle(0):
                flush_bash(self)
        except Exception as exc:  # noqa: BLE001 - shutting down: report, then close what we can
            self.note(f"shutdown: {describe_exception(exc)}")
        finally:
            self._unsubscribe()
            if self.session is not None:
                try:
                    self.close_session(self.session)
                except Exception as exc:  # noqa: BLE001
                    self.note(f"closing the session: {describe_exception(exc)}")

    def close_session(self, session: Any) -> None:
        """Close ``session``; when it is a file of the sessions directory that holds nothing but
        its header (no prompt was sent), delete it, as ``chat`` does: an editor that starts
        ``agentcore rpc`` and quits, or a ``new_session`` left unused, leaves no empty
        conversation behind. A file named by ``--session``/``switch_session`` elsewhere stays."""
        empty = len(session.storage) == 0
        session.close()
        path = getattr(session, "path", None)
        if not empty or not path or not path.endswith(".jsonl"):
            return
        from ._setup import default_sessions_dir

        directory = os.path.abspath(getattr(self.context.options, "sessions_dir", None) or default_sessions_dir())
        if os.path.dirname(os.path.dirname(os.path.abspath(path))) == directory:
            try:
                os.unlink(path)
            except OSError:
                pass


def _event_json(event: Any) -> Dict[str, Any]:
    from ..events import event_to_dict

    return event_to_dict(event)


#: the provider stream events :func:`update_json` converts itself (their fields: content_index,
#: delta, content, tool_call, partial)
_FAST_UPDATES = frozenset(
    ("start", "text_start", "text_delta", "text_end", "thinking_start", "thinking_delta", "thinking_end")
    + ("toolcall_start", "toolcall_delta", "toolcall_end")
)
_CAMEL = {"content_index": "contentIndex", "tool_call": "toolCall"}


def update_json(event: Any) -> Dict[str, Any]:
    """``event_to_dict(event)`` of a ``message_update``, at a fraction of the cost: one per
    streamed token, on the run thread, which waits for the listener. The partial message (the
    same object as ``event.message``) is converted once, not twice, and the JSON-safe walk is
    left to :meth:`RpcOutput.send`, which falls back to it only when ``json.dumps`` refuses a
    value (NaN, bytes, an odd object in tool arguments). Other stream events: ``event_to_dict``."""
    from dataclasses import fields

    inner = event.assistant_message_event
    if getattr(inner, "type", None) not in _FAST_UPDATES or not hasattr(event.message, "to_dict"):
        return _event_json(event)
    message = event.message.to_dict()
    nested: Dict[str, Any] = {"type": inner.type}
    for f in fields(inner):
        value = getattr(inner, f.name)
        if value is event.message:
            value = message
        elif hasattr(value, "to_dict"):
            value = value.to_dict()
        nested[_CAMEL.get(f.name, f.name)] = value
    return {"type": "message_update", "message": message, "assistantMessageEvent": nested}


class _Deferred:
    """The marker a handler returns when it wrote its response itself."""


DEFERRED = _Deferred()
#: what a handler returns for a ``"data": null`` response (the reference's cycle commands)
NULL: Any = object()


def _not_json(name: str) -> Any:
    """``json.loads`` accepts NaN and Infinity; JSON (and the reference's parser) does not."""
    raise ValueError(f"{name} is not a JSON value")


def _bad_id(request_id: Any) -> Optional[str]:
    """Why ``request_id`` cannot be a command's ``id`` (a string or a finite number), or None."""
    if request_id is None or isinstance(request_id, str):
        return None
    if isinstance(request_id, (int, float)) and not isinstance(request_id, bool):
        if isinstance(request_id, float):
            fits = math.isfinite(request_id)
        else:  # an int compares with a float exactly (math.isfinite would overflow converting it)
            fits = abs(request_id) <= sys.float_info.max
        if fits:
            return None
        return 'the command\'s "id" is a number too large for a double; send a string or a smaller number'
    return f'the command\'s "id" must be a string or a number, not {_json_kind(request_id)}'


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _unknown_command(kind: str, known: List[str]) -> str:
    import difflib

    close = difflib.get_close_matches(kind, known, n=2, cutoff=0.6)
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    return f"Unknown command: {kind}{hint}. Commands: {', '.join(sorted(known))}"


# --------------------------------------------------------------------------- the command


class _StdioGuard:
    """While the server runs, the protocol owns the process's stdin and stdout: it reads and
    writes private duplicates of fds 0 and 1, while fd 1 and ``sys.stdout`` point at stderr and
    fd 0 and ``sys.stdin`` at /dev/null, so neither ``print()`` in a tool nor a child process
    (which inherits the fds) can write into the output or swallow command lines. Restored on
    exit (``main()`` may run in-process); streams that are not the process's own are used as
    they are."""

    def __init__(self, stdin: Any, out: Any) -> None:
        self.stdin = stdin
        self.out = out
        self.saved: List[Tuple[int, int]] = []  # (fd, its saved duplicate)
        self.saved_streams: Tuple[Any, Any] = (None, None)

    @staticmethod
    def _is_fd(stream: Any, fd: int, current: Any) -> bool:
        try:
            return stream is current and stream.fileno() == fd
        except (AttributeError, ValueError, OSError):
            return False

    def __enter__(self) -> Tuple[Any, Any]:
        protocol_in: Any = self.stdin
        protocol_out: Any = getattr(self.out, "buffer", None) or _TextBytes(self.out)
        self.saved_streams = (sys.stdin, sys.stdout)
        if self._is_fd(self.out, 1, sys.stdout):
            sys.stdout.flush()
            protocol_out = os.fdopen(os.dup(1), "wb", buffering=0)
            self.saved.append((1, os.dup(1)))
            os.dup2(2, 1)
            sys.stdout = sys.stderr
        if self._is_fd(self.stdin, 0, sys.stdin):
            protocol_in = os.fdopen(os.dup(0), "rb", buffering=0)  # read_lines waits for it with select()
            self.saved.append((0, os.dup(0)))
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.close(null)
            sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - closed in __exit__
        return protocol_in, protocol_out

    def __exit__(self, *exc: Any) -> None:
        if sys.stdin is not self.saved_streams[0]:
            sys.stdin.close()
        sys.stdin, sys.stdout = self.saved_streams
        for fd, copy in reversed(self.saved):
            os.dup2(copy, fd)
            os.close(copy)


class _TextBytes:
    """A binary face on a text stream (tests call ``main()`` with StringIO)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, data: bytes) -> int:
        self.stream.write(data.decode("utf-8"))
        return len(data)

    def flush(self) -> None:
        self.stream.flush()


class _StopSignals:
    """SIGTERM, and SIGINT (Ctrl-C) and SIGHUP (the terminal or the client's session went away)
    unless ignored when the server started, end the server (main thread only; the previous
    handlers are restored on exit).

    The handler only raises :class:`_Terminated` while the main thread waits (:meth:`waiting`
    for the next line, :meth:`wait` at end of input), where nothing is half done. Anywhere else
    (a command being handled, a response being written) it records the signal in :attr:`fired`,
    and the main thread stops when it next waits: a response is written whole, never cut by the
    signal. Signals after the first are ignored (the shutdown it began is bounded). Inert when
    not entered (an in-process caller on another thread)."""

    def __init__(self) -> None:
        self.fired: Optional[int] = None  # the signal that stops the server
        self.interruptible = False
        self.previous: Dict[int, Any] = {}
        # called first thing when a signal fires (RpcOutput.stopping: a write blocked on a client
        # that reads nothing must not keep the main thread from stopping)
        self.on_stop: Callable[[], None] = lambda: None

    def __enter__(self) -> _StopSignals:
        if threading.current_thread() is threading.main_thread():
            hangup = getattr(signal, "SIGHUP", None)  # not on Windows
            for signum in (signal.SIGTERM, signal.SIGINT, hangup):
                if signum is None:
                    continue
                if signum != signal.SIGTERM and signal.getsignal(signum) == signal.SIG_IGN:
                    continue  # a parent that ignores Ctrl-C (a background job) or SIGHUP (nohup) keeps it so
                self.previous[signum] = signal.signal(signum, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.fired is not None:  # a second signal must not interrupt the shutdown the first began
            return
        self.fired = signum
        self.on_stop()
        if self.interruptible:
            self.interruptible = False
            raise _Terminated()

    def name(self) -> str:
        return signal.Signals(self.fired).name if self.fired is not None else "a signal"

    def status(self) -> int:
        """The exit status after the signal: 130 after Ctrl-C (as every command), else 0."""
        return 130 if self.fired == signal.SIGINT else 0

    def waiting(self, lines: Iterator[Any]) -> Iterator[Any]:
        """The items of ``lines``, each read while a signal may interrupt the read."""
        items = iter(lines)
        while True:
            item = self.wait(lambda: next(items, _END))
            if item is _END:
                return
            yield item

    def wait(self, call: Callable[[], Any]) -> Any:
        """``call()`` (which only waits) with a signal raising :class:`_Terminated` in it, or
        before it when the signal came meanwhile."""
        self.interruptible = True
        try:
            if self.fired is not None:
                raise _Terminated()
            return call()
        finally:
            self.interruptible = False

    def __exit__(self, *exc: Any) -> None:
        for signum, previous in self.previous.items():
            signal.signal(signum, previous if previous is not None else signal.SIG_DFL)


_END: Any = object()


def cmd_rpc(args: Any, stdin: TextIO, out: TextIO, err: TextIO) -> int:
    """``agentcore rpc``: serve the protocol until end of input, SIGTERM or Ctrl-C.

    Exit status 0 at end of input and on SIGTERM or SIGHUP, 130 on SIGINT (Ctrl-C; each: the run
    aborted and awaited, the session closed, every line written whole unless the client read
    nothing of it for :data:`STALLED_WAIT` seconds), 2 on a bad command line (before
    anything is read). A command line longer than :data:`MAX_LINE_BYTES` (64 MiB) gets an error
    response naming the limit, and the rest of it is dropped."""
    from ._rpc_sessions import RpcContext, initial_setup

    context = RpcContext.from_args(args)
    setup = initial_setup(context)
    with _StdioGuard(stdin, out) as (commands, protocol), _StopSignals() as signals:
        output = RpcOutput(protocol, setup.api_key)
        output.mask_known_keys()
        server = RpcServer(setup, output, err, context)
        where = setup.session.path if setup.session is not None and setup.session.path else "memory (not saved)"
        server.note(f"model {setup.agent.model.key}, session {where}; reading commands on stdin")
        return server.serve(read_lines(commands), signals)

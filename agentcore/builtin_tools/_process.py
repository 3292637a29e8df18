"""A shell command in its own process group: non-blocking output reads and a whole-group kill.

POSIX: the command starts a new session (``start_new_session=True``), so its process group holds
the shell and every child it starts (background jobs included, unless they call ``setsid``
themselves). ``kill_group`` sends SIGTERM to the group, gives it ``grace`` seconds (less once no
member runs: Linux's ``/proc`` tells zombies apart), then SIGKILL, also when that wait is interrupted.
On Linux every signal also reaches the other process groups of the command's session: ``timeout
60 make`` puts itself and ``make`` in a group of their own (so do ``set -m`` jobs), which a signal
to the shell's group alone would leave running.
The shell is reaped only after the final signal, so its pid (the group id) cannot be reused by an
unrelated process while signals are still being sent.

Windows (best effort, not covered by the test suite): the command starts in a new process group
and ``kill_group`` runs ``taskkill /T /F`` on the tree.
"""

from __future__ import annotations

import os
import queue
import selectors
import signal as _signal
import subprocess
import threading
import time
from typing import IO, Dict, List, Optional, Tuple

__all__ = ["ShellProcess"]

_POSIX = os.name == "posix"


class ShellProcess:
    """``shell -c command`` with stdout and stderr merged into one pipe."""

    def __init__(self, argv: List[str], cwd: str, env: Optional[Dict[str, str]] = None) -> None:
        if not os.path.isdir(cwd):
            raise FileNotFoundError(f"working directory does not exist: {cwd}; create it or pass another cwd")
        kwargs = {
            "cwd": cwd,
            "env": env,
            "stdin": subprocess.DEVNULL,
            "stdout": subprocess.PIPE,
            "stderr": subprocess.STDOUT,
        }
        if _POSIX:
            kwargs["start_new_session"] = True
        else:  # pragma: no cover - Windows
            kwargs["creationflags"] = getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
        self.proc = subprocess.Popen(argv, **kwargs)  # type: ignore[call-overload]
        self.pid = self.proc.pid
        self._lock = threading.Lock()
        self._reaped = False
        self._reader = _SelectorReader(self.proc.stdout) if _POSIX else _ThreadReader(self.proc.stdout)

    def read(self, timeout: float) -> Optional[bytes]:
        """Output that arrived within ``timeout`` seconds: ``b""`` when none, None at end of output."""
        return self._reader.read(timeout)

    def exited(self) -> bool:
        """True once the shell itself exited (its children may still run). Does not reap on POSIX."""
        with self._lock:
            if self._reaped:
                return True
            if hasattr(os, "waitid"):
                try:
                    info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
                except ChildProcessError:
                    return True
                return info is not None
            if self.proc.poll() is not None:  # pragma: no cover - platforms without waitid
                self._reaped = True
            return self._reaped

    def signal_group(self, sig: int) -> None:
        """Send ``sig`` to the whole process group; a no-op once the group is gone or reaped."""
        with self._lock:
            if self._reaped:
                return
            if _POSIX:
                # The shell is unreaped here, so its pid (the session id) cannot have been reused.
                for group in [self.pid, *_session_groups(self.pid)]:
                    try:
                        os.killpg(group, sig)
                    except (ProcessLookupError, PermissionError):
                        pass
            else:  # pragma: no cover - Windows
                subprocess.run(
                    ["taskkill", "/T", "/F", "/PID", str(self.pid)],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )

    def group_alive(self) -> bool:
        """True while a process of the group runs (on Linux: of the session, which holds the
        group and any group a member made). Zombies do not count where ``/proc`` tells them apart
        (Linux): the shell stays an unreaped zombie until the last signal was sent. Elsewhere any
        member of the group counts, zombies included."""
        if not _POSIX:  # pragma: no cover - Windows
            return not self.exited()
        running = _session_running(self.pid)
        if running is not None:
            return running
        try:
            os.killpg(self.pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def kill_group(self, grace: float = 0.3) -> None:
        """SIGTERM the group, wait up to ``grace`` seconds for it to go, then SIGKILL it. SIGKILL
        is sent even when the wait is interrupted (a second Ctrl+C), which then propagates."""
        if not _POSIX:  # pragma: no cover - Windows
            self.signal_group(0)
            return
        try:
            self.signal_group(_signal.SIGTERM)
            deadline = time.monotonic() + grace
            pause = 0.005
            while time.monotonic() < deadline:
                if self.exited() and not self.group_alive():
                    break
                time.sleep(min(pause, max(deadline - time.monotonic(), 0)))
                pause = min(pause * 2, 0.05)  # a group ignoring SIGTERM is not scanned 100 times a second
        finally:
            self.signal_group(_signal.SIGKILL)

    def reap(self) -> int:
        """Wait for the shell and return its exit code (negative: killed by that signal)."""
        with self._lock:
            code = self.proc.wait()
            self._reaped = True
        self._reader.close()
        return code


def _session_scan(sid: int) -> Optional[List[Tuple[int, int, bool]]]:
    """``(pid, process group, running)`` of every process in session ``sid`` (running: not a
    zombie), from ``/proc``; None when ``/proc`` cannot say (not Linux, or not this process's PID
    namespace: the session leader, an unreaped child of ours, must be listed)."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    members: List[Tuple[int, int, bool]] = []
    for name in names:
        if not name.isdigit():
            continue
        try:
            fd = os.open(f"/proc/{name}/stat", os.O_RDONLY)  # not open(): a scan is 2.5x faster
        except OSError:  # gone meanwhile
            continue
        try:
            stat = os.read(fd, 4096)
        except OSError:
            continue
        finally:
            os.close(fd)
        fields = stat[stat.rfind(b")") + 2 :].split()  # the name may hold spaces and parentheses
        try:  # state, parent, process group, session...
            state, group, session = fields[0], int(fields[2]), int(fields[3])
        except (IndexError, ValueError):
            return None
        if session == sid:
            members.append((int(name), group, state not in (b"Z", b"X")))
    return members if any(pid == sid for pid, _, _ in members) else None


def _session_running(sid: int) -> Optional[bool]:
    """Whether a process of session ``sid`` is running (not a zombie); None when ``/proc`` cannot say."""
    members = _session_scan(sid)
    return None if members is None else any(running for _, _, running in members)


def _session_groups(sid: int) -> List[int]:
    """The process groups of session ``sid`` other than its leader's, with a running member
    (none where ``/proc`` cannot say)."""
    members = _session_scan(sid) or []
    return sorted({group for _, group, running in members if running and group != sid})


class _SelectorReader:
    """Reads a pipe without blocking past ``timeout``, so a background job that keeps the pipe
    open can never hang the tool after the shell has exited."""

    def __init__(self, pipe: IO[bytes]) -> None:
        self._pipe = pipe
        self._fd = pipe.fileno()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._fd, selectors.EVENT_READ)
        self._eof = False

    def read(self, timeout: float) -> Optional[bytes]:
        if self._eof:
            return None
        if not self._selector.select(timeout):
            return b""
        data = os.read(self._fd, 65536)
        if not data:
            self._eof = True
            return None
        return data

    def close(self) -> None:
        self._selector.close()
        self._pipe.close()


class _ThreadReader:  # pragma: no cover - used where selectors cannot wait on pipes (Windows)
    def __init__(self, pipe: IO[bytes]) -> None:
        self._pipe = pipe
        self._queue: queue.Queue[Optional[bytes]] = queue.Queue()
        self._eof = False
        threading.Thread(target=self._pump, name="agentcore-bash-reader", daemon=True).start()

    def _pump(self) -> None:
        try:
            while True:
                data = self._pipe.read1(65536)  # type: ignore[attr-defined]
                if not data:
                    break
                self._queue.put(data)
        except (OSError, ValueError):
            pass
        self._queue.put(None)

    def read(self, timeout: float) -> Optional[bytes]:
        if self._eof:
            return None
        try:
            data = self._queue.get(timeout=timeout)
        except queue.Empty:
            return b""
        if data is None:
            self._eof = True
        return data

    def close(self) -> None:
        pass

"""Process helpers shared by the tests: a tool killed its whole process group; a session handle
inherited by a forked child."""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path
from typing import Any, List


def alive(pid: int) -> bool:
    """True while ``pid`` runs. A zombie counts as dead: orphans re-parented to an init that does
    not reap them (as in some containers) stay zombies forever, yet ``os.kill(pid, 0)`` succeeds."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_dead(pids: List[int], within: float = 1.0) -> List[int]:
    """The pids still alive after ``within`` seconds (polled)."""
    deadline = time.monotonic() + within
    while True:
        still = [p for p in pids if alive(p)]
        if not still or time.monotonic() >= deadline:
            return still
        time.sleep(0.01)


def fork() -> int:
    """``os.fork()`` without Python 3.12+'s "This process is multi-threaded, use of fork() may lead
    to deadlocks in the child" DeprecationWarning: the tests that call it fork a multi-threaded
    process on purpose (what a forked child may and may not do is what they check)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r"This process .* is multi-threaded", DeprecationWarning)
        return _os_fork()  # the real one, also while a test watches os.fork


_os_fork = getattr(os, "fork", None)


def append_in_forked_child(session: Any, message: Any) -> bool:
    """Fork; in the child append ``message`` to ``session`` (a handle opened by this process),
    then close it. True when the child's append was refused as a forked child's
    (``SessionError("storage")``) and its close() returned."""
    from agentcore.session import SessionError

    pid = fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit status
        code = 1
        try:
            try:
                session.append_message(message)
            except SessionError as exc:
                code = 0 if exc.code == "storage" and "forked child" in str(exc) else 2
            session.close()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0

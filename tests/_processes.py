"""Process helpers shared by the tests: a tool killed its whole process group; a session handle
inherited by a forked child."""

from __future__ import annotations

import os
import time
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


def append_in_forked_child(session: Any, message: Any) -> bool:
    """Fork; in the child append ``message`` to ``session`` (a handle opened by this process),
    then close it. True when the child's append was refused as a forked child's
    (``SessionError("storage")``) and its close() returned."""
    from agentcore.session import SessionError

    pid = os.fork()
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

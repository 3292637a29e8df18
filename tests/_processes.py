"""Process helpers shared by the tests that check a tool killed its whole process group."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import List


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

"""The process-wide instrumentation state (owner: this package; reset by :func:`uninstrument`
and by the tests' fixture).

* ``telemetry``: the :class:`~agentcore_otel._recorder.Telemetry` of the last ``instrument()``
  call, or None (then new runs are not traced).
* ``runs``: the run being traced per agent (``id(agent)``), from ``agent_start`` to ``agent_end``.
  A run started before ``uninstrument()`` is still finished by the telemetry it started with.
* ``by_signal``: the same runs by ``id(agent.signal)``, for the ``transform_context`` hook, which
  receives the run's signal but not its agent.
* ``paused``: per agent (weakly: an agent that is gone takes its entry with it), the span context
  of its last run when that run paused for approvals, with the waiting call ids; the run that
  resumes them (``continue_()``) links to it. One small entry per paused agent.
* ``exit_hook``: whether the interpreter-exit hook that ends the spans of runs still in progress
  is registered (once per process, at the first traced run; tests need no reset).

No OpenTelemetry import here: the entry-point module reads this on every event.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Dict, FrozenSet, Optional, Tuple

telemetry: Optional[Any] = None
runs: Dict[int, Any] = {}
by_signal: Dict[int, Any] = {}
exit_hook = False
paused: weakref.WeakKeyDictionary[Any, Tuple[Any, FrozenSet[str]]] = weakref.WeakKeyDictionary()
lock = threading.Lock()


def add_run(agent: Any, run: Any) -> None:
    with lock:
        runs[id(agent)] = run
        if run.signal is not None:
            by_signal[id(run.signal)] = run


def remove_run(agent: Any, run: Any) -> None:
    signal = run.signal
    with lock:
        if runs.get(id(agent)) is run:
            del runs[id(agent)]
        if signal is not None and by_signal.get(id(signal)) is run:
            del by_signal[id(signal)]

"""The process-wide instrumentation state (owner: this package; reset by :func:`uninstrument`
and by the tests' fixture).

* ``telemetry``: the :class:`~agentcore_otel._recorder.Telemetry` of the last ``instrument()``
  call, or None (then new runs are not traced).
* ``runs``: the run being traced per agent (``id(agent)``), from ``agent_start`` to ``agent_end``.
  A run started before ``uninstrument()`` is still finished by the telemetry it started with.
* ``by_signal``: the same runs by ``id(agent.signal)``, for the ``transform_context`` hook, which
  receives the run's signal but not its agent.

No OpenTelemetry import here: the entry-point module reads this on every event.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, Optional

telemetry: Optional[Any] = None
runs: Dict[int, Any] = {}
by_signal: Dict[int, Any] = {}
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

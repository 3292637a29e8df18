"""The agentcore plugin module named by the entry point ``agentcore = otel = agentcore_otel.plugin``.

Its hooks do nothing until :func:`agentcore_otel.instrument` was called: ``on_lifecycle_event``
(never called per streamed token) returns after one dictionary look-up, ``transform_context``
after one truthiness check. OpenTelemetry itself is
imported only by ``instrument()``. With ``AGENTCORE_OTEL=1`` in the environment, importing this
module (which agentcore does when the first agent is created) instruments with the global tracer
and meter providers; ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` then also turns
on content capture.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Generator, List, Optional, Set

from agentcore.hookspecs import hookimpl

from . import _state

ENV_ENABLE = "AGENTCORE_OTEL"
ENV_CAPTURE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_TRUE = ("1", "true", "yes", "on")
_log = logging.getLogger("agentcore_otel")
_reported: Set[str] = set()


def _report(where: str) -> None:
    """Log a failure of the instrumentation itself (once per hook and event kind): telemetry
    must never change what a run does, so nothing is raised into agentcore."""
    if where not in _reported:
        _reported.add(where)
        _log.warning(
            "agentcore-otel: %s failed; the run is unaffected, its telemetry may be incomplete", where, exc_info=True
        )


@hookimpl(wrapper=True)
def on_lifecycle_event(event: Any, agent: Any) -> Generator[None, Any, Any]:
    """Feed the event to the traced run of ``agent`` (or start one on ``agent_start``), then let
    the other implementations see it.

    ``on_lifecycle_event``, not ``on_event``: the telemetry records nothing per streamed token, so
    agentcore does not call this module (nor copy the partial message) for ``message_update``. A
    wrapper, so the event reaches the telemetry before any other implementation is called: one
    of them raising ends the pluggy call for those after it, and must not keep ``agent_end`` from
    ending the run's spans. Their exception propagates unchanged (agentcore logs it).
    """
    _observe(event, agent)
    return (yield)


def _observe(event: Any, agent: Any) -> None:
    kind = event.type
    run = _state.runs.get(id(agent))
    try:
        if kind == "agent_start":
            telemetry = _state.telemetry
            if telemetry is not None:
                telemetry.start_run(agent)
            elif run is not None:  # a stale run of this agent, instrumentation since turned off
                run.finish(None, abandoned=True)
        elif run is not None:
            run.on_event(kind, event)
        elif kind == "compaction_end":  # before the run (threshold), between its two loops (overflow), manual
            telemetry = _state.telemetry
            if telemetry is not None:
                telemetry.record_compaction(agent, getattr(event, "usage", None))
    except Exception:  # noqa: BLE001 - see _report
        _report(f"on_lifecycle_event({kind})")


@hookimpl(trylast=True)
def transform_context(messages: List[Any], signal: Any) -> Optional[List[Any]]:
    """Open the ``chat`` span just before the model request (called last, after the other
    plugins' transformations, so ``messages`` is what the model will be sent). Never changes the
    messages."""
    if _state.by_signal:
        run = _state.by_signal.get(id(signal))
        if run is not None:
            try:
                run.start_chat(messages)
            except Exception:  # noqa: BLE001 - an exception here would fail the run
                _report("transform_context")
    return None


def _autoinstrument() -> None:
    if os.environ.get(ENV_ENABLE, "").strip().lower() not in _TRUE:
        return
    from . import instrument

    capture = os.environ.get(ENV_CAPTURE, "").strip().lower() in _TRUE
    instrument(capture_content=capture)


_autoinstrument()

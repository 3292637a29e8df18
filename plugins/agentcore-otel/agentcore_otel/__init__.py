"""agentcore-otel: OpenTelemetry traces and metrics for agentcore agents.

Installing the distribution registers :mod:`agentcore_otel.plugin` through the ``agentcore``
entry-point group; it records nothing until :func:`instrument` is called (or ``AGENTCORE_OTEL=1``
is set). Spans and metrics follow the OpenTelemetry GenAI semantic conventions: one
``invoke_agent`` span per run, a ``chat {model}`` span per model request and an
``execute_tool {tool}`` span per tool call, and the ``gen_ai.client.token.usage``,
``gen_ai.client.operation.duration``, ``gen_ai.execute_tool.duration`` and
``gen_ai.invoke_agent.duration`` histograms.
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Optional

from . import _state

__all__ = ["instrument", "uninstrument", "is_instrumented"]


def instrument(
    tracer_provider: Optional[Any] = None, meter_provider: Optional[Any] = None, capture_content: bool = False
) -> None:
    """Trace every agent run that starts from now on, in this process.

    ``tracer_provider``/``meter_provider``: the OpenTelemetry providers to use; None means the
    global ones (``opentelemetry.trace.set_tracer_provider``; a global provider set later is
    picked up, as the OpenTelemetry API's proxies do). ``capture_content=True`` records prompts,
    responses, system instructions and tool arguments/results as the conventions' opt-in
    attributes (JSON strings); off by default. API keys and header values of the agent and its
    model, and environment variables named like keys, are replaced by ``[REDACTED]`` in anything
    recorded, content or not.

    Calling it again replaces the providers and options for runs that start afterwards; runs in
    progress finish with the settings they started with. The first traced run registers an
    ``atexit`` hook that ends, as errors, the spans of runs still in progress when the
    interpreter exits (agentcore's run threads are daemons), so they are exported too. With
    ``AGENTCORE_DISABLE_PLUGIN_AUTOLOAD=1`` agentcore does not load this plugin by itself: a
    warning says so, and only agents given ``plugins=[agentcore_otel.plugin]`` are traced.
    """
    from agentcore.plugins import AUTOLOAD_ENV

    from ._recorder import Telemetry

    if os.environ.get(AUTOLOAD_ENV, "").strip().lower() in ("1", "true", "yes", "on"):
        warnings.warn(
            f"agentcore-otel: {AUTOLOAD_ENV} is set, so agentcore does not load this "
            f"plugin: pass Agent(plugins=[agentcore_otel.plugin]) to trace an agent",
            RuntimeWarning,
            stacklevel=2,
        )

    telemetry = Telemetry(tracer_provider, meter_provider, bool(capture_content))
    with _state.lock:
        _state.telemetry = telemetry


def uninstrument() -> None:
    """Stop tracing new runs. Runs in progress still end their spans."""
    with _state.lock:
        _state.telemetry = None


def is_instrumented() -> bool:
    """True between :func:`instrument` and :func:`uninstrument`."""
    return _state.telemetry is not None

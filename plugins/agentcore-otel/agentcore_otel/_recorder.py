"""Turning one agent run's events into spans and metric points.

:class:`Telemetry` is what :func:`agentcore_otel.instrument` configured (a tracer, the four
histograms, the capture flag). :class:`RunTrace` follows one run of one agent: it is created on
``agent_start`` and finished on ``agent_end``, and every method runs on that run's thread (agentcore
calls ``on_lifecycle_event`` and ``transform_context`` there), so a run needs no lock of its own.

Span tree of a run::

    invoke_agent {name}          INTERNAL  agent_start .. agent_end; parent: the caller's span
    ├── chat {model}             CLIENT    transform_context (just before the request) .. message_end
    ├── execute_tool {tool}      INTERNAL  tool_execution_start .. tool_execution_end
    ├── execute_tool {tool}      (parallel calls are siblings, matched by tool_call_id)
    └── chat {model}

A run that pauses for approvals lists the waiting call ids on its agent span
(``agentcore.approval.pending``); the run that resumes them (``continue_()``) is a new trace whose
agent span links to the paused one (link attribute ``agentcore.link.reason`` ``approval_resume``).

While a run is active its ``invoke_agent`` span is the current span on the run thread (the
``chat`` span during a model request, the ``execute_tool`` span while a lone or sequential call
executes), so spans made by an HTTP-client instrumentation or by code inside the run are parented
under them; the worker threads of tools see it when agentcore runs them in a copy of the run
thread's context.
"""

from __future__ import annotations

import atexit
import functools
import threading
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from . import _content as content
from . import _semconv as sc
from . import _state

_MAX_DESCRIPTION = 1024
_SCOPE = "agentcore_otel"


@functools.cache
def _version() -> str:
    """This distribution's version (read once: metadata look-ups cost about a millisecond)."""
    try:
        from importlib.metadata import version

        return version("agentcore-otel")
    except Exception:  # noqa: BLE001 - running from a source tree without metadata
        return "0.0.0"


def _histogram(meter: Any, name: str, unit: str, description: str, buckets: Any) -> Any:
    return meter.create_histogram(name, unit=unit, description=description, explicit_bucket_boundaries_advisory=buckets)


class Telemetry:
    """The tracer, meter instruments and options one :func:`instrument` call set up."""

    def __init__(self, tracer_provider: Any = None, meter_provider: Any = None, capture_content: bool = False) -> None:
        version = _version()
        self.capture_content = capture_content
        self.tracer = trace.get_tracer(_SCOPE, version, tracer_provider=tracer_provider)
        meter = metrics.get_meter(_SCOPE, version, meter_provider=meter_provider)
        self.token_usage = _histogram(
            meter, sc.METRIC_TOKEN_USAGE, "{token}", "Number of input and output tokens used", sc.TOKEN_BUCKETS
        )
        self.operation_duration = _histogram(
            meter, sc.METRIC_OPERATION_DURATION, "s", "GenAI operation duration", sc.DURATION_BUCKETS
        )
        self.tool_duration = _histogram(
            meter, sc.METRIC_TOOL_DURATION, "s", "Duration of tool executions", sc.DURATION_BUCKETS
        )
        self.agent_duration = _histogram(
            meter, sc.METRIC_AGENT_DURATION, "s", "Duration of agent invocations", sc.DURATION_BUCKETS
        )

    def start_run(self, agent: Any) -> None:
        """Begin tracing the run of ``agent`` that just emitted ``agent_start``."""
        previous = _state.runs.get(id(agent))
        if previous is not None:  # its agent_end never came (the agent was reset mid-run)
            previous.finish(None, abandoned=True)
        run = RunTrace(self, agent)
        _state.add_run(agent, run)
        _register_exit_hook()

    def record_compaction(self, agent: Any, usage: Any) -> None:
        """Record the token usage of a compaction's summary requests (``compaction_end``'s
        ``usage``: every summary request once, failed and aborted compactions included) under the
        model that answered them: the compactor's summary model, else the agent's."""
        if usage is None or not (usage.input or usage.output or usage.cache_read or usage.cache_write):
            return
        compactor = getattr(agent, "compactor", None)
        model = getattr(compactor, "model", None) or getattr(getattr(agent, "state", None), "model", None)
        _, attrs = sc.model_attributes(model)
        attrs[sc.OPERATION_NAME] = sc.OP_CHAT
        _record_tokens(self.token_usage, usage, attrs)


class _Attached:
    """A context attached on the run thread, detached from the same thread only."""

    __slots__ = ("token", "thread")

    def __init__(self, ctx: Any) -> None:
        self.token: Optional[Any] = otel_context.attach(ctx)  # None once detached
        self.thread = threading.get_ident()

    def detach(self) -> None:
        if self.token is not None and self.thread == threading.get_ident():
            otel_context.detach(self.token)
        self.token = None


class _Usage:
    """Running token and cost totals of one run: the responses to its model requests, the
    results of its tool calls and the summary requests of its compactions (never those of
    messages the run was given: a prompt's history)."""

    __slots__ = ("input", "output", "cache_read", "cache_write", "cost")

    def __init__(self) -> None:
        self.input = self.output = self.cache_read = self.cache_write = 0
        self.cost = 0.0

    def add(self, usage: Any) -> None:
        if usage is None:
            return
        self.input += int(usage.input or 0)
        self.output += int(usage.output or 0)
        self.cache_read += int(usage.cache_read or 0)
        self.cache_write += int(usage.cache_write or 0)
        if usage.cost is not None:
            self.cost += float(usage.cost.total or 0.0)

    def attributes(self) -> Dict[str, Any]:
        out = sc.usage_attributes(self)
        out[sc.COST_TOTAL] = self.cost
        return out


class _Chat:
    __slots__ = ("span", "attached", "started", "metric_attrs", "model", "server")

    def __init__(
        self, span: Any, attached: _Attached, metric_attrs: Dict[str, Any], model: Any, server: Dict[str, Any]
    ) -> None:
        self.span = span
        self.attached = attached
        self.started = time.perf_counter()
        self.metric_attrs = metric_attrs
        self.model = model  # the agent's model when the request was about to be sent
        self.server = server  # server.address/port: set on the span as it ends (see _name_request_model)


class RunTrace:
    """The spans and totals of one agent run (see the module docstring for the tree)."""

    def __init__(self, telemetry: Telemetry, agent: Any) -> None:
        self.telemetry = telemetry
        self.agent = agent
        self.signal = agent.signal  # keeps the id() key of the signal map valid
        self.redact = content.Redactor.for_agent(agent)
        self.started = time.perf_counter()
        self.usage = _Usage()
        self.turns = 0
        self.chat: Optional[_Chat] = None
        self.requested = False  # a model request was sent whose response has not ended yet
        # open tool spans by tool_call_id; a list because models do repeat ids within a batch
        # (ends then match first-started first)
        self.tools: Dict[str, List[Tuple[Any, float, str]]] = {}
        self.tool_attached: Optional[Tuple[Any, _Attached]] = None  # see _make_current
        # ended calls whose tool-result message is due: only those results' usage counts
        self.results_due: Dict[str, int] = {}
        self.tool_descriptions: Optional[Dict[str, str]] = None
        self.last_failure: Optional[Tuple[str, str]] = None  # (error.type, message)
        self.awaiting: List[str] = []  # ids of the calls this run left waiting for approval

        model = agent.state.model
        _, model_attrs = sc.model_attributes(model)
        self.name = _agent_name(agent)
        attrs: Dict[str, Any] = {sc.OPERATION_NAME: sc.OP_INVOKE_AGENT, **model_attrs}
        if self.name:
            attrs[sc.AGENT_NAME] = self.name
        description = getattr(agent, "description", None)
        if isinstance(description, str) and description:
            attrs[sc.AGENT_DESCRIPTION] = sc.clean(description)
        conversation = _conversation_id(agent)
        if conversation:
            attrs[sc.CONVERSATION_ID] = conversation
        if telemetry.capture_content:
            instructions = content.system_instructions(agent.state.system_prompt)
            if instructions:
                attrs[sc.SYSTEM_INSTRUCTIONS] = content.to_json(instructions, self.redact)
        self.metric_attrs: Dict[str, Any] = {
            sc.OPERATION_NAME: sc.OP_INVOKE_AGENT,
            sc.PROVIDER_NAME: model_attrs[sc.PROVIDER_NAME],
            sc.REQUEST_MODEL: model_attrs[sc.REQUEST_MODEL],
        }
        if self.name:
            self.metric_attrs[sc.AGENT_NAME] = self.name
        self.conversation = conversation

        parent = otel_context.get_current()  # the caller's span, when the core propagates it
        span_name = f"{sc.OP_INVOKE_AGENT} {self.name}" if self.name else sc.OP_INVOKE_AGENT
        self.span = telemetry.tracer.start_span(
            span_name, context=parent, kind=SpanKind.INTERNAL, attributes=attrs, links=_resume_links(agent)
        )
        self.context = trace.set_span_in_context(self.span, parent)
        self.attached = _Attached(self.context)

    # ------------------------------------------------------------------ events

    def on_event(self, kind: str, event: Any) -> None:
        """Handle one agent event (``message_update`` never reaches here)."""
        if kind == "message_end":
            message = event.message
            role = getattr(message, "role", None)
            if role == "assistant":
                self.end_chat(message)
            elif role == "toolResult":
                self._count_result(message)
        elif kind == "tool_execution_start":
            self.start_tool(event)
        elif kind == "tool_execution_end":
            self.end_tool(event)
        elif kind == "turn_start":
            self.turns += 1
        elif kind == "tool_approval_request":
            self.awaiting.append(sc.clean(event.tool_call_id))
        elif kind == "compaction_end":  # a compaction during the run: its summary requests count
            usage = getattr(event, "usage", None)
            self.usage.add(usage)
            self.telemetry.record_compaction(self.agent, usage)
        elif kind == "agent_end":
            self.finish(event)

    # ------------------------------------------------------------------ chat spans

    def start_chat(self, messages: List[Any]) -> None:
        """Open the ``chat`` span of the model request about to be sent (``transform_context``)."""
        self.requested = True
        if self.chat is not None:  # a request that never produced message_end
            self._end_chat_span(self.chat, None, sc.ERROR_OTHER, "no response was recorded")
        agent = self.agent
        model_id, attrs = sc.model_attributes(agent.state.model)
        metric_attrs = dict(attrs)
        server = {key: attrs.pop(key) for key in _SERVER_KEYS if key in attrs}
        metric_attrs[sc.OPERATION_NAME] = sc.OP_CHAT
        attrs[sc.OPERATION_NAME] = sc.OP_CHAT
        temperature = getattr(agent, "temperature", None)
        if isinstance(temperature, (int, float)):
            attrs[sc.REQUEST_TEMPERATURE] = float(temperature)
        max_tokens = getattr(agent, "max_tokens", None)
        if isinstance(max_tokens, int):
            attrs[sc.REQUEST_MAX_TOKENS] = max_tokens
        if self.name:
            attrs[sc.AGENT_NAME] = self.name
        if self.conversation:
            attrs[sc.CONVERSATION_ID] = self.conversation
        if self.telemetry.capture_content:
            attrs[sc.INPUT_MESSAGES] = content.to_json(content.input_messages(messages), self.redact)
            instructions = content.system_instructions(agent.state.system_prompt)
            if instructions:
                attrs[sc.SYSTEM_INSTRUCTIONS] = content.to_json(instructions, self.redact)
        span = self.telemetry.tracer.start_span(
            f"{sc.OP_CHAT} {model_id}", context=self.context, kind=SpanKind.CLIENT, attributes=attrs
        )
        attached = _Attached(trace.set_span_in_context(span, self.context))
        self.chat = _Chat(span, attached, metric_attrs, agent.state.model, server)

    def end_chat(self, message: Any) -> None:
        """An assistant ``message`` ended: the response to the open request (close its chat span,
        count its usage), or one the run was given (a prompt's or a steering message, not counted),
        or the failure message of a run that failed before any request."""
        usage = getattr(message, "usage", None)
        stop_reason = getattr(message, "stop_reason", None)
        failure = sc.error_type(stop_reason, getattr(message, "error_message", None))
        description = self._describe(message) if failure is not None else ""
        self.last_failure = (failure, description) if failure is not None else None
        if self.requested:  # not a message the run was given
            self.requested = False
            self.usage.add(usage)
        chat, self.chat = self.chat, None
        if chat is None:  # a given message, a failure before any request, or no span could start
            return
        try:
            _name_request_model(chat, message)
            self._set_response_attributes(chat, message, usage, stop_reason)
        finally:  # the span ends and the context is restored even if an attribute failed
            self._end_chat_span(chat, usage, failure, description)

    def _set_response_attributes(self, chat: _Chat, message: Any, usage: Any, stop_reason: Any) -> None:
        reason = sc.finish_reason(stop_reason)
        response_model = getattr(message, "response_model", None) or getattr(message, "model", None)
        attrs: Dict[str, Any] = {sc.RESPONSE_FINISH_REASONS: (reason,)}
        if response_model:
            attrs[sc.RESPONSE_MODEL] = chat.metric_attrs[sc.RESPONSE_MODEL] = sc.clean(response_model)
        response_id = getattr(message, "response_id", None)
        if response_id:
            attrs[sc.RESPONSE_ID] = sc.clean(response_id)
        if usage is not None:
            attrs.update(sc.usage_attributes(usage))
            if usage.cost is not None:
                attrs[sc.COST_TOTAL] = float(usage.cost.total or 0.0)
        if self.telemetry.capture_content:
            attrs[sc.OUTPUT_MESSAGES] = content.to_json(content.output_messages(message, reason), self.redact)
        chat.span.set_attributes(attrs)

    def _end_chat_span(self, chat: _Chat, usage: Any, failure: Optional[str], description: str) -> None:
        span = chat.span
        metric_attrs = chat.metric_attrs
        if chat.server:
            span.set_attributes(chat.server)
        if failure is not None:
            span.set_attribute(sc.ERROR_TYPE, failure)
            span.set_status(Status(StatusCode.ERROR, description))
            metric_attrs = dict(metric_attrs)
            metric_attrs[sc.ERROR_TYPE] = failure
        try:
            span.end()
        finally:  # the context is restored and the metrics recorded even if a processor raised
            chat.attached.detach()
            telemetry = self.telemetry
            telemetry.operation_duration.record(time.perf_counter() - chat.started, metric_attrs)
            if usage is not None and (usage.input or usage.output or usage.cache_read or usage.cache_write):
                _record_tokens(telemetry.token_usage, usage, chat.metric_attrs)

    # ------------------------------------------------------------------ tool spans

    def start_tool(self, event: Any) -> None:
        """Open the ``execute_tool`` span of one call, as a child of this run's agent span (the
        call may execute on any worker thread: the span is found again by its tool_call_id)."""
        name = sc.clean(event.tool_name)
        attrs: Dict[str, Any] = {
            sc.OPERATION_NAME: sc.OP_EXECUTE_TOOL,
            sc.TOOL_NAME: name,
            sc.TOOL_CALL_ID: sc.clean(event.tool_call_id),
            sc.TOOL_TYPE: "function",
        }
        description = self._tool_description(name)
        if description:
            attrs[sc.TOOL_DESCRIPTION] = description
        if self.telemetry.capture_content:
            attrs[sc.TOOL_CALL_ARGUMENTS] = content.to_json(event.args, self.redact)
        span = self.telemetry.tracer.start_span(
            f"{sc.OP_EXECUTE_TOOL} {name}", context=self.context, kind=SpanKind.INTERNAL, attributes=attrs
        )
        self._make_current(span)
        self.tools.setdefault(event.tool_call_id, []).append((span, time.perf_counter(), name))

    def _make_current(self, span: Any) -> None:
        """Make a tool span the run thread's current span while its call is the only one open.

        Calls that run one at a time (a batch of one, or a sequential batch) start executing
        between their start and end events, so a worker thread that copies the run thread's
        context (and an inline call on the run thread) sees its own ``execute_tool`` span: spans
        the tool makes, a sub-agent's run included, nest under it. A parallel batch emits every
        start before any call executes: the second start hands the context back to the agent
        span, since no single tool span is right for all the workers; when all but one of them
        ended at once (a failed preflight: an unknown tool, invalid arguments, a blocked call),
        :meth:`_make_lone_current` gives it to the one left to execute.
        """
        if self.tools:  # a parallel batch
            if self.tool_attached is not None:
                self.tool_attached[1].detach()
                self.tool_attached = None
            return
        self.tool_attached = (span, _Attached(trace.set_span_in_context(span, self.context)))

    def _make_lone_current(self) -> None:
        """After a call ended: when exactly one call of the batch is still open, its span becomes
        the run thread's current span (see :meth:`_make_current`). During a parallel batch's
        preflight that is before any worker copies the context; later it only affects the run
        thread until that call ends too."""
        if self.tool_attached is not None or len(self.tools) != 1:
            return
        (entries,) = self.tools.values()
        if len(entries) == 1:
            span = entries[0][0]
            self.tool_attached = (span, _Attached(trace.set_span_in_context(span, self.context)))

    def end_tool(self, event: Any) -> None:
        """Close the span of the call that ended, with its error status or its captured result.
        The span ends and its duration is recorded even when reading the result fails."""
        pending = self.tools.get(event.tool_call_id)
        if not pending:  # started before instrument() was called
            return
        self.results_due[event.tool_call_id] = self.results_due.get(event.tool_call_id, 0) + 1
        span, started, name = pending.pop(0)
        if not pending:
            del self.tools[event.tool_call_id]
        if self.tool_attached is not None and self.tool_attached[0] is span:
            self.tool_attached[1].detach()
            self.tool_attached = None
        self._make_lone_current()
        metric_attrs: Dict[str, Any] = {sc.OPERATION_NAME: sc.OP_EXECUTE_TOOL, sc.TOOL_NAME: name}
        try:
            text = content.result_text(getattr(event.result, "content", None))
            if event.is_error:
                failure = sc.ERROR_ABORTED if self._aborted() else sc.ERROR_TOOL
                span.set_attribute(sc.ERROR_TYPE, failure)
                span.set_status(Status(StatusCode.ERROR, self._cap(self.redact(text))))
                metric_attrs[sc.ERROR_TYPE] = failure
            elif self.telemetry.capture_content:
                span.set_attribute(sc.TOOL_CALL_RESULT, content.to_json(text, self.redact))
        finally:
            span.end()
            self.telemetry.tool_duration.record(time.perf_counter() - started, metric_attrs)

    def _count_result(self, message: Any) -> None:
        """Count the usage of a tool-result message (a sub-agent's, say) when it is the result of
        a call of this run, not one of the messages the run was given."""
        call_id: Any = getattr(message, "tool_call_id", None)
        due = self.results_due.get(call_id, 0)
        if not due:
            return
        if due == 1:
            del self.results_due[call_id]
        else:
            self.results_due[call_id] = due - 1
        self.usage.add(getattr(message, "usage", None))

    def _tool_description(self, name: str) -> Optional[str]:
        if self.tool_descriptions is None:
            found: Dict[str, str] = {}
            for tool in getattr(self.agent.state, "tools", ()) or ():
                tool_name = getattr(tool, "name", None)
                text = getattr(tool, "description", None)
                if isinstance(tool_name, str) and isinstance(text, str) and text:
                    found[sc.clean(tool_name)] = sc.clean(text)
            self.tool_descriptions = found
        return self.tool_descriptions.get(name)

    # ------------------------------------------------------------------ the end of the run

    def finish(self, event: Any, abandoned: bool = False, why: str = "the run was abandoned before agent_end") -> None:
        """Close everything still open and the agent span (``agent_end``, or an abandoned run:
        ``why`` is then its error description).

        Every span is ended even when ending another one raised (a span processor or a meter
        that fails): the first such exception is raised once all are ended. The run thread's
        context is restored whatever fails here (pooled threads must not keep a finished run's
        span as their current span)."""
        _state.remove_run(self.agent, self)
        chat, self.chat = self.chat, None
        steps: List[Callable[[], None]] = []
        if chat is not None:
            failure = sc.ERROR_ABORTED if self._aborted() else sc.ERROR_OTHER
            steps.append(lambda: self._end_chat_span(chat, None, failure, "the run ended before the response"))
        steps.append(self._end_open_tools)
        steps.append(lambda: self._end_agent_span(abandoned, why))
        try:
            _run_all(steps)
        finally:
            if chat is not None:
                chat.attached.detach()
            self.attached.detach()
            self.agent = None  # the registry no longer holds it; do not keep the agent alive

    def _end_open_tools(self) -> None:
        if self.tool_attached is not None:
            self.tool_attached[1].detach()
            self.tool_attached = None
        open_tools = [entry for entries in self.tools.values() for entry in entries]
        self.tools.clear()
        _run_all(functools.partial(self._end_open_tool, *entry) for entry in open_tools)

    def _end_open_tool(self, span: Any, started: float, name: str) -> None:
        try:
            span.set_attribute(sc.ERROR_TYPE, sc.ERROR_ABORTED)
            span.set_status(Status(StatusCode.ERROR, "the run ended before the tool call finished"))
            span.end()
        finally:
            self.telemetry.tool_duration.record(
                time.perf_counter() - started,
                {sc.OPERATION_NAME: sc.OP_EXECUTE_TOOL, sc.TOOL_NAME: name, sc.ERROR_TYPE: sc.ERROR_ABORTED},
            )

    def _end_agent_span(self, abandoned: bool, why: str) -> None:
        span = self.span
        attrs = self.usage.attributes()
        attrs[sc.TURNS] = self.turns
        if self.awaiting and not abandoned:
            attrs[sc.APPROVAL_PENDING] = tuple(self.awaiting)
            _remember_pause(self.agent, span.get_span_context(), self.awaiting)
        span.set_attributes(attrs)
        metric_attrs = self.metric_attrs
        failure = self.last_failure
        if abandoned:
            failure = (sc.ERROR_OTHER, why)
        if failure is not None:
            span.set_attribute(sc.ERROR_TYPE, failure[0])
            span.set_status(Status(StatusCode.ERROR, failure[1]))
            metric_attrs = dict(metric_attrs)
            metric_attrs[sc.ERROR_TYPE] = failure[0]
        try:
            span.end()
        finally:
            self.telemetry.agent_duration.record(time.perf_counter() - self.started, metric_attrs)

    # ------------------------------------------------------------------ helpers

    def _aborted(self) -> bool:
        return self.signal is not None and bool(self.signal.aborted)

    def _describe(self, message: Any) -> str:
        text = getattr(message, "error_message", None)
        if not text:
            text = "aborted" if getattr(message, "stop_reason", None) == "aborted" else "error"
        return self._cap(self.redact(str(text)))

    @staticmethod
    def _cap(text: str) -> str:
        """A status description: encodable (see :func:`~agentcore_otel._semconv.clean`), cut."""
        text = sc.clean(text)
        return text if len(text) <= _MAX_DESCRIPTION else text[:_MAX_DESCRIPTION] + "..."


def _register_exit_hook() -> None:
    """Once per process, at the first traced run: :func:`_end_open_runs` at interpreter exit.
    Registered after the tracer provider that is in use was made, so it runs before that
    provider's own exit hook flushes and shuts its processors down (``atexit`` runs in reverse)."""
    with _state.lock:
        if _state.exit_hook:
            return
        _state.exit_hook = True
    atexit.register(_end_open_runs)


def _end_open_runs() -> None:
    """End the spans of the runs still in progress as the interpreter exits (agentcore's run
    threads are daemons: their ``agent_end`` never comes), as abandoned runs, so they are
    exported with the spans they parent."""
    with _state.lock:
        open_runs = list(_state.runs.values())
    for run in open_runs:
        try:
            run.finish(None, abandoned=True, why="the process exited before the run ended")
        except Exception:  # noqa: BLE001 - the others still end; nothing can be reported now
            pass


def _run_all(steps: Iterable[Callable[[], None]]) -> None:
    """Call every step, also after one raised; then raise the first exception (see ``finish``)."""
    first: Optional[Exception] = None
    for step in steps:
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - raised below, once every step ran
            if first is None:
                first = exc
    if first is not None:
        raise first


def _record_tokens(histogram: Any, usage: Any, attrs: Dict[str, Any]) -> None:
    """The two ``gen_ai.client.token.usage`` points (input, output) of one ``usage``."""
    token_attrs = dict(attrs)
    token_attrs[sc.TOKEN_TYPE] = "input"
    histogram.record(sc.input_tokens(usage), token_attrs)
    token_attrs = dict(token_attrs)
    token_attrs[sc.TOKEN_TYPE] = "output"
    histogram.record(int(usage.output or 0), token_attrs)


def _remember_pause(agent: Any, span_context: Any, waiting: List[str]) -> None:
    """Keep the span context of ``agent``'s run that paused with ``waiting`` calls, for the run
    that resumes them (see :func:`_resume_links`)."""
    try:
        with _state.lock:
            _state.paused[agent] = (span_context, frozenset(waiting))
    except TypeError:  # an agent that cannot be weakly referenced: no link
        pass


def _resume_links(agent: Any) -> List[Link]:
    """A link to the run of ``agent`` that paused for the approvals the starting run resumes
    (``continue_()`` after ``approve()``/``deny()``): the transcript still ends with the assistant
    message holding the waiting calls. A run after ``reset()`` or after the calls were abandoned,
    and an agent resumed from its session in another process, have none."""
    try:
        with _state.lock:
            entry = _state.paused.pop(agent, None)
    except TypeError:
        return []
    if entry is None:
        return []
    span_context, waiting = entry
    messages = getattr(getattr(agent, "state", None), "messages", None) or ()
    last = next((m for m in reversed(messages) if getattr(m, "role", None) == "assistant"), None)
    calls = {
        sc.clean(getattr(b, "id", ""))
        for b in getattr(last, "content", None) or ()
        if getattr(b, "type", None) == "toolCall"
    }
    if not waiting & calls:
        return []
    return [Link(span_context, {sc.LINK_REASON: sc.LINK_APPROVAL_RESUME})]


def _agent_name(agent: Any) -> Optional[str]:
    """``agent.name`` when the application set one (agentcore agents have no name by default)."""
    name = getattr(agent, "name", None)
    return sc.clean(name) if isinstance(name, str) and name else None


def _conversation_id(agent: Any) -> Optional[str]:
    """The agent's ``session_id``, else the id of its attached session, else None."""
    session_id = getattr(agent, "session_id", None)
    if isinstance(session_id, str) and session_id:
        return sc.clean(session_id)
    session = getattr(agent, "session", None)
    try:
        value = getattr(session, "id", None) if session is not None else None
    except Exception:  # noqa: BLE001 - a storage without a header yet
        return None
    return sc.clean(value) if isinstance(value, str) and value else None


def _name_request_model(chat: _Chat, message: Any) -> None:
    """Rename ``chat`` after the model its response names, when that is not the agent's model the
    span was opened with: a ``prepare_next_turn`` hook may switch the model of the next request,
    which the agent's state (all a ``transform_context`` hook sees) does not show. The span's name,
    its provider and request model attributes and its metrics' attributes then follow the
    response's ``provider``/``model``; the server attributes (set as the span ends) come from the
    catalog's model of that name, and are left out when the catalog does not know it."""
    provider = getattr(message, "provider", None)
    model_id = getattr(message, "model", None)
    opened = chat.model
    if not isinstance(provider, str) or not isinstance(model_id, str) or "unknown" in (provider, model_id):
        return  # (an AssistantMessage built without them, as a stream function may)
    if provider == getattr(opened, "provider", None) and model_id == getattr(opened, "id", None):
        return
    from agentcore.providers.models import find_model

    found = find_model(provider, model_id)
    name, attrs = sc.model_attributes(found if found is not None else _Named(provider, model_id))
    chat.server = {key: attrs.pop(key) for key in _SERVER_KEYS if key in attrs}
    chat.span.update_name(f"{sc.OP_CHAT} {name}")
    chat.span.set_attributes(attrs)
    for key in _SERVER_KEYS:
        chat.metric_attrs.pop(key, None)
    chat.metric_attrs.update(attrs)
    chat.metric_attrs.update(chat.server)


_SERVER_KEYS = (sc.SERVER_ADDRESS, sc.SERVER_PORT)


class _Named:
    """A model known by provider and id only (no base URL: no server attributes)."""

    __slots__ = ("provider", "id")

    def __init__(self, provider: str, model_id: str) -> None:
        self.provider = provider
        self.id = model_id

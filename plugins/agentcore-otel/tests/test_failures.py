"""Aborts, tool failures, model and provider errors, and failures of the telemetry itself."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from typing import Any

import pytest
from conftest import Otel, add, local_model
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.trace import SpanKind, StatusCode

from agentcore import Agent, AgentTool, AgentToolResult
from agentcore.hookspecs import hookimpl
from agentcore.testing import ScriptedModel, call, error, response

# --------------------------------------------------------------------------- failures


def test_aborted_run_sets_error_status_on_agent_and_tool_spans(otel: Otel) -> None:
    started = threading.Event()

    def wait_for_abort(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        started.set()
        signal.wait(10)
        raise RuntimeError("stopped by abort")

    waiter = AgentTool("waiter", "Waits for abort.", {"type": "object", "properties": {}}, wait_for_abort)
    model = ScriptedModel([response(call("waiter", {}, id="w1"))])
    agent = Agent(model.model, tools=[waiter], stream_fn=model.stream_fn)
    agent.prompt("wait", wait=False)
    assert started.wait(10)
    agent.abort()
    assert agent.wait_for_idle(10)

    root = otel.one("invoke_agent")
    tool_span = otel.one("execute_tool waiter")
    assert tool_span.status.status_code is StatusCode.ERROR
    assert tool_span.attributes["error.type"] == "aborted"
    assert root.status.status_code is StatusCode.ERROR
    assert root.attributes["error.type"] == "aborted"
    durations = otel.points("gen_ai.execute_tool.duration")
    assert [dict(p.attributes).get("error.type") for p in durations] == ["aborted"]


def test_failing_tool_sets_error_status_and_the_run_goes_on(otel: Otel) -> None:
    def broken(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        raise ValueError("disk on fire")

    model = ScriptedModel([response(call("broken", {})), "recovered"])
    tool_obj = AgentTool("broken", "Fails.", {"type": "object", "properties": {}}, broken)
    Agent(model.model, tools=[tool_obj], stream_fn=model.stream_fn).prompt("go")
    span = otel.one("execute_tool broken")
    assert span.status.status_code is StatusCode.ERROR
    assert "disk on fire" in span.status.description
    assert span.attributes["error.type"] == "tool_error"
    assert otel.one("invoke_agent").status.status_code is StatusCode.UNSET


def test_model_error_response_sets_error_status(otel: Otel) -> None:
    model = ScriptedModel([error("model exploded")])
    Agent(model.model, stream_fn=model.stream_fn).prompt("hi")
    chat = otel.one("chat ")
    root = otel.one("invoke_agent")
    for span in (chat, root):
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description == "model exploded"
        assert span.attributes["error.type"] == "_OTHER"
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("error",)
    points = otel.points("gen_ai.client.operation.duration")
    assert [dict(p.attributes)["error.type"] for p in points] == ["_OTHER"]


def test_raising_stream_function_closes_the_chat_span_with_an_error(otel: Otel) -> None:
    model = ScriptedModel([ConnectionError("socket closed")])
    Agent(model.model, stream_fn=model.stream_fn).prompt("hi")
    chat = otel.one("chat ")
    assert chat.status.status_code is StatusCode.ERROR
    assert "socket closed" in chat.status.description
    assert otel.one("invoke_agent").status.status_code is StatusCode.ERROR


def test_provider_http_500_is_recorded_with_its_status_code(otel: Otel, model_server: Any) -> None:
    model_server.replies.append(("status", 500, {"error": {"message": "upstream overloaded"}}))
    agent = Agent(local_model(model_server.url), api_key="local-key-not-secret-enough")
    agent.prompt("hi")
    chat = otel.one("chat local-llm")
    assert chat.kind is SpanKind.CLIENT
    assert chat.attributes["error.type"] == "500"
    assert chat.attributes["server.address"] == "127.0.0.1"
    assert chat.attributes["server.port"] == int(model_server.url.split(":")[2].split("/")[0])
    assert chat.attributes["gen_ai.provider.name"] == "local"
    assert chat.status.status_code is StatusCode.ERROR
    assert "upstream overloaded" in chat.status.description
    assert otel.one("invoke_agent").attributes["error.type"] == "500"
    (point,) = otel.points("gen_ai.client.operation.duration")
    assert point.attributes["error.type"] == "500"


def test_streamed_http_response_usage_and_response_model(otel: Otel, model_server: Any) -> None:
    usage = {"prompt_tokens": 30, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 10}}
    model_server.replies.append(("text", "Hello there", usage))
    agent = Agent(local_model(model_server.url), api_key="local-key")
    assert agent.prompt("hi")[-1].text == "Hello there"
    chat = otel.one("chat local-llm")
    assert chat.attributes["gen_ai.usage.input_tokens"] == 30
    assert chat.attributes["gen_ai.usage.output_tokens"] == 7
    assert chat.attributes["gen_ai.usage.cache_read.input_tokens"] == 10
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert chat.status.status_code is StatusCode.UNSET


# --------------------------------------------------------------------------- robustness


class _BrokenTracer:
    """Starts agent and tool spans normally; raises when a chat span is started or ended."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def start_span(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("chat "):
            raise RuntimeError("exporter exploded")
        return self.real.start_span(name, *args, **kwargs)


def test_a_failing_tracer_never_changes_the_run(otel: Otel, caplog: Any) -> None:
    from agentcore_otel import _state as state

    state.telemetry.tracer = _BrokenTracer(state.telemetry.tracer)
    model = ScriptedModel([response(call("add", {"a": 1, "b": 2})), "3"])
    agent = Agent(model.model, tools=[add], stream_fn=model.stream_fn)
    with caplog.at_level("WARNING", logger="agentcore_otel"):
        messages = agent.prompt("1+2")
    assert messages[-1].text == "3" and messages[-1].stop_reason == "stop"
    assert [s.name for s in otel.spans()] == ["execute_tool add", "invoke_agent"]
    assert any("transform_context failed" in r.getMessage() for r in caplog.records)
    assert state.runs == {} and state.by_signal == {}


def test_repeated_tool_call_ids_in_one_batch_each_get_a_finished_span(otel: Otel) -> None:
    model = ScriptedModel(
        [response(call("add", {"a": 1, "b": 2}, id="same"), call("add", {"a": 3, "b": 4}, id="same")), "done"]
    )
    Agent(model.model, tools=[add], stream_fn=model.stream_fn).prompt("add twice")
    tools = otel.named("execute_tool add")
    assert len(tools) == 2
    assert all(s.status.status_code is StatusCode.UNSET for s in tools)
    assert all("error.type" not in s.attributes for s in tools)


def test_instrument_warns_when_agentcore_will_not_load_the_plugin(otel_sdk: Otel, monkeypatch: Any) -> None:
    monkeypatch.setenv("AGENTCORE_DISABLE_PLUGIN_AUTOLOAD", "1")
    with pytest.warns(RuntimeWarning, match=r"plugins=\[agentcore_otel.plugin\]"):
        otel_sdk.instrument()


def test_a_listener_failing_again_during_the_failure_still_ends_every_span(otel: Otel) -> None:
    """A listener that raises on every assistant ``message_start`` and ``message_end`` fails the
    run, then fails again while the failure is reported (the failure sequence ends the message that
    was streaming; ``prompt()`` raises, as documented). The chat and agent spans used to stay open,
    the run registered and the agent alive: ``agent_end`` never reached the plugin."""
    model = ScriptedModel(["hello"])
    agent = Agent(model.model, stream_fn=model.stream_fn)

    def ui(event: Any) -> None:  # a UI listener with a bug in its answer branches
        if event.type in ("message_start", "message_end") and getattr(event.message, "role", None) == "assistant":
            raise KeyError("bubble")

    agent.subscribe(ui)
    with pytest.raises(KeyError):
        agent.prompt("hi")
    spans = {span.name: span for span in otel.spans()}
    assert sorted(spans) == sorted(["chat " + model.model.id, "invoke_agent"])
    assert spans["invoke_agent"].status.status_code.name == "ERROR"


class _FailingObserver:
    """Another plugin's lifecycle observer that raises on ``agent_end`` (a metrics backend down)."""

    @hookimpl
    def on_lifecycle_event(self, event: Any, agent: Any) -> None:
        if event.type == "agent_end":
            raise RuntimeError("metrics backend down")


def test_another_plugins_failing_observer_does_not_keep_the_run_open(otel: Otel, caplog: Any) -> None:
    """A plugin registered after this one is called before it; its exception ends the pluggy call.
    ``agent_end`` used to never reach the telemetry: the agent span stayed open, the run stayed
    registered (keeping the agent alive), and the next run ended it as abandoned."""
    from agentcore_otel import _state as state

    model = ScriptedModel(["hi", "again"])
    agent = Agent(model.model, stream_fn=model.stream_fn, plugins=[_FailingObserver()])
    with caplog.at_level("ERROR", logger="agentcore.plugins"):
        agent.prompt("hello")
    assert any(  # still reported, naming the plugin that raised
        "on_lifecycle_event hook of plugin" in r.getMessage() and "failed for agent_end" in r.getMessage()
        for r in caplog.records
    )
    root = otel.one("invoke_agent")
    assert root.status.status_code is StatusCode.UNSET
    assert state.runs == {} and state.by_signal == {}
    agent.prompt("more")
    assert [s.status.status_code for s in otel.named("invoke_agent")] == [StatusCode.UNSET] * 2


class _FailsOnToolSpans(SpanProcessor):
    """A span processor with a bug: raises while a tool span ends (it still ends: the SDK marks it
    ended before calling the processors)."""

    def on_end(self, span: Any) -> None:
        if span.name.startswith("execute_tool "):
            raise RuntimeError("processor bug")


def test_a_span_processor_failing_on_one_span_still_ends_the_rest_of_the_run(otel: Otel) -> None:
    """A listener fails the run while a tool call is open, so the agent's end closes the tool span
    and the agent span. A span processor raising as the tool span ended used to stop there: the
    agent span was never ended, so it and the trace's root never reached the exporter."""
    otel.tracer_provider.add_span_processor(_FailsOnToolSpans())
    model = ScriptedModel([response(call("add", {"a": 1, "b": 2}))])
    agent = Agent(model.model, tools=[add], stream_fn=model.stream_fn)

    def ui(event: Any) -> None:
        if event.type == "tool_execution_start":
            raise KeyError("no row for this call")

    agent.subscribe(ui)
    messages = agent.prompt("1+2")
    assert messages[-1].stop_reason == "error"
    root = otel.one("invoke_agent")
    assert root.status.status_code is StatusCode.ERROR
    assert [s.name for s in otel.spans()] == ["chat " + model.model.id, "execute_tool add", "invoke_agent"]
    (point,) = otel.points("gen_ai.invoke_agent.duration")
    assert point.attributes["error.type"] == "_OTHER"


def test_spans_of_a_run_still_going_at_interpreter_exit_are_ended_and_exported(tmp_path: Any) -> None:
    """A script (or a server) exits while an agent's run is in progress: agentcore's run thread is
    a daemon, so ``agent_end`` never comes. The agent and tool spans were never ended, so the batch
    processor's final flush had nothing to send but the finished chat span, whose parent (the
    trace's root) no backend ever received."""
    script = tmp_path / "exits.py"
    script.write_text(
        textwrap.dedent("""
        import threading
        import agentcore_otel
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
        from agentcore import Agent, AgentTool
        from agentcore.testing import ScriptedModel, call, response

        class Printer(SpanExporter):
            def export(self, spans):
                for span in spans:
                    print(span.name, span.status.status_code.name, span.status.description, flush=True)
                return SpanExportResult.SUCCESS

        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(Printer()))
        agentcore_otel.instrument(tracer_provider=provider)
        started, never = threading.Event(), threading.Event()

        def wait(tool_call_id, args, signal, on_update):
            started.set()
            never.wait()  # ignores its abort signal: still running when the process exits

        waiter = AgentTool("wait", "Waits.", {"type": "object", "properties": {}}, wait)
        model = ScriptedModel([response(call("wait", {}))])
        Agent(model.model, tools=[waiter], stream_fn=model.stream_fn).prompt("go", wait=False)
        assert started.wait(30)
        print("exiting", flush=True)
    """)
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "exiting"
    assert sorted(lines[1:]) == [
        "chat scripted-1 UNSET None",
        "execute_tool wait ERROR the run ended before the tool call finished",
        "invoke_agent ERROR the process exited before the run ended",
    ]

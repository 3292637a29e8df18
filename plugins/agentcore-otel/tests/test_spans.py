"""The span tree: names, kinds, attributes and parent relations across threads (in-memory exporter)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import Any, Dict, List

import agentcore_otel
import pytest
from conftest import Otel, add, make_usage
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode

from agentcore import Agent, AgentTool, AgentToolResult, TextContent, tool
from agentcore.testing import ScriptedModel, call, response, text
from agentcore.testing import tool_call as tool_call_response

# --------------------------------------------------------------------------- off until instrumented


def test_nothing_is_recorded_until_instrument_and_after_uninstrument(otel_sdk: Otel) -> None:
    model = ScriptedModel(["one", "two", "three"])
    agent = Agent(model.model, stream_fn=model.stream_fn)
    agent.prompt("hi")
    assert otel_sdk.spans() == []
    otel_sdk.instrument()
    assert agentcore_otel.is_instrumented()
    agent.prompt("again")
    assert [s.name for s in otel_sdk.spans()] == ["chat " + model.model.id, "invoke_agent"]
    agentcore_otel.uninstrument()
    agent.prompt("once more")
    assert len(otel_sdk.spans()) == 2


def test_importing_the_plugin_module_does_not_import_opentelemetry() -> None:
    code = (
        "import sys, agentcore_otel.plugin, agentcore_otel; "
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    env = {k: v for k, v in os.environ.items() if k != "AGENTCORE_OTEL"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60, check=True
    ).stdout
    assert out.strip() == "[]"


# --------------------------------------------------------------------------- the span tree


def test_run_span_tree_with_parallel_tools_parented_by_tool_call_id(otel: Otel) -> None:
    # Both calls run at once (the barrier needs both), and the second finishes first.
    barrier = threading.Barrier(2, timeout=10)
    first_may_finish = threading.Event()

    def slow(tool_call_id: str, args: Dict[str, Any], signal: Any, on_update: Any) -> AgentToolResult:
        barrier.wait()
        if args["n"] == 1:
            first_may_finish.wait(10)
        else:
            first_may_finish.set()
        return AgentToolResult(content=[TextContent(f"done {args['n']}")])

    slow_tool = AgentTool("slow", "Waits.", {"type": "object", "properties": {"n": {"type": "integer"}}}, slow)
    model = ScriptedModel([response(call("slow", {"n": 1}, id="c1"), call("slow", {"n": 2}, id="c2")), "all done"])
    agent = Agent(model.model, tools=[slow_tool], stream_fn=model.stream_fn)
    agent.name = "Planner"
    agent.prompt("go")

    root = otel.one("invoke_agent")
    assert root.name == "invoke_agent Planner"
    assert root.kind is SpanKind.INTERNAL
    assert root.parent is None
    chats = otel.named("chat ")
    tools = otel.named("execute_tool ")
    assert [s.name for s in chats] == [f"chat {model.model.id}"] * 2
    assert [s.attributes["gen_ai.tool.call.id"] for s in tools] == ["c2", "c1"]  # completion order
    for span in chats + tools:
        assert span.parent is not None and span.parent.span_id == root.context.span_id
        assert span.context.trace_id == root.context.trace_id
    assert all(s.kind is SpanKind.CLIENT for s in chats)
    assert all(s.kind is SpanKind.INTERNAL for s in tools)
    # the tool spans overlap: both started before either ended
    assert max(s.start_time for s in tools) < min(s.end_time for s in tools)
    # a chat span covers the request only: the second one starts after both tool calls ended
    assert chats[1].start_time >= max(s.end_time for s in tools)
    for span in tools:
        assert span.name == "execute_tool slow"
        assert span.attributes["gen_ai.operation.name"] == "execute_tool"
        assert span.attributes["gen_ai.tool.name"] == "slow"
        assert span.attributes["gen_ai.tool.type"] == "function"
        assert span.attributes["gen_ai.tool.description"] == "Waits."
        assert span.status.status_code is StatusCode.UNSET


def test_agent_and_chat_attributes_follow_the_genai_conventions(otel: Otel) -> None:
    model = ScriptedModel(
        [
            response(call("add", {"a": 1, "b": 2}), usage=make_usage(100, 20, cache_read=300, cost=0.01)),
            text("3", usage=make_usage(50, 5, cache_write=40, cost=0.002)),
        ]
    )
    agent = Agent(
        model.model, tools=[add], stream_fn=model.stream_fn, temperature=0.2, max_tokens=512, session_id="conv-42"
    )
    agent.prompt("1+2?")

    root = otel.one("invoke_agent")
    first, second = otel.named("chat ")
    attrs = dict(first.attributes)
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.provider.name"] == "scripted"
    assert attrs["gen_ai.request.model"] == model.model.id
    assert attrs["gen_ai.request.temperature"] == 0.2
    assert attrs["gen_ai.request.max_tokens"] == 512
    assert attrs["gen_ai.conversation.id"] == "conv-42"
    assert attrs["gen_ai.response.model"] == model.model.id
    assert attrs["gen_ai.response.finish_reasons"] == ("tool_call",)
    assert attrs["gen_ai.usage.input_tokens"] == 400  # cached tokens included
    assert attrs["gen_ai.usage.output_tokens"] == 20
    assert attrs["gen_ai.usage.cache_read.input_tokens"] == 300
    assert "gen_ai.usage.cache_creation.input_tokens" not in attrs
    assert attrs["agentcore.usage.cost"] == pytest.approx(0.01)
    assert "error.type" not in attrs
    assert second.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert second.attributes["gen_ai.usage.cache_creation.input_tokens"] == 40
    assert second.attributes["gen_ai.usage.input_tokens"] == 90

    root_attrs = dict(root.attributes)
    assert root_attrs["gen_ai.operation.name"] == "invoke_agent"
    assert root_attrs["gen_ai.provider.name"] == "scripted"
    assert root_attrs["gen_ai.request.model"] == model.model.id
    assert root_attrs["gen_ai.conversation.id"] == "conv-42"
    assert root_attrs["gen_ai.usage.input_tokens"] == 490
    assert root_attrs["gen_ai.usage.output_tokens"] == 25
    assert root_attrs["agentcore.usage.cost"] == pytest.approx(0.012)
    assert root_attrs["agentcore.turns"] == 2
    assert root.status.status_code is StatusCode.UNSET


def test_known_providers_map_to_the_conventions_names() -> None:
    from agentcore_otel._semconv import error_type, provider_name, server_attributes

    assert provider_name("google") == "gcp.gemini"
    assert provider_name("amazon-bedrock") == "aws.bedrock"
    assert provider_name("xai") == "x_ai"
    assert provider_name("openrouter") == "openrouter"
    assert error_type("error", "500 Internal error") == "500"
    assert error_type("error", "Server requested 90s retry delay (max: 60s). 429 slow down") == "429"
    assert error_type("error", "Server requested 1.5s retry delay (max: 0.5s). 503 busy") == "503"
    assert error_type("error", "connection refused") == "_OTHER"
    assert error_type("aborted", "Request was aborted") == "aborted"
    assert error_type("stop", None) is None
    assert server_attributes("https://user:pw@api.example.com/v1?key=abc") == {
        "server.address": "api.example.com",
        "server.port": 443,
    }


def test_chat_span_is_current_during_the_model_request(otel: Otel) -> None:
    # what an HTTP-client instrumentation sees while agentcore sends the request
    seen: List[Any] = []

    def answer(_context: Any) -> Any:
        seen.append(trace.get_current_span().get_span_context())
        return text("hi")

    model = ScriptedModel([answer])
    Agent(model.model, stream_fn=model.stream_fn).prompt("hello")
    chat = otel.one("chat ")
    assert seen[0].span_id == chat.context.span_id
    assert trace.get_current_span() is trace.INVALID_SPAN  # nothing left attached here


def test_run_thread_context_is_restored_after_the_run(otel: Otel) -> None:
    # the run threads are pooled: a later task on the same thread must not inherit our spans
    spans_seen: List[Any] = []
    model = ScriptedModel(["a", "b"])
    agent = Agent(model.model, stream_fn=model.stream_fn)
    agent.subscribe(lambda e: spans_seen.append(trace.get_current_span()) if e.type == "agent_end" else None)
    agent.prompt("one")
    agent.prompt("two")
    roots = otel.named("invoke_agent")
    assert len(roots) == 2 and roots[1].parent is None  # not nested in the first run's span

    def probe() -> None:
        spans_seen.append(trace.get_current_span())

    from agentcore.streams import start_daemon

    done = threading.Event()
    start_daemon(lambda: (probe(), done.set()), "probe")
    assert done.wait(10)
    assert spans_seen[-1] is trace.INVALID_SPAN


def test_the_callers_current_span_is_the_parent_of_the_run(otel: Otel) -> None:
    model = ScriptedModel(["hi"])
    agent = Agent(model.model, stream_fn=model.stream_fn)
    tracer = otel.tracer_provider.get_tracer("user-app")
    with tracer.start_as_current_span("user request") as user_span:
        agent.prompt("hello")
    root = otel.one("invoke_agent")
    assert root.parent is not None
    assert root.parent.span_id == user_span.get_span_context().span_id
    assert root.context.trace_id == user_span.get_span_context().trace_id


def _span_making_tool(tracer: Any) -> AgentTool:
    """An AgentTool (so it executes on a worker thread) that opens a span of its own."""

    def work(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        with tracer.start_as_current_span(f"inside {tool_call_id}"):
            pass
        return AgentToolResult(content=[TextContent("ok")])

    return AgentTool("work", "Works.", {"type": "object", "properties": {}}, work)


def test_spans_made_by_a_lone_inline_tool_nest_under_its_execute_tool_span(otel: Otel) -> None:
    tracer = otel.tracer_provider.get_tracer("user-tool")

    @tool
    def lookup(key: str) -> str:
        """Look a key up (runs inline on the run thread: no on_update parameter)."""
        with tracer.start_as_current_span("inside lookup"):
            return key.upper()

    model = ScriptedModel([tool_call_response("lookup", {"key": "k"}), "done"])
    Agent(model.model, tools=[lookup], stream_fn=model.stream_fn).prompt("go")
    inner = otel.one("inside lookup")
    assert inner.parent.span_id == otel.one("execute_tool lookup").context.span_id


def test_each_call_of_a_sequential_batch_is_current_while_it_executes(otel: Otel) -> None:
    tracer = otel.tracer_provider.get_tracer("user-tool")

    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        with tracer.start_as_current_span(f"inside {key}"):
            return key.upper()

    model = ScriptedModel(
        [response(call("lookup", {"key": "a"}, id="ca"), call("lookup", {"key": "b"}, id="cb")), "done"]
    )
    Agent(model.model, tools=[lookup], stream_fn=model.stream_fn, tool_execution="sequential").prompt("go")
    by_id = {s.attributes["gen_ai.tool.call.id"]: s for s in otel.named("execute_tool ")}
    assert otel.one("inside a").parent.span_id == by_id["ca"].context.span_id
    assert otel.one("inside b").parent.span_id == by_id["cb"].context.span_id
    root = otel.one("invoke_agent")
    assert all(c.parent.span_id == root.context.span_id for c in otel.named("chat "))
    assert trace.get_current_span() is trace.INVALID_SPAN


def test_spans_made_on_a_tool_worker_thread_nest_under_its_execute_tool_span(otel: Otel) -> None:
    tracer = otel.tracer_provider.get_tracer("user-tool")
    model = ScriptedModel([response(call("work", {}, id="w1")), "done"])
    Agent(model.model, tools=[_span_making_tool(tracer)], stream_fn=model.stream_fn).prompt("go")
    assert otel.one("inside w1").parent.span_id == otel.one("execute_tool work").context.span_id


def test_spans_made_by_parallel_tools_nest_under_the_agent_span(otel: Otel) -> None:
    tracer = otel.tracer_provider.get_tracer("user-tool")
    model = ScriptedModel([response(call("work", {}, id="p1"), call("work", {}, id="p2")), "done"])
    Agent(model.model, tools=[_span_making_tool(tracer)], stream_fn=model.stream_fn).prompt("go")
    root = otel.one("invoke_agent")
    for name in ("inside p1", "inside p2"):
        assert otel.one(name).parent.span_id == root.context.span_id


def test_concurrent_agents_get_separate_traces(otel: Otel) -> None:
    gate = threading.Barrier(2, timeout=10)

    def run(name: str) -> None:
        def answer(_context: Any) -> Any:
            gate.wait()  # both runs are in flight at once
            return text(name)

        model = ScriptedModel([answer])
        agent = Agent(model.model, stream_fn=model.stream_fn)
        agent.name = name
        agent.prompt("hi")

    threads = [threading.Thread(target=run, args=(n,)) for n in ("alpha", "beta")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    roots = {s.name: s for s in otel.named("invoke_agent")}
    assert set(roots) == {"invoke_agent alpha", "invoke_agent beta"}
    for chat in otel.named("chat "):
        parent = next(r for r in roots.values() if r.context.span_id == chat.parent.span_id)
        assert chat.attributes["gen_ai.agent.name"] == parent.attributes["gen_ai.agent.name"]
    assert roots["invoke_agent alpha"].context.trace_id != roots["invoke_agent beta"].context.trace_id


def test_response_id_and_model_come_from_the_message(otel: Otel) -> None:
    # AssistantMessage.response_id / .response_model (reference parity, DESIGN §6) when a
    # provider sets them; set by hand here so the test does not depend on a provider.
    from agentcore import AssistantMessage

    reply = AssistantMessage(content=[TextContent("hi")], stop_reason="stop")
    reply.response_id = "resp_0042"  # type: ignore[attr-defined]
    reply.response_model = "model-2026-01-01"  # type: ignore[attr-defined]
    model = ScriptedModel([reply])
    Agent(model.model, stream_fn=model.stream_fn).prompt("hello")
    chat = otel.one("chat ")
    assert chat.attributes["gen_ai.response.id"] == "resp_0042"
    assert chat.attributes["gen_ai.response.model"] == "model-2026-01-01"
    assert chat.attributes["gen_ai.request.model"] == model.model.id


def test_a_sub_agent_run_nests_under_the_tool_call_that_started_it(otel: Otel) -> None:
    # what agent.as_tool() will do (DESIGN §6), written by hand: a tool that prompts another agent
    child_model = ScriptedModel([text("found it", usage=make_usage(5, 3, cost=0.001))])
    child = Agent(child_model.model, stream_fn=child_model.stream_fn)
    child.name = "Researcher"

    def delegate(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        answer = child.prompt(args["task"])[-1]
        return AgentToolResult(content=[TextContent(answer.text)], usage=answer.usage)

    delegate_tool = AgentTool(
        "delegate", "Ask the researcher.", {"type": "object", "properties": {"task": {"type": "string"}}}, delegate
    )
    model = ScriptedModel(
        [response(call("delegate", {"task": "look"}, id="d1"), usage=make_usage(10, 2, cost=0.01)), "done"]
    )
    lead = Agent(model.model, tools=[delegate_tool], stream_fn=model.stream_fn)
    lead.name = "Lead"
    lead.prompt("research this")

    lead_span = otel.one("invoke_agent Lead")
    tool_span = otel.one("execute_tool delegate")
    child_span = otel.one("invoke_agent Researcher")
    assert lead_span.parent is None
    assert tool_span.parent.span_id == lead_span.context.span_id
    assert child_span.parent.span_id == tool_span.context.span_id
    assert child_span.context.trace_id == lead_span.context.trace_id
    child_chat = next(s for s in otel.named("chat ") if s.attributes["gen_ai.agent.name"] == "Researcher")
    assert child_chat.parent.span_id == child_span.context.span_id
    # the sub-agent's cost rolls up (through the tool result's usage) into the lead's total
    assert child_span.attributes["agentcore.usage.cost"] == pytest.approx(0.001)
    assert lead_span.attributes["agentcore.usage.cost"] == pytest.approx(0.011)


def test_run_totals_count_only_what_the_run_spent_not_the_history_it_was_given(otel: Otel) -> None:
    """``prompt([...])`` with an earlier exchange (an answer and a sub-agent's tool result, each
    with its usage): their ``message_end`` events come first. Their tokens and cost used to be
    added to the run's totals on the agent span."""
    from agentcore import AssistantMessage, ToolResultMessage, UserMessage

    earlier_call = AssistantMessage(
        content=[tool_call_response("add", {"a": 1, "b": 1}, id="old").content[0]],
        stop_reason="toolUse",
        usage=make_usage(1000, 500, cost=1.0),
    )
    earlier_result = ToolResultMessage(
        tool_call_id="old", tool_name="add", content=[TextContent("2")], usage=make_usage(300, 30, cost=0.5)
    )
    history = [UserMessage(content=[TextContent("1+1?")]), earlier_call, earlier_result]
    model = ScriptedModel(
        [response(call("add", {"a": 2, "b": 2}, id="new"), usage=make_usage(10, 5, cost=0.01)), text("4")]
    )
    agent = Agent(model.model, tools=[add], stream_fn=model.stream_fn)
    agent.prompt(history + [UserMessage(content=[TextContent("and 2+2?")])])
    root = otel.one("invoke_agent")
    assert root.attributes["gen_ai.usage.input_tokens"] == 10
    assert root.attributes["gen_ai.usage.output_tokens"] == 5
    assert root.attributes["agentcore.usage.cost"] == pytest.approx(0.01)


def test_a_model_switched_by_prepare_next_turn_names_its_chat_span(otel: Otel) -> None:
    """A ``prepare_next_turn`` hook may switch the model of the next request; the agent's state
    keeps the old one, so the chat span of the switched request was named after the old model,
    with its provider and server (and the metrics counted its tokens under the old model)."""
    from agentcore import Model
    from agentcore.providers.models import find_model

    bigger = find_model("anthropic", "claude-sonnet-4-5")
    assert bigger is not None
    model = ScriptedModel([response(call("add", {"a": 1, "b": 2}), usage=make_usage(10, 2)), "3"])
    switched: List[Model] = []

    def escalate(ctx: Any, signal: Any) -> Any:
        switched.append(bigger)
        return {"model": bigger}

    agent = Agent(model.model, tools=[add], stream_fn=model.stream_fn, prepare_next_turn=escalate)
    agent.prompt("add")
    first, second = sorted(otel.named("chat "), key=lambda span: span.start_time)
    assert first.name == f"chat {model.model.id}" and first.attributes["gen_ai.provider.name"] == "scripted"
    assert "server.address" not in first.attributes  # the scripted model has no base URL
    assert second.name == "chat claude-sonnet-4-5"
    assert second.attributes["gen_ai.request.model"] == "claude-sonnet-4-5"
    assert second.attributes["gen_ai.provider.name"] == "anthropic"
    assert second.attributes["server.address"] == "api.anthropic.com"
    assert agent.state.model.id == model.model.id and switched


@tool(requires_approval=True)
def remove(path: str) -> str:
    """Remove a file (a person approves each call)."""
    return f"removed {path}"


def test_a_run_resumed_after_an_approval_pause_links_to_the_run_that_paused(otel: Otel) -> None:
    """The pausing run and the ``continue_()`` that runs the approved call are two agent runs, so
    two traces. Nothing connected them: the resumed trace began with an ``execute_tool`` span no
    request of its own asked for, and the paused one ended without saying a call was waiting."""
    model = ScriptedModel([response(call("remove", {"path": "/tmp/x"}, id="r1"), call("add", {"a": 1, "b": 2})), "ok"])
    agent = Agent(model.model, tools=[remove, add], stream_fn=model.stream_fn)
    agent.prompt("clean up")
    assert [p.tool_call_id for p in agent.pending_approvals] == ["r1"]
    agent.approve("r1")
    agent.continue_()
    model.push("you are welcome")
    agent.prompt("thanks")  # a later run, resuming nothing

    paused, resumed, later = otel.named("invoke_agent")
    assert paused.attributes["agentcore.approval.pending"] == ("r1",)
    assert "agentcore.approval.pending" not in resumed.attributes
    assert [link.context.span_id for link in resumed.links] == [paused.context.span_id]
    assert resumed.links[0].attributes["agentcore.link.reason"] == "approval_resume"
    assert otel.one("execute_tool remove").context.trace_id == resumed.context.trace_id
    assert later.links == ()


def test_a_run_after_a_reset_does_not_link_to_the_abandoned_pause(otel: Otel) -> None:
    model = ScriptedModel([response(call("remove", {"path": "/tmp/x"}, id="r1")), "fresh start"])
    agent = Agent(model.model, tools=[remove], stream_fn=model.stream_fn)
    agent.prompt("clean up")
    agent.reset()  # the waiting call is dropped with the transcript
    agent.prompt("hello")
    paused, fresh = otel.named("invoke_agent")
    assert paused.attributes["agentcore.approval.pending"] == ("r1",)
    assert fresh.links == ()


def test_the_one_call_of_a_batch_left_to_execute_is_current_while_it_executes(otel: Otel) -> None:
    """The model called a tool that does not exist beside a real one: the first call fails its
    preflight (start and end events at once), so the other executes alone. Its span was left out
    as the current span (the batch had looked parallel), so the spans it made (a sub-agent's run,
    say) nested under the agent span instead of under its ``execute_tool`` span."""
    tracer = otel.tracer_provider.get_tracer("user-tool")
    model = ScriptedModel([response(call("work", {}, id="w1"), call("no_such_tool", {}, id="x1")), "done"])
    Agent(model.model, tools=[_span_making_tool(tracer)], stream_fn=model.stream_fn).prompt("go")
    assert otel.one("inside w1").parent.span_id == otel.one("execute_tool work").context.span_id
    model = ScriptedModel([response(call("no_such_tool", {}, id="x2"), call("work", {}, id="w2")), "done"])
    Agent(model.model, tools=[_span_making_tool(tracer)], stream_fn=model.stream_fn).prompt("go")
    work = next(s for s in otel.named("execute_tool work") if s.attributes["gen_ai.tool.call.id"] == "w2")
    assert otel.one("inside w2").parent.span_id == work.context.span_id
    assert trace.get_current_span() is trace.INVALID_SPAN

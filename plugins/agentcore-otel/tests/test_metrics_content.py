"""Metrics, content capture, secret redaction, the AGENTCORE_OTEL switch and the README example."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any, List

import agentcore_otel
import pytest
from conftest import Otel, add, local_model, make_usage

from agentcore import (
    Agent,
    AgentTool,
    AgentToolResult,
    BashExecutionMessage,
    CompactionSettings,
    CompactionSummaryMessage,
    CustomMessage,
    Model,
    TextContent,
)
from agentcore.testing import ScriptedModel, call, error, response, text

SECRET_KEY = "sk-test-9f8e7d6c5b4a3210fedcba"
SECRET_HEADER = "hdr-secret-0123456789abcdef"
SECRET_MODEL_HEADER = "model-hdr-secret-5555aaaa"


# --------------------------------------------------------------------------- metrics


def test_metrics_token_usage_and_durations(otel: Otel) -> None:
    model = ScriptedModel(
        [
            response(call("add", {"a": 1, "b": 2}), usage=make_usage(10, 4)),
            text("3", usage=make_usage(20, 2, cache_read=5)),
        ]
    )
    Agent(model.model, tools=[add], stream_fn=model.stream_fn).prompt("1+2")

    tokens = otel.points("gen_ai.client.token.usage")
    by_type = {p.attributes["gen_ai.token.type"]: p for p in tokens}
    assert set(by_type) == {"input", "output"}
    assert by_type["input"].count == 2 and by_type["input"].sum == 35
    assert by_type["output"].count == 2 and by_type["output"].sum == 6
    for point in tokens:
        attrs = dict(point.attributes)
        assert attrs["gen_ai.operation.name"] == "chat"
        assert attrs["gen_ai.provider.name"] == "scripted"
        assert attrs["gen_ai.request.model"] == model.model.id
        assert attrs["gen_ai.response.model"] == model.model.id
        assert list(point.explicit_bounds[:3]) == [1, 4, 16]

    (duration,) = otel.points("gen_ai.client.operation.duration")
    assert duration.count == 2 and "error.type" not in duration.attributes
    assert list(duration.explicit_bounds[:2]) == [0.01, 0.02]
    (tool_duration,) = otel.points("gen_ai.execute_tool.duration")
    assert tool_duration.count == 1
    assert dict(tool_duration.attributes) == {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "add"}
    (agent_duration,) = otel.points("gen_ai.invoke_agent.duration")
    assert agent_duration.count == 1
    assert agent_duration.attributes["gen_ai.operation.name"] == "invoke_agent"


def _token_sums(otel: Otel) -> Any:
    sums = {"input": 0, "output": 0}
    for point in otel.points("gen_ai.client.token.usage"):
        sums[point.attributes["gen_ai.token.type"]] += point.sum
    return sums


def test_a_compaction_during_the_run_counts_its_summary_request(otel: Otel) -> None:
    # session §7.3 threshold: the tool turn's usage crosses the threshold, the turn hook compacts
    small = Model(id="small", api="scripted", provider="scripted", base_url="", context_window=20000, max_tokens=1000)
    model = ScriptedModel(
        [
            text("answer one " + "x" * 400, usage=make_usage(10, 1)),
            response(call("add", {"a": 1, "b": 2}, id="t1"), usage=make_usage(19500, 10, cost=1.0)),
            text("the summary", usage=make_usage(1000, 100, cost=0.5)),
            text("3", usage=make_usage(30, 1)),
        ],
        model=small,
    )
    agent = Agent(
        model.model,
        tools=[add],
        stream_fn=model.stream_fn,
        compaction=CompactionSettings(reserve_tokens=1000, keep_recent_tokens=10),
    )
    seen: List[str] = []
    agent.subscribe(lambda event: seen.append(event.type))
    agent.prompt("one")
    agent.prompt("1+2")
    assert model.remaining == 0 and seen.count("compaction_end") == 1

    second = otel.named("invoke_agent")[-1]
    assert second.attributes["gen_ai.usage.input_tokens"] == 19500 + 1000 + 30
    assert second.attributes["gen_ai.usage.output_tokens"] == 10 + 100 + 1
    assert second.attributes["agentcore.usage.cost"] == pytest.approx(1.5)
    assert _token_sums(otel) == {"input": 10 + 19500 + 1000 + 30, "output": 1 + 10 + 100 + 1}


def test_an_overflow_recovery_counts_its_summary_request(otel: Otel) -> None:
    # session §7.3 overflow: compacted between the failed loop's agent_end and the retry's agent_start
    model = ScriptedModel(
        [
            text("answer one " + "x" * 400, usage=make_usage(10, 1)),
            text("answer two " + "x" * 400, usage=make_usage(10, 1)),
            error("prompt is too long: 300000 tokens > 200000 maximum"),
            text("the summary", usage=make_usage(1000, 100)),
            text("the turn prefix summary", usage=make_usage(2000, 200)),
            text("answer three", usage=make_usage(10, 1)),
        ]
    )
    agent = Agent(model.model, stream_fn=model.stream_fn, compaction=CompactionSettings(keep_recent_tokens=10))
    for prompt in ("one", "two", "three"):
        agent.prompt(prompt)
    assert model.remaining == 0 and agent.state.messages[-1].text == "answer three"
    assert _token_sums(otel) == {"input": 10 + 10 + 1000 + 2000 + 10, "output": 1 + 1 + 100 + 200 + 1}
    summary_points = [
        p for p in otel.points("gen_ai.client.token.usage") if "gen_ai.response.model" not in p.attributes
    ]
    assert summary_points
    for point in summary_points:
        assert point.attributes["gen_ai.operation.name"] == "chat"
        assert point.attributes["gen_ai.request.model"] == model.model.id


# --------------------------------------------------------------------------- content capture and secrets


def test_content_is_not_captured_by_default(otel: Otel) -> None:
    model = ScriptedModel([response(call("add", {"a": 1, "b": 2})), "3"])
    Agent(model.model, system_prompt="Be brief.", tools=[add], stream_fn=model.stream_fn).prompt("1+2?")
    content_keys = {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
    }
    for span in otel.spans():
        assert not content_keys & set(span.attributes), span.name
        assert "1+2?" not in json.dumps(dict(span.attributes), default=str)


def test_capture_content_records_messages_and_tool_io(otel_sdk: Otel) -> None:
    otel_sdk.instrument(capture_content=True)
    model = ScriptedModel([response("Let me add.", call("add", {"a": 1, "b": 2}, id="c1")), "It is 3."])
    Agent(model.model, system_prompt="Be brief.", tools=[add], stream_fn=model.stream_fn).prompt("1+2?")
    first, second = otel_sdk.named("chat ")
    assert json.loads(first.attributes["gen_ai.system_instructions"]) == [{"type": "text", "content": "Be brief."}]
    assert json.loads(first.attributes["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "1+2?"}]}
    ]
    assert json.loads(first.attributes["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "finish_reason": "tool_call",
            "parts": [
                {"type": "text", "content": "Let me add."},
                {"type": "tool_call", "id": "c1", "name": "add", "arguments": {"a": 1, "b": 2}},
            ],
        }
    ]
    sent = json.loads(second.attributes["gen_ai.input.messages"])
    assert sent[-1] == {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "3"}]}
    tool_span = otel_sdk.one("execute_tool add")
    assert json.loads(tool_span.attributes["gen_ai.tool.call.arguments"]) == {"a": 1, "b": 2}
    assert json.loads(tool_span.attributes["gen_ai.tool.call.result"]) == "3"


def test_captured_input_messages_include_the_custom_messages_the_model_was_sent(otel_sdk: Otel) -> None:
    """A compaction summary, an application's custom message and a shell command the user ran reach
    the model as user messages (the Agent's default converter). They used to be left out of
    ``gen_ai.input.messages``: the recorded prompt lacked the summary the model answered from."""
    otel_sdk.instrument(capture_content=True)
    model = ScriptedModel(["It is 10:00 in Paris."])
    agent = Agent(model.model, stream_fn=model.stream_fn)
    agent.prompt(
        [
            CompactionSummaryMessage(summary="The user plans a trip to Paris."),
            BashExecutionMessage(command="date", output="10:00", exclude_from_context=True),  # never sent
            BashExecutionMessage(command="pwd", output="/home/trip"),
            CustomMessage(custom_type="location", content="The user is in Paris."),
            "What time is it?",
        ]
    )
    sent = model.contexts[0].messages
    assert len(sent) == 4 and "trip to Paris" in sent[0].content[0].text
    captured = json.loads(otel_sdk.one("chat ").attributes["gen_ai.input.messages"])
    assert captured == [{"role": "user", "parts": [{"type": "text", "content": m.content[0].text}]} for m in sent]


def _everything_exported(otel: Otel) -> str:
    parts: List[str] = []
    for span in otel.spans():
        parts.append(span.name)
        parts.append(json.dumps(dict(span.attributes), default=str))
        parts.append(str(span.status.description))
        parts.extend(json.dumps(dict(e.attributes or {}), default=str) for e in span.events)
    data = otel.reader.get_metrics_data()
    parts.append(data.to_json() if data else "")
    return "\n".join(parts)


def test_keys_and_auth_headers_never_reach_any_exported_attribute(
    otel_sdk: Otel, model_server: Any, monkeypatch: Any
) -> None:
    monkeypatch.setenv("LOCAL_API_KEY", "env-secret-abcdefgh12345")
    otel_sdk.instrument(capture_content=True)  # the worst case: everything captured
    # The server fails with a body echoing what it received, keys included; the user prompt and
    # the tool arguments contain the key too.
    model_server.replies.append(("text", f"I saw {SECRET_KEY}", {"prompt_tokens": 1, "completion_tokens": 1}))
    model_server.replies.append(("status", 500, "echo: " + " ".join((SECRET_KEY, SECRET_HEADER, SECRET_MODEL_HEADER))))
    echo_tool = AgentTool(
        "echo",
        "Echoes.",
        {"type": "object", "properties": {"v": {"type": "string"}}},
        lambda i, a, s, u: AgentToolResult(content=[TextContent(a["v"])]),
    )
    model = ScriptedModel([response(call("echo", {"v": SECRET_KEY + " env-secret-abcdefgh12345"}))])
    agent = Agent(
        local_model(model_server.url, headers={"X-Gateway-Token": SECRET_MODEL_HEADER}),
        api_key=SECRET_KEY,
        headers={"X-Client-Secret": SECRET_HEADER},
        tools=[echo_tool],
    )
    agent.prompt(f"my key is {SECRET_KEY}")
    agent.prompt("again")  # second request: 500 with the echo body
    sent = model_server.requests[0]["headers"]
    assert sent["Authorization"] == f"Bearer {SECRET_KEY}"
    assert sent["X-Client-Secret"] == SECRET_HEADER and sent["X-Gateway-Token"] == SECRET_MODEL_HEADER

    scripted_agent = Agent(model.model, stream_fn=model.stream_fn, api_key=SECRET_KEY, tools=[echo_tool])
    scripted_agent.prompt("call it")

    exported = _everything_exported(otel_sdk)
    assert "[REDACTED]" in exported
    for secret in (SECRET_KEY, SECRET_HEADER, SECRET_MODEL_HEADER, "env-secret-abcdefgh12345"):
        assert secret not in exported


@pytest.mark.parametrize("key", ["sk-live-abcdef123456\n", 'sk-"quoted"\\back-1234'])
def test_a_key_with_whitespace_or_json_escapes_is_redacted_in_every_form(otel_sdk: Otel, key: str) -> None:
    """A key read from a file keeps its newline, and text shows it stripped; a key with a quote or
    backslash is escaped in the captured JSON. Both forms must be masked."""
    otel_sdk.instrument(capture_content=True)

    def fail(i: str, a: Any, s: Any, u: Any) -> AgentToolResult:
        raise RuntimeError("Incorrect API key provided: " + key.strip())

    failing = AgentTool("fail", "Fails.", {"type": "object", "properties": {}}, fail)
    model = ScriptedModel([response(call("fail", {})), "done"])
    agent = Agent(model.model, stream_fn=model.stream_fn, api_key=key, tools=[failing])
    agent.prompt(f"my key is {key.strip()}")
    exported = _everything_exported(otel_sdk)
    assert "[REDACTED]" in exported
    for form in (key, key.strip(), json.dumps(key)[1:-1]):
        assert form not in exported


def test_a_variable_removed_while_the_environment_is_read_does_not_turn_redaction_off(
    otel_sdk: Otel, monkeypatch: Any
) -> None:
    """Another thread removes an environment variable just as the redactor reads the key-like ones
    (its first use in a run): ``os.environ.items()`` then raised KeyError for it. That request's
    span was lost, and every later value of the run was recorded with no secret redacted, the
    agent's own API key included."""
    data = {key.encode(): value.encode() for key, value in os.environ.items()}
    data[b"ZZ_ROTATED_TOKEN"] = b"old-token-abcdefgh"

    def decode(raw: bytes) -> str:
        data.pop(b"ZZ_ROTATED_TOKEN", None)  # the other thread's os.environ.pop(), mid-read
        return raw.decode()

    monkeypatch.setattr(os, "environ", os._Environ(data, str.encode, decode, str.encode, decode))
    otel_sdk.instrument(capture_content=True)
    echo_tool = AgentTool(
        "echo",
        "Echoes.",
        {"type": "object", "properties": {"v": {"type": "string"}}},
        lambda i, a, s, u: AgentToolResult(content=[TextContent(a["v"])]),
    )
    model = ScriptedModel([response(call("echo", {"v": SECRET_KEY})), "done"])
    agent = Agent(model.model, stream_fn=model.stream_fn, api_key=SECRET_KEY, tools=[echo_tool])
    agent.prompt(f"my key is {SECRET_KEY}")
    exported = _everything_exported(otel_sdk)
    assert "[REDACTED]" in exported and SECRET_KEY not in exported
    assert len(otel_sdk.named("chat ")) == 2


# --------------------------------------------------------------------------- environment switch


def test_agentcore_otel_env_instruments_with_the_global_providers(tmp_path: Any) -> None:
    script = tmp_path / "run.py"
    script.write_text(
        textwrap.dedent("""
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from agentcore import Agent
        from agentcore.testing import ScriptedModel

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        model = ScriptedModel(["hi"])
        Agent(model.model, stream_fn=model.stream_fn).prompt("hello")
        spans = exporter.get_finished_spans()
        print([s.name for s in spans], "gen_ai.input.messages" in spans[0].attributes)
    """)
    )
    env = dict(os.environ, AGENTCORE_OTEL="1", OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="true")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "['chat scripted-1', 'invoke_agent'] True"


def test_uninstrument_mid_run_still_ends_the_runs_spans(otel: Otel) -> None:
    def answer(_context: Any) -> Any:
        agentcore_otel.uninstrument()
        return text("ok")

    model = ScriptedModel([answer])
    Agent(model.model, stream_fn=model.stream_fn).prompt("hi")
    assert [s.name for s in otel.spans()] == [f"chat {model.model.id}", "invoke_agent"]


# --------------------------------------------------------------------------- documentation


def _readme_python_blocks() -> List[str]:
    readme = os.path.join(os.path.dirname(__file__), os.pardir, "README.rst")
    with open(readme, encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    blocks: List[str] = []
    for index, line in enumerate(lines):
        if line.strip() == ".. code-block:: python":
            body: List[str] = []
            for follow in lines[index + 2 :]:
                if follow and not follow.startswith("   "):
                    break
                body.append(follow[3:])
            blocks.append("\n".join(body))
    return blocks


def test_readme_console_example_runs_and_prints_the_span_tree() -> None:
    (example,) = _readme_python_blocks()
    env = {k: v for k, v in os.environ.items() if k != "AGENTCORE_OTEL"}
    out = subprocess.run([sys.executable, "-c", example], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "It is 5." in out.stdout
    for name in ('"name": "invoke_agent Calculator"', '"name": "execute_tool add"', '"name": "chat '):
        assert name in out.stdout


def test_tool_results_in_every_accepted_shape_end_their_span_with_their_text(otel_sdk: Otel) -> None:
    """``AgentToolResult.content`` may be a single block or hold reference dict blocks (agentcore
    normalises them for the transcript; the event carries them as returned). A single block used to
    leave the tool span unended and unexported (TypeError), a dict block was recorded as
    ``[content]``."""
    otel_sdk.instrument(capture_content=True)
    shapes = {
        "single": TextContent("one block"),
        "dicts": [{"type": "text", "text": "a dict block"}],
        "bare": "plain text",
    }
    tools = [
        AgentTool(
            name,
            "Returns a result.",
            {"type": "object", "properties": {}},
            lambda i, a, s, u, c=c: AgentToolResult(content=c),
        )
        for name, c in shapes.items()
    ]
    model = ScriptedModel([response(*(call(name, {}, id=name) for name in shapes)), "done"])
    Agent(model.model, tools=tools, stream_fn=model.stream_fn).prompt("go")
    recorded = {
        span.attributes["gen_ai.tool.name"]: json.loads(span.attributes["gen_ai.tool.call.result"])
        for span in otel_sdk.named("execute_tool ")
    }
    assert recorded == {"single": "one block", "dicts": "a dict block", "bare": "plain text"}
    durations = otel_sdk.points("gen_ai.execute_tool.duration")
    assert sorted(p.attributes["gen_ai.tool.name"] for p in durations) == ["bare", "dicts", "single"]

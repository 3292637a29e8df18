"""End to end: an Agent on a Bedrock model (found through the plugin's entry point) runs a tool
call against the local server, and the models are in the registry."""

from __future__ import annotations

import dataclasses

from bedrock_helpers import Reply, Server, event, exception, load_recording, recorded_body, text_stream

from agentcore import Agent, get_model, tool
from agentcore.plugins import get_provider
from agentcore.types import TextContent, ToolCall


@tool
def get_temperature(city: str) -> str:
    """Get the temperature in a city.

    Args:
        city: The city name.
    """
    return "30°C" if city == "Paris" else "unknown"


def _tool_call_stream() -> bytes:
    return b"".join(
        [
            event("messageStart", {"role": "assistant"}),
            event(
                "contentBlockStart",
                {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "tooluse_1", "name": "get_temperature"}}},
            ),
            event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '{"ci'}}}),
            event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": 'ty": "Par'}}}),
            event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": 'is"}'}}}),
            event("contentBlockStop", {"contentBlockIndex": 0}),
            event("messageStop", {"stopReason": "tool_use"}),
            event("metadata", {"usage": {"inputTokens": 50, "outputTokens": 20, "totalTokens": 70}}),
        ]
    )


def _local(server: Server, model_id: str = "us.amazon.nova-micro-v1:0"):
    """The catalog's Nova Micro behind the local server, under the recordings' inference-profile id."""
    return dataclasses.replace(get_model("amazon-bedrock/amazon.nova-micro-v1:0"), id=model_id, base_url=server.url)


def test_models_and_provider_are_registered() -> None:
    model = get_model("amazon-bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0")
    assert (model.api, model.reasoning, model.context_window) == ("bedrock-converse-stream", True, 200000)
    assert model.cost.input == 3 and model.cost.cache_write == 3.75
    assert (
        get_model("amazon-bedrock/amazon.nova-micro-v1:0").base_url == "https://bedrock-runtime.us-east-1.amazonaws.com"
    )
    assert get_provider("bedrock-converse-stream").api == "bedrock-converse-stream"


def test_agent_runs_a_tool_call(server: Server, aws_env: dict) -> None:
    server.enqueue(Reply(body=_tool_call_stream(), chunk_size=9), Reply(body=text_stream("It is 30°C in Paris.")))
    agent = Agent(model=_local(server), system_prompt="Be brief.", tools=[get_temperature])
    messages = agent.prompt("How warm is Paris?")

    call_message, result, answer = messages[-3:]
    assert call_message.stop_reason == "toolUse"
    assert call_message.content == [ToolCall(id="tooluse_1", name="get_temperature", arguments={"city": "Paris"})]
    assert result.content == [TextContent("30°C")] and not result.is_error
    assert answer.content == [TextContent("It is 30°C in Paris.")] and answer.stop_reason == "stop"
    assert agent.state.error_message is None
    assert server.requests[0].path == "/model/us.amazon.nova-micro-v1%3A0/converse-stream"
    second = server.requests[1].json()
    assert second["messages"][1:] == [
        {
            "role": "assistant",
            "content": [{"toolUse": {"toolUseId": "tooluse_1", "name": "get_temperature", "input": {"city": "Paris"}}}],
        },
        {
            "role": "user",
            "content": [{"toolResult": {"toolUseId": "tooluse_1", "content": [{"text": "30°C"}], "status": "success"}}],
        },
    ]
    assert second["toolConfig"]["tools"][0]["toolSpec"]["name"] == "get_temperature"
    assert second["system"] == [{"text": "Be brief."}]


def test_agent_replays_the_recorded_tool_conversation(server: Server, aws_env: dict) -> None:
    recording = load_recording("tool-use-then-text")
    for index in (0, 1):
        server.enqueue(Reply(body=recorded_body(recording, index), chunk_size=11))
    agent = Agent(model=_local(server), system_prompt="You are a helpful chatbot.", tools=[get_temperature])
    messages = agent.prompt("What is the temperature of the capital of France?")
    assert messages[-1].content == [TextContent("The current temperature in Paris, the capital of France, is 30°C.")]
    recorded = recording["interactions"][1]["request"]["body"]["messages"]
    assert server.requests[1].json()["messages"] == recorded  # byte-for-byte the conversation the service saw


def test_a_failed_turn_does_not_wedge_the_conversation(server: Server, aws_env: dict) -> None:
    # the failed answer is not replayed (spec §6), so "hi" and "hello?" would be two user messages
    # in a row, which Bedrock refuses (400 ValidationException) on every later request
    server.enqueue(Reply(body=exception("modelStreamErrorException", "The model stream failed")))
    server.enqueue(Reply(body=text_stream("Hello!")))
    agent = Agent(model=_local(server))
    assert agent.prompt("hi")[-1].stop_reason == "error"
    answer = agent.prompt("hello?")[-1]
    assert (answer.stop_reason, answer.content) == ("stop", [TextContent("Hello!")])
    assert server.requests[1].json()["messages"] == [{"role": "user", "content": [{"text": "hi"}, {"text": "hello?"}]}]


def test_importing_the_plugin_stays_light() -> None:
    import subprocess
    import sys

    code = (
        "import sys, agentcore_bedrock.plugin; "
        "print(sorted(m for m in ('botocore', 'requests', 'jsonschema') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"  # botocore and requests load when the first request is made


def test_the_agent_passes_the_plugin_s_own_options(server: Server, aws_env: dict) -> None:
    """region, request_metadata ... are options of this provider only: Agent() and -o accept them
    because the provider declares them (stream_options), and they reach the request."""
    from agentcore.options import installed_provider_options, parse_cli_option

    assert {"region", "profile", "endpoint_url", "request_metadata", "interleaved_thinking"} <= set(
        installed_provider_options()
    )
    assert parse_cli_option("region", "eu-west-3", installed_provider_options) == ("region", "eu-west-3")
    server.enqueue(Reply(body=text_stream("Bonjour.")))
    agent = Agent(model=_local(server), region="eu-west-3", request_metadata={"team": "docs"})
    assert agent.prompt("Salut")[-1].content == [TextContent("Bonjour.")]
    request = server.requests[0]
    assert "/eu-west-3/bedrock/aws4_request" in request.headers["Authorization"]  # signed for that region
    assert request.json()["requestMetadata"] == {"team": "docs"}


def test_a_portable_agent_spec_carries_the_plugin_s_options() -> None:
    import pickle

    from agentcore.many import AgentSpec

    spec = AgentSpec("amazon-bedrock/amazon.nova-micro-v1:0", options={"region": "eu-west-3", "max_tokens": 10})
    built = pickle.loads(pickle.dumps(spec)).build()  # as a worker process gets it
    assert built.options.provider_options == {"region": "eu-west-3"} and built.options.max_tokens == 10


def test_the_command_line_runs_on_a_default_profile(server: Server, aws_env: dict, monkeypatch, tmp_path) -> None:
    """``aws configure`` writes a [default] profile that no environment variable names; the command
    line refused it ("no API key for provider amazon-bedrock") before the provider, whose botocore
    chain finds it, was asked."""
    import io

    from agentcore.cli import main

    credentials = tmp_path / "credentials"
    credentials.write_text(
        f"[default]\naws_access_key_id = {aws_env['AWS_ACCESS_KEY_ID']}\naws_secret_access_key = s3cr3t-from-file\n"
    )
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.delenv("AGENTCORE_MODEL", raising=False)
    server.enqueue(Reply(body=text_stream("from the profile")))
    out, err = io.StringIO(), io.StringIO()
    argv = [
        "run",
        "--no-log",
        "--model",
        "amazon-bedrock/amazon.nova-micro-v1:0",
        "-o",
        "endpoint_url",
        server.url,
        "hi",
    ]
    code = main(argv, stdin=io.StringIO(""), stdout=out, stderr=err)
    assert code == 0, err.getvalue()
    assert "from the profile" in out.getvalue()
    assert (
        "Credential=" + aws_env["AWS_ACCESS_KEY_ID"] in server.requests[0].headers["Authorization"]
    )  # signed with the profile
    assert "s3cr3t-from-file" not in out.getvalue() + err.getvalue()

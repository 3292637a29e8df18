"""Streams over HTTP: the google-generative-ai recordings replayed at Vertex paths (same wire
format), HTTP errors, abort, an end-to-end Agent run with tool calls, and no token anywhere."""

from __future__ import annotations

import json
import socket
import threading

import google.auth
import google.oauth2.credentials
import pytest
from agentcore_vertex import VertexProvider
from vertex_helpers import FakeCredentials, Reply, load_recording

from agentcore import AbortController, Agent, Session, hookimpl, tool
from agentcore.types import AgentContext, Model, ModelCost, TextContent, ToolResultMessage, UserMessage

TOKEN = "ya29.a0AfB_test-access-token-0123456789"
TOOLS = [
    {
        "name": "get_capital",
        "description": "Get the capital of a country.",
        "parameters": {"type": "object", "properties": {"country": {"type": "string"}}, "required": ["country"]},
    },
    {
        "name": "get_temperature",
        "description": "Get the temperature in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
]
PRICES = ModelCost(0.3, 2.5, 0.03, 0)


def _model(server, model_id="gemini-2.0-flash", reasoning=False):
    return Model(
        id=model_id,
        api="google-vertex",
        provider="google-vertex",
        base_url=server.url,
        reasoning=reasoning,
        input=("text", "image"),
        cost=PRICES,
    )


def _provider(token=TOKEN):
    return VertexProvider(google.oauth2.credentials.Credentials(token=token), project="my-proj", location="us-central1")


def _run(provider, model, context, **options):
    stream = provider.stream(model, context, **options)
    events = list(stream)
    return stream.result(), [e.type for e in events]


def _vertex_path(model_id):
    return f"/v1/projects/my-proj/locations/us-central1/publishers/google/models/{model_id}:streamGenerateContent"


def test_function_call_three_turns_replayed_at_vertex_paths(server):  # recording function-call-three-turns
    server.replay(load_recording("function-call-three-turns"))
    provider, model = _provider(), _model(server)
    messages = [UserMessage(content="What is the temperature of the capital of France?")]

    first, types = _run(provider, model, AgentContext(messages=list(messages), tools=TOOLS))
    assert types == ["start", "toolcall_start", "toolcall_delta", "toolcall_end", "done"]
    (call1,) = first.content
    assert (call1.name, call1.arguments) == ("get_capital", {"country": "France"})
    assert first.stop_reason == "toolUse" and first.api == "google-vertex"
    assert (first.usage.input, first.usage.output, first.usage.total_tokens) == (52, 5, 57)
    assert (first.response_id, first.response_model) == ("1lpeaMTxIpW1nvgP-O3vwQY", None)  # issue 17, shared parsing
    messages += [
        first,
        ToolResultMessage(tool_call_id=call1.id, tool_name="get_capital", content=[TextContent("Paris")]),
    ]

    second, _ = _run(provider, model, AgentContext(messages=list(messages), tools=TOOLS))
    (call2,) = second.content
    assert (call2.name, call2.arguments) == ("get_temperature", {"city": "Paris"}) and call2.id != call1.id
    messages += [
        second,
        ToolResultMessage(tool_call_id=call2.id, tool_name="get_temperature", content=[TextContent("30°C")]),
    ]

    third, types = _run(provider, model, AgentContext(messages=list(messages), tools=TOOLS))
    assert types == ["start", "text_start", "text_delta", "text_delta", "text_end", "done"]
    assert third.text == "The temperature in Paris is 30°C.\n" and third.stop_reason == "stop"
    assert (third.usage.input, third.usage.output, third.usage.total_tokens) == (79, 12, 91)
    assert third.usage.cost.total == pytest.approx((79 * 0.3 + 12 * 2.5) / 1e6)

    for request in server.requests:
        assert request.path == _vertex_path("gemini-2.0-flash") and request.query == "alt=sse"
        assert request.headers["authorization"] == f"Bearer {TOKEN}"
        assert "x-goog-api-key" not in request.headers
    sent = server.requests[2].json()["contents"]
    assert [c["role"] for c in sent] == ["user", "model", "user", "model", "user"]
    assert [p["functionResponse"]["response"] for c in sent for p in c["parts"] if "functionResponse" in p] == [
        {"output": "Paris"},
        {"output": "30°C"},
    ]


def test_thinking_parts_replayed_with_signature(server):  # recording thinking-parts
    server.replay(load_recording("thinking-parts"), chunk_size=5)
    model = _model(server, "gemini-2.5-pro", reasoning=True)
    context = AgentContext(
        system_prompt="You are a helpful assistant.", messages=[UserMessage(content="How do I cross the street?")]
    )
    result, types = _run(_provider(), model, context, reasoning="medium")
    assert types[:7] == ["start", "thinking_start"] + ["thinking_delta"] * 4 + ["thinking_end"]
    assert types[7] == "text_start" and types[-2:] == ["text_end", "done"]
    thinking, text = result.content
    assert thinking.thinking.startswith("**Clarifying User Goals**")
    assert "**Crafting Safe Instructions**" in thinking.thinking
    assert text.text.startswith("This is a great question!")
    assert text.text.endswith("Always assume a driver might not see you.")
    assert text.text_signature.startswith("CiIB0e2Kb6Syj1a961Ef")
    assert (result.usage.input, result.usage.output, result.usage.total_tokens) == (34, 469 + 787, 1290)
    body = server.requests[0].json()
    assert server.requests[0].path == _vertex_path("gemini-2.5-pro")
    assert body["generationConfig"]["thinkingConfig"] == {"includeThoughts": True, "thinkingBudget": 8192}
    assert body["systemInstruction"] == {"parts": [{"text": "You are a helpful assistant."}]}


def test_http_error_keeps_status_and_message_without_the_token(server):  # spec §9 google
    echoed = {
        "error": {
            "code": 403,
            "status": "PERMISSION_DENIED",
            "message": f"Permission 'aiplatform.endpoints.predict' denied (token Bearer {TOKEN})",
        }
    }
    server.replies.append(Reply(403, json.dumps(echoed), "application/json"))
    result, types = _run(_provider(), _model(server), AgentContext(messages=[UserMessage(content="hi")]), max_retries=0)
    assert types == ["error"] and result.stop_reason == "error"
    assert result.error_message.startswith("403 ") and "PERMISSION_DENIED" in result.error_message
    assert "aiplatform.endpoints.predict" in result.error_message
    assert TOKEN not in result.error_message and TOKEN[5:] not in result.error_message


def test_in_stream_error_and_missing_finish_reason(server):
    server.replies.append(
        Reply(body='data: {"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}\r\n\r\n')
    )
    server.replies.append(Reply(body='data: {"candidates": [{"content": {"parts": [{"text": "Hel"}]}}]}\r\n\r\n'))
    provider, model = _provider(), _model(server)
    ctx = AgentContext(messages=[UserMessage(content="hi")])
    failed, _ = _run(provider, model, ctx, max_retries=0)  # retried like a 429 otherwise (issue 17)
    assert failed.stop_reason == "error" and "RESOURCE_EXHAUSTED" in failed.error_message
    assert failed.error_message.endswith("(gave up after 1 attempt, max_retries=0)")
    cut, types = _run(provider, model, ctx)
    assert cut.text == "Hel" and cut.error_message == "Gemini stream ended without a finish reason"
    assert types == ["start", "text_start", "text_delta", "text_end", "error"]


def test_abort_mid_stream_keeps_partial_text(server):
    first = 'data: {"candidates": [{"content": {"parts": [{"text": "Hel"}], "role": "model"}}]}\r\n\r\n'
    rest = 'data: {"candidates": [{"content": {"parts": [{"text": "lo"}]}, "finishReason": "STOP"}]}\r\n\r\n'
    server.replies.append(Reply(body=first + rest, stall_after=len(first)))
    controller = AbortController()
    stream = _provider().stream(
        _model(server), AgentContext(messages=[UserMessage(content="hi")]), signal=controller.signal
    )
    types = []
    for event in stream:
        types.append(event.type)
        if event.type == "text_delta":
            assert server.stalled.wait(10)
            controller.abort()
    result = stream.result()
    assert result.stop_reason == "aborted" and result.error_message == "Request was aborted"
    assert result.text == "Hel" and types[-1] == "error"


def test_expiring_token_is_refreshed_between_requests(server):
    import datetime

    creds = FakeCredentials("ya29.first-token", "ya29.second-token", lifetime=datetime.timedelta(minutes=2))
    provider = VertexProvider(creds, project="my-proj", location="us-central1")
    ok = 'data: {"candidates": [{"content": {"parts": [{"text": "ok"}]}, "finishReason": "STOP"}]}\r\n\r\n'
    server.replies += [Reply(body=ok), Reply(body=ok)]
    ctx = AgentContext(messages=[UserMessage(content="hi")])
    assert _run(provider, _model(server), ctx)[0].text == "ok"
    assert _run(provider, _model(server), ctx)[0].text == "ok"  # 2 minutes left < 5 minute margin
    assert [r.headers["authorization"] for r in server.requests] == [
        "Bearer ya29.first-token",
        "Bearer ya29.second-token",
    ]


class _VertexForThisAgent:
    """How a user configures the provider by hand: a plugin registering their own instance."""

    def __init__(self, provider):
        self.provider = provider

    @hookimpl
    def register_providers(self, register):
        register(self.provider)


def test_agent_run_with_tool_calls_end_to_end_through_adc(server, monkeypatch, tmp_path):
    monkeypatch.setattr(
        "google.auth.default",
        lambda scopes=None, **kw: (google.oauth2.credentials.Credentials(token=TOKEN), "adc-proj"),
    )
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "global")
    server.replay(load_recording("function-call-three-turns"), chunk_size=5)

    @tool
    def get_capital(country: str) -> str:
        """Get the capital of a country."""
        return {"France": "Paris"}[country]

    @tool
    def get_temperature(city: str) -> str:
        """Get the temperature in a city."""
        return {"Paris": "30°C"}[city]

    path = tmp_path / "run.jsonl"
    agent = Agent(
        model=_model(server),
        system_prompt="You are a helpful chatbot.",
        tools=[get_capital, get_temperature],
        plugins=[_VertexForThisAgent(VertexProvider())],
        session=Session.create(path),
    )
    new = agent.prompt("What is the temperature of the capital of France?")
    assert [m.role for m in new] == ["user", "assistant", "toolResult", "assistant", "toolResult", "assistant"]
    assert [m.text for m in new if m.role == "toolResult"] == ["Paris", "30°C"]
    assert new[-1].text == "The temperature in Paris is 30°C.\n" and new[-1].api == "google-vertex"
    assert {r.path for r in server.requests} == {
        "/v1/projects/adc-proj/locations/global/publishers/google/models/gemini-2.0-flash:streamGenerateContent"
    }
    assert TOKEN not in path.read_text(encoding="utf-8") and TOKEN not in repr(agent)


def test_the_agent_passes_project_and_location_options(server, monkeypatch):
    """project and location are this provider's own options (its stream_options): Agent() takes
    them as keywords and they choose the request path, over the environment."""
    monkeypatch.setattr(
        "google.auth.default",
        lambda scopes=None, **kw: (google.oauth2.credentials.Credentials(token=TOKEN), "adc-proj"),
    )
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "global")
    server.replay(load_recording("function-call-three-turns"), chunk_size=4096)
    agent = Agent(
        model=_model(server),
        plugins=[_VertexForThisAgent(VertexProvider())],
        project="opt-proj",
        location="asia-east1",
    )
    assert agent.options.provider_options == {"project": "opt-proj", "location": "asia-east1"}
    agent.prompt("What is the temperature of the capital of France?")
    assert server.requests[0].path.startswith("/v1/projects/opt-proj/locations/asia-east1/")


def test_entry_point_registers_the_provider_and_the_vertex_models():
    from agentcore import plugins

    provider = plugins.get_provider("google-vertex")
    assert isinstance(provider, VertexProvider)
    model = plugins.get_model("google-vertex/gemini-2.5-pro")
    assert (model.api, model.base_url, model.reasoning) == (
        "google-vertex",
        "https://{location}-aiplatform.googleapis.com",
        True,
    )
    assert (model.cost.input, model.cost.output, model.context_window) == (1.25, 10, 1048576)
    assert len(plugins.models("google-vertex")) == 13


OK_BODY = 'data: {"candidates": [{"content": {"parts": [{"text": "ok"}]}, "finishReason": "STOP"}]}\r\n\r\n'
UNAUTHENTICATED = json.dumps(
    {"error": {"code": 401, "status": "UNAUTHENTICATED", "message": "Request had invalid authentication credentials."}}
)


def test_rejected_token_is_refreshed_and_the_request_retried_once(server):
    creds = FakeCredentials("ya29.revoked-early", "ya29.fresh-token")
    provider = VertexProvider(creds, project="my-proj", location="us-central1")
    server.replies += [Reply(401, UNAUTHENTICATED, "application/json"), Reply(body=OK_BODY)]
    seen = []
    result, types = _run(
        provider,
        _model(server),
        AgentContext(messages=[UserMessage(content="hi")]),
        on_response=lambda status, headers: seen.append(status),
    )
    assert result.text == "ok" and types == ["start", "text_start", "text_delta", "text_end", "done"]
    assert [r.headers["authorization"] for r in server.requests] == [
        "Bearer ya29.revoked-early",
        "Bearer ya29.fresh-token",
    ]
    assert seen == [401, 200] and creds.refreshes == 2


def test_a_second_401_is_the_error(server):
    creds = FakeCredentials("ya29.one", "ya29.two", "ya29.three")
    provider = VertexProvider(creds, project="my-proj", location="us-central1")
    server.replies += [Reply(401, UNAUTHENTICATED, "application/json")] * 2
    result, types = _run(provider, _model(server), AgentContext(messages=[UserMessage(content="hi")]))
    assert types == ["error"] and result.error_message.startswith("401 ") and "UNAUTHENTICATED" in result.error_message
    assert len(server.requests) == 2


def test_a_rejected_token_that_cannot_be_refreshed_keeps_the_401(server):
    """A bare access token (``gcloud auth print-access-token``) that expires during a long run:
    the server's 401 and its text stay in the error, followed by why the refresh failed, instead
    of a refresh error alone that never says the server rejected the token."""
    creds = google.oauth2.credentials.Credentials(token=TOKEN)  # nothing to refresh it with
    provider = VertexProvider(creds, project="my-proj", location="us-central1")
    server.replies.append(Reply(401, UNAUTHENTICATED, "application/json"))
    result, types = _run(provider, _model(server), AgentContext(messages=[UserMessage(content="hi")]))
    first, second = result.error_message.split("\n")
    assert types == ["error"] and result.stop_reason == "error" and len(server.requests) == 1
    assert first.startswith("401 ") and "UNAUTHENTICATED" in first
    assert second.startswith("Vertex AI: could not refresh the Google Cloud access token: RefreshError: ")
    assert TOKEN not in result.error_message


def test_adc_that_can_no_longer_refresh_is_looked_up_again(server, monkeypatch):
    """Reauthentication required (a user ADC refresh token revoked or timed out): the error says to
    run ``gcloud auth application-default login``, but the provider kept the old credentials for
    the life of the process, so a long-running agent failed on every request even after that
    login. A refresh failure that leaves no usable token drops the ADC source: the next request
    looks the credentials up again and finds the new ones."""
    stale, renewed = FakeCredentials(), FakeCredentials("ya29.after-login")  # stale: refresh fails
    found = [stale, renewed]
    monkeypatch.setattr("google.auth.default", lambda scopes=None, **kwargs: (found.pop(0), "adc-proj"))
    provider = VertexProvider(location="us-central1")
    server.replies.append(Reply(body=OK_BODY))
    ctx = AgentContext(messages=[UserMessage(content="hi")])
    failed, _ = _run(provider, _model(server), ctx)
    assert failed.error_message.startswith("Vertex AI: could not refresh the Google Cloud access token: RefreshError")
    assert "gcloud auth application-default login" in failed.error_message and not server.requests
    result, _ = _run(provider, _model(server), ctx)
    assert result.text == "ok" and found == [] and stale.refreshes == 1
    assert server.requests[0].headers["authorization"] == "Bearer ya29.after-login"


def test_the_refresh_retry_keeps_what_is_left_of_max_retries(server):
    """503, 503, 401 spend two of max_retries=2 before the token is refreshed: the retried
    request gets no fresh budget, so its own 503 ends the stream (4 requests, not 6)."""
    creds = FakeCredentials("ya29.one", "ya29.two")
    provider = VertexProvider(creds, project="my-proj", location="us-central1")
    busy = Reply(503, json.dumps({"error": {"code": 503, "message": "busy"}}), "application/json")
    server.replies += [busy, busy, Reply(401, UNAUTHENTICATED, "application/json"), busy, busy, Reply(body=OK_BODY)]
    result, types = _run(
        provider,
        _model(server),
        AgentContext(messages=[UserMessage(content="hi")]),
        max_retries=2,
        max_retry_delay_ms=0,
    )
    assert types == ["error"] and result.error_message.startswith("503 "), result.error_message
    assert result.error_message.endswith("(gave up after 1 attempt, max_retries=0)")
    assert len(server.requests) == 4


def test_a_late_401_for_a_replaced_token_keeps_the_fresh_one(server):
    """Two requests sent with the same token both get 401. The first refreshes and retries; the
    second's 401 comes after that refresh and is about the old token: it retries with the fresh
    one instead of throwing it away (a refresh that fails then would fail a request the fresh
    token serves, and every request waiting for it)."""
    creds = FakeCredentials("ya29.revoked", "ya29.fresh")  # a third refresh fails
    provider = VertexProvider(creds, project="my-proj", location="us-central1")
    late_401 = Reply(401, UNAUTHENTICATED, "application/json", stall_after=0)
    server.replies += [
        late_401,
        Reply(401, UNAUTHENTICATED, "application/json"),
        Reply(body=OK_BODY),
        Reply(body=OK_BODY),
    ]
    ctx = AgentContext(messages=[UserMessage(content="hi")])
    late = []
    second = threading.Thread(target=lambda: late.append(_run(provider, _model(server), ctx)), daemon=True)
    second.start()
    try:
        assert server.stalled.wait(10)  # its 401 is on the way, not read yet
        first, _ = _run(provider, _model(server), ctx)
        assert first.text == "ok"
    finally:
        server.release.set()
    second.join(10)
    ((result, types),) = late
    assert result.text == "ok" and types[-1] == "done", result.error_message
    assert [r.headers["authorization"] for r in server.requests] == ["Bearer ya29.revoked"] * 2 + [
        "Bearer ya29.fresh"
    ] * 2
    assert creds.refreshes == 2


def test_express_mode_sends_the_key_and_no_bearer(server):
    server.replies.append(Reply(body=OK_BODY))
    model = _model(server)
    result, _ = _run(
        VertexProvider(), model, AgentContext(messages=[UserMessage(content="hi")]), api_key="AQ.express-key-0123456789"
    )
    request = server.requests[0]
    assert result.text == "ok"
    assert request.path == "/v1/publishers/google/models/gemini-2.0-flash:streamGenerateContent"
    assert request.headers["x-goog-api-key"] == "AQ.express-key-0123456789" and "authorization" not in request.headers


def test_credentials_given_in_code_win_over_google_cloud_api_key(server, monkeypatch):
    """GOOGLE_CLOUD_API_KEY is a fallback: credentials passed to the provider or as the option
    keep their bearer token and project path; only an api_key option still means express mode."""
    monkeypatch.setenv("GOOGLE_CLOUD_API_KEY", "AQ.ambient-key-0123456789")
    server.replies += [Reply(body=OK_BODY) for _ in range(4)]
    model, ctx = _model(server), AgentContext(messages=[UserMessage(content="hi")])
    creds = google.oauth2.credentials.Credentials(token=TOKEN)
    where = {"project": "my-proj", "location": "us-central1"}
    _run(VertexProvider(creds, **where), model, ctx)
    _run(VertexProvider(), model, ctx, credentials=creds, **where)
    _run(VertexProvider(creds, **where), model, ctx, api_key="AQ.explicit-key-0123456789")
    _run(VertexProvider(), model, ctx)
    express = "/v1/publishers/google/models/gemini-2.0-flash:streamGenerateContent"
    assert [r.path for r in server.requests] == [_vertex_path("gemini-2.0-flash")] * 2 + [express] * 2
    assert [(r.headers.get("authorization"), r.headers.get("x-goog-api-key")) for r in server.requests] == [
        (f"Bearer {TOKEN}", None),
        (f"Bearer {TOKEN}", None),
        (None, "AQ.explicit-key-0123456789"),
        (None, "AQ.ambient-key-0123456789"),
    ]


@pytest.mark.parametrize("blank", ["\r", "  "])
def test_a_blank_google_cloud_api_key_leaves_adc_in_charge(server, monkeypatch, blank):
    """``GOOGLE_CLOUD_API_KEY=`` in a CRLF ``.env`` file leaves ``"\\r"``: it chose express mode
    with no key, and the request failed with "no API key for provider google-vertex" although
    Application Default Credentials were there. A blank ``api_key`` option is no key either."""
    monkeypatch.setenv("GOOGLE_CLOUD_API_KEY", blank)
    monkeypatch.setattr(
        "google.auth.default", lambda scopes=None, **kwargs: (google.oauth2.credentials.Credentials(token=TOKEN), "adc")
    )
    server.replies += [Reply(body=OK_BODY), Reply(body=OK_BODY)]
    provider = VertexProvider(location="us-central1")
    ctx = AgentContext(messages=[UserMessage(content="hi")])
    first, _ = _run(provider, _model(server), ctx)
    second, _ = _run(provider, _model(server), ctx, api_key=blank)
    assert (first.error_message, second.error_message) == (None, None)
    adc_path = "/v1/projects/adc/locations/us-central1/publishers/google/models/gemini-2.0-flash:streamGenerateContent"
    assert [(r.path, r.headers["authorization"]) for r in server.requests] == [(adc_path, f"Bearer {TOKEN}")] * 2


@pytest.mark.parametrize("where", ["adc-file", "environment"])
def test_the_quota_project_of_adc_user_credentials_is_sent(server, monkeypatch, tmp_path, where):
    """User ADC after ``gcloud auth application-default set-quota-project`` (the file names it)
    or with GOOGLE_CLOUD_QUOTA_PROJECT: the refreshed token and x-goog-user-project both go out."""
    info = {
        "type": "authorized_user",
        "client_id": "client-id.apps.googleusercontent.com",
        "client_secret": "client-secret-0123456789",
        "refresh_token": "1//refresh-token-0123456789",
    }
    if where == "adc-file":
        info["quota_project_id"] = "billing-proj"
    else:
        monkeypatch.setenv("GOOGLE_CLOUD_QUOTA_PROJECT", "billing-proj")
    adc = tmp_path / "adc.json"
    adc.write_text(json.dumps(info), encoding="utf-8")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(adc))
    credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
    credentials = credentials.with_token_uri(f"{server.url}/token")  # user ADC files always name Google's
    grant = {"access_token": TOKEN, "expires_in": 3600, "token_type": "Bearer"}
    server.replies += [Reply(body=json.dumps(grant), content_type="application/json"), Reply(body=OK_BODY)]
    provider = VertexProvider(credentials, project="my-proj", location="us-central1")
    result, _ = _run(provider, _model(server), AgentContext(messages=[UserMessage(content="hi")]))
    token_request, vertex_request = server.requests
    assert result.text == "ok" and token_request.path == "/token"
    assert vertex_request.headers["authorization"] == f"Bearer {TOKEN}"
    assert vertex_request.headers["x-goog-user-project"] == "billing-proj"


def test_abort_while_the_token_refreshes_ends_the_stream_at_once(server):
    """A slow refresh (an unreachable token endpoint waits up to google-auth's 120 s) does not hold
    an aborted stream; the refresh goes on, and the next stream uses its token."""
    creds = FakeCredentials("ya29.slow-token")
    creds.hold = threading.Event()
    provider = VertexProvider(creds, project="my-proj", location="us-central1")
    server.replies.append(Reply(body=OK_BODY))
    ctx = AgentContext(messages=[UserMessage(content="hi")])
    controller = AbortController()
    results = []
    first = threading.Thread(
        target=lambda: results.append(_run(provider, _model(server), ctx, signal=controller.signal)), daemon=True
    )
    first.start()
    try:
        assert creds.refresh_started.wait(10)
        controller.abort()
        first.join(5)
        assert not first.is_alive(), "the stream waited for the refresh to return"
    finally:
        creds.hold.set()
    ((aborted, types),) = results
    assert types == ["error"] and aborted.stop_reason == "aborted" and aborted.error_message == "Request was aborted"
    result, _ = _run(provider, _model(server), ctx)
    assert result.text == "ok" and creds.refreshes == 1
    assert [r.headers["authorization"] for r in server.requests] == ["Bearer ya29.slow-token"]


def test_abort_while_adc_probes_a_silent_metadata_server_ends_the_stream_at_once(monkeypatch):
    """Off Google Cloud without ADC, google-auth probes the metadata server (three attempts of up
    to 3 s each where nothing answers): an abort meanwhile ends the stream at once, the look-up
    goes on by itself and still ends in the clear no-credentials error for the next request."""
    from google.auth.compute_engine import _metadata

    silent = socket.create_server(("127.0.0.1", 0))  # accepts connections, never answers
    probed = threading.Event()
    held = []

    def accept() -> None:
        while True:
            try:
                held.append(silent.accept()[0])
            except OSError:  # closed by the test
                return
            probed.set()

    threading.Thread(target=accept, daemon=True).start()
    monkeypatch.setattr(_metadata, "_NO_GCE_CHECK", False)  # read from NO_GCE_CHECK at import
    monkeypatch.setenv("GCE_METADATA_IP", f"127.0.0.1:{silent.getsockname()[1]}")
    provider = VertexProvider(project="p", location="us-central1")
    model = Model(id="gemini-2.0-flash", api="google-vertex", provider="google-vertex", base_url="")
    ctx = AgentContext(messages=[UserMessage(content="hi")])
    controller = AbortController()
    results = []
    first = threading.Thread(
        target=lambda: results.append(_run(provider, model, ctx, signal=controller.signal)), daemon=True
    )
    first.start()
    try:
        assert probed.wait(10)
        controller.abort()
        first.join(2)
        assert not first.is_alive(), "the stream waited for the metadata-server probe"
    finally:
        silent.close()  # the probe's next attempts are refused: the look-up ends
        for conn in held:
            conn.close()
    ((aborted, types),) = results
    assert types == ["error"] and aborted.stop_reason == "aborted" and aborted.error_message == "Request was aborted"
    result, _ = _run(provider, model, ctx)
    assert result.stop_reason == "error"
    assert result.error_message.startswith("Vertex AI: no Google Cloud credentials found")


def test_loading_the_plugin_imports_no_wire_code_and_no_google_auth():
    import subprocess
    import sys

    code = (
        "import sys, agentcore_vertex.plugin; "
        "print(sorted(m for m in ('agentcore.providers.google', 'google.auth', 'requests') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


GOOD = 'data: {"candidates": [{"content": {"parts": [{"text": "fine"}]}, "finishReason": "STOP"}]}\r\n\r\n'


def test_a_silent_server_hits_the_read_timeout(server):  # issue 17: timeout on every API
    server.replies.append(Reply(body=GOOD, stall_after=0))
    ctx = AgentContext(messages=[UserMessage(content="hi")])
    result, types = _run(_provider(), _model(server), ctx, timeout=(5, 0.2), max_retries=0)
    server.release.set()
    assert types == ["start", "error"] and result.error_message.startswith("Timed out while streaming")


def test_max_retries_and_in_stream_overloads_share_one_budget(server):  # issue 17
    busy = Reply(503, '{"error": {"code": 503, "message": "busy", "status": "UNAVAILABLE"}}', "application/json")
    overloaded = Reply(body='data: {"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}\r\n\r\n')
    server.replies.extend([busy, busy, busy])
    ctx = AgentContext(messages=[UserMessage(content="hi")])
    result, _ = _run(_provider(), _model(server), ctx, max_retries=2)
    assert result.error_message.startswith("503 ") and "busy" in result.error_message
    assert result.error_message.endswith("(gave up after 3 attempts, max_retries=2)") and len(server.requests) == 3
    server.replies.extend([busy, overloaded, Reply(body=GOOD)])
    result, types = _run(_provider(), _model(server), ctx, max_retries=2)
    assert result.stop_reason == "stop" and result.text == "fine" and len(server.requests) == 6
    assert types.count("start") == 1

"""Azure OpenAI (issue 17): ``azure-openai-responses`` and chat completions on Azure deployments.

Requests go to a local server posing as the Azure resource (``azure_base_url=``); the recorded
OpenAI streams of ``../shared/recordings`` are replayed through the Azure providers and must give
exactly what the OpenAI providers give for the same bytes.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Dict

import pytest
from _servers import Reply, ScriptedServer, sse
from _servers import load_recording as find_recording
from _wire_replay import MULTIPLY, first_user_text, load_recording, replay_pure, responses_tool_results, run_stream

import agentcore
from agentcore.providers import azure, get_env_api_key, stream
from agentcore.providers import openai_completions as completions_wire
from agentcore.providers import openai_responses as responses_wire
from agentcore.providers.base import StreamWriter, WireRequest
from agentcore.signals import AbortController
from agentcore.types import AgentContext, Model, ModelCost, UserMessage

KEY = "0123456789abcdef0123456789abcdef"  # the shape of an Azure resource key
#: the shape of a Microsoft Entra ID access token (a JWT): header.payload.signature
TOKEN = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.eyJhdWQiOiJodHRwczovL2NvZ25pdGl2ZXNlcnZpY2VzIn0.c2lnbmF0dXJl"
AZURE_VARIABLES = (
    "AZURE_OPENAI_API_KEY",
    "AZURE_OPENAI_BASE_URL",
    "AZURE_OPENAI_RESOURCE_NAME",
    "AZURE_OPENAI_API_VERSION",
    "AZURE_OPENAI_DEPLOYMENT_NAME_MAP",
)


@pytest.fixture(autouse=True)
def _no_azure_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in AZURE_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def _responses_model(**kw: Any) -> Model:
    fields: Dict[str, Any] = dict(
        id="gpt-5.5",
        name="GPT-5.5",
        api="azure-openai-responses",
        provider="azure-openai-responses",
        base_url="",
        reasoning=True,
        input=("text", "image"),
        cost=ModelCost(1.25, 10, 0.125, 0),
    )
    fields.update(kw)
    return Model(**fields)


def _chat_model(**kw: Any) -> Model:
    fields: Dict[str, Any] = dict(id="gpt-4o-mini", api="openai-completions", provider="azure-openai")
    fields.update(kw)
    return Model(**fields)


def _ctx(text: str = "hi") -> AgentContext:
    return AgentContext(messages=[UserMessage(content=text)])


def _sse(*payloads: Dict[str, Any]) -> str:
    return "".join(f"event: {p['type']}\ndata: {json.dumps(p)}\n\n" for p in payloads)


def _text_events(*words: str) -> str:
    added = {"type": "response.output_item.added", "output_index": 0, "item": {"type": "message", "id": "msg_1"}}
    deltas = [{"type": "response.output_text.delta", "output_index": 0, "delta": w} for w in words]
    done = {
        "type": "response.output_item.done",
        "output_index": 0,
        "item": {"type": "message", "id": "msg_1", "content": [{"type": "output_text", "text": "".join(words)}]},
    }
    completed = {"type": "response.completed", "response": {"status": "completed", "usage": {"input_tokens": 3}}}
    return _sse(added, *deltas, done, completed)


# --------------------------------------------------------------------------- request building


def test_responses_request_url_query_headers_and_body(monkeypatch):  # issue 17: resource, deployment, api-version
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    monkeypatch.setenv("AZURE_OPENAI_DEPLOYMENT_NAME_MAP", "gpt-4o=other, gpt-5.5=prod-gpt55 ,broken")
    with ScriptedServer([Reply(body=_text_events("Hel", "lo"), chunk_size=5)]) as server:
        model = _responses_model()
        result, events = run_stream(
            agentcore.get_provider("azure-openai-responses"),
            model,
            AgentContext(system_prompt="Be brief.", messages=[UserMessage("hi")], tools=[MULTIPLY]),
            azure_base_url=server.url + "/openai/v1/",
            reasoning="low",
            session_id="s-1",
            max_tokens=99,
        )
        request = server.requests[0]
    assert result.text == "Hello" and result.stop_reason == "stop" and events[0].type == "start"
    assert (request.method, request.path, request.query) == ("POST", "/openai/v1/responses", "api-version=v1")
    assert request.headers["api-key"] == KEY and "authorization" not in request.headers
    body = request.json()
    expected = responses_wire.build_request_body(
        model,
        AgentContext(system_prompt="Be brief.", messages=[UserMessage("hi")], tools=[MULTIPLY]),
        reasoning="low",
        session_id="s-1",
        max_tokens=99,
    )
    expected["model"] = "prod-gpt55"  # the deployment, not the model id
    assert body == expected
    assert body["reasoning"] == {"effort": "low", "summary": "auto"} and body["prompt_cache_key"] == "s-1"
    assert result.api == "azure-openai-responses" and result.model == "gpt-5.5"


def test_target_resolution_follows_the_reference():  # issue 17: variables, options, defaults
    model = _responses_model(base_url="https://from-model.openai.azure.com/openai/v1")
    env = {"AZURE_OPENAI_RESOURCE_NAME": "res-env"}
    assert azure.resolve_target(model, {}, env={}).url("responses") == (
        "https://from-model.openai.azure.com/openai/v1/responses?api-version=v1"
    )
    target = azure.resolve_target(model, {}, env=env)
    assert target.base_url == "https://res-env.openai.azure.com/openai/v1" and target.resource == "res-env"
    env["AZURE_OPENAI_BASE_URL"] = "https://res-base.cognitiveservices.azure.com/"
    assert azure.resolve_target(model, {}, env=env).base_url == "https://res-base.cognitiveservices.azure.com/openai/v1"
    options = {"azure_resource_name": "res-option", "azure_api_version": "preview", "azure_deployment_name": "dep"}
    target = azure.resolve_target(model, options, env={})
    assert target.url("responses") == "https://res-option.openai.azure.com/openai/v1/responses?api-version=preview"
    assert target.deployment == "dep"
    env = {"AZURE_OPENAI_API_VERSION": "2025-04-01-preview", "AZURE_OPENAI_RESOURCE_NAME": "old"}
    assert azure.resolve_target(model, {}, env=env).url("responses") == (
        "https://old.openai.azure.com/openai/responses?api-version=2025-04-01-preview"
    )
    assert azure.parse_deployment_map(" a=b,,c=, =d,e=f ") == {"a": "b", "e": "f"}


def test_missing_endpoint_and_bad_options_are_clear_errors(monkeypatch):  # issue 17: bad input
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    result = stream(_responses_model(), _ctx()).result()
    assert result.stop_reason == "error"
    assert "AZURE_OPENAI_BASE_URL or AZURE_OPENAI_RESOURCE_NAME" in result.error_message
    bad = stream(_responses_model(), _ctx(), azure_base_url="res.openai.azure.com").result()
    assert "Invalid Azure OpenAI base URL" in bad.error_message
    hidden = stream(_responses_model(), _ctx(), azure_base_url="ftp://me:pw-1234567@host/?sig=abcdefgh").result()
    assert "Invalid Azure OpenAI base URL: 'ftp://host/'" in hidden.error_message
    assert "pw-1234567" not in hidden.error_message and "abcdefgh" not in hidden.error_message
    auth = stream(_responses_model(), _ctx(), azure_resource_name="r", azure_auth="token").result()
    assert auth.error_message == "stream(): azure_auth 'token': choose one of api-key, bearer"
    direct = azure.AzureOpenAIResponsesProvider().stream(
        _responses_model(), _ctx(), azure_resource_name="r", azure_auth="token"
    )
    assert direct.result().error_message == 'azure_auth must be "api-key" or "bearer", got \'token\''
    monkeypatch.delenv("AZURE_OPENAI_API_KEY")
    keyless = stream(_responses_model(), _ctx(), azure_resource_name="r").result()
    assert "AZURE_OPENAI_API_KEY" in keyless.error_message


def test_a_base_url_missing_its_scheme_is_refused_without_its_password(monkeypatch):
    """``me:password@res.openai.azure.com`` (``https://`` forgotten) is a scheme and a path to URL
    parsers: the "Invalid Azure OpenAI base URL" error quoted it whole, password included, into
    the transcript's error_message (and the session file); so did a resource name holding one."""
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    model = _responses_model()
    model.base_url = "me:pw-1234567@res.openai.azure.com/openai/v1"
    result = stream(model, _ctx()).result()
    assert "Invalid Azure OpenAI base URL: 'me:***@res.openai.azure.com/openai/v1'" in result.error_message
    assert "pw-1234567" not in result.error_message
    monkeypatch.setenv("AZURE_OPENAI_RESOURCE_NAME", "me:pw-1234567@myres")
    from_env = stream(_responses_model(), _ctx()).result()
    assert "resource name from AZURE_OPENAI_RESOURCE_NAME: 'me:***@myres'" in from_env.error_message
    assert "pw-1234567" not in from_env.error_message


def test_resource_name_option_wins_over_the_base_url_variable():  # docs/providers.rst: options win
    env = {"AZURE_OPENAI_BASE_URL": "https://env-res.openai.azure.com", "AZURE_OPENAI_RESOURCE_NAME": "env-name"}
    target = azure.resolve_target(_responses_model(), {"azure_resource_name": "option-res"}, env=env)
    assert target.url("responses") == "https://option-res.openai.azure.com/openai/v1/responses?api-version=v1"
    assert azure.resolve_target(_responses_model(), {}, env=env).resource == "env-res"
    both = {"azure_resource_name": "option-res", "azure_base_url": "https://url-res.openai.azure.com"}
    assert azure.resolve_target(_responses_model(), both, env=env).resource == "url-res"


def test_resource_name_that_is_a_url_or_host_is_a_clear_error(monkeypatch):  # issue 17: bad input
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    for value in ("https://myres.openai.azure.com", "myres.openai.azure.com", "my res"):
        result = stream(_responses_model(), _ctx(), azure_resource_name=value).result()
        assert result.stop_reason == "error" and result.error_message.startswith(
            f"Invalid Azure OpenAI resource name from azure_resource_name=: {value!r}"
        )
        assert "azure_base_url= or AZURE_OPENAI_BASE_URL" in result.error_message
    monkeypatch.setenv("AZURE_OPENAI_RESOURCE_NAME", "https://me:pw-1234567@myres.openai.azure.com/")
    from_env = stream(_responses_model(), _ctx()).result()
    assert "resource name from AZURE_OPENAI_RESOURCE_NAME: 'https://myres.openai.azure.com/'" in (
        from_env.error_message
    )
    assert "pw-1234567" not in from_env.error_message


def test_endpoint_url_copied_from_the_portal_is_cut_to_its_base_url():  # issue 17: target URIs
    chat = "https://myres.openai.azure.com/openai/deployments/chat-prod/chat/completions?api-version=2024-10-21"
    target = azure.resolve_target(_chat_model(), {"azure_base_url": chat}, env={})
    assert target.completions_url() == chat and target.api_version == "2024-10-21"
    responses = "https://myres.cognitiveservices.azure.com/openai/responses?api-version=2025-04-01-preview"
    target = azure.resolve_target(_responses_model(), {}, env={"AZURE_OPENAI_BASE_URL": responses})
    assert target.url("responses") == responses
    v1 = azure.resolve_target(
        _responses_model(base_url="https://myres.openai.azure.com/openai/v1/chat/completions"), {}, env={}
    )
    assert v1.url("responses") == "https://myres.openai.azure.com/openai/v1/responses?api-version=v1"
    forced = azure.resolve_target(_chat_model(), {"azure_base_url": chat, "azure_api_version": "v1"}, env={})
    assert forced.api_version == "v1"  # the option still wins


def test_a_deployment_url_from_the_portal_names_the_deployment_for_every_api():  # issue 17: target URIs
    # the portal shows a deployment's chat URL: a Responses request went to .../deployments/<name>/responses
    # (no such endpoint) with the model id as "model", and a 404 named the model id as the deployment
    chat = "https://myres.openai.azure.com/openai/deployments/chat-prod/chat/completions?api-version=2025-04-01-preview"
    request = azure.AzureOpenAIResponsesProvider().build_request(
        _responses_model(), _ctx(), {"azure_base_url": chat}, KEY
    )
    assert request.url == "https://myres.openai.azure.com/openai/responses?api-version=2025-04-01-preview"
    assert request.body["model"] == "chat-prod"
    target = azure.resolve_target(_chat_model(), {"azure_base_url": chat}, env={})
    assert (target.deployment, target.completions_url()) == ("chat-prod", chat)
    v1 = azure.resolve_target(_chat_model(), {"azure_base_url": chat, "azure_api_version": "v1"}, env={})
    assert (v1.deployment, v1.completions_url()) == (
        "chat-prod",
        "https://myres.openai.azure.com/openai/v1/chat/completions?api-version=v1",
    )
    named = azure.resolve_target(_chat_model(), {"azure_base_url": chat, "azure_deployment_name": "other"}, env={})
    assert named.completions_url().startswith("https://myres.openai.azure.com/openai/deployments/other/")


def test_api_version_in_the_base_url_is_sent(monkeypatch):  # issue 17: api-version of a pasted URL
    monkeypatch.setenv("AZURE_OPENAI_API_VERSION", "2024-10-21")
    with ScriptedServer([Reply(body=_text_events("ok"))]) as server:
        model = _responses_model(base_url=server.url + "/openai/v1?api-version=preview")
        result = stream(model, _ctx(), api_key=KEY).result()
        (request,) = server.requests
    assert result.text == "ok"
    assert (request.path, request.query) == ("/openai/v1/responses", "api-version=preview")


def test_query_parameters_of_the_base_url_are_sent(monkeypatch):  # a gateway's subscription-key
    # the base URL lost its query: an API Management gateway answered 401 to every request
    with ScriptedServer([Reply(body=_text_events("ok"))]) as server:
        base = server.url + "/openai/v1?subscription-key=s3cr3t-gw&api-version=preview"
        result = stream(_responses_model(base_url=base), _ctx(), api_key=KEY).result()
        (request,) = server.requests
    assert result.text == "ok"
    assert (request.path, request.query) == ("/openai/v1/responses", "subscription-key=s3cr3t-gw&api-version=preview")
    target = azure.resolve_target(_responses_model(base_url=base), {}, env={})
    assert "s3cr3t-gw" not in repr(target) and "subscription-key=***" in repr(target)


def test_entra_id_token_from_get_api_key_is_sent_as_bearer():  # issue 17: bearer from get_api_key
    asked = []

    def get_api_key(provider: str) -> str:
        asked.append(provider)
        return TOKEN

    with ScriptedServer([Reply(body=_text_events("ok")), Reply(body=_text_events("ok"))]) as server:
        model = _responses_model()  # the catalog's shape: no base URL; the Agent option gives it
        agent = agentcore.Agent(model=model, get_api_key=get_api_key, azure_base_url=server.url + "/openai/v1")
        agent.prompt("hi")
        model.base_url = server.url + "/openai/v1"
        forced = stream(model, _ctx(), api_key="not-a-jwt-but-a-token", azure_auth="bearer").result()
        first, second = server.requests
    assert asked == ["azure-openai-responses"] and agent.state.messages[-1].text == "ok"
    assert first.headers["authorization"] == f"Bearer {TOKEN}" and "api-key" not in first.headers
    assert forced.text == "ok" and second.headers["authorization"] == "Bearer not-a-jwt-but-a-token"
    assert azure.auth_headers("Bearer abc.def", {}) == {"Authorization": "Bearer abc.def"}
    assert azure.auth_headers(TOKEN, {"azure_auth": "api-key"}) == {"api-key": TOKEN}


def test_chat_completions_on_an_azure_deployment(monkeypatch):  # issue 17: openai-completions on Azure
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    monkeypatch.setenv("AZURE_OPENAI_API_VERSION", "2024-10-21")
    monkeypatch.setenv("AZURE_OPENAI_DEPLOYMENT_NAME_MAP", "gpt-4o-mini=chat-prod")
    chunk = {"id": "c", "choices": [{"index": 0, "delta": {"content": "hey"}, "finish_reason": "stop"}]}
    body = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n"
    with ScriptedServer([Reply(body=body), Reply(body=body)]) as server:
        dated = stream(_chat_model(base_url=server.url + "/openai"), _ctx()).result()
        v1 = stream(
            Model(id="gpt-4o-mini", api="openai-completions", provider="my-azure", compat={"azure": True}),
            _ctx(),
            api_key=KEY,
            azure_base_url=server.url + "/openai/v1",
            azure_api_version="v1",
        ).result()
        old, new = server.requests
        plain = completions_wire.build_request_body(_chat_model(base_url=server.url + "/openai"), _ctx(), {})
    assert dated.text == "hey" and v1.text == "hey"
    assert (old.path, old.query) == ("/openai/deployments/chat-prod/chat/completions", "api-version=2024-10-21")
    assert (new.path, new.query) == ("/openai/v1/chat/completions", "api-version=v1")
    for request in (old, new):
        assert request.headers["api-key"] == KEY and "authorization" not in request.headers
    assert old.json()["model"] == new.json()["model"] == "chat-prod"  # the map applies to both
    assert "store" not in old.json() and "stream_options" in old.json()
    assert {k: v for k, v in old.json().items() if k != "model"} == {k: v for k, v in plain.items() if k != "model"}
    assert get_env_api_key("azure-openai") == KEY
    request = WireRequest(
        "u", {"Authorization": "Bearer x", "Accept": "text/event-stream"}, {"model": "m", "store": False}
    )
    adapted = azure.adapt_completions_request(request, _chat_model(base_url="https://r.openai.azure.com"), {}, KEY)
    assert (
        adapted.url == "https://r.openai.azure.com/openai/deployments/chat-prod/chat/completions?api-version=2024-10-21"
    )
    assert adapted.headers == {"Accept": "text/event-stream", "api-key": KEY}
    assert adapted.body == {"model": "chat-prod"}  # no store: dated api-versions reject it


# --------------------------------------------------------------------------- recorded streams


def _pure_responses(name: str, turn: int, model: Model) -> Any:
    body = load_recording("openai-responses", name)["interactions"][turn]["response"]["body"]
    return replay_pure(
        lambda out, push: responses_wire.ResponsesStreamState(model, StreamWriter(model, out, push)), body, model
    )


@pytest.mark.parametrize("name", ["text-stream", "tool-call-with-reasoning"])
def test_recorded_responses_streams_replay_through_azure(name):  # issue 17: real recordings
    rec = load_recording("openai-responses", name)
    provider = azure.AzureOpenAIResponsesProvider()
    with ScriptedServer() as server:
        server.replay(rec, chunk_size=7)
        model = _responses_model()
        messages: list = [UserMessage(content=first_user_text(rec["interactions"][0]["request"]["body"]))]
        for turn, interaction in enumerate(rec["interactions"]):
            result, events = run_stream(
                provider,
                model,
                AgentContext(messages=list(messages), tools=[MULTIPLY]),
                api_key=KEY,
                azure_base_url=server.url + "/openai/v1",
                azure_deployment_name="my-gpt55",
                reasoning="low",
            )
            expected, expected_events = _pure_responses(name, turn, model)
            assert events[0].type == "start" and events[-1].type == "done"
            assert [e.type for e in events[1:-1]] == [e.type for e in expected_events]
            assert [b.to_dict() for b in result.content] == [b.to_dict() for b in expected.content]
            assert result.usage.to_dict() == expected.usage.to_dict() and result.stop_reason == expected.stop_reason
            assert result.usage.cost.total > 0
            sent = server.requests[turn].json()
            recorded = interaction["request"]["body"]
            assert sent["model"] == "my-gpt55"
            assert [i.get("type", "message") for i in sent["input"]] == [
                i.get("type", "message") for i in recorded["input"]
            ]
            messages.append(result)
            messages.extend(responses_tool_results(rec, turn, result))
    if name == "tool-call-with-reasoning":
        assert [c.name for c in messages[1].tool_calls] == ["multiply"]


def test_recorded_chat_completions_stream_replays_on_azure():  # issue 17: chat completions recording
    rec = find_recording("openai-completions", "tool-call-args-in-fragments")
    if rec is None:
        pytest.skip("recording openai-completions/tool-call-args-in-fragments not available")
    first = rec["interactions"][0]
    with ScriptedServer() as server:
        server.replay(rec, chunk_size=7)
        ctx = AgentContext(messages=[UserMessage(first_user_text(first["request"]["body"]))], tools=[MULTIPLY])
        result = stream(_chat_model(), ctx, api_key=KEY, azure_base_url=server.url + "/openai/v1").result()
        with ScriptedServer() as plain_server:
            plain_server.replay(rec, chunk_size=7)
            plain_model = Model(id="gpt-4o-mini", api="openai-completions", provider="openai")
            plain_model.base_url = plain_server.url + "/v1"
            plain = stream(plain_model, ctx, api_key=KEY).result()
    assert result.stop_reason == "toolUse" and result.tool_calls[0].arguments == {"a": 1231, "b": 2331}
    assert [b.to_dict() for b in result.content] == [b.to_dict() for b in plain.content]
    assert result.usage.input == plain.usage.input and result.usage.output == plain.usage.output


# --------------------------------------------------------------------------- errors and abort


def test_deployment_not_found_names_deployment_and_resource(monkeypatch):  # issue 17: 404
    body = json.dumps(
        {"error": {"code": "DeploymentNotFound", "message": "The API deployment for this resource does not exist."}}
    )
    monkeypatch.setenv("AZURE_OPENAI_DEPLOYMENT_NAME_MAP", "gpt-5.5=missing-dep")
    with ScriptedServer([Reply(status=404, body=body, content_type="application/json")]) as server:
        model = _responses_model(base_url=server.url + "/openai/v1")
        result, events = run_stream(azure.AzureOpenAIResponsesProvider(), model, _ctx(), api_key=KEY)
    assert [e.type for e in events] == ["error"] and result.stop_reason == "error"
    message = result.error_message
    assert message.startswith("404 The API deployment for this resource does not exist.")
    assert 'deployment "missing-dep"' in message and f'resource "127.0.0.1" ({server.url}/openai/v1)' in message
    assert "AZURE_OPENAI_DEPLOYMENT_NAME_MAP" in message and KEY not in message


def test_rejected_credential_names_resource_and_never_the_key(monkeypatch, caplog):  # issue 17: 401
    caplog.set_level(logging.DEBUG, logger="agentcore")
    echo = json.dumps({"error": {"code": "401", "message": f"Access denied: invalid key {KEY} or wrong endpoint"}})
    replies = [
        Reply(status=401, body=echo, content_type="application/json"),
        Reply(status=401, body=f"bad token {TOKEN}", content_type="text/plain"),
    ]
    with ScriptedServer(replies) as server:
        model = _chat_model(base_url=server.url + "/openai/v1")
        keyed = stream(model, _ctx(), api_key=KEY).result()
        bearer = stream(model, _ctx(), api_key=TOKEN).result()
    assert keyed.error_message.startswith("401 Access denied: invalid key *** or wrong endpoint")
    assert 'deployment "gpt-4o-mini"' in keyed.error_message and "sent as an api-key header" in keyed.error_message
    assert KEY not in keyed.error_message
    assert "sent as an Authorization: Bearer token" in bearer.error_message and TOKEN not in bearer.error_message
    assert KEY not in repr(model) and KEY not in repr(azure.resolve_target(model, {"api_key": KEY}, env={}))
    assert "POST http://127.0.0.1" in caplog.text  # the request log ran, without either credential
    assert KEY not in caplog.text and TOKEN not in caplog.text


def test_azure_key_variable_serves_deployments_of_any_provider_name(monkeypatch):  # issue 17: credentials
    denied = json.dumps({"error": {"code": "401", "message": "Access denied due to invalid subscription key."}})
    chunk = {"id": "c", "choices": [{"index": 0, "delta": {"content": "hey"}, "finish_reason": "stop"}]}
    replies = [Reply(status=401, body=denied, content_type="application/json"), Reply(body=sse(chunk, done=True))]
    with ScriptedServer(replies) as server:
        model = Model(
            id="gpt-4o", api="openai-completions", provider="my-azure", compat={"azure": True}, base_url=server.url
        )
        keyless = stream(model, _ctx()).result()
        monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
        keyed = stream(model, _ctx()).result()
        first, second = server.requests
    assert "api-key" not in first.headers and "authorization" not in first.headers
    assert "no credential was sent; set AZURE_OPENAI_API_KEY" in keyless.error_message
    assert "credential was rejected" not in keyless.error_message
    assert keyed.text == "hey" and second.headers["api-key"] == KEY


def test_abort_mid_stream_keeps_partial_text():  # issue 17: abort mid-stream
    body = _text_events("first", "second")
    first_delta_end = body.index("first") + body[body.index("first") :].index("\n\n") + 2
    controller = AbortController()
    with ScriptedServer([Reply(body=body, stall_after=first_delta_end)]) as server:
        model = _responses_model(base_url=server.url + "/openai/v1")
        events = stream(model, _ctx(), api_key=KEY, signal=controller.signal)
        types = []
        for event in events:
            types.append(event.type)
            if event.type == "text_delta":
                controller.abort()  # the server holds the rest of the body until the test ends
        result = events.result()
    assert types == ["start", "text_start", "text_delta", "error"]
    assert result.stop_reason == "aborted" and result.error_message == "Request was aborted"
    assert result.text == "first"


def test_builtin_registration_and_catalog_models():  # issue 17: a registered provider and its models
    provider = agentcore.get_provider("azure-openai-responses")
    assert isinstance(provider, azure.AzureOpenAIResponsesProvider) and "key" not in repr(provider).lower()
    models = agentcore.models("azure-openai-responses")  # the reference's 42 Azure catalog entries
    assert len(models) == 42 and all(m.api == "azure-openai-responses" and m.base_url == "" for m in models)
    model = agentcore.get_model("azure-openai-responses/gpt-5")
    assert azure.is_azure(model) and not azure.is_azure(Model(id="x", provider="openai"))
    normalize = responses_wire.make_id_normalizer(model)
    assert normalize("call.1|item 2") == "call_1|fc_item_2"  # as for openai: Responses ids rules

"""Request building: URLs per location, project and location resolution, headers, and the
bearer token's life cycle (refresh before expiry, one refresh for many threads, no leaks)."""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import threading

import google.oauth2.credentials
import pytest
from agentcore_vertex import TokenSource, VertexAuthError, VertexConfigError, VertexProvider, endpoint_base
from agentcore_vertex.provider import resolve_location, resolve_project
from vertex_helpers import FakeCredentials, Reply

from agentcore import AbortController
from agentcore.providers.google import build_request_body
from agentcore.providers.http import RequestAborted
from agentcore.types import AgentContext, Model, UserMessage

TEMPLATE = "https://{location}-aiplatform.googleapis.com"
FLASH = Model(
    id="gemini-2.5-flash",
    api="google-vertex",
    provider="google-vertex",
    base_url=TEMPLATE,
    reasoning=True,
    input=("text", "image"),
)
CTX = AgentContext(system_prompt="Be brief.", messages=[UserMessage(content="hi")])
PATH = "/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"


def _request(provider, model=FLASH, api_key="<authenticated>", **options):
    return provider.build_request(model, CTX, options, api_key)


def test_regional_url_bearer_header_and_gemini_body():
    provider = VertexProvider(google.oauth2.credentials.Credentials(token="ya29.regional-token"))
    request = _request(provider, project="my-proj", location="europe-west4", reasoning="low")
    assert request.url == (
        "https://europe-west4-aiplatform.googleapis.com/v1/projects/my-proj/locations/europe-west4" + PATH
    )
    assert request.headers == {
        "authorization": "Bearer ya29.regional-token",
        "content-type": "application/json",
        "accept": "text/event-stream",
    }
    assert request.body == build_request_body(FLASH, CTX, reasoning="low")  # the google-generative-ai body
    assert request.body["generationConfig"]["thinkingConfig"] == {"includeThoughts": True, "thinkingBudget": 2048}


def test_global_location_uses_the_global_host():
    provider = VertexProvider(google.oauth2.credentials.Credentials(token="ya29.t"), project="p", location="global")
    assert _request(provider).url == "https://aiplatform.googleapis.com/v1/projects/p/locations/global" + PATH
    assert endpoint_base(Model(id="m", base_url=""), "global") == "https://aiplatform.googleapis.com/v1"


def test_project_and_location_from_the_usual_variables(monkeypatch):
    monkeypatch.setenv("GCLOUD_PROJECT", "from-gcloud-var")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "us-east5")
    provider = VertexProvider(google.oauth2.credentials.Credentials(token="ya29.t"))
    assert "/projects/from-gcloud-var/locations/us-east5/" in _request(provider).url
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "from-cloud-var")  # wins over GCLOUD_PROJECT
    assert "/projects/from-cloud-var/" in _request(provider).url
    assert "/projects/opt/locations/asia-east1/" in _request(provider, project="opt", location="asia-east1").url


def test_location_of_a_concrete_base_url_and_contradictions():
    regional = Model(id="gemini-2.5-flash", base_url="https://me-central2-aiplatform.googleapis.com")
    assert resolve_location(regional, env={"GOOGLE_CLOUD_LOCATION": "us-central1"}) == "me-central2"
    assert resolve_location(Model(id="m", base_url="https://aiplatform.googleapis.com"), env={}) == "global"
    with pytest.raises(VertexConfigError, match="is the endpoint of location 'me-central2'"):
        resolve_location(regional, "us-central1", env={})


def test_missing_project_or_location_names_what_to_set():
    with pytest.raises(VertexConfigError, match="set GOOGLE_CLOUD_LOCATION .* or pass location="):
        resolve_location(FLASH, env={})
    with pytest.raises(VertexConfigError, match=r"set GOOGLE_CLOUD_PROJECT \(or GCLOUD_PROJECT\) or pass project="):
        resolve_project(env={})
    assert resolve_project(env={}, credentials_project="adc-proj") == "adc-proj"


def test_odd_project_and_location_values_are_named_or_cleaned(monkeypatch):
    """A project number given as an int is a project; a value of another type is named instead of
    failing inside URL quoting (``TypeError: quote_from_bytes() expected bytes``). Whitespace around a
    setting (an .env file with CRLF line ends) is dropped; a location that still cannot be part of
    a host name says so instead of failing as an unresolvable host."""
    provider = VertexProvider(google.oauth2.credentials.Credentials(token="ya29.t"))
    url = _request(provider, project=123456789012, location="us-central1").url
    assert url.startswith(
        "https://us-central1-aiplatform.googleapis.com/v1/projects/123456789012/locations/us-central1/"
    )
    for options, message in [
        ({"project": ["p"], "location": "us-central1"}, "Vertex AI: project must be a string, not list"),
        ({"project": "p", "location": 5}, "Vertex AI: location must be a string, not int"),
        ({"project": "p", "location": "us central1"}, "Vertex AI: location='us central1' is not a location name"),
        ({"project": "p", "location": "europe-west4/x"}, "Vertex AI: location='europe-west4/x' is not a location name"),
    ]:
        with pytest.raises(VertexConfigError) as info:
            _request(provider, **options)
        assert str(info.value).startswith(message)
        result = provider.stream(FLASH, CTX, **options).result()
        assert result.stop_reason == "error" and result.error_message.startswith(message)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "env-proj\r")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "global\r")
    assert _request(provider).url == "https://aiplatform.googleapis.com/v1/projects/env-proj/locations/global" + PATH
    assert (
        "/projects/opt/locations/europe-west4/" in _request(provider, project=" opt ", location=" europe-west4\n").url
    )
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "us_central1")
    with pytest.raises(VertexConfigError, match=r"GOOGLE_CLOUD_LOCATION='us_central1' is not a location name"):
        _request(provider)


def test_custom_base_url_keeps_its_path_and_version():
    local = Model(id="gemini-2.0-flash", base_url="http://127.0.0.1:9/vertex/{location}/v1beta1")
    assert endpoint_base(local, "us-central1") == "http://127.0.0.1:9/vertex/us-central1/v1beta1"
    assert endpoint_base(Model(id="m", base_url="http://proxy.internal/"), "x") == "http://proxy.internal/v1"


def test_api_key_is_express_mode_without_project():
    provider = VertexProvider()
    request = _request(provider, api_key="AQ.express-key-123")
    assert request.url == "https://aiplatform.googleapis.com/v1" + PATH
    assert request.headers["x-goog-api-key"] == "AQ.express-key-123" and "authorization" not in request.headers


def test_express_mode_ignores_google_cloud_location(monkeypatch):
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "us-central1")  # set for ADC requests
    provider = VertexProvider()
    assert _request(provider, api_key="AQ.k").url == "https://aiplatform.googleapis.com/v1" + PATH
    # a location given in code or by a concrete base_url still picks the regional host
    regional = "https://europe-west4-aiplatform.googleapis.com/v1" + PATH
    assert _request(provider, api_key="AQ.k", location="europe-west4").url == regional
    assert _request(VertexProvider(location="europe-west4"), api_key="AQ.k").url == regional
    concrete = dataclasses.replace(FLASH, base_url="https://europe-west4-aiplatform.googleapis.com")
    assert _request(provider, concrete, api_key="AQ.k").url == regional


def test_every_header_of_the_credentials_is_sent():  # x-goog-user-project: the quota project
    creds = google.oauth2.credentials.Credentials(token="ya29.user-token", quota_project_id="billing-proj")
    request = _request(VertexProvider(creds, project="my-proj", location="us-central1"))
    applied = {}
    creds.apply(applied)
    assert applied.items() <= request.headers.items()
    assert request.headers == {
        "authorization": "Bearer ya29.user-token",
        "x-goog-user-project": "billing-proj",
        "content-type": "application/json",
        "accept": "text/event-stream",
    }


def test_stream_takes_the_key_from_google_cloud_api_key(monkeypatch):
    seen = []

    def build_request(model, context, options, api_key):
        seen.append(api_key)
        raise RuntimeError("stop here")

    provider = VertexProvider()
    monkeypatch.setattr(provider, "build_request", build_request)
    monkeypatch.setenv("GOOGLE_CLOUD_API_KEY", "AQ.from-env-key")
    provider.stream(FLASH, CTX).result()
    monkeypatch.delenv("GOOGLE_CLOUD_API_KEY")
    monkeypatch.setenv("GEMINI_API_KEY", "not-for-vertex")
    provider.stream(dataclasses.replace(FLASH, provider="google"), CTX).result()
    # no key: ADC, even for a provider name whose own key variable is set
    assert seen == ["AQ.from-env-key", "<authenticated>"]


def test_adc_is_asked_for_the_cloud_platform_scope_and_names_the_project(monkeypatch):
    calls = []

    def fake_default(scopes=None, **kwargs):
        calls.append(scopes)
        return google.oauth2.credentials.Credentials(token="ya29.adc"), "adc-project"

    monkeypatch.setattr("google.auth.default", fake_default)
    provider = VertexProvider(location="us-central1")
    request = _request(provider)
    _request(provider)
    assert calls == [["https://www.googleapis.com/auth/cloud-platform"]]  # once per provider
    assert "/projects/adc-project/locations/us-central1/" in request.url
    assert request.headers["authorization"] == "Bearer ya29.adc"


def test_no_adc_is_a_clear_error_event(monkeypatch):
    result = VertexProvider().stream(FLASH, CTX, project="p", location="us-central1").result()
    assert result.stop_reason == "error"
    assert result.error_message.startswith("Vertex AI: no Google Cloud credentials found")
    assert "gcloud auth application-default login" in result.error_message
    assert "GOOGLE_APPLICATION_CREDENTIALS" in result.error_message


FAKE_KEY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj"


def test_an_unreadable_key_file_never_shows_the_key(monkeypatch, tmp_path):
    """A service-account key saved as UTF-16 (PowerShell's ``>``) is not valid JSON: google-auth
    wraps the UnicodeDecodeError, whose repr holds the whole file, key included. The message
    names the file and the decoding error, never the bytes, in the message or the diagnostic."""
    info = {
        "type": "service_account",
        "project_id": "p",
        "private_key": f"-----BEGIN PRIVATE KEY-----\n{FAKE_KEY}\n-----END PRIVATE KEY-----\n",
        "client_email": "runner@p.iam.gserviceaccount.com",
        "token_uri": "https://oauth2.googleapis.com/token",
    }
    key_file = tmp_path / "key.json"
    key_file.write_text(json.dumps(info), encoding="utf-16")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key_file))
    result = VertexProvider().stream(FLASH, CTX, project="p", location="us-central1").result()
    stored = json.dumps(result.to_dict())  # what a session file keeps, diagnostics included
    assert "\\\\x00" not in stored and "MIIEv" not in stored.replace("\\\\x00", "")  # the file's UTF-16 bytes
    assert result.stop_reason == "error"
    assert result.error_message.startswith(f"Vertex AI: no Google Cloud credentials found (File {key_file} is not")
    assert "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff in position 0" in result.error_message


@pytest.mark.parametrize("content", ["[]", '"key"', "null", None])
def test_a_credentials_file_google_auth_trips_over_is_a_clear_auth_error(monkeypatch, tmp_path, content):
    """JSON that is no object (google-auth: AttributeError) or a directory (IsADirectoryError):
    a VertexAuthError naming the file and saying how to set credentials up."""
    path = tmp_path / "adc.json"
    if content is None:
        path.mkdir()
    else:
        path.write_text(content, encoding="utf-8")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
    with pytest.raises(VertexAuthError) as info:
        TokenSource.from_adc()
    message = str(info.value)
    assert message.startswith(
        f"Vertex AI: could not load the Google Cloud credentials (GOOGLE_APPLICATION_CREDENTIALS={path}): "
    )
    assert "gcloud auth application-default login" in message
    result = VertexProvider().stream(FLASH, CTX, project="p", location="us-central1").result()
    assert result.error_message == message


# --------------------------------------------------------------------------- token life cycle

NOW = datetime.datetime(2026, 12, 1, 9, 0, 0)


def test_token_is_refreshed_before_it_expires():
    clock = [NOW]
    creds = FakeCredentials("ya29.first", "ya29.second", lifetime=datetime.timedelta(minutes=60), now=lambda: clock[0])
    source = TokenSource(creds, clock=lambda: clock[0], request=object())
    assert source.token() == "ya29.first" and creds.refreshes == 1  # no token yet: refresh
    clock[0] = NOW + datetime.timedelta(minutes=54)  # 6 minutes left: still fine
    assert source.token() == "ya29.first" and creds.refreshes == 1
    clock[0] = NOW + datetime.timedelta(minutes=55, seconds=1)  # under 5 minutes left: refresh now
    assert source.token() == "ya29.second" and creds.refreshes == 2


def test_a_token_without_expiry_is_used_as_is():
    source = TokenSource(google.oauth2.credentials.Credentials(token="ya29.static"))
    assert source.token() == "ya29.static"


def test_many_threads_share_one_refresh():
    creds = FakeCredentials("ya29.only")
    creds.hold = threading.Event()
    source = TokenSource(creds, request=object())
    start = threading.Barrier(8)
    tokens = []

    def ask():
        start.wait()
        tokens.append(source.token())

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    assert creds.refresh_started.wait(10)
    creds.hold.set()
    for t in threads:
        t.join(10)
    assert tokens == ["ya29.only"] * 8 and creds.refreshes == 1


def test_an_abort_ends_the_wait_for_a_refresh_not_the_refresh():
    creds = FakeCredentials("ya29.late-token")
    creds.hold = threading.Event()
    source = TokenSource(creds, request=object())
    aborted = threading.Event()  # a threading.Event signal: polled, it has no listeners
    outcome = []

    def ask():
        try:
            outcome.append(source.token(aborted))
        except RequestAborted as exc:
            outcome.append(exc)

    asker = threading.Thread(target=ask, daemon=True)
    asker.start()
    try:
        assert creds.refresh_started.wait(10)
        aborted.set()
        asker.join(5)
        assert not asker.is_alive(), "the abort waited for the refresh"
        assert [str(o) for o in outcome] == ["Request was aborted"]
    finally:
        creds.hold.set()
    # the refresh went on; the next caller gets its token, with no second refresh
    assert source.token() == "ya29.late-token" and creds.refreshes == 1


def test_refresh_failure_is_clear_and_never_shows_the_token():
    creds = FakeCredentials("ya29.secret-old-token", lifetime=datetime.timedelta(seconds=0))
    source = TokenSource(creds, request=object())
    assert source.token() == "ya29.secret-old-token"
    with pytest.raises(VertexAuthError) as info:
        source.token()  # expired; the next refresh fails and its message quotes the old token
    message = str(info.value)
    assert message.startswith("Vertex AI: could not refresh the Google Cloud access token: RefreshError")
    assert "ya29.secret-old-token" not in message and "***" in message


def test_a_failed_early_refresh_keeps_the_still_valid_token(caplog):
    """The refresh 5 minutes before expiry is advisory (as in google-auth and botocore): when it
    fails, the current token, still valid, is used and the failure logged without it; the next
    call tries again. Once the token expired, or the server rejected it, the failure stands."""
    clock = [NOW]
    # one token: every later refresh fails, and its message quotes the old token
    creds = FakeCredentials("ya29.still-valid", lifetime=datetime.timedelta(minutes=60), now=lambda: clock[0])
    source = TokenSource(creds, clock=lambda: clock[0], request=object())
    assert source.token() == "ya29.still-valid" and creds.refreshes == 1
    clock[0] = NOW + datetime.timedelta(minutes=56)  # 4 minutes left: inside the margin
    caplog.set_level(logging.WARNING, logger="agentcore_vertex.auth")
    assert source.token() == "ya29.still-valid"
    headers = {}
    source.apply(headers)
    assert headers["authorization"] == "Bearer ya29.still-valid"
    assert creds.refreshes == 3 and source._refreshing is None  # each call tried again
    assert [r.levelno for r in caplog.records] == [logging.WARNING] * 2
    assert "could not refresh the Google Cloud access token: RefreshError" in caplog.records[0].getMessage()
    assert "ya29.still-valid" not in caplog.text
    clock[0] = NOW + datetime.timedelta(minutes=60)  # expired: no token left to fall back on
    with pytest.raises(VertexAuthError, match="could not refresh"):
        source.token()
    clock[0] = NOW + datetime.timedelta(minutes=56)
    source.invalidate()  # the server rejected it: not usable either
    with pytest.raises(VertexAuthError, match="could not refresh"):
        source.token()


def test_a_refresh_thread_that_cannot_start_refreshes_on_the_calling_thread(monkeypatch):
    """Starting the helper thread can fail (a pid or thread limit): the refresh then runs on the
    calling thread, and the source is never left waiting for a refresh that does not run."""
    creds = FakeCredentials("ya29.inline", "ya29.threaded", lifetime=datetime.timedelta(seconds=0))
    source = TokenSource(creds, request=object())
    real_start = threading.Thread.start
    refreshed_on = []
    real_refresh = creds.refresh

    def refresh(request):
        refreshed_on.append(threading.current_thread())
        real_refresh(request)

    def failing_start(thread):
        if thread.name == "agentcore-vertex-token-refresh":
            raise RuntimeError("can't start new thread")
        return real_start(thread)

    creds.refresh = refresh
    with monkeypatch.context() as patch:
        patch.setattr(threading.Thread, "start", failing_start)
        assert source.token() == "ya29.inline"
        assert refreshed_on == [threading.current_thread()] and source._refreshing is None
    # threads start again: the next refresh (the token expired at once) runs on its helper thread
    assert source.token(threading.Event()) == "ya29.threaded"
    assert refreshed_on[1] is not threading.current_thread() and source._refreshing is None
    with monkeypatch.context() as patch:  # an inline refresh that fails is the caller's error, once
        patch.setattr(threading.Thread, "start", failing_start)
        with pytest.raises(VertexAuthError, match="could not refresh"):
            source.token()
        assert source._refreshing is None


def _user_credentials(server):
    return google.oauth2.credentials.Credentials(
        None,
        refresh_token="1//refresh-token-0123456789",
        client_id="client-id.apps.googleusercontent.com",
        client_secret="client-secret-0123456789",
        token_uri=f"{server.url}/token",
    )


GRANT = '{"access_token": "ya29.granted-token", "expires_in": 3600, "token_type": "Bearer"}'


def _no_refresh_thread(monkeypatch):
    real_start = threading.Thread.start

    def failing_start(thread):
        if thread.name == "agentcore-vertex-token-refresh":
            raise RuntimeError("can't start new thread")
        return real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", failing_start)


def test_an_abort_ends_an_inline_refresh_at_once(server, monkeypatch):
    """No helper thread (a thread limit): the refresh runs on the calling thread, and an abort
    still ends it at once, here while the token endpoint holds its answer back (google-auth
    waits up to 120 s). A caller that waited for that refresh starts another and gets its token."""
    held = Reply(body=GRANT, content_type="application/json", stall_after=0)
    server.replies += [held, Reply(body=GRANT, content_type="application/json")]
    source = TokenSource(_user_credentials(server))
    controller = AbortController()
    outcome, waited = [], []

    def ask():
        try:
            outcome.append(source.token(controller.signal))
        except Exception as exc:  # noqa: BLE001 - the test looks at what it was
            outcome.append(exc)

    _no_refresh_thread(monkeypatch)
    asker = threading.Thread(target=ask, daemon=True)
    asker.start()
    try:
        assert server.stalled.wait(10)
        waiter = threading.Thread(target=lambda: waited.append(source.token()), daemon=True)
        waiter.start()  # waits for the held refresh
        controller.abort()
        asker.join(5)
        assert not asker.is_alive(), "the abort waited for the inline refresh"
        waiter.join(10)
    finally:
        server.release.set()
    assert [type(o).__name__ for o in outcome] == ["RequestAborted"]
    assert waited == ["ya29.granted-token"] and source._refreshing is None
    source.invalidate()  # an inline refresh with a signal that does not fire: the token, as usual
    server.replies.append(Reply(body=GRANT.replace("granted", "third"), content_type="application/json"))
    assert source.token(AbortController().signal) == "ya29.third-token"
    assert [r.path for r in server.requests] == ["/token"] * 3


def test_an_inline_refresh_for_an_aborted_request_asks_nothing(monkeypatch):
    """A signal that fired already (a ``threading.Event`` too: it is checked before each request
    google-auth makes) ends an inline refresh before it reaches the token endpoint."""
    creds = google.oauth2.credentials.Credentials(None, refresh_token="r", client_id="c", client_secret="s")
    creds.refresh = lambda request: request("https://token.invalid/token", method="POST")
    source = TokenSource(creds)
    fired = threading.Event()
    fired.set()
    _no_refresh_thread(monkeypatch)
    with pytest.raises(RequestAborted):
        source.token(fired)
    assert source._refreshing is None


def test_reprs_never_show_tokens():
    creds = google.oauth2.credentials.Credentials(token="ya29.repr-token")
    provider = VertexProvider(creds, project="p", location="us-central1")
    assert "ya29" not in repr(provider) and "ya29" not in repr(provider.token_source())
    assert repr(provider) == "<VertexProvider api='google-vertex' project='p' location='us-central1'>"


def test_the_command_line_leaves_credentials_to_the_provider(monkeypatch):
    """A service-account file with ``-o project``/``-o location`` (the README's form), an attached
    account or ADC without GOOGLE_CLOUD_LOCATION: the CLI's key-variable check refused them all
    ("no API key for provider google-vertex") before the provider, which finds them, was asked."""
    from agentcore_vertex import plugin

    from agentcore.cli._setup import check_api_key
    from agentcore.plugins import default_plugin_manager

    for name in ("GOOGLE_CLOUD_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_LOCATION"):
        monkeypatch.delenv(name, raising=False)
    manager = default_plugin_manager()
    if manager.registry("provider").get("google-vertex") is None:  # not installed: register it as pip would
        manager.register(plugin, name="vertex-under-test")
    try:
        model = next(m for m in manager.models("google-vertex"))
        assert VertexProvider.ambient_credentials is True
        check_api_key(model, None)  # no UsageError
    finally:
        if manager.get_plugin("vertex-under-test") is not None:
            manager.unregister(name="vertex-under-test")


@pytest.mark.parametrize(
    "value", ["/secrets/vertex-runner.json", '{"type": "service_account", "private_key": "MIIEv-secret"}', "false"]
)
def test_credentials_from_the_command_line_are_refused_naming_the_option(monkeypatch, value):
    """``-o credentials PATH`` (or a key file's JSON) is a string or a dict, no credentials object:
    it failed inside the token refresh (``AttributeError: 'str' object has no attribute
    'refresh'``) and turned off express mode. The error names the option and the ways that work,
    never the value; the provider constructor refuses it at once."""
    from agentcore.cli._setup import stream_options

    monkeypatch.setenv("GOOGLE_CLOUD_API_KEY", "AQ.ambient-key-0123456789")
    options = stream_options([("credentials", value), ("project", "p"), ("location", "us-central1")])
    result = VertexProvider().stream(FLASH, CTX, **options).result()
    kind = type(options["credentials"]).__name__
    assert result.stop_reason == "error"
    assert result.error_message.startswith(
        f"Vertex AI: the credentials option must be a google-auth credentials object "
        f"(e.g. google.oauth2.service_account.Credentials), not {kind}; "
    )
    assert "GOOGLE_APPLICATION_CREDENTIALS" in result.error_message and "MIIEv" not in result.error_message
    assert "vertex-runner" not in result.error_message
    with pytest.raises(TypeError, match=r"^Vertex AI: VertexProvider\(credentials\) must be a google-auth"):
        VertexProvider(options["credentials"])


def test_a_single_scope_string_is_one_scope(monkeypatch):
    """``scopes="https://.../cloud-platform"`` was split into its characters, each asked of the
    token endpoint as a scope of its own (an ``invalid_scope`` refusal far from the cause)."""
    calls = []

    def fake_default(scopes=None, **kwargs):
        calls.append(scopes)
        return google.oauth2.credentials.Credentials(token="ya29.adc"), "adc-project"

    monkeypatch.setattr("google.auth.default", fake_default)
    scope = "https://www.googleapis.com/auth/cloud-platform"
    provider = VertexProvider(scopes=scope, location="us-central1")
    assert provider.scopes == (scope,)
    _request(provider)
    TokenSource.from_adc(scope)
    assert calls == [[scope], [scope]]
    with pytest.raises(TypeError, match="^Vertex AI: scopes must be a string or strings, got int"):
        VertexProvider(scopes=[scope, 5])

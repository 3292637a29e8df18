"""The shared HTTP layer and wire skeleton, exercised through the openai-completions provider.

Synthetic cases of issue 4 / providers spec §4 and §9: HTTP errors with and without bodies,
retries and Retry-After, connection reset, malformed events, early end, aborts, keys.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import logging
import threading
import time
from typing import Any

import pytest
from _servers import Reply, ScriptedServer, sse

from agentcore.providers import complete, is_context_overflow, stream
from agentcore.providers.http import format_http_error, retry_delay_from_headers
from agentcore.signals import AbortController
from agentcore.types import AgentContext, AssistantMessage, Model, Usage, UserMessage

KEY = "sk-test-secret-key-123"


def _chunk(delta=None, finish=None, **extra):
    chunk = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}],
    }
    chunk.update(extra)
    return chunk


def _text_body(*words, finish="stop", done=True):
    return sse(*[_chunk({"content": w}) for w in words], _chunk(finish=finish), done=done)


@pytest.fixture
def server():
    with ScriptedServer() as srv:
        yield srv


def _model(server, provider="local", **kw):
    return Model(id="m", api="openai-completions", provider=provider, base_url=server.url + "/v1", **kw)


def _ctx(text="hi"):
    return AgentContext(system_prompt="", messages=[UserMessage(text)])


def _run(server, **options):
    events = stream(_model(server), _ctx(), api_key=KEY, **options)
    types = [e.type for e in events]
    return types, events.result()


# --------------------------------------------------------------------------- success path


def test_text_stream_events_and_result(server):  # providers §3 ordering guarantees
    server.enqueue(Reply(body=_text_body("Hel", "lo"), chunk_size=5))
    types, result = _run(server)
    assert types == ["start", "text_start", "text_delta", "text_delta", "text_end", "done"]
    assert result.text == "Hello" and result.stop_reason == "stop" and result.error_message is None
    request = server.requests[0]
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"


def test_connections_are_pooled(server):  # issue 4: one requests.Session per provider
    server.enqueue(Reply(body=_text_body("a")), Reply(body=_text_body("b")))
    assert complete(_model(server), _ctx(), api_key=KEY).text == "a"
    assert complete(_model(server), _ctx(), api_key=KEY).text == "b"
    assert server.requests[0].client_port == server.requests[1].client_port


def test_headers_payload_hook_and_response_hook(server):  # providers §4 steps 2-3
    server.enqueue(Reply(body=_text_body("ok"), headers={"x-request-id": "r1"}))
    seen = {}

    def on_payload(body, model):
        seen["model"] = model.id
        return dict(body, temperature=0.25)

    model = _model(server)
    model.headers = {"X-Model": "model", "X-Both": "model"}
    complete(
        model,
        _ctx(),
        api_key=KEY,
        headers={"x-both": "option"},
        on_payload=on_payload,
        on_response=lambda status, headers: seen.update(status=status, rid=headers.get("x-request-id")),
    )
    request = server.requests[0]
    assert request.headers["x-model"] == "model" and request.headers["x-both"] == "option"
    assert request.json()["temperature"] == 0.25 and seen == {"model": "m", "status": 200, "rid": "r1"}


def _content_chunk(content: str) -> Any:
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}],
    }


def _finish() -> Any:
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
    }


@pytest.mark.parametrize("chunked, encoding", [(True, None), (True, "gzip"), (False, None), (False, "gzip")])
def test_streamed_body_framings_and_encodings(chunked, encoding):  # providers §4 step 5
    body = sse(*[_content_chunk(w) for w in ("Hel", "lo, ", "wörld")], _finish(), done=True).encode("utf-8")
    headers = {}
    if encoding == "gzip":
        body = gzip.compress(body)
        headers["Content-Encoding"] = "gzip"
    with ScriptedServer([Reply(body=body, chunk_size=9, chunked=chunked, headers=headers)]) as server:
        model = Model(id="m", api="openai-completions", provider="local", base_url=server.url + "/v1")
        message = complete(model, AgentContext("", [UserMessage("hi")]))
    assert message.stop_reason == "stop", message.error_message
    assert message.text == "Hello, wörld"


# --------------------------------------------------------------------------- HTTP errors


@pytest.mark.parametrize(
    "status, body, expected",
    [
        (
            400,
            json.dumps({"error": {"message": "Bad tool schema", "type": "invalid_request_error"}}),
            "400 Bad tool schema",
        ),
        (401, json.dumps({"error": {"message": "Incorrect API key provided"}}), "401 Incorrect API key provided"),
        (400, "", "400 status code (no body)"),
        (401, "", "401 status code (no body)"),
        (404, "plain text not found", "404 plain text not found"),
    ],
)
def test_http_errors_carry_the_provider_message(server, status, body, expected):  # providers §9
    server.enqueue(Reply(status=status, body=body, content_type="application/json"))
    types, result = _run(server)
    assert types == ["error"]  # no start: the headers were not OK (§3 rule 2)
    assert result.stop_reason == "error" and result.error_message == expected
    assert KEY not in result.error_message and len(server.requests) == 1  # 4xx are not retried


def test_an_error_body_that_does_not_inflate_is_reported_as_unreadable(server):  # providers §9
    # a gzip error body that fails to decompress was reported as "(no body)", as if the server
    # had sent none: the message now says it could not be read, and why
    server.enqueue(
        Reply(
            status=400, body=b"not gzip at all", content_type="application/json", headers={"Content-Encoding": "gzip"}
        )
    )
    _, result = _run(server)
    assert result.error_message.startswith("400 status code (no body) (the body could not be read: DecodeError")
    assert len(server.requests) == 1


def test_an_error_body_cut_short_keeps_what_arrived_and_says_so(server):  # providers §9
    body = json.dumps({"error": {"message": "quota exceeded for this project"}}) + " " * 200
    server.enqueue(Reply(status=403, body=body, content_type="text/plain", chunked=False, close_after=40))
    _, result = _run(server)
    assert result.error_message.startswith('403 {"error": {"message": "quota exceeded')
    assert "(the body was cut short: " in result.error_message and len(server.requests) == 1


def test_a_key_echoed_by_the_server_never_reaches_the_error_message(server):  # secrets stay out
    echo = json.dumps({"error": {"message": f"Incorrect API key provided: {KEY}. Bearer {KEY}"}})
    server.enqueue(Reply(status=401, body=echo, content_type="application/json"))
    model = _model(server)
    model.headers = {"X-Api-Key": "model-header-secret-value"}
    server.enqueue(Reply(status=403, body="denied for model-header-secret-value", content_type="text/plain"))
    _, result = _run(server)
    assert result.error_message == "401 Incorrect API key provided: ***. ***"
    second = complete(model, _ctx(), api_key=KEY)
    assert second.error_message == "403 denied for ***"
    assert KEY not in repr(second) and "model-header-secret-value" not in second.error_message


def test_a_key_read_with_its_newline_is_sent_without_it(server, monkeypatch):  # secrets: keys from files
    # open("key.txt").read() keeps the newline; requests refused such a header and echoed the key
    # in its error, which went into the transcript and the session file
    server.enqueue(Reply(body=_text_body("a")), Reply(body=_text_body("b")), Reply(body=_text_body("c")))
    assert complete(_model(server), _ctx(), api_key=f"  {KEY}\n").text == "a"
    monkeypatch.setenv("OPENAI_API_KEY", KEY + "\r\n")
    assert complete(_model(server, provider="openai"), _ctx()).text == "b"
    headers = {"Authorization": f"Bearer {KEY}\n", "X-Trace": "\tabc "}
    assert complete(_model(server), _ctx(), api_key="unused-key", headers=headers).text == "c"
    assert [r.headers["authorization"] for r in server.requests] == [f"Bearer {KEY}"] * 3
    assert server.requests[2].headers["x-trace"] == "abc"


def test_header_names_and_value_types_are_checked_before_sending(server):  # bad input: clear errors
    from agentcore import Agent

    server.enqueue(Reply(body=_text_body("a")))
    assert complete(_model(server), _ctx(), api_key=KEY, headers={"X-Raw": b"raw bytes", "X-N": 3}).text == "a"
    assert server.requests[0].headers["x-raw"] == "raw bytes" and server.requests[0].headers["x-n"] == "3"
    for headers, problem in (
        ({5: "v"}, "5 is not an HTTP header name"),
        ({"Bad Name": "v"}, "'Bad Name' is not an HTTP header name"),
        ({"X-Obj": ["sk-live-0123456789"]}, "the value of header 'X-Obj' must be a string, not list"),
    ):
        result = complete(_model(server), _ctx(), api_key=KEY, headers=headers)
        assert result.stop_reason == "error" and result.error_message.endswith(problem)
        with pytest.raises(ValueError, match="^Agent\\(\\): headers: ") as info:
            Agent(_model(server), headers=headers)
        assert str(info.value).endswith(problem) and "0123456789" not in str(info.value)
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    "options, named",
    [
        ({"api_key": "sk-live-0123\n456789"}, "api_key contains a line break"),
        ({"api_key": "k", "headers": {"Authorization": "Bearer sk-live-0123\r\n456789"}}, "header 'Authorization'"),
        ({"api_key": "k", "headers": {"X-Note": "sk-live-0123\x00456789"}}, "header 'X-Note'"),
    ],
)
def test_a_credential_with_a_line_break_is_refused_without_showing_it(server, options, named):  # secrets
    events = stream(_model(server), _ctx(), max_retries=0, **options)
    types = [e.type for e in events]
    result = events.result()
    assert types == ["error"] and result.stop_reason == "error" and named in result.error_message
    text = result.error_message + json.dumps(result.to_dict())
    assert "0123" not in text and "456789" not in text and server.requests == []


def test_an_api_key_that_is_not_a_string_is_named_not_shown(server):  # bad input: a clear error
    from agentcore import Agent, AgentLoopConfig

    for key, kind in ((12345678901, "int"), (b"sk-live-0123456789", "bytes")):
        result = complete(_model(server), _ctx(), api_key=key)
        assert result.stop_reason == "error" and f"api_key must be a string, not {kind}" in result.error_message
        with pytest.raises(TypeError, match=f"^Agent\\(\\): api_key must be a string or None, not {kind}$"):
            Agent(_model(server), api_key=key)
        with pytest.raises(TypeError, match=f"AgentLoopConfig\\(\\): api_key must be a string or None, not {kind}"):
            AgentLoopConfig(_model(server), api_key=key)
    agent = Agent(_model(server), get_api_key=lambda provider: 12345678901)
    agent.prompt("hi")
    failure = agent.state.messages[-1]
    assert failure.stop_reason == "error" and server.requests == []
    assert "get_api_key('local'): its result must be a string or None, not int" in failure.error_message
    assert "12345678901" not in failure.error_message


def test_redact_finds_a_secret_however_the_text_quotes_it():  # secrets: escaped in reprs and JSON
    from agentcore.providers.failures import redact, secret_forms

    secret = "sk-live-0123456789\n"
    texts = [f"value: {secret!r}", json.dumps({"key": secret}), f"plain {secret.strip()} text", secret]
    assert [redact(text, [secret]) for text in texts] == ["value: '***'", '{"key": "***"}', "plain *** text", "***"]
    assert redact("short sk-1 and sk-12345", ["sk-1", "sk-12345", None, 42]) == "short sk-1 and ***"  # type: ignore[list-item]
    assert redact("a sk-1 b", ["sk-1"], min_length=4) == "a *** b"
    assert secret_forms(b"sk-live-0123456789") == frozenset() and secret_forms("") == frozenset()
    assert "" not in secret_forms("   ") and redact("a b", ["   "], min_length=0) == "a b"  # never masks ""


def test_openrouter_error_metadata_raw_is_appended():  # providers §4 step 6
    body = json.dumps({"error": {"message": "Provider returned error", "metadata": {"raw": "upstream said no"}}})
    assert format_http_error(502, body) == "502 Provider returned error\nupstream said no"


@pytest.mark.parametrize("status", [429, 500, 503])
def test_retryable_status_then_success(server, status):  # issue 4: retries with Retry-After
    server.enqueue(
        Reply(status=status, headers={"retry-after-ms": "1"}, body='{"error":{"message":"busy"}}'),
        Reply(body=_text_body("recovered")),
    )
    types, result = _run(server)
    assert result.text == "recovered" and types[0] == "start" and len(server.requests) == 2


def test_headers_given_as_a_function_are_made_anew_for_every_attempt(server):
    """A credential that carries its time (an AWS SigV4 signature) must be made for each attempt:
    a retry after a long wait would otherwise send a stale one, which the server refuses."""
    from agentcore.providers.http import open_stream

    server.enqueue(
        Reply(status=503, headers={"retry-after-ms": "1"}, body='{"error":{"message":"busy"}}'),
        Reply(body=_text_body("recovered")),
    )
    made = []

    def headers():
        made.append(f"signature-{len(made)}")
        return {"Content-Type": "application/json", "Authorization": made[-1]}

    response = open_stream(server.url + "/v1/chat/completions", b"{}", headers, session_name="local")
    response.close()
    assert made == ["signature-0", "signature-1"]
    assert [r.headers["authorization"] for r in server.requests] == made


def test_retries_are_bounded_and_report_the_last_error(server):
    for _ in range(3):
        server.enqueue(Reply(status=500, headers={"retry-after": "0"}, body=""))
    _, result = _run(server, max_retries=2)
    # the message says the server's text and how many attempts were made (issue 17)
    assert result.error_message == "500 status code (no body) (gave up after 3 attempts, max_retries=2)"
    assert len(server.requests) == 3


def test_server_delay_above_cap_fails_fast(server):  # providers §22: "Server requested Ns retry delay"
    server.enqueue(Reply(status=429, headers={"retry-after": "120"}, body='{"error":{"message":"rate limited"}}'))
    _, result = _run(server, max_retry_delay_ms=5000)
    assert result.error_message == "Server requested 120s retry delay (max: 5s). 429 rate limited"
    assert len(server.requests) == 1


def test_x_should_retry_false_forbids_retry(server):
    server.enqueue(Reply(status=503, headers={"x-should-retry": "false"}, body=""))
    _, result = _run(server)
    assert result.error_message == "503 status code (no body)" and len(server.requests) == 1


def test_retry_after_header_forms():
    assert retry_delay_from_headers({"retry-after-ms": "250"}) == 0.25
    assert retry_delay_from_headers({"retry-after": "3"}) == 3.0
    date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    assert 25 <= retry_delay_from_headers({"retry-after": date}) <= 31
    assert retry_delay_from_headers({}) is None


def test_connection_refused_is_an_error_result():
    with ScriptedServer() as srv:
        model = _model(srv)
    result = complete(model, _ctx(), api_key=KEY, max_retries=0)
    assert result.stop_reason == "error" and result.error_message.startswith("Connection error talking to 127.0.0.1")
    assert KEY not in result.error_message


@pytest.mark.parametrize(
    "base_url, reason",
    [
        ("http:///v1", "No host supplied"),
        ("localhost:8080/v1", "No connection adapters"),
        ("ftp://user:pa55word@host/v1", "No connection adapters"),
    ],
)
def test_a_url_that_cannot_be_sent_fails_at_once_naming_it(base_url, reason):  # bad input: clear errors
    # was retried max_retries times and called "Connection error talking to  ()"
    model = Model(id="m", api="openai-completions", provider="local", base_url=base_url)
    result = complete(model, _ctx(), api_key=KEY, max_retries=3, max_retry_delay_ms=60_000)
    message = result.error_message
    assert result.stop_reason == "error" and message.startswith("Cannot send the request to "), message
    assert reason in message and "check the provider's base URL" in message and "gave up" not in message
    assert "pa55word" not in message and KEY not in message


@pytest.mark.parametrize(
    "api, path",
    [
        ("openai-completions", "/v1/chat/completions"),
        ("openai-responses", "/v1/responses"),
        ("anthropic-messages", "/v1/v1/messages"),
        ("google-generative-ai", "/v1/models/m:streamGenerateContent"),
    ],
)
def test_a_base_url_with_a_query_keeps_it_after_the_endpoint_path(server, api, path):  # secrets
    """``base_url=".../v1?key=K"`` (a gateway's key in the URL): the endpoint path was appended to
    the text, so the request went to ``/v1`` with the query ``key=K/chat/completions``, and the
    redaction knew the secret as that string: a server echoing ``K`` put it in the error
    message and the session file."""
    secret = "AIzaQUERYKEY0987654321"
    server.enqueue(Reply(status=403, content_type="text/plain", body=f"forbidden for key {secret}"))
    model = Model(id="m", api=api, provider="local", base_url=server.url + f"/v1?key={secret}")
    result = complete(model, _ctx(), api_key=KEY, max_retries=0)
    [request] = server.requests
    assert request.path == path and f"key={secret}" in request.query.split("&")
    assert result.stop_reason == "error" and "forbidden for key ***" in result.error_message
    assert secret not in json.dumps(result.to_dict())


def test_endpoint_url_joins_paths_and_queries():
    from agentcore.providers.base import endpoint_url

    assert endpoint_url("https://h/v1/", "chat/completions") == "https://h/v1/chat/completions"
    assert endpoint_url("https://h/v1?key=K#frag", "/x?alt=sse") == "https://h/v1/x?key=K&alt=sse"
    assert endpoint_url("https://u:pa?ss@h/v1", "x") == "https://u:pa?ss@h/v1/x"  # a "?" in a password


def test_a_header_value_requests_refuses_is_named_not_quoted(server):  # secrets: requests quotes it
    from agentcore.providers.http import ProviderHTTPError, open_stream

    headers = {"Content-Type": "application/json", "x-api-key": f"{KEY}\n"}  # a wire module's own headers
    with pytest.raises(ProviderHTTPError) as info:
        open_stream(server.url + "/v1", b"{}", headers, session_name="local", max_retries=3)
    assert "header 'x-api-key'" in str(info.value) and "trailing newline" in str(info.value)
    assert KEY not in str(info.value) and server.requests == []


def test_unparseable_retry_after_is_ignored_not_raised():
    # providers §9: Retry-After is seconds or an HTTP date; anything else must not turn a
    # retryable 429/503 into "ValueError: Invalid date value" (Python 3.9: a TypeError).
    from agentcore.providers.http import retry_delay_from_headers

    for value in ("soon", "Mon, 99 Foo 2026", "1e9999x", "  "):
        assert retry_delay_from_headers({"retry-after": value}) is None
    assert retry_delay_from_headers({"retry-after": "2"}) == 2.0


def test_503_with_a_bad_retry_after_is_retried_and_reported_with_the_server_text():
    # providers §9 retries: the 503 is retried with the default back-off, then succeeds.
    import json as _json

    from _servers import Reply, ScriptedServer, sse

    from agentcore.providers import stream
    from agentcore.types import AgentContext, Model, UserMessage

    chunk = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}],
    }
    with ScriptedServer() as server:
        server.enqueue(
            Reply(
                status=503,
                content_type="application/json",
                headers={"Retry-After": "later"},
                body=_json.dumps({"error": {"message": "overloaded"}}),
            ),
            Reply(body=sse(chunk, done=True)),
        )
        model = Model(id="m", api="openai-completions", provider="local", base_url=server.url + "/v1")
        events = stream(
            model, AgentContext(system_prompt="", messages=[UserMessage("hi")]), api_key="sk-test-secret-key-123"
        )
        result = events.result()
    assert result.stop_reason == "stop", result.error_message
    assert len(server.requests) == 2


# --------------------------------------------------------------------------- broken streams


def test_connection_reset_mid_stream(server):  # issue 4: connection reset mid-stream
    body = _text_body(*["word "] * 50)
    server.enqueue(Reply(body=body, chunk_size=64, reset_after=len(body) // 2))
    types, result = _run(server)
    assert types[0] == "start" and types[-1] == "error"
    assert result.stop_reason == "error" and "Connection lost while streaming" in result.error_message


def test_stream_closed_early_without_terminal_event(server):  # providers §4: no terminal -> error
    server.enqueue(Reply(body=sse(_chunk({"content": "partial"}))))
    types, result = _run(server)
    assert types == ["start", "text_start", "text_delta", "error"]  # open blocks are not closed (§3.6)
    assert result.stop_reason == "error" and "ended before it was complete" in result.error_message
    assert result.text == "partial"  # partial content is kept


def test_malformed_json_event(server):  # issue 4: malformed JSON in an event
    server.enqueue(Reply(body=sse(_chunk({"content": "ok"}), '{"choices": [', done=True)))
    _, result = _run(server)
    assert result.stop_reason == "error" and result.error_message.startswith("malformed JSON in stream event")
    assert result.text == "ok"


def test_in_stream_error_object(server):  # providers §5: a chunk with a top-level error raises
    error = {"error": {"message": "tool_use_failed: bad call", "code": "tool_use_failed"}}
    server.enqueue(Reply(body=sse(_chunk({"content": "x"}), error, done=True)))
    _, result = _run(server)
    assert result.error_message == "tool_use_failed: bad call"


def test_non_utf8_bytes_in_stream(server):  # issue 4: non-UTF-8 bytes
    body = b'data: {"choices":[{"index":0,"delta":{"content":"caf\xe9 ok"}}]}\n\n' + _text_body("!").encode()
    server.enqueue(Reply(body=body, chunk_size=3))
    _, result = _run(server)
    assert result.stop_reason == "stop" and result.text == "caf\ufffd ok!"


def test_unknown_api_yields_error_stream():
    events = stream(Model(id="x", api="no-such-api", provider="p"), _ctx())
    assert [e.type for e in events] == ["error"]
    assert events.result().error_message.startswith('No provider registered for api "no-such-api"')


def test_stream_checks_option_names_and_values_before_any_request(server):  # issue 11 §3
    model = _model(server)

    def refused(**options):
        result = complete(model, _ctx(), api_key=KEY, **options)
        assert result.stop_reason == "error"  # never raised: a stream ends with its error
        return result.error_message

    assert refused(max_tokns=5).startswith("stream() got an unknown option 'max_tokns' (did you mean 'max_tokens'")
    assert refused(max_tokens="5") == "stream(): max_tokens must be an integer, not '5' (a str)"
    assert refused(max_tokens=0).startswith("stream(): max_tokens 0: ")
    assert "provider_options got an unknown option 'regoin'" in refused(provider_options={"regoin": "x"})
    assert "installed providers' own: " in refused(zzzzzzzz=1)  # no close match: the names are listed
    assert [e.type for e in stream(model, _ctx(), max_tokns=5)] == ["error"]
    assert server.requests == []  # each was refused before a request was made

    # a name another installed provider declares is fine here: the agent loop passes one set to every api
    server.enqueue(Reply(body=_text_body("a")), Reply(body=_text_body("b")))
    assert complete(model, _ctx(), api_key=KEY, interleaved_thinking=False, max_tokens=9).text == "a"
    assert complete(model, _ctx(), api_key=KEY, provider_options={"thinking": None}).text == "b"
    assert server.requests[0].json()["max_tokens"] == 9


def test_a_provider_that_declares_no_options_gets_any_keyword():  # third-party providers as before
    from agentcore import hookimpl, plugins
    from agentcore.events import DoneEvent, StartEvent
    from agentcore.streams import AssistantMessageEventStream

    seen = []

    class Undeclared:
        api = "undeclared-test"

        def stream(self, model, context, **options):
            seen.append(options)
            out = AssistantMessage([], api=model.api, provider=model.provider, model=model.id)
            events = AssistantMessageEventStream()
            events.push(StartEvent(out))
            events.push(DoneEvent("stop", out))
            return events

    class Registers:
        @hookimpl
        def register_providers(self, register):
            register(Undeclared())

    plugins.default_plugin_manager().register(Registers(), name="undeclared")  # the autouse fixture resets it
    message = complete(Model(id="m", api="undeclared-test", provider="p"), _ctx(), my_knob=3, max_tokens="5")
    assert message.stop_reason == "stop" and seen == [{"my_knob": 3, "max_tokens": "5"}]


@pytest.mark.parametrize(
    "case",
    [
        "plain",
        "netrc host",
        "netrc host, own auth",
        "netrc host, x-api-key",
        "url login",
        "url login, own auth",
        "session headers",
        "session cookie",
        "request params",
        "no trust_env",
    ],
)
def test_provider_sessions_prepare_requests_exactly_as_requests_does(case, tmp_path, monkeypatch):
    """The pooled sessions' cheaper preparation (no protocol checks of empty merges) gives the
    request requests' own Session.prepare_request gives, whatever the session carries, except that
    neither a .netrc entry nor the URL's user:password@ replaces the provider's own Authorization
    header (a Bedrock SigV4 signature sent through a proxy URL with a login became Basic auth)."""
    import requests

    from agentcore.providers._http_pool import _session_class

    netrc = tmp_path / "netrc"
    netrc.write_text("machine netrc.example.com login user password pass-1\n")
    monkeypatch.setenv("NETRC", str(netrc))
    fast, plain = _session_class()(), requests.Session()
    host = "netrc.example.com" if case.startswith("netrc host") else "api.example.com"
    own_auth = {"Authorization": "Bearer k"} if case not in ("netrc host", "url login") else {}
    login = "proxy-user:pw-1@" if case.startswith("url login") else ""
    if case == "netrc host, x-api-key":
        own_auth = {"x-api-key": "k"}
    for session in (fast, plain):
        if case == "session headers":
            session.headers["X-Team"] = "t-1"
            session.headers["Accept-Encoding"] = None  # a None value removes the header
        if case == "session cookie":
            session.cookies.set("__cf_bm", "cookie-1", domain=host)
        if case == "no trust_env":
            session.trust_env = False
    extra = {"params": {"q": "1"}} if case == "request params" else {}
    request = requests.Request(
        "post",
        f"https://{login}{host}/v1/chat/completions",
        data=b'{"model":"m"}',
        headers={**own_auth, "Content-Type": "application/json", "X-Drop": None},
        **extra,
    )
    ours, theirs = fast.prepare_request(request), requests.Session.prepare_request(plain, request)
    if case in ("netrc host, own auth", "url login, own auth"):  # the one difference: the provider's
        # credentials win over the file's and the URL's
        assert theirs.headers["Authorization"].startswith("Basic ") and ours.headers["Authorization"] == "Bearer k"
        theirs.headers["Authorization"] = "Bearer k"
    if case == "netrc host, x-api-key":  # nor is a second credential added to the provider's
        assert theirs.headers["Authorization"].startswith("Basic ") and "Authorization" not in ours.headers
        del theirs.headers["Authorization"]
    assert (ours.method, ours.url, list(ours.headers.items()), ours.body, ours.hooks) == (
        theirs.method,
        theirs.url,
        list(theirs.headers.items()),
        theirs.body,
        theirs.hooks,
    )
    assert ours._cookies.get_dict() == theirs._cookies.get_dict()
    if case == "session cookie":
        assert ours.headers["Cookie"] == "__cf_bm=cookie-1"
    if case in ("netrc host", "url login"):  # no credentials of the request's own: the file's or URL's login
        assert ours.headers["Authorization"].startswith("Basic ")
    if case == "session headers":
        assert "Accept-Encoding" not in ours.headers and ours.headers["X-Team"] == "t-1"
    assert "X-Drop" not in ours.headers


# --------------------------------------------------------------------------- aborts


def _abort_when(event: threading.Event, controller: AbortController, stamp: dict):
    def run():
        event.wait(10)
        stamp["t"] = time.perf_counter()
        controller.abort()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_abort_while_waiting_for_headers(server):  # issue 4: abort before the first byte
    server.enqueue(Reply(body=_text_body("never"), stall_before_headers=True))
    controller, stamp = AbortController(), {}
    thread = _abort_when(server.request_received, controller, stamp)
    events = stream(_model(server), _ctx(), api_key=KEY, signal=controller.signal)
    types = [e.type for e in events]
    elapsed = time.perf_counter() - stamp["t"]
    thread.join()
    result = events.result()
    assert types == ["error"] and result.stop_reason == "aborted" and result.error_message == "Request was aborted"
    assert elapsed < 5.0, "abort did not interrupt the wait (the server stalls for 30 s)"


def test_abort_mid_stream_keeps_partial_content(server):  # issue 4: abort mid-stream
    body = _text_body("first", "second")
    first_event_end = body.index("\n\n") + 2
    server.enqueue(Reply(body=body, stall_after=first_event_end))
    controller, got_text = AbortController(), threading.Event()
    stamp = {}
    events = stream(_model(server), _ctx(), api_key=KEY, signal=controller.signal)
    types = []
    thread = _abort_when(got_text, controller, stamp)
    for event in events:
        types.append(event.type)
        if event.type == "text_delta":
            got_text.set()
    elapsed = time.perf_counter() - stamp["t"]
    thread.join()
    result = events.result()
    assert types == ["start", "text_start", "text_delta", "error"]
    assert result.stop_reason == "aborted" and result.text == "first"
    assert elapsed < 5.0, "abort did not unblock the read (the server stalls for 30 s)"


def test_abort_during_retry_sleep(server):
    server.enqueue(Reply(status=429, headers={"retry-after": "30"}, body=""))
    controller, stamp = AbortController(), {}
    thread = _abort_when(server.headers_sent, controller, stamp)
    result = complete(_model(server), _ctx(), api_key=KEY, signal=controller.signal)
    elapsed = time.perf_counter() - stamp["t"]
    thread.join()
    assert result.stop_reason == "aborted" and elapsed < 5.0 and len(server.requests) == 1


def test_an_abort_before_a_pooled_connection_is_picked_sends_nothing(server, monkeypatch):
    """The abort came after the request's abort listener was in place but before a kept-alive
    connection was taken from the pool: the listener found no socket to shut down, and the
    request was sent anyway, waiting for the server (here: 30 s) instead of ending at once."""
    from agentcore.providers.http import get_session

    server.enqueue(Reply(body=_text_body("warm")))
    assert complete(_model(server), _ctx(), api_key=KEY).text == "warm"  # leaves a connection in the pool
    server.enqueue(Reply(body=_text_body("never"), stall_before_headers=True))
    controller = AbortController()
    session = get_session("local")
    send = session.request

    def abort_then_send(*args, **kwargs):
        controller.abort()
        return send(*args, **kwargs)

    monkeypatch.setattr(session, "request", abort_then_send)
    result = complete(_model(server), _ctx(), api_key=KEY, signal=controller.signal)
    assert (result.stop_reason, result.error_message) == ("aborted", "Request was aborted")
    assert len(server.requests) == 1  # the second request never reached the server


def test_already_aborted_signal_sends_nothing(server):
    controller = AbortController()
    controller.abort()
    result = complete(_model(server), _ctx(), api_key=KEY, signal=controller.signal)
    assert result.stop_reason == "aborted" and server.requests == []


def test_provider_stream_accepts_a_threading_event_as_signal():
    # providers §3: abort is "a threading.Event-like signal checked between SSE lines". Passing a
    # threading.Event raised AttributeError out of the stream (a stream fn must never raise).
    import threading

    from _servers import Reply, ScriptedServer, sse

    from agentcore.providers import stream
    from agentcore.types import AgentContext, Model, UserMessage

    def chunk(text, finish=None):
        return {
            "id": "c1",
            "object": "chat.completion.chunk",
            "model": "m",
            "choices": [{"index": 0, "delta": {"content": text} if text else {}, "finish_reason": finish}],
        }

    context = AgentContext(system_prompt="", messages=[UserMessage("hi")])
    with ScriptedServer() as server:
        model = Model(id="m", api="openai-completions", provider="local", base_url=server.url + "/v1")
        server.enqueue(
            Reply(body=sse(chunk("a"), chunk("b"), chunk("c"), chunk(None, "stop"), done=True), chunk_size=40)
        )
        event = threading.Event()
        assert stream(model, context, api_key="sk-test-secret-key-123", signal=event).result().stop_reason == "stop"

        event.set()  # already set: nothing is sent
        done = stream(model, context, api_key="sk-test-secret-key-123", signal=event).result()
        assert (done.stop_reason, done.error_message) == ("aborted", "Request was aborted")

        server.enqueue(
            Reply(body=sse(chunk("a"), chunk("b"), chunk("c"), chunk(None, "stop"), done=True), chunk_size=40)
        )
        event = threading.Event()
        events = stream(model, context, api_key="sk-test-secret-key-123", signal=event)
        for item in events:
            if item.type == "text_delta":
                event.set()  # set between events: the stream stops at the next one
        done = events.result()
        assert done.stop_reason == "aborted"


def test_abort_while_reading_an_error_body_returns_promptly():
    # providers §9: an abort ends the request within moments. While the body of a non-2xx reply
    # was read (for the error message) nothing listened to the signal, so a server stalling
    # in its error body held an aborted run for the whole read timeout (600 s by default).
    import json as _json
    import threading

    from _servers import Reply, ScriptedServer

    from agentcore.providers import stream
    from agentcore.signals import AbortController
    from agentcore.types import AgentContext, Model, UserMessage

    with ScriptedServer() as server:
        server.enqueue(
            Reply(
                status=500,
                content_type="application/json",
                chunked=False,
                stall_after=10,
                body=_json.dumps({"error": {"message": "x" * 1000}}),
            )
        )
        model = Model(id="m", api="openai-completions", provider="local", base_url=server.url + "/v1")
        controller = AbortController()
        threading.Thread(target=lambda: server.headers_sent.wait(10) and controller.abort(), daemon=True).start()
        started = time.monotonic()
        result = stream(
            model,
            AgentContext(system_prompt="", messages=[UserMessage("hi")]),
            api_key="sk-test-secret-key-123",
            signal=controller.signal,
            max_retries=0,
            timeout=(5, 30),
        ).result()
        elapsed = time.monotonic() - started
    assert (result.stop_reason, result.error_message) == ("aborted", "Request was aborted")
    assert elapsed < 10, f"abort took {elapsed:.1f} s"


# --------------------------------------------------------------------------- keys


def test_missing_key_names_the_variable(server, monkeypatch):  # issue 4 / providers §19
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    events = stream(_model(server, provider="openai"), _ctx())
    assert [e.type for e in events] == ["error"]
    assert events.result().error_message == 'no API key for provider "openai": set OPENAI_API_KEY or pass api_key='
    assert server.requests == []


def test_env_key_is_used_and_local_providers_need_none(server, monkeypatch):
    monkeypatch.setenv("GROQ_API_KEY", "gsk-env")
    server.enqueue(Reply(body=_text_body("a")), Reply(body=_text_body("b")))
    complete(_model(server, provider="groq"), _ctx())
    complete(_model(server, provider="my-local-server"), _ctx())
    assert server.requests[0].headers["authorization"] == "Bearer gsk-env"
    assert "authorization" not in server.requests[1].headers


# --------------------------------------------------------------------------- context overflow


def _failed(message):
    return AssistantMessage(stop_reason="error", error_message=message)


@pytest.mark.parametrize(
    "message",
    [
        "400 prompt is too long: 213462 tokens > 200000 maximum",
        "400 Your input exceeds the context window of this model.",
        '400 {"error":{"code":400,"message":"The input token count (1196265) exceeds the maximum number of tokens allowed (1048575).","status":"INVALID_ARGUMENT"}}',
        "400 This model's maximum context length is 128000 tokens. However, you requested 130000 tokens.",
        "400 Please reduce the length of the messages or completion.",
        "Unhandled stop reason: model_context_window_exceeded",
        "400 status code (no body)",
        "413 status code (no body)",
        "the request exceeds the available context size, try increasing it",
    ],
)
def test_context_overflow_messages(message):  # providers §9
    assert is_context_overflow(_failed(message))


def test_context_overflow_negative_and_silent():
    assert not is_context_overflow(_failed("401 Incorrect API key provided"))
    # Bedrock's throttling says "too many tokens" too: compacting would throw history away for nothing
    for throttled in (
        "Throttling error: Too many tokens, please wait before trying again.",
        "429 ThrottlingException: Too many tokens, please wait before trying again. (gave up after 3 attempts)",
        "Service unavailable: too many tokens in flight",
        "400 Rate limit reached for tokens per min: too many tokens",
    ):
        assert not is_context_overflow(_failed(throttled)), throttled
    assert not is_context_overflow(_failed("500 status code (no body)"))
    ok = AssistantMessage(stop_reason="stop", usage=Usage(input=120000, cache_read=10000))
    assert is_context_overflow(ok, context_window=128000)
    assert not is_context_overflow(ok, context_window=200000) and not is_context_overflow(ok)


def test_abort_while_the_tcp_connect_hangs_ends_the_stream_at_once():  # issue 4: abort closes
    # A listener whose accept queue is full: the kernel drops further SYNs, so connect() hangs
    # (what an unreachable or firewalled host does), all on 127.0.0.1.
    import socket as socket_module
    import threading
    import time

    listener = socket_module.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(8):
        filler = socket_module.socket()
        filler.setblocking(False)
        try:
            filler.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        fillers.append(filler)
    try:
        model = Model(id="m", api="openai-completions", provider="local", base_url=f"http://127.0.0.1:{port}/v1")
        controller = AbortController()
        finished = threading.Event()
        result = {}

        def consume():
            result["message"] = stream(
                model, _ctx(), api_key=KEY, signal=controller.signal, max_retries=0, timeout=(30, 30)
            ).result()
            finished.set()

        threading.Thread(target=consume, daemon=True).start()
        assert not finished.wait(0.3)  # still connecting (nothing answers)
        started = time.monotonic()
        controller.abort()
        assert finished.wait(5), "the aborted connect did not return"
        assert time.monotonic() - started < 5.0  # not the 30 s connect timeout
        assert result["message"].stop_reason == "aborted"
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


_PROXY_VARIABLES = (
    "http_proxy",
    "HTTP_PROXY",
    "https_proxy",
    "HTTPS_PROXY",
    "all_proxy",
    "ALL_PROXY",
    "no_proxy",
    "NO_PROXY",
)


def test_environment_proxy_changes_apply_to_the_next_request(monkeypatch):  # providers §4: requests' rules
    from agentcore.providers import _http_pool

    if not _http_pool._PROXIES_FROM_ENV_ONLY:
        pytest.skip("proxies may come from system settings here; requests' own path is used")
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    body = sse(_content_chunk("ok"), _finish(), done=True)
    with ScriptedServer() as target, ScriptedServer() as proxy:
        model = Model(id="m", api="openai-completions", provider="proxy-test", base_url=target.url + "/v1")

        def ask() -> str:
            target.enqueue(Reply(body=body))
            proxy.enqueue(Reply(body=body))
            return complete(model, AgentContext("", [UserMessage("hi")])).text

        assert ask() == "ok" and (len(target.requests), len(proxy.requests)) == (1, 0)
        monkeypatch.setenv("http_proxy", proxy.url)
        assert ask() == "ok" and (len(target.requests), len(proxy.requests)) == (1, 1)
        assert proxy.requests[0].path == "/v1/chat/completions"
        monkeypatch.setenv("no_proxy", "127.0.0.1")
        assert ask() == "ok" and (len(target.requests), len(proxy.requests)) == (2, 1)
        monkeypatch.delenv("no_proxy")
        monkeypatch.delenv("http_proxy")
        assert ask() == "ok" and (len(target.requests), len(proxy.requests)) == (3, 1)


# --------------------------------------------------------------------------- connection pool (issue 11 §7)


def _concurrent_round(server, model, count):
    """``count`` streams held open at once (the server stalls each body until all arrived)."""
    server.release.clear()
    for _ in range(count):
        server.enqueue(Reply(body=_text_body("ok"), stall_after=0))
    before = len(server.requests)
    results = [None] * count

    def consume(i):
        results[i] = stream(model, _ctx(), api_key=KEY, max_retries=0).result()

    threads = [threading.Thread(target=consume, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    while True:  # clear, check, wait: a request arriving after the check sets the event again
        server.request_received.clear()
        if len(server.requests) - before >= count:
            break
        assert server.request_received.wait(10), "not every stream reached the server"
    server.release.set()
    for thread in threads:
        thread.join(10)
    assert all(r is not None and r.stop_reason == "stop" for r in results), results
    return {r.client_port for r in server.requests[before:]}


def test_more_concurrent_streams_than_the_old_pool_size_discard_no_connection(server, caplog):
    # 40 concurrent streams against one host: the pool used to keep 32 and close the other 8
    # ("Connection pool is full, discarding connection"), so the next round reconnected
    model = _model(server, provider="pool-test-40")
    with caplog.at_level("WARNING", logger="urllib3.connectionpool"):
        first = _concurrent_round(server, model, 40)
        second = _concurrent_round(server, model, 40)
    assert len(first) == 40
    assert not [r for r in caplog.records if "discarding connection" in r.getMessage()]
    assert second <= first, "the second round opened new connections"


def test_pool_maxsize_is_configurable(monkeypatch, server, caplog):
    from agentcore.providers import http

    monkeypatch.delenv(http.POOL_MAXSIZE_ENV, raising=False)
    assert http.pool_maxsize() == http.DEFAULT_POOL_MAXSIZE
    monkeypatch.setenv(http.POOL_MAXSIZE_ENV, "3")
    assert http.pool_maxsize() == 3
    monkeypatch.setenv(http.POOL_MAXSIZE_ENV, "many")
    with pytest.raises(ValueError, match="AGENTCORE_HTTP_POOL_MAXSIZE='many' is not a whole number"):
        http.pool_maxsize()
    monkeypatch.delenv(http.POOL_MAXSIZE_ENV)
    for bad in (0, -1, 2.5, True, "8"):
        with pytest.raises(ValueError, match="pool maxsize must be a whole number"):
            http.set_pool_maxsize(bad)
    model = _model(server, provider="pool-test-small")
    try:
        http.set_pool_maxsize(2)  # 4 concurrent streams: 2 connections kept, 2 closed on return
        with caplog.at_level("WARNING", logger="urllib3.connectionpool"):
            _concurrent_round(server, model, 4)
        assert len([r for r in caplog.records if "discarding connection" in r.getMessage()]) == 2
    finally:
        http.set_pool_maxsize(None)
    assert http.pool_maxsize() == http.DEFAULT_POOL_MAXSIZE


# --------------------------------------------------------------------------- close_on_abort (issue 11 §4)


def test_close_on_abort_unblocks_a_read_of_a_plugins_own_response(server):
    # the public helper agentcore-web uses instead of copying close_response/_socket_of
    import requests

    from agentcore.providers.http import close_on_abort, iter_body

    server.enqueue(Reply(body="data: first\n\ndata: never\n\n", stall_after=13))
    controller = AbortController()
    response = requests.get(server.url + "/page", stream=True, timeout=30)
    got, finished = [], threading.Event()

    def read():
        try:
            with close_on_abort(response, controller.signal):
                for chunk in iter_body(response):
                    got.append(chunk)
        except Exception as exc:  # which exception depends on where the read was
            got.append(exc)
        finally:
            finished.set()

    threading.Thread(target=read, daemon=True).start()
    assert server.body_started.wait(10)
    controller.abort()
    assert finished.wait(5), "the blocked read did not return after the abort"
    assert b"".join(c for c in got if isinstance(c, bytes)) in (b"", b"data: first\n\n")
    response.close()


def test_close_on_abort_with_an_aborted_none_or_later_signal(server):
    import requests

    from agentcore.providers.http import close_on_abort

    for _ in range(3):
        server.enqueue(Reply(body="ok", chunked=False))
    controller = AbortController()
    response = requests.get(server.url + "/a", stream=True, timeout=30)
    with close_on_abort(response, controller.signal):
        pass
    controller.abort()  # after the block: the listener is gone, the response stays open
    assert response.raw.read() == b"ok"
    response.close()

    response = requests.get(server.url + "/b", stream=True, timeout=30)
    with close_on_abort(response, controller.signal):  # already aborted: closed on entry
        assert response.raw.closed
    response.close()

    response = requests.get(server.url + "/c", stream=True, timeout=30)
    with close_on_abort(response, None):  # no signal: nothing to watch
        assert response.raw.read() == b"ok"
    response.close()


def test_a_connection_error_never_repeats_a_secret_query_value_of_the_url():  # issue 15: redaction
    from agentcore.providers.http import ProviderHTTPError, open_stream

    with ScriptedServer() as srv:
        url = srv.url + "/v1/x?alt=sse&token=url-secret-token-77"  # the server is closed: refused
    with pytest.raises(ProviderHTTPError) as caught:
        open_stream(url, b"{}", {}, session_name="t", max_retries=0)
    text = str(caught.value)
    assert "url-secret-token-77" not in text and "(/v1/x?alt=sse&token=***)" in text
    # the root reason, not urllib3's wrappers (pool and connection reprs, "Max retries exceeded")
    assert text.startswith("Connection error talking to 127.0.0.1:") and "Connection refused" in text
    assert "HTTPConnection" not in text and "Max retries" not in text and "object at 0x" not in text


def test_base_url_variables_come_from_the_environment(server, monkeypatch):  # issue 17: Cloudflare URLs
    monkeypatch.delenv("CLOUDFLARE_ACCOUNT_ID", raising=False)
    model = Model(
        id="@cf/meta/llama-3.1-8b-instruct",
        api="openai-completions",
        provider="cloudflare-workers-ai",
        base_url=server.url + "/client/v4/accounts/{CLOUDFLARE_ACCOUNT_ID}/ai/v1",
    )
    missing = complete(model, _ctx(), api_key=KEY)
    assert missing.stop_reason == "error" and server.requests == []
    assert missing.error_message.startswith(
        "the base URL of cloudflare-workers-ai/@cf/meta/llama-3.1-8b-instruct needs CLOUDFLARE_ACCOUNT_ID"
    )
    monkeypatch.setenv("CLOUDFLARE_ACCOUNT_ID", "acct-42")
    server.enqueue(Reply(body=_text_body("ok")))
    assert complete(model, _ctx(), api_key=KEY).text == "ok"
    assert server.requests[0].path == "/client/v4/accounts/acct-42/ai/v1/chat/completions"


# --------------------------------------------------------------------------- every API: timeout,
# max_retries, in-stream retryable errors (issue 17)


def _anthropic(*events):
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


def _responses(*events):
    return _anthropic(*events)


def _google(*chunks):
    return "".join(f"data: {json.dumps(c)}\r\n\r\n" for c in chunks)


_ANTHROPIC_TEXT = _anthropic(
    {"type": "message_start", "message": {"usage": {"input_tokens": 3, "output_tokens": 1}}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "fine"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
    {"type": "message_stop"},
)
_RESPONSES_TEXT = _responses(
    {"type": "response.output_item.added", "output_index": 0, "item": {"type": "message", "id": "m1"}},
    {"type": "response.output_text.delta", "output_index": 0, "delta": "fine"},
    {
        "type": "response.output_item.done",
        "output_index": 0,
        "item": {"type": "message", "id": "m1", "content": [{"type": "output_text", "text": "fine"}]},
    },
    {"type": "response.completed", "response": {"status": "completed", "usage": {"input_tokens": 3}}},
)
_GOOGLE_TEXT = _google({"candidates": [{"content": {"parts": [{"text": "fine"}]}, "finishReason": "STOP"}]})

# per API: (api, base-URL suffix, a good answer "fine", a retryable in-stream error before any
# content, a body that streams "par" and then that error, a non-retryable in-stream error)
APIS = {
    "anthropic-messages": (
        "",
        _ANTHROPIC_TEXT,
        'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n',
        _ANTHROPIC_TEXT.split("event: content_block_stop")[0].replace('"fine"', '"par"')
        + 'event: error\ndata: {"type":"error","error":{"type":"rate_limit_error","message":"slow"}}\n\n',
        'event: error\ndata: {"type":"error","error":{"type":"invalid_request_error","message":"bad"}}\n\n',
    ),
    "openai-completions": (
        "/v1",
        _text_body("fine"),
        sse({"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}}),
        sse(_chunk({"content": "par"}), {"error": {"message": "upstream died", "type": "server_error"}}),
        sse({"error": {"message": "tool_use_failed: bad call", "code": "tool_use_failed"}}),
    ),
    "openai-responses": (
        "/v1",
        _RESPONSES_TEXT,
        _responses({"type": "error", "code": "server_error", "message": "The server had an error"}),
        _RESPONSES_TEXT.split("event: response.output_item.done")[0].replace('"fine"', '"par"')
        + _responses({"type": "error", "code": "rate_limit_exceeded", "message": "slow down"}),
        _responses({"type": "error", "code": "invalid_prompt", "message": "bad prompt"}),
    ),
    "google-generative-ai": (
        "/v1beta",
        _GOOGLE_TEXT,
        _google({"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}),
        _google(
            {"candidates": [{"content": {"parts": [{"text": "par"}]}}]},
            {"error": {"code": 429, "message": "Resource exhausted", "status": "RESOURCE_EXHAUSTED"}},
        ),
        _google({"error": {"code": 400, "message": "Invalid argument", "status": "INVALID_ARGUMENT"}}),
    ),
}


def _api_model(server, api):
    return Model(
        id="gemini-x" if api.startswith("google") else "m",
        api=api,
        provider="local-" + api,
        base_url=server.url + APIS[api][0],
    )


def _api_run(server, api, **options):
    events = stream(_api_model(server, api), _ctx(), api_key=KEY, **options)
    types = [e.type for e in events]
    return types, events.result()


@pytest.mark.parametrize("api", sorted(APIS))
def test_a_silent_server_hits_the_read_timeout(server, api):  # issue 17: timeout on every API
    server.enqueue(Reply(stall_before_headers=True), Reply(body=APIS[api][2], stall_after=0))
    types, result = _api_run(server, api, timeout=(5, 0.2), max_retries=0)
    assert types == ["error"] and result.stop_reason == "error"
    assert result.error_message.startswith("Request timed out talking to 127.0.0.1")
    assert "(gave up after 1 attempt, max_retries=0)" in result.error_message
    types, result = _api_run(server, api, timeout_ms=200, max_retries=0)  # silence after the headers
    assert types == ["start", "error"] and result.error_message.startswith("Timed out while streaming")
    server.release.set()
    assert len(server.requests) == 2


@pytest.mark.parametrize("api", sorted(APIS))
def test_max_retries_retries_exactly_n_times_then_names_the_attempts(server, api):  # issue 17
    for status in (429, 500, 503, 529):
        server.enqueue(Reply(status=status, headers={"retry-after-ms": "0"}, body='{"error":{"message":"busy"}}'))
    types, result = _api_run(server, api, max_retries=3)
    assert types == ["error"] and len(server.requests) == 4
    assert result.error_message.startswith("529 ") and "busy" in result.error_message  # the last answer
    assert result.error_message.endswith(" (gave up after 4 attempts, max_retries=3)")
    server.enqueue(Reply(status=503, headers={"retry-after-ms": "0"}, body="{}"), Reply(body=APIS[api][1]))
    types, result = _api_run(server, api, max_retries=1)
    assert result.stop_reason == "stop" and result.text == "fine" and len(server.requests) == 6


@pytest.mark.parametrize("api", sorted(APIS))
def test_an_in_stream_overload_before_any_content_is_retried(server, api):  # issue 17
    _, good, retryable, _, _ = APIS[api]
    server.enqueue(Reply(body=retryable, chunk_size=9), Reply(body=good, chunk_size=9))
    types, result = _api_run(server, api)
    assert result.stop_reason == "stop", result.error_message
    assert result.text == "fine" and len(server.requests) == 2
    assert types.count("start") == 1 and types[0] == "start" and types[-1] == "done"
    assert server.requests[0].body == server.requests[1].body
    # every API notes the recovered retry (docs "Response ids and diagnostics"), keys redacted
    assert [(d.type, d.details["attempt"]) for d in result.diagnostics or []] == [("provider_retry", 1)]
    assert KEY not in repr(result.diagnostics)


@pytest.mark.parametrize("api", sorted(APIS))
def test_a_connection_lost_after_the_headers_before_any_content_is_retried(server, api):
    _, good, _, _, _ = APIS[api]
    server.enqueue(Reply(body=good, reset_after=0), Reply(body=good, chunk_size=9))
    types, result = _api_run(server, api)
    assert result.stop_reason == "stop", result.error_message
    assert result.text == "fine" and len(server.requests) == 2
    assert types.count("start") == 1 and types[-1] == "done"
    assert [(d.type, d.details["attempt"]) for d in result.diagnostics or []] == [("provider_retry", 1)]
    # out of budget it is the same lost connection, with the attempts counted
    server.enqueue(Reply(body=good, reset_after=0), Reply(body=good, reset_after=0))
    types, result = _api_run(server, api, max_retries=1)
    assert types == ["start", "error"] and len(server.requests) == 4
    assert result.error_message.startswith("Connection lost while streaming the response")
    assert result.error_message.endswith("(gave up after 2 attempts, max_retries=1)")


@pytest.mark.parametrize("api", sorted(APIS))
def test_a_body_that_does_not_decode_is_told_plainly_and_not_retried(server, api):  # clear errors
    # a 200 whose gzip does not inflate (a proxy adding Content-Encoding to a plain body) said
    # "DecodeError: ('Received response ...', error('Error -3 ...'))" after three identical answers
    server.enqueue(*[Reply(body=b"data: not gzip at all\n\n", headers={"Content-Encoding": "gzip"}) for _ in range(3)])
    types, result = _api_run(server, api)
    assert types == ["start", "error"] and len(server.requests) == 1
    assert result.error_message.startswith(
        "The response body could not be decoded: Received response with content-encoding: gzip, but failed "
        "to decode it: Error -3 while decompressing data: "
    )
    assert "DecodeError" not in result.error_message and "error(" not in result.error_message


@pytest.mark.parametrize("api", sorted(APIS))
def test_a_stream_that_goes_silent_after_content_is_not_retried(server, api):  # the partial answer stands
    _, good, _, _, _ = APIS[api]
    data = good.encode() if isinstance(good, str) else good

    def end_of_event(at: int) -> int:  # SSE events end with a blank line, \n\n or \r\n\r\n
        return min(data.find(sep, at) + len(sep) for sep in (b"\n\n", b"\r\n\r\n") if data.find(sep, at) >= 0)

    first_event = end_of_event(0)
    text_event = end_of_event(data.index(b"fine"))  # through the event carrying the text
    if text_event == len(data):  # one event carries text and the end (Gemini): split it in two
        data = data.replace(b', "finishReason": "STOP"', b"", 1) + data
        text_event = first_event
    server.enqueue(Reply(body=data, stall_after=text_event), Reply(body=good))
    types, result = _api_run(server, api, timeout_ms=300)
    server.release.set()
    assert types[-1] == "error" and len(server.requests) == 1, (types, result.error_message)
    assert result.content and result.error_message.startswith("Timed out while streaming")


@pytest.mark.parametrize("api", sorted(APIS))
def test_in_stream_errors_share_the_budget_with_http_failures(server, api):  # issue 17: one max_retries
    _, good, retryable, _, _ = APIS[api]
    server.enqueue(
        Reply(status=503, headers={"retry-after-ms": "0"}, body="{}"), Reply(body=retryable), Reply(body=good)
    )
    types, result = _api_run(server, api, max_retries=1)
    assert result.stop_reason == "error" and len(server.requests) == 2
    assert result.error_message.endswith("(gave up after 2 attempts, max_retries=1)")
    assert types == ["start", "error"] and result.content == []


@pytest.mark.parametrize("api", sorted(APIS))
def test_an_error_after_content_or_a_non_transient_one_is_not_retried(server, api):  # issue 17
    _, good, _, after_content, permanent = APIS[api]
    server.enqueue(Reply(body=after_content), Reply(body=good), Reply(body=permanent), Reply(body=good))
    types, result = _api_run(server, api)
    assert result.stop_reason == "error" and result.text == "par"  # the partial content is kept
    assert "gave up" not in result.error_message and len(server.requests) == 1
    assert types[0] == "start" and types[-1] == "error"
    types, result = _api_run(server, api)  # the next reply in the queue is "good": it must not be asked for
    assert result.stop_reason == "stop"
    types, result = _api_run(server, api)
    assert result.stop_reason == "error" and "gave up" not in result.error_message
    assert len(server.requests) == 3


def test_which_in_stream_errors_are_transient():  # issue 17: one classifier for every wire module
    from agentcore.providers.retries import retryable_error

    for codes in (("overloaded_error",), ("rate_limit_error",), ("RESOURCE_EXHAUSTED",), ("UNAVAILABLE",)):
        assert retryable_error(*codes), codes
    assert retryable_error(None, "server_error") and retryable_error(503) and retryable_error("429")
    assert retryable_error("throttlingException") and retryable_error(None, None, 529)
    for codes in (("invalid_request_error",), ("insufficient_quota",), (400,), ("INVALID_ARGUMENT",), (None,), ()):
        assert not retryable_error(*codes), codes
    assert not retryable_error(True) and not retryable_error("5000")  # not HTTP statuses


def test_a_failed_response_with_a_server_error_is_retried(server):  # issue 17: Responses response.failed
    failed = _responses(
        {"type": "response.failed", "response": {"status": "failed", "error": {"code": "server_error", "message": "x"}}}
    )
    invalid = _responses(
        {
            "type": "response.failed",
            "response": {"status": "failed", "error": {"code": "invalid_prompt", "message": "no"}},
        }
    )
    server.enqueue(Reply(body=failed), Reply(body=_RESPONSES_TEXT), Reply(body=invalid), Reply(body=_RESPONSES_TEXT))
    _, result = _api_run(server, "openai-responses")
    assert result.stop_reason == "stop" and result.text == "fine" and len(server.requests) == 2
    _, result = _api_run(server, "openai-responses")
    assert result.error_message == "invalid_prompt: no" and len(server.requests) == 3


def test_secret_header_values_name_every_credential_header_and_bare_tokens():  # tidy: one list, core + plugins
    from agentcore.providers.base import secret_header_values

    headers = {
        "Authorization": "Bearer tok-0123456789",
        "X-Amz-Security-Token": "session-token-0123456789",
        "api-key": "azure-key-0123456789",
        "Content-Type": "application/json",
    }
    expected = {"Bearer tok-0123456789", "tok-0123456789", "session-token-0123456789", "azure-key-0123456789"}
    for _ in range(2):  # the second call answers from the remembered header names: the same
        assert set(secret_header_values(headers)) == expected
    assert secret_header_values({"authorization": "Bearer other-0123456789"}) == [
        "Bearer other-0123456789",
        "other-0123456789",
    ]


@pytest.mark.parametrize("api", sorted(APIS))
def test_gateway_credential_headers_echoed_in_an_error_are_redacted(server, api):  # issue 17: secrets
    # gateways authenticate with their own headers (Cloudflare cf-aig-authorization, Portkey
    # x-portkey-api-key, Helicone helicone-auth); a server echoing them must not put them in the
    # message, the diagnostics or the transcript
    secrets = {
        "cf-aig-authorization": "Bearer cf-gateway-secret-0123",
        "X-Portkey-Api-Key": "portkey-secret-0123",
        "Helicone-Auth": "Bearer helicone-secret-0123",
        "X-Custom-Token": "custom-token-secret-0123",
    }
    echoed = json.dumps({"error": {"message": "rejected: " + json.dumps(secrets)}})
    server.enqueue(Reply(status=401, content_type="application/json", body=echoed))
    model = Model(
        id="gemini-x" if api.startswith("google") else "m",
        api=api,
        provider="local-" + api,
        base_url=server.url + APIS[api][0],
        headers={"X-Portkey-Api-Key": secrets["X-Portkey-Api-Key"], "X-Custom-Token": secrets["X-Custom-Token"]},
    )
    option_headers = {k: v for k, v in secrets.items() if k in ("cf-aig-authorization", "Helicone-Auth")}
    result = stream(model, _ctx(), api_key=KEY, max_retries=0, headers=option_headers).result()
    assert result.stop_reason == "error" and result.error_message.startswith("401 ")
    text = result.error_message + repr(result.diagnostics) + json.dumps(result.to_dict())
    assert "secret" not in text, text
    assert "rejected" in result.error_message and "Content-Type" not in text  # only credentials go


def test_a_wire_request_repr_hides_credential_headers():  # issue 17: keys never appear in reprs
    from agentcore.providers.base import WireRequest

    request = WireRequest(
        "https://api.example/v1/chat/completions",
        {"Authorization": "Bearer sk-live-0123456789", "cf-aig-authorization": "cf-0123456789", "Accept": "x/y"},
        {"model": "m"},
    )
    text = repr(request)
    assert "0123456789" not in text and "'Authorization': '***'" in text and "'Accept': 'x/y'" in text
    assert "api.example" in text and "'model': 'm'" in text
    with_url_secrets = repr(WireRequest("https://u:pw-0123456789@h/v1?api_key=zz-0123456789", {}, {}))
    assert "0123456789" not in with_url_secrets and "u:***@h/v1?api_key=***" in with_url_secrets


@pytest.mark.parametrize("status", [301, 302, 307, 308])
@pytest.mark.parametrize("api, header", [("anthropic-messages", "x-api-key"), ("openai-completions", "authorization")])
def test_a_redirect_is_an_error_and_the_key_goes_nowhere_else(status, api, header):
    """requests keeps x-api-key (and x-goog-api-key, api-key) on a redirect to another host, and
    makes a 301/302 POST a bodiless GET: provider requests never follow one."""
    with ScriptedServer() as origin, ScriptedServer() as elsewhere:
        target = elsewhere.url.replace("127.0.0.1", "localhost") + "/v1/moved"
        origin.enqueue(Reply(status=status, headers={"Location": target + "?token=tok-0123456789"}, body=""))
        model = Model(id="m", api=api, provider="p", base_url=origin.url + "/v1")
        result = complete(model, _ctx(), api_key=KEY, max_retries=2)
        assert elsewhere.requests == [] and len(origin.requests) == 1  # not followed, not retried
        assert origin.requests[0].headers.get(header, "").endswith(KEY)
        assert result.stop_reason == "error"
        assert result.error_message.startswith(f"{status} ")
        assert "do not follow redirects" in result.error_message and "/v1/moved?token=***" in result.error_message
        assert KEY not in result.error_message and "0123456789" not in result.error_message


@pytest.mark.parametrize("api", ["anthropic-messages", "openai-completions", "openai-responses"])
def test_an_answer_is_complete_at_its_terminal_event_even_if_the_body_stays_open(server, api):
    """After [DONE], message_stop or response.completed the answer is whole; a server (or proxy)
    that then keeps the body open must not turn it into a read-timeout error."""
    body = APIS[api][1]
    size = len(body.encode() if isinstance(body, str) else body)
    server.enqueue(Reply(body=body, stall_after=size), Reply(body=body))
    try:
        types, result = _api_run(server, api, timeout=(5, 20), max_retries=0)
    finally:
        server.release.set()
    assert result.stop_reason == "stop" and result.text == "fine" and result.error_message is None
    assert types[-1] == "done" and "text_end" in types
    types, result = _api_run(server, api)  # the held connection was not reused: a new one works
    assert result.text == "fine" and len(server.requests) == 2


def test_a_connect_read_timeout_list_is_used_as_the_pair(server):  # the option's docs write [connect, read]
    server.enqueue(Reply(body=_text_body("a")), Reply(body=_text_body("b")))
    assert complete(_model(server), _ctx(), api_key=KEY, timeout=[5, 10]).text == "a"
    from agentcore import Agent

    agent = Agent(_model(server), api_key=KEY, timeout=[5, 10], max_retries=0)
    assert agent.prompt("hi")[-1].text == "b"


def test_credentials_in_the_base_url_never_reach_the_error_text(server):
    """A server that echoes what it received (the Basic header requests builds from user:password,
    or the password) must not put them into the transcript."""
    import base64

    token = base64.b64encode(b"alice:Hunter2Secret99").decode()
    echo = f"bad credentials Basic {token} (user alice, password Hunter2Secret99)"
    server.enqueue(Reply(status=401, content_type="application/json", body=json.dumps({"error": {"message": echo}})))
    base = server.url.replace("http://", "http://alice:Hunter2Secret99@") + "/v1"
    model = Model(id="m", api="openai-completions", provider="local", base_url=base)
    result = complete(model, _ctx(), max_retries=0)
    assert server.requests[0].headers["authorization"] == f"Basic {token}"  # requests sent it
    assert result.stop_reason == "error" and result.error_message.startswith("401 bad credentials Basic ***")
    for secret in ("Hunter2Secret99", token):
        assert secret not in result.error_message and secret not in json.dumps(result.to_dict())


@pytest.mark.parametrize("api", sorted(APIS))
def test_a_200_json_error_or_html_page_is_reported_in_its_own_words(server, api):
    """Not "the connection was probably cut, retry": what the server said, and that it was no
    event stream. A JSON-labelled body that is an event stream still streams."""
    error = json.dumps({"error": {"message": "The model `foo` does not exist"}})
    server.enqueue(
        Reply(body=error, content_type="application/json"),
        Reply(body="<html><body>Proxy login required</body></html>", content_type="text/html; charset=utf-8"),
        Reply(body=APIS[api][1], content_type="application/json"),
    )
    types, result = _api_run(server, api, max_retries=0)
    assert result.stop_reason == "error" and result.error_message.startswith("200 ")
    assert "does not exist" in result.error_message and "(the server answered application/json" in result.error_message
    assert "cut" not in result.error_message
    types, result = _api_run(server, api, max_retries=0)
    assert "Proxy login required" in result.error_message and "text/html, not an event stream" in result.error_message
    types, result = _api_run(server, api, max_retries=0)
    assert result.stop_reason == "stop" and result.text == "fine"
    # plain text, or no content type at all: still what it said, never "ended without any event"
    server.enqueue(
        Reply(body="Service temporarily unavailable", content_type="text/plain"),
        Reply(body="upstream connect error", content_type=""),
        Reply(body=APIS[api][1], content_type=""),  # an event stream whoever labelled it
    )
    types, result = _api_run(server, api, max_retries=0)
    assert "Service temporarily unavailable" in result.error_message
    assert "(the server answered text/plain, not an event stream)" in result.error_message
    types, result = _api_run(server, api, max_retries=0)
    assert "upstream connect error" in result.error_message and "without a content type" in result.error_message
    types, result = _api_run(server, api, max_retries=0)
    assert result.stop_reason == "stop" and result.text == "fine"


@pytest.mark.parametrize("api", sorted(APIS))
def test_a_200_error_labelled_as_an_event_stream_is_reported_in_its_own_words(server, api):  # clear errors
    # a gateway answering a JSON error under text/event-stream was told as "stream ended without
    # any event" or "the connection was probably cut. Retry the request.": its words were lost
    error = json.dumps(
        {"error": {"message": "Invalid model name passed in model=foo", "type": "invalid_request_error"}}
    )
    server.enqueue(Reply(body=error), Reply(body="<html><body>Proxy login required</body></html>"))
    types, result = _api_run(server, api, max_retries=0)
    assert types == ["start", "error"] and "Invalid model name passed in model=foo" in result.error_message
    assert result.error_message.endswith(
        "(the server answered text/event-stream, but no event: its body is not an event stream)"
    )
    assert "cut" not in result.error_message and "ended" not in result.error_message
    types, result = _api_run(server, api, max_retries=0)
    assert "Proxy login required" in result.error_message and "no event" in result.error_message
    # an event stream that only kept the connection alive is still told as an empty stream
    server.enqueue(Reply(body=": keep-alive\n\nevent: ping\n\n"))
    types, result = _api_run(server, api, max_retries=0)
    assert result.stop_reason == "error" and "not an event stream" not in result.error_message


def test_wrong_model_and_signal_arguments_are_named(server):
    with pytest.raises(TypeError, match=r"stream\(\) takes a Model or a 'provider/id' string, not NoneType"):
        stream(None, _ctx())  # type: ignore[arg-type]
    result = complete(_model(server), _ctx(), api_key=KEY, signal="yes")
    assert result.stop_reason == "error" and server.requests == []
    assert result.error_message == "the signal option must be an AbortSignal or a threading.Event, not str"
    import threading

    server.enqueue(Reply(body=_text_body("ok")))
    assert complete(_model(server), _ctx(), api_key=KEY, signal=threading.Event()).text == "ok"


@pytest.mark.parametrize("api", sorted(APIS))
def test_a_threading_event_abort_ends_a_stalled_stream_at_once(server, api):  # providers §3 abort, §9
    """A ``threading.Event`` signal was only checked between events: with the server silent after
    its headers (or before them) the abort waited for the read timeout (600 s by default)."""
    for reply in (Reply(body=APIS[api][1], stall_after=0), Reply(body=APIS[api][1], stall_before_headers=True)):
        server.headers_sent.clear()
        server.request_received.clear()
        server.enqueue(reply)
        event = threading.Event()
        events = stream(_api_model(server, api), _ctx(), api_key=KEY, signal=event, timeout=(5, 30))
        results: list = []
        reader = threading.Thread(target=lambda s=events, r=results: r.append(s.result()), daemon=True)
        reader.start()
        (server.headers_sent if reply.stall_after == 0 else server.request_received).wait(5)
        started = time.monotonic()
        event.set()
        reader.join(5)
        assert not reader.is_alive() and time.monotonic() - started < 1.5
        assert (results[0].stop_reason, results[0].error_message) == ("aborted", "Request was aborted")
    server.release.set()


def _cut_in_first_event(body: str) -> str:
    """``body`` cut a few characters into the JSON of its first ``data:`` line (a clean end)."""
    start = body.index("data: ") + len("data: ")
    return body[: start + 12]


@pytest.mark.parametrize("api", sorted(APIS))
def test_a_stream_that_ends_in_the_middle_of_an_event_says_so(server, api):  # bad input: clear errors
    """A body that ends inside an event's JSON (a proxy or server that closes mid-answer) was
    "malformed JSON in stream event": the message now says the stream was cut, and like a dropped
    connection it is retried when nothing was streamed yet."""
    good = APIS[api][1]
    server.enqueue(Reply(body=_cut_in_first_event(good), chunk_size=5))
    types, result = _api_run(server, api, max_retries=0)
    assert result.stop_reason == "error" and types == ["start", "error"]
    assert result.error_message.startswith("The response stream ended in the middle of an event")
    assert "malformed JSON" in result.error_message  # and what was left of the event
    server.enqueue(Reply(body=_cut_in_first_event(good)), Reply(body=good))
    types, result = _api_run(server, api, max_retries=1)
    assert (result.stop_reason, result.text, len(server.requests)) == ("stop", "fine", 3)


_MISSHAPEN = {  # an event whose JSON is valid but whose parts have the wrong types
    "anthropic-messages": 'event: message_start\ndata: {"type":"message_start","message":"oops"}\n\n',
    "openai-completions": sse({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "a", "function": "f"}]}}]}),
    "openai-responses": _responses({"type": "response.completed", "response": {"usage": {"input_tokens": "many"}}}),
    "google-generative-ai": _google({"candidates": {"0": {"content": {"parts": [{"text": "x"}]}}}}),
}


@pytest.mark.parametrize("api", sorted(APIS))
def test_an_event_of_an_unexpected_shape_is_named_not_a_python_error(server, api):  # bad input: clear errors
    """Was e.g. "AttributeError: 'str' object has no attribute 'get'" or "KeyError: 0"."""
    server.enqueue(Reply(body=_MISSHAPEN[api]))
    types, result = _api_run(server, api, max_retries=0)
    assert result.stop_reason == "error" and types[-1] == "error"
    assert result.error_message.startswith("unexpected stream event from the server ("), result.error_message
    data = _MISSHAPEN[api].split("data: ", 1)[1].strip()
    assert data[:60] in result.error_message  # the offending event, as received
    assert AssistantMessage.from_dict(json.loads(json.dumps(result.to_dict()))) == result


def test_tool_arguments_that_are_json_but_no_object_are_noted(server):  # writer: nothing lost silently
    """``[1, 2]`` or ``"text"`` as a call's arguments became ``{}`` without a word (valid JSON,
    so no repair was noted): the call runs with no arguments, and the diagnostic says why."""
    call = {"index": 0, "id": "c", "function": {"name": "f", "arguments": "[1, 2]"}}
    server.enqueue(Reply(body=sse(_chunk({"tool_calls": [call]}), _chunk(finish="tool_calls"), done=True)))
    types, result = _run(server)
    assert result.stop_reason == "toolUse" and result.content[0].arguments == {}
    notes = [d for d in result.diagnostics or [] if d.type == "tool_arguments_repaired"]
    assert len(notes) == 1 and notes[0].details["toolCallId"] == "c"
    assert "a JSON array, not an object" in notes[0].error["message"]


@pytest.mark.parametrize(
    "environment, session_proxies, request_proxies",
    [
        ({}, {}, None),
        ({"HTTPS_PROXY": "http://proxy.example.com:3128"}, {}, None),
        ({"HTTPS_PROXY": "http://proxy.example.com:3128"}, {"https": "http://own.example.com:8080"}, None),
        ({"HTTPS_PROXY": "http://proxy.example.com:3128"}, {"https": None, "http": "http://h:1"}, None),
        ({"HTTPS_PROXY": "http://proxy.example.com:3128", "NO_PROXY": "api.example.com"}, {}, None),
        ({"HTTPS_PROXY": "http://proxy.example.com:3128"}, {}, {"https": "http://per-request:1"}),
    ],
)
def test_provider_sessions_merge_proxies_exactly_as_requests_does(
    environment, session_proxies, request_proxies, monkeypatch
):
    """The pooled sessions merge the environment's proxies with the session's without requests'
    runtime-protocol checks, and the settings a request is sent with are requests' own."""
    import requests

    from agentcore.providers._http_pool import _session_class

    for scheme in ("HTTPS", "HTTP", "ALL", "NO"):
        monkeypatch.delenv(f"{scheme}_PROXY", raising=False)
        monkeypatch.delenv(f"{scheme.lower()}_proxy", raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    fast, plain = _session_class()(), requests.Session()
    fast.proxies.update(session_proxies)
    plain.proxies.update(session_proxies)
    url = "https://api.example.com/v1/chat/completions"
    # as Session.request calls it: the request's proxies or {} (requests fills that dict in place)
    ours = fast.merge_environment_settings(url, dict(request_proxies or {}), None, None, None)
    theirs = requests.Session.merge_environment_settings(plain, url, dict(request_proxies or {}), None, None, None)
    assert ours == theirs
    assert type(ours["proxies"]) is type(theirs["proxies"])


# --------------------------------------------------------------------------- review: transport edge cases


def test_a_server_delay_too_long_to_sleep_waits_for_the_abort(server):  # providers §22: 0 disables the cap
    # Event.wait/time.sleep raise OverflowError past ~292 years: "retry-after: 1e300" (or a date in
    # the year 9999) with the cap disabled ended the request with a bare OverflowError
    from agentcore.providers.http import RequestAborted, open_stream

    class Watched:  # the real signal, noting when the retry sleep starts
        def __getattr__(self, name):
            return getattr(controller.signal, name)

        def wait(self, timeout=None):
            sleeping.set()
            return controller.signal.wait(timeout)

    for value in ("1e300", "Fri, 31 Dec 9999 23:59:59 GMT"):
        controller, sleeping = AbortController(), threading.Event()
        server.enqueue(Reply(status=429, headers={"retry-after": value}, body="slow down"))
        thread = _abort_when(sleeping, controller, {})
        with pytest.raises(RequestAborted):
            open_stream(server.url + "/v1", b"{}", {}, session_name="local", signal=Watched(), max_retry_delay_ms=0)
        thread.join()
    assert len(server.requests) == 2


def test_a_negative_retry_after_is_ignored_not_taken_for_at_once():  # providers §9: seconds or a date
    # "-5" was read as 0 s: the retries of a 429/503 went out at once, without the back-off
    assert retry_delay_from_headers({"retry-after": "-5"}) is None
    assert retry_delay_from_headers({"retry-after-ms": "-1", "retry-after": "2"}) == 2.0
    assert retry_delay_from_headers({"retry-after": "0"}) == 0.0  # "now" is a delay
    past = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() - 3600))
    assert retry_delay_from_headers({"retry-after": past}) == 0.0  # the time to retry has come


@pytest.mark.parametrize(
    "content_type, body, expected",
    [
        ("text/plain; charset=no-such-charset", b"bad request", "400 bad request"),  # was LookupError
        ("text/plain; charset=base64", b"bad request", "400 bad request"),  # not a text encoding
        ("text/plain", "modèle inconnu".encode(), "400 modèle inconnu"),  # was "modÃ¨le" (ISO-8859-1)
        ("text/html", "<p>modèle</p>".encode("latin-1"), "400 <p>modèle</p>"),  # not UTF-8: requests' guess
        ('text/plain; charset="ISO-8859-1"', "modèle".encode("latin-1"), "400 modèle"),
        ("application/json", b'{"error": {"message": "caf\xc3\xa9 \xff"}}', "400 café \ufffd"),
        (
            "application/json; charset=utf-8",
            b'\xef\xbb\xbf{"error": {"message": "no such model"}}',
            "400 no such model",
        ),
    ],
)
def test_an_error_body_is_read_in_its_own_charset(server, content_type, body, expected):  # providers §9
    server.enqueue(Reply(status=400, content_type=content_type, body=body))
    _, result = _run(server, max_retries=0)
    assert result.stop_reason == "error" and result.error_message == expected


def test_a_password_with_an_unencoded_slash_never_reaches_the_error_or_the_log(caplog):  # secrets
    # the URL parsers end the authority at the "/": the error quoted "'user:Xk39f' is not a valid
    # host or port" (the password's start) and the DEBUG log showed the whole URL
    caplog.set_level(logging.DEBUG, logger="agentcore.providers.http")
    for password in ("Xk39fjs8a/Jd02p", "Xk39fjs8a?Jd02p", "Xk39fjs8a#Jd02p"):
        model = Model(
            id="m", api="openai-completions", provider="local", base_url=f"http://user:{password}@127.0.0.1:1/v1"
        )
        result = complete(model, _ctx(), api_key=KEY, max_retries=0)
        message = result.error_message
        assert message.startswith("Cannot send the request to http://127.0.0.1:1/v1/chat/completions"), message
        assert "password in the URL holds an unencoded" in message
        assert "Xk39f" not in message and "Xk39f" not in caplog.text and "Jd02p" not in caplog.text


def test_an_open_stream_error_never_carries_a_key_the_server_echoes(server):  # secrets: exception messages
    from agentcore.providers.http import ProviderHTTPError, open_stream

    server.enqueue(Reply(status=401, content_type="text/plain", body=f"invalid x-api-key {KEY}"))
    server.enqueue(Reply(status=307, headers={"location": f"http://elsewhere.example/{KEY}/v1"}))
    for _ in range(2):
        with pytest.raises(ProviderHTTPError) as info:
            open_stream(server.url + "/v1", b"{}", {"x-api-key": KEY}, session_name="local", max_retries=0)
        assert KEY not in str(info.value) and "***" in str(info.value)


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_proxy_that_cannot_be_reached_is_named_not_the_server(monkeypatch, scheme):  # bad input: clear errors
    # the error said "('Unable to connect to proxy', NewConnectionError(...)) (is the server at
    # api.example up and reachable?)": the user was sent to check the wrong machine. Through a
    # tunnel (every https:// API behind HTTPS_PROXY) urllib3's pool is the API host's: the error
    # then named the API's own address as the proxy's
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with ScriptedServer() as gone:
        port = gone.url.rsplit(":", 1)[1]
    monkeypatch.setenv(f"{scheme}_proxy", f"http://puser:proxysecret99@127.0.0.1:{port}")
    model = Model(id="m", api="openai-completions", provider="proxy-test", base_url=f"{scheme}://127.0.0.1:9/v1")
    message = complete(model, _ctx(), api_key=KEY, max_retries=0).error_message
    assert message.startswith(
        f"Connection error talking to 127.0.0.1:9 (/v1/chat/completions) through the proxy at 127.0.0.1:{port}: "
    )
    assert "Connection refused" in message and "is the proxy up" in message and "is the server" not in message
    assert "proxysecret99" not in message and "Unable to connect to proxy" not in message


def test_a_proxy_refusing_the_tunnel_is_named_and_not_asked_again(monkeypatch):  # clear errors
    # a 407 to the CONNECT was retried like a lost connection (the same answer three times, seconds
    # of backoff) and told as "is the proxy up and reachable?" of the proxy that had just answered
    from _servers import RefusingProxy

    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with RefusingProxy(407) as proxy:
        monkeypatch.setenv("https_proxy", proxy.url.replace("http://", "http://puser:proxysecret99@"))
        model = Model(id="m", api="openai-completions", provider="proxy-test", base_url="https://127.0.0.1:9/v1")
        message = complete(model, _ctx(), api_key=KEY).error_message
        connects = [line.rsplit(" ", 1)[0] for line in proxy.requests]  # HTTP/1.0 or 1.1 by Python version
        assert connects == ["CONNECT 127.0.0.1:9"]
    assert message.startswith(
        f"Connection error talking to 127.0.0.1:9 (/v1/chat/completions) through the proxy at "
        f"{proxy.url[len('http://') :]}: Tunnel connection failed: 407 Proxy Authentication Required "
        "(the proxy refused to open the connection: check the user:password@ of its URL"
    )
    assert "gave up" not in message and "is the proxy up" not in message and "proxysecret99" not in message


def test_an_untrusted_certificate_is_a_tls_error_told_once(tmp_path, monkeypatch):  # clear errors
    # a self-signed certificate was retried like a lost connection (three handshakes, the same
    # refusal) and told as "is the server at ... up and reachable?" of the server that answered
    from _servers import TLSScriptedServer

    for name in (*_PROXY_VARIABLES, "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    with TLSScriptedServer(tmp_path) as server:
        model = Model(id="m", api="openai-completions", provider="tls-test", base_url=server.url + "/v1")
        result = complete(model, _ctx(), api_key=KEY)
        assert server.accepted == 1 and server.requests == []
        host = server.url[len("https://") :]
        assert result.error_message.startswith(f"TLS error talking to {host} (/v1/chat/completions): ")
        assert "CERTIFICATE_VERIFY_FAILED" in result.error_message
        assert result.error_message.endswith(
            "(the server's certificate was refused: for a private CA, or a proxy that inspects TLS, set "
            "REQUESTS_CA_BUNDLE to a file with its CA certificate)"
        )
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(server.certificate))  # the advice works
        server.enqueue(Reply(body=_text_body("trusted")))
        assert complete(model, _ctx(), api_key=KEY).text == "trusted"


@contextlib.contextmanager
def _hanging_listener():
    """The address of a listener whose accept queue is full: connect() to it hangs (what an
    unreachable or firewalled host does), all on 127.0.0.1."""
    import socket as socket_module

    listener = socket_module.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    address = listener.getsockname()
    fillers = []
    try:
        for _ in range(8):
            filler = socket_module.socket()
            fillers.append(filler)
            filler.setblocking(False)
            try:
                filler.connect(address)
            except BlockingIOError:
                pass
        yield address
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


def test_a_host_whose_first_address_times_out_is_reached_on_the_next(server, monkeypatch):  # requests' rules
    # with a signal, connections are opened by agentcore (abortable): a connect timeout on the first
    # address ended the request, where urllib3 goes on to the next (a dual-stack host whose IPv6
    # route is dead answers on IPv4)
    import socket as socket_module

    answering = ("127.0.0.1", int(server.url.rsplit(":", 1)[1]))
    resolve = socket_module.getaddrinfo
    with _hanging_listener() as hanging:

        def two_addresses(host, *args, **kwargs):  # what DNS answers for a dual-stack name
            if host != "dual.test":
                return resolve(host, *args, **kwargs)
            return [(socket_module.AF_INET, socket_module.SOCK_STREAM, 6, "", a) for a in (hanging, answering)]

        monkeypatch.setattr(socket_module, "getaddrinfo", two_addresses)
        server.enqueue(Reply(body=_text_body("reached")))
        model = Model(id="m", api="openai-completions", provider="dual", base_url=f"http://dual.test:{answering[1]}/v1")
        result = complete(model, _ctx(), api_key=KEY, signal=AbortController().signal, max_retries=0, timeout=(0.3, 10))
    assert (result.stop_reason, result.text) == ("stop", "reached"), result.error_message


@pytest.mark.parametrize("abortable", [False, True])
def test_a_connect_timeout_says_so_without_python_reprs(abortable):  # bad input: clear errors
    # was "...: (<NotingHTTPConnection(host='127.0.0.1', port=N) at 0x7f...>, 'Connection to
    # 127.0.0.1 timed out. (connect timeout=0.3)')"
    signal = AbortController().signal if abortable else None
    with _hanging_listener() as (host, port):
        model = Model(id="m", api="openai-completions", provider="local", base_url=f"http://{host}:{port}/v1")
        result = complete(model, _ctx(), api_key=KEY, signal=signal, max_retries=0, timeout=(0.3, 10))
    assert result.error_message == (
        f"Request timed out talking to 127.0.0.1:{port} (/v1/chat/completions): Connection to 127.0.0.1 timed out. "
        "(connect timeout=0.3) (gave up after 1 attempt, max_retries=0)"
    )


@contextlib.contextmanager
def _slow_resolver(monkeypatch, name: str):
    """``socket.getaddrinfo`` that blocks on ``name`` until released (a resolver whose name
    servers do not answer: seconds per server and attempt); other names resolve as before.
    Yields (entered, release) events."""
    import socket as socket_module

    resolve = socket_module.getaddrinfo
    entered, release = threading.Event(), threading.Event()

    def blocking(host, *args, **kwargs):
        if host != name:
            return resolve(host, *args, **kwargs)
        entered.set()
        release.wait(30)
        raise socket_module.gaierror(socket_module.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(socket_module, "getaddrinfo", blocking)
    try:
        yield entered, release
    finally:
        release.set()


def test_an_abort_ends_a_blocked_name_resolution_at_once(monkeypatch):  # aborts are honoured promptly
    # the host name was resolved on the sending thread before any socket existed: an abort found
    # nothing to shut down and the run waited for the resolver (here 30 s)
    with _slow_resolver(monkeypatch, "slow-dns.test") as (entered, _release):
        model = Model(id="m", api="openai-completions", provider="slowdns", base_url="http://slow-dns.test:9/v1")
        message = _aborted_once_blocked(model, entered, "the name resolution", timeout=(60, 60))
    assert (message.stop_reason, message.error_message) == ("aborted", "Request was aborted")


def _aborted_once_blocked(model: Model, blocked: threading.Event, what: str, timeout: Any) -> Any:
    """The message of a request to ``model`` aborted once ``blocked`` is set (the request is stuck
    in ``what``); fails unless the abort ends it within 5 s."""
    controller, finished, result = AbortController(), threading.Event(), {}

    def consume() -> None:
        result["message"] = complete(model, _ctx(), api_key=KEY, signal=controller.signal, timeout=timeout)
        finished.set()

    threading.Thread(target=consume, daemon=True).start()
    assert blocked.wait(10)
    started = time.monotonic()
    controller.abort()
    assert finished.wait(5), f"the abort did not end {what}"
    assert time.monotonic() - started < 5.0
    return result["message"]


def test_a_name_resolution_slower_than_the_connect_timeout_times_out(monkeypatch):  # deadlines
    with _slow_resolver(monkeypatch, "slow-dns.test") as (entered, _release):
        model = Model(id="m", api="openai-completions", provider="slowdns", base_url="http://slow-dns.test:9/v1")
        finished, result = threading.Event(), {}

        def consume():
            result["message"] = complete(
                model, _ctx(), api_key=KEY, signal=AbortController().signal, max_retries=0, timeout=(0.3, 60)
            )
            finished.set()

        threading.Thread(target=consume, daemon=True).start()
        assert entered.wait(10)
        assert finished.wait(10), "the resolution outlived the connect timeout"
    assert result["message"].stop_reason == "error"
    assert result["message"].error_message == (
        "Request timed out talking to slow-dns.test:9 (/v1/chat/completions): resolving slow-dns.test timed out. "
        "(connect timeout=0.3) (gave up after 1 attempt, max_retries=0)"
    )


@pytest.mark.parametrize("declared", ["7fffffffffffffff", "1000000"])
def test_events_in_one_huge_http_chunk_arrive_before_it_ends(declared):  # nothing lost, no Python errors
    # a chunked body was read one whole HTTP chunk at a time: a chunk declared larger than memory
    # failed with "OverflowError: byte string is too large" (or tried to allocate it), and the
    # events of a big chunk stayed unseen until its last byte came
    import socket as socket_module

    event = 'data: {"choices":[{"index":0,"delta":{"content":"early"}}]}\n\n'
    padding = ": padding\n" * 7000  # an SSE comment: more than one 64 KB read
    seen, served = threading.Event(), threading.Event()
    listener = socket_module.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def serve():
        connection, _ = listener.accept()
        with connection:
            request = b""
            while b"\r\n\r\n" not in request:
                request += connection.recv(65536)
            connection.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                + declared.encode()
                + b"\r\n"
                + (event + padding).encode()
            )
            seen.wait(10)  # the chunk goes on and on; the client must not wait for its end
        served.set()

    threading.Thread(target=serve, daemon=True).start()
    try:
        port = listener.getsockname()[1]
        model = Model(id="m", api="openai-completions", provider="onechunk", base_url=f"http://127.0.0.1:{port}/v1")
        events = stream(model, _ctx(), api_key=KEY, max_retries=0)
        types = []
        for item in events:
            types.append(item.type)
            if item.type == "text_delta":
                seen.set()
        result = events.result()
        assert served.wait(10)
    finally:
        listener.close()
    assert seen.is_set() and result.text == "early", result.error_message
    assert result.stop_reason == "error" and result.error_message.startswith("Connection lost while streaming")


_URLLIB3_1 = __import__("urllib3").__version__.startswith("1.")


@pytest.mark.parametrize(
    "reply, options, expected",
    [
        (
            Reply(reset_after=70, chunked=False),
            {},
            "Connection lost while streaming the response: Connection reset by peer",
        ),
        pytest.param(
            Reply(close_after=70, chunked=False),
            {},
            "Connection lost while streaming the response: 70 bytes read, 113 more expected",
            marks=pytest.mark.skipif(
                _URLLIB3_1,
                reason="urllib3 1.26 does not enforce Content-Length: a body cut short ends the stream "
                "mid-event, which test_a_stream_that_ends_in_the_middle_of_an_event_says_so covers",
            ),
        ),
        (Reply(stall_after=70), {"timeout": (5, 0.3)}, "Timed out while streaming the response: Read timed out."),
    ],
)
def test_a_connection_lost_mid_stream_is_told_without_python_reprs(server, reply, options, expected):
    # was 'Connection lost while streaming the response: ("Connection broken: ConnectionResetError(104,
    # \'Connection reset by peer\')", ConnectionResetError(104, ...))' and "Timed out while streaming the
    # response: _Pool(host='127.0.0.1', port=N): Read timed out."
    reply.body = 'data: {"choices":[{"index":0,"delta":{"content":"hello"}}]}\n\n' * 3
    server.enqueue(reply)
    result = complete(_model(server), _ctx(), api_key=KEY, max_retries=0, **options)
    assert (result.stop_reason, result.text, result.error_message) == ("error", "hello", expected)


def test_a_failure_whose_str_raises_still_ends_the_stream_with_an_error(server):  # nothing is lost
    # describe_error called str() on it: the second exception escaped the stream's iteration
    class Unprintable(Exception):
        def __str__(self):
            raise RuntimeError("no text")

    def on_response(status, headers):
        raise Unprintable()

    server.enqueue(Reply(body=_text_body("never")))
    events = stream(_model(server), _ctx(), api_key=KEY, on_response=on_response)
    assert [e.type for e in events] == ["error"]
    result = events.result()
    assert result.stop_reason == "error"
    assert result.error_message == "Unprintable (its message could not be read: str() raised RuntimeError)"


def test_an_integer_argument_too_long_for_python_is_null_and_noted(server):  # writer: nothing lost silently
    # the call's arguments became {} (its other arguments lost) and the note quoted Python's advice
    # to call sys.set_int_max_str_digits()
    arguments = '{"path": "a.txt", "n": ' + "7" * 5000 + "}"
    call = {"index": 0, "id": "c", "function": {"name": "f", "arguments": arguments}}
    server.enqueue(Reply(body=sse(_chunk({"tool_calls": [call]}), _chunk(finish="tool_calls"), done=True)))
    types, result = _run(server)
    assert result.stop_reason == "toolUse" and result.content[0].arguments == {"path": "a.txt", "n": None}
    notes = [d for d in result.diagnostics or [] if d.type == "tool_arguments_repaired"]
    assert [note.error["message"] for note in notes] == ["an integer of 5000 digits is too long (it became null)"]


def test_an_abort_ends_a_stalled_tls_handshake_at_once():  # aborts are honoured promptly
    # the socket was forgotten once TCP connected: a server (or a middlebox, or a proxy's CONNECT)
    # that accepts the connection and never answers the TLS hello held the aborted run for the whole
    # connect timeout
    import socket as socket_module

    listener = socket_module.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    accepted, done = threading.Event(), threading.Event()

    def accept():
        connection, _ = listener.accept()
        accepted.set()
        done.wait(30)
        connection.close()

    threading.Thread(target=accept, daemon=True).start()
    try:
        port = listener.getsockname()[1]
        model = Model(id="m", api="openai-completions", provider="tls", base_url=f"https://127.0.0.1:{port}/v1")
        message = _aborted_once_blocked(model, accepted, "the TLS handshake", timeout=(30, 30))
    finally:
        done.set()
        listener.close()
    assert (message.stop_reason, message.error_message) == ("aborted", "Request was aborted")


def test_an_abort_ends_the_wait_for_headers_through_a_proxy(monkeypatch):  # aborts are honoured promptly
    # requests' proxy managers made their own pools, with urllib3's connections: behind HTTP(S)_PROXY
    # no connect and no wait for the response headers was abortable (here: the proxy stalls 30 s)
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with ScriptedServer() as proxy:
        monkeypatch.setenv("http_proxy", proxy.url)
        proxy.enqueue(Reply(body=_text_body("never"), stall_before_headers=True))
        model = Model(id="m", api="openai-completions", provider="proxied", base_url="http://model.test/v1")
        controller, stamp = AbortController(), {}
        thread = _abort_when(proxy.request_received, controller, stamp)
        result = complete(model, _ctx(), api_key=KEY, signal=controller.signal)
        elapsed = time.perf_counter() - stamp["t"]
        thread.join()
        assert (result.stop_reason, result.error_message) == ("aborted", "Request was aborted")
        assert elapsed < 5.0, "the abort did not interrupt the wait through the proxy"
        assert proxy.requests[0].path == "/v1/chat/completions"


def test_an_on_response_hook_that_raises_closes_the_response_first(server):
    """A caller's ``on_response`` hook that raised left the streaming response open: its
    connection stayed checked out of the pool for as long as anything held the error (its
    traceback holds the response), and a stalled body's server waited on it."""
    from agentcore.providers.http import open_stream

    server.enqueue(Reply(body=_text_body("never read"), stall_after=0))

    def refuse(status, headers):
        raise RuntimeError(f"refused {status}")

    try:
        with pytest.raises(RuntimeError, match="refused 200") as caught:
            open_stream(server.url + "/v1", b"{}", {}, session_name="local", on_response=refuse)
        tb = caught.value.__traceback__
        frames = []
        while tb is not None:
            frames.append(tb.tb_frame)
            tb = tb.tb_next
        response = next(f.f_locals["response"] for f in frames if f.f_code.co_name == "open_stream")
        assert response.raw.closed
    finally:
        server.release.set()


def test_an_error_body_nested_too_deeply_to_parse_keeps_its_status(server):  # providers §9
    """A proxy's error body of thousands of nested brackets: the parser's RecursionError escaped
    the message builder, and the request failed with it instead of the HTTP status."""
    server.enqueue(Reply(status=502, body='{"error": ' + "[" * 100_000, content_type="application/json"))
    _, result = _run(server, max_retries=0)
    assert result.stop_reason == "error" and result.error_message.startswith("502 ")
    assert "RecursionError" not in result.error_message


def test_urllib3s_debug_log_of_a_request_never_shows_a_key_in_the_query(server, caplog):  # secrets: logs
    """With DEBUG logging on (``logging.basicConfig(level=logging.DEBUG)``), urllib3 logs each
    request line: ``"POST /v1/chat/completions?key=AIza... HTTP/1.1" 401``. Our own records hid the
    key; urllib3's showed it (Google's ``?key=``, Azure API Management's ``subscription-key``)."""
    caplog.set_level(logging.DEBUG)
    server.enqueue(Reply(status=401, content_type="text/plain", body="no"))
    model = Model(
        id="m", api="openai-completions", provider="query-key", base_url=server.url + "/v1?key=AIzaQUERYSECRET42"
    )
    result = complete(model, _ctx(), api_key=KEY, max_retries=0)
    assert result.stop_reason == "error"
    assert server.requests[0].query == "key=AIzaQUERYSECRET42"  # the key was sent
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("urllib3")]
    assert any('"POST /v1/chat/completions?key=*** HTTP/1.1" 401' in line for line in lines), lines
    assert "AIzaQUERYSECRET42" not in caplog.text


def test_a_base_url_without_its_scheme_never_shows_its_password(caplog):  # secrets
    """``me:password@proxy:8080/v1`` (its ``http://`` forgotten) is read by URL parsers as a
    scheme ``me`` and a path, so no password was found to hide: the error quoted it whole."""
    caplog.set_level(logging.DEBUG)
    model = Model(id="m", api="openai-completions", provider="local", base_url="me:pw-SECRET-1@127.0.0.1:1/v1")
    result = complete(model, _ctx(), api_key=KEY, max_retries=0)
    assert result.stop_reason == "error" and "127.0.0.1:1/v1/chat/completions" in result.error_message
    assert "pw-SECRET-1" not in result.error_message and "pw-SECRET-1" not in caplog.text


def test_a_provider_name_per_tenant_keeps_a_bounded_number_of_pooled_sessions(server):  # process-wide state
    """Each provider name got its own pooled session, kept for ever: a server naming a provider per
    tenant kept a session, a pool and an idle socket for every tenant it ever served. The least
    recently used are closed beyond a cap; the ones in use stay."""
    import os

    from agentcore.providers import _http_pool

    def fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    cap = getattr(_http_pool, "_MAX_SESSIONS", 64)
    hot = _model(server, provider="tenant-hot")
    before = fds()
    for i in range(cap + 40):
        server.enqueue(Reply(body=_text_body("ok")))
        tenant = _model(server, provider=f"tenant-{i}")
        assert complete(tenant, _ctx(), api_key=KEY).text == "ok"
        server.enqueue(Reply(body=_text_body("ok")))
        assert complete(hot, _ctx(), api_key=KEY).text == "ok"  # used all along: never evicted
    names = list(_http_pool._sessions)
    assert len(names) <= cap and "tenant-hot" in names and "tenant-0" not in names
    assert fds() - before <= 2 * cap  # not one idle socket per tenant ever seen

"""Signing and where requests go: SigV4 for fake static credentials checked by recomputing the
signature with botocore, session tokens, the bearer API key, regions and endpoints."""

from __future__ import annotations

import calendar
import json
import logging
import re
import time
from typing import Any, Dict

import pytest
from agentcore_bedrock import BedrockProvider
from agentcore_bedrock.auth import endpoint_url, resolve_region, signature_parts
from bedrock_helpers import ACCESS_KEY, SECRET_KEY, Received, Reply, Server, local_model, text_stream
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from agentcore.types import AgentContext, Model, TextContent, UserMessage

CONTEXT = AgentContext(messages=[UserMessage("hi")])


def _send(server: Server, model: Any = None, **options: Any) -> Received:
    server.enqueue(Reply(body=text_stream()))
    message = BedrockProvider().stream(model or local_model(server), CONTEXT, **options).result()
    assert message.stop_reason == "stop", message.error_message
    return server.requests[-1]


def _expected_signature(request: Received, url: str, region: str, token: Any = None) -> str:
    """Recompute the SigV4 signature of a received request with botocore's own signer."""
    scope, signed_names, _ = signature_parts(request.headers["Authorization"])
    headers = {name: value for name, value in request.headers.items() if name.lower() in signed_names}
    aws_request = AWSRequest(method=request.method, url=url, data=request.body, headers=headers)
    aws_request.context["timestamp"] = request.headers["X-Amz-Date"]
    signer = SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY, token), "bedrock", region)
    canonical = signer.canonical_request(aws_request)
    return signer.signature(signer.string_to_sign(aws_request, canonical), aws_request)


def test_sigv4_signature_verifies(server: Server, aws_env: Dict[str, str]) -> None:
    request = _send(server)
    authorization = request.headers["Authorization"]
    scope, signed, signature = signature_parts(authorization)
    assert authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE0000000000/")
    assert scope.endswith("/us-east-1/bedrock/aws4_request")
    assert {"host", "x-amz-date", "content-type"} <= set(signed)
    url = server.url + request.path
    assert signature == _expected_signature(request, url, "us-east-1")
    assert SECRET_KEY not in str(request.headers)
    assert request.headers["Content-Type"] == "application/json"


def test_session_token_is_sent_and_signed(
    server: Server, aws_env: Dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SESSION_TOKEN", "FwoGZXIvYXdzEXAMPLETOKEN")
    monkeypatch.setenv("AWS_REGION", "eu-central-1")
    request = _send(server)
    assert request.headers["X-Amz-Security-Token"] == "FwoGZXIvYXdzEXAMPLETOKEN"
    _, signed, signature = signature_parts(request.headers["Authorization"])
    assert "x-amz-security-token" in signed
    assert signature == _expected_signature(
        request, server.url + request.path, "eu-central-1", "FwoGZXIvYXdzEXAMPLETOKEN"
    )


def test_model_and_option_headers_are_signed_too(server: Server, aws_env: Dict[str, str]) -> None:
    model = local_model(server, headers={"X-Team": "core"})
    request = _send(server, model, headers={"X-Trace": "t1"})
    _, signed, signature = signature_parts(request.headers["Authorization"])
    assert {"x-team", "x-trace"} <= set(signed)
    assert signature == _expected_signature(request, server.url + request.path, "us-east-1")


def test_bearer_api_key_from_the_environment(
    server: Server, aws_env: Dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "bedrock-api-key-123456")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    request = _send(server)
    assert request.headers["Authorization"] == "Bearer bedrock-api-key-123456"
    assert "X-Amz-Date" not in request.headers
    # the core's "<authenticated>" marker is not a key: SigV4 is used
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    request = _send(server, api_key="<authenticated>")
    assert request.headers["Authorization"].startswith("AWS4-HMAC-SHA256 ")


def test_a_bearer_key_is_sent_without_surrounding_whitespace_and_checked(
    server: Server, aws_env: Dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # a key read from a file keeps its newline: sent as is, requests refused it and echoed it
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "bedrock-api-key-123456\n")
    assert _send(server).headers["Authorization"] == "Bearer bedrock-api-key-123456"
    assert _send(server, api_key=" other-key-123456\r\n").headers["Authorization"] == "Bearer other-key-123456"
    sent = len(server.requests)
    for options, named in (({"api_key": "bad-key\n123456"}, "api_key"), ({"api_key": 1234567890}, "api_key")):
        message = BedrockProvider().stream(local_model(server), CONTEXT, max_retries=0, **options).result()
        assert message.stop_reason == "error" and named in (message.error_message or "")
        assert "123456" not in (message.error_message or "") and "1234567890" not in (message.error_message or "")
    assert len(server.requests) == sent


def test_skip_auth_signs_with_dummy_keys(
    server: Server, aws_env: Dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_BEDROCK_SKIP_AUTH", "1")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    request = _send(server)
    assert request.headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=dummy-access-key/")


def test_profile_from_a_config_file(
    server: Server, aws_env: Dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"):
        monkeypatch.delenv(name)
    credentials = tmp_path / "credentials"
    credentials.write_text(f"[work]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n")
    config = tmp_path / "config"
    config.write_text("[profile work]\nregion = ap-southeast-2\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    request = _send(server, profile="work")
    scope, _, signature = signature_parts(request.headers["Authorization"])
    assert "/ap-southeast-2/bedrock/" in scope
    assert signature == _expected_signature(request, server.url + request.path, "ap-southeast-2")


def test_region_order_and_endpoints(monkeypatch: pytest.MonkeyPatch, aws_env: Dict[str, str]) -> None:
    catalog = Model(
        id="eu.anthropic.claude-sonnet-4-6",
        api="bedrock-converse-stream",
        provider="amazon-bedrock",
        base_url="https://bedrock-runtime.eu-central-1.amazonaws.com",
    )
    monkeypatch.delenv("AWS_REGION")
    assert resolve_region(catalog, {}) == "eu-central-1"  # the model's own endpoint
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    assert resolve_region(catalog, {}) == "eu-west-1"
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    assert resolve_region(catalog, {}) == "eu-west-3"
    assert resolve_region(catalog, {"region": "us-west-2"}) == "us-west-2"
    # a standard endpoint follows the region; a custom one (proxy, VPC endpoint) is kept
    assert endpoint_url(catalog, "us-west-2", {}) == "https://bedrock-runtime.us-west-2.amazonaws.com"
    assert endpoint_url(catalog, "cn-north-1", {}) == "https://bedrock-runtime.cn-north-1.amazonaws.com.cn"
    proxy = Model(
        id="m", api="bedrock-converse-stream", provider="amazon-bedrock", base_url="https://llm.corp/bedrock/"
    )
    assert endpoint_url(proxy, "us-west-2", {}) == "https://llm.corp/bedrock"
    assert endpoint_url(proxy, "us-west-2", {"endpoint_url": "http://127.0.0.1:9"}) == "http://127.0.0.1:9"


def test_arn_model_ids_are_percent_encoded(server: Server, aws_env: Dict[str, str]) -> None:
    arn = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123"
    request = _send(server, local_model(server, arn))
    assert request.path == (
        "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Aapplication-inference-profile%2Fabc123/converse-stream"
    )
    _, _, signature = signature_parts(request.headers["Authorization"])
    assert signature == _expected_signature(request, server.url + request.path, "us-east-1")


def test_reprs_hold_no_secrets(aws_env: Dict[str, str]) -> None:
    from agentcore_bedrock.auth import sign_request

    signed = sign_request(
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/x/converse-stream",
        {},
        b"{}",
        "us-east-1",
        {"api_key": "secret-bearer-token-1"},
    )
    assert "secret-bearer-token-1" not in repr(signed)
    assert repr(BedrockProvider()) == "<BedrockProvider api='bedrock-converse-stream'>"


def test_a_fips_endpoint_stays_fips(monkeypatch: pytest.MonkeyPatch, aws_env: Dict[str, str]) -> None:
    fips = Model(
        id="amazon.nova-micro-v1:0",
        api="bedrock-converse-stream",
        provider="amazon-bedrock",
        base_url="https://bedrock-runtime-fips.us-east-1.amazonaws.com",
    )
    monkeypatch.delenv("AWS_REGION")
    assert resolve_region(fips, {}) == "us-east-1"
    assert endpoint_url(fips, "us-east-1", {}) == "https://bedrock-runtime-fips.us-east-1.amazonaws.com"
    # the endpoint follows the region, and stays a FIPS one
    assert endpoint_url(fips, "us-west-2", {}) == "https://bedrock-runtime-fips.us-west-2.amazonaws.com"


TOKEN = "IQoJb3JpZ2luX2VjEXAMPLESESSIONTOKEN0123456789abcdef"


def _echo_authorization(request: Received) -> bytes:
    """A 403 body like a proxy's that repeats the Authorization header and the signature alone."""
    authorization = request.headers["Authorization"]
    _, _, signature = signature_parts(authorization)
    text = f"The request signature we calculated does not match. Got header: {authorization}; got {signature}"
    return json.dumps({"message": text}).encode()


def test_an_echoed_signature_never_appears_in_errors(
    server: Server, aws_env: Dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SESSION_TOKEN", TOKEN)
    server.enqueue(Reply(403, content_type="application/json", echo=_echo_authorization))
    message = BedrockProvider().stream(local_model(server), CONTEXT).result()
    _, _, signature = signature_parts(server.requests[0].headers["Authorization"])
    assert message.error_message.startswith("403 The request signature we calculated does not match.")
    assert signature not in message.error_message and "Signature=" not in message.error_message
    assert message.error_message.endswith("Got header: ***; got ***")


def test_debug_logs_hold_no_signing_secrets(
    server: Server, aws_env: Dict[str, str], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # at DEBUG botocore.auth logs the canonical request (with x-amz-security-token) and the signature
    monkeypatch.setenv("AWS_SESSION_TOKEN", TOKEN)
    auth_logger = logging.getLogger("botocore.auth")
    before = list(auth_logger.filters)
    caplog.set_level(logging.DEBUG)
    requests = [_send(server), _send(server)]
    signatures = [signature_parts(r.headers["Authorization"])[2] for r in requests]
    assert "CanonicalRequest" in caplog.text and "x-amz-security-token:***" in caplog.text  # the steps stay
    for secret in [TOKEN, SECRET_KEY, *signatures]:
        assert secret not in caplog.text
    assert auth_logger.filters == before  # the redacting filter lasts one signature, never accumulates


def test_every_http_attempt_is_signed_anew(
    server: Server, aws_env: Dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SigV4 signature carries its time (X-Amz-Date) and AWS refuses one older than 5 minutes,
    which a retry after long retry-after waits or a stalled attempt (the 600 s read timeout)
    would send if the first attempt's headers were resent: each HTTP attempt is signed again,
    after the previous answer, and the secrets of every signature are redacted."""
    import agentcore_bedrock.provider as provider_module

    steps: list = []
    real_sign = provider_module.sign_request

    def sign(*args: Any, **kwargs: Any) -> Any:
        signed = real_sign(*args, **kwargs)
        steps.append(("sign", signed.headers["Authorization"]))
        return signed

    monkeypatch.setattr(provider_module, "sign_request", sign)
    busy = Reply(503, b'{"message": "busy"}', "application/json", headers={"retry-after": "0"})
    server.enqueue(busy, busy, Reply(403, content_type="application/json", echo=_echo_authorization))
    stream = BedrockProvider().stream(
        local_model(server), CONTEXT, max_retries=3, on_response=lambda status, _: steps.append(("answer", status))
    )
    message = stream.result()
    assert [step[0] for step in steps] == ["sign", "answer"] * 3
    assert [step[1] for step in steps if step[0] == "answer"] == [503, 503, 403]
    sent = [step[1] for step in steps if step[0] == "sign"]
    assert [r.headers["Authorization"] for r in server.requests] == sent  # each request its own signing
    for request in server.requests:
        assert signature_parts(request.headers["Authorization"])[2] == _expected_signature(
            request, server.url + request.path, "us-east-1"
        )
    assert message.error_message.startswith("403 The request signature we calculated does not match.")
    assert message.error_message.endswith("Got header: ***; got ***")  # the last signature, redacted too


@pytest.mark.parametrize(
    "options, env, named",
    [
        ({"region": "eu west 1"}, {}, "AWS region 'eu west 1' (from region=)"),
        ({"region": "eu-west-1:443"}, {}, "AWS region 'eu-west-1:443' (from region=)"),
        ({}, {"AWS_REGION": "https://eu-west-1"}, "AWS region 'https://eu-west-1' (from AWS_REGION)"),
        ({}, {"AWS_DEFAULT_REGION": "eu-west-1/"}, "AWS region 'eu-west-1/' (from AWS_DEFAULT_REGION)"),
    ],
)
def test_a_region_that_is_not_a_region_name_is_named(
    server: Server, aws_env: Dict[str, str], monkeypatch: pytest.MonkeyPatch, options: Any, env: Any, named: str
) -> None:
    # they became host names: a URL parse error without the region ("Port could not be cast to
    # integer value as '443.amazonaws.com'") or a DNS failure of "bedrock-runtime.https"
    monkeypatch.delenv("AWS_REGION")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    catalog = Model(
        id="m",
        api="bedrock-converse-stream",
        provider="amazon-bedrock",
        base_url="https://bedrock-runtime.us-east-1.amazonaws.com",
    )
    message = BedrockProvider().stream(catalog, CONTEXT, max_retries=0, **options).result()
    assert message.stop_reason == "error"
    assert message.error_message == f"{named} is not a region name: use one such as us-east-1 or eu-west-1"


@pytest.mark.parametrize(
    "endpoint, problem",
    [
        ("bedrock.example.com", "it needs http:// or https://"),
        ("ftp://proxy.example", "it needs http:// or https://"),
        ("http://", "it names no host"),
        ("http://user:proxy-password-123@:8080", "it names no host"),
        ("http://proxy.example:port", "Port could not be cast to integer value as 'port'"),
    ],
)
def test_an_endpoint_that_is_not_an_http_url_is_named(
    server: Server, aws_env: Dict[str, str], endpoint: str, problem: str
) -> None:
    # SigV4 signing failed inside botocore: "AttributeError: 'NoneType' object has no attribute 'split'"
    message = BedrockProvider().stream(local_model(server), CONTEXT, endpoint_url=endpoint).result()
    shown = endpoint.replace("proxy-password-123", "***")
    assert message.error_message == (
        f"the Amazon Bedrock endpoint {shown!r} (from endpoint_url=) is not usable: {problem}"
    )
    assert server.requests == []
    model = local_model(server, base_url=endpoint)
    message = BedrockProvider().stream(model, CONTEXT).result()
    assert f"{shown!r} (from the base_url of model 'us.amazon.nova-micro-v1:0')" in message.error_message


def test_an_endpoint_with_surrounding_whitespace_is_used(server: Server, aws_env: Dict[str, str]) -> None:
    request = _send(server, endpoint_url=f"  {server.url}/\n")  # a value read from a file
    assert request.path == "/model/us.amazon.nova-micro-v1%3A0/converse-stream"


def _amz_time(request: Received) -> float:
    return calendar.timegm(time.strptime(request.headers["X-Amz-Date"], "%Y%m%dT%H%M%SZ"))


@pytest.mark.parametrize("skew", [3600.0, -3600.0], ids=["server ahead: expired", "server behind: not yet current"])
def test_a_skewed_clock_is_corrected_once_with_the_server_date(
    server: Server, aws_env: Dict[str, str], skew: float
) -> None:
    """AWS refuses a signature more than 5 minutes off its clock (403 InvalidSignatureException
    "Signature expired" / "Signature not yet current"): the request is signed again once with
    the clock of the answer's Date header, as botocore does, and succeeds; a diagnostic says so."""
    server.clock_offset = skew
    server.enqueue(Reply(body=text_stream("on time")))
    message = BedrockProvider().stream(local_model(server), CONTEXT, max_retries=0).result()
    assert (message.stop_reason, message.error_message) == ("stop", None)
    assert message.content == [TextContent("on time")]
    first, second = server.requests
    assert abs(_amz_time(first) - time.time()) < 120  # this machine's clock
    assert abs(_amz_time(second) - (time.time() + skew)) < 120  # the server's
    assert second.headers["Authorization"] != first.headers["Authorization"]
    scope = signature_parts(second.headers["Authorization"])[0]
    assert scope.split("/")[1] == second.headers["X-Amz-Date"][:8]  # the credential scope moved too
    url = server.url + second.path
    assert signature_parts(second.headers["Authorization"])[2] == _expected_signature(second, url, "us-east-1")
    (note,) = message.diagnostics or []
    assert note.type == "clock_skew" and abs(note.details["offsetSeconds"] - skew) < 120
    assert note.error["message"].startswith("403 InvalidSignatureException: Signature ")


def test_a_skew_read_from_the_message_when_there_is_no_date_header(server: Server, aws_env: Dict[str, str]) -> None:
    server.clock_offset, server.send_date = 3600.0, False
    server.enqueue(Reply(body=text_stream("on time")))
    message = BedrockProvider().stream(local_model(server), CONTEXT).result()
    assert (message.stop_reason, message.content) == ("stop", [TextContent("on time")])
    assert len(server.requests) == 2 and abs(_amz_time(server.requests[1]) - (time.time() + 3600)) < 120


def test_a_skew_refused_again_is_signed_once_more_only_and_named(server: Server, aws_env: Dict[str, str]) -> None:
    # the Date header lies (says this machine's time): the corrected signature is refused too
    server.clock_offset, server.date_offset = 3600.0, 0.0
    server.enqueue(Reply(body=text_stream()))
    message = BedrockProvider().stream(local_model(server), CONTEXT, max_retries=5).result()
    assert message.stop_reason == "error" and len(server.requests) == 2
    assert message.error_message.startswith("403 InvalidSignatureException: Signature expired: ")
    assert re.search(
        r" \(this machine's clock is off: the request was signed again with the server's clock, "
        r"[-+][01] s from this machine's, and still refused; correct the system clock\)$",
        message.error_message,
    )


def test_other_403s_are_not_signed_again(server: Server, aws_env: Dict[str, str]) -> None:
    server.enqueue(
        Reply(
            403,
            b'{"message": "The request signature we calculated does not match the signature you provided."}',
            "application/json",
            headers={"x-amzn-ErrorType": "InvalidSignatureException"},
        )
    )
    message = BedrockProvider().stream(local_model(server), CONTEXT).result()
    assert message.error_message == (
        "403 InvalidSignatureException: The request signature we calculated does not match the signature you provided."
    )
    assert len(server.requests) == 1
    assert [d.type for d in message.diagnostics or []] == ["provider_error"]


def test_a_refused_time_without_the_server_time_names_the_clock(server: Server, aws_env: Dict[str, str]) -> None:
    server.send_date = False  # and the message names no time: nothing to correct with
    body = b'{"message": "Signature expired"}'
    server.enqueue(Reply(403, body, "application/json", headers={"x-amzn-ErrorType": "InvalidSignatureException"}))
    message = BedrockProvider().stream(local_model(server), CONTEXT).result()
    assert message.error_message == (
        "403 InvalidSignatureException: Signature expired "
        "(this machine's clock is more than 5 minutes off AWS's: correct the system clock)"
    )
    assert len(server.requests) == 1


def _expired_echoing_the_signature(request: Received) -> bytes:
    signature = signature_parts(request.headers["Authorization"])[2]
    now = request.headers["X-Amz-Date"]
    return json.dumps({"message": f"Signature expired: signature {signature} ({now} - 5 min.)"}).encode()


def test_the_clock_skew_note_holds_no_signature(server: Server, aws_env: Dict[str, str]) -> None:
    server.send_date = False
    server.enqueue(
        Reply(403, content_type="application/json", echo=_expired_echoing_the_signature),
        Reply(body=text_stream("on time")),
    )
    message = BedrockProvider().stream(local_model(server), CONTEXT).result()
    assert message.stop_reason == "stop" and len(server.requests) == 2
    signature = signature_parts(server.requests[0].headers["Authorization"])[2]
    (note,) = message.diagnostics or []
    assert note.type == "clock_skew" and note.error["message"].startswith("403 Signature expired: signature *** (")
    assert signature not in str(message.to_dict())

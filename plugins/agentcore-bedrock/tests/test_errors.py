"""Failures end the stream with one clear error event: corrupt frames, in-stream exceptions (and
their retries), AWS HTTP errors, bad stop reasons, missing configuration, aborts. Secrets never
appear in an error message."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, List, Tuple

import pytest
from agentcore_bedrock import BedrockProvider
from bedrock_helpers import Reply, Server, event, exception, local_model, text_stream

from agentcore.signals import AbortController
from agentcore.types import AgentContext, AssistantMessage, TextContent, UserMessage

CONTEXT = AgentContext(messages=[UserMessage("hi")])


def _run(model: Any, **options: Any) -> Tuple[AssistantMessage, List[Any]]:
    stream = BedrockProvider().stream(model, CONTEXT, **options)
    events = list(stream)
    return stream.result(), events


def _kinds(events: List[Any]) -> List[str]:
    return [e.type for e in events]


def test_corrupt_frame_mid_stream_keeps_the_partial_text(server: Server, aws_env: dict) -> None:
    good = event("messageStart", {"role": "assistant"}) + event(
        "contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hel"}}
    )
    bad = bytearray(event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "lo"}}))
    bad[-5] ^= 0x40
    server.enqueue(Reply(body=good + bytes(bad) + text_stream(), chunk_size=5))
    message, events = _run(local_model(server))
    assert message.stop_reason == "error"
    assert (
        message.error_message
        == f"event-stream message CRC mismatch in the frame at byte {len(good)} (the frame is corrupt)"
    )
    assert message.content == [TextContent("Hel")]
    assert _kinds(events) == ["start", "text_start", "text_delta", "error"]  # the open block is not closed


def _good_then_corrupt() -> Tuple[bytes, bytes]:
    good = event("messageStart", {"role": "assistant"}) + event(
        "contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hello, here is the partial answer"}}
    )
    bad = bytearray(event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": " more"}}))
    bad[-1] ^= 0xFF  # the message CRC
    return good, bytes(bad)


@pytest.mark.parametrize("then", ["end", "more frames", "silence"])
def test_a_corrupt_frame_in_the_same_read_as_good_ones_keeps_them(server: Server, aws_env: dict, then: str) -> None:
    """Good frames and a corrupt one arrive in one HTTP chunk (one read): the good ones are handled
    before the error is reported, as when they arrive in separate reads, and at once (the next
    read is not awaited: "silence" would hit the 2 s read timeout instead)."""
    good, bad = _good_then_corrupt()
    if then == "end":
        server.enqueue(Reply(body=good + bad))
    elif then == "more frames":
        server.enqueue(Reply(body=good + bad + text_stream()))
    else:
        server.enqueue(Reply(body=good + bad, stall_after=len(good + bad)))
    message, events = _run(local_model(server), timeout=(5, 2))
    assert (message.stop_reason, message.error_message) == (
        "error",
        f"event-stream message CRC mismatch in the frame at byte {len(good)} (the frame is corrupt)",
    )
    assert message.content == [TextContent("Hello, here is the partial answer")]
    assert _kinds(events) == ["start", "text_start", "text_delta", "error"]
    assert len(server.requests) == 1


def _run_releasing(server: Server, model: Any, **options: Any) -> Tuple[AssistantMessage, List[Any]]:
    """:func:`_run`, setting ``server.release`` once a text delta arrived (its frames were read)."""
    stream = BedrockProvider().stream(model, CONTEXT, **options)
    events = []
    for item in stream:
        events.append(item)
        if item.type == "text_delta":
            server.release.set()
    server.release.set()
    return stream.result(), events


def _answer_then_metadata(stop: str = "max_tokens") -> Tuple[bytes, bytes]:
    """A finished answer up to its ``messageStop``, and the trailing ``metadata`` frame."""
    answer = b"".join(
        [
            event("messageStart", {"role": "assistant"}),
            event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "The whole answer"}}),
            event("contentBlockStop", {"contentBlockIndex": 0}),
            event("messageStop", {"stopReason": stop}),
        ]
    )
    return answer, event("metadata", {"usage": {"inputTokens": 7, "outputTokens": 3, "totalTokens": 10}})


@pytest.mark.parametrize("how", ["truncated", "reset"])
def test_a_cut_before_message_stop_is_an_error(server: Server, aws_env: dict, how: str) -> None:
    answer, metadata = _answer_then_metadata()
    cut = answer[:-7]  # inside the messageStop frame: the answer is not known to be complete
    server.enqueue(Reply(body=cut) if how == "truncated" else Reply(body=cut, reset=True, chunk_size=len(cut) - 20))
    message, events = _run_releasing(server, local_model(server))
    assert message.stop_reason == "error" and message.content == [TextContent("The whole answer")]
    start = "event stream ended inside a frame" if how == "truncated" else "Connection lost while streaming"
    assert message.error_message.startswith(start)
    assert _kinds(events)[-1] == "error" and len(server.requests) == 1


@pytest.mark.parametrize(
    "how", ["truncated metadata", "reset before metadata", "reset inside metadata", "silence before metadata"]
)
def test_a_cut_after_message_stop_keeps_the_finished_answer(server: Server, aws_env: dict, how: str) -> None:
    """The connection lost after ``messageStop``, before or inside the trailing ``metadata`` frame
    (usage): the answer is complete, so the turn ends with the stop reason ``messageStop`` gave,
    usage unknown (0) and a diagnostic saying what was cut; it is not failed, nor retried."""
    answer, metadata = _answer_then_metadata()
    replies = {
        "truncated metadata": Reply(body=answer + metadata[:-7]),
        "reset before metadata": Reply(body=answer, reset=True),
        "reset inside metadata": Reply(body=answer + metadata[:20], chunk_size=len(answer), reset=True),
        "silence before metadata": Reply(body=answer + metadata, chunk_size=len(answer), stall_after=len(answer)),
    }
    server.enqueue(replies[how])
    message, events = _run_releasing(server, local_model(server), timeout=(5, 0.3))
    assert (message.stop_reason, message.error_message) == ("length", None)
    assert message.content == [TextContent("The whole answer")]
    assert (message.usage.input, message.usage.output, message.usage.total_tokens) == (0, 0, 0)
    assert _kinds(events) == ["start", "text_start", "text_delta", "text_end", "done"]
    (note,) = message.diagnostics or []
    assert note.type == "stream_recovery" and note.details["usageReceived"] is False
    assert "cut after messageStop, before its metadata frame arrived" in note.details["reason"]
    assert len(server.requests) == 1


def test_a_cut_after_the_metadata_frame_keeps_the_usage(server: Server, aws_env: dict) -> None:
    answer, metadata = _answer_then_metadata("end_turn")
    server.enqueue(Reply(body=answer + metadata + event("metadata", {})[:9]))  # then a cut inside a frame
    message, events = _run(local_model(server))
    assert (message.stop_reason, message.content) == ("stop", [TextContent("The whole answer")])
    assert (message.usage.input, message.usage.output, message.usage.total_tokens) == (7, 3, 10)
    (note,) = message.diagnostics or []
    assert note.type == "stream_recovery" and note.details["usageReceived"] is True
    assert _kinds(events)[-1] == "done" and len(server.requests) == 1


def test_in_stream_validation_exception_is_not_retried(server: Server, aws_env: dict) -> None:
    server.enqueue(Reply(body=exception("validationException", "Input is too long for requested model.")))
    message, events = _run(local_model(server))
    assert (message.stop_reason, message.error_message) == (
        "error",
        "Validation error: Input is too long for requested model.",
    )
    assert _kinds(events) == ["error"] and len(server.requests) == 1
    from agentcore.providers import is_context_overflow

    assert is_context_overflow(message)  # the core's Bedrock overflow pattern still matches


@pytest.mark.parametrize(
    "name, prefix",
    [
        ("throttlingException", "Throttling error"),
        ("serviceUnavailableException", "Service unavailable"),
        ("internalServerException", "Internal server error"),
    ],
)
def test_retryable_exception_before_content_is_retried(server: Server, aws_env: dict, name: str, prefix: str) -> None:
    server.enqueue(Reply(body=exception(name, "slow down")), Reply(body=text_stream("after retry")))
    message, events = _run(local_model(server))
    assert message.stop_reason == "stop" and message.content == [TextContent("after retry")]
    assert _kinds(events) == ["start", "text_start", "text_delta", "text_end", "done"]
    assert len(server.requests) == 2
    # a fresh signature for the new attempt, same body
    assert server.requests[0].body == server.requests[1].body

    (retry,) = message.diagnostics  # issue 17: the recovered failure is noted on the message
    assert (retry.type, retry.details) == ("provider_retry", {"attempt": 1, "errorCode": name})
    assert retry.error == {"name": name, "message": f"{prefix}: slow down"}

    server.enqueue(Reply(body=exception(name, "slow down")))
    message, _ = _run(local_model(server), max_retries=0)
    # the message says how many attempts were made (issue 17: one retry budget for all failures)
    gave_up = f"{prefix}: slow down (gave up after 1 attempt, max_retries=0)"
    assert (message.stop_reason, message.error_message) == ("error", gave_up)
    (failure,) = message.diagnostics
    assert failure.type == "provider_error" and failure.error["message"] == gave_up
    assert failure.details == {"phase": "before_message_stream_start", "errorCode": name}


def test_http_and_in_stream_retries_share_one_budget(server: Server, aws_env: dict) -> None:  # issue 17
    busy = Reply(status=503, content_type="application/json", body=b'{"message": "busy"}', headers={"retry-after": "0"})
    server.enqueue(busy, Reply(body=exception("throttlingException", "slow down")), Reply(body=text_stream()))
    message, _ = _run(local_model(server), max_retries=1)
    assert message.error_message == "Throttling error: slow down (gave up after 2 attempts, max_retries=1)"
    assert len(server.requests) == 2  # max_retries=1: two attempts in all, not one per kind of failure


def test_retry_after_message_start_pushes_start_once(server: Server, aws_env: dict) -> None:
    server.enqueue(
        Reply(body=event("messageStart", {"role": "assistant"}) + exception("throttlingException", "x")),
        Reply(body=text_stream("ok")),
    )
    message, events = _run(local_model(server))
    assert message.content == [TextContent("ok")] and len(server.requests) == 2
    assert _kinds(events) == ["start", "text_start", "text_delta", "text_end", "done"]


def test_throttling_after_content_is_not_retried(server: Server, aws_env: dict) -> None:
    body = (
        event("messageStart", {"role": "assistant"})
        + event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "par"}})
        + exception("throttlingException", "Too many tokens, please wait before trying again.")
    )
    server.enqueue(Reply(body=body), Reply(body=text_stream()))
    message, _ = _run(local_model(server))
    assert message.error_message == "Throttling error: Too many tokens, please wait before trying again."
    assert message.content == [TextContent("par")] and len(server.requests) == 1


def test_http_error_with_aws_json_body(server: Server, aws_env: dict) -> None:
    server.enqueue(
        Reply(
            status=400,
            content_type="application/json",
            headers={"x-amzn-ErrorType": "ValidationException:http://internal.amazon.com/coral/"},
            body=json.dumps({"message": "The provided model identifier is invalid."}).encode(),
        )
    )
    message, events = _run(local_model(server))
    assert message.error_message == "400 ValidationException: The provided model identifier is invalid."
    assert _kinds(events) == ["error"] and len(server.requests) == 1
    (failure,) = message.diagnostics  # issue 17
    assert failure.details == {"phase": "before_message_stream_start", "status": 400} and failure.error["code"] == 400


def test_http_5xx_and_429_are_retried(server: Server, aws_env: dict) -> None:
    server.enqueue(
        Reply(
            status=503,
            content_type="application/json",
            headers={"retry-after-ms": "0"},
            body=b'{"message":"Bedrock is unable to process your request."}',
        ),
        Reply(
            status=429,
            content_type="application/json",
            headers={"retry-after-ms": "0"},
            body=b'{"message":"Too many requests"}',
        ),
        Reply(body=text_stream("ok")),
    )
    message, _ = _run(local_model(server))
    assert message.content == [TextContent("ok")] and len(server.requests) == 3
    server.enqueue(
        Reply(
            status=503,
            content_type="application/json",
            headers={"retry-after-ms": "0"},
            body=b'{"message":"Bedrock is unable to process your request."}',
        )
    )
    message, _ = _run(local_model(server), max_retries=0)
    assert message.error_message == (
        "503 Bedrock is unable to process your request. (gave up after 1 attempt, max_retries=0)"
    )


@pytest.mark.parametrize(
    "stop, text",
    [
        (
            "guardrail_intervened",
            "Bedrock stopped the response: a guardrail intervened (stopReason guardrail_intervened)",
        ),
        ("content_filtered", "Bedrock stopped the response: the content was filtered (stopReason content_filtered)"),
        (
            "malformed_tool_use",
            "Bedrock stopped the response: the model's tool call was malformed (stopReason malformed_tool_use)",
        ),
        ("surprise", "Bedrock stopped with an unknown stop reason: 'surprise'"),
    ],
)
def test_error_stop_reasons_are_clear(server: Server, aws_env: dict, stop: str, text: str) -> None:
    server.enqueue(Reply(body=text_stream("partial", stop=stop)))
    message, _ = _run(local_model(server))
    assert (message.stop_reason, message.error_message) == ("error", text)
    assert message.content == [TextContent("partial")]


@pytest.mark.parametrize(
    "stop, reason",
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("tool_use", "toolUse"),
    ],
)
def test_stop_reasons(server: Server, aws_env: dict, stop: str, reason: str) -> None:
    server.enqueue(Reply(body=text_stream(stop=stop)))
    message, events = _run(local_model(server))
    assert message.stop_reason == reason and events[-1].type == "done"


def test_malformed_json_payload_is_named(server: Server, aws_env: dict) -> None:
    from agentcore_bedrock.eventstream import encode_message

    bad = encode_message({":event-type": "contentBlockDelta", ":message-type": "event"}, b'{"delta": ')
    server.enqueue(Reply(body=event("messageStart", {"role": "assistant"}) + bad))
    message, _ = _run(local_model(server))
    assert message.error_message.startswith("malformed JSON in Bedrock contentBlockDelta event: ")
    assert message.error_message.endswith("'{\"delta\": '")


@pytest.mark.parametrize(
    "body, text",
    [
        (
            b'{"message":"Bedrock proxy: model access not granted for this account"}',
            "200 Bedrock proxy: model access not granted for this account",
        ),
        (b"{}", "200 {}"),
    ],
)
def test_a_200_json_answer_is_reported_not_decoded(server: Server, aws_env: dict, body: bytes, text: str) -> None:
    # a proxy or gateway answering JSON with status 200 is not a corrupt event stream
    server.enqueue(Reply(body=body, content_type="application/json"))
    message, events = _run(local_model(server), max_retries=0)
    assert message.error_message == f"{text} (the server answered application/json, not an event stream)"
    assert (message.stop_reason, message.content, _kinds(events)) == ("error", [], ["error"])


def _start() -> bytes:
    return event("messageStart", {"role": "assistant"})


def _raw(name: str, payload: bytes) -> bytes:
    from agentcore_bedrock.eventstream import encode_message

    return encode_message({":event-type": name, ":content-type": "application/json", ":message-type": "event"}, payload)


def _delta(delta: Any, index: Any = 0) -> bytes:
    return event("contentBlockDelta", {"contentBlockIndex": index, "delta": delta})


@pytest.mark.parametrize(
    "body, text",
    [
        (_raw("contentBlockDelta", b"[1,2]"), "contentBlockDelta event: the payload is a list, not a JSON object"),
        (_delta({"text": "x"}, None), "contentBlockDelta event: contentBlockIndex is null, expected an integer"),
        (_delta("oops"), "contentBlockDelta event: delta is the string 'oops', expected an object"),
        (_delta({"text": 5}), "contentBlockDelta event: delta.text is the number 5, expected a string"),
        (
            _delta({"toolUse": [1]}),
            "contentBlockDelta event: delta.toolUse is a list, expected an object",
        ),
        (  # checked before the thinking block is opened
            _delta({"reasoningContent": {"text": 5}}),
            "contentBlockDelta event: delta.reasoningContent.text is the number 5, expected a string",
        ),
        (
            _delta({"reasoningContent": {"text": "ok", "signature": ["s"]}}),
            "contentBlockDelta event: delta.reasoningContent.signature is a list, expected a string",
        ),
        (
            _delta({"reasoningContent": {"redactedContent": {"data": "b3Bh"}}}),
            "contentBlockDelta event: delta.reasoningContent.redactedContent is an object, expected a string",
        ),
        (
            event("contentBlockStart", {"contentBlockIndex": 0, "start": "toolUse"}),
            "contentBlockStart event: start is the string 'toolUse', expected an object",
        ),
        (
            event("messageStop", {"stopReason": ["end_turn"]}),
            "messageStop event: stopReason is a list, expected a string",
        ),
        (
            event("messageStop", {"stopReason": "end_turn"}) + event("metadata", {"usage": {"inputTokens": "n/a"}}),
            "metadata event: usage.inputTokens is the string 'n/a', expected an integer",
        ),
    ],
)
def test_malformed_event_payloads_are_named(server: Server, aws_env: dict, body: bytes, text: str) -> None:
    server.enqueue(Reply(body=_start() + body))
    message, events = _run(local_model(server), max_retries=0)
    assert (message.stop_reason, message.error_message) == ("error", f"malformed Bedrock {text}")
    assert message.content == [] and _kinds(events) == ["start", "error"]  # nothing half-made is left
    assert AssistantMessage.from_dict(message.to_dict()) == message  # a transcript a session can keep


def test_a_malformed_reasoning_delta_changes_nothing(server: Server, aws_env: dict) -> None:
    """As the first event (no messageStart) it opens no thinking block, so the stream is one
    ``error`` event; into an open thinking block it appends none of its valid fields."""
    server.enqueue(Reply(body=_delta({"reasoningContent": {"text": 5}})))
    message, events = _run(local_model(server), max_retries=0)
    assert message.error_message == (
        "malformed Bedrock contentBlockDelta event: delta.reasoningContent.text is the number 5, expected a string"
    )
    assert (message.content, _kinds(events)) == ([], ["error"])
    from agentcore.types import ThinkingContent

    body = (
        _start()
        + _delta({"reasoningContent": {"text": "a"}})
        + _delta({"reasoningContent": {"text": "b", "signature": 7}})
    )
    server.enqueue(Reply(body=body))
    message, events = _run(local_model(server), max_retries=0)
    assert message.error_message.endswith("delta.reasoningContent.signature is the number 7, expected a string")
    assert message.content == [ThinkingContent("a", thinking_signature="")]
    assert _kinds(events) == ["start", "thinking_start", "thinking_delta", "error"]


def test_an_exception_frame_with_a_plain_text_payload_keeps_its_name(server: Server, aws_env: dict) -> None:
    from agentcore_bedrock.eventstream import encode_message

    headers = {
        ":exception-type": "throttlingException",
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    server.enqueue(Reply(body=encode_message(headers, b"Rate exceeded")), Reply(body=text_stream("ok")))
    message, _ = _run(local_model(server))
    assert (message.stop_reason, message.content) == ("stop", [TextContent("ok")])  # retried like a JSON one
    server.enqueue(Reply(body=encode_message(headers, b"Rate exceeded")))
    message, _ = _run(local_model(server), max_retries=0)
    assert message.error_message == "Throttling error: Rate exceeded (gave up after 1 attempt, max_retries=0)"


def test_stream_without_message_stop(server: Server, aws_env: dict) -> None:
    server.enqueue(
        Reply(
            body=event("messageStart", {"role": "assistant"})
            + event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "x"}})
        )
    )
    message, _ = _run(local_model(server))
    assert message.error_message == "Bedrock stream ended before messageStop"


def test_usage_with_cache_tokens_and_redacted_reasoning(server: Server, aws_env: dict) -> None:
    from agentcore.types import ModelCost, ThinkingContent

    body = b"".join(
        [
            event("messageStart", {"role": "assistant"}),
            event(
                "contentBlockDelta",
                {"contentBlockIndex": 0, "delta": {"reasoningContent": {"redactedContent": "b3Bh"}}},
            ),
            event("contentBlockStop", {"contentBlockIndex": 0}),
            event("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"text": "done"}}),
            event("contentBlockStop", {"contentBlockIndex": 1}),
            event("messageStop", {"stopReason": "end_turn"}),
            event(
                "metadata",
                {
                    "usage": {
                        "inputTokens": 10,
                        "outputTokens": 5,
                        "cacheReadInputTokens": 100,
                        "cacheWriteInputTokens": 20,
                        "totalTokens": 135,
                    }
                },
            ),
        ]
    )
    server.enqueue(Reply(body=body, chunk_size=3))
    model = local_model(
        server,
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        cost=ModelCost(input=3, output=15, cache_read=0.3, cache_write=3.75),
    )
    message, events = _run(model)
    assert message.content == [
        ThinkingContent("[Reasoning redacted]", thinking_signature="b3Bh", redacted=True),
        TextContent("done"),
    ]
    usage = message.usage
    assert (usage.input, usage.output, usage.cache_read, usage.cache_write, usage.total_tokens) == (10, 5, 100, 20, 135)
    assert usage.cost.total == pytest.approx((10 * 3 + 5 * 15 + 100 * 0.3 + 20 * 3.75) / 1e6)
    assert _kinds(events)[:3] == ["start", "thinking_start", "thinking_end"]


def test_abort_mid_stream_closes_the_response_promptly(server: Server, aws_env: dict) -> None:
    first = event("messageStart", {"role": "assistant"}) + event(
        "contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hel"}}
    )
    server.enqueue(Reply(body=first + text_stream(), chunk_size=len(first), stall_after=len(first)))
    controller = AbortController()
    aborter = threading.Thread(target=lambda: (server.stalled.wait(30), controller.abort()))
    stream = BedrockProvider().stream(
        local_model(server), CONTEXT, signal=controller.signal, timeout=(10, 60)
    )  # only the abort can end the stalled read
    events = []
    for item in stream:
        events.append(item)
        if item.type == "text_delta":  # the next read blocks on the stalled body until the abort
            aborter.start()
    aborter.join()
    message = stream.result()
    assert (message.stop_reason, message.error_message) == ("aborted", "Request was aborted")
    assert message.content == [TextContent("Hel")]
    assert _kinds(events) == ["start", "text_start", "text_delta", "error"]


def test_abort_interrupts_a_credential_lookup(server: Server, aws_env: dict, monkeypatch) -> None:
    # a container role's endpoint that does not answer: botocore waits 2 s per attempt, 3 attempts
    # (a credential_process can block for as long as it runs); the abort must not wait for it
    asked, release = threading.Event(), threading.Event()

    class Stalled(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 - http.server API
            asked.set()
            release.wait(30)

    credentials = ThreadingHTTPServer(("127.0.0.1", 0), Stalled)
    credentials.daemon_threads = True
    threading.Thread(target=credentials.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    host, port = credentials.server_address[:2]
    monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", f"http://{host}:{port}/credentials")
    controller = AbortController()
    results: List[AssistantMessage] = []
    runner = threading.Thread(
        target=lambda: results.append(_run(local_model(server), signal=controller.signal)[0]), daemon=True
    )
    try:
        runner.start()
        assert asked.wait(10)
        controller.abort()
        runner.join(3)  # botocore alone would hold the run for 8 s
        assert not runner.is_alive()
    finally:
        release.set()
        credentials.shutdown()
        credentials.server_close()
    assert (results[0].stop_reason, results[0].error_message) == ("aborted", "Request was aborted")
    assert server.requests == []


def test_abort_before_the_request_sends_nothing(server: Server, aws_env: dict) -> None:
    controller = AbortController()
    controller.abort()
    message, events = _run(local_model(server), signal=controller.signal)
    assert (message.stop_reason, message.error_message) == ("aborted", "Request was aborted")
    assert _kinds(events) == ["error"] and server.requests == []


def test_abort_ends_the_retry_sleep(server: Server, aws_env: dict) -> None:
    server.enqueue(Reply(body=exception("throttlingException", "wait")))
    controller = AbortController()
    seen = threading.Event()

    def on_response(status: int, headers: Any) -> None:
        seen.set()

    aborter = threading.Thread(target=lambda: (seen.wait(30), controller.abort()))
    aborter.start()
    # the abort comes while the body is read or during the retry sleep: no second request
    message, _ = _run(local_model(server), signal=controller.signal, on_response=on_response, max_retries=1)
    aborter.join()
    assert message.stop_reason == "aborted" and len(server.requests) == 1


def test_secrets_never_appear_in_errors(server: Server, aws_env: dict) -> None:
    token = "ABSKQmVkcm9ja0FQSUtleS1zZWNyZXQtdG9rZW4tdmFsdWU="
    server.enqueue(
        Reply(
            status=403,
            content_type="application/json",
            body=json.dumps({"message": f"Bearer {token} is not valid"}).encode(),
        )
    )
    message, _ = _run(local_model(server), api_key=token)
    assert token not in message.error_message and "***" in message.error_message
    assert server.requests[0].headers["Authorization"] == f"Bearer {token}"


def test_a_bearer_token_in_the_headers_option_never_appears_in_errors(server: Server, aws_env: dict) -> None:
    # tidy: the plugin kept its own secret-header list, which redacted "Bearer <token>" but not the
    # bare token a server echoes; it now uses the core's agentcore.providers.base.secret_header_values
    token = "proxy-token-0123456789abcdef"
    server.enqueue(
        Reply(
            status=403, content_type="application/json", body=json.dumps({"message": f"{token} is not valid"}).encode()
        )
    )
    message, _ = _run(local_model(server), headers={"Authorization": f"Bearer {token}"})
    assert token not in message.error_message and "***" in message.error_message


def test_missing_region_and_credentials_are_named(
    server: Server, aws_env: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_REGION")
    message, events = _run(local_model(server))
    assert message.error_message.startswith("no AWS region for Amazon Bedrock: set AWS_REGION")
    assert _kinds(events) == ["error"]
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    message, _ = _run(local_model(server))
    assert message.error_message.startswith(
        "no AWS credentials for Amazon Bedrock: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE"
    )
    assert server.requests == []


def test_a_silent_server_hits_the_read_timeout(server: Server, aws_env: dict) -> None:  # issue 17
    server.enqueue(Reply(body=text_stream(), stall_after=0))
    message, events = _run(local_model(server), timeout=(5, 0.2), max_retries=0)
    server.release.set()
    assert message.stop_reason == "error" and message.error_message.startswith("Timed out while streaming")
    assert _kinds(events) == ["error"] and len(server.requests) == 1


def test_a_retry_after_above_the_cap_fails_at_once(server: Server, aws_env: dict) -> None:
    busy = Reply(
        status=503,
        content_type="application/json",
        body=b'{"message": "busy"}',
        headers={"retry-after": "120", "x-amzn-ErrorType": "ServiceUnavailableException"},
    )
    server.enqueue(busy)
    message, _ = _run(local_model(server))
    assert message.error_message == (
        "Server requested 120s retry delay (max: 60s). 503 ServiceUnavailableException: busy"
    )
    assert len(server.requests) == 1
    server.enqueue(  # a higher cap: the server's delay is honoured (0 s here), then the retry succeeds
        Reply(503, b'{"message": "busy"}', "application/json", headers={"retry-after-ms": "0"}),
        Reply(body=text_stream("ok")),
    )
    message, _ = _run(local_model(server), max_retry_delay_ms=1)
    assert message.content == [TextContent("ok")] and len(server.requests) == 3


def test_x_should_retry_overrides_the_status(server: Server, aws_env: dict) -> None:
    server.enqueue(Reply(503, b'{"message": "busy"}', "application/json", headers={"x-should-retry": "false"}))
    message, _ = _run(local_model(server))
    assert message.error_message == "503 busy" and len(server.requests) == 1  # no "gave up": not retryable
    server.enqueue(
        Reply(400, b'{"message": "try again"}', "application/json", headers={"x-should-retry": "true"}),
        Reply(body=text_stream("ok")),
    )
    message, _ = _run(local_model(server), max_retry_delay_ms=0)
    assert message.content == [TextContent("ok")] and len(server.requests) == 3


def test_abort_ends_the_http_retry_sleep(server: Server, aws_env: dict) -> None:
    import time

    server.enqueue(Reply(503, b'{"message": "busy"}', "application/json", headers={"retry-after": "30"}))
    controller = AbortController()
    seen = threading.Event()
    aborter = threading.Thread(target=lambda: (seen.wait(30), controller.abort()))
    aborter.start()
    began = time.monotonic()
    message, events = _run(
        local_model(server), signal=controller.signal, on_response=lambda *_: seen.set(), max_retry_delay_ms=0
    )
    aborter.join()
    assert (message.stop_reason, message.error_message) == ("aborted", "Request was aborted")
    assert len(server.requests) == 1 and time.monotonic() - began < 20  # not the 30 s the server asked for


def test_max_retries_retries_exactly_n_times_then_names_the_attempts(server: Server, aws_env: dict) -> None:
    busy = Reply(status=503, content_type="application/json", body=b'{"message": "busy"}', headers={"retry-after": "0"})
    server.enqueue(busy, busy, busy, busy)
    message, _ = _run(local_model(server), max_retries=3)
    assert message.error_message == "503 busy (gave up after 4 attempts, max_retries=3)"
    assert len(server.requests) == 4


def test_silence_after_the_headers_before_content_is_retried(server: Server, aws_env: dict) -> None:
    """The connection going quiet (or away) after the headers, before any content, is retried
    from the same budget; once content arrived it is not (the partial answer stands)."""
    server.enqueue(Reply(body=text_stream("lost"), stall_after=0), Reply(body=text_stream("after retry")))
    message, events = _run(local_model(server), timeout_ms=300)
    assert message.stop_reason == "stop" and message.content == [TextContent("after retry")]
    assert len(server.requests) == 2 and _kinds(events).count("start") == 1
    assert [d.type for d in message.diagnostics or []] == ["provider_retry"]
    first = event("messageStart", {"role": "assistant"}) + event(
        "contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "par"}}
    )
    stalled = Reply(body=first + text_stream(), chunk_size=len(first), stall_after=len(first))
    server.enqueue(stalled, Reply(body=text_stream()))
    message, _ = _run(local_model(server), timeout_ms=300)
    server.release.set()
    assert message.stop_reason == "error" and message.content == [TextContent("par")]
    assert message.error_message.startswith("Timed out while streaming") and len(server.requests) == 3


@pytest.mark.parametrize("header", ["X-Amzn-Errortype", "X-AMZN-ERRORTYPE"])
def test_the_aws_error_type_is_read_in_any_letter_case(server: Server, aws_env: dict, header: str) -> None:
    # a proxy that canonicalises header names (Go's net/http sends X-Amzn-Errortype) lost the type
    server.enqueue(
        Reply(
            status=403,
            content_type="application/json",
            headers={header: "AccessDeniedException:http://internal.amazon.com/coral/"},
            body=json.dumps({"message": "You don't have access to the model with the specified model ID."}).encode(),
        )
    )
    message, _ = _run(local_model(server))
    assert message.error_message == (
        "403 AccessDeniedException: You don't have access to the model with the specified model ID."
    )


def test_a_key_in_the_endpoint_url_never_appears_in_errors(server: Server, aws_env: dict) -> None:
    # a gateway that takes its key in the query and echoes the path it could not route
    key = "gw-key-0123456789abcdef"
    server.enqueue(
        Reply(
            status=404,
            content_type="application/json",
            echo=lambda request: json.dumps({"message": f"no route for POST {request.path}"}).encode(),
        )
    )
    message, _ = _run(local_model(server), endpoint_url=f"{server.url}/gateway?api_key={key}")
    assert server.requests[0].path.endswith(f"?api_key={key}")  # sent, and signed with it
    assert message.error_message == (
        "404 no route for POST /gateway/model/us.amazon.nova-micro-v1%3A0/converse-stream?api_key=***"
    )
    assert key not in str(message.diagnostics)


def test_no_event_follows_an_abort_within_one_read(server: Server, aws_env: dict) -> None:
    # agent-loop: an abort is checked between frames, not only between reads (one read can bring
    # many frames: a buffering proxy, a fast model)
    deltas = [event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": f"w{i} "}}) for i in range(40)]
    end = event("contentBlockStop", {"contentBlockIndex": 0}) + event("messageStop", {"stopReason": "end_turn"})
    body = event("messageStart", {"role": "assistant"}) + b"".join(deltas) + end
    server.enqueue(Reply(body=body))  # one HTTP chunk, one read
    controller = AbortController()
    stream = BedrockProvider().stream(local_model(server), CONTEXT, signal=controller.signal)
    after_abort = []
    for item in stream:
        if controller.signal.aborted:
            after_abort.append(item.type)
        elif item.type == "text_delta":
            controller.abort()
    message = stream.result()
    assert (message.stop_reason, message.error_message) == ("aborted", "Request was aborted")
    assert message.content == [TextContent("w0 ")]
    assert after_abort == ["error"]


def test_a_body_cut_inside_a_frame_before_content_is_retried(server: Server, aws_env: dict) -> None:
    # as the core's wire APIs retry an SSE event cut short (a proxy closing mid-answer); after
    # content the partial answer stands (test_truncated_body_is_an_error)
    start = event("messageStart", {"role": "assistant"})
    cut = start + event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "lost"}})[:20]
    server.enqueue(Reply(body=cut), Reply(body=text_stream("after retry")))
    message, events = _run(local_model(server))
    assert (message.stop_reason, message.content) == ("stop", [TextContent("after retry")])
    assert len(server.requests) == 2 and _kinds(events).count("start") == 1
    (retry,) = message.diagnostics or []
    assert retry.type == "provider_retry" and retry.error["message"] == (
        f"event stream ended inside a frame (20 bytes of an incomplete message at byte {len(start)}) "
        "(the connection was probably cut)"
    )


class _Unprintable(ValueError):
    def __str__(self) -> str:
        raise RuntimeError("no text")


@pytest.mark.parametrize(
    "error, text",
    [
        (_Unprintable(), "_Unprintable (its message could not be read: str() raised RuntimeError)"),
        (ValueError(), "ValueError"),
    ],
)
def test_a_hook_error_without_a_readable_message_still_ends_the_stream(
    server: Server, aws_env: dict, error: Exception, text: str
) -> None:
    def on_payload(*_: Any) -> Any:
        raise error

    message, events = _run(local_model(server), on_payload=on_payload)
    assert (message.stop_reason, message.error_message) == ("error", text)
    assert _kinds(events) == ["error"] and server.requests == []

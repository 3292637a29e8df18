"""The ``bedrock-converse-stream`` provider: sign, POST, decode the event stream, retry, abort.

``BedrockProvider().stream(model, context, **options)`` returns a
:class:`~agentcore.streams.ProviderStream` and never raises for request or model failures: they
end the stream with one ``error`` event (``stop_reason`` "error", or "aborted" when ``signal``
fired) whose ``error_message`` says what failed, partial content kept (spec §3/§4).

* Request: :mod:`agentcore_bedrock.request` builds the body, ``on_payload`` may replace it,
  headers are layered (defaults < ``model.headers`` < ``headers=``) and then signed
  (:mod:`agentcore_bedrock.auth`), so every header sent is covered by the signature. Every HTTP
  attempt is signed anew (``open_stream`` takes the headers as a function): SigV4 signatures
  carry their time (``X-Amz-Date``) and AWS refuses one more than 5 minutes old, which a retry
  after a stalled attempt (the 600 s read timeout) would otherwise send.
* HTTP through :func:`agentcore.providers.http.open_stream` (pooled connections, abortable
  connect, retries of connection errors, 408/409/429/5xx with ``retry-after``, ``max_retries``).
  AWS error bodies (``{"message": ...}`` + ``x-amzn-ErrorType``, in any letter case) become
  ``"<status> <ErrorType>: <message>"``. Credentials in ``endpoint_url`` (a query key, a
  password) are redacted from error messages like the request's credential headers.
* Clock skew: AWS refuses a SigV4 signature more than 5 minutes off its clock (403
  ``InvalidSignatureException`` "Signature expired" / "Signature not yet current"). The request
  is then signed again once with the server's clock (its ``Date`` header, else the time the
  message names), as botocore does, outside ``max_retries``, with a ``clock_skew`` diagnostic on
  the message; the offset stays for the request's later attempts. A second refusal, or one that
  does not say the server's time, is the error, its message naming the clock skew.
* A 2xx answer whose ``Content-Type`` is neither ``application/vnd.amazon.eventstream`` nor
  ``application/octet-stream`` (a proxy's JSON or HTML) is read (at most 256 KiB) and reported as
  ``"200 <message> (the server answered application/json, not an event stream)"``, as the core's
  wire APIs report theirs; an answer without a ``Content-Type`` is left to the decoder.
* The body is decoded frame by frame as it arrives (:class:`~agentcore_bedrock.eventstream.EventStreamDecoder`);
  a corrupt frame is reported after the good frames before it are handled, however the bytes
  were chunked, so their content is kept. A body that ends inside a frame (a proxy closing
  mid-answer) is retried like a lost connection while no content was streamed, as the core's
  wire APIs retry an SSE event cut short. A cut (the body ending inside a frame, a reset, a read
  timeout) *after* ``messageStop`` loses at most the trailing ``metadata`` frame: the answer is
  complete, so the turn ends with the stop reason ``messageStop`` gave, the usage known so far
  (0 when the metadata frame was lost) and a ``stream_recovery`` diagnostic saying what was cut.
  ``start`` is pushed with the first event, so an in-stream ``throttlingException``,
  ``serviceUnavailableException``, ``internalServerException`` or ``modelNotReadyException``
  that arrives before any content is retried like HTTP 429/5xx, from the same
  :class:`~agentcore.providers.retries.RetryBudget` (``max_retries``, default 2, counts every
  attempt, whatever failed; sleeping ``min(0.5 * 2**attempt, 8)`` s minus up to 25 % jitter; an
  abort ends the sleep).
* Abort: an abort interrupts the lookup of SigV4 credentials (a role's endpoint, an STS call or a
  ``credential_process`` can block for seconds or longer: see :func:`~agentcore_bedrock.auth.sign_request`);
  the signal's listener shuts the response's socket down
  (:func:`agentcore.providers.http.close_on_abort`), so a blocked read returns at once; the
  signal is also checked before each frame is handled, so no event follows an abort even when
  one read brought many frames (the content stays what was streamed before it).

Options: everything :func:`~agentcore_bedrock.request.build_request_body` reads, plus ``signal``,
``api_key`` (a Bedrock API key), ``region``, ``profile``, ``endpoint_url``, ``headers``,
``on_payload``, ``on_response``, ``timeout`` / ``timeout_ms``, ``max_retries``,
``max_retry_delay_ms``. Unknown options are ignored.
"""

from __future__ import annotations

import datetime
import email.utils
import json
import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional

from agentcore.events import DoneEvent, StartEvent
from agentcore.providers import http
from agentcore.providers.base import (
    ABORTED_MESSAGE,
    ProviderError,
    StreamWriter,
    as_signal,
    describe_error,
    encode_body,
    error_event,
    merge_headers,
    new_output,
    redact,
    request_timeout,
    secret_header_values,
    signal_aborted,
)
from agentcore.providers.failures import secret_url_values
from agentcore.providers.retries import RetryBudget, retry_or_raise, transient
from agentcore.streams import ProviderStream

from .auth import BedrockConfigError, endpoint_url, request_url, resolve_region, sign_request
from .eventstream import EventStreamDecoder, EventStreamError
from .request import build_request_body
from .stream_state import BedrockStreamException, BedrockStreamState

__all__ = ["API", "BedrockProvider", "format_aws_error"]

API = "bedrock-converse-stream"
_DEFAULT_HEADERS = {"Content-Type": "application/json"}  # what botocore's rest-json serializer sends


_EVENT_STREAM = "application/vnd.amazon.eventstream"
_MAX_BODY_TEXT = 256 * 1024  # of a 2xx answer that is not an event stream, read to report it
_GAVE_UP = re.compile(r" \(gave up after \d+ attempts?, max_retries=\d+\)$")
_DELAY_REFUSED = re.compile(r"Server requested \S+ retry delay \(max: \S+\)\. ")


def format_aws_error(message: str, status: Optional[int], headers: Mapping[str, str]) -> str:
    """``"403 AccessDeniedException: <message>"`` from ``"<status> <JSON body>"``; other texts
    unchanged. The attempt count the core appends after retries is kept at the end, and the
    core's ``"Server requested Ns retry delay (max: Ms). "`` at the start."""
    note = _GAVE_UP.search(message)
    if note is not None:
        return format_aws_error(message[: note.start()], status, headers) + note.group(0)
    delay = _DELAY_REFUSED.match(message)
    if delay is not None:
        return delay.group(0) + format_aws_error(message[delay.end() :], status, headers)
    if status is None or not message.startswith(f"{status} "):
        return message
    try:
        data = json.loads(message[len(str(status)) + 1 :])
    except (ValueError, RecursionError):
        return message
    if not isinstance(data, Mapping):
        return message
    text = data.get("message") or data.get("Message")
    kind = str(_header(headers, "x-amzn-ErrorType") or "").split(":", 1)[0]
    kind = kind or str(data.get("__type") or "").rsplit("#", 1)[-1]
    if not text:
        return message
    return f"{status} {kind}: {text}" if kind else f"{status} {text}"


def _header(headers: Mapping[str, str], name: str) -> Optional[str]:
    """The value of header ``name`` in any letter case (HTTP/2 lowercases names, a Go proxy sends
    ``X-Amzn-Errortype``), also from a plain ``dict`` of a response's headers."""
    value = headers.get(name)
    if value is not None:
        return value
    lowered = name.lower()
    return next((v for k, v in headers.items() if str(k).lower() == lowered), None)


def _not_an_event_stream(response: Any, signal: Any) -> Optional[str]:
    """The error text of a 2xx answer that is not an AWS event stream (a proxy's or gateway's
    JSON or HTML), or None when it is one, or says nothing of its type (then the decoder judges).
    Reads at most :data:`_MAX_BODY_TEXT` bytes of the body, stopping early on an abort."""
    kind = str(response.headers.get("content-type") or "").split(";", 1)[0].strip().lower()
    if kind in ("", _EVENT_STREAM, "application/octet-stream"):
        return None
    kept: List[bytes] = []
    size = 0
    for chunk in http.iter_body(response):
        kept.append(chunk[: _MAX_BODY_TEXT - size])
        size += len(kept[-1])
        if size >= _MAX_BODY_TEXT or signal_aborted(signal):
            break
    text = b"".join(kept).decode("utf-8", "replace")
    status = response.status_code
    message = format_aws_error(http.format_http_error(status, text, "raw"), status, response.headers)
    return f"{message} (the server answered {kind}, not an event stream)"


def _check_event_stream(response: Any, signal: Any) -> None:
    """Raise :class:`ProviderError` (:func:`_not_an_event_stream`'s text) unless the 2xx answer
    can be an event stream; an abort while reading raises :class:`~agentcore.providers.http.RequestAborted`."""
    problem = _not_an_event_stream(response, signal)
    if signal_aborted(signal):
        raise http.RequestAborted(ABORTED_MESSAGE)
    if problem is not None:
        raise ProviderError(problem)


def _note_cut_after_stop(
    writer: StreamWriter, state: BedrockStreamState, exc: BaseException, secrets: List[str]
) -> None:
    """Record that the body was cut (reset, timed out, ended inside a frame) after ``messageStop``:
    the answer and its stop reason are complete, only the trailing ``metadata`` frame (usage) may
    be lost, so the turn ends as ``messageStop`` said, with the usage known so far (zero when the
    metadata frame was lost) and a ``stream_recovery`` diagnostic saying what was cut."""
    if state.usage_seen:
        what = "after messageStop and its metadata frame"
    else:
        what = "after messageStop, before its metadata frame arrived: the usage is not known"
    writer.add_diagnostic(
        "stream_recovery",
        error={"name": type(exc).__name__, "message": redact(describe_error(exc), secrets)},
        details={"reason": f"the Bedrock event stream was cut {what}", "usageReceived": state.usage_seen},
    )


_SIGNATURE_TIME = re.compile(r"Signature expired|Signature not yet current")
_SERVER_TIME = re.compile(r"\((\d{8}T\d{6}Z) [-+] 5 min\.\)")  # "... (20261207T160500Z - 5 min.)"


@dataclass
class _Clock:
    """The server's clock minus this machine's (seconds) that one request signs with: 0 until AWS
    refuses a signature's time, then learnt from that answer, once (``corrected``)."""

    offset: float = 0.0
    corrected: bool = False


def _refused_time(status: Optional[int], message: str) -> bool:
    """Whether an error is AWS refusing the signature's time: 403 ``InvalidSignatureException``
    "Signature expired" / "Signature not yet current" (the clocks differ by more than 5 minutes)."""
    return status == 403 and _SIGNATURE_TIME.search(message) is not None


def _server_time(message: str, headers: Mapping[str, str]) -> Optional[float]:
    """The server's time (Unix seconds) when it answered: its ``Date`` header, else the time AWS
    names in the refusal's message; None when neither can be read."""
    date = _header(headers, "Date")
    if date:
        try:
            when = email.utils.parsedate_to_datetime(date)
        except (TypeError, ValueError, IndexError, OverflowError):
            pass
        else:
            return (when if when.tzinfo else when.replace(tzinfo=datetime.timezone.utc)).timestamp()
    match = _SERVER_TIME.search(message)
    if match is None:
        return None
    when = datetime.datetime.strptime(match.group(1), "%Y%m%dT%H%M%SZ")
    return when.replace(tzinfo=datetime.timezone.utc).timestamp()


def _correct_clock(clock: _Clock, status: Optional[int], message: str, headers: Mapping[str, str]) -> bool:
    """Learn the clock offset from a refused signature time and say whether to sign again (once
    per request, as botocore corrects a skewed clock); False for any other error, for a second
    refusal, or when the answer does not say the server's time."""
    if clock.corrected or not _refused_time(status, message):
        return False
    server = _server_time(message, headers)
    if server is None:
        return False
    clock.offset, clock.corrected = server - time.time(), True
    return True


def _clock_hint(clock: _Clock, status: Optional[int], message: str) -> str:
    """``message``, naming the clock skew when it is a refused signature time."""
    if not _refused_time(status, message):
        return message
    if clock.corrected:
        return (
            f"{message} (this machine's clock is off: the request was signed again with the server's clock, "
            f"{round(clock.offset):+d} s from this machine's, and still refused; correct the system clock)"
        )
    return f"{message} (this machine's clock is more than 5 minutes off AWS's: correct the system clock)"


def _describe(exc: BaseException) -> str:
    """The error message of a failure: the text alone of configuration, frame and value errors
    (they name the problem), else :func:`describe_error`'s; never raises, also for an exception
    (an ``on_payload`` hook's) whose ``str()`` raises or is empty."""
    if isinstance(exc, (BedrockConfigError, EventStreamError, ValueError)):
        try:
            text = str(exc)
        except Exception:  # noqa: BLE001 - describe_error names the type instead
            text = ""
        if text:
            return text
    return describe_error(exc)


class BedrockProvider:
    """The provider object registered for ``api="bedrock-converse-stream"``."""

    api = API
    #: The options this provider reads beyond agentcore's StreamOptions: ``Agent(region=...)``,
    #: ``-o region eu-west-1`` and ``stream(..., region=...)`` all reach it.
    #: credentials come from botocore's chain (a default profile, SSO, an instance or container
    #: role): the command line's key-variable check leaves them to it
    ambient_credentials = True
    stream_options = {
        "region": "AWS region of the endpoint (else AWS_REGION, AWS_DEFAULT_REGION, the profile's)",
        "profile": "AWS profile for the credentials and region (else AWS_PROFILE)",
        "endpoint_url": "Bedrock runtime endpoint (a VPC endpoint or a proxy)",
        "request_metadata": "requestMetadata of the request (string keys and values)",
        "interleaved_thinking": "Claude's interleaved thinking with tools (default true)",
    }

    def __repr__(self) -> str:
        return f"<BedrockProvider api={self.api!r}>"

    def stream(self, model: Any, context: Any, **options: Any) -> ProviderStream:
        """Stream one response; iterate for events, ``result()`` for the final message."""
        return ProviderStream(self._run(model, context, options))

    # -- the skeleton ----------------------------------------------------------------------------
    def _run(self, model: Any, context: Any, options: Dict[str, Any]) -> Iterator[Any]:
        output = new_output(model)
        signal = as_signal(options.get("signal"))
        pending: List[Any] = []
        writer = StreamWriter(model, output, pending.append)
        secrets: List[str] = []
        started: List[bool] = []  # "start" went out (once per stream, whatever the retries)
        try:
            region = resolve_region(model, options)
            url = request_url(endpoint_url(model, region, options), model.id)
            body = build_request_body(model, context, **options)
            data = encode_body(body, model, options)
            headers = merge_headers(_DEFAULT_HEADERS, getattr(model, "headers", None), options.get("headers"))
            secrets.extend(secret_header_values(headers))
            secrets.extend(secret_url_values(url))  # a gateway key in endpoint_url's query, a proxy password
            budget = RetryBudget(options.get("max_retries"), options.get("max_retry_delay_ms"), signal)

            clock = _Clock()

            def signed_headers() -> Mapping[str, str]:  # before every HTTP attempt: SigV4 carries its time
                signed = sign_request(url, headers, data, region, options, signal=signal, clock_offset=clock.offset)
                secrets.extend(signed.secrets)
                return signed.headers

            while True:
                state = BedrockStreamState(model, writer)
                try:
                    yield from self._attempt(
                        url,
                        data,
                        signed_headers,
                        state,
                        writer,
                        pending,
                        signal,
                        options,
                        started,
                        budget,
                        secrets,
                        clock,
                    )
                    break
                except Exception as exc:  # transient and no content yet: try again, else it stands
                    retryable = transient(exc) and not state.has_content
                    retry_or_raise(exc, retryable, budget, output, signal, "amazon-bedrock", secrets)
                    pending.clear()
            if output.stop_reason in ("error", "aborted"):
                raise ProviderError(output.error_message or "An unknown error occurred")
            terminal: Any = DoneEvent(output.stop_reason, output)
        except Exception as exc:  # every failure becomes the terminal error event (spec §4.6)
            if pending:
                yield from pending
                pending.clear()
            cause = exc if isinstance(exc, BedrockStreamException) else exc.__cause__  # a spent budget wraps it
            code = cause.name if isinstance(cause, BedrockStreamException) else None
            terminal = error_event(output, exc, signal, secrets, _describe, bool(started), errorCode=code)
        yield terminal

    def _attempt(
        self,
        url: str,
        data: bytes,
        signed_headers: Callable[[], Mapping[str, str]],
        state: BedrockStreamState,
        writer: StreamWriter,
        pending: List[Any],
        signal: Any,
        options: Mapping[str, Any],
        started: List[bool],
        budget: RetryBudget,
        secrets: List[str],
        clock: _Clock,
    ) -> Iterator[Any]:
        """One HTTP exchange: open (``open_stream``'s retries, each attempt signed anew by
        ``signed_headers``), decode every frame, finish; yields the events it produced (``start``
        before the first of them unless ``started`` says an earlier attempt sent it). A body cut
        after ``messageStop`` ends the turn normally (:func:`_note_cut_after_stop`); ``secrets``
        redact that note."""
        seen: Dict[str, Any] = {}
        user_on_response: Optional[Callable[[int, Dict[str, str]], Any]] = options.get("on_response")

        def on_response(status: int, headers: Dict[str, str]) -> None:
            seen["headers"] = headers
            if user_on_response is not None:
                user_on_response(status, headers)

        while True:
            try:
                response = http.open_stream(
                    url,
                    data,
                    signed_headers,
                    session_name="amazon-bedrock",
                    signal=signal,
                    timeout=request_timeout(options),
                    error_style="raw",
                    on_response=on_response,
                    retry=budget,
                )
                break
            except http.ProviderHTTPError as exc:
                headers = seen.get("headers") or {}
                text = format_aws_error(str(exc), exc.status, headers)
                if not _correct_clock(clock, exc.status, text, headers):
                    raise http.ProviderHTTPError(_clock_hint(clock, exc.status, text), exc.status) from None
                writer.add_diagnostic(
                    "clock_skew",
                    error={"name": "ProviderHTTPError", "message": redact(text, secrets), "code": exc.status},
                    details={"offsetSeconds": round(clock.offset, 3)},
                )
        fully_read = False
        try:
            with http.close_on_abort(response, signal):
                _check_event_stream(response, signal)
                decoder = EventStreamDecoder()
                try:
                    for chunk in http.iter_body(response):
                        for message in decoder.feed(chunk):
                            if signal_aborted(signal):  # between frames: one read may hold many
                                break
                            state.handle(message)
                            if not started and (state.started or pending):
                                started.append(True)
                                yield StartEvent(writer.output)
                            if pending:
                                yield from pending
                                pending.clear()
                        if signal_aborted(signal):
                            break
                        decoder.check()  # a corrupt frame after the good ones: reported once they are handled
                    else:
                        fully_read = not signal_aborted(signal)
                except http.transport_errors() as exc:  # reset, timed out: fatal unless the answer was complete
                    if signal_aborted(signal) or not state.stopped:
                        raise
                    _note_cut_after_stop(writer, state, exc, secrets)
                else:
                    if signal_aborted(signal):
                        raise http.RequestAborted(ABORTED_MESSAGE)
                    decoder.check()
                    try:
                        decoder.close()
                    except EventStreamError as exc:  # the body ended inside a frame: cut, as a lost connection
                        cut = ProviderError(f"{exc} (the connection was probably cut)", retryable=True)
                        if not state.stopped:
                            raise cut from None
                        _note_cut_after_stop(writer, state, cut, secrets)
            state.finish()
            writer.close_open_blocks()
            if pending:
                yield from pending
                pending.clear()
        finally:
            http.release_response(response, fully_read)

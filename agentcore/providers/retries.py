"""The retry policy of provider requests: one budget per request, what counts as transient.

* :class:`RetryBudget` holds the retries of one logical request. :func:`~agentcore.providers.http.open_stream`
  spends it on connection errors, timeouts and retryable statuses (:func:`retryable_status`:
  408, 409, 429, >= 500); a wire module spends the *same* budget on a transient error the server
  reports inside the stream, so ``max_retries=2`` means at most 3 attempts whatever failed.
  The delay is ``min(0.5 * 2**n, 8)`` s minus up to 25 % jitter (the vendor SDKs' policy), or what
  the server asked for; a sleep ends at once when the abort signal fires.
* :func:`retryable_error` says whether an in-stream error's codes (Anthropic error types, OpenAI
  codes, google.rpc status names, Bedrock exception names, numeric statuses) are transient.
* :func:`transient` says whether a failure while reading a stream may go away on a retry (an
  error the server marked retryable in the stream, or the connection dropping after the headers).
* :func:`retry_or_raise` is the in-stream rule every wire module applies: transient and no
  content emitted yet -> back off and try again; otherwise the error stands.
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any, Dict, Iterable, Optional

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_MAX_RETRY_DELAY_MS",
    "RetryBudget",
    "retryable_status",
    "retryable_error",
    "retry_or_raise",
    "transient",
]

DEFAULT_MAX_RETRIES = 2
DEFAULT_MAX_RETRY_DELAY_MS = 60000


def retryable_status(status: Any) -> bool:
    """Whether an HTTP status (or an error's numeric ``code`` inside a stream) is retried:
    408, 409, 429 and >= 500, what the vendor SDKs retry."""
    if isinstance(status, str) and status.isdigit():
        status = int(status)
    return type(status) is int and (status in (408, 409, 429) or 500 <= status < 600)


def _backoff(attempt: int) -> float:
    return min(0.5 * 2**attempt, 8.0) * (1 - random.random() * 0.25)


class RetryBudget:
    """The retries of one logical request, shared by everything that may retry it.

    :func:`~agentcore.providers.http.open_stream` spends it on connection errors and retryable statuses; a wire module
    spends the same budget on a retryable error that arrives *inside* the stream before any
    content (an ``overloaded_error`` event, a ``throttlingException`` frame): ``max_retries=2``
    means at most 3 attempts in all, whatever failed. ``max_retries`` None is the default (2);
    ``max_retry_delay_ms`` None is 60000 (0: no cap). Not thread-safe: one per request.
    """

    def __init__(
        self, max_retries: Optional[int] = None, max_retry_delay_ms: Optional[int] = None, signal: Any = None
    ) -> None:
        self.max_retries = DEFAULT_MAX_RETRIES if max_retries is None else max(0, int(max_retries))
        self.cap_ms = DEFAULT_MAX_RETRY_DELAY_MS if max_retry_delay_ms is None else int(max_retry_delay_ms)
        self.signal = signal
        self.attempt = 0  # retries spent so far (the current attempt is number attempt + 1)

    @property
    def exhausted(self) -> bool:
        return self.attempt >= self.max_retries

    def backoff(self) -> float:
        """The default delay before the next attempt: ``min(0.5 * 2**n, 8)`` s minus up to 25 %."""
        return _backoff(self.attempt)

    def wait(self, delay: Optional[float] = None) -> None:
        """Sleep ``delay`` (default :meth:`backoff`) and count a retry; an abort of the signal
        ends the sleep at once with :class:`~agentcore.providers.http.RequestAborted`."""
        _sleep(self.backoff() if delay is None else delay, self.signal)
        self.attempt += 1

    def retry_in_stream(self, reason: str, provider: str, model: Optional[str], secrets: Iterable[str] = ()) -> None:
        """Count a retry of an error that arrived inside the stream and sleep the backoff; DEBUG
        logs the decision like :func:`~agentcore.providers.http.open_stream`'s (``reason`` redacted with ``secrets``)."""
        delay = self.backoff()
        log = logging.getLogger("agentcore.providers.http")  # where open_stream's retries are logged
        if log.isEnabledFor(logging.DEBUG):
            from .failures import redact

            log.debug(
                "retry provider=%s model=%s reason=%s delay_s=%.3f (in-stream error) attempt=%d/%d",
                provider,
                model or "-",
                redact(reason, secrets),
                delay,
                self.attempt + 2,
                self.max_retries + 1,
            )
        self.wait(delay)

    def gave_up(self, message: str) -> str:
        """``message`` with the attempts made, for a failure that was retryable but out of budget."""
        attempts = self.attempt + 1
        plural = "s" if attempts != 1 else ""
        return f"{message} (gave up after {attempts} attempt{plural}, max_retries={self.max_retries})"


#: The longest single wait: ``time.sleep`` and ``Event.wait`` raise OverflowError past about 292
#: years, and a server may ask for more (``retry-after: 1e300`` with the cap disabled).
_SLEEP_SLICE = 3600.0


def _sleep(seconds: float, signal: Any) -> None:
    """Sleep ``seconds`` (any finite length: in slices), ending at once when ``signal`` fires."""
    deadline = time.monotonic() + seconds
    remaining = seconds
    while True:
        step = min(max(remaining, 0.0), _SLEEP_SLICE)
        if signal is None:
            time.sleep(step)
        elif signal.wait(step):
            from .http import RequestAborted

            raise RequestAborted("Request was aborted")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return


_RETRYABLE_CODES = frozenset(
    {
        # Anthropic error types (529, 429, 500)
        "overloaded_error",
        "rate_limit_error",
        "api_error",
        # OpenAI / OpenAI-compatible error codes and types
        "rate_limit_exceeded",
        "server_error",
        "server_is_overloaded",
        "slow_down",
        "overloaded",
        "service_unavailable",
        "internal_server_error",
        "too_many_requests",
        # google.rpc status names of 429, 503, 500, 504
        "resource_exhausted",
        "unavailable",
        "internal",
        "deadline_exceeded",
        # Bedrock's in-stream exceptions
        "throttlingexception",
        "serviceunavailableexception",
        "internalserverexception",
        "modelnotreadyexception",
    }
)


def retryable_error(*codes: Any) -> bool:
    """Whether an in-stream error with these codes (type names, status names, numeric codes, in
    any order; None ignored) is transient: an overload, a rate limit, a server error, or a
    numeric code HTTP would retry (408, 409, 429, >= 500). Invalid requests, bad keys, quota and
    content errors are not."""
    for code in codes:
        if isinstance(code, str) and code.strip().lower() in _RETRYABLE_CODES:
            return True
        if retryable_status(code):
            return True
    return False


def transient(exc: BaseException) -> bool:
    """Whether a failure while reading a stream may go away on a retry: a
    :class:`~agentcore.providers.failures.ProviderError` the wire module marked ``retryable`` (an
    overload or rate limit the server reported in the stream), or the connection dropping,
    resetting or timing out after the headers (:func:`~agentcore.providers.http.transport_errors`).
    Anything else (a malformed stream, a body that does not decode in its declared
    ``Content-Encoding``, an abort, a bad request) is not."""
    from . import http
    from .failures import ProviderError, _undecodable

    if isinstance(exc, ProviderError):
        return bool(exc.retryable)
    if _undecodable(exc):  # the server sends the same bytes again
        return False
    return isinstance(exc, http.transport_errors())


def retry_or_raise(
    exc: BaseException, retryable: bool, budget: RetryBudget, output: Any, signal: Any, provider: str, secrets: Any
) -> None:
    """The in-stream retry rule, shared by every wire module: a ``retryable`` error that arrived
    before any content of ``output`` was emitted is retried like HTTP 429/5xx from the request's
    :class:`~agentcore.providers.http.RetryBudget`. Returns after the backoff sleep (``output``
    reset for the next attempt; the caller drops the failed attempt's queued events and asks
    again); otherwise raises ``exc``, or a :class:`ProviderError` with the attempt count when
    the budget is spent. An abort (before or during the sleep) raises too."""
    if not retryable or output.content or (signal is not None and bool(getattr(signal, "aborted", False))):
        raise exc
    if budget.exhausted:
        from .failures import ProviderError, describe_error

        # the cause keeps the wire's error code; a lost connection says so, as it would unretried
        raise ProviderError(budget.gave_up(describe_error(exc))) from exc
    _reset_output(output)
    from .failures import add_diagnostic, redact

    code = getattr(exc, "name", None) or getattr(exc, "code", None)  # Bedrock's AWS error code
    details: Dict[str, Any] = {"attempt": budget.attempt + 1}
    if isinstance(code, str):
        details["errorCode"] = code
    # recovered from by the retry below; the note stays on the final message (reference provider_retry)
    error = {"name": getattr(exc, "name", None) or type(exc).__name__, "message": redact(str(exc), secrets)}
    add_diagnostic(output, "provider_retry", error=error, details=details)
    budget.retry_in_stream(str(exc), provider, output.model, secrets)


_KEEP_ON_RETRY = frozenset({"content", "api", "provider", "model", "timestamp", "extra", "_absent", "diagnostics"})


def _reset_output(output: Any) -> None:
    """Forget what a failed attempt set on ``output`` (usage, stop reason, ids...) before the
    retry: every field but content, identity and timestamp gets its default again."""
    import dataclasses

    for f in dataclasses.fields(output):
        if f.name in _KEEP_ON_RETRY:
            continue
        if f.default is not dataclasses.MISSING:
            setattr(output, f.name, f.default)
        elif f.default_factory is not dataclasses.MISSING:
            setattr(output, f.name, f.default_factory())

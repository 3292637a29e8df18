"""HTTP for providers: pooled sessions, a retrying streaming POST, abortable reads, error texts.

* :func:`get_session` keeps one ``requests.Session`` per provider name (connection pooling); its
  pool keeps up to :func:`pool_maxsize` connections per host (:func:`set_pool_maxsize`).
* :func:`open_stream` POSTs and returns the streaming ``requests.Response`` once the headers
  arrived with a 2xx status. It retries connection errors and statuses 408, 409, 429 and >= 500
  (a ``x-should-retry: true|false`` header overrides) before any body byte was consumed, sleeping
  ``retry-after-ms`` / ``retry-after`` (seconds or HTTP date; a negative or unparseable value
  is ignored) when given, else ``min(0.5 * 2**attempt, 8)`` s minus up to 25 % jitter. A
  server-requested delay above ``max_retry_delay_ms`` (default 60000; 0 disables the cap: any
  delay is then slept, an abort still ends it) fails at once, and so do a TLS certificate that
  does not verify (``TLS error talking to <host> ...``, naming ``REQUESTS_CA_BUNDLE``) and a
  proxy refusing the ``CONNECT`` of an ``https://`` request with a status no retry changes
  (407, 403: the proxy's address is named). Every other failure raises
  :class:`ProviderHTTPError` whose message is the provider's own error text (spec §9; the
  body read in its declared charset, else UTF-8, at most 4000 characters), the request's keys
  replaced by ``***``.
  When a ``signal`` is given, waiting for the response headers and retry sleeps return within
  milliseconds of an abort by raising :class:`RequestAborted`.
* :func:`send_abortable` sends any request whose connect (name resolution and TLS handshake
  included) and header wait an abort interrupts (on a session from :func:`get_session`).
* :func:`iter_body` yields body bytes as they arrive; :func:`close_response` unblocks a read that
  is waiting on the socket, and :func:`close_on_abort` does so when an abort signal fires: the
  public way for tools and plugins to make their own HTTP reads abortable (agentcore-web uses it).

The pooled sessions and their abortable connections live in ``_http_pool.py``; their public
names are re-exported here. Messages never contain API keys or request headers.

Logging (logger ``agentcore.providers.http``): DEBUG records each attempt (method, URL with its
user info and secret-looking query values replaced by ``***``, provider, model, attempt n/max),
each response (status, duration, the server's request id) and each retry decision (reason,
delay); WARNING a server-requested delay above the cap (when logging is configured: otherwise
the error's own message is the one report). Header values and the request's keys
never appear in a record.
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import logging
import re
import socket
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple, Type, Union

from .._compat import (
    http_client_read1,
    response_socket,
)
from ._http_pool import (
    DEFAULT_POOL_MAXSIZE,
    POOL_MAXSIZE_ENV,
    _current,
    _forget_handshake,
    get_session,
    pool_maxsize,
    set_pool_maxsize,
)
from .retries import (
    RetryBudget,
    retryable_status,
)

__all__ = [
    "ProviderHTTPError",
    "RequestAborted",
    "get_session",
    "open_stream",
    "iter_body",
    "close_response",
    "release_response",
    "format_http_error",
    "retry_delay_from_headers",
    "RetryBudget",
    "retryable_status",
    "DEFAULT_TIMEOUT",
    "DEFAULT_POOL_MAXSIZE",
    "POOL_MAXSIZE_ENV",
    "pool_maxsize",
    "set_pool_maxsize",
    "close_on_abort",
    "send_abortable",
    "transport_errors",
]

DEFAULT_TIMEOUT: Tuple[float, float] = (10.0, 600.0)  # (connect, read) seconds
_MAX_ERROR_TEXT = 4000


class ProviderHTTPError(Exception):
    """A request failed: non-2xx status (``status`` set) or a connection error (``status`` None)."""

    def __init__(self, message: str, status: Optional[int] = None) -> None:
        super().__init__(message)
        self.status = status


class RequestAborted(Exception):
    """The abort signal fired while connecting, waiting for headers or sleeping before a retry."""


def transport_errors() -> Tuple[Type[BaseException], ...]:
    """What reading a response body raises when the connection drops, resets or times out:
    ``OSError`` (requests' ``ChunkedEncodingError``/``ConnectionError`` are ``OSError`` too),
    urllib3's ``HTTPError`` family (``ProtocolError``, ``ReadTimeoutError``) and http.client's
    ``HTTPException`` (``IncompleteRead``). A wire module retries these like a 5xx status when no
    content has been emitted yet (:func:`~agentcore.providers.retries.transient`)."""
    import http.client

    from urllib3.exceptions import HTTPError as Urllib3Error

    return (OSError, Urllib3Error, http.client.HTTPException)


# --------------------------------------------------------------------------- error texts


def format_http_error(status: int, body: str, style: str = "openai") -> str:
    """The error text of a failed response, shaped like the vendor SDKs' (spec §9).

    ``style`` "openai": ``"{status} {error.message}"`` when the body is JSON with ``error.message``
    (OpenRouter's ``error.metadata.raw`` is appended on a new line), else ``"{status} {body}"``,
    and ``"{status} status code (no body)"`` for an empty body. Other styles ("anthropic",
    "google", "raw"): ``"{status} {body}"``. Long bodies are truncated.
    """
    text = (body or "").strip()
    if not text:
        return f"{status} status code (no body)"
    if style == "openai":
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):  # not JSON, or nested past the parser's stack
            data = None
        error = data.get("error") if isinstance(data, dict) else None
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            message = f"{status} {error['message']}"
            metadata = error.get("metadata")
            if isinstance(metadata, dict) and metadata.get("raw"):
                message += f"\n{metadata['raw']}"
            return _truncate(message)
        if isinstance(error, str):
            return _truncate(f"{status} {error}")
    return _truncate(f"{status} {text}")


def _truncate(text: str) -> str:
    if len(text) <= _MAX_ERROR_TEXT:
        return text
    return text[:_MAX_ERROR_TEXT] + f"... [truncated {len(text) - _MAX_ERROR_TEXT} chars]"


# --------------------------------------------------------------------------- retry policy


def retry_delay_from_headers(headers: Mapping[str, str]) -> Optional[float]:
    """Seconds the server asked us to wait (``retry-after-ms``, ``retry-after``), or None.

    A value that is no delay (negative, infinite, NaN, unparseable) is ignored like a missing
    one (the default back-off applies), never taken for "retry at once"; an HTTP date in the past
    is 0 (the time to retry has come)."""
    value = headers.get("retry-after-ms")
    if value:
        seconds = _finite(value)
        if seconds is not None and seconds >= 0:
            return seconds / 1000.0
    value = headers.get("retry-after")
    if value:
        seconds = _finite(value)
        if seconds is not None:
            return seconds if seconds >= 0 else None
        try:  # an HTTP date; anything unparseable is ignored (ValueError, or TypeError on 3.9)
            parsed = email.utils.parsedate_to_datetime(value.strip())
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if parsed.tzinfo is None:  # "-0000" dates come back naive; HTTP dates are UTC
            import datetime

            parsed = parsed.replace(tzinfo=datetime.timezone.utc)
        return max(0.0, parsed.timestamp() - time.time())
    return None


def _finite(value: str) -> Optional[float]:
    """``value`` as a finite float, or None ("inf" and "nan" are not delays)."""
    try:
        number = float(value)
    except ValueError:
        return None
    return number if number == number and number not in (float("inf"), float("-inf")) else None


def _should_retry(status: Optional[int], headers: Mapping[str, str]) -> bool:
    flag = headers.get("x-should-retry") if headers else None
    if flag == "true":
        return True
    if flag == "false":
        return False
    return status is None or status in (408, 409, 429) or status >= 500


# --------------------------------------------------------------------------- sending


def _send(session: Any, url: str, headers: Mapping[str, str], body: bytes, timeout: Any, signal: Any) -> Any:
    """POST with ``stream=True`` on this thread, redirects not followed; abortable (see
    :func:`send_abortable`)."""
    return send_abortable(
        session,
        "POST",
        url,
        signal,
        data=body,
        headers=dict(headers),
        stream=True,
        timeout=timeout,
        allow_redirects=False,
    )


def send_abortable(session: Any, method: str, url: str, signal: Any, **kwargs: Any) -> Any:
    """``session.request(method, url, **kwargs)`` that an abort of ``signal`` interrupts while it
    connects, name resolution, a proxy's CONNECT and the TLS handshake included, and while it
    waits for the response headers (which a plain request does not: a slow resolver or an
    unresponsive host holds it for the whole timeout), also through an HTTP(S) proxy. The
    connect timeout bounds the name resolution too (requests' ``ConnectTimeout``). Returns the
    response; raises :class:`RequestAborted` when the signal fired, else what requests raises.

    ``session`` must come from :func:`get_session` for the connect and header wait to be
    interruptible (its connections note their sockets); any other session is sent as is, and so
    is every request when ``signal`` is None. For tools and plugins that make their own requests
    (agentcore-web's fetch); read the body under :func:`close_on_abort`.
    """
    if signal is None or not hasattr(signal, "add_listener"):
        return session.request(method, url, **kwargs)
    if signal.aborted:
        raise RequestAborted("Request was aborted")
    box: Dict[str, Any] = {"lock": threading.Lock()}

    def on_abort(_reason: Any) -> None:
        box["aborted"] = True
        wake = box.get("wake")  # a name resolution being waited for
        if wake is not None:
            wake.set()
        # the socket still connecting, the new connection in its TLS handshake (or a proxy's
        # CONNECT), or the connection's socket waiting for response headers
        with box["lock"]:
            sockets = (box.get("socket"), box.get("handshake"), getattr(box.get("connection"), "sock", None))
            for sock in sockets:
                if isinstance(sock, socket.socket):
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

    _current.box = box
    signal.add_listener(on_abort)
    try:
        response = session.request(method, url, **kwargs)
    except Exception:
        if signal.aborted:
            raise RequestAborted("Request was aborted") from None
        raise
    finally:
        _current.box = None
        signal.remove_listener(on_abort)
        _forget_handshake(box)
    if signal.aborted:
        response.close()
        raise RequestAborted("Request was aborted")
    return response


def _redirect_error(response: Any) -> str:
    """The error of a redirected provider request. Redirects are not followed: requests keeps
    every header but ``Authorization`` on a redirect to another host (``x-api-key``,
    ``x-goog-api-key``, ``api-key`` would go along) and turns a 301/302 POST into a GET without
    its body, so the answer could only be a leaked key or a wrong request."""
    from .._safe import redact_url

    location = response.headers.get("location")
    where = f" to {redact_url(location)}" if location else ""
    return (
        f"{response.status_code} {response.reason or 'Redirect'}{where}: provider requests do not follow "
        "redirects (the API key would go to the new address); set the base URL to the address "
        "that answers"
    )


def _describe_connection_error(exc: BaseException, url: str) -> str:
    """The error text of a failed connection: the host, the request's path (secret-looking query
    values and user info as ``***``) and the root reason (``[Errno 111] Connection refused``,
    ``Failed to resolve 'host'``, ``Read timed out``), without urllib3's wrappers (pool and
    connection object reprs, "Max retries exceeded"), then what to check (the proxy, with its
    ``host:port``, when the failure was reaching the environment's proxy)."""
    from urllib.parse import urlsplit

    from .failures import redact

    secrets: List[str] = []
    shown = _loggable_url(url, secrets)  # collects the URL's secrets
    parts = urlsplit(shown)
    host = parts.netloc
    where = parts.path + (f"?{parts.query}" if parts.query else "")
    reason = redact(_root_reason(exc), secrets)
    import requests

    if isinstance(exc, requests.exceptions.Timeout):
        return f"Request timed out talking to {host} ({where}): {reason}"
    if _certificate_refused(exc):
        return (
            f"TLS error talking to {host} ({where}): {reason} (the server's certificate was refused: for "
            "a private CA, or a proxy that inspects TLS, set REQUESTS_CA_BUNDLE to a file with its CA "
            "certificate)"
        )
    if isinstance(exc, requests.exceptions.ProxyError):  # the proxy failed, not the server
        proxy = _proxy_address(exc)
        if _tunnel_refused(exc):  # the proxy is up: it answered the CONNECT with an error status
            return (
                f"Connection error talking to {host} ({where}) through the proxy{f' at {proxy}' if proxy else ''}: "
                f"{reason} (the proxy refused to open the connection: check the user:password@ of its URL "
                "in HTTPS_PROXY / HTTP_PROXY / ALL_PROXY and whether it allows this host; NO_PROXY names "
                "the hosts reached without it)"
            )
        return (
            f"Connection error talking to {host} ({where}) through the proxy{f' at {proxy}' if proxy else ''}: "
            f"{reason} (is the proxy up and reachable? It comes from HTTPS_PROXY / HTTP_PROXY / ALL_PROXY; "
            "NO_PROXY names the hosts reached without it)"
        )
    return f"Connection error talking to {host} ({where}): {reason} (is the server at {host} up and reachable?)"


def _certificate_refused(exc: BaseException) -> bool:
    """Whether a connection failed because the server's TLS certificate did not verify (an
    unknown CA, a self-signed certificate, a name mismatch): no retry can change that."""
    import ssl

    return any(isinstance(link, ssl.SSLCertVerificationError) for link in _error_chain(exc))


_TUNNEL_STATUS = re.compile(r"Tunnel connection failed: (\d{3})")


def _tunnel_refused(exc: BaseException) -> bool:
    """Whether a proxy answered the CONNECT of an ``https://`` request with a status no retry
    changes (407 Proxy Authentication Required, 403 Forbidden...; not 408, 429 or 5xx)."""
    for link in _error_chain(exc):
        match = _TUNNEL_STATUS.search(str(link))
        if match:
            return not retryable_status(int(match.group(1)))
    return False


def _proxy_address(exc: BaseException) -> Optional[str]:
    """``host:port`` of the proxy a requests ``ProxyError`` failed to reach (its user info never
    shown), when urllib3 says which; else None. The proxy URL a pool or connection was made with
    comes first: through a tunnel (an ``https://`` API behind ``HTTPS_PROXY``) the pool is the
    API host's, and its address is not the proxy's."""
    chain = list(_error_chain(exc))
    for link in chain:
        for holder in (getattr(link, "conn", None), getattr(link, "pool", None)):
            proxy = getattr(holder, "proxy", None)
            host = getattr(proxy, "host", None)
            if isinstance(host, str) and host:
                port = getattr(proxy, "port", None)
                return f"{host}:{port}" if port else host
    for link in chain:
        conn = getattr(link, "conn", None) or getattr(link, "pool", None)  # urllib3 2 / 1.26
        host, port = getattr(conn, "host", None), getattr(conn, "port", None)
        if isinstance(host, str) and host:
            return f"{host}:{port}" if port else host
    return None


_VALID_HEADER_VALUE = re.compile(r"(?:\S[^\r\n]*)?")  # requests' own rule for a str value, fullmatch


def _describe_unsendable(exc: BaseException, url: str, headers: Mapping[str, str]) -> str:
    """The error text of a request that cannot be sent: a malformed URL (the URL shown as
    :func:`_loggable_url` shows it) or header value. A header's value is never quoted: requests'
    own message quotes it (as http.client's does under older requests), and the common case is
    an API key read with its trailing newline."""
    import requests

    from .failures import redact

    bad = [
        name
        for name, value in headers.items()
        if not isinstance(value, (str, bytes))
        or (isinstance(value, str) and not _VALID_HEADER_VALUE.fullmatch(value))
        or (isinstance(value, bytes) and (b"\n" in value or b"\r" in value))
    ]
    if bad or isinstance(exc, requests.exceptions.InvalidHeader) or "header" in str(exc).lower():
        which = f"header {bad[0]!r}" if bad else "a header"
        return (
            f"Cannot send the request: the value of {which} is not a valid HTTP header value (a line "
            "break, or whitespace at its start: was the API key read with its trailing newline?)"
        )
    secrets: List[str] = [str(v) for v in headers.values() if len(str(v)) >= 8]  # what the reason may quote
    shown = _loggable_url(url, secrets)
    from .._safe import ambiguous_userinfo

    if ambiguous_userinfo(url) is not None:  # the reason would quote the password's start as a port
        return (
            f"Cannot send the request to {shown}: the password in the URL holds an unencoded '/', '?' "
            "or '#' (percent-encode it: %2F, %3F, %23)"
        )
    reason = redact(str(exc).replace(url, shown), secrets)
    return f"Cannot send the request to {shown}: {reason} (check the provider's base URL)"


_URLLIB3_PREFIX = re.compile(r"^(?:<[^<>]*>|\w+\(host=[^)]*\)): ")


def _error_chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the errors it wraps, outermost first: requests' error -> urllib3's MaxRetryError
    -> its ``reason`` (NewConnectionError, a timeout...). urllib3's ProxyError and ProtocolError are
    ("what failed", the error): the error is the next link. Bounded against cycles."""
    current = exc
    for _ in range(6):
        yield current
        inner = next((arg for arg in current.args if isinstance(arg, BaseException)), None)
        reason = getattr(current, "reason", None)
        if isinstance(reason, BaseException):
            inner = reason
        if inner is None or inner is current:
            return
        current = inner


def _root_reason(exc: BaseException) -> str:
    """The innermost reason of a requests/urllib3 connection failure, as text: requests wraps
    urllib3's MaxRetryError, whose ``reason`` is the NewConnectionError, NameResolutionError or
    timeout that says what went wrong, prefixed with the repr of a pool or connection object."""
    current = list(_error_chain(exc))[-1]
    args = current.args
    # urllib3's ConnectTimeoutError is (connection, message): its str() is the pair's repr
    text = args[-1] if len(args) > 1 and isinstance(args[-1], str) and not isinstance(args[0], str) else str(current)
    text = _URLLIB3_PREFIX.sub("", text).strip() or type(current).__name__
    return text


def open_stream(
    url: str,
    body: bytes,
    headers: Union[Mapping[str, str], Callable[[], Mapping[str, str]]],
    *,
    session_name: str,
    signal: Any = None,
    timeout: Any = None,
    max_retries: Optional[int] = None,
    max_retry_delay_ms: Optional[int] = None,
    error_style: str = "openai",
    on_response: Optional[Callable[[int, Dict[str, str]], Any]] = None,
    model: Optional[str] = None,
    retry: Optional[RetryBudget] = None,
) -> Any:
    """POST ``body`` and return the open streaming response (2xx); see the module docstring.

    ``headers`` may be a function returning them: it is called before every attempt, for a
    credential that must be made anew each time (an AWS SigV4 signature carries its time, and AWS
    refuses one more than five minutes old, which a retry after a stalled attempt would send).

    ``model`` (the model id) only labels the DEBUG log records, with ``session_name`` as the
    provider. ``retry`` is the request's :class:`RetryBudget` when the caller also retries
    in-stream errors (then ``max_retries``/``max_retry_delay_ms`` are ignored: the budget has
    them); by default each call has its own. A retryable failure out of budget says how many
    attempts were made (``"... (gave up after 3 attempts, max_retries=2)"``). Raises
    :class:`ProviderHTTPError` (status set for HTTP errors) or :class:`RequestAborted`.
    """
    import requests

    session = get_session(session_name)
    budget = retry if retry is not None else RetryBudget(max_retries, max_retry_delay_ms, signal)
    if budget.signal is None:
        budget.signal = signal
    retries, cap_ms = budget.max_retries, budget.cap_ms
    timeout = DEFAULT_TIMEOUT if timeout is None else timeout
    make_headers: Optional[Callable[[], Mapping[str, str]]] = None
    if callable(headers):
        make_headers = headers
        sent: Mapping[str, str] = make_headers()
    else:
        sent = headers
    log = _RequestLog(url, sent, session_name, model, retries) if _log.isEnabledFor(logging.DEBUG) else None
    fresh = True  # ``sent`` was made for the attempt about to be sent
    while True:
        attempt = budget.attempt
        if signal is not None and signal.aborted:
            raise RequestAborted("Request was aborted")
        if make_headers is not None and not fresh:  # made anew for every retry
            sent = make_headers()
            if log is not None:
                log.add_secrets(sent)
        fresh = False
        if log is not None:
            log.request(attempt)
        try:
            response = _send(session, url, sent, body, timeout, signal)
        except RequestAborted:
            raise
        except (requests.exceptions.RequestException, ValueError) as exc:
            # a malformed URL or header value (requests' InvalidURL/InvalidHeader..., or, under
            # older requests, http.client's own ValueError): no attempt can succeed, none is retried
            if isinstance(exc, (ValueError, requests.exceptions.URLRequired)):
                raise ProviderHTTPError(_describe_unsendable(exc, url, sent)) from None
            message = _describe_connection_error(exc, url)
            if _certificate_refused(exc) or _tunnel_refused(exc):  # the same on every attempt
                if log is not None:
                    log.give_up(attempt, message)
                raise ProviderHTTPError(message) from None
            if budget.exhausted:
                if log is not None:
                    log.give_up(attempt, message)
                raise ProviderHTTPError(budget.gave_up(message)) from None
            delay = budget.backoff()
            if log is not None:
                log.retry(attempt, message, delay)
            budget.wait(delay)
            continue
        if log is not None:
            log.response(response)
        if on_response is not None:
            try:
                on_response(response.status_code, dict(response.headers))
            except BaseException:  # the caller's hook: its error stands, the connection is let go
                response.close()
                raise
        if 200 <= response.status_code < 300:
            return response
        if 300 <= response.status_code < 400:  # never followed: see _redirect_error
            response.close()
            if log is not None:
                log.give_up(attempt, f"status {response.status_code}")
            raise ProviderHTTPError(_redact_request_secrets(_redirect_error(response), url, sent), response.status_code)
        error_body, unread = _read_abortable(response, signal)
        response.close()
        if signal is not None and signal.aborted:
            raise RequestAborted("Request was aborted")
        message = format_http_error(response.status_code, error_body, error_style)
        if unread is not None:
            message += f" ({unread})"
        message = _redact_request_secrets(message, url, sent)
        retryable = _should_retry(response.status_code, response.headers)
        if budget.exhausted or not retryable:
            if log is not None:
                log.give_up(attempt, f"status {response.status_code}")
            raise ProviderHTTPError(budget.gave_up(message) if retryable else message, response.status_code)
        server_delay = retry_delay_from_headers(response.headers)
        if server_delay is not None and cap_ms and server_delay * 1000 > cap_ms:
            if _log.hasHandlers():  # else the error alone reports it (logging's last resort
                # handler would print the same fact to stderr a second time)
                _log.warning(
                    "%s asked to wait %gs before retrying (status %d), above the cap of %gs "
                    "(max_retry_delay_ms): not retrying",
                    session_name,
                    server_delay,
                    response.status_code,
                    cap_ms / 1000,
                )
            raise ProviderHTTPError(
                f"Server requested {server_delay:g}s retry delay (max: {cap_ms / 1000:g}s). {message}",
                response.status_code,
            )
        delay = budget.backoff() if server_delay is None else server_delay
        if log is not None:
            log.retry(
                attempt,
                f"status {response.status_code}",
                delay,
                "retry-after" if server_delay is not None else "backoff",
            )
        budget.wait(delay)


def _redact_request_secrets(text: str, url: str, headers: Mapping[str, str]) -> str:
    """``text`` (a server's words) without the request's credentials: a server may echo the key
    it rejected, and the error's message must never carry it."""
    from .failures import redact, secret_header_values, secret_url_values

    return redact(text, secret_header_values(headers) + secret_url_values(url))


_log = logging.getLogger(__name__)

_REQUEST_ID_HEADERS = ("x-request-id", "request-id", "x-goog-request-id", "x-amzn-requestid", "cf-ray")


class _RequestLog:
    """The DEBUG records of one :func:`open_stream` call; created only when DEBUG is enabled.

    Every text that may echo a secret (a connection error repeats the URL) goes through
    :func:`agentcore.providers.base.redact` with the request's secret header values and query
    values first."""

    def __init__(self, url: str, headers: Mapping[str, str], provider: str, model: Optional[str], retries: int) -> None:
        from .failures import secret_header_values

        self.secrets = secret_header_values(headers)
        self.url = _loggable_url(url, self.secrets)
        self.label = f"provider={provider} model={model or '-'}"
        self.retries = retries
        self.started = 0.0

    def add_secrets(self, headers: Mapping[str, str]) -> None:
        """The secret values of a later attempt's headers (made anew: a new signature)."""
        from .failures import secret_header_values

        self.secrets.extend(secret_header_values(headers))

    def _redact(self, text: str) -> str:
        from .failures import redact

        return redact(text, self.secrets)

    def request(self, attempt: int) -> None:
        self.started = time.perf_counter()
        _log.debug("POST %s %s attempt=%d/%d", self.url, self.label, attempt + 1, self.retries + 1)

    def response(self, response: Any) -> None:
        duration = (time.perf_counter() - self.started) * 1000
        headers = response.headers
        request_id = next((headers[name] for name in _REQUEST_ID_HEADERS if headers.get(name)), "-")
        _log.debug(
            "response %d %s duration_ms=%.1f request_id=%s",
            response.status_code,
            self.label,
            duration,
            self._redact(str(request_id)),
        )

    def retry(self, attempt: int, reason: str, delay: float, source: str = "backoff") -> None:
        _log.debug(
            "retry %s reason=%s delay_s=%.3f (%s) attempt=%d/%d",
            self.label,
            self._redact(reason),
            delay,
            source,
            attempt + 2,
            self.retries + 1,
        )

    def give_up(self, attempt: int, reason: str) -> None:
        _log.debug(
            "no retry %s reason=%s after attempt=%d/%d", self.label, self._redact(reason), attempt + 1, self.retries + 1
        )


def _loggable_url(url: str, secrets: List[str]) -> str:
    """``url`` without user info (also one whose password holds an unencoded ``/``, ``?`` or
    ``#``, and one written without its scheme: ``user:secret@proxy/v1``), and with the values of secret-looking query parameters (and any known secret)
    replaced by ``***``; their values join ``secrets``."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    from .._safe import ambiguous_userinfo, schemeless_userinfo
    from .failures import is_secret_query_name, redact

    split = ambiguous_userinfo(url)
    if split is not None:  # a password with an unencoded "/", "?" or "#": parsers see no user info
        head, userinfo, after = split
        secrets.extend(p for p in userinfo.split(":", 1) if p)
        url = head + after
    bare = schemeless_userinfo(url)
    if bare is not None:  # "user:secret@proxy/v1", its http:// forgotten: parsers see a scheme "user"
        secrets.extend(p for p in bare[:2] if p)
        url = bare[2]
    try:
        parts = urlsplit(url)
        netloc = parts.netloc.rsplit("@", 1)[-1]
        if "@" in parts.netloc:
            secrets.extend(p for p in parts.netloc.rsplit("@", 1)[0].split(":") if p)
        query = []
        for name, value in parse_qsl(parts.query, keep_blank_values=True):
            if is_secret_query_name(name):
                secrets.append(value)
                value = "***"
            query.append((name, value))
        text = urlunsplit((parts.scheme, netloc, parts.path, urlencode(query, safe="*"), ""))
    except ValueError:
        return "<unparseable URL>"
    return redact(text, secrets)


def _read_abortable(response: Any, signal: Any) -> Tuple[str, Optional[str]]:
    """The error body (see :func:`_read_error_body`); an abort meanwhile closes the response so a
    stalled read returns at once."""
    with close_on_abort(response, signal):
        return _read_error_body(response)


_MAX_ERROR_BODY = 256 * 1024


def _read_error_body(response: Any) -> Tuple[str, Optional[str]]:
    """The text of an error response's body (at most 256 KB of it) and, when the body could not
    be read to its end, why: ``"the body could not be read: ..."`` when none of it arrived (a
    gzip body that does not inflate, a connection reset), ``"the body was cut short: ..."`` after
    the part that did (also when fewer bytes came than ``Content-Length`` declared). Never raises:
    a broken error body still leaves the status to report."""
    chunks: List[bytes] = []
    size = 0
    failure: Optional[BaseException] = None
    read = getattr(response.raw, "read1", None) or response.raw.read  # read1: what arrived (urllib3 2)
    try:
        while size < _MAX_ERROR_BODY:
            data = read(min(65536, _MAX_ERROR_BODY - size), decode_content=True)
            if not data:
                break
            chunks.append(data)
            size += len(data)
    except Exception as exc:  # noqa: BLE001 - reported in the message, never raised
        failure = exc
    raw = b"".join(chunks)
    text = _decode_error_body(raw, response.headers.get("content-type") or "", response.encoding) if raw else ""
    how = "was cut short" if text.strip() else "could not be read"
    if failure is not None:
        from .._safe import describe_exception

        return text, f"the body {how}: {describe_exception(failure)}"
    declared = response.headers.get("content-length") or ""
    encoding = (response.headers.get("content-encoding") or "identity").strip().lower()
    if size < _MAX_ERROR_BODY and encoding == "identity" and declared.isdigit() and size < int(declared):
        return text, f"the body {how}: {size} of {declared} bytes arrived"  # urllib3 1.26 does not raise
    return text, None


def _decode_error_body(raw: bytes, content_type: str, fallback: Optional[str]) -> str:
    """The text of an error body: in the charset its ``Content-Type`` names (when Python knows
    it), else UTF-8 when it is valid UTF-8 (what servers send; requests' ISO-8859-1 default for
    ``text/*`` would garble it), else ``fallback`` (requests' guess from the headers); undecodable
    bytes become U+FFFD and a leading byte order mark is dropped. Never raises (an unknown charset
    name is ignored)."""
    declared = re.search(r";\s*charset\s*=\s*[\"']?([^\"';\s]+)", content_type, re.IGNORECASE)
    candidates = [declared.group(1)] if declared else ["utf-8", fallback]
    for index, name in enumerate(candidates):
        try:
            if name:
                return raw.decode(name, errors="replace" if declared or index else "strict").lstrip("\ufeff")
        except (LookupError, ValueError):  # no such (text) encoding, or not valid UTF-8
            continue
    return raw.decode("utf-8", errors="replace").lstrip("\ufeff")


# --------------------------------------------------------------------------- reading


def iter_body(response: Any, chunk_size: int = 65536) -> Iterator[bytes]:
    """Yield body bytes as soon as they arrive (never waits to fill ``chunk_size``).

    A chunked body (how streaming APIs answer) yields one HTTP chunk at a time, as it completes:
    servers flush one or a few events per chunk, and urllib3's chunk reader does one buffered
    read per chunk where ``read1`` goes through several layers. A chunk larger than
    ``chunk_size`` comes in pieces of ``chunk_size`` bytes (its events are not held back until
    its end, and a chunk declared larger than memory is no ``OverflowError``). Other bodies use
    ``read1``. A ``Content-Encoding`` (gzip, deflate: requests offers them) is decoded either way.
    """
    raw = response.raw
    if getattr(raw, "chunked", False) and _chunked_reads(raw):
        yield from raw.read_chunked(chunk_size, decode_content=True)
        return
    read1 = getattr(raw, "read1", None)
    if read1 is None:  # urllib3 1.26
        yield from _iter_read1_urllib3_1(response, chunk_size)
        return
    while True:
        data = read1(chunk_size, decode_content=True)  # requests leaves decoding to its callers
        if not data:
            return
        yield data


def _iter_read1_urllib3_1(response: Any, chunk_size: int) -> Iterator[bytes]:
    """:func:`iter_body` for a non-chunked body on urllib3 1.26 (no ``read1``; ``read(n)`` and
    ``iter_content`` wait for ``n`` bytes or the end): read the http.client response under it,
    decoding gzip here. Other encodings (deflate, br) take ``iter_content``, which waits."""
    import zlib

    read1 = http_client_read1(response.raw)
    encoding = (response.headers.get("Content-Encoding") or "").strip().lower()
    if read1 is None or encoding not in ("", "identity", "gzip", "x-gzip"):
        yield from response.iter_content(chunk_size=None)
        return
    decoder = zlib.decompressobj(16 + zlib.MAX_WBITS) if encoding in ("gzip", "x-gzip") else None
    while True:
        data = read1(chunk_size)
        if not data:
            break
        if decoder is not None:
            data = decoder.decompress(data)
        if data:
            yield data
    if decoder is not None:
        tail = decoder.flush()
        if tail:
            yield tail


def _chunked_reads(raw: Any) -> bool:
    supports = getattr(raw, "supports_chunked_reads", None)
    return supports is not None and bool(supports()) and hasattr(raw, "read_chunked")


def release_response(response: Any, fully_read: bool) -> None:
    """Return a fully read response's connection to the pool; close any other response."""
    if fully_read:
        release = getattr(response.raw, "release_conn", None)
        if release is not None:
            release()
            return
    response.close()


@contextlib.contextmanager
def close_on_abort(response: Any, signal: Any) -> Iterator[None]:
    """While the ``with`` block runs, an abort of ``signal`` closes ``response`` at once.

    For tools and plugins that read a streaming ``requests`` response (``stream=True``) and must
    stop when the run is aborted: the abort listener runs on the aborting thread and calls
    :func:`close_response`, so a read blocked on the socket in the block raises promptly (which
    exception depends on where the read was; check ``signal.aborted`` when handling it). When the
    signal already fired on entry the response is closed before the block starts. ``signal`` may
    be None (nothing to watch) or anything with ``add_listener``/``remove_listener`` (an
    :class:`~agentcore.signals.AbortSignal`); the listener is removed on exit, and the response
    is left open for the caller to close or release.

        with close_on_abort(response, signal):
            for chunk in iter_body(response):
                ...
    """
    if signal is None or not hasattr(signal, "add_listener"):
        yield
        return

    def on_abort(_reason: Any) -> None:
        close_response(response)

    signal.add_listener(on_abort)  # runs at once when already aborted
    try:
        yield
    finally:
        signal.remove_listener(on_abort)


def close_response(response: Any) -> None:
    """Close ``response`` from any thread; a read blocked on its socket returns promptly.

    Shuts the socket down first (closing alone does not wake a thread blocked in ``recv``), then
    closes the response; never raises. Safe to call twice or while another thread reads.
    """
    sock = response_socket(response)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    try:
        response.close()
    except Exception:  # closing twice or racing the reader is harmless
        pass

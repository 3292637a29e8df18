"""How a provider stream fails (providers spec §4.6): the errors, the terminal ``error`` event,
redaction of secrets and the ``provider_error`` diagnostics.

Every wire module, built-in or plugin, ends a failed stream with :func:`error_event`; it never
raises for a request or model failure. Messages are redacted (:func:`redact`) before they reach the
message, the session file or a log, so a key a server echoes back is never kept.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Dict, FrozenSet, Iterable, List, Mapping, Optional, Set, Tuple

from .._errors import PicklableError
from .._safe import ambiguous_userinfo, describe_exception, exception_message, schemeless_userinfo
from ..events import ErrorEvent
from ..types import AssistantMessage, Diagnostic, now_ms

__all__ = [
    "ABORTED_MESSAGE",
    "MissingApiKeyError",
    "ProviderError",
    "error_event",
    "signal_aborted",
    "describe_error",
    "redact",
    "secret_forms",
    "secret_url_values",
    "is_secret_query_name",
    "SECRET_QUERY_WORDS",
    "is_secret_header",
    "secret_header_values",
    "add_diagnostic",
    "failure_diagnostic",
]

ABORTED_MESSAGE = "Request was aborted"


class MissingApiKeyError(PicklableError, Exception):
    """No API key for a provider that needs one. The message names the variable to set."""

    def __init__(self, provider: str, env_vars: Tuple[str, ...] = ()) -> None:
        hint = " or ".join(env_vars) if env_vars else "the provider's API key variable"
        super().__init__(f'no API key for provider "{provider}": set {hint} or pass api_key=')
        self.provider = provider
        self.env_vars = env_vars


class ProviderError(PicklableError, Exception):
    """A failure reported by the provider inside the stream (error event, bad stop reason...).

    ``retryable`` marks a transient failure the server reported in the stream (overloaded, rate
    limited, internal error: what HTTP 429/5xx say before a stream starts). The skeleton retries
    it like those statuses when no content was emitted yet (see :func:`~agentcore.providers.retries.retryable_error`).
    """

    def __init__(self, message: str = "", *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


def error_event(
    output: AssistantMessage,
    exc: BaseException,
    signal: Any,
    secrets: Iterable[str],
    describe: Optional[Callable[[BaseException], str]] = None,
    started: Optional[bool] = None,
    **details: Any,
) -> ErrorEvent:
    """The terminal ``error`` event of a failed stream (spec §4.6): ``stop_reason`` "aborted" when
    the signal fired (message "Request was aborted"), else "error" with ``describe(exc)``,
    secrets redacted (``describe`` defaults to :func:`describe_error`), and a ``provider_error``
    diagnostic (:func:`failure_diagnostic`; ``started`` and ``details`` go into it). Content
    streamed so far stays on ``output``."""
    aborted = signal_aborted(signal)
    output.stop_reason = "aborted" if aborted else "error"
    if aborted:
        output.error_message = ABORTED_MESSAGE
    else:
        output.error_message = redact((describe or describe_error)(exc), secrets)
        failure_diagnostic(output, exc, output.error_message, started, **details)
    return ErrorEvent(output.stop_reason, output)


def signal_aborted(signal: Any) -> bool:
    """Whether an abort signal (or None) has fired."""
    return signal is not None and bool(getattr(signal, "aborted", False))


_SECRET_HEADERS = frozenset(
    {
        "authorization",
        "x-api-key",
        "api-key",
        "x-goog-api-key",
        "x-amz-security-token",
        "cookie",
        "proxy-authorization",
    }
)
# gateways and proxies authenticate with headers of their own (Cloudflare cf-aig-authorization,
# Portkey x-portkey-api-key, Helicone helicone-auth ...): a name with one of these words counts too
_SECRET_NAME_WORDS = frozenset({"auth", "authorization", "token", "secret", "password", "apikey", "key"})


def is_secret_header(name: str) -> bool:
    """Whether header ``name`` carries a credential: the known names (``Authorization``,
    ``x-api-key``, ``api-key``, ``x-goog-api-key``, ``x-amz-security-token``, cookies) or any name
    with a credential word between its dashes or underscores (``auth``, ``token``, ``key``,
    ``secret``, ``password`` ...), compared case-insensitively. Over-matching only costs a
    redacted header value in an error message."""
    known = _secret_names.get(name)
    if known is None:
        lowered = str(name).lower()
        known = lowered in _SECRET_HEADERS or bool(_SECRET_NAME_WORDS & set(lowered.replace("_", "-").split("-")))
        if isinstance(name, str) and len(_secret_names) < 1024:  # the few names a process sends
            _secret_names[name] = known
    return known


_secret_names: Dict[str, bool] = {}  # is_secret_header's answers (a pure function of the name)


def secret_header_values(headers: Mapping[str, Any]) -> List[str]:
    """The values of ``headers`` that are credentials (see :func:`is_secret_header`), and the
    bare token of a ``Bearer``/``Basic``/``Token`` value, for :func:`redact`."""
    values = []
    for name, value in headers.items():
        if is_secret_header(name) and isinstance(value, str):
            values.append(value)
            scheme, _, token = value.partition(" ")
            if token and scheme.lower() in ("bearer", "basic", "token"):
                values.append(token)
    return values


#: Words that make a URL query parameter a credential (``?api_key=``, ``?token=``, ``?sig=``).
SECRET_QUERY_WORDS = ("key", "token", "secret", "password", "auth", "sig", "credential")


def is_secret_query_name(name: str) -> bool:
    """Whether a query parameter of this name holds a credential (see :data:`SECRET_QUERY_WORDS`)."""
    lowered = name.lower()
    return any(word in lowered for word in SECRET_QUERY_WORDS)


def secret_url_values(url: str) -> List[str]:
    """The credentials a request URL carries, for :func:`redact`: the password of its user info
    (as written and decoded; also of a URL written without its scheme), the ``Basic`` token requests builds from ``user:password``, and the
    values of secret-looking query parameters (``key``, ``token``, ``secret``, ``password``...)."""
    import base64
    from urllib.parse import parse_qsl, unquote, urlsplit

    values: List[str] = []
    split = ambiguous_userinfo(url) if isinstance(url, str) else None
    if split is not None:  # a password with an unencoded "/", "?" or "#": URL parsers see none
        secret = split[1].split(":", 1)[1]
        for candidate in {secret, secret.split("@", 1)[0]}:
            values += [candidate, unquote(candidate)]
        url = f"{split[0]}{split[1].split(':', 1)[0]}@{split[2]}"
    bare = schemeless_userinfo(url)
    if bare is not None:  # "user:secret@proxy/v1", its http:// forgotten: parsers see no password
        values += [bare[1], unquote(bare[1])] if bare[1] else []
        url = bare[2]
    try:
        parts = urlsplit(url)
        password = parts.password
        query = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:
        return values
    if password:
        user = unquote(parts.username or "")
        values += [password, unquote(password)]
        values.append(base64.b64encode(f"{user}:{unquote(password)}".encode("latin-1", "replace")).decode("ascii"))
    values += [value for name, value in query if value and is_secret_query_name(name)]
    return values


def secret_forms(secret: Any) -> FrozenSet[str]:
    """The ways a text may show ``secret``: as it is, stripped of surrounding whitespace, and
    escaped as Python's ``repr`` and JSON escape it (how ``requests`` and servers quote a value they
    reject, a key read from a file with its newline, say). Empty for anything but a non-empty
    string; never holds the empty string (a secret of whitespace strips to nothing)."""
    if not isinstance(secret, str) or not secret:
        return frozenset()
    return frozenset(form for form in (secret, secret.strip(), repr(secret)[1:-1], json.dumps(secret)[1:-1]) if form)


def redact(text: str, secrets: Iterable[str], min_length: int = 8) -> str:
    """``text`` with every secret of ``min_length`` or more characters replaced by ``***``, in each
    of its :func:`secret_forms` (longest first, so a secret that contains another goes whole).

    Servers sometimes echo the key they rejected; the message ends up in the transcript, the
    session file and logs, so it must never carry the key. Anything but a non-empty string in
    ``secrets`` is ignored."""
    forms: Set[str] = set()
    for secret in secrets:
        forms.update(secret_forms(secret))
    for form in sorted((f for f in forms if len(f) >= min_length), key=len, reverse=True):
        text = text.replace(form, "***")
    return text


def add_diagnostic(
    output: AssistantMessage,
    type: str,
    error: Optional[Dict[str, Any]] = None,
    details: Optional[Dict[str, Any]] = None,
) -> Diagnostic:
    """Append a :class:`~agentcore.types.Diagnostic` to ``output.diagnostics`` (creating the list)
    and return it. ``error`` and ``details`` must already be free of secrets."""
    diagnostic = Diagnostic(type, now_ms(), error, details)
    if output.diagnostics is None:
        output.diagnostics = []
    output.diagnostics.append(diagnostic)
    return diagnostic


def failure_diagnostic(
    output: AssistantMessage, exc: BaseException, message: str, started: Optional[bool] = None, **details: Any
) -> Diagnostic:
    """Record why a stream failed (reference ``provider_error``): the exception's type, the
    already redacted ``message``, the HTTP status when there was one, and, when ``started`` is
    known, whether the failure came before or after ``start`` (``phase``). ``details`` adds wire
    facts (an error code); None values are left out. Callers skip aborts: they are not failures."""
    status = getattr(exc, "status", None)
    facts: Dict[str, Any] = {}
    if started is not None:
        facts["phase"] = "after_message_stream_start" if started else "before_message_stream_start"
    error: Dict[str, Any] = {"name": type(exc).__name__, "message": message}
    if isinstance(status, int):
        facts["status"] = status
        error["code"] = status
    facts.update({k: v for k, v in details.items() if v is not None})
    return add_diagnostic(output, "provider_error", error=error, details=facts)


def describe_error(exc: BaseException) -> str:
    """The ``error_message`` text for a failure of a stream: the provider's own message for
    provider, key and HTTP errors, a plain description of lost connections and timeouts, else
    ``"<ExceptionType>: <text>"``. Callers redact secrets (:func:`redact`).

    A lost connection or a timeout is told by its root reason (``Connection reset by peer``,
    ``70 bytes read, 113 more expected``, ``Read timed out.``), without the reprs of urllib3's
    wrappers (a ``("Connection broken: ...", ConnectionResetError(...))`` pair, a pool object)."""
    from . import http

    if isinstance(exc, (ProviderError, MissingApiKeyError, http.ProviderHTTPError)):
        return exception_message(exc)
    name = type(exc).__name__
    if _undecodable(exc):
        return f"The response body could not be decoded: {_decode_reason(exc)}"
    if (
        "ChunkedEncodingError" in name
        or "ProtocolError" in name
        or "ConnectionError" in name
        or isinstance(exc, ConnectionError)  # urllib3 1.26 lets a bare ConnectionResetError through
    ):
        return f"Connection lost while streaming the response: {_root_reason(exc)}"
    if "Timeout" in name:
        return f"Timed out while streaming the response: {_root_reason(exc)}"
    return describe_exception(exc)  # never raises, even for an exception whose str() does


def _undecodable(exc: BaseException) -> bool:
    """Whether ``exc`` says a response body did not decode in the ``Content-Encoding`` its server
    declared (urllib3's ``DecodeError``, requests' ``ContentDecodingError``): the server sends
    the same body again, so it is no transient failure."""
    return any(cls.__name__ in ("DecodeError", "ContentDecodingError") for cls in type(exc).__mro__)


def _decode_reason(exc: BaseException) -> str:
    """urllib3's ``(text, zlib.error(...))`` pair as one sentence, without the reprs."""
    parts: List[str] = []
    for arg in exc.args:
        if isinstance(arg, BaseException) and _undecodable(arg):  # requests wraps urllib3's
            return _decode_reason(arg)
        text = exception_message(arg) if isinstance(arg, BaseException) else str(arg)
        if text.strip():
            parts.append(text.strip().rstrip("."))
    return ": ".join(parts) or type(exc).__name__


_INCOMPLETE_READ = re.compile(r"^IncompleteRead\((.*)\)$")


def _root_reason(exc: BaseException) -> str:
    """The innermost reason of a transport failure (its own text when there is none to tell)."""
    from .http import _root_reason as root_reason

    try:
        reason = root_reason(exc)
    except Exception:  # noqa: BLE001 - a wrapped error whose str() raises: say what we have
        reason = ""
    return _INCOMPLETE_READ.sub(r"\1", reason) or exception_message(exc)

"""The skeleton every wire API shares (spec/providers.md §4) and small helpers they all need.

A wire module subclasses :class:`WireProvider` and supplies only:

* ``build_request(model, context, options, api_key) -> WireRequest(url, headers, body)``;
* ``new_handler(model, writer, options) -> WireHandler`` whose ``on_event(sse_event)`` turns one
  parsed SSE event into :class:`StreamWriter` calls (returning True once the API's terminal event
  arrived) and whose ``on_end(terminal_seen)`` raises when the stream ended too early.

``WireProvider.stream(model, context, **options)`` then does the rest: builds the output
``AssistantMessage``, resolves the API key (``api_key=`` > environment, spec §19), merges headers
(provider defaults < ``model.headers`` < ``options["headers"]``), runs ``on_payload``, POSTs with
retries, pushes ``start`` once the headers arrived OK, feeds SSE events to the handler, closes open
blocks, and ends with exactly one ``done`` or ``error`` event. It never raises for request or model
failures: those end the stream with an ``error`` event whose message has ``stop_reason`` "error"
(or "aborted" when the ``signal`` fired) and ``error_message`` set; partial content is kept.

The writer lives in :mod:`agentcore.providers.writer` and the failure helpers (errors, the error
event, redaction, diagnostics) in :mod:`agentcore.providers.failures`; both are re-exported here,
so ``from agentcore.providers.base import StreamWriter, ProviderError`` keeps working.
"""

from __future__ import annotations

import collections.abc
import json
import os
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

from .._compat import json_scanner
from .._surrogates import HAS_SURROGATE, fix_surrogates
from ..events import DoneEvent, StartEvent
from ..options import header_problem
from ..streams import ProviderStream
from ..types import AssistantMessage, Model, Usage, now_ms
from .failures import (
    ABORTED_MESSAGE,
    MissingApiKeyError,
    ProviderError,
    add_diagnostic,
    describe_error,
    error_event,
    failure_diagnostic,
    is_secret_header,
    redact,
    secret_header_values,
    secret_url_values,
    signal_aborted,
)
from .retries import RetryBudget, retry_or_raise, transient
from .writer import StreamWriter

__all__ = [
    "MAPPINGS",
    "MissingApiKeyError",
    "ProviderError",
    "error_event",
    "signal_aborted",
    "WireRequest",
    "WireHandler",
    "StateHandler",
    "WireProvider",
    "StreamWriter",
    "ProviderStream",
    "ENV_API_KEYS",
    "get_env_api_key",
    "resolve_api_key",
    "clean_api_key",
    "merge_headers",
    "clean_header_value",
    "new_output",
    "encode_body",
    "is_secret_header",
    "secret_header_values",
    "expand_url_variables",
    "endpoint_url",
    "sanitize_surrogates",
    "tool_specs",
    "parse_json_event",
    "ABORTED_MESSAGE",
    "as_signal",
    "request_timeout",
    "describe_error",
    "redact",
    "add_diagnostic",
    "failure_diagnostic",
]

# ``isinstance(x, typing.Mapping)`` costs about 1 us (typing's __instancecheck__ runs in Python);
# decoded JSON is a dict, which this tuple matches first on the C fast path. Several checks per
# streamed chunk made it a quarter of a wire module's per-delta cost
# (plugins/agentcore-vertex/benchmarks/bench_parse.py).
MAPPINGS = (dict, collections.abc.Mapping)


# --------------------------------------------------------------------------- API keys (spec §19)

ENV_API_KEYS: Dict[str, Tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_OAUTH_TOKEN", "ANTHROPIC_API_KEY"),
    "google": ("GEMINI_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "cerebras": ("CEREBRAS_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "vercel-ai-gateway": ("AI_GATEWAY_API_KEY",),
    "zai": ("ZAI_API_KEY",),
    "minimax": ("MINIMAX_API_KEY",),
    "minimax-cn": ("MINIMAX_CN_API_KEY",),
    "huggingface": ("HF_TOKEN",),
    "opencode": ("OPENCODE_API_KEY",),
    "opencode-go": ("OPENCODE_API_KEY",),
    "kimi-coding": ("KIMI_API_KEY",),
    "azure-openai-responses": ("AZURE_OPENAI_API_KEY",),
    "azure-openai": ("AZURE_OPENAI_API_KEY",),  # chat completions on Azure deployments
    "github-copilot": ("COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "fireworks": ("FIREWORKS_API_KEY",),
    "moonshotai": ("MOONSHOT_API_KEY",),
    "moonshotai-cn": ("MOONSHOT_API_KEY",),
    "cloudflare-workers-ai": ("CLOUDFLARE_API_KEY",),
    "cloudflare-ai-gateway": ("CLOUDFLARE_API_KEY",),
    "xiaomi": ("XIAOMI_API_KEY",),
    "xiaomi-token-plan-cn": ("XIAOMI_TOKEN_PLAN_CN_API_KEY",),
    "xiaomi-token-plan-ams": ("XIAOMI_TOKEN_PLAN_AMS_API_KEY",),
    "xiaomi-token-plan-sgp": ("XIAOMI_TOKEN_PLAN_SGP_API_KEY",),
    "google-vertex": ("GOOGLE_CLOUD_API_KEY",),
    "amazon-bedrock": ("AWS_BEARER_TOKEN_BEDROCK",),
}
"""Environment variables holding each provider's key, in precedence order."""

_AUTHENTICATED = "<authenticated>"


def get_env_api_key(provider: str, env: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The API key of ``provider`` from its environment variables, or None.

    google-vertex and amazon-bedrock return the marker ``"<authenticated>"`` when ambient
    credentials (ADC file + project + location; AWS profile/keys/container/web identity) exist.
    Unknown providers give None (local servers need no key).
    """
    env = os.environ if env is None else env
    for name in ENV_API_KEYS.get(provider, ()):
        value = env.get(name)
        if value:
            return value
    if provider == "google-vertex":
        adc = env.get("GOOGLE_APPLICATION_CREDENTIALS") or os.path.expanduser(
            "~/.config/gcloud/application_default_credentials.json"
        )
        project = env.get("GOOGLE_CLOUD_PROJECT") or env.get("GCLOUD_PROJECT")
        if os.path.isfile(adc) and project and env.get("GOOGLE_CLOUD_LOCATION"):
            return _AUTHENTICATED
    if provider == "amazon-bedrock":
        if (
            env.get("AWS_PROFILE")
            or (env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"))
            or env.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
            or env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI")
            or env.get("AWS_WEB_IDENTITY_TOKEN_FILE")
        ):
            return _AUTHENTICATED
    return None


def resolve_api_key(provider: str, explicit: Optional[str] = None) -> Optional[str]:
    """``explicit`` if non-empty, else the environment's key, without surrounding whitespace.

    A key read from a file often ends with a newline; HTTP drops whitespace around a header value
    anyway, so it is stripped here rather than refused. Raises TypeError when ``explicit`` is not a
    string, :class:`ProviderError` when the key holds a line break or another control character
    (neither message shows the key), and :class:`MissingApiKeyError` for a provider with known key
    variables and no key; returns None for providers without any (custom/local endpoints that need
    no key).
    """
    key = clean_api_key(explicit) or clean_api_key(
        get_env_api_key(provider), f"the {provider} key from the environment"
    )
    if key:
        return key
    if provider in ENV_API_KEYS:
        raise MissingApiKeyError(provider, ENV_API_KEYS[provider])
    return None


def clean_api_key(key: Any, where: str = "api_key") -> Optional[str]:
    """``key`` without surrounding whitespace, or None when that leaves nothing. What every
    provider (a plugin's too) does with a key before sending it; see :func:`resolve_api_key`.

    Raises TypeError when ``key`` is neither None nor a string, and :class:`ProviderError` when it
    holds a line break or another control character; ``where`` names the key in the message,
    which never shows it."""
    if key is None:
        return None
    if not isinstance(key, str):
        raise TypeError(f"{where} must be a string, not {type(key).__name__}")
    key = key.strip()
    if not key.isprintable():
        raise ProviderError(f"{where} contains a line break or another control character; check how it was read")
    return key or None


# --------------------------------------------------------------------------- small helpers

_URL_VARIABLE = re.compile(r"\{([A-Z][A-Z0-9_]*)\}")


def expand_url_variables(url: str, model: Any = None, env: Optional[Mapping[str, str]] = None) -> str:
    """``url`` with each ``{NAME}`` (an upper-case environment variable name) replaced by its value.

    Catalog base URLs name per-account parts this way (Cloudflare's
    ``.../accounts/{CLOUDFLARE_ACCOUNT_ID}/ai/v1``). Raises :class:`ProviderError` naming the
    model and the variables to set when one is unset (the URL shown with its password and
    key-like query values as ``***``); lower-case placeholders are left alone.
    """
    if "{" not in url:
        return url
    env = os.environ if env is None else env
    missing = [name for name in _URL_VARIABLE.findall(url) if not env.get(name)]
    if missing:
        from .._safe import redact_url

        label = f"{model.provider}/{model.id}" if model is not None else "this model"
        names = ", ".join(dict.fromkeys(missing))
        raise ProviderError(f"the base URL of {label} needs {names}: set it in the environment ({redact_url(url)})")
    return _URL_VARIABLE.sub(lambda match: env[match.group(1)], url)


def endpoint_url(base: str, path: str) -> str:
    """``base`` (a model's base URL) with ``path`` appended to its path, the query string of
    either kept after it: ``endpoint_url("https://h/v1?key=K", "chat/completions")`` is
    ``https://h/v1/chat/completions?key=K`` (appending to the text sent ``key=K/chat/completions``
    as the query, to path ``/v1``), ``endpoint_url(base, "models/m:x?alt=sse")`` joins
    ``alt=sse`` after the base's query. A fragment is dropped (never sent). Every wire module
    builds its request URL with it."""
    from .._safe import ambiguous_userinfo

    split = ambiguous_userinfo(base)  # a password holding "?" or "#" is not a query
    head, rest = (split[0] + split[1] + "@", split[2]) if split is not None else ("", base)
    rest = rest.partition("#")[0]
    base_path, _, base_query = rest.partition("?")
    extra_path, _, extra_query = path.partition("?")
    url = head + base_path.rstrip("/") + "/" + extra_path.lstrip("/")
    query = "&".join(q for q in (base_query, extra_query) if q)
    return f"{url}?{query}" if query else url


def sanitize_surrogates(text: str) -> str:
    """``text`` without unpaired UTF-16 surrogates, which every API rejects (spec §5). A high
    surrogate followed by a low one (an emoji a provider split into two escapes, over two
    deltas) is joined into its character, not dropped."""
    if not text:
        return text
    return fix_surrogates(text, _dropped) if HAS_SURROGATE.search(text) else text


def _dropped(_surrogate: str) -> str:
    return ""


def merge_headers(*layers: Optional[Mapping[str, Any]]) -> Dict[str, str]:
    """Merge header dicts; later layers win, names compared case-insensitively; None values drop.

    Each value goes through :func:`clean_header_value` (a string without surrounding whitespace);
    a header it refuses (no HTTP header name, a line break or control character in the value, a
    value that is not a string, bytes or a number) raises :class:`ProviderError` naming the
    header, never showing the value (it may be a credential: ``requests`` would echo it into the
    error message, and from there into the transcript).
    """
    merged: Dict[str, Tuple[str, Any]] = {}
    for layer in layers:
        for name, value in (layer or {}).items():
            merged[name.lower() if type(name) is str else name] = (name, value)
    try:
        return {name: clean_header_value(name, value) for name, value in merged.values() if value is not None}
    except ValueError as exc:
        raise ProviderError(str(exc)) from None


def clean_header_value(name: str, value: Any) -> str:
    """``value`` as a string (bytes read as Latin-1) without surrounding whitespace (HTTP's own
    reading of a header value).

    Raises ValueError with :func:`~agentcore.options.header_problem`'s reason when ``name`` is no
    HTTP header name or the value cannot be sent (a line break or another control character
    inside, a type that is not a string, bytes or a number), never showing the value (it may be
    a credential, and HTTP clients quote the values they refuse in their errors)."""
    problem = header_problem(name, value)
    if problem:
        raise ValueError(problem)
    return (value.decode("latin-1") if isinstance(value, bytes) else str(value)).strip()


def tool_specs(context: Any) -> List[Tuple[str, str, Dict[str, Any]]]:
    """``(name, description, parameters)`` of the context's tools (AgentTool objects or dicts)."""
    specs = []
    for tool in getattr(context, "tools", None) or []:
        if isinstance(tool, Mapping):
            specs.append((tool["name"], tool.get("description", ""), tool.get("parameters") or {}))
        else:
            specs.append((tool.name, tool.description or "", tool.parameters or {}))
    return specs


_decoder = json.JSONDecoder()
_encode_body = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode  # built once, not per request
_decode_json = _decoder.decode
_scan_json = json_scanner(_decoder)  # the C scanner behind decode(), without its two whitespace regexes


def parse_json_event(data: str, what: str = "stream event") -> Any:
    """``json.loads(data)``, raising :class:`ProviderError` that shows the offending text."""
    try:  # one call per streamed token: scan directly; anything unusual takes decode()'s path
        value, end = _scan_json(data, 0)
        if end == len(data):
            return value
    except (StopIteration, ValueError):
        pass
    try:
        return _decode_json(data)
    except ValueError as exc:
        raise _MalformedJSON(f"malformed JSON in {what}: {exc}: {_snippet(data)!r}") from None


class _MalformedJSON(ProviderError):
    """:func:`parse_json_event` could not parse an event (the skeleton tells a cut stream apart)."""


def _snippet(data: str) -> str:
    return data if len(data) <= 200 else data[:200] + "..."


def new_output(model: Any) -> AssistantMessage:
    """The output message a stream of ``model`` starts from: no content, zero usage, stop reason
    ``"stop"``, the current time. Wire modules fill it through :class:`StreamWriter`."""
    return AssistantMessage(
        content=[],
        api=model.api,
        provider=model.provider,
        model=model.id,
        usage=Usage(),
        stop_reason="stop",
        timestamp=now_ms(),
    )


def encode_body(body: Dict[str, Any], model: Any, options: Mapping[str, Any]) -> bytes:
    """The request bytes of ``body``: the ``on_payload(body, model)`` option may return a
    replacement (None keeps it), then compact UTF-8 JSON, every string without lone surrogates
    (:func:`sanitize_surrogates`: UTF-8 cannot encode them, and a wire module may have missed one,
    say in tool arguments cut inside an escaped emoji). What ``on_payload`` raises propagates (the
    skeleton turns it into the stream's error event)."""
    on_payload = options.get("on_payload")
    if on_payload is not None:
        replaced = on_payload(body, model)
        if replaced is not None:
            body = replaced
    text = _encode_body(body)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (tool arguments cut inside an escaped emoji...)
        return sanitize_surrogates(text).encode("utf-8")  # (only ever inside a JSON string)


# --------------------------------------------------------------------------- wire interface


@dataclass
class WireRequest:
    """What a wire module asks to send: ``body`` is a JSON-ready dict."""

    url: str
    headers: Dict[str, str] = field(default_factory=dict)
    body: Dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        # the headers carry the API key: a repr (a log line, a traceback) shows *** instead
        # (and a URL's user:password or ?key= would, too)
        from .._safe import redact_url

        shown = {k: ("***" if is_secret_header(k) else v) for k, v in self.headers.items()}
        return f"WireRequest(url={redact_url(self.url)!r}, headers={shown!r}, body={self.body!r})"


class WireHandler:
    """Per-request state machine of one wire API (see the module docstring)."""

    def on_event(self, event: Any) -> bool:  # pragma: no cover - interface
        """Handle one :class:`~agentcore.providers.sse.SSEEvent`; True stops reading."""
        raise NotImplementedError

    def on_end(self, terminal_seen: bool) -> None:
        """The body ended (or the handler stopped it). Raise if the response is incomplete."""


class StateHandler(WireHandler):
    """Adapts a state machine with ``handle(event_name, data)`` and ``finish()`` to a WireHandler.

    ``data`` is the event's JSON (``"[DONE]"`` is passed as the plain string); malformed JSON ends
    the stream with an error naming the offending text. ``finish()`` runs when the body ended and
    raises if the response is incomplete. The state pushes its events through ``writer.push``. A
    state whose ``terminal`` attribute is true has seen the API's last event (``message_stop``,
    ``response.completed``): reading stops waiting for the body after it.
    """

    def __init__(self, state: Any) -> None:
        self.state = state

    def on_event(self, event: Any) -> bool:
        data = event.data
        state = self.state
        state.handle(event.event, data if data == "[DONE]" else parse_json_event(data))
        return getattr(state, "terminal", False) is True

    def on_end(self, terminal_seen: bool) -> None:
        self.state.finish()


class WireProvider:
    """Base class of the built-in wire APIs; instances are what ``register_providers`` registers.

    Subclasses set ``api`` and ``error_style`` (see :func:`~agentcore.providers.http.format_http_error`)
    and implement :meth:`build_request` and :meth:`new_handler`.
    """

    api: str = ""
    error_style: str = "openai"

    def build_request(
        self, model: Model, context: Any, options: Dict[str, Any], api_key: Optional[str]
    ) -> WireRequest:  # pragma: no cover - interface
        raise NotImplementedError

    def new_handler(
        self, model: Model, writer: StreamWriter, options: Dict[str, Any]
    ) -> WireHandler:  # pragma: no cover - interface
        raise NotImplementedError

    def describe_failure(
        self, exc: BaseException, model: Model, options: Dict[str, Any], api_key: Optional[str]
    ) -> str:
        """The ``error_message`` of a stream that failed with ``exc`` (:func:`describe_error`).

        A wire module may add what it knows about the request (Azure names the deployment and
        resource of a 404). ``api_key`` is the credential used, or None; whatever this returns is
        redacted afterwards, so an echoed key never reaches the message.
        """
        return describe_error(exc)

    def stream(self, model: Model, context: Any, **options: Any) -> ProviderStream:
        """Stream one response; iterate the result for events, ``result()`` for the final message."""
        return ProviderStream(self._run(model, context, options))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} api={self.api!r}>"

    # -- the skeleton ------------------------------------------------------------------------
    def _run(self, model: Model, context: Any, options: Dict[str, Any]) -> Iterator[Any]:
        from . import http

        output = new_output(model)
        signal = _as_signal(options.get("signal"))
        pending: List[Any] = []
        writer = StreamWriter(model, output, pending.append)
        secrets: List[str] = []  # never echoed into error messages (and so into session files)
        api_key: Optional[str] = None
        started = False
        try:
            api_key = resolve_api_key(model.provider, options.get("api_key"))
            if api_key:
                secrets.append(api_key)
            request = self.build_request(model, context, options, api_key)
            request.url = expand_url_variables(request.url, model)
            data = encode_body(request.body, model, options)
            headers = merge_headers(request.headers, model.headers, options.get("headers"))
            secrets.extend(secret_header_values(headers))
            secrets.extend(secret_url_values(request.url))
            budget = RetryBudget(options.get("max_retries"), options.get("max_retry_delay_ms"), signal)
            while True:
                response = http.open_stream(
                    request.url,
                    data,
                    headers,
                    session_name=model.provider or self.api,
                    signal=signal,
                    timeout=_timeout(options),
                    error_style=self.error_style,
                    on_response=options.get("on_response"),
                    model=model.id,
                    retry=budget,
                )
                if not started:
                    started = True
                    yield StartEvent(output)
                try:
                    yield from self._read(model, response, writer, pending, signal, options)
                    break
                except Exception as exc:  # transient and no content yet: try again, else it stands
                    retry_or_raise(exc, transient(exc), budget, output, signal, model.provider or self.api, secrets)
                    pending.clear()
            if output.stop_reason in ("error", "aborted"):
                raise ProviderError(output.error_message or "An unknown error occurred")
            terminal_event: Any = DoneEvent(output.stop_reason, output)
        except Exception as exc:  # every failure becomes the terminal error event (spec §4.6)
            if pending:
                yield from pending
                pending.clear()
            terminal_event = error_event(
                output, exc, signal, secrets, lambda e: self.describe_failure(e, model, options, api_key), started
            )
        yield terminal_event

    def _read(
        self, model: Model, response: Any, writer: StreamWriter, pending: List[Any], signal: Any, options: Any
    ) -> Iterator[Any]:
        """Feed one response's SSE events to a new handler, yielding the stream events they
        produce; ends the blocks the handler left open. Raises what the handler raises, and a
        :class:`ProviderError` quoting the body (its first 256 KB) when no event came from a body
        that is no event stream: another content type, or text that is no SSE under
        ``text/event-stream`` (a gateway's JSON error). The connection is released before this returns or raises (consumers stop at the terminal
        event), back to the pool only when the body was read to its end."""
        from . import http
        from .sse import iter_sse

        polled = isinstance(signal, _EventSignal)  # no listeners: checked between events
        listener = None
        fully_read = False
        abort_seen: List[bool] = []  # the per-event abort check without a property call
        try:
            if signal is not None:

                def listener(_reason: Any) -> None:
                    abort_seen.append(True)
                    http.close_response(response)

                signal.add_listener(listener)
            handler = self.new_handler(model, writer, options)
            on_event = handler.on_event
            terminal = False
            body = http.iter_body(response)
            kind = str(response.headers.get("content-type") or "").lower()
            # the body's start, kept until its first event: a body that is no event stream (a
            # proxy's page, a JSON error, even under an event-stream content type) is told in
            # its own words
            start = _BodyStart()
            body = start.keep(body)
            events = iter_sse(body)
            seen = False
            for sse_event in events:
                if not seen:
                    seen = True
                    start.stop()  # the rest is not kept
                try:
                    terminal = bool(on_event(sse_event))  # events already received count
                except ProviderError as exc:
                    cut = _cut_short(exc, sse_event)
                    if cut is None:
                        raise
                    raise cut from None
                except (AttributeError, TypeError, KeyError, IndexError, ValueError) as exc:
                    raise _misshapen(exc, sse_event) from None
                if pending:
                    if len(pending) == 1:  # the usual case: one event per SSE event
                        yield pending.pop()
                    else:
                        yield from pending
                        pending.clear()
                if abort_seen or (polled and signal.aborted) or terminal:
                    break
            else:
                fully_read = not (signal is not None and signal.aborted)
            if terminal and not abort_seen:
                fully_read = _drain(events, response)
            if signal is not None and signal.aborted:
                raise http.RequestAborted(ABORTED_MESSAGE)
            if not seen:  # a 200 JSON error, HTML or text page: say what it said
                text = b"".join(start.chunks).decode("utf-8", "replace")
                answered = kind.split(";")[0].strip() or "without a content type"
                if "event-stream" not in kind:
                    raise ProviderError(
                        f"{http.format_http_error(response.status_code, text, self.error_style)} "
                        f"(the server answered {answered}, not an event stream)"
                    )
                if _not_event_stream(text):
                    raise ProviderError(
                        f"{http.format_http_error(response.status_code, text, self.error_style)} "
                        f"(the server answered {answered}, but no event: its body is not an event stream)"
                    )
            handler.on_end(terminal)
            writer.close_open_blocks()
            if pending:
                yield from pending
                pending.clear()
        finally:
            if listener is not None:
                signal.remove_listener(listener)
            http.release_response(response, fully_read)


def _cut_short(exc: ProviderError, event: Any) -> Optional[ProviderError]:
    """When ``exc`` is the unparseable JSON of an event the body ended inside, the error to
    report instead: the stream was cut (a proxy or server closing mid-answer), retried like a
    lost connection. None for any other error (it stands)."""
    from .sse import UnterminatedSSEEvent

    if isinstance(exc, _MalformedJSON) and isinstance(event, UnterminatedSSEEvent):
        return ProviderError(
            f"The response stream ended in the middle of an event (the connection was probably cut): {exc}",
            retryable=True,
        )
    return None


def _misshapen(exc: BaseException, event: Any) -> ProviderError:
    """A handler failed on an event whose parts have unexpected types (a string where an object
    belongs, say): name that and show the event, not just the Python error."""
    return ProviderError(
        f"unexpected stream event from the server ({type(exc).__name__}: {exc}): {_snippet(str(event.data))!r}"
    )


_MAX_EVENTS_AFTER_TERMINAL = 16
#: Seconds the rest of a body may take to arrive after the API's terminal event.
_DRAIN_SECONDS = 0.5


class _BodyStart:
    """The first ``limit`` bytes of a response body, kept until :meth:`stop` (the body's first
    event: from then on the stream reads on without keeping or checking anything)."""

    __slots__ = ("chunks", "_open", "_limit")

    def __init__(self, limit: int = 256 * 1024) -> None:
        self.chunks: List[bytes] = []
        self._open = True
        self._limit = limit

    def stop(self) -> None:
        self._open = False
        self.chunks.clear()

    def keep(self, body: Iterator[bytes]) -> Iterator[bytes]:
        """``body``'s chunks, its start also kept in :attr:`chunks` while open."""
        body = iter(body)
        size = 0
        for chunk in body:
            if self._open and size < self._limit:
                piece = chunk[: self._limit - size]
                self.chunks.append(piece)
                size += len(piece)
            yield chunk
            if not self._open:
                break
        yield from body  # the rest, delegated (one generator step less per chunk)


_SSE_FIELD = re.compile(r"(?:data|event|id|retry)(?::|$)")


def _not_event_stream(text: str) -> bool:
    """Whether a body that produced no event is something else than an event stream: it has a
    line that is neither blank, a comment nor an SSE field (a JSON error object, an HTML page),
    and no field line (an event stream whose events carried no data is just empty)."""
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith(":")]
    return bool(lines) and not any(_SSE_FIELD.match(line) for line in lines)


def _drain(events: Iterator[Any], response: Any) -> bool:
    """Read what follows the terminal event (the chunked body's end, a trailing ``[DONE]``) so
    the connection can go back to the pool; True when the body ended. The answer is complete
    already, so a server that keeps the body open (or sends more than a few events) costs at most
    :data:`_DRAIN_SECONDS` and that one connection, never the answer: False, and it is closed."""
    from .._compat import response_socket

    sock = response_socket(response)
    if sock is None:
        return False
    try:
        previous = sock.gettimeout()
        sock.settimeout(_DRAIN_SECONDS)
    except OSError:
        return False
    try:
        for count, _ in enumerate(events, 1):
            if count > _MAX_EVENTS_AFTER_TERMINAL:
                return False
    except Exception:  # noqa: BLE001 - a timeout or reset after the answer: just do not reuse it
        return False
    try:
        sock.settimeout(previous)  # the pool's next request sets its own, but be exact
    except OSError:
        return False
    return True


class _EventSignal:
    """A ``threading.Event``-like abort flag (spec §3: "a threading.Event-like signal") seen as an
    :class:`~agentcore.signals.AbortSignal`. It is checked before the request, during retry sleeps
    and between stream events; while a listener is registered (the skeleton registers one for
    the connect, the header wait and each body read) a watcher thread waits on the event and
    calls it, so an abort also ends a read blocked on a silent server within
    :data:`_EVENT_POLL_SECONDS`. The watcher ends once no listener is left."""

    reason = None

    def __init__(self, event: Any) -> None:
        self._event = event
        self._lock = threading.Lock()
        self._listeners: List[Callable[[Any], None]] = []
        self._watching = False

    @property
    def aborted(self) -> bool:
        return bool(self._event.is_set())

    def wait(self, timeout: Optional[float] = None) -> bool:
        return bool(self._event.wait(timeout))

    def add_listener(self, listener: Callable[[Any], None]) -> None:
        """Call ``listener(None)`` once when the event is set; at once if it already is."""
        if self._event.is_set():
            listener(None)
            return
        with self._lock:
            self._listeners.append(listener)
            if self._watching:
                return
            self._watching = True
        threading.Thread(target=self._watch, name="agentcore-abort-watch", daemon=True).start()

    def remove_listener(self, listener: Callable[[Any], None]) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def _watch(self) -> None:
        while not self._event.wait(_EVENT_POLL_SECONDS):
            with self._lock:
                if not self._listeners:
                    self._watching = False
                    return
        with self._lock:
            listeners, self._listeners = self._listeners, []
            self._watching = False
        for listener in listeners:
            try:
                listener(None)
            except Exception:  # noqa: BLE001 - like AbortSignal: a listener never breaks the abort
                pass


#: How often the watcher of a ``threading.Event`` signal checks whether it still has listeners.
_EVENT_POLL_SECONDS = 0.05


def as_signal(signal: Any) -> Any:
    """The ``signal`` option as an abort signal: a ``threading.Event`` becomes a polled flag with
    ``aborted``/``wait`` (no listeners); an :class:`~agentcore.signals.AbortSignal` or None is
    returned as is. For wire modules that run their own request loop (agentcore-bedrock)."""
    if signal is not None and not hasattr(signal, "add_listener") and hasattr(signal, "is_set"):
        return _EventSignal(signal)
    return signal


def request_timeout(options: Mapping[str, Any]) -> Any:
    """The ``requests`` timeout of the ``timeout_ms`` (wins) or ``timeout`` option, or None. A
    ``[connect, read]`` list (how JSON and the option's docs write it) becomes the tuple requests
    needs: it unpacks only tuples and refuses a list on every request."""
    timeout_ms = options.get("timeout_ms")
    if timeout_ms:
        seconds = float(timeout_ms) / 1000.0
        return (min(10.0, seconds), seconds)
    timeout = options.get("timeout")
    return tuple(timeout) if isinstance(timeout, list) else timeout


_as_signal = as_signal
_timeout = request_timeout

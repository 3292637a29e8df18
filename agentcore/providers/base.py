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
"""

from __future__ import annotations

import collections.abc
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

from .._compat import json_scanner
from ..events import (
    DoneEvent,
    ErrorEvent,
    StartEvent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ThinkingDeltaEvent,
    ThinkingEndEvent,
    ThinkingStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from ..streams import ProviderStream
from ..types import AssistantMessage, Diagnostic, Model, TextContent, ThinkingContent, ToolCall, Usage, now_ms
from .partial_json import ToolArguments
from .retries import RetryBudget, retry_or_raise

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
    "merge_headers",
    "expand_url_variables",
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

ABORTED_MESSAGE = "Request was aborted"

# ``isinstance(x, typing.Mapping)`` costs about 1 us (typing's __instancecheck__ runs in Python);
# decoded JSON is a dict, which this tuple matches first on the C fast path. Several checks per
# streamed chunk made it a quarter of a wire module's per-delta cost
# (plugins/agentcore-vertex/benchmarks/bench_parse.py).
MAPPINGS = (dict, collections.abc.Mapping)


class MissingApiKeyError(Exception):
    """No API key for a provider that needs one. The message names the variable to set."""

    def __init__(self, provider: str, env_vars: Tuple[str, ...] = ()) -> None:
        hint = " or ".join(env_vars) if env_vars else "the provider's API key variable"
        super().__init__(f'no API key for provider "{provider}": set {hint} or pass api_key=')
        self.provider = provider
        self.env_vars = env_vars


class ProviderError(Exception):
    """A failure reported by the provider inside the stream (error event, bad stop reason...).

    ``retryable`` marks a transient failure the server reported in the stream (overloaded, rate
    limited, internal error: what HTTP 429/5xx say before a stream starts). The skeleton retries
    it like those statuses when no content was emitted yet (see :func:`~agentcore.providers.retries.retryable_error`).
    """

    def __init__(self, message: str = "", *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


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
    """``explicit`` if non-empty, else the environment's key.

    Raises :class:`MissingApiKeyError` for a provider with known key variables and no key;
    returns None for providers without any (custom/local endpoints that need no key).
    """
    if explicit:
        return explicit
    key = get_env_api_key(provider)
    if key:
        return key
    if provider in ENV_API_KEYS:
        raise MissingApiKeyError(provider, ENV_API_KEYS[provider])
    return None


# --------------------------------------------------------------------------- small helpers

_URL_VARIABLE = re.compile(r"\{([A-Z][A-Z0-9_]*)\}")


def expand_url_variables(url: str, model: Any = None, env: Optional[Mapping[str, str]] = None) -> str:
    """``url`` with each ``{NAME}`` (an upper-case environment variable name) replaced by its value.

    Catalog base URLs name per-account parts this way (Cloudflare's
    ``.../accounts/{CLOUDFLARE_ACCOUNT_ID}/ai/v1``). Raises :class:`ProviderError` naming the
    model and the variables to set when one is unset; lower-case placeholders are left alone.
    """
    if "{" not in url:
        return url
    env = os.environ if env is None else env
    missing = [name for name in _URL_VARIABLE.findall(url) if not env.get(name)]
    if missing:
        label = f"{model.provider}/{model.id}" if model is not None else "this model"
        names = ", ".join(dict.fromkeys(missing))
        raise ProviderError(f"the base URL of {label} needs {names}: set it in the environment ({url})")
    return _URL_VARIABLE.sub(lambda match: env[match.group(1)], url)


_SURROGATES = re.compile("[\ud800-\udfff]")


def sanitize_surrogates(text: str) -> str:
    """``text`` without unpaired UTF-16 surrogates, which every API rejects (spec §5)."""
    if not text:
        return text
    return _SURROGATES.sub("", text) if _SURROGATES.search(text) else text


def merge_headers(*layers: Optional[Mapping[str, Any]]) -> Dict[str, str]:
    """Merge header dicts; later layers win, names compared case-insensitively; None values drop."""
    merged: Dict[str, Tuple[str, Any]] = {}
    for layer in layers:
        for name, value in (layer or {}).items():
            merged[name.lower()] = (name, value)
    return {name: str(value) for name, value in merged.values() if value is not None}


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
        snippet = data if len(data) <= 200 else data[:200] + "..."
        raise ProviderError(f"malformed JSON in {what}: {exc}: {snippet!r}") from None


# --------------------------------------------------------------------------- the stream writer


@dataclass
class _OpenBlock:
    kind: str  # "text" | "thinking" | "toolCall"
    args: Optional[ToolArguments] = None


class StreamWriter:
    """The one way a wire module builds its output: mutates the message, queues the events.

    Every wire module (openai-completions, openai-responses, anthropic-messages, google) turns
    API events into these calls, so the event contract of spec §3 holds by construction:

    * ``start_text`` / ``start_thinking`` / ``start_tool_call`` append a block to
      ``output.content`` and push its ``*_start`` event; the returned content index never changes.
    * ``append_text`` / ``append_thinking`` / ``append_tool_arguments`` extend an open block and
      push its ``*_delta`` event. Tool-call argument text is kept outside the ToolCall (no scratch
      fields leak); ``arguments`` is the best-effort parse so far (re-parsed with the throttle of
      :class:`~agentcore.providers.partial_json.ToolArguments`).
    * ``end_block`` pushes the ``*_end`` event (tool arguments fully parsed unless nothing was
      streamed and the call came with arguments); ending a closed block does nothing.
      ``close_open_blocks`` ends every open block in content order (the skeleton does so after a
      complete response; an error leaves them open, spec §3 rule 6).
    * ``add_diagnostic`` appends a :class:`~agentcore.types.Diagnostic` to ``output.diagnostics``.
      The writer records one itself when a tool call's argument text was not valid JSON and the
      lenient parser had to repair it (``"tool_arguments_repaired"``): the call still runs, with
      the best-effort arguments, and the note says so.

    Blocks may be open at the same time (Anthropic and Responses interleave by index); ``current``
    is the most recently opened block still open, for APIs that stream one block at a time.
    Other mutations (signatures, final texts an API sends at the end) go straight to
    ``block(index)`` before ``end_block``.
    """

    def __init__(self, model: Model, output: AssistantMessage, push: Callable[[Any], None]) -> None:
        self.model = model
        self.output = output
        self._push = push
        self._open: Dict[int, _OpenBlock] = {}
        self.current: Optional[int] = None
        self.current_kind: Optional[str] = None  # "text" | "thinking" | "toolCall" of ``current``

    # -- opening ---------------------------------------------------------------------------
    def start_text(self, text_signature: Optional[str] = None) -> int:
        index = self._append(TextContent(text="", text_signature=text_signature), "text")
        self._push(TextStartEvent(index, self.output))
        return index

    def start_thinking(
        self, thinking_signature: Optional[str] = None, redacted: bool = False, thinking: str = ""
    ) -> int:
        block = ThinkingContent(thinking=thinking, thinking_signature=thinking_signature, redacted=redacted)
        index = self._append(block, "thinking")
        self._push(ThinkingStartEvent(index, self.output))
        return index

    def start_tool_call(
        self,
        id: str,
        name: str,
        arguments_text: str = "",
        arguments: Optional[Dict[str, Any]] = None,
        thought_signature: Optional[str] = None,
    ) -> int:
        """Open a tool call; ``arguments_text`` starts its streamed JSON, ``arguments`` its dict."""
        block = ToolCall(id=id, name=name, arguments=dict(arguments or {}), thought_signature=thought_signature)
        index = self._append(block, "toolCall")
        args = self._open[index].args = ToolArguments(arguments_text or "")
        if arguments_text:
            block.arguments = args.value()
        self._push(ToolCallStartEvent(index, self.output))
        return index

    def _append(self, block: Any, kind: str) -> int:
        self.output.content.append(block)
        index = len(self.output.content) - 1
        self._open[index] = _OpenBlock(kind)
        self.current = index
        self.current_kind = kind
        return index

    # -- streaming -------------------------------------------------------------------------
    def append_text(self, index: int, delta: str) -> None:
        block = self.output.content[index]
        block.text += delta
        self._push(TextDeltaEvent(index, delta, self.output))

    def append_thinking(self, index: int, delta: str) -> None:
        block = self.output.content[index]
        block.thinking += delta
        self._push(ThinkingDeltaEvent(index, delta, self.output))

    def append_tool_arguments(self, index: int, fragment: str) -> None:
        """Append raw JSON text; ``arguments`` becomes the best-effort parse so far."""
        args = self._open[index].args
        assert args is not None
        parsed = args.feed(fragment or "")
        if parsed is not None:
            self.output.content[index].arguments = parsed
        self._push(ToolCallDeltaEvent(index, fragment or "", self.output))

    def tool_arguments_text(self, index: int) -> str:
        """The argument JSON streamed so far for the open tool call at ``index``."""
        args = self._open[index].args
        return args.text if args is not None else ""

    def set_tool_arguments_text(self, index: int, text: str) -> None:
        """Replace the streamed argument text (an API's final "arguments done" value) and re-parse."""
        args = self._open[index].args = ToolArguments(text or "")
        self.output.content[index].arguments = args.value()

    # -- closing ---------------------------------------------------------------------------
    def is_open(self, index: Optional[int]) -> bool:
        return index is not None and index in self._open

    def block(self, index: int) -> Any:
        return self.output.content[index]

    def end_block(self, index: int) -> None:
        """Finish block ``index`` and push its ``*_end`` event; a closed block is left alone."""
        open_block = self._open.pop(index, None)
        if open_block is None:
            return
        if self.current == index:
            self.current = None
            self.current_kind = None
        block = self.output.content[index]
        if open_block.kind == "text":
            self._push(TextEndEvent(index, block.text, self.output))
        elif open_block.kind == "thinking":
            self._push(ThinkingEndEvent(index, block.thinking, self.output))
        else:
            args = open_block.args
            if args is not None and (args.text.strip() or not block.arguments):
                block.arguments = args.value()
                if args.text.strip():
                    self._check_arguments(block, args.text)
            self._push(ToolCallEndEvent(index, block, self.output))

    def _check_arguments(self, block: ToolCall, text: str) -> None:
        try:  # once per call, at its end: the strict parse says whether the lenient one repaired
            json.loads(text)
        except ValueError as exc:
            self.add_diagnostic(
                "tool_arguments_repaired",
                error={"name": "JSONDecodeError", "message": str(exc)},
                details={"toolCallId": block.id, "toolName": block.name, "argumentChars": len(text)},
            )

    def add_diagnostic(
        self, type: str, error: Optional[Dict[str, Any]] = None, details: Optional[Dict[str, Any]] = None
    ) -> Diagnostic:
        """Append a diagnostic to the output message (see :func:`add_diagnostic`) and return it."""
        return add_diagnostic(self.output, type, error, details)

    def end_current(self) -> None:
        if self.current is not None:
            self.end_block(self.current)

    def close_open_blocks(self) -> None:
        """End every still-open block in content order."""
        for index in sorted(self._open):
            self.end_block(index)

    def push(self, event: Any) -> None:
        """Queue any other event (e.g. a GenericStreamEvent)."""
        self._push(event)

    def update_usage(self, usage: Usage) -> None:
        """Set the output's usage and recompute its cost from the model's prices (spec §7)."""
        from .models import calculate_cost

        self.output.usage = usage
        calculate_cost(self.model, usage)


# --------------------------------------------------------------------------- wire interface


@dataclass
class WireRequest:
    """What a wire module asks to send: ``body`` is a JSON-ready dict."""

    url: str
    headers: Dict[str, str] = field(default_factory=dict)
    body: Dict[str, Any] = field(default_factory=dict)


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
    raises if the response is incomplete. The state pushes its events through ``writer.push``.
    """

    def __init__(self, state: Any) -> None:
        self.state = state

    def on_event(self, event: Any) -> bool:
        data = event.data
        self.state.handle(event.event, data if data == "[DONE]" else parse_json_event(data))
        return False

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

        output = AssistantMessage(
            content=[],
            api=model.api,
            provider=model.provider,
            model=model.id,
            usage=Usage(),
            stop_reason="stop",
            timestamp=now_ms(),
        )
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
            body = request.body
            on_payload = options.get("on_payload")
            if on_payload is not None:
                replaced = on_payload(body, model)
                if replaced is not None:
                    body = replaced
            headers = merge_headers(request.headers, model.headers, options.get("headers"))
            secrets.extend(_secret_header_values(headers))
            data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
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
                except ProviderError as exc:
                    retry_or_raise(exc, exc.retryable, budget, output, signal, model.provider or self.api, secrets)
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
        produce; ends the blocks the handler left open. Raises what the handler raises. The
        connection is released before this returns or raises (consumers stop at the terminal
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
            after_terminal = 0
            for sse_event in iter_sse(http.iter_body(response)):
                if terminal:  # drain what follows the terminal event so the connection is reused
                    after_terminal += 1
                    if after_terminal > _MAX_EVENTS_AFTER_TERMINAL:
                        break
                    continue
                terminal = bool(on_event(sse_event))  # events already received count
                if pending:
                    if len(pending) == 1:  # the usual case: one event per SSE event
                        yield pending.pop()
                    else:
                        yield from pending
                        pending.clear()
                if abort_seen or (polled and signal.aborted):
                    break
            else:
                fully_read = not (signal is not None and signal.aborted)
            if signal is not None and signal.aborted:
                raise http.RequestAborted(ABORTED_MESSAGE)
            handler.on_end(terminal)
            writer.close_open_blocks()
            if pending:
                yield from pending
                pending.clear()
        finally:
            if listener is not None:
                signal.remove_listener(listener)
            http.release_response(response, fully_read)


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


_MAX_EVENTS_AFTER_TERMINAL = 16


class _EventSignal:
    """A ``threading.Event``-like abort flag (spec §3: "a threading.Event-like signal") seen as an
    :class:`~agentcore.signals.AbortSignal`. It has no listeners, so it is checked before the
    request, during retry sleeps and between stream events rather than interrupting a blocked read."""

    reason = None

    def __init__(self, event: Any) -> None:
        self._event = event

    @property
    def aborted(self) -> bool:
        return bool(self._event.is_set())

    def wait(self, timeout: Optional[float] = None) -> bool:
        return bool(self._event.wait(timeout))

    def add_listener(self, listener: Callable[[Any], None]) -> None:
        pass

    def remove_listener(self, listener: Callable[[Any], None]) -> None:
        pass


def as_signal(signal: Any) -> Any:
    """The ``signal`` option as an abort signal: a ``threading.Event`` becomes a polled flag with
    ``aborted``/``wait`` (no listeners); an :class:`~agentcore.signals.AbortSignal` or None is
    returned as is. For wire modules that run their own request loop (agentcore-bedrock)."""
    if signal is not None and not hasattr(signal, "add_listener") and hasattr(signal, "is_set"):
        return _EventSignal(signal)
    return signal


def request_timeout(options: Mapping[str, Any]) -> Any:
    """The ``requests`` timeout of the ``timeout_ms`` (wins) or ``timeout`` option, or None."""
    timeout_ms = options.get("timeout_ms")
    if timeout_ms:
        seconds = float(timeout_ms) / 1000.0
        return (min(10.0, seconds), seconds)
    return options.get("timeout")


_as_signal = as_signal
_timeout = request_timeout


_SECRET_HEADERS = frozenset(
    {"authorization", "x-api-key", "api-key", "x-goog-api-key", "cookie", "proxy-authorization"}
)


def _secret_header_values(headers: Mapping[str, Any]) -> List[str]:
    values = []
    for name, value in headers.items():
        if str(name).lower() in _SECRET_HEADERS and isinstance(value, str):
            values.append(value)
            scheme, _, token = value.partition(" ")
            if token and scheme.lower() in ("bearer", "basic", "token"):
                values.append(token)
    return values


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret of 8 or more characters replaced by ``***`` (longest first).

    Servers sometimes echo the key they rejected; the message ends up in the transcript, the
    session file and logs, so it must never carry the key."""
    for secret in sorted({s for s in secrets if s and len(s) >= 8}, key=len, reverse=True):
        text = text.replace(secret, "***")
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
    ``"<ExceptionType>: <text>"``. Callers redact secrets (:func:`redact`)."""
    from . import http

    if isinstance(exc, (ProviderError, MissingApiKeyError, http.ProviderHTTPError)):
        return str(exc)
    text = str(exc)
    name = type(exc).__name__
    if "ChunkedEncodingError" in name or "ProtocolError" in name or "ConnectionError" in name:
        return f"Connection lost while streaming the response: {text}"
    if "Timeout" in name:
        return f"Timed out while streaming the response: {text}"
    return f"{name}: {text}" if text else name


_describe = describe_error

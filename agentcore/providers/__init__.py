"""Providers: one module per wire API on top of shared HTTP/SSE/partial-JSON machinery.

``stream(model, context, **options)`` picks the provider registered for ``model.api`` (built-ins
and plugins, through :func:`agentcore.plugins.get_provider`) and returns its event stream;
``complete`` drains it and returns the final :class:`~agentcore.types.AssistantMessage`. Neither
raises for request or model failures: the stream ends with an ``error`` event instead, and so it
does for a model whose ``api`` has no provider.

Importing this package imports neither ``requests`` nor any wire module.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Union

from ..types import AgentContext, AssistantMessage, Model
from .base import MissingApiKeyError, get_env_api_key, new_output
from .models import calculate_cost

if TYPE_CHECKING:
    from ..streams import AssistantMessageEventStream

__all__ = [
    "stream",
    "complete",
    "is_context_overflow",
    "calculate_cost",
    "MissingApiKeyError",
    "get_env_api_key",
    "get_api_provider",
]


def get_api_provider(api: str) -> Optional[Any]:
    """The provider registered for wire API ``api`` (plugins first, built-ins as fallback), or None."""
    try:
        from .. import plugins
    except ImportError:  # pragma: no cover - plugins.py is part of the package
        plugins = None  # type: ignore[assignment]
    if plugins is not None:
        try:
            return plugins.get_provider(api)
        except KeyError:
            return None
    from ._plugin import builtin_provider

    return builtin_provider(api)


def _resolve_model(model: Any) -> Model:
    """A Model from a Model or a ``"provider/id"`` string. Raises ``UnknownModelError`` (with the
    close matches) for a string that names no model and TypeError for anything else: a wrong
    argument, before anything is sent, not a model failure."""
    if isinstance(model, str):
        from .. import plugins

        return plugins.get_model(model)
    if not all(hasattr(model, name) for name in ("id", "api", "provider")):
        raise TypeError(f"stream() takes a Model or a 'provider/id' string, not {type(model).__name__}")
    return model


def _signal_problem(signal: Any) -> Optional[str]:
    """Why the ``signal`` option cannot be watched, or None (None, an AbortSignal or anything with
    ``aborted``, a ``threading.Event``)."""
    if signal is None or hasattr(signal, "aborted") or hasattr(signal, "is_set"):
        return None
    return f"the signal option must be an AbortSignal or a threading.Event, not {type(signal).__name__}"


def stream(model: Union[Model, str], context: AgentContext, **options: Any) -> AssistantMessageEventStream:
    """Stream one model response: an iterable of stream events with ``result()``.

    ``model`` is a :class:`~agentcore.types.Model` (or a ``"provider/id"`` string),
    ``context`` an :class:`~agentcore.types.AgentContext`. Options are keyword arguments:
    ``api_key``, ``signal``, the :class:`~agentcore.options.StreamOptions` fields (``temperature``,
    ``max_tokens``, ``reasoning``, ``headers``, ...) and the options installed providers declare
    (Bedrock's ``region``, Anthropic's ``interleaved_thinking``, ...), given as keywords or in a
    ``provider_options`` mapping.

    When the provider declares its options (a ``stream_options`` mapping, as every built-in and
    agentcore plugin does), they are checked the way ``Agent()`` checks them, before any request:
    an unknown name (with a did-you-mean), a value of the wrong type or an impossible one ends the
    stream with an ``error`` event whose message names the option (a stream never raises). A
    provider that declares nothing receives the keywords unchecked, as before. A ``signal`` that
    is neither an :class:`~agentcore.signals.AbortSignal` nor a ``threading.Event`` ends it the
    same way. What does raise is a wrong ``model`` argument: ``UnknownModelError`` (with close
    matches) for a string that names no model, TypeError for anything but a Model or a string.
    """
    model = _resolve_model(model)
    problem = _signal_problem(options.get("signal"))
    if problem is not None:
        return _error_stream(model, problem)
    provider = get_api_provider(model.api)
    if provider is None:
        return _error_stream(
            model,
            f'No provider registered for api "{model.api}": set Model.api to one of '
            "openai-completions, openai-responses, anthropic-messages, "
            "google-generative-ai, azure-openai-responses, or install the plugin that provides it "
            "(see `agentcore plugins`).",
        )
    if options and isinstance(getattr(provider, "stream_options", None), Mapping):
        try:
            options = _checked_options(provider, options)
        except (TypeError, ValueError) as exc:  # a stream never raises: the error is its end
            return _error_stream(model, str(exc))
    return provider.stream(model, context, **options)


#: keywords of a request that are no stream option: the credential and the abort signal
_CALL_NAMES = frozenset(("api_key", "signal"))


def _checked_options(provider: Any, options: Dict[str, Any]) -> Dict[str, Any]:
    """``options`` checked as ``Agent()`` checks them (see :func:`stream`), with a
    ``provider_options`` mapping spread into keywords, as the agent loop passes them."""
    from ..options import declared_options, installed_provider_options, split_names, spread_provider_options

    def declared() -> Dict[str, Any]:
        return {**installed_provider_options(), **declared_options(provider)}

    given = {name: value for name, value in options.items() if name not in _CALL_NAMES}
    split_names(given, "stream()", declared)
    extra = options.get("provider_options")
    if extra:
        split_names(extra, "stream() provider_options", declared)
        options = spread_provider_options(dict(options))
    return options


def complete(model: Union[Model, str], context: AgentContext, **options: Any) -> AssistantMessage:
    """Run :func:`stream` to the end and return the final message (check ``stop_reason``)."""
    return stream(model, context, **options).result()


def _error_stream(model: Model, message: str) -> Any:
    from ..events import ErrorEvent
    from ..streams import AssistantMessageEventStream

    output = new_output(model)
    output.stop_reason = "error"
    output.error_message = message
    events = AssistantMessageEventStream()
    events.push(ErrorEvent("error", output))
    return events


# --------------------------------------------------------------------------- context overflow

_OVERFLOW_PATTERNS = [
    r"prompt is too long",  # Anthropic
    r"input is too long for requested model",  # Bedrock
    r"exceeds the context window",  # OpenAI
    r"input token count.*exceeds the maximum",  # Gemini
    r"maximum prompt length is \d+",  # xAI
    r"reduce the length of the messages",  # Groq
    r"maximum context length is \d+ tokens",  # OpenRouter
    r"exceeds the limit of \d+",  # Copilot
    r"exceeds the available context size",  # llama.cpp
    r"greater than the context length",  # LM Studio
    r"context window exceeds limit",  # MiniMax
    r"exceeded model token limit",  # Kimi
    r"too large for model with \d+ maximum context length",  # Mistral
    r"model_context_window_exceeded",  # z.ai
    r"context[_ ]length[_ ]exceeded",
    r"too many tokens",
    r"token limit exceeded",
]
_OVERFLOW = re.compile("|".join(f"(?:{p})" for p in _OVERFLOW_PATTERNS), re.IGNORECASE | re.DOTALL)
_NO_BODY_OVERFLOW = re.compile(r"^4(?:00|13)\s*(?:status code)?\s*\(no body\)", re.IGNORECASE)  # Cerebras
# throttling that reads like an overflow (Bedrock's "Too many tokens, please wait before trying
# again", as an in-stream "Throttling error: ..." or a "429 ThrottlingException: ..."): compacting
# the conversation would not help, and would throw its history away for nothing
_NOT_OVERFLOW = re.compile(
    r"^(?:429\b|(?:Throttling error|Service unavailable):)|ThrottlingException|rate limit|too many requests",
    re.IGNORECASE,
)


def is_context_overflow(message: Any, context_window: Optional[int] = None) -> bool:
    """True when ``message`` (an AssistantMessage) failed because the prompt was too long.

    Recognises the overflow error texts of the known providers (never a throttling error that
    reads like one: a 429, "Throttling error:", a rate limit), and, when
    ``context_window`` is given, a "silent" overflow: a successful response whose
    ``input + cache_read`` exceeds it.
    """
    stop_reason = getattr(message, "stop_reason", None)
    if stop_reason == "error":
        text = getattr(message, "error_message", None) or ""
        if _NOT_OVERFLOW.search(text.strip()):
            return False
        return bool(_OVERFLOW.search(text) or _NO_BODY_OVERFLOW.match(text.strip()))
    if stop_reason == "stop" and context_window:
        usage = getattr(message, "usage", None)
        if usage is not None:
            return (usage.input or 0) + (usage.cache_read or 0) > context_window
    return False

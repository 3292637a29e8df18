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
from typing import TYPE_CHECKING, Any, Optional, Union

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
    if isinstance(model, str):
        from .. import plugins

        return plugins.get_model(model)
    return model


def stream(model: Union[Model, str], context: AgentContext, **options: Any) -> AssistantMessageEventStream:
    """Stream one model response: an iterable of stream events with ``result()``.

    ``model`` is a :class:`~agentcore.types.Model` (or a ``"provider/id"`` string),
    ``context`` an :class:`~agentcore.types.AgentContext`. Options are keyword arguments
    (``api_key``, ``signal``, ``temperature``, ``max_tokens``, ``reasoning``, ``headers``, ...);
    unknown ones are ignored.
    """
    model = _resolve_model(model)
    provider = get_api_provider(model.api)
    if provider is None:
        return _error_stream(
            model,
            f'No provider registered for api "{model.api}": set Model.api to one of '
            "openai-completions, openai-responses, anthropic-messages, "
            "google-generative-ai, azure-openai-responses, or install the plugin that provides it "
            "(see `agentcore plugins`).",
        )
    return provider.stream(model, context, **options)


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


def is_context_overflow(message: Any, context_window: Optional[int] = None) -> bool:
    """True when ``message`` (an AssistantMessage) failed because the prompt was too long.

    Recognises the overflow error texts of the known providers, and, when
    ``context_window`` is given, a "silent" overflow: a successful response whose
    ``input + cache_read`` exceeds it.
    """
    stop_reason = getattr(message, "stop_reason", None)
    if stop_reason == "error":
        text = getattr(message, "error_message", None) or ""
        return bool(_OVERFLOW.search(text) or _NO_BODY_OVERFLOW.match(text.strip()))
    if stop_reason == "stop" and context_window:
        usage = getattr(message, "usage", None)
        if usage is not None:
            return (usage.input or 0) + (usage.cache_read or 0) > context_window
    return False

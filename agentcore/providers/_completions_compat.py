"""The ``compat`` flags of ``openai-completions`` endpoints (providers spec §12, §17).

Servers that speak Chat Completions differ in what they accept (``store``, the ``developer`` role,
``reasoning_effort``, the token-limit field, Mistral's tool-call ids, ...). Each difference is a
flag: :func:`detect_compat` derives them from ``provider`` and ``base_url``, and
:func:`resolve_compat` lays ``model.compat`` over them. Pure functions; nothing raises. Public
through :mod:`agentcore.providers.openai_completions`.
"""

from __future__ import annotations

import functools
from typing import Any, Dict

from ..types import Model

__all__ = ["DEFAULT_COMPAT", "detect_compat", "resolve_compat"]

# the fields servers stream reasoning text in (DeepSeek/llama.cpp, vLLM/OpenRouter, others)
_REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")

DEFAULT_COMPAT: Dict[str, Any] = {
    "supportsStore": True,
    "supportsDeveloperRole": True,
    "supportsReasoningEffort": True,
    "reasoningEffortMap": {},
    "supportsUsageInStreaming": True,
    "maxTokensField": "max_completion_tokens",
    "requiresToolResultName": False,
    "requiresAssistantAfterToolResult": False,
    "requiresThinkingAsText": False,
    "requiresMistralToolIds": False,
    "supportsThinkingContentParts": False,
    # DeepSeek V4 (thinking mode) rejects a replayed assistant message without this field
    "requiresReasoningContentOnAssistantMessages": False,
    "thinkingFormat": "openai",
    "supportsStrictMode": True,
    "openRouterRouting": {},
    "vercelGatewayRouting": {},
    "cacheControlFormat": None,
    "sendSessionAffinityHeaders": False,
    "sessionAffinityFormat": "openai",
    "supportsLongCacheRetention": True,
    "zaiToolStream": False,  # z.ai: "tool_stream": true with tools (set by the catalog's GLM models)
    "supportsEmptyTools": True,  # "tools": [] when the history has tool calls but no tools are sent
}


def _is_loopback(base_url: str) -> bool:
    from urllib.parse import urlsplit

    try:
        host = (urlsplit(base_url).hostname or "").lower()
    except ValueError:
        return False
    return host in ("localhost", "127.0.0.1", "::1", "0.0.0.0") or host.startswith("127.")


def detect_compat(model: Model) -> Dict[str, Any]:
    """Compat flags detected from ``provider`` and ``base_url`` (before ``model.compat``); a new
    dict on every call (the detection itself is remembered per provider, URL and model id)."""
    provider, url, model_id = model.provider or "", model.base_url or "", model.id or ""
    compat = dict(_detected(provider, url, model_id))
    if (provider == "groq" or "groq.com" in url) and model_id == "qwen/qwen3-32b":
        compat["reasoningEffortMap"] = {level: "default" for level in ("minimal", "low", "medium", "high", "xhigh")}
    return compat


@functools.lru_cache(maxsize=256)
def _detected(provider: str, url: str, model_id: str) -> Dict[str, Any]:
    """The flags :func:`detect_compat` derives from the three strings (flat values only: the
    cached dict is copied, never handed out)."""
    is_zai = provider == "zai" or "api.z.ai" in url
    is_xai = provider == "xai" or "api.x.ai" in url
    is_mistral = provider == "mistral" or "mistral.ai" in url
    is_local = _is_loopback(url)
    is_together = provider == "together" or "api.together.ai" in url or "api.together.xyz" in url
    is_cloudflare = provider in ("cloudflare-workers-ai", "cloudflare-ai-gateway") or (
        "api.cloudflare.com" in url or "gateway.ai.cloudflare.com" in url
    )
    is_openrouter = provider == "openrouter" or "openrouter.ai" in url
    is_deepseek = provider == "deepseek" or "deepseek.com" in url
    non_standard = (
        provider == "cerebras"
        or "cerebras.ai" in url
        or is_xai
        or "chutes.ai" in url
        or is_deepseek
        or is_zai
        or provider == "opencode"
        or "opencode.ai" in url
        or is_mistral
        or is_local
    )
    compat = dict(DEFAULT_COMPAT)
    compat.update(
        supportsStore=not non_standard,
        supportsDeveloperRole=not non_standard,
        supportsReasoningEffort=not (is_xai or is_zai or is_mistral or is_local),
        maxTokensField="max_tokens" if ("chutes.ai" in url or is_mistral or is_local) else "max_completion_tokens",
        requiresToolResultName=is_mistral,
        requiresMistralToolIds=is_mistral,
        supportsThinkingContentParts=is_mistral,
        requiresReasoningContentOnAssistantMessages=is_deepseek,
        thinkingFormat="zai" if is_zai else ("mistral" if is_mistral else "openai"),
        cacheControlFormat="anthropic" if is_openrouter and model_id.startswith("anthropic/") else None,
        supportsLongCacheRetention=not (is_together or is_cloudflare),
    )
    if is_mistral:  # the reference's Mistral API sends the session id as x-affinity (prefix caching)
        compat.update(sendSessionAffinityHeaders=True, sessionAffinityFormat="mistral")
        # Mistral refuses unknown body fields (422 "Extra inputs are not permitted"): it has no
        # stream_options (usage comes anyway), no empty tools list, no OpenAI prompt-cache fields
        compat.update(supportsUsageInStreaming=False, supportsEmptyTools=False, supportsLongCacheRetention=False)
    if provider == "github-copilot":
        compat.update(supportsStore=False, supportsDeveloperRole=False, supportsReasoningEffort=False)
    return compat


def resolve_compat(model: Model) -> Dict[str, Any]:
    """Detected compat flags overridden by the explicit ``model.compat`` entries."""
    compat = detect_compat(model)
    for key, value in (model.compat or {}).items():
        if value is not None:
            compat[key] = value
    return compat

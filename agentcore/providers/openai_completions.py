"""The ``openai-completions`` wire API: OpenAI Chat Completions and compatibles (spec §12, §17).

Speaks to api.openai.com, OpenRouter, Groq, xAI, Cerebras, DeepSeek, z.ai, Hugging Face, Vercel AI
Gateway, Mistral's OpenAI-compatible endpoint and local servers (Ollama, vLLM, llama.cpp, LM Studio,
SGLang). Differences between them are ``compat`` flags: detected from ``provider``/``base_url``
and overridden by ``model.compat`` (:func:`resolve_compat`).

The compat flags live in ``_completions_compat.py`` and the stream handler in
``_completions_stream.py``; their public names are re-exported here (this is their documented path).

Deliberate choices where the reference implementation is known to be wrong (spec §21):
* a response with tool calls but no (or a ``stop``) finish reason ends with ``toolUse``;
* ``output`` tokens are ``completion_tokens`` (which include reasoning tokens for OpenAI); reasoning
  tokens are added only when a server reports more of them than completion tokens;
* ``content_filter`` ends in an error whose message says so, not "An unknown error occurred";
* ``requiresThinkingAsText`` puts the thinking text in front of the text, as one string;
* loopback servers (localhost, 127.0.0.1, ::1) get the "local server" profile: no ``store``, no
  ``developer`` role, no ``reasoning_effort``, ``max_tokens``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Mapping, Optional

from ..types import (
    AssistantMessage,
    ImageContent,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    role_of,
)
from . import reasoning
from ._completions_compat import _REASONING_FIELDS, resolve_compat
from ._completions_stream import CompletionsHandler, map_finish_reason, parse_usage
from ._mistral import MistralIdNormalizer, assistant_content_parts
from ._mistral import mistral_tool_call_id as _mistral_id
from .base import (
    StreamWriter,
    WireHandler,
    WireProvider,
    WireRequest,
    endpoint_url,
    sanitize_surrogates,
    tool_specs,
)
from .caching import cache_retention, cache_session_id, prompt_cache_key, session_affinity_headers
from .models import supports_xhigh
from .transform import transform_messages

__all__ = [
    "API",
    "OpenAICompletionsProvider",
    "CompletionsHandler",
    "resolve_compat",
    "build_request_body",
    "convert_messages",
    "normalize_tool_call_id",
    "map_finish_reason",
    "parse_usage",
]

API = "openai-completions"
_TOOL_RESULT_IMAGES_TEXT = "Attached image(s) from tool result:"
_BRIDGE_TEXT = "I have processed the tool results."
_AZURE_PROVIDERS = ("azure-openai", "azure-openai-responses")  # azure.AZURE_PROVIDERS, without its import

# --------------------------------------------------------------------------- tool-call ids

_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_MAX_ID = 40  # OpenAI: "Expected a string with maximum length 40"


def normalize_tool_call_id(tool_call_id: str, model: Model, compat: Optional[Mapping[str, Any]] = None) -> str:
    """The id a tool call from another model gets on this endpoint (spec §6). Two ids this cuts
    alike are kept apart by :func:`~agentcore.providers.transform.transform_messages`."""
    compat = compat if compat is not None else resolve_compat(model)
    if compat.get("requiresMistralToolIds"):
        return _mistral_id(tool_call_id)
    if "|" in tool_call_id:
        return _ID_UNSAFE.sub("_", tool_call_id.split("|", 1)[0])[:_MAX_ID]
    if model.provider == "openai":
        return tool_call_id[:_MAX_ID]
    return tool_call_id


def _id_normalizer(model: Model, compat: Mapping[str, Any]) -> Any:
    if not compat.get("requiresMistralToolIds"):
        return lambda tool_call_id: normalize_tool_call_id(
            tool_call_id, model, compat
        )  # (transform_messages keeps ids apart)
    return MistralIdNormalizer()  # memoised per request, collisions re-hashed


# --------------------------------------------------------------------------- messages


def _image_part(image: ImageContent) -> Dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:{image.mime_type};base64,{image.data}"}}


def _user_message(message: Any, allow_images: bool) -> Optional[Dict[str, Any]]:
    content = message.content
    if isinstance(content, str):
        return {"role": "user", "content": sanitize_surrogates(content)}
    parts: List[Dict[str, Any]] = []
    for block in content or []:
        if isinstance(block, TextContent):
            parts.append({"type": "text", "text": sanitize_surrogates(block.text)})
        elif isinstance(block, ImageContent) and allow_images:
            parts.append(_image_part(block))
    if not parts:
        return None
    if len(parts) == 1 and parts[0]["type"] == "text":  # plain string: the widest server support
        return {"role": "user", "content": parts[0]["text"]}
    return {"role": "user", "content": parts}


def _assistant_message(
    message: AssistantMessage, compat: Mapping[str, Any], reasons: bool = False
) -> Optional[Dict[str, Any]]:
    texts = [
        sanitize_surrogates(b.text) for b in message.content if isinstance(b, TextContent) and b.text and b.text.strip()
    ]
    thinking = [
        b
        for b in message.content
        if isinstance(b, ThinkingContent) and not b.redacted and b.thinking and b.thinking.strip()
    ]
    calls = [b for b in message.content if isinstance(b, ToolCall)]
    out: Dict[str, Any] = {
        "role": "assistant",
        "content": "" if compat.get("requiresAssistantAfterToolResult") else None,
    }
    text = "".join(texts)
    if compat.get("supportsThinkingContentParts"):  # Mistral: typed thinking/text chunks, in order
        parts = assistant_content_parts(message.content)
        if parts is not None:
            out["content"] = parts
    elif thinking and compat.get("requiresThinkingAsText"):
        thought = "\n\n".join(sanitize_surrogates(b.thinking) for b in thinking)
        text = thought + ("\n\n" + text if text else "")
    elif thinking and thinking[0].thinking_signature in _REASONING_FIELDS:
        out[thinking[0].thinking_signature] = "\n".join(sanitize_surrogates(b.thinking) for b in thinking)
    if text and not compat.get("supportsThinkingContentParts"):
        out["content"] = text
    if calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments or {}, ensure_ascii=False)},
            }
            for call in calls
        ]
        details = [d for d in (_reasoning_detail(c.thought_signature) for c in calls) if d is not None]
        if details:
            out["reasoning_details"] = details
    if reasons and compat.get("requiresReasoningContentOnAssistantMessages") and "reasoning_content" not in out:
        out["reasoning_content"] = ""  # DeepSeek: every replayed turn must carry the field (reference)
    if not out.get("content") and not calls:
        return None
    return out


def _reasoning_detail(signature: Optional[str]) -> Optional[Dict[str, Any]]:
    if not signature:
        return None
    try:
        detail = json.loads(signature)
    except (ValueError, RecursionError):
        return None
    return detail if isinstance(detail, dict) and detail.get("type") == "reasoning.encrypted" else None


def _tool_message(message: ToolResultMessage, compat: Mapping[str, Any], allow_images: bool) -> Dict[str, Any]:
    text = "\n".join(b.text for b in message.content if isinstance(b, TextContent))
    has_images = any(isinstance(b, ImageContent) for b in message.content)
    out: Dict[str, Any] = {
        "role": "tool",
        "tool_call_id": message.tool_call_id,
        "content": sanitize_surrogates(
            text if text else ("(see attached image)" if has_images and allow_images else "")
        ),
    }
    if compat.get("requiresToolResultName"):
        out["name"] = message.tool_name
    return out


def convert_messages(model: Model, context: Any, compat: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """The ``messages`` array of the request: system prompt, then the transformed conversation."""
    allow_images = "image" in (model.input or ())
    out: List[Dict[str, Any]] = []
    if getattr(context, "system_prompt", None):
        system_role = "developer" if model.reasoning and compat.get("supportsDeveloperRole") else "system"
        out.append({"role": system_role, "content": sanitize_surrogates(context.system_prompt)})
    messages = transform_messages(list(getattr(context, "messages", None) or []), model, _id_normalizer(model, compat))
    last_role: Optional[str] = None
    pending_images: List[ImageContent] = []

    def flush_images() -> None:
        nonlocal last_role
        if pending_images:
            if compat.get("requiresAssistantAfterToolResult"):  # this user message follows tool results too
                out.append({"role": "assistant", "content": _BRIDGE_TEXT})
            out.append(
                {
                    "role": "user",
                    "content": [{"type": "text", "text": _TOOL_RESULT_IMAGES_TEXT}]
                    + [_image_part(i) for i in pending_images],
                }
            )
            pending_images.clear()
            last_role = "user"

    for message in messages:
        role = role_of(message)
        if role != "toolResult":
            flush_images()
        if role == "user":
            if compat.get("requiresAssistantAfterToolResult") and last_role == "toolResult":
                out.append({"role": "assistant", "content": _BRIDGE_TEXT})
            converted = _user_message(message, allow_images)
        elif role == "assistant":
            converted = _assistant_message(message, compat, bool(model.reasoning))
        elif role == "toolResult":
            converted = _tool_message(message, compat, allow_images)
            if allow_images:
                pending_images.extend(b for b in message.content if isinstance(b, ImageContent))
        else:
            continue  # custom roles must be converted (convert_to_llm) before reaching a provider
        if converted is not None:
            out.append(converted)
            last_role = role
    flush_images()
    return out


def _has_tool_history(context: Any) -> bool:
    for message in getattr(context, "messages", None) or []:
        role = role_of(message)
        if role == "toolResult" or (role == "assistant" and getattr(message, "tool_calls", None)):
            return True
    return False


def _cache_text(message: Dict[str, Any], cache_control: Dict[str, str]) -> bool:
    """Put ``cache_control`` on the last text of ``message`` (a string becomes one text part)."""
    content = message.get("content")
    if isinstance(content, str) and content:
        message["content"] = [{"type": "text", "text": content, "cache_control": dict(cache_control)}]
        return True
    if isinstance(content, list):
        for part in reversed(content):
            if isinstance(part, dict) and part.get("type") == "text":
                part["cache_control"] = dict(cache_control)
                return True
    return False


def _add_anthropic_cache_control(
    messages: List[Dict[str, Any]], tools: Optional[List[Dict[str, Any]]], cache_control: Dict[str, str]
) -> None:
    """``compat.cacheControlFormat: "anthropic"`` (OpenRouter's ``anthropic/*`` models): cache
    breakpoints on the system prompt, the last tool and the last user/assistant text."""
    for message in messages:
        if message["role"] in ("system", "developer"):
            _cache_text(message, cache_control)
            break
    if tools:
        tools[-1]["cache_control"] = dict(cache_control)
    for message in reversed(messages):
        if message["role"] in ("user", "assistant") and _cache_text(message, cache_control):
            return


def _prompt_cache_fields(model: Model, options: Mapping[str, Any], compat: Mapping[str, Any]) -> Dict[str, Any]:
    """``prompt_cache_key`` (the session id) and ``prompt_cache_retention`` as the reference sends
    them: the key to api.openai.com unless retention is "none", and to any endpoint with long
    retention its compat supports (``supportsLongCacheRetention``), which also gets ``"24h"``."""
    retention = cache_retention(options)
    long_ok = retention == "long" and bool(compat.get("supportsLongCacheRetention", True))
    fields: Dict[str, Any] = {}
    session_id = cache_session_id(options, retention)
    if session_id and ("api.openai.com" in (model.base_url or "") or long_ok):
        fields["prompt_cache_key"] = prompt_cache_key(session_id)
    if long_ok:
        fields["prompt_cache_retention"] = "24h"
    return fields


# --------------------------------------------------------------------------- request body


def _reasoning_effort(model: Model, level: Optional[str], compat: Mapping[str, Any]) -> Optional[str]:
    """``reasoning_effort`` for ``level``: with a thinking-level map (``thinkingLevelMap``, or the
    older ``compat.reasoningEffortMap``) the level is clamped to a supported one and mapped, and a
    string ``off`` entry is sent when thinking is off (reference); without one, xhigh/max become
    high unless the model supports xhigh."""
    level_map = reasoning.thinking_level_map(model, compat)
    if level_map is not None:
        level = reasoning.clamp_to_model(model, level, compat) if level and level != "off" else "off"
        value = level_map.get(level)
        if isinstance(value, str):
            return value
        return None if level == "off" else level
    if not level or level == "off":
        return None
    if level in ("xhigh", "max"):
        level = "xhigh" if (level == "xhigh" and supports_xhigh(model)) else "high"
    return level


def build_request_body(
    model: Model, context: Any, options: Mapping[str, Any], compat: Optional[Mapping[str, Any]] = None
) -> Dict[str, Any]:
    """The JSON body of spec §12 for ``context`` and the stream options.

    Prompt caching (issue 17): ``prompt_cache_key``/``prompt_cache_retention`` (see
    :func:`_prompt_cache_fields`) and, with ``compat.cacheControlFormat: "anthropic"``, Anthropic
    cache breakpoints. ``tool_choice`` is sent only with tools (servers refuse it without), the
    options' ``"any"`` as ``"required"``. Raises ValueError for a bad ``cache_retention``.
    """
    compat = compat if compat is not None else resolve_compat(model)
    messages = convert_messages(model, context, compat)
    body: Dict[str, Any] = {"model": model.id, "messages": messages, "stream": True}
    body.update(_prompt_cache_fields(model, options, compat))
    if compat.get("supportsUsageInStreaming", True):
        body["stream_options"] = {"include_usage": True}
    if compat.get("supportsStore"):
        body["store"] = False
    if options.get("max_tokens"):
        body[compat.get("maxTokensField") or "max_completion_tokens"] = int(options["max_tokens"])
    if options.get("temperature") is not None:
        body["temperature"] = options["temperature"]
    specs = tool_specs(context)
    if specs:
        tools = []
        for name, description, parameters in specs:
            function: Dict[str, Any] = {"name": name, "description": description, "parameters": parameters}
            if compat.get("supportsStrictMode", True):
                function["strict"] = False
            tools.append({"type": "function", "function": function})
        body["tools"] = tools
        if compat.get("zaiToolStream"):
            body["tool_stream"] = True  # z.ai streams tool-call arguments only when asked (reference)
    elif _has_tool_history(context) and compat.get("supportsEmptyTools", True):
        body["tools"] = []  # proxies (LiteLLM) refuse tool history without a tools field
    retention = cache_retention(options)
    if compat.get("cacheControlFormat") == "anthropic" and retention != "none":
        long_ok = retention == "long" and compat.get("supportsLongCacheRetention", True)
        cache_control = {"type": "ephemeral", "ttl": "1h"} if long_ok else {"type": "ephemeral"}
        _add_anthropic_cache_control(messages, body.get("tools"), cache_control)
    choice = options.get("tool_choice")
    if choice is not None and body.get("tools"):  # refused without tools (400)
        body["tool_choice"] = "required" if choice == "any" else choice  # "any" is not OpenAI's word
    schema = options.get("output_schema")
    if schema:  # native structured output (Agent.ask)
        from ..structured import schema_name

        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": schema_name(schema), "schema": schema, "strict": False},
        }
    level = options.get("reasoning") or options.get("reasoning_effort")
    level = str(level) if level is not None else None
    fmt = compat.get("thinkingFormat") or "openai"
    if fmt == "mistral":
        if model.reasoning and level and level != "off":
            body["prompt_mode"] = "reasoning"  # Magistral's reasoning system prompt (reference)
    elif model.reasoning and fmt in ("zai", "qwen"):
        body["enable_thinking"] = bool(level and level != "off")
    elif model.reasoning and fmt == "qwen-chat-template":
        body["chat_template_kwargs"] = {"enable_thinking": bool(level and level != "off")}
    elif model.reasoning and fmt == "deepseek":
        # DeepSeek V4: thinking is switched on or off explicitly and the effort is sent whatever
        # supportsReasoningEffort says (a loopback proxy included), as the reference does
        effort = _reasoning_effort(model, level, compat) if level and level != "off" else None
        body["thinking"] = {"type": "enabled" if effort else "disabled"}
        if effort:
            body["reasoning_effort"] = effort
    else:
        effort = _reasoning_effort(model, level, compat)
        if effort and model.reasoning and compat.get("supportsReasoningEffort"):
            body["reasoning_effort"] = effort
    if "openrouter.ai" in (model.base_url or "") and compat.get("openRouterRouting"):
        body["provider"] = compat["openRouterRouting"]
    gateway = compat.get("vercelGatewayRouting") or {}
    if "ai-gateway.vercel.sh" in (model.base_url or "") and (gateway.get("only") or gateway.get("order")):
        body["providerOptions"] = {"gateway": {k: gateway[k] for k in ("only", "order") if gateway.get(k)}}
    return body


def build_headers(
    model: Model,
    context: Any,
    api_key: Optional[str],
    options: Optional[Mapping[str, Any]] = None,
    compat: Optional[Mapping[str, Any]] = None,
) -> Dict[str, str]:
    """Bearer auth, Copilot's dynamic headers, and session-affinity headers (the ``session_id``
    option) when ``compat.sendSessionAffinityHeaders`` is on, in ``compat.sessionAffinityFormat``
    (:func:`~agentcore.providers.caching.session_affinity_headers`)."""
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    options = options or {}
    compat = compat if compat is not None else resolve_compat(model)
    if compat.get("sendSessionAffinityHeaders"):
        session_id = cache_session_id(options, cache_retention(options))
        headers.update(session_affinity_headers(session_id, compat.get("sessionAffinityFormat"), affinity=True))
    if model.provider == "github-copilot":
        messages = getattr(context, "messages", None) or []
        last = role_of(messages[-1]) if messages else None
        headers["X-Initiator"] = "user" if last == "user" else "agent"
        headers["Openai-Intent"] = "conversation-edits"
        if any(
            isinstance(b, ImageContent)
            for m in messages
            for b in (getattr(m, "content", None) or [])
            if not isinstance(getattr(m, "content", None), str)
        ):
            headers["Copilot-Vision-Request"] = "true"
    return headers


# --------------------------------------------------------------------------- the provider


class OpenAICompletionsProvider(WireProvider):
    """The built-in provider of the ``openai-completions`` wire API."""

    api = API
    error_style = "openai"
    #: reads nothing beyond agentcore's StreamOptions (declared, so stream() checks the names it is given)
    stream_options: Dict[str, str] = {}

    def build_request(self, model: Model, context: Any, options: Dict[str, Any], api_key: Optional[str]) -> WireRequest:
        compat = resolve_compat(model)
        url = endpoint_url(model.base_url or "https://api.openai.com/v1", "chat/completions")
        request = WireRequest(
            url,
            build_headers(model, context, api_key, options, compat),
            build_request_body(model, context, options, compat),
        )
        if compat.get("azure") is True or model.provider in _AZURE_PROVIDERS:  # an Azure deployment
            from . import azure

            request = azure.adapt_completions_request(request, model, options, api_key)
        return request

    def describe_failure(
        self, exc: BaseException, model: Model, options: Dict[str, Any], api_key: Optional[str]
    ) -> str:
        from . import azure

        if azure.is_azure(model):
            return azure.explain_failure(exc, model, options, api_key)
        return super().describe_failure(exc, model, options, api_key)

    def new_handler(self, model: Model, writer: StreamWriter, options: Dict[str, Any]) -> WireHandler:
        return CompletionsHandler(model, writer, resolve_compat(model))

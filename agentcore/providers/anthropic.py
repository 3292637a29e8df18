"""The ``anthropic-messages`` wire API: Anthropic Messages over SSE (providers spec §14).

Three parts, each usable alone: :func:`build_request_body` (context -> JSON body), :func:`build_headers`
and :class:`AnthropicStreamState`, the state machine that turns parsed SSE events into stream events
on the output :class:`~agentcore.types.AssistantMessage`. :class:`AnthropicProvider` wires them to the
shared HTTP skeleton. Thinking (budget or adaptive), signatures, redacted thinking, prompt caching and
cache usage are handled; block types it does not know (server tools, web search results, citations)
are ignored with their deltas.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ..types import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    role_of,
)
from . import reasoning
from .base import (
    MAPPINGS,
    ProviderError,
    StateHandler,
    StreamWriter,
    WireProvider,
    WireRequest,
    endpoint_url,
    sanitize_surrogates,
    tool_specs,
)
from .caching import cache_retention, cache_session_id
from .models import calculate_cost, price_long_cache_writes
from .retries import retryable_error
from .transform import transform_messages

__all__ = [
    "API",
    "AnthropicProvider",
    "AnthropicStreamState",
    "build_request_body",
    "build_headers",
    "anthropic_compat",
    "request_url",
    "normalize_tool_call_id",
    "convert_messages",
    "convert_tools",
    "map_stop_reason",
]

API = "anthropic-messages"
ANTHROPIC_VERSION = "2023-06-01"
_CLAUDE_CODE_IDENTITY = "You are Claude Code, Anthropic's official CLI for Claude."
_REDACTED_TEXT = "[Reasoning redacted]"
_EMPTY_ERROR_TEXT = "(the tool failed without output)"


# --------------------------------------------------------------------------- model traits


#: ``opus-4-7``, ``sonnet-4.6``, ``opus-5``: the family and version of a Claude model id (one or two
#: digits each, so the date of ``claude-opus-4-20250514`` is no minor version)
_CLAUDE_VERSION = re.compile(r"(opus|sonnet|haiku)-(\d{1,2})(?:[-.](\d{1,2}))?(?!\d)")


def _claude_version(model_id: str) -> Optional[Tuple[str, int, int]]:
    """``(family, major, minor)`` of a Claude 4+ style id (``claude-opus-4-7``), or None."""
    match = _CLAUDE_VERSION.search(model_id or "")
    if match is None:
        return None
    return match.group(1), int(match.group(2)), int(match.group(3) or 0)


def _is_adaptive(model_id: str) -> bool:
    """Models that take ``thinking: {type: adaptive}`` plus an effort instead of a token budget:
    Opus and Sonnet 4.6 and every later Claude (Opus 4.7 refuses ``type: enabled`` with a 400)."""
    version = _claude_version(model_id)
    return version is not None and version[1:] >= (4, 6)


def _is_oauth_token(api_key: str) -> bool:
    return "sk-ant-oat" in (api_key or "")


def _effort_for(level: str, model_id: str) -> str:
    if level in ("minimal", "low"):
        return "low"
    if level == "medium":
        return "medium"
    if level in ("xhigh", "max"):
        version = _claude_version(model_id)
        return "max" if version is not None and version[0] == "opus" and version[1:] >= (4, 6) else "high"
    return "high"


def anthropic_compat(model: Any) -> Dict[str, bool]:
    """The reference's Anthropic compat flags: ``model.compat`` (JSON camelCase) over the defaults
    detected from the provider. Fireworks' Anthropic endpoint takes neither eager tool streaming,
    long cache retention nor cache breakpoints on tools, and wants session affinity; so does
    Cloudflare's AI Gateway in front of Anthropic."""
    provider = getattr(model, "provider", "") or ""
    fireworks = provider == "fireworks"
    gateway = provider == "cloudflare-ai-gateway" and "anthropic" in (getattr(model, "base_url", "") or "")
    flags = {
        "supportsEagerToolInputStreaming": not fireworks,
        "supportsLongCacheRetention": not fireworks,
        "sendSessionAffinityHeaders": fireworks or gateway,
        "supportsCacheControlOnTools": not fireworks,
    }
    for key, value in (getattr(model, "compat", None) or {}).items():
        if key in flags and value is not None:
            flags[key] = bool(value)
    return flags


def _cache_control(model: Any, retention: str) -> Optional[Dict[str, str]]:
    """``{"type": "ephemeral"}`` (+ ``ttl: "1h"`` for long retention where the compat allows it),
    None for retention "none"."""
    if retention == "none":
        return None
    if retention == "long" and anthropic_compat(model)["supportsLongCacheRetention"]:
        return {"type": "ephemeral", "ttl": "1h"}
    return {"type": "ephemeral"}


# --------------------------------------------------------------------------- request


def normalize_tool_call_id(tool_call_id: str) -> str:
    """Anthropic ids allow ``[A-Za-z0-9_-]`` and at most 64 characters."""
    return "".join(c if (c.isascii() and (c.isalnum() or c in "_-")) else "_" for c in tool_call_id)[:64]


def request_url(model: Any) -> str:
    """``{base_url}/v1/messages``; the base URL carries no ``/v1``."""
    return endpoint_url(getattr(model, "base_url", "") or "https://api.anthropic.com", "v1/messages")


def build_headers(
    model: Any, api_key: str, options: Optional[Mapping[str, Any]] = None, context: Any = None
) -> Dict[str, str]:
    """The provider's own headers; the skeleton layers ``model.headers`` and ``headers=`` on top.

    An OAuth token (``sk-ant-oat...``, e.g. from ``ANTHROPIC_OAUTH_TOKEN``) is sent as a Bearer
    token with the OAuth betas; anything else as ``x-api-key``, plus ``x-session-affinity: <session
    id>`` when the compat's ``sendSessionAffinityHeaders`` asks for it. The fine-grained tool
    streaming beta is sent only for a model without per-tool ``eager_input_streaming``
    (``supportsEagerToolInputStreaming: false``) when ``context`` has tools (None: assume it has).
    Raises ValueError for a bad ``cache_retention``.
    """
    options = options or {}
    compat = anthropic_compat(model)
    has_tools = True if context is None else bool(getattr(context, "tools", None))
    betas = []
    if has_tools and not compat["supportsEagerToolInputStreaming"]:
        betas.append("fine-grained-tool-streaming-2025-05-14")
    if options.get("interleaved_thinking", True) and not _is_adaptive(model.id):
        betas.append("interleaved-thinking-2025-05-14")
    headers: Dict[str, str] = {
        "content-type": "application/json",
        "accept": "application/json",
        "anthropic-version": ANTHROPIC_VERSION,
    }
    if _is_oauth_token(api_key):
        headers["authorization"] = f"Bearer {api_key}"
        headers["anthropic-beta"] = ",".join(["claude-code-20250219", "oauth-2025-04-20"] + betas)
    else:
        headers["x-api-key"] = api_key
        if betas:
            headers["anthropic-beta"] = ",".join(betas)
        session_id = cache_session_id(options, cache_retention(options))
        if session_id and compat["sendSessionAffinityHeaders"]:
            headers["x-session-affinity"] = session_id
    return headers


def _image_block(image: ImageContent) -> Dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": image.mime_type, "data": image.data}}


def _tool_result_content(message: ToolResultMessage, allow_images: bool) -> Any:
    """A plain string when the result is text only, else text/image blocks: blank texts are left
    out (the API refuses an empty text block), and a placeholder text leads when none is left.

    An error result with no text (a tool or hook that failed without saying why, images a
    text-only model cannot take) says :data:`_EMPTY_ERROR_TEXT`: the API refuses the whole
    request otherwise (400 "content cannot be empty if `is_error` is true"), and so every later
    request of the session, which replays it."""
    texts = [b for b in message.content if isinstance(b, TextContent)]
    images = [b for b in message.content if isinstance(b, ImageContent)] if allow_images else []
    if not images:
        text = sanitize_surrogates("\n".join(b.text for b in texts))
        return _EMPTY_ERROR_TEXT if message.is_error and not text.strip() else text
    blocks: List[Dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent) and block.text.strip():
            blocks.append({"type": "text", "text": sanitize_surrogates(block.text)})
        elif isinstance(block, ImageContent):
            blocks.append(_image_block(block))
    if not any(b["type"] == "text" for b in blocks):
        blocks.insert(0, {"type": "text", "text": "(see attached image)"})
    return blocks


def _user_content(message: UserMessage, allow_images: bool) -> Any:
    if isinstance(message.content, str):
        return sanitize_surrogates(message.content) if message.content.strip() else None
    blocks: List[Dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent) and block.text.strip():
            blocks.append({"type": "text", "text": sanitize_surrogates(block.text)})
        elif isinstance(block, ImageContent) and allow_images:
            blocks.append(_image_block(block))
    return blocks or None


def _assistant_blocks(message: AssistantMessage) -> List[Dict[str, Any]]:
    blocks: List[Dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text.strip():
                blocks.append({"type": "text", "text": sanitize_surrogates(block.text)})
        elif isinstance(block, ThinkingContent):
            if block.redacted:
                blocks.append({"type": "redacted_thinking", "data": block.thinking_signature or ""})
            elif not (block.thinking_signature or "").strip():
                # an unsigned thought (aborted stream) is rejected as thinking: replay it as text
                if block.thinking.strip():
                    blocks.append({"type": "text", "text": sanitize_surrogates(block.thinking)})
            else:
                # signed, even with blank text: ``display: "omitted"`` (Opus 4.7's default) streams
                # no thinking text, only the signature, and a tool loop must send the block back
                blocks.append(
                    {
                        "type": "thinking",
                        "thinking": sanitize_surrogates(block.thinking),
                        "signature": block.thinking_signature,
                    }
                )
        elif isinstance(block, ToolCall):
            blocks.append({"type": "tool_use", "id": block.id, "name": block.name, "input": block.arguments or {}})
    return blocks


def convert_messages(
    model: Any, messages: List[Any], cache_control: Optional[Dict[str, str]] = None
) -> List[Dict[str, Any]]:
    """Agent messages -> Anthropic ``messages``; consecutive tool results share one user message."""
    allow_images = "image" in tuple(getattr(model, "input", ()) or ())
    out: List[Dict[str, Any]] = []
    pending_results: List[Dict[str, Any]] = []

    def flush_results() -> None:
        if pending_results:
            out.append({"role": "user", "content": list(pending_results)})
            pending_results.clear()

    for message in transform_messages(messages, model, normalize_tool_call_id):
        role = role_of(message)
        if role == "toolResult":
            pending_results.append(
                {
                    "type": "tool_result",
                    "tool_use_id": message.tool_call_id,
                    "content": _tool_result_content(message, allow_images),
                    "is_error": bool(message.is_error),
                }
            )
            continue
        flush_results()
        if role == "user":
            content = _user_content(message, allow_images)
            if content is not None:
                out.append({"role": "user", "content": content})
        elif role == "assistant":
            blocks = _assistant_blocks(message)
            if blocks:
                out.append({"role": "assistant", "content": blocks})
    flush_results()
    if cache_control and out and out[-1]["role"] == "user":
        _mark_last_block(out[-1], cache_control)
    return out


def _mark_last_block(message: Dict[str, Any], cache_control: Dict[str, str]) -> None:
    content = message["content"]
    if isinstance(content, str):
        message["content"] = [{"type": "text", "text": content, "cache_control": dict(cache_control)}]
    elif content and content[-1].get("type") in ("text", "image", "tool_result"):
        content[-1]["cache_control"] = dict(cache_control)


def convert_tools(
    context: Any, *, eager_input_streaming: bool = False, cache_control: Optional[Dict[str, str]] = None
) -> List[Dict[str, Any]]:
    """Tool definitions; only ``properties`` and ``required`` of each schema are sent (spec §14),
    plus its ``$defs`` (or ``definitions``) when those refer to them: a ``$ref`` to a definition
    left behind makes the API refuse the request ("input_schema: JSON schema is invalid"), as
    schemas of nested pydantic models and of MCP tools have.

    ``eager_input_streaming`` marks every tool for streamed arguments (what the fine-grained tool
    streaming beta did for the whole request); ``cache_control`` becomes a cache breakpoint on
    the last tool, so the tool list is cached with the system prompt."""
    out = []
    for name, description, schema in tool_specs(context):
        tool: Dict[str, Any] = {"name": name, "description": description}
        if eager_input_streaming:
            tool["eager_input_streaming"] = True
        input_schema: Dict[str, Any] = {
            "type": "object",
            "properties": schema.get("properties") or {},
            "required": schema.get("required") or [],
        }
        for key in ("$defs", "definitions"):
            definitions = schema.get(key)
            if isinstance(definitions, Mapping) and _refers_to(input_schema, f"#/{key}/"):
                input_schema[key] = definitions
        tool["input_schema"] = input_schema
        out.append(tool)
    if out and cache_control:
        out[-1]["cache_control"] = dict(cache_control)
    return out


def _refers_to(node: Any, prefix: str, depth: int = 0) -> bool:
    """Whether a ``$ref`` inside ``node`` (a JSON schema, nested at most 200 levels) starts with ``prefix``."""
    if depth > 200:
        return False
    if isinstance(node, Mapping):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(prefix):
            return True
        return any(_refers_to(value, prefix, depth + 1) for value in node.values())
    if isinstance(node, (list, tuple)):
        return any(_refers_to(value, prefix, depth + 1) for value in node)
    return False


def _declare_history_tools(body: Dict[str, Any]) -> None:
    """Declare the tools named by earlier ``tool_use`` blocks when the request has no tools.

    Anthropic refuses a request whose messages hold ``tool_use``/``tool_result`` blocks but which
    defines no tools (400 "must define tools"), which happens when tools are removed mid
    conversation (``/tools none``, a sub-run without tools, the ``final_result`` tool of a finished
    ``Agent.ask``). Each name gets a stub definition and ``tool_choice`` becomes ``none`` (unless the
    caller chose one), so the model reads the history but cannot call a tool that is gone.
    """
    names: List[str] = []
    for message in body["messages"]:
        content = message.get("content")
        for block in content if isinstance(content, list) else ():
            if block.get("type") == "tool_use" and block.get("name") not in names:
                names.append(block["name"])
    if not names:
        return
    body["tools"] = [
        {
            "name": name,
            "description": "No longer available in this conversation.",
            "input_schema": {"type": "object", "properties": {}},
        }
        for name in names
    ]
    body["tool_choice"] = {"type": "none"}


def build_request_body(model: Any, context: Any, **options: Any) -> Dict[str, Any]:
    """The JSON body of one streaming request.

    Options used: ``max_tokens``, ``temperature`` (dropped while thinking), ``reasoning`` (level or
    None), ``thinking_budgets``, ``thinking_enabled``/``thinking_budget_tokens``/``effort`` (raw
    overrides), ``cache_retention`` (cache breakpoints on the system prompt, the last tool and the
    last user message; raises ValueError for a bad value), ``metadata`` (``user_id``), ``tool_choice``
    (a word becomes ``{"type": word}``, OpenAI's ``"required"`` Anthropic's ``"any"``; an object is
    sent as is; left out when the request has no tools, which the API refuses), ``api_key`` (only
    to detect OAuth tokens, never written into the body), ``output_schema``
    (``output_config.format``). A blank system prompt is left out (the API refuses a blank text
    block). Thinking is adaptive (an effort, no budget, ``display:
    "summarized"`` so Opus 4.7 and later stream their thinking summaries too) on Opus/Sonnet 4.6
    and every later Claude, a token budget on older models.
    """
    compat = anthropic_compat(model)
    cache_control = _cache_control(model, cache_retention(options))
    level = reasoning.normalize_level(options.get("reasoning"))
    if level is not None:  # a level the model's thinking-level map marks unsupported moves to the nearest
        level = reasoning.clamp_to_model(model, level)
        level = None if level == "off" else level
    thinking_enabled = options.get("thinking_enabled")
    if thinking_enabled is None:
        thinking_enabled = level is not None
    thinking_on = bool(thinking_enabled) and bool(getattr(model, "reasoning", False))

    max_tokens = reasoning.base_max_tokens(model, options.get("max_tokens"))
    body: Dict[str, Any] = {
        "model": model.id,
        "messages": convert_messages(model, list(context.messages or []), cache_control),
        "max_tokens": max_tokens,
        "stream": True,
    }
    system: List[Dict[str, Any]] = []
    if _is_oauth_token(options.get("api_key") or ""):
        system.append({"type": "text", "text": _CLAUDE_CODE_IDENTITY})
    if context.system_prompt and context.system_prompt.strip():  # the API refuses a blank text block
        system.append({"type": "text", "text": sanitize_surrogates(context.system_prompt)})
    if system:
        if cache_control:
            for block in system:
                block["cache_control"] = dict(cache_control)
        body["system"] = system
    if options.get("temperature") is not None and not thinking_on:
        body["temperature"] = options["temperature"]
    if context.tools:
        body["tools"] = convert_tools(
            context,
            eager_input_streaming=compat["supportsEagerToolInputStreaming"],
            cache_control=cache_control if compat["supportsCacheControlOnTools"] else None,
        )
    else:
        _declare_history_tools(body)

    if thinking_on:
        if _is_adaptive(model.id):
            # Opus 4.7 and later default to display "omitted" (signatures without thinking text):
            # ask for the summaries a reasoning level is meant to show, as earlier models send them
            body["thinking"] = {"type": "adaptive", "display": "summarized"}
            effort = options.get("effort") or (
                (reasoning.mapped_effort(model, level) or _effort_for(level, model.id)) if level else None
            )
            if effort:
                body["output_config"] = {"effort": effort}
        else:
            budget = options.get("thinking_budget_tokens")
            if budget is None and level is not None:
                body["max_tokens"], budget = reasoning.adjust_max_tokens_for_thinking(
                    max_tokens, int(getattr(model, "max_tokens", 0) or 0), level, options.get("thinking_budgets")
                )
            body["thinking"] = {"type": "enabled", "budget_tokens": int(budget or 1024)}

    metadata = options.get("metadata")
    if isinstance(metadata, Mapping) and metadata.get("user_id"):
        body["metadata"] = {"user_id": metadata["user_id"]}
    tool_choice = options.get("tool_choice")
    if tool_choice and body.get("tools"):  # refused without tools (400)
        if isinstance(tool_choice, str):  # "required" is OpenAI's word for Anthropic's "any"
            body["tool_choice"] = {"type": "any" if tool_choice == "required" else tool_choice}
        else:
            body["tool_choice"] = dict(tool_choice)
    schema = options.get("output_schema")
    if schema:  # native structured output (Agent.ask), next to a possible effort
        fmt = {"type": "json_schema", "schema": {k: v for k, v in schema.items() if k != "title"}}
        body["output_config"] = {**body.get("output_config", {}), "format": fmt}
    return body


# --------------------------------------------------------------------------- response stream

_STOP_REASONS = {
    "end_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",  # cut off by the context window, not max_tokens
    "tool_use": "toolUse",
    "pause_turn": "stop",
    "stop_sequence": "stop",
    "refusal": "error",
    "sensitive": "error",
}


def map_stop_reason(reason: str) -> str:
    """Anthropic ``stop_reason`` -> StopReason; raises :class:`ProviderError` for unknown values."""
    try:
        return _STOP_REASONS[reason]
    except KeyError:
        raise ProviderError(f"Unhandled stop reason: {reason}") from None


class AnthropicStreamState:
    """Consumes parsed SSE events of one response and turns them into ``writer`` calls.

    Deltas are routed by the API's own block ``index``. :meth:`handle` raises
    :class:`ProviderError` for ``event: error`` and unknown stop reasons; :meth:`finish` raises
    when the stream ended before ``message_stop`` or the model refused. Open blocks are not closed
    on error (spec §3 rule 6).
    """

    def __init__(self, model: Any, writer: StreamWriter) -> None:
        self.model = model
        self.writer = writer
        self.output = writer.output
        self._blocks: Dict[int, int] = {}  # API block index -> index in output.content
        self._started = False
        self._stopped = False
        self._cache_write_1h = 0  # of cache_write: tokens written with the 1-hour TTL
        self._stop_details: Optional[str] = None

    # -- dispatch -------------------------------------------------------------------------------
    def handle(self, event_name: Optional[str], data: Any) -> None:
        """Apply one SSE event (``data`` already JSON-decoded, or the raw text for ``event: error``)."""
        kind = data.get("type") if isinstance(data, MAPPINGS) else None
        if event_name == "error" or kind == "error":
            raise stream_error(data)
        handler = _HANDLERS.get(kind or "")
        if handler is not None:
            handler(self, data)

    def finish(self) -> None:
        """Check the stream ended properly; raise :class:`ProviderError` if not."""
        if not self._stopped:
            raise ProviderError(
                "Anthropic stream ended before message_stop"
                if self._started
                else "Anthropic stream ended without any event"
            )
        if self.output.stop_reason == "error":
            detail = f": {self._stop_details}" if self._stop_details else ""
            raise ProviderError(f"The model stopped with an error stop reason{detail}")

    # -- events ---------------------------------------------------------------------------------
    def _message_start(self, data: Mapping[str, Any]) -> None:
        self._started = True
        message = data.get("message") or {}
        output = self.writer.output
        if isinstance(message.get("id"), str) and message["id"]:
            output.response_id = message["id"]  # msg_...: the response's id
        served = message.get("model")
        if isinstance(served, str) and served and served != self.model.id:
            output.response_model = served  # an alias resolved to a dated model
        usage = message.get("usage") or {}
        self._apply_usage(usage, only_present=False)

    def _block_start(self, data: Mapping[str, Any]) -> None:
        block = data.get("content_block") or {}
        kind = block.get("type")
        writer = self.writer
        if kind == "text":
            index = writer.start_text()
        elif kind == "thinking":
            index = writer.start_thinking(thinking_signature="")
        elif kind == "redacted_thinking":
            index = writer.start_thinking(
                thinking_signature=block.get("data") or "", redacted=True, thinking=_REDACTED_TEXT
            )
        elif kind == "tool_use":
            args = block.get("input")
            index = writer.start_tool_call(
                str(block.get("id") or ""),
                str(block.get("name") or ""),
                arguments=dict(args) if isinstance(args, Mapping) else {},
            )
        else:
            return  # server_tool_use, web_search_tool_result, ...: not ours to show
        self._blocks[data.get("index", index)] = index

    def _block_delta(self, data: Mapping[str, Any]) -> None:
        index = self._blocks.get(data.get("index", -1))
        if index is None:
            return
        block = self.output.content[index]
        delta = data.get("delta") or {}
        kind = delta.get("type")
        if kind == "text_delta" and isinstance(block, TextContent):
            self.writer.append_text(index, delta.get("text") or "")
        elif kind == "thinking_delta" and isinstance(block, ThinkingContent):
            self.writer.append_thinking(index, delta.get("thinking") or "")
        elif kind == "signature_delta" and isinstance(block, ThinkingContent):
            block.thinking_signature = (block.thinking_signature or "") + (delta.get("signature") or "")
        elif kind == "input_json_delta" and isinstance(block, ToolCall):
            self.writer.append_tool_arguments(index, delta.get("partial_json") or "")

    def _block_stop(self, data: Mapping[str, Any]) -> None:
        index = self._blocks.pop(data.get("index", -1), None)
        if index is not None:
            self.writer.end_block(index)  # streamed tool arguments are parsed; else the call's input stays

    def _message_delta(self, data: Mapping[str, Any]) -> None:
        delta = data.get("delta") or {}
        if delta.get("stop_reason"):
            self.output.stop_reason = map_stop_reason(delta["stop_reason"])
            details = delta.get("stop_details")
            if isinstance(details, Mapping) and details.get("explanation"):
                self._stop_details = f"{delta['stop_reason']}: {details['explanation']}"
            else:
                self._stop_details = str(delta["stop_reason"])
        self._apply_usage(data.get("usage") or {}, only_present=True)

    def _message_stop(self, data: Mapping[str, Any]) -> None:
        self._stopped = True

    @property
    def terminal(self) -> bool:
        """``message_stop`` arrived: nothing of the response is left to read."""
        return self._stopped

    # -- usage ----------------------------------------------------------------------------------
    def _apply_usage(self, raw: Mapping[str, Any], only_present: bool) -> None:
        usage = self.output.usage
        for attr, key in (
            ("input", "input_tokens"),
            ("output", "output_tokens"),
            ("cache_read", "cache_read_input_tokens"),
            ("cache_write", "cache_creation_input_tokens"),
        ):
            value = raw.get(key)
            if value is not None:
                setattr(usage, attr, int(value))
            elif not only_present:
                setattr(usage, attr, 0)
        usage.total_tokens = usage.input + usage.output + usage.cache_read + usage.cache_write
        split = raw.get("cache_creation")
        if isinstance(split, Mapping) and split.get("ephemeral_1h_input_tokens") is not None:
            self._cache_write_1h = _count_of(split.get("ephemeral_1h_input_tokens"))
        elif not only_present:
            self._cache_write_1h = 0
        cost = calculate_cost(self.model, usage)
        if self._cache_write_1h:
            price_long_cache_writes(self.model, cost, min(self._cache_write_1h, usage.cache_write))


def _count_of(value: Any) -> int:
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0


_HANDLERS: Dict[str, Callable[[AnthropicStreamState, Mapping[str, Any]], None]] = {
    "message_start": AnthropicStreamState._message_start,
    "content_block_start": AnthropicStreamState._block_start,
    "content_block_delta": AnthropicStreamState._block_delta,
    "content_block_stop": AnthropicStreamState._block_stop,
    "message_delta": AnthropicStreamState._message_delta,
    "message_stop": AnthropicStreamState._message_stop,
}


# --------------------------------------------------------------------------- provider


class AnthropicProvider(WireProvider):
    """The ``anthropic-messages`` provider registered by the built-in plugin."""

    api = API
    error_style = "anthropic"
    #: The options this provider reads beyond agentcore's StreamOptions (see agentcore.plugins.provider_options)
    stream_options = {"interleaved_thinking": "Claude's interleaved thinking with tools (default true)"}

    def build_request(self, model: Any, context: Any, options: Dict[str, Any], api_key: Optional[str]) -> WireRequest:
        key = api_key or ""
        body = build_request_body(model, context, **dict(options, api_key=key))
        return WireRequest(request_url(model), build_headers(model, key, options, context), body)

    def new_handler(self, model: Any, writer: Any, options: Dict[str, Any]) -> StateHandler:
        return _AnthropicHandler(AnthropicStreamState(model, writer))


class _AnthropicHandler(StateHandler):
    """``event: error`` fails with its data text as is, JSON or not (e.g. a proxy's plain text)."""

    def on_event(self, event: Any) -> bool:
        if event.event == "error":
            raise stream_error(event.data or "Anthropic stream reported an error without details")
        return super().on_event(event)


def stream_error(data: Any) -> ProviderError:
    """The error of an in-stream ``error`` event: its data text as the message, retryable for
    ``overloaded_error``, ``rate_limit_error`` and ``api_error`` (what 529/429/500 say)."""
    text = data if isinstance(data, str) else json.dumps(data)
    parsed = data
    if isinstance(data, str):
        try:
            parsed = json.loads(data)
        except (ValueError, RecursionError):
            parsed = None
    error = parsed.get("error") if isinstance(parsed, MAPPINGS) else None
    kind = error.get("type") if isinstance(error, MAPPINGS) else None
    return ProviderError(text, retryable=retryable_error(kind))

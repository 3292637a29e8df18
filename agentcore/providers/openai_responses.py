"""The ``openai-responses`` wire API: OpenAI Responses over SSE (providers spec §13).

:func:`build_request_body` turns a context into the ``input`` item list (reasoning items replayed
from their stored JSON, assistant text as ``message`` items, tool calls as ``function_call`` /
``function_call_output`` pairs); :class:`ResponsesStreamState` turns parsed SSE events into stream
events. Output items are tracked by ``output_index``, so interleaved items stay apart. A tool call id
is ``"{call_id}|{item_id}"``; a text block's ``text_signature`` is ``{"v":1,"id":..,"phase":..}``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable, Dict, List, Mapping, Optional, Set

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
from .caching import cache_retention, cache_session_id, prompt_cache_key, session_affinity_headers
from .models import calculate_cost
from .retries import retryable_error
from .transform import transform_messages

__all__ = [
    "API",
    "OpenAIResponsesProvider",
    "ResponsesStreamState",
    "build_request_body",
    "build_headers",
    "responses_compat",
    "request_url",
    "convert_messages",
    "convert_tools",
    "make_id_normalizer",
]

API = "openai-responses"
_ID_NORMALIZING_PROVIDERS = frozenset({"openai", "openai-codex", "opencode", "azure-openai-responses"})
_SERVICE_TIER_MULTIPLIER = {"flex": 0.5, "priority": 2.0}
_MAX_CALL_ID = 64  # "Invalid 'input[n].call_id': string too long. Expected ... maximum length 64"


# --------------------------------------------------------------------------- ids and signatures


def _sanitize_id(value: str) -> str:
    return "".join(c if (c.isascii() and (c.isalnum() or c in "_-")) else "_" for c in value)


def make_id_normalizer(model: Any) -> Callable[[str], str]:
    """Tool-call id normaliser for replaying foreign ids to OpenAI (spec §6), for one request:
    ``call|item`` ids get both halves sanitised and cut to 64 characters (``call|`` becomes the call
    id alone, not an item id ``fc``); an id without ``|``
    longer than OpenAI's 64-character ``call_id`` limit (Google's ``{tool name}_{ms}_{n}``) is
    cut too. Two ids whose call ids come out alike keep them apart: the second call id keeps 55
    characters and gets ``_`` and 8 hex digits of a hash of the whole id."""
    new_ids: Dict[str, str] = {}
    owners: Dict[str, str] = {}

    def cut(tool_call_id: str) -> str:
        if "|" not in tool_call_id:
            return tool_call_id[:_MAX_CALL_ID]
        call_id, item_id = tool_call_id.split("|", 1)
        call_id = _sanitize_id(call_id)
        item_id = _sanitize_id(item_id)
        if not item_id:  # a call whose server sent no item id: there is none to send
            return call_id[:_MAX_CALL_ID]
        if not item_id.startswith("fc"):
            item_id = "fc_" + item_id
        return f"{call_id[:_MAX_CALL_ID].rstrip('_')}|{item_id[:64].rstrip('_')}"

    def normalize(tool_call_id: str) -> str:
        if model.provider not in _ID_NORMALIZING_PROVIDERS:
            return tool_call_id
        known = new_ids.get(tool_call_id)
        if known is not None:
            return known
        new = first = cut(tool_call_id)
        attempt = 0
        while owners.get(new.split("|", 1)[0], tool_call_id) != tool_call_id:  # results match on the call id
            attempt += 1
            call_id, bar, item_id = first.partition("|")
            new = f"{call_id[: _MAX_CALL_ID - 9]}_{_short_hash(f'{tool_call_id}:{attempt}')[:8]}{bar}{item_id}"
        new_ids[tool_call_id] = new
        owners[new.split("|", 1)[0]] = tool_call_id
        return new

    return normalize


def _short_hash(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _encode_text_signature(item_id: str, phase: Optional[str]) -> str:
    payload: Dict[str, Any] = {"v": 1, "id": item_id}
    if phase:
        payload["phase"] = phase
    return json.dumps(payload, separators=(",", ":"))


def _parse_text_signature(signature: Optional[str]) -> Optional[Dict[str, Any]]:
    """``{"id", "phase"?}`` from a v1 JSON signature or a legacy plain message id."""
    if not signature:
        return None
    if signature.startswith("{"):
        try:
            parsed = json.loads(signature)
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, dict) and parsed.get("v") == 1 and isinstance(parsed.get("id"), str):
            out = {"id": parsed["id"]}
            if parsed.get("phase") in ("commentary", "final_answer"):
                out["phase"] = parsed["phase"]
            return out
    return {"id": signature}


# --------------------------------------------------------------------------- request


def request_url(model: Any) -> str:
    return endpoint_url(getattr(model, "base_url", "") or "https://api.openai.com/v1", "responses")


def responses_compat(model: Any) -> Dict[str, Any]:
    """The reference's Responses compat: ``supportsLongCacheRetention`` (default true) and
    ``sessionAffinityFormat`` ("openai", "openai-nosession", "openrouter"; the older
    ``sendSessionIdHeader: false`` means "openai-nosession"), from ``model.compat``."""
    compat = dict(getattr(model, "compat", None) or {})
    style = compat.get("sessionAffinityFormat")
    if style is None:
        style = "openai-nosession" if compat.get("sendSessionIdHeader") is False else "openai"
    long_ok = compat.get("supportsLongCacheRetention")
    return {"supportsLongCacheRetention": True if long_ok is None else bool(long_ok), "sessionAffinityFormat": style}


def build_headers(model: Any, api_key: str, options: Optional[Mapping[str, Any]] = None) -> Dict[str, str]:
    """Bearer auth and JSON, plus the session's affinity headers (``session_id`` and
    ``x-client-request-id`` by default, as the reference sends them to route a session's requests
    to its cache); the skeleton layers ``model.headers`` and ``headers=`` on top."""
    options = options or {}
    headers = {"authorization": f"Bearer {api_key}", "content-type": "application/json", "accept": "text/event-stream"}
    session_id = cache_session_id(options, cache_retention(options))
    style = responses_compat(model)["sessionAffinityFormat"]
    headers.update(session_affinity_headers(session_id, style, affinity=False))
    return headers


def _image_part(image: ImageContent) -> Dict[str, Any]:
    return {"type": "input_image", "detail": "auto", "image_url": f"data:{image.mime_type};base64,{image.data}"}


def _user_item(message: UserMessage, allow_images: bool) -> Optional[Dict[str, Any]]:
    if isinstance(message.content, str):
        return {"role": "user", "content": [{"type": "input_text", "text": sanitize_surrogates(message.content)}]}
    parts: List[Dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            parts.append({"type": "input_text", "text": sanitize_surrogates(block.text)})
        elif isinstance(block, ImageContent) and allow_images:
            parts.append(_image_part(block))
    return {"role": "user", "content": parts} if parts else None


def _unique_message_id(msg_id: str, used: Set[str]) -> str:
    """``msg_id``, or a variant of it no earlier item of the request has: the API refuses a
    request whose input repeats an item id (400 "Duplicate item found with id msg_1")."""
    candidate = msg_id
    attempt = 1
    while candidate in used:
        attempt += 1
        candidate = f"{msg_id}_{attempt}"
        if len(candidate) > 64:
            candidate = f"msg_{_short_hash(f'{msg_id}:{attempt}')}"
    used.add(candidate)
    return candidate


def _assistant_items(
    message: AssistantMessage, model: Any, index: int, used: Optional[Set[str]] = None
) -> List[Dict[str, Any]]:
    """The input items of one assistant message. A text block without a stored message id gets
    ``msg_{index}``; ids already in ``used`` (the message ids of the request so far, updated
    here) get a fresh variant, so a replayed turn with two text blocks (another provider's
    thinking turned into text, then its text) does not repeat an id. A reasoning item that
    cannot be replayed (:func:`_replayable`) is left out, and so are the ``fc_`` ids of the
    turn's calls (their reasoning item is missing)."""
    used = set() if used is None else used
    items: List[Dict[str, Any]] = []
    different_model = message.model != model.id and message.provider == model.provider and message.api == model.api
    skipped_thinking = False
    for block in message.content:
        if isinstance(block, ThinkingContent):
            try:
                item = json.loads(block.thinking_signature) if block.thinking_signature else None
            except (ValueError, RecursionError):
                item = None
            if isinstance(item, dict) and _replayable(item):
                items.append(item)
            else:
                skipped_thinking = True
        elif isinstance(block, TextContent):
            parsed = _parse_text_signature(block.text_signature) or {}
            msg_id = parsed.get("id") or f"msg_{index}"
            if len(msg_id) > 64:
                msg_id = f"msg_{_short_hash(msg_id)}"
            msg_id = _unique_message_id(msg_id, used)
            item = {
                "type": "message",
                "role": "assistant",
                "id": msg_id,
                "status": "completed",
                "content": [{"type": "output_text", "text": sanitize_surrogates(block.text), "annotations": []}],
            }
            if parsed.get("phase"):
                item["phase"] = parsed["phase"]
            items.append(item)
        elif isinstance(block, ToolCall):
            call_id, _, item_id = block.id.partition("|")
            call: Dict[str, Any] = {"type": "function_call"}
            # an fc_ id unpaired with its reasoning item fails OpenAI's pairing validation: omit it
            if item_id and not ((different_model or skipped_thinking) and item_id.startswith("fc_")):
                call["id"] = item_id
            call.update(
                call_id=call_id, name=block.name, arguments=json.dumps(block.arguments or {}, ensure_ascii=False)
            )
            items.append(call)
    return items


def _replayable(item: Dict[str, Any]) -> bool:
    """Whether a stored reasoning item can go back in a ``store: false`` request: only with its
    ``encrypted_content`` (or its own reasoning text, as some compatible servers send it). A bare
    ``{"id": "rs_..."}`` (a turn streamed without ``include``, e.g. with thinking off) makes
    OpenAI look the id up and refuse every later request: "Item with id 'rs_...' not found.
    Items are not persisted when `store` is set to false"."""
    if item.get("type") != "reasoning":
        return True
    return bool(item.get("encrypted_content")) or bool(item.get("content"))


def _tool_output_item(message: ToolResultMessage, allow_images: bool) -> Dict[str, Any]:
    text = "\n".join(b.text for b in message.content if isinstance(b, TextContent))
    images = [b for b in message.content if isinstance(b, ImageContent)] if allow_images else []
    call_id = message.tool_call_id.split("|", 1)[0]
    if not images:
        return {"type": "function_call_output", "call_id": call_id, "output": sanitize_surrogates(text)}
    parts: List[Dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            parts.append({"type": "input_text", "text": sanitize_surrogates(block.text)})
        elif isinstance(block, ImageContent):
            parts.append(_image_part(block))
    return {"type": "function_call_output", "call_id": call_id, "output": parts}


def convert_messages(model: Any, context: Any) -> List[Dict[str, Any]]:
    """The ``input`` list: system prompt (``developer`` for reasoning models), then every message."""
    allow_images = "image" in tuple(getattr(model, "input", ()) or ())
    items: List[Dict[str, Any]] = []
    if context.system_prompt:
        items.append(
            {
                "role": "developer" if model.reasoning else "system",
                "content": sanitize_surrogates(context.system_prompt),
            }
        )
    messages = transform_messages(list(context.messages or []), model, make_id_normalizer(model))
    message_ids: Set[str] = set()
    for index, message in enumerate(messages):
        role = role_of(message)
        if role == "user":
            item = _user_item(message, allow_images)
            if item:
                items.append(item)
        elif role == "assistant":
            items.extend(_assistant_items(message, model, index, message_ids))
        elif role == "toolResult":
            items.append(_tool_output_item(message, allow_images))
    return items


def convert_tools(context: Any) -> List[Dict[str, Any]]:
    out = []
    for name, description, schema in tool_specs(context):
        out.append(
            {"type": "function", "name": name, "description": description, "parameters": schema, "strict": False}
        )
    return out


def _effort(level: str, model: Any) -> Optional[str]:
    """The Responses ``reasoning.effort`` of ``level``: the model's thinking-level map when it has
    one (level clamped to a supported one; None when that is ``off``), else xhigh/max -> high
    unless the model supports xhigh."""
    if reasoning.thinking_level_map(model) is not None:
        level = reasoning.clamp_to_model(model, level)
        if level == "off":
            return None
        return reasoning.mapped_effort(model, level) or level
    if level in ("xhigh", "max"):
        return "xhigh" if reasoning.supports_xhigh(model) else "high"
    return level


def _openai_tool_choice(choice: Any) -> Any:
    """``tool_choice`` as OpenAI's APIs take it: ``"any"`` (a word the options accept, Anthropic's
    and Gemini's) is OpenAI's ``"required"``, which they refuse with a 400; anything else as given."""
    return "required" if choice == "any" else choice


def build_request_body(model: Any, context: Any, **options: Any) -> Dict[str, Any]:
    """The JSON body of one streaming request.

    Options used: ``session_id`` (``prompt_cache_key``), ``cache_retention`` (``"long"``:
    ``prompt_cache_retention: "24h"`` unless the compat's ``supportsLongCacheRetention`` is false;
    a bad value raises ValueError), ``max_tokens``,
    ``temperature``, ``service_tier``, ``reasoning`` (level or None), ``reasoning_effort`` /
    ``reasoning_summary`` (raw overrides), ``tool_choice`` (only with tools, which the API
    requires; ``"any"`` becomes ``"required"``), ``output_schema`` (``text.format``).
    """
    body: Dict[str, Any] = {
        "model": model.id,
        "input": convert_messages(model, context),
        "stream": True,
        "store": False,
    }
    retention = cache_retention(options)
    session_id = cache_session_id(options, retention)
    if session_id:
        body["prompt_cache_key"] = prompt_cache_key(session_id)
    if retention == "long" and responses_compat(model)["supportsLongCacheRetention"]:
        body["prompt_cache_retention"] = "24h"
    if options.get("max_tokens"):
        body["max_output_tokens"] = int(options["max_tokens"])
    if options.get("temperature") is not None:
        body["temperature"] = options["temperature"]
    if options.get("service_tier") is not None:
        body["service_tier"] = options["service_tier"]
    if context.tools:
        body["tools"] = convert_tools(context)
    if options.get("tool_choice") and body.get("tools"):  # refused without tools (400)
        body["tool_choice"] = _openai_tool_choice(options["tool_choice"])
    schema = options.get("output_schema")
    if schema:  # native structured output (Agent.ask)
        from ..structured import schema_name

        body["text"] = {
            "format": {"type": "json_schema", "name": schema_name(schema), "schema": schema, "strict": False}
        }

    if model.reasoning:
        level = reasoning.normalize_level(options.get("reasoning"))
        effort = options.get("reasoning_effort") or (_effort(level, model) if level else None)
        summary = options.get("reasoning_summary")
        off_effort = reasoning.mapped_effort(model, "off") if level is None else None
        if effort or summary:
            body["reasoning"] = {"effort": effort or "medium", "summary": summary or "auto"}
            body["include"] = ["reasoning.encrypted_content"]
        elif off_effort:  # the model's map names its "no reasoning" effort (e.g. "none")
            body["reasoning"] = {"effort": off_effort}
        elif str(model.name or "").startswith("gpt-5"):
            # gpt-5 has no "reasoning off"; this developer note is the known way to suppress it
            body["input"].append(
                {"role": "developer", "content": [{"type": "input_text", "text": "# Juice: 0 !important"}]}
            )
    return body


# --------------------------------------------------------------------------- response stream


class _Item:
    """One output item in flight: the raw item and its block's index (the writer keeps arguments)."""

    __slots__ = ("item", "index", "parts")

    def __init__(self, item: Dict[str, Any], index: int) -> None:
        self.item = item
        self.index = index
        self.parts: List[Dict[str, Any]] = []


def _call_block_id(item: Mapping[str, Any], added: Optional[Mapping[str, Any]] = None) -> str:
    """``"{call_id}|{item id}"`` of a ``function_call`` item; an id the item lacks (servers that
    send none, or ``null`` in ``output_item.done``) is the one ``added`` (the item as first
    announced) had, else empty: never the text ``None``, which would be replayed as the id."""
    added = added or {}
    call_id = item.get("call_id") or added.get("call_id") or ""
    item_id = item.get("id") or added.get("id") or ""
    return f"{call_id}|{item_id}"


class ResponsesStreamState:
    """Consumes parsed Responses SSE events and turns them into ``writer`` calls.

    :meth:`handle` raises :class:`ProviderError` for ``error`` and ``response.failed``;
    :meth:`finish` raises when no ``response.completed``/``response.incomplete`` arrived or the
    response ended in an error status.
    """

    def __init__(self, model: Any, writer: StreamWriter, service_tier: Optional[str] = None) -> None:
        self.model = model
        self.writer = writer
        self.output = writer.output
        self.service_tier = service_tier
        self._items: Dict[Any, _Item] = {}
        self._last_key: Any = None
        self._terminal = False
        self._error_detail: Optional[str] = None

    def handle(self, event_name: Optional[str], data: Any) -> None:
        """Apply one SSE event whose ``data`` was JSON-decoded (dispatch on ``data["type"]``)."""
        if not isinstance(data, MAPPINGS):
            return
        handler = _HANDLERS.get(str(data.get("type") or event_name or ""))
        if handler is not None:
            handler(self, data)

    @property
    def terminal(self) -> bool:
        """``response.completed`` (or ``incomplete``/``failed``) arrived: nothing is left to read."""
        return self._terminal

    def finish(self) -> None:
        if not self._terminal:
            raise ProviderError("OpenAI Responses stream ended without response.completed")
        if self.output.stop_reason == "error":
            raise ProviderError(self._error_detail or "The response ended with an error status")

    # -- items ----------------------------------------------------------------------------------
    def _key(self, data: Mapping[str, Any]) -> Any:
        return data.get("output_index", self._last_key)

    def _current(self, data: Mapping[str, Any], kind: str) -> Optional[_Item]:
        entry = self._items.get(self._key(data))
        if entry is None or entry.item.get("type") != kind:
            return None
        return entry

    def _item_added(self, data: Mapping[str, Any]) -> None:
        item = dict(data.get("item") or {})
        kind = item.get("type")
        writer = self.writer
        if kind == "reasoning":
            index = writer.start_thinking()
        elif kind == "message":
            index = writer.start_text()
        elif kind == "function_call":
            index = writer.start_tool_call(
                _call_block_id(item),
                str(item.get("name") or ""),
                arguments_text=str(item.get("arguments") or ""),
            )
        else:
            return
        entry = _Item(item, index)
        key = data.get("output_index", len(self._items))
        self._items[key] = entry
        self._last_key = key

    def _summary_part_added(self, data: Mapping[str, Any]) -> None:
        entry = self._current(data, "reasoning")
        if entry is not None:
            entry.parts.append(dict(data.get("part") or {"type": "summary_text", "text": ""}))

    def _thinking_delta(self, data: Mapping[str, Any], text: Optional[str] = None) -> None:
        entry = self._current(data, "reasoning")
        if entry is None:
            return
        self.writer.append_thinking(entry.index, str(data.get("delta") or "") if text is None else text)

    def _summary_part_done(self, data: Mapping[str, Any]) -> None:
        self._thinking_delta(data, "\n\n")

    def _content_part_added(self, data: Mapping[str, Any]) -> None:
        entry = self._current(data, "message")
        part = data.get("part") or {}
        if entry is not None and part.get("type") in ("output_text", "refusal"):
            entry.parts.append(dict(part))

    def _text_delta(self, data: Mapping[str, Any]) -> None:
        entry = self._current(data, "message")
        if entry is None:
            return
        self.writer.append_text(entry.index, str(data.get("delta") or ""))

    def _args_delta(self, data: Mapping[str, Any]) -> None:
        entry = self._current(data, "function_call")
        if entry is None:
            return
        self.writer.append_tool_arguments(entry.index, str(data.get("delta") or ""))

    def _args_done(self, data: Mapping[str, Any]) -> None:
        entry = self._current(data, "function_call")
        if entry is not None and isinstance(data.get("arguments"), str):
            self.writer.set_tool_arguments_text(entry.index, data["arguments"])

    def _item_done(self, data: Mapping[str, Any]) -> None:
        item = dict(data.get("item") or {})
        kind = item.get("type")
        entry = self._current(data, kind) if kind else None
        if entry is None:
            return
        self._items.pop(self._key(data), None)
        block = self.output.content[entry.index]
        if kind == "reasoning":
            summary = item.get("summary") or []
            if summary:
                block.thinking = "\n\n".join(str(s.get("text") or "") for s in summary)
            block.thinking_signature = json.dumps(item, ensure_ascii=False)
        elif kind == "message":
            parts = item.get("content") or []
            if parts:
                block.text = "".join(
                    str((p.get("text") if p.get("type") == "output_text" else p.get("refusal")) or "")
                    for p in parts
                    if isinstance(p, Mapping)
                )
            block.text_signature = _encode_text_signature(str(item.get("id") or ""), item.get("phase"))
        elif kind == "function_call":
            if not self.writer.tool_arguments_text(entry.index).strip():  # nothing streamed: the item's
                self.writer.set_tool_arguments_text(entry.index, str(item.get("arguments") or ""))
            block.id = _call_block_id(item, entry.item)
            block.name = str(item.get("name") or block.name)
        self.writer.end_block(entry.index)

    # -- response metadata and terminal events ---------------------------------------------------
    def _response(self, data: Mapping[str, Any]) -> None:
        """``response.created`` / ``in_progress``: the response's id, and the model that serves it
        when that differs from the requested one (a dated snapshot)."""
        response = data.get("response")
        if not isinstance(response, MAPPINGS):
            return
        output = self.output
        response_id = response.get("id")
        if isinstance(response_id, str) and response_id and output.response_id is None:
            output.response_id = response_id
        served = response.get("model")
        if isinstance(served, str) and served and served != self.model.id and output.response_model is None:
            output.response_model = served

    def _completed(self, data: Mapping[str, Any]) -> None:
        self._terminal = True
        response = data.get("response") or {}
        self._response(data)
        self._apply_usage(response)
        self._backfill_encrypted_reasoning(response)
        status = response.get("status")
        if status == "incomplete":
            reason = (response.get("incomplete_details") or {}).get("reason")
            if reason == "max_output_tokens":
                self.output.stop_reason = "length"
            else:
                self.output.stop_reason = "error"
                self._error_detail = f"incomplete: {reason or 'unknown reason'}"
        elif status in ("failed", "cancelled"):
            self.output.stop_reason = "error"
            self._error_detail = f"Response {status}"
        else:
            self.output.stop_reason = "stop"
        if self.output.stop_reason == "stop" and any(isinstance(b, ToolCall) for b in self.output.content):
            self.output.stop_reason = "toolUse"

    def _apply_usage(self, response: Mapping[str, Any]) -> None:
        raw = response.get("usage")
        usage = self.output.usage
        if isinstance(raw, Mapping):
            cached = int((raw.get("input_tokens_details") or {}).get("cached_tokens") or 0)
            usage.input = int(raw.get("input_tokens") or 0) - cached
            usage.output = int(raw.get("output_tokens") or 0)
            usage.cache_read = cached
            usage.cache_write = 0
            usage.total_tokens = int(raw.get("total_tokens") or 0)
        calculate_cost(self.model, usage)
        factor = _SERVICE_TIER_MULTIPLIER.get(str(response.get("service_tier") or self.service_tier or ""))
        if factor:
            cost = usage.cost
            cost.input *= factor
            cost.output *= factor
            cost.cache_read *= factor
            cost.cache_write *= factor
            cost.total = cost.input + cost.output + cost.cache_read + cost.cache_write

    def _backfill_encrypted_reasoning(self, response: Mapping[str, Any]) -> None:
        """Some servers send ``encrypted_content`` only in the final response: copy it over."""
        final = {
            i.get("id"): i
            for i in response.get("output") or []
            if isinstance(i, Mapping) and i.get("type") == "reasoning" and i.get("encrypted_content")
        }
        if not final:
            return
        for block in self.output.content:
            if isinstance(block, ThinkingContent) and block.thinking_signature:
                try:
                    item = json.loads(block.thinking_signature)
                except (ValueError, RecursionError):
                    continue
                if isinstance(item, dict) and not item.get("encrypted_content") and item.get("id") in final:
                    item["encrypted_content"] = final[item["id"]]["encrypted_content"]
                    block.thinking_signature = json.dumps(item, ensure_ascii=False)

    def _error(self, data: Mapping[str, Any]) -> None:
        """``error``: its ``code`` and ``message`` are top-level, or in a nested ``error`` object
        (``{"type": "error", "error": {"type", "code", "message"}}``, also sent by the API)."""
        error = data.get("error")
        fields = error if isinstance(error, MAPPINGS) and data.get("message") is None else data
        code, message = fields.get("code"), fields.get("message")
        kind = fields.get("type") if fields is not data else None  # the nested error's type
        if message is None:
            message = json.dumps(data, ensure_ascii=False)  # no text of its own: show the event
        raise ProviderError(
            f"Error Code {code if code is not None else kind}: {message}", retryable=retryable_error(code, kind)
        )

    def _failed(self, data: Mapping[str, Any]) -> None:
        response = data.get("response") or {}
        self._response(data)
        self._apply_usage(response)
        error = response.get("error")
        details = response.get("incomplete_details") or {}
        retryable = False
        if isinstance(error, Mapping):
            message = f"{error.get('code') or 'unknown'}: {error.get('message') or 'no message'}"
            retryable = retryable_error(error.get("code"), error.get("type"))
        elif details.get("reason"):
            message = f"incomplete: {details['reason']}"
        else:
            message = "Unknown error (no error details in response)"
        raise ProviderError(message, retryable=retryable)


_HANDLERS: Dict[str, Callable[[ResponsesStreamState, Mapping[str, Any]], None]] = {
    "response.created": ResponsesStreamState._response,
    "response.in_progress": ResponsesStreamState._response,
    "response.output_item.added": ResponsesStreamState._item_added,
    "response.reasoning_summary_part.added": ResponsesStreamState._summary_part_added,
    "response.reasoning_summary_text.delta": ResponsesStreamState._thinking_delta,
    "response.reasoning_text.delta": ResponsesStreamState._thinking_delta,
    "response.reasoning_summary_part.done": ResponsesStreamState._summary_part_done,
    "response.content_part.added": ResponsesStreamState._content_part_added,
    "response.output_text.delta": ResponsesStreamState._text_delta,
    "response.refusal.delta": ResponsesStreamState._text_delta,
    "response.function_call_arguments.delta": ResponsesStreamState._args_delta,
    "response.function_call_arguments.done": ResponsesStreamState._args_done,
    "response.output_item.done": ResponsesStreamState._item_done,
    "response.completed": ResponsesStreamState._completed,
    "response.incomplete": ResponsesStreamState._completed,
    "error": ResponsesStreamState._error,
    "response.failed": ResponsesStreamState._failed,
}


# --------------------------------------------------------------------------- provider


class OpenAIResponsesProvider(WireProvider):
    """The ``openai-responses`` provider registered by the built-in plugin."""

    api = API
    error_style = "openai"
    #: reads nothing beyond agentcore's StreamOptions (declared, so stream() checks the names it is given)
    stream_options: Dict[str, str] = {}

    def build_request(self, model: Any, context: Any, options: Dict[str, Any], api_key: Optional[str]) -> WireRequest:
        return WireRequest(
            request_url(model),
            build_headers(model, api_key or "", options),
            build_request_body(model, context, **options),
        )

    def new_handler(self, model: Any, writer: Any, options: Dict[str, Any]) -> StateHandler:
        return StateHandler(ResponsesStreamState(model, writer, options.get("service_tier")))

"""The ``google-generative-ai`` wire API: Gemini ``streamGenerateContent?alt=sse`` (providers spec §15).

:func:`build_request_body` turns a context into ``contents`` (assistant turns as role ``model``,
thought signatures replayed only to the same provider and model, tool results as
``functionResponse`` parts that share one user turn), and :class:`GoogleStreamState` turns each
streamed ``GenerateContentResponse`` into stream events. Gemini does not stream tool arguments: a
function call yields ``toolcall_start``, one ``toolcall_delta`` and ``toolcall_end`` back to back.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import re
import time
from typing import Any, Callable, Dict, List, Mapping, Optional
from urllib.parse import quote

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
from .models import calculate_cost
from .retries import retryable_error
from .transform import transform_messages

__all__ = [
    "API",
    "GoogleProvider",
    "GoogleStreamState",
    "build_request_body",
    "build_headers",
    "request_url",
    "convert_messages",
    "convert_tools",
    "thinking_config",
    "map_finish_reason",
]

API = "google-generative-ai"
SKIP_SIGNATURE = "skip_thought_signature_validator"
_GEMINI3_PRO = re.compile(r"gemini-3(\.\d+)?-pro")
_GEMINI3_FLASH = re.compile(r"gemini-3(\.\d+)?-flash")
_BUDGETS_25_PRO = {"minimal": 128, "low": 2048, "medium": 8192, "high": 32768}
_BUDGETS_25_FLASH = {"minimal": 128, "low": 2048, "medium": 8192, "high": 24576}
_BUDGETS_25_FLASH_LITE = {"minimal": 512, "low": 2048, "medium": 8192, "high": 24576}  # takes 512 to 24576
_GEMMA4 = re.compile(r"gemma-?4")
_tool_call_counter = itertools.count(1)


# --------------------------------------------------------------------------- model traits


def _requires_tool_call_id(model_id: str) -> bool:
    """Claude and gpt-oss served through Gemini APIs need explicit function-call ids."""
    return model_id.startswith("claude-") or model_id.startswith("gpt-oss-")


def _is_gemini3(model_id: str) -> bool:
    return "gemini-3" in model_id.lower()


def _valid_signature(signature: Optional[str]) -> bool:
    """Thought signatures are base64 bytes; anything else would be rejected by the API."""
    if not signature or len(signature) % 4:
        return False
    try:
        base64.b64decode(signature, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def thinking_config(
    model: Any, level: Optional[str], budgets: Optional[Mapping[str, int]] = None
) -> Optional[Dict[str, Any]]:
    """``generationConfig.thinkingConfig`` for ``level`` (spec §11), None when off or unsupported.

    The model's thinking-level map comes first: it moves an unsupported level to a supported one,
    and a string it gives the level (the catalog's ``"LOW"``, ``"MINIMAL"`` ...) is sent as the
    ``thinkingLevel``. Then the family rules: Gemini 3 Pro and Gemma 4 take two levels, Gemini 3
    Flash four, and other models a ``thinkingBudget`` (``budgets`` win over the defaults; Gemini 2.5
    Flash-Lite's smallest is 512, the least it accepts).
    """
    if level is None or not getattr(model, "reasoning", False):
        return None
    level = reasoning.clamp_to_model(model, level)  # the model's thinking-level map first
    if level == "off":
        return None
    mapped = reasoning.mapped_effort(model, level)
    if mapped:
        return {"includeThoughts": True, "thinkingLevel": mapped}
    level = reasoning.clamp_level(level)
    model_id = model.id.lower()
    if _GEMINI3_PRO.search(model_id):
        return {"includeThoughts": True, "thinkingLevel": "LOW" if level in ("minimal", "low") else "HIGH"}
    if _GEMMA4.search(model_id):
        return {"includeThoughts": True, "thinkingLevel": "MINIMAL" if level in ("minimal", "low") else "HIGH"}
    if _GEMINI3_FLASH.search(model_id):
        return {"includeThoughts": True, "thinkingLevel": level.upper()}
    if budgets and budgets.get(level) is not None:
        budget = int(budgets[level])
    elif "2.5-pro" in model_id:
        budget = _BUDGETS_25_PRO.get(level, 8192)
    elif "2.5-flash-lite" in model_id:
        budget = _BUDGETS_25_FLASH_LITE.get(level, 8192)
    elif "2.5-flash" in model_id:
        budget = _BUDGETS_25_FLASH.get(level, 8192)
    else:
        budget = -1  # dynamic: the model decides
    return {"includeThoughts": True, "thinkingBudget": budget}


# --------------------------------------------------------------------------- request


def request_url(model: Any) -> str:
    base = getattr(model, "base_url", "") or "https://generativelanguage.googleapis.com/v1beta"
    return endpoint_url(base, f"models/{quote(model.id, safe='.-_/')}:streamGenerateContent?alt=sse")


def build_headers(model: Any, api_key: str, options: Optional[Mapping[str, Any]] = None) -> Dict[str, str]:
    """Key header and JSON; the skeleton layers ``model.headers`` and ``headers=`` on top."""
    return {"x-goog-api-key": api_key, "content-type": "application/json", "accept": "text/event-stream"}


def _inline(image: ImageContent) -> Dict[str, Any]:
    return {"inlineData": {"mimeType": image.mime_type, "data": image.data}}


def _user_parts(message: UserMessage, allow_images: bool) -> List[Dict[str, Any]]:
    """The parts of a user turn. Empty texts are left out: Gemini rejects a ``{"text": ""}`` part
    ("required oneof field 'data' must have one initialized field")."""
    blocks = [TextContent(message.content)] if isinstance(message.content, str) else message.content
    parts: List[Dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, TextContent):
            text = sanitize_surrogates(block.text)
            if text:
                parts.append({"text": text})
        elif isinstance(block, ImageContent) and allow_images:
            parts.append(_inline(block))
    return parts


def _model_parts(message: AssistantMessage, model: Any) -> List[Dict[str, Any]]:
    same = message.provider == model.provider and message.model == model.id
    parts: List[Dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if not block.text.strip():
                continue
            part: Dict[str, Any] = {"text": sanitize_surrogates(block.text)}
            if same and _valid_signature(block.text_signature):
                part["thoughtSignature"] = block.text_signature
            parts.append(part)
        elif isinstance(block, ThinkingContent):
            if not block.thinking.strip():
                continue
            if same:
                part = {"thought": True, "text": sanitize_surrogates(block.thinking)}
                if _valid_signature(block.thinking_signature):
                    part["thoughtSignature"] = block.thinking_signature
            else:
                part = {"text": sanitize_surrogates(block.thinking)}
            parts.append(part)
        elif isinstance(block, ToolCall):
            call: Dict[str, Any] = {"name": block.name, "args": block.arguments or {}}
            if _requires_tool_call_id(model.id):
                call["id"] = block.id
            part = {"functionCall": call}
            if same and _valid_signature(block.thought_signature):
                part["thoughtSignature"] = block.thought_signature
            elif _is_gemini3(model.id):
                part["thoughtSignature"] = SKIP_SIGNATURE
            parts.append(part)
    return parts


def _function_response(
    message: ToolResultMessage, model: Any, allow_images: bool
) -> tuple[Dict[str, Any], List[Dict[str, Any]]]:
    """The functionResponse part, and the parts of a separate image turn (models before Gemini 3)."""
    text = "\n".join(b.text for b in message.content if isinstance(b, TextContent))
    images = [b for b in message.content if isinstance(b, ImageContent)] if allow_images else []
    value = sanitize_surrogates(text) if text else ("(see attached image)" if images else "")
    response: Dict[str, Any] = {
        "name": message.tool_name,
        "response": {"error": value} if message.is_error else {"output": value},
    }
    nested = bool(images) and _is_gemini3(model.id)
    if nested:
        response["parts"] = [_inline(i) for i in images]
    if _requires_tool_call_id(model.id):
        response["id"] = message.tool_call_id
    image_turn = [] if (nested or not images) else [{"text": "Tool result image:"}] + [_inline(i) for i in images]
    return {"functionResponse": response}, image_turn


def _normalize_id_for(model: Any) -> Callable[[str], str]:
    def normalize(tool_call_id: str) -> str:
        if not _requires_tool_call_id(model.id):
            return tool_call_id
        return "".join(c if (c.isascii() and (c.isalnum() or c in "_-")) else "_" for c in tool_call_id)[:64]

    return normalize


def convert_messages(model: Any, messages: List[Any]) -> List[Dict[str, Any]]:
    """Agent messages -> Gemini ``contents`` (roles ``user`` and ``model``).

    The results of one batch of tool calls share one user turn: Gemini rejects a request whose
    function-call turn is not answered by exactly as many function responses in the next turn.
    Tool-result images a model before Gemini 3 cannot take inside a function response follow the
    whole batch, as user turns of their own.
    """
    allow_images = "image" in tuple(getattr(model, "input", ()) or ())
    contents: List[Dict[str, Any]] = []
    image_turns: List[List[Dict[str, Any]]] = []  # of the current batch of tool results
    for message in transform_messages(messages, model, _normalize_id_for(model)):
        role = role_of(message)
        if role != "toolResult" and image_turns:
            contents.extend({"role": "user", "parts": parts} for parts in image_turns)
            image_turns = []
        if role == "user":
            parts = _user_parts(message, allow_images)
            if parts:
                contents.append({"role": "user", "parts": parts})
        elif role == "assistant":
            parts = _model_parts(message, model)
            if parts:
                contents.append({"role": "model", "parts": parts})
        elif role == "toolResult":
            response_part, image_turn = _function_response(message, model, allow_images)
            last = contents[-1] if contents else None
            if last and last["role"] == "user" and any("functionResponse" in p for p in last["parts"]):
                last["parts"].append(response_part)  # parallel results share one turn
            else:
                contents.append({"role": "user", "parts": [response_part]})
            if image_turn:
                image_turns.append(image_turn)
    contents.extend({"role": "user", "parts": parts} for parts in image_turns)
    return contents


def convert_tools(context: Any) -> Optional[List[Dict[str, Any]]]:
    declarations = []
    for name, description, schema in tool_specs(context):
        declarations.append({"name": name, "description": description, "parametersJsonSchema": schema})
    return [{"functionDeclarations": declarations}] if declarations else None


_TOOL_MODES = {"auto": "AUTO", "none": "NONE", "any": "ANY", "required": "ANY"}


def _budget(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ProviderError(f"{where} must be a whole number of tokens, got {value!r}")
    try:
        return int(value)
    except ValueError:
        raise ProviderError(f"{where} must be a whole number of tokens, got {value!r}") from None


def _thinking_request(model: Any, options: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """The ``thinkingConfig`` of a request, or None to send none.

    The raw ``thinking`` dict wins; then ``thinking_enabled`` (False: none, whatever ``reasoning``
    says; None: on when ``reasoning`` names a level) and ``thinking_budget_tokens`` (the budget of
    thinking that is on, instead of the level's); then ``reasoning`` alone (:func:`thinking_config`).
    A budget that is not a whole number raises :class:`ProviderError` naming the option, and so
    does a ``thinking`` that is not an object (``-o thinking high`` was silently ignored).
    """
    raw = options.get("thinking")
    if raw is not None and not isinstance(raw, Mapping):
        raise ProviderError(
            'the "thinking" option must be an object {"enabled": true, "budget_tokens": N} or '
            f'{{"enabled": true, "level": "..."}}, not {type(raw).__name__}; for a thinking level '
            "use reasoning= (--thinking on the command line)"
        )
    if isinstance(raw, Mapping):
        if not (raw.get("enabled") and model.reasoning):
            return None
        config: Dict[str, Any] = {"includeThoughts": True}
        if raw.get("level") is not None:
            config["thinkingLevel"] = raw["level"]
        elif raw.get("budget_tokens") is not None:
            config["thinkingBudget"] = _budget(raw["budget_tokens"], 'the "thinking" option\'s budget_tokens')
        return config
    level = reasoning.normalize_level(options.get("reasoning"))
    enabled, budget = options.get("thinking_enabled"), options.get("thinking_budget_tokens")
    if enabled is False:
        return None
    if enabled is None and budget is None:
        return thinking_config(model, level, options.get("thinking_budgets"))
    if not model.reasoning or (enabled is None and level is None):
        return None
    if budget is not None:
        return {"includeThoughts": True, "thinkingBudget": _budget(budget, "thinking_budget_tokens")}
    return thinking_config(model, level, options.get("thinking_budgets")) or {"includeThoughts": True}


def build_request_body(model: Any, context: Any, **options: Any) -> Dict[str, Any]:
    """The JSON body of one streaming request.

    Options used: ``temperature``, ``max_tokens`` (``maxOutputTokens``, only when given),
    ``reasoning`` (level or None), ``thinking_budgets``, ``thinking`` (raw override dict with
    ``enabled``/``budget_tokens``/``level``), ``thinking_enabled``/``thinking_budget_tokens``
    (see :func:`_thinking_request`), ``tool_choice`` (auto/none/any, or the
    API's ``toolConfig`` or ``functionCallingConfig`` object, sent as given), ``output_schema``
    (``generationConfig.responseJsonSchema`` with ``responseMimeType`` application/json).
    """
    body: Dict[str, Any] = {"contents": convert_messages(model, list(context.messages or []))}
    system_prompt = sanitize_surrogates(context.system_prompt or "")
    if system_prompt:  # an empty text part is refused, as in a user turn
        body["systemInstruction"] = {"parts": [{"text": system_prompt}]}
    generation: Dict[str, Any] = {}
    if options.get("temperature") is not None:
        generation["temperature"] = options["temperature"]
    if options.get("max_tokens"):
        generation["maxOutputTokens"] = int(options["max_tokens"])
    config = _thinking_request(model, options)
    if config:
        generation["thinkingConfig"] = config
    if options.get("output_schema"):  # native structured output (Agent.ask)
        generation["responseMimeType"] = "application/json"
        generation["responseJsonSchema"] = options["output_schema"]
    if generation:
        body["generationConfig"] = generation
    tools = convert_tools(context)
    if tools:
        body["tools"] = tools
        choice = options.get("tool_choice")
        if isinstance(choice, str) and choice:
            body["toolConfig"] = {"functionCallingConfig": {"mode": _TOOL_MODES.get(choice, "AUTO")}}
        elif isinstance(choice, Mapping) and choice:  # the API's own object, e.g. allowedFunctionNames
            tool_config = dict(choice)
            if "functionCallingConfig" not in tool_config:
                tool_config = {"functionCallingConfig": tool_config}
            body["toolConfig"] = tool_config
    return body


# --------------------------------------------------------------------------- response stream


def map_finish_reason(reason: str) -> str:
    """STOP -> stop, MAX_TOKENS -> length, every other reason (safety, recitation ...) -> error."""
    if reason == "STOP":
        return "stop"
    if reason == "MAX_TOKENS":
        return "length"
    return "error"


class GoogleStreamState:
    """Consumes streamed ``GenerateContentResponse`` chunks and mutates ``output``.

    One text or thinking block is open at a time; switching kind closes it. :meth:`finish` closes
    the open block and raises :class:`ProviderError` when no chunk carried a finish reason
    (a truncated stream) or the finish reason is an error (safety, recitation, a malformed function
    call ...), even after whole function calls: those stay in the error message, never run.
    """

    def __init__(self, model: Any, writer: StreamWriter) -> None:
        self.model = model
        self.writer = writer
        self.output = writer.output
        self._open: Optional[int] = None
        self._finish_reason: Optional[str] = None
        self._finish_message: Optional[str] = None
        self._block_reason: Optional[str] = None

    def handle(self, event_name: Optional[str], data: Any) -> None:
        """Apply one chunk (``data`` already JSON-decoded)."""
        if not isinstance(data, MAPPINGS):
            return
        if data.get("error"):
            error = data["error"]
            codes = (error.get("status"), error.get("code")) if isinstance(error, MAPPINGS) else ()
            message = json.dumps({"error": error}, ensure_ascii=False)
            raise ProviderError(message, retryable=retryable_error(*codes))
        if self.output.response_id is None:
            self._response_fields(data)
        feedback = data.get("promptFeedback") or {}
        if feedback.get("blockReason"):
            self._block_reason = str(feedback["blockReason"])
        candidates = data.get("candidates") or []
        candidate = candidates[0] if candidates and isinstance(candidates[0], MAPPINGS) else {}
        for part in (candidate.get("content") or {}).get("parts") or []:
            if isinstance(part, MAPPINGS):
                self._part(part)
        if candidate.get("finishReason"):
            self._finish_reason = str(candidate["finishReason"])
            self._finish_message = candidate.get("finishMessage")
            self.output.stop_reason = map_finish_reason(self._finish_reason)
            # an error reason wins over the calls that came before it: MALFORMED_FUNCTION_CALL after
            # a good call, SAFETY after a call, must not run the calls as if the turn were whole
            if self.output.stop_reason != "error" and any(isinstance(b, ToolCall) for b in self.output.content):
                self.output.stop_reason = "toolUse"
        if isinstance(data.get("usageMetadata"), MAPPINGS):
            self._apply_usage(data["usageMetadata"])

    def _response_fields(self, data: Mapping[str, Any]) -> None:
        """``responseId`` (the first one) and ``modelVersion`` when it differs from the requested id
        (an alias such as ``gemini-flash-latest`` resolved to a concrete model)."""
        response_id = data.get("responseId")
        if isinstance(response_id, str) and response_id:
            self.output.response_id = response_id
        served = data.get("modelVersion")
        if isinstance(served, str) and served and served != self.model.id and self.output.response_model is None:
            self.output.response_model = served

    def finish(self) -> None:
        self._close_open()
        if self._finish_reason is None:
            if self._block_reason:
                raise ProviderError(f"Gemini blocked the prompt: {self._block_reason}")
            raise ProviderError("Gemini stream ended without a finish reason")
        if self.output.stop_reason == "error":
            detail = f": {self._finish_message}" if self._finish_message else ""
            raise ProviderError(f"Gemini stopped with finish reason {self._finish_reason}{detail}")

    # -- parts ----------------------------------------------------------------------------------
    def _part(self, part: Mapping[str, Any]) -> None:
        if "text" in part and part.get("text") is not None:
            self._text_part(part)
        if isinstance(part.get("functionCall"), MAPPINGS):
            self._function_call(part)

    def _text_part(self, part: Mapping[str, Any]) -> None:
        text = str(part["text"])
        thinking = part.get("thought") is True
        signature = part.get("thoughtSignature") or None
        writer = self.writer
        block: Any = writer.block(self._open) if self._open is not None else None
        same_kind = isinstance(block, ThinkingContent) if thinking else isinstance(block, TextContent)
        if not same_kind:
            if not text:
                return  # an empty trailing part opens no block
            self._close_open()
            self._open = writer.start_thinking() if thinking else writer.start_text()
            block = writer.block(self._open)
        index = self._open
        assert index is not None  # opened above when it was not
        if thinking:
            if signature:
                block.thinking_signature = signature
            if text:
                writer.append_thinking(index, text)
        else:
            if signature:
                block.text_signature = signature
            if text:
                writer.append_text(index, text)

    def _function_call(self, part: Mapping[str, Any]) -> None:
        self._close_open()
        call = part["functionCall"]
        name = str(call.get("name") or "")
        provided = call.get("id")
        taken = {b.id for b in self.output.content if isinstance(b, ToolCall)}
        if not provided or provided in taken:
            provided = f"{name}_{int(time.time() * 1000)}_{next(_tool_call_counter)}"
        args = call.get("args")
        arguments = dict(args) if isinstance(args, MAPPINGS) else {}
        writer = self.writer
        index = writer.start_tool_call(
            str(provided), name, arguments=arguments, thought_signature=part.get("thoughtSignature") or None
        )
        # Gemini sends whole calls: one delta carrying the arguments as JSON, then the end
        writer.append_tool_arguments(index, json.dumps(arguments, ensure_ascii=False))
        writer.end_block(index)

    def _close_open(self) -> None:
        if self._open is None:
            return
        index, self._open = self._open, None
        self.writer.end_block(index)

    def _apply_usage(self, meta: Mapping[str, Any]) -> None:
        """Last ``usageMetadata`` wins. ``promptTokenCount`` includes cached tokens: subtract them,
        since ``usage.input`` means uncached input (spec §1)."""
        usage = self.output.usage
        cached = int(meta.get("cachedContentTokenCount") or 0)
        usage.input = max(0, int(meta.get("promptTokenCount") or 0) - cached)
        usage.output = int(meta.get("candidatesTokenCount") or 0) + int(meta.get("thoughtsTokenCount") or 0)
        usage.cache_read = cached
        usage.cache_write = 0
        usage.total_tokens = int(meta.get("totalTokenCount") or 0)
        calculate_cost(self.model, usage)


# --------------------------------------------------------------------------- provider


class GoogleProvider(WireProvider):
    """The ``google-generative-ai`` provider registered by the built-in plugin."""

    api = API
    error_style = "google"
    #: The options this provider reads beyond agentcore's StreamOptions (see agentcore.plugins.provider_options)
    stream_options = {
        "thinking": "thinkingConfig override: {enabled, budget_tokens or level}; wins over reasoning",
    }

    def build_request(self, model: Any, context: Any, options: Dict[str, Any], api_key: Optional[str]) -> WireRequest:
        return WireRequest(
            request_url(model),
            build_headers(model, api_key or "", options),
            build_request_body(model, context, **options),
        )

    def new_handler(self, model: Any, writer: Any, options: Dict[str, Any]) -> StateHandler:
        return StateHandler(GoogleStreamState(model, writer))

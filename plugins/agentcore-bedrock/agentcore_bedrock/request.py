"""Converse request bodies: an agentcore context -> the JSON of ``POST /model/{id}/converse-stream``.

Follows the reference (pi-ai's ``amazon-bedrock`` provider) and the AWS ConverseStream API:

* ``system``: one text block, plus a ``cachePoint`` for models with prompt caching (none for a
  blank system prompt);
* ``messages``: user text/images, assistant text / ``reasoningContent`` / ``toolUse``, tool results
  as ``toolResult`` blocks (a result with no non-blank content says ``(no output)``); blank texts
  and empty turns are dropped (Bedrock rejects them), and
  neighbouring messages of one role are merged into one (Bedrock requires alternating roles: tool
  results and a steering message after them, or two user messages around a dropped failed turn,
  become one user message, its ``toolResult`` blocks first); a ``cachePoint`` ends the last user
  message for models with prompt caching;
* images only for models with ``"image"`` in ``model.input``: for others they are dropped (as
  every core wire API does), a tool result left without content saying that an image was omitted;
* ``inferenceConfig``: ``maxTokens`` (``max_tokens=`` or ``min(model.max_tokens, 32000)``, raised
  for the thinking budget) and ``temperature`` (not while Claude thinks: it must be 1 then);
* ``toolConfig``: ``toolSpec`` with the parameters as ``inputSchema.json``; ``tool_choice=``
  ``"auto"``/``"any"`` (or ``"required"``)/``"none"`` (no tools sent)/``{"type": "tool", "name": ...}``
  (OpenAI's ``{"type": "function", "function": {"name": ...}}`` too); another value raises
  :class:`ValueError` naming it;
* ``additionalModelRequestFields``: Claude thinking (a token budget, or adaptive thinking with an
  effort on Claude 4.6+), and the interleaved-thinking beta for budget thinking;
* ``requestMetadata`` from ``request_metadata=``.

Only the reference's cases are special-cased by model id (Claude's signatures and caching).
An image of a type Bedrock does not take raises :class:`ValueError` naming the MIME type (for a
model that takes images; others never see them).
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Mapping, Optional, Tuple

from agentcore.providers import reasoning
from agentcore.providers.base import sanitize_surrogates, tool_specs
from agentcore.providers.transform import transform_messages
from agentcore.types import ImageContent, TextContent, ThinkingContent, ToolCall, role_of

__all__ = [
    "build_request_body",
    "convert_messages",
    "system_blocks",
    "tool_config",
    "thinking_fields",
    "normalize_tool_call_id",
    "is_claude",
    "supports_prompt_caching",
    "supports_adaptive_thinking",
    "REDACTED_TEXT",
    "OMITTED_IMAGE_TEXT",
    "EMPTY_RESULT_TEXT",
    "DEFAULT_BUDGETS",
]

REDACTED_TEXT = "[Reasoning redacted]"
OMITTED_IMAGE_TEXT = "(image omitted: this model does not accept images)"
EMPTY_RESULT_TEXT = "(no output)"
DEFAULT_BUDGETS = reasoning.DEFAULT_THINKING_BUDGETS  # the reference's Bedrock budgets are the same
_IMAGE_FORMATS = {
    "image/jpeg": "jpeg",
    "image/jpg": "jpeg",
    "image/png": "png",
    "image/gif": "gif",
    "image/webp": "webp",
}
# a minor version has one or two digits: "sonnet-4-20250514" is Claude 4.0 with a date, not 4.20250514
# (the reference's pattern takes the date for the minor version and asks Sonnet 4 for adaptive thinking)
_ADAPTIVE = re.compile(r"claude-(?:opus|sonnet|haiku)-?(\d+)[.-](\d{1,2})(?!\d)")


# --------------------------------------------------------------------------- model traits


def is_claude(model: Any) -> bool:
    """Anthropic Claude on Bedrock (``anthropic.claude...``, also behind inference profiles)."""
    model_id = model.id.lower()
    return "anthropic.claude" in model_id or "anthropic/claude" in model_id


def supports_prompt_caching(model: Any) -> bool:
    """Claude 3.5 Haiku, 3.7 Sonnet and 4.x take ``cachePoint`` blocks; ``AWS_BEDROCK_FORCE_CACHE=1``
    forces them for application inference profiles (ARNs that do not name the model)."""
    model_id = model.id.lower()
    if "claude" not in model_id:
        return os.environ.get("AWS_BEDROCK_FORCE_CACHE") == "1"
    return "-4-" in model_id or "-4." in model_id or "claude-3-7-sonnet" in model_id or "claude-3-5-haiku" in model_id


def supports_adaptive_thinking(model: Any) -> bool:
    """Claude 4.6 and later think adaptively (``thinking.type: adaptive`` + an effort)."""
    match = _ADAPTIVE.search(model.id.lower())
    if not match:
        return False
    major, minor = int(match.group(1)), int(match.group(2))
    return major > 4 or (major == 4 and minor >= 6)


def normalize_tool_call_id(tool_call_id: str) -> str:
    """Bedrock tool-use ids allow ``[A-Za-z0-9_-]`` and at most 64 characters."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", tool_call_id)[:64]


def _cache_point(options: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    retention = options.get("cache_retention") or (
        "long" if os.environ.get("PI_CACHE_RETENTION") == "long" else "short"
    )
    if retention == "none":
        return None
    point: Dict[str, Any] = {"type": "default"}
    if retention == "long":
        point["ttl"] = "1h"
    return {"cachePoint": point}


# --------------------------------------------------------------------------- content


def _image(block: ImageContent) -> Dict[str, Any]:
    image_format = _IMAGE_FORMATS.get((block.mime_type or "").lower())
    if image_format is None:
        raise ValueError(
            f"Bedrock does not accept images of type {block.mime_type!r}: "
            "use image/jpeg, image/png, image/gif or image/webp"
        )
    return {"image": {"format": image_format, "source": {"bytes": block.data}}}


def _accepts_images(model: Any) -> bool:
    """Whether ``model`` takes image input (``"image"`` in ``model.input``), as the core decides."""
    return "image" in tuple(getattr(model, "input", ()) or ())


def _user_blocks(content: Any, allow_images: bool) -> List[Dict[str, Any]]:
    """Non-blank texts and, when ``allow_images``, images; possibly empty."""
    if isinstance(content, str):
        return [{"text": sanitize_surrogates(content)}] if content.strip() else []
    blocks = []
    for block in content:
        if isinstance(block, TextContent):
            if block.text.strip():
                blocks.append({"text": sanitize_surrogates(block.text)})
        elif isinstance(block, ImageContent) and allow_images:
            blocks.append(_image(block))
    return blocks


def _assistant_blocks(message: Any, model: Any) -> List[Dict[str, Any]]:
    claude = is_claude(model)
    blocks: List[Dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text.strip():
                blocks.append({"text": sanitize_surrogates(block.text)})
        elif isinstance(block, ToolCall):
            blocks.append({"toolUse": {"toolUseId": block.id, "name": block.name, "input": block.arguments or {}}})
        elif isinstance(block, ThinkingContent):
            blocks.extend(_reasoning_block(block, claude))
    return blocks


def _reasoning_block(block: ThinkingContent, claude: bool) -> List[Dict[str, Any]]:
    if block.redacted:  # transform_messages keeps these only for the same model
        if claude and block.thinking_signature:
            return [{"reasoningContent": {"redactedContent": block.thinking_signature}}]
        return []
    text = sanitize_surrogates(block.thinking)
    signed = claude and bool((block.thinking_signature or "").strip())
    if signed:
        # even with blank text: Claude's omitted thinking display (Opus 4.7's default) streams only
        # the signature, and a turn with tool calls must send its reasoning back
        return [{"reasoningContent": {"reasoningText": {"text": text, "signature": block.thinking_signature}}}]
    if not text.strip():
        return []
    if not claude:  # other models reject the signature field
        return [{"reasoningContent": {"reasoningText": {"text": text}}}]
    return [{"text": text}]  # Bedrock rejects unsigned Claude reasoning (an aborted stream)


def _tool_result(message: Any, allow_images: bool) -> Dict[str, Any]:
    """One ``toolResult`` block. Blank texts are left out (Bedrock refuses an empty text block, and
    the result stays in the history, so every later request would fail). Without ``allow_images``
    its images are dropped. A result left with no content says why rather than going out empty:
    :data:`OMITTED_IMAGE_TEXT` when images were dropped, else :data:`EMPTY_RESULT_TEXT`."""
    content = []
    omitted = False
    for block in message.content:
        if isinstance(block, ImageContent):
            if allow_images:
                content.append(_image(block))
            else:
                omitted = True
        elif isinstance(block, TextContent) and block.text.strip():
            content.append({"text": sanitize_surrogates(block.text)})
    if not content:
        content.append({"text": OMITTED_IMAGE_TEXT if omitted else EMPTY_RESULT_TEXT})
    return {
        "toolResult": {
            "toolUseId": message.tool_call_id,
            "content": content,
            "status": "error" if message.is_error else "success",
        }
    }


def _append(out: List[Dict[str, Any]], role: str, blocks: List[Dict[str, Any]]) -> None:
    """Add ``blocks`` as a ``role`` message, or to the last message when it has that role already
    (Bedrock answers 400 "A conversation must alternate between user and assistant roles" to
    neighbouring messages of one role). Nothing is added for no blocks: Bedrock rejects empty
    messages."""
    if not blocks:
        return
    if out and out[-1]["role"] == role:
        out[-1]["content"].extend(blocks)
    else:
        out.append({"role": role, "content": blocks})


def convert_messages(
    model: Any, messages: List[Any], cache_point: Optional[Dict[str, Any]] = None
) -> List[Dict[str, Any]]:
    """Agent messages -> Converse ``messages`` with alternating roles (see the module docstring).

    Raises :class:`ValueError` for an image type Bedrock does not accept."""
    allow_images = _accepts_images(model)
    out: List[Dict[str, Any]] = []
    for message in transform_messages(messages, model, normalize_tool_call_id):
        role = role_of(message)
        if role == "toolResult":
            _append(out, "user", [_tool_result(message, allow_images)])
        elif role == "user":
            _append(out, "user", _user_blocks(message.content, allow_images))
        elif role == "assistant":
            _append(out, "assistant", _assistant_blocks(message, model))
    if cache_point and out and out[-1]["role"] == "user" and supports_prompt_caching(model):
        out[-1]["content"].append(dict(cache_point))
    return out


def system_blocks(
    model: Any, system_prompt: Optional[str], cache_point: Optional[Dict[str, Any]] = None
) -> Optional[List[Dict[str, Any]]]:
    """The ``system`` field, or None without a system prompt (or a blank one: Bedrock refuses an
    empty text block)."""
    if not system_prompt or not system_prompt.strip():
        return None
    blocks: List[Dict[str, Any]] = [{"text": sanitize_surrogates(system_prompt)}]
    if cache_point and supports_prompt_caching(model):
        blocks.append(dict(cache_point))
    return blocks


_TOOL_CHOICE_WORDS = {"auto": "auto", "any": "any", "required": "any", "none": "none"}


def _tool_choice(tool_choice: Any) -> Any:
    """``tool_choice`` as ``"auto"``, ``"any"``, ``"none"``, ``{"tool": name}`` or None (not set).

    Takes the words every provider takes (``"required"`` is ``"any"``), Anthropic's objects
    (``{"type": "auto"|"any"|"none"}``, ``{"type": "tool", "name": ...}``) and OpenAI's
    (``{"type": "function", "function": {"name": ...}}``). Anything else raises
    :class:`ValueError` naming it: ignoring it would let the model answer without the tool the
    caller asked for."""
    if tool_choice is None or tool_choice == "":
        return None
    if isinstance(tool_choice, str):
        word = _TOOL_CHOICE_WORDS.get(tool_choice.strip().lower())
        if word is not None:
            return word
    elif isinstance(tool_choice, Mapping):
        kind = tool_choice.get("type")
        if isinstance(kind, str) and kind in _TOOL_CHOICE_WORDS:
            return _TOOL_CHOICE_WORDS[kind]
        function = tool_choice.get("function")
        name = function.get("name") if kind == "function" and isinstance(function, Mapping) else tool_choice.get("name")
        if kind in ("tool", "function") and isinstance(name, str) and name:
            return {"tool": name}
    raise ValueError(
        f'Bedrock cannot use tool_choice {tool_choice!r}: use "auto", "any" (or "required"), "none" '
        'or {"type": "tool", "name": "<tool name>"}'
    )


def tool_config(context: Any, tool_choice: Any = None) -> Optional[Dict[str, Any]]:
    """The ``toolConfig`` field, or None without tools or with ``tool_choice="none"``.

    Raises :class:`ValueError` for a ``tool_choice`` Bedrock cannot express (see :func:`_tool_choice`)."""
    choice = _tool_choice(tool_choice)
    specs = tool_specs(context)
    if not specs or choice == "none":
        return None
    config: Dict[str, Any] = {
        "tools": [
            {
                "toolSpec": {
                    "name": name,
                    "description": description,
                    "inputSchema": {"json": schema or {"type": "object", "properties": {}}},
                }
            }
            for name, description, schema in specs
        ]
    }
    if choice in ("auto", "any"):
        config["toolChoice"] = {choice: {}}
    elif isinstance(choice, Mapping):
        config["toolChoice"] = {"tool": {"name": choice["tool"]}}
    return config


def history_tool_config(messages: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """Stub definitions of the tools earlier ``toolUse`` blocks name, or None when there are none.

    Bedrock refuses messages holding ``toolUse``/``toolResult`` blocks without a ``toolConfig``
    ("The toolConfig field must be defined"), which happens when tools are removed mid
    conversation or ``tool_choice="none"`` is asked for. Converse has no "none" tool choice, so
    the stubs say they are gone; a call to one gets the loop's "tool not found" error result.
    """
    names: List[str] = []
    for message in messages:
        for block in message.get("content") or ():
            use = block.get("toolUse") if isinstance(block, Mapping) else None
            if use and use.get("name") not in names:
                names.append(use["name"])
    if not names:
        return None
    stub = {"type": "object", "properties": {}}
    return {
        "tools": [
            {
                "toolSpec": {
                    "name": n,
                    "description": "No longer available in this conversation.",
                    "inputSchema": {"json": stub},
                }
            }
            for n in names
        ]
    }


def _effort(model: Any, level: str) -> str:
    mapped = reasoning.mapped_effort(model, level)  # Model.thinking_level_map (or compat.reasoningEffortMap)
    if mapped:
        return mapped
    if level in ("minimal", "low"):
        return "low"
    if level in ("medium", "high"):
        return level
    return "max" if "opus-4" in model.id else "high"  # xhigh, max


def thinking_fields(
    model: Any, level: Optional[str], options: Mapping[str, Any], max_tokens: int
) -> Tuple[Optional[Dict[str, Any]], int]:
    """``(additionalModelRequestFields or None, maxTokens)`` for thinking at ``level``.

    Budget thinking raises ``maxTokens`` by the budget (capped at the model's maximum, the budget
    shrinking to leave 1024 tokens for the answer), as the reference's simple-stream options do.
    """
    if level is not None:
        level = reasoning.clamp_to_model(model, level)  # an unsupported level moves to the nearest
    if level in (None, "off") or not getattr(model, "reasoning", False) or not is_claude(model):
        return None, max_tokens
    assert level is not None
    if supports_adaptive_thinking(model):
        return {
            "thinking": {"type": "adaptive", "display": "summarized"},
            "output_config": {"effort": _effort(model, level)},
        }, max_tokens
    budgets = options.get("thinking_budgets")
    if options.get("thinking_budget_tokens"):  # an explicit budget for whatever level was asked
        budgets = {reasoning.clamp_level(level): int(options["thinking_budget_tokens"])}
    total, budget = reasoning.adjust_max_tokens_for_thinking(
        max_tokens, int(getattr(model, "max_tokens", 0) or 0), level, budgets
    )
    fields: Dict[str, Any] = {"thinking": {"type": "enabled", "budget_tokens": budget}}
    if options.get("interleaved_thinking", True):
        fields["anthropic_beta"] = ["interleaved-thinking-2025-05-14"]
    return fields, total


def build_request_body(model: Any, context: Any, **options: Any) -> Dict[str, Any]:
    """The JSON body of one ConverseStream request (the model id goes in the URL, not here).

    Options used: ``max_tokens``, ``temperature``, ``reasoning``, ``thinking_budgets``,
    ``thinking_budget_tokens``, ``interleaved_thinking``, ``cache_retention``, ``tool_choice``,
    ``request_metadata``.
    """
    cache_point = _cache_point(options)
    level = reasoning.normalize_level(options.get("reasoning"))
    max_tokens = reasoning.base_max_tokens(model, options.get("max_tokens"))
    additional, max_tokens = thinking_fields(model, level, options, max_tokens)
    body: Dict[str, Any] = {"messages": convert_messages(model, list(context.messages or []), cache_point)}
    system = system_blocks(model, getattr(context, "system_prompt", None), cache_point)
    if system:
        body["system"] = system
    inference: Dict[str, Any] = {"maxTokens": max_tokens}
    if options.get("temperature") is not None and additional is None:
        inference["temperature"] = options["temperature"]
    body["inferenceConfig"] = inference
    tools = tool_config(context, options.get("tool_choice")) or history_tool_config(body["messages"])
    if tools:
        body["toolConfig"] = tools
    if additional:
        body["additionalModelRequestFields"] = additional
    if options.get("request_metadata"):
        body["requestMetadata"] = dict(options["request_metadata"])
    return body

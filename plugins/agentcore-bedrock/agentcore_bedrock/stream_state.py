"""ConverseStream events -> :class:`~agentcore.providers.base.StreamWriter` calls.

Events (``:message-type`` ``event``, named by ``:event-type``, JSON payloads):

* ``messageStart`` (role must be ``assistant``);
* ``contentBlockStart`` with ``start.toolUse`` (id, name) opens a tool call; text and reasoning
  blocks have no start event: their first delta opens them;
* ``contentBlockDelta``: ``text``, ``reasoningContent`` (``text``, ``signature``, or
  ``redactedContent``: base64 bytes kept as the signature of a redacted thinking block, shown as
  "[Reasoning redacted]"), ``toolUse.input`` (streamed JSON text);
* ``contentBlockStop`` ends the block;
* ``messageStop``: the stop reason (:func:`map_stop_reason`);
* ``metadata``: usage (input, output, cache read/write, total) with the cost from the model's prices.

Blocks are routed by Bedrock's ``contentBlockIndex``. Exceptions (``:message-type`` ``exception``,
named by ``:exception-type``) raise :class:`BedrockStreamException` (the payload's JSON
``message``, or the payload itself when it is plain text); a stream that ends without
``messageStop`` raises :class:`~agentcore.providers.base.ProviderError` in :meth:`finish`. So does
a payload of the wrong shape, before it changes the output, naming the event and the field:
``malformed Bedrock contentBlockDelta event: delta.text is the number 5, expected a string``.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, Mapping, Optional

from agentcore.providers.base import MAPPINGS, ProviderError, StreamWriter, parse_json_event
from agentcore.types import TextContent, ThinkingContent, ToolCall, Usage

from .eventstream import EventStreamMessage
from .request import REDACTED_TEXT

__all__ = ["BedrockStreamState", "BedrockStreamException", "map_stop_reason", "RETRYABLE_EXCEPTIONS"]

_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "toolUse",
}
_ERROR_STOPS = {
    "guardrail_intervened": "Bedrock stopped the response: a guardrail intervened (stopReason guardrail_intervened)",
    "content_filtered": "Bedrock stopped the response: the content was filtered (stopReason content_filtered)",
    "malformed_model_output": "Bedrock stopped the response: the model's output was malformed "
    "(stopReason malformed_model_output)",
    "malformed_tool_use": "Bedrock stopped the response: the model's tool call was malformed "
    "(stopReason malformed_tool_use)",
}
# the reference's prefixes, so retry and overflow patterns written for it match ours too
_EXCEPTION_PREFIXES = {
    "internalServerException": "Internal server error",
    "modelStreamErrorException": "Model stream error",
    "validationException": "Validation error",
    "throttlingException": "Throttling error",
    "serviceUnavailableException": "Service unavailable",
    "modelNotReadyException": "Model not ready",
    "modelTimeoutException": "Model timeout",
    "accessDeniedException": "Access denied",
    "resourceNotFoundException": "Resource not found",
}
RETRYABLE_EXCEPTIONS = frozenset(
    {"throttlingException", "serviceUnavailableException", "internalServerException", "modelNotReadyException"}
)
"""In-stream exceptions retried like HTTP 429/5xx when they come before any content."""


class BedrockStreamException(ProviderError):
    """An exception frame inside the stream; ``name`` is its ``:exception-type``."""

    def __init__(self, name: str, message: str) -> None:
        prefix = _EXCEPTION_PREFIXES.get(name) or _EXCEPTION_PREFIXES.get(name[:1].lower() + name[1:], name)
        super().__init__(f"{prefix}: {message}" if message else prefix)
        self.name = name
        self.retryable = (name[:1].lower() + name[1:]) in RETRYABLE_EXCEPTIONS


def map_stop_reason(reason: Optional[str]) -> str:
    """Converse ``stopReason`` -> StopReason; guardrails, content filters and unknown ones -> "error"."""
    return _STOP_REASONS.get(reason or "", "error")


def _payload_text(message: EventStreamMessage, what: str) -> str:
    try:
        return message.payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProviderError(f"Bedrock {what} event payload is not UTF-8: {exc}") from None


def _payload(message: EventStreamMessage, what: str) -> Mapping[str, Any]:
    """The JSON object of an event frame (``{}`` for none); :class:`ProviderError` naming the event
    when it is not UTF-8, not JSON, or JSON of another shape."""
    if not message.payload:
        return {}
    data = parse_json_event(_payload_text(message, what), f"Bedrock {what} event")  # the core's fast path
    if not isinstance(data, MAPPINGS):
        raise ProviderError(f"malformed Bedrock {what} event: the payload is {_kind(data)}, not a JSON object")
    return data


def _exception_text(message: EventStreamMessage, name: str) -> str:
    """An exception frame's message: its JSON ``message``, or the payload itself when that is not
    a JSON object (``Rate exceeded`` as plain text), so the exception keeps its name and retry."""
    text = _payload_text(message, name).strip()
    try:
        data = json.loads(text) if text else {}
    except (ValueError, RecursionError):
        return text
    if not isinstance(data, MAPPINGS):
        return text
    return str(data.get("message") or data.get("Message") or "")


def _kind(value: Any) -> str:
    """How a malformed field reads in an error: ``null``, ``a list``, ``the string 'oops'``..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, list):
        return "a list"
    return "an object" if isinstance(value, MAPPINGS) else f"a {type(value).__name__}"


def _malformed(event: str, field: str, value: Any, expected: str) -> ProviderError:
    return ProviderError(f"malformed Bedrock {event} event: {field} is {_kind(value)}, expected {expected}")


def _object(data: Mapping[str, Any], key: str, event: str, within: str = "") -> Mapping[str, Any]:
    """``data[key]`` as an object; ``{}`` when absent or null. Raises :class:`ProviderError` naming
    ``event`` and the field (``within`` + ``key``) for another type."""
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, MAPPINGS):
        raise _malformed(event, within + key, value, "an object")
    return value


def _text(data: Mapping[str, Any], key: str, event: str, within: str = "") -> Optional[str]:
    """``data[key]`` as a string, None when absent or null. Raises like :func:`_object`."""
    value = data.get(key)
    if value is None or isinstance(value, str):
        return value
    raise _malformed(event, within + key, value, "a string")


def _integer(data: Mapping[str, Any], key: str, event: str, default: int, within: str = "") -> int:
    """``data[key]`` as an integer (a whole number, or digits in a string); ``default`` when absent.
    Raises like :func:`_object` for null and anything else."""
    value = data.get(key, default)
    if type(value) is int:  # what Bedrock sends; bool, a subclass of int, is not a count
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    raise _malformed(event, within + key, value, "an integer")


def _count(usage: Mapping[str, Any], key: str) -> int:
    """A token count of a ``metadata`` event's ``usage``: absent or null is 0, else an integer."""
    return 0 if usage.get(key) is None else _integer(usage, key, "metadata", 0, "usage.")


class BedrockStreamState:
    """The per-response state machine; :meth:`handle` one decoded frame at a time."""

    def __init__(self, model: Any, writer: StreamWriter) -> None:
        self.model = model
        self.writer = writer
        self.output = writer.output
        self._blocks: Dict[int, int] = {}  # contentBlockIndex -> index in output.content
        self.started = False
        self.stopped = False
        self.usage_seen = False  # a metadata event with usage arrived
        self._stop_reason: Optional[str] = None

    @property
    def has_content(self) -> bool:
        """True once a content block was opened (a retry would then duplicate output)."""
        return bool(self.output.content)

    def handle(self, message: EventStreamMessage) -> None:
        kind = message.message_type
        if kind == "exception":
            name = str(message.headers.get(":exception-type") or "exception")
            raise BedrockStreamException(name, _exception_text(message, name))
        if kind == "error":
            code = message.headers.get(":error-code") or "error"
            raise ProviderError(
                f"Bedrock stream error {code}: {message.headers.get(':error-message') or ''}".rstrip(": ")
            )
        name = str(message.headers.get(":event-type") or "")
        handler = _HANDLERS.get(name)
        if handler is None:
            return
        data = _payload(message, name)
        try:
            handler(self, data)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:  # a shape no check above foresaw
            raise ProviderError(f"malformed Bedrock {name} event: {type(exc).__name__}: {exc}") from exc

    def finish(self) -> None:
        """The body ended: raise unless ``messageStop`` arrived; apply an error stop reason."""
        if not self.stopped:
            raise ProviderError(
                "Bedrock stream ended before messageStop" if self.started else "Bedrock stream ended without any event"
            )
        if self.output.stop_reason == "error":
            reason = self._stop_reason
            raise ProviderError(
                _ERROR_STOPS.get(reason or "", f"Bedrock stopped with an unknown stop reason: {reason!r}")
            )

    # -- events ---------------------------------------------------------------------------------
    def _message_start(self, data: Mapping[str, Any]) -> None:
        role = data.get("role")
        if role not in (None, "assistant"):
            raise ProviderError(f"Bedrock stream started a {role!r} message instead of an assistant message")
        self.started = True

    def _block_start(self, data: Mapping[str, Any]) -> None:
        tool_use = _object(data, "start", "contentBlockStart").get("toolUse")
        if not isinstance(tool_use, MAPPINGS):
            return
        api_index = _integer(data, "contentBlockIndex", "contentBlockStart", len(self.output.content))
        call_id = _text(tool_use, "toolUseId", "contentBlockStart", "start.toolUse.") or ""
        name = _text(tool_use, "name", "contentBlockStart", "start.toolUse.") or ""
        index = self.writer.start_tool_call(call_id, name)
        self._blocks[api_index] = index

    def _block_delta(self, data: Mapping[str, Any]) -> None:
        api_index = _integer(data, "contentBlockIndex", "contentBlockDelta", 0)
        delta = _object(data, "delta", "contentBlockDelta")
        index = self._blocks.get(api_index)
        block = self.output.content[index] if index is not None else None
        writer = self.writer
        text = _text(delta, "text", "contentBlockDelta", "delta.")
        if text is not None:
            if block is None:
                index = self._blocks[api_index] = writer.start_text()
                block = self.output.content[index]
            if isinstance(block, TextContent):
                writer.append_text(index, text)
            return
        tool_use = _object(delta, "toolUse", "contentBlockDelta", "delta.")
        if tool_use:
            if isinstance(block, ToolCall):
                writer.append_tool_arguments(
                    index, _text(tool_use, "input", "contentBlockDelta", "delta.toolUse.") or ""
                )
            return
        reasoning = _object(delta, "reasoningContent", "contentBlockDelta", "delta.")
        if reasoning:
            self._reasoning(api_index, index, block, reasoning)

    def _reasoning(self, api_index: int, index: Optional[int], block: Any, reasoning: Mapping[str, Any]) -> None:
        writer = self.writer
        # every field checked before the output changes (no block opened for a malformed delta)
        within = "delta.reasoningContent."
        redacted = _text(reasoning, "redactedContent", "contentBlockDelta", within)  # base64 text
        text = _text(reasoning, "text", "contentBlockDelta", within)
        signature = _text(reasoning, "signature", "contentBlockDelta", within)
        if block is None:
            if redacted is not None:
                index = writer.start_thinking(thinking_signature="", redacted=True, thinking=REDACTED_TEXT)
            else:
                index = writer.start_thinking(thinking_signature="")
            self._blocks[api_index] = index
            block = self.output.content[index]
        if not isinstance(block, ThinkingContent):
            return
        if redacted is not None:
            block.redacted = True
            block.thinking = block.thinking or REDACTED_TEXT
            block.thinking_signature = (block.thinking_signature or "") + redacted
            return
        if text:
            writer.append_thinking(index, text)
        if signature:
            block.thinking_signature = (block.thinking_signature or "") + signature

    def _block_stop(self, data: Mapping[str, Any]) -> None:
        index = self._blocks.pop(_integer(data, "contentBlockIndex", "contentBlockStop", -1), None)
        if index is not None:
            self.writer.end_block(index)

    def _message_stop(self, data: Mapping[str, Any]) -> None:
        self._stop_reason = _text(data, "stopReason", "messageStop")
        self.stopped = True
        self.output.stop_reason = map_stop_reason(self._stop_reason)

    def _metadata(self, data: Mapping[str, Any]) -> None:
        raw = _object(data, "usage", "metadata")
        if not raw:
            return
        usage = Usage(
            input=_count(raw, "inputTokens"),
            output=_count(raw, "outputTokens"),
            cache_read=_count(raw, "cacheReadInputTokens"),
            cache_write=_count(raw, "cacheWriteInputTokens"),
        )
        usage.total_tokens = _count(raw, "totalTokens") or (
            usage.input + usage.output + usage.cache_read + usage.cache_write
        )
        self.writer.update_usage(usage)
        self.usage_seen = True


_HANDLERS: Dict[str, Callable[[BedrockStreamState, Mapping[str, Any]], None]] = {
    "messageStart": BedrockStreamState._message_start,
    "contentBlockStart": BedrockStreamState._block_start,
    "contentBlockDelta": BedrockStreamState._block_delta,
    "contentBlockStop": BedrockStreamState._block_stop,
    "messageStop": BedrockStreamState._message_stop,
    "metadata": BedrockStreamState._metadata,
}

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
named by ``:exception-type``) raise :class:`BedrockStreamException`; a stream that ends without
``messageStop`` raises :class:`~agentcore.providers.base.ProviderError` in :meth:`finish`.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Optional

from agentcore.providers.base import ProviderError, StreamWriter, parse_json_event
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


def _payload(message: EventStreamMessage, what: str) -> Any:
    if not message.payload:
        return {}
    try:
        text = message.payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProviderError(f"Bedrock {what} event payload is not UTF-8: {exc}") from None
    return parse_json_event(text, f"Bedrock {what} event")  # the core's fast path for one small object


class BedrockStreamState:
    """The per-response state machine; :meth:`handle` one decoded frame at a time."""

    def __init__(self, model: Any, writer: StreamWriter) -> None:
        self.model = model
        self.writer = writer
        self.output = writer.output
        self._blocks: Dict[int, int] = {}  # contentBlockIndex -> index in output.content
        self.started = False
        self.stopped = False
        self._stop_reason: Optional[str] = None

    @property
    def has_content(self) -> bool:
        """True once a content block was opened (a retry would then duplicate output)."""
        return bool(self.output.content)

    def handle(self, message: EventStreamMessage) -> None:
        kind = message.message_type
        if kind == "exception":
            name = str(message.headers.get(":exception-type") or "exception")
            data = _payload(message, name)
            text = data.get("message") or data.get("Message") or "" if isinstance(data, Mapping) else str(data)
            raise BedrockStreamException(name, str(text))
        if kind == "error":
            code = message.headers.get(":error-code") or "error"
            raise ProviderError(
                f"Bedrock stream error {code}: {message.headers.get(':error-message') or ''}".rstrip(": ")
            )
        name = str(message.headers.get(":event-type") or "")
        handler = _HANDLERS.get(name)
        if handler is not None:
            handler(self, _payload(message, name))

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
        tool_use = (data.get("start") or {}).get("toolUse")
        if not isinstance(tool_use, Mapping):
            return
        index = self.writer.start_tool_call(str(tool_use.get("toolUseId") or ""), str(tool_use.get("name") or ""))
        self._blocks[int(data.get("contentBlockIndex", index))] = index

    def _block_delta(self, data: Mapping[str, Any]) -> None:
        api_index = int(data.get("contentBlockIndex", 0))
        delta = data.get("delta") or {}
        index = self._blocks.get(api_index)
        block = self.output.content[index] if index is not None else None
        writer = self.writer
        text = delta.get("text")
        if text is not None:
            if block is None:
                index = self._blocks[api_index] = writer.start_text()
                block = self.output.content[index]
            if isinstance(block, TextContent):
                writer.append_text(index, text)
            return
        tool_use = delta.get("toolUse")
        if isinstance(tool_use, Mapping):
            if isinstance(block, ToolCall):
                writer.append_tool_arguments(index, str(tool_use.get("input") or ""))
            return
        reasoning = delta.get("reasoningContent")
        if isinstance(reasoning, Mapping):
            self._reasoning(api_index, index, block, reasoning)

    def _reasoning(self, api_index: int, index: Optional[int], block: Any, reasoning: Mapping[str, Any]) -> None:
        writer = self.writer
        redacted = reasoning.get("redactedContent")
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
            block.thinking_signature = (block.thinking_signature or "") + str(redacted)
            return
        if reasoning.get("text"):
            writer.append_thinking(index, str(reasoning["text"]))
        if reasoning.get("signature"):
            block.thinking_signature = (block.thinking_signature or "") + str(reasoning["signature"])

    def _block_stop(self, data: Mapping[str, Any]) -> None:
        index = self._blocks.pop(int(data.get("contentBlockIndex", -1)), None)
        if index is not None:
            self.writer.end_block(index)

    def _message_stop(self, data: Mapping[str, Any]) -> None:
        self.stopped = True
        self._stop_reason = data.get("stopReason")
        self.output.stop_reason = map_stop_reason(self._stop_reason)

    def _metadata(self, data: Mapping[str, Any]) -> None:
        raw = data.get("usage")
        if not isinstance(raw, Mapping):
            return
        usage = Usage(
            input=int(raw.get("inputTokens") or 0),
            output=int(raw.get("outputTokens") or 0),
            cache_read=int(raw.get("cacheReadInputTokens") or 0),
            cache_write=int(raw.get("cacheWriteInputTokens") or 0),
        )
        usage.total_tokens = int(raw.get("totalTokens") or 0) or (
            usage.input + usage.output + usage.cache_read + usage.cache_write
        )
        self.writer.update_usage(usage)


_HANDLERS: Dict[str, Callable[[BedrockStreamState, Mapping[str, Any]], None]] = {
    "messageStart": BedrockStreamState._message_start,
    "contentBlockStart": BedrockStreamState._block_start,
    "contentBlockDelta": BedrockStreamState._block_delta,
    "contentBlockStop": BedrockStreamState._block_stop,
    "messageStop": BedrockStreamState._message_stop,
    "metadata": BedrockStreamState._metadata,
}

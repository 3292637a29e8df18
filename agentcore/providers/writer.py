"""The stream writer: the one way a wire module builds its output message and stream events.

A wire module (built-in or plugin) turns each API event into :class:`StreamWriter` calls; the
writer mutates the output :class:`~agentcore.types.AssistantMessage` and queues the matching
``*_start`` / ``*_delta`` / ``*_end`` events, so the event contract of providers spec §3 holds by
construction. It never raises for content it is given; a tool call's invalid argument JSON is
parsed leniently and noted as a diagnostic.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

from .._surrogates import join_surrogate_pairs
from ..events import (
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ThinkingDeltaEvent,
    ThinkingEndEvent,
    ThinkingStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from ..types import AssistantMessage, Diagnostic, Model, TextContent, ThinkingContent, ToolCall, Usage
from .failures import add_diagnostic
from .partial_json import ToolArguments

__all__ = ["StreamWriter"]

_JSON_KINDS = {list: "array", str: "string", bool: "boolean", type(None): "null"}


@dataclass
class _OpenBlock:
    kind: str  # "text" | "thinking" | "toolCall"
    args: Optional[ToolArguments] = None


def _refuse_constant(name: str) -> Any:
    """``NaN``/``Infinity``: Python's parser takes them, JSON does not (the lenient parse made them null)."""
    raise ValueError(f"{name} is not JSON (it became null)")


def _finite_float(text: str) -> float:
    """A JSON number as a float; one too large for a float (``1e999``) was made null too."""
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{text} is too large for a number (it became null)")
    return value


def _int(text: str) -> int:
    """A JSON integer; one longer than Python converts was made null too."""
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"an integer of {len(text.lstrip('-'))} digits is too long (it became null)") from None


def _splits_pair(text: str, delta: str) -> bool:
    """Whether ``text`` ends with the high half of a surrogate pair and ``delta`` starts with the low."""
    return bool(text and delta) and "\ud800" <= text[-1] <= "\udbff" and "\udc00" <= delta[0] <= "\udfff"


class StreamWriter:
    """The one way a wire module builds its output: mutates the message, queues the events.

    Every wire module (openai-completions, openai-responses, anthropic-messages, google) turns
    API events into these calls, so the event contract of spec §3 holds by construction:

    * ``start_text`` / ``start_thinking`` / ``start_tool_call`` append a block to
      ``output.content`` and push its ``*_start`` event; the returned content index never changes.
    * ``append_text`` / ``append_thinking`` / ``append_tool_arguments`` extend an open block and
      push its ``*_delta`` event. Tool-call argument text is kept outside the ToolCall (no scratch
      fields leak); ``arguments`` is the best-effort parse so far (re-parsed with the throttle of
      :class:`~agentcore.providers.partial_json.ToolArguments`).
    * ``end_block`` pushes the ``*_end`` event (tool arguments fully parsed unless nothing was
      streamed and the call came with arguments); ending a closed block does nothing.
      ``close_open_blocks`` ends every open block in content order (the skeleton does so after a
      complete response; an error leaves them open, spec §3 rule 6).
    * ``add_diagnostic`` appends a :class:`~agentcore.types.Diagnostic` to ``output.diagnostics``.
      The writer records one itself when a tool call's argument text was not valid JSON and the
      lenient parser had to repair it, or was JSON but not an object (``"tool_arguments_repaired"``):
      the call still runs, with the best-effort arguments (``{}`` for a non-object), and the note
      says so.

    Blocks may be open at the same time (Anthropic and Responses interleave by index); ``current``
    is the most recently opened block still open, for APIs that stream one block at a time.
    Other mutations (signatures, final texts an API sends at the end) go straight to
    ``block(index)`` before ``end_block``.
    """

    def __init__(self, model: Model, output: AssistantMessage, push: Callable[[Any], None]) -> None:
        self.model = model
        self.output = output
        self._push = push
        self._open: Dict[int, _OpenBlock] = {}
        self.current: Optional[int] = None
        self.current_kind: Optional[str] = None  # "text" | "thinking" | "toolCall" of ``current``

    # -- opening ---------------------------------------------------------------------------
    def start_text(self, text_signature: Optional[str] = None) -> int:
        index = self._append(TextContent(text="", text_signature=text_signature), "text")
        self._push(TextStartEvent(index, self.output))
        return index

    def start_thinking(
        self, thinking_signature: Optional[str] = None, redacted: bool = False, thinking: str = ""
    ) -> int:
        block = ThinkingContent(thinking=thinking, thinking_signature=thinking_signature, redacted=redacted)
        index = self._append(block, "thinking")
        self._push(ThinkingStartEvent(index, self.output))
        return index

    def start_tool_call(
        self,
        id: str,
        name: str,
        arguments_text: str = "",
        arguments: Optional[Dict[str, Any]] = None,
        thought_signature: Optional[str] = None,
    ) -> int:
        """Open a tool call; ``arguments_text`` starts its streamed JSON, ``arguments`` its dict."""
        block = ToolCall(id=id, name=name, arguments=dict(arguments or {}), thought_signature=thought_signature)
        index = self._append(block, "toolCall")
        args = self._open[index].args = ToolArguments(arguments_text or "")
        if arguments_text:
            block.arguments = args.value()
        self._push(ToolCallStartEvent(index, self.output))
        return index

    def _append(self, block: Any, kind: str) -> int:
        self.output.content.append(block)
        index = len(self.output.content) - 1
        self._open[index] = _OpenBlock(kind)
        self.current = index
        self.current_kind = kind
        return index

    # -- streaming -------------------------------------------------------------------------
    def append_text(self, index: int, delta: str) -> None:
        """Append a text delta. A delta starting with the low half of a surrogate pair whose high
        half ended the previous one (an emoji a provider sent as two escapes, one per delta) is
        joined into the character in the block's text; the events carry the deltas as sent."""
        block = self.output.content[index]
        # ``block.text += delta`` copies the whole text per delta (quadratic: a 1 MB answer took
        # seconds); CPython grows a str in place when a local holds its only reference
        text = block.text
        block.text = ""
        if _splits_pair(text, delta):  # only the two halves are joined: not the whole text again
            text = text[:-1] + join_surrogate_pairs(text[-1] + delta)
        else:
            text += delta
        block.text = text
        self._push(TextDeltaEvent(index, delta, self.output))

    def append_thinking(self, index: int, delta: str) -> None:
        """Append a thinking delta; a split surrogate pair is joined as in :meth:`append_text`."""
        block = self.output.content[index]
        thinking = block.thinking  # grown in place, as in append_text
        block.thinking = ""
        if _splits_pair(thinking, delta):
            thinking = thinking[:-1] + join_surrogate_pairs(thinking[-1] + delta)
        else:
            thinking += delta
        block.thinking = thinking
        self._push(ThinkingDeltaEvent(index, delta, self.output))

    def append_tool_arguments(self, index: int, fragment: str) -> None:
        """Append raw JSON text; ``arguments`` becomes the best-effort parse so far."""
        args = self._open[index].args
        assert args is not None
        parsed = args.feed(fragment or "")
        if parsed is not None:
            self.output.content[index].arguments = parsed
        self._push(ToolCallDeltaEvent(index, fragment or "", self.output))

    def tool_arguments_text(self, index: int) -> str:
        """The argument JSON streamed so far for the open tool call at ``index``."""
        args = self._open[index].args
        return args.text if args is not None else ""

    def set_tool_arguments_text(self, index: int, text: str) -> None:
        """Replace the streamed argument text (an API's final "arguments done" value) and re-parse."""
        args = self._open[index].args = ToolArguments(text or "")
        self.output.content[index].arguments = args.value()

    # -- closing ---------------------------------------------------------------------------
    def is_open(self, index: Optional[int]) -> bool:
        return index is not None and index in self._open

    def block(self, index: int) -> Any:
        return self.output.content[index]

    def end_block(self, index: int) -> None:
        """Finish block ``index`` and push its ``*_end`` event; a closed block is left alone."""
        open_block = self._open.pop(index, None)
        if open_block is None:
            return
        if self.current == index:
            self.current = None
            self.current_kind = None
        block = self.output.content[index]
        if open_block.kind == "text":
            self._push(TextEndEvent(index, block.text, self.output))
        elif open_block.kind == "thinking":
            self._push(ThinkingEndEvent(index, block.thinking, self.output))
        else:
            args = open_block.args
            if args is not None and (args.text.strip() or not block.arguments):
                block.arguments = args.value()
                if args.text.strip():
                    self._check_arguments(block, args)
            self._push(ToolCallEndEvent(index, block, self.output))

    def _check_arguments(self, block: ToolCall, args: ToolArguments) -> None:
        text = args.text
        try:  # once per call, at its end: the strict parse says whether the lenient one repaired
            if args.too_deep:  # not parsed at all; json alone might go deeper on some Pythons
                raise RecursionError
            value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float, parse_int=_int)
        except ValueError as exc:
            error = {"name": "JSONDecodeError", "message": str(exc)}
        except RecursionError:  # a model repeating "[[[[" until its token limit
            error = {"name": "RecursionError", "message": "the arguments are nested too deeply to parse"}
        else:
            if isinstance(value, dict):
                return
            kind = _JSON_KINDS.get(type(value), "number")
            error = {
                "name": "TypeError",
                "message": f"the arguments are a JSON {kind}, not an object: the call gets {{}}",
            }
        self.add_diagnostic(
            "tool_arguments_repaired",
            error=error,
            details={"toolCallId": block.id, "toolName": block.name, "argumentChars": len(text)},
        )

    def add_diagnostic(
        self, type: str, error: Optional[Dict[str, Any]] = None, details: Optional[Dict[str, Any]] = None
    ) -> Diagnostic:
        """Append a diagnostic to the output message (see :func:`add_diagnostic`) and return it."""
        return add_diagnostic(self.output, type, error, details)

    def end_current(self) -> None:
        if self.current is not None:
            self.end_block(self.current)

    def close_open_blocks(self) -> None:
        """End every still-open block in content order."""
        for index in sorted(self._open):
            self.end_block(index)

    def push(self, event: Any) -> None:
        """Queue any other event (e.g. a GenericStreamEvent)."""
        self._push(event)

    def update_usage(self, usage: Usage) -> None:
        """Set the output's usage and recompute its cost from the model's prices (spec §7)."""
        from .models import calculate_cost

        self.output.usage = usage
        calculate_cost(self.model, usage)

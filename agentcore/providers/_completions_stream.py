"""Stream handling of the ``openai-completions`` wire API (providers spec §12 "Stream consumption").

:class:`CompletionsHandler` turns each chat-completion chunk into :class:`~agentcore.providers.writer.StreamWriter`
calls: text (OpenAI's ``refusal`` text too), reasoning in any of the known fields (or Mistral's
typed thinking chunks), streamed tool calls (each ``index`` is its own call, also when a server
repeats one id across parallel calls: the repeated id gets a suffix; an id first sent in a later
fragment names the call of its ``index``), usage (:func:`parse_usage`) and the finish reason
(:func:`map_finish_reason`). A chunk carrying an ``error`` raises :class:`~agentcore.providers.failures.ProviderError` (retryable when it
is a transient server error); a stream that ends without a finish reason raises too. Public
through :mod:`agentcore.providers.openai_completions`.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Mapping, Optional

from ..types import Model, ToolCall, Usage
from ._completions_compat import _REASONING_FIELDS, resolve_compat
from ._mistral import feed_content_parts, mistral_tool_call_id, stream_tool_call_id
from .base import ProviderError, StreamWriter, WireHandler, parse_json_event
from .retries import retryable_error

__all__ = ["CompletionsHandler", "map_finish_reason", "parse_usage"]


def map_finish_reason(reason: Optional[str]) -> str:
    """Spec §8, with Mistral's values (its endpoint speaks this API here): ``model_length`` (the
    context window is full) is ``length`` and ``error`` is ``error``. Raises
    :class:`ProviderError` for a value no server is known to send."""
    if reason is None or reason in ("stop", "end"):
        return "stop"
    if reason in ("length", "model_length"):
        return "length"
    if reason in ("tool_calls", "function_call"):
        return "toolUse"
    if reason in ("content_filter", "error"):
        return "error"
    raise ProviderError(f"Unhandled stop reason: {reason}")


def _complete_json(text: str) -> bool:
    """Whether ``text`` is a whole JSON document (a tool call's arguments that are finished); text
    nested too deeply for the parser is not (the writer's end gives it ``{}`` and a note)."""
    if not text.strip():
        return False
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def parse_usage(raw: Mapping[str, Any]) -> Usage:
    """Usage of spec §7 from a chat-completions ``usage`` object (see the module docstring)."""
    prompt = _int(raw.get("prompt_tokens"))
    cached = _int((raw.get("prompt_tokens_details") or {}).get("cached_tokens"))
    completion = _int(raw.get("completion_tokens"))
    reasoning_tokens = _int((raw.get("completion_tokens_details") or {}).get("reasoning_tokens"))
    output = completion + reasoning_tokens if reasoning_tokens > completion else completion
    usage = Usage(input=max(0, prompt - cached), output=output, cache_read=cached, cache_write=0)
    usage.total_tokens = usage.input + usage.output + usage.cache_read
    return usage


def _error_text(error: Any) -> str:
    if isinstance(error, Mapping):
        message = str(error.get("message") or json.dumps(error))
        metadata = error.get("metadata")
        if isinstance(metadata, Mapping) and metadata.get("raw"):
            message += f"\n{metadata['raw']}"
        return message
    return str(error)


def _retryable(error: Any) -> bool:
    """An in-stream error object saying rate limit / server error / overload (``code``,
    ``type`` or ``status``; OpenRouter puts the HTTP status in ``code``)."""
    if not isinstance(error, Mapping):
        return False
    return retryable_error(error.get("code"), error.get("type"), error.get("status"))


class CompletionsHandler(WireHandler):
    """Turns chat-completion chunks into stream events (spec §12 "Stream consumption")."""

    def __init__(self, model: Model, writer: StreamWriter, compat: Optional[Mapping[str, Any]] = None) -> None:
        self.model = model
        self.writer = writer
        self.finish_reason: Optional[str] = None
        self.saw_finish = False
        self._tool_index: Dict[int, Optional[int]] = {}  # content index -> API tool_calls index
        self._open_calls: Dict[int, Any] = {}  # content index -> API index of calls not yet ended
        self._api_ids: Dict[int, str] = {}  # content index -> the id the API gave the call ("" if none)
        self._mistral_ids = bool(
            (compat if compat is not None else resolve_compat(model)).get("requiresMistralToolIds")
        )
        self._response_seen = False  # responseId/responseModel come from the first chunk that has them

    def on_event(self, event: Any) -> bool:
        data = event.data
        if data == "[DONE]":
            return True
        chunk = parse_json_event(data)
        if type(chunk) is not dict:
            return False
        if chunk.get("error"):
            raise ProviderError(_error_text(chunk["error"]), retryable=_retryable(chunk["error"]))
        if not self._response_seen:
            self._response_fields(chunk)
        usage = chunk.get("usage")
        if usage and type(usage) is dict:
            self.writer.update_usage(parse_usage(usage))
        choices = chunk.get("choices")
        if not choices or type(choices) is not list or type(choices[0]) is not dict:
            return False
        choice = choices[0]
        usage = choice.get("usage")
        if usage and type(usage) is dict:  # Moonshot-style servers
            self.writer.update_usage(parse_usage(usage))
        finish = choice.get("finish_reason")
        if finish:
            self.saw_finish = True
            self.finish_reason = finish
            self.writer.output.stop_reason = map_finish_reason(finish)
        delta = choice.get("delta")
        if delta and type(delta) is dict:
            self._delta(delta)
        return False

    def _response_fields(self, chunk: Dict[str, Any]) -> None:
        """``response_id`` = the chunk ``id`` (the same on every chunk of a completion);
        ``response_model`` = the chunk ``model`` when it differs from the requested id."""
        output = self.writer.output
        response_id = chunk.get("id")
        if response_id and type(response_id) is str:
            output.response_id = response_id
            self._response_seen = True
        served = chunk.get("model")
        if served and type(served) is str and served != self.model.id and output.response_model is None:
            output.response_model = served

    def _delta(self, delta: Dict[str, Any]) -> None:
        writer = self.writer
        content = delta.get("content")
        if content:
            if type(content) is str:
                self._text(content)
            elif type(content) is list or type(content) is dict:  # Mistral: typed thinking/text chunks
                if self._open_calls:
                    self._end_tool_calls()
                feed_content_parts(writer, content if type(content) is list else [content])
        refusal = delta.get("refusal")
        if refusal and type(refusal) is str:  # OpenAI's refusal comes instead of content: it is the answer
            self._text(refusal)
        if "reasoning_content" in delta or "reasoning" in delta or "reasoning_text" in delta:
            self._reasoning(delta)
        calls = delta.get("tool_calls")
        if calls:
            for call in calls:
                if type(call) is dict:
                    self._tool_call(call)
        details = delta.get("reasoning_details")
        if details:
            self._reasoning_details(details)

    def _text(self, text: str) -> None:
        writer = self.writer
        if writer.current_kind != "text":
            if self._open_calls:
                self._end_tool_calls()
            writer.end_current()
            writer.start_text()
        writer.append_text(writer.current, text)  # type: ignore[arg-type]

    def _reasoning(self, delta: Dict[str, Any]) -> None:
        writer = self.writer
        for field in _REASONING_FIELDS:
            value = delta.get(field)
            if value and type(value) is str:
                if not (writer.current_kind == "thinking" and writer.block(writer.current).thinking_signature == field):  # type: ignore[arg-type]
                    if self._open_calls:
                        self._end_tool_calls()
                    writer.end_current()
                    writer.start_thinking(thinking_signature=field)
                writer.append_thinking(writer.current, value)  # type: ignore[arg-type]
                return

    def _reasoning_details(self, details: Any) -> None:
        for detail in details:
            if type(detail) is dict and detail.get("type") == "reasoning.encrypted" and detail.get("id"):
                for block in self.writer.output.content:
                    if isinstance(block, ToolCall) and block.id == detail["id"]:
                        block.thought_signature = json.dumps(detail)

    def _tool_call(self, call: Mapping[str, Any]) -> None:
        writer = self.writer
        function = call.get("function") or {}
        call_id = call.get("id") or ""
        api_index = call.get("index")
        if call_id == "null" and self._mistral_ids:
            call_id = ""  # Mistral's missing id: a continuation, or a new call named below
        name = function.get("name") or ""
        arguments = function.get("arguments")
        if arguments is not None and not isinstance(arguments, str):
            arguments = json.dumps(arguments)  # some servers send the object itself
        current = writer.current
        same = writer.current_kind == "toolCall" and self._continues(current, call_id, api_index)  # type: ignore[arg-type]
        if not same:
            earlier = self._open_call(call_id, api_index)
            if earlier is None:
                current = self._start_call(call_id, name, api_index)
            else:  # parallel calls streamed interleaved: a fragment of a call opened before
                current = earlier
                same = True
        if same:
            block = writer.block(current)  # type: ignore[arg-type]
            if call_id and call_id != self._api_ids.get(current):  # type: ignore[arg-type]
                self._api_ids[current] = call_id  # type: ignore[index]
                block.id = self._unique_id(call_id, current)  # type: ignore[arg-type]
            if name:
                block.name = name
        writer.append_tool_arguments(current, arguments or "")  # type: ignore[arg-type]

    def _continues(self, index: int, call_id: str, api_index: Any) -> bool:
        """Whether a fragment continues the call at content ``index``: no other ``index`` and no
        other id. An id for a call that has none yet continues the call of its ``index`` (a
        server that names the call in a later fragment); without an index it is a new call."""
        known_index = self._tool_index.get(index)
        if api_index is not None and known_index is not None and api_index != known_index:
            return False
        api_id = self._api_ids.get(index, "")
        if not call_id or call_id == api_id:
            return True
        return not api_id and api_index is not None and known_index == api_index

    def _open_call(self, call_id: str, api_index: Any) -> Optional[int]:
        """The still open call a fragment continues: the one of its ``index`` (unless the fragment
        names another id than the call's own), else the one of its id when the fragment or that
        call has no index; None for a new call."""
        for index, known_index in self._open_calls.items():
            api_id = self._api_ids.get(index, "")
            if api_index is not None and known_index == api_index and self._continues(index, call_id, api_index):
                return index
            # an id names the call only when no index says otherwise: DeepSeek and GLM give
            # parallel calls (indexes 0, 1) the same id
            if call_id and call_id == api_id and (api_index is None or known_index is None):
                return index
        return None

    def _start_call(self, call_id: str, name: str, api_index: Any) -> int:
        """Open a tool call. Open calls whose arguments are complete JSON end first (calls
        streamed one after another, the usual way); an incomplete one stays open, since its
        remaining fragments may still come (parallel calls interleaved by some servers)."""
        writer = self.writer
        if writer.current_kind != "toolCall":
            writer.end_current()
        for index, known_index in list(self._open_calls.items()):
            text = writer.tool_arguments_text(index)
            if (api_index is not None and known_index == api_index) or _complete_json(text):
                del self._open_calls[index]
                writer.end_block(index)
        block_id = call_id
        if not call_id and self._mistral_ids:
            block_id = stream_tool_call_id(call_id, api_index)  # Mistral needs one to match the result
        index = writer.start_tool_call(self._unique_id(block_id, len(writer.output.content)), name)
        self._api_ids[index] = call_id  # "" until the server names the call
        self._tool_index[index] = api_index
        self._open_calls[index] = api_index
        return index

    def _unique_id(self, call_id: str, index: int) -> str:
        """The id the call at content ``index`` gets: the API's own, unless another call of this
        message has it already (DeepSeek and GLM send one id for parallel calls): each result
        must name its own call, and the API refuses a repeated id when the conversation is sent
        back, so such a call gets ``{id}_2`` (``_3``...; for Mistral a fresh 9-character id).
        An empty id stays empty (a server that sends none)."""
        if not call_id:
            return call_id
        content = self.writer.output.content
        taken = {b.id for i, b in enumerate(content) if i != index and isinstance(b, ToolCall)}
        attempt = 0
        candidate = call_id
        while candidate in taken:
            attempt += 1
            if self._mistral_ids:
                candidate = mistral_tool_call_id(f"{call_id}:{index}", attempt)
            else:
                candidate = f"{call_id}_{attempt + 1}"
        return candidate

    def _end_tool_calls(self) -> None:
        """Other content follows the tool calls: end the calls still open, in content order."""
        for index in sorted(self._open_calls):
            self.writer.end_block(index)
        self._open_calls.clear()

    def on_end(self, terminal_seen: bool) -> None:
        if not terminal_seen and not self.saw_finish:
            raise ProviderError(
                "The response stream ended before it was complete (no finish_reason and no "
                "[DONE]); the connection was probably cut. Retry the request."
            )
        output = self.writer.output
        if output.stop_reason == "stop" and any(isinstance(b, ToolCall) for b in output.content):
            output.stop_reason = "toolUse"  # servers that omit finish_reason (or say "stop") for tool calls
        if output.stop_reason == "error" and not output.error_message:
            why = "it reported an error" if self.finish_reason == "error" else "e.g. because of its content filter"
            output.error_message = f"The provider stopped the response (finish_reason {self.finish_reason!r}): {why}."

"""A scripted model for tests: queue responses, get a ``Model`` and a ``stream_fn``, inspect calls.

Example::

    from agentcore import Agent
    from agentcore.testing import ScriptedModel, text, tool_call

    scripted = ScriptedModel([tool_call("add", {"a": 1, "b": 2}), text("It is 3.")])
    agent = Agent(scripted.model, tools=[add_tool], stream_fn=scripted.stream_fn)
    agent.prompt("What is 1 + 2?")
    assert scripted.calls == 2

A response is one of:

* a ``str`` (a text answer), or a :class:`ScriptedResponse` built with :func:`text`,
  :func:`thinking`, :func:`tool_call`, :func:`response` or :func:`error`;
* an :class:`~agentcore.types.AssistantMessage`, streamed as it is;
* an exception instance or class, which the stream function *raises* (to test a broken provider);
* a callable ``response(context) -> any of the above``, evaluated at call time with the
  :class:`~agentcore.types.AgentContext` the model received.

Without ``stream_fn=``, ``Agent(scripted.model)`` works too: this module is a built-in plugin that
registers a provider for ``api="scripted"``, which routes each call to the ``ScriptedModel`` that
owns the model (looked up by ``model.id``; every instance gets a unique id).

The stream function follows the provider contract: it returns a
:class:`~agentcore.streams.ProviderStream` (``result(timeout=None)``, ``close()``), it never raises
for model failures (except for a scripted exception), it ends with an ``error`` event when the
signal is already aborted (without using up a response), when it is aborted while streaming (with
``tokens_per_second``) and when the responses are exhausted (``"No more scripted responses"``).
A scripted failure (stop reason "error"/"aborted") streams its content first, leaving the last
block open, and always carries an ``error_message``.

A :class:`ScriptedModel` serves only the process that made it: unpickled in another process (a
spawned or forked worker) it raises ``LookupError`` instead of answering from a copy.
"""

from __future__ import annotations

import itertools
import operator
import os
import re
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union, overload

from .events import (
    DoneEvent,
    ErrorEvent,
    StartEvent,
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
from .hookspecs import hookimpl
from .streams import ProviderStream
from .types import (
    AgentContext,
    AssistantMessage,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
)

__all__ = [
    "ScriptedModel",
    "ScriptedResponse",
    "text",
    "thinking",
    "tool_call",
    "call",
    "response",
    "error",
    "ScriptedProvider",
    "ABORTED_MESSAGE",
    "EXHAUSTED_MESSAGE",
]

ABORTED_MESSAGE = "Request was aborted"
EXHAUSTED_MESSAGE = "No more scripted responses"
_UNKNOWN_ERROR_MESSAGE = "An unknown error occurred"  # a failed response scripted without a message

_ids = itertools.count(1)
_model_numbers = itertools.count(1)
_instances: weakref.WeakValueDictionary[str, ScriptedModel] = weakref.WeakValueDictionary()


@dataclass
class ScriptedResponse:
    """One scripted model response: content blocks, a stop reason, optional error text and usage."""

    content: List[Any] = field(default_factory=list)
    stop_reason: str = "stop"
    error_message: Optional[str] = None
    usage: Optional[Usage] = None


def call(name: str, arguments: Optional[Dict[str, Any]] = None, id: Optional[str] = None) -> ToolCall:
    """A tool-call block; ``id`` defaults to a unique ``call_<n>``. ``arguments`` is a dict of
    argument names to values (the parsed JSON object a provider delivers), or anything ``dict()``
    takes; a JSON string or another value is a TypeError naming the call."""
    try:
        if isinstance(arguments, (str, bytes)):
            raise TypeError
        values = dict(arguments or {})
    except (TypeError, ValueError):
        raise TypeError(
            f"call({name!r}): arguments must be a dict of argument names to values, "
            f"not {type(arguments).__name__} (pass {{'a': 1}}, not its JSON text)"
        ) from None
    return ToolCall(id=id or f"call_{next(_ids)}", name=name, arguments=values)


def response(*blocks: Any, stop_reason: Optional[str] = None, usage: Optional[Usage] = None) -> ScriptedResponse:
    """A response from blocks (a ``str`` becomes a text block). The stop reason defaults to
    ``"toolUse"`` when a tool call is present, else ``"stop"``."""
    content = [TextContent(b) if isinstance(b, str) else b for b in blocks]
    if stop_reason is None:
        stop_reason = "toolUse" if any(isinstance(b, ToolCall) for b in content) else "stop"
    return ScriptedResponse(content, stop_reason, usage=usage)


def text(value: str, stop_reason: str = "stop", usage: Optional[Usage] = None) -> ScriptedResponse:
    """A plain text answer."""
    return ScriptedResponse([TextContent(value)], stop_reason, usage=usage)


def thinking(thought: str, answer: Optional[str] = None, stop_reason: str = "stop") -> ScriptedResponse:
    """A thinking block, optionally followed by a text answer."""
    blocks: List[Any] = [ThinkingContent(thought)]
    if answer is not None:
        blocks.append(TextContent(answer))
    return ScriptedResponse(blocks, stop_reason)


def tool_call(
    name: str,
    arguments: Optional[Dict[str, Any]] = None,
    id: Optional[str] = None,
    *,
    text: Optional[str] = None,
    stop_reason: str = "toolUse",
) -> ScriptedResponse:
    """A response calling one tool (preceded by ``text`` if given). For several calls use
    ``response(call(...), call(...))``."""
    blocks: List[Any] = [TextContent(text)] if text is not None else []
    blocks.append(call(name, arguments, id))
    return ScriptedResponse(blocks, stop_reason)


def error(message: str, stop_reason: str = "error") -> ScriptedResponse:
    """A failed response: the stream ends with an ``error`` event carrying ``message``."""
    return ScriptedResponse([], stop_reason, error_message=message)


class ScriptedModel:
    """Replays scripted responses through the stream-function contract.

    ``tokens_per_second`` streams text and thinking word by word at that rate (also without a
    ``signal``) and honours the abort signal between words. Attributes for assertions: ``calls``
    (every call, including aborted ones and calls after the responses ran out), ``contexts`` (a
    sequence of copies of the :class:`AgentContext` each call received: index, slice, iterate,
    ``len``, ``==`` with a list, ``append``, ``clear``; each read is a fresh copy, and a long run's
    turns share one stored conversation instead of one list each), ``options`` (the keyword
    options of each call).
    Thread-safe: several agents may share one instance.
    """

    def __init__(
        self, responses: Sequence[Any] = (), tokens_per_second: Optional[float] = None, model: Optional[Model] = None
    ) -> None:
        self.responses: List[Any] = list(responses)
        self.tokens_per_second = tokens_per_second
        number = next(_model_numbers)
        self.model = model or Model(
            id=f"scripted-{number}",
            name=f"Scripted model {number}",
            api="scripted",
            provider="scripted",
            base_url="",
            context_window=128000,
            max_tokens=16384,
        )
        self.model._scripted = self  # type: ignore[attr-defined]  # lets the provider find us
        _instances[self.model.id] = self
        self._pid = os.getpid()  # a forked child holds a copy of _instances: not this instance
        self.calls = 0
        self.contexts = _RecordedContexts()
        self.options: List[Dict[str, Any]] = []
        self._lock = threading.Lock()

    def __reduce__(self) -> Any:
        # Pickled as a reference to this instance (its model id), so that a model holding it
        # passes run_many's pickling check and runs on threads; it cannot serve another process,
        # not even a forked one (its copy of the script would answer, unseen by this instance).
        return (_scripted_by_id, (self.model.id,))

    # handy constructors: ScriptedModel.text("hi") ...
    text = staticmethod(text)
    thinking = staticmethod(thinking)
    tool_call = staticmethod(tool_call)
    call = staticmethod(call)
    response = staticmethod(response)
    error = staticmethod(error)

    def push(self, *responses: Any) -> None:
        """Queue more responses."""
        with self._lock:
            self.responses.extend(responses)

    @property
    def remaining(self) -> int:
        """How many scripted responses are left."""
        return len(self.responses)

    def stream_fn(self, model: Model, context: AgentContext, **options: Any) -> _ScriptedStream:
        """The stream function to pass as ``stream_fn=``; accepts and records any option."""
        signal = options.get("signal")
        with self._lock:
            self.calls += 1
            self.contexts.append(context.copy())
            self.options.append(dict(options))
            if signal is not None and signal.aborted:
                return _ScriptedStream(_failed(model, ABORTED_MESSAGE, "aborted"))
            scripted = self.responses.pop(0) if self.responses else None
        if scripted is None:
            return _ScriptedStream(_failed(model, EXHAUSTED_MESSAGE, "error"))
        if _is_exception_class(scripted):  # raised as ``raise ConnectionError`` does, not called
            raise scripted
        if callable(scripted) and not isinstance(scripted, (ScriptedResponse, AssistantMessage)):
            scripted = scripted(context)
        if isinstance(scripted, BaseException) or _is_exception_class(scripted):
            raise scripted
        message = _to_message(scripted, model)
        delay = 1.0 / self.tokens_per_second if self.tokens_per_second else 0.0
        return _ScriptedStream(_events(message, signal, delay))

    def __repr__(self) -> str:
        return f"ScriptedModel(calls={self.calls}, remaining={len(self.responses)})"


class _RecordedContexts(Sequence[AgentContext]):
    """The :attr:`ScriptedModel.contexts`: a sequence of the contexts the calls
    received, each read as an :class:`AgentContext` with its own message and tool lists (the
    items are shared, as :meth:`AgentContext.copy` does; a read builds a new copy every time).

    A call whose messages continue the previous call's (the same objects, then more: every turn
    of a run) shares the stored list instead of holding its own, and an unchanged tool list is
    stored once: a run of n turns keeps O(n) references, not one list of the whole conversation
    per turn (5,000 turns of one tool call each kept 25 million, 200 MB).
    """

    __slots__ = ("_records",)

    def __init__(self) -> None:
        # per call: system prompt, a shared message list and how much of it the call saw, tools
        self._records: List[Tuple[str, List[Any], int, Optional[List[Any]]]] = []

    def append(self, context: AgentContext) -> None:
        """Record a copy of ``context`` (the lists as they are now; later changes are not seen)."""
        messages = list(context.messages)
        tools = None if context.tools is None else list(context.tools)
        chain = messages
        if self._records:
            _, last_chain, length, last_tools = self._records[-1]
            # the last record always ends its list: it created or extended it
            if len(messages) >= length and all(map(operator.is_, last_chain, messages)):
                last_chain.extend(messages[length:])
                chain = last_chain
            if tools is not None and last_tools is not None and _same_items(tools, last_tools):
                tools = last_tools
        self._records.append((context.system_prompt, chain, len(messages), tools))

    def clear(self) -> None:
        self._records.clear()

    @overload
    def __getitem__(self, index: int) -> AgentContext: ...

    @overload
    def __getitem__(self, index: slice) -> List[AgentContext]: ...

    def __getitem__(self, index: Union[int, slice]) -> Union[AgentContext, List[AgentContext]]:
        if isinstance(index, slice):
            return [_context_of(record) for record in self._records[index]]
        return _context_of(self._records[index])

    def __len__(self) -> int:
        return len(self._records)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, _RecordedContexts)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, like a list

    def __repr__(self) -> str:
        return repr(list(self))


def _same_items(a: List[Any], b: List[Any]) -> bool:
    return len(a) == len(b) and all(map(operator.is_, a, b))


def _context_of(record: Tuple[str, List[Any], int, Optional[List[Any]]]) -> AgentContext:
    system_prompt, chain, length, tools = record
    return AgentContext(system_prompt, chain[:length], None if tools is None else list(tools))


def _is_exception_class(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, BaseException)


def _to_message(scripted: Any, model: Model) -> AssistantMessage:
    if isinstance(scripted, AssistantMessage):
        return scripted
    if isinstance(scripted, str):
        scripted = text(scripted)
    if not isinstance(scripted, ScriptedResponse):
        raise TypeError(
            f"cannot script a response from {type(scripted).__name__}: use a str, "
            f"ScriptedResponse, AssistantMessage, exception or callable"
        )
    return AssistantMessage(
        content=list(scripted.content),
        api=model.api,
        provider=model.provider,
        model=model.id,
        usage=scripted.usage or Usage(),
        stop_reason=scripted.stop_reason,
        error_message=scripted.error_message,
    )


def _failed(model: Model, message: str, reason: str) -> Iterator[Any]:
    yield ErrorEvent(
        reason,
        AssistantMessage(
            content=[],
            api=model.api,
            provider=model.provider,
            model=model.id,
            stop_reason=reason,
            error_message=message,
        ),
    )


_WORDS = re.compile(r"\s*\S+\s*|\s+")


def _chunks(value: str, delay: float) -> List[str]:
    if not delay or not value:
        return [value]
    return _WORDS.findall(value)


def _events(final: AssistantMessage, signal: Any, delay: float) -> Iterator[Any]:
    """Stream events of ``final``: start, per-block start/delta/end, then done or error.

    A failed response (``stop_reason`` "error"/"aborted") fails as a real provider's stream does
    (providers spec §3): without content it is a single ``error`` event (no ``start``, like an HTTP
    failure); with content, its blocks stream first and the last one is left open (no ``*_end``)
    when the ``error`` event ends the stream. Its ``error_message`` is never None.

    The events' partials are shallow copies sharing the streaming block, whose text grows in
    place as with the providers' stream writer: a partial kept from an earlier event shows the
    text streamed since (each delta event's ``delta`` is its own word)."""
    failed = final.stop_reason in ("error", "aborted")
    if failed and not final.error_message:
        final = final.copy()  # the scripted message itself is left as it is
        final.error_message = ABORTED_MESSAGE if final.stop_reason == "aborted" else _UNKNOWN_ERROR_MESSAGE
    if failed and not final.content:
        yield ErrorEvent(final.stop_reason, final)
        return
    partial = AssistantMessage(
        content=[],
        api=final.api,
        provider=final.provider,
        model=final.model,
        usage=final.usage,
        stop_reason="pending",
        timestamp=final.timestamp,
    )
    yield StartEvent(partial.copy())
    for index, block in enumerate(final.content):
        if isinstance(block, ToolCall):
            partial.content.append(block)
            yield ToolCallStartEvent(index, partial.copy())
            yield ToolCallDeltaEvent(index, _json(block.arguments), partial.copy())
            if not (failed and index == len(final.content) - 1):
                yield ToolCallEndEvent(index, block, partial.copy())
            continue
        if not isinstance(block, (TextContent, ThinkingContent)):
            partial.content.append(block)  # an unknown block is passed through silently
            continue
        is_text = isinstance(block, TextContent)
        body = block.text if isinstance(block, TextContent) else block.thinking
        start, delta_cls, end = (
            (TextStartEvent, TextDeltaEvent, TextEndEvent)
            if is_text
            else (ThinkingStartEvent, ThinkingDeltaEvent, ThinkingEndEvent)
        )
        growing = _with_body(block, "")
        partial.content.append(growing)
        yield start(index, partial.copy())
        for chunk in _chunks(body, delay):
            if delay and _pause(signal, delay):
                yield _aborted(partial)
                return
            _grow(growing, chunk)
            yield delta_cls(index, chunk, partial.copy())
        partial.content[index] = block
        if not (failed and index == len(final.content) - 1):
            yield end(index, body, partial.copy())
    if signal is not None and signal.aborted:
        yield _aborted(partial)
        return
    if failed:
        yield ErrorEvent(final.stop_reason, final)
        return
    yield DoneEvent(final.stop_reason, final)


def _pause(signal: Any, delay: float) -> bool:
    """Wait ``delay`` seconds (the token rate); True as soon as ``signal`` is aborted."""
    if signal is None:
        time.sleep(delay)
        return False
    return bool(signal.wait(delay))


def _grow(block: Any, chunk: str) -> None:
    """Append ``chunk`` to the streaming block's text in place, as the providers' stream writer
    does (the events' partials share the block): building a new text per word copied everything
    streamed so far each time, so a long answer took quadratic time (400,000 words: 12 s)."""
    if isinstance(block, TextContent):
        text = block.text
        block.text = ""  # CPython grows a str in place when a local holds its only reference
        text += chunk
        block.text = text
    else:
        thought = block.thinking
        block.thinking = ""
        thought += chunk
        block.thinking = thought


def _with_body(block: Any, body: str) -> Any:
    if isinstance(block, TextContent):
        return TextContent(body)
    return ThinkingContent(body, thinking_signature=block.thinking_signature, redacted=block.redacted)


def _aborted(partial: AssistantMessage) -> ErrorEvent:
    message = partial.copy()
    message.stop_reason = "aborted"
    message.error_message = ABORTED_MESSAGE
    return ErrorEvent("aborted", message)


def _json(value: Any) -> str:
    """The arguments as the JSON text a provider streams; values JSON cannot hold (a date, a set,
    NaN) in their JSON-safe form, so scripting such arguments never breaks the stream (the tool
    still receives the arguments as scripted, from the ``toolcall_end`` block)."""
    import json

    from ._safe import json_safe

    return json.dumps(json_safe(value), allow_nan=False)


def _scripted_by_id(model_id: str) -> ScriptedModel:
    owner = _instances.get(model_id)
    if owner is None or owner._pid != os.getpid():
        raise LookupError(
            f"ScriptedModel {model_id!r} lives in another process: a scripted model "
            "serves only the process that made it (use a thread pool, or a loopback "
            "server for worker processes)"
        )
    return owner


class ScriptedProvider:
    """The ``"scripted"`` wire API: routes a call to the :class:`ScriptedModel` owning ``model``."""

    api = "scripted"

    def stream(self, model: Model, context: AgentContext, **options: Any) -> Any:
        owner = getattr(model, "_scripted", None) or _instances.get(model.id)
        if owner is None:
            return _ScriptedStream(
                _failed(
                    model,
                    f"No ScriptedModel owns model id {model.id!r}: build the model with ScriptedModel(...).model",
                    "error",
                )
            )
        return owner.stream_fn(model, context, **options)

    def __repr__(self) -> str:
        return "ScriptedProvider(api='scripted')"


@hookimpl
def register_providers(register: Callable[[Any], None]) -> None:
    """Built-in plugin hook: make ``api="scripted"`` models usable without ``stream_fn=``."""
    register(ScriptedProvider())


class _ScriptedStream(ProviderStream):
    """The scripted events as a :class:`~agentcore.streams.ProviderStream`, the type real providers
    return (``result(timeout=None)``, ``close()``, reads from several threads), produced lazily by
    the reading thread: with a token rate, waiting happens in ``signal.wait`` so abort is prompt."""

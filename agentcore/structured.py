"""Structured output: :meth:`Agent.ask <agentcore.agent.Agent.ask>` returns a validated value.

An ``output_type`` becomes an :class:`OutputSpec`: the JSON schema the model must follow, a
validator and a converter back to the Python value. Supported: a JSON-schema dict (the parsed JSON
is returned), a dataclass (an instance; nested dataclasses, lists and Optional fields included), a
``TypedDict`` (a dict), an ``Enum`` (a member), a ``Literal``, ``str``/``int``/``float``/``bool``,
``list[X]`` and the other annotations :func:`agentcore.tools.tool` maps (one schema code:
:mod:`agentcore._toolschema`), and a pydantic v2 model (an instance; pydantic is never imported
here: a class with ``model_json_schema``/``model_validate`` is used through those methods).

The schema sent to the model is always an object (the wire APIs and tool parameters require one):
a non-object value is wrapped as ``{"result": value}`` and unwrapped on the way back.

How an ask runs (one ordinary run, so events, transcript and session records are those of
``prompt()``):

* **native** (the wire API constrains the answer itself): the schema travels as the stream option
  ``output_schema``; the model's final text is the JSON answer. Used for ``openai-completions``,
  ``openai-responses`` (tools may be present), ``anthropic-messages`` models that support
  structured outputs (tools may be present) and ``google-generative-ai`` without tools.
  ``model.compat["supportsStructuredOutputs"]`` (True/False) overrides the choice for any api.
* **tool** (every other case): a ``final_result`` tool whose parameters are the schema; its call
  ends the run (``terminate``). A final text answer that happens to be valid JSON is accepted too
  (see :meth:`OutputSpec.check_text`: for a wrapped type, the value itself or the wire object).

The agent's tools stay usable in both modes. An answer that fails validation goes back to the model
with the validation errors (native: as a follow-up user message; tool: as the tool's error result)
up to ``retries`` times; then :class:`OutputValidationError`. An aborted or failed run raises
:class:`AskError` with the run's error message; the transcript stays valid in every case.

A run that pauses because tool calls wait for approval (a tool with ``requires_approval``, see
:mod:`agentcore.approvals`) raises :class:`AskPaused`, an :class:`AskError` carrying the waiting
calls; after ``agent.approve()``/``agent.deny()``, :meth:`AskPaused.resume` runs the paused turn
on with this ask's ``final_result`` tool, turn hook and schema, and returns the answer
(:func:`resume_ask` does the same for an agent opened on the session elsewhere).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple, Type, overload

from ._errors import PicklableError
from ._safe import describe_exception
from ._toolschema import is_pydantic_model, to_python, type_schema
from ._util import awaited
from .tools import AgentTool, AgentToolResult, ToolValidationError, validate_tool_arguments
from .types import TextContent, ToolCall, UserMessage

if TYPE_CHECKING:
    from typing import TypeVar

    from .agent import Agent

    _T = TypeVar("_T")  # the value type of resume_ask(agent, SomeClass)

__all__ = [
    "OutputSpec",
    "OutputValidationError",
    "AskError",
    "AskPaused",
    "resume_ask",
    "output_spec",
    "parse_concise_schema",
    "schema_name",
    "FINAL_RESULT_TOOL",
    "supports_native",
]

#: The name of the tool that carries the answer when the wire API has no native structured output.
FINAL_RESULT_TOOL = "final_result"
_WRAP_KEY = "result"
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]+")
_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n(.*?)\n?```\s*$", re.DOTALL)


class OutputValidationError(PicklableError, ValueError):
    """The model's answer did not validate after the retries.

    ``errors``: the validation errors of the last answer (``"<path>: <message>"`` strings);
    ``raw``: the last raw answer (the text, or the final-result tool's arguments as JSON), None
    when the model never answered.
    """

    def __init__(self, errors: Sequence[str], raw: Optional[str], attempts: int = 0) -> None:
        self.errors: List[str] = list(errors)
        self.raw = raw
        self.attempts = attempts
        shown = "; ".join(self.errors[:5]) + (" ..." if len(self.errors) > 5 else "")
        super().__init__(f"the answer did not match the output type after {attempts} attempt(s): {shown}")


class AskError(PicklableError, RuntimeError):
    """An ``ask`` run ended without an answer: aborted, failed, or stopped by a hook.

    ``stop_reason`` is the last assistant message's stop reason (``"aborted"``, ``"error"``, ...).
    """

    def __init__(self, message: str, stop_reason: Optional[str] = None) -> None:
        super().__init__(message)
        self.stop_reason = stop_reason


class AskPaused(AskError):
    """An ``ask`` run paused: tool calls wait for approval (tools with ``requires_approval``).

    ``pending_approvals`` lists the waiting calls (as ``agent.pending_approvals`` did when the run
    paused); ``stop_reason`` is the paused response's (``"toolUse"``). Decide each call with ``agent.approve(id)`` or
    ``agent.deny(id, reason)``, then call :meth:`resume` to finish the ask. ``agent.continue_()``
    would go on as a plain run, without the ``final_result`` tool the model answers with.
    """

    def __init__(self, ask: _Ask, pending: Sequence[Any], stop_reason: Optional[str] = None) -> None:
        calls = ", ".join(f"{p.tool_name} {p.tool_call_id}" for p in pending)
        super().__init__(
            f"ask(): the run paused for approval of {calls}; decide each with agent.approve(id) or "
            f"agent.deny(id, reason), then call resume() on this exception to get the answer",
            stop_reason,
        )
        self.pending_approvals: List[Any] = list(pending)
        self._ask = ask

    def resume(self) -> Any:
        """Run the paused ask on once every waiting call is decided; return the validated answer.

        Approved calls execute and denied ones get an error result (as with ``continue_()``),
        then the model goes on with this ask's ``final_result`` tool (tool mode) or schema
        (native mode), its turn hook and what is left of its ``retries``. Blocks like ``ask()``.

        Raises what ``ask()`` raises (a new :class:`AskPaused` when the model's next calls wait
        for approval again), and RuntimeError, with nothing run, when a waiting call is still
        undecided, when a run is active, or when no call waits any more (``continue_()`` or
        ``reset()`` settled them). Once the answer is known it is returned again.
        """
        ask = self._ask
        if ask.done:
            return ask.value
        return ask.outcome(ask.resume_run())


@overload
def resume_ask(agent: Agent, output_type: Type[_T], *, retries: int = 2) -> _T: ...


@overload
def resume_ask(agent: Agent, output_type: Any, *, retries: int = 2) -> Any: ...


def resume_ask(agent: Agent, output_type: Any, *, retries: int = 2) -> Any:
    """Finish an ``ask`` that paused for approval when its :class:`AskPaused` is not at hand (the
    agent was opened on the session in another process): :meth:`AskPaused.resume` with the
    ``output_type`` given again and ``retries`` counted afresh. Raises what ``resume()`` raises,
    and TypeError/ValueError (before anything runs) as ``ask()`` does for a bad output type."""
    ask = prepare_ask(agent, output_type, retries)
    return ask.outcome(ask.resume_run())


# --------------------------------------------------------------------------- output types


@dataclass
class OutputSpec:
    """What :func:`output_spec` made of an ``output_type``.

    ``schema`` is the JSON schema of the value; ``wire_schema`` the object schema sent to the model
    (``wrapped``: the value is its ``"result"`` property); ``convert(value)`` makes the Python
    value of validated JSON (it may raise for checks the schema cannot express, e.g. pydantic
    validators).
    """

    name: str
    schema: Dict[str, Any]
    wire_schema: Dict[str, Any]
    wrapped: bool
    convert: Callable[[Any], Any] = field(repr=False)
    _checker: Optional[AgentTool] = field(default=None, repr=False)

    def check(self, wire_value: Any) -> Any:
        """Validate ``wire_value`` (the object the model produced) and return the Python value.

        Raises :class:`OutputValidationError` (``raw`` None) listing every problem."""
        if self._checker is None:
            self._checker = AgentTool(self.name, "", self.wire_schema, _never)
        try:
            validated = validate_tool_arguments(self._checker, wire_value, coerce_null=False)
        except ToolValidationError as exc:
            raise OutputValidationError(_error_lines(str(exc)), None) from None
        value = validated[_WRAP_KEY] if self.wrapped else validated
        try:
            return self.convert(value)
        except Exception as exc:  # noqa: BLE001 - a pydantic validator or a dataclass __post_init__
            # never str(exc) itself: one whose __str__ raises would fail the run, not the answer
            raise OutputValidationError([describe_exception(exc)], None) from None

    def check_text(self, text: str) -> Any:
        """Validate a final text answer and return the Python value.

        The text is JSON (a surrounding Markdown code fence is dropped). For an object type it is
        the object. For a wrapped type it is the value itself (``42``, ``["a"]``, ``"hi"``,
        ``true``), or the wire object (``{"result": 42}``, what native structured output gives),
        which is tried first. For a string type (``str``, a ``Literal`` or ``Enum`` of strings) a
        text that is not such a JSON value is the string itself, stripped (``Paris``), and a JSON
        number is the string as written (``3.10`` is ``"3.10"``, not ``"3.1"``), unless the type
        takes numbers too.

        Raises :class:`OutputValidationError` (``raw`` None) with the errors of the first reading
        tried; a wrapped value's paths start at ``result`` (the ``final_result`` argument).
        """
        try:
            parsed = parse_answer(text)
        except OutputValidationError:
            if self._takes_plain_text:
                return self.check({_WRAP_KEY: text.strip()})
            raise
        if not self.wrapped:
            return self.check(parsed)
        readings = [{_WRAP_KEY: parsed}]
        if isinstance(parsed, dict) and set(parsed) == {_WRAP_KEY}:
            readings.insert(0, parsed)
        if self._takes_plain_text and self._spells_a_number(parsed):
            # the text as written: the JSON number 3.10 would make the string "3.1"
            readings.insert(0, {_WRAP_KEY: _unfenced(text)})
        elif self._takes_plain_text:
            readings.append({_WRAP_KEY: text.strip()})
        failure: Optional[OutputValidationError] = None
        for reading in readings:
            try:
                return self.check(reading)
            except OutputValidationError as exc:
                failure = failure or exc
        assert failure is not None
        raise failure

    @property
    def _takes_plain_text(self) -> bool:
        kind = self.schema.get("type")
        return self.wrapped and (kind == "string" or (isinstance(kind, list) and "string" in kind))

    def _spells_a_number(self, parsed: Any) -> bool:
        """Whether a JSON number answer is the spelling of a string (the type takes no number)."""
        kind = self.schema.get("type")
        kinds = kind if isinstance(kind, list) else [kind]
        is_number = isinstance(parsed, (int, float)) and not isinstance(parsed, bool)
        return is_number and "number" not in kinds and "integer" not in kinds


def _never(*_: Any) -> AgentToolResult:  # the checker tool is never executed
    raise RuntimeError("not executable")


def _error_lines(message: str) -> List[str]:
    lines = [line[4:] for line in message.splitlines() if line.startswith("  - ")]
    return lines or [message.splitlines()[0] if message else "invalid"]


def output_spec(output_type: Any) -> OutputSpec:
    """The :class:`OutputSpec` of ``output_type``. TypeError for a type that has no JSON schema,
    ValueError for a dict that is not a valid JSON schema."""
    if isinstance(output_type, dict):
        _check_schema(output_type)
        schema: Dict[str, Any] = dict(output_type)
        name = str(schema.get("title") or "output")
        convert: Callable[[Any], Any] = _identity
    elif is_pydantic_model(output_type):
        schema = output_type.model_json_schema()
        name = output_type.__name__
        convert = output_type.model_validate
    else:
        try:
            schema = _closed(type_schema(output_type))
        except TypeError as exc:
            raise TypeError(f"ask(): output_type {output_type!r} has no JSON schema: {exc}") from None
        name = getattr(output_type, "__name__", None) or "output"

        def convert(value: Any) -> Any:
            return to_python(output_type, value)

    wrapped = not _is_object_schema(schema)
    if wrapped:
        inner = schema if "$id" in schema else _rebased(schema)  # an "$id" makes "#" mean itself
        wire: Dict[str, Any] = {
            "type": "object",
            "properties": {_WRAP_KEY: inner},
            "required": [_WRAP_KEY],
            "additionalProperties": False,
        }
        # keep "$ref": "#/$defs/..." resolvable, and the draft the schema is written in (a
        # draft-07 tuple "items" is no valid 2020-12 schema, so every answer would fail)
        for key in ("$schema", "$defs", "definitions"):
            if key in inner:
                wire[key] = inner[key]
    else:
        wire = dict(schema)
    wire["title"] = schema_name({"title": name})
    return OutputSpec(wire["title"], schema, wire, wrapped, convert)


def _identity(value: Any) -> Any:
    return value


_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})  # their values are data, not schemas
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})


def _rebased(schema: Any) -> Any:
    """``schema`` with its local references that point outside ``$defs``/``definitions`` (``"#"``
    for a recursive list, ``"#/items"``) moved under ``#/properties/result``, where the wrapped
    schema sits: in the wire schema ``"#"`` is the wrapper object. ``$defs`` references stay, as
    the wire schema carries the ``$defs`` at its root too."""
    if isinstance(schema, list):
        return [_rebased(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: Dict[str, Any] = {}
    for key, value in schema.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):  # names to schemas: a name is no keyword
            out[key] = {name: _rebased(sub) for name, sub in value.items()}
        else:
            out[key] = value if key in _DATA_KEYWORDS else _rebased(value)
    ref = out.get("$ref")
    if isinstance(ref, str) and (ref == "#" or ref.startswith("#/")):
        if not ref.startswith(("#/$defs/", "#/definitions/")):
            out["$ref"] = f"#/properties/{_WRAP_KEY}" + ref[1:]
    return out


def _is_object_schema(schema: Dict[str, Any]) -> bool:
    return schema.get("type") == "object"


def _check_schema(schema: Dict[str, Any]) -> None:
    import jsonschema  # not at import time: ``import agentcore`` stays light

    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"ask(): output_type is not a valid JSON schema: {exc.message}") from None


def _closed(schema: Any) -> Any:
    """``schema`` with ``additionalProperties: false`` on every object that lists properties
    (the dataclasses and TypedDicts that made it take no other keys; native structured output of
    OpenAI and Anthropic requires it)."""
    if isinstance(schema, list):
        return [_closed(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _closed(v) for k, v in schema.items()}
    if out.get("type") == "object" and "properties" in out:
        out.setdefault("additionalProperties", False)
    return out


def schema_name(schema: Dict[str, Any]) -> str:
    """The name wire APIs want for a schema (``[A-Za-z0-9_-]{1,64}``), from its ``title``."""
    name = _NAME_CHARS.sub("_", str(schema.get("title") or "output")).strip("_")
    return (name or "output")[:64]


# --------------------------------------------------------------------------- concise schemas

_CONCISE_TYPES: Dict[str, Dict[str, Any]] = {
    "str": {"type": "string"},
    "string": {"type": "string"},
    "int": {"type": "integer"},
    "integer": {"type": "integer"},
    "float": {"type": "number"},
    "number": {"type": "number"},
    "bool": {"type": "boolean"},
    "boolean": {"type": "boolean"},
    "list": {"type": "array", "items": {"type": "string"}},
}


def parse_concise_schema(text: str) -> Dict[str, Any]:
    """llm's concise schema syntax: ``"name, age int, tags list"`` (commas or newlines between
    fields; ``NAME [TYPE][: description]``; types str (default), int, float, bool, list (of
    strings)). Every field is required. ValueError naming a malformed field."""
    separator = "\n" if "\n" in text else ","
    properties: Dict[str, Any] = {}
    for part in text.split(separator):
        part = part.strip()
        if not part:
            continue
        spec, _, description = part.partition(":")
        words = spec.split()
        if not words or len(words) > 2 or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", words[0]):
            raise ValueError(f"schema field {part!r}: expected NAME [TYPE][: description]")
        kind = words[1].lower() if len(words) == 2 else "str"
        if kind not in _CONCISE_TYPES:
            raise ValueError(f"schema field {part!r}: unknown type {words[1]!r}; use str, int, float, bool or list")
        prop = dict(_CONCISE_TYPES[kind])
        if description.strip():
            prop["description"] = description.strip()
        properties[words[0]] = prop
    if not properties:
        raise ValueError("the schema has no fields")
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


# --------------------------------------------------------------------------- native or tool

_ANTHROPIC_NATIVE = re.compile(r"(opus|sonnet|haiku)-(4[-.][1-9](?!\d)|[5-9](?!\d))")


def supports_native(model: Any, has_tools: bool) -> bool:
    """Whether ``model``'s wire API constrains answers to a schema itself (see the module doc)."""
    compat = getattr(model, "compat", None) or {}
    forced = compat.get("supportsStructuredOutputs") if isinstance(compat, dict) else None
    if forced is not None:
        return bool(forced)
    api = getattr(model, "api", "")
    if api in ("openai-completions", "openai-responses"):
        return True
    if api == "anthropic-messages":
        return bool(_ANTHROPIC_NATIVE.search(str(getattr(model, "id", ""))))
    if api == "google-generative-ai":
        return not has_tools  # Gemini cannot combine function calling with a response schema
    return False


# --------------------------------------------------------------------------- one ask


def _not_json_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _json_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"the number {text} is too large")
    return value


_answer_decoder = json.JSONDecoder(parse_constant=_not_json_constant, parse_float=_json_float)


def parse_answer(text: str) -> Any:
    """The JSON value of a text answer (a surrounding Markdown code fence is dropped).
    Raises OutputValidationError when it is not JSON (``NaN``, ``Infinity`` and numbers too large
    for a float, such as ``1e999``, are not: Python's parser would take them, and a ``float``
    answer would be ``nan``, a ``str`` one ``"nan"``), or nests too deeply for the parser (a
    model stuck repeating ``[``): a failed answer, never a failed run."""
    try:
        return _answer_decoder.decode(_unfenced(text))
    except ValueError as exc:
        raise OutputValidationError([f"the answer is not JSON ({exc})"], None) from None
    except RecursionError:
        raise OutputValidationError(["the answer is not JSON (it nests too deeply)"], None) from None


def _unfenced(text: str) -> str:
    """``text`` stripped, without a surrounding Markdown code fence."""
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    return fenced.group(1).strip() if fenced else stripped


class _Ask:
    """The state of one ``ask``: the final-result tool, the turn hook counting failed answers,
    and the follow-up correction after a failed native answer. It outlives an approval pause:
    :meth:`AskPaused.resume` runs the rest of the ask with the same state."""

    def __init__(self, agent: Any, spec: OutputSpec, retries: int, native: bool) -> None:
        self.agent, self.spec, self.retries, self.native = agent, spec, retries, native
        self.failures = 0
        self.errors: List[str] = []
        self.raw: Optional[str] = None
        self.done = False
        self.value: Any = None
        self.correction: Optional[UserMessage] = None
        self.stopped_by_hook = False  # the agent's own should_stop_after_turn ended the run
        self.tool = AgentTool(
            FINAL_RESULT_TOOL,
            "Give the final answer. Call this exactly once, when you are done, with the answer as "
            "the arguments; do not answer in text.",
            spec.wire_schema,
            self._execute,
            prepare_arguments=self._refuse_nulls,
        )

    @property
    def exhausted(self) -> bool:
        return self.failures > self.retries

    def _refuse_nulls(self, raw: Any) -> Any:
        """``prepare_arguments`` of the tool: the loop validates tool arguments with the reference's
        coercion, which makes ``null`` the empty value of its type (0, "", False); an answer's null
        must fail instead. Raises :class:`ToolValidationError` (the call's error result, which the
        model sees) unless ``raw`` is valid without null coercion; returns ``raw`` unchanged."""
        validate_tool_arguments(self.tool, raw, coerce_null=False)
        return raw

    def _execute(self, tool_call_id: str, args: Any, signal: Any = None, on_update: Any = None) -> AgentToolResult:
        try:
            value = self.spec.check(args)
        except OutputValidationError as exc:  # the call's error result: the problems, for the model
            raise ValueError("; ".join(exc.errors)) from None
        self.value, self.done = value, True
        return AgentToolResult([TextContent("Final answer recorded.")], details={}, terminate=True)

    def wrap_config(self, config: Any) -> Any:
        """The loop configuration of the ask's run: the schema option (native), the turn hook and
        the follow-up poll (chained after the agent's own). The turn hook checks the turn's answer,
        then calls the agent's own ``should_stop_after_turn`` (awaited when ``async``) on every
        turn; either ends the run, and an answer of that turn is kept."""
        user_stop, user_follow_ups = config.should_stop_after_turn, config.get_follow_up_messages

        def should_stop(ctx: Any) -> bool:
            # the turn's answer is checked first: a hook that ends the run on the turn that
            # answered (a budget, a turn limit) must not lose a valid answer
            answered = self._after_turn(ctx)
            stop = bool(awaited(user_stop(ctx))) if user_stop is not None else False  # may be async
            self.stopped_by_hook = stop
            return answered or stop

        def follow_ups() -> List[Any]:
            if self.correction is not None:
                message, self.correction = self.correction, None
                return [message]
            return list(user_follow_ups() or []) if user_follow_ups is not None else []

        changes: Dict[str, Any] = {"should_stop_after_turn": should_stop, "get_follow_up_messages": follow_ups}
        if self.native:
            changes["output_schema"] = self.spec.wire_schema
        return dataclasses.replace(config, **changes)

    def _after_turn(self, ctx: Any) -> bool:
        """True (stop the run) once there is an answer or the retries are used up. A turn whose
        answer failed after the run was aborted (the abort kept ``final_result`` from running) is
        no failed attempt: False, and the loop ends the run as aborted (``AskError``)."""
        if self.done:
            return True
        calls = [b for b in ctx.message.content if isinstance(b, ToolCall)]
        finals = [c for c in calls if c.name == FINAL_RESULT_TOOL and not self.native]
        if finals and self._aborted():
            return False
        if finals:  # each failed: the error results already tell the model what was wrong
            results = {r.tool_call_id: r for r in ctx.tool_results}
            last = finals[-1]
            self.raw = json.dumps(last.arguments, ensure_ascii=False)
            self.errors = self._errors_of(last.arguments, results.get(last.id))
            self.failures += 1
            return self.exhausted
        if calls:
            return False  # the model is still using tools
        text = "".join(b.text for b in ctx.message.content if isinstance(b, TextContent))
        self.raw = text
        try:
            self.value, self.done = self.spec.check_text(text), True
            return True
        except OutputValidationError as exc:
            self.errors = exc.errors
        if self._aborted():
            return False
        self.failures += 1
        if self.exhausted:
            return True
        self.correction = UserMessage(content=[TextContent(self._correction_text())])
        return False

    def _aborted(self) -> bool:
        signal = getattr(self.agent, "signal", None)  # the run's: the turn hook runs inside it
        return bool(signal is not None and signal.aborted)

    def setup(self, tools: List[Any], config: Any) -> Tuple[List[Any], Any]:
        """The tools and loop configuration of the ask's run (the Agent calls this when it
        prepares the run): the ``final_result`` tool in tool mode, the wrapped configuration."""
        if not self.native:
            tools = [t for t in tools if getattr(t, "name", None) != FINAL_RESULT_TOOL] + [self.tool]
        return tools, self.wrap_config(config)

    def outcome(self, messages: List[Any]) -> Any:
        """The validated value of the settled run. Raises OutputValidationError (retries used
        up), AskPaused (calls wait for approval) or AskError (aborted, failed, stopped by the
        agent's ``should_stop_after_turn`` or by a tool batch whose results all asked to terminate;
        the message says which). An answer given in the batch that paused is returned;
        the other calls then stay in ``agent.pending_approvals``."""
        if self.done:
            return self.value
        if self.exhausted:
            raise OutputValidationError(self.errors, self.raw, self.failures)
        last = messages[-1] if messages else None
        reason = getattr(last, "stop_reason", None)
        if reason in ("aborted", "error"):
            what = "was aborted" if reason == "aborted" else "failed"
            raise AskError(
                f"ask(): the run {what} before an answer: {getattr(last, 'error_message', None) or reason}", reason
            )
        pending = self.agent.pending_approvals
        if pending:
            owner = next((m for m in reversed(messages) if getattr(m, "role", None) == "assistant"), None)
            raise AskPaused(self, pending, getattr(owner, "stop_reason", None))
        if self.stopped_by_hook:
            raise AskError("ask(): the run stopped before an answer (a should_stop_after_turn hook ended it)", reason)
        raise AskError(
            "ask(): the run stopped before an answer: every result of the last tool batch asked to end "
            "the run (terminate=True, from a tool or a before_tool_call block)",
            reason,
        )

    def resume_run(self) -> List[Any]:
        """``agent.continue_()`` after an approval pause, with this ask's :meth:`setup`; the new
        messages. RuntimeError before anything runs (see :meth:`AskPaused.resume`)."""
        messages = self.agent._continue(True, self.setup, resume_only="resume()")
        assert messages is not None  # wait=True
        return messages

    def _errors_of(self, arguments: Any, result: Any) -> List[str]:
        try:
            self.spec.check(arguments)
        except OutputValidationError as exc:
            return exc.errors
        texts = [b.text for b in getattr(result, "content", ()) if isinstance(b, TextContent)]
        return ["".join(texts) or "the final_result call failed"]

    def _correction_text(self) -> str:
        errors = "\n".join(f"- {e}" for e in self.errors)
        if self.native:
            how = "Reply again with only the corrected JSON."
        elif self.spec.wrapped:
            how = f'Call the {FINAL_RESULT_TOOL} tool with the corrected answer as its "{_WRAP_KEY}" argument.'
        else:
            how = f"Call the {FINAL_RESULT_TOOL} tool with the corrected answer as its arguments."
        return f"Your answer does not match the required JSON schema:\n{errors}\n{how}"


def prepare_ask(agent: Any, output_type: Any, retries: int) -> _Ask:
    """The bookkeeping of one :meth:`Agent.ask` run (raises TypeError/ValueError for an output
    type without a JSON schema or bad ``retries`` before anything runs)."""
    if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
        raise ValueError(f"ask(retries=...) must be an integer >= 0, not {retries!r}")
    spec = output_spec(output_type)
    native = supports_native(agent.state.model, has_tools=bool(agent.state.tools))
    return _Ask(agent, spec, retries, native)

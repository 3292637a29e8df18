"""Tools: ``AgentTool`` (what the model can call), ``AgentToolResult``, the ``@tool`` decorator and
argument validation.

A tool reports failure by raising; the loop turns the exception into an error tool result.
JSON schemas for ``@tool`` come from :mod:`agentcore._toolschema`; ``jsonschema`` is imported on the
first validation, never at ``import agentcore``.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import re
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple, Union, overload

from ._safe import exception_message
from ._util import awaited
from .signals import AbortSignal
from .types import ImageContent, TextContent, content_from_dict

__all__ = [
    "AgentTool",
    "AgentToolResult",
    "FunctionTool",
    "ToolValidationError",
    "result_blocks",
    "result_tool_names",
    "tool",
    "validate_tool_arguments",
]


@dataclass
class AgentToolResult:
    """What ``execute`` returns. ``terminate=True`` asks the loop not to call the model again
    after this batch (honoured only when every result of the batch says so).

    ``content`` is a list of :class:`~agentcore.types.TextContent` and
    :class:`~agentcore.types.ImageContent` blocks; a ``str`` item (or a bare ``str``) is read as a
    text block, a reference dict block (``{"type": "text", "text": ...}``) as its block, a single
    block as a one-item list. ``added_tool_names`` is None or a list of tool names. Anything else
    (a number, bytes, ``None`` items, an unknown block) makes the call an error result that names
    the problem: the run goes on and the call still gets its result.
    """

    content: List[Any] = field(default_factory=list)
    details: Any = None
    usage: Any = None
    added_tool_names: Optional[List[str]] = None
    terminate: Optional[bool] = None


#: The shape of :attr:`AgentTool.execute`: ``(tool_call_id, args, signal, on_update) -> result``.
#: The loop always passes all four, positionally; ``signal`` and ``on_update`` may be None.
ToolExecute = Callable[[str, Any, Optional[AbortSignal], Optional[Callable[[AgentToolResult], None]]], AgentToolResult]


@dataclass
class AgentTool:
    """A tool the model can call.

    ``execute(tool_call_id, args, signal, on_update) -> AgentToolResult`` runs it; ``parameters`` is
    a JSON schema; ``prepare_arguments(raw_args) -> args`` is an optional shim applied before
    validation; ``execution_mode="sequential"`` forces the whole batch it appears in to run one call
    at a time. ``requires_approval`` (a bool, or a callable ``args -> bool`` given the validated
    arguments) makes a call wait for a human decision instead of executing: the run settles with
    it pending (see :mod:`agentcore.approvals`).
    """

    name: str
    description: str
    parameters: Dict[str, Any]
    execute: ToolExecute
    label: Optional[str] = None
    prepare_arguments: Optional[Callable[[Any], Any]] = None
    execution_mode: Optional[str] = None
    requires_approval: Union[bool, Callable[[Any], bool]] = False

    def __post_init__(self) -> None:
        if self.label is None:
            self.label = self.name
        if self.execution_mode is not None and str(self.execution_mode) not in ("parallel", "sequential"):
            # a typo would silently let a tool that must run alone run in parallel
            raise ValueError(
                f'tool {self.name!r}: execution_mode must be "parallel", "sequential" '
                f"or None, not {self.execution_mode!r}"
            )
        if not (isinstance(self.requires_approval, bool) or callable(self.requires_approval)):
            # a truthy string or a None would silently mean "no approval needed" or "always"
            raise TypeError(
                f"tool {self.name!r}: requires_approval must be a bool or a callable "
                f"args -> bool, not {type(self.requires_approval).__name__}"
            )

    def __getstate__(self) -> Dict[str, Any]:
        """The pickled state: the fields, without the argument validator cached on the tool when
        it first validated (a compiled jsonschema validator holds local functions pickle refuses,
        so a tool an agent had used could no longer travel to a worker); a copy compiles its own."""
        state = dict(self.__dict__)
        state.pop("_agentcore_validator", None)
        return state


# --------------------------------------------------------------------------- @tool


_INJECTED = ("signal", "on_update", "tool_call_id")


@dataclass
class FunctionTool(AgentTool):
    """An :class:`AgentTool` made by :func:`tool`; calling it calls the original function.

    ``@tool`` on a method in a class body makes a descriptor: ``instance.method`` is a tool bound to
    that instance (made once per instance and attribute), whose schema has no ``self``;
    ``Class.method`` is the unbound tool."""

    function: Optional[Callable[..., Any]] = field(default=None, repr=False, compare=False)
    _info: Any = field(default=None, init=False, repr=False, compare=False)
    _attribute: Optional[str] = field(default=None, init=False, repr=False, compare=False)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        assert self.function is not None
        return self.function(*args, **kwargs)

    def __set_name__(self, owner: Any, name: str) -> None:
        self._attribute = name

    def __get__(self, instance: Any, owner: Any = None) -> FunctionTool:
        if instance is None or self._info is None or self.function is None:
            return self  # class access, or not a method: the tool itself
        bound_fn = self.function.__get__(instance, owner)
        bound = dataclasses.replace(self, execute=_make_execute(bound_fn, self._info), function=bound_fn)
        if self._attribute is not None:
            try:  # later look-ups find it in the instance dict: one tool (and validator) per instance
                vars(instance)[self._attribute] = bound
            except TypeError:  # a class with __slots__: a new bound tool per look-up
                pass
        return bound


if TYPE_CHECKING:
    from typing import Generic

    from typing_extensions import ParamSpec, TypeVar

    _P = ParamSpec("_P")
    _R = TypeVar("_R")

    class _CallableTool(FunctionTool, Generic[_P, _R]):
        """What ``@tool`` returns, as type checkers see it: a :class:`FunctionTool` whose call
        keeps the decorated function's signature and return type (no such class at run time)."""

        def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R: ...


@overload
def tool(
    func: Callable[_P, _R],
    *,
    name: Optional[str] = None,
    label: Optional[str] = None,
    description: Optional[str] = None,
    execution_mode: Optional[str] = None,
    prepare_arguments: Optional[Callable[[Any], Any]] = None,
    requires_approval: Union[bool, Callable[[Any], bool]] = False,
) -> _CallableTool[_P, _R]: ...


@overload
def tool(
    func: None = None,
    *,
    name: Optional[str] = None,
    label: Optional[str] = None,
    description: Optional[str] = None,
    execution_mode: Optional[str] = None,
    prepare_arguments: Optional[Callable[[Any], Any]] = None,
    requires_approval: Union[bool, Callable[[Any], bool]] = False,
) -> Callable[[Callable[_P, _R]], _CallableTool[_P, _R]]: ...


def tool(
    func: Optional[Callable[..., Any]] = None,
    *,
    name: Optional[str] = None,
    label: Optional[str] = None,
    description: Optional[str] = None,
    execution_mode: Optional[str] = None,
    prepare_arguments: Optional[Callable[[Any], Any]] = None,
    requires_approval: Union[bool, Callable[[Any], bool]] = False,
) -> Union[FunctionTool, Callable[[Callable[..., Any]], FunctionTool]]:
    """Turn a typed, documented function into an :class:`AgentTool` (bare ``@tool`` or ``@tool(...)``).

    The JSON schema comes from the type hints: ``str``, ``int``, ``float``, ``bool``, ``None`` and
    ``Optional[...]``, ``list[...]``/``List[...]``, ``tuple[...]``, ``set[...]``, ``dict[str, ...]``,
    ``Literal``, ``Enum``, ``TypedDict``, dataclasses and pydantic v2 models (as objects), unions,
    ``Annotated[T, "description"]``, ``datetime``/``date``/``time``, ``UUID``, ``pathlib`` paths and
    ``Decimal`` (as ISO or canonical text, converted back before the call: see
    :mod:`agentcore._toolschema`) and ``Any``; a parameter with a default is optional. The first docstring paragraph is the tool
    description (unless ``description=`` is given); parameter descriptions come from a Google-style
    ``Args:`` section (or ``:param name:`` lines). Parameters named ``signal``, ``on_update`` and
    ``tool_call_id`` are not in the schema: the run's abort signal, the partial-result callback and
    the call id are passed to them.

    The function is called with the validated arguments, converted back to ``Enum`` members and
    dataclass instances where annotated so. Its return value becomes the result: an
    ``AgentToolResult`` as is; a ``str`` one text block; a content block (or a list of them) as
    content, ``str`` items and reference dict blocks (``{"type": "text", "text": ...}``) of such a
    list as their blocks; ``None`` no content; anything else JSON text of it with the value as ``details``
    (dataclasses via ``asdict``, unknown objects via ``str``). To fail, raise. An ``async def``
    function is run to completion with ``asyncio.run`` on the tool's thread.

    ``requires_approval=True`` (or a callable ``args -> bool``) makes its calls wait for
    ``agent.approve()``/``agent.deny()`` instead of executing (see :mod:`agentcore.approvals`).

    Raises ``TypeError`` at decoration time for ``*args``/``**kwargs``, an unsupported annotation
    (also a set of unhashable items, a dataclass whose field types do not resolve) or a generator
    function. On a method in a class body, ``self``/``cls`` is left out of the schema
    and ``instance.method`` is a tool bound to the instance (see :class:`FunctionTool`); elsewhere
    parameters named ``self`` or ``cls`` are ordinary parameters.
    """

    def decorate(fn: Callable[..., Any]) -> FunctionTool:
        from ._toolschema import function_schema, in_class_body

        if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
            raise TypeError(
                f"@tool {getattr(fn, '__qualname__', fn)!r} is a generator function: a tool returns "
                f"its result once; return a list or a string, or stream progress with on_update"
            )
        info = function_schema(fn, skip=_INJECTED)
        tool_name = name or fn.__name__
        made = FunctionTool(
            name=tool_name,
            description=description if description is not None else info.description,
            parameters=info.schema,
            execute=_make_execute(fn, info),
            label=label,
            prepare_arguments=prepare_arguments,
            execution_mode=execution_mode,
            requires_approval=requires_approval,
            function=fn,
        )
        method = in_class_body(fn) and next(iter(inspect.signature(fn).parameters), None) in ("self", "cls")
        if method:  # bound by FunctionTool.__get__ when looked up on an instance
            made._info = info
        return made

    if func is not None:
        return decorate(func)
    return decorate


def _make_execute(fn: Callable[..., Any], info: Any) -> ToolExecute:
    from ._toolschema import to_python

    signature = inspect.signature(fn)
    params = signature.parameters
    positional_only = [n for n, p in params.items() if p.kind is p.POSITIONAL_ONLY]
    injected = [n for n in _INJECTED if n in params]

    @functools.wraps(fn)
    def execute(tool_call_id: str, args: Any, signal: Any = None, on_update: Any = None) -> AgentToolResult:
        values = dict(args or {})
        kwargs: Dict[str, Any] = {}
        for pname, value in values.items():
            hint = info.hints.get(pname)
            if hint is None:
                kwargs[pname] = value
                continue
            try:
                kwargs[pname] = to_python(hint, value)
            except ValueError as exc:  # a date that does not parse, a __post_init__ refusing it...
                raise ValueError(f"argument {pname!r}: {exception_message(exc)}") from exc
        extra = {"signal": signal, "on_update": on_update, "tool_call_id": tool_call_id}
        for pname in injected:
            kwargs[pname] = extra[pname]
        positional = _positional_values(positional_only, kwargs, params)
        return to_tool_result(fn(*positional, **kwargs))

    return execute


def _positional_values(names: List[str], kwargs: Dict[str, Any], params: Mapping[str, Any]) -> List[Any]:
    """The positional-only arguments, taken out of ``kwargs``; one left out before a given one is
    filled with its default, so later values keep their places."""
    given = [i for i, n in enumerate(names) if n in kwargs]
    values: List[Any] = []
    for pname in names[: given[-1] + 1] if given else ():
        if pname in kwargs:
            values.append(kwargs.pop(pname))
        elif params[pname].default is not params[pname].empty:
            values.append(params[pname].default)
        else:
            break  # a required one is missing: the call fails naming it
    return values


def to_tool_result(value: Any) -> AgentToolResult:
    """The :class:`AgentToolResult` for a ``@tool`` function's return value (rules in :func:`tool`)."""
    blocks = (TextContent, ImageContent)
    if isinstance(value, AgentToolResult):
        return value
    if inspect.iscoroutine(value):  # an ``async def`` tool: run it to completion on this thread
        return to_tool_result(awaited(value))
    if value is None:
        return AgentToolResult(content=[])
    if isinstance(value, str):
        return AgentToolResult(content=[TextContent(value)])
    if isinstance(value, blocks):
        return AgentToolResult(content=[value])
    if (
        isinstance(value, (list, tuple))
        and any(isinstance(v, blocks) for v in value)
        and all(isinstance(v, (str,) + blocks) or _is_block_dict(v) for v in value)
    ):  # blocks, maybe with captions (reference dict blocks too): content, read as
        # AgentToolResult.content is; never an image's base64 data dumped as text
        return AgentToolResult(content=result_blocks(value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        try:
            value = dataclasses.asdict(value)
        except Exception:  # noqa: BLE001 - a field deepcopy cannot copy (a socket): keep the object
            pass
    return AgentToolResult(content=[TextContent(_result_text(value))], details=value)


def _is_block_dict(value: Any) -> bool:
    return isinstance(value, Mapping) and value.get("type") in ("text", "image")


def result_blocks(content: Any) -> List[Any]:
    """``AgentToolResult.content`` as the block list of a tool-result message (rules in
    :class:`AgentToolResult`). Raises ``ValueError`` naming what is not a text or image block."""
    if content is None:
        return []
    if isinstance(content, str):
        return [TextContent(content)] if content else []
    if isinstance(content, (TextContent, ImageContent, Mapping)):
        content = [content]
    elif isinstance(content, (bytes, bytearray)) or not isinstance(content, Iterable):
        raise ValueError(f"'content' must be a list of text and image blocks or a string, not {_kind(content)}")
    blocks: List[Any] = []
    for index, item in enumerate(content):
        if isinstance(item, (TextContent, ImageContent)):
            wrong = _wrong_block_field(item)
            if wrong is not None:
                raise ValueError(f"content[{index}] is {type(item).__name__} whose {wrong}")
            blocks.append(item)
        elif isinstance(item, str):
            blocks.append(TextContent(item))
        elif isinstance(item, Mapping) and item.get("type") in ("text", "image"):
            try:
                blocks.append(content_from_dict(item))
            except (TypeError, ValueError) as exc:
                raise ValueError(f"content[{index}]: {exc}") from None
        else:
            raise ValueError(f"content[{index}] is {_kind(item)}, not a text or image block")
    return blocks


def _wrong_block_field(block: Any) -> Optional[str]:
    """What is wrong with a block object's fields (``TextContent(b"...")``: the transcript, the
    session and every view expect a str), or None."""
    if isinstance(block, TextContent):
        fields = {"text": block.text}
    else:
        fields = {"data": block.data, "mime_type": block.mime_type}
    for name, value in fields.items():
        if not isinstance(value, str):
            return f"{name} is {_kind(value)}, not a str"
    return None


def result_tool_names(names: Any) -> Optional[List[str]]:
    """``AgentToolResult.added_tool_names`` as a list (None when empty). Raises ``ValueError``
    unless it is None or a list or tuple of strings."""
    if not names:
        return None
    if not isinstance(names, (list, tuple)) or not all(isinstance(name, str) for name in names):
        raise ValueError(f"'added_tool_names' must be a list of tool names (strings), not {_kind(names)}")
    return list(names)


def _kind(value: Any) -> str:
    """How an error names a value: its type, and the value itself when it is short."""
    if value is None:
        return "None"
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a repr that raises: the type alone
        text = ""
    name = type(value).__name__
    return f"{name} {text}" if text and len(text) <= 40 and not isinstance(value, (list, tuple, dict)) else f"a {name}"


#: A scalar's JSON (``json.dumps`` with ``indent`` always takes the pure-Python encoder, whose
#: closures are a reference cycle per call).
_encode_scalar = json.JSONEncoder(ensure_ascii=False).encode


def _result_text(value: Any) -> str:
    """Indented JSON of a returned value; a value ``json.dumps`` refuses even with the defaults
    below (non-string keys, a cycle, a raising ``__str__``) is shown in its JSON-safe form instead
    of turning a finished call into an error."""
    if value is None or type(value) in (int, float, bool):  # indentation changes only containers
        return _encode_scalar(value)
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, default=_json_default)
    except Exception:  # noqa: BLE001 - TypeError, ValueError, RecursionError, a raising __str__
        from ._safe import json_safe

        return json.dumps(json_safe(value), indent=2, ensure_ascii=False)


def _json_default(value: Any) -> Any:
    """JSON for values nested in a tool's return value: dataclasses as dicts, enums as their
    values, sets as lists, anything else as ``str``."""
    import enum

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (set, frozenset)):
        return list(value)
    return str(value)


# --------------------------------------------------------------------------- validation


class ToolValidationError(ValueError):
    """Arguments did not match a tool's schema. The message lists each problem and the arguments."""


_COERCE_INT = re.compile(r"^\s*[+-]?\d+(\.0*)?\s*$")
# ``\d+(?:\.\d*)?``, not ``\d+\.?\d*``: two digit runs that may split a number anywhere made a
# failing match try every split (a model's 20,000 digits then "x" held the GIL for 25 s)
_COERCE_NUM = re.compile(r"^\s*[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\s*$")
_cache_lock = threading.Lock()
_fallback_cache: Dict[int, Any] = {}


def validate_tool_arguments(tool: AgentTool, args: Any, *, coerce_null: bool = True) -> Any:
    """Validate ``args`` against ``tool.parameters`` and return a validated, coerced deep copy.

    Types are coerced first, as the reference (AJV ``coerceTypes``) does: a numeric string becomes a
    number or integer, ``"true"``/``"false"`` a boolean, a number or boolean a string, ``null`` the
    empty value of the expected type, and a scalar a one-item list where an array is expected; an
    object or array that several branches of a union may describe is coerced toward the first
    branch it then satisfies. The validator (JSON Schema draft 2020-12 unless the schema names
    another ``$schema``) is compiled once per tool and reused. ``coerce_null=False`` leaves every ``null`` as it is, so it fails
    where the schema does not allow null (structured output: a null answer is not a zero or an
    empty string the model meant).

    A schema whose ``$ref`` does not resolve (a ``#/$defs/...`` that is missing, another
    document: nothing is fetched) raises :class:`ToolValidationError` naming the tool and the
    reference, and so does a check that reaches Python's recursion limit (a ``$ref`` cycle no
    value ends, ``{"$ref": "#"}``; arguments nested thousands deep). Otherwise it raises :class:`ToolValidationError` (a ``ValueError``) whose first line is
    ``Validation failed for tool "<name>":``, followed by one ``  - <path>: <message>`` line per
    error, a blank line, ``Received arguments:`` and the received arguments as JSON. A failed
    ``anyOf``/``oneOf`` (an ``Optional[...]`` or union) is preceded by its branches' errors, with
    their full paths (``item/qty: must be integer``); an ``additionalProperties: false`` error names
    the unexpected keys.
    """
    schema = tool.parameters or {}
    validator, simple_check = _validator_for(tool, schema)
    cloned = _json_copy(args)
    if simple_check is not None and simple_check(cloned):
        return cloned  # every value has its schema's type already: coercion would change nothing
    cloned = _coerce(schema, cloned, schema, 0, coerce_null)
    from referencing.exceptions import Unresolvable  # jsonschema's own dependency

    try:
        if (simple_check is not None and simple_check(cloned)) or validator.is_valid(cloned):
            return cloned
        errors = _error_lines(validator.iter_errors(cloned))
    except Unresolvable as exc:  # a "$ref" to nowhere: resolved only when a value reaches it
        detail = exception_message(exc)  # PointerToNowhere quotes the whole schema: cut
        detail = detail if len(detail) <= 300 else detail[:300] + "..."
        raise ToolValidationError(
            f'Tool "{tool.name}" has a parameters schema with a "$ref" that cannot be resolved ({detail}). '
            "Fix the tool's JSON schema."
        ) from None
    except RecursionError:  # {"$ref": "#"}: a cycle no value ends, or arguments nested thousands deep
        raise ToolValidationError(
            f'Tool "{tool.name}": its arguments could not be checked against its parameters schema before '
            'Python\'s recursion limit (a "$ref" cycle in the schema that no value ends, or arguments nested '
            "too deeply). Fix the tool's JSON schema, or send flatter arguments."
        ) from None
    lines = [f'Validation failed for tool "{tool.name}":']
    lines += errors
    lines += ["", "Received arguments:", json.dumps(args, indent=2, default=str, ensure_ascii=False)]
    raise ToolValidationError("\n".join(lines))


def _validator_for(tool: Any, schema: Dict[str, Any]) -> Tuple[Any, Optional[Callable[[Any], bool]]]:
    """The tool's compiled ``jsonschema`` validator and, for a simple schema, the fast check that
    answers "valid" without it (:mod:`agentcore._schema_check`); both built once per schema."""
    cached = getattr(tool, "_agentcore_validator", None)
    if cached is not None and cached[0] is schema:
        return cached[1], cached[2]
    with _cache_lock:
        entry = _fallback_cache.get(id(schema))
    if entry is not None and entry[0] is schema:
        return entry[1], entry[2]
    from ._schema_check import compile_simple_check

    validator = _compile(tool, schema)
    simple_check = compile_simple_check(schema)
    try:
        object.__setattr__(tool, "_agentcore_validator", (schema, validator, simple_check))
    except (AttributeError, TypeError):  # a tool object without __dict__: keep a bounded cache
        with _cache_lock:
            if len(_fallback_cache) > 512:
                _fallback_cache.clear()
            _fallback_cache[id(schema)] = (schema, validator, simple_check)
    return validator, simple_check


def _compile(tool: Any, schema: Dict[str, Any]) -> Any:
    from jsonschema import Draft202012Validator, validators
    from jsonschema.exceptions import SchemaError

    cls = validators.validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        raise ToolValidationError(
            f'Tool "{getattr(tool, "name", "?")}" has an invalid parameters schema: {exc.message} '
            f"(at {'/'.join(str(p) for p in exc.path) or 'root'}). Fix the tool's JSON schema."
        ) from None
    return cls(schema)


def _json_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_copy(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    import copy

    return copy.deepcopy(value)


# -- coercion (AJV coerceTypes, plus scalar -> [scalar])


def _json_type_matches(value: Any, json_type: str) -> bool:
    if json_type == "string":
        return isinstance(value, str)
    if json_type == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if json_type == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if json_type == "boolean":
        return isinstance(value, bool)
    if json_type == "null":
        return value is None
    if json_type == "array":
        return isinstance(value, list)
    if json_type == "object":
        return isinstance(value, dict)
    return True


_NO = object()


def _coerce_scalar(value: Any, json_type: str) -> Any:
    """``value`` coerced to ``json_type``, or ``_NO`` when AJV would not coerce it."""
    is_num = isinstance(value, (int, float)) and not isinstance(value, bool)
    if json_type == "string":
        if value is None:
            return ""
        if isinstance(value, bool):
            return "true" if value else "false"
        if is_num:
            return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
    elif json_type in ("number", "integer"):
        if value is None:
            return 0
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, str):
            if json_type == "integer" and _COERCE_INT.match(value):
                return _exact_int(value)
            if json_type == "number" and _COERCE_NUM.match(value):
                return _exact_int(value) if _COERCE_INT.match(value) else float(value)
    elif json_type == "boolean":
        if value is None:
            return False
        if value in ("true", "false"):
            return value == "true"
        if is_num and value in (0, 1):
            return bool(value)
    elif json_type == "null":
        if value == "" or (is_num and value == 0) or value is False:
            return None
    elif json_type == "array":
        if value is None or isinstance(value, (str, int, float, bool)):
            return [value]
    return _NO


def _exact_int(value: str) -> Any:
    """The integer of a string matching ``_COERCE_INT``, exactly (``int(float(...))`` would turn
    "12345678901234567891", say an id, into 12345678901234567168); ``_NO`` for one with more digits
    than Python converts (``sys.get_int_max_str_digits()``): it is not coerced, so it fails
    validation like any other non-number instead of raising out of the validator."""
    try:
        return int(value.strip().split(".", 1)[0])
    except ValueError:
        return _NO


def _resolve(schema: Any, root: Dict[str, Any]) -> Any:
    ref = schema.get("$ref") if isinstance(schema, dict) else None
    if not isinstance(ref, str) or not ref.startswith("#"):
        return schema
    node: Any = root
    for part in ref[1:].lstrip("/").split("/") if ref != "#" else ():
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return schema
        node = node[part]
    return node


def _coerce(schema: Any, value: Any, root: Dict[str, Any], depth: int = 0, nulls: bool = True) -> Any:
    """Coerce ``value`` (a fresh copy, mutated in place) toward ``schema``; never raises.
    ``nulls=False``: a ``null`` is never coerced (it has no parts to coerce either)."""
    if not isinstance(schema, dict) or depth > 32 or (value is None and not nulls):
        return value
    schema = _resolve(schema, root)
    types = schema.get("type")
    if types is not None:
        types = [types] if isinstance(types, str) else list(types)
        if not any(_json_type_matches(value, t) for t in types):
            for t in types:
                coerced = _coerce_scalar(value, t)
                if coerced is not _NO:
                    value = coerced
                    break
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches:
            value = _coerce_union(branches, value, root, depth, nulls)
    for sub in schema.get("allOf") or ():
        value = _coerce(sub, value, root, depth + 1, nulls)
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for k in list(value):
            sub = props.get(k, extra if isinstance(extra, dict) else None)
            if sub is not None:
                value[k] = _coerce(sub, value[k], root, depth + 1, nulls)
    elif isinstance(value, list):
        prefix = schema.get("prefixItems") or []
        items = schema.get("items")
        if isinstance(items, list):  # draft 2019-09 and older: a list "items" is the tuple form
            prefix, items = items, schema.get("additionalItems")
        for i, item in enumerate(value):
            sub = prefix[i] if i < len(prefix) else items
            if isinstance(sub, dict):
                value[i] = _coerce(sub, item, root, depth + 1, nulls)
    return value


def _coerce_union(branches: List[Any], value: Any, root: Dict[str, Any], depth: int, nulls: bool = True) -> Any:
    resolved = [_resolve(b, root) for b in branches]

    def matches(branch: Any, level: int = 0) -> bool:
        if not isinstance(branch, dict) or level > 32:
            return False
        t = branch.get("type")
        if t is not None:
            return any(_json_type_matches(value, x) for x in ([t] if isinstance(t, str) else t))
        nested = [_resolve(b, root) for key in ("anyOf", "oneOf") for b in branch.get(key) or ()]
        if nested:  # a union inside the union: the value's type must be one of its branches'
            return any(matches(b, level + 1) for b in nested)
        return "const" not in branch and "enum" not in branch

    candidates = [branch for branch in resolved if matches(branch)]
    if len(candidates) > 1 and isinstance(value, (dict, list)):
        return _coerce_container_union(candidates, value, root, depth, nulls)
    if candidates:  # a branch of the value's own type: only coerce inside it
        return _coerce(candidates[0], value, root, depth + 1, nulls)
    for branch in resolved:  # otherwise the first branch whose type the value coerces to
        t = branch.get("type") if isinstance(branch, dict) else None
        for json_type in [t] if isinstance(t, str) else (t or []):
            if _coerce_scalar(value, json_type) is not _NO:
                return _coerce(branch, value, root, depth + 1, nulls)
    return value


def _coerce_container_union(
    branches: List[Any], value: Any, root: Dict[str, Any], depth: int, nulls: bool = True
) -> Any:
    """An object or array ``value`` that several branches of a union may describe
    (``Union[TextItem, CountItem]``): coerced toward the first branch it then satisfies, as
    reference AJV, which coerces inside each branch it tries in order, ends up. Coercing toward
    the first object branch alone turned ``{"kind": "count", "value": 5}`` into ``"value": "5"``,
    valid for no branch. One valid for no branch is coerced toward the first (whose errors are
    then reported, as before)."""
    from jsonschema import Draft202012Validator, validators

    validator = validators.validator_for(root, default=Draft202012Validator)(root)
    for branch in branches:
        coerced = _coerce(branch, _json_copy(value), root, depth + 1, nulls)
        if validator.evolve(schema=branch).is_valid(coerced):
            return coerced
    return _coerce(branches[0], value, root, depth + 1, nulls)


# -- error text in the reference (AJV) wording


def _error_lines(errors: Iterable[Any]) -> List[str]:
    """One ``  - <path>: <message>`` line per error, as AJV (``allErrors``) lists them: a failed
    ``anyOf``/``oneOf`` first lists the errors of its branches (``item/qty: must be integer``,
    ``item: must be null``), so the model learns what is wrong inside ``Optional[Item]``, then
    itself. A line that repeats an earlier one (two branches missing the same key) is left out."""
    lines: List[str] = []
    for error in errors:
        if error.validator in ("anyOf", "oneOf") and error.context:
            lines += _error_lines(error.context)
        lines.append(f"  - {_error_path(error)}: {_ajv_message(error)}")
    return list(dict.fromkeys(lines))


def _error_path(error: Any) -> str:
    if error.absolute_path:  # a branch error of anyOf/oneOf: its path from the root, not the union
        return "/".join(str(p) for p in error.absolute_path)
    if error.validator == "required":
        return _missing_property(error) or "root"
    return "root"


def _missing_property(error: Any) -> Optional[str]:
    for prop in error.validator_value or ():
        if isinstance(error.instance, dict) and prop not in error.instance and repr(prop) in error.message:
            return str(prop)
    return None


_AJV_BOUNDS = {
    "minimum": "must be >= {}",
    "maximum": "must be <= {}",
    "exclusiveMinimum": "must be > {}",
    "exclusiveMaximum": "must be < {}",
    "minLength": "must NOT have fewer than {} characters",
    "maxLength": "must NOT have more than {} characters",
    "minItems": "must NOT have fewer than {} items",
    "maxItems": "must NOT have more than {} items",
    "minProperties": "must NOT have fewer than {} properties",
    "maxProperties": "must NOT have more than {} properties",
    "multipleOf": "must be multiple of {}",
}


def _ajv_message(error: Any) -> str:
    kind, expected = error.validator, error.validator_value
    if kind == "type":
        return "must be " + (expected if isinstance(expected, str) else ",".join(expected))
    if kind == "required":
        return f"must have required property '{_missing_property(error) or '?'}'"
    if kind == "additionalProperties" and expected is False:
        extra = ", ".join(repr(name) for name in _additional_properties(error))
        return "must NOT have additional properties" + (f" ({extra})" if extra else "")
    if kind == "enum":
        return "must be equal to one of the allowed values"
    if kind == "const":
        return "must be equal to constant"
    if kind == "pattern":
        return f'must match pattern "{expected}"'
    if kind == "format":
        return f'must match format "{expected}"'
    if kind == "anyOf":
        return "must match a schema in anyOf"
    if kind == "oneOf":
        return "must match exactly one schema in oneOf"
    if kind in _AJV_BOUNDS:
        return _AJV_BOUNDS[kind].format(expected)
    if kind == "uniqueItems" and isinstance(error.instance, list):
        later, earlier = _duplicate_items(error.instance)
        return f"must NOT have duplicate items (items ## {later} and {earlier} are identical)"
    return error.message


def _additional_properties(error: Any) -> List[str]:
    """The keys of an ``additionalProperties: false`` failure that the schema does not name (AJV
    reports each as ``params.additionalProperty``): the model learns which argument to drop."""
    schema, instance = error.schema, error.instance
    if not isinstance(schema, dict) or not isinstance(instance, dict):
        return []
    named = schema.get("properties") or {}
    patterns = list(schema.get("patternProperties") or {})
    return [
        str(key)
        for key in instance
        if key not in named and not any(re.search(pattern, str(key)) for pattern in patterns)
    ]


def _duplicate_items(items: List[Any]) -> Tuple[int, int]:
    """The indices AJV names for a ``uniqueItems`` failure: scanning from the end, the first item
    equal to a later one, and the nearest such later one (``[1, 1]``: ``(1, 0)``)."""
    seen: Dict[str, int] = {}
    for index in range(len(items) - 1, -1, -1):
        key = json.dumps(_json_equal_form(items[index]), sort_keys=True, default=str)
        if key in seen:
            return seen[key], index
        seen[key] = index
    return 1, 0  # jsonschema found a duplicate this canonical form missed


def _json_equal_form(value: Any) -> Any:
    """``value`` with JSON equality made Python equality of its dump: 1.0 is 1, True is not 1."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_json_equal_form(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_equal_form(v) for k, v in value.items()}
    return value

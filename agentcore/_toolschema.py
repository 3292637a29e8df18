"""JSON schemas from Python signatures and docstrings, for :func:`agentcore.tools.tool`.

:func:`function_schema` reads a function's type hints and docstring; :func:`type_schema` maps one
annotation; :func:`to_python` turns validated JSON back into the annotated Python types (``Enum``
members, dataclass instances, tuples, sets, dates and times, UUIDs, paths, decimals). Unsupported
annotations raise ``TypeError`` naming the parameter, at decoration time.

Values JSON has no type for are strings in ISO or canonical form: ``datetime.datetime``
(``"format": "date-time"``, ``2026-01-02T15:04:05+00:00``; a ``Z`` suffix is read as UTC on every
Python), ``datetime.date`` (``"date"``), ``datetime.time`` (``"time"``), ``uuid.UUID``
(``"uuid"``) and any ``pathlib`` path; a ``decimal.Decimal`` is a number or a numeric string,
converted from its text so that ``"0.10"`` keeps its digits. A value that does not parse raises
``ValueError`` naming the form expected (the call's error result). Their modules are looked up in
``sys.modules``, never imported here: an annotation with one of them means the caller imported it.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import inspect
import json
import re
import sys
import typing
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

__all__ = [
    "FunctionSchema",
    "function_schema",
    "in_class_body",
    "type_schema",
    "to_python",
    "parse_docstring",
    "is_pydantic_model",
]

_NONE = type(None)
_UNION_TYPES: Tuple[Any, ...] = (typing.Union,)
if sys.version_info >= (3, 10):  # pragma: no branch
    import types as _types

    _UNION_TYPES += (_types.UnionType,)  # novermin (guarded: 3.10+ only)
_LIST_ORIGINS = (
    list,
    collections.abc.Sequence,
    collections.abc.MutableSequence,
    collections.abc.Iterable,
    collections.abc.Collection,
)
_SET_ORIGINS = (set, frozenset, collections.abc.Set, collections.abc.MutableSet)
_DICT_ORIGINS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)


@dataclass
class FunctionSchema:
    """What :func:`function_schema` found: tool description, parameters schema, hints by name."""

    description: str
    schema: Dict[str, Any]
    hints: Dict[str, Any]


def function_schema(fn: Callable[..., Any], skip: Sequence[str] = ()) -> FunctionSchema:
    """The JSON schema (an object) of ``fn``'s parameters, minus those named in ``skip``."""
    qualname = getattr(fn, "__qualname__", repr(fn))
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise TypeError(
            f"@tool {qualname}: cannot resolve its type hints ({exc}); use types that "
            f"exist at runtime on this Python version"
        ) from None
    description, param_docs = parse_docstring(inspect.getdoc(fn) or "")
    properties: Dict[str, Any] = {}
    required: List[str] = []
    used: Dict[str, Any] = {}
    for index, (pname, param) in enumerate(inspect.signature(fn).parameters.items()):
        if pname in skip or (index == 0 and pname in ("self", "cls") and in_class_body(fn)):
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            stars = "*" if param.kind == param.VAR_POSITIONAL else "**"
            raise TypeError(
                f"@tool {qualname}: {stars}{pname} is not supported; give every tool argument a name and a type"
            )
        hint = hints.get(pname, Any)
        try:
            prop = type_schema(hint)
        except TypeError as exc:
            raise TypeError(f"@tool {qualname}, parameter {pname!r}: {exc}") from None
        if pname in param_docs:
            prop = {**prop, "description": param_docs[pname]}
        if param.default is param.empty:
            required.append(pname)
        else:
            default = _json_default(param.default)
            if default is not None:
                prop = {**prop, "default": default}
        properties[pname] = prop
        used[pname] = hint
    schema: Dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return FunctionSchema(description, schema, used)


def in_class_body(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` was defined in a class body (a method whose first parameter is the instance
    or class): its ``__qualname__`` names an enclosing scope, and that scope is not a function's
    ``<locals>``."""
    parts = getattr(fn, "__qualname__", "").split(".")
    return len(parts) >= 2 and parts[-2] != "<locals>"


def _json_default(value: Any) -> Any:
    """``value`` as a schema ``default``, or None when it has no JSON form: not only an object
    ``json.dumps`` refuses but also NaN and infinity (``limit: float = math.inf``), which it would
    write as ``NaN``/``Infinity``, no JSON, so every request carrying the schema would be refused."""
    if isinstance(value, enum.Enum):
        value = value.value
    elif not isinstance(value, (str, int, float, type(None))) and _text_scalar(type(value)) is not None:
        value = _scalar_text(value)
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return None
    return value


def _scalar_text(value: Any) -> str:
    """A date, time, UUID, path or decimal as the text its schema asks for."""
    isoformat = getattr(value, "isoformat", None)
    return isoformat() if callable(isoformat) else str(value)


def _json_type(value: Any) -> Optional[str]:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    return None


def _enum_schema(values: List[Any]) -> Dict[str, Any]:
    kinds = {_json_type(v) for v in values}
    schema: Dict[str, Any] = {}
    if len(kinds) == 1 and None not in kinds:
        schema["type"] = kinds.pop()
    schema["enum"] = values
    return schema


def _nullable(schema: Dict[str, Any]) -> Dict[str, Any]:
    if set(schema) == {"type"} and isinstance(schema["type"], str):
        return {"type": [schema["type"], "null"]}
    if set(schema) == {"anyOf"}:  # Union[A, B, None]: one flat anyOf, null a branch of its own
        return {"anyOf": [*schema["anyOf"], {"type": "null"}]}
    return {"anyOf": [schema, {"type": "null"}]}


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


def is_pydantic_model(tp: Any) -> bool:
    """Whether ``tp`` is a pydantic v2 model class (duck-typed: pydantic is never imported here)."""
    return (
        isinstance(tp, type)
        and callable(getattr(tp, "model_json_schema", None))
        and callable(getattr(tp, "model_validate", None))
    )


def _pydantic_schema(tp: Any) -> Dict[str, Any]:
    """A pydantic model's own JSON schema with its ``$defs`` references inlined, so it can sit
    inside another schema (a ``$ref`` resolves against the root document). TypeError for a
    recursive model, as for a recursive dataclass."""
    schema = tp.model_json_schema()
    defs = schema.get("$defs") or {}

    def inline(node: Any, seen: Tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [inline(item, seen) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref[len("#/$defs/") :]
            if name in seen or name not in defs:
                raise TypeError(f"{tp.__qualname__}: recursive or unresolvable model reference {ref!r}")
            rest = {key: inline(value, seen) for key, value in node.items() if key != "$ref"}
            return {**inline(defs[name], seen + (name,)), **rest}
        return {key: inline(value, seen) for key, value in node.items() if key != "$defs"}

    return inline(schema, ())


def type_schema(tp: Any, _seen: Tuple[Any, ...] = ()) -> Dict[str, Any]:
    """The JSON schema of one annotation (see :func:`agentcore.tools.tool` for the supported set)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any or tp is inspect.Parameter.empty or tp is object:
        return {}
    if is_pydantic_model(tp):
        return _pydantic_schema(tp)
    if origin is typing.Annotated:
        schema = dict(type_schema(args[0], _seen))
        for meta in args[1:]:
            if isinstance(meta, str):
                schema["description"] = meta
            elif isinstance(meta, dict):
                schema.update(meta)
        return schema
    if tp is None or tp is _NONE:
        return {"type": "null"}
    if origin in _UNION_TYPES:
        members = [a for a in args if a is not _NONE]
        schema = (
            type_schema(members[0], _seen) if len(members) == 1 else {"anyOf": [type_schema(a, _seen) for a in members]}
        )
        return _nullable(schema) if len(members) < len(args) else schema
    if origin is typing.Literal:  # an Enum member stands for its value (to_python turns it back)
        return _enum_schema([a.value if isinstance(a, enum.Enum) else a for a in args])
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum_schema([m.value for m in tp])
    if tp is bool:
        return {"type": "boolean"}
    if isinstance(tp, type) and issubclass(tp, int) and not _is_typeddict(tp):
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if isinstance(tp, type) and issubclass(tp, str):
        return {"type": "string"}
    if tp in (list, tuple, set, frozenset) or origin in _LIST_ORIGINS + _SET_ORIGINS + (tuple,):
        return _array_schema(tp, origin or tp, args, _seen)
    if tp is dict or origin in _DICT_ORIGINS:
        schema = {"type": "object"}
        if args:
            if args[0] is not str:
                raise TypeError(f"{tp!r}: JSON object keys are strings; use dict[str, ...]")
            if args[1] is not Any:
                schema["additionalProperties"] = type_schema(args[1], _seen)
        return schema
    if _is_typeddict(tp) or (dataclasses.is_dataclass(tp) and isinstance(tp, type)):
        if tp in _seen:
            raise TypeError(f"recursive type {tp.__qualname__} is not supported; annotate with dict")
        return _class_schema(tp, _seen + (tp,))
    scalar = _text_scalar(tp)
    if scalar is not None:
        return dict(scalar[0])
    raise TypeError(
        f"unsupported annotation {tp!r}; use str, int, float, bool, None, Optional, "
        f"list, tuple, dict[str, ...], Literal, Enum, TypedDict, a dataclass, a date, time or "
        f"datetime, UUID, a pathlib path, Decimal or Any"
    )


_Scalar = Tuple[Dict[str, Any], Callable[[Any, Any], Any]]


def _text_scalar(tp: Any) -> Optional[_Scalar]:
    """The schema and the converter of a value JSON carries as text (see the module docstring),
    or None when ``tp`` is none of them. The modules come from ``sys.modules``: never imported."""
    if not isinstance(tp, type):
        return None
    modules = sys.modules
    dates = modules.get("datetime")
    if dates is not None:
        if issubclass(tp, dates.datetime):  # before date: a datetime is a date
            return {"type": "string", "format": "date-time"}, _parse_datetime
        if issubclass(tp, dates.date):
            return {"type": "string", "format": "date"}, _parse_iso("a date (2026-01-02)")
        if issubclass(tp, dates.time):
            return {"type": "string", "format": "time"}, _parse_iso("a time of day (15:04:05)")
    uuids = modules.get("uuid")
    if uuids is not None and issubclass(tp, uuids.UUID):
        return {"type": "string", "format": "uuid"}, _parse_uuid
    paths = modules.get("pathlib")
    if paths is not None and issubclass(tp, paths.PurePath):
        return {"type": "string"}, _make_path
    decimals = modules.get("decimal")
    if decimals is not None and issubclass(tp, decimals.Decimal):
        return {"type": ["number", "string"]}, _parse_decimal
    return None


def _parse_iso(form: str) -> Callable[[Any, Any], Any]:
    def parse(tp: Any, value: Any) -> Any:
        try:
            return tp.fromisoformat(value)
        except (TypeError, ValueError):
            raise ValueError(f"expected {form} in ISO 8601 form, got {_shown(value)}") from None

    return parse


def _parse_datetime(tp: Any, value: Any) -> Any:
    text = value[:-1] + "+00:00" if isinstance(value, str) and value[-1:] in ("Z", "z") else value
    try:
        return tp.fromisoformat(text)  # before 3.11 fromisoformat refuses the "Z" JSON writers use
    except (TypeError, ValueError):
        raise ValueError(
            f"expected a date and time in ISO 8601 form (2026-01-02T15:04:05+00:00), got {_shown(value)}"
        ) from None


def _parse_uuid(tp: Any, value: Any) -> Any:
    try:
        return tp(value)
    except (TypeError, ValueError, AttributeError):
        raise ValueError(f"expected a UUID (12345678-1234-5678-1234-567812345678), got {_shown(value)}") from None


def _make_path(tp: Any, value: Any) -> Any:
    if not isinstance(value, str):
        raise ValueError(f"expected a path as a string, got {_shown(value)}")
    return tp(value)


def _parse_decimal(tp: Any, value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"expected a decimal number, got {_shown(value)}")
    try:
        number = tp(value if isinstance(value, str) else repr(value))  # repr: 0.1 stays 0.1
    except ArithmeticError:  # decimal.InvalidOperation
        raise ValueError(f"expected a decimal number, got {_shown(value)}") from None
    if not number.is_finite():
        raise ValueError(f"expected a finite decimal number, got {_shown(value)}")
    return number


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _array_schema(tp: Any, origin: Any, args: Tuple[Any, ...], seen: Tuple[Any, ...]) -> Dict[str, Any]:
    schema: Dict[str, Any] = {"type": "array"}
    if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        if args == ((),):  # Tuple[()]
            return {"type": "array", "maxItems": 0}
        schema["prefixItems"] = [type_schema(a, seen) for a in args]
        schema["minItems"] = schema["maxItems"] = len(args)
        return schema
    if args and args[0] is not Any:
        schema["items"] = type_schema(args[0], seen)
    if origin in _SET_ORIGINS:
        if args and not _hashable(args[0]):  # to_python could never build the set: fail now, not per call
            raise TypeError(
                f"{tp!r}: the items of a set must be hashable and {args[0]!r} is not; "
                f"use list[...] (or a frozen dataclass)"
            )
        schema["uniqueItems"] = True
    return schema


def _hashable(tp: Any) -> bool:
    """Whether the values :func:`to_python` makes of annotation ``tp`` can go in a set (lists,
    dicts, TypedDicts, sets and classes without ``__hash__``, e.g. a dataclass that is not frozen,
    cannot)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return _hashable(args[0])
    if origin in _UNION_TYPES:
        return all(_hashable(a) for a in args)
    if origin is typing.Literal:
        return True
    if origin is tuple:
        return all(_hashable(a) for a in args if a is not Ellipsis and a != ())
    kind = origin or tp
    if kind in _LIST_ORIGINS or kind in (set, dict) or origin in _DICT_ORIGINS or _is_typeddict(tp):
        return False
    return not isinstance(kind, type) or getattr(kind, "__hash__", None) is not None


def _class_schema(tp: Any, seen: Tuple[Any, ...]) -> Dict[str, Any]:
    """The object schema of a dataclass or TypedDict. TypeError naming the class when its field
    annotations do not resolve (a string hint naming a class local to a function, or one
    imported only under ``TYPE_CHECKING``): the caller adds the parameter or output type."""
    try:
        hints = typing.get_type_hints(tp, include_extras=True)
    except Exception as exc:  # noqa: BLE001 - NameError, AttributeError, a SyntaxError in a string hint
        raise TypeError(
            f"cannot resolve the field types of {tp.__qualname__} ({type(exc).__name__}: {exc}); "
            f"the classes its annotations name must be importable from its module {tp.__module__!r}"
        ) from None
    _, docs = parse_docstring(inspect.getdoc(tp) or "")
    properties: Dict[str, Any] = {}
    required: List[str] = []
    if _is_typeddict(tp):
        for key, hint in hints.items():
            inner, marked = _split_required(hint)
            properties[key] = type_schema(inner, seen)
            if marked if marked is not None else key in tp.__required_keys__:
                required.append(key)
    else:
        for f in dataclasses.fields(tp):
            if not f.init:
                continue
            prop = type_schema(hints.get(f.name, Any), seen)
            if f.metadata.get("description"):
                docs[f.name] = f.metadata["description"]
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                required.append(f.name)
            elif f.default is not dataclasses.MISSING and _json_default(f.default) is not None:
                prop = {**prop, "default": _json_default(f.default)}
            properties[f.name] = prop
    for key, text in docs.items():
        if key in properties:
            properties[key] = {**properties[key], "description": text}
    schema: Dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    if not _is_typeddict(tp):  # the constructor takes no other keys (as structured output's _closed)
        schema["additionalProperties"] = False
    return schema


def _split_required(hint: Any) -> Tuple[Any, Optional[bool]]:
    """``(type, True/False/None)`` for a TypedDict key's hint: the type without its ``Required`` or
    ``NotRequired`` wrapper (looked for through ``Annotated``, in either nesting order, whose
    metadata is kept), and whether the wrapper says required (None: no wrapper, ``__total__``
    decides). ``__required_keys__`` alone is wrong when the annotations are strings (``from
    __future__ import annotations``): the wrappers are only seen once the hints are resolved."""
    origin = typing.get_origin(hint)
    if origin is typing.Annotated:
        args = typing.get_args(hint)
        inner, marked = _split_required(args[0])
        return (typing.Annotated[(inner, *args[1:])], marked) if marked is not None else (hint, None)
    names = {getattr(origin, "_name", None), getattr(origin, "__name__", None)}
    if origin is not None and names & {"Required", "NotRequired"}:
        inner, _ = _split_required(typing.get_args(hint)[0])
        return inner, "Required" in names
    return hint, None


def _strip_required(hint: Any) -> Any:
    return _split_required(hint)[0]


# --------------------------------------------------------------------------- JSON -> Python


def to_python(tp: Any, value: Any) -> Any:
    """Convert validated JSON ``value`` to annotation ``tp`` (Enum, dataclass, pydantic model,
    tuple, set, int). A union's value becomes its first member whose schema it matches (a JSON
    string, number or boolean that a plain ``str``/``float``/``bool`` member matches stays as it
    is, an integral float an ``int`` member matches becomes an int, as for a plain ``int``); one
    no member matches is left as it is. May raise what a class's constructor raises
    (a pydantic validator, a dataclass ``__post_init__``)."""
    if value is None:
        return None
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return to_python(args[0], value)
    if origin in _UNION_TYPES:
        members = [a for a in args if a is not _NONE]
        return to_python(members[0], value) if len(members) == 1 else _union_to_python(members, value)
    if origin is typing.Literal:
        return _literal_to_python(args, value)
    if is_pydantic_model(tp):
        return tp.model_validate(value)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(value)
    if tp is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, (str, int, float)) and isinstance(tp, type) and tp not in (str, int, float, bool):
        scalar = _text_scalar(tp)
        if scalar is not None:
            return scalar[1](tp, value)
    if isinstance(value, list):
        return _list_to_python(tp, origin, args, value)
    if isinstance(value, dict):
        if dataclasses.is_dataclass(tp) and isinstance(tp, type):
            hints = typing.get_type_hints(tp, include_extras=True)
            return tp(**{k: to_python(hints.get(k, Any), v) for k, v in value.items()})
        if _is_typeddict(tp):
            hints = typing.get_type_hints(tp, include_extras=True)
            return {k: to_python(_strip_required(hints.get(k, Any)), v) for k, v in value.items()}
        if origin in _DICT_ORIGINS and len(args) == 2:
            return {k: to_python(args[1], v) for k, v in value.items()}
    return value


def _literal_to_python(args: Tuple[Any, ...], value: Any) -> Any:
    """The ``Literal`` argument ``value`` stands for: an Enum member for its value, else as is."""
    for arg in args:
        plain = arg.value if isinstance(arg, enum.Enum) else arg
        if plain == value and isinstance(plain, bool) is isinstance(value, bool):
            return arg
    return value


def _union_to_python(members: List[Any], value: Any) -> Any:
    import jsonschema  # on first use: ``import agentcore`` stays light

    for member in members:
        try:
            schema = type_schema(member)
        except TypeError:
            continue
        if not jsonschema.Draft202012Validator(schema).is_valid(value):
            continue
        if member in (str, float, bool):
            return value  # JSON's own scalar: 3 stays 3 for Union[float, int]
        return to_python(member, value)  # int: 3.0 (JSON says it is an integer) becomes 3
    return value


def _list_to_python(tp: Any, origin: Any, args: Tuple[Any, ...], value: List[Any]) -> Any:
    kind = origin or tp
    if kind is tuple:
        if args and not (len(args) == 2 and args[1] is Ellipsis) and args != ((),):
            return tuple(to_python(a, v) for a, v in zip(args, value))
        return tuple(to_python(args[0], v) for v in value) if args and args != ((),) else tuple(value)
    items = [to_python(args[0], v) for v in value] if args else list(value)
    if kind in _SET_ORIGINS:
        return frozenset(items) if kind is frozenset else set(items)
    return items


# --------------------------------------------------------------------------- docstrings

_SECTION = re.compile(
    r"^(\s*)(Args|Arguments|Parameters|Params|Attributes|Keyword Args|Keyword Arguments"
    r"|Returns|Return|Yields|Raises|Examples?|Notes?|See Also|Warnings?)\s*:\s*$"
)
_PARAM_SECTIONS = {"Args", "Arguments", "Parameters", "Params", "Attributes", "Keyword Args", "Keyword Arguments"}
_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")
_SPHINX = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def parse_docstring(doc: str) -> Tuple[str, Dict[str, str]]:
    """``(first paragraph, {parameter: description})`` from a Google- or Sphinx-style docstring."""
    lines = inspect.cleandoc(doc).splitlines() if doc else []
    summary: List[str] = []
    for line in lines:
        if not line.strip() or _SECTION.match(line) or line.lstrip().startswith(":"):
            break
        summary.append(line.strip())
    params: Dict[str, str] = {}
    section: Optional[str] = None
    section_indent = entry_indent = 0
    current: Optional[str] = None
    for line in lines:
        stripped = line.strip()
        header = _SECTION.match(line)
        if header:
            section, section_indent, current = header.group(2), _indent(line), None
            entry_indent = -1
            continue
        sphinx = _SPHINX.match(stripped)
        if sphinx:
            section, current = "sphinx", sphinx.group(1)
            entry_indent = _indent(line)
            params[current] = sphinx.group(2).strip()
            continue
        if not stripped:
            continue
        if section == "sphinx":
            if current and _indent(line) > entry_indent:
                params[current] = (params[current] + " " + stripped).strip()
            else:
                section, current = None, None
            continue
        if section not in _PARAM_SECTIONS:
            continue
        if _indent(line) <= section_indent:
            section, current = None, None
            continue
        entry = _ENTRY.match(stripped)
        if entry and (entry_indent < 0 or _indent(line) <= entry_indent):
            entry_indent, current = _indent(line), entry.group(1)
            params[current] = entry.group(3).strip()
        elif current:
            params[current] = (params[current] + " " + stripped).strip()
    return " ".join(summary), params

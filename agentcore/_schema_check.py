"""A compiled validity check for the simple JSON schemas most tools have.

Most tool schemas are an object of typed properties, a ``required`` list, maybe
``additionalProperties: false``, arrays of such, ``enum`` of strings. For those,
:func:`compile_simple_check` builds a plain-Python predicate that answers "valid" in a few
microseconds, where ``jsonschema``'s general machinery takes tens (about 60 us for two integer
arguments; every tool call pays it).

The predicate is conservative: True means ``jsonschema`` (draft 2020-12, no format assertion)
would accept the value too; False means "not sure", and the caller asks ``jsonschema``, which
also produces the error messages. A schema using any keyword outside the simple set, or naming
its own ``$schema``, gets no predicate (None) and always goes to ``jsonschema``.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

__all__ = ["compile_simple_check"]

Check = Callable[[Any], bool]

#: keywords that only annotate (jsonschema asserts none of them; ``format`` only with a checker)
_ANNOTATIONS = frozenset(
    {"description", "title", "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly", "format"}
)
_BOUNDS: Dict[str, Tuple[Tuple[type, ...], Callable[[Any, Any], bool]]] = {
    # keyword -> (the instance types it applies to, the violation)
    "minimum": ((int, float), lambda v, b: v < b),
    "maximum": ((int, float), lambda v, b: v > b),
    "exclusiveMinimum": ((int, float), lambda v, b: v <= b),
    "exclusiveMaximum": ((int, float), lambda v, b: v >= b),
    "minLength": ((str,), lambda v, b: len(v) < b),
    "maxLength": ((str,), lambda v, b: len(v) > b),
    "minItems": ((list,), lambda v, b: len(v) < b),
    "maxItems": ((list,), lambda v, b: len(v) > b),
}
_ASSERTING = frozenset({"type", "properties", "required", "additionalProperties", "items", "enum", *_BOUNDS})

_TYPE_CHECKS: Dict[str, Check] = {
    "string": lambda v: type(v) is str,
    "integer": lambda v: (type(v) is int) or (type(v) is float and v.is_integer()),
    "number": lambda v: type(v) is int or type(v) is float,
    "boolean": lambda v: type(v) is bool,
    "null": lambda v: v is None,
    "array": lambda v: type(v) is list,
    "object": lambda v: type(v) is dict,
}
_ENUM_SCALARS = (str, int, float, bool, type(None))
_MAX_DEPTH = 16


def compile_simple_check(schema: Any) -> Optional[Check]:
    """A predicate for ``schema`` when every part of it is simple (see the module docstring), else
    None. The root may not name ``$schema`` (another draft could change the rules)."""
    if not isinstance(schema, dict) or "$schema" in schema:
        return None
    return _compile(schema, 0)


def _compile(schema: Any, depth: int) -> Optional[Check]:
    if type(schema) is not dict or depth > _MAX_DEPTH:
        return None
    if any(key not in _ASSERTING and key not in _ANNOTATIONS for key in schema):
        return None
    checks: List[Check] = []
    for build in (_type_check, _enum_check, _bounds_check, _object_check, _items_check):
        built = build(schema, depth)
        if built is _UNSUPPORTED:
            return None
        if built is not None:
            checks.append(built)
    if not checks:
        return _always
    if len(checks) == 1:
        return checks[0]
    return lambda value: all(check(value) for check in checks)


_UNSUPPORTED: Any = object()


def _always(value: Any) -> bool:
    return True


def _type_check(schema: Mapping[str, Any], depth: int) -> Any:
    if "type" not in schema:
        return None
    names = schema["type"]
    names = [names] if isinstance(names, str) else names
    if type(names) is not list or not names or any(name not in _TYPE_CHECKS for name in names):
        return _UNSUPPORTED
    tests = tuple(_TYPE_CHECKS[name] for name in names)
    if len(tests) == 1:
        return tests[0]
    return lambda value: any(test(value) for test in tests)


def _enum_check(schema: Mapping[str, Any], depth: int) -> Any:
    if "enum" not in schema:
        return None
    members = schema["enum"]
    if type(members) is not list or any(type(member) not in _ENUM_SCALARS for member in members):
        return _UNSUPPORTED
    allowed = frozenset((type(member), member) for member in members)
    # the same type and value: jsonschema agrees (1 and 1.0, True and 1 go to jsonschema)
    return lambda value: type(value) in _ENUM_SCALARS and (type(value), value) in allowed


def _bounds_check(schema: Mapping[str, Any], depth: int) -> Any:
    """``minimum`` ... ``maxItems``: each applies only to instances of its types (bool is no number)."""
    bounds: List[Tuple[Tuple[type, ...], Callable[[Any, Any], bool], Any]] = []
    for keyword, (kinds, violates) in _BOUNDS.items():
        if keyword in schema:
            bound = schema[keyword]
            if type(bound) not in (int, float) or (kinds[0] is not int and type(bound) is not int):
                return _UNSUPPORTED  # lengths and counts are integers; a float one goes to jsonschema
            bounds.append((kinds, violates, bound))
    if not bounds:
        return None

    def check(value: Any) -> bool:
        kind = type(value)
        for kinds, violates, bound in bounds:
            if kind in kinds and violates(value, bound):
                return False
        return True

    return check


def _object_check(schema: Mapping[str, Any], depth: int) -> Any:
    keys = ("properties", "required", "additionalProperties")
    if not any(key in schema for key in keys):
        return None
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if type(properties) is not dict or type(required) is not list or any(type(r) is not str for r in required):
        return _UNSUPPORTED
    compiled: Dict[str, Check] = {}
    for name, sub in properties.items():
        sub_check = _compile(sub, depth + 1)
        if type(name) is not str or sub_check is None:
            return _UNSUPPORTED
        compiled[name] = sub_check
    extra_check: Optional[Check]
    if extra is True:
        extra_check = _always
    elif extra is False:
        extra_check = None
    else:
        extra_check = _compile(extra, depth + 1)
        if extra_check is None:
            return _UNSUPPORTED
    needed: Tuple[str, ...] = tuple(required)

    def check(value: Any) -> bool:
        if type(value) is not dict:
            return True  # these keywords only apply to objects
        for name in needed:
            if name not in value:
                return False
        for name, item in value.items():
            sub = compiled.get(name)
            if sub is None:
                if extra_check is None or not extra_check(item):
                    return False
            elif not sub(item):
                return False
        return True

    return check


def _items_check(schema: Mapping[str, Any], depth: int) -> Any:
    if "items" not in schema:
        return None
    item_check = _compile(schema["items"], depth + 1)
    if item_check is None:  # a list form (prefix items in older drafts) or a complex schema
        return _UNSUPPORTED
    return lambda value: type(value) is not list or all(item_check(item) for item in value)

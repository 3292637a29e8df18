"""Tools: the @tool decorator (schemas from annotations and docstrings, injected parameters, return
values) and argument validation with the reference's coercion and error text (agent-loop §2.7)."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import json
import math
import pathlib
import sys
import uuid
from typing import TYPE_CHECKING, Annotated, Any, Dict, List, Literal, Optional, Tuple, TypedDict, Union

import pytest

from agentcore.signals import AbortController
from agentcore.tools import AgentTool, AgentToolResult, FunctionTool, ToolValidationError, tool, validate_tool_arguments
from agentcore.types import ImageContent, TextContent

if TYPE_CHECKING:
    from decimal import Decimal


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass
class Point:
    """A point.

    Attributes:
        x: Horizontal position.
        y: Vertical position.
    """

    x: float
    y: float = 0.0


@dataclasses.dataclass
class _Parcel:
    weight: Decimal  # imported for type checkers only: no runtime name


class Options(TypedDict, total=False):
    depth: int
    name: str


class Required(TypedDict):
    id: int


if sys.version_info >= (3, 11):  # typing.Required/NotRequired; this module's annotations are strings
    from typing import NotRequired
    from typing import Required as RequiredKey

    class Query(TypedDict):
        text: str
        limit: NotRequired[int]
        tag: Annotated[NotRequired[str], "A tag."]

    class Filter(TypedDict, total=False):
        field: RequiredKey[str]
        value: str
        op: NotRequired[Annotated[str, "An operator."]]


def _schema_of(annotation: Any, default: Any = dataclasses.MISSING) -> Dict[str, Any]:
    """The property schema @tool makes for one parameter annotated ``annotation``."""

    def fn(value):  # type: ignore[no-untyped-def]
        return "ok"

    fn.__annotations__ = {"value": annotation}
    if default is not dataclasses.MISSING:
        fn.__defaults__ = (default,)
    return tool(fn).parameters["properties"]["value"]


# --------------------------------------------------------------------------- schemas


@pytest.mark.parametrize(
    "annotation, expected",
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (type(None), {"type": "null"}),
        (Any, {}),
        (Optional[int], {"type": ["integer", "null"]}),
        (Union[int, str], {"anyOf": [{"type": "integer"}, {"type": "string"}]}),
        (Union[int, str, None], {"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]}),
        (list, {"type": "array"}),
        (List[str], {"type": "array", "items": {"type": "string"}}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (Optional[List[str]], {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]}),
        (Tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
        (
            Tuple[int, str],
            {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "minItems": 2, "maxItems": 2},
        ),
        (set[str], {"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
        (dict, {"type": "object"}),
        (Dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
        (dict[str, Any], {"type": "object"}),
        (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
        (Literal[1, 2], {"type": "integer", "enum": [1, 2]}),
        (Literal["a", 1], {"enum": ["a", 1]}),
        (Color, {"type": "string", "enum": ["red", "blue"]}),
        (Level, {"type": "integer", "enum": [1, 2]}),
        (Options, {"type": "object", "properties": {"depth": {"type": "integer"}, "name": {"type": "string"}}}),
        (Required, {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}),
        (
            Point,
            {
                "type": "object",
                "properties": {
                    "x": {"type": "number", "description": "Horizontal position."},
                    "y": {"type": "number", "default": 0.0, "description": "Vertical position."},
                },
                "required": ["x"],
                "additionalProperties": False,
            },
        ),
        (Annotated[int, "How many."], {"type": "integer", "description": "How many."}),
        (datetime.datetime, {"type": "string", "format": "date-time"}),
        (datetime.date, {"type": "string", "format": "date"}),
        (datetime.time, {"type": "string", "format": "time"}),
        (uuid.UUID, {"type": "string", "format": "uuid"}),
        (pathlib.Path, {"type": "string"}),
        (decimal.Decimal, {"type": ["number", "string"]}),
        (Optional[datetime.date], {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}]}),
    ],
)
def test_schema_for_every_supported_annotation(annotation: Any, expected: Dict[str, Any]) -> None:
    assert _schema_of(annotation) == expected


def test_unsupported_annotations_fail_at_decoration_naming_the_parameter() -> None:
    with pytest.raises(TypeError, match=r"parameter 'when'.*unsupported annotation"):

        def f(when: complex) -> str:
            return ""

        tool(f)
    with pytest.raises(TypeError, match="JSON object keys are strings"):
        _schema_of(Dict[int, str])
    with pytest.raises(TypeError, match=r"\*args is not supported"):
        tool(lambda *args: "")
    with pytest.raises(TypeError, match=r": \*\*opts is not supported"):  # it said "*opts"
        tool(lambda **opts: "")


def test_recursive_dataclass_is_rejected_clearly() -> None:
    @dataclasses.dataclass
    class Node:
        children: List[Node]

    globals()["Node"] = Node
    try:
        with pytest.raises(TypeError, match="recursive type"):
            _schema_of(Node)
    finally:
        del globals()["Node"]


def test_decorator_reads_docstring_defaults_and_skips_injected_parameters() -> None:
    @tool
    def search(
        query: str,
        limit: int = 10,
        mode: Color = Color.BLUE,
        note: Optional[str] = None,
        signal: Any = None,
        on_update: Any = None,
        tool_call_id: str = "",
    ) -> str:
        """Search the notes.

        Longer text that is not part of the description.

        Args:
            query: Words to look for.
            limit (int): At most this many
                results (continued line).
            mode: Colour filter.
        Returns:
            The matches.
        """
        return query

    assert isinstance(search, FunctionTool) and isinstance(search, AgentTool)
    assert (search.name, search.label, search.description) == ("search", "search", "Search the notes.")
    assert search.parameters == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Words to look for."},
            "limit": {"type": "integer", "default": 10, "description": "At most this many results (continued line)."},
            "mode": {"type": "string", "enum": ["red", "blue"], "default": "blue", "description": "Colour filter."},
            "note": {"type": ["string", "null"]},
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    assert search("direct call") == "direct call"


def test_decorator_with_options_and_sphinx_docstring() -> None:
    @tool(name="do_it", label="Do it", execution_mode="sequential", description="Custom text.")
    def impl(path: str) -> str:
        """Ignored summary.

        :param path: The file
            to work on.
        """
        return path

    assert (impl.name, impl.label, impl.execution_mode, impl.description) == (
        "do_it",
        "Do it",
        "sequential",
        "Custom text.",
    )
    assert impl.parameters["properties"]["path"]["description"] == "The file to work on."


def test_execute_converts_arguments_and_injects_signal_update_and_call_id() -> None:
    seen: Dict[str, Any] = {}

    @tool
    def act(
        where: Point,
        color: Color,
        pair: Tuple[int, str],
        tags: set[str],
        count: int,
        signal: Any,
        on_update: Any,
        tool_call_id: str,
    ) -> str:
        """Act."""
        seen.update(
            where=where, color=color, pair=pair, tags=tags, count=count, signal=signal, tool_call_id=tool_call_id
        )
        on_update(AgentToolResult([TextContent("halfway")]))
        return "done"

    updates: List[Any] = []
    signal = AbortController().signal
    args = validate_tool_arguments(
        act, {"where": {"x": "1.5"}, "color": "red", "pair": ["3", 4], "tags": ["a"], "count": 2.0}
    )
    result = act.execute("call-7", args, signal, updates.append)
    assert result.content[0].text == "done"
    assert seen == {
        "where": Point(1.5, 0.0),
        "color": Color.RED,
        "pair": (3, "4"),
        "tags": {"a"},
        "count": 2,
        "signal": signal,
        "tool_call_id": "call-7",
    }
    assert type(seen["count"]) is int
    assert updates[0].content[0].text == "halfway"
    assert "signal" not in act.parameters["properties"]


def test_dates_times_uuids_paths_and_decimals_arrive_as_their_types() -> None:
    """Annotating a parameter ``datetime.date`` (or a time, UUID, path, Decimal) was refused at
    decoration ("unsupported annotation"): the model sends them as text, the function gets the
    type, and a value that does not parse is an error naming the argument and the form."""
    seen: Dict[str, Any] = {}

    @tool
    def book(
        when: datetime.datetime,
        day: datetime.date,
        at: datetime.time,
        ref: uuid.UUID,
        folder: pathlib.Path,
        amount: decimal.Decimal,
        until: Optional[datetime.date] = datetime.date(2026, 12, 31),
    ) -> str:
        """Book."""
        seen.update(when=when, day=day, at=at, ref=ref, folder=folder, amount=amount, until=until)
        return "booked"

    assert book.parameters["properties"]["until"]["default"] == "2026-12-31"  # a default JSON can hold
    args = {
        "when": "2026-01-02T03:04:05Z",  # the "Z" JSON writers use: refused by fromisoformat before 3.11
        "day": "2026-01-02",
        "at": "15:04",
        "ref": "12345678123456781234567812345678",
        "folder": "/srv/data",
        "amount": 0.1,
    }
    assert book.execute("c", validate_tool_arguments(book, args)).content[0].text == "booked"
    assert seen == {
        "when": datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc),
        "day": datetime.date(2026, 1, 2),
        "at": datetime.time(15, 4),
        "ref": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "folder": pathlib.Path("/srv/data"),
        "amount": decimal.Decimal("0.1"),  # from its text: not 0.1000000000000000055511151231257827
        "until": datetime.date(2026, 12, 31),
    }
    book.execute("c", validate_tool_arguments(book, {**args, "amount": "12.30", "until": None}))
    assert str(seen["amount"]) == "12.30" and seen["until"] is None
    for name, value, message in [
        ("when", "tomorrow", r"argument 'when': expected a date and time in ISO 8601 form"),
        ("day", "2026-13-40", r"argument 'day': expected a date \(2026-01-02\) in ISO 8601 form, got '2026-13-40'"),
        ("ref", "not-a-uuid", r"argument 'ref': expected a UUID"),
        ("amount", "NaN", r"argument 'amount': expected a finite decimal number, got 'NaN'"),
        ("amount", "lots", r"argument 'amount': expected a decimal number, got 'lots'"),
    ]:
        with pytest.raises(ValueError, match=message):
            book.execute("c", validate_tool_arguments(book, {**args, name: value}))


@dataclasses.dataclass
class Span:
    start: int
    end: int

    def __post_init__(self) -> None:
        if self.end < self.start:
            raise ValueError("end before start")


def test_a_dataclass_refusing_its_fields_is_named_by_the_argument() -> None:
    @tool
    def cut(span: Span) -> str:
        """Cut."""
        return "cut"

    with pytest.raises(ValueError, match="^argument 'span': end before start$"):
        cut.execute("c", validate_tool_arguments(cut, {"span": {"start": 5, "end": 1}}))


@pytest.mark.parametrize(
    "returned, text, details",
    [
        ("plain", "plain", None),
        ({"a": 1}, '{\n  "a": 1\n}', {"a": 1}),
        ([1, "x"], '[\n  1,\n  "x"\n]', [1, "x"]),
        (42, "42", 42),
        (Point(1.0, 2.0), '{\n  "x": 1.0,\n  "y": 2.0\n}', {"x": 1.0, "y": 2.0}),
    ],
)
def test_return_values_become_results(returned: Any, text: str, details: Any) -> None:
    result = tool(lambda: returned).execute("c", {}, None, None)
    assert isinstance(result, AgentToolResult)
    assert [b.text for b in result.content] == [text] and result.details == details


def test_results_and_blocks_are_passed_through() -> None:
    own = AgentToolResult([TextContent("x")], details={"k": 1}, terminate=True)
    assert tool(lambda: own).execute("c", {}, None, None) is own
    image = ImageContent(data="aGk=", mime_type="image/png")
    assert tool(lambda: image).execute("c", {}, None, None).content == [image]
    assert tool(lambda: [TextContent("a"), image]).execute("c", {}, None, None).content[1] is image
    assert tool(lambda: None).execute("c", {}, None, None).content == []


def test_tool_failure_is_raised_to_the_loop() -> None:
    def explode() -> str:
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError, match="disk on fire"):
        tool(explode).execute("c", {}, None, None)


# The @tool return rules ("anything else JSON text of it ... dataclasses via asdict"): a dataclass
# or enum nested in a returned dict/list used to reach the model as its repr ("Point(x=3, y=0)").
def test_tool_return_value_nests_dataclasses_and_enums_as_json() -> None:
    import enum
    import json
    from dataclasses import dataclass

    class Color(enum.Enum):
        RED = "red"

    @dataclass
    class Point:
        x: int
        y: int = 0

    @tool
    def shapes(n: int) -> Any:
        """Return shapes."""
        return {"points": [Point(n)], "color": Color.RED, "tags": {"a"}}

    result = shapes.execute("call-1", {"n": 3})
    assert json.loads(result.content[0].text) == {"points": [{"x": 3, "y": 0}], "color": "red", "tags": ["a"]}


# @tool return rules: "a content block (or a list of them) as content". A tuple of blocks (say
# ``return text_block, image_block``) used to become JSON text describing the blocks.
def test_tool_returning_a_tuple_of_blocks_gives_content() -> None:
    from agentcore.types import ImageContent, TextContent

    @tool
    def picture() -> Any:
        """Return a caption and an image."""
        return TextContent("caption"), ImageContent(data="aGk=", mime_type="image/png")

    result = picture.execute("call-1", {})
    assert [block.type for block in result.content] == ["text", "image"]


# agent-loop §2.6: a tool's execution_mode "sequential" forces its batch to run one call at a time.
# A typo used to be accepted and meant "parallel", for exactly the tools that must not overlap.
def test_tool_execution_mode_typo_raises() -> None:
    from agentcore.tools import AgentTool
    from agentcore.types import ToolExecutionMode

    with pytest.raises(ValueError, match="execution_mode"):
        AgentTool("t", "d", {"type": "object"}, lambda *a: None, execution_mode="sequental")
    with pytest.raises(ValueError, match="execution_mode"):
        tool(execution_mode="serial")(lambda: None)
    assert AgentTool("t", "d", {}, lambda *a: None, execution_mode=ToolExecutionMode("sequential")).execution_mode


# --------------------------------------------------------------------------- validation


def _t(schema: Dict[str, Any], name: str = "probe") -> AgentTool:
    return AgentTool(name=name, description="", parameters=schema, execute=lambda *a: AgentToolResult())


def _props(**props: Any) -> Dict[str, Any]:
    return {"type": "object", "properties": props}


@pytest.mark.parametrize(
    "schema, value, expected",
    [
        ({"type": "integer"}, "5", 5),
        ({"type": "integer"}, "5.0", 5),
        ({"type": "integer"}, True, 1),
        ({"type": "integer"}, None, 0),
        ({"type": "number"}, "1.5", 1.5),
        ({"type": "number"}, "-2", -2),
        ({"type": "number"}, "1e3", 1000.0),
        ({"type": "number"}, False, 0),
        ({"type": "boolean"}, "true", True),
        ({"type": "boolean"}, "false", False),
        ({"type": "boolean"}, 1, True),
        ({"type": "boolean"}, None, False),
        ({"type": "string"}, 5, "5"),
        ({"type": "string"}, 2.5, "2.5"),
        ({"type": "string"}, 3.0, "3"),
        ({"type": "string"}, True, "true"),
        ({"type": "string"}, None, ""),
        ({"type": "null"}, "", None),
        ({"type": "array", "items": {"type": "integer"}}, "7", [7]),
        ({"type": "array"}, "x", ["x"]),
        ({"type": ["integer", "null"]}, "4", 4),
        ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, "4", 4),
        ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, None, None),
        ({"anyOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}, {"type": "null"}]}, None, None),
        ({"anyOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}, {"type": "null"}]}, "x", "x"),
        ({"$ref": "#/$defs/n", "$defs": {"n": {"type": "integer"}}}, "8", 8),
    ],
)
def test_coercion_follows_the_reference(schema: Dict[str, Any], value: Any, expected: Any) -> None:
    defs = schema.pop("$defs", None)
    root = _props(v=schema)
    if defs:
        root["$defs"] = defs
    out = validate_tool_arguments(_t(root), {"v": value})
    assert out == {"v": expected} and type(out["v"]) is type(expected)


@pytest.mark.parametrize(
    "schema, value",
    [
        ({"type": "integer"}, "5.5"),
        ({"type": "integer"}, "five"),
        ({"type": "number"}, ""),
        ({"type": "boolean"}, "yes"),
        ({"type": "object"}, "{}"),
    ],
)
def test_values_that_do_not_coerce_fail_validation(schema: Dict[str, Any], value: Any) -> None:
    with pytest.raises(ToolValidationError):
        validate_tool_arguments(_t(_props(v=schema)), {"v": value})


# agent-loop §2.7b (AJV coerceTypes): a numeric string for an integer parameter becomes that
# integer exactly; big ids sent as strings must not lose digits through a float.
def test_integer_string_coercion_is_exact_for_big_numbers() -> None:
    from agentcore.tools import validate_tool_arguments

    @tool
    def lookup(item_id: int, weight: float = 0.0) -> str:
        """Look an item up."""
        return str(item_id)

    args = validate_tool_arguments(lookup, {"item_id": "12345678901234567891", "weight": "-98765432109876543210"})
    assert args["item_id"] == 12345678901234567891
    assert args["weight"] == -98765432109876543210
    assert validate_tool_arguments(lookup, {"item_id": " 42.00 ", "weight": "1.5"}) == {"item_id": 42, "weight": 1.5}


def test_a_long_numeric_string_that_is_no_number_fails_at_once() -> None:
    """The number pattern had two digit runs that could split a number anywhere (``\\d+\\.?\\d*``),
    so a failing match tried every split: a model's 20,000 digits followed by "x" for a number
    parameter took 25 s of CPU with the GIL held, stalling every other agent (quadratic). Run in a
    child with a generous limit: the old pattern needs hours for this size, the new one
    microseconds."""
    import subprocess
    import sys

    code = "\n".join(
        [
            "from agentcore import tool",
            "from agentcore.tools import ToolValidationError, validate_tool_arguments",
            "@tool",
            "def weigh(grams: float) -> str:",
            "    'Weigh.'",
            "    return ''",
            "for value in ('1' * 60000 + 'x', ' ' * 60000 + '1' + ' ' * 60000 + 'x', '1.' + '2' * 60000 + 'e'):",
            "    try:",
            "        validate_tool_arguments(weigh, {'grams': value})",
            "    except ToolValidationError:",
            "        continue",
            "    raise SystemExit('coerced ' + value[:10])",
            "print('ok')",
        ]
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr


def test_a_schema_that_refers_to_itself_without_end_is_a_validation_error_naming_the_tool() -> None:
    # {"$ref": "#"} passes check_schema, then every call failed with a bare RecursionError from deep
    # inside jsonschema (an MCP server listed such a tool)
    from agentcore.tools import validate_tool_arguments

    looping = AgentTool("looping", "d", {"type": "object", "$ref": "#"}, lambda *a: None)
    with pytest.raises(
        ToolValidationError, match=r'^Tool "looping": its arguments could not be checked .*recursion limit'
    ):
        validate_tool_arguments(looping, {"a": 1})


def test_nested_coercion_and_the_input_is_never_mutated() -> None:
    schema = _props(
        items={"type": "array", "items": _props(n={"type": "integer"})},
        extra={"type": "object", "additionalProperties": {"type": "boolean"}},
    )
    raw = {"items": [{"n": "1"}, {"n": 2}], "extra": {"a": "true"}}
    out = validate_tool_arguments(_t(schema), raw)
    assert out == {"items": [{"n": 1}, {"n": 2}], "extra": {"a": True}}
    assert raw == {"items": [{"n": "1"}, {"n": 2}], "extra": {"a": "true"}}
    assert out["items"] is not raw["items"]


def test_validation_message_format():  # agent-loop §2.7 / §2.16
    schema = {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "n": {"type": "integer", "minimum": 1},
            "inner": _props(k={"type": "string"}) | {"required": ["k"]},
        },
        "required": ["path"],
        "additionalProperties": False,
    }
    raw = {"n": 0, "inner": {}, "oops": 1}
    with pytest.raises(ValueError) as err:
        validate_tool_arguments(_t(schema, "read"), raw)
    lines = str(err.value).split("\n")
    assert lines[0] == 'Validation failed for tool "read":'
    errors = lines[1 : lines.index("")]
    assert sorted(errors) == sorted(
        [
            "  - n: must be >= 1",
            "  - inner: must have required property 'k'",
            "  - path: must have required property 'path'",
            "  - root: must NOT have additional properties ('oops')",
        ]
    )
    assert lines[lines.index("") + 1] == "Received arguments:"
    assert "\n".join(lines[lines.index("") + 2 :]) == '{\n  "n": 0,\n  "inner": {},\n  "oops": 1\n}'


def test_errors_inside_a_union_name_the_path_of_the_wrong_value() -> None:
    """``Optional[Point]`` with a bad coordinate said only ``p: must match a schema in anyOf``: the
    model could not tell what to fix. As AJV does, the branches' errors come first."""

    @tool
    def plot(p: Optional[Point] = None, n: Union[int, List[int]] = 0) -> str:
        """Plot."""
        return "ok"

    with pytest.raises(ToolValidationError) as info:
        validate_tool_arguments(plot, {"p": {"x": "left"}, "n": [1, "two"]})
    errors = str(info.value).split("\n\n")[0].splitlines()[1:]
    assert errors == [
        "  - p/x: must be number",
        "  - p: must be null",
        "  - p: must match a schema in anyOf",
        "  - n: must be integer",
        "  - n/1: must be integer",
        "  - n: must match a schema in anyOf",
    ]


def test_an_extra_argument_is_named() -> None:
    schema = _props(path={"type": "string"}, limit={"type": "integer"}) | {"additionalProperties": False}
    with pytest.raises(ToolValidationError) as info:
        validate_tool_arguments(_t(schema), {"path": "a", "limt": 5, "x": 1})
    assert str(info.value).splitlines()[1] == "  - root: must NOT have additional properties ('limt', 'x')"


def test_a_number_string_too_long_for_python_fails_validation_instead_of_raising() -> None:
    """``int()`` refuses strings of more than 4300 digits: the coercion raised that ValueError out
    of the validator (an ``ask`` answer then failed the whole run instead of being corrected)."""
    digits = "9" * 5000
    for json_type in ("integer", "number"):
        with pytest.raises(ToolValidationError, match=f"  - n: must be {json_type}"):
            validate_tool_arguments(_t(_props(n={"type": json_type})), {"n": digits})


def test_numbers_given_as_strings_are_coerced_in_a_draft_07_tuple() -> None:
    """Draft 2019-09 and older write a tuple as a list ``items`` (2020-12: ``prefixItems``); its
    positions were never coerced, so ``"5"`` failed where the 2020-12 form took it as 5."""
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]}},
    }
    assert validate_tool_arguments(_t(schema), {"pair": [7, "5"]}) == {"pair": ["7", 5]}
    rest = {"type": "array", "items": [{"type": "string"}], "additionalItems": {"type": "integer"}}
    draft_07 = _props(xs=rest) | {"$schema": "http://json-schema.org/draft-07/schema#"}
    assert validate_tool_arguments(_t(draft_07), {"xs": ["a", "1", "2"]}) == {"xs": ["a", 1, 2]}


def test_a_set_of_unhashable_items_fails_at_decoration() -> None:
    """``set[Point]`` (a dataclass that is not frozen) passed decoration and then failed every
    call with ``unhashable type: 'Point'`` after the arguments had validated."""

    @dataclasses.dataclass(frozen=True)
    class Pin:
        x: int

    def pin(points: Any) -> str:
        """Pin points."""
        return repr(points)

    for annotation in (set[Point], frozenset[List[int]], set[Optional[Point]], set[Options]):
        pin.__annotations__["points"] = annotation
        with pytest.raises(TypeError, match=r"parameter 'points': .*the items of a set must be hashable"):
            tool(pin)
    pin.__annotations__["points"] = set[Pin]
    assert tool(pin).execute("c1", {"points": [{"x": 1}]}, None, None).content[0].text == repr({Pin(1)})


def test_a_dataclass_whose_field_types_do_not_resolve_fails_at_decoration_naming_it() -> None:
    """A field type imported only for type checkers raised a bare NameError from deep inside."""
    with pytest.raises(TypeError, match=r"@tool .*ship, parameter 'parcel': .*_Parcel .*name 'Decimal' is not defined"):

        @tool
        def ship(parcel: _Parcel) -> str:
            """Ship a parcel."""
            return "ok"


def test_type_error_wording_and_paths_inside_arrays() -> None:
    schema = _props(xs={"type": "array", "items": {"type": "integer"}})
    with pytest.raises(ToolValidationError, match=r"  - xs/1: must be integer"):
        validate_tool_arguments(_t(schema), {"xs": [1, "nope"]})


def test_validator_is_compiled_once_per_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentcore import tools as tools_module

    compiled: List[Any] = []
    real = tools_module._compile
    monkeypatch.setattr(tools_module, "_compile", lambda t, s: compiled.append(s) or real(t, s))
    probe = _t(_props(a={"type": "integer"}))
    for _ in range(3):
        validate_tool_arguments(probe, {"a": "1"})
    assert len(compiled) == 1
    probe.parameters = _props(a={"type": "string"})  # a new schema object is compiled again
    assert validate_tool_arguments(probe, {"a": 1}) == {"a": "1"}
    assert len(compiled) == 2


# The fast check of simple schemas (agentcore._schema_check) may only ever say "valid" where
# jsonschema says so too; everything else goes to jsonschema, which also writes the errors.
_SIMPLE_SCHEMAS: List[Dict[str, Any]] = [
    _props(a={"type": "integer"}, b={"type": "integer"}) | {"required": ["a", "b"], "additionalProperties": False},
    _props(path={"type": "string", "description": "where"}, n={"type": "number", "default": 1})
    | {"required": ["path"]},
    _props(flag={"type": "boolean"}, tags={"type": "array", "items": {"type": "string"}}),
    _props(mode={"type": "string", "enum": ["a", "b", "1"]}, level={"enum": [1, 2.5, True, None]}),
    _props(maybe={"type": ["integer", "null"]}, any={}, o=_props(k={"type": "string"}) | {"required": ["k"]}),
    {"type": "object", "additionalProperties": {"type": "integer"}},
    {"type": "array", "items": _props(x={"type": "number"}) | {"additionalProperties": False}},
    {"properties": {"a": {"type": "string"}}, "required": ["a"]},  # no "type": a non-object passes
    _props(
        a={"type": "integer", "minimum": 1, "maximum": 10},
        b={"type": "string", "minLength": 1, "maxLength": 1},
        tags={"type": "array", "minItems": 1, "maxItems": 2},
        n={"exclusiveMinimum": 0, "exclusiveMaximum": 2.5},  # any type: only numbers are bounded
    ),
]
_KEYS = ["a", "b", "path", "n", "flag", "tags", "mode", "level", "maybe", "any", "o", "k", "x", "zz"]


def _random_json(rng: Any, depth: int = 0) -> Any:
    kind = rng.randrange(10 if depth < 3 else 7)
    scalars = [0, 1, -3, 2.0, 2.5, float("nan"), True, False, None, "", "a", "b", "1", "true", 1e300]
    if kind < 7:
        return rng.choice(scalars)
    if kind < 8:
        return [_random_json(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(_KEYS): _random_json(rng, depth + 1) for _ in range(rng.randrange(5))}


def test_the_fast_check_of_simple_schemas_never_accepts_what_jsonschema_refuses() -> None:
    import random

    from jsonschema import Draft202012Validator

    from agentcore._schema_check import compile_simple_check

    rng = random.Random(11)
    agreed = {True: 0, False: 0}
    for schema in _SIMPLE_SCHEMAS:
        check = compile_simple_check(schema)
        assert check is not None, schema
        validator = Draft202012Validator(schema)
        for _ in range(3000):
            value = _random_json(rng)
            if isinstance(schema.get("properties"), dict) and rng.random() < 0.5:  # near-misses too
                value = {key: _random_json(rng, 2) for key in schema["properties"] if rng.random() < 0.8}
            fast = check(value)
            assert not fast or validator.is_valid(value), (schema, value)
            agreed[fast] += 1
    assert agreed[True] > 2000  # the fast path is taken, not always deferred


@pytest.mark.parametrize(
    "schema",
    [
        {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"},
        _props(n={"type": "integer", "multipleOf": 2}),
        _props(s={"type": "string", "pattern": "^a"}),
        _props(s={"type": "string", "minLength": 1.5}),
        _props(u={"anyOf": [{"type": "integer"}, {"type": "null"}]}),
        {"$ref": "#/$defs/n", "$defs": {"n": {"type": "integer"}}},
        _props(t={"type": "array", "items": [{"type": "integer"}]}),
        _props(e={"enum": [[1], {"a": 1}]}),
        _props(b=True),
        {"type": "objekt"},
    ],
)
def test_schemas_outside_the_simple_set_always_go_to_jsonschema(schema: Dict[str, Any]) -> None:
    from agentcore._schema_check import compile_simple_check

    assert compile_simple_check(schema) is None


def test_validation_gives_the_same_answer_with_and_without_the_fast_check(monkeypatch: pytest.MonkeyPatch) -> None:
    import random

    from agentcore import _schema_check

    rng = random.Random(5)
    values = [_random_json(rng) for _ in range(400)]
    values += [{key: _random_json(rng, 2) for key in _KEYS if rng.random() < 0.5} for _ in range(400)]

    def outcomes() -> List[Any]:
        out: List[Any] = []
        for schema in _SIMPLE_SCHEMAS:
            probe = _t(schema)
            for value in values:
                try:
                    out.append(("ok", repr(validate_tool_arguments(probe, value))))
                except ToolValidationError as exc:
                    out.append(("error", str(exc)))
        return out

    fast = outcomes()
    monkeypatch.setattr(_schema_check, "compile_simple_check", lambda schema: None)
    assert outcomes() == fast


def test_invalid_schema_is_reported_with_the_tool_name() -> None:
    with pytest.raises(ToolValidationError, match=r'Tool "bad" has an invalid parameters schema'):
        validate_tool_arguments(_t({"type": "objekt"}, "bad"), {})


def test_a_schema_ref_that_does_not_resolve_is_reported_with_the_tool_name() -> None:
    """An MCP server's schema with a ``$ref`` to a missing ``$defs`` entry (or another document)
    failed every call with jsonschema's private ``_WrappedReferencingError`` quoting the schema."""
    missing = _t({"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}, "x": "y" * 5000}, "bad")
    with pytest.raises(
        ToolValidationError, match=r'^Tool "bad" has a parameters schema with a "\$ref" that cannot'
    ) as info:
        validate_tool_arguments(missing, {"a": 1})
    assert "/$defs/Missing" in str(info.value) and len(str(info.value)) < 500
    remote = _t({"type": "object", "properties": {"a": {"$ref": "https://example.invalid/s.json"}}}, "far")
    with pytest.raises(ToolValidationError, match=r'Tool "far" .*https://example.invalid/s.json'):
        validate_tool_arguments(remote, {"a": 1})  # nothing is fetched
    assert validate_tool_arguments(missing, {}) == {}  # a value that never reaches the $ref


def test_import_agentcore_tools_does_not_import_jsonschema() -> None:
    import subprocess

    code = "import sys, agentcore.tools, agentcore.plugins; print('jsonschema' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def test_return_values_json_refuses_still_make_a_result() -> None:  # issue 10 item 2 (class)
    import socket

    from agentcore.tools import to_tool_result

    class Unprintable:
        def __str__(self) -> str:
            raise RuntimeError("no str")

        __repr__ = __str__

    @dataclasses.dataclass
    class Holder:
        sock: Any

    cyclic: List[Any] = [1]
    cyclic.append(cyclic)
    with socket.socket() as sock:
        for value, shown in (
            ({(1, 2): "tuple key"}, "tuple key"),
            (cyclic, "<cycle>"),
            ({"x": Unprintable()}, "<Unprintable object>"),
            (Holder(sock), "socket"),
        ):
            result = to_tool_result(value)
            assert shown in result.content[0].text


def test_null_for_an_optional_union_reaches_the_function_as_none() -> None:
    @tool
    def lookup(
        key: Union[int, str, None] = None,
        name: Union[str, int, None] = None,
        ids: Optional[Union[List[int], int]] = None,
    ) -> str:
        """Look something up."""
        return f"{key!r} {name!r} {ids!r}"

    args = validate_tool_arguments(lookup, {"key": None, "name": None, "ids": None})
    assert lookup.execute("c1", args, None, None).content[0].text == "None None None"
    assert validate_tool_arguments(lookup, {"key": "7", "ids": "3"}) == {"key": "7", "ids": [3]}


@pytest.mark.skipif(sys.version_info < (3, 11), reason="typing.Required/NotRequired are Python 3.11+")
def test_typeddict_required_and_not_required_with_string_annotations() -> None:
    query = _schema_of(Query)
    assert query["required"] == ["text"]
    assert query["properties"]["tag"] == {"type": "string", "description": "A tag."}
    filt = _schema_of(Filter)
    assert filt["required"] == ["field"]
    assert filt["properties"]["op"] == {"type": "string", "description": "An operator."}

    @tool
    def search(q: Query, f: Filter) -> str:
        """Search."""
        return repr((q, f))

    args = validate_tool_arguments(search, {"q": {"text": "hi"}, "f": {"field": "a"}})
    assert search.execute("c1", args, None, None).content[0].text == "({'text': 'hi'}, {'field': 'a'})"


def test_typeddict_not_required_inside_annotated_from_typing_extensions() -> None:
    te = pytest.importorskip("typing_extensions")
    opts = te.TypedDict(
        "opts",
        {
            "name": str,
            "tag": Annotated[te.NotRequired[str], "A tag."],
            "note": te.NotRequired[Annotated[str, "A note."]],
        },
    )
    schema = _schema_of(opts)
    assert schema["required"] == ["name"]
    assert schema["properties"]["tag"] == {"type": "string", "description": "A tag."}
    assert schema["properties"]["note"] == {"type": "string", "description": "A note."}


def test_parameters_named_self_or_cls_of_a_plain_function_stay_in_the_schema() -> None:
    @tool
    def classify(text: str, cls: str, self: str = "me") -> str:
        """Label a text."""
        return f"{text} -> {cls} by {self}"

    assert list(classify.parameters["properties"]) == ["text", "cls", "self"]
    args = validate_tool_arguments(classify, {"text": "hi", "cls": "greeting"})
    assert classify.execute("c1", args, None, None).content[0].text == "hi -> greeting by me"


class _Store:
    def __init__(self, data: Dict[str, int]) -> None:
        self.data = data

    @tool
    def get(self, key: str) -> str:
        """Get a value."""
        return str(self.data[key])


def test_tool_on_a_method_binds_to_the_instance() -> None:
    assert list(_Store.get.parameters["properties"]) == ["key"]
    store = _Store({"a": 1})
    bound = store.get
    assert isinstance(bound, FunctionTool) and bound is store.get  # one bound tool per instance
    assert bound.execute("c1", {"key": "a"}, None, None).content[0].text == "1"
    assert _Store({"a": 2}).get.execute("c1", {"key": "a"}, None, None).content[0].text == "2"
    assert bound("a") == "1" and _Store.get(store, "a") == "1"


def test_a_skipped_positional_only_parameter_gets_its_default() -> None:
    @tool
    def scale(value: float = 1.0, factor: float = 2.0, /, offset: float = 0.0) -> str:
        """Scale a value."""
        return f"{value} {factor} {offset}"

    assert scale.execute("c1", {"factor": 10}, None, None).content[0].text == "1.0 10.0 0.0"
    assert scale.execute("c1", {"value": 3}, None, None).content[0].text == "3.0 2.0 0.0"
    assert scale.execute("c1", {"offset": 1}, None, None).content[0].text == "1.0 2.0 1.0"


def test_a_nested_dataclass_takes_no_extra_keys() -> None:
    @tool
    def plot(p: Point) -> str:
        """Plot a point."""
        return repr(p)

    assert plot.parameters["properties"]["p"]["additionalProperties"] is False
    with pytest.raises(ToolValidationError, match="p: must NOT have additional properties"):
        validate_tool_arguments(plot, {"p": {"x": 1, "label": "A"}})


def test_literal_of_an_enum_member_uses_its_value_and_converts_back() -> None:
    import json

    @tool
    def run(mode: Literal[Color.RED], level: Literal[Level.HIGH, 3] = 3) -> str:
        """Run."""
        return repr((mode, level))

    assert run.parameters["properties"]["mode"] == {"type": "string", "enum": ["red"]}
    assert run.parameters["properties"]["level"]["enum"] == [2, 3]
    json.dumps(run.parameters)
    args = validate_tool_arguments(run, {"mode": "red", "level": 2})
    assert run.execute("c1", args, None, None).content[0].text == repr((Color.RED, Level.HIGH))


def test_duplicate_set_items_are_reported_in_the_reference_wording() -> None:
    @tool
    def tag(ids: set[int]) -> str:
        """Tag."""
        return repr(ids)

    for ids, message in (([1, 1], "items ## 1 and 0"), ([3, 1, 2, 1], "items ## 3 and 1")):
        with pytest.raises(ToolValidationError) as info:
            validate_tool_arguments(tag, {"ids": ids})
        assert str(info.value).splitlines()[1] == f"  - ids: must NOT have duplicate items ({message} are identical)"


def test_a_returned_list_of_captions_and_blocks_is_content() -> None:
    image = ImageContent(data="iVBORw0KGgo", mime_type="image/png")

    @tool
    def shot() -> list:
        """Caption plus screenshot."""
        return ["Here is the screen:", image]

    result = shot.execute("c1", {}, None, None)
    assert result.content == [TextContent("Here is the screen:"), image] and result.details is None


def test_generator_functions_are_rejected_at_decoration() -> None:
    def lines(n: int):  # type: ignore[no-untyped-def]
        yield from range(n)

    async def alines(n: int):  # type: ignore[no-untyped-def]
        yield n

    for fn in (lines, alines):
        with pytest.raises(TypeError, match="is a generator function"):
            tool(fn)


@dataclasses.dataclass
class _Range:
    low: float = -math.inf
    high: float = math.inf


def test_a_nan_or_infinite_default_is_left_out_of_the_schema() -> None:
    """``limit: float = math.inf`` became ``"default": Infinity`` (json.dumps writes it), no JSON:
    every request carrying the tool's schema was refused by the provider."""

    @tool
    def search(query: str, max_price: float = math.inf, ratio: float = math.nan, span: Optional[_Range] = None) -> str:
        """Search."""
        return query

    props = search.parameters["properties"]
    json.dumps(search.parameters, allow_nan=False)  # strict JSON, as an HTTP body must be
    assert props["max_price"] == {"type": "number"} and props["ratio"] == {"type": "number"}
    assert props["span"]["anyOf"][0]["properties"] == {"low": {"type": "number"}, "high": {"type": "number"}}


def test_an_integral_float_for_an_int_member_of_a_union_becomes_an_int() -> None:
    """``n: Union[int, str]`` got the float 3.0 for the JSON ``3.0`` (``n: int`` and
    ``Optional[int]`` got 3): ``range(n)`` then failed inside the tool."""

    @tool
    def repeat(n: Union[int, str], weights: List[Union[int, float]]) -> str:
        """Repeat."""
        return repr((n, weights))

    args = validate_tool_arguments(repeat, {"n": 3.0, "weights": [2.0, 2.5]})
    assert repeat.execute("c1", args, None, None).content[0].text == "(3, [2, 2.5])"


@dataclasses.dataclass
class _TextItem:
    kind: Literal["text"]
    value: str


@dataclasses.dataclass
class _CountItem:
    kind: Literal["count"]
    value: int


def test_a_value_valid_for_a_later_object_branch_of_a_union_is_accepted() -> None:
    """Coercion went into the first object branch only: ``{"kind": "count", "value": 5}`` had its
    5 made "5" for ``_TextItem`` and then matched neither branch, so the model could never pass a
    ``_CountItem``."""

    @tool
    def add(item: Union[_TextItem, _CountItem], more: List[Union[_TextItem, _CountItem]]) -> str:
        """Add."""
        return repr((item, more))

    args = {
        "item": {"kind": "count", "value": 5},
        "more": [{"kind": "count", "value": "6"}, {"kind": "text", "value": 7}],
    }
    valid = validate_tool_arguments(add, args)
    assert valid == {
        "item": {"kind": "count", "value": 5},
        "more": [{"kind": "count", "value": 6}, {"kind": "text", "value": "7"}],
    }
    text = add.execute("c1", valid, None, None).content[0].text
    assert (
        text
        == "(_CountItem(kind='count', value=5), [_CountItem(kind='count', value=6), _TextItem(kind='text', value='7')])"
    )
    with pytest.raises(ToolValidationError, match="item/value: must be integer"):  # valid for none: as before
        validate_tool_arguments(add, {"item": {"kind": "count", "value": "five"}, "more": []})


def test_a_returned_list_of_blocks_with_reference_dict_captions_is_content() -> None:
    """``[image, {"type": "text", "text": ...}]`` (a caption as AgentToolResult.content takes it)
    became one text block: the JSON of the list, the image's base64 data as text for the model."""
    image = ImageContent(data="iVBORw0KGgo", mime_type="image/png")

    @tool
    def shot() -> list:
        """Screenshot plus caption."""
        return [image, {"type": "text", "text": "The login screen."}]

    result = shot.execute("c1", {}, None, None)
    assert result.content == [image, TextContent("The login screen.")] and result.details is None

    @tool
    def rows() -> list:
        """Data that merely looks like blocks, with no block object: stays data."""
        return [{"type": "text", "text": "a"}]

    assert rows.execute("c2", {}, None, None).details == [{"type": "text", "text": "a"}]


def _echo(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(str(args.get("n")))])


ECHO = AgentTool("echo", "Echo n.", {"type": "object", "properties": {"n": {"type": "integer"}}}, _echo)


def test_a_tool_that_validated_arguments_still_pickles():
    """The compiled validator cached on a tool when it first validated holds local functions, so a
    tool an agent had used could no longer be pickled: run_many refused it (SpecNotPortableError)
    and process pools failed. Its copy compiles its own validator."""
    import pickle

    assert validate_tool_arguments(ECHO, {"n": "3"}) == {"n": 3}  # caches the validator on ECHO
    copy = pickle.loads(pickle.dumps(ECHO))
    assert copy.name == "echo" and validate_tool_arguments(copy, {"n": "4"}) == {"n": 4}
    assert "_agentcore_validator" in vars(ECHO)  # the original keeps its cache

"""Structured output (issue 13): ``Agent.ask(prompt, output_type, *, images=None, retries=2)``.

The rules run on the scripted model (tool mode: its api has no native structured output; native
mode: forced with ``compat={"supportsStructuredOutputs": True}``). The wire tests run ``ask`` on
each of the four wire APIs against a local HTTP server replaying a crafted SSE answer and check
the request body carries the schema natively (or the ``final_result`` tool where it cannot).
"""

from __future__ import annotations

import enum
import json
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, List, Literal, Optional, Tuple, TypedDict, Union

import pytest
from _servers import Reply, ScriptedServer, sse

from agentcore import Agent, AgentToolResult, AskError, OutputValidationError, TextContent, tool
from agentcore.session import Session
from agentcore.structured import (
    FINAL_RESULT_TOOL,
    AskPaused,
    output_spec,
    parse_concise_schema,
    resume_ask,
    supports_native,
)
from agentcore.testing import ScriptedModel, error, text, tool_call
from agentcore.types import Model


@dataclass
class Address:
    city: str
    zip: Optional[str] = None


@dataclass
class Person:
    """A person.

    Attributes:
        name: the full name
    """

    name: str
    age: int
    addresses: List[Address] = field(default_factory=list)
    nickname: Optional[str] = None


class Point(TypedDict):
    x: int
    y: int


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


SCHEMA = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "year": {"type": "integer"}},
    "required": ["title", "year"],
}

PERSON_JSON = {"name": "Ann", "age": 41, "addresses": [{"city": "Oslo"}], "nickname": None}
PERSON = Person("Ann", 41, [Address("Oslo")], None)

# (output_type, the JSON value the model gives, the value ask returns)
KINDS = [
    pytest.param(SCHEMA, {"title": "Dune", "year": 1965}, {"title": "Dune", "year": 1965}, id="schema-dict"),
    pytest.param(Person, PERSON_JSON, PERSON, id="dataclass"),
    pytest.param(Point, {"x": 1, "y": 2}, {"x": 1, "y": 2}, id="typeddict"),
    pytest.param(Color, "green", Color.GREEN, id="enum"),
    pytest.param(Literal["yes", "no"], "no", "no", id="literal"),
    pytest.param(str, "hello", "hello", id="str"),
    pytest.param(int, 42, 42, id="int"),
    pytest.param(float, 2.5, 2.5, id="float"),
    pytest.param(bool, True, True, id="bool"),
    pytest.param(List[Address], [{"city": "Rome"}], [Address("Rome")], id="list-of-dataclass"),
]


def _wire(output_type: Any, value: Any) -> Dict[str, Any]:
    """What the model sends for ``value``: the object itself, or ``{"result": value}``."""
    return value if not output_spec(output_type).wrapped else {"result": value}


def _native(scripted: ScriptedModel) -> ScriptedModel:
    scripted.model.compat = {"supportsStructuredOutputs": True}
    return scripted


def _assert_valid_transcript(messages: List[Any]) -> None:
    """Every tool call has its result right after its assistant message (providers require it)."""
    for index, message in enumerate(messages):
        if message.role == "assistant" and message.tool_calls:
            results = {
                m.tool_call_id
                for m in messages[index + 1 : index + 1 + len(message.tool_calls)]
                if m.role == "toolResult"
            }
            assert results == {c.id for c in message.tool_calls}


# --------------------------------------------------------------------------- output types


@pytest.mark.parametrize("output_type,answer,expected", KINDS)
def test_every_kind_of_output_type_in_tool_mode(output_type, answer, expected):
    scripted = ScriptedModel([tool_call(FINAL_RESULT_TOOL, _wire(output_type, answer))])
    agent = Agent(scripted.model)
    assert agent.ask("q", output_type) == expected
    sent = {t.name: t for t in scripted.contexts[0].tools}
    assert sent[FINAL_RESULT_TOOL].parameters["type"] == "object"
    assert "output_schema" not in scripted.options[0]
    assert [t.name for t in agent.state.tools] == []  # the final-result tool was for that run only


@pytest.mark.parametrize("output_type,answer,expected", KINDS)
def test_every_kind_of_output_type_in_native_mode(output_type, answer, expected):
    scripted = _native(ScriptedModel([text(json.dumps(_wire(output_type, answer)))]))
    agent = Agent(scripted.model)
    assert agent.ask("q", output_type) == expected
    assert scripted.options[0]["output_schema"] == output_spec(output_type).wire_schema
    assert FINAL_RESULT_TOOL not in [t.name for t in scripted.contexts[0].tools]
    assert agent.options.output_schema is None  # not left behind for the next prompt()


def test_schemas_of_python_types_come_from_the_tool_schema_code():
    person = output_spec(Person)
    assert not person.wrapped and person.wire_schema["required"] == ["name", "age"]
    assert person.wire_schema["additionalProperties"] is False  # a dataclass takes no other keys
    assert person.wire_schema["properties"]["name"]["description"] == "the full name"
    address = person.wire_schema["properties"]["addresses"]["items"]
    assert address["additionalProperties"] is False and address["required"] == ["city"]
    assert person.wire_schema["properties"]["nickname"] == {"type": ["string", "null"]}
    number = output_spec(int)
    assert number.wrapped and number.wire_schema["properties"] == {"result": {"type": "integer"}}
    assert output_spec(SCHEMA).schema == SCHEMA  # a user's schema is sent as given


def test_a_markdown_fenced_answer_is_accepted():
    scripted = _native(ScriptedModel([text('```json\n{"x": 1, "y": 2}\n```')]))
    assert Agent(scripted.model).ask("q", Point) == {"x": 1, "y": 2}


# (output_type, a final text answer, the value ask returns): JSON text of a non-object type is
# the value itself; the {"result": ...} wire object is accepted too
TEXT_ANSWERS = [
    pytest.param(int, "42", 42, id="int"),
    pytest.param(List[str], '["a", "b"]', ["a", "b"], id="list-of-str"),
    pytest.param(str, '"hi"', "hi", id="str-json"),
    pytest.param(bool, "true", True, id="bool"),
    pytest.param(int, '{"result": 42}', 42, id="int-wire-object"),
    pytest.param(List[str], '```json\n["a"]\n```', ["a"], id="fenced"),
]


@pytest.mark.parametrize("native", [False, True], ids=["tool", "native"])
@pytest.mark.parametrize("output_type,answer,expected", TEXT_ANSWERS)
def test_a_json_text_answer_of_a_non_object_type_is_the_value(output_type, answer, expected, native):
    scripted = ScriptedModel([text(answer), text("never asked")])
    if native:
        _native(scripted)
    agent = Agent(scripted.model)
    assert agent.ask("q", output_type) == expected
    assert scripted.calls == 1  # accepted at once, no correction sent
    assert [m.role for m in agent.state.messages] == ["user", "assistant"]


def test_a_plain_text_answer_of_a_string_type_is_the_string():
    scripted = ScriptedModel([text("  Paris\n"), text("no"), text("42")])
    agent = Agent(scripted.model)
    assert agent.ask("Capital of France?", str) == "Paris"
    assert agent.ask("Is it raining?", Literal["yes", "no"]) == "no"
    assert agent.ask("A number as text?", str) == "42"  # JSON, but not a string: the text itself
    assert scripted.calls == 3


@pytest.mark.parametrize("answer", ["3.10", "1.0", "1e3", "```\n3.10\n```"])
def test_a_number_answer_of_a_string_type_is_the_text_as_written(answer):
    """``ask("Latest Python?", str)`` answered ``3.10`` returned "3.1": the text was read as a
    JSON number first, and the number coerced back to a string."""
    scripted = ScriptedModel([text(answer), text(answer)])
    agent = Agent(scripted.model)
    expected = answer.strip("`\n")
    assert agent.ask("Latest Python?", str) == expected
    assert agent.ask("Latest Python?", Optional[str]) == expected
    assert scripted.calls == 2
    assert output_spec({"type": ["string", "number"]}).check_text("3.10") == 3.1  # it takes numbers: one


def test_an_answer_nested_too_deeply_to_parse_is_corrected_not_a_failed_run():
    """A model stuck repeating ``[`` made json.loads raise RecursionError out of the turn hook:
    the run failed (an error message after the answer) instead of the answer being corrected."""
    scripted = ScriptedModel([text("[" * 100_000), text("[1]")])  # past every version's parser limit
    agent = Agent(scripted.model)
    assert agent.ask("q", List[int]) == [1]
    assert [m.role for m in agent.state.messages] == ["user", "assistant", "user", "assistant"]
    assert "nests too deeply" in agent.state.messages[2].text


@pytest.mark.parametrize("native", [False, True], ids=["tool", "native"])
def test_an_answer_of_nan_infinity_or_1e999_is_corrected_not_returned(native):
    """Python's parser takes NaN, Infinity and 1e999 (inf), which are not JSON: the text answer
    ``{"name": NaN, ...}`` returned Person(name='nan') (the float coerced to a string), a float
    answer was nan, and ``agentcore run --schema`` printed them as invalid JSON. In tool mode the
    same arguments were already refused (they become null)."""
    answers = ['{"name": NaN, "age": 3}', '{"name": "Ada", "age": Infinity}', '{"name": "Ada", "age": 1e999}']
    scripted = ScriptedModel([text(a) for a in answers] + [text('{"name": "Ada", "age": 3}')])
    agent = Agent((_native(scripted) if native else scripted).model)
    assert agent.ask("q", Person, retries=3) == Person("Ada", 3)
    corrections = [m.text for m in agent.state.messages if m.role == "user"][1:]
    assert ["NaN is not a JSON value" in corrections[0], "Infinity is not" in corrections[1]] == [True, True]
    assert "1e999 is too large" in corrections[2]
    scripted = ScriptedModel([text("NaN"), text("-Infinity")])
    agent = Agent((_native(scripted) if native else scripted).model)
    with pytest.raises(OutputValidationError, match="-Infinity is not a JSON value"):
        agent.ask("q", float, retries=1)
    assert output_spec(str).check_text("NaN") == "NaN"  # a string type: the text itself


class _Unprintable(ValueError):
    def __str__(self) -> str:
        raise RuntimeError("no text")


@dataclass
class Positive:
    n: int

    def __post_init__(self) -> None:
        if self.n < 0:
            raise _Unprintable()


@pytest.mark.parametrize("native", [False, True], ids=["tool", "native"])
def test_a_refused_answer_whose_error_cannot_be_printed_is_corrected_not_a_failed_run(native):
    """The output type's constructor raised an exception whose __str__ raises: formatting it for
    the correction raised out of the turn hook and the run failed (AskError)."""
    if native:
        scripted = _native(ScriptedModel([text('{"n": -1}'), text('{"n": 2}')]))
    else:
        scripted = ScriptedModel([tool_call(FINAL_RESULT_TOOL, {"n": -1}), tool_call(FINAL_RESULT_TOOL, {"n": 2})])
    agent = Agent(scripted.model)
    assert agent.ask("q", Positive) == Positive(2)
    correction = agent.state.messages[2]
    assert correction.role == ("user" if native else "toolResult") and len(agent.state.messages) == 4 + (not native)
    assert "_Unprintable" in correction.content[0].text


def test_a_plain_text_answer_outside_a_literal_is_corrected():
    scripted = ScriptedModel([text("maybe"), tool_call(FINAL_RESULT_TOOL, {"result": "yes"})])
    agent = Agent(scripted.model)
    assert agent.ask("Is it raining?", Literal["yes", "no"]) == "yes"
    correction = agent.state.messages[2].text
    assert "result: must be equal to one of the allowed values" in correction
    assert "not JSON" not in correction


def test_a_text_answer_that_fails_gets_a_correction_the_model_can_act_on():
    scripted = ScriptedModel([text('"four"'), tool_call(FINAL_RESULT_TOOL, {"result": 4})])
    agent = Agent(scripted.model)
    assert agent.ask("2+2?", int) == 4
    correction = agent.state.messages[2]
    assert correction.role == "user"
    assert "result: must be integer" in correction.text and "root" not in correction.text
    assert f'Call the {FINAL_RESULT_TOOL} tool with the corrected answer as its "result" argument' in correction.text


def test_retries_exhausted_on_text_answers_report_the_value_errors():
    scripted = ScriptedModel([text('["a", {"b": 1}]'), text('["a", {"b": 2}]')])
    with pytest.raises(OutputValidationError) as caught:
        Agent(scripted.model).ask("q", List[str], retries=1)
    assert caught.value.errors == ["result/1: must be string"] and caught.value.raw == '["a", {"b": 2}]'


@pytest.mark.parametrize(
    "output_type,null_answer,good_answer,expected",
    [
        pytest.param(int, "null", "7", 7, id="int"),
        pytest.param(bool, "null", "true", True, id="bool"),
        pytest.param(Person, '{"name": "Ann", "age": null}', '{"name": "Ann", "age": 40}', None, id="dataclass"),
        pytest.param(Person, '{"name": null, "age": 3}', '{"name": "Bo", "age": 3}', None, id="dataclass-str"),
        pytest.param({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
                     '{"n": null}', '{"n": 1}', {"n": 1}, id="schema-dict"),
    ],
)  # fmt: skip
def test_a_null_answer_is_corrected_not_made_an_empty_value(output_type, null_answer, good_answer, expected):
    """``ask(int)`` answered ``null`` returned 0 (``bool``: False, a dataclass field: 0 or ""), as
    tool arguments are coerced, without a correction: a value the model never gave."""
    scripted = ScriptedModel([text(null_answer), text(good_answer)])
    agent = Agent(scripted.model)
    value = agent.ask("q", output_type)
    assert scripted.calls == 2  # the null went back to the model
    assert "must be" in agent.state.messages[2].text  # the correction names the problem
    if expected is not None:
        assert value == expected
    else:
        assert isinstance(value, Person) and value.age in (3, 40) and value.name in ("Ann", "Bo")
    nullable = ScriptedModel([text('{"name": "Cy", "age": 5, "nickname": null}')])
    assert Agent(nullable.model).ask("q", Person).nickname is None  # Optional: null is a value


def test_a_null_in_the_final_result_call_is_corrected_not_made_an_empty_value():
    """The loop validated final_result's arguments with the tool-argument coercion first, so
    ``{"name": "Ann", "age": null}`` became ``age=0`` before the output type saw it."""
    scripted = ScriptedModel(
        [
            tool_call(FINAL_RESULT_TOOL, {"name": "Ann", "age": None}),
            tool_call(FINAL_RESULT_TOOL, {"name": "Ann", "age": 40}),
        ]
    )
    agent = Agent(scripted.model)
    assert agent.ask("q", Person).age == 40
    refused = agent.state.messages[2]
    assert refused.role == "toolResult" and refused.is_error and "age: must be integer" in refused.content[0].text
    wrapped = ScriptedModel(
        [tool_call(FINAL_RESULT_TOOL, {"result": None}), tool_call(FINAL_RESULT_TOOL, {"result": 3})]
    )
    assert Agent(wrapped.model).ask("q", int) == 3 and wrapped.calls == 2
    optional = ScriptedModel([tool_call(FINAL_RESULT_TOOL, {"result": None})])
    assert Agent(optional.model).ask("q", Optional[int]) is None  # null is a value of Optional[int]


def test_a_bad_value_inside_an_optional_field_is_named_for_the_model():
    """``Optional[Address]``-style fields failed with only ``address: must match a schema in
    anyOf``; the model was not told which value to fix and spent its retries guessing."""

    @dataclass
    class Order:
        item: str
        shipping: Optional[Point] = None

    scripted = ScriptedModel([tool_call(FINAL_RESULT_TOOL, {"item": "pen", "shipping": {"x": "far", "y": 2}})])
    agent = Agent(scripted.model)
    with pytest.raises(OutputValidationError) as caught:
        agent.ask("q", Order, retries=0)
    assert caught.value.errors[0] == "shipping/x: must be integer"
    assert "  - shipping/x: must be integer" in agent.state.messages[-1].content[0].text


def test_a_number_string_too_long_for_python_is_corrected_not_a_failed_run():
    """``int()`` refuses more than 4300 digits: the coercion's ValueError escaped the ask's turn
    hook and failed the run (AskError) instead of going back to the model."""
    digits = "9" * 5000
    native = _native(ScriptedModel([text(json.dumps(digits)), text("42")]))
    assert Agent(native.model).ask("q", int) == 42 and native.calls == 2
    tool_mode = ScriptedModel(
        [tool_call(FINAL_RESULT_TOOL, {"result": digits}), tool_call(FINAL_RESULT_TOOL, {"result": 42})]
    )
    agent = Agent(tool_mode.model)
    assert agent.ask("q", int) == 42
    assert "result: must be integer" in agent.state.messages[2].content[0].text


def test_a_draft_07_schema_of_a_non_object_value_keeps_its_draft():
    """Wrapping an array schema as ``{"result": ...}`` dropped its ``$schema``: a draft-07 tuple
    ``items`` was then read as draft 2020-12, an invalid schema, and every answer failed."""
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "array",
        "items": [{"type": "string"}, {"type": "integer"}],
        "additionalItems": False,
    }
    assert output_spec(schema).wire_schema["$schema"] == schema["$schema"]
    scripted = ScriptedModel([tool_call(FINAL_RESULT_TOOL, {"result": ["Dune", "1965"]})])
    assert Agent(scripted.model).ask("q", schema, retries=0) == ["Dune", 1965]
    native = _native(ScriptedModel([text('["Dune", 1965, "extra"]'), text('["Dune", 1965]')]))
    agent = Agent(native.model)
    assert agent.ask("q", schema) == ["Dune", 1965] and native.calls == 2
    assert "- result: Additional items are not allowed ('extra' was unexpected)" in agent.state.messages[2].text


def test_a_recursive_schema_of_a_non_object_value_still_refers_to_itself():
    """Wrapped as ``{"result": ...}``, a ``"$ref": "#"`` pointed at the wrapper object: a nested
    list could never validate, whatever the model answered."""
    nested = {"type": "array", "items": {"anyOf": [{"type": "integer"}, {"$ref": "#"}]}}
    scripted = ScriptedModel([tool_call(FINAL_RESULT_TOOL, {"result": [1, [2, ["3"]]]})])
    assert Agent(scripted.model).ask("q", nested, retries=0) == [1, [2, [3]]]
    native = _native(ScriptedModel([text('[1, [2, [{"x": 1}]]]'), text("[[4]]")]))
    agent = Agent(native.model)
    assert agent.ask("q", nested) == [[4]] and native.calls == 2
    assert "- result/1/1/0: must be integer" in agent.state.messages[2].text
    assert output_spec(nested).schema == nested  # the value's own schema is left as it is


def test_a_dataclass_whose_field_types_do_not_resolve_is_refused_naming_them():
    """A field annotated with a class local to a function (string annotations) raised a bare
    NameError out of ``ask()``."""

    @dataclass
    class Line:
        qty: int

    @dataclass
    class Order:  # this module's annotations are strings: "Line" is no module-level name
        line: Line

    scripted = ScriptedModel([text("never")])
    with pytest.raises(TypeError, match=r"output_type .*Order.* no JSON schema: .*name 'Line' is not defined"):
        Agent(scripted.model).ask("q", Order)
    assert scripted.calls == 0


def test_bad_output_types_fail_before_any_request():
    scripted = ScriptedModel([text("never")])
    agent = Agent(scripted.model)
    with pytest.raises(TypeError, match="has no JSON schema"):
        agent.ask("q", object())
    with pytest.raises(ValueError, match="not a valid JSON schema"):
        agent.ask("q", {"type": "no-such-type"})
    with pytest.raises(ValueError, match="retries"):
        agent.ask("q", int, retries=-1)
    assert scripted.calls == 0 and agent.state.messages == []


def test_pydantic_model():
    pydantic = pytest.importorskip("pydantic", reason="pydantic is not installed (it is optional)")

    class Movie(pydantic.BaseModel):
        title: str
        year: int

        @pydantic.field_validator("year")
        @classmethod
        def not_future(cls, value: int) -> int:
            if value > 2100:
                raise ValueError("year is in the future")
            return value

    scripted = ScriptedModel(
        [
            tool_call(FINAL_RESULT_TOOL, {"title": "Dune", "year": 3000}),
            tool_call(FINAL_RESULT_TOOL, {"title": "Dune", "year": 1965}),
        ]
    )
    movie = Agent(scripted.model).ask("q", Movie)
    assert isinstance(movie, Movie) and (movie.title, movie.year) == ("Dune", 1965)
    correction = scripted.contexts[1].messages[-1].text
    assert "year is in the future" in correction  # a pydantic validator
    assert "attempt(s)" not in correction  # the problems alone, not the text of a final failure


@dataclass
class Cat:
    meows: int


@dataclass
class Dog:
    barks: int


@dataclass
class Pets:
    pets: List[Union[Cat, Dog]]
    best: Union[float, int, Color] = 0


def test_union_members_become_their_classes():
    """``List[Union[Cat, Dog]]`` items stayed dicts (as did a top-level union of classes)."""
    scripted = ScriptedModel(
        [
            tool_call(FINAL_RESULT_TOOL, {"pets": [{"meows": 1}, {"barks": 2}], "best": 3}),
            tool_call(FINAL_RESULT_TOOL, {"pets": [], "best": "red"}),
            tool_call(FINAL_RESULT_TOOL, {"result": {"barks": 5}}),
        ]
    )
    agent = Agent(scripted.model)
    pets = agent.ask("q", Pets)
    assert pets.pets == [Cat(1), Dog(2)] and pets.best == 3 and type(pets.best) is int  # JSON's own scalar
    assert agent.ask("q", Pets).best is Color.RED
    assert agent.ask("q", Union[Cat, Dog]) == Dog(5)


@dataclass
class Note:
    kind: Literal["note"]
    body: str


@dataclass
class Score:
    kind: Literal["score"]
    body: int


def test_an_answer_for_a_later_class_of_a_union_is_accepted():
    """Coercion went into the first object branch only: ``{"kind": "score", "body": 5}`` got
    body "5" (for Note) and matched neither class; every such answer failed."""
    scripted = ScriptedModel([tool_call(FINAL_RESULT_TOOL, {"result": {"kind": "score", "body": 5}})])
    agent = Agent(scripted.model)
    assert agent.ask("q", Union[Note, Score], retries=0) == Score("score", 5)
    assert output_spec(Union[Note, Score]).check_text('{"kind": "score", "body": 5}') == Score("score", 5)


def test_pydantic_models_inside_other_types():
    pydantic = pytest.importorskip("pydantic", reason="pydantic is not installed (it is optional)")

    class Street(pydantic.BaseModel):
        name: str

    class Addr(pydantic.BaseModel):
        city: str
        street: Street

    scripted = ScriptedModel(
        [
            tool_call(FINAL_RESULT_TOOL, {"result": [{"city": "Oslo", "street": {"name": "Main"}}]}),
            tool_call(FINAL_RESULT_TOOL, {"result": None}),
        ]
    )
    agent = Agent(scripted.model)
    found = agent.ask("q", List[Addr])  # refused before anything ran: "has no JSON schema"
    assert found == [Addr(city="Oslo", street=Street(name="Main"))] and isinstance(found[0].street, Street)
    assert agent.ask("q", Optional[Addr]) is None
    assert "$ref" not in json.dumps(output_spec(List[Addr]).wire_schema)  # inlined: resolvable anywhere


def test_ask_never_imports_pydantic_for_other_types():
    code = (
        "import sys\nfrom dataclasses import dataclass\nfrom agentcore import Agent\n"
        "from agentcore.testing import ScriptedModel, tool_call\n"
        "@dataclass\nclass P:\n    x: int\n"
        "s = ScriptedModel([tool_call('final_result', {'x': 1})])\n"
        "assert Agent(s.model).ask('q', P) == P(1)\n"
        "assert 'pydantic' not in sys.modules, 'pydantic was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --------------------------------------------------------------------------- retries


def test_first_two_answers_fail_validation_then_the_third_is_returned():
    scripted = ScriptedModel(
        [
            tool_call(FINAL_RESULT_TOOL, {"name": "Ann"}),  # age missing
            tool_call(FINAL_RESULT_TOOL, {"name": "Ann", "age": "old"}),  # not an integer
            tool_call(FINAL_RESULT_TOOL, PERSON_JSON),
        ]
    )
    agent = Agent(scripted.model)
    assert agent.ask("Who?", Person) == PERSON
    assert scripted.calls == 3
    first_error = scripted.contexts[1].messages[-1]
    assert first_error.role == "toolResult" and first_error.is_error
    assert "must have required property 'age'" in first_error.text
    assert "age: must be integer" in scripted.contexts[2].messages[-1].text
    _assert_valid_transcript(agent.state.messages)
    assert agent.state.messages[-1].role == "toolResult" and not agent.state.messages[-1].is_error


def test_native_answers_that_fail_go_back_as_a_user_message():
    scripted = _native(ScriptedModel([text("I think Ann"), text('{"x": 1}'), text('{"x": 1, "y": 2}')]))
    agent = Agent(scripted.model)
    assert agent.ask("q", Point) == {"x": 1, "y": 2}
    roles = [m.role for m in agent.state.messages]
    assert roles == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert "the answer is not JSON" in agent.state.messages[2].text
    assert "must have required property 'y'" in agent.state.messages[4].text
    assert "Reply again with only the corrected JSON" in agent.state.messages[4].text


@pytest.mark.parametrize("native", [False, True], ids=["tool", "native"])
def test_retries_exhausted_raise_output_validation_error(native):
    bad = {"x": "one", "y": 2}
    answers = [text(json.dumps(bad)) if native else tool_call(FINAL_RESULT_TOOL, bad) for _ in range(2)]
    scripted = ScriptedModel(answers + [text("never asked")])
    if native:
        _native(scripted)
    agent = Agent(scripted.model)
    with pytest.raises(OutputValidationError) as caught:
        agent.ask("q", Point, retries=1)
    assert scripted.calls == 2  # the first answer and one retry
    assert caught.value.errors == ["x: must be integer"]
    assert json.loads(caught.value.raw) == bad and caught.value.attempts == 2
    _assert_valid_transcript(agent.state.messages)
    agent.prompt("still usable")  # the agent is idle, its transcript valid for the provider
    assert agent.state.messages[-1].text == "never asked"


def test_retries_zero_raise_on_the_first_failure():
    scripted = ScriptedModel(["plain text"])
    with pytest.raises(OutputValidationError, match="not JSON"):
        Agent(scripted.model).ask("q", int, retries=0)


def test_a_text_answer_in_tool_mode_asks_for_the_tool():
    scripted = ScriptedModel(["It is 4.", tool_call(FINAL_RESULT_TOOL, {"result": 4})])
    agent = Agent(scripted.model)
    assert agent.ask("2+2?", int) == 4
    assert f"Call the {FINAL_RESULT_TOOL} tool" in agent.state.messages[2].text


# --------------------------------------------------------------------------- tools, abort, failure


def test_tools_stay_usable_during_an_ask():
    @tool
    def lookup(name: str) -> str:
        """Look a person up."""
        return f"{name} is 41"

    scripted = ScriptedModel(
        [tool_call("lookup", {"name": "Ann"}), tool_call(FINAL_RESULT_TOOL, {"name": "Ann", "age": 41})]
    )
    agent = Agent(scripted.model, tools=[lookup])
    assert agent.ask("How old is Ann?", Person) == Person("Ann", 41)
    assert [t.name for t in scripted.contexts[0].tools] == ["lookup", FINAL_RESULT_TOOL]
    assert scripted.contexts[1].messages[-1].text == "Ann is 41"
    assert [t.name for t in agent.state.tools] == ["lookup"]


def test_tools_in_native_mode_then_the_json_answer():
    @tool
    def lookup(name: str) -> str:
        """Look a person up."""
        return "41"

    scripted = _native(ScriptedModel([tool_call("lookup", {"name": "Ann"}), text('{"result": 41}')]))
    assert Agent(scripted.model, tools=[lookup]).ask("q", int) == 41
    assert all(o["output_schema"]["properties"] == {"result": {"type": "integer"}} for o in scripted.options)


def test_an_aborted_ask_raises_ask_error_and_leaves_the_transcript_valid():
    holder: Dict[str, Agent] = {}

    def stop(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        holder["agent"].abort("user pressed stop")
        return AgentToolResult([TextContent("stopped")])

    from agentcore import AgentTool

    stopper = AgentTool("stop", "stop", {"type": "object"}, stop)
    scripted = ScriptedModel([tool_call("stop", {}), tool_call(FINAL_RESULT_TOOL, {"result": 1})])
    agent = holder["agent"] = Agent(scripted.model, tools=[stopper])
    with pytest.raises(AskError, match="aborted.*user pressed stop") as caught:
        agent.ask("q", int)
    assert caught.value.stop_reason == "aborted"
    _assert_valid_transcript(agent.state.messages)
    assert agent.state.messages[-1].stop_reason == "aborted" and scripted.calls == 1


@pytest.mark.parametrize("retries", [0, 2])
def test_an_abort_that_keeps_final_result_from_running_is_no_failed_attempt(retries):
    """An abort in a batch before its final_result call (a sequential tool) counted as a failed
    answer: on the last retry ask raised OutputValidationError("the final_result call failed")
    and the run ended without its aborted message."""
    holder: Dict[str, Agent] = {}

    def stop(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        holder["agent"].abort("user pressed stop")
        return AgentToolResult([TextContent("stopped")])

    from agentcore import AgentTool
    from agentcore.testing import call, response

    stopper = AgentTool("stop", "stop", {"type": "object"}, stop, execution_mode="sequential")
    scripted = ScriptedModel([response(call("stop", {}), call(FINAL_RESULT_TOOL, {"result": 1}))])
    agent = holder["agent"] = Agent(scripted.model, tools=[stopper])
    with pytest.raises(AskError, match="aborted.*user pressed stop") as caught:
        agent.ask("q", int, retries=retries)
    assert caught.value.stop_reason == "aborted"
    assert agent.state.messages[-1].stop_reason == "aborted" and scripted.calls == 1


def test_the_agents_own_turn_hook_neither_hides_an_answer_nor_stops_when_async():
    """The ask chained the agent's should_stop_after_turn before checking the turn's answer, and
    called it without awaiting: an ``async def`` hook's coroutine counted as "stop" after the first
    turn, and a hook ending the run on the turn that answered (a budget) lost the answer."""
    turns: List[int] = []

    async def keep_going(ctx: Any) -> bool:
        turns.append(len(ctx.new_messages))
        return False

    @tool
    def lookup(q: str) -> str:
        """Look up."""
        return "42"

    scripted = ScriptedModel([tool_call("lookup", {"q": "x"}), tool_call(FINAL_RESULT_TOOL, {"result": 42})])
    agent = Agent(scripted.model, tools=[lookup], should_stop_after_turn=keep_going)
    assert agent.ask("q", int) == 42 and len(turns) == 2
    native = _native(ScriptedModel([text("42")]))
    budget_spent = Agent(native.model, should_stop_after_turn=lambda ctx: True)
    assert budget_spent.ask("q", int) == 42
    stopped = Agent(_native(ScriptedModel([text("many")])).model, should_stop_after_turn=lambda ctx: True)
    with pytest.raises(AskError, match="should_stop_after_turn"):
        stopped.ask("q", int)


def test_a_tool_batch_that_ends_the_run_is_named_not_blamed_on_a_hook():
    """A tool result with terminate=True ended the ask's run; AskError said a
    should_stop_after_turn hook ended it, and the agent had none to look for."""

    @tool
    def handoff() -> AgentToolResult:
        """Hand the task to a human."""
        return AgentToolResult([TextContent("handed off")], terminate=True)

    scripted = ScriptedModel([tool_call("handoff", {}), text("never asked")])
    with pytest.raises(AskError, match=r"terminate=True") as caught:
        Agent(scripted.model, tools=[handoff]).ask("q", int)
    assert "should_stop_after_turn" not in str(caught.value) and scripted.calls == 1


def test_a_failed_run_raises_ask_error():
    scripted = ScriptedModel([error("upstream is down")])
    agent = Agent(scripted.model)
    with pytest.raises(AskError, match="failed.*upstream is down") as caught:
        agent.ask("q", int)
    assert caught.value.stop_reason == "error" and not agent.state.is_streaming


# --------------------------------------------------------------------------- approvals


LOOKUPS: List[str] = []  # the queries lookup ran


@tool(requires_approval=True)
def lookup(q: str) -> str:
    """Look a fact up."""
    LOOKUPS.append(q)
    return "42"


def _pausing(*answers: Any, native: bool = False) -> Tuple[Agent, ScriptedModel]:
    """An agent whose model first calls ``lookup`` (id L1, approval required), then ``answers``."""
    LOOKUPS.clear()
    scripted = ScriptedModel([tool_call("lookup", {"q": "x"}, id="L1"), *answers])
    if native:
        _native(scripted)
    return Agent(scripted.model, tools=[lookup]), scripted


@pytest.mark.parametrize("native", [False, True], ids=["tool", "native"])
def test_an_ask_that_pauses_for_approval_raises_ask_paused_and_resume_finishes_it(native):
    answer = text('{"result": 42}') if native else tool_call(FINAL_RESULT_TOOL, {"result": 42})
    agent, scripted = _pausing(answer, native=native)
    with pytest.raises(AskPaused) as caught:
        agent.ask("what?", int)
    paused = caught.value
    assert isinstance(paused, AskError) and paused.stop_reason == "toolUse"
    assert [p.tool_call_id for p in paused.pending_approvals] == ["L1"]
    assert "paused for approval of lookup L1" in str(paused) and "agent.approve(id)" in str(paused)
    assert "should_stop_after_turn" not in str(paused)
    assert LOOKUPS == [] and scripted.calls == 1
    agent.approve("L1")
    assert paused.resume() == 42
    assert LOOKUPS == ["x"] and scripted.calls == 2
    if native:
        assert scripted.options[1]["output_schema"] == output_spec(int).wire_schema
    else:
        assert [t.name for t in scripted.contexts[1].tools] == ["lookup", FINAL_RESULT_TOOL]
    assert scripted.contexts[1].messages[-1].text == "42"  # the approved call's result
    assert agent.pending_approvals == [] and [t.name for t in agent.state.tools] == ["lookup"]
    assert agent.options.output_schema is None
    _assert_valid_transcript(agent.state.messages)
    assert paused.resume() == 42  # the answer again; nothing runs
    assert scripted.calls == 2


def test_a_denied_call_goes_back_to_the_model_and_resume_returns_its_answer():
    agent, scripted = _pausing(tool_call(FINAL_RESULT_TOOL, {"result": 7}))
    with pytest.raises(AskPaused) as caught:
        agent.ask("what?", int)
    agent.deny("L1", "not today")
    assert caught.value.resume() == 7
    assert LOOKUPS == []
    result = scripted.contexts[1].messages[-1]
    assert result.role == "toolResult" and result.is_error and "not today" in result.text
    _assert_valid_transcript(agent.state.messages)


def test_resume_before_a_decision_is_refused_and_runs_nothing():
    agent, scripted = _pausing(tool_call(FINAL_RESULT_TOOL, {"result": 42}))
    with pytest.raises(AskPaused) as caught:
        agent.ask("what?", int)
    with pytest.raises(RuntimeError, match=r"still wait for a decision \(lookup L1\).*then resume\(\)"):
        caught.value.resume()
    assert scripted.calls == 1 and [p.tool_call_id for p in agent.pending_approvals] == ["L1"]
    agent.approve("L1")
    assert caught.value.resume() == 42


def test_a_resumed_ask_that_pauses_again_raises_a_new_ask_paused():
    agent, scripted = _pausing(
        tool_call("lookup", {"q": "y"}, id="L2"),
        "It is 42.",  # a text answer: corrected, counted against the same retries
        tool_call(FINAL_RESULT_TOOL, {"result": 42}),
    )
    with pytest.raises(AskPaused) as first:
        agent.ask("what?", int, retries=1)
    agent.approve("L1")
    with pytest.raises(AskPaused) as second:
        first.value.resume()
    assert [p.tool_call_id for p in second.value.pending_approvals] == ["L2"]
    agent.approve("L2")
    assert second.value.resume() == 42
    assert LOOKUPS == ["x", "y"] and scripted.calls == 4


def test_resume_after_continue_settled_the_calls_is_refused():
    agent, _ = _pausing(text("plain"), text("never asked"))
    with pytest.raises(AskPaused) as caught:
        agent.ask("what?", int)
    agent.approve("L1")
    agent.continue_()  # a plain run: the ask's answer tool is not part of it
    with pytest.raises(RuntimeError, match=r"resume\(\): no tool call waits for approval any more"):
        caught.value.resume()


def test_resume_ask_finishes_a_paused_ask_from_its_session(tmp_path):
    path = str(tmp_path / "s.jsonl")
    LOOKUPS.clear()
    first = ScriptedModel([tool_call("lookup", {"q": "x"}, id="L1")])
    with Session.create(path) as session:
        with pytest.raises(AskPaused):
            Agent(first.model, tools=[lookup], session=session).ask("what?", int)
    later = ScriptedModel([tool_call(FINAL_RESULT_TOOL, {"result": 42})])
    with Session.open(path) as session:  # as another process would, the next day
        again = Agent(later.model, tools=[lookup], session=session)
        assert [p.tool_call_id for p in again.pending_approvals] == ["L1"]
        again.approve("L1")
        assert resume_ask(again, int) == 42
        assert [t.name for t in later.contexts[0].tools] == ["lookup", FINAL_RESULT_TOOL]
        _assert_valid_transcript(again.state.messages)
    assert LOOKUPS == ["x"]


def test_ask_while_a_run_is_active_is_refused():
    import threading

    entered, release = threading.Event(), threading.Event()

    def slow(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        entered.set()
        release.wait()
        return AgentToolResult([TextContent("ok")])

    from agentcore import AgentTool

    scripted = ScriptedModel([tool_call("slow", {}), "done"])
    agent = Agent(scripted.model, tools=[AgentTool("slow", "slow", {"type": "object"}, slow)])
    agent.prompt("go", wait=False)
    entered.wait()
    try:
        with pytest.raises(RuntimeError, match="already processing"):
            agent.ask("q", int)
    finally:
        release.set()
        agent.wait_for_idle()
    assert "_resolve_tools" not in vars(agent) and "_build_loop_config" not in vars(agent)


def test_events_and_session_records_are_those_of_a_prompt(tmp_path):
    path = tmp_path / "s.jsonl"
    scripted = ScriptedModel([tool_call(FINAL_RESULT_TOOL, {"x": 1}), tool_call(FINAL_RESULT_TOOL, {"x": 1, "y": 2})])
    with Session.create(str(path)) as session:
        agent = Agent(scripted.model, session=session)
        seen: List[str] = []
        agent.subscribe(lambda event: seen.append(event.type))
        assert agent.ask("q", Point) == {"x": 1, "y": 2}
        live = [m.to_dict() for m in agent.state.messages]
    assert seen[0] == "agent_start" and seen[-1] == "agent_end" and seen.count("agent_start") == 1
    assert seen.count("tool_execution_end") == 2
    with Session.open(str(path)) as again:
        restored = Agent(scripted.model, session=again)
        assert [m.to_dict() for m in restored.state.messages] == live
        assert [m.role for m in restored.state.messages] == [
            "user",
            "assistant",
            "toolResult",
            "assistant",
            "toolResult",
        ]


# --------------------------------------------------------------------------- native or tool


@pytest.mark.parametrize(
    "api,model_id,has_tools,native",
    [
        ("openai-completions", "gpt-4o", True, True),
        ("openai-responses", "gpt-5", True, True),
        ("google-generative-ai", "gemini-2.5-flash", False, True),
        ("google-generative-ai", "gemini-2.5-flash", True, False),
        ("anthropic-messages", "claude-sonnet-4-5-20250929", True, True),
        ("anthropic-messages", "claude-haiku-4-5", False, True),
        ("anthropic-messages", "claude-opus-4-1-20250805", False, True),
        ("anthropic-messages", "claude-sonnet-4-20250514", False, False),
        ("anthropic-messages", "claude-3-5-haiku-latest", False, False),
        ("bedrock-converse-stream", "x", False, False),
    ],
)
def test_native_structured_output_where_the_api_has_it(api, model_id, has_tools, native):
    assert supports_native(Model(id=model_id, api=api), has_tools) is native


def test_compat_flag_overrides_the_choice():
    local = Model(id="llama", api="openai-completions", compat={"supportsStructuredOutputs": False})
    assert supports_native(local, False) is False


def test_concise_schema():
    assert parse_concise_schema("name, age int, tags list") == {
        "type": "object",
        "additionalProperties": False,
        "required": ["name", "age", "tags"],
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
    }
    multi = parse_concise_schema("score float: from 0 to 1\nok bool")
    assert multi["properties"]["score"] == {"type": "number", "description": "from 0 to 1"}
    with pytest.raises(ValueError, match="unknown type 'date'"):
        parse_concise_schema("when date")


# --------------------------------------------------------------------------- the four wire APIs


def _openai_chat(answer: str) -> str:
    return sse(
        {"choices": [{"index": 0, "delta": {"content": answer}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        done=True,
    )


def _responses(answer: str) -> str:
    item = {"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress", "content": []}
    done = dict(item, status="completed", content=[{"type": "output_text", "text": answer, "annotations": []}])
    payloads = [
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {
            "type": "response.content_part.added",
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "part": {"type": "output_text", "text": ""},
        },
        {
            "type": "response.output_text.delta",
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "delta": answer,
        },
        {"type": "response.output_item.done", "output_index": 0, "item": done},
        {
            "type": "response.completed",
            "response": {
                "id": "resp_1",
                "status": "completed",
                "usage": {"input_tokens": 5, "output_tokens": 3, "total_tokens": 8},
            },
        },
    ]
    return "".join(f"event: {p['type']}\ndata: {json.dumps(p)}\n\n" for p in payloads)


def _anthropic(answer: Any) -> str:
    if isinstance(answer, str):
        start = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": answer}
        stop = "end_turn"
    else:
        start = {"type": "tool_use", "id": "toolu_1", "name": FINAL_RESULT_TOOL, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(answer)}
        stop = "tool_use"
    payloads = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "content": [],
                "usage": {"input_tokens": 5, "output_tokens": 1},
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": start},
        {"type": "content_block_delta", "index": 0, "delta": delta},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 3}},
        {"type": "message_stop"},
    ]
    return "".join(f"event: {p['type']}\ndata: {json.dumps(p)}\n\n" for p in payloads)


def _google(answer: Any) -> str:
    part = (
        {"text": answer} if isinstance(answer, str) else {"functionCall": {"name": FINAL_RESULT_TOOL, "args": answer}}
    )
    return sse(
        {
            "candidates": [{"content": {"parts": [part], "role": "model"}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 3},
        }
    )


WIRES = {
    "openai-completions": ("gpt-4o", "/v1", _openai_chat),
    "openai-responses": ("gpt-5", "/v1", _responses),
    "anthropic-messages": ("claude-sonnet-4-5", "", _anthropic),
    "google-generative-ai": ("gemini-2.5-flash", "/v1beta", _google),
}


def _native_schema(api: str, body: Dict[str, Any]) -> Dict[str, Any]:
    """The output schema as the request body of ``api`` carries it."""
    if api == "openai-completions":
        assert body["response_format"]["type"] == "json_schema"
        return body["response_format"]["json_schema"]["schema"]
    if api == "openai-responses":
        assert body["text"]["format"]["type"] == "json_schema" and body["text"]["format"]["name"]
        return body["text"]["format"]["schema"]
    if api == "anthropic-messages":
        assert body["output_config"]["format"]["type"] == "json_schema"
        return dict(body["output_config"]["format"]["schema"], title=None)
    assert body["generationConfig"]["responseMimeType"] == "application/json"
    return body["generationConfig"]["responseJsonSchema"]


@pytest.mark.parametrize("api", sorted(WIRES))
@pytest.mark.parametrize("output_type,answer,expected", KINDS)
def test_ask_on_each_wire_api_sends_the_native_schema(api, output_type, answer, expected):
    model_id, prefix, reply = WIRES[api]
    with ScriptedServer([Reply(body=reply(json.dumps(_wire(output_type, answer))), chunk_size=9)]) as server:
        model = Model(id=model_id, api=api, provider="test", base_url=server.url + prefix)
        assert Agent(model, api_key="k-test").ask("q", output_type) == expected
        body = server.requests[0].json()
    wire = output_spec(output_type).wire_schema
    sent = _native_schema(api, body)
    if api == "anthropic-messages":
        wire = dict(wire, title=None)
    assert sent == wire
    assert "tools" not in body or FINAL_RESULT_TOOL not in json.dumps(body["tools"])


@pytest.mark.parametrize(
    "api,model_id", [("google-generative-ai", "gemini-2.5-flash"), ("anthropic-messages", "claude-sonnet-4-20250514")]
)
def test_ask_falls_back_to_the_final_result_tool_on_the_wire(api, model_id):
    @tool
    def lookup(name: str) -> str:
        """Look a person up."""
        return "41"

    _, prefix, reply = WIRES[api]
    with ScriptedServer([Reply(body=reply({"name": "Ann", "age": 41}))]) as server:
        model = Model(id=model_id, api=api, provider="test", base_url=server.url + prefix)
        assert Agent(model, api_key="k-test", tools=[lookup]).ask("q", Person) == Person("Ann", 41)
        body = server.requests[0].json()
    assert "response_format" not in body and "output_config" not in body
    assert "responseJsonSchema" not in body.get("generationConfig", {})
    assert FINAL_RESULT_TOOL in json.dumps(body["tools"]) and "lookup" in json.dumps(body["tools"])


def test_images_go_with_the_prompt():
    from agentcore import ImageContent

    scripted = ScriptedModel([tool_call(FINAL_RESULT_TOOL, {"result": "cat"})])
    image = ImageContent(data="aGk=", mime_type="image/png")
    assert Agent(scripted.model).ask("What animal?", str, images=[image]) == "cat"
    assert scripted.contexts[0].messages[0].content[1] == image

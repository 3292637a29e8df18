"""SSE decoding and partial-JSON parsing (providers spec §5)."""

from __future__ import annotations

import json
import random

import pytest

from agentcore.providers.base import ProviderError, parse_json_event
from agentcore.providers.partial_json import PartialJsonParser, parse_streaming_json
from agentcore.providers.sse import SSEEvent, iter_sse


def _split(data: bytes, size: int):
    return [data[i : i + size] for i in range(0, len(data), size)]


def _events(chunks):
    return [(e.event, e.data, e.id) for e in iter_sse(chunks)]


# --------------------------------------------------------------------------- SSE


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_line_endings_any_chunking(newline, size):  # providers §5: \r\n, \n or \r
    text = newline.join(["event: a", "data: one", "", "data: two", "data: three", "", ""])
    assert _events(_split(text.encode(), size)) == [("a", "one", None), ("message", "two\nthree", None)]


def test_crlf_split_between_chunks_is_one_line_end():  # a \r at a chunk end waits for a possible \n
    chunks = [b"data: x\r", b"\n\r", b"\ndata: y\r\n\r\n"]
    assert _events(chunks) == [("message", "x", None), ("message", "y", None)]


def test_comments_and_keepalives_are_ignored():  # providers §5: ": OPENROUTER PROCESSING"
    body = b': OPENROUTER PROCESSING\n\ndata: {"a":1}\n: ping\n\n'
    assert _events([body]) == [("message", '{"a":1}', None)]


def test_final_event_without_blank_line_is_flushed():  # providers §5: flush at EOF
    assert _events([b"data: last"]) == [("message", "last", None)]
    assert _events([b"data: last\r"]) == [("message", "last", None)]


def test_field_parsing_rules():
    body = (
        b"data:nospace\n\n"  # no space after the colon
        b"data:  two spaces\n\n"  # only one space is stripped
        b"data\n\n"  # a bare field name is an empty value
        b"event: only-an-event\n\n"  # no data: nothing dispatched
        b"id: 7\ndata: with id\n\n"
        b"retry: 100\nunknown: x\ndata: after unknown\n\n"
    )
    assert _events([body]) == [
        ("message", "nospace", None),
        ("message", " two spaces", None),
        ("message", "", None),
        ("message", "with id", "7"),
        ("message", "after unknown", "7"),
    ]


def test_multibyte_utf8_straddling_chunks():
    text = "data: héllo wörld – 你好 🎉\n\n".encode()
    for size in (1, 2, 3, 5):
        assert _events(_split(text, size)) == [("message", "héllo wörld – 你好 🎉", None)]


def test_invalid_utf8_is_replaced_never_raises():  # synthetic: non-UTF-8 bytes
    body = b"data: ok \xff\xfe bytes\n\ndata: \xe4\xbd\n\n"
    events = _events(_split(body, 3))
    assert events[0] == ("message", "ok \ufffd\ufffd bytes", None)
    assert events[1][1].startswith("\ufffd")


def test_str_chunks_and_bom():
    assert _events(["\ufeffdata: a\n", "\n"]) == [("message", "a", None)]
    assert _events([b"\xef\xbb\xbfdata: b\n\n"]) == [("message", "b", None)]


def test_events_are_yielded_incrementally():
    def chunks():
        yield b"data: first\n\n"
        raise AssertionError("the parser read ahead before yielding the first event")

    first = next(iter_sse(chunks()))
    assert first == SSEEvent("message", "first", None)


def test_gemini_style_double_crlf():  # providers §5: Gemini uses \r\n\r\n
    body = b'data: {"a": 1}\r\n\r\ndata: {"a": 2}\r\n\r\n'
    assert [json.loads(e.data)["a"] for e in iter_sse(_split(body, 4))] == [1, 2]


@pytest.mark.parametrize(
    "data",
    ['{"a": [1, 2.5, "x"]}', ' {"a": 1}', '{"a": 1} ', "[1, 2]", '"s"', "NaN", "null", '{"a": "\\ud83d\\ude00"}'],
)
def test_parse_json_event_equals_json_loads(data):  # providers §5
    value = parse_json_event(data)
    expected = json.loads(data)
    assert value == expected or (value != value and expected != expected)  # NaN


@pytest.mark.parametrize("data", ["", "{", '{"a": 1}x', '{"a": 1} {"b": 2}', "nul", "{'a': 1}"])
def test_parse_json_event_reports_what_json_loads_reports(data):  # providers §5: malformed JSON
    with pytest.raises(ValueError) as expected:
        json.loads(data)
    with pytest.raises(ProviderError) as raised:
        parse_json_event(data)
    assert str(expected.value) in str(raised.value) and repr(data) in str(raised.value)


# --------------------------------------------------------------------------- partial JSON


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", {}),
        ("   ", {}),
        ("{", {}),
        ('{"a', {}),
        ('{"a":', {}),
        ('{"a": 12', {"a": 12}),
        ('{"a": tru', {}),
        ('{"a": 1, "b": tr', {"a": 1}),
        ('{"a":"x","b', {"a": "x"}),
        ('{"a":"x",', {"a": "x"}),
        ('{"a":[1,2', {"a": [1, 2]}),
        ('{"a":{"b":"c', {"a": {"b": "c"}}),
        ('{"city":"Ly', {"city": "Ly"}),
        ('{"a":"x\\', {"a": "x"}),
        ('{"a":"x\\u00', {"a": "x"}),
        ('{"a":"q\\"', {"a": 'q"'}),
        ('{"a":"line\nbreak"}', {"a": "line\nbreak"}),  # raw control characters are accepted
        ('{"a":1} trailing', {"a": 1}),
        ("[1, 2]", {}),
        ("nonsense", {}),
    ],
)
def test_parse_streaming_json(text, expected):  # providers §5: never None, best effort
    assert parse_streaming_json(text) == expected


def test_incremental_parser_matches_one_shot_on_every_prefix():
    doc = json.dumps(
        {
            "path": "a.py",
            "content": 'print("hi")\n\\ end\t',
            "n": [1, 2.5, {"z": None, "t": True}],
            "u": "é中🎉",
            "nested": {"list": [[], {}]},
        }
    )
    rng = random.Random(4)
    for _ in range(20):
        parser = PartialJsonParser()
        pos = 0
        while pos < len(doc):
            step = rng.randint(1, 6)
            parser.feed(doc[pos : pos + step])
            pos += step
            assert parser.value() == parse_streaming_json(doc[:pos])
        assert parser.value() == json.loads(doc)


def test_nan_and_infinity_in_arguments_become_null():  # providers §5: arguments are JSON
    """Python's decoder accepts NaN, Infinity and 1e999 (as inf); a tool call holding them could
    not be saved in a session, and every later request replaying it was invalid JSON (400)."""
    text = '{"x": NaN, "y": Infinity, "z": -Infinity, "big": 1e999, "ok": 1.5, "n": [NaN]}'
    expected = {"x": None, "y": None, "z": None, "big": None, "ok": 1.5, "n": [None]}
    parser = PartialJsonParser()
    for i in range(0, len(text), 3):
        parser.feed(text[i : i + 3])
    assert parse_streaming_json(text) == parser.value() == expected
    assert parse_streaming_json('{"ok": 2, "x": NaN') == {"ok": 2, "x": None}
    json.dumps(parser.value(), allow_nan=False)  # what sessions and request bodies need


def test_arguments_nested_too_deeply_never_raise():  # providers §5: never raises
    """A model repeating "[" until its token limit: the decoder's RecursionError escaped the
    parser (and ended the whole response in an error instead of a best-effort {})."""
    for text in ('{"a": ' + "[" * 50_000, '{"a": ' + "[" * 50_000 + "]" * 50_000 + "}"):
        parser = PartialJsonParser(text)
        assert parse_streaming_json(text) == parser.value() == {}


def test_oversize_arguments_parse_completely():  # synthetic: oversize tool arguments
    content = "x" * 2_000_000
    doc = json.dumps({"path": "big.txt", "content": content})
    parser = PartialJsonParser()
    for i in range(0, len(doc), 4096):
        parser.feed(doc[i : i + 4096])
    assert parser.value()["content"] == content


def test_a_long_line_split_into_many_chunks_is_one_event():  # joined once, when the line ends
    pieces = [b"data: "] + [b"x" * 4096] * 1024 + [b"\n", b"\n"]  # 4 MB in 4 KB chunks
    (event,) = list(iter_sse(pieces))
    assert event.data == "x" * 4096 * 1024


def test_an_event_that_never_ends_is_an_error_not_unbounded_memory(monkeypatch):
    from agentcore.providers import sse as sse_module

    monkeypatch.setattr(sse_module, "MAX_EVENT_BYTES", 10_000)
    endless_line = iter([b"data: "] + [b"y" * 1000] * 20)
    with pytest.raises(sse_module.SSEEventTooLarge, match="exceeded .* before it ended"):
        list(iter_sse(endless_line))
    endless_event = iter([b"data: a\n"] * 3000)  # lines, but never the blank line
    with pytest.raises(sse_module.SSEEventTooLarge):
        list(iter_sse(endless_event))
    assert [e.data for e in iter_sse([b"data: " + b"z" * 9000 + b"\n\n"])] == ["z" * 9000]  # under the cap


def test_an_event_flushed_at_the_end_of_input_is_marked_unterminated():  # a cut stream can be told apart
    from agentcore.providers.sse import SSEEvent, UnterminatedSSEEvent

    events = list(iter_sse([b"data: one\n\n", b'data: {"cut'])) + list(iter_sse([b"data: two\n\n"]))
    assert events == [SSEEvent("message", "one"), SSEEvent("message", '{"cut'), SSEEvent("message", "two")]
    assert [type(e) is UnterminatedSSEEvent for e in events] == [False, True, False]


def test_an_event_of_many_lines_in_many_chunks_costs_linear_time():  # joined once, when the event ends
    # each line-sized chunk was appended to the whole pending event and the result searched again:
    # a 2 MB event of 100-byte lines took 30 s (4 MB: 130 s; the 64 MB cap: hours)
    import time

    line = b"data: " + b"x" * 93 + b"\n"
    count = 2 * 1024 * 1024 // len(line)
    started = time.perf_counter()
    (event,) = list(iter_sse([line] * count + [b"\n"]))
    elapsed = time.perf_counter() - started
    assert event.data == "\n".join(["x" * 93] * count)
    assert elapsed < 5.0, f"a 2 MB event of {count} lines took {elapsed:.1f} s"


def test_an_event_ended_by_cr_cr_is_dispatched_at_once():  # providers §5: \r ends a line
    # a final \r waited for the next chunk (a \n might follow), so a bare-CR server's event stayed
    # pending while the body stayed open, and at the end of input it was called unterminated
    from agentcore.providers.sse import UnterminatedSSEEvent

    def chunks():
        yield b"data: first\r\r"
        raise AssertionError("the parser read ahead before yielding the first event")

    assert next(iter_sse(chunks())) == SSEEvent("message", "first", None)
    events = list(iter_sse([b"data: a\r", b"\r", b"\ndata: b\r\r"]))
    assert events == [SSEEvent("message", "a"), SSEEvent("message", "b")]
    assert not any(isinstance(e, UnterminatedSSEEvent) for e in events)
    assert _events([b"data: x\r", b"\n", b"\r\n"]) == [("message", "x", None)]  # one \r\n across chunks


def test_an_integer_too_long_for_python_becomes_null_not_an_empty_call():  # providers §5: best effort
    """Python refuses to convert an integer of more than 4300 digits: the decoder's ValueError made
    the whole arguments ``{}`` (every other argument lost), where a too large float becomes null."""
    huge = "9" * 5000
    text = '{"path": "a.txt", "n": ' + huge + ', "m": [-' + huge + ", 7]}"
    parser = PartialJsonParser()
    for i in range(0, len(text), 7):
        parser.feed(text[i : i + 7])
    expected = {"path": "a.txt", "n": None, "m": [None, 7]}
    assert parse_streaming_json(text) == parser.value() == expected
    assert parse_streaming_json(text[:-4]) == {"path": "a.txt", "n": None, "m": [None]}
    assert parse_streaming_json('{"n": ' + "1" * 4300 + "}") == {"n": int("1" * 4300)}


def test_deeply_nested_streamed_arguments_cost_bounded_work_per_fragment(monkeypatch):  # providers §5
    """A model streaming "[" until its token limit: every re-parse decoded (and closed) the whole
    text again, 800k brackets in small deltas took 15 s of CPU; past MAX_DEPTH nothing is re-parsed
    and the call still ends as {} with the ``tool_arguments_repaired`` note."""
    from agentcore.providers import partial_json
    from agentcore.providers.writer import StreamWriter
    from agentcore.types import AssistantMessage, Model

    decoded = []
    real_loads = partial_json._loads
    monkeypatch.setattr(
        partial_json, "_loads", lambda text, *careful: decoded.append(len(text)) or real_loads(text, *careful)
    )
    model = Model(id="m", name="m", api="openai-completions", provider="p")
    out = AssistantMessage(api=model.api, provider=model.provider, model=model.id)
    writer = StreamWriter(model, out, lambda event: None)
    index = writer.start_tool_call("c1", "calc", arguments_text='{"a": ')
    fragments = 25_000
    for _ in range(fragments):
        writer.append_tool_arguments(index, "[[[[")
    writer.end_block(index)
    assert out.content[index].arguments == {}
    (note,) = out.diagnostics
    assert (note.type, note.error["name"]) == ("tool_arguments_repaired", "RecursionError")
    # only the fragments before MAX_DEPTH are parsed (500 decodes of 380k characters in all; before
    # the limit, 12,000 decodes of 172 million characters)
    assert len(decoded) < 1000 and sum(decoded) < 1_000_000, (len(decoded), sum(decoded))
    # below the limit nothing changes, in small fragments too
    doc = '{"a": ' + "[" * 500 + "1" + "]" * 500 + ', "b": 2}'
    parser = PartialJsonParser()
    for i in range(0, len(doc), 5):
        parser.feed(doc[i : i + 5])
    assert parser.value() == parse_streaming_json(doc) == json.loads(doc)
    assert parse_streaming_json('{"a": ' + "[" * 1001 + "]" * 1001 + "}") == {}


@pytest.mark.parametrize(
    "number, value",
    [
        ("1e999", None),  # an exponent of three digits, split anywhere
        ("-2.5E+400", None),
        ("9" * 215 + "e99", None),  # a long mantissa and a short exponent: beyond a float too
        ("1" * 5000, None),  # beyond Python's integer digit limit
        ("1" * 300, int("1" * 300)),  # a long integer that still converts
        ("1.5e-05", 1.5e-05),
        ("-0.25E+2", -25.0),
        ("123456789012345678901234567890", 123456789012345678901234567890),
    ],
)
def test_numbers_streamed_a_character_at_a_time_decode_as_when_whole(number, value):  # providers §5
    """Numbers are decoded by the C scanner unless one could overflow a float or pass the integer
    digit limit; the scanner must see such a number also when it is split between fragments."""
    doc = '{"a": [1, ' + number + ', 2], "b": "x"}'
    parser = PartialJsonParser()
    for ch in doc:
        parser.feed(ch)
    assert parser.value() == parse_streaming_json(doc) == {"a": [1, value, 2], "b": "x"}


def test_number_heavy_streamed_arguments_cost_few_decodes(monkeypatch):  # providers §5
    """27 KB of numbers streamed a character at a time took 21 s of CPU: every fragment up to
    16 KB was re-parsed, and each re-parse called Python once per number. Now the C scanner
    decodes the numbers and past 4096 characters a re-parse waits for 1 % growth."""
    from agentcore.providers import partial_json

    decoded, careful = [], []
    real_loads = partial_json._loads

    def counting(text, *flag):
        decoded.append(len(text))
        careful.extend(f for f in flag if f)
        return real_loads(text, *flag)

    monkeypatch.setattr(partial_json, "_loads", counting)
    doc = json.dumps({"values": list(range(3000)), "floats": [i / 7 for i in range(600)]})
    args = partial_json.ToolArguments()
    values = [args.feed(ch) for ch in doc]
    assert args.value() == json.loads(doc)
    assert not careful, "plain numbers took the careful decoder"
    # every fragment up to 4096 characters is re-parsed, then at most one per 1 % / 10 % growth
    assert all(v is not None for v in values[: partial_json.REPARSE_ALWAYS_BELOW])
    parses = sum(v is not None for v in values)
    assert parses < partial_json.REPARSE_ALWAYS_BELOW + 400, parses
    assert sum(decoded) < 30_000_000, sum(decoded)  # before: 16,389 parses, 314 million characters


def test_a_truncated_string_ending_in_an_escaped_backslash_and_u_is_kept():  # providers §5: best effort
    """``C:\\\\u`` is an escaped backslash and a u, not the start of a ``\\u`` escape: cutting it as
    one left an unclosable string, and the whole value vanished from the streamed arguments."""
    path = "C:\\users\\u1\\Ünïcode\\\\u0041"
    doc = json.dumps({"path": path, "n": 1})
    start = doc.index('"', len('{"path":')) + 1
    parser = PartialJsonParser()
    parser.feed(doc[:start])
    for end in range(start + 1, len(doc) + 1):
        parser.feed(doc[end - 1])
        partial = parse_streaming_json(doc[:end])
        assert parser.value() == partial
        assert path.startswith(partial["path"]), doc[:end]
    assert parse_streaming_json('{"a": "C:\\\\u') == {"a": "C:\\u"}
    assert parse_streaming_json('{"a": "x\\u00') == parse_streaming_json('{"a": "x\\') == {"a": "x"}


def test_emoji_split_over_deltas_join_without_rescanning_the_text(monkeypatch):  # providers §5
    """Each delta starting with the low half of a surrogate pair re-scanned (and rebuilt) the whole
    text to join the pair: 2000 split emoji in a 100 KB answer took 2.5 s, 20000 in 1 MB 260 s."""
    from agentcore.providers import writer as writer_module
    from agentcore.types import AssistantMessage, Model

    scanned = []
    real_join = writer_module.join_surrogate_pairs
    monkeypatch.setattr(writer_module, "join_surrogate_pairs", lambda t: scanned.append(len(t)) or real_join(t))
    model = Model(id="m", name="m", api="openai-completions", provider="p")
    out = AssistantMessage(api=model.api, provider=model.provider, model=model.id)
    events = []
    writer = writer_module.StreamWriter(model, out, events.append)
    text_index, thinking_index = writer.start_text(), writer.start_thinking()
    for _ in range(500):
        for index, append in ((text_index, writer.append_text), (thinking_index, writer.append_thinking)):
            append(index, "x" * 50 + "\ud83d")
            append(index, "\ude00y")
    writer.append_thinking(thinking_index, "\ude01")  # a low half after no high one stays as sent
    assert out.content[text_index].text == ("x" * 50 + "\U0001f600y") * 500
    assert out.content[thinking_index].thinking == ("x" * 50 + "\U0001f600y") * 500 + "\ude01"
    assert [e.delta for e in events if e.type == "text_delta"][:2] == ["x" * 50 + "\ud83d", "\ude00y"]
    assert sum(scanned) <= 3 * 1000, sum(scanned)  # the two halves (and the rest of the delta) only


def test_an_emoji_split_between_argument_fragments_is_one_character():  # providers §5
    """A provider splitting an emoji's two UTF-16 escapes between two argument deltas: json kept
    the halves as two code points, and the write tool refused the content ("holds an unpaired
    UTF-16 surrogate ... write the character itself") though the model had written the emoji."""
    from agentcore.providers.writer import StreamWriter
    from agentcore.types import AssistantMessage, Model

    model = Model(id="m", name="m", api="openai-completions", provider="p")
    out = AssistantMessage(api=model.api, provider=model.provider, model=model.id)
    writer = StreamWriter(model, out, lambda event: None)
    index = writer.start_tool_call("c1", "write")
    fragments = ['{"path": "a.txt", "content": "hi \ud83d', "\ude00 \ud83c", '\udf89"', ', "\ud83d', '\udd11": 1}']
    for fragment in fragments:
        writer.append_tool_arguments(index, fragment)
    writer.end_block(index)
    arguments = out.content[index].arguments
    assert arguments == {"path": "a.txt", "content": "hi \U0001f600 \U0001f389", "\U0001f511": 1}
    json.dumps(arguments, ensure_ascii=False).encode("utf-8")  # what a tool writes
    assert not out.diagnostics
    text = "".join(fragments)
    assert parse_streaming_json(text) == PartialJsonParser(text).value() == arguments
    cut = text[: text.index("\ude00") + 1]  # repaired, cut right after the pair
    assert parse_streaming_json(cut) == PartialJsonParser(cut).value() == {"path": "a.txt", "content": "hi \U0001f600"}
    assert parse_streaming_json('{"a": "x\ud83d') == {"a": "x\ud83d"}  # a lone half stays as sent

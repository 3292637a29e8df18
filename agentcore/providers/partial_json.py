"""Best-effort parsing of streamed (incomplete) JSON tool arguments, spec/providers.md §5.

``parse_streaming_json(text)`` always returns a dict, never None and never raises:

* empty or whitespace text gives ``{}``;
* complete JSON is parsed as is (raw control characters inside strings are accepted, since models
  sometimes emit literal newlines); the two halves of a UTF-16 surrogate pair in the text (an
  emoji a provider split between two fragments) become the one character they encode;
* incomplete JSON is repaired: open strings, arrays and objects are closed, a dangling key, colon
  or trailing comma is dropped, a truncated string value is kept as far as it goes; a truncated
  number or literal (``tru``) is dropped when it cannot stand on its own;
* ``NaN``, ``Infinity``, numbers too large for a float (``1e999``) and integers longer than
  Python converts (4300 digits) become ``null``: they are not JSON or not numbers Python can
  hold, and a request replaying such arguments would be refused by every API (and a session
  could not store them);
* anything else (not an object, nested more than :data:`MAX_DEPTH` levels deep or too deeply for
  the interpreter's recursion limit, or beyond repair) gives ``{}``. Once streamed text passes
  :data:`MAX_DEPTH` (a model repeating ``[`` until its token limit) it is neither scanned nor
  re-parsed any more: its value is ``{}`` at once, so each further fragment costs O(1).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Dict, List, Optional

from .._surrogates import HAS_SURROGATE, join_surrogate_pairs

__all__ = ["parse_streaming_json", "PartialJsonParser", "ToolArguments", "REPARSE_ALWAYS_BELOW", "MAX_DEPTH"]

MAX_DEPTH = 1000
"""Open arrays/objects past which text is not parsed (``{}``): CPython's decoder cannot go deeper
at the default recursion limit, and re-parsing such text per fragment cost seconds of CPU."""

_CLOSERS = {"{": "}", "[": "]"}


def _finite_float(text: str) -> Optional[float]:
    value = float(text)
    return value if math.isfinite(value) else None


def _int_or_null(text: str) -> Optional[int]:
    """A JSON integer, or None for one longer than Python converts (4300 digits by default)."""
    try:
        return int(text)
    except ValueError:
        return None


_decoder = json.JSONDecoder(
    strict=False, parse_constant=lambda _name: None, parse_float=_finite_float, parse_int=_int_or_null
)
#: What the decoder raises for text it cannot parse: a syntax error, or nesting deeper than the
#: interpreter's recursion limit (a model repeating "[[[[" until its token limit)
_UNPARSEABLE = (ValueError, RecursionError)


#: The same decoder with the C scanner's own number parsing (no Python call per number, which
#: made re-parsing number-heavy arguments cost seconds), for text the scanner saw no
#: :data:`_EXPONENT` and no run of :data:`_LONG_RUN` digits in: a number with fewer integer digits
#: and an exponent of at most two digits is below 10**308, so neither overflows a float nor
#: passes Python's integer digit limit, and both decoders give the same value.
_fast_decoder = json.JSONDecoder(strict=False, parse_constant=lambda _name: None)
_LONG_RUN = 210
_EXPONENT = re.compile(r"[0-9][eE][+-]?[0-9]{3}")  # an exponent of three digits or more
_EXPONENT_SPAN = 6  # the longest text _EXPONENT matches
_LONG_DIGITS = re.compile(rf"[0-9]{{{_LONG_RUN}}}")
_DIGITS = "0123456789"


def _loads(text: str, careful: bool = True) -> Any:
    """Decode ``text``; ``careful=False`` takes the fast decoder (see above)."""
    return (_decoder if careful else _fast_decoder).decode(text)


def parse_streaming_json(text: str) -> Dict[str, Any]:
    """Parse possibly incomplete JSON object text; see the module docstring."""
    if not text or not text.strip():
        return {}
    scanner = _Scanner()
    scanner.feed(text)
    if scanner.too_deep:
        return {}
    try:
        value = scanner.loads(text)
    except _UNPARSEABLE:
        value = scanner.repair(text)
    return value if isinstance(value, dict) else {}


class PartialJsonParser:
    """Accumulates streamed fragments; ``value()`` is the best-effort dict of everything so far.

    Scanning is incremental (each character is examined once over the whole stream), so feeding
    many small fragments of a large document stays linear apart from the final ``json`` parse.
    """

    __slots__ = ("_parts", "_length", "_scanner")

    def __init__(self, initial: str = "") -> None:
        self._parts: List[str] = []
        self._length = 0
        self._scanner = _Scanner()
        if initial:
            self.feed(initial)

    def feed(self, fragment: str) -> None:
        if fragment:
            self._parts.append(fragment)
            self._length += len(fragment)
            self._scanner.feed(fragment)

    def __len__(self) -> int:
        return self._length

    @property
    def text(self) -> str:
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    @property
    def too_deep(self) -> bool:
        """True once the text nested more than :data:`MAX_DEPTH` levels: ``value()`` is ``{}``."""
        return self._scanner.too_deep

    def value(self) -> Dict[str, Any]:
        if self._scanner.too_deep:
            return {}
        text = self.text
        if not text.strip():
            return {}
        try:
            value = self._scanner.loads(text)
        except _UNPARSEABLE:
            value = self._scanner.repair(text)
        return value if isinstance(value, dict) else {}


REPARSE_ALWAYS_BELOW = 4096
"""Argument characters up to which every fragment is re-parsed; beyond, only after some growth
(see :class:`ToolArguments`)."""

_REPARSE_SMALL_GROWTH_BELOW = 16384  # up to here, re-parse after 1 % growth; beyond, after 10 %


class ToolArguments:
    """The streamed argument JSON of one tool call, with the one re-parse throttle of agentcore.

    :meth:`feed` appends a fragment and returns the best-effort dict so far, or None when
    re-parsing was skipped: up to :data:`REPARSE_ALWAYS_BELOW` characters every fragment is
    re-parsed; up to 16384 once the text grew by 1 % since the last parse (every 41 to 164
    characters); beyond that once it grew by 10 %. So a call with megabytes of arguments costs
    O(n log n) instead of O(n^2), and one of 16 KB streamed a character at a time costs about
    a tenth of a second instead of seconds. :meth:`value` always parses everything (use it when
    the call ends).
    """

    __slots__ = ("_parser", "_parsed_at")

    def __init__(self, initial: str = "") -> None:
        self._parser = PartialJsonParser(initial or "")
        self._parsed_at = 0  # text length at the last parse

    def __len__(self) -> int:
        return len(self._parser)

    @property
    def text(self) -> str:
        return self._parser.text

    def feed(self, fragment: str) -> Optional[Dict[str, Any]]:
        self._parser.feed(fragment or "")
        size = len(self._parser)
        growth = 1.01 if size <= _REPARSE_SMALL_GROWTH_BELOW else 1.1
        if size <= REPARSE_ALWAYS_BELOW or size >= self._parsed_at * growth:
            return self.value()
        return None

    @property
    def too_deep(self) -> bool:
        """True once the text nested more than :data:`MAX_DEPTH` levels: the value is ``{}``."""
        return self._parser.too_deep

    def value(self) -> Dict[str, Any]:
        self._parsed_at = len(self._parser)
        return self._parser.value()


# characters that change the scanner state outside / inside strings
_STRUCTURAL = re.compile(r'[{}\[\]",:]')
_STRING_SPECIAL = re.compile(r'["\\]')


class _Scanner:
    """Tracks where a prefix of the text can be cut and closed into valid JSON."""

    __slots__ = (
        "pos",
        "stack",
        "expect_key",
        "in_string",
        "string_is_key",
        "escape",
        "escape_at",
        "safe_end",
        "safe_stack",
        "finished",
        "too_deep",
        "surrogates",
        "big_numbers",
        "tail",
        "digit_run",
    )

    def __init__(self) -> None:
        self.pos = 0  # characters consumed so far (absolute)
        self.stack = ""  # open containers, e.g. "{[{"
        self.expect_key: List[bool] = []  # per open object: True while a key comes next
        self.in_string = False
        self.string_is_key = False
        self.escape = False
        self.escape_at = -1  # where the last escape sequence's backslash is (absolute)
        self.safe_end = -1  # text[:safe_end] + closers(safe_stack) is valid JSON
        self.safe_stack = ""
        self.finished = False  # the top-level value closed (or the text is unrepairable)
        self.too_deep = False  # more than MAX_DEPTH containers were open at once: no value
        self.surrogates = False  # the text holds a UTF-16 surrogate (maybe half of a split pair)
        self.big_numbers = False  # the text may hold a number a float or int cannot hold as is
        self.tail = ""  # the text's last characters, for an exponent split between two fragments
        self.digit_run = 0  # how many digits the text ends with

    def feed(self, chunk: str) -> None:
        base = self.pos
        self.pos += len(chunk)
        if not self.surrogates and HAS_SURROGATE.search(chunk):
            self.surrogates = True
        if not self.big_numbers:
            self._watch_numbers(chunk)
        if self.finished:
            return
        i, n = 0, len(chunk)
        while i < n:
            if self.in_string:
                if self.escape:
                    self.escape = False
                    i += 1
                    continue
                m = _STRING_SPECIAL.search(chunk, i)
                if m is None:
                    return
                i = m.start()
                if chunk[i] == "\\":
                    self.escape = True
                    self.escape_at = base + i
                else:
                    self.in_string = False
                    if not self.string_is_key:
                        self.safe_end, self.safe_stack = base + i + 1, self.stack
                i += 1
                continue
            m = _STRUCTURAL.search(chunk, i)
            if m is None:
                return
            i = m.start()
            ch = chunk[i]
            stack = self.stack
            if ch == '"':
                self.in_string = True
                self.string_is_key = bool(stack) and stack[-1] == "{" and self.expect_key[-1]
            elif ch == "{" or ch == "[":
                if len(stack) >= MAX_DEPTH:
                    self.too_deep = self.finished = True
                    return
                self.stack = stack + ch
                if ch == "{":
                    self.expect_key.append(True)
                self.safe_end, self.safe_stack = base + i + 1, self.stack
            elif ch == "}" or ch == "]":
                if not stack or _CLOSERS[stack[-1]] != ch:
                    self.finished = True  # mismatched: keep the last good prefix
                    return
                if stack[-1] == "{":
                    self.expect_key.pop()
                self.stack = stack[:-1]
                self.safe_end, self.safe_stack = base + i + 1, self.stack
                if not self.stack:
                    self.finished = True  # complete document; ignore trailing text
                    return
            elif ch == ",":
                self.safe_end, self.safe_stack = base + i, stack  # the member before is complete
                if stack and stack[-1] == "{":
                    self.expect_key[-1] = True
            elif stack and stack[-1] == "{":  # ":"
                self.expect_key[-1] = False
            i += 1

    def _watch_numbers(self, chunk: str) -> None:
        """Set ``big_numbers`` once the text so far holds an exponent of three digits or more or a
        run of :data:`_LONG_RUN` digits, also one split between fragments (strings included: such
        text merely takes the careful decoder). Linear in the chunk."""
        window = self.tail + chunk
        lead = len(chunk) - len(chunk.lstrip(_DIGITS))
        if (
            _EXPONENT.search(window)
            or self.digit_run + lead >= _LONG_RUN
            or (lead < len(chunk) and _LONG_DIGITS.search(chunk))
        ):
            self.big_numbers = True
            return
        self.tail = window[-(_EXPONENT_SPAN - 1) :]
        if lead == len(chunk):
            self.digit_run += lead
        else:
            self.digit_run = len(chunk) - len(chunk.rstrip(_DIGITS))

    def repair(self, text: str) -> Any:
        """Close the incomplete document ``text`` (everything fed so far); None if impossible."""
        candidates = []
        if not self.finished:
            if self.in_string and not self.string_is_key:
                head = text[: self.escape_at] if self._in_escape(text) else text
                candidates.append(head + '"' + _closing(self.stack))  # keep the truncated value
            elif not self.in_string:
                candidates.append(text.rstrip() + _closing(self.stack))  # a trailing number may be whole
        if self.safe_end >= 0:
            candidates.append(text[: self.safe_end] + _closing(self.safe_stack))
        for candidate in candidates:
            try:
                return self.loads(candidate)
            except _UNPARSEABLE:
                continue
        return None

    def loads(self, text: str) -> Any:
        """Decode ``text`` (the fed text or a repair of it), a surrogate pair joined into its
        character: a provider may split an emoji between two fragments, and json keeps the halves
        as two code points, which no tool can write as UTF-8."""
        return _loads(join_surrogate_pairs(text) if self.surrogates else text, self.big_numbers)

    def _in_escape(self, text: str) -> bool:
        """The text ends inside an escape sequence: ``\\`` or ``\\u`` with fewer than 4 digits
        (the scanner knows where that backslash is: a ``\\\\u`` is an escaped backslash and a u)."""
        if self.escape:
            return True
        return self.escape_at >= 0 and len(text) - self.escape_at < 6 and text[self.escape_at + 1] == "u"


def _closing(stack: str) -> str:
    return "".join(_CLOSERS[c] for c in reversed(stack))

"""Session entries: the typed nodes of the conversation tree and their reference JSON shape.

Every entry has ``id`` (8 characters, unique in its session), ``parent_id`` (None for a root) and
``timestamp`` (an ISO-8601 UTC string with milliseconds, ``2025-11-20T23:33:50.805Z``). ``to_dict()``
writes the reference key order (``type``, ``id``, ``parentId``, ``timestamp``, then the payload) and
``entry_from_dict()`` reads it back; keys an entry type does not know are kept in ``extra`` and written
back, so files written by other implementations survive a round trip. An entry type agentcore does not
know becomes an :class:`UnknownEntry` holding its JSON verbatim.

``encode_line()`` produces the exact bytes of one JSONL line (compact JSON, no ASCII escaping, NaN and
Infinity refused); the same text is what SQLite stores, so every storage agrees byte for byte.
"""

from __future__ import annotations

import calendar
import json
import os
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Dict, List, Mapping, Optional, Set, Tuple, Type

from .._surrogates import escape_lone_surrogates
from ..types import _blocks, _json_type, message_from_dict, message_to_dict
from .errors import SessionError

__all__ = [
    "SessionHeader",
    "SessionEntry",
    "MessageEntry",
    "ThinkingLevelChangeEntry",
    "ModelChangeEntry",
    "ActiveToolsChangeEntry",
    "CompactionEntry",
    "BranchSummaryEntry",
    "CustomEntry",
    "CustomMessageEntry",
    "LabelEntry",
    "SessionInfoEntry",
    "LeafEntry",
    "UnknownEntry",
    "ENTRY_TYPES",
    "check_envelope",
    "entry_from_dict",
    "header_from_dict",
    "encode_line",
    "iso_from_ms",
    "ms_from_iso",
    "new_entry_id",
    "new_session_id",
    "new_header",
    "js_number",
    "CURRENT_VERSION",
]

CURRENT_VERSION = 3

# --------------------------------------------------------------------------- time and ids


_last_second: Tuple[Optional[int], str] = (None, "")  # None: a second before 1970 is -1, not "nothing yet"

#: An ISO-8601 date-time as session files hold it: seconds, an optional fraction of any precision,
#: then ``Z``, an offset ``±HH:MM`` (or ``±HHMM``), or nothing (read as UTC, as Python's naive
#: ``datetime.utcnow().isoformat()`` writes it).
_ISO = re.compile(r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d+))?(?:[Zz]|([+-])(\d{2}):?(\d{2}))?", re.ASCII)


def iso_from_ms(ms: int) -> str:
    """``1763681630805`` -> ``"2025-11-20T23:33:50.805Z"`` (JavaScript ``toISOString`` format)."""
    global _last_second
    seconds, millis = divmod(int(ms), 1000)
    cached_second, text = _last_second  # appends come many per second: format each second once
    if cached_second != seconds:
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
        _last_second = (seconds, text)
    return f"{text}.{millis:03d}Z"


def ms_from_iso(text: str) -> int:
    """Parse an ISO-8601 timestamp to Unix ms: ``Z``, a UTC offset (``+02:00`` is converted:
    ``2025-01-01T02:00:00+02:00`` is midnight UTC) or none (UTC), a fraction of any precision
    (cut to milliseconds).

    Raises ``ValueError`` for text that is not such a timestamp (also a year outside 1-9999).
    """
    match = _ISO.fullmatch(text)
    if match is None:
        raise ValueError(f"not an ISO-8601 timestamp: {text!r}")
    main, fraction, sign, hours, minutes = match.groups()
    struct = time.strptime(main, "%Y-%m-%dT%H:%M:%S")
    millis = int((fraction + "00")[:3]) if fraction else 0
    offset = 0
    if sign:
        if int(hours) > 23 or int(minutes) > 59:
            raise ValueError(f"not an ISO-8601 timestamp: {text!r} (UTC offset out of range)")
        offset = (int(hours) * 60 + int(minutes)) * 60_000 * (1 if sign == "+" else -1)
    return calendar.timegm(struct) * 1000 + millis - offset


def timestamp_order(text: str) -> str:
    """(The package's own, not exported.) A sort key putting ISO timestamps in time order: the reference's own form
    (``2025-11-20T23:33:50.805Z``) as it is, any other that :func:`ms_from_iso` reads (another
    precision, an offset) in that form, text it cannot read as it is."""
    if len(text) == 24 and text[19] == "." and text[23] == "Z":
        return text
    try:
        seconds, millis = divmod(ms_from_iso(text), 1000)
        parts = time.gmtime(seconds)
    except (ValueError, OverflowError, OSError):
        return text
    return (
        f"{parts.tm_year:04d}-{parts.tm_mon:02d}-{parts.tm_mday:02d}T"
        f"{parts.tm_hour:02d}:{parts.tm_min:02d}:{parts.tm_sec:02d}.{millis:03d}Z"
    )


def _ms_or_zero(text: str) -> int:
    try:
        return ms_from_iso(text)
    except ValueError:
        return 0


def new_entry_id(exists: Callable[[str], bool]) -> str:
    """A random 8-hex-character id not accepted by ``exists``; a full UUID after 100 collisions."""
    for _ in range(100):
        candidate = os.urandom(4).hex()
        if not exists(candidate):
            return candidate
    return str(uuid.uuid4())


def new_session_id() -> str:
    """A UUIDv7-style id: 48-bit millisecond time prefix, so ids sort by creation time."""
    ms = int(time.time() * 1000) & ((1 << 48) - 1)
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms << 80) | (0x7 << 76) | ((rand >> 68) & 0xFFF) << 64 | (0b10 << 62) | (rand & ((1 << 62) - 1))
    return str(uuid.UUID(int=value))


# --------------------------------------------------------------------------- JSON lines

_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def js_number(value: float) -> str:
    """A float as JavaScript's ``JSON.stringify`` writes it (``0.000009``, ``1e-7``, ``3``).

    Python's ``repr`` uses the same shortest digits but other exponent thresholds, so session lines
    written here would otherwise differ from the reference (``9e-06`` for ``0.000009``). Whole
    numbers from 1e16 on are those shortest digits padded with zeros, as JavaScript writes them
    (``1152921504606847000`` for ``2.0**60``), not the float's exact binary value.
    """
    if value.is_integer() and abs(value) < 1e16:  # below 1e16 the shortest digits are the exact value
        return str(int(value))
    text = repr(value)
    if "e" not in text:
        return text
    mantissa, _, exp_text = text.partition("e")
    exponent = int(exp_text)
    if -7 < exponent < 21:
        sign = "-" if mantissa.startswith("-") else ""
        digits = mantissa.lstrip("-").replace(".", "")
        if exponent < 0:
            return sign + "0." + "0" * (-exponent - 1) + digits
        digits = digits.ljust(exponent + 1, "0")
        head, tail = digits[: exponent + 1], digits[exponent + 1 :]
        return sign + head + ("." + tail if tail else "")
    return f"{mantissa}e{'+' if exponent > 0 else '-'}{abs(exponent)}"


_INFINITIES = (float("inf"), float("-inf"))


class _Normalizer:
    """Copy-on-write pass before encoding: refuse what JSON cannot carry, format floats like JS.

    Runs on every append, so plain ``dict``/``list`` containers and ``str``/``int``/``bool``/None
    leaves are recognised by exact type first; subclasses take the general ``isinstance`` checks.
    """

    def __init__(self) -> None:
        self.active: Set[int] = set()  # id() of the containers being walked
        self.numbers: List[str] = []
        self.nonce = ""

    def float(self, value: float) -> Any:
        if 1e-4 <= abs(value) < 1e16 and not value.is_integer():
            return value  # repr is fixed-point without a trailing ".0": what JavaScript writes too
        if value != value or value in _INFINITIES:
            raise SessionError("invalid_payload", f"{value!r} is not JSON (NaN and Infinity are refused)")
        text = js_number(value)
        if text == repr(value):
            return value
        if value.is_integer() and abs(value) < 1e16:  # an int writes the same digits (see js_number)
            return int(value)
        if not self.nonce:
            self.nonce = os.urandom(6).hex()
        self.numbers.append(text)
        return f"\x00{self.nonce}{len(self.numbers) - 1}\x00"

    def value(self, value: Any) -> Any:
        kind = type(value)
        if kind is dict:
            return self.container(value, value.items(), True)
        if kind is list:
            return self.container(value, enumerate(value), False)
        if kind is float or isinstance(value, float):
            return self.float(value)
        if isinstance(value, dict):
            return self.container(value, value.items(), True)
        if isinstance(value, (list, tuple)):
            return self.container(value, enumerate(value), False)
        return value

    def container(self, value: Any, items: Any, is_dict: bool) -> Any:
        marker = id(value)
        active = self.active
        if marker in active:
            raise SessionError("invalid_payload", "entry is not pure JSON: it contains a reference cycle")
        active.add(marker)
        new: Any = None if isinstance(value, (dict, list)) else list(value)
        for key, item in items:
            if is_dict and type(key) is not str and not isinstance(key, str):
                raise SessionError("invalid_payload", f"non-string object key {key!r} is not JSON")
            kind = type(item)
            if kind is str or kind is int or kind is bool or item is None:
                continue
            if kind is dict or kind is list or kind is float or isinstance(item, (float, dict, list, tuple)):
                converted = self.value(item)
                if converted is not item:
                    if new is None:
                        new = dict(value) if is_dict else list(value)
                    new[key] = converted
        active.discard(marker)
        return value if new is None else new

    def finish(self, text: str) -> str:
        for index, number in enumerate(self.numbers):
            text = text.replace(f'"\\u0000{self.nonce}{index}\\u0000"', number, 1)
        return text


def encode_line(obj: Mapping[str, Any]) -> bytes:
    """The UTF-8 bytes of one JSONL line (with its ``\\n``), numbers formatted as JavaScript does.

    Raises ``SessionError("invalid_payload")`` for values JSON cannot carry exactly: NaN/Infinity,
    cycles, bytes, sets, non-string keys or arbitrary objects, and for nesting too deep to encode
    (hundreds of levels). Nothing is written in that case.
    """
    normalizer = _Normalizer()
    try:
        data = normalizer.value(obj)
        text = _ENCODER.encode(data)
    except (TypeError, ValueError) as exc:
        raise SessionError("invalid_payload", f"entry is not pure JSON: {exc}") from None
    except RecursionError:
        raise SessionError("invalid_payload", "entry is nested too deeply to encode") from None
    if normalizer.numbers:
        text = normalizer.finish(text)
    try:
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:  # surrogate code points, e.g. an emoji split across two stream deltas
        # a surrogate pair (two code points in a Python str) or a lone surrogate can only occur
        # inside JSON strings, where JSON.stringify (the reference writer) joins the first into its
        # character and writes the second as a \uXXXX escape. Both read back to the same str.
        return (escape_lone_surrogates(text) + "\n").encode("utf-8")


# --------------------------------------------------------------------------- entry model

_Field = Tuple[str, str, str]  # (attribute, JSON key, "req" always written | "opt" omitted when None)


def _extra() -> Any:
    return field(default_factory=dict, repr=False, compare=False)


def _fields(*names: str) -> Tuple[_Field, ...]:
    """Payload fields in JSON key order: ``"tokens_before"`` is required and written as
    ``tokensBefore``; a trailing ``?`` (``"details?"``) marks an optional one, omitted when None."""
    out: List[_Field] = []
    for name in names:
        attr = name.rstrip("?")
        head, *rest = attr.split("_")
        out.append((attr, head + "".join(part.title() for part in rest), "opt" if name.endswith("?") else "req"))
    return tuple(out)


@dataclass
class SessionEntry:
    """Base of every entry. Subclasses declare their payload in ``_payload`` (see :func:`_fields`)."""

    id: str
    parent_id: Optional[str]
    timestamp: str
    type: ClassVar[str] = ""
    _payload: ClassVar[Tuple[_Field, ...]] = ()
    _decoders: ClassVar[Dict[str, Callable[[Any], Any]]] = {}
    _encoders: ClassVar[Dict[str, Callable[[Any], Any]]] = {}
    #: JSON key -> the check a present, non-null value must pass (see :func:`_check_field`)
    _checks: ClassVar[Dict[str, str]] = {}

    @property
    def timestamp_ms(self) -> int:
        """The entry time in Unix milliseconds (0 when the timestamp cannot be parsed)."""
        return _ms_or_zero(self.timestamp)

    def to_dict(self) -> Dict[str, Any]:
        """The reference JSON object: type, id, parentId, timestamp, payload, then unknown keys."""
        out: Dict[str, Any] = {
            "type": self.type,
            "id": self.id,
            "parentId": self.parent_id,
            "timestamp": self.timestamp,
        }
        for attr, key, kind in self._payload:
            value = getattr(self, attr)
            if value is None and kind == "opt":
                continue
            encoder = self._encoders.get(attr)
            out[key] = encoder(value) if encoder is not None and value is not None else value
        for key, value in getattr(self, "extra", {}).items():
            out.setdefault(key, value)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SessionEntry:
        """Read an entry of this class. Raises ``ValueError`` naming the key when a required key
        is missing or a payload value has the wrong JSON type (a list where a string belongs...)."""
        for key, check in cls._checks.items():
            value = d.get(key)
            if value is not None:
                _check_field(cls.type, key, value, check)
        known = {"type", "id", "parentId", "timestamp"}
        kwargs: Dict[str, Any] = {"id": d["id"], "parent_id": d.get("parentId"), "timestamp": d["timestamp"]}
        extra: Dict[str, Any] = {}
        for attr, key, kind in cls._payload:
            known.add(key)
            if key not in d:
                if kind == "req":
                    raise ValueError(f"{cls.type} entry needs a {key!r} field")
                continue
            value = d[key]
            if value is None and kind == "opt":
                extra[key] = None  # an explicit null survives the round trip
                continue
            decoder = cls._decoders.get(attr)
            kwargs[attr] = decoder(value) if decoder is not None and value is not None else value
        extra.update((k, v) for k, v in d.items() if k not in known)
        return cls(**kwargs, extra=extra)  # type: ignore[call-arg]


_CHECK_TEXT = {
    "str": "a string",
    "object": "an object",
    "content": "a string or an array of blocks",
    "messages": "an array of messages",
}


def _check_field(entry_type: str, key: str, value: Any, check: str) -> None:
    """Raise ``ValueError`` naming ``key`` when ``value`` is not of the JSON kind ``check`` names.

    Only what readers of the field cannot cope with is refused (a list used as a dict key, a
    usage that is not an object...); other odd values are kept and rendered as they are."""
    if check == "str":
        ok = isinstance(value, str)
    elif check == "object":
        ok = isinstance(value, dict)
    elif check == "content":  # an object is tolerated (read as its keys, as a message's content)
        ok = isinstance(value, (str, list, dict))
    else:  # "messages"
        ok = isinstance(value, list)
    if not ok:
        raise ValueError(f"{entry_type} entry: {key!r} must be {_CHECK_TEXT[check]}, got {_json_type(value)}")


def _messages_from(values: Any) -> List[Any]:
    return [message_from_dict(v) for v in values]


def _messages_to(values: Any) -> List[Any]:
    return [message_to_dict(v) for v in values]


@dataclass
class MessageEntry(SessionEntry):
    """A conversation message (any role, see :mod:`agentcore.types`)."""

    message: Any
    extra: Dict[str, Any] = _extra()
    type: ClassVar[str] = "message"
    _payload = _fields("message")
    _decoders = {"message": message_from_dict}
    _encoders = {"message": message_to_dict}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SessionEntry:
        # The shape every writer produces takes a direct constructor call (long sessions decode
        # one of these per message); anything else goes through the generic reader.
        if cls is MessageEntry and type(d) is dict and d.keys() == _MESSAGE_ENTRY_KEYS:
            message = d["message"]
            return MessageEntry(
                d["id"], d["parentId"], d["timestamp"], message_from_dict(message) if message is not None else None, {}
            )
        return super().from_dict(d)


_MESSAGE_ENTRY_KEYS = frozenset(("type", "id", "parentId", "timestamp", "message"))


@dataclass
class ThinkingLevelChangeEntry(SessionEntry):
    """The thinking level changed (``off``, ``minimal``, ``low``, ``medium``, ``high``, ``xhigh``)."""

    thinking_level: str
    extra: Dict[str, Any] = _extra()
    type: ClassVar[str] = "thinking_level_change"
    _checks = {"thinkingLevel": "str"}
    _payload = _fields("thinking_level")


@dataclass
class ModelChangeEntry(SessionEntry):
    """The model changed to ``provider``/``model_id``."""

    provider: str
    model_id: str
    extra: Dict[str, Any] = _extra()
    type: ClassVar[str] = "model_change"
    _checks = {"provider": "str", "modelId": "str"}
    _payload = _fields("provider", "model_id")


@dataclass
class ActiveToolsChangeEntry(SessionEntry):
    """The set of tools offered to the model changed (names, in order)."""

    active_tool_names: List[str]
    extra: Dict[str, Any] = _extra()
    type: ClassVar[str] = "active_tools_change"
    _payload = _fields("active_tool_names")


@dataclass
class CompactionEntry(SessionEntry):
    """History before ``first_kept_entry_id`` is replaced by ``summary`` in the context.

    ``retained_tail`` (newer reference format) holds the kept messages inside the entry instead.
    ``from_hook`` marks a summary supplied by an extension rather than the built-in summariser.
    """

    summary: str
    first_kept_entry_id: Optional[str] = None
    tokens_before: int = 0
    details: Any = None
    from_hook: Optional[bool] = None
    usage: Optional[Dict[str, Any]] = None
    retained_tail: Optional[List[Any]] = None
    extra: Dict[str, Any] = _extra()
    type: ClassVar[str] = "compaction"
    _checks = {"summary": "str", "usage": "object", "retainedTail": "messages"}
    _payload = _fields(
        "summary", "first_kept_entry_id?", "tokens_before", "details?", "from_hook?", "usage?", "retained_tail?"
    )
    _decoders = {"retained_tail": _messages_from}
    _encoders = {"retained_tail": _messages_to}


@dataclass
class BranchSummaryEntry(SessionEntry):
    """Summary of a branch the conversation left; ``from_id`` is the navigation target (or ``"root"``)."""

    from_id: str
    summary: str
    details: Any = None
    from_hook: Optional[bool] = None
    usage: Optional[Dict[str, Any]] = None
    extra: Dict[str, Any] = _extra()
    type: ClassVar[str] = "branch_summary"
    _checks = {"summary": "str", "usage": "object"}
    _payload = _fields("from_id", "summary", "details?", "from_hook?", "usage?")


@dataclass
class CustomEntry(SessionEntry):
    """Application state; not part of the context unless a projector for ``custom_type`` is given."""

    custom_type: str
    data: Any = None
    extra: Dict[str, Any] = _extra()
    type: ClassVar[str] = "custom"
    _checks = {"customType": "str"}
    _payload = _fields("custom_type", "data?")


def checked_custom_content(value: Any) -> Any:
    """``value`` as given (the stored JSON), once its blocks read back as a custom message's
    content does; ``ValueError`` naming the block (``content[1]: an 'image' block: ...``) when one
    is malformed, so a bad line is reported with its file and line when it is read, not when a
    context is built from it."""
    _blocks(value)
    return value


@dataclass
class CustomMessageEntry(SessionEntry):
    """An application message that enters the context as a ``custom`` message. Its ``content``
    is kept as stored; a malformed block makes the entry invalid (see :func:`checked_custom_content`)."""

    custom_type: str
    content: Any
    display: bool = True
    details: Any = None
    extra: Dict[str, Any] = _extra()
    type: ClassVar[str] = "custom_message"
    _checks = {"content": "content"}
    _payload = _fields("custom_type", "content", "display", "details?")
    _decoders = {"content": checked_custom_content}


@dataclass
class LabelEntry(SessionEntry):
    """Sets (or, with ``label`` None/blank, clears) the label of ``target_id``."""

    target_id: str
    label: Optional[str] = None
    extra: Dict[str, Any] = _extra()
    type: ClassVar[str] = "label"
    _checks = {"targetId": "str", "label": "str"}
    _payload = _fields("target_id", "label?")


@dataclass
class SessionInfoEntry(SessionEntry):
    """Sets the session name (the latest one wins; blank clears it)."""

    name: Optional[str] = None
    extra: Dict[str, Any] = _extra()
    type: ClassVar[str] = "session_info"
    _checks = {"name": "str"}
    _payload = _fields("name?")


@dataclass
class LeafEntry(SessionEntry):
    """Bookkeeping: the current position moved to ``target_id`` (None: before the first root).

    Never the leaf itself. ``parent_id`` is ``target_id`` when agentcore writes it (so a reader that
    takes the last entry as the leaf resumes at the target); files from other writers may have the
    leaf it moved away from. It is a tree node only when another writer appended under it.
    """

    target_id: Optional[str]
    extra: Dict[str, Any] = _extra()
    type: ClassVar[str] = "leaf"
    _payload = _fields("target_id")


@dataclass
class UnknownEntry(SessionEntry):
    """An entry type agentcore does not know; ``data`` is its JSON, written back unchanged."""

    data: Dict[str, Any] = field(default_factory=dict, repr=False)
    entry_type: str = ""

    @property
    def type(self) -> str:  # type: ignore[override]  # noqa: D401 - mirrors the JSON discriminator
        return self.entry_type

    def to_dict(self) -> Dict[str, Any]:
        return dict(self.data)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> UnknownEntry:
        return cls(
            id=d["id"], parent_id=d.get("parentId"), timestamp=d["timestamp"], data=dict(d), entry_type=str(d["type"])
        )


ENTRY_TYPES: Dict[str, Type[SessionEntry]] = {
    c.type: c
    for c in (
        MessageEntry,
        ThinkingLevelChangeEntry,
        ModelChangeEntry,
        ActiveToolsChangeEntry,
        CompactionEntry,
        BranchSummaryEntry,
        CustomEntry,
        CustomMessageEntry,
        LabelEntry,
        SessionInfoEntry,
        LeafEntry,
    )
}


def check_envelope(d: Any) -> Optional[str]:
    """Why ``d`` is not a valid entry envelope (spec §3.5 strict rules), or None when it is."""
    if type(d) is dict:  # the common case in a few lookups; anything doubtful gets the full checks
        etype, entry_id, parent, stamp = d.get("type"), d.get("id"), d.get("parentId"), d.get("timestamp")
        if (
            type(etype) is str
            and type(entry_id) is str
            and type(stamp) is str
            and entry_id
            and stamp
            and (parent is None or type(parent) is str)
            and etype != "session"
            and etype != "leaf"
        ):
            return None
    if not isinstance(d, dict):
        return "an entry must be a JSON object"
    if not isinstance(d.get("type"), str) or d.get("type") == "session":
        return "an entry needs a string 'type' (and only line 1 may be the session header)"
    if not isinstance(d.get("id"), str) or not d["id"]:
        return "an entry needs a non-empty string 'id'"
    if "parentId" in d and d["parentId"] is not None and not isinstance(d["parentId"], str):
        return "'parentId' must be a string or null"
    if not isinstance(d.get("timestamp"), str) or not d["timestamp"]:
        return "an entry needs a non-empty string 'timestamp'"
    if d["type"] == "leaf" and d.get("targetId") is not None and not isinstance(d["targetId"], str):
        return "a leaf entry's 'targetId' must be a string or null"
    return None


def entry_from_dict(d: Mapping[str, Any]) -> SessionEntry:
    """Read any entry by its ``type``. Raises ``ValueError`` naming what is wrong."""
    problem = check_envelope(d)
    if problem:
        raise ValueError(problem)
    cls = ENTRY_TYPES.get(d["type"])
    if cls is None:
        return UnknownEntry.from_dict(d)
    try:
        return cls.from_dict(d)
    except (KeyError, TypeError) as exc:
        raise ValueError(f"malformed {d['type']!r} entry: {exc}") from None


# --------------------------------------------------------------------------- header


@dataclass
class SessionHeader:
    """Line 1 of a session file: ``{"type":"session","version":3,"id","timestamp","cwd",...}``."""

    id: str
    timestamp: str
    cwd: str
    version: int = CURRENT_VERSION
    parent_session: Optional[str] = None
    metadata: Optional[Dict[str, Any]] = None
    extra: Dict[str, Any] = _extra()

    @property
    def created_ms(self) -> int:
        """The creation time in Unix milliseconds (0 when the timestamp cannot be parsed)."""
        return _ms_or_zero(self.timestamp)

    def to_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {
            "type": "session",
            "version": self.version,
            "id": self.id,
            "timestamp": self.timestamp,
            "cwd": self.cwd,
        }
        if self.parent_session is not None:
            out["parentSession"] = self.parent_session
        if self.metadata is not None:
            out["metadata"] = self.metadata
        for key, value in self.extra.items():
            out.setdefault(key, value)
        return out


def new_header(
    cwd: Optional[str] = None,
    session_id: Optional[str] = None,
    parent_session: Optional[str] = None,
    metadata: Optional[Dict[str, Any]] = None,
) -> SessionHeader:
    """The header of a session created now: ``session_id`` or a new UUIDv7-style id, the current
    time, ``cwd`` made absolute (default: the working directory). What every backend writes."""
    return SessionHeader(
        id=session_id or new_session_id(),
        timestamp=iso_from_ms(int(time.time() * 1000)),
        cwd=os.path.abspath(cwd) if cwd is not None else os.getcwd(),
        parent_session=parent_session,
        metadata=metadata,
    )


class _UnsupportedVersionError(ValueError):
    """A session header of a format version this library does not read (see :func:`header_from_dict`)."""


def header_from_dict(d: Any, *, versions: Tuple[int, ...] = (CURRENT_VERSION,)) -> SessionHeader:
    """Validate and read a header. ``versions`` lists accepted versions (1 = no ``version`` key).

    Raises ``ValueError`` naming the problem; ``_UnsupportedVersionError`` (a ValueError) for
    the header of a session file in a format version this library does not read: a newer one
    (``version`` above the ones accepted) or the reference's version-4 layout (``"kind":"header"``).
    """
    accepted = ", ".join(map(str, versions))
    if isinstance(d, dict) and d.get("kind") == "header" and "type" not in d:
        raise _UnsupportedVersionError(
            f'a session file in format version {d.get("version")!r} (lines tagged "kind", as the reference\'s '
            f"version-4 files), which this library does not read (it reads versions {accepted}); "
            "the file was left unchanged: open it with the program that wrote it, or start a new session"
        )
    if not isinstance(d, dict) or d.get("type") != "session":
        raise ValueError('line 1 must be a session header ({"type":"session",...})')
    version = d.get("version", 1)
    if type(version) is int and version > max(versions):
        raise _UnsupportedVersionError(
            f"session format version {version}, newer than this library reads (versions {accepted}): "
            "the file was written by a newer agentcore or another program and was left unchanged; "
            "upgrade agentcore to open it"
        )
    if version not in versions or isinstance(version, bool):
        raise ValueError(f"unsupported session format version {version!r} (this library reads versions {accepted})")
    if not isinstance(d.get("id"), str) or not d["id"]:
        raise ValueError("the session header needs a non-empty string 'id'")
    if not isinstance(d.get("timestamp"), str) or not d["timestamp"]:
        raise ValueError("the session header needs a string 'timestamp'")
    if not isinstance(d.get("cwd"), str):
        raise ValueError("the session header needs a string 'cwd'")
    if "parentSession" in d and not isinstance(d["parentSession"], str):
        raise ValueError("'parentSession' in the header must be a string")
    if "metadata" in d and not isinstance(d["metadata"], dict):
        raise ValueError("'metadata' in the header must be an object")
    known = {"type", "version", "id", "timestamp", "cwd", "parentSession", "metadata"}
    return SessionHeader(
        id=d["id"],
        timestamp=d["timestamp"],
        cwd=d["cwd"],
        version=version,
        parent_session=d.get("parentSession"),
        metadata=d.get("metadata"),
        extra={k: v for k, v in d.items() if k not in known},
    )

"""Content blocks, messages, usage, models and contexts: the data every other module passes around.

Every type is a dataclass with snake_case attributes. ``to_dict()`` writes the reference JSON shape
(camelCase keys, ``role``/``type`` discriminators) and ``from_dict()`` reads it back. Keys a type does
not know are kept in ``extra`` and written back unchanged, and optional keys that were absent in the
input stay absent on output while their attribute keeps the default the reader gave it (a value set
afterwards is written), so ``message_from_dict(d).to_dict() == d`` for reference session files.
``from_dict`` raises ``ValueError`` naming the key (and the block, ``content[2]: ...``) when a
required key is missing or a value has a type its readers cannot use; other odd values are kept.

Reading a long session decodes every message, so the common shapes (a plain ``dict`` holding exactly
the keys a writer always produces, nothing unknown) take a direct constructor call in ``from_dict``;
any other input goes through the generic reader, with the same result.
"""

from __future__ import annotations

import collections.abc as _abc
import copy
import math
import time
from dataclasses import MISSING, dataclass, field, fields
from enum import Enum
from typing import Any, ClassVar, Dict, FrozenSet, List, Mapping, Optional, Protocol, Sequence, Set, Tuple, Union

__all__ = [
    "ThinkingLevel",
    "ToolExecutionMode",
    "QueueMode",
    "StopReason",
    "TextContent",
    "ThinkingContent",
    "ImageContent",
    "ToolCall",
    "UsageCost",
    "Usage",
    "ModelCost",
    "Model",
    "Diagnostic",
    "UserMessage",
    "AssistantMessage",
    "ToolResultMessage",
    "SystemMessage",
    "BashExecutionMessage",
    "CompactionSummaryMessage",
    "BranchSummaryMessage",
    "CustomMessage",
    "UnknownMessage",
    "AgentContext",
    "now_ms",
    "add_usage",
    "content_from_dict",
    "message_from_dict",
    "message_to_dict",
    "role_of",
    "text_of",
]


def now_ms() -> int:
    """Current time in Unix milliseconds, the timestamp unit of every message."""
    return int(time.time() * 1000)


class _StrEnum(str, Enum):
    def __str__(self) -> str:  # "off", not "ThinkingLevel.OFF"
        return str(self.value)


class ThinkingLevel(_StrEnum):
    OFF = "off"
    MINIMAL = "minimal"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    XHIGH = "xhigh"
    MAX = "max"


class ToolExecutionMode(_StrEnum):
    SEQUENTIAL = "sequential"
    PARALLEL = "parallel"


class QueueMode(_StrEnum):
    ONE_AT_A_TIME = "one-at-a-time"
    ALL = "all"


class StopReason(_StrEnum):
    STOP = "stop"
    LENGTH = "length"
    TOOL_USE = "toolUse"
    ERROR = "error"
    ABORTED = "aborted"
    PENDING = "pending"
    DEFERRED = "deferred"


# --------------------------------------------------------------------------- wire mapping helpers
#
# Each wire type declares ``_wire``: (attribute, json key, kind) triples. Kinds:
#   "req"  always written;
#   "opt"  written only when not None;
#   "flag" written only when truthy (e.g. ``redacted``);
# A key absent from the input dict is remembered in ``_absent`` and not written back while its
# attribute still holds the value the reader filled in (see ``_as_read``), so files written by other
# implementations survive a round trip unchanged and a value set after reading is still written.

_Wire = Tuple[Tuple[str, str, str], ...]


#: Container depth from which :func:`_plain` watches for a reference cycle (below it, no cost).
_CYCLE_CHECK_DEPTH = 64


def _plain(value: Any, depth: int = 0) -> Any:
    """Convert nested wire objects, lists and enums to plain JSON values.

    A list or dict that contains itself (a tool's details or arguments built by code) raises
    ``RecursionError("... reference cycle ...")`` once the walk is :data:`_CYCLE_CHECK_DEPTH`
    containers deep, not at the interpreter's recursion limit: a finalizer the garbage collector
    ran down there would fail for want of stack ("Exception ignored in ..."). Callers that meet
    a cycle convert the value with :func:`agentcore._safe.json_safe` instead."""
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value  # most values of a message: skip the attribute probes below
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        if depth >= _CYCLE_CHECK_DEPTH:
            return _plain_watched(value, depth, set())
        return [_plain(v, depth + 1) for v in value]
    if isinstance(value, dict):
        if depth >= _CYCLE_CHECK_DEPTH:
            return _plain_watched(value, depth, set())
        return {k: _plain(v, depth + 1) for k, v in value.items()}
    return value


def _plain_watched(value: Any, depth: int, active: Set[int]) -> Any:
    """:func:`_plain` past :data:`_CYCLE_CHECK_DEPTH`: ``active`` holds the containers being
    converted, and meeting one of them again is a reference cycle."""
    if not isinstance(value, (list, tuple, dict)) or hasattr(value, "to_dict"):
        return _plain(value, depth)
    marker = id(value)
    if marker in active:
        raise RecursionError("the value contains a reference cycle (a list or dict that holds itself)")
    active.add(marker)
    try:
        if isinstance(value, dict):
            return {k: _plain_watched(v, depth + 1, active) for k, v in value.items()}
        return [_plain_watched(v, depth + 1, active) for v in value]
    finally:
        active.discard(marker)


class _WireMixin:
    _wire: ClassVar[_Wire] = ()
    _tag: ClassVar[Tuple[str, str]] = ("", "")  # ("role" | "type", value)
    #: JSON keys that, when present, must hold a string (null refused too): other consumers
    #: (tool-call pairing, rendering) use them as dict keys or text, so a wrong type is refused
    #: at decode
    _str_keys: ClassVar[Tuple[str, ...]] = ()
    #: how errors name this object ("usage", "a 'toolCall' block", ...)
    _json_name: ClassVar[str] = ""

    def to_dict(self) -> Dict[str, Any]:
        """The reference JSON shape of this object (camelCase keys)."""
        out: Dict[str, Any] = {}
        absent = getattr(self, "_absent", ())
        tag_key, tag_value = self._tag
        if tag_key:
            out[tag_key] = getattr(self, tag_key, tag_value)
        for attr, key, kind in self._wire:
            value = getattr(self, attr)
            if kind == "opt" and value is None:
                continue
            if key in absent and self._as_read(attr, value):
                continue
            if kind == "flag" and not value:
                continue
            out[key] = _plain(value)
        extra = getattr(self, "extra", None)
        if extra:
            for k, v in extra.items():
                out.setdefault(k, copy.deepcopy(v))
        return out

    def _raw_dict(self) -> Dict[str, Any]:
        """The JSON keys with their values as they are (not copied, not converted): for a caller
        that makes them JSON-safe itself when :meth:`to_dict` cannot copy a value (a reference
        cycle, a socket in a tool result's details)."""
        tag_key, tag_value = self._tag
        out: Dict[str, Any] = {tag_key: getattr(self, tag_key, tag_value)} if tag_key else {}
        for attr, key, kind in self._wire:
            value = getattr(self, attr)
            if value is not None or kind != "opt":
                out[key] = value
        return out

    def _as_read(self, attr: str, value: Any) -> bool:
        """True while ``value`` of ``attr`` (whose key was absent from the input) is still what the
        reader filled in: the field's default. A made-up read time (``timestamp``) counts as
        unchanged, since it cannot be told from a time set later."""
        f = self.__dataclass_fields__[attr]  # type: ignore[attr-defined]
        if f.default is not MISSING:
            expected = f.default
        elif f.default_factory is now_ms:
            return True
        elif f.default_factory is not MISSING:
            expected = f.default_factory()
        else:  # a required field: never absent (the reader refuses that)
            return False
        return type(value) is type(expected) and value == expected

    @classmethod
    def _kwargs_from(cls, d: Mapping[str, Any], convert: Mapping[str, Any] = {}) -> Dict[str, Any]:
        """Constructor arguments from JSON ``d``. Raises ``ValueError`` naming the key when ``d``
        is not an object, a required key is missing, a ``_str_keys`` value is not a string or a
        converter refuses a value."""
        if type(d) is not dict and not _is_mapping(d):
            raise ValueError(f"{cls._json_name or cls.__name__} must be a JSON object, got {_json_type(d)}")
        for key in cls._str_keys:
            value = d.get(key, "")
            if not isinstance(value, str):
                raise ValueError(f"{cls._json_name or cls.__name__}: {key!r} must be a string, got {_json_type(value)}")
        # Hot path when loading long sessions: the known-key set is computed once per class.
        known = cls.__dict__.get("_known_keys")
        if known is None:
            known = frozenset([key for _, key, _ in cls._wire] + ([cls._tag[0]] if cls._tag[0] else []))
            cls._known_keys = known  # type: ignore[attr-defined]
        kwargs: Dict[str, Any] = {}
        absent = []
        for attr, key, _kind in cls._wire:
            if key in d:
                value = d[key]
                if value is not None and attr in convert:
                    value = convert[attr](value)
                kwargs[attr] = value
            else:
                absent.append(key)
        if not known.issuperset(d):
            kwargs["extra"] = {k: copy.deepcopy(v) for k, v in d.items() if k not in known}
        if absent:
            required = cls.__dict__.get("_required_keys")
            if required is None:
                no_default = {
                    f.name
                    for f in fields(cls)  # type: ignore[arg-type]
                    if f.default is MISSING and f.default_factory is MISSING
                }
                required = tuple(key for attr, key, _ in cls._wire if attr in no_default)
                cls._required_keys = required  # type: ignore[attr-defined]
            for key in required:
                if key not in d:
                    where = f"{cls._json_name}: " if cls._json_name else ""
                    raise ValueError(f"{where}the required key {key!r} is missing")
            shape = frozenset(absent)
            kwargs["_absent"] = _ABSENT_SETS.setdefault(shape, shape)  # one shared set per shape
        return kwargs


_ABSENT_SETS: Dict[FrozenSet[str], FrozenSet[str]] = {}


_SHARED_STRINGS: Dict[str, str] = {}


def _shared(value: Any) -> Any:
    """One shared copy of a short string that repeats across messages (api, model, tool name, ...):
    a long session holds it once instead of once per message. The table keeps at most 4096 strings
    (not ``sys.intern``: some Python versions never free interned strings)."""
    if type(value) is str:
        shared = _SHARED_STRINGS.get(value)
        if shared is not None:
            return shared
        if len(value) < 64 and len(_SHARED_STRINGS) < 4096:
            _SHARED_STRINGS[value] = value
    return value


def _json_type(value: Any) -> str:
    """The JSON name of a decoded value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "an array"
    if _is_mapping(value):
        return "an object"
    return type(value).__name__


def _absent_keys(*keys: str) -> FrozenSet[str]:
    """The ``_absent`` set the generic reader computes for inputs lacking exactly ``keys`` (shared by
    every object the fast paths build; frozensets are immutable)."""
    shape = frozenset(keys)
    return _ABSENT_SETS.setdefault(shape, shape)


def _is_mapping(value: Any) -> bool:
    """``isinstance(value, Mapping)`` with fast paths for plain dicts and this module's own
    message/content types (the ABC check is slow and ``role_of`` runs for every message)."""
    cls = type(value)
    if cls is dict:
        return True
    if cls in _NOT_MAPPINGS:
        return False
    return isinstance(value, _abc.Mapping)


def _extra() -> Any:
    return field(default_factory=dict, repr=False, compare=False)


def _absent() -> Any:
    return field(default=frozenset(), repr=False, compare=False)


# --------------------------------------------------------------------------- content blocks


@dataclass
class TextContent(_WireMixin):
    """A text block. ``text_signature`` is opaque provider metadata, replayed to the same model."""

    text: str
    text_signature: Optional[str] = None
    extra: Dict[str, Any] = _extra()
    _absent: FrozenSet[str] = _absent()
    type: ClassVar[str] = "text"
    _tag = ("type", "text")
    _str_keys = ("text",)
    _json_name = "a 'text' block"
    _wire = (("text", "text", "req"), ("text_signature", "textSignature", "opt"))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TextContent:
        if cls is TextContent and type(d) is dict and d.keys() == _TEXT_KEYS and type(d["text"]) is str:
            return TextContent(d["text"], None, {}, _NO_TEXT_SIGNATURE)
        return cls(**cls._kwargs_from(d))


_TEXT_KEYS = frozenset(("type", "text"))
_NO_TEXT_SIGNATURE = _absent_keys("textSignature")


@dataclass
class ThinkingContent(_WireMixin):
    """Model reasoning. When ``redacted`` the opaque payload lives in ``thinking_signature``."""

    thinking: str
    thinking_signature: Optional[str] = None
    redacted: bool = False
    extra: Dict[str, Any] = _extra()
    _absent: FrozenSet[str] = _absent()
    type: ClassVar[str] = "thinking"
    _tag = ("type", "thinking")
    _str_keys = ("thinking",)
    _json_name = "a 'thinking' block"
    _wire = (
        ("thinking", "thinking", "req"),
        ("thinking_signature", "thinkingSignature", "opt"),
        ("redacted", "redacted", "flag"),
    )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ThinkingContent:
        if cls is ThinkingContent and type(d) is dict and d.keys() == _THINKING_KEYS and type(d["thinking"]) is str:
            return ThinkingContent(d["thinking"], d["thinkingSignature"], False, {}, _NO_REDACTED)
        kwargs = cls._kwargs_from(d)
        if "redacted" in d and not d["redacted"]:
            kwargs.setdefault("extra", {})["redacted"] = d["redacted"]  # keep an explicit false on round trip
        return cls(**kwargs)


_THINKING_KEYS = frozenset(("type", "thinking", "thinkingSignature"))
_NO_REDACTED = _absent_keys("redacted")


@dataclass
class ImageContent(_WireMixin):
    """An image as base64 ``data`` (no data-URL prefix) and its ``mime_type``."""

    data: str
    mime_type: str
    extra: Dict[str, Any] = _extra()
    _absent: FrozenSet[str] = _absent()
    type: ClassVar[str] = "image"
    _tag = ("type", "image")
    _json_name = "an 'image' block"
    _wire = (("data", "data", "req"), ("mime_type", "mimeType", "req"))

    def __repr__(self) -> str:
        # the size, not the data: an image is megabytes of base64 in a notebook, a log or a traceback
        data = self.data
        size = f"{len(data)} characters" if isinstance(data, (str, bytes, bytearray)) else type(data).__name__
        return f"{type(self).__qualname__}(data=<{size}>, mime_type={self.mime_type!r})"

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ImageContent:
        return cls(**cls._kwargs_from(d))


@dataclass
class ToolCall(_WireMixin):
    """A tool call requested by the model. ``arguments`` is never None (``{}`` at least)."""

    id: str
    name: str
    arguments: Dict[str, Any] = field(default_factory=dict)
    thought_signature: Optional[str] = None
    extra: Dict[str, Any] = _extra()
    _absent: FrozenSet[str] = _absent()
    type: ClassVar[str] = "toolCall"
    _tag = ("type", "toolCall")
    _json_name = "a 'toolCall' block"
    _wire = (
        ("id", "id", "req"),
        ("name", "name", "req"),
        ("arguments", "arguments", "req"),
        ("thought_signature", "thoughtSignature", "opt"),
    )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ToolCall:
        if (
            cls is ToolCall
            and type(d) is dict
            and d.keys() == _TOOL_CALL_KEYS
            and d["arguments"] is not None
            and type(call_id := d["id"]) is str
            and type(name := d["name"]) is str
        ):
            return ToolCall(call_id, _shared(name), d["arguments"], None, {}, _NO_THOUGHT_SIGNATURE)
        kwargs = cls._kwargs_from(d)
        if kwargs.get("arguments") is None and "arguments" in d:
            kwargs["arguments"] = {}
            kwargs.setdefault("extra", {})["arguments"] = None
        return cls(**kwargs)


_TOOL_CALL_KEYS = frozenset(("type", "id", "name", "arguments"))
_NO_THOUGHT_SIGNATURE = _absent_keys("thoughtSignature")

Content = Union[TextContent, ThinkingContent, ImageContent, ToolCall]
_BLOCKS: Dict[str, Any] = {
    "text": TextContent,
    "thinking": ThinkingContent,
    "image": ImageContent,
    "toolCall": ToolCall,
}


def content_from_dict(d: Any) -> Any:
    """Read one content block; an unknown block type (or a ``type`` that is not a string) is
    returned as the plain dict it was, a value that is not an object as it is. ``ValueError``
    naming the key when a known block is malformed (a required key missing, a text not a string)."""
    if _is_mapping(d):
        kind = d.get("type")
        cls = _BLOCKS.get(kind) if type(kind) is str else None  # a list "type" is unknown, not a crash
        return cls.from_dict(d) if cls is not None else dict(d)
    return d


def _blocks(value: Any) -> Any:
    """A ``content`` value read back: block dicts as block objects. ``ValueError`` naming the block
    (``content[2]: a 'toolCall' block: ...``) when one is malformed."""
    if type(value) is list:  # content_from_dict inlined: one call per message, not per block
        out: List[Any] = []
        append = out.append
        try:
            for block in value:
                if type(block) is dict:
                    kind = block.get("type")
                    # TextContent.from_dict's fast path, inlined (the text read once: this runs per block)
                    if kind == "text" and block.keys() == _TEXT_KEYS and type(text := block["text"]) is str:
                        append(TextContent(text, None, {}, _NO_TEXT_SIGNATURE))
                        continue
                    cls = _BLOCKS.get(kind) if type(kind) is str else None
                    append(cls.from_dict(block) if cls is not None else dict(block))
                else:
                    append(content_from_dict(block))
        except ValueError as exc:
            raise ValueError(f"content[{len(out)}]: {exc}") from None  # len(out): the failing block
        return out
    if isinstance(value, str) or value is None:
        return value
    if isinstance(value, (int, float)):  # bool included: not iterable, nothing a reader can show
        raise ValueError(f"'content' must be a string or an array of blocks, got {_json_type(value)}")
    return [content_from_dict(b) for b in value]  # an object: its keys, as before (tolerated)


# --------------------------------------------------------------------------- usage and models


@dataclass
class UsageCost(_WireMixin):
    """Cost in USD, per token category and in total."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    total: float = 0.0
    extra: Dict[str, Any] = _extra()
    _absent: FrozenSet[str] = _absent()
    _json_name = "'cost'"
    _wire = (
        ("input", "input", "req"),
        ("output", "output", "req"),
        ("cache_read", "cacheRead", "req"),
        ("cache_write", "cacheWrite", "req"),
        ("total", "total", "req"),
    )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> UsageCost:
        if cls is UsageCost and type(d) is dict and d.keys() == _COST_KEYS:
            return UsageCost(d["input"], d["output"], d["cacheRead"], d["cacheWrite"], d["total"])
        return cls(**cls._kwargs_from(d))


_COST_KEYS = frozenset(("input", "output", "cacheRead", "cacheWrite", "total"))


@dataclass
class Usage(_WireMixin):
    """Token counts of one response. ``input`` means uncached prompt tokens."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    total_tokens: int = 0
    cost: UsageCost = field(default_factory=UsageCost)
    extra: Dict[str, Any] = _extra()
    _absent: FrozenSet[str] = _absent()
    _json_name = "'usage'"
    _wire = (
        ("input", "input", "req"),
        ("output", "output", "req"),
        ("cache_read", "cacheRead", "req"),
        ("cache_write", "cacheWrite", "req"),
        ("total_tokens", "totalTokens", "req"),
        ("cost", "cost", "req"),
    )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Usage:
        if cls is Usage and type(d) is dict and d.keys() == _USAGE_KEYS:
            cost = d["cost"]
            if type(cost) is dict and cost.keys() == _COST_KEYS:  # UsageCost.from_dict's fast path, inlined
                cost = UsageCost(cost["input"], cost["output"], cost["cacheRead"], cost["cacheWrite"], cost["total"])
            elif cost is not None:  # a recorded null stays None to round-trip
                cost = UsageCost.from_dict(cost)
            return Usage(d["input"], d["output"], d["cacheRead"], d["cacheWrite"], d["totalTokens"], cost)
        kwargs = cls._kwargs_from(d, {"cost": UsageCost.from_dict})
        kwargs.setdefault("cost", UsageCost())
        return cls(**kwargs)


_USAGE_KEYS = frozenset(("input", "output", "cacheRead", "cacheWrite", "totalTokens", "cost"))


#: (attribute, wire key) of the figures :func:`add_usage` sums: tokens, then cost
_USAGE_TOKENS = (
    ("input", "input"),
    ("output", "output"),
    ("cache_read", "cacheRead"),
    ("cache_write", "cacheWrite"),
    ("total_tokens", "totalTokens"),
)
_USAGE_COSTS = (
    ("input", "input"),
    ("output", "output"),
    ("cache_read", "cacheRead"),
    ("cache_write", "cacheWrite"),
    ("total", "total"),
)


def add_usage(total: Usage, usage: Any) -> Usage:
    """Add ``usage`` to ``total`` (in place) and return ``total``: tokens and cost.

    ``usage`` is a :class:`Usage` (or an object with its attributes) or its wire dict (what a
    session entry stores). None adds nothing, and so does a figure that is not a number (a
    recorded null cost, a hand-edited file, NaN or infinity): sums of billed usage never fail on
    one odd report. A ``total`` whose ``cost`` is None (read from a recorded null) gets a
    :class:`UsageCost` when a cost is added.
    """
    if usage is None:
        return total
    if _is_mapping(usage):
        cost = usage.get("cost")
        tokens = [usage.get(key) for _, key in _USAGE_TOKENS]
        costs = [cost.get(key) for _, key in _USAGE_COSTS] if _is_mapping(cost) else []
    else:
        cost = getattr(usage, "cost", None)
        tokens = [getattr(usage, attr, None) for attr, _ in _USAGE_TOKENS]
        costs = [getattr(cost, attr, None) for attr, _ in _USAGE_COSTS] if cost is not None else []
    for (attr, _), value in zip(_USAGE_TOKENS, tokens):
        if _is_figure(value):
            setattr(total, attr, getattr(total, attr) + value)
    added = [(attr, value) for (attr, _), value in zip(_USAGE_COSTS, costs) if _is_figure(value)]
    if added and total.cost is None:  # a total read with a recorded null cost: now it has one
        total.cost = UsageCost()
    for attr, value in added:
        setattr(total.cost, attr, getattr(total.cost, attr) + value)
    return total


def _is_figure(value: Any) -> bool:
    """Whether a usage figure can be added: an int (not a bool) or a finite float (NaN or infinity
    would turn every later sum into NaN)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


@dataclass
class ModelCost(_WireMixin):
    """Prices in USD per million tokens."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    extra: Dict[str, Any] = _extra()
    _absent: FrozenSet[str] = _absent()
    _wire = (
        ("input", "input", "req"),
        ("output", "output", "req"),
        ("cache_read", "cacheRead", "req"),
        ("cache_write", "cacheWrite", "req"),
    )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ModelCost:
        return cls(**cls._kwargs_from(d))


@dataclass
class Model(_WireMixin):
    """One model at one endpoint. ``api`` selects the wire protocol, ``provider`` the account/key.

    A local OpenAI-compatible server is
    ``Model(id="llama3", api="openai-completions", provider="local", base_url="http://127.0.0.1:8080/v1")``.

    ``thinking_level_map`` (JSON ``thinkingLevelMap``) maps thinking levels (``"off"``,
    ``"minimal"`` ... ``"max"``) to the provider's own effort value; ``None`` marks a level the
    model does not support (a request for it uses the nearest supported level), a missing key
    uses the provider default. Catalogs older than it carry ``compat.reasoningEffortMap``, which
    is still read (see :func:`agentcore.providers.reasoning.thinking_level_map`).
    """

    id: str
    name: Optional[str] = None
    api: str = "unknown"
    provider: str = "unknown"
    base_url: str = ""
    reasoning: bool = False
    input: Tuple[str, ...] = ("text",)
    cost: ModelCost = field(default_factory=ModelCost)
    context_window: int = 128000
    max_tokens: int = 16384
    headers: Optional[Dict[str, str]] = field(default=None, repr=False)  # may carry credentials
    compat: Optional[Dict[str, Any]] = None
    thinking_level_map: Optional[Dict[str, Optional[str]]] = None
    extra: Dict[str, Any] = _extra()
    _absent: FrozenSet[str] = _absent()
    _wire = (
        ("id", "id", "req"),
        ("name", "name", "opt"),
        ("api", "api", "req"),
        ("provider", "provider", "req"),
        ("base_url", "baseUrl", "req"),
        ("reasoning", "reasoning", "req"),
        ("input", "input", "req"),
        ("cost", "cost", "req"),
        ("context_window", "contextWindow", "req"),
        ("max_tokens", "maxTokens", "req"),
        ("headers", "headers", "opt"),
        ("compat", "compat", "opt"),
        ("thinking_level_map", "thinkingLevelMap", "opt"),
    )

    def __post_init__(self) -> None:
        if self.name is None:
            self.name = self.id
        self.input = tuple(self.input)

    def __repr__(self) -> str:
        # the dataclass repr, with credentials in base_url (https://user:secret@proxy/v1, ?key=...)
        # masked: a model is printed in notebooks, logs and tracebacks (headers are not shown at all)
        from ._safe import redact_url

        parts = []
        for f in fields(self):
            if f.repr:
                value = getattr(self, f.name)
                if f.name == "base_url" and isinstance(value, str):
                    value = redact_url(value)
                parts.append(f"{f.name}={value!r}")
        return f"{type(self).__qualname__}({', '.join(parts)})"

    def _as_read(self, attr: str, value: Any) -> bool:
        if attr == "name":  # an absent name reads as the id
            return value == self.id
        return super()._as_read(attr, value)

    @property
    def key(self) -> str:
        """``"provider/id"``, the form :func:`agentcore.get_model` accepts."""
        return f"{self.provider}/{self.id}"

    @classmethod
    def placeholder(cls) -> Model:
        """The model an Agent has before one is chosen (id, api and provider ``"unknown"``)."""
        return cls(
            id="unknown",
            name="unknown",
            api="unknown",
            provider="unknown",
            base_url="",
            reasoning=False,
            input=(),
            context_window=0,
            max_tokens=0,
        )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Model:
        return cls(**cls._kwargs_from(d, {"cost": ModelCost.from_dict, "input": tuple}))


# --------------------------------------------------------------------------- messages


@dataclass
class UserMessage(_WireMixin):
    """A user turn: a string or a list of text/image blocks."""

    content: Union[str, List[Any]]
    timestamp: int = field(default_factory=now_ms)
    extra: Dict[str, Any] = _extra()
    _absent: FrozenSet[str] = _absent()
    role: ClassVar[str] = "user"
    _tag = ("role", "user")
    _wire = (("content", "content", "req"), ("timestamp", "timestamp", "req"))

    @property
    def text(self) -> str:
        """The content's text: a ``str`` content as it is, else all text blocks joined (images left
        out), as ``AssistantMessage.text``."""
        return text_of(self.content)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> UserMessage:
        if cls is UserMessage and type(d) is dict and d.keys() == _USER_KEYS:
            return UserMessage(_blocks(d["content"]), d["timestamp"])
        return cls(**cls._kwargs_from(d, {"content": _blocks}))


_USER_KEYS = frozenset(("role", "content", "timestamp"))


@dataclass
class SystemMessage(_WireMixin):
    """A system-role message inside the transcript (newest reference builds)."""

    content: Union[str, List[Any]]
    timestamp: int = field(default_factory=now_ms)
    extra: Dict[str, Any] = _extra()
    _absent: FrozenSet[str] = _absent()
    role: ClassVar[str] = "system"
    _tag = ("role", "system")
    _wire = (("content", "content", "req"), ("timestamp", "timestamp", "req"))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SystemMessage:
        return cls(**cls._kwargs_from(d, {"content": _blocks}))


@dataclass
class Diagnostic(_WireMixin):
    """One provider or runtime note attached to an :class:`AssistantMessage` (reference
    ``AssistantMessageDiagnostic``): a failure or a recovery the message text does not show.

    ``type`` names it (``"provider_error"``, ``"stream_recovery"``, ...), ``timestamp`` is Unix
    milliseconds, ``error`` is ``{"name"?, "message", "code"?}`` when an error caused it and
    ``details`` holds JSON facts (an HTTP status, a request id). Secrets are never recorded.
    """

    type: str
    timestamp: int = field(default_factory=now_ms)
    error: Optional[Dict[str, Any]] = None
    details: Optional[Dict[str, Any]] = None
    extra: Dict[str, Any] = _extra()
    _absent: FrozenSet[str] = _absent()
    _wire = (
        ("type", "type", "req"),
        ("timestamp", "timestamp", "req"),
        ("error", "error", "opt"),
        ("details", "details", "opt"),
    )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Diagnostic:
        return cls(**cls._kwargs_from(d))


def _diagnostics(value: Any) -> Any:
    """A ``diagnostics`` list read back: known entries as :class:`Diagnostic`, anything else kept as is."""
    if not isinstance(value, list):
        return value
    return [Diagnostic.from_dict(d) if _is_mapping(d) and isinstance(d.get("type"), str) else d for d in value]


@dataclass
class AssistantMessage(_WireMixin):
    """A model response. ``stop_reason`` is one of :class:`StopReason`; errors carry ``error_message``.

    ``response_id`` is the provider's id of the response and ``response_model`` the model the
    server says answered, set only when it differs from ``model`` (a router's ``auto``, a dated
    snapshot); ``diagnostics`` is a list of :class:`Diagnostic` (failures and recoveries). All
    three stay None, and absent from the JSON, when the stream did not carry them.
    """

    content: List[Any] = field(default_factory=list)
    api: str = "unknown"
    provider: str = "unknown"
    model: str = "unknown"
    usage: Usage = field(default_factory=Usage)
    stop_reason: str = "stop"
    error_message: Optional[str] = None
    timestamp: int = field(default_factory=now_ms)
    response_id: Optional[str] = None
    response_model: Optional[str] = None
    diagnostics: Optional[List[Any]] = None
    extra: Dict[str, Any] = _extra()
    _absent: FrozenSet[str] = _absent()
    role: ClassVar[str] = "assistant"
    _tag = ("role", "assistant")
    _wire = (
        ("content", "content", "req"),
        ("api", "api", "req"),
        ("provider", "provider", "req"),
        ("model", "model", "req"),
        ("usage", "usage", "req"),
        ("stop_reason", "stopReason", "req"),
        ("timestamp", "timestamp", "req"),
        # set while streaming, so after timestamp in the reference's files; absent when None
        ("response_id", "responseId", "opt"),
        ("response_model", "responseModel", "opt"),
        ("error_message", "errorMessage", "opt"),  # the reference sets it last, after timestamp
        ("diagnostics", "diagnostics", "opt"),
    )

    @property
    def tool_calls(self) -> List[ToolCall]:
        """The tool-call blocks of ``content``, in source order."""
        return [b for b in self.content if isinstance(b, ToolCall)]

    @property
    def text(self) -> str:
        """All text blocks joined (thinking and tool calls left out); a ``str`` content (another
        writer's shape) as it is."""
        if isinstance(self.content, str):
            return self.content
        return "".join(b.text for b in self.content if isinstance(b, TextContent))

    def copy(self) -> AssistantMessage:
        """A shallow copy with its own content list (what message_start/update events carry)."""
        if type(self) is not AssistantMessage:  # a subclass may add slots or its own __copy__
            clone = copy.copy(self)
            clone.content = list(self.content)
            return clone
        # one copy per streamed token: skip copy.copy's generic __reduce_ex__ path (4x slower)
        clone = object.__new__(AssistantMessage)
        state = self.__dict__.copy()
        state["content"] = list(self.content)
        clone.__dict__ = state
        return clone

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AssistantMessage:
        if cls is AssistantMessage and type(d) is dict:
            keys = d.keys()
            if keys == _ASSISTANT_KEYS or keys == _ASSISTANT_ERROR_KEYS:
                content, usage = d["content"], d["usage"]
                return AssistantMessage(
                    _blocks(content) if content is not None else [],
                    _shared(d["api"]),
                    _shared(d["provider"]),
                    _shared(d["model"]),
                    Usage.from_dict(usage) if usage is not None else None,  # type: ignore[arg-type]  # as Usage.cost
                    _shared(d["stopReason"]),
                    d.get("errorMessage"),
                    d["timestamp"],
                    extra={},
                    _absent=_NO_ERROR_MESSAGE if len(keys) == len(_ASSISTANT_KEYS) else _NOTHING_ABSENT,
                )
        kwargs = cls._kwargs_from(d, {"content": _blocks, "usage": Usage.from_dict, "diagnostics": _diagnostics})
        kwargs.setdefault("usage", Usage())
        if kwargs.get("content") is None:
            kwargs["content"] = []
        return cls(**kwargs)


_ASSISTANT_KEYS = frozenset(("role", "content", "api", "provider", "model", "usage", "stopReason", "timestamp"))
_ASSISTANT_ERROR_KEYS = _ASSISTANT_KEYS | {"errorMessage"}
_NO_ERROR_MESSAGE = _absent_keys("errorMessage", "responseId", "responseModel", "diagnostics")
_NOTHING_ABSENT = _absent_keys("responseId", "responseModel", "diagnostics")  # as the generic reader


@dataclass
class ToolResultMessage(_WireMixin):
    """The outcome of one tool call. ``details`` is for the application and never sent to a model."""

    tool_call_id: str
    tool_name: str
    content: List[Any] = field(default_factory=list)
    details: Any = None
    is_error: bool = False
    usage: Optional[Usage] = None
    added_tool_names: Optional[List[str]] = None
    timestamp: int = field(default_factory=now_ms)
    extra: Dict[str, Any] = _extra()
    _absent: FrozenSet[str] = _absent()
    role: ClassVar[str] = "toolResult"
    _tag = ("role", "toolResult")
    _wire = (
        ("tool_call_id", "toolCallId", "req"),
        ("tool_name", "toolName", "req"),
        ("content", "content", "req"),
        ("details", "details", "opt"),
        ("is_error", "isError", "req"),
        ("usage", "usage", "opt"),
        ("added_tool_names", "addedToolNames", "opt"),
        ("timestamp", "timestamp", "req"),
    )

    @property
    def text(self) -> str:
        """All text blocks joined (images left out); a ``str`` content as it is."""
        if isinstance(self.content, str):
            return self.content
        return "".join(b.text for b in self.content if isinstance(b, TextContent))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ToolResultMessage:
        if cls is ToolResultMessage and type(d) is dict:
            keys = d.keys()
            if (keys == _RESULT_KEYS or (keys == _RESULT_DETAILS_KEYS and d["details"] is not None)) and type(
                call_id := d["toolCallId"]
            ) is str:
                content = d["content"]
                return ToolResultMessage(
                    call_id,
                    _shared(d["toolName"]),
                    _blocks(content) if content is not None else [],
                    d.get("details"),
                    d["isError"],
                    None,
                    None,
                    d["timestamp"],
                    {},
                    _NO_RESULT_OPTIONS if len(keys) == len(_RESULT_KEYS) else _NO_RESULT_USAGE,
                )
        kwargs = cls._kwargs_from(d, {"content": _blocks, "usage": Usage.from_dict})
        if "details" in d and d["details"] is None:
            kwargs.setdefault("extra", {})["details"] = None  # explicit null survives the round trip
        if kwargs.get("content") is None:
            kwargs["content"] = []
        return cls(**kwargs)


_RESULT_KEYS = frozenset(("role", "toolCallId", "toolName", "content", "isError", "timestamp"))
_RESULT_DETAILS_KEYS = _RESULT_KEYS | {"details"}
_NO_RESULT_OPTIONS = _absent_keys("details", "usage", "addedToolNames")
_NO_RESULT_USAGE = _absent_keys("usage", "addedToolNames")


@dataclass
class BashExecutionMessage(_WireMixin):
    """A shell command the user ran themselves (not a tool call), kept in the transcript."""

    command: str
    output: str
    exit_code: Optional[int] = None
    cancelled: bool = False
    truncated: bool = False
    full_output_path: Optional[str] = None
    exclude_from_context: Optional[bool] = None
    timestamp: int = field(default_factory=now_ms)
    extra: Dict[str, Any] = _extra()
    _absent: FrozenSet[str] = _absent()
    role: ClassVar[str] = "bashExecution"
    _tag = ("role", "bashExecution")
    _wire = (
        ("command", "command", "req"),
        ("output", "output", "req"),
        ("exit_code", "exitCode", "req"),
        ("cancelled", "cancelled", "req"),
        ("truncated", "truncated", "req"),
        ("full_output_path", "fullOutputPath", "opt"),
        ("exclude_from_context", "excludeFromContext", "opt"),
        ("timestamp", "timestamp", "req"),
    )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BashExecutionMessage:
        return cls(**cls._kwargs_from(d))


@dataclass
class CompactionSummaryMessage(_WireMixin):
    """Summary of history that was compacted away (built from a ``compaction`` session entry)."""

    summary: str
    tokens_before: int = 0
    timestamp: int = field(default_factory=now_ms)
    extra: Dict[str, Any] = _extra()
    _absent: FrozenSet[str] = _absent()
    role: ClassVar[str] = "compactionSummary"
    _tag = ("role", "compactionSummary")
    _wire = (
        ("summary", "summary", "req"),
        ("tokens_before", "tokensBefore", "req"),
        ("timestamp", "timestamp", "req"),
    )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CompactionSummaryMessage:
        return cls(**cls._kwargs_from(d))


@dataclass
class BranchSummaryMessage(_WireMixin):
    """Summary of a branch the conversation came back from (built from a ``branch_summary`` entry)."""

    summary: str
    from_id: str = ""
    timestamp: int = field(default_factory=now_ms)
    extra: Dict[str, Any] = _extra()
    _absent: FrozenSet[str] = _absent()
    role: ClassVar[str] = "branchSummary"
    _tag = ("role", "branchSummary")
    _wire = (("summary", "summary", "req"), ("from_id", "fromId", "req"), ("timestamp", "timestamp", "req"))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BranchSummaryMessage:
        return cls(**cls._kwargs_from(d))


@dataclass
class CustomMessage(_WireMixin):
    """An application message; sent to the model as a user message. ``display`` is for UIs only."""

    custom_type: str
    content: Union[str, List[Any]]
    display: bool = True
    details: Any = None
    timestamp: int = field(default_factory=now_ms)
    extra: Dict[str, Any] = _extra()
    _absent: FrozenSet[str] = _absent()
    role: ClassVar[str] = "custom"
    _tag = ("role", "custom")
    _wire = (
        ("custom_type", "customType", "req"),
        ("content", "content", "req"),
        ("display", "display", "req"),
        ("details", "details", "opt"),
        ("timestamp", "timestamp", "req"),
    )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CustomMessage:
        return cls(**cls._kwargs_from(d, {"content": _blocks}))


@dataclass
class UnknownMessage:
    """A message whose role agentcore does not know; its JSON is kept verbatim."""

    role: str
    data: Dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> Dict[str, Any]:
        return copy.deepcopy(self.data)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> UnknownMessage:
        return cls(role=str(d.get("role")), data=copy.deepcopy(dict(d)))


class MessageLike(Protocol):
    """What the agent accepts as a message: anything with a ``role`` (the message classes above,
    :class:`UnknownMessage`, or an application's own message objects)."""

    @property
    def role(self) -> str: ...


#: What ``Agent.prompt()`` and ``Agent.stream()`` accept: a str (one user message), a message, a
#: dict in the reference JSON shape, or a list of those (str items are user messages).
PromptInput = Union[str, MessageLike, Mapping[str, Any], Sequence[Union[str, MessageLike, Mapping[str, Any]]]]


_MESSAGES = {
    c.role: c
    for c in (
        UserMessage,
        SystemMessage,
        AssistantMessage,
        ToolResultMessage,
        BashExecutionMessage,
        CompactionSummaryMessage,
        BranchSummaryMessage,
        CustomMessage,
    )
}
#: exact classes (not subclasses) that are known not to be mappings, see _is_mapping
_NOT_MAPPINGS = frozenset(list(_MESSAGES.values()) + list(_BLOCKS.values()) + [UnknownMessage, Usage, str])


def message_from_dict(d: Mapping[str, Any]) -> Any:
    """Read any message by its ``role``; an unknown role becomes an :class:`UnknownMessage`.

    Raises ``ValueError`` naming the problem when ``d`` is not a mapping with a string ``role``.
    """
    if type(d) is dict:  # the usual input (decoded JSON): the checks below, in fewer steps
        role = d.get("role")
        cls = _MESSAGES.get(role) if type(role) is str else None
        if cls is not None:
            try:
                return cls.from_dict(d)
            except TypeError as exc:  # a required key is missing
                raise ValueError(f"malformed {role!r} message: {exc}") from None
            except ValueError as exc:  # a field of the wrong JSON type, named by the reader
                raise ValueError(f"malformed {role!r} message: {exc}") from None
    elif not _is_mapping(d):
        raise ValueError(f"a message must be a JSON object, got {type(d).__name__}")
    role = d.get("role")
    if not isinstance(role, str):
        raise ValueError(f"a message needs a string 'role', got {role!r}")
    cls = _MESSAGES.get(role)
    if cls is None:
        return UnknownMessage.from_dict(d)
    try:
        return cls.from_dict(d)
    except (TypeError, ValueError) as exc:  # a required key is missing, or a field has the wrong type
        raise ValueError(f"malformed {role!r} message: {exc}") from None


def message_to_dict(message: Any) -> Dict[str, Any]:
    """The reference JSON shape of any message: a wire dataclass, an object with ``to_dict`` or a dict."""
    if _is_mapping(message):
        return _plain(dict(message))
    if hasattr(message, "to_dict"):
        return message.to_dict()
    raise TypeError(f"cannot serialise message of type {type(message).__name__}")


def role_of(message: Any) -> Optional[str]:
    """The ``role`` of a message object or dict (custom application messages may be either)."""
    if _is_mapping(message):
        return message.get("role")
    return getattr(message, "role", None)


def text_of(content: Union[str, Sequence[Any], None]) -> str:
    """The text of a ``str`` or block-list content, images and tool calls left out."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts: List[str] = []
    block: Any  # a block or a plain dict
    for block in content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif _is_mapping(block) and block.get("type") == "text":
            text = block.get("text")
            if text is not None:  # a null text is no text, not "None"
                parts.append(str(text))
    return "".join(parts)


# --------------------------------------------------------------------------- contexts


@dataclass
class AgentContext:
    """What one LLM call sees: the system prompt, the messages and the tools (``AgentTool`` objects)."""

    system_prompt: str = ""
    messages: List[Any] = field(default_factory=list)
    tools: Optional[List[Any]] = None

    def copy(self) -> AgentContext:
        """A copy with its own message and tool lists (the items are shared)."""
        return AgentContext(self.system_prompt, list(self.messages), None if self.tools is None else list(self.tools))

"""Every provider (stream) option, defined once: :class:`StreamOptions`.

One dataclass field per option; everything else is derived from it: the keyword options of
:class:`~agentcore.agent.Agent` (and its attributes of the same names), the fields of
:class:`~agentcore.loop.AgentLoopConfig`, the keyword arguments the loop passes to
``stream_fn``/``agentcore.providers.stream``, and the CLI's ``-o/--option KEY VALUE``. A new option
costs one line here.

Unknown option names are a ``TypeError`` with a did-you-mean (:func:`check_names`); command-line
values are parsed to the option's type (:func:`parse_cli_option`). Providers ignore options they
do not use.

Timeouts: ``timeout`` is what ``requests`` takes (seconds, or a ``(connect, read)`` tuple; the
read timeout is the longest silence allowed between two bytes of the response, not a limit on the
whole response). The default is ``(10, 600)``: 10 s to connect, and up to 10 minutes of silence,
the same limit the official OpenAI and Anthropic SDKs use, because a reasoning model may think for
minutes before it streams its first byte. Set a shorter one (``Agent(timeout=60)``, ``-o timeout
60``) when your model always streams promptly; ``abort()`` (or Ctrl+C) ends any wait at once.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import re
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Tuple, Union

from .types import ThinkingLevel

__all__ = [
    "StreamOptions",
    "OPTION_NAMES",
    "check_names",
    "split_names",
    "merge_provider_options",
    "spread_provider_options",
    "installed_provider_options",
    "declared_options",
    "check_value",
    "check_api_key",
    "header_problem",
    "parse_cli_option",
    "option_kwargs",
]

Timeout = Union[float, Tuple[float, float]]


_CALLABLE = "takes a Python callable; set it in code"


def _opt(doc: str, *, cli: Optional[str] = None, secret: bool = False) -> Any:
    """A field of :class:`StreamOptions`: None by default (not sent), with its documentation.
    ``cli``: why ``-o`` cannot set it (None: it can)."""
    return field(default=None, repr=not secret, metadata={"doc": doc, "not_cli": cli})


@dataclass
class StreamOptions:
    """The options of one model request. None means "not set": the option is not passed on."""

    temperature: Optional[float] = _opt("sampling temperature")
    max_tokens: Optional[int] = _opt("output token cap")
    reasoning: Optional[str] = _opt(
        "thinking level sent to the provider (an Agent derives it from thinking_level)",
        cli="is set from the thinking level: use --thinking LEVEL",
    )
    thinking_budgets: Optional[Dict[str, int]] = _opt('token budget per thinking level, e.g. {"low": 2048}')
    session_id: Optional[str] = _opt("provider-side cache/affinity key (default: the Agent's session id)")
    transport: Optional[str] = _opt('transport preference of providers that offer several ("auto", "sse", "websocket")')
    cache_retention: Optional[str] = _opt('prompt-cache retention: "none", "short", "long"')
    headers: Optional[Dict[str, str]] = _opt("extra HTTP headers (never logged)", secret=True)
    metadata: Optional[Dict[str, Any]] = _opt("request metadata (Anthropic: user_id)")
    timeout: Optional[Timeout] = _opt("seconds, or [connect, read] seconds (default [10, 600])")
    timeout_ms: Optional[int] = _opt("timeout in milliseconds (the reference's spelling)")
    max_retries: Optional[int] = _opt(
        "retries of a failed request: 429/5xx, connection errors, overloads in the stream"
    )
    max_retry_delay_ms: Optional[int] = _opt("longest wait between retries the server may ask for")
    tool_choice: Optional[Any] = _opt('"auto", "none", "any"/"required", or the API\'s object')
    service_tier: Optional[str] = _opt('OpenAI service tier ("auto", "flex", "priority")')
    reasoning_effort: Optional[str] = _opt("raw reasoning effort of OpenAI-compatible APIs")
    reasoning_summary: Optional[str] = _opt('OpenAI Responses reasoning summary ("auto", "detailed")')
    azure_base_url: Optional[str] = _opt("Azure OpenAI base URL (wins over AZURE_OPENAI_BASE_URL)")
    azure_resource_name: Optional[str] = _opt("Azure OpenAI resource name (https://<name>.openai.azure.com)")
    azure_deployment_name: Optional[str] = _opt("Azure OpenAI deployment (default: the model id)")
    azure_api_version: Optional[str] = _opt('Azure OpenAI api-version query (default "v1")')
    azure_auth: Optional[str] = _opt('how the Azure credential is sent: "api-key" or "bearer" (default: detected)')
    thinking_enabled: Optional[bool] = _opt("Anthropic/Google: switch thinking on or off explicitly")
    thinking_budget_tokens: Optional[int] = _opt("Anthropic/Google: thinking token budget")
    effort: Optional[str] = _opt('Anthropic effort ("low", "medium", "high", "max")')
    output_schema: Optional[Dict[str, Any]] = _opt("JSON schema the answer must follow (native; Agent.ask sets it)")
    on_payload: Optional[Callable[..., Any]] = _opt(
        "called with the request body before it is sent (may return a replacement)", cli=_CALLABLE
    )
    on_response: Optional[Callable[..., Any]] = _opt("called with the HTTP status and headers", cli=_CALLABLE)
    provider_options: Optional[Dict[str, Any]] = _opt(
        "options a plugin's provider reads, by name (Bedrock's region, Vertex's project ...): "
        "Agent(region=...) and -o region ... put a name an installed provider declares here",
        cli="holds the providers' own options: give each its own name, -o NAME VALUE",
    )

    def __post_init__(self) -> None:
        for name, value in self.__dict__.items():
            if value is not None:
                check_value(name, value, "StreamOptions()")

    def to_kwargs(self) -> Dict[str, Any]:
        """The options that are set, as keyword arguments for a stream function (the
        ``provider_options`` spread out as keywords of their own)."""
        return spread_provider_options({name: value for name, value in self.__dict__.items() if value is not None})

    def __repr__(self) -> str:  # only what is set (headers never, credential-like names masked)
        shown = ", ".join(
            f"{k}={'***' if _SECRET_WORDS & set(k.lower().split('_')) else repr(v)}"
            for k, v in self.to_kwargs().items()
            if k != "headers"
        )
        return f"StreamOptions({shown})"


#: A provider option whose name has one of these words shows as ``***`` in reprs.
_SECRET_WORDS = frozenset({"key", "token", "secret", "password", "credentials", "credential", "auth"})

OPTION_NAMES: Tuple[str, ...] = tuple(f.name for f in fields(StreamOptions))
_FIELDS = {f.name: f for f in fields(StreamOptions)}


def check_names(names: Iterable[str], where: str, extra: Iterable[str] = ()) -> None:
    """Raise TypeError for the first name that is not an option (nor in ``extra``), with the
    closest option names, e.g. ``Agent() got an unknown option 'temprature' (did you mean
    'temperature'?)``."""
    extra = tuple(extra)
    for name in names:
        if name not in _FIELDS and name not in extra:
            raise TypeError(_unknown(name, where, set(OPTION_NAMES) | set(extra)))


def split_names(
    given: Mapping[str, Any], where: str, declared: Callable[[], Mapping[str, Any]]
) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """``(fields, provider_options)``: the :class:`StreamOptions` fields of ``given`` (their values
    checked with :func:`check_value`), and the names that ``declared()`` (the option names the
    installed providers declare; called only when a name is not a field) knows. Any other name is
    a TypeError with a did-you-mean over both."""
    fields: Dict[str, Any] = {}
    extra: Dict[str, Any] = {}
    names: Optional[Mapping[str, Any]] = None
    for name, value in given.items():
        if name in _FIELDS:
            check_value(name, value, where)
            fields[name] = value
            continue
        if names is None:
            names = declared()
        if name not in names:
            raise TypeError(_unknown(name, where, set(OPTION_NAMES) | set(names)))
        extra[name] = value
    return fields, extra


def declared_options(provider: Any) -> Dict[str, str]:
    """The options ``provider`` declares in its ``stream_options`` mapping (name -> one line),
    leaving out what cannot be an option of its own: a name that is no identifier, or one that is
    a :class:`StreamOptions` field (the field stays the field). Empty when it declares none."""
    names = getattr(provider, "stream_options", None)
    if not isinstance(names, Mapping):
        return {}
    return {
        name: str(doc)
        for name, doc in names.items()
        if isinstance(name, str) and name.isidentifier() and name not in _FIELDS
    }


def installed_provider_options() -> Mapping[str, str]:
    """The options the installed providers declare beyond the fields (name -> description; see
    ``agentcore.plugins.provider_options``). Imports the plugin machinery on first use, which is
    why the checks above call it only for a name that is not a field."""
    from .plugins import provider_options

    return provider_options()


def merge_provider_options(current: Optional[Mapping[str, Any]], extra: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """A new ``provider_options`` dict: the set values of ``current``, then those of ``extra``
    (None when nothing is set; neither mapping is changed)."""
    merged = {k: v for k, v in (current or {}).items() if v is not None}
    merged.update((k, v) for k, v in extra.items() if v is not None)
    return merged or None


def spread_provider_options(kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """``kwargs`` (stream keywords) with its ``provider_options`` entry replaced by keywords of
    their own, as a provider reads them; a field of the same name keeps its value. In place."""
    extra = kwargs.pop("provider_options", None)
    if extra:
        for name, value in extra.items():
            if value is not None:
                kwargs.setdefault(name, value)
    return kwargs


def _unknown(name: str, where: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, sorted(known), n=3, cutoff=0.6)
    declared = sorted(set(known) - set(OPTION_NAMES))
    hint = (
        (" (did you mean " + ", ".join(repr(c) for c in close) + "?)")
        if close
        else f"; the options are: {', '.join(OPTION_NAMES)}"
        + (f"; the installed providers' own: {', '.join(declared)}" if declared else "")
    )
    return f"{where} got an unknown option {name!r}{hint}"


def option_kwargs(options: Optional[Union[StreamOptions, Mapping[str, Any]]]) -> Dict[str, Any]:
    """The set options of a :class:`StreamOptions` or a mapping, as kwargs. A mapping's names are
    checked: a :class:`StreamOptions` field or an option an installed provider declares."""
    if options is None:
        return {}
    if isinstance(options, StreamOptions):
        return options.to_kwargs()
    split_names(options, "options", installed_provider_options)
    return {k: v for k, v in options.items() if v is not None}


def parse_cli_option(
    key: str, text: str, declared: Optional[Callable[[], Mapping[str, Any]]] = None
) -> Tuple[str, Any]:
    """``(name, value)`` for ``-o KEY VALUE``: dashes in ``KEY`` may stand for underscores; the
    value is parsed to the option's type (numbers, ``true``/``false``, JSON for objects/lists; a
    plain word stays a string). A name that is no :class:`StreamOptions` field but one the
    installed providers declare (``declared()``, e.g. Bedrock's ``region``) is parsed as JSON, or
    kept as a word (``True``/``False`` in any case are booleans; ``null`` is refused, since it
    would silently leave the option unset). Raises ValueError naming the problem; the value of a
    secret option (one kept out of reprs: ``headers`` may hold an ``Authorization``) is never
    quoted in it."""
    name = key.strip().replace("-", "_")
    spec = _FIELDS.get(name)
    if spec is None:
        names = declared() if declared is not None else {}
        if name in names:
            return name, _parse_declared(key, text)
        raise ValueError(_unknown(key, "-o/--option", set(OPTION_NAMES) | set(names)))
    if spec.metadata["not_cli"]:
        raise ValueError(f"-o/--option {key}: {name} {spec.metadata['not_cli']}")
    kind = _kind(name)
    shown = repr(text) if spec.repr else "(value not shown)"
    try:
        value = _parse(kind, text)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"-o/--option {key} {shown}: expected {kind} ({exc})") from None
    except RecursionError:  # thousands of nested brackets: past the JSON parser's stack
        raise ValueError(f"-o/--option {key} {shown}: expected {kind} (JSON nested too deeply)") from None
    problem = _out_of_range(name, value)
    if problem:
        raise ValueError(f"-o/--option {key} {shown}: {problem}")
    return name, value


#: options whose numbers must be > 0, or >= 0 (a typo like ``-o max_tokens -5`` would reach the
#: provider and come back as an HTTP 400, or, for retries and timeouts, misbehave locally)
_POSITIVE = frozenset({"max_tokens", "timeout", "timeout_ms"})
_NOT_NEGATIVE = frozenset({"temperature", "max_retries", "max_retry_delay_ms", "thinking_budget_tokens"})
#: the longest timeout, in seconds (about 31 years): a socket cannot wait much longer (10**10 s is
#: an OverflowError on the first read); in code, a ``(connect, None)`` pair sets no read limit
_MAX_TIMEOUT_S = 10**9
#: options whose word values form a closed set (the union over the providers that read them)
_WORDS: Dict[str, Tuple[str, ...]] = {
    "cache_retention": ("none", "short", "long"),
    "transport": ("auto", "sse", "websocket"),
    "azure_auth": ("api-key", "bearer"),
    "tool_choice": ("auto", "none", "any", "required"),  # or a JSON object, which is not checked
}
#: the thinking levels (``reasoning``, any case; "", "off" and "none" are off) and the levels a
#: ``thinking_budgets`` entry may name (a provider looks a budget up by the level it sends)
_THINKING_LEVELS = tuple(level.value for level in ThinkingLevel if level is not ThinkingLevel.OFF)
_REASONING_WORDS = ("off", "none", "") + _THINKING_LEVELS


def check_value(name: str, value: Any, where: str) -> None:
    """Raise TypeError when ``value`` is not of option ``name``'s type (a number, an integer,
    true/false, seconds or ``(connect, read)``, a mapping, a callable, a word) and ValueError
    when it cannot be right (the command line's rules: ``max_tokens`` above 0, ``temperature``
    not negative, ``timeout`` at most 10**9 seconds, ``transport`` one of its words, ``reasoning``
    a thinking level in any case or off, ``thinking_budgets`` integer budgets of thinking levels
    ...). None (not set) is always fine; so is any value of ``tool_choice``. The message names the
    option and never shows a ``headers`` value."""
    if value is None or name not in _FIELDS:
        return
    kind = _KINDS[name]
    if not _is_kind(kind, value):
        got = f"a {type(value).__name__}" if name == "headers" else f"{_short(value)} (a {type(value).__name__})"
        raise TypeError(f"{where}: {name} must be {_TYPE_WORDS.get(kind, kind)}, not {got}")
    if name == "headers":
        for header, header_value in value.items():
            problem = header_problem(header, header_value)
            if problem:
                raise ValueError(f"{where}: headers: {problem}")
        return
    problem = _out_of_range(name, value)
    if problem:
        raise ValueError(f"{where}: {name} {_short(value)}: {problem}")


_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")


def header_problem(name: Any, value: Any) -> Optional[str]:
    """Why header ``name: value`` cannot be sent, or None; the reason names the header and never
    shows the value (it may be a credential). A name must be an HTTP token; a value a string,
    bytes or a number (None: not sent) without a line break or another control character once
    surrounding whitespace is dropped (which HTTP does anyway)."""
    if not isinstance(name, str) or not _HEADER_NAME.match(name):
        return f"{name!r} is not an HTTP header name"
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    elif not isinstance(value, (str, int, float)):
        return f"the value of header {name!r} must be a string, not {type(value).__name__}"
    text = str(value).strip()
    if not text.isprintable() and not text.replace("\t", " ").isprintable():
        return f"header {name!r} has a line break or another control character in its value; HTTP does not allow them"
    return None


def check_api_key(value: Any, where: str, name: str = "api_key") -> None:
    """Raise TypeError when an API key (``value``, given as ``name``) is neither None nor a string.
    The message names the type only, never the value."""
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{where}: {name} must be a string or None, not {type(value).__name__}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_kind(kind: str, value: Any) -> bool:
    if kind == "a number":
        return _is_number(value)
    if kind == "an integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "true or false":
        return isinstance(value, bool)
    if kind == "seconds or [connect, read]":  # what requests takes: None in a pair is "no limit"
        if isinstance(value, (tuple, list)):
            return len(value) == 2 and all(v is None or _is_number(v) for v in value)
        return _is_number(value)
    if kind == "a JSON object":
        return isinstance(value, Mapping)
    if kind == "a callable":
        return callable(value)
    if kind == "a word":
        return isinstance(value, str)
    return True  # "a word or JSON": tool_choice takes the API's own objects


_TYPE_WORDS = {
    "seconds or [connect, read]": "seconds or a (connect, read) pair of seconds",
    "a JSON object": "a mapping",
    "a word": "a string",
}


def _out_of_range(name: str, value: Any) -> Optional[str]:
    """Why a parsed command-line value (or an option given in code) cannot be right, or None."""
    numbers = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if any(isinstance(n, float) and not math.isfinite(n) for n in numbers):
        return "expected a finite number"
    if name in _POSITIVE and any(isinstance(n, (int, float)) and n <= 0 for n in numbers):
        return "must be greater than 0"
    if name in _NOT_NEGATIVE and any(isinstance(n, (int, float)) and n < 0 for n in numbers):
        return "must be 0 or more"
    limit = {"timeout": (_MAX_TIMEOUT_S, "seconds"), "timeout_ms": (_MAX_TIMEOUT_S * 1000, "milliseconds")}.get(name)
    if limit and any(isinstance(n, (int, float)) and n > limit[0] for n in numbers):
        return f"must be at most {limit[0]:.0e} {limit[1]}"
    if name == "reasoning" and isinstance(value, str) and value.strip().lower() not in _REASONING_WORDS:
        close = difflib.get_close_matches(value.strip().lower(), _THINKING_LEVELS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"choose one of off, {', '.join(_THINKING_LEVELS)}, or None for off{hint}"
    if name == "thinking_budgets" and isinstance(value, Mapping):
        return _budgets_problem(value)
    words = _WORDS.get(name)
    if words and isinstance(value, str) and value not in words:
        close = difflib.get_close_matches(value, words, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"choose one of {', '.join(words)}{hint}"
    return None


def _budgets_problem(budgets: Mapping[Any, Any]) -> Optional[str]:
    """Why a ``thinking_budgets`` mapping cannot be right (a level it names, or a budget that is
    no integer), or None. A provider would otherwise fail deep inside ``int(budget)``, or ignore
    a misspelt level."""
    for level, budget in budgets.items():
        if level not in _THINKING_LEVELS:
            close = difflib.get_close_matches(str(level), _THINKING_LEVELS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            return f"{level!r} is not a thinking level; use {', '.join(_THINKING_LEVELS)}{hint}"
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int)):
            return f"the budget of {level!r} must be an integer number of tokens, not {_short(budget)}"
    return None


def _kind(name: str) -> str:
    """What a command-line value of option ``name`` must be, from the field's annotation."""
    annotation = str(_FIELDS[name].type)
    if "Callable" in annotation:
        return "a callable"
    for marker, kind in (
        ("float", "a number"),
        ("int", "an integer"),
        ("bool", "true or false"),
        ("Timeout", "seconds or [connect, read]"),
        ("Dict", "a JSON object"),
        ("Any", "a word or JSON"),
    ):
        if f"[{marker}" in annotation:
            return kind
    return "a word"


_KINDS: Dict[str, str] = {name: _kind(name) for name in _FIELDS}


def _parse(kind: str, text: str) -> Any:
    if kind == "a number":
        return float(text)
    if kind == "an integer":
        return int(text)
    if kind == "true or false":
        lowered = text.strip().lower()
        if lowered not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
            raise ValueError("not a boolean")
        return lowered in ("true", "1", "yes", "on")
    if kind == "seconds or [connect, read]":
        value = json.loads(text)
        if isinstance(value, list) and len(value) == 2 and all(_is_number(v) for v in value):
            return (float(value[0]), float(value[1]))
        if _is_number(value):
            return float(value)
        raise ValueError("not a number or a pair of numbers")
    if kind == "a JSON object":
        value = json.loads(text)
        if not isinstance(value, dict):
            raise ValueError("not a JSON object")
        return value
    if kind == "a word or JSON":
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            return text
    return text


def _parse_declared(key: str, text: str) -> Any:
    """The value of ``-o KEY VALUE`` for an option a provider declares (its type is not declared):
    JSON, with ``True``/``False`` in any case a boolean too (JSON spells only ``true``/``false``,
    and the string "False" would read as true), else the word as given. ``null`` is a ValueError:
    it would silently mean "not set"; leaving the option out says that."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    value = _parse("a word or JSON", text)
    if value is None:
        raise ValueError(f"-o/--option {key} {text!r}: null is no value; leave the option out to keep it unset")
    return value


def replace(options: StreamOptions, **changes: Any) -> StreamOptions:
    """A copy of ``options`` with ``changes`` (names checked)."""
    check_names(changes, "StreamOptions")
    return dataclasses.replace(options, **changes)

"""Values that must cross a boundary whatever they hold: exception texts and JSON-safe forms.

``exception_message(exc)`` and ``describe_exception(exc)`` never raise, even for an exception
whose ``__str__`` raises (a thread that formats such an exception unguarded dies before it reports
completion, and whoever waits for it waits forever). ``json_safe(value)`` never raises either: it
maps any Python value onto plain JSON (see its docstring for the exact form).
"""

from __future__ import annotations

import base64
import math
import re
import sys
from enum import Enum
from typing import Any, Dict, Optional, Set, Tuple

__all__ = ["exception_message", "describe_exception", "json_safe", "redact_url", "safe_repr", "terminal_text"]


def _type_name(obj: Any) -> str:
    try:
        return type(obj).__name__
    except Exception:  # noqa: BLE001 - a metaclass with a raising __name__
        return "object"


def exception_message(exc: BaseException) -> str:
    """``str(exc)``, or the exception's type name when that is empty or ``str()`` raises.

    Never raises (the text of an error tool result and of a failure run's ``error_message``)."""
    try:
        text = str(exc)
    except BaseException as failure:  # noqa: BLE001 - formatting must never be a second failure
        return f"{_type_name(exc)} (its message could not be read: str() raised {_type_name(failure)})"
    if not isinstance(text, str):  # pragma: no cover - str() always returns a str
        return _type_name(exc)
    return text or _type_name(exc)


def describe_exception(exc: BaseException) -> str:
    """``"TypeName: message"`` (just the type name when the message is empty); never raises."""
    name = _type_name(exc)
    text = exception_message(exc)
    if text == name or text.startswith(name + " (its message could not be read"):
        return text
    return f"{name}: {text}"


def safe_repr(value: Any, limit: int = 200) -> str:
    """``repr(value)`` cut to ``limit`` characters, or ``<TypeName object>`` when repr raises."""
    try:
        text = repr(value)
    except BaseException:  # noqa: BLE001 - a raising __repr__ must not lose the value's place
        return f"<{_type_name(value)} object>"
    if not isinstance(text, str):  # pragma: no cover
        return f"<{_type_name(value)} object>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


#: integers longer than this many bits (about 4000 digits) cannot be written in decimal: Python
#: refuses to convert past 4300 digits (``sys.set_int_max_str_digits``)
_MAX_INT_BITS = 13_000


def _huge(value: int) -> str:
    return f"<integer of {value.bit_length()} bits>"


#: how deep :func:`json_safe` follows containers; deeper ones become ``"<nested too deeply>"``
MAX_JSON_DEPTH = 200


def json_safe(value: Any) -> Any:
    """A plain-JSON form of ``value``; values JSON can hold come back equal (often the same object).

    The form, documented in README.rst (Sessions):

    - ``str``, ``int``, ``bool``, ``None`` and finite floats: as they are (an integer too long to
      write in decimal, past about 4000 digits: ``"<integer of N bits>"``);
    - NaN and +/-Infinity: ``None`` (as ``JSON.stringify`` writes them: ``null``);
    - ``dict``: a dict; ``str`` keys as they are, numbers/bool/None keys as ``json.dumps`` writes
      them (``1`` -> ``"1"``, ``True`` -> ``"true"``), other keys as their ``repr()``;
    - ``list``, ``tuple``, ``set``, ``frozenset``: a list;
    - ``bytes``, ``bytearray``, ``memoryview``: ``{"type": "bytes", "base64": "..."}``;
    - an ``Enum``: its value; an object with ``to_dict()`` (messages, blocks): that dict, made safe;
    - a ``datetime``, ``date`` or ``time``: its ISO 8601 text (``isoformat()``); a ``UUID``, a
      ``pathlib`` path or a ``Decimal``: its ``str()`` (what ``@tool`` arguments of those types
      take);
    - anything else (a socket, ``object()``, a dataclass): its ``repr()`` string, cut to 200
      characters (``<TypeName object>`` when ``repr`` raises); a reference cycle: ``"<cycle>"``;
    - a container nested deeper than :data:`MAX_JSON_DEPTH` levels: ``"<nested too deeply>"``
      (a session line must read back, and Python's JSON reader stops near 1000 levels).

    Never raises.
    """
    return _safe(value, set())


def _safe(value: Any, active: Set[int]) -> Any:
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return value
    if kind is int:
        return value if value.bit_length() <= _MAX_INT_BITS else _huge(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, (str, int)) and not isinstance(value, Enum):  # str/int subclasses
        return str(value) if isinstance(value, str) else _safe(int(value), active)
    if isinstance(value, (bytes, bytearray, memoryview)):
        try:
            return {"type": "bytes", "base64": base64.b64encode(bytes(value)).decode("ascii")}
        except Exception:  # noqa: BLE001 - a memoryview of a released buffer, say
            return safe_repr(value)
    if isinstance(value, Enum):
        return _safe(value.value, active)
    marker = id(value)
    if marker in active:
        return "<cycle>"
    if len(active) >= MAX_JSON_DEPTH:  # ``active`` holds the containers around this value
        return "<nested too deeply>"
    active.add(marker)
    try:
        if isinstance(value, dict):
            return _safe_dict(value, active)
        if isinstance(value, (list, tuple, set, frozenset)):
            return _safe_list(value, active)
        to_dict = getattr(value, "to_dict", None) if not isinstance(value, type) else None
        if callable(to_dict):
            try:
                plain = to_dict()
            except Exception:  # noqa: BLE001 - fall back to the repr below
                plain = None
            if isinstance(plain, dict):
                return _safe_dict(plain, active)
        text = _scalar_text(value)
        return text if text is not None else safe_repr(value)
    finally:
        active.discard(marker)


def _scalar_text(value: Any) -> Optional[str]:
    """A date, time, UUID, path or decimal as text, else None. Their modules are looked up in
    ``sys.modules``, never imported: a value of one means it is loaded."""
    modules = sys.modules
    try:
        dates = modules.get("datetime")
        if dates is not None and isinstance(value, (dates.date, dates.time)):
            return str(value.isoformat())
        for name, kind in (("uuid", "UUID"), ("pathlib", "PurePath"), ("decimal", "Decimal")):
            module = modules.get(name)
            if module is not None and isinstance(value, getattr(module, kind)):
                return str(value)
    except Exception:  # noqa: BLE001 - a subclass whose isoformat/str raises: the repr then
        return None
    return None


def _safe_list(value: Any, active: Set[int]) -> Any:
    try:
        items = list(value)
    except Exception:  # noqa: BLE001 - mutated while iterating, say
        return safe_repr(value)
    out = [_safe(item, active) for item in items]
    if type(value) is list and all(a is b for a, b in zip(out, items)):
        return value  # already plain: keep the object
    return out


def _safe_dict(value: Dict[Any, Any], active: Set[int]) -> Dict[str, Any]:
    try:
        items = list(value.items())
    except Exception:  # noqa: BLE001
        return {"repr": safe_repr(value)}
    out: Dict[str, Any] = {}
    same = type(value) is dict
    for key, item in items:
        name = _safe_key(key)
        converted = _safe(item, active)
        if name is not key or converted is not item:
            same = False
        out[name] = converted
    return value if same else out


def _safe_key(key: Any) -> str:
    if type(key) is str:
        return key
    if key is None or isinstance(key, bool):
        return {None: "null", True: "true", False: "false"}[key]
    if isinstance(key, str):
        return str(key)
    if isinstance(key, int) and not isinstance(key, Enum):
        return str(int(key))
    if isinstance(key, float):
        return (
            repr(float(key))
            if math.isfinite(key)
            else ("NaN" if key != key else ("Infinity" if key > 0 else "-Infinity"))
        )
    return safe_repr(key)


def ambiguous_userinfo(url: str) -> Optional[Tuple[str, str, str]]:
    """``(scheme://, user info, rest)`` of a URL whose password holds an unencoded ``/``, ``?`` or
    ``#`` (``postgresql://u:pa/ss@h/db``): URL parsers end the authority there, read the password's
    start as a port and find no password at all, so what they redact leaves it whole. Detected when
    the authority they see is ``name:not-a-port`` with an ``@`` later in the URL; the user info is
    then taken to run to the last ``@`` (hiding too much rather than too little). None otherwise."""
    head, sep, rest = url.partition("://")
    if not sep:
        return None
    end = min([rest.find(c) for c in "/?#" if c in rest] or [len(rest)])
    authority = rest[:end]
    at = rest.rfind("@")
    if "@" in authority or at < end or ":" not in authority or authority.startswith("["):
        return None
    if authority.rsplit(":", 1)[1].isdigit():  # host:port and an "@" in the path or query
        return None
    return head + sep, rest[:at], rest[at + 1 :]


def redact_url(url: str) -> str:
    """``url`` with its secrets replaced by ``***``: the password of its authority
    (``user:secret@host``, also one holding an unencoded ``/``, ``?`` or ``#``: see
    :func:`ambiguous_userinfo`; also of one written without its scheme, ``user:secret@proxy/v1``,
    which URL parsers read as a scheme and a path) and the values of secret-looking query parameters
    (libpq's ``password=``, ``sslpassword=``, a ``token=`` or ``key=``). Never raises: a URL that
    cannot be parsed is ``"<unparsable URL>"``. (What reprs, session records and task descriptions
    show.)"""
    import re
    from urllib.parse import urlsplit, urlunsplit

    split = ambiguous_userinfo(url) if isinstance(url, str) else None
    if split is not None:
        head, userinfo, rest = split
        url = f"{head}{userinfo.split(':', 1)[0]}:***@{rest}"
    elif isinstance(url, str) and "://" not in url:
        url = _schemeless_userinfo_redacted(url)
    # the words of providers.failures.SECRET_QUERY_WORDS (not imported: this module stays light)
    secret_query = re.compile(r"pass|secret|token|key|auth|sig|credential", re.IGNORECASE)  # re caches it
    try:
        parts = urlsplit(url)
        if parts.password is None and not (parts.query and secret_query.search(parts.query)):
            return url  # nothing to hide (and urlunsplit would drop an empty "//" authority)
        if parts.password is not None:
            user, _, host = parts.netloc.rpartition("@")
            name = user.split(":", 1)[0]
            parts = parts._replace(netloc=f"{name}:***@{host}")
        if parts.query:
            pairs = [pair.partition("=") for pair in parts.query.split("&")]
            parts = parts._replace(
                query="&".join(
                    f"{key}{sep}***" if sep and secret_query.search(key) else f"{key}{sep}{value}"
                    for key, sep, value in pairs
                )
            )
        return urlunsplit(parts)
    except (TypeError, ValueError):
        return "<unparsable URL>"


def schemeless_userinfo(url: str) -> Optional[Tuple[str, str, str]]:
    """``(name, secret, rest)`` of ``name:secret@host/...``, a URL missing its ``http://`` that URL
    parsers read as a scheme and a path (so they see no password); None for any other text. Its
    authority is taken to run to the first ``/``, ``?`` or ``#``; a backslash before the ``@``
    marks a Windows path, not user info."""
    if not isinstance(url, str) or "://" in url or "@" not in url:
        return None
    end = min([url.find(c) for c in "/?#" if c in url] or [len(url)])
    user, at, host = url[:end].rpartition("@")
    name, colon, secret = user.partition(":")
    if not (at and colon and name) or "\\" in user:
        return None
    return name, secret, host + url[end:]


def _schemeless_userinfo_redacted(url: str) -> str:
    """``user:secret@host/...`` (a URL missing its ``http://``) as ``user:***@host/...``; any
    other text unchanged (see :func:`schemeless_userinfo`)."""
    split = schemeless_userinfo(url)
    return url if split is None else f"{split[0]}:***@{split[2]}"


# Escape sequences (CSI such as colours and cursor moves, OSC such as window titles and hyperlinks
# with their terminator, other two-character escapes: an unterminated OSC loses its ESC only, so
# no text after it is dropped), then every C0 control but tab and line
# feed (a carriage return or backspace overwrites what was shown), DEL and the C1 controls (some
# terminals take U+009B as CSI), and the bidirectional embeddings, overrides and isolates
# (U+202A-U+202E, U+2066-U+2069: "Trojan Source" text that reads one way and is another, in an
# approval question say; right-to-left script needs none of them to show), with the invisible
# direction marks that reorder the neutral characters around them (U+061C, U+200E, U+200F).
_TERMINAL_CONTROLS = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"
    r"|\x1b[ -~]"
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)


def terminal_text(text: str) -> str:
    """``text`` safe to write to a terminal: escape sequences, control characters and bidirectional
    overrides dropped (tab and line feed kept; ``\\r\\n`` becomes ``\\n``), so model or tool output
    cannot move the cursor, clear or retitle the screen, or hide or disguise what was shown (the CLI's printer, and the
    notebook's plain-text view that IPython prints in a terminal)."""
    return _TERMINAL_CONTROLS.sub("", text)

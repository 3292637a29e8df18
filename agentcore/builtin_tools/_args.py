"""Small checks for tool arguments that JSON-schema validation may not have coerced."""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Optional, Type

__all__ = ["positive_int", "utf8"]


def positive_int(args: Mapping[str, Any], key: str) -> Optional[int]:
    """``args[key]`` as an int >= 1, None when absent; raises ``ValueError`` naming the key."""
    value = args.get(key)
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)  # int() of inf or NaN raises its own, unnamed error
        or value != int(value)
        or value < 1
    ):
        raise ValueError(f"{key} must be a whole number of at least 1, got {value!r}")
    return int(value)


def _strict_utf8(text: str) -> bytes:
    return text.encode("utf-8")


def utf8(
    text: str, what: str, error: Type[ValueError] = ValueError, encode: Callable[[str], bytes] = _strict_utf8
) -> bytes:
    """``text`` encoded as UTF-8 (by ``encode``: ``os.fsencode`` lets a file name's undecodable
    bytes through); raises ``error`` naming ``what`` for a lone surrogate (a model's ``\\ud83d``
    escape without its partner), which UTF-8 cannot encode."""
    try:
        return encode(text)
    except UnicodeEncodeError as exc:
        line = text.count("\n", 0, exc.start) + 1
        raise error(
            f"{what} holds an unpaired UTF-16 surrogate {text[exc.start]!r} (line {line}), which UTF-8 "
            "cannot encode; write the character itself, not half of its \\u escape pair"
        ) from None

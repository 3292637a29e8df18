"""UTF-16 surrogates in a ``str``: what a provider leaves when it sends an astral character (an
emoji) as two ``\\uXXXX`` escapes, possibly in two separate stream deltas.

A high surrogate followed by a low one is the character they encode (JavaScript, the reference
design's language, reads them that way); a surrogate without its partner is *lone*, and neither
UTF-8 nor any provider API accepts it.
"""

from __future__ import annotations

import re
from typing import Callable

__all__ = ["HAS_SURROGATE", "escape_lone_surrogates", "fix_surrogates", "join_surrogate_pairs"]

#: matches when a text holds any surrogate (the fast check before :func:`fix_surrogates`)
HAS_SURROGATE = re.compile("[\ud800-\udfff]")
_PAIR_OR_LONE = re.compile("[\ud800-\udbff][\udc00-\udfff]|[\ud800-\udfff]")


def fix_surrogates(text: str, lone: Callable[[str], str]) -> str:
    """``text`` with every high+low surrogate pair joined into its character and every lone
    surrogate replaced by ``lone(surrogate)``."""

    def one(match: re.Match[str]) -> str:
        found = match.group()
        if len(found) == 2:
            return found.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
        return lone(found)

    return _PAIR_OR_LONE.sub(one, text)


def join_surrogate_pairs(text: str) -> str:
    """``text`` with every surrogate pair joined into its character; lone surrogates are kept."""
    return fix_surrogates(text, str)


def escape_lone_surrogates(text: str) -> str:
    """``text`` with every surrogate pair joined and every lone surrogate written as its JSON
    escape (``\\udcff``, six characters): what a JSON reader turns back into the same ``str``."""
    return fix_surrogates(text, _json_escape)


def _json_escape(surrogate: str) -> str:
    return f"\\u{ord(surrogate):04x}"

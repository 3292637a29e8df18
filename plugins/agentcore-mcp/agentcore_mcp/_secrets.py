"""Keeping the values of ``env`` and ``headers`` out of reprs, errors and logs.

Every value given as an environment variable or HTTP header of a server counts as a secret (an API
key is the common case and there is no reliable way to tell which ones are keys). A URL's password
and query-string values count too. :class:`Secrets` replaces each with ``***`` in any text the
plugin shows: exception messages, reprs, logged server stderr.
"""

from __future__ import annotations

from typing import Iterable, List, Mapping, Optional
from urllib.parse import parse_qsl, urlsplit, urlunsplit

MASK = "***"


class Secrets:
    """A set of secret strings and the one operation on them: :meth:`redact`."""

    __slots__ = ("_values",)

    def __init__(self, values: Iterable[str] = ()) -> None:
        # longest first, so a secret that contains another is masked whole
        self._values: List[str] = sorted({v for v in values if isinstance(v, str) and len(v) >= 3},
                                         key=len, reverse=True)

    @classmethod
    def of(cls, env: Optional[Mapping[str, str]] = None, headers: Optional[Mapping[str, str]] = None,
           url: Optional[str] = None) -> "Secrets":
        values: List[str] = list((env or {}).values()) + list((headers or {}).values())
        for header_value in (headers or {}).values():  # "Bearer abc": the token alone too
            values.extend(part for part in str(header_value).split() if len(part) >= 8)
        if url:
            parts = urlsplit(url)
            if parts.password:
                values.append(parts.password)
            values.extend(v for _, v in parse_qsl(parts.query) if v)
        return cls(values)

    def redact(self, text: str) -> str:
        """``text`` with every secret replaced by ``***``."""
        for value in self._values:
            if value in text:
                text = text.replace(value, MASK)
        return text

    def __repr__(self) -> str:
        return f"Secrets(<{len(self._values)} values>)"


def safe_url(url: str) -> str:
    """``url`` for display: no user info, query values masked."""
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    query = "&".join(f"{k}={MASK}" for k, _ in parse_qsl(parts.query, keep_blank_values=True))
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))

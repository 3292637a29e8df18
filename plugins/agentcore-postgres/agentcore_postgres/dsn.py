"""DSNs without their secrets: what may be shown (reprs, errors, ``storage.path``) and scrubbing.

A DSN is a libpq connection string, either a URL (``postgresql://user:secret@host:5432/db``) or
``key=value`` words (``host=h password=secret``). Only :func:`display_name` is ever shown: user,
host, port and database, never the password. :func:`scrub` removes the password from any text
that might quote it (a driver's error message), whatever form the DSN had.
"""

from __future__ import annotations

import re
from typing import List, Tuple
from urllib.parse import unquote, urlsplit

__all__ = ["Dsn", "parse_dsn", "display_name", "scrub"]

_KV_PASSWORD = re.compile(r"""(?:^|\s)password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)""")


class Dsn:
    """A connection string with its display form; ``repr`` and ``str`` show only the display form."""

    __slots__ = ("_conninfo", "display", "_secrets")

    def __init__(self, conninfo: str, display: str, secrets: Tuple[str, ...]) -> None:
        self._conninfo = conninfo
        self.display = display
        self._secrets = secrets

    @property
    def conninfo(self) -> str:
        """The full connection string (with the password): pass it to the driver, never show it."""
        return self._conninfo

    def scrub(self, text: str) -> str:
        """``text`` with every secret of this DSN replaced by ``***``."""
        return scrub(text, self._secrets)

    def __repr__(self) -> str:
        return f"Dsn({self.display!r})"

    def __str__(self) -> str:
        return self.display


def _secrets_of(dsn: str) -> List[str]:
    """Every password-looking value in ``dsn`` (raw and decoded), longest first."""
    found: List[str] = []
    try:
        password = urlsplit(dsn).password if "://" in dsn else None
    except ValueError:
        password = None
    if password:
        found += [password, unquote(password)]
    for match in _KV_PASSWORD.finditer(dsn):
        value = match.group(1)
        found.append(value)
        if value.startswith("'") and value.endswith("'") and len(value) >= 2:
            found.append(re.sub(r"\\(.)", r"\1", value[1:-1]))
    return sorted({s for s in found if s}, key=len, reverse=True)


def scrub(text: str, secrets: Tuple[str, ...]) -> str:
    """``text`` without any of ``secrets`` (each replaced by ``***``)."""
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


def display_name(params: dict) -> str:
    """``postgresql://user@host:port/dbname`` from libpq parameters (password never included)."""
    user = params.get("user") or ""
    host = params.get("host") or params.get("hostaddr") or "localhost"
    port = params.get("port")
    db = params.get("dbname") or ""
    where = f"{host}:{port}" if port else host
    if "/" in where:  # a Unix-socket directory
        where = f"[{where}]"
    return f"postgresql://{user + '@' if user else ''}{where}/{db}"


def parse_dsn(dsn: str) -> Dsn:
    """Check ``dsn`` with libpq's parser and return it with its display form.

    Raises ``ValueError`` naming the problem (libpq's words, password removed).
    """
    from psycopg import conninfo

    if not isinstance(dsn, str):
        raise TypeError(f"a PostgreSQL DSN must be a str, got {type(dsn).__name__}")
    secrets = tuple(_secrets_of(dsn))
    try:
        params = conninfo.conninfo_to_dict(dsn)
    except Exception as exc:  # psycopg.ProgrammingError: libpq could not parse it
        raise ValueError(f"invalid PostgreSQL DSN: {scrub(str(exc).strip(), secrets)}") from None
    password = params.get("password")
    if password:
        secrets = tuple(sorted(set(secrets) | {str(password)}, key=len, reverse=True))
    return Dsn(dsn, display_name(params), secrets)

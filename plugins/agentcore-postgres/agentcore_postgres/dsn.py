"""DSNs without their secrets: what may be shown (reprs, errors, ``storage.path``) and scrubbing.

A DSN is a libpq connection string, either a URL (``postgresql://user:secret@host:5432/db``) or
``key=value`` words (``host=h password=secret``). Only :func:`display_name` is ever shown: user,
host, port and database, never the password. :func:`scrub` removes the password from any text
that might quote it (a driver's error message), whatever form the DSN had.
"""

from __future__ import annotations

import re
from typing import List, Tuple
from urllib.parse import unquote, unquote_plus, urlsplit

from agentcore.providers.failures import secret_forms

__all__ = ["Dsn", "parse_dsn", "display_name", "scrub"]

#: libpq parameters whose values are secrets (the password and the TLS key, OAuth and SCRAM ones)
SECRET_PARAMETERS = ("password", "sslpassword", "oauth_client_secret", "scram_client_key", "scram_server_key")
_KV_SECRET = re.compile(r"(?:^|\s)(?:" + "|".join(SECRET_PARAMETERS) + r""")\s*=\s*('(?:[^'\\]|\\.)*'|\S+)""")
_QUOTED = re.compile(r'"([^"]*)"')


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
    """Every secret-looking value in ``dsn`` (raw and decoded), longest first: a URL's password and
    secret query parameters, and the values of secret ``key=value`` words."""
    found: List[str] = []
    if "://" in dsn:
        try:
            url = urlsplit(dsn)
            password = url.password
        except ValueError:
            url, password = None, None
        if password:
            found += [password, unquote(password)]
        for part in url.query.split("&") if url is not None else ():
            key, _, value = part.partition("=")
            if key in SECRET_PARAMETERS:
                found += [value, unquote_plus(value)]
    for match in _KV_SECRET.finditer(dsn):
        value = match.group(1)
        found.append(value)
        if value.startswith("'") and value.endswith("'") and len(value) >= 2:
            found.append(re.sub(r"\\(.)", r"\1", value[1:-1]))
    return sorted({s for s in found if s}, key=len, reverse=True)


def scrub(text: str, secrets: Tuple[str, ...]) -> str:
    """``text`` without any of ``secrets`` (each replaced by ``***``), in any of the forms
    :func:`agentcore.providers.failures.secret_forms` lists (repr- and JSON-escaped, stripped)."""
    forms = {form for secret in secrets for form in secret_forms(secret)}
    for form in sorted(forms, key=len, reverse=True):
        text = text.replace(form, "***")
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
        raise ValueError(f"invalid PostgreSQL DSN: {_unparsable(str(exc).strip(), secrets)}") from None
    found = {str(params[key]) for key in SECRET_PARAMETERS if params.get(key)}
    if found:
        secrets = tuple(sorted(set(secrets) | found, key=len, reverse=True))
    return Dsn(dsn, display_name(params), secrets)


def _unparsable(message: str, secrets: Tuple[str, ...]) -> str:
    """libpq's words on a DSN it cannot parse, with the secrets and every other quoted piece of the
    DSN masked: a password with an unquoted space is cut into words libpq quotes back
    (``missing "=" after "cret"``), which no list of secrets knows. Known parameter names stay; a
    mistyped one is masked too (it may be such a word)."""
    from psycopg import pq

    names = {d.keyword.decode() for d in pq.Conninfo.get_defaults()}
    return _QUOTED.sub(
        lambda m: m.group(0) if m.group(1) == "=" or m.group(1) in names else '"***"', scrub(message, secrets)
    )

"""DSNs without their secrets: what may be shown (reprs, errors, ``storage.path``) and scrubbing.

A DSN is a libpq connection string, either a URL (``postgresql://user:secret@host:5432/db``) or
``key=value`` words (``host=h password=secret``). Only :func:`display_name` is ever shown: user,
host, port and database, never the password. :func:`scrub` removes the password from any text
that might quote it (a driver's error message), whatever form the DSN had.

A URL whose user info libpq and URL parsers end in different places is refused: libpq ends it at
the first ``@`` before a ``/`` (``?`` and ``#`` are part of it), URL parsers at the last ``@``
before a ``/``, ``?`` or ``#``. In ``postgresql://u:pa@ss@h/db`` libpq's password is ``pa`` and
its host ``ss@h``; in ``postgresql://u:pa/ss@h/db`` its host is ``u``, its port ``pa`` and its
database ``ss@h/db``. Either way a piece of the password would be shown as something else.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import unquote, unquote_plus, urlsplit

from agentcore.providers.failures import secret_forms

__all__ = ["Dsn", "parse_dsn", "display_name", "scrub"]

#: libpq parameters whose values are secrets (the password and the TLS key, OAuth and SCRAM ones)
SECRET_PARAMETERS = ("password", "sslpassword", "oauth_client_secret", "scram_client_key", "scram_server_key")
_KV_SECRET = re.compile(r"(?:^|\s)(?:" + "|".join(SECRET_PARAMETERS) + r""")\s*=\s*('(?:[^'\\]|\\.)*'|\S+)""")
_QUOTED = re.compile(r'"([^"]*)"')
#: the URL forms libpq reads (case-sensitive; anything else is ``key=value`` words)
_URL_PREFIXES = ("postgresql://", "postgres://")
_ENCODED = {"@": "%40", "/": "%2F", "?": "%3F", "#": "%23"}


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


def _split_userinfo(rest: str) -> Tuple[Optional[str], Optional[str], str, str]:
    """``(libpq's, a URL parser's, the widest, what follows it)``: the user info of a URL, ``rest``
    being what follows its ``://`` (None where that reader sees none). The widest reaches the last
    ``@`` any reading could take for the end of a password: ``postgresql://u:pa/ss@h/db`` has none
    for libpq and URL parsers alike, but ``u:pa/ss`` is what its writer meant."""
    libpq = re.match(r"[^@/]*(?=@)", rest)
    netloc = re.split(r"[/?#]", rest, maxsplit=1)[0]
    url = netloc.rpartition("@")[0] if "@" in netloc else None
    start = libpq.end() + 1 if libpq else 0
    head = rest[start:].partition("?")[0]
    end = start + head.rindex("@") if "@" in head else start - 1
    return (libpq.group(0) if libpq else None), url, rest[: max(end, 0)], rest[end + 1 :]


def _userinfo_secrets(rest: str) -> List[str]:
    """Every piece of a URL's user info that may be (part of) its password, as written and decoded:
    the password of each reading and each ``@``/``:``-separated piece, never a user name alone
    (``rest`` as for :func:`_split_userinfo`)."""
    libpq, _, widest, _ = _split_userinfo(rest)
    readings = {widest[:i] for i, ch in enumerate(widest) if ch == "@"} | {widest, libpq or ""}
    users = {re.split(r"[:@]", r, maxsplit=1)[0] for r in readings} | {r.partition(":")[0] for r in readings}
    found = [r.partition(":")[2] for r in readings] + re.split(r"[@:]", widest)
    found += [unquote(value) for value in found]
    return [value for value in found if value and value not in users]


def _refusal(dsn: str) -> Optional[str]:
    """Why ``dsn`` is refused before libpq reads it, or None: a URL whose user info libpq and URL
    parsers read differently (see the module docstring). The reason shows the URL without any part
    of its user info after the user name, and without its query."""
    prefix = next((p for p in _URL_PREFIXES if dsn.startswith(p)), None)
    if prefix is None:
        return None
    libpq, url, widest, after = _split_userinfo(dsn[len(prefix) :])
    if libpq == url and widest == (libpq or ""):
        return None
    user = re.split(r"[:@/?#]", widest, maxsplit=1)[0]
    shown = f"{prefix}{user + '@' if user else ''}{after.partition('?')[0]}"
    chars = ["@"] + [ch for ch in "/?#" if ch in widest]
    return (
        f"invalid PostgreSQL DSN {shown}: libpq and URL parsers end its user name and password in "
        f"different places; percent-encode {' and '.join(map(repr, chars))} in the password (and user "
        f"name) as {' and '.join(_ENCODED[ch] for ch in chars)}"
    )


def _secrets_of(dsn: str) -> List[str]:
    """Every secret-looking value in ``dsn`` (raw and decoded), longest first: a URL's password
    (every reading of it and every piece, see :func:`_userinfo_secrets`) and secret query
    parameters, and the values of secret ``key=value`` words."""
    found: List[str] = []
    if dsn.startswith(_URL_PREFIXES):
        found += _userinfo_secrets(dsn.partition("://")[2])
    if "://" in dsn:
        try:
            url = urlsplit(dsn)
        except ValueError:
            url = None
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


def display_name(params: Dict[str, Any]) -> str:
    """``postgresql://user@host:port/dbname`` from libpq parameters (password never included).

    A host holding ``@`` is shown as ``***``: no host name has one, a misread user info does."""
    user = params.get("user") or ""
    host = params.get("host") or params.get("hostaddr") or "localhost"
    host = ",".join("***" if "@" in name else name for name in host.split(","))
    port = params.get("port")
    db = params.get("dbname") or ""
    where = f"{host}:{port}" if port else host
    if "/" in where:  # a Unix-socket directory
        where = f"[{where}]"
    return f"postgresql://{user + '@' if user else ''}{where}/{db}"


def parse_dsn(dsn: str) -> Dsn:
    """Check ``dsn`` with libpq's parser and return it with its display form.

    Raises ``ValueError`` naming the problem (libpq's words, password removed), also for a URL
    whose user info libpq and URL parsers read differently (:func:`_refusal`).
    """
    from psycopg import conninfo

    if not isinstance(dsn, str):
        raise TypeError(f"a PostgreSQL DSN must be a str, got {type(dsn).__name__}")
    refused = _refusal(dsn)
    if refused is not None:
        raise ValueError(refused)
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

"""Keeping the values of ``env``, ``headers`` and secret ``args`` out of reprs, errors and logs.

Every value given as an environment variable or HTTP header of a server counts as a secret (an API
key is the common case and there is no reliable way to tell which ones are keys). A URL's password
and query-string values count too (of a password holding an unencoded ``/``, also the part before
it, which URL parsers quote as a port). Of a stdio server's command-line arguments, these count:

* in an argument that is a URL with user info or a query string
  (``postgresql://user:hunter2@host/db``), its password and its query values, each as written and
  percent-decoded;
* the value of an option whose name looks secret (holds ``key``, ``token``, ``secret``,
  ``password``, ``passwd``, ``auth`` or ``credential``, any case): ``--api-key VALUE`` (the next
  argument, unless it is itself a ``--`` option), ``--token=VALUE``, and ``NAME=VALUE`` words
  such as ``-e GITHUB_TOKEN=VALUE`` or libpq's ``"host=h password=VALUE"``.

Other arguments (paths, package names, flags) stay visible. :class:`Secrets` replaces each secret
with ``***`` in any text the plugin shows: exception messages, reprs, logged server stderr, the
server's own log messages.
"""

from __future__ import annotations

import re
from typing import Iterable, List, Mapping, Optional, Sequence
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from agentcore.providers.failures import secret_forms, secret_url_values

MASK = "***"


class Secrets:
    """A set of secret strings and the one operation on them: :meth:`redact`."""

    __slots__ = ("_values", "__weakref__")

    def __init__(self, values: Iterable[str] = ()) -> None:
        # each as a text may show it (stripped, repr- or JSON-escaped); longest first, so a
        # secret that contains another is masked whole
        forms = {form for v in values for form in secret_forms(v)}
        self._values: List[str] = sorted((f for f in forms if len(f) >= 3), key=len, reverse=True)

    @classmethod
    def of(
        cls,
        env: Optional[Mapping[str, str]] = None,
        headers: Optional[Mapping[str, str]] = None,
        url: Optional[str] = None,
        args: Sequence[str] = (),
        extra: Iterable[str] = (),
    ) -> Secrets:
        """The secrets of a server: every value of ``env`` and ``headers`` (and the token of a
        header such as ``Bearer abc``), the password and query values of ``url``, those of a
        stdio command line ``args`` described in the module docstring, and every string of
        ``extra``."""
        values: List[str] = list((env or {}).values()) + list((headers or {}).values())
        for header_value in (headers or {}).values():  # "Bearer abc": the token alone too
            values.extend(part for part in str(header_value).split() if len(part) >= 8)
        if url:
            values += _url_values(url)
        values += _arg_values(args)
        values += extra
        return cls(values)

    def redact(self, text: str) -> str:
        """``text`` with every secret replaced by ``***``."""
        for value in self._values:
            if value in text:
                text = text.replace(value, MASK)
        return text

    def __repr__(self) -> str:
        return f"Secrets(<{len(self._values)} values>)"


# an option or NAME=VALUE word whose value is a credential (over-matching only masks a value)
_SECRET_NAME = re.compile(r"key|token|secret|passw(?:or)?d|auth|credential", re.IGNORECASE)
_OPTION = re.compile(r"--?([A-Za-z][\w.-]*)(=.*)?", re.DOTALL)  # -n, --name, --name=value
_ASSIGNMENT = re.compile(r"([A-Za-z_][\w.-]*)=(.+)", re.DOTALL)  # NAME=value


def _url_values(url: str) -> List[str]:
    """The password of ``url`` (as written and decoded, also one holding an unencoded ``/``, and
    then its start too) and all its query values, as written (httpx and the SDK log URLs
    percent-encoded) and decoded."""
    values = secret_url_values(url)
    values += _password_start(url)
    try:
        query = urlsplit(url).query
    except ValueError:  # unparsable: its password, if any, came from secret_url_values
        return values
    values.extend(v for _, v in parse_qsl(query) if v)
    values.extend(raw for _, _, raw in (p.partition("=") for p in query.split("&")) if raw)
    return values


def _password_start(url: str) -> List[str]:
    """Of a password with an unencoded ``/``, ``?`` or ``#`` (``http://u:pa/ss@h``), the part
    before it, which URL parsers read as the port and quote so in their errors (httpx's "Invalid
    port: 'pa'"); nothing for any other URL."""
    _, sep, rest = url.partition("://")
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if not sep or "@" in authority or "@" not in rest or ":" not in authority:
        return []
    start = authority.rsplit(":", 1)[1]
    return [start] if start and not start.isdigit() else []


def _is_url_with_secrets(text: str) -> bool:
    """Whether ``text`` is a ``scheme://host...`` URL with user info or a query string."""
    if "://" not in text:
        return False
    try:
        parts = urlsplit(text)
    except ValueError:  # a password read as a bad port ("u:pa]ss@h"): worth the try
        return "@" in text
    return bool(parts.scheme and parts.netloc and ("@" in text or parts.query))


def _arg_values(args: Sequence[str]) -> List[str]:
    """The secrets in a stdio command line ``args`` (see the module docstring)."""
    values: List[str] = []
    value_next = False  # the previous argument was a secret-named option without "=value"
    for arg in map(str, args):
        if value_next and not arg.startswith("--"):
            values.append(arg)
        value_next = False
        option = _OPTION.fullmatch(arg)
        if option is not None and _SECRET_NAME.search(option.group(1)):
            if option.group(2) is None:
                value_next = True
            else:
                values.append(option.group(2)[1:])  # "--token=VALUE", spaces and all
        for word in re.split(r"[\s;]+", arg):  # "GITHUB_TOKEN=VALUE", "host=h password=VALUE"
            assignment = _ASSIGNMENT.fullmatch(word)
            if assignment is not None and _SECRET_NAME.search(assignment.group(1)):
                values.append(assignment.group(2))
        for candidate in (arg, arg.partition("=")[2]):  # "DSN" and "--dsn=DSN"
            if _is_url_with_secrets(candidate):
                values += _url_values(candidate)
    return values


def safe_url(url: str) -> str:
    """``url`` for display: no user info, query values masked. Never raises: of a URL whose host
    or port cannot be read (``http://[::1/``, a port over 65535, a password with an unencoded
    ``/`` read as the port), only the scheme is shown."""
    try:
        parts = urlsplit(url)
        netloc = parts.hostname or ""
        if parts.port:
            netloc += f":{parts.port}"
    except ValueError:  # its text may hold a password: none of it is shown
        scheme = url.partition(":")[0] if re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", url) else "?"
        return f"{scheme}://<a URL whose host or port cannot be read>"
    query = "&".join(f"{k}={MASK}" for k, _ in parse_qsl(parts.query, keep_blank_values=True))
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


# ----------------------------------------------------------------------------- log redaction
#
# The SDK and its HTTP client log URLs at DEBUG/INFO ("Connecting to StreamableHTTP endpoint:
# <url>", "HTTP Request: POST <url>"), user info and query string included. Process-wide state
# (owner: this module): one logging.Filter, added once to those few loggers by the first HTTP
# server, masking the secrets of every live server (held weakly, so a closed server's are dropped).
# Filters on a logger apply to the records logged through it, so other loggers are untouched.

import logging  # noqa: E402
import threading  # noqa: E402
import weakref  # noqa: E402

_SDK_LOGGERS = (
    "mcp.client.streamable_http",
    "mcp.client.sse",
    "mcp.client.client",
    "mcp.client.session",
    "mcp.shared.jsonrpc_dispatcher",
    "httpx2",
    "httpx",
)
_live: weakref.WeakSet[Secrets] = weakref.WeakSet()
_filter_lock = threading.Lock()
_filter_installed = False


class _RedactingFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        secrets = list(_live)
        if not secrets:
            return True
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is not ours to break
            return True
        redacted = message
        for item in secrets:
            redacted = item.redact(redacted)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


def watch_logs(secrets: Secrets) -> None:
    """Mask ``secrets`` in the SDK's log records from now on (while ``secrets`` is alive)."""
    global _filter_installed
    _live.add(secrets)
    with _filter_lock:
        if not _filter_installed:
            log_filter = _RedactingFilter()
            for name in _SDK_LOGGERS:
                logging.getLogger(name).addFilter(log_filter)
            _filter_installed = True

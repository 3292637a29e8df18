"""Keeping the values of ``env`` and ``headers`` out of reprs, errors and logs.

Every value given as an environment variable or HTTP header of a server counts as a secret (an API
key is the common case and there is no reliable way to tell which ones are keys). A URL's password
and query-string values count too. :class:`Secrets` replaces each with ``***`` in any text the
plugin shows: exception messages, reprs, logged server stderr.
"""

from __future__ import annotations

from typing import Iterable, List, Mapping, Optional
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from agentcore.providers.failures import secret_forms

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
    ) -> Secrets:
        values: List[str] = list((env or {}).values()) + list((headers or {}).values())
        for header_value in (headers or {}).values():  # "Bearer abc": the token alone too
            values.extend(part for part in str(header_value).split() if len(part) >= 8)
        if url:
            parts = urlsplit(url)
            if parts.password:  # as written (logs print the URL) and decoded (what is sent)
                values += [parts.password, unquote(parts.password)]
            values.extend(v for _, v in parse_qsl(parts.query) if v)
            # the query values as written too: httpx and the SDK log the URL percent-encoded
            values.extend(raw for _, _, raw in (p.partition("=") for p in parts.query.split("&")) if raw)
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

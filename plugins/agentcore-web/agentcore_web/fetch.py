"""The ``fetch_url`` tool: GET one http(s) URL and return its text (HTML made readable).

Limits: a connect/read ``timeout`` per network wait plus an overall deadline of the same length
for the body, and ``max_bytes`` for the body. Failures raise :class:`FetchError` with a message the
model can act on: a non-2xx status, binary content, a body over the limit, a timeout, or an abort
(the response is closed as soon as the run's abort signal fires).
"""

from __future__ import annotations

import re
import socket
import time
from typing import Any, Dict, Optional, Tuple
from urllib.parse import urlparse

from agentcore.providers.http import RequestAborted, close_on_abort, get_session, iter_body, send_abortable
from agentcore.tools import AgentTool, AgentToolResult, tool
from agentcore.types import TextContent

from .readable import html_to_text

__all__ = ["FetchError", "create_fetch_url_tool", "fetch_text"]

DEFAULT_TIMEOUT = 20.0
DEFAULT_MAX_BYTES = 2_000_000
DEFAULT_MAX_CHARS = 50_000
_CHUNK = 16384
_TEXT_TYPES = re.compile(
    r"^(text/.*|application/(json|ld\+json|xml|xhtml\+xml|rss\+xml|atom\+xml|javascript|ecmascript"
    r"|x-javascript|x-www-form-urlencoded|x-yaml|yaml|toml|.*\+json|.*\+xml))$"
)


class FetchError(RuntimeError):
    """The URL could not be fetched as text; the message says why and what to try."""


def _content_type(headers: Any) -> Tuple[str, Optional[str]]:
    raw = headers.get("Content-Type") or ""
    mime = raw.split(";")[0].strip().lower()
    match = re.search(r"charset=[\"']?([\w.:-]+)", raw, re.I)
    return mime, match.group(1) if match else None


def _read_body(response: Any, url: str, max_bytes: int, deadline: float, signal: Any) -> bytes:
    declared = response.headers.get("Content-Length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise FetchError(
            f"{url} is too large: Content-Length {declared} bytes exceeds the limit of "
            f"{max_bytes} bytes; fetch a smaller page or a more specific URL"
        )
    body = bytearray()
    # iter_body returns whatever arrived (iter_content(n) waits for n bytes, so a server sending a
    # byte at a time held the tool far past its deadline)
    for chunk in iter_body(response, _CHUNK):
        if signal is not None and signal.aborted:
            raise FetchError("Operation aborted")
        body += chunk
        if len(body) > max_bytes:
            raise FetchError(
                f"{url} is too large: the body exceeds the limit of {max_bytes} bytes; "
                f"fetch a smaller page or a more specific URL"
            )
        if time.monotonic() > deadline:
            raise FetchError(f"{url} timed out while reading the body")
    if signal is not None and signal.aborted:  # closed by the abort: the body is incomplete
        raise FetchError("Operation aborted")
    return bytes(body)


def fetch_text(
    url: str,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    max_bytes: int = DEFAULT_MAX_BYTES,
    signal: Any = None,
    session: Any = None,
) -> Dict[str, Any]:
    """Fetch ``url`` and return ``{"url", "final_url", "status", "content_type", "title", "text",
    "bytes"}``; HTML is converted with :func:`~agentcore_web.readable.html_to_text`.

    Raises :class:`FetchError` for a non-http(s) URL, a network error or timeout, a non-2xx status,
    binary content, a body over ``max_bytes`` and an abort of ``signal``.
    """
    import requests

    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise FetchError(f"cannot fetch {url!r}: only absolute http:// and https:// URLs are supported")
    if signal is not None and signal.aborted:
        raise FetchError("Operation aborted")
    # the pooled session of the core: an abort interrupts the connect and the wait for headers too
    http = session or get_session("agentcore-web")
    try:
        response = send_abortable(
            http,
            "GET",
            url,
            signal,
            timeout=timeout,
            stream=True,
            allow_redirects=True,
            headers={
                "User-Agent": "agentcore-web/0.1 (+fetch_url tool)",
                "Accept": "text/html,text/plain,application/json;q=0.9,*/*;q=0.5",
            },
        )
    except RequestAborted:
        raise FetchError("Operation aborted") from None
    except requests.Timeout:
        raise FetchError(f"{url} timed out after {timeout:g} s") from None
    except requests.RequestException as exc:
        raise FetchError(f"cannot fetch {url}: {type(exc).__name__}: {exc}") from None

    try:
        # an abort closes the response from the aborting thread, so a blocked read returns at once
        with close_on_abort(response, signal):
            return _finish(response, url, max_bytes, time.monotonic() + timeout, signal)
    except FetchError:
        raise
    except Exception as exc:  # the connection was closed under us, or a decode failure
        if signal is not None and signal.aborted:
            raise FetchError("Operation aborted") from None
        if "Timeout" in type(exc).__name__ or isinstance(exc, socket.timeout):
            raise FetchError(f"{url} timed out while reading the body") from None
        raise FetchError(f"cannot read {url}: {type(exc).__name__}: {exc}") from None
    finally:
        response.close()


def _finish(response: Any, url: str, max_bytes: int, deadline: float, signal: Any) -> Dict[str, Any]:
    if not 200 <= response.status_code < 300:
        raise FetchError(f"HTTP {response.status_code} {response.reason or ''} for {url}".replace("  ", " "))
    mime, charset = _content_type(response.headers)
    if mime and not _TEXT_TYPES.match(mime):
        raise FetchError(f"{url} returned binary content ({mime}); fetch_url reads text and HTML only")
    body = _read_body(response, url, max_bytes, deadline, signal)
    if not mime and b"\x00" in body[:1024]:
        raise FetchError(f"{url} returned binary content (no content type); fetch_url reads text only")
    if not _known(charset) and (mime in ("text/html", "application/xhtml+xml") or not mime):
        charset = _html_charset(body)  # <meta charset>, when the header names none
    text = (
        body.decode(charset or "utf-8", errors="replace") if _known(charset) else body.decode("utf-8", errors="replace")
    )
    title = None
    if mime in ("text/html", "application/xhtml+xml") or (not mime and "<html" in text[:2048].lower()):
        title, text = html_to_text(text, response.url or url)
    return {
        "url": url,
        "final_url": response.url or url,
        "status": response.status_code,
        "content_type": mime or None,
        "title": title,
        "text": text,
        "bytes": len(body),
    }


_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([\w.:-]+)""", re.I)


def _html_charset(body: bytes) -> Optional[str]:
    """The charset an HTML document declares in its first 4 KB (a UTF-8 BOM wins), or None."""
    if body.startswith(b"\xef\xbb\xbf"):
        return "utf-8-sig"
    match = _META_CHARSET.search(body[:4096])
    if not match:
        return None
    declared = match.group(1).decode("ascii")
    # a meta tag readable as ASCII cannot be in UTF-16/32: HTML treats that declaration as UTF-8
    return "utf-8" if declared.lower().startswith(("utf-16", "utf-32")) else declared


def _known(charset: Optional[str]) -> bool:
    import codecs

    if not charset:
        return False
    try:
        codecs.lookup(charset)
    except LookupError:
        return False
    return True


def create_fetch_url_tool(
    timeout: float = DEFAULT_TIMEOUT, max_bytes: int = DEFAULT_MAX_BYTES, max_chars: int = DEFAULT_MAX_CHARS
) -> AgentTool:
    """A ``fetch_url`` tool with these limits (the plugin registers one with the defaults)."""

    @tool(name="fetch_url", label="Fetch URL")
    def fetch_url(url: str, signal: Any = None) -> AgentToolResult:
        """Fetch a web page or text file over HTTP(S) and return its readable text.

        HTML is converted to plain text (headings as # lines, links as [text](url)); scripts and
        styles are removed. Fails for non-2xx statuses, binary content and very large pages.

        Args:
            url: The absolute http:// or https:// URL to fetch.
        """
        page = fetch_text(url, timeout=timeout, max_bytes=max_bytes, signal=signal)
        text = page["text"]
        truncated = len(text) > max_chars
        if truncated:
            text = text[:max_chars] + f"\n\n[Truncated: showing {max_chars} of {len(page['text'])} characters]"
        header = f"URL: {page['final_url']}\n" + (f"Title: {page['title']}\n" if page["title"] else "")
        details = {k: page[k] for k in ("url", "final_url", "status", "content_type", "title", "bytes")}
        details["truncated"] = truncated
        return AgentToolResult(content=[TextContent(header + "\n" + text)], details=details)

    return fetch_url

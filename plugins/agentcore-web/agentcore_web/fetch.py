"""The ``fetch_url`` tool: GET one http(s) URL and return its text (HTML made readable).

Limits: a connect/read ``timeout`` per network wait, a deadline of the same length for the whole
wait for the response headers (redirects included) and another for the body (the connection is
closed when one passes, even in the middle of a read, so a server trickling bytes cannot hold the
tool longer), and
``max_bytes`` for the body (read at most 16 KB at a time, compressed or not, so the limit stops the
download however the server sends it). Failures raise :class:`FetchError` with a message the model
can act on: a non-2xx status, binary content, a body compressed in an encoding it cannot decode
(``Content-Encoding``), a body over the limit, a timeout, or an abort (the
response is closed as soon as the run's abort signal fires).

Redirects (at most :data:`MAX_REDIRECTS`, to http(s) URLs only) are followed here, not by requests,
and no ambient credential is ever sent: not the ``~/.netrc`` (``$NETRC``) entry of a host, which
requests would send to the first URL and to the host of every redirect. The credentials of a
``user:password@`` URL are sent (as Basic auth) to that URL's host only, never after a redirect to
another one, and never shown: results and errors show the URL with ``***@``. Cookies a server sets
are kept for the redirects of one fetch only, never for the next fetch (another run's, possibly
another user's). Proxies come from the environment as for any requests call.

Charsets are read as browsers read them: a byte order mark, else the ``Content-Type`` charset,
else (XML: feeds, XHTML) the ``<?xml encoding="..."?>`` declaration, else (HTML) ``<meta
charset>``, else UTF-8; an ISO-8859-1 or US-ASCII label means windows-1252, and a label naming no
codec that reads any bytes (``undefined``, ``base64``) counts as none.
"""

from __future__ import annotations

import re
import socket
import threading
from http.cookiejar import DefaultCookiePolicy
from typing import Any, Callable, Dict, Iterator, Optional, Tuple
from urllib.parse import urlparse

from agentcore.providers.http import RequestAborted, close_on_abort, get_session, iter_body, send_abortable
from agentcore.signals import AbortController
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


_NO_COOKIES = DefaultCookiePolicy(allowed_domains=[])  # the shared session keeps none


class FetchError(RuntimeError):
    """The URL could not be fetched as text; the message says why and what to try."""


def _content_type(headers: Any) -> Tuple[str, Optional[str]]:
    raw = headers.get("Content-Type") or ""
    mime = raw.split(";")[0].strip().lower()
    match = re.search(r"charset=[\"']?([\w.:-]+)", raw, re.I)
    return mime, match.group(1) if match else None


def _body_chunks(response: Any) -> Iterator[bytes]:
    """The body as it arrives, at most ``_CHUNK`` bytes at a time both read and decoded.

    Not :func:`iter_body`: on urllib3 1.26 it waits for a chunk's bytes (up to its own read size)
    before yielding, and a trickle inside one chunk would not come back to check the deadline;
    ``read1`` returns whatever arrived."""
    raw = response.raw
    read1 = getattr(raw, "read1", None)
    if read1 is not None:  # urllib3 2: whatever arrived, chunked or not, decoded to at most n bytes
        while True:
            data = read1(_CHUNK, decode_content=True)
            if not data:
                return
            yield data
    elif getattr(raw, "chunked", False) and hasattr(raw, "read_chunked"):  # urllib3 1.26
        yield from raw.read_chunked(_CHUNK, decode_content=True)
    else:
        yield from iter_body(response, _CHUNK)


def _read_body(response: Any, url: str, max_bytes: int, stop: Any) -> bytes:
    """The body; raises :class:`_Stopped` once ``stop`` (the run's abort, or the deadline) fired."""
    declared = response.headers.get("Content-Length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise FetchError(
            f"{url} is too large: Content-Length {declared} bytes exceeds the limit of "
            f"{max_bytes} bytes; fetch a smaller page or a more specific URL"
        )
    body = bytearray()
    for chunk in _body_chunks(response):
        if stop.aborted:
            raise _Stopped()
        body += chunk
        if len(body) > max_bytes:
            raise FetchError(
                f"{url} is too large: the body exceeds the limit of {max_bytes} bytes; "
                f"fetch a smaller page or a more specific URL"
            )
    if stop.aborted:  # the response was closed under the read: the body is incomplete
        raise _Stopped()
    return bytes(body)


class _Stopped(Exception):
    """The fetch's stop signal fired: the run was aborted or a deadline passed."""


def fetch_text(
    url: str,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    max_bytes: int = DEFAULT_MAX_BYTES,
    signal: Any = None,
    session: Any = None,
) -> Dict[str, Any]:
    """Fetch ``url`` and return ``{"url", "final_url", "status", "content_type", "title", "text",
    "bytes"}``; HTML is converted with :func:`~agentcore_web.readable.html_to_text`. ``url`` and
    ``final_url`` show a ``user:password@`` as ``***@``; links in the text carry no user info.

    ``timeout`` bounds every network wait, the whole wait for the final response's headers
    (connect, redirects and headers however slowly they trickle in) and, counted anew from the
    headers, the whole body: at most twice ``timeout`` in all. An abort of ``signal`` or a
    deadline ends the fetch at once in every phase, the host name's resolution included (the
    pooled session's :func:`~agentcore.providers.http.send_abortable` sees to it). (A ``session``
    not from :func:`~agentcore.providers.http.get_session` cannot be interrupted before the
    headers: its waits are bounded by ``timeout`` each, and the aborts and deadlines act from the
    body on.)

    Redirects are followed with the URL's own credentials only (see the module's docstring): a
    redirect's body is never read.

    Raises :class:`FetchError` for a URL that is not an absolute http(s) URL string, a network
    error or timeout, a non-2xx status, a redirect loop (more than :data:`MAX_REDIRECTS`) or a
    redirect to a non-http(s) URL, binary content, a body compressed in a coding urllib3 does not
    decode (``Content-Encoding: compress``, say), a body over ``max_bytes`` and an abort of
    ``signal``; its message never contains the URL's user info.
    """
    if not isinstance(url, str):
        raise FetchError(f"url must be a string holding an absolute http:// or https:// URL, not {type(url).__name__}")
    shown = _shown(url)
    try:
        parsed = urlparse(url)
    except ValueError as exc:  # "Invalid IPv6 URL"
        raise FetchError(f"cannot fetch {shown!r}: {_scrub(str(exc), url)}") from None
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise FetchError(f"cannot fetch {shown!r}: only absolute http:// and https:// URLs are supported")
    if signal is not None and signal.aborted:
        raise FetchError("Operation aborted")
    # the pooled session of the core: an abort interrupts the connect and the wait for headers too
    http = session
    if http is None:
        http = get_session("agentcore-web")
        http.cookies.set_policy(_NO_COOKIES)  # kept within one fetch's redirects only
    # one stop for the request: the run's abort and the deadlines both fire it, and it closes
    # the socket or response, so a wait blocked on the network returns at once
    stop = AbortController()
    watch = signal is not None and hasattr(signal, "add_listener")

    def on_abort(_reason: Any) -> None:
        stop.abort("aborted")

    if watch:
        signal.add_listener(on_abort)
    try:
        return _fetch(http, url, shown, timeout, max_bytes, stop)
    finally:
        if watch:
            signal.remove_listener(on_abort)


_DEADLINE = "deadline"


def _deadline(stop: AbortController, seconds: float) -> threading.Timer:
    """A started timer that stops the fetch with reason :data:`_DEADLINE` after ``seconds``."""
    timer = threading.Timer(seconds, stop.abort, args=(_DEADLINE,))
    timer.daemon = True
    timer.start()
    return timer


def _fetch(http: Any, url: str, shown: str, timeout: float, max_bytes: int, stop: AbortController) -> Dict[str, Any]:
    """:func:`fetch_text` once the URL was checked. ``stop`` is aborted by the run's abort or a
    deadline, whichever comes first (its reason says which)."""
    import requests

    def stopped(doing: str) -> FetchError:
        return FetchError(f"{shown} timed out {doing}" if stop.signal.reason == _DEADLINE else "Operation aborted")

    timer = _deadline(stop, timeout)
    try:
        response = _follow(http, url, shown, timeout, stop.signal)
    except RequestAborted:
        raise stopped(f"after {timeout:g} s") from None
    except requests.Timeout:
        raise FetchError(f"{shown} timed out after {timeout:g} s") from None
    except requests.RequestException as exc:
        raise FetchError(f"cannot fetch {shown}: {type(exc).__name__}: {_scrub(str(exc), url)}") from None
    finally:
        timer.cancel()

    if not stop.signal.aborted:  # (else the response is closed at once below)
        timer = _deadline(stop, timeout)  # the body's own deadline
    try:
        # a stop closes the response from the stopping thread, so a blocked read returns at once
        with close_on_abort(response, stop.signal):
            return _finish(response, shown, max_bytes, stop.signal)
    except FetchError:
        raise
    except Exception as exc:  # _Stopped; the connection was closed under us; a decode failure
        if stop.signal.aborted:
            raise stopped("while reading the body") from None
        if "Timeout" in type(exc).__name__ or isinstance(exc, socket.timeout):
            raise FetchError(f"{shown} timed out while reading the body") from None
        raise FetchError(f"cannot read {shown}: {type(exc).__name__}: {_scrub(str(exc), url)}") from None
    finally:
        timer.cancel()
        response.close()


MAX_REDIRECTS = 20
"""How many redirects one fetch follows (as browsers do); one more is reported as a loop."""

_HEADERS = {
    "User-Agent": "agentcore-web/0.1 (+fetch_url tool)",
    "Accept": "text/html,text/plain,application/json;q=0.9,*/*;q=0.5",
}


def _follow(http: Any, url: str, shown: str, timeout: float, signal: Any) -> Any:
    """The response of ``url`` once its redirects are followed (at most :data:`MAX_REDIRECTS`).

    Redirects are followed here, not by requests, which would send credentials the model never
    gave: the ``~/.netrc`` (``$NETRC``) entry of the host, to the first URL and again to the host
    of every redirect. Only the URL's own ``user:password@`` is sent, as Basic auth, and only to
    its host (a redirect to another host drops it). A redirect's body is not read (requests read
    all of it, past ``max_bytes``). Cookies set on the way are sent within this chain only.
    Raises :class:`FetchError` for a redirect loop or a redirect to a non-http(s) URL.
    """
    import requests
    from requests.cookies import RequestsCookieJar
    from requests.cookies import extract_cookies_to_jar as _extract

    # untyped in requests' stubs
    extract_cookies_to_jar: Callable[[Any, Any, Any], None] = _extract
    should_strip_auth: Callable[[Any, str, str], bool] = requests.Session.should_strip_auth

    jar = RequestsCookieJar()
    auth = _url_auth(url)
    current = url
    for _hop in range(MAX_REDIRECTS + 1):
        response = send_abortable(
            http,
            "GET",
            current,
            signal,
            timeout=timeout,
            stream=True,
            allow_redirects=False,
            headers=dict(_HEADERS),
            cookies=jar,
            auth=auth or _no_auth,  # an auth of its own: requests never consults .netrc then
            hooks={"response": _close_redirect},
        )
        extract_cookies_to_jar(jar, response.request, response.raw)
        target = requests.Session.get_redirect_target(http, response) if response.is_redirect else None
        if not target:
            return response
        response.close()
        try:
            target = _redirect_url(response.url or current, target)
            scheme = urlparse(target).scheme.lower()
        except ValueError as exc:  # "Invalid IPv6 URL"
            raise FetchError(f"{shown} redirected to an invalid URL {_brief(_shown(target))!r}: {exc}") from None
        if scheme not in ("http", "https"):
            raise FetchError(
                f"{shown} redirected to {_brief(_shown(target))}: fetch_url follows only http:// and https:// URLs"
            )
        if should_strip_auth(http, current, target):
            auth = None  # another host: the credentials stay with theirs
        auth = _url_auth(target) or auth
        current = target
    raise FetchError(
        f"{shown} redirected more than {MAX_REDIRECTS} times (last to {_brief(_shown(current))}): "
        "a redirect loop; try the address the page should end at"
    )


def _no_auth(prepared: Any) -> Any:
    """An auth that adds nothing: given as a request's own, it keeps requests from applying the
    host's ``.netrc`` entry (and the URL's user info, which :func:`_url_auth` applies instead)."""
    return prepared


def _url_auth(url: str) -> Any:
    """Basic auth from ``url``'s ``user:password@`` (as requests decodes it), or None."""
    from requests.auth import HTTPBasicAuth
    from requests.utils import get_auth_from_url

    user, password = get_auth_from_url(url)
    return HTTPBasicAuth(user, password) if user or password else None


def _close_redirect(response: Any, **_kwargs: Any) -> None:
    """Response hook: close a redirect before requests drains its body (``Session.send`` reads
    all of it, however large, to release the connection)."""
    if response.is_redirect:
        response.raw.close()


def _redirect_url(base: str, location: str) -> str:
    """The absolute URL a redirect's ``Location`` names, resolved as requests resolves it."""
    from urllib.parse import urljoin

    from requests.utils import requote_uri

    if location.startswith("//"):
        location = f"{urlparse(base).scheme}:{location}"
    if not urlparse(location).netloc:
        return urljoin(base, requote_uri(location))
    return requote_uri(location)


def _brief(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _finish(response: Any, url: str, max_bytes: int, stop: Any) -> Dict[str, Any]:
    """The page of a response; ``url`` is the requested URL as messages show it."""
    if not 200 <= response.status_code < 300:
        raise FetchError(f"HTTP {response.status_code} {response.reason or ''} for {url}".replace("  ", " "))
    mime, charset = _content_type(response.headers)
    if mime and not _TEXT_TYPES.match(mime):
        raise FetchError(f"{url} returned binary content ({mime}); fetch_url reads text and HTML only")
    _check_encoding(response, url)
    body = _read_body(response, url, max_bytes, stop)
    html = mime in ("text/html", "application/xhtml+xml")
    bom = _bom_charset(body)
    if bom is not None:
        charset = bom  # a byte order mark outranks the header, as in browsers
    elif not _known(charset) and (mime.endswith("xml") or not mime) and _xml_charset(body):
        charset = _xml_charset(body)  # <?xml encoding="..."?> of a feed or XHTML, as RFC 7303 says
    elif not _known(charset) and (html or not mime):
        charset = _html_charset(body)  # <meta charset>, when the header names none
    encoding = _whatwg(charset) if charset is not None and _known(charset) else "utf-8"
    if b"\x00" in body[:1024] and not _codec_name(encoding).startswith(("utf-16", "utf-32")):
        # a NUL byte is in no text (but UTF-16/32): a PDF or an image served as text/plain or as
        # nothing, which would reach the model as a page of replacement characters
        declared = f"declared as {mime}" if mime else "no content type"
        raise FetchError(f"{url} returned binary content ({declared}); fetch_url reads text and HTML only")
    text = body.decode(encoding, errors="replace")
    final_url = response.url or url
    title = None
    if html or (not mime and "<html" in text[:2048].lower()):
        title, text = html_to_text(text, _shown(final_url, mask=""))
    return {
        "url": url,
        "final_url": _shown(final_url),
        "status": response.status_code,
        "content_type": mime or None,
        "title": title,
        "text": text,
        "bytes": len(body),
    }


# the registered HTTP content codings (IANA) that transform the body; a label outside it
# ("utf-8", "none", "binary": misconfigured servers send them) is ignored, as browsers ignore it
_CODINGS = frozenset(
    [
        "aes128gcm",
        "br",
        "compress",
        "dcb",
        "dcz",
        "deflate",
        "exi",
        "gzip",
        "pack200-gzip",
        "x-compress",
        "x-gzip",
        "zstd",
    ]
)


def _check_encoding(response: Any, url: str) -> None:
    """Raise :class:`FetchError` for a body in a content coding urllib3 does not undo
    (``compress``, or ``br``/``zstd`` without their packages): it would be read as the page's
    text."""
    raw = response.headers.get("Content-Encoding") or ""
    decoders = getattr(response.raw, "CONTENT_DECODERS", ("gzip", "x-gzip", "deflate"))
    for coding in (c.strip().lower() for c in raw.split(",")):
        if coding in _CODINGS and coding not in decoders:
            raise FetchError(
                f"{url} is compressed with {coding!r} (Content-Encoding), which fetch_url cannot "
                "decode; try another URL for the page"
            )


def _userinfo(url: str) -> Optional[str]:
    """The user info (``user:password``) of ``url``'s authority, or None. A password holding an
    unencoded ``/``, ``?`` or ``#`` (which ends the authority for URL parsers) is taken to run to
    the last ``@``: hiding too much rather than too little."""
    _, sep, rest = url.partition("://")
    if not sep:
        return None
    end = min([rest.find(c) for c in "/?#" if c in rest] or [len(rest)])
    authority = rest[:end]
    if "@" in authority:
        return authority.rpartition("@")[0] or None  # "http://@host/" has none
    at = rest.rfind("@")
    if at > end and ":" in authority and not authority.startswith("["):
        if not authority.rsplit(":", 1)[1].isdigit():  # not host:port with an "@" in the path
            return rest[:at]
    return None


def _shown(url: str, mask: str = "***@") -> str:
    """``url`` as results and errors show it: its user info replaced by ``mask``."""
    info = _userinfo(url)
    if info is None:
        return url
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{mask}{rest[len(info) + 1 :]}"


def _scrub(text: str, url: str) -> str:
    """``text`` (an exception's message, which may quote the URL) without ``url``'s user info."""
    info = _userinfo(url)
    if info is None:
        return text
    text = text.replace(url, _shown(url)).replace(info, "***")
    rest = url.partition("://")[2]
    parsed_authority = re.split(r"[/?#]", rest, maxsplit=1)[0]  # "user:pa" of "user:pa/ss@host"
    if parsed_authority and "@" not in parsed_authority:
        text = text.replace(parsed_authority, "***")
    password = info.partition(":")[2]
    return text.replace(password, "***") if len(password) >= 3 else text


def _bom_charset(body: bytes) -> Optional[str]:
    """The encoding a byte order mark at the start of ``body`` names (UTF-8, UTF-16), or None."""
    if body.startswith(b"\xef\xbb\xbf"):
        return "utf-8-sig"
    if body.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16"  # the codec reads the mark and drops it
    return None


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


_XML_ENCODING = re.compile(rb"""<\?xml\s[^>]*?\bencoding\s*=\s*["']([\w.:-]+)["']""")


def _xml_charset(body: bytes) -> Optional[str]:
    """The encoding an XML declaration at the start of ``body`` names, or None. One readable as
    ASCII cannot be UTF-16/32: such a declaration means UTF-8, as for ``<meta charset>``."""
    match = _XML_ENCODING.match(body, 0, 512)
    if not match:
        return None
    declared = match.group(1).decode("ascii")
    return "utf-8" if declared.lower().startswith(("utf-16", "utf-32")) else declared


def _whatwg(charset: str) -> str:
    """The codec that reads a page labelled ``charset`` as browsers do: the Encoding Standard
    reads ``iso-8859-1``, ``latin1`` and ``us-ascii`` labels as windows-1252, whose bytes
    0x80-0x9F are the curly quotes, dashes and euro sign such pages hold (ISO-8859-1 makes them
    invisible control characters; ASCII, replacement characters)."""
    import codecs

    return "cp1252" if codecs.lookup(charset).name in ("iso8859-1", "ascii") else charset


def _codec_name(encoding: str) -> str:
    """The codec's own name (``UTF16LE``, ``U16`` and ``utf_16`` are all ``utf-16...``)."""
    import codecs

    return codecs.lookup(encoding).name


def _known(charset: Optional[str]) -> bool:
    """Whether ``charset`` names a text encoding that reads any bytes (``base64``, ``hex``,
    ``rot13``... are codecs, but ``bytes.decode`` refuses them; ``undefined``, which pages in the
    wild declare, ``idna`` and ``punycode`` raise for bytes they cannot read, whatever the error
    handler: a page declaring one is read as UTF-8, as browsers ignore a label they do not know)."""
    import codecs

    if not charset:
        return False
    try:
        info = codecs.lookup(charset)
    except LookupError:
        return False
    if getattr(info, "_is_text_encoding", True) is False:
        return False
    try:
        b"a\xff".decode(charset, errors="replace")
    except (UnicodeError, LookupError):
        return False
    return True


_MAX_TITLE_CHARS = 200
"""How much of a page's title the ``fetch_url`` tool shows (the rest is replaced by ``...``)."""


def create_fetch_url_tool(
    timeout: float = DEFAULT_TIMEOUT, max_bytes: int = DEFAULT_MAX_BYTES, max_chars: int = DEFAULT_MAX_CHARS
) -> AgentTool:
    """A ``fetch_url`` tool with these limits (the plugin registers one with the defaults).

    Its result holds at most ``max_chars`` characters of the page's text (then a note of how many
    there were) and a title of at most :data:`_MAX_TITLE_CHARS` (a page's ``<title>`` can be as
    long as its body)."""

    @tool(name="fetch_url", label="Fetch URL")
    def fetch_url(url: str, signal: Any = None) -> AgentToolResult:
        """Fetch a web page or text file over HTTP(S) and return its readable text.

        HTML is converted to plain text (headings as # lines, links as [text](url)); scripts and
        styles are removed. Fails for non-2xx statuses, binary content and very large pages.

        Args:
            url: The absolute http:// or https:// URL to fetch.
        """
        page = fetch_text(url, timeout=timeout, max_bytes=max_bytes, signal=signal)
        if page["title"]:
            page["title"] = _brief(page["title"], _MAX_TITLE_CHARS)
        text = page["text"]
        truncated = len(text) > max_chars
        if truncated:
            text = text[:max_chars] + f"\n\n[Truncated: showing {max_chars} of {len(page['text'])} characters]"
        header = f"URL: {page['final_url']}\n" + (f"Title: {page['title']}\n" if page["title"] else "")
        details = {k: page[k] for k in ("url", "final_url", "status", "content_type", "title", "bytes")}
        details["truncated"] = truncated
        return AgentToolResult(content=[TextContent(header + "\n" + text)], details=details)

    return fetch_url

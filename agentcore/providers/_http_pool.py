"""Pooled provider sessions whose connections an abort can interrupt (used by :mod:`agentcore.providers.http`).

One ``requests.Session`` per provider name keeps connections alive between requests; its adapter
keeps up to :func:`pool_maxsize` connections per host. The adapter's connections tell the sending
thread which socket a request uses (through ``_current.box``, set by ``http.send_abortable``), so
an abort listener on another thread can shut the socket down while ``connect()`` (the name
resolution, the TCP connect, a proxy's CONNECT, the TLS handshake) or the wait for response
headers is blocked; connections through an HTTP(S) proxy too. The public names are re-exported by :mod:`agentcore.providers.http`, their
documented path. Importing this module imports neither ``requests`` nor ``urllib3``.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from collections import OrderedDict
from typing import Any, Callable, Dict, Optional, Tuple

from .._compat import (
    connection_address,
    environ_data,
    is_default_timeout,
    name_resolution_error,
    noting_connection_classes,
    set_socket_options,
)
from .failures import is_secret_header as _is_secret_header

__all__ = ["DEFAULT_POOL_MAXSIZE", "POOL_MAXSIZE_ENV", "pool_maxsize", "set_pool_maxsize", "get_session"]

#: provider name -> its pooled session, least recently used first (see :data:`_MAX_SESSIONS`)
_sessions: OrderedDict[str, Any] = OrderedDict()
_sessions_lock = threading.Lock()

#: Pooled sessions kept at most: one per provider name, the least recently used closed beyond
#: that (an application that names a provider per tenant would otherwise keep a session, its pool
#: and idle sockets for every name it ever used).
_MAX_SESSIONS = 64

DEFAULT_POOL_MAXSIZE = 1024
"""Default cap on the idle connections kept per provider and host (see :func:`set_pool_maxsize`)."""

POOL_MAXSIZE_ENV = "AGENTCORE_HTTP_POOL_MAXSIZE"
_pool_maxsize: Optional[int] = None  # set_pool_maxsize(); None: the environment or the default


def pool_maxsize() -> int:
    """How many connections per provider and host are kept for reuse (see :func:`set_pool_maxsize`)."""
    if _pool_maxsize is not None:
        return _pool_maxsize
    value = os.environ.get(POOL_MAXSIZE_ENV, "").strip()
    if not value:
        return DEFAULT_POOL_MAXSIZE
    try:
        size = int(value)
    except ValueError:
        raise ValueError(f"{POOL_MAXSIZE_ENV}={value!r} is not a whole number of connections") from None
    if size < 1:
        raise ValueError(f"{POOL_MAXSIZE_ENV}={value!r}: the pool needs room for at least 1 connection")
    return size


def set_pool_maxsize(maxsize: Optional[int]) -> None:
    """Cap the connections kept for reuse per provider and host at ``maxsize`` (None: the default).

    Connections are opened on demand, one per concurrent request, and returned to the pool after
    the response; the pool keeps up to ``maxsize`` of them, so it follows the peak concurrency up
    to the cap. A connection returned to a full pool is closed ("discarding connection") and the
    next request pays a new TCP (and TLS) handshake: keep the cap at or above the number of
    concurrent runs against one provider. The default, 1024 (or ``$AGENTCORE_HTTP_POOL_MAXSIZE``
    read when a provider's session is created), costs nothing until connections are used; idle
    ones are closed by the server's keep-alive timeout and replaced transparently. Applies at once
    to every provider session (idle connections of existing sessions are closed). Raises
    ValueError for a size below 1.
    """
    global _pool_maxsize
    if maxsize is not None and (isinstance(maxsize, bool) or not isinstance(maxsize, int) or maxsize < 1):
        raise ValueError(f"pool maxsize must be a whole number >= 1, not {maxsize!r}")
    with _sessions_lock:
        _pool_maxsize = maxsize
        for session in _sessions.values():
            _mount_adapter(session)


def _mount_adapter(session: Any) -> None:
    adapter = _adapter_class()(pool_connections=4, pool_maxsize=pool_maxsize(), max_retries=0)
    old = session.adapters.get("http://")
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    if old is not None:
        old.close()  # idle connections close; in-flight ones close when their response is released


def get_session(name: str) -> Any:
    """The shared ``requests.Session`` of provider ``name`` (created on first use).

    Its connection pool keeps up to :func:`pool_maxsize` connections per host for reuse. At most
    :data:`_MAX_SESSIONS` are kept: creating one more closes the least recently used (its idle
    connections at once, one in use when its response is released; a request that still holds
    it is served, its connections closed by the collector).
    """
    session = _sessions.get(name)
    if session is None:
        with _sessions_lock:
            session = _sessions.get(name)
            if session is None:
                session = _session_class()()
                _mount_adapter(session)
                _sessions[name] = session
                while len(_sessions) > _MAX_SESSIONS:
                    _sessions.popitem(last=False)[1].close()
                return session
    try:
        _sessions.move_to_end(name)  # one C call under the GIL: safe beside the creator's lock
    except KeyError:  # evicted by another thread this instant: it still serves this request
        pass
    return session


_session_cls: Any = None


def _session_class() -> Any:
    """A ``requests.Session`` that sends a provider's requests with less of requests' per-request work.

    * It remembers the environment's proxies while ``os.environ`` is unchanged. requests scans the
      whole environment twice per request to find ``*_proxy`` variables (about 0.1 ms, more than
      the rest of sending a small request). The result depends only on the environment and the
      URL's origin, so it is cached per origin and recomputed as soon as any environment variable
      changes. Everything else (``.netrc``, CA bundle variables, explicit ``proxies=``,
      ``trust_env=False``) takes requests' own path; so does every platform where proxies may come
      from system settings (macOS, Windows).
    * It prepares a request the way ``Session.prepare_request`` does, with the same result, but
      merges the headers directly and leaves out the empty params and auth merges: since requests
      2.34 each of those merges runs ``isinstance`` checks against runtime protocols, which Python
      3.11 evaluates slowly; about 0.12 ms of a 0.32 ms preparation on the CI machine. The session
      cookies, ``.netrc`` credentials and hooks are merged exactly as requests merges them, except
      that neither a ``.netrc`` entry for the host nor the URL's ``user:password@`` is applied to a
      request carrying credentials of its own (requests lets them replace the ``Authorization``
      header, turning an API key or a request signature into Basic auth); a
      request with its own cookies, auth, params, files or JSON body (a provider sends none of
      them), or a session given auth, params or a headers object of another type, takes
      requests' own path.
    * It merges the environment's proxies with the session's the way ``merge_setting`` does,
      without its runtime-protocol check of each (two per request).
    """
    global _session_cls
    if _session_cls is None:
        import requests
        from requests.cookies import RequestsCookieJar
        from requests.cookies import merge_cookies as _merge_cookies
        from requests.models import PreparedRequest
        from requests.sessions import merge_hooks as _merge_hooks
        from requests.sessions import merge_setting as _merge_setting
        from requests.structures import CaseInsensitiveDict
        from requests.utils import get_netrc_auth

        # untyped in requests' stubs
        merge_setting: Callable[[Any, Any], Any] = _merge_setting
        merge_cookies: Callable[[Any, Any], Any] = _merge_cookies
        merge_hooks: Callable[[Any, Any], Any] = _merge_hooks

        class _Session(requests.Session):
            def prepare_request(self, request: Any) -> Any:
                if (
                    request.cookies
                    or request.auth
                    or request.params
                    or request.files
                    or request.json is not None
                    or self.auth
                    or self.params
                    or not isinstance(request.headers, dict)
                    or type(self.headers) is not CaseInsensitiveDict
                ):
                    return super().prepare_request(request)
                cookies = RequestsCookieJar()
                if len(self.cookies):
                    cookies = merge_cookies(cookies, self.cookies)
                # merge_setting(request.headers, self.headers, dict_class=CaseInsensitiveDict)
                headers = CaseInsensitiveDict(list(self.headers.items()))
                headers.update(list(request.headers.items()))
                for name in [name for name, value in headers.items() if value is None]:
                    del headers[name]
                # .netrc credentials as requests applies them, except to a request that carries
                # its own (requests lets the file replace an Authorization header: a Bearer key or
                # a SigV4 signature would become Basic auth, and an x-api-key request would get a
                # second credential)
                # nor do user:password@ credentials of the URL (requests makes them Basic auth in
                # place of the request's own: a Bedrock proxy URL with a login lost its signature)
                own_credentials = _carries_credentials(headers)
                netrc = get_netrc_auth(request.url) if self.trust_env and not own_credentials else None
                auth = netrc if netrc is not None else (_as_given if own_credentials else None)
                prepared = PreparedRequest()
                prepared.prepare(
                    method=request.method.upper(),
                    url=request.url,
                    files=request.files,
                    data=request.data,
                    json=request.json,
                    headers=headers,
                    params=None,  # {} merged with {}: the same URL
                    auth=auth,  # merge_setting(netrc, self.auth) with self.auth None
                    cookies=cookies,
                    hooks=merge_hooks(request.hooks, self.hooks),
                )
                return prepared

            def merge_environment_settings(self, url: Any, proxies: Any, stream: Any, verify: Any, cert: Any) -> Any:
                env_proxies = _environment_proxies(url) if self.trust_env and not proxies else None
                if env_proxies is None:
                    return super().merge_environment_settings(url, proxies, stream, verify, cert)
                if verify is True or verify is None:  # what requests does with trust_env
                    verify = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or verify
                return {
                    "proxies": _merge_proxies(env_proxies, self.proxies),
                    "stream": merge_setting(stream, self.stream),
                    "verify": merge_setting(verify, self.verify),
                    "cert": merge_setting(cert, self.cert),
                }

        _session_cls = _Session
        _hide_secrets_in_urllib3_logs()
    return _session_cls


class _Urllib3RequestLineFilter:
    """A ``logging`` filter of urllib3's loggers: the text arguments of its records that are a URL
    or a request target (``"POST /v1beta/models/m:streamGenerateContent?key=AIza... HTTP/1.1"
    401``, a retry's URL) have the values of secret-looking query parameters (Google's ``?key=``,
    Azure API Management's ``subscription-key``) replaced by ``***``. Holds no state; runs only
    for records that are emitted (DEBUG enabled)."""

    def filter(self, record: Any) -> bool:
        args = record.args
        if isinstance(args, tuple) and any(isinstance(a, str) and "?" in a and "=" in a for a in args):
            from .._safe import redact_url

            record.args = tuple(redact_url(a) if isinstance(a, str) and "?" in a and "=" in a else a for a in args)
        return True


def _hide_secrets_in_urllib3_logs() -> None:
    """Add :class:`_Urllib3RequestLineFilter` to urllib3's request loggers, once per process
    (called when the first provider session is built)."""
    import logging

    for name in ("urllib3.connectionpool", "urllib3.util.retry"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _Urllib3RequestLineFilter) for f in logger.filters):
            logger.addFilter(_Urllib3RequestLineFilter())


def _merge_proxies(request_proxies: Any, session_proxies: Any) -> Any:
    """``requests.sessions.merge_setting(request_proxies, session_proxies)`` for two plain dicts
    (what a provider's session always has), without requests' check of each against a runtime
    protocol (slow on Python 3.11, two per request): the session's items, then the request's, keys
    whose value is None dropped, in an ``OrderedDict`` as requests returns. Anything else takes
    ``merge_setting`` itself."""
    if type(request_proxies) is not dict or type(session_proxies) is not dict:
        from requests.sessions import merge_setting as _merge_setting

        merge_setting: Callable[[Any, Any], Any] = _merge_setting  # untyped in requests' stubs
        return merge_setting(request_proxies, session_proxies)
    merged = OrderedDict(session_proxies)
    merged.update(request_proxies)
    for key in [key for key, value in merged.items() if value is None]:
        del merged[key]
    return merged


def _as_given(prepared: Any) -> Any:
    """An auth that changes nothing: given to ``prepare``, it keeps requests from turning the
    URL's ``user:password@`` into an ``Authorization`` header in place of the request's own."""
    return prepared


def _carries_credentials(headers: Any) -> bool:
    """Whether a request's headers hold a credential (``Authorization``, ``x-api-key``, ...)."""
    return any(_is_secret_header(name) for name in headers)


_PROXIES_FROM_ENV_ONLY = os.name != "nt" and sys.platform != "darwin"
_proxy_state: Tuple[Any, Dict[str, Dict[str, str]]] = (None, {})  # (environment snapshot, origin -> proxies)


def _environment_proxies(url: str) -> Optional[Dict[str, str]]:
    """``requests.utils.get_environ_proxies(url)`` from the cache; None where it cannot be cached."""
    global _proxy_state
    data = environ_data()  # the raw mapping behind os.environ (a plain dict), or None
    if not _PROXIES_FROM_ENV_ONLY or data is None:
        return None
    state = _proxy_state
    if state[0] != data:
        state = _proxy_state = (dict(data), {})
    start = url.find("://") + 3
    end = url.find("/", start)
    origin = url if start < 3 or end < 0 else url[:end]
    proxies = state[1].get(origin)
    if proxies is None:
        from requests.utils import get_environ_proxies

        proxies = get_environ_proxies(url)
        if data == state[0] and len(state[1]) < 256:  # the environment did not change meanwhile
            state[1][origin] = proxies
    return dict(proxies)


_current = threading.local()  # .box: where this thread's next request notes its connection


def _note_connection(connection: Any) -> None:
    """Note the connection a request is about to be sent on (a pooled one has its socket already),
    then refuse to send when the abort came before it was noted: the abort listener found nothing
    to shut down then. Noted first, checked second, while the listener sets its flag first and
    reads the connection second, so one of the two always sees the other."""
    box = getattr(_current, "box", None)
    if box is not None:
        box["connection"] = connection
        _forget_handshake(box)  # the connection's own socket is the one to shut down from now on
        if box.get("aborted"):
            raise ConnectionAbortedError("the request was aborted before it was sent")


def _forget_handshake(box: Dict[str, Any]) -> None:
    """Close the duplicate of a new connection's socket noted by :func:`_new_abortable_conn`
    (under the box's lock: the abort listener may be shutting the connection down through it)."""
    if box.get("handshake") is not None:
        with box["lock"]:
            handshake = box.pop("handshake", None)
            if handshake is not None:
                handshake.close()


def _new_abortable_conn(connection: Any, default: Callable[[], Any]) -> Any:
    """Open the TCP connection like urllib3 does, but note each socket *before* it connects, so
    an abort can shut it down while ``connect()`` is blocked (an unreachable or firewalled host
    would otherwise hold an aborted run for the whole connect timeout). The host name is resolved
    first, abortably too (see :func:`_resolve`). Like urllib3, each address of the host is tried
    in turn, after a refusal or a connect timeout alike (a host whose IPv6 address is unreachable
    answers on its IPv4 one).

    Threads that are not sending an abortable request use urllib3's own code unchanged.
    """
    box = getattr(_current, "box", None)
    if box is None:
        return default()
    from urllib3.exceptions import ConnectTimeoutError, NewConnectionError
    from urllib3.util.connection import allowed_gai_family

    host, port = connection_address(connection)
    addresses = _resolve(connection, host, port, allowed_gai_family(), box)
    error: Optional[BaseException] = None
    for family, kind, proto, _name, address in addresses:
        sock = socket.socket(family, kind, proto)
        box["socket"] = sock
        if box.get("aborted"):  # the abort came before this socket existed
            box.pop("socket", None)
            sock.close()
            raise NewConnectionError(connection, "Failed to establish a new connection: aborted")
        try:
            set_socket_options(sock, connection.socket_options)
            if not is_default_timeout(connection.timeout):
                sock.settimeout(connection.timeout)
            if connection.source_address:
                sock.bind(connection.source_address)
            sock.connect(address)
        except OSError as exc:  # a timeout too: the next address may answer (urllib3 tries them all)
            sock.close()
            error = exc
            continue
        finally:
            box.pop("socket", None)
        sys.audit("http.client.connect", connection, connection.host, connection.port)
        _note_handshake(connection, sock, box)
        return sock
    if isinstance(error, socket.timeout):  # the last address timed out: urllib3 says so the same way
        raise ConnectTimeoutError(
            connection, f"Connection to {connection.host} timed out. (connect timeout={connection.timeout})"
        ) from error
    raise NewConnectionError(connection, f"Failed to establish a new connection: {error}")


def _note_handshake(connection: Any, sock: socket.socket, box: Dict[str, Any]) -> None:
    """Keep a connected socket where an abort can shut it down until the request is sent:
    ``connect()`` goes on with a proxy's CONNECT exchange and the TLS handshake, which a server
    (or a middlebox) that accepted the connection and then went silent holds for the whole
    connect timeout. A duplicate of the socket is noted: wrapping it for TLS detaches ``sock``
    itself, and shutting the duplicate down ends the connection under both. Noted first,
    checked second (as in :func:`_note_connection`)."""
    from urllib3.exceptions import NewConnectionError

    box["handshake"] = sock.dup()
    if box.get("aborted"):
        _forget_handshake(box)
        sock.close()
        raise NewConnectionError(connection, "Failed to establish a new connection: aborted")


def _resolve(connection: Any, host: str, port: int, family: int, box: Dict[str, Any]) -> Any:
    """``socket.getaddrinfo`` of ``host`` for an abortable connect.

    ``getaddrinfo`` blocks (seconds per name server and attempt with a slow resolver) before any
    socket exists for an abort to shut down, and nothing interrupts it: a host name is resolved
    on a daemon thread while the sender waits on an event that the abort listener also sets
    (through ``box["wake"]``). An abort ends the wait at once (``NewConnectionError``: "aborted");
    so does the connect timeout (``ConnectTimeoutError``: "resolving <host> timed out"): the
    resolution may take as long as the connect timeout, and the connect that follows as long
    again. A result that comes later is dropped. An IP address is resolved on this thread (no
    lookup happens). Raises urllib3's name resolution error when the name does not resolve.
    """
    from urllib3.exceptions import ConnectTimeoutError, NewConnectionError

    if _is_ip_address(host):
        return _getaddrinfo(connection, host, port, family)
    done = threading.Event()
    outcome: Dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["addresses"] = _getaddrinfo(connection, host, port, family)
        except BaseException as exc:  # noqa: BLE001 - handed to the sender, which raises it
            outcome["error"] = exc
        done.set()

    box["wake"] = done  # noted first, checked second (the listener sets its flag, then wakes)
    try:
        if not box.get("aborted"):
            threading.Thread(target=run, name=f"agentcore-resolve-{host}", daemon=True).start()
            done.wait(_connect_timeout(connection))
    finally:
        box.pop("wake", None)
    if box.get("aborted"):
        raise NewConnectionError(connection, "Failed to establish a new connection: aborted")
    if not done.is_set():
        raise ConnectTimeoutError(
            connection, f"resolving {connection.host} timed out. (connect timeout={connection.timeout})"
        )
    if "error" in outcome:
        raise outcome["error"]
    return outcome["addresses"]


def _getaddrinfo(connection: Any, host: str, port: int, family: int) -> Any:
    try:
        return socket.getaddrinfo(host, port, family, socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise name_resolution_error(connection, exc) from exc


def _is_ip_address(host: str) -> bool:
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
        except (OSError, ValueError):
            continue
        return True
    return False


def _connect_timeout(connection: Any) -> Optional[float]:
    """Seconds a connect of ``connection`` may take (None: no limit), as its socket would get."""
    timeout = connection.timeout
    return socket.getdefaulttimeout() if is_default_timeout(timeout) else timeout


_adapter_cls: Any = None


def _adapter_class() -> Any:
    """An HTTPAdapter whose connections tell the sending thread which socket a request uses
    (direct ones and those through an HTTP(S) proxy).

    That lets an abort listener (running on another thread) shut the socket down while the
    sender is blocked waiting for response headers, without a helper thread per request.
    """
    global _adapter_cls
    if _adapter_cls is None:
        import requests
        from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

        connection_cls, tls_connection_cls = noting_connection_classes(_note_connection, _new_abortable_conn)

        class _Pool(HTTPConnectionPool):
            ConnectionCls = connection_cls

        class _TLSPool(HTTPSConnectionPool):
            ConnectionCls = tls_connection_cls

        class _Adapter(requests.adapters.HTTPAdapter):
            def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
                super().init_poolmanager(*args, **kwargs)
                self.poolmanager.pool_classes_by_scheme = {"http": _Pool, "https": _TLSPool}

            def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
                # an HTTP(S) proxy's manager makes pools of its own: ours, so that a request
                # through $HTTPS_PROXY is as abortable as a direct one (SOCKS ones keep theirs)
                manager = super().proxy_manager_for(proxy, **proxy_kwargs)
                if not proxy.lower().startswith("socks"):
                    manager.pool_classes_by_scheme = {"http": _Pool, "https": _TLSPool}
                return manager

        _adapter_cls = _Adapter
    return _adapter_cls

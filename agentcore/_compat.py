"""Every use of another library's private names, in one place, each with a public fallback.

agentcore reaches past public APIs where the public path is measurably slower or cannot
do the job (each caller's docstring or comment says which). Each reach is a small function here that
works on every version ``setup.cfg`` allows and degrades to public behaviour when the private name
is gone; ``tests/test_providers_compat.py`` checks both that the private names still exist on the
installed versions (so a silent fallback is noticed) and that each fallback gives the same answer.

* :func:`environ_data` -- the plain dict behind ``os.environ`` (``os.environ._data``), compared
  cheaply to notice that the environment changed. Fallback: None (callers then take the slow path).
* :func:`json_scanner` -- ``json.JSONDecoder().scan_once``, the C scanner behind ``decode()``
  without its two whitespace regexes. Fallback: ``raw_decode`` (public; a little slower).
* urllib3: :func:`connection_address` (``HTTPConnection._dns_host``, the host name without a
  trailing dot as urllib3 resolves it; fallback ``.host``), :func:`name_resolution_error`
  (``NameResolutionError`` exists from urllib3 2.0; 1.26 raises ``NewConnectionError`` for a
  failed lookup), :func:`set_socket_options` (urllib3's private ``_set_socket_options`` is a
  two-line loop, re-done here), :func:`is_default_timeout` (the public ``Timeout.DEFAULT_TIMEOUT``
  sentinel, which differs between 1.26 and 2.x).
* :func:`noting_connection_classes` -- urllib3 connection subclasses that override the private
  ``_new_conn`` (how a connection opens its socket), so an abort can shut a socket down while
  ``connect()`` blocks. Were ``_new_conn`` gone, the override would simply never run: aborts
  during a TCP connect would then wait for the connect timeout, everything else unchanged.
* :func:`response_socket` -- the socket under a ``requests.Response`` (``raw._connection.sock`` on
  urllib3 2.x, ``raw._fp.fp.raw._sock`` on 1.26), needed to unblock a read from another thread.
* :func:`http_client_read1` -- ``read1`` of the ``http.client`` response under a urllib3 1.26
  response (``raw._fp``): urllib3 1.26 has no ``read1``, and its ``read(n)`` waits for ``n`` bytes.

Nothing here imports urllib3 or requests at module import (``import agentcore`` stays fast).
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any, Callable, Dict, Optional, Tuple

__all__ = [
    "environ_data",
    "json_scanner",
    "connection_address",
    "name_resolution_error",
    "set_socket_options",
    "is_default_timeout",
    "response_socket",
    "http_client_read1",
    "noting_connection_classes",
]


def environ_data() -> Optional[Dict[Any, Any]]:
    """The live ``dict`` behind ``os.environ`` (bytes or str keys, as the OS gives them), or None.

    Never mutate it. None when this Python keeps the environment some other way; callers must then
    treat the environment as changed on every call.
    """
    data = getattr(os.environ, "_data", None)
    return data if type(data) is dict else None


def json_scanner(decoder: Optional[json.JSONDecoder] = None) -> Callable[[str, int], Tuple[Any, int]]:
    """``scan(text, index) -> (value, end)`` for ``decoder`` (a default ``JSONDecoder`` if None).

    Raises ``StopIteration`` or ``ValueError`` when no JSON value starts at ``index``; like
    ``scan_once`` it does not skip leading whitespace. Callers check ``end == len(text)``.
    """
    decoder = decoder or json.JSONDecoder()
    scan = getattr(decoder, "scan_once", None)
    if callable(scan):
        return scan
    return decoder.raw_decode


# --------------------------------------------------------------------------- urllib3


def connection_address(connection: Any) -> Tuple[str, int]:
    """``(host, port)`` that urllib3 itself would connect ``connection`` (an HTTPConnection) to.

    urllib3 resolves ``_dns_host`` (the host with a trailing dot kept, IPv6 brackets stripped here
    as ``create_connection`` does); ``.host`` is the public spelling without the trailing dot.
    """
    host = getattr(connection, "_dns_host", None) or connection.host
    if host.startswith("["):
        host = host.strip("[]")
    return host, connection.port


def name_resolution_error(connection: Any, exc: socket.gaierror) -> Exception:
    """The exception urllib3's own ``_new_conn`` raises when resolving ``connection``'s host failed."""
    try:
        from urllib3.exceptions import NameResolutionError  # urllib3 >= 2.0
    except ImportError:
        from urllib3.exceptions import NewConnectionError

        return NewConnectionError(connection, f"Failed to establish a new connection: {exc}")
    return NameResolutionError(connection.host, connection, exc)


def set_socket_options(sock: socket.socket, options: Any) -> None:
    """Apply urllib3 ``socket_options`` (an iterable of ``setsockopt`` argument tuples, or None)."""
    for option in options or ():
        sock.setsockopt(*option)


def is_default_timeout(timeout: Any) -> bool:
    """True when ``timeout`` is urllib3's "use the socket default" sentinel (no explicit timeout)."""
    from urllib3.util.timeout import Timeout

    return timeout is Timeout.DEFAULT_TIMEOUT  # socket's global default on 1.26, a token on 2.x


def response_socket(response: Any) -> Optional[socket.socket]:
    """The socket a streaming ``requests.Response`` reads from, or None (closed, or unknown layout)."""
    raw = getattr(response, "raw", None)
    connection = getattr(raw, "_connection", None) or getattr(raw, "connection", None)
    sock = getattr(connection, "sock", None)
    if isinstance(sock, socket.socket):
        return sock
    fp = getattr(getattr(raw, "_fp", None), "fp", None)  # urllib3 1.26: the http.client response file
    sock = getattr(getattr(fp, "raw", None), "_sock", None)
    return sock if isinstance(sock, socket.socket) else None


def http_client_read1(raw: Any) -> Optional[Callable[[int], bytes]]:
    """``read1(n)`` of the ``http.client.HTTPResponse`` under urllib3 response ``raw``, or None.

    It returns whatever one socket read gave (at most ``n`` bytes; ``b""`` at the end of the body)
    and does no content decoding. For urllib3 1.26, whose own response has no ``read1``.
    """
    read1 = getattr(getattr(raw, "_fp", None), "read1", None)
    return read1 if callable(read1) else None


def noting_connection_classes(
    on_request: Callable[[Any], None], new_conn: Callable[[Any, Callable[[], Any]], Any]
) -> Tuple[type, type]:
    """urllib3 ``HTTPConnection`` and ``HTTPSConnection`` subclasses for a custom pool.

    ``request()`` calls ``on_request(connection)`` first; opening the socket (urllib3's private
    ``_new_conn``) calls ``new_conn(connection, default)``, where ``default()`` is urllib3's own.
    """
    from urllib3.connection import HTTPConnection, HTTPSConnection

    def noting(base: type) -> type:
        class Connection(base):  # type: ignore[misc]
            def request(self, *args: Any, **kwargs: Any) -> Any:
                on_request(self)
                return super().request(*args, **kwargs)

            def _new_conn(self) -> Any:
                return new_conn(self, super()._new_conn)

        Connection.__name__ = Connection.__qualname__ = f"Noting{base.__name__}"
        return Connection

    return noting(HTTPConnection), noting(HTTPSConnection)

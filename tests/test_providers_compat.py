"""agentcore._compat: the one module that touches other libraries' private names (issue 10 item 6).

Two kinds of test: the private names still exist on the installed versions (so a fallback that
silently took over is noticed), and each fallback gives the same answer as the fast path, driven
through the real HTTP layer where it matters (an abortable request against a local server with
urllib3's private names removed, as on urllib3 1.26 where ``NameResolutionError`` does not exist).
"""

from __future__ import annotations

import json
import os
import socket

import pytest
import urllib3
from _servers import Reply, ScriptedServer, sse

from agentcore import _compat
from agentcore.providers import stream
from agentcore.signals import AbortController
from agentcore.types import AgentContext, Model, UserMessage

URLLIB3_MAJOR = int(urllib3.__version__.split(".")[0])


def _ctx():
    return AgentContext(system_prompt="", messages=[UserMessage("hi")])


def _chunk(delta=None, finish=None):
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}],
    }


def _run_abortable(server):
    """One request through the abortable connect path (a signal makes ``_new_conn`` ours)."""
    server.enqueue(Reply(body=sse(_chunk({"content": "ok"}), _chunk(finish="stop"), done=True)))
    model = Model(id="m", api="openai-completions", provider="compat-test", base_url=server.url + "/v1")
    return stream(model, _ctx(), api_key="k", signal=AbortController().signal, max_retries=0).result()


# --------------------------------------------------------------------------- the private names exist


def test_private_names_still_exist_on_the_installed_versions():
    assert type(getattr(os.environ, "_data", None)) is dict
    assert callable(getattr(json.JSONDecoder(), "scan_once", None))
    from urllib3.connection import HTTPConnection

    assert HTTPConnection("example.com.", 80)._dns_host == "example.com."
    assert callable(getattr(HTTPConnection, "_new_conn", None))  # overridden by noting_connection_classes
    if URLLIB3_MAJOR >= 2:
        from urllib3.exceptions import NameResolutionError  # noqa: F401


def test_response_socket_finds_the_socket_of_a_streaming_response():
    import requests

    with ScriptedServer() as server:
        server.enqueue(Reply(body="data: 1\n\n", stall_after=0))
        response = requests.post(server.url + "/x", data=b"{}", stream=True, timeout=10)
        try:
            sock = _compat.response_socket(response)
            assert isinstance(sock, socket.socket) and sock.getpeername()[1] == int(server.url.rsplit(":", 1)[1])
        finally:
            server.release.set()
            response.close()


# --------------------------------------------------------------------------- each fallback


def test_environ_data_is_the_live_environment_or_none(monkeypatch):
    monkeypatch.setenv("AGENTCORE_COMPAT_PROBE", "1")
    data = _compat.environ_data()
    assert data is not None and any(k in (b"AGENTCORE_COMPAT_PROBE", "AGENTCORE_COMPAT_PROBE") for k in data)
    monkeypatch.setattr(os, "environ", {"PLAIN": "mapping"})  # a Python that keeps no _data
    assert _compat.environ_data() is None


def test_json_scanner_fallback_matches_scan_once():
    fast = _compat.json_scanner()

    class NoScanner:  # a json implementation without the attribute: raw_decode takes over
        raw_decode = json.JSONDecoder().raw_decode

    slow = _compat.json_scanner(NoScanner())
    for text in ('{"a": [1, 2.5, "x"]}', '"s"', "12", '{"a":1} trailing', "[1]"):
        assert fast(text, 0) == slow(text, 0)
    for bad in ("", "{", " {}", "nope"):
        with pytest.raises((StopIteration, ValueError)):
            fast(bad, 0)
        with pytest.raises((StopIteration, ValueError)):
            slow(bad, 0)


def test_connection_address_without_dns_host():
    class Connection:
        host, port = "[::1]", 8080

    assert _compat.connection_address(Connection()) == ("::1", 8080)


def test_name_resolution_error_on_urllib3_without_name_resolution_error(monkeypatch):
    from urllib3.connection import HTTPConnection
    from urllib3.exceptions import NewConnectionError

    monkeypatch.delattr(urllib3.exceptions, "NameResolutionError", raising=False)  # as urllib3 1.26
    error = _compat.name_resolution_error(HTTPConnection("nowhere.test", 80), socket.gaierror(-2, "unknown"))
    assert isinstance(error, NewConnectionError) and "unknown" in str(error)


def test_a_failed_lookup_is_a_connection_error_on_urllib3_1_26(monkeypatch):
    # The regression of issue 10.6: with urllib3 1.26 every abortable request raised
    # "ImportError: cannot import name 'NameResolutionError'" (reported as the assistant's error).
    def no_such_host(*_args, **_kwargs):
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.delattr(urllib3.exceptions, "NameResolutionError", raising=False)
    monkeypatch.setattr(socket, "getaddrinfo", no_such_host)
    model = Model(id="m", api="openai-completions", provider="compat-test", base_url="http://nowhere.test/v1")
    result = stream(model, _ctx(), api_key="k", signal=AbortController().signal, max_retries=0).result()
    assert result.stop_reason == "error"
    assert "Connection error talking to nowhere.test" in result.error_message
    assert "ImportError" not in result.error_message and "Name or service not known" in result.error_message


def test_abortable_requests_work_without_urllib3s_private_helpers(monkeypatch):
    # urllib3's private _set_socket_options is not used: removing it changes nothing (urllib3's own
    # module-level _DEFAULT_TIMEOUT cannot be removed the same way: urllib3 itself reads it)
    import urllib3.util.connection

    monkeypatch.delattr(urllib3.util.connection, "_set_socket_options", raising=False)
    with ScriptedServer() as server:
        result = _run_abortable(server)
    assert result.stop_reason == "stop", result.error_message
    assert result.content[0].text == "ok"


def test_is_default_timeout():
    from urllib3.util.timeout import Timeout

    assert _compat.is_default_timeout(Timeout.DEFAULT_TIMEOUT)
    assert not _compat.is_default_timeout(5.0) and not _compat.is_default_timeout(None)


def test_set_socket_options_applies_each_tuple():
    with socket.socket() as sock:
        _compat.set_socket_options(sock, [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        _compat.set_socket_options(sock, None)  # urllib3 passes None for "no options"


# --------------------------------------------------------------------------- urllib3 1.26 body reads


def _without_read1(monkeypatch):
    """urllib3 1.26's response: no read1 (and its read(n) / iter_content wait for n bytes)."""
    import urllib3.response

    monkeypatch.setattr(urllib3.response.HTTPResponse, "read1", None, raising=False)


def test_iter_body_yields_what_arrived_without_urllib3_read1(monkeypatch):
    # On urllib3 1.26 a non-chunked body was read with iter_content(None), which waits for the
    # whole body: a streamed answer arrived in one piece at the end, and agentcore-web's fetch_url
    # deadline could not fire while a server trickled bytes.
    import requests

    from agentcore.providers.http import iter_body

    _without_read1(monkeypatch)
    with ScriptedServer() as server:
        server.stall_timeout = 10
        server.enqueue(Reply(body=b"first|second", chunked=False, stall_after=6))
        response = requests.get(server.url + "/x", stream=True, timeout=10)
        pieces = iter_body(response)
        assert next(pieces) == b"first|"  # before the server sends the rest
        server.release.set()
        assert b"".join(pieces) == b"second"
        response.close()


def test_iter_body_decodes_gzip_without_urllib3_read1(monkeypatch):
    import gzip

    import requests

    from agentcore.providers.http import iter_body

    _without_read1(monkeypatch)
    text = b"data: " + b"x" * 5000 + b"\n\n"
    with ScriptedServer() as server:
        server.enqueue(
            Reply(body=gzip.compress(text), chunked=False, chunk_size=100, headers={"Content-Encoding": "gzip"})
        )
        response = requests.get(server.url + "/x", stream=True, timeout=10)
        assert b"".join(iter_body(response)) == text
        response.close()

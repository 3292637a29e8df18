"""Standard logging in the core (issue 15): the ``agentcore.*`` loggers, their levels and redaction.

Every test captures at DEBUG with caplog and checks both that the expected records exist and that
no key, auth header value or URL secret appears in any record (message, args or formatted text).
"""

from __future__ import annotations

import json
import logging

import pytest
from _servers import Reply, ScriptedServer, sse

from agentcore import Agent
from agentcore.providers import complete
from agentcore.providers import http as _http
from agentcore.session import JsonlSessionStorage, SqliteSessionStorage
from agentcore.tools import tool
from agentcore.types import AgentContext, Model, UserMessage

KEY = "sk-log-test-secret-key-123"
HEADER_SECRET = "hdr-secret-value-4242"
SECRETS = (KEY, HEADER_SECRET)


def _chunk(delta=None, finish=None):
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}],
    }


def _calls(*calls):
    deltas = [
        _chunk(
            {
                "tool_calls": [
                    {
                        "index": i,
                        "id": cid,
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args)},
                    }
                ]
            }
        )
        for i, (cid, name, args) in enumerate(calls)
    ]
    return sse(*deltas, _chunk(finish="tool_calls"), done=True)


def _text(text):
    return sse(_chunk({"content": text}), _chunk(finish="stop"), done=True)


def _model(server):
    return Model(id="m", api="openai-completions", provider="local", base_url=server.url + "/v1")


def _records_text(records):
    """Everything a handler could print of ``records``: message, raw args, formatted text."""
    parts = []
    for record in records:
        parts.append(record.getMessage())
        parts.append(repr(record.args))
        parts.append(str(record.msg))
        parts.append(logging.Formatter().format(record))
    return "\n".join(parts)


def _assert_no_secret(records, secrets=SECRETS):
    text = _records_text(records)
    for secret in secrets:
        assert secret not in text


def _messages(caplog, logger):
    return [r.getMessage() for r in caplog.records if r.name == logger]


@pytest.fixture
def no_backoff(monkeypatch):
    from agentcore.providers import retries

    monkeypatch.setattr(retries, "_backoff", lambda attempt: 0.0)


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def boom(why: str) -> str:
    """Always fails."""
    raise RuntimeError("tool failed: " + why)


@tool
def guarded(x: str) -> str:
    """Blocked by the approval hook."""
    return x


def test_run_with_retries_and_tool_outcomes_logs_without_secrets(caplog, no_backoff):
    caplog.set_level(logging.DEBUG, logger="agentcore")
    with ScriptedServer() as server:
        server.enqueue(
            Reply(
                status=429,
                headers={"retry-after-ms": "1", "x-request-id": "req-1"},
                body='{"error":{"message":"slow down ' + KEY + '"}}',
            ),
            Reply(
                body=_calls(
                    ("c1", "add", {"a": 1, "b": 2}),
                    ("c2", "boom", {"why": "x"}),
                    ("c3", "guarded", {"x": "y"}),
                    ("c4", "add", {"a": "one"}),
                    ("c5", "missing", {}),
                ),
                headers={"x-request-id": "req-2"},
            ),
            Reply(status=500, body=""),
            Reply(body=_text("done"), headers={"request-id": "req-4"}),
        )
        agent = Agent(
            _model(server),
            tools=[add, boom, guarded],
            api_key=KEY,
            headers={"X-Api-Key": HEADER_SECRET},
            before_tool_call=lambda ctx, signal: {"block": True} if ctx.tool_call.name == "guarded" else None,
        )
        agent.prompt("go")
        assert agent.state.messages[-1].text == "done"
        sent = server.requests[0].headers
        assert sent["x-api-key"] == HEADER_SECRET and KEY in sent["authorization"]

    _assert_no_secret(caplog.records)
    http_lines = _messages(caplog, "agentcore.providers.http")
    assert sum(line.startswith("POST http://127.0.0.1:") for line in http_lines) == 4
    assert any("provider=local model=m attempt=1/3" in line for line in http_lines)
    assert any(line.startswith("response 429 ") and "request_id=req-1" in line for line in http_lines)
    assert any(line.startswith("response 200 ") and "request_id=req-4" in line for line in http_lines)
    retries = [line for line in http_lines if line.startswith("retry ")]
    assert len(retries) == 2
    assert "reason=status 429" in retries[0] and "(retry-after)" in retries[0] and "attempt=2/3" in retries[0]
    assert "reason=status 500" in retries[1] and "(backoff)" in retries[1]
    tool_lines = _messages(caplog, "agentcore.loop")
    outcomes = {line.split(" id=")[1].split()[0]: line.split("outcome=")[1].split()[0] for line in tool_lines}
    assert outcomes == {"c1": "ok", "c2": "error", "c3": "blocked", "c4": "invalid", "c5": "invalid"}
    assert all("duration_ms=" in line for line in tool_lines)
    agent_lines = _messages(caplog, "agentcore.agent")
    assert agent_lines[0] == "run start model=local/m"
    assert agent_lines[-1].startswith("run end stop_reason=stop messages=")
    # INFO: nothing by default (a broken third-party plugin of this machine may warn: not ours)
    assert not [r for r in caplog.records if r.levelno >= logging.INFO and r.name != "agentcore.plugins"]


def test_connection_error_retry_and_give_up_are_logged_redacted(caplog, no_backoff):
    caplog.set_level(logging.DEBUG, logger="agentcore")
    with ScriptedServer() as server:
        model = _model(server)  # the server is closed: connections are refused
    result = complete(
        model,
        AgentContext("", [UserMessage("hi")]),
        api_key=KEY,
        max_retries=1,
        headers={"Authorization": "Bearer " + HEADER_SECRET},
    )
    assert result.stop_reason == "error"
    _assert_no_secret(caplog.records)
    lines = _messages(caplog, "agentcore.providers.http")
    assert [line.split()[0] for line in lines] == ["POST", "retry", "POST", "no"]
    assert "reason=Connection error talking to 127.0.0.1" in lines[1]
    assert "attempt=2/2" in lines[1] and "after attempt=2/2" in lines[3]


def test_retry_after_above_the_cap_is_a_warning(caplog):
    caplog.set_level(logging.DEBUG, logger="agentcore")
    with ScriptedServer() as server:
        server.enqueue(Reply(status=429, headers={"retry-after": "120"}, body=""))
        result = complete(_model(server), AgentContext("", [UserMessage("hi")]), api_key=KEY, max_retry_delay_ms=5000)
    assert result.error_message.startswith("Server requested 120s retry delay")
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and warnings[0].name == "agentcore.providers.http"
    assert "120s" in warnings[0].getMessage() and "cap of 5s" in warnings[0].getMessage()
    _assert_no_secret(caplog.records)


def test_logged_url_hides_user_info_and_secret_query_values():
    url = "https://bob:pw-secret-5678@example.com/v1/x?alt=sse&key=query-secret-999&api_token=tok-secret-1"
    secrets: list = []
    shown = _http._loggable_url(url, secrets)
    assert shown == "https://example.com/v1/x?alt=sse&key=***&api_token=***"
    assert "query-secret-999" in secrets and "pw-secret-5678" in secrets


def test_nothing_is_logged_below_debug(caplog):
    caplog.set_level(logging.INFO, logger="agentcore")
    with ScriptedServer() as server:
        server.enqueue(Reply(body=_text("hi")))
        Agent(_model(server), api_key=KEY).prompt("go")
    assert [r for r in caplog.records if r.name != "agentcore.plugins"] == []


def test_session_open_create_and_torn_tail_repair(tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="agentcore")
    path = tmp_path / "s.jsonl"
    JsonlSessionStorage.create(path, session_id="sid-1").close()
    with open(path, "ab") as handle:
        handle.write(b'{"type": "message", "id": "x", "torn')
    JsonlSessionStorage(path).close()
    lines = _messages(caplog, "agentcore.session.jsonl")
    assert lines[0] == f"created session file {path} id=sid-1"
    assert any(line.startswith(f"opened session file {path} entries=0") for line in lines)
    warning = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warning) == 1 and "last line was torn" in warning[0].getMessage()
    assert f"{path}" in warning[0].getMessage()

    db = tmp_path / "s.db"
    SqliteSessionStorage.create(db, session_id="sid-2").close()
    lines = _messages(caplog, "agentcore.session.sqlite")
    assert lines == [f"created session sid-2 in {db}", f"opened session sid-2 in {db} entries=0 read_only=False"]


def test_a_tool_ended_by_an_abort_is_logged_as_aborted(caplog):
    import threading

    from agentcore.testing import ScriptedModel, text, tool_call

    caplog.set_level(logging.DEBUG, logger="agentcore")
    started = threading.Event()

    @tool
    def wait(seconds: int, signal=None) -> str:
        """Waits until the run is aborted."""
        started.set()
        signal.wait(30)
        raise RuntimeError("stopped")

    scripted = ScriptedModel([tool_call("wait", {"seconds": 1}, id="w1"), text("unused")])
    agent = Agent(scripted.model, tools=[wait], stream_fn=scripted.stream_fn)
    agent.prompt("go", wait=False)
    assert started.wait(10)
    agent.abort()
    agent.wait_for_idle()
    lines = _messages(caplog, "agentcore.loop")
    assert len(lines) == 1 and lines[0].startswith("tool call wait id=w1 outcome=aborted duration_ms=")
    assert "stop_reason=aborted" in _messages(caplog, "agentcore.agent")[-1]


def test_an_in_stream_retry_is_logged_like_an_http_one(caplog):  # issue 17: in-stream retries
    from agentcore.providers import stream
    from agentcore.types import AgentContext, Model, UserMessage

    good = {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}
    error = {"error": {"message": "overloaded, key sk-live-secret-0123456789", "code": "server_error"}}
    with ScriptedServer([Reply(body=sse(error)), Reply(body=sse(good, done=True))]) as server:
        model = Model(id="m", api="openai-completions", provider="local", base_url=server.url + "/v1")
        with caplog.at_level(logging.DEBUG, logger="agentcore.providers.http"):
            ctx = AgentContext(messages=[UserMessage("hi")])
            result = stream(model, ctx, api_key="sk-live-secret-0123456789").result()
    assert result.stop_reason == "stop", result.error_message
    retries = [r.getMessage() for r in caplog.records if "(in-stream error)" in r.getMessage()]
    assert len(retries) == 1 and "provider=local model=m" in retries[0] and "attempt=2/3" in retries[0]
    assert "sk-live-secret-0123456789" not in caplog.text  # the echoed key is redacted

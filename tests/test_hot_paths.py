"""Fast paths of the end-to-end run (issue 4) behave exactly like the general paths they shortcut.

* a lone ``@tool`` call that cannot send updates executes on the run thread (agent-loop §8.4);
  tools that can send updates, several calls, and blocking runs on the main thread keep workers;
* chunked HTTP bodies are read one chunk at a time, compressed ones included (providers §4);
* JSON events are scanned directly, with ``decode()``'s results and errors for anything unusual.
"""

from __future__ import annotations

import gzip
import json
import threading
from typing import Any, List

import pytest

from _servers import Reply, ScriptedServer, sse
from agentcore import Agent, tool
from agentcore.loop import AgentLoopConfig, run_agent_loop
from agentcore.providers import complete
from agentcore.providers.base import ProviderError, parse_json_event
from agentcore.testing import ScriptedModel, call, response, text, tool_call
from agentcore.types import AgentContext, Model, UserMessage


def _thread_of_events(agent: Agent) -> List[Any]:
    seen: List[Any] = []
    agent.subscribe(lambda event: seen.append((event.type, threading.get_ident())))
    return seen


def test_lone_tool_without_on_update_runs_on_the_run_thread():  # agent-loop §8.4, §2.9 parallel order
    where: List[int] = []

    @tool
    def multiply(a: int, b: int) -> int:
        """Multiply."""
        where.append(threading.get_ident())
        return a * b

    scripted = ScriptedModel([tool_call("multiply", {"a": 6, "b": 7}), text("42")])
    agent = Agent(scripted.model, tools=[multiply], stream_fn=scripted.stream_fn)
    seen = _thread_of_events(agent)
    agent.prompt("go")
    run_threads = {ident for _, ident in seen}
    assert len(run_threads) == 1 and where[0] in run_threads  # no worker thread was involved
    assert where[0] != threading.get_ident()
    kinds = [kind for kind, _ in seen if kind.startswith("tool_") or kind == "turn_end"]
    assert kinds == ["tool_execution_start", "tool_execution_end", "turn_end", "turn_end"]
    result = agent.state.messages[2]
    assert result.role == "toolResult" and result.content[0].text == "42" and not result.is_error


def test_lone_tool_that_raises_still_gives_an_error_result_inline():  # agent-loop §2.8
    @tool
    def broken() -> str:
        """Fails."""
        raise RuntimeError("disk on fire")

    scripted = ScriptedModel([tool_call("broken", {}), text("sorry")])
    agent = Agent(scripted.model, tools=[broken], stream_fn=scripted.stream_fn)
    agent.prompt("go")
    result = agent.state.messages[2]
    assert result.is_error and result.content[0].text == "disk on fire"


def test_tool_with_on_update_runs_on_a_worker_and_its_updates_arrive_live():  # agent-loop §2.8, §8.4
    update_seen = threading.Event()
    where: List[int] = []

    @tool
    def slow(on_update: Any) -> str:
        """Reports progress, then waits until the listener saw it."""
        where.append(threading.get_ident())
        on_update("half way")
        assert update_seen.wait(5), "the update was not emitted while the tool was running"
        return "done"

    scripted = ScriptedModel([tool_call("slow", {}), text("ok")])
    agent = Agent(scripted.model, tools=[slow], stream_fn=scripted.stream_fn)
    run_thread: List[int] = []

    def listener(event: Any) -> None:
        if event.type == "tool_execution_update":
            run_thread.append(threading.get_ident())
            update_seen.set()

    agent.subscribe(listener)
    agent.prompt("go")
    assert agent.state.messages[2].content[0].text == "done"
    assert run_thread and where and where[0] != run_thread[0]


def test_two_calls_of_one_batch_still_run_concurrently():  # agent-loop §2.9 parallel
    barrier = threading.Barrier(2, timeout=5)

    @tool
    def meet(name: str) -> str:
        """Waits for the other call."""
        barrier.wait()  # would time out if the calls ran one after the other
        return name

    both = response(call("meet", {"name": "a"}, id="c1"), call("meet", {"name": "b"}, id="c2"))
    scripted = ScriptedModel([both, text("met")])
    agent = Agent(scripted.model, tools=[meet], stream_fn=scripted.stream_fn)
    agent.prompt("go")
    results = [m for m in agent.state.messages if m.role == "toolResult"]
    assert [r.content[0].text for r in results] == ["a", "b"] and not any(r.is_error for r in results)


def test_blocking_core_on_the_main_thread_keeps_the_tool_off_it():  # DESIGN §2: Ctrl+C reaches the loop
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("needs the main thread")
    where: List[int] = []

    @tool
    def ping() -> str:
        """Pong."""
        where.append(threading.get_ident())
        return "pong"

    scripted = ScriptedModel([tool_call("ping", {}), text("done")])
    events: List[Any] = []
    run_agent_loop([UserMessage("go")], AgentContext("", [], [ping]), AgentLoopConfig(scripted.model),
                   events.append, stream_fn=scripted.stream_fn)
    assert where and where[0] != threading.get_ident()
    assert [e.type for e in events].count("tool_execution_end") == 1


# --------------------------------------------------------------------------- HTTP body and JSON


def _chunk(content: str) -> Any:
    return {"id": "c", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}]}


def _finish() -> Any:
    return {"id": "c", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}


@pytest.mark.parametrize("chunked, encoding", [(True, None), (True, "gzip"), (False, None), (False, "gzip")])
def test_streamed_body_framings_and_encodings(chunked, encoding):  # providers §4 step 5
    body = sse(*[_chunk(w) for w in ("Hel", "lo, ", "wörld")], _finish(), done=True).encode("utf-8")
    headers = {}
    if encoding == "gzip":
        body = gzip.compress(body)
        headers["Content-Encoding"] = "gzip"
    with ScriptedServer([Reply(body=body, chunk_size=9, chunked=chunked, headers=headers)]) as server:
        model = Model(id="m", api="openai-completions", provider="local", base_url=server.url + "/v1")
        message = complete(model, AgentContext("", [UserMessage("hi")]))
    assert message.stop_reason == "stop", message.error_message
    assert message.text == "Hello, wörld"


@pytest.mark.parametrize("data", ['{"a": [1, 2.5, "x"]}', ' {"a": 1}', '{"a": 1} ', "[1, 2]", '"s"', "NaN",
                                  "null", '{"a": "\\ud83d\\ude00"}'])
def test_parse_json_event_equals_json_loads(data):  # providers §5
    value = parse_json_event(data)
    expected = json.loads(data)
    assert value == expected or (value != value and expected != expected)  # NaN


@pytest.mark.parametrize("data", ["", "{", '{"a": 1}x', '{"a": 1} {"b": 2}', "nul", "{'a': 1}"])
def test_parse_json_event_reports_what_json_loads_reports(data):  # providers §5: malformed JSON
    with pytest.raises(ValueError) as expected:
        json.loads(data)
    with pytest.raises(ProviderError) as raised:
        parse_json_event(data)
    assert str(expected.value) in str(raised.value) and repr(data) in str(raised.value)


_PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY",
                    "no_proxy", "NO_PROXY")


def test_environment_proxy_changes_apply_to_the_next_request(monkeypatch):  # providers §4: requests' rules
    from agentcore.providers import http

    if not http._PROXIES_FROM_ENV_ONLY:
        pytest.skip("proxies may come from system settings here; requests' own path is used")
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    body = sse(_chunk("ok"), _finish(), done=True)
    with ScriptedServer() as target, ScriptedServer() as proxy:
        model = Model(id="m", api="openai-completions", provider="proxy-test", base_url=target.url + "/v1")

        def ask() -> str:
            target.enqueue(Reply(body=body))
            proxy.enqueue(Reply(body=body))
            return complete(model, AgentContext("", [UserMessage("hi")])).text

        assert ask() == "ok" and (len(target.requests), len(proxy.requests)) == (1, 0)
        monkeypatch.setenv("http_proxy", proxy.url)
        assert ask() == "ok" and (len(target.requests), len(proxy.requests)) == (1, 1)
        assert proxy.requests[0].path == "/v1/chat/completions"
        monkeypatch.setenv("no_proxy", "127.0.0.1")
        assert ask() == "ok" and (len(target.requests), len(proxy.requests)) == (2, 1)
        monkeypatch.delenv("no_proxy")
        monkeypatch.delenv("http_proxy")
        assert ask() == "ok" and (len(target.requests), len(proxy.requests)) == (3, 1)

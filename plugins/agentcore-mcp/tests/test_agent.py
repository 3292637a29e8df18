"""An Agent with the scripted model calling MCP tools end to end (agentcore.testing)."""

from __future__ import annotations

import sys
import threading

import pytest
from agentcore_mcp import MCPServer
from conftest import TEST_SERVER, eventually

from agentcore import Agent, Session
from agentcore.testing import ScriptedModel, call, response, text, tool_call


@pytest.fixture(scope="module")
def module_markers(tmp_path_factory):
    return tmp_path_factory.mktemp("agent-markers")


@pytest.fixture(scope="module")
def two_servers(module_markers):
    """Two test servers for the module (starting one costs ~1-3 s on a busy machine)."""
    env = {"MARKER_DIR": str(module_markers)}
    with (
        MCPServer.stdio(sys.executable, [TEST_SERVER], env=env, name="alpha") as a,
        MCPServer.stdio(sys.executable, [TEST_SERVER], env=env, name="beta") as b,
    ):
        yield a, b


def results_of(messages):
    return [m for m in messages if m.role == "toolResult"]


def test_parallel_calls_to_two_servers(two_servers):
    alpha, beta = two_servers
    # alpha's call returns only once beta's call ran: sequential execution would time out
    scripted = ScriptedModel(
        [
            response(call("a_wait_for", {"tag": "x"}), call("b_go", {"tag": "x"}), stop_reason="toolUse"),
            text("both done"),
        ]
    )
    agent = Agent(scripted.model, tools=alpha.tools(prefix="a") + beta.tools(prefix="b"), stream_fn=scripted.stream_fn)
    messages = agent.prompt("go")
    results = results_of(messages)
    assert [(r.tool_name, r.is_error, r.content[0].text) for r in results] == [
        ("a_wait_for", False, "x arrived"),
        ("b_go", False, "released x"),
    ]
    assert messages[-1].content[0].text == "both done"


def test_progress_arrives_as_tool_execution_updates(two_servers):
    alpha, _ = two_servers
    scripted = ScriptedModel([tool_call("a_progress", {"steps": 2}), text("ok")])
    agent = Agent(scripted.model, tools=alpha.tools(prefix="a"), stream_fn=scripted.stream_fn)
    updates = []
    agent.subscribe(lambda e: updates.append(e) if e.type == "tool_execution_update" else None)
    agent.prompt("go")
    assert [u.partial_result.content[0].text for u in updates] == ["step 1 of 2", "step 2 of 2"]


def test_abort_during_a_long_call_cancels_it_on_the_server(two_servers, module_markers):
    marker_dir = module_markers
    alpha, _ = two_servers
    restarts = alpha.restarts
    scripted = ScriptedModel([tool_call("a_hang", {"tag": "run"}), text("never")])
    agent = Agent(scripted.model, tools=alpha.tools(prefix="a"), stream_fn=scripted.stream_fn)
    agent.prompt("go", wait=False)
    assert eventually(lambda: (marker_dir / "started-run").exists())
    agent.abort()
    assert agent.wait_for_idle(timeout=30)
    results = results_of(agent.state.messages)
    assert len(results) == 1 and results[0].is_error
    assert "aborted" in results[0].content[0].text
    assert eventually(lambda: (marker_dir / "cancelled-run").exists()), "the server never saw the cancellation"
    assert alpha.restarts == restarts


def test_a_crashed_server_is_an_error_result_and_comes_back(two_servers):
    alpha, _ = two_servers
    restarts = alpha.restarts
    scripted = ScriptedModel(
        [tool_call("a_die", {}), text("it crashed"), tool_call("a_echo", {"text": "back"}), text("fine")]
    )
    agent = Agent(scripted.model, tools=alpha.tools(prefix="a"), stream_fn=scripted.stream_fn)
    first = results_of(agent.prompt("crash it"))
    assert first[0].is_error and "MCP server 'alpha' exited with code 3" in first[0].content[0].text
    second = results_of(agent.prompt("again"))
    assert not second[0].is_error and second[0].content[0].text == "back"
    assert alpha.restarts == restarts + 1


def test_the_session_file_holds_no_secret(marker_dir, tmp_path):
    secret = "sk-live-abcdef0123456789"
    env = {"MARKER_DIR": str(marker_dir), "SERVICE_TOKEN": secret}
    with MCPServer.stdio(sys.executable, [TEST_SERVER], env=env, name="vault") as vault:
        scripted = ScriptedModel([tool_call("die", {"say_env": "SERVICE_TOKEN"}), text("noted")])
        path = tmp_path / "s.jsonl"
        agent = Agent(scripted.model, tools=vault.tools(), stream_fn=scripted.stream_fn, session=Session.create(path))
        result = results_of(agent.prompt("go"))[0]
    assert result.is_error and "SERVICE_TOKEN was ***" in result.content[0].text
    assert secret not in path.read_text()


def test_a_huge_result_reaches_the_transcript_and_the_session_cut(two_servers, tmp_path):
    alpha, _ = two_servers
    scripted = ScriptedModel([tool_call("a_big", {"chars": 400_000}), text("read it")])
    path = tmp_path / "s.jsonl"
    agent = Agent(
        scripted.model, tools=alpha.tools(prefix="a"), stream_fn=scripted.stream_fn, session=Session.create(path)
    )
    result = results_of(agent.prompt("go"))[0]
    assert not result.is_error and result.content[0].text == "a" * 50_000
    assert "showing the first 50,000 of 400,000 characters" in result.content[1].text
    # what the model was sent next is the cut result too, and the session holds no more than that
    sent = [m for m in scripted.contexts[-1].messages if m.role == "toolResult"][0]
    assert sum(len(b.text) for b in sent.content) < 50_200
    assert path.stat().st_size < 60_000


def test_tools_by_name_through_the_registry_need_the_plugin_config(two_servers):
    alpha, _ = two_servers
    agent = Agent(ScriptedModel([]).model, tools=alpha.tools(prefix="a"))
    assert "a_echo" in {t.name for t in agent.state.tools}


def test_many_agents_on_threads_share_one_server(two_servers):
    alpha, _ = two_servers
    tools = alpha.tools(prefix="a")
    outputs = {}

    def run(i: int) -> None:
        scripted = ScriptedModel([tool_call("a_add", {"a": i, "b": 1}), text("done")])
        agent = Agent(scripted.model, tools=tools, stream_fn=scripted.stream_fn)
        outputs[i] = results_of(agent.prompt("add"))[0].content[0].text

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outputs == {i: str(i + 1) for i in range(4)}


def test_a_server_nobody_closed_ends_when_its_agent_is_collected(marker_dir):
    """A service that builds an agent per request and forgets close() must not pile up servers
    until the interpreter exits: the server (and its process group) ends with the last reference."""
    import gc

    from conftest import alive, group_members

    def use_and_forget():
        server = MCPServer.stdio(sys.executable, [TEST_SERVER], env={"MARKER_DIR": str(marker_dir)}, name="forgotten")
        scripted = ScriptedModel([tool_call("spawn_child", {}), text("done")])
        agent = Agent(scripted.model, tools=server.tools(), stream_fn=scripted.stream_fn)
        child = int(results_of(agent.prompt("go"))[0].content[0].text)
        return server.pid, child

    pgid, child = use_and_forget()
    gc.collect()
    assert eventually(lambda: not group_members(pgid) and not alive(child), within=10), "the server outlived its agent"

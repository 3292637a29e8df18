"""Resuming an Agent from a session: which model it gets (issue 10 item 8).

``Agent(session=...)`` without ``model=`` resumes with the session's last model: from the model
registry, or rebuilt from the endpoint agentcore records on ``model_change`` entries (``api``,
``baseUrl``: never a key or headers). When neither works the constructor raises before anything is
written. The CLI side (``agentcore run --session``) is in test_cli.py.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, List

import pytest

from agentcore import Agent, Model, Session
from agentcore.session.agent_link import UnresolvedModelError, model_endpoint, session_model
from agentcore.testing import ScriptedModel

SECRET = "sk-resume-SECRET-77e1"


def _entries(path: Path) -> List[Dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()][1:]


def _record(path: Path, model: Model, **agent_options: Any) -> None:
    """One prompt answered by a scripted stream, recorded into a new session at ``path``."""
    scripted = ScriptedModel(["recorded answer"])
    with Session.create(str(path)) as session:
        agent = Agent(model, stream_fn=scripted.stream_fn, session=session, **agent_options)
        agent.prompt("hello")


LOCAL = Model(
    id="llama3",
    api="openai-completions",
    provider="local",
    base_url="http://127.0.0.1:8080/v1",
    context_window=32768,
    max_tokens=4096,
)


def test_a_local_model_is_recorded_with_its_endpoint_and_rebuilt_on_resume(tmp_path):
    path = tmp_path / "local.jsonl"
    _record(path, LOCAL, api_key=SECRET)
    change = [e for e in _entries(path) if e["type"] == "model_change"]
    assert change == [
        dict(
            change[0],
            provider="local",
            modelId="llama3",
            api="openai-completions",
            baseUrl="http://127.0.0.1:8080/v1",
            contextWindow=32768,
            maxTokens=4096,
            reasoning=False,
        )
    ]
    assert SECRET not in path.read_text()
    with Session.open(str(path)) as session:
        agent = Agent(session=session)  # no model=: the session's
        model = agent.state.model
        assert (model.id, model.provider, model.api, model.base_url, model.context_window, model.max_tokens) == (
            "llama3",
            "local",
            "openai-completions",
            "http://127.0.0.1:8080/v1",
            32768,
            4096,
        )
        assert [m.role for m in agent.state.messages] == ["user", "assistant"]


def test_an_unresolvable_model_fails_at_construction_and_writes_nothing(tmp_path):
    path = tmp_path / "old.jsonl"
    with Session.create(str(path)) as session:  # a file from before endpoints were recorded
        session.append_model_change("local", "llama3")
        session.append_message({"role": "user", "content": "hi", "timestamp": 1})
    before = path.read_bytes()
    with Session.open(str(path)) as session:
        with pytest.raises(UnresolvedModelError) as raised:
            Agent(session=session)
    message = str(raised.value)
    assert "'local/llama3'" in message and "model=" in message and "--base-url" in message
    assert isinstance(raised.value, KeyError)  # an UnknownModelError, as for Agent(model="x/y")
    assert path.read_bytes() == before
    with Session.open(str(path)) as session:  # a stream_fn answers without a resolvable model: allowed
        scripted = ScriptedModel(["fine"])
        agent = Agent(session=session, stream_fn=scripted.stream_fn)
        assert agent.state.model.id == "unknown" and len(agent.state.messages) == 1
        agent = Agent(LOCAL, session=session)  # an explicit model: nothing to resolve
        assert agent.state.model is LOCAL


def test_a_resumed_file_without_endpoint_gets_one_recorded(tmp_path):
    path = tmp_path / "old.jsonl"
    with Session.create(str(path)) as session:
        session.append_model_change("local", "llama3")
    with Session.open(str(path)) as session:
        scripted = ScriptedModel(["answer"])
        Agent(LOCAL, session=session, stream_fn=scripted.stream_fn).prompt("again")
    changes = [e for e in _entries(path) if e["type"] == "model_change"]
    assert len(changes) == 2 and changes[-1]["baseUrl"] == "http://127.0.0.1:8080/v1"
    with Session.open(str(path)) as session:
        assert Agent(session=session).state.model.base_url == "http://127.0.0.1:8080/v1"
        scripted = ScriptedModel(["three"])
        Agent(LOCAL, session=session, stream_fn=scripted.stream_fn).prompt("third")
    assert len([e for e in _entries(path) if e["type"] == "model_change"]) == 2  # nothing changed: no entry


def test_a_session_file_never_decides_where_a_providers_key_goes(tmp_path):
    """A recorded URL is used only for providers without an API-key variable; a catalog model always
    comes from the catalog, whatever URL the file records."""
    path = tmp_path / "crafted.jsonl"
    with Session.create(str(path)) as session:
        session.append_model_change(
            "openai", "not-in-catalog", extra={"api": "openai-completions", "baseUrl": "http://evil.example/v1"}
        )
        session.append_model_change(
            "anthropic", "claude-sonnet-4-5", extra={"api": "anthropic-messages", "baseUrl": "http://evil.example/v1"}
        )
    with Session.open(str(path)) as session:
        assert "evil" not in Agent(session=session).state.model.base_url  # the catalog's URL
        ref = [e for e in session.get_branch() if e.type == "model_change"][0]
        from agentcore.session.context import ModelRef

        with pytest.raises(UnresolvedModelError, match="takes its API key from the environment"):
            session_model(session, ModelRef(ref.provider, ref.model_id))


def test_the_recorded_endpoint_holds_no_secrets():
    model = Model(
        id="m",
        api="openai-completions",
        provider="local",
        base_url="http://user:pw@host:1/v1",
        headers={"Authorization": "Bearer " + SECRET},
    )
    assert model_endpoint(model) == {
        "api": "openai-completions",
        "contextWindow": 128000,
        "maxTokens": 16384,
        "reasoning": False,
    }
    model.base_url = "http://host:1/v1?key=" + SECRET
    assert "baseUrl" not in model_endpoint(model)
    # where URL parsers see no password: one with an unencoded "/", a URL missing its scheme
    for hidden in ("http://user:pw/" + SECRET + "@host:1/v1", "user:" + SECRET + "@host:1/v1"):
        model.base_url = hidden
        assert "baseUrl" not in model_endpoint(model), hidden
    model.base_url = "http://host:1/v1"
    assert model_endpoint(model)["baseUrl"] == "http://host:1/v1" and SECRET not in json.dumps(model_endpoint(model))


def test_agent_plugins_registry_resolves_the_session_model(tmp_path):
    """A model registered by a plugin passed to this agent only is found on resume."""

    class Models:
        from agentcore import hookimpl

        @hookimpl
        def register_models(self, register):
            register(Model(id="house", api="openai-completions", provider="house", base_url="http://house/v1"))

    session = Session.in_memory()
    session.append_model_change("house", "house")
    agent = Agent(session=session, plugins=[Models()])
    assert agent.state.model.base_url == "http://house/v1"


class _Completions(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint answering "resumed" and recording the requested model."""

    seen: List[str] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append(body["model"])
        chunks = [
            {"choices": [{"index": 0, "delta": {"content": "resumed"}, "finish_reason": None}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        ]
        data = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data.encode())

    def log_message(self, *args: Any) -> None:
        pass


def test_the_resumed_local_model_reaches_its_server(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Completions)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        path = tmp_path / "s.jsonl"
        _record(path, Model(id="Qwen/Qwen2.5-7B-Instruct", api="openai-completions", provider="local", base_url=url))
        with Session.open(str(path)) as session:
            messages = Agent(session=session).prompt("and now?")
        assert messages[-1].stop_reason == "stop" and messages[-1].text == "resumed"
        assert _Completions.seen == ["Qwen/Qwen2.5-7B-Instruct"]
    finally:
        server.shutdown()
        server.server_close()


class _KeyCatcher(BaseHTTPRequestHandler):
    """A server a crafted session file points at: records every Authorization header it gets."""

    headers_seen: List[Any] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        type(self).headers_seen.append(self.headers.get("Authorization"))
        self.send_response(401)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.parametrize("key_option", ["api_key", "get_api_key"])
def test_a_recorded_url_never_receives_the_agents_own_key(tmp_path, key_option):
    """A crafted file's "local" model_change pointing at another server was rebuilt even for an
    agent given api_key= (or get_api_key=): its key went to the URL the session file chose."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _KeyCatcher)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        with Session.create(str(tmp_path / "crafted.jsonl")) as session:
            session.append_model_change("local", "m", extra={"api": "openai-completions", "baseUrl": url})
            given = {"api_key": SECRET} if key_option == "api_key" else {"get_api_key": lambda provider: SECRET}
            with pytest.raises(UnresolvedModelError, match="must not receive") as info:
                Agent(session=session, **given).prompt("hello")
            assert SECRET not in str(info.value)
            assert len(session.entries()) == 1  # nothing written
            assert Agent(session=session).state.model.base_url == url  # no key of its own: rebuilt
        assert _KeyCatcher.headers_seen == []
    finally:
        server.shutdown()
        server.server_close()


def test_settings_are_recorded_again_on_a_branch_that_lacks_them(tmp_path):
    """After the leaf moved to an earlier entry (chat's /branch, rpc navigate_tree), the recorder
    still compared with the settings of the branch it had left, so the model and thinking level in
    use were never recorded on the new branch: resuming it gave the old model (or none) and "off"."""
    other_model = dataclasses.replace(LOCAL, id="other-model")
    scripted = ScriptedModel(["one", "two", "three"])
    path = tmp_path / "branches.jsonl"
    with Session.create(str(path)) as session:
        agent = Agent(LOCAL, stream_fn=scripted.stream_fn, session=session)
        agent.prompt("first")
        first_answer = session.leaf_id
        agent.state.model = other_model
        agent.state.thinking_level = "high"
        agent.prompt("second")
        session.move_to(first_answer)  # back to before the second prompt, as /branch 1 does
        agent.state.messages = session.build_context().messages
        agent.prompt("third, on the new branch")
        context = session.build_context()
    assert context.thinking_level == "high"
    assert context.model is not None and context.model.model_id == "other-model"
    assert [m.role for m in context.messages] == ["user", "assistant", "user", "assistant"]
    with Session.open(str(path)) as session:
        resumed = Agent(session=session)
        assert resumed.state.model.id == "other-model" and resumed.state.thinking_level == "high"


def test_a_prompt_dict_without_a_timestamp_keeps_its_time_on_resume(tmp_path):
    """``prompt({"role": "user", ...})`` without a timestamp was stamped in memory but written
    without one, so a resumed session showed the time it was loaded instead."""
    from agentcore.testing import text

    scripted = ScriptedModel([text("ok")])
    path = tmp_path / "stamped.jsonl"
    with Session.create(path, cwd="/w") as session:
        agent = Agent(scripted.model, stream_fn=scripted.stream_fn, session=session)
        agent.prompt({"role": "user", "content": "hi"})
        stamped = agent.state.messages[0].timestamp
    line = json.loads(path.read_text("utf-8").splitlines()[-2])
    assert line["message"]["role"] == "user" and line["message"]["timestamp"] == stamped
    with Session.open(path, read_only=True) as reopened:
        assert reopened.build_context().messages[0].timestamp == stamped


def test_a_recorded_thinking_level_this_library_lacks_does_not_break_every_run(tmp_path):
    """A session whose thinking level is another program's (``"ultra"``), ``null`` or in another
    case (``"HIGH"``) was restored as is: the Agent was built, then every prompt() failed with
    ``ValueError: thinking_level must be one of ...`` that did not mention the session."""
    from agentcore.testing import text

    path = tmp_path / "levels.jsonl"
    with Session.create(str(path)) as session:
        session.append_thinking_level_change("HIGH")
    with Session.open(str(path)) as session:
        assert Agent(LOCAL, session=session).state.thinking_level == "high"
        session.append_thinking_level_change("ultra")
    scripted = ScriptedModel([text("answered")])
    with Session.open(str(path)) as session:
        with pytest.warns(RuntimeWarning, match=r"levels\.jsonl records thinking level 'ultra'.*keeps 'off'"):
            agent = Agent(LOCAL, stream_fn=scripted.stream_fn, session=session)
        messages = agent.prompt("go on")
        assert messages[-1].stop_reason == "stop" and messages[-1].text == "answered"
        assert session.build_context().thinking_level == "off"  # what the agent ran with


def test_an_explicit_empty_tool_list_never_takes_the_sessions_tools(tmp_path):
    """``Agent(session=..., tools=[])`` read the empty list as "not given" and took the tools the
    session recorded, bash included: a caller who asked for no tools got a shell for the model."""
    from agentcore.testing import call, response, text

    session = Session.create(tmp_path / "s.jsonl")
    session.append_active_tools_change(["bash"])
    marker = tmp_path / "pwned.txt"
    scripted = ScriptedModel([response(call("bash", {"command": f"echo pwned > '{marker}'"})), text("done")])
    agent = Agent(scripted.model, session=session, tools=[], stream_fn=scripted.stream_fn)
    assert agent.state.tools == []
    agent.prompt("go")
    assert not marker.exists() and "bash not found" in agent.messages[2].content[0].text
    assert Agent(scripted.model, session=session, stream_fn=scripted.stream_fn).state.tools == ["bash"]  # not given
    session.close()


@pytest.mark.parametrize("with_stream_fn", [True, False])
def test_navigate_tree_on_a_resumed_agent_takes_a_summary_model(tmp_path, with_stream_fn):
    """``agent.navigate_tree(..., model=..., stream_fn=...)`` (options documented by the
    ``navigate_tree`` it forwards to) raised ``TypeError: navigate_tree() got multiple values for
    keyword argument 'model'`` from inside the compactor, and wrote nothing."""
    from agentcore.testing import text

    path = tmp_path / "branch.jsonl"
    scripted = ScriptedModel([text("a1"), text("a2")])
    with Session.create(str(path)) as session:
        agent = Agent(scripted.model, stream_fn=scripted.stream_fn, session=session)
        agent.prompt("one")
        first = session.leaf_id
        agent.prompt("two")
    summarizer = ScriptedModel([text("what the branch did")])
    with Session.open(str(path)) as session:
        resumed = Agent(scripted.model, stream_fn=scripted.stream_fn, session=session)
        chosen = {"stream_fn": summarizer.stream_fn} if with_stream_fn else {}
        outcome = resumed.navigate_tree(first, summarize=True, model=summarizer.model, **chosen)
        assert summarizer.calls == 1 and scripted.calls == 2  # the summary came from the given model
        assert outcome.summary is not None and "what the branch did" in outcome.summary.summary
        assert session.get_entry(session.leaf_id).type == "branch_summary"
        assert [m.role for m in resumed.state.messages] == ["user", "assistant", "branchSummary"]


@pytest.mark.parametrize("recorded_results", [0, 1])  # one call killed / a parallel batch cut short
def test_continue_after_a_process_died_in_its_tool_calls_answers_them_without_running_them(tmp_path, recorded_results):
    """A process killed while its tool calls ran leaves a session ending in their ``toolUse``
    message (and the results of those that finished). ``continue_()`` on the resumed agent raised
    "Cannot continue from message role: assistant" for the single call; now every unanswered call
    gets an error result saying it was interrupted (recorded, never run again: it may have taken
    effect), and the run goes on to the model."""
    from agentcore import AgentTool, AgentToolResult
    from agentcore.agent import ERR_INTERRUPTED_CALL
    from agentcore.testing import text
    from agentcore.types import AssistantMessage, TextContent, ToolCall, ToolResultMessage, UserMessage

    ran = []
    tool = AgentTool(
        "charge", "d", {"type": "object", "properties": {}}, lambda i, a, s, u: ran.append(i) or AgentToolResult("ok")
    )
    scripted = ScriptedModel([text("Checked: nothing more to do.")])
    calls = [ToolCall("c1", "charge", {}), ToolCall("c2", "charge", {})]
    path = tmp_path / "killed.jsonl"
    with Session.create(str(path)) as session:  # what the killed process had written
        session.append_message(UserMessage("charge twice"))
        session.append_message(
            AssistantMessage(calls, stop_reason="toolUse", api="scripted", provider="scripted", model=scripted.model.id)
        )
        for call in calls[:recorded_results]:
            session.append_message(ToolResultMessage(call.id, "charge", [TextContent("charged")]))
    with Session.open(str(path)) as session:
        agent = Agent(scripted.model, stream_fn=scripted.stream_fn, session=session, tools=[tool])
        new = agent.continue_()
        assert ran == []  # never run again
        results = [m for m in new if m.role == "toolResult"]
        assert [(r.tool_call_id, r.is_error, r.content[0].text) for r in results] == [
            (c.id, True, ERR_INTERRUPTED_CALL) for c in calls[recorded_results:]
        ]
        assert new[-1].text == "Checked: nothing more to do."
        sent = [m.role for m in scripted.contexts[0].messages]
        assert sent == ["user", "assistant", "toolResult", "toolResult"]
    with Session.open(str(path), read_only=True) as session:
        stored = [m.role for m in session.build_context().messages]
        assert stored == ["user", "assistant", "toolResult", "toolResult", "assistant"]
        with pytest.raises(ValueError, match="Cannot continue from message role: assistant"):
            Agent(scripted.model, stream_fn=scripted.stream_fn, session=session).continue_()  # a plain answer: still

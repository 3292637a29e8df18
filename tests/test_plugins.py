"""Plugins: entry-point discovery, broken plugins, the autoload switch, registries and the hook
combination rules (issue 3; DESIGN §4; hookspecs docstrings)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator, List

import pluggy
import pytest

from agentcore import hookspecs, plugins
from agentcore.hookspecs import hookimpl
from agentcore.loop import AfterToolCallContext, AfterToolCallResult, BeforeToolCallResult
from agentcore.messages import DROP
from agentcore.plugins import (AUTOLOAD_ENV, AgentHooks, PluginLoadWarning, UnknownModelError,
                               UnknownProviderError, UnknownToolError, callables_plugin,
                               create_plugin_manager)
from agentcore.signals import AbortController
from agentcore.tools import AgentTool, AgentToolResult
from agentcore.types import Model, TextContent, UserMessage

FIXTURE_DISTS = Path(__file__).resolve().parent / "fixtures" / "plugin_dists"
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def fresh_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """Re-scan entry points for this test and again afterwards (sys.path/env restored first)."""
    monkeypatch.delenv(AUTOLOAD_ENV, raising=False)
    plugins.reset_plugins()
    yield monkeypatch
    monkeypatch.undo()
    for name in ("agentcore_broken_fixture", "agentcore_invalid_fixture", "agentcore_good_fixture"):
        sys.modules.pop(name, None)
    plugins.reset_plugins()


@pytest.fixture
def with_fixture_dists(fresh_plugins: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    fresh_plugins.syspath_prepend(str(FIXTURE_DISTS))
    return fresh_plugins


def _info(name: str) -> plugins.PluginInfo:
    matches = [i for i in plugins.plugins_info() if i.name == name]
    assert matches, f"{name} not in {[i.name for i in plugins.plugins_info()]}"
    return matches[0]


def _plain_manager(*objs: Any) -> pluggy.PluginManager:
    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    for obj in objs:
        pm.register(obj)
    return pm


# --------------------------------------------------------------------------- discovery


def test_broken_entry_point_is_reported_and_others_keep_working(with_fixture_dists: Any) -> None:
    with pytest.warns(PluginLoadWarning) as record:
        info = plugins.plugins_info()
    messages = " ".join(str(w.message) for w in record)
    assert "agentcore_broken_fixture is broken on purpose" in messages and "regster" in messages
    broken = _info("broken")
    assert broken.distribution == "agentcore-broken-fixture" and broken.version == "0.1"
    assert broken.error == "RuntimeError: agentcore_broken_fixture is broken on purpose"
    assert broken.entry_point == "agentcore_broken_fixture" and broken.hooks == ()
    invalid = _info("invalid")
    assert invalid.error is not None and "regster" in invalid.error
    good = _info("good")
    assert good.error is None and good.hooks == ("register_tools",)
    assert good.provides["tool"] == ("fixture_echo", "ls")
    assert plugins.get_tool("fixture_echo").execute("c", {"text": "hi"}, None, None).content[0].text == "hi"
    assert [i.name for i in info if i.builtin][0] == "agentcore.default_converter"


def test_entry_point_plugin_replaces_builtin_tool_and_listing_shows_the_winner(with_fixture_dists: Any) -> None:
    with pytest.warns(PluginLoadWarning):
        entries = {e.key: e for e in plugins.registry_entries("tool")}
    if "agentcore.builtin_tools" not in [i.name for i in plugins.plugins_info()]:
        pytest.skip("built-in tools are not part of this tree")
    assert entries["ls"].source == "good"
    assert entries["ls"].shadowed == ("agentcore.builtin_tools",)
    assert plugins.get_tool("ls").execute("c", {}, None, None).content[0].text == "fixture ls of ."


def test_import_agentcore_survives_a_broken_plugin_in_a_fresh_process() -> None:
    code = (
        "import sys, warnings, agentcore\n"
        "assert 'jsonschema' not in sys.modules and 'requests' not in sys.modules\n"
        "warnings.simplefilter('ignore')\n"
        "from agentcore import plugins_info, get_tool\n"
        "info = {i.name: i.error for i in plugins_info()}\n"
        "print(info['broken'])\n"
        "print(get_tool('fixture_echo').name)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(FIXTURE_DISTS), str(REPO)]))
    env.pop(AUTOLOAD_ENV, None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["RuntimeError: agentcore_broken_fixture is broken on purpose",
                                       "fixture_echo"]
    assert "agentcore_broken_fixture is broken on purpose" in out.stderr  # the warning was shown


def test_autoload_switch_disables_entry_points_but_keeps_builtins(with_fixture_dists: Any) -> None:
    with_fixture_dists.setenv(AUTOLOAD_ENV, "1")
    plugins.reset_plugins()
    names = [i.name for i in plugins.plugins_info()]
    assert "good" not in names and "broken" not in names and "web" not in names
    assert all(i.builtin for i in plugins.plugins_info())
    assert "agentcore.default_converter" in names
    with pytest.raises(UnknownToolError):
        plugins.get_tool("fixture_echo")


def test_entry_points_are_scanned_once_per_process(with_fixture_dists: Any) -> None:
    with pytest.warns(PluginLoadWarning):
        first = create_plugin_manager()
    second = create_plugin_manager()
    assert first.get_plugin("good") is second.get_plugin("good")
    sys.modules.pop("agentcore_good_fixture")
    create_plugin_manager()
    assert "agentcore_good_fixture" not in sys.modules  # no re-import after the first scan


def test_builtin_modules_missing_from_the_tree_are_skipped_quietly(fresh_plugins: Any) -> None:
    fresh_plugins.setattr(plugins, "BUILTIN_PLUGINS", ["agentcore.not_written_yet", "agentcore.messages"])
    fresh_plugins.setenv(AUTOLOAD_ENV, "1")
    names = [i.name for i in plugins.plugins_info()]
    assert names == ["agentcore.default_converter", "agentcore.messages"]


def test_builtin_that_fails_to_import_is_reported(fresh_plugins: Any, tmp_path: Path) -> None:
    (tmp_path / "agentcore_fixture_bad_builtin.py").write_text("import agentcore_no_such_dependency\n")
    fresh_plugins.syspath_prepend(str(tmp_path))
    fresh_plugins.setattr(plugins, "BUILTIN_PLUGINS", ["agentcore_fixture_bad_builtin"])
    fresh_plugins.setenv(AUTOLOAD_ENV, "1")
    with pytest.warns(PluginLoadWarning, match="agentcore_no_such_dependency"):
        info = _info("agentcore_fixture_bad_builtin")
    assert info.builtin and info.error == "ModuleNotFoundError: No module named 'agentcore_no_such_dependency'"


# --------------------------------------------------------------------------- agentcore-web, installed for real


@pytest.fixture(scope="module")
def local_site() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            body = b"<html><title>Hi</title><body><h2>Local</h2><p>served on 127.0.0.1</p></body></html>"
            self.send_response(200 if self.path == "/" else 404)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_installed_agentcore_web_is_discovered_and_fetches(fresh_plugins: Any, local_site: str) -> None:
    pytest.importorskip("agentcore_web", reason="plugins/agentcore-web is not installed")
    web = _info("web")
    assert (web.distribution, web.error, web.builtin) == ("agentcore-web", None, False)
    assert web.entry_point == "agentcore_web.plugin" and web.provides == {"tool": ("fetch_url",)}
    fetch_url = plugins.get_tool("fetch_url")
    result = fetch_url.execute("call-1", {"url": local_site + "/"}, AbortController().signal, None)
    assert result.content[0].text == f"URL: {local_site}/\nTitle: Hi\n\n## Local\n\nserved on 127.0.0.1"
    with pytest.raises(Exception, match="HTTP 404"):
        fetch_url.execute("call-2", {"url": local_site + "/gone"}, None, None)


# --------------------------------------------------------------------------- registries


@dataclass
class _Provider:
    api: str
    label: str = ""

    def stream(self, model: Any, context: Any, **options: Any) -> Any:
        raise NotImplementedError


def _tool(name: str, text: str) -> AgentTool:
    return AgentTool(name, text, {"type": "object"}, lambda *a: AgentToolResult([TextContent(text)]))


class _First:
    @hookimpl
    def register_tools(self, register: Any) -> None:
        register(_tool("dup", "first"))
        register(_tool("only-first", "first"))

    @hookimpl
    def register_providers(self, register: Any) -> None:
        register(_Provider("fake-api", "first"))

    @hookimpl
    def register_models(self, register: Any) -> None:
        register(Model(id="m-1", api="fake-api", provider="fakeprov"))
        register(Model(id="org/m-2", api="fake-api", provider="fakeprov"))


class _Second:
    @hookimpl(tryfirst=True)  # call order does not matter for registries: registration order does
    def register_tools(self, register: Any) -> None:
        register(_tool("dup", "second"))

    @hookimpl
    def register_providers(self, register: Any) -> None:
        register(_Provider("fake-api", "second"))


def test_later_plugin_wins_duplicates_and_listing_shows_source() -> None:
    pm = create_plugin_manager([_First(), _Second()])
    assert pm.get_tool("dup").description == "second"
    entry = pm.registry("tool")["dup"]
    assert (entry.source, entry.shadowed) == ("_Second", ("_First",))
    assert pm.get_provider("fake-api").label == "second"
    assert pm.get_tool("only-first").description == "first"


def test_same_plugin_cannot_replace_its_own_registration() -> None:
    class Twice:
        @hookimpl
        def register_tools(self, register: Any) -> None:
            register(_tool("twice", "one"))
            register(_tool("twice", "two"))

    pm = create_plugin_manager([Twice()])
    assert pm.get_tool("twice").description == "one"
    assert pm.registry("tool")["twice"].shadowed == ("Twice",)


def test_runtime_register_and_unregister_rebuild_the_registries() -> None:
    pm = create_plugin_manager([_First()])
    assert pm.get_tool("dup").description == "first"
    second = _Second()
    pm.register(second)
    assert pm.get_tool("dup").description == "second"
    assert pm.get_provider("fake-api").label == "second"
    pm.unregister(second)
    assert pm.get_tool("dup").description == "first"


def test_per_agent_plugins_do_not_leak_into_other_managers() -> None:
    mine = create_plugin_manager([_First()])
    other = create_plugin_manager()
    assert mine.get_tool("only-first")
    with pytest.raises(UnknownToolError):
        other.get_tool("only-first")


def test_get_model_forms_and_errors() -> None:
    pm = create_plugin_manager([_First()])
    assert pm.get_model("fakeprov/m-1").id == "m-1"
    assert pm.get_model("fakeprov", "org/m-2").id == "org/m-2"
    assert pm.get_model("fakeprov/org/m-2").id == "org/m-2"
    assert pm.get_model("m-1").provider == "fakeprov"
    assert [m.id for m in pm.models("fakeprov")] == ["m-1", "org/m-2"]
    with pytest.raises(UnknownModelError) as err:
        pm.get_model("fakeprov/m-3")
    assert isinstance(err.value, KeyError)
    assert str(err.value).startswith("unknown model 'fakeprov/m-3' (did you mean 'fakeprov/m-1'")
    with pytest.raises(UnknownProviderError, match="unknown provider api 'fake-apj' \\(did you mean 'fake-api'"):
        pm.get_provider("fake-apj")


def test_failing_register_hook_is_reported_and_other_plugins_still_register() -> None:
    class Failing:
        @hookimpl
        def register_tools(self, register: Any) -> None:
            register(_tool("before-failure", "x"))
            raise ValueError("cannot build my tool")

    with pytest.warns(PluginLoadWarning, match="cannot build my tool"):
        pm = create_plugin_manager([Failing(), _First()])
        assert pm.get_tool("dup").description == "first"
    failing = [i for i in pm.plugins_info() if i.name == "Failing"][0]
    assert failing.error == "register_tools failed: ValueError: cannot build my tool"


def test_registering_an_object_without_a_name_is_a_clear_error() -> None:
    class Nameless:
        @hookimpl
        def register_tools(self, register: Any) -> None:
            register(object())

    with pytest.warns(PluginLoadWarning, match="needs a non-empty .name"):
        create_plugin_manager([Nameless()]).tools()


# --------------------------------------------------------------------------- combination rules


@dataclass
class _Ctx:
    result: Any = None
    is_error: bool = False
    args: dict = field(default_factory=dict)


def test_before_tool_call_first_blocking_result_wins() -> None:
    calls: List[str] = []

    class Allows:  # registered last: called first; a non-blocking result is ignored
        @hookimpl
        def before_tool_call(self, context: Any, signal: Any) -> Any:
            calls.append("allows")
            return BeforeToolCallResult(block=False, reason="ignored")

    class Blocks:
        @hookimpl
        def before_tool_call(self, context: Any, signal: Any) -> Any:
            calls.append("blocks")
            return BeforeToolCallResult(block=True, reason="blocked by policy")

    class NeverReached:
        @hookimpl
        def before_tool_call(self, context: Any) -> Any:
            calls.append("never")
            return BeforeToolCallResult(block=True, reason="too late")

    hooks = AgentHooks(_plain_manager(NeverReached(), Blocks(), Allows()))
    result = hooks.before_tool_call(_Ctx(), None)
    assert result.reason == "blocked by policy"
    assert calls == ["allows", "blocks"]
    assert AgentHooks(_plain_manager(Allows())).before_tool_call(_Ctx(), None) is None


def test_after_tool_call_overrides_apply_in_order_each_seeing_the_result_so_far() -> None:
    seen: List[Any] = []

    class Early:  # registered first: called second
        @hookimpl
        def after_tool_call(self, context: Any, signal: Any) -> Any:
            seen.append((context.result.content[0].text, context.is_error, context.result.details))
            return AfterToolCallResult(details={"by": "early"})

    class Late:
        @hookimpl
        def after_tool_call(self, context: Any, signal: Any) -> Any:
            seen.append((context.result.content[0].text, context.is_error, context.result.details))
            return AfterToolCallResult(content=[TextContent("rewritten")], is_error=True)

    original = AgentToolResult([TextContent("raw")], details={"by": "tool"}, added_tool_names=["x"])
    ctx = AfterToolCallContext(None, None, {}, original, False, None)  # type: ignore[arg-type]
    combined = AgentHooks(_plain_manager(Early(), Late())).after_tool_call(ctx, None)
    assert seen == [("raw", False, {"by": "tool"}), ("rewritten", True, {"by": "tool"})]
    assert isinstance(combined, AfterToolCallResult)
    assert combined.content[0].text == "rewritten" and combined.is_error is True
    assert combined.details == {"by": "early"} and combined.usage is None
    assert ctx.result is original and original.content[0].text == "raw"  # the input is not mutated


def test_after_tool_call_without_overrides_returns_none() -> None:
    class Quiet:
        @hookimpl
        def after_tool_call(self, context: Any, signal: Any) -> Any:
            return AfterToolCallResult()

    assert AgentHooks(_plain_manager(Quiet())).after_tool_call(_Ctx(result=AgentToolResult()), None) is None


def test_transform_context_chains() -> None:
    class KeepLastTwo:  # registered first: runs second, on the output of AddNote
        @hookimpl
        def transform_context(self, messages: List[Any], signal: Any) -> Any:
            return messages[-2:]

    class AddNote:
        @hookimpl
        def transform_context(self, messages: List[Any], signal: Any) -> Any:
            return messages + ["note"]

    class KeepsIt:
        @hookimpl
        def transform_context(self, messages: List[Any], signal: Any) -> Any:
            return None

    hooks = AgentHooks(_plain_manager(KeepLastTwo(), AddNote(), KeepsIt()))
    original = ["a", "b", "c"]
    assert hooks.transform_context(original, None) == ["c", "note"]
    assert original == ["a", "b", "c"]


def test_convert_to_llm_first_result_per_message_builtin_last() -> None:
    class Notes:  # converts its own custom role, leaves the rest to others
        @hookimpl
        def convert_to_llm(self, message: Any) -> Any:
            if isinstance(message, dict) and message.get("role") == "note":
                return UserMessage(f"note: {message['text']}")
            return None

    class HideSecrets:
        @hookimpl
        def convert_to_llm(self, message: Any) -> Any:
            if isinstance(message, dict) and message.get("secret"):
                return DROP
            return None

    pm = create_plugin_manager([Notes(), HideSecrets()])
    user = UserMessage("hello")
    out = AgentHooks(pm).convert_to_llm([
        user, {"role": "note", "text": "n1"}, {"role": "note", "text": "n2", "secret": True},
        {"role": "notification", "text": "dropped by the built-in converter"}])
    assert out[0] is user
    assert [m.content for m in out[1:]] == ["note: n1"]
    assert pm.hook.convert_to_llm(message={"role": "other"}) is DROP  # plain pluggy: built-in last


def test_builtin_converter_stays_last_after_trylast_plugins_register() -> None:
    class LateFallback:
        @hookimpl(trylast=True)
        def convert_to_llm(self, message: Any) -> Any:
            return UserMessage("fallback")

    pm = create_plugin_manager()
    pm.register(LateFallback())
    assert AgentHooks(pm).convert_to_llm([{"role": "weird"}])[0].content == "fallback"


def test_on_event_observer_errors_are_logged_and_not_fatal(caplog: pytest.LogCaptureFixture) -> None:
    seen: List[Any] = []

    class Broken:
        @hookimpl
        def on_event(self, event: Any, agent: Any) -> None:
            raise RuntimeError("observer bug")

    class Recorder:
        @hookimpl
        def on_event(self, event: Any, agent: Any) -> None:
            seen.append((event, agent))

    hooks = AgentHooks(_plain_manager(Recorder(), Broken()))
    with caplog.at_level("ERROR", logger="agentcore.plugins"):
        hooks.on_event("evt-1", "agent")
        hooks.on_event("evt-2", "agent")
    assert seen == [("evt-1", "agent"), ("evt-2", "agent")]
    assert "observer bug" in caplog.text and "Broken" in caplog.text


# --------------------------------------------------------------------------- constructor callables


def test_constructor_callables_become_a_plugin_of_one_manager_only() -> None:
    calls: List[str] = []

    def before(ctx: Any, signal: Any) -> Any:
        calls.append("before")
        return BeforeToolCallResult(block=True, reason="agent says no")

    def transform(messages: List[Any], signal: Any) -> List[Any]:
        return messages[1:]

    mine = create_plugin_manager(before_tool_call=before, transform_context=transform)
    other = create_plugin_manager()
    assert AgentHooks(mine).before_tool_call(_Ctx(), None).reason == "agent says no"
    assert AgentHooks(other).before_tool_call(_Ctx(), None) is None
    assert AgentHooks(mine).transform_context([1, 2, 3], None) == [2, 3]
    assert AgentHooks(other).transform_context([1, 2, 3], None) == [1, 2, 3]
    assert calls == ["before"]
    assert callables_plugin() is None


def test_list_converter_gets_the_whole_list_after_plugin_converters() -> None:
    received: List[Any] = []

    def convert(messages: List[Any]) -> List[Any]:
        received.append(list(messages))
        return [m for m in messages if not (isinstance(m, dict) and m.get("role") == "log")]

    class Notes:
        @hookimpl
        def convert_to_llm(self, message: Any) -> Any:
            return UserMessage("converted note") if isinstance(message, dict) and message["role"] == "note" else None

    pm = create_plugin_manager([Notes()], convert_to_llm=convert)
    user, log, note = UserMessage("u"), {"role": "log"}, {"role": "note"}
    out = AgentHooks(pm).convert_to_llm([user, log, note])
    assert len(received) == 1 and received[0][:2] == [user, log]
    assert received[0][2].content == "converted note"
    assert out[0] is user and out[1].content == "converted note" and len(out) == 2
    # through plain pluggy the same callable answers one message at a time
    assert pm.hook.convert_to_llm(message=log) is DROP
    plain = _plain_manager(callables_plugin(convert_to_llm=convert))
    assert AgentHooks(plain).convert_to_llm([user, log]) == [user]


def test_plugins_info_records_are_json_friendly() -> None:
    pm = create_plugin_manager([_First()])
    record = [i for i in pm.plugins_info() if i.name == "_First"][0]
    payload = json.dumps({"name": record.name, "hooks": record.hooks, "provides": record.provides})
    assert json.loads(payload)["hooks"] == ["register_models", "register_providers", "register_tools"]

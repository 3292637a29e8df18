"""Plugins: entry-point discovery, broken plugins, the autoload switch, registries and the hook
combination rules (issue 3; DESIGN §4; hookspecs docstrings)."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator, List

import _processes
import pluggy
import pytest

from agentcore import hookspecs, plugins
from agentcore.hookspecs import hookimpl
from agentcore.loop import AfterToolCallContext, AfterToolCallResult, BeforeToolCallResult
from agentcore.messages import DROP
from agentcore.plugins import (
    AUTOLOAD_ENV,
    AgentHooks,
    PluginLoadWarning,
    UnknownModelError,
    UnknownProviderError,
    UnknownToolError,
    callables_plugin,
    create_plugin_manager,
)
from agentcore.signals import AbortController
from agentcore.tools import AgentTool, AgentToolResult
from agentcore.types import Model, TextContent, UserMessage

FIXTURE_DISTS = Path(__file__).resolve().parent / "fixtures" / "plugin_dists"
REPO = Path(__file__).resolve().parents[1]


_ORDER_FIXTURES = ("agentcore_alpha_order_fixture", "agentcore_zeta_order_fixture")


@pytest.fixture
def fresh_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """Re-scan entry points for this test and again afterwards (sys.path/env restored first)."""
    monkeypatch.delenv(AUTOLOAD_ENV, raising=False)
    plugins.reset_plugins()
    yield monkeypatch
    monkeypatch.undo()
    fixtures = ("agentcore_broken_fixture", "agentcore_invalid_fixture", "agentcore_good_fixture")
    for name in fixtures + ("agentcore_typo_fixture", "agentcore_class_fixture") + _ORDER_FIXTURES:
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
        "from agentcore import plugins_info, get_tool\n"
        "info = {i.name: i.error for i in plugins_info()}\n"
        "print(info['broken'])\n"
        "print(get_tool('fixture_echo').name)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(FIXTURE_DISTS), str(REPO)]))
    env.pop(AUTOLOAD_ENV, None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["RuntimeError: agentcore_broken_fixture is broken on purpose", "fixture_echo"]
    assert out.stderr.count("agentcore_broken_fixture is broken on purpose") == 1  # shown, once


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
    fresh_plugins.setattr(plugins, "USER_CONFIG_PLUGINS", ["agentcore.not_written_either"])
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


def test_fetch_url_timeout_bounds_a_trickling_body():
    # agentcore-web: "an overall deadline of the same length for the body". A server sending one
    # byte at a time (each well within the read timeout) kept the tool waiting until 16 KB had
    # arrived or the body ended, however long that took.
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    web = pytest.importorskip("agentcore_web")
    stop = threading.Event()

    class Trickle(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", "400")
            self.end_headers()
            for _ in range(400):  # 400 bytes over up to 20 s
                if stop.wait(0.05):
                    return
                try:
                    self.wfile.write(b"x")
                    self.wfile.flush()
                except OSError:
                    return

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Trickle)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/slow"
        started = time.monotonic()
        with pytest.raises(web.FetchError, match="timed out"):
            web.fetch_text(url, timeout=0.5)
        assert time.monotonic() - started < 5.0
    finally:
        stop.set()
        httpd.shutdown()
        httpd.server_close()


def test_fetch_url_honours_the_html_meta_charset():
    # Pages that declare their encoding only in <meta charset> (no charset in Content-Type) were
    # decoded as UTF-8: every accented letter of a Latin-1 page became U+FFFD.
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    web = pytest.importorskip("agentcore_web")
    pages = {
        "/meta": '<html><head><meta charset="iso-8859-1"><title>Caf\u00e9</title></head>'
        "<body><p>cr\u00e8me br\u00fbl\u00e9e</p></body></html>",
        "/equiv": '<html><head><meta http-equiv="Content-Type" content="text/html; charset=windows-1252">'
        "</head><body><p>na\u00efve \u2013 ok</p></body></html>",
    }

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            body = pages[self.path].encode("cp1252")
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{httpd.server_address[1]}"
        page = web.fetch_text(base + "/meta", timeout=5)
        assert page["title"] == "Caf\u00e9" and "cr\u00e8me br\u00fbl\u00e9e" in page["text"]
        assert "na\u00efve \u2013 ok" in web.fetch_text(base + "/equiv", timeout=5)["text"]
    finally:
        httpd.shutdown()
        httpd.server_close()


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
    for bad in ((None,), (5,), ("fakeprov", 5)):  # used to be "argument of type 'NoneType' is not iterable"
        with pytest.raises(TypeError, match=r"get_model\((ref|model_id)=\.\.\.\) takes a \"provider/id\" string"):
            pm.get_model(*bad)


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


def test_register_hooks_that_are_async_generators_or_return_their_objects() -> None:
    class Async:  # an async def implementation runs to completion (hookspecs module docstring)
        @hookimpl
        async def register_tools(self, register: Any) -> None:
            register(_tool("from-async", "x"))

    class Yields:  # a misused wrapper shape: the body never runs
        @hookimpl
        def register_tools(self, register: Any) -> Any:
            register(_tool("from-generator", "x"))
            yield

    class Returns:  # the tools are returned instead of registered
        @hookimpl
        def register_tools(self, register: Any) -> Any:
            return [_tool("returned", "x")]

    with pytest.warns(PluginLoadWarning) as record:
        pm = create_plugin_manager([Async(), Yields(), Returns()])
        names = [t.name for t in pm.tools()]
    assert "from-async" in names and "from-generator" not in names and "returned" not in names
    errors = {i.name: i.error for i in pm.plugins_info() if i.name in ("Async", "Yields", "Returns")}
    assert errors["Async"] is None
    assert "register_tools failed: TypeError: the implementation is a generator" in errors["Yields"]
    assert "register_tools failed: TypeError: it returned a list, which is ignored" in errors["Returns"]
    messages = " ".join(str(w.message) for w in record)
    assert "plugin 'Yields'" in messages and "plugin 'Returns'" in messages


def test_a_register_hook_written_as_a_wrapper_is_reported_not_dropped_silently() -> None:
    """register_* hooks take plain implementations; a wrapper was skipped without a word, so its
    tool never existed and ``Agent(tools=["zap"])`` said only "unknown tool"."""

    class Wraps:
        @hookimpl(wrapper=True)
        def register_tools(self, register: Any) -> Any:
            register(_tool("zap", "x"))
            return (yield)

    with pytest.warns(PluginLoadWarning, match="plugin 'Wraps': register_tools is implemented as a wrapper"):
        pm = create_plugin_manager([Wraps()])
        assert "zap" not in [t.name for t in pm.tools()]
    info = {i.name: i.error for i in pm.plugins_info()}
    assert "register_tools is implemented as a wrapper" in (info["Wraps"] or "")


def test_a_provider_or_tool_that_cannot_work_is_refused_and_the_builtin_stays() -> None:
    class NoStream:  # a typo'd method name
        api = "openai-completions"

        def strem(self, model: Any, context: Any, **options: Any) -> Any:
            raise NotImplementedError

    class Plugin:
        @hookimpl
        def register_providers(self, register: Any) -> None:
            register(NoStream())

        @hookimpl
        def register_tools(self, register: Any) -> None:
            register(AgentTool("no-exec", "", {"type": "object"}, None))  # type: ignore[arg-type]

    with pytest.warns(PluginLoadWarning) as record:
        pm = create_plugin_manager([Plugin()])
        assert type(pm.get_provider("openai-completions")).__name__ == "OpenAICompletionsProvider"
        with pytest.raises(UnknownToolError):
            pm.get_tool("no-exec")
    error = [i for i in pm.plugins_info() if i.name == "Plugin"][0].error
    assert "cannot register provider 'openai-completions' (NoStream): it needs a callable .stream(" in error
    assert "cannot register tool 'no-exec' (AgentTool): it needs a callable .execute(" in error
    assert "plugin 'Plugin': register_providers failed" in " ".join(str(w.message) for w in record)


def test_a_refused_registration_never_shows_the_objects_repr() -> None:
    @dataclass
    class Keyed:  # a provider holding its key, with a typo'd api attribute
        API: str = "typo-api"
        api_key: str = "sk-secret-0123"

    class KeyedPlugin:
        @hookimpl
        def register_providers(self, register: Any) -> None:
            register(Keyed())

    with pytest.warns(PluginLoadWarning) as record:
        pm = create_plugin_manager([KeyedPlugin()])
        pm.providers()
    error = [i for i in pm.plugins_info() if i.name == "KeyedPlugin"][0].error
    assert (
        error
        == "register_providers failed: TypeError: cannot register a Keyed object as a provider: it needs a non-empty .api"
    )
    assert not [w for w in record if "sk-secret" in str(w.message)]


# --------------------------------------------------------------------------- combination rules
# Each rule is checked through plain pluggy (``pm.hook.X``) with two plugins, and the agent's
# adapter (AgentHooks) gives the same answer: the marker is the rule (issue 11 §2).


@dataclass
class _Ctx:
    result: Any = None
    is_error: bool = False
    args: dict = field(default_factory=dict)


def test_before_tool_call_first_verdict_wins_and_none_means_no_say() -> None:
    calls: List[str] = []

    class Abstains:  # registered last: called first; None lets the next one decide
        @hookimpl
        def before_tool_call(self, context: Any, signal: Any) -> Any:
            calls.append("abstains")
            return None

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

    pm = _plain_manager(NeverReached(), Blocks(), Abstains())
    assert pm.hook.before_tool_call(context=_Ctx(), signal=None).reason == "blocked by policy"
    assert calls == ["abstains", "blocks"]
    assert AgentHooks(pm).before_tool_call(_Ctx(), None).reason == "blocked by policy"
    assert AgentHooks(_plain_manager(Abstains())).before_tool_call(_Ctx(), None) is None


def test_before_tool_call_an_allowing_verdict_is_final() -> None:
    class Allows:
        @hookimpl
        def before_tool_call(self, context: Any, signal: Any) -> Any:
            return BeforeToolCallResult(block=False)

    class Blocks:
        @hookimpl
        def before_tool_call(self, context: Any, signal: Any) -> Any:
            return BeforeToolCallResult(block=True)

    pm = _plain_manager(Blocks(), Allows())
    assert pm.hook.before_tool_call(context=_Ctx(), signal=None).block is False
    assert AgentHooks(pm).before_tool_call(_Ctx(), None).block is False


def test_after_tool_call_overrides_merge_in_call_order_last_called_wins() -> None:
    seen: List[Any] = []

    class Early:  # registered first: called second
        @hookimpl
        def after_tool_call(self, context: Any, signal: Any) -> Any:
            seen.append(context.result.content[0].text)
            return AfterToolCallResult(details={"by": "early"}, is_error=False)

    class Late:
        @hookimpl
        def after_tool_call(self, context: Any, signal: Any) -> Any:
            seen.append(context.result.content[0].text)
            return AfterToolCallResult(content=[TextContent("rewritten")], is_error=True)

    original = AgentToolResult([TextContent("raw")], details={"by": "tool"}, added_tool_names=["x"])
    ctx = AfterToolCallContext(None, None, {}, original, False, None)  # type: ignore[arg-type]
    pm = _plain_manager(Early(), Late())
    answer = pm.hook.after_tool_call(context=ctx, signal=None)
    assert [r.is_error for r in answer] == [True, False]  # call order: Late, then Early
    combined = AgentHooks(pm).after_tool_call(ctx, None)
    assert combined == plugins.merge_after_tool_call(answer)
    assert isinstance(combined, AfterToolCallResult)
    assert combined.content[0].text == "rewritten" and combined.is_error is False
    assert combined.details == {"by": "early"} and combined.usage is None
    assert seen == ["raw"] * 4  # two calls; every implementation sees the executed result
    assert ctx.result is original and original.content[0].text == "raw"  # the input is not mutated


def test_after_tool_call_without_overrides_returns_none() -> None:
    class Quiet:
        @hookimpl
        def after_tool_call(self, context: Any, signal: Any) -> Any:
            return AfterToolCallResult()

    pm = _plain_manager(Quiet(), Quiet())
    assert plugins.merge_after_tool_call(pm.hook.after_tool_call(context=_Ctx(), signal=None)) is None
    assert AgentHooks(pm).after_tool_call(_Ctx(result=AgentToolResult()), None) is None


def test_transform_context_implementations_chain_in_place() -> None:
    class KeepLastTwo:  # registered first: runs second, on the list AddNote changed
        @hookimpl
        def transform_context(self, messages: List[Any], signal: Any) -> None:
            messages[:] = messages[-2:]

    class AddNote:
        @hookimpl
        def transform_context(self, messages: List[Any], signal: Any) -> None:
            messages.append("note")

    pm = _plain_manager(KeepLastTwo(), AddNote())
    working = ["a", "b", "c"]
    assert pm.hook.transform_context(messages=working, signal=None) == []
    assert working == ["c", "note"]
    original = ["a", "b", "c"]
    assert AgentHooks(pm).transform_context(original, None) == ["c", "note"]
    assert original == ["a", "b", "c"]


def test_transform_context_returning_a_new_list_is_a_clear_error() -> None:
    class OldStyle:
        @hookimpl
        def transform_context(self, messages: List[Any], signal: Any) -> Any:
            return messages[1:]

    with pytest.raises(TypeError, match="in place"):
        AgentHooks(_plain_manager(OldStyle())).transform_context([1, 2], None)


def test_transform_context_returning_a_new_list_names_the_plugin() -> None:
    class ReturnsAList:
        @hookimpl
        def transform_context(self, messages: List[Any], signal: Any) -> Any:
            return list(messages)

    pm = plugins.AgentPluginManager()  # names plugins after their class
    pm.register(ReturnsAList())
    with pytest.raises(TypeError, match="implemented by plugin 'ReturnsAList'"):
        AgentHooks(pm).transform_context([1, 2], None)


def test_after_tool_call_override_of_the_wrong_type_is_an_error_naming_the_plugin() -> None:
    class Redacts:  # meant "replace the content with this text"; it used to be ignored silently
        @hookimpl
        def after_tool_call(self, context: Any, signal: Any) -> Any:
            return "[redacted]"

    class Fine:
        @hookimpl
        def after_tool_call(self, context: Any, signal: Any) -> Any:
            return {"details": {"k": 1}}

    pm = plugins.AgentPluginManager()  # names plugins after their class
    pm.register(Fine())
    pm.register(Redacts())
    with pytest.raises(TypeError, match="after_tool_call hook returned a str.*plugins 'Redacts', 'Fine'"):
        AgentHooks(pm).after_tool_call(_Ctx(result=AgentToolResult()), None)
    assert AgentHooks(_plain_manager(Fine())).after_tool_call(_Ctx(), None) == {"details": {"k": 1}}


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
    out = AgentHooks(pm).convert_to_llm(
        [
            user,
            {"role": "note", "text": "n1"},
            {"role": "note", "text": "n2", "secret": True},
            {"role": "notification", "text": "dropped by the built-in converter"},
        ]
    )
    assert out[0] is user
    assert [m.content for m in out[1:]] == ["note: n1"]
    assert pm.hook.convert_to_llm(message={"role": "note", "text": "x", "secret": True}) is DROP
    assert pm.hook.convert_to_llm(message={"role": "note", "text": "x"}).content == "note: x"
    assert pm.hook.convert_to_llm(message={"role": "other"}) is DROP  # plain pluggy: built-in last
    assert pm.hook.convert_to_llm(message=user) is user


def test_builtin_converter_stays_last_after_trylast_plugins_register() -> None:
    class LateFallback:
        @hookimpl(trylast=True)
        def convert_to_llm(self, message: Any) -> Any:
            return UserMessage("fallback")

    pm = create_plugin_manager()
    pm.register(LateFallback())
    assert pm.hook.convert_to_llm(message={"role": "weird"}).content == "fallback"
    assert AgentHooks(pm).convert_to_llm([{"role": "weird"}])[0].content == "fallback"
    assert [i.plugin_name for i in pm.hook.convert_to_llm.get_hookimpls()].count(
        "agentcore.default_converter"
    ) == 1  # never re-registered


def test_on_event_calls_every_observer_and_the_agent_logs_a_failure(caplog: pytest.LogCaptureFixture) -> None:
    seen: List[Any] = []

    class Broken:  # registered first: called last
        @hookimpl
        def on_event(self, event: Any, agent: Any) -> None:
            raise RuntimeError("observer bug")

    class Recorder:
        @hookimpl
        def on_event(self, event: Any, agent: Any) -> None:
            seen.append((event, agent))

    pm = _plain_manager(Broken(), Recorder())
    with pytest.raises(RuntimeError, match="observer bug"):  # plain pluggy: the error propagates
        pm.hook.on_event(event="evt-0", agent="agent")
    hooks = AgentHooks(pm)
    with caplog.at_level("ERROR", logger="agentcore.plugins"):
        hooks.on_event("evt-1", "agent")
        hooks.on_event("evt-2", "agent")
    assert seen == [("evt-0", "agent"), ("evt-1", "agent"), ("evt-2", "agent")]
    assert "observer bug" in caplog.text and "on_event" in caplog.text


def test_a_failing_observer_is_named_in_the_log(caplog: pytest.LogCaptureFixture) -> None:
    class Quiet:
        @hookimpl
        def on_event(self, event: Any, agent: Any) -> None:
            pass

    class Exploding:  # registered between two others: the log names it, not its neighbours
        @hookimpl
        def on_event(self, event: Any, agent: Any) -> None:
            {}["missing"]

    pm = plugins.AgentPluginManager()  # names plugins after their class
    for plugin in (Quiet(), Exploding(), Quiet()):
        pm.register(plugin)
    with caplog.at_level("ERROR", logger="agentcore.plugins"):
        AgentHooks(pm).on_event(type("Evt", (), {"type": "turn_start"})(), "agent")
    assert "the on_event hook of plugin 'Exploding' failed for turn_start event" in caplog.text


def test_on_lifecycle_event_calls_every_observer_and_the_agent_logs_a_failure(caplog: pytest.LogCaptureFixture) -> None:
    seen: List[Any] = []  # issue 11 §7: the observer hook without the per-token message_update

    class Broken:  # registered first: called last
        @hookimpl
        def on_lifecycle_event(self, event: Any, agent: Any) -> None:
            raise RuntimeError("tracer bug")

    class Recorder:
        @hookimpl(specname="on_lifecycle_event")
        def record(self, event: Any) -> None:  # only some of the arguments, under another name
            seen.append(event)

    pm = _plain_manager(Broken(), Recorder())
    with pytest.raises(RuntimeError, match="tracer bug"):
        pm.hook.on_lifecycle_event(event="evt-0", agent="agent")
    with caplog.at_level("ERROR", logger="agentcore.plugins"):
        AgentHooks(pm).on_lifecycle_event("evt-1", "agent")
    assert seen == ["evt-0", "evt-1"]
    assert "tracer bug" in caplog.text and "on_lifecycle_event" in caplog.text


@pytest.mark.parametrize("hook_name", ["summarize", "before_compaction", "before_branch_summary"])
def test_summary_hooks_first_result_wins(hook_name: str) -> None:
    calls: List[str] = []

    def make(label: str, answer: Any) -> Any:
        class Impl:
            pass

        def impl(**kwargs: Any) -> Any:
            calls.append(label)
            return answer

        setattr(Impl, hook_name, staticmethod(hookimpl(specname=hook_name)(_with_spec_args(impl, hook_name))))
        return Impl()

    pm = _plain_manager(make("second", "from second"), make("first", None))
    args = {name: None for name in getattr(pm.hook, hook_name).spec.argnames}
    assert getattr(pm.hook, hook_name)(**args) == "from second"
    assert calls == ["first", "second"]


def _with_spec_args(fn: Any, hook_name: str) -> Any:
    """A function with exactly the hookspec's argument names, calling ``fn(**kwargs)``."""
    names = list(inspect.signature(getattr(hookspecs, hook_name)).parameters)
    namespace: dict = {"fn": fn}
    exec(f"def impl({', '.join(names)}):\n    return fn({', '.join(f'{n}={n}' for n in names)})", namespace)
    return namespace["impl"]


def test_register_hooks_run_every_implementation() -> None:
    class A:
        @hookimpl
        def register_tools(self, register: Any) -> None:
            register("a")

    class B:
        @hookimpl
        def register_tools(self, register: Any) -> None:
            register("b")

    got: List[str] = []
    _plain_manager(A(), B()).hook.register_tools(register=got.append)
    assert got == ["b", "a"]


def test_a_wrapper_on_before_tool_call_changes_what_the_agent_acts_on() -> None:
    from agentcore import Agent
    from agentcore.testing import ScriptedModel

    class Abstains:
        @hookimpl
        def before_tool_call(self, context: Any, signal: Any) -> Any:
            return None

    class DenyByDefault:  # a wrapper sees the verdict of the others and may replace it
        @hookimpl(wrapper=True)
        def before_tool_call(self, context: Any, signal: Any) -> Any:
            verdict = yield
            return verdict if verdict is not None else BeforeToolCallResult(block=True, reason="deny by default")

    executed: List[Any] = []
    tool = AgentTool(
        "echo",
        "",
        {"type": "object", "properties": {}},
        lambda *a: executed.append(1) or AgentToolResult([TextContent("ran")]),
    )
    scripted = ScriptedModel([ScriptedModel.tool_call("echo", {}, id="t1"), ScriptedModel.text("ok")])
    agent = Agent(scripted.model, tools=[tool], plugins=[Abstains(), DenyByDefault()])
    answer = agent.plugins.hook.before_tool_call(context=_Ctx(), signal=None)
    assert answer.reason == "deny by default"
    agent.prompt("go")
    assert executed == [] and agent.state.messages[2].content[0].text == "deny by default"


def test_a_wrapper_on_after_tool_call_sees_every_override() -> None:
    class Sets:
        @hookimpl
        def after_tool_call(self, context: Any, signal: Any) -> Any:
            return AfterToolCallResult(details={"n": 1})

    class KeepsOnlyTheFirst:
        @hookimpl(wrapper=True)
        def after_tool_call(self, context: Any, signal: Any) -> Any:
            overrides = yield
            return overrides[:1]

    pm = _plain_manager(Sets(), Sets(), KeepsOnlyTheFirst())
    assert len(pm.hook.after_tool_call(context=_Ctx(), signal=None)) == 1


def test_wrappers_that_change_things_in_place_and_return_nothing() -> None:
    """A wrapper following the hooks' "change in place, return None" rule on a hook that collects
    results (its `yield` gives pluggy's list): a None answer is no results, not a failed run; a
    single override stands for a list of one."""
    from agentcore import Agent
    from agentcore.testing import ScriptedModel

    class AddsANote:
        @hookimpl(wrapper=True)
        def transform_context(self, messages: Any, signal: Any) -> Any:
            yield
            messages.append(UserMessage("note from the wrapper"))

    class Annotates:
        @hookimpl(wrapper=True)
        def after_tool_call(self, context: Any, signal: Any) -> Any:
            yield
            return AfterToolCallResult(details={"audited": True})  # one override, not a list

    tool = AgentTool("echo", "", {"type": "object", "properties": {}}, lambda *a: AgentToolResult([TextContent("ran")]))
    scripted = ScriptedModel([ScriptedModel.tool_call("echo", {}, id="t1"), ScriptedModel.text("ok")])
    agent = Agent(scripted.model, tools=[tool], plugins=[AddsANote(), Annotates()])
    assert agent.prompt("go")[-1].text == "ok"
    assert [m.content for m in scripted.contexts[0].messages][-1] == "note from the wrapper"
    assert agent.state.messages[2].details == {"audited": True}
    assert agent.plugins.hook.transform_context(messages=[], signal=None) is None  # what the agent read

    class ReturnsMessages:  # the mistake the error message must explain
        @hookimpl(wrapper=True)
        def transform_context(self, messages: Any, signal: Any) -> Any:
            yield
            return messages + [UserMessage("lost")]

    scripted = ScriptedModel([ScriptedModel.text("ok")])
    failed = Agent(scripted.model, plugins=[ReturnsMessages()]).prompt("go")[-1]
    assert failed.stop_reason == "error" and "a wrapper's `yield` gives their results" in failed.error_message


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
    assert mine.hook.before_tool_call(context=_Ctx(), signal=None).reason == "agent says no"
    assert AgentHooks(mine).before_tool_call(_Ctx(), None).reason == "agent says no"
    assert AgentHooks(other).before_tool_call(_Ctx(), None) is None
    assert AgentHooks(mine).transform_context([1, 2, 3], None) == [2, 3]
    assert AgentHooks(other).transform_context([1, 2, 3], None) == [1, 2, 3]
    assert calls == ["before", "before"]
    assert callables_plugin() is None


def test_a_constructor_callable_that_allows_has_no_say() -> None:
    def allows(ctx: Any, signal: Any) -> Any:  # the reference's shape: {block: false} allows
        return {"block": False}

    class Blocks:
        @hookimpl
        def before_tool_call(self, context: Any, signal: Any) -> Any:
            return BeforeToolCallResult(block=True, reason="plugin")

    pm = create_plugin_manager([Blocks()], before_tool_call=allows)
    assert pm.hook.before_tool_call(context=_Ctx(), signal=None).reason == "plugin"


def test_list_converter_gets_the_whole_list_after_plugin_converters() -> None:
    from agentcore import Agent, CustomMessage
    from agentcore.testing import ScriptedModel

    received: List[Any] = []

    def convert(messages: List[Any]) -> List[Any]:
        received.append(list(messages))
        return [m for m in messages if getattr(m, "role", None) in ("user", "assistant")]

    class Notes:
        @hookimpl
        def convert_to_llm(self, message: Any) -> Any:
            if getattr(message, "custom_type", None) == "note":
                return UserMessage("converted note")
            return None

    log, note = CustomMessage("log", "x"), CustomMessage("note", "y")
    scripted = ScriptedModel([ScriptedModel.text("ok")])
    agent = Agent(scripted.model, plugins=[Notes()], convert_to_llm=convert, messages=[log, note])
    agent.prompt("u")
    assert len(received) == 1 and received[0][0] is log  # unclaimed: reaches the callable as is
    assert received[0][1].content == "converted note"
    assert [m.content for m in scripted.contexts[0].messages][:1] == ["converted note"]
    # the agent's manager answers the same: nobody claims ``log`` (no built-in converter here)
    assert agent.plugins.hook.convert_to_llm(message=log) is None
    agent.convert_to_llm = None  # the built-in converter is back for the next run
    scripted.push(ScriptedModel.text("ok"))
    agent.prompt("again")
    assert agent.plugins.hook.convert_to_llm(message=log) is not None


def test_plugins_info_records_are_json_friendly() -> None:
    pm = create_plugin_manager([_First()])
    record = [i for i in pm.plugins_info() if i.name == "_First"][0]
    payload = json.dumps({"name": record.name, "hooks": record.hooks, "provides": record.provides})
    assert json.loads(payload)["hooks"] == ["register_models", "register_providers", "register_tools"]


def test_a_broken_plugin_is_reported_once_per_process() -> None:  # issue 10 item 13
    code = (
        "import agentcore\n"
        "from agentcore.testing import ScriptedModel\n"
        "s = ScriptedModel([ScriptedModel.text('ok')])\n"
        "agentcore.Agent(s.model, tools=['ls']).prompt('x')\n"
        "agentcore.get_tool('ls')\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(FIXTURE_DISTS), str(REPO)]))
    env.pop(AUTOLOAD_ENV, None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("agentcore_broken_fixture is broken on purpose") == 1, out.stderr


class _Leaky:
    @hookimpl
    def register_tools(self, register: Any) -> None:
        register(AgentTool("leaked_tool", "", {"type": "object", "properties": {}}, lambda *a: None))


def test_process_state_leak_part_1_a_test_leaves_state_behind() -> None:  # issue 11 §6
    from agentcore import loop

    plugins.default_plugin_manager().register(_Leaky())
    loop.set_default_stream_fn(lambda *a, **k: None)
    assert plugins.get_tool("leaked_tool")


def test_process_state_leak_part_2_the_autouse_fixture_undid_it() -> None:  # runs right after part 1
    from agentcore import loop

    assert loop._default_stream_fn is None
    with pytest.raises(UnknownToolError):
        plugins.get_tool("leaked_tool")


def test_an_unknown_tool_points_at_plugins_that_failed_to_load(with_fixture_dists: Any) -> None:  # issue 10 item 13
    with pytest.warns(PluginLoadWarning):
        with pytest.raises(UnknownToolError) as caught:
            plugins.get_tool("broken_fixture_tool")
    text = str(caught.value)
    assert "failed to load" in text and "'broken'" in text and "broken on purpose" in text


# --------------------------------------------------------------------------- hooks pluggy accepts but nobody calls


def _fake_dist(root: Path, dist: str, entry_points: str, module: str, code: str) -> None:
    """An installed distribution as importlib.metadata sees it: a .dist-info and its module."""
    info = root / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[agentcore]\n{entry_points}\n")
    (root / f"{module}.py").write_text(code)


_TYPO_PLUGIN = '''
from agentcore.hookspecs import hookimpl
from agentcore.tools import tool

@tool
def typo_fixture_tool() -> str:
    """Never registered."""
    return "x"

@hookimpl
def register_tool(register):
    register(typo_fixture_tool)

@hookimpl
def before_tool_cal(context, signal):
    return None
'''


def test_a_plugin_with_a_misspelt_hook_is_reported_not_silently_listed_as_working(
    with_fixture_dists: Any, tmp_path: Path
) -> None:
    _fake_dist(
        tmp_path, "agentcore-typo-fixture", "typo = agentcore_typo_fixture", "agentcore_typo_fixture", _TYPO_PLUGIN
    )
    with_fixture_dists.syspath_prepend(str(tmp_path))
    with pytest.warns(PluginLoadWarning) as record:  # the fixture distribution's broken plugins warn too
        typo = _info("typo")
    assert any("'register_tool' (did you mean 'register_tools'?)" in str(w.message) for w in record)
    assert typo.error is not None and typo.distribution == "agentcore-typo-fixture"
    assert "Plugin 'typo' implements unknown hook(s)" in typo.error
    assert "'before_tool_cal' (did you mean 'before_tool_call'?)" in typo.error
    assert _info("good").error is None and plugins.get_tool("fixture_echo").name == "fixture_echo"


class _MisspeltHook:
    @hookimpl
    def after_tool_cal(self, context: Any, signal: Any) -> None:
        raise AssertionError("never called")


class _OptionalHook:
    @hookimpl(optionalhook=True)
    def some_other_hosts_hook(self) -> None:
        raise AssertionError("never called")


def test_a_per_agent_plugin_with_a_misspelt_hook_is_refused_naming_it() -> None:
    from agentcore import Agent
    from agentcore.testing import ScriptedModel

    scripted = ScriptedModel([ScriptedModel.text("ok")])
    with pytest.raises(pluggy.PluginValidationError, match="'after_tool_cal' \\(did you mean 'after_tool_call'\\?\\)"):
        Agent(scripted.model, plugins=[_MisspeltHook()])
    agent = Agent(scripted.model)
    plugin = _MisspeltHook()
    with pytest.raises(pluggy.PluginValidationError, match="Plugin '_MisspeltHook'"):
        agent.plugins.register(plugin)
    assert not agent.plugins.is_registered(plugin)
    assert create_plugin_manager([_OptionalHook()]).has_plugin("_OptionalHook")  # pluggy's opt-out


class _MethodsPlugin:
    @hookimpl
    def before_tool_call(self, context: Any, signal: Any) -> Any:
        return BeforeToolCallResult(block=True, reason="refused by the plugin")


class _StaticPlugin:
    @staticmethod
    @hookimpl
    def before_tool_call(context: Any, signal: Any) -> Any:
        return BeforeToolCallResult(block=True, reason="refused by the static plugin")


def test_a_plugin_class_instead_of_an_instance_is_refused_naming_the_fix(
    with_fixture_dists: Any, tmp_path: Path
) -> None:
    from agentcore import Agent
    from agentcore.testing import ScriptedModel

    code = "from agentcore.hookspecs import hookimpl\nclass Greet:\n    @hookimpl\n    def register_tools(self, register):\n        pass\n"
    _fake_dist(
        tmp_path, "agentcore-class-fixture", "cls = agentcore_class_fixture:Greet", "agentcore_class_fixture", code
    )
    with_fixture_dists.syspath_prepend(str(tmp_path))
    with pytest.warns(PluginLoadWarning) as record:  # the fixture distribution's broken plugins warn too
        info = _info("cls")
    assert any("is the class Greet" in str(w.message) for w in record)
    assert info.error is not None and "PLUGIN = Greet()" in info.error and info.hooks == ()
    scripted = ScriptedModel([ScriptedModel.text("ok")])
    # Without the check, every tool call failed with "missing 1 required positional argument".
    with pytest.raises(pluggy.PluginValidationError, match="register an instance, _MethodsPlugin\\(\\)"):
        Agent(scripted.model, plugins=[_MethodsPlugin])
    Agent(scripted.model, plugins=[_MethodsPlugin(), _StaticPlugin])  # an instance, or staticmethods: fine


# --------------------------------------------------------------------------- os.fork() during a load or a build


def _child_status_after(fork_while: threading.Event, use: Any) -> int:
    """Fork once ``fork_while`` is set; the child runs ``use()`` with a 10 s alarm and exits 0."""
    assert fork_while.wait(10)
    pid = _processes.fork()
    if pid == 0:  # pragma: no cover - the child
        import signal

        signal.alarm(10)  # a hang is killed by SIGALRM: the parent sees the signal
        try:
            use()
        except BaseException:
            os._exit(3)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    return status


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX only")
def test_a_child_forked_while_another_thread_scans_the_plugins_loads_them_itself(fresh_plugins: Any) -> None:
    from agentcore import _plugin_loading

    scanning, release, first = threading.Event(), threading.Event(), [True]
    real_scan = _plugin_loading._iter_entry_points

    def slow_scan() -> Any:  # a large environment: the scan takes a while
        if first[0]:
            first[0] = False
            scanning.set()
            release.wait(10)
        return real_scan()

    fresh_plugins.setattr(_plugin_loading, "_iter_entry_points", slow_scan)
    loader = threading.Thread(target=plugins.default_plugin_manager)
    loader.start()
    try:
        status = _child_status_after(scanning, lambda: plugins.get_tool("read"))
    finally:
        release.set()
        loader.join(10)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


class _SlowRegistration:
    """A register_tools hook that connects to its servers first (as agentcore-mcp's does)."""

    def __init__(self) -> None:
        self.building, self.release, self.calls = threading.Event(), threading.Event(), 0

    @hookimpl
    def register_tools(self, register: Any) -> None:
        self.calls += 1
        if self.calls == 1:
            self.building.set()
            self.release.wait(10)
        register(_tool("served_tool", "served"))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX only")
def test_a_child_forked_while_another_thread_builds_a_registry_builds_it_itself() -> None:
    slow = _SlowRegistration()
    pm = create_plugin_manager([slow])
    builder = threading.Thread(target=pm.tools)
    builder.start()
    try:
        status = _child_status_after(slow.building, lambda: pm.get_tool("served_tool"))
    finally:
        slow.release.set()
        builder.join(10)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    assert pm.get_tool("served_tool").name == "served_tool"


_SAME_TOOL_PLUGIN = '''
from agentcore.hookspecs import hookimpl
from agentcore.tools import tool

@tool(name="order_fixture_tool")
def order_fixture_tool() -> str:
    """Which plugin's tool is in effect."""
    return "{label}"

@hookimpl
def register_tools(register):
    register(order_fixture_tool)
'''


@pytest.mark.parametrize("reverse", [False, True])
def test_two_plugins_registering_one_name_resolve_the_same_whatever_the_directory_order(
    fresh_plugins: pytest.MonkeyPatch, tmp_path: Path, reverse: bool
) -> None:
    """Which of two installed plugins registering the same tool won ("registered later wins")
    followed the order importlib.metadata lists distributions in: a directory listing of
    site-packages, which differs between machines. Entry points load in distribution-name order."""
    import importlib.metadata

    for dist, label in (("agentcore-alpha-order-fixture", "alpha"), ("agentcore-zeta-order-fixture", "zeta")):
        module = dist.replace("-", "_")
        _fake_dist(tmp_path, dist, f"{label} = {module}", module, _SAME_TOOL_PLUGIN.replace("{label}", label))
    fresh_plugins.syspath_prepend(str(tmp_path))
    real = importlib.metadata.distributions

    def listed(**kwargs: Any) -> Any:
        ours = [d for d in real(**kwargs) if "order-fixture" in (d.metadata["Name"] or "")]
        return sorted(ours, key=lambda d: str(d.metadata["Name"]), reverse=reverse)

    fresh_plugins.setattr(importlib.metadata, "distributions", listed)
    (entry,) = [e for e in plugins.registry_entries("tool") if e.key == "order_fixture_tool"]
    assert (entry.source, entry.shadowed) == ("zeta", ("alpha",))
    assert plugins.get_tool("order_fixture_tool").execute("c", {}, None, None).content[0].text == "zeta"

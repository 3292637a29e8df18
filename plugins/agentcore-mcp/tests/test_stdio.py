"""MCPServer over stdio against the test server: listing, mapping, progress, abort, timeouts,
crashes, hangs, list_changed, close without orphans, secrets, the server's log messages, and the
races between them (pinned with events and monkeypatched seams, never with sleeps)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading

import pytest
from agentcore_mcp import MCPAbortedError, MCPConnectionError, MCPServer, MCPServerError, MCPTimeoutError, MCPToolError
from agentcore_mcp import server as server_module
from agentcore_mcp._connection import Connection
from conftest import TEST_SERVER, abort_when_marked, alive, eventually, group_members, lifelines_of

from agentcore import Agent
from agentcore.signals import AbortController
from agentcore.testing import ScriptedModel
from agentcore.types import ImageContent, TextContent


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One server for the tests that neither kill nor restart it (starting one costs ~1-3 s)."""
    import sys

    markers = tmp_path_factory.mktemp("shared-markers")
    server = MCPServer.stdio(sys.executable, [TEST_SERVER], env={"MARKER_DIR": str(markers)}, name="testsrv")
    server.markers = markers
    with server:
        yield server


def test_tools_are_agent_tools_with_the_servers_schema(shared):
    server = shared
    tools = {t.name: t for t in server.tools()}
    assert {"echo", "add", "hang", "die"} <= set(tools)
    add = tools["add"]
    assert add.description == "Add two integers."
    assert add.parameters["type"] == "object"
    assert set(add.parameters["properties"]) == {"a", "b"}
    assert add.parameters["required"] == ["a", "b"]


def test_prefix_names_tools_and_calls_reach_the_original_name(shared):
    server = shared
    tools = {t.name: t for t in server.tools(prefix="t")}
    assert "t_add_tool" in tools and "add" not in tools
    result = tools["t_add"].execute("call-1", {"a": 2, "b": 40}, None, None)
    assert result.content == [TextContent("42")]
    assert result.details == {"result": 42}


def test_tool_names_start_with_a_letter_or_underscore_as_gemini_requires(test_server):
    """A name starting with a digit (prefix ``1password``, a tool ``2fa_check``) made Gemini refuse
    every request of the agent (HTTP 400: a function name must start with a letter or ``_``)."""
    import re

    server = test_server()
    tools = server.tools(prefix="1password")
    assert all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]{0,63}", t.name) for t in tools)
    echo = next(t for t in tools if t.name == "_1password_echo")
    assert echo.execute("c1", {"text": "hi"}).content == [TextContent("hi")]


def test_the_same_agent_tool_object_is_returned_each_time(shared):
    server = shared
    assert server.tools()[0] is server.tools()[0]
    assert server.tools(prefix="x")[0] is not server.tools()[0]


def test_text_structured_image_resource_and_link_mapping(shared):
    server = shared
    weather = server.call_tool("structured", {"city": "Oslo"})
    mixed = server.call_tool("image", {})
    assert weather.details == {"city": "Oslo", "temperature": 21}
    assert '"temperature": 21' in weather.content[0].text
    image, resource, link = mixed.content
    assert isinstance(image, ImageContent) and image.mime_type == "image/png" and image.data.startswith("iVBOR")
    assert resource == TextContent("[resource test://notes/1]\nnote one")
    assert link == TextContent("[resource link test://notes/2] note two: the second")


def test_a_result_over_50000_characters_keeps_the_first_50000_and_says_so(shared):
    result = shared.call_tool("big", {"chars": 30_000, "blocks": 3})
    first, second, note = result.content
    assert first.text == "a" * 30_000 and second.text == "b" * 20_000
    assert note.text.startswith("[Output truncated: showing the first 50,000 of 90,000 characters.")
    assert shared.call_tool("big", {"chars": 50_000}).content == [TextContent("a" * 50_000)]


def test_max_output_chars_none_keeps_everything_and_bad_values_are_refused(test_server):
    server = test_server(max_output_chars=None)
    assert server.call_tool("big", {"chars": 70_000}).content == [TextContent("a" * 70_000)]
    for bad in (0, -5, 1.5, True, "100"):
        with pytest.raises(ValueError, match="max_output_chars must be a positive integer or None"):
            MCPServer.stdio("server", max_output_chars=bad)


def test_timeouts_no_wait_can_use_are_refused_by_name():
    """``MCPServer(timeout=nan)`` made every call time out at once ("within nans"), and ``inf`` or
    ``1e10`` failed each call with OverflowError; the config file already refused them."""
    for option in ("timeout", "connect_timeout"):
        for bad in (float("nan"), float("inf"), 1e10, 0, -1, True, "30"):
            with pytest.raises(ValueError, match=f"MCPServer: {option} must be a positive number of seconds"):
                MCPServer.stdio("server", **{option: bad})
    with pytest.raises(ValueError, match="connect_timeout"):
        MCPServer.stdio("server", connect_timeout=None)
    MCPServer.stdio("server", timeout=None).close()  # None: no limit for a call


def test_a_per_call_timeout_no_wait_can_use_is_refused_before_anything_is_sent(test_server):
    """``call_tool(timeout=inf)`` (or ``1e10``, ``"30"``) sent the request, so the tool ran, and
    then failed with a bare OverflowError or TypeError; ``nan`` and ``-1`` timed out at once."""
    server = test_server()
    for bad in (float("nan"), float("inf"), 1e10, 0, -1, True, "30"):
        with pytest.raises(ValueError, match=r"MCPServer.call_tool: timeout must be a positive number of seconds"):
            server.call_tool("echo", {"text": "x"}, timeout=bad)
    assert server.pid is None, "a call was sent"
    server.timeout = float("inf")  # the default, set on the object
    with pytest.raises(ValueError, match=r"not inf \(server 'testsrv', tool 'echo'\)"):
        server.call_tool("echo", {"text": "x"})
    assert server.pid is None


def test_is_error_raises_with_the_servers_text(shared):
    server = shared
    with pytest.raises(MCPToolError, match="cannot do it: no reason"):
        server.call_tool("fail", {"reason": "no reason"})
    assert server.call_tool("echo", {"text": "still fine"}).content == [TextContent("still fine")]


def test_unknown_tool_is_a_tool_error_naming_it(shared):
    server = shared
    with pytest.raises(MCPToolError, match="nope"):
        server.call_tool("nope", {})


def test_progress_notifications_become_updates(shared):
    updates = []
    server = shared
    result = server.call_tool("progress", {"steps": 3}, on_update=updates.append)
    assert result.content == [TextContent("done after 3 steps")]
    assert [u.content[0].text for u in updates] == ["step 1 of 3", "step 2 of 3", "step 3 of 3"]
    assert updates[-1].details == {"progress": 3.0, "total": 3.0, "message": "step 3 of 3"}


def test_abort_cancels_on_the_server_and_returns_at_once(shared):
    controller = AbortController()
    server = shared
    abort_when_marked(controller, shared.markers / "started-a")
    with pytest.raises(MCPAbortedError, match="'hang' was aborted"):
        server.call_tool("hang", {"tag": "a"}, signal=controller.signal, timeout=60)
    assert eventually(lambda: (shared.markers / "cancelled-a").exists()), "the server never saw the cancellation"
    assert server.call_tool("echo", {"text": "after"}).content == [TextContent("after")]
    assert server.restarts == 0


def test_an_already_aborted_signal_sends_nothing(shared):
    controller = AbortController()
    controller.abort()
    server = shared
    with pytest.raises(MCPAbortedError, match="not sent"):
        server.call_tool("hang", {"tag": "b"}, signal=controller.signal)
    assert not (shared.markers / "started-b").exists()


def test_a_slow_call_times_out_and_the_session_stays(test_server, marker_dir):
    with test_server(timeout=0.5) as server:
        pid = server.pid
        with pytest.raises(MCPTimeoutError, match=r"'hang' gave no result within 0.5s; the request was cancelled"):
            server.call_tool("hang", {"tag": "t"})
        assert eventually(lambda: (marker_dir / "cancelled-t").exists())
        assert server.call_tool("pid", {}).content == [TextContent(str(pid))]
        assert server.restarts == 0


def test_per_call_timeout_overrides_the_default(shared):
    server = shared
    with pytest.raises(MCPTimeoutError, match="within 0.3s"):
        server.call_tool("hang", {"tag": "u"}, timeout=0.3)


@pytest.mark.parametrize("tool, args", [("echo", {"text": "done"}), ("fail", {"reason": "late"})])
def test_an_outcome_that_lands_as_the_timeout_fires_is_the_outcome(test_server, monkeypatch, tool, args):
    """The wait for the result times out at the very instant the result arrives, so the cancel
    comes too late: the call completed (its side effects happened) and its outcome, a result or
    the tool's error, is what the caller gets, not "the request was cancelled"."""
    real_submit = server_module._loop.submit

    class LandsAtTheLimit:
        """The call's future; its first wait times out just as the outcome is in."""

        def __init__(self, future):
            self._future, self._first = future, True

        def result(self, timeout=None):
            if self._first:
                self._first = False
                concurrent.futures.wait([self._future])
                raise concurrent.futures.TimeoutError
            return self._future.result(timeout)

        def __getattr__(self, name):
            return getattr(self._future, name)

    def submit(coro):
        future = real_submit(coro)
        return LandsAtTheLimit(future) if coro.__qualname__ == "Connection.call_tool" else future

    with test_server(timeout=30) as server:
        monkeypatch.setattr(server_module._loop, "submit", submit)
        if tool == "echo":
            assert server.call_tool(tool, args).content == [TextContent("done")]
        else:
            with pytest.raises(MCPToolError, match="cannot do it: late"):
                server.call_tool(tool, args)


def test_a_hung_server_is_named_and_restarted_on_the_next_call(test_server, monkeypatch):
    monkeypatch.setattr("agentcore_mcp.server.PING_TIMEOUT", 1.0)
    with test_server(timeout=0.5) as server:
        first = server.pid
        with pytest.raises(MCPServerError, match=r"testsrv.*did not answer.*\(hung\).*restarted on the next call"):
            server.call_tool("freeze", {"seconds": 60})
        assert server.call_tool("echo", {"text": "back"}).content == [TextContent("back")]
        assert server.pid != first and server.restarts == 1
        assert eventually(lambda: not alive(first)), "the hung server was left running"


def test_an_abort_while_a_hung_server_is_being_replaced_is_heard_at_once(marker_dir, monkeypatch):
    """The call after a hang restarts the server, but the hung process (deaf to stdin EOF and
    SIGTERM) takes seconds to end: the caller used to wait for that under the server's lock,
    deaf to its run's abort (Ctrl+C) all that while. Now the new start waits for it on the loop."""
    import shlex
    import sys
    import time

    from agentcore_mcp._stdio import GRACE_SECONDS

    monkeypatch.setattr("agentcore_mcp.server.PING_TIMEOUT", 1.0)
    deaf = f"trap '' TERM; exec {shlex.quote(sys.executable)} {shlex.quote(TEST_SERVER)}"
    with MCPServer.stdio("sh", ["-c", deaf], env={"MARKER_DIR": str(marker_dir)}, name="deaf", timeout=0.5) as server:
        first = server.pid
        with pytest.raises(MCPServerError, match="hung"):
            server.call_tool("freeze", {"seconds": 60})
        controller = AbortController()
        aborted_at = []

        def abort_soon() -> None:
            aborted_at.append(time.monotonic())
            controller.abort("Ctrl+C")

        threading.Timer(0.3, abort_soon).start()
        with pytest.raises(MCPAbortedError):
            server.call_tool("echo", {"text": "x"}, signal=controller.signal)
        waited = time.monotonic() - aborted_at[0]
        assert waited < GRACE_SECONDS / 2, f"the abort was heard {waited:.1f}s late"
        assert server.call_tool("echo", {"text": "back"}).content == [TextContent("back")]
        assert server.pid != first and not alive(first)


def test_a_crash_mid_call_names_server_exit_code_and_stderr_then_restarts(test_server):
    with test_server(name="crashy") as server:
        first = server.pid
        with pytest.raises(MCPServerError) as info:
            server.call_tool("die", {"code": 3})
        message = str(info.value)
        assert "MCP server 'crashy' exited with code 3 during the call to tool 'die'" in message
        assert "fatal: the test server dies on request" in message
        assert "restarted on the next call" in message
        assert server.call_tool("pid", {}).content != [TextContent(str(first))]
        assert server.restarts == 1


def test_a_server_that_died_while_idle_is_restarted_before_the_call(test_server):
    with test_server() as server:
        first = server.pid
        os.kill(first, 9)
        assert eventually(lambda: not alive(first))
        # the plugin has seen the death (a kill in the same instant as a call fails that call with a
        # clear error and restarts on the next one: test_stdio's crash tests cover that case)
        assert eventually(lambda: "idle" in repr(server))
        assert server.call_tool("echo", {"text": "hi"}).content == [TextContent("hi")]
        assert server.pid != first


def test_parallel_calls_share_one_session(shared):
    server = shared
    results = [None] * 8

    def run(i: int) -> None:
        results[i] = server.call_tool("add", {"a": i, "b": 100}).content[0].text

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [str(i + 100) for i in range(8)]


@pytest.mark.parametrize(
    "via, mode",
    [
        ("notification", "legacy"),  # a 2025-era session: the notification
        ("bus", "auto"),
    ],
)  # a 2026-07-28 session: subscriptions/listen
def test_list_changed_refreshes_the_tool_list(test_server, via, mode):
    changed = threading.Event()
    seen = []
    server = test_server()
    server._spec.mode = mode
    with server:
        assert "extra" not in {t.name for t in server.tools()}
        server.on_tools_changed(lambda tools: (seen.append([t.name for t in tools]), changed.set()))
        server.call_tool("add_tool", {"via": via})
        assert changed.wait(10), "no tools/list_changed refresh"
        assert "extra" in seen[-1]
        assert "p_extra" in {t.name for t in server.tools(prefix="p")}
        assert server.call_tool("extra", {}).content == [TextContent("extra!")]


def test_a_change_announced_while_the_list_is_fetched_is_fetched_too(test_server, monkeypatch):
    """The server answers tools/list, then adds a tool and announces it before the client kept
    that answer: the answer is outdated, so the refresh fetches again before it tells anyone."""
    real_list_tools, real_changed = Connection.list_tools, MCPServer._tools_changed
    pending = {}

    async def list_tools(self):
        tools = await real_list_tools(self)
        if pending.pop("arm", False):  # answered; now the change and its announcement
            announced = pending["announced"] = concurrent.futures.Future()
            await self.client.call_tool("add_tool", {"via": "notification"})
            await asyncio.wait_for(asyncio.wrap_future(announced), 30)
        return tools

    def tools_changed(self):
        real_changed(self)
        announced = pending.get("announced")
        if announced is not None and not announced.done():
            announced.set_result(None)

    monkeypatch.setattr(Connection, "list_tools", list_tools)
    monkeypatch.setattr(MCPServer, "_tools_changed", tools_changed)
    server = test_server()
    server._spec.mode = "legacy"  # plain notifications/tools/list_changed
    with server:
        assert "extra" not in {t.name for t in server.tools()}
        seen, told = [], threading.Event()
        server.on_tools_changed(lambda tools: (seen.append({t.name for t in tools}), told.set()))
        pending["arm"] = True
        server._tools_changed()  # a list_changed: the refresh's tools/list meets the one above
        assert told.wait(30), "no refresh"
        assert "extra" in seen[0], f"the tool announced during the fetch was lost: {sorted(seen[0])}"
        assert "extra" in {t.name for t in server.tools()}


def test_an_older_tool_list_never_reaches_the_callbacks_after_a_newer_one(test_server, monkeypatch):
    """A change announced while the callbacks still get the previous list: the new list comes
    after that delivery, never beside or before it, so the last list a callback got is the newest."""
    real_changed = MCPServer._tools_changed
    announced = threading.Event()

    def tools_changed(self):
        real_changed(self)
        announced.set()

    monkeypatch.setattr(MCPServer, "_tools_changed", tools_changed)
    server = test_server(name="order")
    server._spec.mode = "legacy"

    def refreshes():
        return [t for t in threading.enumerate() if t.name == "agentcore-mcp-refresh-order"]

    with server:
        server.tools()
        first, release, lists = [], threading.Event(), []

        def slow_first(tools):
            if not first:
                first.append(threading.current_thread())
                assert release.wait(30)

        server.on_tools_changed(slow_first)
        server.on_tools_changed(lambda tools: lists.append({t.name for t in tools}))
        server._tools_changed()  # delivery 1 (no 'extra'): held in the first callback
        assert eventually(lambda: bool(first), within=30)
        announced.clear()
        server.call_tool("add_tool", {"via": "notification"})
        assert announced.wait(30), "the change was not announced"
        for thread in refreshes():  # a refresh running beside the held one delivers now
            if thread is not first[0]:
                thread.join(30)
        release.set()
        for thread in refreshes():
            thread.join(30)
        assert lists and "extra" in lists[-1], f"the callback got an outdated list last: {[sorted(x) for x in lists]}"


def test_close_kills_the_process_group_even_children_that_ignore_sigterm(test_server):
    server = test_server()
    child = int(server.call_tool("spawn_child", {}).content[0].text)
    pgid = server.pid
    assert alive(child) and child in group_members(pgid)
    server.close()
    assert not alive(pgid)
    assert eventually(lambda: not group_members(pgid), within=5), f"orphans left: {group_members(pgid)}"
    with pytest.raises(MCPConnectionError, match="is closed"):
        server.call_tool("echo", {"text": "x"})
    server.close()  # idempotent


def test_a_command_that_cannot_start_is_a_clear_connection_error():
    server = MCPServer.stdio("/nonexistent/mcp-server", name="ghost")
    with pytest.raises(
        MCPConnectionError,
        match=r"MCP server 'ghost' \(/nonexistent/mcp-server\) could not be "
        r"started.*No such file",
    ):
        server.connect()
    server.close()


def test_a_server_that_exits_at_start_shows_its_stderr():
    import sys

    server = MCPServer.stdio(
        sys.executable, ["-c", "import sys; print('bad flag --x', file=sys.stderr); sys.exit(2)"], name="quitter"
    )
    with pytest.raises(MCPConnectionError) as info:
        server.tools()
    assert "MCP server 'quitter'" in str(info.value) and "bad flag --x" in str(info.value)
    server.close()


def test_env_reaches_the_server_but_never_reprs_errors_or_logs(test_server, caplog):
    caplog.set_level(logging.DEBUG)
    secret = "sk-test-0123456789abcdef"
    with test_server(name="secretive", env={"API_KEY": secret}) as server:
        assert server.call_tool("env", {"name": "API_KEY"}).content == [TextContent(secret)]
        assert secret not in repr(server) and "API_KEY" in repr(server)
        with pytest.raises(MCPToolError) as info:
            server.call_tool("fail", {"reason": f"leaked {secret}"})
        assert secret not in str(info.value) and "***" in str(info.value)
        with pytest.raises(MCPServerError) as crash:
            server.call_tool("die", {})
        assert secret not in str(crash.value)
    assert secret not in caplog.text


def test_the_caller_thread_never_gets_an_event_loop(shared):
    import asyncio

    server = shared
    server.call_tool("echo", {"text": "x"})
    with pytest.raises(RuntimeError):
        asyncio.get_running_loop()


def test_abort_cancels_on_a_2025_era_session_too(test_server, marker_dir):
    controller = AbortController()
    server = test_server()
    server._spec.mode = "legacy"  # notifications/cancelled, as the npm reference servers get it
    with server:
        abort_when_marked(controller, marker_dir / "started-l")
        with pytest.raises(MCPAbortedError):
            server.call_tool("hang", {"tag": "l"}, signal=controller.signal)
        assert eventually(lambda: (marker_dir / "cancelled-l").exists()), "the server never saw the cancellation"
        assert server._conn.client.protocol_version not in ("2026-07-28",)


def _server_then(tmp_path, ending: str):
    """Run a script that starts the test server, has it spawn a child that ignores stdin EOF and
    SIGTERM, prints both pids and then ends with ``ending`` (never closing the server); return the
    finished process and the two pids."""
    import subprocess
    import sys

    script = tmp_path / "forgets_to_close.py"
    script.write_text(
        "import os, signal, sys\nfrom agentcore_mcp import MCPServer\n"
        f"s = MCPServer.stdio(sys.executable, [{TEST_SERVER!r}])\n"
        "child = s.call_tool('spawn_child', {}).content[0].text\n"
        f"print(s.pid, child, flush=True)\n{ending}\n"
    )
    out = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    pgid, child = (int(x) for x in out.stdout.split())
    return out, pgid, child


def test_interpreter_exit_without_close_leaves_no_orphan(tmp_path):
    _, pgid, child = _server_then(tmp_path, "")
    assert eventually(lambda: not alive(child) and not group_members(pgid), within=5)


def test_a_killed_parent_leaves_no_orphan(tmp_path):
    """SIGKILL leaves no atexit and no close: the lifeline watchdog ends the server's group, here
    a child that ignores both stdin EOF and SIGTERM, within the grace and SIGTERM waits."""
    out, pgid, child = _server_then(tmp_path, "os.kill(os.getpid(), signal.SIGKILL)")
    assert out.returncode == -9, out.stderr
    assert eventually(lambda: not alive(child) and not group_members(pgid), within=15), group_members(pgid)
    assert eventually(lambda: not lifelines_of(pgid), within=5)


def test_the_lifeline_runs_with_the_server_and_a_close_ends_it_silently(test_server):
    server = test_server()
    child = int(server.call_tool("spawn_child", {}).content[0].text)
    pgid = server.pid
    (watchdog,) = lifelines_of(pgid)
    assert group_members(watchdog) == [watchdog]  # a session of its own, outside the server's group
    server.close()
    assert eventually(lambda: not alive(watchdog) and not alive(child), within=5)


def test_without_a_lifeline_the_server_still_runs_and_a_warning_says_so(test_server, monkeypatch, caplog):
    from agentcore_mcp import _stdio

    def no_shell(pgid: int) -> None:
        raise FileNotFoundError(2, "No such file or directory", "/bin/sh")

    monkeypatch.setattr(_stdio, "Lifeline", no_shell)
    server = test_server(name="bare")
    with caplog.at_level(logging.WARNING, logger="agentcore_mcp"):
        assert server.call_tool("echo", {"text": "hi"}).content == [TextContent("hi")]
    assert not lifelines_of(server.pid)
    assert any(
        "server 'bare'" in r.getMessage() and "no lifeline watchdog" in r.getMessage() for r in caplog.records
    ), [r.getMessage() for r in caplog.records]


def test_a_forked_child_closes_its_copy_of_the_lifeline(test_server):
    import warnings

    server = test_server()
    server.connect()
    (watchdog,) = lifelines_of(server.pid)
    pipe = os.readlink(f"/proc/{watchdog}/fd/0")  # "pipe:[inode]", the read end
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 3.12+: fork with threads running
        pid = os.fork()
    if pid == 0:  # the child: only os calls, then out
        held = [fd for fd in os.listdir("/proc/self/fd") if _readlink(f"/proc/self/fd/{fd}") == pipe]
        os._exit(1 if held else 0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the forked child kept the lifeline's pipe open"
    assert alive(watchdog)  # and left the parent's watchdog alone


def _readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


def _raw_server(mode: str, env_extra=None, **options):
    import os
    import sys

    from agentcore_mcp import MCPServer

    script = os.path.join(os.path.dirname(__file__), "raw_jsonrpc_server.py")
    env = {"MODE": mode, "TOKEN": "tok-0123456789", **(env_extra or {})}
    return MCPServer.stdio(sys.executable, [script], name="raw", env=env, **options)


def test_a_server_error_of_code_32000_is_the_tools_error_not_a_lost_connection():
    """-32000 is also the SDK's own "connection closed" code: the server's own error must not
    tear the session down, and its message must reach the caller (its secrets masked)."""
    from agentcore_mcp import MCPToolError

    with _raw_server("server-error") as server:
        with pytest.raises(MCPToolError) as info:
            server.call_tool("t", {})
        message = str(info.value)
        assert message.startswith("MCP server 'raw': tool 't' failed: backend unavailable: ")
        assert "(JSON-RPC error -32000)" in message and "tok-0123456789" not in message
        assert server.restarts == 0


def test_a_refused_calls_long_message_is_cut_like_a_result():
    """A JSON-RPC error's message goes into the transcript as the error result's text: one of
    megabytes (a dump, a traceback) is cut at max_output_chars as an isError text is."""
    from agentcore_mcp import MCPToolError

    with _raw_server("server-error", {"PAD": "400000"}, max_output_chars=1000) as server:
        with pytest.raises(MCPToolError) as info:
            server.call_tool("t", {})
    message = str(info.value)
    assert message.startswith("MCP server 'raw': tool 't' failed: backend unavailable: ***xxx")
    assert len(message) < 1200 and message.endswith("to see the rest.]")
    assert "showing the first 1,000 of 400,08" in message and (info.value.server, info.value.tool) == ("raw", "t")


def test_a_result_that_is_not_valid_mcp_is_a_tool_error_naming_the_server():
    from agentcore_mcp import MCPToolError

    with _raw_server("not-a-list") as server:
        with pytest.raises(
            MCPToolError, match=r"MCP server 'raw': tool 't' returned a result that is not valid MCP: content"
        ):
            server.call_tool("t", {})


def test_a_content_block_the_sdk_cannot_read_costs_only_itself():
    """The SDK refuses a whole result for one block of a type it does not know (a later
    protocol's) or a malformed one: the other blocks arrive, and a note names each such block."""
    with _raw_server("unknown-block") as server:
        result = server.call_tool("t", {})
        assert server.restarts == 0
    assert [b.text for b in result.content] == [
        "before",
        "[MCP content of type 'audio2' not shown: this client does not know that type]",
        "[MCP content of type 'resource' not shown: it is not valid MCP (resource.text: Field required)]",
        "after",
    ]


def test_an_error_result_with_a_block_the_sdk_cannot_read_keeps_its_message():
    from agentcore_mcp import MCPToolError

    with _raw_server("unknown-block", env_extra={"IS_ERROR": "1"}) as server:
        with pytest.raises(MCPToolError) as info:
            server.call_tool("t", {})
    assert str(info.value).startswith("before\n[MCP content of type 'audio2' not shown")


def test_a_result_holding_a_lone_surrogate_arrives_at_once():
    """The SDK's strict JSON reader refuses a lone ``\\ud83d`` (half an emoji): the message was
    dropped and the call waited for its whole timeout. It is read with U+FFFD in its place."""
    with _raw_server("cut-emoji") as server:
        server.timeout = 30
        result = server.call_tool("t", {})
    assert result.content[0].text == "half \ufffd here"


def test_a_result_of_megabytes_arrives_whole():  # one line over many pipe reads, joined once
    with _raw_server("big-result", max_output_chars=None) as server:
        result = server.call_tool("t", {})
        assert server.restarts == 0
    assert result.content[0].text == "".join(f"{i:09d}\n" for i in range(300_000))


# A process that starts but never speaks MCP (reads nothing, answers nothing), as a server does
# while npx downloads it; it writes its pid to argv[1] so the test can look for it afterwards.
# the pid file appears whole (a test that waits for it to exist reads it at once)
MUTE = (
    "import os, sys, time\nwith open(sys.argv[1] + '.tmp', 'w') as f:\n    f.write(str(os.getpid()))\n"
    "os.replace(sys.argv[1] + '.tmp', sys.argv[1])\ntime.sleep(120)"
)


def _mute_server(marker_dir, **kwargs):
    import sys

    pid_file = marker_dir / "mute-pid"
    server = MCPServer.stdio(sys.executable, ["-c", MUTE, str(pid_file)], name="mute", **kwargs)
    return server, pid_file


def test_a_handshake_timeout_is_raised_at_the_limit_and_leaves_no_process(marker_dir):
    import time

    server, pid_file = _mute_server(marker_dir, connect_timeout=1)
    started = time.monotonic()
    with pytest.raises(MCPConnectionError, match=r"(?s)'mute'.*did not finish the MCP handshake within 1s"):
        server.connect()
    assert time.monotonic() - started < 3, "the caller waited for the mute server's shutdown too"
    pid = int(pid_file.read_text())
    closing = time.monotonic()
    server.close()
    assert time.monotonic() - closing < 6
    assert eventually(lambda: not group_members(pid), within=5), "the mute server was left running"


def test_abort_while_the_server_is_starting_returns_at_once(marker_dir):
    import time

    controller = AbortController()
    server, pid_file = _mute_server(marker_dir, connect_timeout=60)
    abort_when_marked(controller, pid_file)
    started = time.monotonic()
    with pytest.raises(MCPAbortedError, match="(?s)'mute'.*aborted"):
        server.call_tool("anything", {}, signal=controller.signal)
    assert time.monotonic() - started < 5, "the abort waited for the handshake timeout"
    pid = int(pid_file.read_text())
    server.close()
    assert eventually(lambda: not group_members(pid), within=5), "the mute server was left running"


def test_close_from_another_thread_ends_a_start_in_progress(marker_dir):
    import time

    server, pid_file = _mute_server(marker_dir, connect_timeout=60)
    failure = []
    starter = threading.Thread(target=lambda: failure.append(pytest.raises(MCPConnectionError, server.tools)))
    starter.start()
    assert eventually(pid_file.exists)
    started = time.monotonic()
    server.close()
    starter.join(10)
    took = time.monotonic() - started
    assert took < 6 and not starter.is_alive(), f"close() took {took:.1f}s: it waited for the handshake timeout"
    assert "closed" in str(failure[0].value)
    assert eventually(lambda: not group_members(int(pid_file.read_text())), within=5)


class _Waits:
    """Which threads (by name) started waiting for a handshake; and the Connections made."""

    def __init__(self, monkeypatch, *names):
        self.started = {name: threading.Event() for name in names}
        self.made = []
        real_wait, real_connection = MCPServer._wait_ready, server_module.Connection

        def wait_ready(server, conn, signal):
            event = self.started.get(threading.current_thread().name)
            if event is not None:
                event.set()
            return real_wait(server, conn, signal)

        def connection(*args, **kwargs):
            self.made.append(real_connection(*args, **kwargs))
            return self.made[-1]

        monkeypatch.setattr(MCPServer, "_wait_ready", wait_ready)
        monkeypatch.setattr(server_module, "Connection", connection)


def _in_thread(name, call, failures):
    def run():
        try:
            call()
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            failures[name] = exc

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread


def test_an_abort_while_waiting_for_another_threads_start_returns_at_once(marker_dir, monkeypatch):
    """B finds A's start in progress: B waits for that handshake with its own signal (not for a
    lock A holds meanwhile), returns at once when aborted, and A's start goes on."""
    waits = _Waits(monkeypatch, "A", "B")
    server, pid_file = _mute_server(marker_dir, connect_timeout=60)
    controller, failures = AbortController(), {}
    try:
        a = _in_thread("A", server.connect, failures)
        assert waits.started["A"].wait(30) and eventually(pid_file.exists)
        b = _in_thread("B", lambda: server.call_tool("anything", {}, signal=controller.signal), failures)
        assert waits.started["B"].wait(10), "B never waited for the start itself (blocked behind A's wait)"
        controller.abort()
        b.join(10)
        assert not b.is_alive(), "B's abort waited for A's start"
        assert isinstance(failures["B"], MCPAbortedError) and "goes on" in str(failures["B"])
        assert a.is_alive() and "starting" in repr(server), "B's abort ended A's start"
    finally:
        server.close()
    a.join(10)
    assert "closed" in str(failures["A"]) and len(waits.made) == 1
    assert eventually(lambda: not group_members(int(pid_file.read_text())), within=5)


def test_two_calls_aborted_while_the_server_starts_start_one_server(marker_dir, monkeypatch):
    """Two parallel calls of one run wait for one start; the run is aborted: both return at once,
    and the server is not started a second time for the call that came later."""
    waits = _Waits(monkeypatch, "A", "B")
    server, pid_file = _mute_server(marker_dir, connect_timeout=60)
    controller, failures = AbortController(), {}
    call = lambda: server.call_tool("anything", {}, signal=controller.signal)  # noqa: E731
    try:
        a = _in_thread("A", call, failures)
        assert waits.started["A"].wait(30) and eventually(pid_file.exists)
        b = _in_thread("B", call, failures)
        assert waits.started["B"].wait(10), "B never waited for the start itself (blocked behind A's wait)"
        controller.abort()
        a.join(10), b.join(10)
        assert not a.is_alive() and not b.is_alive()
    finally:
        server.close()
    assert isinstance(failures["A"], MCPAbortedError) and isinstance(failures["B"], MCPAbortedError)
    assert len(waits.made) == 1, f"{len(waits.made)} servers started for one aborted run"
    assert eventually(lambda: not group_members(int(pid_file.read_text())), within=5)


def test_a_call_aborted_while_it_waits_for_the_lock_starts_no_server(marker_dir, monkeypatch):
    """The run is aborted after the call's first check, while it waits for the server's lock
    (another thread replaces the connection): it raises without starting a server."""
    waits = _Waits(monkeypatch)
    server, pid_file = _mute_server(marker_dir, connect_timeout=60)
    controller = AbortController()

    class AbortOnEnter:
        """The server's lock; the abort lands as the call takes it."""

        def __init__(self, lock):
            self._lock = lock

        def __enter__(self):
            controller.abort()
            return self._lock.__enter__()

        def __exit__(self, *exc):
            return self._lock.__exit__(*exc)

    server._lock = AbortOnEnter(server._lock)
    try:
        with pytest.raises(MCPAbortedError, match="(?s)'mute'.*aborted"):
            server.call_tool("anything", {}, signal=controller.signal)
    finally:
        server.close()
    assert waits.made == [] and not pid_file.exists(), "a server was started for an aborted call"


def test_a_call_in_flight_when_the_server_is_closed_says_it_was_closed(test_server, marker_dir):
    server = test_server(name="closing")
    server.connect()
    threading.Thread(
        target=lambda: (eventually(lambda: (marker_dir / "started-c").exists(), 30), server.close()), daemon=True
    ).start()
    with pytest.raises(MCPServerError) as info:
        server.call_tool("hang", {"tag": "c"}, timeout=30)
    message = str(info.value)
    assert "MCP server 'closing' was closed during the call to tool 'hang'" in message
    assert "restarted" not in message


def test_ctrl_c_during_a_direct_call_cancels_it_on_the_server(tmp_path, marker_dir):
    """Outside an agent nothing aborts a signal: the KeyboardInterrupt itself must cancel."""
    import signal as signals
    import subprocess
    import sys

    script = tmp_path / "interrupted.py"
    script.write_text(
        "import sys, time\nfrom pathlib import Path\nfrom agentcore_mcp import MCPServer\n"
        f"s = MCPServer.stdio(sys.executable, [{TEST_SERVER!r}], env={{'MARKER_DIR': {str(marker_dir)!r}}})\n"
        "s.connect()\nprint('ready', flush=True)\n"
        "try:\n    s.call_tool('hang', {'tag': 'k'}, timeout=60)\nexcept KeyboardInterrupt:\n    pass\n"
        f"cancelled = Path({str(marker_dir / 'cancelled-k')!r})\n"
        "for _ in range(1000):\n    if cancelled.exists(): break\n    time.sleep(0.01)\n"
        "print('cancelled' if cancelled.exists() else 'still running', flush=True)\n"
    )
    process = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert process.stdout.readline().strip() == "ready"
        assert eventually(lambda: (marker_dir / "started-k").exists(), within=30)
        process.send_signal(signals.SIGINT)
        assert process.stdout.readline().strip() == "cancelled"
    finally:
        process.kill()
        process.wait(30)
        process.stdout.close()


def test_one_tool_with_an_odd_schema_never_costs_the_servers_other_tools(caplog):
    """The SDK refuses a whole tools/list when one schema lacks ``"type": "object"``; other
    clients read ``{}`` as "no parameters". Schemas whose intent is clear are repaired, the rest
    (and a second tool whose name sanitises to a taken one) skipped with a warning naming them."""
    caplog.set_level(logging.WARNING, logger="agentcore_mcp")
    with _raw_server("odd-schemas") as server:
        tools = {t.name: t for t in server.tools()}
        assert set(tools) == {"no_params", "nullable", "dotted_name", "fine"}
        assert tools["no_params"].parameters == {"type": "object", "properties": {}}
        assert tools["nullable"].parameters["type"] == "object"
        assert server.call_tool("nullable", {"x": 1}).content == [TextContent('{"x": 1}')]
        assert server.call_tool("no_params", {}).content == [TextContent("{}")]
    warned = caplog.text
    assert "MCP server 'raw': tool 'stringy' skipped" in warned and '"type": "string"' in warned
    assert "tool 'dotted_name' skipped" in warned and "'dotted.name'" in warned


def test_a_second_tool_of_a_name_and_a_schema_that_is_not_json_schema_are_skipped(caplog):
    """A valid listing no agent could use whole: three tools named ``dup``, the third on the
    second page (an Agent refuses two tools of one name, so every tool of the server was lost)
    and a schema that is not JSON schema (agentcore refuses every call of it; a provider refuses
    every request listing it). The first ``dup`` stays; each skip is a warning naming the tool
    and why."""
    caplog.set_level(logging.WARNING, logger="agentcore_mcp")
    with _raw_server("unusable-tools") as server:
        tools = server.tools()
        assert [(t.name, t.description) for t in tools] == [("dup", "the first"), ("fine", "fine")]
        Agent(ScriptedModel([]).model, tools=tools)  # no "tool names must be unique"
        assert server.call_tool("fine", {"y": "z"}).content == [TextContent('{"y": "z"}')]
    warned = caplog.text
    assert warned.count("MCP server 'raw': tool 'dup' skipped: the server lists another tool of that name before") == 2
    assert "tool 'bad_schema' skipped: its inputSchema is not a valid JSON schema (at properties/x/type:" in warned


def test_a_description_of_megabytes_is_cut_with_a_note(caplog):
    """It goes with every model request: 5 MB would fill any context window, failing them all."""
    caplog.set_level(logging.WARNING, logger="agentcore_mcp")
    with _raw_server("long-description") as server:
        (tool,) = server.tools()
    note = "\n\n[Description cut: showing the first 20,000 of 5,000,000 characters.]"
    assert tool.description == ("word " * 1_000_000)[:20_000] + note
    assert "the description of tool 'verbose' has 5000000 characters; only the first 20000 are kept" in caplog.text


def test_a_result_that_breaks_the_tools_output_schema_is_a_tool_error_naming_the_server():
    """The SDK checks structuredContent against the listed outputSchema and raises a bare,
    multi-line RuntimeError; the model must read which server and tool, in one line."""
    with _raw_server("bad-output") as server:
        server.tools()
        with pytest.raises(MCPToolError) as info:
            server.call_tool("t", {})
        message = str(info.value)
        assert message.startswith("MCP server 'raw': tool 't' returned a result that does not match its")
        assert "'one' is not of type 'integer'" in message and "\n" not in message
        assert server.restarts == 0


class RecordWaiter(logging.Handler):
    """A handler that lets a test wait for the next record (whose message holds ``match``): log
    messages arrive on the loop thread, maybe after the tool's result."""

    def __init__(self, match: str = "") -> None:
        super().__init__(logging.DEBUG)
        self.match = match
        self.arrived = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.match in record.getMessage():
            self.arrived.set()

    def wait(self) -> bool:
        arrived = self.arrived.wait(10)
        self.arrived.clear()
        return arrived


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # a 2025-era session; a 2026-07-28 one (opt-in per request)
def test_the_servers_log_messages_reach_python_logging_with_secrets_masked(test_server, caplog, mode):
    secret = "sk-log-0123456789abcdef"
    name = "chatty"
    logger = logging.getLogger(f"agentcore_mcp.server.{name}")
    caplog.set_level(logging.DEBUG, logger=logger.name)
    waiter = RecordWaiter()
    logger.addHandler(waiter)
    server = test_server(name=name, env={"API_KEY": secret})
    server._spec.mode = mode
    try:
        with server:
            for mcp_level, level in [
                ("debug", logging.DEBUG),
                ("info", logging.INFO),
                ("notice", logging.INFO),
                ("warning", logging.WARNING),
                ("error", logging.ERROR),
                ("alert", logging.CRITICAL),
                ("emergency", logging.CRITICAL),
            ]:
                caplog.clear()
                assert server.call_tool("log", {"message": f"at {mcp_level}", "level": mcp_level}).content == [
                    TextContent("logged")
                ]
                assert waiter.wait(), f"no record for a {mcp_level} message"
                (record,) = [r for r in caplog.records if r.name == logger.name]
                assert (record.levelno, record.getMessage()) == (level, f"test-logger: at {mcp_level}")
                assert record.mcp_level == mcp_level and record.mcp_logger == "test-logger"
            caplog.clear()
            server.call_tool("log", {"message": "using", "level": "warning", "say_env": "API_KEY"})
            assert waiter.wait()
            server.call_tool("log", {"message": "using", "level": "error", "say_env": "API_KEY", "as_object": True})
            assert waiter.wait()
    finally:
        logger.removeHandler(waiter)
    assert [(r.levelno, r.getMessage()) for r in caplog.records if r.name == logger.name] == [
        (logging.WARNING, "test-logger: using API_KEY=***"),
        (logging.ERROR, 'test-logger: {"message": "using API_KEY=***"}'),
    ]
    assert secret not in caplog.text


def test_a_failing_log_handler_never_disturbs_the_session(test_server, caplog):
    """Whatever logging does with the record (here a filter that raises), the callback contains
    it: the SDK sees no exception and the session goes on."""

    def explode(record: logging.LogRecord) -> bool:
        raise RuntimeError("a broken filter")

    logger = logging.getLogger("agentcore_mcp.server.fragile")
    logger.addFilter(explode)
    caplog.set_level(logging.DEBUG, logger="agentcore_mcp")
    caplog.set_level(logging.DEBUG, logger="mcp")
    waiter = RecordWaiter("'fragile': a log message could not be logged (RuntimeError)")
    plugin_logger = logging.getLogger("agentcore_mcp")
    plugin_logger.addHandler(waiter)
    try:
        with test_server(name="fragile") as server:
            assert server.call_tool("log", {"message": "boom"}).content == [TextContent("logged")]
            assert waiter.wait()
            assert server.call_tool("echo", {"text": "still here"}).content == [TextContent("still here")]
    finally:
        logger.removeFilter(explode)
        plugin_logger.removeHandler(waiter)
    assert "notification callback" not in caplog.text  # the SDK's containment never ran


def test_a_message_larger_than_the_limit_closes_the_connection_saying_so(monkeypatch):
    """A server writing one line without end (a bug, a binary dumped to stdout) grew memory
    until the agent's process was killed: the reader kept every byte of the unfinished line."""
    from agentcore_mcp import MCPServerError, _stdio

    monkeypatch.setattr(_stdio, "MAX_MESSAGE_BYTES", 1024 * 1024)  # the big result is about 3 MB
    with _raw_server("big-result") as server:
        with pytest.raises(MCPServerError, match=r"MCP server 'raw' sent a message larger than 1 MiB during"):
            server.call_tool("t", {})


def test_an_abort_during_the_liveness_probe_after_a_timeout_is_heard_at_once(test_server, monkeypatch):
    """A call that timed out is followed by a ping (up to PING_TIMEOUT) to tell a slow tool from a
    hung server; the run's abort used to go unheard for all of that wait. Now it ends the wait,
    and the server, not shown to hang, is kept."""
    probing = threading.Event()
    real_probe = Connection.probe

    async def probe(self):
        probing.set()
        return await real_probe(self)

    monkeypatch.setattr(Connection, "probe", probe)
    with test_server(timeout=0.5) as server:
        first = server.pid
        controller = AbortController()
        outcome = []

        def call() -> None:
            try:
                server.call_tool("freeze", {"seconds": 60}, signal=controller.signal)
            except Exception as exc:  # noqa: BLE001 - inspected below
                outcome.append(exc)

        caller = threading.Thread(target=call)
        caller.start()
        assert probing.wait(30), "no liveness probe after the timeout"
        controller.abort("Ctrl+C")
        caller.join(server_module.PING_TIMEOUT / 2)
        assert not caller.is_alive(), "the abort was not heard during the liveness probe"
        assert isinstance(outcome[0], MCPAbortedError), outcome
        assert "gave no result within 0.5s" in str(outcome[0]) and "aborted" in str(outcome[0])
        assert server.pid == first, "a server not shown to hang was restarted"


def test_a_result_nested_over_200_levels_deep_arrives_at_once():
    """The SDK's JSON reader refuses a message nested deeper than about 200 levels (a syntax
    tree as ``structuredContent``): the answer was dropped and the call waited for its whole
    timeout, then was called a timeout. Python's reader reads it."""
    depth = 230  # the SDK's own checks of a result go to about 250 levels
    with _raw_server("deep-result", {"DEPTH": str(depth)}, timeout=20) as server:
        result = server.call_tool("t", {})
        assert server.restarts == 0
    assert result.content[0].text == "deep"
    tree, levels = result.details["tree"], 0
    while isinstance(tree, list):
        tree, levels = tree[0], levels + 1
    assert (tree, levels) == ("leaf", depth)


@pytest.mark.parametrize(
    ("mode", "env", "problem"),
    [
        ("deep-result", {"DEPTH": "300"}, r"failed in the client: ValueError: Maximum serialization depth exceeded"),
        ("deep-result", {"DEPTH": "20000"}, r"failed: the server's answer could not be read: it is nested too deeply"),
        (
            "bad-envelope",
            {},
            r"failed: the server's answer could not be read: it is not a valid JSON-RPC response "
            r"\(result: Input should be a valid dictionary\)",
        ),
    ],
)
def test_an_answer_no_reader_can_read_fails_its_call_at_once_and_the_session_stays(mode, env, problem):
    """An answer that cannot be read at all was dropped: the call it answers waited for its
    whole timeout (300 s by default) and was then reported as a slow tool. It fails at once,
    saying why; the server is fine and stays."""
    with _raw_server(mode, env, timeout=20) as server:
        with pytest.raises(MCPToolError, match=r"MCP server 'raw': tool 't' " + problem):
            server.call_tool("t", {})
        assert server.restarts == 0 and server.tools()[0].name == "t"


def test_stderr_without_line_breaks_is_kept_in_bounded_pieces():
    """A server writing stderr without line breaks (a progress bar redrawn with ``\\r``) had it
    all joined into one pending line: memory without bound, each read copying all of it again
    (20 MB stalled every MCP server of the process for seconds), and none of it ever in the
    stderr an error message quotes. Each ``MAX_STDERR_LINE`` bytes now count as a line."""
    from agentcore_mcp import _stdio

    with _raw_server("stderr-flood", timeout=20) as server:
        assert server.call_tool("t", {}).content == [TextContent("ok")]
        state = server._conn.state
        assert eventually(lambda: len(state.stderr_tail) == state.stderr_tail.maxlen), list(state.stderr_tail)[:1]
        assert all(len(line) <= _stdio.MAX_STDERR_LINE for line in state.stderr_tail)
        assert "progress 09" in state.stderr_text()


def test_a_listing_of_tens_of_thousands_of_tools_keeps_the_first_thousand(caplog):
    """Each listed tool's schema is checked (a millisecond or two): 20,000 tools took longer
    than the handshake limit, so tools() said the server gave no answer, called it hung and
    restarted it on every later call. The first MAX_TOOLS are kept, saying so."""
    from agentcore_mcp import _listing

    with _raw_server("many-tools", {"COUNT": "20000"}, connect_timeout=15) as server:
        names = [tool.name for tool in server.tools()]
        assert server.restarts == 0
    assert names == [f"tool_{i}" for i in range(_listing.MAX_TOOLS)]
    assert "lists more than 1000 tools, more than an agent can use: the 19000 after the first 1000" in caplog.text


def test_a_schema_that_refers_to_itself_without_end_is_skipped(caplog):
    """``{"$ref": "#"}`` is a valid JSON schema, but checking any arguments against it recurses
    until Python's limit: every call of the tool failed with a bare RecursionError. Such a tool
    is skipped as one with an invalid schema is; a recursive schema a value ends (a tree) stays."""
    with _raw_server("ref-cycle") as server:
        tools = {tool.name: tool for tool in server.tools()}
        assert list(tools) == ["tree"]
        arguments = {"child": {"child": {}}}
        assert server.call_tool("tree", arguments).content == [TextContent('{"child": {"child": {}}}')]
    for name in ("itself", "round"):
        assert f"tool {name!r} skipped: its inputSchema refers to itself without end" in caplog.text


def test_the_id_scan_of_an_unreadable_answer_is_linear_in_its_length():
    """An answer nested too deeply for any JSON reader is scanned for its ``id`` by a regex over
    its strings and brackets. A string left open (``"\\"\\"\\"...`` to the end of the line) made
    every escaped quote in it start another scan to the end: quadratic in the line, which may be
    64 MiB. Run in a child with a generous limit: the old pattern needs many minutes here."""
    import subprocess
    import sys

    code = "\n".join(
        [
            "from agentcore_mcp._stdio import _response_id",
            "line = b'[' * 2000 + b'\"' + b'\\\\\"' * 300000 + b'\\\\'",
            "assert _response_id(line) is None",
            "line = b'{\"id\": 7, \"result\": ' + b'[' * 2000 + b'\"' + b'\\\\\"' * 300000",
            "assert _response_id(line) == 7",
            "print('ok')",
        ]
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr

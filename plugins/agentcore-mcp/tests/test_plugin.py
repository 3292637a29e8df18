"""The entry point: tools of $AGENTCORE_MCP_CONFIG's servers registered lazily, failures isolated."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from agentcore_mcp import _registry
from conftest import TEST_SERVER

import agentcore.plugins as plugins
from agentcore import Agent
from agentcore.testing import ScriptedModel, text, tool_call


@pytest.fixture
def config(tmp_path, marker_dir, monkeypatch):
    """Write a config, point $AGENTCORE_MCP_CONFIG at it; reset the registries afterwards."""

    def write(servers):
        path = tmp_path / "mcp.json"
        path.write_text(json.dumps({"mcpServers": servers}))
        monkeypatch.setenv("AGENTCORE_MCP_CONFIG", str(path))
        plugins.reset_plugins()
        return path

    yield write
    _registry.close_all()
    monkeypatch.delenv("AGENTCORE_MCP_CONFIG", raising=False)
    plugins.reset_plugins()


def server_entry(marker_dir, **extra):
    return {"command": sys.executable, "args": [TEST_SERVER], "env": {"MARKER_DIR": str(marker_dir)}, **extra}


def test_tools_register_on_first_registry_use_with_the_server_name_as_prefix(config, marker_dir):
    config({"t": server_entry(marker_dir)})
    assert not _registry._loaded  # nothing started by setting the variable
    tool = plugins.get_tool("t_echo")
    assert tool.execute("c1", {"text": "via registry"}, None, None).content[0].text == "via registry"
    scripted = ScriptedModel([tool_call("t_add", {"a": 1, "b": 2}), text("3")])
    agent = Agent(scripted.model, tools=["t_add"], stream_fn=scripted.stream_fn)
    result = [m for m in agent.prompt("add") if m.role == "toolResult"][0]
    assert result.content[0].text == "3"


def test_rebuilding_registries_never_starts_a_server_twice(config, marker_dir):
    config({"t": server_entry(marker_dir)})
    first = plugins.get_tool("t_echo")
    pid = _registry._loaded[next(iter(_registry._loaded))].servers["t"].pid
    plugins.reset_plugins()
    assert plugins.get_tool("t_echo") is first
    assert _registry._loaded[next(iter(_registry._loaded))].servers["t"].pid == pid


def test_prefix_extension_and_no_prefix(config, marker_dir):
    config({"t": server_entry(marker_dir, prefix="")})
    assert plugins.get_tool("echo").name == "echo"


def test_a_server_that_fails_is_skipped_with_a_warning_the_others_register(config, marker_dir):
    config({"ghost": {"command": "/nonexistent/server"}, "t": server_entry(marker_dir)})
    with pytest.warns(RuntimeWarning, match=r"server 'ghost' skipped: MCP server 'ghost'.*could not be started"):
        assert plugins.get_tool("t_echo").name == "t_echo"
    assert plugins.get_tool("read").name == "read"  # built-ins unaffected


def test_a_malformed_config_fails_only_this_plugin(config, tmp_path):
    path = config({})
    path.write_text("{broken")
    with pytest.warns(UserWarning, match="not valid JSON"):
        assert plugins.get_tool("read").name == "read"
    info = {p.name: p for p in plugins.plugins_info()}
    assert any("not valid JSON" in (p.error or "") for p in info.values())


def test_without_the_variable_the_plugin_imports_nothing_heavy():
    env = {k: v for k, v in os.environ.items() if k != "AGENTCORE_MCP_CONFIG"}
    code = (
        "import sys, agentcore.plugins as p; p.tools(); "
        "print('agentcore_mcp.plugin' in sys.modules, 'mcp' in sys.modules, 'agentcore_mcp.server' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "False", "False"]


def test_import_agentcore_does_not_load_the_plugin(config, marker_dir):
    path = config({"t": server_entry(marker_dir)})
    code = "import sys, agentcore; print('agentcore_mcp' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "AGENTCORE_MCP_CONFIG": str(path)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == "False"
    assert not list(marker_dir.iterdir())


def test_cli_hooks_add_the_option_and_the_tools(marker_dir, tmp_path):
    import argparse

    from agentcore_mcp import plugin

    path = tmp_path / "cli.json"
    path.write_text(json.dumps({"mcpServers": {"c": server_entry(marker_dir)}}))
    parser = argparse.ArgumentParser()
    plugin.add_cli_options(parser, "run")
    args = parser.parse_args(["--mcp", str(path)])
    try:
        tools = plugin.cli_tools(args, "run")
        assert "c_echo" in {t.name for t in tools}
    finally:
        _registry.close_all()
    assert plugin.cli_tools(parser.parse_args([]), "run") is None
    rpc = argparse.ArgumentParser()
    plugin.add_cli_options(rpc, "rpc")  # agentcore rpc takes --mcp too
    assert rpc.parse_args(["--mcp", str(path)]).mcp_configs == [str(path)]


def test_agentcore_chat_with_mcp_config_has_the_servers_tools(marker_dir, tmp_path):
    """The real command (a subprocess): ``--mcp CONFIG`` shows in ``run --help`` and the servers'
    tools reach the agent of ``chat`` (its banner and ``/tools`` list them); a bad CONFIG is exit
    status 2 naming the plugin."""
    repo = Path(__file__).resolve().parents[3]
    path = tmp_path / "cli.json"
    path.write_text(json.dumps({"mcpServers": {"c": server_entry(marker_dir)}}))
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTCORE_MCP_CONFIG", "AGENTCORE_MODEL")}
    # this worktree's agentcore and plugin, not the installed copies
    env["PYTHONPATH"] = os.pathsep.join([str(repo), str(repo / "plugins" / "agentcore-mcp")])
    env["AGENTCORE_SESSIONS_DIR"] = str(tmp_path / "sessions")
    command = [sys.executable, "-m", "agentcore"]
    help_text = subprocess.run([*command, "run", "--help"], env=env, capture_output=True, text=True, timeout=60)
    assert help_text.returncode == 0 and "--mcp CONFIG" in help_text.stdout
    done = subprocess.run(
        [*command, "chat", "--model", "scripted", "--mcp", str(path)],
        input="/tools\n/quit\n",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    listed = [line for line in done.stdout.splitlines() if line.startswith("tools: ")]
    assert listed and {"c_echo", "c_add"} <= set(listed[-1][len("tools: ") :].split(", ")), done.stdout
    broken = subprocess.run(
        [*command, "run", "--model", "scripted", "--mcp", str(tmp_path / "missing.json"), "hi"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert broken.returncode == 2 and "plugin 'mcp'" in broken.stderr, broken.stderr


def test_the_same_tool_name_on_two_servers_warns_and_keeps_the_first(config, marker_dir, tmp_path):
    """Without prefixes two servers may both have ``echo``: the registry would silently keep one and
    the CLI's agent refuse the duplicate names ("tools items 3 and 20 are both named 'echo'")."""
    import argparse

    from agentcore_mcp import plugin

    servers = {"a": server_entry(marker_dir, prefix=""), "b": server_entry(marker_dir, prefix="")}
    config(servers)
    with pytest.warns(
        RuntimeWarning, match=r"tools 'echo', 'add', .* of server 'b' skipped: server 'a' has tools of those names"
    ):
        assert plugins.get_tool("echo").name == "echo"
    _registry.close_all()
    path = tmp_path / "cli.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    parser = argparse.ArgumentParser()
    plugin.add_cli_options(parser, "run")
    with pytest.warns(RuntimeWarning, match="skipped"):
        names = [t.name for t in plugin.cli_tools(parser.parse_args(["--mcp", str(path), "--mcp", str(path)]), "run")]
    assert "echo" in names and len(names) == len(set(names))


def test_closing_the_config_servers_waits_for_the_slowest_not_the_sum(config, marker_dir):
    """At exit (Ctrl+C included) every server of the file is closed: servers that ignore stdin EOF
    (a wrapper script, a container) take the grace period each, so closing them one after the
    other kept `agentcore run` hanging for servers x seconds after the answer."""
    import shlex
    import time

    from agentcore_mcp._stdio import GRACE_SECONDS
    from conftest import eventually, group_members

    wrapped = f"{shlex.quote(sys.executable)} {shlex.quote(TEST_SERVER)}; sleep 600"  # sh waits on
    entry = {"command": "sh", "args": ["-c", wrapped], "env": {"MARKER_DIR": str(marker_dir)}}
    config({name: entry for name in ("s1", "s2", "s3")})
    assert plugins.get_tool("s3_echo").name == "s3_echo"
    servers = list(_registry._loaded[next(iter(_registry._loaded))].servers.values())
    pgids = [server.pid for server in servers]
    started = time.monotonic()
    _registry.close_all()
    elapsed = time.monotonic() - started
    assert all(eventually(lambda pgid=pgid: not group_members(pgid)) for pgid in pgids)
    assert elapsed < 3 * GRACE_SECONDS, f"closing 3 servers took {elapsed:.1f}s: one after the other"

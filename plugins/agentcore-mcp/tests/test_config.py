"""load_config: the {"mcpServers": {...}} file format, ${VAR} expansion, clear errors; secrets in args."""

from __future__ import annotations

import json

import pytest
from agentcore_mcp import MCPConfigError, MCPConnectionError, MCPServer, load_config
from agentcore_mcp.config import servers_from_config


def write(tmp_path, data):
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def test_reads_stdio_and_http_entries_in_order(tmp_path):
    path = write(
        tmp_path,
        {
            "mcpServers": {
                "fs": {
                    "command": "npx",
                    "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
                    "env": {"DEBUG": "1"},
                },
                "remote": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer abcdefgh123"}},
                "old": {"type": "sse", "url": "http://127.0.0.1:9/sse"},
                "off": {"command": "x", "disabled": True},
            }
        },
    )
    servers = load_config(path)
    assert list(servers) == ["fs", "remote", "old"]
    assert all(isinstance(s, MCPServer) and s.pid is None for s in servers.values())  # nothing started
    assert servers["fs"].name == "fs" and servers["fs"]._spec.args[-1] == "/tmp"
    assert servers["remote"]._spec.transport == "auto"
    assert servers["old"]._spec.transport == "sse"
    assert "abcdefgh123" not in repr(servers["remote"])


def test_expands_environment_variables_and_defaults(tmp_path):
    data = {
        "mcpServers": {
            "gh": {
                "url": "https://api.example.com/${API_PATH:-mcp}",
                "headers": {"Authorization": "Bearer ${GH_TOKEN}"},
            }
        }
    }
    servers = servers_from_config(data, environ={"GH_TOKEN": "tok-12345678"})
    spec = servers["gh"]._spec
    assert spec.url == "https://api.example.com/mcp"
    assert spec.headers == {"Authorization": "Bearer tok-12345678"}


def test_a_missing_variable_is_named(tmp_path):
    data = {"mcpServers": {"gh": {"command": "srv", "env": {"TOKEN": "${NOT_SET_ANYWHERE}"}}}}
    with pytest.raises(MCPConfigError, match=r"server 'gh': \"env.TOKEN\" uses \$\{NOT_SET_ANYWHERE\}"):
        servers_from_config(data, environ={})


@pytest.mark.parametrize(
    "data, message",
    [
        ("{not json", r"not valid JSON \(line 1"),
        ({"servers": {}}, 'expected an object with an "mcpServers" object'),
        ({"mcpServers": {"a": []}}, "server 'a': expected an object"),
        ({"mcpServers": {"a": {}}}, "server 'a': needs \"command\""),
        ({"mcpServers": {"a": {"command": "x", "url": "http://h"}}}, "not both"),
        ({"mcpServers": {"a": {"command": "x", "args": "--flag"}}}, '"args" must be a list'),
        ({"mcpServers": {"a": {"command": "x", "env": {"K": ["v"]}}}}, '"env" must be an object of strings'),
        ({"mcpServers": {"a": {"url": "ftp://h"}}}, "http:// or https://"),
        ({"mcpServers": {"a": {"url": "http://h", "type": "websocket"}}}, '"type" must be'),
        ({"mcpServers": {"a": {"command": "x", "timeout": -1}}}, '"timeout" must be a positive number'),
        ({"mcpServers": {"a": {"command": "x", "maxOutputChars": 0}}}, '"maxOutputChars" must be a positive integer'),
        ({"mcpServers": {"a": {"url": "http://h", "maxOutputChars": 2.5}}}, '"maxOutputChars" must be a positive'),
        ({"mcpServers": {"a": {"command": "x", "maxOutputChars": True}}}, '"maxOutputChars" must be a positive'),
        # valid JSON for Python's reader; a wait that long fails with a bare OverflowError
        ({"mcpServers": {"a": {"command": "x", "timeout": float("nan")}}}, '"timeout" must be a positive number'),
        ({"mcpServers": {"a": {"command": "x", "timeout": float("inf")}}}, '"timeout" must be a positive number'),
        ({"mcpServers": {"a": {"command": "x", "timeout": 1e10}}}, r'"timeout" .* \(at most 9223372036\)'),
        ({"mcpServers": {"a": {"command": "${AGENTCORE_MCP_TEST_UNSET:-}"}}}, '"command" is empty once its'),
        ({"mcpServers": {"a": {"url": "http://[::1/mcp"}}}, '"url" has a host or port that cannot be read'),
        ({"mcpServers": {"a": {"url": "http://h:99999/mcp"}}}, '"url" has a host or port that cannot be read'),
    ],
)
def test_malformed_files_name_file_server_and_key(tmp_path, data, message):
    path = write(tmp_path, data)
    with pytest.raises(MCPConfigError, match=message) as info:
        load_config(path)
    assert str(path) in str(info.value)


def test_a_url_whose_password_has_a_slash_is_refused_without_showing_it(tmp_path):
    path = write(tmp_path, {"mcpServers": {"a": {"url": "http://user:s3c/ret-9876@h/mcp"}}})
    with pytest.raises(MCPConfigError, match='"url" has a host or port that cannot be read') as info:
        load_config(path)
    assert "s3c" not in str(info.value)


def test_a_byte_order_mark_and_json_numbers_and_booleans_are_read_as_desktop_clients_do(tmp_path):
    path = tmp_path / "mcp.json"
    data = {"mcpServers": {"a": {"command": "x", "args": ["--port", 8080, 1.0, True], "env": {"DEBUG": False}}}}
    path.write_text("\ufeff" + json.dumps(data), encoding="utf-8")
    spec = load_config(path)["a"]._spec
    assert spec.args == ["--port", "8080", "1", "true"] and spec.env == {"DEBUG": "false"}


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(MCPConfigError, match="no such file"):
        load_config(tmp_path / "absent.json")


def test_timeout_and_prefix_extensions(tmp_path):
    path = write(
        tmp_path,
        {"mcpServers": {"a": {"command": "x", "timeout": 5, "prefix": ""}, "b": {"command": "y", "timeout": None}}},
    )
    servers = load_config(path)
    assert servers["a"].timeout == 5 and servers["a"].config_prefix == ""
    assert servers["b"].timeout is None and servers["b"].config_prefix == "b"


def test_max_output_chars_extension(tmp_path):
    path = write(
        tmp_path,
        {
            "mcpServers": {
                "a": {"command": "x", "maxOutputChars": 1000},
                "b": {"url": "http://h", "maxOutputChars": None},
                "c": {"command": "y"},
            }
        },
    )
    servers = load_config(path)
    assert servers["a"].max_output_chars == 1000 and servers["b"].max_output_chars is None
    assert servers["c"].max_output_chars == 50_000


# ----------------------------------------------------------------------------- secrets in args

# a server that prints its command line to stderr (as written and percent-decoded) and exits
ECHO_ARGV_AND_EXIT = (
    "import sys, urllib.parse; line = ' '.join(sys.argv[1:]); "
    "print(line, urllib.parse.unquote(line), file=sys.stderr); sys.exit(2)"
)
ARG_SECRETS = ("hunter2-pw", "p@ss/word", "p%40ss%2Fword", "qs-secret-77", "sk-argkey-123", "tok-arg-456", "pw-789")


def secret_args(path):
    return [
        str(path),
        "${PG_DSN}",
        "--db=mysql://admin:p%40ss%2Fword@db.example/app?sslkey=qs-secret-77",
        "--api-key",
        "sk-argkey-123",
        "--token=tok-arg-456",
        "--Password",
        "pw-789",
        "--verbose",
    ]


def test_credentials_in_args_stay_out_of_the_description_and_repr(tmp_path):
    data = {"mcpServers": {"pg": {"command": "npx", "args": ["-y", "@mcp/server-postgres", *secret_args(tmp_path)]}}}
    server = servers_from_config(data, environ={"PG_DSN": "postgresql://app:hunter2-pw@db.example/app"})["pg"]
    shown = server._spec.describe() + repr(server) + repr(server._spec)
    for secret in ARG_SECRETS:
        assert secret not in shown
    assert str(tmp_path) in shown and "@mcp/server-postgres" in shown and "--verbose" in shown
    assert "--api-key ***" in shown and "--token=***" in shown
    # the DSN came from ${PG_DSN}: a variable's value is a secret whole, not only its password
    assert f"{tmp_path} *** --db=mysql://admin:***@db.example/app" in shown


@pytest.mark.parametrize("command", ["python", "/nonexistent/mcp-server"])
def test_credentials_in_args_stay_out_of_connection_errors(tmp_path, command):
    import sys

    args = secret_args(tmp_path)
    if command == "python":  # starts, prints its arguments to stderr, exits at once
        command, args = sys.executable, ["-c", ECHO_ARGV_AND_EXIT, *args]
    data = {"mcpServers": {"pg": {"command": command, "args": args}}}
    server = servers_from_config(data, environ={"PG_DSN": "postgresql://app:hunter2-pw@db.example/app"})["pg"]
    with pytest.raises(MCPConnectionError, match="could not be started") as info:
        server.connect()
    server.close()
    message = str(info.value)
    for secret in ARG_SECRETS:
        assert secret not in message
    assert str(tmp_path) in message and "--api-key ***" in message
    if command == sys.executable:
        assert "its stderr ended with" in message and message.count("--token=***") == 3  # command line, stderr x2


def test_which_args_count_as_secrets():
    from agentcore_mcp._secrets import Secrets

    secrets = Secrets.of(
        args=[
            "run",
            "-e",
            "GITHUB_PERSONAL_ACCESS_TOKEN=ghp-abc123",  # docker run -e NAME=value
            "host=db.example password=libpq-secret",  # a libpq keyword DSN
            "--client-secret=two words",
            "--auth",
            "--no-color",  # an option after a secret one is not its value
            "https://example.com/sse?region=eu-west&sig=a%2Bb",
            "https://example.com/docs",
        ]
    )
    text = "ghp-abc123 libpq-secret two words eu-west a%2Bb a+b --no-color db.example https://example.com/docs"
    assert secrets.redact(text) == "*** *** *** *** *** *** --no-color db.example https://example.com/docs"


def test_values_of_variables_are_secrets_wherever_they_land(tmp_path):
    """A key moved out of the file into ${VAR} stays hidden in an argument no rule recognises
    (mcp-remote's "--header" "Authorization: Bearer ${TOKEN}", a positional key) and in a URL's
    path, in reprs and in the start error (command line and stderr alike)."""
    import sys

    environ = {"REMOTE_TOKEN": "sk-remote-0123456789", "TENANT_KEY": "tenant-0123456789", "HOME": "/home/me"}
    data = {
        "mcpServers": {
            "remote": {
                "command": sys.executable,
                "args": ["-c", ECHO_ARGV_AND_EXIT, "--header", "Authorization: Bearer ${REMOTE_TOKEN}", "${HOME}/x"],
            },
            "web": {"url": "http://127.0.0.1:9/t/${TENANT_KEY}/mcp"},
        }
    }
    servers = servers_from_config(data, environ=environ)
    shown = [repr(server) for server in servers.values()]
    for server in servers.values():
        with pytest.raises(MCPConnectionError, match="could not be started") as info:
            server.connect()
        server.close()
        shown.append(str(info.value))
    text = "\n".join(shown)
    assert "sk-remote-0123456789" not in text and "tenant-0123456789" not in text
    assert "Authorization: Bearer ***" in text and "http://127.0.0.1:9/t/***/mcp" in text
    assert "its stderr ended with" in shown[2] and "/home/me/x" in shown[2]  # HOME is no secret

"""``load_config(path)``: the ``{"mcpServers": {...}}`` JSON that desktop assistants and editors use.

    {"mcpServers": {
        "fs":     {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},
        "github": {"url": "https://api.example.com/mcp",
                   "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"}}}}

An entry with ``command`` (and optional ``args``, ``env``, ``cwd``) is a stdio server; one with
``url`` (and optional ``headers``) an HTTP server (``"type": "sse"`` forces the old HTTP+SSE
transport, ``"http"``/``"streamable-http"`` Streamable HTTP; otherwise Streamable HTTP with a
fallback to SSE). ``${VAR}`` and ``${VAR:-default}`` in ``command``, ``args``, ``env``, ``cwd``,
``url`` and ``headers`` are replaced from the environment, so keys need not live in the file; the
value a variable brings in counts as a secret of that server wherever it lands (masked as ``***``
in reprs, errors and logs, like ``env`` and ``headers`` values), except the values of the variables
every stdio server gets anyway (``HOME``, ``PATH``, ``USER``, ``SHELL``, ``TERM``, ``LOGNAME``).
Numbers and booleans in ``args``, ``env`` and ``headers`` are passed as JSON writes them (``true``,
``8080``), as desktop clients pass them. The file may start with a UTF-8 byte-order mark.
``"disabled": true`` skips an entry. agentcore extensions: ``"timeout"`` (seconds per call),
``"prefix"`` (tool-name prefix used by the plugin's registry; default the server's name, ``""`` for
none), ``"maxOutputChars"`` (characters of text a tool result keeps, default 50,000, ``null`` for no
limit; ``"timeout"`` is at most about 290 years, ``null`` for no limit). Unknown keys are
ignored, as other clients do.
"""

from __future__ import annotations

import json
import os
import re
import threading
from typing import Any, Dict, Iterator, List, Mapping, Optional
from urllib.parse import urlsplit

from .errors import MCPConfigError
from .server import DEFAULT_MAX_OUTPUT_CHARS, DEFAULT_TIMEOUT, MCPServer, valid_max_output_chars, valid_timeout

__all__ = ["load_config", "servers_from_config"]

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
# variables whose values are no secret: every stdio server gets them (the SDK's safe environment)
_PUBLIC_VARS = frozenset({"HOME", "PATH", "USER", "SHELL", "TERM", "LOGNAME"})


def load_config(path: str | os.PathLike[str]) -> Dict[str, MCPServer]:
    """The servers of the config file at ``path``, by name, in file order; none started yet.

    Each :class:`MCPServer` starts on first use; close them when done (``with`` or ``close()``).
    Raises :class:`MCPConfigError` naming the file, the server and the key for a file that is
    missing, not JSON, or malformed (a value of the wrong type, a ``"command"`` that is empty once
    its variables are replaced, a ``"url"`` whose host or port cannot be read, a ``"timeout"``
    that is not a finite positive number), and for a ``${VAR}`` that is not set (the value of a
    set variable never appears in a message, nor in any later error, repr or log of the server).
    """
    where = os.fspath(path)
    try:
        with open(where, encoding="utf-8-sig") as fh:  # a BOM, as Windows editors write, is no error
            data = json.load(fh)
    except FileNotFoundError:
        raise MCPConfigError(f"MCP config {where}: no such file") from None
    except json.JSONDecodeError as exc:
        raise MCPConfigError(
            f"MCP config {where}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise MCPConfigError(f"MCP config {where}: cannot be read ({exc})") from None
    return servers_from_config(data, source=where)


def servers_from_config(
    data: Any, *, source: str = "<config>", environ: Optional[Mapping[str, str]] = None
) -> Dict[str, MCPServer]:
    """Like :func:`load_config` for already-parsed JSON ``data``."""
    env = os.environ if environ is None else environ
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers"), dict):
        raise MCPConfigError(f'MCP config {source}: expected an object with an "mcpServers" object')
    servers: Dict[str, MCPServer] = {}
    for name, entry in data["mcpServers"].items():
        where = f"MCP config {source}: server {name!r}"
        if not isinstance(entry, dict):
            raise MCPConfigError(f"{where}: expected an object, got {type(entry).__name__}")
        if entry.get("disabled") is True:
            continue
        server = _server(name, entry, where, env)
        server.config_prefix = _prefix(name, entry, where)  # type: ignore[attr-defined]
        servers[name] = server
    return servers


def _server(name: str, entry: Dict[str, Any], where: str, environ: Mapping[str, str]) -> MCPServer:
    # the values the entry's ${VAR}s bring in: secrets of the server wherever they land (a token
    # in "args" such as "Authorization: Bearer ${TOKEN}", a key in a URL's path)
    env = _Environ(environ)
    timeout = entry.get("timeout", DEFAULT_TIMEOUT)
    if timeout is not None and not valid_timeout(timeout):
        raise MCPConfigError(
            f'{where}: "timeout" must be a positive number of seconds (at most {threading.TIMEOUT_MAX:.0f}) '
            f"or null for no limit, not {timeout!r}"
        )
    max_chars = entry.get("maxOutputChars", DEFAULT_MAX_OUTPUT_CHARS)
    if not valid_max_output_chars(max_chars):
        raise MCPConfigError(f'{where}: "maxOutputChars" must be a positive integer or null, not {max_chars!r}')
    kind = entry.get("type", entry.get("transport"))
    if "command" in entry and "url" in entry:
        raise MCPConfigError(f'{where}: give either "command" (stdio) or "url" (HTTP), not both')
    if "command" in entry:
        if kind not in (None, "stdio"):
            raise MCPConfigError(f'{where}: "type" {kind!r} does not go with "command"')
        command = _expanded_string(entry["command"], "command", where, env)
        args = entry.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, (str, int, float)) for a in args):
            raise MCPConfigError(f'{where}: "args" must be a list of strings')
        cwd = entry.get("cwd")
        return MCPServer.stdio(
            command,
            [_expand(_text(a), "args", where, env) for a in args],
            env=_mapping(entry.get("env"), "env", where, env),
            cwd=None if cwd is None else _expanded_string(cwd, "cwd", where, env),
            name=name,
            timeout=timeout,
            max_output_chars=max_chars,
            secrets=env.used,
        )
    if "url" in entry:
        transport = {
            None: "auto",
            "http": "streamable-http",
            "streamable-http": "streamable-http",
            "streamableHttp": "streamable-http",
            "sse": "sse",
        }.get(kind)
        if transport is None:
            raise MCPConfigError(
                f'{where}: "type" must be "http", "streamable-http" or "sse" for a "url", not {kind!r}'
            )
        url = _expanded_string(entry["url"], "url", where, env)
        try:
            urlsplit(url).port  # noqa: B018 - reads host and port; raises for what no client can reach
        except ValueError:  # its text may quote a password: not shown
            raise MCPConfigError(
                f'{where}: "url" has a host or port that cannot be read (percent-encode a "/", "@" or '
                '":" in a user name or password)'
            ) from None
        try:
            return MCPServer.http(
                url,
                _mapping(entry.get("headers"), "headers", where, env),
                name=name,
                transport=transport,
                timeout=timeout,
                max_output_chars=max_chars,
                secrets=env.used,
            )
        except ValueError as exc:
            raise MCPConfigError(f"{where}: {exc}") from None
    raise MCPConfigError(f'{where}: needs "command" (a stdio server) or "url" (an HTTP server)')


def _prefix(name: str, entry: Dict[str, Any], where: str) -> str:
    prefix = entry.get("prefix", name)
    if not isinstance(prefix, str):
        raise MCPConfigError(f'{where}: "prefix" must be a string')
    return prefix


def _string(value: Any, key: str, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise MCPConfigError(f'{where}: "{key}" must be a non-empty string')
    return value


def _expanded_string(value: Any, key: str, where: str, env: Mapping[str, str]) -> str:
    """A non-empty string, its ``${VAR}``s replaced; still non-empty afterwards."""
    text = _expand(_string(value, key, where), key, where, env)
    if not text:
        raise MCPConfigError(f'{where}: "{key}" is empty once its ${{VAR}}s are replaced')
    return text


def _text(value: Any) -> str:
    """A JSON string, number or boolean as JSON writes it (and a desktop client passes it)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _mapping(value: Any, key: str, where: str, env: Mapping[str, str]) -> Optional[Dict[str, str]]:
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(v, (str, int, float, bool)) for v in value.values()):
        raise MCPConfigError(f'{where}: "{key}" must be an object of strings')
    return {str(k): _expand(_text(v), f"{key}.{k}", where, env) for k, v in value.items()}


def _expand(text: str, key: str, where: str, env: Mapping[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        var, default = match.group(1), match.group(2)
        if var in env:
            return env[var]
        if default is not None:
            return default
        raise MCPConfigError(f'{where}: "{key}" uses ${{{var}}}, which is not set in the environment')

    return _VAR.sub(replace, text)


class _Environ(Mapping[str, str]):
    """The environment as ``_expand`` reads it, noting the values it hands out in ``used``
    (those of :data:`_PUBLIC_VARS` excepted)."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ
        self.used: List[str] = []

    def __getitem__(self, key: str) -> str:
        value = self._environ[key]
        if key not in _PUBLIC_VARS:
            self.used.append(value)
        return value

    def __contains__(self, key: object) -> bool:
        return key in self._environ

    def __iter__(self) -> Iterator[str]:
        return iter(self._environ)

    def __len__(self) -> int:
        return len(self._environ)

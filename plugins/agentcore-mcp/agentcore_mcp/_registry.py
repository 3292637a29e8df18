"""The servers started from config files for the tool registry and the CLI (process-wide).

Process-wide state (owner: this module): ``_loaded``, one entry per config file path, holding the
started servers and their tools, so that rebuilding the tool registry (another plugin manager,
``reset_plugins()``) never starts a server twice. Servers are closed at interpreter exit
(``atexit``) or by :func:`close_all`, which tests call to reset.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List

from .config import load_config
from .server import MCPServer, close_servers

_log = logging.getLogger("agentcore_mcp")

_lock = threading.Lock()
_loaded: Dict[str, _Loaded] = {}
_atexit_registered = False


@dataclass
class _Loaded:
    servers: Dict[str, MCPServer] = field(default_factory=dict)
    tools: List[Any] = field(default_factory=list)
    errors: Dict[str, str] = field(default_factory=dict)


def config_tools(path: str) -> List[Any]:
    """The tools of the servers in config file ``path``, starting them on the first call.

    Raises :class:`~agentcore_mcp.MCPConfigError` for a malformed file; a server that fails to
    start is skipped with a ``RuntimeWarning`` naming it (and retried on a later call).
    """
    global _atexit_registered
    key = os.path.abspath(os.path.expanduser(path))
    with _lock:
        loaded = _loaded.get(key)
        if loaded is None or loaded.errors:
            loaded = _loaded[key] = _load(key, loaded)
            if not _atexit_registered:
                atexit.register(close_all)
                _atexit_registered = True
        return list(loaded.tools)


def _load(path: str, previous: _Loaded | None) -> _Loaded:
    servers = load_config(path)
    loaded = _Loaded()
    if previous is not None:  # keep what started last time; retry only the failures
        for name, server in previous.servers.items():
            if name not in previous.errors and name in servers:
                servers[name] = server
    results: Dict[str, Any] = {}

    def start(name: str, server: MCPServer) -> None:
        try:
            results[name] = server.tools(prefix=getattr(server, "config_prefix", name) or None)
        except Exception as exc:  # noqa: BLE001 - isolated per server
            results[name] = exc

    threads = [
        threading.Thread(target=start, args=item, name=f"agentcore-mcp-start-{item[0]}", daemon=True)
        for item in servers.items()
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    owners: Dict[str, str] = {}  # tool name -> the server whose tool has it
    for name, server in servers.items():
        outcome = results.get(name)
        loaded.servers[name] = server
        if isinstance(outcome, list):
            loaded.tools.extend(_unique(outcome, name, owners, path))
            continue
        loaded.errors[name] = str(outcome)
        server.close()
        warnings.warn(f"agentcore-mcp: {path}: server {name!r} skipped: {outcome}", RuntimeWarning, stacklevel=2)
    return loaded


def _unique(tools: List[Any], server: str, owners: Dict[str, str], path: str) -> List[Any]:
    """``tools`` without the names another server's tools took (an agent needs unique names,
    and the registry would keep one silently); one warning per server whose tools are dropped."""
    kept: List[Any] = []
    dropped: Dict[str, List[str]] = {}
    for tool in tools:
        owner = owners.setdefault(tool.name, server)
        if owner == server:
            kept.append(tool)
        else:
            dropped.setdefault(owner, []).append(tool.name)
    for owner, names in dropped.items():
        warnings.warn(
            f"agentcore-mcp: {path}: {_names(names)} of server {server!r} skipped: server {owner!r} "
            f'has {_those(names)}; give one of them a "prefix"',
            RuntimeWarning,
            stacklevel=3,
        )
    return kept


def _names(names: List[str]) -> str:
    return f"tool {names[0]!r}" if len(names) == 1 else "tools " + ", ".join(map(repr, names))


def _those(names: List[str]) -> str:
    return "a tool of that name" if len(names) == 1 else "tools of those names"


def unique_across(configs: List[List[Any]], paths: List[str]) -> List[Any]:
    """The tools of several config files in order, a name taken by an earlier file skipped with
    a warning (the same file twice adds nothing)."""
    tools: List[Any] = []
    owners: Dict[str, str] = {}  # tool name -> the config file it came from
    for path, config in zip(paths, configs):
        dropped: Dict[str, List[str]] = {}
        for tool in config:
            if any(tool is kept for kept in tools):
                continue
            owner = owners.setdefault(tool.name, path)
            if owner == path:
                tools.append(tool)
            else:
                dropped.setdefault(owner, []).append(tool.name)
        for owner, names in dropped.items():
            warnings.warn(
                f"agentcore-mcp: {path}: {_names(names)} skipped: {owner} has {_those(names)}; "
                'give the servers a "prefix"',
                RuntimeWarning,
                stacklevel=3,
            )
    return tools


def close_all() -> None:
    """Close every server started from a config file (all at once, see
    :func:`~agentcore_mcp.server.close_servers`) and forget them."""
    with _lock:
        loaded = list(_loaded.values())
        _loaded.clear()
    # all at once: at exit (Ctrl+C) the wait is the slowest server's, not the sum of them all
    close_servers([server for entry in loaded for server in entry.servers.values()])

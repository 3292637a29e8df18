"""The CLI's plugin hooks: :func:`~agentcore.hookspecs.add_cli_options` and
:func:`~agentcore.hookspecs.cli_tools`, called on the default plugin manager.

Each implementation is called on its own, in plugin registration order, so that one failing plugin
neither hides the others' options nor crashes the parser: a failing ``add_cli_options`` is reported
as a :class:`~agentcore.plugins.PluginLoadWarning` naming the plugin; a failing ``cli_tools`` (or one
returning something other than a list of tools) raises :class:`~agentcore.cli._setup.UsageError`
naming the plugin (exit status 2). An ``async def`` implementation is run to completion on the
calling thread, as for every other hook.
"""

from __future__ import annotations

import argparse
from typing import Any, Dict, Iterable, List

from ._setup import UsageError

__all__ = ["add_plugin_options", "plugin_tools"]


def _impls(hook_name: str) -> List[Any]:
    from ..plugins import default_plugin_manager

    # registration order (built-ins, then entry points), the order the hookspecs promise
    return default_plugin_manager()._impls_by_registration(hook_name)


def _call(impl: Any, kwargs: Dict[str, Any]) -> Any:
    """The implementation's result; an ``async def`` one's coroutine is run to completion, as the
    hookspecs promise for every hook (pluggy's own calls are not used here)."""
    from .._util import awaited

    return awaited(impl.function(*[kwargs[name] for name in impl.argnames]))


def add_plugin_options(parser: argparse.ArgumentParser, command: str) -> None:
    """Let every plugin add its options to ``parser`` (the ``command`` sub-command's parser)."""
    from .._plugin_loading import warn_once
    from .._safe import describe_exception

    for impl in _impls("add_cli_options"):
        try:
            _call(impl, {"parser": parser, "command": command})
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not break the command
            # describe_exception, never str(exc): an exception whose __str__ raises must not break the parser
            message = f"agentcore: plugin {impl.plugin_name!r}: add_cli_options failed: {describe_exception(exc)}"
            warn_once(f"cli:{impl.plugin_name}:{command}:{message}", message)


def plugin_tools(args: Any, command: str, taken: Iterable[str] = ()) -> List[Any]:
    """The tools every plugin's ``cli_tools(args, command)`` supplies, concatenated in plugin
    registration order. Raises UsageError naming the plugin when one raises or returns something
    other than None or a list of tools, or a tool whose name is ``taken`` (a ``--tools`` tool's)
    or an earlier plugin's: an agent's tools need distinct names."""
    from .._safe import describe_exception

    tools: List[Any] = []
    owners: Dict[str, str] = {tool: "--tools" for tool in taken}
    for impl in _impls("cli_tools"):
        name = impl.plugin_name
        try:
            result = _call(impl, {"args": args, "command": command})
        except UsageError as exc:
            raise UsageError(f"plugin {name!r}: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - reported as a usage/configuration error
            raise UsageError(f"plugin {name!r}: cli_tools failed: {describe_exception(exc)}") from None
        if result is None:
            continue
        if not isinstance(result, (list, tuple)) or not all(isinstance(getattr(t, "name", None), str) for t in result):
            raise UsageError(
                f"plugin {name!r}: cli_tools must return None or a list of AgentTool, got {type(result).__name__}"
            )
        this = f"plugin {name!r}"
        for tool in result:
            owner = owners.get(tool.name)
            if owner is not None:
                other = {"--tools": "a --tools tool", this: "another of its tools"}.get(owner, f"a tool of {owner}")
                raise UsageError(
                    f"plugin {name!r} adds a tool named {tool.name!r}, the name of {other}: an agent's tools "
                    "need distinct names; drop one, or rename the plugin's (an MCP server's \"prefix\", say)"
                )
            owners[tool.name] = this
            tools.append(tool)
    return tools

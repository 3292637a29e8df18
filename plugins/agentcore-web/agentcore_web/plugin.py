"""The agentcore plugin module named by the entry point ``agentcore = web = agentcore_web.plugin``.

Keep a plugin module cheap to import: agentcore imports it on first use of a registry, so heavy
imports belong inside the functions that need them.
"""

from __future__ import annotations

from typing import Any, Callable

from agentcore.hookspecs import hookimpl

from .fetch import create_fetch_url_tool


@hookimpl
def register_tools(register: Callable[[Any], None]) -> None:
    """Register the ``fetch_url`` tool with its default limits."""
    register(create_fetch_url_tool())

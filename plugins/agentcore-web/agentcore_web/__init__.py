"""agentcore-web: a ``fetch_url`` tool for agentcore agents (and the template for plugin authors).

Installing the distribution is enough: agentcore finds :mod:`agentcore_web.plugin` through the
``agentcore`` entry-point group and registers the tool, so ``Agent(tools=["fetch_url"])`` works.
"""

from __future__ import annotations

from .fetch import FetchError, create_fetch_url_tool, fetch_text
from .readable import html_to_text

__all__ = ["FetchError", "create_fetch_url_tool", "fetch_text", "html_to_text"]

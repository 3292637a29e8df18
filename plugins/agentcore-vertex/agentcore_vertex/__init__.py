"""agentcore-vertex: Google Vertex AI (api ``"google-vertex"``) for agentcore.

Installing the distribution registers the provider and the ``google-vertex/...`` models through
the ``agentcore`` entry point. The names below are for configuring it by hand (your own
credentials, a fixed project or location) and for tests. They load on first access, so loading
the plugin (which happens whenever agentcore first builds a registry) imports no wire code.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, List

if TYPE_CHECKING:
    from .auth import SCOPES, TokenSource, VertexAuthError
    from .provider import API, VertexConfigError, VertexProvider, endpoint_base, request_url

__all__ = [
    "API",
    "SCOPES",
    "TokenSource",
    "VertexAuthError",
    "VertexConfigError",
    "VertexProvider",
    "endpoint_base",
    "request_url",
]
_HOME = {"SCOPES": "auth", "TokenSource": "auth", "VertexAuthError": "auth"}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'agentcore_vertex' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_HOME.get(name, 'provider')}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(__all__))

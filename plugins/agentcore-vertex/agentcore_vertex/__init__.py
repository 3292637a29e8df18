"""agentcore-vertex: Google Vertex AI (api ``"google-vertex"``) for agentcore.

Installing the distribution registers the provider and the ``google-vertex/...`` models through
the ``agentcore`` entry point. The names below are for configuring it by hand (your own
credentials, a fixed project or location) and for tests.
"""

from .auth import SCOPES, TokenSource, VertexAuthError
from .provider import API, VertexConfigError, VertexProvider, endpoint_base, request_url

__all__ = [
    "API", "SCOPES", "TokenSource", "VertexAuthError", "VertexConfigError", "VertexProvider",
    "endpoint_base", "request_url",
]

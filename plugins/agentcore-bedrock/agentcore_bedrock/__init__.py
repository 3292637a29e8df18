"""agentcore-bedrock: Amazon Bedrock ConverseStream (api ``"bedrock-converse-stream"``) for agentcore.

Installing the distribution registers the provider and the ``amazon-bedrock`` models through the
``agentcore`` entry point; ``get_model("amazon-bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0")``
then works like any built-in model. Importing this package does not import botocore or requests.
"""

from __future__ import annotations

from .auth import BedrockConfigError, clear_credentials_cache
from .eventstream import EventStreamDecoder, EventStreamError, EventStreamMessage
from .models import bedrock_models
from .provider import API, BedrockProvider
from .request import build_request_body
from .stream_state import BedrockStreamException, map_stop_reason

__all__ = [
    "API",
    "BedrockProvider",
    "BedrockConfigError",
    "BedrockStreamException",
    "EventStreamDecoder",
    "EventStreamError",
    "EventStreamMessage",
    "bedrock_models",
    "build_request_body",
    "clear_credentials_cache",
    "map_stop_reason",
]

"""OpenTelemetry GenAI semantic-convention names and the mappings from agentcore's values.

Follows the current (development-status) GenAI conventions: ``gen_ai.provider.name`` (not the
older ``gen_ai.system``), ``gen_ai.usage.*`` token counts where input includes cached tokens,
``gen_ai.input.messages``/``gen_ai.output.messages``/``gen_ai.system_instructions`` as JSON strings
on spans for opt-in content, ``gen_ai.tool.call.arguments``/``gen_ai.tool.call.result`` on tool
spans, and the histograms ``gen_ai.client.token.usage``, ``gen_ai.client.operation.duration``,
``gen_ai.execute_tool.duration`` and ``gen_ai.invoke_agent.duration``. Pure data: no OpenTelemetry
import, so the entry-point module stays cheap.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Optional, Tuple
from urllib.parse import urlsplit

# --------------------------------------------------------------------------- attribute names

OPERATION_NAME = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_TEMPERATURE = "gen_ai.request.temperature"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
RESPONSE_ID = "gen_ai.response.id"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"
USAGE_CACHE_CREATION_INPUT_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
TOKEN_TYPE = "gen_ai.token.type"
AGENT_NAME = "gen_ai.agent.name"
AGENT_DESCRIPTION = "gen_ai.agent.description"
CONVERSATION_ID = "gen_ai.conversation.id"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_DESCRIPTION = "gen_ai.tool.description"
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT = "gen_ai.tool.call.result"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
ERROR_TYPE = "error.type"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"

#: agentcore's own attributes (no convention exists for cost): USD, from the models' price tables
#: (``Usage.cost.total``), per request on chat spans and summed over the run on the agent span.
COST_TOTAL = "agentcore.usage.cost"
TURNS = "agentcore.turns"
#: the ids of the calls a run left waiting for approval (it paused); on its agent span
APPROVAL_PENDING = "agentcore.approval.pending"
#: why a span links to another: the run resuming an approval pause links to the run that paused
LINK_REASON = "agentcore.link.reason"
LINK_APPROVAL_RESUME = "approval_resume"

OP_CHAT = "chat"
OP_INVOKE_AGENT = "invoke_agent"
OP_EXECUTE_TOOL = "execute_tool"

# --------------------------------------------------------------------------- metrics

METRIC_TOKEN_USAGE = "gen_ai.client.token.usage"
METRIC_OPERATION_DURATION = "gen_ai.client.operation.duration"
METRIC_TOOL_DURATION = "gen_ai.execute_tool.duration"
METRIC_AGENT_DURATION = "gen_ai.invoke_agent.duration"

#: The conventions' advised bucket boundaries.
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)

# --------------------------------------------------------------------------- value mappings

#: agentcore provider names -> the conventions' well-known ``gen_ai.provider.name`` values;
#: any other provider name is reported as it is.
_PROVIDERS: Dict[str, str] = {
    "openai": "openai",
    "anthropic": "anthropic",
    "google": "gcp.gemini",
    "google-gemini-cli": "gcp.gemini",
    "google-vertex": "gcp.vertex_ai",
    "amazon-bedrock": "aws.bedrock",
    "azure-openai": "azure.ai.openai",
    "azure-openai-responses": "azure.ai.openai",
    "xai": "x_ai",
    "groq": "groq",
    "mistral": "mistral_ai",
    "deepseek": "deepseek",
    "cohere": "cohere",
    "perplexity": "perplexity",
}

#: agentcore stop reasons -> the output-message schema's ``finish_reason`` values.
_FINISH_REASONS: Dict[str, str] = {
    "stop": "stop",
    "length": "length",
    "toolUse": "tool_call",
    "error": "error",
    "aborted": "aborted",
}

#: ``error.type`` of a run, model request or tool call that was aborted.
ERROR_ABORTED = "aborted"
#: ``error.type`` of a tool call that ended with an error result (agentcore keeps no exception).
ERROR_TOOL = "tool_error"
#: ``error.type`` when nothing more specific is known (the conventions' fallback value).
ERROR_OTHER = "_OTHER"

_STATUS_PREFIX = re.compile(r"^(?:Server requested .*?\)\. )?([1-5]\d\d)\b")


_SURROGATE = re.compile("[\ud800-\udfff]")


def clean(value: Any) -> str:
    """``str(value)`` as text every exporter can encode: a surrogate pair joined into its
    character, a lone surrogate (a non-UTF-8 file name, half of an emoji a provider split) written
    as its JSON escape (``\\udcff``). Such a ``str`` fails UTF-8 encoding: the OTLP exporter drops
    an attribute holding one, and a span name or status description holding one fails the export
    of the whole batch."""
    text = value if isinstance(value, str) else str(value)
    if _SURROGATE.search(text) is None:
        return text
    joined = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")  # pairs -> characters
    return joined.encode("utf-8", "backslashreplace").decode("utf-8")  # lone ones -> \\udcff


def provider_name(provider: Optional[str]) -> str:
    """The ``gen_ai.provider.name`` value for an agentcore ``Model.provider``."""
    if not provider:
        return "unknown"
    return _PROVIDERS.get(provider) or clean(provider)


def finish_reason(stop_reason: Optional[str]) -> str:
    """The ``finish_reason`` value for an agentcore stop reason (unknown ones pass unchanged)."""
    return _FINISH_REASONS.get(stop_reason or "", stop_reason or "unknown")


def error_type(stop_reason: Optional[str], error_message: Optional[str]) -> Optional[str]:
    """``error.type`` for a finished response: None when it did not fail, ``"aborted"`` for an
    abort, the HTTP status (``"500"``) when agentcore's provider error text starts with one, else
    ``"_OTHER"``."""
    if stop_reason == "aborted":
        return ERROR_ABORTED
    if stop_reason != "error":
        return None
    match = _STATUS_PREFIX.match(error_message or "")
    return match.group(1) if match else ERROR_OTHER


def server_attributes(base_url: Optional[str]) -> Dict[str, Any]:
    """``server.address``/``server.port`` from a model's base URL (host and port only: never the
    user-info, path or query, where credentials may live)."""
    if not base_url:
        return {}
    try:
        parts = urlsplit(base_url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return {}
    if not host:
        return {}
    if port is None:
        port = {"https": 443, "http": 80}.get(parts.scheme)
    out: Dict[str, Any] = {SERVER_ADDRESS: host}
    if port is not None:
        out[SERVER_PORT] = port
    return out


def input_tokens(usage: Any) -> int:
    """Input tokens as the conventions count them: cached (read and written) tokens included
    (agentcore's ``Usage.input`` counts uncached prompt tokens only)."""
    return int(usage.input or 0) + int(usage.cache_read or 0) + int(usage.cache_write or 0)


def usage_attributes(usage: Any) -> Dict[str, Any]:
    """The ``gen_ai.usage.*`` attributes of one :class:`agentcore.Usage` (or a run's total)."""
    out: Dict[str, Any] = {
        USAGE_INPUT_TOKENS: input_tokens(usage),
        USAGE_OUTPUT_TOKENS: int(usage.output or 0),
    }
    if usage.cache_read:
        out[USAGE_CACHE_READ_INPUT_TOKENS] = int(usage.cache_read)
    if usage.cache_write:
        out[USAGE_CACHE_CREATION_INPUT_TOKENS] = int(usage.cache_write)
    return out


def model_attributes(model: Any) -> Tuple[str, Dict[str, Any]]:
    """``(model id, attributes)`` identifying the request model of ``model`` (an agentcore
    ``Model``): provider name, request model and server address/port."""
    model_id = clean(getattr(model, "id", "") or "unknown")
    attrs: Dict[str, Any] = {
        PROVIDER_NAME: provider_name(getattr(model, "provider", None)),
        REQUEST_MODEL: model_id,
    }
    attrs.update(server_attributes(getattr(model, "base_url", None)))
    return model_id, attrs

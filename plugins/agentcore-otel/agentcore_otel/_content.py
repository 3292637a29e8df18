"""Opt-in content capture: agentcore messages as the GenAI conventions' message JSON, and the
redaction of secrets from every string the instrumentation records.

Messages follow the conventions' input/output message schemas (``{"role", "parts": [...]}``
with ``text``, ``reasoning``, ``tool_call`` and ``tool_call_response`` parts); images become a
generic ``image`` part with their MIME type and size, never the data. Everything is recorded as a
JSON string (span attributes cannot hold structured values in the Python SDK).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set

from agentcore.messages import DROP, LLM_ROLES, convert_message
from agentcore.tools import result_blocks

from ._semconv import clean

#: Longest captured attribute value (characters); longer JSON is cut and marked.
MAX_CONTENT_CHARS = 16384
#: Values shorter than this are not treated as secrets (too likely to collide with real text).
_MIN_SECRET_LEN = 8
#: Environment variables whose values are secrets (API keys a provider reads from the environment).
_SECRET_ENV = re.compile(r"(API_?KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL)", re.IGNORECASE)
REDACTED = "[REDACTED]"


class Redactor:
    """Replaces known secret strings (API keys, header values) with ``[REDACTED]``.

    The secrets of one run: the agent's ``api_key``, its ``headers`` and its model's ``headers``
    values (and the part after ``Bearer``), and the values of environment variables named like
    keys (``*_API_KEY``, ``*TOKEN*``, ``*SECRET*``, ...), where providers find their keys.
    The agent's values are taken when the run starts, the environment is read on first use (most
    runs record no free text at all, so most never pay for it), a variable another thread removes
    meanwhile left out. Secrets shorter than 8 characters are ignored. A call raises only if the
    secrets could not be collected (nothing is then recorded from that text, and the next call
    collects again): it never returns a text it could not redact.
    """

    __slots__ = ("_sources", "_secrets")

    def __init__(self, sources: Iterable[Any], environment: bool = False) -> None:
        self._sources: Optional[List[Any]] = list(sources) + ([os.environ] if environment else [])
        self._secrets: List[str] = []

    @classmethod
    def for_agent(cls, agent: Any) -> Redactor:
        found: List[Any] = [getattr(agent, "api_key", None)]
        found.extend(_header_values(getattr(agent, "headers", None)))
        model = getattr(getattr(agent, "state", None), "model", None)
        found.extend(_header_values(getattr(model, "headers", None)))
        return cls(found, environment=True)

    def _collect(self) -> List[str]:
        found: List[Any] = []
        for source in self._sources or ():
            if source is os.environ:
                found.extend(_environment_secrets())
            else:
                found.append(source)
        for value in list(found):  # "Bearer <key>" headers: the key alone too
            if isinstance(value, str) and " " in value:
                found.append(value.split(" ", 1)[1])
        from agentcore.providers.failures import secret_forms

        # every form a text may show a secret in: stripped (a key read from a file keeps its
        # newline), repr- and JSON-escaped (content is redacted after json.dumps, where a quote or
        # backslash in the key is escaped), ensure_ascii=False JSON included
        unique: Set[str] = set()
        for value in found:
            if isinstance(value, str):
                unique.update(secret_forms(value))
                unique.add(json.dumps(value, ensure_ascii=False)[1:-1])
        return sorted((s for s in unique if len(s) >= _MIN_SECRET_LEN), key=len, reverse=True)  # longest first

    def __call__(self, text: str) -> str:
        if self._sources is not None:
            self._secrets = self._collect()
            self._sources = None  # collected: only now (a failure above must not turn redaction off)
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text


def _environment_secrets() -> List[str]:
    """The values of the environment variables named like keys. ``os.environ.items()`` raises
    KeyError for a variable another thread removes while it runs; the keys are read as one
    snapshot here (``os.environ`` copies them) and a value gone meanwhile is skipped."""
    environ = os.environ
    found: List[str] = []
    for key in list(environ):
        if _SECRET_ENV.search(key):
            value = environ.get(key)
            if value is not None:
                found.append(value)
    return found


def _header_values(headers: Any) -> List[Any]:
    if not isinstance(headers, dict):
        return []
    return list(headers.values())


def to_json(value: Any, redact: Redactor) -> str:
    """``value`` as compact JSON (non-JSON values as their ``str``), redacted and capped; lone
    surrogates are written as JSON escapes (see :func:`~agentcore_otel._semconv.clean`), so the
    text stays valid JSON of the same value and every exporter can encode it."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=_fallback)
    except (TypeError, ValueError):  # circular structures, NaN checks of exotic types
        text = json.dumps(_fallback(value))
    return _cap(clean(redact(text)))


def _fallback(value: Any) -> str:
    try:
        return str(value)
    except Exception:  # noqa: BLE001 - a value whose str() raises is still recorded
        return f"<{type(value).__name__}>"


def _cap(text: str) -> str:
    if len(text) <= MAX_CONTENT_CHARS:
        return text
    return text[:MAX_CONTENT_CHARS] + f"...[truncated {len(text) - MAX_CONTENT_CHARS} chars]"


def _part(block: Any) -> Optional[Dict[str, Any]]:
    kind = getattr(block, "type", None)
    if kind == "text":
        return {"type": "text", "content": block.text}
    if kind == "thinking":
        if getattr(block, "redacted", False):
            return None
        return {"type": "reasoning", "content": block.thinking}
    if kind == "toolCall":
        return {"type": "tool_call", "id": block.id, "name": block.name, "arguments": block.arguments}
    if kind == "image":
        return {"type": "image", "mime_type": block.mime_type, "size": len(block.data or "")}
    if isinstance(block, str):
        return {"type": "text", "content": block}
    return {"type": str(kind or type(block).__name__)}


def _parts(content: Any) -> List[Dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    parts = (_part(b) for b in (content or ()))
    return [p for p in parts if p is not None]


def result_text(content: Any) -> str:
    """The text of a tool result's content blocks (other blocks as ``[image]`` etc.).

    ``content`` is taken as agentcore reads ``AgentToolResult.content`` (a list of blocks, a
    ``str``, a single block, reference dict blocks); content agentcore rejects is described by
    agentcore's error text. Never raises."""
    if isinstance(content, str):
        return content
    try:
        blocks = result_blocks(content)
    except Exception as exc:  # noqa: BLE001 - the call is an error result saying the same
        return _fallback(exc)
    out: List[str] = []
    for block in blocks:
        text = getattr(block, "text", None)
        out.append(text if isinstance(text, str) else f"[{getattr(block, 'type', 'content')}]")
    return "\n".join(out)


def message_json(message: Any) -> Optional[Dict[str, Any]]:
    """One agentcore message in the conventions' chat-message shape, as the model is sent it: a
    message of another role (a compaction or branch summary, an application's ``custom`` message,
    a shell command the user ran) as the user message the Agent's default converter makes of it;
    None for one that converter leaves out (an unknown role, a command excluded from context). A
    ``convert_to_llm`` hook's own changes are not seen here."""
    role = getattr(message, "role", None)
    if role not in LLM_ROLES:
        converted = convert_message(message)
        if converted is DROP or getattr(converted, "role", None) not in LLM_ROLES:
            return None
        message, role = converted, converted.role
    if role == "user":
        return {"role": "user", "parts": _parts(message.content)}
    if role == "assistant":
        return {"role": "assistant", "parts": _parts(message.content)}
    if role == "toolResult":
        return {
            "role": "tool",
            "parts": [
                {"type": "tool_call_response", "id": message.tool_call_id, "response": result_text(message.content)}
            ],
        }
    if role == "system":
        return {"role": "system", "parts": _parts(message.content)}
    return None


def input_messages(messages: Sequence[Any]) -> List[Dict[str, Any]]:
    """The conversation sent to the model (see :func:`message_json` for the other roles)."""
    out = (message_json(m) for m in messages)
    return [m for m in out if m is not None]


def output_messages(message: Any, finish_reason: str) -> List[Dict[str, Any]]:
    """The model's response as the conventions' output-message list (one choice)."""
    return [{"role": "assistant", "parts": _parts(message.content), "finish_reason": finish_reason}]


def system_instructions(system_prompt: Any) -> Optional[List[Dict[str, Any]]]:
    if not system_prompt:
        return None
    return [{"type": "text", "content": str(system_prompt)}]

"""Prompt-cache settings shared by the wire APIs (providers spec §18, the reference's ``cacheRetention``).

* :func:`cache_retention` resolves the ``cache_retention`` stream option: ``"none"`` (no cache
  breakpoints, no cache key, no session-affinity headers), ``"short"`` (the default: the
  provider's default cache lifetime) or ``"long"`` (Anthropic ``ttl: "1h"``, OpenAI
  ``prompt_cache_retention: "24h"``, where the model's compat allows it). When the option is not
  set, ``$AGENTCORE_CACHE_RETENTION`` gives the default (``$PI_CACHE_RETENTION=long``, the
  reference's variable, is honoured too). Any other value is a :class:`ValueError` naming it, so
  a typo ends the request with a clear error instead of silently caching differently.
* :func:`cache_session_id` is the ``session_id`` option (the reference's ``sessionId``: an
  ``Agent`` with a session sends the session's id) unless retention is ``"none"``.
* :func:`session_affinity_headers` are the headers that route a session's requests to the
  replica holding its cache, in one of the reference's ``sessionAffinityFormat`` styles.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Mapping, Optional

__all__ = [
    "CACHE_RETENTION_ENV",
    "CACHE_RETENTIONS",
    "cache_retention",
    "cache_session_id",
    "prompt_cache_key",
    "session_affinity_headers",
]

CACHE_RETENTION_ENV = "AGENTCORE_CACHE_RETENTION"
CACHE_RETENTIONS = ("none", "short", "long")
_REFERENCE_ENV = "PI_CACHE_RETENTION"


def cache_retention(options: Mapping[str, Any], env: Optional[Mapping[str, str]] = None) -> str:
    """``"none"``, ``"short"`` or ``"long"``: the option, else the environment, else ``"short"``.

    Raises ValueError for a value that is none of the three (option or variable)."""
    value = options.get("cache_retention")
    where = "cache_retention option"
    if value is None or value == "":
        env = os.environ if env is None else env
        value = (env.get(CACHE_RETENTION_ENV) or "").strip().lower()
        where = f"${CACHE_RETENTION_ENV}"
        if not value:
            return "long" if env.get(_REFERENCE_ENV) == "long" else "short"
    if value not in CACHE_RETENTIONS:
        raise ValueError(f"{where} is {value!r}: use one of {', '.join(repr(v) for v in CACHE_RETENTIONS)}")
    return str(value)


def cache_session_id(options: Mapping[str, Any], retention: str) -> Optional[str]:
    """The session id that keys provider-side caches, or None (no id, or retention "none")."""
    session_id = options.get("session_id")
    if retention == "none" or not session_id:
        return None
    return str(session_id)


PROMPT_CACHE_KEY_MAX_LENGTH = 64  # what OpenAI accepts for prompt_cache_key


def prompt_cache_key(session_id: Optional[str]) -> Optional[str]:
    """``session_id`` cut to the 64 characters OpenAI accepts as ``prompt_cache_key`` (the
    reference's ``clampOpenAIPromptCacheKey``; headers keep the whole id)."""
    return session_id[:PROMPT_CACHE_KEY_MAX_LENGTH] if session_id else None


def session_affinity_headers(session_id: Optional[str], style: Optional[str], *, affinity: bool) -> Dict[str, str]:
    """Session-affinity headers of ``style`` (the reference's ``sessionAffinityFormat``).

    ``"openai"`` (the default): ``session_id`` and ``x-client-request-id``; ``"openai-nosession"``:
    only ``x-client-request-id`` (for proxies that drop underscore headers); ``"openrouter"``:
    ``x-session-id``; ``"mistral"``: ``x-affinity`` (Mistral's KV-cache routing, what the
    reference's Mistral API sends). ``affinity`` adds ``x-session-affinity`` to the OpenAI styles
    (chat completions' ``sendSessionAffinityHeaders``). Nothing without a session id.
    """
    if not session_id:
        return {}
    if style == "openrouter":
        return {"x-session-id": session_id}
    if style == "mistral":
        return {"x-affinity": session_id}
    headers = {} if style == "openai-nosession" else {"session_id": session_id}
    headers["x-client-request-id"] = session_id
    if affinity:
        headers["x-session-affinity"] = session_id
    return headers

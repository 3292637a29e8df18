"""The built-in provider plugin: registers every wire API and every catalog model.

It goes through the same ``register_providers`` / ``register_models`` hooks a third-party plugin
uses (listed in :data:`agentcore.plugins.BUILTIN_PLUGINS`). Wire modules are imported only when the
provider registry is first built, never at ``import agentcore``.
"""

from __future__ import annotations

import importlib
import logging
import threading
from typing import Any, Callable, Dict, Optional, Tuple

from ..hookspecs import hookimpl

_log = logging.getLogger("agentcore.providers")

__all__ = ["BUILTIN_WIRE_APIS", "builtin_provider", "register_providers", "register_models"]

#: wire API -> (module, provider class). The class is instantiated without arguments.
BUILTIN_WIRE_APIS: Dict[str, Tuple[str, str]] = {
    "openai-completions": ("agentcore.providers.openai_completions", "OpenAICompletionsProvider"),
    "openai-responses": ("agentcore.providers.openai_responses", "OpenAIResponsesProvider"),
    "anthropic-messages": ("agentcore.providers.anthropic", "AnthropicProvider"),
    "google-generative-ai": ("agentcore.providers.google", "GoogleProvider"),
    "azure-openai-responses": ("agentcore.providers.azure", "AzureOpenAIResponsesProvider"),
}

_instances: Dict[str, Any] = {}
_lock = threading.Lock()


def builtin_provider(api: str) -> Optional[Any]:
    """The built-in provider object of ``api`` (created once), or None if there is none."""
    spec = BUILTIN_WIRE_APIS.get(api)
    if spec is None:
        return None
    with _lock:
        provider = _instances.get(api)
        if provider is None:
            module_name, class_name = spec
            provider = getattr(importlib.import_module(module_name), class_name)()
            _instances[api] = provider
    return provider


@hookimpl
def register_providers(register: Callable[[Any], None]) -> None:
    """Register the built-in wire APIs (:data:`BUILTIN_WIRE_APIS`)."""
    for api in BUILTIN_WIRE_APIS:
        try:
            provider = builtin_provider(api)
        except (ImportError, AttributeError) as exc:  # a partial installation: keep the others
            _log.warning("built-in provider for %r is unavailable: %s", api, exc)
            continue
        register(provider)


@hookimpl
def register_models(register: Callable[[Any], None]) -> None:
    """Register every model of the shipped catalog (``agentcore/data/models.json``).

    The catalog's own objects are registered (no copies: every plugin manager registers them, and
    copying 500+ models each time would dominate a short run). Copy before mutating one, e.g.
    ``dataclasses.replace(get_model("openai/gpt-4o"), base_url=...)``.
    """
    from .models import shared_catalog

    for model in shared_catalog():
        register(model)

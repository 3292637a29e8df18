"""The plugin registered through the ``agentcore`` entry point: the ``google-vertex`` provider and
the Vertex models of ``data/models.json``.

Loading it imports neither ``google.auth`` nor ``requests``; the provider imports them on its
first request.
"""

from __future__ import annotations

import json
import threading
from importlib import resources
from typing import Any, Callable, List, Optional

from agentcore import hookimpl

__all__ = ["register_providers", "register_models", "vertex_models"]

_provider: Optional[Any] = None
_models: Optional[List[Any]] = None
_lock = threading.Lock()


def _shared_provider() -> Any:
    """One provider per process, so the ADC token is fetched once and shared by every agent."""
    global _provider
    with _lock:
        if _provider is None:
            from .provider import VertexProvider

            _provider = VertexProvider()
        return _provider


def vertex_models() -> List[Any]:
    """The Vertex catalog as :class:`~agentcore.types.Model` objects (read once; copy before changing one)."""
    global _models
    with _lock:
        if _models is None:
            from agentcore.types import Model

            text = resources.files("agentcore_vertex").joinpath("data/models.json").read_text(encoding="utf-8")
            _models = [Model.from_dict(entry) for entry in json.loads(text)["models"]]
        return _models


@hookimpl
def register_providers(register: Callable[[Any], None]) -> None:
    """Register the ``google-vertex`` wire API."""
    register(_shared_provider())


@hookimpl
def register_models(register: Callable[[Any], None]) -> None:
    """Register every ``google-vertex/<id>`` model of the plugin's catalog."""
    for model in vertex_models():
        register(model)

"""The agentcore plugin module named by the entry point ``agentcore = bedrock = agentcore_bedrock.plugin``.

Registers the ``bedrock-converse-stream`` provider and the Amazon Bedrock models of the shipped
catalog (``agentcore_bedrock/models.json``), through the same hooks the built-in providers use.
Cheap to import: botocore is imported only when a request is signed.
"""

from __future__ import annotations

from typing import Any, Callable

from agentcore.hookspecs import hookimpl

from .models import bedrock_models
from .provider import BedrockProvider


@hookimpl
def register_providers(register: Callable[[Any], None]) -> None:
    """Register the ``bedrock-converse-stream`` wire API."""
    register(BedrockProvider())


@hookimpl
def register_models(register: Callable[[Any], None]) -> None:
    """Register every ``amazon-bedrock`` model of the shipped catalog."""
    for model in bedrock_models():
        register(model)

"""Azure OpenAI: the ``azure-openai-responses`` wire API, and chat completions on Azure deployments.

Both speak OpenAI's wire formats; only the endpoint, the deployment name and the credentials differ.
The Responses stream is parsed by :mod:`agentcore.providers.openai_responses` (this module only
builds the request), and chat completions stay the ``openai-completions`` API, whose provider asks
:func:`adapt_completions_request` to point a request at Azure when :func:`is_azure` says so.

Where a request goes (:func:`resolve_target`; the reference's variables and defaults):

* base URL: option ``azure_base_url`` > ``$AZURE_OPENAI_BASE_URL`` > option ``azure_resource_name`` /
  ``$AZURE_OPENAI_RESOURCE_NAME`` (``https://<name>.openai.azure.com/openai/v1``) > ``Model.base_url``;
  an Azure host given without a path (or with ``/openai``) gets ``/openai/v1``, or ``/openai`` under
  a dated ``api-version`` (the pre-v1 API, whose chat completions go to ``/deployments/<name>``);
* deployment: option ``azure_deployment_name`` > ``$AZURE_OPENAI_DEPLOYMENT_NAME_MAP`` (``model-id=
  deployment`` pairs, comma separated) > the model id; it is sent as the body's ``model`` (and, for
  chat completions under a base URL that is not a ``/v1`` one, in the ``/deployments/<name>`` path);
* ``api-version`` query: option ``azure_api_version`` > ``$AZURE_OPENAI_API_VERSION`` > ``"v1"``.

Credentials (:func:`auth_headers`): the key (``api_key=``, the agent's ``get_api_key``, or
``$AZURE_OPENAI_API_KEY``) goes in the ``api-key`` header; a Microsoft Entra ID access token (a JWT,
``eyJ...``, or a value starting with ``Bearer``) goes in ``Authorization: Bearer``. Option
``azure_auth`` (``"api-key"`` or ``"bearer"``) forces one. Keys never appear in errors, logs or
reprs: the skeleton redacts every credential header value from error messages.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional
from urllib.parse import quote, urlsplit, urlunsplit

from ..types import Model
from .base import ProviderError, WireRequest, describe_error, endpoint_url
from .openai_responses import OpenAIResponsesProvider, build_request_body

__all__ = [
    "API",
    "AZURE_PROVIDERS",
    "DEFAULT_API_VERSION",
    "AzureTarget",
    "AzureOpenAIResponsesProvider",
    "is_azure",
    "parse_deployment_map",
    "resolve_target",
    "auth_headers",
    "adapt_completions_request",
    "explain_failure",
]

API = "azure-openai-responses"
DEFAULT_API_VERSION = "v1"
#: Providers whose models are Azure deployments. ``azure-openai`` is the one for chat completions
#: (``api="openai-completions"``); any other provider says so with ``compat={"azure": True}``.
AZURE_PROVIDERS = frozenset({"azure-openai-responses", "azure-openai"})

_AZURE_HOST_SUFFIXES = (".openai.azure.com", ".cognitiveservices.azure.com", ".ai.azure.com")
_JWT = re.compile(r"^eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$")
_MISSING_BASE_URL = (
    "Azure OpenAI base URL is required: set AZURE_OPENAI_BASE_URL or AZURE_OPENAI_RESOURCE_NAME, "
    "or pass azure_base_url= or azure_resource_name=, or set Model.base_url"
)


def is_azure(model: Any) -> bool:
    """True for a model served by Azure OpenAI: an Azure provider, or ``compat["azure"]`` true."""
    if getattr(model, "provider", None) in AZURE_PROVIDERS:
        return True
    compat = getattr(model, "compat", None)
    return isinstance(compat, Mapping) and compat.get("azure") is True


@dataclass(frozen=True)
class AzureTarget:
    """Where one request goes: the normalised base URL, the deployment and the ``api-version``."""

    base_url: str
    deployment: str
    api_version: str
    auth: str = field(default="api-key")  # "api-key" | "bearer": how the credential is sent

    @property
    def resource(self) -> str:
        """The resource name (the first label of an Azure host), else the host, for messages."""
        host = urlsplit(self.base_url).hostname or self.base_url
        return host.split(".", 1)[0] if host.endswith(_AZURE_HOST_SUFFIXES) else host

    def url(self, path: str) -> str:
        """``<base>/<path>?api-version=<version>``."""
        return endpoint_url(self.base_url, f"{path.lstrip('/')}?api-version={quote(self.api_version, safe='')}")

    def completions_url(self) -> str:
        """Chat completions: ``<base>/chat/completions`` on a ``/v1`` base URL (the v1 API takes the
        deployment in the body), ``<base>/deployments/<deployment>/chat/completions`` on the older
        dated-version base URLs (``https://<name>.openai.azure.com/openai``)."""
        path = urlsplit(self.base_url).path.rstrip("/")
        if path.endswith("/v1") or "/deployments/" in path + "/":
            return self.url("chat/completions")
        return self.url(f"deployments/{quote(self.deployment, safe='')}/chat/completions")


def parse_deployment_map(text: Optional[str]) -> Dict[str, str]:
    """``"gpt-4o=prod-4o, gpt-5=gpt5"`` -> ``{"gpt-4o": "prod-4o", "gpt-5": "gpt5"}``.

    Entries without ``=`` or with an empty side are skipped, as the reference does.
    """
    mapping: Dict[str, str] = {}
    for entry in (text or "").split(","):
        model_id, sep, deployment = entry.strip().partition("=")
        if sep and model_id.strip() and deployment.strip():
            mapping[model_id.strip()] = deployment.strip()
    return mapping


def _is_v1(api_version: str) -> bool:
    """The v1 API family (``v1``, ``preview``, ``latest``) rather than a dated version."""
    return api_version.lower() in ("v1", "preview", "latest")


def _display(url: str) -> str:
    """``url`` for a message: without user info, query or fragment (they may carry credentials)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    return urlunsplit((parts.scheme, parts.netloc.rsplit("@", 1)[-1], parts.path, "", ""))


def _normalize_base_url(base_url: str, v1: bool) -> str:
    trimmed = base_url.strip().rstrip("/")
    try:
        parts = urlsplit(trimmed)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ProviderError(
            f"Invalid Azure OpenAI base URL: {_display(trimmed)!r} (expected https://<resource>.openai.azure.com)"
        )
    path = parts.path.rstrip("/")
    if parts.hostname.endswith(_AZURE_HOST_SUFFIXES) and path in ("", "/openai", "/openai/v1/responses"):
        return urlunsplit((parts.scheme, parts.netloc, "/openai/v1" if v1 else "/openai", "", ""))
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def _option(options: Mapping[str, Any], name: str) -> Optional[str]:
    value = options.get(name)
    return str(value).strip() if value else None


def resolve_target(
    model: Model, options: Mapping[str, Any], env: Optional[Mapping[str, str]] = None, credential: str = ""
) -> AzureTarget:
    """The :class:`AzureTarget` of ``model`` under ``options`` (see the module docstring).

    Raises :class:`ProviderError` naming the variables to set when no base URL can be found, or
    when the one found is not an http(s) URL.
    """
    env = os.environ if env is None else env
    api_version = (
        _option(options, "azure_api_version")
        or (env.get("AZURE_OPENAI_API_VERSION") or "").strip()
        or DEFAULT_API_VERSION
    )
    base_url = _option(options, "azure_base_url") or (env.get("AZURE_OPENAI_BASE_URL") or "").strip()
    if not base_url:
        resource = _option(options, "azure_resource_name") or (env.get("AZURE_OPENAI_RESOURCE_NAME") or "").strip()
        if resource:
            base_url = f"https://{resource}.openai.azure.com"
    base_url = base_url or (model.base_url or "").strip()
    if not base_url:
        raise ProviderError(_MISSING_BASE_URL)
    deployment = (
        _option(options, "azure_deployment_name")
        or parse_deployment_map(env.get("AZURE_OPENAI_DEPLOYMENT_NAME_MAP")).get(model.id)
        or model.id
    )
    return AzureTarget(
        _normalize_base_url(base_url, _is_v1(api_version)), deployment, api_version, _auth_kind(credential, options)
    )


def _auth_kind(credential: str, options: Mapping[str, Any]) -> str:
    forced = options.get("azure_auth")
    if forced is not None:
        kind = str(forced).strip().lower()
        if kind not in ("api-key", "bearer"):
            raise ProviderError(f'azure_auth must be "api-key" or "bearer", got {forced!r}')
        return kind
    if credential[:7].lower() == "bearer " or _JWT.match(credential):
        return "bearer"
    return "api-key"


def auth_headers(credential: Optional[str], options: Mapping[str, Any]) -> Dict[str, str]:
    """The credential header: ``api-key: <key>``, or ``Authorization: Bearer <token>`` for an Entra
    ID token (a JWT or ``"Bearer ..."``; option ``azure_auth`` forces either). Empty without one."""
    credential = (credential or "").strip()
    if not credential:
        return {}
    if _auth_kind(credential, options) == "bearer":
        token = credential[7:].strip() if credential[:7].lower() == "bearer " else credential
        return {"Authorization": f"Bearer {token}"}
    return {"api-key": credential}


def adapt_completions_request(
    request: WireRequest, model: Model, options: Mapping[str, Any], api_key: Optional[str]
) -> WireRequest:
    """Point an ``openai-completions`` request at the model's Azure deployment: Azure URL and
    ``api-version``, the deployment as the body's ``model``, the Azure credential header instead of
    the OpenAI bearer one. The body is otherwise the chat-completions body, without ``store``
    (dated api-versions before 2024-10 reject it) unless ``compat["supportsStore"]`` is true."""
    target = resolve_target(model, options, credential=api_key or "")
    headers = {k: v for k, v in request.headers.items() if k.lower() != "authorization"}
    headers.update(auth_headers(api_key, options))
    body = dict(request.body)
    body["model"] = target.deployment
    if (model.compat or {}).get("supportsStore") is not True:
        body.pop("store", None)
    return WireRequest(target.completions_url(), headers, body)


def explain_failure(exc: BaseException, model: Model, options: Mapping[str, Any], api_key: Optional[str]) -> str:
    """The error text of a failed Azure request; 401/403/404 name the resource and deployment.

    A wrong deployment name and a wrong resource both answer 404 and a wrong credential 401, with
    Azure's generic texts; naming what was used (never the key) says which knob to turn.
    """
    from . import http

    message = describe_error(exc)
    status = getattr(exc, "status", None) if isinstance(exc, http.ProviderHTTPError) else None
    if status not in (401, 403, 404):
        return message
    try:
        target = resolve_target(model, options, credential=api_key or "")
    except ProviderError:
        return message
    where = f'Azure OpenAI resource "{target.resource}" ({_display(target.base_url)}), deployment "{target.deployment}"'
    if status == 404:
        hint = (
            f"{where}, api-version {target.api_version}: check the deployment name "
            "(azure_deployment_name= or AZURE_OPENAI_DEPLOYMENT_NAME_MAP) and the resource"
        )
    else:
        sent = "an api-key header" if target.auth == "api-key" else "an Authorization: Bearer token"
        hint = (
            f"{where}: the credential was rejected (sent as {sent}); check AZURE_OPENAI_API_KEY, "
            'or for Microsoft Entra ID tokens pass them through get_api_key (azure_auth="bearer")'
        )
    return f"{message}\n{hint}"


class AzureOpenAIResponsesProvider(OpenAIResponsesProvider):
    """The ``azure-openai-responses`` provider registered by the built-in plugin.

    The request body is the Responses body of :func:`~agentcore.providers.openai_responses.
    build_request_body` with the deployment as ``model``; the stream is parsed by the same
    :class:`~agentcore.providers.openai_responses.ResponsesStreamState`.
    """

    api = API
    error_style = "openai"

    def build_request(self, model: Any, context: Any, options: Dict[str, Any], api_key: Optional[str]) -> WireRequest:
        target = resolve_target(model, options, credential=api_key or "")
        body = build_request_body(model, context, **options)
        body["model"] = target.deployment
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        headers.update(auth_headers(api_key, options))
        return WireRequest(target.url("responses"), headers, body)

    def describe_failure(
        self, exc: BaseException, model: Model, options: Dict[str, Any], api_key: Optional[str]
    ) -> str:
        return explain_failure(exc, model, options, api_key)

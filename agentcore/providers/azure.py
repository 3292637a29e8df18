"""Azure OpenAI: the ``azure-openai-responses`` wire API, and chat completions on Azure deployments.

Both speak OpenAI's wire formats; only the endpoint, the deployment name and the credentials differ.
The Responses stream is parsed by :mod:`agentcore.providers.openai_responses` (this module only
builds the request), and chat completions stay the ``openai-completions`` API, whose provider asks
:func:`adapt_completions_request` to point a request at Azure when :func:`is_azure` says so.

Where a request goes (:func:`resolve_target`; the reference's variables and defaults, except that an
option always wins over a variable):

* base URL: option ``azure_base_url`` > option ``azure_resource_name`` > ``$AZURE_OPENAI_BASE_URL`` >
  ``$AZURE_OPENAI_RESOURCE_NAME`` (a resource name gives ``https://<name>.openai.azure.com/openai/v1``)
  > ``Model.base_url``. An Azure host given without a path (or with ``/openai``) gets ``/openai/v1``,
  or ``/openai`` under a dated ``api-version`` (the pre-v1 API, whose chat completions go to
  ``/deployments/<name>``); an endpoint URL copied from the Azure portal (``.../chat/completions?
  api-version=...``, ``.../responses?api-version=...``) is cut back to its base URL, keeping its
  ``api-version``, and a deployment's URL (``.../openai/deployments/<name>/...``) to its resource's,
  ``<name>`` becoming the deployment (Responses requests too). Other query parameters of a base URL
  (a gateway's ``subscription-key``) are sent with every request. A resource name that is a URL or
  a host name, or holds characters no resource name has, is an error naming where it came from;
* deployment: option ``azure_deployment_name`` > the deployment of an Azure base URL's
  ``/openai/deployments/<name>`` > ``$AZURE_OPENAI_DEPLOYMENT_NAME_MAP`` (``model-id=
  deployment`` pairs, comma separated) > the model id; it is sent as the body's ``model`` (and, for
  chat completions under a base URL that is not a ``/v1`` one, in the ``/deployments/<name>`` path);
* ``api-version`` query: option ``azure_api_version`` > the ``api-version`` query of the base URL >
  ``$AZURE_OPENAI_API_VERSION`` > ``"v1"``.

Credentials (:func:`auth_headers`): the key (``api_key=``, the agent's ``get_api_key``, or
``$AZURE_OPENAI_API_KEY`` whatever the model's provider is called) goes in the ``api-key`` header;
a Microsoft Entra ID access token (a JWT, ``eyJ...``, or a value starting with ``Bearer``) goes in
``Authorization: Bearer``. Option ``azure_auth`` (``"api-key"`` or ``"bearer"``) forces one. Keys
never appear in errors, logs or reprs: the skeleton redacts every credential header value from
error messages.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple
from urllib.parse import SplitResult, parse_qsl, quote, unquote, urlsplit, urlunsplit

from ..types import Model
from .base import ProviderError, WireRequest, clean_api_key, describe_error, endpoint_url
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
#: Azure resource (custom subdomain) names: letters, digits and hyphens, starting with a letter or digit
_RESOURCE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,63}$")
#: Endpoint paths a URL copied from the portal ends in, after its base URL
_ENDPOINT_PATHS = ("/chat/completions", "/responses")
_DEPLOYMENT_PATH = re.compile(r"^/openai/deployments/([^/]+)$")
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

    def __repr__(self) -> str:  # a base URL's password or subscription-key query never shows
        from .._safe import redact_url

        return (
            f"AzureTarget(base_url={redact_url(self.base_url)!r}, deployment={self.deployment!r}, "
            f"api_version={self.api_version!r}, auth={self.auth!r})"
        )

    @property
    def resource(self) -> str:
        """The resource name (the first label of an Azure host), else the host, for messages."""
        host = urlsplit(self.base_url).hostname or self.base_url
        return host.split(".", 1)[0] if host.endswith(_AZURE_HOST_SUFFIXES) else host

    def url(self, path: str) -> str:
        """``<base>/<path>?api-version=<version>``, after the base URL's other query parameters."""
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
    """``url`` for a message: without user info, query or fragment (they may carry credentials);
    a password :func:`~agentcore._safe.redact_url` finds where URL parsers see none (one holding
    an unencoded ``/``, a URL missing its ``https://``) as ``***``."""
    from .._safe import redact_url

    try:
        parts = urlsplit(redact_url(url))
    except ValueError:
        return "<unparseable URL>"
    return urlunsplit((parts.scheme, parts.netloc.rsplit("@", 1)[-1], parts.path, "", ""))


def _split_base_url(base_url: str) -> SplitResult:
    """The parts of an http(s) base URL; :class:`ProviderError` for anything else."""
    trimmed = base_url.strip().rstrip("/")
    try:
        parts: Optional[SplitResult] = urlsplit(trimmed)
        valid = parts is not None and parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:  # an unparseable host or port
        parts, valid = None, False
    if parts is None or not valid:
        raise ProviderError(
            f"Invalid Azure OpenAI base URL: {_display(trimmed)!r} (expected https://<resource>.openai.azure.com)"
        )
    return parts


def _url_api_version(parts: SplitResult) -> Optional[str]:
    """The ``api-version`` query of a base URL (an endpoint URL copied from the portal has one)."""
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name.lower() == "api-version" and value.strip():
            return value.strip()
    return None


def _normalize_base_url(parts: SplitResult, v1: bool) -> Tuple[str, Optional[str]]:
    """The base URL of an Azure request, and the deployment its path names, if any.

    On an Azure host, a portal "target URI" loses its endpoint path, and a deployment's
    ``/openai/deployments/<name>`` becomes the resource's ``/openai`` (``/openai/v1``) with
    ``<name>`` returned: the deployment is the body's ``model`` (and the path of dated chat
    completions), whichever API the request is for."""
    path = parts.path.rstrip("/")
    deployment = None
    if (parts.hostname or "").endswith(_AZURE_HOST_SUFFIXES):
        base = next((path[: -len(e)] for e in _ENDPOINT_PATHS if path.endswith(e)), path)  # a portal "target URI"
        named = _DEPLOYMENT_PATH.match(base)
        if named:
            deployment, base = unquote(named.group(1)), "/openai"
        if base in ("", "/openai") or (base != path and base == "/openai/v1"):
            base = "/openai/v1" if v1 else "/openai"
        path = base
    return urlunsplit((parts.scheme, parts.netloc, path, _query_without_api_version(parts.query), "")), deployment


def _query_without_api_version(query: str) -> str:
    """A base URL's query without its ``api-version`` (sent from :attr:`AzureTarget.api_version`):
    a gateway's own parameters (API Management's ``subscription-key``) go with every request."""
    kept = [p for p in query.split("&") if p and p.partition("=")[0].strip().lower() != "api-version"]
    return "&".join(kept)


def _resource_base_url(resource: str, source: str) -> str:
    """``https://<resource>.openai.azure.com``; :class:`ProviderError` naming ``source`` when
    ``resource`` is a URL, a host name or no resource name at all."""
    if not _RESOURCE_NAME.match(resource):
        shown = _display(resource) if "://" in resource or "@" in resource else resource
        raise ProviderError(
            f"Invalid Azure OpenAI resource name from {source}: {shown!r} (expected the <name> of "
            "https://<name>.openai.azure.com; give a whole URL as azure_base_url= or AZURE_OPENAI_BASE_URL)"
        )
    return f"https://{resource}.openai.azure.com"


def _option(options: Mapping[str, Any], name: str) -> Optional[str]:
    value = options.get(name)
    return str(value).strip() if value else None


def resolve_target(
    model: Model, options: Mapping[str, Any], env: Optional[Mapping[str, str]] = None, credential: str = ""
) -> AzureTarget:
    """The :class:`AzureTarget` of ``model`` under ``options`` (see the module docstring).

    Raises :class:`ProviderError` naming the variables to set when no base URL can be found, when
    the one found is not an http(s) URL, or when a resource name is not one.
    """
    env = os.environ if env is None else env
    parts = _split_base_url(_find_base_url(model, options, env))
    api_version = (
        _option(options, "azure_api_version")
        or _url_api_version(parts)
        or (env.get("AZURE_OPENAI_API_VERSION") or "").strip()
        or DEFAULT_API_VERSION
    )
    base_url, url_deployment = _normalize_base_url(parts, _is_v1(api_version))
    deployment = (
        _option(options, "azure_deployment_name")
        or url_deployment
        or parse_deployment_map(env.get("AZURE_OPENAI_DEPLOYMENT_NAME_MAP")).get(model.id)
        or model.id
    )
    return AzureTarget(base_url, deployment, api_version, _auth_kind(credential, options))


def _find_base_url(model: Model, options: Mapping[str, Any], env: Mapping[str, str]) -> str:
    """The base URL as given: options first, then variables, then ``Model.base_url``."""
    base_url = _option(options, "azure_base_url")
    if base_url:
        return base_url
    resource = _option(options, "azure_resource_name")
    if resource:
        return _resource_base_url(resource, "azure_resource_name=")
    base_url = (env.get("AZURE_OPENAI_BASE_URL") or "").strip()
    if base_url:
        return base_url
    resource = (env.get("AZURE_OPENAI_RESOURCE_NAME") or "").strip()
    if resource:
        return _resource_base_url(resource, "AZURE_OPENAI_RESOURCE_NAME")
    base_url = (model.base_url or "").strip()
    if not base_url:
        raise ProviderError(_MISSING_BASE_URL)
    return base_url


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


def _credential(api_key: Optional[str]) -> str:
    """``api_key``, else ``$AZURE_OPENAI_API_KEY``, else "". The skeleton looked up the variables of
    the model's own provider: a model of another provider marked ``compat={"azure": True}`` (or
    served through another provider name) still finds the Azure key. :class:`ProviderError` (not
    showing the key) when the variable holds a line break."""
    if api_key:
        return api_key
    return clean_api_key(os.environ.get("AZURE_OPENAI_API_KEY"), "the AZURE_OPENAI_API_KEY variable") or ""


def adapt_completions_request(
    request: WireRequest, model: Model, options: Mapping[str, Any], api_key: Optional[str]
) -> WireRequest:
    """Point an ``openai-completions`` request at the model's Azure deployment: Azure URL and
    ``api-version``, the deployment as the body's ``model``, the Azure credential header instead of
    the OpenAI bearer one. The body is otherwise the chat-completions body, without ``store``
    (dated api-versions before 2024-10 reject it) unless ``compat["supportsStore"]`` is true."""
    credential = _credential(api_key)
    target = resolve_target(model, options, credential=credential)
    headers = {k: v for k, v in request.headers.items() if k.lower() != "authorization"}
    headers.update(auth_headers(credential, options))
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
        credential = _credential(api_key)
        target = resolve_target(model, options, credential=credential)
    except ProviderError:
        return message
    where = f'Azure OpenAI resource "{target.resource}" ({_display(target.base_url)}), deployment "{target.deployment}"'
    if status == 404:
        hint = (
            f"{where}, api-version {target.api_version}: check the deployment name "
            "(azure_deployment_name= or AZURE_OPENAI_DEPLOYMENT_NAME_MAP) and the resource"
        )
    elif not credential:
        hint = (
            f"{where}: no credential was sent; set AZURE_OPENAI_API_KEY, or pass api_key= or get_api_key "
            "(a Microsoft Entra ID token)"
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
        credential = _credential(api_key)
        target = resolve_target(model, options, credential=credential)
        body = build_request_body(model, context, **options)
        body["model"] = target.deployment
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        headers.update(auth_headers(credential, options))
        return WireRequest(target.url("responses"), headers, body)

    def describe_failure(
        self, exc: BaseException, model: Model, options: Dict[str, Any], api_key: Optional[str]
    ) -> str:
        return explain_failure(exc, model, options, api_key)

"""The ``google-vertex`` wire API: Gemini ``streamGenerateContent?alt=sse`` on Vertex AI endpoints.

The request body and the stream parsing are the core's ``google-generative-ai`` ones
(:func:`agentcore.providers.google.build_request_body`, :class:`~agentcore.providers.google.
GoogleStreamState`): Vertex speaks the same wire format. What differs is where and how to ask:

* URL ``{base}/v1/projects/{project}/locations/{location}/publishers/google/models/{model}:
  streamGenerateContent?alt=sse``; ``base`` is the model's ``base_url`` with ``{location}``
  filled in (catalog models: ``https://{location}-aiplatform.googleapis.com``), and the ``global``
  location's host is ``https://aiplatform.googleapis.com``.
* Auth, first match wins: an ``api_key`` option chooses Vertex AI express mode (a key of
  whitespace only, here or in ``GOOGLE_CLOUD_API_KEY``, counts as none); credentials given
  (option ``credentials``, else the provider's own) choose their token; then
  ``GOOGLE_CLOUD_API_KEY`` chooses express mode; else Application Default Credentials. With
  credentials, the headers they add go on the request (``credentials.apply``: ``Authorization:
  Bearer``, ``x-goog-user-project`` for a quota project; see :mod:`agentcore_vertex.auth`). Express
  mode sends ``x-goog-api-key`` to the project-less URL
  ``{base}/v1/publishers/google/models/{model}:streamGenerateContent?alt=sse``.
* Project: option ``project`` > the provider's ``project`` > ``GOOGLE_CLOUD_PROJECT`` >
  ``GCLOUD_PROJECT`` > the project the credentials name. Location: option ``location`` > the
  provider's ``location`` > the region of a concrete ``base_url`` (``https://europe-west4-aiplatform
  .googleapis.com``) > ``GOOGLE_CLOUD_LOCATION``. Missing either ends the stream with an error
  naming what to set. Express mode needs neither and ignores ``GOOGLE_CLOUD_LOCATION``: it uses
  the ``global`` host unless the options, the provider or a concrete ``base_url`` name a location.
  Surrounding whitespace of either is dropped (a variable from a file with CRLF line ends); a
  project may be a project number (an int); a location must be letters, digits and dashes (it is
  part of the host name), and anything else is named in a configuration error.

A ``credentials`` option that is no google-auth credentials object (``-o credentials PATH`` gives a
string) ends the stream with an error naming the option; a key file goes in
``GOOGLE_APPLICATION_CREDENTIALS``.

Failures (missing configuration, no credentials, a failed refresh, HTTP errors) end the stream with
an ``error`` event, as for every wire API; tokens and keys never appear in its message. An abort
while Application Default Credentials are looked up (off Google Cloud, google-auth's probe of the
metadata server may take seconds) or while the token refreshes ends it at once with the usual
``aborted`` result; the look-up or refresh goes on, and the next request uses what it found.
When the ADC token can no longer be refreshed (expired or rejected, and the refresh fails: a
revoked login, reauthentication required), that request fails and the next one looks the
credentials up again, so a ``gcloud auth application-default login`` meanwhile is picked up.
With credentials, a ``401`` before any content refreshes the token and retries once (unless a
refresh replaced the rejected token meanwhile: the retry then carries the new one). When that
refresh fails (a bare access token has nothing to refresh it with), the error keeps the server's
401 answer on its first line and says why the refresh failed on the next.
"""

from __future__ import annotations

import os
import re
import threading
import weakref
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence
from urllib.parse import quote

from agentcore.providers.base import ProviderError, ProviderStream, StateHandler, WireProvider, WireRequest, as_signal
from agentcore.providers.google import GoogleStreamState, build_request_body
from agentcore.providers.retries import RetryBudget

from .auth import _ADC_HELP, SCOPES, TokenSource, VertexAuthError, _error_text, _Refresh, _scope_list, _wait

__all__ = [
    "API",
    "DEFAULT_BASE_URL",
    "VertexConfigError",
    "VertexProvider",
    "resolve_project",
    "resolve_location",
    "endpoint_base",
    "request_url",
]

API = "google-vertex"
DEFAULT_BASE_URL = "https://{location}-aiplatform.googleapis.com"
API_KEY_ENV = "GOOGLE_CLOUD_API_KEY"
PROJECT_ENV = ("GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT")
LOCATION_ENV = "GOOGLE_CLOUD_LOCATION"
AUTHENTICATED = "<authenticated>"  # the core's marker for ambient credentials (providers spec §19)
_REGIONAL_HOST = re.compile(r"^https?://([a-z0-9-]+)-aiplatform\.googleapis\.com(?:/|$)")
_GLOBAL_HOST = re.compile(r"^https?://aiplatform\.googleapis\.com(?:/|$)")
_SENT_TOKEN = "_vertex_sent_token"  # option: where build_request notes the token it sent
_REJECTED = "_vertex_rejected"  # option: the 401 error a retry follows, kept if its refresh fails
_DISCOVERY_THREAD = "agentcore-vertex-adc-discovery"


class VertexConfigError(ProviderError):
    """The Google Cloud project or location is missing or contradictory."""


# --------------------------------------------------------------------------- where to send


def _base_location(model: Any) -> Optional[str]:
    """The location a concrete Vertex ``base_url`` is the endpoint of, or None."""
    base = getattr(model, "base_url", "") or ""
    match = _REGIONAL_HOST.match(base)
    if match:
        return match.group(1)
    return "global" if _GLOBAL_HOST.match(base) else None


_LOCATION_NAME = re.compile(r"[A-Za-z0-9-]+")


def _setting(value: Any, name: str, numbers: bool = False) -> Optional[str]:
    """A project or location setting without surrounding whitespace (a variable read from a file
    with CRLF line ends keeps its ``\\r``), or None when that leaves nothing. With ``numbers``
    an int counts (a project number). Raises :class:`VertexConfigError` for any other type."""
    if value is None:
        return None
    if numbers and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise VertexConfigError(f"Vertex AI: {name} must be a string, not {type(value).__name__}")
    return value.strip() or None


def resolve_location(
    model: Any, location: Optional[str] = None, env: Optional[Mapping[str, str]] = None, default: Optional[str] = None
) -> str:
    """The location to use (see the module docstring for the order), else ``default``.

    Surrounding whitespace is dropped. Raises :class:`VertexConfigError` when none is found and
    there is no ``default``, when ``location`` contradicts the region of the model's concrete
    ``base_url``, when it is not a string, or when the location found is no location name
    (letters, digits and dashes: it is part of the host name).
    """
    env = os.environ if env is None else env
    location = _setting(location, "location")
    fixed = _base_location(model)
    if location and fixed and location != fixed:
        raise VertexConfigError(
            f"Vertex AI: location={location!r} but the model's base_url "
            f"{model.base_url!r} is the endpoint of location {fixed!r}"
        )
    from_env = _setting(env.get(LOCATION_ENV), LOCATION_ENV)
    found = location or fixed or from_env or default
    if not found:
        raise VertexConfigError(
            f"Vertex AI needs a location: set {LOCATION_ENV} (e.g. us-central1 or global) or pass location="
        )
    if not _LOCATION_NAME.fullmatch(found):
        where = "location=" if found == location else f"{LOCATION_ENV}=" if found == from_env else "location "
        raise VertexConfigError(
            f"Vertex AI: {where}{found!r} is not a location name (letters, digits and dashes, "
            "e.g. us-central1 or global)"
        )
    return found


def resolve_project(
    project: Optional[str] = None, env: Optional[Mapping[str, str]] = None, credentials_project: Optional[str] = None
) -> str:
    """The project to use (an id, or a project number given as an int); raises
    :class:`VertexConfigError` naming the variables when none is found, or naming the value that
    is neither a string nor a number."""
    env = os.environ if env is None else env
    project = _setting(project, "project", numbers=True)
    from_env = next((_setting(env[name], name) for name in PROJECT_ENV if _setting(env.get(name), name)), None)
    found = project or from_env or credentials_project
    if not found:
        raise VertexConfigError(
            "Vertex AI needs a Google Cloud project: set GOOGLE_CLOUD_PROJECT (or GCLOUD_PROJECT) or pass project="
        )
    return found


def endpoint_base(model: Any, location: str) -> str:
    """``{host}/v1`` for ``location``: the model's ``base_url`` with ``{location}`` filled in."""
    base = (getattr(model, "base_url", "") or DEFAULT_BASE_URL).rstrip("/")
    if location == "global":
        base = base.replace("{location}-aiplatform.", "aiplatform.")
    base = base.replace("{location}", quote(location, safe=""))
    return base if re.search(r"/v1(beta1)?$", base) else base + "/v1"


def request_url(model: Any, location: str, project: Optional[str] = None) -> str:
    """The streaming URL: project-scoped, or express mode's project-less one when ``project`` is None."""
    scope = f"/projects/{quote(project, safe='')}/locations/{quote(location, safe='')}" if project else ""
    model_id = quote(model.id, safe=".-_")
    return f"{endpoint_base(model, location)}{scope}/publishers/google/models/{model_id}:streamGenerateContent?alt=sse"


# --------------------------------------------------------------------------- the provider


def _not_credentials(credentials: Any, where: str) -> Optional[str]:
    """Why ``credentials`` cannot be used (it is no google-auth credentials object: it lacks the
    ``refresh`` and ``apply`` the token source calls), naming ``where`` it came from and saying
    how to pass credentials; None when it can. The value is never shown (a string given on the
    command line may be a token, a JSON object a key file's content)."""
    if callable(getattr(credentials, "refresh", None)) and callable(getattr(credentials, "apply", None)):
        return None
    return (
        f"Vertex AI: {where} must be a google-auth credentials object (e.g. "
        f"google.oauth2.service_account.Credentials), not {type(credentials).__name__}; on the command line "
        "set GOOGLE_APPLICATION_CREDENTIALS to a service-account key file instead, in code pass the object "
        "built from it (credentials= or VertexProvider(credentials))"
    )


def _blank_to_none(key: Any) -> Any:
    """``key``, or None when it is a string of whitespace only (no key: credentials are used)."""
    return None if isinstance(key, str) and not key.strip() else key


class _SentToken:
    """The token the last request of a stream carried, so a 401 rejects that token and not one a
    refresh put in its place meanwhile. Its repr never shows it."""

    __slots__ = ("token", "source")

    def __init__(self) -> None:
        self.token: Optional[str] = None
        self.source: Optional[TokenSource] = None  # the source it came from

    def __repr__(self) -> str:
        return "<_SentToken>"


class VertexProvider(WireProvider):
    """The ``google-vertex`` provider registered by the plugin.

    ``credentials`` (a google-auth credentials object) replaces Application Default Credentials and
    wins over ``GOOGLE_CLOUD_API_KEY`` (only an ``api_key`` option still chooses express mode);
    ``project``/``location`` set defaults below the per-request options; ``scopes`` are the OAuth
    scopes asked for (a single string is one scope; other values raise ``TypeError``). The ADC
    token source is created on the first request and kept by this provider instance until its
    refresh fails with no usable token left (the next request then looks ADC up again); credentials
    passed per request (option ``credentials``) get their own source, kept while the object lives.
    Credentials that are no google-auth credentials object (a path or a key file's JSON from
    ``-o credentials``) are refused naming where they came from: the constructor raises
    ``TypeError``, a request ends with a :class:`~agentcore_vertex.auth.VertexAuthError` error
    event. A service-account key file goes in ``GOOGLE_APPLICATION_CREDENTIALS``.
    """

    api = API
    error_style = "google"
    #: The options this provider reads beyond agentcore's StreamOptions: ``Agent(project=...)``,
    #: ``-o location global`` and ``stream(..., credentials=...)`` all reach it.
    #: credentials come from the provider's own chain (ADC, a service account, an attached
    #: account): the command line's key-variable check leaves them to it
    ambient_credentials = True
    stream_options = {
        "project": "Google Cloud project (else the provider's, GOOGLE_CLOUD_PROJECT, the credentials')",
        "location": "Vertex AI location, e.g. us-central1 or global (else GOOGLE_CLOUD_LOCATION)",
        "credentials": "a google-auth credentials object for this request (not on the command line)",
        "thinking": "thinkingConfig override: {enabled, budget_tokens or level}; wins over reasoning",
    }

    def __init__(
        self,
        credentials: Any = None,
        *,
        project: Optional[str] = None,
        location: Optional[str] = None,
        scopes: Sequence[str] = SCOPES,
    ) -> None:
        self.project = project
        self.location = location
        self.scopes = tuple(_scope_list(scopes))
        if credentials is not None:
            problem = _not_credentials(credentials, "VertexProvider(credentials)")
            if problem:
                raise TypeError(problem)
        self._has_credentials = credentials is not None
        self._lock = threading.Lock()
        self._default: Optional[TokenSource] = (
            TokenSource.for_credentials(credentials, self.scopes) if credentials is not None else None
        )
        self._sources: weakref.WeakKeyDictionary[Any, TokenSource] = weakref.WeakKeyDictionary()
        self._discovery: Optional[_Refresh] = None  # the ADC look-up under way, if any

    def stream(self, model: Any, context: Any, **options: Any) -> Any:
        # Vertex auth does not depend on the model's provider name: without a key, use credentials.
        # The marker keeps the skeleton's provider-name key lookup from failing before we get to it.
        if not _blank_to_none(options.get("api_key")):
            options["api_key"] = self._ambient_key(options) or AUTHENTICATED
        if options["api_key"] != AUTHENTICATED:
            return super().stream(model, context, **options)
        return ProviderStream(self._retry_rejected_token(model, context, options))

    def _ambient_key(self, options: Mapping[str, Any]) -> Optional[str]:
        """``GOOGLE_CLOUD_API_KEY``, or None when credentials were given (option or constructor):
        the environment's key is a fallback and never overrides credentials chosen in code. A
        value of whitespace only (``GOOGLE_CLOUD_API_KEY=`` in a CRLF ``.env`` file leaves a
        ``\\r``) is no key: Application Default Credentials are used."""
        if options.get("credentials") is not None or self._has_credentials:
            return None
        return _blank_to_none(os.environ.get(API_KEY_ENV))

    def _retry_rejected_token(self, model: Any, context: Any, options: Dict[str, Any]) -> Iterator[Any]:
        """ADC mode: a 401 before any content means the token was revoked or rotated before its
        expiry; refresh it and ask once more (as google-auth's AuthorizedSession does), with the
        retries the first attempt left of ``max_retries``. When that refresh fails, the error
        event's message is the 401's, then (next line) the refresh failure."""
        statuses: List[int] = []
        sent = _SentToken()
        user_hook = options.get("on_response")

        def on_response(status: int, headers: Dict[str, str]) -> None:
            statuses.append(status)
            if user_hook is not None:
                user_hook(status, headers)

        options = dict(options, on_response=on_response)
        options[_SENT_TOKEN] = sent
        first = super().stream(model, context, **options)
        try:
            events = iter(first)
            event = next(events)
            if not (event.type == "error" and statuses[-1:] == [401] and event.reason == "error"):
                yield event
                yield from events
                return
        finally:
            first.close()
        if sent.source is not None:
            sent.source.invalidate(sent.token)
        options[_REJECTED] = event.error.error_message  # redacted by the first stream
        # the retry with a fresh token is an auth step, outside the budget; what the first stream
        # spent on transient failures (one HTTP answer per attempt) is not given back
        allowed = RetryBudget(options.get("max_retries")).max_retries  # the default and the floor at 0
        options["max_retries"] = max(0, allowed - (len(statuses) - 1))
        yield from super().stream(model, context, **options)

    def build_request(self, model: Any, context: Any, options: Dict[str, Any], api_key: Optional[str]) -> WireRequest:
        body = build_request_body(model, context, **options)
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        location_option = options.get("location") or self.location
        if api_key and api_key != AUTHENTICATED:  # express mode: GOOGLE_CLOUD_LOCATION is ADC's
            location = resolve_location(model, location_option, env={}, default="global")
            headers["x-goog-api-key"] = api_key
            return WireRequest(request_url(model, location), headers, body)
        location = resolve_location(model, location_option)
        source = self.token_source(options.get("credentials"), options.get("signal"))
        project = resolve_project(options.get("project") or self.project, credentials_project=source.project)
        try:
            token = source.apply(headers, options.get("signal"))
        except VertexAuthError as exc:
            if options.get("credentials") is None:
                self._forget_adc(source)
            rejected = options.get(_REJECTED)
            if not rejected:
                raise
            raise VertexAuthError(f"{rejected}\n{exc}") from None  # the server's 401, then why no new token
        sent = options.get(_SENT_TOKEN)
        if isinstance(sent, _SentToken):
            sent.token, sent.source = token, source
        return WireRequest(request_url(model, location, project), headers, body)

    def new_handler(self, model: Any, writer: Any, options: Dict[str, Any]) -> StateHandler:
        return StateHandler(GoogleStreamState(model, writer))

    def token_source(self, credentials: Any = None, signal: Any = None) -> TokenSource:
        """The token source of ``credentials`` (default: the provider's, else ADC), created once.

        Finding Application Default Credentials may take seconds (off Google Cloud, google-auth
        probes the metadata server: three attempts of up to 3 s each when nothing answers), so it
        runs on a helper (daemon) thread, one look-up at a time, and ``signal`` (an abort signal
        or ``threading.Event``) ends the wait with :class:`~agentcore.providers.http.RequestAborted`
        while the look-up goes on: its source is kept for the next request. Raises
        :class:`~agentcore_vertex.auth.VertexAuthError` when there are no credentials; a failed
        look-up is not kept (the next request looks again), and when ``credentials`` is no
        google-auth credentials object (no ``refresh``/``apply``: a string or JSON from the command
        line), naming the option. When no helper thread can start, the look-up runs on the calling
        thread (not abortable)."""
        if credentials is None:
            return self._adc_source(signal)
        problem = _not_credentials(credentials, "the credentials option")
        if problem:
            raise VertexAuthError(problem)
        with self._lock:
            try:
                source = self._sources.get(credentials)
            except TypeError:  # not weak-referenceable: a fresh source (its token lives on the object)
                return TokenSource.for_credentials(credentials, self.scopes)
            if source is None:
                source = self._sources[credentials] = TokenSource.for_credentials(credentials, self.scopes)
            return source

    def _adc_source(self, signal: Any) -> TokenSource:
        """The provider's source, found by the ADC look-up under way or a new one (see
        :meth:`token_source`)."""
        with self._lock:
            if self._default is not None:
                return self._default
            discovery = self._discovery
            start = discovery is None
            if discovery is None:
                discovery = self._discovery = _Refresh()
        if start:
            thread = threading.Thread(target=self._discover, args=(discovery,), name=_DISCOVERY_THREAD, daemon=True)
            try:
                thread.start()
            except RuntimeError:  # "can't start new thread": look on this thread
                self._discover(discovery)
        _wait(discovery, as_signal(signal))  # raises VertexAuthError(discovery.error) when it failed
        with self._lock:
            source = self._default
        if source is None:  # reset meanwhile (cannot happen today); say so rather than fail obscurely
            raise VertexAuthError(f"Vertex AI: no Google Cloud credentials found; {_ADC_HELP}")
        return source

    def _forget_adc(self, source: TokenSource) -> None:
        """``source`` gave no usable token (its refresh failed once the token was expired or
        rejected): when it is the ADC source this provider found, drop it, so the next request
        looks the credentials up again (after ``gcloud auth application-default login``, say)
        instead of failing with the old ones until the process ends. Credentials given to the
        constructor are kept: there is nothing else to look up."""
        with self._lock:
            if self._default is source and not self._has_credentials:
                self._default = None

    def _discover(self, discovery: _Refresh) -> None:
        """The ADC look-up (the helper thread's body): keep the source, or record why it failed."""
        try:
            source = TokenSource.from_adc(self.scopes)
        except VertexAuthError as exc:
            discovery.error = str(exc)
        except BaseException as exc:  # noqa: BLE001 - google-auth missing or broken; KeyboardInterrupt inline
            discovery.error = (
                f"Vertex AI: could not load the Google Cloud credentials: {type(exc).__name__}: "
                f"{_error_text(exc)}; {_ADC_HELP}"
            )
            if not isinstance(exc, Exception):
                raise
        else:
            with self._lock:
                self._default = source
        finally:
            with self._lock:
                self._discovery = None
            discovery.done.set()

    def __repr__(self) -> str:
        return f"<VertexProvider api={self.api!r} project={self.project!r} location={self.location!r}>"

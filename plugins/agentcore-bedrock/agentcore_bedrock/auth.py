"""Where a Bedrock request goes and how it is authenticated: region, endpoint, credentials, SigV4.

* Region: ``region=`` option > ``AWS_REGION`` > ``AWS_DEFAULT_REGION`` > the profile's configured
  region (``~/.aws/config``) > the region named in the model's ``base_url``
  (``https://bedrock-runtime.<region>.amazonaws.com``). None of them, or a value that is not a
  region name (``eu west 1``, a URL): :class:`BedrockConfigError` naming where it came from.
* Endpoint: ``endpoint_url=`` option, else the model's ``base_url`` when it is not a standard
  ``bedrock-runtime.<region>.amazonaws.com`` host (a proxy, a VPC endpoint, a local test server),
  else ``https://bedrock-runtime.<region>.amazonaws.com`` for the resolved region
  (``bedrock-runtime-fips.<region>...`` when the model's ``base_url`` is a FIPS host). A custom
  endpoint that is not an ``http(s)://host`` URL: :class:`BedrockConfigError` naming it.
* Authentication, first that applies: a Bedrock API key (``api_key=`` or
  ``AWS_BEARER_TOKEN_BEDROCK``) sent as ``Authorization: Bearer``; ``AWS_BEDROCK_SKIP_AUTH=1``
  (proxies that add their own credentials: signed with dummy keys, as the reference does); else
  SigV4 (service ``bedrock``) with credentials from botocore's standard chain (environment,
  shared credentials and config files with ``profile=``/``AWS_PROFILE``, SSO, web identity,
  container and instance roles). No credentials: :class:`BedrockConfigError` naming what to set.

botocore sessions are cached per profile (:data:`_credentials`): resolving the chain can cost a
metadata-service round trip, and botocore refreshes temporary credentials itself. Tests reset it
with :func:`clear_credentials_cache`. Secrets never appear in messages or reprs:
:attr:`SignedRequest.secrets` holds the secret key, the session token, every credential header
value (``Authorization`` whole) and the SigV4 signature alone, for the error messages' redaction;
while SigV4 signs with ``botocore.auth`` at DEBUG, a filter scoped to that one signature turns
the secrets of botocore's canonical-request and signature records into ``***``.
"""

from __future__ import annotations

import datetime
import logging
import os
import re
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple
from urllib.parse import quote, urlsplit

from agentcore.providers.base import clean_api_key, redact, secret_header_values

__all__ = [
    "BedrockConfigError",
    "SignedRequest",
    "resolve_region",
    "endpoint_url",
    "request_url",
    "sign_request",
    "clear_credentials_cache",
    "SIGNING_NAME",
    "BEARER_TOKEN_ENV",
]

SIGNING_NAME = "bedrock"
BEARER_TOKEN_ENV = "AWS_BEARER_TOKEN_BEDROCK"
_AUTHENTICATED = "<authenticated>"  # the core's marker for "ambient credentials exist"
_REGION_NAME = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$")  # botocore's own rule
_STANDARD_HOST = re.compile(r"^bedrock-runtime(-fips)?\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$")

_NO_CREDENTIALS = (
    "no AWS credentials for Amazon Bedrock: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
    "AWS_PROFILE (after `aws configure` or `aws sso login`), or AWS_BEARER_TOKEN_BEDROCK (a Bedrock "
    "API key, or pass api_key=), or run where an instance or container role is available"
)
_NO_REGION = (
    "no AWS region for Amazon Bedrock: set AWS_REGION (or AWS_DEFAULT_REGION), pass region=, or "
    "use a model whose base_url is https://bedrock-runtime.<region>.amazonaws.com"
)


class BedrockConfigError(Exception):
    """Region, endpoint or credentials are missing or unusable; the message says what to set."""


@dataclass
class SignedRequest:
    """A ready-to-send request: the headers include authentication. ``secrets`` lists values that
    must never be echoed (bearer token, secret key, session token). The repr names the headers
    but shows none of their values."""

    url: str
    headers: Dict[str, str]
    body: bytes = field(repr=False)
    secrets: List[str] = field(default_factory=list, repr=False)
    region: str = ""

    def __repr__(self) -> str:
        return f"SignedRequest(url={self.url!r}, headers={sorted(self.headers)!r}, region={self.region!r})"


def _standard_host(url: str) -> Optional[re.Match[str]]:
    """The match of a standard ``bedrock-runtime[-fips].<region>.amazonaws.com`` host, or None."""
    return _STANDARD_HOST.match((urlsplit(url).hostname or "") if url else "")


def _region_of_url(url: str) -> Optional[str]:
    match = _standard_host(url)
    return match.group(2) if match else None


def _checked_region(value: Any, source: str) -> str:
    """``value`` stripped, or :class:`BedrockConfigError` naming ``source`` when it cannot be a
    region name (it becomes a host name and the SigV4 scope: ``eu west 1``, ``eu-west-1/`` or a
    URL would fail later as an unreadable connection or URL error)."""
    region = str(value).strip()
    if not _REGION_NAME.match(region):
        raise BedrockConfigError(
            f"AWS region {region!r} (from {source}) is not a region name: use one such as us-east-1 or eu-west-1"
        )
    return region


def resolve_region(model: Any, options: Mapping[str, Any], env: Optional[Mapping[str, str]] = None) -> str:
    """The region to call and sign for (see the module docstring for the order). A value that is
    not a region name (letters, digits and inner dashes) raises :class:`BedrockConfigError`
    naming where it came from (``region=``, ``AWS_REGION``, ``AWS_DEFAULT_REGION``, the profile)."""
    env = os.environ if env is None else env
    sources = (
        (options.get("region"), "region="),
        (env.get("AWS_REGION"), "AWS_REGION"),
        (env.get("AWS_DEFAULT_REGION"), "AWS_DEFAULT_REGION"),
    )
    for value, source in sources:
        if value and str(value).strip():
            return _checked_region(value, source)
    profile = options.get("profile")
    region = _profile_region(profile)
    if region and str(region).strip():
        return _checked_region(region, f"the region of AWS profile {profile or env.get('AWS_PROFILE') or 'default'!r}")
    region = _region_of_url(getattr(model, "base_url", "") or "")
    if region:
        return region
    raise BedrockConfigError(_NO_REGION)


def _profile_region(profile: Optional[str]) -> Optional[str]:
    try:
        session = _session(profile)
    except BedrockConfigError:
        return None
    try:
        return session.get_config_variable("region")
    except Exception:  # a broken config file: fall back to the model's region
        return None


def _checked_endpoint(url: str, source: str) -> str:
    """``url`` without surrounding whitespace and trailing slashes, or :class:`BedrockConfigError`
    naming ``source`` (credentials in the URL shown as ``***``) when it is not an ``http(s)://host``
    URL: SigV4 signing would otherwise fail inside botocore with an ``AttributeError``."""
    given = url.strip()
    url = given.rstrip("/")
    problem = None
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        problem = str(exc)
    else:
        if parts.scheme.lower() not in ("http", "https"):
            problem = "it needs http:// or https://"
        elif not parts.hostname:
            problem = "it names no host"
    if problem is not None:
        from agentcore.providers.failures import secret_url_values

        shown = redact(given, secret_url_values(given))
        raise BedrockConfigError(f"the Amazon Bedrock endpoint {shown!r} (from {source}) is not usable: {problem}")
    return url


def endpoint_url(model: Any, region: str, options: Mapping[str, Any]) -> str:
    """The endpoint base URL (no trailing slash). A standard ``base_url`` follows ``region`` and
    keeps its FIPS choice: ``bedrock-runtime-fips.<region>.amazonaws.com`` stays a FIPS host.
    An ``endpoint_url=`` or custom ``base_url`` that is not an ``http(s)://host`` URL raises
    :class:`BedrockConfigError` naming it."""
    explicit = options.get("endpoint_url")
    if explicit:
        return _checked_endpoint(str(explicit), "endpoint_url=")
    base = (getattr(model, "base_url", "") or "").strip()
    match = _standard_host(base)
    if base and match is None:
        return _checked_endpoint(base, f"the base_url of model {getattr(model, 'id', '?')!r}")
    fips = (match.group(1) or "") if match else ""
    suffix = ".amazonaws.com.cn" if region.startswith("cn-") else ".amazonaws.com"
    return f"https://bedrock-runtime{fips}.{region}{suffix}"


def request_url(base: str, model_id: str) -> str:
    """``{base}/model/{model id, percent-encoded}/converse-stream`` (``:`` and ``/`` of ARNs too)."""
    from agentcore.providers.base import endpoint_url

    return endpoint_url(base, f"model/{quote(model_id, safe='')}/converse-stream")


# --------------------------------------------------------------------------- credentials

_sessions: Dict[Optional[str], Any] = {}
_credentials: Dict[Optional[str], Any] = {}
_lock = threading.Lock()


def clear_credentials_cache() -> None:
    """Forget the cached botocore sessions and credentials (after changing the environment)."""
    with _lock:
        _sessions.clear()
        _credentials.clear()


def _session(profile: Optional[str]) -> Any:
    session = _sessions.get(profile)
    if session is not None:
        return session
    try:
        import botocore.session
        from botocore.exceptions import BotoCoreError
    except ImportError:  # pragma: no cover - botocore is a dependency of the distribution
        raise BedrockConfigError(
            "agentcore-bedrock needs botocore for AWS credentials: "
            "pip install botocore (or set AWS_BEARER_TOKEN_BEDROCK)"
        ) from None
    try:
        session = botocore.session.Session(profile=profile) if profile else botocore.session.Session()
    except BotoCoreError as exc:
        raise BedrockConfigError(f"AWS configuration for Amazon Bedrock could not be loaded: {exc}") from None
    with _lock:
        return _sessions.setdefault(profile, session)


def _frozen_credentials(profile: Optional[str]) -> Any:
    """Credentials from the standard chain, frozen for one signature (refreshed by botocore)."""
    credentials = _credentials.get(profile)
    if credentials is None:
        from botocore.exceptions import BotoCoreError

        session = _session(profile)
        try:
            credentials = session.get_credentials()
        except BotoCoreError as exc:  # an expired SSO token, an unknown profile, ...
            raise BedrockConfigError(f"AWS credentials for Amazon Bedrock could not be loaded: {exc}") from None
        if credentials is None:
            raise BedrockConfigError(_NO_CREDENTIALS)
        with _lock:
            credentials = _credentials.setdefault(profile, credentials)
    try:
        frozen = credentials.get_frozen_credentials()
    except Exception as exc:  # a refresh failed (expired role session, network)
        raise BedrockConfigError(
            f"AWS credentials for Amazon Bedrock could not be refreshed: {type(exc).__name__}: {exc}"
        ) from None
    if not frozen.access_key or not frozen.secret_key:
        raise BedrockConfigError(_NO_CREDENTIALS)
    return frozen


def _abortable_credentials(profile: Optional[str], signal: Any) -> Any:
    """:func:`_frozen_credentials` that an abort of ``signal`` interrupts: resolving or refreshing
    them can block for seconds (a container or instance role's endpoint, an STS call) or for as
    long as a ``credential_process`` runs, so they are resolved on a daemon thread while this one
    waits for them or for the abort. Raises :class:`~agentcore.providers.http.RequestAborted` on
    an abort (the thread finishes on its own and its credentials stay cached for the next run),
    else what :func:`_frozen_credentials` raises."""
    if signal is None or not hasattr(signal, "add_listener"):
        return _frozen_credentials(profile)
    from agentcore.providers.base import ABORTED_MESSAGE
    from agentcore.providers.http import RequestAborted

    if signal.aborted:
        raise RequestAborted(ABORTED_MESSAGE)
    done = threading.Event()
    outcome: Dict[str, Any] = {}

    def resolve() -> None:
        try:
            outcome["credentials"] = _frozen_credentials(profile)
        except BaseException as exc:  # handed to the waiting thread
            outcome["error"] = exc
        finally:
            done.set()

    def on_abort(_reason: Any) -> None:
        done.set()

    signal.add_listener(on_abort)  # runs at once when already aborted
    try:
        threading.Thread(target=resolve, name="agentcore-bedrock-credentials", daemon=True).start()
        done.wait()
    finally:
        signal.remove_listener(on_abort)
    if "credentials" in outcome:
        return outcome["credentials"]
    if "error" in outcome:
        raise outcome["error"]
    raise RequestAborted(ABORTED_MESSAGE)


def _bearer_token(options: Mapping[str, Any], env: Mapping[str, str]) -> Optional[str]:
    key = options.get("api_key")
    if key != _AUTHENTICATED:
        key = clean_api_key(key)
        if key:
            return key
    return clean_api_key(env.get(BEARER_TOKEN_ENV), BEARER_TOKEN_ENV)


def sign_request(
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    region: str,
    options: Mapping[str, Any],
    env: Optional[Mapping[str, str]] = None,
    signal: Any = None,
    clock_offset: float = 0.0,
) -> SignedRequest:
    """Authenticate a POST of ``body`` to ``url`` (see the module docstring); every header given
    is part of the signature, so add them all before calling. Raises :class:`BedrockConfigError`.

    An abort of ``signal`` (an :class:`~agentcore.signals.AbortSignal`, or None) interrupts the
    resolution of SigV4 credentials, which can block (a role's endpoint, an STS call, a
    ``credential_process``): :class:`~agentcore.providers.http.RequestAborted` is raised at once.

    ``clock_offset`` (seconds, the server's clock minus this machine's) moves the SigV4 time
    (``X-Amz-Date`` and the credential scope): AWS refuses a signature more than 5 minutes from
    its own clock, so a provider that learnt the offset from a refusal signs again with it. A
    bearer token carries no time and ignores it."""
    env = os.environ if env is None else env
    token = _bearer_token(options, env)
    if token:
        signed = dict(headers)
        signed["Authorization"] = f"Bearer {token}"
        return SignedRequest(url, signed, body, [token], region)
    if env.get("AWS_BEDROCK_SKIP_AUTH") == "1":
        from botocore.credentials import ReadOnlyCredentials

        credentials: Any = ReadOnlyCredentials("dummy-access-key", "dummy-secret-key", None)
    else:
        credentials = _abortable_credentials(options.get("profile") or None, signal)
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    request = AWSRequest(method="POST", url=url, data=body, headers=dict(headers))
    secrets = [s for s in (credentials.secret_key, credentials.token) if s] + secret_header_values(headers)
    if clock_offset:
        signer = _clocked_sigv4_class()(credentials, SIGNING_NAME, region, clock_offset)
    else:
        signer = SigV4Auth(credentials, SIGNING_NAME, region)
    with _redacted_signing_logs(secrets):
        signer.add_auth(request)
    signed = dict(request.headers.items())
    secrets += secret_header_values(signed)  # the Authorization value and x-amz-security-token
    secrets.append(signature_parts(signed["Authorization"])[2])  # a server may echo the signature alone
    return SignedRequest(url, signed, body, secrets, region)


def _clocked_sigv4_class() -> Any:
    """botocore's ``SigV4Auth`` signing at this machine's time plus an offset (made on use, only
    after a refused signature time: botocore is imported lazily)."""
    from botocore.auth import SIGV4_TIMESTAMP, SigV4Auth

    class ClockedSigV4Auth(SigV4Auth):  # type: ignore[misc]
        def __init__(self, credentials: Any, service_name: str, region_name: str, offset: float) -> None:
            super().__init__(credentials, service_name, region_name)
            self._offset = offset

        def _modify_request_before_signing(self, request: Any) -> None:
            # add_auth has just stamped the local time; every later step reads this one
            now = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=self._offset)
            request.context["timestamp"] = now.strftime(SIGV4_TIMESTAMP)
            super()._modify_request_before_signing(request)

    return ClockedSigV4Auth


# --------------------------------------------------------------------------- botocore's DEBUG records

_SIGNING_LOGGER = "botocore.auth"
_filters_lock = threading.Lock()


class _SigningLogRedactor(logging.Filter):
    """Rewrites the records of ``botocore.auth`` while one request is signed: at DEBUG botocore
    logs the canonical request (every signed header value, ``x-amz-security-token`` too) and the
    signature. The known ``secrets`` become ``***`` and the ``Signature:`` record loses its value;
    every record is kept (a filter that drops nothing, so handlers still see the signing steps)."""

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__(_SIGNING_LOGGER)
        self._secrets = [s for s in secrets if s]

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            text = record.getMessage()
        except Exception:  # a record botocore formatted badly: leave it to the handler's error path
            return True
        if text.startswith("Signature:"):
            text = "Signature:\n***"
        record.msg, record.args = redact(text, self._secrets), None
        return True


@contextmanager
def _redacted_signing_logs(secrets: Iterable[str]) -> Iterator[None]:
    """While the body runs, :class:`_SigningLogRedactor` filters ``botocore.auth``'s records; it
    is removed afterwards, also when signing raises. Nothing is installed unless that logger
    would emit DEBUG records. The logger's filter list is replaced, never changed in place, so a
    record being filtered on another thread meanwhile still sees every filter it started with."""
    logger = logging.getLogger(_SIGNING_LOGGER)
    if not logger.isEnabledFor(logging.DEBUG):
        yield
        return
    redactor = _SigningLogRedactor(secrets)
    with _filters_lock:
        logger.filters = [*logger.filters, redactor]
    try:
        yield
    finally:
        with _filters_lock:
            logger.filters = [f for f in logger.filters if f is not redactor]


def signature_parts(authorization: str) -> Tuple[str, List[str], str]:
    """``(credential scope, signed header names, signature)`` of a SigV4 Authorization header."""
    fields = dict(part.strip().split("=", 1) for part in authorization.split(" ", 1)[1].split(","))
    return fields["Credential"], fields["SignedHeaders"].split(";"), fields["Signature"]

"""Bearer tokens for Vertex AI from Application Default Credentials (``google-auth``).

:class:`TokenSource` wraps one ``google.auth.credentials.Credentials`` object and hands out its
access token, refreshing it *before* it expires (``margin``, 5 minutes by default) so a token never
runs out in the middle of a long streamed response. Refreshes are serialised by a lock: many
threads asking at once cause one refresh, and they all get the new token.

``google.auth`` is imported on first use, never when the plugin is loaded. Tokens, refresh tokens
and client secrets never appear in a repr or an exception message.
"""

from __future__ import annotations

import datetime
import threading
from typing import Any, Callable, List, Optional, Sequence

from agentcore.providers.base import ProviderError, redact

__all__ = ["SCOPES", "VertexAuthError", "TokenSource"]

SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
DEFAULT_MARGIN = datetime.timedelta(minutes=5)
_ADC_HELP = (
    "run `gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS to a "
    "service-account key file, or pass api_key= (GOOGLE_CLOUD_API_KEY) for Vertex AI express mode"
)


class VertexAuthError(ProviderError):
    """No usable Google Cloud credentials, or refreshing the access token failed."""


def _utcnow() -> datetime.datetime:
    # google-auth keeps ``expiry`` as a naive UTC datetime
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


class TokenSource:
    """Access tokens of ``credentials``, refreshed ``margin`` before expiry; thread-safe.

    ``request`` is the google-auth transport used to refresh (default:
    ``google.auth.transport.requests.Request()``); ``clock`` returns the current naive UTC time
    (tests pass a fixed one). ``project`` is the project the credentials name, if any.
    """

    def __init__(
        self,
        credentials: Any,
        project: Optional[str] = None,
        *,
        margin: datetime.timedelta = DEFAULT_MARGIN,
        request: Any = None,
        clock: Callable[[], datetime.datetime] = _utcnow,
    ) -> None:
        self.credentials = credentials
        self.project = project
        self.margin = margin
        self._request = request
        self._clock = clock
        self._lock = threading.Lock()
        self._rejected = False

    @classmethod
    def from_adc(cls, scopes: Sequence[str] = SCOPES, **kwargs: Any) -> TokenSource:
        """Application Default Credentials: ``google.auth.default(scopes=...)``.

        Raises :class:`VertexAuthError` saying how to set them up when there are none.
        """
        import google.auth
        from google.auth.exceptions import DefaultCredentialsError

        try:
            credentials, project = google.auth.default(scopes=list(scopes))
        except DefaultCredentialsError as exc:
            raise VertexAuthError(f"Vertex AI: no Google Cloud credentials found ({exc}); {_ADC_HELP}") from None
        return cls(credentials, project or None, **kwargs)

    @classmethod
    def for_credentials(cls, credentials: Any, scopes: Sequence[str] = SCOPES, **kwargs: Any) -> TokenSource:
        """A source for credentials the caller built (service account, user, impersonated...);
        scopes are added when the credentials need them."""
        from google.auth.credentials import with_scopes_if_required

        project = getattr(credentials, "project_id", None)  # service-account keys name their project
        return cls(with_scopes_if_required(credentials, list(scopes)), project, **kwargs)

    def token(self) -> str:
        """A valid access token (refreshing first when it expires within ``margin``).

        Raises :class:`VertexAuthError` when the refresh fails or yields no token.
        """
        with self._lock:
            if self._rejected or self._needs_refresh():
                self._refresh()
                self._rejected = False
            token = getattr(self.credentials, "token", None)
        if not token:
            raise VertexAuthError(f"Vertex AI: the Google Cloud credentials gave no access token; {_ADC_HELP}")
        return str(token)

    def invalidate(self) -> None:
        """The server rejected the current token (HTTP 401): the next :meth:`token` refreshes."""
        with self._lock:
            self._rejected = True

    def _needs_refresh(self) -> bool:
        credentials = self.credentials
        if not getattr(credentials, "token", None):
            return True
        expiry = getattr(credentials, "expiry", None)
        if expiry is None:  # a token without an expiry (e.g. one passed in by hand)
            return False
        now = self._clock()
        if expiry.tzinfo is not None and now.tzinfo is None:
            now = now.replace(tzinfo=datetime.timezone.utc)
        return expiry - now <= self.margin

    def _refresh(self) -> None:
        request = self._request
        if request is None:
            from google.auth.transport.requests import Request

            request = self._request = Request()
        try:
            self.credentials.refresh(request)
        except Exception as exc:  # RefreshError, TransportError, ... : say which, never the secrets
            detail = redact(f"{type(exc).__name__}: {exc}", self._secrets())
            raise VertexAuthError(
                f"Vertex AI: could not refresh the Google Cloud access token: {detail}; {_ADC_HELP}"
            ) from None

    def _secrets(self) -> List[str]:
        values = []
        for name in ("token", "refresh_token", "client_secret", "_refresh_token", "_client_secret"):
            value = getattr(self.credentials, name, None)
            if isinstance(value, str):
                values.append(value)
        return values

    def __repr__(self) -> str:
        return f"<TokenSource {type(self.credentials).__name__} project={self.project!r}>"

"""Bearer tokens for Vertex AI from Application Default Credentials (``google-auth``).

:class:`TokenSource` wraps one ``google.auth.credentials.Credentials`` object and hands out its
access token, refreshing it *before* it expires (``margin``, 5 minutes by default) so a token never
runs out in the middle of a long streamed response. :meth:`TokenSource.apply` adds every header the
credentials add to a request (``authorization``, and ``x-goog-user-project`` for a quota project).

A refresh runs on a helper (daemon) thread, one at a time: many threads asking at once cause one
refresh and all get its token. Each caller waits for it or for its abort signal, whichever comes
first; an aborted caller raises :class:`~agentcore.providers.http.RequestAborted` while the refresh
goes on, and the next caller waits for that same refresh (and uses its token) instead of starting
another.

``google.auth`` is imported on first use, never when the plugin is loaded. Tokens, refresh tokens
and client secrets never appear in a repr or an exception message.
"""

from __future__ import annotations

import datetime
import threading
from typing import Any, Callable, List, MutableMapping, Optional, Sequence

from agentcore.providers.base import ABORTED_MESSAGE, ProviderError, as_signal, redact, signal_aborted
from agentcore.providers.http import RequestAborted

__all__ = ["SCOPES", "VertexAuthError", "TokenSource"]

SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
DEFAULT_MARGIN = datetime.timedelta(minutes=5)
#: How often a caller waiting for a refresh checks its abort signal (a ``threading.Event`` signal
#: has no listeners that could wake it).
ABORT_POLL_SECONDS = 0.05
_ADC_HELP = (
    "run `gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS to a "
    "service-account key file, or pass api_key= (GOOGLE_CLOUD_API_KEY) for Vertex AI express mode"
)


class VertexAuthError(ProviderError):
    """No usable Google Cloud credentials, or refreshing the access token failed."""


def _utcnow() -> datetime.datetime:
    # google-auth keeps ``expiry`` as a naive UTC datetime
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


class _Refresh:
    """One refresh on its helper thread: ``done`` is set when it ended, ``error`` says why it failed."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.error: Optional[str] = None


def _wait(refresh: _Refresh, signal: Any) -> None:
    """Block until ``refresh`` ends; raise :class:`RequestAborted` if ``signal`` fires first, and
    :class:`VertexAuthError` (a new one for each caller) if the refresh failed."""
    if signal is None:
        refresh.done.wait()
    else:
        while not refresh.done.wait(ABORT_POLL_SECONDS):
            if signal_aborted(signal):
                raise RequestAborted(ABORTED_MESSAGE)
    if refresh.error is not None:
        raise VertexAuthError(refresh.error)


class TokenSource:
    """Access tokens and request headers of ``credentials``, refreshed ``margin`` before expiry;
    thread-safe.

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
        self._refreshing: Optional[_Refresh] = None  # the refresh under way, if any

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

    def token(self, signal: Any = None) -> str:
        """A valid access token (refreshing first when it expires within ``margin``).

        ``signal`` (an abort signal or ``threading.Event``) ends the wait for a refresh with
        :class:`RequestAborted`; the refresh itself goes on (see the module docstring). Raises
        :class:`VertexAuthError` when the refresh fails or yields no token.
        """
        self._ensure_fresh(signal)
        return self._current_token()

    def apply(self, headers: MutableMapping[str, str], signal: Any = None) -> None:
        """Add the credentials' headers to ``headers``: ``authorization`` with a valid token (as
        :meth:`token`, which also says how it fails) and whatever else google-auth's
        ``credentials.apply`` adds, e.g. ``x-goog-user-project`` for a quota project."""
        self._ensure_fresh(signal)
        self.credentials.apply(headers, token=self._current_token())

    def invalidate(self) -> None:
        """The server rejected the current token (HTTP 401): the next :meth:`token` or :meth:`apply` refreshes."""
        with self._lock:
            self._rejected = True

    def _ensure_fresh(self, signal: Any) -> None:
        """Start a refresh when the token is missing, rejected or about to expire (unless one is
        under way already), then wait for the one under way; see :func:`_wait` for failures."""
        with self._lock:
            refresh = self._refreshing
            if refresh is None and (self._rejected or self._needs_refresh()):
                refresh = self._refreshing = _Refresh()
                name = "agentcore-vertex-token-refresh"
                threading.Thread(target=self._run_refresh, args=(refresh,), name=name, daemon=True).start()
        if refresh is not None:
            _wait(refresh, as_signal(signal))

    def _current_token(self) -> str:
        token = getattr(self.credentials, "token", None)
        if not token:
            raise VertexAuthError(f"Vertex AI: the Google Cloud credentials gave no access token; {_ADC_HELP}")
        return str(token)

    def _run_refresh(self, refresh: _Refresh) -> None:
        """The helper thread's body: refresh, record the outcome, let the next caller start anew."""
        refreshed = False
        try:
            self._refresh()
            refreshed = True
        except VertexAuthError as exc:
            refresh.error = str(exc)
        finally:
            with self._lock:
                self._refreshing = None
                if refreshed:
                    self._rejected = False
            refresh.done.set()

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

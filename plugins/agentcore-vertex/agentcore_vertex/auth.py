"""Bearer tokens for Vertex AI from Application Default Credentials (``google-auth``).

:class:`TokenSource` wraps one ``google.auth.credentials.Credentials`` object and hands out its
access token, refreshing it *before* it expires (``margin``, 5 minutes by default) so a token never
runs out in the middle of a long streamed response. :meth:`TokenSource.apply` adds every header the
credentials add to a request (``authorization``, and ``x-goog-user-project`` for a quota project).

A refresh runs on a helper (daemon) thread, one at a time: many threads asking at once cause one
refresh and all get its token. Each caller waits for it or for its abort signal, whichever comes
first; an aborted caller raises :class:`~agentcore.providers.http.RequestAborted` while the refresh
goes on, and the next caller waits for that same refresh (and uses its token) instead of starting
another. When the helper thread cannot be started (``RuntimeError: can't start new thread``, a
process or container thread limit), the refresh runs on the calling thread instead, and the source
stays usable. That refresh sends its requests with agentcore's abortable ``send_abortable``: an
:class:`~agentcore.signals.AbortSignal` ends it at once (its listener runs on the aborting thread),
a ``threading.Event`` before each request google-auth makes (no thread can watch it), both with
:class:`~agentcore.providers.http.RequestAborted`; whoever waited for it starts another. A
``request`` transport given to :class:`TokenSource` is used as it is (not abortable).

The early refresh (within ``margin`` of the expiry) is advisory, as in google-auth and botocore:
when it fails while the current token is still valid (present, not expired, not rejected by the
server), the current token is used and the failure is logged (WARNING on the
``agentcore_vertex.auth`` logger, when logging is configured; never the token); the next call tries
again. A refresh that fails when the token is missing, expired or rejected raises
:class:`VertexAuthError`.

``google.auth`` is imported on first use, never when the plugin is loaded. Tokens, refresh tokens
and client secrets never appear in a repr or an exception message.
"""

from __future__ import annotations

import datetime
import logging
import os
import threading
from typing import Any, Callable, List, MutableMapping, Optional, Sequence, Tuple

from agentcore.providers.base import ABORTED_MESSAGE, ProviderError, as_signal, redact, signal_aborted
from agentcore.providers.http import RequestAborted

__all__ = ["SCOPES", "VertexAuthError", "TokenSource"]

SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
DEFAULT_MARGIN = datetime.timedelta(minutes=5)
#: How often a caller waiting for a refresh checks its abort signal (a ``threading.Event`` signal
#: has no listeners that could wake it).
ABORT_POLL_SECONDS = 0.05
_log = logging.getLogger(__name__)
_THREAD_NAME = "agentcore-vertex-token-refresh"
_TOKEN_SESSION = "google-vertex-token"  # the core's shared session of inline (abortable) refreshes
_ADC_HELP = (
    "run `gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS to a "
    "service-account key file, or pass api_key= (GOOGLE_CLOUD_API_KEY) for Vertex AI express mode"
)


class VertexAuthError(ProviderError):
    """No usable Google Cloud credentials, or refreshing the access token failed."""


def _utcnow() -> datetime.datetime:
    # google-auth keeps ``expiry`` as a naive UTC datetime
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


def _error_text(exc: BaseException) -> str:
    """The text of ``exc``. An exception with several arguments and no text of its own joins them,
    each as text (an exception among them as its type and text), instead of ``str()``'s tuple
    repr: google-auth passes the cause as a second argument, and its repr shows a
    ``UnicodeDecodeError``'s whole undecodable input (a key file saved as UTF-16, a binary .p12
    key), where its text shows one byte."""
    if type(exc).__str__ is not BaseException.__str__ or len(exc.args) < 2:
        return str(exc) or type(exc).__name__
    parts = []
    for arg in exc.args:
        parts.append(f"{type(arg).__name__}: {_error_text(arg)}" if isinstance(arg, BaseException) else str(arg))
    return ": ".join(parts)


def _scope_list(scopes: Any) -> List[str]:
    """``scopes`` as a list of OAuth scopes; a single string is one scope (``list()`` of it would be
    its characters, each sent as a scope the token endpoint refuses). Raises ``TypeError`` naming
    ``scopes`` for anything that is not a string or strings."""
    if isinstance(scopes, str):
        return [scopes]
    try:
        found = list(scopes)
    except TypeError:
        raise TypeError(f"Vertex AI: scopes must be a string or strings, not {type(scopes).__name__}") from None
    wrong = next((scope for scope in found if not isinstance(scope, str)), None)
    if wrong is not None or not found:
        shown = "no scope" if not found else type(wrong).__name__
        raise TypeError(f"Vertex AI: scopes must be a string or strings, got {shown}")
    return found


def _adc_file() -> str:
    """`` (GOOGLE_APPLICATION_CREDENTIALS=path)`` when that variable names the file, else ``""``."""
    path = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
    return f" (GOOGLE_APPLICATION_CREDENTIALS={path})" if path else ""


class _Refresh:
    """One refresh: ``done`` is set when it ended, ``error`` says why it failed, ``abandoned``
    that it ended without an outcome (an inline refresh its caller aborted): waiters start another."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.error: Optional[str] = None
        self.abandoned = False


class _AbortableSession:
    """The session google-auth's ``requests`` transport sends an inline refresh through (no helper
    thread could start, so nothing else can end the wait): each request goes out with agentcore's
    :func:`~agentcore.providers.http.send_abortable` on the core's shared session, which an abort of
    an :class:`~agentcore.signals.AbortSignal` interrupts while it connects, waits for the answer or
    reads it (the listener runs on the aborting thread). A ``threading.Event`` signal has no
    listener without a watcher thread: it is checked before each request (google-auth retries a
    failed token request), so its abort waits for the request under way."""

    def __init__(self, signal: Any) -> None:
        from agentcore.providers.http import get_session

        self._signal = signal
        self._session = get_session(_TOKEN_SESSION)

    def request(self, method: str, url: str, **kwargs: Any) -> Any:
        from agentcore.providers.http import send_abortable

        if signal_aborted(as_signal(self._signal)):
            raise RequestAborted(ABORTED_MESSAGE)
        listened = self._signal if hasattr(self._signal, "add_listener") else None
        return send_abortable(self._session, method, url, listened, **kwargs)

    def get_adapter(self, url: str) -> Any:  # google-auth looks at it for mutual TLS endpoints
        return self._session.get_adapter(url)

    def close(self) -> None:
        """The shared session is the core's: google-auth's transport closes its session when
        collected, and this one stays open."""


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
        self._own_request = request is not None  # given by the caller: used for every refresh
        self._clock = clock
        self._lock = threading.Lock()
        self._rejected = False
        self._refreshing: Optional[_Refresh] = None  # the refresh under way, if any

    @classmethod
    def from_adc(cls, scopes: Sequence[str] = SCOPES, **kwargs: Any) -> TokenSource:
        """Application Default Credentials: ``google.auth.default(scopes=...)`` (one scope may be
        given as a string; anything else than strings is a ``TypeError`` naming ``scopes``).

        Raises :class:`VertexAuthError` saying how to set them up when there are none.
        """
        import google.auth
        from google.auth.exceptions import DefaultCredentialsError

        try:
            credentials, project = google.auth.default(scopes=_scope_list(scopes))
        except DefaultCredentialsError as exc:
            raise VertexAuthError(
                f"Vertex AI: no Google Cloud credentials found ({_error_text(exc)}); {_ADC_HELP}"
            ) from None
        except Exception as exc:  # a file google-auth trips over: a directory, JSON that is no object...
            raise VertexAuthError(
                f"Vertex AI: could not load the Google Cloud credentials{_adc_file()}: "
                f"{type(exc).__name__}: {_error_text(exc)}; {_ADC_HELP}"
            ) from None
        return cls(credentials, project or None, **kwargs)

    @classmethod
    def for_credentials(cls, credentials: Any, scopes: Sequence[str] = SCOPES, **kwargs: Any) -> TokenSource:
        """A source for credentials the caller built (service account, user, impersonated...);
        scopes are added when the credentials need them (``scopes`` as for :meth:`from_adc`)."""
        from google.auth.credentials import with_scopes_if_required

        project = getattr(credentials, "project_id", None)  # service-account keys name their project
        scoped = with_scopes_if_required(credentials, _scope_list(scopes))  # type: ignore[no-untyped-call]
        return cls(scoped, project, **kwargs)

    def token(self, signal: Any = None) -> str:
        """A valid access token (refreshing first when it expires within ``margin``).

        ``signal`` (an abort signal or ``threading.Event``) ends the wait for a refresh with
        :class:`RequestAborted`; the refresh itself goes on (see the module docstring). Raises
        :class:`VertexAuthError` when the refresh fails or yields no token, unless the refresh
        was an early one and the current token is still valid (then that token is returned).
        """
        self._ensure_fresh(signal)
        return self._current_token()

    def apply(self, headers: MutableMapping[str, str], signal: Any = None) -> str:
        """Add the credentials' headers to ``headers``: ``authorization`` with a valid token (as
        :meth:`token`, which also says how it fails) and whatever else google-auth's
        ``credentials.apply`` adds, e.g. ``x-goog-user-project`` for a quota project. Returns the
        token (for :meth:`invalidate`)."""
        self._ensure_fresh(signal)
        token = self._current_token()
        self.credentials.apply(headers, token=token)
        return token

    def invalidate(self, token: Optional[str] = None) -> None:
        """The server rejected ``token`` (HTTP 401; default: the current token): the next
        :meth:`token` or :meth:`apply` refreshes. A ``token`` that a refresh replaced already is
        ignored: a late 401 for the old token (a request sent before the refresh) keeps the new one."""
        with self._lock:
            if token is None or token == getattr(self.credentials, "token", None):
                self._rejected = True

    def _ensure_fresh(self, signal: Any) -> None:
        """Start a refresh when the token is missing, rejected or about to expire (unless one is
        under way already), then wait for the one under way; see :func:`_wait` for failures. A
        failed refresh raises only when the current token cannot be used any more
        (:meth:`_usable`): an early refresh is advisory. An inline refresh (no helper thread could
        start) runs with ``signal`` and raises :class:`RequestAborted` when it fires; whoever
        waited for it then starts another."""
        while True:
            refresh, inline = self._start_refresh()
            if refresh is None:
                return
            if inline:  # still recorded as under way: other callers wait for this one
                self._run_refresh(refresh, signal)
            try:
                _wait(refresh, as_signal(signal))
            except VertexAuthError as exc:
                with self._lock:
                    usable = self._usable()
                    expiry = getattr(self.credentials, "expiry", None)
                if not usable:
                    raise
                if _log.hasHandlers():  # else the request goes on quietly (logging's last resort would print it)
                    _log.warning("early refresh failed, using the current token until it expires (%s): %s", expiry, exc)
                return
            if not refresh.abandoned:
                return

    def _start_refresh(self) -> Tuple[Optional[_Refresh], bool]:
        """The refresh under way, or a new one when the token needs it (on a helper thread, else
        ``inline``: the caller runs it); ``(None, False)`` when the current token will do."""
        with self._lock:
            refresh = self._refreshing
            if refresh is not None or not (self._rejected or self._needs_refresh()):
                return refresh, False
            refresh = self._refreshing = _Refresh()
            thread = threading.Thread(target=self._run_refresh, args=(refresh,), name=_THREAD_NAME, daemon=True)
            try:
                thread.start()
            except RuntimeError as exc:  # "can't start new thread": nothing will run this refresh
                _log.debug("could not start the token refresh thread (%s): refreshing on the calling thread", exc)
                return refresh, True
            return refresh, False

    def _usable(self) -> bool:
        """Whether the current token may still be sent: present, not rejected by the server and
        not expired (a token without an expiry does not expire). Call with the lock held."""
        credentials = self.credentials
        if self._rejected or not getattr(credentials, "token", None):
            return False
        expiry = getattr(credentials, "expiry", None)
        return expiry is None or expiry > self._now(expiry)

    def _current_token(self) -> str:
        token = getattr(self.credentials, "token", None)
        if not token:
            raise VertexAuthError(f"Vertex AI: the Google Cloud credentials gave no access token; {_ADC_HELP}")
        return str(token)

    def _run_refresh(self, refresh: _Refresh, signal: Any = None) -> None:
        """The helper thread's body (or the caller's, inline, with its ``signal``): refresh, record
        the outcome, let the next caller start anew. An aborted inline refresh raises
        :class:`RequestAborted`, marked ``abandoned``."""
        refreshed = False
        try:
            self._refresh(signal)
            refreshed = True
        except VertexAuthError as exc:
            refresh.error = str(exc)
        except RequestAborted:  # an inline refresh its caller aborted: the waiters start another
            refresh.abandoned = True
            raise
        except BaseException as exc:  # KeyboardInterrupt on the calling thread, SystemExit...
            refresh.error = f"Vertex AI: the Google Cloud token refresh was interrupted ({type(exc).__name__})"
            raise
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
        return expiry - self._now(expiry) <= self.margin

    def _now(self, expiry: datetime.datetime) -> datetime.datetime:
        """The clock's time, comparable with ``expiry`` (aware when it is)."""
        now = self._clock()
        if expiry.tzinfo is not None and now.tzinfo is None:
            now = now.replace(tzinfo=datetime.timezone.utc)
        return now

    def _refresh(self, signal: Any = None) -> None:
        """``credentials.refresh``; with ``signal`` (an inline refresh) through the abortable
        transport, unless the caller gave its own ``request``."""
        from google.auth.transport.requests import Request

        request = self._request
        if signal is not None and not self._own_request:
            session: Any = _AbortableSession(signal)  # what google-auth calls of a requests.Session
            request = Request(session=session)
        elif request is None:
            request = self._request = Request()
        try:
            self.credentials.refresh(request)
        except RequestAborted:
            raise
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

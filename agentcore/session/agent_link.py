"""Connect an Agent to a Session: resume from the session, record every finished message.

``restore_agent(agent, session)`` loads ``session.build_context()`` into the agent (messages, thinking
level, and, when the agent has no model yet, the session's model: see :func:`session_model`).
``attach_session(agent, session)`` subscribes a listener that appends each message at its
``message_end`` event (user prompts, assistant responses, tool results), preceded by a
``thinking_level_change`` / ``model_change`` entry whenever the agent's thinking level or model differ
from what the session last recorded. A ``model_change`` entry also carries the model's endpoint
(``api``, ``baseUrl``, ``contextWindow``, ``maxTokens``, ``reasoning``: extra fields the reference
keeps and ignores), so a model the registry does not know (a local server's) can be rebuilt on
resume. Never recorded: API keys, ``headers``, a URL with user:password or a query string.
Listeners run on the run thread, so an entry is on disk (per the session's fsync policy) before the
loop goes on; an aborted or failed run leaves every message that ended, which is always a loadable
session.
"""

from __future__ import annotations

import copy
import warnings
import weakref
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Tuple

from .._safe import exception_message, json_safe
from ..plugins import UnknownModelError
from ..types import ThinkingLevel, message_from_dict, message_to_dict, role_of
from .errors import SessionError
from .session import Session

if TYPE_CHECKING:
    from ..agent import Agent
    from .context import SessionContext

__all__ = ["attach_session", "restore_agent", "session_model", "model_endpoint", "UnresolvedModelError"]

_ENDPOINT_FIELDS = (
    ("api", "api"),
    ("base_url", "baseUrl"),
    ("context_window", "contextWindow"),
    ("max_tokens", "maxTokens"),
    ("reasoning", "reasoning"),
)


class UnresolvedModelError(UnknownModelError):
    """The session's model can be neither found in the model registry nor rebuilt from the session.

    Raised by ``Agent(session=...)`` (given no ``model=`` and no ``stream_fn=``) before anything is
    written; the message names the model and says what to pass. ``model_key`` is the session's
    ``"provider/id"``, ``reason`` why it could not be rebuilt.
    """

    def __init__(self, message: str, model_key: Optional[str] = None, reason: str = "") -> None:
        super().__init__(message)
        self.model_key = model_key
        self.reason = reason


def restore_agent(agent: Agent, session: Session) -> SessionContext:
    """Put the session's current context into ``agent.state``; returns the :class:`SessionContext`.

    Messages and the thinking level always; the model only when the agent has none yet (its id is
    ``"unknown"``), through :func:`session_model`, except that a model rebuilt from the session's
    recorded endpoint is refused when the agent has a key of its own (``api_key=`` or
    ``get_api_key=``): that key would go to a URL the session file chose. When that fails the error
    propagates (:class:`UnresolvedModelError`, saying to pass ``model=``) unless the agent has a
    ``stream_fn``, which answers without a resolvable model; nothing is changed in ``agent`` or
    written to the session before it is raised.

    A recorded thinking level is taken in any case (``"High"`` is ``"high"``); one that is no
    :class:`~agentcore.types.ThinkingLevel` (another program's, or ``null``) is not taken: the
    agent keeps its level, a ``RuntimeWarning`` names the recorded value, and the level the agent
    runs with is recorded at its next message.
    """
    context = session.build_context()
    state = agent.state
    model = None
    if context.model is not None and getattr(getattr(state, "model", None), "id", "unknown") == "unknown":
        own_key = bool(getattr(agent, "api_key", None)) or getattr(agent, "get_api_key", None) is not None
        try:
            model = _session_model(session, context.model, getattr(agent, "plugins", None), own_key)
        except UnresolvedModelError:
            if getattr(agent, "stream_fn", None) is None:
                raise
    level = _known_level(context.thinking_level)
    if level is None:
        warnings.warn(
            WARN_UNKNOWN_LEVEL.format(
                level=context.thinking_level,
                where=session.path or "the session",
                known=", ".join(_LEVELS),
                kept=state.thinking_level,
            ),
            RuntimeWarning,
            stacklevel=2,
        )
    state.messages = list(context.messages)
    if level is not None:
        state.thinking_level = level
    if model is not None:
        state.model = model
    return context


_LEVELS = tuple(level.value for level in ThinkingLevel)

WARN_UNKNOWN_LEVEL = (
    "agentcore: {where} records thinking level {level!r}, which is none of {known}; "
    "the agent keeps {kept!r} (pass thinking_level= to choose another)"
)


def _known_level(value: Any) -> Optional[str]:
    """``value`` as a thinking level (any case), or None when it is none."""
    level = value.strip().lower() if isinstance(value, str) else None
    return level if level in _LEVELS else None


def session_model(session: Session, ref: Any = None, *, plugins: Any = None) -> Any:
    """The :class:`~agentcore.types.Model` to resume ``session`` with (``ref``: its ``ModelRef``;
    default: ``session.build_context().model``).

    1. The model registry (``plugins``' or the default one) has ``provider/id``: a copy of that model
       (the agent's own: changing its base_url or headers must not change other agents). A
       registered model is always taken from the registry, even when the session recorded another
       URL for it: a session file never decides where a provider's key is sent.
    2. Otherwise, the newest ``model_change`` entry of that model on the current branch that records
       an endpoint (``api`` and ``baseUrl``, written by agentcore) rebuilds it, provided its provider
       has no API-key environment variable (a local server's ``"local"``; a recorded URL must not
       receive ``OPENAI_API_KEY`` and the like).
    3. Else :class:`UnresolvedModelError` saying what to pass.
    """
    return _session_model(session, ref, plugins, False)


def _session_model(session: Session, ref: Any, plugins: Any, own_key: bool) -> Any:
    """:func:`session_model`; ``own_key``: the caller sends a key of its own (an agent's
    ``api_key``/``get_api_key``), so a model rebuilt from a recorded URL is refused too."""
    if ref is None:
        ref = session.build_context().model
        if ref is None:
            raise UnresolvedModelError("the session records no model: pass model= (or --model)")
    if plugins is None:
        from .. import plugins as registry

        get_model: Callable[[str], Any] = registry.get_model
    else:
        get_model = plugins.get_model
    try:
        return copy.deepcopy(get_model(ref.key))
    except UnknownModelError:
        pass
    endpoint = _recorded_endpoint(session, ref.provider, ref.model_id)
    from ..providers.base import ENV_API_KEYS

    if endpoint is not None and not ENV_API_KEYS.get(ref.provider) and not own_key:
        from ..types import Model

        return Model(id=ref.model_id, name=ref.model_id, provider=ref.provider, **endpoint)
    if endpoint is not None and own_key and not ENV_API_KEYS.get(ref.provider):
        why = (
            "the session records an endpoint for it, but the agent has an API key of its own "
            "(api_key= or get_api_key=), which a URL from a session file must not receive"
        )
    elif endpoint is not None:
        why = (
            f"the session records an endpoint for it, but provider {ref.provider!r} takes its API key "
            "from the environment, so a URL from a session file is not trusted"
        )
    else:
        why = "the session does not record its endpoint (api and base URL)"
    raise UnresolvedModelError(
        f"cannot resume with the session's model {ref.key!r}: it is not in the model registry and {why}. "
        "Pass the model: Agent(model=Model(id=..., api=..., provider=..., base_url=...)) or "
        'model="provider/id" from `agentcore models`; on the command line --model provider/id, or '
        f"--base-url URL (with --model {ref.model_id}) for a local server.",
        ref.key,
        why,
    )


def _model_changes(session: Session, provider: str, model_id: str) -> Iterator[Any]:
    """The ``model_change`` entries of ``provider``/``model_id`` on the current branch, newest
    first. Walks entry ids and types only (cheap on a long session), decoding just those entries."""
    storage = session.storage
    leaf = storage.leaf_id
    if leaf is None or not storage.count_of("model_change"):
        return
    for entry_id in storage.path_to_root(leaf):
        if storage.type_of(entry_id) != "model_change":
            continue
        entry: Any = storage.get_entry(entry_id)  # a ModelChangeEntry (type_of said so)
        if entry is not None and entry.provider == provider and entry.model_id == model_id:
            yield entry


def _settings_at_leaf(session: Session) -> Tuple[str, Optional[Tuple[str, str]]]:
    """The thinking level and ``(provider, model id)`` the session records at its current leaf,
    as :meth:`Session.build_context` resolves them, without decoding the branch's messages."""
    from .context import _resolve_state

    storage = session.storage
    if storage.leaf_id is None:
        return "off", None
    path = storage.path_to_root(storage.leaf_id)
    path.reverse()
    thinking, model, _ = _resolve_state(storage, path)
    return thinking, None if model is None else (model.provider, model.model_id)


def _recorded_fields(entry: Any) -> Dict[str, Any]:
    """The endpoint fields (as :func:`model_endpoint` writes them) on a ``model_change`` entry."""
    extra = getattr(entry, "extra", None) or {}
    return {key: extra[key] for _, key in _ENDPOINT_FIELDS if key in extra}


def _recorded_endpoint(session: Session, provider: str, model_id: str) -> Optional[Dict[str, Any]]:
    """Model keyword arguments from the newest ``model_change`` of ``provider``/``model_id`` on the
    current branch that records a usable endpoint (``api`` and ``baseUrl``), or None."""
    for entry in _model_changes(session, provider, model_id):
        extra = _recorded_fields(entry)
        api, base_url = extra.get("api"), extra.get("baseUrl")
        if not (isinstance(api, str) and api and isinstance(base_url, str) and base_url):
            continue
        found: Dict[str, Any] = {"api": api, "base_url": base_url}
        for name, key in _ENDPOINT_FIELDS[2:4]:
            value = extra.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                found[name] = value
        if isinstance(extra.get("reasoning"), bool):
            found["reasoning"] = extra["reasoning"]
        return found
    return None


def model_endpoint(model: Any) -> Dict[str, Any]:
    """What a ``model_change`` entry records about ``model`` besides provider and id: ``api``,
    ``baseUrl`` (omitted when it holds user:password or a query string, which may be secrets),
    ``contextWindow``, ``maxTokens``, ``reasoning``. Never the key or ``headers``."""
    fields: Dict[str, Any] = {}
    for name, key in _ENDPOINT_FIELDS:
        value = getattr(model, name, None)
        if name == "base_url":
            value = _safe_url(value)
        if isinstance(value, (str, int, bool)) and value != "":
            fields[key] = value
    return fields


def _safe_url(url: Any) -> Optional[str]:
    """``url`` when it can be recorded as it is, else None: one with user info, a query or a
    fragment (they may carry credentials), also where URL parsers see none (a password holding an
    unencoded ``/``, a URL written without its scheme: any ``@`` or a missing ``://``)."""
    if not isinstance(url, str) or not url or "@" in url or "://" not in url:
        return None
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
            return None
    except ValueError:
        return None
    return url


def _model_of(agent: Any) -> Optional[Tuple[str, str]]:
    model = getattr(agent.state, "model", None)
    if model is None or getattr(model, "id", "unknown") == "unknown":
        return None
    return (str(model.provider), str(model.id))


WARN_NOT_JSON = (
    "agentcore: a {role} message holds values JSON cannot carry ({problem}); the session records "
    "its JSON-safe form (NaN/Infinity -> null, bytes -> base64, sets/tuples -> lists, other objects "
    "-> their repr). Later such messages of this session are converted without a warning."
)


def _json_safe_message(message: Any) -> Any:
    """``message`` rebuilt from the JSON-safe form of its reference dict (see ``json_safe``)."""
    try:
        data = message_to_dict(message)
    except Exception:  # noqa: BLE001 - a to_dict that cannot copy a value (deepcopy of a socket)
        data = message._raw_dict() if hasattr(message, "_raw_dict") else {"role": role_of(message)}
    return message_from_dict(json_safe(data))


ERR_SESSION_BUSY = (
    "this session is recording another Agent's run: one run per session at a time (two agents' "
    "turns would interleave in one branch); wait for that run, or give this agent a session of its own"
)


def claim_session_run(session: Any, agent: Agent) -> None:
    """Mark ``session`` as recording ``agent``'s run (the agent's run start). RuntimeError
    (:data:`ERR_SESSION_BUSY`) while another agent's run records into it: several agents may be
    attached to one session (a notebook cell that makes a new agent on it again), but their runs
    take turns. A session without the claim (a duck-typed one) is not checked."""
    lock = getattr(session, "_lock", None)
    if lock is None or not hasattr(session, "_recording_run"):
        return
    with lock:
        owner = session._recording_run() if session._recording_run is not None else None
        if owner is not None and owner is not agent:
            raise RuntimeError(ERR_SESSION_BUSY)
        session._recording_run = weakref.ref(agent)


def release_session_run(session: Any, agent: Agent) -> None:
    """Undo :func:`claim_session_run` once ``agent``'s run has settled."""
    lock = getattr(session, "_lock", None)
    if lock is None or not hasattr(session, "_recording_run"):
        return
    with lock:
        if session._recording_run is not None and session._recording_run() is agent:
            session._recording_run = None


def attach_session(agent: Agent, session: Session) -> Callable[[], None]:
    """Record ``agent``'s messages into ``session`` as they finish. Returns the unsubscribe function.

    Session write errors propagate from the listener (the agent reports them as listener failures);
    nothing is recorded twice. A message holding values JSON cannot carry (NaN, bytes, sets, an
    arbitrary object in a tool result's ``details``) is recorded in its JSON-safe form
    (:func:`agentcore._safe.json_safe`) instead of failing the run, with one ``RuntimeWarning`` per
    attached session; the agent's own transcript keeps the original objects.
    """
    # What the session records at the leaf the agent writes under: the thinking level, the model
    # (provider, id) and (model, endpoint fields) of its newest model_change (the endpoint counts
    # only while recorded[1] is that model: an assistant message of another model replaces it).
    # Read again whenever the leaf moved elsewhere (a branch switch, navigate_tree), since that
    # branch may record other settings or none.
    recorded: List[Any] = [None, None]
    endpoint_of: List[Any] = [None]
    seen_leaf: List[Any] = [None]

    def read_recorded() -> None:
        recorded[0], recorded[1] = _settings_at_leaf(session)
        endpoint_of[0] = None
        if recorded[1] is not None:
            newest = next(_model_changes(session, *recorded[1]), None)
            if newest is not None:
                endpoint_of[0] = (recorded[1], _recorded_fields(newest))
        seen_leaf[0] = session.leaf_id

    read_recorded()
    this = weakref.ref(agent)  # the agent holds this listener: no cycle through it

    def record_settings() -> None:
        agent = this()
        if agent is None:  # pragma: no cover - the agent runs this listener itself
            return
        if session.leaf_id != seen_leaf[0]:
            read_recorded()
        level = str(agent.state.thinking_level)
        if level != recorded[0]:
            session.append_thinking_level_change(level)
            recorded[0] = level
        model = _model_of(agent)
        if model is None:
            return
        endpoint = model_endpoint(agent.state.model)
        # a new model, or the same one reached elsewhere (also: a file whose model_change predates
        # endpoint recording): a model_change with the endpoint lets a later resume rebuild it
        if model != recorded[1] or endpoint_of[0] != (model, endpoint):
            session.append_model_change(*model, extra=endpoint)
            recorded[1] = model
            endpoint_of[0] = (model, endpoint)

    warned = [False]

    def append(message: Any) -> None:
        try:
            session.append_message(message)
        except SessionError as exc:
            if exc.code != "invalid_payload":
                raise
            safe = _json_safe_message(message)  # nothing was written: record the safe form
            session.append_message(safe)
            if not warned[0]:
                warned[0] = True
                warnings.warn(
                    WARN_NOT_JSON.format(role=role_of(message), problem=exception_message(exc)),
                    RuntimeWarning,
                    stacklevel=2,
                )

    def listener(event: Any) -> None:
        if getattr(event, "type", None) != "message_end":
            return
        message = event.message
        record_settings()
        append(message)
        if getattr(message, "role", None) == "assistant":
            recorded[1] = (str(message.provider), str(message.model))
        seen_leaf[0] = session.leaf_id

    return agent.subscribe(listener)

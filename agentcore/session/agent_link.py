"""Connect an Agent to a Session: resume from the session, record every finished message.

``restore_agent(agent, session)`` loads ``session.build_context()`` into the agent (messages, thinking
level, and, when the agent has no model yet and a ``get_model`` lookup finds it, the model).
``attach_session(agent, session)`` subscribes a listener that appends each message at its
``message_end`` event (user prompts, assistant responses, tool results), preceded by a
``thinking_level_change`` / ``model_change`` entry whenever the agent's thinking level or model differ
from what the session last recorded. Listeners run on the run thread, so an entry is on disk (per the
session's fsync policy) before the loop goes on; an aborted or failed run leaves every message that
ended, which is always a loadable session.
"""

from __future__ import annotations

import copy
import warnings
from typing import Any, Callable, List, Optional, Tuple

from .._safe import exception_message, json_safe
from ..types import message_from_dict, message_to_dict, role_of
from .errors import SessionError
from .session import Session

__all__ = ["attach_session", "restore_agent"]


def restore_agent(agent: Any, session: Session) -> Any:
    """Put the session's current context into ``agent.state``; returns the :class:`SessionContext`."""
    context = session.build_context()
    state = agent.state
    state.messages = list(context.messages)
    state.thinking_level = context.thinking_level
    if context.model is not None and getattr(getattr(state, "model", None), "id", "unknown") == "unknown":
        try:
            from ..plugins import get_model

            # the agent's own copy: changing its base_url/headers must not change other agents
            state.model = copy.deepcopy(get_model(context.model.key))
        except Exception:  # unknown to the registry: keep the agent's model
            pass
    return context


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
        data = {"role": role_of(message)}
        for attr, key, kind in getattr(message, "_wire", ()):
            value = getattr(message, attr, None)
            if value is not None or kind != "opt":
                data[key] = value
    return message_from_dict(json_safe(data))


def attach_session(agent: Any, session: Session) -> Callable[[], None]:
    """Record ``agent``'s messages into ``session`` as they finish. Returns the unsubscribe function.

    Session write errors propagate from the listener (the agent reports them as listener failures);
    nothing is recorded twice. A message holding values JSON cannot carry (NaN, bytes, sets, an
    arbitrary object in a tool result's ``details``) is recorded in its JSON-safe form
    (:func:`agentcore._safe.json_safe`) instead of failing the run, with one ``RuntimeWarning`` per
    attached session; the agent's own transcript keeps the original objects.
    """
    context = session.build_context()
    recorded: List[Any] = [context.thinking_level,
                           None if context.model is None else (context.model.provider, context.model.model_id)]

    def record_settings() -> None:
        level = str(agent.state.thinking_level)
        if level != recorded[0]:
            session.append_thinking_level_change(level)
            recorded[0] = level
        model = _model_of(agent)
        if model is not None and model != recorded[1]:
            session.append_model_change(*model)
            recorded[1] = model

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
                warnings.warn(WARN_NOT_JSON.format(role=role_of(message), problem=exception_message(exc)),
                              RuntimeWarning, stacklevel=2)

    def listener(event: Any) -> None:
        if getattr(event, "type", None) != "message_end":
            return
        message = event.message
        record_settings()
        append(message)
        if getattr(message, "role", None) == "assistant":
            recorded[1] = (str(message.provider), str(message.model))

    return agent.subscribe(listener)

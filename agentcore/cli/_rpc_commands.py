"""The commands of ``agentcore rpc`` (see :mod:`agentcore.cli._rpc` for the protocol).

Each command maps onto the public :class:`~agentcore.agent.Agent` and
:class:`~agentcore.session.Session` API. Names, fields and response ``data`` follow the
reference's ``docs/rpc.md``; docs/rpc.rst lists every difference. A handler returns the response
``data`` (None: no data), or raises :class:`~agentcore.cli._rpc.RpcError` with a message that says
what to send instead. Field types are checked before a handler runs (:class:`Command.check`).
The session and tree commands are in :mod:`agentcore.cli._rpc_sessions`, ``bash`` in
:mod:`agentcore.cli._rpc_bash`; :data:`COMMANDS` lists them all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Tuple

from ..providers.reasoning import clamp_to_model, supported_levels
from ..types import role_of
from ._info import shown_model_dict
from ._keys import stored_key
from ._rpc import NULL, SHUTDOWN_WAIT, RpcError, RpcServer, RunStarted
from ._rpc_bash import cmd_abort_bash, cmd_bash, flush_bash
from ._rpc_sessions import (
    cmd_clone,
    cmd_export_html,
    cmd_fork,
    cmd_get_fork_messages,
    cmd_get_tree,
    cmd_navigate_tree,
    cmd_new_session,
    cmd_set_session_name,
    cmd_switch_session,
    settle,
)
from ._setup import UsageError, check_api_key, check_thinking, resolve_model

__all__ = ["COMMANDS", "Command", "Field"]

_QUEUE_MODES = ("one-at-a-time", "all")
# --------------------------------------------------------------------------- field checks


@dataclass(frozen=True)
class Field:
    """A command field: its name, JSON type(s) (``str``, ``bool``, ``int``, ``list``, ``dict``,
    ``object`` for any), whether it is required, and the allowed values."""

    name: str
    kind: Any = str
    required: bool = True
    choices: Tuple[str, ...] = ()


_KIND_NAMES = {str: "a string", bool: "true or false", int: "a number", list: "an array", dict: "an object"}


@dataclass(frozen=True)
class Command:
    handler: Callable[[RpcServer, Dict[str, Any]], Any]
    fields: Tuple[Field, ...] = ()
    slow: bool = False  # answered from a worker thread so that abort can be read meanwhile
    busy: bool = False  # the agent counts as busy from dispatch to response (server.busy_with)
    # the busy commands (compact, navigate_tree) this one waits for when it is read while they
    # run: the commands that move to another session or read the session see their result
    after: Tuple[str, ...] = ()

    def check(self, command: Dict[str, Any]) -> None:
        """RpcError naming the first missing or mistyped field (null counts as absent)."""
        for f in self.fields:
            value = command.get(f.name)
            if value is None:
                if f.required:
                    raise RpcError(f"{command['type']}: missing field {f.name!r} ({_describe(f)})")
                continue
            if f.kind is not object and (not isinstance(value, f.kind) or (f.kind is int and isinstance(value, bool))):
                raise RpcError(f"{command['type']}: field {f.name!r} must be {_describe(f)}, got {value!r:.80}")
            if f.choices and value not in f.choices:
                raise RpcError(f"{command['type']}: field {f.name!r} must be {_describe(f)}, not {value!r:.80}")


def _describe(f: Field) -> str:
    if f.choices:
        return "one of " + ", ".join(repr(c) for c in f.choices)
    return _KIND_NAMES.get(f.kind, "a JSON value")


# --------------------------------------------------------------------------- prompting


_MESSAGE = Field("message")
_IMAGES = Field("images", list, required=False)


_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


def _user_message(command: Dict[str, Any]) -> Any:
    """The command's ``message`` and ``images`` (ImageContent dicts) as a UserMessage.

    RpcError naming the image when one is not ``{"data": BASE64, "mimeType": ...}`` with valid
    base64 of a PNG, JPEG, GIF or WebP image of that mime type: a bad image would be accepted,
    recorded in the session and then refused by the provider on every later request."""
    from ..types import ImageContent, TextContent, UserMessage

    blocks: List[Any] = [TextContent(command["message"])]
    for index, image in enumerate(command.get("images") or ()):
        where = f"{command['type']}: images[{index}]"
        if not isinstance(image, dict) or not isinstance(image.get("data"), str) or not image.get("mimeType"):
            raise RpcError(f'{where} must be {{"type": "image", "data": "<base64>", "mimeType": "image/png"}}')
        _check_image(where, image["data"], image["mimeType"])
        blocks.append(ImageContent(image["data"], image["mimeType"]))
    return UserMessage(content=blocks)


def _check_image(where: str, data: str, mime_type: Any) -> None:
    """RpcError unless ``data`` is base64 of an image of the kind ``mime_type`` names."""
    import base64
    import binascii

    from ..builtin_tools.read import detect_image_mime_type

    if mime_type not in _IMAGE_TYPES:
        raise RpcError(f"{where}: mimeType must be one of {', '.join(_IMAGE_TYPES)}, not {mime_type!r:.80}")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        prefix = " (send the base64 alone, without a data: URL prefix)" if data.startswith("data:") else ""
        raise RpcError(f"{where}: data is not valid base64{prefix}") from None
    found = detect_image_mime_type(raw[:16])
    if found is None:
        raise RpcError(f"{where}: data is not a PNG, JPEG, GIF or WebP image")
    if found != mime_type:
        raise RpcError(f'{where}: data is an {found} image, not {mime_type}: send "mimeType": "{found}"')


def _queue(server: RpcServer, kind: str, message: Any) -> None:
    with server.queued_lock:
        server.queued.append((kind, message))
    (server.agent.steer if kind == "steer" else server.agent.follow_up)(message)
    server.send_queue_update()


def _check_no_pending_approvals(server: RpcServer, command: str) -> None:
    pending = server.agent.pending_approvals
    if pending:
        calls = ", ".join(f"{p.tool_name} {p.tool_call_id}" for p in pending)
        raise RpcError(
            f"{command}: {len(pending)} tool call(s) wait for approval ({calls}): send "
            '{"type": "approve", "toolCallId": ...} or {"type": "deny", ...} for each first'
        )


def cmd_prompt(server: RpcServer, command: Dict[str, Any]) -> Any:
    """Start a run, or queue the message while one goes (``streamingBehavior``; without it an
    error). A run that begins between the check and the start (the one for messages queued as
    the last run ended) counts as going: the message is queued for it, or refused."""
    message = _user_message(command)
    agent = server.agent
    if server.running or server.busy_with is not None:
        return _queue_or_refuse(server, command, message)
    _check_no_pending_approvals(server, "prompt")
    flush_bash(server)
    try:
        return server.send_after("prompt", command.get("id"), lambda: agent.prompt(message, wait=False))
    except RunStarted:
        return _queue_or_refuse(server, command, message)


def _queue_or_refuse(server: RpcServer, command: Dict[str, Any], message: Any) -> None:
    behaviour = command.get("streamingBehavior")
    if behaviour is None:
        doing = "processing" if server.running else f"busy ({server.busy_with})"
        raise RpcError(
            f"Agent is already {doing}. Specify streamingBehavior ('steer' or 'followUp') to queue the message."
        )
    _queue(server, "steer" if behaviour == "steer" else "followUp", message)


def cmd_steer(server: RpcServer, command: Dict[str, Any]) -> Any:
    _queue(server, "steer", _user_message(command))


def cmd_follow_up(server: RpcServer, command: Dict[str, Any]) -> Any:
    _queue(server, "followUp", _user_message(command))


def cmd_abort(server: RpcServer, command: Dict[str, Any]) -> Any:
    """Abort the run (or compaction, or tree summary) and answer once it has ended (its agent_end
    came first). Messages queued for it wait for the next prompt, also those that came too late
    for it (no run starts for them, :meth:`RpcServer._resume_late`)."""
    with server.out.lock:  # counted before the abort: a run the resumer starts after this is stopped
        server.aborts += 1
    server.abort_requested = True
    busy = server.busy_abort
    if busy is not None:  # a navigate_tree dispatched but perhaps not begun yet
        busy.abort("agentcore rpc: abort")
    settle(server)


def cmd_continue(server: RpcServer, command: Dict[str, Any]) -> Any:
    """agentcore addition: ``Agent.continue_()`` (after approvals, or to retry after an error)."""
    agent = server.agent
    if server.running or server.busy_with is not None:
        raise RpcError("continue: the agent is busy; wait for agent_end")
    undecided = _undecided(server)
    if undecided:
        raise RpcError(f"continue: {len(undecided)} tool call(s) still wait for approve or deny: {_calls(undecided)}")
    agent.wait_for_idle(SHUTDOWN_WAIT)  # a run whose agent_end was written may still be finishing
    before = list(agent.messages)
    if before and role_of(before[-1]) == "assistant" and before[-1].stop_reason in ("error", "aborted"):
        # a retry: the failed answer leaves the live transcript and stays in the session file, as
        # the reference's retry does (the provider conversion skips it on a resume anyway)
        agent.messages = before[:-1]
    try:
        return server.send_after("continue", command.get("id"), lambda: agent.continue_(wait=False))
    except ValueError as exc:  # nothing to continue from
        raise RpcError(f"continue: {exc}") from None
    except BaseException:
        agent.messages = before  # nothing was started: the transcript stays as it was
        raise


# --------------------------------------------------------------------------- approvals (agentcore additions)


def _undecided(server: RpcServer) -> List[Any]:
    return [p for p in server.agent.pending_approvals if p.tool_call_id not in server.decided]


def _calls(pending: List[Any]) -> str:
    return ", ".join(f"{p.tool_name} {p.tool_call_id}" for p in pending)


def _approvals_data(server: RpcServer) -> List[Dict[str, Any]]:
    return [
        {
            "toolCallId": p.tool_call_id,
            "toolName": p.tool_name,
            "args": p.args,
            "decided": p.tool_call_id in server.decided,
        }
        for p in server.agent.pending_approvals
    ]


def _decide(server: RpcServer, command: Dict[str, Any], decide: Callable[[], None]) -> Any:
    """Record a decision; when it was the last one needed, continue the run (its events follow
    the response). ``data.continued`` says which."""
    if server.running:
        raise RpcError(f"{command['type']}: the agent is running; decide once its agent_end has arrived")
    try:
        decide()
    except (ValueError, TypeError) as exc:
        raise RpcError(f"{command['type']}: {exc}") from None
    server.decided.add(command["toolCallId"])
    if _undecided(server) or command.get("continue") is False:
        return {"continued": False, "pending": _approvals_data(server)}
    return server.send_after(
        command["type"],
        command.get("id"),
        lambda: server.agent.continue_(wait=False),
        data={"continued": True, "pending": _approvals_data(server)},
    )


def cmd_approve(server: RpcServer, command: Dict[str, Any]) -> Any:
    return _decide(server, command, lambda: server.agent.approve(command["toolCallId"], command.get("args")))


def cmd_deny(server: RpcServer, command: Dict[str, Any]) -> Any:
    return _decide(server, command, lambda: server.agent.deny(command["toolCallId"], command.get("reason")))


def cmd_get_pending_approvals(server: RpcServer, command: Dict[str, Any]) -> Any:
    return {"approvals": _approvals_data(server)}


# --------------------------------------------------------------------------- state and messages


def _model_dict(model: Any) -> Any:
    return shown_model_dict(model) if model is not None else None


def cmd_get_state(server: RpcServer, command: Dict[str, Any]) -> Any:
    agent, session = server.agent, server.session
    state: Dict[str, Any] = {
        "model": _model_dict(agent.model),
        "thinkingLevel": str(agent.thinking_level),
        "isStreaming": server.running,
        "isCompacting": server.busy_with == "compact",
        "steeringMode": agent.steering_mode,
        "followUpMode": agent.follow_up_mode,
        "sessionFile": session.path if session is not None else None,
        "sessionId": session.id if session is not None else None,
        "autoCompactionEnabled": bool(agent.compactor.settings.enabled),
        "messageCount": len(agent.messages),
        "pendingMessageCount": len(server.queued),
        "pendingApprovals": _approvals_data(server),
        "leafId": session.leaf_id if session is not None else None,
    }
    if session is not None and session.name:
        state["sessionName"] = session.name
    if state["sessionFile"] is None:
        del state["sessionFile"]  # the reference omits it for an in-memory session
    return state


def cmd_get_messages(server: RpcServer, command: Dict[str, Any]) -> Any:
    from ..types import message_to_dict

    return {"messages": [message_to_dict(m) for m in list(server.agent.messages)]}


def cmd_get_last_assistant_text(server: RpcServer, command: Dict[str, Any]) -> Any:
    from ..types import TextContent, role_of

    for message in reversed(list(server.agent.messages)):
        if role_of(message) == "assistant":
            text = "".join(b.text for b in message.content if isinstance(b, TextContent))
            return {"text": text}
    return {"text": None}


def cmd_get_session_stats(server: RpcServer, command: Dict[str, Any]) -> Any:
    """Counts, tokens and cost of the current transcript, and the context window in use."""
    from ..types import ToolCall, role_of

    messages = list(server.agent.messages)
    roles = [role_of(m) for m in messages]
    assistants = [m for m, r in zip(messages, roles) if r == "assistant"]
    tokens = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}
    cost = 0.0
    for message in assistants:
        usage = message.usage
        tokens["input"] += usage.input
        tokens["output"] += usage.output
        tokens["cacheRead"] += usage.cache_read
        tokens["cacheWrite"] += usage.cache_write
        cost += usage.cost.total
    session = server.session
    data: Dict[str, Any] = {
        "sessionId": session.id if session is not None else None,
        "userMessages": roles.count("user"),
        "assistantMessages": len(assistants),
        "toolCalls": sum(1 for m in assistants for b in m.content if isinstance(b, ToolCall)),
        "toolResults": roles.count("toolResult"),
        "totalMessages": len(messages),
        "tokens": dict(tokens, total=sum(tokens.values())),
        "cost": cost,
    }
    if session is not None and session.path:
        data["sessionFile"] = session.path
    window = getattr(server.agent.model, "context_window", 0) or 0
    if window:
        used = server.agent.compactor.context_tokens()
        data["contextUsage"] = {"tokens": used, "contextWindow": window, "percent": round(100.0 * used / window, 1)}
    return data


def cmd_get_commands(server: RpcServer, command: Dict[str, Any]) -> Any:
    return {"commands": []}  # agentcore has no extension commands, prompt templates or skills


# --------------------------------------------------------------------------- model and thinking


def cmd_set_model(server: RpcServer, command: Dict[str, Any]) -> Any:
    provider, model_id = command["provider"], command["modelId"]
    ref = "scripted" if provider == "scripted" else f"{provider}/{model_id}"
    try:
        if provider == "local" and server.context.options.base_url:
            from ._setup import local_model

            model, stream_fn = local_model(model_id, server.context.options.base_url), None
        else:
            model, stream_fn = resolve_model(ref, server.context.options.base_url)
    except UsageError as exc:
        raise RpcError(f"Model not found: {provider}/{model_id}: {exc}") from None
    _use_model(server, model, stream_fn)
    return shown_model_dict(model)


def _use_model(server: RpcServer, model: Any, stream_fn: Any) -> None:
    """Switch the agent to ``model``. The ``--api-key-env`` key goes to its own provider only
    (never to another company's endpoint); else the key stored by ``agentcore keys set`` (the
    environment's wins), as chat's ``/model`` does. A provider's key is masked in the output from
    now on. RpcError (nothing changed) when the provider has no key."""
    from ..providers.base import get_env_api_key

    key_provider, key = server.context.cli_key
    api_key = key if key and model.provider == key_provider else None
    if api_key is None and stream_fn is None:
        try:
            api_key = stored_key(str(model.provider))
        except UsageError as exc:  # a broken keys file
            raise RpcError(f"set_model: {exc}") from None
        server.out.mask(api_key)
    if stream_fn is None:
        try:
            check_api_key(model, api_key)
        except UsageError as exc:
            raise RpcError(
                f"set_model: {exc}".replace("--api-key-env NAME", "agentcore rpc --api-key-env NAME")
            ) from None
    server.out.mask(get_env_api_key(str(model.provider)))
    agent = server.agent
    agent.api_key = api_key
    agent.model = model
    agent.stream_fn = stream_fn


def _available_models(server: RpcServer) -> List[Any]:
    """The catalog models whose provider has a key (in the environment, ``--api-key-env`` for
    its provider, or stored by ``agentcore keys set``), in catalog order; the current model first
    when it is not one of them."""
    from ..plugins import models
    from ..providers.base import get_env_api_key

    current = server.agent.model
    key_provider, key = server.context.cli_key
    keyed: Dict[str, bool] = {}
    found = []
    for model in models():
        if model.provider not in keyed:
            keyed[model.provider] = (
                bool(get_env_api_key(model.provider))
                or bool(key and model.provider == key_provider)
                or _has_stored_key(model.provider)
            )
        if keyed[model.provider]:
            found.append(current if model.key == current.key else model)
    if not any(m is current for m in found):
        found.insert(0, current)
    return found


def _has_stored_key(provider: str) -> bool:
    try:
        return bool(stored_key(provider))
    except UsageError:  # a broken keys file: set_model says so; the listing just lacks them
        return False


def cmd_get_available_models(server: RpcServer, command: Dict[str, Any]) -> Any:
    return {"models": [shown_model_dict(m) for m in _available_models(server)]}


def cmd_cycle_model(server: RpcServer, command: Dict[str, Any]) -> Any:
    import copy

    available = _available_models(server)
    if len(available) < 2:
        return NULL
    index = next(i for i, m in enumerate(available) if m is server.agent.model)
    model = copy.deepcopy(available[(index + 1) % len(available)])
    _use_model(server, model, None)
    return {"model": shown_model_dict(model), "thinkingLevel": str(server.agent.thinking_level), "isScoped": False}


def cmd_set_thinking_level(server: RpcServer, command: Dict[str, Any]) -> Any:
    """Set the level, moved to the nearest one the model's thinking-level map supports (as the
    reference's ``setThinkingLevel`` clamps); a model without a map takes any level."""
    try:
        level = check_thinking(command["level"])
    except UsageError as exc:
        raise RpcError(str(exc).replace("--thinking", "set_thinking_level: level")) from None
    server.agent.thinking_level = clamp_to_model(server.agent.model, level)


def cmd_cycle_thinking_level(server: RpcServer, command: Dict[str, Any]) -> Any:
    """The next of the model's supported levels (its map's, else ``off`` ... ``high`` plus
    ``xhigh`` where the model has it), wrapping round; null for a model without reasoning."""
    agent = server.agent
    if not getattr(agent.model, "reasoning", False):
        return NULL
    levels = supported_levels(agent.model)
    current = str(agent.thinking_level)
    index = levels.index(current) if current in levels else -1
    level = levels[(index + 1) % len(levels)]
    agent.thinking_level = level
    return {"level": level}


def cmd_set_steering_mode(server: RpcServer, command: Dict[str, Any]) -> Any:
    server.agent.steering_mode = command["mode"]


def cmd_set_follow_up_mode(server: RpcServer, command: Dict[str, Any]) -> Any:
    server.agent.follow_up_mode = command["mode"]


# --------------------------------------------------------------------------- compaction and retries


def cmd_compact(server: RpcServer, command: Dict[str, Any]) -> Any:
    """Abort the run (as the reference does), then compact; the compaction events stream."""
    from ..session.compaction import CompactionError

    settle(server)
    try:
        result = server.agent.compact(command.get("customInstructions"))
    except CompactionError as exc:
        raise RpcError(f"compact: {exc}") from None
    return result.to_dict()


def cmd_set_auto_compaction(server: RpcServer, command: Dict[str, Any]) -> Any:
    server.agent.compactor.settings.enabled = command["enabled"]


def cmd_set_auto_retry(server: RpcServer, command: Dict[str, Any]) -> Any:
    """Retries happen inside the provider request (``max_retries``): off sets it to 0, on
    restores the value the command line (or the default) gave."""
    agent = server.agent
    if server.retries_on is None:
        server.retries_on = agent.options.max_retries
    agent.max_retries = server.retries_on if command["enabled"] else 0


def cmd_abort_retry(server: RpcServer, command: Dict[str, Any]) -> Any:
    raise RpcError(
        "abort_retry is not supported: agentcore retries inside the model request, with no "
        'separate retry phase to cancel; send {"type": "abort"} to stop the run, or '
        '{"type": "set_auto_retry", "enabled": false} for no retries'
    )


# --------------------------------------------------------------------------- the table


_LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh", "max")
#: what the session commands wait for. get_state waits for navigate_tree only: a compaction
#: in progress is what its isCompacting reports.
_AFTER = ("compact", "navigate_tree")

COMMANDS: Dict[str, Command] = {
    # prompting
    # a prompt read during a compact/navigate_tree waits for it: queued meanwhile, it would be
    # answered success and then never run (no run is active to take it)
    "prompt": Command(
        cmd_prompt,
        (_MESSAGE, _IMAGES, Field("streamingBehavior", required=False, choices=("steer", "followUp"))),
        after=_AFTER,
    ),
    "steer": Command(cmd_steer, (_MESSAGE, _IMAGES)),
    "follow_up": Command(cmd_follow_up, (_MESSAGE, _IMAGES)),
    "abort": Command(cmd_abort),
    "continue": Command(cmd_continue),
    "new_session": Command(cmd_new_session, (Field("parentSession", required=False),), after=_AFTER),
    # approvals
    "approve": Command(
        cmd_approve,
        (Field("toolCallId"), Field("args", object, required=False), Field("continue", bool, required=False)),
    ),
    "deny": Command(
        cmd_deny, (Field("toolCallId"), Field("reason", required=False), Field("continue", bool, required=False))
    ),
    "get_pending_approvals": Command(cmd_get_pending_approvals),
    # state
    "get_state": Command(cmd_get_state, after=("navigate_tree",)),
    "get_messages": Command(cmd_get_messages, after=_AFTER),
    # model
    "set_model": Command(cmd_set_model, (Field("provider"), Field("modelId"))),
    "cycle_model": Command(cmd_cycle_model),
    "get_available_models": Command(cmd_get_available_models),
    # thinking
    "set_thinking_level": Command(cmd_set_thinking_level, (Field("level", choices=_LEVELS),)),
    "cycle_thinking_level": Command(cmd_cycle_thinking_level),
    # queue modes
    "set_steering_mode": Command(cmd_set_steering_mode, (Field("mode", choices=_QUEUE_MODES),)),
    "set_follow_up_mode": Command(cmd_set_follow_up_mode, (Field("mode", choices=_QUEUE_MODES),)),
    # compaction and retries
    "compact": Command(cmd_compact, (Field("customInstructions", required=False),), slow=True, busy=True),
    "set_auto_compaction": Command(cmd_set_auto_compaction, (Field("enabled", bool),)),
    "set_auto_retry": Command(cmd_set_auto_retry, (Field("enabled", bool),)),
    "abort_retry": Command(cmd_abort_retry),
    # bash
    "bash": Command(cmd_bash, (Field("command"),), slow=True),
    "abort_bash": Command(cmd_abort_bash),
    # session
    "get_session_stats": Command(cmd_get_session_stats, after=_AFTER),
    "export_html": Command(cmd_export_html, (Field("outputPath", required=False),), after=_AFTER),
    "switch_session": Command(cmd_switch_session, (Field("sessionPath"),), after=_AFTER),
    "fork": Command(cmd_fork, (Field("entryId"),), after=_AFTER),
    "clone": Command(cmd_clone, after=_AFTER),
    "get_fork_messages": Command(cmd_get_fork_messages, after=_AFTER),
    "get_last_assistant_text": Command(cmd_get_last_assistant_text, after=_AFTER),
    "set_session_name": Command(cmd_set_session_name, (Field("name"),), after=_AFTER),
    "get_commands": Command(cmd_get_commands),
    # the tree (agentcore additions)
    "get_tree": Command(cmd_get_tree, after=_AFTER),
    "navigate_tree": Command(
        cmd_navigate_tree,
        (
            Field("targetId", required=False),
            Field("summarize", bool, required=False),
            Field("customInstructions", required=False),
            Field("replaceInstructions", bool, required=False),
            Field("label", required=False),
        ),
        slow=True,
        busy=True,
    ),
}

r"""The session side of ``agentcore rpc``: the agent of the command line, moving it to another
session (new_session, switch_session, fork, clone) and the tree commands.

Moving builds a new :class:`~agentcore.agent.Agent` on the other session with the old agent's
tools, prompt, key, provider options, queue modes and compaction settings (an Agent reads its
session only when it is built), then :meth:`~agentcore.cli._rpc.RpcServer.attach`\ es it; the
old session is closed. Handlers follow :mod:`agentcore.cli._rpc_commands`: they return the
response data or raise :class:`~agentcore.cli._rpc.RpcError`.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from ._rpc import SHUTDOWN_WAIT, RpcError, RpcServer
from ._setup import AgentSetup, CliOptions, UsageError, build_agent

__all__ = [
    "RpcContext",
    "initial_setup",
    "settle",
    "cmd_new_session",
    "cmd_switch_session",
    "cmd_fork",
    "cmd_clone",
    "cmd_get_fork_messages",
    "cmd_set_session_name",
    "cmd_export_html",
    "cmd_get_tree",
    "cmd_navigate_tree",
]


# --------------------------------------------------------------------------- the command line


@dataclass
class RpcContext:
    """What the command line of ``agentcore rpc`` asked for."""

    options: CliOptions
    args: Any = None
    approve: bool = False
    no_session: bool = False
    # (provider, key) of --api-key-env: the key is sent to that provider's models only
    cli_key: Tuple[Optional[str], Optional[str]] = (None, None)

    @classmethod
    def from_args(cls, args: Any) -> RpcContext:
        return cls(
            CliOptions.from_args(args),
            args,
            bool(getattr(args, "approve", False)),
            bool(getattr(args, "no_session", False)),
        )


def initial_setup(context: RpcContext) -> AgentSetup:
    """The agent of the command line. Without ``--session`` a new session is recorded in the
    sessions directory (as the reference does); ``--no-session`` keeps it in memory. UsageError
    for a bad command line."""
    options = context.options
    args = context.args
    for flag, attr, why in (
        ("-a/--attach", "attach", "send images with the prompt command"),
        ("--no-stream", "no_stream", "events always stream"),
    ):
        if getattr(args, attr, None):
            raise UsageError(f"agentcore rpc: {flag} is not an rpc option ({why})")
    if getattr(args, "no_log", False):  # --no-log keeps this conversation out of the logs, as for run/chat
        context.no_session = True
    if getattr(args, "continue_", False):
        from ._logs import choose_session

        if context.no_session:
            raise UsageError("agentcore rpc: -c/--continue records into a session: drop --no-session/--no-log")
        choose_session(options, args, sys.stderr)  # resolves -c into options.session (the latest here)
    elif options.session:
        from ._logs import choose_session

        choose_session(options, args, sys.stderr)  # an id prefix given to -s, as run/chat take it
    if options.session and context.no_session:
        raise UsageError("agentcore rpc: give --session or --no-session, not both")
    if options.session is None and not context.no_session:  # ("" is refused by build_agent, as in run)
        options = dataclasses.replace(options, session="new")
    setup = build_agent(options, args, "rpc")
    from ._context import apply_project_context

    apply_project_context(setup.agent, args, "rpc", lambda line: sys.stderr.write(line + "\n"))
    context.cli_key = (setup.agent.model.provider, setup.agent.api_key)
    if setup.session is None:  # --no-session: an in-memory tree, so fork/navigate_tree still work
        from ..session import Session

        setup = _rebuilt(setup, Session.in_memory(), keep_model=True, context=context)
    elif context.approve:
        _require_approval(setup.agent)
    return setup


def _require_approval(agent: Any) -> None:
    from ._approve import TerminalApprover

    TerminalApprover.require_approval(agent)


def _rebuilt(old: AgentSetup, session: Any, *, keep_model: bool, context: RpcContext) -> AgentSetup:
    """An agent like ``old.agent`` (tools, prompt, key, options, queue modes, compaction) on
    ``session``. ``keep_model``: the old model and thinking level; else the session's recorded
    model (unless ``--model`` was given) and level; a recorded model of another provider takes
    that provider's key (:func:`_key_for`), never the old one."""
    from ..agent import Agent
    from ._setup import _session_model

    agent = old.agent
    model, stream_fn, api_key = agent.model, agent.stream_fn, agent.api_key
    if not keep_model and not context.options.model:
        key_provider = agent.model.provider if agent.api_key is not None else None  # the key goes to it only
        resumed = _session_model(session, context.options.base_url, key_provider=key_provider)
        if resumed is not None:
            model, stream_fn = resumed
            if model.provider != agent.model.provider:
                api_key = _key_for(context, model, stream_fn)
    new = Agent(
        model,
        system_prompt=agent.system_prompt,
        tools=agent.tools or None,  # none: the new session's recorded tools, if it has some
        api_key=api_key,
        stream_fn=stream_fn,
        session=session,
        options=agent.options,
        steering_mode=agent.steering_mode,
        follow_up_mode=agent.follow_up_mode,
        compaction=agent.compactor.settings,
    )
    if keep_model:
        new.thinking_level = agent.thinking_level
    if context.approve:
        _require_approval(new)
    return AgentSetup(new, session, old.api_key, len(session.storage) == 0, old.plugin_tools)


def _key_for(context: RpcContext, model: Any, stream_fn: Any) -> Optional[str]:
    """The key for a session's model of another provider, as ``set_model`` picks it: the
    ``--api-key-env`` key only for its own provider (never sent to another company's endpoint),
    else the one ``agentcore keys set`` stored, else None (the provider reads its variable)."""
    from ._keys import stored_key

    key_provider, key = context.cli_key
    if key and model.provider == key_provider:
        return key
    if stream_fn is not None:
        return None
    try:
        return stored_key(str(model.provider))
    except UsageError:  # a broken keys file: the provider's variable, or its missing-key error
        return None


def _switch(server: RpcServer, make_session: Callable[[], Any], *, keep_model: bool, open_first: bool = False) -> None:
    """Abort the run (as the reference does), then serve an agent on ``make_session()``; the old
    session is closed. A failure to make the session leaves everything as it was; with
    ``open_first`` (a session that does not depend on the current one's branch) it is made before
    the abort, so a session that cannot be opened does not cost the running answer either. Bash
    results waiting for the next prompt join the old session first: they belong where they ran;
    a ``bash`` command still running keeps the old session open and records its result there."""
    from ._rpc_bash import flush_bash, release_session

    session = make_session() if open_first else None
    try:
        settle(server)
    except BaseException:
        if session is not None:
            session.close()
        raise
    # held to the attach: a bash command ending meanwhile records its result in the session it
    # ran in (before the move or, still running after it, in the session left, kept open for it)
    with server.bash_flush_lock:
        try:
            flush_bash(server)
            if session is None:
                session = make_session()
            setup = _rebuilt(server.setup, session, keep_model=keep_model, context=server.context)
        except BaseException:
            if session is not None:
                session.close()
            raise
        old = server.setup
        server.attach(setup)
        release_session(server, old, session)  # an unused new_session is deleted, not left empty


def settle(server: RpcServer) -> None:
    """Abort the active run (if any) and wait until it has ended; RpcError when it has not
    within :data:`~agentcore.cli._rpc.SHUTDOWN_WAIT` seconds (a tool ignoring its signal)."""
    server.agent.abort("agentcore rpc")
    if not server.agent.wait_for_idle(SHUTDOWN_WAIT):
        raise RpcError(
            f"the run has not ended {SHUTDOWN_WAIT:.0f} s after the abort (a tool that ignores its "
            "abort signal?); its agent_end follows when it does"
        )


def _repository(server: RpcServer) -> Any:
    from ..session import SessionRepository
    from ._setup import default_sessions_dir

    return SessionRepository(server.context.options.sessions_dir or default_sessions_dir())


def _saved_session(server: RpcServer, command: str) -> Any:
    session = server.session
    if session is None or session.path is None:
        raise RpcError(f"{command} needs a session saved on disk: start agentcore rpc without --no-session")
    return session


# --------------------------------------------------------------------------- sessions


def cmd_new_session(server: RpcServer, command: Dict[str, Any]) -> Any:
    parent = command.get("parentSession")

    def make() -> Any:
        from ..session import Session

        if server.context.no_session:  # --no-session: in memory, even after a switch_session to a file
            return Session.in_memory()
        return _repository(server).create(parent_session=parent)

    _switch(server, make, keep_model=True)
    return {"cancelled": False}


def cmd_switch_session(server: RpcServer, command: Dict[str, Any]) -> Any:
    """Continue in an existing session (a file, an id in the sessions directory, or a session
    URL); a missing one is an error, never created, and so is one that cannot be read (a damaged
    entry: the error names its file and line): both are found before the run is aborted, which
    then goes on. The current session, named any of these ways, is a no-op. A session file left
    while a ``bash`` command ran in it is refused until that command has answered (it is kept
    open to record the result)."""
    from ._setup import is_session_path, is_session_url, open_session, open_session_url

    value = command["sessionPath"]
    path = os.path.abspath(os.path.expanduser(value))
    if is_session_url(value):
        from ..session import SessionError
        from ..session.urls import redact_url

        if _is_current_session(server, value):
            return {"cancelled": False}  # opening it again would fail: this process holds its lock

        def opener() -> Any:
            try:
                return _readable(open_session_url(value, create=False))
            except (SessionError, ValueError) as exc:
                raise UsageError(f"{redact_url(value)}: {exc}") from None

    else:
        if is_session_path(value):
            if not os.path.exists(path):
                raise RpcError(f"switch_session: no session file {path}")
        else:
            from ..session import SessionError

            try:
                path = _repository(server).path_of(value)
            except SessionError as exc:
                raise RpcError(f"switch_session: {exc}") from None
        current = server.session.path if server.session is not None else None
        if current is not None and os.path.realpath(current) == os.path.realpath(path):
            return {"cancelled": False}  # the current session (by its path or its id): nothing to do
        if _held_for_bash(server, path):
            raise RpcError(
                f"switch_session: {path} is still open for the bash command that runs in it (its result is "
                'recorded there); wait for its response or send {"type": "abort_bash"}, then switch'
            )

        def opener() -> Any:
            from ..session import SessionError

            session = open_session(path, server.context.options.sessions_dir)
            try:
                return _readable(session)
            except SessionError as exc:
                raise UsageError(str(exc)) from None

    try:
        _switch(server, opener, keep_model=False, open_first=True)
    except UsageError as exc:
        message = str(exc).replace("with --session new", 'with {"type": "new_session"}')
        raise RpcError(f"switch_session: {message}".replace("--session ", "")) from None
    return {"cancelled": False}


def _held_for_bash(server: RpcServer, path: str) -> bool:
    """Whether the session file ``path`` is one a move left while a ``bash`` command ran in it
    (kept open, locked, until the command has recorded its result there)."""
    with server.bash_flush_lock:
        for origin in server.bash_origins:
            held = getattr(origin.session, "path", None)
            if origin is not server.setup and held and os.path.realpath(held) == os.path.realpath(path):
                return True
    return False


def _readable(session: Any) -> Any:
    """``session``, once its conversation was read (as the agent built on it will): a damaged
    entry (SessionError naming the file and line) is found before the run is aborted for the
    switch, and the session is closed."""
    try:
        session.build_context()
    except BaseException:
        session.close()
        raise
    return session


def _is_current_session(server: RpcServer, url: str) -> bool:
    """Whether the session URL ``url`` names the session served now (same storage path and id),
    read without taking its lock; False when it cannot be opened (the switch then says why)."""
    from ._setup import open_session_url

    current = server.session
    if current is None or current.path is None:
        return False
    try:
        other = open_session_url(url, read_only=True)
    except Exception:  # noqa: BLE001 - not the current one; the real open reports the problem
        return False
    try:
        same_path = other.path == current.path or (
            other.path is not None and os.path.realpath(other.path) == os.path.realpath(current.path)
        )
        return bool(same_path and other.id == current.id)
    finally:
        other.close()


def cmd_fork(server: RpcServer, command: Dict[str, Any]) -> Any:
    """A new session holding the branch up to just before the user message ``entryId``; the
    agent continues there. Returns that message's text (to edit and send again)."""
    from ..session import SessionError
    from ..types import text_of

    session = _saved_session(server, "fork")
    entry = next((e for e in session.get_branch() if e.id == command["entryId"]), None)
    if entry is None or entry.type != "message" or getattr(entry.message, "role", None) != "user":
        raise RpcError(
            f"fork: {command['entryId']!r} is not a user message of this session; get_fork_messages lists them"
        )
    try:
        _switch(server, lambda: _repository(server).fork(session, entry.id, position="before"), keep_model=True)
    except SessionError as exc:
        raise RpcError(f"fork: {exc}") from None
    return {"text": text_of(entry.message.content), "cancelled": False}


def cmd_clone(server: RpcServer, command: Dict[str, Any]) -> Any:
    session = _saved_session(server, "clone")
    repo = _repository(server)

    def make() -> Any:
        leaf = session.leaf_id  # read once the run has settled: its last answer is on the branch
        if leaf is None:
            return repo.create(parent_session=session.path)
        return repo.fork(session, leaf, position="at")

    _switch(server, make, keep_model=True)
    return {"cancelled": False}


def cmd_get_fork_messages(server: RpcServer, command: Dict[str, Any]) -> Any:
    from ..types import text_of

    session = server.session
    if session is None:
        return {"messages": []}
    return {
        "messages": [
            {"entryId": e.id, "text": text_of(e.message.content)}
            for e in session.get_branch()
            if e.type == "message" and getattr(e.message, "role", None) == "user"
        ]
    }


def cmd_set_session_name(server: RpcServer, command: Dict[str, Any]) -> Any:
    name = command["name"].strip()
    if not name:
        raise RpcError("Session name cannot be empty")
    if server.session is None:
        raise RpcError("set_session_name: there is no session")
    server.session.set_name(name)


def cmd_export_html(server: RpcServer, command: Dict[str, Any]) -> Any:
    """The page ``agentcore sessions export --format html`` writes, for this session: to
    ``outputPath``, else to ``agentcore-session-ID.html`` in the working directory (always there:
    see :func:`_default_export_name`)."""
    import argparse
    import io

    from ._info import cmd_sessions_export

    session = _saved_session(server, "export_html")
    path = os.path.abspath(command.get("outputPath") or _default_export_name(session.id))
    args = argparse.Namespace(
        session=session.path, format="html", output=path, sessions_dir=server.context.options.sessions_dir
    )
    errors = io.StringIO()
    try:
        status = cmd_sessions_export(args, io.StringIO(), errors)
    except UsageError as exc:  # e.g. an outputPath that cannot be written
        raise RpcError(f"export_html: {str(exc).replace('-o ', 'outputPath ', 1)}") from None
    if status != 0:
        raise RpcError(f"export_html: {errors.getvalue().strip()}")
    return {"path": path}


def _default_export_name(session_id: Any) -> str:
    """``agentcore-session-ID.html``, one file name in the working directory whatever the id: the
    id comes from the session file's header, which another writer made (``x/../../../site/index``
    wrote the page over a file elsewhere), so every character but letters, digits, ``.``, ``_``
    and ``-`` becomes ``_``, and a long id is cut to 100 characters."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", str(session_id))[:100]
    return f"agentcore-session-{name}.html"


# --------------------------------------------------------------------------- the tree (agentcore additions)


def _preview(entry: Any) -> Optional[str]:
    from ..types import text_of

    message = getattr(entry, "message", None)
    if message is not None:
        try:
            text = text_of(getattr(message, "content", "") or "")
        except Exception:  # noqa: BLE001 - an odd block: no preview rather than no tree
            text = ""
        return " ".join(text.split())[:200]
    summary = getattr(entry, "summary", None)
    return " ".join(str(summary).split())[:200] if summary else None


def cmd_get_tree(server: RpcServer, command: Dict[str, Any]) -> Any:
    """Every entry of the session tree, flat (parents before children, children oldest first)."""
    session = server.session
    if session is None:
        return {"leafId": None, "entries": []}
    entries: List[Dict[str, Any]] = []
    stack = list(reversed(session.get_tree()))
    while stack:  # iterative: a long conversation is a deep tree
        node = stack.pop()
        entry = node.entry
        item: Dict[str, Any] = {"id": entry.id, "parentId": entry.parent_id, "type": entry.type}
        role = getattr(getattr(entry, "message", None), "role", None)
        if role is not None:
            item["role"] = role
        preview = _preview(entry)
        if preview is not None:
            item["preview"] = preview
        if node.label:
            item["label"] = node.label
        item["timestamp"] = entry.timestamp
        entries.append(item)
        stack.extend(reversed(node.children))
    return {"leafId": session.leaf_id, "entries": entries}


def cmd_navigate_tree(server: RpcServer, command: Dict[str, Any]) -> Any:
    """Move the session to ``targetId`` (a user message: to just before it, its text returned as
    ``editorText``), optionally summarising the branch left; the transcript is reloaded."""
    from ..session import SessionError
    from ..session.compaction import CompactionError

    if server.running:
        raise RpcError("navigate_tree: the agent is running; send abort or wait for agent_end")
    server.agent.wait_for_idle(SHUTDOWN_WAIT)  # a run whose agent_end was written may still be finishing
    options: Dict[str, Any] = {}
    if command.get("customInstructions") is not None:
        options["custom_instructions"] = command["customInstructions"]
    if command.get("replaceInstructions") is not None:
        options["replace_instructions"] = command["replaceInstructions"]
    if command.get("label") is not None:
        options["label"] = command["label"]
    if server.busy_abort is not None:  # an abort read before the agent became busy still stops it
        options["signal"] = server.busy_abort.signal
    try:
        result = server.agent.navigate_tree(command.get("targetId"), bool(command.get("summarize")), **options)
    except (SessionError, CompactionError, RuntimeError) as exc:
        raise RpcError(f"navigate_tree: {exc}") from None
    return {
        "cancelled": bool(result.cancelled),
        "moved": bool(result.moved),
        "leafId": server.session.leaf_id,
        "editorText": result.editor_text,
        "summaryEntryId": result.summary_entry_id,
    }

"""Conversations are logged by default, and ``agentcore logs`` finds them again.

Every ``run`` and ``chat`` records its conversation as a new session in the sessions directory
(as ``llm`` logs every prompt), unless it is turned off: ``--no-log`` for one command,
``AGENTCORE_NO_LOG=1`` in the environment, or ``agentcore logs off`` (a ``logs-off`` marker file in
the config directory; ``logs on`` removes it). ``--session``, ``-s`` and ``-c`` name a session
explicitly and always record into it. A sessions directory that cannot be written is a warning
on stderr, and the command runs unlogged. (A write that fails later, on a full disk, fails that
run as the Agent's session recording does: the error names the file, the session stays valid.)

``-c/--continue`` resumes the most recently updated conversation of the current directory (as
the reference's ``pi -c``; sessions are kept per working directory). ``-s ID`` takes a unique
prefix of a session id (an ambiguous one lists the candidates).

After each run or chat turn the conversation's row in the ``logs.db`` index is updated
(:mod:`agentcore.cli._logindex`); ``agentcore logs`` refreshes the index from the files first.
While another process holds the index, both wait for it up to ``BUSY_TIMEOUT`` seconds, in short
slices: a Ctrl+C (the run's abort) ends the wait at once, SQLite's own wait would ignore it.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import time
from typing import Any, Callable, Dict, Optional, TextIO, TypeVar

from ._config import config_path
from ._setup import UsageError, default_sessions_dir, is_session_path, is_session_url, remove_quietly

__all__ = [
    "NO_LOG_ENV",
    "LOGS_OFF_FILE",
    "logging_enabled",
    "choose_session",
    "watch_session",
    "close_session",
    "build_logged",
    "cmd_logs",
    "cmd_logs_on",
    "cmd_logs_off",
    "cmd_logs_status",
    "cmd_logs_path",
]

NO_LOG_ENV = "AGENTCORE_NO_LOG"
LOGS_OFF_FILE = "logs-off"


def _sessions_dir(options: Any) -> str:
    return getattr(options, "sessions_dir", None) or default_sessions_dir()


def _env_off() -> bool:
    return os.environ.get(NO_LOG_ENV, "").strip().lower() not in ("", "0", "false", "no", "off")


def logging_enabled(args: Any = None) -> bool:
    """False with ``--no-log``, ``AGENTCORE_NO_LOG=1`` (any value but ``0``/``false``/``no``/``off``)
    or the ``logs off`` marker; else True."""
    if getattr(args, "no_log", False) or _env_off():
        return False
    return not os.path.exists(config_path(LOGS_OFF_FILE))


# --------------------------------------------------------------------------- which session


def choose_session(options: Any, args: Any, err: TextIO) -> Any:
    """The session ``run``/``chat`` records into when no explicit file is named, or None.

    Resolves ``-c`` and an id prefix given to ``-s`` into ``options.session`` (then
    :func:`~agentcore.cli._setup.build_agent` opens it and None is returned). Without either, and
    with logging on, a new session in the sessions directory is created and returned; when that
    fails the warning goes to ``err`` and None is returned (the command runs unlogged). The warning
    names what is wrong: the sessions directory, or a current directory that was deleted.
    """
    if getattr(args, "no_log", False) and (getattr(args, "continue_", False) or options.session):
        # -c/-s record into the session they name: honouring --no-log silently (the turns were
        # recorded anyway) or ignoring the session would each surprise; agentcore rpc refuses too
        flag = "-c/--continue" if getattr(args, "continue_", False) else "-s/--session"
        raise UsageError(
            f"--no-log and {flag} contradict each other: {flag} records into the conversation it "
            "names; drop --no-log, or drop the session to talk without recording"
        )
    if getattr(args, "continue_", False):
        if options.session:
            raise UsageError("-c/--continue and -s/--session both name a session: give one of them")
        options.session = _latest_here(_sessions_dir(options))
        return None
    if options.session:
        directory = _sessions_dir(options)
        options.session = _expand_prefix(options.session, directory)
        if _is_new_id(options.session, directory):  # a mistyped prefix must not pass unnoticed
            _check_new_id(options.session)  # before saying a session of that id is recorded
            err.write(
                f"agentcore: -s {options.session}: no session has this id or starts with it; "
                "recording a new session of that id (`agentcore logs` lists the ids)\n"
            )
        return None
    if not logging_enabled(args):
        return None
    directory = _sessions_dir(options)
    try:
        from ..session import SessionError, SessionRepository

        try:
            return SessionRepository(directory).create()
        except SessionError as exc:
            raise OSError(str(exc)) from None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        try:
            os.getcwd()  # a new session records it: a deleted one fails create() in any directory
        except OSError as gone:
            err.write(
                "agentcore: warning: not logging this conversation: the current directory cannot be read "
                f"({gone.strerror or gone}; was it deleted?); cd to an existing directory, or pass --no-log\n"
            )
            return None
        err.write(
            f"agentcore: warning: not logging this conversation: cannot write to {directory} ({reason}); "
            f"fix the directory, set {_env_name()} to another one, or pass --no-log\n"
        )
        return None


def _env_name() -> str:
    from ._setup import SESSIONS_DIR_ENV

    return SESSIONS_DIR_ENV


def _latest_here(directory: str) -> str:
    """The path of the most recently updated session of this directory that holds a message."""
    from ..session import SessionRepository

    cwd = _current_directory("-c/--continue")
    if not os.path.isdir(directory):
        raise UsageError(f"-c/--continue: no conversation to continue in {cwd} (nothing logged in {directory} yet)")
    infos = [info for info in SessionRepository(directory).list(cwd) if info.message_count]
    if not infos:
        raise UsageError(
            f"-c/--continue: no conversation to continue in {cwd}; `agentcore logs` lists the latest "
            "of every directory, resume one with -s ID"
        )
    return max(infos, key=lambda info: info.modified).path


def _current_directory(option: str) -> str:
    """``os.getcwd()``; a UsageError naming ``option`` when the directory is gone (removed while
    the shell was in it), instead of a bare FileNotFoundError without a file name."""
    try:
        return os.getcwd()
    except OSError as exc:
        raise UsageError(
            f"{option}: the current directory cannot be read ({exc.strerror or exc}; was it deleted?): "
            "cd to an existing directory"
        ) from None


def _expand_prefix(value: str, directory: str) -> str:
    """``value`` itself (a path, ``new``, or an exact id), else the full id of the one session whose
    id starts with it. Several: UsageError listing them. None: ``value`` (a new session of that id).
    """
    if value == "new" or is_session_path(value) or is_session_url(value) or not os.path.isdir(directory):
        return value
    pattern = os.path.join(glob.escape(directory), "*", f"*_{glob.escape(value)}*.jsonl")
    ids: Dict[str, str] = {}
    for path in glob.glob(pattern):
        session_id = os.path.basename(path)[: -len(".jsonl")].split("_", 1)[-1]
        if session_id.startswith(value):
            ids.setdefault(session_id, path)
    if value in ids or len(ids) <= 1:
        return value if value in ids or not ids else next(iter(ids))
    from ._info import format_table

    rows = [[sid, _created(path), _cwd_of(path)] for sid, path in sorted(ids.items())]
    raise UsageError(
        f"-s {value}: the id prefix is ambiguous, {len(ids)} sessions match; give more of the id:\n"
        + format_table(rows, ["ID", "CREATED", "CWD"]).rstrip("\n")
    )


def _is_new_id(value: str, directory: str) -> bool:
    """True when ``value`` is an id (not ``new``, not a file path) that no session of
    ``directory`` has yet."""
    if value == "new" or is_session_path(value) or is_session_url(value):
        return False
    pattern = os.path.join(glob.escape(directory), "*", f"*_{glob.escape(value)}.jsonl")
    return not glob.glob(pattern)


def _check_new_id(value: str) -> None:
    """UsageError when ``value`` cannot be the id of a new session (the repository's rule)."""
    from ..session.repository import _ID_PATTERN

    if not _ID_PATTERN.match(value):
        # llm's -s is the system prompt: a sentence given to -s is most likely one
        hint = f"; -s is --session; for a system prompt use --system {shlex.quote(value)}" if " " in value else ""
        raise UsageError(
            f"-s {value}: invalid session id {value!r}: use letters, digits, '.', '_' and '-', starting "
            f"and ending with a letter or digit (or give a path ending in .jsonl or .db){hint}"
        )


def _cwd_of(path: str) -> str:
    """The working directory a session file records (its header), the one the user knows; the
    sessions-dir folder it lives in is an encoding of it. ``?`` for an unreadable header."""
    from ..session.jsonl import read_header

    try:
        return str(read_header(path).get("cwd") or "?")
    except Exception:  # noqa: BLE001 - a damaged file must not hide the others of the list
        return "?"


def _created(path: str) -> str:
    return os.path.basename(path).split("_", 1)[0]


# --------------------------------------------------------------------------- keeping the index current


def _index_warning(err: TextIO, exc: BaseException, directory: str) -> None:
    """The warning of a failed index update, naming the index file (SQLite's "disk I/O error"
    or "unable to open database file" names none)."""
    path = os.path.join(directory, "logs.db")
    err.write(f"agentcore: warning: the logs index was not updated ({exc}); `agentcore logs` rebuilds {path}\n")


#: how long at a time a command waits for another process holding the index: SQLite's own wait
#: (the busy timeout) ignores signals, so a Ctrl+C (or the run's abort) waited out the whole
#: :data:`~agentcore.cli._logindex.BUSY_TIMEOUT`; between slices it lands at once
_LOCK_SLICE = 0.1

_T = TypeVar("_T")


def _index(directory: str) -> Any:
    """A :class:`~agentcore.cli._logindex.LogIndex` whose statements wait one slice for a lock."""
    from . import _logindex

    return _logindex.LogIndex(directory, busy_timeout=min(_LOCK_SLICE, _logindex.BUSY_TIMEOUT))


def _patiently(action: Callable[[], _T], signal: Any = None) -> _T:
    """``action()`` (work on an :func:`_index`), tried again while it fails because another
    process holds the index, for up to ``BUSY_TIMEOUT`` seconds of waiting; then, or once
    ``signal`` is aborted, its last error is raised. A KeyboardInterrupt lands between two tries.
    (A :class:`~agentcore.cli._logindex.LogIndex` keeps what it read for its next try.)"""
    import sqlite3

    from . import _logindex

    deadline = None  # from the first "locked": reading the files before it is not waiting
    while True:
        try:
            return action()
        except sqlite3.OperationalError as exc:
            if not _logindex.busy(exc) or (signal is not None and signal.aborted):
                raise
            deadline = deadline if deadline is not None else time.monotonic() + _logindex.BUSY_TIMEOUT
            if time.monotonic() >= deadline:
                raise


def _opened(directory: str, signal: Any = None) -> Any:
    """An :func:`_index` of ``directory``, opened as :func:`_patiently` waits."""
    return _patiently(lambda: _index(directory), signal)


def _update_index(session: Any, directory: str, err: TextIO, signal: Any = None) -> None:
    """Re-read ``session``'s file into the index, waiting for another process that holds it as
    :func:`_patiently` does (``signal``: the run's; its abort ends the wait). A failure is a
    warning on ``err`` (the next ``agentcore logs`` catches up), never an exception."""
    import sqlite3

    try:
        with _opened(directory, signal) as index:
            _patiently(lambda: index.update(session.path), signal)
    except (sqlite3.Error, OSError, ValueError) as exc:  # ValueError: text SQLite cannot take, say
        _index_warning(err, exc, directory)


def watch_session(setup: Any, options: Any, err: TextIO, *, logged: bool) -> None:
    """Keep the index current while ``setup``'s agent runs: the session's row is updated after
    every run (``agent_end``) when the session lives in the sessions directory. ``logged``: the
    session was created by default logging (deleted at close when nothing was written into it)."""
    session = setup.session
    setup.default_logged = logged
    path = getattr(session, "path", None)
    if not path or not path.endswith(".jsonl"):
        return
    directory = os.path.abspath(_sessions_dir(options))
    if os.path.dirname(os.path.dirname(os.path.abspath(path))) != directory:
        return  # a file elsewhere (--session notes.jsonl): not part of the logs

    def listener(event: Any) -> None:
        if getattr(event, "type", None) == "agent_end":
            _update_index(session, directory, err, setup.agent.signal)  # the run's: a Ctrl+C ends the wait

    setup.agent.subscribe(listener)


def close_session(setup: Any, err: TextIO, *, failed: bool = False) -> None:
    """Close ``setup``'s session; a default-logged session that stayed empty (a chat quit before
    its first prompt) is deleted rather than left behind as an empty conversation. With
    ``failed`` (the command stopped before sending anything: an image for a model without image
    input, say) the session file ``--session`` created for it (``setup.made``: a new path, ``new``,
    an id not yet recorded) is deleted too when it stayed empty, as when building the agent fails."""
    session = setup.session
    if session is None:
        return
    empty = len(session.storage) == 0
    session.close()
    if getattr(setup, "default_logged", False) and empty:
        remove_quietly(session.path)
    elif failed and empty:
        remove_quietly(getattr(setup, "made", None))


# --------------------------------------------------------------------------- agentcore logs


def _open_index(args: Any, err: TextIO) -> Any:
    """The refreshed index; when ``logs.db`` cannot be opened or written (a read-only directory,
    a writer holding it past the busy timeout) a one-line notice and an index in memory, built
    from the files for this command only."""
    import sqlite3

    from ._logindex import LogIndex

    directory = getattr(args, "sessions_dir", None) or default_sessions_dir()
    index = None
    try:
        index = _opened(directory)
        _patiently(index.refresh)
    except BaseException as exc:
        if index is not None:
            index.close()
        if not isinstance(exc, (sqlite3.OperationalError, OSError)):
            raise
        err.write(f"note: cannot use the logs index in {directory} ({exc}); reading the session files instead\n")
        index = LogIndex(directory, in_memory=True)
        index.refresh()
    if not index.fts and getattr(args, "query", None):
        err.write("note: this Python's sqlite3 has no FTS5; searching with LIKE (slower, exact substring)\n")
    return index


def cmd_logs(args: Any, stdin: TextIO, out: TextIO, err: TextIO) -> int:
    """``agentcore logs [-n N] [-q TEXT] [--cwd] [--json]``: the latest conversations, oldest of
    them first (the newest last, next to the prompt), written without terminal escape sequences
    and control characters (:func:`~agentcore._safe.terminal_text`, as ``sessions show`` writes
    the same prompts); ``--json``: one JSON array of them."""
    import sqlite3

    if args.count < 0:
        raise UsageError(f"logs -n {args.count}: give a count of 0 (all) or more")
    if args.query is not None and not _is_utf8(args.query):  # bytes the terminal's encoding is not UTF-8 for
        raise UsageError(
            f"logs -q {ascii(args.query)}: the search text is not UTF-8 (the logs are); type it in a UTF-8 terminal"
        )
    directory = getattr(args, "sessions_dir", None) or default_sessions_dir()
    if not os.path.isdir(directory):
        if args.json:
            out.write("[]\n")  # still one JSON document for `| jq` and `| python -m json.tool`
        err.write(f"no conversations logged yet in {directory}\n")
        return 0
    try:
        cwd = _current_directory("logs --cwd") if args.cwd else None
        with _open_index(args, err) as index:
            found = _patiently(lambda: index.latest(args.count or None, args.query, cwd))
    except sqlite3.Error as exc:
        raise UsageError(f"the logs index {os.path.join(directory, 'logs.db')} cannot be used: {exc}") from None
    found.reverse()  # like llm logs: the selected conversations oldest first, the newest last
    if args.json:  # one JSON array, as `llm logs --json` prints (JSON lines broke `| python -m json.tool`)
        from ._render import terminal_json  # no raw C1 control or bidi override of a prompt

        out.write(terminal_json(json.dumps([c.to_dict() for c in found], ensure_ascii=False, indent=2)) + "\n")
        return 0
    if not found:
        what = f"matching {args.query!r}" if args.query else "logged"
        where = f"of this directory ({cwd}) " if args.cwd else ""
        hint = "; without --cwd: those of every directory" if args.cwd else ""
        err.write(f"no conversations {what} {where}in {directory}{hint}\n")
        return 0
    from .._safe import terminal_text

    for conversation in found:  # a prompt may hold escape sequences (a piped `git diff --color`)
        out.write(terminal_text(_describe(conversation)) + "\n")
    return 0


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: a byte of argv that did not decode
        return False
    return True


#: the ``<file name="...">...</file>`` blocks -a/--attach puts before a prompt (agentcore.cli._attach)
_FILE_BLOCK = re.compile(r'\A<file name="([^"]*)">(?:\n.*?\n)?</file>\n', re.DOTALL)


def _shown_prompt(text: str) -> str:
    """``text`` with the attachment blocks before it shortened to ``[name]``: the listing shows
    what was asked, not the first 200 characters of an attached file (``--json`` keeps it all)."""
    names = []
    while True:
        match = _FILE_BLOCK.match(text)
        if match is None:
            break
        name = match.group(1).replace("&quot;", '"')
        names.append(f"[{os.path.basename(name) or name}]")
        text = text[match.end() :]
    return " ".join(names + [text]) if names else text


def _describe(c: Any) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(c.updated))
    cost = f"${c.cost:.4f}" if c.cost else "-"
    prompt = " ".join(_shown_prompt(c.first_prompt).split())
    if len(prompt) > 200:
        prompt = prompt[:197] + "..."
    return (
        f"# {when}  {c.id}\n"
        f"  model: {c.model or '-'}  messages: {c.messages}  tokens: {c.total_tokens} "
        f"({c.input_tokens} in, {c.output_tokens} out)  cost: {cost}\n"
        f"  cwd: {c.cwd}\n"
        f"  > {prompt}\n"
    )


def _marker() -> str:
    return config_path(LOGS_OFF_FILE)


def cmd_logs_off(args: Any, stdin: TextIO, out: TextIO, err: TextIO) -> int:
    """``agentcore logs off``: stop logging by default (writes the ``logs-off`` marker)."""
    path = _marker()
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise UsageError(f"logs off: cannot write {path} ({exc.strerror})") from None
    err.write(f"logging is off (marker {path}); `agentcore logs on` turns it back on\n")
    return 0


def cmd_logs_on(args: Any, stdin: TextIO, out: TextIO, err: TextIO) -> int:
    """``agentcore logs on``: log by default again (removes the marker)."""
    try:
        os.unlink(_marker())
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise UsageError(f"logs on: cannot remove {_marker()} ({exc.strerror})") from None
    if _env_off():
        err.write(f"logging is on, but {NO_LOG_ENV} is set in this environment and still turns it off\n")
    else:
        err.write("logging is on\n")
    return 0


def cmd_logs_status(args: Any, stdin: TextIO, out: TextIO, err: TextIO) -> int:
    """``agentcore logs status``: whether conversations are logged, where, and how many there are."""
    directory = getattr(args, "sessions_dir", None) or default_sessions_dir()
    if _env_off():
        state = f"off ({NO_LOG_ENV} is set)"
    elif os.path.exists(_marker()):
        state = f"off (marker {_marker()}; `agentcore logs on` removes it)"
    else:
        state = "on"
    out.write(f"logging: {state}\nsessions dir: {directory}\n")
    count = _count(directory)
    if count is not None:
        out.write(f"conversations: {count}\nindex: {os.path.join(directory, 'logs.db')}\n")
    return 0


def _count(directory: str) -> Optional[int]:
    import sqlite3

    if not os.path.isdir(directory):
        return None
    try:
        with _opened(directory) as index:
            _patiently(index.refresh)
            return len(_patiently(lambda: index.latest(None)))
    except (sqlite3.Error, OSError):
        return None


def cmd_logs_path(args: Any, stdin: TextIO, out: TextIO, err: TextIO) -> int:
    """``agentcore logs path``: the index database (next to the session files)."""
    directory = getattr(args, "sessions_dir", None) or default_sessions_dir()
    out.write(os.path.join(os.path.abspath(directory), "logs.db") + "\n")
    return 0


# --------------------------------------------------------------------------- building a logged agent


def build_logged(options: Any, args: Any, command: str, err: TextIO) -> Any:
    """:func:`~agentcore.cli._setup.build_agent` with the session :func:`choose_session` picks,
    watched by :func:`watch_session`. A session created by default logging is deleted again when
    building the agent fails (a usage error leaves no empty conversation behind)."""
    from ._setup import build_agent

    session = choose_session(options, args, err)
    try:
        setup = build_agent(options, args, command, session=session)
    except BaseException:
        if session is not None:  # build_agent closed it
            remove_quietly(session.path)
        raise
    watch_session(setup, options, err, logged=session is not None)
    return setup

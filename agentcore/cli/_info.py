"""The listing commands: ``models``, ``plugins`` and ``sessions list|show|export``.

Each function takes the parsed arguments and the output streams and returns an exit status; a
problem the user can fix raises :class:`~agentcore.cli._setup.UsageError` (exit 2).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
from typing import Any, Dict, Iterator, List, Optional, Sequence, TextIO, Tuple

from ._setup import (
    UsageError,
    default_sessions_dir,
    is_session_path,
    is_session_url,
    open_session_url,
    several_sessions,
)
from ._usage import UsageTally, usage_table

__all__ = ["cmd_models", "cmd_plugins", "cmd_sessions_list", "cmd_sessions_show", "cmd_sessions_export", "format_table"]


def format_table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    """Left-aligned columns separated by two spaces (the last column is not padded)."""
    table = [list(header)] + [list(r) for r in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header) - 1)]
    lines = []
    for row in table:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])] + [row[-1]]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines) + "\n"


def _price(value: Any) -> str:
    try:
        number = float(value or 0)
    except (TypeError, ValueError):
        return "-"
    return "-" if number == 0 else f"{number:g}"


def _tokens(value: Any) -> str:
    try:
        number = int(value or 0)
    except (TypeError, ValueError):
        return "-"
    if number >= 1000 and number % 1000 == 0:
        return f"{number // 1000}k"
    return str(number) if number else "-"


# --------------------------------------------------------------------------- models


def cmd_models(args: Any, out: TextIO, err: TextIO) -> int:
    """``agentcore models [--provider P] [-q TEXT ...] [--json]``: the model registry (catalog and
    plugins); every ``-q`` must appear in a model's ``provider/id`` or name (as ``llm models -q``).
    A plugin model's odd fields (``cost=None``, a value JSON cannot hold) are shown as best they
    can be (``-``, their ``str()``) rather than ending the listing."""
    from ..plugins import models
    from ..types import ModelCost

    found = models(args.provider) if args.provider else models()
    if args.provider and not found:
        known = sorted({m.provider for m in models()})
        raise UsageError(f"no models of provider {args.provider!r}; providers: {', '.join(known)}")
    queries = [q.lower() for q in getattr(args, "query", None) or ()]
    if queries:
        found = [m for m in found if all(q in f"{m.key} {m.name or ''}".lower() for q in queries)]
        if not found:
            err.write(f"no models match -q {' -q '.join(args.query)} (`agentcore models` lists them all)\n")
            return 0
    if getattr(args, "json", False):
        for model in found:  # default=str: a plugin's odd value (a set in compat) ends no listing
            out.write(json.dumps(shown_model_dict(model), ensure_ascii=False, default=str) + "\n")
        return 0
    rows = []
    for m in found:
        cost = m.cost if m.cost is not None else ModelCost()  # a plugin's model may say cost=None: free
        rows.append(
            [
                m.key,
                m.api,
                _tokens(m.context_window),
                "yes" if m.reasoning else "-",
                f"{_price(cost.input)}/{_price(cost.output)}",
                m.name or m.id,
            ]
        )
    out.write(format_table(rows, ["MODEL", "API", "CONTEXT", "REASONING", "$/M IN/OUT", "NAME"]))
    return 0


# --------------------------------------------------------------------------- plugins


def _declared_options(apis: Sequence[str]) -> Dict[str, List[str]]:
    """api -> the option names its provider declares in ``stream_options`` (apis declaring none left out)."""
    from ..options import declared_options
    from ..plugins import get_provider

    out: Dict[str, List[str]] = {}
    for api in apis:
        try:
            names = declared_options(get_provider(api))
        except KeyError:  # pragma: no cover - a provider plugins_info just listed
            continue
        if names:
            out[api] = sorted(names)
    return out


def cmd_plugins(args: Any, out: TextIO, err: TextIO) -> int:
    """``agentcore plugins``: every plugin, what it provides, and why a broken one failed."""
    import warnings

    from ..plugins import plugins_info

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # broken plugins are listed below, with their error
        infos = plugins_info()
    declared = {info.name: _declared_options(info.provides.get("provider", ())) for info in infos}
    if getattr(args, "json", False):
        for info in infos:
            out.write(
                json.dumps(
                    {
                        "name": info.name,
                        "distribution": info.distribution,
                        "version": info.version,
                        "builtin": info.builtin,
                        "entryPoint": info.entry_point,
                        "hooks": list(info.hooks),
                        "provides": {k: list(v) for k, v in info.provides.items()},
                        "providerOptions": declared[info.name],
                        "error": info.error,
                    },
                    ensure_ascii=False,
                )
                + "\n"
            )
        return 0
    for info in infos:
        origin = "built-in" if info.builtin else f"{info.distribution or '?'} {info.version or ''}".strip()
        out.write(f"{info.name}  ({origin})" + ("  BROKEN" if info.error else "") + "\n")
        if info.entry_point:
            out.write(f"    entry point: {info.entry_point}\n")
        if info.hooks:
            out.write(f"    hooks: {', '.join(info.hooks)}\n")
        for kind in ("tool", "provider", "model"):
            keys = info.provides.get(kind, ())
            if not keys:
                continue
            if kind == "model" and len(keys) > 8:
                out.write(f"    models: {len(keys)} (see `agentcore models`)\n")
            else:
                out.write(f"    {kind}s: {', '.join(keys)}\n")
        names = sorted({name for per_api in declared[info.name].values() for name in per_api})
        if names:
            out.write(f"    provider options: {', '.join(names)} (Agent keywords, -o NAME VALUE)\n")
        if info.error:
            out.write(f"    error: {info.error}\n")
    broken = sum(1 for i in infos if i.error)
    if broken:
        installed = sum(1 for i in infos if i.error and not i.builtin)
        advice = "Fix or uninstall them, or set AGENTCORE_DISABLE_PLUGIN_AUTOLOAD=1." if installed else ""
        if installed < broken:  # a built-in fails on the user's own input (models.json): fix the file
            advice = (advice + " " if advice else "") + "A built-in one fails on what its error names: fix that."
        err.write(f"{broken} plugin(s) failed to load; the others work. {advice}\n")
    return 0


# --------------------------------------------------------------------------- sessions


def _repository(args: Any) -> Any:
    from ..session import SessionRepository

    return SessionRepository(getattr(args, "sessions_dir", None) or default_sessions_dir())


def cmd_sessions_list(args: Any, out: TextIO, err: TextIO) -> int:
    """``agentcore sessions list [--all]``: sessions of this directory (or all), newest first (the
    table without terminal escape sequences: a name or a directory may hold them). Without
    ``--all`` in a directory that was deleted: a UsageError saying so."""
    from ._logs import _current_directory

    repo = _repository(args)
    cwd = None if args.all else _current_directory("sessions list")
    infos = repo.list(cwd)
    if getattr(args, "json", False):
        from ._render import terminal_json

        for i in infos:
            out.write(
                terminal_json(
                    json.dumps(
                        {
                            "id": i.id,
                            "path": i.path,
                            "cwd": i.cwd,
                            "created": i.created,
                            "name": i.name,
                            "messageCount": i.message_count,
                            "parentSession": i.parent_session,
                        },
                        ensure_ascii=False,
                    )
                )
                + "\n"
            )
        return 0
    if not infos:
        where = repo.directory if cwd is None else f"{cwd} in {repo.directory}"
        err.write(f"no sessions for {where}; start one with: agentcore chat --session new\n")
        return 0
    from .._safe import terminal_text

    rows = [[i.id, i.created, str(i.message_count), i.name or "", i.path] for i in infos]
    out.write(terminal_text(format_table(rows, ["ID", "CREATED", "MESSAGES", "NAME", "PATH"])))
    return 0


def _open_for_reading(args: Any) -> Any:
    from ..session import Session, SessionError

    ref = args.session
    try:
        if is_session_url(ref):
            return open_session_url(ref, read_only=True)
        if is_session_path(ref):
            path = os.path.abspath(os.path.expanduser(ref))
            if path.lower().endswith((".db", ".sqlite", ".sqlite3")):
                from ..session import SqliteSessionStorage

                sessions = SqliteSessionStorage.list_sessions(path) if os.path.isfile(path) else []
                if len(sessions) > 1:
                    raise UsageError(several_sessions(path, [info.id for info in sessions]))
                return Session(SqliteSessionStorage(path, read_only=True))
            return Session.open(path, read_only=True)
        repo = _repository(args)
        try:
            return repo.open(ref, read_only=True)
        except SessionError as exc:
            if exc.code != "not_found":
                raise
            return repo.open(_unique_prefix(repo, ref, exc), read_only=True)
    except (SessionError, ValueError) as exc:
        raise UsageError(f"{exc} (see `agentcore sessions list --all`)") from None


#: the codes of a :class:`~agentcore.session.SessionError` about what the file holds (a line that
#: is not a valid entry, a file that is not a session): the user's to repair, as a usage error
_CORRUPT = ("invalid_entry", "invalid_session")


@contextlib.contextmanager
def _corrupt_is_usage() -> Iterator[None]:
    """A session file found corrupt while it is read (a malformed line past the header) is a
    UsageError naming the file and line (exit 2, as a corrupt header is), not a failure (exit 1)."""
    from ..session import SessionError

    try:
        yield
    except SessionError as exc:
        if exc.code not in _CORRUPT:
            raise
        raise UsageError(str(exc)) from None


def _unique_prefix(repo: Any, prefix: str, not_found: Exception) -> Any:
    """The one session whose id starts with ``prefix`` (any directory); UsageError listing the
    matches when several do; ``not_found`` re-raised when none does."""
    matches = [info for info in repo.list(None) if info.id.startswith(prefix)]
    if not matches:
        raise not_found
    if len({info.id for info in matches}) > 1:
        rows = [[i.id, i.created, i.cwd] for i in matches]
        raise UsageError(
            f"session id prefix {prefix!r} is ambiguous: {len(matches)} sessions match; give more "
            "of the id:\n" + format_table(rows, ["ID", "CREATED", "CWD"]).rstrip("\n")
        )
    return matches[0]


def describe_message(message: Any, limit: Optional[int] = None) -> str:
    """One message as readable text: role header, text, tool calls and tool results."""
    from ..types import ToolCall, text_of

    role = getattr(message, "role", "?")
    content = getattr(message, "content", None)
    parts = []
    if role == "toolResult":
        status = "error" if getattr(message, "is_error", False) else "ok"
        parts.append(f"[tool result: {message.tool_name} {status}]")
    elif role == "assistant":
        parts.append(f"[assistant {getattr(message, 'provider', '')}/{getattr(message, 'model', '')}]")
    else:
        parts.append(f"[{role}]")
    body = text_of(content) if content is not None else ""
    if limit is not None and len(body) > limit:
        body = body[:limit] + " ..."
    if body:
        parts.append(body)
    for block in content if isinstance(content, list) else ():
        if isinstance(block, ToolCall):
            parts.append(f"-> {block.name} {json.dumps(block.arguments, ensure_ascii=False)}")
    error = getattr(message, "error_message", None)
    if error:
        parts.append(f"(error: {error})")
    return "\n".join(parts)


def shown_model_dict(model: Any) -> Dict[str, Any]:
    """``model.to_dict()`` for output a user or another program reads (``models --json``, the rpc
    replies): credentials in ``baseUrl`` masked (``redact_url``) and the value of every credential
    header (``Authorization``, ``x-api-key`` ..., from a ``models.json``) shown as ``***``."""
    from .._safe import redact_url
    from ..providers.failures import is_secret_header

    data = model.to_dict()
    if isinstance(data.get("baseUrl"), str):
        data["baseUrl"] = redact_url(data["baseUrl"])
    headers = data.get("headers")
    if isinstance(headers, dict):
        data["headers"] = {name: "***" if is_secret_header(str(name)) else value for name, value in headers.items()}
    return data


def cmd_sessions_show(args: Any, out: TextIO, err: TextIO) -> int:
    """``agentcore sessions show ID|PATH``: header facts, totals and the current branch, written
    without terminal escape sequences and control characters (:func:`~agentcore._safe.terminal_text`),
    as ``run`` and ``chat`` print the same answers and tool output."""
    from .._safe import terminal_text

    def write(text: str) -> None:
        out.write(terminal_text(text))

    with _corrupt_is_usage(), _open_for_reading(args) as session:
        stats = session.get_session_stats()
        context = session.build_context()
        write(
            f"session {session.id}\n  path: {session.path}\n  cwd: {session.cwd}\n"
            f"  created: {session.header.timestamp}\n"
        )
        if session.name:
            write(f"  name: {session.name}\n")
        if context.model is not None:
            write(f"  model: {context.model.key}\n")
        write(
            f"  messages: {stats.message_count} (all branches)  tokens: {stats.total_tokens}  "
            f"cost: ${stats.cost_total:.4f}\n"
        )
        tally = UsageTally().add_entries(session.entries())
        if tally.models:
            write("\nusage per model (all branches):\n" + usage_table(tally))
        write("\n")
        for entry in session.get_branch():
            if entry.type == "message":
                write(describe_message(entry.message) + "\n\n")
            elif entry.type in ("compaction", "branch_summary"):
                title = "compaction" if entry.type == "compaction" else "branch summary"
                write(f"[{title}]\n{entry.summary}\n\n")
    return 0


EXPORT_FORMATS = ("markdown", "html", "json", "jsonl")


def _branch_messages(session: Any) -> Tuple[List[Any], List[Any]]:
    """The current branch's entries that read as messages, and those messages: the messages, an
    application's custom messages, and the compaction and branch summaries (``compactionSummary``
    / ``branchSummary`` messages, as ``sessions show`` prints them: a transcript of a compacted
    session without its summary skips what the model was told)."""
    from ..session.compaction import entry_to_message

    entries: List[Any] = []
    messages: List[Any] = []
    for entry in session.get_branch():
        message = entry_to_message(entry, compactions=True)
        if message is not None:
            entries.append(entry)
            messages.append(message)
    return entries, messages


def _check_not_the_source(output: str, source: Any) -> None:
    """UsageError when ``-o`` names the session file being exported (the same file by another
    name, a symlink or a hard link too): writing the page over it destroyed the session."""
    if not isinstance(source, str) or not source:
        return
    try:
        same = os.path.samefile(output, source)
    except (OSError, ValueError):  # no such file yet (ValueError: a NUL in the name)
        return
    if same:
        raise UsageError(
            f"-o {output}: that is the session file being exported ({source}); writing the export "
            "over it would destroy the session: choose another file"
        )


def _write_output(path: str, text: str) -> None:
    """Write ``text`` (UTF-8) to the ``-o`` file atomically: a temp file beside it replaces it
    (:func:`~agentcore.builtin_tools.write.atomic_write`: through a symlink, keeping an existing
    file's mode), so a failure (a full disk, Ctrl+C) leaves the previous file whole and no half
    export. The folder must exist (it is not created). Something else than a regular file (a
    named pipe, ``/dev/stdout``) is written to in place, as ``os.replace`` would swap it for a
    file. Raises ``OSError``."""
    import stat

    from ..builtin_tools.write import atomic_write

    data = text.encode("utf-8")
    try:
        mode: Optional[int] = os.stat(path).st_mode  # through links: /dev/stdout is a pipe's
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        with open(path, "wb") as handle:
            handle.write(data)
        return
    target = os.path.realpath(path)
    folder = os.path.dirname(target)
    if not os.path.isdir(folder):  # atomic_write would create it: a typo must not make folders
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    atomic_write(target, data)


@contextlib.contextmanager
def _unexportable(session: Any, entry: Any, what: str) -> Iterator[None]:
    """A value JSON cannot carry in ``entry`` (NaN or an infinity, which Python's json reads from
    another writer's file) is a UsageError naming the file and the entry (exit 2), not invalid
    JSON on stdout (``--format json``) nor a bare ``SessionError`` (``jsonl``)."""
    from ..session import SessionError

    try:
        yield
    except (ValueError, SessionError) as exc:
        raise UsageError(
            f"{session.path or session.id}: entry {entry.id} cannot be exported as {what}: it holds a value "
            f"JSON cannot carry ({exc}); --format markdown or html show it"
        ) from None


def _note_empty_branch(session: Any, err: TextIO) -> None:
    """Say why an export of the current branch is empty when other branches hold messages."""
    total = session.get_session_stats().message_count
    if total:
        err.write(
            f"note: the current branch of session {session.id} has no messages (it was moved back "
            f"before its first prompt); {total} message(s) are on other branches: "
            "--format jsonl exports every entry\n"
        )


def cmd_sessions_export(args: Any, out: TextIO, err: TextIO) -> int:
    """``agentcore sessions export ID|PATH [--format F] [-o FILE]``.

    ``markdown``: the current branch as a readable transcript, without terminal escape sequences
    and control characters (:func:`~agentcore._safe.terminal_text`, as ``sessions show`` prints
    it: a session from someone else must not retitle or clear the terminal it is read in);
    ``html``: a standalone page of the whole tree, every branch (see :mod:`._html`); ``json``: the
    current branch's messages as a JSON array of reference message dicts (both with the branch's
    compaction and branch summaries and custom messages, see :func:`_branch_messages`); ``jsonl``:
    every entry of the session (all branches) as reference JSONL, header first (both as :func:`~agentcore.cli._render.terminal_json`: DEL, the
    C1 controls and bidirectional overrides as ``\\u`` escapes, the values unchanged).

    ``-o FILE`` replaces ``FILE`` atomically (:func:`_write_output`: a failure leaves the previous
    file whole); ``-o`` naming the exported session file itself is a UsageError (exit 2), as is a
    file that cannot be written. Without ``-o`` the text goes to ``out``.
    """
    from ..types import message_to_dict

    with _corrupt_is_usage(), _open_for_reading(args) as session:
        source = session.path
        if args.output:
            _check_not_the_source(args.output, source)
        fmt = args.format
        if fmt == "html":
            from ._html import session_to_html

            text = session_to_html(session)
        elif fmt == "jsonl":
            from ..session.entries import encode_line

            # the session files' own encoding: compact, JavaScript numbers, surrogates escaped
            lines = [encode_line(session.header.to_dict())]
            for entry in session.entries():
                with _unexportable(session, entry, "JSONL"):
                    lines.append(encode_line(entry.to_dict()))
            text = b"".join(lines).decode("utf-8")
        else:
            entries, messages = _branch_messages(session)
            if not messages:
                _note_empty_branch(session, err)
            if fmt == "json":
                for entry, message in zip(entries, messages):  # NaN would be written as NaN: no JSON
                    with _unexportable(session, entry, "JSON"):
                        json.dumps(message_to_dict(message), allow_nan=False)
                text = json.dumps([message_to_dict(m) for m in messages], ensure_ascii=False, indent=2) + "\n"
            else:
                from .._safe import terminal_text
                from ..jupyter import transcript_to_markdown

                # a transcript to read, as sessions show prints it: no escape sequences from the session
                text = terminal_text(transcript_to_markdown(messages)) + "\n"
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:  # lone surrogates (a cut emoji): JSON escapes them, text shows "?"
                text = (
                    json.dumps([message_to_dict(m) for m in messages], indent=2) + "\n"
                    if fmt == "json"
                    else text.encode("utf-8", "replace").decode("utf-8")
                )
    if fmt in ("json", "jsonl"):  # the same values, no raw C1 control or bidi override for a terminal
        from ._render import terminal_json

        text = terminal_json(text)
    if args.output:
        try:
            _write_output(args.output, text)
        except OSError as exc:  # a path the user gave: a usage error naming it, not a traceback name
            raise UsageError(f"-o {args.output}: cannot write it ({exc.strerror or exc})") from None
        err.write(f"wrote {fmt} to {args.output}\n")
    else:
        out.write(text)
    return 0

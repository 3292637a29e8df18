"""The ``agentcore`` command (also ``python -m agentcore``).

Commands: ``run PROMPT`` (one prompt, streamed; ``--json`` prints every agent event as a JSON
line; ``--schema SCHEMA`` prints the answer as JSON matching SCHEMA), ``chat`` (a REPL), ``rpc``
(JSON lines on stdin/stdout, see :mod:`agentcore.cli._rpc`), ``models``, ``plugins`` and
``sessions list|show|export``. ``run``, ``chat`` and ``rpc`` take ``--model provider/id``, ``--base-url``, ``--api-key-env``, ``--tools``,
``--session``, ``--thinking``, ``--system``, ``-a/--attach PATH`` (images and text files, see
:mod:`agentcore.cli._attach`), ``--no-context`` (no AGENTS.md in the system prompt, see
:mod:`agentcore.cli._context`), ``--approve`` (y/n/always before each tool call,
see :mod:`agentcore.cli._approve`) and ``-v/--verbose`` (DEBUG logging of the ``agentcore``
loggers to stderr), before or after the command name; ``run -u/--usage`` prints tokens and cost
per model to stderr after the answer. Plugins add options to ``run``/``chat`` and tools to their
agent through the ``add_cli_options``/``cli_tools`` hooks (see :mod:`agentcore.cli._hooks`).
Every ``run`` and ``chat`` is logged as a session unless ``--no-log`` (``-c`` continues the latest
of this directory, ``--no-stream`` prints answers whole); ``logs``, ``keys`` and ``aliases`` are
in :mod:`agentcore.cli._commands` and the modules it names.

Exit status: 0 ok, 1 the model request (or the run) failed, 2 usage or configuration error,
130 interrupted, 143 terminated (SIGTERM). API keys are never printed.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
from typing import Any, Callable, Dict, Iterator, List, NoReturn, Optional, Sequence, TextIO, cast

from .._safe import describe_exception, terminal_text
from ._commands import add_commands, add_logging_options, path_word, sessions_dir_option
from ._hooks import add_plugin_options
from ._interrupts import Terminated, interrupts_reach_main_thread
from ._setup import MODEL_ENV, CliOptions, UsageError

__all__ = ["main", "build_parser", "EXIT_OK", "EXIT_ERROR", "EXIT_USAGE", "EXIT_INTERRUPTED", "EXIT_TERMINATED"]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143  # 128 + SIGTERM: stopped by a supervisor, after the run was aborted and recorded

_EPILOG = f"""\
model selection: --model provider/id (see `agentcore models`), or {MODEL_ENV}=provider/id;
  --base-url URL --model ID (or local/ID) for a local OpenAI-compatible server: ID is sent as given,
  a local/ prefix is stripped; --model scripted for an offline demo.
exit status: 0 ok, 1 model/run error, 2 usage error, 130 interrupted (Ctrl-C), 143 terminated (SIGTERM)."""


# --------------------------------------------------------------------------- parser


def _common_options() -> argparse.ArgumentParser:
    """Options of ``run``/``chat``; SUPPRESS defaults let them stand before or after the command."""
    common = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    group = common.add_argument_group("agent options")
    group.add_argument(
        "-m",
        "--model",
        metavar="PROVIDER/ID",
        help=f"the model (default: ${MODEL_ENV}; 'scripted' = offline demo); with "
        "--base-url: ID or local/ID, the name the server expects (local/ is stripped)",
    )
    group.add_argument(
        "--base-url",
        metavar="URL",
        type=_http_url,
        help="endpoint URL; with an id not in the catalog (or local/ID): a local OpenAI-compatible server",
    )
    group.add_argument("--api-key-env", metavar="NAME", help="read the API key from environment variable NAME")
    group.add_argument("-t", "--tools", metavar="A,B", help="comma list of registry tool names, e.g. read,bash")
    group.add_argument(
        "-s",
        "--session",
        metavar="PATH|ID",
        type=path_word,
        help="resume/record a session: a .jsonl/.db file, an id in the sessions dir, 'new', or a session URL "
        "(sqlite:///path.db?session=ID)",
    )
    group.add_argument(
        "--sessions-dir",
        metavar="DIR",
        type=path_word,
        help="where session ids live (default: $AGENTCORE_SESSIONS_DIR or ~/.agentcore/sessions)",
    )
    group.add_argument(
        "--thinking", metavar="LEVEL", help="thinking level: off, minimal, low, medium, high, xhigh, max"
    )
    group.add_argument("--system", metavar="TEXT", help="the system prompt")
    group.add_argument(
        "-o",
        "--option",
        nargs=2,
        action="append",
        metavar=("KEY", "VALUE"),
        help="a provider option, e.g. -o temperature 0.2 -o max_tokens 800 -o timeout 60 "
        "(repeatable; names as in agentcore.options.StreamOptions)",
    )
    group.add_argument(
        "-a",
        "--attach",
        action="append",
        metavar="PATH",
        type=path_word,
        help="send a file with the (first) prompt: a PNG/JPEG/GIF/WebP image or a UTF-8 text file, "
        "sniffed from its bytes; repeatable; run -a - attaches stdin",
    )
    group.add_argument(
        "--no-context",
        action="store_true",
        help="do not add the AGENTS.md/CLAUDE.md files of this directory and its parents (up to the "
        "repository root) to the system prompt (chat and run with tools add them)",
    )
    group.add_argument(
        "--approve",
        action="store_true",
        help="ask y/n/a(lways for this tool) at the terminal before each tool call; with a "
        "PROMPT argument, run reads the answers from stdin",
    )
    group.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="log HTTP requests, retries, tool calls and sessions (DEBUG) to stderr; "
        "keys and auth headers are redacted",
    )
    add_logging_options(common)
    return common


class _Parser(argparse.ArgumentParser):
    """The top-level parser: a word that is not a command is most likely a prompt (``llm "hi"``)."""

    def error(self, message: str) -> NoReturn:
        if message.startswith("argument COMMAND: invalid choice"):
            message += "; to send a prompt: agentcore run PROMPT (agentcore chat for a conversation)"
        super().error(message)


def _chosen_parser(parser: argparse.ArgumentParser, args: Any) -> argparse.ArgumentParser:
    """The parser of the (sub)command ``args`` chose: ``agentcore logs`` for ``logs -s``."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(args, action.dest, None) or "")
            if chosen is not None:
                return _chosen_parser(chosen, args)
    return parser


def _http_url(value: str) -> str:
    """``--base-url``: an http(s) URL with a host; anything else would be retried as a connection error."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value.strip())
    except ValueError as exc:  # argparse would quote the whole value, password and all
        raise argparse.ArgumentTypeError(f"{_shown_url(value)!r} is not a valid URL ({exc})") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise argparse.ArgumentTypeError(
            f"{_shown_url(value)!r} is not an http:// or https:// URL (e.g. http://127.0.0.1:8080/v1)"
        )
    return value.strip()


def _shown_url(value: str) -> str:
    """``--base-url``'s value as an error may quote it: its password and key-like query values as
    ``***`` (:func:`~agentcore._safe.redact_url`); for a URL that cannot be parsed, its user info
    and its whole query."""
    from .._safe import redact_url

    value = value.strip()
    shown = redact_url(value)
    if shown == "<unparsable URL>":
        head, sep, rest = value.partition("://")
        if not sep:
            head, rest = "", head
        rest, query, _ = rest.partition("?")
        shown = head + sep + ("***@" + rest.rsplit("@", 1)[1] if "@" in rest else rest) + ("?***" if query else "")
    elif "://" not in shown and "@" in shown.split("/", 1)[0]:  # no scheme: user:password@ is no URL part
        shown = "***@" + shown.split("@", 1)[1]
    return shown


def build_parser(plugin_options: bool = True) -> argparse.ArgumentParser:
    """The argument parser of the ``agentcore`` command.

    With ``plugin_options`` (the default) the ``run`` and ``chat`` parsers carry the options the
    plugins add through the ``add_cli_options`` hook, which loads the plugins; :func:`main` passes
    False for the commands that build no agent, so that ``agentcore --help`` stays fast.
    """
    common = _common_options()
    parser = _Parser(
        prog="agentcore",
        parents=[common],
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run tool-using LLM agents from the terminal.",
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=argparse.ArgumentParser)

    run = commands.add_parser(
        "run",
        parents=[common],
        help="answer one prompt, streaming",
        description="Answer PROMPT. Piped stdin is sent first, then PROMPT on a new line "
        '(git diff | agentcore run "review this diff"); PROMPT - or '
        "none: stdin alone.",
    )
    run.add_argument("prompt", nargs="*", metavar="PROMPT")
    run.add_argument("--json", action="store_true", help="print every agent event as a JSON line")
    run.add_argument(
        "--schema",
        metavar="SCHEMA",
        help="answer as JSON matching SCHEMA: inline JSON, a JSON file, or fields like "
        "'name, age int, tags list' (the answer prints to stdout, progress to stderr)",
    )
    run.add_argument(
        "-u",
        "--usage",
        action="store_true",
        help="print the tokens and cost of the run per model to stderr after the answer",
    )
    run.set_defaults(handler=cmd_run)
    if plugin_options:
        add_plugin_options(run, "run")

    chat = commands.add_parser(
        "chat",
        parents=[common],
        help="interactive conversation (REPL)",
        description="A REPL: each line is a prompt; /help lists the commands.",
    )
    chat.add_argument("--json", action="store_true", help="print every agent event as a JSON line")
    chat.set_defaults(handler=cmd_chat)
    if plugin_options:
        add_plugin_options(chat, "chat")

    rpc = commands.add_parser(
        "rpc",
        parents=[common],
        help="JSON-lines protocol on stdin/stdout, for editors and other programs",
        description="Serve one agent over JSON lines: commands on stdin, responses and agent "
        "events on stdout, diagnostics on stderr (the reference coding agent's RPC mode; "
        "see the rpc page of the docs). Without --session a new session is recorded. An input "
        "line may hold 64 MiB.",
    )
    rpc.add_argument("--no-session", action="store_true", help="keep the session in memory only")
    rpc.set_defaults(handler=_lazy_rpc)
    if plugin_options:
        add_plugin_options(rpc, "rpc")

    models = commands.add_parser("models", help="list the registered models")
    models.add_argument("--provider", metavar="NAME", help="only this provider's models")
    models.add_argument(
        "-q",
        "--query",
        action="append",
        metavar="TEXT",
        help="only the models whose provider/id or name contains TEXT (repeatable: every one)",
    )
    models.add_argument("--json", action="store_true", help="one JSON object per model")
    models.set_defaults(handler=_lazy("cmd_models"))

    plugins = commands.add_parser("plugins", help="list plugins, what they provide and load errors")
    plugins.add_argument("--json", action="store_true", help="one JSON object per plugin")
    plugins.set_defaults(handler=_lazy("cmd_plugins"))

    sessions = commands.add_parser("sessions", help="list, show or export saved sessions")
    actions = sessions.add_subparsers(dest="action", metavar="ACTION")
    sessions.set_defaults(handler=_sessions_usage(sessions))
    dir_opt = sessions_dir_option()
    listing = actions.add_parser("list", parents=[dir_opt], help="sessions of this directory, newest first")
    listing.add_argument("--all", action="store_true", help="sessions of every directory")
    listing.add_argument("--json", action="store_true", help="one JSON object per session")
    listing.set_defaults(handler=_lazy("cmd_sessions_list"))
    show = actions.add_parser("show", parents=[dir_opt], help="a session's facts and current branch")
    show.add_argument(
        "session", metavar="ID|PATH", type=path_word, help="a session id (a unique prefix is enough) or a file"
    )
    show.set_defaults(handler=_lazy("cmd_sessions_show"))
    export = actions.add_parser("export", parents=[dir_opt], help="write a session as markdown/html/json/jsonl")
    export.add_argument(
        "session", metavar="ID|PATH", type=path_word, help="a session id (a unique prefix is enough) or a file"
    )
    export.add_argument(
        "--format",
        choices=("markdown", "html", "json", "jsonl"),
        default="markdown",
        help="markdown/json: the current branch; html: a standalone page of the whole tree; jsonl: every entry",
    )
    export.add_argument("-o", "--output", metavar="FILE", type=path_word, help="write to FILE instead of stdout")
    export.set_defaults(handler=_lazy("cmd_sessions_export"))
    add_commands(commands)  # logs, keys, aliases
    return parser


def _lazy(name: str) -> Callable[..., int]:
    def handler(args: Any, stdin: TextIO, out: TextIO, err: TextIO) -> int:
        from . import _info

        return getattr(_info, name)(args, out, err)

    return handler


def _lazy_rpc(args: Any, stdin: TextIO, out: TextIO, err: TextIO) -> int:
    from ._rpc import cmd_rpc

    return cmd_rpc(args, stdin, out, err)


def _sessions_usage(parser: argparse.ArgumentParser) -> Callable[..., int]:
    def handler(args: Any, stdin: TextIO, out: TextIO, err: TextIO) -> int:
        parser.print_usage(err)
        err.write("agentcore sessions: choose an action: list, show ID|PATH or export ID|PATH\n")
        return EXIT_USAGE

    return handler


# --------------------------------------------------------------------------- run and chat


def _read_prompt(args: Any, stdin: TextIO, required: bool = True) -> str:
    """The prompt of ``run``: the PROMPT words, piped stdin, or both (as ``llm`` does).

    When stdin is not a terminal it is read to the end first (so ``git diff | agentcore run
    "review this diff"`` sends the diff). Piped text and PROMPT are joined stdin first, then the
    prompt, on a new line; the piped text is kept as it is (indentation and inner blank lines),
    only surrounding blank lines are dropped. ``PROMPT`` ``-`` means stdin alone; with ``--attach
    -`` stdin is the attachment and only the words are read. Nothing in either: :class:`UsageError`
    (unless not ``required``: attachments alone are a prompt). A stdin that is a pipe which never
    closes blocks the command; ``< /dev/null`` avoids that.
    """
    prompt = " ".join(args.prompt).strip()
    piped = ""
    answers_on_stdin = bool(getattr(args, "approve", False)) and prompt not in ("", "-")
    if "-" in (getattr(args, "attach", None) or ()):  # -a -: stdin is the attachment
        if prompt == "-":
            raise UsageError("agentcore run: PROMPT - and --attach - both want stdin; give the prompt as words")
        if getattr(args, "approve", False):
            raise UsageError(
                "agentcore run: --approve reads its answers from stdin, which --attach - takes; attach a file"
            )
        return prompt
    if prompt == "-" or not (_isatty(stdin) or answers_on_stdin):
        piped = _strip_blank_lines(_read_all(stdin))
        if prompt == "-":
            prompt = ""
    prompt = "\n".join(part for part in (piped, prompt) if part)
    if not prompt and required:
        raise UsageError(
            'agentcore run needs a PROMPT: agentcore run "what is in this folder?" (or pipe the prompt on stdin)'
        )
    return prompt


def _read_all(stdin: Any) -> str:
    """Everything on stdin; "" when there is no stdin (closed: ``<&-``). Undecodable bytes:
    :class:`UsageError` (a binary file piped in by mistake); so is more than
    :data:`~agentcore.cli._attach.MAX_ATTACHMENT_BYTES` (``yes | agentcore run`` grew memory until the
    process was killed: no model takes a prompt that long).

    The bytes are decoded as UTF-8 whatever the locale's encoding (Windows' cp1252 would turn
    UTF-8 text into mojibake, an ASCII locale would refuse it), with the text layer's newlines."""
    from ._attach import MAX_ATTACHMENT_BYTES

    if stdin is None:
        return ""
    try:
        buffer = getattr(stdin, "buffer", None)
        if buffer is not None:
            data = buffer.read(MAX_ATTACHMENT_BYTES + 1)
            too_long = len(data) > MAX_ATTACHMENT_BYTES
            # utf-8-sig: a byte order mark (a file saved by Notepad) is not part of the prompt
            text = "" if too_long else data.decode("utf-8-sig").replace("\r\n", "\n").replace("\r", "\n")
        else:
            text = stdin.read(MAX_ATTACHMENT_BYTES + 1)
            too_long = len(text) > MAX_ATTACHMENT_BYTES
        if too_long:
            raise UsageError(
                f"stdin is larger than {MAX_ATTACHMENT_BYTES // (1024 * 1024)} MiB, more than any model takes as "
                "a prompt: pipe an excerpt (head -c ...), or attach the file (-a FILE)"
            )
        text.encode("utf-8")  # the C locale decodes with surrogateescape: undecodable bytes show here
    except UnicodeError:
        raise UsageError("stdin is not UTF-8 text: pipe text, not a binary file") from None
    except (OSError, ValueError):  # a closed or unreadable stdin holds no prompt
        return ""
    return text


def _strip_blank_lines(text: str) -> str:
    """``text`` without leading/trailing blank lines and trailing whitespace; inner text untouched
    (the first line keeps its indentation: piped code stays valid)."""
    lines = text.rstrip().split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    return "\n".join(lines)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def cmd_run(args: Any, stdin: TextIO, out: TextIO, err: TextIO) -> int:
    """Answer one prompt; the status is 1 when the final answer failed, 130 when interrupted."""
    from ._attach import check_model_input, prompt_with, read_attachments
    from ._context import apply_project_context
    from ._logs import build_logged, close_session
    from ._render import JsonPrinter, TextPrinter, abort_when_closed, run_outcome
    from ._setup import record_system
    from ._usage import count_usage, usage_lines

    schema = _read_schema(args.schema) if getattr(args, "schema", None) else None
    attached = read_attachments(getattr(args, "attach", None), stdin)
    prompt = _read_prompt(args, stdin, required=not attached)  # attachments alone are a prompt
    setup = build_logged(CliOptions.from_args(args), args, "run", err)
    stream = not getattr(args, "no_stream", False)
    # with --schema stdout carries only the JSON answer: the streamed text goes to stderr
    text = TextPrinter(out if schema is None else err, err, secret=setup.api_key, stream=stream)
    tally = count_usage(setup.agent) if getattr(args, "usage", False) else None
    failed = False  # a failed start: a session file made for this run goes again (close_session)
    try:
        check_model_input(setup.agent.model, attached, local=setup.agent.model.provider == "local")
        apply_project_context(setup.agent, args, "run", text.note)
        _note_uncatalogued(args, setup.agent.model, text.note)
        prompt, images = prompt_with(attached, prompt), attached.images or None
        printer = JsonPrinter(out, stream=stream) if args.json else text
        setup.agent.subscribe(printer)
        if schema is None:  # stdout carries the answer as it streams: a reader gone ends the run
            abort_when_closed(setup.agent, printer)
        if setup.session is not None and setup.created_session:
            text.note(f"[session {setup.session.id}: {setup.session.path or 'memory'}]")
        approver = _approver(args, setup.agent, _answer_reader(stdin), err)
        if approver is None:
            from ._approve import waiting_calls

            waiting = waiting_calls(setup.agent, "run", setup.session)
            if waiting is not None:  # the agent would refuse the prompt
                raise UsageError(f"agentcore run: nothing sent: {waiting}")
        record_system(setup)
        try:
            if approver is not None:
                approver.settle(setup.agent, [])  # calls a resumed session left waiting
            if schema is not None:
                status = _ask(
                    setup.agent, prompt, schema, out, text, one_line=args.json, images=images, approver=approver
                )
            else:
                new = setup.agent.prompt(prompt, images)
                if approver is not None:
                    new = approver.settle(setup.agent, new)
                # a reader gone ended the run (abort_when_closed): that is how a pipe ends, not a failure
                status = EXIT_OK if printer.out.closed else run_outcome(new)
        except KeyboardInterrupt as exc:  # Ctrl+C, or Terminated (SIGTERM)
            terminated = isinstance(exc, Terminated)
            text.note("[terminated: run aborted]" if terminated else "[interrupted: run aborted]")
            status = EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
        if tally is not None:  # after the answer, on stderr (an aborted run's requests were billed too)
            for line in usage_lines(tally):
                text.note(line)
        return status
    except BaseException:
        failed = True
        raise
    finally:
        close_session(setup, err, failed=failed)


def _read_schema(value: str) -> Dict[str, Any]:
    """``--schema``: inline JSON, a file holding JSON (or concise fields), or concise fields
    (``"name, age int, tags list"``). UsageError naming the problem."""
    from ..structured import output_spec, parse_concise_schema

    text = value
    stripped = value.strip()
    looks_like_a_path = not any(c.isspace() for c in stripped) and (
        stripped.endswith(".json") or os.sep in stripped or stripped.startswith("~")
    )
    if looks_like_a_path and not stripped.startswith("{") and not os.path.isfile(os.path.expanduser(stripped)):
        # not read as a concise field named "/path/schema.json" (the error then spoke of fields)
        raise UsageError(
            f"--schema {value}: no such file; give a JSON schema file, inline JSON or concise fields "
            "such as 'name, age int'"
        )
    if looks_like_a_path:
        value = os.path.expanduser(stripped)
    if not value.lstrip().startswith("{") and os.path.isfile(value):
        try:
            with open(value, encoding="utf-8-sig") as handle:  # a byte order mark is not JSON
                text = handle.read()
        except OSError as exc:
            raise UsageError(f"--schema {value}: cannot read it ({exc.strerror})") from None
    try:
        if text.lstrip().startswith("{"):
            schema = json.loads(text)
        else:
            schema = parse_concise_schema(text)
        output_spec(schema)  # a valid JSON schema
    except ValueError as exc:
        raise UsageError(f"--schema: {exc}") from None
    return schema


def _ask(
    agent: Any,
    prompt: str,
    schema: Dict[str, Any],
    out: TextIO,
    text: Any,
    *,
    one_line: bool = False,
    images: Optional[List[Any]] = None,
    approver: Any = None,
) -> int:
    """Ask for a JSON answer matching ``schema``; print it to ``out`` (indented JSON; one line
    after the event lines of ``--json``; as :func:`~agentcore.cli._render.terminal_json`). With
    ``approver`` (``--approve``) the calls the ask's run pauses for are asked about and the ask
    goes on, until it has its answer."""
    from ..structured import AskError, AskPaused, OutputValidationError

    try:
        try:
            value = agent.ask(prompt, schema, images=images)
        except AskPaused as paused:
            if approver is None:
                raise
            value = _resume_approved(agent, paused, approver)
    except (OutputValidationError, AskError) as exc:  # the run's own error was shown already
        text.note(f"[error] {exc}")
        return EXIT_ERROR
    from ._render import terminal_json  # the model's strings: no raw C1 control or bidi override

    out.write(terminal_json(json.dumps(value, indent=None if one_line else 2, ensure_ascii=False)) + "\n")
    return EXIT_OK


def _resume_approved(agent: Any, paused: Any, approver: Any) -> Any:
    """The answer of an ``ask`` that ``paused`` for approval: ``approver`` decides the waiting
    calls and the ask resumes, as often as its runs pause again."""
    from ..structured import AskPaused

    while True:
        approver.decide(agent)
        try:
            return paused.resume()
        except AskPaused as again:
            paused = again


def cmd_chat(args: Any, stdin: TextIO, out: TextIO, err: TextIO) -> int:
    """The REPL (see :mod:`agentcore.cli._chat`)."""
    from ._attach import check_model_input, read_attachments
    from ._chat import Chat
    from ._context import apply_project_context
    from ._logs import build_logged, close_session
    from ._render import JsonPrinter

    if "-" in (getattr(args, "attach", None) or ()):
        raise UsageError("agentcore chat: --attach - is for run (chat reads its prompts from stdin); attach a file")
    attached = read_attachments(getattr(args, "attach", None))
    options = CliOptions.from_args(args)
    setup = build_logged(options, args, "chat", err)
    stream = not getattr(args, "no_stream", False)
    failed = False  # a failed start: a session file made for this chat goes again (close_session)
    try:
        check_model_input(setup.agent.model, attached, local=setup.agent.model.provider == "local")
        context = apply_project_context(setup.agent, args, "chat", lambda line: err.write(line + "\n"))
        _note_uncatalogued(args, setup.agent.model, lambda line: err.write(line + "\n"))
        if _isatty(stdin):
            try:
                import readline  # noqa: F401  - line editing and history for input()
            except ImportError:
                pass
        printer = JsonPrinter(out, stream=stream) if args.json else None
        chat = Chat(setup, options, stdin, out, err, printer=printer)
        chat.text.stream = stream
        chat.attachments, chat.context_files = attached, context
        chat.approver = _approver(args, setup.agent, chat.read_answer, err)
        return chat.run()
    except BaseException:
        failed = True
        raise
    finally:
        close_session(setup, err, failed=failed)


def _note_uncatalogued(args: Any, model: Any, note: Callable[[str], object]) -> None:
    """Say so when ``--base-url`` sends a ``--model`` that looks like a typo of a catalog id
    (:func:`~agentcore.cli._names.uncatalogued_notice`)."""
    from ._names import uncatalogued_notice

    notice = uncatalogued_notice(getattr(args, "model", None), model)
    if notice is not None:
        note(notice)


def _answer_reader(stdin: Any) -> Callable[[], Optional[str]]:
    """``run --approve``'s answer lines, read from stdin as chat reads its lines (UTF-8 whatever
    the locale). None at end of input, and for a stdin that is closed (``<&-``) or cannot be read
    (``0>FILE``): the calls left are denied as at end of input (the command once failed there with
    ``agentcore: AttributeError``/``OSError``, status 1). A line that is not UTF-8 is no answer:
    the question is asked again."""
    from ._chat import _read_line

    def read() -> Optional[str]:
        try:
            return _read_line(stdin)
        except UnicodeError:
            return ""
        except (OSError, ValueError):
            return None

    return read


def _approver(args: Any, agent: Any, read_line: Callable[[], Optional[str]], err: TextIO) -> Any:
    """With ``--approve``: a :class:`~agentcore.cli._approve.TerminalApprover`, the agent's tools
    requiring approval. Else None."""
    if not getattr(args, "approve", False):
        return None
    from ._approve import TerminalApprover

    TerminalApprover.require_approval(agent)
    return TerminalApprover(read_line, err)


# --------------------------------------------------------------------------- entry point


def main(
    argv: Optional[Sequence[str]] = None,
    *,
    stdin: Optional[TextIO] = None,
    stdout: Optional[TextIO] = None,
    stderr: Optional[TextIO] = None,
) -> int:
    """Run the command with ``argv`` (default: ``sys.argv[1:]``); returns the exit status.

    A command's error is one ``agentcore: ...`` line on stderr, without terminal escape sequences
    and control characters (:func:`~agentcore._safe.terminal_text`): it may quote what a session
    file holds (its model, a tool name).

    A process started with descriptor 1 or 2 closed (``>&-``, ``2>&-``: ``sys.stdout`` or
    ``sys.stderr`` is None) writes what would go there nowhere, as to ``/dev/null``. A write to
    the process's stdout that fails (a full disk) ends the command with one line naming stdout,
    status 1 (:class:`_StdoutError`); one to its stderr is dropped (``2>>log`` on a full disk):
    notes and warnings never change what a command does or its exit status."""
    stdin = stdin if stdin is not None else sys.stdin
    out: TextIO = stdout if stdout is not None else (sys.stdout or _discard())
    err: TextIO = (
        stderr if stderr is not None else (cast(TextIO, _QuietStderr(sys.stderr)) if sys.stderr else _discard())
    )
    argv = list(argv) if argv is not None else [_utf8_word(word) for word in sys.argv[1:]]
    # plugins load only for a command line that may name run/chat (a prompt word "run" only costs time)
    try:
        parser = build_parser(plugin_options=bool({"run", "chat", "rpc"} & set(argv)))
        args, unknown = parser.parse_known_args(argv)
        if unknown:  # said by the command they were given to, with its usage (not the top-level one)
            _chosen_parser(parser, args).error(f"unrecognized arguments: {' '.join(unknown)}")
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    except KeyboardInterrupt:  # while plugins load (a slow add_cli_options): no traceback
        err.write("\nagentcore: interrupted\n")
        return EXIT_INTERRUPTED
    handler = _print_version if getattr(args, "version", False) else getattr(args, "handler", None)
    if handler is None:
        parser.print_help(err)
        return EXIT_USAGE
    # the process's stdout says so when a write fails (a full disk under `> answer.txt`); rpc
    # owns descriptor 1 itself (it moves it aside) and is given the stream as it is
    given = _NamedStdout(out) if stdout is None and sys.stdout is not None and handler is not _lazy_rpc else out
    try:
        with _verbose_logging(err, getattr(args, "verbose", False)), _plain_warnings(err):
            with (
                _replacing_unencodable(out if stdout is None else None),
                interrupts_reach_main_thread(),
            ):  # Ctrl-C at a readline prompt is never lost
                return handler(args, stdin, cast(TextIO, given), err)
    except UsageError as exc:  # (as terminal_text: it may quote a session file's model, a tool name)
        message = terminal_text(str(exc))
        err.write(message if message.startswith("agentcore") else f"agentcore: {message}")
        err.write("\n")
        return EXIT_USAGE
    except Terminated:
        err.write("\nagentcore: terminated\n")
        return EXIT_TERMINATED
    except KeyboardInterrupt:
        err.write("\nagentcore: interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader of our output went away (e.g. `| head`)
        _silence_stdout()
        return EXIT_OK
    except _StdoutError as exc:  # a bare "OSError: [Errno 28]" named no file: the session? the logs?
        err.write(f"agentcore: {terminal_text(str(exc))}\n")
        _silence_stdout()
        return EXIT_ERROR
    except Exception as exc:  # noqa: BLE001 - a clean message instead of a traceback
        err.write(f"agentcore: {terminal_text(describe_exception(exc))}\n")
        return EXIT_ERROR


class _StdoutError(OSError):
    """Writing to the process's stdout failed (not a reader that went away: a full disk, a file
    over ``ulimit -f``, an I/O error): an ``OSError`` of the failure's errno whose message names
    stdout and, where the system says, the file it is (``/proc/self/fd/1``, read when it fails)."""

    def __init__(self, cause: OSError) -> None:
        super().__init__(cause.errno, cause.strerror)
        self.target = _stdout_target()

    def __str__(self) -> str:
        return f"cannot write to stdout{f' ({self.target})' if self.target else ''}: {self.strerror}"


def _stdout_target() -> str:
    """The file descriptor 1 is (Linux's ``/proc/self/fd/1``), or "" where that is unknown."""
    try:
        target = os.readlink("/proc/self/fd/1")
    except (OSError, ValueError):
        return ""
    return target if target.startswith("/") else ""


class _NamedStdout:
    """The process's stdout as the commands write it: a write or flush that fails with an
    ``OSError`` raises :class:`_StdoutError` instead (BrokenPipeError stays: the reader left);
    everything else is the stream's own."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        with self._named():
            return self._stream.write(text)

    def flush(self) -> None:
        with self._named():
            self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    @staticmethod
    @contextlib.contextmanager
    def _named() -> Iterator[None]:
        try:
            yield
        except (BrokenPipeError, _StdoutError):
            raise
        except OSError as exc:
            raise _StdoutError(exc) from None


class _QuietStderr:
    """The process's stderr as the commands write it: a write or flush that fails (a full disk,
    a reader that went away) is dropped, as a note nobody can read; the rest is the stream's."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError:
            return len(text)

    def flush(self) -> None:
        with contextlib.suppress(OSError):
            self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _Discard(io.TextIOBase):
    """The stream of a closed descriptor 1 or 2: takes every write and keeps nothing (with None,
    the first note of a run failed it with ``AttributeError``, and the error message failed too)."""

    def write(self, text: str) -> int:
        return len(text)


def _discard() -> TextIO:
    return cast(TextIO, _Discard())


def _utf8_word(word: str) -> str:
    """A command-line word as UTF-8 text: an ASCII locale (``LC_ALL=C`` without UTF-8 mode) decodes
    argv with surrogates for its non-ASCII bytes, which no request can send."""
    if not any("\udc80" <= c <= "\udcff" for c in word):
        return word
    try:
        return os.fsencode(word).decode("utf-8")
    except UnicodeError:  # not UTF-8 either: left for the command to refuse
        return word


def _print_version(args: Any, stdin: TextIO, out: TextIO, err: TextIO) -> int:
    from .. import __version__

    out.write(f"agentcore {__version__}\n")
    out.flush()  # a reader that went away shows here, inside main's BrokenPipeError handling
    return EXIT_OK


@contextlib.contextmanager
def _replacing_unencodable(stream: Any) -> Iterator[None]:
    """While the command runs, ``stream`` (the process's stdout) writes ``?`` for a character its
    encoding lacks (Windows' cp1252 into a file, an ASCII locale) or that no encoding can write (a
    lone surrogate: an emoji a provider cut in two, in an answer or a session) instead of raising:
    the answer and every ``--json`` line come out whole. That covers ``surrogateescape`` streams
    too (the C locale's and UTF-8 mode's stdout), where an undecodable byte of a file name then
    shows as ``?``. Its error handler is restored afterwards."""
    errors = getattr(stream, "errors", None)
    if errors not in ("strict", "surrogateescape") or not hasattr(stream, "reconfigure"):
        yield
        return
    stream.reconfigure(errors="replace")
    try:
        yield
    finally:
        with contextlib.suppress(ValueError, OSError):  # closed by then (a broken pipe)
            stream.reconfigure(errors=errors)


@contextlib.contextmanager
def _plain_warnings(err: TextIO) -> Iterator[None]:
    """Show agentcore's own warnings (a plugin or the user's models.json failing to load) as one
    ``agentcore: ...`` line on ``err``, without Python's source location and code line; other
    warnings keep Python's format."""
    import warnings

    previous = warnings.showwarning

    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        plugins = sys.modules.get("agentcore.plugins")  # loaded by whatever warned; never imported here
        ours = getattr(plugins, "PluginLoadWarning", None)
        if ours is not None and isinstance(category, type) and issubclass(category, ours):
            text = str(message)
            err.write((text if text.startswith("agentcore") else f"agentcore: {text}") + "\n")
        else:
            previous(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = previous


@contextlib.contextmanager
def _verbose_logging(err: TextIO, verbose: bool) -> Iterator[None]:
    """With ``-v``: DEBUG records of the ``agentcore`` loggers go to ``err`` while the command runs.

    The handler is the CLI's own (the library adds none) and is removed afterwards, with the
    logger's level restored, so ``main()`` called in-process leaves logging as it found it. Its
    lines are :func:`~agentcore._safe.terminal_text`: a record may quote what a model sent (the
    name and id of a tool call) or a server's error text."""
    if not verbose:
        yield
        return
    import logging

    logger = logging.getLogger("agentcore")
    handler = logging.StreamHandler(err)
    handler.setFormatter(_terminal_formatter("[%(levelname)s %(name)s] %(message)s"))
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _terminal_formatter(fmt: str) -> Any:
    """A ``logging.Formatter`` of ``fmt`` whose records are written as :func:`terminal_text`."""
    import logging

    class Formatter(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            return terminal_text(super().format(record))

    return Formatter(fmt)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not fail again."""
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass

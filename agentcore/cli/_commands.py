"""The parsers of ``agentcore logs``, ``keys`` and ``aliases``, and the logging options of
``run``/``chat`` (``-c``, ``--no-log``, ``--no-stream``).

Handlers import their module on first use, so ``agentcore --help`` stays fast.
"""

from __future__ import annotations

import argparse
import os
from typing import Any, Callable, TextIO

__all__ = ["add_logging_options", "add_commands", "path_word", "sessions_dir_option"]


def add_logging_options(common: argparse.ArgumentParser) -> None:
    """``-c/--continue``, ``--no-log`` and ``--no-stream`` of ``run`` and ``chat``."""
    group = common.add_argument_group("logging and output")
    group.add_argument(
        "-c",
        "--continue",
        dest="continue_",
        action="store_true",
        help="continue the latest conversation of this directory (see `agentcore logs`)",
    )
    group.add_argument(
        "--no-log",
        action="store_true",
        help="do not record this conversation in the sessions dir (also: AGENTCORE_NO_LOG=1, `agentcore logs off`)",
    )
    group.add_argument(
        "--no-stream",
        action="store_true",
        help="print each answer once it is complete instead of as it streams",
    )


def _handler(module: str, name: str) -> Callable[..., int]:
    def handler(args: Any, stdin: TextIO, out: TextIO, err: TextIO) -> int:
        import importlib

        return getattr(importlib.import_module(f"agentcore.cli.{module}"), name)(args, stdin, out, err)

    return handler


def path_word(word: str) -> str:
    """A command-line path as the file system spells it (an argparse ``type``).

    ``main`` reads every word of argv as UTF-8 text (a prompt must be). In an ASCII locale
    without UTF-8 mode (``LC_ALL=C PYTHONUTF8=0``) the file system encoding cannot encode the
    characters that gives (``séss.jsonl``: every open failed with ``'ascii' codec can't encode``),
    so a path that the file system encoding cannot encode takes back the bytes it was given
    (the same for a path typed to chat's ``/attach``: stdin is read as UTF-8 too)."""
    try:
        os.fsencode(word)
    except UnicodeEncodeError:
        try:
            return os.fsdecode(word.encode("utf-8", "surrogateescape"))
        except UnicodeError:  # a lone surrogate that stands for no byte: left for the open to refuse
            return word
    return word


def sessions_dir_option(default: Any = None) -> argparse.ArgumentParser:
    """A parent parser holding ``--sessions-dir DIR`` (default None: the default directory;
    ``argparse.SUPPRESS`` for a sub-action, so that it keeps a value given before the action)."""
    dir_opt = argparse.ArgumentParser(add_help=False)
    dir_opt.add_argument(
        "--sessions-dir",
        metavar="DIR",
        type=path_word,
        default=default,
        help="the sessions directory (default: $AGENTCORE_SESSIONS_DIR or ~/.agentcore/sessions)",
    )
    return dir_opt


def add_commands(commands: Any) -> None:
    """Add ``logs``, ``keys`` and ``aliases`` to the ``agentcore`` subcommands."""
    dir_opt = sessions_dir_option()
    logs = commands.add_parser(
        "logs",
        parents=[dir_opt],
        usage="agentcore logs [-n N] [-q TEXT] [--cwd] [--json] [--sessions-dir DIR] [on|off|status|path]",
        help="the latest logged conversations; -q searches them",
        description="The latest conversations of every directory (newest last), or with -q those whose "
        "prompts or answers contain every word of TEXT. `logs on|off|status|path` manage logging.",
    )
    logs.add_argument("-n", "--count", type=int, default=3, metavar="N", help="how many (default 3; 0: all)")
    logs.add_argument("-q", "--query", metavar="TEXT", help="full-text search over prompts and answers")
    logs.add_argument("--cwd", action="store_true", help="only the conversations of this directory")
    logs.add_argument("--json", action="store_true", help="the conversations as one JSON array")
    logs.set_defaults(handler=_handler("_logs", "cmd_logs"))
    logs_actions = logs.add_subparsers(dest="logs_action", metavar="ACTION")
    action_dir_opt = sessions_dir_option(argparse.SUPPRESS)
    for name, help_text in (
        ("on", "log every run and chat (the default)"),
        ("off", "stop logging by default (writes a marker in the config dir)"),
        ("status", "whether logging is on, where and how many conversations"),
        ("path", "print the path of the logs index"),
    ):
        action = logs_actions.add_parser(name, parents=[action_dir_opt], help=help_text)
        action.set_defaults(handler=_handler("_logs", f"cmd_logs_{name}"))

    keys = commands.add_parser(
        "keys", help="API keys stored in the config dir (keys.json, mode 0600); no action: list their names"
    )
    keys_actions = keys.add_subparsers(dest="keys_action", metavar="ACTION")
    keys.set_defaults(handler=_handler("_keys", "cmd_keys_list"))  # bare `keys` lists, as `llm keys`
    key_set = keys_actions.add_parser(
        "set", help="store a key: read from a hidden prompt, or from stdin when piped (never an argument)"
    )
    key_set.add_argument("name", metavar="NAME", help="the provider, e.g. openai or anthropic")
    key_set.set_defaults(handler=_handler("_keys", "cmd_keys_set"))
    keys_actions.add_parser("list", help="the names of the stored keys").set_defaults(
        handler=_handler("_keys", "cmd_keys_list")
    )
    keys_actions.add_parser("path", help="print the path of the keys file").set_defaults(
        handler=_handler("_keys", "cmd_keys_path")
    )

    aliases = commands.add_parser("aliases", help="short names for models (--model NAME); no action: list them")
    # bare `aliases` lists, as `llm aliases` does, --json too
    aliases.add_argument("--json", action="store_true", help="list them as one JSON object {name: model}")
    aliases_actions = aliases.add_subparsers(dest="aliases_action", metavar="ACTION")
    aliases.set_defaults(handler=_handler("_aliases", "cmd_aliases_list"))
    alias_set = aliases_actions.add_parser("set", help="make NAME stand for a model")
    alias_set.add_argument("name", metavar="NAME")
    alias_set.add_argument("model", metavar="PROVIDER/ID")
    alias_set.set_defaults(handler=_handler("_aliases", "cmd_aliases_set"))
    alias_list = aliases_actions.add_parser("list", help="the aliases and their models")
    # SUPPRESS: `aliases --json list` keeps the --json given before the action
    alias_list.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="one JSON object {name: model}"
    )
    alias_list.set_defaults(handler=_handler("_aliases", "cmd_aliases_list"))
    alias_remove = aliases_actions.add_parser("remove", help="remove an alias")
    alias_remove.add_argument("name", metavar="NAME")
    alias_remove.set_defaults(handler=_handler("_aliases", "cmd_aliases_remove"))
    aliases_actions.add_parser("path", help="print the path of the aliases file").set_defaults(
        handler=_handler("_aliases", "cmd_aliases_path")
    )

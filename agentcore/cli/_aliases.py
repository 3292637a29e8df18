"""``agentcore aliases set NAME provider/id | list | remove NAME | path``: short model names.

Aliases live in ``<config dir>/aliases.json`` (``{"fast": "groq/llama-3.1-8b-instant"}``).
``--model NAME`` (and ``AGENTCORE_MODEL``, and chat's ``/model NAME``) looks the name up here
before the catalog, so an alias may shadow a bare catalog id; alias names never contain ``/``
and so never shadow a ``provider/id``. The target is checked when the alias is used: an alias to a
model that is not (or no longer) registered is a :class:`UsageError` naming the alias.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Optional, TextIO, Tuple

from ._config import config_path, read_json_map, update_json_map
from ._setup import SCRIPTED, UsageError

__all__ = [
    "ALIASES_FILE",
    "aliases_path",
    "resolve_alias",
    "load_aliases",
    "cmd_aliases_set",
    "cmd_aliases_list",
    "cmd_aliases_remove",
    "cmd_aliases_path",
]

ALIASES_FILE = "aliases.json"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")


def aliases_path() -> str:
    return config_path(ALIASES_FILE)


def load_aliases() -> Dict[str, str]:
    """Every alias, name -> ``provider/id`` ({} without an aliases file)."""
    return dict(read_json_map(aliases_path()))


def resolve_alias(ref: str) -> Tuple[str, Optional[str]]:
    """``(model ref, alias name or None)``: the target of ``ref`` when it is an alias, else ``ref``.

    Reads the aliases file (absent: no aliases); a ref containing ``/`` is never an alias. An
    alias a hand edit pointed at another alias is followed to the model at the end, so the ref
    returned is never an alias itself. :class:`UsageError` naming the file when an alias names no
    model (an empty value) or the aliases form a loop (``a -> b -> a``).
    """
    if "/" in ref:
        return ref, None
    path = aliases_path()
    aliases = read_json_map(path)
    chain = [ref]
    while chain[-1] in aliases:
        name = chain[-1]
        target = aliases[name].strip()
        if not target:
            raise UsageError(
                f"--model {ref}: the alias {name} in {path} names no model; set it: agentcore aliases set {name} provider/id"
            )
        if target in chain:
            loop = " -> ".join(chain[chain.index(target) :] + [target])
            raise UsageError(
                f"--model {ref}: the aliases {loop} in {path} form a loop; point one at a model: "
                f"agentcore aliases set {name} provider/id"
            )
        chain.append(target)
        if "/" in target:
            break
    return (chain[-1], ref) if len(chain) > 1 else (ref, None)


def cmd_aliases_set(args: Any, stdin: TextIO, out: TextIO, err: TextIO) -> int:
    """``agentcore aliases set NAME provider/id``."""
    name, target = args.name, args.model.strip()
    if not _NAME.match(name):
        raise UsageError(f"aliases set {name!r}: an alias is a word of letters, digits, '.', '_', '-' or ':' (no '/')")
    if name == SCRIPTED:
        raise UsageError("aliases set scripted: 'scripted' is the offline demo model; choose another name")
    if target != SCRIPTED and "/" not in target:
        raise UsageError(f"aliases set {name} {target}: give the model as provider/id (`agentcore models` lists them)")
    _warn_unknown_model(target, err)
    update_json_map(aliases_path(), lambda aliases: aliases.update({name: target}))
    err.write(f"alias {name} -> {target}\n")
    return 0


def _warn_unknown_model(target: str, err: TextIO) -> None:
    """A note when ``target`` is not registered now (it may be a model a plugin adds later, or a
    local server's model used with ``--base-url``)."""
    if target == SCRIPTED or target.startswith("local/"):
        return
    import warnings

    from ..plugins import UnknownModelError, get_model

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            get_model(target)
    except UnknownModelError:
        err.write(
            f"note: {target} is not a registered model (`agentcore models` lists them); "
            "the alias works only once it is, or with --base-url for a local server\n"
        )


def cmd_aliases_list(args: Any, stdin: TextIO, out: TextIO, err: TextIO) -> int:
    """``agentcore aliases list [--json]``: ``NAME: provider/id`` lines (or one JSON object)."""
    import json

    aliases = read_json_map(aliases_path())
    if getattr(args, "json", False):
        out.write(json.dumps(aliases, indent=2, sort_keys=True) + "\n")
        return 0
    if not aliases:
        err.write("no aliases; add one with: agentcore aliases set NAME provider/id\n")
    for name in sorted(aliases):
        out.write(f"{name}: {aliases[name]}\n")
    return 0


def cmd_aliases_remove(args: Any, stdin: TextIO, out: TextIO, err: TextIO) -> int:
    """``agentcore aliases remove NAME``; an unknown name is a usage error (exit 2)."""

    def remove(aliases: Dict[str, str]) -> None:
        if args.name not in aliases:
            known = ", ".join(sorted(aliases)) or "none"
            raise UsageError(f"aliases remove {args.name}: no such alias (aliases: {known})")
        del aliases[args.name]

    update_json_map(aliases_path(), remove)
    err.write(f"removed alias {args.name}\n")
    return 0


def cmd_aliases_path(args: Any, stdin: TextIO, out: TextIO, err: TextIO) -> int:
    out.write(aliases_path() + "\n")
    return 0

"""Project context: ``AGENTS.md`` (or ``CLAUDE.md``) files added to the system prompt.

``chat`` and ``run --tools ...`` (not a plain ``run``, which only answers a question) look for
context files as the reference coding agent does: in each directory from the working directory
up, ``AGENTS.md`` is taken, or ``CLAUDE.md`` when the directory has no ``AGENTS.md`` (one file per
directory). The walk stops at the repository root (the first directory holding ``.git``,
included); outside a repository it stops at ``$HOME`` (included) or the filesystem root. The
files are included outermost first, so the instructions closest to the working directory come
last. ``--no-context`` turns this off.

The system prompt then ends with a section framed as the reference frames it::

    # Project context

    Instructions and guidelines for this project, from its context files:

    ## /abs/path/AGENTS.md

    ...the file's text...

A file that cannot be read or is not UTF-8 text is skipped with a notice, as is one larger than
:data:`MAX_CONTEXT_BYTES`, and a working directory that was removed loads none (with a notice):
bad project files never stop the command.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, List, Optional

__all__ = [
    "CONTEXT_NAMES",
    "MAX_CONTEXT_BYTES",
    "ContextFile",
    "find_context_files",
    "system_with_context",
    "wants_context",
    "apply_project_context",
    "describe_context",
]

#: The names looked for in each directory, the first found wins (the reference's order).
CONTEXT_NAMES = ("AGENTS.md", "CLAUDE.md")
#: A larger context file is skipped (with a notice): it would crowd out the conversation.
MAX_CONTEXT_BYTES = 256 * 1024

_HEADING = "# Project context\n\nInstructions and guidelines for this project, from its context files:"


@dataclass
class ContextFile:
    """A loaded context file: its absolute path, its text and its size in bytes."""

    path: str
    text: str
    size: int


def _context_dirs(cwd: str, home: Optional[str]) -> List[str]:
    """The directories searched, innermost first: cwd up to the repository root, else to $HOME
    or the filesystem root."""
    home = os.path.realpath(home) if home else None
    here = os.path.realpath(cwd)
    dirs = []
    while True:
        dirs.append(here)
        if os.path.exists(os.path.join(here, ".git")) or here == home:
            break
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    # outside a repository below $HOME, the walk above reached $HOME; elsewhere the root
    return dirs


def find_context_files(
    cwd: Optional[str] = None,
    home: Optional[str] = None,
    note: Optional[Callable[[str], object]] = None,
) -> List[ContextFile]:
    """The context files for ``cwd`` (default: the working directory), outermost first.

    ``home`` defaults to ``$HOME``; ``note`` receives a line for each file skipped (unreadable,
    not UTF-8, too large), and one when the working directory no longer exists (removed under the
    shell that is still in it): no files then."""
    if not cwd:
        try:
            cwd = os.getcwd()
        except OSError as exc:
            if note is not None:
                note(f"[context: none loaded: the working directory cannot be read ({exc.strerror or exc})]")
            return []
    home = home if home is not None else os.path.expanduser("~")
    found: List[ContextFile] = []
    for directory in _context_dirs(cwd, home):
        for name in CONTEXT_NAMES:
            path = os.path.join(directory, name)
            if not os.path.isfile(path):
                continue
            loaded = _load(path, note)
            if loaded is not None:
                found.append(loaded)
            break  # one file per directory, as the reference: AGENTS.md hides CLAUDE.md
    found.reverse()
    return found


def _load(path: str, note: Optional[Callable[[str], object]]) -> Optional[ContextFile]:
    def skip(why: str) -> None:
        if note is not None:
            note(f"[context: skipped {path}: {why}]")

    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_CONTEXT_BYTES + 1)
    except OSError as exc:
        skip(f"cannot read it ({exc.strerror or exc})")
        return None
    if len(data) > MAX_CONTEXT_BYTES:
        skip(f"larger than {MAX_CONTEXT_BYTES // 1024} KiB")
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        skip("not UTF-8 text")
        return None
    return ContextFile(path=path, text=text.strip("\ufeff").strip(), size=len(data))


def system_with_context(system: str, files: List[ContextFile]) -> str:
    """``system`` followed by the project context section (``system`` alone without files)."""
    if not files:
        return system
    parts = [_HEADING] + [f"## {f.path}\n\n{f.text}" for f in files]
    section = "\n\n".join(parts)
    return f"{system.rstrip()}\n\n{section}\n" if system.strip() else f"{section}\n"


def wants_context(command: str, args: object, has_tools: bool) -> bool:
    """Whether ``command`` loads project context: ``chat`` and ``rpc`` (an editor's agent, as the
    reference's coding agent), and ``run`` when its agent has tools (``--tools``, or a plugin's
    such as ``--mcp``), unless ``--no-context``."""
    if getattr(args, "no_context", False):
        return False
    return command in ("chat", "rpc") or (command == "run" and has_tools)


def apply_project_context(agent: Any, args: object, command: str, note: Callable[[str], object]) -> List[ContextFile]:
    """Add the project context to ``agent``'s system prompt when :func:`wants_context`; return
    the files loaded (for chat's ``/context``)."""
    if not wants_context(command, args, bool(agent.tools)):
        return []
    files = find_context_files(note=note)
    agent.system_prompt = system_with_context(agent.system_prompt or "", files)
    return files


def describe_context(files: List[ContextFile]) -> str:
    """Chat's ``/context``: the files loaded into the system prompt, with their sizes."""
    if not files:
        return (
            "no project context loaded (no AGENTS.md or CLAUDE.md from here up to the repository root, or --no-context)"
        )
    lines = ["project context in the system prompt (outermost first):"]
    lines += [f"  {f.path} ({f.size} bytes)" for f in files]
    return "\n".join(lines)

"""Walking a folder tree for ``find`` and ``grep``, and glob patterns.

The walk is depth first with the entries of each folder sorted by name (folders and files mixed,
as ``rg --sort path`` orders them), skips version-control folders (``.git``, ``.hg``, ``.svn``,
``.bzr``, ``_darcs``, ``CVS``), includes dot files, never follows symlinked folders, and does not
read ``.gitignore`` files.

Globs: ``*`` (within one path segment), ``**`` (any number of segments), ``?``, ``[abc]``/``[!abc]``
and ``{a,b}``. A pattern without ``/`` matches an entry's name at any depth (``*.py``); a pattern
with ``/`` matches the path relative to the searched folder (``src/**/*.py``).
"""

from __future__ import annotations

import os
import re
from typing import Any, Callable, Iterator, List, Tuple

__all__ = ["VCS_DIRS", "glob_to_regex", "compile_glob", "normalize_glob", "walk"]

VCS_DIRS = frozenset({".git", ".hg", ".svn", ".bzr", "_darcs", "CVS"})


def glob_to_regex(pattern: str) -> str:
    """The regular expression (anchored at both ends) equivalent to ``pattern``."""
    return "(?s:" + _translate(pattern) + r")\Z"


def _translate(pattern: str) -> str:
    out: List[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                i += 2
                if i < n and pattern[i] == "/":
                    out.append("(?:.*/)?")
                    i += 1
                else:
                    out.append(".*")
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = i + 1  # a "]" right after "[" or "[!" is a member, not the end
            j += j < n and pattern[j] == "!"
            j += j < n and pattern[j] == "]"
            end = pattern.find("]", j)
            if end < 0:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end]
                negate = body.startswith("!")
                body = body[1:] if negate else body
                body = body.replace("\\", "\\\\").replace("[", "\\[")
                out.append("[" + ("^" if negate else "") + body + "]")
                i = end
        elif c == "{":
            end = _closing_brace(pattern, i)
            if end < 0:
                out.append(re.escape(c))
            else:
                options = _split_top_level(pattern[i + 1 : end])
                out.append("(?:" + "|".join(_translate(o) for o in options) + ")")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def _closing_brace(pattern: str, start: int) -> int:
    depth = 0
    for j in range(start, len(pattern)):
        if pattern[j] == "{":
            depth += 1
        elif pattern[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return -1


def _split_top_level(body: str) -> List[str]:
    parts: List[str] = []
    depth = 0
    current: List[str] = []
    for ch in body:
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        depth += ch == "{"
        depth -= ch == "}"
        current.append(ch)
    parts.append("".join(current))
    return parts


def normalize_glob(pattern: str) -> str:
    """``pattern`` without surrounding whitespace and a leading ``./`` (``./src/*.py`` is
    ``src/*.py``), as :func:`compile_glob` reads it; ripgrep must be given the same text."""
    pattern = pattern.strip()
    return pattern[2:] if pattern.startswith("./") else pattern


def compile_glob(pattern: str) -> Callable[[str], bool]:
    """A predicate over relative ``/``-separated paths (see the module docstring for the rules).

    Raises ``ValueError`` naming the pattern when it cannot be compiled (``[z-a]``)."""
    pattern = normalize_glob(pattern)
    try:
        regex = re.compile(glob_to_regex(pattern.lstrip("/")))
    except re.error as exc:  # "[z-a]": the regex error alone would not say it is about the glob
        raise ValueError(f"Invalid glob {pattern!r}: {exc.msg}; fix the pattern") from None
    if "/" in pattern:
        return lambda rel: regex.match(rel) is not None
    return lambda rel: regex.match(rel.rsplit("/", 1)[-1]) is not None


def walk(top: str, signal: Any = None) -> Iterator[Tuple[str, str, bool]]:
    """Yield ``(relative_path, absolute_path, is_dir)`` under ``top`` (see the module docstring).

    Unreadable folders are skipped silently. Raises ``AbortError`` when ``signal`` is aborted.
    """
    stack = [iter(_entries("", top))]
    while stack:
        if signal is not None:
            signal.raise_if_aborted()
        item = next(stack[-1], None)
        if item is None:
            stack.pop()
            continue
        yield item
        rel, path, is_dir = item
        if is_dir:
            stack.append(iter(_entries(rel + "/", path)))


def _entries(rel_dir: str, abs_dir: str) -> List[Tuple[str, str, bool]]:
    try:
        with os.scandir(abs_dir) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        return []
    found: List[Tuple[str, str, bool]] = []
    for entry in entries:
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            continue
        if is_dir and entry.name in VCS_DIRS:
            continue
        found.append((rel_dir + entry.name, entry.path, is_dir))
    return found

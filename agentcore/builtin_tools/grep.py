"""The ``grep`` tool: lines matching a regular expression, as ``path:line:text``.

Uses ripgrep (``rg``) when it is on PATH and a pure-Python search otherwise; both give the same
format and, for ordinary patterns, the same lines in the same order: paths relative to the working
directory (bytes of a name that are not UTF-8 shown as U+FFFD, as ripgrep shows them), files in
walk order (sorted by name, depth first), text after a byte-order mark read as
ripgrep reads it (UTF-8 or UTF-16; ``^`` matches after the mark), dot files included,
``.gitignore`` NOT honoured, version-control folders, symlinks, binary files (a NUL byte early on,
in a file without a UTF-16 byte-order mark) and special files (named pipes, devices, sockets:
reading one could block forever) skipped. A binary file given as ``path`` is refused (raises)
rather than reported as having no matches.
Regex dialects differ at the edges (ripgrep's Rust syntax has no look-around or backreferences;
Python's ``re`` has them); ``literal=true`` avoids the question.

Options: ``glob`` filters files (see :mod:`agentcore.builtin_tools._walk`; ``!`` in front excludes
what it matches, folders included), ``ignoreCase``,
``literal``, ``limit`` (default 100 matches, then a notice). Lines longer than 500 characters are
cut. Memory stays bounded however long a line is: at most 1 MB of one is held at a time (the
Python search matches a longer line a piece at a time, each with the 64 KB before it, so only a
match longer than that or a look-around across a piece's edge can be misjudged). Files in a searched folder that cannot be read are skipped. Fails (raises) for an invalid
regex or glob, a pattern holding a line break (lines are matched one at a time), a missing path, a path that is a special file or a binary file, a path outside
``root``, one behind a folder this process may not search (``PermissionError``), or an abort
(checked between files and every few thousand lines).
"""

from __future__ import annotations

import base64
import codecs
import io
import json
import os
import re
import shutil
import subprocess
import tempfile
from typing import IO, Any, Callable, Dict, Iterator, Mapping, Optional, Tuple

from ..tools import AgentTool, AgentToolResult
from ..types import TextContent
from ._args import positive_int
from ._listing import listing_result, take_at_most
from ._paths import NotARegularFileError, PathResolver, open_regular_file, require_reachable, special_file_kind
from ._walk import VCS_DIRS, compile_glob, normalize_glob, walk
from .read import _BOM, _UTF16_BOMS

__all__ = ["create_grep_tool"]

DEFAULT_GREP_LIMIT = 100
MAX_LINE_CHARS = 500
_ABORT_EVERY = 4096  # lines searched between abort checks
_EVENT_CAP = 1024 * 1024  # bytes of one line of rg's JSON held at a time (a match holds its whole line)
_PIECE_BYTES = 1024 * 1024  # bytes of one line the Python search holds at a time
_OVERLAP = 64 * 1024  # characters of a long line's previous piece searched again with the next
_SNIFF = 8192  # bytes looked at for a NUL byte: a file with one early on is binary and skipped

Match = Tuple[str, int, str]  # absolute path, 1-based line number, line text


def _is_binary(head: bytes) -> bool:
    """A NUL byte in a file's first bytes, unless a UTF-16 byte-order mark starts them: ripgrep
    reads such a file as UTF-16 text, and so does the Python search."""
    return b"\x00" in head and not head.startswith(_UTF16_BOMS)


def _sniff(path: str, shown: str) -> bytes:
    with open_regular_file(path, shown) as f:
        return f.read(_SNIFF)


def _pieces(f: IO[bytes], head: bytes) -> Iterator[Tuple[str, bool]]:
    """The text of the file ``f`` (which starts with ``head``) as ``(piece, ends_line)``, a line
    at a time and a line over :data:`_PIECE_BYTES` in pieces of that size (a minified bundle or a
    log without line breaks must not be held whole), decoded as ripgrep decodes it: UTF-16 after
    its byte-order mark, else UTF-8 without one; bad bytes replaced. ``f`` stays the caller's to
    close: a UTF-16 file's text wrapper is detached from it at the end (left to the garbage
    collector, it closed ``f`` itself and warned ``ResourceWarning``, an error under ``-W error``)."""
    if head.startswith(_UTF16_BOMS):
        text = io.TextIOWrapper(f, encoding="utf-16", errors="replace", newline="\n")
        try:
            piece = text.readline(_PIECE_BYTES // 2)
            ended = True
            while piece:
                ended = piece.endswith("\n") or len(piece) < _PIECE_BYTES // 2  # shorter: the end of the file
                yield piece, ended
                piece = text.readline(_PIECE_BYTES // 2)
            if not ended:  # a last line of exactly a piece's size, without a line break
                yield "", True
        finally:
            if not f.closed:  # closed already: the wrapper has nothing left to warn about
                text.detach()
        return
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    raw = f.readline(_PIECE_BYTES)
    if raw.startswith(_BOM):  # rg drops it too: "^import" must match line 1
        raw = raw[len(_BOM) :]
    ended = True
    while raw:
        ended = raw.endswith(b"\n") or len(raw) < _PIECE_BYTES  # shorter: the end of the file
        yield decoder.decode(raw, final=ended), ended
        raw = f.readline(_PIECE_BYTES)
    if not ended:  # a last line of exactly a piece's size, without a line break
        yield decoder.decode(b"", final=True), True


def _matching_lines(f: IO[bytes], head: bytes, regex: re.Pattern[str], signal: Any) -> Iterator[Tuple[int, str]]:
    """``(line number, text)`` of the lines of ``f`` that ``regex`` matches, line ends dropped; the
    text of a line over :data:`_PIECE_BYTES` is only its beginning (the output shows no more).
    Such a line is searched a piece at a time, each with the :data:`_OVERLAP` characters before
    it. A match that reaches a piece's edge is judged with the next piece when it starts in that
    overlap (a ``$`` must not match at an edge that is not the line's end); one starting earlier
    (``import.*`` on a huge line) counts at once. So only a match longer than the overlap, or a
    look-around reaching across a piece's edge, may be misjudged."""
    number = 0
    shown: Optional[str] = None  # the beginning of a line that came in pieces
    carry = ""  # its last _OVERLAP characters searched so far
    matched = False
    for piece, ends in _pieces(f, head):
        if shown is None and ends:  # a whole line, the common case
            number += 1
            if signal is not None and number % _ABORT_EVERY == 0:  # one huge file must not outlast an abort
                signal.raise_if_aborted()
            line = piece.rstrip("\r\n")
            if regex.search(line):
                yield number, line
            continue
        if signal is not None:
            signal.raise_if_aborted()
        if shown is None:
            shown = piece[: MAX_LINE_CHARS + 1]
        text = carry + (piece.rstrip("\r\n") if ends else piece)
        if not matched:  # "^" matches at pos 0 only: at the line's real start
            edge = len(text) - _OVERLAP  # a match starting after this is searched again with the next piece
            matched = any(
                ends or m.end() < len(text) or m.start() < edge for m in regex.finditer(text, 1 if carry else 0)
            )
        carry = text[-_OVERLAP:]
        if ends:
            number += 1
            if matched:
                yield number, shown
            shown, carry, matched = None, "", False


def _glob_filter(glob: str) -> Callable[[str], bool]:
    """Whether a file (relative path) passes ``glob``; ``!`` in front excludes what the rest
    matches, and everything inside a folder it matches (``!node_modules``), as ripgrep's ``-g``."""
    if not glob.startswith("!"):
        return compile_glob(glob)
    reject = compile_glob(glob[1:])

    def accept(rel: str) -> bool:
        parts = rel.split("/")
        return not any(reject("/".join(parts[: i + 1])) for i in range(len(parts)))

    return accept


def _python_search(target: str, regex: re.Pattern[str], glob: Optional[str], signal: Any) -> Iterator[Match]:
    if os.path.isfile(target):
        files: Iterator[str] = iter([target])
    else:
        accept = _glob_filter(glob) if glob else None
        files = (
            path
            for rel, path, is_dir in walk(target, signal)
            if not is_dir and not os.path.islink(path) and (accept is None or accept(rel))
        )
    for path in files:
        if signal is not None:
            signal.raise_if_aborted()
        try:
            with open_regular_file(path, path) as f:
                head = f.read(_SNIFF)
                if _is_binary(head):
                    continue
                f.seek(0)
                for number, line in _matching_lines(f, head, regex, signal):
                    yield path, number, line
        except (OSError, NotARegularFileError):  # named pipes, devices and sockets are skipped, as rg does
            continue


def _rg_search(
    rg: str, target: str, pattern: str, glob: Optional[str], ignore_case: bool, literal: bool, signal: Any
) -> Iterator[Match]:
    is_file = os.path.isfile(target)
    # --crlf: "$" matches before "\r\n" as it does in the Python search, which drops line ends
    argv = [rg, "--json", "--sort", "path", "--hidden", "--no-ignore", "--no-config", "--crlf"]
    argv += [arg for name in sorted(VCS_DIRS) for arg in ("-g", f"!{name}")]
    if ignore_case:
        argv.append("-i")
    if literal:
        argv.append("-F")
    if glob and not is_file:
        argv += ["-g", glob]
    argv += ["-e", pattern, "--", target if is_file else "."]
    # stderr goes to a temp file, not a pipe: rg reports every unreadable file there, and a full
    # pipe nobody reads while stdout is consumed would block it (and this tool) forever
    errors = tempfile.TemporaryFile()
    try:
        proc = subprocess.Popen(
            argv, cwd=None if is_file else target, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors
        )
    except BaseException:
        errors.close()
        raise
    kill = lambda _reason=None: proc.kill()  # noqa: E731 - unblocks the read on abort
    if signal is not None:
        signal.add_listener(kill)
    searched = False  # rg's closing summary came: the search ran
    path = ""  # of the file whose matches come now, from rg's "begin" event
    try:
        assert proc.stdout is not None
        while True:
            raw = proc.stdout.readline(_EVENT_CAP)
            if not raw:
                break
            if not raw.endswith(b"\n") and len(raw) == _EVENT_CAP:  # a match in a huge line
                number, text = _long_match(raw, proc.stdout)
                yield _rg_full(target, path, is_file), number, text
                continue
            event = json.loads(raw)
            searched = searched or event.get("type") == "summary"
            if event.get("type") == "begin":
                path = _rg_text(event["data"]["path"])
            if event.get("type") != "match":
                continue
            data = event["data"]
            path = _rg_text(data["path"])
            yield _rg_full(target, path, is_file), int(data["line_number"]), _rg_text(data["lines"]).rstrip("\r\n")
        if signal is not None:
            signal.raise_if_aborted()
        proc.wait()
        # 2 also follows the summary when some files could not be read: they are skipped, as the
        # Python search skips them. Without a summary rg searched nothing: a bad regex or glob.
        if proc.returncode == 2 and not searched:
            errors.seek(0)
            err = errors.read(4096).decode("utf-8", "replace").strip()
            hint = "fix the glob" if glob and "glob" in err else "check the regex or pass literal=true"
            raise ValueError(f"grep failed: {err or 'ripgrep exited with code 2'}; {hint}")
    finally:
        if signal is not None:
            signal.remove_listener(kill)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        errors.close()


def _rg_full(target: str, path: str, is_file: bool) -> str:
    return path if is_file else os.path.normpath(os.path.join(target, path))


def _long_match(head: bytes, stream: IO[bytes]) -> Tuple[int, str]:
    """``(line number, beginning of the line)`` of a match event that is longer than
    :data:`_EVENT_CAP` (ripgrep's JSON holds the whole matching line, however long), read from
    ``head`` (the event's first bytes) and ``stream`` (the rest, read up to the event's end and
    dropped). A quote inside a JSON string is always escaped, so the first ``,"line_number":``
    is the field, after the line's text; ``path`` came first, in the file's ``begin`` event."""
    at = head.find(b'"lines":{') + len(b'"lines":{')
    kind = b"bytes" if head.startswith(b'"bytes":"', at) else b"text"
    start = at + len(kind) + 4  # past "text":" (or "bytes":")
    text = _json_string_start(head[start : start + 8 * MAX_LINE_CHARS], kind == b"bytes")
    number = None
    window = head
    while True:
        found = window.find(b',"line_number":')
        if number is None and found >= 0:
            digits = window[found + 15 : found + 40]
            end = len(digits) - len(digits.lstrip(b"0123456789"))
            if end < len(digits):  # the whole number is in view
                number = int(digits[:end])
        if window.endswith(b"\n") or not window:
            break
        piece = stream.readline(_EVENT_CAP)
        window = window[-40:] + piece if number is None else piece
        if not piece:
            break
    if number is None:  # never seen: rg's JSON format changed
        raise ValueError("grep failed: ripgrep's JSON output for a long line had no line_number")
    return number, text


def _json_string_start(fragment: bytes, base64_bytes: bool) -> str:
    """The text at the start of a JSON string whose first bytes (at least 4 KB, a fragment from
    inside the string) are ``fragment``: an escape or a UTF-8 sequence cut at its end is dropped."""
    if base64_bytes:
        return base64.b64decode(fragment[: len(fragment) // 4 * 4]).decode("utf-8", "replace")
    for cut in range(len(fragment), max(len(fragment) - 12, 0), -1):
        try:
            return json.loads(b'"' + fragment[:cut] + b'"')
        except ValueError:  # an escape cut short ("\u00"), a multibyte character cut...
            continue
    return fragment.decode("utf-8", "replace")


def _rg_text(value: Mapping[str, Any]) -> str:
    if "text" in value:
        return value["text"]
    return base64.b64decode(value.get("bytes", "")).decode("utf-8", "replace")


def _clip(line: str) -> str:
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + "... [line truncated]"


def create_grep_tool(
    cwd: Optional[str] = None,
    *,
    root: Optional[str] = None,
    limit: int = DEFAULT_GREP_LIMIT,
    use_rg: Optional[bool] = None,
) -> AgentTool:
    """A ``grep`` tool resolving paths against ``cwd`` and, when given, confined to ``root``.

    ``use_rg``: None uses ``rg`` when found on PATH, False never, True requires it.
    """
    paths = PathResolver(cwd, root)

    def execute(
        tool_call_id: str,
        args: Mapping[str, Any],
        signal: Any = None,
        on_update: Optional[Callable[[AgentToolResult], None]] = None,
    ) -> AgentToolResult:
        pattern = args.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise ValueError("pattern is empty: pass a regular expression (or literal=true for plain text)")
        if "\n" in pattern:  # Python found "No matches", rg failed advising a --multiline flag we lack
            raise ValueError(
                "pattern contains a line break, but grep matches one line at a time; search for a single "
                "line of the text (read the file to see the lines around it)"
            )
        shown = args.get("path") or "."
        target = paths.resolve(shown)
        most = positive_int(args, "limit") or limit
        glob = args.get("glob")
        if glob is not None and not isinstance(glob, str):
            raise ValueError(f"glob must be a string such as '*.py', got {glob!r}")
        glob = normalize_glob(glob) if glob else None  # ripgrep took "./src/*.py" to match nothing
        ignore_case = bool(args.get("ignoreCase") or args.get("ignore_case"))
        literal = bool(args.get("literal"))
        require_reachable(target, shown)
        if not os.path.exists(target):
            raise FileNotFoundError(f"Path not found: {shown}")
        kind = special_file_kind(target)
        if kind is not None:
            raise NotARegularFileError(f"{shown} is {kind}, not a regular file or a folder; grep searches files")
        if os.path.isfile(target) and _is_binary(_sniff(target, shown)):  # "No matches" would be false
            raise ValueError(
                f"Cannot search {shown}: it is a binary file (a NUL byte in its first {_SNIFF // 1024} KB) and grep "
                "skips binary files. Search it with bash instead (grep -a, strings)."
            )
        rg = _find_rg()
        if rg is not None:
            matches = _rg_search(rg, target, pattern, glob, ignore_case, literal, signal)
        else:
            try:
                regex = re.compile(re.escape(pattern) if literal else pattern, re.IGNORECASE if ignore_case else 0)
            except re.error as exc:
                raise ValueError(f"Invalid regex {pattern!r}: {exc}; fix it or pass literal=true") from None
            matches = _python_search(target, regex, glob, signal)
        return _format(matches, most, pattern, paths, backend="rg" if rg else "python")

    def _find_rg() -> Optional[str]:
        if use_rg is False:
            return None
        found = shutil.which("rg")
        if found is None and use_rg:
            raise FileNotFoundError("ripgrep (rg) is not on PATH; install it or create the tool with use_rg=None")
        return found

    return AgentTool(
        name="grep",
        label="grep",
        description=(
            "Search file contents for a regular expression. Returns path:line:text lines, paths relative "
            "to the working directory. Options: glob to filter files (e.g. '*.py'), ignoreCase, literal "
            f"(plain-text pattern), limit (default {limit} matches). Skips .git, binary files and symlinks."
        ),
        parameters={
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Regular expression (or text with literal=true)"},
                "path": {"type": "string", "description": "File or folder to search (default: the working directory)"},
                "glob": {"type": "string", "description": "Only search files matching this glob, e.g. '*.py'"},
                "ignoreCase": {"type": "boolean", "description": "Case-insensitive search"},
                "literal": {"type": "boolean", "description": "Treat pattern as plain text"},
                "limit": {"type": "integer", "minimum": 1, "description": f"Maximum matches (default {limit})"},
            },
            "required": ["pattern"],
        },
        execute=execute,
    )


def _format(matches: Iterator[Match], most: int, pattern: str, paths: PathResolver, backend: str) -> AgentToolResult:
    try:
        lines, more = take_at_most(
            (f"{paths.display(path)}:{number}:{_clip(text)}" for path, number, text in matches), most
        )
    finally:
        close = getattr(matches, "close", None)
        if close is not None:
            close()  # stops ripgrep when we stopped early
    details: Dict[str, Any] = {"count": len(lines), "backend": backend}
    if not lines:
        return AgentToolResult(content=[TextContent(f"No matches found for {pattern}")], details=details)
    return listing_result(lines, details, most, more, "matches")

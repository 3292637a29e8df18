"""The ``read`` tool: a text file with line numbers, or an image as an attachment.

* Text comes back ``cat -n`` style (line number right-aligned in 6 columns, a tab, the line),
  starting at ``offset`` (1-based line number) for at most ``limit`` lines, and never more than
  ``max_lines`` lines / ``max_bytes`` bytes; when it stops early, a final notice says which lines
  were shown and which ``offset`` continues. ``details["truncation"]`` describes a cut.
* A file starting with a UTF-16 byte-order mark is read as UTF-16 text (up to 16 MB).
* PNG, JPEG, GIF and WebP files (recognised by their first bytes, not their name) come back as a
  short text note plus an :class:`~agentcore.types.ImageContent` with base64 data.
* However long a line is, at most 64 KB of it (``max_bytes`` + 2 when that is more) is held in
  memory; a line over ``max_bytes`` is never shown, the notice says how to see it. Aborts are
  checked every few thousand lines.
* Failures raise: a missing file, a folder, a named pipe, device or socket (which could block
  forever), a file behind a folder this process may not search (``PermissionError``), an offset
  past the end, a path outside ``root``, an image larger than ``max_image_bytes``, a UTF-16 file
  over 16 MB, and binary files (a NUL byte or mostly control characters in the first 8 KB, no
  UTF-16 byte-order mark), which are refused with a hint to use bash instead.
"""

from __future__ import annotations

import base64
import codecs
import io
import os
import shlex
from typing import IO, Any, Callable, Dict, List, Mapping, Optional, Tuple

from ..tools import AgentTool, AgentToolResult
from ..types import ImageContent, TextContent
from ._args import positive_int
from ._paths import PathResolver, open_regular_file, require_file
from ._truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, format_size, truncate_head

__all__ = ["create_read_tool", "detect_image_mime_type", "is_binary"]

_SNIFF = 8192
_LINE_CAP = 64 * 1024  # bytes of one line held in memory (at least max_bytes + 2)
_ABORT_EVERY = 4096  # lines between abort checks
_CHUNK = 1024 * 1024  # bytes read at a time to count the lines outside the range
_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)  # (grep reads files as read does)
_UTF16_MAX = 16 * 1024 * 1024  # bytes of a UTF-16 file converted in memory


def detect_image_mime_type(head: bytes) -> Optional[str]:
    """``image/png``, ``image/jpeg``, ``image/gif`` or ``image/webp`` from a file's first bytes."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(head) >= 12 and head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def is_binary(head: bytes) -> bool:
    """True for a NUL byte, or when over 30% of the sample is control bytes other than whitespace."""
    if b"\x00" in head:
        return True
    if not head:
        return False
    control = sum(1 for b in head if b < 32 and b not in (9, 10, 12, 13, 27))
    return control / len(head) > 0.3


def _only_bom(f: IO[bytes]) -> bool:
    """True when the file holds nothing but a UTF-8 byte-order mark (it then has no lines)."""
    head = f.read(len(_BOM) + 1)
    f.seek(0)
    return head == _BOM


def _pass_lines(f: IO[bytes], most: Optional[int], signal: Any) -> int:
    """Read past up to ``most`` lines (all when None) a chunk at a time, stopping just after the
    last one; return how many were passed (a last line without a newline counts)."""
    passed = 0
    partial = False  # bytes after the last newline seen
    while most is None or passed < most:
        if signal is not None:
            signal.raise_if_aborted()
        at = f.tell()
        chunk = f.read(_CHUNK)
        if not chunk:
            return passed + partial
        newlines = chunk.count(b"\n")
        if most is not None and passed + newlines >= most:
            end = -1
            for _ in range(most - passed):
                end = chunk.index(b"\n", end + 1)
            f.seek(at + end + 1)
            return most
        passed += newlines
        partial = not chunk.endswith(b"\n")
    return passed


def _decode_line(f: IO[bytes], raw: bytes, cap: int, first: bool, signal: Any) -> Tuple[str, int]:
    """A line read with ``f.readline(cap)`` as ``(text, size)``: decoded (invalid UTF-8 replaced),
    without the line break, trailing carriage returns or (``first`` line) the byte-order mark, and
    the UTF-8 size of all of that. A line longer than ``cap`` is read to its end a piece at a time:
    ``text`` is then only its beginning (over ``max_bytes``, it is never shown) but ``size`` is whole.
    """
    if raw.endswith(b"\n") or len(raw) < cap:  # shorter than cap without "\n": the end of the file
        text = raw.decode("utf-8", "replace")
        if first and text.startswith("\ufeff"):
            text = text[1:]
        text = text[:-1] if text.endswith("\n") else text
        text = text.rstrip("\r")
        return text, len(text.encode("utf-8"))
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    head = decoder.decode(raw)
    rest, end = _read_past(f, cap, signal, decoder, head)
    size = len(head.encode("utf-8")) + rest
    if first and head.startswith("\ufeff"):
        size -= 3
    if end.endswith("\n"):
        end = end[:-1]
        size -= 1
    size -= len(end) - len(end.rstrip("\r"))
    return head, size


def _read_past(f: IO[bytes], cap: int, signal: Any, decoder: Any, tail: str) -> Tuple[int, str]:
    """Read to the end of the current line ``cap`` bytes at a time; return the UTF-8 size of what
    was read once decoded, and the line's last ``cap`` characters (``tail`` being what came
    before), which hold the line break."""
    size = 0
    while True:
        if signal is not None:
            signal.raise_if_aborted()
        chunk = f.readline(cap)
        last = len(chunk) < cap or chunk.endswith(b"\n")
        piece = decoder.decode(chunk, final=last)
        size += len(piece.encode("utf-8"))
        tail = (tail + piece)[-cap:]
        if last:
            return size, tail


def _utf16_as_utf8(f: IO[bytes], shown: str) -> IO[bytes]:
    """The UTF-16 text file ``f`` (from its byte-order mark on) as UTF-8 bytes in memory, invalid
    code units replaced; raises ``ValueError`` for one over :data:`_UTF16_MAX` bytes."""
    size = os.fstat(f.fileno()).st_size
    if size > _UTF16_MAX:
        raise ValueError(
            f"Cannot read {shown}: it is UTF-16 text of {format_size(size)}, more than the "
            f"{format_size(_UTF16_MAX)} read converts; convert it with bash first "
            f"(iconv -f UTF-16 -t UTF-8 {shlex.quote(shown)} > converted.txt)"
        )
    f.seek(0)
    return io.BytesIO(f.read().decode("utf-16", "replace").encode("utf-8"))


def create_read_tool(
    cwd: Optional[str] = None,
    *,
    root: Optional[str] = None,
    max_lines: int = DEFAULT_MAX_LINES,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_image_bytes: int = 20 * 1024 * 1024,
) -> AgentTool:
    """A ``read`` tool resolving paths against ``cwd`` and, when given, confined to ``root``."""
    paths = PathResolver(cwd, root)

    def execute(
        tool_call_id: str,
        args: Mapping[str, Any],
        signal: Any = None,
        on_update: Optional[Callable[[AgentToolResult], None]] = None,
    ) -> AgentToolResult:
        shown: Any = args.get("path")  # the schema requires it; resolve() names a bad value
        target = paths.resolve(shown)
        offset = positive_int(args, "offset")
        limit = positive_int(args, "limit")
        if signal is not None:
            signal.raise_if_aborted()
        require_file(target, shown, ", not a file; use ls to list it")
        with open_regular_file(target, shown) as f:
            head = f.read(_SNIFF)
            mime = detect_image_mime_type(head)
            if mime is not None:
                return _image(f, head, mime, shown)
            if head.startswith(_UTF16_BOMS):  # NUL bytes, but text: read it as UTF-8
                return _text(_utf16_as_utf8(f, shown), shown, offset, limit, signal)
            if is_binary(head):
                size = os.fstat(f.fileno()).st_size
                raise ValueError(
                    f"Cannot read {shown}: it is a binary file ({format_size(size)}), not text or a "
                    f"supported image (png, jpg, gif, webp). Inspect it with bash instead (file, xxd, strings)."
                )
            f.seek(0)
            return _text(f, shown, offset, limit, signal)

    def _image(f: Any, head: bytes, mime: str, shown: str) -> AgentToolResult:
        size = os.fstat(f.fileno()).st_size
        if size > max_image_bytes:
            raise ValueError(
                f"Image {shown} is {format_size(size)}, larger than the "
                f"{format_size(max_image_bytes)} limit; shrink it first (e.g. with bash)"
            )
        data = head + f.read()
        note = f"Read image file [{mime}]"
        return AgentToolResult(
            content=[TextContent(note), ImageContent(base64.b64encode(data).decode("ascii"), mime)],
            details={"mimeType": mime, "bytes": len(data)},
        )

    def _text(f: Any, shown: str, offset: Optional[int], limit: Optional[int], signal: Any) -> AgentToolResult:
        # One pass over the lines in bounded memory: only the lines that can be shown are kept
        # (a multi-GB log read with offset/limit must not be loaded whole); the rest are counted.
        start = (offset or 1) - 1
        stop = None if limit is None else start + limit
        kept: List[str] = []
        used = 0  # bytes of the numbered text so far, counted as truncate_head counts them
        full = False
        first_size = 0
        # A line longer than the cap cannot be shown whole anyway: only its first cap bytes are kept.
        cap = max(max_bytes + 2, _LINE_CAP)
        empty = _only_bom(f)
        readline = f.readline
        index = 0 if empty else _pass_lines(f, start, signal)  # lines before the range: only counted
        while not empty and (stop is None or index < stop):  # at the end already if index < start
            if signal is not None and index % _ABORT_EVERY == 0:
                signal.raise_if_aborted()
            raw = readline(cap)
            if not raw:
                break
            if index and raw[-1:] == b"\n":  # the common case, inline: a whole line, not the first
                line = raw[:-1].decode("utf-8", "replace").rstrip("\r")
                size = len(line.encode("utf-8"))
            else:
                line, size = _decode_line(f, raw, cap, index == 0, signal)
            if index == start:
                first_size = size
            number = index + 1
            used += (7 if number < 1_000_000 else len(str(number)) + 1) + size + (index > start)  # "{:>6}\t"
            index = number
            if not full:
                kept.append(f"{number:>6}\t{line}")
                full = len(kept) > max_lines or used > max_bytes
        total = index + (_pass_lines(f, None, signal) if stop is not None and index == stop else 0)
        if total == 0:
            if offset is not None and offset > 1:
                raise ValueError(f"Offset {offset} is beyond end of file ({shown} is empty)")
            return AgentToolResult(content=[TextContent(f"[{shown} is empty]")], details={"totalLines": 0})
        if start >= total:
            raise ValueError(f"Offset {offset} is beyond end of file ({total} lines total)")
        end = total if stop is None else min(total, stop)
        numbered = "\n".join(kept)
        cut = truncate_head(numbered, max_lines, max_bytes)
        cut.total_lines, cut.total_bytes = end - start, used  # of the whole range, not just what was kept
        details: Dict[str, Any] = {"totalLines": total}
        first = start + 1
        if cut.first_line_exceeds_limit:
            out = (
                f"[Line {first} is {format_size(first_size)}, over the {format_size(max_bytes)} limit. "
                f"Use bash: sed -n '{first}p' {shlex.quote(shown)} | head -c {max_bytes}]"
            )
            details["truncation"] = cut.to_dict()
        elif cut.truncated:
            last = first + cut.output_lines - 1
            limit_note = "" if cut.truncated_by == "lines" else f" ({format_size(max_bytes)} limit)"
            out = (
                f"{cut.content}\n\n[Showing lines {first}-{last} of {total}{limit_note}. "
                f"Use offset={last + 1} to continue.]"
            )
            details["truncation"] = cut.to_dict()
        elif end < total:
            out = f"{cut.content}\n\n[{total - end} more lines in file. Use offset={end + 1} to continue.]"
        else:
            out = cut.content
        return AgentToolResult(content=[TextContent(out)], details=details)

    return AgentTool(
        name="read",
        label="read",
        description=(
            "Read a file. Text files come back with line numbers; images (png, jpg, gif, webp) are "
            f"attached. Output is limited to {max_lines} lines or {max_bytes // 1024}KB, whichever comes first; "
            "use offset/limit for large files and continue with offset until complete."
        ),
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Path to the file (relative to the working directory)"},
                "offset": {"type": "integer", "minimum": 1, "description": "Line number to start from (1-based)"},
                "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of lines to read"},
            },
            "required": ["path"],
        },
        execute=execute,
    )

"""Cutting tool output to what a model can take: at most N lines and N bytes (UTF-8).

``truncate_head`` keeps the beginning (file contents); ``truncate_tail`` keeps the end (command
output, where the error usually is). Both cut at line boundaries, except when a single line is
larger than the byte budget: the tail keeps the end of that line (``last_line_partial``), the head
keeps nothing (``first_line_exceeds_limit``) so the caller can say how to read it.
``truncate_items`` keeps the first whole items of a list (search results, folder entries), which
may hold a line break of their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Tuple

__all__ = [
    "DEFAULT_MAX_LINES",
    "DEFAULT_MAX_BYTES",
    "Truncation",
    "truncate_head",
    "truncate_items",
    "truncate_tail",
    "format_size",
    "count_lines",
]

DEFAULT_MAX_LINES = 2000
DEFAULT_MAX_BYTES = 50 * 1024


@dataclass
class Truncation:
    """The kept text and what was cut. ``truncated_by`` is ``"lines"``, ``"bytes"`` or None."""

    content: str
    truncated: bool
    truncated_by: Optional[str]
    total_lines: int
    total_bytes: int
    output_lines: int
    output_bytes: int
    max_lines: int
    max_bytes: int
    last_line_partial: bool = False
    first_line_exceeds_limit: bool = False

    def to_dict(self) -> Dict[str, Any]:
        """The reference JSON shape (camelCase) without the content, as stored in ``details``."""
        return {
            "truncated": self.truncated,
            "truncatedBy": self.truncated_by,
            "totalLines": self.total_lines,
            "totalBytes": self.total_bytes,
            "outputLines": self.output_lines,
            "outputBytes": self.output_bytes,
            "lastLinePartial": self.last_line_partial,
            "firstLineExceedsLimit": self.first_line_exceeds_limit,
            "maxLines": self.max_lines,
            "maxBytes": self.max_bytes,
        }


def format_size(n: int) -> str:
    """``512B``, ``1.5KB``, ``2.0MB``."""
    if n < 1024:
        return f"{n}B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f}KB"
    return f"{n / (1024 * 1024):.1f}MB"


def _split(text: str) -> List[str]:
    """Lines without their ``\\n``; a final newline does not start another line."""
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def count_lines(text: str) -> int:
    """Lines as a person counts them: ``"a\\nb\\n"`` and ``"a\\nb"`` both have 2."""
    return len(_split(text))


def _nbytes(s: str) -> int:
    return len(s.encode("utf-8", "surrogatepass"))


def _take(lines: Iterable[str], max_lines: int, max_bytes: int) -> Tuple[List[str], Optional[str]]:
    """Whole lines in the given order while both limits hold, and the limit that stopped it (or None)."""
    kept: List[str] = []
    used = 0
    for i, line in enumerate(lines):
        if i >= max_lines:
            return kept, "lines"
        size = _nbytes(line) + (1 if i else 0)
        if used + size > max_bytes:
            return kept, "bytes"
        kept.append(line)
        used += size
    return kept, None


def _whole(text: str, lines: List[str], max_lines: int, max_bytes: int) -> Truncation:
    total_bytes = _nbytes(text)
    return Truncation(text, False, None, len(lines), total_bytes, len(lines), total_bytes, max_lines, max_bytes)


def truncate_head(text: str, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES) -> Truncation:
    """Keep whole lines from the start while both limits hold."""
    lines = _split(text)
    kept, by = _take(lines, max_lines, max_bytes)
    if by is None:
        return _whole(text, lines, max_lines, max_bytes)
    content = "\n".join(kept)
    return Truncation(
        content,
        True,
        by,
        len(lines),
        _nbytes(text),
        len(kept),
        _nbytes(content),
        max_lines,
        max_bytes,
        first_line_exceeds_limit=not kept,
    )


def truncate_items(items: List[str], max_bytes: int = DEFAULT_MAX_BYTES) -> Truncation:
    """``items`` joined by ``\n``, keeping whole items from the start within ``max_bytes``.

    Counts (``total_lines``, ``output_lines``) are of items, and no line limit applies: an item
    may hold a ``\n`` itself (a file name can), which :func:`truncate_head` would count as two
    lines, dropping the last item under a limit of ``len(items)`` lines.
    """
    kept, by = _take(items, len(items), max_bytes)
    text = "\n".join(items)
    total = _nbytes(text)
    if by is None:
        return Truncation(text, False, None, len(items), total, len(items), total, len(items), max_bytes)
    content = "\n".join(kept)
    return Truncation(
        content,
        True,
        by,
        len(items),
        total,
        len(kept),
        _nbytes(content),
        len(items),
        max_bytes,
        first_line_exceeds_limit=not kept,
    )


def truncate_tail(text: str, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES) -> Truncation:
    """Keep whole lines from the end while both limits hold (a lone huge last line is cut)."""
    lines = _split(text)
    kept, by = _take(reversed(lines), max_lines, max_bytes)
    if by is None:
        return _whole(text, lines, max_lines, max_bytes)
    partial = False
    if not kept and lines:
        tail = lines[-1].encode("utf-8", "surrogatepass")[-max_bytes:]
        kept = [tail.decode("utf-8", "ignore")]
        partial = True
    content = "\n".join(reversed(kept))
    return Truncation(
        content,
        True,
        by,
        len(lines),
        _nbytes(text),
        len(kept),
        _nbytes(content),
        max_lines,
        max_bytes,
        last_line_partial=partial,
    )

"""Incremental Server-Sent Events parser over an iterable of byte (or str) chunks.

``iter_sse(chunks)`` yields one :class:`SSEEvent` per dispatched event, as soon as its blank line
arrives. It follows the WHATWG event-stream rules with the provider-friendly choices of
``spec/providers.md`` §5:

* bytes are decoded incrementally as UTF-8 (a character may straddle chunks); invalid bytes become
  U+FFFD, the parser never raises on bad input;
* lines end with ``\\r\\n``, ``\\n`` or ``\\r`` (a ``\\r`` at the end of a chunk waits for the next
  chunk to know whether a ``\\n`` follows);
* lines starting with ``:`` are comments/keep-alives and ignored; ``field:value`` strips one
  leading space of the value; several ``data:`` lines join with ``\\n``;
* an event without data lines is not dispatched (only ``event:``/``id:`` lines, or keep-alives);
* an event still pending at end of input is flushed (servers often omit the final blank line).
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import Iterable, Iterator, List, Optional, Union

__all__ = ["SSEEvent", "iter_sse"]


@dataclass
class SSEEvent:
    """One dispatched event: ``event`` name (default ``"message"``), joined ``data`` and last ``id``."""

    event: str = "message"
    data: str = ""
    id: Optional[str] = None


def _split_lines(buffer: str) -> "tuple[List[str], str]":
    """Complete lines of ``buffer`` and the unfinished rest (a trailing ``\\r`` stays in the rest)."""
    if "\r" in buffer:
        hold = ""
        if buffer.endswith("\r"):  # maybe the first half of \r\n: decide with the next chunk
            buffer, hold = buffer[:-1], "\r"
        buffer = buffer.replace("\r\n", "\n").replace("\r", "\n")
        lines = buffer.split("\n")
        rest = lines.pop()
        if hold:
            # the held \r ends the current line; keep it so the next chunk can pair it with \n
            return lines, rest + hold
        return lines, rest
    lines = buffer.split("\n")
    rest = lines.pop()
    return lines, rest


_EOF = object()


def _with_eof(chunks: Iterable[Union[bytes, bytearray, str]]) -> Iterator[object]:
    yield from chunks
    yield _EOF


def iter_sse(chunks: Iterable[Union[bytes, bytearray, str]]) -> Iterator[SSEEvent]:
    """Parse an event stream incrementally; see the module docstring for the exact rules."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    rest = ""
    event_name = ""
    data: List[str] = []
    last_id: Optional[str] = None
    first = True

    for chunk in _with_eof(chunks):
        if chunk is _EOF:
            # terminate a pending line, then a blank line flushes a pending event
            text = decoder.decode(b"", final=True) + "\n\n"
        elif isinstance(chunk, str):
            text = chunk
        else:
            text = decoder.decode(chunk)  # type: ignore[arg-type]
        if not text:
            continue
        if first:
            first = False
            if text.startswith("\ufeff"):  # a UTF-8 BOM at stream start is not part of a field
                text = text[1:]
        if rest:
            if rest[-1] == "\r":  # a held \r ended a line; a \n right after it belongs to it
                if text[0] == "\n":
                    text = text[1:]
                text = rest[:-1] + "\n" + text
            else:
                text = rest + text
        lines, rest = _split_lines(text)
        for line in lines:
            if not line:
                if data:
                    yield SSEEvent(event_name or "message", "\n".join(data), last_id)
                    data = []
                event_name = ""
                continue
            if line.startswith("data:"):
                value = line[5:]
                data.append(value[1:] if value.startswith(" ") else value)
                continue
            if line[0] == ":":
                continue
            field, sep, value = line.partition(":")
            if sep and value.startswith(" "):
                value = value[1:]
            if field == "event":
                event_name = value
            elif field == "data":  # "data" without a colon: an empty data line
                data.append(value)
            elif field == "id":
                if "\x00" not in value:
                    last_id = value
            # "retry" and unknown fields are ignored

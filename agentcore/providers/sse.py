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
from typing import Iterable, Iterator, List, NamedTuple, Optional, Union

__all__ = ["SSEEvent", "iter_sse"]


class SSEEvent(NamedTuple):
    """One dispatched event: ``event`` name (default ``"message"``), joined ``data`` and last ``id``."""

    event: str = "message"
    data: str = ""
    id: Optional[str] = None


_new_event = tuple.__new__  # builds an SSEEvent without the Python-level __new__ (hot path)
def _parse_lines(lines: List[str], last_id: Optional[str]) -> "tuple[List[SSEEvent], Optional[str]]":
    """Events of ``lines``: blank lines separate events and the last event ends with the list."""
    events: List[SSEEvent] = []
    event_name = ""
    data: List[str] = []
    for line in lines + [""]:
        if not line:  # dispatch
            if data:
                events.append(_new_event(SSEEvent, (event_name or "message", "\n".join(data), last_id)))
                data = []
            event_name = ""
            continue
        if line[0] == ":":
            continue
        field, sep, value = line.partition(":")
        if sep and value[:1] == " ":
            value = value[1:]
        if field == "data":
            data.append(value)
        elif field == "event":
            event_name = value
        elif field == "id":
            if "\x00" not in value:
                last_id = value
        # "retry" and unknown fields are ignored
    return events, last_id


def iter_sse(chunks: Iterable[Union[bytes, bytearray, str]]) -> Iterator[SSEEvent]:
    """Parse an event stream incrementally; see the module docstring for the exact rules."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    partial = False  # the decoder holds the first bytes of a character split across chunks
    rest = ""
    last_id: Optional[str] = None
    first = True

    for chunk in chunks:
        if partial:
            text = decoder.decode(chunk)
            partial = bool(decoder.getstate()[0])
        elif type(chunk) is bytes:
            try:
                text = chunk.decode("utf-8")  # fast path: the chunk is whole, valid UTF-8
            except UnicodeDecodeError:
                text = decoder.decode(chunk)
                partial = bool(decoder.getstate()[0])
        elif isinstance(chunk, str):
            text = chunk
        else:  # bytearray, memoryview
            text = decoder.decode(bytes(chunk))
            partial = bool(decoder.getstate()[0])
        if not text:
            continue
        if first:
            first = False
            if text[0] == "\ufeff":  # a UTF-8 BOM at stream start is not part of a field
                text = text[1:]
        if rest:
            text = rest + text
        if "\r" in text:
            hold = text[-1] == "\r"  # maybe half of \r\n: keep it until the next chunk shows
            text = text.replace("\r\n", "\n")
            if hold:
                text = text[:-1].replace("\r", "\n") + "\r"
            else:
                text = text.replace("\r", "\n")
        blocks = text.split("\n\n")
        rest = blocks.pop()
        for block in blocks:
            if block.startswith("data: ") and "\n" not in block:  # the common one-line event
                yield _new_event(SSEEvent, ("message", block[6:], last_id))
            else:
                events, last_id = _parse_lines(block.split("\n"), last_id)
                yield from events

    # end of input: finish a pending line and flush a pending event
    text = rest + decoder.decode(b"", final=True)
    if text:
        lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        events, last_id = _parse_lines(lines, last_id)
        yield from events

"""Incremental Server-Sent Events parser over an iterable of byte (or str) chunks.

``iter_sse(chunks)`` yields one :class:`SSEEvent` per dispatched event, as soon as its blank line
arrives. It follows the WHATWG event-stream rules with the provider-friendly choices of
``spec/providers.md`` §5:

* bytes are decoded as UTF-8 (a character may straddle chunks); invalid bytes become U+FFFD, the
  parser never raises on bad input;
* lines end with ``\\r\\n``, ``\\n`` or ``\\r`` (a ``\\r`` ends its line at once; a ``\\n`` that
  follows it, even in the next chunk, belongs to it: an event ending in ``\\r\\r`` is dispatched
  without waiting for more input);
* lines starting with ``:`` are comments/keep-alives and ignored; ``field:value`` strips one
  leading space of the value; several ``data:`` lines join with ``\\n``;
* an event without data lines is not dispatched (only ``event:``/``id:`` lines, or keep-alives);
* an event still pending at end of input is flushed (servers often omit the final blank line) as
  an :class:`UnterminatedSSEEvent`, so a consumer that cannot parse it can say the stream was
  cut inside it rather than that the server sent bad data;
* an event (or a line) longer than :data:`MAX_EVENT_BYTES` raises :class:`SSEEventTooLarge`, the
  one error the parser raises: a server that never ends a line would otherwise grow memory
  without bound. A long line or event costs linear time in its length.

The parser splits on bytes and decodes one event at a time: line ends are ASCII and never part of
a multi-byte UTF-8 sequence, so this equals decoding the whole stream first. ``str`` chunks are
encoded to UTF-8 and parsed the same way (lone surrogates in them become U+FFFD).
"""

from __future__ import annotations

from typing import Iterable, Iterator, List, NamedTuple, Optional, Tuple, Union

__all__ = ["MAX_EVENT_BYTES", "SSEEvent", "SSEEventTooLarge", "UnterminatedSSEEvent", "iter_sse"]

#: The longest event the parser accepts (bytes): far above any provider's (a base64 image in one
#: ``data:`` line is a few MB), far below what would exhaust memory.
MAX_EVENT_BYTES = 64 * 1024 * 1024


class SSEEventTooLarge(ValueError):
    """An event (or a line) exceeded :data:`MAX_EVENT_BYTES` before it ended."""


class SSEEvent(NamedTuple):
    """One dispatched event: ``event`` name (default ``"message"``), joined ``data`` and last ``id``."""

    event: str = "message"
    data: str = ""
    id: Optional[str] = None


class UnterminatedSSEEvent(SSEEvent):
    """An event flushed at the end of input, without the blank line that ends an event: either
    the server left it out, or the stream was cut inside the event."""

    __slots__ = ()


_new_event = tuple.__new__  # builds an SSEEvent without the Python-level __new__ (hot path)
_BOM = b"\xef\xbb\xbf"
_LF, _CR = 10, 13  # `int in bytes` is a plain memchr, several times cheaper than `b"\n" in bytes`


def _decode(data: bytes) -> str:
    try:
        return data.decode()
    except UnicodeDecodeError:
        return data.decode("utf-8", "replace")


def _parse_lines(lines: List[str], last_id: Optional[str]) -> Tuple[List[SSEEvent], Optional[str]]:
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


def _as_bytes(chunk: Union[bytes, bytearray, memoryview, str]) -> bytes:
    if isinstance(chunk, str):
        return chunk.encode("utf-8", "surrogatepass")
    return bytes(chunk)


def iter_sse(chunks: Iterable[Union[bytes, bytearray, str]]) -> Iterator[SSEEvent]:
    """Parse an event stream incrementally; see the module docstring for the exact rules."""
    pending = bytearray()  # the event in progress, line ends as \n (appending is amortised linear)
    after_cr = False  # the last chunk ended with \r: a \n starting the next one belongs to it
    head = b""  # the first bytes while they may still be a UTF-8 BOM split across chunks
    last_id: Optional[str] = None
    at_start = True

    for chunk in chunks:
        if type(chunk) is not bytes:
            chunk = _as_bytes(chunk)
        elif not pending and not head and chunk[:6] == b"data: ":
            # fast path: the chunk is exactly one one-line data event (how most APIs send)
            data = chunk[6:-2]
            if chunk[-1] == _LF == chunk[-2] and _LF not in data and _CR not in data:
                at_start = after_cr = False
                try:
                    text = data.decode()
                except UnicodeDecodeError:
                    text = data.decode("utf-8", "replace")
                yield _new_event(SSEEvent, ("message", text, last_id))
                continue
        if at_start:
            chunk = head + chunk
            if len(chunk) < 3 and _BOM.startswith(chunk):
                head = chunk  # maybe a BOM split across chunks
                continue
            at_start = False
            head = b""
            if chunk[:3] == _BOM:
                chunk = chunk[3:]
        if after_cr and chunk:
            after_cr = False
            if chunk[0] == _LF:
                chunk = chunk[1:]
        if _CR in chunk:
            after_cr = chunk[-1] == _CR
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if not chunk:
            continue
        if pending and chunk[0] == _LF and pending[-1] == _LF:  # a blank line across chunks
            chunk = chunk[1:]
            events, last_id = _parse_lines(_decode(bytes(pending)).split("\n"), last_id)
            yield from events
            pending.clear()
        blocks = chunk.split(b"\n\n")
        rest = blocks.pop()
        if blocks:
            if pending:
                pending += blocks[0]
                blocks[0] = bytes(pending)
                pending.clear()
            for block in blocks:
                if block[:6] == b"data: " and _LF not in block:  # the common one-line event
                    yield _new_event(SSEEvent, ("message", _decode(block[6:]), last_id))
                else:
                    events, last_id = _parse_lines(_decode(block).split("\n"), last_id)
                    yield from events
        if rest:
            pending += rest
            if len(pending) > MAX_EVENT_BYTES:
                raise SSEEventTooLarge(_too_large())

    # end of input: flush a pending event (and a pending line)
    pending += head  # a lone start of a BOM is text
    if pending:
        events, last_id = _parse_lines(_decode(bytes(pending)).split("\n"), last_id)
        for event in events:
            yield _new_event(UnterminatedSSEEvent, event)


def _too_large() -> str:
    return (
        f"a server-sent event exceeded {MAX_EVENT_BYTES // (1024 * 1024)} MB before it ended (a line "
        "without its end, or an event without its blank line): the stream is not an event stream "
        "this client can read"
    )

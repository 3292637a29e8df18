"""The AWS event-stream binary framing (``application/vnd.amazon.eventstream``), decoded incrementally.

Every message on the wire is::

    total length (uint32 BE) | headers length (uint32 BE) | prelude CRC32 (of the 8 bytes before)
    headers (headers-length bytes) | payload | message CRC32 (of every byte before it)

A header is ``name length (uint8) | name (UTF-8) | type (uint8) | value``; the value layout depends
on the type (booleans carry no bytes, integers are big-endian, byte arrays and strings have a
uint16 length, timestamps are int64 milliseconds, UUIDs 16 bytes).

:class:`EventStreamDecoder` takes body bytes in pieces of any size (as they arrive from the
network) and returns the complete :class:`EventStreamMessage` objects they finish. A frame that
cannot be right (lengths out of range, a CRC mismatch, a header that runs past its section, an
unknown header type) raises :class:`EventStreamError` naming what failed and where; the decoder
then refuses further input, since nothing after a corrupt frame can be trusted. The good frames
before it are never lost: when a piece of input completes some frames and then reaches a corrupt
one, :meth:`~EventStreamDecoder.feed` returns the good frames and keeps the error, which the next
:meth:`~EventStreamDecoder.feed`, :meth:`~EventStreamDecoder.check` or
:meth:`~EventStreamDecoder.close` raises (so a reader handles them first, whatever the chunking).
"""

from __future__ import annotations

import struct
import uuid
import zlib
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

__all__ = ["EventStreamDecoder", "EventStreamError", "EventStreamMessage", "encode_message"]

_PRELUDE = struct.Struct(">III")
_PRELUDE_LENGTH = 12
_MIN_MESSAGE = _PRELUDE_LENGTH + 4  # no headers, no payload
MAX_HEADERS_LENGTH = 128 * 1024  # the limits botocore and the AWS SDKs enforce
MAX_PAYLOAD_LENGTH = 24 * 1024 * 1024
_HEADER_CACHE_SIZE = 32
_U16 = struct.Struct(">H")
_CRC = struct.Struct(">I")


class EventStreamError(Exception):
    """A corrupt or truncated event-stream frame; the message says which check failed."""


@dataclass
class EventStreamMessage:
    """One decoded frame: its headers (name -> value) and raw payload bytes."""

    headers: Dict[str, Any] = field(default_factory=dict)
    payload: bytes = b""

    @property
    def message_type(self) -> str:
        """``:message-type``: ``"event"``, ``"exception"`` or ``"error"`` (``"event"`` if absent)."""
        return str(self.headers.get(":message-type") or "event")


_FIXED = {
    2: struct.Struct(">b"),
    3: struct.Struct(">h"),
    4: struct.Struct(">i"),
    5: struct.Struct(">q"),
    8: struct.Struct(">q"),
}


def _parse_headers(data: bytes, offset: int) -> Dict[str, Any]:
    """Parse the header section of the message starting at ``offset`` (for error positions)."""
    headers: Dict[str, Any] = {}
    i, end = 0, len(data)
    while i < end:
        start = i
        name_length = data[i]
        i += 1
        if i + name_length + 1 > end:
            raise EventStreamError(f"event-stream header at byte {offset + start} runs past the header section")
        try:
            name = data[i : i + name_length].decode("utf-8")
        except UnicodeDecodeError:
            raise EventStreamError(f"event-stream header name at byte {offset + start} is not UTF-8") from None
        i += name_length
        kind = data[i]
        i += 1
        if kind in (0, 1):
            value: Any = kind == 0
        elif kind in _FIXED:
            fmt = _FIXED[kind]
            if i + fmt.size > end:
                raise EventStreamError(f"event-stream header {name!r} runs past the header section")
            value = fmt.unpack_from(data, i)[0]
            i += fmt.size
        elif kind in (6, 7):
            if i + 2 > end:
                raise EventStreamError(f"event-stream header {name!r} runs past the header section")
            length = _U16.unpack_from(data, i)[0]
            i += 2
            if i + length > end:
                raise EventStreamError(f"event-stream header {name!r} runs past the header section")
            raw = data[i : i + length]
            i += length
            if kind == 6:
                value = bytes(raw)
            else:
                try:
                    value = raw.decode("utf-8")
                except UnicodeDecodeError:
                    raise EventStreamError(f"event-stream header {name!r} is not valid UTF-8") from None
        elif kind == 9:
            if i + 16 > end:
                raise EventStreamError(f"event-stream header {name!r} runs past the header section")
            value = uuid.UUID(bytes=bytes(data[i : i + 16]))
            i += 16
        else:
            raise EventStreamError(f"event-stream header {name!r} has unknown value type {kind}")
        headers[name] = value
    return headers


class EventStreamDecoder:
    """Incremental decoder: :meth:`feed` bytes as they arrive, get the messages they complete.

    :meth:`close` checks that the body did not end inside a frame. Bytes are copied only while a
    frame is incomplete; complete frames are parsed straight from the buffer.

    A corrupt frame after good ones in the same :meth:`feed` is reported after them: that call
    returns the good frames and keeps the error (:attr:`error`), raised by the next :meth:`feed`,
    :meth:`check` or :meth:`close`. Call :meth:`check` after handling a feed's frames to report
    it at once, without waiting for more input.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._consumed = 0  # bytes of the stream already decoded (for error positions)
        self._failed = False
        self._error: Optional[EventStreamError] = None  # found after good frames, not raised yet
        # raw header bytes -> parsed headers: a stream repeats a handful of header sets (one per
        # event type), so each is parsed once; bounded, per decoder
        self._headers: Dict[bytes, Dict[str, Any]] = {}

    @property
    def error(self) -> Optional[EventStreamError]:
        """The corrupt frame's error found after good frames by the last :meth:`feed`, until raised."""
        return self._error

    def check(self) -> None:
        """Raise the error :meth:`feed` kept (see :attr:`error`), if any; it is raised once."""
        error = self._error
        if error is not None:
            self._error = None
            raise error

    def feed(self, data: bytes) -> List[EventStreamMessage]:
        """Decode every message completed by ``data``; raise :class:`EventStreamError` if corrupt
        (after returning the good frames before the corrupt one: see the class docstring)."""
        self.check()
        if self._failed:
            raise EventStreamError("event-stream decoder already failed on a corrupt frame")
        buffer = self._buffer
        if buffer:
            buffer += data
            source: Any = buffer
        else:
            source = data
        messages: List[EventStreamMessage] = []
        pos, size = 0, len(source)
        view = memoryview(source)  # CRCs and slices without copies
        try:
            while size - pos >= _PRELUDE_LENGTH:
                total, headers_length, prelude_crc = _PRELUDE.unpack_from(view, pos)
                self._check_prelude(view, pos, total, headers_length, prelude_crc)
                if size - pos < total:
                    break
                messages.append(self._message(view, pos, total, headers_length))
                pos += total
        except EventStreamError as exc:
            self._failed = True
            if not messages:
                raise
            self._error = exc  # the good frames first; the next feed(), check() or close() raises it
            return messages
        finally:
            view.release()  # a bytearray with an exported view cannot be resized
        self._consumed += pos
        if buffer:
            del buffer[:pos]
        elif pos < size:
            buffer += source[pos:]
        return messages

    def close(self) -> None:
        """The body ended: raise the kept error (:meth:`check`), or :class:`EventStreamError` if it
        stopped inside a frame."""
        self.check()
        if self._buffer and not self._failed:
            raise EventStreamError(
                f"event stream ended inside a frame ({len(self._buffer)} bytes of an "
                f"incomplete message at byte {self._consumed})"
            )

    def _check_prelude(self, view: Any, pos: int, total: int, headers_length: int, prelude_crc: int) -> None:
        where = self._consumed + pos
        if zlib.crc32(view[pos : pos + 8]) != prelude_crc:
            raise EventStreamError(
                f"event-stream prelude CRC mismatch in the frame at byte {where} (corrupt or not an event stream)"
            )
        if headers_length > MAX_HEADERS_LENGTH:
            raise EventStreamError(
                f"event-stream frame at byte {where}: headers length {headers_length} exceeds {MAX_HEADERS_LENGTH}"
            )
        payload_length = total - headers_length - _MIN_MESSAGE
        if total < _MIN_MESSAGE or payload_length < 0:
            raise EventStreamError(
                f"event-stream frame at byte {where}: total length {total} cannot hold {headers_length} header bytes"
            )
        if payload_length > MAX_PAYLOAD_LENGTH:
            raise EventStreamError(
                f"event-stream frame at byte {where}: payload length {payload_length} exceeds {MAX_PAYLOAD_LENGTH}"
            )

    def _message(self, view: Any, pos: int, total: int, headers_length: int) -> EventStreamMessage:
        end = pos + total
        expected = _CRC.unpack_from(view, end - 4)[0]
        if zlib.crc32(view[pos : end - 4]) != expected:
            raise EventStreamError(
                f"event-stream message CRC mismatch in the frame at byte {self._consumed + pos} (the frame is corrupt)"
            )
        start = pos + _PRELUDE_LENGTH
        raw = view[start : start + headers_length].tobytes()
        headers = self._headers.get(raw)
        if headers is None:
            headers = _parse_headers(raw, self._consumed + start)
            if len(self._headers) < _HEADER_CACHE_SIZE:
                self._headers[raw] = headers
        return EventStreamMessage(dict(headers), view[start + headers_length : end - 4].tobytes())


def encode_message(headers: Dict[str, Any], payload: bytes) -> bytes:
    """Encode one frame with string (str), bytes, bool and int32 (int) headers (for tests and tools)."""
    parts = []
    for name, value in headers.items():
        raw_name = name.encode("utf-8")
        head = bytes([len(raw_name)]) + raw_name
        if isinstance(value, bool):
            parts.append(head + bytes([0 if value else 1]))
        elif isinstance(value, int):
            parts.append(head + bytes([4]) + struct.pack(">i", value))
        elif isinstance(value, bytes):
            parts.append(head + bytes([6]) + _U16.pack(len(value)) + value)
        else:
            raw = str(value).encode("utf-8")
            parts.append(head + bytes([7]) + _U16.pack(len(raw)) + raw)
    header_bytes = b"".join(parts)
    total = _MIN_MESSAGE + len(header_bytes) + len(payload)
    prelude = struct.pack(">II", total, len(header_bytes))
    prelude += _CRC.pack(zlib.crc32(prelude))
    body = prelude + header_bytes + payload
    return body + _CRC.pack(zlib.crc32(body))

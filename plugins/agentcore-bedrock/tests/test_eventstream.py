"""The AWS event-stream framing: incremental decoding and every integrity check."""

from __future__ import annotations

import struct
import uuid
import zlib

import pytest
from agentcore_bedrock.eventstream import EventStreamDecoder, EventStreamError, encode_message
from bedrock_helpers import event, load_recording, recorded_body


def _frames(data: bytes, size: int) -> list:
    decoder = EventStreamDecoder()
    out = []
    for start in range(0, len(data), size):
        out.extend(decoder.feed(data[start : start + size]))
    decoder.close()
    return out


@pytest.mark.parametrize("size", [1, 7, 64, 100000])
def test_recorded_body_decodes_the_same_in_any_chunking(size: int) -> None:
    body = recorded_body(load_recording("text-stream"))
    frames = _frames(body, size)
    assert len(frames) == 33
    assert frames[0].headers == {
        ":event-type": "messageStart",
        ":content-type": "application/json",
        ":message-type": "event",
    }
    assert frames[0].payload == b'{"p":"abcdefghijklmnopqr","role":"assistant"}'
    assert [f.headers[":event-type"] for f in frames[-3:]] == ["contentBlockStop", "messageStop", "metadata"]


def test_encode_round_trips_and_every_header_type_decodes() -> None:
    headers = b"".join(
        [
            b"\x01t\x00",
            b"\x01f\x01",
            b"\x01b\x02\xff",
            b"\x01s\x03" + struct.pack(">h", -2),
            b"\x01i\x04" + struct.pack(">i", 7),
            b"\x01l\x05" + struct.pack(">q", 2**40),
            b"\x01y\x06\x00\x02\x00\x01",
            b"\x01z\x07\x00\x03abc",
            b"\x01d\x08" + struct.pack(">q", 1700000000000),
            b"\x01u\x09" + uuid.UUID(int=5).bytes,
        ]
    )
    message = _raw_frame(headers, b"{}")
    (frame,) = EventStreamDecoder().feed(message)
    assert frame.headers == {
        "t": True,
        "f": False,
        "b": -1,
        "s": -2,
        "i": 7,
        "l": 2**40,
        "y": b"\x00\x01",
        "z": "abc",
        "d": 1700000000000,
        "u": uuid.UUID(int=5),
    }
    assert frame.payload == b"{}"
    data = event("messageStop", {"stopReason": "end_turn"})
    (again,) = EventStreamDecoder().feed(data)
    assert encode_message(again.headers, again.payload) == data


def _raw_frame(headers: bytes, payload: bytes) -> bytes:
    prelude = struct.pack(">II", 16 + len(headers) + len(payload), len(headers))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + headers + payload
    return body + struct.pack(">I", zlib.crc32(body))


def test_bad_prelude_crc_is_named_with_its_position() -> None:
    good = event("messageStart", {"role": "assistant"})
    bad = bytearray(event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "x"}}))
    bad[9] ^= 0xFF  # inside the prelude CRC
    decoder = EventStreamDecoder()
    assert len(decoder.feed(good)) == 1
    with pytest.raises(EventStreamError, match=rf"prelude CRC mismatch in the frame at byte {len(good)}"):
        decoder.feed(bytes(bad))
    with pytest.raises(EventStreamError, match="already failed"):
        decoder.feed(good)
    decoder = EventStreamDecoder()  # after a good frame in the same input: reported after it
    assert [f.headers[":event-type"] for f in decoder.feed(good + bytes(bad))] == ["messageStart"]
    with pytest.raises(EventStreamError, match=rf"prelude CRC mismatch in the frame at byte {len(good)}"):
        decoder.feed(good)
    with pytest.raises(EventStreamError, match="already failed"):
        decoder.feed(good)


def test_bad_message_crc_is_named() -> None:
    data = bytearray(event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "hello"}}))
    data[-10] ^= 0x01  # a payload byte: only the message CRC can notice
    with pytest.raises(EventStreamError, match="message CRC mismatch in the frame at byte 0"):
        _frames(bytes(data), 5)


@pytest.mark.parametrize("corrupt_at", [-1, 9])  # the message CRC, the prelude CRC
def test_good_frames_before_a_corrupt_one_in_the_same_feed_are_returned(corrupt_at: int) -> None:
    """One network read holding good frames and then a corrupt one: the good frames come back and
    the error is kept for check(), close() or the next feed(), raised once (then "already
    failed"), so the partial answer they carry is never dropped."""
    good = event("messageStart", {"role": "assistant"}) + event(
        "contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "partial"}}
    )
    bad = bytearray(event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": " more"}}))
    bad[corrupt_at] ^= 0xFF
    decoder = EventStreamDecoder()
    frames = decoder.feed(good + bytes(bad) + event("messageStop", {"stopReason": "end_turn"}))
    assert [f.headers[":event-type"] for f in frames] == ["messageStart", "contentBlockDelta"]
    assert frames[1].payload == b'{"contentBlockIndex": 0, "delta": {"text": "partial"}}'
    assert isinstance(decoder.error, EventStreamError)
    with pytest.raises(EventStreamError, match=f"CRC mismatch in the frame at byte {len(good)}"):
        decoder.check()
    assert decoder.error is None
    decoder.check()  # raised once
    with pytest.raises(EventStreamError, match="already failed"):
        decoder.feed(b"")

    decoder = EventStreamDecoder()  # the body ends right after: close() reports it
    assert len(decoder.feed(good + bytes(bad))) == 2
    with pytest.raises(EventStreamError, match="CRC mismatch"):
        decoder.close()


def test_truncated_stream_is_an_error_at_close() -> None:
    data = event("messageStart", {"role": "assistant"}) + event("messageStop", {"stopReason": "end_turn"})[:20]
    decoder = EventStreamDecoder()
    assert len(decoder.feed(data)) == 1
    with pytest.raises(EventStreamError, match="ended inside a frame"):
        decoder.close()


@pytest.mark.parametrize(
    "headers, match",
    [
        (b"\x05:name", "runs past the header section"),
        (b"\x01x\x07\x00\x09abc", "runs past the header section"),
        (b"\x01x\x0c", "unknown value type 12"),
        (b"\x02\xff\xfe\x00", "not UTF-8"),
    ],
)
def test_malformed_headers_are_named(headers: bytes, match: str) -> None:
    with pytest.raises(EventStreamError, match=match):
        EventStreamDecoder().feed(_raw_frame(headers, b""))


def test_impossible_lengths_are_rejected_before_buffering() -> None:
    prelude = struct.pack(">II", 10, 0)  # shorter than a prelude plus CRC
    with pytest.raises(EventStreamError, match="total length 10"):
        EventStreamDecoder().feed(prelude + struct.pack(">I", zlib.crc32(prelude)))
    prelude = struct.pack(">II", 2**31, 0)
    with pytest.raises(EventStreamError, match="payload length .* exceeds"):
        EventStreamDecoder().feed(prelude + struct.pack(">I", zlib.crc32(prelude)))

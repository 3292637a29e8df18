"""Per-delta parsing cost of the ConverseStream reader against a bare parse of the same bytes.

The body: 5000 ``contentBlockDelta`` text frames shaped like the real ones (a ``p`` padding field),
framed by :func:`agentcore_bedrock.eventstream.encode_message`, handed over in 1 KiB chunks (what a
socket read typically returns). Three timings, each the best of 15 runs, in one process:

* bare: split the bytes at each frame's total length and ``json.loads`` every decoded payload: the least
  any reader must do (no CRC, no headers, no events);
* decoder: :class:`~agentcore_bedrock.eventstream.EventStreamDecoder` alone (both CRCs, headers);
* full: decoder + :class:`~agentcore_bedrock.stream_state.BedrockStreamState` + the core's
  ``StreamWriter`` (the text block grows, one ``text_delta`` event per frame): what a stream costs
  per delta, without the network.

Prints microseconds per delta and the ratios to the bare floor. Asserts nothing.

    python plugins/agentcore-bedrock/benchmarks/bench_parse.py [deltas]
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from agentcore_bedrock.eventstream import EventStreamDecoder, encode_message  # noqa: E402
from agentcore_bedrock.stream_state import BedrockStreamState  # noqa: E402

from agentcore.providers.base import StreamWriter  # noqa: E402
from agentcore.types import AssistantMessage, Model  # noqa: E402

HEADERS = {":event-type": "contentBlockDelta", ":content-type": "application/json", ":message-type": "event"}
MODEL = Model(id="us.amazon.nova-micro-v1:0", api="bedrock-converse-stream", provider="amazon-bedrock")
CHUNK = 1024


def body(deltas: int) -> bytes:
    frames = [
        encode_message(
            {":event-type": "messageStart", ":content-type": "application/json", ":message-type": "event"},
            b'{"p":"abcdefgh","role":"assistant"}',
        )
    ]
    for i in range(deltas):
        payload = {
            "contentBlockIndex": 0,
            "delta": {"text": f" word{i % 97}"},
            "p": "abcdefghijklmnopqrstuvwx"[: i % 24],
        }
        frames.append(encode_message(HEADERS, json.dumps(payload, separators=(",", ":")).encode()))
    return b"".join(frames)


def chunks(data: bytes) -> list:
    return [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]


def bare(pieces: list) -> int:
    buffer = bytearray()
    count = 0
    loads = json.loads
    unpack = struct.unpack_from
    for piece in pieces:
        buffer += piece
        pos, size = 0, len(buffer)
        while size - pos >= 12:
            total, headers_length = unpack(">II", buffer, pos)
            if size - pos < total:
                break
            loads(buffer[pos + 12 + headers_length : pos + total - 4].decode())
            count += 1
            pos += total
        del buffer[:pos]
    return count


def decoder_only(pieces: list) -> int:
    decoder = EventStreamDecoder()
    count = 0
    for piece in pieces:
        count += len(decoder.feed(piece))
    return count


def full(pieces: list) -> int:
    events: list = []
    output = AssistantMessage(api=MODEL.api, provider=MODEL.provider, model=MODEL.id)
    state = BedrockStreamState(MODEL, StreamWriter(MODEL, output, events.append))
    decoder = EventStreamDecoder()
    for piece in pieces:
        for message in decoder.feed(piece):
            state.handle(message)
        events.clear()  # a consumer takes them
    return len(output.content[0].text)


def best_time(fn, pieces: list, runs: int) -> float:
    """The fastest of ``runs`` (the run least disturbed by other work on a shared machine)."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn(pieces)
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("deltas", nargs="?", type=int, default=5000, help="text deltas per stream (default 5000)")
    deltas = parser.parse_args(argv).deltas  # --help prints the docstring; a bad size exits 2
    pieces = chunks(body(deltas))
    assert bare(pieces) == decoder_only(pieces) == deltas + 1
    runs = 15
    floor = best_time(bare, pieces, runs)
    decoded = best_time(decoder_only, pieces, runs)
    streamed = best_time(full, pieces, runs)
    per = 1e6 / deltas
    print(f"{deltas} deltas, {sum(map(len, pieces))} bytes in {len(pieces)} chunks of {CHUNK} bytes")
    print(f"bare split + json.loads : {floor * per:6.2f} us/delta (floor)")
    print(f"EventStreamDecoder      : {decoded * per:6.2f} us/delta  ratio {decoded / floor:4.2f}")
    print(f"decoder + state + writer: {streamed * per:6.2f} us/delta  ratio {streamed / floor:4.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])

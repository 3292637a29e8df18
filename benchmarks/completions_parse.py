"""Per-delta parsing cost of openai-completions streams against a bare parse of the same bytes.

Two bodies of N deltas each, cut into 1 KiB network chunks, shaped like the recordings in
``../shared/recordings/openai-completions``:

* ``plain``: ``delta.content`` strings (the common OpenAI-compatible shape);
* ``mistral``: the Magistral shape of ``mistral-thinking-parts``: the first half
  ``delta.content`` lists with one ``{"type": "thinking", "thinking": [{"type": "text", ...}]}``
  chunk, then plain-string text, usage and ``finish_reason`` on the last chunk.

Measured in the same run, calls interleaved so load drift hits every row alike, per body:

* floor: split the bytes into SSE events and ``json.loads`` each ``data:`` payload;
* parse: the provider's own path: ``iter_sse`` over the chunks, ``CompletionsHandler`` (what
  ``OpenAICompletionsProvider.new_handler`` returns), StreamWriter events into a list.

Prints microseconds per delta and the ratio parse/floor (the cost of turning bytes into events),
and the Mistral parse against the plain parse (what the typed chunks add). With the recording
present, its own body is checked to parse into one thinking and one text block. Asserts nothing
about timings.

    python benchmarks/completions_parse.py [deltas] [repeats]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_ROOT), str(_ROOT / "benchmarks")]

from agent_cost import _interleaved  # noqa: E402  (medians of interleaved calls: load drift hits all)

from agentcore.providers.base import StreamWriter  # noqa: E402
from agentcore.providers.openai_completions import OpenAICompletionsProvider  # noqa: E402
from agentcore.providers.sse import iter_sse  # noqa: E402
from agentcore.types import AssistantMessage, Model, ModelCost  # noqa: E402

RECORDING = _ROOT.parent / "shared" / "recordings" / "openai-completions" / "mistral-thinking-parts.json"
MISTRAL = Model(
    id="magistral-medium-latest",
    api="openai-completions",
    provider="mistral",
    base_url="https://api.mistral.ai/v1",
    reasoning=True,
    cost=ModelCost(2.0, 5.0),
)
PLAIN = Model(id="gpt-x", api="openai-completions", provider="openai", base_url="https://api.openai.com/v1")


def _chunk(model_id: str, delta: dict, finish=None, usage=None) -> str:
    chunk = {
        "id": "9f9d90210f194076abeee223863eaaf0",
        "object": "chat.completion.chunk",
        "created": 1764296393,
        "model": model_id,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage:
        chunk["usage"] = usage
    return "data: " + json.dumps(chunk) + "\n\n"


def body(deltas: int, mistral: bool) -> bytes:
    model_id = MISTRAL.id if mistral else PLAIN.id
    events = []
    for i in range(deltas):
        last = i == deltas - 1
        text = f" word{i} and more"
        if mistral and i < deltas // 2:
            delta = {"content": [{"type": "thinking", "thinking": [{"type": "text", "text": text}]}]}
        else:
            delta = {"content": text}
        usage = {"prompt_tokens": 10, "total_tokens": 10 + deltas, "completion_tokens": deltas} if last else None
        events.append(_chunk(model_id, delta, "stop" if last else None, usage))
    events.append("data: [DONE]\n\n")
    return "".join(events).encode("utf-8")


def chunks(data: bytes, size: int = 1024):
    return [data[i : i + size] for i in range(0, len(data), size)]


def floor(pieces) -> int:
    text = b"".join(pieces).decode("utf-8")
    n = 0
    for event in text.split("\n\n"):
        if event.startswith("data: ") and event != "data: [DONE]":
            json.loads(event[6:])
            n += 1
    return n


def parse(provider: OpenAICompletionsProvider, model: Model, pieces) -> AssistantMessage:
    output = AssistantMessage(api=model.api, provider=model.provider, model=model.id)
    events: list = []
    writer = StreamWriter(model, output, events.append)
    handler = provider.new_handler(model, writer, {})
    terminal = False
    for sse in iter_sse(iter(pieces)):
        if handler.on_event(sse):
            terminal = True
            break
    handler.on_end(terminal)
    writer.close_open_blocks()
    return output


def main(argv) -> None:
    deltas = int(argv[0]) if argv else 2000
    repeats = int(argv[1]) if len(argv) > 1 else 15
    provider = OpenAICompletionsProvider()
    if RECORDING.exists():  # the real body parses into exactly one thinking and one text block
        recorded = json.loads(RECORDING.read_text(encoding="utf-8"))["interactions"][0]["response"]["body"]
        message = parse(provider, MISTRAL, chunks(recorded.encode("utf-8")))
        assert [b.type for b in message.content] == ["thinking", "text"], message.content
    print(f"deltas per stream: {deltas}, 1 KiB network chunks, median of {repeats} interleaved runs")
    plain, mistral = chunks(body(deltas, False)), chunks(body(deltas, True))
    for pieces, model, blocks in ((plain, PLAIN, 1), (mistral, MISTRAL, 2)):
        assert floor(pieces) == deltas
        message = parse(provider, model, pieces)
        assert message.stop_reason == "stop" and len(message.content) == blocks
    times = _interleaved(
        [
            lambda: floor(plain),
            lambda: parse(provider, PLAIN, plain),
            lambda: floor(mistral),
            lambda: parse(provider, MISTRAL, mistral),
        ],
        repeats,
    )
    floor_plain, parse_plain, floor_mistral, parse_mistral = (t / deltas * 1e6 for t in times)
    for name, bare, full in (("plain", floor_plain, parse_plain), ("mistral", floor_mistral, parse_mistral)):
        print(f"{name:8s} floor (split + json.loads): {bare:6.2f} us/delta")
        print(f"{name:8s} openai-completions parse:  {full:6.2f} us/delta   ratio parse/floor {full / bare:5.2f}x")
    print(f"mistral typed chunks vs plain strings:   ratio {parse_mistral / parse_plain:5.2f}x")


if __name__ == "__main__":
    main(sys.argv[1:])

"""Per-delta parsing cost of the core's wire APIs against a bare parse of the same bytes.

Each case is a streamed response of N text deltas in its API's shape, cut into 1 KiB network
chunks. Measured in the same run, per case:

* floor: split the bytes into SSE events and ``json.loads`` each ``data:`` payload;
* parse: the provider's own path: ``iter_sse`` over the chunks, the handler of the registered
  provider's ``new_handler``, StreamWriter events into a list.

Cases: ``azure-openai-responses`` (the Azure provider: the Responses parser behind the Azure
request), and ``openai-responses`` on the same bytes for comparison (the two should match).
Add a case to :data:`CASES` for another API. Prints microseconds per delta and the parse/floor
ratio (the overhead of turning bytes into events). Asserts nothing.

    python benchmarks/parse_per_delta.py [deltas] [repeats]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from end_to_end import _median as median_time  # noqa: E402

from agentcore.providers._plugin import builtin_provider  # noqa: E402
from agentcore.providers.base import StreamWriter  # noqa: E402
from agentcore.providers.sse import iter_sse  # noqa: E402
from agentcore.types import AssistantMessage, Model, ModelCost  # noqa: E402


def responses_body(deltas: int) -> bytes:
    """A Responses stream: created, a message item, N ``output_text.delta`` events, completed."""
    events: List[Dict[str, Any]] = [
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}},
        {"type": "response.output_item.added", "output_index": 0, "item": {"type": "message", "id": "msg_1"}},
        {
            "type": "response.content_part.added",
            "output_index": 0,
            "content_index": 0,
            "part": {"type": "output_text", "text": ""},
        },
    ]
    words = [f"word{i} and some more text " for i in range(deltas)]
    for i, word in enumerate(words):
        events.append(
            {
                "type": "response.output_text.delta",
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "delta": word,
                "sequence_number": i + 3,
            }
        )
    item = {"type": "message", "id": "msg_1", "content": [{"type": "output_text", "text": "".join(words)}]}
    events.append({"type": "response.output_item.done", "output_index": 0, "item": item})
    usage = {"input_tokens": 34, "output_tokens": deltas, "total_tokens": 34 + deltas}
    events.append({"type": "response.completed", "response": {"status": "completed", "usage": usage}})
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode("utf-8")


def _model(api: str, provider: str) -> Model:
    return Model(id="gpt-5.5", api=api, provider=provider, reasoning=True, cost=ModelCost(1.25, 10, 0.125, 0))


#: name -> (model, body builder, events the parse emits besides the deltas)
CASES: Dict[str, Tuple[Model, Callable[[int], bytes], int]] = {
    "azure-openai-responses": (_model("azure-openai-responses", "azure-openai-responses"), responses_body, 2),
    "openai-responses": (_model("openai-responses", "openai"), responses_body, 2),
}


def chunks(data: bytes, size: int = 1024) -> List[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def floor(pieces: List[bytes]) -> int:
    text = b"".join(pieces).decode("utf-8")
    n = 0
    for event in text.split("\n\n"):
        data = event.partition("data: ")[2]
        if data:
            json.loads(data)
            n += 1
    return n


def parse(model: Model, pieces: List[bytes]) -> int:
    output = AssistantMessage(api=model.api, provider=model.provider, model=model.id)
    events: List[Any] = []
    handler = builtin_provider(model.api).new_handler(model, StreamWriter(model, output, events.append), {})
    for sse in iter_sse(iter(pieces)):
        handler.on_event(sse)
    handler.on_end(True)
    return len(events)


def main(argv: List[str]) -> None:
    deltas = int(argv[0]) if argv else 2000
    repeats = int(argv[1]) if len(argv) > 1 else 15
    print(f"deltas per stream: {deltas}, median of {repeats} runs, microseconds per delta")
    print(f"{'api':26} {'floor':>8} {'parse':>8} {'ratio':>7}")
    for name, (model, make_body, extra) in CASES.items():
        pieces = chunks(make_body(deltas))
        assert parse(model, pieces) == deltas + extra, name  # text_start, deltas, text_end
        bare = median_time(lambda p=pieces: floor(p), repeats) / deltas * 1e6
        full = median_time(lambda m=model, p=pieces: parse(m, p), repeats) / deltas * 1e6
        print(f"{name:26} {bare:8.2f} {full:8.2f} {full / bare:6.2f}x")


if __name__ == "__main__":
    main(sys.argv[1:])

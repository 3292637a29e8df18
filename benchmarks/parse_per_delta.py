"""Per-delta parsing cost of every core wire API against a bare parse of the same bytes.

Each case is a streamed response of N deltas in its API's shape, cut into 1 KiB network chunks:

* ``openai-completions``: ``delta.content`` strings (the common OpenAI-compatible shape);
* ``openai-completions (mistral)``: the Magistral shape of the ``mistral-thinking-parts``
  recording: the first half ``delta.content`` lists with one ``{"type": "thinking", ...}`` chunk,
  then plain-string text, usage and ``finish_reason`` on the last chunk;
* ``openai-responses`` and ``azure-openai-responses``: N ``response.output_text.delta`` events
  (the Azure provider runs the Responses parser behind its own request: the two should match);
* ``anthropic-messages``: N ``content_block_delta`` ``text_delta`` events;
* ``google-generative-ai``: N ``candidates[0].content.parts[0].text`` chunks.

Measured in the same run, calls interleaved so load drift hits every row alike, per case:

* floor: split the bytes into SSE events and ``json.loads`` each ``data:`` payload;
* parse: the provider's own path: ``iter_sse`` over the chunks, the handler of the registered
  provider's ``new_handler``, StreamWriter events into a list, open blocks closed.

Prints microseconds per delta and one ratio parse/floor per API (the cost of turning bytes into
events). Each parse is checked to produce the expected blocks and stop reason; with the Mistral
recording present (``../shared/recordings``), its body is checked to parse into one thinking and
one text block. Asserts nothing about timings. Bedrock and Vertex have their own scripts in
``plugins/agentcore-bedrock/benchmarks`` and ``plugins/agentcore-vertex/benchmarks``.

    python benchmarks/parse_per_delta.py [deltas] [repeats]
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_ROOT), str(_ROOT / "benchmarks")]

from _cli import int_args  # noqa: E402
from agent_cost import _interleaved  # noqa: E402  (medians of interleaved calls: load drift hits all)

from agentcore.providers._plugin import builtin_provider  # noqa: E402
from agentcore.providers.sse import iter_sse  # noqa: E402
from agentcore.providers.writer import StreamWriter  # noqa: E402
from agentcore.types import AssistantMessage, Model, ModelCost  # noqa: E402

RECORDING = _ROOT.parent / "shared" / "recordings" / "openai-completions" / "mistral-thinking-parts.json"


def _words(deltas: int) -> List[str]:
    return [f" word{i} and some more text" for i in range(deltas)]


def _sse(events: List[Dict[str, Any]], named: bool) -> bytes:
    if named:
        return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode("utf-8")
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode("utf-8")


# --------------------------------------------------------------------------- bodies, one per API shape


def completions_body(deltas: int, mistral: bool = False) -> bytes:
    """Chat-completion chunks; ``mistral``: the first half as typed thinking chunks."""
    model_id = "magistral-medium-latest" if mistral else "gpt-x"
    out = []
    for i, text in enumerate(_words(deltas)):
        last = i == deltas - 1
        if mistral and i < deltas // 2:
            delta: Dict[str, Any] = {"content": [{"type": "thinking", "thinking": [{"type": "text", "text": text}]}]}
        else:
            delta = {"content": text}
        chunk: Dict[str, Any] = {
            "id": "9f9d90210f194076abeee223863eaaf0",
            "object": "chat.completion.chunk",
            "created": 1764296393,
            "model": model_id,
            "choices": [{"index": 0, "delta": delta, "finish_reason": "stop" if last else None}],
        }
        if last:
            chunk["usage"] = {"prompt_tokens": 10, "total_tokens": 10 + deltas, "completion_tokens": deltas}
        out.append("data: " + json.dumps(chunk) + "\n\n")
    out.append("data: [DONE]\n\n")
    return "".join(out).encode("utf-8")


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
    words = _words(deltas)
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
    return _sse(events, named=True)


def anthropic_body(deltas: int) -> bytes:
    """A Messages stream: message_start, one text block of N ``text_delta`` events, message_stop."""
    usage = {"input_tokens": 34, "output_tokens": 1, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [],
        "usage": usage,
    }
    events: List[Dict[str, Any]] = [
        {"type": "message_start", "message": message},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ]
    for word in _words(deltas):
        events.append({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": word}})
    events.append({"type": "content_block_stop", "index": 0})
    events.append({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": deltas}})
    events.append({"type": "message_stop"})
    return _sse(events, named=True)


def gemini_body(deltas: int) -> bytes:
    """Gemini ``streamGenerateContent?alt=sse`` chunks, one text part each; STOP on the last."""
    events = []
    for i, word in enumerate(_words(deltas)):
        candidate: Dict[str, Any] = {"content": {"parts": [{"text": word}], "role": "model"}, "index": 0}
        if i == deltas - 1:
            candidate["finishReason"] = "STOP"
        events.append(
            {
                "candidates": [candidate],
                "usageMetadata": {"promptTokenCount": 34, "candidatesTokenCount": i + 1, "totalTokenCount": 35 + i},
                "modelVersion": "gemini-2.5-flash",
                "responseId": "resp_1",
            }
        )
    return _sse(events, named=False)


# --------------------------------------------------------------------------- cases


@dataclass
class Case:
    name: str
    model: Model
    body: Callable[[int], bytes]
    blocks: Tuple[str, ...]  # the content block types the parse must produce


def _model(id: str, api: str, provider: str, base_url: Optional[str] = None) -> Model:
    return Model(id=id, api=api, provider=provider, base_url=base_url, reasoning=True, cost=ModelCost(1.25, 10))


CASES: List[Case] = [
    Case(
        "openai-completions",
        _model("gpt-x", "openai-completions", "openai", "https://api.openai.com/v1"),
        completions_body,
        ("text",),
    ),
    Case(
        "openai-completions (mistral)",
        _model("magistral-medium-latest", "openai-completions", "mistral", "https://api.mistral.ai/v1"),
        lambda n: completions_body(n, mistral=True),
        ("thinking", "text"),
    ),
    Case("openai-responses", _model("gpt-5.5", "openai-responses", "openai"), responses_body, ("text",)),
    Case(
        "azure-openai-responses",
        _model("gpt-5.5", "azure-openai-responses", "azure-openai-responses"),
        responses_body,
        ("text",),
    ),
    Case("anthropic-messages", _model("claude-x", "anthropic-messages", "anthropic"), anthropic_body, ("text",)),
    Case("google-generative-ai", _model("gemini-2.5-flash", "google-generative-ai", "google"), gemini_body, ("text",)),
]


def chunks(data: bytes, size: int = 1024) -> List[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def floor(pieces: List[bytes]) -> int:
    """The bare parse: split into SSE events, ``json.loads`` each ``data:`` payload."""
    text = b"".join(pieces).decode("utf-8")
    n = 0
    for event in text.split("\n\n"):
        data = event.partition("data: ")[2]
        if data and data != "[DONE]":
            json.loads(data)
            n += 1
    return n


def parse(model: Model, pieces: List[bytes]) -> AssistantMessage:
    """The provider's own path, as ``WireProvider`` runs it after the response headers."""
    output = AssistantMessage(api=model.api, provider=model.provider, model=model.id)
    events: List[Any] = []
    writer = StreamWriter(model, output, events.append)
    handler = builtin_provider(model.api).new_handler(model, writer, {})
    terminal = False
    for sse in iter_sse(iter(pieces)):
        if handler.on_event(sse):
            terminal = True
            break
    handler.on_end(terminal)
    writer.close_open_blocks()
    return output


def _check(case: Case, pieces: List[bytes]) -> None:
    message = parse(case.model, pieces)
    blocks = tuple(block.type for block in message.content)
    assert message.stop_reason == "stop" and blocks == case.blocks, (case.name, message.stop_reason, blocks)


def main(argv: List[str]) -> None:
    deltas, repeats = int_args(__doc__, [("deltas", 2000), ("repeats", 15)], argv)
    if RECORDING.exists():  # the real Mistral body parses into exactly one thinking and one text block
        recorded = json.loads(RECORDING.read_text(encoding="utf-8"))["interactions"][0]["response"]["body"]
        message = parse(CASES[1].model, chunks(recorded.encode("utf-8")))
        assert [b.type for b in message.content] == ["thinking", "text"], message.content
    bodies = [chunks(case.body(deltas)) for case in CASES]
    for case, pieces in zip(CASES, bodies):
        _check(case, pieces)
    fns: List[Callable[[], Any]] = []
    for case, pieces in zip(CASES, bodies):
        fns.append(lambda p=pieces: floor(p))
        fns.append(lambda m=case.model, p=pieces: parse(m, p))
    times = [t / deltas * 1e6 for t in _interleaved(fns, repeats)]
    print(f"deltas per stream: {deltas}, 1 KiB network chunks, median of {repeats} interleaved runs, us per delta")
    print(f"{'api':30} {'floor':>8} {'parse':>8} {'ratio':>7}")
    for index, case in enumerate(CASES):
        bare, full = times[2 * index], times[2 * index + 1]
        print(f"{case.name:30} {bare:8.2f} {full:8.2f} {full / bare:6.2f}x")
    long_answer(CASES, deltas * 20)


def long_answer(cases: List[Case], deltas: int) -> None:
    """A long answer's per-delta cost stays the short one's: the ratio at 20x the deltas (about
    a megabyte of text) should match the table's (a block's text copied per delta made it grow
    with the answer: about 20x here)."""
    pieces_by_case = [chunks(case.body(deltas)) for case in cases]
    fns: List[Callable[[], Any]] = []
    for case, pieces in zip(cases, pieces_by_case):
        fns.append(lambda p=pieces: floor(p))
        fns.append(lambda m=case.model, p=pieces: parse(m, p))
    times = [t / deltas * 1e6 for t in _interleaved(fns, 3)]
    size = len(parse(cases[0].model, pieces_by_case[0]).content[-1].text) / 1e6  # type: ignore[union-attr]
    print(f"long answer: {deltas} deltas (about {size:.1f} MB of text), median of 3, us per delta")
    for index, case in enumerate(cases):
        bare, full = times[2 * index], times[2 * index + 1]
        print(f"{case.name:30} {bare:8.2f} {full:8.2f} {full / bare:6.2f}x")


if __name__ == "__main__":
    main(sys.argv[1:])

"""Printing a run: streamed answer text on stdout, thinking and tool activity on stderr, or JSON lines.

Both printers are agent listeners (called on the run thread, one event at a time). They write and
flush per event so the answer appears as it streams. A printer never raises on odd events; a closed
stdout (``agentcore run ... | head``) ends output quietly. The text printer writes what a model or a
tool produced without its terminal control sequences and control characters (see
:func:`terminal_text`): an answer or a tool's output could otherwise clear the screen, retitle the
window or overwrite what was shown.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, List, Optional, Pattern, TextIO

from .._safe import terminal_text
from ..providers import failures

__all__ = [
    "TextPrinter",
    "JsonPrinter",
    "Masker",
    "run_outcome",
    "one_line",
    "shown_name",
    "terminal_text",
    "terminal_json",
    "abort_when_closed",
]

_ARGS_LIMIT = 160
_RESULT_LINES = 4


class Masker:
    """Masks every secret :meth:`add` ed (API keys of 4 characters or more, in each of their
    :func:`~agentcore.providers.failures.secret_forms`) as ``failures.redact`` does, in one pass
    over a text: the pattern is built when a secret is added, not per line (output lines are
    many, keys few)."""

    def __init__(self) -> None:
        self.secrets: List[str] = []
        self._pattern: Optional[Pattern[str]] = None

    def add(self, secret: Optional[str]) -> None:
        if not secret or secret in self.secrets:
            return
        self.secrets.append(secret)
        forms = {form for s in self.secrets for form in failures.secret_forms(s) if len(form) >= 4}
        if forms:  # longest first: a secret that contains another goes whole
            self._pattern = re.compile("|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True)))

    def __call__(self, text: str) -> str:
        return text if self._pattern is None else self._pattern.sub("***", text)

    def held(self, text: str) -> int:
        """The length of the longest end of ``text`` that begins a secret (in one of its forms)
        without completing it: what a stream must hold back until its next piece shows whether
        the secret follows (0 when nothing needs holding)."""
        longest = 0
        for secret in self.secrets:
            for form in failures.secret_forms(secret):
                if len(form) < 4:
                    continue
                for size in range(min(len(form) - 1, len(text)), longest, -1):
                    if text.endswith(form[:size]):
                        longest = size
                        break
        return longest


class _MaskedStream:
    """Masks the secrets of a text that arrives in pieces (streamed thinking): a model streams a
    key it read a few characters per delta, so masking each delta alone would show it whole. The
    end of a piece that may begin a secret is held back until the next piece (or :meth:`flush`)."""

    def __init__(self, masker: Masker) -> None:
        self.masker = masker
        self.pending = ""

    def feed(self, text: str) -> str:
        """The part of ``pending + text`` that can be shown now, masked."""
        text = self.masker(self.pending + text)  # complete secrets first: their ends are not held
        hold = self.masker.held(text)
        self.pending = text[len(text) - hold :] if hold else ""
        return text[: len(text) - hold]

    def flush(self) -> str:
        """What was held back, the stream having ended: the start of a secret cut off there is
        masked too (4 characters or more; a shorter one is ordinary text such as ``sk``)."""
        text, self.pending = self.pending, ""
        return "***" if len(text) >= 4 else text


#: what JSON written with ``ensure_ascii=False`` carries raw although a terminal may act on it: DEL,
#: the C1 controls (U+009B is CSI to some terminals), the bidirectional overrides and isolates and
#: the direction marks (JSON escapes only the C0 controls)
_RAW_IN_JSON = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def terminal_json(text: str) -> str:
    """JSON text with the characters of :data:`_RAW_IN_JSON` written as ``\\uXXXX`` escapes: the
    same JSON value (they only occur inside strings, and no escape sequence holds them), nothing a
    terminal acts on or draws reversed. For the JSON the CLI prints (``--json``, ``sessions export
    --format json``/``jsonl``), whose strings quote models, tools and other people's sessions."""
    return _RAW_IN_JSON.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def shown_name(name: Any) -> str:
    """A name a model or a file chose (a tool's) as one line of :func:`terminal_text`: a line
    break or tab in it shows as ``\\n``/``\\t``, never as a line of its own that could pass for
    the CLI's (``[tool] bash ok``, an approval question)."""
    return terminal_text(str(name)).replace("\n", "\\n").replace("\t", "\\t")


def one_line(value: Any, limit: int = _ARGS_LIMIT) -> str:
    """A compact single-line JSON-ish rendering, cut at ``limit`` characters."""
    try:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _text_of(content: Any) -> str:
    from ..types import text_of

    try:
        return text_of(content)
    except Exception:  # an odd block: show nothing rather than fail the run
        return ""


#: ``json.dumps(value, ensure_ascii=False, default=str)`` without a new encoder per event.
_encode_event = json.JSONEncoder(ensure_ascii=False, default=str).encode


class _Writer:
    """Writes to a stream, flushes, and goes quiet once the reader has gone away. A character the
    stream's encoding lacks is written as ``?`` (a strict stream raised UnicodeEncodeError, a
    ValueError, and the rest of the output was dropped as if the reader had gone)."""

    def __init__(self, stream: TextIO, clean: Optional[Callable[[str], str]] = None) -> None:
        self.stream = stream
        self.clean = clean  # applied to every text before it is written
        self.closed = False
        self.last_char = "\n"

    def write(self, text: str) -> None:
        if self.clean is not None and text:
            text = self.clean(text)
        if not text or self.closed:
            return
        try:
            try:
                self.stream.write(text)
            except UnicodeEncodeError as exc:  # nothing was written: the text is encoded first
                encoding = getattr(self.stream, "encoding", None) or exc.encoding
                self.stream.write(text.encode(encoding, "replace").decode(encoding))
            self.stream.flush()
        except (BrokenPipeError, ValueError):  # reader gone / stream closed
            self.closed = True
            return
        self.last_char = text[-1]

    def end_line(self) -> None:
        if self.last_char != "\n":
            self.write("\n")


class TextPrinter:
    """Human-readable output: the answer streams to ``out``; thinking, tools and errors go to ``err``.

    Everything is written as :func:`terminal_text` (no escape sequences or control characters);
    ``secret`` (the API key, if any) and the keys given to :meth:`mask` later are masked in
    everything written to ``err``, the streamed thinking included (a key streamed over several
    deltas too: the end of a delta that may begin a key waits for the next one). With ``stream``
    False (``--no-stream``) nothing is printed while a message streams: its thinking and text are
    printed once it is complete (the provider request streams all the same).
    """

    def __init__(
        self,
        out: TextIO,
        err: TextIO,
        *,
        secret: Optional[str] = None,
        show_thinking: bool = True,
        stream: bool = True,
    ) -> None:
        self.masker = Masker()
        self.out = _Writer(out, terminal_text)
        self.err = _Writer(err, lambda text: self.masker(terminal_text(text)))
        self.masker.add(secret)
        self._thinking = _MaskedStream(self.masker)  # the streamed thinking, masked across its deltas
        self.show_thinking = show_thinking
        self.stream = stream
        self._streamed_text = False

    def note(self, text: str) -> None:
        """A status line on ``err`` (the answer line is ended first)."""
        self.out.end_line()
        self.err.end_line()
        self.err.write(text + "\n")

    def mask(self, secret: Optional[str]) -> None:
        """Mask ``secret`` (another API key: chat's /model switched provider) from now on."""
        self.masker.add(secret)

    def __call__(self, event: Any) -> None:
        kind = event.type
        if kind == "message_start" and getattr(event.message, "role", None) == "assistant":
            self._streamed_text = False
        elif kind == "message_update" and self.stream:
            self._update(event.assistant_message_event)
        elif kind == "message_end" and getattr(event.message, "role", None) == "assistant":
            self._assistant_end(event.message)
        elif kind == "tool_execution_start":
            self.note(f"[tool] {shown_name(event.tool_name)} {one_line(event.args)}")
        elif kind == "tool_execution_end":
            self._tool_end(event)

    def _update(self, inner: Any) -> None:
        kind = getattr(inner, "type", "")
        if kind == "text_delta":
            self.err.end_line()
            self.out.write(inner.delta)
            self._streamed_text = True
        elif kind == "thinking_start" and self.show_thinking:
            self.out.end_line()
            self.err.write("[thinking] ")
        elif kind == "thinking_delta" and self.show_thinking:
            self.err.write(self._thinking.feed(terminal_text(getattr(inner, "delta", "") or "")))
        elif kind == "thinking_end" and self.show_thinking:
            self._end_thinking()

    def _end_thinking(self) -> None:
        """Show what the streamed thinking held back (a possible start of a secret) and end its line."""
        self.err.write(self._thinking.flush())
        self.err.end_line()

    def _assistant_end(self, message: Any) -> None:
        if self._thinking.pending:  # the message ended (an error, an abort) inside its thinking
            self._end_thinking()
        if not self.stream and self.show_thinking:
            self._whole_thinking(message)
        if not self._streamed_text:  # --no-stream, or a provider that did not stream: the whole text now
            self.out.write(_text_of(message.content))
        self.out.end_line()
        reason = getattr(message, "stop_reason", None)
        if reason == "error":
            self.note(f"error: {message.error_message or 'the model request failed'}")
        elif reason == "aborted":
            self.note("[aborted]")

    def _whole_thinking(self, message: Any) -> None:
        for block in getattr(message, "content", None) or ():
            if getattr(block, "type", None) == "thinking" and getattr(block, "thinking", ""):
                self.out.end_line()
                self.err.write("[thinking] " + block.thinking)
                self.err.end_line()

    def _tool_end(self, event: Any) -> None:
        text = _text_of(getattr(event.result, "content", None)).strip("\n")
        lines = text.splitlines()
        status = "error" if event.is_error else "ok"
        shown = "\n".join("    " + line for line in lines[:_RESULT_LINES])
        more = f"\n    ... ({len(lines) - _RESULT_LINES} more lines)" if len(lines) > _RESULT_LINES else ""
        self.note(f"[tool] {shown_name(event.tool_name)} {status}" + (f":\n{shown}{more}" if lines else ""))


class JsonPrinter:
    """One JSON object per event on ``out`` (``agentcore.event_to_dict``), flushed per line, as
    :func:`terminal_json` (the exact values, no raw C1 control or bidirectional override); with
    ``stream`` False (``--no-stream``) the ``message_update`` events are left out."""

    def __init__(self, out: TextIO, *, stream: bool = True) -> None:
        self.out = _Writer(out)
        self.stream = stream

    def __call__(self, event: Any) -> None:
        from ..events import event_to_dict

        if not self.stream and event.type == "message_update":
            return
        self.out.write(terminal_json(_encode_event(event_to_dict(event))) + "\n")


def run_outcome(new_messages: Any) -> int:
    """The exit status of a finished run: 1 when its last assistant message failed, else 0."""
    for message in reversed(list(new_messages or ())):
        if getattr(message, "role", None) == "assistant":
            return 1 if getattr(message, "stop_reason", None) in ("error", "aborted") else 0
    return 0


def abort_when_closed(agent: Any, printer: Any) -> None:
    """Abort ``agent``'s run as soon as ``printer``'s stdout is gone (``agentcore run ... | head``:
    the reader closed the pipe). Output already ends quietly then; without this the model would
    go on streaming, and tools running, for a reader that is no longer there. Subscribe it after
    the printer, so the write that finds the pipe closed comes first. The abort is not reported
    (no ``[aborted]`` note): it is how a pipe ends, as for every command whose reader leaves."""
    writer = printer.out
    aborted = [False]

    def listener(_event: Any) -> None:
        if writer.closed and not aborted[0]:
            aborted[0] = True
            quiet = getattr(printer, "err", None)
            if isinstance(quiet, _Writer):
                quiet.closed = True  # nothing more about this run: its reader is gone
            agent.abort()

    agent.subscribe(listener)

"""Notebook display: messages, tool results and transcripts as HTML/Markdown, and live runs.

* :func:`message_to_markdown`, :func:`message_to_html`, :func:`transcript_to_markdown`,
  :func:`transcript_to_html` render messages (objects or reference dicts). Every piece of message
  text is escaped: a model writing ``<script>`` shows ``<script>``, it never runs.
* :class:`Transcript` (many messages) and :class:`MessageView` (one message or tool result) wrap
  them with ``_repr_html_``/``_repr_markdown_``, so the last expression of a cell renders.
  :func:`enable_rich_display` attaches the same methods to the message classes themselves.
* :func:`display_run` runs a prompt and shows it live: each finished message in an output of its
  own, sent once, and below them one output updated in place
  (``IPython.display.display(..., display_id=True)``) with the streaming answer, tool progress and
  the status, at most once per ``throttle`` seconds (IPython in a terminal prints the final view
  only). A long run so costs each message once plus the redrawn tail, not the whole transcript
  per update. Interrupting the kernel aborts the run cleanly (tools get the abort signal, the
  transcript stays valid), shows that it was interrupted, and re-raises ``KeyboardInterrupt``
  (in a cell with top-level ``await`` too);
  a display that fails aborts the run the same way before its error is re-raised.

No asyncio: the run happens on the agent's run thread and the cell's thread consumes its events.
IPython is imported only by :func:`display_run` when no ``display`` function is given.
"""

from __future__ import annotations

import bisect
import contextvars
import html
import json
import math
import numbers
import queue
import re
import threading
import time
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence

from ._data_urls import image_data_url
from ._many_progress import _in_kernel
from ._safe import describe_exception, json_safe, terminal_text
from ._surrogates import HAS_SURROGATE, fix_surrogates
from ._util import ctrl_c_raises
from .tools import AgentToolResult, to_tool_result
from .types import message_from_dict, text_of

__all__ = [
    "message_to_markdown",
    "message_to_html",
    "transcript_to_markdown",
    "transcript_to_html",
    "tool_result_to_markdown",
    "tool_result_to_html",
    "Transcript",
    "MessageView",
    "display_run",
    "enable_rich_display",
    "disable_rich_display",
]

_ROLE_TITLES = {
    "user": "User",
    "assistant": "Assistant",
    "toolResult": "Tool result",
    "system": "System",
    "bashExecution": "Shell",
    "compactionSummary": "Compaction summary",
    "branchSummary": "Branch summary",
    "custom": "Custom",
}
_COLORS = {
    "user": "#2b6cb0",
    "assistant": "#2f855a",
    "toolResult": "#805ad5",
    "system": "#718096",
    "bashExecution": "#b7791f",
    "error": "#c53030",
}
_COLLAPSE_AFTER_LINES = 20


# --------------------------------------------------------------------------- helpers


def _message(message: Any) -> Any:
    return message_from_dict(message) if isinstance(message, Mapping) else message


def _blocks(content: Any) -> List[Any]:
    if content is None:
        return []
    if isinstance(content, str):
        return [_Text(content)]
    return list(content)


class _Text:
    type = "text"

    def __init__(self, text: str) -> None:
        self.text = text


def _field(block: Any, name: str, key: Optional[str] = None) -> Any:
    if isinstance(block, Mapping):
        return block.get(key or name)
    return getattr(block, name, None)


# Terminal control sequences (colours from git, pytest, ls) and other C0 controls but tab and line
# breaks: HTML shows them as stray characters ("[31mRED[0m"), so they are dropped.
_CONTROLS = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _unicode(text: str) -> str:
    """``text`` as valid Unicode, which a kernel can send (it encodes every message as UTF-8):
    surrogate halves that make a pair (JSON ``\\ud83d\\ude00`` from a provider) are joined, a lone
    one becomes U+FFFD."""
    return fix_surrogates(text, _replacement) if HAS_SURROGATE.search(text) else text


def _replacement(_surrogate: str) -> str:
    return "\ufffd"


def _esc(text: Any) -> str:
    return html.escape(_CONTROLS.sub("", str(text)), quote=True)


# Markdown text is made safe by escaping HTML everywhere except where CommonMark shows text
# literally, and only where any renderer must agree that it does: a fenced block, and code spans
# on one line in a paragraph whose every backtick run pairs up on its own line.
# A fenced block is kept when its opening fence starts a line after 0-3 spaces and, whatever the
# line is in (the document, or a list item whose text starts at most where the fence does), the
# same later line closes it and every line up to there stays in it. So the closing line is the
# first of the fence's character, at least as long, indented at most 3 more than the opening
# fence; it must be indented 0-3 spaces, no less than the opening one; and no line between is
# indented less than the opening fence (it would end a list item, and the block with it).
# Every other line that a fence could start or end at gets a backslash before its fence, so no
# renderer opens or closes a fence there (an unclosed fence would turn what follows, a tool's
# output fence included, inside out). A fence no backslash reaches (after a list marker, or
# indented 4 or more) may open a block in a list item: after one, no indented fence is kept
# (CommonMark ends the item at the next line that is not indented; marked does not).
# Lines are handled in one pass each way: an answer of a megabyte of odd fences or backticks
# renders in linear time (and a log).
_LINE_END = re.compile(r"\r\n?")
_FENCE_LINE = re.compile(r" {0,3}(`{3,}|~{3,})")
_CLOSING_FENCE = re.compile(r"[ \t]*(`{3,}|~{3,})[ \t]*\Z")
_OTHER_FENCE = re.compile(r"[ \t]*(?:(?:[-*+]|[0-9]{1,9}[.)])[ \t]+)*(?:`{3,}|~{3,})")
_BACKTICKS = re.compile(r"`+")


def _indent(line: str) -> int:
    """The column ``line``'s text starts at after its spaces and tabs (CommonMark: a tab goes to
    the next multiple of 4)."""
    return len(line[: len(line) - len(line.lstrip(" \t"))].expandtabs(4))


class _Closers:
    """For each line a fenced block may open on (a fence after 0-3 spaces), the line that closes
    it wherever the line is (see above), if one does."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.end: Dict[int, int] = {}
        # per fence character and deepest indentation: the closing-fence lines below the current
        # one that no nearer line at least as long hides (indexes, and minus their lengths: sorted)
        below: Dict[tuple[str, int], tuple[List[int], List[int]]] = {
            (char, deepest): ([], []) for char in "`~" for deepest in range(3, 7)
        }
        shallower: List[Optional[int]] = [None] * 4  # [n]: the next non-blank line indented less than n
        for index in range(len(lines) - 1, -1, -1):
            line = lines[index]
            text = line.lstrip(" \t")
            if not text:
                continue
            column = len(line[: len(line) - len(text)].expandtabs(4))
            if text[0] in "`~":
                fence = _FENCE_LINE.match(line)
                if fence:
                    run = fence.group(1)
                    indexes, lengths = below[(run[0], column + 3)]
                    at = bisect.bisect_right(lengths, -len(run))  # those at least as long come first
                    end = indexes[at - 1] if at else None
                    stop = shallower[column] if column else None
                    if end is not None and _indent(lines[end]) <= 3 and (stop is None or end < stop):
                        self.end[index] = end
                closing = _CLOSING_FENCE.match(line)
                if closing:
                    run = closing.group(1)
                    for deepest in range(max(3, column), 7):
                        indexes, lengths = below[(run[0], deepest)]
                        while lengths and -lengths[-1] <= len(run):
                            indexes.pop()
                            lengths.pop()
                        indexes.append(index)
                        lengths.append(-len(run))
            for depth in range(min(column, 3) + 1, 4):
                shallower[depth] = index


def _md_text(text: str) -> str:
    """Markdown text (at the start of a line, followed by a line break or the end) with HTML
    neutralised wherever a Markdown renderer would let it through; fenced blocks and code spans
    stay as they are, since Markdown shows them literally (see above for what counts)."""
    lines = _LINE_END.sub("\n", text).split("\n")
    closers = _Closers(lines)
    out: List[Optional[str]] = []
    paragraph: List[str] = []
    in_list_fence = False  # a fence that no backslash reaches may have opened a block in a list item
    index = 0
    while index < len(lines):
        line = lines[index]
        fence = _FENCE_LINE.match(line)
        if fence:
            run = fence.group(1)
            info = line[fence.end() :]
            end = None
            if not (run[0] == "`" and "`" in info) and not (fence.start(1) and in_list_fence):
                end = closers.end.get(index)
            if end is not None:
                out.append(_md_paragraph(paragraph))
                paragraph = []
                out.append("\n".join(lines[index : end + 1]))
                index = end + 1
                continue
            line = line[: fence.start(1)] + "\\" + line[fence.start(1) :]  # no fence starts or ends here
        elif _OTHER_FENCE.match(line):
            in_list_fence = True
        if line.strip(" \t"):
            paragraph.append(line)
        else:
            out.append(_md_paragraph(paragraph))
            paragraph = []
            out.append(line)
        index += 1
    out.append(_md_paragraph(paragraph))
    return "\n".join(part for part in out if part is not None)


_LEADING_TABS = re.compile(r"^[ \t]*\t", re.MULTILINE)


def _tabs_expanded(text: str) -> str:
    """``text`` with the tabs before each line's text made spaces (to the next multiple of 4). In
    a block quote ("> " before each line) a tab reaches the next multiple of 4 from 2 columns
    further on, so it indents the line less than the same line on its own: a line that is no
    closing fence in the text would close a fence in the quote, and what follows show as HTML."""
    return _LEADING_TABS.sub(lambda m: m.group().expandtabs(4), _LINE_END.sub("\n", text))


def _md_paragraph(lines: Sequence[str]) -> Optional[str]:
    """Lines of one paragraph, HTML escaped outside code spans. Its spans are kept only when every
    backtick run in it opens or closes one on its own line (CommonMark pairs a run with the next
    run of the same length, also on a later line): then any renderer finds the same spans."""
    if not lines:
        return None
    text = "\n".join(lines)
    spans = _code_spans(text)
    if spans is None:
        return _md_escape(text)
    out: List[str] = []
    position = 0
    for start, end in spans:
        out.append(_md_escape(text[position:start]))
        out.append(text[start:end])
        position = end
    out.append(_md_escape(text[position:]))
    return "".join(out)


# A link's address that runs script when clicked ("[docs](javascript:...)", or ``javascript\:``,
# which a renderer unescapes): a zero-width space after its "java" or "vb" makes it a relative
# address, and shows the same.
_SCRIPT_SCHEME = re.compile(r"(?i)(java|vb)(script\\?:)")


def _md_escape(text: str) -> str:
    """Markdown text outside code with its HTML escaped and no link to a script address; as it
    is while the plain text is rendered (see :func:`_plain_text`)."""
    if _PLAIN.get():
        return text
    return _SCRIPT_SCHEME.sub("\\1\u200b\\2", html.escape(text, quote=False))


#: True while :func:`_plain_text` renders: the Markdown's text is then left unescaped
_PLAIN: contextvars.ContextVar[bool] = contextvars.ContextVar("agentcore_jupyter_plain", default=False)


def _plain_text(render: Callable[[], str]) -> str:
    """What ``render`` (a Markdown rendering) returns with its text left as written: the plain
    text a terminal shows. Unescaping the Markdown instead also unescaped what it shows
    literally, so a tool's output ``&lt;p&gt; &amp;`` (an HTML file) was printed as ``<p> &``."""
    token = _PLAIN.set(True)
    try:
        return render()
    finally:
        _PLAIN.reset(token)


def _code_spans(text: str) -> Optional[List[tuple[int, int]]]:
    """The code spans of ``text`` (start, end), or None unless every backtick run pairs with the
    next run of its length on the same line, not opened after a backslash, with no ``|`` inside
    (a table cell would end there)."""
    runs = [(m.start(), m.end()) for m in _BACKTICKS.finditer(text)]
    following: List[Optional[int]] = [None] * len(runs)
    last: Dict[int, int] = {}
    for i in range(len(runs) - 1, -1, -1):
        length = runs[i][1] - runs[i][0]
        following[i] = last.get(length)
        last[length] = i
    spans = []
    i = 0
    while i < len(runs):
        start = runs[i][0]
        closing = following[i]
        if closing is None or (start > 0 and text[start - 1] == "\\"):
            return None
        end = runs[closing][1]
        if "\n" in text[start:end] or "|" in text[start:end]:
            return None
        spans.append((start, end))
        i = closing + 1
    return spans


def _md_inline(text: Any) -> str:
    """Text inside a line of Markdown (a name, an error, the status), with Markdown around it on
    the same line: its line breaks become spaces (no fence or block can start in it) and all of
    its HTML is escaped."""
    return _md_escape(" ".join(_LINE_END.sub("\n", str(text)).split("\n")))


def _fence(body: str, lang: str = "") -> str:
    """A fenced code block whose fence is longer than any backtick run inside (so it cannot end early)."""
    longest = max((len(m) for m in re.findall(r"`+", body)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{body}\n{ticks}"


def _json(value: Any) -> str:
    """Indented JSON of ``value`` in its JSON-safe form (never raises, whatever it holds)."""
    return json.dumps(json_safe(value), indent=2, ensure_ascii=False)


def _img_html(block: Any) -> str:
    # only an allow-listed image type with valid base64 becomes a URL (no SVG, no text/html)
    url, kind = image_data_url(_field(block, "mime_type", "mimeType") or "image/png", _field(block, "data"))
    if url is None:
        return f'<div style="color: #718096"><i>[image not shown: {_esc(kind)}]</i></div>'
    return f'<img src="{_esc(url)}" style="max-width: 100%"/>'


_MIME = re.compile(r"[\w.+-]+/[\w.+-]+\Z")
_NOT_BASE64 = re.compile(r"[^A-Za-z0-9+/=_-]")


def _image_parts(block: Any) -> tuple[str, str]:
    """An image's mime type and base64 data, safe to put in a Markdown link (no HTML, no ``)``)."""
    mime = str(_field(block, "mime_type", "mimeType") or "")
    data = str(_field(block, "data") or "")
    return (mime if _MIME.match(mime) else "application/octet-stream"), _NOT_BASE64.sub("", data)


def _pre(text: str) -> str:
    body = f'<pre style="white-space: pre-wrap; margin: 0.2em 0">{_esc(text)}</pre>'
    lines = text.count("\n") + 1
    if lines <= _COLLAPSE_AFTER_LINES:
        return body
    return f"<details><summary>{lines} lines</summary>{body}</details>"


# --------------------------------------------------------------------------- Markdown


def _clipped(text: Any, clip: Optional[Callable[[str], str]]) -> str:
    text = str(text or "")
    return clip(text) if clip else text


def _content_markdown(content: Any, clip: Optional[Callable[[str], str]] = None) -> List[str]:
    """The Markdown of each block (parts to join with blank lines). Text blocks next to each other
    are made safe as one text: the Markdown has them one after the other, so a list item (and a
    fenced block in it) that one leaves open goes on in the next."""
    parts: List[str] = []
    texts: List[str] = []
    for block in _blocks(content):
        kind = _field(block, "type")
        if kind == "text":
            texts.append(str(_field(block, "text") or ""))
            continue
        part = _block_markdown(block, kind, clip)
        if part is not None:
            if texts:
                parts.append(_md_text("\n\n".join(texts)))
                texts = []
            parts.append(part)
    if texts:
        parts.append(_md_text("\n\n".join(texts)))
    return parts


def _block_markdown(block: Any, kind: Any, clip: Optional[Callable[[str], str]]) -> Optional[str]:
    """A block other than text as Markdown, each starting a line of its own at the start of the
    line (so it ends any list item before it); None for a kind not shown."""
    if kind == "thinking":
        thought = _clipped(_field(block, "thinking"), clip)
        return "> *thinking:*\n> " + _md_text(_tabs_expanded(thought)).replace("\n", "\n> ")
    if kind == "image":
        mime, data = _image_parts(block)
        return f"![image](data:{mime};base64,{data})"
    if kind == "toolCall":
        arguments = _json(_field(block, "arguments") or {})
        return f"**→ {_md_inline(_field(block, 'name'))}**\n\n" + _fence(clip(arguments) if clip else arguments, "json")
    return None


def message_to_markdown(message: Any) -> str:
    """One message as Markdown: a bold role title, then its content (HTML in text is escaped)."""
    return _unicode(_message_markdown(message))


def _message_markdown(message: Any, clip: Optional[Callable[[str], str]] = None) -> str:
    """``message_to_markdown``; ``clip`` shortens tool-call arguments (a message still streaming)."""
    message = _message(message)
    role = getattr(message, "role", None) or "message"
    title = _md_inline(_ROLE_TITLES.get(role, role))  # an unknown role (a newer session's) is as written
    if role == "toolResult":
        status = " (error)" if getattr(message, "is_error", False) else ""
        head = f"**{title}: {_md_inline(message.tool_name)}{status}**"
        body = [_fence(text_of(message.content))] + [
            p for p in _content_markdown([b for b in message.content if _field(b, "type") == "image"])
        ]
        return "\n\n".join([head] + body)
    if role == "bashExecution":
        return f"**{title}**\n\n" + _fence(f"$ {message.command}\n{message.output}")
    if role in ("compactionSummary", "branchSummary"):
        return f"**{title}**\n\n{_md_text(_clipped(message.summary, None))}"  # null in a session: none
    parts = [f"**{title}**"] + _content_markdown(getattr(message, "content", None), clip)
    error = getattr(message, "error_message", None)
    if error:
        parts.append(f"**Error ({_md_inline(message.stop_reason)}):** {_md_inline(error)}")
    return "\n\n".join(parts)


def transcript_to_markdown(messages: Iterable[Any]) -> str:
    """Messages as Markdown sections separated by horizontal rules."""
    return "\n\n---\n\n".join(message_to_markdown(m) for m in messages)


def tool_result_to_markdown(result: AgentToolResult, name: str = "tool") -> str:
    """An :class:`AgentToolResult` (e.g. a partial result) as Markdown."""
    return _unicode(f"**{_md_inline(name)}**\n\n" + _fence(text_of(result.content)))


# --------------------------------------------------------------------------- HTML


def _content_html(content: Any, clip: Optional[Callable[[str], str]] = None) -> List[str]:
    """With ``clip`` (a message still streaming): thinking expanded and, as tool-call arguments,
    clipped to its end (it is sent again with every drawing)."""
    parts: List[str] = []
    details = "<details open>" if clip else "<details>"
    for block in _blocks(content):
        kind = _field(block, "type")
        if kind == "text":
            parts.append(f'<div style="white-space: pre-wrap">{_esc(_field(block, "text") or "")}</div>')
        elif kind == "thinking":
            parts.append(
                f"{details}<summary><i>thinking</i></summary>"
                f'<div style="white-space: pre-wrap; color: #718096">{_esc(_clipped(_field(block, "thinking"), clip))}'
                "</div></details>"
            )
        elif kind == "image":
            parts.append(_img_html(block))
        elif kind == "toolCall":
            arguments = _json(_field(block, "arguments") or {})
            parts.append(
                f"<div><b>→ {_esc(_field(block, 'name'))}</b>{_pre(clip(arguments) if clip else arguments)}</div>"
            )
    return parts


def _box(role: str, title: str, body: Sequence[str], error: bool = False) -> str:
    color = _COLORS["error"] if error else _COLORS.get(role, "#4a5568")
    return (
        f'<div class="agentcore-message agentcore-{_esc(role)}" style="border-left: 3px solid {color}; '
        f'padding: 0.3em 0.8em; margin: 0.4em 0">'
        f'<div style="color: {color}; font-weight: bold">{title}</div>{"".join(body)}</div>'
    )


def message_to_html(message: Any) -> str:
    """One message as an HTML block (a coloured left border per role); all text is escaped."""
    return _unicode(_message_html(message))


def _message_html(message: Any, clip: Optional[Callable[[str], str]] = None) -> str:
    """``message_to_html``; with ``clip``, as a message still streaming (see ``_content_html``)."""
    message = _message(message)
    role = getattr(message, "role", None) or "message"
    title = _esc(_ROLE_TITLES.get(role, role))
    if role == "toolResult":
        error = bool(getattr(message, "is_error", False))
        head = f"{title}: {_esc(message.tool_name)}" + (" (error)" if error else "")
        images = [_img_html(b) for b in message.content if _field(b, "type") == "image"]
        return _box(role, head, [_pre(text_of(message.content))] + images, error)
    if role == "bashExecution":
        return _box(role, title, [_pre(f"$ {message.command}\n{message.output}")])
    if role in ("compactionSummary", "branchSummary"):
        return _box(role, title, [f'<div style="white-space: pre-wrap">{_esc(_clipped(message.summary, None))}</div>'])
    body = _content_html(getattr(message, "content", None), clip)
    error_text = getattr(message, "error_message", None)
    if error_text:
        body.append(
            f'<div style="color: {_COLORS["error"]}"><b>Error ({_esc(message.stop_reason)}):</b> '
            f"{_esc(error_text)}</div>"
        )
    return _box(role, title, body, bool(error_text))


def transcript_to_html(messages: Iterable[Any]) -> str:
    """Messages as one HTML fragment."""
    return '<div class="agentcore-transcript">' + "".join(message_to_html(m) for m in messages) + "</div>"


def tool_result_to_html(result: AgentToolResult, name: str = "tool", error: bool = False) -> str:
    """An :class:`AgentToolResult` (e.g. a partial result) as an HTML block."""
    images = [_img_html(b) for b in result.content if _field(b, "type") == "image"]
    return _unicode(
        _box("toolResult", _esc(name) + (" (error)" if error else ""), [_pre(text_of(result.content))] + images, error)
    )


# --------------------------------------------------------------------------- wrappers


class Transcript:
    """Display wrapper for a list of messages: ``Transcript(agent.state.messages)`` in a cell."""

    def __init__(self, messages: Iterable[Any]) -> None:
        self.messages = list(messages)

    def _repr_html_(self) -> str:
        return transcript_to_html(self.messages)

    def _repr_markdown_(self) -> str:
        return transcript_to_markdown(self.messages)

    def __repr__(self) -> str:
        return f"Transcript({len(self.messages)} messages)"


class MessageView:
    """Display wrapper for one message or one :class:`AgentToolResult`."""

    def __init__(self, item: Any, name: str = "tool") -> None:
        self.item = item
        self.name = name

    def _repr_html_(self) -> str:
        if isinstance(self.item, AgentToolResult):
            return tool_result_to_html(self.item, self.name)
        return message_to_html(self.item)

    def _repr_markdown_(self) -> str:
        if isinstance(self.item, AgentToolResult):
            return tool_result_to_markdown(self.item, self.name)
        return message_to_markdown(self.item)


_RICH_CLASSES = (
    "UserMessage",
    "AssistantMessage",
    "ToolResultMessage",
    "SystemMessage",
    "BashExecutionMessage",
    "CompactionSummaryMessage",
    "BranchSummaryMessage",
    "CustomMessage",
)


def enable_rich_display() -> None:
    """Give the message classes ``_repr_html_``/``_repr_markdown_`` (so a bare message renders).

    Idempotent; undo with :func:`disable_rich_display`. The wrappers need no such global change.
    """
    from . import types

    for name in _RICH_CLASSES:
        cls = getattr(types, name)
        cls._repr_html_ = message_to_html
        cls._repr_markdown_ = message_to_markdown
    AgentToolResult._repr_html_ = lambda self: tool_result_to_html(self)  # type: ignore[attr-defined]
    AgentToolResult._repr_markdown_ = lambda self: tool_result_to_markdown(self)  # type: ignore[attr-defined]


def disable_rich_display() -> None:
    """Remove what :func:`enable_rich_display` attached."""
    from . import types

    for cls in [getattr(types, n) for n in _RICH_CLASSES] + [AgentToolResult]:
        for attr in ("_repr_html_", "_repr_markdown_"):
            if attr in cls.__dict__:
                delattr(cls, attr)


# --------------------------------------------------------------------------- live runs


class _ToolProgress:
    def __init__(self, name: str, args: Any) -> None:
        self.name = name
        self.args = args
        self.status = "running"
        self.text = ""


def _partial_text(partial: Any) -> str:
    """The text of a tool's partial result: an :class:`AgentToolResult`, or what a ``@tool``
    function may return (``on_update("50%")`` passes a string through as it is)."""
    if isinstance(partial, AgentToolResult):
        return text_of(partial.content)
    if isinstance(partial, str):
        return partial
    try:
        return text_of(to_tool_result(partial).content)
    except Exception:  # noqa: BLE001 - progress that cannot be shown is not shown
        return ""


class LiveRun:
    """What :func:`display_run` shows, rebuilt from agent events: the run's finished messages,
    then its *tail*, everything that still changes: the assistant message being streamed, tools
    still in progress (with the tail of their partial output), tool calls waiting for approval
    (with what to call to decide them) and a status (``running``, ``done``, ``waiting for
    approval: ...``, ``interrupted`` or ``failed: ...``). A finished message never changes again,
    so a live display sends it once and redraws only the tail."""

    tail_lines = 15  # what the tail shows of a running tool's output or a streaming tool call's
    tail_chars = 2000  # arguments: it is sent again with every drawing

    def __init__(self) -> None:
        self.messages: List[Any] = []
        self.streaming: Any = None
        self.tools: Dict[str, _ToolProgress] = {}
        self.approvals: Dict[str, _ToolProgress] = {}  # tool_call_id -> the call waiting for approval
        self.status = "running"

    def apply(self, event: Any) -> None:
        """Fold one agent event into the view."""
        kind = event.type
        if kind in ("message_start", "message_update") and getattr(event.message, "role", None) == "assistant":
            self.streaming = event.message
        elif kind == "message_end":
            self.messages.append(event.message)
            if getattr(event.message, "role", None) == "assistant":
                self.streaming = None
            elif getattr(event.message, "role", None) == "toolResult":
                self.tools.pop(event.message.tool_call_id, None)
        elif kind == "tool_approval_request":
            self.approvals[event.tool_call_id] = _ToolProgress(event.tool_name, event.args)
        elif kind == "tool_execution_start":
            self.tools[event.tool_call_id] = _ToolProgress(event.tool_name, event.args)
        elif kind == "tool_execution_update" and event.tool_call_id in self.tools:
            self.tools[event.tool_call_id].text = _partial_text(event.partial_result)
        elif kind == "tool_execution_end" and event.tool_call_id in self.tools:
            progress = self.tools[event.tool_call_id]
            progress.status = "error" if event.is_error else "done"
            progress.text = text_of(event.result.content)
        elif kind == "agent_end":
            self.streaming = None
            self.status = "done"
            if self.approvals:
                self.status = (
                    f"waiting for approval: {len(self.approvals)} tool call(s); "
                    "agent.approve(id) or agent.deny(id, reason) each, then agent.continue_()"
                )

    def interrupt(self, transcript: Sequence[Any], waiting: Iterable[str] = ()) -> None:
        """End the view of a run aborted before all its events were read: nothing streams or
        runs any more, only the calls of ``waiting`` (the ids the agent has pending) still wait
        for approval (the abort abandoned the others: approving one fails), and the messages of
        ``transcript`` (the run's messages in the agent) whose ``message_end`` was not read, the
        aborted partial answer among them, are added."""
        self.status = "interrupted: run aborted"
        self.streaming = None
        self.tools.clear()  # their tool_execution_end events were not read: nothing runs any more
        waiting = set(waiting)
        self.approvals = {call_id: call for call_id, call in self.approvals.items() if call_id in waiting}
        known = {id(message) for message in self.messages}  # perhaps shown already: kept as they are
        self.messages.extend(message for message in transcript if id(message) not in known)

    def _tail(self, text: str) -> str:
        lines = text.splitlines()
        if len(lines) > self.tail_lines:
            text = f"... ({len(lines) - self.tail_lines} lines above)\n" + "\n".join(lines[-self.tail_lines :])
        if len(text) > self.tail_chars:
            text = f"... ({len(text) - self.tail_chars} characters above)\n" + text[-self.tail_chars :]
        return text

    def _tail_html(self) -> List[str]:
        parts = []
        if self.streaming is not None:  # thinking open, so it can be followed (closed once finished)
            parts.append(_message_html(self.streaming, clip=self._tail))
        for progress in self.tools.values():
            title = f"{_esc(progress.name)} ({_esc(progress.status)})"
            parts.append(
                _box(
                    "toolResult",
                    title,
                    [_pre(self._tail(progress.text))] if progress.text else [],
                    progress.status == "error",
                )
            )
        for call_id, waiting in self.approvals.items():
            title = f"{_esc(waiting.name)} (waiting for approval: id {_esc(call_id)})"
            parts.append(_box("toolResult", title, [_pre(_json(waiting.args))]))
        color = "#718096" if self.status in ("done", "running") or self.approvals else _COLORS["error"]
        parts.append(
            f'<div class="agentcore-status" style="color: {color}; font-size: 0.85em">{_esc(self.status)}</div>'
        )
        return parts

    def _tail_markdown(self) -> List[str]:
        parts = []
        if self.streaming is not None:
            parts.append(_message_markdown(self.streaming, clip=self._tail))
        for progress in self.tools.values():
            parts.append(f"**{_md_inline(progress.name)} ({progress.status})**\n\n" + _fence(self._tail(progress.text)))
        for call_id, waiting in self.approvals.items():
            parts.append(
                f"**{_md_inline(waiting.name)} (waiting for approval: id {_md_inline(call_id)})**\n\n"
                + _fence(_json(waiting.args), "json")
            )
        parts.append(f"*{_md_inline(self.status)}*")
        return parts

    def html(self) -> str:
        """The whole view as HTML: the finished messages, then the tail."""
        parts = [message_to_html(m) for m in self.messages] + self._tail_html()
        return '<div class="agentcore-transcript">' + "".join(parts) + "</div>"

    def markdown(self) -> str:
        """The whole view as Markdown."""
        return "\n\n---\n\n".join([message_to_markdown(m) for m in self.messages] + self._tail_markdown())

    def snapshot(self) -> _Snapshot:
        """The whole view, frozen."""
        return _Snapshot(self.html(), self.markdown(), _plain_text(self.markdown))

    def tail_snapshot(self) -> _Snapshot:
        """The tail alone, frozen."""
        html_text = '<div class="agentcore-transcript">' + "".join(self._tail_html()) + "</div>"
        return _Snapshot(
            html_text,
            "\n\n---\n\n".join(self._tail_markdown()),
            _plain_text(lambda: "\n\n---\n\n".join(self._tail_markdown())),
        )


class _Snapshot:
    """A frozen rendering handed to ``display``/``update`` (the live view keeps changing)."""

    def __init__(self, html_text: str, markdown_text: str, plain_text: str) -> None:
        self._html = _unicode(html_text)
        self._markdown = _unicode(markdown_text)
        self._plain = terminal_text(_unicode(plain_text))

    @property
    def size(self) -> int:
        """Characters a front end receives for it (HTML and Markdown; the plain text is about
        the Markdown's size again)."""
        return len(self._html) + 2 * len(self._markdown)

    def _repr_html_(self) -> str:
        return self._html

    def _repr_markdown_(self) -> str:
        return self._markdown

    def __repr__(self) -> str:  # plain-text front ends (IPython in a terminal, text/plain)
        return self._plain


_BLANK = _Snapshot("", "", "")


def _finished(message: Any) -> _Snapshot:
    """A finished message as its own output shows it."""
    return _Snapshot(
        transcript_to_html([message]), message_to_markdown(message), _plain_text(lambda: message_to_markdown(message))
    )


class _LiveOutput:
    """Where :func:`display_run` draws a :class:`LiveRun`: one output per finished message, and
    below them the tail, the only output updated in place. A drawing first moves each message
    finished since the last one into the output the tail was in (sent once, never updated again;
    the tail then goes to a new output below), then redraws the tail. So what a drawing sends is
    the new messages and the tail, not the whole run again.

    With ``at_end`` (IPython in a terminal, which prints every update, or a ``display`` returning
    no handle) nothing is drawn until ``close``, which shows the whole final view once."""

    def __init__(self, show: Callable[..., Any], live: LiveRun, at_end: bool) -> None:
        self._show = show
        self._live = live
        self._at_end = at_end
        self._current: Any = None  # the handle of the output to draw in next; None: not created yet
        self._sent = 0  # how many of live.messages have their own output

    def draw(self) -> int:
        """Send what changed; returns how many characters of the tail it redrew (HTML and
        Markdown): what the next drawing sends again. Finished messages, sent once, are not
        counted."""
        messages = self._live.messages
        while self._sent < len(messages) and self._open():
            self._current.update(_finished(messages[self._sent]))
            self._sent += 1
            self._current = None  # that output is finished: the next one goes below it
        if not self._open():
            return 0
        tail = self._live.tail_snapshot()
        self._current.update(tail)
        return tail.size

    def _open(self) -> bool:
        """Open an output to draw in unless one is open (False: draw at the end only). It is
        created empty and then filled: an interrupt landing inside ``display`` leaves at most an
        empty output behind, never one drawn once and then forgotten (a tool shown running for
        ever). An interrupt inside ``update`` is repaired by the next drawing, which redoes it."""
        if self._current is None and not self._at_end:
            self._current = self._show(_BLANK, display_id=True)
            self._at_end = self._current is None  # a display that prints instead of returning a handle
        return not self._at_end

    def close(self) -> None:
        if self._at_end:
            self._show(self._live.snapshot())


def _ipython_display() -> Callable[..., Any]:
    """``IPython.display.display``; ImportError (saying what to install) without IPython, raised
    before the run starts rather than after it has run unseen."""
    try:
        from IPython.display import display
    except ImportError:
        raise ImportError("display_run needs IPython (pip install ipython), or pass display=") from None
    return display


_POLL = 0.05  # how long the cell's thread waits for an event at a time, so Ctrl+C is noticed
#: characters a live view redraws per second at most: a drawing whose tail (what is redrawn in
#: place) is N characters waits ``N / _DRAW_BUDGET`` seconds before the next when that is longer
#: than the throttle, so a long answer streamed for minutes is redrawn less often instead of
#: sending its growing text ten times a second. Finished messages do not count: each is sent
#: once, so a large tool result must not hold back the drawings after it
_DRAW_BUDGET = 200_000
_END = object()


class _Failed:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def _forward(events: Iterable[Any], inbox: queue.Queue[Any]) -> None:
    """Helper thread: move the run's events into ``inbox``, then its outcome (``_END`` or why not)."""
    try:
        for event in events:
            inbox.put(event)
    except BaseException as exc:
        inbox.put(_Failed(exc))
    else:
        inbox.put(_END)


def _run_error(messages: Sequence[Any]) -> Optional[str]:
    """A run's error, read from its own messages as ``agent.state.error_message`` has it when the
    run ends: the latest assistant message's that carries one."""
    for message in reversed(messages):
        if getattr(message, "role", None) == "assistant" and getattr(message, "error_message", None):
            return str(message.error_message)
    return None


def _follow(events: Iterable[Any], live: LiveRun, draw: Callable[[], int], throttle: float) -> None:
    """Apply the run's events to ``live`` and ``draw`` it at most once per ``throttle`` seconds
    (longer after a large tail: see ``_DRAW_BUDGET``; ``draw`` returns the characters of the tail
    it redrew), with a trailing edge: a change not yet drawn is drawn that long after the last drawing
    even when no event follows (a long tool call stays shown as running). The run's iterator
    cannot wait with a timeout, so a helper thread feeds a queue; the interrupt still lands on
    this thread."""
    inbox: queue.Queue[Any] = queue.Queue()
    threading.Thread(target=_forward, args=(events, inbox), name="agentcore-display", daemon=True).start()
    last = time.monotonic()
    interval = throttle
    pending = False
    while True:
        wait = max(0.0, last + interval - time.monotonic()) if pending else _POLL
        try:
            item = inbox.get(timeout=min(wait, _POLL))
        except queue.Empty:
            item = None
        if item is _END:
            return
        if isinstance(item, _Failed):
            raise item.exc
        if item is not None:
            live.apply(item)
            pending = True
        now = time.monotonic()
        if pending and now - last >= interval:
            sent = draw() or 0
            interval = max(throttle, sent / _DRAW_BUDGET) if throttle > 0 else 0.0  # 0: every event
            last = now
            pending = False


def _seconds(throttle: Any) -> float:
    """``display_run``'s ``throttle``, checked before the run starts: TypeError or ValueError
    naming it for anything but a number of seconds >= 0 (a wrong one failed only once the run
    was under way, aborting it; NaN never drew until the end)."""
    if isinstance(throttle, bool) or not isinstance(throttle, numbers.Real):
        raise TypeError(
            f"display_run: throttle must be a number of seconds (0: draw every event), not {type(throttle).__name__}"
        )
    seconds = float(throttle)
    if math.isnan(seconds) or seconds < 0:
        raise ValueError(f"display_run: throttle must be a number of seconds >= 0 (0: draw every event), not {seconds}")
    return seconds


def _waiting(agent: Any) -> List[str]:
    """The ids of the calls that ``agent`` has waiting for approval."""
    return [pending.tool_call_id for pending in getattr(agent, "pending_approvals", ())]


class _RunMessages(list):  # type: ignore[type-arg]
    """The run's new messages: a plain list, except that as the last expression of a cell it shows
    nothing (the live display above already shows them; echoing the list repeats every message)."""

    def _ipython_display_(self) -> None:
        return None


def display_run(
    agent: Any,
    prompt: Any,
    *,
    images: Optional[Sequence[Any]] = None,
    display: Optional[Callable[..., Any]] = None,
    throttle: float = 0.1,
) -> List[Any]:
    """Run ``prompt`` on ``agent`` and show it live: each finished message in an output of its
    own, sent once, and below them one output updated in place with what still changes (the
    message being streamed, running tools, the status).

    ``display(obj, display_id=True)`` must return a handle with ``update(obj)``; it defaults to
    ``IPython.display.display`` (without IPython: ImportError, before the run starts); outside a
    kernel (IPython in a terminal, which would print every update) only the final view is shown,
    as plain text without a model's or a tool's terminal control sequences. Draws at most once
    per ``throttle`` seconds, a change not yet drawn ``throttle`` after the last drawing even when
    no event follows (a long tool stays shown as running), and once more at the end (a
    ``throttle`` that is no number of seconds >= 0 raises TypeError or ValueError before the run
    starts). The thinking of the message still
    streaming is drawn expanded, finished messages' collapsed; a running tool's output and a
    streaming tool call's arguments are drawn as their last lines. Returns the run's new messages
    (like ``agent.prompt``) as a list that IPython does not echo as a cell's last expression
    (``list(...)`` of it, or ``agent.messages``, shows them).
    ``KeyboardInterrupt`` (interrupting the kernel) aborts the run, waits for it to settle,
    shows "interrupted" and re-raises, also in a cell with top-level ``await`` (whose interrupt
    ipykernel otherwise only delivers once the cell awaits again: after the run; its handler is
    back when ``display_run`` returns); any other failure (the run's own, or the display's: a
    ``display`` or handle that raised) likewise aborts the run if it still runs, waits for it to
    settle, shows "failed: ..." (if the display still can) and re-raises, so the agent is never
    left busy with a run nobody sees. A tool's progress that is not an ``AgentToolResult`` (a
    string passed to ``on_update``) is shown as its text.
    """
    throttle = _seconds(throttle)
    show = display or _ipython_display()
    live = LiveRun()
    output = _LiveOutput(show, live, at_end=display is None and not _in_kernel())
    with ctrl_c_raises():  # in a cell with top-level await too
        # Start the run right before following it: a busy agent or bad input raises before any
        # output, and an interrupt landing once the run has started aborts it.
        _show_run(agent, agent.stream(prompt, images), live, output, throttle)
    return _RunMessages(live.messages)


def _show_run(agent: Any, events: Any, live: LiveRun, output: _LiveOutput, throttle: float) -> None:
    """``display_run`` once its run has started (``events``): follow and draw it to its end."""
    try:
        output.draw()  # inside the try: the run has started, and an interrupt from now on aborts it
        _follow(events, live, output.draw, throttle)
    except KeyboardInterrupt:
        # The interrupt may land here rather than inside the event iterator (which would have
        # aborted already): abort and wait in any case; both are no-ops for a settled run. This
        # run's, never the agent's next one (another thread may have started it meanwhile).
        from .agent import _abort_and_settle

        run = events._run
        _abort_and_settle(run)
        live.interrupt(run.result, _waiting(agent))  # its new messages, incl. the aborted partial answer
        output.draw()
        raise
    except BaseException as exc:
        # The run's own failure (it has settled), or the display's (a front end that failed, an
        # event it cannot show): the run must not go on unseen, with the agent busy and its tools
        # running, after the cell has failed; nor may a failing display hide why.
        from .agent import _abort_and_settle

        run = events._run
        _abort_and_settle(run, f"the live display failed: {describe_exception(exc)}")
        live.interrupt(run.result, _waiting(agent))
        live.status = f"failed: {describe_exception(exc)}"
        try:
            output.draw()
        except Exception:  # noqa: BLE001 - the display is what failed: the first error is the one to see
            pass
        raise
    else:
        error = _run_error(live.messages)  # this run's: the agent may be running another one already
        if error:
            live.status = f"failed: {error}"
        output.draw()
    finally:
        output.close()

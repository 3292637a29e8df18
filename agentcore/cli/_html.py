"""``agentcore sessions export --format html``: a whole session tree as one standalone page.

:func:`session_to_html` renders every entry of every branch (not only the current one): a run of
entries without forks reads top to bottom; at a fork each child branch is a ``<details>`` (open when
it holds the current leaf, closed otherwise), so every fork is visible and each branch expands on a
click, with or without script. Tool calls, tool results and thinking are collapsed ``<details>``;
assistant messages carry their model, stop reason, tokens and cost; the head has the totals.

The page is safe to open and to share:

* every piece of session data goes through :func:`html.escape` (``quote=True``), in text and in
  attributes alike; text is shown as written (Markdown is not rendered, so a link in a message is
  text, never a clickable ``javascript:`` URL);
* no session text ever lands in a URL, except images: a ``data:`` URL is written only for the
  mime types ``image/png``, ``image/jpeg``, ``image/gif`` and ``image/webp`` with data that is
  valid base64, anything else becomes a placeholder saying why;
* the one JSON block the script reads is escaped against ``</script>``, ``<!--`` and U+2028/2029;
* a Content-Security-Policy ``<meta>`` allows nothing but ``data:`` images and the page's own
  style sheet and script, by hash (:mod:`._html_assets`): no network, no other script, even if a
  future change forgot to escape something;
* element ids are the renderer's own counters (``e-1``, ``e-2``...), never entry ids from the file.

Rendering is iterative (an explicit stack), so neither a 100k-entry chain nor deeply nested forks
hit Python's recursion limit; the page nests one level per fork, not per entry. A JSON value (tool
arguments, details, custom data) nested more than 200 levels deep shows as ``<nested too deeply>``.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

from .._data_urls import IMAGE_TYPES, image_data_url
from .._safe import exception_message, json_safe
from ._html_assets import SCRIPT, SCRIPT_HASH, STYLE, STYLE_HASH
from ._usage import ModelUsage, UsageTally

__all__ = ["session_to_html", "IMAGE_TYPES", "CSP"]

#: The page's Content-Security-Policy: its own style sheet and script (by hash) and data: images.
CSP = (
    f"default-src 'none'; img-src data:; style-src {STYLE_HASH}; script-src {SCRIPT_HASH}; "
    "base-uri 'none'; form-action 'none'"
)

_WHITESPACE = re.compile(r"\s+")
_ISO = re.compile(r"(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)(?:\.\d+)?(Z|[+-]\d\d:\d\d)?\Z")
_PREVIEW = 90
_PREVIEW_SCAN = 50
_ROLE_TITLES = {
    "user": "User",
    "assistant": "Assistant",
    "toolResult": "Tool result",
    "system": "System",
    "developer": "Developer",
    "bashExecution": "Shell",
    "compactionSummary": "Compaction summary",
    "branchSummary": "Branch summary",
    "custom": "Custom message",
}


def _esc(value: Any) -> str:
    """Text or attribute value, escaped (``& < > " '``)."""
    return html.escape(str(value), quote=True)


def _json_text(value: Any, indent: Optional[int] = 2) -> str:
    """JSON of any value (its JSON-safe form, so it never raises: a value nested past 200 levels,
    which another writer's file may hold, shows as ``"<nested too deeply>"``), not yet escaped."""
    return json.dumps(json_safe(value), indent=indent, ensure_ascii=False)


def _script_json(value: Any) -> str:
    """JSON for a ``<script type="application/json">`` block: nothing in it can end the element or
    open a comment (``<``, ``>``, ``&`` as ``\\u`` escapes), and U+2028/2029 are escaped too."""
    text = json.dumps(json_safe(value), ensure_ascii=False, separators=(",", ":"))
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, escaped)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _when(timestamp: Any) -> str:
    """A ``<time>`` element: ISO timestamps read as ``2025-01-01 12:00:00 UTC``, others as given."""
    raw = str(timestamp or "")
    match = _ISO.match(raw)
    shown = raw
    if match:
        zone = match.group(3)
        shown = f"{match.group(1)} {match.group(2)}" + (" UTC" if zone in (None, "Z") else f" {zone}")
    return f'<time datetime="{_esc(raw)}">{_esc(shown)}</time>'


def _preview(text: str, limit: int = _PREVIEW) -> str:
    head = text[: limit * 8]  # a long tool output is not flattened whole for a 90-character preview
    flat = _WHITESPACE.sub(" ", head).strip()
    if len(flat) > limit or len(head) < len(text):
        return flat[: limit - 1].rstrip() + "\u2026"
    return flat


def _field(block: Any, name: str, key: Optional[str] = None) -> Any:
    if isinstance(block, dict):
        return block.get(key or name)
    return getattr(block, name, None)


def _blocks(content: Any) -> List[Any]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, (list, tuple)):
        return list(content)
    return [{"type": "text", "text": str(content)}]


def _plain_text(content: Any) -> str:
    return "".join(str(_field(b, "text") or "") for b in _blocks(content) if _field(b, "type") == "text")


# --------------------------------------------------------------------------- content blocks


def _image(block: Any) -> str:
    """An ``<img>`` with a ``data:`` URL, or a placeholder when the type or data is not acceptable."""
    url, kind = image_data_url(_field(block, "mime_type", "mimeType"), _field(block, "data"))
    if url is None:
        return f'<div class="placeholder">[image not shown: {_esc(kind)}]</div>'
    return f'<img class="attached" alt="{_esc(kind)} image" src="{_esc(url)}">'


def _text(text: Any) -> str:
    return f'<div class="text">{_esc(text)}</div>' if text else ""


def _thinking(block: Any) -> str:
    if _field(block, "redacted"):
        return '<details class="thinking"><summary>Thinking (redacted by the provider)</summary></details>'
    thought = str(_field(block, "thinking") or "")
    return f'<details class="thinking"><summary>Thinking</summary>{_text(thought)}</details>'


def _tool_call(block: Any) -> str:
    name = str(_field(block, "name") or "?")
    arguments = _field(block, "arguments")
    args_text = _json_text(arguments if arguments is not None else {})
    one_line = _json_text(arguments, indent=None) if arguments else ""
    return (
        f'<details class="tool-call"><summary>\u2192 call <b>{_esc(name)}</b> '
        f"<code>{_esc(_preview(one_line))}</code></summary>"
        f'<div class="mono">id {_esc(_field(block, "id") or "")}</div><pre>{_esc(args_text)}</pre></details>'
    )


def _content(content: Any) -> List[str]:
    parts: List[str] = []
    for block in _blocks(content):
        kind = _field(block, "type")
        if kind == "text":
            parts.append(_text(_field(block, "text") or ""))
        elif kind == "thinking":
            parts.append(_thinking(block))
        elif kind == "image":
            parts.append(_image(block))
        elif kind == "toolCall":
            parts.append(_tool_call(block))
        else:
            shown = block.to_dict() if hasattr(block, "to_dict") else block
            parts.append(
                f'<details class="block"><summary>{_esc(kind or "content")} block</summary>'
                f"<pre>{_esc(_json_text(shown))}</pre></details>"
            )
    return parts


def _usage_line(usage: Any) -> str:
    row = ModelUsage("message")
    row.add(usage)
    return f'<div class="usage-line">tokens: {_esc(row.describe())}</div>'


# --------------------------------------------------------------------------- messages


def _message(message: Any) -> Tuple[str, str, List[str]]:
    """(css classes, title html, body parts) of one message of any role."""
    role = str(getattr(message, "role", None) or "message")
    title = _esc(_ROLE_TITLES.get(role, role))
    if role == "assistant":
        return _assistant(message, title)
    if role == "toolResult":
        return _tool_result(message, title)
    if role == "bashExecution":
        return _bash(message, title)
    if role in ("compactionSummary", "branchSummary"):
        return "summary", title, [_text(getattr(message, "summary", ""))]
    if role == "custom":
        kind = getattr(message, "custom_type", "")
        hidden = "" if getattr(message, "display", True) else ' <span class="badge">not displayed in the app</span>'
        return "custom", f"{title} <code>{_esc(kind)}</code>{hidden}", _content(getattr(message, "content", None))
    content = getattr(message, "content", None)
    if content is None and isinstance(getattr(message, "data", None), dict):  # an UnknownMessage
        content = message.data.get("content")
    if content is not None and role in ("user", "system", "developer"):
        return _esc(role), title, _content(content)
    data = message.to_dict() if hasattr(message, "to_dict") else message
    return "custom", title, [f"<pre>{_esc(_json_text(data))}</pre>"]


def _assistant(message: Any, title: str) -> Tuple[str, str, List[str]]:
    model = f"{getattr(message, 'provider', '')}/{getattr(message, 'model', '')}"
    stop = str(getattr(message, "stop_reason", "") or "")
    head = f"{title} <code>{_esc(model)}</code>" + (
        f' <span class="badge">{_esc(stop)}</span>' if stop and stop not in ("stop", "toolUse") else ""
    )
    body = _content(getattr(message, "content", None))
    error = getattr(message, "error_message", None)
    if error:
        body.append(f'<div class="error-text"><b>Error:</b> {_esc(error)}</div>')
    body.append(_usage_line(getattr(message, "usage", None)))
    return "assistant error" if error else "assistant", head, body


def _tool_result(message: Any, title: str) -> Tuple[str, str, List[str]]:
    error = bool(getattr(message, "is_error", False))
    content = getattr(message, "content", None)
    text = _plain_text(content)
    lines = text.count("\n") + 1 if text else 0
    images = [_image(b) for b in _blocks(content) if _field(b, "type") == "image"]
    facts = [f"{lines} line{'s' if lines != 1 else ''}"] + ([f"{len(images)} image(s)"] if images else [])
    if error:
        facts.append("error")
    summary = (
        f"<summary>result of <b>{_esc(getattr(message, 'tool_name', '?'))}</b> ({_esc(', '.join(facts))}) "
        f"<code>{_esc(_preview(text))}</code></summary>"
    )
    inner = [f"<pre>{_esc(text)}</pre>" if text else ""] + images
    details = getattr(message, "details", None)
    if details is not None:
        inner.append(
            f'<details class="block"><summary>details</summary><pre>{_esc(_json_text(details))}</pre></details>'
        )
    body = [f'<details class="tool-result{" error" if error else ""}">{summary}{"".join(inner)}</details>']
    usage = getattr(message, "usage", None)
    if usage is not None:
        body.append(_usage_line(usage))
    return "toolResult error" if error else "toolResult", title, body


def _bash(message: Any, title: str) -> Tuple[str, str, List[str]]:
    command = str(getattr(message, "command", ""))
    output = str(getattr(message, "output", ""))
    facts = []
    if getattr(message, "cancelled", False):
        facts.append("cancelled")
    elif getattr(message, "exit_code", None) not in (None, 0):
        facts.append(f"exit code {getattr(message, 'exit_code', '')}")
    if getattr(message, "truncated", False):
        facts.append("truncated")
    body = [
        f"<pre>$ {_esc(command)}</pre>",
        f'<details class="tool-result"><summary>output ({_esc(", ".join(facts) or "ok")})</summary>'
        f"<pre>{_esc(output)}</pre></details>",
    ]
    return "toolResult", title, body


# --------------------------------------------------------------------------- entries


def _summary(entry: Any, head: str) -> Tuple[str, str, List[str]]:
    """A compaction or branch summary: its text (open) and the usage of the model that wrote it."""
    body = [f'<details class="summary-text" open><summary>summary</summary>{_text(entry.summary)}</details>']
    if entry.usage:
        body.append(_usage_line(entry.usage))
    return "summary", head, body


def _entry_parts(entry: Any) -> Tuple[str, str, List[str]]:
    """(css classes, title html, body parts) of any entry type."""
    kind = entry.type
    if kind == "message":
        return _message(entry.message)
    if kind == "model_change":
        return "note", f"model \u2192 <code>{_esc(entry.provider)}/{_esc(entry.model_id)}</code>", []
    if kind == "thinking_level_change":
        return "note", f"thinking level \u2192 <code>{_esc(entry.thinking_level)}</code>", []
    if kind == "active_tools_change":
        tools = entry.active_tool_names
        names = ", ".join(str(n) for n in tools) if isinstance(tools, (list, tuple)) else str(tools)
        return "note", f"active tools \u2192 <code>{_esc(names or '(none)')}</code>", []
    if kind == "compaction":
        return _summary(entry, f'Compaction <span class="badge">{_esc(entry.tokens_before)} tokens before</span>')
    if kind == "branch_summary":
        return _summary(entry, f'Summary of the branch left <span class="badge">from {_esc(entry.from_id)}</span>')
    if kind == "custom_message":
        hidden = "" if entry.display else ' <span class="badge">not displayed in the app</span>'
        return "custom", f"Custom message <code>{_esc(entry.custom_type)}</code>{hidden}", _content(entry.content)
    if kind == "custom":
        body = [f'<details class="block"><summary>data</summary><pre>{_esc(_json_text(entry.data))}</pre></details>']
        return "note", f"custom state <code>{_esc(entry.custom_type)}</code>", body
    if kind == "label":
        return "note", f"label {_esc(repr(entry.label or ''))} on entry <code>{_esc(entry.target_id)}</code>", []
    if kind == "session_info":
        return "note", f"session named {_esc(repr(entry.name or ''))}", []
    if kind == "leaf":
        return "note", f"moved to entry <code>{_esc(entry.target_id)}</code>", []
    return "note", f"entry of type <code>{_esc(kind)}</code>", [f"<pre>{_esc(_json_text(entry.to_dict()))}</pre>"]


def _unreadable(entry: Any, exc: Exception) -> Tuple[str, str, List[str]]:
    """An entry whose payload has a shape the renderer does not expect: its JSON, and why."""
    try:
        data = entry.to_dict()
    except Exception:  # noqa: BLE001 - whatever the payload holds, the page still renders
        data = {"type": getattr(entry, "type", "?"), "id": getattr(entry, "id", "?")}
    why = f"{type(exc).__name__}: {exception_message(exc)}"
    title = f"{_esc(data.get('type', '?'))} entry, shown as stored"
    return "note", title, [f'<div class="placeholder">({_esc(why)})</div><pre>{_esc(_json_text(data))}</pre>']


class _Page:
    """The state of one rendering: element ids, the current path, the output."""

    def __init__(self, path_ids: Set[str], leaf_id: Optional[str]) -> None:
        self.path_ids = path_ids
        self.leaf_id = leaf_id
        self.leaf_element: Optional[str] = None
        self.count = 0
        self.out: List[str] = []
        self.tally = UsageTally()  # usage of every rendered entry: all branches

    def entry(self, node: Any) -> None:
        entry = node.entry
        self.count += 1
        self.tally.add_entries((entry,))
        element = f"e-{self.count}"
        try:
            classes, title, body = _entry_parts(entry)
        except Exception as exc:  # a payload of an unexpected shape (other writers): show it raw
            classes, title, body = _unreadable(entry, exc)
        badges = ""
        if node.label:
            badges += f' <span class="badge">label: {_esc(node.label)}</span>'
        extra = ""
        if entry.id in self.path_ids:
            extra += " on-path"
        if entry.id == self.leaf_id:
            extra += " leaf"
            self.leaf_element = element
            badges += ' <span class="badge current">current leaf</span>'
        self.out.append(
            f'<article class="entry {classes}{extra}" id="{element}">'
            f'<header><span class="role">{title}</span>{badges} {_when(entry.timestamp)} '
            f'<code class="id">{_esc(entry.id)}</code></header>{"".join(body)}</article>'
        )


def _chain(node: Any) -> Iterator[Any]:
    """The node and its descendants while each has exactly one child (a run without forks)."""
    while True:
        yield node
        if len(node.children) != 1:
            return
        node = node.children[0]


def _branch_title(node: Any) -> Tuple[str, int]:
    """A preview of a branch and the number of entries in it.

    The preview is the branch's first user prompt (what tells alternatives apart), else its first
    message with text or summary, looking at the first :data:`_PREVIEW_SCAN` entries before its
    next fork.
    """
    preview = ""
    for depth, item in enumerate(_chain(node)):
        if depth >= _PREVIEW_SCAN:
            break
        entry = item.entry
        text = ""
        role = ""
        if entry.type == "message":
            role = str(getattr(entry.message, "role", ""))
            text = _plain_text(getattr(entry.message, "content", None))
        elif entry.type in ("compaction", "branch_summary"):
            role, text = "summary", str(entry.summary)
        if text and role == "user":
            preview = f"User: {_preview(text)}"
            break
        if text and not preview:
            preview = f"{_ROLE_TITLES.get(role, role)}: {_preview(text)}"
    size, stack = 0, [node]
    while stack:
        current = stack.pop()
        size += 1
        stack.extend(current.children)
    return preview or node.entry.type, size


def _fork(children: Sequence[Any], page: _Page) -> List[Union[str, Any]]:
    """The work items of a fork: opening markup, each branch's nodes and closing markup."""
    items: List[Union[str, Any]] = [f'<div class="fork"><p class="fork-note">{len(children)} branches fork here</p>']
    for number, child in enumerate(children, 1):
        preview, size = _branch_title(child)
        on_path = child.entry.id in page.path_ids
        mark = ' <span class="badge current">current branch</span>' if on_path else ""
        items.append(
            f'<details class="branch{" on-path" if on_path else ""}"{" open" if on_path else ""}>'
            f"<summary>Branch {number} of {len(children)}{mark} "
            f'<span class="preview">{_esc(preview)} ({size} entr{"y" if size == 1 else "ies"})</span>'
            '</summary><div class="branch-body">'
        )
        items.append(child)
        items.append("</div></details>")
    items.append("</div>")
    return items


def _render_tree(roots: Sequence[Any], page: _Page) -> None:
    work: List[Union[str, Any]] = _fork(roots, page) if len(roots) > 1 else list(roots)
    work.reverse()
    while work:
        item = work.pop()
        if isinstance(item, str):
            page.out.append(item)
            continue
        last = item
        for last in _chain(item):
            page.entry(last)
        if len(last.children) > 1:
            work.extend(reversed(_fork(last.children, page)))


# --------------------------------------------------------------------------- the page


def _usage_table(tally: UsageTally) -> str:
    rows = list(tally.models.values())
    if not rows:
        return "<p>No usage recorded.</p>"
    if len(rows) > 1:
        rows.append(tally.total())
    head = "".join(
        f"<th>{h}</th>" for h in ("model", "requests", "input", "output", "cache read", "cache write", "cost")
    )
    body = "".join(
        f"<tr><td>{_esc(r.key)}</td><td>{r.requests}</td><td>{r.input:,}</td><td>{r.output:,}</td>"
        f"<td>{r.cache_read:,}</td><td>{r.cache_write:,}</td><td>${r.cost:.4f}</td></tr>"
        for r in rows
    )
    return f'<table class="usage"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _current_model(branch: Sequence[Any]) -> Optional[str]:
    """``provider/id`` of the newest model change or assistant message on the current branch.

    (Not ``build_context``: the page must render a session whose state entries it could not
    resume from.)"""
    for entry in reversed(branch):
        if entry.type == "model_change":
            return f"{entry.provider}/{entry.model_id}"
        if entry.type == "message" and getattr(entry.message, "role", None) == "assistant":
            return f"{getattr(entry.message, 'provider', '?')}/{getattr(entry.message, 'model', '?')}"
    return None


def _head(session: Any, branch: Sequence[Any], survey: _Survey, everything: UsageTally) -> str:
    header = session.header
    name = session.name
    model = _current_model(branch)
    facts: List[Tuple[str, str]] = [("id", _esc(session.id))]
    if name:
        facts.append(("name", _esc(name)))
    facts += [("cwd", _esc(session.cwd)), ("created", _when(header.timestamp))]
    if header.parent_session:
        facts.append(("forked from", _esc(header.parent_session)))
    if model is not None:
        facts.append(("model", f"<code>{_esc(model)}</code>"))
    leaves = survey.leaves
    facts.append(("messages", f"{survey.messages} on {leaves} branch{'es' if leaves != 1 else ''}"))
    current = UsageTally().add_entries(branch).total()
    facts.append(("current branch", _esc(current.describe())))
    rows = "".join(f"<dt>{key}</dt><dd>{value}</dd>" for key, value in facts)
    title = _esc(name or f"Session {session.id}")
    return (
        f'<header class="session-head"><h1>{title}</h1><dl class="facts">{rows}</dl>'
        '<details class="usage-all" open><summary>usage per model (all branches)</summary>'
        f"{_usage_table(everything)}</details>"
        '<nav class="toolbar" id="toolbar" hidden><button type="button" data-action="expand">Expand all</button>'
        '<button type="button" data-action="collapse">Collapse all</button>'
        '<button type="button" data-action="current">Current branch</button></nav></header>'
    )


@dataclass
class _Survey:
    """What one pass over the tree knows: nodes by entry id, branch tips, message entries."""

    nodes: Dict[str, Any] = field(default_factory=dict)
    leaves: int = 0
    messages: int = 0

    def path_to(self, leaf_id: Optional[str]) -> List[Any]:
        """The entries from a root to ``leaf_id`` (what ``get_branch`` gives, without a second read)."""
        path: List[Any] = []
        seen: Set[str] = set()
        current = leaf_id
        while current is not None and current in self.nodes and current not in seen:
            seen.add(current)
            entry = self.nodes[current].entry
            path.append(entry)
            current = entry.parent_id
        path.reverse()
        return path


def _survey(roots: Sequence[Any]) -> _Survey:
    survey, stack = _Survey(), list(roots)
    while stack:
        node = stack.pop()
        survey.nodes[node.entry.id] = node
        if not node.children:
            survey.leaves += 1
        if node.entry.type == "message":
            survey.messages += 1
        stack.extend(node.children)
    return survey


def session_to_html(session: Any) -> str:
    """The whole tree of ``session`` (any storage: JSONL, SQLite, memory) as a standalone HTML page.

    The result is a complete document (styles and script inline, no network) whose every piece of
    session text is escaped; it always encodes as UTF-8 (a lone surrogate in a message shows as
    ``?``). Reads only (the tree once); raises what the session's reads raise (``SessionError``).
    """
    roots = session.get_tree()
    survey = _survey(roots)
    branch = survey.path_to(session.leaf_id)
    page = _Page({e.id for e in branch}, session.leaf_id)
    _render_tree(roots, page)
    title = _esc(session.name or f"Session {session.id}")
    data: Dict[str, Any] = {"session": session.id, "leaf": page.leaf_element, "entries": page.count}
    body = "".join(page.out) if page.out else '<p class="placeholder">This session has no entries.</p>'
    document = (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_esc(CSP)}">'
        '<meta name="referrer" content="no-referrer">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{title}</title><style>{STYLE}</style></head>\n<body>"
        f'{_head(session, branch, survey, page.tally)}<main id="tree">{body}</main>'
        f'<script type="application/json" id="session-data">{_script_json(data)}</script>'
        f"<script>{SCRIPT}</script></body></html>\n"
    )
    try:
        document.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (a cut emoji) in some message
        document = document.encode("utf-8", "replace").decode("utf-8")
    return document

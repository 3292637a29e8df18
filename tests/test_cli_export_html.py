"""``agentcore sessions export --format html`` (issue 18): the whole tree as a standalone page.

The first half checks the page as text (structure, escaping, the Content-Security-Policy, JSONL,
SQLite and the reference's real session); the second half loads it in headless Chromium over
WebDriver (``tests/_browser.py``) and checks what a reader sees: no console errors, a screenshot,
branches and tool results that expand, and a crafted session whose payloads never run.
"""

from __future__ import annotations

import base64
import html
import io
import json
import re
import struct
import sys
import time
import zlib
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
from _browser import Browser, missing_browser, start_browser

from agentcore.cli import main
from agentcore.session import Session
from agentcore.types import (
    AssistantMessage,
    BashExecutionMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UsageCost,
    UserMessage,
)

REFERENCE_SESSION = Path(__file__).resolve().parents[2] / "shared" / "sessions" / "pi-v1-large-session.jsonl"

#: Every payload sets a flag (or the title) if it ever runs; each sits in a different place.
PAYLOADS = {
    "user text": "<script>window.__pwned='user text';document.title='pwned'</script>",
    "img onerror": "<img src=x onerror=\"window.__pwned='img onerror'\">",
    "markdown link": "[click me](javascript:window.__pwned='markdown link')",
    "thinking": "</details><svg onload=\"window.__pwned='thinking'\"></svg>",
    "tool name": "<b onmouseover=window.__pwned='tool name'>rd</b>",
    "tool args": "</script><script>window.__pwned='tool args'</script>",
    "tool output": "</pre><iframe srcdoc=\"<script>parent.__pwned='tool output'</script>\"></iframe>",
    "error": "<script>window.__pwned='error'</script>",
    "session name": "</title><script>window.__pwned='session name'</script>",
    "label": "\"><script>window.__pwned='label'</script>",
    "custom": "<script>window.__pwned='custom'</script>",
    "model": "x\"><script>window.__pwned='model'</script>",
    "separator": "line\u2028sep\u2029arator</script><!--",
}
BAD_MIME = 'image/png" onerror="window.__pwned=\'mime\'" x="'
BAD_DATA = "AAAA\" onerror=\"window.__pwned='data'"
SVG = base64.b64encode(b"<svg xmlns='http://www.w3.org/2000/svg' onload='window.__pwned=1'/>").decode()


def png(width: int, height: int, rgb: Tuple[int, int, int] = (200, 40, 40)) -> bytes:
    """A small solid-colour RGB PNG (no imaging library needed)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def decode_png(data: bytes) -> Tuple[int, int]:
    """Width and height of a PNG after really decoding it (chunks, CRCs, inflated pixel rows)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        assert zlib.crc32(kind + body) & 0xFFFFFFFF == crc, f"bad CRC in {kind!r}"
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    channels = {0: 1, 2: 3, 4: 2, 6: 4}[colour]
    assert len(zlib.decompress(idat)) == height * (1 + width * channels * depth // 8)
    return width, height


def _usage(cost: float) -> Usage:
    return Usage(input=1200, output=340, cache_read=50, total_tokens=1590, cost=UsageCost(total=cost))


def _assistant(content: List[Any], cost: float = 0.0123, **kwargs: Any) -> AssistantMessage:
    kwargs.setdefault("provider", "anthropic")
    kwargs.setdefault("model", "claude-sonnet-4-5")
    return AssistantMessage(content=content, api="anthropic-messages", usage=_usage(cost), **kwargs)


def fill_demo(session: Session) -> Dict[str, str]:
    """A tree with three forks (one at the root), tool calls and results, thinking, an image, a
    compaction, a branch summary, model/thinking changes, custom messages and labels. The current
    leaf is on the "retry" branch; the other branches are not."""
    ids: Dict[str, str] = {}
    ids["first"] = session.append_message(UserMessage("Please read notes.txt", timestamp=1))
    session.append_thinking_level_change("high")
    ids["call"] = session.append_message(
        _assistant(
            [
                ThinkingContent("The user wants the notes; read them."),
                TextContent("Reading it."),
                ToolCall("call-1", "read", {"path": "notes.txt"}),
            ],
            stop_reason="toolUse",
        )
    )
    ids["result"] = session.append_message(
        ToolResultMessage("call-1", "read", [TextContent("alpha\nbeta\ngamma-result-line")])
    )
    ids["answer"] = session.append_message(_assistant([TextContent("The notes say alpha, beta, gamma.")]))
    ids["image prompt"] = session.append_message(
        UserMessage(
            [TextContent("What colour is this?"), ImageContent(base64.b64encode(png(48, 24)).decode(), "image/png")]
        )
    )
    ids["image answer"] = session.append_message(_assistant([TextContent("It is red.")]))
    session.append_compaction("Earlier: the user read notes and showed a red image.", ids["image prompt"], 4321)
    ids["after compaction"] = session.append_message(UserMessage("And now?", timestamp=5))
    session.append_message(BashExecutionMessage("ls -la", "total 0\nfile-from-bash", exit_code=1))
    # a second branch under the answer, with a summary of the branch left
    session.move_to(ids["answer"], summary="Looked at an image, then compacted.")
    session.append_model_change("openai", "gpt-5")
    ids["side"] = session.append_message(UserMessage("side-branch-question", timestamp=6))
    session.append_message(_assistant([TextContent("side-branch-answer")], provider="openai", model="gpt-5"))
    session.append_custom_message("reminder", "custom-message-text", display=False)
    # the current branch: a retry of the first answer
    session.move_to(ids["first"])
    ids["retry"] = session.append_message(_assistant([TextContent("retry-answer-text")], cost=0.5))
    session.append_label(ids["retry"], "the good one")
    # a second root (the conversation was restarted from scratch), then back to the retry
    session.move_to(None)
    ids["second root"] = session.append_message(UserMessage("second-root-prompt", timestamp=9))
    session.move_to(ids["retry"])
    ids["leaf"] = session.append_message(UserMessage("final-current-prompt", timestamp=10))
    return ids


def fill_crafted(session: Session) -> None:
    """Every payload of :data:`PAYLOADS` where a message, name or label can carry it."""
    p = PAYLOADS
    first = session.append_message(UserMessage(p["user text"] + " " + p["img onerror"] + " " + p["separator"]))
    session.append_message(
        _assistant(
            [
                ThinkingContent(p["thinking"]),
                TextContent(p["markdown link"]),
                ToolCall("c<1>", p["tool name"], {"q": p["tool args"], p["tool args"]: 1}),
            ],
            stop_reason="toolUse",
        )
    )
    session.append_message(
        ToolResultMessage(
            "c<1>",
            p["tool name"],
            [
                TextContent(p["tool output"]),
                ImageContent(BAD_DATA, "image/png"),
                ImageContent(base64.b64encode(png(4, 4)).decode(), BAD_MIME),
                ImageContent(SVG, "image/svg+xml"),
                ImageContent("PGgxPmhpPC9oMT4=", "text/html"),
            ],
            details={"html": p["custom"]},
            is_error=True,
        )
    )
    session.append_message(_assistant([], stop_reason="error", error_message=p["error"], model=p["model"]))
    session.append_custom_message(p["custom"], p["custom"])
    session.append_custom(p["custom"], {"k": p["custom"]})
    session.append_label(first, p["label"])
    session.set_name(p["session name"])
    session.move_to(first)
    session.append_message(UserMessage(p["user text"]))


def export_html(path: Path, tmp_path: Path, name: str = "page.html") -> Tuple[str, Path]:
    out, err = io.StringIO(), io.StringIO()
    target = tmp_path / name
    code = main(["sessions", "export", str(path), "--format", "html", "-o", str(target)], stdout=out, stderr=err)
    assert code == 0, err.getvalue()
    return target.read_text(encoding="utf-8"), target


@pytest.fixture
def demo_page(tmp_path: Path) -> Tuple[str, Path, Dict[str, str]]:
    path = tmp_path / "demo.jsonl"
    with Session.create(path, cwd="/w/proj", session_id="demo-session") as session:
        ids = fill_demo(session)
    text, target = export_html(path, tmp_path, "demo.html")
    return text, target, ids


@pytest.fixture
def crafted_page(tmp_path: Path) -> Tuple[str, Path]:
    path = tmp_path / "crafted.jsonl"
    session_id = "</script><script>window.__pwned='session id'</script>\u2028"
    with Session.create(path, cwd='/w/"><script>window.__pwned="cwd"</script>', session_id=session_id) as session:
        fill_crafted(session)
    text, target = export_html(path, tmp_path, "crafted.html")
    return text, target


# --------------------------------------------------------------------------- the page as text


class _Outline(HTMLParser):
    """Tags with their attributes, plus the text of each ``<script>``, as the browser parses them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: List[Tuple[str, Dict[str, Optional[str]]]] = []
        self.scripts: List[str] = []
        self.styles: List[str] = []
        self._in: Optional[str] = None

    def handle_starttag(self, tag: str, attrs: List[Tuple[str, Optional[str]]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag in ("script", "style"):
            self._in = tag
            (self.scripts if tag == "script" else self.styles).append("")

    def handle_endtag(self, tag: str) -> None:
        self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "script":
            self.scripts[-1] += data
        elif self._in == "style":
            self.styles[-1] += data


def outline(text: str) -> _Outline:
    parser = _Outline()
    parser.feed(text)
    parser.close()
    return parser


def test_html_export_shows_every_branch_with_the_current_one_marked(demo_page):
    # issue 18: the export was the current branch only (a fragment of transcript_to_html); every
    # fork must be visible, the current branch open and marked, the others collapsed.
    text, _, ids = demo_page
    for needle in (
        "gamma-result-line",  # tool result, on a branch that is not current
        "side-branch-answer",
        "custom-message-text",
        "retry-answer-text",
        "second-root-prompt",  # a second root is a branch too
        "final-current-prompt",
        "Looked at an image, then compacted.",  # branch summary
        "Earlier: the user read notes and showed a red image.",  # compaction
        "4321 tokens before",
        "model \u2192 <code>openai/gpt-5</code>",
        "thinking level \u2192 <code>high</code>",
        "label: the good one",
        "$ ls -la",
        "exit code 1",
    ):
        assert needle in text, needle
    page = outline(text)
    branches = [attrs for tag, attrs in page.tags if tag == "details" and "branch" in (attrs.get("class") or "")]
    # forks: the two roots, the first prompt (answer vs retry), the answer (image vs side branch),
    # the retry (its label entry, a tree node like any other, vs the final prompt)
    assert len(branches) == 8
    current = [a for a in branches if "on-path" in (a.get("class") or "")]
    assert len(current) == 3 and all("open" in a for a in current)
    assert all("open" not in a for a in branches if a not in current)
    assert text.count("current branch</span>") == 3 and text.count("current leaf</span>") == 1
    leaf_article = re.search(r'<article class="entry user on-path leaf" id="(e-\d+)">', text)
    assert leaf_article and ids["leaf"] in text[leaf_article.end() : leaf_article.end() + 400]
    data = json.loads(page.scripts[0])
    assert data["leaf"] == leaf_article.group(1) and data["session"] == "demo-session"
    articles = [a for tag, a in page.tags if tag == "article"]
    assert len(articles) == data["entries"] == 19  # every entry except the `leaf` moves
    assert len({a["id"] for a in articles}) == len(articles)


def test_html_export_has_usage_per_message_and_totals(demo_page):
    text, _, _ = demo_page
    per_message = "tokens: 1,200 input, 340 output, 50 cache read, 0 cache write, $0.0123"
    assert text.count(per_message) == 4
    assert "tokens: 1,200 input, 340 output, 50 cache read, 0 cache write, $0.5000" in text
    # totals: per model over all branches, a total row, and the current branch's own sum
    assert "<td>anthropic/claude-sonnet-4-5</td><td>4</td>" in text and "<td>openai/gpt-5</td><td>1</td>" in text
    assert "<td>total</td><td>5</td><td>6,000</td><td>1,700</td><td>250</td><td>0</td><td>$0.5492</td>" in text
    assert "<dt>current branch</dt><dd>1,200 input, 340 output, 50 cache read, 0 cache write, $0.5000</dd>" in text
    assert "<time datetime=" in text


def test_html_export_is_standalone_with_a_strict_content_security_policy(demo_page):
    from agentcore.cli._html_assets import csp_hash

    text, _, _ = demo_page
    page = outline(text)
    policies = [
        a["content"] for tag, a in page.tags if tag == "meta" and a.get("http-equiv") == "Content-Security-Policy"
    ]
    assert len(policies) == 1
    directives = dict(d.strip().split(" ", 1) for d in (policies[0] or "").split(";"))
    assert directives["default-src"] == "'none'" and directives["img-src"] == "data:"
    # the one inline style sheet and the one executable script are allowed by their hashes, nothing else
    assert len(page.styles) == 1 and directives["style-src"] == csp_hash(page.styles[0])
    executable = [
        s for (tag, a), s in zip([t for t in page.tags if t[0] == "script"], page.scripts) if not a.get("type")
    ]
    assert len(executable) == 1 and directives["script-src"] == csp_hash(executable[0])
    assert "unsafe-inline" not in policies[0]
    for tag, attrs in page.tags:  # no network: nothing links out, nothing loads from elsewhere
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
        assert "style" not in attrs, (tag, attrs)  # inline style attributes would need 'unsafe-hashes'
        for name in ("src", "href", "action", "srcset", "poster", "data"):
            value = attrs.get(name)
            assert value is None or value.startswith("data:image/png;base64,"), (tag, attrs)
    assert sum(1 for tag, a in page.tags if tag == "img") == 1


def test_html_export_escapes_every_crafted_payload(crafted_page):
    text, _ = crafted_page
    page = outline(text)
    assert [t for t, _ in page.tags].count("script") == 2  # the data block and the page's own script
    renderer_tags = set(
        "html head meta title style body header h1 dl dt dd details summary table thead tbody tr th td nav button "
        "main article span time code div pre b img p script".split()
    )
    assert {t for t, _ in page.tags} <= renderer_tags  # no iframe, svg, a, object, base... from the payloads
    for tag, attrs in page.tags:
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
        assert attrs.get("src") is None or re.fullmatch(r"data:image/png;base64,[A-Za-z0-9+/=]+", attrs["src"] or "")
    # each payload is in the page, escaped (shown as text), never raw
    for where, payload in PAYLOADS.items():
        if where == "separator":
            continue
        assert html.escape(payload, quote=True) in text or html.escape(repr(payload), quote=True) in text, where
        assert payload not in text, where
    # the images with a bad type or bad data are placeholders that say why
    assert text.count("[image not shown: its data is not valid base64]") == 1
    assert text.count("is not one of image/png, image/jpeg, image/gif, image/webp]") == 3
    assert "image/svg+xml" in text and SVG not in text and "PGgxPmhpPC9oMT4=" not in text
    # the JSON block cannot end its element or hide a line separator; it still decodes to the id
    block = text.split('<script type="application/json" id="session-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in block and ">" not in block and "\u2028" not in block and "\u2029" not in block
    assert json.loads(block)["session"] == "</script><script>window.__pwned='session id'</script>\u2028"
    text.encode("utf-8")


def test_image_urls_take_only_allow_listed_types_and_valid_base64():
    from agentcore.cli._html import _image

    good = base64.b64encode(png(2, 2)).decode()
    assert _image({"type": "image", "mimeType": "image/png", "data": good}).startswith(
        f'<img class="attached" alt="image/png image" src="data:image/png;base64,{good}"'
    )
    wrapped = good[:8] + "\n" + good[8:]  # base64 wrapped over lines is still base64
    assert f"base64,{good}" in _image({"type": "image", "mimeType": "IMAGE/PNG", "data": wrapped})
    for mime in ("image/jpeg", "image/gif", "image/webp"):
        assert "<img" in _image({"type": "image", "mimeType": mime, "data": good})
    for mime, data in (
        ("image/svg+xml", SVG),
        ("text/html", good),
        ("image/png;x=1", good),
        (None, good),
        (123, good),
        ("image/png", "not base64!"),
        ("image/png", good[:-1]),  # bad length
        ("image/png", ""),
        ("image/png", None),
        ("image/png", "===="),
    ):
        rendered = _image({"type": "image", "mimeType": mime, "data": data})
        assert rendered.startswith('<div class="placeholder">[image not shown: '), (mime, data)


def test_html_export_of_a_sqlite_session(tmp_path):
    from agentcore.session import SqliteSessionStorage

    path = tmp_path / "sessions.db"
    with Session(SqliteSessionStorage.create(path, session_id="sqlite-demo")) as session:
        fill_demo(session)
    text, _ = export_html(path, tmp_path)
    assert "<title>Session sqlite-demo</title>" in text
    assert "side-branch-answer" in text and "retry-answer-text" in text and "gamma-result-line" in text
    assert len(re.findall(r"<details class=\"branch[ \"]", text)) == 8 and text.count("current leaf</span>") == 1


@pytest.fixture(scope="module")
def reference_page(tmp_path_factory: pytest.TempPathFactory) -> Tuple[str, Path]:
    """The reference's real session exported once for this module's tests (skip when absent)."""
    if not REFERENCE_SESSION.exists():
        pytest.skip(f"{REFERENCE_SESSION} is absent (the shared folder is not next to the checkout)")
    return export_html(REFERENCE_SESSION, tmp_path_factory.mktemp("reference"))


def test_html_export_of_the_reference_session(reference_page):
    """The reference's real 914-message session (version-1 file) renders whole."""
    text, _ = reference_page
    with Session.open(REFERENCE_SESSION, read_only=True) as session:
        nodes = len([e for e in session.entries() if e.type != "leaf"])
        calls = sum(
            1
            for e in session.entries()
            if e.type == "message"
            for b in getattr(e.message, "content", None) or []
            if isinstance(b, ToolCall)
        )
    page = outline(text)
    assert sum(1 for tag, _ in page.tags if tag == "article") == nodes
    assert text.count('<details class="tool-call">') == calls
    assert text.count('<details class="tool-result') >= 373
    assert "<dt>messages</dt><dd>914 on 1 branch</dd>" in text


def test_html_export_of_deep_chains_and_deep_forks_does_not_recurse():
    from agentcore.cli._html import session_to_html

    session = Session.in_memory(session_id="deep")
    parent = None
    for i in range(1100):  # 1100 nested forks (past the recursion limit): each prompt forks in two
        if parent is not None:
            session.move_to(parent)
        parent = session.append_message(UserMessage(f"prompt {i}", timestamp=i))
        session.append_message(_assistant([TextContent(f"dead end {i}")]))
    text = session_to_html(session)
    assert text.count("<article") == 2200 and len(re.findall(r"<details class=\"branch[ \"]", text)) == 2 * 1099


def test_html_export_of_a_cost_past_a_float_range(tmp_path):
    """A usage cost written as a 400-digit integer (JSON allows it) failed the whole export with
    "OverflowError: int too large to convert to float"; the page now renders, the cost shown as
    infinite."""
    path = tmp_path / "costly.jsonl"
    with Session.create(path, session_id="costly") as session:
        session.append_message(UserMessage("how much?"))
        session.append_message(_assistant([TextContent("a lot")]))
    lines = path.read_text(encoding="utf-8").splitlines()
    entry = json.loads(lines[-1])
    entry["message"]["usage"]["cost"]["total"] = 10**400
    lines[-1] = json.dumps(entry)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    text, _ = export_html(path, tmp_path)
    assert "a lot" in text and "$inf" in text


@pytest.mark.parametrize("where", ["details", "arguments"])
def test_html_export_of_a_value_nested_hundreds_deep(tmp_path, where):
    """Another writer's tool result details or call arguments nested some 400 levels deep:
    json.loads reads them, but the export's JSON-safe copy recursed past Python's limit, and
    "agentcore: RecursionError" ended the export (the fallback for an unrenderable entry recursed
    the same way). The value is now a placeholder and the rest of the page renders."""
    path = tmp_path / "deep.jsonl"
    with Session.create(path, session_id="deep") as session:
        session.append_message(UserMessage("go deep"))
        session.append_message(_assistant([ToolCall("c1", "probe", {"x": "@@"})], stop_reason="toolUse"))
        session.append_message(ToolResultMessage("c1", "probe", [TextContent("deep-result-text")], details="@@"))
    lines = path.read_text(encoding="utf-8").splitlines()
    depth = sys.getrecursionlimit() * 2 // 5  # json.loads reads it; two frames a level did not
    deep = "[" * depth + '"bottom"' + "]" * depth
    target = -1 if where == "details" else -2
    lines[target] = lines[target].replace('"@@"', deep)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    text, _ = export_html(path, tmp_path)
    assert "&lt;nested too deeply&gt;" in text and "shown as stored" not in text
    assert "deep-result-text" in text and "go deep" in text and text.count("<article") == 3


def test_html_export_of_an_empty_session(tmp_path):
    path = tmp_path / "empty.jsonl"
    Session.create(path, session_id="empty").close()
    text, _ = export_html(path, tmp_path)
    assert "This session has no entries." in text and "<dt>messages</dt><dd>0 on 0 branches</dd>" in text


def test_export_onto_the_session_file_itself_is_refused_and_keeps_it(tmp_path):
    # `-o` naming the file being exported (here by a symlink) wrote the page over the session
    # and reported "wrote html to ...": the conversation was gone, `sessions show` then exit 2
    path = tmp_path / "demo.jsonl"
    with Session.create(path, session_id="demo-session") as session:
        fill_demo(session)
    before = path.read_bytes()
    (tmp_path / "alias.jsonl").symlink_to(path)
    for fmt in ("html", "jsonl"):
        out, err = io.StringIO(), io.StringIO()
        argv = ["sessions", "export", str(path), "--format", fmt, "-o", str(tmp_path / "alias.jsonl")]
        assert main(argv, stdout=out, stderr=err) == 2
        assert "that is the session file being exported" in err.getvalue() and "wrote" not in err.getvalue()
        assert path.read_bytes() == before


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_export_of_a_nan_usage_names_the_entry_instead_of_writing_invalid_json(tmp_path, fmt):
    # Python's json reads NaN and Infinity from another writer's file: `--format json` printed
    # them as NaN/Infinity (which jq and every other JSON reader reject) and `jsonl` ended with
    # "agentcore: SessionError: inf is not JSON" (status 1, no file, no entry named)
    path = tmp_path / "nan.jsonl"
    with Session.create(path, session_id="nan-session") as session:
        session.append_message(UserMessage("hello", timestamp=1))
        answer = session.append_message(_assistant([TextContent("hi")]))
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    lines[-1]["message"]["usage"]["input"] = float("inf")
    lines[-1]["message"]["usage"]["cost"]["total"] = float("nan")
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    assert main(["sessions", "export", str(path), "--format", fmt], stdout=out, stderr=err) == 2
    assert out.getvalue() == ""
    assert f"{path}: entry {answer} cannot be exported as {fmt.upper()}: it holds a value JSON cannot" in err.getvalue()


_FAILING_WRITE = """
import resource, sys
from agentcore.cli import main
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))  # a disk that fills up past 4 KiB
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_an_export_that_fails_half_way_leaves_the_previous_file_whole(tmp_path):
    # `-o` opened the file with "w": the old export was truncated before the new one was written,
    # so a full disk (or a Ctrl+C) left neither, only the first 4 KiB of the new page
    import subprocess

    path = tmp_path / "demo.jsonl"
    with Session.create(path, session_id="demo-session") as session:
        fill_demo(session)
    target = tmp_path / "page.html"
    target.write_text("previous export\n", encoding="utf-8")
    target.chmod(0o640)
    argv = ["sessions", "export", str(path), "--format", "html", "-o", str(target)]
    done = subprocess.run([sys.executable, "-c", _FAILING_WRITE, *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and f"-o {target}: cannot write it (File too large)" in done.stderr
    assert target.read_text(encoding="utf-8") == "previous export\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.jsonl", "page.html"]  # no temp file left
    text, _ = export_html(path, tmp_path)  # then written whole, keeping the file's mode
    assert text.endswith("</html>\n") and (target.stat().st_mode & 0o777) == 0o640


# --------------------------------------------------------------------------- in a real browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    why = missing_browser()
    if why:
        pytest.skip(why)
    chrome = start_browser()
    try:
        yield chrome
    finally:
        chrome.close()


def _load(browser: Browser, page: Path) -> None:
    browser.console()  # drop what earlier pages logged
    browser.get(page.as_uri())
    # get() returns at the load event, but a large page on a loaded machine was seen still
    # "loading" right after: wait for the state itself (a deadline, not a fixed sleep)
    deadline = time.monotonic() + 30
    while browser.execute("return document.readyState") != "complete":
        assert time.monotonic() < deadline, "the page did not finish loading in 30 s"
        time.sleep(0.05)


def _errors(browser: Browser) -> List[Dict[str, Any]]:
    return [e for e in browser.console() if e.get("level") in ("SEVERE", "WARNING")]


def _visible(browser: Browser, text: str) -> bool:
    """Whether an element whose own text contains ``text`` is rendered with a non-empty box."""
    return bool(
        browser.execute(
            "var walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);"
            "for (var n = walker.nextNode(); n; n = walker.nextNode()) {"
            "  if (n.data.indexOf(arguments[0]) >= 0) {"
            "    var r = n.parentElement.getBoundingClientRect();"
            "    return r.width > 0 && r.height > 0 && n.parentElement.checkVisibility();"
            "  }"
            "} return null;",
            text,
        )
    )


def test_page_loads_without_errors_or_network_and_screenshots(browser, demo_page, tmp_path):
    _, target, _ = demo_page
    _load(browser, target)
    assert _errors(browser) == []  # a CSP hash mismatch or a script error would be SEVERE here
    assert browser.execute("return performance.getEntriesByType('resource').length") == 0  # nothing fetched
    assert browser.execute("return document.getElementById('toolbar').hidden") is False  # the script ran
    assert browser.execute("return document.querySelector('img.attached').naturalWidth") == 48
    shot = browser.screenshot()
    (tmp_path / "demo.png").write_bytes(shot)
    width, height = decode_png(shot)
    assert width >= 800 and height >= 600 and len(shot) > 10_000
    assert _visible(browser, "final-current-prompt") and _visible(browser, "retry-answer-text")


def test_collapsed_branch_expands_on_click(browser, demo_page):
    _, target, _ = demo_page
    _load(browser, target)
    assert not _visible(browser, "side-branch-answer") and not _visible(browser, "beta\ngamma-result-line")
    closed = browser.find_all("details.branch:not([open]) > summary")
    first = next(s for s in closed if "Reading it." in browser.text(s) or "Assistant" in browser.text(s))
    browser.click(first)
    # the answer's branch is open now: its messages show, the fork under it is still collapsed
    assert _visible(browser, "The notes say alpha, beta, gamma.")
    assert not _visible(browser, "side-branch-answer")
    side = next(s for s in browser.find_all("details.branch:not([open]) > summary") if "side-branch" in browser.text(s))
    article = browser.execute(
        "return Array.from(document.querySelectorAll('article')).find(a => a.textContent.includes(arguments[0]))",
        "side-branch-answer",
    )
    # (not the rect: Chrome still lays out the content of a closed <details>, it only hides it)
    assert not browser.displayed(article)
    browser.click(side)
    assert _visible(browser, "side-branch-question") and _visible(browser, "side-branch-answer")
    assert browser.displayed(article) and browser.rect(article)["height"] > 0
    summary_rect = browser.rect(side)
    assert summary_rect["height"] > 0
    assert _errors(browser) == []


def test_tool_results_thinking_and_expand_all(browser, demo_page):
    _, target, _ = demo_page
    _load(browser, target)
    browser.click(browser.find('button[data-action="expand"]'))
    assert _visible(browser, "beta\ngamma-result-line") and _visible(browser, "The user wants the notes; read them.")
    assert browser.execute("return document.querySelectorAll('details:not([open])').length") == 0
    browser.click(browser.find('button[data-action="collapse"]'))
    assert not _visible(browser, "beta\ngamma-result-line") and not _visible(browser, "side-branch-answer")
    assert _visible(browser, "final-current-prompt")  # the current branch stays open
    # a tool result opens on its own: open its branch, then click the result's summary
    browser.click(browser.find('button[data-action="current"]'))
    branch = next(s for s in browser.find_all("details.branch > summary") if "Reading it." in browser.text(s))
    browser.click(branch)
    assert _visible(browser, "Reading it.") and not _visible(browser, "beta\ngamma-result-line")
    browser.click(browser.find("details.tool-result > summary"))
    assert _visible(browser, "beta\ngamma-result-line")
    assert not _visible(browser, "The user wants the notes; read them.")  # thinking stays collapsed
    browser.click(browser.find("details.thinking > summary"))
    assert _visible(browser, "The user wants the notes; read them.")
    assert _errors(browser) == []


@pytest.mark.parametrize("csp", ["with the policy", "without the policy"])
def test_crafted_session_cannot_run_code(browser, crafted_page, tmp_path, csp):
    # Escaping alone must hold: the second run strips the Content-Security-Policy meta tag, so a
    # payload that got through would run instead of being blocked (and logged) by the policy.
    text, target = crafted_page
    if csp == "without the policy":
        text = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", text, count=1)
        assert "Content-Security-Policy" not in text
        target = tmp_path / "crafted-no-csp.html"
        target.write_text(text, encoding="utf-8")
    _load(browser, target)
    browser.click(browser.find('button[data-action="expand"]'))
    for summary in browser.find_all("summary"):  # hover and click everything a payload might hide in
        browser.execute("arguments[0].dispatchEvent(new MouseEvent('mouseover', {bubbles: true}))", summary)
    assert browser.alert_text() is None
    state = browser.execute("return [window.__pwned === undefined ? null : window.__pwned, document.title]")
    assert state == [None, PAYLOADS["session name"]]
    assert _errors(browser) == []  # with the policy: nothing even tried to run (no CSP violation)
    assert browser.execute("return document.querySelectorAll('iframe, svg, object, embed, a[href], base').length") == 0
    assert browser.execute("return document.scripts.length") == 2
    for where in ("user text", "tool output", "tool args", "error"):
        assert _visible(browser, PAYLOADS[where][:30]), where  # shown, as text
    assert _visible(browser, "[click me](javascript:")


def test_reference_session_page_loads_in_the_browser(browser, reference_page):
    _, target = reference_page
    _load(browser, target)
    assert _errors(browser) == []
    assert browser.execute("return document.querySelectorAll('article.entry').length") > 1000
    browser.click(browser.find('button[data-action="expand"]'))
    assert browser.execute("return document.querySelectorAll('details:not([open])').length") == 0
    decode_png(browser.screenshot())


ODD_SHAPES = [
    {"type": "session", "version": 3, "id": "odd", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/w"},
    {"type": "active_tools_change", "id": "a2", "parentId": None, "timestamp": "x", "activeToolNames": 5},
    {
        "type": "message",
        "id": "a3",
        "parentId": "a2",
        "timestamp": "2025-01-01T00:00:01.000Z",
        "message": {
            "role": "assistant",
            "content": [
                {"type": "toolCall", "id": 1, "name": None, "arguments": "str"},
                {"type": "image", "data": 5, "mimeType": ["image/png"]},
                {"type": "weird", "x": "<b>weird-block</b>"},
                "plain string block",
                7,
            ],
            "stopReason": None,
            "timestamp": 1,
        },
    },
    {
        "type": "message",
        "id": "a4",
        "parentId": "a3",
        "timestamp": "2025-01-01T00:00:01.000Z",
        "message": {"role": "toolResult", "toolCallId": 1, "toolName": {"a": 1}, "content": "just a string"},
    },
    {"type": "compaction", "id": "a5", "parentId": "a4", "timestamp": "t", "summary": None, "tokensBefore": "many"},
    {
        "type": "custom_message",
        "id": "a6",
        "parentId": "a5",
        "timestamp": "t",
        "customType": 7,
        "content": {"x": 1},
        "display": "no",
    },
    {
        "type": "message",
        "id": "a7",
        "parentId": "a6",
        "timestamp": "t",
        "message": {"role": "developer", "content": "dev-text"},
    },
    {
        "type": "message",
        "id": "a8",
        "parentId": "a7",
        "timestamp": "t",
        "message": {"role": "bashExecution", "command": ["ls"], "output": None},
    },
    {"type": "alien", "id": "a9", "parentId": "a8", "timestamp": "t", "stuff": "<b>alien-stuff</b>"},
]


def test_html_export_renders_entries_of_unexpected_shapes(tmp_path, monkeypatch):
    # Other writers' files load with payloads of odd types (a number where a list of tool names
    # belongs, a block that is a plain string...): the export crashed with TypeError on the first
    # one (and on build_context's use of it). Each entry now renders as well as it can.
    import agentcore.cli._html as renderer

    path = tmp_path / "odd.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in ODD_SHAPES), encoding="utf-8")
    text, _ = export_html(path, tmp_path)
    assert "active tools \u2192 <code>5</code>" in text and "dev-text" in text
    assert "&lt;b&gt;weird-block&lt;/b&gt;" in text and "&lt;b&gt;alien-stuff&lt;/b&gt;" in text
    assert text.count("<article") == 8 and "current leaf" in text
    # whatever else a payload holds, one entry that cannot be rendered is shown raw, with why
    real = renderer._entry_parts

    def failing(entry: Any) -> Any:
        if entry.type == "compaction":
            raise ValueError("unexpected <shape>")
        return real(entry)

    monkeypatch.setattr(renderer, "_entry_parts", failing)
    text, _ = export_html(path, tmp_path)
    assert "compaction entry, shown as stored" in text and "(ValueError: unexpected &lt;shape&gt;)" in text
    assert text.count("<article") == 8

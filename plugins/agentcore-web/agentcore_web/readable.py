"""HTML to readable plain text with the standard library's ``html.parser``.

Scripts, styles, the ``<head>`` and other invisible elements are dropped; headings become ``#``
lines, list items ``- `` lines, links ``[text](absolute url)`` (an ``<a>`` inside a link ends it, as
in browsers), images their ``[image: alt]`` text;
``<pre>`` keeps its whitespace; everything else is collapsed into paragraphs. The head ends where
HTML ends it: at ``</head>``, or, as ``</head>`` may be omitted, at ``<body>``, any other body
element or text outside its elements. The title is the first ``<title>`` outside ``<svg>`` and
the other skipped elements; links resolve against the first ``<base href>``, else the page's URL.
A ``<meta http-equiv="refresh">`` redirect is not followed but named at the top of the text.
A tag, comment or declaration that the document never ends is dropped with the rest, as browsers
drop it; a ``<![`` that starts no marked section is skipped to its ``>``.
"""

from __future__ import annotations

import html.parser as _html_parser
import re
from html.parser import HTMLParser
from typing import Dict, List, Optional, Tuple
from urllib.parse import urljoin

__all__ = ["html_to_text"]

_SKIP = {"script", "style", "noscript", "template", "svg", "canvas", "iframe", "object", "title"}
# what a <head> holds; any other start tag ends an unclosed head (its end tag is optional)
_HEAD_CONTENT = {"title", "meta", "link", "style", "script", "noscript", "base", "template"}
_BLOCK = {
    "p",
    "div",
    "section",
    "article",
    "main",
    "header",
    "footer",
    "nav",
    "aside",
    "blockquote",
    "ul",
    "ol",
    "dl",
    "dt",
    "dd",
    "table",
    "tr",
    "form",
    "fieldset",
    "figure",
    "figcaption",
    "address",
    "details",
    "summary",
    "body",
    "html",
}
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_VOID = {"br", "hr", "img", "input", "meta", "link", "area", "base", "col", "embed", "source", "wbr"}


class _Readable(HTMLParser):
    def __init__(self, base_url: str) -> None:
        super().__init__(convert_charrefs=True)
        self.base_url = base_url
        self.parts: List[str] = []
        self.title: Optional[str] = None
        self.refresh: Optional[str] = None  # the URL of the first <meta http-equiv="refresh">
        self._skip_depth = 0
        self._in_head = False
        self._base_seen = False
        self._pre_depth = 0
        self._in_title = False
        self._title_parts: List[str] = []
        self._links: List[Tuple[str, int]] = []

    # -- output helpers

    def _text(self, text: str) -> None:
        if self._pre_depth:
            self.parts.append(text)
            return
        text = re.sub(r"\s+", " ", text)
        if text.strip():
            if self.parts and self.parts[-1].endswith("\n"):
                text = text.lstrip()
            self.parts.append(text)
        elif text and self.parts and not self.parts[-1].endswith((" ", "\n")):
            self.parts.append(" ")

    def _break(self, blank: bool = True) -> None:
        self.parts.append("\n\n" if blank else "\n")

    # -- parser callbacks

    def handle_starttag(self, tag: str, attrs: List[Tuple[str, Optional[str]]]) -> None:
        if tag == "head":
            self._in_head = True
            return
        if self._in_head and tag not in _HEAD_CONTENT:
            self._in_head = False
        if tag == "title" and self.title is None and not self._skip_depth:
            self._in_title = True  # the document's title: not an <svg> icon's, not a later one
        if tag == "base" and not self._base_seen:
            self._base(dict(attrs).get("href"))
        if tag == "meta" and self.refresh is None:
            self.refresh = _refresh_target(dict(attrs))
        if tag in _SKIP:
            if tag not in _VOID:
                self._skip_depth += 1
            return
        if self._skip_depth:
            return
        attr = dict(attrs)
        if tag in _HEADINGS:
            self._break()
            self.parts.append("#" * _HEADINGS[tag] + " ")
        elif tag == "li":
            self._break(blank=False)
            self.parts.append("- ")
        elif tag == "br":
            self._break(blank=False)
        elif tag == "hr":
            self._break()
            self.parts.append("---")
            self._break()
        elif tag == "pre":
            self._break()
            self._pre_depth += 1
        elif tag in ("td", "th"):
            self.parts.append(" | ")
        elif tag == "img" and attr.get("alt"):
            self.parts.append(f"[image: {attr['alt']}]")
        elif tag == "a":
            if self._links:  # links do not nest: an <a> ends the open one, as in browsers
                self._close_link()
            self._links.append((attr.get("href") or "", len(self.parts)))
        elif tag in _BLOCK:
            self._break()

    def handle_startendtag(self, tag: str, attrs: List[Tuple[str, Optional[str]]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in _VOID:
            self.handle_endtag(tag)

    def _base(self, href: Optional[str]) -> None:
        if href and not href.lower().startswith(("javascript:", "data:")):
            self._base_seen = True
            self.base_url = urljoin(self.base_url, href.strip())

    def handle_endtag(self, tag: str) -> None:
        if tag == "head":
            self._in_head = False
            return
        if tag == "title" and self._in_title:
            self._in_title = False
            self.title = re.sub(r"\s+", " ", "".join(self._title_parts)).strip() or None
        if tag in _SKIP:
            if tag not in _VOID and self._skip_depth:
                self._skip_depth -= 1
            return
        if self._skip_depth:
            return
        if tag in _HEADINGS or tag in _BLOCK:
            self._break()
        elif tag == "pre":
            self._pre_depth = max(0, self._pre_depth - 1)
            self._break()
        elif tag == "a" and self._links:
            self._close_link()

    def _close_link(self) -> None:
        href, start = self._links.pop()
        text = "".join(self.parts[start:]).strip()
        if not href or href.startswith(("#", "javascript:", "mailto:")) or not text:
            return
        url = urljoin(self.base_url, href)
        del self.parts[start:]
        if self.parts and not self.parts[-1].endswith((" ", "\n")):
            self.parts.append(" ")
        self.parts.append(f"[{text}]({url})")

    def parse_html_declaration(self, i: int) -> int:
        """``<!...>``; a ``<![`` that is no marked section (``<![ x]>``, ``<![0]>``) is skipped up
        to its ``>`` as a bogus comment, as browsers skip it (``html.parser`` raised
        ``AssertionError`` for it, losing the whole page)."""
        try:
            return int(super().parse_html_declaration(i))
        except AssertionError:
            return int(self.parse_bogus_comment(i, report=False))

    def close(self) -> None:
        """Finish the document, in time linear in the rest left unparsed.

        ``HTMLParser.close`` handles an unfinished tail one ``<`` at a time, and scans to the end
        of the document again for each: 100 KB of ``<a<a<a`` took 16 s (2 MB, hours), ignoring
        the run's abort. A tail inside a tag, comment or declaration that the document never
        ends is dropped, as browsers drop it; any other unfinished start tag (one that stops
        short of the end) shows as text up to the next ``<``, as ``html.parser`` shows it.
        """
        while self.rawdata[:1] == "<" and (self.rawdata[1:2].isalpha() or self.rawdata[1:2] in ("/", "!", "?")):
            tail = self.rawdata
            if _runs_to_the_end(tail):
                self.rawdata = ""
                break
            cut = tail.find("<", 1)
            if cut < 0 or self.cdata_elem:  # (an unclosed <script> or <style>: its text, skipped)
                break
            self.rawdata = tail[:cut]
            self.goahead(True)  # the unfinished start tag, as text
            self.rawdata += tail[cut:]
            self.goahead(False)  # on to the next unfinished construct
            if len(self.rawdata) >= len(tail):
                break
        super().close()

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self._title_parts.append(data)
        if self._in_head and not self._skip_depth and data.strip():
            self._in_head = False  # text cannot be in a head: it starts the body, as in a browser
        if not self._skip_depth and not self._in_head:
            self._text(data)


# how html.parser (before Python 3.13.4) reads a start tag: a tag it reads to the very end of
# the document has no end
_START_TAG = getattr(_html_parser, "locatestarttagend_tolerant", None)
_COMMENT_END = re.compile(r"--!?\s*>")


def _runs_to_the_end(tail: str) -> bool:
    """Whether the construct ``tail`` starts with (``<x``, ``</``, ``<!``, ``<?``) never ends."""
    if ">" not in tail or (tail.startswith("<!--") and _COMMENT_END.search(tail, 4) is None):
        return True
    if _START_TAG is None or not tail[1:2].isalpha():
        return False
    match = _START_TAG.match(tail)
    return match is not None and match.end() == len(tail)


_REFRESH = re.compile(r"""\s*[\d.]*\s*[;,]?\s*(?:url\s*=\s*)?(["']?)(.*)""", re.I | re.S)


def _refresh_target(attrs: Dict[str, Optional[str]]) -> Optional[str]:
    """The URL a ``<meta http-equiv="refresh" content="5; url=...">`` sends the reader to, or None
    (no such meta, or one that only reloads the page)."""
    if (attrs.get("http-equiv") or "").strip().lower() != "refresh":
        return None
    match = _REFRESH.match(attrs.get("content") or "")
    if not match:
        return None
    quote, url = match.groups()
    if quote and quote in url:
        url = url[: url.index(quote)]
    url = url.strip()
    return url if url and not url.lower().startswith(("javascript:", "data:")) else None


def html_to_text(html: str, base_url: str = "") -> Tuple[Optional[str], str]:
    """``(title, text)`` of an HTML document; relative links are resolved against its first
    ``<base href>`` (itself resolved against ``base_url``), else against ``base_url``. A page
    that redirects with ``<meta http-equiv="refresh">`` starts with ``[Redirects to <url>]``."""
    parser = _Readable(base_url)
    parser.feed(html)
    parser.close()
    text = "".join(parser.parts)
    if parser.refresh is not None:
        text = f"[Redirects to {urljoin(parser.base_url, parser.refresh)}]\n\n{text}"
    # trailing blanks of every line; not re.sub(r"[ \t]+\n"), which rescans each run of blanks
    # from every position in it: a <pre> of 200000 tabs took 104 s, ignoring the run's abort
    text = "\n".join(line.rstrip(" \t") for line in text.split("\n"))
    text = re.sub(r"\n{3,}", "\n\n", text).strip()
    return parser.title, text

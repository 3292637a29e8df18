"""The style sheet and script inlined into every page of ``sessions export --format html``.

Both are constants, never built from session data: the page's Content-Security-Policy allows
exactly these two by their SHA-256 hashes (:data:`STYLE_HASH`, :data:`SCRIPT_HASH`), so nothing
else can style or script the page, whatever a message contains. The script only reads the page
(the JSON data block and ``data-*`` attributes the renderer wrote) and toggles ``<details>``;
everything it offers also works without it (each branch, tool call and thinking block is a
``<details>`` the reader can open).
"""

from __future__ import annotations

import base64
import hashlib

__all__ = ["STYLE", "SCRIPT", "STYLE_HASH", "SCRIPT_HASH", "csp_hash"]

STYLE = """
:root { --fg: #1a202c; --muted: #718096; --line: #e2e8f0; --bg: #ffffff; --panel: #f7fafc;
  --user: #2b6cb0; --assistant: #2f855a; --tool: #805ad5; --error: #c53030; --note: #b7791f;
  --current: #d69e2e; }
* { box-sizing: border-box; }
body { margin: 0; padding: 1rem 1.5rem 4rem; color: var(--fg); background: var(--bg);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
h1 { font-size: 1.3rem; margin: 0 0 .4rem; overflow-wrap: anywhere; }
code, pre, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; margin: .3rem 0; padding: .4rem .6rem;
  background: var(--panel); border: 1px solid var(--line); border-radius: 4px; }
.session-head { border-bottom: 1px solid var(--line); padding-bottom: .6rem; margin-bottom: .8rem; }
.facts { display: grid; grid-template-columns: max-content 1fr; gap: .1rem .8rem; margin: .3rem 0; }
.facts dt { color: var(--muted); }
.facts dd { margin: 0; overflow-wrap: anywhere; }
table.usage { border-collapse: collapse; margin: .4rem 0; }
table.usage th, table.usage td { border: 1px solid var(--line); padding: .1rem .5rem; text-align: right; }
table.usage th:first-child, table.usage td:first-child { text-align: left; }
.toolbar { margin: .5rem 0; display: flex; gap: .4rem; }
.toolbar button { font: inherit; padding: .15rem .7rem; border: 1px solid var(--line);
  border-radius: 4px; background: var(--panel); cursor: pointer; }
.entry { border-left: 3px solid var(--line); margin: .45rem 0; padding: .15rem .7rem; }
.entry > header { display: flex; flex-wrap: wrap; gap: .5rem; align-items: baseline; font-size: 12px;
  color: var(--muted); }
.entry > header .role { font-weight: 600; font-size: 13px; }
.entry.user { border-color: var(--user); } .entry.user .role { color: var(--user); }
.entry.assistant { border-color: var(--assistant); } .entry.assistant .role { color: var(--assistant); }
.entry.toolResult { border-color: var(--tool); } .entry.toolResult .role { color: var(--tool); }
.entry.error { border-color: var(--error); } .entry.error .role { color: var(--error); }
.entry.note { border-color: transparent; padding-top: 0; padding-bottom: 0; color: var(--muted); }
.entry.summary, .entry.custom { border-color: var(--note); } .entry.summary .role { color: var(--note); }
.entry.on-path { background: linear-gradient(90deg, #fffbea 0, transparent 12rem); }
.entry.leaf { outline: 2px solid var(--current); outline-offset: 2px; }
.badge { border-radius: 3px; padding: 0 .35rem; font-size: 11px; background: var(--line); color: var(--fg); }
.badge.current { background: var(--current); color: #fff; }
.text { white-space: pre-wrap; overflow-wrap: anywhere; margin: .25rem 0; }
.error-text { color: var(--error); white-space: pre-wrap; }
details { margin: .25rem 0; }
details > summary { cursor: pointer; color: var(--muted); overflow-wrap: anywhere; }
details.tool-call > summary, details.tool-result > summary { color: var(--tool); }
details.tool-result.error > summary { color: var(--error); }
details.thinking .text { color: var(--muted); font-style: italic; }
.usage-line { font-size: 12px; color: var(--muted); margin: .2rem 0; }
.fork { margin: .5rem 0 .5rem .3rem; padding-left: .6rem; border-left: 2px dashed var(--muted); }
.fork-note { margin: .2rem 0; font-size: 12px; color: var(--muted); }
details.branch { border: 1px solid var(--line); border-radius: 4px; padding: .2rem .6rem; }
details.branch > summary { color: var(--fg); font-weight: 600; }
details.branch.on-path { border-color: var(--current); }
details.branch > summary .preview { font-weight: normal; color: var(--muted); }
img.attached { max-width: 100%; max-height: 30rem; border: 1px solid var(--line); display: block;
  margin: .3rem 0; }
.placeholder { color: var(--muted); font-style: italic; }
"""

SCRIPT = """
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("session-data").textContent);
  function each(selector, fn) { Array.prototype.forEach.call(document.querySelectorAll(selector), fn); }
  function reveal(el) {
    for (var node = el; node; node = node.parentElement) { if (node.tagName === "DETAILS") { node.open = true; } }
  }
  var actions = {
    expand: function () { each("details", function (d) { d.open = true; }); },
    collapse: function () {
      each("details", function (d) { d.open = d.classList.contains("branch") && d.classList.contains("on-path"); });
    },
    current: function () {
      each("details.branch", function (d) { d.open = d.classList.contains("on-path"); });
      var leaf = data.leaf ? document.getElementById(data.leaf) : null;
      if (leaf) { reveal(leaf); leaf.scrollIntoView({block: "center"}); }
    }
  };
  var bar = document.getElementById("toolbar");
  bar.addEventListener("click", function (event) {
    var action = event.target && event.target.getAttribute && event.target.getAttribute("data-action");
    if (action && Object.prototype.hasOwnProperty.call(actions, action)) { actions[action](); }
  });
  bar.hidden = false;
  function follow() {
    var target = location.hash.length > 1 ? document.getElementById(location.hash.slice(1)) : null;
    if (target) { reveal(target); target.scrollIntoView({block: "center"}); }
  }
  window.addEventListener("hashchange", follow);
  follow();
})();
"""


def csp_hash(text: str) -> str:
    """The CSP source expression (``'sha256-...'``) that allows an inline element with ``text``."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


STYLE_HASH = csp_hash(STYLE)
SCRIPT_HASH = csp_hash(SCRIPT)

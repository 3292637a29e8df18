"""Regression tests for bugs found in the final bug hunt (providers, session, builtin tools, CLI, web)."""

from __future__ import annotations

import os
import re
import signal as _signal
import time
from typing import List

import pytest
from _processes import wait_dead

from agentcore.builtin_tools import create_bash_tool


@pytest.mark.skipif(os.name != "posix", reason="process groups are POSIX-only")
def test_bash_kills_the_command_when_on_update_raises(tmp_path):
    # A failing on_update callback (a UI that crashed) must not leave the command running.
    tool = create_bash_tool(str(tmp_path), update_interval=0.0)
    seen: List[str] = []

    def on_update(partial):
        seen.append(partial.content[0].text)
        raise RuntimeError("display crashed")

    with pytest.raises(RuntimeError, match="display crashed"):
        tool.execute("c1", {"command": 'sleep 100 & echo "pid:$!"; wait'}, None, on_update)
    pids = [int(p) for p in re.findall(r"pid:(\d+)", "".join(seen))]
    assert pids, seen
    try:
        assert wait_dead(pids, within=2.0) == []
    finally:
        for pid in pids:
            try:
                os.kill(pid, _signal.SIGKILL)
            except OSError:
                pass


def test_grep_with_ripgrep_does_not_hang_on_lots_of_stderr(tmp_path, monkeypatch):
    # ripgrep reports each unreadable file on stderr; with thousands of them (a search over a home
    # folder) the stderr pipe filled up, rg blocked writing it and the tool waited forever on stdout.
    import json
    import sys
    import threading

    from agentcore.builtin_tools import create_grep_tool

    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "rg"
    match = {"type": "match", "data": {"path": {"text": "a.txt"}, "lines": {"text": "hello\n"},
                                       "line_number": 1}}
    fake.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        "for i in range(4000):\n"
        "    sys.stderr.write(f'rg: ./dir{i}/file: Permission denied (os error 13)\\n')\n"
        "sys.stderr.flush()\n"
        f"print({json.dumps(json.dumps(match))})\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(bindir) + os.pathsep + os.environ.get("PATH", ""))
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("hello\n")
    tool = create_grep_tool(str(work), use_rg=True)
    box: List[object] = []
    worker = threading.Thread(target=lambda: box.append(tool.execute("c1", {"pattern": "hello"})), daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "grep hung: ripgrep blocked on a full stderr pipe"
    assert "a.txt:1:hello" in box[0].content[0].text


def test_bash_long_crlf_output_never_shows_a_cut_first_line():
    # Output with \r\n line ends (Windows tools, progress bars, `script`): the kept tail is cut
    # at a byte offset, and once \r\n became \n the fragment before the first line break fitted
    # the byte budget, so the result started with half a line ("37" for "000037") and counted it.
    from agentcore.builtin_tools.bash import _Output, _render

    for lines in (55, 96, 137, 506):  # the kept tail was just cut back to its minimum size
        output = _Output(max_lines=1000, max_bytes=100)
        for i in range(lines):
            output.append(b"%06d\r\n" % i)  # one write per line, as a shell loop makes them
        try:
            cut, path = output.snapshot()
            text, details = _render(cut, path)
        finally:
            output.close()
            if output.path:
                os.unlink(output.path)
        shown = text.split("\n\n[Showing")[0].split("\n")
        assert all(re.fullmatch(r"\d{6}", line) for line in shown), (lines, shown)
        assert shown[-1] == "%06d" % (lines - 1)
        info = details["truncation"]
        assert info["outputLines"] == len(shown) and info["totalLines"] == lines


def test_unparseable_retry_after_is_ignored_not_raised():
    # providers §9: Retry-After is seconds or an HTTP date; anything else must not turn a
    # retryable 429/503 into "ValueError: Invalid date value" (Python 3.9: a TypeError).
    from agentcore.providers.http import retry_delay_from_headers

    for value in ("soon", "Mon, 99 Foo 2026", "1e9999x", "  "):
        assert retry_delay_from_headers({"retry-after": value}) is None
    assert retry_delay_from_headers({"retry-after": "2"}) == 2.0


def test_503_with_a_bad_retry_after_is_retried_and_reported_with_the_server_text():
    # providers §9 retries: the 503 is retried with the default back-off, then succeeds.
    import json as _json

    from _servers import Reply, ScriptedServer, sse
    from agentcore.providers import stream
    from agentcore.types import AgentContext, Model, UserMessage

    chunk = {"id": "c1", "object": "chat.completion.chunk", "model": "m",
             "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}
    with ScriptedServer() as server:
        server.enqueue(
            Reply(status=503, content_type="application/json", headers={"Retry-After": "later"},
                  body=_json.dumps({"error": {"message": "overloaded"}})),
            Reply(body=sse(chunk, done=True)))
        model = Model(id="m", api="openai-completions", provider="local", base_url=server.url + "/v1")
        events = stream(model, AgentContext(system_prompt="", messages=[UserMessage("hi")]),
                        api_key="sk-test-secret-key-123")
        result = events.result()
    assert result.stop_reason == "stop", result.error_message
    assert len(server.requests) == 2


def test_fetch_url_timeout_bounds_a_trickling_body():
    # agentcore-web: "an overall deadline of the same length for the body". A server sending one
    # byte at a time (each well within the read timeout) kept the tool waiting until 16 KB had
    # arrived or the body ended, however long that took.
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    web = pytest.importorskip("agentcore_web")
    stop = threading.Event()

    class Trickle(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", "400")
            self.end_headers()
            for _ in range(400):  # 400 bytes over up to 20 s
                if stop.wait(0.05):
                    return
                try:
                    self.wfile.write(b"x")
                    self.wfile.flush()
                except OSError:
                    return

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Trickle)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/slow"
        started = time.monotonic()
        with pytest.raises(web.FetchError, match="timed out"):
            web.fetch_text(url, timeout=0.5)
        assert time.monotonic() - started < 5.0
    finally:
        stop.set()
        httpd.shutdown()
        httpd.server_close()


def test_session_stores_text_with_lone_surrogates(tmp_path):
    # A streamed answer whose emoji was split between two deltas ("\ud83d" then "\ude00", as
    # servers counting UTF-16 units send it) holds two surrogate code points; a truncated one holds
    # one. JSON.stringify (the reference writer) escapes them; here the append raised
    # UnicodeEncodeError (not even a SessionError) and the message was never saved.
    from agentcore.session import Session
    from agentcore.session.entries import encode_line
    from agentcore.types import UserMessage

    split_pair = "smile \ud83d" + "\ude00 ok"
    lone = "cut \ud83d"
    line = encode_line({"text": lone})
    assert b"\\ud83d" in line and json_loads(line) == {"text": lone}
    path = tmp_path / "s.jsonl"
    session = Session.create(path, cwd="/w")
    try:
        session.append_message(UserMessage(split_pair))
        session.append_message(UserMessage(lone))
    finally:
        session.close()
    path.read_bytes().decode("utf-8")  # the file stays valid UTF-8
    reopened = Session.open(path)
    try:
        texts = [e.message.content[0].text if isinstance(e.message.content, list) else e.message.content
                 for e in reopened.get_branch() if e.type == "message"]
    finally:
        reopened.close()
    assert texts == ["smile \U0001F600 ok", lone]


def json_loads(line):
    import json

    return json.loads(line)


def test_read_a_few_lines_of_a_huge_file_keeps_memory_bounded(tmp_path):
    # `read path offset=… limit=10` on a big log loaded the whole file (bytes, str and a list of
    # every line) into memory: a multi-GB log exhausted memory for a 10-line answer.
    import tracemalloc

    from agentcore.builtin_tools import create_read_tool

    big = tmp_path / "big.log"
    line = b"2026-01-01 12:00:00 INFO something happened in module x, all fine\n"
    with open(big, "wb") as f:
        f.write(b"\xef\xbb\xbf" + line * 300_000)  # ~20 MB
    tool = create_read_tool(str(tmp_path))
    tracemalloc.start()
    try:
        result = tool.execute("c1", {"path": "big.log", "offset": 1000, "limit": 10})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    text = result.content[0].text
    assert text.startswith("  1000\t2026-01-01") and "  1009\t" in text and "  1010\t" not in text
    assert "Use offset=1010 to continue" in text
    assert result.details["totalLines"] == 300_000
    assert peak < 4_000_000, f"peak {peak} bytes for a 10-line answer"


def test_markdown_of_an_image_cannot_inject_html():
    # jupyter: "Every piece of message text is escaped". The image's mime type and data went into
    # the Markdown unescaped, so a crafted message (e.g. from a session file or a tool) put live
    # HTML into the notebook's Markdown output.
    from agentcore.jupyter import message_to_markdown
    from agentcore.types import ImageContent, ToolResultMessage

    evil = ImageContent("AAAA) <img src=x onerror=alert(1)> (", 'image/png)<img src=x onerror=alert(2)>')
    message = ToolResultMessage(tool_call_id="t1", tool_name="read", content=[evil], is_error=False, timestamp=1)
    markdown = message_to_markdown(message)
    assert "<img" not in markdown and "<" not in markdown.split("![image]", 1)[1]
    good = ImageContent("iVBORw0KGgo=", "image/png")
    assert "![image](data:image/png;base64,iVBORw0KGgo=)" in message_to_markdown(
        ToolResultMessage(tool_call_id="t1", tool_name="read", content=[good], is_error=False, timestamp=1))


def test_fetch_url_honours_the_html_meta_charset():
    # Pages that declare their encoding only in <meta charset> (no charset in Content-Type) were
    # decoded as UTF-8: every accented letter of a Latin-1 page became U+FFFD.
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    web = pytest.importorskip("agentcore_web")
    pages = {
        "/meta": '<html><head><meta charset="iso-8859-1"><title>Caf\u00e9</title></head>'
                 '<body><p>cr\u00e8me br\u00fbl\u00e9e</p></body></html>',
        "/equiv": '<html><head><meta http-equiv="Content-Type" content="text/html; charset=windows-1252">'
                  '</head><body><p>na\u00efve \u2013 ok</p></body></html>',
    }

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            body = pages[self.path].encode("cp1252")
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{httpd.server_address[1]}"
        page = web.fetch_text(base + "/meta", timeout=5)
        assert page["title"] == "Caf\u00e9" and "cr\u00e8me br\u00fbl\u00e9e" in page["text"]
        assert "na\u00efve \u2013 ok" in web.fetch_text(base + "/equiv", timeout=5)["text"]
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_edit_of_a_large_repetitive_file_is_fast(tmp_path):
    # edit computed firstChangedLine with difflib.SequenceMatcher(autojunk=False), which is about
    # quadratic when lines repeat ("}", blank lines): one edit of a 20,000-line file took ~8 s
    # (a 100,000-line one minutes). The first changed line is where the texts first differ.
    import threading

    from agentcore.builtin_tools import create_edit_tool

    pattern = ["}", "", "    return x", "    pass", "  # comment"]
    lines = [pattern[i % 5] if i % 7 else f"def f{i}():" for i in range(20000)]
    lines[12000] = "UNIQUE_MARKER"
    (tmp_path / "big.py").write_text("\n".join(lines) + "\n")
    tool = create_edit_tool(str(tmp_path))
    box: List[object] = []
    worker = threading.Thread(target=lambda: box.append(tool.execute(
        "c1", {"path": "big.py", "edits": [{"oldText": "UNIQUE_MARKER", "newText": "CHANGED\nTWICE"}]})),
        daemon=True)
    worker.start()
    worker.join(3.0)  # a generous bound for a linear-time job (it takes milliseconds)
    assert not worker.is_alive(), "edit took more than 3 s for a one-line change"
    result = box[0]
    assert result.details["firstChangedLine"] == 12001
    assert "-UNIQUE_MARKER\n+CHANGED\n+TWICE\n" in result.details["diff"]


def test_sessions_export_jsonl_is_the_reference_encoding(tmp_path):
    # `agentcore sessions export --format jsonl` promises reference JSONL: it used json.dumps
    # (spaces after separators, Python floats like 0.0, raw lone surrogates that made writing
    # the export fail with UnicodeEncodeError) instead of the session files' own encoding.
    import io

    from agentcore.cli import main
    from agentcore.session import Session
    from agentcore.types import AssistantMessage, TextContent, Usage, UserMessage

    path = tmp_path / "s.jsonl"
    session = Session.create(path, cwd="/w")
    session.append_message(UserMessage([TextContent("cut \ud83d")], timestamp=1))
    session.append_message(AssistantMessage(content=[TextContent("yo")], api="x", provider="p", model="m",
                                            usage=Usage(), stop_reason="stop", timestamp=2))
    session.close()
    out, err = io.StringIO(), io.StringIO()
    assert main(["sessions", "export", str(path), "--format", "jsonl"], stdout=out, stderr=err) == 0, err.getvalue()
    exported = out.getvalue()
    exported.encode("utf-8")  # writable to any UTF-8 stream or file
    assert exported == path.read_text(encoding="utf-8")
    for fmt in ("json", "markdown", "html"):
        out = io.StringIO()
        assert main(["sessions", "export", str(path), "--format", fmt], stdout=out, stderr=err) == 0
        out.getvalue().encode("utf-8")


def test_provider_stream_accepts_a_threading_event_as_signal():
    # providers §3: abort is "a threading.Event-like signal checked between SSE lines". Passing a
    # threading.Event raised AttributeError out of the stream (a stream fn must never raise).
    import threading

    from _servers import Reply, ScriptedServer, sse
    from agentcore.providers import stream
    from agentcore.types import AgentContext, Model, UserMessage

    def chunk(text, finish=None):
        return {"id": "c1", "object": "chat.completion.chunk", "model": "m",
                "choices": [{"index": 0, "delta": {"content": text} if text else {}, "finish_reason": finish}]}

    context = AgentContext(system_prompt="", messages=[UserMessage("hi")])
    with ScriptedServer() as server:
        model = Model(id="m", api="openai-completions", provider="local", base_url=server.url + "/v1")
        server.enqueue(Reply(body=sse(chunk("a"), chunk("b"), chunk("c"), chunk(None, "stop"), done=True),
                             chunk_size=40))
        event = threading.Event()
        assert stream(model, context, api_key="sk-test-secret-key-123", signal=event).result().stop_reason == "stop"

        event.set()  # already set: nothing is sent
        done = stream(model, context, api_key="sk-test-secret-key-123", signal=event).result()
        assert (done.stop_reason, done.error_message) == ("aborted", "Request was aborted")

        server.enqueue(Reply(body=sse(chunk("a"), chunk("b"), chunk("c"), chunk(None, "stop"), done=True),
                             chunk_size=40))
        event = threading.Event()
        events = stream(model, context, api_key="sk-test-secret-key-123", signal=event)
        for item in events:
            if item.type == "text_delta":
                event.set()  # set between events: the stream stops at the next one
        done = events.result()
        assert done.stop_reason == "aborted"


def test_abort_while_reading_an_error_body_returns_promptly():
    # providers §9: an abort ends the request within moments. While the body of a non-2xx reply
    # was read (for the error message) nothing listened to the signal, so a server stalling
    # in its error body held an aborted run for the whole read timeout (600 s by default).
    import json as _json
    import threading

    from _servers import Reply, ScriptedServer
    from agentcore.providers import stream
    from agentcore.signals import AbortController
    from agentcore.types import AgentContext, Model, UserMessage

    with ScriptedServer() as server:
        server.enqueue(Reply(status=500, content_type="application/json", chunked=False, stall_after=10,
                             body=_json.dumps({"error": {"message": "x" * 1000}})))
        model = Model(id="m", api="openai-completions", provider="local", base_url=server.url + "/v1")
        controller = AbortController()
        threading.Thread(target=lambda: server.headers_sent.wait(10) and controller.abort(), daemon=True).start()
        started = time.monotonic()
        result = stream(model, AgentContext(system_prompt="", messages=[UserMessage("hi")]),
                        api_key="sk-test-secret-key-123", signal=controller.signal, max_retries=0,
                        timeout=(5, 30)).result()
        elapsed = time.monotonic() - started
    assert (result.stop_reason, result.error_message) == ("aborted", "Request was aborted")
    assert elapsed < 10, f"abort took {elapsed:.1f} s"

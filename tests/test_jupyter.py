"""Notebook display (issue 7 item 3): HTML/Markdown rendering (always escaped) and display_run
with a fake display object; the IPython integration test needs IPython."""

from __future__ import annotations

import re
import sys
import threading
import time
from typing import Any, List

import pytest

from agentcore import Agent, jupyter
from agentcore.jupyter import (
    MessageView,
    Transcript,
    disable_rich_display,
    display_run,
    enable_rich_display,
    message_to_html,
    message_to_markdown,
    transcript_to_html,
    transcript_to_markdown,
)
from agentcore.testing import ScriptedModel, thinking, tool_call
from agentcore.testing import text as say
from agentcore.tools import AgentTool, AgentToolResult
from agentcore.types import (
    AssistantMessage,
    BashExecutionMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

EVIL = "<script>alert('x')</script>"


def _assistant(*blocks: Any, **kw: Any) -> AssistantMessage:
    return AssistantMessage(content=list(blocks), api="scripted", provider="scripted", model="m", **kw)


# --------------------------------------------------------------------------- rendering


def test_html_escapes_every_piece_of_message_text():
    messages = [
        UserMessage(content=EVIL),
        _assistant(ThinkingContent(EVIL), TextContent(EVIL), ToolCall(id="1", name=EVIL, arguments={"a": EVIL})),
        ToolResultMessage(tool_call_id="1", tool_name=EVIL, content=[TextContent(EVIL)], is_error=True),
        _assistant(stop_reason="error", error_message=EVIL),
        BashExecutionMessage(command=EVIL, output=EVIL, exit_code=0),
    ]
    rendered = transcript_to_html(messages)
    assert "<script>" not in rendered
    assert rendered.count("&lt;script&gt;") == 10  # each of the ten texts above
    assert rendered.index("User") < rendered.index("Assistant") < rendered.index("Tool result")


def test_html_shows_roles_errors_and_images():
    image = ImageContent(data="aGVsbG8=", mime_type="image/png")
    html = message_to_html(
        ToolResultMessage(tool_call_id="1", tool_name="read", content=[TextContent("Read image file"), image])
    )
    assert '<img src="data:image/png;base64,aGVsbG8="' in html and "Tool result: read" in html
    failed = message_to_html(_assistant(TextContent("partial"), stop_reason="error", error_message="boom"))
    assert "Error (error):</b> boom" in failed


def test_long_tool_output_is_collapsed_in_html():
    short = message_to_html(ToolResultMessage(tool_call_id="1", tool_name="bash", content=[TextContent("ok")]))
    long = message_to_html(
        ToolResultMessage(tool_call_id="1", tool_name="bash", content=[TextContent("\n".join(map(str, range(50))))])
    )
    assert "<details>" not in short and "<details><summary>50 lines</summary>" in long


def test_markdown_escapes_html_outside_code_and_keeps_code_literal():
    message = _assistant(TextContent(f"use `a<b` here {EVIL}\n```py\nif a < b:\n    pass\n```"))
    md = message_to_markdown(message)
    assert "<script>" not in md and "&lt;script&gt;" in md
    assert "`a<b`" in md and "if a < b:" in md


@pytest.mark.parametrize(
    "text",
    [
        "see ~~~<img src=x onerror=alert(1)>~~~",  # ~~~ fences only at the start of a line
        "\\`<img src=x onerror=alert(1)>`",  # an escaped backtick opens no code span
        "    ```\n<img src=x onerror=alert(1)>\n    ```",  # 4 spaces: an indented block, then raw HTML
        "`a\n\n<img src=x onerror=alert(1)>`",  # a blank line ends the paragraph, and the span
    ],
)
def test_markdown_escapes_html_that_only_looks_like_code(text):
    md = message_to_markdown(UserMessage(text))
    assert "<img" not in md and "&lt;img src=x onerror=alert(1)&gt;" in md


def test_markdown_tool_calls_and_results_use_fences_that_cannot_be_closed_early():
    message = _assistant(ToolCall(id="1", name="bash", arguments={"command": "echo ```"}))
    md = message_to_markdown(message)
    assert "**→ bash**" in md and "````json\n" in md
    result = message_to_markdown(
        ToolResultMessage(tool_call_id="1", tool_name="bash", content=[TextContent(f"```\n{EVIL}")], is_error=True)
    )
    assert result.startswith("**Tool result: bash (error)**") and "````\n```\n" in result


def test_reference_dicts_render_like_objects():
    user = UserMessage(content="hello", timestamp=1)
    assert message_to_markdown(user.to_dict()) == message_to_markdown(user) == "**User**\n\nhello"
    assert transcript_to_markdown([user, user]) == "**User**\n\nhello\n\n---\n\n**User**\n\nhello"


def test_a_summary_a_session_left_null_renders_as_an_empty_one():
    """A ``compactionSummary``/``branchSummary`` entry whose summary is null (the types accept it)
    failed the Markdown view with ``TypeError: expected string or bytes-like object`` from a
    regular expression, and the HTML view showed "None"."""
    compaction = {"role": "compactionSummary", "summary": None, "tokensBefore": 1, "timestamp": 1}
    branch = {"role": "branchSummary", "summary": None, "fromId": "ab12cd34", "timestamp": 1}
    assert transcript_to_markdown([compaction, branch]) == (
        "**Compaction summary**\n\n\n\n---\n\n**Branch summary**\n\n"
    )
    assert "None" not in transcript_to_html([compaction, branch])


def test_wrappers_and_rich_display_hooks():
    messages = [UserMessage(content="hi"), _assistant(TextContent("hello"))]
    assert Transcript(messages)._repr_html_() == transcript_to_html(messages)
    assert Transcript(messages)._repr_markdown_() == transcript_to_markdown(messages)
    partial = MessageView(AgentToolResult(content=[TextContent(EVIL)]), name="bash")
    assert "&lt;script&gt;" in partial._repr_html_() and "bash" in partial._repr_markdown_()
    enable_rich_display()
    try:
        assert messages[1]._repr_html_() == message_to_html(messages[1])
        assert "&lt;script&gt;" in AgentToolResult(content=[TextContent(EVIL)])._repr_html_()
    finally:
        disable_rich_display()
    assert not hasattr(messages[1], "_repr_html_") and not hasattr(AgentToolResult(), "_repr_html_")


def test_markdown_of_an_image_cannot_inject_html():
    # jupyter: "Every piece of message text is escaped". The image's mime type and data went into
    # the Markdown unescaped, so a crafted message (e.g. from a session file or a tool) put live
    # HTML into the notebook's Markdown output.
    from agentcore.jupyter import message_to_markdown
    from agentcore.types import ImageContent, ToolResultMessage

    evil = ImageContent("AAAA) <img src=x onerror=alert(1)> (", "image/png)<img src=x onerror=alert(2)>")
    message = ToolResultMessage(tool_call_id="t1", tool_name="read", content=[evil], is_error=False, timestamp=1)
    markdown = message_to_markdown(message)
    assert "<img" not in markdown and "<" not in markdown.split("![image]", 1)[1]
    good = ImageContent("iVBORw0KGgo=", "image/png")
    assert "![image](data:image/png;base64,iVBORw0KGgo=)" in message_to_markdown(
        ToolResultMessage(tool_call_id="t1", tool_name="read", content=[good], is_error=False, timestamp=1)
    )


IMG = "<img src=x onerror=alert(1)>"


@pytest.mark.parametrize(
    "text",
    [
        f"```\nx\n````\n{IMG}\n```",  # a longer fence closes the block: the HTML is after it
        f"- a\n\n  ```\n{IMG}\n```",  # the list item's block ends with the item, before the HTML
        f"- ```\n  ```\n  {IMG}\n  ```",  # the item's block is closed by the indented fence
        f"~~~ `x`\nq\n~~~\n{IMG}\n~~~",  # backticks are allowed in a ~~~ fence's info string
        f"1. a\n\n   ```\n{IMG}\n   ```",  # a line less indented than the fence ends the item, and it
        f"1. a\n   ```\n      ```\n   {IMG}\n   ```",  # 6 spaces close the item's block, not a block at 3
        f"- ```\n  ````x\n  ```\n  {IMG}\n  ````",  # the item's own block is closed before the HTML
        f"- a\n\n    ```\n  ````x\n  ```\n  {IMG}\n  ````",  # 4 spaces open a block in the item too
        f"- a\n\n \t```\n  ````x\n  ```\n  {IMG}\n  ````",  # so does a tab
        f"- a\n\n \t```\n  ~~~~x\n{IMG}\n  ````\n   {IMG}\n   ````",  # marked: a line not indented stays in it
        f"`x\n`{IMG}`y`",  # a code span across a line break pairs the runs the other way
        f"```\rx\r````\r{IMG}\r```",  # a lone carriage return ends a line too
        f"| `a |{IMG}` |\n|---|---|",  # a table cell ends at the pipe, inside what looks like a span
    ],
)
def test_markdown_escapes_html_that_a_renderer_shows_outside_code(text):
    # CommonMark: a closing fence is at least as long as the opening one; a container's fence ends
    # with the container; spans pair across line breaks. Each of these showed the image as HTML.
    for markdown in (
        message_to_markdown(UserMessage(text)),
        message_to_markdown(_assistant(ThinkingContent(text), TextContent("ok"))),
        message_to_markdown(_assistant(ToolCall(id="1", name=text, arguments={}))),
    ):
        assert "<img" not in markdown and "&lt;img src=x onerror=alert(1)&gt;" in markdown


@pytest.mark.parametrize("text", ["```\nx\n```", "```\nx\n```\nok", "one\n```", "```python\nprint(1)", "~~~\r"])
def test_markdown_text_on_a_line_of_its_own_cannot_open_or_leave_open_a_fence(text):
    """Text after a title on the same line (a tool or tool-result name, an error, the thinking's
    label) is not at the start of a line, so a fence in its first line is text to a renderer; and
    a fence never closed would swallow what follows up to the next fence, such as a tool output's,
    and show that output as HTML. So no fence is left open."""
    result = ToolResultMessage(tool_call_id="1", tool_name="t", content=[TextContent(IMG)])
    messages = [
        _assistant(ThinkingContent(text), TextContent(text), ToolCall(id="1", name=text, arguments={})),
        _assistant(stop_reason="error", error_message=text),
        ToolResultMessage(tool_call_id="1", tool_name=text, content=[TextContent("x")]),
        result,
    ]
    markdown = transcript_to_markdown(messages)
    assert markdown.endswith(message_to_markdown(result))
    assert "<img" not in markdown[: -len(message_to_markdown(result))]
    fences = re.findall(r"^ {0,3}(`{3,}|~{3,})", markdown, re.MULTILINE)
    assert len(fences) % 2 == 0, markdown  # every fence that opens a block closes one


def test_markdown_keeps_fenced_blocks_and_code_spans_literal():
    text = "use `a<b` and ``x`y`` here\n\n```py\nif a < b:\n```\n\n~~~~\n<b>\n~~~~~\nafter <b>"
    markdown = message_to_markdown(UserMessage(text))
    assert "`a<b`" in markdown and "``x`y``" in markdown and "```py\nif a < b:\n```" in markdown
    assert "~~~~\n<b>\n~~~~~" in markdown and "after &lt;b&gt;" in markdown


@pytest.mark.parametrize(
    "text",
    [
        "1. Install it:\n\n   ```bash\n   pip install 'a<2'\n   ```\n2. Run it",
        "1. Install it:\n   ```bash\n   pip install 'a<2'\n   ```\n2. Run it",
        "- Install it:\n  ```bash\n  pip install 'a<2'\n\n  ```\n- Run it",
        "Install it:\n\n  ```bash\n  pip install 'a<2'\n  ```",
    ],
)
def test_markdown_shows_a_fence_indented_in_a_list_item_as_code(text):
    # CommonMark: a fence may be indented 0-3 spaces, and one in a list item is indented like the
    # item's text. Such a block was shown as text: fences escaped ("\```"), its code as HTML
    # entities ("pip install &#x27;a&lt;2&#x27;" in the notebook).
    for markdown in (
        message_to_markdown(UserMessage(text)),
        message_to_markdown(_assistant(ThinkingContent(text), TextContent("ok"))),
    ):
        assert "\\`" not in markdown and "&lt;" not in markdown
        fence = re.search(r"^(?:> )?( *)```bash\n(?:> )?\1pip install 'a<2'\n", markdown, re.MULTILINE)
        assert fence is not None, markdown


def test_text_blocks_one_after_another_are_made_safe_as_one_text():
    # The Markdown puts them one after the other: a list item's block the first leaves open goes
    # on in the second, so the second's indented fence is no fence of its own there.
    message = _assistant(TextContent("Steps:\n- ```"), TextContent(f"  ````x\n  ```\n  {IMG}\n  ````"))
    markdown = message_to_markdown(message)
    assert "<img" not in markdown and "&lt;img src=x onerror=alert(1)&gt;" in markdown
    assert (
        message_to_markdown(_assistant(TextContent("a <b>"), TextContent("c"))) == "**Assistant**\n\na &lt;b&gt;\n\nc"
    )


def test_the_title_of_a_message_of_an_unknown_role_is_escaped():
    # A message of a role this version does not know (a newer session file's, kept as read) is
    # titled with its role: the HTML escaped it, the Markdown put it in as it was.
    message = {"role": IMG, "content": "x", "timestamp": 1}
    assert "<img" not in transcript_to_html([message])
    assert message_to_markdown(message) == "**&lt;img src=x onerror=alert(1)&gt;**"


def test_a_tab_in_the_thinking_cannot_close_its_fence_inside_the_quote():
    # The thinking is a block quote ("> " before each line). There a tab before a fence reaches
    # column 4 from column 2, so "\t```" is indented 2, a closing fence, while in the text it is
    # indented 4, code: the fence was kept as a block and the quote closed it before the HTML.
    markdown = message_to_markdown(_assistant(ThinkingContent(f"```\n\t```\n{IMG}\n```"), TextContent("ok")))
    assert f"> ```\n>     ```\n> {IMG}\n> ```" in markdown and "\t" not in markdown


def test_a_link_in_the_markdown_cannot_run_script():
    # "Every piece of message text is escaped": yet "[docs](javascript:...)" in an answer, an error
    # or a tool's name became a live link (<a href="javascript:...">) in the Markdown view; a
    # backslash before the colon is removed by the renderer, so it counts as well.
    text = "[docs](javascript:alert(1)) and\n\n[ref]: JavaScript\\:alert(2)\n\n[x][ref] [y](VBScript:msgbox(3))"
    markdown = transcript_to_markdown(
        [
            UserMessage(text),
            _assistant(
                ThinkingContent(text),
                ToolCall(id="1", name=text, arguments={}),
                stop_reason="error",
                error_message=text,
            ),
        ]
    )
    assert not re.search(r"(?i)(java|vb)script\\?:", markdown)
    assert markdown.count("java\u200bscript:") == 4 and markdown.count("Java\u200bScript\\:") == 4
    kept = message_to_markdown(UserMessage("`javascript:void(0)` in code\n```js\nlocation = 'javascript:x'\n```"))
    assert "`javascript:void(0)`" in kept and "location = 'javascript:x'" in kept


def test_markdown_of_a_long_text_of_odd_fences_takes_linear_time():
    # Every line opened a fence that no later line closed: each was searched to the end of the
    # text, so a 60 KB answer took seconds (a megabyte, hours) on every drawing of a live run.
    for unit in ("```a\n", "````\n```x\n", "`x``x```", "   ````x\n   ```\n", "  ```a\n  x\n", "- ```\n  ```\n"):
        text = unit * (60_000 // len(unit))
        started = time.perf_counter()
        markdown = message_to_markdown(_assistant(TextContent(text)))
        assert time.perf_counter() - started < 2.0 and len(markdown) >= len(text)


# --------------------------------------------------------------------------- display_run


class FakeHandle:
    def __init__(self, display: FakeDisplay, index: int) -> None:
        self._display = display
        self.index = index

    def update(self, obj: Any) -> None:
        self._display.record(self.index, obj)


class FakeDisplay:
    """A notebook's output area: ``display(obj, display_id=True)`` appends an output and returns a
    handle whose ``update(obj)`` replaces that output's content. Records every message sent
    (``sent``: its HTML; ``payload``: the bytes of its HTML, Markdown and plain text, the three
    formats IPython sends); ``on_html(html)`` may react (set events, raise) once it is recorded."""

    def __init__(self, on_html: Any = None) -> None:
        self.outputs: List[str] = []  # each output's current HTML, top to bottom
        self.sent: List[str] = []
        self.payload = 0
        self.display_calls = 0
        self.on_html = on_html

    def __call__(self, obj: Any, display_id: bool = False) -> FakeHandle:
        assert display_id is True
        self.display_calls += 1
        self.outputs.append("")
        handle = FakeHandle(self, len(self.outputs) - 1)
        self.record(handle.index, obj)
        return handle

    def record(self, index: int, obj: Any) -> None:
        html, markdown, plain = obj._repr_html_(), obj._repr_markdown_(), repr(obj)
        assert bool(markdown) == bool(html)
        self.outputs[index] = html
        self.sent.append(html)
        self.payload += sum(len(text.encode("utf-8")) for text in (html, markdown, plain))
        if self.on_html is not None:
            self.on_html(html)

    @property
    def view(self) -> str:
        """What the notebook shows in the end: every output's last content, top to bottom."""
        return "".join(self.outputs)


def _progress_tool(release: threading.Event, saw_abort: List[bool]) -> AgentTool:
    def execute(tool_call_id, args, signal, on_update):
        on_update(AgentToolResult(content=[TextContent("step 1 of 2")]))
        release.wait(10)  # until the display showed the progress (or the run was aborted)
        saw_abort.append(signal.aborted)
        if signal.aborted:
            raise RuntimeError("stopped")
        return AgentToolResult(content=[TextContent("all done")])

    return AgentTool("work", "does work", {"type": "object", "properties": {}}, execute)


def _abortable_progress_tool(release: threading.Event, saw_abort: List[bool], started: threading.Event) -> AgentTool:
    """:func:`_progress_tool` that sets ``started`` when it runs and is woken by an abort."""
    tool = _progress_tool(release, saw_abort)
    original = tool.execute

    def execute(*args: Any) -> Any:
        args[2].add_listener(lambda _reason: release.set())  # abort wakes the tool
        started.set()
        return original(*args)

    tool.execute = execute
    return tool


def test_display_run_shows_streaming_tool_progress_and_the_final_answer():
    release = threading.Event()
    saw_abort: List[bool] = []

    def on_html(html: str) -> None:
        if "step 1 of 2" in html and "work (running)" in html:
            release.set()

    fake = FakeDisplay(on_html)
    model = ScriptedModel([tool_call("work", {}, text="Working <on> it."), say("Finished & done.")])
    agent = Agent(model.model, tools=[_progress_tool(release, saw_abort)], stream_fn=model.stream_fn)
    new = display_run(agent, "go", display=fake, throttle=0.0)
    assert release.is_set() and saw_abort == [False]
    final = fake.view
    assert "Working &lt;on&gt; it." in final and "Finished &amp; done." in final and "all done" in final
    assert "(running)" not in final and re.search(r'class="agentcore-status"[^>]*>done<', final)
    assert new == agent.state.messages
    assert [m.role for m in new] == ["user", "assistant", "toolResult", "assistant"]


def _drawings(fake: FakeDisplay) -> List[str]:
    """The HTML of each drawing of the live view (each ends with the status line)."""
    return [html for html in fake.sent if 'class="agentcore-status"' in html]


def test_display_run_throttles_updates():
    model = ScriptedModel([say("one two three four five six")], tokens_per_second=1000)
    agent = Agent(model.model, stream_fn=model.stream_fn)
    fast, slow = FakeDisplay(), FakeDisplay()
    display_run(agent, "a", display=fast, throttle=0.0)
    model.push(say("one two three four five six"))
    display_run(agent, "b", display=slow, throttle=3600)
    assert len(_drawings(slow)) == 2  # the first drawing and the final one only
    assert len(_drawings(fast)) > len(_drawings(slow))


def test_keyboard_interrupt_aborts_the_run_cleanly_and_reraises():
    release = threading.Event()
    started = threading.Event()
    saw_abort: List[bool] = []
    interrupted = []

    def on_html(html: str) -> None:
        if "work (running)" in html and not interrupted:
            interrupted.append(True)
            # "running" is drawn at tool_execution_start, just before execute() is called: wait
            # until the tool really runs, or the abort can land first and the tool never starts
            assert started.wait(10), "the tool never started"
            raise KeyboardInterrupt  # as if the kernel were interrupted while rendering

    fake = FakeDisplay(on_html)
    model = ScriptedModel([tool_call("work", {}), say("never reached")])
    tool = _abortable_progress_tool(release, saw_abort, started)
    agent = Agent(model.model, tools=[tool], stream_fn=model.stream_fn)
    with pytest.raises(KeyboardInterrupt):
        display_run(agent, "go", display=fake, throttle=0.0)
    assert saw_abort == [True]
    assert not agent.state.is_streaming
    assert "interrupted: run aborted" in fake.view
    roles = [m.role for m in agent.state.messages]
    assert roles[:3] == ["user", "assistant", "toolResult"] and "never reached" not in str(agent.state.messages)
    assert agent.state.messages[2].is_error is True
    assert "(running)" not in fake.view  # the tool's box was left drawn as still running


def test_a_failing_display_aborts_the_run_before_its_error_is_raised():
    """The front end fails while a tool runs: display_run re-raises that error, but only once the
    run was aborted and has settled (the tool got the abort signal, the transcript is complete),
    so the next cell can prompt the agent instead of finding it busy with a run nobody sees."""
    release = threading.Event()
    started = threading.Event()
    saw_abort: List[bool] = []

    def on_html(html: str) -> None:
        if "work (running)" in html:
            assert started.wait(10), "the tool never started"
            raise ConnectionError("the front end went away")

    model = ScriptedModel([tool_call("work", {}), say("second answer")])
    tool = _abortable_progress_tool(release, saw_abort, started)
    agent = Agent(model.model, tools=[tool], stream_fn=model.stream_fn)
    with pytest.raises(ConnectionError, match="the front end went away"):
        display_run(agent, "go", display=FakeDisplay(on_html), throttle=0.0)
    assert saw_abort == [True] and not agent.state.is_streaming
    assert [m.role for m in agent.state.messages] == ["user", "assistant", "toolResult", "assistant"]
    assert agent.state.messages[-1].stop_reason == "aborted" and agent.state.messages[2].is_error
    assert agent.prompt("again")[-1].content[0].text == "second answer"


def test_a_tools_progress_given_as_a_string_is_shown():
    """``on_update("...")`` with the string a ``@tool`` function may return: the loop passes it
    through, and the display showed it by failing the cell (``'str' object has no attribute``)."""
    release = threading.Event()

    def execute(tool_call_id, args, signal, on_update):
        on_update("halfway <there>")
        release.wait(10)
        return AgentToolResult(content=[TextContent("all done")])

    def on_html(html: str) -> None:
        if "halfway &lt;there&gt;" in html:
            release.set()

    fake = FakeDisplay(on_html)
    tool = AgentTool("work", "does work", {"type": "object", "properties": {}}, execute)
    model = ScriptedModel([tool_call("work", {}), say("Finished.")])
    agent = Agent(model.model, tools=[tool], stream_fn=model.stream_fn)
    display_run(agent, "go", display=fake, throttle=0.0)
    assert release.is_set() and "Finished." in fake.view and "all done" in fake.view


def test_display_run_reports_its_own_run_when_another_starts_at_once(monkeypatch):
    """The outcome and a late Ctrl+C used to go by the agent's state, which a run another thread
    starts right after display_run's run settled has already taken over: a failed run was shown as
    *done*, and the interrupt aborted (and showed) the other thread's run."""
    from agentcore.testing import error

    started = threading.Event()

    def waits_for_abort(tool_call_id, args, signal, on_update):
        started.set()
        signal.wait(30)
        return AgentToolResult([TextContent("stopped")])

    tool = AgentTool("wait", "Waits.", {"type": "object", "properties": {}}, waits_for_abort)
    follow = jupyter._follow
    interrupt = []

    def follow_then_another_run(*args, **kwargs):
        follow(*args, **kwargs)  # display_run's run has settled: the agent is idle
        agent.prompt("another thread's task", wait=False)
        assert started.wait(30)
        if interrupt:
            raise KeyboardInterrupt  # Ctrl+C, landing before display_run saw the end

    monkeypatch.setattr(jupyter, "_follow", follow_then_another_run)
    model = ScriptedModel([error("model exploded"), tool_call("wait", {})])
    agent = Agent(model.model, tools=[tool], stream_fn=model.stream_fn)
    fake = FakeDisplay()
    display_run(agent, "hi", display=fake, throttle=0.0)
    assert "failed: model exploded" in fake.view
    agent.abort()
    assert agent.wait_for_idle(30)

    started.clear()
    interrupt.append(True)
    model = ScriptedModel([say("mine"), tool_call("wait", {})])
    agent = Agent(model.model, tools=[tool], stream_fn=model.stream_fn)
    fake = FakeDisplay()
    with pytest.raises(KeyboardInterrupt):
        display_run(agent, "again", display=fake, throttle=0.0)
    assert agent.state.is_streaming  # the other thread's run was left alone
    assert "another thread" not in fake.view
    agent.abort()
    assert agent.wait_for_idle(30)


def test_display_run_of_a_busy_agent_shows_nothing_and_raises():
    """The display was shown before the busy check, leaving an output stuck at *running*."""
    release = threading.Event()
    model = ScriptedModel([tool_call("work", {}), say("done")])
    agent = Agent(model.model, tools=[_progress_tool(release, [])], stream_fn=model.stream_fn)
    agent.prompt("first", wait=False)
    fake = FakeDisplay()
    try:
        with pytest.raises(RuntimeError):
            display_run(agent, "while busy", display=fake, throttle=0.0)
        assert fake.display_calls == 0
    finally:
        release.set()
        agent.wait_for_idle(10)


def test_terminal_colour_codes_are_dropped_from_html():
    html_text = transcript_to_html([UserMessage("plain \x1b[31mRED\x1b[0m text\x07 end")])
    assert "RED" in html_text and "\x1b" not in html_text and "[31m" not in html_text and "\x07" not in html_text


def _record_ipython_display(monkeypatch: Any) -> List[Any]:
    """Replace ``IPython.display.display`` with one that records what it is given (and what its
    handle's ``update`` is given); returns that list."""
    pytest.importorskip("IPython")
    import IPython.display

    shown: List[Any] = []

    class Handle:
        def update(self, obj: Any) -> None:
            shown.append(obj)

    def display(obj: Any, display_id: bool = False) -> Handle:
        shown.append(obj)
        return Handle()

    monkeypatch.setattr(IPython.display, "display", display)
    return shown


def test_display_run_uses_ipython_display_by_default(monkeypatch):
    shown = _record_ipython_display(monkeypatch)
    from IPython.core.formatters import DisplayFormatter

    model = ScriptedModel([say("hello <world>")])
    display_run(Agent(model.model, stream_fn=model.stream_fn), "hi", throttle=0.0)
    bundle, _ = DisplayFormatter().format(shown[-1])
    assert "hello &lt;world&gt;" in bundle["text/html"]
    assert "hello &lt;world&gt;" in bundle["text/markdown"]


def test_display_run_without_ipython_says_so_before_running(monkeypatch):
    """In a plain Python process without IPython, the whole run (model requests, tools) ran unseen
    and only then did display_run fail for want of IPython, losing what it returns."""
    monkeypatch.setitem(sys.modules, "IPython", None)
    monkeypatch.setitem(sys.modules, "IPython.display", None)
    model = ScriptedModel([say("never requested")])
    agent = Agent(model.model, stream_fn=model.stream_fn)
    with pytest.raises(ImportError, match=r"display_run needs IPython \(pip install ipython\), or pass display="):
        display_run(agent, "hi")
    assert agent.messages == [] and not agent.state.is_streaming


@pytest.mark.parametrize("throttle", [None, "0.1", float("nan"), -1])
def test_a_wrong_throttle_is_named_before_the_run_starts(throttle):
    """A throttle that is no number of seconds failed deep in the drawing loop ("'>=' not
    supported between instances of 'float' and 'NoneType'") once the run was under way, so the
    model had been asked and the run was aborted; NaN never drew until the end."""
    model = ScriptedModel([say("never requested")])
    agent = Agent(model.model, stream_fn=model.stream_fn)
    fake = FakeDisplay()
    with pytest.raises((TypeError, ValueError), match=r"display_run: throttle must be a number of seconds"):
        display_run(agent, "hi", display=fake, throttle=throttle)
    assert agent.messages == [] and fake.display_calls == 0


def test_an_interrupt_while_the_display_is_set_up_leaves_no_run_going(monkeypatch):
    """The run started before the live output was set up, outside the ``try`` that aborts it: an
    interrupt landing there (the kernel interrupted just after the cell started) left the run
    going unseen, the agent busy and its tools running."""
    _record_ipython_display(monkeypatch)
    release, started = threading.Event(), threading.Event()
    saw_abort: List[bool] = []
    model = ScriptedModel([tool_call("work", {}), say("never reached")])
    agent = Agent(model.model, tools=[_abortable_progress_tool(release, saw_abort, started)], stream_fn=model.stream_fn)

    def in_kernel() -> bool:  # what display_run asks while setting up: the interrupt lands here
        if agent.state.is_streaming:
            assert started.wait(10), "the tool never started"
        raise KeyboardInterrupt

    monkeypatch.setattr(jupyter, "_in_kernel", in_kernel)
    try:
        with pytest.raises(KeyboardInterrupt):
            display_run(agent, "go")
        assert not agent.state.is_streaming and saw_abort in ([], [True])
    finally:
        release.set()
        agent.wait_for_idle(10)


def test_importing_the_module_does_not_import_ipython():
    import subprocess

    code = "import sys, agentcore.jupyter; print('IPython' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def test_display_as_a_cells_last_line_does_not_echo_the_messages():  # issue 10 item 13
    model = ScriptedModel([say("hello")])
    agent = Agent(model.model, stream_fn=model.stream_fn)
    result = agent.display("hi", display=FakeDisplay(), throttle=0.0)
    assert result == agent.state.messages and isinstance(result, list)
    try:
        from IPython.core.formatters import DisplayFormatter
    except ImportError:
        assert result._ipython_display_() is None  # what IPython calls instead of showing a repr
        return
    assert DisplayFormatter().format(result) == ({}, {})  # nothing is shown under the live display


def test_json_blocks_survive_values_json_cannot_hold():  # issue 10 item 2 (class: JSON encoders)
    from agentcore.jupyter import _json

    class Unprintable:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    text = _json({"nan": float("nan"), "raw": b"x", "odd": Unprintable()})
    assert '"nan": null' in text and '"base64": "eA=="' in text and "<Unprintable object>" in text


def test_display_run_shows_pending_approvals_and_how_to_decide_them():  # issue 13
    guarded = AgentTool(
        "rm",
        "delete",
        {"type": "object", "properties": {"path": {"type": "string"}}},
        lambda *a: AgentToolResult(content=[TextContent("gone")]),
        requires_approval=True,
    )
    model = ScriptedModel([tool_call("rm", {"path": "<b>x</b>"}, id="c1"), say("ok")])
    agent = Agent(model.model, tools=[guarded], stream_fn=model.stream_fn)
    fake = FakeDisplay()
    display_run(agent, "go", display=fake, throttle=0.0)
    final = fake.view
    assert "rm (waiting for approval: id c1)" in final
    assert "&lt;b&gt;x&lt;/b&gt;" in final  # the args are escaped like everything else
    assert "agent.approve(id) or agent.deny(id, reason)" in final
    assert [p.tool_call_id for p in agent.pending_approvals] == ["c1"]


def test_an_interrupt_shows_no_call_waiting_for_approval_that_the_abort_abandoned():
    """The model calls a guarded tool and a slow one; the kernel is interrupted while the slow
    one runs. The abort abandons the waiting call (``agent.approve`` of it fails), but the final
    view still said "rm (waiting for approval: id c1)" and the status told how to decide it."""
    started = threading.Event()

    def slow(tool_call_id, args, signal, on_update):
        started.set()
        signal.wait(10)
        return AgentToolResult(content=[TextContent("slow done")])

    schema = {"type": "object", "properties": {}}
    guarded = AgentTool("rm", "delete", schema, lambda *a: AgentToolResult(content=[]), requires_approval=True)
    calls = _assistant(ToolCall("c1", "rm", {}), ToolCall("c2", "slow", {}), stop_reason="toolUse")
    model = ScriptedModel([lambda context: calls, say("never reached")])
    agent = Agent(model.model, tools=[guarded, AgentTool("slow", "waits", schema, slow)], stream_fn=model.stream_fn)

    def on_html(html: str) -> None:
        if "slow (running)" in html and started.wait(10):
            raise KeyboardInterrupt  # as if the kernel were interrupted while rendering

    fake = FakeDisplay(on_html)
    with pytest.raises(KeyboardInterrupt):
        display_run(agent, "go", display=fake, throttle=0.0)
    assert agent.pending_approvals == []
    assert "interrupted: run aborted" in fake.view and "waiting for approval" not in fake.view


def test_html_of_an_image_takes_only_allow_listed_types_and_valid_base64():
    # The notebook HTML put any mime type and any data into the image's data: URL (escaped, but
    # e.g. image/svg+xml or text/html with unchecked data); like the HTML export, only png, jpeg,
    # gif and webp with valid base64 become an <img>, anything else a placeholder saying why.
    from agentcore.jupyter import message_to_html

    def html_of(data: str, mime: str) -> str:
        return message_to_html(UserMessage([ImageContent(data=data, mime_type=mime)]))

    assert '<img src="data:image/webp;base64,aGVsbG8="' in html_of("aGVs\nbG8=", "image/webp")
    svg = "PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+"  # <svg onload=alert(1)>
    for data, mime, why in (
        (svg, "image/svg+xml", "type &#x27;image/svg+xml&#x27; is not one of image/png"),
        ("aGVsbG8=", "text/html", "type &#x27;text/html&#x27; is not one of"),
        ('aGVsbG8=" onerror="alert(1)', "image/png", "its data is not valid base64"),
    ):
        rendered = html_of(data, mime)
        assert "<img" not in rendered and f"[image not shown: {why}" in rendered, rendered


def test_a_change_within_the_throttle_is_drawn_without_waiting_for_the_next_event():
    """The tool's "running" box was drawn only with the next event: seconds later for a long tool."""
    shown = threading.Event()
    fake = FakeDisplay(lambda html: shown.set() if "work (running)" in html and "step 1 of 2" in html else None)
    waited: List[bool] = []

    def execute(tool_call_id, args, signal, on_update):
        on_update(AgentToolResult(content=[TextContent("step 1 of 2")]))
        waited.append(shown.wait(5))  # no event follows until the display showed the progress
        return AgentToolResult(content=[TextContent("all done")])

    tool = AgentTool("work", "does work", {"type": "object", "properties": {}}, execute)
    model = ScriptedModel([tool_call("work", {}), say("finished")])
    agent = Agent(model.model, tools=[tool], stream_fn=model.stream_fn)
    display_run(agent, "go", display=fake, throttle=0.5)
    assert waited == [True]
    assert "finished" in fake.view and "(running)" not in fake.view


def test_ipython_outside_a_kernel_shows_only_the_final_view(monkeypatch):
    """Terminal IPython returns a handle whose every update prints the whole transcript again."""
    shown = _record_ipython_display(monkeypatch)
    import agentcore.jupyter

    model = ScriptedModel([say("one two three four five six")])
    display_run(Agent(model.model, stream_fn=model.stream_fn), "hi", throttle=0.0)
    assert len(shown) == 1 and "one two three four five six" in shown[0]._repr_html_()
    assert ">done<" in shown[0]._repr_html_()

    shown.clear()  # in a kernel the output area updates in place
    monkeypatch.setattr(agentcore.jupyter, "_in_kernel", lambda: True)
    model.push(say("one two three four five six"))
    display_run(Agent(model.model, stream_fn=model.stream_fn), "hi", throttle=0.0)
    drawn = [obj._repr_html_() for obj in shown if obj._repr_html_()]
    assert len(drawn) > 2 and ">running<" in drawn[0]


def test_text_with_surrogates_can_be_sent_by_a_kernel():
    """A kernel sends each display as UTF-8 JSON (jupyter_client's packer): a surrogate in a
    message (a pair split into JSON escapes by a provider, or a lone half) made every drawing and
    ``Transcript`` fail with UnicodeEncodeError, and the answer was never shown."""
    packer = pytest.importorskip("jupyter_client.session").json_packer
    sent: List[bytes] = []

    class Handle:
        def update(self, obj: Any) -> None:
            sent.append(packer({"text/html": obj._repr_html_(), "text/markdown": obj._repr_markdown_()}))

    def display(obj: Any, display_id: bool = False) -> Handle:
        Handle().update(obj)
        return Handle()

    model = ScriptedModel([say("smile \ud83d\ude00 and a lone \ud800 half")])
    agent = Agent(model.model, stream_fn=model.stream_fn)
    display_run(agent, "hi", display=display, throttle=0.0)
    transcript = Transcript(agent.messages)
    shown = packer({"text/html": transcript._repr_html_(), "text/markdown": transcript._repr_markdown_()})
    assert "smile \U0001f600 and a lone \ufffd half" in shown.decode("utf-8")
    assert any("smile \U0001f600" in data.decode("utf-8") for data in sent)


TERMINAL_SCRIPT = r"""
from agentcore import Agent
from agentcore.jupyter import display_run
from agentcore.testing import ScriptedModel, text, tool_call
from agentcore.tools import AgentTool, AgentToolResult
from agentcore.types import TextContent

def colours(tool_call_id, args, signal, on_update):
    return AgentToolResult([TextContent("tool \x1b[31mred\x1b[0m out\x1b]0;retitled\x07put\rHIDE\x08\x08X")])

tool = AgentTool("colours", "colours", {"type": "object", "properties": {}}, colours)
model = ScriptedModel([tool_call("colours", {}), text("model \x1b[2J\x1b[Hanswer \x9b31m end")])
display_run(Agent(model.model, tools=[tool], stream_fn=model.stream_fn), "hi")
"""


def test_ipython_in_a_terminal_prints_no_escape_sequence_from_a_model_or_a_tool(tmp_path):
    """The final view a terminal IPython prints is plain text: an escape sequence in a model's
    answer or a tool's output (clear the screen, move the cursor, retitle the window, overwrite
    with a carriage return or backspaces) went to the terminal as it was."""
    pytest.importorskip("IPython")
    import os
    import subprocess
    from pathlib import Path

    script = tmp_path / "run.py"
    script.write_text(TERMINAL_SCRIPT, encoding="utf-8")
    repo = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "IPYTHONDIR": str(tmp_path / "ipython"), "PYTHONPATH": repo}
    argv = [sys.executable, "-m", "IPython", "--simple-prompt", "--no-banner", "--HistoryManager.enabled=False"]
    command = f"exec(open({str(script)!r}).read())"
    done = subprocess.run(argv + ["-c", command], capture_output=True, env=env, timeout=120, cwd=str(tmp_path))
    printed = done.stdout.decode("utf-8", "replace")
    assert done.returncode == 0 and "*done*" in printed, printed + done.stderr.decode("utf-8", "replace")
    assert "model answer 31m end" in printed and "tool red output" in printed
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", printed), repr(printed)


def test_the_plain_text_shows_a_tools_output_and_code_as_they_are():
    """The plain text (IPython in a terminal, a console's text/plain) was the Markdown with its
    HTML unescaped, which also unescaped what the Markdown shows literally: a tool reading an
    HTML file printed ``&lt;p&gt; &amp; &copy;`` as ``<p> & ©``, a code span ``&amp;`` as ``&``."""
    page = "&lt;p&gt;Fish &amp; chips &copy; 2024"

    def execute(tool_call_id, args, signal, on_update):
        return AgentToolResult(content=[TextContent(page)])

    tool = AgentTool("page", "reads a page", {"type": "object", "properties": {}}, execute)
    model = ScriptedModel([tool_call("page", {"q": "&amp;"}), say("It says `&amp;`, so: Fish & chips <b>!</b>")])
    shown: List[Any] = []
    display_run(Agent(model.model, tools=[tool]), "Read it", display=lambda obj, display_id=False: shown.append(obj))
    plain = repr(shown[-1])
    assert f"```\n{page}\n```" in plain and '"q": "&amp;"' in plain
    assert "It says `&amp;`, so: Fish & chips <b>!</b>" in plain
    assert "&lt;b&gt;" in shown[-1]._repr_markdown_()  # the Markdown is escaped as before


def test_the_streaming_messages_thinking_is_open_and_closed_once_finished():
    """Thinking was drawn collapsed while streaming, and every update undid a manual expand."""
    model = ScriptedModel([thinking("pondering deeply", "answer")])
    agent = Agent(model.model, stream_fn=model.stream_fn)
    fake = FakeDisplay()
    display_run(agent, "go", display=fake, throttle=0.0)
    streaming = [h for h in fake.sent if "pondering" in h and "answer" not in h]
    assert streaming and all("<details open><summary><i>thinking" in h for h in streaming)
    assert "<details open>" not in fake.view and "<details><summary><i>thinking" in fake.view


def _quick_tool() -> AgentTool:
    return AgentTool(
        "work", "does work", {"type": "object", "properties": {}}, lambda *a: AgentToolResult([TextContent("all done")])
    )


def test_each_finished_message_gets_its_own_output_in_transcript_order():
    """Top to bottom as the user reads it: one output per finished message, then the status."""
    model = ScriptedModel([tool_call("work", {}, text="Working."), say("Finished.")])
    agent = Agent(model.model, tools=[_quick_tool()], stream_fn=model.stream_fn)
    fake = FakeDisplay()
    new = display_run(agent, "go", display=fake, throttle=0.0)
    *messages, status = fake.outputs
    assert messages == [transcript_to_html([m]) for m in new]
    assert "agentcore-message" not in status and re.search(r'class="agentcore-status"[^>]*>done<', status)


def _long_run() -> tuple[Agent, List[str], str]:
    """An agent scripted to call a tool 5 times (each result 50 KB, 1000 lines) and then stream a
    20 KB answer in 10 pieces; returns it, the results and the answer."""
    results = [f"RESULT {i}\n" + "\n".join(f"{i}:{n:04d} " + "x" * 44 for n in range(1000)) for i in range(5)]
    answer = " ".join(f"part{n}-" + "y" * 2000 for n in range(10))

    def execute(tool_call_id, args, signal, on_update):
        return AgentToolResult(content=[TextContent(results[args["i"]])])

    schema = {"type": "object", "properties": {"i": {"type": "integer"}}}
    model = ScriptedModel([tool_call("read", {"i": i}) for i in range(5)] + [say(answer)], tokens_per_second=1e6)
    agent = Agent(model.model, tools=[AgentTool("read", "reads", schema, execute)], stream_fn=model.stream_fn)
    return agent, results, answer


def test_finished_messages_are_sent_once_not_with_every_update():
    """Every update re-sent the whole run: 5 tool results of 50 KB and a 20 KB answer cost some
    34 MB of display messages, each result sent 64 times (the notebook choked, and so did iopub)."""
    agent, results, answer = _long_run()
    fake = FakeDisplay()
    new = display_run(agent, "go", display=fake, throttle=0.0)  # every event drawn: the worst case
    for i in range(5):
        assert sum(f"RESULT {i}" in html for html in fake.sent) == 1, f"result {i} sent more than once"
    content = sum(len(r) for r in results) + len(answer)
    # each finished message once in three formats (3x), plus the answer redrawn as it grows (1.6x);
    # it was 120x
    assert fake.payload < 6 * content, f"{fake.payload} bytes of display messages for {content} bytes of content"
    assert [m.role for m in new] == ["user"] + ["assistant", "toolResult"] * 5 + ["assistant"]
    assert fake.outputs[:-1] == [transcript_to_html([m]) for m in new]  # all of it, in order


def test_an_interrupt_anywhere_in_the_drawing_leaves_a_consistent_view():
    """An interrupt inside ``display``/``update`` must not leave an output nobody updates (a tool
    drawn as running forever), lose a finished message or show one twice."""

    def run(interrupt_at: int) -> tuple[Agent, FakeDisplay, bool]:
        sent = [0]

        def on_html(html: str) -> None:
            sent[0] += 1
            if sent[0] == interrupt_at:
                raise KeyboardInterrupt

        model = ScriptedModel([tool_call("work", {}, text="Working."), say("Finished.")])
        agent = Agent(model.model, tools=[_quick_tool()], stream_fn=model.stream_fn)
        fake = FakeDisplay(on_html)
        try:
            display_run(agent, "go", display=fake, throttle=0.0)
        except KeyboardInterrupt:
            return agent, fake, True
        return agent, fake, False

    _, whole, interrupted = run(0)
    assert not interrupted
    for at in range(1, len(whole.sent) + 1):
        agent, fake, interrupted = run(at)
        assert interrupted and not agent.state.is_streaming, at
        view = fake.view
        assert "(running)" not in view and view.count('class="agentcore-status"') == 1, (at, view)
        assert "interrupted: run aborted" in view or (at == len(whole.sent) and ">done<" in view), at
        shown = [view.find(transcript_to_html([m])) for m in agent.state.messages]
        assert -1 not in shown and shown == sorted(shown), (at, view)
        assert all(view.count(transcript_to_html([m])) == 1 for m in agent.state.messages), (at, view)


def test_what_is_redrawn_while_streaming_or_running_stays_short():
    """A streaming tool call's long arguments (a file being written) and a running tool's long
    output line were redrawn whole with every update for as long as they streamed or ran."""
    body = "z" * 50_000

    def execute(tool_call_id, args, signal, on_update):
        on_update(AgentToolResult(content=[TextContent("w" * 50_000)]))  # one long line
        return AgentToolResult(content=[TextContent("written")])

    schema = {"type": "object", "properties": {"content": {"type": "string"}}}
    model = ScriptedModel([tool_call("write", {"content": body}), say("ok")])
    agent = Agent(model.model, tools=[AgentTool("write", "writes", schema, execute)], stream_fn=model.stream_fn)
    fake = FakeDisplay()
    display_run(agent, "go", display=fake, throttle=0.0)
    drawings = _drawings(fake)
    assert any("→ write" in html and "characters above" in html for html in drawings)  # the call streaming
    assert any("write (running)" in html and "characters above" in html for html in drawings)
    assert max(len(html) for html in drawings) < 5_000
    assert fake.view.count(body) == 1 and "written" in fake.view  # the finished messages, whole


def test_a_long_streaming_thinking_is_redrawn_as_its_end():
    """The thinking of the message being streamed was redrawn whole with every update, so a long
    chain of thought cost its length again ten times a second; it is drawn as its end while it
    streams, and whole once the message finished."""
    thought = " ".join(f"step{n}" for n in range(8000))  # about 60 KB
    model = ScriptedModel([thinking(thought, "the answer")])
    agent = Agent(model.model, stream_fn=model.stream_fn)
    fake = FakeDisplay()
    display_run(agent, "go", display=fake, throttle=0.0)
    streaming = [html for html in _drawings(fake) if "<details open>" in html]
    assert streaming and all(len(html) < 5_000 for html in streaming)
    assert any("characters above" in html for html in streaming)
    assert fake.view.count(thought) == 1  # the finished message, whole


def test_a_long_streamed_answer_is_redrawn_less_often_as_it_grows():
    """Each drawing of the tail sends the answer streamed so far: at a fixed ten times a second a
    long answer cost quadratically more (a probe: 162x its size). A drawing now waits at least as
    long as its size takes at the live view's budget, so a long answer is drawn less often.

    The budget is a rate, so what may be sent grows with how long the answer took to stream (a
    loaded machine streams slower): at most the budget's characters per second of the run, in
    each of the three formats, plus the finished answer once. A fixed 0.02 s throttle sends about
    ten times that bound."""
    answer = " ".join(f"word{n}" for n in range(8000))  # about 70 KB, streamed for about a second
    model = ScriptedModel([say(answer)], tokens_per_second=8000)
    agent = Agent(model.model, stream_fn=model.stream_fn)
    fake = FakeDisplay()
    started = time.monotonic()
    display_run(agent, "go", display=fake, throttle=0.02)
    elapsed = time.monotonic() - started
    content = len(answer.encode())
    assert fake.view.count(answer) == 1
    bound = 3 * (jupyter._DRAW_BUDGET * elapsed + content)
    assert fake.payload <= bound, (
        f"{fake.payload / content:.1f}x the answer, bound {bound / content:.1f}x in {elapsed:.2f} s"
    )


def test_a_large_finished_message_does_not_hold_back_the_drawings_after_it():
    """The redraw budget counted finished messages too: after a 1 MB tool result (sent once) the
    live view waited some 15 seconds before drawing again, so the answer streamed after it showed
    only when it had finished."""
    big = "z" * 1_000_000
    answer = " ".join(f"word{n}" for n in range(400))

    def execute(tool_call_id, args, signal, on_update):
        return AgentToolResult(content=[TextContent(big)])

    model = ScriptedModel([tool_call("read", {}), say(answer)], tokens_per_second=800)  # about 0.5 s
    tool = AgentTool("read", "reads", {"type": "object", "properties": {}}, execute)
    agent = Agent(model.model, tools=[tool], stream_fn=model.stream_fn)
    fake = FakeDisplay()
    display_run(agent, "go", display=fake, throttle=0.02)
    partial = [html for html in _drawings(fake) if "word0 " in html and answer not in html]
    assert len(partial) >= 3, f"{len(partial)} drawings of the answer while it streamed"
    assert fake.view.count(answer) == 1 and sum(big in html for html in fake.sent) == 1

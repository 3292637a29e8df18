"""Shared fixtures: the scripted model, message builders, the echo tool and event recorders.

Fixtures follow the common fixtures of spec agent-loop §5: ``asst(content, stop_reason)`` builds an
assistant message (api ``openai-responses``, provider ``openai``, model ``mock``), ``user(text)`` a
user message with *string* content, ``echo`` a tool with schema ``{value: string}`` that records
``value`` and returns ``echoed: <value>``, ``mock_llm(responses)`` a stream function whose streams
push only the terminal event (as the reference ``MockStream`` does).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Callable, List, Optional

import pytest
from _echo import Echo

from agentcore.events import DoneEvent, ErrorEvent
from agentcore.messages import default_convert_to_llm
from agentcore.streams import AssistantMessageEventStream
from agentcore.testing import ScriptedModel
from agentcore.types import AssistantMessage, Model, TextContent, ToolCall, UserMessage

SHARED = Path(__file__).resolve().parents[2] / "shared"

# The developer's own ~/.agentcore/models.json must not change what the tests see (subprocesses
# inherit this); tests of the user models file point AGENTCORE_MODELS at their own file.
os.environ["AGENTCORE_MODELS"] = ""

MOCK_MODEL = Model(id="mock", name="mock", api="openai-responses", provider="openai", base_url="")


def make_user(text: str, timestamp: Optional[int] = None) -> UserMessage:
    if timestamp is None:
        return UserMessage(content=text)
    return UserMessage(content=text, timestamp=timestamp)


def make_asst(content: Any = "", stop_reason: str = "stop", error_message: Optional[str] = None) -> AssistantMessage:
    if isinstance(content, str):
        content = [TextContent(content)]
    return AssistantMessage(
        content=list(content),
        api="openai-responses",
        provider="openai",
        model="mock",
        stop_reason=stop_reason,
        error_message=error_message,
    )


def make_call(value: str, id: str, name: str = "echo") -> ToolCall:
    return ToolCall(id=id, name=name, arguments={"value": value})


class MockLLM:
    """Stream function returning scripted assistant messages; the last response repeats.

    A response may be a message or ``fn(context, index) -> message``. Each stream pushes only
    ``done``/``error`` (no ``start``), like the reference test fixture.
    """

    def __init__(self, responses: List[Any]) -> None:
        self.responses = list(responses)
        self.calls = 0
        self.contexts: List[Any] = []
        self.options: List[dict] = []
        self._lock = threading.Lock()

    def stream_fn(self, model: Model, context: Any, **options: Any) -> AssistantMessageEventStream:
        with self._lock:
            index = self.calls
            self.calls += 1
            self.contexts.append(context)
            self.options.append(options)
        response = self.responses[min(index, len(self.responses) - 1)]
        if callable(response):
            response = response(context, index)
        else:
            response = response.copy()
        stream = AssistantMessageEventStream()
        if response.stop_reason in ("error", "aborted"):
            stream.push(ErrorEvent(response.stop_reason, response))
        else:
            stream.push(DoneEvent(response.stop_reason, response))
        return stream


class Recorder:
    """An ``emit`` sink / listener that records events (thread-safe)."""

    def __init__(self) -> None:
        self.events: List[Any] = []
        self._lock = threading.Lock()

    def __call__(self, event: Any) -> None:
        with self._lock:
            self.events.append(event)

    @property
    def types(self) -> List[str]:
        return [e.type for e in self.events]

    def of(self, kind: str) -> List[Any]:
        return [e for e in self.events if e.type == kind]


@pytest.fixture
def user() -> Callable[..., UserMessage]:
    return make_user


@pytest.fixture
def asst() -> Callable[..., AssistantMessage]:
    return make_asst


@pytest.fixture
def echo() -> Echo:
    return Echo()


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def mock_llm() -> Callable[[List[Any]], MockLLM]:
    return MockLLM


@pytest.fixture
def scripted() -> Callable[..., ScriptedModel]:
    return ScriptedModel


@pytest.fixture
def identity() -> Callable[[List[Any]], List[Any]]:
    """The spec's ``identity`` converter: keep user/assistant/toolResult."""
    return default_convert_to_llm


@pytest.fixture
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"shared material not found at {SHARED}")
    return SHARED


@pytest.fixture
def make_echo() -> Callable[..., Echo]:
    """``make_echo(name="echo", execution_mode=None, before=None, terminate=None)``."""
    return Echo


@pytest.fixture
def tool_call_block() -> Callable[..., ToolCall]:
    """``tool_call_block(value, id, name="echo")``: an echo tool-call block."""
    return make_call


@pytest.fixture
def mock_model() -> Model:
    return MOCK_MODEL


@pytest.fixture
def sigint_handled() -> Any:
    """Ctrl-C reaches Python in this test (and in the ``python`` children it starts).

    A test process started as a background job (``pytest ... &``, ``nohup``, ``setsid``) inherits
    SIGINT as *ignored*: ``_thread.interrupt_main()`` then does nothing and a child that is sent
    SIGINT never sees it. For the test, SIGINT gets Python's ``default_int_handler`` (a caught
    signal is reset to the default at exec, so children start with Python's usual handler too);
    the caller's handler is restored afterwards. Skips off the main thread, where Python cannot
    install signal handlers.
    """
    import signal

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("SIGINT handlers can only be installed from the main thread")
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)


def _plugin_tables() -> tuple:
    from agentcore import _plugin_loading

    return _plugin_loading._builtins, _plugin_loading._entry_points


def _polluted(pm: Any) -> bool:
    """True when plugins other than the built-ins and entry points were registered on ``pm``."""
    return pm is not None and len(pm.get_plugins()) != len(pm._loaded_records)


@pytest.fixture(autouse=True)
def _process_wide_state() -> Any:
    """Undo what a test left in agentcore's process-wide state (CONTRIBUTING.md, "Process-wide
    state"): the default stream function; the plugin tables when the test replaced them; the
    default and shared plugin managers when the test registered plugins on them (the next use then
    rebuilds them); the session package's caches (``session.process_state.reset()``). Caches that only save work (HTTP pools, the catalog, the thread pool, interned
    strings) are kept: a test cannot observe them."""
    from agentcore import loop, plugins
    from agentcore.session import process_state as session_process_state

    stream_fn = loop._default_stream_fn
    tables = _plugin_tables()
    yield
    if loop._default_stream_fn is not stream_fn:
        loop.set_default_stream_fn(stream_fn)
    replaced = any(b is not None and b is not a for b, a in zip(tables, _plugin_tables()))
    if replaced or _polluted(plugins._default_pm) or _polluted(plugins._shared_pm):
        plugins.reset_plugins()
    session_process_state.reset()


@pytest.fixture(autouse=True)
def _private_agentcore_home(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every test gets its own sessions dir and config dir (``AGENTCORE_SESSIONS_DIR``,
    ``AGENTCORE_CONFIG_DIR``; subprocesses inherit them): the CLI logs every run by default and
    reads keys and aliases from the config dir, and no test may touch the real ``~/.agentcore``.
    ``AGENTCORE_NO_LOG`` from the developer's shell is removed so logging behaves as by default."""
    home = tmp_path_factory.mktemp("agentcore-home")
    monkeypatch.setenv("AGENTCORE_SESSIONS_DIR", str(home / "sessions"))
    monkeypatch.setenv("AGENTCORE_CONFIG_DIR", str(home / "config"))
    monkeypatch.delenv("AGENTCORE_NO_LOG", raising=False)
    return home


# ------------------------------------------------------------------ documentation examples

DOC_KEY_VARIABLES = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_OAUTH_TOKEN",
    "GEMINI_API_KEY",
    "GROQ_API_KEY",
    "XAI_API_KEY",
    "CEREBRAS_API_KEY",
    "OPENROUTER_API_KEY",
    "AGENTCORE_MODEL",
)


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> List[Any]:
    """Where README and docs examples run: no API-key variables, every socket connection refused,
    a scratch working directory. Returns the list of refused addresses (empty when the examples
    stayed off the network)."""
    import socket

    for name in DOC_KEY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    attempts: List[Any] = []

    def refuse(self: socket.socket, address: Any) -> None:
        attempts.append(address)
        raise OSError("network refused while running documentation examples")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.chdir(tmp_path)
    return attempts


@pytest.fixture
def check_shout_plugin(capsys: pytest.CaptureFixture[str]) -> Callable[[dict], None]:
    """``check_shout_plugin(namespace)``: the documented ``agentcore_shout`` plugin module, rebuilt
    from the namespace its example ran in and passed to one agent: ``tools=["shout"]`` resolves
    and its ``on_event`` hook sees the call."""
    import types

    from agentcore import Agent
    from agentcore.testing import text, tool_call

    def check(namespace: dict) -> None:
        module = types.ModuleType("agentcore_shout")
        module.__dict__.update({k: namespace[k] for k in ("shout", "register_tools", "on_event")})
        scripted = ScriptedModel([tool_call("shout", {"text": "hi"}), text("done")])
        capsys.readouterr()
        messages = Agent(scripted.model, plugins=[module], tools=["shout"]).prompt("shout hi")
        assert [m.role for m in messages] == ["user", "assistant", "toolResult", "assistant"]
        assert messages[2].content[0].text == "HI" and not messages[2].is_error
        assert capsys.readouterr().out.splitlines() == ["someone shouted"]

    return check


@pytest.fixture
def index_state() -> Callable[..., Any]:
    """``index_state(storage, *node_fields)``: what a session storage's tree index holds (its nodes
    with ``node_fields``, children, promoted leaf entries, labels, leaf, counts), comparable with
    ``==``: for tests that check a fast index path against the entry-by-entry one."""

    def state(storage: Any, *node_fields: str) -> Any:
        fields = ("id", "parent", "type", "role", "ts", "line") + node_fields
        return (
            [tuple(getattr(node, name) for name in fields) for node in storage._order],
            storage._children,
            storage._promoted,
            storage._labels,
            storage._leaf,
            storage._messages,
            storage._type_counts,
        )

    return state


@pytest.fixture
def count_decodes(monkeypatch: pytest.MonkeyPatch) -> Callable[[Any], List[str]]:
    """``count_decodes(storage)``: the storage's decode cache emptied, and a list that collects the
    id of every entry whose stored payload it reads from then on (what a read decodes; a scale
    test counts work instead of timing it)."""

    def start(storage: Any) -> List[str]:
        storage._cache.clear()
        fetched: List[str] = []
        fetch = storage._fetch_raws

        def counting_fetch(nodes: Any) -> Any:
            fetched.extend(node.id for node in nodes)
            return fetch(nodes)

        monkeypatch.setattr(storage, "_fetch_raws", counting_fetch)
        return fetched

    return start

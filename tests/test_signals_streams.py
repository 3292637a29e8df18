"""Abort signals (spec agent-loop §8.2) and event streams (§1.11 EventStream semantics, §8.3)."""

from __future__ import annotations

import inspect
import json
import threading

import pytest

from agentcore import events as ev
from agentcore.events import DoneEvent, ErrorEvent, StartEvent, TextDeltaEvent
from agentcore.signals import AbortController, AbortError, AbortSignal
from agentcore.streams import AssistantMessageEventStream, EventStream, ProviderStream
from agentcore.tools import AgentToolResult
from agentcore.types import (
    AssistantMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    message_from_dict,
)

# --------------------------------------------------------------------------- signals


def test_abort_is_idempotent_and_keeps_the_first_reason():  # agent-loop §8.2
    controller = AbortController()
    signal = controller.signal
    assert isinstance(signal, AbortSignal) and signal.aborted is False and signal.reason is None
    assert controller.abort("first") is True
    assert controller.abort("second") is False
    assert signal.aborted is True and signal.reason == "first"


def test_listeners_run_once_on_the_aborting_thread():  # agent-loop §8.2
    controller = AbortController()
    calls = []
    controller.signal.add_listener(lambda reason: calls.append((reason, threading.get_ident())))
    aborter = threading.Thread(target=controller.abort, args=("why",))
    aborter.start()
    aborter.join(5)
    controller.abort("again")
    assert calls == [("why", aborter.ident)]


def test_an_interrupt_in_one_listener_still_tells_the_others():  # agent-loop §8.2
    """A KeyboardInterrupt (a Ctrl+C landing while the abort ran a listener) used to leave the
    later listeners uncalled, and they were already taken off: a tool waiting on one ran on."""
    controller = AbortController()
    calls = []

    def interrupted(reason):
        calls.append("first")
        raise KeyboardInterrupt

    controller.signal.add_listener(interrupted)
    controller.signal.add_listener(lambda reason: calls.append("second"))
    with pytest.raises(KeyboardInterrupt):
        controller.abort("stop")
    assert calls == ["first", "second"] and controller.signal.aborted


def test_listener_added_after_abort_runs_at_once_and_removal_works():  # agent-loop §8.2
    controller = AbortController()
    removed = []
    callback = removed.append
    controller.signal.add_listener(callback)
    controller.signal.remove_listener(callback)
    controller.signal.remove_listener(callback)  # unknown: no error
    controller.abort("x")
    assert removed == []
    late = []
    controller.signal.add_listener(late.append)
    assert late == ["x"]


def test_broken_listener_does_not_stop_the_others(caplog):  # agent-loop §8.2
    controller = AbortController()
    seen = []

    def broken(reason):
        raise RuntimeError("listener bug")

    controller.signal.add_listener(broken)
    controller.signal.add_listener(seen.append)
    assert controller.abort("go") is True
    assert seen == ["go"]
    assert "listener bug" in caplog.text


def test_wait_and_raise_if_aborted():  # agent-loop §8.2
    controller = AbortController()
    assert controller.signal.wait(0) is False
    controller.signal.raise_if_aborted()
    threading.Timer(0.01, controller.abort).start()
    assert controller.signal.wait(5) is True
    with pytest.raises(AbortError, match="Operation aborted"):
        controller.signal.raise_if_aborted()
    assert "aborted=True" in repr(controller)


def _latch():
    from agentcore._util import Latch

    latch = Latch()
    return latch, latch.set, latch.wait


def _signal():
    controller = AbortController()
    return controller.signal, controller.abort, controller.signal.wait


@pytest.mark.parametrize("make", [_latch, _signal], ids=["latch", "abort signal"])
def test_a_lazy_flag_wakes_every_waiter_and_never_blocks_once_set(make):
    """The set-once flags of runs, streams and abort signals make their Event only for a waiter
    (most are never waited on): waiters that came before ``set`` are all woken, a first wait after
    it returns at once, a timed wait times out."""
    _, _, wait = make()
    assert wait(0) is False and wait(0.01) is False
    _, set_it, wait = make()
    started, results = threading.Barrier(4), []

    def waiter():
        started.wait()
        results.append(wait(30))

    threads = [threading.Thread(target=waiter) for _ in range(3)]
    for thread in threads:
        thread.start()
    started.wait()
    set_it()
    for thread in threads:
        thread.join(10)
    assert results == [True, True, True]

    _, set_it, wait = make()
    set_it()
    done = []
    thread = threading.Thread(target=lambda: done.append(wait()))  # no timeout: must not block
    thread.start()
    thread.join(10)
    assert done == [True]


# --------------------------------------------------------------------------- event streams


def _agent_stream() -> EventStream:
    return EventStream(lambda e: e["type"] == "end", lambda e: e["value"])


def test_completing_event_is_delivered_and_sets_the_result():  # agent-loop §1.11
    stream = _agent_stream()
    stream.push({"type": "a"})
    stream.push({"type": "end", "value": 42})
    stream.push({"type": "late"})  # ignored after completion
    assert [e["type"] for e in stream] == ["a", "end"]
    assert stream.result() == 42 and stream.done
    assert list(stream) == []  # a second iteration ends at once


def test_consumer_on_another_thread_sees_events_in_order():  # agent-loop §8.3 producer never blocks
    stream = _agent_stream()
    received = []
    consumer = threading.Thread(target=lambda: received.extend(e["type"] for e in stream))
    consumer.start()
    for index in range(100):
        stream.push({"type": str(index)})
    stream.push({"type": "end", "value": None})
    consumer.join(5)
    assert received == [str(i) for i in range(100)] + ["end"]


def test_end_finishes_early_and_fail_re_raises():  # agent-loop §1.11, §8.3
    stream = _agent_stream()
    stream.push({"type": "a"})
    stream.end("early")
    stream.fail(RuntimeError("ignored after end"))
    assert [e["type"] for e in stream] == ["a"] and stream.result() == "early"

    failing = _agent_stream()
    failing.push({"type": "a"})
    failing.fail(RuntimeError("producer died"))
    iterator = iter(failing)
    assert next(iterator)["type"] == "a"
    with pytest.raises(RuntimeError, match="producer died"):
        next(iterator)
    with pytest.raises(RuntimeError, match="producer died"):
        failing.result()


def test_result_timeout():  # agent-loop §8.3
    with pytest.raises(TimeoutError):
        _agent_stream().result(timeout=0.01)


def test_assistant_message_stream_completes_on_done_or_error():  # agent-loop §1.11
    final = AssistantMessage(content=[], stop_reason="stop")
    stream = AssistantMessageEventStream()
    stream.push(StartEvent(final))
    stream.push(TextDeltaEvent(0, "x", final))
    stream.push(DoneEvent("stop", final))
    stream.push(TextDeltaEvent(0, "late", final))
    assert [e.type for e in stream] == ["start", "text_delta", "done"]
    assert stream.result() is final

    failed = AssistantMessage(content=[], stop_reason="error", error_message="bad")
    errored = AssistantMessageEventStream()
    errored.push(ErrorEvent("error", failed))
    assert errored.result() is failed


def test_raise_if_aborted_raises_abort_error_for_an_unprintable_reason():
    class Unprintable(Exception):
        def __str__(self):
            raise ZeroDivisionError

    class NoStr:
        def __str__(self):
            raise ValueError

    for reason, text in ((Unprintable(), "Unprintable"), (NoStr(), "NoStr")):
        controller = AbortController()
        controller.abort(reason)
        with pytest.raises(AbortError, match=text):
            controller.signal.raise_if_aborted()


# EventStream contract (agent-loop §8.3): a producer failure reaches the consumer. A completing
# event whose result cannot be extracted used to close the stream without an end marker, so the
# producer's fail(exc) was ignored and the consumer waited forever.
def test_stream_stays_failable_when_the_result_cannot_be_extracted() -> None:
    from types import SimpleNamespace

    from agentcore.streams import AssistantMessageEventStream

    stream = AssistantMessageEventStream()
    broken_done = SimpleNamespace(type="done")  # no .message
    with pytest.raises(AttributeError) as info:
        stream.push(broken_done)
    stream.fail(info.value)
    with pytest.raises(AttributeError):
        stream.result(timeout=5)
    with pytest.raises(AttributeError):
        list(stream)


# --------------------------------------------------------------------------- ProviderStream (issue 11 §4)


def _generator(final, gate=None, closed=None):
    """What a provider's generator does: start, a delta, (wait for ``gate``), done."""
    try:
        yield StartEvent(final)
        yield TextDeltaEvent(0, "x", final)
        if gate is not None:
            gate.wait(5)
        yield DoneEvent("stop", final)
    finally:
        if closed is not None:
            closed.set()


def test_provider_stream_result_honours_its_timeout():
    # ProviderStream.result(timeout) used to read the network on the caller's thread and ignore
    # the timeout: a stalled provider held the caller however short the timeout
    final, gate = AssistantMessage(content=[], stop_reason="stop"), threading.Event()
    stream = ProviderStream(_generator(final, gate))
    with pytest.raises(TimeoutError):
        stream.result(timeout=0.01)
    assert not stream.done
    gate.set()
    assert stream.result(timeout=10) is final and stream.done
    assert [e.type for e in stream] == ["start", "text_delta", "done"]  # result() consumed nothing


def test_provider_stream_result_does_not_consume_events():
    final = AssistantMessage(content=[], stop_reason="stop")
    stream = ProviderStream(_generator(final))
    iterator = iter(stream)
    assert next(iterator).type == "start"
    assert stream.result() is final
    assert [e.type for e in iterator] == ["text_delta", "done"]
    assert list(stream) == []  # a second iteration ends at once, as for EventStream


def test_provider_stream_push_end_and_fail_are_honoured():
    final, pushed = AssistantMessage(content=[], stop_reason="stop"), AssistantMessage(content=[])
    generator = _generator(final)
    stream = ProviderStream(generator)
    stream.push(TextDeltaEvent(0, "pushed", pushed))
    stream.push(DoneEvent("stop", pushed))
    stream.push(TextDeltaEvent(0, "late", pushed))  # ignored after completion
    assert [getattr(e, "delta", e.type) for e in stream] == ["pushed", "done"]
    assert stream.result() is pushed  # the generator was closed, never read
    assert inspect.getgeneratorstate(generator) == inspect.GEN_CLOSED

    closed = threading.Event()
    ended = ProviderStream(_generator(final, closed=closed))
    assert next(iter(ended)).type == "start"
    ended.end("early")
    ended.fail(RuntimeError("ignored after end"))
    assert list(ended) == [] and ended.result() == "early" and closed.is_set()

    failing = ProviderStream(_generator(final))
    failing.fail(RuntimeError("producer died"))
    with pytest.raises(RuntimeError, match="producer died"):
        list(failing)
    with pytest.raises(RuntimeError, match="producer died"):
        list(failing)  # every iterator sees the failure
    with pytest.raises(RuntimeError, match="producer died"):
        failing.result(timeout=1)


def test_provider_stream_whose_generator_ends_without_done_ends_without_result():
    def events():
        yield StartEvent(AssistantMessage(content=[]))

    stream = ProviderStream(events())
    assert [e.type for e in stream] == ["start"]
    assert stream.done and stream.result(timeout=0) is None and list(stream) == []


def test_provider_stream_close_releases_the_generator():
    closed = threading.Event()
    stream = ProviderStream(_generator(AssistantMessage(content=[]), closed=closed))
    assert next(iter(stream)).type == "start"
    stream.close()
    assert closed.is_set() and stream.done and stream.result(timeout=0) is None and list(stream) == []


def test_a_dropped_provider_stream_releases_its_generator_without_gc():
    # the generator holds the HTTP connection: dropping a half-read stream must free it by
    # reference counting, so the stream must not reference itself
    import gc

    closed = threading.Event()
    stream = ProviderStream(_generator(AssistantMessage(content=[]), closed=closed))
    iterator = iter(stream)
    assert next(iterator).type == "start"
    enabled = gc.isenabled()
    gc.disable()
    try:
        del iterator, stream
        assert closed.is_set()
    finally:
        if enabled:
            gc.enable()


# --------------------------------------------------------------------------- review: listeners, failures, close, cycles


def test_a_listener_removed_while_the_abort_notifies_is_not_called():  # agent-loop §8.2
    # the abort used to take every listener at once and call each: one removed meanwhile (here by
    # an earlier listener; a tool that finished and dropped its "kill my process" callback) still ran
    controller = AbortController()
    calls = []

    def later(reason):
        calls.append("later")

    def first(reason):
        calls.append("first")
        controller.signal.remove_listener(later)
        controller.signal.remove_listener(first)  # itself, while running: no error

    controller.signal.add_listener(first)
    controller.signal.add_listener(later)
    assert controller.abort("stop") is True
    assert calls == ["first"]
    controller.signal.add_listener(calls.append)  # added after the abort: at once, exactly once
    assert calls == ["first", "stop"]


def _failing_generator(final, gate=None):
    yield StartEvent(final)
    if gate is not None:
        gate.wait(5)
    raise RuntimeError("producer bug")


def test_provider_stream_whose_generator_raises_fails_for_every_reader():  # agent-loop §8.3
    # the exception reached only the reader that met it: the stream stayed open, and the next
    # iteration or result() reported a stream that ended without result (None)
    final = AssistantMessage(content=[], stop_reason="stop")
    stream = ProviderStream(_failing_generator(final))
    with pytest.raises(RuntimeError, match="producer bug"):
        list(stream)
    assert stream.done
    with pytest.raises(RuntimeError, match="producer bug"):
        stream.result()
    with pytest.raises(RuntimeError, match="producer bug"):
        list(stream)


def test_provider_stream_result_with_timeout_reports_a_generator_failure():  # agent-loop §8.3
    # result(timeout) reads on a helper thread: the failure went to threading.excepthook and the
    # caller got TimeoutError, at every later call too, however long it waited
    final, gate = AssistantMessage(content=[], stop_reason="stop"), threading.Event()
    stream = ProviderStream(_failing_generator(final, gate))
    with pytest.raises(TimeoutError):
        stream.result(timeout=0.01)
    gate.set()
    with pytest.raises(RuntimeError, match="producer bug"):
        stream.result(timeout=10)
    with pytest.raises(RuntimeError, match="producer bug"):
        stream.result(timeout=0)
    assert [e.type for e in _events_until_failure(stream)] == ["start"]


def _events_until_failure(stream):
    seen = []
    with pytest.raises(RuntimeError, match="producer bug"):
        for event in stream:
            seen.append(event)
    return seen


def test_provider_stream_close_returns_while_another_thread_is_reading():
    # close() waited for the reader's lock, so it hung as long as the network read it meant to stop
    final, gate, reading, closed = AssistantMessage(content=[]), threading.Event(), threading.Event(), threading.Event()

    def events():
        try:
            yield StartEvent(final)
            reading.set()
            gate.wait(10)  # a stalled response
            yield TextDeltaEvent(0, "late", final)
            yield DoneEvent("stop", final)
        finally:
            closed.set()

    stream, received = ProviderStream(events()), []
    reader = threading.Thread(target=lambda: received.extend(e.type for e in stream))
    reader.start()
    assert reading.wait(5)
    closer_returned = threading.Event()
    threading.Thread(target=lambda: (stream.close(), closer_returned.set())).start()
    try:
        assert closer_returned.wait(5), "close() blocked behind the stalled read"
        assert stream.done and stream.result(timeout=0) is None
    finally:
        gate.set()
        reader.join(5)
    assert received == ["start"]  # the event read during close() is dropped
    assert closed.is_set()  # the reader closed the generator once its read returned


def test_event_to_dict_of_every_event_type_with_odd_values():  # DESIGN §3 events, --json / rpc
    # a reference cycle in tool-call arguments used to turn the whole toolCall block of a message
    # into its repr() string: the call's id, name and arguments were lost to JSON readers
    cycle: dict = {"n": 1}
    cycle["self"] = cycle
    odd = {"nan": float("nan"), "huge": 1 << 20000, "lone": "a\ud800b", "cycle": cycle, "bytes": b"\xff"}
    call = ToolCall("call_1", "lookup", {"query": "x\udc00", "cycle": cycle})
    message = AssistantMessage(
        content=[TextContent("hi\ud83d"), ThinkingContent("t"), call],
        stop_reason="toolUse",
        usage=Usage(input=1 << 20000),
    )
    result = AgentToolResult(content=[TextContent("r")], details=odd)
    tool_message = ToolResultMessage(tool_call_id="call_1", tool_name="lookup", content=[TextContent("r")], details=odd)
    user = UserMessage("q\udfff")
    events = [
        ev.AgentStartEvent(), ev.AgentEndEvent([user, message, tool_message]), ev.TurnStartEvent(),
        ev.TurnEndEvent(message, [tool_message]), ev.MessageStartEvent(message),
        ev.MessageUpdateEvent(message, ev.TextDeltaEvent(0, "d\ud800", message)), ev.MessageEndEvent(message),
        ev.ToolExecutionStartEvent("call_1", "lookup", odd), ev.ToolExecutionUpdateEvent("call_1", "lookup", odd, result),
        ev.ToolExecutionEndEvent("call_1", "lookup", result, True), ev.ToolApprovalRequestEvent("call_1", "lookup", odd),
        ev.StartEvent(message), ev.TextStartEvent(0, message), ev.TextDeltaEvent(0, "x", message),
        ev.TextEndEvent(0, "x", message), ev.ThinkingStartEvent(1, message), ev.ThinkingDeltaEvent(1, "t", message),
        ev.ThinkingEndEvent(1, "t", message), ev.ToolCallStartEvent(2, message), ev.ToolCallDeltaEvent(2, "{", message),
        ev.ToolCallEndEvent(2, call, message), ev.DoneEvent("toolUse", message), ev.ErrorEvent("error", message),
        ev.GenericStreamEvent("final_answer_delta", message, 0, "d", {"odd": odd}),
    ]  # fmt: skip
    for event in events:
        data = json.loads(json.dumps(ev.event_to_dict(event), allow_nan=False))
        assert data["type"] == event.type
        for key in ("message", "partial", "error"):
            if isinstance(data.get(key), dict) and data[key].get("role") == "assistant":
                back = message_from_dict(data[key])
                assert isinstance(back.content[2], ToolCall), event.type
                assert back.content[2].id == "call_1" and back.content[2].arguments["cycle"] == {
                    "n": 1,
                    "self": "<cycle>",
                }
    done = json.loads(json.dumps(ev.event_to_dict(ev.MessageEndEvent(message))))["message"]
    assert done["usage"]["input"] == "<integer of 20001 bits>" and done["content"][0]["text"] == "hi\ud83d"


def test_a_ctrl_c_while_a_pooled_thread_is_handed_a_task_leaves_no_thread_waiting_for_ever():
    """A KeyboardInterrupt between taking an idle worker and giving it its task stranded that
    thread: no longer idle, it waited for a task for ever (one leaked thread per such Ctrl+C)."""
    import time

    from agentcore import streams

    with streams._idle_lock:  # an empty pool (its idle threads told to finish): the next worker is new
        for idle in streams._idle:
            idle.inbox.put(None)
        streams._idle.clear()
    threads = []
    streams.start_daemon(lambda: threads.append(threading.current_thread()), "agentcore-test")
    deadline = time.monotonic() + 10
    worker = None
    while worker is None and time.monotonic() < deadline:  # the worker goes back to the idle list
        with streams._idle_lock:
            worker = streams._idle[-1] if streams._idle else None
    assert worker is not None and threads, "the worker never became idle"

    class Interrupting:
        """The worker's inbox, whose first ``put`` is hit by a Ctrl+C (just before the hand-over)."""

        def __init__(self, real):
            self.real, self.hit = real, False

        def put(self, item):
            if not self.hit:
                self.hit = True
                raise KeyboardInterrupt
            self.real.put(item)

        def get(self, *args, **kwargs):
            return self.real.get(*args, **kwargs)

    worker.inbox = Interrupting(worker.inbox)
    with pytest.raises(KeyboardInterrupt):
        streams.start_daemon(lambda: None, "agentcore-test")
    threads[0].join(10)
    assert not threads[0].is_alive(), "the worker taken from the idle list waits for a task for ever"

"""Abort signals (spec agent-loop §8.2) and event streams (§1.11 EventStream semantics, §8.3)."""

from __future__ import annotations

import threading

import pytest

from agentcore.events import DoneEvent, ErrorEvent, StartEvent, TextDeltaEvent
from agentcore.signals import AbortController, AbortError, AbortSignal
from agentcore.streams import AssistantMessageEventStream, EventStream
from agentcore.types import AssistantMessage


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

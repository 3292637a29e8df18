"""Ctrl-C always reaches the CLI's main thread (``agentcore.cli._interrupts``).

CPython runs a Python signal handler only when the main thread executes bytecode or a blocking
call in it fails with EINTR. A SIGINT taken by another thread, or one that lands while readline is
between two ``select()`` calls, trips the handler's flag and leaves the main thread blocked. Each
scenario runs in a fresh interpreter (the relay needs the real main thread, which a test runner may
not give its tests): the main thread blocks in ``os.read`` on a pipe nobody writes to, and a
helper thread takes the SIGINT itself, which is the lost case made deterministic.
"""

from __future__ import annotations

import platform
import subprocess
import sys
import textwrap

import pytest

_PRELUDE = textwrap.dedent(
    """
    import os, platform, signal, sys, threading
    from agentcore.cli._interrupts import interrupts_reach_main_thread

    READ = {"x86_64": 0, "aarch64": 63}.get(platform.machine())  # the read(2) syscall number

    def in_read(tid, fd):
        fields = open(f"/proc/self/task/{tid}/syscall").read().split()
        return fields[0] == str(READ) and int(fields[1], 16) == fd

    def blocked_main_thread_takes(deliver, guard_after=30.0):
        # Block the main thread in os.read on a pipe; deliver() sends SIGINT once the main thread
        # is in that read(2) (a poll of /proc, not a sleep). A guard writes to the pipe after
        # guard_after seconds, so a lost signal cannot hang the test. Returns "interrupted", or
        # "interrupted after input" when the signal waited for the guard's byte.
        r, w = os.pipe()
        main_tid = threading.get_native_id()
        fired = []
        def helper():
            while not in_read(main_tid, r):
                pass
            deliver()
        def guard():
            fired.append(True)
            os.write(w, b"x")
        timer = threading.Timer(guard_after, guard)
        timer.daemon = True
        timer.start()
        threading.Thread(target=helper, daemon=True).start()
        try:
            os.read(r, 1)
            while True:  # a handler that runs late runs at one of the next bytecodes
                pass
        except KeyboardInterrupt:
            return "interrupted after input" if fired else "interrupted"
        finally:
            timer.cancel()
            os.close(r)
            os.close(w)

    def on_helper_thread():
        # the helper takes the signal itself: the kernel may pick any thread that does not block it
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)
    """
)

needs_syscall_file = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.machine() not in ("x86_64", "aarch64"),
    reason="the scenario waits for the main thread's read(2) in /proc/self/task/*/syscall (Linux on x86_64 or aarch64)",
)


def _run(body: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", _PRELUDE + textwrap.dedent(body)],
        capture_output=True,
        text=True,
        timeout=120,
    )


@needs_syscall_file
def test_a_sigint_another_thread_took_interrupts_the_blocked_main_thread():
    done = _run(
        """
        with interrupts_reach_main_thread():
            print(blocked_main_thread_takes(on_helper_thread))
        """
    )
    assert done.stdout.strip() == "interrupted", done.stderr


@needs_syscall_file
def test_without_the_relay_that_sigint_is_lost_until_input_arrives():
    """The defect the relay exists for (if CPython fixes it, this test says so)."""
    done = _run(
        """
        print(blocked_main_thread_takes(on_helper_thread, guard_after=1.0))
        """
    )
    assert done.stdout.strip() == "interrupted after input", done.stderr


@needs_syscall_file
def test_one_press_gives_one_keyboard_interrupt():
    done = _run(
        """
        with interrupts_reach_main_thread():
            first = blocked_main_thread_takes(lambda: os.kill(os.getpid(), signal.SIGINT))
            second = blocked_main_thread_takes(on_helper_thread)
            print(first, second)
        """
    )
    assert done.stdout.split() == ["interrupted", "interrupted"], done.stderr


def test_the_process_is_left_as_it_was_found():
    done = _run(
        """
        before_fds = sorted(os.listdir("/proc/self/fd"))
        r, w = os.pipe(); os.set_blocking(w, False)
        signal.set_wakeup_fd(w)
        with interrupts_reach_main_thread():
            assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
            assert any(t.name == "agentcore-sigint-relay" for t in threading.enumerate())
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert signal.set_wakeup_fd(-1) == w
        os.close(r); os.close(w)
        assert not any(t.name == "agentcore-sigint-relay" for t in threading.enumerate())
        assert sorted(os.listdir("/proc/self/fd")) == before_fds
        print("ok")
        """
    )
    assert done.stdout.strip() == "ok", done.stderr


def test_an_ignored_sigint_stays_ignored():
    done = _run(
        """
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        with interrupts_reach_main_thread():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGINT)
        print("still running")
        """
    )
    assert done.stdout.strip() == "still running", done.stderr


def test_off_the_main_thread_it_changes_nothing():
    done = _run(
        """
        seen = []
        def worker():
            with interrupts_reach_main_thread():
                seen.append(signal.getsignal(signal.SIGINT) is signal.default_int_handler)
        t = threading.Thread(target=worker); t.start(); t.join()
        print(seen)
        """
    )
    assert done.stdout.strip() == "[True]", done.stderr


@needs_syscall_file
def test_a_sigterm_another_thread_took_raises_terminated_in_the_main_thread():
    done = _run(
        """
        def term_on_helper():
            signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
        with interrupts_reach_main_thread():
            print(blocked_main_thread_takes(term_on_helper))
        """
    )
    assert done.stdout.strip() == "interrupted", done.stderr  # a Terminated is a KeyboardInterrupt


def test_sigterm_is_terminated_and_left_as_found_and_a_handler_of_the_caller_stands():
    done = _run(
        """
        from agentcore.cli._interrupts import Terminated
        with interrupts_reach_main_thread():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                while True:
                    pass
            except Terminated:
                print("terminated")
            seen = []
            previous = signal.signal(signal.SIGTERM, lambda *a: seen.append("own"))  # as agentcore rpc does
            os.kill(os.getpid(), signal.SIGTERM)
            while not seen:
                pass
            signal.signal(signal.SIGTERM, previous)
            print(seen)
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with interrupts_reach_main_thread():
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN  # an ignored SIGTERM stays ignored
        print("ok")
        """
    )
    assert done.stdout.split("\n")[:3] == ["terminated", "['own']", "ok"], done.stderr

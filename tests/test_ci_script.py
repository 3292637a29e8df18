"""Checks of the CI script's clean-up and of the benchmarks' command lines (not run by .ci/run).

    python -m pytest -q -p no:cacheprovider .ci/test_run.py

The clean-up tests run .ci/run's own definitions (everything before its first stage) with stages
of their own, from a copy in a temporary folder: nothing is installed and no real stage runs.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, List

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"


def _wait_for(predicate: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _alive(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return fields[0] != "Z"


def _ci_with_stages(tmp_path: Path, stages: str) -> Path:
    """A copy of .ci/run whose stages are ``stages`` (bash), in ``tmp_path/repo/.ci/run``."""
    text = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    prelude = text[: text.index('\nstage "')]
    script = tmp_path / "repo" / ".ci" / "run"
    script.parent.mkdir(parents=True)
    script.write_text(prelude + "\n" + stages, encoding="utf-8")
    return script


_LONG_STAGE = """
long_stage() {  # a stage with a child process that would outlive an orphaning script
    sleep 300 &
    echo "$! $work" > "$MARKER.tmp"
    mv "$MARKER.tmp" "$MARKER"
    wait
}
stage "long" long_stage
echo "after the long stage"
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_stops_the_running_stage_and_removes_the_work_folder(tmp_path, signum):
    script = _ci_with_stages(tmp_path, _LONG_STAGE)
    marker = tmp_path / "marker"
    env = dict(os.environ, MARKER=str(marker))
    env.pop("AGENTCORE_CI_WORK", None)
    proc = subprocess.Popen(["bash", str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    child = 0
    try:
        _wait_for(marker.exists, "the stage to start its child")
        pid_text, work = marker.read_text().split(maxsplit=1)
        child, work = int(pid_text), work.strip()
        proc.send_signal(signum)  # the script alone, as a CI runner's timeout or `kill` does
        out, _ = proc.communicate(timeout=20)
        assert proc.returncode == 128 + signum, out
        assert "after the long stage" not in out
        assert not _alive(child), "the stage's process outlived the script"
        assert not Path(work).exists(), "the work folder was left behind"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if child and _alive(child):
            os.kill(child, signal.SIGKILL)


def test_a_failing_stage_removes_the_work_folder_and_names_the_stage(tmp_path):
    stages = """
first() { echo "$work" > "$MARKER"; }
stage "first" first
stage "broken" false
stage "never" echo "the stage after a failure ran"
"""
    script = _ci_with_stages(tmp_path, stages)
    marker = tmp_path / "marker"
    env = dict(os.environ, MARKER=str(marker))
    env.pop("AGENTCORE_CI_WORK", None)
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the stage after a failure ran" not in done.stdout
    assert not Path(marker.read_text().strip()).exists(), "the work folder was left behind"
    assert 'in stage "broken"' in done.stdout


def test_a_work_folder_named_by_the_user_is_kept(tmp_path):
    work = tmp_path / "work"
    script = _ci_with_stages(tmp_path, 'stage "one" true\n')
    env = dict(os.environ, AGENTCORE_CI_WORK=str(work))
    subprocess.run(["bash", str(script)], env=env, check=True, capture_output=True, timeout=60)
    assert work.is_dir()


_NO_ARGUMENTS = ("plugin_discovery.py", "validation.py")  # they take none (and run in about a second)


def _benchmarks() -> List[str]:
    return sorted(p.name for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_") and p.name not in _NO_ARGUMENTS)


@pytest.mark.parametrize("name", _benchmarks())
def test_every_benchmark_answers_help(name):
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / name), "--help"], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage:"), done.stdout


@pytest.mark.parametrize("name", ["abort_latency.py", "core_overhead.py", "parse_per_delta.py", "rpc_events.py"])
def test_a_bad_size_is_a_usage_error(name):
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / name), "many"], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode == 2, done.stderr
    assert "'many' is not a whole number" in done.stderr
    assert "Traceback" not in done.stderr


def test_session_scale_runs_at_a_tiny_size(tmp_path):  # fewer lines than its 2000-row INSERT floor
    done = subprocess.run(
        [
            sys.executable,
            str(BENCHMARKS / "session_scale.py"),
            "--entries",
            "100",
            "--rounds",
            "1",
            "--dir",
            str(tmp_path / "scale"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert "ratio vs a bare autocommit INSERT" in done.stdout


def test_import_time_leaves_no_cache_folder(tmp_path):
    env = dict(os.environ, TMPDIR=str(tmp_path))
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "import_time.py"), "1"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert "ratio" in done.stdout
    assert list(tmp_path.iterdir()) == []


def test_a_stage_gets_the_default_sigint_handling(tmp_path):  # the CLI's Ctrl+C tests need it
    code = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    script = _ci_with_stages(tmp_path, f'stage "python" "{sys.executable}" -c "{code}"\n')
    done = subprocess.run(
        ["setsid", "bash", str(script)], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "True"


def test_the_main_job_stays_offline_when_the_shell_configures_a_provider(tmp_path):
    script = _ci_with_stages(tmp_path, 'stage "main job (offline)" main_job\n')
    (tmp_path / "repo" / "examples").symlink_to(ROOT / "examples")
    work = tmp_path / "work"
    (work / "venv" / "bin").mkdir(parents=True)
    python = work / "venv" / "bin" / "python"  # this interpreter, its virtual environment kept (a
    python.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')  # symlink would lose it)
    python.chmod(0o755)
    env = dict(
        os.environ,
        AGENTCORE_CI_WORK=str(work),
        AGENTCORE_MODEL="anthropic/claude-sonnet-4-5",
        OPENAI_BASE_URL="http://127.0.0.1:9/v1",
        PYTHONPATH=str(ROOT),
    )
    env.pop("ANTHROPIC_API_KEY", None)
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr

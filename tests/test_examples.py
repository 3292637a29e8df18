"""Every script in examples/ runs: the offline ones do their job, the provider ones explain what
to configure and exit 0 when no key or server is configured (DESIGN §1: runnable scripts)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

# script -> a line fragment its output must contain
OFFLINE = {
    "quickstart.py": "123 * 456 = 56088",
    "branching.py": "session file:",
    "long_run.py": "compactions; the model's context starts with: compactionSummary",
    "coding_agent.py": "calc.py prints 2 + 3 = 5",
    "rpc_client.py": "agentcore rpc exited with status 0",
}
NEEDS_CONFIGURATION = ["anthropic.py", "gemini.py", "openai.py", "openai_responses.py", "openai_compatible_local.py"]
KEY_VARIABLES = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_OAUTH_TOKEN",
    "GEMINI_API_KEY",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "AGENTCORE_MODEL",
    "AGENTCORE_BASE_URL",
    "OPENAI_MODEL",
)


def _run(script: str, tmp_path: Path, env: dict = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in KEY_VARIABLES}
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, str(EXAMPLES / script)],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_every_example_is_listed_here():
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(list(OFFLINE) + NEEDS_CONFIGURATION)


@pytest.mark.parametrize("script", list(OFFLINE))
def test_offline_example_runs(script, tmp_path):
    done = _run(script, tmp_path)
    assert done.returncode == 0, done.stderr
    assert OFFLINE[script].lower() in done.stdout.lower()
    assert len((EXAMPLES / script).read_text().splitlines()) < 80


@pytest.mark.parametrize("script", NEEDS_CONFIGURATION)
def test_provider_example_explains_what_to_configure(script, tmp_path):
    # a base URL nobody listens on, for the local-server example
    done = _run(
        script,
        tmp_path,
        {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"} if script == "openai_compatible_local.py" else None,
    )
    assert done.returncode == 0, done.stderr
    output = (done.stdout + done.stderr).lower()
    assert any(word in output for word in ("set ", "api key", "server", "export")), output
    assert len((EXAMPLES / script).read_text().splitlines()) < 80

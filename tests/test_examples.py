"""Every script in examples/ runs: the offline ones do their job, the provider ones explain what
to configure and exit 0 when no key or server is configured (DESIGN §1: runnable scripts)."""

from __future__ import annotations

import json
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


def test_quickstart_without_a_key_names_the_variable_and_fails(tmp_path):
    """A real model asked for without its key: the script says what to set and exits 1 (it used to
    exit 0, so `python examples/quickstart.py && ...` went on after a failed run)."""
    done = _run("quickstart.py", tmp_path, {"AGENTCORE_MODEL": "anthropic/claude-sonnet-4-5"})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "ANTHROPIC_API_KEY" in done.stdout and "Traceback" not in done.stderr


def test_quickstart_reads_agentcore_model_scripted_as_the_cli_does(tmp_path):
    """``AGENTCORE_MODEL=scripted`` (the CLI's offline demo) is the offline run, not an unknown
    model reported with a list of twenty catalog ids."""
    done = _run("quickstart.py", tmp_path, {"AGENTCORE_MODEL": "scripted"})
    assert done.returncode == 0, done.stderr
    assert "123 * 456 = 56088" in done.stdout and "unavailable" not in done.stdout


def test_rpc_client_without_a_key_says_what_to_set(tmp_path):
    """agentcore rpc refuses to start without the key: the client ends with that reason and the
    server's status, not "stop reason: None" and a BrokenPipeError traceback."""
    done = _run("rpc_client.py", tmp_path, {"AGENTCORE_MODEL": "anthropic/claude-sonnet-4-5"})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "ANTHROPIC_API_KEY" in done.stderr and "exited with status 2" in done.stderr
    assert "Traceback" not in done.stderr and "stop reason: None" not in done.stdout


def test_rpc_client_reports_why_a_request_failed(tmp_path):
    """A model request that fails (no server at the model's URL) ends the client with the error
    message and status 1; it used to print "stop reason: error", go on and exit 0."""
    models = tmp_path / "models.json"
    models.write_text(
        '{"models": [{"id": "m", "provider": "nowhere", "api": "openai-completions",'
        ' "baseUrl": "http://127.0.0.1:9/v1"}]}'
    )
    env = {"AGENTCORE_MODELS": str(models), "AGENTCORE_MODEL": "nowhere/m"}
    done = _run("rpc_client.py", tmp_path, env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "error: Connection error talking to 127.0.0.1:9" in done.stderr
    assert "Traceback" not in done.stderr and "exited with status 0" in done.stderr


def test_coding_agent_runs_a_python_whose_path_has_a_space(tmp_path):
    """The bash step quotes the interpreter's path ("/Users/Jane Doe/venv/bin/python"); it used to
    fail with "No such file or directory" while the script still exited 0."""
    import site

    spaced = tmp_path / "my env" / "python"
    spaced.parent.mkdir()
    spaced.symlink_to(sys.executable)
    # the link is no venv of its own: give it this one's packages (plugins' editable finders
    # are .pth files it does not read, hence no autoloading)
    paths = [str(EXAMPLES.parent), *site.getsitepackages()]
    env = {"PYTHONPATH": os.pathsep.join(paths), "AGENTCORE_DISABLE_PLUGIN_AUTOLOAD": "1"}
    done = subprocess.run(
        [str(spaced), str(EXAMPLES / "coding_agent.py")],
        cwd=tmp_path,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "<- bash [ok]" in done.stdout and "No such file" not in done.stdout


def test_coding_agent_fails_when_a_tool_call_fails(tmp_path):
    """A failed tool call (here: the interpreter the bash step runs does not exist) is a failed
    script, exit 1, although the scripted model still claims success (it used to exit 0)."""
    script = EXAMPLES / "coding_agent.py"
    run_it = (
        f"import sys; sys.executable = '/nonexistent/python'; exec(compile(open({str(script)!r}).read(), 'x', 'exec'))"
    )
    done = subprocess.run([sys.executable, "-c", run_it], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "<- bash [error]" in done.stdout


# script -> (its key variable, the model it defaults to, that model's wire API)
PROVIDER_DEFAULTS = {
    "anthropic.py": ("ANTHROPIC_API_KEY", "anthropic/claude-haiku-4-5", "anthropic-messages"),
    "gemini.py": ("GEMINI_API_KEY", "google/gemini-2.5-flash", "google-generative-ai"),
    "openai_responses.py": ("OPENAI_API_KEY", "openai/gpt-5-mini", "openai-responses"),
}


@pytest.mark.parametrize("script", list(PROVIDER_DEFAULTS))
def test_provider_example_ignores_the_clis_agentcore_model(script, tmp_path):
    """``AGENTCORE_MODEL`` set for the CLI (``scripted``, an alias such as ``sonnet``) is no model of
    the example's provider: the example runs its default model, here pointed by a models.json at a
    port nobody listens on, and reports the failed request (it used to end in an UnknownModelError
    traceback)."""
    key, default, api = PROVIDER_DEFAULTS[script]
    provider, model_id = default.split("/")
    models = tmp_path / "models.json"
    models.write_text(
        json.dumps({"models": [{"id": model_id, "provider": provider, "api": api, "baseUrl": "http://127.0.0.1:9/v1"}]})
    )
    env = {key: "test-key", "AGENTCORE_MODELS": str(models), "AGENTCORE_MODEL": "scripted"}
    done = _run(script, tmp_path, env)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1 and "Connection error talking to 127.0.0.1:9" in done.stdout, done.stdout


def test_provider_example_names_an_unknown_agentcore_model(tmp_path):
    """A mistyped model of the example's provider is reported in one line, status 2, before any
    request."""
    done = _run("anthropic.py", tmp_path, {"ANTHROPIC_API_KEY": "test-key", "AGENTCORE_MODEL": "anthropic/claude-nope"})
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 2 and "AGENTCORE_MODEL=anthropic/claude-nope: unknown model" in done.stdout

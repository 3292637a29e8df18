"""What goes into a prompt from the command line (issue 18): ``-a/--attach`` files and images,
the project context files (AGENTS.md/CLAUDE.md) in the system prompt, and the did-you-mean of a
mistyped ``--model``/``/model``. The request a local server receives is checked, so what the
model sees is what is asserted."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
from typing import Any, Dict, List, Tuple

import pytest
import test_cli
from _servers import ScriptedServer
from test_cli import agentcore, answer, local

from agentcore.cli import _attach, main

# the smallest valid images of each kind (their magic numbers are what counts)
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01" + b"\x00" * 8
GIF = b"GIF89a\x01\x00\x01\x00\x00\x00\x00;"
WEBP = b"RIFF\x1a\x00\x00\x00WEBPVP8 " + b"\x00" * 14
env = test_cli.env  # the clean-environment fixture of the CLI tests
VISION = ["--model", "groq/meta-llama/llama-4-scout-17b-16e-instruct"]  # openai-completions, image input
TEXT_ONLY = ["--model", "groq/llama-3.3-70b-versatile"]  # openai-completions, text input only


def _vision_env(env: Dict[str, str]) -> Dict[str, str]:
    return {**env, "GROQ_API_KEY": "gsk-test"}


def _user_content(server: ScriptedServer) -> List[Dict[str, Any]]:
    content = server.requests[0].json()["messages"][-1]["content"]
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


def _run(*argv: str, stdin: str = "") -> Tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), stdin=io.StringIO(stdin), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


# --------------------------------------------------------------------------- --attach


@pytest.mark.parametrize(
    "data, mime", [(PNG, "image/png"), (JPEG, "image/jpeg"), (GIF, "image/gif"), (WEBP, "image/webp")]
)
def test_attach_sniffs_the_image_type_from_the_bytes_not_the_name(data, mime, tmp_path):
    path = tmp_path / "picture.txt"  # a misleading suffix: the bytes decide
    path.write_bytes(data)
    attached = _attach.read_attachment(str(path))
    assert attached.image is not None and attached.text is None
    assert attached.image.mime_type == mime
    assert base64.b64decode(attached.image.data) == data


def test_attach_sends_the_image_and_the_text_file_to_the_server(env, tmp_path):
    (tmp_path / "shot.dat").write_bytes(PNG)
    (tmp_path / "notes.md").write_text("# Notes\nthe build is red\n", encoding="utf-8")
    with ScriptedServer([answer("I see it")]) as server:
        done = agentcore(
            "run", "--base-url", server.url + "/v1", *VISION, "-a", "shot.dat", "--attach", "notes.md",
            "what is wrong?", env=_vision_env(env), cwd=tmp_path,
        )  # fmt: skip
        content = _user_content(server)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "I see it\n"
    text = "".join(part.get("text", "") for part in content if part["type"] == "text")
    notes = str(tmp_path / "notes.md")
    assert f'<file name="{notes}">\n# Notes\nthe build is red\n</file>\n' in text
    assert f'<file name="{tmp_path / "shot.dat"}"></file>\n' in text
    assert text.endswith("what is wrong?")
    assert text.index("shot.dat") < text.index("notes.md") < text.index("what is wrong?")  # command-line order
    images = [part for part in content if part["type"] == "image_url"]
    assert images == [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()}}
    ]


def test_attach_dash_reads_stdin_bytes_as_the_attachment(env, tmp_path):
    with ScriptedServer([answer("a tiny image")]) as server:
        done = subprocess.run(
            [sys.executable, "-m", "agentcore", "run", "--base-url", server.url + "/v1", *VISION, "-a", "-", "describe"],
            input=PNG, capture_output=True, env=_vision_env(env), cwd=str(tmp_path), timeout=60,
        )  # fmt: skip
        content = _user_content(server)
    assert done.returncode == 0, done.stderr
    assert any(part["type"] == "image_url" and base64.b64encode(PNG).decode() in json.dumps(part) for part in content)
    assert '<file name="<stdin>"></file>\ndescribe' in content[0]["text"]


def test_attach_dash_with_text_on_stdin_keeps_the_prompt_words(env, tmp_path):
    with ScriptedServer([answer("ok")]) as server:
        done = agentcore(
            "run", *local(server), "-a", "-", "summarise", env=env, stdin="line one\nline two\n", cwd=tmp_path
        )
        text = _user_content(server)[0]["text"]
    assert done.returncode == 0, done.stderr
    assert text == '<file name="<stdin>">\nline one\nline two\n</file>\nsummarise'


def test_an_image_for_a_text_only_model_is_refused_before_anything_is_sent(env, tmp_path):
    (tmp_path / "shot.png").write_bytes(PNG)
    with ScriptedServer([answer("never")]) as server:
        done = agentcore(
            "run", "--base-url", server.url + "/v1", *TEXT_ONLY, "-a", "shot.png", "what is it?",
            env=_vision_env(env), cwd=tmp_path,
        )  # fmt: skip
        assert server.requests == []
    assert done.returncode == 2
    assert "shot.png" in done.stderr and "groq/llama-3.3-70b-versatile takes no image input" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_image_refused_for_the_model_leaves_no_new_session_file_behind(tmp_path, monkeypatch):
    """``run``/``chat --session new.jsonl`` (or ``new``, an id not yet recorded, a .db) with an
    image for a text-only model exited 2 but left the header-only session file it had just made:
    one empty conversation in ``sessions list`` per refused start. The refusal comes after the
    agent (and so the session) was built; the file made for the command goes again, as when
    building fails, and an existing session is left as it was."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "shot.png").write_bytes(PNG)
    sessions = tmp_path / "sessions"
    existing = tmp_path / "kept.jsonl"
    assert _run("run", "--model", "scripted", "--session", str(existing), "hi")[0] == 0
    before = existing.read_bytes()
    for command in ("run", "chat"):
        for value in ("new", f"fresh-{command}", str(tmp_path / "new.jsonl"), str(tmp_path / "new.db"), str(existing)):
            argv = [command, "--model", "scripted", "--sessions-dir", str(sessions), "--session", value]
            status, _, err = _run(*argv, "-a", "shot.png", *(["what is it?"] if command == "run" else []))
            assert status == 2, err
            assert "scripted/scripted-demo takes no image input" in err
    assert [p.name for p in sessions.rglob("*") if p.is_file()] == []
    assert not (tmp_path / "new.jsonl").exists() and not (tmp_path / "new.db").exists()
    assert existing.read_bytes() == before


def test_an_image_for_a_local_server_model_is_sent(env, tmp_path):
    """A model the catalog does not know (``--base-url`` with a bare id) declares no input: the
    image is sent and the server decides."""
    (tmp_path / "shot.png").write_bytes(PNG)
    with ScriptedServer([answer("a pixel")]) as server:
        done = agentcore("run", *local(server), "-a", "shot.png", "what is it?", env=env, cwd=tmp_path)
        content = _user_content(server)
    assert done.returncode == 0, done.stderr
    assert [part["type"] for part in content] == ["text", "image_url"]


@pytest.mark.parametrize(
    "data, named",
    [
        (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n", "application/pdf"),
        (b"PK\x03\x04\x14\x00\x00\x00", "application/zip"),
        (b"\x00\x01\x02\x03binary", "binary data"),
        (b"caf\xe9 latin-1", "binary data"),
    ],
)
def test_attach_of_a_file_that_is_neither_image_nor_text_names_the_file_and_type(data, named, tmp_path):
    path = tmp_path / "report.png"  # the suffix lies; the message names what the bytes are
    path.write_bytes(data)
    status, out, err = _run("run", "--model", "scripted", "-a", str(path), "read it")
    assert status == 2 and out == ""
    assert "report.png" in err and named in err and "Traceback" not in err


def test_attach_of_a_missing_file_a_directory_or_too_large_a_file_is_a_clear_error(tmp_path, monkeypatch):
    status, _, err = _run("run", "--model", "scripted", "-a", str(tmp_path / "nope.txt"), "x")
    assert status == 2 and "nope.txt" in err and "no such file" in err
    status, _, err = _run("run", "--model", "scripted", "-a", str(tmp_path), "x")
    assert status == 2 and "is a directory" in err
    monkeypatch.setattr(_attach, "MAX_ATTACHMENT_BYTES", 10)
    (tmp_path / "big.txt").write_text("x" * 11, encoding="utf-8")
    status, _, err = _run("run", "--model", "scripted", "-a", str(tmp_path / "big.txt"), "x")
    assert status == 2 and "big.txt" in err and "larger than the limit" in err
    (tmp_path / "ok.txt").write_text("x" * 10, encoding="utf-8")
    status, out, _ = _run("run", "--model", "scripted", "-a", str(tmp_path / "ok.txt"), "x")
    assert status == 0 and "xxxxxxxxxx" in out


def test_attach_dash_is_refused_by_chat_and_twice_by_run():
    status, _, err = _run("chat", "--model", "scripted", "-a", "-")
    assert status == 2 and "--attach - is for run" in err
    status, _, err = _run("run", "--model", "scripted", "-a", "-", "-a", "-", "x", stdin="text")
    assert status == 2 and "only once" in err
    status, _, err = _run("run", "--model", "scripted", "-a", "-", "-", stdin="text")
    assert status == 2 and "both want stdin" in err
    status, _, err = _run("run", "--model", "scripted", "--approve", "-a", "-", "x", stdin="text")
    assert status == 2 and "--approve reads its answers from stdin" in err


def test_chat_attach_goes_with_the_next_prompt_only(env, tmp_path):
    (tmp_path / "a.txt").write_text("alpha file\n", encoding="utf-8")
    (tmp_path / "b c.txt").write_text("beta file\n", encoding="utf-8")
    lines = "/attach b\\ c.txt\n/attach\nfirst\nsecond\n/attach missing.txt\n/attach clear\n"
    with ScriptedServer([answer("one"), answer("two")]) as server:
        done = agentcore("chat", *local(server), "-a", "a.txt", env=env, stdin=lines, cwd=tmp_path)
        first = json.dumps(server.requests[0].json()["messages"][-1])
        second = json.dumps(server.requests[1].json()["messages"][-1])
    assert done.returncode == 0, done.stderr
    assert "alpha file" in first and "beta file" in first and first.index("a.txt") < first.index("b c.txt")
    assert "alpha file" not in second and "beta file" not in second and "second" in second
    assert "with the next prompt: a.txt (11 bytes, text), b c.txt (10 bytes, text)" in done.stdout
    assert "/attach missing.txt: no such file" in done.stdout  # the chat command typed, not the flag
    assert "--attach" not in done.stdout
    assert "no attachments" in done.stdout


def test_chat_image_for_a_text_only_model_is_not_sent_and_kept(env, tmp_path):
    (tmp_path / "shot.png").write_bytes(PNG)
    status, _, err = _run("chat", "--model", "scripted", "-a", str(tmp_path / "shot.png"))
    assert status == 2 and "takes no image input" in err  # at start: before anything is sent
    with ScriptedServer([answer("text only")]) as server:
        done = agentcore(
            "chat", "--base-url", server.url + "/v1", *TEXT_ONLY, env=_vision_env(env), cwd=tmp_path,
            stdin="/attach shot.png\nwhat is it?\n/attach clear\nwhat is it?\n",
        )  # fmt: skip
        sent = [r.json()["messages"][-1] for r in server.requests]
    assert done.returncode == 0, done.stderr
    assert "attached shot.png: the model" in done.stdout and "takes no image input" in done.stdout
    assert "Not sent" in done.stdout and "--attach" not in done.stdout  # it came by /attach
    assert len(sent) == 1 and "image_url" not in json.dumps(sent)


# --------------------------------------------------------------------------- project context


def _system(server: ScriptedServer, n: int = 0) -> str:
    first = server.requests[n].json()["messages"][0]
    return str(first["content"]) if first["role"] in ("system", "developer") else ""


@pytest.fixture
def repo(tmp_path):
    """``outer/AGENTS.md`` above a repository ``outer/repo`` (.git) with ``AGENTS.md`` at its
    root, ``CLAUDE.md`` in ``pkg`` and both names in ``pkg/deep`` (the working directory)."""
    root = tmp_path / "outer" / "repo"
    deep = root / "pkg" / "deep"
    deep.mkdir(parents=True)
    (root / ".git").mkdir()
    (tmp_path / "outer" / "AGENTS.md").write_text("OUTSIDE THE REPO", encoding="utf-8")
    (root / "AGENTS.md").write_text("ROOT RULES", encoding="utf-8")
    (root / "pkg" / "CLAUDE.md").write_text("PKG RULES", encoding="utf-8")
    (deep / "AGENTS.md").write_text("DEEP RULES", encoding="utf-8")
    (deep / "CLAUDE.md").write_text("HIDDEN BY AGENTS.md", encoding="utf-8")
    return deep


def test_chat_adds_the_context_files_from_the_repository_root_to_cwd(env, repo):
    with ScriptedServer([answer("ok")]) as server:
        done = agentcore("chat", *local(server), "--system", "Be terse.", env=env, stdin="hi\n/context\n", cwd=repo)
        system = _system(server)
    assert done.returncode == 0, done.stderr
    root = repo.parents[1]
    assert system == (
        "Be terse.\n\n# Project context\n\n"
        "Instructions and guidelines for this project, from its context files:\n\n"
        f"## {root / 'AGENTS.md'}\n\nROOT RULES\n\n"
        f"## {root / 'pkg' / 'CLAUDE.md'}\n\nPKG RULES\n\n"
        f"## {repo / 'AGENTS.md'}\n\nDEEP RULES\n"
    )
    assert "OUTSIDE THE REPO" not in system and "HIDDEN" not in system
    assert f"  {root / 'AGENTS.md'} (10 bytes)\n  {root / 'pkg' / 'CLAUDE.md'} (9 bytes)" in done.stdout
    assert "context: 3 files" in done.stderr  # the banner says it


def test_run_adds_context_only_with_tools_and_no_context_turns_it_off(env, repo):
    with ScriptedServer([answer("one"), answer("two"), answer("three")]) as server:
        plain = agentcore("run", *local(server), "hi", env=env, cwd=repo)
        tools = agentcore("run", *local(server), "--tools", "ls", "hi", env=env, cwd=repo)
        off = agentcore("run", *local(server), "--tools", "ls", "--no-context", "hi", env=env, cwd=repo)
        systems = [_system(server, n) for n in range(3)]
    assert (plain.returncode, tools.returncode, off.returncode) == (0, 0, 0), tools.stderr
    assert "ROOT RULES" not in systems[0]
    assert systems[1].startswith("# Project context") and "DEEP RULES" in systems[1]
    assert "ROOT RULES" not in systems[2]


def test_chat_no_context_and_the_context_command(env, repo):
    with ScriptedServer([answer("ok")]) as server:
        done = agentcore("chat", *local(server), "--no-context", env=env, stdin="hi\n/context\n", cwd=repo)
        system = _system(server)
    assert done.returncode == 0, done.stderr
    assert "RULES" not in system
    assert "no project context loaded" in done.stdout


def test_outside_a_repository_the_walk_stops_at_home(tmp_path):
    from agentcore.cli._context import find_context_files

    home = tmp_path / "home"
    project = home / "work" / "project"
    project.mkdir(parents=True)
    (tmp_path / "AGENTS.md").write_text("ABOVE HOME", encoding="utf-8")
    (home / "AGENTS.md").write_text("HOME RULES", encoding="utf-8")
    (project / "AGENTS.md").write_text("PROJECT RULES", encoding="utf-8")
    found = find_context_files(str(project), home=str(home))
    assert [f.text for f in found] == ["HOME RULES", "PROJECT RULES"]
    # a directory outside $HOME walks to the filesystem root; tmp_path's file is found on the way
    other = tmp_path / "elsewhere"
    other.mkdir()
    assert "ABOVE HOME" in [f.text for f in find_context_files(str(other), home=str(home))]


def test_an_unreadable_or_binary_context_file_is_skipped_with_a_notice(tmp_path):
    from agentcore.cli import _context

    (tmp_path / ".git").mkdir()
    (tmp_path / "AGENTS.md").write_bytes(b"caf\xe9")
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "AGENTS.md").write_text("x" * (_context.MAX_CONTEXT_BYTES + 1), encoding="utf-8")
    notes: List[str] = []
    assert _context.find_context_files(str(sub), home="", note=notes.append) == []
    assert len(notes) == 2 and "not UTF-8 text" in notes[1] and "larger than" in notes[0]


# --------------------------------------------------------------------------- model typos


@pytest.mark.parametrize(
    "typed, suggested",
    [
        ("gpt-4o-mnii", "openai/gpt-4o-mini"),  # a bare id, two letters swapped
        ("openai/gpt-4o-mnii", "openai/gpt-4o-mini"),
        ("anthropic/claude-sonnet-4.5", "anthropic/claude-sonnet-4-5"),
        ("sonnet", "claude-sonnet"),  # a fragment: the names containing it
    ],
)
def test_a_mistyped_model_is_a_usage_error_with_a_did_you_mean(typed, suggested):
    status, out, err = _run("run", "--model", typed, "hi")
    assert status == 2 and out == ""
    assert f"unknown model {typed!r} (did you mean" in err and suggested in err


def test_local_id_without_base_url_says_what_is_missing():
    status, _, err = _run("run", "--model", "local/llama3", "hi")
    assert status == 2 and "needs --base-url URL" in err


def test_the_did_you_mean_includes_the_users_aliases():
    from agentcore.cli._aliases import aliases_path

    os.makedirs(os.path.dirname(aliases_path()), exist_ok=True)
    with open(aliases_path(), "w", encoding="utf-8") as f:
        json.dump({"fastcoder": "groq/llama-3.3-70b-versatile"}, f)
    status, _, err = _run("run", "--model", "fastcodr", "hi")
    assert status == 2 and "'fastcoder'" in err


def test_chat_model_typo_shows_a_did_you_mean_and_keeps_the_model(env, tmp_path):
    with ScriptedServer([answer("still here")]) as server:
        done = agentcore(
            "chat", *local(server), env=env, cwd=tmp_path, stdin="/model gpt-4o-mnii\n/model openai/gpt-4o-mni\nhi\n"
        )
        sent = server.requests[0].json()["model"]
    assert done.returncode == 0, done.stderr
    # with --base-url a bare id may be the server's own name: sent as given, but said out loud
    assert "[model 'gpt-4o-mnii' is not in the catalog" in done.stdout and "'openai/gpt-4o-mini'" in done.stdout
    assert "model: local/openai/gpt-4o-mni" in done.stdout
    assert sent == "openai/gpt-4o-mni"
    status, out, _ = _run("chat", "--model", "scripted", stdin="/model gpt-4o-mnii\n/model\n")
    assert status == 0
    assert "unknown model 'gpt-4o-mnii' (did you mean 'openai/gpt-4o-mini'" in out
    assert "model: scripted/scripted-demo" in out  # unchanged


def test_base_url_with_a_near_catalog_id_is_sent_with_a_notice(env, tmp_path):
    with ScriptedServer([answer("ok"), answer("ok")]) as server:
        typo = agentcore("run", "--base-url", server.url + "/v1", "--model", "gpt-4o-mnii", "hi", env=env, cwd=tmp_path)
        meant = agentcore(
            "run", "--base-url", server.url + "/v1", "--model", "local/gpt-4o-mnii", "hi", env=env, cwd=tmp_path
        )
        sent = [r.json()["model"] for r in server.requests]
    assert (typo.returncode, meant.returncode) == (0, 0)
    assert sent == ["gpt-4o-mnii", "gpt-4o-mnii"]
    assert "not in the catalog" in typo.stderr and "did you mean 'openai/gpt-4o-mini'" in typo.stderr
    assert "not in the catalog" not in meant.stderr


def test_base_url_with_a_bare_catalog_id_of_several_providers_has_no_typo_notice():
    """``--base-url URL --model gpt-4o-mini`` (an id openai, azure-openai-responses ... all list)
    is the local server's model, as documented; the notice said it "is not in the catalog" and
    suggested gpt-4.1-mini."""
    with ScriptedServer([answer("ok")]) as server:
        status, out, err = _run("run", "--no-log", "--base-url", server.url + "/v1", "--model", "gpt-4o-mini", "hi")
        sent = [r.json()["model"] for r in server.requests]
    assert status == 0 and out == "ok\n", err
    assert sent == ["gpt-4o-mini"]
    assert "not in the catalog" not in err
    # chat's /model said it too (its own check had no such exception)
    chat = ("chat", "--no-log", "--base-url", "http://127.0.0.1:9/v1", "--model", "llama3")
    status, out, err = _run(*chat, stdin="/model gpt-4o-mini\n")
    assert status == 0 and "model: local/gpt-4o-mini" in out, out + err
    assert "not in the catalog" not in out + err


def test_chat_in_a_removed_working_directory_loads_no_context_and_goes_on(tmp_path, monkeypatch):
    """A shell left in a directory another terminal removed: ``os.getcwd()`` fails, and chat (and
    ``run --tools``) stopped with ``agentcore: FileNotFoundError`` (exit 1) looking for AGENTS.md."""
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    status, out, err = _run("chat", "--model", "scripted", "--no-log", stdin="hi\n/context\n")
    assert status == 0, err
    assert "You said: hi" in out and "no project context loaded" in out
    assert "[context: none loaded: the working directory cannot be read" in err


def test_attach_of_a_url_says_only_local_files_are_attached(tmp_path, monkeypatch):
    """``llm -a URL`` fetches the URL; here ``-a https://...`` said ``no such file
    (/cwd/https:/example.com/cat.png)``, a path the user never typed."""
    monkeypatch.chdir(tmp_path)
    status, out, err = _run("run", "--model", "scripted", "-a", "https://example.com/cat.png", "x")
    assert status == 2 and out == ""
    assert "--attach https://example.com/cat.png: only local files can be attached, not URLs" in err
    assert "https:/example.com" not in err
    status, out, err = _run("chat", "--model", "scripted", "--no-log", stdin="/attach http://example.com/a.txt\n")
    assert status == 0 and "/attach http://example.com/a.txt: only local files can be attached" in out


def test_attach_of_a_url_never_shows_its_password_or_token(tmp_path, monkeypatch):
    """The URL error repeated the URL as typed: the password of its user info (``user:TOKEN@``) or
    a presigned query's signature was printed (and kept in CI logs)."""
    monkeypatch.chdir(tmp_path)
    url = "https://me:ghp_SECRET1@raw.example.com/cat.png?X-Amz-Signature=SECRET2&size=2"
    status, out, err = _run("run", "--model", "scripted", "-a", url, "x")
    assert status == 2 and "SECRET" not in err
    shown = "https://me:***@raw.example.com/cat.png?X-Amz-Signature=***&size=2"
    assert f"--attach {shown}: only local files can be attached" in err
    status, out, err = _run("chat", "--model", "scripted", "--no-log", stdin="/attach https://u:SECRET3@h.example/a\n")
    assert status == 0 and "SECRET" not in out + err
    assert "/attach https://u:***@h.example/a: only local files can be attached" in out


def test_attach_dash_with_an_empty_or_unreadable_stdin_is_a_usage_error(env, tmp_path):
    """``curl ... | agentcore run -a - "describe it"`` with curl failing sent an empty ``<stdin>``
    file (status 0, a paid answer about nothing); a stdin open for writing only failed with
    ``agentcore: OSError: [Errno 9] Bad file descriptor`` (status 1)."""
    argv = [sys.executable, "-m", "agentcore", "run", "--model", "scripted", "-a", "-", "describe it"]
    empty = subprocess.run(
        argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=60
    )
    assert empty.returncode == 2 and empty.stdout == ""
    assert "--attach -: stdin is empty (did the command piping the file fail?); nothing was sent" in empty.stderr
    with open(tmp_path / "write-only", "wb") as write_only:
        unreadable = subprocess.run(
            argv, stdin=write_only, capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=60
        )
    assert unreadable.returncode == 2 and unreadable.stdout == ""
    assert "--attach -: cannot read stdin (Bad file descriptor)" in unreadable.stderr


def test_attach_dash_with_stdin_closed_is_a_usage_error(monkeypatch):
    """``agentcore run -a - PROMPT <&-`` (descriptor 0 closed: ``sys.stdin`` is None) sent an empty
    ``<stdin>`` file."""
    monkeypatch.delenv("AGENTCORE_MODEL", raising=False)
    monkeypatch.setattr(sys, "stdin", None)
    out, err = io.StringIO(), io.StringIO()
    assert main(["run", "--model", "scripted", "--no-log", "-a", "-", "hi"], stdout=out, stderr=err) == 2
    assert out.getvalue() == ""
    assert "--attach -: there is no stdin (it is closed)" in err.getvalue()


def test_a_base_url_password_never_shows_in_the_notice_or_model_command():
    """A proxy's ``--base-url https://user:PASSWORD@host/v1?api-key=KEY``: the did-you-mean notice
    ("sent to URL as given") and chat's ``/model`` printed the URL whole, password and key."""
    url = "http://user:SECRET1@127.0.0.1:9/v1?api-key=SECRET2"
    status, out, err = _run("chat", "--no-log", "--base-url", url, "--model", "gpt-4o-mnii", stdin="/model\n")
    assert status == 0, err
    assert "SECRET" not in out + err
    shown = "http://user:***@127.0.0.1:9/v1?api-key=***"
    assert f"[model 'gpt-4o-mnii' is not in the catalog: sent to {shown} as given" in err
    assert f"model: local/gpt-4o-mnii (openai-completions, {shown})" in out

"""Issue 18: conversations logged by default, ``agentcore logs``, ``-c``/``-s`` prefixes,
``--no-stream``, ``agentcore keys`` and ``agentcore aliases``.

Commands run in-process through ``agentcore.cli.main`` with the scripted demo or a scripted local
server; the autouse fixture of conftest.py gives every test its own sessions and config dirs."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, List, Tuple

import pytest
from _servers import Reply, ScriptedServer, sse

from agentcore.cli import main
from agentcore.session import SessionRepository
from agentcore.testing import text

SECRET = "sk-stored-SECRET-7d2e41"


def run_cli(*argv: str, stdin: Any = "") -> Tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    source = io.StringIO(stdin) if isinstance(stdin, str) else stdin
    code = main(list(argv), stdin=source, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory of its own, no default model, no provider keys in the environment."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    for name in list(os.environ):
        if name == "AGENTCORE_MODEL" or name.endswith("_API_KEY"):
            monkeypatch.delenv(name)
    return work


def sessions_dir() -> Path:
    return Path(os.environ["AGENTCORE_SESSIONS_DIR"])


def config_dir() -> Path:
    return Path(os.environ["AGENTCORE_CONFIG_DIR"])


def session_files() -> List[Path]:
    return sorted(sessions_dir().glob("*/*.jsonl"))


def messages_of(path: Path) -> List[dict]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [entry["message"] for entry in lines if entry.get("type") == "message"]


def logs_json(*argv: str) -> List[dict]:
    code, out, err = run_cli("logs", "--json", *argv)
    assert code == 0, err
    found = json.loads(out)  # one JSON document (an array, as `llm logs --json`), not JSON lines
    assert isinstance(found, list)
    return found


# --------------------------------------------------------------------------- logged by default


def test_run_chat_json_and_schema_runs_are_logged_by_default(here):
    assert run_cli("run", "--model", "scripted", "plain run")[0] == 0
    assert run_cli("run", "--json", "--model", "scripted", "json run")[0] == 0
    assert run_cli("run", "--schema", "name", "--model", "scripted", "schema run")[0] == 0
    assert run_cli("chat", "--model", "scripted", stdin="chat one\nchat two\n/quit\n")[0] == 0
    prompts = sorted(
        tuple(m["content"][0]["text"] for m in messages_of(p) if m["role"] == "user") for p in session_files()
    )
    assert prompts == [("chat one", "chat two"), ("json run",), ("plain run",), ("schema run",)]
    assert all(p.parent.parent == sessions_dir() for p in session_files())


@pytest.mark.parametrize("how", ["flag", "env", "marker"])
def test_no_log_env_and_logs_off_turn_logging_off(here, monkeypatch, how):
    argv = ["run", "--model", "scripted", "not logged"]
    if how == "flag":
        argv.insert(1, "--no-log")
    elif how == "env":
        monkeypatch.setenv("AGENTCORE_NO_LOG", "1")
    else:
        assert run_cli("logs", "off")[0] == 0
        assert (config_dir() / "logs-off").exists()
        assert "off (marker" in run_cli("logs", "status")[1]
    code, out, err = run_cli(*argv)
    assert code == 0, err
    assert session_files() == []
    if how == "marker":
        assert run_cli("logs", "on")[0] == 0
        assert run_cli("run", "--model", "scripted", "logged again")[0] == 0
        assert len(session_files()) == 1


@pytest.mark.parametrize("command", ["run", "chat"])
@pytest.mark.parametrize("session", [["-c"], ["-s", "notes.jsonl"]])
def test_no_log_with_continue_or_session_is_a_usage_error_and_records_nothing(here, command, session):
    """``--no-log -c`` used to record the new turns into the continued conversation all the
    same; the flags contradict, so it is refused (as ``agentcore rpc`` refuses it) before
    anything is written."""
    assert run_cli("run", "--model", "scripted", "logged first")[0] == 0
    before = [p.read_bytes() for p in session_files()]
    prompt = ["unlogged?"] if command == "run" else []  # chat reads it from stdin
    code, out, err = run_cli(command, "--no-log", *session, "--model", "scripted", *prompt, stdin="unlogged?\n")
    assert code == 2 and "--no-log and" in err and "contradict" in err and "drop --no-log" in err
    assert [p.read_bytes() for p in session_files()] == before and not (here / "notes.jsonl").exists()
    assert "You said" not in out


def test_logging_off_by_env_still_continues_into_the_named_conversation(here, monkeypatch):
    assert run_cli("run", "--model", "scripted", "first")[0] == 0
    monkeypatch.setenv("AGENTCORE_NO_LOG", "1")  # a default, not a flag: -c still records
    assert run_cli("run", "-c", "--model", "scripted", "second")[0] == 0
    (only,) = session_files()
    assert [m["role"] for m in messages_of(only)] == ["user", "assistant", "user", "assistant"]


def test_an_unwritable_sessions_dir_is_a_warning_and_the_run_goes_on(here, tmp_path, monkeypatch):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")  # also blocks root, who may write anywhere else
    monkeypatch.setenv("AGENTCORE_SESSIONS_DIR", str(blocked))
    code, out, err = run_cli("run", "--model", "scripted", "still answered")
    assert code == 0
    assert "You said: still answered" in out
    assert "warning: not logging this conversation: cannot write to" in err and str(blocked) in err
    code, out, err = run_cli("chat", "--model", "scripted", stdin="hi\n")
    assert code == 0 and "You said: hi" in out and "warning: not logging" in err


def test_a_chat_quit_before_any_prompt_and_a_usage_error_leave_no_session(here):
    assert run_cli("chat", "--model", "scripted", stdin="/quit\n")[0] == 0
    assert run_cli("run", "--model", "scripted", "--thinking", "huge", "hi")[0] == 2
    assert run_cli("run", "--model", "nosuch/model", "hi")[0] == 2
    assert session_files() == []


def test_default_logging_prints_no_session_note(here):
    code, out, err = run_cli("run", "--model", "scripted", "quiet")
    assert code == 0 and err == ""


# --------------------------------------------------------------------------- agentcore logs


def _library_session(prompt: str, answer: str, cwd: str = "/elsewhere") -> Path:
    """A session written by the library directly (not through the CLI)."""
    from agentcore.types import AssistantMessage, Usage, UserMessage

    session = SessionRepository(sessions_dir()).create(cwd=cwd)
    try:
        session.append_message(UserMessage(content=prompt))
        usage = Usage(input=10, output=5, total_tokens=15)
        usage.cost.total = 0.25
        session.append_message(
            AssistantMessage(content=text(answer).content, provider="openai", model="gpt-4o", usage=usage)
        )
    finally:
        session.close()
    return Path(session.path)


def _touch(path: Path, when: int) -> None:
    os.utime(path, ns=(when * 10**9, when * 10**9))


def test_logs_json_is_one_document_for_json_tool_even_when_empty(here, tmp_path):
    """``agentcore logs --json | python -m json.tool`` works with several conversations (JSON
    lines did not) and with none (an empty array, not an empty stdout)."""
    code, out, _ = run_cli("logs", "--json", "--sessions-dir", str(tmp_path / "nothing-yet"))
    assert code == 0 and json.loads(out) == []
    for n in range(2):
        assert run_cli("run", "--model", "scripted", f"prompt {n}")[0] == 0
    code, out, err = run_cli("logs", "--json")
    assert code == 0, err
    tool = subprocess.run([sys.executable, "-m", "json.tool"], input=out, capture_output=True, text=True)
    assert tool.returncode == 0, tool.stderr
    assert [c["firstPrompt"] for c in json.loads(tool.stdout)] == ["prompt 0", "prompt 1"]


def test_logs_shows_the_prompt_after_attachments_not_the_attached_file(here):
    """A run with ``-a`` starts its prompt with the files' ``<file>`` blocks: the listing used to
    show the block and the file's first 200 characters instead of what was asked."""
    (here / "notes.txt").write_text("line one of the notes\n" * 20, encoding="utf-8")
    (here / 'odd "name".txt').write_text("x\n", encoding="utf-8")
    assert run_cli("run", "--model", "scripted", "-a", "notes.txt", "-a", 'odd "name".txt', "sum it up")[0] == 0
    code, out, err = run_cli("logs")
    assert code == 0, err
    assert '  > [notes.txt] [odd "name".txt] sum it up\n' in out and "line one" not in out
    assert logs_json()[0]["firstPrompt"].startswith('<file name="')  # the data keeps the whole prompt


def test_logs_lists_the_latest_conversations_with_model_tokens_and_cost(here):
    for n in range(4):
        assert run_cli("run", "--model", "scripted", f"prompt {n}")[0] == 0
    for n, path in enumerate(sorted(session_files(), key=lambda p: messages_of(p)[0]["content"][0]["text"])):
        _touch(path, 1_700_000_000 + n)  # prompt 3 is the newest
    found = logs_json()
    assert [c["firstPrompt"] for c in found] == ["prompt 1", "prompt 2", "prompt 3"]  # default 3, newest last
    assert [c["firstPrompt"] for c in logs_json("-n", "1")] == ["prompt 3"]
    assert len(logs_json("-n", "0")) == 4
    assert found[-1]["model"] == "scripted/scripted-demo" and found[-1]["messages"] == 2
    assert set(found[-1]) >= {"id", "path", "cwd", "created", "updated", "totalTokens", "cost"}
    code, out, err = run_cli("logs", "-n", "1")
    assert code == 0 and "> prompt 3" in out and "model: scripted/scripted-demo" in out and found[-1]["id"] in out


def test_logs_query_searches_prompts_and_answers(here):
    _library_session("where is the retry logic", "in providers/http.py, look for backoff")
    _library_session("unrelated question", "unrelated answer")
    assert [c["firstPrompt"] for c in logs_json("-q", "backoff")] == ["where is the retry logic"]
    assert [c["firstPrompt"] for c in logs_json("-q", "retry http.py")] == ["where is the retry logic"]
    assert logs_json("-q", 'quote" OR (syntax') == []  # words, not FTS5 syntax: no error
    hit = logs_json("-q", "retry")[0]
    assert (hit["totalTokens"], hit["cost"], hit["model"]) == (15, 0.25, "openai/gpt-4o")
    code, out, err = run_cli("logs", "-q", "nowhere-to-be-found")
    assert code == 0 and out == "" and "no conversations matching" in err


def test_logs_query_finds_words_of_symbols_alone_such_as_an_emoji(here):
    """FTS5's tokenizer indexes letters and digits only: ``logs -q 🎉`` (or ``-q =>``) was a
    phrase of no token, which matched nothing, so a conversation holding it was reported as
    "no conversations matching"; beside other words it was ignored (``-q "ship 🚀"`` found a
    conversation without the rocket). Such a word is matched as typed."""
    _library_session("party 🎉 time", "cheers")
    _library_session("ship it", "the map is a => b")
    _library_session("ship it 🚀", "done")
    assert [c["firstPrompt"] for c in logs_json("-q", "🎉")] == ["party 🎉 time"]
    assert [c["firstPrompt"] for c in logs_json("-q", "=>")] == ["ship it"]
    assert [c["firstPrompt"] for c in logs_json("-q", "ship 🚀")] == ["ship it 🚀"]
    assert [c["firstPrompt"] for c in logs_json("-q", "🚀 ship")] == ["ship it 🚀"]
    assert logs_json("-q", "🎉 cheers nothing") == []


def test_logs_writes_prompts_without_terminal_escape_sequences(here):
    """``git diff --color=always | agentcore run "review"`` logs a prompt full of escape
    sequences; ``agentcore logs`` wrote them to the terminal as they were (colours, and an OSC
    sequence retitling the window or writing the clipboard), where ``sessions show`` drops them.
    ``--json`` keeps the text (JSON escapes it)."""
    piped = "\x1b[31m-old\x1b[0m \x1b]0;pwned\x07\x1b]52;c;Y2xpcA==\x07+new"
    assert run_cli("run", "--model", "scripted", "review", stdin=piped)[0] == 0
    code, out, err = run_cli("logs")
    assert code == 0, err
    assert "\x1b" not in out and "\x07" not in out
    assert "> -old +new review" in out
    assert logs_json()[0]["firstPrompt"] == piped + "\nreview"


def test_logs_sums_the_token_counts_as_sessions_show_does(here):
    """Usage without ``totalTokens`` (the reference's files): logs said ``tokens: 0`` while
    ``sessions show`` summed the parts (session spec §10); the stored total is not used."""
    path = _library_session("count my tokens", "counted")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for entry in lines:
        usage = entry.get("message", {}).get("usage")
        if usage:
            usage.update(input=10, output=5, cacheRead=3, cacheWrite=2)
            del usage["totalTokens"]
    path.write_text("".join(json.dumps(entry) + "\n" for entry in lines))
    [found] = logs_json()
    assert (found["totalTokens"], found["inputTokens"], found["outputTokens"]) == (20, 15, 5)
    code, out, err = run_cli("logs")
    assert code == 0 and "tokens: 20 (15 in, 5 out)" in out, err
    code, out, err = run_cli("sessions", "show", str(path))
    assert code == 0 and "tokens: 20 " in out, err


def test_logs_finds_library_sessions_changes_and_deletions_after_the_index_exists(here):
    first = _library_session("first question", "first answer")
    assert len(logs_json()) == 1  # the index now exists
    second = _library_session("second question", "zebra answer")
    assert [c["firstPrompt"] for c in logs_json("-q", "zebra")] == ["second question"]
    with open(first, "a") as handle:  # a change behind the index's back: size and mtime differ
        line = json.loads(first.read_text().splitlines()[-1])
        line["id"], line["parentId"] = "ffff0001", line["id"]
        line["message"]["content"] = [{"type": "text", "text": "a later giraffe answer"}]
        handle.write(json.dumps(line) + "\n")
    assert [c["firstPrompt"] for c in logs_json("-q", "giraffe")] == ["first question"]
    second.unlink()
    assert [c["firstPrompt"] for c in logs_json("-n", "0")] == ["first question"]


def test_a_session_with_a_lone_surrogate_does_not_break_logs(here):
    """JSON may escape half an emoji ("\\ud83d", a string cut by a program); SQLite refused that
    text and every ``logs`` command failed with "UnicodeEncodeError: ... surrogates not allowed"."""
    _library_session("a fine question", "a fine answer")
    odd = _library_session("odd", "answer")
    lines = odd.read_text().splitlines()
    user = json.loads(lines[-2])
    user["message"]["content"] = [{"type": "text", "text": "half \ud83d an emoji"}]
    odd.write_text("\n".join(lines[:-2] + [json.dumps(user), lines[-1]]) + "\n")
    assert sorted(c["firstPrompt"] for c in logs_json("-n", "0")) == ["a fine question", "half ? an emoji"]
    assert [c["firstPrompt"] for c in logs_json("-q", "emoji")] == ["half ? an emoji"]
    code, out, err = run_cli("logs", "status")
    assert code == 0 and "conversations: 2" in out, err


def test_a_directory_whose_name_is_not_utf8_logs_like_any_other(here, monkeypatch):
    """The session of a run in ``caf\xe9`` lives in a folder named after it, a path Python reads
    with a lone surrogate, which SQLite text cannot store: the run's index update made every
    logged ``run`` and ``chat`` there exit 1, and every later ``logs`` failed."""
    odd = os.path.join(os.fsencode(str(here)), b"caf\xe9")
    os.mkdir(odd)
    monkeypatch.chdir(odd)
    code, out, err = run_cli("run", "--model", "scripted", "a question from an odd place")
    assert code == 0, err
    monkeypatch.chdir(here)
    assert run_cli("run", "--model", "scripted", "a question from here")[0] == 0
    found = {c["firstPrompt"]: c for c in logs_json("-n", "0")}
    assert set(found) == {"a question from an odd place", "a question from here"}
    path = found["a question from an odd place"]["path"]
    assert os.path.exists(path) and os.fsencode(os.path.dirname(os.path.dirname(path))) == os.fsencode(
        str(sessions_dir())
    )
    os.unlink(path)  # a deleted file leaves the index on the next look
    assert [c["firstPrompt"] for c in logs_json("-n", "0")] == ["a question from here"]


def test_logs_cwd_in_a_directory_whose_name_is_not_utf8_lists_its_conversations(here, monkeypatch):
    """The index stored such a session's cwd with ``?`` for the odd byte, and ``logs --cwd`` run
    there passed the directory's name to SQLite as it was: "agentcore: UnicodeEncodeError:
    ... surrogates not allowed", exit 1 (a ``caf?`` folder would have matched it besides)."""
    odd = os.path.join(os.fsencode(str(here)), b"caf\xe9")
    os.mkdir(odd)
    monkeypatch.chdir(odd)
    assert run_cli("run", "--model", "scripted", "a question from an odd place")[0] == 0
    found = logs_json("--cwd")
    assert [c["firstPrompt"] for c in found] == ["a question from an odd place"]
    assert os.fsencode(found[0]["cwd"]) == odd
    monkeypatch.chdir(here)
    assert run_cli("run", "--model", "scripted", "a question from here")[0] == 0
    assert [c["firstPrompt"] for c in logs_json("--cwd")] == ["a question from here"]
    os.mkdir(os.path.join(str(here), "caf?"))
    monkeypatch.chdir(os.path.join(str(here), "caf?"))  # not the same directory
    code, out, err = run_cli("logs", "--cwd")
    assert code == 0 and out == "" and "no conversations logged of this directory" in err


def test_logs_index_is_updated_after_each_chat_turn(here):
    from agentcore.cli._logindex import LogIndex

    assert run_cli("chat", "--model", "scripted", stdin="alpha\nbravo\n")[0] == 0
    with LogIndex(str(sessions_dir())) as index:  # read without refresh(): written by the CLI
        [conversation] = index.latest(None)
        assert conversation.messages == 4
        assert [c.id for c in index.latest(None, "bravo")] == [conversation.id]


def test_logs_without_fts5_falls_back_to_like_with_a_notice(here, monkeypatch):
    from agentcore.cli import _logindex

    monkeypatch.setattr(_logindex, "fts5_available", lambda connection: False)
    _library_session("find the 100% case", "answer")
    _library_session("other", "answer")
    code, out, err = run_cli("logs", "--json", "-q", "100%")
    assert code == 0, err
    assert [c["firstPrompt"] for c in json.loads(out)] == ["find the 100% case"]
    assert err.count("\n") == 1 and "no FTS5" in err
    with _logindex.LogIndex(str(sessions_dir())) as index:
        assert index.fts is False


def test_a_corrupt_or_foreign_index_is_rebuilt(here):
    _library_session("survives", "answer")
    (sessions_dir() / "logs.db").write_bytes(b"this is not an sqlite database" * 100)
    assert [c["firstPrompt"] for c in logs_json()] == ["survives"]


def _damage_table(database: Path, table: str) -> None:
    """Overwrite the root page of ``table`` in ``database`` (its schema page stays intact, so
    opening it succeeds and only a read of that table finds the damage)."""
    with sqlite3.connect(str(database)) as connection:
        page_size = connection.execute("PRAGMA page_size").fetchone()[0]
        [root] = connection.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()
    connection.close()
    with open(database, "r+b") as handle:
        handle.seek((root - 1) * page_size)
        handle.write(b"\xff" * page_size)


@pytest.mark.parametrize("table, query", [("conversations", None), ("texts_config", "answer")])
def test_an_index_damaged_past_its_schema_is_rebuilt(here, table, query):
    """A corrupt page that opening the database does not read (a table's, the full-text index's)
    failed every `agentcore logs` with "the logs index ... cannot be used: database disk image is
    malformed" (or "vtable constructor failed: texts"), status 2, though the index is a cache of
    the files that is rebuilt when corrupt."""
    for n in range(3):
        _library_session(f"question {n}", f"answer {n}")
    assert len(logs_json("-n", "0")) == 3  # the index exists and is current
    _damage_table(sessions_dir() / "logs.db", table)
    argv = ("-n", "0") if query is None else ("-n", "0", "-q", query)
    assert sorted(c["firstPrompt"] for c in logs_json(*argv)) == ["question 0", "question 1", "question 2"]
    code, out, err = run_cli("logs", "status")
    assert code == 0 and "conversations: 3" in out, err
    with sqlite3.connect(str(sessions_dir() / "logs.db")) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    connection.close()


def _usage_line_of(path: Path, change: Any) -> None:
    """Rewrite the assistant message's usage of the session file ``path`` with ``change(usage)``."""
    lines = path.read_text().splitlines()
    entry = json.loads(lines[-1])
    change(entry["message"]["usage"])
    lines[-1] = json.dumps(entry)
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda path: _usage_line_of(path, lambda u: u.update(input=float("nan"))), id="NaN"),
        pytest.param(lambda path: _usage_line_of(path, lambda u: u.update(output=float("inf"))), id="Infinity"),
        pytest.param(lambda path: _usage_line_of(path, lambda u: u.update(cacheRead=10**20)), id="past-64-bits"),
        pytest.param(lambda path: _usage_line_of(path, lambda u: u["cost"].update(total=10**400)), id="cost-10e400"),
        pytest.param(
            lambda path: path.open("a").write('{"type":"custom","data":' + "[" * 5000 + "]" * 5000 + "}\n"),
            id="nested-too-deep",
        ),
    ],
)
def test_one_session_file_with_odd_numbers_or_deep_nesting_does_not_break_logs(here, damage):
    """One file whose usage holds NaN, an infinity or a number past 64 bits (Python's json writes
    and reads them), or a line nested too deeply to decode, failed every `agentcore logs` (and
    `logs status`) with ValueError, OverflowError or RecursionError, status 1. The odd usage is
    left out of the sums (as a usage with a missing count), the odd line skipped."""
    _library_session("a fine question", "a fine answer")
    odd = _library_session("an odd question", "an odd answer")
    damage(odd)
    found = {c["firstPrompt"]: c for c in logs_json("-n", "0")}
    assert sorted(found) == ["a fine question", "an odd question"]
    assert (found["a fine question"]["totalTokens"], found["a fine question"]["cost"]) == (15, 0.25)
    assert found["an odd question"]["messages"] == 2
    if "custom" not in odd.read_text():  # the usage was left out
        assert (found["an odd question"]["totalTokens"], found["an odd question"]["cost"]) == (0, 0)
    code, out, err = run_cli("logs", "status")
    assert code == 0 and "conversations: 2" in out, err


def test_a_session_file_modified_after_2262_is_listed(here):
    """An mtime past 2262 (`touch -d 2300-01-01`, a clock that was wrong) has more nanoseconds than
    SQLite's 64-bit INTEGER holds: every `agentcore logs` failed with "OverflowError: Python int
    too large to convert to SQLite INTEGER"."""
    _library_session("of today", "answer")
    future = _library_session("from the future", "answer")
    when = 10_500_000_000  # 2302-09-23
    os.utime(future, (when, when))
    if os.stat(future).st_mtime_ns < 2**63:
        pytest.skip("this file system cannot store an mtime past 2262")
    found = logs_json("-n", "0")
    assert [c["firstPrompt"] for c in found] == ["of today", "from the future"]  # the newest last
    assert found[-1]["updated"].startswith("2302-")
    code, out, err = run_cli("logs", "-n", "1")
    assert code == 0 and "# 2302-" in out and "> from the future" in out, err
    with open(future, "a") as handle:  # a change of such a file is still seen (by its size)
        handle.write("\n")
    os.utime(future, (when, when))
    assert len(logs_json("-n", "0")) == 2


def test_logs_count_past_64_bits_lists_them_all(here):
    """`-n 100000000000000000000` failed with "OverflowError: Python int too large to convert to
    SQLite INTEGER", status 1; a count above every conversation's is all of them."""
    for n in range(2):
        _library_session(f"question {n}", "answer")
    assert len(logs_json("-n", str(10**20))) == 2


@pytest.mark.parametrize(
    "argv, option",
    [
        (["logs", "--cwd"], "logs --cwd"),
        (["run", "--model", "scripted", "-c", "again"], "-c/--continue"),
        (["sessions", "list"], "sessions list"),
    ],
)
def test_logs_cwd_and_continue_in_a_deleted_directory_say_so(here, monkeypatch, argv, option):
    """A shell still in a directory that was removed: `logs --cwd`, `run -c` and `sessions list`
    ended with "agentcore: FileNotFoundError: [Errno 2] No such file or directory" (no file
    named), status 1."""
    _library_session("a question", "an answer")
    gone = here / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    code, out, err = run_cli(*argv)
    assert code == 2 and out == ""
    assert f"agentcore: {option}: the current directory cannot be read" in err and "was it deleted?" in err


def test_a_run_in_a_deleted_directory_blames_the_directory_not_the_sessions_dir(here, monkeypatch):
    """A shell still in a removed directory: the run answered unlogged (as it should) with the
    warning "cannot write to <sessions dir> (No such file or directory); fix the directory, set
    AGENTCORE_SESSIONS_DIR to another one": the sessions directory was fine, and that advice
    changed nothing. The warning now names the current directory."""
    sessions_dir().mkdir(parents=True, exist_ok=True)
    gone = here / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    code, out, err = run_cli("run", "--model", "scripted", "hi")
    assert code == 0 and "You said: hi" in out, err
    assert "not logging this conversation: the current directory cannot be read" in err
    assert "was it deleted?" in err and str(sessions_dir()) not in err and "AGENTCORE_SESSIONS_DIR" not in err


def test_logs_query_that_is_not_utf8_is_a_usage_error(here):
    """A byte of argv that is not UTF-8 (a Latin-1 terminal) reaches ``-q`` as a lone surrogate:
    SQLite could not bind it and `agentcore logs` ended with a bare UnicodeEncodeError, status 1."""
    _library_session("caf\u00e9 question", "answer")
    code, out, err = run_cli("logs", "-q", "caf\udce9")
    assert code == 2 and out == ""
    assert "logs -q 'caf\\udce9': the search text is not UTF-8" in err and "Error" not in err


def test_index_writes_from_several_processes_wait_for_each_other(here):
    """Every writer opens its own connection; BEGIN IMMEDIATE with a busy timeout serialises them."""
    from agentcore.cli._logindex import LogIndex

    paths = [_library_session(f"question {n}", "answer") for n in range(8)]
    barrier = threading.Barrier(len(paths))
    errors: List[BaseException] = []

    def write(path: Path) -> None:
        try:
            with LogIndex(str(sessions_dir())) as index:
                barrier.wait()
                for _ in range(5):
                    index.update(str(path))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(p,)) for p in paths]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with LogIndex(str(sessions_dir())) as index:
        assert len(index.latest(None)) == 8


def test_a_locked_index_is_a_warning_not_a_failed_run(here, monkeypatch):
    from agentcore.cli import _logindex

    monkeypatch.setattr(_logindex, "BUSY_TIMEOUT", 0.0)
    assert run_cli("run", "--model", "scripted", "first")[0] == 0  # creates logs.db
    holder = sqlite3.connect(str(sessions_dir() / "logs.db"), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        code, out, err = run_cli("run", "--model", "scripted", "second")
        listed = run_cli("logs", "--json", "-n", "0")  # read from the files meanwhile
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert code == 0 and "You said: second" in out
    assert "warning: the logs index was not updated" in err
    assert listed[0] == 0 and len(json.loads(listed[1])) == 2
    assert "cannot use the logs index" in listed[2] and "reading the session files instead" in listed[2]
    assert len(logs_json("-n", "0")) == 2  # the next logs call picks the file up


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process is POSIX")
def test_ctrl_c_while_the_index_is_locked_ends_the_run_at_once(here):
    """After the answer the run updates the index; while another process held ``logs.db`` that
    update waited out SQLite's 10-second busy timeout, which ignores signals: a Ctrl+C took ~10 s
    to end `agentcore run`. The wait is now in slices that look at the run's abort signal."""
    import signal

    assert run_cli("run", "--model", "scripted", "first")[0] == 0  # creates logs.db
    holder = sqlite3.connect(str(sessions_dir() / "logs.db"), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        child = subprocess.Popen(
            [sys.executable, "-c", "import sys; from agentcore.cli import main; sys.exit(main())"]
            + ["run", "--model", "scripted", "second"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert child.stdout is not None and child.stdout.readline() == "You said: second\n"
            child.send_signal(signal.SIGINT)  # the run is ending: its index update waits for the lock
            _, err = child.communicate(timeout=5)  # the busy timeout is 10 s
        finally:
            child.kill()
            child.wait()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert child.returncode == 130, err
    assert "warning: the logs index was not updated (database is locked)" in err


#: runs the CLI, saying "connected" on stderr once it has opened an SQLite database (logs.db)
_SAYS_CONNECTED = (
    "import sqlite3, sys\n"
    "real = sqlite3.connect\n"
    "def connect(*args, **kwargs):\n"
    "    connection = real(*args, **kwargs)\n"
    "    sys.stderr.write('connected\\n'); sys.stderr.flush()\n"
    "    return connection\n"
    "sqlite3.connect = connect\n"
    "from agentcore.cli import main\n"
    "sys.exit(main())\n"
)


def _wait_until_sleeping(pid: int) -> None:
    """Return once process ``pid`` sleeps in nanosleep (Linux's /proc/PID/wchan says so)."""
    import time

    deadline = time.monotonic() + 10
    while "nanosleep" not in Path(f"/proc/{pid}/wchan").read_text():
        assert time.monotonic() < deadline, "the child never waited for the lock"
        time.sleep(0.001)


@pytest.mark.skipif(not os.path.exists("/proc/self/wchan"), reason="needs Linux's /proc/PID/wchan")
def test_ctrl_c_while_logs_waits_for_a_locked_index_ends_it_at_once(here):
    """`agentcore logs` waiting for a ``logs.db`` another process holds sat in SQLite's busy
    timeout, which ignores signals: Ctrl+C took seconds (up to 10) to end it."""
    import signal

    _library_session("a question", "an answer")
    assert len(logs_json()) == 1  # creates logs.db
    holder = sqlite3.connect(str(sessions_dir() / "logs.db"), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        child = subprocess.Popen(
            [sys.executable, "-c", _SAYS_CONNECTED, "logs"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            assert child.stderr is not None and child.stderr.readline() == "connected\n"
            _wait_until_sleeping(child.pid)  # in SQLite's busy wait (a Ctrl+C before it always worked)
            child.send_signal(signal.SIGINT)
            _, err = child.communicate(timeout=3)
        finally:
            child.kill()
            child.wait()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert child.returncode == 130 and "agentcore: interrupted" in err, err


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE (the full disk) is POSIX")
def test_a_full_disk_under_the_index_reports_the_disk_error_and_keeps_the_index(here):
    """SQLite rolls a transaction back by itself when a write fails; the index must then report
    that failure, not "cannot rollback - no transaction is active" from a second ROLLBACK."""
    path = _library_session("needs pages " * 4000, "answer")  # ~50 KB of text: new pages in logs.db
    script = (
        "import os, resource, signal, sys\n"
        "from agentcore.cli._logindex import LogIndex\n"
        "directory, path = sys.argv[1:]\n"
        "with LogIndex(directory) as index:\n"
        "    size = os.path.getsize(os.path.join(directory, 'logs.db'))\n"
        "    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))  # no file may grow: a full disk\n"
        "    try:\n"
        "        index.update(path)\n"
        "    except Exception as exc:\n"
        "        print(type(exc).__name__, exc)\n"
    )
    with open(sessions_dir() / "logs.db", "wb"):
        pass  # an empty file: LogIndex creates its tables in it before the limit is set
    done = subprocess.run(
        [sys.executable, "-c", script, str(sessions_dir()), str(path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(("OperationalError", "DatabaseError")), done.stdout
    assert "no transaction is active" not in done.stdout and "disk" in done.stdout, done.stdout
    assert [c["firstPrompt"][:11] for c in logs_json()] == ["needs pages"]  # the index still works after


def test_a_failed_index_update_names_the_index_file(here):
    """The warning of a run whose index update failed said ``the logs index was not updated
    (unable to open database file)`` (or ``disk I/O error`` on a full disk): SQLite names no
    file, and neither did the warning. It now names logs.db; the run and its answer are kept."""
    index = sessions_dir() / "logs.db"
    index.mkdir(parents=True)  # something that is no database where the index belongs
    code, out, err = run_cli("run", "--model", "scripted", "still answered")
    assert code == 0 and "You said: still answered" in out
    (warning,) = [line for line in err.splitlines() if "warning" in line]
    assert warning.startswith("agentcore: warning: the logs index was not updated (") and str(index) in warning
    assert [messages_of(p)[0]["content"][0]["text"] for p in session_files()] == ["still answered"]


# --------------------------------------------------------------------------- -c and -s prefixes


def test_continue_resumes_the_latest_conversation_of_this_directory(here, tmp_path, monkeypatch):
    assert run_cli("run", "--model", "scripted", "older here")[0] == 0
    assert run_cli("run", "--model", "scripted", "newer here")[0] == 0
    _touch(next(p for p in session_files() if "older" in p.read_text()), 1_700_000_000)
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.chdir(other)
    assert run_cli("run", "--model", "scripted", "elsewhere, newest overall")[0] == 0
    monkeypatch.chdir(here)
    code, out, err = run_cli("run", "-c", "run continued")
    assert code == 0, err
    code, out, err = run_cli("chat", "--continue", stdin="chat continued\n")
    assert code == 0, err
    # the banner says the chat goes on from somewhere (it used to look like a new chat)
    assert "resumed: 4 messages; last prompt: 'run continued'" in err
    [resumed] = [p for p in session_files() if "newer here" in p.read_text()]
    prompts = [m["content"][0]["text"] for m in messages_of(resumed) if m["role"] == "user"]
    assert prompts == ["newer here", "run continued", "chat continued"]
    assert len(session_files()) == 3


def test_continue_resumes_with_the_system_prompt_it_was_given(here):
    """``run --system X`` then ``run -c``: the continued run was sent without X (the session keeps
    the model and the thinking level, not the system prompt), so a persona or a rule set for the
    conversation was lost after its first turn; llm re-sends a conversation's system prompt."""
    replies = [_answer(word) for word in ("one", "two", "three", "four", "five")]
    with ScriptedServer(replies) as server:
        local = ["--base-url", server.url + "/v1", "--model", "llama3"]
        assert run_cli("run", *local, "--system", "You are a pirate.", "first")[0] == 0
        assert run_cli("run", *local, "-c", "second")[0] == 0
        assert run_cli("chat", *local, "-c", stdin="third\n")[0] == 0
        assert run_cli("run", *local, "-c", "--system", "Be terse.", "fourth")[0] == 0
        assert run_cli("run", *local, "-c", "fifth")[0] == 0
        systems = []
        for request in server.requests:
            messages = request.json()["messages"]
            systems.append(messages[0]["content"] if messages[0]["role"] == "system" else None)
    assert systems == ["You are a pirate."] * 3 + ["Be terse."] * 2
    [path] = session_files()
    recorded = [json.loads(line) for line in path.read_text().splitlines()]
    customs = [e["data"]["text"] for e in recorded if e.get("customType") == "agentcore.cli.system"]
    assert customs == ["You are a pirate.", "Be terse."]  # recorded when it changed, not every turn


def test_s_with_an_id_nothing_has_says_a_new_session_starts(here):
    """An id prefix that matches nothing starts a new session of that id (documented); a
    mistyped prefix used to do so silently, so the user thought they had resumed."""
    code, out, err = run_cli("run", "--model", "scripted", "-s", "01typo", "hi")
    assert code == 0 and "-s 01typo: no session has this id or starts with it" in err
    code, out, err = run_cli("run", "--model", "scripted", "-s", "01typo", "again")  # now it exists
    assert code == 0 and "no session has" not in err
    code, out, err = run_cli("run", "--model", "scripted", "-s", "01ty", "by prefix")
    assert code == 0 and "no session has" not in err
    code, out, err = run_cli("run", "--model", "scripted", "-s", "new", "fresh")
    assert code == 0 and "no session has" not in err


def test_s_with_an_invalid_id_is_refused_without_announcing_a_new_session(here):
    """``-s 'a b'`` said "recording a new session of that id", then "invalid session id"."""
    code, out, err = run_cli("run", "--model", "scripted", "-s", "a b", "hi")
    assert (code, out) == (2, "") and "invalid session id 'a b'" in err
    assert "no session has" not in err and err.count("\n") == 1
    assert session_files() == []


@pytest.mark.parametrize("name", ["Notes.JSONL", "Notes.Jsonl", "Notes.DB"])
def test_s_takes_a_session_file_suffix_in_any_case(here, name):
    """``.DB`` named a file but ``Notes.JSONL`` was taken for an id (``..._Notes.JSONL.jsonl`` in
    the sessions directory)."""
    code, out, err = run_cli("run", "--model", "scripted", "-s", name, "hi")
    assert code == 0, err
    assert (here / name).is_file() and session_files() == []
    assert run_cli("sessions", "show", name)[1].count("You said: hi") == 1


def test_logs_cwd_with_none_here_says_this_directory(here, tmp_path, monkeypatch):
    """``logs --cwd`` where nothing was logged said "no conversations logged in <sessions dir>",
    as if the logs were empty."""
    assert run_cli("run", "--model", "scripted", "elsewhere")[0] == 0
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)
    code, out, err = run_cli("logs", "--cwd")
    assert code == 0 and out == ""
    assert f"no conversations logged of this directory ({empty})" in err and "without --cwd" in err
    assert "of this directory" not in run_cli("logs", "-q", "nothing-like-it")[2]


def test_a_new_chat_says_nothing_of_resuming(here):
    code, out, err = run_cli("chat", "--model", "scripted", stdin="fresh\n")
    assert code == 0 and "resumed" not in err


def test_continue_without_a_conversation_and_with_s_are_usage_errors(here):
    code, out, err = run_cli("run", "--model", "scripted", "-c", "hi")
    assert code == 2 and "no conversation to continue in" in err
    code, out, err = run_cli("run", "--model", "scripted", "-c", "-s", "x", "hi")
    assert code == 2 and "give one of them" in err


def test_session_id_prefix_for_run_and_chat_and_an_ambiguous_one(here):
    repo = SessionRepository(sessions_dir())
    for session_id in ("proj-alpha", "proj-beta"):
        repo.create(session_id=session_id).close()
    assert run_cli("run", "--model", "scripted", "-s", "proj-a", "via run")[0] == 0
    assert run_cli("chat", "--model", "scripted", "-s", "proj-al", stdin="via chat\n")[0] == 0
    [alpha] = [p for p in session_files() if p.name.endswith("_proj-alpha.jsonl")]
    assert [m["content"][0]["text"] for m in messages_of(alpha) if m["role"] == "user"] == ["via run", "via chat"]
    code, out, err = run_cli("run", "--model", "scripted", "-s", "proj", "hi")
    assert code == 2
    assert "ambiguous, 2 sessions match" in err and "proj-alpha" in err and "proj-beta" in err
    # each with the directory it was recorded in, not the sessions-dir folder that encodes it
    rows = [line for line in err.splitlines() if line.startswith("proj-")]
    assert "CWD" in err and len(rows) == 2 and all(row.rstrip().endswith(str(here)) for row in rows)
    assert str(sessions_dir()) not in err
    assert len(session_files()) == 2  # nothing created


# --------------------------------------------------------------------------- --no-stream


class Writes(io.StringIO):
    """A stdout recording every write call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: List[str] = []

    def write(self, s: str) -> int:
        self.calls.append(s)
        return super().write(s)


def _writes(*argv: str, stdin: str = "") -> List[str]:
    out, err = Writes(), io.StringIO()
    assert main(list(argv), stdin=io.StringIO(stdin), stdout=out, stderr=err) == 0, err.getvalue()
    return [call for call in out.calls if call.strip()]


@pytest.mark.parametrize("command", ["run", "chat"])
def test_no_stream_prints_the_answer_once_complete(here, command):
    args = (command, "--model", "scripted") + (("several words here",) if command == "run" else ())
    stdin = "several words here\n" if command == "chat" else ""
    streamed = _writes(*args, stdin=stdin)
    whole = _writes(*args, "--no-stream", stdin=stdin)
    assert len(streamed) > 3  # the demo streams word by word
    assert whole == ["".join(streamed)]


def test_json_no_stream_leaves_out_the_message_updates(here):
    code, out, err = run_cli("run", "--json", "--no-stream", "--model", "scripted", "hi")
    types = [json.loads(line)["type"] for line in out.splitlines()]
    assert code == 0 and "message_update" not in types and "message_end" in types


# --------------------------------------------------------------------------- keys


def _answer(words: str) -> Reply:
    chunk = {"choices": [{"index": 0, "delta": {"content": words}, "finish_reason": None}]}
    end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    return Reply(body=sse(chunk, end, done=True))


def _groq(server: ScriptedServer) -> List[str]:
    return ["--base-url", server.url + "/v1", "--model", "groq/llama-3.3-70b-versatile"]


def test_keys_set_reads_stdin_stores_a_0600_file_and_list_shows_names_only(here):
    code, out, err = run_cli("keys", "set", "groq", stdin=SECRET + "\n")
    assert code == 0, err
    path = config_dir() / "keys.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == {"groq": SECRET}
    code, out, err = run_cli("keys", "list")
    assert (code, out) == (0, "groq\n") and SECRET not in err
    assert run_cli("keys", "path")[1] == f"{path}\n"
    assert run_cli("keys", "set", "groq", SECRET)[0] == 2  # never from argv: argparse refuses it
    assert run_cli("keys", "set", "groq", stdin="\n")[0] == 2  # empty: nothing stored
    assert json.loads(path.read_text()) == {"groq": SECRET}


@pytest.mark.parametrize("errors", ["strict", "surrogateescape"])  # a UTF-8 locale's stdin; the C locale's
def test_keys_set_refuses_a_key_that_is_not_utf8_and_leaves_the_file_alone(here, errors):
    assert run_cli("keys", "set", "groq", stdin=SECRET + "\n")[0] == 0
    before = (config_dir() / "keys.json").read_bytes()
    stdin = io.TextIOWrapper(io.BytesIO(b"sk-\xff\xfe-SECRET\n"), encoding="utf-8", errors=errors)
    code, out, err = run_cli("keys", "set", "anthropic", stdin=stdin)
    assert (code, out) == (2, "") and "the key is not UTF-8 text" in err, err
    assert err.count("\n") == 1 and "Error" not in err and "SECRET" not in err
    assert (config_dir() / "keys.json").read_bytes() == before


@pytest.mark.parametrize("key", ["sk-a\rb-SECRET", "sk-a\x00b-SECRET", "sk-a\x1bb-SECRET"])
def test_keys_set_refuses_a_key_with_a_control_character(here, key):
    """Stored, such a key failed every later run ("api_key contains a line break")."""
    stdin = io.TextIOWrapper(io.BytesIO(key.encode() + b"\n"), encoding="utf-8", newline="\n")  # as sys.stdin
    code, out, err = run_cli("keys", "set", "anthropic", stdin=stdin)
    assert code == 2 and "contains a line break or another control character" in err, err
    assert err.count("\n") == 1 and "SECRET" not in err
    assert not (config_dir() / "keys.json").exists()
    assert run_cli("keys", "set", "anthropic", stdin="  sk-fine \r\n")[0] == 0  # surrounding whitespace: stripped
    assert json.loads((config_dir() / "keys.json").read_text()) == {"anthropic": "sk-fine"}


def test_the_keys_file_is_created_with_0600_even_under_umask_0(here, monkeypatch):
    from agentcore.cli import _config

    modes = []
    real_open = os.open

    def recording_open(path: Any, flags: int, mode: int = 0o777, *args: Any, **kwargs: Any) -> int:
        if flags & os.O_CREAT:
            modes.append((flags & os.O_EXCL, mode))
        return real_open(path, flags, mode, *args, **kwargs)

    monkeypatch.setattr(_config.os, "open", recording_open)
    old = os.umask(0)
    try:
        assert run_cli("keys", "set", "openai", stdin="sk-one\n")[0] == 0
    finally:
        os.umask(old)
    assert modes and all(excl and mode == 0o600 for excl, mode in modes)  # created with the mode: no window
    assert stat.S_IMODE((config_dir() / "keys.json").stat().st_mode) == 0o600


def test_keys_set_prompts_hidden_on_a_terminal(here, monkeypatch):
    import getpass

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    asked = []
    monkeypatch.setattr(getpass, "getpass", lambda prompt, stream=None: asked.append(prompt) or "sk-typed")
    assert run_cli("keys", "set", "anthropic", stdin=Tty())[0] == 0
    assert asked == ["Enter key for anthropic: "]
    assert json.loads((config_dir() / "keys.json").read_text()) == {"anthropic": "sk-typed"}


def test_a_stored_key_is_used_after_the_option_and_the_environment(here, monkeypatch):
    run_cli("keys", "set", "groq", stdin=SECRET + "\n")
    with ScriptedServer([_answer("one"), _answer("two"), _answer("three")]) as server:
        assert run_cli("run", *_groq(server), "stored")[0] == 0
        monkeypatch.setenv("GROQ_API_KEY", "sk-from-env")
        assert run_cli("run", *_groq(server), "env")[0] == 0
        monkeypatch.setenv("MY_KEY", "sk-from-option")
        assert run_cli("run", *_groq(server), "--api-key-env", "MY_KEY", "option")[0] == 0
    sent = [request.headers.get("authorization") for request in server.requests]
    assert sent == [f"Bearer {SECRET}", "Bearer sk-from-env", "Bearer sk-from-option"]


def test_a_stored_key_is_never_printed_nor_in_sessions_or_the_logs_index(here):
    run_cli("keys", "set", "groq", stdin=SECRET + "\n")
    echo = f"the key might be {SECRET}"  # a model repeating it: the CLI masks it on stderr only
    with ScriptedServer([Reply(status=401, body=f'{{"error": {{"message": "bad key {SECRET}"}}}}')]) as server:
        code, out, err = run_cli("run", "-v", *_groq(server), "-o", "max_retries", "0", "hello")
    assert code == 1 and SECRET not in out + err
    with ScriptedServer([_answer(echo.replace(SECRET, "***"))]) as server:
        assert run_cli("run", *_groq(server), "again")[0] == 0
    run_cli("logs", "-n", "0")
    stored = [p for p in sessions_dir().rglob("*") if p.is_file()]
    assert any(p.name == "logs.db" for p in stored) and len(stored) >= 3
    for path in stored:
        assert SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in run_cli("keys", "list")[1]


def test_a_missing_key_suggests_keys_set(here):
    code, out, err = run_cli("run", "--model", "openai/gpt-4o", "hi")
    assert code == 2 and "agentcore keys set openai" in err


def test_a_broken_keys_file_is_a_usage_error_naming_it(here):
    config_dir().mkdir(parents=True)
    (config_dir() / "keys.json").write_text("[not an object]")
    code, out, err = run_cli("run", "--model", "openai/gpt-4o", "hi")
    assert code == 2 and "keys.json" in err and "fix or delete" in err


# --------------------------------------------------------------------------- aliases


def test_aliases_set_list_remove_and_model_resolution(here):
    assert run_cli("aliases", "set", "demo", "scripted")[0] == 0
    assert run_cli("aliases", "set", "fast", "groq/llama-3.3-70b-versatile")[0] == 0
    assert run_cli("aliases", "list")[1] == "demo: scripted\nfast: groq/llama-3.3-70b-versatile\n"
    assert json.loads(run_cli("aliases", "list", "--json")[1]) == {
        "demo": "scripted",
        "fast": "groq/llama-3.3-70b-versatile",
    }
    code, out, err = run_cli("run", "--model", "demo", "via alias")
    assert code == 0 and "You said: via alias" in out
    code, out, err = run_cli("chat", "--model", "scripted", stdin="/model demo\n")
    assert "model: scripted/scripted-demo" in out
    assert run_cli("aliases", "remove", "demo")[0] == 0
    assert "demo" not in run_cli("aliases", "list")[1]
    code, out, err = run_cli("aliases", "remove", "demo")
    assert code == 2 and "no such alias" in err


def test_an_alias_to_an_unknown_model_is_a_clear_error_at_use(here):
    code, out, err = run_cli("aliases", "set", "gone", "openai/gpt-nope")
    assert code == 0 and "not a registered model" in err
    code, out, err = run_cli("run", "--model", "gone", "hi")
    assert code == 2
    assert "--model gone is an alias for openai/gpt-nope: unknown model 'openai/gpt-nope'" in err
    assert "agentcore aliases set gone" in err


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["aliases", "set", "a/b", "openai/gpt-4o"], "no '/'"),
        (["aliases", "set", "short", "gpt-4o"], "provider/id"),
        (["aliases", "set", "scripted", "openai/gpt-4o"], "offline demo"),
        (["logs", "-n", "-1"], "count of 0"),
    ],
)
def test_alias_keys_and_logs_usage_errors(here, argv, needle):
    code, out, err = run_cli(*argv)
    assert code == 2 and needle in err


def test_bare_keys_and_aliases_list_as_llm_does(here):
    """``llm keys`` and ``llm aliases`` list; ``agentcore keys``/``aliases`` without an action
    used to be a usage error (status 2)."""
    assert run_cli("keys", "set", "openai", stdin=SECRET + "\n")[0] == 0
    assert run_cli("aliases", "set", "fast", "openai/gpt-4o")[0] == 0
    assert run_cli("keys") == (0, "openai\n", "")
    assert (
        run_cli("aliases")[:2] == (0, run_cli("aliases", "list")[1]) and "fast: openai/gpt-4o" in run_cli("aliases")[1]
    )


def test_s_with_a_sentence_points_an_llm_user_at_system(here):
    """``llm -s TEXT`` is the system prompt; here ``-s`` is ``--session``, and the refusal of
    ``-s "be terse"`` spoke of session ids only."""
    code, out, err = run_cli("run", "--model", "scripted", "-s", "You are terse.", "hi")
    assert code == 2 and "invalid session id" in err
    assert "-s is --session; for a system prompt use --system 'You are terse.'" in err
    assert not session_files()


def test_bare_aliases_takes_json_as_aliases_list_does(here):
    """``llm aliases --json`` lists as JSON; ``agentcore aliases --json`` was a usage error."""
    assert run_cli("aliases", "set", "fast", "openai/gpt-4o")[0] == 0
    assert json.loads(run_cli("aliases", "--json")[1]) == {"fast": "openai/gpt-4o"}
    assert json.loads(run_cli("aliases", "list", "--json")[1]) == {"fast": "openai/gpt-4o"}
    assert json.loads(run_cli("aliases", "--json", "list")[1]) == {"fast": "openai/gpt-4o"}
    assert run_cli("aliases", "list")[1] == "fast: openai/gpt-4o\n"


@pytest.mark.parametrize("before", [True, False])
def test_logs_actions_take_sessions_dir_before_or_after_the_action(here, tmp_path, before):
    where = str(tmp_path / "elsewhere")
    argv = ["logs", "--sessions-dir", where, "path"] if before else ["logs", "path", "--sessions-dir", where]
    assert run_cli(*argv)[1] == os.path.join(where, "logs.db") + "\n"


def test_aliases_set_keeps_a_narrower_mode_and_keys_set_narrows_a_wider_one(here, monkeypatch):
    """A user's ``chmod 600 aliases.json`` was widened to ``0644`` by the next ``aliases set`` (the
    file is replaced with a new one of the default mode); a keys file stays ``0600`` however it
    was changed by hand, and a new aliases file is ``0644``."""
    config_dir().mkdir(parents=True)
    aliases, keys = config_dir() / "aliases.json", config_dir() / "keys.json"
    aliases.write_text('{"fast": "openai/gpt-4o"}')
    keys.write_text('{"openai": "sk-one"}')
    aliases.chmod(0o600)
    keys.chmod(0o644)
    assert run_cli("aliases", "set", "slow", "openai/gpt-4o")[0] == 0
    assert run_cli("keys", "set", "groq", stdin="sk-two\n")[0] == 0
    assert stat.S_IMODE(aliases.stat().st_mode) == 0o600
    assert stat.S_IMODE(keys.stat().st_mode) == 0o600
    assert json.loads(aliases.read_text()) == {"fast": "openai/gpt-4o", "slow": "openai/gpt-4o"}
    monkeypatch.setenv("AGENTCORE_CONFIG_DIR", str(config_dir() / "fresh"))
    assert run_cli("aliases", "set", "fast", "openai/gpt-4o")[0] == 0
    assert stat.S_IMODE((config_dir() / "aliases.json").stat().st_mode) == 0o644

"""Built-in file tools (issue 7 item 1): read, write, edit, ls, find, grep, root confinement and
registration. Tools report failure by raising (agent-loop §1.7, §2.8)."""

from __future__ import annotations

import base64
import os
import shutil
import stat
import sys
import threading
from pathlib import Path
from typing import Any, Callable, List

import pluggy
import pytest

from agentcore import hookspecs
from agentcore.builtin_tools import (
    ALL_TOOL_NAMES,
    EditError,
    PathOutsideRootError,
    create_coding_tools,
    create_edit_tool,
    create_find_tool,
    create_grep_tool,
    create_ls_tool,
    create_read_only_tools,
    create_read_tool,
    create_write_tool,
)
from agentcore.builtin_tools import read as read_module
from agentcore.builtin_tools import write as write_module
from agentcore.builtin_tools._paths import file_lock
from agentcore.builtin_tools._walk import compile_glob
from agentcore.signals import AbortController, AbortError
from agentcore.tools import validate_tool_arguments
from agentcore.types import ImageContent, TextContent

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + bytes(range(40))


def run(tool, **args: Any):
    return tool.execute("call-1", args, None, None)


def text(result) -> str:
    return result.content[0].text


# --------------------------------------------------------------------------- registration and schemas


def test_register_tools_hook_registers_every_builtin():
    import agentcore.builtin_tools as plugin

    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    pm.register(plugin)
    registered = []
    pm.hook.register_tools(register=registered.append)
    assert [t.name for t in registered] == list(ALL_TOOL_NAMES)


def test_default_tools_follow_the_process_directory(tmp_path, monkeypatch):
    tools = {t.name: t for t in create_coding_tools()}
    (tmp_path / "here.txt").write_text("cwd file\n")
    monkeypatch.chdir(tmp_path)
    assert text(run(tools["read"], path="here.txt")) == "     1\tcwd file"
    assert text(run(tools["bash"], command="cat here.txt")) == "cwd file"


def test_schemas_are_valid_and_accept_typical_calls():
    from jsonschema import Draft202012Validator

    tools = {t.name: t for t in create_coding_tools()}
    for tool in tools.values():
        Draft202012Validator.check_schema(tool.parameters)
        assert tool.label == tool.name and tool.description
    validate_tool_arguments(tools["read"], {"path": "a", "offset": 2, "limit": 10})
    validate_tool_arguments(tools["edit"], {"path": "a", "edits": [{"oldText": "x", "newText": "y"}]})
    with pytest.raises(ValueError, match='Validation failed for tool "write"'):
        validate_tool_arguments(tools["write"], {"path": "a"})


def test_factories_choose_tools_by_name():
    assert [t.name for t in create_read_only_tools()] == ["read", "grep", "find", "ls"]
    assert [t.name for t in create_coding_tools(names=["edit", "read"])] == ["edit", "read"]
    with pytest.raises(ValueError, match="unknown built-in tool 'rm'"):
        create_coding_tools(names=["rm"])


# --------------------------------------------------------------------------- root confinement


@pytest.fixture
def sandbox(tmp_path):
    root = tmp_path / "root"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("alpha\n")
    (tmp_path / "secret.txt").write_text("outside\n")
    return root


@pytest.mark.parametrize("path", ["../secret.txt", "src/../../secret.txt", "{outside}"])
def test_paths_escaping_the_root_are_refused(sandbox, path):
    path = path.format(outside=sandbox.parent / "secret.txt")
    for tool in create_coding_tools(root=str(sandbox), names=["read", "write", "edit", "ls", "find", "grep"]):
        args = {
            "read": {"path": path},
            "write": {"path": path, "content": "x"},
            "edit": {"path": path, "edits": [{"oldText": "outside", "newText": "in"}]},
            "ls": {"path": path},
            "find": {"pattern": "*", "path": path},
            "grep": {"pattern": "x", "path": path},
        }[tool.name]
        with pytest.raises(PathOutsideRootError, match="is outside the allowed root"):
            tool.execute("c", args, None, None)
    assert (sandbox.parent / "secret.txt").read_text() == "outside\n"


def test_symlink_resolving_outside_the_root_is_refused(sandbox):
    (sandbox / "link.txt").symlink_to(sandbox.parent / "secret.txt")
    (sandbox / "linkdir").symlink_to(sandbox.parent)
    read = create_read_tool(root=str(sandbox))
    with pytest.raises(PathOutsideRootError):
        run(read, path="link.txt")
    with pytest.raises(PathOutsideRootError):
        run(read, path="linkdir/secret.txt")
    with pytest.raises(PathOutsideRootError):
        run(create_write_tool(root=str(sandbox)), path="link.txt", content="overwrite")
    assert (sandbox.parent / "secret.txt").read_text() == "outside\n"


def test_paths_inside_the_root_work_including_absolute_and_inner_symlinks(sandbox):
    (sandbox / "inner").symlink_to(sandbox / "src")
    read = create_read_tool(root=str(sandbox))
    assert text(run(read, path=str(sandbox / "src" / "a.py"))) == "     1\talpha"
    assert text(run(read, path="inner/a.py")) == "     1\talpha"
    assert text(run(read, path="src/../src/a.py")) == "     1\talpha"


def test_cwd_inside_root_resolves_relative_paths_and_cwd_outside_is_refused(sandbox):
    read = create_read_tool(cwd=str(sandbox / "src"), root=str(sandbox))
    assert text(run(read, path="a.py")) == "     1\talpha"
    outside = create_read_tool(cwd=str(sandbox.parent), root=str(sandbox))
    with pytest.raises(PathOutsideRootError):
        run(outside, path="root/src/a.py")


def test_without_root_any_path_is_allowed(sandbox):
    read = create_read_tool(cwd=str(sandbox))
    assert text(run(read, path="../secret.txt")) == "     1\toutside"


# --------------------------------------------------------------------------- read


@pytest.fixture
def lines_file(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_text("".join(f"line {i}\n" for i in range(1, 31)))
    return path


def test_read_numbers_lines_like_cat_n(tmp_path):
    (tmp_path / "f.txt").write_text("one\n\tindented\nlast")
    assert text(run(create_read_tool(str(tmp_path)), path="f.txt")) == "     1\tone\n     2\t\tindented\n     3\tlast"


def test_read_offset_and_limit_say_how_to_continue(lines_file):
    read = create_read_tool(str(lines_file.parent))
    result = run(read, path="lines.txt", offset=5, limit=3)
    assert text(result) == (
        "     5\tline 5\n     6\tline 6\n     7\tline 7\n\n[23 more lines in file. Use offset=8 to continue.]"
    )
    assert text(run(read, path="lines.txt", offset=29)) == "    29\tline 29\n    30\tline 30"


def test_read_truncation_notice_names_the_next_offset(lines_file):
    read = create_read_tool(str(lines_file.parent), max_lines=10)
    result = run(read, path="lines.txt", offset=3)
    body, notice = text(result).split("\n\n")
    assert body.splitlines()[0] == "     3\tline 3" and len(body.splitlines()) == 10
    assert notice == "[Showing lines 3-12 of 30. Use offset=13 to continue.]"
    assert result.details["truncation"]["truncatedBy"] == "lines"
    byte_limited = create_read_tool(str(lines_file.parent), max_bytes=40)
    assert text(run(byte_limited, path="lines.txt")).endswith(
        "[Showing lines 1-2 of 30 (40B limit). Use offset=3 to continue.]"
    )


def test_read_offset_past_the_end_is_an_error(lines_file):
    with pytest.raises(ValueError, match=r"Offset 31 is beyond end of file \(30 lines total\)"):
        run(create_read_tool(str(lines_file.parent)), path="lines.txt", offset=31)


@pytest.mark.parametrize("value", [float("inf"), float("nan"), 2.5, 0, "3"])
def test_a_count_that_is_not_a_whole_number_is_refused_naming_it(lines_file, value):
    # json.loads reads Infinity and NaN; int() of them raised OverflowError / "cannot convert
    # float NaN to integer", naming neither the argument nor what to pass instead
    with pytest.raises(ValueError, match=r"limit must be a whole number of at least 1, got"):
        run(create_read_tool(str(lines_file.parent)), path=lines_file.name, limit=value)


def test_read_shows_a_utf16_text_file_instead_of_calling_it_binary(tmp_path, monkeypatch):
    # its NUL bytes made it "a binary file ... Inspect it with bash instead", though grep finds
    # lines in it (ripgrep reads UTF-16 after its byte-order mark)
    (tmp_path / "le.txt").write_bytes("\ufeffbuild ok\r\nnaïve 🚀\r\n".encode("utf-16-le"))
    (tmp_path / "be.txt").write_bytes("\ufeffone\ntwo".encode("utf-16-be"))
    read = create_read_tool(str(tmp_path))
    assert text(run(read, path="le.txt")) == "     1\tbuild ok\n     2\tnaïve 🚀"
    assert text(run(read, path="be.txt", offset=2)) == "     2\ttwo"
    monkeypatch.setattr(read_module, "_UTF16_MAX", 20)  # converted in memory: bounded
    with pytest.raises(
        ValueError, match=r"le.txt: it is UTF-16 text of 42B, more than the 20B read converts; convert it"
    ):
        run(read, path="le.txt")


def test_edit_changes_a_utf16_file_that_read_shows_keeping_its_encoding(tmp_path):
    # read shows a file with a UTF-16 byte-order mark as text; edit refused it as "not UTF-8
    # text", so the model could see the lines but not change them
    (tmp_path / "le.txt").write_bytes("\ufeffbuild ok\r\nnaïve 🚀\r\n".encode("utf-16-le"))
    (tmp_path / "be.txt").write_bytes("\ufeffone\ntwo".encode("utf-16-be"))
    edit = create_edit_tool(str(tmp_path))
    run(edit, path="le.txt", edits=[{"oldText": "build ok\nnaïve", "newText": "build failed\nnaïve"}])
    run(edit, path="be.txt", edits=[{"oldText": "two", "newText": "deux"}])
    assert (tmp_path / "le.txt").read_bytes() == "\ufeffbuild failed\r\nnaïve 🚀\r\n".encode("utf-16-le")
    assert (tmp_path / "be.txt").read_bytes() == "\ufeffone\ndeux".encode("utf-16-be")
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe\x00\xd8")  # a lone surrogate: no UTF-16 text
    with pytest.raises(ValueError, match="bad.txt is not UTF-16 text; edit it with bash"):
        run(edit, path="bad.txt", edits=[{"oldText": "x", "newText": "y"}])


def test_read_refuses_binary_files_clearly(tmp_path):
    (tmp_path / "blob.bin").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(200))
    with pytest.raises(ValueError, match=r"Cannot read blob.bin: it is a binary file .*Inspect it with bash"):
        run(create_read_tool(str(tmp_path)), path="blob.bin")


@pytest.mark.parametrize(
    "data,mime",
    [
        (PNG, "image/png"),
        (b"\xff\xd8\xff\xe0" + bytes(30), "image/jpeg"),
        (b"GIF89a" + bytes(30), "image/gif"),
        (b"RIFF\x10\x00\x00\x00WEBPVP8 " + bytes(30), "image/webp"),
    ],
)
def test_read_returns_images_as_image_content(tmp_path, data, mime):
    (tmp_path / "picture.dat").write_bytes(data)  # detected by content, not by name
    result = run(create_read_tool(str(tmp_path)), path="picture.dat")
    assert isinstance(result.content[0], TextContent) and mime in result.content[0].text
    image = result.content[1]
    assert isinstance(image, ImageContent) and image.mime_type == mime
    assert base64.b64decode(image.data) == data


def test_read_refuses_images_over_the_limit(tmp_path):
    (tmp_path / "big.png").write_bytes(PNG + bytes(2000))
    with pytest.raises(ValueError, match="larger than the"):
        run(create_read_tool(str(tmp_path), max_image_bytes=1000), path="big.png")


def test_read_strips_bom_and_carriage_returns_for_display(tmp_path):
    (tmp_path / "win.txt").write_bytes("\ufeffa\r\nb\r\n".encode("utf-8"))
    assert text(run(create_read_tool(str(tmp_path)), path="win.txt")) == "     1\ta\n     2\tb"


def test_read_missing_file_and_directory_errors(tmp_path):
    read = create_read_tool(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="File not found: nope.txt"):
        run(read, path="nope.txt")
    with pytest.raises(IsADirectoryError, match="use ls"):
        run(read, path=".")


def test_read_long_first_line_points_to_bash(tmp_path):
    (tmp_path / "wide.txt").write_text("x" * 500 + "\nshort\n")
    result = run(create_read_tool(str(tmp_path), max_bytes=100), path="wide.txt")
    assert text(result).startswith("[Line 1 is 500B, over the 100B limit. Use bash: sed -n '1p' wide.txt")


def test_read_honours_an_aborted_signal(lines_file):
    controller = AbortController()
    controller.abort()
    with pytest.raises(AbortError):
        create_read_tool(str(lines_file.parent)).execute("c", {"path": "lines.txt"}, controller.signal, None)


def test_read_a_few_lines_of_a_huge_file_keeps_memory_bounded(tmp_path):
    # `read path offset=… limit=10` on a big log loaded the whole file (bytes, str and a list of
    # every line) into memory: a multi-GB log exhausted memory for a 10-line answer.
    import tracemalloc

    from agentcore.builtin_tools import create_read_tool

    big = tmp_path / "big.log"
    line = b"2026-01-01 12:00:00 INFO something happened in module x, all fine\n"
    with open(big, "wb") as f:
        f.write(b"\xef\xbb\xbf" + line * 300_000)  # ~20 MB
    tool = create_read_tool(str(tmp_path))
    tracemalloc.start()
    try:
        result = tool.execute("c1", {"path": "big.log", "offset": 1000, "limit": 10})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    text = result.content[0].text
    assert text.startswith("  1000\t2026-01-01") and "  1009\t" in text and "  1010\t" not in text
    assert "Use offset=1010 to continue" in text
    assert result.details["totalLines"] == 300_000
    assert peak < 4_000_000, f"peak {peak} bytes for a 10-line answer"


def test_read_of_a_file_with_one_huge_line_keeps_memory_bounded(tmp_path):
    # every line was read whole (`for raw in f`), decoded, numbered and encoded again: a 1 GB
    # minified bundle or JSON dump on one line took ~4 GB to say "line 1 is too long", and ~2 GB
    # just to skip it with offset=2
    import tracemalloc

    with open(tmp_path / "bundle.js", "wb") as f:
        f.write(b"\xef\xbb\xbf" + b"x" * 20_000_000 + b"\r\nsecond\n")
    tool = create_read_tool(str(tmp_path))
    tracemalloc.start()
    try:
        first = run(tool, path="bundle.js")
        second = run(tool, path="bundle.js", offset=2)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert text(first).startswith("[Line 1 is 19.1MB, over the 50.0KB limit. Use bash: sed -n '1p' bundle.js")
    assert first.details["truncation"]["totalBytes"] == len("     1\t") + 20_000_000 + 1 + len("     2\tsecond")
    assert text(second) == "     2\tsecond"
    assert peak < 4_000_000, f"peak {peak} bytes to read past one long line"


def test_read_long_line_hint_quotes_a_path_with_spaces(tmp_path):
    (tmp_path / "my notes.txt").write_text("x" * 500 + "\n")
    result = run(create_read_tool(str(tmp_path), max_bytes=100), path="my notes.txt")
    assert "Use bash: sed -n '1p' 'my notes.txt' | head -c 100]" in text(result)


# --------------------------------------------------------------------------- write


def test_write_creates_parents_and_reports_bytes(tmp_path):
    result = run(create_write_tool(str(tmp_path)), path="a/b/c.txt", content="héllo\n")
    assert (tmp_path / "a" / "b" / "c.txt").read_text(encoding="utf-8") == "héllo\n"
    assert text(result) == "Successfully wrote 7 bytes to a/b/c.txt"
    assert result.details["bytes"] == 7


def test_write_refuses_a_path_that_names_a_folder(tmp_path):
    write = create_write_tool(str(tmp_path))
    with pytest.raises(IsADirectoryError, match="newdir/ ends with a '/', so it names a folder"):
        run(write, path="newdir/", content="x")
    assert not (tmp_path / "newdir").exists()  # not a file called newdir


def test_write_replaces_atomically_and_leaves_no_temp_files(tmp_path, monkeypatch):
    target = tmp_path / "keep.txt"
    target.write_text("old\n")
    target.chmod(0o640)
    write = create_write_tool(str(tmp_path))

    def failing_replace(src, dst):
        raise OSError("disk on fire")

    monkeypatch.setattr(write_module.os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk on fire"):
        run(write, path="keep.txt", content="new\n")
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]
    monkeypatch.undo()
    run(write, path="keep.txt", content="new\n")
    assert target.read_text() == "new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]


def test_write_and_edit_handle_a_file_name_near_the_length_limit(tmp_path):
    # the temp file was named ".{name}.XXXXXXXX.tmp": 15 bytes over a 245-byte name, so both tools
    # failed with "File name too long" naming a file the user never asked for
    name = "é" * 100 + "a" * 41 + ".txt"  # 245 bytes in UTF-8, under the usual 255
    run(create_write_tool(str(tmp_path)), path=name, content="one\n")
    run(create_edit_tool(str(tmp_path)), path=name, edits=[{"oldText": "one", "newText": "two"}])
    assert (tmp_path / name).read_text(encoding="utf-8") == "two\n"
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_write_aborted_while_waiting_for_the_file_lock_writes_nothing(tmp_path):
    # the abort was checked only before taking the per-file lock: a write queued behind another
    # call on the same file went ahead after the user had aborted
    target = tmp_path / "shared.txt"
    target.write_text("old\n")
    controller = AbortController()
    checked = threading.Event()

    class WatchedSignal:
        def __getattr__(self, name):
            return getattr(controller.signal, name)

        def raise_if_aborted(self):
            checked.set()
            controller.signal.raise_if_aborted()

    box: List[BaseException] = []

    def call():
        try:
            create_write_tool(str(tmp_path)).execute("c", {"path": "shared.txt", "content": "new\n"}, WatchedSignal())
        except BaseException as exc:
            box.append(exc)

    lock = file_lock(str(target))
    with lock:  # another edit or write of the same file is running
        worker = threading.Thread(target=call)
        worker.start()
        assert checked.wait(10)
        controller.abort()
    worker.join(10)
    assert not worker.is_alive()
    assert len(box) == 1 and isinstance(box[0], AbortError)
    assert target.read_text() == "old\n"


def test_the_per_file_locks_of_write_and_edit_do_not_pile_up(tmp_path):
    # every file ever written or edited kept its lock in a process-wide dict for good: a
    # long-lived process (a server, a kernel) writing many files grew without bound
    from agentcore.builtin_tools import _paths

    write, edit = create_write_tool(str(tmp_path)), create_edit_tool(str(tmp_path))
    before = len(_paths._locks)
    for i in range(50):
        run(write, path=f"f{i}.txt", content="one\n")
        run(edit, path=f"f{i}.txt", edits=[{"oldText": "one", "newText": "two"}])
    assert len(_paths._locks) == before
    lock = file_lock(str(tmp_path / "f1.txt"))  # while a call holds a file's lock, others get that one
    assert file_lock(str(tmp_path / "f1.txt")) is lock and len(_paths._locks) == before + 1


def test_write_and_edit_name_a_lone_surrogate_and_change_nothing(tmp_path):
    # json.loads turns a model's "\\ud83d" (half an emoji's escape pair) into a lone surrogate;
    # the tools raised a bare UnicodeEncodeError counting characters of the whole new file
    target = tmp_path / "notes.txt"
    target.write_text("one\ntwo\n")
    with pytest.raises(ValueError, match=r"^content holds an unpaired UTF-16 surrogate '\\ud83d' \(line 2\)"):
        run(create_write_tool(str(tmp_path)), path="notes.txt", content="one\nbroken \ud83d\n")
    with pytest.raises(EditError, match=r"^edits\[1\]\.newText holds an unpaired UTF-16 surrogate '\\ude00'"):
        run(
            create_edit_tool(str(tmp_path)),
            path="notes.txt",
            edits=[{"oldText": "one", "newText": "1"}, {"oldText": "two", "newText": "\ude00"}],
        )
    assert target.read_text() == "one\ntwo\n"


def test_write_through_a_symlink_keeps_the_link(tmp_path):
    (tmp_path / "real.txt").write_text("old")
    (tmp_path / "alias.txt").symlink_to(tmp_path / "real.txt")
    run(create_write_tool(str(tmp_path)), path="alias.txt", content="new")
    assert (tmp_path / "alias.txt").is_symlink()
    assert (tmp_path / "real.txt").read_text() == "new"


def test_write_to_a_symlink_loop_names_the_loop(tmp_path):
    # read and edit said "leads nowhere"; write failed with a bare "[Errno 40] Too many levels of
    # symbolic links" and the absolute path
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(OSError, match=r"^Cannot write .*a: it is a symbolic link loop, which leads to no file$"):
        run(create_write_tool(str(tmp_path)), path="a", content="x")
    assert (tmp_path / "a").is_symlink() and (tmp_path / "b").is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]  # no temp file left


def test_write_refuses_a_directory(tmp_path):
    with pytest.raises(IsADirectoryError):
        run(create_write_tool(str(tmp_path)), path=".", content="x")


needs_non_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0, reason="permission bits do not bind root"
)


def test_write_under_a_file_says_which_parent_is_a_file(tmp_path):
    (tmp_path / "notes").write_text("a file, not a folder\n")
    write = create_write_tool(str(tmp_path))
    for path in ("notes/today.txt", "notes/2026/today.txt"):  # was "File exists: .../notes", a riddle
        with pytest.raises(NotADirectoryError, match=r"notes is a file, not a folder"):
            run(write, path=path, content="x")
    assert (tmp_path / "notes").read_text() == "a file, not a folder\n"


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="only root can give files away")
def test_write_and_edit_keep_the_owner_and_group_of_the_file_they_replace(tmp_path):
    # the temp file that replaces the target belonged to the process: an agent running as root (a
    # container on a bind mount) left every file it touched owned by root, unwritable by its user
    target = tmp_path / "shared.txt"
    target.write_text("one\n")
    os.chown(target, 1234, 5678)
    target.chmod(0o664)
    run(create_write_tool(str(tmp_path)), path="shared.txt", content="two\n")
    run(create_edit_tool(str(tmp_path)), path="shared.txt", edits=[{"oldText": "two", "newText": "three"}])
    info = target.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (1234, 5678, 0o664)
    assert target.read_text() == "three\n"


@needs_non_root
def test_write_and_edit_refuse_a_read_only_file(tmp_path):
    # os.replace swaps the directory entry, so the 0o444 bits were bypassed: open(path, "w")
    # fails with EACCES, the tools silently replaced the protected file (and kept it 0o444)
    target = tmp_path / "locked.txt"
    target.write_text("keep me\n")
    target.chmod(0o444)
    with pytest.raises(PermissionError, match=r"locked.txt is read-only \(mode 444\); it was not changed"):
        run(create_write_tool(str(tmp_path)), path="locked.txt", content="overwritten\n")
    with pytest.raises(PermissionError, match="read-only"):
        run(create_edit_tool(str(tmp_path)), path="locked.txt", edits=[{"oldText": "keep", "newText": "lose"}])
    assert target.read_text() == "keep me\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["locked.txt"]


@needs_non_root
def test_write_into_a_read_only_folder_names_the_folder(tmp_path):
    folder = tmp_path / "frozen"
    folder.mkdir()
    (folder / "f.txt").write_text("old\n")
    folder.chmod(0o555)
    try:
        with pytest.raises(PermissionError, match=r"cannot create files in .*frozen, so .*f.txt cannot be written"):
            run(create_write_tool(str(tmp_path)), path="frozen/f.txt", content="new\n")
    finally:
        folder.chmod(0o755)
    assert (folder / "f.txt").read_text() == "old\n"


@needs_non_root
@pytest.mark.parametrize(
    "make_tool,args",
    [
        (create_read_tool, {"path": "hidden/f.txt"}),
        (create_edit_tool, {"path": "hidden/f.txt", "edits": [{"oldText": "a", "newText": "b"}]}),
        (create_ls_tool, {"path": "hidden/sub"}),
        (create_find_tool, {"pattern": "*", "path": "hidden/sub"}),
        (lambda cwd: create_grep_tool(cwd, use_rg=False), {"pattern": "a", "path": "hidden/f.txt"}),
    ],
)
def test_a_path_behind_an_unsearchable_folder_is_denied_not_missing(tmp_path, make_tool, args):
    # os.path.exists() is False when stat() fails with EACCES: the tools said "File not found"
    # about a file that exists, and the model went looking elsewhere
    hidden = tmp_path / "hidden"
    (hidden / "sub").mkdir(parents=True)
    (hidden / "f.txt").write_text("a\n")
    hidden.chmod(0o000)
    try:
        with pytest.raises(PermissionError, match=r"Permission denied: cannot reach hidden/"):
            make_tool(str(tmp_path)).execute("c", args, None, None)
    finally:
        hidden.chmod(0o755)


@pytest.mark.parametrize(
    "make_tool,args",
    [
        (create_read_tool, {"path": "a\0b.txt"}),
        (create_write_tool, {"path": "a\0b.txt", "content": "x"}),
        (create_edit_tool, {"path": "a\0b.txt", "edits": [{"oldText": "a", "newText": "b"}]}),
        (create_ls_tool, {"path": "a\0b"}),
        (create_find_tool, {"pattern": "*", "path": "a\0b"}),
        (lambda cwd: create_grep_tool(cwd, use_rg=False), {"pattern": "a", "path": "a\0b.txt"}),
    ],
)
def test_a_path_with_a_nul_character_is_refused_naming_it(tmp_path, make_tool, args):
    # read said "File not found" (the file may well exist without the NUL), write a bare
    # "embedded null byte" that named neither the argument nor the path
    with pytest.raises(ValueError, match=r"path 'a\\x00b(\.txt)?' contains a NUL character"):
        make_tool(str(tmp_path)).execute("c", args, None, None)
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- edit


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "mod.py"
    path.write_text("def f():\n    return 1\n\n\ndef g():\n    return 1\n")
    return path


def test_edit_replaces_unique_text_and_returns_a_diff(source):
    result = run(
        create_edit_tool(str(source.parent)),
        path="mod.py",
        edits=[{"oldText": "def g():\n    return 1", "newText": "def g():\n    return 2"}],
    )
    assert source.read_text() == "def f():\n    return 1\n\n\ndef g():\n    return 2\n"
    assert text(result) == "Successfully applied 1 edit to mod.py."
    diff = result.details["diff"]
    assert diff.startswith("--- a/mod.py\n+++ b/mod.py\n@@")
    assert "-    return 1\n+    return 2\n" in diff
    assert result.details["firstChangedLine"] == 6


def test_edit_applies_several_edits_against_the_original(source):
    result = run(
        create_edit_tool(str(source.parent)),
        path="mod.py",
        edits=[
            {"oldText": "def f():", "newText": "def first():"},
            {"oldText": "def g():", "newText": "def second():"},
        ],
    )
    assert source.read_text().splitlines()[0] == "def first():"
    assert source.read_text().splitlines()[4] == "def second():"
    assert text(result) == "Successfully applied 2 edits to mod.py."


def test_edit_ambiguous_text_reports_the_count_and_changes_nothing(source):
    before = source.read_bytes()
    with pytest.raises(EditError, match=r"Found 2 occurrences of oldText in mod.py; it must match exactly once"):
        run(create_edit_tool(str(source.parent)), path="mod.py", edits=[{"oldText": "return 1", "newText": "x"}])
    assert source.read_bytes() == before


def test_edit_counts_overlapping_occurrences_as_ambiguous(tmp_path):
    # str.count counted "}\n}\n" once in "    }\n}\n}\n" (matches at 4 and 6 overlap), so the edit went through
    (tmp_path / "f.js").write_text("    }\n}\n}\n")
    with pytest.raises(EditError, match="Found 2 occurrences of oldText in f.js"):
        run(create_edit_tool(str(tmp_path)), path="f.js", edits=[{"oldText": "}\n}\n", "newText": "}\n"}])
    assert (tmp_path / "f.js").read_text() == "    }\n}\n}\n"


def test_edit_missing_text_reports_not_found(source):
    with pytest.raises(EditError, match="Could not find oldText in mod.py"):
        run(create_edit_tool(str(source.parent)), path="mod.py", edits=[{"oldText": "return 3", "newText": "x"}])


def test_edit_failure_in_a_later_edit_leaves_the_file_unchanged(source):
    before = source.read_bytes()
    with pytest.raises(EditError, match=r"Could not find edits\[1\].oldText"):
        run(
            create_edit_tool(str(source.parent)),
            path="mod.py",
            edits=[
                {"oldText": "def f():", "newText": "def h():"},
                {"oldText": "no such text", "newText": "x"},
            ],
        )
    assert source.read_bytes() == before
    assert sorted(p.name for p in source.parent.iterdir()) == ["mod.py"]


def test_edit_overlapping_and_no_op_edits_are_refused(source):
    edit = create_edit_tool(str(source.parent))
    with pytest.raises(EditError, match="overlap"):
        run(
            edit,
            path="mod.py",
            edits=[{"oldText": "def f():\n", "newText": "a"}, {"oldText": "f():\n    return", "newText": "b"}],
        )
    with pytest.raises(EditError, match="No changes made"):
        run(edit, path="mod.py", edits=[{"oldText": "def f()", "newText": "def f()"}])
    with pytest.raises(EditError, match="empty"):
        run(edit, path="mod.py", edits=[{"oldText": "", "newText": "x"}])


def test_edit_keeps_crlf_line_endings_and_the_bom(tmp_path):
    path = tmp_path / "win.txt"
    path.write_bytes(b"\xef\xbb\xbfone\r\ntwo\r\nthree\r\n")
    run(create_edit_tool(str(tmp_path)), path="win.txt", edits=[{"oldText": "two\nthree", "newText": "2\n3"}])
    assert path.read_bytes() == b"\xef\xbb\xbfone\r\n2\r\n3\r\n"


def test_edit_of_a_mixed_line_ending_file_changes_only_the_edited_text(tmp_path):
    # the file was LF-normalised for matching and written back with LF: the CRLF of line 2 and the
    # lone CR inside the string literal were rewritten, and the diff (of normalised text) hid it
    path = tmp_path / "gen.py"
    path.write_bytes(b"a = 1\nb = 2\r\ns = 'x\ry'\nlast = 0\n")
    result = run(create_edit_tool(str(tmp_path)), path="gen.py", edits=[{"oldText": "last = 0", "newText": "last = 1"}])
    assert path.read_bytes() == b"a = 1\nb = 2\r\ns = 'x\ry'\nlast = 1\n"
    assert " b = 2\r\n s = 'x\ry'\n-last = 0\n+last = 1\n" in result.details["diff"]
    assert result.details["firstChangedLine"] == 4


def test_an_edit_of_a_mixed_file_that_misses_a_crlf_says_why(tmp_path):
    path = tmp_path / "mixed.txt"
    path.write_bytes(b"one\r\ntwo\nthree\n")
    with pytest.raises(Exception, match=r"mixes CRLF and LF line endings") as info:
        run(create_edit_tool(str(tmp_path)), path="mixed.txt", edits=[{"oldText": "one\ntwo", "newText": "x"}])
    assert "Could not find oldText" in str(info.value)
    assert path.read_bytes() == b"one\r\ntwo\nthree\n"
    run(create_edit_tool(str(tmp_path)), path="mixed.txt", edits=[{"oldText": "one\r\ntwo", "newText": "x"}])
    assert path.read_bytes() == b"x\nthree\n"


def test_the_mixed_line_ending_hint_points_to_a_way_of_seeing_the_crlfs(tmp_path):
    # it said "(read shows where)", but read strips the "\r" from every line it shows
    (tmp_path / "mixed file.txt").write_bytes(b"one\r\ntwo\nthree\n")
    assert "\r" not in text(run(create_read_tool(str(tmp_path)), path="mixed file.txt"))
    with pytest.raises(EditError) as info:
        run(create_edit_tool(str(tmp_path)), path="mixed file.txt", edits=[{"oldText": "one\ntwo", "newText": "x"}])
    assert "read shows where" not in str(info.value)
    assert str(info.value).endswith("grep -n $'\\r$' 'mixed file.txt'")


def test_edit_of_a_crlf_file_keeps_a_lone_carriage_return(tmp_path):
    path = tmp_path / "win.py"
    path.write_bytes(b"s = 'x\ry'\r\nlast = 0\r\n")
    run(create_edit_tool(str(tmp_path)), path="win.py", edits=[{"oldText": "last = 0\n", "newText": "last = 1\nend\n"}])
    assert path.read_bytes() == b"s = 'x\ry'\r\nlast = 1\r\nend\r\n"


def test_edit_diff_of_a_file_without_a_final_newline_marks_it_as_diff_does(tmp_path):
    # difflib leaves a last line without its "\n", so the removed and the added line were glued
    # together ("-last+LAST"): a diff no viewer shows right and patch rejects
    (tmp_path / "f.txt").write_bytes(b"first\nlast")
    result = run(create_edit_tool(str(tmp_path)), path="f.txt", edits=[{"oldText": "last", "newText": "LAST"}])
    assert result.details["diff"] == (
        "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n first\n"
        "-last\n\\ No newline at end of file\n+LAST\n\\ No newline at end of file\n"
    )
    assert (tmp_path / "f.txt").read_bytes() == b"first\nLAST"


def test_edit_prepare_arguments_accepts_top_level_and_snake_case(source):
    tool = create_edit_tool(str(source.parent))
    raw = {"path": "mod.py", "oldText": "def f():", "newText": "def top():"}
    prepared = tool.prepare_arguments(raw)
    assert prepared == {"path": "mod.py", "edits": [{"oldText": "def f():", "newText": "def top():"}]}
    assert raw == {"path": "mod.py", "oldText": "def f():", "newText": "def top():"}  # not mutated
    validate_tool_arguments(tool, prepared)
    snake = tool.prepare_arguments({"path": "mod.py", "edits": [{"old_text": "def g():", "new_text": "def s():"}]})
    assert snake["edits"] == [{"oldText": "def g():", "newText": "def s():"}]
    run(tool, **prepared)
    tool.execute("c", {"path": "mod.py", "old_text": "def g():", "new_text": "def s():"}, None, None)
    assert source.read_text().startswith("def top():") and "def s():" in source.read_text()


def test_edit_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="File not found: gone.py"):
        run(create_edit_tool(str(tmp_path)), path="gone.py", edits=[{"oldText": "a", "newText": "b"}])


def test_edit_refuses_a_file_too_large_to_hold_in_memory(tmp_path):
    # edit read the whole file: a sparse 10 GB disk image (NUL bytes are valid UTF-8) was loaded,
    # decoded and copied until the process ran out of memory; a 300 MB log took 2.7 GB
    image = tmp_path / "disk.img"
    with open(image, "wb") as f:
        f.truncate(32 * 1024 * 1024 + 1)  # sparse: one byte over the limit costs no disk
    with pytest.raises(EditError, match=r"Cannot edit disk.img: it is 32.0MB, more than the 32.0MB edit loads"):
        run(create_edit_tool(str(tmp_path)), path="disk.img", edits=[{"oldText": "a", "newText": "b"}])
    assert image.stat().st_size == 32 * 1024 * 1024 + 1


def test_edit_of_a_large_repetitive_file_is_fast(tmp_path):
    # edit computed firstChangedLine with difflib.SequenceMatcher(autojunk=False), which is about
    # quadratic when lines repeat ("}", blank lines): one edit of a 20,000-line file took ~8 s
    # (a 100,000-line one minutes). The first changed line is where the texts first differ.
    import threading

    from agentcore.builtin_tools import create_edit_tool

    pattern = ["}", "", "    return x", "    pass", "  # comment"]
    lines = [pattern[i % 5] if i % 7 else f"def f{i}():" for i in range(60000)]
    lines[36000] = "UNIQUE_MARKER"
    (tmp_path / "big.py").write_text("\n".join(lines) + "\n")
    tool = create_edit_tool(str(tmp_path))
    box: List[object] = []
    worker = threading.Thread(
        target=lambda: box.append(
            tool.execute("c1", {"path": "big.py", "edits": [{"oldText": "UNIQUE_MARKER", "newText": "CHANGED\nTWICE"}]})
        ),
        daemon=True,
    )
    worker.start()
    # a hang guard, not a timing: the linear job takes ~0.1 s, the quadratic one over a minute
    worker.join(30.0)
    assert not worker.is_alive(), "edit took more than 30 s for a one-line change"
    result = box[0]
    assert result.details["firstChangedLine"] == 36001
    assert "-UNIQUE_MARKER\n+CHANGED\n+TWICE\n" in result.details["diff"]


# --------------------------------------------------------------------------- ls


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / ".git" / "objects").mkdir(parents=True)
    (tmp_path / ".git" / "config.py").write_text("needle = 'in git'\n")
    (tmp_path / "src" / "main.py").write_text("import os\nneedle = 1\nNEEDLE = 2\n")
    (tmp_path / "src" / "pkg" / "util.py").write_text("def needle():\n    pass\n")
    (tmp_path / "src" / "notes.md").write_text("a needle in markdown\n")
    (tmp_path / "README").write_text("needle (the readme)\n")
    (tmp_path / ".env").write_text("NEEDLE_KEY=x\n")
    (tmp_path / "data.bin").write_bytes(b"needle\x00\x01\x02")
    return tmp_path


def test_ls_sorts_marks_folders_and_shows_dot_files(tree):
    assert text(run(create_ls_tool(str(tree)))) == ".env\n.git/\ndata.bin\nREADME\nsrc/"
    assert text(run(create_ls_tool(str(tree)), path="src")) == "main.py\nnotes.md\npkg/"


def test_ls_limit_and_errors(tree):
    ls = create_ls_tool(str(tree))
    result = run(ls, limit=2)
    assert text(result) == ".env\n.git/\n\n[2 of 5 entries shown. Use limit=4 for more]"
    with pytest.raises(NotADirectoryError):
        run(ls, path="README")
    with pytest.raises(FileNotFoundError):
        run(ls, path="missing")
    (tree / "empty").mkdir()
    assert text(run(ls, path="empty")) == "(empty directory)"


def test_ls_cut_at_50kb_says_how_many_entries_were_shown(tmp_path):
    # the notice said "500 of 600 entries shown. Use limit=1000 for more" over ~340 entries: the
    # byte cap had cut the rest, and a higher limit could never show them
    for i in range(600):
        (tmp_path / f"{i:04d}_{'n' * 145}").touch()
    result = run(create_ls_tool(str(tmp_path)))
    body, notice = text(result).split("\n\n")
    shown = len(body.splitlines())
    assert shown < 500 and result.details["truncation"]["outputLines"] == shown
    assert notice == f"[output cut at 50KB: {shown} of 600 entries shown; use find with a pattern to see the others]"


def test_ls_lists_a_folder_with_a_symlink_loop_and_a_link_to_a_folder(tree):
    (tree / "src" / "loop").symlink_to("loop")  # is_dir() raises ELOOP on it
    (tree / "src" / "to_pkg").symlink_to("pkg")
    listing = text(run(create_ls_tool(str(tree)), path="src"))
    assert listing == "loop\nmain.py\nnotes.md\npkg/\nto_pkg/"
    with pytest.raises(FileNotFoundError, match="src/loop is a symbolic link that leads nowhere"):
        run(create_read_tool(str(tree)), path="src/loop")


# --------------------------------------------------------------------------- find


def test_find_matches_names_at_any_depth_and_skips_git(tree):
    assert text(run(create_find_tool(str(tree)), pattern="*.py")) == "src/main.py\nsrc/pkg/util.py"


def test_find_path_patterns_folders_and_search_path(tree):
    find = create_find_tool(str(tree))
    assert text(run(find, pattern="src/**/*.py")) == "src/main.py\nsrc/pkg/util.py"
    assert text(run(find, pattern="pkg")) == "src/pkg/"
    assert text(run(find, pattern="*.{md,py}", path="src")) == "src/main.py\nsrc/notes.md\nsrc/pkg/util.py"


def test_find_pattern_ending_in_a_slash_matches_folders_only(tree):
    # find writes folders as "pkg/", so a model asks for "pkg/"; no relative path ends in "/",
    # and the answer was "No files found matching pattern pkg/" for a folder that is there
    (tree / "src" / "pkg" / "src").write_text("a file called src\n")
    find = create_find_tool(str(tree))
    assert text(run(find, pattern="pkg/")) == "src/pkg/"
    assert text(run(find, pattern="src/")) == "src/"  # not the file src/pkg/src
    assert text(run(find, pattern="src/*/")) == "src/pkg/"
    assert text(run(find, pattern="**/")) == "src/\nsrc/pkg/"


def test_find_limit_and_no_results(tree):
    find = create_find_tool(str(tree))
    assert text(run(find, pattern="*", limit=2)) == (
        ".env\nREADME\n\n[2 results limit reached. Use limit=4 for more, or refine the pattern]"
    )
    assert text(run(find, pattern="*.rs")) == "No files found matching pattern *.rs"


def test_find_cut_at_50kb_does_not_claim_the_limit_was_shown(tmp_path):
    # "[1000 results limit reached. Use limit=2000 for more]" under ~600 paths: the 50KB cap had
    # dropped the rest, so the model took 600 for 1000 and raising the limit showed nothing new
    folder = tmp_path / "a_fairly_long_folder_name"
    folder.mkdir()
    for i in range(1100):
        (folder / f"a_long_descriptive_file_name_{i:05d}.txt").touch()
    result = run(create_find_tool(str(tmp_path)), pattern="*.txt")
    body, notice = text(result).split("\n\n")
    shown = len(body.splitlines())
    assert shown < 1000 and result.details["truncation"]["outputLines"] == shown
    assert notice == f"[output cut at 50KB: {shown} of 1000+ results shown; refine the pattern or path]"
    assert result.details["limitReached"] == 1000


def test_find_stops_on_abort(tree):
    controller = AbortController()
    controller.abort()
    with pytest.raises(AbortError):
        create_find_tool(str(tree)).execute("c", {"pattern": "*"}, controller.signal, None)


def test_an_invalid_glob_is_a_clear_error_naming_it(tree):
    # "[z-a]" raised re.error "bad character range z-a at position 5" (of a regex the user never
    # wrote) and "[!]" raised "bad escape \Z at position 8"
    with pytest.raises(ValueError, match=r"Invalid glob '\[z-a\]': bad character range"):
        run(create_find_tool(str(tree)), pattern="[z-a]")
    with pytest.raises(ValueError, match=r"Invalid glob '\[z-a\]'"):
        run(create_grep_tool(str(tree), use_rg=False), pattern="needle", glob="[z-a]")
    (tree / "[!]").write_text("needle\n")  # no closing bracket after "[!]": the brackets are literal
    assert text(run(create_find_tool(str(tree)), pattern="[!]")) == "[!]"
    assert compile_glob("[!]a]")("b") and not compile_glob("[!]a]")("]")


@pytest.mark.parametrize(
    "pattern,path,expected",
    [
        ("*.py", "a/b/c.py", True),
        ("*.py", "c.pyc", False),
        ("src/*.py", "src/a/b.py", False),
        ("src/**/*.py", "src/b.py", True),
        ("**/test_?.py", "x/y/test_1.py", True),
        ("[!a]*", "abc", False),
        ("[!a]*", "bcd", True),
        ("{a,b}/*.txt", "b/x.txt", True),
    ],
)
def test_glob_rules(pattern, path, expected):
    assert compile_glob(pattern)(path) is expected


# --------------------------------------------------------------------------- grep

BACKENDS = [
    pytest.param(False, id="python"),
    pytest.param(
        True, id="rg", marks=pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep (rg) not installed")
    ),
]


@pytest.mark.parametrize("use_rg", BACKENDS)
def test_grep_formats_path_line_text_and_skips_git_and_binaries(tree, use_rg):
    result = run(create_grep_tool(str(tree), use_rg=use_rg), pattern="needle")
    assert text(result) == (
        "README:1:needle (the readme)\nsrc/main.py:2:needle = 1\n"
        "src/notes.md:1:a needle in markdown\nsrc/pkg/util.py:1:def needle():"
    )
    assert result.details["backend"] == ("rg" if use_rg else "python")


@pytest.mark.parametrize("use_rg", BACKENDS)
def test_grep_of_a_binary_file_named_as_its_path_says_it_is_binary(tree, use_rg):
    # the Python search answered "No matches found for needle" about a file holding "needle";
    # ripgrep searched it anyway and sent its raw NUL and control bytes to the model
    with pytest.raises(ValueError, match=r"Cannot search data.bin: it is a binary file .*Search it with bash"):
        run(create_grep_tool(str(tree), use_rg=use_rg), pattern="needle", path="data.bin")


@pytest.mark.parametrize("use_rg", BACKENDS)
def test_grep_options(tree, use_rg):
    grep = create_grep_tool(str(tree), use_rg=use_rg)
    assert text(run(grep, pattern="needle", ignoreCase=True, glob="*.py")) == (
        "src/main.py:2:needle = 1\nsrc/main.py:3:NEEDLE = 2\nsrc/pkg/util.py:1:def needle():"
    )
    assert text(run(grep, pattern="needle()", literal=True)) == "src/pkg/util.py:1:def needle():"
    assert text(run(grep, pattern=r"^NEEDLE_\w+", path=".env")) == ".env:1:NEEDLE_KEY=x"
    assert text(run(grep, pattern="needle", path="src", limit=2)) == (
        "src/main.py:2:needle = 1\nsrc/notes.md:1:a needle in markdown\n\n"
        "[2 matches limit reached. Use limit=4 for more, or refine the pattern]"
    )
    assert text(run(grep, pattern="haystack")) == "No matches found for haystack"


@pytest.mark.parametrize(
    "make_tool,args,expected",
    [
        pytest.param(create_ls_tool, {}, "bad\nname.txt\nz.txt", id="ls"),
        pytest.param(create_find_tool, {"pattern": "*.txt"}, "bad\nname.txt\nz.txt", id="find"),
        *(
            pytest.param(
                lambda cwd, rg=p.values[0]: create_grep_tool(cwd, use_rg=rg),
                {"pattern": "needle"},
                "bad\nname.txt:1:needle\nz.txt:1:needle",
                id=f"grep-{p.id}",
                marks=p.marks,
            )
            for p in BACKENDS
        ),
    ],
)
def test_listings_with_a_newline_in_a_file_name_lose_nothing(tmp_path, make_tool, args, expected):
    # the list was cut at as many lines as it had entries: the name's own newline made one line
    # more, so the last entry was dropped under a false "[output cut at 50KB: 2 of 2 ... shown]"
    (tmp_path / "bad\nname.txt").write_text("needle\n")
    (tmp_path / "z.txt").write_text("needle\n")
    result = make_tool(str(tmp_path)).execute("c", args, None, None)
    assert text(result) == expected
    assert "truncation" not in result.details


@pytest.mark.skipif(sys.platform != "linux", reason="a file name may be any bytes on Linux")
@pytest.mark.parametrize(
    "make_tool,args,expected",
    [
        pytest.param(create_ls_tool, {}, "caf.txt\ncaf\ufffd.txt", id="ls"),
        pytest.param(create_find_tool, {"pattern": "*.txt"}, "caf.txt\ncaf\ufffd.txt", id="find"),
        *(
            pytest.param(
                lambda cwd, rg=p.values[0]: create_grep_tool(cwd, use_rg=rg),
                {"pattern": "needle"},
                "caf.txt:1:needle\ncaf\ufffd.txt:1:needle",
                id=f"grep-{p.id}",
                marks=p.marks,
            )
            for p in BACKENDS
        ),
    ],
)
def test_listings_show_a_name_that_is_not_utf8_without_making_it_another_name(tmp_path, make_tool, args, expected):
    # "caf\xe9.txt" (Latin-1) came out as "caf\udce9.txt" (ripgrep aside), a lone surrogate every
    # provider drops: the model was shown "caf.txt", the name of another file
    (tmp_path / os.fsdecode(b"caf\xe9.txt")).write_text("needle\n")
    (tmp_path / "caf.txt").write_text("needle\n")
    assert text(make_tool(str(tmp_path)).execute("c", args, None, None)) == expected


@pytest.mark.parametrize("use_rg", BACKENDS)
@pytest.mark.parametrize("glob", ["./src/*.py", " src/*.py "])
def test_grep_reads_a_glob_with_a_leading_dot_slash_or_spaces_like_find(tree, use_rg, glob):
    # find and the Python search drop "./" and surrounding spaces; ripgrep was handed the glob
    # as given, matched no file and answered "No matches found"
    grep = create_grep_tool(str(tree), use_rg=use_rg)
    assert text(run(grep, pattern="needle", glob=glob)) == "src/main.py:2:needle = 1"


@needs_non_root
@pytest.mark.parametrize("use_rg", BACKENDS)
def test_grep_without_matches_in_a_folder_with_an_unreadable_file_finds_nothing(tree, use_rg):
    # ripgrep exits with 2 after skipping a file it may not read; with no match the tool took that
    # for a bad regex: "grep failed: ./secret.txt: Permission denied ...; check the regex"
    secret = tree / "src" / "secret.txt"
    secret.write_text("needle\n")
    secret.chmod(0o000)
    try:
        grep = create_grep_tool(str(tree), use_rg=use_rg)
        assert text(run(grep, pattern="haystack")) == "No matches found for haystack"
        assert "src/main.py:2:needle = 1" in text(run(grep, pattern="needle"))
    finally:
        secret.chmod(0o644)


@pytest.mark.parametrize("use_rg", BACKENDS)
def test_grep_invalid_regex_is_a_clear_error(tree, use_rg):
    with pytest.raises(ValueError, match="literal=true"):
        run(create_grep_tool(str(tree), use_rg=use_rg), pattern="(unclosed")


@pytest.mark.parametrize("use_rg", BACKENDS)
def test_grep_invalid_glob_is_named_as_the_glob_not_the_regex(tree, use_rg):
    # ripgrep's "error parsing glob" came with the advice "check the regex or pass literal=true"
    with pytest.raises(ValueError, match=r"glob '\[z-a\]'") as caught:
        run(create_grep_tool(str(tree), use_rg=use_rg), pattern="needle", glob="[z-a]")
    assert "regex" not in str(caught.value) and "literal" not in str(caught.value)


@pytest.mark.parametrize("use_rg", BACKENDS)
def test_grep_ignores_a_utf8_byte_order_mark_like_ripgrep(tmp_path, use_rg):
    # ripgrep drops the BOM; the Python search kept it in line 1, so "^import" missed the first
    # line of a file saved by a Windows editor and the line came back as "\ufeffimport os"
    (tmp_path / "a.py").write_bytes(b"\xef\xbb\xbfimport os\nimport sys\n")
    grep = create_grep_tool(str(tmp_path), use_rg=use_rg)
    assert text(run(grep, pattern="^import")) == "a.py:1:import os\na.py:2:import sys"
    assert text(run(grep, pattern="os$", path="a.py")) == "a.py:1:import os"


@pytest.mark.parametrize("use_rg", BACKENDS)
def test_grep_searches_utf16_files_with_a_byte_order_mark_like_ripgrep(tmp_path, use_rg):
    # ripgrep reads them as UTF-16 text; the Python search skipped them as binary (NUL bytes), and
    # both refused one named as the path: "it is a binary file", for a file rg can search
    (tmp_path / "out.txt").write_bytes("\ufeffbuild ok\r\nneedle found\r\n".encode("utf-16-le"))
    (tmp_path / "be.txt").write_bytes("\ufeffone\nneedle two".encode("utf-16-be"))
    grep = create_grep_tool(str(tmp_path), use_rg=use_rg)
    assert text(run(grep, pattern="^needle")) == "be.txt:2:needle two\nout.txt:2:needle found"
    assert text(run(grep, pattern="found$", path="out.txt")) == "out.txt:2:needle found"


def test_grep_of_a_utf16_file_leaves_no_unclosed_file_warning(tmp_path):
    # the Python search left the UTF-16 file's text wrapper to the garbage collector, which closed
    # the file under the tool and warned "ResourceWarning: unclosed file <_io.TextIOWrapper ...
    # encoding='utf-16'>": an error (a failed test) under -W error or pytest's unraisable check
    import gc
    import warnings

    (tmp_path / "out.txt").write_bytes("\ufeffbuild ok\r\nneedle found\r\n".encode("utf-16-le"))
    grep = create_grep_tool(str(tmp_path), use_rg=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert text(run(grep, pattern="needle")) == "out.txt:2:needle found"
        assert text(run(grep, pattern="o", limit=1)).startswith("out.txt:1:build ok\n\n[1 matches limit reached")
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


@pytest.mark.parametrize("use_rg", BACKENDS)
def test_grep_glob_with_a_leading_bang_excludes_files_and_folders(tree, use_rg):
    # ripgrep reads "!*.md" as "all but *.md" (and "!pkg" as "not inside pkg"); the Python search
    # took the "!" literally, matched no file and answered "No matches found"
    grep = create_grep_tool(str(tree), use_rg=use_rg)
    assert text(run(grep, pattern="needle", glob="!*.md")) == (
        "README:1:needle (the readme)\nsrc/main.py:2:needle = 1\nsrc/pkg/util.py:1:def needle():"
    )
    assert text(run(grep, pattern="needle", glob="!pkg")) == (
        "README:1:needle (the readme)\nsrc/main.py:2:needle = 1\nsrc/notes.md:1:a needle in markdown"
    )


@pytest.mark.parametrize("use_rg", BACKENDS)
@pytest.mark.parametrize("literal", [False, True])
def test_grep_pattern_spanning_lines_is_refused_saying_why(tree, use_rg, literal):
    # the Python search answered "No matches found" for text that is there (lines are matched one
    # at a time); ripgrep failed with advice to use a --multiline flag the tool does not have
    grep = create_grep_tool(str(tree), use_rg=use_rg)
    with pytest.raises(ValueError, match=r"^pattern contains a line break, but grep matches one line at a time"):
        run(grep, pattern="import os\nneedle = 1", literal=literal)


def test_grep_python_search_of_one_file_honours_an_abort(tmp_path):
    # with a file as its path the Python search never looked at the signal: an aborted grep of a
    # multi-GB log ran to the end and came back as an ordinary result
    (tmp_path / "app.log").write_text("nothing here\n" * 10_000)
    controller = AbortController()
    controller.abort()
    tool = create_grep_tool(str(tmp_path), use_rg=False)
    with pytest.raises(AbortError):
        tool.execute("c", {"pattern": "zzz", "path": "app.log"}, controller.signal, None)


@pytest.mark.parametrize("use_rg", BACKENDS)
def test_grep_of_a_huge_single_line_holds_a_bounded_part_of_it(tmp_path, use_rg):
    # both backends held a matching line whole, several times over (the Python search read it
    # with one readline; ripgrep's JSON carries it and was read, parsed and decoded whole): a 300 MB
    # minified bundle took 920 MB, a 2 GB line ran the process out of memory
    import tracemalloc

    with open(tmp_path / "bundle.js", "wb") as f:
        f.write(b"var a=1;" * (3 * 1024 * 1024) + b"needle\n")  # 24 MB in one line
        f.write("éé needle\n".encode())
        f.write(b"x" * 3_000_000 + b"\n")  # long, no match
        f.write(b"last needle")
    grep = create_grep_tool(str(tmp_path), use_rg=use_rg)
    tracemalloc.start()
    try:
        result = text(run(grep, pattern="needle$"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (
        result
        == f"bundle.js:1:{('var a=1;' * 63)[:500]}... [line truncated]\nbundle.js:2:éé needle\nbundle.js:4:last needle"
    )
    assert peak < 12 * 1024 * 1024, peak


@pytest.mark.parametrize("use_rg", BACKENDS)
def test_grep_of_a_huge_line_finds_a_match_running_to_a_piece_edge(tmp_path, use_rg):
    # the Python search took a match reaching a 1 MB piece's edge for a "$" at a false end and
    # dropped it; "import.*" starting early in the piece was then never searched again
    (tmp_path / "min.js").write_bytes(b"import" + b"x" * (3 * 1024 * 1024) + b"\nshort\n")
    (tmp_path / "end.txt").write_bytes(b"y" * (3 * 1024 * 1024) + b"tail\n")
    grep = create_grep_tool(str(tmp_path), use_rg=use_rg)
    assert text(run(grep, pattern="import.*", path="min.js")) == "min.js:1:import" + "x" * 494 + "... [line truncated]"
    assert text(run(grep, pattern="y$", path="end.txt")) == "No matches found for y$"
    assert text(run(grep, pattern="tail$", path="end.txt")).startswith("end.txt:1:yyy")


def test_grep_python_search_of_a_huge_single_line_honours_an_abort(tmp_path):
    # the abort was checked every 4096 lines: a multi-GB file without line breaks ran to its end
    (tmp_path / "dump.sql").write_bytes(b"INSERT INTO t VALUES (1);" * 400_000)  # 10 MB, one line
    controller = AbortController()
    checks: List[int] = []

    class CountingSignal:
        def __getattr__(self, name):
            return getattr(controller.signal, name)

        def raise_if_aborted(self):
            checks.append(1)
            if len(checks) == 3:  # the user aborts while the line is being searched
                controller.abort()
            controller.signal.raise_if_aborted()

    tool = create_grep_tool(str(tmp_path), use_rg=False)
    with pytest.raises(AbortError):
        tool.execute("c", {"pattern": "zzz", "path": "dump.sql"}, CountingSignal(), None)


def test_grep_backends_agree_on_a_larger_tree(tmp_path):
    if shutil.which("rg") is None:
        pytest.skip("ripgrep (rg) not installed")
    for d in range(5):
        folder = tmp_path / f"d{d}" / "inner"
        folder.mkdir(parents=True)
        for f in range(5):
            (folder / f"f{f}.txt").write_text("".join(f"row {i} {'hit' if i % 7 == 0 else ''}\n" for i in range(50)))
    python = text(run(create_grep_tool(str(tmp_path), use_rg=False), pattern=r"row \d+ hit", limit=1000))
    rg = text(run(create_grep_tool(str(tmp_path), use_rg=True), pattern=r"row \d+ hit", limit=1000))
    assert python == rg and python.count("\n") == 5 * 5 * 8 - 1


@pytest.mark.parametrize("use_rg", BACKENDS)
def test_grep_dollar_matches_at_the_end_of_crlf_lines_with_both_backends(tmp_path, use_rg):
    # ripgrep saw "foo\r" and found nothing for foo$; the Python backend strips "\r\n" and matched
    (tmp_path / "win.txt").write_bytes(b"def foo\r\nfoo bar\r\nunix foo\n")
    result = run(create_grep_tool(str(tmp_path), use_rg=use_rg), pattern="foo$")
    assert text(result) == "win.txt:1:def foo\nwin.txt:3:unix foo"


def test_grep_does_not_leave_the_root_through_symlinks(tree):
    outside = tree.parent / "outside.txt"
    outside.write_text("needle outside\n")
    (tree / "src" / "link.txt").symlink_to(outside)
    root_tool = create_grep_tool(str(tree), root=str(tree), use_rg=False)
    assert "outside" not in text(run(root_tool, pattern="needle"))


def test_grep_with_ripgrep_does_not_hang_on_lots_of_stderr(tmp_path, monkeypatch):
    # ripgrep reports each unreadable file on stderr; with thousands of them (a search over a home
    # folder) the stderr pipe filled up, rg blocked writing it and the tool waited forever on stdout.
    import json
    import sys
    import threading

    from agentcore.builtin_tools import create_grep_tool

    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "rg"
    match = {"type": "match", "data": {"path": {"text": "a.txt"}, "lines": {"text": "hello\n"}, "line_number": 1}}
    fake.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        "for i in range(4000):\n"
        "    sys.stderr.write(f'rg: ./dir{i}/file: Permission denied (os error 13)\\n')\n"
        "sys.stderr.flush()\n"
        f"print({json.dumps(json.dumps(match))})\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(bindir) + os.pathsep + os.environ.get("PATH", ""))
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("hello\n")
    tool = create_grep_tool(str(work), use_rg=True)
    box: List[object] = []
    worker = threading.Thread(target=lambda: box.append(tool.execute("c1", {"pattern": "hello"})), daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "grep hung: ripgrep blocked on a full stderr pipe"
    assert "a.txt:1:hello" in box[0].content[0].text


def test_grep_with_ripgrep_skips_an_unreadable_file_instead_of_failing(tmp_path, monkeypatch):
    # what rg 13 prints, run as a user who may not read src/secret.txt, for a pattern found
    # nowhere: its summary, one error line, exit code 2. The tool raised "grep failed: ...
    # Permission denied ...; check the regex" for every search without a match.
    # (The same case with a real unreadable file: the @needs_non_root test above.)
    import json
    import sys

    summary = {"type": "summary", "data": {"stats": {"matches": 0, "searches": 0}}}
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "rg"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        f"print({json.dumps(json.dumps(summary))})\n"
        "sys.stderr.write('./src/secret.txt: Permission denied (os error 13)\\n')\n"
        "sys.exit(2)\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(bindir) + os.pathsep + os.environ.get("PATH", ""))
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "src" / "a.txt").write_text("hello\n")
    tool = create_grep_tool(str(work), use_rg=True)
    assert text(run(tool, pattern="haystack")) == "No matches found for haystack"


# --------------------------------------------------------------------------- special files

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes (os.mkfifo) need a POSIX system")


def _call_guarded(fifo: Path, call: Callable[[], Any]) -> Any:
    """``call()`` on a thread; fails instead of hanging when it blocks opening ``fifo``."""
    box: List[Any] = []

    def go() -> None:
        try:
            box.append(call())
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            box.append(exc)

    worker = threading.Thread(target=go, daemon=True)
    worker.start()
    worker.join(10)  # a hang guard, not a timing: the fixed tools never open the pipe
    if worker.is_alive():
        # the reader is blocked in open(): a writer opening and closing the pipe releases it
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(10)
        pytest.fail(f"blocked opening the named pipe {fifo.name}")
    return box[0]


@pytest.fixture
def with_fifo(tmp_path):
    (tmp_path / "a.txt").write_text("needle\n")
    os.mkfifo(tmp_path / "pipe")
    return tmp_path


@needs_fifo
@pytest.mark.parametrize("use_rg", BACKENDS)
def test_grep_skips_a_named_pipe_in_the_tree(with_fifo, use_rg):
    # the Python backend blocked forever in open() on the FIFO, and abort could not stop it
    result = _call_guarded(
        with_fifo / "pipe", lambda: run(create_grep_tool(str(with_fifo), use_rg=use_rg), pattern="needle")
    )
    assert text(result) == "a.txt:1:needle"


@needs_fifo
@pytest.mark.parametrize("use_rg", BACKENDS)
def test_grep_refuses_a_named_pipe_as_its_path(with_fifo, use_rg):
    grep = create_grep_tool(str(with_fifo), use_rg=use_rg)
    result = _call_guarded(with_fifo / "pipe", lambda: run(grep, pattern="needle", path="pipe"))
    assert isinstance(result, ValueError) and "pipe is a named pipe (FIFO), not a regular file" in str(result)


@needs_fifo
@pytest.mark.parametrize(
    "make_tool, args",
    [
        pytest.param(create_read_tool, {}, id="read"),
        pytest.param(create_edit_tool, {"edits": [{"oldText": "a", "newText": "b"}]}, id="edit"),
        pytest.param(create_write_tool, {"content": "x"}, id="write"),
    ],
)
def test_file_tools_refuse_a_named_pipe_naming_what_it_is(with_fifo, make_tool, args):
    # read and edit blocked forever opening it; write replaced the pipe with a plain file
    result = _call_guarded(with_fifo / "pipe", lambda: make_tool(str(with_fifo)).execute("c", {"path": "pipe", **args}))
    assert isinstance(result, ValueError), result
    assert "pipe is a named pipe (FIFO), not a regular file" in str(result)
    assert stat.S_ISFIFO(os.stat(with_fifo / "pipe").st_mode)


@pytest.mark.skipif(not os.path.exists("/dev/null"), reason="needs the /dev/null character device")
def test_read_and_edit_refuse_a_device():
    for tool, args in ((create_read_tool("/"), {}), (create_edit_tool("/"), {"oldText": "a", "newText": "b"})):
        with pytest.raises(ValueError, match="/dev/null is a character device, not a regular file"):
            tool.execute("c", {"path": "/dev/null", **args})


# --------------------------------------------------------------------------- through the agent loop


def test_tools_in_an_agent_run_with_the_scripted_model(tmp_path):
    # agent-loop §2.7-§2.8: prepare_arguments runs before validation; a raising tool becomes an
    # error result whose text is the exception message.
    from agentcore import Agent
    from agentcore.testing import ScriptedModel, call, response
    from agentcore.testing import text as say

    (tmp_path / "notes.txt").write_text("colour\n")
    model = ScriptedModel(
        [
            response(
                call("edit", {"path": "notes.txt", "oldText": "colour", "newText": "color"}),
                call("bash", {"command": "cat notes.txt; exit 1"}),
            ),
            say("done"),
        ]
    )
    agent = Agent(model.model, tools=create_coding_tools(root=str(tmp_path)), stream_fn=model.stream_fn)
    agent.prompt("fix the spelling")
    results = {m.tool_name: m for m in agent.state.messages if m.role == "toolResult"}
    assert results["edit"].is_error is False and "-colour\n+color\n" in results["edit"].details["diff"]
    assert results["bash"].is_error is True
    assert results["bash"].content[0].text.endswith("Command exited with code 1")
    assert (tmp_path / "notes.txt").read_text() == "color\n"


def test_coding_agent_example_runs_offline():
    import subprocess
    import sys

    example = Path(__file__).resolve().parents[1] / "examples" / "coding_agent.py"
    done = subprocess.run([sys.executable, str(example)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "2 + 3 = 5" in done.stdout

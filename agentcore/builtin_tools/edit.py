"""The ``edit`` tool: exact text replacements in one file, all or nothing.

Arguments: ``path`` and ``edits``, a list of ``{"oldText", "newText"}``. ``prepare_arguments``
also accepts ``old_text``/``new_text`` keys and a single top-level ``oldText``/``newText`` pair.

Every ``oldText`` is looked up in the file as it was before this call (not after earlier edits of
the same call) and must occur exactly once; edits must not overlap. If any edit fails (not found,
found several times, overlapping, empty, no change at all, or a ``newText`` holding a lone UTF-16
surrogate, which UTF-8 cannot encode) the tool raises and the file is not touched. Bytes outside
the replaced text are written back exactly as they were, and the UTF-8 byte-order mark is kept
(a file starting with a UTF-16 byte-order mark, which ``read`` shows as text, is edited as UTF-16
and keeps its mark and byte order). Line endings: in a file whose line breaks are all CRLF, ``\\r\\n`` and
``\\n`` in the edits both match a CRLF and new lines get CRLF; in a file without CRLF, ``\\r\\n``
in the edits is read as ``\\n``; in a file mixing both, the edits must match the file's bytes
(``\\r\\n`` where it has CRLF). A lone ``\\r`` is never changed. The file is replaced atomically;
a file this process may not write is refused (``PermissionError``), not replaced.
``details`` carries a unified ``diff`` (difflib) of the bytes written, a last line without a line
break marked ``\\ No newline at end of file`` as ``diff -u`` marks it, and ``firstChangedLine``
(1-based, in the new file). A file over 32 MB is refused (``EditError``, before anything is
matched) rather than loaded: an edit holds the file in memory about ten times over (decoded,
matched, diffed), so a huge log or a sparse disk image would exhaust the process's memory.
"""

from __future__ import annotations

import codecs
import difflib
import os
import shlex
from typing import IO, Any, Callable, Dict, List, Mapping, Optional, Tuple

from ..tools import AgentTool, AgentToolResult
from ..types import TextContent
from ._args import utf8
from ._paths import PathResolver, file_lock, open_regular_file, require_file
from ._truncate import format_size
from .write import atomic_write

__all__ = ["create_edit_tool", "normalize_edit_arguments", "apply_edits", "EditError"]


class EditError(ValueError):
    """An edit could not be applied; the file was left unchanged."""


_MAX_FILE_BYTES = 32 * 1024 * 1024  # a file is held about ten times over while it is edited


def _read_at_most(f: IO[bytes], shown: str) -> bytes:
    """The whole file ``f``; raises :class:`EditError` for one over :data:`_MAX_FILE_BYTES`, of
    which no more than that is read (the size a sparse file or one still growing claims is not
    trusted, and ``/proc`` files claim none)."""
    raw = f.read(_MAX_FILE_BYTES + 1)
    if len(raw) > _MAX_FILE_BYTES:
        size = max(os.fstat(f.fileno()).st_size, len(raw))
        raise EditError(
            f"Cannot edit {shown}: it is {format_size(size)}, more than the {format_size(_MAX_FILE_BYTES)} "
            "edit loads into memory; change it with bash instead (sed -i, or a script)"
        )
    return raw


def _pick(d: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        if key in d:
            return d[key]
    return None


def normalize_edit_arguments(raw: Any) -> Any:
    """Return a new dict in the canonical shape (``edits`` of ``oldText``/``newText``).

    Accepts ``old_text``/``new_text`` spellings and a top-level single pair; anything it does not
    recognise is passed through unchanged for schema validation to report.
    """
    if not isinstance(raw, Mapping):
        return raw
    args = dict(raw)
    single_old = _pick(args, "oldText", "old_text")
    single_new = _pick(args, "newText", "new_text")
    for key in ("oldText", "old_text", "newText", "new_text"):
        args.pop(key, None)
    edits = args.get("edits")
    edits = list(edits) if isinstance(edits, (list, tuple)) else ([] if edits is None else edits)
    if isinstance(edits, list):
        edits = [
            {"oldText": _pick(e, "oldText", "old_text"), "newText": _pick(e, "newText", "new_text")}
            if isinstance(e, Mapping)
            else e
            for e in edits
        ]
        if single_old is not None or single_new is not None:
            edits.append({"oldText": single_old, "newText": single_new})
    args["edits"] = edits
    return args


def _lf(text: str) -> str:
    return text.replace("\r\n", "\n")  # never a lone "\r": it may be data (a string literal)


def _line_endings(text: str) -> str:
    """``"crlf"`` when every line break is CRLF, ``"lf"`` when none is, ``"mixed"`` otherwise.

    Only for ``"crlf"`` can the text be matched LF-normalised and restored byte for byte.
    """
    crlf = text.count("\r\n")
    if not crlf:
        return "lf"
    return "crlf" if crlf == text.count("\n") else "mixed"


def _occurrences(content: str, old: str) -> int:
    """How often ``old`` occurs in ``content``, overlapping matches included (``str.count`` skips
    them: ``"}\\n}\\n"`` occurs twice in ``"}\\n}\\n}\\n"``, which would make the edit ambiguous)."""
    count, at = 0, content.find(old)
    while at >= 0:
        count += 1
        at = content.find(old, at + 1)
    return count


def _label(i: int, count: int) -> str:
    return "oldText" if count == 1 else f"edits[{i}].oldText"


def apply_edits(
    content: str, edits: List[Mapping[str, Any]], shown: str = "the file", *, lf_edits: bool = True
) -> Tuple[str, int]:
    """Apply ``edits`` to ``content``; return the new text and how many were applied.

    With ``lf_edits`` (for LF-normalised ``content``) a CRLF in ``oldText``/``newText`` is read as
    ``\\n``; without it the texts are used as given. Raises :class:`EditError` naming the failing edit.
    """
    if not edits:
        raise EditError("no edits given: pass edits=[{oldText, newText}, ...]")
    spans: List[Tuple[int, int, str, int]] = []
    for i, edit in enumerate(edits):
        if not isinstance(edit, Mapping):
            raise EditError(f"edits[{i}] must be an object with oldText and newText")
        old, new = edit.get("oldText"), edit.get("newText")
        if not isinstance(old, str) or not isinstance(new, str):
            raise EditError(f"edits[{i}] needs string oldText and newText")
        if lf_edits:
            old, new = _lf(old), _lf(new)
        name = _label(i, len(edits))
        utf8(new, f"edits[{i}].newText", EditError)  # before anything is matched or written
        if not old:
            raise EditError(f"{name} is empty in {shown}; quote the exact text to replace")
        count = _occurrences(content, old)
        if count == 0:
            raise EditError(
                f"Could not find {name} in {shown}. It must match exactly, including whitespace "
                "and line breaks; read the file again and copy the text."
            )
        if count > 1:
            raise EditError(
                f"Found {count} occurrences of {name} in {shown}; it must match exactly once. "
                "Include more surrounding lines to make it unique."
            )
        start = content.index(old)
        spans.append((start, start + len(old), new, i))
    spans.sort()
    for (_, e1, _, i1), (s2, _, _, i2) in zip(spans, spans[1:]):
        if s2 < e1:
            raise EditError(f"edits[{i1}] and edits[{i2}] overlap in {shown}; merge them into one edit")
    parts, pos = [], 0
    for start, end, new, _ in spans:
        parts += [content[pos:start], new]
        pos = end
    parts.append(content[pos:])
    result = "".join(parts)
    if result == content:
        raise EditError(f"No changes made to {shown}: every newText equals its oldText")
    return result, len(spans)


def _encoding_of(raw: bytes) -> Tuple[str, bytes]:
    """``(codec, byte-order mark)`` of a file's bytes: UTF-16 (little or big endian) after its
    mark, as ``read`` shows such a file; else UTF-8 (whose own mark stays in the text)."""
    if raw.startswith(codecs.BOM_UTF16_LE):
        return "utf-16-le", raw[:2]
    if raw.startswith(codecs.BOM_UTF16_BE):
        return "utf-16-be", raw[:2]
    return "utf-8", b""


def _lines(text: str) -> List[str]:
    """Lines ending in ``\\n`` (kept), as ``read`` numbers them; unlike ``str.splitlines`` a lone
    ``\\r`` (or ``\\f``, ``\\u2028``...) does not start a new line."""
    lines = text.split("\n")
    last = lines.pop()
    return [line + "\n" for line in lines] + ([last] if last else [])


def _diff(old: str, new: str, shown: str) -> Tuple[str, Optional[int]]:
    old_lines, new_lines = _lines(old), _lines(new)
    diff = "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"  # as diff -u marks it
        for line in difflib.unified_diff(old_lines, new_lines, f"a/{shown}", f"b/{shown}", n=3)
    )
    # The first line where the texts differ (what a Myers diff reports). Not SequenceMatcher with
    # autojunk=False: it is about quadratic on files with many repeated lines.
    if old_lines == new_lines:
        return diff, None
    first = next(
        (i for i, (a, b) in enumerate(zip(old_lines, new_lines)) if a != b), min(len(old_lines), len(new_lines))
    )
    return diff, first + 1


def create_edit_tool(cwd: Optional[str] = None, *, root: Optional[str] = None) -> AgentTool:
    """An ``edit`` tool resolving paths against ``cwd`` and, when given, confined to ``root``."""
    paths = PathResolver(cwd, root)

    def execute(
        tool_call_id: str,
        args: Mapping[str, Any],
        signal: Any = None,
        on_update: Optional[Callable[[AgentToolResult], None]] = None,
    ) -> AgentToolResult:
        args = normalize_edit_arguments(args)
        shown: Any = args.get("path")  # the schema requires it; resolve() names a bad value
        target = paths.resolve(shown)
        if signal is not None:
            signal.raise_if_aborted()
        require_file(target, shown, "; pass a file path")
        with file_lock(target):
            with open_regular_file(target, shown) as f:
                raw = _read_at_most(f, shown)
            codec, mark = _encoding_of(raw)
            try:
                text = raw[len(mark) :].decode(codec)
            except UnicodeDecodeError:
                name = "UTF-8" if codec == "utf-8" else "UTF-16"
                raise EditError(f"{shown} is not {name} text; edit it with bash instead") from None
            bom = "\ufeff" if text.startswith("\ufeff") else ""
            body = text[len(bom) :]
            endings = _line_endings(body)
            edits = args.get("edits")
            if not isinstance(edits, list):
                raise EditError("edits must be a list of {oldText, newText} objects")
            if endings == "crlf":
                new, count = apply_edits(_lf(body), edits, shown)
                new = new.replace("\n", "\r\n")
            else:
                try:
                    new, count = apply_edits(body, edits, shown, lf_edits=endings == "lf")
                except EditError as exc:
                    if endings == "mixed" and str(exc).startswith("Could not find"):
                        raise EditError(  # read hides the "\r", so it cannot show where they are
                            f"{exc} Note: {shown} mixes CRLF and LF line endings, so oldText must have "
                            "\\r\\n where the file has CRLF; read does not show them, list the CRLF lines "
                            f"with bash: grep -n $'\\r$' {shlex.quote(shown)}"
                        ) from None
                    raise
            if signal is not None:
                signal.raise_if_aborted()
            atomic_write(target, mark + (bom + new).encode(codec))
        diff, first = _diff(body, new, shown)
        noun = "edit" if count == 1 else "edits"
        details: Dict[str, Any] = {"diff": diff, "firstChangedLine": first}
        return AgentToolResult(
            content=[TextContent(f"Successfully applied {count} {noun} to {shown}.")], details=details
        )

    return AgentTool(
        name="edit",
        label="edit",
        description=(
            "Edit a file by replacing exact text. Each edits[].oldText must match exactly once in the "
            "original file (including whitespace); edits must not overlap. All edits apply or none do."
        ),
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Path to the file (relative to the working directory)"},
                "edits": {
                    "type": "array",
                    "minItems": 1,
                    "description": "Replacements, each matched against the original file",
                    "items": {
                        "type": "object",
                        "properties": {
                            "oldText": {"type": "string", "description": "Exact text to replace (unique in the file)"},
                            "newText": {"type": "string", "description": "Replacement text"},
                        },
                        "required": ["oldText", "newText"],
                    },
                },
            },
            "required": ["path", "edits"],
        },
        execute=execute,
        prepare_arguments=normalize_edit_arguments,
    )

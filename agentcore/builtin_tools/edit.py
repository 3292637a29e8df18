"""The ``edit`` tool: exact text replacements in one file, all or nothing.

Arguments: ``path`` and ``edits``, a list of ``{"oldText", "newText"}``. ``prepare_arguments``
also accepts ``old_text``/``new_text`` keys and a single top-level ``oldText``/``newText`` pair.

Every ``oldText`` is looked up in the file as it was before this call (not after earlier edits of
the same call) and must occur exactly once; edits must not overlap. If any edit fails (not found,
found several times, overlapping, empty, or no change at all) the tool raises and the file is not
touched. Line endings are compared as ``\\n`` and the file keeps its own (CRLF files stay CRLF) and
its UTF-8 byte-order mark. The file is replaced atomically. ``details`` carries a unified
``diff`` (difflib) and ``firstChangedLine`` (1-based, in the new file).
"""

from __future__ import annotations

import difflib
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ..tools import AgentTool, AgentToolResult
from ..types import TextContent
from ._paths import PathResolver, file_lock, require_file
from .write import atomic_write

__all__ = ["create_edit_tool", "normalize_edit_arguments", "apply_edits", "EditError"]


class EditError(ValueError):
    """An edit could not be applied; the file was left unchanged."""


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
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _line_ending(text: str) -> str:
    """The file's line ending, judged by its first line break (the reference rule)."""
    i = text.find("\n")
    return "\r\n" if i > 0 and text[i - 1] == "\r" else "\n"


def _label(i: int, count: int) -> str:
    return "oldText" if count == 1 else f"edits[{i}].oldText"


def apply_edits(content: str, edits: List[Mapping[str, Any]], shown: str = "the file") -> Tuple[str, int]:
    """Apply ``edits`` to LF-normalised ``content``; return the new text and how many were applied.

    Raises :class:`EditError` naming the failing edit.
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
        old, new = _lf(old), _lf(new)
        name = _label(i, len(edits))
        if not old:
            raise EditError(f"{name} is empty in {shown}; quote the exact text to replace")
        count = content.count(old)
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


def _diff(old: str, new: str, shown: str) -> Tuple[str, Optional[int]]:
    old_lines, new_lines = old.splitlines(keepends=True), new.splitlines(keepends=True)
    diff = "".join(difflib.unified_diff(old_lines, new_lines, f"a/{shown}", f"b/{shown}", n=3))
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
            with open(target, "rb") as f:
                raw = f.read()
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise EditError(f"{shown} is not UTF-8 text; edit it with bash instead") from None
            bom = "\ufeff" if text.startswith("\ufeff") else ""
            body = text[len(bom) :]
            ending = _line_ending(body)
            old = _lf(body)
            edits = args.get("edits")
            if not isinstance(edits, list):
                raise EditError("edits must be a list of {oldText, newText} objects")
            new, count = apply_edits(old, edits, shown)
            if signal is not None:
                signal.raise_if_aborted()
            final = bom + (new.replace("\n", "\r\n") if ending == "\r\n" else new)
            atomic_write(target, final.encode("utf-8"))
        diff, first = _diff(old, new, shown)
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

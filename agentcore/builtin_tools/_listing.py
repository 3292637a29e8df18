"""A capped list of result lines (``find`` paths, ``grep`` matches) as one tool result.

At most ``most`` lines are taken from a lazy source, so a walk or a search stops as soon as the
limit is passed; the text is then cut at :data:`~._truncate.DEFAULT_MAX_BYTES` between two lines
(whole results: a file name holding a newline is one result).
A final notice says which limit was hit and how to see more (when the byte cap cut the text, how
many lines were shown of how many: a higher ``limit`` would not help); ``details`` records it
(``limitReached``, ``truncation``).
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Tuple

from ..tools import AgentToolResult
from ..types import TextContent
from ._truncate import DEFAULT_MAX_BYTES, truncate_items

__all__ = ["take_at_most", "listing_result"]


def take_at_most(items: Iterable[str], most: int) -> Tuple[List[str], bool]:
    """The first ``most`` items and whether there was at least one more (reads one item past ``most``)."""
    taken: List[str] = []
    for item in items:
        if len(taken) == most:
            return taken, True
        taken.append(item)
    return taken, False


def listing_result(lines: List[str], details: Dict[str, Any], most: int, more: bool, noun: str) -> AgentToolResult:
    """``lines`` (non-empty) joined and byte-capped, with a notice; ``noun`` names them (``"matches"``)."""
    cut = truncate_items(lines, DEFAULT_MAX_BYTES)
    text = cut.content
    if cut.truncated:  # a higher limit would not show more: say how many were shown
        found = f"{len(lines)}+" if more else str(len(lines))
        text += (
            f"\n\n[output cut at {DEFAULT_MAX_BYTES // 1024}KB: {cut.output_lines} of {found} {noun} shown; "
            "refine the pattern or path]"
        )
        details["truncation"] = cut.to_dict()
    elif more:
        text += f"\n\n[{most} {noun} limit reached. Use limit={most * 2} for more, or refine the pattern]"
    if more:
        details["limitReached"] = most
    return AgentToolResult(content=[TextContent(text)], details=details)

"""Small checks for tool arguments that JSON-schema validation may not have coerced."""

from __future__ import annotations

from typing import Any, Mapping, Optional

__all__ = ["positive_int"]


def positive_int(args: Mapping[str, Any], key: str) -> Optional[int]:
    """``args[key]`` as an int >= 1, None when absent; raises ``ValueError`` naming the key."""
    value = args.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) or value < 1:
        raise ValueError(f"{key} must be a whole number of at least 1, got {value!r}")
    return int(value)

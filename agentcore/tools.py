"""Tools: ``AgentTool`` (what the model can call), ``AgentToolResult`` and argument validation.

A tool reports failure by raising; the loop turns the exception into an error tool result.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

__all__ = ["AgentTool", "AgentToolResult", "validate_tool_arguments"]


@dataclass
class AgentToolResult:
    """What ``execute`` returns. ``terminate=True`` asks the loop not to call the model again
    after this batch (honoured only when every result of the batch says so)."""

    content: List[Any] = field(default_factory=list)
    details: Any = None
    usage: Any = None
    added_tool_names: Optional[List[str]] = None
    terminate: Optional[bool] = None


@dataclass
class AgentTool:
    """A tool the model can call.

    ``execute(tool_call_id, args, signal, on_update) -> AgentToolResult`` runs it; ``parameters`` is
    a JSON schema; ``prepare_arguments(raw_args) -> args`` is an optional shim applied before
    validation; ``execution_mode="sequential"`` forces the whole batch it appears in to run one call
    at a time.
    """

    name: str
    description: str
    parameters: Dict[str, Any]
    execute: Callable[..., AgentToolResult]
    label: Optional[str] = None
    prepare_arguments: Optional[Callable[[Any], Any]] = None
    execution_mode: Optional[str] = None

    def __post_init__(self) -> None:
        if self.label is None:
            self.label = self.name


def validate_tool_arguments(tool: AgentTool, args: Any) -> Any:
    """Validate ``args`` against ``tool.parameters`` and return a validated deep copy.

    Raises ``ValueError`` whose first line is ``Validation failed for tool "<name>":``, followed by
    one ``  - <path>: <message>`` line per error, a blank line and the received arguments as JSON.
    """
    from jsonschema import Draft202012Validator  # imported on first use: keeps import agentcore fast

    cloned = copy.deepcopy(args)
    errors = sorted(Draft202012Validator(tool.parameters or {}).iter_errors(cloned), key=lambda e: list(e.path))
    if not errors:
        return cloned
    lines = [f'Validation failed for tool "{tool.name}":']
    for err in errors:
        path = "/".join(str(p) for p in err.path) or "root"
        lines.append(f"  - {path}: {err.message}")
    lines += ["", "Received arguments:", json.dumps(args, indent=2, default=str)]
    raise ValueError("\n".join(lines))

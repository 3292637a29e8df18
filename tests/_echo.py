"""The echo tool of spec agent-loop §5, shared by the ``echo``/``make_echo`` fixtures and tests.

Tests import it by bare module name (``from _echo import Echo``): ``tests/`` is on ``sys.path``
through ``pythonpath`` in pyproject.toml's ``[tool.pytest.ini_options]``.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional

from agentcore.tools import AgentTool, AgentToolResult
from agentcore.types import TextContent

ECHO_SCHEMA = {"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]}


class Echo:
    """The echo tool of spec §5 plus the list of values it executed."""

    def __init__(
        self,
        name: str = "echo",
        execution_mode: Optional[str] = None,
        before: Optional[Callable[[Any], None]] = None,
        terminate: Optional[Callable[[str], Any]] = None,
    ) -> None:
        self.executed: List[Any] = []
        self._before = before
        self._terminate = terminate
        self.tool = AgentTool(
            name=name,
            description="Echo a value back",
            parameters=ECHO_SCHEMA,
            execute=self.execute,
            execution_mode=execution_mode,
        )

    def execute(self, tool_call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        if self._before is not None:
            self._before(args)
        self.executed.append(args["value"])
        terminate = self._terminate(args["value"]) if self._terminate else None
        return AgentToolResult(
            content=[TextContent(f"echoed: {args['value']}")], details={"value": args["value"]}, terminate=terminate
        )

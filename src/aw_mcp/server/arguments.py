"""Check tool arguments against the tool's inputSchema before anything is simulated.

The low-level MCP server passes arguments through unchecked; an agent that sends a bad call
must get an ``isError`` result that says exactly what is wrong, as a real server would.
"""

from __future__ import annotations

from typing import Any

from aw_mcp.json_schemas import schema_errors


def argument_errors(schema: dict[str, Any], arguments: Any) -> list[str]:
    """Human-readable problems with ``arguments``; empty when they are valid."""
    if not isinstance(arguments, dict):
        return [f"arguments must be a JSON object, got {type(arguments).__name__}"]
    return schema_errors(schema, arguments)

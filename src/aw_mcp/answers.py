"""What a simulated tool returns, before it becomes an MCP ``CallToolResult``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class ToolAnswer(BaseModel):
    text: str
    structured: Any | None = None  # set only for tools with an outputSchema, and then valid
    is_error: bool = False

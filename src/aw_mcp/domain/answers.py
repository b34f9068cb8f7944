"""What a simulated tool returns, before it becomes an MCP ``CallToolResult``."""

from __future__ import annotations

from typing import Any

from mcp_types import ContentBlock
from pydantic import BaseModel, TypeAdapter

# Validates one MCP content block (text, image, audio, resource link, embedded resource).
CONTENT_BLOCK: TypeAdapter[ContentBlock] = TypeAdapter(ContentBlock)


class ToolAnswer(BaseModel):
    text: str
    structured: Any | None = None  # set only for tools with an outputSchema, and then valid
    is_error: bool = False
    # The result's MCP content blocks when they are more than ``text`` (image, audio, embedded
    # resource): only canned answers (a fault scenario's ``result`` effect) carry them; ``text``
    # then summarises them for records and the episode's history.
    content: list[dict[str, Any]] | None = None

"""Check tool arguments against the tool's inputSchema before anything is simulated.

The low-level MCP server passes arguments through unchecked; an agent that sends a bad call
must get an ``isError`` result that says exactly what is wrong, as a real server would.
Arguments over the size limit are refused first, before anything else reads them: a 3 MB
argument would otherwise be validated, echoed in error messages, recorded and tokenized.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from aw_mcp.domain.models import WorldSpec
from aw_mcp.json_schemas import schema_errors


def argument_errors(schema: dict[str, Any], arguments: Any) -> list[str]:
    """Human-readable problems with ``arguments``; empty when they are valid."""
    if not isinstance(arguments, dict):
        return [f"arguments must be a JSON object, got {type(arguments).__name__}"]
    return schema_errors(schema, arguments)


def argument_bytes(arguments: Any) -> int:
    """Size of ``arguments`` as compact JSON in UTF-8 (what a client sends, give or take)."""
    text = json.dumps(arguments, separators=(",", ":"), ensure_ascii=False, default=repr)
    return len(text.encode("utf-8", "surrogatepass"))


def oversize_error(tool: str, arguments: Any, limit: int) -> str | None:
    """The refusal of arguments over ``limit`` bytes; None when they fit."""
    size = argument_bytes(arguments)
    if size <= limit:
        return None
    return (
        f"Arguments too large for tool {tool}: {size} bytes of JSON, and this server accepts "
        f"at most {limit} bytes (--max-argument-bytes). Send less data in one call."
    )


def oversize_summary(arguments: Any, preview_chars: int = 200) -> dict[str, Any]:
    """What the record keeps of refused oversized arguments: their size and a preview."""
    text = json.dumps(arguments, ensure_ascii=False, default=repr)
    return {"_bytes": argument_bytes(arguments), "_preview": text[:preview_chars]}


def parse_world(world: Any) -> tuple[WorldSpec | None, list[str]]:
    """A client's ``_meta`` world as a ``WorldSpec``, or None and what is wrong with it."""
    try:
        return WorldSpec.model_validate(world), []
    except ValidationError as exc:
        problems = [f"{'.'.join(map(str, e['loc'])) or 'world'}: {e['msg']}" for e in exc.errors()]
        return None, problems

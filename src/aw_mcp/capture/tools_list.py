"""``aw-mcp capture``: connect to a real MCP server as a client and save its ``tools/list``,
and its resources, resource templates and prompts when it offers them.

The file has the shape of the captures in tests/data/tool-surfaces, ``{"tools": [...]}`` with the
wire's camelCase field names (plus ``resources``, ``resourceTemplates`` and ``prompts`` lists
for a server that has them), so ``aw-mcp serve --tools-from FILE.json`` mirrors the server.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from aw_mcp.errors import AwMcpError


class CaptureError(AwMcpError):
    """The server could not be reached or did not answer tools/list."""


def stdio_target(
    command: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
) -> StdioServerParameters:
    """Launch ``command`` with this process's environment plus ``env`` (servers need keys)."""
    if not command:
        raise CaptureError("no server command given (aw-mcp capture --out F.json -- CMD ARGS)")
    return StdioServerParameters(
        command=command[0], args=command[1:], env={**os.environ, **(env or {})}, cwd=cwd
    )


async def capture_tools(
    target: str | StdioServerParameters, timeout: float = 60.0
) -> dict[str, Any]:
    """The server's complete ``tools/list`` (all pages) as wire JSON: ``{"tools": [...]}``,
    with ``resources``, ``resourceTemplates`` and ``prompts`` (all pages) when it offers them."""
    capture: dict[str, Any] = {}
    try:
        with anyio.fail_after(timeout):
            async with Client(target) as client:
                capture["tools"] = await _all_pages(client.list_tools, "tools")
                offered = client.server_capabilities
                if offered.resources is not None:
                    capture["resources"] = await _all_pages(client.list_resources, "resources")
                    capture["resourceTemplates"] = await _all_pages(
                        client.list_resource_templates, "resource_templates"
                    )
                if offered.prompts is not None:
                    capture["prompts"] = await _all_pages(client.list_prompts, "prompts")
    except TimeoutError:
        raise CaptureError(
            f"no complete tools/list from {_describe(target)} within {timeout:g}s"
        ) from None
    except OSError as exc:
        raise CaptureError(f"could not start or reach {_describe(target)}: {exc}") from exc
    except Exception as exc:  # the SDK raises several types for a server that misbehaves
        raise CaptureError(f"a list request failed on {_describe(target)}: {exc}") from exc
    return {key: items for key, items in capture.items() if items or key == "tools"}


async def _all_pages(list_page: Callable[..., Awaitable[Any]], field: str) -> list[dict[str, Any]]:
    """Every item of a paginated list request, as wire JSON."""
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        page = await list_page(cursor=cursor, cache_mode="bypass")
        items += [
            item.model_dump(by_alias=True, exclude_none=True, mode="json")
            for item in getattr(page, field)
        ]
        cursor = page.next_cursor
        if not cursor:
            return items


def write_capture(capture: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(capture, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _describe(target: str | StdioServerParameters) -> str:
    if isinstance(target, str):
        return target
    return " ".join([target.command, *target.args])

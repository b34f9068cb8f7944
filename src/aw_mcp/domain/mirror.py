"""Mirror any MCP server: serve the tools of a captured ``tools/list`` as a simulated domain.

``aw-mcp serve --tools-from FILE.json`` reads a file shaped like a ``tools/list`` result,
``{"tools": [{"name", "description", "inputSchema", "outputSchema", "annotations", ...}]}``
(what ``aw-mcp capture`` writes, and the files in tests/data/tool-surfaces), and serves those
tools with their names and schemas unchanged. The domain is named after the file stem
(``github.json`` -> ``github``) and takes its world-model instructions, world facts and
generation settings from the bundled ``mcp`` domain, which is written for any tool API.
A tool may carry our own ``simulation`` block (guidance, max_tokens, and the ``json_text``
hints that ``aw-mcp generate`` learns from its records) to steer the model.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from mcp_types import Resource, ResourceTemplate
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from aw_mcp.domain.loader import load_domain
from aw_mcp.domain.models import DomainSpec, PromptSpec, ToolSpec
from aw_mcp.files.yaml import DataFileError, line_finder, read_data_file, validation_problems
from aw_mcp.json_schemas import schema_errors

# The bundled domain whose instructions and world every mirrored tool list uses.
MIRROR_TEMPLATE_DOMAIN = "mcp"


class CapturedTool(ToolSpec):
    """A tool as a real server lists it: wire fields we do not serve (``execution``,
    ``icons``, ``_meta``) are dropped instead of refused."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class ToolsListFile(BaseModel):
    """A captured ``tools/list`` result (extra keys such as ``nextCursor`` are ignored), and
    the server's resources, resource templates and prompts when the capture has them."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    tools: list[CapturedTool] = Field(min_length=1)
    resources: list[Resource] = Field(default_factory=list)
    resource_templates: list[ResourceTemplate] = Field(
        default_factory=list, alias="resourceTemplates"
    )
    prompts: list[PromptSpec] = Field(default_factory=list)


def load_tools_file(path: Path | str) -> list[ToolSpec]:
    """The tools of a capture file; raise DataFileError naming the file, line or tool."""
    return list(load_capture_file(path).tools)


def load_capture_file(path: Path | str) -> ToolsListFile:
    """A capture file; raise DataFileError naming the file, line or tool."""
    text = read_data_file(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataFileError(path, [(exc.lineno, f"invalid JSON: {exc.msg}")]) from None
    if isinstance(data, dict) and isinstance(data.get("result"), dict):
        data = data["result"]  # a raw JSON-RPC response
    if not isinstance(data, dict) or "tools" not in data:
        raise DataFileError(path, [(None, 'expected a tools/list result: {"tools": [...]}')])
    try:
        return ToolsListFile.model_validate(data)
    except ValidationError as exc:

        def tool_named(loc: tuple[int | str, ...]) -> str:
            if len(loc) >= 2 and loc[0] == "tools" and isinstance(loc[1], int):
                entry = data["tools"][loc[1]]
                if isinstance(entry, dict):
                    return f" (tool {entry.get('name', '?')!r})"
            return ""

        problems = validation_problems(exc, line_finder(text), describe=tool_named)
        raise DataFileError(path, problems) from None


def mirror_domain_name(path: Path | str) -> str:
    """``Brave Search.json`` -> ``brave-search``: the file stem as a domain name."""
    name = re.sub(r"[^a-z0-9_\-]+", "-", Path(path).stem.lower()).strip("-_")
    return name or "mirror"


def mirror_domain(path: Path | str, template: DomainSpec | None = None) -> DomainSpec:
    """A domain serving the tools of capture file ``path``, simulated like ``template``."""
    template = template or load_domain(MIRROR_TEMPLATE_DOMAIN)
    capture = load_capture_file(path)
    tools: list[ToolSpec] = list(capture.tools)
    by_name = {tool.name: tool for tool in tools}
    if len(by_name) != len(tools):
        raise DataFileError(path, [(None, "a tool name appears twice")])
    return DomainSpec(
        name=mirror_domain_name(path),
        title=f"Simulated mirror of {Path(path).name}",
        description=f"The {len(tools)} tools captured in {Path(path).name}, simulated.",
        instructions=template.instructions,
        world=template.world,
        generation=template.generation,
        tools=tools,
        resources=capture.resources,
        resourceTemplates=capture.resource_templates,
        prompts=capture.prompts,
        simulated_like=template.adapter_domain,
        # Worked examples only for tools this server really has, called as its schema allows.
        demonstrations=[
            d
            for d in template.demonstrations
            if d.tool in by_name and not schema_errors(by_name[d.tool].input_schema, d.arguments)
        ],
    )

"""Helpers for tests that call tools: valid example arguments, small generation budgets."""

from __future__ import annotations

from typing import Any

import jsonschema

from aw_mcp.domain.catalogue import Catalogue
from aw_mcp.domain.models import DomainSpec
from aw_mcp.engines.base import Engine
from aw_mcp.server.app import build_server
from aw_mcp.simulation.simulator import WorldSimulator

_FORMAT_EXAMPLES = {
    "uri": "https://example.com/",
    "url": "https://example.com/",
    "date-time": "2026-11-30T09:00:00Z",
    "date": "2026-11-30",
    "time": "09:00:00",
    "email": "dev@example.com",
    "uuid": "123e4567-e89b-12d3-a456-426614174000",
}


def example_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments that satisfy ``schema`` (required properties only); fail loudly if not."""
    value = _example(schema, schema)
    validator_cls = jsonschema.validators.validator_for(schema)
    validator = validator_cls(schema, format_checker=validator_cls.FORMAT_CHECKER)
    errors = [e.message for e in validator.iter_errors(value)]
    assert not errors, f"no valid example arguments for {schema}: {errors}"
    return value


def _example(node: Any, root: dict[str, Any]) -> Any:
    if not isinstance(node, dict):
        return "example"
    if "$ref" in node:
        target: Any = root
        for part in filter(None, node["$ref"].lstrip("#").split("/")):
            target = target[part]
        return _example(target, root)
    if "const" in node:
        return node["const"]
    if "enum" in node:
        return node["enum"][0]
    if "default" in node and node["default"] is not None:
        return node["default"]
    for key in ("anyOf", "oneOf"):
        if key in node:
            alternatives = [a for a in node[key] if a.get("type") != "null"] or node[key]
            return _example(alternatives[0], root)
    kind = node.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in node:
        properties = node.get("properties") or {}
        return {name: _example(properties.get(name, {}), root) for name in node.get("required", [])}
    if kind == "array":
        count = max(1, node.get("minItems", 0))
        return [_example(node.get("items", {}), root) for _ in range(count)]
    if kind == "string":
        text = _FORMAT_EXAMPLES.get(node.get("format", ""), "example")
        return text.ljust(node.get("minLength", 0), "x")
    if kind in ("integer", "number"):
        low = node.get("minimum", node.get("exclusiveMinimum", 0))
        return max(1, int(low) + 1)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return "example"


def simulated_server(engine: Engine, *domains: DomainSpec):
    """The MCP server (low-level ``Server``) simulating ``domains`` with ``engine``."""
    return build_server(WorldSimulator(Catalogue(list(domains)), engine))


def with_max_tokens(domain: DomainSpec, max_tokens: int) -> DomainSpec:
    """The domain with every generation budget (domain and per-tool) set to ``max_tokens``."""
    return domain.model_copy(
        update={
            "generation": domain.generation.model_copy(update={"max_tokens": max_tokens}),
            "tools": [
                tool.model_copy(
                    update={
                        "simulation": tool.simulation.model_copy(update={"max_tokens": max_tokens})
                    }
                )
                for tool in domain.tools
            ],
        }
    )

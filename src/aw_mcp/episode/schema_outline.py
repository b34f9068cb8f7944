"""A short, readable outline of a JSON Schema for the world model's prompt.

Real outputSchemas can be huge (Brave's place search: 82 kB of JSON Schema, ~25k tokens), far
more than a small model's context. The grammar enforces the schema during generation anyway,
so the prompt only needs the shape: ``{"title": string, "count": integer, "tags"?: [string]}``.
Descriptions are dropped, optional keys get a ``?``, and the outline is cut at a length limit.
"""

from __future__ import annotations

import json
from typing import Any

OUTLINE_CHARS = 600
MAX_DEPTH = 4


def schema_outline(schema: Any, limit: int = OUTLINE_CHARS) -> str:
    text = _outline(schema, schema, 0)
    return text if len(text) <= limit else text[: limit - 4].rstrip() + " ..."


def _outline(node: Any, root: Any, depth: int) -> str:
    if not isinstance(node, dict) or not node:
        return "any"
    if "$ref" in node:
        name = str(node["$ref"]).rsplit("/", 1)[-1]
        if depth >= MAX_DEPTH:
            return name
        return _outline(_resolve(root, node["$ref"]), root, depth + 1)
    if "const" in node:
        return json.dumps(node["const"])
    if "enum" in node:
        return "|".join(json.dumps(v) for v in node["enum"])
    for key in ("anyOf", "oneOf"):
        if key in node:
            return " | ".join(_outline(alt, root, depth + 1) for alt in node[key])
    kind = node.get("type")
    if isinstance(kind, list):
        return " | ".join(_outline({**node, "type": t}, root, depth) for t in kind)
    if kind == "object" or "properties" in node:
        properties = node.get("properties") or {}
        if not properties:
            return "object"
        if depth >= MAX_DEPTH:
            return "{...}"
        required = set(node.get("required", []))
        fields = [
            f"{json.dumps(name)}{'' if name in required else '?'}: {_outline(sub, root, depth + 1)}"
            for name, sub in properties.items()
        ]
        return "{" + ", ".join(fields) + "}"
    if kind == "array" or "items" in node or "prefixItems" in node:
        items = node.get("prefixItems") or node.get("items")
        if isinstance(items, list):
            return "[" + ", ".join(_outline(i, root, depth + 1) for i in items) + "]"
        return "[" + _outline(items, root, depth + 1) + ", ...]"
    if kind == "string" and node.get("format"):
        return f"string ({node['format']})"
    return str(kind) if kind else "any"


def _resolve(root: Any, ref: str) -> Any:
    target = root
    for part in filter(None, str(ref).lstrip("#").split("/")):
        if not isinstance(target, dict):
            return {}
        target = target.get(part.replace("~1", "/").replace("~0", "~"), {})
    return target

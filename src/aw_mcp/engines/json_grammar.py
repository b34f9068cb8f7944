"""Grammars that keep a model's output valid against a tool's outputSchema, and always finite.

Used by the constraints of both local engines (``constraints.py``):

- ``grammar_view(schema, max_tokens)``: a *bounded subset* of the schema, used for the grammar
  only (never for validation). Every string gets a ``maxLength``, every array a ``maxItems``,
  free-form values become bounded scalars, extra keys are dropped, and optional properties
  are kept only while the worst case still fits the token budget. Anything this view accepts
  the original schema accepts too, so constrained output validates; and because every value is
  bounded, a model that loops inside a string is cut off by the grammar instead of running
  into ``max_tokens`` with half a JSON document.
- ``bounded_view(schema, max_tokens)``: that view and how many tokens the shortest valid
  document takes (``closing_reserve``), which the decoder keeps in reserve to close it.

Whatever the grammar cannot express exactly (``oneOf`` exclusivity, ``uniqueItems``, ...) is
still caught by validation in the simulator, which retries and finally answers ``isError``.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Any

from aw_mcp.errors import UserInputError

log = logging.getLogger(__name__)

# Output budget: roughly how many characters of JSON one token carries. Digits are one token
# each in many vocabularies, so numbers are weighed at their full digit count.
CHARS_PER_TOKEN = 3
MIN_STRING_LENGTH = 16  # strings are never bounded below this (unless the schema says so)
MAX_DEPTH = 8  # below this depth arrays are empty and optional properties dropped
PATTERN_REPEAT = 16  # a regex "*" or "+" becomes "{0,16}" / "{1,16}" in the grammar
INTEGER_DIGITS = 12  # integral digits a number may have when the schema sets no maximum
DECIMAL_DIGITS = 6
# Tried in order, richest first; the first that fits the budget wins.
OPTIONAL_DEPTHS = (MAX_DEPTH, 1, 0)
ITEM_CAPS = (4, 2, 1)


# Patterns for string formats that a grammar has no rule for (bounded, so always finite).
FORMAT_PATTERNS = {
    "uri": r"^https://[a-z0-9][a-z0-9.-]{0,40}[.][a-z]{2,6}(/[A-Za-z0-9._~%/?#=&+-]{0,80})?$",
    "email": r"^[a-z0-9._-]{1,24}@[a-z0-9-]{1,24}[.][a-z]{2,6}$",
}
FORMAT_PATTERNS["url"] = FORMAT_PATTERNS["iri"] = FORMAT_PATTERNS["uri"]


class GrammarError(UserInputError):
    """The schema cannot be turned into a grammar (it is then only validated)."""


@dataclass(frozen=True)
class Bounds:
    optional_depth: int  # keep optional properties in this many levels of objects (0: none)
    max_items: int
    max_length: int


# -- the bounded view ------------------------------------------------------------------------


def grammar_view(schema: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    """A bounded subset of ``schema`` whose worst case fits about ``max_tokens`` tokens.

    Raises GrammarError for schemas the view cannot bound (unresolvable or endless $refs).
    """
    budget = max_tokens * CHARS_PER_TOKEN
    for optional_depth in OPTIONAL_DEPTHS:
        for max_items in ITEM_CAPS:
            found = _longest_fitting(schema, optional_depth, max_items, budget)
            if found is not None:
                return found
    # Nothing fits: the smallest view (arrays empty where allowed). The engine raises
    # max_tokens to its shortest completion (closing_reserve) when needed.
    return _build_view(schema, Bounds(0, 0, MIN_STRING_LENGTH))


def _longest_fitting(
    schema: dict[str, Any], optional_depth: int, max_items: int, budget: int
) -> dict[str, Any] | None:
    """The view with the longest string bound that fits, or None if even the shortest does not."""
    low, high = MIN_STRING_LENGTH, max(MIN_STRING_LENGTH, budget)
    best = _build_view(schema, Bounds(optional_depth, max_items, low))
    if _worst_chars(best) > budget:
        return None
    while low < high:  # binary search on the string bound
        middle = (low + high + 1) // 2
        view = _build_view(schema, Bounds(optional_depth, max_items, middle))
        if _worst_chars(view) <= budget:
            low, best = middle, view
        else:
            high = middle - 1
    return best


def _build_view(schema: dict[str, Any], bounds: Bounds) -> dict[str, Any]:
    return _ViewBuilder(schema, bounds).visit(schema, 0)


class _ViewBuilder:
    def __init__(self, root: dict[str, Any], bounds: Bounds):
        self.root = root
        self.bounds = bounds

    def visit(self, node: Any, depth: int) -> dict[str, Any]:
        if depth > 3 * MAX_DEPTH:
            raise GrammarError("the schema nests too deeply (a recursive $ref?)")
        if node is True or node == {}:
            return self._free_form()
        if not isinstance(node, dict):
            raise GrammarError(f"unsupported schema {node!r}")
        if "$ref" in node:
            return self.visit(self._resolve(node["$ref"]), depth + 1)
        if "const" in node:
            return {"const": node["const"]}
        if "enum" in node:
            return {"enum": list(node["enum"])}
        for key in ("anyOf", "oneOf"):
            if key in node:
                base = {k: v for k, v in node.items() if k not in ("anyOf", "oneOf")}
                alternatives = [self.visit({**base, **alt}, depth) for alt in node[key]]
                return {"anyOf": alternatives}
        if "allOf" in node:
            return self.visit(_merge_all_of(node, self._resolve), depth)
        kind = node.get("type")
        if isinstance(kind, list):
            return {"anyOf": [self.visit({**node, "type": t}, depth) for t in kind]}
        if kind == "object" or (kind is None and "properties" in node):
            return self._object(node, depth)
        if kind == "array" or (kind is None and ("items" in node or "prefixItems" in node)):
            return self._array(node, depth)
        if kind == "string":
            return self._string(node)
        if kind in ("integer", "number"):
            keep = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
            return {"type": kind, **{k: node[k] for k in keep if k in node}}
        if kind in ("boolean", "null"):
            return {"type": kind}
        if kind is None:
            return self._free_form()
        raise GrammarError(f"unsupported type {kind!r}")

    def _resolve(self, ref: str) -> Any:
        if not ref.startswith("#"):
            raise GrammarError(f"only local $refs are supported, not {ref!r}")
        target: Any = self.root
        for part in filter(None, ref[1:].split("/")):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or part not in target:
                raise GrammarError(f"unresolvable $ref {ref!r}")
            target = target[part]
        return target

    def _free_form(self) -> dict[str, Any]:
        # Any JSON value is allowed; a bounded scalar is a valid (and finite) choice.
        return {
            "anyOf": [
                {"type": "string", "maxLength": self.bounds.max_length},
                {"type": "number"},
                {"type": "boolean"},
                {"type": "null"},
            ]
        }

    def _object(self, node: dict[str, Any], depth: int) -> dict[str, Any]:
        declared = node.get("properties") or {}
        required = list(node.get("required", []))
        keep_optional = depth < self.bounds.optional_depth and depth < MAX_DEPTH
        properties = {
            name: self.visit(sub, depth + 1)
            for name, sub in declared.items()
            if name in required or keep_optional
        }
        extra = node.get("additionalProperties", True)
        for name in required:  # required but not declared: any value the schema allows
            if name not in properties:
                properties[name] = self.visit(extra if isinstance(extra, dict) else True, depth + 1)
        # additionalProperties: false in the view (extra keys are never needed to be valid).
        return {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        }

    def _array(self, node: dict[str, Any], depth: int) -> dict[str, Any]:
        min_items = int(node.get("minItems", 0))
        cap = self.bounds.max_items if depth < MAX_DEPTH else 0
        max_items = max(min_items, min(int(node.get("maxItems", cap)), cap))
        tuple_items = node.get("prefixItems")
        if tuple_items is None and isinstance(node.get("items"), list):
            tuple_items = node["items"]  # draft-07 tuple form
        if tuple_items is not None:
            return {
                "type": "array",
                "prefixItems": [self.visit(item, depth + 1) for item in tuple_items],
            }
        items = node.get("items", True)
        return {
            "type": "array",
            "items": self.visit(items, depth + 1),
            "minItems": min_items,
            "maxItems": max_items,
        }

    def _string(self, node: dict[str, Any]) -> dict[str, Any]:
        if "pattern" in node:
            return {"type": "string", "pattern": bounded_pattern(node["pattern"])}
        fmt = node.get("format")
        if fmt in FORMAT_PATTERNS and "maxLength" not in node:
            # Validators rarely assert formats, but a URL that looks like one reads better
            # and passes a client that does.
            return {"type": "string", "pattern": FORMAT_PATTERNS[fmt]}
        if fmt in ("date", "time", "date-time") or re.fullmatch(r"uuid[1-5]?", fmt or ""):
            return {"type": "string", "format": fmt}
        min_length = int(node.get("minLength", 0))
        max_length = min(int(node.get("maxLength", self.bounds.max_length)), self.bounds.max_length)
        return {"type": "string", "minLength": min_length, "maxLength": max(min_length, max_length)}


def _merge_all_of(node: dict[str, Any], resolve) -> dict[str, Any]:
    """allOf of object schemas as one object (other constraints are left to validation)."""
    merged: dict[str, Any] = {"type": "object", "properties": {}, "required": []}
    parts = [{k: v for k, v in node.items() if k != "allOf"}, *node["allOf"]]
    for part in parts:
        if "$ref" in part:
            part = resolve(part["$ref"])
        if part.get("type") not in (None, "object"):
            raise GrammarError("allOf of non-object schemas is not supported")
        merged["properties"].update(part.get("properties") or {})
        merged["required"] += [r for r in part.get("required", []) if r not in merged["required"]]
    return merged


# Regex escapes llama-cpp-python's pattern converter does not understand, rewritten to the
# same characters in a form it does (outside and inside [...]).
_ESCAPES_OUTSIDE_CLASS = {
    "d": "[0-9]",
    "w": "[0-9A-Za-z_]",
    "s": "[ \\t\\n\\r]",
    ".": "[.]",
    "/": "/",
    "-": "-",
    "$": "[\\x24]",
    "^": "[\\x5E]",
}
_ESCAPES_INSIDE_CLASS = {"d": "0-9", "w": "0-9A-Za-z_", "s": " \\t\\n\\r", ".": ".", "/": "/"}


def bounded_pattern(pattern: str) -> str:
    """A regex accepting a subset of ``pattern``: anchored, with bounded repetitions.

    ``(?:`` groups become plain groups (same language), ``*``/``+``/``{n,}`` get an upper
    bound, missing ``^``/``$`` anchors are added (a full match also "contains" a match), and
    shorthand escapes become character classes.
    """
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            escaped = pattern[i + 1]
            table = _ESCAPES_INSIDE_CLASS if in_class else _ESCAPES_OUTSIDE_CLASS
            out.append(table.get(escaped, pattern[i : i + 2]))
            i += 2
            continue
        if in_class:
            in_class = c != "]"
            out.append(c)
        elif c == "[":
            in_class = True
            out.append(c)
        elif pattern.startswith("(?:", i):
            out.append("(")
            i += 3
            continue
        elif c == "*":
            out.append(f"{{0,{PATTERN_REPEAT}}}")
        elif c == "+":
            out.append(f"{{1,{PATTERN_REPEAT}}}")
        elif c == "{" and (m := re.match(r"\{(\d+),\}", pattern[i:])):
            low = int(m.group(1))
            out.append(f"{{{low},{low + PATTERN_REPEAT}}}")
            i += len(m.group(0))
            continue
        else:
            out.append(c)
        i += 1
    text = "".join(out)
    return ("" if text.startswith("^") else "^") + text + ("" if text.endswith("$") else "$")


def _worst_chars(view: dict[str, Any]) -> int:
    """Upper estimate of the characters (number digits: tokens x CHARS_PER_TOKEN) a view allows."""
    if "const" in view:
        return len(json.dumps(view["const"])) + 1
    if "enum" in view:
        return max((len(json.dumps(v)) for v in view["enum"]), default=0) + 1
    if "anyOf" in view:
        return max((_worst_chars(alt) for alt in view["anyOf"]), default=0)
    kind = view.get("type")
    if kind == "string":
        if "pattern" in view:
            return 2 * len(view["pattern"])
        if "format" in view:
            return 40
        return view["maxLength"] + 3
    if kind in ("integer", "number"):
        digits = INTEGER_DIGITS + (DECIMAL_DIGITS + 1 if kind == "number" else 0)
        return (digits + 1) * CHARS_PER_TOKEN
    if kind in ("boolean", "null"):
        return 6
    if kind == "array":
        if "prefixItems" in view:
            return 3 + sum(_worst_chars(item) + 2 for item in view["prefixItems"])
        return 3 + view["maxItems"] * (_worst_chars(view["items"]) + 2)
    if kind == "object":
        return 3 + sum(
            len(name) + 5 + _worst_chars(sub) for name, sub in view["properties"].items()
        )
    return 0


def _least_chars(view: dict[str, Any]) -> int:
    """Characters of the shortest JSON the view allows (required keys, empty values)."""
    if "const" in view:
        return len(json.dumps(view["const"]))
    if "enum" in view:
        return min((len(json.dumps(v)) for v in view["enum"]), default=0)
    if "anyOf" in view:
        return min((_least_chars(alt) for alt in view["anyOf"]), default=0)
    kind = view.get("type")
    if kind == "string":
        if "pattern" in view or "format" in view:
            return 2 * len(view.get("pattern", "")) or 40
        return view.get("minLength", 0) + 2
    if kind == "array":
        if "prefixItems" in view:
            return 2 + sum(_least_chars(item) + 1 for item in view["prefixItems"])
        return 2 + view.get("minItems", 0) * (_least_chars(view["items"]) + 1)
    if kind == "object":
        return 2 + sum(
            len(name) + 3 + _least_chars(view["properties"][name]) for name in view["required"]
        )
    return 5  # a digit, true/false/null


# -- what a grammar engine needs ------------------------------------------------------------


# Whitespace between JSON tokens: one space, or a newline and at most 20 spaces or tabs of
# indentation (the ``space`` rule of llama.cpp's own JSON-schema converter, which now also
# allows a blank line; llama-cpp-python's allows one space only). Servers that indent
# their JSON (memory, time, sequential-thinking) are recorded indented, and a model that has
# seen them writes so: with a single space only, its likeliest allowed token after ``[`` was
# often ``]`` (the memory server's relations were all answered ``[]``). Bounded, so a model
# looping on spaces is still cut off.
JSON_WHITESPACE_REGEX = r"(?: |\n[ \t]{0,20})"  # llguidance's whitespace_pattern


def closing_reserve(view: dict[str, Any]) -> int:
    """Tokens to keep for closing the document: at most one a character of its shortest form."""
    return _least_chars(view) + 2


def bounded_view(schema: dict[str, Any], max_tokens: int) -> tuple[dict[str, Any], int]:
    """(``grammar_view(schema, max_tokens)``, its ``closing_reserve``), for any grammar engine."""
    view = grammar_view(schema, max_tokens)
    return view, closing_reserve(view)

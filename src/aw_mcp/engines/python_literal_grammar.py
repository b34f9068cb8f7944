"""Lark grammars of Python literals (``repr`` of lists and dicts) of a given JSON-schema shape.

Many Python MCP servers answer a tool with ``str(result)``: a list of row dicts as Python
writes it (``[{'id': 1, 'name': 'a', 'note': None}]``: single quotes, ``None``, ``True``,
``", "`` and ``": "`` between items), not JSON. Where a tool's earlier answers are written so
(``simulation/answer_shapes.py``), its next answer is decoded under a grammar of that syntax and
of the shape those answers share, the same shape the JSON path uses: a dict's keys in the
server's order with each value's type where every answer has the same keys (else any keys:
the columns of a query are the query's), list items of one shape, and ``{}`` for "any
literal".

The grammar is of the syntax only; it never says which values a query returns. Every value is
bounded (strings at ``MAX_STRING`` characters, numbers at ``MAX_DIGITS`` digits), so a model
looping inside one must close it.
"""

from __future__ import annotations

import json
from typing import Any

MAX_STRING = 800  # characters in one string (as in text_grammars.MAX_SCALAR)
MAX_DIGITS = 19  # digits before and after the decimal point

# Python's repr of a str: single quotes, or double quotes when it holds a single quote and no
# double one; escapes for the backslash, the quote and control characters; never a raw line
# break.
_CHAR = r"[^{quote}\\\n\r]|\\[^\n\r]"  # a character inside quotes, or an escape
_STRING = (
    "/'(?:"
    + _CHAR.format(quote="'")
    + f"){{0,{MAX_STRING}}}'"
    # double quotes only around a single quote
    + '|"(?:'
    + _CHAR.format(quote="\"'")
    + f"){{0,{MAX_STRING}}}'"
    + "(?:"
    + _CHAR.format(quote='"')
    + f'){{0,{MAX_STRING}}}"/'
)
_INTEGER = rf"/-?[0-9]{{1,{MAX_DIGITS}}}/"
# repr of a float: 39.99, 45.0, 1e-05, 1.5e+20, inf, nan (an int where the shape merged them)
_NUMBER = (
    rf"/-?[0-9]{{1,{MAX_DIGITS}}}(?:\.[0-9]{{1,{MAX_DIGITS}}})?(?:e[+-][0-9]{{1,3}})?"
    r"|-?inf|nan/"
)
_TERMINALS = {
    "PY_STRING": _STRING,
    "PY_INTEGER": _INTEGER,
    "PY_NUMBER": _NUMBER,
}
_SCALARS = {
    "string": "PY_STRING",
    "integer": "PY_INTEGER",
    "number": "PY_NUMBER",
    "boolean": '"True" | "False"',
}
# Any literal, where the shape leaves a value free ({}: values of several kinds, or too deep).
_ANY = [
    'py_any: PY_STRING | PY_NUMBER | "True" | "False" | "None" | py_any_list | py_any_dict',
    'py_any_list: "[" (py_any (", " py_any)*)? "]"',
    'py_any_dict: "{" (PY_STRING ": " py_any (", " PY_STRING ": " py_any)*)? "}"',
]


def _literal(text: str) -> str:
    """``text`` as a Lark string literal."""
    return json.dumps(text)


class _Builder:
    def __init__(self) -> None:
        self.rules: list[str] = []
        self.uses_any = False

    def rule(self, shape: dict[str, Any]) -> str:
        """The name of a rule (or an expression) for a value of ``shape``."""
        if "anyOf" in shape:
            return self._define(" | ".join(self.rule(option) for option in shape["anyOf"]))
        kind = shape.get("type")
        if kind == "null":  # a value seen only as None says nothing of what else it holds
            return self._any()
        if kind in _SCALARS:
            return f"({_SCALARS[kind]})"
        if kind == "array":
            item = self.rule(shape["items"]) if "items" in shape else self._any()
            return self._define(f'"[" ({item} (", " {item})*)? "]"')
        if kind == "object":
            return self._object(shape)
        return self._any()

    def _object(self, shape: dict[str, Any]) -> str:
        properties = shape.get("properties")
        if properties is None or set(properties) != set(shape.get("required", [])):
            # Keys that vary from answer to answer (the columns a query selected) are the
            # answer's own: any keys, any values, in Python's syntax still.
            return self._any("py_any_dict")
        if not properties:
            return self._define('"{" "}"')
        pairs = [
            f"{_literal(repr(key) + ': ')} {self.rule(value)}" for key, value in properties.items()
        ]
        return self._define('"{" ' + ' ", " '.join(pairs) + ' "}"')

    def _any(self, rule: str = "py_any") -> str:
        self.uses_any = True
        return rule

    def _define(self, expression: str) -> str:
        name = f"py_{len(self.rules)}"
        self.rules.append(f"{name}: {expression}")
        return name


def python_literal_rules(shape: dict[str, Any], start: str) -> str:
    """Lark rules whose rule ``start`` is a Python literal of ``shape`` (a schema as
    ``answer_shapes`` infers them: type, properties, required, items, anyOf)."""
    builder = _Builder()
    top = builder.rule(shape)
    lines = [f"{start}: {top}", *builder.rules]
    if builder.uses_any:
        lines += _ANY
    lines += [f"{name}: {pattern}" for name, pattern in _TERMINALS.items()]
    return "\n".join(lines) + "\n"

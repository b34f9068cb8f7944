"""The shape of a tool's answers, inferred from its earlier answers in the episode.

A tool with an outputSchema is held to it (``engines/constraints.py``). Most real MCP servers
declare none (github, git, exa, tavily, desktop-commander, playwright: ``tools/list`` of each),
yet answer each tool in one JSON shape: an object with the same keys every time, or a list of
such objects. Once an episode has seen a tool answer in JSON at least ``MIN_EXAMPLES`` times
(different answers) with the same top-level keys, the shape they share is the tool's
contract: its next answer is JSON of that shape, or one line of text (an error message;
never JSON of another shape, nor prose or code). Recorded real episodes (``--grounding``)
count as earlier answers too, so a mirrored server's tools keep their shape from the first
call. The world model still writes every answer; the grammar only rules out text
the earlier answers say the server never prints.

What counts as the shape: the JSON types of each key (keys every example has are required,
the others optional, none beyond them), and of the items of each list (every item of every
example merged). Values are free. A tool that answered in text once, outside errors, has no
shape: its answers depend on what it reads (``read_file`` of one JSON file and then another).
An error is an answer flagged ``isError``, or one line that says "error" (many servers return
``Database error: ...`` as plain text): it sets nothing, and the grammar lets such a line
through.

The syntax is the earlier answers' too: JSON, or Python literals where a server answers with
``str()`` of its result (``[{'id': 1, 'note': None}]``; mcp-server-sqlite and many FastMCP
tools). Answers that are all Python literals, one of them no JSON, make the next one a Python
literal of their shape (``engines/python_literal_grammar.py``): a model trained on JSON
servers would otherwise write the rows right in the wrong syntax.
"""

from __future__ import annotations

import ast
import contextlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from aw_mcp.domain.models import ToolSpec
from aw_mcp.engines.json_grammar import JSON_WHITESPACE_REGEX, grammar_view
from aw_mcp.engines.python_literal_grammar import python_literal_rules
from aw_mcp.engines.text_grammars import TextGrammar
from aw_mcp.records.calls import Turn

MIN_EXAMPLES = 2  # different answers before their shape is taken as the contract
MAX_DEPTH = 8  # below this, any value
# An answer that is not of the shape is one line (an error message): a model's prose, code or
# explanation of what it would return takes more. Of the recorded real errors of the mirrored
# servers in data/mcp, 81% are one line of at most this many characters; the others (input
# validation errors) are cut to their first line.
MAX_TEXT_LINE = 1000
# The grammars' other answer: one line whose first character opens no object or list.
_ERROR_TEXT = f"TEXT: /[^\\[{{\\s][^\\n]{{0,{MAX_TEXT_LINE}}}/\n"


def answers_of(turns: Iterable[Turn], tool: str) -> list[str]:
    """The texts of ``tool``'s answers in ``turns`` the environment gave (no error, no
    fault)."""
    return [
        t.observation
        for t in turns
        if t.action.tool == tool and not t.is_error and not t.damaged and t.reached_world
    ]


Syntax = Literal["json", "python"]
_ERROR_LINE = re.compile(r"\berror\b", re.IGNORECASE)


@dataclass(frozen=True)
class Inferred:
    """The contract a tool's earlier answers set: their syntax and the shape they share."""

    syntax: Syntax
    shape: dict[str, Any]


def inferred_shape(answers: Iterable[str]) -> dict[str, Any] | None:
    """The JSON schema one tool's answers share; None where they set none (fewer than
    ``MIN_EXAMPLES`` different ones, not all JSON or all Python literals, or objects with
    different keys)."""
    found = inferred(answers)
    return None if found is None else found.shape


def inferred(answers: Iterable[str]) -> Inferred | None:
    """The syntax and shape one tool's answers share, or None."""
    return _contract(_read(answers))


def is_error_line(text: str) -> bool:
    """One line, not opening a list or an object, that says "error": a server's error text."""
    return (
        "\n" not in text.strip()
        and len(text) <= MAX_TEXT_LINE
        and not text.lstrip().startswith(("[", "{"))
        and _ERROR_LINE.search(text) is not None
    )


_MISSING = object()
# An answer read both ways: (its JSON value, its Python literal value), _MISSING where not one.
_Read = tuple[Any, Any]


def _read(answers: Iterable[str]) -> dict[str, _Read]:
    """Each different answer, error lines left out, by its text, read as JSON and as a
    Python literal (the same answer again is no more evidence)."""
    return {text: _parse(text) for text in dict.fromkeys(answers) if not is_error_line(text)}


def _parse(text: str) -> _Read:
    """``text`` read as JSON and as a Python literal (``_MISSING`` where it is not one, or
    not a list or dict of plain values)."""
    if not text.lstrip().startswith(("[", "{")):
        return _MISSING, _MISSING  # no list or dict (a page, a message): nothing to parse
    as_json: Any = _MISSING
    with contextlib.suppress(ValueError):
        as_json = json.loads(text)
    as_python: Any = _MISSING
    with contextlib.suppress(ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        as_python = ast.literal_eval(text.strip())
    if not isinstance(as_json, dict | list):
        as_json = _MISSING
    if not isinstance(as_python, dict | list) or not _plain(as_python):
        as_python = _MISSING
    return as_json, as_python


def _plain(value: Any, depth: int = 0) -> bool:
    """Only what JSON can hold too: str keys, lists, and str, int, float, bool, None."""
    if depth > MAX_DEPTH * 4:
        return False
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v, depth + 1) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain(v, depth + 1) for v in value)
    return value is None or isinstance(value, str | int | float | bool)


def _contract(read: dict[str, _Read]) -> Inferred | None:
    """The syntax every answer is written in (JSON first: ``[]`` is both) and the shape
    their values share; None if one is neither (the tool's answers then depend on what it
    reads) or they share no shape."""
    ways: tuple[tuple[Syntax, int], ...] = (("json", 0), ("python", 1))
    for syntax, way in ways:
        values = {text: both[way] for text, both in read.items()}
        if all(value is not _MISSING for value in values.values()):
            shape = _shared_shape(values)
            return None if shape is None else Inferred(syntax, shape)
    return None


def _shared_shape(values: dict[str, Any]) -> dict[str, Any] | None:
    found = list(values.values())
    if len(found) < MIN_EXAMPLES or len({type(v) for v in found}) > 1:
        return None
    if isinstance(found[0], dict) and len({frozenset(v) for v in found}) > 1:
        return None
    return _shape(found, 0)


class AnswerShapes:
    """The grammar of a tool's next answer where its earlier ones set a shape: in the
    episode, and in recorded real episodes (``--grounding``) when given (read once per
    tool: they do not change while serving)."""

    def __init__(self, recorded: Callable[[str], list[str]] | None = None):
        self.recorded = recorded
        self._recorded: dict[str, dict[str, _Read]] = {}

    def grammar(self, spec: ToolSpec, turns: list[Turn], max_tokens: int) -> TextGrammar | None:
        if spec.model_output_schema is not None or spec.simulation.answer_grammar is not None:
            return None  # the tool's own contract says more
        if spec.name not in self._recorded:
            self._recorded[spec.name] = _read(self.recorded(spec.name) if self.recorded else [])
        recorded = self._recorded[spec.name]
        episode = _read(a for a in answers_of(turns, spec.name) if a not in recorded)
        found = _contract(recorded | episode)
        if found is None:
            return None
        if found.syntax == "python":
            return python_literal_grammar(found.shape)
        return shape_grammar(found.shape, max_tokens)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _shape(values: list[Any], depth: int) -> dict[str, Any]:
    """A schema every one of ``values`` satisfies."""
    if depth >= MAX_DEPTH or not values:
        return {}
    types = {_json_type(v) for v in values}
    if "number" in types:
        types.discard("integer")
    if len(types) > 1:
        return {"anyOf": [_shape([v for v in values if _is(v, t)], depth) for t in sorted(types)]}
    (kind,) = types
    if kind == "object":
        # in the order the server writes them: the decoding grammar keeps the schema's order
        keys = list(dict.fromkeys(k for v in values for k in v))
        return {
            "type": "object",
            "properties": {k: _shape([v[k] for v in values if k in v], depth + 1) for k in keys},
            "required": [k for k in keys if all(k in v for v in values)],
            "additionalProperties": False,
        }
    if kind == "array":
        items = [item for v in values for item in v]
        return {"type": "array", "items": _shape(items, depth + 1)} if items else {"type": "array"}
    return {"type": kind}


def _is(value: Any, kind: str) -> bool:
    found = _json_type(value)
    return found == kind or (kind == "number" and found == "integer")


def shape_grammar(shape: dict[str, Any], max_tokens: int) -> TextGrammar:
    """An answer of ``shape`` (bounded so a looping model is cut off, as for an outputSchema)
    or one line of text that is not JSON (an error message)."""
    bounded = grammar_view(shape, max_tokens)
    view = {**bounded, "x-guidance": {"whitespace_pattern": JSON_WHITESPACE_REGEX}}
    lark = f"start: shaped | TEXT\nshaped: %json {json.dumps(view)}\n" + _ERROR_TEXT
    return TextGrammar(lark=lark, closing_chars='"]}\n')


def python_literal_grammar(shape: dict[str, Any]) -> TextGrammar:
    """An answer of ``shape`` written as a Python literal, on one line, or one line of text
    that opens no list or dict (an error message)."""
    lark = "start: shaped | TEXT\n" + python_literal_rules(shape, "shaped") + _ERROR_TEXT
    return TextGrammar(lark=lark, closing_chars="'\"]}")

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
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from aw_mcp.domain.models import ToolSpec
from aw_mcp.engines.json_grammar import JSON_WHITESPACE_REGEX, grammar_view
from aw_mcp.engines.text_grammars import TextGrammar
from aw_mcp.records.calls import Turn

MIN_EXAMPLES = 2  # different answers before their shape is taken as the contract
MAX_DEPTH = 8  # below this, any value
# An answer that is not of the shape is one line (an error message): a model's prose, code or
# explanation of what it would return takes more. Of the recorded real errors of the mirrored
# servers in data/mcp, 81% are one line of at most this many characters; the others (input
# validation errors) are cut to their first line.
MAX_TEXT_LINE = 1000


def answers_of(turns: Iterable[Turn], tool: str) -> list[str]:
    """The texts of ``tool``'s answers in ``turns`` the environment gave (no error, no
    fault)."""
    return [
        t.observation
        for t in turns
        if t.action.tool == tool and not t.is_error and not t.damaged and t.reached_world
    ]


def inferred_shape(answers: Iterable[str]) -> dict[str, Any] | None:
    """The JSON schema one tool's answers share; None where they set none (fewer than
    ``MIN_EXAMPLES`` different ones, not all JSON, or objects with different keys)."""
    values = _json_values(answers)
    return None if values is None else _shared_shape(values)


def _json_values(answers: Iterable[str]) -> dict[str, Any] | None:
    """Each different answer's JSON value, by its text; None if one is not a JSON object or
    list (the tool's answers then depend on what it reads)."""
    values: dict[str, Any] = {}
    for text in answers:
        if text in values:  # the same answer again is no more evidence
            continue
        try:
            value = json.loads(text)
        except ValueError:
            return None
        if not isinstance(value, dict | list):
            return None
        values[text] = value
    return values


def _shared_shape(values: dict[str, Any]) -> dict[str, Any] | None:
    found = list(values.values())
    if len(found) < MIN_EXAMPLES or len({type(v) for v in found}) > 1:
        return None
    if isinstance(found[0], dict) and len({frozenset(v) for v in found}) > 1:
        return None
    return _shape(found, 0)


class AnswerShapes:
    """The grammar of a tool's next answer where its earlier ones set a shape: in the
    episode, and in recorded real episodes (``--grounding``) when given (parsed once per
    tool: they do not change while serving)."""

    def __init__(self, recorded: Callable[[str], list[str]] | None = None):
        self.recorded = recorded
        self._recorded_values: dict[str, dict[str, Any] | None] = {}

    def grammar(self, spec: ToolSpec, turns: list[Turn], max_tokens: int) -> TextGrammar | None:
        if spec.model_output_schema is not None or spec.simulation.answer_grammar is not None:
            return None  # the tool's own contract says more
        if spec.name not in self._recorded_values:
            recorded = self.recorded(spec.name) if self.recorded else []
            self._recorded_values[spec.name] = _json_values(recorded)
        recorded_values = self._recorded_values[spec.name]
        episode_values = _json_values(answers_of(turns, spec.name))
        if recorded_values is None or episode_values is None:
            return None
        shape = _shared_shape(recorded_values | episode_values)
        return shape_grammar(shape, max_tokens) if shape is not None else None


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
    lark = (
        "start: shaped | TEXT\n"
        f"shaped: %json {json.dumps(view)}\n"
        # an error: one line whose first character opens no object or list
        f"TEXT: /[^\\[{{\\s][^\\n]{{0,{MAX_TEXT_LINE}}}/\n"
    )
    return TextGrammar(lark=lark, closing_chars='"]}\n')

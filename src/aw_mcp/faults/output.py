"""Output effects: damage an answer the way a failing server or network would.

Plain-text answers are damaged as text (JSON text is parsed first for schema drift, so the
drift stays well-formed JSON with a renamed or missing field).

Tools with an ``outputSchema`` need care: an MCP client validates ``structuredContent`` against
the schema and raises on a mismatch (the Python SDK does), so a result whose structured content
breaks the schema is not something a real server can deliver. Real servers built on the SDKs
validate their own output and, when it breaks their schema, answer with an ``isError`` result
("Output validation error: ..."). So for those tools the damage is done to the structured
value (long strings cut, lists shortened or emptied, strings garbled, keys renamed or dropped),
the text is re-serialized from it so text and structure agree, and then:
- if the damaged value still satisfies the schema (an optional field missing, a list emptied),
  it is returned as a normal result: the silent drift a client accepts;
- if not, the result is an ``isError`` "Output validation error: ..." as SDK servers send it.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from functools import partial
from typing import Any

from aw_mcp.domain.answers import ToolAnswer
from aw_mcp.faults.scenario import CorruptEffect, EmptyEffect, SchemaDriftEffect, TruncateEffect
from aw_mcp.json_schemas import schema_errors

OutputEffect = TruncateEffect | EmptyEffect | CorruptEffect | SchemaDriftEffect

# Characters that replace garbled ones: the replacement character, stray punctuation and quotes
# (which break JSON), as a bad proxy or a wrong encoding would leave them.
GARBLE_CHARS = "\ufffd\ufffd#%&@~^`|\\{}[]\"'\u00c3\u00a9"
# In structured answers only strings at least this long are truncated (ids and names stay).
LONG_STRING = 40


def damage(
    answer: ToolAnswer,
    effect: OutputEffect,
    output_schema: dict[str, Any] | None,
    seed: int,
    answer_text: Callable[[Any], str] | None = None,
) -> ToolAnswer:
    """The answer with ``effect`` applied; error answers pass unchanged."""
    if answer.is_error:
        return answer
    rng = random.Random(seed)  # a local generator, seeded per call: never a shared stream
    if output_schema is not None and answer.structured is not None:
        value = _damage_value(answer.structured, effect, rng)
        problems = schema_errors(output_schema, value)
        if problems:
            return ToolAnswer(text=f"Output validation error: {problems[0]}", is_error=True)
        text = answer_text(value) if answer_text else json.dumps(value, ensure_ascii=False)
        return ToolAnswer(text=text, structured=value)
    return ToolAnswer(text=_damage_text(answer.text, effect, rng))


def _damage_text(text: str, effect: OutputEffect, rng: random.Random) -> str:
    if isinstance(effect, TruncateEffect):
        return _truncate(text, effect)
    if isinstance(effect, EmptyEffect):
        return ""
    if isinstance(effect, CorruptEffect):
        return garble(text, effect.rate, rng)
    try:
        parsed = json.loads(text)
    except ValueError:
        return _drift_plain_text(text, effect)
    indent = 2 if "\n" in text.strip() else None
    return json.dumps(_drift(parsed, effect), ensure_ascii=False, indent=indent)


def _damage_value(value: Any, effect: OutputEffect, rng: random.Random) -> Any:
    if isinstance(effect, SchemaDriftEffect):
        return _drift(value, effect)
    if isinstance(value, dict):
        return {k: _damage_value(v, effect, rng) for k, v in value.items()}
    if isinstance(value, list):
        if isinstance(effect, EmptyEffect):
            return []
        if isinstance(effect, TruncateEffect):
            value = value[: int(len(value) * effect.keep)]
        return [_damage_value(v, effect, rng) for v in value]
    if isinstance(value, str):
        if isinstance(effect, EmptyEffect):
            return ""
        if isinstance(effect, TruncateEffect):
            return _truncate(value, effect) if len(value) >= LONG_STRING else value
        return garble(value, effect.rate, rng)
    return value


def _truncate(text: str, effect: TruncateEffect) -> str:
    return text[: int(len(text) * effect.keep)] + (effect.marker or "")


def garble(text: str, rate: float, rng: random.Random) -> str:
    """``text`` with about ``rate`` of its characters replaced (at least one when not empty)."""
    if not text:
        return text
    chars = list(text)
    positions = [i for i in range(len(chars)) if rng.random() < rate] or [rng.randrange(len(chars))]
    for i in positions:
        chars[i] = rng.choice(GARBLE_CHARS.replace(chars[i], ""))
    return "".join(chars)


def _drift(value: Any, effect: SchemaDriftEffect) -> Any:
    """Keys renamed or dropped wherever they occur in a JSON value."""
    if isinstance(value, dict):
        return {
            effect.rename.get(k, k): _drift(v, effect)
            for k, v in value.items()
            if k not in effect.remove
        }
    if isinstance(value, list):
        return [_drift(v, effect) for v in value]
    return value


def _drift_plain_text(text: str, effect: SchemaDriftEffect) -> str:
    """Drift in text that is not JSON: ``key: value`` / ``key=value`` labels, quoted or not."""
    for old in effect.remove:
        key = re.escape(old)
        text = re.sub(rf"(?m)^[ \t]*[\"']?{key}[\"']?[ \t]*[:=].*(?:\n|$)", "", text)
        text = re.sub(rf"\"{key}\"\s*:\s*(\"(?:[^\"\\]|\\.)*\"|[^,}}\]]*)\s*,?\s*", "", text)
    for old, new in effect.rename.items():
        key = re.escape(old)
        text = re.sub(
            rf"(?m)(^|[\s{{,\"'])({key})([\"']?[ \t]*[:=])",
            partial(_renamed_key, new),
            text,
        )
    return text


def _renamed_key(new: str, match: re.Match[str]) -> str:
    """A key matched with what precedes and follows it, the key itself replaced by ``new``."""
    return match.group(1) + new + match.group(3)

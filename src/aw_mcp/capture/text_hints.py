"""How a real server writes its structured answers as text, learned from its own records.

A tool with an ``outputSchema`` answers twice: ``structuredContent`` and a text block. Servers
differ in the text: Python's ``json.dumps`` of the whole answer, JavaScript's
``JSON.stringify`` (minified, or indented by 2), or the JSON of just one property (the memory
server's text is the list its ``{"entities": [...]}`` holds), or no JSON at all but one string
property (the filesystem server's ``content``; the memory server's deletes send their
``message``, beside ``"success": true`` in every answer). The world model writes the text as
the records show it and the server derives the other half (``ToolSpec.structured_answer``),
so the served tool must know which rendering its records use. That is learned here from the
recorded (text, structuredContent) pairs and written into the capture's ``simulation`` block
(``json_text``, ``json_text_of``, ``text_field``, ``fixed_fields``), which ``--tools-from``
and training read.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from pathlib import Path
from typing import Any, get_args

from aw_mcp.capture.tools_list import write_capture
from aw_mcp.domain.mirror import CapturedTool
from aw_mcp.domain.models import JsonTextStyle, ToolSpec, json_text
from aw_mcp.records.folder import CAPTURES_FOLDER
from aw_mcp.records.reader import load_record_dir

log = logging.getLogger(__name__)

STYLES: tuple[JsonTextStyle, ...] = get_args(JsonTextStyle)
# The ``simulation`` keys learned here; annotating a capture again replaces them.
LEARNED_KEYS = ("json_text", "json_text_of", "text_field", "fixed_fields")


def infer_text_hints(tool: ToolSpec, pairs: list[tuple[str, Any]]) -> dict[str, Any] | None:
    """The ``simulation`` keys under which every (text, structured) pair of ``tool`` is
    rendered as recorded, or None when no rendering explains them all (or there are none).
    The whole answer is preferred to one property, compact to the other styles, and JSON to
    a text that is one string property (``text_field``, with ``fixed_fields``)."""
    if tool.output_schema is None or not pairs:
        return None
    required = tool.output_schema.get("required", [])
    properties = tool.output_schema.get("properties", {})
    candidates: list[str | None] = [None]
    if len(required) == 1 and required[0] in properties:
        candidates.append(required[0])
    for of in candidates:
        for style in STYLES:
            if all(_renders(text, value, of, style) for text, value in pairs):
                hints: dict[str, Any] = {"json_text": style}
                if of is not None:
                    hints["json_text_of"] = of
                return hints
    return _text_field_hints(properties, pairs)


def _text_field_hints(
    properties: dict[str, Any], pairs: list[tuple[str, Any]]
) -> dict[str, Any] | None:
    """``text_field`` when every text is the same string property of its structured answer
    and the answers' other properties are the same in every pair (``fixed_fields``)."""
    if not all(isinstance(value, dict) for _, value in pairs):
        return None
    for field, schema in properties.items():
        if schema.get("type") != "string":
            continue
        if not all(value.get(field) == text for text, value in pairs):
            continue
        rests = [{k: v for k, v in value.items() if k != field} for _, value in pairs]
        if any(rest != rests[0] for rest in rests):
            continue
        return (
            {"text_field": field, "fixed_fields": rests[0]} if rests[0] else {"text_field": field}
        )
    return None


def _renders(text: str, value: Any, of: str | None, style: JsonTextStyle) -> bool:
    if of is not None:
        if not isinstance(value, dict) or of not in value:
            return False
        value = value[of]
    return text == json_text(value, style)


def annotate_captures(record_dir: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """Write the text hints learned from ``record_dir``'s records into its captures
    (``tools/<domain>.json``); returns them by domain and tool. A tool whose records no
    rendering explains keeps no hints (and is logged): the model then writes JSON."""
    pairs: dict[str, dict[str, list[tuple[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for episode in load_record_dir(record_dir):
        for record in episode.records:
            if record.source == "real" and not record.is_error and record.structured is not None:
                pairs[episode.domain][record.tool].append((record.observation, record.structured))
    learned: dict[str, dict[str, dict[str, Any]]] = {}
    for domain, by_tool in pairs.items():
        path = record_dir / CAPTURES_FOLDER / f"{domain}.json"
        if not path.is_file():
            continue
        capture = json.loads(path.read_text(encoding="utf-8"))
        for entry in capture["tools"]:
            found = by_tool.get(entry["name"])
            if not found:
                continue
            hints = infer_text_hints(CapturedTool.model_validate(entry), found)
            simulation = {
                k: v for k, v in entry.get("simulation", {}).items() if k not in LEARNED_KEYS
            }
            if hints is None:
                log.warning("%s %s: no rendering explains its recorded text", domain, entry["name"])
            else:
                learned.setdefault(domain, {})[entry["name"]] = hints
                simulation.update(hints)
            if simulation:
                entry["simulation"] = simulation
            else:
                entry.pop("simulation", None)
        write_capture(capture, path)
    return learned

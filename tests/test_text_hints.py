"""Structured answers written as their real servers write them: the JSON rendering of a tool's
text is learned from its records (``trajectories.text_hints``), kept in the capture's
``simulation`` block, and followed when the world model answers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from mcp import Client

from aw_mcp.capture.text_hints import annotate_captures, infer_text_hints
from aw_mcp.domain.loader import load_domain
from aw_mcp.domain.mirror import mirror_domain
from aw_mcp.domain.models import ToolSpec
from aw_mcp.records.folder import CAPTURES_FOLDER
from aw_mcp.records.reader import load_record_dir
from aw_mcp.testing import FakeEngine
from tests.tool_calls import simulated_server

REPO = Path(__file__).resolve().parent.parent
MCP_RECORDS = REPO / "data" / "mcp"

ENTITIES_SCHEMA = {
    "type": "object",
    "properties": {
        "entities": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "entityType": {"type": "string"}},
                "required": ["name", "entityType"],
            },
        }
    },
    "required": ["entities"],
}
ENTITIES = [{"name": "Ada", "entityType": "person"}]


def test_the_rendering_that_explains_every_pair_is_learned():
    tool = ToolSpec(name="create_entities", outputSchema=ENTITIES_SCHEMA)
    of_entities = [(json.dumps(ENTITIES, indent=2), {"entities": ENTITIES})]
    assert infer_text_hints(tool, of_entities) == {
        "json_text": "indented",
        "json_text_of": "entities",
    }
    whole = {"entities": ENTITIES}
    assert infer_text_hints(tool, [(json.dumps(whole, separators=(",", ":")), whole)]) == {
        "json_text": "minified"
    }
    assert infer_text_hints(tool, [(json.dumps(whole), whole)]) == {"json_text": "compact"}
    # No rendering explains a message, or pairs that disagree: no hints, the model writes JSON.
    assert infer_text_hints(tool, [("Created 1 entity", whole)]) is None
    assert infer_text_hints(tool, [*of_entities, (json.dumps(whole), whole)]) is None
    assert infer_text_hints(ToolSpec(name="plain"), [("text", {})]) is None


DELETE_SCHEMA = {
    "type": "object",
    "properties": {"success": {"type": "boolean"}, "message": {"type": "string"}},
    "required": ["success", "message"],
}


def test_a_text_that_is_one_string_property_is_learned_with_the_fields_that_never_change():
    """The memory server's deletes: text TEXT, structuredContent {"success": true,
    "message": TEXT}. The model then writes the text and the server adds the rest."""
    tool = ToolSpec(name="delete_entities", outputSchema=DELETE_SCHEMA)
    pairs = [
        (message, {"success": True, "message": message})
        for message in ("Entities deleted successfully", "Relations deleted successfully")
    ]
    hints = infer_text_hints(tool, pairs)
    assert hints == {"text_field": "message", "fixed_fields": {"success": True}}
    served = ToolSpec(name="delete_entities", outputSchema=DELETE_SCHEMA, simulation=hints)
    assert served.model_output_schema is None  # the model writes text, not JSON
    assert served.structured_answer("Gone") == {"success": True, "message": "Gone"}
    assert served.answer_text({"success": True, "message": "Gone"}) == "Gone"
    # A property that changes from answer to answer cannot be fixed: no hints.
    changing = [*pairs, ("Nothing deleted", {"success": False, "message": "Nothing deleted"})]
    assert infer_text_hints(tool, changing) is None
    # A text that no string property holds is not a text_field.
    assert infer_text_hints(tool, [("Done", {"success": True, "message": "ok"})]) is None


def test_fixed_fields_go_with_a_text_field_and_must_fit_the_schema():
    with pytest.raises(ValueError, match="for a tool with a text_field"):
        ToolSpec(name="t", outputSchema=DELETE_SCHEMA, simulation={"fixed_fields": {"a": 1}})
    with pytest.raises(ValueError, match="break the outputSchema"):
        ToolSpec(
            name="t",
            outputSchema=DELETE_SCHEMA,
            simulation={"text_field": "message", "fixed_fields": {"success": "yes"}},
        )
    with pytest.raises(ValueError, match="the only one it requires"):
        ToolSpec(name="t", outputSchema=DELETE_SCHEMA, simulation={"text_field": "message"})


def test_a_hint_must_name_the_one_required_property():
    with pytest.raises(ValueError, match="json_text_of"):
        ToolSpec(name="t", outputSchema=ENTITIES_SCHEMA, simulation={"json_text_of": "missing"})
    with pytest.raises(ValueError, match="exclude each other"):
        ToolSpec(
            name="t",
            outputSchema=ENTITIES_SCHEMA,
            simulation={"json_text_of": "entities", "text_field": "entities"},
        )


@pytest.mark.data
@pytest.mark.parametrize(
    "folder",
    [
        "mcp/memory/train",
        "mcp/time/train",
        "mcp/sequential-thinking/train",
        "os",
        "mcp/duckdb/heldout",
        "mcp/calculator/train",
        "mcp/excel/train",
    ],
)
def test_every_committed_structured_record_round_trips_through_its_capture(folder):
    """The committed captures carry the hints their records imply: for every recorded
    structured answer, the text the served tool would send is the recorded text, and the
    structured answer it would build from that text is the recorded one. A tool without an
    outputSchema is served text alone (excel-mcp-server sends structuredContent from such
    tools too): nothing to round-trip."""
    folder = REPO / "data" / folder
    (capture,) = (folder / CAPTURES_FOLDER).glob("*.json")
    domain = mirror_domain(capture)
    checked = 0
    for episode in load_record_dir(folder):
        for record in episode.records:
            if record.structured is None or record.is_error:
                continue
            tool = domain.tool(record.tool)
            if tool.output_schema is None:
                continue
            assert tool.answer_text(record.structured) == record.observation
            assert tool.structured_answer(record.observation) == record.structured
            checked += 1
    assert checked >= 50


def test_annotating_a_record_dir_writes_the_hints_into_its_capture(tmp_path):
    source = REPO / "tests" / "data" / "records" / "memory"
    shutil.copytree(source / CAPTURES_FOLDER, tmp_path / CAPTURES_FOLDER)
    for path in sorted(source.glob("*.jsonl")):
        shutil.copy(path, tmp_path)
    capture = tmp_path / CAPTURES_FOLDER / "memory.json"
    data = json.loads(capture.read_text())
    for entry in data["tools"]:
        entry.pop("simulation", None)
    capture.write_text(json.dumps(data))
    assert mirror_domain(capture).tool("create_entities").simulation.json_text_of is None

    learned = annotate_captures(tmp_path)

    assert learned["memory"]["create_entities"] == {
        "json_text": "indented",
        "json_text_of": "entities",
    }
    tool = mirror_domain(capture).tool("create_entities")
    assert (tool.simulation.json_text, tool.simulation.json_text_of) == ("indented", "entities")


@pytest.mark.anyio
async def test_the_model_writes_the_recorded_text_and_the_server_builds_the_structure(tmp_path):
    """A tool whose text is the indented JSON of one property: the model is constrained to
    that property's schema, writes it as the records show it, the client gets that text and
    the structured answer around it, and the history shows the text."""
    written = json.dumps(ENTITIES, indent=2)
    engine = FakeEngine(written)
    capture = tmp_path / "memory.json"
    capture.write_text(
        json.dumps(
            {
                "tools": [
                    {
                        "name": "create_entities",
                        "inputSchema": {"type": "object"},
                        "outputSchema": ENTITIES_SCHEMA,
                        "simulation": {"json_text": "indented", "json_text_of": "entities"},
                    }
                ]
            }
        )
    )
    async with Client(simulated_server(engine, mirror_domain(capture))) as client:
        first = await client.call_tool("create_entities", {"entities": ENTITIES})
        await client.call_tool("create_entities", {"entities": ENTITIES})
    assert [block.text for block in first.content] == [written]
    assert first.structured_content == {"entities": ENTITIES}
    assert engine.requests[0].json_schema["type"] == "array"
    history = "\n".join(m.content for m in engine.requests[-1].messages)
    assert written in history


@pytest.mark.anyio
async def test_a_text_field_tool_gets_its_fixed_fields_in_the_structured_answer(tmp_path):
    engine = FakeEngine("Entities deleted successfully")
    capture = tmp_path / "memory.json"
    tool = {
        "name": "delete_entities",
        "inputSchema": {"type": "object"},
        "outputSchema": DELETE_SCHEMA,
        "simulation": {"text_field": "message", "fixed_fields": {"success": True}},
    }
    capture.write_text(json.dumps({"tools": [tool]}))
    async with Client(simulated_server(engine, mirror_domain(capture))) as client:
        result = await client.call_tool("delete_entities", {"entityNames": ["Ada"]})
    assert [block.text for block in result.content] == ["Entities deleted successfully"]
    assert result.structured_content == {
        "success": True,
        "message": "Entities deleted successfully",
    }
    assert engine.requests[0].json_schema is None  # no JSON grammar: the model writes text


def test_the_bundled_mcp_world_writes_structured_content_as_its_server_does():
    tool = load_domain("mcp").tool("get-structured-content")
    answer = {"temperature": 22.5, "conditions": "Sunny", "humidity": 65}
    assert tool.answer_text(answer) == '{"temperature":22.5,"conditions":"Sunny","humidity":65}'


def test_an_output_fault_damages_the_text_as_the_server_would_write_it():
    from aw_mcp.domain.answers import ToolAnswer
    from aw_mcp.faults.output import damage
    from aw_mcp.faults.scenario import TruncateEffect

    tool = ToolSpec(
        name="create_entities",
        outputSchema=ENTITIES_SCHEMA,
        simulation={"json_text": "indented", "json_text_of": "entities"},
    )
    many = [{"name": f"entity {i}", "entityType": "person"} for i in range(4)]
    answer = ToolAnswer(text=json.dumps(many, indent=2), structured={"entities": many})
    cut = damage(answer, TruncateEffect(kind="truncate"), tool.output_schema, 1, tool.answer_text)
    assert 0 < len(cut.structured["entities"]) < len(many)  # the list was cut
    assert cut.text == json.dumps(cut.structured["entities"], indent=2)

"""Schema-valid structured output: bounded grammars, the grammar-first sampler, and 100% valid
structuredContent from the embedded model through a real MCP client."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
from mcp import Client

from aw_mcp.domain.mirror import mirror_domain
from aw_mcp.engines.base import ChatMessage, GenerationRequest
from aw_mcp.engines.constraints import LlguidanceConstraint
from aw_mcp.engines.json_grammar import _worst_chars, bounded_pattern, grammar_view
from aw_mcp.engines.llama_cpp import LlamaCppEngine, LlamaCppOptions
from aw_mcp.testing import SMALL_MODEL, FakeEngine
from tests.conftest import TOOL_SURFACES
from tests.tool_calls import example_arguments, simulated_server, with_max_tokens

STRUCTURED_CAPTURES = [
    "filesystem.json",
    "memory.json",
    "time.json",
    "everything.json",
    "sequential-thinking.json",
]


def _captured_output_schemas() -> list[tuple[str, dict]]:
    files = sorted(TOOL_SURFACES.glob("*.json"))
    return [
        (f"{f.stem}/{t['name']}", t["outputSchema"])
        for f in files
        for t in json.loads(f.read_text())["tools"]
        if t.get("outputSchema")
    ]


OUTPUT_SCHEMAS = _captured_output_schemas()


# -- the bounded view ------------------------------------------------------------------------


def _walk(view):
    yield view
    for key in ("properties",):
        for sub in (view.get(key) or {}).values():
            yield from _walk(sub)
    for key in ("anyOf", "prefixItems"):
        for sub in view.get(key) or []:
            yield from _walk(sub)
    if isinstance(view.get("items"), dict):
        yield from _walk(view["items"])


@pytest.mark.parametrize("max_tokens", [32, 256, 2048])
@pytest.mark.parametrize(("tool", "schema"), OUTPUT_SCHEMAS, ids=[n for n, _ in OUTPUT_SCHEMAS])
def test_grammar_view_bounds_every_string_array_and_object(tool, schema, max_tokens):
    view = grammar_view(schema, max_tokens)
    for node in _walk(view):
        if node.get("type") == "string" and not {"pattern", "format"} & node.keys():
            assert node["maxLength"] <= max(16, max_tokens * 3)
        if node.get("type") == "array" and "items" in node:
            assert "maxItems" in node
        if node.get("type") == "object":
            assert node["additionalProperties"] is False
    # The view accepts a subset of the schema: its required keys are the schema's.
    assert set(view.get("required", [])) == set(schema.get("required", []))


def test_view_fits_the_budget_and_keeps_optional_properties_when_it_can():
    schema = {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "note": {"type": "string"},
        },
        "required": ["title"],
    }
    roomy = grammar_view(schema, 512)
    assert set(roomy["properties"]) == {"title", "tags", "note"}
    assert _worst_chars(roomy) <= 512 * 3
    tight = grammar_view(schema, 8)
    assert set(tight["properties"]) == {"title"}  # optional keys go first


@pytest.mark.parametrize(
    ("pattern", "matching", "other"),
    [
        (r"^\d{4}-\d{2}$", "2026-11", "2026-1"),
        (r"(?:ab)+c", "ababc", "abab"),
        (r"^v\d+\.\d+$", "v1.25", "v1x25"),
    ],
)
def test_bounded_patterns_accept_a_subset(pattern, matching, other):
    bounded = bounded_pattern(pattern)
    assert re.fullmatch(bounded, matching) and re.search(pattern, matching)
    assert not re.fullmatch(bounded, other)


# -- constraints in the engines ---------------------------------------------------------------


@pytest.fixture(scope="module")
def engine():
    engine = LlamaCppEngine(LlamaCppOptions(model=SMALL_MODEL, n_ctx=1024, threads=2))
    engine.load_now()
    return engine


@pytest.mark.parametrize(("tool", "schema"), OUTPUT_SCHEMAS, ids=[n for n, _ in OUTPUT_SCHEMAS])
def test_every_captured_output_schema_compiles_to_a_constraint(tool, schema, engine):
    n_vocab = engine._llm.n_vocab()
    for max_tokens in (16, 512):
        constraint = LlguidanceConstraint(engine._llguidance_tokenizer(), schema, max_tokens)
        assert constraint.allowed_mask(n_vocab).any()


def _takes(engine, schema: dict, text: str) -> bool:
    """Does the constraint take ``text``, token by token?"""
    constraint = LlguidanceConstraint(engine._llguidance_tokenizer(), schema, 512)
    try:
        for token in engine._llm.tokenize(text.encode(), add_bos=False):
            if not constraint.is_allowed(token):
                return False
            constraint.accept_token(token)
        return True
    finally:
        constraint.close()


def test_the_constraint_takes_indented_json_and_no_long_runs_of_whitespace(engine):
    """Servers that indent their JSON are recorded so, and a model that saw them writes so
    (the memory server's relations were answered ``[]`` while only compact JSON was taken);
    whitespace stays bounded, so a model looping on spaces is cut off."""
    schema = {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {"from": {"type": "string"}, "to": {"type": "string"}},
            "required": ["from", "to"],
        },
    }
    relations = [{"from": "design", "to": "backend"}, {"from": "docs", "to": "design"}]
    assert _takes(engine, schema, json.dumps(relations, indent=2))
    assert _takes(engine, schema, json.dumps(relations, separators=(",", ":")))
    assert not _takes(engine, schema, "[" + " " * 40 + "]")
    assert not _takes(engine, schema, "[\n" + " " * 24 + "]")


def _request(schema: dict, max_tokens: int, prompt: str = "Reply:") -> GenerationRequest:
    return GenerationRequest(
        messages=[ChatMessage(role="user", content=prompt)],
        max_tokens=max_tokens,
        json_schema=schema,
    )


@pytest.fixture
def looping(engine, monkeypatch):
    """The engine as a model stuck in a loop: it always wants the token "a"."""
    loop = engine._llm.tokenize(b"a", add_bos=False)[0]
    logits = engine._logits

    def biased():
        values = logits()
        values[loop] += 100.0
        return values

    monkeypatch.setattr(engine, "_logits", biased)  # the single-sequence path
    evaluate_all = engine._evaluate_all

    def biased_rows(tokens):
        rows = evaluate_all(tokens)
        rows[:, loop] += 100.0
        return rows

    monkeypatch.setattr(engine, "_evaluate_all", biased_rows)  # ... checking drafts
    sequences = engine._sequences  # the batched path (batch_slots > 1)
    if sequences is not None:
        decode = sequences.batch_decode

        def biased_batch(entries):
            outputs = decode(entries)
            for rows in outputs:
                rows[:, loop] += 100.0
            return outputs

        monkeypatch.setattr(sequences, "batch_decode", biased_batch)
    return engine


@pytest.mark.anyio
async def test_a_looping_model_is_cut_off_by_the_string_bound(looping):
    schema = {
        "type": "object",
        "properties": {"content": {"type": "string", "maxLength": 10}},
        "required": ["content"],
    }
    result = await looping.generate(_request(schema, 200))
    assert result.finish_reason == "stop", result.text
    assert json.loads(result.text) == {"content": "a" * 10}


@pytest.mark.anyio
async def test_near_max_tokens_the_document_is_closed(looping):
    closing_steps = looping.counters.extra.get("grammar_closing_steps", 0)
    max_tokens = 60  # the schema allows strings far longer than 60 tokens
    result = await looping.generate(_request(SCHEMA, max_tokens))
    value = json.loads(result.text)  # complete within max_tokens
    jsonschema.validate(value, SCHEMA)
    assert set(value["content"]) == {"a"}
    assert result.stats.completion_tokens <= max_tokens
    assert looping.counters.extra["grammar_closing_steps"] > closing_steps


SCHEMA = {
    "type": "object",
    "properties": {"content": {"type": "string"}, "lines": {"type": "integer"}},
    "required": ["content", "lines"],
}


@pytest.mark.anyio
async def test_grammar_first_masks_the_vocabulary_only_when_the_choice_breaks_the_grammar(
    engine, monkeypatch
):
    schema = json.loads((TOOL_SURFACES / "memory.json").read_text())["tools"][6]["outputSchema"]
    request = _request(schema, 96, "List the knowledge graph as JSON.")
    texts = {}
    for check_first in (True, False):
        monkeypatch.setattr(engine.options, "grammar_first", check_first)
        before = dict(engine.counters.extra)
        texts[check_first] = (await engine.generate(request)).text
        jsonschema.validate(json.loads(texts[check_first]), schema)
        steps = engine.counters.extra["grammar_steps"] - before.get("grammar_steps", 0)
        rejected = engine.counters.extra.get("grammar_rejections", 0) - before.get(
            "grammar_rejections", 0
        )
        if check_first:  # some choices broke the grammar, the others were kept as they were
            assert 0 < rejected < steps
        else:
            assert rejected == 0


@pytest.mark.anyio
async def test_transformers_output_with_a_json_schema_validates(transformers_engine):
    schema = json.loads((TOOL_SURFACES / "time.json").read_text())["tools"][0]["outputSchema"]
    request = GenerationRequest(
        messages=[
            ChatMessage(role="system", content="You are the get_current_time tool. Answer JSON."),
            ChatMessage(role="user", content='get_current_time {"timezone": "Europe/Paris"}'),
        ],
        max_tokens=64,
        json_schema=schema,
    )
    result = await transformers_engine.generate(request)
    jsonschema.validate(json.loads(result.text), schema)
    assert transformers_engine.counters.extra["grammar_steps"] > 0


# -- through a real MCP client -----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("capture", STRUCTURED_CAPTURES)
async def test_every_output_schema_tool_returns_valid_structured_content(capture, module_engine):
    """The official client raises on invalid structuredContent; no call may be an error."""
    domain = with_max_tokens(mirror_domain(TOOL_SURFACES / capture), 48)
    server = simulated_server(module_engine, domain)
    structured = [t for t in domain.tools if t.output_schema]
    assert structured
    async with Client(server) as client:
        for tool in structured:
            result = await client.call_tool(tool.name, example_arguments(tool.input_schema))
            assert not result.is_error, (tool.name, result.content)
            jsonschema.validate(result.structured_content, tool.output_schema)
            assert json.loads(result.content[0].text) == result.structured_content


@pytest.mark.anyio
async def test_max_tokens_below_the_shortest_valid_answer_still_gives_valid_output(module_engine):
    """3 tokens cannot hold convert_time's JSON; the engine extends the budget to its
    shortest valid form instead of returning a broken document."""
    domain = with_max_tokens(mirror_domain(TOOL_SURFACES / "time.json"), 3)
    server = simulated_server(module_engine, domain)
    arguments = {"source_timezone": "UTC", "time": "09:00", "target_timezone": "Asia/Tokyo"}
    async with Client(server) as client:
        result = await client.call_tool("convert_time", arguments)
    assert not result.is_error, result.content
    jsonschema.validate(result.structured_content, domain.tool("convert_time").output_schema)


@pytest.mark.anyio
@pytest.mark.parametrize("reply", ['{"content": "cut off', '{"content": 5}', "plain text"])
async def test_output_that_breaks_the_schema_is_retried_then_an_error(reply):
    """Whatever the engine returns, the client never sees invalid structuredContent."""
    fake = FakeEngine(reply)
    domain = mirror_domain(TOOL_SURFACES / "filesystem.json")
    server = simulated_server(fake, domain)
    async with Client(server) as client:
        result = await client.call_tool("read_text_file", {"path": "/tmp/a.txt"})
    assert result.is_error and result.structured_content is None
    assert "outputSchema" in result.content[0].text
    assert len(fake.requests) == 3  # the first answer and two retries
    assert fake.requests[0].json_schema == domain.tool("read_text_file").output_schema


def test_urls_and_emails_are_shaped_like_urls_and_emails():
    schema = {
        "type": "object",
        "properties": {
            "url": {"type": "string", "format": "uri"},
            "email": {"type": "string", "format": "email"},
        },
        "required": ["url", "email"],
    }
    view = grammar_view(schema, 128)["properties"]
    assert re.fullmatch(view["url"]["pattern"], "https://docs.python.org/3/whatsnew/3.14.html")
    assert not re.fullmatch(view["url"]["pattern"], "not a url")
    assert re.fullmatch(view["email"]["pattern"], "dev@example.com")


# -- the text a client receives ----------------------------------------------------------------


@pytest.mark.anyio
async def test_a_text_field_tool_is_answered_in_text_and_served_with_its_structure():
    """The filesystem server sends TEXT as its text and {"content": TEXT} as structuredContent
    (448 of 448 recorded structured calls). The bundled os world says so with
    ``simulation.text_field``: the model writes the text, as in the records it is trained on,
    without a JSON grammar, and the client gets both views."""
    from aw_mcp.domain.loader import load_domain

    listing = "[FILE] notes.txt\n[DIR] recipes"
    engine = FakeEngine(listing)
    domain = load_domain("os")
    assert domain.tool("list_directory").simulation.text_field == "content"
    async with Client(simulated_server(engine, domain)) as client:
        first = await client.call_tool("list_directory", {"path": "/home/alex"})
        await client.call_tool("list_directory", {"path": "/home/alex/recipes"})
    assert [block.text for block in first.content] == [listing]
    assert first.structured_content == {"content": listing}
    assert [r.json_schema for r in engine.requests] == [None, None]
    history = "\n".join(m.content for m in engine.requests[-1].messages)
    assert listing in history and '{"content"' not in history


def test_a_text_field_must_be_a_string_property_of_the_output_schema():
    from aw_mcp.domain.models import ToolSpec

    schema = {"type": "object", "properties": {"count": {"type": "integer"}}}
    for field in ("count", "missing"):
        with pytest.raises(ValueError, match="text_field"):
            ToolSpec(name="t", outputSchema=schema, simulation={"text_field": field})
    two_required = {
        "type": "object",
        "properties": {"content": {"type": "string"}, "size": {"type": "integer"}},
        "required": ["content", "size"],
    }
    with pytest.raises(ValueError, match="only one it requires"):
        ToolSpec(name="t", outputSchema=two_required, simulation={"text_field": "content"})
    with pytest.raises(ValueError, match="text_field"):
        ToolSpec(name="t", simulation={"text_field": "content"})

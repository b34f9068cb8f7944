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
from aw_mcp.engines.json_grammar import (
    GrammarFirstSampler,
    _worst_chars,
    bounded_pattern,
    grammar_view,
    json_schema_grammar,
    number_rule,
)
from aw_mcp.engines.llama_cpp import LlamaCppEngine, LlamaCppOptions, embedded_model_path
from tests.conftest import TOOL_SURFACES
from tests.fake_engine import FakeEngine
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


def test_numbers_respect_simple_bounds():
    positive = number_rule({"type": "integer", "exclusiveMinimum": 0, "maximum": 2**53 - 1})
    assert '"-"' not in positive and positive.startswith("[1-9]")
    # strictly below the limit: a subset that is right for maximum and exclusiveMaximum alike
    assert number_rule({"type": "integer", "minimum": 0, "maximum": 5}) == "[0-4]"
    assert number_rule({"type": "number", "minimum": 0, "maximum": 1}).startswith("[0-0]")
    assert '"-"?' in number_rule({"type": "number"})


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


# -- grammars in llama.cpp -------------------------------------------------------------------


@pytest.fixture(scope="module")
def llm():
    import llama_cpp

    return llama_cpp.Llama(
        model_path=str(embedded_model_path()), n_ctx=1024, n_threads=2, verbose=False
    )


@pytest.mark.parametrize(("tool", "schema"), OUTPUT_SCHEMAS, ids=[n for n, _ in OUTPUT_SCHEMAS])
def test_every_captured_output_schema_compiles_in_llama_cpp(tool, schema, llm):
    for max_tokens in (16, 512):
        grammar = json_schema_grammar(schema, max_tokens)
        sampler = GrammarFirstSampler(llm, grammar, llm._init_sampler(temp=0.0))
        sampler.close()


def _decode(llm, sampler, prompt: str, limit: int) -> tuple[str, int, bool]:
    """Greedy decoding with ``sampler``: (text, tokens, ended with end-of-generation)."""
    import llama_cpp

    llm.reset()
    llm.eval(llm.tokenize(prompt.encode(), add_bos=True, special=True))
    out = bytearray()
    for n in range(limit):
        token = sampler.sample(llm._ctx, -1)
        if llama_cpp.llama_vocab_is_eog(llm._model.vocab, token):
            return out.decode(errors="replace"), n, True
        out += llm._model.detokenize([token])
        llm.eval([token])
    return out.decode(errors="replace"), limit, False


def _looping_chain(llm, token: int):
    """A sampler chain that always wants ``token``: a model stuck in a loop."""
    from llama_cpp._internals import LlamaSampler

    chain = LlamaSampler()
    chain.add_logit_bias(llm.n_vocab(), {token: 100.0})
    chain.add_greedy()
    return chain


SCHEMA = {
    "type": "object",
    "properties": {"content": {"type": "string"}, "lines": {"type": "integer"}},
    "required": ["content", "lines"],
}


def test_a_looping_model_is_cut_off_by_the_string_bound(llm):
    loop = llm.tokenize(b"a", add_bos=False)[0]
    unconstrained, _, ended = _decode(llm, _looping_chain(llm, loop), "Reply:", 20)
    assert not ended and set(unconstrained) == {"a"}  # left alone it never stops
    grammar = json_schema_grammar(SCHEMA, 16)
    sampler = GrammarFirstSampler(llm, grammar, _looping_chain(llm, loop))
    text, _, ended = _decode(llm, sampler, "Reply:", 200)
    assert ended, "the grammar ends the document even though the model wants more"
    value = json.loads(text)
    jsonschema.validate(value, SCHEMA)
    assert set(value["content"]) == {"a"}
    assert len(value["content"]) == grammar_view(SCHEMA, 16)["properties"]["content"]["maxLength"]


def test_near_max_tokens_the_sampler_closes_the_document(llm):
    loop = llm.tokenize(b"a", add_bos=False)[0]
    max_tokens = 30
    grammar = json_schema_grammar(SCHEMA, 512)  # strings allowed far longer than 30 tokens
    sampler = GrammarFirstSampler(llm, grammar, _looping_chain(llm, loop), max_tokens=max_tokens)
    text, used, _ = _decode(llm, sampler, "Reply:", max_tokens)
    value = json.loads(text)  # complete within max_tokens
    jsonschema.validate(value, SCHEMA)
    assert used <= max_tokens and sampler.closing_steps > 0


@pytest.mark.anyio
async def test_grammar_first_gives_the_same_output_with_fewer_full_vocabulary_passes():
    schema = json.loads((TOOL_SURFACES / "time.json").read_text())["tools"][0]["outputSchema"]
    request = GenerationRequest(
        messages=[
            ChatMessage(role="system", content="You are the get_current_time tool. Answer JSON."),
            ChatMessage(role="user", content='get_current_time {"timezone": "Europe/Paris"}'),
        ],
        max_tokens=96,
        json_schema=schema,
    )
    outputs = {}
    for check_first in (True, False):
        engine = LlamaCppEngine(LlamaCppOptions(n_ctx=1024, n_threads=2, grammar_first=check_first))
        outputs[check_first] = (await engine.generate(request)).text
        await engine.aclose()
    assert outputs[True] == outputs[False]
    jsonschema.validate(json.loads(outputs[True]), schema)


# -- through a real MCP client -----------------------------------------------------------------


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


def test_grammar_first_checks_one_token_and_falls_back_only_when_rejected(llm):
    schema = json.loads((TOOL_SURFACES / "memory.json").read_text())["tools"][6]["outputSchema"]
    grammar = json_schema_grammar(schema, 96)
    prompt = (
        "<|im_start|>user\nList the knowledge graph as JSON.<|im_end|>\n<|im_start|>assistant\n"
    )
    texts = {}
    for check_first in (True, False):
        sampler = GrammarFirstSampler(
            llm, grammar, llm._init_sampler(temp=0.0), check_first=check_first
        )
        texts[check_first], _, _ = _decode(llm, sampler, prompt, 96)
        if check_first:
            # The trick did work: some choices broke the grammar, most did not.
            assert 0 < sampler.rejections < sampler.steps / 2
    assert texts[True] == texts[False]


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

"""The seven bundled domains: valid data, real tool surfaces, and answers from the real model."""

from __future__ import annotations

import json

import jsonschema
import pytest
from mcp import Client

from aw_mcp.domain.loader import bundled_domain_names, load_domain
from aw_mcp.testing import FakeEngine
from tests.conftest import TOOL_SURFACES, small_engine
from tests.tool_calls import simulated_server, with_max_tokens

SEVEN = ["mcp", "search", "terminal", "swe", "android", "web", "os"]

# Where each domain's tools come from: captures of real servers (tests/data/tool-surfaces) ...
CAPTURES = {
    "mcp": ["everything.json"],
    "search": ["brave-search.json", "tavily.json", "exa.json", "fetch.json"],
    "terminal": ["desktop-commander.json"],
    "swe": ["git.json", "filesystem.json"],
    "android": ["mobile.json"],
    "web": ["playwright.json"],
    "os": ["filesystem.json"],
}
# ... except these, which are ours (no real server fixes their names).
OWN_TOOLS = {
    "terminal": {"run_command"},
    "swe": {"run_command", "run_tests"},
    "os": {
        "desktop_snapshot",
        "desktop_click",
        "desktop_type",
        "desktop_hotkey",
        "desktop_open_app",
        "desktop_scroll",
    },
}
WIRE_FIELDS = ("title", "description", "inputSchema", "outputSchema", "annotations")


def test_all_seven_domains_are_bundled():
    assert set(SEVEN) <= set(bundled_domain_names())


@pytest.mark.parametrize("name", SEVEN)
def test_domain_file_is_complete(name):
    domain = load_domain(name)
    assert domain.instructions.strip() and domain.description
    assert domain.world.facts, "an initial world is pinned as facts"
    assert 1 <= len(domain.demonstrations) <= 3
    for tool in domain.tools:
        assert tool.simulation.guidance, f"{name}/{tool.name} says what the real tool prints"
    json.dumps(domain.world.model_dump())  # facts are plain JSON (no YAML dates)
    for demo in domain.demonstrations:
        schema = domain.tool(demo.tool).input_schema
        jsonschema.validate(demo.arguments, schema)  # demonstrations are valid calls
        tool = domain.tool(demo.tool)
        if tool.model_output_schema:  # what the model writes; a text-answered tool's is text
            jsonschema.validate(json.loads(demo.observation), tool.model_output_schema)
        if tool.output_schema and tool.simulation.text_field:
            structured = tool.structured_answer(demo.observation)
            jsonschema.validate(structured, tool.output_schema)


@pytest.mark.parametrize("name", SEVEN)
def test_tools_are_wire_identical_to_real_servers(name):
    real = {}
    for file in CAPTURES[name]:
        for tool in json.loads((TOOL_SURFACES / file).read_text())["tools"]:
            real.setdefault(tool["name"], tool)
    domain = load_domain(name)
    for tool in domain.tools:
        if tool.name in OWN_TOOLS.get(name, set()):
            continue
        assert tool.name in real, f"{name}/{tool.name} is not a tool of {CAPTURES[name]}"
        ours = tool.model_dump(by_alias=True, exclude={"simulation"}, exclude_none=True)
        for field in WIRE_FIELDS:
            mine, theirs = ours.get(field), real[tool.name].get(field)
            if field == "description":  # YAML block scalars drop trailing spaces on lines
                mine, theirs = _strip_line_ends(mine), _strip_line_ends(theirs)
            assert mine == theirs, f"{tool.name}.{field}"


def _strip_line_ends(text: str | None) -> str | None:
    return None if text is None else "\n".join(line.rstrip() for line in text.splitlines())


@pytest.fixture(scope="module")
def module_engine():
    """The served default context window (8,192): the web domain's prompt, with its real
    Playwright demonstrations, takes about 5,000 tokens in the default profile."""
    return small_engine(n_ctx=8192)


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("name", SEVEN)
async def test_domain_is_listed_and_answers_through_an_mcp_client(name, module_engine):
    """A real MCP client lists the domain's tools and gets the embedded model's answer."""
    domain = with_max_tokens(load_domain(name), 24)
    server = simulated_server(module_engine, domain)
    demo = domain.demonstrations[0]
    async with Client(server) as client:
        listed = await client.list_tools()
        assert [t.name for t in listed.tools] == [t.name for t in domain.tools]
        result = await client.call_tool(demo.tool, demo.arguments)
    assert not result.is_error, result.content
    assert result.content[0].text.strip(), "the world model answered with nothing"
    if domain.tool(demo.tool).output_schema:
        # The client already validated it; check it is really there.
        assert result.structured_content is not None


@pytest.mark.anyio
async def test_search_repeats_a_query_and_fetch_sees_the_earlier_snippet():
    """Same query, same results (replay, no model call); a fetch is simulated with the search
    results in its history, so the page can agree with its snippet."""
    snippet = '{"url": "https://example.org/a", "title": "A", "description": "Fact 42."}'
    fake = FakeEngine(snippet)
    server = simulated_server(fake, load_domain("search"))
    query = {"query": "fact about a"}
    async with Client(server) as client:
        first = await client.call_tool("brave_web_search", query)
        again = await client.call_tool("brave_web_search", query)
        await client.call_tool("fetch", {"url": "https://example.org/a"})
    assert again.content[0].text == first.content[0].text == snippet
    assert len(fake.requests) == 2  # the repeated search was replayed, not simulated
    assert "Fact 42." in fake.last_prompt and "Action: fetch" in fake.last_prompt


@pytest.mark.data
def test_no_generation_budget_cuts_a_real_observation_of_its_tool():
    """Every recorded real observation of a bundled domain's tool fits the tokens the default
    model may write for it (the tool's max_tokens, else its domain's): a budget below it
    would cut every long answer short (web's snapshots had 512 for up to 2,502 tokens)."""
    from pathlib import Path

    from aw_mcp.models.catalogue import DEFAULT_MODEL
    from aw_mcp.models.fetch import resolve_model
    from aw_mcp.records.reader import load_record_dir
    from aw_mcp.training.examples import ServingFormat

    fmt = ServingFormat.from_gguf(resolve_model(DEFAULT_MODEL))
    root = Path(__file__).resolve().parent.parent / "data"
    folders = [p.parent for p in root.rglob("*.jsonl")]
    longest: dict[tuple[str, str], int] = {}
    for folder in sorted(set(folders)):
        for episode in load_record_dir(folder):
            if episode.domain not in SEVEN:
                continue
            for record in episode.records:
                key = (episode.domain, record.tool)
                tokens = len(fmt.tokenize_text(record.observation, False))
                longest[key] = max(longest.get(key, 0), tokens)
    assert {domain for domain, _ in longest} >= {"terminal", "os", "swe", "web", "mcp"}
    cut = []
    for (name, tool_name), tokens in sorted(longest.items()):
        domain = load_domain(name)
        tool = domain.tool(tool_name)
        budget = domain.answer_budget(tool)
        if tokens > budget:
            cut.append(f"{name}/{tool_name}: {tokens} real tokens > budget {budget}")
    assert not cut, "\n".join(cut)

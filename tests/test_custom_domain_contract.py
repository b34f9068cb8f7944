"""A user's own small domain served by the shipped default (issue 48's case): a resource its
world facts give reads as given, completions are values (never fence lines), and what the
model writes for a resource or a prompt is not wrapped in a fence. Real default model."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters, types

from aw_mcp.server.world_surface import FENCE_LINE

pytestmark = [pytest.mark.quality, pytest.mark.anyio]
NOTES_DOMAIN = Path(__file__).parent / "data" / "notes_domain.yaml"


async def test_the_default_follows_a_small_domain_s_contract():
    env = {k: v for k, v in os.environ.items() if k != "AW_MCP_MODEL"}  # the plain default
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "aw_mcp", "serve", "--threads", "1", "--simulator", str(NOTES_DOMAIN)],
        env={**env, "AW_MCP_LOG_LEVEL": "WARNING"},
    )
    prompt_ref = types.PromptReference(type="ref/prompt", name="summarize")
    async with Client(params) as client:
        todo = await client.read_resource("notes://todo.md")
        completion = await client.complete(prompt_ref, {"name": "note", "value": "to"})
        await client.call_tool("write_note", {"name": "b.md", "text": "ship it"})
        written = await client.read_resource("notes://b.md")
        prompt = await client.get_prompt("summarize", {"note": "todo.md"})
    assert todo.contents[0].text == "- buy milk"
    assert not [v for v in completion.completion.values if FENCE_LINE.match(v)]
    for text in (written.contents[0].text, prompt.messages[0].content.text):
        assert not text.lstrip().startswith("```"), text
    assert "ship it" in written.contents[0].text

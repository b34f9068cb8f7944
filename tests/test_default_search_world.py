"""What a new user gets from plain `aw-mcp serve --simulator search`: Brave's and Tavily's
search answers in the real servers' forms.

No search engine runs offline, so there is no recorded truth to compare the results with;
the forms come from the servers' sources: brave-search-mcp-server writes each web result as
``JSON.stringify({url, title, description, extra_snippets})``, tavily-mcp heads its answer
``Detailed Results:`` and writes each result as Title, URL and Content lines. Without the
tools' answer grammars the default world model (plain Qwen2.5-Coder-0.5B: no adapter is
trained on search) left a Brave result's JSON unclosed and answered Tavily's search in its
site-map form. Without the search world's loop rule (``generation.loop_guard``: no URL named
twice in one answer) it gave Tavily's one result three times, URL and all. The model runs on
the CPU, one thread.
"""

from __future__ import annotations

import json
import re

import anyio
import pytest
from mcp import Client

from tests.helpers import default_server, text_of

pytestmark = pytest.mark.quality

_TAVILY_RESULT = re.compile(r"\n\nTitle: [^\n]+\nURL: https?://\S+\nContent: [^\n]+")


def test_search_answers_keep_the_real_servers_forms():
    async def episode() -> tuple[str, str]:
        async with Client(default_server("--simulator", "search")) as client:
            brave = {"query": "python asyncio tutorial", "count": 3}
            tavily = {"query": "rust borrow checker explained"}
            return (
                text_of(await client.call_tool("brave_web_search", brave)),
                text_of(await client.call_tool("tavily_search", tavily)),
            )

    brave, tavily = anyio.run(episode)
    brave_urls = []
    for block in brave.split("\n\n"):
        result = json.loads(block)  # each result is one complete JSON object
        assert list(result)[:3] == ["url", "title", "description"], brave
        assert block == json.dumps(result, separators=(",", ":"), ensure_ascii=False), block
        brave_urls.append(result["url"])
    assert tavily.startswith(("Detailed Results:\n\nTitle: ", "Answer: ")), tavily
    assert _TAVILY_RESULT.search(tavily), tavily
    tavily_urls = re.findall(r"^URL: (\S+)$", tavily, re.MULTILINE)
    for urls in brave_urls, tavily_urls:
        assert len(set(urls)) == len(urls), urls  # no result given twice

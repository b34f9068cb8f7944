"""What a new user gets from plain `aw-mcp serve --simulator web`: the default world model
(Qwen2.5-Coder-0.5B with its bundled web adapter) shows the bundled world's site as the real
one is, and a click on a ref of its own snapshot leads where the real link leads.

The truth is not written here: it is the real Playwright MCP server's answers on the real
Bookshop, recorded in data/web/train (its home page snapshot) and web/banner (the page
its Books link opens). The model runs on the CPU, one thread.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import anyio
import pytest
from mcp import Client

from aw_mcp.evaluation.metrics import page_state_well_formed
from aw_mcp.records.reader import load_record_dir
from tests.helpers import default_server, text_of

pytestmark = pytest.mark.quality

HOME = "http://127.0.0.1:8431/"
RECORDS = Path(__file__).resolve().parent.parent / "data" / "web" / "train"
BANNER_RECORDS = RECORDS.parent / "banner"
_URL = re.compile(r"^- Page URL: (\S+)", re.M)
_TITLE = re.compile(r"^- Page Title: (.+)$", re.M)
_LINK = re.compile(r'- link "([^"]+)" \[ref=([^\]]+)\]')


def _real_books_click_url() -> str:
    """Where the real Books link of the banner leads, clicked by a fresh ref (web/banner)."""
    for episode in load_record_dir(BANNER_RECORDS):
        for record in episode.records:
            clicked_books = record.arguments.get("element") == "Books link"
            if clicked_books and (url := _URL.search(record.observation)):
                return url.group(1)
    raise AssertionError("no real click on the Books link is recorded")


def _real_home_snapshot() -> str:
    """The real snapshot of the Bookshop's home page, as first recorded with an empty cart."""
    for episode in load_record_dir(RECORDS):
        for record in episode.records:
            text = record.observation
            url = _URL.search(text) if record.tool == "browser_snapshot" else None
            if url and url.group(1) == HOME and 'link "Cart (0)"' in text:
                return text
    raise AssertionError("no real snapshot of the empty-cart home page is recorded")


@functools.cache
def _served_episode() -> tuple[str, str]:
    """Plain `serve --simulator web`: navigate home, snapshot, click the snapshot's Books link
    by its ref. Run once for both tests (about a minute on one thread)."""

    async def episode() -> tuple[str, str]:
        async with Client(default_server("--simulator", "web")) as client:
            await client.call_tool("browser_navigate", {"url": HOME})
            snapshot = text_of(await client.call_tool("browser_snapshot", {}))
            ref = dict(_LINK.findall(snapshot)).get("Books", "e5")
            arguments = {"element": "Books link", "target": ref}
            return snapshot, text_of(await client.call_tool("browser_click", arguments))

    return anyio.run(episode)


def test_plain_web_serve_shows_the_bundled_site_as_the_real_one_is():
    real = _real_home_snapshot()
    snapshot, _ = _served_episode()
    assert page_state_well_formed(snapshot), snapshot
    assert _TITLE.search(snapshot).group(1) == _TITLE.search(real).group(1)
    # Every link of the banner the real page has (Home, Books, Gift cards, Cart, Sign in).
    banner = {"Home", "Books", "Gift cards", "Cart (0)", "Sign in"}
    assert banner <= {name for name, _ in _LINK.findall(real)}  # (the truth has them)
    assert banner <= {name for name, _ in _LINK.findall(snapshot)}, snapshot


def test_a_click_on_a_served_ref_leads_where_the_real_link_leads():
    snapshot, clicked = _served_episode()
    assert "Books" in dict(_LINK.findall(snapshot)), snapshot
    url = _URL.search(clicked)
    # Where the real Books link leads (w1 and w2, trained before any episode followed the
    # banner's links, opened /books/1, the first book).
    real = _real_books_click_url()
    assert real == HOME + "books"  # (the truth: the catalogue)
    assert url and url.group(1) == real, clicked

"""`serve --transport http --ui`: the live episodes page over real HTTP on loopback, answered by
the embedded world model, behind the same Host/Origin checks and bearer token as /mcp."""

from __future__ import annotations

import html
import os

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from aw_mcp.server.episode_identity import EPISODE_HEADER
from tests.helpers import TINY_DOMAIN, text_of
from tests.http_support import http_serve
from tests.test_viewer import step_items

pytestmark = pytest.mark.anyio


def ui_url(mcp_url: str) -> str:
    return mcp_url.removesuffix("/mcp") + "/ui"


async def test_the_ui_lists_live_episodes_and_their_steps(tmp_path):
    args = ["--simulator", str(TINY_DOMAIN), "--ui"]
    with http_serve(tmp_path / "server.log", *args) as url:
        http = httpx2.AsyncClient(headers={EPISODE_HEADER: "ui-episode"}, timeout=120)
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            answered = await client.call_tool("run_command", {"command": "echo hello"})
            refused = await client.call_tool("run_command", {})
        async with httpx2.AsyncClient(timeout=30) as plain:
            page = await plain.get(ui_url(url))
            posted = await plain.post(ui_url(url))
            port = url.split(":")[2].split("/")[0]
            foreign_host = await plain.get(ui_url(url), headers={"Host": "attacker.example"})
            foreign_origin = await plain.get(
                ui_url(url), headers={"Origin": "http://attacker.example"}
            )
            same_origin = await plain.get(
                ui_url(url), headers={"Origin": f"http://127.0.0.1:{port}"}
            )
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in page.headers["content-security-policy"]
    steps = step_items(page.text)
    assert [(s["data-tool"], s["data-source"], s["data-error"]) for s in steps] == [
        ("run_command", "model", "0"),
        ("run_command", "invalid-arguments", "1"),
    ]
    assert "ui-episode" in page.text
    assert html.escape(text_of(answered), quote=False) in page.text  # the model's answer
    assert refused.is_error
    assert posted.status_code == 405  # read-only
    assert foreign_host.status_code == 421
    assert foreign_origin.status_code == 403
    assert same_origin.status_code == 200


def test_no_ui_unless_asked(tmp_path):
    with http_serve(tmp_path / "server.log", "--simulator", str(TINY_DOMAIN)) as url:
        assert httpx2.get(ui_url(url), timeout=30).status_code == 404


def test_the_ui_needs_the_bearer_token_when_one_is_set(tmp_path):
    env = {**os.environ, "AW_MCP_AUTH_TOKEN": "s3cret-token"}
    args = ["--simulator", str(TINY_DOMAIN), "--ui"]
    with http_serve(tmp_path / "server.log", *args, env=env) as url:
        assert httpx2.get(ui_url(url), timeout=30).status_code == 401
        allowed = httpx2.get(
            ui_url(url), headers={"Authorization": "Bearer s3cret-token"}, timeout=30
        )
        assert allowed.status_code == 200
        assert "No episodes yet." in allowed.text

"""Real transports: `aw-mcp serve` as a stdio subprocess and as an HTTP server on loopback."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from aw_mcp.records.sink import record_file_name
from aw_mcp.server.episode_identity import EPISODE_HEADER
from tests.helpers import TINY_DOMAIN, text_of
from tests.http_support import SERVE, http_serve

pytestmark = pytest.mark.anyio


@pytest.fixture
def http_server(tmp_path) -> Iterator[tuple[str, Path]]:
    """`aw-mcp serve --transport http` on a free loopback port, with call records on disk."""
    records = tmp_path / "records"
    args = ["--simulator", str(TINY_DOMAIN), "--record-dir", str(records)]
    with http_serve(tmp_path / "server.log", *args) as url:
        yield url, records


async def test_stdio_subprocess_lists_and_answers():
    params = StdioServerParameters(
        command=SERVE[0],
        args=[*SERVE[1:], "--simulator", str(TINY_DOMAIN)],
        env={**os.environ, "AW_MCP_LOG_LEVEL": "WARNING"},
    )
    for mode in ("legacy", "auto"):
        async with Client(params, mode=mode) as client:
            listed = await client.list_tools()
            assert [t.name for t in listed.tools] == ["run_command", "read_file"]
            first = await client.call_tool("run_command", {"command": "echo one"})
            bad = await client.call_tool("run_command", {})
        assert first.is_error is False and text_of(first) != ""
        assert bad.is_error is True and "'command' is a required property" in text_of(bad)


@pytest.mark.slow
async def test_bundled_terminal_domain_over_stdio_with_env_configuration():
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "aw_mcp", "serve"],
        env={
            **os.environ,
            "AW_MCP_N_CTX": "4096",
            "AW_MCP_THREADS": "1",
            "AW_MCP_LOG_LEVEL": "WARNING",
        },
    )
    async with Client(params) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"run_command", "start_process", "read_file", "write_file"} <= names
        result = await client.call_tool("list_directory", {"path": "/home/dev/project"})
    assert result.is_error is False


async def test_http_episodes_by_header_and_by_legacy_session(http_server):
    url, records = http_server
    for episode in ("agent-1", "agent-2"):
        http = httpx2.AsyncClient(headers={EPISODE_HEADER: episode}, timeout=60)
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            await client.call_tool("run_command", {"command": f"echo {episode}"})
            await client.call_tool("run_command", {"command": "pwd"})
    async with Client(url, mode="legacy") as client:  # no header: the MCP session id
        result = await client.call_tool("run_command", {"command": "whoami"})
        assert result.is_error is False
    files = sorted(p.name for p in records.glob("*.jsonl"))
    assert record_file_name("agent-1") in files and record_file_name("agent-2") in files
    assert any(name.startswith("session-") for name in files)
    agent1 = (records / record_file_name("agent-1")).read_text()
    assert "echo agent-1" in agent1 and "echo agent-2" not in agent1
    assert agent1.count("\n") == 2


async def test_http_modern_client_lists_and_answers(http_server):
    url, _ = http_server
    async with Client(url, mode="auto") as client:
        listed = await client.list_tools()
        result = await client.call_tool("read_file", {"path": "/home/test/a.txt"})
    assert len(listed.tools) == 2
    assert result.is_error is False

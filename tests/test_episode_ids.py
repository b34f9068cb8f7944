"""Episode ids: a client's id is used exactly or refused, never cut; record file names are
never hidden; every server process has episode ids of its own."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from mcp import Client, MCPError, StdioServerParameters

from aw_mcp.records.sink import record_file_name
from aw_mcp.server.app import build_server
from aw_mcp.server.episode_identity import (
    EPISODE_HEADER,
    EPISODE_META_KEY,
    MAX_EPISODE_ID_LENGTH,
    PROCESS_EPISODE,
    RUN,
    episode_request,
)
from aw_mcp.testing import FakeEngine
from tests.helpers import TINY_DOMAIN, make_server, make_simulator
from tests.http_support import NO_MODEL, SERVE

pytestmark = pytest.mark.anyio
ANSWER_EVERY_CALL = Path(__file__).parent / "data" / "answer-every-call.faults.yaml"


async def test_ids_longer_than_the_limit_are_refused_not_cut_into_one_episode():
    simulator, server = make_server(FakeEngine("ok"))
    prefix = "rollout-" + "x" * (MAX_EPISODE_ID_LENGTH - 8)
    longest = "y" * MAX_EPISODE_ID_LENGTH
    async with Client(server) as client:
        for suffix in ("-a", "-b"):
            with pytest.raises(MCPError) as refused:
                meta = {EPISODE_META_KEY: prefix + suffix}
                await client.call_tool("run_command", {"command": "ls"}, meta=meta)
            assert refused.value.error.code == -32602
            assert f"{MAX_EPISODE_ID_LENGTH + 2} characters long" in refused.value.error.message
            assert f"at most {MAX_EPISODE_ID_LENGTH}" in refused.value.error.message
        result = await client.call_tool(
            "run_command", {"command": "ls"}, meta={EPISODE_META_KEY: longest}
        )
    assert result.is_error is False
    # nothing was recorded under a cut id; the id at the limit is kept exactly
    assert [e.episode_id for e in simulator.episodes.all()] == [longest]


def test_a_long_header_id_is_refused_too():
    headers = {EPISODE_HEADER: "h" * (MAX_EPISODE_ID_LENGTH + 1)}
    ctx = SimpleNamespace(request=SimpleNamespace(headers=headers), meta=None)
    with pytest.raises(MCPError, match="Aw-Episode-Id header is 201 characters long"):
        episode_request(ctx)
    headers[EPISODE_HEADER] = "h" * MAX_EPISODE_ID_LENGTH
    assert episode_request(ctx).episode_id == headers[EPISODE_HEADER]


@pytest.mark.parametrize("episode_id", [".hidden", "..", ".", "./x"])
def test_record_file_names_are_never_hidden(episode_id):
    name = record_file_name(episode_id)
    assert not name.startswith(".") and name.endswith(".jsonl")
    assert "/" not in name
    assert name != record_file_name("_" + episode_id[1:])  # the hash keeps ids apart


async def test_legacy_connections_get_episode_ids_of_this_run(tmp_path):
    server = build_server(make_simulator(FakeEngine("ok"), record_dir=tmp_path))
    for _ in range(2):
        async with Client(server, mode="legacy") as client:
            await client.call_tool("run_command", {"command": "ls"})
    episodes = {json.loads(f.read_text())["episode"] for f in tmp_path.glob("*.jsonl")}
    assert len(episodes) == 2
    assert all(e.startswith(f"connection-{RUN}-") for e in episodes), episodes
    assert f"process-{RUN}" == PROCESS_EPISODE


def _serve_stdio_once(records: Path) -> None:
    import anyio

    params = StdioServerParameters(
        command=SERVE[0],
        args=[
            *SERVE[1:],
            *NO_MODEL,
            "--simulator",
            str(TINY_DOMAIN),
            "--faults",
            str(ANSWER_EVERY_CALL),
            "--record-dir",
            str(records),
        ],
        env={**os.environ, "AW_MCP_LOG_LEVEL": "WARNING"},
    )

    async def run() -> None:
        async with Client(params, mode="auto") as client:  # stateless: no connection episode
            await client.call_tool("run_command", {"command": "echo"})

    anyio.run(run)


def test_each_stdio_process_records_an_episode_of_its_own(tmp_path):
    """Two `aw-mcp serve` runs on stdio append to two record files, under two episode ids."""
    records = tmp_path / "records"
    _serve_stdio_once(records)
    _serve_stdio_once(records)
    files = sorted(records.glob("*.jsonl"))
    episodes = [json.loads(f.read_text().splitlines()[0])["episode"] for f in files]
    assert len(files) == 2 and len(set(episodes)) == 2, episodes
    assert all(e.startswith("process-") for e in episodes)

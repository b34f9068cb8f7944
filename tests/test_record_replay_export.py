"""Ground truth end to end: a real MCP server's episode recorded through `aw-mcp record`,
replayed by `serve --replay` to a real client with identical observations and no model, and
exported to both formats (AgentWorldBench samples, chat messages)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from mcp import Client

from aw_mcp.capture.record_proxy import proxy_target
from aw_mcp.cli import main
from aw_mcp.server.app import build_server
from aw_mcp.server.episode_identity import EPISODE_META_KEY
from aw_mcp.testing import FakeEngine
from aw_mcp.wiring.assemble import build_simulator
from aw_mcp.wiring.settings import ServeSettings

pytestmark = pytest.mark.anyio

CALLS = [
    ("get_current_time", {"timezone": "Europe/Paris"}),
    ("convert_time", {"source_timezone": "UTC", "time": "09:30", "target_timezone": "Asia/Tokyo"}),
    ("get_current_time", {"timezone": "Nowhere/Atlantis"}),  # a real error result
]


def _content(result) -> tuple[str, object, bool]:
    return (result.content[0].text, result.structured_content, result.is_error)


async def test_a_real_servers_episode_records_replays_and_exports(tmp_path: Path):
    pytest.importorskip("mcp_server_time")
    records = tmp_path / "records"
    proxy = proxy_target(records, [sys.executable, "-m", "mcp_server_time"], "--episode", "ep")
    async with Client(proxy) as client:
        real = [_content(await client.call_tool(tool, args)) for tool, args in CALLS]
    assert real[2][2] is True and real[0][2] is False

    # Replay: the captured tools/list is served, the recordings answer, the model never does.
    never = FakeEngine(fail_with="the model was asked although a recording matches")
    settings = ServeSettings(
        tools_from=[records / "tools" / "mcp-time.json"], replay=records, replay_miss="error"
    )
    simulator = build_simulator(settings, engine=never)
    async with Client(build_server(simulator)) as client:
        replayed = [
            _content(await client.call_tool(tool, args, meta={EPISODE_META_KEY: "agent"}))
            for tool, args in CALLS
        ]
        sources = [r.source for r in simulator.episodes.find("agent")[0].records]
    assert replayed == real
    assert sources == ["replay"] * 3 and never.requests == []

    # Export: one AgentWorldBench sample per turn, one chat conversation per episode.
    for fmt in ("agentworldbench", "chat"):
        assert main(["export", str(records), "--out", str(tmp_path / fmt), "--format", fmt]) == 0
    samples = [
        json.loads(line)
        for line in (tmp_path / "agentworldbench" / "mcp-time_test.jsonl").read_text().splitlines()
    ]
    assert [s["turn_idx"] for s in samples] == [1, 2, 3]
    assert {s["total_turns"] for s in samples} == {3}
    assert "Asia/Tokyo" in samples[1]["current_prompt"]
    assert real[2][0] in samples[2]["response"][2]
    [chat] = [
        json.loads(line)
        for line in (tmp_path / "chat" / "mcp-time_chat.jsonl").read_text().splitlines()
    ]
    observations = [m["content"] for m in chat["messages"] if m.get("observation")]
    assert len(observations) == 3 and observations[2].endswith(real[2][0])

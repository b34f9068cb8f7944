"""A call with huge arguments is refused at once, and nobody else waits for it.

Before ``--max-argument-bytes``, a 3 MB argument reached the world model's tokenizer: the
prompt was tokenized (several times, while trimming history) for ~40 s before the call was
refused as too long, and other clients' requests waited behind it. Runs a real
``aw-mcp serve --transport http`` subprocess with the embedded model.
"""

from __future__ import annotations

import json

import anyio
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from aw_mcp.records.sink import record_file_name
from aw_mcp.server.app import build_server
from aw_mcp.server.episode_identity import EPISODE_HEADER
from aw_mcp.testing import FakeEngine
from tests.faults_support import in_episode, make_simulator
from tests.helpers import TINY_DOMAIN, text_of
from tests.http_support import http_serve

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore:ping is removed")]

HUGE_COMMAND = "echo " + "x" * 3_000_000  # 3 MB: over the HTTP body limit (576 KiB)
LARGE_COMMAND = "echo " + "x" * 400_000  # over the argument limit, under the body limit
DEFAULT_LIMIT = 262_144


def episode_client(url: str, episode: str) -> tuple[httpx2.AsyncClient, Client]:
    http = httpx2.AsyncClient(headers={EPISODE_HEADER: episode}, timeout=300)
    return http, Client(streamable_http_client(url, http_client=http), mode="legacy")


async def test_a_huge_argument_is_refused_at_once_while_other_clients_are_answered(tmp_path):
    records = tmp_path / "records"
    args = ["--simulator", str(TINY_DOMAIN), "--record-dir", str(records)]
    with http_serve(tmp_path / "server.log", *args) as url:
        huge_http, huge_client = episode_client(url, "huge")
        other_http, other_client = episode_client(url, "other")
        async with huge_http, huge_client, other_http, other_client:
            # The model is loaded (and warm) before anything is timed.
            warm = await other_client.call_tool("run_command", {"command": "echo warm"})
            assert warm.is_error is False
            refusal = None
            too_large: MCPError | None = None

            async def send_huge() -> None:
                nonlocal refusal, too_large
                # A body over the HTTP limit is refused on its size, before it is parsed.
                with pytest.raises(MCPError) as raised:
                    await huge_client.call_tool("run_command", {"command": HUGE_COMMAND})
                too_large = raised.value
                refusal = await huge_client.call_tool("run_command", {"command": LARGE_COMMAND})

            async with anyio.create_task_group() as tg:
                tg.start_soon(send_huge)
                await anyio.sleep(1.0)  # the huge request is sent and being handled
                # Neither waits for the huge call (it used to take ~40 s to be refused).
                with anyio.fail_after(15):
                    await other_client.send_ping()
                    answer = await other_client.call_tool("run_command", {"command": "pwd"})
                assert answer.is_error is False

        assert too_large is not None and too_large.error.message == "Request body too large"
        assert "--max-argument-bytes" in str(too_large.error.data)
        assert refusal is not None and refusal.is_error is True
        text = text_of(refusal)
        size = len(json.dumps({"command": LARGE_COMMAND}, separators=(",", ":")).encode())
        assert f"{size} bytes" in text and f"{DEFAULT_LIMIT} bytes" in text, text
        assert "--max-argument-bytes" in text
        # Recorded like any refused call, without a copy of the arguments (the body refused
        # before it was read is not recorded: nothing of it was parsed).
        [line] = (records / record_file_name("huge")).read_text().splitlines()
        record = json.loads(line)
        assert record["source"] == "invalid-arguments"
        assert len(line) < 10_000


async def test_the_limit_is_a_setting_and_a_refused_call_costs_the_episode_nothing():
    """Plumbing, with the fake engine: the refusal never reaches the engine or the history."""
    engine = FakeEngine("found 3 items")
    simulator = make_simulator(engine=engine)
    client = Client(build_server(simulator, max_argument_bytes=2048))
    async with client:
        refused = await client.call_tool("search", {"query": "q" * 3000}, meta=in_episode("e"))
        fits = await client.call_tool("search", {"query": "q" * 1000}, meta=in_episode("e"))
    assert refused.is_error is True
    assert "2048 bytes" in text_of(refused) and "3012 bytes" in text_of(refused)
    assert fits.is_error is False and len(engine.requests) == 1
    [episode] = simulator.episodes.find("e")
    assert [r.source for r in episode.records] == ["invalid-arguments", "model"]
    assert episode.records[0].arguments["_bytes"] == 3012
    assert [t.action.arguments for t in episode.turns] == [{"query": "q" * 1000}]

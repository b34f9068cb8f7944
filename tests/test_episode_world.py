"""A client gives each episode its own world (``_meta["aw-mcp/world"]``), through a real MCP
client: its facts reach the prompt on top of the served world, other episodes keep theirs, a
world cannot change mid-episode (a reset starts a new one), and a malformed world is refused
with an error naming the field, before the world model is asked.

The world model is the FakeEngine (plumbing: what reached the prompt).
"""

from __future__ import annotations

import pytest
from mcp import Client

from aw_mcp.server.episode_identity import EPISODE_META_KEY, RESET_META_KEY, WORLD_META_KEY
from aw_mcp.testing import FakeEngine
from tests.helpers import make_server, text_of

pytestmark = pytest.mark.anyio

SRV_WORLD = {"facts": {"user": "ops", "working_directory": "/srv/app"}, "notes": ["No sudo."]}


def system_prompt(engine: FakeEngine, call: int = -1) -> str:
    return engine.requests[call].messages[0].content


async def test_an_episode_world_is_layered_on_the_served_world_for_that_episode_only():
    engine = FakeEngine("ok")
    _, server = make_server(engine)
    async with Client(server) as client:
        meta = {EPISODE_META_KEY: "rollout-1", WORLD_META_KEY: SRV_WORLD}
        await client.call_tool("run_command", {"command": "pwd"}, meta=meta)
        await client.call_tool("run_command", {"command": "whoami"}, meta=meta)
        plain = await client.call_tool(
            "run_command", {"command": "pwd"}, meta={EPISODE_META_KEY: "rollout-2"}
        )
    assert not plain.is_error
    first, second, other = (system_prompt(engine, i) for i in range(3))
    assert "/srv/app" in first and "ops" in first and "No sudo." in first
    assert second == first  # the same world on every call: the KV-cache prefix holds
    assert "/srv/app" not in other and "No sudo." not in other


async def test_a_world_cannot_change_mid_episode_but_a_reset_starts_a_new_one():
    engine = FakeEngine("ok")
    simulator, server = make_server(engine)
    other_world = {"facts": {"user": "alice"}}
    async with Client(server) as client:
        await client.call_tool(
            "run_command",
            {"command": "pwd"},
            meta={EPISODE_META_KEY: "e", WORLD_META_KEY: SRV_WORLD},
        )
        refused = await client.call_tool(
            "run_command",
            {"command": "pwd"},
            meta={EPISODE_META_KEY: "e", WORLD_META_KEY: other_world},
        )
        asked = len(engine.requests)
        reset = await client.call_tool(
            "run_command",
            {"command": "pwd"},
            meta={EPISODE_META_KEY: "e", WORLD_META_KEY: other_world, RESET_META_KEY: True},
        )
    assert refused.is_error and "cannot change" in text_of(refused)
    assert asked == 1  # the refused call never reached the world model
    assert not reset.is_error and "alice" in system_prompt(engine)
    [episode] = simulator.episodes.find("e")
    assert [r.source for r in episode.records] == ["model"]


async def test_a_malformed_world_is_refused_naming_the_field():
    engine = FakeEngine("ok")
    simulator, server = make_server(engine)
    async with Client(server) as client:
        result = await client.call_tool(
            "run_command",
            {"command": "pwd"},
            meta={EPISODE_META_KEY: "e", WORLD_META_KEY: {"facts": [1, 2], "colour": "red"}},
        )
    assert result.is_error
    text = text_of(result)
    assert text.startswith(f"Invalid _meta {WORLD_META_KEY}: ")
    assert "facts" in text and "colour" in text
    assert engine.requests == []
    [episode] = simulator.episodes.find("e")
    assert [r.source for r in episode.records] == ["invalid-arguments"]

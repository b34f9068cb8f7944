"""A client ends or resets its episode through real MCP clients: ``_meta`` flags on tools/call,
and the close of a legacy connection (in memory, and an HTTP session's DELETE).

The world model is the FakeEngine (plumbing: what reached the prompt, what was forgotten).
"""

from __future__ import annotations

import json

import anyio
import pytest
import uvicorn
from mcp import Client

from aw_mcp.server.episode_identity import (
    END_META_KEY,
    EPISODE_META_KEY,
    PROCESS_EPISODE,
    RESET_META_KEY,
)
from aw_mcp.server.transports import HTTP_PATH
from aw_mcp.testing import FakeEngine, free_port
from tests.helpers import make_server, text_of

pytestmark = pytest.mark.anyio


def echo_engine() -> FakeEngine:
    """Answers with the command it was asked to simulate."""

    def reply(request) -> str:
        arguments = request.messages[-1].content.split("Arguments: ", 1)[1]
        return json.loads(arguments)["command"]

    return FakeEngine(reply)


async def test_meta_reset_begins_a_new_episode_before_the_call():
    engine = echo_engine()
    simulator, server = make_server(engine)
    agent = {EPISODE_META_KEY: "agent"}
    async with Client(server) as client:
        await client.call_tool("run_command", {"command": "touch before"}, meta=agent)
        await client.call_tool("run_command", {"command": "ls"}, meta=agent)
        [old] = simulator.episodes.find("agent")
        result = await client.call_tool(
            "run_command", {"command": "pwd"}, meta={**agent, RESET_META_KEY: True}
        )
        await client.call_tool("run_command", {"command": "whoami"}, meta=agent)
    assert text_of(result) == "pwd"
    [new] = simulator.episodes.find("agent")
    assert old.state == "ended" and engine.forgotten == [old.key]
    assert [(r.index, r.arguments["command"]) for r in new.records] == [(1, "pwd"), (2, "whoami")]
    assert "touch before" not in engine.last_prompt and "pwd" in engine.last_prompt
    assert [r.arguments["command"] for r in old.records] == ["touch before", "ls"]


async def test_meta_end_ends_the_episode_after_the_call():
    engine = echo_engine()
    simulator, server = make_server(engine)
    async with Client(server) as client:
        await client.call_tool("run_command", {"command": "one"}, meta={EPISODE_META_KEY: "e"})
        [episode] = simulator.episodes.find("e")
        last = await client.call_tool(
            "run_command", {"command": "two"}, meta={EPISODE_META_KEY: "e", END_META_KEY: True}
        )
        assert simulator.episodes.find("e") == []
        assert episode.state == "ended" and engine.forgotten == [episode.key]
        # the call that ended it was answered and recorded first
        assert text_of(last) == "two"
        assert [r.arguments["command"] for r in episode.records] == ["one", "two"]
        await client.call_tool("run_command", {"command": "three"}, meta={EPISODE_META_KEY: "e"})
    [again] = simulator.episodes.find("e")
    assert [r.index for r in again.records] == [1]


async def test_a_reset_flag_that_is_not_true_changes_nothing():
    simulator, server = make_server(echo_engine())
    async with Client(server) as client:
        for flag in ("true", 1, None):
            meta = {EPISODE_META_KEY: "e", RESET_META_KEY: flag, END_META_KEY: "yes"}
            await client.call_tool("run_command", {"command": "ls"}, meta=meta)
    [episode] = simulator.episodes.find("e")
    assert len(episode.records) == 3


async def test_closing_a_legacy_connection_ends_its_episode():
    engine = echo_engine()
    simulator, server = make_server(engine)
    async with Client(server, mode="legacy") as client:
        await client.call_tool("run_command", {"command": "ls"})
        await client.call_tool("run_command", {"command": "ls"}, meta={EPISODE_META_KEY: "named"})
        [connection_episode] = [
            e for e in simulator.episodes.all() if e.episode_id.startswith("connection-")
        ]
    assert connection_episode.state == "ended"
    assert engine.forgotten == [connection_episode.key]
    # an episode the client named outlives the connection: it may be continued on another
    assert [e.episode_id for e in simulator.episodes.all()] == ["named"]


async def test_modern_requests_do_not_end_the_shared_episode():
    simulator, server = make_server(echo_engine())
    async with Client(server, mode="auto") as client:
        await client.call_tool("run_command", {"command": "a"})
        await client.call_tool("run_command", {"command": "b"})
    [episode] = simulator.episodes.all()
    assert episode.episode_id == PROCESS_EPISODE and len(episode.records) == 2


async def test_deleting_an_http_session_ends_its_episode():
    engine = echo_engine()
    simulator, server = make_server(engine)
    port = free_port()
    app = server.streamable_http_app(streamable_http_path=HTTP_PATH, host="127.0.0.1")
    http = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(http.serve)
        with anyio.fail_after(30):
            while not http.started:
                await anyio.sleep(0.05)
        url = f"http://127.0.0.1:{port}{HTTP_PATH}"
        async with Client(url, mode="legacy") as client:  # DELETEs its session on the way out
            await client.call_tool("run_command", {"command": "ls"})
            [episode] = simulator.episodes.all()
            assert episode.episode_id.startswith("session-") and episode.is_live
        with anyio.fail_after(10):
            while episode.is_live:
                await anyio.sleep(0.05)
        http.should_exit = True
    assert simulator.episodes.all() == []
    assert engine.forgotten == [episode.key]

"""The MCP surface through the SDK's in-memory client, in both protocol generations."""

from __future__ import annotations

import json

import anyio
import pytest
from mcp import Client, MCPError, types

from aw_mcp.server.episode_identity import EPISODE_META_KEY
from aw_mcp.testing import FakeEngine
from tests.helpers import make_server, text_of

pytestmark = pytest.mark.anyio
MODES = ["auto", "legacy"]


@pytest.mark.parametrize("mode", MODES)
async def test_lists_the_domains_tools_with_their_schemas(mode):
    _, server = make_server(FakeEngine())
    async with Client(server, mode=mode) as client:
        listed = await client.list_tools()
    names = [t.name for t in listed.tools]
    assert names == ["run_command", "read_file"]
    run = listed.tools[0]
    assert run.input_schema["required"] == ["command"]
    assert listed.tools[1].annotations.read_only_hint is True


@pytest.mark.parametrize("mode", MODES)
async def test_call_returns_the_world_models_observation(mode):
    engine = FakeEngine("total 0\n[exit code: 0]")
    _, server = make_server(engine)
    async with Client(server, mode=mode) as client:
        result = await client.call_tool("run_command", {"command": "ls"})
    assert result.is_error is False
    assert text_of(result) == "total 0\n[exit code: 0]"
    assert '"command": "ls"' in engine.last_prompt


@pytest.mark.parametrize("mode", MODES)
async def test_invalid_arguments_are_an_error_result_that_says_what_is_wrong(mode):
    engine = FakeEngine()
    simulator, server = make_server(engine)
    async with Client(server, mode=mode) as client:
        result = await client.call_tool("run_command", {"cmd": "ls", "command": 5})
        (episode,) = simulator.episodes.all()  # a legacy connection's episode ends with it
    assert result.is_error is True
    message = text_of(result)
    assert "Invalid arguments for tool run_command" in message
    assert "'cmd' was unexpected" in message
    assert "command: 5 is not of type 'string'" in message
    assert engine.requests == []  # nothing was simulated
    assert episode.records[0].source == "invalid-arguments"  # but the call is recorded
    assert episode.turns == []


@pytest.mark.parametrize("mode", MODES)
async def test_unknown_tool_is_a_json_rpc_invalid_params_error(mode):
    _, server = make_server(FakeEngine())
    async with Client(server, mode=mode) as client:
        with pytest.raises(MCPError) as err:
            await client.call_tool("format_disk", {})
    assert err.value.code == types.INVALID_PARAMS
    assert "format_disk" in err.value.error.message
    assert "run_command" in err.value.error.message


@pytest.mark.parametrize("mode", MODES)
async def test_engine_failure_is_a_clear_error_result_and_the_server_keeps_serving(mode):
    engine = FakeEngine(fail_with="backend died: connection refused")
    simulator, server = make_server(engine)
    async with Client(server, mode=mode) as client:
        result = await client.call_tool("run_command", {"command": "ls"})
        assert result.is_error is True
        assert "backend died: connection refused" in text_of(result)
        engine.fail_with = None
        again = await client.call_tool("run_command", {"command": "ls"})
        (episode,) = simulator.episodes.all()
    assert again.is_error is False
    assert [r.source for r in episode.records] == ["engine-error", "model"]
    assert len(episode.turns) == 1  # the failed call did not change the world


@pytest.mark.parametrize("mode", MODES)
async def test_an_unexpected_exception_is_an_error_result_not_an_opaque_32603(mode):
    class Exploding(FakeEngine):
        async def generate(self, request, control=None):
            raise ZeroDivisionError("division by zero")

    _, server = make_server(Exploding())
    async with Client(server, mode=mode) as client:
        result = await client.call_tool("run_command", {"command": "ls"})
    assert result.is_error is True
    assert "ZeroDivisionError" in text_of(result)


@pytest.mark.parametrize("mode", MODES)
async def test_progress_is_reported_while_the_model_generates(mode):
    engine = FakeEngine("done", delay=1.3)
    _, server = make_server(engine)
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress, total, message):
        seen.append((progress, total, message))

    async with Client(server, mode=mode) as client:
        result = await client.call_tool(
            "run_command", {"command": "make"}, progress_callback=on_progress
        )
    assert text_of(result) == "done"
    assert seen, "no progress notification arrived"
    assert all("world model" in (m or "") for _, _, m in seen)


async def test_meta_episode_key_separates_episodes_on_one_connection():
    engine = FakeEngine(lambda req: req.messages[-1].content.split("\n")[1])
    simulator, server = make_server(engine)
    async with Client(server) as client:
        for episode in ("alpha", "beta", "alpha"):
            await client.call_tool(
                "run_command", {"command": f"echo {episode}"}, meta={EPISODE_META_KEY: episode}
            )
    episodes = {e.episode_id: e for e in simulator.episodes.all()}
    assert set(episodes) == {"alpha", "beta"}
    assert [t.action.arguments["command"] for t in episodes["alpha"].turns] == [
        "echo alpha",
        "echo alpha",
    ]
    assert [t.action.arguments["command"] for t in episodes["beta"].turns] == ["echo beta"]
    # beta's prompt never saw alpha's history
    beta_prompt = "\n".join(m.content for m in engine.requests[1].messages)
    assert "echo alpha" not in beta_prompt


async def test_two_legacy_connections_are_two_episodes_run_concurrently():
    engine = FakeEngine(lambda req: json.dumps(len(req.messages)), delay=0.05)
    simulator, server = make_server(engine)

    episodes = []

    async def agent(word: str) -> None:
        async with Client(server, mode="legacy") as client:
            for i in range(3):
                await client.call_tool("run_command", {"command": f"echo {word}{i}"})
            episodes.extend(
                e
                for e in simulator.episodes.all()
                if e.turns[0].action.arguments["command"] == f"echo {word}0"
            )

    async with anyio.create_task_group() as tg:
        tg.start_soon(agent, "left")
        tg.start_soon(agent, "right")
    assert len(episodes) == 2 and all(e.state == "ended" for e in episodes)
    for episode in episodes:
        commands = [t.action.arguments["command"] for t in episode.turns]
        word = commands[0][:-1]
        assert commands == [f"{word}0", f"{word}1", f"{word}2"]

"""The server's lifespan owns the engine in ``aw-mcp serve``: it is started when serving
begins and closed (model, pools, HTTP clients) when serving ends."""

from __future__ import annotations

import pytest
from mcp import Client

from aw_mcp.server.app import build_server
from tests.conftest import small_embedded_engine
from tests.fake_engine import FakeEngine
from tests.helpers import make_simulator, text_of

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_an_owned_engine_is_started_and_closed_with_the_server(mode):
    engine = FakeEngine("ok")
    server = build_server(make_simulator(engine), owns_engine=True)
    async with Client(server, mode=mode) as client:
        result = await client.call_tool("run_command", {"command": "ls"})
        assert text_of(result) == "ok"
        assert engine.started and not engine.closed
    assert engine.closed


async def test_an_engine_the_caller_manages_stays_open():
    engine = FakeEngine("ok")
    async with Client(build_server(make_simulator(engine))) as client:
        await client.call_tool("run_command", {"command": "ls"})
    assert not engine.closed


async def test_the_real_model_is_freed_on_shutdown():
    engine = small_embedded_engine()
    server = build_server(make_simulator(engine), owns_engine=True)
    async with Client(server) as client:
        result = await client.call_tool("run_command", {"command": "pwd"})
        assert not result.is_error
    assert engine._llm is None  # llama.cpp's model and context were freed

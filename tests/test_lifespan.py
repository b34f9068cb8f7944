"""The server's lifespan owns the engine in ``aw-mcp serve``: it is started when serving
begins and closed (model, pools, HTTP clients) when serving ends."""

from __future__ import annotations

import anyio
import pytest
from mcp import Client

from aw_mcp.server.app import build_server
from aw_mcp.testing import FakeEngine
from tests.conftest import small_engine
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
    engine = small_engine()
    server = build_server(make_simulator(engine), owns_engine=True)
    async with Client(server) as client:
        result = await client.call_tool("run_command", {"command": "pwd"})
        assert not result.is_error
    assert engine._llm is None  # llama.cpp's model and context were freed


async def test_the_served_domains_prompt_prefix_is_evaluated_before_the_first_call():
    """With warm-up on (local engines), the server asks the engine for each domain's fixed
    prefix right after loading it: the first call's prompt then starts with those messages,
    so the engine reuses their KV state. The FakeEngine records what it was asked."""
    engine = FakeEngine("ok")
    server = build_server(make_simulator(engine, warm_up_prompts=True), owns_engine=True)
    async with Client(server) as client:
        while not engine.requests:  # the warm-up runs in the background
            await anyio.sleep(0.01)
        result = await client.call_tool("run_command", {"command": "ls"})
    assert not result.is_error
    warm, first = engine.requests
    assert warm.max_tokens == 1 and warm.warm_up and warm.cache_key == "warm-up:tiny"
    shared = warm.messages[:-1]  # all but the placeholder action
    assert first.messages[: len(shared)] == shared and len(shared) >= 1
    assert shared[0].role == "system"


async def test_without_warm_up_only_the_calls_reach_the_engine():  # remote engines
    engine = FakeEngine("ok")
    server = build_server(make_simulator(engine, warm_up_prompts=False), owns_engine=True)
    async with Client(server) as client:
        await client.call_tool("run_command", {"command": "ls"})
    assert len(engine.requests) == 1

"""The Engine protocol: every engine has what callers use, and forget() drops an episode's
state everywhere it is kept (KV snapshots in the local engines, homes in a pool)."""

from __future__ import annotations

import pytest

from aw_mcp.engines.base import ChatMessage, Engine, GenerationRequest
from aw_mcp.engines.openai_compat import OpenAICompatEngine
from aw_mcp.engines.pool import EnginePool
from aw_mcp.testing import FakeEngine
from tests.conftest import small_engine

pytestmark = pytest.mark.anyio


def _request(key: str, text: str) -> GenerationRequest:
    return GenerationRequest(
        messages=[
            ChatMessage(role="system", content="You are a Linux terminal."),
            ChatMessage(role="user", content=text),
        ],
        max_tokens=4,
        cache_key=key,
    )


def test_every_engine_implements_the_whole_protocol():
    engines = [
        FakeEngine(),
        OpenAICompatEngine(),
        small_engine(),
        EnginePool([FakeEngine()]),
    ]
    for engine in engines:
        assert isinstance(engine, Engine), type(engine).__name__
        assert engine.load == 0
        assert engine.counters.generations == 0


async def test_a_pool_forgets_the_home_and_tells_only_that_instance():
    instances = [FakeEngine(), FakeEngine()]
    pool = EnginePool(instances)
    await pool.generate(_request("a", "pwd"))
    await pool.generate(_request("b", "pwd"))
    home = pool.home_of("a")
    assert home is not None
    pool.forget("a")
    assert pool.home_of("a") is None
    assert instances[home].forgotten == ["a"]
    assert instances[1 - home].forgotten == []
    pool.forget("never-seen")  # no home: every instance is told (it may hold state anyway)
    assert all(e.forgotten[-1] == "never-seen" for e in instances)


async def test_a_pool_warms_up_every_instance_and_routes_no_episode_home():
    instances = [FakeEngine("x"), FakeEngine("x"), FakeEngine("x")]
    pool = EnginePool(instances)
    warm = _request("warm-up:terminal", "pwd").model_copy(update={"warm_up": True})
    await pool.generate(warm)
    assert [len(e.requests) for e in instances] == [1, 1, 1]
    assert pool.home_of("warm-up:terminal") is None
    await pool.generate(_request("a", "pwd"))
    assert sum(len(e.requests) for e in instances) == 4


@pytest.fixture(params=["llama-cpp", "transformers"])
def local_engine(request):
    if request.param == "llama-cpp":
        # One sequence, so that switching episodes saves snapshots (test_batching.py covers
        # forget() with batched sequences).
        return small_engine(batch_slots=1)
    return request.getfixturevalue("transformers_engine")


async def test_forget_drops_the_kv_snapshots_of_a_local_engine(local_engine):
    engine = local_engine
    await engine.generate(_request("forget-a", "echo a"))
    await engine.generate(_request("forget-b", "echo b"))  # a's state saved as a snapshot
    assert engine.snapshot_bytes > 0
    engine.forget("forget-a")
    engine.forget("forget-b")  # the live one: not saved when the next episode runs
    saves = engine.counters.snapshot_saves
    await engine.generate(_request("forget-c", "echo c"))
    assert engine.snapshot_bytes == 0
    assert engine.counters.snapshot_saves == saves
    # A forgotten episode starts cold: nothing of its own is restored.
    result = await engine.generate(_request("forget-a", "echo a"))
    assert not result.stats.restored_snapshot
    await engine.generate(_request("forget-c", "echo c"))
    engine.forget("forget-a")
    engine.forget("forget-c")
    assert engine.snapshot_bytes == 0

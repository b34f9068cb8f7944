"""Sampling is explicit, per episode and reproducible: seeds derive from (base seed, episode,
call index, attempt). Plumbing on the FakeEngine; the effect on the real embedded model."""

from __future__ import annotations

import json

import pytest

from aw_mcp.domain.catalogue import Catalogue
from aw_mcp.domain.loader import load_domain
from aw_mcp.engines.base import Engine
from aw_mcp.simulation.sampling import SEED_BITS, SamplingSettings
from aw_mcp.simulation.simulator import SimulatorOptions, WorldSimulator
from aw_mcp.testing import FakeEngine
from aw_mcp.wiring.assemble import build_simulator
from aw_mcp.wiring.settings import ServeSettings
from tests.conftest import small_engine
from tests.faults_support import ITEM, SHOP
from tests.helpers import TINY_DOMAIN

pytestmark = pytest.mark.anyio


def test_seeds_depend_on_every_part_of_their_identity_and_nothing_else():
    sampling = SamplingSettings()
    base = sampling.seed_for("ep", "tiny", 3, 0)
    assert base == SamplingSettings().seed_for("ep", "tiny", 3, 0)  # reproducible
    others = {
        sampling.seed_for("ep2", "tiny", 3, 0),
        sampling.seed_for("ep", "web", 3, 0),
        sampling.seed_for("ep", "tiny", 4, 0),
        sampling.seed_for("ep", "tiny", 3, 1),
        SamplingSettings(sampling_seed=1).seed_for("ep", "tiny", 3, 0),
    }
    assert base not in others and len(others) == 5
    seeds = [sampling.seed_for(f"ep{i}", "tiny", 1, 0) for i in range(1000)]
    assert all(0 <= s < 1 << SEED_BITS for s in seeds) and len(set(seeds)) == 1000


def test_the_first_attempt_keeps_the_domains_temperature_and_retries_use_the_setting():
    sampling = SamplingSettings(retry_temperature=0.3)
    assert sampling.temperature_for(0.0, 0) == 0.0
    assert sampling.temperature_for(0.9, 0) == 0.9
    assert sampling.temperature_for(0.0, 1) == sampling.temperature_for(0.0, 2) == 0.3


def structured_simulator(engine: FakeEngine, sampling: SamplingSettings) -> WorldSimulator:
    return WorldSimulator(Catalogue([SHOP]), engine, options=SimulatorOptions.of(sampling))


def always_broken_then_valid(engine_requests: list) -> str:
    """Breaks the schema on every first attempt, so each call also sends a retry."""
    return json.dumps(ITEM) if len(engine_requests) % 2 == 0 else '{"id": 5}'


async def requests_of(episodes: list[str], sampling: SamplingSettings) -> dict[str, list]:
    engine = FakeEngine()
    engine._reply = lambda request: always_broken_then_valid(engine.requests)
    simulator = structured_simulator(engine, sampling)
    tool = simulator.catalogue.get("get_item")
    seen: dict[str, list] = {}
    for episode in episodes:
        start = len(engine.requests)
        await simulator.call(episode, tool, {"id": "42"})
        await simulator.call(episode, tool, {"id": "7"})
        seen[episode] = [(r.seed, r.temperature) for r in engine.requests[start:]]
    return seen


async def test_same_settings_and_episode_give_the_same_seeds_other_episodes_others():
    sampling = SamplingSettings(sampling_seed=42, retry_temperature=0.5)
    first = await requests_of(["alice", "bob"], sampling)
    again = await requests_of(["bob", "alice"], sampling)  # another order, another simulator
    assert first == again
    alice, bob = first["alice"], first["bob"]
    assert len(alice) == 4  # two calls, each a first attempt and a retry
    assert [t for _, t in alice] == [0.0, 0.5, 0.0, 0.5]
    assert len({s for s, _ in alice}) == 4  # every request its own seed
    assert not {s for s, _ in alice} & {s for s, _ in bob}
    other_seed = await requests_of(["alice"], SamplingSettings(sampling_seed=43))
    assert not {s for s, _ in other_seed["alice"]} & {s for s, _ in alice}


def test_serve_settings_reach_the_simulator(monkeypatch):
    monkeypatch.setenv("AW_MCP_SAMPLING_SEED", "1234")
    settings = ServeSettings(simulator=[str(TINY_DOMAIN)], retry_temperature=0.25)
    simulator = build_simulator(settings, engine=FakeEngine())
    sampling = simulator.generator.sampling
    assert (sampling.sampling_seed, sampling.retry_temperature) == (1234, 0.25)
    for field in ("sampling_seed", "retry_temperature"):
        assert ServeSettings.model_fields[field].description


async def sampled_answers(engine: Engine, episodes: list[str]) -> dict[str, str]:
    """One call per episode, same command, on a copy of the tiny domain that samples (T=1)."""
    domain = load_domain(str(TINY_DOMAIN))
    generation = domain.generation.model_copy(update={"temperature": 1.0, "max_tokens": 16})
    domain = domain.model_copy(update={"generation": generation})
    simulator = WorldSimulator(Catalogue([domain]), engine)
    tool = simulator.catalogue.get("run_command")
    return {
        episode: (await simulator.call(episode, tool, {"command": "date"})).text
        for episode in episodes
    }


async def test_on_the_embedded_model_episodes_sample_their_own_reproducible_answers():
    episodes = [f"agent-{i}" for i in range(4)]
    first = await sampled_answers(small_engine(), episodes)
    again = await sampled_answers(small_engine(), episodes)
    assert first == again  # same settings, same episodes: the same answers
    # the same prompt in different episodes no longer gets one identical "random" answer
    assert len(set(first.values())) > 1, first

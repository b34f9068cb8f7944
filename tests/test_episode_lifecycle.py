"""One owner per episode: ending or evicting an episode clears its state everywhere.

Plumbing tests on the FakeEngine (it records which cache keys it was told to forget).
"""

from __future__ import annotations

import anyio
import pytest

from aw_mcp.domain.catalogue import Catalogue
from aw_mcp.domain.loader import load_domain
from aw_mcp.episode.store import EpisodeStore
from aw_mcp.faults.scenario_layer import ScenarioFaultLayer
from aw_mcp.records.sink import RecordSink
from aw_mcp.simulation.simulator import WorldSimulator
from aw_mcp.testing import FakeEngine
from tests.faults_support import scenario_from
from tests.helpers import TINY_DOMAIN

pytestmark = pytest.mark.anyio

ONCE = "name: once\nrules:\n  - {id: first, max_fires: 1, effects: [{kind: latency, seconds: 0}]}\n"


def simulator(engine: FakeEngine, limit: int = 10_000, sink: RecordSink | None = None):
    return WorldSimulator(
        Catalogue([load_domain(str(TINY_DOMAIN))]),
        engine,
        episodes=EpisodeStore(limit=limit, sink=sink),
        faults=ScenarioFaultLayer([scenario_from(ONCE)]),
    )


async def run(sim: WorldSimulator, episode: str, command: str = "ls"):
    return await sim.call(episode, sim.catalogue.get("run_command"), {"command": command})


def fault_rules(sim: WorldSimulator, episode: str) -> list[list[str]]:
    [ep] = sim.episodes.find(episode)
    return [[f["rule"] for f in r.faults] for r in ep.records]


async def test_ending_an_episode_clears_its_state_everywhere():
    engine = FakeEngine()
    sim = simulator(engine)
    await run(sim, "ep", "touch first-run")
    await run(sim, "ep")
    [old] = sim.episodes.find("ep")
    assert fault_rules(sim, "ep") == [["first"], []]  # max_fires: 1 used up

    assert sim.episodes.end("ep", reason="test") == [old]
    assert old.state == "ended" and sim.episodes.all() == []
    assert engine.forgotten == [old.key]
    assert sim.faults.layer.tracked_episodes() == 0

    await run(sim, "ep", "pwd")
    [new] = sim.episodes.find("ep")
    assert new is not old and new.key != old.key
    assert [r.index for r in new.records] == [1]
    assert fault_rules(sim, "ep") == [["first"]]  # the counters began again at call 1
    assert "first-run" not in engine.last_prompt  # and the history with them
    assert engine.requests[-1].cache_key == new.key


async def test_evicted_episodes_are_forgotten_by_every_layer():
    engine = FakeEngine()
    sim = simulator(engine, limit=2)
    for name in ("a", "b", "c"):
        await run(sim, name)
    assert sorted(e.episode_id for e in sim.episodes.all()) == ["b", "c"]
    assert len(engine.forgotten) == 1 and engine.forgotten[0].startswith("a\x1f")
    assert sim.faults.layer.tracked_episodes() == 2
    await run(sim, "a")  # comes back as a new episode: its rule fires again
    assert fault_rules(sim, "a") == [["first"]]
    assert sim.faults.layer.tracked_episodes() == 2


async def test_an_episode_with_a_call_in_progress_is_not_evicted():
    engine = FakeEngine(delay=0.3)
    sim = simulator(engine, limit=1)
    async with anyio.create_task_group() as tg:
        tg.start_soon(run, sim, "slow")
        await anyio.sleep(0.1)
        engine.delay = 0
        await run(sim, "quick")  # over the limit, but "slow" is busy: "quick" waits its turn
        await run(sim, "other")
    [slow] = sim.episodes.find("slow")
    assert len(slow.records) == 1 and slow.state == "active"
    assert sim.episodes.find("quick") == []


async def test_a_call_finishing_after_its_episode_ended_is_not_recorded(tmp_path):
    engine = FakeEngine(delay=0.3)
    sink = RecordSink(tmp_path)
    sim = simulator(engine, sink=sink)
    async with anyio.create_task_group() as tg:
        tg.start_soon(run, sim, "ep", "old call")
        await anyio.sleep(0.1)
        [old] = sim.episodes.end("ep", reason="reset")
        engine.delay = 0
        await run(sim, "ep", "new call")
    assert old.records == []
    [new] = sim.episodes.find("ep")
    assert [r.arguments["command"] for r in new.records] == ["new call"]
    written = sink.path_for("ep").read_text()
    assert "new call" in written and "old call" not in written


async def test_calls_waiting_on_an_ended_episode_join_the_new_one():
    engine = FakeEngine(delay=0.2)
    sim = simulator(engine)
    async with anyio.create_task_group() as tg:
        tg.start_soon(run, sim, "ep", "first")
        await anyio.sleep(0.05)
        tg.start_soon(run, sim, "ep", "queued")  # waits for "first" to finish
        await anyio.sleep(0.05)
        sim.episodes.end("ep", reason="reset")
    [new] = sim.episodes.find("ep")
    assert [(r.index, r.arguments["command"]) for r in new.records] == [(1, "queued")]


async def test_a_failing_listener_does_not_keep_the_others_from_being_told():
    seen: list[str] = []
    store = EpisodeStore()

    def broken(episode):
        raise RuntimeError("boom")

    store.subscribe(broken)
    store.subscribe(lambda episode: seen.append(episode.episode_id))
    store.get("x", "terminal")
    store.end("x", reason="test")
    assert seen == ["x"]

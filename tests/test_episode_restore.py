"""Episodes survive a restart: a server that does not hold an episode rebuilds it from its
record file on its next call (history, world conditions, fault counters, call index, context
trimming), so the world model sees exactly the prompt it would have seen without the restart.

FakeEngine stands in for the world model (plumbing only: it keeps every request it gets)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from aw_mcp.domain.catalogue import Catalogue
from aw_mcp.episode.store import EpisodeStore
from aw_mcp.faults.scenario_layer import ScenarioFaultLayer
from aw_mcp.records.reader import read_record_file
from aw_mcp.records.sink import RecordSink
from aw_mcp.server.episode_identity import END_META_KEY
from aw_mcp.simulation.simulator import WorldSimulator
from aw_mcp.testing import FakeEngine
from tests.faults_support import SHOP, client_for, fake_reply, in_episode, scenario_from

pytestmark = pytest.mark.anyio

# Every kind of per-episode fault state: a world condition that lasts 3 calls, a counted rule
# (every 3rd search), a sticky lie with max_fires, a seeded probability, an output fault.
SCENARIO = """
name: restart
seed: 7
rules:
  - id: slow-network
    when: {nth: 2, count: all}
    effects: [{kind: world, condition: "The network is slow", calls: 3}]
  - id: every-third-search
    match: {tool: search}
    when: {every: 3}
    effects: [{kind: error, preset: http_502}]
  - id: stale-item
    match: {tool: get_item}
    max_fires: 1
    effects: [{kind: mislead, wrongness: stale, sticky: true}]
  - id: coin
    probability: 0.5
    effects: [{kind: truncate, keep: 0.5}]
"""
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("search", {"query": "mug"}),
    ("get_item", {"id": "42"}),
    ("search", {"page": 2}),  # refused: no query (never meets the fault layer)
    ("search", {"query": "blue mug"}),
    ("write_file", {"path": "cart.txt", "text": "42"}),
    ("search", {"query": "cup"}),  # the 3rd search: 502
    ("get_item", {"id": "7"}),
    ("search", {"query": "plate"}),
    ("write_file", {"path": "cart.txt", "text": "42,7"}),
    ("search", {"query": "bowl"}),
    ("search", {"query": "fork"}),  # the 6th search: 502
    ("get_item", {"id": "9"}),
    ("write_file", {"path": "cart.txt", "text": "42,7,9"}),
    ("search", {"query": "knife"}),
]
RESTART_AFTER = 8
TIMING = {"started_at", "seconds", "episode_started_at"}


def server(records: Path, engine: FakeEngine) -> WorldSimulator:
    """A fresh server process: its own store and fault layer, the shared record dir."""
    return WorldSimulator(
        Catalogue([SHOP]),
        engine,
        EpisodeStore(sink=RecordSink(records)),
        ScenarioFaultLayer([scenario_from(SCENARIO)]),
    )


async def run(
    simulator: WorldSimulator, calls: list[tuple[str, dict[str, Any]]], **meta: Any
) -> None:
    async with client_for(simulator) as client:
        for tool, arguments in calls:
            await client.call_tool(tool, arguments, meta={**in_episode("rollout-1"), **meta})


def engine() -> FakeEngine:
    # A small context window, so the oldest turns get summarized before the restart.
    return FakeEngine(fake_reply, context_window=500)


async def test_after_a_restart_the_model_sees_exactly_the_prompts_it_would_have(tmp_path: Path):
    control_engine = engine()
    await run(server(tmp_path / "control", control_engine), CALLS)

    first, second = engine(), engine()
    await run(server(tmp_path / "restarted", first), CALLS[:RESTART_AFTER])
    # The first process is gone (nothing of it is used again); a new one takes over.
    await run(server(tmp_path / "restarted", second), CALLS[RESTART_AFTER:])

    def prompts(requests: list) -> list[tuple[list, int | None, Any]]:
        return [(r.messages, r.seed, r.json_schema) for r in requests]

    assert second.requests, "the restarted server answered with the model"
    assert prompts(first.requests + second.requests) == prompts(control_engine.requests)
    assert prompts(second.requests) == prompts(control_engine.requests[-len(second.requests) :])

    def records(folder: Path) -> list[dict[str, Any]]:
        [path] = folder.glob("*.jsonl")
        return [r.model_dump(exclude=TIMING) for r in read_record_file(path)]

    control, restarted = records(tmp_path / "control"), records(tmp_path / "restarted")
    assert restarted == control  # same indices, sources, faults, conditions, observations
    assert [r["index"] for r in restarted] == list(range(1, len(CALLS) + 1))
    assert max(r["omitted_turns"] for r in control[:RESTART_AFTER]) > 0  # trimming restored
    fired = {f["rule"] for r in control[RESTART_AFTER:] for f in r["faults"]}
    assert {"every-third-search", "coin"} <= fired  # counted and seeded faults after restart
    assert any("wrong on purpose" in c for r in control[RESTART_AFTER:] for c in r["conditions"])
    [path] = (tmp_path / "restarted").glob("*.jsonl")
    assert len({r.episode_started_at for r in read_record_file(path)}) == 1  # one run


async def test_an_episode_that_ended_is_not_resumed(tmp_path: Path):
    await run(server(tmp_path, FakeEngine(fake_reply)), CALLS[:1])
    await run(server(tmp_path, FakeEngine(fake_reply)), CALLS[1:2], **{END_META_KEY: True})
    await run(server(tmp_path, FakeEngine(fake_reply)), CALLS[3:4])
    [path] = tmp_path.glob("*.jsonl")
    # killed after call 1: resumed as call 2; ended there: the next process begins a new run
    assert [r.index for r in read_record_file(path)] == [1, 2, 1]
    assert len(list(tmp_path.glob("*.ended"))) == 1


async def test_a_record_that_cannot_be_resumed_begins_a_new_run(tmp_path: Path, caplog):
    await run(server(tmp_path, FakeEngine(fake_reply)), CALLS[:2])
    [path] = tmp_path.glob("*.jsonl")
    lines = path.read_text().splitlines()
    path.write_text(lines[1] + "\n")  # call 1 is lost: indices no longer 1..n
    await run(server(tmp_path, FakeEngine(fake_reply)), CALLS[3:4])
    assert [r.index for r in read_record_file(path)] == [2, 1]
    assert "not resumed" in caplog.text and "not 1..1" in caplog.text


async def test_a_record_torn_by_a_killed_process_is_repaired_and_resumed(tmp_path: Path, caplog):
    await run(server(tmp_path, FakeEngine(fake_reply)), CALLS[:2])
    [path] = tmp_path.glob("*.jsonl")
    whole = path.read_bytes()
    with path.open("ab") as fh:  # the process died while writing the record of call 3
        fh.write(whole.splitlines()[-1][:40])
    await run(server(tmp_path, FakeEngine(fake_reply)), CALLS[3:5])
    assert [r.index for r in read_record_file(path)] == [1, 2, 3, 4]
    assert "dropping a torn last line" in caplog.text
    # A last record that is whole but lacks its newline is kept and completed.
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    await run(server(tmp_path, FakeEngine(fake_reply)), CALLS[5:6])
    assert [r.index for r in read_record_file(path)] == [1, 2, 3, 4, 5]

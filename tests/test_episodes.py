"""Episode plumbing: history in the prompt, world facts, trimming long histories, replays."""

from __future__ import annotations

import itertools
import json
import logging

import pytest

from aw_mcp.domain.catalogue import Catalogue
from aw_mcp.domain.loader import load_domain
from aw_mcp.domain.models import WorldSpec
from aw_mcp.records.sink import record_file_name
from aw_mcp.simulation.simulator import WorldSimulator
from aw_mcp.testing import FakeEngine
from tests.helpers import TINY_DOMAIN, make_simulator

pytestmark = pytest.mark.anyio


def counter_engine() -> FakeEngine:
    """Answers 'observation N' for the N-th request, so tests can find each one later."""
    engine = FakeEngine()
    engine._reply = lambda req: f"observation {len(engine.requests)}"
    return engine


async def call(sim: WorldSimulator, tool: str, episode: str = "ep", **arguments):
    return await sim.call(episode, sim.catalogue.get(tool), arguments)


async def test_history_reaches_the_prompt_in_order():
    engine = counter_engine()
    sim = make_simulator(engine)
    await call(sim, "run_command", command="echo one > notes.txt")
    await call(sim, "run_command", command="cat notes.txt")
    await call(sim, "run_command", command="ls")
    messages = engine.requests[-1].messages
    contents = [m.content for m in messages]
    joined = "\n".join(contents)
    assert joined.index("echo one > notes.txt") < joined.index("observation 1")
    assert joined.index("observation 1") < joined.index("cat notes.txt")
    assert joined.index("cat notes.txt") < joined.index("observation 2")
    assert messages[-1].role == "user" and '"command": "ls"' in messages[-1].content
    # step n+1's prompt starts with step n's prompt: the shape the KV cache depends on
    previous = engine.requests[-2].messages
    assert messages[: len(previous)] == previous


async def test_world_facts_and_user_world_file_are_pinned_in_the_prompt():
    engine = counter_engine()
    extra = WorldSpec(facts={"hostname": "override-host", "disk": "90% used"})
    sim = WorldSimulator(Catalogue([load_domain(str(TINY_DOMAIN))], extra_world=extra), engine)
    await call(sim, "run_command", command="hostname")
    system = engine.requests[0].messages[0].content
    assert "hostname: override-host" in system  # the user's --world file wins
    assert "testbox" not in system
    assert "working_directory: /home/test" in system  # the domain's other facts stay
    assert "disk: 90% used" in system


async def test_long_history_is_trimmed_keeping_instructions_and_facts(caplog):
    engine = counter_engine()
    engine._context_window = 700  # a few turns' worth, with the 24-token answer budget
    sim = make_simulator(engine)
    caplog.set_level(logging.WARNING, logger="aw_mcp.simulation")
    for i in range(30):
        await call(sim, "run_command", command=f"echo step-{i} " + "x" * 80)
    last = engine.requests[-1]
    assert await engine.count_tokens(last.messages) <= 700 - 24
    system = last.messages[0].content
    assert "You are a Linux bash terminal" in system  # instructions kept
    assert "hostname: testbox" in system  # world facts kept
    assert "earlier steps are not shown in full" in system  # summarized, not silently lost
    (episode,) = sim.episodes.all()
    dropped = episode.turns[: episode.omitted_turns]
    # the summary lists the most recent dropped actions and counts the rest
    assert f"{len(dropped)} earlier steps are not shown" in system
    assert dropped[-1].action.arguments["command"][:20] in system
    assert '"command": "echo step-29' in last.messages[-1].content
    assert "history over the context window" in caplog.text
    assert episode.omitted_turns > 0
    assert len(episode.records) == 30 and len(episode.turns) == 30  # nothing lost


async def test_trimming_keeps_a_stable_prefix_for_the_next_steps():
    engine = counter_engine()
    engine._context_window = 900
    sim = make_simulator(engine)
    for i in range(40):
        await call(sim, "run_command", command=f"echo {i} " + "y" * 60)
    (episode,) = sim.episodes.all()
    omitted = [r.omitted_turns for r in episode.records]
    trims = sum(1 for before, after in itertools.pairwise(omitted) if after != before)
    assert trims >= 1
    assert trims < 40 / 3  # trimmed in chunks, not at every step (each trim costs the KV cache)


async def test_an_action_too_long_for_the_window_is_a_clear_error():
    engine = counter_engine()
    engine._context_window = 300
    sim = make_simulator(engine)
    answer = await call(sim, "run_command", command="z" * 4000)
    assert answer.is_error
    assert "context window" in answer.text


async def test_repeated_read_only_call_replays_the_same_observation():
    engine = counter_engine()
    sim = make_simulator(engine)
    first = await call(sim, "read_file", path="/etc/hostname")
    again = await call(sim, "read_file", path="/etc/hostname")
    assert again.text == first.text
    assert len(engine.requests) == 1  # answered from the history, not regenerated
    await call(sim, "run_command", command="echo new > /etc/hostname")  # may change the world
    after_write = await call(sim, "read_file", path="/etc/hostname")
    assert len(engine.requests) == 3
    assert after_write.text == "observation 3"
    (episode,) = sim.episodes.all()
    assert [r.source for r in episode.records] == ["model", "replay", "model", "model"]


async def test_replay_can_be_switched_off():
    engine = counter_engine()
    sim = make_simulator(engine, replay_read_only=False)
    await call(sim, "read_file", path="/a")
    await call(sim, "read_file", path="/a")
    assert len(engine.requests) == 2


async def test_records_are_written_as_jsonl(tmp_path):
    engine = counter_engine()
    sim = make_simulator(engine, record_dir=tmp_path)
    await call(sim, "run_command", episode="agent/7", command="pwd")
    await call(sim, "run_command", episode="agent/7", command="ls")
    [path] = tmp_path.glob("*.jsonl")
    assert path.name.startswith("agent_7-")  # readable, and unique to the exact id
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["index"] for r in records] == [1, 2]
    assert records[1]["arguments"] == {"command": "ls"}
    assert records[1]["observation"] == "observation 2"
    assert records[0]["episode"] == "agent/7"


async def test_ids_that_read_the_same_never_share_a_record_file(tmp_path):
    engine = counter_engine()
    sim = make_simulator(engine, record_dir=tmp_path)
    ids = ["col/x", "col_x", "col x", "\ud800x", "é" * 300]
    for episode in ids:
        await call(sim, "run_command", episode=episode, command=f"echo {episode!r}")
    files = sorted(tmp_path.glob("*.jsonl"))
    assert len(files) == len(ids)
    assert all(len(f.name) < 120 for f in files)
    owners = {}
    for path in files:
        [record] = [json.loads(line) for line in path.read_text().splitlines()]
        owners[record["episode"]] = path.name
        assert path.name == record_file_name(record["episode"])
    assert sorted(owners) == sorted(ids)  # every record kept its exact id


def test_catalogue_lookup_of_a_tool_that_must_be_served_names_the_served_ones():
    catalogue = Catalogue([load_domain(str(TINY_DOMAIN))])
    name = catalogue.names()[0]
    assert catalogue[name] is catalogue.get(name)
    assert catalogue.get("no_such_tool") is None
    with pytest.raises(KeyError, match=f"no tool 'no_such_tool' is served; served: {name}"):
        catalogue["no_such_tool"]

"""Plausible-but-wrong faults (``kind: mislead``): the world model is asked, in the firing call's
prompt, for an observation that looks right but is wrong in a described way; the record says
so, a sticky lie stays in later prompts, and ``aw-mcp report`` tells whether the agent noticed.

The outcome tests use FakeEngine as a stand-in world model that obeys the instruction (plumbing
only: it tells the test whether the instruction reached the prompt); one test runs the real
embedded model to show the instruction reaches its prompt and the record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aw_mcp.cli import main
from aw_mcp.domain.catalogue import Catalogue
from aw_mcp.domain.loader import load_domain
from aw_mcp.engines.base import GenerationRequest
from aw_mcp.episode.store import EpisodeStore
from aw_mcp.faults.mislead import LIE_PREFIX, WRONGNESS
from aw_mcp.faults.scenario import Scenario, load_scenario
from aw_mcp.faults.scenario_layer import ScenarioFaultLayer
from aw_mcp.files.bundled import bundled_dir
from aw_mcp.records.sink import RecordSink
from aw_mcp.simulation.simulator import WorldSimulator
from aw_mcp.testing import FakeEngine
from aw_mcp.viewer.reactions import episode_reactions
from tests.faults_support import client_for, in_episode, scenario_from
from tests.test_faults_world import run_commands_on_the_real_model
from tests.viewer_support import call, fault

pytestmark = pytest.mark.anyio

TRUE_LISTING = ["[FILE] a.csv", "[FILE] b.csv", "[FILE] c.csv"]


def obedient_fake_world(request: GenerationRequest) -> str:
    """FakeEngine's reply (not a world model): the listing of /data, one row short when the
    current action carries the mislead instruction; a success line for a write."""
    current = request.messages[-1].content
    if "Action: list_directory" in current:
        lying = LIE_PREFIX in current and WRONGNESS["missing-row"] in current
        return "\n".join(TRUE_LISTING[:-1] if lying else TRUE_LISTING)
    return "Successfully wrote to /data/count.txt"


def simulator_with(scenarios: list[str], records: Path) -> tuple[WorldSimulator, FakeEngine]:
    engine = FakeEngine(obedient_fake_world)
    simulator = WorldSimulator(
        Catalogue([load_domain("terminal")]),
        engine,
        EpisodeStore(sink=RecordSink(records)),
        ScenarioFaultLayer([load_scenario(s) for s in scenarios]),
    )
    return simulator, engine


async def scripted_agent(simulator: WorldSimulator, episode: str, recheck: bool) -> int:
    """Counts the files of /data and writes the count; returns the reward (1 if the count it
    wrote is the true one). With ``recheck`` it lists /data a second time and trusts the
    longer listing; without, it trusts the first."""
    meta = in_episode(episode)
    async with client_for(simulator) as client:

        async def listing(path: str) -> list[str]:
            result = await client.call_tool("list_directory", {"path": path}, meta=meta)
            return [line for line in result.content[0].text.splitlines() if line.strip()]

        await listing("/")  # the episode's first listing: orientation
        files = await listing("/data")
        if recheck:
            files = max(files, await listing("/data"), key=len)
        await client.call_tool(
            "write_file", {"path": "/data/count.txt", "content": str(len(files))}, meta=meta
        )
    return int(len(files) == len(TRUE_LISTING))


async def test_a_trusting_agent_loses_its_reward_under_mislead_and_report_flags_it(
    tmp_path: Path, capsys
):
    clean, _ = simulator_with([], tmp_path / "clean")
    assert await scripted_agent(clean, "trusting", recheck=False) == 1

    misled, engine = simulator_with(["mislead-missing-row"], tmp_path / "misled")
    assert await scripted_agent(misled, "trusting", recheck=False) == 0  # built on the lie
    assert await scripted_agent(misled, "checking", recheck=True) == 1  # noticed

    [trusting] = misled.episodes.find("trusting")
    lie = trusting.records[1]
    assert lie.source == "model" and not lie.is_error  # it looks like any good answer
    assert lie.faults == [
        {
            "scenario": "mislead-missing-row",
            "rule": "listing-drops-a-row",
            "effect": "mislead",
            "wrongness": "missing-row",
            "instruction": WRONGNESS["missing-row"],
            "sticky": False,
        }
    ]
    assert [c.startswith(LIE_PREFIX) for c in lie.conditions] == [True]
    assert [bool(r.conditions) for r in trusting.records] == [False, True, False]
    # Not sticky: the re-check is answered by the model again (not replayed from the lie),
    # and its prompt shows the lying turn with its instruction, but no instruction for now.
    [checking] = misled.episodes.find("checking")
    assert [r.source for r in checking.records] == ["model"] * 4
    recheck_prompt = engine.requests[-2].messages
    assert LIE_PREFIX not in recheck_prompt[-1].content
    assert any(LIE_PREFIX in m.content for m in recheck_prompt[:-1])

    assert main(["report", str(tmp_path / "misled"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    by_episode = {r["episode"]: r["mislead"] for r in report["reactions"]}
    assert by_episode == {"trusting": "built-on", "checking": "re-checked"}
    assert report["mislead"] == {"re-checked": 1, "verified": 0, "built-on": 1, "ended": 0}
    assert report["by_rule"]["mislead-missing-row/listing-drops-a-row"]["noticed"] == 1
    assert main(["report", str(tmp_path / "misled")]) == 0
    text = capsys.readouterr().out
    assert "mislead NOT NOTICED: episode 'trusting' call 2 (list_directory" in text
    assert "mislead noticed: episode 'checking' call 2" in text


async def test_a_sticky_lie_stays_in_every_later_prompt():
    engine = FakeEngine("3 notes.txt")
    simulator = WorldSimulator(
        Catalogue([load_domain("terminal")]),
        engine,
        faults=ScenarioFaultLayer([load_scenario("mislead-off-by-one")]),
    )
    commands = ["ls", "wc -l notes.txt", "cat notes.txt", "wc -l notes.txt"]
    async with client_for(simulator) as client:
        for command in commands:
            await client.call_tool("run_command", {"command": command}, meta=in_episode("ep"))
    current = [r.messages[-1].content for r in engine.requests]
    assert [LIE_PREFIX in m for m in current] == [False, True, False, False]
    assert ["Step 2's observation was wrong on purpose" in m for m in current] == [
        False,
        False,
        True,
        True,
    ]
    assert "exactly one more than" in current[1]
    records = simulator.episodes.find("ep")[0].records
    assert [[f["effect"] for f in r.faults] for r in records] == [[], ["mislead"], [], []]
    assert records[1].faults[0]["sticky"] is True


@pytest.mark.parametrize(
    ("after", "verdict"),
    [
        ([call(2, "list_items", {"page": 1})], "re-checked"),  # the same read again
        ([call(2, "get_item", {"id": "7"})], "verified"),  # another read
        ([call(2, "write_file", {"path": "n"})], "built-on"),  # acted on it
        ([], "ended"),  # finished on it
    ],
)
def test_what_the_agent_did_after_a_lie(after, verdict):
    lie = call(1, "list_items", {"page": 1}, faults=[fault("lie", effect="mislead")])
    [reaction] = episode_reactions([lie, *after])
    assert reaction.mislead == verdict
    plain = call(1, "list_items", {"page": 1}, faults=[fault("boom")])  # not a mislead fault
    assert episode_reactions([plain, *after])[0].mislead is None


def test_mislead_effects_are_validated():
    for sample in ("mislead-missing-row", "mislead-off-by-one", "mislead-false-success"):
        assert any(e.kind == "mislead" for r in load_scenario(sample).rules for e in r.effects)
    with pytest.raises(ValueError, match="give a wrongness or an instruction"):
        scenario_from("name: s\nrules:\n  - {id: r, effects: [{kind: mislead}]}\n")
    with pytest.raises(ValueError, match="wrongness"):
        scenario_from("name: s\nrules:\n  - {id: r, effects: [{kind: mislead, wrongness: x}]}\n")
    with pytest.raises(ValueError, match="the world model cannot mislead"):
        Scenario.model_validate(
            {
                "name": "s",
                "rules": [
                    {
                        "id": "r",
                        "effects": [
                            {"kind": "mislead", "wrongness": "stale"},
                            {"kind": "error", "preset": "http_500"},
                        ],
                    }
                ],
            }
        )


@pytest.mark.slow
async def test_the_mislead_instruction_reaches_the_real_models_prompt_and_record(
    small_model_engine,
):
    """The bundled off-by-one scenario with the real embedded model: the instruction is in the
    prompt of the counting call, the sticky consistency condition in the next, both recorded.
    What the tiny model writes is not asserted beyond being an answer of the model."""
    simulator, engine, results = await run_commands_on_the_real_model(
        small_model_engine,
        (bundled_dir("faults") / "mislead-off-by-one.yaml").read_text(),
        ["printf 'a\\nb\\n' > notes.txt", "wc -l notes.txt", "cat notes.txt"],
        max_tokens=12,
    )
    records = simulator.episodes.find("ep")[0].records
    assert [r.source for r in records] == ["model"] * 3
    assert all(not r.is_error for r in results)
    current = [r.messages[-1].content for r in engine.requests]
    assert [LIE_PREFIX in m for m in current] == [False, True, False]
    assert "wrong on purpose" in current[2]
    assert records[1].faults[0]["effect"] == "mislead"
    assert records[1].conditions[0].startswith(LIE_PREFIX)
    assert "wrong on purpose" in records[2].conditions[0]

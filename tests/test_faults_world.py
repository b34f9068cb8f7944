"""World faults: a condition enters the episode's world state and every later prompt while it
is active. Prompts are checked with FakeEngine (it keeps every request) and with the real
embedded model behind a recording wrapper."""

from __future__ import annotations

import pytest

from aw_mcp.domain.loader import load_domain
from aw_mcp.engines.base import GenerationRequest
from aw_mcp.files.bundled import bundled_dir
from aw_mcp.simulation.simulator import WorldSimulator
from aw_mcp.testing import FakeEngine, RecordingEngine
from tests.engine_support import prompt_text
from tests.faults_support import client_for, fake_reply, fired, in_episode, make_simulator

pytestmark = pytest.mark.anyio

DISK_FULL = "The disk is full: / is at 100% with 0 bytes available"
OUTAGE = "The network is unreachable"

WORLD = f"""
name: world
rules:
  - id: disk-full
    match: {{tool: write_file}}
    when: {{nth: 1}}
    effects: [{{kind: world, condition: "{DISK_FULL}"}}]
  - id: outage
    when: {{nth: 3, count: all}}
    effects: [{{kind: world, condition: "{OUTAGE}", calls: 2}}]
"""


def last_user_message(request: GenerationRequest) -> str:
    return request.messages[-1].content


async def run_commands_on_the_real_model(
    small_model_engine, scenario: str, commands: list[str], max_tokens: int
) -> tuple[WorldSimulator, RecordingEngine, list]:
    """``commands`` through run_command in one episode, the real model behind a recorder;
    the terminal domain is cut to that one tool (a short prompt keeps the test quick)."""
    domain = load_domain("terminal").model_copy(deep=True)
    domain.tools = [domain.tool("run_command")]
    domain.generation.max_tokens = max_tokens
    engine = RecordingEngine(small_model_engine)
    await engine.start()
    simulator = make_simulator(scenario, engine=engine, domain=domain)
    try:
        async with client_for(simulator) as client:
            results = [
                await client.call_tool("run_command", {"command": c}, meta=in_episode("ep"))
                for c in commands
            ]
    finally:
        await engine.aclose()
    return simulator, engine, results


async def test_a_world_condition_is_in_every_later_prompt_while_active():
    engine = FakeEngine(fake_reply)
    simulator = make_simulator(WORLD, engine=engine)
    calls = [
        ("search", {"query": "a"}),  # 1: nothing yet
        ("write_file", {"path": "x"}),  # 2: disk fills up (sticky)
        ("search", {"query": "b"}),  # 3: outage starts, for this call and the next
        ("search", {"query": "c"}),  # 4: outage's last call
        ("search", {"query": "d"}),  # 5: outage over, disk still full
        ("write_file", {"path": "y"}),  # 6: disk still full
    ]
    async with client_for(simulator) as client:
        for tool, arguments in calls:
            await client.call_tool(tool, arguments, meta=in_episode("ep"))
        await client.call_tool("search", {"query": "other"}, meta=in_episode("other-episode"))

    current = [last_user_message(r) for r in engine.requests]
    assert [(DISK_FULL in m, OUTAGE in m) for m in current] == [
        (False, False),
        (True, False),
        (True, True),
        (True, True),
        (True, False),
        (True, False),
        (False, False),  # another episode's world is untouched
    ]
    # Past turns keep the conditions they were made under, so the history stays consistent.
    final_prompt = prompt_text(engine.requests[5])
    assert final_prompt.count(OUTAGE) == 2 and final_prompt.count(DISK_FULL) == 5
    records = simulator.episodes.find("ep")[0].records
    assert [r.conditions for r in records][1:3] == [[DISK_FULL], [DISK_FULL, OUTAGE]]
    assert fired(simulator, "ep")[1] == [
        {
            "scenario": "world",
            "rule": "disk-full",
            "effect": "world",
            "condition": DISK_FULL,
            "calls": None,
        }
    ]


async def test_a_new_condition_stops_the_replay_of_an_earlier_read_only_observation():
    """After 'disk is full', a repeated read-only call must ask the model again."""
    domain = load_domain("terminal")
    engine = FakeEngine("Filesystem  Size  Used Avail Use% Mounted on\n/dev/sda1 50G 20G 30G 40% /")
    simulator = make_simulator(
        f"""
name: disk
rules:
  - id: fill
    when: {{nth: 2, count: all}}
    effects: [{{kind: world, condition: "{DISK_FULL}"}}]
""",
        engine=engine,
        domain=domain,
    )
    async with client_for(simulator) as client:
        for _ in range(3):
            await client.call_tool("list_processes", {}, meta=in_episode("ep"))
    sources = [r.source for r in simulator.episodes.find("ep")[0].records]
    assert sources == ["model", "model", "replay"]
    assert DISK_FULL in last_user_message(engine.requests[1])


@pytest.mark.slow
async def test_disk_full_through_the_real_embedded_model(small_model_engine):
    """The bundled disk-full scenario on the terminal domain with the real model: the model
    answers every call, the condition reaches every prompt from the 3rd call on, and it is
    recorded. What the tiny model writes is not asserted beyond being an observation."""
    simulator, engine, results = await run_commands_on_the_real_model(
        small_model_engine,
        (bundled_dir("faults") / "disk-full.yaml").read_text(),
        ["pwd", "echo hi > notes.txt", "df -h /", "touch b.txt"],
        max_tokens=12,
    )
    records = simulator.episodes.find("ep")[0].records
    assert [r.source for r in records] == ["model"] * 4
    assert all(not r.is_error for r in results)
    in_prompt = ["disk is full" in last_user_message(r) for r in engine.requests]
    assert in_prompt == [False, False, True, True]
    assert [bool(r.conditions) for r in records] == [False, False, True, True]
    assert records[2].faults[0]["rule"] == "disk-fills-up"


@pytest.mark.slow
async def test_a_protocol_fault_never_leaks_into_the_world_the_real_model_sees(small_model_engine):
    """After an injected 429 (a protocol fault: the request never reached the environment),
    the real model's later prompts leave the failed call out (its text and any stand-in), and
    none of its answers repeats the fault. A world condition, by contrast, stays in the world."""
    simulator, engine, results = await run_commands_on_the_real_model(
        small_model_engine,
        """
name: rate-limited
rules:
  - id: second-call-429
    when: {nth: 2}
    effects: [{kind: error, preset: http_429}]
""",
        ["echo one", "echo two", "echo three", "ls"],
        max_tokens=24,
    )
    assert results[1].is_error and "429" in results[1].content[0].text  # the agent sees it
    records = simulator.episodes.find("ep")[0].records
    assert [r.source for r in records] == ["model", "fault", "model", "model"]
    later_prompts = [prompt_text(r) for r in engine.requests[1:]]
    assert all("429" not in p and "Too Many Requests" not in p for p in later_prompts)
    # the failed call is not in the world's history at all; the one before it is
    assert all("echo two" not in p and "echo one" in p for p in later_prompts)
    assert all("reached the environment" not in p for p in later_prompts)
    answers = [records[i].observation for i in (2, 3)]
    assert all("429" not in a and "Too Many Requests" not in a for a in answers)

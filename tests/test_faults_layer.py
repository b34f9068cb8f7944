"""ScenarioFaultLayer decisions: matching, counting, caps, probability, and determinism."""

from __future__ import annotations

import random
import statistics

import anyio
import pytest

from aw_mcp.faults.layer import CallContext
from aw_mcp.faults.scenario_layer import ScenarioFaultLayer
from tests.faults_support import client_for, fired, in_episode, make_simulator, scenario_from


def layer(*texts: str, **kwargs) -> ScenarioFaultLayer:
    return ScenarioFaultLayer([scenario_from(t) for t in texts], **kwargs)


def call(index: int, tool: str = "search", episode: str = "ep", **arguments) -> CallContext:
    return CallContext(episode, "shop", tool, arguments, index)


def fired_rules(fault_layer: ScenarioFaultLayer, calls: list[CallContext]) -> list[list[str]]:
    return [[f.rule for f in fault_layer.decide(c).fired] for c in calls]


def test_occurrences_count_matching_calls_of_each_episode():
    faults = layer(
        """
name: counts
rules:
  - {id: third, match: {tool: "sea*"}, when: {nth: 3}, effects: [{kind: empty}]}
  - {id: every-2nd, match: {tool: search}, when: {every: 2}, effects: [{kind: latency, seconds: 0}]}
  - {id: after-4, match: {tool: search}, when: {after: 4}, effects: [{kind: world, condition: c}]}
  - {id: window, when: {window: [2, 3], count: all}, effects: [{kind: latency, seconds: 0}]}
"""
    )
    # search, write, search, search, write, search, search: searches are counted 1..5
    tools = ["search", "write_file", "search", "search", "write_file", "search", "search"]
    calls = [call(i, tool) for i, tool in enumerate(tools, start=1)]
    assert fired_rules(faults, calls) == [
        [],
        ["window"],
        ["every-2nd", "window"],
        ["third"],
        [],
        ["every-2nd"],
        ["after-4"],
    ]


def test_argument_conditions_and_globs():
    faults = layer(
        """
name: args
rules:
  - id: etc-writes
    match:
      tool: ["write_*", "edit_*"]
      arguments: {path: {regex: "^/etc/"}, force: {present: false}}
    effects: [{kind: empty}]
  - id: page-two
    match: {arguments: {page: {equals: 2}}}
    effects: [{kind: latency, seconds: 0}]
"""
    )
    calls = [
        call(1, "write_file", path="/etc/hosts"),
        call(2, "write_file", path="/home/x"),
        call(3, "edit_block", path="/etc/passwd", force=True),
        call(4, "edit_block", path="/etc/passwd"),
        call(5, "search", query="x", page=2),
        call(6, "search", query="x", page="2"),
        call(7, "read_file", path="/etc/hosts"),
    ]
    assert fired_rules(faults, calls) == [
        ["etc-writes"],
        [],
        [],
        ["etc-writes"],
        ["page-two"],
        [],
        [],
    ]


def test_max_fires_caps_a_rule_per_episode():
    faults = layer("name: cap\nrules:\n  - {id: twice, max_fires: 2, effects: [{kind: empty}]}\n")
    assert fired_rules(faults, [call(i) for i in range(1, 5)]) == [["twice"], ["twice"], [], []]
    other = [call(i, episode="other") for i in range(1, 3)]
    assert fired_rules(faults, other) == [["twice"], ["twice"]]


def test_only_the_first_rule_that_decides_the_answer_fires_on_a_call():
    faults = layer(
        """
name: first
rules:
  - {id: a-502, when: {nth: 1}, effects: [{kind: error, preset: http_502}]}
  - {id: b-429, max_fires: 1, effects: [{kind: error, preset: http_429}]}
  - {id: slow, effects: [{kind: latency, seconds: 0.5}]}
""",
        """
name: second
rules:
  - {id: cut, when: {nth: 1}, effects: [{kind: truncate}]}
  - {id: cond, when: {nth: 1}, effects: [{kind: world, condition: "it rains"}]}
""",
    )
    first = faults.decide(call(1))
    assert [(f.scenario, f.rule) for f in first.fired] == [
        ("first", "a-502"),
        ("first", "slow"),
        ("second", "cond"),
    ]
    assert "502" in first.answer.text and first.delay_seconds == 0.5
    assert [c.text for c in first.conditions] == ["it rains"] and not first.transforms
    # b-429 did not fire on call 1, so its single fire is still available.
    assert [f.rule for f in faults.decide(call(2)).fired] == ["b-429", "slow"]


def test_an_ended_episode_starts_counting_again_and_others_keep_their_counts():
    faults = layer("name: r\nrules:\n  - {id: once, max_fires: 1, effects: [{kind: empty}]}\n")
    calls = [call(1), call(2), call(1, episode="other")]
    assert fired_rules(faults, calls) == [["once"], [], ["once"]]
    # Going back to call 1 alone is no restart: only the episode store ends an episode.
    assert fired_rules(faults, [call(1)]) == [[]]
    faults.episode_ended(call(1).state_key)
    assert fired_rules(faults, [call(1), call(2, episode="other")]) == [["once"], []]
    assert faults.tracked_episodes() == 2


def test_probability_is_a_seeded_rate_and_differs_between_seeds():
    text = (
        "name: p\nseed: {seed}\nrules:\n"
        "  - {{id: r, probability: 0.3, effects: [{{kind: empty}}]}}\n"
    )
    runs = []
    for seed in (1, 1, 2):
        faults = layer(text.format(seed=seed))
        runs.append([bool(faults.decide(call(i)).fired) for i in range(1, 2001)])
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]
    assert 0.26 < sum(runs[0]) / 2000 < 0.34


@pytest.mark.parametrize(
    ("effect", "low", "high", "mean"),
    [
        ("{kind: latency, distribution: uniform, low: 1, high: 3}", 1, 3, 2.0),
        ("{kind: latency, distribution: normal, mean: 2, stddev: 0.5, max_seconds: 9}", 0, 9, 2.0),
        ("{kind: latency, distribution: exponential, mean: 0.5, max_seconds: 60}", 0, 60, 0.5),
    ],
)
def test_latency_distributions_are_seeded_and_bounded(effect, low, high, mean):
    text = f"name: lat\nseed: 3\nrules:\n  - {{id: r, effects: [{effect}]}}\n"
    draws = [layer(text).decide(call(i)).delay_seconds for i in range(1, 801)]
    again = [layer(text).decide(call(i)).delay_seconds for i in range(1, 801)]
    assert draws == again
    assert all(low <= d <= high for d in draws)
    assert statistics.mean(draws) == pytest.approx(mean, rel=0.1)


def test_decisions_do_not_depend_on_how_episodes_interleave():
    text = """
name: mix
seed: 11
rules:
  - {id: e502, probability: 0.2, effects: [{kind: error, preset: http_502}]}
  - {id: slow, probability: 0.5, effects: [{kind: latency, distribution: uniform, low: 0, high: 2}]}
  - {id: cut, probability: 0.2, effects: [{kind: truncate}]}
"""
    episodes = {name: [call(i, episode=name) for i in range(1, 41)] for name in "abc"}

    def run(order: list[str]) -> dict[str, list]:
        faults, positions = layer(text), dict.fromkeys(episodes, 0)
        out: dict[str, list] = {name: [] for name in episodes}
        for name in order:
            decision = faults.decide(episodes[name][positions[name]])
            positions[name] += 1
            out[name].append([(f.rule, f.detail) for f in decision.fired])
        return out

    order = [name for name in episodes for _ in range(40)]
    sequential = run(order)
    random.Random(0).shuffle(order)
    shuffled = run(order)
    assert sequential == shuffled
    assert any(sequential["a"]) and sequential["a"] != sequential["b"]


DETERMINISM_SCENARIO = """
name: mix
seed: 2026
rules:
  - {id: bad-gateway, probability: 0.25, effects: [{kind: error, preset: http_502}]}
  - id: jitter
    probability: 0.5
    effects: [{kind: latency, distribution: exponential, mean: 0.005}]
  - {id: garble, probability: 0.25, effects: [{kind: corrupt, rate: 0.1}]}
  - id: stale
    probability: 0.1
    max_fires: 1
    effects: [{kind: world, condition: stale data, calls: 2}]
"""


@pytest.mark.anyio
async def test_two_concurrent_episodes_get_the_same_faults_when_run_twice():
    """Two episodes call at the same time through MCP clients, in different interleavings
    (random pauses) on each run; with the same seed each episode gets the same faults and
    the same observations."""

    async def run(pause_seed: int) -> dict[str, tuple[list, list[str]]]:
        simulator = make_simulator(DETERMINISM_SCENARIO)
        pauses = random.Random(pause_seed)
        async with client_for(simulator) as client:

            async def agent(episode: str) -> None:
                for n in range(12):
                    await anyio.sleep(pauses.random() * 0.01)
                    await client.call_tool("search", {"query": f"q{n}"}, meta=in_episode(episode))

            async with anyio.create_task_group() as tg:
                tg.start_soon(agent, "alice")
                tg.start_soon(agent, "bob")
        return {
            name: (
                fired(simulator, name),
                [r.observation for r in simulator.episodes.find(name)[0].records],
            )
            for name in ("alice", "bob")
        }

    first, second = await run(pause_seed=1), await run(pause_seed=2)
    assert first == second
    faults_alice, faults_bob = first["alice"][0], first["bob"][0]
    assert sum(map(len, faults_alice)) >= 3  # the scenario does fire...
    assert faults_alice != faults_bob  # ...and each episode draws its own faults


@pytest.mark.anyio
async def test_a_limited_world_condition_expires_on_schedule_even_when_calls_fail():
    """`calls: 1` covers the firing call only, also when that call ends in a JSON-RPC error."""
    from aw_mcp.domain.catalogue import Catalogue
    from aw_mcp.domain.loader import load_domain
    from aw_mcp.faults.scenario import Scenario
    from aw_mcp.faults.scenario_layer import ScenarioFaultLayer
    from aw_mcp.simulation.simulator import RpcFaultError, WorldSimulator
    from aw_mcp.testing import FakeEngine
    from tests.helpers import TINY_DOMAIN

    scenario = Scenario.model_validate(
        {
            "name": "rain",
            "seed": 1,
            "rules": [
                {
                    "id": "rain",
                    "when": {"nth": 1},
                    "effects": [{"kind": "world", "condition": "it rains", "calls": 1}],
                },
                {
                    "id": "fail",
                    "when": {"nth": 1},
                    "effects": [{"kind": "jsonrpc_error", "code": -32000, "message": "down"}],
                },
            ],
        }
    )
    catalogue = Catalogue([load_domain(str(TINY_DOMAIN))])
    simulator = WorldSimulator(catalogue, FakeEngine(), faults=ScenarioFaultLayer([scenario]))
    tool = catalogue.get("run_command")
    with pytest.raises(RpcFaultError):
        await simulator.call("ep", tool, {"command": "a"})
    await simulator.call("ep", tool, {"command": "b"})
    (episode,) = simulator.episodes.all()
    assert [r.conditions for r in episode.records] == [["it rains"], []]

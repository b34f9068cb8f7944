"""Many short episodes through one simulator: what the episode lifecycle costs and keeps.

Runs EPISODES episodes of STEPS calls each (a bundled fault scenario loaded), with the store
limited to LIMIT live episodes, so nearly every new episode evicts one; then ends the rest.
The world model is the tests' FakeEngine (plumbing only: this measures the bookkeeping, not
inference). Prints calls per second, and how much per-episode state each layer still holds
(it must follow the store: LIMIT while running, nothing once every episode has ended).
Most of the time per call is prompt building; eviction is a few dictionary operations.

    PYTHONPATH=src:. python benchmarks/episode_churn.py [--episodes 20000] [--limit 1000]
"""

from __future__ import annotations

import argparse
import time

import anyio

from aw_mcp.domain.catalogue import Catalogue
from aw_mcp.domain.loader import load_domain
from aw_mcp.episode.store import EpisodeStore
from aw_mcp.faults.scenario import load_scenario
from aw_mcp.faults.scenario_layer import ScenarioFaultLayer
from aw_mcp.simulation.simulator import WorldSimulator
from aw_mcp.testing import FakeEngine


async def run(episodes: int, steps: int, limit: int) -> dict[str, float]:
    engine = FakeEngine("ok")
    faults = ScenarioFaultLayer([load_scenario("disk-full")])
    simulator = WorldSimulator(
        Catalogue([load_domain("terminal")]),
        engine,
        episodes=EpisodeStore(limit=limit),
        faults=faults,
    )
    tool = simulator.catalogue["run_command"]
    started = time.perf_counter()
    for i in range(episodes):
        for step in range(steps):
            await simulator.call(f"ep-{i}", tool, {"command": f"echo {step}"})
    seconds = time.perf_counter() - started
    running = {
        "live episodes": len(simulator.episodes.all()),
        "fault states": faults.tracked_episodes(),
        "forget calls": len(engine.forgotten),
    }
    for episode in simulator.episodes.all():
        simulator.end_episode(episode.episode_id, "benchmark over")
    return {
        "calls/s": episodes * steps / seconds,
        **running,
        "live after end": len(simulator.episodes.all()),
        "fault states after end": faults.tracked_episodes(),
        "forget calls after end": len(engine.forgotten),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=20_000)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--limit", type=int, default=1000)
    args = parser.parse_args()
    result = anyio.run(run, args.episodes, args.steps, args.limit)
    print(f"{args.episodes} episodes x {args.steps} calls, store limit {args.limit}")
    for name, value in result.items():
        print(f"  {name:24} {value:,.1f}" if isinstance(value, float) else f"  {name:24} {value:,}")


if __name__ == "__main__":
    main()

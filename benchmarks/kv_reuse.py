"""Step cost of an episode with and without KV reuse, measured side by side in one run.

    python benchmarks/kv_reuse.py [--steps 12] [--episodes 3] [--threads 2]

Three configurations run the same multi-episode workload (episodes interleaved round-robin,
as concurrent agents would arrive) on the embedded model:
  reuse+snapshots  the default engine: prefix reuse and per-episode KV snapshots
  reuse only       snapshot budget 0: switching episodes re-evaluates the history
  no reuse         the KV cache is dropped before every call (what a stateless server does)
It prints tokens evaluated per step and seconds per step; ratios are what to compare, since
absolute times on a shared 2-core machine move from run to run.
"""

from __future__ import annotations

import argparse
import statistics
import time

import anyio

from aw_mcp.catalogue import Catalogue
from aw_mcp.domain import load_domain
from aw_mcp.engines.llama_cpp import LlamaCppEngine, LlamaCppOptions
from aw_mcp.simulator import SimulatorSettings, WorldSimulator

COMMANDS = [
    "pwd",
    "ls -la",
    "cat README.md",
    "git status",
    "python3 --version",
    "whoami",
    "echo $HOME",
    "ls tests",
    "head -3 main.py",
    "df -h /",
    "uname -a",
    "date",
]


class NoReuseEngine(LlamaCppEngine):
    """The embedded engine with its KV cache dropped before every generation."""

    def _generate_blocking(self, *args):
        self.forget_all()
        return super()._generate_blocking(*args)


async def run(engine: LlamaCppEngine, steps: int, episodes: int) -> dict[str, float]:
    simulator = WorldSimulator(
        Catalogue([load_domain("terminal")]),
        engine,
        settings=SimulatorSettings(replay_read_only=False),
    )
    tool = simulator.catalogue.get("run_command")
    await engine.start()
    seconds, evaluated = [], []
    for step in range(steps):
        for episode in range(episodes):
            started = time.perf_counter()
            await simulator.call(f"ep{episode}", tool, {"command": COMMANDS[step % len(COMMANDS)]})
            seconds.append(time.perf_counter() - started)
            record = simulator.episodes.get(f"ep{episode}", "terminal").records[-1]
            evaluated.append(record.stats.evaluated_prompt_tokens)
    return {
        "s/step": statistics.mean(seconds),
        "s/step (last round)": statistics.mean(seconds[-episodes:]),
        "evaluated tok/step": statistics.mean(evaluated),
        "evaluated tok (last round)": statistics.mean(evaluated[-episodes:]),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    def options(**kw):
        return LlamaCppOptions(n_ctx=8192, n_threads=args.threads, **kw)

    configs = {
        "reuse+snapshots": LlamaCppEngine(options()),
        "reuse only": LlamaCppEngine(options(snapshot_budget_bytes=0)),
        "no reuse": NoReuseEngine(options()),
    }
    results = {
        name: await run(engine, args.steps, args.episodes) for name, engine in configs.items()
    }
    columns = list(next(iter(results.values())))
    print(f"{args.episodes} episodes x {args.steps} steps, terminal domain, embedded SmolLM2")
    print(f"{'config':18}" + "".join(f"{c:>28}" for c in columns))
    for name, row in results.items():
        if name == "no reuse":
            continue
        print(f"{name:18}" + "".join(f"{row[c]:>28.3f}" for c in columns))
    base = results["no reuse"]["s/step (last round)"]
    for name, row in results.items():
        if name == "no reuse":
            continue
        print(
            f"last-round speed-up of {name} over no reuse: {base / row['s/step (last round)']:.1f}x"
        )


if __name__ == "__main__":
    anyio.run(main)

"""Many episodes at once on the embedded model: engine layouts side by side, in one run.

Each configuration runs the same workload: EPISODES episodes of the bundled terminal domain,
all started together, each making STEPS run_command calls in sequence (so episodes interleave
on the model and the engine switches between them all the time). Printed per configuration:
wall time, generated tokens per second over all episodes, prompt tokens actually evaluated
versus reused, KV snapshot restores, step latency percentiles and the deepest queue.

    PYTHONPATH=src python benchmarks/concurrency.py --episodes 16 --steps 3

Compare within one run only: another busy process on this 2-core machine changes the
absolute numbers several-fold (docs/local-inference.md).
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass

import anyio

from aw_mcp.domain.catalogue import Catalogue
from aw_mcp.domain.loader import load_domain
from aw_mcp.engines.base import Engine
from aw_mcp.engines.counters import EngineCounters
from aw_mcp.engines.llama_cpp import LlamaCppEngine, LlamaCppOptions
from aw_mcp.engines.pool import EnginePool
from aw_mcp.simulation.simulator import WorldSimulator
from aw_mcp.testing import SMALL_MODEL


@dataclass
class Config:
    label: str
    instances: int = 1
    threads: int = 1
    snapshot_mb: int = 1024


CONFIGS = [
    Config("1 instance, 1 thread"),
    Config("1 instance, 2 threads", threads=2),
    Config("2 instances x 1 thread", instances=2),
    Config("1 instance, 1 thread, no KV snapshots", snapshot_mb=0),
]


def make_engine(config: Config, n_ctx: int) -> Engine:
    def one() -> LlamaCppEngine:
        return LlamaCppEngine(
            LlamaCppOptions(
                model=SMALL_MODEL,
                n_ctx=n_ctx,
                threads=config.threads,
                kv_snapshot_mb=config.snapshot_mb,
            )
        )

    if config.instances == 1:
        return one()
    return EnginePool([one() for _ in range(config.instances)])


def counters_of(engine: Engine) -> EngineCounters:
    return engine.counters


def max_waiting(engine: Engine) -> int:
    instances = getattr(engine, "instances", [engine])
    return max(e.scheduler.max_waiting for e in instances)


async def run(config: Config, episodes: int, steps: int, max_tokens: int) -> dict:
    domain = load_domain("terminal")
    domain = domain.model_copy(
        update={"generation": domain.generation.model_copy(update={"max_tokens": max_tokens})}
    )
    engine = make_engine(config, n_ctx=4096)
    await engine.start()
    simulator = WorldSimulator(catalogue=Catalogue([domain]), engine=engine)
    served = simulator.catalogue["run_command"]
    latencies: list[float] = []

    async def episode(i: int) -> None:
        for step in range(steps):
            started = time.perf_counter()
            answer = await simulator.call(f"ep-{i}", served, {"command": f"ls /srv/e{i}/s{step}"})
            latencies.append(time.perf_counter() - started)
            if answer.is_error:
                raise RuntimeError(answer.text)

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i in range(episodes):
            tg.start_soon(episode, i)
    wall = time.perf_counter() - started
    c = counters_of(engine)
    await engine.aclose()
    latencies.sort()
    return {
        "config": config.label,
        "wall_s": wall,
        "gen_tok_s": c.completion_tokens / wall,
        "evaluated": c.evaluated_prompt_tokens,
        "reused": c.reused_prompt_tokens,
        "restores": c.snapshot_restores,
        "p50_s": statistics.median(latencies),
        "p95_s": latencies[int(0.95 * (len(latencies) - 1))],
        "max_queue": max_waiting(engine),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument(
        "--only", type=int, nargs="*", help="run only these configurations (0-based)"
    )
    args = parser.parse_args()
    chosen = [c for i, c in enumerate(CONFIGS) if args.only is None or i in args.only]
    print(
        f"{args.episodes} episodes x {args.steps} steps, terminal domain, "
        f"max_tokens {args.max_tokens}, SmolLM2 on CPU"
    )
    header = (
        f"{'configuration':40} {'wall s':>7} {'gen tok/s':>9} {'evaluated':>9} "
        f"{'reused':>8} {'restores':>8} {'p50 s':>6} {'p95 s':>6} {'queue':>5}"
    )
    print(header)
    for config in chosen:
        r = anyio.run(run, config, args.episodes, args.steps, args.max_tokens)
        print(
            f"{r['config']:40} {r['wall_s']:7.1f} {r['gen_tok_s']:9.1f} {r['evaluated']:9d} "
            f"{r['reused']:8d} {r['restores']:8d} {r['p50_s']:6.2f} {r['p95_s']:6.2f} "
            f"{r['max_queue']:5d}"
        )


if __name__ == "__main__":
    main()

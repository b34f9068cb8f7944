"""What keeping state costs per call: today's default against a model that keeps state.

Replays the commands of recorded sessions (by default the held-out state sessions a
``generate terminal --script state --split heldout`` writes) through ``aw-mcp serve`` over
stdio twice, side by side in one run: as plain ``serve`` answers them (the bundled adapter,
its profile), and with ``--lora ADAPTER --profile small-state`` (the state shown next to each
call, the model's recall and change before each answer). Each server records its calls
(``--record-dir``); per call: prompt tokens, prompt tokens actually evaluated (the rest came
from the KV cache), tokens generated, and seconds as the client saw them. Printed at steps 1,
10 and 30 of a session (the median over sessions long enough), and the ratio new / default.
``--speculative`` adds a server: the state-keeping one with ``--speculative on`` (its
blocks copy the view, so drafts from the context may pay for them). ``--window-tokens N``
adds one that fits each call's prompt and answer in N tokens (``serve --window-tokens``, e.g.
the sequence length the adapter was trained on), the older turns told as the state they
left. ``--model NAME`` serves the state-keeping adapter on another base (the one it was
trained on, e.g. ``qwen2.5-coder-1.5b``); the default server keeps its own. Last, the mean
seconds per call over each session's first 30 calls (the issue's bar: a 30-call session no
slower per call than today's).

    python benchmarks/state_cost.py --records DIR --adapter ADAPTER.gguf [--sessions 3]
        [--speculative] [--window-tokens 2048] [--model qwen2.5-coder-1.5b]

Each session runs in the world it was recorded in (its ``worlds/`` file, passed in the
call's ``_meta`` as a client would), so the state the new server keeps starts where the
recorded one did. Measured numbers go in the lab notes of the run they measure.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

import anyio
from mcp import Client, StdioServerParameters
from mcp.types import RequestParamsMeta

from aw_mcp.records.folder import episode_worlds
from aw_mcp.records.reader import RecordedEpisode, load_record_dir
from aw_mcp.server.episode_identity import EPISODE_META_KEY, WORLD_META_KEY

STEPS = (1, 10, 30)
SESSION_CALLS = 30


async def replay(
    episodes: list[RecordedEpisode],
    worlds: dict[str, Any],
    extra: list[str],
    record_dir: Path,
) -> dict[str, list[float]]:
    """Client seconds per call, keyed by episode (the server records the rest)."""
    args = ["-m", "aw_mcp", "serve", "--simulator", "terminal", "--threads", "1"]
    args += ["--record-dir", str(record_dir), *extra]
    env = {k: v for k, v in os.environ.items() if k != "AW_MCP_MODEL"}
    params = StdioServerParameters(
        command=sys.executable, args=args, env={**env, "AW_MCP_LOG_LEVEL": "WARNING"}
    )
    seconds: dict[str, list[float]] = {}
    async with Client(params) as client:
        await client.list_tools()
        for episode in episodes:
            meta: dict[str, Any] = {EPISODE_META_KEY: episode.episode}
            if (world := worlds.get(episode.episode)) is not None:
                meta[WORLD_META_KEY] = world.model_dump(mode="json")
            times = seconds.setdefault(episode.episode, [])
            for record in episode.records:
                started = time.perf_counter()
                await client.call_tool(
                    record.tool, record.arguments, meta=cast(RequestParamsMeta, meta)
                )
                times.append(time.perf_counter() - started)
    return seconds


def per_step(record_dir: Path, seconds: dict[str, list[float]]) -> dict[int, dict[str, float]]:
    """Medians at each of STEPS over the sessions that reached it."""
    rows: dict[int, dict[str, list[float]]] = {s: {} for s in STEPS}
    for episode in load_record_dir(record_dir):
        for record in episode.records:
            if record.index not in rows or record.stats is None:
                continue
            at = rows[record.index]
            at.setdefault("prompt", []).append(record.stats.prompt_tokens)
            at.setdefault("evaluated", []).append(record.stats.evaluated_prompt_tokens)
            at.setdefault("generated", []).append(record.stats.completion_tokens)
            at.setdefault("seconds", []).append(seconds[episode.episode][record.index - 1])
    return {s: {k: statistics.median(v) for k, v in cols.items()} for s, cols in rows.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=Path, required=True, help="recorded sessions")
    parser.add_argument("--adapter", type=Path, required=True, help="the state-keeping LoRA")
    parser.add_argument("--sessions", type=int, default=3)
    parser.add_argument(
        "--speculative", action="store_true", help="also the state server, --speculative on"
    )
    parser.add_argument(
        "--window-tokens", type=int, help="also the state server with --window-tokens N"
    )
    parser.add_argument("--model", help="the adapter's base, when it is not the default's")
    args = parser.parse_args()
    episodes = sorted(load_record_dir(args.records), key=lambda e: -len(e.records))
    episodes = episodes[: args.sessions]
    worlds = episode_worlds(args.records)
    state = ["--lora", str(args.adapter), "--profile", "small-state"]
    if args.model:
        state = ["--model", args.model, *state]
    systems = {"default": [], "state": state}
    if args.speculative:
        systems["state, drafts"] = [*state, "--speculative", "on"]
    if args.window_tokens:
        window = f"state, window {args.window_tokens}"
        systems[window] = [*state, "--window-tokens", str(args.window_tokens)]
    results, session_means = {}, {}
    for name, extra in systems.items():
        with tempfile.TemporaryDirectory() as folder:
            seconds = anyio.run(replay, episodes, worlds, extra, Path(folder))
            results[name] = per_step(Path(folder), seconds)
        first = [t for times in seconds.values() for t in times[:SESSION_CALLS]]
        session_means[name] = statistics.mean(first)
    print(f"{len(episodes)} sessions of {[len(e.records) for e in episodes]} calls")
    others = [name for name in systems if name != "default"]
    print(" | ".join(["step", "metric", *systems, *(f"{name} / default" for name in others)]))
    for step in STEPS:
        for metric in ("prompt", "evaluated", "generated", "seconds"):
            if any(metric not in results[name][step] for name in systems):
                continue
            values = {name: results[name][step][metric] for name in systems}
            old = values["default"]
            ratios = [f"{values[n] / old:.2f}x" if old else "-" for n in others]
            cells = [f"{v:.2f}" for v in values.values()]
            print(" | ".join([str(step), metric, *cells, *ratios]))
    old = session_means["default"]
    cells = [f"{session_means[name]:.2f}" for name in systems]
    ratios = [f"{session_means[n] / old:.2f}x" for n in others]
    print(" | ".join([f"calls 1-{SESSION_CALLS}", "seconds per call", *cells, *ratios]))


if __name__ == "__main__":
    main()

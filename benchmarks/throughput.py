"""Throughput of the embedded engine: one table of ratios, each measured side by side in one run.

    python benchmarks/throughput.py [--threads 1] [--episodes 16]

Rows (target beside each; ratios, because absolute speed on a shared machine moves several-fold
from run to run, and both sides of a ratio are measured within seconds of each other):
1. concurrency   total generated tok/s of N episodes at once over Streamable HTTP, over one
                 episode's rate alone (same server, same run); also with batch_slots=1
2. history       latency of step 30 over step 1 of one episode, KV reuse on / off
3. overhead      one call through the MCP server (stdio subprocess, in-process HTTP) over the
                 same prompt sent straight to an engine
4. switching     bringing back an idle episode: re-evaluating it over restoring its snapshot
5. cold start    `aw-mcp serve` (stdio): time to first tools/list, to first observation, peak
                 RSS after 100 episodes made one call each and went idle
6. structured    decode speed with an outputSchema constraint over without (real MCP tools)

The Terminal domain runs with max_tokens 24 (short observations, many steps), the embedded
SmolLM2-135M on CPU. The whole run takes a few minutes.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx2

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "benchmarks")]

from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.types import TextContent  # noqa: E402
from structured_output import load_tools  # noqa: E402

from aw_mcp.engines.base import ChatMessage, GenerationRequest  # noqa: E402
from aw_mcp.engines.llama_cpp import LlamaCppEngine, LlamaCppOptions  # noqa: E402
from aw_mcp.records.reader import load_record_dir  # noqa: E402
from aw_mcp.server.app import build_server  # noqa: E402
from aw_mcp.server.episode_identity import EPISODE_HEADER, episode_meta  # noqa: E402
from aw_mcp.testing import SMALL_MODEL, RecordingEngine, free_port, serving_http  # noqa: E402
from aw_mcp.wiring.assemble import (  # noqa: E402
    build_catalogue,
    build_simulator,
    resolve_adapters,
    serving_profile,
)
from aw_mcp.wiring.settings import ServeSettings  # noqa: E402

MAX_TOKENS = 24  # --max-tokens; 0 keeps the domain's own (256)
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


@dataclass
class Row:
    name: str
    measured: str
    target: str
    ok: bool | None
    detail: str = ""


def terminal_domain(folder: Path, max_tokens: int = MAX_TOKENS) -> Path:
    """The bundled Terminal domain, with short observations unless ``max_tokens`` is 0."""
    text = (REPO / "simulators" / "terminal.yaml").read_text(encoding="utf-8")
    path = folder / "terminal.yaml"
    if max_tokens:
        text = text.replace("max_tokens: 256", f"max_tokens: {max_tokens}")
    path.write_text(text, "utf-8")
    return path


BATCH_SLOTS = 8  # batched decoding in every row but the batch_slots=1 reference


@dataclass
class Serving:
    """What `aw-mcp serve` would serve the domain with: the bundled LoRA adapter and the prompt
    profile it was trained with (or, with --no-lora, neither). Every row uses it."""

    lora: list[Path]
    profile: str

    @classmethod
    def default(cls, domain: Path, no_lora: bool) -> Serving:
        settings = ServeSettings(simulator=[str(domain)], no_lora=no_lora)
        adapters = resolve_adapters(settings, build_catalogue(settings))
        return cls([a.path for a in adapters], serving_profile(settings, adapters))

    def settings(self, domain: Path) -> ServeSettings:
        # validated: the profile may come from an adapter's metadata
        return ServeSettings.model_validate({"simulator": [str(domain)], "profile": self.profile})

    def describe(self) -> str:
        adapter = ", ".join(p.name for p in self.lora) or "no adapter"
        return f"{adapter}, profile {self.profile}"


SERVING = Serving([], "default")  # set in main()


def engine(threads: int, **options) -> LlamaCppEngine:
    options = {
        "model": SMALL_MODEL,
        "n_ctx": 8192,
        "threads": threads,
        "batch_slots": BATCH_SLOTS,
        "lora": SERVING.lora,
        **options,
    }
    return LlamaCppEngine(LlamaCppOptions(**options))


def command(episode: int, step: int) -> str:
    return f"{COMMANDS[step % len(COMMANDS)]} # e{episode}"


async def timed(call: Callable[[], Awaitable[object]]) -> float:
    started = time.perf_counter()
    await call()
    return time.perf_counter() - started


# -- 1. concurrency over Streamable HTTP -----------------------------------------------------


async def http_episode(url: str, episode: str, steps: int, first: int = 0) -> None:
    http = httpx2.AsyncClient(headers={EPISODE_HEADER: episode}, timeout=httpx2.Timeout(600))
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        for step in range(steps):
            result = await client.call_tool("run_command", {"command": command(first, step)})
            if result.is_error:
                text = [c.text for c in result.content if isinstance(c, TextContent)]
                raise RuntimeError("\n".join(text))


async def concurrency(domain: Path, threads: int, episodes: int, steps: int) -> list[Row]:
    rows = []
    # One sequence per episode: with fewer, the episodes beyond them swap through snapshots.
    for slots in (episodes, 1):
        eng = engine(threads, batch_slots=slots)
        simulator = build_simulator(SERVING.settings(domain), engine=eng)
        async with serving_http(build_server(simulator, owns_engine=True), free_port()) as url:
            await http_episode(url, "warm", 1)  # the domain's shared prompt is evaluated once
            rates = {}
            for label, n in (("one", 1), ("many", episodes)):
                before = eng.counters.completion_tokens
                started = time.perf_counter()
                async with anyio.create_task_group() as tg:
                    for i in range(n):
                        tg.start_soon(http_episode, url, f"{label}-{slots}-{i}", steps, i)
                wall = time.perf_counter() - started
                rates[label] = (eng.counters.completion_tokens - before) / wall
            extra = eng.counters.extra
        ratio = rates["many"] / rates["one"]
        mean_batch = extra.get("step_sequences", 0) / max(1, extra.get("decode_steps", 0))
        rows.append(
            Row(
                f"1. {episodes} episodes / 1 (HTTP, batch_slots={slots})",
                f"{ratio:.2f}x",
                ">= 1.5x" if slots > 1 else "(reference)",
                ratio >= 1.5 if slots > 1 else None,
                f"{rates['many']:.0f} vs {rates['one']:.0f} tok/s"
                + (f"; {mean_batch:.1f} sequences/step" if slots > 1 else ""),
            )
        )
    return rows


# -- 2. history growth and 4. episode switching ----------------------------------------------


async def history(domain: Path, threads: int, steps: int) -> tuple[list[Row], GenerationRequest]:
    eng = engine(threads)
    recorder = RecordingEngine(eng)
    simulator = build_simulator(SERVING.settings(domain), engine=recorder)
    tool = simulator.catalogue["run_command"]
    await eng.start()
    await simulator.call("warm", tool, {"command": "true"})
    for step in range(steps):
        await simulator.call("long", tool, {"command": command(0, step)})
    records = simulator.episodes.get("long", "terminal").records
    first_stats, last_stats = records[0].stats, records[-1].stats
    assert first_stats and last_stats, "model calls carry their generation stats"
    first, last = recorder.requests[1], recorder.requests[-1]
    on = last_stats.seconds / first_stats.seconds
    # Reuse off: the same two prompts, every KV state dropped before each (a stateless server).
    cold: dict[str, list[float]] = {"first": [], "last": []}
    for name, request in (("first", first), ("last", last)):
        eng.forget_all()
        cold[name].append((await eng.generate(request)).stats.seconds)
    off = statistics.median(cold["last"]) / statistics.median(cold["first"])
    await eng.aclose()
    rows = [
        Row(
            f"2. step {steps} / step 1, KV reuse on",
            f"{on:.2f}x",
            "<= 1.5x",
            on <= 1.5,
            f"{first_stats.seconds:.2f} -> {last_stats.seconds:.2f} s; "
            f"{last_stats.evaluated_prompt_tokens} of "
            f"{last_stats.prompt_tokens} prompt tokens evaluated",
        ),
        Row(
            f"2. step {steps} / step 1, KV reuse off",
            f"{off:.2f}x",
            "(reference)",
            None,
            f"{statistics.median(cold['first']):.2f} -> {statistics.median(cold['last']):.2f} s",
        ),
    ]
    return rows, last


async def switching(threads: int, request: GenerationRequest) -> Row:
    """Episode "back" is pushed out of the 2 sequences by two others, then called again."""
    seconds = {}
    for label, budget_mb in (("snapshot", 1024), ("re-evaluate", 0)):
        eng = engine(threads, batch_slots=2, kv_snapshot_mb=budget_mb)
        await eng.generate(request.model_copy(update={"cache_key": "back", "max_tokens": 1}))
        for other in ("x", "y"):
            messages = [*request.messages[:1], ChatMessage(role="user", content=f"ls {other}")]
            await eng.generate(GenerationRequest(messages=messages, max_tokens=1, cache_key=other))
        again = request.model_copy(update={"cache_key": "back", "max_tokens": 1})
        result = await eng.generate(again)
        seconds[label] = result.stats.seconds
        await eng.aclose()
    ratio = seconds["re-evaluate"] / seconds["snapshot"]
    return Row(
        "4. switch back: re-evaluate / snapshot",
        f"{ratio:.1f}x",
        ">= 5x",
        ratio >= 5,
        f"{seconds['re-evaluate']:.2f} vs {seconds['snapshot']:.3f} s "
        f"({len(request.messages)} messages)",
    )


# -- 3. overhead and 5. cold start -----------------------------------------------------------


def serve_params(
    domain: Path, threads: int, snapshot_mb: int | None = None, record_dir: Path | None = None
) -> StdioServerParameters:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO / "src"),
        "AW_MCP_N_CTX": "8192",
        "AW_MCP_THREADS": str(threads),
        "AW_MCP_BATCH_SLOTS": str(BATCH_SLOTS),
        "AW_MCP_LOG_LEVEL": "WARNING",
        "AW_MCP_PROFILE": SERVING.profile,
    }
    if not SERVING.lora:
        env["AW_MCP_NO_LORA"] = "1"
    if snapshot_mb is not None:
        env["AW_MCP_KV_SNAPSHOT_MB"] = str(snapshot_mb)
    if record_dir is not None:
        env["AW_MCP_RECORD_DIR"] = str(record_dir)
    return StdioServerParameters(
        command=sys.executable, args=["-m", "aw_mcp", "serve", "--simulator", str(domain)], env=env
    )


async def idle_episodes(client: Client, idle: int) -> float:
    """Peak RSS (MB) of the stdio server after ``idle`` episodes made one call each."""

    async def one(i: int) -> None:
        meta = episode_meta(f"idle-{i}")
        await client.call_tool("run_command", {"command": f"echo {i}"}, meta=meta)

    async with anyio.create_task_group() as tg:
        for i in range(idle):
            tg.start_soon(one, i)
    return child_peak_rss_mb()


def child_peak_rss_mb() -> float:
    """Peak RSS of this process's `aw-mcp serve` child (VmHWM)."""
    peak = 0.0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        if int(fields.get("PPid", "0").strip()) == os.getpid() and "VmHWM" in fields:
            peak = max(peak, int(fields["VmHWM"].split()[0]) / 1024)
    return peak


async def overhead_and_cold_start(domain: Path, threads: int, trials: int, idle: int) -> list[Row]:
    """Row 3 compares each call as the client saw it with the same call's generation inside
    the server (the engine's own time, from the server's record of that call): the same
    prompt, the same engine, the same KV state, so the difference is the MCP path alone.
    (Sending the prompt to a second engine in this process instead compared two model
    copies in two processes: their states and timings differ by more than the server does.)"""
    client_s: dict[str, list[float]] = {"stdio": [], "HTTP": []}
    engine_s: dict[str, list[float]] = {"stdio": [], "HTTP": []}

    async def calls(label: str, client: Client) -> None:
        for i in range(trials):  # a new episode's first call: shared prefix + its own tokens
            args = {"command": f"ls /srv/{label}/{i}"}
            meta = episode_meta(f"{label}-{i}")
            began = time.perf_counter()
            await client.call_tool("run_command", args, meta=meta)
            client_s[label].append(time.perf_counter() - began)

    rows = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as records:
        async with Client(serve_params(domain, threads, record_dir=Path(records))) as client:
            await client.list_tools()
            to_list = time.perf_counter() - started
            await client.call_tool("run_command", {"command": "pwd"})
            to_observation = time.perf_counter() - started
            await calls("stdio", client)
            peak = await idle_episodes(client, idle)
        served = {e.episode: e for e in load_record_dir(Path(records))}
        for i in range(trials):
            stats = served[f"stdio-{i}"].records[-1].stats
            assert stats is not None
            engine_s["stdio"].append(stats.seconds)
    # The same with no KV snapshots kept (an idle episode's next call re-evaluates its own
    # tokens): what the snapshot budget costs.
    async with Client(serve_params(domain, threads, snapshot_mb=0)) as client:
        peak_without = await idle_episodes(client, idle)
    http_sim = build_simulator(SERVING.settings(domain), engine=engine(threads))
    http_server = build_server(http_sim, owns_engine=True)
    async with serving_http(http_server, free_port()) as url, Client(url) as client:
        await client.call_tool("run_command", {"command": "pwd"})
        await calls("HTTP", client)
        for i in range(trials):
            stats = http_sim.episodes.get(f"HTTP-{i}", "terminal").records[-1].stats
            assert stats is not None
            engine_s["HTTP"].append(stats.seconds)
    for label in ("stdio", "HTTP"):
        ratio = statistics.median(client_s[label]) / statistics.median(engine_s[label])
        rows.append(
            Row(
                f"3. MCP call / engine call ({label})",
                f"{ratio:.3f}x",
                "<= 1.05x",
                ratio <= 1.05,
                f"median {statistics.median(client_s[label]):.3f} vs "
                f"{statistics.median(engine_s[label]):.3f} s, {trials} calls",
            )
        )
    rows += [
        Row("5. cold start: first tools/list", f"{to_list:.2f} s", "< 1.5 s", to_list < 1.5),
        Row("5. cold start: first observation", f"{to_observation:.2f} s", "-", None),
        Row(
            f"5. peak RSS, model + {idle} idle episodes",
            f"{peak:.0f} MB",
            "< 500 MB",
            peak < 500,
            "stdio server process (VmHWM), --kv-snapshot-mb 1024 (default)",
        ),
        Row(
            f"5. peak RSS, model + {idle} idle episodes",
            f"{peak_without:.0f} MB",
            "(reference)",
            None,
            "--kv-snapshot-mb 0: no idle KV kept",
        ),
    ]
    return rows


# -- 6. structured output --------------------------------------------------------------------


async def structured(threads: int) -> Row:
    eng = engine(threads)
    await eng.start()
    speeds: dict[bool, list[float]] = {True: [], False: []}
    for name, schema, arguments in load_tools():
        messages = [
            ChatMessage(role="system", content=f"You are the MCP tool {name}. Reply with JSON."),
            ChatMessage(role="user", content=f"{name} {arguments}"),
        ]
        for constrained in (False, True, False, True):  # interleaved; best of two each
            request = GenerationRequest(
                messages=messages,
                max_tokens=48,
                json_schema=schema if constrained else None,
                cache_key=name,
            )
            stats = (await eng.generate(request)).stats
            speeds[constrained].append(stats.completion_tokens / max(stats.seconds, 1e-9))
    await eng.aclose()
    on, off = statistics.mean(speeds[True]), statistics.mean(speeds[False])
    return Row(
        "6. decode with schema / without",
        f"{on / off:.2f}",
        ">= 0.8",
        on / off >= 0.8,
        f"{on:.0f} vs {off:.0f} tok/s, {len(load_tools())} real tools, llguidance",
    )


def print_table(rows: list[Row], seconds: float, threads: int, max_tokens: int) -> None:
    print(
        f"\n{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"{threads} inference thread(s), SmolLM2-135M Q4_1 ({SERVING.describe()}), "
        f"observations of at most {max_tokens or 256} tokens, run took {seconds:.0f} s\n"
    )
    print(f"| {'row':45} | {'measured':>10} | {'target':>11} | met | detail |")
    print(f"|{'-' * 47}|{'-' * 12}|{'-' * 13}|-----|--------|")
    for r in rows:
        met = "-" if r.ok is None else ("yes" if r.ok else "NO")
        print(f"| {r.name:45} | {r.measured:>10} | {r.target:>11} | {met:3} | {r.detail} |")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--steps", type=int, default=3, help="steps per episode in row 1")
    parser.add_argument("--history", type=int, default=30, help="steps of row 2's episode")
    parser.add_argument("--trials", type=int, default=5, help="calls per transport in row 3")
    parser.add_argument("--idle", type=int, default=100, help="idle episodes in row 5")
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=MAX_TOKENS,
        help=f"longest observation (default {MAX_TOKENS}; 0: the domain's own, 256)",
    )
    parser.add_argument(
        "--no-lora", action="store_true", help="the plain model, not the bundled adapter"
    )
    parser.add_argument(
        "--only-concurrency", action="store_true", help="row 1 alone (it takes ~1 minute)"
    )
    args = parser.parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        global SERVING
        domain = terminal_domain(Path(folder), args.max_tokens)
        SERVING = Serving.default(domain, args.no_lora)
        rows = await concurrency(domain, args.threads, args.episodes, args.steps)
        print_table(rows, time.perf_counter() - started, args.threads, args.max_tokens)
        if args.only_concurrency:
            return
        history_rows, long_request = await history(domain, args.threads, args.history)
        rows += history_rows
        rows += await overhead_and_cold_start(domain, args.threads, args.trials, args.idle)
        first_row_5 = next(i for i, r in enumerate(rows) if r.name.startswith("5."))
        rows.insert(first_row_5, await switching(args.threads, long_request))
        rows.append(await structured(args.threads))
    print_table(rows, time.perf_counter() - started, args.threads, args.max_tokens)


if __name__ == "__main__":
    anyio.run(main)

"""First calls of two episodes against later calls on plain `aw-mcp serve` (the default world
model), per bundled domain.

A new user's first call used to prefill the whole prompt prefix (instructions, tools, world
facts, demonstrations: thousands of tokens on a CPU) before answering. The server now
evaluates each served domain's prefix right after loading the model (``warm_up``); this
measures what a client sees: `aw-mcp serve --simulator DOMAIN --record-dir TMP` over stdio
(web and swe get their own bundled adapters, as plain serve gives them), the first
``tools/call`` sent once the server has been up for ``--settle`` seconds, then ``--later``
more calls of the same episode (the connection's own, as a new user's client makes them),
then the same first call again in a second episode named in the call's ``_meta`` (as a
client running rollouts names them), each timed by the client. The server's records give
the prompt tokens each first call evaluated and reused: a prefix evaluated once per server
is reused by both first calls; one evaluated again per episode shows in the second.

    python benchmarks/first_call.py [--domain terminal --domain web ...]
        [--model qwen2.5-coder-0.5b] [--settle 60] [--later 3]

Measured 2026-12-01 on the 2-core CPU machine (default model, adapter q3, one thread,
--settle 45, an evaluation running on the other core): first call / median of 3 later calls
terminal 1.33 s / 1.31 s (1.01x), os 0.84 s / 5.07 s (0.16x), swe 1.57 s / 9.66 s (0.16x): the
first call is no slower than the ones after it (those answer with more text). Again
2026-12-04 on the default of that day (s6; e1 for swe; --settle 45, an evaluation on the other
core): terminal 1.15 s / 1.04 s (1.10x), os 0.74 s / 2.84 s (0.26x), swe 1.41 s / 2.58 s (0.55x).
With s7 (the default since; --settle 45, the machine otherwise idle): terminal 1.08 s / 1.00 s
(1.08x), os 0.77 s / 2.80 s (0.27x), swe 1.43 s / 2.56 s (0.56x).

Every bundled domain and a second episode, 2026-12-06 (the default model with its bundled
adapters, web's and swe's own for those; one thread, --settle 45, --later 3, a training run
busy on the other core; 8.5 minutes for the seven): first call of episode 1 / median of 3
later calls / first call of episode 2, then the prompt tokens evaluated / reused by the two
first calls:

    android   3.52 s /  1.17 s /  3.27 s   12 / 2106   1 / 2117   (43 tokens answered)
    mcp       0.83 s /  2.50 s /  0.57 s   19 / 1128   1 / 1146   (7)
    os        0.79 s /  2.92 s /  0.51 s   10 / 639    1 / 648    (6)
    search   14.84 s / 13.97 s / 12.55 s   32 / 2314   1 / 2345   (169)
    swe       1.37 s /  2.41 s /  1.14 s   18 / 866    1 / 883    (14)
    terminal  1.08 s /  1.03 s /  0.86 s   13 / 668    1 / 680    (11)
    web       8.70 s /  9.74 s /  8.37 s   29 / 2175   1 / 2203   (105)

The shared prefix is evaluated once per server: episode 1's first call finds it from the
warm-up and evaluates only its own action; episode 2's (the same call) finds it in episode
1's state and evaluates one token. What a first call costs is its answer (android's device
list is 43 tokens, search's results 169).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

from aw_mcp.engines.counters import GenerationStats
from aw_mcp.records.reader import load_record_dir
from aw_mcp.server.episode_identity import episode_meta

# One call a new user makes first in each domain, then ones that follow it (arguments from
# each domain's tools and world facts in simulators/DOMAIN.yaml).
CALLS: dict[str, list[tuple[str, dict[str, object]]]] = {
    "android": [
        ("mobile_list_available_devices", {}),
        ("mobile_list_apps", {"device": "emulator-5554"}),
        ("mobile_launch_app", {"device": "emulator-5554", "packageName": "com.example.notes"}),
        ("mobile_get_foreground_app", {"device": "emulator-5554"}),
    ],
    "mcp": [
        ("echo", {"message": "hello from a new client"}),
        ("get-sum", {"a": 17, "b": 25}),
        ("get-structured-content", {"location": "Chicago"}),
        ("get-env", {}),
    ],
    "os": [
        ("list_allowed_directories", {}),
        ("list_directory", {"path": "/home/alex"}),
        ("list_directory", {"path": "/home/alex/Documents"}),
        ("get_file_info", {"path": "/home/alex"}),
    ],
    "search": [
        ("brave_web_search", {"query": "python 3.14 free-threaded build", "count": 3}),
        ("fetch", {"url": "https://docs.python.org/3/whatsnew/3.14.html", "max_length": 600}),
        ("brave_web_search", {"query": "PEP 750 template strings", "count": 2}),
        ("brave_news_search", {"query": "python 3.15 beta", "count": 2}),
    ],
    "swe": [
        ("git_status", {"repo_path": "/workspace/invoice-calc"}),
        ("list_directory", {"path": "/workspace/invoice-calc"}),
        ("git_log", {"repo_path": "/workspace/invoice-calc"}),
        ("git_branch", {"repo_path": "/workspace/invoice-calc", "branch_type": "local"}),
    ],
    "terminal": [
        ("run_command", {"command": "pwd"}),
        ("run_command", {"command": "ls"}),
        ("run_command", {"command": "whoami"}),
        ("run_command", {"command": "echo hello"}),
    ],
    "web": [
        ("browser_navigate", {"url": "http://127.0.0.1:8431/"}),
        ("browser_navigate", {"url": "http://127.0.0.1:8431/books"}),
        ("browser_navigate_back", {}),
        ("browser_navigate", {"url": "http://127.0.0.1:8431/search?q=python"}),
    ],
}
SECOND_EPISODE = "first-call-benchmark-episode-2"


@dataclass
class Run:
    """One server's calls: seconds as the client saw them, the engine's stats of the first
    call of each episode (None: not answered by the model), and the tools whose answers
    were errors (isError: a simulated error, or arguments the server refused)."""

    seconds: list[float]  # episode 1's calls, then episode 2's first call
    first: GenerationStats | None = None
    second: GenerationStats | None = None
    errors: list[str] = field(default_factory=list)


async def measure(
    domain: str, model: str | None, settle: float, later: int, record_dir: Path
) -> Run:
    args = ["-m", "aw_mcp", "serve", "--simulator", domain, "--threads", "1"]
    args += ["--record-dir", str(record_dir)]
    if model:
        args += ["--model", model]
    env = {k: v for k, v in os.environ.items() if k != "AW_MCP_MODEL"}
    params = StdioServerParameters(
        command=sys.executable, args=args, env={**env, "AW_MCP_LOG_LEVEL": "WARNING"}
    )
    calls = CALLS[domain][: later + 1]
    run = Run(seconds=[])
    async with Client(params) as client:
        await client.list_tools()
        await anyio.sleep(settle)  # the model loads and the prefix is evaluated meanwhile
        for n, (tool, arguments) in enumerate([*calls, calls[0]]):
            meta = episode_meta(SECOND_EPISODE) if n == len(calls) else None
            started = time.perf_counter()
            result = await client.call_tool(tool, arguments, meta=meta)
            run.seconds.append(time.perf_counter() - started)
            if result.is_error:
                run.errors.append(tool)
    for episode in load_record_dir(record_dir):
        stats = episode.records[0].stats if episode.records else None
        if episode.episode == SECOND_EPISODE:
            run.second = stats
        else:
            run.first = stats
    return run


def tokens(stats: GenerationStats | None) -> str:
    """Prompt tokens evaluated / reused, and tokens generated."""
    if stats is None:
        return "-"
    used = f"{stats.evaluated_prompt_tokens} / {stats.reused_prompt_tokens}"
    return f"{used}, {stats.completion_tokens} out"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--domain", action="append", choices=sorted(CALLS))
    parser.add_argument("--model", help="as serve's --model (default: serve's default)")
    parser.add_argument("--settle", type=float, default=60.0, metavar="SECONDS")
    parser.add_argument("--later", type=int, default=3)
    args = parser.parse_args()
    print(
        "| domain | first call, episode 1 | later calls (median) | first call, episode 2 "
        "| episode 1's first: prompt tokens evaluated / reused | episode 2's first |"
    )
    print("|---|---|---|---|---|---|")
    for domain in args.domain or sorted(CALLS):
        with tempfile.TemporaryDirectory() as folder:
            run = anyio.run(measure, domain, args.model, args.settle, args.later, Path(folder))
        first, rest, second = run.seconds[0], run.seconds[1:-1], run.seconds[-1]
        later = f"{statistics.median(rest):.2f} s" if rest else "-"
        errors = f" (isError: {', '.join(run.errors)})" if run.errors else ""
        print(
            f"| {domain}{errors} | {first:.2f} s | {later} | {second:.2f} s "
            f"| {tokens(run.first)} | {tokens(run.second)} |",
            flush=True,
        )


if __name__ == "__main__":
    main()

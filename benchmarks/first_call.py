"""First call against later calls on plain `aw-mcp serve` (the default world model), per domain.

A new user's first call used to prefill the whole prompt prefix (instructions, tools, world
facts, demonstrations: thousands of tokens on a CPU) before answering. The server now
evaluates each served domain's prefix right after loading the model (``warm_up``); this
measures what a client sees: `aw-mcp serve --simulator DOMAIN` over stdio, the first
``tools/call`` sent once the server has been up for ``--settle`` seconds, then ``--later``
more calls of the same episode, each timed by the client. Ratios side by side, one run.

    python benchmarks/first_call.py [--domain terminal --domain os --domain swe]
        [--model qwen2.5-coder-0.5b] [--settle 60] [--later 3]

Measured 2026-12-01 on the 2-core CPU machine (default model, adapter q3, one thread,
--settle 45, an evaluation running on the other core): first call / median of 3 later calls
terminal 1.33 s / 1.31 s (1.01x), os 0.84 s / 5.07 s (0.16x), swe 1.57 s / 9.66 s (0.16x): the
first call is no slower than the ones after it (those answer with more text). Again
2026-12-04 on the default of that day (s6; e1 for swe; --settle 45, an evaluation on the other
core): terminal 1.15 s / 1.04 s (1.10x), os 0.74 s / 2.84 s (0.26x), swe 1.41 s / 2.58 s (0.55x).
With s7 (the default since; --settle 45, the machine otherwise idle): terminal 1.08 s / 1.00 s
(1.08x), os 0.77 s / 2.80 s (0.27x), swe 1.43 s / 2.56 s (0.56x).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import anyio
from mcp import Client, StdioServerParameters

# One call a new user makes first in each domain, then ones that follow it.
CALLS: dict[str, list[tuple[str, dict[str, object]]]] = {
    "terminal": [
        ("run_command", {"command": "pwd"}),
        ("run_command", {"command": "ls"}),
        ("run_command", {"command": "whoami"}),
        ("run_command", {"command": "echo hello"}),
    ],
    "os": [
        ("list_allowed_directories", {}),
        ("list_directory", {"path": "/home/alex"}),
        ("list_directory", {"path": "/home/alex/Documents"}),
        ("get_file_info", {"path": "/home/alex"}),
    ],
    "swe": [
        ("git_status", {"repo_path": "/workspace/invoice-calc"}),
        ("list_directory", {"path": "/workspace/invoice-calc"}),
        ("git_log", {"repo_path": "/workspace/invoice-calc"}),
        ("git_branch", {"repo_path": "/workspace/invoice-calc", "branch_type": "local"}),
    ],
}


async def measure(domain: str, model: str | None, settle: float, later: int) -> list[float]:
    args = ["-m", "aw_mcp", "serve", "--simulator", domain, "--threads", "1"]
    if model:
        args += ["--model", model]
    env = {k: v for k, v in os.environ.items() if k != "AW_MCP_MODEL"}
    params = StdioServerParameters(
        command=sys.executable, args=args, env={**env, "AW_MCP_LOG_LEVEL": "WARNING"}
    )
    seconds = []
    async with Client(params) as client:
        await client.list_tools()
        await anyio.sleep(settle)  # the model loads and the prefix is evaluated meanwhile
        for tool, arguments in CALLS[domain][: later + 1]:
            started = time.perf_counter()
            await client.call_tool(tool, arguments)
            seconds.append(time.perf_counter() - started)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--domain", action="append", choices=sorted(CALLS))
    parser.add_argument("--model", help="as serve's --model (default: serve's default)")
    parser.add_argument("--settle", type=float, default=60.0, metavar="SECONDS")
    parser.add_argument("--later", type=int, default=3)
    args = parser.parse_args()
    print("| domain | first call s | later calls s (median) | first / later |")
    print("|---|---|---|---|")
    for domain in args.domain or ["terminal", "os", "swe"]:
        seconds = anyio.run(measure, domain, args.model, args.settle, args.later)
        first, rest = seconds[0], statistics.median(seconds[1:])
        print(f"| {domain} | {first:.2f} | {rest:.2f} | {first / rest:.2f}x |")


if __name__ == "__main__":
    main()

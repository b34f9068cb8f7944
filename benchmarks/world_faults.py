"""How often does the world model render a world fault? (a quality measurement, not a test)

Runs the same short terminal episode with and without the bundled ``disk-full`` scenario
(the condition enters at call 3) and counts, for each later call, whether the observation
shows the full disk ("No space left", "100%", "ENOSPC"). Prints both side by side.

    PYTHONPATH=src python benchmarks/world_faults.py [--model PATH.gguf] [--max-tokens 48]
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import anyio

from aw_mcp.domain.catalogue import Catalogue
from aw_mcp.domain.loader import load_domain
from aw_mcp.engines.llama_cpp import LlamaCppEngine, LlamaCppOptions
from aw_mcp.faults.layer import NoFaults
from aw_mcp.faults.scenario import load_scenario
from aw_mcp.faults.scenario_layer import ScenarioFaultLayer
from aw_mcp.simulation.simulator import WorldSimulator
from aw_mcp.testing import small_model_path

COMMANDS = [
    "pwd",
    "ls",
    "echo 'hello' > notes.txt",
    "df -h /",
    "cp main.py main_backup.py",
    "pip install requests",
    "git commit -am 'wip'",
    "dd if=/dev/zero of=big.bin bs=1M count=10",
]
SHOWS_FULL_DISK = re.compile(r"no space left|enospc|100%|disk (is )?full|quota", re.I)


async def run(with_fault: bool, engine: LlamaCppEngine, max_tokens: int) -> list[tuple[str, str]]:
    domain = load_domain("terminal").model_copy(deep=True)
    domain.generation.max_tokens = max_tokens
    faults = ScenarioFaultLayer([load_scenario("disk-full")]) if with_fault else NoFaults()
    simulator = WorldSimulator(Catalogue([domain]), engine, faults=faults)
    served = simulator.catalogue["run_command"]
    episode = f"bench-{with_fault}"
    out = []
    for command in COMMANDS:
        answer = await simulator.call(episode, served, {"command": command})
        out.append((command, answer.text))
    return out


async def main(model: Path | None, max_tokens: int) -> None:
    engine = LlamaCppEngine(LlamaCppOptions(model=str(model or small_model_path()), n_ctx=8192))
    await engine.start()
    try:
        plain = await run(False, engine, max_tokens)
        faulted = await run(True, engine, max_tokens)
    finally:
        await engine.aclose()
    hits = {"no fault": 0, "disk-full": 0}
    for i, ((command, a), (_, b)) in enumerate(zip(plain, faulted, strict=True), start=1):
        after = i >= 3  # the condition is in effect from call 3 on
        print(f"--- call {i}: {command}{'   [disk full in effect]' if after else ''}")
        print("  no fault :", a.replace("\n", " | ")[:160])
        print("  disk-full:", b.replace("\n", " | ")[:160])
        if after:
            hits["no fault"] += bool(SHOWS_FULL_DISK.search(a))
            hits["disk-full"] += bool(SHOWS_FULL_DISK.search(b))
    later = len(COMMANDS) - 2
    print(f"\ncalls after the fault that show a full disk (of {later}):")
    for name, count in hits.items():
        print(f"  {name:9}: {count}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--max-tokens", type=int, default=48)
    args = parser.parse_args()
    anyio.run(main, args.model, args.max_tokens)

"""CI: the installed wheel, with its runtime dependencies alone, serves a call on each engine
that needs no extra: llama-cpp (the embedded model) and openai (against a real
OpenAI-compatible server on loopback, whose URL is the first argument).

Run with the python of a venv where only `pip install aw_mcp-*.whl` was done, from outside the
source tree (so the installed package, not the checkout, is imported).
"""

from __future__ import annotations

import shutil
import sys

import anyio
from mcp import Client, StdioServerParameters

CALL = {"command": "echo hello"}


async def call_once(flags: list[str]) -> str:
    aw_mcp = shutil.which("aw-mcp")
    assert aw_mcp, "the wheel installed no aw-mcp command"
    target = StdioServerParameters(command=aw_mcp, args=["serve", *flags])
    with anyio.fail_after(300):
        async with Client(target) as client:
            result = await client.call_tool("run_command", CALL)
    text = "".join(getattr(c, "text", "") for c in result.content)
    if result.is_error:
        raise SystemExit(f"aw-mcp serve {' '.join(flags)}: the call failed: {text}")
    return text


async def main(openai_url: str) -> None:
    import aw_mcp

    print(f"aw_mcp imported from {aw_mcp.__file__}")
    for flags in (
        ["--engine", "llama-cpp"],
        ["--engine", "openai", "--base-url", openai_url, "--max-retries", "1"],
    ):
        text = await call_once(flags)
        print(f"ok: aw-mcp serve {' '.join(flags)} answered {text[:60]!r}")


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])

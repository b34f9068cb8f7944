"""``serve --episode NAME``: clients that start a server per call (langchain's default tools)
still see one world: each new process resumes the named episode from its records."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from aw_mcp.records.reader import load_record_dir
from tests.helpers import TINY_DOMAIN
from tests.http_support import NO_MODEL, SERVE

pytestmark = pytest.mark.anyio
CANNED = Path(__file__).parent / "data" / "answer-every-call.faults.yaml"


def server(records: Path, *flags: str) -> StdioServerParameters:
    """A stdio server whose calls a fault rule answers (no model), recording into ``records``."""
    args = [*SERVE[1:], *NO_MODEL, "--simulator", str(TINY_DOMAIN), "--faults", str(CANNED)]
    return StdioServerParameters(
        command=SERVE[0], args=[*args, "--record-dir", str(records), *flags]
    )


async def one_call_per_process(params: StdioServerParameters, commands: list[str]) -> None:
    for command in commands:
        async with Client(params) as client:  # a new server process for every call
            await client.call_tool("run_command", {"command": command})


@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["handshake", "2026-07-28"])
async def test_a_named_episode_goes_on_in_every_new_server_process(tmp_path, mode):
    records = tmp_path / "records"
    params = server(records, "--episode", "lc-session")
    for command in ["echo x > note.txt", "cat note.txt", "ls"]:
        async with Client(params, mode=mode) as client:
            await client.call_tool("run_command", {"command": command})
    (episode,) = load_record_dir(records)
    assert episode.episode == "lc-session"
    assert [r.index for r in episode.records] == [1, 2, 3]  # one run, resumed twice
    assert len({r.episode_started_at for r in episode.records}) == 1
    assert [t.action.arguments["command"] for t in episode.turns()][:2] == [
        "echo x > note.txt",
        "cat note.txt",
    ]


async def test_without_a_name_each_process_is_an_episode_of_its_own(tmp_path):
    records = tmp_path / "records"
    await one_call_per_process(server(records), ["echo x > note.txt", "cat note.txt"])
    episodes = load_record_dir(records)
    assert len(episodes) == 2 and all(len(e.records) == 1 for e in episodes)


def test_a_name_without_records_is_refused_at_start(capsys):
    from aw_mcp.cli import main

    assert main(["serve", "--episode", "lc-session", "--simulator", str(TINY_DOMAIN)]) == 2
    assert "--episode keeps an episode across server processes" in capsys.readouterr().err


# langchain-mcp-adapters' default tools open a new session, so a new stdio server, per call.
LANGCHAIN_PER_CALL = """
import asyncio, json, sys
from langchain_mcp_adapters.client import MultiServerMCPClient

async def main():
    client = MultiServerMCPClient(json.loads(sys.argv[1]))
    (tool,) = [t for t in await client.get_tools() if t.name == "run_command"]
    for command in ["echo x > note.txt", "cat note.txt"]:
        await tool.ainvoke({"command": command})

asyncio.run(main())
"""


def _langchain_python() -> str | None:
    path = os.environ.get("AW_MCP_LANGCHAIN_PYTHON")
    return path if path and Path(path).exists() else None


@pytest.mark.external
@pytest.mark.skipif(
    _langchain_python() is None,
    reason="langchain-mcp-adapters not installed: set AW_MCP_LANGCHAIN_PYTHON (.ci/run makes one)",
)
def test_langchain_s_tools_see_one_world_across_their_server_processes(tmp_path):
    records = tmp_path / "records"
    params = server(records, "--episode", "lc-session")
    config = {"aw": {"transport": "stdio", "command": params.command, "args": params.args}}
    done = subprocess.run(
        [_langchain_python(), "-c", LANGCHAIN_PER_CALL, json.dumps(config)],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (episode,) = load_record_dir(records)
    assert [r.index for r in episode.records] == [1, 2]
    assert episode.records[1].arguments == {"command": "cat note.txt"}

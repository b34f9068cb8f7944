"""The OS generator drives the REAL filesystem MCP server through aw-mcp record in a sandbox
laid out like the OS world; later calls see what earlier calls wrote."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
import yaml

from aw_mcp.cli import main
from aw_mcp.trajectories.generate_mcp import generate_mcp_world, prepare_world
from aw_mcp.trajectories.records import load_record_dir
from aw_mcp.trajectories.sandbox import SandboxUnavailable, ensure_user
from aw_mcp.trajectories.sources import SOURCE_NAMES
from aw_mcp.trajectories.sources.os_home import HOME_ALEX, NOTES, _os_script
from aw_mcp.trajectories.sources.swe_repo import SWE_COMMITS, _swe_script, swe_world_facts


def _missing() -> str:
    if shutil.which("mcp-server-filesystem") is None:
        return "npm package @modelcontextprotocol/server-filesystem is not installed"
    try:
        ensure_user("alex")
    except SandboxUnavailable as exc:
        return str(exc)
    return ""


def test_scripts_are_fixed_by_the_seed_and_write_before_they_read():
    for script in (_os_script, _swe_script):
        first = script(random.Random("x:1"))
        assert first == script(random.Random("x:1"))
        assert first != script(random.Random("x:2"))
        assert 5 <= len(first) <= 12
    calls = _os_script(random.Random("os:1:0"))
    written = calls[1][1]["path"]
    assert calls[1][0] == "write_file" and calls[2] == ("read_text_file", {"path": written})


def test_swe_seed_repository_has_the_same_hashes_every_time():
    facts = swe_world_facts()["facts"]
    assert facts == swe_world_facts()["facts"]
    assert facts["git_log"].startswith(f"{len(SWE_COMMITS)} commits on main")
    assert "Add invoice_total with tax (2026-11-28)" in facts["git_log"]


@pytest.mark.skipif(bool(_missing()), reason=_missing())
def test_os_episode_recorded_from_the_real_filesystem_server(tmp_path: Path):
    out = tmp_path / "os"
    [path] = generate_mcp_world(prepare_world("os"), out, seed=3, episodes=1)
    [episode] = load_record_dir(out)
    records = episode.records
    assert path.exists() and episode.domain == "os"
    assert [r.index for r in records] == list(range(1, len(records) + 1))
    assert {r.source for r in records} <= {"real", "rpc-error"}
    write, read = records[1], records[2]
    assert write.tool == "write_file"
    assert write.observation == f"Successfully wrote to {write.arguments['path']}"
    assert read.tool == "read_text_file" and read.arguments["path"] == write.arguments["path"]
    assert read.observation == write.arguments["content"]  # the real file, read back
    assert read.structured == {"content": write.arguments["content"]}
    capture = json.loads((out / "tools" / "os.json").read_text())
    assert "read_text_file" in [t["name"] for t in capture["tools"]]
    world = yaml.safe_load((out / "world.yaml").read_text())
    assert world["replace_notes"] is True
    assert json.dumps(NOTES) in world["notes"][0]
    assert world["facts"]["allowed_directories"] == HOME_ALEX


def test_generate_lists_every_source_with_its_pinned_versions(capsys):
    assert main(["generate", "--list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listed] == list(SOURCE_NAMES)
    assert "@modelcontextprotocol/server-filesystem 2026.8.31" in listed[1]


def test_an_unknown_source_is_a_clear_error(capsys):
    assert main(["generate", "nope", "--out", "x"]) == 2
    assert "no source 'nope'; sources: terminal, os, swe" in capsys.readouterr().err

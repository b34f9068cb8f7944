"""The OS generator drives the REAL filesystem MCP server through aw-mcp record in a sandbox
laid out like the OS world; later calls see what earlier calls wrote. The SWE generator adds
the real git server and a real bash answering the world's shell tools (run_command,
run_tests) in the same sandbox."""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from aw_mcp.cli import main
from aw_mcp.generation import mcp_servers
from aw_mcp.generation.mcp_servers import (
    generate_mcp_world,
    prepare_world,
    python_server,
    seed_with_server_python,
)
from aw_mcp.generation.sandbox import SandboxUnavailable, ensure_user
from aw_mcp.generation.shell_tools import RUN_COMMAND, ShellTool
from aw_mcp.generation.sources import SOURCE_NAMES
from aw_mcp.generation.sources.os_home import HOME_ALEX, NOTES, _os_script
from aw_mcp.generation.sources.swe_repo import (
    FIXES,
    HELDOUT_FAMILIES,
    IMPORT_EDIT,
    REPO,
    RUN_TESTS,
    SWE_COMMITS,
    TOTALS_PATH,
    _swe_heldout_script,
    _swe_script,
    shell_families,
    swe_world_facts,
)
from aw_mcp.records.reader import load_record_dir


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


VERSIONS = {"python3": "3.11.2", "python3-pytest": "7.2.1", "git": "2.39.5"}


def test_swe_seed_repository_has_the_same_hashes_every_time():
    facts = swe_world_facts(VERSIONS)["facts"]
    assert facts == swe_world_facts(VERSIONS)["facts"]
    assert facts["git_log"].startswith(f"{len(SWE_COMMITS)} commits on main")
    assert "Add invoice_total with tax (2026-11-28)" in facts["git_log"]
    # the first two commits are those of the earlier recordings (data/swe*)
    assert "54245bc Add line totals (2026-11-27); 9781172 Initial commit" in facts["git_log"]
    assert facts["toolchain"].startswith(
        "Python 3.11.2 (/usr/bin/python3), pytest 7.2.1, git 2.39.5"
    )


def test_shell_tools_turn_arguments_into_one_quoted_command_line():
    assert RUN_COMMAND.command_line({"command": "cd src && ls | wc -l"}) == "cd src && ls | wc -l"
    # run_tests: python3 -m pytest [extra_args] [target], every word quoted, from the repo root
    assert RUN_TESTS.command_line({}) == f"(cd {REPO} && python3 -m pytest)"
    node = "tests/test_totals.py::test_line_total"
    assert RUN_TESTS.command_line({"target": node, "extra_args": ["-k", "a and not b"]}) == (
        f"(cd {REPO} && python3 -m pytest -k 'a and not b' {node})"
    )
    assert RUN_TESTS.command_line({"target": "x; rm -rf ~"}).endswith("pytest 'x; rm -rf ~')")
    with pytest.raises(ValueError, match="takes no argument timeout"):
        RUN_TESTS.command_line({"timeout": 5})
    with pytest.raises(ValueError, match="extra_args must be a string or strings"):
        RUN_TESTS.command_line({"extra_args": [1]})
    with pytest.raises(ValueError, match="needs command"):
        RUN_COMMAND.command_line({"command": " "})
    # a tool is declared one way: its command line as an argument, or a program and words
    tool = ShellTool(name="lint", program=("ruff", "check"), words=("paths",))
    assert tool.command_line({"paths": ["a b.py", "c.py"]}) == "ruff check 'a b.py' c.py"
    with pytest.raises(ValueError, match="either line or program"):
        ShellTool(name="both", line="command", program=("ls",))


def test_swe_scripts_run_the_tests_around_the_fix_and_hold_out_command_families():
    """Training never uses a held-out command family; every held-out episode does. Every
    episode runs the tests after the fix (and most before it), in at most 12 calls."""
    for script, held_out in ((_swe_script, False), (_swe_heldout_script, True)):
        before = 0
        for n in range(200):
            calls = script(random.Random(f"swe:{held_out}:{n}"))
            assert len(calls) <= 12
            families = set().union(*(shell_families(tool, args) for tool, args in calls))
            assert bool(families & HELDOUT_FAMILIES) == held_out, (n, families)
            tools = [tool for tool, _ in calls]
            fixed = tools.index("edit_file")
            runs = [
                i for i, (tool, args) in enumerate(calls) if "pytest" in shell_families(tool, args)
            ]
            assert any(i > fixed for i in runs), (n, calls)
            before += any(i < fixed for i in runs)
            for tool, args in calls:  # every shell call builds its command line
                if tool in ("run_command", "run_tests"):
                    (RUN_COMMAND if tool == "run_command" else RUN_TESTS).command_line(args)
        assert before > 150  # most episodes reproduce the failure first
    assert shell_families(
        "run_command", {"command": "PYTHONPATH=src python3 -m pytest -v --tb=short | tee out"}
    ) == {"pytest", "pytest -v", "pytest --tb", "tee"}
    assert shell_families("run_command", {"command": "git show --stat HEAD && ls"}) == {
        "git show",
        "ls",
    }
    assert shell_families("run_tests", {"extra_args": ["-x", "-q"]}) == {
        "pytest",
        "pytest -x",
        "pytest -q",
    }


@pytest.mark.external
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


def test_a_seed_by_the_server_python_says_why_it_could_not_run(monkeypatch, tmp_path: Path):
    """duckdb's and excel's seeds are written by their server's own python: a virtualenv
    that is missing, or a script that fails there, is a SandboxUnavailable naming the cause."""
    monkeypatch.setattr(mcp_servers, "python_server", lambda venv, cmd: str(tmp_path / cmd))
    with pytest.raises(SandboxUnavailable, match=r"pkg is not installed in /opt/aw-mcp-venv"):
        seed_with_server_python("venv", "pkg", "pass")
    (tmp_path / "python").symlink_to(sys.executable)
    seed_with_server_python(
        "venv", "pkg", "import sys; assert sys.argv[1:] == ['a', 'b']", "a", "b"
    )
    with pytest.raises(SandboxUnavailable, match=r"pkg's python: .*no duckdb here"):
        seed_with_server_python("venv", "pkg", "raise SystemExit('no duckdb here')")


GIT_SERVER = python_server("git", "mcp-server-git")


def _swe_missing() -> str:
    if missing := _missing():
        return missing
    if not Path(GIT_SERVER).exists():
        return f"mcp-server-git is not installed at {GIT_SERVER} (see .ci/run)"
    probe = subprocess.run(["/usr/bin/python3", "-c", "import pytest"], capture_output=True)
    if probe.returncode != 0:
        return "Debian's python3 has no pytest (apt-get install python3-pytest)"
    return ""


@pytest.mark.external
@pytest.mark.skipif(bool(_swe_missing()), reason=_swe_missing())
def test_swe_episode_runs_real_tests_and_commands_beside_the_mcp_servers(tmp_path: Path):
    old, new = FIXES[0]  # quantize(..., ROUND_HALF_UP): needs the import edit too
    calls = [
        ("run_tests", {}),
        ("run_command", {"command": "python3 -c 'import invoice_calc'"}),
        ("run_command", {"command": "cd src; cat missing.txt"}),
        ("edit_file", {"path": TOTALS_PATH, "edits": [{"oldText": old, "newText": new}]}),
        ("edit_file", {"path": TOTALS_PATH, "edits": [IMPORT_EDIT]}),
        ("run_tests", {"extra_args": ["-q"]}),  # from the repository's root, though cd'ed
        ("run_command", {"command": "pwd && git status --short invoice_calc/totals.py"}),
        ("git_log", {"repo_path": REPO, "max_count": 1}),
    ]
    world = dataclasses.replace(prepare_world("swe"), scripts={"train": lambda rng: calls})
    out = tmp_path / "swe"
    generate_mcp_world(world, out, seed=1, episodes=1)
    [episode] = load_record_dir(out)
    records = episode.records
    assert [(r.index, r.tool, r.source) for r in records] == [
        (i, tool, "real") for i, (tool, _) in enumerate(calls, start=1)
    ]
    before, imported, missing, _, _, after, pwd, log = (r.observation for r in records)
    assert "1 failed, 3 passed" in before and before.endswith("\n[exit code: 1]")
    assert "AssertionError: assert Decimal('2.67') == Decimal('2.68')" in before
    assert "FAILED tests/test_totals.py::test_round_cents_half_up" in before
    # src/ is on pytest's path (pyproject.toml), not on python3's: the import fails
    assert "ModuleNotFoundError: No module named 'invoice_calc'" in imported
    assert imported.endswith("\n[exit code: 1]")
    assert missing == "cat: missing.txt: No such file or directory\n[exit code: 1]"
    assert "4 passed" in after and "failed" not in after and after.endswith("\n[exit code: 0]")
    assert pwd == f"{REPO}/src\n M invoice_calc/totals.py\n[exit code: 0]"  # cd persisted
    assert "Add invoice_total with tax" in log
    assert not any(r.is_error for r in records)
    capture = [t["name"] for t in json.loads((out / "tools" / "swe.json").read_text())["tools"]]
    assert {"git_log", "read_text_file", "run_command", "run_tests"} <= set(capture)
    source = yaml.safe_load((out / "source.yaml").read_text())
    pytest_version = source["versions"]["python3-pytest"]
    assert source["versions"]["python3"].startswith("3.")
    world_file = yaml.safe_load((out / "world.yaml").read_text())
    assert f"pytest {pytest_version}" in world_file["facts"]["toolchain"]
    assert f"pytest-{pytest_version}" in before  # the version the run printed

"""Each call's real state in episodes recorded from real MCP servers (``generation/mcp_state.py``):
the state given to the proxies' records leaves the rest of them as written, a git server's
trace is read as git's, generation without strace is refused before it records, and real os
and swe episodes record what the filesystem server wrote and read, and what git committed."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from aw_mcp.generation import mcp_state
from aw_mcp.generation.mcp_servers import McpWorld, generate_mcp_world, prepare_world
from aw_mcp.generation.mcp_state import attach_states
from aw_mcp.generation.sources.os_home import HOME_ALEX
from aw_mcp.generation.sources.swe_repo import REPO, SWE_COMMITS
from aw_mcp.generation.state_trace import TraceUnavailable, accesses_of
from aw_mcp.records.calls import CallRecord
from aw_mcp.records.reader import load_record_dir
from aw_mcp.records.sink import RecordSink
from aw_mcp.state.steps import (
    ChangeDir,
    GitChange,
    GitFacts,
    PathState,
    Recall,
    StepState,
    Write,
)
from tests.helpers import needs_sandbox
from tests.test_generate_mcp import _missing, _swe_missing


def _record(index: int, **fields) -> CallRecord:
    base = {
        "index": index,
        "episode": "os-s1-0000",
        "domain": "os",
        "tool": "read_text_file",
        "arguments": {"path": f"/home/alex/{index}.txt"},
        "observation": "caf\u00e9 \ud800",  # a lone surrogate is written as its escape
        "is_error": False,
        "source": "real",
        "started_at": 1.5,
        "seconds": 0.25,
    }
    return CallRecord(**{**base, **fields})


def test_states_go_to_their_records_and_nothing_else_changes(tmp_path: Path):
    sink = RecordSink(tmp_path)
    for index in (1, 2, 3):
        sink.write(_record(index, structured={"content": "x"} if index == 2 else None))
    path = sink.path_for("os-s1-0000")
    before = path.read_text(encoding="utf-8").splitlines()
    state = StepState(
        cwd=HOME_ALEX,
        recall=Recall(paths={"/home/alex/2.txt": PathState(kind="file", content="x")}),
    )
    assert attach_states(path, {2: state, 9: state}) == 1
    after = path.read_text(encoding="utf-8").splitlines()
    assert after[0] == before[0] and after[2] == before[2]  # byte for byte
    given = json.loads(after[1])
    assert given.pop("state") == state.model_dump(mode="json")
    assert given == json.loads(before[1])
    [episode] = load_record_dir(tmp_path)
    assert [r.state for r in episode.records] == [None, state, None]


GIT_SERVER_TRACE = [
    # GitPython in the server's own process: git's config lookups and the work tree's files
    # it hashes are not the user's reads; what it reads of .git is the repository's facts.
    f'[pid 7] openat(AT_FDCWD<{REPO}>, "/workspace/.config/git/config", O_RDONLY) = -1 ENOENT',
    f'[pid 7] newfstatat(AT_FDCWD<{REPO}>, "README.md", {{st_mode=S_IFREG}}, 0) = 0',
    f'[pid 8] openat(AT_FDCWD<{REPO}>, ".git/HEAD", O_RDONLY) = 3<{REPO}/.git/HEAD>',
]


def test_a_git_servers_own_accesses_are_read_as_gits():
    plain = accesses_of(GIT_SERVER_TRACE, 7, REPO)
    assert "/workspace/.config/git/config" in plain.missing and plain.git_read == set()
    git = accesses_of(GIT_SERVER_TRACE, 7, REPO, all_git=True)
    assert git.missing == set() and git.looked_up == set() and git.opened == set()
    assert git.git_read == {f"{REPO}/.git/HEAD"}


def test_without_strace_generation_is_refused_before_anything_is_recorded(tmp_path, monkeypatch):
    monkeypatch.setattr(mcp_state, "STRACE", "no-such-strace-aw")
    world = McpWorld(
        name="folder",
        mount_at="/tmp",
        user="nobody",
        seed=lambda root: None,
        servers={"shell": ["sh"]},
        scripts={"train": lambda rng: [("anything", {})]},
        records_state=True,
    )
    with pytest.raises(TraceUnavailable, match="--no-state"):
        generate_mcp_world(world, tmp_path / "out", seed=1, episodes=1)
    assert not (tmp_path / "out").exists()


def _generated(world: McpWorld, calls, out: Path, state: bool = True) -> list[CallRecord]:
    world = dataclasses.replace(world, scripts={"train": lambda rng: calls})
    generate_mcp_world(world, out, seed=1, episodes=1, trace_state=state)
    [episode] = load_record_dir(out)
    assert [r.tool for r in episode.records] == [tool for tool, _ in calls]
    return episode.records


TITLE_EDIT = {"oldText": "# invoice-calc", "newText": "# ic"}
VOLATILE = ("state", "started_at", "seconds", "episode_started_at")


@needs_sandbox
@pytest.mark.external
@pytest.mark.skipif(bool(_missing()), reason=_missing())
def test_os_calls_record_what_the_filesystem_server_wrote_and_read(tmp_path: Path):
    note = f"{HOME_ALEX}/Documents/tea.txt"
    missing = f"{HOME_ALEX}/Documents/todo.txt"
    calls = [
        ("write_file", {"path": note, "content": "- tea\n"}),
        ("read_text_file", {"path": note}),
        ("edit_file", {"path": note, "edits": [{"oldText": "- tea", "newText": "- tea (done)"}]}),
        ("read_text_file", {"path": missing}),
        ("list_directory", {"path": f"{HOME_ALEX}/Documents"}),
    ]
    world = prepare_world("os")
    records = _generated(world, calls, tmp_path / "on")
    write, read, edit, gone, listing = (r.state for r in records)
    assert all(s is not None and s.cwd == HOME_ALEX for s in (write, read, edit, gone, listing))
    assert write.change == [Write(path=note, content="- tea\n")]
    assert note not in write.recall.paths  # writing a new file reads nothing of it
    assert read.recall.paths[note] == PathState(kind="file", content="- tea\n")
    assert read.change == []
    assert edit.recall.paths[note] == PathState(kind="file", content="- tea\n")
    assert edit.change == [Write(path=note, content="- tea (done)\n")]
    assert gone.recall.paths[missing] == PathState(kind="missing") and gone.change == []
    listed = listing.recall.paths[f"{HOME_ALEX}/Documents"]
    assert listed.kind == "dir" and "tea.txt" in (listed.entries or [])
    # Off: the same records, without state.
    plain = _generated(world, calls, tmp_path / "off", state=False)
    assert all(r.state is None for r in plain)

    def kept(r: CallRecord):
        return {k: v for k, v in r.model_dump(mode="json").items() if k not in VOLATILE}

    assert [kept(r) for r in records] == [kept(r) for r in plain]
    assert "--no-state" in (tmp_path / "off" / "source.yaml").read_text()
    assert "--no-state" not in (tmp_path / "on" / "source.yaml").read_text()


@needs_sandbox
@pytest.mark.external
@pytest.mark.skipif(bool(_swe_missing()), reason=_swe_missing())
def test_swe_calls_record_shell_and_git_server_state(tmp_path: Path):
    readme = f"{REPO}/README.md"
    text = SWE_COMMITS[0][2]["README.md"]
    calls = [
        ("run_command", {"command": "cat README.md"}),
        ("write_file", {"path": f"{REPO}/CHANGELOG.md", "content": "# Changelog\n"}),
        ("run_command", {"command": "git add CHANGELOG.md && git commit -qm 'Add a changelog'"}),
        ("git_status", {"repo_path": REPO}),
        ("run_command", {"command": "cd src"}),
        ("edit_file", {"path": readme, "edits": [TITLE_EDIT]}),
        ("git_add", {"repo_path": REPO, "files": ["README.md"]}),
        ("git_commit", {"repo_path": REPO, "message": "Shorter title"}),
    ]
    records = _generated(prepare_world("swe"), calls, tmp_path / "swe")
    cat, write, commit, status, cd, edit, add, git_commit = (r.state for r in records)
    assert cat is not None and cat.cwd == REPO
    assert cat.recall.paths[readme] == PathState(kind="file", content=text)
    assert write.change == [Write(path=f"{REPO}/CHANGELOG.md", content="# Changelog\n")]
    committed = GitFacts(repository=REPO, branch="main", head="Add a changelog", status=[])
    assert commit.change == [GitChange(facts=committed)]
    assert status.recall.git == [committed] and status.recall.paths == {}
    assert status.change == []
    assert cd.change == [ChangeDir(path=f"{REPO}/src")]
    assert edit.cwd == f"{REPO}/src"  # the shell's cd is the episode's working directory
    assert edit.change == [Write(path=readme, content=text.replace("# invoice-calc", "# ic"))]
    staged = committed.model_copy(update={"status": ["M  README.md"]})
    assert add.change == [GitChange(facts=staged)]
    # what GitPython hashes and the git config it looks for are git's, not the user's reads
    assert add.recall.paths == {} and git_commit.recall.paths == {}
    assert add.recall.git == [staged.model_copy(update={"status": [" M README.md"]})]
    assert git_commit.change == [
        GitChange(facts=committed.model_copy(update={"head": "Shorter title"}))
    ]

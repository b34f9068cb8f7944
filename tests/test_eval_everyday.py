"""`aw-mcp eval everyday`: a first session of everyday commands served beside real bash on the
machine the served world describes. Plumbing with the FakeEngine stand-in (it answers the
bundled world's user to every command, so exactly the commands whose real answer that is are
right); one small run of the real embedded model through the command line."""

from __future__ import annotations

import json

import pytest

from aw_mcp.cli import main
from aw_mcp.domain.catalogue import Catalogue
from aw_mcp.domain.loader import load_domain
from aw_mcp.episode.store import EpisodeStore
from aw_mcp.evaluation.everyday import (
    OutputExistsError,
    read_commands,
    render,
    run_session,
)
from aw_mcp.evaluation.sessions import FIRST_LOOK_COMMANDS, KEEPS_STATE_COMMANDS
from aw_mcp.generation.sandbox import BashSandbox, SandboxUnavailable
from aw_mcp.records.reader import load_record_dir
from aw_mcp.simulation.simulator import WorldSimulator
from aw_mcp.testing import FakeEngine
from tests.helpers import make_simulator, needs_sandbox

pytestmark = pytest.mark.anyio


def _rows(out):
    return [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]


@needs_sandbox
async def test_each_served_answer_is_compared_with_real_bash_in_the_served_world(tmp_path):
    engine = FakeEngine("dev\n[exit code: 0]")  # the bundled Terminal world's user is dev
    simulator = make_simulator(engine, "terminal")
    out = tmp_path / "out"
    answers = await run_session(simulator, ["whoami", "pwd", "cat missing.txt"], out)
    assert [a.real for a in answers] == [
        "dev\n[exit code: 0]",
        "/home/dev/project\n[exit code: 0]",
        "cat: missing.txt: No such file or directory\n[exit code: 1]",
    ]
    assert [a.right for a in answers] == [True, False, False]
    report = render(answers)
    assert "$ pwd\n  served: 'dev\\n[exit code: 0]'\n  real:   '/home/dev/project" in report
    assert "$ whoami" not in report  # only the wrong answers are shown
    assert report.endswith("1 of 3 answered as real bash does (33%)")
    # The session is one served episode; its rows are scored like any closed-loop run.
    rows = _rows(out)
    assert [r["reference"] for r in rows] == [a.real for a in answers]
    assert {r["mode"] for r in rows} == {"closed-loop"} and len(engine.requests) == 3
    (real,) = load_record_dir(out / "real")
    assert [r.arguments["command"] for r in real.records] == ["whoami", "pwd", "cat missing.txt"]
    # Never resumed (another model may have served the first): the folder must be new.
    with pytest.raises(OutputExistsError, match="choose a new --output-dir"):
        await run_session(simulator, ["whoami"], out)
    assert len(engine.requests) == 3
    assert len(_rows(out)) == 3  # nothing lost


@needs_sandbox
async def test_the_real_session_records_what_each_command_read_and_changed(tmp_path, capsys):
    """A session that writes a file and reads it back: the real steps carry their state, so
    eval score tells the read-back apart (the fake engine keeps no state)."""
    engine = FakeEngine("[exit code: 0]")
    out = tmp_path / "out"
    answers = await run_session(
        make_simulator(engine, "terminal"), ["echo hi > new.txt", "cat new.txt", "pwd"], out
    )
    assert [a.right for a in answers] == [True, False, False]
    (real,) = load_record_dir(out / "real")
    wrote, read, _ = (r.state for r in real.records)
    assert wrote is not None and read is not None
    assert [(op.op, getattr(op, "content", None)) for op in wrote.change] == [("write", "hi\n")]
    assert list(read.recall.paths) == ["/home/dev/project/new.txt"]
    assert [r.get("reads_back") for r in _rows(out)] == [False, True, False]
    assert main(["eval", "score", "--predictions", str(out / "predictions.jsonl")]) == 0
    table = capsys.readouterr().out
    assert "| reads back what the session changed | 1 | 0.0 / 0.0 / 0.0 |" in table


@needs_sandbox
async def test_beside_another_shell_the_terminal_worlds_is_the_one_compared(tmp_path):
    """swe serves a run_command too: both are served under prefixed names, and the session
    runs in the terminal world (its user dev; swe's machine is another)."""
    engine = FakeEngine("dev\n[exit code: 0]")
    domains = [load_domain("swe"), load_domain("terminal")]
    simulator = WorldSimulator(Catalogue(domains), engine, episodes=EpisodeStore())
    (answer,) = await run_session(simulator, ["whoami"], tmp_path / "out")
    assert answer.right and answer.real == "dev\n[exit code: 0]"
    (real,) = load_record_dir(tmp_path / "out" / "real")
    assert [(r.domain, r.tool) for r in real.records] == [("terminal", "terminal_run_command")]
    assert "hostname: devbox" in engine.requests[0].messages[0].content  # terminal's facts


@needs_sandbox
async def test_a_call_the_engine_failed_is_reported_as_failed_not_as_an_answer(tmp_path):
    engine = FakeEngine(fail_with="the model server is down")
    answers = await run_session(make_simulator(engine, "terminal"), ["whoami"], tmp_path / "o")
    assert [a.right for a in answers] == [False]
    assert answers[0].error is not None and "the model server is down" in answers[0].error
    report = render(answers)
    assert "  served: failed: " in report and "the model server is down" in report
    assert report.endswith("1 failed: fix the engine and run again into a new --output-dir")


def test_no_sandbox_is_a_clear_error_from_the_command_line(tmp_path, capsys, monkeypatch):
    def unavailable(self):
        raise SandboxUnavailable("'unshare' (util-linux / passwd) is not installed")

    monkeypatch.setattr(BashSandbox, "__enter__", unavailable)
    out = tmp_path / "o"
    args = ["eval", "everyday", "--output-dir", str(out), "--engine", "openai"]
    assert main([*args, "--base-url", "http://127.0.0.1:9/v1", "--quiet"]) == 2
    assert capsys.readouterr().err == (
        "aw-mcp eval everyday: 'unshare' (util-linux / passwd) is not installed\n"
    )
    assert not (out / "predictions.jsonl").exists()


async def test_a_server_without_run_command_is_refused_before_any_call(tmp_path):
    engine = FakeEngine("x")
    with pytest.raises(ValueError, match="no 'run_command' tool: serve the terminal world"):
        await run_session(make_simulator(engine, "os"), ["pwd"], tmp_path / "out")
    assert engine.requests == [] and not (tmp_path / "out").exists()


@needs_sandbox
async def test_the_first_look_session_asks_for_output_of_the_bundled_world(tmp_path):
    """The second built-in session is worth its name only while the bundled world gives its
    commands something to print: one command fails (no setup.py), one is silent (a clean
    diff), and every other one prints, so an answer of nothing is right once in 25."""
    engine = FakeEngine("[exit code: 0]")  # the print-nothing baseline
    answers = await run_session(
        make_simulator(engine, "terminal"), list(FIRST_LOOK_COMMANDS), tmp_path / "out"
    )
    assert len(answers) == 25
    failed = [a.command for a in answers if not a.real.endswith("[exit code: 0]")]
    assert failed == ["cat setup.py"]
    assert [a.command for a in answers if a.right] == ["git diff --stat"]
    by_command = {a.command: a.real for a in answers}
    assert by_command["wc -l main.py"] == "12 main.py\n[exit code: 0]"
    assert by_command["ls *.py"] == "hello.py\nmain.py\n[exit code: 0]"  # made by the session


@needs_sandbox
async def test_the_keeps_state_session_reads_back_what_it_did(tmp_path, capsys):
    """The third built-in session: every command succeeds but the read of the moved file,
    and most of its reads depend on what the session itself did."""
    engine = FakeEngine("[exit code: 0]")
    out = tmp_path / "out"
    answers = await run_session(make_simulator(engine, "terminal"), list(KEEPS_STATE_COMMANDS), out)
    assert len(answers) == 30
    failed = [a.command for a in answers if not a.real.endswith("[exit code: 0]")]
    assert failed == ["cat notes/todo.txt"]
    by_command = {a.command: a.real for a in answers}
    assert by_command["git log --format=%s"] == "Say tiny\nInitial commit\n[exit code: 0]"
    assert by_command["cat notes/tasks.txt"] == "buy milk\ncall bob\n[exit code: 0]"
    assert by_command["ls notes"] == "tasks.txt\n[exit code: 0]"
    rows = _rows(out)
    assert sum(bool(r.get("reads_back")) for r in rows) >= 15


def test_a_commands_file_skips_comments_and_blank_lines(tmp_path):
    listed = tmp_path / "commands.txt"
    listed.write_text("# a first session\npwd\n\n  # indented comment\necho '# not one'\n")
    assert read_commands(listed) == ["pwd", "echo '# not one'"]


@pytest.mark.parametrize("content", [None, "", "# only a comment\n\n"])
def test_a_missing_or_empty_commands_file_is_a_clear_error(tmp_path, capsys, content):
    listed = tmp_path / "commands.txt"
    if content is not None:
        listed.write_text(content)
    args = ["eval", "everyday", "--commands", str(listed), "--output-dir", str(tmp_path / "o")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("aw-mcp eval everyday: ") and str(listed) in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("action", ["everyday", "closed-loop"])
def test_a_limit_below_one_is_a_clear_error(tmp_path, capsys, action):
    out = tmp_path / "o"
    records = ["--records", str(tmp_path)] if action == "closed-loop" else []
    with pytest.raises(SystemExit) as exited:
        main(["eval", action, *records, "--limit", "0", "--output-dir", str(out)])
    assert exited.value.code == 2
    assert "argument --limit: must be at least 1, got 0" in capsys.readouterr().err
    assert not out.exists()


def test_a_session_and_a_commands_file_are_one_choice(tmp_path, capsys):
    listed = tmp_path / "commands.txt"
    listed.write_text("pwd\n")
    out = tmp_path / "o"
    with pytest.raises(SystemExit) as exited:
        main(["eval", "everyday", "--session", "first-look", "--commands", str(listed),
              "--output-dir", str(out)])  # fmt: skip
    assert exited.value.code == 2
    assert "argument --commands: not allowed with argument --session" in capsys.readouterr().err
    assert not out.exists()


@needs_sandbox
def test_a_built_in_session_by_name_through_the_command_line(tmp_path, capsys):
    out = tmp_path / "out"
    args = ["eval", "everyday", "--session", "first-look", "--limit", "2"]
    assert main([*args, "--output-dir", str(out), "--threads", "1", "--quiet"]) == 0
    assert " of 2 answered as real bash does (" in capsys.readouterr().out
    (real,) = load_record_dir(out / "real")
    assert [r.arguments["command"] for r in real.records] == ["ls -la", "cat README.md"]
    assert _rows(out)[0]["reference"].startswith("total ")  # ls -la's long listing


@needs_sandbox
def test_real_embedded_model_through_the_command_line(tmp_path, capsys):
    """The plumbing model (conftest's) in a --world that moves the user: the real answers
    come from a sandbox of that world, the served ones from the model."""
    listed = tmp_path / "commands.txt"
    listed.write_text("whoami\npwd\n")
    world = tmp_path / "world.yaml"
    world.write_text("facts:\n  user: ops\n  home: /home/ops\n  working_directory: /srv/app\n")
    out = tmp_path / "out"
    args = ["eval", "everyday", "--commands", str(listed), "--output-dir", str(out)]
    args += ["--world", str(world), "--threads", "1", "--n-ctx", "2048", "--quiet"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert " of 2 answered as real bash does (" in printed
    rows = _rows(out)
    assert [r["reference"] for r in rows] == ["ops\n[exit code: 0]", "/srv/app\n[exit code: 0]"]
    assert all(r["gen"].strip() and r["source"] == "model" for r in rows)
    assert "user: ops" in rows[0]["system_str"]  # the --world fact reached the prompt too


def _project(path):
    """A small git project: two commits, an ignored file, an untracked one."""
    import subprocess

    def git(*args):
        subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True)

    (path / "sub").mkdir(parents=True)
    (path / "a.txt").write_text("alpha\n")
    (path / "sub" / "b.txt").write_text("beta\n")
    (path / ".gitignore").write_text("secret.log\n")
    git("init", "-q", "-b", "main")
    git("-c", "user.name=T", "-c", "user.email=t@x", "add", "-A")
    git("-c", "user.name=T", "-c", "user.email=t@x", "commit", "-q", "-m", "first")
    (path / "a.txt").write_text("alpha\nmore\n")
    git("-c", "user.name=T", "-c", "user.email=t@x", "commit", "-qam", "second")
    (path / "secret.log").write_text("token\n")
    (path / "new.txt").write_text("untracked\n")


@needs_sandbox
def test_a_from_dir_worlds_real_side_runs_in_a_copy_of_its_directory(tmp_path):
    """--real-dir: the directory itself, not the facts' sketch of it (which would build a
    history file of its own and leave out every file listed by size only)."""
    from aw_mcp.domain.world_from_dir import FromDirOptions, world_from_dir
    from aw_mcp.evaluation.everyday import real_observations

    project = tmp_path / "shop"
    _project(project)
    world = world_from_dir(FromDirOptions(path=project)).world
    commands = ["pwd", "ls -A", "cat sub/b.txt a.txt", "git log --format=%s", "git status -s"]
    assert real_observations(world, commands, real_dir=project) == [
        "/home/dev/shop\n[exit code: 0]",
        ".git\n.gitignore\na.txt\nnew.txt\nsub\n[exit code: 0]",  # not the ignored secret.log
        "beta\nalpha\nmore\n[exit code: 0]",
        "second\nfirst\n[exit code: 0]",
        "?? new.txt\n[exit code: 0]",
    ]


def test_a_real_dir_that_is_not_a_directory_is_a_clear_error(tmp_path):
    from aw_mcp.errors import UserInputError
    from aw_mcp.generation.worlds import from_world

    with pytest.raises(UserInputError, match="is not a directory"):
        from_world(load_domain("terminal").world, source=tmp_path / "missing")


def test_a_project_copy_takes_what_git_does_not_ignore_and_the_repository_at_its_root(tmp_path):
    """copy_project (the real side of --real-dir) on the host, no sandbox: at a work tree's
    root the repository comes too; in a folder inside one, only its files git keeps; outside
    git, every file."""
    from aw_mcp.generation.sandbox import copy_project

    project = tmp_path / "shop"
    _project(project)
    (project / "sub" / "build.log").write_text("x\n")
    (project / ".gitignore").write_text("secret.log\n*.log\n")

    def copied(source):
        target = tmp_path / f"copy-{source.name}"
        copy_project(source, target)
        paths = (p.relative_to(target).parts for p in target.rglob("*"))
        return sorted("/".join(p) for p in paths if p[0] != ".git" or len(p) == 1)

    assert copied(project) == [".git", ".gitignore", "a.txt", "new.txt", "sub", "sub/b.txt"]
    assert copied(project / "sub") == ["b.txt"]  # build.log ignored, no .git here
    plain = tmp_path / "plain"
    (plain / "d").mkdir(parents=True)
    (plain / "d" / "x.log").write_text("y\n")
    assert copied(plain) == ["d", "d/x.log"]

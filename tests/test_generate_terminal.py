"""The terminal generator runs real bash in sandboxes that look like the Terminal world, and the
observations of later steps depend on what earlier steps did."""

from __future__ import annotations

import dataclasses
import random
import re
import shlex
import time
from pathlib import Path

import pytest
import yaml

from aw_mcp.cli import main
from aw_mcp.domain.loader import load_domain
from aw_mcp.generation.sandbox import BashSandbox, CommandTimeout, observation_text
from aw_mcp.generation.terminal import generate_terminal
from aw_mcp.generation.terminal_scripts import (
    ABSENT_PROGRAMS,
    AFTER_FAULT,
    EXPLORE,
    HELDOUT_FAMILIES,
    MAX_COMMANDS,
    MIN_COMMANDS,
    TEMPLATES,
    episode_script,
    template_of,
    templates_for,
    world_fault_script,
)
from aw_mcp.generation.world_faults import world_fault
from aw_mcp.generation.worlds import from_world
from aw_mcp.records.folder import episode_worlds
from aw_mcp.records.reader import load_record_dir
from aw_mcp.records.sink import RecordSink
from tests.helpers import needs_sandbox


def test_same_seed_same_commands_other_seed_other_commands():
    first = [episode_script("train", 5, n) for n in range(6)]
    again = [episode_script("train", 5, n) for n in range(6)]
    other = [episode_script("train", 6, n) for n in range(6)]
    assert [c for _, c in first] == [c for _, c in again]
    assert [c for _, c in first] != [c for _, c in other]
    assert all(5 <= len(c) <= 12 for _, c in first + other)


# A held-out family's program run as a command (first word, or after | ; & ( { $( &&).
HELDOUT_FAMILY_USE = re.compile(r"(^|[|;&({]|\$\(|&&)\s*(" + "|".join(HELDOUT_FAMILIES) + r")\b")


def test_the_heldout_split_is_its_templates_and_no_training_draw_uses_its_families():
    for template in [*templates_for("train"), EXPLORE]:
        for draw in range(40):
            for command in template.build(random.Random(f"{template.name}:{draw}")):
                assert not HELDOUT_FAMILY_USE.search(command), (template.name, command)
    held = {t.name for t in templates_for("heldout")}
    assert held == {"tr_text", "cut_fields", "find_tree", "git_merge", "heredoc_report"}
    assert held.isdisjoint(t.name for t in templates_for("train"))
    assert len(templates_for("train")) + len(held) == len(TEMPLATES)


def test_only_named_templates_are_drawn_in_turn_and_a_wrong_name_lists_the_choices():
    only = ["missing_paths", "explore_world"]
    names = [episode_script("train", 3, n, varied=True, only=only)[0].name for n in range(4)]
    assert names == only * 2
    # the same (split, seed, episode, only), the same commands
    assert episode_script("train", 3, 1, True, only) == episode_script("train", 3, 1, True, only)
    with pytest.raises(ValueError, match=r"no train template cut_fields .*missing_paths"):
        episode_script("train", 3, 0, varied=True, only=["cut_fields"])
    with pytest.raises(ValueError, match="no train template explore_world"):  # varied only
        episode_script("train", 3, 0, varied=False, only=["explore_world"])


def test_templates_and_a_world_fault_are_refused_together(tmp_path: Path):
    out = tmp_path / "out"
    with pytest.raises(ValueError, match="world-fault"):
        generate_terminal(out, 1, 1, world_fault_name="sandbox-read-only", templates=["errors"])
    with pytest.raises(ValueError, match="no train template nope"):
        generate_terminal(out, 1, 1, templates=["nope"])
    assert not out.exists()  # both refused before the output folder was made


@needs_sandbox
def test_missing_paths_episodes_record_each_tools_own_exit_status(tmp_path: Path):
    generate_terminal(tmp_path, seed=2, episodes=4, worlds="varied", templates=["missing_paths"])
    codes: dict[str, set[int]] = {}
    for episode in load_record_dir(tmp_path):
        for record in episode.records:
            code = int(re.findall(r"\[exit code: (\d+)\]$", record.observation)[0])
            codes.setdefault(shlex.split(record.arguments["command"])[0], set()).add(code)
    failing = {tool: c for tool, c in codes.items() if c - {0}}
    # not one status for every missing path: several tools, several statuses
    assert len(failing) >= 4 and len(set().union(*failing.values()) - {0}) >= 2, failing


def test_missing_programs_are_drawn_by_name_only_each_split_from_its_own_names():
    train = {c.split()[0] for c in ABSENT_PROGRAMS["train"]}
    held = {c.split()[0] for c in ABSENT_PROGRAMS["heldout"]}
    assert train.isdisjoint(held)
    # Not in the round-robin: the committed folders' commands regenerate as they were.
    assert {"missing_programs", "missing_programs_heldout"}.isdisjoint(t.name for t in TEMPLATES)
    for split, name, names in (
        ("train", "missing_programs", train),
        ("heldout", "missing_programs_heldout", held),
    ):
        for n in range(8):
            template, commands = episode_script(split, 4, n, varied=True, only=[name])
            assert template.split == split and MIN_COMMANDS <= len(commands) <= MAX_COMMANDS
            reached = {w for c in commands for w in re.findall(r"[\w.-]+", c)} & (train | held)
            assert reached and reached <= names, (split, commands)
    with pytest.raises(ValueError, match="no train template missing_programs_heldout"):
        episode_script("train", 4, 0, varied=True, only=["missing_programs_heldout"])


@needs_sandbox
def test_missing_programs_episodes_record_command_not_found(tmp_path: Path):
    generate_terminal(tmp_path, seed=3, episodes=2, worlds="varied", templates=["missing_programs"])
    absent = {c.split()[0] for c in ABSENT_PROGRAMS["train"]}
    seen = alone = 0
    for episode in load_record_dir(tmp_path):
        for record in episode.records:
            command = record.arguments["command"]
            program = command.split()[0]
            if program in absent:  # run alone, in a pipe, with || or ; echo $?
                seen += 1
                assert f"bash: {program}: command not found" in record.observation, record
                if command in ABSENT_PROGRAMS["train"]:  # as drawn: bash's own status
                    alone += 1
                    assert record.observation.endswith("[exit code: 127]"), record
    assert seen >= 6 and alone >= 2


def test_observation_ends_with_the_exit_code_line():
    assert observation_text("", 0) == "[exit code: 0]"
    assert observation_text("a\nb\n", 1) == "a\nb\n[exit code: 1]"
    assert observation_text("abc", 0) == "abc\n[exit code: 0]"  # printf without newline
    assert observation_text("\n", 0) == "\n[exit code: 0]"  # one empty line is kept


@needs_sandbox
def test_sandbox_is_the_terminal_worlds_machine_and_starts_empty_each_time():
    with BashSandbox() as shell:
        assert shell.run("whoami; pwd; hostname; echo $HOME") == (
            "dev\n/home/dev/project\ndevbox\n/home/dev\n",
            0,
        )
        assert shell.run("echo kept > a.txt; ls -A") == ("a.txt\n", 0)
        assert shell.run("nosuchcommand") == ("bash: nosuchcommand: command not found\n", 127)
        # stderr and stdout interleave in the order printed; the state persists
        assert shell.run("cat a.txt missing.txt; echo done") == (
            "kept\ncat: missing.txt: No such file or directory\ndone\n",
            0,
        )
    with BashSandbox() as shell:
        assert shell.run("ls -A") == ("", 0)  # nothing of the last sandbox survived
        assert shell.run("ls -A ~") == (".gitconfig\nproject\n", 0)


@needs_sandbox
def test_a_world_with_a_date_dates_its_files_and_commits_so_every_run_prints_the_same():
    """The bundled world says its date (2026-11-30 09:00 UTC): its files, home and every
    commit, the session's own included, are dated then, so `ls -la` and `git log` print the
    same on every run (a reference an eval can hold a model to)."""
    world = from_world(load_domain("terminal").world)
    assert world.date == "2026-11-30 09:00 UTC"
    commands = [
        "ls -la",
        "ls -la ~/.gitconfig",
        "echo x > n.txt && git add n.txt && git commit -qm n",
        "git log --format='%h %ad %s' --date=iso",
    ]
    runs = []
    for _ in range(2):
        with BashSandbox(world=world) as shell:
            runs.append([shell.run(command)[0] for command in commands])
    assert runs[0] == runs[1]
    listing, gitconfig, _, log = runs[0]
    lines = listing.splitlines()[1:]  # after "total N"
    assert len(lines) >= 5 and all(" Nov 30 09:00 " in line for line in lines), listing
    assert " Nov 30 09:00 " in gitconfig
    assert "2026-11-30 09:00:00 +0000 Initial commit" in log
    assert "2026-11-30 09:00:00 +0000 n" in log
    # a world without a date keeps the real clock
    undated = BashSandbox(world=dataclasses.replace(world, date=None))
    with undated as shell:
        assert "Nov 30 09:00" not in shell.run("ls -la")[0]


@needs_sandbox
def test_a_command_past_its_timeout_stops_the_sandbox():
    with BashSandbox(command_timeout=0.5) as shell, pytest.raises(CommandTimeout):
        shell.run("sleep 5")


@needs_sandbox
def test_generated_episodes_read_back_what_earlier_steps_wrote(tmp_path: Path):
    first = tmp_path / "first"
    paths = generate_terminal(first, seed=7, episodes=3)
    assert len(paths) == 3 and all(p.exists() for p in paths)
    episodes = {e.episode: e for e in load_record_dir(first)}
    assert len(episodes) == 3
    for episode in episodes.values():
        assert [r.index for r in episode.records] == list(range(1, len(episode.records) + 1))
        for record in episode.records:
            assert (record.domain, record.tool, record.source) == (
                "terminal",
                "run_command",
                "real",
            )
            assert re.search(r"(^|\n)\[exit code: \d+\]$", record.observation)
            assert not record.is_error

    # Episode 0 is files_basic: step 2 writes a file, step 5 copies it, step 8 cats the copy.
    files = episodes["terminal-train-s7-0000"].records
    written = shlex.split(files[1].arguments["command"])[1]
    assert files[7].arguments["command"].startswith("cat ")
    assert files[7].observation == f"{written}\n[exit code: 0]"

    # Episode 1 is write_and_read: step 1 writes lines, step 2 appends one, step 3 cats them all.
    texts = episodes["terminal-train-s7-0001"].records
    lines = shlex.split(texts[0].arguments["command"])[2:-2]
    appended = shlex.split(texts[1].arguments["command"])[1]
    assert texts[2].observation == "\n".join([*lines, appended]) + "\n[exit code: 0]"
    name = shlex.split(texts[2].arguments["command"])[1]
    assert texts[3].observation == f"{len(lines) + 1} {name}\n[exit code: 0]"  # wc -l

    # The same seed gives the same commands again.
    again = tmp_path / "again"
    generate_terminal(again, seed=7, episodes=3)
    commands = lambda d: [  # noqa: E731
        [r.arguments["command"] for r in e.records] for e in load_record_dir(d)
    ]
    assert commands(again) == commands(first)

    world = yaml.safe_load((first / "world.yaml").read_text())
    assert world["facts"]["user"].startswith("dev (uid=")
    assert world["facts"]["working_directory"] == "/home/dev/project"
    assert "EMPTY" in world["facts"]["files"] and "NOT a git repository" in world["facts"]["git"]
    first = min(r.started_at for e in episodes.values() for r in e.records)
    assert world["facts"]["date"].startswith(
        time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(first))
    )


@needs_sandbox
def test_generate_command_writes_the_dataset(tmp_path: Path, capsys):
    out = tmp_path / "heldout"
    assert (
        main(
            [
                "generate",
                "terminal",
                "--out",
                str(out),
                "--seed",
                "1",
                "--episodes",
                "2",
                "--split",
                "heldout",
            ]
        )
        == 0
    )
    sink = RecordSink(out)
    episodes = ["terminal-heldout-s1-0000", "terminal-heldout-s1-0001"]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [*(sink.path_for(e).name for e in episodes), "world.yaml"]
    )
    assert "wrote 2 episodes" in capsys.readouterr().out


@needs_sandbox
def test_generate_counts_episodes_on_a_progress_bar_unless_quiet(tmp_path: Path, capsys):
    assert main(["generate", "terminal", "--out", str(tmp_path / "a"), "--episodes", "2"]) == 0
    shown = capsys.readouterr()
    assert "terminal: 100%" in shown.err and "2/2" in shown.err
    assert "wrote 2 episodes" in shown.out
    quiet = ["generate", "terminal", "--out", str(tmp_path / "b"), "--episodes", "2", "--quiet"]
    assert main(quiet) == 0
    assert "2/2" not in capsys.readouterr().err


@needs_sandbox
@pytest.mark.parametrize("tail", ["list", "template"])
@pytest.mark.parametrize(
    ("scenario", "message"),
    [("sandbox-disk-full", "No space left on device"), ("sandbox-read-only", "Permission denied")],
)
def test_world_fault_episodes_run_under_the_real_condition_and_carry_its_text(
    tmp_path: Path, scenario: str, message: str, tail: str
):
    fault = world_fault(scenario)
    assert fault.at == 4 and message in fault.condition  # the scenario file's rule and text
    args = ["generate", "terminal", "--out", str(tmp_path), "--seed", "3", "--episodes", "2"]
    assert main([*args, "--world-fault", scenario, "--fault-tail", tail, "--quiet"]) == 0
    episodes = load_record_dir(tmp_path)
    assert len(episodes) == 2
    for episode in episodes:
        before = [r for r in episode.records if r.index < fault.at]
        after = [r for r in episode.records if r.index >= fault.at]
        assert before and after
        assert all(r.conditions == [] for r in before)
        assert all(r.conditions == [fault.condition] for r in after)
        assert not any(message in r.observation for r in before)
    # Writes after the condition fail for real (each episode has 4-6 commands after it,
    # drawn from a list that is mostly writes, or its template's next ones and 2-3 of them).
    shown = [r for e in episodes for r in e.records if message in r.observation]
    assert shown and all(r.index >= fault.at for r in shown)
    assert "aw-sandbox" not in Path("/proc/self/mounts").read_text()  # the tmpfs is gone


def test_a_template_tail_runs_the_templates_own_commands_under_the_condition():
    """--fault-tail template: the episode's template goes on under the condition (its own
    next commands, as its earlier ones set them up), then 2-3 commands of the fixed list."""
    at = 4
    tails = []
    for episode in range(len(templates_for("train"))):
        template, commands = world_fault_script("train", 9, episode, at, "template")
        assert template == template_of("train", episode)
        built = template.build(random.Random(f"terminal-world-fault-template:train:9:{episode}"))
        own = built[:MAX_COMMANDS][: at + 5]
        assert commands[: len(own)] == own  # before the condition and under it: the template's
        tail = commands[len(own) :]
        assert 2 <= len(tail) <= 3 and set(tail) <= set(AFTER_FAULT["train"])
        tails.append(len(own) - (at - 1))
    assert min(tails) >= 3  # every template has commands of its own left for the condition
    # The same arguments, the same episode; another seed, another one.
    assert world_fault_script("train", 9, 0, at, "template") == world_fault_script(
        "train", 9, 0, at, "template"
    )
    assert world_fault_script("train", 9, 0, at, "template") != world_fault_script(
        "train", 10, 0, at, "template"
    )


def test_the_lists_after_a_fault_are_disjoint_and_training_writes_every_kind():
    """The held-out list is its own (no training command in it), and the training list writes
    in every way the training templates do, not one or two."""
    train, heldout = AFTER_FAULT["train"], AFTER_FAULT["heldout"]
    assert set(train).isdisjoint(heldout) and len(set(train)) == len(train)
    for write in (">>", "<<'EOF'", "tee ", "sed -i", "ln -s", "touch ", "for ", "tar c", "rm "):
        assert any(write in command for command in train), write


def test_world_fault_needs_a_condition_the_sandbox_can_make_real():
    with pytest.raises(ValueError, match="sandbox-disk-full"):
        world_fault("disk-full")  # a bundled scenario, but nothing here makes it real


@pytest.mark.data
def test_disk_full_condition_text_states_the_sandbox_disk_that_the_recordings_show():
    # The size is written twice, in code (the tmpfs the sandbox mounts) and in the scenario's
    # condition text (what the model is told); the committed recordings' df lines are what
    # real df printed for that disk. All three must agree.
    fault = world_fault("sandbox-disk-full")
    assert fault.real.disk_bytes is not None
    size = f"{fault.real.disk_bytes / 2**20:.1f}M"  # as df -h prints a size in MiB
    assert f"tmpfs, {size}" in fault.condition
    records = Path(__file__).resolve().parents[1] / "data/terminal/world-faults/train"
    df_lines = [
        line
        for episode in load_record_dir(records)
        if "disk-full" in episode.episode
        for r in episode.records
        if r.arguments.get("command", "").startswith("df ")
        for line in r.observation.splitlines()
        if line.startswith("tmpfs")
    ]
    assert df_lines and all(line.split()[1] == size for line in df_lines)  # the Size column


@needs_sandbox
def test_a_varied_world_is_built_as_its_facts_say_and_its_episode_is_served_them(tmp_path):
    """Every varied-world episode's machine is the one its world file describes (user, host,
    working directory, files and contents, git history), and that file is what training and
    the closed loop give the model for it."""
    paths = generate_terminal(tmp_path, seed=4, episodes=12, worlds="varied")
    worlds = episode_worlds(tmp_path)
    assert len(paths) == len(worlds) == 12 and not (tmp_path / "world.yaml").exists()
    drawn = [w for w in worlds.values() if "user" in w.facts]
    assert len({w.facts["user"] for w in drawn}) >= 2  # worlds vary
    for world in drawn:
        built = from_world(world)
        with BashSandbox(world=built) as shell:
            facts = world.facts
            who = f"{facts['user']}\n{facts['working_directory']}\n{facts['hostname']}\n"
            assert shell.run("whoami; pwd; hostname") == (who, 0)
            for name, content in built.files.items():
                assert shell.run(f"cat {name}") == (content, 0)
            log, code = shell.run("git log --format=%s")
            if built.git_commits:
                assert log.splitlines() == list(reversed(built.git_commits))
            else:
                assert code == 128 and "not a git repository" in log


@needs_sandbox
def test_the_bundled_terminal_world_is_a_machine_the_sandbox_builds():
    world = from_world(load_domain("terminal").world)
    with BashSandbox(world=world) as shell:
        assert shell.run("whoami; pwd; hostname") == ("dev\n/home/dev/project\ndevbox\n", 0)
        assert shell.run("ls") == ("README.md\nmain.py\nrequirements.txt\ntests\n", 0)
        assert shell.run("git status --short; git log --format=%s") == ("Initial commit\n", 0)
        facts = load_domain("terminal").world.facts
        versions, _ = shell.run("python3 --version; git --version")
        python, git = (line.split()[-1] for line in versions.splitlines())
        assert f"python3 {python}" in facts["installed"] and f"git {git}" in facts["installed"]

"""Generate real Terminal-world trajectories: scripted episodes run in real bash sandboxes.

Every episode gets a fresh :class:`BashSandbox`; each command's output becomes one
``run_command`` call record (source ``"real"``), one JSONL file per episode, the format of
``aw-mcp serve --record-dir``. The commands depend only on (split, seed, episode number);
the observations are what the real tools printed, volatile values (times, hashes) included.

A failed command is a successful tool call: its exit code is in the observation and
``is_error`` stays false, as a real ``run_command`` tool answers and as the Terminal world's
model-answered calls are recorded. ``is_error`` is kept for tool-level failures.

Next to the episodes, ``world.yaml`` states what the world model must be told for the
observations to be predictable (user, home, host, versions), measured in a sandbox.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from aw_mcp.domain.loader import load_domain
from aw_mcp.domain.models import WorldSpec
from aw_mcp.errors import UserInputError
from aw_mcp.generation.sandbox import (
    ENVIRONMENT,
    GIT_EMAIL,
    GIT_NAME,
    HOME,
    HOSTNAME,
    LEGACY_WORLD,
    PROJECT,
    USER,
    BashSandbox,
    observation_text,
)
from aw_mcp.generation.state_sessions import state_session
from aw_mcp.generation.terminal_scripts import (
    FaultTail,
    Split,
    episode_script,
    named_templates,
    world_fault_script,
)
from aw_mcp.generation.world_faults import WorldFault, world_fault
from aw_mcp.generation.worlds import SandboxWorld, draw_world, from_world, world_spec
from aw_mcp.progress_bar import counted
from aw_mcp.records.calls import CallRecord
from aw_mcp.records.folder import recorded_date_fact, write_episode_world, write_world_file
from aw_mcp.records.sink import RecordSink

log = logging.getLogger(__name__)

DOMAIN = "terminal"
TOOL = "run_command"

# Probes for the world file; each runs in a fresh sandbox, as an episode would.
_FACT_PROBES = {
    "id": "id",
    "os": '. /etc/os-release && echo "$PRETTY_NAME (Linux $(uname -r) $(uname -m))"',
    "bash": 'echo "${BASH_VERSION}"',
    "python3": "python3 --version",
    "git": "git --version",
    "coreutils": "ls --version | head -n 1",
    "sudo": "command -v sudo || echo none",
    "home": "ls -A ~",
    "project": "ls -A",
}


Script = Literal["templates", "state"]


def episode_id(
    split: Split,
    seed: int,
    number: int,
    fault: WorldFault | None = None,
    script: Script = "templates",
) -> str:
    kind = f"{split}-{fault.name}" if fault else split
    if script == "state":
        kind += "-state"
    return f"terminal-{kind}-s{seed}-{number:04d}"


def run_episode(
    split: Split,
    seed: int,
    number: int,
    sink: RecordSink,
    command_timeout: float = 10.0,
    fault: WorldFault | None = None,
    world: SandboxWorld = LEGACY_WORLD,
    templates: Sequence[str] = (),
    fault_tail: FaultTail = "list",
    trace_state: bool = True,
    script: Script = "templates",
) -> CallRecord | None:
    """Run one scripted episode in a fresh sandbox and write its records; returns the last.
    With ``fault``, the condition is made true before call ``fault.at`` and every call from
    then on carries its text, as the fault layer would write it into the prompt. ``world``:
    the machine the sandbox is built as; ``templates``: draw only these script templates;
    ``fault_tail``: what runs under the condition (``world_fault_script``); ``trace_state``:
    record what each command read and changed (``state_trace``); ``script``: a template's
    commands, or a long session that exercises state (``state_sessions``)."""
    if fault:
        template, commands = world_fault_script(split, seed, number, fault.at, fault_tail)
        kind = template.name
    elif script == "state":
        rng = random.Random(f"terminal-state:{split}:{seed}:{number}")
        commands, kind = state_session(split, rng, world), "state session"
    else:
        varied = world is not LEGACY_WORLD
        template, commands = episode_script(split, seed, number, varied, templates)
        kind = template.name
    eid = episode_id(split, seed, number, fault, script)
    last = None
    disk = fault.real.disk_bytes if fault else None
    with BashSandbox(
        command_timeout=command_timeout, disk_bytes=disk, world=world, trace_state=trace_state
    ) as shell:
        for index, command in enumerate(commands, start=1):
            if fault and index == fault.at:
                fault.real.impose(shell)
            started = time.time()
            step = None
            if trace_state:
                output, code, step = shell.run_traced(command)
            else:
                output, code = shell.run(command)
            last = CallRecord(
                index=index,
                episode=eid,
                domain=DOMAIN,
                tool=TOOL,
                arguments={"command": command},
                observation=observation_text(output, code),
                is_error=False,
                source="real",
                conditions=[fault.condition] if fault and index >= fault.at else [],
                started_at=started,
                seconds=round(time.time() - started, 4),
                state=step,
            )
            sink.write(last)
    log.info("%s: %s, %d commands", eid, kind, len(commands))
    return last


def probe_sandbox() -> dict[str, str]:
    """What the probes print in a fresh sandbox (the same machine for every world)."""
    seen: dict[str, str] = {}
    with BashSandbox() as shell:
        for key, probe in _FACT_PROBES.items():
            output, code = shell.run(probe)
            if code != 0:
                raise RuntimeError(f"world probe {probe!r} failed ({code}): {output}")
            seen[key] = output.strip()
    return seen


def machine_facts(seen: dict[str, str]) -> dict[str, str]:
    """The facts every world of this machine shares: OS, shell, tools, environment."""
    python = seen["python3"].removeprefix("Python ")
    git = seen["git"].removeprefix("git version ")
    coreutils = seen["coreutils"].rsplit(" ", 1)[-1]
    env = " ".join(f"{k}={v}" for k, v in ENVIRONMENT.items() if k in ("LANG", "TZ", "PATH"))
    return {
        "os": seen["os"],
        "shell": f"/bin/bash (GNU bash {seen['bash']})",
        "installed": f"python3 {python}, git {git}, GNU coreutils {coreutils}, "
        "grep, sed, awk, find, bc",
        "environment": f"{env}, umask 022; no aliases, no .bashrc",
    }


def machine_notes(user: str, sudo: str) -> list[str]:
    """Notes true of every world of this machine."""
    return [
        f"The user {user} is not root"
        + (" and has no sudo." if sudo == "none" else f"; sudo is {sudo}."),
        "Commands run without a terminal: ls prints one name per line, no colours.",
        "bash is interactive: its own errors read 'bash: <name>: command not found', "
        "'bash: cd: <dir>: No such file or directory'.",
    ]


def drawn_world_spec(world: SandboxWorld, seen: dict[str, str], date: str) -> WorldSpec:
    """The facts one episode of ``world`` is served and trained with (measured ones true)."""
    home = (
        f"{world.home} holds .gitconfig"
        + ("" if world.working_directory == world.home else " and the working directory")
        if world.working_directory.startswith(world.home)
        else f"{world.home} holds only .gitconfig"
    )
    measured = {**machine_facts(seen), "home_contents": home, "date": date}
    return world_spec(world, measured, machine_notes(world.user, seen["sudo"]))


def measure_world() -> dict[str, Any]:
    """The world facts of the sandbox, measured in it (the ``aw-mcp serve --world`` shape)."""
    seen = probe_sandbox()
    machine = machine_facts(seen)
    return {
        "facts": {
            "hostname": HOSTNAME,
            "user": f"{USER} ({seen['id']})",
            "home": HOME,
            "working_directory": PROJECT,
            **{k: v for k, v in machine.items() if k != "environment"},
            # The keys the bundled world states them with (its files and history do not hold).
            "files": f"none: {PROJECT} starts EMPTY; everything in it was created by earlier "
            "commands of this episode",
            "git": f"{PROJECT} is NOT a git repository until the episode runs git init; new "
            f"repositories start on branch main (git user {GIT_NAME} <{GIT_EMAIL}>)",
            "home_contents": f"{HOME} holds only project/ and .gitconfig (user.name "
            f"{GIT_NAME}, user.email {GIT_EMAIL}, init.defaultBranch main)",
            "environment": machine["environment"],
        },
        # The bundled Terminal world's notes do not hold here.
        "replace_notes": True,
        "notes": machine_notes(USER, seen["sudo"]),
    }


def write_world(directory: Path) -> dict[str, Any]:
    """Measure the sandbox and write ``directory/world.yaml`` for the episodes in it."""
    world = measure_world()
    world["facts"]["date"] = recorded_date_fact(directory)
    write_world_file(
        directory / "world.yaml",
        world,
        "generated Terminal episodes, measured in the sandbox that ran them",
        DOMAIN,
    )
    return world


WorldMode = Literal["fixed", "varied"]
BUNDLED_SHARE = 0.25  # varied worlds: episodes in the bundled Terminal world's own machine


def episode_world(split: Split, seed: int, number: int) -> SandboxWorld:
    """The machine of one varied-world episode: the bundled world's, or a drawn one."""
    rng = random.Random(f"terminal-world:{split}:{seed}:{number}")
    if rng.random() < BUNDLED_SHARE:
        return from_world(load_domain(DOMAIN).world)
    return draw_world(split, rng)


def episode_world_spec(world: SandboxWorld, seen: dict[str, str], date: str) -> WorldSpec:
    """What is layered on the Terminal domain's world for an episode of ``world``: for the
    bundled world only the real date (its other facts are the domain's own)."""
    if world.kind == "bundled":
        return WorldSpec(facts={"date": date})
    return drawn_world_spec(world, seen, date)


def generate_terminal(
    out: Path,
    seed: int,
    episodes: int,
    split: Split = "train",
    command_timeout: float = 10.0,
    quiet: bool = True,
    world_fault_name: str | None = None,
    worlds: WorldMode = "fixed",
    templates: Sequence[str] = (),
    fault_tail: FaultTail = "list",
    trace_state: bool = True,
    script: Script = "templates",
) -> list[Path]:
    """Write ``episodes`` episode files and ``world.yaml`` into ``out``; returns the files.
    Without ``quiet``, a progress bar counts the episodes on stderr. ``world_fault_name``:
    a world-fault scenario the sandbox makes real (``world_faults.REAL_CONDITIONS``).
    ``worlds="varied"``: every episode runs in a world of its own (``worlds.py``), written to
    ``out/worlds/<episode>.yaml``. ``templates``: only these script templates, in turn (not
    with a world fault, whose episodes have their own script). ``fault_tail``: with a world
    fault, what runs under it (``world_fault_script``). ``trace_state``: each record holds
    what its command read and changed (``CallRecord.state``; needs strace). ``script``:
    ``state`` for long sessions that make, move, edit, commit and read back
    (``state_sessions``) instead of the templates."""
    if templates and world_fault_name:
        raise UserInputError("--templates does not apply to world-fault episodes")
    if script == "state" and (templates or world_fault_name):
        raise UserInputError("--script state takes neither --templates nor --world-fault")
    if templates:  # a wrong name fails here, before any sandbox starts
        named_templates(split, worlds == "varied", templates)
    fault = world_fault(world_fault_name) if world_fault_name else None
    sink = RecordSink(out)
    seen = probe_sandbox() if worlds == "varied" else {}
    paths = []
    for number in counted(range(episodes), "terminal", "episode", quiet):
        eid = episode_id(split, seed, number, fault, script)
        path = sink.path_for(eid)
        path.unlink(missing_ok=True)  # the sink appends: a rerun must not double an episode
        world = episode_world(split, seed, number) if worlds == "varied" else LEGACY_WORLD
        run_episode(
            split,
            seed,
            number,
            sink,
            command_timeout,
            fault,
            world,
            templates,
            fault_tail,
            trace_state,
            script,
        )
        if worlds == "varied":
            date = f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
            write_episode_world(out, eid, episode_world_spec(world, seen, date))
        paths.append(path)
    if worlds == "fixed":  # varied: each episode's world is in out/worlds/
        write_world(out)
    return paths

"""What a new user gets from plain `aw-mcp serve` (no flags): the default world model
(Qwen2.5-Coder-0.5B with its bundled adapter) answers everyday commands as the bundled Terminal
world implies, and follows a --world file that moves the user and the working directory.

The truth is not written here: the same commands run in a real bash sandbox built from the
bundled world's facts (the machine `aw-mcp generate terminal --worlds varied` builds), and the
served answers are compared with what that sandbox printed. Needs root and unshare for the
sandbox (as the generator tests do); the model runs on the CPU, one thread.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from aw_mcp.domain.loader import load_domain, load_world
from aw_mcp.evaluation.everyday import Answer, real_observations, render
from aw_mcp.evaluation.sessions import EVERYDAY_COMMANDS, FIRST_LOOK_COMMANDS
from tests.helpers import default_server, needs_sandbox, text_of

pytestmark = [pytest.mark.quality, pytest.mark.anyio]

# Share of EVERYDAY_COMMANDS (`aw-mcp eval everyday`'s session) the default must answer
# exactly as the real machine does.
MEASURED_FLOOR = 16 / 20
# The same for FIRST_LOOK_COMMANDS (`--session first-look`), never trained or tuned on: a
# guard that a new default does not trade what it was not chosen for, not a goal.
FIRST_LOOK_FLOOR = 12 / 25


def real_answers(commands: list[str], world_file: Path | None = None) -> list[str]:
    """What bash prints for ``commands`` on the machine the served world describes."""
    world = load_domain("terminal").world
    if world_file is not None:
        world = world.merged(load_world(world_file))
    return real_observations(world, commands)


async def served_answers(params: StdioServerParameters, commands: list[str]) -> list[str]:
    async with Client(params) as client:
        return [text_of(await client.call_tool("run_command", {"command": c})) for c in commands]


# Measured with the bundled adapter s7 on everyday: 17 of 20 with drafts from the context
# (--speculative on, the default since 2026-12-06; 18 one position a step, as s6: 18, s5: 18,
# q5: 17, q4: 14, q3: 13, q1: 14; the default before Qwen, SmolLM2 + r18: 3), the goal of
# issue 18; on first-look 13 of 25 either way (plain base 7, SmolLM2 + r18 5). Each floor is
# one answer below, so a default that regresses fails while a build whose arithmetic moves one
# greedy choice does not.
@needs_sandbox
@pytest.mark.parametrize(
    ("commands", "floor"),
    [(EVERYDAY_COMMANDS, MEASURED_FLOOR), (FIRST_LOOK_COMMANDS, FIRST_LOOK_FLOOR)],
    ids=["everyday", "first-look"],
)
async def test_plain_serve_answers_a_session_as_its_bundled_world_implies(commands, floor):
    real = real_answers(list(commands))
    served = await served_answers(default_server(), list(commands))
    answers = [Answer(*a) for a in zip(commands, served, real, strict=True)]
    assert sum(a.right for a in answers) >= floor * len(commands), render(answers)


@needs_sandbox
async def test_a_world_file_that_moves_user_and_directory_is_followed(tmp_path):
    world_file = tmp_path / "world.yaml"
    world_file.write_text(
        "facts:\n  user: ops\n  home: /home/ops\n  working_directory: /srv/app\n"
        "  git: /srv/app is not a git repository\n"
        "  files: 'none: /srv/app starts empty'\n"
    )
    commands = ["whoami", "pwd", "echo $HOME"]
    real = real_answers(commands, world_file)
    assert real[:2] == ["ops\n[exit code: 0]", "/srv/app\n[exit code: 0]"]  # the sandbox obeys
    served = await served_answers(default_server("--world", str(world_file)), commands)
    assert [s.strip() for s in served[:2]] == [r.strip() for r in real[:2]], served

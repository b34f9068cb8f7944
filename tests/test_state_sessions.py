"""Long state sessions for the terminal generator: well-formed commands that keep coming back
to what they made, and the held-out families kept out of training."""

from __future__ import annotations

import posixpath
import random
import shlex

import pytest

from aw_mcp.generation.state_sessions import MAX_LENGTH, MIN_LENGTH, state_session
from aw_mcp.generation.worlds import draw_world

SEEDS = range(60)


def _sessions(split):
    for seed in SEEDS:
        world = draw_world(split, random.Random(f"w{seed}"))
        yield world, state_session(split, random.Random(seed), world)


@pytest.mark.parametrize("split", ["train", "heldout"])
def test_every_command_is_one_well_formed_shell_line(split):
    for _, commands in _sessions(split):
        assert MIN_LENGTH <= len(commands) <= MAX_LENGTH
        for command in commands:
            shlex.split(command, comments=False)  # balanced quotes: no command hangs open


def test_sessions_never_climb_to_where_a_find_would_walk_the_machine():
    for world, commands in _sessions("heldout"):
        cwd = world.working_directory
        for command in commands:
            words = shlex.split(command)
            if words[:1] == ["cd"] and len(words) == 2 and " " not in command.strip():
                cwd = posixpath.normpath(posixpath.join(cwd, words[1]))
            assert cwd not in ("/", "/home", "/srv"), (world.working_directory, commands)


def test_training_sessions_never_use_the_held_out_families():
    words = {w for _, commands in _sessions("train") for c in commands for w in c.split()}
    assert not words & {"tr", "cut", "find"}
    held = {w for _, commands in _sessions("heldout") for c in commands for w in c.split()}
    assert held & {"tr", "cut", "find"}


def test_sessions_read_back_what_they_made():
    """A file a session writes is read later (by name, after the write)."""
    came_back = 0
    for _, commands in _sessions("train"):
        for i, command in enumerate(commands):
            if " > " in command and "<<" not in command:
                name = command.rsplit(" > ", 1)[1].strip()
                came_back += any(name in later for later in commands[i + 1 :])
    assert came_back > 40


def test_the_same_seed_gives_the_same_session():
    world = draw_world("train", random.Random(1))
    first = state_session("train", random.Random(7), world)
    assert first == state_session("train", random.Random(7), world)
    assert first != state_session("train", random.Random(8), world)

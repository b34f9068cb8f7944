"""Prompt profiles: the default layout and Qwen-AgentWorld's trained conversation shape."""

from __future__ import annotations

import json

import anyio
import pytest
from mcp import Client

from aw_mcp.domain.loader import load_domain
from aw_mcp.domain.models import ToolCall
from aw_mcp.engines.reasoning import only_thinking, strip_reasoning
from aw_mcp.episode.prompt import (
    AgentWorldProfile,
    PromptProfile,
    SmallModelProfile,
    build_messages,
)
from aw_mcp.records.calls import Turn
from aw_mcp.server.app import build_server
from aw_mcp.testing import RecordingEngine
from aw_mcp.wiring.assemble import build_simulator
from aw_mcp.wiring.settings import ServeSettings
from tests.conftest import small_engine
from tests.engine_support import TEST_THREADS, write_tiny_domain

LS = ToolCall(tool="run_command", arguments={"command": "ls -la"})


def _turn(index: int, command: str, observation: str, conditions=()) -> Turn:
    return Turn(
        index=index,
        action=ToolCall(tool="run_command", arguments={"command": command}),
        observation=observation,
        conditions=list(conditions),
    )


def _messages(profile, turns, current=LS, conditions=()):
    domain = load_domain("terminal")
    return build_messages(
        profile,
        domain,
        domain.tools[:2],
        domain.world,
        turns,
        0,
        current,
        len(turns) + 1,
        list(conditions),
    )


def test_agentworld_turn_shape():
    profile = AgentWorldProfile()
    text = profile.action_message(3, LS, [])
    assert text == (
        '### Turn 3\n**Action:**\n```json\n{"name": "run_command", '
        '"arguments": {"command": "ls -la"}}\n```'
    )
    call = text.split("```json\n")[1].split("\n```")[0]
    assert json.loads(call) == {"name": "run_command", "arguments": {"command": "ls -la"}}
    assert profile.observation_message("total 0") == "**Environment Observation:**\ntotal 0"
    with_conditions = profile.action_message(4, LS, ["the disk is full"])
    assert with_conditions.endswith("**World conditions in effect:** the disk is full")


def test_agentworld_system_prompt_follows_the_models_contract():
    system = _messages(AgentWorldProfile(), [])[0].content
    assert system.startswith("# Role and Objective\n\n")
    assert "# Output Requirements" in system
    assert "<predicted_observation></predicted_observation>" in system
    assert "devbox" in system  # world facts still there
    default = _messages(PromptProfile(), [])[0].content
    assert "<predicted_observation>" not in default
    assert "# How to answer" in default


def test_agentworld_history_alternates_and_grows_by_appending():
    profile = AgentWorldProfile()
    turns = [_turn(1, "pwd", "/home/dev/project"), _turn(2, "ls", "main.py")]
    step2 = _messages(profile, turns[:1], current=turns[1].action)
    step3 = _messages(profile, turns)
    roles = [m.role for m in step3]
    demos = len(load_domain("terminal").demonstrations)
    assert roles == ["system"] + ["user", "assistant"] * (demos + 2) + ["user"]
    assert step3[-2].content == "**Environment Observation:**\nmain.py"
    assert step3[-4].content == "**Environment Observation:**\n/home/dev/project"
    assert step3[-1].content.startswith("### Turn 3\n**Action:**")
    # Step 3's prompt starts with step 2's (the KV cache of step 2 stays valid).
    assert step3[: len(step2)] == step2


@pytest.mark.parametrize(
    ("raw", "observation"),
    [
        ("<think>reasoning</think><predicted_observation>\nok\n</predicted_observation>", "ok"),
        (
            "<predicted_observation>draft</predicted_observation> more "
            "<predicted_observation>final</predicted_observation>",
            "final",
        ),
        ("<think>x</think>\n<predicted_observation>cut off", "cut off"),
        ("<think>never finished thinking", ""),
        ("thinking opened by the template</think>\nhello", "hello"),
        ("**Environment Observation:**\ntotal 0", "total 0"),
        ("plain output\nline 2", "plain output\nline 2"),
    ],
)
def test_agentworld_extracts_the_observation(raw, observation):
    assert AgentWorldProfile().extract_observation(raw) == observation


def test_default_profile_also_takes_an_observation_block():
    raw = "<think>hm</think><predicted_observation>x</predicted_observation>"
    assert PromptProfile().extract_observation(raw) == "x"
    assert PromptProfile().extract_observation("**Environment Observation:**\nx").startswith("**")


def test_reasoning_helpers():
    assert strip_reasoning("a<think>b</think>c<think>d") == "ac"
    assert only_thinking("<think>still going")
    assert only_thinking("<think>done</think>  ")
    assert not only_thinking("<think>done</think> answer")
    assert not only_thinking("no tags, short answer")


@pytest.mark.anyio
async def test_agentworld_profile_on_the_embedded_model(tmp_path):
    """The profile end to end on a real (tiny, untrained for it) model: the prompt has the
    trained shape and the answer comes back as an observation."""
    engine = RecordingEngine(small_engine(threads=TEST_THREADS))
    settings = ServeSettings(simulator=[str(write_tiny_domain(tmp_path))], profile="agentworld")
    simulator = build_simulator(settings, engine=engine)
    async with Client(build_server(simulator), mode="legacy") as client:
        for command in ("pwd", "ls"):
            result = await client.call_tool("run_command", {"command": command})
            assert not result.is_error
        (episode,) = simulator.episodes.all()  # a legacy connection's episode ends with it
    last = engine.requests[-1].messages
    assert last[0].content.startswith("# Role and Objective")
    assert last[-1].content.startswith("### Turn 2\n**Action:**\n```json\n")
    assert last[-2].content == "**Environment Observation:**\n" + episode.turns[0].observation
    # What the agent got is the observation the profile read out of the model's raw answer.
    raw = engine.results[0].text
    assert episode.turns[0].observation == AgentWorldProfile().extract_observation(raw)
    assert episode.records[1].stats.reused_prompt_tokens > 0


def test_small_profile_keeps_facts_and_demonstrations_in_far_fewer_tokens(module_engine):
    turns = [_turn(1, "pwd", "/home/dev/project\n[exit code: 0]")]
    domain = load_domain("terminal")

    def first_prompt(profile):
        return build_messages(profile, domain, domain.tools, domain.world, [], 0, LS, 1, [])

    small, default = first_prompt(SmallModelProfile()), first_prompt(PromptProfile())
    system = small[0].content
    assert "run_command(command)" in system and "devbox" in system
    assert "Desktop Commander" not in system  # long agent-facing descriptions are gone
    assert [m.content for m in small[1:]] == [  # demonstrations kept, actions as tool + JSON
        'run_command {"command": "echo hello && uname -s"}',
        "hello\nLinux\n[exit code: 0]",
        'run_command {"command": "cat missing.txt"}',
        "cat: missing.txt: No such file or directory\n[exit code: 1]",
        'run_command {"command": "ls -la"}',
    ]
    # Nothing per-call in the system message: the next step's prompt extends this one.
    step2 = build_messages(
        SmallModelProfile(),
        domain,
        domain.tools,
        domain.world,
        turns,
        0,
        LS,
        2,
        ["the disk is full"],
    )
    assert step2[: len(small) - 1] == small[:-1]
    assert step2[-1].content.endswith("(now: the disk is full)")
    count = anyio.run(module_engine.count_tokens, small[:1])
    # Both state the same world facts (the bundled project's files with their contents, about
    # 260 tokens); the rest shrinks about fivefold.
    assert count * 2.5 < anyio.run(module_engine.count_tokens, default[:1])

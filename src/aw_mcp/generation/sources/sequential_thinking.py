"""Source ``sequential-thinking``: the reference step-by-step thinking server.

``@modelcontextprotocol/server-sequential-thinking`` (npm) keeps the thought history and the
branches of one session; its answer reports the counters. Episodes think linearly, revise,
extend the plan, and send invalid thoughts. Held out: the template ``branching``.
"""

from __future__ import annotations

import random

from aw_mcp.generation.mcp_servers import Call, Template, mcp_user_world

PACKAGE = "@modelcontextprotocol/server-sequential-thinking"
VERSION = "2026.8.31"
THOUGHTS = [
    "List what the function must return for empty input.",
    "The bug is probably in the rounding step.",
    "Check the unit of the timeout: seconds or milliseconds?",
    "Split the problem: parse first, then validate.",
    "A cache keyed by user id would avoid the second query.",
    "Compare the two logs line by line.",
    "The test fails only on the second run, so state leaks.",
    "Write the simplest version first.",
]


def _thought(rng: random.Random, number: int, total: int, more: bool, **extra: object) -> Call:
    arguments = {
        "thought": rng.choice(THOUGHTS),
        "nextThoughtNeeded": more,
        "thoughtNumber": number,
        "totalThoughts": total,
        **extra,
    }
    return ("sequentialthinking", arguments)


def _linear(rng: random.Random) -> list[Call]:
    total = rng.randint(2, 5)
    return [_thought(rng, n, total, n < total) for n in range(1, total + 1)]


def _revision(rng: random.Random) -> list[Call]:
    total = rng.randint(3, 4)
    calls = [_thought(rng, n, total, True) for n in range(1, total)]
    revised = rng.randint(1, total - 1)
    calls.append(_thought(rng, total, total, False, isRevision=True, revisesThought=revised))
    return calls


def _longer_plan(rng: random.Random) -> list[Call]:
    calls = [_thought(rng, 1, 2, True), _thought(rng, 2, 2, True, needsMoreThoughts=True)]
    calls += [_thought(rng, 3, rng.randint(3, 5), rng.random() < 0.5)]
    return calls


def _invalid(rng: random.Random) -> list[Call]:
    bad: list[Call] = [
        (
            "sequentialthinking",
            {"thought": "x", "thoughtNumber": 0, "totalThoughts": 1, "nextThoughtNeeded": False},
        ),
        ("sequentialthinking", {"thought": rng.choice(THOUGHTS)}),
        (
            "sequentialthinking",
            {"thought": "y", "thoughtNumber": "two", "totalThoughts": 3, "nextThoughtNeeded": True},
        ),
    ]
    return [_thought(rng, 1, 2, True), *rng.sample(bad, 2), _thought(rng, 2, 2, False)]


def _branching(rng: random.Random) -> list[Call]:  # held out
    branch = rng.choice(["alt-a", "plan-b", "option-2"])
    calls = [_thought(rng, 1, 3, True), _thought(rng, 2, 3, True)]
    calls.append(_thought(rng, 3, 3, True, branchFromThought=1, branchId=branch))
    calls.append(_thought(rng, 4, 4, False, branchFromThought=1, branchId=branch))
    return calls


SOURCE = mcp_user_world(
    name="sequential-thinking",
    summary=f"the sequential-thinking MCP server (needs root, node and {PACKAGE})",
    versions={PACKAGE: VERSION},
    env={"DISABLE_THOUGHT_LOGGING": "true"},
    servers={"sequential-thinking": ["mcp-server-sequential-thinking"]},
    templates=[
        Template("linear", _linear),
        Template("revision", _revision),
        Template("longer_plan", _longer_plan),
        Template("invalid", _invalid),
        Template("branching", _branching, heldout=True),
    ],
    world={
        "facts": {
            "server": f"{PACKAGE} {VERSION}",
            "state": "the thought history and branches start empty in every episode",
        },
        "notes": [
            "Each answer is JSON (indented two spaces): thoughtNumber, totalThoughts (raised "
            "to thoughtNumber when smaller), nextThoughtNeeded, branches (ids), "
            "thoughtHistoryLength.",
        ],
    },
)

"""Source ``everything``: the MCP reference test server, recorded as the ``mcp`` world.

``@modelcontextprotocol/server-everything`` (npm) is the server the bundled ``mcp`` world
copies, so its records use the domain ``mcp``: they train ``aw-mcp serve --simulator mcp``.
Only the tools that world serves are called (not the image and resource ones). State: the
two toggles remember whether they are on. Held out: the template ``mixed_session``.
"""

from __future__ import annotations

import random

from aw_mcp.generation.mcp_servers import Call, Template, mcp_user_world

PACKAGE = "@modelcontextprotocol/server-everything"
VERSION = "2026.8.31"
WORDS = ["hello", "ping", "status check", "Grüße aus Köln", "42", "a b  c", "", "done?"]
CITIES = ["New York", "Chicago", "Los Angeles", "Paris", "Tokyo", "Lisbon"]


def _number(rng: random.Random) -> float | int:
    return rng.choice([rng.randint(-50, 500), round(rng.uniform(-10, 10), 2), 0])


def _arithmetic(rng: random.Random) -> list[Call]:
    calls: list[Call] = []
    for _ in range(rng.randint(2, 4)):
        calls.append(("get-sum", {"a": _number(rng), "b": _number(rng)}))
        if rng.random() < 0.5:
            calls.append(("echo", {"message": rng.choice(WORDS)}))
    return calls


def _toggles(rng: random.Random) -> list[Call]:
    tools = ["toggle-simulated-logging", "toggle-subscriber-updates"]
    calls: list[Call] = [(rng.choice(tools), {}) for _ in range(rng.randint(2, 4))]
    return [*calls, ("echo", {"message": rng.choice(WORDS)})]


def _weather(rng: random.Random) -> list[Call]:
    calls: list[Call] = [
        ("get-structured-content", {"location": city})
        for city in rng.sample(CITIES, rng.randint(1, 3))
    ]
    return [*calls, ("get-annotated-message", {"messageType": rng.choice(["success", "debug"])})]


def _errors(rng: random.Random) -> list[Call]:
    bad: list[Call] = [
        ("get-sum", {"a": "two", "b": 3}),
        ("get-sum", {"a": 1}),
        ("echo", {}),
        ("get-annotated-message", {"messageType": "warning"}),
        ("trigger-long-running-operation", {"duration": "soon"}),
    ]
    return [("get-env", {}), *rng.sample(bad, rng.randint(2, 3)), ("echo", {"message": "ok"})]


def _mixed_session(rng: random.Random) -> list[Call]:  # held out
    return [
        (
            "trigger-long-running-operation",
            {"duration": rng.randint(1, 2), "steps": rng.randint(1, 3)},
        ),
        ("get-annotated-message", {"messageType": "error", "includeImage": False}),
        ("toggle-subscriber-updates", {}),
        ("get-sum", {"a": _number(rng), "b": _number(rng)}),
        ("get-structured-content", {"location": rng.choice(CITIES)}),
        ("toggle-subscriber-updates", {}),
    ]


SOURCE = mcp_user_world(
    name="everything",
    domain="mcp",
    summary="the MCP reference server 'everything' as the mcp world (needs root, node and "
    f"the npm package {PACKAGE})",
    versions={PACKAGE: VERSION},
    servers={"everything": ["mcp-server-everything"]},
    templates=[
        Template("arithmetic", _arithmetic),
        Template("toggles", _toggles),
        Template("weather", _weather),
        Template("errors", _errors),
        Template("mixed_session", _mixed_session, heldout=True),
    ],
    world={
        "facts": {
            "server": f"{PACKAGE} {VERSION} (server name mcp-servers/everything 2.0.0), "
            "over stdio, one client",
            "state": "both toggles (simulated logging, subscriber updates) start off; each "
            "call flips one",
        },
        "notes": [
            "get-structured-content answers a JSON object such as "
            '{"temperature":33,"conditions":"Cloudy","humidity":82} for any location.',
            "Arguments that fail the input schema are answered with an isError text starting "
            "'MCP error -32602: Input validation error: Invalid arguments for tool <name>:'.",
        ],
    },
)

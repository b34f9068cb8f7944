"""Source ``time``: the reference time server (current times and conversions between zones).

``mcp-server-time`` (PyPI) with ``--local-timezone UTC``. The current time is the real clock
when the episode ran (no simulator can know it: evaluation must not count its digits);
conversions of a given time are fully determined by the arguments and the tz database, but
the date they fall on is the recording day. Held out: the template ``meeting_planner``.
"""

from __future__ import annotations

import random

from aw_mcp.generation.mcp_servers import Call, Template, mcp_user_world, python_server

PACKAGE = "mcp-server-time"
VERSION = "2026.10.19"
ZONES = [
    "Europe/Paris",
    "America/New_York",
    "Asia/Tokyo",
    "Australia/Sydney",
    "America/Sao_Paulo",
    "Asia/Kolkata",
    "Africa/Lagos",
    "Europe/London",
    "America/Los_Angeles",
    "Pacific/Auckland",
    "UTC",
]
BAD_ZONES = ["Mars/Olympus_Mons", "EST5", "Paris", "GMT+25", "europe/paris"]


def _clock(rng: random.Random) -> str:
    return f"{rng.randint(0, 23):02d}:{rng.choice([0, 15, 30, 45, rng.randint(0, 59)]):02d}"


def _now(rng: random.Random) -> list[Call]:
    return [("get_current_time", {"timezone": z}) for z in rng.sample(ZONES, rng.randint(1, 3))]


def _convert(rng: random.Random) -> list[Call]:
    calls: list[Call] = []
    for _ in range(rng.randint(1, 3)):
        src, dst = rng.sample(ZONES, 2)
        calls.append(
            ("convert_time", {"source_timezone": src, "time": _clock(rng), "target_timezone": dst})
        )
    return calls


def _errors(rng: random.Random) -> list[Call]:
    src, dst = rng.sample(ZONES, 2)
    bad: list[Call] = [
        ("get_current_time", {"timezone": rng.choice(BAD_ZONES)}),
        (
            "convert_time",
            {
                "source_timezone": src,
                "time": rng.choice(["25:00", "9am", "12:60", "noon"]),
                "target_timezone": dst,
            },
        ),
        (
            "convert_time",
            {"source_timezone": rng.choice(BAD_ZONES), "time": _clock(rng), "target_timezone": dst},
        ),
        ("get_current_time", {}),
    ]
    return [*rng.sample(bad, 2), ("get_current_time", {"timezone": src})]


def _meeting_planner(rng: random.Random) -> list[Call]:  # held out
    home, *others = rng.sample(ZONES, 4)
    when = _clock(rng)
    return [
        ("get_current_time", {"timezone": home}),
        *(
            ("convert_time", {"source_timezone": home, "time": when, "target_timezone": z})
            for z in others
        ),
    ]


SOURCE = mcp_user_world(
    name="time",
    summary=f"the time MCP server (needs root and {PACKAGE} in /opt/aw-mcp-time)",
    versions={PACKAGE: VERSION},
    servers={"time": [python_server("time", "mcp-server-time"), "--local-timezone", "UTC"]},
    templates=[
        Template("now", _now),
        Template("convert", _convert),
        Template("errors", _errors),
        Template("meeting_planner", _meeting_planner, heldout=True),
    ],
    world={
        "facts": {
            "server": f"{PACKAGE} {VERSION} (server name mcp-time), local timezone UTC",
        },
        "notes": [
            "Answers are JSON (indented two spaces) with timezone, datetime (ISO 8601 with "
            "offset: the real clock for get_current_time, :00 seconds for convert_time), "
            "day_of_week and is_dst; convert_time adds time_difference such as '+9.0h'.",
            "Errors are isError texts: 'Error executing tool get_current_time: Invalid "
            "timezone: 'No time zone found with key <name>''.",
        ],
    },
)

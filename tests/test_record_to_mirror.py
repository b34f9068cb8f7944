"""The path from "I have a server" to a mirror of it, as README's how-to gives it: put
`aw-mcp record` in front of the real server for a short session, then serve its saved
tools/list with the recorded calls as grounding. Runs on a small real server
(mcp-server-time from PyPI) and the shipped default world model. What grounding shows the
model is tests/test_grounding.py's; here: the folder `record` writes is what `--grounding`
retrieves from, and the mirror serves the real tools and answers them (their shape is held by
the tools' outputSchema)."""

from __future__ import annotations

import json
import os
import sys

import pytest
from mcp import Client, StdioServerParameters

from aw_mcp.capture.record_proxy import proxy_target
from aw_mcp.simulation.grounding import GroundingIndex

pytestmark = [pytest.mark.quality, pytest.mark.anyio]

SESSION = [  # a short scripted session, as a user's client would make
    ("get_current_time", {"timezone": "UTC"}),
    ("get_current_time", {"timezone": "Asia/Tokyo"}),
    ("convert_time", {"source_timezone": "UTC", "time": "09:30", "target_timezone": "Asia/Dubai"}),
    ("convert_time", {"source_timezone": "Asia/Tokyo", "time": "18:00", "target_timezone": "UTC"}),
]


async def test_a_recorded_session_grounds_a_mirror_that_serves_the_real_tools(tmp_path):
    pytest.importorskip("mcp_server_time")
    out = tmp_path / "my-server"
    real = [sys.executable, "-m", "mcp_server_time"]
    async with Client(proxy_target(out, real, "--domain", "time")) as client:  # command one
        recorded = [await client.call_tool(name, arguments) for name, arguments in SESSION]
    capture = out / "tools" / "time.json"
    assert capture.is_file() and len(list(out.glob("*.jsonl"))) == 1
    # what --grounding will show for a conversion: the session's real conversions
    name, arguments = SESSION[2]
    shown = GroundingIndex.from_record_dir(out).retrieve(name, arguments, [])
    assert shown and shown[0].observation == recorded[2].content[0].text

    env = {k: v for k, v in os.environ.items() if k != "AW_MCP_MODEL"}  # the plain default
    mirror = StdioServerParameters(  # command two
        command=sys.executable,
        args=[
            *("-m", "aw_mcp", "serve", "--threads", "1"),
            *("--tools-from", str(capture), "--grounding", str(out)),
        ],
        env={**env, "AW_MCP_LOG_LEVEL": "WARNING"},
    )
    async with Client(mirror) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        now = await client.call_tool("get_current_time", {"timezone": "Europe/Berlin"})
        converted = await client.call_tool(
            "convert_time",
            {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
        )
    assert tools == {"get_current_time", "convert_time"}
    for answer, real_answer in ((now, recorded[0]), (converted, recorded[2])):
        assert not answer.is_error
        shape = set(json.loads(real_answer.content[0].text))
        assert set(json.loads(answer.content[0].text)) == shape
    assert json.loads(now.content[0].text)["timezone"] == "Europe/Berlin"

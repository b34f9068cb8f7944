"""aw-mcp record sits between a real client and a real MCP server (mcp-server-time from PyPI):
the client sees the server's tools and answers unchanged, and the records hold what it saw."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from mcp import Client, MCPError, StdioServerParameters, types

from aw_mcp.capture.record_proxy import domain_name_for, observation_of, proxy_target
from aw_mcp.episode.prompt import PromptProfile
from aw_mcp.export.rendering import DomainResolver, render_episode
from aw_mcp.records.reader import load_record_dir

pytestmark = pytest.mark.anyio


def _proxy(out: Path, *options: str) -> StdioServerParameters:
    return proxy_target(out, [sys.executable, "-m", "mcp_server_time"], *options)


async def test_records_equal_what_the_client_received(tmp_path: Path):
    pytest.importorskip("mcp_server_time")
    out = tmp_path / "records"
    async with Client(
        StdioServerParameters(command=sys.executable, args=["-m", "mcp_server_time"])
    ) as direct:
        real_tools = (await direct.list_tools()).tools
    received: list[types.CallToolResult] = []
    async with Client(_proxy(out, "--episode", "ep-1")) as client:
        listed = (await client.list_tools()).tools
        assert [t.model_dump() for t in listed] == [t.model_dump() for t in real_tools]
        received.append(await client.call_tool("get_current_time", {"timezone": "UTC"}))
        received.append(await client.call_tool("get_current_time", {"timezone": "Not/AZone"}))
        with pytest.raises(MCPError) as rpc:
            await client.call_tool("no_such_tool", {})
        received.append(
            await client.call_tool(
                "convert_time",
                {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
                meta={"aw-mcp/episode": "ep-2"},
            )
        )
    assert received[0].is_error is False and received[1].is_error is True
    assert rpc.value.code == types.INVALID_PARAMS

    episodes = {e.episode: e for e in load_record_dir(out)}
    assert sorted(episodes) == ["ep-1", "ep-2"]
    ep1 = episodes["ep-1"].records
    assert [r.index for r in ep1] == [1, 2, 3]
    assert {r.domain for r in ep1} == {"mcp-time"}
    for record, result in zip(
        [ep1[0], ep1[1], episodes["ep-2"].records[0]],
        [received[0], received[1], received[2]],
        strict=True,
    ):
        assert record.source == "real"
        assert record.observation == observation_of(result)
        assert record.observation == result.content[0].text
        assert record.structured == result.structured_content
        assert record.is_error == result.is_error
    assert "Tokyo" in episodes["ep-2"].records[0].observation
    error = ep1[2]
    assert (error.source, error.is_error, error.tool) == ("rpc-error", True, "no_such_tool")
    assert error.structured["code"] == rpc.value.code
    assert error.observation == f"JSON-RPC error {rpc.value.code}: {rpc.value.message}"

    # The tools/list is kept beside the records, so export renders this unbundled domain;
    # the JSON-RPC error is no turn of the history.
    capture = json.loads((out / "tools" / "mcp-time.json").read_text())
    assert [t["name"] for t in capture["tools"]] == ["get_current_time", "convert_time"]
    # A tool with an outputSchema is rendered by its structured answer, as the simulated tool
    # answers; an error result has none and keeps its text.
    rendered = render_episode(episodes["ep-1"], PromptProfile(), DomainResolver(record_dir=out))
    observations = [m.content for m in rendered.messages if m.observation]
    assert "outputSchema" in capture["tools"][0]
    assert observations == [json.dumps(ep1[0].structured), ep1[1].observation]


def test_domain_names_from_server_names():
    assert domain_name_for("mcp-time") == "mcp-time"
    assert domain_name_for("Git Server 2") == "git-server-2"
    assert domain_name_for(None) == "recorded"


def test_bad_invocations_are_refused_clearly(tmp_path: Path, capsys):
    from aw_mcp.cli import main

    assert main(["record", "--out", str(tmp_path)]) == 2
    assert "either --url URL or -- COMMAND ARGS" in capsys.readouterr().err
    assert main(["record", "--out", str(tmp_path), "--domain", "Bad Name", "--", "x"]) == 2
    assert "is no domain name" in capsys.readouterr().err
    assert main(["record", "--out", str(tmp_path), "--", "false"]) == 1  # exits at once
    assert "the server failed: MCPError: Connection closed" in capsys.readouterr().err

"""The official MCP conformance suite against `aw-mcp serve --transport http`.

The server serves a capture of the suite's fixture tools (tests/data/conformance-fixtures.json);
a fault scenario answers most of them with canned results (images, audio, embedded resources
are content a language model does not produce), the world model answers the rest.
It runs once per protocol generation a client may speak: 2026-07-28 (stateless requests,
input-required results) and 2025-11-25 (the handshake, sessions, sampling and elicitation
requests on the call's stream, logging, resource subscriptions).
tests/data/conformance-expected-failures.yml lists the scenarios that cannot apply to a
simulator, with reasons. The suite needs Node >= 22: .ci/run installs it and the suite into a
folder and sets AW_MCP_CONFORMANCE_DIR.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import httpx2
import pytest
from mcp import Client, types

from aw_mcp.server.app import build_server
from aw_mcp.testing import FakeEngine
from aw_mcp.wiring.assemble import build_simulator
from aw_mcp.wiring.settings import ServeSettings
from tests.http_support import JSON_AND_SSE, http_serve

DATA = Path(__file__).parent / "data"
FIXTURES = DATA / "conformance-fixtures.json"
CANNED = DATA / "conformance-fixtures.faults.yaml"
EXPECTED_FAILURES = DATA / "conformance-expected-failures.yml"
SPEC_VERSIONS = ["2026-07-28", "2025-11-25"]
MODERN = SPEC_VERSIONS[0]


def conformance_tools() -> tuple[Path, Path] | None:
    """(node >= 22, the suite's CLI) from AW_MCP_CONFORMANCE_DIR, where .ci/run installs them."""
    folder = os.environ.get("AW_MCP_CONFORMANCE_DIR")
    if not folder:
        return None
    modules = Path(folder) / "node_modules"
    node = modules / ".bin" / "node"
    cli = modules / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    return (node, cli) if node.exists() and cli.exists() else None


def warm_up(url: str) -> None:
    """Call the tool the world model answers once, so its long prompt is in the model's cache.

    The suite gives each request 10 s; on a busy CPU a cold first call can take longer. The
    cache is the server's, whatever protocol the suite then speaks: the call is a stateless one.
    """
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "test_tool_with_progress",
            "arguments": {},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "warm-up", "version": "0"},
            },
        },
    }
    headers = {
        **JSON_AND_SSE,
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "test_tool_with_progress",
    }
    response = httpx2.post(url, json=call, headers=headers, timeout=300)
    assert response.status_code == 200 and '"result"' in response.text, response.text[-500:]


@pytest.mark.external
@pytest.mark.skipif(
    conformance_tools() is None,
    reason="MCP conformance suite not installed: set AW_MCP_CONFORMANCE_DIR to a folder with "
    "npm packages @modelcontextprotocol/conformance and node@22 (.ci/run does)",
)
@pytest.mark.parametrize("spec_version", SPEC_VERSIONS)
def test_the_official_conformance_suite_passes_but_for_the_listed_expected_failures(
    tmp_path, spec_version
):
    node, cli = conformance_tools()  # type: ignore[misc]
    args = ["--tools-from", str(FIXTURES), "--faults", str(CANNED), "--log-level", "WARNING"]
    with http_serve(tmp_path / "server.log", *args) as url:
        warm_up(url)
        run = subprocess.run(
            [
                str(node),
                str(cli),
                "server",
                "--url",
                url,
                "--spec-version",
                spec_version,
                "--suite",
                "all",
                "--expected-failures",
                str(EXPECTED_FAILURES),
                "--timeout",
                "120000",
                "-o",
                str(tmp_path / "results"),
            ],
            capture_output=True,
            text=True,
            timeout=900,
        )
    summary = run.stdout[run.stdout.rfind("=== SUMMARY ===") :]
    assert run.returncode == 0, summary + run.stderr[-3000:]
    assert "tools-call-image: " in summary and "tools-call-with-progress: " in summary


@pytest.mark.anyio
async def test_canned_fixture_results_reach_the_client_as_mcp_content_blocks():
    engine = FakeEngine("world model text")
    settings = ServeSettings(tools_from=[FIXTURES], faults=[CANNED])
    server = build_server(build_simulator(settings, engine=engine))
    async with Client(server) as client:
        image = await client.call_tool("test_image_content", {})
        mixed = await client.call_tool("test_multiple_content_types", {})
        error = await client.call_tool("test_error_handling", {})
        modelled = await client.call_tool("test_tool_with_progress", {})
    assert isinstance(image.content[0], types.ImageContent)
    assert image.content[0].mime_type == "image/png" and image.is_error is False
    assert [block.type for block in mixed.content] == ["text", "image", "resource"]
    assert mixed.content[2].resource.uri == "test://mixed-content-resource"
    assert error.is_error is True and "intentionally" in error.content[0].text
    assert modelled.content[0].text == "world model text"
    assert len(engine.requests) == 1  # only the tool without a canned result reached the model


@pytest.mark.anyio
async def test_the_fixture_resources_and_prompts_reach_the_client():
    """The suite's fixture resources, templates and prompts (in the capture) are served; their
    canned answers come back as resource contents and prompt messages of every content type."""
    engine = FakeEngine("world model text")
    settings = ServeSettings(tools_from=[FIXTURES], faults=[CANNED])
    server = build_server(build_simulator(settings, engine=engine))
    async with Client(server) as client:
        listed = (await client.list_resources()).resources
        binary = (await client.read_resource("test://static-binary")).contents[0]
        other = (await client.read_resource("test://template/7/data")).contents[0]
        image = await client.get_prompt("test_prompt_with_image")
        completion = await client.complete(
            types.PromptReference(type="ref/prompt", name="test_prompt_with_arguments"),
            {"name": "arg1", "value": "test"},
        )
    assert [r.uri for r in listed] == [
        "test://static-text",
        "test://static-binary",
        "test://watched-resource",
    ]
    assert isinstance(binary, types.BlobResourceContents) and binary.mime_type == "image/png"
    # a read the fixtures do not can is the world model's
    assert isinstance(other, types.TextResourceContents) and other.text == "world model text"
    assert [m.content.type for m in image.messages] == ["image", "text"]
    assert completion.completion.values == ["testValue1", "testValue2"]

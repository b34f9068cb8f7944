"""mcp.json at the repository root is what agent IDEs read; its entries must really work."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.anyio
CONFIG = json.loads((REPO_ROOT / "mcp.json").read_text())["mcpServers"]


def test_config_has_a_stdio_and_an_http_entry():
    kinds = {("http" if entry.get("type") == "http" else "stdio") for entry in CONFIG.values()}
    assert kinds == {"stdio", "http"}
    http = next(e for e in CONFIG.values() if e.get("type") == "http")
    assert http["url"].endswith("/mcp")
    assert "Aw-Episode-Id" in http["headers"]


async def test_the_stdio_entry_starts_a_server_that_answers():
    name, entry = next((n, e) for n, e in CONFIG.items() if "command" in e)
    # The console script sits beside the interpreter running the tests (same environment).
    command = shutil.which(entry["command"], path=str(Path(sys.executable).parent))
    assert command, f"{entry['command']} is not installed in this environment"
    env = {**os.environ, **entry.get("env", {}), "AW_MCP_N_CTX": "4096", "AW_MCP_THREADS": "1"}
    params = StdioServerParameters(command=command, args=entry["args"], env=env)
    async with Client(params) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("run_command", {"command": "pwd"})
    assert "start_process" in tools, name
    assert result.is_error is False


def _inspector() -> str | None:
    """The MCP Inspector CLI (npm @modelcontextprotocol/inspector), where .ci/run installed it."""
    path = os.environ.get("AW_MCP_INSPECTOR") or shutil.which("mcp-inspector")
    return path if path and Path(path).exists() else None


@pytest.mark.skipif(_inspector() is None, reason="MCP Inspector CLI not installed (.ci/run does)")
def test_the_official_mcp_inspector_uses_mcp_json(tmp_path):
    """A real third-party client reads mcp.json, lists the tools and calls one."""
    import subprocess

    env = {
        **os.environ,
        "HOME": str(tmp_path),  # the Inspector writes ~/.mcp-inspector
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "AW_MCP_N_CTX": "4096",
        "AW_MCP_THREADS": "1",
    }
    base = [
        _inspector(),
        "--cli",
        "--config",
        str(REPO_ROOT / "mcp.json"),
        "--server",
        "aw-terminal",
    ]

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*base, *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=180,
            stdin=subprocess.DEVNULL,
        )

    listed = run("--method", "tools/list")
    assert listed.returncode == 0, listed.stderr
    assert '"name": "start_process"' in listed.stdout
    called = run("--method", "tools/call", "--tool-name", "run_command", "--tool-arg", "command=ls")
    assert called.returncode == 0, called.stderr
    assert '"isError": false' in called.stdout
    invalid = run("--method", "tools/call", "--tool-name", "run_command", "--tool-arg", "cmd=ls")
    assert invalid.returncode == 5  # the Inspector's code for an isError result
    assert "'command' is a required property" in invalid.stdout + invalid.stderr

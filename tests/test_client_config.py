"""Client configuration that must really work: mcp.json at the repository root (langchain's
form), and ``aw-mcp client-config``, which writes each client's own form (the real client
reads it where it is installed here: the Inspector, langchain-mcp-adapters, pydantic-ai)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from tests.conftest import REPO_ROOT
from tests.http_support import NO_MODEL, http_serve

pytestmark = pytest.mark.anyio
CONFIG = json.loads((REPO_ROOT / "mcp.json").read_text())["mcpServers"]
HTTP_PORT = 8765  # the HTTP entry's, aw-mcp serve --transport http's default


def test_config_has_a_stdio_and_an_http_entry():
    # `transport` on every entry (langchain-mcp-adapters requires it; pydantic-ai and the
    # Inspector ignore it) and no `type`: langchain passes every other key on as an argument.
    assert sorted(entry["transport"] for entry in CONFIG.values()) == ["http", "stdio"]
    assert all("type" not in entry for entry in CONFIG.values())
    http = next(e for e in CONFIG.values() if e["transport"] == "http")
    assert http["url"] == f"http://127.0.0.1:{HTTP_PORT}/mcp"
    assert "Aw-Episode-Id" in http["headers"]


@contextlib.contextmanager
def servers_of_mcp_json(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment a client of mcp.json needs: `aw-mcp` on PATH, and the HTTP entry's
    server running on its port (skipped when something else holds that port)."""
    try:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", HTTP_PORT))
    except OSError:
        pytest.skip(f"port {HTTP_PORT} (mcp.json's HTTP entry) is in use")
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(tmp_path),
    }
    with http_serve(tmp_path / "http.log", *NO_MODEL, port=HTTP_PORT):
        yield env


# Drives every entry of mcp.json through langchain-mcp-adapters: its tools as LangChain tools,
# then a call on each entry's session (invalid arguments: the server answers without a model).
LANGCHAIN_CLIENT = """
import asyncio, json, sys
from langchain_mcp_adapters.client import MultiServerMCPClient

config = json.load(open(sys.argv[1]))["mcpServers"]

async def main():
    client = MultiServerMCPClient(config)
    tools = await client.get_tools()
    report = {"tools": sorted({t.name for t in tools}), "calls": {}}
    for name in config:
        async with client.session(name) as session:
            result = await session.call_tool("run_command", {})
            report["calls"][name] = [result.isError, result.content[0].text]
    print(json.dumps(report))

asyncio.run(main())
"""


def _langchain_python() -> str | None:
    """An interpreter with langchain-mcp-adapters (an mcp 1.x client: it cannot share this
    environment, which has mcp 2.x), where .ci/run installed one."""
    path = os.environ.get("AW_MCP_LANGCHAIN_PYTHON")
    return path if path and Path(path).exists() else None


@pytest.mark.external
@pytest.mark.skipif(
    _langchain_python() is None,
    reason="langchain-mcp-adapters not installed: set AW_MCP_LANGCHAIN_PYTHON to a python with "
    "langchain-mcp-adapters==0.3.2 (an mcp 1.x client: its own venv; .ci/run makes one)",
)
def test_langchain_mcp_adapters_uses_mcp_json_unchanged(tmp_path):
    with servers_of_mcp_json(tmp_path) as env:
        done = subprocess.run(
            [_langchain_python(), "-c", LANGCHAIN_CLIENT, str(REPO_ROOT / "mcp.json")],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.splitlines()[-1])
    assert {"run_command", "start_process"} <= set(report["tools"])
    for name, (is_error, text) in report["calls"].items():
        assert is_error and "'command' is a required property" in text, name


async def test_pydantic_ai_loads_mcp_json_unchanged(tmp_path, monkeypatch):
    load_mcp_toolsets = pytest.importorskip(
        "pydantic_ai.mcp",
        reason="pydantic-ai not installed (pip install -e '.[test]' brings pydantic-ai-slim[mcp])",
    ).load_mcp_toolsets

    with servers_of_mcp_json(tmp_path) as env:
        monkeypatch.setenv("PATH", env["PATH"])
        toolsets = load_mcp_toolsets(REPO_ROOT / "mcp.json")
        assert len(toolsets) == len(CONFIG)
        for prefixed in toolsets:
            toolset = prefixed.wrapped
            async with toolset:
                names = {t.name for t in await toolset.list_tools()}
            assert {"run_command", "start_process"} <= names, toolset.id


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


INSPECTOR_MISSING = (
    "MCP Inspector CLI not installed: set AW_MCP_INSPECTOR to its mcp-inspector (.ci/run "
    "installs npm @modelcontextprotocol/inspector@2) or put mcp-inspector on PATH"
)


def run_inspector(
    tmp_path: Path, config: Path, server: str, *args: str
) -> subprocess.CompletedProcess:
    """The Inspector CLI on entry ``server`` of the mcp.json-shaped file ``config``."""
    env = {
        **os.environ,
        "HOME": str(tmp_path),  # the Inspector writes ~/.mcp-inspector
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "AW_MCP_N_CTX": "4096",
        "AW_MCP_THREADS": "1",
    }
    command = [_inspector() or "", "--cli", "--config", str(config), "--server", server, *args]
    return subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=180, stdin=subprocess.DEVNULL
    )


@pytest.mark.external
@pytest.mark.skipif(_inspector() is None, reason=INSPECTOR_MISSING)
def test_the_official_mcp_inspector_uses_mcp_json(tmp_path):
    """A real third-party client reads mcp.json, lists the tools and calls one."""

    def run(*args: str) -> subprocess.CompletedProcess:
        return run_inspector(tmp_path, REPO_ROOT / "mcp.json", "aw-terminal", *args)

    listed = run("--method", "tools/list")
    assert listed.returncode == 0, listed.stderr
    assert '"name": "start_process"' in listed.stdout
    called = run("--method", "tools/call", "--tool-name", "run_command", "--tool-arg", "command=ls")
    assert called.returncode == 0, called.stderr
    assert '"isError": false' in called.stdout
    invalid = run("--method", "tools/call", "--tool-name", "run_command", "--tool-arg", "cmd=ls")
    assert invalid.returncode == 5  # the Inspector's code for an isError result
    assert "'command' is a required property" in invalid.stdout + invalid.stderr


@pytest.mark.external
@pytest.mark.skipif(_inspector() is None, reason=INSPECTOR_MISSING)
def test_the_inspector_needs_a_type_key_on_an_http_entry(tmp_path):
    """The Inspector (2.x) reads an entry without ``type`` as stdio, and langchain refuses a
    ``type`` key, so no HTTP entry suits both (README, Connecting a client): mcp.json keeps
    langchain's ``transport``, and ``client-config --client inspector`` writes the
    Inspector's form. Both halves are checked here: unchanged, the Inspector does not reach
    the HTTP server; with ``"type": "http"`` added, it lists and calls its tools."""
    name = next(n for n, e in CONFIG.items() if "url" in e)
    copy = tmp_path / "mcp.json"
    with_type = {n: {**e, "type": "http"} if "url" in e else e for n, e in CONFIG.items()}
    copy.write_text(json.dumps({"mcpServers": with_type}))
    with servers_of_mcp_json(tmp_path):
        unchanged = run_inspector(tmp_path, REPO_ROOT / "mcp.json", name, "--method", "tools/list")
        listed = run_inspector(tmp_path, copy, name, "--method", "tools/list")
        invalid = run_inspector(
            tmp_path, copy, name, "--method", "tools/call", "--tool-name", "run_command"
        )
    assert unchanged.returncode != 0  # taken as a stdio entry without a command
    assert listed.returncode == 0, listed.stderr
    assert '"name": "start_process"' in listed.stdout
    assert invalid.returncode == 5 and "'command' is a required property" in invalid.stdout


# aw-mcp client-config: one client's configuration, in the shape that client reads.

STDIO_ARGS = ["serve", "--episode", "run-1"]
STDIO_ENV = {"AW_MCP_LOG_LEVEL": "WARNING"}
HTTP_URL = f"http://127.0.0.1:{HTTP_PORT}/mcp"
HTTP_HEADERS = {"Aw-Episode-Id": "ep-1"}
STDIO = {"command": "aw-mcp", "args": STDIO_ARGS, "env": STDIO_ENV}
HTTP = {"url": HTTP_URL, "headers": HTTP_HEADERS}

# What each client reads (README, "Connecting a client"): its servers key, and the keys that
# mark an entry's transport there. Claude Desktop's file has no HTTP entry.
CLIENT_FILES = {
    "inspector": {
        "stdio": {"mcpServers": {"aw-mcp": {"type": "stdio", **STDIO}}},
        "http": {"mcpServers": {"aw-mcp": {"type": "streamable-http", **HTTP}}},
    },
    "langchain": {
        "stdio": {"mcpServers": {"aw-mcp": {"transport": "stdio", **STDIO}}},
        "http": {"mcpServers": {"aw-mcp": {"transport": "http", **HTTP}}},
    },
    "pydantic-ai": {
        "stdio": {"mcpServers": {"aw-mcp": STDIO}},
        "http": {"mcpServers": {"aw-mcp": HTTP}},
    },
    "claude-desktop": {"stdio": {"mcpServers": {"aw-mcp": STDIO}}},
    "cursor": {
        "stdio": {"mcpServers": {"aw-mcp": STDIO}},
        "http": {"mcpServers": {"aw-mcp": HTTP}},
    },
    "vscode": {
        "stdio": {"servers": {"aw-mcp": {"type": "stdio", **STDIO}}},
        "http": {"servers": {"aw-mcp": {"type": "http", **HTTP}}},
    },
    "claude-code": {
        "stdio": {"mcpServers": {"aw-mcp": {"type": "stdio", **STDIO}}},
        "http": {"mcpServers": {"aw-mcp": {"type": "http", **HTTP}}},
    },
}


def client_config(capsys, *args: str) -> tuple[int, str, str]:
    from aw_mcp.cli import main

    code = main(["client-config", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("client", "transport"),
    [(client, transport) for client, files in CLIENT_FILES.items() for transport in files],
)
def test_client_config_prints_what_the_client_reads(capsys, client, transport):
    if transport == "stdio":
        options = ["--env", "AW_MCP_LOG_LEVEL=WARNING", "--", "--episode", "run-1"]
    else:
        options = ["--transport", "http", "--header", "Aw-Episode-Id: ep-1"]
    code, out, err = client_config(capsys, "--client", client, *options)
    assert code == 0, err
    assert json.loads(out) == CLIENT_FILES[client][transport]


def test_client_config_defaults_to_a_stdio_aw_mcp_serve_and_serves_url(capsys):
    assert json.loads(client_config(capsys, "--client", "cursor")[1]) == {
        "mcpServers": {"aw-mcp": {"command": "aw-mcp", "args": ["serve"]}}
    }
    _, out, err = client_config(
        capsys, "--client", "vscode", "--transport", "http", "--name", "sim"
    )
    assert json.loads(out) == {"servers": {"sim": {"type": "http", "url": HTTP_URL}}}
    assert "aw-mcp serve --transport http" in err


def test_client_config_absolute_names_this_environments_aw_mcp(capsys):
    _, out, _ = client_config(capsys, "--client", "claude-code", "--absolute")
    entry = json.loads(out)["mcpServers"]["aw-mcp"]
    command = Path(entry["command"])
    assert command.is_absolute() and command.is_file()
    if entry["args"][:2] == ["-m", "aw_mcp"]:  # no console script beside the interpreter
        assert command == Path(sys.executable).absolute()
    else:
        assert command.name == "aw-mcp" and command.parent == Path(sys.executable).parent
    assert entry["args"][-1] == "serve"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--client", "claude-desktop", "--transport", "http"],
            "Claude Desktop's config file starts stdio servers only: use --transport stdio",
        ),
        (
            ["--client", "cursor", "--", "--wrld", "w.yaml"],
            "not an option of aw-mcp serve: --wrld w.yaml (did you mean --world?)",
        ),
        (["--client", "cursor", "--", "--port", "x"], "argument --port: invalid int value"),
        (["--client", "cursor", "--", "--transport", "http"], "give --transport to client-config"),
        (
            ["--client", "cursor", "--transport", "http", "--", "--episode", "e"],
            "give them to the server you start: aw-mcp serve --transport http",
        ),
        (["--client", "cursor", "--url", HTTP_URL], "--url is for an HTTP entry"),
        (["--client", "cursor", "--transport", "http", "--header", "x"], "'NAME: VALUE'"),
        (["--client", "cursor", "--env", "FOO"], "--env needs KEY=VALUE"),
    ],
)
def test_client_config_refuses_in_one_line(capsys, args, message):
    code, out, err = client_config(capsys, *args)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and message in err, err


def test_client_config_out_adds_its_entry_and_keeps_the_rest(tmp_path, capsys):
    existing = {"servers": {"other": {"type": "stdio", "command": "x"}}, "inputs": []}
    path = tmp_path / ".vscode" / "mcp.json"
    path.parent.mkdir()
    path.write_text(json.dumps(existing))
    code, out, err = client_config(capsys, "--client", "vscode", "-o", str(path))
    assert (code, out) == (0, "")
    assert "kept 1 other server" in err
    assert json.loads(path.read_text()) == {
        "servers": {
            "other": {"type": "stdio", "command": "x"},
            "aw-mcp": {"type": "stdio", "command": "aw-mcp", "args": ["serve"]},
        },
        "inputs": [],
    }
    path.write_text("{not json")
    assert client_config(capsys, "--client", "vscode", "-o", str(path))[0] == 2


# The real clients on what client-config writes: a stdio entry (this environment's aw-mcp,
# --absolute, with serve options after --) and an HTTP entry (a running server, a header),
# both in one file written by two runs of -o. The servers run without a model
# (tools/list and an invalid call need none).


STDIO_ENV_FLAG = ["--env", "AW_MCP_LOG_LEVEL=WARNING"]


def write_client_config(path: Path, *args: str) -> None:
    """``aw-mcp client-config ARGS -o PATH``, run as a user runs it (its own process)."""
    command = [sys.executable, "-m", "aw_mcp", "client-config", "-o", str(path), *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


@contextlib.contextmanager
def client_config_file(tmp_path: Path, client: str) -> Iterator[Path]:
    path = tmp_path / f"{client}.json"
    write_client_config(
        path,
        "--client",
        client,
        "--absolute",
        "--name",
        "aw-stdio",
        *STDIO_ENV_FLAG,
        "--",
        *NO_MODEL,
    )
    with http_serve(tmp_path / "http.log", *NO_MODEL) as url:
        http = ["--transport", "http", "--url", url, "--header", "Aw-Episode-Id: ep-1"]
        write_client_config(path, "--client", client, *http, "--name", "aw-http")
        yield path


@pytest.mark.external
@pytest.mark.skipif(_inspector() is None, reason=INSPECTOR_MISSING)
def test_the_inspector_uses_client_configs_entries_unchanged(tmp_path):
    with client_config_file(tmp_path, "inspector") as path:
        for name in ("aw-stdio", "aw-http"):
            listed = run_inspector(tmp_path, path, name, "--method", "tools/list")
            assert listed.returncode == 0, (name, listed.stderr)
            assert '"name": "start_process"' in listed.stdout, name
            invalid = run_inspector(
                tmp_path, path, name, "--method", "tools/call", "--tool-name", "run_command"
            )
            assert invalid.returncode == 5, (name, invalid.stdout, invalid.stderr)
            assert "'command' is a required property" in invalid.stdout, name


@pytest.mark.external
@pytest.mark.skipif(
    _langchain_python() is None,
    reason="langchain-mcp-adapters not installed: set AW_MCP_LANGCHAIN_PYTHON to a python with "
    "langchain-mcp-adapters==0.3.2 (an mcp 1.x client: its own venv; .ci/run makes one)",
)
def test_langchain_mcp_adapters_uses_client_configs_entries_unchanged(tmp_path):
    with client_config_file(tmp_path, "langchain") as path:
        done = subprocess.run(
            [_langchain_python(), "-c", LANGCHAIN_CLIENT, str(path)],
            capture_output=True,
            text=True,
            env={**os.environ, "HOME": str(tmp_path)},
            timeout=300,
            stdin=subprocess.DEVNULL,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.splitlines()[-1])
    assert {"run_command", "start_process"} <= set(report["tools"])
    assert sorted(report["calls"]) == ["aw-http", "aw-stdio"]
    for name, (is_error, text) in report["calls"].items():
        assert is_error and "'command' is a required property" in text, name


async def test_pydantic_ai_uses_client_configs_entries_unchanged(tmp_path):
    load_mcp_toolsets = pytest.importorskip(
        "pydantic_ai.mcp",
        reason="pydantic-ai not installed (pip install -e '.[test]' brings pydantic-ai-slim[mcp])",
    ).load_mcp_toolsets
    with client_config_file(tmp_path, "pydantic-ai") as path:
        toolsets = load_mcp_toolsets(path)
        assert sorted(t.wrapped.id for t in toolsets) == ["aw-http", "aw-stdio"]
        for prefixed in toolsets:
            async with prefixed.wrapped as toolset:
                names = {t.name for t in await toolset.list_tools()}
            assert {"run_command", "start_process"} <= names, toolset.id

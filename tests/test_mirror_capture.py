"""Mirroring MCP servers: --tools-from loads captures unchanged, capture saves real tools/lists,
and several domains share one server without name clashes."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest
from mcp import Client

from aw_mcp.cli import main
from aw_mcp.domain.catalogue import Catalogue
from aw_mcp.domain.loader import load_domain
from aw_mcp.domain.mirror import load_tools_file, mirror_domain, mirror_domain_name
from aw_mcp.files.yaml import DataFileError
from aw_mcp.server.app import wire_tool
from aw_mcp.testing import FakeEngine
from aw_mcp.wiring.assemble import build_catalogue
from aw_mcp.wiring.settings import ServeSettings
from tests.conftest import REPO_ROOT, TOOL_SURFACES
from tests.test_structured_output import STRUCTURED_CAPTURES
from tests.tool_calls import example_arguments, simulated_server, with_max_tokens

SURFACES = TOOL_SURFACES
CAPTURES = sorted(p.name for p in SURFACES.glob("*.json"))
# What a served tool keeps of a capture (execution, icons and _meta are not served).
SERVED_FIELDS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")


def _served_fields(tool: dict) -> dict:
    return {k: tool[k] for k in SERVED_FIELDS if k in tool}


# -- --tools-from ------------------------------------------------------------------------------


@pytest.mark.parametrize("capture", CAPTURES)
def test_every_capture_loads_with_names_and_schemas_unchanged(capture):
    path = SURFACES / capture
    original = json.loads(path.read_text())["tools"]
    catalogue = build_catalogue(ServeSettings(tools_from=[path]))
    assert [d.name for d in catalogue.domains] == [path.stem]  # --tools-from alone: just these
    served = [wire_tool(t).model_dump(by_alias=True, exclude_none=True) for t in catalogue]
    assert served == [_served_fields(t) for t in original]


def test_tools_from_works_beside_bundled_domains():
    settings = ServeSettings(simulator=["terminal"], tools_from=[SURFACES / "time.json"])
    catalogue = build_catalogue(settings)
    assert [d.name for d in catalogue.domains] == ["terminal", "time"]
    time_domain = catalogue.domains[1]
    # The mcp domain's instructions and world simulate every mirrored server.
    assert time_domain.instructions == load_domain("mcp").instructions
    assert time_domain.demonstrations == []  # mcp's examples use tools time does not have
    assert mirror_domain(SURFACES / "everything.json").demonstrations  # ... everything has them


def test_a_mirrored_tool_only_gets_examples_its_own_schema_allows(tmp_path):
    template = load_domain("mcp")
    demo = template.demonstrations[0]
    path = tmp_path / "other.json"
    schema = {
        "type": "object",
        "properties": {"unrelated": {"type": "string"}},
        "required": ["unrelated"],
    }
    path.write_text(json.dumps({"tools": [{"name": demo.tool, "inputSchema": schema}]}))
    assert mirror_domain(path, template).demonstrations == []


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"tools": [\n  {"name": "x",\n  }\n]}', "time.json:3: invalid JSON"),
        ('{"result": {"nothing": []}}', 'expected a tools/list result: {"tools": [...]}'),
        (
            '{"tools": [{"name": "ok"}, {"name": "bad", "inputSchema": {"type": "string"}}]}',
            "tools[1].inputSchema (tool 'bad'): an MCP inputSchema must",
        ),
        ('{"tools": ["x"]}', "tools[0]: Input should be a valid dictionary"),
        ('{"tools": [{"name": "twice"}, {"name": "twice"}]}', "a tool name appears twice"),
    ],
)
def test_a_broken_capture_is_reported_with_file_and_place(tmp_path, content, expected):
    path = tmp_path / "time.json"
    path.write_text(content)
    with pytest.raises(DataFileError) as error:
        mirror_domain(path)
    assert expected in str(error.value)
    assert str(path) in str(error.value)


def test_serve_refuses_a_broken_capture_with_exit_code_2(tmp_path, capsys):
    path = tmp_path / "broken.json"
    path.write_text("{not json")
    assert main(["serve", "--tools-from", str(path)]) == 2
    assert f"{path}:1: invalid JSON" in capsys.readouterr().err


def test_raw_json_rpc_responses_load_and_names_become_domain_names(tmp_path):
    path = tmp_path / "My Server.json"
    tools = json.loads((SURFACES / "time.json").read_text())
    path.write_text(json.dumps({"jsonrpc": "2.0", "id": 1, "result": tools}))
    assert [t.name for t in load_tools_file(path)] == ["get_current_time", "convert_time"]
    assert mirror_domain_name(path) == "my-server"


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize(
    "capture", [c for c in CAPTURES if c not in STRUCTURED_CAPTURES] or ["(none)"]
)
async def test_every_capture_answers_through_an_mcp_client(capture, module_engine):
    """A text tool of each capture answers; so does every tool with an outputSchema (the
    captures of STRUCTURED_CAPTURES are called tool by tool in test_structured_output.py)."""
    domain = with_max_tokens(mirror_domain(SURFACES / capture), 16)
    server = simulated_server(module_engine, domain)
    text_tools = [t for t in domain.tools if not t.output_schema]
    to_call = text_tools[:1] + [t for t in domain.tools if t.output_schema]
    async with Client(server) as client:
        assert len((await client.list_tools()).tools) == len(domain.tools)
        for tool in to_call:
            result = await client.call_tool(tool.name, example_arguments(tool.input_schema))
            assert not result.is_error, (tool.name, result.content)
            if tool.output_schema:
                assert result.structured_content is not None  # validated by the client
            else:
                assert result.content[0].text.strip()


# -- several domains in one server -------------------------------------------------------------


def test_domains_without_common_names_keep_every_name():
    catalogue = build_catalogue(ServeSettings(simulator=["web", "search"]))
    expected = [t.name for t in load_domain("web").tools + load_domain("search").tools]
    assert catalogue.names() == expected


def test_clashing_names_are_prefixed_with_their_domain_and_only_those():
    catalogue = Catalogue([load_domain("terminal"), load_domain("os"), load_domain("swe")])
    names = set(catalogue.names())
    # read_file: terminal and os; read_text_file: os and swe; run_command: terminal and swe.
    assert {"terminal_read_file", "os_read_file"} <= names
    assert {"os_read_text_file", "swe_read_text_file"} <= names
    assert {"terminal_run_command", "swe_run_command"} <= names
    assert not {"read_file", "read_text_file", "run_command"} & names
    assert {"desktop_click", "git_status", "start_process"} <= names  # unique: unchanged
    assert len(names) == sum(len(d.tools) for d in catalogue.domains)  # nothing hidden


@pytest.mark.anyio
async def test_a_prefixed_tool_reaches_its_own_domain_under_its_own_name():
    fake = FakeEngine('{"content": "TODO"}')
    server = simulated_server(fake, load_domain("os"), load_domain("swe"))
    async with Client(server) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert listed["swe_read_text_file"].input_schema == listed["os_read_text_file"].input_schema
        result = await client.call_tool("swe_read_text_file", {"path": "README.md"})
    assert not result.is_error
    prompt = fake.last_prompt
    assert "invoice-calc" in prompt  # the swe world answered, not the os one
    assert "Action: read_text_file" in prompt  # the model sees the real tool name


# -- capture -----------------------------------------------------------------------------------


def _python_env() -> list[str]:
    return ["--env", f"PYTHONPATH={REPO_ROOT / 'src'}"]


def test_capture_our_own_server_over_stdio_round_trips_a_capture(tmp_path):
    out = tmp_path / "captured.json"
    command = [sys.executable, "-m", "aw_mcp", "serve", "--tools-from", str(SURFACES / "time.json")]
    assert main(["capture", "--out", str(out), *_python_env(), "--", *command]) == 0
    captured = json.loads(out.read_text())
    original = json.loads((SURFACES / "time.json").read_text())
    assert captured == {"tools": [_served_fields(t) for t in original["tools"]]}


def test_capture_a_third_party_server_from_pypi(tmp_path):
    """mcp-server-time (PyPI), the server tests/data/tool-surfaces/time.json was captured from."""
    pytest.importorskip("mcp_server_time")
    out = tmp_path / "time.json"
    assert main(["capture", "--out", str(out), "--", sys.executable, "-m", "mcp_server_time"]) == 0
    captured = json.loads(out.read_text())["tools"]
    reference = json.loads((SURFACES / "time.json").read_text())["tools"]
    assert [t["name"] for t in captured] == ["get_current_time", "convert_time"]
    assert [t["outputSchema"] for t in captured] == [t["outputSchema"] for t in reference]
    assert [t.name for t in mirror_domain(out).tools] == ["get_current_time", "convert_time"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_capture_over_http(tmp_path):
    port = _free_port()
    command = ["serve", "--simulator", "mcp", "--transport", "http", "--port", str(port)]
    server = subprocess.Popen(
        [sys.executable, "-m", "aw_mcp", *command, "--log-level", "WARNING"],
        env={"PYTHONPATH": str(REPO_ROOT / "src"), "PATH": "/usr/bin:/bin"},
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        out = tmp_path / "mcp.json"
        assert main(["capture", "--out", str(out), "--url", f"http://127.0.0.1:{port}/mcp"]) == 0
    finally:
        server.terminate()
        server.wait(timeout=10)
    names = [t["name"] for t in json.loads(out.read_text())["tools"]]
    assert names == [t.name for t in load_domain("mcp").tools]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        ([], 2, "give either --url URL or -- COMMAND ARGS"),
        (["--", "/nonexistent/server-binary"], 1, "could not start or reach"),
        (["--env", "NO_EQUALS_SIGN", "--", "true"], 2, "--env needs KEY=VALUE"),
    ],
)
def test_capture_errors_are_clear(tmp_path, capsys, args, code, message):
    out = tmp_path / "x.json"
    assert main(["capture", "--out", str(out), "--timeout", "20", *args]) == code
    assert message in capsys.readouterr().err
    assert not out.exists()

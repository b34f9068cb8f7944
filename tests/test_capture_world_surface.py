"""`aw-mcp capture` saves a server's resources, resource templates and prompts with its tools,
and `--tools-from` serves them to a real client (reads and gets answered by the engine).

Captured from: our own server over stdio (a domain that declares them), the reference
`everything` server (tests/data/everything-capture.json, captured from npm
@modelcontextprotocol/server-everything 2026.8.31; the live capture test runs where .ci/run
installed it).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from mcp import Client, types

from aw_mcp.cli import main
from aw_mcp.domain.catalogue import Catalogue
from aw_mcp.domain.loader import load_domain
from aw_mcp.domain.mirror import mirror_domain
from aw_mcp.episode.store import EpisodeStore
from aw_mcp.server.app import build_server
from aw_mcp.server.episode_identity import EPISODE_META_KEY
from aw_mcp.simulation.simulator import WorldSimulator
from aw_mcp.testing import FakeEngine
from tests.conftest import REPO_ROOT
from tests.http_support import NO_MODEL

DATA = Path(__file__).parent / "data"
NOTES_DOMAIN = DATA / "notes_domain.yaml"
EVERYTHING = DATA / "everything-capture.json"


def mirrored_server(capture: Path, engine: FakeEngine):
    simulator = WorldSimulator(Catalogue([mirror_domain(capture)]), engine, EpisodeStore())
    return simulator, build_server(simulator)


def test_capture_saves_resources_templates_and_prompts_of_a_server_that_has_them(tmp_path):
    out = tmp_path / "notes.json"
    command = [sys.executable, "-m", "aw_mcp", "serve", *NO_MODEL, "--simulator", str(NOTES_DOMAIN)]
    env = ["--env", f"PYTHONPATH={REPO_ROOT / 'src'}"]
    assert main(["capture", "--out", str(out), *env, "--", *command]) == 0
    captured = json.loads(out.read_text())
    domain = load_domain(str(NOTES_DOMAIN))

    def wire(items):
        return [i.model_dump(by_alias=True, exclude_none=True, mode="json") for i in items]

    assert captured["resources"] == wire(domain.resources)
    assert captured["resourceTemplates"] == wire(domain.resource_templates)
    assert captured["prompts"] == wire(domain.prompts)
    mirrored = mirror_domain(out)
    assert mirrored.resources == domain.resources and mirrored.prompts == domain.prompts


def test_a_server_without_them_captures_tools_only(tmp_path):
    out = tmp_path / "tiny.json"
    command = [sys.executable, "-m", "aw_mcp", "serve", *NO_MODEL, "--simulator", "terminal"]
    env = ["--env", f"PYTHONPATH={REPO_ROOT / 'src'}"]
    assert main(["capture", "--out", str(out), *env, "--", *command]) == 0
    assert list(json.loads(out.read_text())) == ["tools"]


@pytest.mark.anyio
async def test_the_mirrored_everything_server_serves_its_resources_and_prompts():
    engine = FakeEngine(lambda request: "# Architecture\nThe server is layered.")
    simulator, server = mirrored_server(EVERYTHING, engine)
    meta = {EPISODE_META_KEY: "ep"}
    async with Client(server) as client:
        resources = (await client.list_resources()).resources
        templates = (await client.list_resource_templates()).resource_templates
        prompts = (await client.list_prompts()).prompts
        static = next(r for r in resources if r.uri.endswith("architecture.md"))
        read = await client.read_resource(static.uri, meta=meta)
        dynamic = await client.read_resource("demo://resource/dynamic/text/7", meta=meta)
        prompt = await client.get_prompt("args-prompt", {"city": "Paris"}, meta=meta)
    assert (len(resources), len(templates), len(prompts)) == (7, 2, 4)
    [content] = read.contents
    assert isinstance(content, types.TextResourceContents)
    assert content.text.startswith("# Architecture") and content.mime_type == "text/markdown"
    assert dynamic.contents[0].uri == "demo://resource/dynamic/text/7"
    assert prompt.messages[0].role == "user"
    [episode] = simulator.episodes.find("ep")
    assert [r.tool for r in episode.records] == ["resources/read", "resources/read", "prompts/get"]


def _everything_server() -> str | None:
    path = os.environ.get("AW_MCP_EVERYTHING_SERVER") or shutil.which("mcp-server-everything")
    return path if path and Path(path).exists() else None


@pytest.mark.external
@pytest.mark.skipif(
    _everything_server() is None,
    reason="npm @modelcontextprotocol/server-everything not installed (.ci/run installs it)",
)
def test_capture_the_reference_everything_server(tmp_path):
    out = tmp_path / "everything.json"
    assert main(["capture", "--out", str(out), "--", str(_everything_server()), "stdio"]) == 0
    captured = json.loads(out.read_text())
    reference = json.loads(EVERYTHING.read_text())
    for key in ("resources", "resourceTemplates", "prompts"):
        assert [i["name"] for i in captured[key]] == [i["name"] for i in reference[key]], key
    assert {t["name"] for t in captured["tools"]} >= {"echo", "get-sum"}

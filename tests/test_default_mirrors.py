"""What plain `aw-mcp serve --tools-from CAPTURE` gives: the default world model with the
bundled mirrors' adapter. A held-out episode of the real memory server (recorded in
trajectories/, never trained on) is replayed through the default and through the plain model
(`--no-lora`); the truth is the recorded observations, not written here.

The plain model answers memory's `read_graph` after a build-up with an empty graph (measured:
0.128 on every held-out episode; the adapter 0.936 in run m4, and as bundled the episode's
entities). The model runs on the CPU, one thread.
"""

from __future__ import annotations

import json

import pytest
from mcp import Client

from aw_mcp.evaluation.metrics import similarity
from aw_mcp.trajectories.records import load_record_dir
from tests.conftest import REPO_ROOT
from tests.helpers import text_of
from tests.test_default_world_model import default_server

pytestmark = pytest.mark.anyio

MEMORY = REPO_ROOT / "trajectories/mcp/memory/heldout"


async def _replayed(*args: str) -> list[str]:
    """The first held-out memory episode's calls, in order, through a default server."""
    episode = load_record_dir(MEMORY)[0]
    capture = MEMORY / "tools/memory.json"
    async with Client(default_server("--tools-from", str(capture), *args)) as client:
        return [text_of(await client.call_tool(r.tool, r.arguments)) for r in episode.records]


async def test_the_mirrors_adapter_keeps_the_memory_graph_the_plain_model_empties():
    episode = load_record_dir(MEMORY)[0]
    real = [r.observation for r in episode.records]
    (last,) = [i for i, r in enumerate(episode.records) if r.tool == "read_graph"]
    real_names = {e["name"] for e in json.loads(real[last])["entities"]}
    adapted, plain = await _replayed(), await _replayed("--no-lora")
    adapted_names = {e["name"] for e in json.loads(adapted[last])["entities"]}
    assert adapted_names & real_names, adapted[last]  # the graph the episode built
    assert similarity(adapted[last], real[last]) > similarity(plain[last], real[last]) + 0.2

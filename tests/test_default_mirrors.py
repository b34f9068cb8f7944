"""What plain `aw-mcp serve --tools-from CAPTURE` gives: the default world model with the
bundled mirrors' adapter. A held-out episode of the real memory server (recorded in
data/, never trained on) is replayed through the default and through the plain model
(`--no-lora`); the truth is the recorded observations, not written here.

The plain model answers memory's `read_graph` after a build-up with an empty graph (measured
on every held-out episode: 0.128; the bundled adapter 0.917). The model runs on the CPU, one
thread.
"""

from __future__ import annotations

import json

import pytest
from mcp import Client

from aw_mcp.evaluation.metrics import similarity
from aw_mcp.records.calls import CallRecord
from aw_mcp.records.reader import load_record_dir
from tests.conftest import REPO_ROOT
from tests.helpers import default_server, text_of

pytestmark = [pytest.mark.quality, pytest.mark.anyio]

MEMORY = REPO_ROOT / "data/mcp/memory/heldout"


async def _replayed(records: list[CallRecord], *args: str) -> list[str]:
    """``records``' calls, in order, through a default server of the memory capture."""
    capture = MEMORY / "tools/memory.json"
    async with Client(default_server("--tools-from", str(capture), *args)) as client:
        return [text_of(await client.call_tool(r.tool, r.arguments)) for r in records]


async def test_the_mirrors_adapter_keeps_the_memory_graph_the_plain_model_empties():
    records = load_record_dir(MEMORY)[0].records  # the first held-out episode
    real = [r.observation for r in records]
    (last,) = [i for i, r in enumerate(records) if r.tool == "read_graph"]
    real_names = {e["name"] for e in json.loads(real[last])["entities"]}
    adapted, plain = await _replayed(records), await _replayed(records, "--no-lora")
    adapted_names = {e["name"] for e in json.loads(adapted[last])["entities"]}
    assert adapted_names & real_names, adapted[last]  # the graph the episode built
    assert similarity(adapted[last], real[last]) > similarity(plain[last], real[last]) + 0.2

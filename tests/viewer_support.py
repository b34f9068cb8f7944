"""Record sets for the viewer and report tests.

``write_records`` writes scripted ``CallRecord`` lists (exact timings, sources and faults);
``simulated_record_dir`` runs the real server stack (in-memory MCP client -> server -> fault
scenario -> simulator -> record sink) with the FakeEngine as its world model (plumbing only:
the viewer shows records, whatever wrote them).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import anyio
from mcp import MCPError

from aw_mcp.domain.catalogue import Catalogue
from aw_mcp.engines.counters import GenerationStats
from aw_mcp.episode.store import EpisodeStore
from aw_mcp.faults.scenario_layer import ScenarioFaultLayer
from aw_mcp.records.calls import CallRecord
from aw_mcp.records.sink import RecordSink, record_file_name
from aw_mcp.simulation.simulator import WorldSimulator
from aw_mcp.state.steps import StepState
from aw_mcp.testing import FakeEngine
from tests.faults_support import SHOP, client_for, fake_reply, in_episode, scenario_from

T0 = 1_800_000_000.0


def call(
    index: int,
    tool: str,
    arguments: dict[str, Any] | None = None,
    *,
    at: float | None = None,
    seconds: float = 0.05,
    source: str = "model",
    is_error: bool = False,
    faults: list[dict[str, Any]] | None = None,
    episode: str = "ep",
    domain: str = "shop",
    observation: str | None = None,
    conditions: list[str] | None = None,
    tokens: tuple[int, int] | None = None,
    state: StepState | None = None,
    view: str | None = None,
) -> CallRecord:
    """One scripted record; ``at`` is seconds after T0 (default: one second per index)."""
    return CallRecord(
        index=index,
        episode=episode,
        domain=domain,
        tool=tool,
        arguments=arguments or {},
        observation=observation if observation is not None else f"answer {index}",
        is_error=is_error,
        source=source,  # type: ignore[arg-type]
        faults=faults or [],
        conditions=conditions or [],
        stats=GenerationStats(prompt_tokens=tokens[0], completion_tokens=tokens[1])
        if tokens
        else None,
        started_at=T0 + (at if at is not None else float(index)),
        seconds=seconds,
        state=state,
        view=view,
    )


def fault(rule: str = "boom", scenario: str = "test", effect: str = "error") -> dict[str, Any]:
    return {"scenario": scenario, "rule": rule, "effect": effect}


def write_records(directory: Path, records: list[CallRecord]) -> Path:
    """Append records to their episode's file, as ``--record-dir`` does."""
    directory.mkdir(parents=True, exist_ok=True)
    for record in records:
        path = directory / record_file_name(record.episode)
        with path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record.model_dump(mode="json")) + "\n")
    return directory


# A shop whose search is read-only: a repeated search with nothing changed is replayed.
READ_ONLY_SHOP = SHOP.model_copy(
    update={
        "tools": [
            t.model_copy(update={"annotations": {"readOnlyHint": True}})
            if t.name == "search"
            else t
            for t in SHOP.tools
        ]
    }
)

SCENARIO = """
name: viewer-test
rules:
  - id: third-search-502
    match: {tool: search}
    when: {nth: 3}
    effects: [{kind: error, preset: http_502}]
  - id: write-rpc-error
    match: {tool: write_file}
    when: {nth: 1}
    effects: [{kind: jsonrpc_error, code: -32050, message: "Upstream exploded"}]
  - id: disk-full
    when: {nth: 5, count: all}
    effects: [{kind: world, condition: "The disk is full.", calls: 2}]
"""


def simulated_record_dir(directory: Path) -> Path:
    """Records of two episodes served for real (fake world model), with: model answers, a
    fault answer, a JSON-RPC error, a world condition, a refused call (invalid arguments) and
    a replayed read-only call."""
    simulator = WorldSimulator(
        Catalogue([READ_ONLY_SHOP]),
        FakeEngine(fake_reply),
        episodes=EpisodeStore(sink=RecordSink(directory)),
        faults=ScenarioFaultLayer([scenario_from(SCENARIO)]),
    )

    async def run() -> None:
        async with client_for(simulator) as client:
            meta = in_episode("closed-loop/shop-1")
            await client.call_tool("search", {"query": "blue mug"}, meta=meta)  # model
            await client.call_tool("search", {"query": "blue mug"}, meta=meta)  # replay
            await client.call_tool("search", {"query": "red mug"}, meta=meta)  # fault: 502
            await client.call_tool("get_item", {"id": "42"}, meta=meta)  # model (JSON)
            with contextlib.suppress(MCPError):  # rpc-error, as the scenario says
                await client.call_tool("write_file", {"path": "a.txt"}, meta=meta)
            await client.call_tool("write_file", {"text": "no path"}, meta=meta)  # invalid
            other = in_episode("shop-2")
            await client.call_tool("get_item", {"id": "7"}, meta=other)

    anyio.run(run)
    return directory


def real_counterpart(directory: Path) -> Path:
    """The real episode "shop-1" the closed-loop episode above replays."""
    return write_records(
        directory,
        [
            call(1, "search", {"query": "blue mug"}, source="real", episode="shop-1",
                 observation="1 result: Blue mug"),
            call(2, "search", {"query": "blue mug"}, source="real", episode="shop-1",
                 observation="1 result: Blue mug"),
            call(3, "search", {"query": "red mug"}, source="real", episode="shop-1",
                 observation="no results"),
            call(4, "get_item", {"id": "42"}, source="real", episode="shop-1",
                 observation='{"id": "42", "name": "Blue mug"}'),
        ],
    )  # fmt: skip

"""Shared pieces of the fault tests: a small domain, a simulator with scenarios, a client."""

from __future__ import annotations

import json
from typing import Any

from mcp import Client

from aw_mcp.domain.catalogue import Catalogue
from aw_mcp.domain.models import DomainSpec
from aw_mcp.engines.base import GenerationRequest
from aw_mcp.faults.scenario import Scenario
from aw_mcp.faults.scenario_layer import ScenarioFaultLayer
from aw_mcp.files.yaml import parse_yaml_text
from aw_mcp.server.app import build_server
from aw_mcp.server.episode_identity import EPISODE_META_KEY
from aw_mcp.simulation.simulator import WorldSimulator
from aw_mcp.testing import FakeEngine

ITEM_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "name": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "description": {"type": "string"},
    },
    "required": ["id", "name"],
}
ITEM = {
    "id": "42",
    "name": "Blue mug",
    "tags": ["kitchen", "blue"],
    "description": "A 350 ml stoneware mug with a blue glaze, dishwasher safe.",
}
PLAIN_OUTPUT = "name: report.txt\nsize: 2048\nowner: dev\nstatus: ok"

SHOP = DomainSpec.model_validate(
    {
        "name": "shop",
        "instructions": "You are the environment: a small online shop's API.",
        "generation": {"max_tokens": 24},
        "tools": [
            {
                "name": "search",
                "inputSchema": {
                    "type": "object",
                    "properties": {"query": {"type": "string"}, "page": {"type": "integer"}},
                    "required": ["query"],
                },
            },
            {
                "name": "get_item",
                "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}},
                "outputSchema": ITEM_SCHEMA,
            },
            {
                "name": "write_file",
                "inputSchema": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
                    "required": ["path"],
                },
            },
        ],
    }
)


def fake_reply(request: GenerationRequest) -> str:
    """JSON for the structured tool, a plain ``key: value`` text for the others."""
    return json.dumps(ITEM) if request.json_schema else PLAIN_OUTPUT


def scenario_from(text: str, source: str = "test-scenario.yaml") -> Scenario:
    return parse_yaml_text(text, Scenario, source)


def make_simulator(
    *scenarios: str, engine: Any | None = None, domain: DomainSpec = SHOP
) -> WorldSimulator:
    layer = ScenarioFaultLayer([scenario_from(s) for s in scenarios])
    return WorldSimulator(Catalogue([domain]), engine or FakeEngine(fake_reply), faults=layer)


def client_for(simulator: WorldSimulator, **kwargs: Any) -> Client:
    return Client(build_server(simulator), **kwargs)


def in_episode(episode_id: str) -> dict[str, Any]:
    """The ``meta`` of a call that belongs to ``episode_id`` (for in-memory clients)."""
    return {EPISODE_META_KEY: episode_id}


def fired(simulator: WorldSimulator, episode_id: str) -> list[list[dict[str, Any]]]:
    """The faults of each call of an episode, in call order."""
    [episode] = simulator.episodes.find(episode_id)
    return [record.faults for record in episode.records]

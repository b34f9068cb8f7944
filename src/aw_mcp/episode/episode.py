"""An episode: one agent's ordered history in one simulated world, and the record of its calls."""

from __future__ import annotations

from typing import Any, Literal

import anyio
from pydantic import BaseModel, Field

from aw_mcp.domain.models import ToolCall
from aw_mcp.engines.base import GenerationStats


class WorldCondition(BaseModel):
    """A fact added to the world mid-episode (by a world fault): "the disk is full"."""

    text: str
    source: str = Field(description="What added it, e.g. 'fault:disk-full'.")
    since_call: int
    remaining_calls: int | None = Field(
        default=None, description="Calls it still applies to; None while sticky."
    )


class Turn(BaseModel):
    """One (action, observation) pair the world model sees on later calls."""

    index: int
    action: ToolCall
    observation: str
    is_error: bool = False
    conditions: list[str] = Field(
        default_factory=list, description="World conditions in effect when this call was made."
    )
    damaged: bool = Field(
        default=False, description="An output fault changed the observation (never replayed)."
    )


ObservationSource = Literal[
    "model", "fault", "replay", "invalid-arguments", "engine-error", "cancelled"
]


class CallRecord(BaseModel):
    """Everything about one call, for the episode's record (JSONL, RL logs, reproduction)."""

    index: int
    episode: str
    domain: str
    tool: str
    arguments: dict[str, Any]
    observation: str
    structured: Any | None = None
    is_error: bool
    source: ObservationSource
    faults: list[dict[str, Any]] = Field(default_factory=list)
    conditions: list[str] = Field(default_factory=list)
    omitted_turns: int = 0
    stats: GenerationStats | None = None
    started_at: float
    seconds: float


class Episode:
    """History and record of one (episode id, domain) pair.

    ``lock`` serializes this episode's calls: the world model must see step n's observation
    before it predicts step n+1, so one agent's parallel calls run in arrival order.
    """

    def __init__(self, episode_id: str, domain: str):
        self.episode_id = episode_id
        self.domain = domain
        self.turns: list[Turn] = []
        self.records: list[CallRecord] = []
        self.conditions: list[WorldCondition] = []
        self.omitted_turns = 0  # oldest turns left out of the prompt to fit the context window
        self.lock = anyio.Lock()

    @property
    def cache_key(self) -> str:
        return f"{self.episode_id}\x1f{self.domain}"

    @property
    def next_index(self) -> int:
        return len(self.records) + 1

    def active_conditions(self) -> list[str]:
        return [c.text for c in self.conditions]

    def add_condition(self, condition: WorldCondition) -> None:
        if condition.text not in self.active_conditions():
            self.conditions.append(condition)

    def consume_conditions(self) -> None:
        """Count one call against conditions that last a limited number of calls."""
        kept = []
        for cond in self.conditions:
            if cond.remaining_calls is not None:
                cond.remaining_calls -= 1
                if cond.remaining_calls <= 0:
                    continue
            kept.append(cond)
        self.conditions = kept

    def add_turn(self, turn: Turn) -> None:
        self.turns.append(turn)

    def add_record(self, record: CallRecord) -> None:
        self.records.append(record)

"""An episode: one agent's ordered history in one simulated world, and the record of its calls."""

from __future__ import annotations

import itertools
import time
from typing import Literal

import anyio
from pydantic import BaseModel, Field

from aw_mcp.domain.models import WorldSpec
from aw_mcp.records.calls import CallRecord, Turn
from aw_mcp.state.world import WorldState


class WorldCondition(BaseModel):
    """A fact added to the world mid-episode (by a world fault): "the disk is full"."""

    text: str
    source: str = Field(description="What added it, e.g. 'fault:disk-full'.")
    since_call: int
    until_call: int | None = Field(
        default=None, description="The last call it applies to; None while sticky."
    )

    def applies_to(self, call_index: int) -> bool:
        return self.since_call <= call_index and (
            self.until_call is None or call_index <= self.until_call
        )


EpisodeState = Literal["created", "active", "ended", "evicted"]

# Tells apart two runs of one (episode id, domain): caches keyed by ``Episode.key`` never
# mistake a reset episode for the one it replaced, even while that one's last call finishes.
_runs = itertools.count(1)


class Episode:
    """History and record of one run of an (episode id, domain) pair.

    Its lifecycle is owned by ``EpisodeStore``: ``created`` on the first call, ``active`` once
    a call is recorded, then ``ended`` (by the client) or ``evicted`` (least recently used).
    Everything other layers keep per episode (fault counters, the engine's KV snapshots) is
    keyed by ``key`` and dropped when the store says the episode is over.

    ``lock`` serializes this episode's calls: the world model must see step n's observation
    before it predicts step n+1, so one agent's parallel calls run in arrival order.
    """

    def __init__(self, episode_id: str, domain: str):
        self.episode_id = episode_id
        self.domain = domain
        self.key = f"{episode_id}\x1f{domain}\x1f{next(_runs)}"
        self.started_at = time.time()
        self.state: EpisodeState = "created"
        self.turns: list[Turn] = []
        self.records: list[CallRecord] = []
        self.conditions: list[WorldCondition] = []
        self.omitted_turns = 0  # oldest turns left out of the prompt to fit the context window
        self.world: WorldSpec | None = None  # the client's own world for this episode, if any
        self.restored = False  # rebuilt from its record by a server that did not run it
        # The state kept for a profile that keeps state (simulation/state_keeping.py): built
        # on first use; ``stateless`` once its world turned out to name no working directory.
        self.world_state: WorldState | None = None
        self.stateless = False
        self.lock = anyio.Lock()

    def take_world(self, world: WorldSpec) -> str | None:
        """Adopt the client's world for this episode (before its first call, or the first
        after a restart: records do not keep it); the refusal's text when the episode already
        runs in another world."""
        if self.world == world:
            return None
        if self.world is not None or (self.records and not self.restored):
            return (
                "This episode already runs in another world: a world (_meta aw-mcp/world) "
                "is set by an episode's first call and cannot change. Reset the episode "
                "(_meta aw-mcp/reset) to start one in a new world."
            )
        self.world = world
        return None

    def world_over(self, served: WorldSpec) -> WorldSpec:
        """The world this episode's prompts state: the served one, with the client's on top."""
        return served.merged(self.world) if self.world is not None else served

    @property
    def is_live(self) -> bool:
        return self.state in ("created", "active")

    @property
    def next_index(self) -> int:
        return len(self.records) + 1

    def active_conditions(self) -> list[str]:
        """Conditions in effect for the call being made now (or the next one).

        Expiry follows the call index, so every call counts, however it ended (an error, a
        refusal or a cancellation included)."""
        return [c.text for c in self.conditions if c.applies_to(self.next_index)]

    def add_condition(self, condition: WorldCondition) -> None:
        """Add a condition; the same condition fired again extends the one in effect."""
        for i, current in enumerate(self.conditions):
            if current.text == condition.text and current.applies_to(condition.since_call):
                until = (
                    None
                    if current.until_call is None or condition.until_call is None
                    else max(current.until_call, condition.until_call)
                )
                self.conditions[i] = current.model_copy(update={"until_call": until})
                return
        self.conditions.append(condition)

    def add_turn(self, turn: Turn) -> None:
        self.turns.append(turn)

    def add_record(self, record: CallRecord) -> None:
        self.records.append(record)
        self.state = "active"

"""An episode: one agent's ordered history in one simulated world, and the record of its calls."""

from __future__ import annotations

import itertools
import time
from typing import Any, Literal

import anyio
from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer

from aw_mcp.domain.models import ClientExchange, ToolCall, WorldSpec
from aw_mcp.engines.base import GenerationStats


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
    reached_world: bool = Field(
        default=True,
        description="False when a protocol fault (an HTTP error page, a rate limit) answered "
        "instead of the environment: the world model sees a failed request, not its text, so "
        "it never mistakes the fault for something the environment printed.",
    )


# "real": recorded from a real server or shell (aw-mcp record, the trajectory generator);
# "rpc-error": a JSON-RPC error instead of a result (a real server's, recorded by aw-mcp
# record, or a fault rule's); it never enters the history.
# "replay-miss": `serve --replay` with replay_miss=error refused a call no recording matches.
ObservationSource = Literal[
    "model",
    "fault",
    "replay",
    "real",
    "invalid-arguments",
    "engine-error",
    "cancelled",
    "rpc-error",
    "replay-miss",
]


def reached_world(source: ObservationSource, is_error: bool) -> bool:
    """Whether a call's answer came from the (simulated or real) environment. An error a fault
    rule answered with (a 502, a 429) never reached it; a canned result a rule gives did."""
    return not (source == "fault" and is_error)


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
    episode_started_at: float | None = Field(
        default=None,
        description="When this run of the episode began. An id that is reset, or forgotten "
        "and used again, begins a new run whose indices start at 1 again.",
    )
    client: list[ClientExchange] = Field(
        default_factory=list,
        description="What the tool asked the MCP client during the call and was answered.",
    )

    @model_serializer(mode="wrap")
    def _without_empty_client(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Most calls ask the client nothing: their records keep the shape they always had.
        data: dict[str, Any] = handler(self)
        if not data.get("client"):
            data.pop("client", None)
        return data


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

"""The seam between the server and fault injection.

For each call the simulator asks the fault layer for a ``FaultDecision`` before the world
model runs, and lets it transform the answer afterwards. Decisions must be a pure function of
(scenario, seed, episode, call index, call): never of a shared random stream, so concurrent
episodes cannot change each other's faults.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from aw_mcp.domain.answers import ToolAnswer
from aw_mcp.episode.episode import WorldCondition


@dataclass
class FiredFault:
    """One rule that fired on one call; goes into the record and the log."""

    scenario: str
    rule: str
    effect: str
    detail: dict[str, Any] = field(default_factory=dict)

    def as_record(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "rule": self.rule, "effect": self.effect, **self.detail}


@dataclass
class JsonRpcFault:
    code: int
    message: str
    data: Any | None = None


@dataclass
class FaultDecision:
    fired: list[FiredFault] = field(default_factory=list)
    answer: ToolAnswer | None = None  # answer instead of the world model
    rpc_error: JsonRpcFault | None = None  # fail the request with a JSON-RPC error
    delay_seconds: float = 0.0
    hang: bool = False  # never answer (until the client gives up and cancels)
    conditions: list[WorldCondition] = field(default_factory=list)
    transforms: list[Callable[[ToolAnswer], ToolAnswer]] = field(default_factory=list)


@dataclass(frozen=True)
class CallContext:
    """What the fault layer may look at to decide."""

    episode_id: str
    domain: str
    tool: str
    arguments: dict[str, Any]
    call_index: int  # 1-based index of this call in its episode
    output_schema: dict[str, Any] | None = None  # the tool's, for faults that damage output
    episode_key: str | None = None  # ``Episode.key``: this run of the episode
    # How the tool writes a structured answer as text (``ToolSpec.answer_text``); None:
    # compact JSON.
    answer_text: Callable[[Any], str] | None = None

    @property
    def state_key(self) -> str:
        """What per-episode fault state is kept under. A call made outside an episode store
        (a test, a tool) has no run key and is keyed by its episode id and domain."""
        return self.episode_key or f"{self.episode_id}\x1f{self.domain}"


class FaultLayer(Protocol):
    def decide(self, call: CallContext) -> FaultDecision: ...

    def episode_ended(self, episode_key: str) -> None:
        """Drop what is kept for the episode run ``episode_key`` (it ended or was evicted)."""
        ...


class NoFaults:
    """The fault layer when no scenario is loaded."""

    def decide(self, call: CallContext) -> FaultDecision:
        return FaultDecision()

    def episode_ended(self, episode_key: str) -> None:
        return None

"""What a record is: one call (``CallRecord``), where its answer came from, whether it
entered the episode's history, and the turn of history it became.

A record directory (``serve --record-dir``, ``aw-mcp record``, ``aw-mcp generate``) holds one
``CallRecord`` per line. Everything that reads history back (the server restoring an episode,
``serve --replay``, export, training, evaluation, the viewer) decides what entered the history
with :func:`enters_history` and builds its turns with :meth:`Turn.of_record`, so a restored
episode, an exported one and a live one show the world model the same turns.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer

from aw_mcp.domain.models import ClientExchange, ToolCall
from aw_mcp.engines.counters import GenerationStats
from aw_mcp.state.steps import StepState

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


# MCP requests beside tools/call that are recorded as actions of an episode, by their method:
# a record's ``tool`` is one of these for a resource read, a prompt get or a completion.
READ_RESOURCE = "resources/read"
GET_PROMPT = "prompts/get"
COMPLETE = "completion/complete"
SURFACE_METHODS = frozenset({READ_RESOURCE, GET_PROMPT, COMPLETE})


def reached_world(source: ObservationSource, is_error: bool) -> bool:
    """Whether a call's answer came from the (simulated or real) environment. An error a fault
    rule answered with (a 502, a 429) never reached it; a canned result a rule gives did."""
    return not (source == "fault" and is_error)


# Calls whose observation entered the episode's history (what the world model saw on later
# steps). Refused, failed and cancelled calls, JSON-RPC faults and replay refusals never did.
# A fault's answer stays in the history, marked as a request that never reached the world.
HISTORY_SOURCES: frozenset[ObservationSource] = frozenset({"model", "fault", "replay", "real"})


def enters_history(source: ObservationSource) -> bool:
    """Whether a call answered from ``source`` becomes a turn the world model sees later."""
    return source in HISTORY_SOURCES


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
    state: StepState | None = Field(
        default=None,
        description="What the call read of the world and changed in it (aw_mcp.state): "
        "measured in the sandbox for a real call, written by the world model for a modelled "
        "one that keeps state.",
    )
    view: str | None = Field(
        default=None,
        description="The episode's state shown to the world model next to this call (a "
        "profile that keeps state); the history shows it again on later calls.",
    )

    @model_serializer(mode="wrap")
    def _without_empty_extras(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Most calls ask the client nothing and keep no state: their records keep the shape
        # they always had.
        data: dict[str, Any] = handler(self)
        if not data.get("client"):
            data.pop("client", None)
        for key in ("state", "view"):
            if data.get(key) is None:
                data.pop(key, None)
        return data


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
    state: StepState | None = Field(
        default=None, description="What the call read and changed (a profile keeping state)."
    )
    view: str | None = Field(default=None, description="The state shown next to the call.")

    @classmethod
    def of_record(cls, record: CallRecord, tool: str | None = None, damaged: bool = False) -> Turn:
        """The turn of history ``record``'s call became. ``tool``: the tool's own name, where
        the record keeps the name it was served under (``<domain>_<name>`` on a server of
        several domains); ``damaged``: an output fault changed the observation."""
        return cls(
            index=record.index,
            action=ToolCall(
                tool=tool or record.tool, arguments=record.arguments, client=record.client
            ),
            observation=record.observation,
            is_error=record.is_error,
            conditions=record.conditions,
            damaged=damaged,
            reached_world=reached_world(record.source, record.is_error),
            state=record.state,
            view=record.view,
        )


def history_of(records: Iterable[CallRecord]) -> list[Turn]:
    """The turns of history ``records`` (one episode's, in call order) became."""
    return [Turn.of_record(r) for r in records if enters_history(r.source)]

"""The record of a call, however it ends: started when the call begins, finished once with
the answer and where it came from. The store decides where records go (memory, JSONL)."""

from __future__ import annotations

import time
from typing import Any

from aw_mcp.domain.answers import ToolAnswer
from aw_mcp.domain.catalogue import ServedTool
from aw_mcp.domain.models import ClientExchange
from aw_mcp.engines.counters import GenerationStats
from aw_mcp.episode.episode import Episode
from aw_mcp.episode.store import EpisodeStore
from aw_mcp.records.calls import CallRecord, ObservationSource
from aw_mcp.state.steps import StepState


class PendingRecord:
    def __init__(
        self,
        store: EpisodeStore,
        episode: Episode,
        served: ServedTool,
        arguments: dict[str, Any],
        client: list[ClientExchange] | None = None,
    ):
        self.store = store
        self.client = client or []
        self.episode = episode
        self.served = served
        self.arguments = arguments
        self.started = time.time()
        self.faults: list[dict[str, Any]] = []

    def finish(
        self,
        answer: ToolAnswer,
        source: ObservationSource,
        stats: GenerationStats | None = None,
        state: StepState | None = None,
        view: str | None = None,
    ) -> CallRecord:
        episode = self.episode
        record = CallRecord(
            index=episode.next_index,
            episode=episode.episode_id,
            domain=self.served.domain.name,
            tool=self.served.public_name,
            arguments=self.arguments,
            observation=answer.text,
            structured=answer.structured,
            is_error=answer.is_error,
            source=source,
            faults=self.faults,
            conditions=episode.active_conditions(),
            omitted_turns=episode.omitted_turns,
            stats=stats,
            started_at=self.started,
            seconds=round(time.time() - self.started, 4),
            episode_started_at=episode.started_at,
            client=self.client,
            state=state,
            view=view,
        )
        self.store.record(episode, record)
        return record

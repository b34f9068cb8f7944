"""Answer from recorded episodes: ``aw-mcp serve --replay DIR``.

While an episode's calls follow a recorded episode's calls (same domain, same tools with the
same canonical arguments, in the same order), each call gets the recorded observation, with
source ``replay`` in the record. Canonical arguments are JSON with sorted keys, so key order
does not matter. Several recordings may share a prefix; the first (by file, then episode id)
answers. Calls that were refused or failed in either episode (they never reached the world)
are not part of the sequence.

Once an episode leaves every recording, ``replay_miss`` decides: ``model`` lets the world
model answer this call and every later one; ``error`` answers with an ``isError`` result that
names the first call that matches no recording (it does not enter the history, so the agent
may try another call).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from aw_mcp.domain.answers import ToolAnswer
from aw_mcp.domain.catalogue import ServedTool
from aw_mcp.errors import UserInputError
from aw_mcp.records.calls import CallRecord, ObservationSource, enters_history
from aw_mcp.records.reader import load_record_dir

log = logging.getLogger(__name__)

ReplayMiss = Literal["model", "error"]
MAX_LISTED_CONTINUATIONS = 5

Step = tuple[str, str]  # (tool as served, canonical arguments)


def canonical_arguments(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def step_of(record: CallRecord) -> Step:
    return record.tool, canonical_arguments(record.arguments)


@dataclass
class _Node:
    """A position in the recorded call sequences: what comes next, and the answer to it."""

    answer: ToolAnswer | None = None
    origin: str = ""  # "file:episode" of the recording that answers here
    next: dict[Step, _Node] = field(default_factory=dict)


class Recordings:
    """Recorded episodes by domain, as a prefix tree of their call sequences."""

    def __init__(self, miss: ReplayMiss = "model"):
        self.miss = miss
        self._roots: dict[str, _Node] = {}
        self.episodes = 0

    @classmethod
    def load(cls, directory: Path, miss: ReplayMiss = "model") -> Recordings:
        if not directory.is_dir():
            raise UserInputError(f"--replay: no record directory at {directory}")
        recordings = cls(miss)
        for episode in load_record_dir(directory):
            recordings.add(episode.domain, episode.records, f"{episode.path}:{episode.episode}")
        if not recordings.episodes:
            raise UserInputError(f"no recorded calls to replay in {directory}")
        log.info("replay: %d recorded episodes from %s", recordings.episodes, directory)
        return recordings

    def add(self, domain: str, records: list[CallRecord], origin: str) -> None:
        node = self._roots.setdefault(domain, _Node())
        calls = [r for r in records if enters_history(r.source)]
        for record in calls:
            node = node.next.setdefault(step_of(record), _Node())
            if node.answer is None:  # the first recording of this prefix answers
                node.answer = ToolAnswer(
                    text=record.observation, structured=record.structured, is_error=record.is_error
                )
                node.origin = origin
        self.episodes += bool(calls)

    def lookup(
        self, history: list[CallRecord], served: ServedTool, arguments: dict[str, Any]
    ) -> tuple[ToolAnswer, ObservationSource] | None:
        """The recorded answer to this call after ``history`` (the live episode's records);
        on a miss, an error answer or None (let the model answer) as configured."""
        node = self._roots.get(served.domain.name)
        previous = [r for r in history if enters_history(r.source)]
        for position, record in enumerate(previous, start=1):
            if node is None:
                break
            following = node.next.get(step_of(record))
            if following is None:
                return self._miss(node, position, record.tool, record.arguments)
            node = following
        current = (served.public_name, canonical_arguments(arguments))
        if node is not None and (hit := node.next.get(current)) is not None and hit.answer:
            return hit.answer, "replay"
        return self._miss(node, len(previous) + 1, served.public_name, arguments)

    def _miss(
        self, node: _Node | None, position: int, tool: str, arguments: dict[str, Any]
    ) -> tuple[ToolAnswer, ObservationSource] | None:
        if self.miss == "model":
            return None
        call = f"{tool} {canonical_arguments(arguments)}"
        if node is None:
            message = f"there is no recorded episode of this domain (call {position}: {call})"
        else:
            expected = [f"{t} {a}" for t, a in list(node.next)[:MAX_LISTED_CONTINUATIONS]]
            recorded = (
                "recordings continue with: " + "; ".join(expected)
                if expected
                else "every matching recording ends before it"
            )
            message = f"call {position} ({call}) matches no recording: {recorded}"
        return ToolAnswer(text=f"aw-mcp replay: {message}", is_error=True), "replay-miss"

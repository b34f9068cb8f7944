"""Episodes that survive a restart: rebuild an episode from its record file.

Records are the durable state. A server that meets an episode it does not hold (it restarted,
or the episode moved to it from another replica) rebuilds it from ``--record-dir`` before its
next call: the records (so the call index goes on), the history the world model sees, the
omitted-turn count of context trimming, and, by replaying the recorded calls through the fault
layer, its fault counters and world conditions. Fault decisions are a pure function of
(scenario, seed, episode, call index, call), so the replay gives back exactly the state the
first process had, and the rollout goes on with the same seeded faults.

Only the last run of an (episode id, domain) in its file is resumed, and only if it did not
end: when the store ends or evicts an episode, a line in ``<record file>.ended`` (next to the
JSONL; readers of ``*.jsonl`` never see it) marks that run over, so a reset episode is never
brought back. A process that dies writes no such line, which is what lets its episodes go on.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from pydantic import BaseModel

from aw_mcp.domain.catalogue import Catalogue
from aw_mcp.episode.episode import Episode
from aw_mcp.errors import AwMcpError
from aw_mcp.faults.layer import CallContext, FaultLayer
from aw_mcp.files.jsonl import read_jsonl
from aw_mcp.files.yaml import DataFileError
from aw_mcp.records.calls import CallRecord, Turn, enters_history
from aw_mcp.records.sink import RecordSink, drop_torn_last_line

log = logging.getLogger(__name__)

ENDED_SUFFIX = ".ended"


class EndedRun(BaseModel):
    """One line of ``<record file>.ended``: a run of an episode that is over."""

    episode: str
    domain: str
    episode_started_at: float
    state: str


class RestoreError(AwMcpError):
    """A record that cannot be resumed faithfully (a tool no longer served, a gap)."""


class RecordRestorer:
    """Builds an episode the store does not hold from its record file (``EpisodeStore.restore``)
    and marks the runs that end (an ``EpisodeStore`` listener)."""

    def __init__(self, sink: RecordSink, catalogue: Catalogue, faults: FaultLayer):
        self.sink = sink
        self.catalogue = catalogue
        self.faults = faults

    def ended_path(self, episode_id: str) -> Path:
        return self.sink.path_for(episode_id).with_suffix(ENDED_SUFFIX)

    def episode_over(self, episode: Episode) -> None:
        """Mark the episode's run over, so no later process resumes it."""
        if not episode.records:
            return
        line = EndedRun(
            episode=episode.episode_id,
            domain=episode.domain,
            episode_started_at=episode.started_at,
            state=episode.state,
        )
        try:
            with self.ended_path(episode.episode_id).open(
                "a", encoding="utf-8", errors="backslashreplace"
            ) as fh:
                fh.write(json.dumps(line.model_dump(), ensure_ascii=False) + "\n")
        except OSError as exc:
            log.error("could not mark episode %r over: %s", episode.episode_id, exc)

    def __call__(self, episode_id: str, domain: str) -> Episode | None:
        """The episode resumed from the last live run of its record; None if there is none."""
        path = self.sink.path_for(episode_id)
        if not path.is_file():
            return None
        episode = Episode(episode_id, domain)
        try:
            run = self.live_run(path, episode_id, domain)
            if not run:
                return None
            restore_episode(episode, run, self.catalogue, self.faults)
        except Exception as exc:
            # The call goes on in a new run (indices from 1 again), as it did before restarts
            # were survived; the log says why. A resume must never fail the call itself.
            if isinstance(exc, DataFileError | RestoreError):
                log.error("episode %r not resumed from %s: %s", episode_id, path, exc)
            else:
                log.exception("episode %r not resumed from %s", episode_id, path)
            self.faults.episode_ended(episode.key)  # counters of the partial replay
            return None
        log.info("episode %r (%s) resumed from its record: %d calls", episode_id, domain, len(run))
        return episode

    def live_run(self, path: Path, episode_id: str, domain: str) -> list[CallRecord]:
        """The records of the episode's last run, or [] if it ended (or there is none)."""
        drop_torn_last_line(path)
        mine = [
            r for r in read_jsonl(path, CallRecord) if (r.episode, r.domain) == (episode_id, domain)
        ]
        if not mine or mine[-1].episode_started_at is None:
            return []
        started = mine[-1].episode_started_at
        ended_path = self.ended_path(episode_id)
        if ended_path.is_file():
            over = {
                (e.episode, e.domain, e.episode_started_at)
                for e in read_jsonl(ended_path, EndedRun)
            }
            if (episode_id, domain, started) in over:
                return []
        return sorted((r for r in mine if r.episode_started_at == started), key=lambda r: r.index)


def restore_episode(
    episode: Episode, run: list[CallRecord], catalogue: Catalogue, faults: FaultLayer
) -> None:
    """Rebuild ``episode`` from ``run`` as the simulator built it call by call: each call's
    fault decision again (counters, conditions), its turn, its record."""
    if [r.index for r in run] != list(range(1, len(run) + 1)):
        raise RestoreError(f"the record's call indices are not 1..{len(run)}")
    episode.started_at = run[0].episode_started_at or episode.started_at
    for record in run:
        served = catalogue.get(record.tool)
        if served is None:
            raise RestoreError(f"call {record.index} used {record.tool!r}, which is not served")
        damaged = False
        if record.source != "invalid-arguments":  # refused calls never met the fault layer
            decision = faults.decide(
                CallContext(
                    episode.episode_id,
                    episode.domain,
                    record.tool,
                    record.arguments,
                    record.index,
                    served.spec.output_schema,
                    episode.key,
                    served.spec.answer_text,
                )
            )
            for condition in decision.conditions:
                episode.add_condition(condition)
            if [f.as_record() for f in decision.fired] != record.faults:
                log.warning(
                    "episode %r call %d: the loaded scenarios decide other faults than the "
                    "record shows (changed since?); resuming with today's decisions",
                    episode.episode_id,
                    record.index,
                )
            damaged = bool(decision.transforms)
        if enters_history(record.source):
            episode.add_turn(Turn.of_record(record, served.spec.name, damaged))
        episode.add_record(record)
    episode.omitted_turns = run[-1].omitted_turns
    episode.restored = True  # its client's own world (_meta) is taken again on its next call

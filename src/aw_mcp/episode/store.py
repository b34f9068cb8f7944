"""All live episodes of a server, and where their records are written."""

from __future__ import annotations

import json
import logging
import re
from collections import OrderedDict
from pathlib import Path

from aw_mcp.episode.episode import CallRecord, Episode

log = logging.getLogger(__name__)


class RecordSink:
    """Appends each call record as one JSON line to ``DIR/<episode>.jsonl`` (the server's own
    log of what it simulated; never a file written on the agent's behalf)."""

    def __init__(self, directory: Path):
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    def path_for(self, episode_id: str) -> Path:
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", episode_id)[:120] or "episode"
        return self.directory / f"{safe}.jsonl"

    def write(self, record: CallRecord) -> None:
        try:
            with self.path_for(record.episode).open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(record.model_dump(mode="json"), ensure_ascii=False) + "\n")
        except OSError as exc:  # a full disk must not fail the agent's call
            log.error("could not write the record of episode %s: %s", record.episode, exc)


class EpisodeStore:
    """Episodes by (episode id, domain). The least recently used are forgotten past ``limit``."""

    def __init__(self, limit: int = 10_000, sink: RecordSink | None = None):
        self.limit = limit
        self.sink = sink
        self._episodes: OrderedDict[tuple[str, str], Episode] = OrderedDict()

    def get(self, episode_id: str, domain: str) -> Episode:
        key = (episode_id, domain)
        episode = self._episodes.get(key)
        if episode is None:
            episode = Episode(episode_id, domain)
            self._episodes[key] = episode
            log.info("new episode %r in domain %s", episode_id, domain)
            while len(self._episodes) > self.limit:
                (old_id, old_domain), _ = self._episodes.popitem(last=False)
                log.info("forgot episode %r (%s): over %d episodes", old_id, old_domain, self.limit)
        else:
            self._episodes.move_to_end(key)
        return episode

    def find(self, episode_id: str) -> list[Episode]:
        return [e for (eid, _), e in self._episodes.items() if eid == episode_id]

    def all(self) -> list[Episode]:
        return list(self._episodes.values())

    def record(self, episode: Episode, record: CallRecord) -> None:
        episode.add_record(record)
        if self.sink is not None:
            self.sink.write(record)

"""Read record directories back: the JSONL files ``--record-dir`` (and ``aw-mcp record``) write.

One file holds one episode's calls in order, one ``CallRecord`` per line. A record directory is
the common currency of replay, export, evaluation and training, so this is the one reader.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from aw_mcp.files.jsonl import read_jsonl
from aw_mcp.records.calls import CallRecord, Turn, history_of


@dataclass
class RecordedEpisode:
    """One episode's calls in one domain, in call order."""

    episode: str
    domain: str
    records: list[CallRecord] = field(default_factory=list)
    path: Path | None = None

    def turns(self) -> list[Turn]:
        """The history the world model would have seen after the last call."""
        return history_of(self.records)


def read_record_file(path: Path) -> list[CallRecord]:
    """Every record of one JSONL file; a bad line raises DataFileError naming file and line."""
    return read_jsonl(path, CallRecord)


def load_record_dir(directory: Path) -> list[RecordedEpisode]:
    """Episodes of every ``*.jsonl`` below ``directory`` (sorted by path, then episode id).

    A file normally holds one episode; records of several (episode, domain) pairs in one file
    are split apart, each keeping its call order."""
    if not directory.is_dir():
        raise FileNotFoundError(f"no record directory at {directory}")
    episodes: list[RecordedEpisode] = []
    for path in sorted(directory.rglob("*.jsonl")):
        by_key: dict[tuple[str, str], RecordedEpisode] = {}
        for record in read_record_file(path):
            key = (record.episode, record.domain)
            if key not in by_key:
                by_key[key] = RecordedEpisode(record.episode, record.domain, path=path)
            by_key[key].records.append(record)
        for episode in by_key.values():
            episode.records.sort(key=lambda r: r.index)
            episodes.append(episode)
    return episodes

"""Episodes: each agent's history, world conditions, prompt building and call record."""

from aw_mcp.episode.episode import CallRecord, Episode, Turn, WorldCondition
from aw_mcp.episode.store import EpisodeStore, RecordSink

__all__ = ["CallRecord", "Episode", "EpisodeStore", "RecordSink", "Turn", "WorldCondition"]

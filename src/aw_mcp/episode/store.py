"""All live episodes of a server, their one lifecycle, and where their records are written.

``EpisodeStore`` is the single owner of episodes: it creates them, ends them when a client asks
(reset, end, a closed connection) and evicts the least recently used past ``limit``. Other
layers keep per-episode state (fault counters, KV snapshots, the engine pool's routing) keyed by
``Episode.key``; they ``subscribe`` and are told when an episode is over, so nothing outlives
the episode it belongs to and nothing has to guess that an episode restarted.
"""

from __future__ import annotations

import itertools
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Literal

from aw_mcp.episode.episode import Episode
from aw_mcp.records.calls import CallRecord
from aw_mcp.records.sink import RecordSink

log = logging.getLogger(__name__)


EpisodeListener = Callable[[Episode], None]
"""Called once when an episode ends or is evicted (``episode.state`` says which)."""
EpisodeRestorer = Callable[[str, str], Episode | None]
"""The episode (id, domain) rebuilt from durable records, or None (``simulation/restore.py``)."""


class EpisodeStore:
    """Episodes by (episode id, domain). The least recently used are evicted past ``limit``
    (never one with a call in progress)."""

    def __init__(self, limit: int = 10_000, sink: RecordSink | None = None):
        self.limit = limit
        self.sink = sink
        self._episodes: OrderedDict[tuple[str, str], Episode] = OrderedDict()
        self._listeners: list[EpisodeListener] = []
        self.restore: EpisodeRestorer | None = None  # set by the simulator with a sink

    def subscribe(self, listener: EpisodeListener) -> None:
        """Have ``listener`` told about every episode that ends or is evicted from now on."""
        self._listeners.append(listener)

    def get(self, episode_id: str, domain: str) -> Episode:
        """The live episode of (``episode_id``, ``domain``), created if there is none."""
        key = (episode_id, domain)
        episode = self._episodes.get(key)
        if episode is None:
            episode = self.restore(episode_id, domain) if self.restore else None
            episode = episode or Episode(episode_id, domain)
            self._episodes[key] = episode
            log.info("new episode %r in domain %s", episode_id, domain)
            self._evict_over_limit(keep=key)
        else:
            self._episodes.move_to_end(key)
        return episode

    @asynccontextmanager
    async def open(self, episode_id: str, domain: str) -> AsyncIterator[Episode]:
        """The live episode, locked for one call.

        A call that waited for the lock of an episode that ended meanwhile (the client reset
        it) joins the episode that replaced it instead of adding to a finished one."""
        while True:
            episode = self.get(episode_id, domain)
            await episode.lock.acquire()
            if episode.is_live:
                break
            episode.lock.release()
        try:
            yield episode
        finally:
            episode.lock.release()

    def end(self, episode_id: str, reason: str) -> list[Episode]:
        """End every domain's episode of ``episode_id``; the next call begins a new one."""
        ended = self.find(episode_id)
        for episode in ended:
            self._close(episode, "ended", reason)
        return ended

    def find(self, episode_id: str) -> list[Episode]:
        return [e for (eid, _), e in self._episodes.items() if eid == episode_id]

    def all(self) -> list[Episode]:
        return list(self._episodes.values())

    def record(self, episode: Episode, record: CallRecord) -> None:
        if not episode.is_live:
            # A call that was already running when its episode ended: the episode's record is
            # closed, and the run that replaced it must not inherit the call.
            log.warning(
                "episode %r (%s) %s before call %d finished; that call is not recorded",
                episode.episode_id,
                episode.domain,
                episode.state,
                record.index,
            )
            return
        episode.add_record(record)
        if self.sink is not None:
            self.sink.write(record)

    def _evict_over_limit(self, keep: tuple[str, str]) -> None:
        excess = len(self._episodes) - self.limit
        if excess <= 0:
            return
        idle = (
            e
            for k, e in self._episodes.items()
            if k != keep and not e.lock.locked()  # a call in progress keeps its episode
        )
        for episode in list(itertools.islice(idle, excess)):
            self._close(episode, "evicted", f"over {self.limit} episodes")

    def _close(self, episode: Episode, state: Literal["ended", "evicted"], reason: str) -> None:
        del self._episodes[(episode.episode_id, episode.domain)]
        episode.state = state
        log.info("episode %r (%s) %s: %s", episode.episode_id, episode.domain, state, reason)
        for listener in self._listeners:
            try:
                listener(episode)
            except Exception:  # one broken cache must not keep the others from being cleared
                log.exception("a listener failed on the end of episode %r", episode.episode_id)

"""Idle episodes' KV states, kept in an LRU bounded by bytes (shared by the local engines).

When a model instance switches from episode A to B, A's KV state is saved here and B's taken
out (restored), so neither history is evaluated again. The least recently used state goes
first when the budget is exceeded; that episode re-evaluates its history next time (correct,
just slower). What a state *is* belongs to the engine (a ctypes buffer of llama.cpp's
per-sequence state, a transformers ``Cache``); this store only counts its bytes.

Thread-safe: the worker thread saves and restores while ``forget()`` runs on the event loop.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from aw_mcp.engines.counters import EngineCounters

log = logging.getLogger(__name__)


@dataclass
class Snapshot:
    tokens: list[int]  # the tokens whose keys/values the state holds, in order
    state: Any
    nbytes: int


class SnapshotStore:
    def __init__(self, budget_bytes: int, counters: EngineCounters):
        self.budget_bytes = budget_bytes
        self._counters = counters
        self._items: OrderedDict[str, Snapshot] = OrderedDict()
        self._nbytes = 0
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        return self._nbytes

    def __len__(self) -> int:
        return len(self._items)

    def put(self, key: str, snapshot: Snapshot) -> bool:
        """Keep ``snapshot`` as ``key``'s newest state; False if it alone is over budget."""
        if snapshot.nbytes > self.budget_bytes:
            log.info("KV state of %r (%d bytes) is over the budget; not kept", key, snapshot.nbytes)
            return False
        with self._lock:
            self._pop(key)
            self._items[key] = snapshot
            self._nbytes += snapshot.nbytes
            self._counters.snapshot_saves += 1
            while self._nbytes > self.budget_bytes and self._items:
                old_key, old = self._items.popitem(last=False)
                self._nbytes -= old.nbytes
                self._counters.snapshot_evictions += 1
                log.info("evicted the KV state of %r (%d bytes): over budget", old_key, old.nbytes)
        return True

    def take(self, key: str) -> Snapshot | None:
        """Remove and return ``key``'s state (it becomes the live one)."""
        with self._lock:
            return self._pop(key)

    def drop(self, key: str) -> None:
        with self._lock:
            self._pop(key)

    def recent(self, n: int) -> list[Snapshot]:
        """The ``n`` most recently kept states, newest first (candidates to fork from)."""
        with self._lock:
            return list(reversed(self._items.values()))[:n]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._nbytes = 0

    def _pop(self, key: str) -> Snapshot | None:
        snapshot = self._items.pop(key, None)
        if snapshot is not None:
            self._nbytes -= snapshot.nbytes
        return snapshot

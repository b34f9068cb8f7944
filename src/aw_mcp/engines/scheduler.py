"""Fair turns at one model instance for many episodes.

A model instance runs one generation at a time (a ``Llama`` object is not thread-safe; one
transformers model has one KV cache in flight). When several episodes wait, ``FairScheduler``
hands out turns round-robin across cache keys (one key per episode): each waiting episode
gets one generation before any episode gets a second, whatever order the requests came in.
One episode's own calls are already serialized upstream (the episode lock in the simulator),
so in practice this is arrival order across episodes, and it stays fair when a client sends
one episode's requests without waiting.

Waiting happens on the event loop (no worker thread is held per waiting request), so
thousands of queued episodes cost nothing but a small object each.
"""

from __future__ import annotations

import logging
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio

from aw_mcp.engines.base import GenerationControl
from aw_mcp.errors import EngineError

T = TypeVar("T")
log = logging.getLogger(__name__)

_NO_KEY = "\x00no-key"  # requests without a cache key share one lane


@dataclass
class _Waiter:
    key: str
    granted: anyio.Event
    cancelled: bool = False


class FairScheduler:
    """Round-robin turns across keys for one resource (one model instance)."""

    def __init__(self, name: str = "model"):
        self.name = name
        self._busy = False
        self._lanes: OrderedDict[str, deque[_Waiter]] = OrderedDict()
        self.turns_granted = 0
        self.max_waiting = 0  # deepest queue seen, for benchmarks and logs

    @property
    def waiting(self) -> int:
        return sum(len(lane) for lane in self._lanes.values())

    @property
    def busy(self) -> bool:
        return self._busy

    @property
    def load(self) -> int:
        """Requests running or waiting here (a pool routes new episodes to the lowest)."""
        return self.waiting + (1 if self._busy else 0)

    @asynccontextmanager
    async def turn(self, key: str | None) -> AsyncIterator[None]:
        """Wait for this key's turn, hold the instance for the block, pass it on after."""
        await self._acquire(key or _NO_KEY)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, key: str) -> None:
        if not self._busy and not self._lanes:
            self._busy = True
            self.turns_granted += 1
            return
        waiter = _Waiter(key, anyio.Event())
        self._lanes.setdefault(key, deque()).append(waiter)
        self.max_waiting = max(self.max_waiting, self.waiting)
        try:
            await waiter.granted.wait()
        except BaseException:
            if waiter.granted.is_set():
                # The turn arrived as we were cancelled: pass it on, or it is lost for good.
                self._release()
            else:
                waiter.cancelled = True
                self._discard(waiter)
            raise

    def _discard(self, waiter: _Waiter) -> None:
        lane = self._lanes.get(waiter.key)
        if lane is None:
            return
        try:
            lane.remove(waiter)
        except ValueError:
            return
        if not lane:
            del self._lanes[waiter.key]

    def _release(self) -> None:
        """Give the instance to the first waiter of the next lane (ownership moves directly)."""
        while self._lanes:
            key, lane = next(iter(self._lanes.items()))
            waiter = lane.popleft()
            # The served lane goes to the back of the round; an emptied lane leaves it.
            del self._lanes[key]
            if lane:
                self._lanes[key] = lane
            if waiter.cancelled:
                continue
            self.turns_granted += 1
            waiter.granted.set()
            return
        self._busy = False


async def run_in_turn(
    scheduler: FairScheduler,
    key: str | None,
    control: GenerationControl,
    blocking: Callable[..., T],
    *args: Any,
    what: str,
) -> T:
    """Wait for ``key``'s turn, then run ``blocking(*args)`` in a worker thread.

    Cancelling the caller returns at once (``abandon_on_cancel``) and sets the control's
    cancel flag before the turn passes on; the worker sees the flag at its next token and
    stops. Engines keep a lock around the model for the moment both overlap. A failure other
    than ``EngineError`` is logged and re-raised as one, named by ``what``.
    """
    async with scheduler.turn(key):
        try:
            return await anyio.to_thread.run_sync(blocking, *args, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            control.cancel()
            raise
        except EngineError:
            raise
        except Exception as exc:
            log.exception("%s failed", what)
            raise EngineError(f"{what} failed: {exc}") from exc

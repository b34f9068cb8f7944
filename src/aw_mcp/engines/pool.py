"""Several instances of one local engine serving many episodes (``--instances N``).

Each instance is a full model with its own KV cache, snapshots and fair queue. An episode is
routed to the instance that holds its KV state (its "home"): moving it would re-evaluate its
whole history there, which costs far more than waiting a turn. A new episode goes to the
instance with the least work (running plus queued requests), ties to the one with the fewest
episodes. Homes are remembered in an LRU as large as the episode store.

On a CPU the instances share the cores (give each ``threads / N``); the gain is that one
long generation no longer blocks every other episode. Every instance gets the same settings
(one device); placing instances on several GPUs is not done yet.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Sequence

import anyio

from aw_mcp.engines.base import (
    ChatMessage,
    Engine,
    GenerationControl,
    GenerationRequest,
    GenerationResult,
)
from aw_mcp.engines.counters import EngineCounters
from aw_mcp.errors import EngineError


class EnginePool:
    def __init__(self, instances: Sequence[Engine], max_homes: int = 100_000):
        if not instances:
            raise ValueError("an engine pool needs at least one instance")
        self.instances = list(instances)
        self.name = f"{self.instances[0].name} x{len(self.instances)}"
        self.max_homes = max_homes
        self._homes: OrderedDict[str, int] = OrderedDict()

    @property
    def context_window(self) -> int:
        return min(e.context_window for e in self.instances)

    @property
    def counters(self) -> EngineCounters:
        """All instances' counters added up."""
        return EngineCounters.total([e.counters for e in self.instances])

    @property
    def load(self) -> int:
        return sum(e.load for e in self.instances)

    async def start(self) -> None:
        async with anyio.create_task_group() as tg:
            for engine in self.instances:
                tg.start_soon(engine.start)

    async def count_tokens(self, messages: list[ChatMessage]) -> int:
        return await self.instances[0].count_tokens(messages)

    async def generate(
        self, request: GenerationRequest, control: GenerationControl | None = None
    ) -> GenerationResult:
        if request.warm_up:  # any instance may get a world's next new episode
            results: list[GenerationResult] = []
            failures: list[EngineError] = []

            async def warm(engine: Engine) -> None:
                try:
                    results.append(await engine.generate(request, control))
                except EngineError as exc:  # the others still warm up
                    failures.append(exc)

            async with anyio.create_task_group() as tg:
                for engine in self.instances:
                    tg.start_soon(warm, engine)
            if not results:
                raise failures[0]
            return results[0]
        return await self.instances[self.route(request.cache_key)].generate(request, control)

    def route(self, key: str | None) -> int:
        """The instance for ``key``: its home, or the least busy one for a new episode."""
        if key is not None and key in self._homes:
            self._homes.move_to_end(key)
            return self._homes[key]
        episodes = Counter(self._homes.values())
        index = min(
            range(len(self.instances)),
            key=lambda i: (self.instances[i].load, episodes[i], i),
        )
        if key is not None:
            self._homes[key] = index
            while len(self._homes) > self.max_homes:
                self._homes.popitem(last=False)
        return index

    def home_of(self, key: str) -> int | None:
        return self._homes.get(key)

    def forget(self, cache_key: str) -> None:
        """Drop the episode's home and its state on that instance (or on every instance,
        if no home is known: a home may have been pushed out of the LRU)."""
        home = self._homes.pop(cache_key, None)
        targets = self.instances if home is None else [self.instances[home]]
        for engine in targets:
            engine.forget(cache_key)

    async def aclose(self) -> None:
        for engine in self.instances:
            await engine.aclose()

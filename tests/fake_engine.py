"""FakeEngine: a stand-in engine for plumbing tests only (not a world model).

It answers from a function of the request and records every request it saw, so tests can
check what reached the prompt without paying for generation. Tests of real behaviour use the
embedded GGUF model instead (see conftest.py).
"""

from __future__ import annotations

from collections.abc import Callable

import anyio

from aw_mcp.engines.base import (
    ChatMessage,
    EngineError,
    GenerationControl,
    GenerationRequest,
    GenerationResult,
    GenerationStats,
)
from aw_mcp.engines.counters import EngineCounters


class FakeEngine:
    name = "fake"

    def __init__(
        self,
        reply: Callable[[GenerationRequest], str] | str = "ok",
        *,
        context_window: int = 4096,
        delay: float = 0.0,
        fail_with: str | None = None,
    ):
        self._reply = reply
        self._context_window = context_window
        self.delay = delay
        self.fail_with = fail_with
        self.requests: list[GenerationRequest] = []
        self.forgotten: list[str] = []  # every forget() call's key, in order
        self.counters = EngineCounters()
        self.started = False
        self.closed = False

    @property
    def context_window(self) -> int:
        return self._context_window

    async def start(self) -> None:
        self.started = True

    async def count_tokens(self, messages: list[ChatMessage]) -> int:
        # About four characters a token, like common BPE vocabularies on English text.
        return sum(len(m.content) // 4 + 4 for m in messages)

    async def generate(
        self, request: GenerationRequest, control: GenerationControl | None = None
    ) -> GenerationResult:
        self.requests.append(request)
        if self.delay:
            await anyio.sleep(self.delay)
        if self.fail_with:
            raise EngineError(self.fail_with)
        text = self._reply(request) if callable(self._reply) else self._reply
        stats = GenerationStats(completion_tokens=1)
        self.counters.add_generation(stats)
        return GenerationResult(text=text, finish_reason="stop", stats=stats)

    @property
    def load(self) -> int:
        return 0

    def forget(self, cache_key: str) -> None:
        self.forgotten.append(cache_key)

    async def aclose(self) -> None:
        self.closed = True

    @property
    def last_prompt(self) -> str:
        return "\n".join(m.content for m in self.requests[-1].messages)

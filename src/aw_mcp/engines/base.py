"""The engine seam: chat messages in, text out. Every backend implements ``Engine``.

An engine knows nothing of MCP, tools or faults. It receives the messages an episode built,
renders them with its model's own chat format, and generates. Engines that keep state between
calls (the KV cache) key it by ``GenerationRequest.cache_key`` so one episode's history is
evaluated once, not on every step.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field, model_validator

from aw_mcp.engines.counters import GenerationStats
from aw_mcp.engines.loop_guard import LoopGuardSettings
from aw_mcp.engines.text_grammars import TextGrammar

if TYPE_CHECKING:
    from aw_mcp.engines.counters import EngineCounters

Role = Literal["system", "user", "assistant"]


def default_inference_threads() -> int:
    """Every core but one. The event loop (HTTP, progress) needs a core now and then, and
    OpenMP inference threads spin-wait for each other: one descheduled thread slows the
    rest several-fold (measured in benchmarks/concurrency.py)."""
    return max(1, (os.cpu_count() or 1) - 1)


class ChatMessage(BaseModel):
    role: Role
    content: str


class GenerationRequest(BaseModel):
    messages: list[ChatMessage]
    max_tokens: int = Field(default=256, ge=1)
    temperature: float = Field(default=0.0, ge=0.0)
    stop: list[str] = Field(default_factory=list)
    seed: int | None = None
    json_schema: dict[str, Any] | None = Field(
        default=None, description="Constrain the output to JSON valid against this schema."
    )
    grammar: TextGrammar | None = Field(
        default=None, description="Constrain the output to text of this grammar."
    )
    loop_guard: LoopGuardSettings | None = Field(
        default=None, description="A loop-guard rule beside the default one (a domain's)."
    )
    cache_key: str | None = Field(
        default=None, description="Whose KV state this continues (one per episode)."
    )
    warm_up: bool = Field(
        default=False,
        description="Only evaluates a prompt prefix new episodes will start with (a world's "
        "instructions, tools, facts and demonstrations), kept under cache_key for them to "
        "copy: a pool of instances runs it on every instance.",
    )

    @model_validator(mode="after")
    def _one_constraint(self) -> GenerationRequest:
        if self.json_schema is not None and self.grammar is not None:
            raise ValueError("a request is constrained by a json_schema or a grammar, not both")
        return self


FinishReason = Literal["stop", "length", "cancelled"]


class GenerationResult(BaseModel):
    text: str
    finish_reason: FinishReason
    stats: GenerationStats = Field(default_factory=GenerationStats)


@dataclass
class GenerationControl:
    """Shared between the event loop and the worker thread running one generation."""

    cancelled: threading.Event = field(default_factory=threading.Event)
    on_token: Callable[[int], None] | None = None  # called with the count of tokens so far

    def cancel(self) -> None:
        self.cancelled.set()


@runtime_checkable
class Engine(Protocol):
    """A text generator. Implementations must be safe to call from many tasks at once.

    Everything a caller (the simulator, ``EnginePool``, benchmarks) reads is declared here;
    nothing outside this protocol is reached for with ``getattr``.

    Lifetime: ``start()`` once (it may be slow: it loads a model; calls wait for it),
    ``aclose()`` once at shutdown (frees the model, pools and HTTP clients; idempotent).
    """

    name: str

    @property
    def context_window(self) -> int:
        """How many tokens a prompt plus its completion may hold."""
        ...

    @property
    def counters(self) -> EngineCounters:
        """Totals since start (generations, tokens, KV snapshot saves/restores/evictions)."""
        ...

    @property
    def load(self) -> int:
        """Requests running or waiting here now (a pool sends new episodes to the lowest)."""
        ...

    async def start(self) -> None:
        """Load the model (idempotent). Called in the background at server start."""
        ...

    async def count_tokens(self, messages: list[ChatMessage]) -> int:
        """Tokens the rendered prompt takes (used to keep histories inside the window)."""
        ...

    async def generate(
        self, request: GenerationRequest, control: GenerationControl | None = None
    ) -> GenerationResult:
        """Generate a completion. Cancelling the awaiting task stops generation promptly."""
        ...

    def forget(self, cache_key: str) -> None:
        """Drop every piece of state kept for ``cache_key`` (an episode that ended or was
        evicted): KV snapshots, routing entries. A later request with that key starts cold.

        Synchronous and non-blocking on purpose: it is called from the episode store's
        eviction, which is plain code on the event loop. It only drops bookkeeping under a
        short lock, never waits for a generation in progress; a generation running for the
        key when it is forgotten does not keep its state afterwards. Unknown keys are fine.
        """
        ...

    async def aclose(self) -> None:
        """Free the model / connections. Idempotent; the engine is not used afterwards."""
        ...

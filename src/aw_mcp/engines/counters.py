"""What generations cost: one generation's ``GenerationStats``, and the ``EngineCounters`` an
engine keeps since start (what tests and benchmarks read to see KV reuse)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from pydantic import BaseModel, Field


class GenerationStats(BaseModel):
    """What one generation cost, by the engine's own counters."""

    prompt_tokens: int = 0
    reused_prompt_tokens: int = Field(
        default=0, description="Prompt tokens whose KV state was already in the cache."
    )
    evaluated_prompt_tokens: int = Field(default=0, description="Prompt tokens actually run.")
    completion_tokens: int = 0
    restored_snapshot: bool = Field(
        default=False, description="The episode's KV state was restored from a snapshot."
    )
    seconds: float = 0.0


@dataclass
class EngineCounters:
    """Totals since start, for tests and benchmarks."""

    generations: int = 0
    prompt_tokens: int = 0
    evaluated_prompt_tokens: int = 0
    reused_prompt_tokens: int = 0
    completion_tokens: int = 0
    snapshot_saves: int = 0
    snapshot_restores: int = 0
    snapshot_evictions: int = 0
    extra: dict[str, int] = field(default_factory=dict)

    def add_generation(self, stats: GenerationStats) -> None:
        self.generations += 1
        self.prompt_tokens += stats.prompt_tokens
        self.evaluated_prompt_tokens += stats.evaluated_prompt_tokens
        self.reused_prompt_tokens += stats.reused_prompt_tokens
        self.completion_tokens += stats.completion_tokens

    def add_extra(self, **counts: int) -> None:
        """Add to counters of one engine's own (``extra``: grammar steps, drafts, ...)."""
        for name, value in counts.items():
            self.extra[name] = self.extra.get(name, 0) + value

    @classmethod
    def total(cls, parts: list[EngineCounters]) -> EngineCounters:
        """The sum of several instances' counters (an engine pool reports one total)."""
        result = cls()
        for part in parts:
            for f in fields(cls):
                if f.name == "extra":
                    result.add_extra(**part.extra)
                else:
                    setattr(result, f.name, getattr(result, f.name) + getattr(part, f.name))
        return result

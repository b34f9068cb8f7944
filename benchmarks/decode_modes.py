"""Shared by the decoding benchmarks: each mode's best decode speed over interleaved rounds."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

from aw_mcp.engines.base import GenerationResult


async def best_of_rounds(
    modes: Iterable[str], rounds: int, generate: Callable[[str], Awaitable[GenerationResult]]
) -> tuple[dict[str, float], dict[str, str]]:
    """Each mode's best decode tokens/s over ``rounds`` rounds, every round running every mode
    in turn (so load changes hit all alike; other work only ever slows a run down), and its
    last text."""
    modes = list(modes)
    best = dict.fromkeys(modes, 0.0)
    texts: dict[str, str] = {}
    for _ in range(rounds):
        for mode in modes:
            result = await generate(mode)
            seconds = result.stats.seconds
            speed = result.stats.completion_tokens / seconds if seconds > 0 else 0.0
            best[mode] = max(best[mode], speed)
            texts[mode] = result.text
    return best, texts

"""How each request to the world model samples: its temperature and a reproducible seed.

The first attempt at an answer uses the domain's temperature (0, greedy, for the bundled
domains). A retry of an answer that broke the tool's outputSchema samples at
``retry_temperature`` so it does not repeat the same output. Every request's seed is a hash of
(``sampling_seed``, episode id, domain, call index, attempt): the same settings and the same
episode give the same seeds on every run, however episodes interleave, and two episodes that
send the same prompt do not get the same "random" answer.
"""

from __future__ import annotations

from pydantic import Field

from aw_mcp.draws import Draws
from aw_mcp.sections import EPISODES, Section, flag

SEED_BITS = 31  # every engine takes it: llama.cpp's uint32, torch's int64, OpenAI's int


class SamplingSettings(Section):
    """How the world model samples: a section of the serve settings."""

    sampling_seed: int = Field(
        default=0,
        description="base seed of the world model's sampling; each request's seed is derived "
        "from it, the episode id, the call index and the attempt, so the same seed replays "
        "the same episodes and episodes sending the same prompt still sample differently",
        json_schema_extra=flag(EPISODES),
    )

    retry_temperature: float = Field(
        default=0.7,
        ge=0.0,
        le=2.0,
        description="temperature of the retries of an answer that broke its tool's "
        "outputSchema (the first attempt uses the domain's temperature)",
        json_schema_extra=flag(EPISODES),
    )

    def temperature_for(self, domain_temperature: float, attempt: int) -> float:
        return domain_temperature if attempt == 0 else self.retry_temperature

    def seed_for(self, episode_id: str, domain: str, call_index: int, attempt: int) -> int:
        draws = Draws(self.sampling_seed, episode_id, domain, call_index, attempt)
        return draws.integer("seed") % (1 << SEED_BITS)

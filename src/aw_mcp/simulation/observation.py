"""Ask the engine for an observation; for a tool with an outputSchema, make sure it fits.

The engines constrain decoding to the schema where they can, but a small model can still run
out of tokens or an OpenAI-compatible server can ignore the constraint. An answer that breaks
the schema is retried (``retries`` times) with a fresh sample, then reported as an engine
error: the SDK client would reject structured content that breaks the tool's outputSchema.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from aw_mcp.domain.answers import ToolAnswer
from aw_mcp.domain.catalogue import ServedTool
from aw_mcp.engines.base import ChatMessage, Engine, GenerationRequest
from aw_mcp.engines.counters import GenerationStats
from aw_mcp.episode.episode import Episode
from aw_mcp.episode.prompt import PromptProfile
from aw_mcp.errors import EngineError
from aw_mcp.json_schemas import schema_errors
from aw_mcp.simulation.answer_shapes import AnswerShapes
from aw_mcp.simulation.progress import ProgressCallback, generate_with_progress
from aw_mcp.simulation.sampling import SamplingSettings
from aw_mcp.simulation.state_keeping import read_step
from aw_mcp.state.steps import StepState
from aw_mcp.state.world import WorldState

log = logging.getLogger(__name__)


class ObservationGenerator:
    def __init__(
        self,
        engine: Engine,
        profile: PromptProfile,
        retries: int = 2,
        sampling: SamplingSettings | None = None,
        shapes: AnswerShapes | None = None,
    ):
        self.engine = engine
        self.profile = profile
        self.retries = retries
        self.sampling = sampling or SamplingSettings()
        # a model keeping state writes its blocks before the answer, which no shape allows
        self.shapes = None if profile.keeps_state else shapes

    async def generate(
        self,
        episode: Episode,
        served: ServedTool,
        messages: list[ChatMessage],
        max_tokens: int,
        progress: ProgressCallback | None = None,
    ) -> tuple[ToolAnswer, GenerationStats]:
        answer, stats, _ = await self.generate_step(episode, served, messages, max_tokens, progress)
        return answer, stats

    async def generate_step(
        self,
        episode: Episode,
        served: ServedTool,
        messages: list[ChatMessage],
        max_tokens: int,
        progress: ProgressCallback | None = None,
        state: WorldState | None = None,
    ) -> tuple[ToolAnswer, GenerationStats, StepState | None]:
        """:meth:`generate`; with a profile that keeps state, the blocks the model wrote
        before the observation are read against ``state`` (None: the world keeps none) and
        taken off the answer."""
        domain, spec = served.domain, served.spec
        schema = spec.model_output_schema
        # A world condition (a read-only disk, a site that is down) may change the answer's
        # form: the grammar describes the answer of a world without one.
        grammar = None
        if not episode.active_conditions():
            grammar = spec.simulation.answer_grammar
            if grammar is None and self.shapes is not None:  # none for a tool with a schema
                grammar = self.shapes.grammar(spec, episode.turns, max_tokens)
        attempts = 1 + (self.retries if schema else 0)
        last_problem = ""
        for attempt in range(attempts):
            request = GenerationRequest(
                messages=messages,
                max_tokens=max_tokens,
                temperature=self.sampling.temperature_for(domain.generation.temperature, attempt),
                stop=domain.generation.stop,
                json_schema=schema,
                grammar=grammar,
                loop_guard=domain.generation.loop_guard,
                cache_key=episode.key,
                seed=self.sampling.seed_for(
                    episode.episode_id, episode.domain, episode.next_index, attempt
                ),
            )
            result = await generate_with_progress(self.engine, request, progress)
            text = self.profile.extract_observation(result.text)
            step = None
            if self.profile.keeps_state:
                read = read_step(text, state)
                text, step = read.answer.strip("\n"), read.step
            if schema is None:
                answer = ToolAnswer(text=text, structured=spec.structured_answer(text))
                return answer, result.stats, step
            value, last_problem = parse_structured(text, schema)
            if value is not None:
                structured = spec.structured_around(value)
                answer = ToolAnswer(text=spec.answer_text(structured), structured=structured)
                return answer, result.stats, step
            log.warning(
                "output of %s broke its outputSchema (attempt %d/%d): %s",
                served.public_name,
                attempt + 1,
                attempts,
                last_problem,
            )
        raise EngineError(
            f"the model's answer did not match the tool's outputSchema after {attempts} "
            f"attempts ({last_problem})"
        )


def parse_structured(text: str, schema: dict[str, Any]) -> tuple[Any | None, str]:
    """Parse and validate model output against an outputSchema: (value, "") or (None, why)."""
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    candidate = text[min(starts) :] if starts else text.strip()
    try:
        value, _ = json.JSONDecoder().raw_decode(candidate)
    except json.JSONDecodeError as exc:
        return None, f"not JSON: {exc.msg} at char {exc.pos}"
    problems = schema_errors(schema, value)
    if problems:
        return None, problems[0]
    return value, ""

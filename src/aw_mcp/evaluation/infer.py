"""Teacher-forced inference: each sample's real history, the model predicts one turn.

Reads AgentWorldBench ``*_test.jsonl`` and writes ``predictions.jsonl``: every input sample
with ``gen`` (the raw model output) added, as the reference harness does, plus ``reference``,
``domain`` and ``family`` (the harness reads fields by key, so extra ones do no harm). A sample
whose generation failed gets ``gen: ""`` and an ``error``, and is retried on the next run.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from aw_mcp.engines.base import Engine, GenerationRequest
from aw_mcp.errors import EngineError, UserInputError
from aw_mcp.evaluation.predictions import PREDICTIONS_FILE, PredictionsFile
from aw_mcp.evaluation.runner import run_bounded
from aw_mcp.evaluation.samples import BenchSample

log = logging.getLogger(__name__)


@dataclass
class InferOptions:
    max_tokens: int = 1024
    temperature: float = 0.0
    jobs: int = 4
    quiet: bool = False


async def predict(engine: Engine, sample: BenchSample, options: InferOptions) -> dict:
    """The prediction row of one sample (``error`` set when the engine failed)."""
    row = sample.model_dump()
    row.update(reference=sample.reference(), domain=sample.domain, family=sample.family())
    messages = sample.messages()
    try:
        prompt_tokens = await engine.count_tokens(messages)
        budget = engine.context_window - options.max_tokens
        if prompt_tokens > budget:
            raise EngineError(
                f"the prompt needs {prompt_tokens} tokens but the context window leaves "
                f"{budget} (raise --n-ctx or lower --max-tokens)"
            )
        result = await engine.generate(
            GenerationRequest(
                messages=messages,
                max_tokens=options.max_tokens,
                temperature=options.temperature,
                cache_key=sample.episode_key,
            )
        )
        row.update(gen=result.text)
        row.pop("error", None)
    except EngineError as exc:
        log.warning("no prediction for %s: %s", sample.key, exc)
        row.update(gen="", error=str(exc))
    return row


async def infer(
    engine: Engine, samples: list[BenchSample], output_dir: Path, options: InferOptions
) -> PredictionsFile:
    """Predict every sample not already done in ``output_dir/predictions.jsonl``."""
    predictions = PredictionsFile(output_dir / PREDICTIONS_FILE)
    keys = [s.key for s in samples]
    if len(set(keys)) != len(keys):
        duplicate = next(k for k in keys if keys.count(k) > 1)
        raise UserInputError(f"sample {duplicate!r} appears twice in the data")
    todo = [s for s in samples if not predictions.done(s.key)]
    if len(todo) < len(samples):
        log.info(
            "resuming: %d of %d samples already predicted", len(samples) - len(todo), len(samples)
        )
    await engine.start()

    async def work(sample: BenchSample) -> int:
        predictions.append([await predict(engine, sample, options)])
        return 1

    await run_bounded(
        todo, work, jobs=options.jobs, total=len(todo), description="infer", quiet=options.quiet
    )
    predictions.compact(keys)
    return predictions

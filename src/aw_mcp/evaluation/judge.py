"""The LLM judge: a model behind an OpenAI-compatible API rates a prediction against the real
observation on five dimensions, as AgentWorldBench does.

Each dimension is scored 1-5 (0: the judge found it not applicable). The answer is JSON inside
``<final_evaluation>`` tags: ``{"strengths": [...], "weaknesses": [...], "scores": {...}}``.
A sample's total is the mean of its non-zero dimensions; reports show ``(raw - 1) / 4 * 100``.
The prompt text is this project's own.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

from aw_mcp.engines.base import ChatMessage, Engine, GenerationRequest
from aw_mcp.engines.reasoning import strip_reasoning
from aw_mcp.errors import EngineError
from aw_mcp.evaluation.samples import BenchSample

log = logging.getLogger(__name__)

DIMENSIONS = ("format", "factuality", "consistency", "realism", "quality")
VERDICT_TAG = "final_evaluation"
_VERDICT_BLOCK = re.compile(rf"<{VERDICT_TAG}>(.*?)</{VERDICT_TAG}>", flags=re.S)
_FENCE = re.compile(r"\A```(?:json)?\s*(.*?)\s*```\Z", flags=re.S)

JUDGE_SYSTEM_PROMPT = f"""\
You grade a world model: a model that stands in for a real environment (a shell, a search
engine, an app, an API) and predicts what that environment returns after an agent's action.
You get the earlier turns of the episode, the current action, the model's predicted
observation and the observation the real environment actually returned. Compare them.

Rate five dimensions from 1 (poor) to 5 (indistinguishable from the real one):
- format: the prediction has the structure of the real output (layout, fields, JSON shape,
  error-message style, exit-code line where the real one has it).
- factuality: the facts it states (values, names, counts, success or failure) match the real
  observation.
- consistency: it agrees with what earlier turns established (files, state, identifiers).
- realism: a careful person could take it for real output of this environment.
- quality: overall usefulness as a stand-in for the real observation for an agent's next step.
Use 0 only for a dimension that cannot apply to this turn (e.g. consistency at the first
turn with nothing to be consistent with). Judge against the real observation, not against
what you would expect; small differences in volatile details (timestamps, ids) matter less
than wrong outcomes.

Answer with your reasoning first if you like, then exactly one block:
<{VERDICT_TAG}>
{{"strengths": ["..."], "weaknesses": ["..."], "scores": {{"format": 1-5, "factuality": 1-5,
"consistency": 1-5, "realism": 1-5, "quality": 1-5}}}}
</{VERDICT_TAG}>"""


class VerdictError(EngineError):
    """The judge's answer holds no usable verdict."""


@dataclass
class Verdict:
    scores: dict[str, int]
    strengths: list[str] = field(default_factory=list)
    weaknesses: list[str] = field(default_factory=list)

    @property
    def total(self) -> float:
        """Mean of the non-zero dimensions (1-5)."""
        rated = [v for v in self.scores.values() if v]
        return sum(rated) / len(rated)


def normalized(raw: float) -> float:
    """A 1-5 score on the 0-100 scale AgentWorldBench reports."""
    return (raw - 1) / 4 * 100


def parse_verdict(output: str) -> Verdict:
    """The verdict in a judge's answer: the last ``<final_evaluation>`` block's JSON."""
    blocks = _VERDICT_BLOCK.findall(strip_reasoning(output)) or _VERDICT_BLOCK.findall(output)
    if not blocks:
        raise VerdictError(f"no <{VERDICT_TAG}> block in the judge's answer")
    body = blocks[-1].strip()
    if fenced := _FENCE.match(body):
        body = fenced.group(1)
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise VerdictError(f"the verdict is not JSON: {exc.msg}") from None
    if not isinstance(data, dict) or not isinstance(data.get("scores"), dict):
        raise VerdictError("the verdict has no 'scores' object")
    scores: dict[str, int] = {}
    for name in DIMENSIONS:
        value = data["scores"].get(name, 0)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 5:
            raise VerdictError(f"score {name!r} is {value!r}, not a number from 0 to 5")
        scores[name] = int(value)
    if not any(scores.values()):
        raise VerdictError("every score is 0")
    return Verdict(
        scores=scores,
        strengths=[str(s) for s in data.get("strengths") or []],
        weaknesses=[str(s) for s in data.get("weaknesses") or []],
    )


def judge_messages(sample: BenchSample, prediction: str) -> list[ChatMessage]:
    history = "".join(
        f"{action}\n{observation}\n\n"
        for action, observation in list(zip(sample.prompt, sample.response, strict=False))[
            : sample.turn_idx - 1
        ]
    )
    parts = []
    if history:
        parts.append(f"# Earlier turns\n\n{history.strip()}")
    parts.append(f"# Current action\n\n{sample.action_message()}")
    parts.append(f"# Predicted observation (the world model)\n```\n{prediction}\n```")
    parts.append(f"# Real observation\n```\n{sample.reference()}\n```")
    return [
        ChatMessage(role="system", content=JUDGE_SYSTEM_PROMPT),
        ChatMessage(role="user", content="\n\n".join(parts)),
    ]


class Judge:
    """Rates predictions with ``engine`` (an OpenAI-compatible engine in practice)."""

    def __init__(
        self,
        engine: Engine,
        max_tokens: int = 4096,
        temperature: float = 0.0,
        attempts: int = 3,
    ):
        self.engine = engine
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.attempts = attempts

    async def rate(self, sample: BenchSample, prediction: str) -> Verdict | None:
        """The verdict, or None when the judge failed ``attempts`` times (logged)."""
        messages = judge_messages(sample, prediction)
        problem = ""
        for attempt in range(self.attempts):
            request = GenerationRequest(
                messages=messages,
                max_tokens=self.max_tokens,
                temperature=self.temperature,
                seed=attempt,
            )
            try:
                result = await self.engine.generate(request)
                return parse_verdict(result.text)
            except (EngineError, VerdictError) as exc:
                problem = str(exc)
        log.warning("judge gave no verdict for %s: %s", sample.key, problem)
        return None


def write_judged(
    path: Path, samples: list[BenchSample], verdicts: dict[str, Verdict | None]
) -> None:
    """Each judged sample with its verdict, in the reference harness's judged.jsonl fields."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for sample in samples:
            if sample.key not in verdicts:
                continue
            row = sample.model_dump()
            verdict = verdicts[sample.key]
            if verdict is None:
                row.update(total_score=0, failed=1.0, error_message="Judge scoring failed")
            else:
                row.update(
                    total_score=verdict.total,
                    failed=0.0,
                    strengths=verdict.strengths,
                    weaknesses=verdict.weaknesses,
                    **verdict.scores,
                )
            row["extracted_output"] = sample.prediction()
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")

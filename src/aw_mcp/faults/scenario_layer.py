"""ScenarioFaultLayer: the fault layer driven by scenario files.

Determinism: every random choice (does a rule fire, how long a latency, which characters get
garbled) is a hash of (scenario seed, scenario name, rule id, episode, domain, call index,
purpose), never a draw from a shared random stream. The same scenario and the same calls in an
episode therefore give the same faults, however many other episodes run at the same time and
in whatever order their calls interleave.

State: per episode run (``CallContext.state_key``), how many calls each rule has matched and
how many times it fired. The episode store owns episodes: it calls ``episode_ended`` when one
ends or is evicted, and the counts go with it, so a new episode of the same id counts from 1.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aw_mcp.domain.answers import ToolAnswer
from aw_mcp.draws import Draws
from aw_mcp.episode.episode import WorldCondition
from aw_mcp.errors import UserInputError
from aw_mcp.faults.layer import CallContext, FaultDecision, FiredFault, JsonRpcFault
from aw_mcp.faults.mislead import mislead_conditions, wrongness_text
from aw_mcp.faults.output import damage
from aw_mcp.faults.presets import error_text, gateway_timeout_text
from aw_mcp.faults.scenario import (
    OUTPUT_KINDS,
    ArgumentCondition,
    ErrorEffect,
    HangEffect,
    JsonRpcErrorEffect,
    LatencyEffect,
    Match,
    MisleadEffect,
    ResultEffect,
    Rule,
    Scenario,
    WorldEffect,
)

log = logging.getLogger(__name__)

RuleKey = tuple[str, str]  # (scenario name, rule id)


def draw_latency(effect: LatencyEffect, draws: Draws) -> float:
    u = draws.uniform("latency")
    if effect.distribution == "fixed":
        seconds = effect.seconds or 0.0
    elif effect.distribution == "uniform":
        seconds = effect.low + (effect.high - effect.low) * u  # type: ignore[operator]
    elif effect.distribution == "exponential":
        seconds = -(effect.mean or 0.0) * math.log1p(-u)
    else:  # normal, by Box-Muller from two independent draws
        z = math.sqrt(-2 * math.log1p(-u)) * math.cos(2 * math.pi * draws.uniform("latency-2"))
        seconds = (effect.mean or 0.0) + (effect.stddev or 0.0) * z
    return min(max(seconds, 0.0), effect.max_seconds)


def _argument_holds(condition: ArgumentCondition, arguments: dict[str, Any], name: str) -> bool:
    if condition.present is not None:
        return (name in arguments) == condition.present
    if name not in arguments:
        return False
    value = arguments[name]
    if condition.regex is not None:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        return re.search(condition.regex, text) is not None
    return value == condition.equals


def matches(match: Match, call: CallContext) -> bool:
    return match.covers_tool(call.domain, call.tool) and all(
        _argument_holds(cond, call.arguments, name) for name, cond in match.arguments.items()
    )


@dataclass
class _EpisodeCounts:
    matched: Counter[RuleKey] = field(default_factory=Counter)
    fired: Counter[RuleKey] = field(default_factory=Counter)


class ScenarioFaultLayer:
    def __init__(self, scenarios: Sequence[Scenario]):
        names = [s.name for s in scenarios]
        if duplicated := sorted({n for n in names if names.count(n) > 1}):
            raise UserInputError(f"fault scenario names must differ; loaded twice: {duplicated}")
        self.scenarios = list(scenarios)
        self._episodes: dict[str, _EpisodeCounts] = {}

    def decide(self, call: CallContext) -> FaultDecision:
        counts = self._episodes.setdefault(call.state_key, _EpisodeCounts())
        decision = FaultDecision()
        output_decided = False  # only one rule per call may replace or damage the answer
        for scenario in self.scenarios:
            for rule in scenario.rules:
                if not matches(rule.match, call):
                    continue
                key = (scenario.name, rule.id)
                counts.matched[key] += 1
                n = counts.matched[key] if rule.when.count == "matching" else call.call_index
                if not rule.when.admits(n):
                    continue
                if rule.max_fires is not None and counts.fired[key] >= rule.max_fires:
                    continue
                if rule.decides_output and output_decided:
                    continue
                draws = Draws(
                    scenario.seed,
                    scenario.name,
                    rule.id,
                    call.episode_id,
                    call.domain,
                    call.call_index,
                )
                if rule.probability < 1 and draws.uniform("fire") >= rule.probability:
                    continue
                counts.fired[key] += 1
                output_decided = output_decided or rule.decides_output
                self._fire(scenario, rule, call, draws, decision)
        return decision

    def rules_matching_no_tool(self, tools: Iterable[tuple[str, str]]) -> list[str]:
        """``scenario/rule`` of rules whose match filter names no (domain, tool) served."""
        tools = list(tools)
        return [
            f"{scenario.name}/{rule.id}"
            for scenario in self.scenarios
            for rule in scenario.rules
            if not any(rule.match.covers_tool(domain, tool) for domain, tool in tools)
        ]

    def episode_ended(self, episode_key: str) -> None:
        self._episodes.pop(episode_key, None)

    def tracked_episodes(self) -> int:
        """How many episode runs have counts kept (bounded by the episode store)."""
        return len(self._episodes)

    def _fire(
        self,
        scenario: Scenario,
        rule: Rule,
        call: CallContext,
        draws: Draws,
        decision: FaultDecision,
    ) -> None:
        for position, effect in enumerate(rule.effects):
            detail: dict[str, Any] = {}
            if isinstance(effect, ErrorEffect):
                text = error_text(effect, call.tool, call.arguments)
                decision.answer = ToolAnswer(text=text, is_error=True)
                detail = {"preset": effect.preset} if effect.preset else {}
            elif isinstance(effect, ResultEffect):
                decision.answer = ToolAnswer(
                    text=effect.summary(), content=effect.content, is_error=effect.is_error
                )
                detail = {"blocks": [block["type"] for block in effect.content]}
            elif isinstance(effect, JsonRpcErrorEffect):
                decision.rpc_error = JsonRpcFault(effect.code, effect.message, effect.data)
                detail = {"code": effect.code}
            elif isinstance(effect, LatencyEffect):
                seconds = draw_latency(effect, draws)
                decision.delay_seconds += seconds
                detail = {"seconds": round(seconds, 4)}
            elif isinstance(effect, HangEffect):
                if effect.seconds is None:
                    decision.hang = True
                else:  # a gateway that gives up: wait, then 504
                    decision.delay_seconds += effect.seconds
                    decision.answer = ToolAnswer(text=gateway_timeout_text(), is_error=True)
                    detail = {"seconds": effect.seconds}
            elif isinstance(effect, WorldEffect):
                decision.conditions.append(
                    WorldCondition(
                        text=effect.condition,
                        source=f"fault:{scenario.name}/{rule.id}",
                        since_call=call.call_index,
                        until_call=(
                            None if effect.calls is None else call.call_index + effect.calls - 1
                        ),
                    )
                )
                detail = {"condition": effect.condition, "calls": effect.calls}
            elif isinstance(effect, MisleadEffect):
                source = f"fault:{scenario.name}/{rule.id}"
                decision.conditions += mislead_conditions(effect, source, call.call_index)
                detail = {
                    "wrongness": effect.wrongness,
                    "instruction": wrongness_text(effect),
                    "sticky": effect.sticky,
                }
            elif effect.kind in OUTPUT_KINDS:
                detail = effect.model_dump(exclude={"kind"}, exclude_none=True)
                decision.transforms.append(
                    functools.partial(
                        damage,
                        effect=effect,
                        output_schema=call.output_schema,
                        answer_text=call.answer_text,
                        seed=draws.integer(f"output-{position}"),
                    )
                )
            decision.fired.append(FiredFault(scenario.name, rule.id, effect.kind, detail))

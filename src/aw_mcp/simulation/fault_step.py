"""The fault layer's part of a call: decide before the world model runs, act on the decision
(delay, JSON-RPC error, hang), and damage the answer afterwards.

A broken rule or output fault is logged and skipped: it must not take the call down with it.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio

from aw_mcp.domain.answers import ToolAnswer
from aw_mcp.domain.catalogue import ServedTool
from aw_mcp.episode.episode import Episode
from aw_mcp.faults.layer import CallContext, FaultDecision, FaultLayer, JsonRpcFault

log = logging.getLogger(__name__)


class RpcFaultError(Exception):
    """A fault rule asked for a JSON-RPC error instead of a result."""

    def __init__(self, fault: JsonRpcFault):
        super().__init__(fault.message)
        self.fault = fault


class FaultStep:
    def __init__(self, layer: FaultLayer):
        self.layer = layer

    def decide(
        self, episode: Episode, served: ServedTool, arguments: dict[str, Any]
    ) -> FaultDecision:
        """The faults of the episode's next call; the conditions it adds join the episode."""
        call = CallContext(
            episode.episode_id,
            served.domain.name,
            served.public_name,
            arguments,
            episode.next_index,
            served.spec.output_schema,
            episode.key,
            served.spec.answer_text,
        )
        try:
            decision = self.layer.decide(call)
        except Exception:
            log.exception("the fault layer failed on %s; answering without faults", call)
            return FaultDecision()
        for fault in decision.fired:
            log.info(
                "fault fired: episode=%r call=%d tool=%s scenario=%s rule=%s effect=%s",
                episode.episode_id,
                call.call_index,
                served.public_name,
                fault.scenario,
                fault.rule,
                fault.effect,
            )
        for condition in decision.conditions:
            episode.add_condition(condition)
        return decision

    @staticmethod
    async def act(decision: FaultDecision) -> None:
        """Wait, fail or hang as the decision says, before anything answers the call."""
        if decision.delay_seconds > 0:
            await anyio.sleep(decision.delay_seconds)
        if decision.rpc_error is not None:
            raise RpcFaultError(decision.rpc_error)
        if decision.hang:
            await anyio.sleep_forever()

    @staticmethod
    def damage(decision: FaultDecision, answer: ToolAnswer, tool: str) -> ToolAnswer:
        for transform in decision.transforms:
            try:
                answer = transform(answer)
            except Exception:
                log.exception("an output fault failed on %s; answer left as is", tool)
        return answer

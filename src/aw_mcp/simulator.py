"""One tool call, from validated arguments to an answer: faults -> episode -> engine -> record.

The MCP server calls ``WorldSimulator.call``; nothing here knows about MCP. Every call, however
it ends (model answer, fault, replay, engine failure, cancellation), is appended to its
episode's record.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from aw_mcp.answers import ToolAnswer
from aw_mcp.catalogue import Catalogue, ServedTool
from aw_mcp.domain.models import ToolCall
from aw_mcp.engines.base import (
    Engine,
    EngineError,
    GenerationControl,
    GenerationRequest,
    GenerationStats,
)
from aw_mcp.episode.episode import CallRecord, Episode, ObservationSource, Turn
from aw_mcp.episode.prompt import PromptProfile, build_messages
from aw_mcp.episode.store import EpisodeStore
from aw_mcp.faults.layer import CallContext, FaultDecision, FaultLayer, JsonRpcFault, NoFaults
from aw_mcp.json_schemas import schema_errors

if TYPE_CHECKING:
    from aw_mcp.grounding import GroundingIndex

log = logging.getLogger(__name__)

# Progress is reported to the client at most this often while the model generates.
PROGRESS_INTERVAL_S = 0.5
# After trimming an overflowing history, aim this far under the budget so the next steps keep
# a stable prompt prefix (and their KV cache) instead of trimming again at every step.
TRIM_TARGET = 0.7

ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None]]


class RpcFaultError(Exception):
    """A fault rule asked for a JSON-RPC error instead of a result."""

    def __init__(self, fault: JsonRpcFault):
        super().__init__(fault.message)
        self.fault = fault


class PromptTooLongError(EngineError):
    pass


@dataclass
class SimulatorSettings:
    structured_retries: int = 2  # extra attempts when output breaks the tool's outputSchema
    replay_read_only: bool = True  # repeat a read-only observation if nothing changed since


class WorldSimulator:
    def __init__(
        self,
        catalogue: Catalogue,
        engine: Engine,
        episodes: EpisodeStore | None = None,
        faults: FaultLayer | None = None,
        profile: PromptProfile | None = None,
        settings: SimulatorSettings | None = None,
        grounding: GroundingIndex | None = None,
    ):
        self.catalogue = catalogue
        self.engine = engine
        self.episodes = episodes or EpisodeStore()
        self.faults = faults or NoFaults()
        self.profile = profile or PromptProfile()
        self.settings = settings or SimulatorSettings()
        self.grounding = grounding  # real transitions shown as examples (--grounding)

    async def call(
        self,
        episode_id: str,
        served: ServedTool,
        arguments: dict[str, Any],
        progress: ProgressCallback | None = None,
    ) -> ToolAnswer:
        episode = self.episodes.get(episode_id, served.domain.name)
        async with episode.lock:
            return await self._call_locked(episode, served, arguments, progress)

    async def reject(
        self, episode_id: str, served: ServedTool, arguments: Any, message: str
    ) -> None:
        """Record a call refused before simulation (invalid arguments), in arrival order."""
        episode = self.episodes.get(episode_id, served.domain.name)
        async with episode.lock:
            self._record(
                episode,
                served,
                arguments if isinstance(arguments, dict) else {"_raw": arguments},
                ToolAnswer(text=message, is_error=True),
                "invalid-arguments",
                time.time(),
            )

    async def _call_locked(
        self,
        episode: Episode,
        served: ServedTool,
        arguments: dict[str, Any],
        progress: ProgressCallback | None,
    ) -> ToolAnswer:
        started = time.time()
        index = episode.next_index
        decision = self._decide_faults(episode, served, arguments, index)
        for condition in decision.conditions:
            episode.add_condition(condition)
        fired = [f.as_record() for f in decision.fired]
        source: ObservationSource = "model"
        stats: GenerationStats | None = None
        try:
            if decision.delay_seconds > 0:
                await anyio.sleep(decision.delay_seconds)
            if decision.rpc_error is not None:
                self._record(
                    episode,
                    served,
                    arguments,
                    ToolAnswer(text=decision.rpc_error.message, is_error=True),
                    "fault",
                    started,
                    fired=fired,
                )
                raise RpcFaultError(decision.rpc_error)
            if decision.hang:
                await anyio.sleep_forever()
            if decision.answer is not None:
                answer, source = decision.answer, "fault"
            elif (replayed := self._replay(episode, served, arguments)) is not None:
                answer, source = replayed, "replay"
            else:
                answer, stats = await self._simulate(episode, served, arguments, progress)
        except EngineError as exc:
            log.error(
                "engine failure on %s (episode %r): %s", served.public_name, episode.episode_id, exc
            )
            answer = ToolAnswer(
                text=f"The world model failed to answer this call: {exc}", is_error=True
            )
            self._record(episode, served, arguments, answer, "engine-error", started, fired=fired)
            return answer
        except anyio.get_cancelled_exc_class():
            self._record(
                episode,
                served,
                arguments,
                ToolAnswer(text="(cancelled by the client)", is_error=True),
                "cancelled",
                started,
                fired=fired,
            )
            raise
        answer = self._apply_transforms(decision, answer, served)
        episode.add_turn(
            Turn(
                index=index,
                action=ToolCall(tool=served.spec.name, arguments=arguments),
                observation=answer.text,
                is_error=answer.is_error,
                conditions=episode.active_conditions(),
                damaged=bool(decision.transforms),
            )
        )
        self._record(episode, served, arguments, answer, source, started, fired=fired, stats=stats)
        return answer

    def _decide_faults(
        self, episode: Episode, served: ServedTool, arguments: dict[str, Any], index: int
    ) -> FaultDecision:
        call = CallContext(
            episode.episode_id,
            served.domain.name,
            served.public_name,
            arguments,
            index,
            served.spec.output_schema,
        )
        try:
            decision = self.faults.decide(call)
        except Exception:  # a broken rule must not take the call down with it
            log.exception("the fault layer failed on %s; answering without faults", call)
            return FaultDecision()
        for fault in decision.fired:
            log.info(
                "fault fired: episode=%r call=%d tool=%s scenario=%s rule=%s effect=%s",
                episode.episode_id,
                index,
                served.public_name,
                fault.scenario,
                fault.rule,
                fault.effect,
            )
        return decision

    @staticmethod
    def _apply_transforms(
        decision: FaultDecision, answer: ToolAnswer, served: ServedTool
    ) -> ToolAnswer:
        for transform in decision.transforms:
            try:
                answer = transform(answer)
            except Exception:  # a broken output fault must not take the call down either
                log.exception("an output fault failed on %s; answer left as is", served.public_name)
        return answer

    def _replay(
        self, episode: Episode, served: ServedTool, arguments: dict[str, Any]
    ) -> ToolAnswer | None:
        """A read-only call repeated with nothing state-changing in between sees the same thing.

        Not when the world's conditions changed since, nor when a fault shaped that observation
        (a truncated or drifted answer is not the state of the world)."""
        if not (self.settings.replay_read_only and served.spec.read_only):
            return None
        for turn in reversed(episode.turns):
            if turn.action.tool == served.spec.name and turn.action.arguments == arguments:
                if turn.is_error or turn.damaged or turn.conditions != episode.active_conditions():
                    return None
                structured = None
                if served.spec.output_schema is not None:
                    structured = json.loads(turn.observation)
                return ToolAnswer(text=turn.observation, structured=structured)
            tool = served.domain.tool(turn.action.tool)
            if tool is None or not tool.read_only:
                return None  # something may have changed the world since
        return None

    async def _simulate(
        self,
        episode: Episode,
        served: ServedTool,
        arguments: dict[str, Any],
        progress: ProgressCallback | None,
    ) -> tuple[ToolAnswer, GenerationStats]:
        domain, spec = served.domain, served.spec
        action = ToolCall(tool=spec.name, arguments=arguments)
        max_tokens = spec.simulation.max_tokens or domain.generation.max_tokens
        messages = await self._fit_prompt(episode, served, action, max_tokens)
        attempts = 1 + (self.settings.structured_retries if spec.output_schema else 0)
        last_problem = ""
        for attempt in range(attempts):
            request = GenerationRequest(
                messages=messages,
                max_tokens=max_tokens,
                # Retries of a schema-breaking answer sample instead of repeating the same output.
                temperature=domain.generation.temperature if attempt == 0 else 0.7,
                stop=domain.generation.stop,
                json_schema=spec.output_schema,
                cache_key=episode.cache_key,
                seed=attempt,
            )
            result = await self._generate_with_progress(request, progress)
            text = self.profile.extract_observation(result.text)
            if spec.output_schema is None:
                return ToolAnswer(text=text), result.stats
            structured, last_problem = parse_structured(text, spec.output_schema)
            if structured is not None:
                text = json.dumps(structured, ensure_ascii=False)
                return ToolAnswer(text=text, structured=structured), result.stats
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

    async def _fit_prompt(
        self, episode: Episode, served: ServedTool, action: ToolCall, max_tokens: int
    ) -> list:
        """Messages that fit the context window, trimming the oldest turns if they must go."""
        budget = self.engine.context_window - max_tokens
        conditions = episode.active_conditions()
        examples = (
            self.grounding.examples(action.tool, action.arguments, episode.turns)
            if self.grounding is not None
            else None
        )

        def build(omitted: int, summarize: bool = True):
            return build_messages(
                self.profile,
                served.domain,
                served.domain.tools,
                served.world,
                episode.turns,
                omitted,
                action,
                episode.next_index,
                conditions,
                summarize_omitted=summarize,
                examples=examples,
            )

        omitted = episode.omitted_turns
        messages = build(omitted)
        used = await self.engine.count_tokens(messages)
        if used <= budget:
            return messages
        before = omitted
        target = int(budget * TRIM_TARGET)
        while used > target and omitted < len(episode.turns):
            omitted += max(1, (len(episode.turns) - omitted) // 4)
            omitted = min(omitted, len(episode.turns))
            messages = build(omitted)
            used = await self.engine.count_tokens(messages)
        if used > budget:  # even the summary of dropped turns does not fit: leave it out
            messages = build(omitted, summarize=False)
            used = await self.engine.count_tokens(messages)
        episode.omitted_turns = omitted
        log.warning(
            "episode %r: history over the context window; %d oldest turns now "
            "summarized (was %d), prompt %d tokens of %d",
            episode.episode_id,
            omitted,
            before,
            used,
            budget,
        )
        if used > budget:
            raise PromptTooLongError(
                f"the prompt needs {used} tokens but the model's context window leaves "
                f"{budget} (shorten the arguments or use a model with a larger context)"
            )
        return messages

    async def _generate_with_progress(
        self, request: GenerationRequest, progress: ProgressCallback | None
    ):
        control = GenerationControl()
        if progress is None:
            return await self.engine.generate(request, control)
        tokens = 0

        def on_token(count: int) -> None:
            nonlocal tokens
            tokens = count

        control.on_token = on_token
        result = None
        failure: Exception | None = None
        async with anyio.create_task_group() as tg:

            async def report() -> None:
                reported = -1
                while True:
                    await anyio.sleep(PROGRESS_INTERVAL_S)
                    if tokens != reported:
                        reported = tokens
                        await progress(
                            float(tokens),
                            float(request.max_tokens),
                            f"world model: {tokens} tokens generated",
                        )

            tg.start_soon(report)
            try:
                result = await self.engine.generate(request, control)
            except Exception as exc:  # re-raised below, unwrapped from the task group
                failure = exc
            finally:
                tg.cancel_scope.cancel()
        if failure is not None:
            raise failure
        return result

    def _record(
        self,
        episode: Episode,
        served: ServedTool,
        arguments: dict[str, Any],
        answer: ToolAnswer,
        source: ObservationSource,
        started: float,
        *,
        fired: list[dict[str, Any]] | None = None,
        stats: GenerationStats | None = None,
    ) -> None:
        record = CallRecord(
            index=episode.next_index,
            episode=episode.episode_id,
            domain=served.domain.name,
            tool=served.public_name,
            arguments=arguments,
            observation=answer.text,
            structured=answer.structured,
            is_error=answer.is_error,
            source=source,
            faults=fired or [],
            conditions=episode.active_conditions(),
            omitted_turns=episode.omitted_turns,
            stats=stats,
            started_at=started,
            seconds=round(time.time() - started, 4),
        )
        self.episodes.record(episode, record)


def parse_structured(text: str, schema: dict[str, Any]) -> tuple[Any | None, str]:
    """Parse and validate model output against an outputSchema: (value, "") or (None, why)."""
    start = text.find("{")
    candidate = text[start:] if start >= 0 else text
    try:
        value, _ = json.JSONDecoder().raw_decode(candidate)
    except json.JSONDecodeError as exc:
        return None, f"not JSON: {exc.msg} at char {exc.pos}"
    problems = schema_errors(schema, value)
    if problems:
        return None, problems[0]
    return value, ""

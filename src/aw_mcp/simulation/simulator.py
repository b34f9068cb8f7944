"""One tool call, from validated arguments to an answer: faults -> episode -> engine -> record.

The MCP server calls ``WorldSimulator.call``; nothing here knows about MCP. Each policy a call
goes through is a part of its own in ``aw_mcp.simulation``; this module only strings them
together. Every call, however it ends (model answer, fault, replay, engine failure,
cancellation), is appended to its episode's record.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import anyio

from aw_mcp.domain.answers import ToolAnswer
from aw_mcp.domain.catalogue import Catalogue, ServedTool
from aw_mcp.domain.models import ClientExchange, ToolCall, WorldSpec
from aw_mcp.engines.base import Engine, GenerationRequest
from aw_mcp.engines.counters import GenerationStats
from aw_mcp.episode.episode import Episode
from aw_mcp.episode.prompt import PromptProfile, build_messages
from aw_mcp.episode.store import EpisodeStore
from aw_mcp.episode.views import view_of_call
from aw_mcp.errors import EngineError
from aw_mcp.faults.layer import FaultDecision, FaultLayer, NoFaults
from aw_mcp.records.calls import ObservationSource, Turn, enters_history
from aw_mcp.simulation.answer_shapes import AnswerShapes
from aw_mcp.simulation.context_window import ContextFitter
from aw_mcp.simulation.fault_step import FaultStep, RpcFaultError
from aw_mcp.simulation.observation import ObservationGenerator
from aw_mcp.simulation.progress import ProgressCallback
from aw_mcp.simulation.read_repeats import ReadRepeats
from aw_mcp.simulation.recording import PendingRecord
from aw_mcp.simulation.restore import RecordRestorer
from aw_mcp.simulation.settings import SimulationSettings
from aw_mcp.simulation.state_keeping import StateKeeper
from aw_mcp.state.steps import StepState

if TYPE_CHECKING:
    from aw_mcp.simulation.grounding import GroundingIndex
    from aw_mcp.simulation.replay import Recordings

log = logging.getLogger(__name__)

WARM_UP_KEY = "warm-up:"  # + a domain's name: the KV state of its prompt prefix


class SimulatorOptions(SimulationSettings):
    """The simulation's settings, and what is not a flag."""

    structured_retries: int = 2  # extra attempts when output breaks the tool's outputSchema
    warm_up_prompts: bool = False  # evaluate each domain's prompt prefix at start (warm_up)


class WorldSimulator:
    def __init__(
        self,
        catalogue: Catalogue,
        engine: Engine,
        episodes: EpisodeStore | None = None,
        faults: FaultLayer | None = None,
        profile: PromptProfile | None = None,
        options: SimulatorOptions | None = None,
        recordings: Recordings | None = None,
        grounding: GroundingIndex | None = None,
    ):
        self.catalogue = catalogue
        self.engine = engine
        self.episodes = episodes or EpisodeStore()
        self.options = options or SimulatorOptions()
        self.profile = profile = profile or PromptProfile()
        self.faults = FaultStep(faults or NoFaults())
        self.repeats = ReadRepeats(self.options.replay_read_only)
        self.keeper = StateKeeper() if profile.keeps_state else None
        self.context = ContextFitter(
            engine, profile, grounding, self.keeper, self.options.window_tokens
        )
        shapes = None
        if self.options.answer_shapes:
            shapes = AnswerShapes(grounding.answers_of if grounding is not None else None)
        self.generator = ObservationGenerator(
            engine, profile, self.options.structured_retries, self.options, shapes
        )
        # The store owns episodes; the caches other layers keep per episode follow its lifecycle.
        self.episodes.subscribe(lambda episode: self.faults.layer.episode_ended(episode.key))
        self.episodes.subscribe(lambda episode: self.engine.forget(episode.key))
        if self.episodes.sink is not None:  # records are durable: episodes survive restarts
            restorer = RecordRestorer(self.episodes.sink, catalogue, self.faults.layer)
            self.episodes.restore = restorer
            self.episodes.subscribe(restorer.episode_over)
        self.recordings = recordings  # serve --replay: answer from recorded episodes

    async def warm_up(self) -> None:
        """Load the model, then evaluate each served domain's fixed prompt prefix (its
        instructions, tools, world facts and demonstrations) once, so an episode's first call
        finds it in the KV cache instead of paying for it (thousands of tokens on a CPU).
        A failure is only logged: the calls report the engine's errors themselves."""
        await self.engine.start()
        if not self.options.warm_up_prompts:
            return
        for served in {t.domain.name: t for t in self.catalogue}.values():
            messages = build_messages(
                self.profile,
                served.domain,
                served.domain.tools,
                served.world,
                [],
                0,
                ToolCall(tool=served.spec.name, arguments={}),
                1,
                [],
            )
            try:
                # Kept under a key of its own per world, so that a server of several worlds
                # keeps every world's prefix for its first episodes to copy, not the last one.
                warm = GenerationRequest(
                    messages=messages,
                    max_tokens=1,
                    cache_key=f"{WARM_UP_KEY}{served.domain.name}",
                    warm_up=True,
                )
                await self.engine.generate(warm)
            except EngineError as exc:
                log.warning("could not warm up the %s prompt: %s", served.domain.name, exc)
                return
        log.info("prompt prefixes of %d domain(s) evaluated", len(self.catalogue.domains))

    async def call(
        self,
        episode_id: str,
        served: ServedTool,
        arguments: dict[str, Any],
        progress: ProgressCallback | None = None,
        world: WorldSpec | None = None,
        client: list[ClientExchange] | None = None,
    ) -> ToolAnswer:
        """Answer one call of an episode. ``world``: the episode's own world, layered on the
        served one; taken on the episode's first call, and must not change afterwards.
        ``client``: what the tool asked the MCP client during the call and was answered
        (``simulation.client_requests``); it is part of the action the world model sees."""
        action = ToolCall(tool=served.spec.name, arguments=arguments, client=client or [])
        async with self.episodes.open(episode_id, served.domain.name) as episode:
            record = PendingRecord(self.episodes, episode, served, arguments, action.client)
            if world is not None and (conflict := episode.take_world(world)):
                answer = ToolAnswer(text=conflict, is_error=True)
                record.finish(answer, "invalid-arguments")
                return answer
            decision = self.faults.decide(episode, served, arguments)
            record.faults = [f.as_record() for f in decision.fired]
            state = self.keeper.state_of(episode, served) if self.keeper else None
            view = view_of_call(state, arguments, episode.turns) if state is not None else None
            try:
                answer, source, stats, step = await self._answer(
                    episode, served, action, decision, progress, view
                )
            except RpcFaultError as exc:
                record.finish(ToolAnswer(text=exc.fault.message, is_error=True), "rpc-error")
                raise
            except EngineError as exc:
                log.error(
                    "engine failure on %s (episode %r): %s", served.public_name, episode_id, exc
                )
                answer = ToolAnswer(
                    text=f"The world model failed to answer this call: {exc}", is_error=True
                )
                record.finish(answer, "engine-error")
                return answer
            except anyio.get_cancelled_exc_class():
                cancelled = ToolAnswer(text="(cancelled by the client)", is_error=True)
                record.finish(cancelled, "cancelled")
                raise
            answer = self.faults.damage(decision, answer, served.public_name)
            if step is not None and self.keeper is not None:
                step = self.keeper.absorb(episode, step)
            finished = record.finish(answer, source, stats, step, view)
            if enters_history(source):
                turn = Turn.of_record(finished, served.spec.name, bool(decision.transforms))
                episode.add_turn(turn)
            return answer

    async def _answer(
        self,
        episode: Episode,
        served: ServedTool,
        action: ToolCall,
        decision: FaultDecision,
        progress: ProgressCallback | None,
        view: str | None = None,
    ) -> tuple[ToolAnswer, ObservationSource, GenerationStats | None, StepState | None]:
        """Who answers: a fault, else a recorded episode this one follows (serve --replay),
        else the episode's own history (read-only replay), else the engine. With a state
        kept, the engine's answer comes with the step its blocks describe."""
        await self.faults.act(decision)
        if decision.answer is not None:
            return decision.answer, "fault", None, None
        arguments = action.arguments
        if self.recordings and (
            found := self.recordings.lookup(episode.records, served, arguments)
        ):
            answer, source = found
            return answer, source, None, None
        # A call that asked the client is not repeated: the client may answer otherwise.
        if (
            not action.client
            and (repeated := self.repeats.lookup(episode, served, arguments)) is not None
        ):
            return repeated, "replay", None, None
        max_tokens = served.domain.answer_budget(served.spec)
        reserved = served.spec.simulation.reserved_tokens
        prompt = await self.context.fit(episode, served, action, max_tokens, view, reserved)
        answer, stats, step = await self.generator.generate_step(
            episode, served, prompt.messages, prompt.answer_tokens, progress, episode.world_state
        )
        return answer, "model", stats, step

    def end_episode(self, episode_id: str, reason: str) -> None:
        """End the episode ``episode_id`` in every domain; its next call begins a new one."""
        self.episodes.end(episode_id, reason)

    async def reject(
        self, episode_id: str, served: ServedTool, arguments: Any, message: str
    ) -> None:
        """Record a call refused before simulation (invalid arguments), in arrival order."""
        async with self.episodes.open(episode_id, served.domain.name) as episode:
            arguments = arguments if isinstance(arguments, dict) else {"_raw": arguments}
            PendingRecord(self.episodes, episode, served, arguments).finish(
                ToolAnswer(text=message, is_error=True), "invalid-arguments"
            )

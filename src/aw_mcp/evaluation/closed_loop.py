"""Closed-loop evaluation: recorded episodes replayed through the MCP server.

Each recorded episode's actions are sent in order by a real MCP client (in memory) under an
episode id of their own (``_meta["aw-mcp/episode"]``), so the world model sees its own
earlier answers, as it does for an agent, not the real ones. Each call becomes one
AgentWorldBench-shaped row: ``prompt``/``response`` hold the recorded episode (actions, real
observations) rendered with the server's prompt profile, ``gen`` the simulated observation and
``reference`` the real one, so ``score`` reads these rows exactly as teacher-forced ones.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from mcp import Client, MCPError
from mcp.types import CallToolResult, RequestParamsMeta, TextContent

from aw_mcp.domain.catalogue import ServedTool
from aw_mcp.domain.models import ToolCall, WorldSpec
from aw_mcp.errors import UserInputError
from aw_mcp.evaluation.predictions import PREDICTIONS_FILE, PredictionsFile
from aw_mcp.evaluation.runner import run_bounded
from aw_mcp.evaluation.samples import family_of, sample_key
from aw_mcp.evaluation.state_accuracy import reads_back
from aw_mcp.export.formats import bench_sample
from aw_mcp.records.calls import CallRecord, ObservationSource, enters_history
from aw_mcp.records.reader import RecordedEpisode
from aw_mcp.server.app import build_server
from aw_mcp.server.episode_identity import WORLD_META_KEY, episode_meta
from aw_mcp.simulation.simulator import WorldSimulator
from aw_mcp.state.steps import StepState

log = logging.getLogger(__name__)

# Calls the world model did not answer: kept with an ``error`` so a later run retries them.
FAILED_SOURCES = frozenset({"engine-error", "cancelled", "invalid-arguments"})


@dataclass
class ClosedLoopOptions:
    jobs: int = 1
    quiet: bool = False


def replayed_calls(episode: RecordedEpisode) -> list[CallRecord]:
    """The calls whose observations the real episode's world produced, in order."""
    return [r for r in episode.records if enters_history(r.source)]


def sample_id(episode: RecordedEpisode, turn: int) -> str:
    return f"{episode.episode}#{turn}"


def sample_keys(episode: RecordedEpisode) -> list[str]:
    calls = len(replayed_calls(episode))
    return [sample_key(episode.domain, sample_id(episode, t)) for t in range(1, calls + 1)]


def result_text(result: CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


class ClosedLoop:
    def __init__(
        self,
        simulator: WorldSimulator,
        options: ClosedLoopOptions | None = None,
        worlds: dict[str, WorldSpec] | None = None,
    ):
        """``worlds``: the machine each episode ran in, by episode id (generated episodes
        with worlds of their own); it is sent with every call as ``_meta["aw-mcp/world"]``."""
        self.simulator = simulator
        self.options = options or ClosedLoopOptions()
        self.worlds = worlds or {}
        self.server = build_server(simulator)

    def call_meta(self, episode: RecordedEpisode) -> RequestParamsMeta:
        meta: dict[str, Any] = dict(episode_meta(f"closed-loop/{episode.episode}"))
        if (world := self.worlds.get(episode.episode)) is not None:
            meta[WORLD_META_KEY] = world.model_dump(exclude_defaults=True)
        return cast(RequestParamsMeta, meta)

    def check(self, episodes: list[RecordedEpisode]) -> None:
        """Fail before any inference on an episode this server cannot replay."""
        seen: set[tuple[str, str]] = set()
        names = self.simulator.catalogue.names()
        for episode in episodes:
            key = (episode.episode, episode.domain)
            if key in seen:
                raise UserInputError(
                    f"episode {episode.episode!r} ({episode.domain}) is recorded twice "
                    f"(again in {episode.path})"
                )
            seen.add(key)
            for record in replayed_calls(episode):
                if record.tool not in names:
                    raise UserInputError(
                        f"{episode.path}: call {record.index} uses tool {record.tool!r}, which "
                        f"this server does not serve (its tools: {', '.join(names)}); "
                        "pass the domain with --simulator"
                    )

    def served(self, tool: str) -> ServedTool:
        served = self.simulator.catalogue.get(tool)
        if served is None:  # check() refuses such episodes before any call
            raise UserInputError(f"this server does not serve the tool {tool!r}")
        return served

    def rows(
        self,
        episode: RecordedEpisode,
        outputs: list[tuple[str, ObservationSource, str | None]],
        states: list[StepState | None] | None = None,
    ) -> list[dict[str, Any]]:
        """One row per replayed call; ``outputs`` holds (gen, source, error) per call,
        ``states`` what the model wrote each call read and changed (a profile keeping
        state): beside the real step, when the record has one (state accuracy)."""
        calls = replayed_calls(episode)
        profile = self.simulator.profile
        served = [self.served(r.tool) for r in calls]
        first = served[0]
        world = self.worlds.get(episode.episode)
        served_world = first.world.merged(world) if world is not None else first.world
        system = profile.system_message(first.domain, first.domain.tools, served_world, [])
        prompt = [
            profile.action_message(
                turn, ToolCall(tool=s.spec.name, arguments=r.arguments), r.conditions
            )
            for turn, (s, r) in enumerate(zip(served, calls, strict=True), start=1)
        ]
        response = [profile.observation_message(r.observation) for r in calls]
        read_back = reads_back([r.state for r in calls])
        rows = []
        for turn, (record, (gen, source, error)) in enumerate(
            zip(calls, outputs, strict=True), start=1
        ):
            row = {
                **bench_sample(
                    episode.domain, sample_id(episode, turn), system, prompt, response, turn
                ),
                "gen": gen,
                "reference": record.observation,
                "domain": episode.domain,
                "family": family_of(record.tool, record.arguments),
                "mode": "closed-loop",
                "source": source,
            }
            if record.conditions:  # scored as a world fault (scoring.world_conditions)
                row["conditions"] = record.conditions
            if record.state is not None:  # scored as state accuracy (evaluation.state_accuracy)
                row["state_real"] = record.state.model_dump(mode="json")
                said = states[turn - 1] if states else None
                row["state_gen"] = said.model_dump(mode="json") if said is not None else None
                row["reads_back"] = read_back[turn - 1]
            if error:
                row["error"] = error
            rows.append(row)
        return rows

    async def run_episode(self, client: Client, episode: RecordedEpisode) -> list[dict[str, Any]]:
        episode_id = f"closed-loop/{episode.episode}"
        texts: list[str] = []
        for record in replayed_calls(episode):
            try:
                result = await client.call_tool(
                    record.tool, record.arguments, meta=self.call_meta(episode)
                )
                texts.append(result_text(result))
            except MCPError:  # a fault scenario's JSON-RPC error: no observation
                texts.append("")
        # The server records every call, however it ended, one record per call in order:
        # how each was answered (model, replay, fault, engine-error, invalid-arguments).
        # The serving domain may be named otherwise than the recorded one (--simulator FILE).
        served_domain = self.served(replayed_calls(episode)[0].tool).domain.name
        live = self.simulator.episodes.get(episode_id, served_domain).records
        outputs = []
        for text, record in zip(texts, live, strict=True):
            failed = record.source in FAILED_SOURCES
            outputs.append((text, record.source, record.observation if failed else None))
        return self.rows(episode, outputs, [record.state for record in live])

    async def run(self, episodes: list[RecordedEpisode], output_dir: Path) -> PredictionsFile:
        self.check(episodes)
        predictions = PredictionsFile(output_dir / PREDICTIONS_FILE)
        episodes = [e for e in episodes if replayed_calls(e)]
        todo = [e for e in episodes if not all(predictions.done(k) for k in sample_keys(e))]
        if len(todo) < len(episodes):
            log.info(
                "resuming: %d of %d episodes already done", len(episodes) - len(todo), len(episodes)
            )
        await self.simulator.engine.start()
        async with Client(self.server) as client:

            async def work(episode: RecordedEpisode) -> int:
                rows = await self.run_episode(client, episode)
                predictions.append(rows)
                return len(rows)

            await run_bounded(
                todo,
                work,
                jobs=self.options.jobs,
                total=sum(len(replayed_calls(e)) for e in todo),
                description="closed-loop",
                quiet=self.options.quiet,
            )
        predictions.compact([k for e in episodes for k in sample_keys(e)])
        return predictions

"""Render recorded episodes as the world model's conversations: for benchmarks and training.

:func:`render_episode` is THE record -> messages rendering: the prompt the server builds for an
episode's last call (``build_messages``, the served tools and world, the chosen profile), with
that call's real observation appended as the final assistant message. The server's prompt for
step k is a prefix of the one for step k+1, so every observation in it is a training target
whose prefix is exactly what the server sends at that step. Training and evaluation import it;
nothing else renders records. The file formats built on it are in ``export.formats``. An
episode renders in the world it ran in (``DomainResolver.world_of``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from aw_mcp.domain.catalogue import Catalogue, ServedTool
from aw_mcp.domain.loader import bundled_domain_names, load_domain
from aw_mcp.domain.mirror import mirror_domain
from aw_mcp.domain.models import DomainSpec, WorldSpec
from aw_mcp.engines.base import ChatMessage
from aw_mcp.episode.prompt import PromptProfile, build_messages
from aw_mcp.episode.views import with_views
from aw_mcp.errors import UserInputError
from aw_mcp.records.calls import Turn, enters_history
from aw_mcp.records.folder import CAPTURES_FOLDER
from aw_mcp.records.reader import RecordedEpisode


class RenderedMessage(BaseModel):
    role: str
    content: str
    observation: bool | None = None  # assistant messages only: an episode's real observation?
    # an observation's step as the sandbox measured it (what it read, what it changed), where
    # the record has one (``CallRecord.state``), whatever the profile writes in the text
    state: dict[str, Any] | None = None


class RenderedEpisode(BaseModel):
    episode: str
    domain: str
    messages: list[RenderedMessage]


class ExportError(UserInputError):
    """Records that cannot be rendered (unknown domain or tool, no history)."""


class DomainResolver:
    """Which domain (and served world) renders an episode, as ``aw-mcp serve`` would load it.

    A domain given explicitly wins; else the record's domain name: a bundled domain, or a
    capture ``<record dir>/tools/<domain>.json`` that ``aw-mcp record`` wrote (mirrored).
    """

    def __init__(
        self,
        domains: Iterable[DomainSpec] = (),
        world: WorldSpec | None = None,
        record_dir: Path | None = None,
        episode_worlds: dict[str, WorldSpec] | None = None,
    ):
        self._given = {d.name: d for d in domains}
        self._world = world
        self._record_dir = record_dir
        self._episode_worlds = episode_worlds or {}
        self._catalogues: dict[str, Catalogue] = {}

    def world_of(self, episode: RecordedEpisode, served: WorldSpec) -> WorldSpec:
        """The world ``episode`` ran in: the served one with the episode's own laid over it
        (a generated episode's machine, ``records.folder.record_dir_worlds``)."""
        own = self._episode_worlds.get(episode.episode)
        return served.merged(own) if own is not None else served

    def catalogue(self, domain_name: str) -> Catalogue:
        if domain_name not in self._catalogues:
            self._catalogues[domain_name] = Catalogue(
                [self.domain(domain_name)], extra_world=self._world
            )
        return self._catalogues[domain_name]

    def domain(self, name: str) -> DomainSpec:
        """The domain that renders records of domain ``name``."""
        if name in self._given:
            return self._given[name]
        if len(self._given) == 1:  # one domain given: it renders every episode
            return next(iter(self._given.values()))
        if name in bundled_domain_names():
            return load_domain(name)
        capture = self._record_dir / CAPTURES_FOLDER / f"{name}.json" if self._record_dir else None
        if capture is not None and capture.is_file():
            return mirror_domain(capture)
        raise ExportError(
            f"no domain for records of domain {name!r}: not bundled and no capture at "
            f"{CAPTURES_FOLDER}/{name}.json; pass --simulator NAME|FILE or --tools-from FILE.json"
        )


def _served_turns(episode: RecordedEpisode, catalogue: Catalogue) -> list[tuple[Turn, ServedTool]]:
    """The episode's history turns, each with the served tool it called (the record keeps the
    public name; on a multi-domain server that is ``<domain>_<tool>``)."""
    out = []
    history = [r for r in episode.records if enters_history(r.source)]
    for turn, record in zip(episode.turns(), history, strict=True):
        served = catalogue.get(turn.action.tool) or catalogue.get(
            turn.action.tool.removeprefix(f"{episode.domain}_")
        )
        if served is None:
            raise ExportError(
                f"episode {episode.episode!r} calls {turn.action.tool!r}, which domain "
                f"{catalogue.domains[0].name!r} does not have"
            )
        action = turn.action.model_copy(update={"tool": served.spec.name})
        update: dict[str, Any] = {"action": action}
        if served.spec.model_output_schema is not None and record.structured is not None:
            # The simulated tool's observation: its structured answer written as the tool's
            # hints say (what the world model writes); a real server's text may differ.
            update["observation"] = served.spec.answer_text(record.structured)
        out.append((turn.model_copy(update=update), served))
    if not out:
        raise ExportError(f"episode {episode.episode!r} has no call that reached the world")
    return out


def render_episode(
    episode: RecordedEpisode, profile: PromptProfile, resolver: DomainResolver
) -> RenderedEpisode:
    """The conversation the server renders for the episode's last call, plus its observation.

    Messages: system, the domain's demonstrations (assistant, ``observation`` false), one
    user/assistant pair per call that reached the world (assistant ``observation`` true), the
    last assistant message being the last call's real observation. A profile that keeps state
    renders each call with its view and each observation after its blocks, as the server
    does; an observation whose record has a real state carries it (``state``) either way."""
    served_turns = _served_turns(episode, resolver.catalogue(episode.domain))
    turns = [t for t, _ in served_turns]
    served = served_turns[-1][1]
    world = resolver.world_of(episode, served.world)
    if profile.keeps_state:
        turns, _ = with_views(turns, world)
    current = turns[-1]
    prompt = build_messages(
        profile,
        served.domain,
        served.domain.tools,
        world,
        turns[:-1],
        0,
        current.action,
        current.index,
        current.conditions,
        current_view=current.view,
    )
    answer = profile.turn_answer(current.observation, current.state)
    prompt.append(ChatMessage(role="assistant", content=answer))
    demo_messages = 1 + 2 * len(served.domain.demonstrations)
    # the observations' turns, in order: those build_messages shows, then the current one
    shown = [t for t in turns[:-1] if t.reached_world] + [current]
    states = iter(t.state.model_dump(mode="json") if t.state is not None else None for t in shown)
    return RenderedEpisode(
        episode=episode.episode,
        domain=episode.domain,
        messages=[
            RenderedMessage(
                role=m.role,
                content=m.content,
                observation=(i >= demo_messages) if m.role == "assistant" else None,
                state=next(states) if m.role == "assistant" and i >= demo_messages else None,
            )
            for i, m in enumerate(prompt)
        ],
    )

"""Render recorded episodes as the world model's conversations: for benchmarks and training.

:func:`render_episode` is THE record -> messages rendering: the prompt the server builds for an
episode's last call (``build_messages``, the served tools and world, the chosen profile), with
that call's real observation appended as the final assistant message. The server's prompt for
step k is a prefix of the one for step k+1, so every observation in it is a training target
whose prefix is exactly what the server sends at that step. Training and evaluation import it;
nothing else renders records.

Two file formats are built on it:

- AgentWorldBench (``<domain>_test.jsonl``): one sample per turn with ``task``, ``id``,
  ``prompt`` (every turn's action message), ``response`` (every turn's observation message),
  ``current_prompt``, ``system_str``, ``turn_idx`` (1-based) and ``total_turns``. The domain's
  demonstrations, which the server sends as example turns, are appended to ``system_str``
  (the format has no place for them in the turn lists).
- chat (``<domain>_chat.jsonl``): one line per episode, ``{"messages": [...]}``; each assistant
  message says whether it is one of the episode's observations (``"observation": true``) or a
  demonstration (false).

A third is the agent's side of the same records, not the world model's:

- ATIF (``<domain>_atif/<episode>.json``, the Agent Trajectory Interchange Format of Harbor /
  Terminal-Bench, built with the ``atif`` package's pydantic models): one trajectory per
  episode, one agent step per recorded call (refused and failed calls included), its tool call
  and the observation the agent got back. What ATIF has no field for (where the answer came
  from, the faults that fired, the world conditions) is kept in each step's ``extra.aw_mcp``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from aw_mcp import __version__
from aw_mcp.catalogue import Catalogue, ServedTool
from aw_mcp.domain.loader import bundled_domain_names, load_domain
from aw_mcp.domain.mirror import mirror_domain
from aw_mcp.domain.models import DomainSpec, WorldSpec
from aw_mcp.engines.base import ChatMessage
from aw_mcp.episode.episode import Turn
from aw_mcp.episode.prompt import PromptProfile, build_messages
from aw_mcp.episode.store import record_file_name
from aw_mcp.trajectories.records import HISTORY_SOURCES, RecordedEpisode

if TYPE_CHECKING:
    import atif

ExportFormat = Literal["agentworldbench", "chat", "atif"]
ATIF_SCHEMA_VERSION = "ATIF-v1.8"  # what the pinned ``atif`` package implements
CAPTURES_FOLDER = "tools"  # aw-mcp record keeps the real server's tools/list here


class RenderedMessage(BaseModel):
    role: str
    content: str
    observation: bool | None = None  # assistant messages only: an episode's real observation?


class RenderedEpisode(BaseModel):
    episode: str
    domain: str
    messages: list[RenderedMessage]


class ExportError(ValueError):
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
    ):
        self._given = {d.name: d for d in domains}
        self._world = world
        self._record_dir = record_dir
        self._catalogues: dict[str, Catalogue] = {}

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
    history = [r for r in episode.records if r.source in HISTORY_SOURCES]
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
    last assistant message being the last call's real observation."""
    served_turns = _served_turns(episode, resolver.catalogue(episode.domain))
    turns = [t for t, _ in served_turns]
    served = served_turns[-1][1]
    current = turns[-1]
    prompt = build_messages(
        profile,
        served.domain,
        served.domain.tools,
        served.world,
        turns[:-1],
        0,
        current.action,
        current.index,
        current.conditions,
    )
    prompt.append(
        ChatMessage(role="assistant", content=profile.observation_message(current.observation))
    )
    demo_messages = 1 + 2 * len(served.domain.demonstrations)
    return RenderedEpisode(
        episode=episode.episode,
        domain=episode.domain,
        messages=[
            RenderedMessage(
                role=m.role,
                content=m.content,
                observation=(i >= demo_messages) if m.role == "assistant" else None,
            )
            for i, m in enumerate(prompt)
        ],
    )


def bench_samples(
    episode: RecordedEpisode, profile: PromptProfile, resolver: DomainResolver
) -> list[dict[str, Any]]:
    """AgentWorldBench samples, one per turn, cut from :func:`render_episode`'s messages."""
    rendered = render_episode(episode, profile, resolver)
    messages = rendered.messages
    demos = [m for m in messages[1:] if m.role == "assistant" and not m.observation]
    head = 1 + 2 * len(demos)
    system = messages[0].content
    if demos:
        examples = "\n\n".join(m.content for m in messages[1:head])
        system += "\n\n# Example turns\n\n" + examples
    prompts = [m.content for m in messages[head::2]]
    responses = [m.content for m in messages[head + 1 :: 2]]
    return [
        bench_sample(rendered.domain, f"{rendered.episode}-{k}", system, prompts, responses, k)
        for k in range(1, len(prompts) + 1)
    ]


def bench_sample(
    task: str, sample_id: str, system: str, prompts: list[str], responses: list[str], turn: int
) -> dict[str, Any]:
    """One AgentWorldBench sample: the whole episode's action and observation messages, and
    which turn (1-based) is asked for."""
    return {
        "task": task,
        "id": sample_id,
        "prompt": prompts,
        "response": responses,
        "current_prompt": prompts[turn - 1],
        "system_str": system,
        "turn_idx": turn,
        "total_turns": len(prompts),
    }


def _atif_models() -> Any:
    try:
        import atif
    except ImportError:  # a core dependency; missing only from a hand-made environment
        raise ExportError(
            "--format atif needs the 'atif' package (pip install 'atif==1.8.0')"
        ) from None
    return atif


def _timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def atif_trajectory(episode: RecordedEpisode, resolver: DomainResolver) -> atif.Trajectory:
    """The episode as an ATIF trajectory, validated by the ``atif`` models on construction.

    The agent is the MCP client that made the calls (aw-mcp does not know which); its tool
    definitions are the tools the domain serves, in OpenAI function form."""
    atif = _atif_models()
    catalogue = resolver.catalogue(episode.domain)
    tools = [
        {
            "type": "function",
            "function": {
                "name": served.public_name,
                "description": served.spec.description,
                "parameters": served.spec.input_schema,
            },
        }
        for served in catalogue
    ]
    steps = []
    for step_id, record in enumerate(episode.records, start=1):
        call_id = f"call-{record.index}"
        kept = record.model_dump(
            mode="json", exclude={"episode", "domain", "tool", "arguments", "observation"}
        )
        steps.append(
            atif.Step(
                step_id=step_id,
                timestamp=_timestamp(record.started_at),
                source="agent",
                message="",  # the agent's own text is not part of an MCP call
                tool_calls=[
                    atif.ToolCall(
                        tool_call_id=call_id,
                        function_name=record.tool,
                        arguments=record.arguments,
                    )
                ],
                observation=atif.Observation(
                    results=[
                        atif.ObservationResult(
                            source_call_id=call_id,
                            content=record.observation,
                            extra={"is_error": record.is_error},
                        )
                    ]
                ),
                extra={"aw_mcp": kept},
            )
        )
    return atif.Trajectory(
        schema_version=ATIF_SCHEMA_VERSION,
        session_id=episode.episode,
        trajectory_id=f"{episode.episode}/{episode.domain}",
        agent=atif.Agent(
            name="mcp-client",
            version="unknown",
            tool_definitions=tools,
            extra={"environment": f"aw-mcp {__version__}", "domain": episode.domain},
        ),
        steps=steps,
        final_metrics=atif.FinalMetrics(total_steps=len(steps)),
        notes="Recorded by aw-mcp: every observation was answered by a simulated world "
        "(a language world model, a fault rule or a replay; extra.aw_mcp.source says which).",
    )


def export_atif(
    episodes: list[RecordedEpisode], out: Path, resolver: DomainResolver
) -> dict[Path, int]:
    """One ATIF JSON file per episode, ``out/<domain>_atif/<episode>-<hash>.json``."""
    trajectories = [(e, atif_trajectory(e, resolver)) for e in episodes]  # all, before writing
    written = {}
    for episode, trajectory in trajectories:
        folder = out / f"{episode.domain}_atif"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / (record_file_name(episode.episode).removesuffix(".jsonl") + ".json")
        text = json.dumps(trajectory.to_json_dict(), ensure_ascii=False, indent=1) + "\n"
        # A lone surrogate in an id or text is written as its JSON escape, as records are.
        path.write_text(text, encoding="utf-8", errors="backslashreplace")
        written[path] = 1
    return written


def export_records(
    episodes: list[RecordedEpisode],
    out: Path,
    fmt: ExportFormat,
    profile: PromptProfile,
    resolver: DomainResolver,
) -> dict[Path, int]:
    """Write ``<domain>_test.jsonl`` (agentworldbench), ``<domain>_chat.jsonl`` (chat) or
    ATIF files into ``out``; returns the samples, episodes or trajectories written per file."""
    if fmt == "atif":
        return export_atif(episodes, out, resolver)
    lines: dict[str, list[str]] = {}
    for episode in episodes:
        if fmt == "agentworldbench":
            rows: list[Any] = bench_samples(episode, profile, resolver)
            name = f"{episode.domain}_test.jsonl"
        else:
            rows = [render_episode(episode, profile, resolver).model_dump(exclude_none=True)]
            name = f"{episode.domain}_chat.jsonl"
        lines.setdefault(name, []).extend(json.dumps(r, ensure_ascii=False) for r in rows)
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    for name, rows in lines.items():
        path = out / name
        path.write_text("\n".join(rows) + "\n", encoding="utf-8")
        written[path] = len(rows)
    return written

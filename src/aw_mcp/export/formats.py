"""The files ``aw-mcp export`` writes from record directories.

Two file formats are built on it:

- AgentWorldBench (``<domain>_test.jsonl``): one sample per turn with ``task``, ``id``,
  ``prompt`` (every turn's action message), ``response`` (every turn's observation message),
  ``current_prompt``, ``system_str``, ``turn_idx`` (1-based) and ``total_turns``. The domain's
  demonstrations, which the server sends as example turns, are appended to ``system_str``
  (the format has no place for them in the turn lists).
- chat (``<domain>_chat.jsonl``): one line per episode, ``{"messages": [...]}``; each assistant
  message says whether it is one of the episode's observations (``"observation": true``) or a
  demonstration (false).

Where a record has the step's real state (``CallRecord.state``: what the call read and what it
changed, measured in a sandbox), an AgentWorldBench sample carries its turn's as ``state`` and
a chat observation message its own; a profile that keeps state (``--profile small-state``)
also writes it in the text, as the server would.

A third is the agent's side of the same records, not the world model's:

- ATIF (``<domain>_atif/<episode>.json``, the Agent Trajectory Interchange Format of Harbor /
  Terminal-Bench, built with the ``atif`` package's pydantic models): one trajectory per
  episode, one agent step per recorded call (refused and failed calls included), its tool call
  and the observation the agent got back. What ATIF has no field for (where the answer came
  from, the faults that fired, the world conditions, the step's state and view) is kept in each
  step's ``extra.aw_mcp``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from aw_mcp import __version__
from aw_mcp.episode.prompt import PromptProfile
from aw_mcp.export.rendering import DomainResolver, ExportError, render_episode
from aw_mcp.records.calls import SURFACE_METHODS
from aw_mcp.records.reader import RecordedEpisode
from aw_mcp.records.sink import record_file_name

if TYPE_CHECKING:
    import atif

ExportFormat = Literal["agentworldbench", "chat", "atif"]
ATIF_SCHEMA_VERSION = "ATIF-v1.8"  # what the pinned ``atif`` package implements


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
    states = [m.state for m in messages[head + 1 :: 2]]
    samples = []
    for k in range(1, len(prompts) + 1):
        sample = bench_sample(
            rendered.domain, f"{rendered.episode}-{k}", system, prompts, responses, k
        )
        if states[k - 1] is not None:  # the asked-for step as the sandbox measured it
            sample["state"] = states[k - 1]
        samples.append(sample)
    return samples


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
        result = atif.ObservationResult(
            source_call_id=call_id, content=record.observation, extra={"is_error": record.is_error}
        )
        if record.tool in SURFACE_METHODS:
            # A resource read, a prompt get or a completion is no tool call (the trajectory's
            # tools are the domain's): an action of the agent's that is no tool, with the MCP
            # request as its message and in extra.aw_mcp.request.
            kept["request"] = {"method": record.tool, "params": record.arguments}
            message = f"{record.tool} {json.dumps(record.arguments, ensure_ascii=False)}"
            tool_calls = None
            result = result.model_copy(update={"source_call_id": None})
        else:
            message = ""  # the agent's own text is not part of an MCP call
            tool_calls = [
                atif.ToolCall(
                    tool_call_id=call_id, function_name=record.tool, arguments=record.arguments
                )
            ]
        steps.append(
            atif.Step(
                step_id=step_id,
                timestamp=_timestamp(record.started_at),
                source="agent",
                message=message,
                tool_calls=tool_calls,
                observation=atif.Observation(results=[result]),
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

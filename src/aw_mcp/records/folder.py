"""What a record directory holds beside its episodes' JSONL files, and where.

- ``world.yaml``: the world its episodes share (the ``aw-mcp serve --world`` shape);
- ``worlds/<episode>.yaml``: the world one episode ran in, where each ran in its own;
- ``tools/<domain>.json``: the real server's ``tools/list`` (``aw-mcp record``,
  ``aw-mcp generate``), which mirrors the domain for replay, export and training.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aw_mcp.domain.loader import world_file_text
from aw_mcp.domain.models import WorldSpec
from aw_mcp.records.reader import RecordedEpisode, load_record_dir

CAPTURES_FOLDER = "tools"  # aw-mcp record keeps the real server's tools/list here


def recorded_date_fact(directory: Path) -> str:
    """When the episodes in ``directory`` ran: the clock their file times and dates show."""
    started = [r.started_at for e in load_record_dir(directory) for r in e.records]
    if not started:
        return "the real current date and time (UTC)"
    first, last = (datetime.fromtimestamp(t, UTC) for t in (min(started), max(started)))
    return (
        f"{first:%Y-%m-%d %H:%M} UTC (the episodes ran from then until {last:%Y-%m-%d %H:%M} "
        "UTC: file times, commit dates and clocks show that real time)"
    )


def write_world_file(
    path: Path, world: dict[str, Any], what: str, simulator: str, serve: str | None = None
) -> None:
    """``world`` as a world file (:func:`world_file_text`) at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(world_file_text(world, what, serve or f"--simulator {simulator}"), "utf-8")


# Per-episode worlds (generated episodes that each ran in a machine of their own): the world
# of episode E is EPISODE_WORLDS/E.yaml beside the records, layered on the domain's world.
EPISODE_WORLDS = "worlds"


def write_episode_world(directory: Path, episode: str, world: WorldSpec) -> Path:
    """Write the world episode ``episode`` of ``directory`` ran in."""
    path = directory / EPISODE_WORLDS / f"{episode}.yaml"
    write_world_file(
        path,
        world.model_dump(exclude_defaults=True),
        f"machine episode {episode} ran in",
        "terminal",
    )
    return path


def episode_worlds(directory: Path) -> dict[str, WorldSpec]:
    """The per-episode worlds of a record directory, by episode id (none: an empty dict)."""
    from aw_mcp.domain.loader import load_world

    folder = directory / EPISODE_WORLDS
    if not folder.is_dir():
        return {}
    return {path.stem: load_world(path) for path in sorted(folder.glob("*.yaml"))}


def record_dir_worlds(directory: Path, episodes: list[RecordedEpisode]) -> dict[str, WorldSpec]:
    """The world each of ``directory``'s ``episodes`` ran in, by episode id: the episode's
    own ``worlds/<episode>.yaml``, else the directory's ``world.yaml`` (the world its
    episodes share), else none (the domain's world as it is)."""
    from aw_mcp.domain.loader import load_world

    shared_file = directory / "world.yaml"
    shared = load_world(shared_file) if shared_file.is_file() else None
    own = episode_worlds(directory)
    worlds = {e.episode: own.get(e.episode, shared) for e in episodes}
    return {episode: world for episode, world in worlds.items() if world is not None}

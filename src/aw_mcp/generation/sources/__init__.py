"""Real sources of trajectories: one module per source, each exposing ``SOURCE``.

A source knows how to start its real tool (a bash sandbox, or real MCP servers in a sandbox),
which scripted episodes it runs (split into training and held-out templates), the pinned
versions of what it runs, and the world facts written next to its records.
``aw-mcp generate --list`` lists them; ``aw-mcp generate NAME ...`` runs one. Adding a source
is adding a module here and its name to :data:`SOURCE_NAMES`.
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path
from typing import Protocol

from aw_mcp.errors import UserInputError

# name -> module (aw_mcp.generation.sources.<module>); imported only when used.
SOURCE_NAMES: dict[str, str] = {
    "terminal": "terminal",
    "os": "os_home",
    "swe": "swe_repo",
    "everything": "everything",
    "memory": "memory",
    "time": "time_zones",
    "sequential-thinking": "sequential_thinking",
    "fetch": "fetch",
    "sqlite": "sqlite",
    "duckdb": "duckdb_shop",
    "calculator": "calculator",
    "excel": "excel_workbooks",
    "text-editor": "text_editor",
    "web": "web",
}


class Source(Protocol):
    """What ``aw-mcp generate`` needs of a source."""

    name: str
    summary: str  # one line for --list
    versions: dict[str, str]  # package -> the pinned version it was recorded with

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def generate(self, args: argparse.Namespace) -> list[Path]:
        """Write the episodes (and world.yaml) into ``args.out``; the paths written."""
        ...


def source(name: str) -> Source:
    """The source ``name``; an unknown name is a UserInputError naming the known ones."""
    if name not in SOURCE_NAMES:
        raise UserInputError(f"no source {name!r}; sources: {', '.join(SOURCE_NAMES)}")
    module = importlib.import_module(f"{__name__}.{SOURCE_NAMES[name]}")
    found: Source = module.SOURCE
    return found


def all_sources() -> list[Source]:
    return [source(name) for name in SOURCE_NAMES]

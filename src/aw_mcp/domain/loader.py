"""Find and load domain files: a bundled name (``terminal``) or a path to a user's YAML."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aw_mcp.domain.models import DomainSpec, WorldSpec
from aw_mcp.files.bundled import bundled_names, resolve_data_file
from aw_mcp.files.yaml import dump_yaml, load_yaml_file


def bundled_domain_names() -> list[str]:
    return bundled_names("simulators")


def resolve_domain_path(name_or_path: str) -> Path:
    return resolve_data_file("simulators", name_or_path, "simulator")


def load_domain(name_or_path: str) -> DomainSpec:
    """Load a domain by bundled name or file path; raise DataFileError naming file and line."""
    return load_yaml_file(resolve_domain_path(name_or_path), DomainSpec)


def load_world(path: str | Path) -> WorldSpec:
    """Load a user's ``--world FILE.yaml`` (same shape as a domain's ``world:`` block)."""
    return load_yaml_file(path, WorldSpec)


def world_file_text(world: dict[str, Any], what: str, serve: str) -> str:
    """A ``--world`` file: ``world`` (a dumped WorldSpec) as YAML under a header naming what
    it describes and how to serve it (``serve``: the flags that pick the domain)."""
    header = f"# World facts of the {what}.\n# Pass with: aw-mcp serve {serve} --world THIS_FILE\n"
    return header + dump_yaml(world)

"""Find and load domain files: a bundled name (``terminal``) or a path to a user's YAML."""

from __future__ import annotations

from pathlib import Path

from aw_mcp.data_files import bundled_dir
from aw_mcp.domain.models import DomainSpec, WorldSpec
from aw_mcp.yaml_files import DataFileError, load_yaml_file


def bundled_domain_names() -> list[str]:
    return sorted(p.stem for p in bundled_dir("simulators").glob("*.yaml"))


def resolve_domain_path(name_or_path: str) -> Path:
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        return path
    candidate = bundled_dir("simulators") / f"{name_or_path}.yaml"
    if not candidate.exists():
        known = ", ".join(bundled_domain_names())
        raise DataFileError(
            name_or_path, [(None, f"no bundled simulator of that name (bundled: {known})")]
        )
    return candidate


def load_domain(name_or_path: str) -> DomainSpec:
    """Load a domain by bundled name or file path; raise DataFileError naming file and line."""
    return load_yaml_file(resolve_domain_path(name_or_path), DomainSpec)


def load_world(path: str | Path) -> WorldSpec:
    """Load a user's ``--world FILE.yaml`` (same shape as a domain's ``world:`` block)."""
    return load_yaml_file(path, WorldSpec)

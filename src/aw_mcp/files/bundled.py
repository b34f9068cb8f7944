"""Where the bundled data folders (``simulators/``, ``faults/``) are found.

In a wheel they are copied into ``aw_mcp/data/``; in a source checkout (editable install,
tests) they stand at the repository root. Both layouts are looked up, wheel first.
"""

from __future__ import annotations

from pathlib import Path

from aw_mcp.files.yaml import DataFileError

_PACKAGE_DIR = Path(__file__).resolve().parents[1]  # aw_mcp/


def bundled_dir(name: str) -> Path:
    """The folder of bundled data files called ``name`` ("simulators" or "faults")."""
    for candidate in (_PACKAGE_DIR / "data" / name, _PACKAGE_DIR.parents[1] / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"the bundled {name}/ folder is missing from this installation")


def bundled_names(folder: str) -> list[str]:
    """The names (file stems) of the bundled YAML files in ``folder``."""
    return sorted(p.stem for p in bundled_dir(folder).glob("*.yaml"))


def resolve_data_file(folder: str, name_or_path: str, what: str) -> Path:
    """A path as given (``x.yaml`` or an existing file), or a bundled ``folder/NAME.yaml``."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.is_file():
        return path
    candidate = bundled_dir(folder) / f"{name_or_path}.yaml"
    if not candidate.exists():
        known = ", ".join(bundled_names(folder))
        raise DataFileError(
            name_or_path, [(None, f"no bundled {what} of that name (bundled: {known})")]
        )
    return candidate

"""Where the bundled data folders (``simulators/``, ``faults/``) are found.

In a wheel they are copied into ``aw_mcp/data/``; in a source checkout (editable install,
tests) they stand at the repository root. Both layouts are looked up, wheel first.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def bundled_dir(name: str) -> Path:
    """The folder of bundled data files called ``name`` ("simulators" or "faults")."""
    for candidate in (_PACKAGE_DIR / "data" / name, _PACKAGE_DIR.parents[1] / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"the bundled {name}/ folder is missing from this installation")

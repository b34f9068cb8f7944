"""Every third-party module the package imports is a declared dependency: a runtime one, or
one of an optional feature's extra (not the test extra: tests are not the package)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _imported_top_level_modules() -> set[str]:
    found = set()
    for path in (REPO / "src" / "aw_mcp").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - {"aw_mcp", "__future__"}


def _names(requirements: list[str]) -> set[str]:
    return {
        re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0].lower().replace("_", "-") for r in requirements
    }


def test_every_imported_module_is_declared():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    runtime = _names(project["dependencies"])
    optional = project["optional-dependencies"]
    extras = _names([r for name, group in optional.items() if name != "test" for r in group])
    owners = packages_distributions()
    missing = {}
    for module in _imported_top_level_modules():
        distributions = {d.lower().replace("_", "-") for d in owners.get(module, [module])}
        if not distributions & (runtime | extras):
            missing[module] = sorted(distributions)
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"

"""The package map of docs/architecture.md holds: every import between the packages (and the
top-level modules) of src/aw_mcp is one its "may import" column allows, and none runs back up.

Imports inside functions and under ``TYPE_CHECKING`` count: they are arrows all the same."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "aw_mcp"
MAP = REPO / "docs" / "architecture.md"


def units(package: Path) -> set[str]:
    """The package's subpackages and top-level modules: the rooms of the map."""
    found = set()
    for path in package.iterdir():
        if path.is_dir() and (path / "__init__.py").is_file():
            found.add(path.name)
        elif path.suffix == ".py" and path.name != "__init__.py":
            found.add(path.stem)
    return found


def imported_units(path: Path, package: Path) -> list[tuple[str, int]]:
    """The units (other than its own) that the file ``path`` imports anywhere, with the line."""
    parts = list(path.relative_to(package).with_suffix("").parts)
    own = parts[0]
    rooms = units(package)
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level:  # relative to this file's folder
            folder = parts[:-1]
            base = [package.name, *folder[: len(folder) - node.level + 1]]
            names = [".".join([*base, *([node.module] if node.module else [])])]
            names += [f"{names[0]}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        targets = {
            dotted[1]
            for dotted in (name.split(".") for name in names)
            if dotted[0] == package.name and len(dotted) > 1 and dotted[1] in rooms - {own}
        }
        found += [(target, node.lineno) for target in sorted(targets)]
    return found


def import_arrows(package: Path) -> dict[tuple[str, str], list[str]]:
    """(unit, unit it imports) -> where, for every import that crosses units."""
    arrows: dict[tuple[str, str], list[str]] = {}
    for path in sorted(package.rglob("*.py")):
        source = path.relative_to(package).with_suffix("").parts[0]
        for target, line in imported_units(path, package):
            where = f"{path.relative_to(package.parent)}:{line} imports {target}"
            arrows.setdefault((source, target), []).append(where)
    return arrows


def package_map(text: str) -> dict[str, set[str]]:
    """The table between the packages markers: unit -> the units it may import, in order."""
    table = text.split("<!-- packages:start -->")[1].split("<!-- packages:end -->")[0]
    allowed: dict[str, set[str]] = {}
    for row in table.strip().splitlines()[2:]:
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        unit = cells[0].strip("`").removesuffix("/").removesuffix(".py")
        allowed[unit] = set(re.findall(r"`([a-z_]+)`", cells[-1]))
    return allowed


def map_problems(package: Path, text: str) -> list[str]:
    """Everything wrong between the code of ``package`` and the map ``text``."""
    allowed = package_map(text)
    problems = [f"not on the map: {unit}" for unit in sorted(units(package) - set(allowed))]
    problems += [f"on the map, not in the code: {u}" for u in sorted(set(allowed) - units(package))]
    order = list(allowed)
    for position, (unit, targets) in enumerate(allowed.items()):
        if below := targets - set(order[:position]):
            problems.append(f"the map lets {unit} import {sorted(below)}, not above it")
    for (source, target), places in sorted(import_arrows(package).items()):
        if target not in allowed.get(source, set()):
            problems += [f"not allowed: {where}" for where in places]
    return problems


def test_the_code_keeps_to_the_package_map():
    problems = map_problems(PACKAGE, MAP.read_text(encoding="utf-8"))
    assert not problems, "docs/architecture.md and src/aw_mcp disagree:\n" + "\n".join(problems)


TOY_MAP = """<!-- packages:start -->
| package | owns | may import |
|---|---|---|
| `base.py` | the bottom | |
| `low/` | a package | `base` |
| `high/` | a package | `base`, `low` |
<!-- packages:end -->"""


def toy_package(root: Path, files: dict[str, str]) -> Path:
    package = root / "toy"
    for name, text in {"__init__.py": "", "low/__init__.py": "", "high/__init__.py": "",
                       "base.py": "", **files}.items():  # fmt: skip
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text, encoding="utf-8")
    return package


def test_a_toy_package_that_keeps_to_its_map_passes(tmp_path):
    package = toy_package(tmp_path, {"high/a.py": "from toy.low import b\nimport toy.base\n"})
    assert map_problems(package, TOY_MAP) == []


def test_an_upward_import_in_a_function_or_under_type_checking_is_caught(tmp_path):
    package = toy_package(
        tmp_path,
        {
            "low/b.py": "def f():\n    from toy.high import a\n",
            "low/c.py": "import typing\nif typing.TYPE_CHECKING:\n    import toy.high.a\n",
            "low/d.py": "from toy import high\n",
            "low/e.py": "from ..high import a\n",
        },
    )
    problems = map_problems(package, TOY_MAP)
    assert len(problems) == 4 and all("imports high" in p for p in problems), problems


def test_a_map_that_runs_back_up_or_misses_a_package_is_caught(tmp_path):
    package = toy_package(tmp_path, {"extra.py": ""})
    looped = TOY_MAP.replace("| `base` |", "| `base`, `high` |")
    assert map_problems(package, looped) == [
        "not on the map: extra",
        "the map lets low import ['high'], not above it",
    ]

"""Source ``swe``: a repository through the REAL git and filesystem MCP servers and a real bash.

``mcp-server-git`` (PyPI) and ``@modelcontextprotocol/server-filesystem`` (allowed directory
``/workspace``), run as user ``dev`` on a seeded repository ``/workspace/invoice-calc`` (three
commits with fixed dates, so their hashes are the same on every run; the rounding bug of the
bundled SWE world included). The world's two shell tools are answered by one real bash per
episode in the same sandbox, as ``dev``, started in the repository: ``run_command`` runs its
line there (``cd`` persists between calls) and ``run_tests`` runs Debian's pytest from the
repository's root. Scripts look around, run the tests (1 failed, 3 passed), read the code,
fix the bug, run the tests again (4 passed), diff, stage, commit, branch, log and show.

Held-out rule (``--split heldout``): the command families of :data:`HELDOUT_FAMILIES` (the
programs ``head``, ``sed``, ``wc``, ``find``, ``git show``, ``git switch`` and the pytest
options ``-v``, ``-k``, ``--tb``) occur only in held-out episodes, every one of which has
some; the MCP calls and the episode's shape are shared by both splits.
"""

from __future__ import annotations

import os
import random
import shlex
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aw_mcp.generation.mcp_servers import Call, McpWorld, Split, python_server
from aw_mcp.generation.shell_tools import RUN_COMMAND, ShellTool
from aw_mcp.generation.sources.os_home import FILESYSTEM_PACKAGE, FILESYSTEM_VERSION

GIT_PACKAGE = "mcp-server-git"
GIT_VERSION = "2026.10.19"

REPO = "/workspace/invoice-calc"
TOTALS = '''from decimal import Decimal


def round_cents(amount: Decimal) -> Decimal:
    """Round to whole cents, half up."""
    return Decimal(int(amount * 100)) / 100


def line_total(quantity: int, unit_price: Decimal) -> Decimal:
    return round_cents(quantity * unit_price)


def invoice_total(lines: list[tuple[int, Decimal]], tax_rate: Decimal) -> Decimal:
    subtotal = sum((line_total(q, p) for q, p in lines), Decimal("0"))
    return round_cents(subtotal * (1 + tax_rate))
'''
TESTS = """from decimal import Decimal

from invoice_calc.totals import invoice_total, line_total, round_cents


def test_line_total():
    assert line_total(3, Decimal("1.10")) == Decimal("3.30")


def test_invoice_total():
    assert invoice_total([(2, Decimal("5.00"))], Decimal("0.20")) == Decimal("12.00")


def test_round_cents_half_up():
    assert round_cents(Decimal("2.675")) == Decimal("2.68")


def test_empty_invoice():
    assert invoice_total([], Decimal("0.20")) == Decimal("0")
"""
# The tests import the package from src/ (it is not installed): the third commit, which adds
# them, tells pytest so. Commits one and two keep the hashes of the earlier recordings.
PYPROJECT = """[project]
name = "invoice-calc"
version = "0.1.0"
requires-python = ">=3.11"

[tool.pytest.ini_options]
pythonpath = ["src"]
"""
SWE_COMMITS = [
    (
        "Initial commit",
        "2026-11-27T10:00:00+00:00",
        {
            "README.md": "# invoice-calc\n\nInvoice totals with tax, rounded to cents.\n",
            "pyproject.toml": PYPROJECT.split("\n[tool.pytest")[0],
            "src/invoice_calc/__init__.py": "",
        },
    ),
    (
        "Add line totals",
        "2026-11-27T15:30:00+00:00",
        {
            "src/invoice_calc/totals.py": TOTALS.split("\n\ndef invoice_total")[0] + "\n",
        },
    ),
    (
        "Add invoice_total with tax",
        "2026-11-28T11:15:00+00:00",
        {
            "src/invoice_calc/totals.py": TOTALS,
            "tests/test_totals.py": TESTS,
            "pyproject.toml": PYPROJECT,
        },
    ),
]
GIT_AUTHOR = ("Dev Example", "dev@example.com")


def _git(repo: Path, *args: str, date: str | None = None) -> str:
    env = {
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_SYSTEM": "/dev/null",
        "TZ": "UTC",
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(repo),
    }
    if date:
        env |= {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
    ).stdout


def _seed_swe(root: Path) -> None:
    repo = root / "invoice-calc"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.name", GIT_AUTHOR[0])
    _git(repo, "config", "user.email", GIT_AUTHOR[1])
    for message, date, files in SWE_COMMITS:
        for rel, text in files.items():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            (repo / rel).write_text(text)
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", message, date=date)


TOTALS_PATH = f"{REPO}/src/invoice_calc/totals.py"
NODE = "tests/test_totals.py::test_round_cents_half_up"
# The fix (old text, new text); the first needs ROUND_HALF_UP imported by a second edit.
FIXES = [
    (
        "return Decimal(int(amount * 100)) / 100",
        'return amount.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)',
    ),
    (
        "return Decimal(int(amount * 100)) / 100",
        'return Decimal(int(amount * 100 + Decimal("0.5"))) / 100',
    ),
]
IMPORT_EDIT = {
    "oldText": "from decimal import Decimal",
    "newText": "from decimal import ROUND_HALF_UP, Decimal",
}

# The world's shell tools: run_command runs its line in the episode's bash (which starts in
# the repository; `cd` persists); run_tests runs pytest from the repository's root whatever
# the shell's directory, as the bundled world's tool describes.
RUN_TESTS = ShellTool(
    name="run_tests", program=("python3", "-m", "pytest"), words=("extra_args", "target"), cwd=REPO
)


def _sh(command: str) -> Call:
    return ("run_command", {"command": command})


def _pytest(target: str | None = None, *extra_args: str) -> Call:
    arguments: dict[str, Any] = {"target": target} if target else {}
    if extra_args:
        arguments["extra_args"] = list(extra_args)
    return ("run_tests", arguments)


def _truncated(amount: str) -> str:
    return (
        "PYTHONPATH=src python3 -c 'from decimal import Decimal; "
        f'from invoice_calc.totals import round_cents; print(round_cents(Decimal("{amount}")))\''
    )


@dataclass(frozen=True)
class ShellPools:
    """The shell calls one split's episodes draw from, by the step they serve."""

    look: tuple[str, ...]  # a first look at the repository
    inspect: tuple[str, ...]  # reading the code, reproducing the bug
    mistakes: tuple[str, ...]  # commands that fail (exit code not 0)
    tests: tuple[Call, ...]  # test runs: run_tests, or pytest through run_command
    branch: str  # the command line that makes and checks out {branch}
    review: tuple[str, ...]  # looking at the change before staging it
    after: tuple[str, ...]  # after the commit


TRAIN_POOLS = ShellPools(
    look=(
        "ls",
        "ls src/invoice_calc tests",
        "git log --oneline",
        "git status --short",
        "cat README.md",
    ),
    inspect=(
        "cat src/invoice_calc/totals.py",
        "grep -rn round_cents src tests",
        'grep -n "def " src/invoice_calc/totals.py',
        "cat pyproject.toml",
        *(_truncated(amount) for amount in ("2.675", "0.125", "1.005", "10.555")),
    ),
    mistakes=(
        "python3 -c 'import invoice_calc'",  # not installed: src/ is not on the path
        "cat src/invoice_calc/rounding.py",
        "make test",
        "pytest tests/test_rounding.py",
    ),
    tests=(
        _pytest(),
        _pytest(None, "-q"),
        _pytest(None, "-x"),
        _pytest(None, "-x", "-q"),
        _pytest("tests/test_totals.py"),
        _pytest(NODE),
        _pytest(NODE, "-q"),
        _sh("python3 -m pytest -q"),
        _sh("python3 -m pytest -x -q"),
    ),
    branch="git checkout -b {branch}",
    review=("git diff", "git diff --stat", "git status --short"),
    after=("git log --oneline", "git log --oneline -n 2", "git status --short", "ls"),
)
HELDOUT_POOLS = ShellPools(
    look=(
        "find . -name '*.py' -not -path './.git/*' | sort",
        "wc -l src/invoice_calc/*.py tests/*.py",
        "head -n 3 README.md",
    ),
    inspect=(
        "head -n 8 src/invoice_calc/totals.py",
        "sed -n '4,7p' src/invoice_calc/totals.py",
        "git show --stat HEAD",
        "find src -name '*.py'",
    ),
    mistakes=(
        "head -n 5 src/invoice_calc/rounding.py",
        "sed -n 1,5p setup.py",
        "git show v0.1.0",
    ),
    tests=(
        _pytest(None, "-v"),
        _pytest(None, "-k", "round"),
        _pytest(None, "--tb=short"),
        _pytest(None, "-v", "-k", "total"),
        _pytest("tests/test_totals.py", "--tb=line"),
        _sh("python3 -m pytest -v"),
        _sh("python3 -m pytest --tb=short -q"),
    ),
    branch="git switch -c {branch}",
    review=("sed -n '4,7p' src/invoice_calc/totals.py", "wc -l src/invoice_calc/totals.py"),
    after=("git show --stat HEAD", "git show --stat HEAD~1"),
)
POOLS: dict[Split, ShellPools] = {"train": TRAIN_POOLS, "heldout": HELDOUT_POOLS}
HELDOUT_FAMILIES = frozenset(
    {"head", "sed", "wc", "find", "git show", "git switch", "pytest -v", "pytest -k", "pytest --tb"}
)


def shell_families(tool: str, arguments: dict[str, Any]) -> set[str]:
    """The command families of a shell call, for the held-out rule: every program of a
    ``run_command`` line (git with its subcommand), ``pytest`` and ``pytest <option>`` for
    each option pytest gets (``run_tests``' extra_args, or a pytest run in the line)."""
    if tool == "run_tests":
        return _pytest_families(arguments.get("extra_args", []))
    if tool != "run_command":
        return set()
    lexer = shlex.shlex(arguments["command"], posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    segments: list[list[str]] = [[]]
    for token in lexer:
        if token and set(token) <= set("|&;()<>"):
            segments.append([])
        else:
            segments[-1].append(token)
    families: set[str] = set()
    for words in segments:
        while words and "=" in words[0] and not words[0].startswith("-"):
            words = words[1:]  # VAR=value before the program
        if not words:
            continue
        if words[0] == "git" and len(words) > 1:
            families.add(f"git {words[1]}")
        elif words[:3] == ["python3", "-m", "pytest"]:
            families |= _pytest_families(words[3:])
        elif words[0] == "pytest":
            families |= _pytest_families(words[1:])
        else:
            families.add(words[0])
    return families


def _pytest_families(options: list[str]) -> set[str]:
    return {"pytest"} | {f"pytest {o.split('=')[0]}" for o in options if o.startswith("-")}


def _episode(rng: random.Random, pools: ShellPools) -> list[Call]:
    """One episode: look, run the tests (1 failed, 3 passed), read the code, maybe branch,
    fix, run the tests again (4 passed; after a half-made fix 4 failed first), review, stage,
    commit, then a few more looks; at most 12 calls (the steps before the commit fit)."""
    r = REPO
    branch = rng.choice(["fix/round-half-up", "fix-rounding", "bugfix/cents"])
    fix = rng.choice(FIXES)
    look: list[Call] = [
        ("git_status", {"repo_path": r}),
        ("git_log", {"repo_path": r}),
        ("list_directory", {"path": r}),
        ("directory_tree", {"path": f"{r}/src"}),
    ]
    calls: list[Call] = [rng.choice(look) if rng.random() < 0.4 else _sh(rng.choice(pools.look))]
    if rng.random() < 0.85:
        calls.append(rng.choice(pools.tests))
    reads: list[Call] = [("read_text_file", {"path": TOTALS_PATH})]
    reads += [_sh(line) for line in pools.inspect]
    second = rng.random()  # a second look at the code, or a command that fails, or neither
    calls += rng.sample(reads, 2 if second < 0.35 else 1)
    if 0.35 <= second < 0.65:
        calls.insert(len(calls) - rng.randint(0, 1), _sh(rng.choice(pools.mistakes)))
    if (how := rng.random()) < 0.2:
        calls += [
            ("git_create_branch", {"repo_path": r, "branch_name": branch}),
            ("git_checkout", {"repo_path": r, "branch_name": branch}),
        ]
    elif how < 0.4:
        calls.append(_sh(pools.branch.format(branch=branch)))
    calls.append(
        ("edit_file", {"path": TOTALS_PATH, "edits": [{"oldText": fix[0], "newText": fix[1]}]})
    )
    if "ROUND_HALF_UP" in fix[1]:
        if rng.random() < 0.5:  # tests run before the import is added: 4 failed (NameError)
            calls.append(rng.choice(pools.tests))
        calls.append(("edit_file", {"path": TOTALS_PATH, "edits": [IMPORT_EDIT]}))
    calls.append(rng.choice(pools.tests))
    if len(calls) <= 9 and rng.random() < 0.6:  # room for a review, add and commit
        calls.append(
            rng.choice([("git_diff_unstaged", {"repo_path": r}), _sh(rng.choice(pools.review))])
        )
    message = rng.choice(
        ["Round cents half up", "Fix round_cents truncation", "Fix rounding of cents"]
    )
    calls += [
        ("git_add", {"repo_path": r, "files": ["src/invoice_calc/totals.py"]}),
        ("git_commit", {"repo_path": r, "message": message}),
    ]
    extra: list[Call] = [
        ("git_log", {"repo_path": r, "max_count": rng.randint(2, 4)}),
        ("git_show", {"repo_path": r, "revision": "HEAD~1"}),
        ("git_branch", {"repo_path": r, "branch_type": rng.choice(["local", "all"])}),
        ("git_status", {"repo_path": r}),
        ("read_text_file", {"path": f"{r}/tests/test_totals.py", "head": rng.randint(3, 8)}),
        ("git_checkout", {"repo_path": r, "branch_name": "does-not-exist"}),
        ("search_files", {"path": r, "pattern": rng.choice(["*.py", "**/*.py", "**/test_*"])}),
        (
            "write_file",
            {
                "path": f"{r}/CHANGELOG.md",
                "content": "# Changelog\n\n- round_cents rounds half up\n",
            },
        ),
        *(_sh(line) for line in rng.sample(pools.after, 2)),
    ]
    calls += rng.sample(extra, rng.randint(1, 3))
    return calls[:12]


def _swe_script(rng: random.Random) -> list[Call]:
    return _episode(rng, TRAIN_POOLS)


def _swe_heldout_script(rng: random.Random) -> list[Call]:
    return _episode(rng, HELDOUT_POOLS)


# Measured in the episodes' shell (as dev, Debian's /usr/bin/python3): what the shell
# tools run, into source.yaml's versions and the toolchain fact.
SHELL_VERSIONS = {
    "python3": "python3 -c 'import platform; print(platform.python_version())'",
    "python3-pytest": "python3 -c 'import pytest; print(pytest.__version__)'",
    "git": "git --version | sed 's/^git version //'",
}


def seeded_git_log() -> str:
    """The seeded repository's ``git log`` (hash, subject, date), newest first: the same on
    every run (fixed contents, author and dates)."""
    with tempfile.TemporaryDirectory() as tmp:
        _seed_swe(Path(tmp))
        return _git(Path(tmp) / "invoice-calc", "log", "--format=%h %s (%ad)", "--date=short")


def swe_world_facts(versions: dict[str, str]) -> dict[str, Any]:
    """The seeded repository's facts, its real commit hashes included, and the toolchain of
    ``versions`` (those of :data:`SHELL_VERSIONS` measured in the sandbox's shell)."""
    python = versions["python3"]
    pytest, git = versions["python3-pytest"], versions["git"]
    return {
        "facts": {
            "repository": f"{REPO} (git, branch main, clean working tree)",
            "working_directory": REPO,
            "user": f"dev (git author '{GIT_AUTHOR[0]} <{GIT_AUTHOR[1]}>')",
            "toolchain": f"Python {python} (/usr/bin/python3), pytest {pytest}, git {git}; "
            f"tools are {GIT_PACKAGE} {GIT_VERSION} and {FILESYSTEM_PACKAGE} "
            f"{FILESYSTEM_VERSION} (allowed directory /workspace), run_command (bash in the "
            "repository; cd persists between calls) and run_tests (python3 -m pytest "
            "[extra_args] [target] from the repository's root)",
            "files": "README.md, pyproject.toml, src/invoice_calc/__init__.py, "
            "src/invoice_calc/totals.py, tests/test_totals.py",
            "git_log": f"{len(SWE_COMMITS)} commits on main, newest first: "
            + "; ".join(seeded_git_log().splitlines()),
            "tests": "tests/test_totals.py has test_line_total, test_invoice_total, "
            "test_round_cents_half_up, test_empty_invoice; pyproject.toml puts src/ on "
            "pytest's path (the package is not installed: plain python3 needs "
            "PYTHONPATH=src to import it); test_round_cents_half_up fails while round_cents "
            "truncates (round_cents(Decimal('2.675')) returns 2.67, expected 2.68)",
        },
        "replace_notes": True,
        "notes": [
            "src/invoice_calc/totals.py:\n" + TOTALS,
            "tests/test_totals.py:\n" + TESTS,
            "pyproject.toml:\n" + PYPROJECT,
        ],
    }


SOURCE = McpWorld(
    name="swe",
    summary="the real git and filesystem MCP servers and a real bash (run_command, run_tests "
    "with Debian's pytest) on a seeded /workspace/invoice-calc (needs root, mcp-server-git, "
    "the filesystem server and python3-pytest)",
    versions={GIT_PACKAGE: GIT_VERSION, FILESYSTEM_PACKAGE: FILESYSTEM_VERSION},
    mount_at="/workspace",
    user="dev",
    seed=_seed_swe,
    servers={
        "git": [python_server("git", "mcp-server-git")],
        "filesystem": ["mcp-server-filesystem", "/workspace"],
    },
    scripts={"train": _swe_script, "heldout": _swe_heldout_script},
    measure=swe_world_facts,
    shell_tools=[RUN_COMMAND, RUN_TESTS],
    shell_workdir=REPO,
    shell_versions=SHELL_VERSIONS,
    records_state=True,
    git_servers=["git"],
)

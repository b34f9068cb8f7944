"""Source ``swe``: a repository through the REAL git and filesystem MCP servers.

``mcp-server-git`` (PyPI) and ``@modelcontextprotocol/server-filesystem`` (allowed directory
``/workspace``), run as user ``dev`` on a seeded repository ``/workspace/invoice-calc`` (three
commits with fixed dates, so their hashes are the same on every run; the rounding bug of the
bundled SWE world included). Scripts read the code, fix the bug, diff, stage, unstage, commit,
branch, log and show.
"""

from __future__ import annotations

import os
import random
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from aw_mcp.trajectories.generate_mcp import Call, McpWorld
from aw_mcp.trajectories.sources.os_home import FILESYSTEM_PACKAGE, FILESYSTEM_VERSION

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
SWE_COMMITS = [
    (
        "Initial commit",
        "2026-11-27T10:00:00+00:00",
        {
            "README.md": "# invoice-calc\n\nInvoice totals with tax, rounded to cents.\n",
            "pyproject.toml": '[project]\nname = "invoice-calc"\nversion = "0.1.0"\n'
            'requires-python = ">=3.11"\n',
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


def _swe_script(rng: random.Random) -> list[Call]:
    r = REPO
    totals = f"{r}/src/invoice_calc/totals.py"
    branch = rng.choice(["fix/round-half-up", "fix-rounding", "bugfix/cents"])
    fix = rng.choice(
        [
            (
                "return Decimal(int(amount * 100)) / 100",
                'return amount.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)',
            ),
            (
                "return Decimal(int(amount * 100)) / 100",
                'return Decimal(int(amount * 100 + Decimal("0.5"))) / 100',
            ),
        ]
    )
    calls: list[Call] = [
        rng.choice(
            [
                ("git_status", {"repo_path": r}),
                ("git_log", {"repo_path": r}),
                ("list_directory", {"path": r}),
                ("directory_tree", {"path": f"{r}/src"}),
            ]
        ),
        ("read_text_file", {"path": totals}),
    ]
    if maybe_branch := rng.random() < 0.5:
        calls += [
            ("git_create_branch", {"repo_path": r, "branch_name": branch}),
            ("git_checkout", {"repo_path": r, "branch_name": branch}),
        ]
    calls += [
        ("edit_file", {"path": totals, "edits": [{"oldText": fix[0], "newText": fix[1]}]}),
        ("git_diff_unstaged", {"repo_path": r}),
    ]
    if "ROUND_HALF_UP" in fix[1]:
        calls.append(
            (
                "edit_file",
                {
                    "path": totals,
                    "edits": [
                        {
                            "oldText": "from decimal import Decimal",
                            "newText": "from decimal import ROUND_HALF_UP, Decimal",
                        }
                    ],
                },
            )
        )
    staged: Call = ("git_add", {"repo_path": r, "files": ["src/invoice_calc/totals.py"]})
    if rng.random() < 0.25:  # stage, change one's mind, look, stage again
        calls += [staged, ("git_reset", {"repo_path": r}), ("git_status", {"repo_path": r})]
    calls += [
        staged,
        rng.choice([("git_status", {"repo_path": r}), ("git_diff_staged", {"repo_path": r})]),
        (
            "git_commit",
            {
                "repo_path": r,
                "message": rng.choice(
                    ["Round cents half up", "Fix round_cents truncation", "Fix rounding of cents"]
                ),
            },
        ),
        ("git_log", {"repo_path": r, "max_count": rng.randint(2, 4)}),
    ]
    extra: list[Call] = [
        ("git_show", {"repo_path": r, "revision": "HEAD~1"}),
        ("git_branch", {"repo_path": r, "branch_type": rng.choice(["local", "all"])}),
        ("git_diff", {"repo_path": r, "target": "main" if maybe_branch else "HEAD~1"}),
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
        ("git_status", {"repo_path": r}),
    ]
    calls += rng.sample(extra, rng.randint(1, 3))
    return calls[:12]


def swe_world_facts() -> dict[str, Any]:
    """The seeded repository's facts, its real commit hashes included (fixed dates and
    contents make them the same on every run)."""
    with tempfile.TemporaryDirectory() as tmp:
        _seed_swe(Path(tmp))
        log = _git(Path(tmp) / "invoice-calc", "log", "--format=%h %s (%ad)", "--date=short")
    git_version = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout
    return {
        "facts": {
            "repository": f"{REPO} (git, branch main, clean working tree)",
            "working_directory": REPO,
            "user": f"dev (git author '{GIT_AUTHOR[0]} <{GIT_AUTHOR[1]}>')",
            "toolchain": f"{git_version.strip()}; tools are {GIT_PACKAGE} {GIT_VERSION} and "
            f"{FILESYSTEM_PACKAGE} {FILESYSTEM_VERSION} (allowed directory /workspace)",
            "files": "README.md, pyproject.toml, src/invoice_calc/__init__.py, "
            "src/invoice_calc/totals.py, tests/test_totals.py",
            "git_log": f"{len(SWE_COMMITS)} commits on main, newest first: "
            + "; ".join(line for line in log.splitlines()),
        },
        "replace_notes": True,
        "notes": [
            "src/invoice_calc/totals.py:\n" + TOTALS,
            "tests/test_totals.py:\n" + TESTS,
        ],
    }


SOURCE = McpWorld(
    name="swe",
    summary="the real git and filesystem MCP servers on a seeded /workspace/invoice-calc "
    "(needs root, mcp-server-git and the filesystem server)",
    versions={GIT_PACKAGE: GIT_VERSION, FILESYSTEM_PACKAGE: FILESYSTEM_VERSION},
    mount_at="/workspace",
    user="dev",
    seed=_seed_swe,
    servers={
        "git": ["mcp-server-git"],
        "filesystem": ["mcp-server-filesystem", "/workspace"],
    },
    scripts={"train": _swe_script},
    measure=swe_world_facts,
)

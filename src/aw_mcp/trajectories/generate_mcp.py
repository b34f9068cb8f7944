"""Generate real OS and SWE trajectories: scripted tool calls to REAL MCP servers, through
``aw-mcp record``, in sandboxes laid out like the bundled worlds.

- os: ``@modelcontextprotocol/server-filesystem`` (npm, binary ``mcp-server-filesystem``)
  serving ``/home/alex``, run as user ``alex``, the home seeded with a few documents;
- swe: ``mcp-server-git`` (PyPI) and the filesystem server, run as user ``dev`` on a seeded
  repository ``/workspace/invoice-calc`` (three commits with fixed dates, so their hashes are
  the same on every run; the rounding bug of the bundled SWE world included).

Each episode gets a fresh copy of the seed, bind-mounted at the world's path in private
namespaces (see sandbox.py); every server runs behind its own ``aw-mcp record`` proxy writing
the same episode file, and the driver calls them one at a time, so the call numbers run on
across servers. The scripts are drawn from a seeded RNG; observations are what the servers
answered (times, hashes as printed). A ``world.yaml`` beside the episodes describes the seed.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, MCPError

from aw_mcp.episode.store import RecordSink
from aw_mcp.progress_bar import counted
from aw_mcp.trajectories.record_proxy import proxy_target
from aw_mcp.trajectories.sandbox import SandboxUnavailable, sandboxed_command
from aw_mcp.trajectories.world_file import recorded_date_fact, write_world_file

Call = tuple[str, dict[str, Any]]


@dataclass
class McpWorld:
    """A world recorded from real MCP servers."""

    name: str
    mount_at: str  # where the seeded folder appears (must exist on the host)
    user: str
    seed: Callable[[Path], None]  # fills the folder mounted at mount_at
    servers: dict[str, list[str]]  # label -> command (run inside the sandbox)
    script: Callable[[random.Random], list[Call]]
    world: dict[str, Any] = field(default_factory=dict)

    def environment(self) -> dict[str, str]:
        home = f"/home/{self.user}" if self.mount_at == "/home" else self.mount_at
        path = os.pathsep.join(
            dict.fromkeys([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"])
        )
        return {"HOME": home, "USER": self.user, "PATH": path, "LANG": "C.UTF-8", "TZ": "UTC"}


def _proxy(world: McpWorld, out: Path, episode: str, root: Path, command: list[str]):
    """An ``aw-mcp record`` proxy in front of ``command`` run in the sandbox."""
    inner = sandboxed_command(
        root, world.mount_at, world.user, world.mount_at, world.environment(), command
    )
    return proxy_target(out, inner, "--domain", world.name, "--episode", episode)


async def _run_episode(world: McpWorld, out: Path, episode: str, calls: list[Call]) -> None:
    root = Path(tempfile.mkdtemp(prefix=f"aw-{world.name}-"))
    try:
        world.seed(root)
        owner: dict[str, Client] = {}
        async with AsyncExitStack() as stack:
            for label, command in world.servers.items():
                target = _proxy(world, out, episode, root, command)
                try:
                    client = await stack.enter_async_context(
                        Client(target, read_timeout_seconds=60)
                    )
                except Exception as exc:
                    raise SandboxUnavailable(
                        f"the {label} server ({' '.join(command)}) did not start as user "
                        f"{world.user} in the sandbox ({type(exc).__name__}); it must be "
                        "executable by that user (a virtualenv whose python lives under "
                        "/root is not)"
                    ) from None
                for listed in (await client.list_tools()).tools:
                    owner.setdefault(listed.name, client)
            for tool, arguments in calls:
                if tool not in owner:
                    raise RuntimeError(f"no server of world {world.name} has the tool {tool!r}")
                # A JSON-RPC error is recorded by the proxy (rpc-error); the episode goes on.
                with contextlib.suppress(MCPError):
                    await owner[tool].call_tool(tool, arguments)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def generate_mcp_world(
    world: McpWorld, out: Path, seed: int, episodes: int, quiet: bool = True
) -> list[Path]:
    """Record ``episodes`` scripted episodes of ``world`` into ``out`` with its world.yaml.
    Without ``quiet``, a progress bar counts the episodes on stderr."""
    for label, command in world.servers.items():
        if shutil.which(command[0], path=world.environment()["PATH"]) is None:
            raise SandboxUnavailable(f"the {label} server ({command[0]}) is not installed")
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for number in counted(range(episodes), world.name, "episode", quiet):
        episode = f"{world.name}-s{seed}-{number:04d}"
        path = RecordSink(out).path_for(episode)  # where the recording proxy writes it
        path.unlink(missing_ok=True)  # records append: a rerun must not double an episode
        calls = world.script(random.Random(f"{world.name}:{seed}:{number}"))
        anyio.run(_run_episode, world, out, episode, calls)
        paths.append(path)
    world.world["facts"]["date"] = recorded_date_fact(out)
    write_world_file(
        out / "world.yaml",
        world.world,
        f"recorded {world.name} episodes (the seed every episode starts from)",
        world.name,
    )
    return paths


# --- the OS world: a user's home through the filesystem server ----------------------------

HOME_ALEX = "/home/alex"
NOTES = (
    "TODO\n- renew passport (expires 2027-01-15)\n- send Q3 report to Dana by Friday\n"
    "- book dentist\n\nWi-Fi guest password: tulip-42\n"
)
OS_FILES = {
    "Documents/notes.txt": NOTES,
    "Documents/budget-2026.csv": "month,rent,food,travel\njan,1200,410,90\nfeb,1200,385,0\n"
    "mar,1200,402,310\n",
    "Documents/recipes/pancakes.md": "# Pancakes\n\n- 200 g flour\n- 2 eggs\n- 300 ml milk\n",
    "Downloads/invoice-2291.txt": "Invoice 2291\nAmount due: 149.00 EUR\nDue date: 2026-12-15\n",
    "Pictures/holiday/README.txt": "Photos from Lisbon, June 2026.\n",
    ".bashrc": "# ~/.bashrc\nalias ll='ls -l'\n",
}
OS_DIRS = ["Music"]


def _seed_os(root: Path) -> None:
    home = root / "alex"
    for rel, text in OS_FILES.items():
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(text)
    for rel in OS_DIRS:
        (home / rel).mkdir(parents=True, exist_ok=True)


def _os_script(rng: random.Random) -> list[Call]:
    h = HOME_ALEX
    name = rng.choice(["ideas", "shopping", "packing-list", "reading", "meeting-notes"])
    folder = rng.choice(["Projects", "Work", "Archive", "Personal"])
    items = rng.sample(
        [
            "milk",
            "bread",
            "tickets",
            "charger",
            "passport",
            "umbrella",
            "tea",
            "stamps",
            "batteries",
        ],
        rng.randint(2, 4),
    )
    note = f"{h}/Documents/{name}.txt"
    calls: list[Call] = [
        rng.choice(
            [
                ("list_directory", {"path": h}),
                ("list_allowed_directories", {}),
                ("directory_tree", {"path": f"{h}/Documents"}),
            ]
        ),
        ("write_file", {"path": note, "content": "\n".join(f"- {i}" for i in items) + "\n"}),
        ("read_text_file", {"path": note}),
        (
            "edit_file",
            {
                "path": note,
                "edits": [{"oldText": f"- {items[0]}", "newText": f"- {items[0]} (done)"}],
            },
        ),
    ]
    extra: list[list[Call]] = [
        [("read_text_file", {"path": note})],
        [
            ("create_directory", {"path": f"{h}/{folder}"}),
            ("move_file", {"source": note, "destination": f"{h}/{folder}/{name}.txt"}),
            ("list_directory", {"path": f"{h}/{folder}"}),
            ("read_text_file", {"path": note}),
        ],  # gone from its old place: an error
        [
            (
                "search_files",
                {"path": h, "pattern": rng.choice(["*.txt", "**/*.txt", "**/*.md", "notes*"])},
            )
        ],
        [
            (
                "read_text_file",
                {
                    "path": f"{h}/Documents/notes.txt",
                    rng.choice(["head", "tail"]): rng.randint(1, 3),
                },
            )
        ],
        [("get_file_info", {"path": rng.choice([note, f"{h}/Documents/budget-2026.csv"])})],
        [("list_directory_with_sizes", {"path": f"{h}/Documents"})],
        [("read_text_file", {"path": rng.choice(["/etc/passwd", "/root/.ssh/id_rsa"])})],
        [("read_text_file", {"path": f"{h}/Documents/{rng.choice(['todo', 'report'])}.txt"})],
        [("read_multiple_files", {"paths": [f"{h}/Downloads/invoice-2291.txt", note]})],
        [
            (
                "edit_file",
                {
                    "path": f"{h}/Documents/budget-2026.csv",
                    "edits": [{"oldText": "feb,1200,385,0", "newText": "feb,1200,385,45"}],
                    "dryRun": rng.choice([True, False]),
                },
            ),
            ("read_text_file", {"path": f"{h}/Documents/budget-2026.csv", "tail": 2}),
        ],
    ]
    for group in rng.sample(extra, rng.randint(2, 4)):
        calls += group
    return calls[:12]


OS_WORLD = McpWorld(
    name="os",
    mount_at="/home",
    user="alex",
    seed=_seed_os,
    servers={"filesystem": ["mcp-server-filesystem", HOME_ALEX]},
    script=_os_script,
    world={
        "facts": {
            "user": "alex (home /home/alex)",
            "allowed_directories": "/home/alex",
            "home_contents": "Documents/ (notes.txt, budget-2026.csv, recipes/pancakes.md), "
            "Downloads/ (invoice-2291.txt), Pictures/holiday/ (README.txt), Music/ (empty), "
            ".bashrc",
            "file_server": "@modelcontextprotocol/server-filesystem 2026.8.31",
        },
        "replace_notes": True,
        "notes": [
            "/home/alex/Documents/notes.txt reads: " + json.dumps(NOTES),
            "/home/alex/Documents/budget-2026.csv reads: "
            + json.dumps(OS_FILES["Documents/budget-2026.csv"]),
            "/home/alex/Downloads/invoice-2291.txt reads: "
            + json.dumps(OS_FILES["Downloads/invoice-2291.txt"]),
            'Failed file tools answer with an error text (no JSON), e.g. "ENOENT: no such '
            "file or directory, open '<path>'\" or 'Access denied - path outside allowed "
            "directories: <path> not in /home/alex'.",
        ],
    },
)


# --- the SWE world: a repository through the git and filesystem servers -------------------

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


SWE_WORLD = McpWorld(
    name="swe",
    mount_at="/workspace",
    user="dev",
    seed=_seed_swe,
    servers={
        "git": ["mcp-server-git"],
        "filesystem": ["mcp-server-filesystem", "/workspace"],
    },
    script=_swe_script,
)


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
            "toolchain": f"{git_version.strip()}; tools are mcp-server-git 2026.10.19 and "
            "@modelcontextprotocol/server-filesystem 2026.8.31 (allowed directory /workspace)",
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


WORLDS: dict[str, McpWorld] = {"os": OS_WORLD, "swe": SWE_WORLD}


def prepare_world(name: str, servers: dict[str, list[str]] | None = None) -> McpWorld:
    """The world ``name``, its server commands replaced by ``servers`` (label -> command)."""
    world = WORLDS[name]
    if unknown := set(servers or {}) - set(world.servers):
        raise ValueError(f"world {name} has no server {sorted(unknown)[0]!r}")
    world.servers = {**world.servers, **(servers or {})}
    if name == "swe" and not world.world:
        world.world = swe_world_facts()
    Path(world.mount_at).mkdir(exist_ok=True)  # an empty mount point (e.g. /workspace)
    return world

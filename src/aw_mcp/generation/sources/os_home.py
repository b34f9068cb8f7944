"""Source ``os``: a user's home through the REAL filesystem MCP server.

``@modelcontextprotocol/server-filesystem`` (npm, binary ``mcp-server-filesystem``) serves
``/home/alex``, run as user ``alex``, the home seeded with a few documents (the bundled OS
world's). Scripts write, read, edit (also dry runs), move, search, list and stat files and try
paths outside the allowed directory.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from aw_mcp.generation.mcp_servers import Call, McpWorld

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


FILESYSTEM_PACKAGE = "@modelcontextprotocol/server-filesystem"
FILESYSTEM_VERSION = "2026.8.31"

SOURCE = McpWorld(
    name="os",
    summary="the real filesystem MCP server on a seeded /home/alex (needs root, node and "
    "the npm package @modelcontextprotocol/server-filesystem)",
    versions={FILESYSTEM_PACKAGE: FILESYSTEM_VERSION},
    mount_at="/home",
    user="alex",
    seed=_seed_os,
    servers={"filesystem": ["mcp-server-filesystem", HOME_ALEX]},
    scripts={"train": _os_script},
    records_state=True,
    state_cwd=HOME_ALEX,
    world={
        "facts": {
            "user": "alex (home /home/alex)",
            "allowed_directories": "/home/alex",
            "home_contents": "Documents/ (notes.txt, budget-2026.csv, recipes/pancakes.md), "
            "Downloads/ (invoice-2291.txt), Pictures/holiday/ (README.txt), Music/ (empty), "
            ".bashrc",
            "file_server": f"{FILESYSTEM_PACKAGE} {FILESYSTEM_VERSION}",
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

"""Source ``text-editor``: a line-range text editor with hash-checked edits, a stateful store.

``mcp-text-editor`` (PyPI, tumf; with mcp 1.30.0, in its own virtualenv
``/opt/aw-mcp-text-editor``, see .ci/run) reads line ranges of files with a SHA-256 of each
range and of the whole file, and edits them only when the hashes given match the file. Each
episode's home holds three seeded files (a to-do list, an INI config, a small Python
program). Episodes read ranges, replace, append and create, and make an agent's mistakes (a
stale or wrong hash, a relative path, a missing file, a missing range hash, a bad range).

The scripts know the seeded files, so they compute the hashes an agent would have read, and
follow each edit (as the server applies it) to give the next call the current ones. Held
out: the template ``refactor`` (several patches of one file in one call).
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

from aw_mcp.generation.mcp_servers import (
    MCP_USER,
    Call,
    Template,
    home_seed,
    mcp_user_world,
    python_server,
)

PACKAGE = "mcp-text-editor"
VERSION = "1.0.2"
MCP_VERSION = "1.30.0"
VENV = "text-editor"  # /opt/aw-mcp-text-editor, whose bin/ holds mcp-text-editor
HOME = f"/home/{MCP_USER}"
TODO = "notes/todo.md"
CONFIG = "app/config.ini"
PROGRAM = "app/main.py"
FILES = {
    TODO: "# To do\n- [ ] renew passport\n- [ ] book the dentist\n- [x] pay rent\n"
    "- [ ] call the plumber\n",
    CONFIG: "[server]\nhost = 127.0.0.1\nport = 8080\ndebug = false\n\n[database]\n"
    "path = data/app.db\npool = 4\n",
    PROGRAM: '"""Greet the users listed in users.txt."""\n\nimport sys\n\n\n'
    'def greet(name):\n    return f"Hello, {name}!"\n\n\n'
    'def main():\n    for line in open("users.txt"):\n        print(greet(line.strip()))\n'
    '    return 0\n\n\nif __name__ == "__main__":\n    sys.exit(main())\n',
}
READ = "get_text_file_contents"
EDIT = "edit_text_file_contents"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _lines(rel: str) -> int:
    return FILES[rel].count("\n")


def _path(rel: str) -> str:
    return f"{HOME}/{rel}"


class Files:
    """The seeded files as the server will see them, followed through each edit the script
    makes: the source of the hashes the calls give."""

    def __init__(self) -> None:
        self.text = {_path(rel): text for rel, text in FILES.items()}

    def lines(self, path: str) -> list[str]:
        return self.text.get(path, "").splitlines(keepends=True)

    def total(self, path: str) -> int:
        return len(self.lines(path))

    def range_hash(self, path: str, start: int, end: int) -> str:
        return sha("".join(self.lines(path)[start - 1 : end]))

    def patch(self, path: str, start: int, end: int | None, contents: str) -> dict[str, Any]:
        """A patch of lines ``start``-``end`` (``end`` None: an insertion or append, with no
        range hash), applied here as the server applies it."""
        patch: dict[str, Any] = {"line_start": start, "contents": contents}
        lines = self.lines(path)
        new = (contents if contents.endswith("\n") else contents + "\n").splitlines(True)
        if end is None or start > len(lines):  # no line_end: the server's own default
            lines[start - 1 : start - 1] = new
        else:
            patch |= {"line_end": end, "range_hash": self.range_hash(path, start, end)}
            lines[start - 1 : min(end, len(lines))] = new
        self.text[path] = "".join(lines)
        return patch

    def edit(self, path: str, *patches: tuple[int, int | None, str]) -> Call:
        """One edit of ``path`` with the file's current hash; patches bottom to top."""
        file_hash = sha(self.text[path]) if self.text.get(path) else ""
        made = [self.patch(path, *p) for p in sorted(patches, key=lambda p: -p[0])]
        return (EDIT, {"files": [{"path": path, "file_hash": file_hash, "patches": made}]})


def read(*files: tuple[str, list[tuple[int, int | None]]]) -> Call:
    """One read of ``files``: (path, [(start, end or None for the end), ...])."""
    return (
        READ,
        {
            "files": [
                {
                    "file_path": path,
                    "ranges": [
                        {"start": start} | ({} if end is None else {"end": end})
                        for start, end in ranges
                    ],
                }
                for path, ranges in files
            ]
        },
    )


def _read(rng: random.Random) -> list[Call]:
    todo, config, program = (_path(r) for r in (TODO, CONFIG, PROGRAM))
    pool = [
        read((todo, [(1, None)])),
        read((config, [(1, None)])),
        read((program, [(rng.randint(1, 6), rng.choice([None, rng.randint(8, 14)]))])),
        read((config, [(1, 4), (6, 8)])),
        read((todo, [(2, 3)]), (config, [(2, 3)])),
        read((program, [(rng.randint(20, 40), None)])),
        read((todo, [(rng.randint(2, 5), None)])),
        read((program, [(10, 13)])),
    ]
    return rng.sample(pool, rng.randint(3, 5))


def _edit(rng: random.Random) -> list[Call]:
    files = Files()
    path = _path(rng.choice([CONFIG, TODO]))
    if path.endswith(CONFIG):
        line, new = rng.choice(
            [
                (3, f"port = {rng.choice([8000, 8443, 9090])}"),
                (4, "debug = true"),
                (8, f"pool = {rng.randint(8, 32)}"),
            ]
        )
    else:
        line = rng.randint(2, 5)
        new = f"- [x] {files.lines(path)[line - 1][6:].strip()}"
    calls = [read((path, [(line, line)]))]
    calls.append(files.edit(path, (line, line, new)))
    calls.append(read((path, [(1, None)])))
    if rng.random() < 0.5:
        other = rng.randint(1, files.total(path))
        calls.append(read((path, [(other, other)])))
        calls.append(files.edit(path, (other, other, rng.choice(["# edited", "; reviewed"]))))
    return calls


def _append(rng: random.Random) -> list[Call]:
    files = Files()
    path = _path(TODO)
    items = rng.sample(
        ["water the plants", "fix the bike", "email Dana", "buy stamps", "back up photos"],
        rng.randint(1, 3),
    )
    total = files.total(path)
    calls = [read((path, [(1, None)]))]
    calls.append(files.edit(path, (total + 1, None, "\n".join(f"- [ ] {i}" for i in items))))
    calls.append(read((path, [(total, None)])))
    if rng.random() < 0.5:
        config = _path(CONFIG)
        calls.append(files.edit(config, (files.total(config) + 1, None, "\n[cache]\nttl = 60")))
        calls.append(read((config, [(6, None)])))
    return calls


def _create(rng: random.Random) -> list[Call]:
    files = Files()
    name, first, second = rng.choice(
        [
            ("app/users.txt", "Ana\nBen\nCaro", "Bea"),
            ("notes/meeting.md", "# Meeting 2026-12-07\n- budget\n- hiring", "- travel"),
            ("drafts/letter.txt", "Dear Sam,\nThank you for the books.", "Thanks again."),
            ("notes/ideas.txt", "a recipe app\na garden planner", "a bike map"),
        ]
    )
    path = _path(name)
    calls = [files.edit(path, (1, None, first)), read((path, [(1, None)]))]
    if rng.random() < 0.6:
        calls.append(files.edit(path, (2, 2, second)))
        calls.append(read((path, [(1, None)])))
    return calls


def _raw_edit(path: str, file_hash: str, *patches: dict[str, Any]) -> Call:
    """An edit as an agent may write it by hand (the hashes given, right or wrong)."""
    return (EDIT, {"files": [{"path": path, "file_hash": file_hash, "patches": list(patches)}]})


def _errors(rng: random.Random) -> list[Call]:
    todo, config, missing = _path(TODO), _path(CONFIG), _path("notes/done.md")
    seeded = Files()
    stale = sha(seeded.text[config])
    done = {"line_start": 2, "line_end": 2, "contents": "- [x] renew passport"}
    # Each bad group starts from the seeded files: the server refuses its edits, and the
    # group that edits (a fresh edit, then one with the hash from before it) edits config.
    bad: list[list[Call]] = [
        [
            Files().edit(config, (3, 3, "port = 8081")),
            _raw_edit(
                config,
                stale,
                {
                    **done,
                    "line_start": 4,
                    "line_end": 4,
                    "contents": "debug = true",
                    "range_hash": sha("debug = false\n"),
                },
            ),
        ],
        [_raw_edit(todo, sha(seeded.text[todo]), {**done, "range_hash": sha("- [ ] renew")})],
        [_raw_edit(todo, sha(seeded.text[todo]), done)],
        [read((TODO, [(1, None)]))],
        [read((missing, [(1, None)]))],
        [_raw_edit(missing, sha("done\n"), {"line_start": 1, "contents": "done"})],
        [_raw_edit(todo, "", {"line_start": 1, "contents": "# Done"})],
        [read((_path("../etc/hostname"), [(1, None)]))],
        [(EDIT, {"files": [{"path": config, "file_hash": stale}]})],
        [_raw_edit(config, stale, {**done, "line_start": 4, "line_end": 2})],
        [read((config, [(rng.randint(12, 30), None)]))],
        # An append as the tool's description words it (line_end = total_lines), which
        # this version refuses.
        [
            _raw_edit(
                todo,
                sha(seeded.text[todo]),
                {"line_start": 6, "line_end": 5, "contents": "- [ ] buy stamps"},
            )
        ],
    ]
    calls = [call for group in rng.sample(bad, rng.randint(2, 3)) for call in group]
    calls.append(read((rng.choice([todo, config]), [(1, None)])))
    return calls


def _refactor(rng: random.Random) -> list[Call]:  # held out
    files = Files()
    path = _path(PROGRAM)
    greeting = rng.choice(["Hi", "Welcome", "Good morning"])
    return [
        read((path, [(6, 7), (10, 13)])),
        files.edit(
            path,
            (7, 7, f'    return f"{greeting}, {{name}}!"'),
            (
                11,
                12,
                '    with open("users.txt") as users:\n        for line in users:\n'
                "            print(greet(line.strip()))",
            ),
        ),
        read((path, [(1, None)])),
        read((path, [(rng.randint(14, 20), None)])),
    ]


SOURCE = mcp_user_world(
    name="text-editor",
    summary=f"the line-range text editor MCP server (needs root and {PACKAGE} in "
    f"/opt/aw-mcp-{VENV})",
    versions={PACKAGE: VERSION, "mcp": MCP_VERSION},
    seed=home_seed(MCP_USER, FILES),
    servers={"text-editor": [python_server(VENV, PACKAGE)]},
    templates=[
        Template("read", _read),
        Template("edit", _edit),
        Template("append", _append),
        Template("create", _create),
        Template("errors", _errors),
        Template("refactor", _refactor, heldout=True),
    ],
    world={
        "facts": {
            "server": f"{PACKAGE} {VERSION} with mcp {MCP_VERSION} (server name mcp-text-editor)",
            "files": f"{HOME}/{TODO} ({_lines(TODO)} lines), {HOME}/{CONFIG} ({_lines(CONFIG)} "
            "lines: [server] host, port 8080, debug false; [database] path, pool 4), "
            f"{HOME}/{PROGRAM} ({_lines(PROGRAM)} lines: greet(name) and main() reading "
            "users.txt)",
        },
        "notes": [
            "Every episode starts from these three files.",
            "Answers are JSON (indented two spaces) keyed by each file's absolute path: "
            "ranges (content, start_line, end_line, range_hash, total_lines, content_size) "
            "and file_hash, SHA-256 hex; an edit answers result, file_hash and reason.",
        ],
    },
)

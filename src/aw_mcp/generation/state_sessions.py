"""Long sessions that exercise state: make, move, edit, commit, and read back what was done.

Where a template (``terminal_scripts``) is 5-12 commands of one kind, a state session is 20-40
commands that keep coming back to what they made: a file written at step 3 is appended to at
step 9, moved at 14, counted, sorted and grepped at 20 and committed at 25; ``cd`` moves where
later relative paths point; some reads ask for what is not there (a removed file, a folder
never made). Text tools run over files whose content the session showed or wrote, so the
world model can learn to compute counts, line numbers and orders from text it was given.

The script keeps its own notes of the names it made (which files, which folders, where it
stands, whether there is a repository) to pick plausible next commands, as an agent would;
the observations come from the real sandbox. Like the templates, it never uses the held-out
families (``tr``, ``cut``, ``find``) in the training split; the held-out split uses them.
"""

from __future__ import annotations

import posixpath
import random
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

from aw_mcp.generation.terminal_scripts import NAMES, WORDS, Split
from aw_mcp.generation.worlds import SandboxWorld

MIN_LENGTH, MAX_LENGTH = 20, 40
_FOLDERS = ["notes", "data", "old", "tmp", "backup", "docs", "out", "archive", "src", "logs"]
_STEMS = ["todo", "list", "items", "names", "log", "report", "draft", "scores", "cities", "tasks"]
_EXTENSIONS = [".txt", ".txt", ".md", ".csv", ".log", ""]
_CITIES = ["oslo", "paris", "tokyo", "lima", "rome", "cairo", "delhi", "quito"]
_MESSAGES = ["Add notes", "Update list", "Move files", "Fix typo", "WIP", "Tidy up", "Add data"]


@dataclass
class _Notes:
    """What the script knows it made (paths absolute), to pick its next command."""

    cwd: str
    floor: str  # `cd ..` goes no higher (a `find .` from / would walk the whole machine)
    files: dict[str, list[str] | None] = field(default_factory=dict)  # None: content unknown
    dirs: set[str] = field(default_factory=set)
    repository: str | None = None
    branches: list[str] = field(default_factory=lambda: ["main"])

    def rel(self, path: str) -> str:
        if path.startswith(self.cwd + "/"):
            return shlex.quote(path[len(self.cwd) + 1 :])
        return shlex.quote(path)

    def here(self, name: str) -> str:
        return posixpath.normpath(posixpath.join(self.cwd, name))

    def text_files(self) -> list[str]:
        return sorted(p for p, lines in self.files.items() if lines)


def _lines(rng: random.Random) -> list[str]:
    kind = rng.randrange(4)
    count = rng.randint(3, 9)
    if kind == 0:
        return rng.sample(WORDS, min(count, len(WORDS)))
    if kind == 1:
        return [rng.choice(WORDS) for _ in range(count)]  # repeats: for sort | uniq -c
    if kind == 2:
        return [
            f"{rng.choice(NAMES)},{rng.choice(_CITIES)},{rng.randint(1, 90)}" for _ in range(count)
        ]
    return [f"{rng.choice(NAMES)} {rng.choice(WORDS)} {rng.randint(1, 50)}" for _ in range(count)]


def _new_name(rng: random.Random, notes: _Notes) -> str:
    for _ in range(20):
        name = rng.choice(_STEMS) + rng.choice(_EXTENSIONS)
        if notes.here(name) not in notes.files and notes.here(name) not in notes.dirs:
            return name
    return f"file{rng.randint(100, 999)}.txt"


def _printf(lines: list[str]) -> str:
    return "printf '%s\\n' " + " ".join(shlex.quote(line) for line in lines)


# --- the moves a session is made of: each returns a command, or None when it does not fit --

Move = Callable[[random.Random, _Notes, Split], str | None]


def _make_file(rng: random.Random, notes: _Notes, split: Split) -> str:
    name = _new_name(rng, notes)
    lines = _lines(rng)
    notes.files[notes.here(name)] = lines
    form = rng.randrange(4)
    if form == 0:
        return f"{_printf(lines)} > {shlex.quote(name)}"
    if form == 1:
        body = "\n".join(lines)
        return f"cat > {shlex.quote(name)} <<'EOF'\n{body}\nEOF"
    if form == 2:
        notes.files[notes.here(name)] = lines[:1]
        return f"echo {shlex.quote(lines[0])} > {shlex.quote(name)}"
    notes.files[notes.here(name)] = []
    return f"touch {shlex.quote(name)}"


def _make_dir(rng: random.Random, notes: _Notes, split: Split) -> str:
    name = rng.choice(_FOLDERS)
    if rng.random() < 0.3:
        name += "/" + rng.choice(_FOLDERS)
    path = notes.here(name)
    while path != notes.cwd and path not in notes.dirs:
        notes.dirs.add(path)
        path = posixpath.dirname(path)
    return f"mkdir -p {shlex.quote(name)}"


def _append(rng: random.Random, notes: _Notes, split: Split) -> str | None:
    if not notes.files:
        return None
    path = rng.choice(sorted(notes.files))
    added = _lines(rng)[: rng.randint(1, 3)]
    if notes.files[path] is not None:
        notes.files[path] = [*(notes.files[path] or []), *added]
    if len(added) == 1 and rng.random() < 0.6:
        return f"echo {shlex.quote(added[0])} >> {notes.rel(path)}"
    return f"{_printf(added)} >> {notes.rel(path)}"


def _edit(rng: random.Random, notes: _Notes, split: Split) -> str | None:
    files = notes.text_files()
    if not files:
        return None
    path = rng.choice(files)
    lines = notes.files[path] or []
    form = rng.randrange(4)
    plain = [w for w in re.split(r"[\s,]+", " ".join(lines)) if re.fullmatch(r"\w+", w)]
    if form == 0 and plain:
        old, new = rng.choice(plain), rng.choice(WORDS)
        notes.files[path] = None
        return f"sed -i 's/{old}/{new}/' {notes.rel(path)}"
    if form == 1 and len(lines) > 1:
        n = rng.randint(1, len(lines))
        notes.files[path] = lines[: n - 1] + lines[n:]
        return f"sed -i '{n}d' {notes.rel(path)}"
    if form == 2:
        header = rng.choice(_STEMS)
        notes.files[path] = [f"# {header}", *lines]
        return f"sed -i '1i # {header}' {notes.rel(path)}"
    word = rng.choice(WORDS)
    notes.files[path] = None
    return f"sed -i '/{word}/d' {notes.rel(path)}"


def _relocate(rng: random.Random, notes: _Notes, split: Split) -> str | None:
    if not notes.files:
        return None
    path = rng.choice(sorted(notes.files))
    form = rng.randrange(4)
    if form == 0 and notes.dirs:  # into a folder
        folder = rng.choice(sorted(notes.dirs))
        target = posixpath.join(folder, posixpath.basename(path))
        notes.files[target] = notes.files.pop(path)
        return f"mv {notes.rel(path)} {notes.rel(folder)}/"
    if form == 1:  # rename
        target = notes.here(_new_name(rng, notes))
        notes.files[target] = notes.files.pop(path)
        return f"mv {notes.rel(path)} {notes.rel(target)}"
    if form == 2:  # copy
        target = notes.here(_new_name(rng, notes))
        notes.files[target] = notes.files[path]
        return f"cp {notes.rel(path)} {notes.rel(target)}"
    del notes.files[path]
    return f"rm {notes.rel(path)}"


def _remove_dir(rng: random.Random, notes: _Notes, split: Split) -> str | None:
    if not notes.dirs:
        return None
    folder = rng.choice(sorted(notes.dirs))
    if notes.cwd == folder or notes.cwd.startswith(folder + "/"):
        return None
    for path in [p for p in notes.files if p.startswith(folder + "/")]:
        del notes.files[path]
    notes.dirs -= {d for d in notes.dirs if d == folder or d.startswith(folder + "/")}
    return f"rm -r {notes.rel(folder)}"


def _change_dir(rng: random.Random, notes: _Notes, split: Split) -> str | None:
    if notes.dirs and rng.random() < 0.6:
        target = rng.choice(sorted(notes.dirs))
        shown = notes.rel(target)
        notes.cwd = target
        return f"cd {shown}"
    up = posixpath.dirname(notes.cwd)
    if rng.random() < 0.5 and up.startswith(notes.floor):
        notes.cwd = up
        return "cd .."
    return "pwd"


def _git(rng: random.Random, notes: _Notes, split: Split) -> str | None:
    if notes.repository is None:
        if rng.random() < 0.5:
            return "git status"  # not a repository: git says so
        notes.repository = notes.cwd
        return "git init -q && git status --short"
    form = rng.randrange(7)
    if form == 0:
        return rng.choice(["git status", "git status --short"])
    if form == 1 and notes.files:
        return f"git add {notes.rel(rng.choice(sorted(notes.files)))}"
    if form == 2:
        return f"git add -A && git commit -qm {shlex.quote(rng.choice(_MESSAGES))}"
    if form == 3:
        return rng.choice(["git log --oneline", "git log --oneline | head -n 3", "git branch"])
    if form == 4:
        branch = rng.choice(["feature", "fix", "dev", "docs"])
        if branch in notes.branches:
            return f"git checkout -q {branch} && git branch --show-current"
        notes.branches.append(branch)
        return f"git checkout -qb {branch}"
    if form == 5:
        return rng.choice(["git diff --stat", "git status --porcelain | wc -l"])
    return f"git commit -qam {shlex.quote(rng.choice(_MESSAGES))}; git log --oneline | head -n 1"


def _read_back(rng: random.Random, notes: _Notes, split: Split) -> str | None:
    files = notes.text_files()
    if not files or rng.random() < 0.15:
        return rng.choice(["ls", "ls -a", "ls -1", "ls -l | wc -l", "ls *"])
    path = notes.rel(rng.choice(files))
    lines = notes.files[rng.choice(files)] or ["x"]
    word = rng.choice(" ".join(lines).replace(",", " ").split())
    n = rng.randint(1, 4)
    reads = [
        f"cat {path}",
        f"wc -l {path}",
        f"wc -w {path}",
        f"head -n {n} {path}",
        f"tail -n {n} {path}",
        f"grep {shlex.quote(word)} {path}",
        f"grep -n {shlex.quote(word)} {path}",
        f"grep -c {shlex.quote(word)} {path}",
        f"sort {path}",
        f"sort -r {path}",
        f"sort {path} | uniq -c",
        f"sort {path} | uniq | wc -l",
        f"nl {path}",
        f"cat -n {path}",
        f"sed -n '{n}p' {path}",
        f"awk '{{print NR\": \"$1}}' {path}",
        f"grep -v {shlex.quote(word)} {path} | wc -l",
        f"test -f {path} && echo yes || echo no",
        f"stat -c %s {path}",
    ]
    if split == "heldout":  # the held-out families, over state
        reads += [
            f"cut -c1-3 {path}",
            f"tr a-z A-Z < {path}",
            "find . -type f | sort",
            f"cut -d, -f1 {path} | sort | uniq",
        ]
    return rng.choice(reads)


def _read_missing(rng: random.Random, notes: _Notes, split: Split) -> str:
    name = rng.choice([*_STEMS, "gone", "missing"]) + rng.choice([".txt", ".md", ""])
    if notes.here(name) in notes.files:
        name = "no-" + name
    return rng.choice(
        [f"cat {name}", f"wc -l {name}", f"ls {name}", f"cd {name}", f"rm {name}", f"grep x {name}"]
    )


_MOVES: list[tuple[Move, float]] = [
    (_make_file, 3),
    (_make_dir, 1),
    (_append, 2),
    (_edit, 1.5),
    (_relocate, 2),
    (_remove_dir, 0.4),
    (_change_dir, 1.2),
    (_git, 1.5),
    (_read_back, 6),
    (_read_missing, 0.6),
]


def state_session(split: Split, rng: random.Random, world: SandboxWorld) -> list[str]:
    """The commands of one session in ``world``: MIN_LENGTH to MAX_LENGTH of them, starting
    with a look around, each read-back over what the session made or the world held."""
    top = posixpath.dirname(world.working_directory)
    floor = world.working_directory if top in ("/", "/home", "/srv") else top
    notes = _Notes(cwd=world.working_directory, floor=floor)
    for name, content in world.built_files().items():
        notes.files[notes.here(name)] = content.splitlines()
        parent = posixpath.dirname(notes.here(name))
        while parent != notes.cwd and parent.startswith(notes.cwd):
            notes.dirs.add(parent)
            parent = posixpath.dirname(parent)
    if world.git_commits:
        notes.repository = notes.cwd
    commands = [rng.choice(["ls", "ls -a", "pwd && ls"])]
    length = rng.randint(MIN_LENGTH, MAX_LENGTH)
    moves, weights = zip(*_MOVES, strict=True)
    while len(commands) < length:
        move = rng.choices(moves, weights)[0]
        command = move(rng, notes, split)
        if command is not None and command != commands[-1]:
            commands.append(command)
    return commands

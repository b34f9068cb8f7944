"""A world whose state is a real directory (``aw-mcp world from-dir PATH``).

An agent developer tests an agent on a simulated copy of their own project: the world's
working directory holds the directory's small text files with their content (``files``, the
shape ``generation.worlds.SandboxWorld.facts`` writes and ``from_world`` reads back), every
other file and folder by path with what is known of it (``tree``: size and why its content is
left out, a symlink's target, an empty folder), and its git state (``git``: branch, the last
commit subjects oldest first, the working tree, the user).

What is left out, and why, is always said in ``tree``; nothing is left out silently except
``.git`` (the ``git`` fact describes the repository) and what lies past ``max_files`` (a note
counts it). Secrets are listed by path only: never their content, nor their size.

Nothing in the directory is written: files are only read, symlinks are never followed, and
git runs with ``--no-optional-locks`` (no index refresh written back). The same directory
gives the same world, bar the date it was taken on.
"""

from __future__ import annotations

import codecs
import fnmatch
import os
import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from aw_mcp.domain.models import WorldSpec
from aw_mcp.errors import UserInputError

# Folders and files every checkout has and no agent reads: dependencies, caches, build output.
JUNK_FOLDERS = (
    "node_modules",
    "__pycache__",
    ".venv",
    "venv",
    "dist",
    "build",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".tox",
    "*.egg-info",
)
JUNK_FILES = ("*.pyc", "*.pyo", ".DS_Store", "Thumbs.db")

# Names that hold secrets (matched case-insensitively, against files and folders alike).
SECRET_NAMES = (
    ".env*",
    "*.pem",
    "*.key",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    "*.p12",
    "*.pfx",
    "*.keystore",
    "*.jks",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".htpasswd",
    "*credential*",
    "*secret*",
    ".ssh",
    ".gnupg",
    ".aws",
)
# Templates of a .env that are meant to be shared (their content is still scanned).
SECRET_NAME_TEMPLATES = ("*.example", "*.sample", "*.template")

# Content that looks like a secret. Broad on purpose: a false alarm only costs that file's
# content (and says so), a miss puts a key into a world file that may be shared.
SECRET_CONTENT = re.compile(
    r"AKIA[0-9A-Z]{16}"  # AWS access key id
    r"|-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----"
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}"  # GitHub tokens
    r"|\bxox[baprs]-[A-Za-z0-9-]{10,}"  # Slack tokens
    r"|\bsk-(?:proj-)?[A-Za-z0-9_-]{20,}"  # OpenAI-style API keys
    # key = value, key: value, "key": "value" (the key may be part of a longer name)
    r"|(?i:(?:api[_-]?key|secret|token|password)[\"']?\s*[:=]\s*[\"']?\S{8,})"
)

SNIFF_BYTES = 8192  # how much of a file too large to copy is read to tell text from binary

SECRET = "left out: looks like a secret"
IGNORED = "left out: ignored by git"
JUNK = "left out: dependencies, caches or build output"
EMPTY_FOLDER = "empty folder"


class FromDirOptions(BaseModel):
    """What ``aw-mcp world from-dir`` copies and how it names the copy: every field is one
    of its arguments (``path`` the positional one)."""

    model_config = ConfigDict(extra="forbid")

    path: Path = Field(
        description="the directory to copy into a world",
        json_schema_extra={"positional": True, "metavar": "PATH"},
    )
    user: str = Field(
        default="dev",
        pattern=r"^[a-z_][a-z0-9_-]*$",
        description="the world's user (home /home/USER)",
        json_schema_extra={"metavar": "NAME"},
    )
    hostname: str = Field(
        default="devbox",
        pattern=r"^[A-Za-z0-9][A-Za-z0-9.-]*$",
        description="the world's host name",
        json_schema_extra={"metavar": "NAME"},
    )
    working_directory: str | None = Field(
        default=None,
        description="where the copy lies in the world, an absolute path (default: "
        "/home/USER/<PATH's name>; aw-mcp eval everyday needs it under /home or /srv)",
        json_schema_extra={"metavar": "DIR"},
    )
    max_files: int = Field(
        default=60,
        ge=1,
        description="most files and folders listed (shallowest first); the rest are counted "
        "in a note",
    )
    max_file_bytes: int = Field(
        default=4096,
        ge=0,
        description="largest file whose content is copied; larger ones are listed with their size",
        json_schema_extra={"metavar": "BYTES"},
    )
    max_total_bytes: int = Field(
        default=8192,
        ge=0,
        description="most bytes of content copied in all (shallowest files first; the world "
        "must fit the model's context window: raise serve's --n-ctx with it)",
        json_schema_extra={"metavar": "BYTES"},
    )
    max_commits: int = Field(
        default=10,
        ge=1,
        description="most commit subjects kept (the last ones)",
    )
    exclude: list[str] = Field(
        default_factory=list,
        description="also leave out paths matching this glob (against the path relative to "
        "PATH, or the name); listed as left out; repeatable",
        json_schema_extra={"metavar": "GLOB"},
    )
    include_secrets: bool = Field(
        default=False,
        description="copy files that look like secrets too (by name or content)",
    )

    @field_validator("working_directory")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith("/"):
            raise ValueError(f"must be an absolute path, not {value!r}")
        return value.rstrip("/") or "/"


class DirWorld(BaseModel):
    """The world of a directory, and what went into it (for the command's summary line)."""

    world: WorldSpec
    with_content: int = Field(description="files whose content is in the world")
    listed_without: int = Field(description="files and folders in tree")
    not_listed: int = Field(description="files and folders past max_files")
    content_bytes: int


@dataclass
class _Entry:
    """One path of the directory (a folder's ends with ``/``). ``note``: its tree value, where
    known from the walk; ``size``: a regular file's, whose content may be copied (no note);
    ``children``: an entered folder's number of paths (it has no note)."""

    path: str
    note: str | None = None
    size: int = 0
    children: int | None = None

    @property
    def depth(self) -> int:
        return self.path.rstrip("/").count("/")

    @property
    def parent(self) -> str:
        return self.path.rstrip("/").rpartition("/")[0] + "/"


def world_from_dir(options: FromDirOptions, taken_on: date | None = None) -> DirWorld:
    """The world whose state is ``options.path``; UserInputError if it is no directory."""
    root = options.path.expanduser()
    if not root.exists():
        raise UserInputError(f"{options.path}: no such directory")
    if not root.is_dir():
        raise UserInputError(f"{options.path}: not a directory")
    root = root.resolve()
    if not os.access(root, os.R_OK | os.X_OK):
        raise UserInputError(f"{options.path}: cannot read this directory")
    taken_on = taken_on or datetime.now(UTC).date()
    user = options.user
    workdir = options.working_directory or f"/home/{user}/{root.name or 'project'}"

    git = _Git(root)
    entries = _Walk(root, options, git.ignored()).entries
    # The shallowest paths first: a project's top level says the most about it, and a folder
    # comes before what is in it (so no listed path is in a folder the world does not have).
    ranked = sorted(entries, key=lambda e: (e.depth, e.path))
    kept, not_listed = ranked[: options.max_files], max(0, len(ranked) - options.max_files)
    listed_in = Counter(e.parent for e in kept)
    files: dict[str, str] = {}
    tree: dict[str, str] = {}
    used = 0
    for entry in kept:
        if entry.children is not None:  # an entered folder: listed unless all its paths are
            if note := _folder_note(entry.children, listed_in[entry.path]):
                tree[entry.path] = note
            continue
        if entry.note is not None:
            tree[entry.path] = entry.note
            continue
        content = _content(root / entry.path, entry.size, options)
        if isinstance(content, str) and used + len(content.encode()) > options.max_total_bytes:
            content = _Note(f"{entry.size} bytes (content over the total limit)")
        if isinstance(content, _Note):
            tree[entry.path] = content.text
        else:
            files[entry.path] = content
            used += len(content.encode())

    facts: dict[str, Any] = {
        "hostname": options.hostname,
        "user": user,
        "home": f"/home/{user}",
        "working_directory": workdir,
        # SandboxWorld's shape: a sentence where there is no file to copy
        "files": dict(sorted(files.items())) if files else f"none: {workdir} starts empty",
    }
    if not files and tree:
        facts["files"] = f"none with their content: every path of {workdir} is in tree"
    if tree:
        facts["tree"] = dict(sorted(tree.items()))
    facts["git"] = git.fact(workdir, options.max_commits, options.max_files)
    world = WorldSpec(
        facts=facts,
        notes=_notes(root.name, workdir, taken_on, options, not_listed),
        replace_notes=True,
    )
    return DirWorld(
        world=world,
        with_content=len(files),
        listed_without=len(tree),
        not_listed=not_listed,
        content_bytes=used,
    )


def _folder_note(children: int, listed: int) -> str | None:
    """A folder's tree value: none where its paths, all listed, show it."""
    if children == 0:
        return EMPTY_FOLDER
    if listed == children:
        return None
    if listed == 0:
        return f"folder of {children} paths, none listed"
    return f"folder of {children} paths, {children - listed} not listed"


def _notes(
    name: str, workdir: str, taken_on: date, options: FromDirOptions, not_listed: int
) -> list[str]:
    left_out = "folders of dependencies, caches and build output, files ignored by git"
    left_out += ", files that look like secrets" if not options.include_secrets else ""
    left_out += f", paths matching {', '.join(options.exclude)}" if options.exclude else ""
    notes = [
        f"This world is a copy of a real directory, {name or '/'}, taken on "
        f"{taken_on:%Y-%m-%d} (UTC): {workdir} holds what that directory held then.",
        "files holds the content of its small text files. tree lists every other file and "
        "folder with what is known of it: a file's size and why its content is left out "
        "(binary; over the size limit; over the total limit), a symlink's target, a folder "
        "that is empty or not listed in full. Such a file exists with that size but its "
        "content is not known: when a command shows it, make it plausible for its name and "
        "the project, and keep to it afterwards.",
        f"Limits applied: at most {options.max_files} files and folders listed, "
        f"{options.max_file_bytes} bytes of content per file, {options.max_total_bytes} "
        f"bytes of content in all. Listed without their content: {left_out}.",
    ]
    if not_listed:
        notes.append(
            f"The listing is partial: {not_listed} more files and folders of {workdir} exist "
            "but are not listed (the deepest were left out first)."
        )
    return notes


@dataclass(frozen=True)
class _Note:
    """Why a file's content is not in the world: its tree value."""

    text: str


def _content(path: Path, size: int, options: FromDirOptions) -> str | _Note:
    """A regular file's text, or why it is left out (read, never followed: no symlinks
    reach here)."""
    limit = options.max_file_bytes
    try:
        with path.open("rb") as handle:
            data = handle.read(max(limit, SNIFF_BYTES) + 1)
    except OSError as exc:
        return _Note(_unreadable(exc))
    if len(data) > limit:
        why = "binary" if _binary(data[:SNIFF_BYTES], partial=True) else "over the size limit"
        return _Note(f"{max(size, len(data))} bytes ({why})")
    if _binary(data, partial=False):
        return _Note(f"{len(data)} bytes (binary)")
    text = data.decode("utf-8")
    if not options.include_secrets and SECRET_CONTENT.search(text):
        return _Note(SECRET)
    return text


def _unreadable(exc: OSError) -> str:
    return f"left out: cannot be read ({exc.strerror or exc})"


def _binary(data: bytes, partial: bool) -> bool:
    """Not UTF-8 text: a NUL byte, or bytes that do not decode (``partial``: ``data`` is the
    start of a longer file, and may end inside a character)."""
    if b"\0" in data:
        return True
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data, final=not partial)
    except UnicodeDecodeError:
        return True
    return False


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


class _Walk:
    """Every path under ``root`` the world lists, in name order: folders are entered unless
    left out; symlinks are listed with their target, never followed."""

    def __init__(self, root: Path, options: FromDirOptions, ignored: set[str]):
        self.options = options
        self.ignored = ignored  # relative paths git ignores; folders end with "/"
        self.entries: list[_Entry] = []
        self._visit(root, "")

    def _visit(self, folder: Path, rel: str) -> None:
        try:
            with os.scandir(folder) as listing:
                children = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            if not rel:
                raise UserInputError(f"{folder}: cannot read this directory") from None
            self.entries.append(_Entry(f"{rel}/", _unreadable(exc)))
            return
        children = [c for c in children if c.name != ".git"]  # the git fact tells of it
        if rel:
            self.entries.append(_Entry(f"{rel}/", children=len(children)))
        for child in children:
            self._child(child, f"{rel}/{child.name}" if rel else child.name)

    def _child(self, child: os.DirEntry[str], path: str) -> None:
        if child.is_symlink():
            try:
                target = os.readlink(child.path)
            except OSError as exc:
                target = f"? ({exc.strerror})"
            self.entries.append(_Entry(path, f"symlink to {target}"))
            return
        try:
            is_folder = child.is_dir(follow_symlinks=False)
            is_file = child.is_file(follow_symlinks=False)
            size = child.stat(follow_symlinks=False).st_size
        except OSError as exc:
            self.entries.append(_Entry(path, _unreadable(exc)))
            return
        listed = f"{path}/" if is_folder else path
        if reason := self._left_out(path, child.name, is_folder):
            self.entries.append(_Entry(listed, reason))
        elif is_folder:
            self._visit(Path(child.path), path)
        elif not is_file:  # a FIFO, socket or device: opening one could block or read forever
            self.entries.append(_Entry(path, "left out: not a regular file"))
        else:
            self.entries.append(_Entry(path, size=size))

    def _left_out(self, path: str, name: str, is_folder: bool) -> str | None:
        """Why a path is listed without going further (none: it is copied or entered)."""
        for pattern in self.options.exclude:
            glob = pattern.rstrip("/")
            if (is_folder or not pattern.endswith("/")) and (
                fnmatch.fnmatchcase(path, glob) or fnmatch.fnmatchcase(name, glob)
            ):
                return f"left out: matches --exclude {pattern}"
        lower = name.lower()
        if (
            not self.options.include_secrets
            and _matches(lower, SECRET_NAMES)
            and not (lower.startswith(".env") and _matches(lower, SECRET_NAME_TEMPLATES))
        ):
            return SECRET
        if (f"{path}/" if is_folder else path) in self.ignored:
            return IGNORED
        if _matches(name, JUNK_FOLDERS if is_folder else JUNK_FILES):
            return JUNK
        return None


class _Git:
    """The directory's git state, read with the user's own git (read-only)."""

    def __init__(self, root: Path):
        self.root = root
        self.executable = shutil.which("git")
        top = self._run("rev-parse", "--show-toplevel")
        self.top = Path(top.strip()).resolve() if top else None

    def _run(self, *args: str) -> str | None:
        """git's output, or None where it fails (no git, not a repository, ...)."""
        if self.executable is None:
            return None
        environment = {**os.environ, "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"}
        environment.pop("GIT_DIR", None)  # the directory's own repository, whoever runs this
        environment.pop("GIT_WORK_TREE", None)
        # --no-optional-locks: git status writes no refreshed index back; core.quotepath=off:
        # paths as they are, not as octal escapes
        options = ["--no-optional-locks", "-c", "core.quotepath=off", "-C", str(self.root)]
        try:
            done = subprocess.run(
                [self.executable, *options, *args],
                capture_output=True,
                env=environment,
                timeout=60,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        if done.returncode != 0:
            return None
        return done.stdout.decode("utf-8", errors="replace")

    def ignored(self) -> set[str]:
        """Paths under the directory that git ignores, relative to it (folders end with
        ``/``, and a folder git ignores whole is one path)."""
        if self.top is None:
            return set()
        out = self._run(
            "ls-files", "--others", "--ignored", "--exclude-standard", "--directory", "-z"
        )
        return {p for p in (out or "").split("\0") if p}

    def fact(self, workdir: str, max_commits: int, max_lines: int) -> dict[str, Any] | str:
        """The ``git`` fact, in SandboxWorld's shape (plus ``commit_count``), or a sentence
        that says why there is none."""
        if self.executable is None:
            if (self.root / ".git").exists():
                return (
                    f"{workdir} is a git repository, but git was not installed where this "
                    "copy was made: its branch and history are not known"
                )
            return f"{workdir} is not a git repository (as far as known: git was not installed)"
        if self.top is None:
            return f"{workdir} is not a git repository"
        branch = self._branch()
        if self.top != self.root:
            inside = self.root.relative_to(self.top) if self.root.is_relative_to(self.top) else ""
            return (
                f"{workdir} is the folder {inside} of a git repository (branch {branch}) whose "
                "other files are not in this world"
            )
        subjects = self._run("log", f"-n{max_commits}", "--format=%s")
        count = self._run("rev-list", "--count", "HEAD")
        status = (self._run("status", "--porcelain") or "").splitlines()
        if len(status) > max_lines:
            status = [*status[:max_lines], f"... and {len(status) - max_lines} more"]
        name = (self._run("config", "user.name") or "").strip()
        email = (self._run("config", "user.email") or "").strip()
        return {
            "repository": workdir,
            "branch": branch,
            "commits": list(reversed((subjects or "").splitlines())),
            "commit_count": int(count) if count else 0,
            "working_tree": status or "clean",
            "user": f"{name} <{email}>" if name or email else "not set",
        }

    def _branch(self) -> str:
        branch = self._run("symbolic-ref", "--short", "-q", "HEAD")
        if branch:
            return branch.strip()
        head = self._run("rev-parse", "--short", "HEAD")
        return f"HEAD detached at {head.strip()}" if head else "unknown"

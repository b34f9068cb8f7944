"""The ground truth of state for one sandbox command: what it read, what it changed.

Two views of the real sandbox, neither of them an interpretation of the command:

- **what the command read** comes from ``strace`` attached to the episode's shell (and every
  process it starts): the files it opened for reading, the folders it listed, the paths it
  looked for and did not find, whether it read a repository. ``strace -y`` prints every
  file descriptor and ``AT_FDCWD`` with its absolute path, so relative paths resolve exactly.
  The recall is then the world *before* the command, taken from the snapshot below, for those
  paths only;
- **what it changed** is the difference between two snapshots of the sandbox's folders,
  taken on the host before and after the command (paths, kinds, modes, text contents, sizes,
  link targets), with moves, copies and appends recognised by content, plus the shell's
  working directory (its last ``chdir``) and each repository's facts as git reports them.

A command's trace ends at a marker the shell stats after the command's sentinel (a path
that never exists), so the lines of one command never mix with the next one's.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import posixpath
import queue
import re
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from aw_mcp.errors import AwMcpError
from aw_mcp.state.steps import (
    MAX_TEXT_BYTES,
    Append,
    ChangeDir,
    ChangeOp,
    Copy,
    GitChange,
    GitFacts,
    Link,
    MakeDir,
    Mode,
    Move,
    PathState,
    Recall,
    Remove,
    StepState,
    Write,
)

MARKER_PREFIX = "/.aw-trace-mark-"
# The file-path syscalls, and getdents64 (a folder listed).
_TRACED = "%file,getdents64"
# -f: the shell's children too; -y: descriptors and AT_FDCWD with their paths; -qq: no
# attach/exit lines; -s: whole paths.
_STRACE = ["strace", "-f", "-y", "-qq", "-s", "4096", "-e", f"trace={_TRACED}"]
_LINE = re.compile(r"^(\d+) +(\w+)\((.*)\) += (-?\d+|\?)(?:<([^>]*)>)?(?: (E\w+))?")
_UNFINISHED = re.compile(r"^(\d+) +(.*) <unfinished \.\.\.>$")
_RESUMED = re.compile(r"^(\d+) +<\.\.\. (\w+) resumed>(.*)$")
_FD_PATH = re.compile(r"^(?:AT_FDCWD|\d+)<([^>]*)>$")
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
# Syscalls that look a path up (its existence, kind, size) without reading it.
_LOOKUPS = {
    "stat": 0,
    "lstat": 0,
    "access": 0,
    "readlink": 0,
    "newfstatat": 1,
    "statx": 1,
    "faccessat": 1,
    "faccessat2": 1,
    "readlinkat": 1,
}


class TraceUnavailable(AwMcpError):
    """strace could not follow the shell (not installed, or ptrace refused)."""

    def __init__(self, why: str):
        super().__init__(
            f"{why}: what each command reads and changes cannot be recorded (install strace, "
            "run where ptrace is allowed, or generate with --no-state)"
        )


# --- the trace ------------------------------------------------------------------------------


class ShellTrace:
    """``strace`` attached to one shell process and its children; each command's lines are
    collected up to the marker the shell stats after it (``marker_command``)."""

    def __init__(self, pid: int, timeout: float = 10.0):
        self.timeout = timeout
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._count = 0
        try:
            self._proc = subprocess.Popen(
                [*_STRACE, "-p", str(pid)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                errors="replace",
            )
        except FileNotFoundError as exc:
            raise TraceUnavailable("strace is not installed") from exc
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._proc.stderr is not None
        for line in self._proc.stderr:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    @property
    def tracer_pid(self) -> int:
        """strace's own process."""
        return self._proc.pid

    def next_marker(self) -> tuple[str, str]:
        """(the marker's path, the shell line that stats it without changing ``$?``)."""
        self._count += 1
        path = f"{MARKER_PREFIX}{os.getpid()}-{self._count}"
        return path, f"[ -e {path} ] || :"

    def lines_until(self, marker: str, timeout: float | None = None) -> list[str] | None:
        """The trace's lines up to ``marker``'s (None: it did not come in time)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        lines: list[str] = []
        while True:
            left = deadline - time.monotonic()
            try:
                line = self._lines.get(timeout=max(left, 0.001))
            except queue.Empty:
                return None
            if line is None:
                raise TraceUnavailable("strace stopped following the shell")
            if marker in line:
                return lines
            lines.append(line)

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self._proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=5)
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()


def attach(shell_pid: int, run: Callable[[str], object], tries: int = 20) -> ShellTrace:
    """Attach strace to the shell and wait until it sees the shell's syscalls (``run`` runs
    a command line in that shell)."""
    trace = ShellTrace(shell_pid)
    for _ in range(tries):
        marker, line = trace.next_marker()
        run(line)
        if trace.lines_until(marker, timeout=0.5) is not None:
            return trace
    trace.close()
    raise TraceUnavailable("strace did not attach to the sandbox's shell")


# --- what a command touched, from its trace lines -------------------------------------------


@dataclass
class Accesses:
    """What one command's processes did with paths (absolute, as seen in the sandbox)."""

    opened: set[str] = field(default_factory=set)  # regular files opened to read
    listed: set[str] = field(default_factory=set)  # folders whose entries were read
    looked_up: set[str] = field(default_factory=set)  # paths stat'ed that exist
    missing: set[str] = field(default_factory=set)  # paths looked for, not found
    shell_cwd: str | None = None  # the shell's working directory after its last chdir
    git_read: set[str] = field(default_factory=set)  # paths inside a .git folder touched


_PID_PREFIX = re.compile(r"^\[pid +(\d+)\] ")


def _joined(lines: Iterable[str], shell_pid: int) -> list[str]:
    """Lines as ``PID syscall...``, each ``<unfinished ...>`` syscall joined to its
    ``resumed`` end. (strace writes the traced process's own lines without a pid and its
    children's after ``[pid N]``.)"""
    pending: dict[str, str] = {}
    out: list[str] = []
    for raw in lines:
        prefix = _PID_PREFIX.match(raw)
        line = f"{prefix.group(1)} {raw[prefix.end() :]}" if prefix else f"{shell_pid} {raw}"
        if match := _UNFINISHED.match(line):
            pending[match.group(1)] = match.group(2)
        elif match := _RESUMED.match(line):
            start = pending.pop(match.group(1), None)
            if start is not None:
                out.append(f"{match.group(1)} {start}{match.group(3)}")
        else:
            out.append(line)
    return out


def _strings(args: str) -> list[str]:
    return [bytes(s, "utf-8").decode("unicode_escape") for s in _STRING.findall(args)]


def _resolve(base: str | None, path: str) -> str | None:
    if path.startswith("/"):
        return posixpath.normpath(path)
    return posixpath.normpath(posixpath.join(base, path)) if base else None


def _dir_base(args: str, position: int) -> str | None:
    """The folder a ``*at`` syscall's relative path starts from (its first argument)."""
    if position == 0:
        return None
    first = args.split(", ", 1)[0]
    match = _FD_PATH.match(first)
    return match.group(1) if match else None


def _program(path: str) -> str:
    return posixpath.basename(path)


# Interpreters probe for modules by stat and list their path folders (the script's own among
# them) on every start: only what they open counts as read.
_INTERPRETERS = re.compile(r"^(python[0-9.]*|node|perl|ruby|php)$")


def accesses_of(
    lines: Iterable[str], shell_pid: int, shell_cwd: str, all_git: bool = False
) -> Accesses:
    """What the command's processes opened, listed and looked up. A git process is followed
    only into repositories (the files it hashes for ``status`` and the folders it walks are
    not a read of the user's); inside a ``.git`` folder only git's own accesses count (that
    ``find`` walks one is not reading the repository's facts). ``all_git``: every process of the
    trace is git (a git MCP server, which reads repositories in-process as well as through
    git)."""
    seen = Accesses()
    git_pids: set[str] = set()
    interpreter_pids: set[str] = set()
    for line in _joined(lines, shell_pid):
        match = _LINE.match(line)
        if not match:
            continue
        pid, name, args, result, result_path, error = match.groups()
        strings = _strings(args)
        if name == "execve":
            if result == "0" and strings:
                program = _program(strings[0])
                git_pids.discard(pid)
                interpreter_pids.discard(pid)
                if program == "git":
                    git_pids.add(pid)
                elif _INTERPRETERS.match(program):
                    interpreter_pids.add(pid)
            continue
        if name == "chdir" and pid == str(shell_pid) and result == "0" and strings:
            seen.shell_cwd = _resolve(seen.shell_cwd or shell_cwd, strings[0])
            continue
        path = _path_of(name, args, strings, result_path)
        if path is None:
            continue
        if "/.git/" in path + "/" or path.endswith("/.git"):
            if all_git or pid in git_pids:
                seen.git_read.add(path)
            continue
        if all_git or pid in git_pids:
            continue
        if name == "getdents64":
            if pid not in interpreter_pids:
                seen.listed.add(path)
        elif name in ("openat", "open"):
            if error == "ENOENT":
                seen.missing.add(path)
            elif result != "-1" and "O_DIRECTORY" not in args and "O_WRONLY" not in args:
                seen.opened.add(path)
        elif pid in interpreter_pids or "AT_EMPTY_PATH" in args:
            continue
        elif error == "ENOENT":
            seen.missing.add(path)
        elif result == "0":
            seen.looked_up.add(path)
    return seen


def _path_of(name: str, args: str, strings: list[str], result_path: str | None) -> str | None:
    """The absolute path a traced syscall is about (None: not one of ours, or unknown)."""
    if name == "getdents64":
        fd = _FD_PATH.match(args.split(", ", 1)[0])
        return posixpath.normpath(fd.group(1)) if fd else None
    if name in ("openat", "open") and strings:
        if result_path:
            return posixpath.normpath(result_path)
        return _resolve(_dir_base(args, 1 if name == "openat" else 0), strings[0])
    if name in _LOOKUPS and strings:
        return _resolve(_dir_base(args, _LOOKUPS[name]), strings[0])
    return None


# --- the sandbox's folders, seen from the host ------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One path of a snapshot."""

    kind: str  # file, dir, link
    mode: int
    size: int = 0
    digest: str = ""
    text: str | None = None  # a text file's content (small ones)
    target: str | None = None  # a link's


@dataclass
class Snapshot:
    """Every path under the sandbox's folders (``.git`` folders left out: their facts are
    the repositories'), keyed by its path in the sandbox."""

    entries: dict[str, Entry]
    repositories: list[str]  # work trees (folders holding a .git folder)


def _text_of(data: bytes) -> str | None:
    if len(data) > MAX_TEXT_BYTES or b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def take_snapshot(mounts: dict[str, Path]) -> Snapshot:
    """The folders ``mounts`` maps (sandbox path -> host path), read as root on the host."""
    entries: dict[str, Entry] = {}
    repositories: list[str] = []
    for inside, host in mounts.items():
        for folder, dirs, files in os.walk(host):
            rel = os.path.relpath(folder, host)
            here = inside if rel == "." else posixpath.join(inside, rel)
            if ".git" in dirs:
                dirs.remove(".git")
                repositories.append(here)
            dirs.sort()
            for name in [*dirs, *files]:
                host_path = os.path.join(folder, name)
                entry = _entry(host_path)
                if entry is not None:
                    entries[posixpath.join(here, name)] = entry
    return Snapshot(entries, sorted(repositories))


def _entry(host_path: str) -> Entry | None:
    try:
        info = os.lstat(host_path)
    except OSError:
        return None
    mode = stat.S_IMODE(info.st_mode)
    if stat.S_ISLNK(info.st_mode):
        return Entry("link", mode, target=os.readlink(host_path))
    if stat.S_ISDIR(info.st_mode):
        return Entry("dir", mode)
    if not stat.S_ISREG(info.st_mode):
        return None
    try:
        data = Path(host_path).read_bytes()
    except OSError:
        return Entry("file", mode, size=info.st_size)
    return Entry("file", mode, len(data), hashlib.sha256(data).hexdigest(), text=_text_of(data))


def git_facts(repository: str, host_path: Path) -> GitFacts:
    """A repository's branch, HEAD subject and porcelain status, read without writing to it
    (``--no-optional-locks``: ``status`` does not refresh the index)."""

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["git", "--no-optional-locks", "-c", "safe.directory=*", "-C", str(host_path), *args],
            capture_output=True,
            text=True,
            errors="replace",
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C"},
        )

    branch = git("symbolic-ref", "--short", "-q", "HEAD")
    head = git("log", "-1", "--format=%s")
    status = git("status", "--porcelain")
    return GitFacts(
        repository=repository,
        branch=branch.stdout.strip() if branch.returncode == 0 else None,
        head=head.stdout.rstrip("\n") if head.returncode == 0 else None,
        status=[line for line in status.stdout.split("\n") if line],
    )


# --- recall and change ------------------------------------------------------------------------


def _state_of(path: str, snapshot: Snapshot) -> PathState:
    entry = snapshot.entries.get(path)
    if entry is None:
        return PathState(kind="missing")
    if entry.kind == "dir":
        prefix = path.rstrip("/") + "/"
        names = sorted(
            p[len(prefix) :] + ("/" if e.kind == "dir" else "")
            for p, e in snapshot.entries.items()
            if p.startswith(prefix) and "/" not in p[len(prefix) :]
        )
        git = [".git/"] if path in snapshot.repositories else []
        return PathState(kind="dir", entries=sorted(names + git))
    if entry.kind == "link":
        return PathState(kind="link", target=entry.target)
    if entry.text is not None:
        return PathState(kind="file", content=entry.text)
    return PathState(kind="file", size=entry.size)


def _inside(path: str, roots: Iterable[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def _repository_of(path: str, repositories: list[str]) -> str | None:
    holding = [r for r in repositories if path.startswith(r.rstrip("/") + "/.git")]
    return max(holding, key=len) if holding else None


def recall_of(
    seen: Accesses,
    before: Snapshot,
    after: Snapshot,
    roots: Iterable[str],
    cwd: str,
    git_before: dict[str, GitFacts],
    skip: Iterable[str] = (),
) -> Recall:
    """What the command read of the world before it ran: the files it opened and folders it
    listed as they were, the paths it looked for that were not there (and still are not),
    files it only looked up (their size; folders looked up are not a read: bash checks the
    working directory and its parents on every command), and the facts of repositories it
    read. ``skip``: paths no command means to read (the user's .gitconfig, which every git
    command reads)."""
    roots = list(roots)
    skipped = set(skip)

    def wanted(path: str) -> bool:
        return _inside(path, roots) and path not in skipped

    paths: dict[str, PathState] = {}
    for path in seen.opened | seen.listed:
        if wanted(path) and path in before.entries:
            paths[path] = _state_of(path, before)
    for path in seen.missing:
        if (
            wanted(path)
            and path not in before.entries
            and path not in after.entries
            and not path.startswith(MARKER_PREFIX)
            and not posixpath.basename(path).startswith(".git")
        ):
            paths[path] = PathState(kind="missing")
    for path in seen.looked_up - seen.opened - seen.listed:
        entry = before.entries.get(path)
        if wanted(path) and entry is not None and entry.kind == "file":
            paths[path] = PathState(kind="file", size=entry.size)
    repositories = {
        repo
        for touched in seen.git_read
        if (repo := _repository_of(touched, before.repositories)) is not None
    }
    git = [git_before[r] for r in sorted(repositories) if r in git_before]
    return Recall(paths=paths, git=git)


def _top_level(paths: set[str]) -> list[str]:
    """The paths not under another of them, sorted."""
    return sorted(p for p in paths if not any(p.startswith(q + "/") for q in paths if q != p))


def _subtree(snapshot: Snapshot, top: str) -> dict[str, Entry]:
    prefix = top + "/"
    return {p[len(prefix) :]: e for p, e in snapshot.entries.items() if p.startswith(prefix)}


def _same(a: Entry, b: Entry) -> bool:
    return (a.kind, a.digest, a.target, a.size) == (b.kind, b.digest, b.target, b.size)


_DEFAULT_MODES = {"file": 0o644, "dir": 0o755, "link": 0o777}


def change_of(
    before: Snapshot,
    after: Snapshot,
    cwd_before: str,
    cwd_after: str,
    git_before: dict[str, GitFacts],
    git_after: dict[str, GitFacts],
    git_touched: set[str],
) -> list[ChangeOp]:
    """What the command did, as the fewest ops that turn ``before`` into ``after``, in an
    order that always applies: removals (at their top), new folders (the innermost: a
    folder holding new paths is implied by them), moves (recognised by content), new paths
    (copies recognised by content), changed paths (appends where the new text continues
    the old; modes only where they differ from the defaults), then the repositories git
    worked on (``git_touched``) whose facts changed, and the working directory."""
    old, new = before.entries, after.entries
    removed = set(old) - set(new)
    added = set(new) - set(old)
    moves: list[ChangeOp] = []
    for source in _top_level(removed):
        target = _moved_to(source, before, after, added)
        if target is not None:
            moves.append(Move(source=source, target=target))
            removed -= {source} | {p for p in removed if p.startswith(source + "/")}
            added -= {target} | {p for p in added if p.startswith(target + "/")}
    ops: list[ChangeOp] = [Remove(path=p) for p in _top_level(removed)]
    ops += [
        MakeDir(path=p)
        for p in sorted(added)
        if new[p].kind == "dir" and not any(q.startswith(p + "/") for q in added)
    ]
    ops += moves
    unchanged = {
        e.digest: p for p, e in old.items() if e.kind == "file" and p in new and _same(e, new[p])
    }
    for path in sorted(added):
        entry = new[path]
        if entry.kind == "link":
            ops.append(Link(path=path, target=entry.target or ""))
        elif entry.kind == "file" and entry.digest in unchanged and entry.size > 0:
            ops.append(Copy(source=unchanged[entry.digest], target=path))
        elif entry.kind == "file":
            ops.append(_write(path, entry))
        if entry.kind != "link" and entry.mode != _DEFAULT_MODES[entry.kind]:
            ops.append(Mode(path=path, mode=f"{entry.mode:03o}"))
    for path in sorted(set(old) & set(new)):
        was, now = old[path], new[path]
        if was.kind != now.kind or (now.kind == "link" and was.target != now.target):
            ops += [Remove(path=path), _made(path, now)]
            continue
        if now.kind == "file" and was.digest != now.digest:
            if was.text is not None and now.text is not None and now.text.startswith(was.text):
                ops.append(Append(path=path, text=now.text[len(was.text) :]))
            else:
                ops.append(_write(path, now))
        if was.mode != now.mode and now.kind != "link":
            ops.append(Mode(path=path, mode=f"{now.mode:03o}"))
    for repository in sorted(set(git_before) | set(git_after)):
        facts = git_after.get(repository)
        if facts is None:
            ops.append(Remove(path=posixpath.join(repository, ".git")))
        elif repository not in git_before or (
            repository in git_touched and facts != git_before[repository]
        ):
            ops.append(GitChange(facts=facts))
    if cwd_after != cwd_before:
        ops.append(ChangeDir(path=cwd_after))
    return ops


def _moved_to(source: str, before: Snapshot, after: Snapshot, added: set[str]) -> str | None:
    """Where a removed path went, if a new path holds the same (file content, link target,
    or a folder's whole subtree); one of the same name first."""
    entry = before.entries[source]
    name = posixpath.basename(source)
    candidates = sorted(added, key=lambda p: (posixpath.basename(p) != name, p))
    for target in candidates:
        if not _same(entry, after.entries[target]):
            continue
        if entry.kind != "dir" or _subtree(before, source) == _subtree(after, target):
            return target
    return None


def _write(path: str, entry: Entry) -> Write:
    if entry.text is not None:
        return Write(path=path, content=entry.text)
    return Write(path=path, size=entry.size)


def _made(path: str, entry: Entry) -> ChangeOp:
    if entry.kind == "dir":
        return MakeDir(path=path)
    if entry.kind == "link":
        return Link(path=path, target=entry.target or "")
    return _write(path, entry)


def step_state(
    seen: Accesses,
    before: Snapshot,
    after: Snapshot,
    roots: Iterable[str],
    cwd: str,
    git_before: dict[str, GitFacts],
    git_after: dict[str, GitFacts],
    skip: Iterable[str] = (),
    git_touched: Iterable[str] = (),
) -> StepState:
    """One command's recall and change (``cwd``: where it started). ``git_touched``: more
    repositories git worked on than the trace shows (the change gives their facts where they
    changed)."""
    cwd_after = seen.shell_cwd or cwd
    repositories = sorted(set(before.repositories) | set(after.repositories))
    touched = {
        repo for path in seen.git_read if (repo := _repository_of(path, repositories)) is not None
    } | set(git_touched)
    return StepState(
        cwd=cwd,
        recall=recall_of(seen, before, after, roots, cwd, git_before, skip),
        change=change_of(before, after, cwd, cwd_after, git_before, git_after, touched),
    )

"""An episode's current state: the world's facts with every step's change applied.

Bookkeeping only. The store never runs or interprets a command: it starts from the world's
facts (the working directory, the project's files, its repository), applies the changes the
steps wrote (``steps.ChangeOp``: measured in a sandbox, or written by the world model), and
looks paths up. What it shows next to a call (:meth:`WorldState.view`) is the state of the
paths the call's arguments name, word for word, and of the working directory; what stands in
for history cut to fit the context is the whole state (:meth:`WorldState.summary`).

A change that cannot be applied (a path that is not absolute, content over the limits, a
store already full) is refused with a reason, and the rest of the step still applies.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Iterable
from typing import Any

from aw_mcp.state.steps import (
    MAX_TEXT_BYTES,
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
    Write,
    changed_paths,
)
from aw_mcp.state.text import absolute, relative, render_recall

MAX_PATHS = 5000  # paths a store keeps; past it, new paths are refused
MAX_TOTAL_TEXT = 1024 * 1024  # bytes of file content a store keeps
STATE_OPEN, STATE_CLOSE = "<state>", "</state>"
AS_ABOVE = " as above"  # a view's block an earlier view showed word for word, cut to its head


class WorldState:
    """Paths (files with content or size, folders, links), modes where not the default, the
    working directory, and each repository's facts."""

    def __init__(self, cwd: str, home: str | None = None):
        self.cwd = _normal(cwd)
        # The project's folder, whose every path the facts and the steps' changes list (a
        # path it does not hold is missing); folders above it hold more than is known.
        self.root = self.cwd
        self.paths: dict[str, PathState] = {}
        self.modes: dict[str, str] = {}
        self.git: dict[str, GitFacts] = {}
        # per repository: the paths steps changed since git last reported its facts (what
        # `git status` would weigh; the store never computes a status itself)
        self.unseen: dict[str, set[str]] = {}
        for folder in (self.cwd, _normal(home) if home else None):
            if folder:
                self._make_dir(folder)

    # -- building ------------------------------------------------------------------------

    @classmethod
    def from_facts(cls, facts: dict[str, Any]) -> WorldState | None:
        """The state a world's facts describe (None: they name no working directory).
        Reads the Terminal worlds' shape: ``working_directory``, ``home``, ``files`` (a map of
        paths relative to the working directory to their content), ``git`` (a map with
        ``repository``, ``branch``, ``commits``, ``working_tree``), and ``tree`` (a world
        copied from a directory: the paths listed without content, each with what is known
        of it)."""
        cwd = facts.get("working_directory")
        if not isinstance(cwd, str) or not cwd.startswith("/"):
            return None
        home = facts.get("home")
        state = cls(cwd, home if isinstance(home, str) and home.startswith("/") else None)
        files = facts.get("files")
        if isinstance(files, dict):
            for name, content in files.items():
                path = absolute(str(name), state.cwd)
                state.apply([Write(path=path, content=str(content))])
        tree = facts.get("tree")
        if isinstance(tree, dict):
            for name, note in tree.items():
                path = absolute(str(name), state.cwd)
                if not _bad_path(path):
                    state._know(_normal(path), _listed_state(str(note), str(name).endswith("/")))
        git = facts.get("git")
        if isinstance(git, dict) and isinstance(git.get("repository"), str):
            commits = git.get("commits") or []
            tree = git.get("working_tree")
            status = [] if tree in (None, "clean") else [str(s) for s in _as_list(tree)]
            state.git[_normal(git["repository"])] = GitFacts(
                repository=_normal(git["repository"]),
                branch=str(git.get("branch") or "main"),
                head=str(commits[-1]) if commits else None,
                status=status,
            )
        return state

    def copy(self) -> WorldState:
        other = WorldState(self.cwd)
        other.root = self.root
        other.paths = dict(self.paths)
        other.modes = dict(self.modes)
        other.git = dict(self.git)
        other.unseen = {repository: set(paths) for repository, paths in self.unseen.items()}
        return other

    # -- applying a step's change ----------------------------------------------------------

    def apply(self, change: Iterable[ChangeOp]) -> list[str]:
        """Apply a step's ops in order; returns why each refused one was refused."""
        problems: list[str] = []
        applied: list[ChangeOp] = []
        for op in change:
            problem = self._apply_one(op)
            if problem:
                problems.append(f"{op.op}: {problem}")
            else:
                applied.append(op)
        self._note_unseen(applied)
        return problems

    def _note_unseen(self, applied: list[ChangeOp]) -> None:
        """Keep, per repository, what the step changed in its work tree; a repository whose
        facts the step reports (git ran) has seen all of it: its facts are as of the call's
        end."""
        reported = {_normal(op.facts.repository) for op in applied if isinstance(op, GitChange)}
        for path in changed_paths([op for op in applied if not isinstance(op, GitChange)]):
            path = _normal(path)
            facts = self.repository_of(path)
            if facts is None or facts.repository in reported:
                continue
            inside = path[len(facts.repository) :].lstrip("/")
            if inside and inside != ".git" and not inside.startswith(".git/"):
                self.unseen.setdefault(facts.repository, set()).add(path)
        for repository in reported:
            self.unseen.pop(repository, None)

    def _apply_one(self, op: ChangeOp) -> str | None:
        if isinstance(op, ChangeDir):
            if problem := _bad_path(op.path):
                return problem
            self.cwd = _normal(op.path)
            self._make_dir(self.cwd)
            return None
        if isinstance(op, GitChange):
            if problem := _bad_path(op.facts.repository):
                return problem
            repository = _normal(op.facts.repository)
            self.git[repository] = op.facts.model_copy(update={"repository": repository})
            self._make_dir(repository)
            return None
        if isinstance(op, Move | Copy):
            return self._move_or_copy(op)
        path = op.path
        if problem := _bad_path(path):
            return problem
        path = _normal(path)
        if isinstance(op, Remove):
            if path.endswith("/.git") and posixpath.dirname(path) in self.git:
                del self.git[posixpath.dirname(path)]
                return None
            self._remove(path)
            return None
        if isinstance(op, Mode):
            self.modes[path] = op.mode
            return None
        if isinstance(op, MakeDir):
            if problem := self._room_for(1):
                return problem
            self._make_dir(path)
            return None
        if isinstance(op, Link):
            return self._put(path, PathState(kind="link", target=op.target))
        if isinstance(op, Write):
            if op.content is not None:
                return self._put_text(path, op.content)
            return self._put(path, PathState(kind="file", size=op.size))
        # Append: onto what the store knows; onto nothing known, the text is all it knows.
        known = self.paths.get(path)
        before = known.content if known is not None and known.content is not None else ""
        return self._put_text(path, before + op.text)

    def _move_or_copy(self, op: Move | Copy) -> str | None:
        for path in (op.source, op.target):
            if problem := _bad_path(path):
                return problem
        source, target = _normal(op.source), _normal(op.target)
        if target == source or target.startswith(source + "/"):
            return "a path cannot go into itself"
        moving = {p: s for p, s in self.paths.items() if p == source or p.startswith(source + "/")}
        if not moving:  # unknown to the store: all it knows is that the target is a file now
            moving = {source: PathState(kind="file")}
        if isinstance(op, Copy) and (problem := self._room_for(len(moving))):
            return problem
        if isinstance(op, Move):
            self._remove(source)
        self._remove(target)
        for path, state in moving.items():
            self._put(target + path[len(source) :], state)
        return None

    def _put_text(self, path: str, content: str) -> str | None:
        size = len(content.encode())
        if size > MAX_TEXT_BYTES:
            return self._put(path, PathState(kind="file", size=size))
        if self._text_bytes() + size > MAX_TOTAL_TEXT:
            return f"the store holds {MAX_TOTAL_TEXT} bytes of text at most"
        return self._put(path, PathState(kind="file", content=content))

    def _room_for(self, count: int) -> str | None:
        if len(self.paths) + count > MAX_PATHS:
            return f"the store holds {MAX_PATHS} paths at most"
        return None

    def _put(self, path: str, state: PathState) -> str | None:
        """Put ``state`` at ``path`` (its folders made); why not, when the store is full."""
        if path not in self.paths and (problem := self._room_for(1)):
            return problem
        self._make_dir(posixpath.dirname(path))
        self._remove(path)
        self.paths[path] = state
        return None

    def _know(self, path: str, state: PathState) -> None:
        """Put what a world's facts say of ``path`` without losing what the store already
        holds under it (a folder's known entries)."""
        if state.kind != "dir":
            self._put(path, state)
            return
        self._make_dir(path)
        if state.unlisted:
            self.paths[path] = self.paths[path].model_copy(update={"unlisted": state.unlisted})

    def _make_dir(self, path: str) -> None:
        """``path`` and its parents are folders; what was known at one of them that is not a
        folder goes (a folder not known yet keeps what is known under it)."""
        while path not in ("/", ""):
            known = self.paths.get(path)
            if known is None or known.kind != "dir":
                if known is not None:
                    self._remove(path)
                self.paths[path] = PathState(kind="dir")
            path = posixpath.dirname(path)

    def _remove(self, path: str) -> None:
        for known in [p for p in self.paths if p == path or p.startswith(path + "/")]:
            del self.paths[known]
            self.modes.pop(known, None)

    def _text_bytes(self) -> int:
        return sum(len(s.content) for s in self.paths.values() if s.content is not None)

    # -- looking up ------------------------------------------------------------------------

    def state_of(self, path: str) -> PathState | None:
        """What the store knows of ``path`` (a folder with its entries); None: nothing."""
        state = self.paths.get(path)
        if state is None or state.kind != "dir":
            return state
        return state.model_copy(update={"entries": self.entries(path)})

    def entries(self, folder: str) -> list[str]:
        prefix = folder.rstrip("/") + "/"
        names = [
            p[len(prefix) :] + ("/" if s.kind == "dir" else "")
            for p, s in self.paths.items()
            if p.startswith(prefix) and "/" not in p[len(prefix) :]
        ]
        if folder in self.git:
            names.append(".git/")
        return sorted(names)

    def repository_of(self, path: str) -> GitFacts | None:
        holding = [r for r in self.git if path == r or path.startswith(r.rstrip("/") + "/")]
        return self.git[max(holding, key=len)] if holding else None

    def lists_all_of(self, folder: str) -> bool:
        """Whether the store knows every path in ``folder``: one in the project's folder
        (or the folder itself), listed in full."""
        known = self.paths.get(folder)
        inside = folder == self.root or folder.startswith(self.root + "/")
        return inside and known is not None and known.kind == "dir" and not known.unlisted

    def view(self, arguments: dict[str, Any]) -> str:
        """What stands next to a call: the working directory with its entries, every path
        the call's string arguments name word for word (relative to the working directory)
        that the store knows, each word that names a file in a folder the store lists in
        full but not in it as missing, and the repository the working directory is in."""
        named: dict[str, PathState] = {}
        for word in _words(arguments):
            path = absolute(word, self.cwd)
            state = self.state_of(path)
            if state is None and _names_a_file(word) and self.lists_all_of(_parent(path)):
                state = PathState(kind="missing")
            if state is not None and path != self.cwd:
                named[path] = state
        here = self.state_of(self.cwd)
        if here is not None:
            named[self.cwd] = here
        repository = self.repository_of(self.cwd)
        recall = Recall(paths=named, git=[repository] if repository else [])
        body = render_recall(recall, self.cwd).split("\n")[1:-1]
        if repository is not None and (unseen := self.unseen.get(repository.repository)):
            shown = " ".join(sorted(relative(path, self.cwd) for path in unseen))
            body.append(f"changed since these facts: {shown}")
        return "\n".join([STATE_OPEN, f"cwd {self.cwd}", *body, STATE_CLOSE])

    def summary(self) -> str:
        """The whole state, for history cut to fit the context (text files by their size)."""
        paths = {
            p: (s if s.kind != "dir" else s.model_copy(update={"entries": None}))
            for p, s in self.paths.items()
            if s.kind != "dir" or not self.entries(p)  # folders show through their paths
        }
        sized = {
            p: s.model_copy(update={"content": None, "size": len(s.content.encode())})
            if s.content is not None and s.content.count("\n") > 3
            else s
            for p, s in paths.items()
        }
        recall = Recall(paths=sized, git=list(self.git.values()))
        body = render_recall(recall, self.cwd).split("\n")[1:-1]
        return "\n".join([STATE_OPEN, f"cwd {self.cwd}", *body, STATE_CLOSE])


def news_only(view: str, earlier: Iterable[str | None]) -> str:
    """``view`` with each block that the last earlier view showing it showed word for word
    (same working directory, same lines) cut to its first line and ``as above``: a file's content, a
    folder's entries or a repository's status stand in the prompt once, not once a call.

    A block is a head line (``file notes.txt``, ``dir .``, ``git . main "Start"``) and the
    lines under it; one-line blocks are always shown. ``earlier``: the views of the turns
    before, in order, as they were served (a cut block there is not a showing); ``None`` for
    a turn served without one. Text in, text out, so a restarted server, training and export
    all cut the same views from the records."""
    last_shown: dict[tuple[str, str], tuple[str, ...]] = {}  # (cwd, head) -> its lines
    for text in earlier:
        if text:
            cwd, blocks = _view_blocks(text)
            last_shown.update(((cwd, block[0]), block) for block in blocks if len(block) > 1)
    cwd, blocks = _view_blocks(view)
    if not cwd:
        return view
    lines = [STATE_OPEN, cwd]
    for block in blocks:
        seen = len(block) > 1 and last_shown.get((cwd, block[0])) == block
        lines += [block[0] + AS_ABOVE] if seen else list(block)
    return "\n".join([*lines, STATE_CLOSE])


# The lines under a block's head: file lines (``3|text``, ``...``, ``\``, ``(empty)``),
# folder entries and status lines (``|name``), what a folder does not list (``... 2 more``).
_CONTINUATION = re.compile(r"^(\d+\||\||\.\.\.|\\$|\(empty\)$)")


def _view_blocks(view: str) -> tuple[str, list[tuple[str, ...]]]:
    """A view's ``cwd`` line and its blocks (empty: not a view)."""
    lines = view.split("\n")
    if len(lines) < 3 or lines[0] != STATE_OPEN or not lines[1].startswith("cwd "):
        return "", []
    blocks: list[list[str]] = []
    for line in lines[2:-1]:
        if blocks and _CONTINUATION.match(line):
            blocks[-1].append(line)
        else:
            blocks.append([line])
    return lines[1], [tuple(block) for block in blocks]


def _words(arguments: dict[str, Any]) -> list[str]:
    """The words of a call's string arguments, as a shell would split them (redirections'
    and separators' characters taken off their ends)."""
    words: list[str] = []
    for value in arguments.values():
        if not isinstance(value, str):
            continue
        try:
            split = shlex.split(value)
        except ValueError:
            split = value.split()
        for word in split:
            word = word.strip("<>|&;()")
            if word and not word.startswith("-") and len(word) < 512:
                words.append(word)
    return words


# How ``aw-mcp world from-dir`` describes a path it lists without content (its ``tree``
# fact; tests/test_world_from_dir.py holds the two to the same words).
_SIZED = re.compile(r"^(\d+) bytes\b")
_PARTIAL = re.compile(r"^folder of (\d+) paths, (?:none|(\d+) not) listed$")
_LINK = "symlink to "


def _listed_state(note: str, folder: bool) -> PathState:
    """What a ``tree`` note says of its path: a folder (with what is not listed of it), a
    link, a file with its size, or a file and no more (left out by name, unreadable)."""
    if folder:
        if partial := _PARTIAL.match(note):
            count = partial.group(2) or partial.group(1)
            return PathState(kind="dir", unlisted=f"{count} more, not listed")
        if note.startswith("left out") or note.startswith("cannot be read"):
            return PathState(kind="dir", unlisted=f"entries not listed ({note})")
        return PathState(kind="dir")
    if note.startswith(_LINK):
        return PathState(kind="link", target=note[len(_LINK) :])
    if sized := _SIZED.match(note):
        return PathState(kind="file", size=int(sized.group(1)))
    return PathState(kind="file")


def _names_a_file(word: str) -> bool:
    """A word that reads as a file's path (``notes/todo.txt``, ``main.py``): not a plain
    word (``bob``), a pattern, a variable or an option's value."""
    if word in (".", "..") or re.fullmatch(r"[\d.]+", word):  # a folder, a number
        return False
    return ("/" in word or "." in word) and not re.search(r"[*?\[\]{}$=:'\"\s]", word)


def _parent(path: str) -> str:
    return posixpath.dirname(path) or "/"


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _normal(path: str) -> str:
    return "/" + posixpath.normpath(path).lstrip("/")


# Not files a machine's state holds: the kernel's views of itself.
_NOT_FILES = ("/proc", "/sys", "/dev")


def _bad_path(path: str) -> str | None:
    if not path.startswith("/"):
        return f"{path!r} is not an absolute path"
    if "\0" in path or len(path) > 1024:
        return "not a path"
    normal = _normal(path)
    if normal == "/":
        return "the root folder is not a path a step changes"
    if any(normal == top or normal.startswith(top + "/") for top in _NOT_FILES):
        return f"{normal} is outside the world's files"
    return None

"""What one step of an episode read of the world and changed in it: the models.

A **recall** is what the call read of the world *before* it ran (the files it opened, the
folders it listed, the paths it looked for and did not find, the git facts it read); a
**change** is what it did to the world (paths written, appended to, removed, moved, copied,
made; the working directory; a repository's branch, HEAD and status). The real-trajectory
generators record both from their sandboxes (``generation/state_trace.py``); the world model
writes both before its answer (``state.text``), and the server keeps the episode's current
state from the changes (bookkeeping of what the model wrote, never running the command).

Paths are absolute here; the text form writes them relative to the working directory the
call started in.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

# Text files whose content a step keeps (longer or binary ones: size only).
MAX_TEXT_BYTES = 16 * 1024


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PathState(_Strict):
    """A path as the world had it: a text file with its content, another file with its size,
    a folder with its entries, a symbolic link with its target, or nothing at all."""

    kind: Literal["file", "dir", "link", "missing"]
    content: str | None = Field(
        default=None, description="A text file's content (up to MAX_TEXT_BYTES)."
    )
    size: int | None = Field(default=None, ge=0, description="A file's size in bytes.")
    entries: list[str] | None = Field(
        default=None, description="A folder's entries, sorted; sub-folders end in '/'."
    )
    target: str | None = Field(default=None, description="A link's target, as written.")
    unlisted: str | None = Field(
        default=None,
        description="A folder whose entries are not all known (a world copied from a real "
        "directory lists some in part): what is not listed, said after the known ones.",
    )


class GitFacts(_Strict):
    """A repository as git reports it: branch, HEAD's subject, ``status --porcelain``."""

    repository: str = Field(description="The work tree's absolute path.")
    branch: str | None = Field(default=None, description="None: a detached HEAD.")
    head: str | None = Field(default=None, description="HEAD's subject; None: no commit yet.")
    status: list[str] = Field(
        default_factory=list, description="``git status --porcelain`` lines; empty: clean."
    )


class Recall(_Strict):
    """What a call read of the world before it ran."""

    paths: dict[str, PathState] = Field(default_factory=dict)
    git: list[GitFacts] = Field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.paths and not self.git


class Write(_Strict):
    """A file made or rewritten: its new content (a text file) or its size (other files)."""

    op: Literal["write"] = "write"
    path: str
    content: str | None = None
    size: int | None = Field(default=None, ge=0)


class Append(_Strict):
    """Text added at the end of an existing text file."""

    op: Literal["append"] = "append"
    path: str
    text: str


class Remove(_Strict):
    op: Literal["rm"] = "rm"
    path: str


class MakeDir(_Strict):
    op: Literal["mkdir"] = "mkdir"
    path: str


class Move(_Strict):
    op: Literal["mv"] = "mv"
    source: str
    target: str


class Copy(_Strict):
    op: Literal["cp"] = "cp"
    source: str
    target: str


class Link(_Strict):
    """A symbolic link made: ``path`` points to ``target`` (as written)."""

    op: Literal["ln"] = "ln"
    path: str
    target: str


class Mode(_Strict):
    """A path's permission bits changed (octal, as ``chmod`` takes them)."""

    op: Literal["mode"] = "mode"
    path: str
    mode: str = Field(pattern=r"^[0-7]{3,4}$")


class ChangeDir(_Strict):
    """The shell's working directory after the call."""

    op: Literal["cd"] = "cd"
    path: str


class GitChange(_Strict):
    """A repository made, or its facts after the call (the whole of them)."""

    op: Literal["git"] = "git"
    facts: GitFacts


ChangeOp = Annotated[
    Write | Append | Remove | MakeDir | Move | Copy | Link | Mode | ChangeDir | GitChange,
    Field(discriminator="op"),
]


class StepState(_Strict):
    """One step's recall and change; ``cwd``: the working directory the call started in."""

    cwd: str
    recall: Recall = Field(default_factory=Recall)
    change: list[ChangeOp] = Field(default_factory=list)
    problems: list[str] = Field(
        default_factory=list,
        description="What of the model's blocks could not be read, or of its change applied.",
    )


def changed_paths(change: list[ChangeOp]) -> set[str]:
    """The paths and repositories a step's change touched (a move or copy: both ends; a
    change of directory touches none)."""
    touched: set[str] = set()
    for op in change:
        if isinstance(op, Move | Copy):
            touched |= {op.source, op.target}
        elif isinstance(op, GitChange):
            touched.add(op.facts.repository)
        elif not isinstance(op, ChangeDir):
            touched.add(op.path)
    return touched

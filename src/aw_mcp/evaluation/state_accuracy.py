"""State accuracy: the model's recall and change of a step against the real sandbox's.

A real step (``CallRecord.state`` of a generated episode) says which paths the command read
and what it changed; a model that keeps state writes its own (``aw_mcp.state.text``). Per step
(``aw_mcp.state.compare``, re-exported here):

- **recall** holds when the model named the same paths, each as the same kind (file, folder,
  link, missing), and the same repositories; its compact form gives no content to compare;
- **change** holds when its ops are the real ones, whole (a write's content included), in any
  order;
- a **step** holds when both do.

A model that keeps no state is scored as one that says nothing (recall and change empty): the
baseline every model that keeps state must beat, and right wherever a command reads and
changes nothing.

Closed-loop rows also say which steps **read back** what the session changed (``reads_back``):
evaluation scores the answers of those steps apart from the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aw_mcp.state.compare import StateMatch, change_keys, compare, recall_keys
from aw_mcp.state.steps import StepState, changed_paths

__all__ = [
    "StateMatch",
    "StateTally",
    "change_keys",
    "changed_paths",
    "compare",
    "reads_back",
    "recall_keys",
    "steps_of",
]


@dataclass
class StateTally:
    """Steps with a real state, and how many of them the model got right."""

    n: int = 0
    recall: int = 0
    change: int = 0
    step: int = 0
    changing: int = 0  # steps that changed the world
    change_on_changing: int = 0

    def add(self, real: StepState, predicted: StepState | None) -> None:
        match = compare(real, predicted)
        self.n += 1
        self.recall += match.recall
        self.change += match.change
        self.step += match.step
        if real.change:
            self.changing += 1
            self.change_on_changing += match.change

    def summary(self) -> dict[str, Any]:
        def share(part: int, whole: int) -> float | None:
            return part / whole if whole else None

        return {
            "n": self.n,
            "step": share(self.step, self.n),
            "recall": share(self.recall, self.n),
            "change": share(self.change, self.n),
            "changing_n": self.changing,
            "change_on_changing": share(self.change_on_changing, self.changing),
        }


def steps_of(extra: dict[str, Any]) -> tuple[StepState, StepState | None] | None:
    """(real, predicted) of a predictions row, where it has a real state."""
    real = extra.get("state_real")
    if not isinstance(real, dict):
        return None
    predicted = extra.get("state_gen")
    return (
        StepState.model_validate(real),
        StepState.model_validate(predicted) if isinstance(predicted, dict) else None,
    )


# -- reading back: the steps whose answer depends on what the session itself changed ---------


def reads_back(steps: list[StepState | None]) -> list[bool | None]:
    """Per step of one episode, in order: whether it read a path (or a repository) that an
    earlier step changed, a folder holding one, or a path inside one (None: no real state).
    Such steps are where a world that forgets what the session did gives itself away."""
    changed: set[str] = set()
    flags: list[bool | None] = []
    for step in steps:
        if step is None:
            flags.append(None)
            continue
        read = set(step.recall.paths) | {facts.repository for facts in step.recall.git}
        flags.append(any(_related(path, done) for path in read for done in changed))
        changed |= changed_paths(step.change)
    return flags


def _related(read: str, changed: str) -> bool:
    return read == changed or changed.startswith(read + "/") or read.startswith(changed + "/")

"""A step's state against another's: the model's recall and change against the real sandbox's.

- **recall** holds when both name the same paths, each as the same kind (file, folder, link,
  missing), and the same repositories; the model's compact form gives no content to compare;
- **change** holds when the ops are the same, whole (a write's content included), in any
  order;
- a **step** holds when both do.

A model that keeps no state counts as one that says nothing (recall and change empty).
Evaluation scores with it (``evaluation.state_accuracy``); the viewer shows its verdicts.
"""

from __future__ import annotations

from dataclasses import dataclass

from aw_mcp.state.steps import StepState


def recall_keys(step: StepState) -> set[tuple[str, str]]:
    keys = {(path, state.kind) for path, state in step.recall.paths.items()}
    return keys | {(facts.repository, "git") for facts in step.recall.git}


def change_keys(step: StepState) -> list[str]:
    return sorted(op.model_dump_json() for op in step.change)


@dataclass
class StateMatch:
    recall: bool
    change: bool

    @property
    def step(self) -> bool:
        return self.recall and self.change


def compare(real: StepState, predicted: StepState | None) -> StateMatch:
    said = predicted or StepState(cwd=real.cwd)
    return StateMatch(
        recall=recall_keys(real) == recall_keys(said),
        change=change_keys(real) == change_keys(said),
    )

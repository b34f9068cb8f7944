"""Keeping an episode's state, for a prompt profile that keeps state (``small-state``).

Per episode, a ``WorldState`` (``aw_mcp.state.world``) built from the world's facts and kept
by applying the change the world model writes before each answer. Before a call, its view
(what the call names, looked up) goes next to the action; after it, the model's blocks are
read (``aw_mcp.state.text``), taken off the answer the client sees, and their change applied.
A restarted server rebuilds the state from the records' steps; history cut to fit the context
is told as the state the cut turns left.

Nothing here runs or interprets a command: a change the model could not write legibly, or that
the store refuses, is recorded as a problem of that step, and the call is answered anyway.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from aw_mcp.domain.catalogue import ServedTool
from aw_mcp.episode.episode import Episode
from aw_mcp.records.calls import Turn
from aw_mcp.state.steps import StepState
from aw_mcp.state.text import parse_step
from aw_mcp.state.world import WorldState

log = logging.getLogger(__name__)


@dataclass
class ReadStep:
    """What the model's answer said before the observation, and the observation."""

    answer: str
    step: StepState


def read_step(text: str, state: WorldState | None) -> ReadStep:
    """The observation and the step of a model's answer (its blocks taken off), read against
    the state the call started in. A world with no state (no working directory) still has
    its blocks taken off: a model that keeps state writes them whatever the world; paths
    are then read against the root."""
    cwd = state.cwd if state is not None else "/"
    parsed = parse_step(text, cwd)
    if not parsed.had_blocks:  # it read and changed nothing, by its own account
        return ReadStep(answer=text, step=StepState(cwd=cwd))
    return ReadStep(
        answer=parsed.answer,
        step=parsed.step.model_copy(update={"problems": parsed.problems}),
    )


class StateKeeper:
    """The states of the episodes of one simulator."""

    def state_of(self, episode: Episode, served: ServedTool) -> WorldState | None:
        """The episode's current state (None: its world names no working directory, so there
        is no state to keep). Built on first use: from the world's facts, then every turn's
        change, so a restored episode gets back the state its records describe."""
        if episode.world_state is None and not episode.stateless:
            built = self.initial(episode, served)
            if built is None:
                episode.stateless = True
                return None
            for turn in episode.turns:
                if turn.state is not None:
                    built.apply(turn.state.change)
            episode.world_state = built
        return episode.world_state

    def initial(self, episode: Episode, served: ServedTool) -> WorldState | None:
        return WorldState.from_facts(episode.world_over(served.world).facts)

    def summary_after(self, episode: Episode, served: ServedTool, turns: list[Turn]) -> str | None:
        """The state ``turns`` (the oldest ones, cut from the prompt) left."""
        state = self.initial(episode, served)
        if state is None:
            return None
        for turn in turns:
            if turn.state is not None:
                state.apply(turn.state.change)
        return state.summary()

    def absorb(self, episode: Episode, step: StepState) -> StepState:
        """Apply a step's change to the episode's state; the step, with what was refused."""
        state = episode.world_state
        if state is None:
            return step
        refused = state.apply(step.change)
        if refused or step.problems:
            log.info(
                "episode %r step %d: state problems: %s",
                episode.episode_id,
                episode.next_index,
                "; ".join([*step.problems, *refused]),
            )
        return step.model_copy(update={"problems": [*step.problems, *refused]}) if refused else step

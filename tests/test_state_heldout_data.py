"""The committed held-out sets a state-keeping model is measured on (data/terminal/state/):
their ground truth must stay readable by the state's parser and bookkeeping as both change."""

from __future__ import annotations

from pathlib import Path

import pytest

from aw_mcp.domain.loader import load_domain
from aw_mcp.records.folder import record_dir_worlds
from aw_mcp.records.reader import load_record_dir
from aw_mcp.state.steps import changed_paths
from aw_mcp.state.world import WorldState

STATE_DATA = Path(__file__).resolve().parents[1] / "data" / "terminal" / "state"


@pytest.mark.data
@pytest.mark.parametrize("folder", ["heldout", "templates-heldout"])
def test_every_committed_state_step_applies_to_its_episodes_world_without_a_refusal(folder):
    """Every call carries the sandbox's recall and change; each episode's changes, applied in
    order to the state built from its world's facts (its own world file over the bundled
    Terminal world's, as the closed loop serves it), are all accepted, and the sessions do
    change the world (a set with no changes could not measure keeping state)."""
    directory = STATE_DATA / folder
    episodes = load_record_dir(directory)
    worlds = record_dir_worlds(directory, episodes)
    bundled = load_domain("terminal").world
    assert len(episodes) == 40
    changed = 0
    for episode in episodes:
        own = worlds.get(episode.episode)
        state = WorldState.from_facts((bundled.merged(own) if own else bundled).facts)
        assert state is not None, episode.episode
        for record in episode.records:
            assert record.state is not None, (episode.episode, record.index)
            refused = state.apply(record.state.change)
            assert refused == [], (episode.episode, record.index, refused)
            changed += bool(changed_paths(record.state.change))
    assert changed >= len(episodes)  # at least a change an episode, on average

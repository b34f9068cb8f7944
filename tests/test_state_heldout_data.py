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
def test_the_committed_state_steps_replay_into_what_later_steps_read(folder):
    """Every call carries the sandbox's recall and change. Each episode's changes, applied in
    order to the state built from its world's facts (its own world file over the bundled
    Terminal world's, as the closed loop serves it), are all accepted, and what each later
    step read of a path the state holds is what the state holds there: the bookkeeping of the
    real changes is the world the sandbox showed. The sessions do change the world and read
    it back (a set without either could not measure keeping state)."""
    directory = STATE_DATA / folder
    episodes = load_record_dir(directory)
    worlds = record_dir_worlds(directory, episodes)
    bundled = load_domain("terminal").world
    assert len(episodes) == 40
    changed = compared = 0
    for episode in episodes:
        own = worlds.get(episode.episode)
        state = WorldState.from_facts((bundled.merged(own) if own else bundled).facts)
        assert state is not None, episode.episode
        for record in episode.records:
            where = (episode.episode, record.index)
            assert record.state is not None, where
            for path, real in record.state.recall.paths.items():
                kept = state.state_of(path)
                if kept is None:
                    continue  # outside what the facts and the changes say
                assert (real.kind == "missing") == (kept.kind == "missing"), (*where, path)
                if real.content is not None and kept.content is not None:
                    assert real.content == kept.content, (*where, path)
                compared += 1
            refused = state.apply(record.state.change)
            assert refused == [], (*where, refused)
            changed += bool(changed_paths(record.state.change))
    assert changed >= len(episodes)  # at least a change an episode, on average
    assert compared >= 5 * len(episodes)

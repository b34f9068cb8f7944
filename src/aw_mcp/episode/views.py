"""The state shown next to each recorded call, replayed for records that were not served with
one (real records from a sandbox; a server that kept no state).

The server keeps an episode's state as it goes (``simulation.state_keeping``); training and
export render recorded episodes, and give each turn the view it would have had: the state kept
from the world's facts through every earlier turn's change, each block an earlier view
showed cut as the server cuts it (``news_only``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from aw_mcp.domain.models import WorldSpec
from aw_mcp.records.calls import Turn
from aw_mcp.state.world import WorldState, news_only


def view_of_call(state: WorldState, arguments: dict[str, Any], history: Iterable[Turn]) -> str:
    """The view next to a call: the state of what its arguments name, each block a view of
    the history (the turns the model sees) already showed cut to ``as above``."""
    return news_only(state.view(arguments), (t.view for t in history if t.reached_world))


def with_views(turns: list[Turn], world: WorldSpec) -> tuple[list[Turn], list[str]]:
    """The turns with the view each call would have had next to it (the state kept from the
    world's facts through every earlier turn's change, as the server keeps it), and the
    summary of the state after each turn (for windows). Turns keep a view they were served
    with. A world that names no working directory keeps no state: the turns as they were."""
    state = WorldState.from_facts(world.facts)
    if state is None:
        return turns, []
    viewed: list[Turn] = []
    summaries: list[str] = []
    for turn in turns:
        view = turn.view
        if view is None:
            view = view_of_call(state, turn.action.arguments, viewed)
        viewed.append(turn.model_copy(update={"view": view}))
        if turn.state is not None:
            state.apply(turn.state.change)
        summaries.append(state.summary())
    return viewed, summaries

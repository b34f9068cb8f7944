"""A read-only call repeated with nothing state-changing in between sees the same thing.

Not when the world's conditions changed since, nor when a fault shaped that observation (a
truncated or drifted answer is not the state of the world). Saves a generation and keeps the
world consistent where a small model would drift.
"""

from __future__ import annotations

from typing import Any

from aw_mcp.domain.answers import ToolAnswer
from aw_mcp.domain.catalogue import ServedTool
from aw_mcp.episode.episode import Episode


class ReadRepeats:
    def __init__(self, enabled: bool = True):
        self.enabled = enabled

    def lookup(
        self, episode: Episode, served: ServedTool, arguments: dict[str, Any]
    ) -> ToolAnswer | None:
        """The earlier observation to repeat, or None when the model must answer."""
        if not (self.enabled and served.spec.read_only):
            return None
        for turn in reversed(episode.turns):
            if turn.action.tool == served.spec.name and turn.action.arguments == arguments:
                if turn.is_error or turn.damaged or turn.conditions != episode.active_conditions():
                    return None
                structured = served.spec.structured_answer(turn.observation)
                return ToolAnswer(text=turn.observation, structured=structured)
            tool = served.domain.tool(turn.action.tool)
            if tool is None or not tool.read_only:
                return None  # something may have changed the world since
        return None

"""A read-only call repeated with nothing state-changing in between sees the same thing.

Not when the world's conditions changed since, nor when a fault shaped that observation (a
truncated or drifted answer is not the state of the world). Saves a generation and keeps the
world consistent where a small model would drift.

The world's facts are the observation before the first step: a resource whose content a
world fact declares under its URI (``"notes://todo.md": "- buy milk"``) reads as that
content until a state-changing call; after one, the world model answers (the fact still in
its prompt).
"""

from __future__ import annotations

import json
from typing import Any

from aw_mcp.domain.answers import ToolAnswer
from aw_mcp.domain.catalogue import ServedTool
from aw_mcp.episode.episode import Episode
from aw_mcp.records.calls import READ_RESOURCE, SURFACE_METHODS


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
            if turn.action.tool in SURFACE_METHODS:
                continue  # reads, prompt gets and completions change nothing
            tool = served.domain.tool(turn.action.tool)
            if tool is None or not tool.read_only:
                return None  # something may have changed the world since
        if served.spec.name == READ_RESOURCE and not episode.active_conditions():
            return declared_content(served, arguments.get("uri"))
        return None


def declared_content(served: ServedTool, uri: Any) -> ToolAnswer | None:
    """The content the world's facts give the resource ``uri`` (a fact named by the URI)."""
    if not isinstance(uri, str) or uri not in served.world.facts:
        return None
    value = served.world.facts[uri]
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return ToolAnswer(text=text)

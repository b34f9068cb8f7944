"""Fit an episode's prompt into the model's context window.

When the history overflows, the oldest turns are summarized in the system message instead of
shown in full. Trimming goes well under the budget (``TRIM_TARGET``) so the next steps keep a
stable prompt prefix, and with it their KV cache, instead of trimming again at every step.

The prompt leaves room for the answer: the tool's ``reserved_tokens`` (default its budget,
``max_tokens``), at most ``ANSWER_SHARE`` of the window. A budget is sized for the tool's
longest real answers; a shell's are mostly a few lines but reach 1,562 tokens (git's usage
text), so it reserves less than its budget rather than give up history on every call, and no
budget may take a small window from its prompt (``--n-ctx 2048`` would leave 384 tokens, less
than a system prompt). An answer longer than the room kept runs on into whatever the context
has left (``FittedPrompt.answer_tokens``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aw_mcp.domain.catalogue import ServedTool
from aw_mcp.domain.models import ToolCall
from aw_mcp.engines.base import ChatMessage, Engine
from aw_mcp.episode.episode import Episode
from aw_mcp.episode.prompt import PromptProfile, build_messages
from aw_mcp.errors import EngineError

if TYPE_CHECKING:
    from aw_mcp.simulation.grounding import GroundingIndex
    from aw_mcp.simulation.state_keeping import StateKeeper

log = logging.getLogger(__name__)

TRIM_TARGET = 0.7
ANSWER_SHARE = 1 / 3  # of the window, at most, kept from the prompt for the answer


@dataclass(frozen=True)
class FittedPrompt:
    messages: list[ChatMessage]
    answer_tokens: int  # the answer's budget, cut to the room the context has left


class PromptTooLongError(EngineError):
    pass


class ContextFitter:
    def __init__(
        self,
        engine: Engine,
        profile: PromptProfile,
        grounding: GroundingIndex | None = None,
        keeper: StateKeeper | None = None,
        window: int | None = None,
    ):
        self.engine = engine
        self.profile = profile
        self.grounding = grounding  # real transitions shown as examples (--grounding)
        self.keeper = keeper  # a profile that keeps state: cut turns are told as a state
        # Tokens a prompt and its answer may fill when fewer than the context window
        # (--window-tokens): a model trained on windows of history is shown no longer one.
        self.window = window

    @property
    def window_tokens(self) -> int:
        window = self.engine.context_window
        return min(window, self.window) if self.window else window

    async def fit(
        self,
        episode: Episode,
        served: ServedTool,
        action: ToolCall,
        max_tokens: int,
        view: str | None = None,
        reserved_tokens: int | None = None,
    ) -> FittedPrompt:
        """Messages that leave ``reserved_tokens`` (default ``max_tokens``, ``ANSWER_SHARE``
        of the window at most) for the answer, trimming the oldest turns if they must go
        (``episode.omitted_turns`` remembers how many). ``view``: the state shown next to the
        action (a profile that keeps state)."""
        reserved = min(reserved_tokens or max_tokens, int(self.window_tokens * ANSWER_SHARE))
        budget = self.window_tokens - reserved
        conditions = episode.active_conditions()
        examples = (
            self.grounding.examples(action.tool, action.arguments, episode.turns)
            if self.grounding is not None
            else None
        )

        def build(omitted: int, summarize: bool = True) -> list[ChatMessage]:
            summary = None
            if omitted and summarize and self.keeper is not None:
                summary = self.keeper.summary_after(episode, served, episode.turns[:omitted])
            return build_messages(
                self.profile,
                served.domain,
                served.domain.tools,
                episode.world_over(served.world),
                episode.turns,
                omitted,
                action,
                episode.next_index,
                conditions,
                summarize_omitted=summarize,
                examples=examples,
                current_view=view,
                state_summary=summary,
            )

        omitted = episode.omitted_turns
        messages = build(omitted)
        used = await self.engine.count_tokens(messages)
        if used <= budget:
            return self._fitted(messages, used, max_tokens)
        before = omitted
        target = int(budget * TRIM_TARGET)
        while used > target and omitted < len(episode.turns):
            omitted += max(1, (len(episode.turns) - omitted) // 4)
            omitted = min(omitted, len(episode.turns))
            messages = build(omitted)
            used = await self.engine.count_tokens(messages)
        if used > budget:  # even the summary of dropped turns does not fit: leave it out
            messages = build(omitted, summarize=False)
            used = await self.engine.count_tokens(messages)
        if used > budget:
            # Refused: this call's own action is too large. The history stays as it was, so
            # later calls are not left with turns summarized for a prompt that never ran.
            windowed = self.window_tokens < self.engine.context_window
            room = "--window-tokens" if windowed else "the model's context window"
            larger = "a larger --window-tokens" if windowed else "a model with a larger context"
            raise PromptTooLongError(
                f"the prompt needs {used} tokens but {room} leaves {budget} (shorten the "
                f"arguments or use {larger})"
            )
        episode.omitted_turns = omitted
        log.warning(
            "episode %r: history over the context window; %d oldest turns now "
            "summarized (was %d), prompt %d tokens of %d",
            episode.episode_id,
            omitted,
            before,
            used,
            budget,
        )
        return self._fitted(messages, used, max_tokens)

    def _fitted(self, messages: list[ChatMessage], used: int, max_tokens: int) -> FittedPrompt:
        return FittedPrompt(messages, min(max_tokens, self.engine.context_window - used))

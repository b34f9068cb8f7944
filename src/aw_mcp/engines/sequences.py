"""Small helpers on token and text sequences shared by the local engines."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from aw_mcp.engines.base import ChatMessage


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share (what a KV cache can reuse)."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def first_stop(text: str, stops: list[str]) -> int | None:
    """Where the earliest stop string starts in ``text``, or None."""
    positions = [i for s in stops if (i := text.find(s)) >= 0]
    return min(positions) if positions else None


class LastPromptTokens:
    """The tokens of the most recent prompt, so it is rendered and tokenized once per call.

    The simulator counts a prompt's tokens (to fit the context window) and then generates from
    the same messages; a few-thousand-token prompt need not be tokenized twice.
    """

    def __init__(self) -> None:
        self._messages: list[ChatMessage] | None = None
        self._tokens: list[int] = []

    def get(
        self, messages: list[ChatMessage], tokenize: Callable[[list[ChatMessage]], list[int]]
    ) -> list[int]:
        if messages != self._messages:
            self._tokens = tokenize(messages)
            self._messages = list(messages)
        return self._tokens

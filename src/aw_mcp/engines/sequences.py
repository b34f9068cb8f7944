"""Small helpers on token and text sequences shared by the local engines."""

from __future__ import annotations

import threading
from collections import OrderedDict
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


class PromptTokenCache:
    """Tokens of recent prompts, so a prompt is rendered and tokenized once per call.

    The simulator counts a prompt's tokens (to fit the context window) and then generates from
    the same messages; other episodes' calls may come in between, hence a few entries.
    Thread-safe (prompts are tokenized in worker threads); two threads may tokenize the same
    new prompt at once, which costs time but gives the same tokens.
    """

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._tokens: OrderedDict[tuple[tuple[str, str], ...], list[int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(
        self, messages: list[ChatMessage], tokenize: Callable[[list[ChatMessage]], list[int]]
    ) -> list[int]:
        key = tuple((m.role, m.content) for m in messages)
        with self._lock:
            tokens = self._tokens.get(key)
            if tokens is not None:
                self._tokens.move_to_end(key)
                return tokens
        tokens = tokenize(messages)
        with self._lock:
            self._tokens[key] = tokens
            while len(self._tokens) > self.size:
                self._tokens.popitem(last=False)
        return tokens

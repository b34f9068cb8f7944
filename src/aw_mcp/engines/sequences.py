"""Small helpers on token and text sequences shared by the local engines."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence

from aw_mcp.engines.base import ChatMessage

# Bytes before a stop string's length that are searched too: the newest token's own bytes.
TAIL_SLACK_BYTES = 64


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
    """

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._tokens: OrderedDict[tuple[tuple[str, str], ...], list[int]] = OrderedDict()

    def get(
        self, messages: list[ChatMessage], tokenize: Callable[[list[ChatMessage]], list[int]]
    ) -> list[int]:
        key = tuple((m.role, m.content) for m in messages)
        tokens = self._tokens.get(key)
        if tokens is None:
            tokens = self._tokens[key] = tokenize(messages)
            while len(self._tokens) > self.size:
                self._tokens.popitem(last=False)
        else:
            self._tokens.move_to_end(key)
        return tokens


def stop_in_output(output: bytes, stops: list[str]) -> tuple[str, int | None]:
    """The decoded output and where its earliest stop string starts (None if none yet).

    Called after every token: only the newest bytes can hold a stop string that was not there
    a token ago, so the whole output is decoded only once one shows up (decoding all of it at
    every token is quadratic in the answer's length, thousands of tokens for reasoning models).
    """
    longest = max((len(s.encode()) for s in stops), default=0)
    if not longest:
        return "", None
    tail = output[-(longest + TAIL_SLACK_BYTES) :].decode("utf-8", errors="ignore")
    if first_stop(tail, stops) is None:
        return "", None
    text = output.decode("utf-8", errors="ignore")
    return text, first_stop(text, stops)

"""A guard against degenerate loops in greedy decoding, for both local engines.

A small world model decoding greedily can fall into a loop: the same line or the same few
characters again and again (``README.md`` forty times for a ``find``, ``1234567890...`` for a
``git log``) until ``max_tokens``, so the answer never reaches its end (the exit-code line of a
terminal answer) and costs its whole token budget. Real observations almost never repeat like
that: over the 29,736 real observations in ``trajectories/`` (every domain) the longest text
made of one block repeated at least three times is 67 characters (a line of ``=``).

``LoopGuard`` watches the output's tail: when the chosen token would extend such a run to
``min_span`` characters (default 128, about twice that longest real one), the token is banned
for this step and the next likeliest is taken, as llama.cpp's DRY sampler penalises extending
a repeat. The model then leaves the loop (usually for the answer's last line), and the
answer keeps everything before the point where it became a loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

# Tokens decoded to look at the tail: enough for ``min_span`` characters plus one period
# even at one character a token.
TAIL_TOKENS = 256


class LoopGuard:
    def __init__(
        self,
        detokenize: Callable[[Sequence[int]], str],
        min_span: int = 128,
        max_period: int = 64,
        min_copies: int = 3,
        max_bans: int = 8,
    ):
        self._detokenize = detokenize
        self.min_span = min_span
        self.max_period = max_period
        self.min_copies = min_copies
        self.max_bans = max_bans
        self.bans = 0  # tokens banned so far in this generation

    def loops(self, text: str) -> bool:
        """Does ``text`` end with one block of at most ``max_period`` characters repeated
        over at least ``min_span`` characters (and ``min_copies`` times)?"""
        for period in range(1, self.max_period + 1):
            span = max(self.min_span, self.min_copies * period)
            if len(text) < span:
                break
            # Periodic with this period over the last ``span`` characters: the tail equals
            # itself shifted by one period.
            if text[-span + period :] == text[-span:-period]:
                return True
        return False

    def choose(
        self, logits: np.ndarray, out: Sequence[int], sample: Callable[[np.ndarray], int]
    ) -> int:
        """``sample(logits)``, unless that token would continue a loop: then the likeliest
        token that does not (up to ``max_bans`` tries, after which the loop is let be)."""
        token = sample(logits)
        tail = list(out[-TAIL_TOKENS:])
        masked: np.ndarray | None = None
        for _ in range(self.max_bans):
            if not self.loops(self._detokenize([*tail, token])):
                return token
            if masked is None:
                masked = np.array(logits, dtype=np.float32, copy=True)
            masked[token] = -np.inf
            self.bans += 1
            token = sample(masked)
        return token

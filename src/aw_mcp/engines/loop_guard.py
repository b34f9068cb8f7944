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

A domain can add a rule of its own (``generation.loop_guard`` in its domain file,
``LoopGuardSettings``), checked beside the default one. ``mask_digits`` compares text with
every digit read as ``0``: a page snapshot that loops on one block whose refs count up
(``[ref=e113]``, ``[ref=e114]``) is not an exact repeat, but is one with digits masked.
Masked, real observations repeat longer (an ``ls -l`` of similar lines: 218 characters; a
web page's list of similar rows: 1,088), so such a rule needs a longer span, and suits only
a domain whose real answers never count in a loop (a shell's do).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

_DIGIT = re.compile(r"[0-9]")


class LoopGuardSettings(BaseModel):
    """When the guard calls a tail a loop (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_span: int = Field(default=128, ge=8, le=8192, description="characters a loop spans")
    max_period: int = Field(default=64, ge=1, le=4096, description="longest repeated block")
    min_copies: int = Field(default=3, ge=2, description="least copies of the block")
    mask_digits: bool = Field(default=False, description="read every digit as 0")


def loops_by(rule: LoopGuardSettings, text: str) -> bool:
    """Does ``text`` end with one block of at most ``rule.max_period`` characters repeated
    over at least ``rule.min_span`` characters (and ``rule.min_copies`` times)?"""
    if rule.mask_digits:
        text = _DIGIT.sub("0", text)
    for period in range(1, rule.max_period + 1):
        span = max(rule.min_span, rule.min_copies * period)
        if len(text) < span:
            break
        # Periodic with this period over the last ``span`` characters: the tail equals
        # itself shifted by one period.
        if text[-span + period :] == text[-span:-period]:
            return True
    return False


class LoopGuard:
    """The default rule (exact repeats), plus ``extra``: a domain's own rule, beside it."""

    def __init__(
        self,
        detokenize: Callable[[Sequence[int]], str],
        extra: LoopGuardSettings | None = None,
        max_bans: int = 8,
    ):
        self._detokenize = detokenize
        self.rules = [LoopGuardSettings(), *([extra] if extra is not None else [])]
        self.max_bans = max_bans
        # Tokens decoded to look at the tail: enough for the longest span plus one period
        # even at one character a token.
        self.tail_tokens = max(
            max(r.min_span, r.min_copies * r.max_period) + r.max_period for r in self.rules
        )
        self.bans = 0  # tokens banned so far in this generation

    def loops(self, text: str) -> bool:
        """Does ``text`` end in a loop by any of the rules?"""
        return any(loops_by(rule, text) for rule in self.rules)

    def choose(
        self, logits: np.ndarray, out: Sequence[int], sample: Callable[[np.ndarray], int]
    ) -> int:
        """``sample(logits)``, unless that token would continue a loop: then the likeliest
        token that does not (up to ``max_bans`` tries, after which the loop is let be)."""
        token = sample(logits)
        tail = list(out[-self.tail_tokens :])
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

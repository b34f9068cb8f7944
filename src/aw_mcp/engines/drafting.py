"""Drafts from the context: what speculative decoding proposes, with no second model.

Much of what a world model writes is already in its context: a ``cat`` of a file the world
facts show, an ``ls`` of entries listed before, a page snapshot after a click. Prompt lookup
(n-gram drafting) finds the newest tokens of the sequence (prompt and output so far) earlier
in it and proposes the tokens that followed them there; the model then checks the whole
draft in one forward pass (``local.py``), and greedy decoding keeps the tokens it would have
chosen anyway. A draft never changes the output, only how many model calls it takes.

``ContextDrafter`` is pure (token ids in, token ids out):

- The match: the longest tail of the sequence (at least ``min_match``, at most
  ``max_match`` tokens) that occurred before; of equally long ones the most recent. A long
  tail locks onto the passage being copied, where a short one would pick any ``\\n``.
- The draft: what followed that occurrence, at most ``length`` tokens.
- ``length`` adapts to what the model accepts (``feedback``): doubled after a draft taken
  whole (up to ``max_length``), cut to one more than the accepted part after a rejection.
  After a draft rejected at its first token the match needed grows by one (a stretch of
  free text where short matches mislead), and it falls back to ``min_match`` after a draft
  taken whole. On a CPU every drafted token costs part of a decode step, so a draft that
  misses is not free there.
- ``guess``: one token to evaluate when a backend must check at least one drafted token
  per step (llama.cpp: see ``LlamaCppEngine._draft_span``) and no draft was found: what
  followed the last token where it occurred before, else the last token again. Guesses do
  not size the drafts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DraftSettings:
    """How drafts are found and sized (see the module docstring)."""

    min_match: int = 2  # tokens of the tail that must have occurred before
    max_match: int = 16  # longest tail compared
    start_length: int = 4  # tokens in the first draft
    max_length: int = 16  # most tokens in one draft
    max_min_match: int = 8  # how far rejections may raise the match needed
    # False: no drafts from the context, only the guesses a backend's span needs (how the
    # tests and benchmarks/speculative.py show that drafts change no answer, and what
    # checking drafts costs by itself).
    from_context: bool = True

    def __post_init__(self) -> None:
        if not 1 <= self.min_match <= self.max_min_match <= self.max_match:
            raise ValueError("need 1 <= min_match <= max_min_match <= max_match")
        if not 1 <= self.start_length <= self.max_length:
            raise ValueError("need 1 <= start_length <= max_length")


class ContextDrafter:
    """Prompt-lookup drafts over one sequence's tokens (its prompt, then its output)."""

    def __init__(self, context: Sequence[int], settings: DraftSettings | None = None):
        self.settings = settings or DraftSettings()
        self._tokens = np.zeros(max(256, 2 * len(context)), dtype=np.int64)
        self._n = 0
        self.extend(context)
        self.length = self.settings.start_length  # tokens in the next draft
        self.min_match = self.settings.min_match  # tail tokens a match needs now
        # What drafting did, for counters and benchmarks.
        self.drafts = 0  # drafts proposed and checked
        self.drafted = 0  # tokens in them
        self.accepted = 0  # of those, tokens the model chose too

    def __len__(self) -> int:
        return self._n

    @property
    def tokens(self) -> np.ndarray:
        """The sequence so far (a view; do not modify)."""
        return self._tokens[: self._n]

    def append(self, token: int) -> None:
        self.extend([token])

    def extend(self, tokens: Sequence[int]) -> None:
        n = self._n + len(tokens)
        if n > len(self._tokens):
            grown = np.zeros(max(n, 2 * len(self._tokens)), dtype=np.int64)
            grown[: self._n] = self._tokens[: self._n]
            self._tokens = grown
        self._tokens[self._n : n] = tokens
        self._n = n

    def match(self) -> tuple[int, int] | None:
        """Where the sequence's tail occurred before: (the position after that occurrence,
        the tail's length), the longest tail of at least ``min_match`` tokens, most recent of
        equals; None if there is none."""
        n, seq = self._n, self._tokens
        if n < self.min_match + 1:
            return None
        # Ends of earlier occurrences of the last token (never the tail itself).
        ends = np.flatnonzero(seq[: n - 1] == seq[n - 1])
        length = 1
        limit = min(self.settings.max_match, n - 1)
        while length < limit and ends.size:
            starts = ends - length
            keep = starts >= 0
            keep[keep] = seq[starts[keep]] == seq[n - 1 - length]
            if not keep.any():
                break
            ends = ends[keep]
            length += 1
        if length < self.min_match or not ends.size:
            return None
        return int(ends[-1]) + 1, length

    def draft(self, limit: int | None = None) -> list[int]:
        """The tokens that followed the tail's earlier occurrence: at most ``length`` (and
        ``limit``) of them; empty when the tail never occurred before."""
        size = self.length if limit is None else min(self.length, limit)
        if size <= 0 or not self.settings.from_context:
            return []
        found = self.match()
        if found is None:
            return []
        start, _ = found
        return [int(t) for t in self._tokens[start : min(start + size, self._n)]]

    def guess(self) -> int:
        """One likely next token, for a step that must check a draft when ``draft`` found
        none: what followed the last token's most recent earlier occurrence, else the last
        token itself."""
        n, seq = self._n, self._tokens
        last = int(seq[n - 1])
        if self.settings.from_context:
            ends = np.flatnonzero(seq[: n - 1] == last)
            if ends.size:
                return int(seq[ends[-1] + 1])
        return last

    def feedback(self, drafted: int, accepted: int) -> None:
        """A draft of ``drafted`` tokens was checked; the model chose the first ``accepted``
        of them too. Sizes the next draft (see the module docstring)."""
        if drafted <= 0:
            return
        settings = self.settings
        self.drafts += 1
        self.drafted += drafted
        self.accepted += accepted
        if accepted >= drafted:
            self.length = min(settings.max_length, 2 * self.length)
            self.min_match = settings.min_match
        else:
            self.length = max(1, min(self.length, accepted + 1))
            if accepted == 0:
                self.min_match = min(settings.max_min_match, self.min_match + 1)

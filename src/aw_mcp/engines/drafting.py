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
- The draft: what followed that occurrence, at most ``length`` tokens, and no more than
  the match had, less one: a tail of two that occurred before drafts one token (on a CPU
  a drafted token that misses costs part of a step, and short matches miss most).
- ``length`` adapts to what the model accepts (``feedback``): doubled after a draft taken
  whole (up to ``max_length``), cut to one more than the accepted part after a rejection.
  After a draft rejected at its first token the match needed grows by one (a stretch of
  free text where short matches mislead), and it falls back to ``min_match`` after a draft
  taken whole. On a CPU every drafted token costs part of a decode step, so a draft that
  misses is not free there.
- ``guess``: one token to evaluate when a backend must check at least one drafted token
  in a step that checks drafts (llama.cpp built from PyPI's source: see
  ``LlamaCppEngine._draft_span``) and no draft was found: what followed the sequence's
  longest tail where it occurred before, where that tail was seen before (below). Guesses
  do not size the drafts.
- ``seen_before``: whether the tail occurred before at all (drafts or none). Where it did
  not, no draft can be found, and such a backend evaluates the token alone: with drafts
  and without, the same steps are one position, so answers do not depend on the drafts,
  and an answer with nothing to copy decodes as without drafts.

``AnswerMemory`` adds a second place to look: the engine's recent answers to other
episodes, each kept with the end of the prompt it answered (the call). RL rollouts and
agent test suites run the same session many times, and a command met in the same state is
answered the same way: the second episode's ``cat`` drafts from the first one's answer. A
drafter takes the longer of the two matches (its own context on a tie), so the memory only
adds drafts; what is chosen is still the model's every time.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
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
    # Where a step of one position computes otherwise than a step of several: the tail
    # that must have occurred before for a token to be evaluated with more (``seen_before``).
    step_tail: int = 3
    # False: no drafts from the context, only the guesses a backend's span needs (how the
    # tests and benchmarks/speculative.py show that drafts change no answer, and what
    # checking drafts costs by itself).
    from_context: bool = True
    # Recent answers to other episodes drafted from too (``AnswerMemory``): how many tokens
    # of them are kept (0: none), and how many prompt tokens before each answer are kept
    # with it (the call it answered, so that a match can begin there).
    memory_tokens: int = 1 << 16
    memory_lead: int = 24

    def __post_init__(self) -> None:
        if not 1 <= self.min_match <= self.max_min_match <= self.max_match:
            raise ValueError("need 1 <= min_match <= max_min_match <= max_match")
        if not self.min_match <= self.step_tail <= self.max_match:
            raise ValueError("need min_match <= step_tail <= max_match")
        if not 1 <= self.start_length <= self.max_length:
            raise ValueError("need 1 <= start_length <= max_length")
        if self.memory_tokens < 0 or self.memory_lead < 0:
            raise ValueError("need memory_tokens >= 0 and memory_lead >= 0")


class ContextDrafter:
    """Prompt-lookup drafts over one sequence's tokens (its prompt, then its output)."""

    def __init__(
        self,
        context: Sequence[int],
        settings: DraftSettings | None = None,
        answers: np.ndarray | None = None,
        own_tails: bool = False,
    ):
        """``answers``: ``AnswerMemory.tokens()`` when drafting from other episodes' answers.
        ``own_tails``: for a backend that evaluates a token alone where its tail was not
        seen before (``seen_before``): a draft from the memory stops before a token whose
        tail the sequence itself never held, so that every drafted token the model takes
        extends a tail seen before in the episode's own tokens."""
        self.own_tails = own_tails
        self.settings = settings or DraftSettings()
        self._tokens = np.zeros(max(256, 2 * len(context)), dtype=np.int64)
        self._n = 0
        self.extend(context)
        empty = answers is None or not answers.size or not self.settings.from_context
        self._answers = None if empty else answers
        self._occurrence: tuple[int, int] | None = None  # ``_own_occurrence`` for ...
        self._occurrence_at = -1  # ... a sequence of this many tokens
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

    def match(self) -> tuple[np.ndarray, int, int] | None:
        """Where the sequence's tail occurred before: (the tokens it occurred in, the
        position after that occurrence, the tail's length), the longest tail of at least
        ``min_match`` tokens, most recent of equals, in the sequence itself or, longer
        there, in the answer memory; None if there is none."""
        n, seq = self._n, self.tokens
        if n < self.min_match + 1:
            return None
        own = self._own_occurrence()
        best = None if own is None else (seq, *own)
        if self._answers is not None:
            ends = _followed_occurrences(self._answers, int(seq[n - 1]))
            other = _latest_longest(self._answers, _tail(seq, self.settings.max_match), ends)
            if other is not None and (best is None or other[1] > best[2]):
                best = (self._answers, *other)
        if best is None or best[2] < self.min_match:
            return None
        return best

    def seen_before(self) -> bool:
        """Whether the sequence's last ``settings.step_tail`` tokens occurred before in it
        (never in the answer memory: another episode's answers must not change how this
        one is computed). Where they did not, no draft from the sequence can be found; a
        backend that needs a guess beside every token in a step that checks drafts
        (``guess``) evaluates a step of one position there, with drafts and without
        alike, so that answers still do not depend on the drafts: a drafted token (or a
        guess) the model takes extends a tail that occurred before, so the step that
        evaluated it is one where the tail was seen before without drafts too."""
        return self.guess() is not None

    def _own_occurrence(self) -> tuple[int, int] | None:
        """``_earlier_occurrence`` of the sequence's tail of at most ``max_match`` tokens,
        searched once for each length of the sequence: a step's ``match``, ``seen_before``
        and ``guess`` read the same one (its length says whether the shorter tail of
        ``seen_before`` occurred too)."""
        if self._occurrence_at != self._n:
            self._occurrence = _earlier_occurrence(self.tokens, self.settings.max_match)
            self._occurrence_at = self._n
        return self._occurrence

    def draft(self, limit: int | None = None) -> list[int]:
        """The tokens that followed the tail's earlier occurrence: at most ``length`` (and
        ``limit``) of them; empty when the tail never occurred before."""
        size = self.length if limit is None else min(self.length, limit)
        if size <= 0 or not self.settings.from_context:
            return []
        found = self.match()
        if found is None:
            return []
        tokens, start, matched = found
        # A short match is a weak promise: no more tokens than it had, less one (a tail
        # of two that occurred before drafts one token; a copy's long tail, the most).
        size = min(size, max(1, matched - 1))
        draft = _until_boundary(tokens[start : start + size])
        if self.own_tails and tokens is self._answers:  # the memory's: cut to own tails
            draft = self._own_tails_only(draft)
        return draft

    def _own_tails_only(self, draft: list[int]) -> list[int]:
        """``draft`` up to its first token whose tail (the last ``step_tail`` tokens) the
        sequence, with the draft's earlier tokens after it, never held before."""
        extended = np.concatenate([self.tokens, np.asarray(draft, dtype=np.int64)])
        for i in range(len(draft)):
            # The sequence with draft[: i + 1] after it.
            if not _tail_held_before(extended[: self._n + i + 1], self.settings.step_tail):
                return draft[:i]
        return draft

    def guess(self) -> int | None:
        """One likely next token, for a step that must check a draft when ``draft`` found
        none: what followed the sequence's longest tail where it occurred before (the
        most recent of equals), drafts or none; None where the tail was not seen before
        (``seen_before``: such a step is evaluated alone). Taken, it extends a tail seen
        before.

        The follower of the last token's most recent occurrence was measured (offline, on
        the answers of closed-loop evaluations of the mirrored servers: 62k tokens, 13.7k
        of them with no draft at the starting match length) the next token 23.8% of the
        time; the longest tail's follower is what keeps a taken guess on a tail seen
        before, which step sizes need."""
        found = self._own_occurrence()
        if found is None or found[1] < self.settings.step_tail:
            return None
        return int(self.tokens[found[0]])

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


# Between two answers in ``AnswerMemory.tokens()`` (no token id is negative).
BOUNDARY = -1


def _followed_occurrences(tokens: np.ndarray, token: int) -> np.ndarray:
    """Positions of ``token`` in ``tokens`` that a token of the same answer follows."""
    ends = np.flatnonzero(tokens[:-1] == token)
    return ends[tokens[ends + 1] != BOUNDARY]


def _latest_longest(
    tokens: np.ndarray, tail: np.ndarray, ends: np.ndarray
) -> tuple[int, int] | None:
    """Of ``ends`` (positions in ``tokens`` holding the tail's last token), the ones where
    the longest suffix of ``tail`` ends; (the position after the latest of them, the
    suffix's length), or None where there are none."""
    if not ends.size:
        return None
    length = 1
    while length < len(tail):
        starts = ends - length
        keep = starts >= 0
        keep[keep] = tokens[starts[keep]] == tail[-1 - length]
        if not keep.any():
            break
        ends = ends[keep]
        length += 1
    return int(ends[-1]) + 1, length


def _earlier_occurrence(seq: np.ndarray, longest: int) -> tuple[int, int] | None:
    """Where the longest suffix (of at most ``longest`` tokens) of ``seq`` occurred earlier
    in it, never the tail itself: (the position after the latest such occurrence, the
    suffix's length); None where its last token never occurred before."""
    n = len(seq)
    if n < 2:
        return None
    return _latest_longest(seq, _tail(seq, longest), np.flatnonzero(seq[: n - 1] == seq[n - 1]))


def _tail(seq: np.ndarray, longest: int) -> np.ndarray:
    """The last ``longest`` tokens of ``seq``, at most all but its first (what can have
    occurred before)."""
    return seq[len(seq) - min(longest, len(seq) - 1) :]


def _tail_held_before(seq: np.ndarray, length: int) -> bool:
    """Whether the last ``length`` tokens of ``seq`` occurred earlier in it."""
    if len(seq) < length + 1:
        return False
    found = _earlier_occurrence(seq, length)
    return found is not None and found[1] >= length


def _until_boundary(tokens: np.ndarray) -> list[int]:
    """The tokens up to the end of their answer (``BOUNDARY``), as ints."""
    stops = np.flatnonzero(tokens == BOUNDARY)
    return [int(t) for t in (tokens[: stops[0]] if stops.size else tokens)]


class AnswerMemory:
    """An engine's recent answers, each after the last ``memory_lead`` tokens of its prompt,
    newest last, at most ``memory_tokens`` tokens in all (the oldest go first; an answer
    given again moves to the end instead of being kept twice). Generations add to it from
    the model's worker threads; ``tokens()`` is what a new ``ContextDrafter`` reads (an
    array that later answers do not change)."""

    def __init__(self, settings: DraftSettings):
        self._budget = settings.memory_tokens
        self._lead = settings.memory_lead
        self._answers: OrderedDict[tuple[int, ...], None] = OrderedDict()
        self._size = 0  # tokens in ``tokens()``: every answer and one boundary after each
        self._flat: np.ndarray | None = np.zeros(0, dtype=np.int64)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._answers)

    def remember(self, prompt: Sequence[int], answer: Sequence[int]) -> None:
        if not answer or self._budget <= 0:
            return
        entry = (*prompt[len(prompt) - min(self._lead, len(prompt)) :], *answer)
        if len(entry) + 1 > self._budget:  # it would push out every other answer
            return
        with self._lock:
            if entry in self._answers:
                self._answers.move_to_end(entry)
            else:
                self._answers[entry] = None
                self._size += len(entry) + 1
                while self._size > self._budget:
                    oldest, _ = self._answers.popitem(last=False)
                    self._size -= len(oldest) + 1
            self._flat = None

    def tokens(self) -> np.ndarray:
        """Every kept answer with its lead, oldest first, ``BOUNDARY`` after each."""
        with self._lock:
            if self._flat is None:
                flat = np.full(self._size, BOUNDARY, dtype=np.int64)
                at = 0
                for entry in self._answers:
                    flat[at : at + len(entry)] = entry
                    at += len(entry) + 1
                self._flat = flat
            return self._flat

    def clear(self) -> None:
        with self._lock:
            self._answers.clear()
            self._size = 0
            self._flat = None

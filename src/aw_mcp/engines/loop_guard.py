"""A guard against degenerate loops in greedy decoding, for both local engines.

A small world model decoding greedily can fall into a loop: the same line or the same few
characters again and again (``README.md`` forty times for a ``find``, ``1234567890...`` for a
``git log``) until ``max_tokens``, so the answer never reaches its end (the exit-code line of a
terminal answer) and costs its whole token budget. Real observations almost never repeat like
that: over the 29,736 real observations in ``data/`` (every domain) the longest text
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

``unique_names`` is a rule of another kind: a regular expression whose first group names
something one answer never names twice (a page snapshot's element refs). A model that loops
on a block of a page starts counting its refs again (``[ref=f1e8]`` a second time), which no
real snapshot does; the token that would complete a second match of a name is banned like a
loop's, so the model must write another name (``f1e80``) or leave the block.

``max_phrase_copies`` catches loops that are not exact: a model that writes one sentence
again and again with a word changed each time (``... but it can also be used to reclaim
space from the database, but it is also used to reclaim space ...``), or a block longer than
any period the exact rule looks for (a whole search result, a whole page section). No stretch
of ``phrase_chars`` characters (whitespace left out) may be written more than
``max_phrase_copies`` times in one answer: the token that would write one more copy is
banned. The real fetch server's pages (``data/mcp/fetch``) never hold a stretch of 80
such characters three times.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

_DIGIT = re.compile(r"[0-9]")
_WHITESPACE = re.compile(r"\s+")
# How far before the newest token a match of ``unique_names`` may start.
UNIQUE_NAME_WINDOW = 256


class LoopGuardSettings(BaseModel):
    """When the guard calls a tail a loop (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_span: int = Field(default=128, ge=8, le=8192, description="characters a loop spans")
    max_period: int = Field(default=64, ge=1, le=4096, description="longest repeated block")
    min_copies: int = Field(default=3, ge=2, description="least copies of the block")
    mask_digits: bool = Field(default=False, description="read every digit as 0")
    unique_names: str | None = Field(
        default=None,
        description="a regular expression whose group 1 never names the same thing twice in "
        f"one answer (a match is at most {UNIQUE_NAME_WINDOW} characters long)",
    )

    phrase_chars: int = Field(
        default=80,
        ge=8,
        le=1024,
        description="characters of a phrase (max_phrase_copies), whitespace left out",
    )
    max_phrase_copies: int | None = Field(
        default=None,
        ge=1,
        description="most copies of any phrase_chars characters in one answer (none: no limit)",
    )

    @field_validator("unique_names")
    @classmethod
    def _one_group(cls, pattern: str | None) -> str | None:
        if pattern is not None:
            try:
                groups = re.compile(pattern).groups
            except re.error as error:
                raise ValueError(f"unique_names is not a regular expression: {error}") from None
            if groups < 1:
                raise ValueError("unique_names needs a group: the name that must not repeat")
        return pattern


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


class _Written(ABC):
    """What an answer has written so far that a rule forbids writing again, read as it grows.

    Like the stop strings (``local.StopStrings``), only the newest text is read: each new
    piece together with the last ``tail_chars`` characters before it, so a step costs the same
    early and late in a long answer."""

    def __init__(self, tail_chars: int):
        self._tail_chars = tail_chars
        self._tail = ""  # the last tail_chars characters read

    def _as_read(self, piece: str) -> str:
        """The text as the rule reads it."""
        return piece

    @abstractmethod
    def _completed(self, piece: str) -> list[str]:
        """What ``piece``, written after what was read, completes (a name, a phrase)."""

    @abstractmethod
    def _keep(self, completed: list[str]) -> None:
        """Remember what was written."""

    @abstractmethod
    def _forbids(self, completed: list[str]) -> bool:
        """Would writing ``completed`` break the rule?"""

    def read(self, piece: str) -> None:
        """Take in ``piece``, the answer's text written since the last read."""
        piece = self._as_read(piece)
        self._keep(self._completed(piece))
        self._tail = (self._tail + piece)[-self._tail_chars :]

    def repeated_by(self, piece: str) -> bool:
        """Would writing ``piece`` next write again what the rule forbids?"""
        return self._forbids(self._completed(self._as_read(piece)))


class _NamesWritten(_Written):
    """The names (``unique_names``' group 1) written so far: none may be written twice."""

    def __init__(self, pattern: str):
        super().__init__(UNIQUE_NAME_WINDOW)
        self._pattern = re.compile(pattern)
        self._names: set[str] = set()

    def _completed(self, piece: str) -> list[str]:
        text = self._tail + piece
        return [m.group(1) for m in self._pattern.finditer(text) if m.end() > len(self._tail)]

    def _keep(self, completed: list[str]) -> None:
        self._names.update(completed)

    def _forbids(self, completed: list[str]) -> bool:
        return any(name in self._names for name in completed)


class _PhrasesWritten(_Written):
    """Every stretch of ``length`` characters written so far, with its count: none may be
    written more than ``max_copies`` times. Whitespace is left out, so that a loop cannot go
    on by dropping a space (``reclaimspace from the database,but ...``)."""

    def __init__(self, length: int, max_copies: int):
        super().__init__(length - 1)  # the start of the next stretch
        self._length = length
        self._max_copies = max_copies
        self._counts: Counter[str] = Counter()

    def _as_read(self, piece: str) -> str:
        return _WHITESPACE.sub("", piece)

    def _completed(self, piece: str) -> list[str]:
        text = self._tail + piece
        first = max(len(self._tail) + 1, self._length)  # the end of the first new stretch
        return [text[end - self._length : end] for end in range(first, len(text) + 1)]

    def _keep(self, completed: list[str]) -> None:
        self._counts.update(completed)

    def _forbids(self, completed: list[str]) -> bool:
        return any(self._counts[s] + n > self._max_copies for s, n in Counter(completed).items())


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
        # What each rule forbids writing again, read as the answer grows.
        self._written: list[_Written] = [
            _NamesWritten(rule.unique_names) for rule in self.rules if rule.unique_names is not None
        ] + [
            _PhrasesWritten(rule.phrase_chars, rule.max_phrase_copies)
            for rule in self.rules
            if rule.max_phrase_copies is not None
        ]
        self._tokens_read = 0  # of the answer, by self._written

    def loops(self, text: str) -> bool:
        """Does ``text`` end in a loop by any of the rules?"""
        return any(loops_by(rule, text) for rule in self.rules)

    def choose(
        self, logits: np.ndarray, out: Sequence[int], sample: Callable[[np.ndarray], int]
    ) -> int:
        """``sample(logits)``, unless that token would continue a loop (or name a unique
        name again, or write a phrase once too often): then the likeliest token that does
        not (up to ``max_bans`` tries, after which the loop is let be)."""
        token = sample(logits)
        tail = list(out[-self.tail_tokens :])
        if self._written and len(out) > self._tokens_read:
            # Decoded in pieces as they come (one a step; the guard sees each): a character
            # split over two pieces may decode oddly, which names of printable ASCII (refs,
            # URLs) never are, and which miscounts a phrase at most once.
            piece = self._detokenize(out[self._tokens_read :])
            self._tokens_read = len(out)
            for written in self._written:
                written.read(piece)
        masked: np.ndarray | None = None
        for _ in range(self.max_bans):
            candidate = self._detokenize([token]) if self._written else ""
            repeats = any(written.repeated_by(candidate) for written in self._written)
            if not repeats and not self.loops(self._detokenize([*tail, token])):
                return token
            if masked is None:
                masked = np.array(logits, dtype=np.float32, copy=True)
            masked[token] = -np.inf
            self.bans += 1
            token = sample(masked)
        return token

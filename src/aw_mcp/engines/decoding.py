"""One generation, token by token: what the single-sequence loop and the batch loop share.

``Decoding`` holds a generation's sampler and seed, its stop strings (``StopStrings``), its
constraint (``constraints.py``), the loop guard (``loop_guard.py``) and its output. It needs
only a ``Vocabulary`` of its model (``LocalEngine`` is one) and the ``DecodingSettings``
(an engine's options hold them), so the loops that drive it know nothing of each other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from pydantic import BaseModel

from aw_mcp.engines.base import GenerationControl, GenerationRequest
from aw_mcp.engines.constraints import ConstrainedChooser, TokenConstraint
from aw_mcp.engines.counters import EngineCounters
from aw_mcp.engines.loop_guard import LoopGuard
from aw_mcp.engines.sampling import SamplingParams, TokenSampler
from aw_mcp.engines.sequences import first_stop

if TYPE_CHECKING:
    from aw_mcp.engines.drafting import ContextDrafter


class Vocabulary(Protocol):
    """What a generation needs of its model's tokens."""

    def detokenize(self, tokens: Sequence[int]) -> str:
        """Text of ``tokens`` (special tokens left out)."""
        ...

    def is_end(self, token: int) -> bool:
        """``token`` ends the generation (end-of-generation tokens)."""
        ...

    def end_tokens(self) -> list[int]:
        """Every end-of-generation token."""
        ...

    def closing_tokens(self, chars: str, ranked: bool) -> list[list[int]]:
        """Tokens made only of ``chars`` (what closes a document near ``max_tokens``)."""
        ...

    def stop_strings(self) -> list[str]:
        """Stop strings of the prompt format (the next transcript header, ...)."""
        ...


class DecodingSettings(BaseModel):
    """How every generation of an engine decodes (part of a local engine's options)."""

    seed: int = 0  # sampling seed when a request has none
    # Check the unconstrained token against the grammar before masking the whole vocabulary
    # (same output, about twice the decode speed; see constraints.py).
    grammar_first: bool = True
    # Ban a token that would extend a degenerate loop of unconstrained output to 128
    # characters (loop_guard.py: real observations never repeat like that).
    loop_guard: bool = True


# Tokens after a stop string's byte length that are decoded too when looking for it: a
# window start may cut a character in two.
STOP_SLACK_TOKENS = 8


class StopStrings:
    """The one stop-string detector: finds the earliest stop string in the output.

    Called after every token with the output's tokens; only the newest tokens can complete a
    stop string that was not there a token ago, so only a short tail is decoded each step and
    the whole output only once a stop string shows up (decoding everything every token is
    quadratic in the answer's length: thousands of tokens for reasoning models).
    """

    def __init__(self, stops: Sequence[str], detokenize: Callable[[Sequence[int]], str]):
        self.stops = [s for s in dict.fromkeys(stops) if s]
        self._detokenize = detokenize
        longest = max((len(s.encode()) for s in self.stops), default=0)
        self._window = longest + STOP_SLACK_TOKENS

    def cut(self, tokens: Sequence[int]) -> str | None:
        """The text before the earliest stop string, or None if there is none yet."""
        if not self.stops:
            return None
        tail = self._detokenize(tokens[-self._window :])
        if first_stop(tail, self.stops) is None:
            return None
        text = self._detokenize(tokens)
        at = first_stop(text, self.stops)
        return None if at is None else text[:at]


class Decoding:
    """One generation's token-by-token state: sampler, seed, stop strings, constraint and
    output. The single-sequence loop and the batch loop both drive one per generation."""

    def __init__(
        self,
        vocabulary: Vocabulary,
        options: DecodingSettings,
        request: GenerationRequest,
        control: GenerationControl,
        constraint: TokenConstraint | None,
        counters: EngineCounters,
    ):
        self.control = control
        self._vocabulary = vocabulary
        self._options = options
        self._counters = counters
        self._request = request
        self._constraint = constraint
        self.restart()

    def restart(self) -> None:
        """Forget the output so far (the generation starts again from its prompt)."""
        vocabulary, request, constraint = self._vocabulary, self._request, self._constraint
        options = self._options
        seed = options.seed if request.seed is None else request.seed
        self._sampler = TokenSampler(SamplingParams(temperature=request.temperature), seed)
        self.max_tokens = request.max_tokens
        self._stops = StopStrings(
            [*request.stop, *vocabulary.stop_strings()], vocabulary.detokenize
        )
        self._chooser = None
        self._loop_guard = (
            LoopGuard(vocabulary.detokenize, request.loop_guard) if options.loop_guard else None
        )
        if constraint is not None:
            # The grammar ends the document (no stop strings), and max_tokens never cuts it
            # below its shortest valid form.
            self.max_tokens = max(self.max_tokens, constraint.closing_reserve)
            self._stops = StopStrings([], vocabulary.detokenize)
            self._chooser = ConstrainedChooser(
                constraint,
                closing_tokens=vocabulary.closing_tokens(
                    constraint.closing_chars, constraint.closing_ranked
                ),
                end_tokens=vocabulary.end_tokens(),
                max_tokens=self.max_tokens,
                check_first=options.grammar_first,
            )
        self.out: list[int] = []
        self.finish: Any = "length"
        self._text: str | None = None

    def should_stop(self, n_live: int, context_window: int) -> bool:
        """Before sampling: cancelled, enough tokens, or the context is full."""
        if self.control.cancelled.is_set():
            self.finish = "cancelled"
            return True
        return len(self.out) >= self.max_tokens or n_live >= context_window

    @property
    def greedy(self) -> bool:
        """Every token is the likeliest allowed one (temperature 0): what drafts need to be
        checked against (with sampling, a drafted token is not what a draw would give)."""
        return self._request.temperature <= 0

    def draft_room(self, n_live: int, context_window: int) -> int:
        """How many drafted tokens could still be used after the newest chosen one (which
        is evaluated at position ``n_live``): the rest of ``max_tokens`` and the context."""
        return max(0, min(self.max_tokens - len(self.out), context_window - n_live - 1))

    def usable_draft(self, draft: Sequence[int]) -> list[int]:
        """The part of ``draft`` worth checking after the newest chosen token: up to an
        end-of-generation token (it would end the output: nothing after it is needed), and
        only what the constraint accepts from its state now (a rejected token ends the
        draft; the constraint does not advance)."""
        usable = list(draft)
        for i, token in enumerate(usable):
            if self._vocabulary.is_end(token):
                del usable[i:]
                break
        if usable and self._constraint is not None:
            del usable[self._constraint.valid_prefix(usable) :]
        return usable

    def choose(self, logits: np.ndarray) -> int | None:
        """The next token, or None if the model ended the generation."""
        chooser = self._chooser
        sample: Callable[[np.ndarray], int]
        if chooser is None:
            sample = self._sampler.sample
        else:
            # Under a grammar too: a grammar keeps the form, not the model out of a loop.
            def sample(banned: np.ndarray) -> int:
                return chooser.choose(banned, self._sampler, unbanned=logits)

        if self._loop_guard is not None:
            token = self._loop_guard.choose(logits, self.out, sample)
        else:
            token = sample(logits)
        if self._vocabulary.is_end(token):
            self.finish = "stop"
            return None
        self.out.append(token)
        if self._chooser is not None:
            self._chooser.accept(token)
        return token

    def take_checked(
        self,
        rows: np.ndarray,
        draft: Sequence[int],
        n_live: int,
        context_window: int,
        drafter: ContextDrafter | None,
    ) -> tuple[int, int | None]:
        """Choose tokens from the logits of a step that evaluated a chosen token and then
        ``draft`` (one row each; just the token's row when nothing was drafted), as one
        token a step would: each from the row of the position before it, stops and limits
        checked before each. While the chosen tokens are the drafted ones their positions
        are already evaluated. Returns how many drafted tokens were chosen, and the token to
        evaluate next (None: the generation ended). ``n_live``: positions evaluated up to
        the step's chosen token; ``drafter`` (if any) sees every chosen token."""
        accepted = 0
        for row in rows:
            if self.should_stop(n_live + accepted, context_window):
                return accepted, None
            token = self.choose(row)
            if token is None:
                return accepted, None
            if drafter is not None:
                drafter.append(token)
            taken = accepted < len(draft) and draft[accepted] == token
            accepted += taken
            if self.after_token():
                return accepted, None
            if not taken:
                return accepted, token
        raise AssertionError("the last row always ends the check")  # it is never drafted

    def after_token(self) -> bool:
        """After a token was chosen: True if a stop string or the grammar ended the output."""
        if self.control.on_token is not None:
            self.control.on_token(len(self.out))
        if (text := self._stops.cut(self.out)) is not None:
            self._text, self.finish = text, "stop"
            return True
        if self._constraint is not None and self._constraint.is_terminated():
            self.finish = "stop"
            return True
        return False

    def result(self) -> tuple[str, Any, int]:
        if self._chooser is not None:
            self._count_grammar(self._chooser)
            self._chooser = None
        text = self._vocabulary.detokenize(self.out) if self._text is None else self._text
        return text, self.finish, len(self.out)

    def close(self) -> None:
        if self._constraint is not None:
            self._constraint.close()
            self._constraint = None

    def _count_grammar(self, chooser: ConstrainedChooser) -> None:
        self._counters.add_extra(
            grammar_steps=chooser.steps,
            grammar_rejections=chooser.rejections,
            grammar_closing_steps=chooser.closing_steps,
        )

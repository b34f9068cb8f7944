"""Constrained decoding behind one narrow interface, used by both local engines.

Shaped like vLLM's structured-output backends: a ``TokenConstraint`` answers whether one
token is allowed now (``is_allowed``, without advancing), fills a mask of every allowed token
(``allowed_mask``), advances on the chosen token (``accept_token``) and says when the
document is complete (``is_terminated``). The implementation is
llguidance's Earley parser (``LlguidanceConstraint`` over a schema, ``LlguidanceTextConstraint``
over a text answer's grammar), with its own bridges to llama.cpp vocabularies and Hugging Face
fast tokenizers, so the same code constrains both engines. (A second one, llama.cpp's GBNF
sampler, was removed: llguidance is a core dependency, so nothing could reach it.)

It constrains a *bounded view* of the schema (``json_grammar.grammar_view``): every string,
array and number is bounded, so a looping model is cut off by the grammar instead of running
into ``max_tokens`` with half a JSON document.

``ConstrainedChooser`` is the sampling trick of llama.cpp's ``common_sampler``, for any
constraint: the unconstrained choice is checked alone (cheap), and only when it is rejected
is the whole vocabulary masked. llguidance's mask allows only the canonical tokens of text
the grammar forces, while the check accepts the model's own choice of tokens for it, so
forced text may be tokenized differently (both valid). Near
``max_tokens`` it closes the document (a token made only of ``"``, ``]``, ``}`` whenever
one is allowed) so the answer is complete JSON when the budget runs out.

Measured in benchmarks/structured_output.py (numbers in its docstring): valid output for
every captured schema, decoded at the speed of unconstrained decoding.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any, Literal, Protocol

import numpy as np

from aw_mcp.engines.json_grammar import (
    JSON_WHITESPACE_REGEX,
    GrammarError,
    bounded_view,
)
from aw_mcp.engines.sampling import TokenSampler
from aw_mcp.engines.text_grammars import TextGrammar, compile_lark

log = logging.getLogger(__name__)

ConstraintKind = Literal["llguidance", "off"]


class TokenConstraint(Protocol):
    closing_reserve: int  # tokens the shortest completion of the document may need
    closing_chars: str  # what tokens that bring the document nearer its end are made of
    closing_ranked: bool  # closing_chars in order of preference (else: the likeliest token)

    def is_allowed(self, token: int) -> bool:
        """Would ``token`` be accepted now? (Does not advance.)"""
        ...

    def allowed_mask(self, n_vocab: int) -> np.ndarray:
        """A boolean array over the vocabulary: True where a token is allowed now."""
        ...

    def valid_prefix(self, tokens: Sequence[int]) -> int:
        """How many of ``tokens``, one after another from now, would be accepted (does not
        advance): a drafted continuation is cut there."""
        ...

    def accept_token(self, token: int) -> None: ...

    def is_terminated(self) -> bool:
        """The document is complete and nothing but end-of-generation may follow."""
        ...

    def close(self) -> None: ...


# -- llguidance ------------------------------------------------------------------------------


class _LlguidanceMatcher:
    """llguidance's matcher over one compiled grammar."""

    def __init__(
        self,
        tokenizer: Any,
        grammar: str,
        closing_reserve: int,
        closing_chars: str,
        closing_ranked: bool,
    ):
        import llguidance

        self.closing_reserve = closing_reserve
        self.closing_chars = closing_chars
        self.closing_ranked = closing_ranked
        self._matcher = llguidance.LLMatcher(tokenizer, grammar, log_level=0)
        if self._matcher.is_error():
            raise GrammarError(f"llguidance refused the grammar: {self._matcher.get_error()}")
        self._bits = np.zeros((tokenizer.vocab_size + 31) // 32, dtype=np.int32)

    def is_allowed(self, token: int) -> bool:
        return self._matcher.validate_tokens([token]) == 1

    def valid_prefix(self, tokens: Sequence[int]) -> int:
        return int(self._matcher.validate_tokens(list(tokens)))

    def allowed_mask(self, n_vocab: int) -> np.ndarray:
        self._matcher.unsafe_compute_mask_ptr(self._bits.ctypes.data, self._bits.nbytes)
        bits = np.unpackbits(self._bits.view(np.uint8), bitorder="little").astype(bool)
        mask = np.zeros(n_vocab, dtype=bool)
        n = min(n_vocab, bits.size)
        mask[:n] = bits[:n]
        return mask

    def accept_token(self, token: int) -> None:
        if not self._matcher.consume_token(token):
            raise GrammarError(f"the grammar rejected token {token}: {self._matcher.get_error()}")

    def is_terminated(self) -> bool:
        return self._matcher.is_stopped()

    def close(self) -> None:
        return None


class LlguidanceConstraint(_LlguidanceMatcher):
    """llguidance's matcher over the bounded view of a JSON schema."""

    def __init__(self, tokenizer: Any, schema: dict[str, Any], max_tokens: int):
        import llguidance

        view, closing_reserve = bounded_view(schema, max_tokens)
        grammar = llguidance.LLMatcher.grammar_from_json_schema(
            json.dumps(view),
            overrides={"whitespace_pattern": JSON_WHITESPACE_REGEX},
        )
        super().__init__(tokenizer, grammar, closing_reserve, JSON_CLOSING_CHARS, False)


# Tokens near max_tokens for a text grammar: enough to end a long line, then the document.
TEXT_CLOSING_RESERVE = 160


class LlguidanceTextConstraint(_LlguidanceMatcher):
    """llguidance's matcher over a text answer's grammar (aw_mcp/engines/text_grammars.py)."""

    def __init__(self, tokenizer: Any, grammar: TextGrammar):
        try:
            compiled = compile_lark(grammar.lark)
        except ValueError as exc:
            raise GrammarError(str(exc)) from exc
        super().__init__(tokenizer, compiled, TEXT_CLOSING_RESERVE, grammar.closing_chars, True)


# -- choosing a token under a constraint -----------------------------------------------------


class ConstrainedChooser:
    """Grammar-first token choice under a ``TokenConstraint`` (see the module docstring).

    ``check_first=False`` masks the whole vocabulary every step (for benchmarks).
    """

    def __init__(
        self,
        constraint: TokenConstraint,
        *,
        closing_tokens: Sequence[Sequence[int]] = (),
        end_tokens: Sequence[int] = (),
        max_tokens: int | None = None,
        check_first: bool = True,
    ):
        self.constraint = constraint
        self._closers = [list(group) for group in closing_tokens]
        self._ranked = constraint.closing_ranked
        self._last_rank: int | None = None  # the group of the closer taken last step
        self._ends = list(end_tokens)
        self._closing_from = None if max_tokens is None else max_tokens - constraint.closing_reserve
        self.check_first = check_first
        # Tokens taken (``accept``), not calls of ``choose``: the loop guard may call it
        # several times for one token, and the budget counts tokens.
        self.steps = 0
        self.rejections = 0  # choices where the unconstrained token broke the grammar
        self.closing_steps = 0  # choices made to close the document near max_tokens

    def choose(
        self, logits: np.ndarray, sampler: TokenSampler, unbanned: np.ndarray | None = None
    ) -> int:
        """The next token. ``logits`` may have tokens banned (-inf, by the loop guard);
        where the grammar allows only banned ones, ``unbanned`` (the logits before the
        bans) chooses among them, as the guard lets a loop be that it cannot leave."""
        if self._closing_from is not None and self.steps >= self._closing_from:
            # A document that may end here ends (a text grammar's free-text tail would
            # otherwise take closers to the budget).
            ends = [t for t in self._ends if self.constraint.is_allowed(t)]
            if ends:
                self.closing_steps += 1
                return ends[0]
            for rank, group in enumerate(self._closers):  # most preferred, then likeliest
                if self._ranked and rank == self._last_rank:
                    # A text grammar's closer is not taken twice running: one that did not
                    # close its string (a backtick inside quotes) was only text.
                    continue
                allowed = [t for t in group if self.constraint.is_allowed(t)]
                if allowed:
                    self.closing_steps += 1
                    self._last_rank = rank
                    return max(allowed, key=lambda t: logits[t])
            self._last_rank = None
        if self.check_first:
            token = sampler.sample(logits)
            if self.constraint.is_allowed(token):
                return token
            self.rejections += 1
        mask = self.constraint.allowed_mask(logits.shape[-1])
        if not mask.any():
            raise GrammarError("the grammar allows no token here")
        masked = np.where(mask, logits, -np.inf).astype(np.float32)
        if unbanned is not None and not np.isfinite(masked).any():
            masked = np.where(mask, unbanned, -np.inf).astype(np.float32)
        return sampler.sample(masked)

    def accept(self, token: int) -> None:
        """``token`` was taken: the constraint advances, and one step of the budget is spent."""
        self.constraint.accept_token(token)
        self.steps += 1


JSON_CLOSING_CHARS = '"]}'
# How vocabularies write a newline (byte-level BPE: U+010A) and a space (U+0120; SentencePiece:
# U+2581), beside the characters themselves.
_VOCAB_SPELLINGS = {"\u010a": "\n", "\u0120": " ", "\u2581": " "}


def closing_tokens(
    token_texts: Sequence[str], chars: str = JSON_CLOSING_CHARS, ranked: bool = False
) -> list[list[int]]:
    """Tokens whose text is only ``chars`` (and, unless ``chars`` has a newline, spaces), in
    groups by preference: for JSON (not ``ranked``) one group, ``"``, ``"}``, ``]}``...; for
    a line grammar (``ranked``) one group per character of ``chars``, a token in the group of
    the first of them it has (a newline, or a newline and a fence, before a fence alone)."""
    allowed = set(chars)
    groups: list[list[int]] = [[] for _ in chars] if ranked else [[]]
    for token, text in enumerate(token_texts):
        text = "\n" if text == "<0x0A>" else text  # SentencePiece's byte token
        spelled = "".join(_VOCAB_SPELLINGS.get(c, c) for c in text)
        if "\n" not in allowed:
            spelled = spelled.replace(" ", "")
        if spelled and set(spelled) <= allowed:
            rank = min(chars.index(c) for c in spelled) if ranked else 0
            groups[rank].append(token)
    return groups

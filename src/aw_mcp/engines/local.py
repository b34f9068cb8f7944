"""The local-engine core: one algorithm for every model that runs in this process.

``LocalEngine`` is everything the llama.cpp and transformers engines have in common; a
backend implements only the model-specific primitives (the abstract methods at the bottom:
tokenize, evaluate, logits, save/restore KV state, detokenize).

What keeps a step cheap (measured facts in the module docstrings of the backends):
- The model keeps one *live* KV state. An episode's step n+1 starts with step n's prompt and
  answer, so only the longest common token prefix is kept and the rest evaluated.
- Switching from episode A to B saves A's state in a ``SnapshotStore`` (an LRU bounded by
  bytes) and restores B's, so neither history is evaluated again. A new episode starts from
  the live state (or a copy of a similar one): the shared instructions, tools and
  demonstrations of its domain are reused by the prefix match.
- A model is not thread-safe: all model work runs in worker threads, one generation at a
  time; waiting requests take turns round-robin across episodes (``FairScheduler``). Prompt
  rendering, tokenization and grammar building also run in worker threads, never on the event
  loop (a 3 MB argument once stalled the whole server for 40 s).

One decode loop: sampling (``sampling.py``: temperature, top-k, top-p, min-p, seed), one
stop-string detector (``StopStrings``), constrained decoding through ``TokenConstraint``
(``constraints.py``), cancellation at every token. ``GenerationStats`` and
``EngineCounters`` mean the same whatever the backend:
- ``reused_prompt_tokens``: prompt tokens whose KV state was already live (or restored);
- ``evaluated_prompt_tokens``: prompt tokens run through the model;
- ``restored_snapshot``: this episode's state came back from the snapshot store;
- ``snapshot_saves/restores/evictions``: states put into / taken out of / pushed out of it.
"""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import numpy as np

from aw_mcp.engines.base import ChatMessage, GenerationControl, GenerationRequest, GenerationResult
from aw_mcp.engines.batching import NO_KEY, BatchBackend, BatchLoop, Job, run_job
from aw_mcp.engines.constraints import (
    ConstraintKind,
    GrammarError,
    LlguidanceConstraint,
    LlguidanceTextConstraint,
    TokenConstraint,
)
from aw_mcp.engines.constraints import closing_tokens as tokens_made_of
from aw_mcp.engines.counters import EngineCounters, GenerationStats
from aw_mcp.engines.decoding import Decoding, DecodingSettings
from aw_mcp.engines.drafting import AnswerMemory, ContextDrafter, DraftSettings
from aw_mcp.engines.loading import BackgroundLoad
from aw_mcp.engines.scheduler import FairScheduler, run_in_turn
from aw_mcp.engines.sequences import PromptTokenCache, common_prefix
from aw_mcp.engines.settings import LocalSettings
from aw_mcp.engines.snapshots import Snapshot, SnapshotStore
from aw_mcp.errors import EngineError

log = logging.getLogger(__name__)

# A new episode may start from a copy of one of the most recently kept states that shares
# the beginning of its prompt (instructions, tools, world facts, demonstrations), when that
# saves at least MIN_FORK_TOKENS of evaluation (a copy takes milliseconds, evaluating
# thousands of tokens seconds on a CPU).
FORK_CANDIDATES = 8
MIN_FORK_TOKENS = 16


class LocalEngineOptions(LocalSettings, DecodingSettings):
    """A local engine's options: its settings (threads, KV snapshot memory, batch slots), how
    it decodes, and the rest, which no flag sets."""

    # How GenerationRequest.json_schema and .grammar constrain decoding: llguidance, or off
    # (the simulator only validates and retries).
    constraint: ConstraintKind = "llguidance"
    # Prompt tokens evaluated per batched step while other episodes decode (bounds how long
    # a new prompt stalls them).
    prefill_chunk: int = 64
    # A returning episode whose tokens beyond what a resident sequence shares are fewer than
    # this is re-evaluated on a copied prefix instead of restored from its snapshot (a
    # restored state takes KV cells for its whole length; see batching.py).
    reevaluate_below: int = 256
    # How drafts for speculative decoding are found and sized (drafting.py).
    drafting: DraftSettings = DraftSettings()


class LocalEngine(ABC):
    """The shared skeleton of an in-process engine (see the module docstring)."""

    name: str

    def __init__(self, options: LocalEngineOptions):
        self.options = options
        self.counters = EngineCounters()
        self.scheduler = FairScheduler(self.name)
        self.snapshots = SnapshotStore(options.kv_snapshot_mb << 20, self.counters)
        self._loader = BackgroundLoad(self._load)
        # The scheduler hands out turns; the lock guards the model while a cancelled
        # request's worker thread winds down (it stops at its next token).
        self._model_lock = threading.Lock()
        self._state_lock = threading.Lock()  # _live_key: forget() vs the worker
        self._live_key: str | None = None  # whose tokens the live KV state holds
        self._drop_live = False  # forget() asks the worker to clear the live state
        self._prompt_tokens = PromptTokenCache()
        # Closing tokens by closing characters (and whether they are ranked).
        self._closers: dict[tuple[str, bool], list[list[int]]] = {}
        self._ends: list[int] | None = None  # end-of-generation tokens
        self._texts: list[str] | None = None  # the vocabulary's raw texts (_vocabulary)
        self._loaded = False
        self._batch: BatchLoop | None = None  # batched decoding, once the model is loaded
        # Recent answers to every episode, drafted from beside each one's own context.
        self.answers = AnswerMemory(options.drafting)

    # -- the Engine protocol ---------------------------------------------------------------

    @property
    def load(self) -> int:
        return self.scheduler.load + (self._batch.load if self._batch is not None else 0)

    @property
    def batch(self) -> BatchLoop | None:
        """The batch loop when this engine decodes several episodes per step, else None."""
        return self._batch

    @property
    def snapshot_bytes(self) -> int:
        return self.snapshots.nbytes

    async def start(self) -> None:
        await self._loader.start()

    def load_now(self) -> None:
        """Load synchronously (benchmarks and fixtures that run outside an event loop)."""
        self._loader.load_now()

    async def count_tokens(self, messages: list[ChatMessage]) -> int:
        await self._loader.ready()
        tokens = await anyio.to_thread.run_sync(self._tokenize, messages)
        return len(tokens)

    async def generate(
        self, request: GenerationRequest, control: GenerationControl | None = None
    ) -> GenerationResult:
        await self._loader.ready()
        control = control or GenerationControl()
        tokens, constraint = await anyio.to_thread.run_sync(self._prepare, request)
        if len(tokens) + 1 > self.context_window:
            if constraint is not None:
                constraint.close()
            raise EngineError(
                f"the prompt has {len(tokens)} tokens; the context window is {self.context_window}"
            )
        batch = self._batch_loop()
        if batch is not None:
            return await run_job(
                batch,
                lambda on_done: self._batch_job(tokens, request, control, constraint, on_done),
            )
        return await run_in_turn(
            self.scheduler,
            request.cache_key,
            control,
            self._generate_blocking,
            tokens,
            request,
            control,
            constraint,
            what=f"{self.name} generation",
        )

    def forget(self, cache_key: str) -> None:
        self.snapshots.drop(cache_key)
        if self._batch is not None:
            self._batch.forget(cache_key)
        with self._state_lock:
            if self._live_key == cache_key:
                # The worker may be using the live state right now: it is cleared at the
                # next turn instead of being saved for this key.
                self._live_key = None
                self._drop_live = True

    def forget_all(self) -> None:
        """Drop every episode's state: the next request of any episode starts cold."""
        self.snapshots.clear()
        if self._batch is not None:
            self._batch.forget(None)
        with self._state_lock:
            self._live_key = None
            self._drop_live = True

    async def aclose(self) -> None:
        await anyio.to_thread.run_sync(self.close)

    def close(self) -> None:
        """``aclose`` for a caller outside an event loop (it blocks while a generation
        holds the model: the tests' engine fixtures close here)."""
        if self._batch is not None:
            self._batch.close()  # ends its jobs as cancelled; takes the model lock
            self._batch = None
        with self._model_lock:
            self.snapshots.clear()
            self._live_key = None
            if self._loaded:
                self._close_model()
                self._loaded = False

    # -- batched decoding ------------------------------------------------------------------

    def _batch_loop(self) -> BatchLoop | None:
        """The batch loop (started at the first request after loading), if this engine
        batches: ``batch_slots`` > 1 and a backend that can."""
        if self._batch is None and self.options.batch_slots > 1 and self._loaded:
            backend = self._batch_backend()
            if backend is not None:
                self._batch = BatchLoop(
                    backend,
                    slots=self.options.batch_slots,
                    snapshots=self.snapshots,
                    counters=self.counters,
                    model_lock=self._model_lock,
                    prefill_chunk=self.options.prefill_chunk,
                    reevaluate_below=self.options.reevaluate_below,
                    max_tokens_per_step=self._batch_step_tokens(),
                    context_window=self.context_window,
                    name=self.name,
                    drafting=(self.options.drafting if self.options.speculative == "on" else None),
                    answers=self.answers,
                )
        return self._batch

    def _batch_job(
        self,
        tokens: list[int],
        request: GenerationRequest,
        control: GenerationControl,
        constraint: TokenConstraint | None,
        on_done: Callable[[], None],
    ) -> Job:
        return Job(
            key=request.cache_key or NO_KEY,
            tokens=tokens,
            decoding=self._decoding(request, control, constraint),
            stats=GenerationStats(prompt_tokens=len(tokens)),
            on_done=on_done,
        )

    def _batch_backend(self) -> BatchBackend | None:
        """The backend's batched-decoding primitives; None: it decodes one sequence."""
        return None

    def _batch_step_tokens(self) -> int:
        """How many tokens one batched model call may take."""
        return 512

    # -- preparing a request (worker thread, before the turn) ------------------------------

    def _tokenize(self, messages: list[ChatMessage]) -> list[int]:
        try:
            return self._prompt_tokens.get(messages, self._render_and_tokenize)
        except EngineError:
            raise
        except Exception as exc:  # a chat template's raise_exception, a tokenizer failure
            raise EngineError(f"could not render or tokenize the prompt: {exc}") from exc

    def _prepare(self, request: GenerationRequest) -> tuple[list[int], TokenConstraint | None]:
        tokens = self._tokenize(request.messages)
        constraint: TokenConstraint | None = None
        if self.options.constraint == "off":
            return tokens, None
        if request.json_schema:
            try:
                constraint = LlguidanceConstraint(
                    self._llguidance_tokenizer(), request.json_schema, request.max_tokens
                )
            except GrammarError as exc:
                log.warning("no grammar for this outputSchema (%s); output is validated", exc)
        elif request.grammar is not None:
            try:
                constraint = LlguidanceTextConstraint(self._llguidance_tokenizer(), request.grammar)
            except GrammarError as exc:
                log.warning("no constraint for this answer's grammar (%s)", exc)
        return tokens, constraint

    # -- generation (worker thread, in turn) -----------------------------------------------

    def _generate_blocking(
        self,
        tokens: list[int],
        request: GenerationRequest,
        control: GenerationControl,
        constraint: TokenConstraint | None,
    ) -> GenerationResult:
        with self._model_lock:
            try:
                if control.cancelled.is_set() or not self._loaded:
                    return GenerationResult(text="", finish_reason="cancelled")
                started = time.perf_counter()
                stats = GenerationStats(prompt_tokens=len(tokens))
                stats.restored_snapshot = self._switch_to(request.cache_key, tokens)
                prefix = common_prefix(self._live_tokens(), tokens)
                # At least one prompt token must be evaluated to have logits to sample from.
                prefix = self._truncate(min(prefix, len(tokens) - 1))
                self._evaluate(tokens[prefix:])
                stats.reused_prompt_tokens = prefix
                stats.evaluated_prompt_tokens = len(tokens) - prefix
                text, finish, n_out = self._decode(tokens, request, control, constraint)
                stats.completion_tokens = n_out
                stats.seconds = round(time.perf_counter() - started, 4)
                self.counters.add_generation(stats)
                return GenerationResult(text=text, finish_reason=finish, stats=stats)
            finally:
                if constraint is not None:
                    constraint.close()

    def _decode(
        self,
        tokens: list[int],
        request: GenerationRequest,
        control: GenerationControl,
        constraint: TokenConstraint | None,
    ) -> tuple[str, Any, int]:
        """Generate after the prompt ``tokens`` (evaluated: the live state ends with them)."""
        decoding = self._decoding(request, control, constraint)
        if self._drafts_for(decoding):
            return self._decode_speculative(tokens, decoding)
        n_live = len(tokens)
        while not decoding.should_stop(n_live, self.context_window):
            token = decoding.choose(self._logits())
            if token is None:
                break
            self._evaluate([token])
            n_live += 1
            if decoding.after_token():
                break
        return decoding.result()

    def _drafts_for(self, decoding: Decoding) -> bool:
        """Speculative decoding for this generation: on, greedy, and a backend that checks
        drafts."""
        return self.options.speculative == "on" and decoding.greedy and self._checks_drafts()

    def _decode_speculative(self, tokens: list[int], decoding: Decoding) -> tuple[str, Any, int]:
        """``_decode`` with drafts from the context (drafting.py), the same tokens.

        Every token is still chosen by ``decoding.choose`` from the logits of the position
        before it, as without drafts, so the sampler, the constraint (advanced only by
        chosen tokens), the loop guard, stop strings, ``max_tokens`` and cancellation see
        exactly what they see without drafts. What changes is when positions are evaluated:
        a chosen token is evaluated together with a draft of the tokens that may follow it,
        with logits for every position (``_evaluate_all``). While the chosen tokens equal
        the draft, their positions are already evaluated; at the first difference (or when
        generation ends) the rest of the draft leaves the live state and its KV cells
        (``_discard``), so the live state is always the prompt and the chosen tokens."""
        fewest, most = self._draft_span()
        drafter = ContextDrafter(
            tokens, self.options.drafting, self.answers.tokens(), own_tails=fewest > 1
        )
        n_live = len(tokens)  # positions in the live state that hold prompt or chosen tokens
        rows = self._logits()[np.newaxis]  # the prompt's last row: nothing drafted yet
        draft: list[int] = []  # evaluated after n_live, not yet chosen
        drafted = 0  # of them, drafts from the context (the rest are guesses)
        guesses = guesses_taken = 0  # tokens added to reach ``fewest`` positions a step
        try:
            while True:
                accepted, token = decoding.take_checked(
                    rows, draft, n_live, self.context_window, drafter
                )
                n_live += accepted
                if accepted < len(draft):  # the model chose otherwise: the draft's rest goes
                    self._discard(n_live)
                draft = []
                if drafted:
                    drafter.feedback(drafted, min(accepted, drafted))
                guesses_taken += max(0, accepted - drafted)
                if token is None:
                    break
                # The drafter's tail ends with ``token``. Only a span from 2 needs a guess,
                # and one only where the tail was seen before (``seen_before``).
                guess = drafter.guess() if fewest > 1 else None
                seen = fewest == 1 or guess is not None
                room = min(decoding.draft_room(n_live, self.context_window), most - 1)
                if not seen:  # a step of one (below): not even the memory's
                    room = 0
                draft = decoding.usable_draft(drafter.draft(room)) if room > 0 else []
                drafted = len(draft)
                # A backend that computes a step of one otherwise than a step of several
                # (``fewest`` 2) evaluates a token whose tail (``step_tail``) the episode
                # never held before alone, undrafted, and any other with at least one
                # more position where the context has room (the last chosen token's cell
                # is reused by the next call, so it counts too): a guess, what followed
                # the longest tail where it occurred before. Which steps are one position is
                # then the same with drafts and without (``ContextDrafter.seen_before``).
                short = min(fewest - 1 - drafted, self.context_window - n_live - 1 - drafted)
                if short > 0 and guess is not None:
                    draft += [guess] * short
                    guesses += short
                rows = self._evaluate_all([token, *draft])
                n_live += 1
            self.answers.remember(tokens, decoding.out)
        finally:
            if draft:  # an error between evaluating a draft and choosing through it
                self._discard(n_live)
            self.counters.add_extra(
                draft_rounds=drafter.drafts,
                draft_tokens=drafter.drafted,
                draft_accepted=drafter.accepted,
                draft_guesses=guesses,
                draft_guesses_taken=guesses_taken,
            )
        return decoding.result()

    def _decoding(
        self,
        request: GenerationRequest,
        control: GenerationControl,
        constraint: TokenConstraint | None,
    ) -> Decoding:
        return Decoding(self, self.options, request, control, constraint, self.counters)

    # -- the vocabulary, as a generation needs it (``decoding.Vocabulary``) -----------------

    def _vocabulary(self) -> list[str]:
        """Every token's raw text, read from the model once (closing and end tokens)."""
        if self._texts is None:
            self._texts = self._token_texts()
        return self._texts

    def end_tokens(self) -> list[int]:
        if self._ends is None:
            self._ends = [t for t in range(len(self._vocabulary())) if self.is_end(t)]
        return self._ends

    def closing_tokens(self, chars: str, ranked: bool) -> list[list[int]]:
        if (chars, ranked) not in self._closers:
            self._closers[chars, ranked] = tokens_made_of(self._vocabulary(), chars, ranked)
        return self._closers[chars, ranked]

    # -- live state and snapshots ----------------------------------------------------------

    def _switch_to(self, key: str | None, tokens: list[int]) -> bool:
        """Make ``key``'s KV state the live one. True if it was restored from a snapshot."""
        with self._state_lock:
            if key is not None and key == self._live_key:
                return False
            previous, self._live_key = self._live_key, key
            drop_live, self._drop_live = self._drop_live, False
        if drop_live:
            self._truncate(0)
        if previous is not None and len(self._live_tokens()) > 0:
            snapshot = self._save_state()
            if snapshot is not None:
                self.snapshots.put(previous, snapshot)
        snapshot = self.snapshots.take(key) if key is not None else None
        if snapshot is not None:
            if self._restore_state(snapshot):
                self.counters.snapshot_restores += 1
                return True
            log.warning("could not restore the KV state of %r; re-evaluating", key)
        self._begin_episode(tokens)
        return False

    # -- what a backend implements ---------------------------------------------------------

    @property
    @abstractmethod
    def context_window(self) -> int: ...

    @abstractmethod
    def _load(self) -> None:
        """Load the model (worker thread); raise EngineError with a clear message. Must set
        ``self._loaded = True`` when done."""

    @abstractmethod
    def _close_model(self) -> None:
        """Free the model (called under the model lock)."""

    @abstractmethod
    def _render_and_tokenize(self, messages: list[ChatMessage]) -> list[int]:
        """The prompt's tokens (chat template or transcript). May run in several threads."""

    @abstractmethod
    def _live_tokens(self) -> Sequence[int]:
        """The tokens whose keys/values the live state holds, in order."""

    @abstractmethod
    def _truncate(self, n: int) -> int:
        """Keep the first ``n`` live tokens; return how many were kept (0 if it had to reset)."""

    @abstractmethod
    def _evaluate(self, tokens: list[int]) -> None:
        """Run ``tokens`` after the live ones; the last one's logits become ``_logits()``."""

    @abstractmethod
    def _logits(self) -> np.ndarray:
        """The last evaluated position's logits: a float32 array the caller may modify."""

    def _checks_drafts(self) -> bool:
        """This backend implements ``_evaluate_all`` and ``_discard`` (speculative decoding)."""
        return False

    def _draft_span(self) -> tuple[int, int]:
        """How many positions (the chosen token and a draft after it) one check of a draft
        evaluates: at least, at most. A backend whose logits for a position depend on how
        many are evaluated with it narrows this to a span where they do not, and every
        step fills up to the least with guesses (``ContextDrafter.guess``), so that drafts
        change no answer. By default any number from one."""
        return 1, 1 + self.options.drafting.max_length

    def _evaluate_all(self, tokens: list[int]) -> np.ndarray:
        """Run ``tokens`` after the live ones in one model call; the logits after each of
        them, in order: row ``i`` follows ``tokens[i]`` (float32, the caller may modify)."""
        raise NotImplementedError

    def _discard(self, n: int) -> None:
        """Keep the first ``n`` live tokens and drop the rest with their KV cells (a
        draft's rejected tokens: never a reset, ``n`` is past the prompt)."""
        raise NotImplementedError

    @abstractmethod
    def _save_state(self) -> Snapshot | None:
        """The live state as a snapshot (it may move it out: ``_restore_state`` or
        ``_begin_episode`` always follows)."""

    @abstractmethod
    def _restore_state(self, snapshot: Snapshot) -> bool:
        """Make ``snapshot`` the live state; False if it could not."""

    def _begin_episode(self, tokens: list[int]) -> None:
        """A new episode's start state. Default: keep the live one; the prefix match reuses
        whatever it shares with the prompt."""
        return None

    def _kept_state_sharing(self, tokens: list[int], more_than: int) -> Snapshot | None:
        """Of the recently kept states, the one sharing the longest prefix with ``tokens``,
        if it shares more than ``more_than`` tokens (a new episode's candidate to copy)."""
        best, best_len = None, more_than
        for snapshot in self.snapshots.recent(FORK_CANDIDATES):
            n = common_prefix(snapshot.tokens, tokens)
            if n > best_len:
                best, best_len = snapshot, n
        return best

    @abstractmethod
    def detokenize(self, tokens: Sequence[int]) -> str:
        """Text of ``tokens`` (special tokens left out)."""

    @abstractmethod
    def is_end(self, token: int) -> bool:
        """``token`` ends the generation (end-of-generation tokens)."""

    @abstractmethod
    def stop_strings(self) -> list[str]:
        """Stop strings of the prompt format (the next transcript header, ...)."""

    @abstractmethod
    def _token_texts(self) -> list[str]:
        """Every vocabulary entry's raw text, by id (for the closing tokens)."""

    @abstractmethod
    def _llguidance_tokenizer(self) -> Any:
        """llguidance's view of the vocabulary (built once); GrammarError if it cannot be."""

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
from dataclasses import dataclass
from typing import Any

import anyio
import numpy as np

from aw_mcp.engines.base import (
    ChatMessage,
    EngineError,
    GenerationControl,
    GenerationRequest,
    GenerationResult,
    GenerationStats,
)
from aw_mcp.engines.batching import NO_KEY, BatchBackend, BatchLoop, Job, run_job
from aw_mcp.engines.constraints import (
    ConstrainedChooser,
    ConstraintKind,
    GrammarError,
    LlguidanceTextConstraint,
    TokenConstraint,
    closing_tokens,
)
from aw_mcp.engines.counters import EngineCounters
from aw_mcp.engines.loading import BackgroundLoad
from aw_mcp.engines.loop_guard import LoopGuard
from aw_mcp.engines.sampling import SamplingParams, TokenSampler
from aw_mcp.engines.scheduler import FairScheduler, run_in_turn
from aw_mcp.engines.sequences import PromptTokenCache, common_prefix, first_stop
from aw_mcp.engines.snapshots import Snapshot, SnapshotStore

log = logging.getLogger(__name__)

# Tokens after a stop string's byte length that are decoded too when looking for it: a
# window start may cut a character in two.
STOP_SLACK_TOKENS = 8


@dataclass
class LocalEngineOptions:
    """Settings every local engine has, with the same meaning and defaults."""

    n_threads: int | None = None  # None: default_inference_threads() (all cores but one)
    snapshot_budget_bytes: int = 1 << 30  # KV states of idle episodes, in total
    seed: int = 0  # sampling seed when a request has none
    # How GenerationRequest.json_schema constrains decoding: llguidance (default when
    # installed), gbnf (llama.cpp's grammar sampler; llama.cpp engine only) or off (the
    # simulator only validates and retries).
    constraint: ConstraintKind = "llguidance"
    # Check the unconstrained token against the grammar before masking the whole vocabulary
    # (same output, about twice the decode speed; see constraints.py).
    grammar_first: bool = True
    # Episodes decoded together in one model call (batching.py); 1: one generation at a
    # time through the fair scheduler. Used only by backends that can batch.
    batch_slots: int = 1
    # Prompt tokens evaluated per batched step while other episodes decode (bounds how long
    # a new prompt stalls them).
    prefill_chunk: int = 64
    # A returning episode whose tokens beyond what a resident sequence shares are fewer than
    # this is re-evaluated on a copied prefix instead of restored from its snapshot (a
    # restored state takes KV cells for its whole length; see batching.py).
    reevaluate_below: int = 256
    # Ban a token that would extend a degenerate loop of unconstrained output to 128
    # characters (loop_guard.py: real observations never repeat like that).
    loop_guard: bool = True


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
        engine: LocalEngine,
        request: GenerationRequest,
        control: GenerationControl,
        constraint: TokenConstraint | None,
    ):
        self.control = control
        self._engine = engine
        self._request = request
        self._constraint = constraint
        self.restart()

    def restart(self) -> None:
        """Forget the output so far (the generation starts again from its prompt)."""
        engine, request, constraint = self._engine, self._request, self._constraint
        seed = engine.options.seed if request.seed is None else request.seed
        self._sampler = TokenSampler(SamplingParams(temperature=request.temperature), seed)
        self.max_tokens = request.max_tokens
        self._stops = StopStrings([*request.stop, *engine._stop_strings()], engine._detokenize)
        self._chooser = None
        self._loop_guard = (
            LoopGuard(engine._detokenize, request.loop_guard) if engine.options.loop_guard else None
        )
        if constraint is not None:
            # The grammar ends the document (no stop strings), and max_tokens never cuts it
            # below its shortest valid form.
            self.max_tokens = max(self.max_tokens, constraint.closing_reserve)
            self._stops = StopStrings([], engine._detokenize)
            self._chooser = ConstrainedChooser(
                constraint,
                closing_tokens=engine._closing_tokens(
                    constraint.closing_chars, constraint.closing_ranked
                ),
                end_tokens=engine._end_tokens(),
                max_tokens=self.max_tokens,
                check_first=engine.options.grammar_first,
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
        if self._engine._is_end(token):
            self.finish = "stop"
            return None
        self.out.append(token)
        if self._chooser is not None:
            self._chooser.accept(token)
        return token

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
            self._engine._count_grammar(self._chooser)
            self._chooser = None
        text = self._engine._detokenize(self.out) if self._text is None else self._text
        return text, self.finish, len(self.out)

    def close(self) -> None:
        if self._constraint is not None:
            self._constraint.close()
            self._constraint = None


class LocalEngine(ABC):
    """The shared skeleton of an in-process engine (see the module docstring)."""

    name: str

    def __init__(self, options: LocalEngineOptions):
        self.options = options
        self.counters = EngineCounters()
        self.scheduler = FairScheduler(self.name)
        self.snapshots = SnapshotStore(options.snapshot_budget_bytes, self.counters)
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
        def close() -> None:
            if self._batch is not None:
                self._batch.close()  # ends its jobs as cancelled; takes the model lock
                self._batch = None
            with self._model_lock:
                self.snapshots.clear()
                self._live_key = None
                if self._loaded:
                    self._close_model()
                    self._loaded = False

        await anyio.to_thread.run_sync(close)

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
            decoding=Decoding(self, request, control, constraint),
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
                constraint = self._make_constraint(request.json_schema, request.max_tokens)
            except GrammarError as exc:
                log.warning("no grammar for this outputSchema (%s); output is validated", exc)
        elif request.grammar is not None:
            try:  # llguidance for either constraint kind: GBNF cannot take a Lark grammar
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
                text, finish, n_out = self._decode(len(tokens), request, control, constraint)
                stats.completion_tokens = n_out
                stats.seconds = round(time.perf_counter() - started, 4)
                self.counters.add_generation(stats)
                return GenerationResult(text=text, finish_reason=finish, stats=stats)
            finally:
                if constraint is not None:
                    constraint.close()

    def _decode(
        self,
        n_live: int,
        request: GenerationRequest,
        control: GenerationControl,
        constraint: TokenConstraint | None,
    ) -> tuple[str, Any, int]:
        decoding = Decoding(self, request, control, constraint)
        while not decoding.should_stop(n_live, self.context_window):
            token = decoding.choose(self._logits())
            if token is None:
                break
            self._evaluate([token])
            n_live += 1
            if decoding.after_token():
                break
        return decoding.result()

    def _count_grammar(self, chooser: ConstrainedChooser) -> None:
        extra = self.counters.extra
        for name, value in (
            ("grammar_steps", chooser.steps),
            ("grammar_rejections", chooser.rejections),
            ("grammar_closing_steps", chooser.closing_steps),
        ):
            extra[name] = extra.get(name, 0) + value

    def _vocabulary(self) -> list[str]:
        """Every token's raw text, read from the model once (closing and end tokens)."""
        if self._texts is None:
            self._texts = self._token_texts()
        return self._texts

    def _end_tokens(self) -> list[int]:
        if self._ends is None:
            self._ends = [t for t in range(len(self._vocabulary())) if self._is_end(t)]
        return self._ends

    def _closing_tokens(self, chars: str, ranked: bool) -> list[list[int]]:
        if (chars, ranked) not in self._closers:
            self._closers[chars, ranked] = closing_tokens(self._vocabulary(), chars, ranked)
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

    @abstractmethod
    def _detokenize(self, tokens: Sequence[int]) -> str:
        """Text of ``tokens`` (special tokens left out)."""

    @abstractmethod
    def _is_end(self, token: int) -> bool:
        """``token`` ends the generation (end-of-generation tokens)."""

    @abstractmethod
    def _stop_strings(self) -> list[str]:
        """Stop strings of the prompt format (the next transcript header, ...)."""

    @abstractmethod
    def _token_texts(self) -> list[str]:
        """Every vocabulary entry's raw text, by id (for the closing tokens)."""

    @abstractmethod
    def _llguidance_tokenizer(self) -> Any:
        """llguidance's view of the vocabulary (built once); GrammarError if it cannot be."""

    @abstractmethod
    def _make_constraint(self, schema: dict[str, Any], max_tokens: int) -> TokenConstraint:
        """A constraint for ``schema`` of ``self.options.constraint``'s kind; GrammarError
        if the schema cannot be expressed."""

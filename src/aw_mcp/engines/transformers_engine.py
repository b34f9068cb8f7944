"""The transformers engine: a Hugging Face model (id, local folder or GGUF file) on CUDA or CPU.

Install with ``pip install 'aw-mcp[transformers]'`` (torch, transformers, accelerate, gguf).

The transformers backend of ``LocalEngine`` (local.py holds the algorithm: turns, KV reuse,
snapshots, sampling, stop strings, constraints). What is specific here:
- The live KV state is a ``DynamicCache`` and the tokens it holds. Saving an episode's state
  hands the cache object itself to the snapshot store (no copy); a new episode starts from a
  copy of the most similar kept cache (same domain: same instructions, tools and
  demonstrations), cropped to the shared prefix.
- Snapshots are bounded by bytes like llama.cpp's (GPU memory on CUDA).
- Prefill keeps only the last position's logits (``logits_to_keep=1``): full-vocabulary logits
  for every prompt position would cost gigabytes.
- A fast (Rust) tokenizer used from two threads at once can fail with "Already borrowed":
  every tokenizer call holds ``_tokenizer_lock``.
- ``json_schema`` is constrained with llguidance over the fast tokenizer (a slow tokenizer
  gets no constraint: the simulator validates the output and retries).
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aw_mcp.engines.base import ChatMessage, default_inference_threads
from aw_mcp.engines.chat_format import TRANSCRIPT_ACTION, render_transcript
from aw_mcp.engines.constraints import GrammarError
from aw_mcp.engines.local import MIN_FORK_TOKENS, LocalEngine, LocalEngineOptions
from aw_mcp.engines.settings import TransformersSettings
from aw_mcp.engines.snapshots import Snapshot
from aw_mcp.engines.transformers_cache import cache_argument
from aw_mcp.errors import EngineError
from aw_mcp.models.catalogue import DEFAULT_MODEL, KNOWN_MODELS
from aw_mcp.models.fetch import resolve_model

log = logging.getLogger(__name__)


PREFILL_CHUNK = 512  # prompt tokens per forward pass (bounds activation memory)


class TransformersOptions(TransformersSettings, LocalEngineOptions):
    """The transformers engine's settings (``TransformersSettings``) and what no flag sets."""


@dataclass
class _LiveCache:
    tokens: list[int]  # the tokens whose keys/values the cache holds, in order
    cache: Any  # transformers Cache


def resolve_model_source(options: TransformersOptions) -> tuple[str, str | None]:
    """(what to pass to from_pretrained, gguf file name or None) for the configured model:
    ``hf_model``, else ``model``, else the catalogue's default model (its GGUF file)."""
    model = options.hf_model or options.model or DEFAULT_MODEL
    path = resolve_model(model) if model in KNOWN_MODELS else Path(model)
    if path.suffix == ".gguf":
        if not path.is_file():
            raise EngineError(f"model file not found: {path}")
        return str(path.parent), path.name
    if options.gguf_file is not None:
        return model, options.gguf_file
    looks_like_a_path = path.is_absolute() or model.startswith(".")
    if looks_like_a_path and not path.is_dir():
        raise EngineError(f"model folder not found: {path}")
    return model, None  # a local folder or a Hugging Face model id


class TransformersEngine(LocalEngine):
    name = "transformers"

    def __init__(self, options: TransformersOptions | None = None):
        self.options: TransformersOptions = options or TransformersOptions()
        super().__init__(self.options)
        self.device: str | None = None
        self._model: Any = None
        self._tokenizer: Any = None
        self._eos_ids: set[int] = set()
        self._stops: list[str] = []
        self._n_ctx = self.options.n_ctx or 0
        self._tokenizer_lock = threading.Lock()
        self._live: _LiveCache | None = None
        self._last_logits: Any = None
        self._llg_tokenizer: Any = None

    @property
    def context_window(self) -> int:
        return self._n_ctx or self.options.n_ctx or 8192

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
            torch.set_num_threads(self.options.threads or default_inference_threads())
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
            model = model.to(device)  # type: ignore[arg-type]  # transformers' stubs want a model
        model.eval()
        self.device = str(model.device)
        self._model, self._tokenizer = model, tokenizer
        self._loaded = True
        self._eos_ids = _eos_token_ids(model, tokenizer)
        has_template = bool(getattr(tokenizer, "chat_template", None))
        # Without a chat template the transcript format is used; its next action header is
        # where a base model's answer ends.
        self._stops = [] if has_template else [TRANSCRIPT_ACTION.strip()]
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

    def _close_model(self) -> None:
        self._live = None
        self._last_logits = None
        self._model = None

    # -- prompts and text ------------------------------------------------------------------

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

    def detokenize(self, tokens: Sequence[int]) -> str:
        with self._tokenizer_lock:
            return self._tokenizer.decode(list(tokens), skip_special_tokens=True)

    def is_end(self, token: int) -> bool:
        return token in self._eos_ids

    def stop_strings(self) -> list[str]:
        return self._stops

    def _token_texts(self) -> list[str]:
        with self._tokenizer_lock:
            texts = self._tokenizer.convert_ids_to_tokens(list(range(len(self._tokenizer))))
        return [t or "" for t in texts]

    # -- the model -------------------------------------------------------------------------

    def _live_cache(self) -> _LiveCache:
        if self._live is None:
            self._live = _LiveCache([], self._new_cache())
        return self._live

    def _live_tokens(self) -> Sequence[int]:
        return self._live_cache().tokens

    def _truncate(self, n: int) -> int:
        live = self._live_cache()
        extra = len(live.tokens) - n
        if extra <= 0:
            return n
        if n > 0 and _croppable(live.cache):
            live.cache.crop(-extra)
            del live.tokens[n:]
            return n
        self._live = _LiveCache([], self._new_cache())
        return 0

    def _evaluate(self, tokens: list[int]) -> None:
        import torch

        live = self._live_cache()
        with torch.inference_mode():
            for start in range(0, len(tokens), PREFILL_CHUNK):
                chunk = tokens[start : start + PREFILL_CHUNK]
                ids = torch.tensor([chunk], dtype=torch.long, device=self._model.device)
                out = self._model(
                    input_ids=ids, **cache_argument(live.cache), use_cache=True, logits_to_keep=1
                )
                live.tokens.extend(chunk)
                self._last_logits = out.logits[0, -1]

    def _logits(self) -> np.ndarray:
        return self._last_logits.float().cpu().numpy().copy()

    def _checks_drafts(self) -> bool:
        # a draft's rejected tokens are cropped off the cache: not where layers cannot be
        return _croppable(self._live_cache().cache)

    def _evaluate_all(self, tokens: list[int]) -> np.ndarray:
        """One forward pass of ``tokens`` after the live ones, with logits for each."""
        import torch

        live = self._live_cache()
        with torch.inference_mode():
            ids = torch.tensor([tokens], dtype=torch.long, device=self._model.device)
            out = self._model(input_ids=ids, **cache_argument(live.cache), use_cache=True)
        live.tokens.extend(tokens)
        self._last_logits = out.logits[0, -1]
        return out.logits[0].float().cpu().numpy().copy()

    def _discard(self, n: int) -> None:
        live = self._live_cache()
        extra = len(live.tokens) - n
        if extra > 0:
            live.cache.crop(-extra)
            del live.tokens[n:]

    def _save_state(self) -> Snapshot | None:
        live, self._live = self._live, None  # the cache object moves into the store
        if live is None:
            return None
        return Snapshot(live.tokens, live.cache, _cache_nbytes(live.cache))

    def _restore_state(self, snapshot: Snapshot) -> bool:
        self._live = _LiveCache(snapshot.tokens, snapshot.state)
        return True

    def _begin_episode(self, tokens: list[int]) -> None:
        """Keep a live cache if there is one; else copy the kept cache sharing most of the
        prompt (caches are mutated in place by every forward pass: copy before cropping)."""
        if self._live is not None and self._live.tokens:
            return
        best = self._kept_state_sharing(tokens, more_than=MIN_FORK_TOKENS - 1)
        if best is not None and _croppable(best.state):
            self._live = _LiveCache(list(best.tokens), copy.deepcopy(best.state))
            self.counters.add_extra(cache_forks=1)
        else:
            self._live = _LiveCache([], self._new_cache())

    def _new_cache(self) -> Any:
        from transformers import DynamicCache

        try:
            return DynamicCache(config=self._model.config)
        except TypeError:  # older transformers: no config argument
            return DynamicCache()

    # -- constraints -----------------------------------------------------------------------

    def _llguidance_tokenizer(self) -> Any:
        if self._llg_tokenizer is None:  # ~1 s once per model, in a worker thread
            try:
                import llguidance.hf
            except ImportError as exc:
                raise GrammarError("llguidance is not installed") from exc
            try:
                with self._tokenizer_lock:
                    self._llg_tokenizer = llguidance.hf.from_tokenizer(
                        self._tokenizer, eos_token=sorted(self._eos_ids) or None
                    )
            except ValueError as exc:  # a slow (Python) tokenizer
                raise GrammarError(str(exc)) from exc
        return self._llg_tokenizer


def _eos_token_ids(model: Any, tokenizer: Any) -> set[int]:
    ids: set[int] = set()
    for source in (getattr(model, "generation_config", None), model.config, tokenizer):
        value = getattr(source, "eos_token_id", None)
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, list | tuple):
            ids.update(v for v in value if isinstance(v, int))
    return ids


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

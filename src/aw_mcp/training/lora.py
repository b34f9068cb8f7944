"""The base model loaded for training, with LoRA on every attention and MLP projection.

The embedded GGUF is loaded by transformers (``gguf_file=``), dequantized: fp32 on CPU, bf16
on CUDA. Training its dequantized weights is training the weights llama.cpp serves, so the
adapter fits the quantized file it is later applied to. LoRA is peft's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aw_mcp.errors import UserInputError
from aw_mcp.training.gguf_adapter import LoraWeights

log = logging.getLogger(__name__)

LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@dataclass
class LoadedModel:
    model: Any  # peft model
    device: str
    n_layers: int
    n_head: int
    n_kv_head: int

    @property
    def body(self) -> Any:
        """The decoder stack (hidden states out), with LoRA layers injected."""
        return self.model.base_model.model.model

    @property
    def lm_head(self) -> Any:
        return self.model.base_model.model.lm_head


def pick_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def load_for_training(
    base: Path,
    rank: int,
    alpha: float,
    device: str = "auto",
    dtype: str = "auto",
    dropout: float = 0.0,
) -> LoadedModel:
    """The base model, frozen, with trainable LoRA weights (kept in fp32 by peft).

    ``dtype`` auto: bfloat16 on CUDA, float32 on CPU. bfloat16 on a CPU with AVX512-BF16 runs
    the base model's matmuls ~2.7x faster (measured on this project's 2-core EPYC)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    device = pick_device(device)
    if dtype == "auto":
        dtype = "bfloat16" if device.startswith("cuda") else "float32"
    dtype = getattr(torch, dtype)
    model = AutoModelForCausalLM.from_pretrained(str(base.parent), gguf_file=base.name, dtype=dtype)
    model.to(device)  # type: ignore[arg-type]  # transformers' stubs want a model here
    config = LoraConfig(
        r=rank,
        lora_alpha=alpha,  # type: ignore[arg-type]  # peft types it int; any scale works
        lora_dropout=dropout,
        target_modules=LORA_TARGETS,
        bias="none",
    )
    peft_model = get_peft_model(model, config)
    c = model.config
    return LoadedModel(
        peft_model, device, c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads
    )


def lora_state(loaded: LoadedModel) -> dict[str, Any]:
    """The trainable (LoRA) tensors, by parameter name: what a checkpoint keeps."""
    return {
        name: p.detach().cpu().clone()
        for name, p in loaded.model.named_parameters()
        if p.requires_grad
    }


def load_lora_state(loaded: LoadedModel, state: dict[str, Any]) -> None:
    params = dict(loaded.model.named_parameters())
    missing = set(state) ^ {n for n, p in params.items() if p.requires_grad}
    if missing:
        raise UserInputError(f"checkpoint does not match this LoRA setup: {sorted(missing)[:3]}")
    for name, tensor in state.items():
        params[name].data.copy_(tensor.to(params[name].device, params[name].dtype))


def _lora_pairs(loaded: LoadedModel) -> dict[str, tuple[Any, Any]]:
    """Every adapted projection's (A, B) parameters, keyed by the base model's module name
    (peft's ``base_model.model.<module>.lora_A.<adapter>.weight`` -> ``<module>``)."""
    params = {n: p for n, p in loaded.model.named_parameters() if p.requires_grad}
    return {
        name.split(".lora_A.")[0].removeprefix("base_model.model."): (
            a,
            params[name.replace(".lora_A.", ".lora_B.")],
        )
        for name, a in params.items()
        if ".lora_A." in name
    }


def lora_weights(loaded: LoadedModel) -> list[LoraWeights]:
    """(A, B) of every adapted projection, keyed by the base model's module name."""
    return [
        LoraWeights(module, a.detach().float().cpu().numpy(), b.detach().float().cpu().numpy())
        for module, (a, b) in _lora_pairs(loaded).items()
    ]


def lora_modules(loaded: LoadedModel) -> list[str]:
    """The base model's module names that carry LoRA weights (model.layers.0.self_attn.q_proj)."""
    return list(_lora_pairs(loaded))


def load_lora_weights(loaded: LoadedModel, weights: dict[str, LoraWeights]) -> None:
    """Set every adapted projection's (A, B) from ``weights`` (by module name, as
    ``lora_weights`` gives them); shapes must match this LoRA setup."""
    import torch

    for module, params in _lora_pairs(loaded).items():
        w = weights[module]
        for param, value, part in zip(params, (w.a, w.b), ("A", "B"), strict=True):
            if tuple(param.shape) != value.shape:
                raise UserInputError(
                    f"{module} LoRA {part} is {tuple(value.shape)} in the adapter, "
                    f"{tuple(param.shape)} in this LoRA setup (another --rank?)"
                )
            param.data.copy_(torch.from_numpy(value).to(param.device, param.dtype))

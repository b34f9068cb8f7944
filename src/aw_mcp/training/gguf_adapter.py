"""Write trained LoRA weights as a GGUF adapter that llama.cpp loads on the base GGUF, and
read such an adapter back (to continue training a shipped adapter).

Layout (what llama.cpp's ``llama_adapter_lora_init`` checks): for a base tensor ``W`` of
numpy shape (out, in) named ``blk.N.attn_q.weight``, two tensors ``...weight.lora_a`` of shape
(rank, in) and ``...weight.lora_b`` of shape (out, rank); the applied delta is
``B @ A * alpha / rank``. Names come from gguf's own HF -> GGUF tensor map.

The adapter takes the base model's architecture (``general.architecture``: llama.cpp refuses
an adapter of another one) and that architecture's tensor names. llama.cpp's Llama converter
permutes the rows of q and k projections (rotary layout) and transformers undoes it when it
loads such a GGUF, so for those architectures LoRA weights trained in transformers' layout get
the same row permutation on B before they are written. Others (qwen2: its converter keeps
the Hugging Face layout) are written as trained.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aw_mcp.errors import UserInputError
from aw_mcp.models.adapters import (
    BASE_MODEL_KEY,
    DOMAINS_KEY,
    PROFILE_KEY,
    AdapterInfo,
    read_adapter_info,
)


@dataclass
class LoraWeights:
    """One adapted projection: ``name`` is the HF module name (model.layers.0.self_attn.q_proj)."""

    name: str
    a: np.ndarray  # (rank, in)
    b: np.ndarray  # (out, rank)


@dataclass
class AdapterMetadata:
    alpha: float
    profile: str
    base_model: str  # the base GGUF's file name
    domains: list[str]
    n_layers: int
    n_head: int
    n_kv_head: int
    architecture: str = "llama"  # the base GGUF's general.architecture (base_architecture)


# Architectures whose llama.cpp converter permutes q/k rows (``LlamaModel.permute``), which
# transformers' GGUF loader reverse-permutes: the adapter's B must be permuted back.
ROTARY_PERMUTED = frozenset({"llama"})


def base_architecture(base: Path) -> str:
    """``general.architecture`` of a GGUF model file (read from its header)."""
    from gguf import GGUFReader

    found = GGUFReader(base).fields.get("general.architecture")
    if found is None:
        raise UserInputError(f"{base} has no general.architecture key: not a GGUF model file")
    return str(found.contents())


def rotary_permute(rows: np.ndarray, n_head: int) -> np.ndarray:
    """The row order llama.cpp's converter gives q/k projections (``LlamaModel.permute``)."""
    out = rows.shape[0]
    return (
        rows.reshape(n_head, 2, out // n_head // 2, *rows.shape[1:])
        .swapaxes(1, 2)
        .reshape(rows.shape)
    )


def rotary_unpermute(rows: np.ndarray, n_head: int) -> np.ndarray:
    """The inverse of ``rotary_permute``: llama.cpp's row order back to transformers'."""
    out = rows.shape[0]
    return (
        rows.reshape(n_head, out // n_head // 2, 2, *rows.shape[1:])
        .swapaxes(1, 2)
        .reshape(rows.shape)
    )


def _tensor_names(architecture: str, n_layers: int):  # -> gguf.TensorNameMap
    import gguf

    arch = {name: arch for arch, name in gguf.MODEL_ARCH_NAMES.items()}.get(architecture)
    if arch is None:
        raise UserInputError(f"gguf does not know the model architecture {architecture!r}")
    return gguf.get_tensor_name_map(arch, n_layers)


@dataclass
class ReadAdapter:
    """A GGUF LoRA adapter read back: its metadata, architecture and weights by HF module."""

    info: AdapterInfo
    architecture: str
    weights: dict[str, LoraWeights]


def read_gguf_adapter(
    path: Path, modules: list[str], n_layers: int, n_head: int, n_kv_head: int
) -> ReadAdapter:
    """The (A, B) pairs of ``modules`` (HF module names) in the adapter at ``path``, in
    transformers' layout (the q/k permutation of ``write_gguf_adapter`` undone).

    Every module must be in the file and nothing else: an adapter of another LoRA setup
    (other target modules, another model) is refused, naming what differs."""
    from gguf import GGUFReader

    info = read_adapter_info(path)  # refuses a missing file or one that is no LoRA adapter
    architecture = base_architecture(path)
    names = _tensor_names(architecture, n_layers)
    tensors = {t.name: t for t in GGUFReader(path).tensors}
    permuted = architecture in ROTARY_PERMUTED
    weights: dict[str, LoraWeights] = {}
    for module in modules:
        base = names.get_name(module + ".weight", try_suffixes=(".weight",))
        a = tensors.pop(f"{base}.lora_a", None)
        b = tensors.pop(f"{base}.lora_b", None)
        if base is None or a is None or b is None:
            raise UserInputError(f"{path} has no LoRA weights for {module}")
        # GGUF stores shapes innermost-first; .data is already numpy's (rows, columns).
        rows_b = np.array(b.data, dtype=np.float32)
        if permuted and module.endswith("q_proj"):
            rows_b = rotary_unpermute(rows_b, n_head)
        elif permuted and module.endswith("k_proj"):
            rows_b = rotary_unpermute(rows_b, n_kv_head)
        weights[module] = LoraWeights(module, np.array(a.data, dtype=np.float32), rows_b)
    if tensors:
        raise UserInputError(
            f"{path} adapts tensors this LoRA setup does not: {sorted(tensors)[:3]}"
        )
    return ReadAdapter(info, architecture, weights)


def write_gguf_adapter(
    path: Path, weights: list[LoraWeights], meta: AdapterMetadata, dtype=np.float16
) -> Path:
    """The trained weights (transformers' layout) as a GGUF LoRA adapter llama.cpp loads."""
    names = _tensor_names(meta.architecture, meta.n_layers)
    permuted = meta.architecture in ROTARY_PERMUTED
    tensors: dict[str, np.ndarray] = {}
    for w in weights:
        base = names.get_name(w.name + ".weight", try_suffixes=(".weight",))
        if base is None:
            raise UserInputError(f"no GGUF tensor name for {w.name}")
        b = w.b
        if permuted and w.name.endswith("q_proj"):
            b = rotary_permute(b, meta.n_head)
        elif permuted and w.name.endswith("k_proj"):
            b = rotary_permute(b, meta.n_kv_head)
        tensors[f"{base}.lora_a"] = w.a
        tensors[f"{base}.lora_b"] = b
    header = {PROFILE_KEY: meta.profile, BASE_MODEL_KEY: meta.base_model}
    header[DOMAINS_KEY] = ",".join(meta.domains)
    return write_adapter_file(path, meta.architecture, meta.alpha, header, tensors, dtype)


def write_adapter_file(
    path: Path,
    architecture: str,
    alpha: float,
    header: dict[str, str],
    tensors: dict[str, np.ndarray],
    dtype=np.float16,
) -> Path:
    """A GGUF LoRA adapter file: its type and alpha, ``header``'s strings (aw-mcp's keys),
    and ``tensors`` by GGUF name (``blk.N.attn_q.weight.lora_a``, in GGUF's layout)."""
    import gguf

    writer = gguf.GGUFWriter(path, arch=architecture)
    writer.add_string("general.type", "adapter")
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(alpha))
    for key, value in header.items():
        writer.add_string(key, value)
    for name, tensor in tensors.items():
        writer.add_tensor(name, np.ascontiguousarray(tensor, dtype=dtype))
    path.parent.mkdir(parents=True, exist_ok=True)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path

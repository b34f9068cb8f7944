"""Weighted sums of LoRA adapters ("model soups" of fine-tunes of one base), as one adapter.

A LoRA adapter changes a weight by ``B @ A * alpha / rank``. The weighted sum of several
adapters' changes, ``sum(w_i * B_i @ A_i * alpha_i / rank_i)``, is itself a LoRA change of
rank ``sum(rank_i)``: A stacked ``[A_1; A_2; ...]``, B side by side ``[w_1 s_1 B_1, ...]``
(``s_i = alpha_i / rank_i``), and alpha equal to the new rank. So the sum is exact, one file,
and served like any adapter. Two runs that each traded one held-out skill for another (exact
answers for world faults) can be averaged instead of retrained; which weights serve best is
measured on held-out episodes, like any checkpoint.

The adapters must be for the same base model, profile and tensors; their domains are joined.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aw_mcp.errors import UserInputError
from aw_mcp.models.adapters import BASE_MODEL_KEY, DOMAINS_KEY, PROFILE_KEY, read_adapter_info
from aw_mcp.training.gguf_adapter import write_adapter_file

SOURCES_KEY = "aw_mcp.merged_from"  # provenance: "file.gguf*weight,..."


@dataclass(frozen=True)
class SoupPart:
    path: Path
    weight: float


def parse_part(text: str) -> SoupPart:
    """``PATH`` or ``PATH*WEIGHT`` (weight 1 when left out)."""
    path, sep, weight = text.rpartition("*")
    if not sep:
        return SoupPart(Path(text), 1.0)
    try:
        return SoupPart(Path(path), float(weight))
    except ValueError:
        raise UserInputError(f"not PATH*WEIGHT: {text!r} (the weight is a number)") from None


@dataclass(frozen=True)
class MergedAdapter:
    path: Path
    rank: int
    kept: float  # the least share of a tensor's change (squared Frobenius norm) kept; 1: exact


def merge_adapters(
    parts: list[SoupPart],
    out: Path,
    rank: int | None = None,
    domains: list[str] | None = None,
) -> MergedAdapter:
    """Write the adapter whose change is the weighted sum of the parts' changes to ``out``;
    with ``rank``, its best approximation of that rank (exact where the summed rank is not
    above it; see ``truncate``). It is served by default for ``domains`` (None: every
    part's domains). One part at weight 1 copies an adapter under new ``domains``, bit for
    bit where its alpha equals its rank. ValueError (naming the file) where the parts do
    not fit together."""
    from gguf import GGUFReader

    if not parts:
        raise UserInputError("a merge takes one adapter or more")
    infos = [read_adapter_info(p.path) for p in parts]  # refuses what is no LoRA adapter
    first = infos[0]
    for info in infos[1:]:
        if (info.base_model, info.profile) != (first.base_model, first.profile):
            raise UserInputError(
                f"{info.path} is for {info.base_model} with profile {info.profile}; "
                f"{first.path} is for {first.base_model} with profile {first.profile}"
            )
    readers = [GGUFReader(p.path) for p in parts]
    architecture = readers[0].fields["general.architecture"].contents()
    tensors = [{t.name: np.array(t.data, dtype=np.float32) for t in r.tensors} for r in readers]
    for part, found in zip(parts[1:], tensors[1:], strict=True):
        if set(found) != set(tensors[0]):
            raise UserInputError(f"{part.path} adapts other tensors than {parts[0].path}")
    merged: dict[str, np.ndarray] = {}
    written_rank, kept = 0, 1.0
    for name in sorted(n.removesuffix(".lora_a") for n in tensors[0] if n.endswith(".lora_a")):
        downs = [t[f"{name}.lora_a"] for t in tensors]  # (rank_i, in)
        ups = [t[f"{name}.lora_b"] for t in tensors]  # (out, rank_i)
        scaled = [
            part.weight * _scale(info.alpha, a.shape[0]) * b
            for part, info, a, b in zip(parts, infos, downs, ups, strict=True)
        ]
        down, up = np.concatenate(downs, 0), np.concatenate(scaled, 1)
        if rank is not None and down.shape[0] > rank:
            kept = min(kept, kept_energy(down, up, rank))
            down, up = truncate(down, up, rank)
        written_rank = down.shape[0]
        merged[f"{name}.lora_a"], merged[f"{name}.lora_b"] = down, up
    header = {PROFILE_KEY: first.profile or "", BASE_MODEL_KEY: first.base_model or ""}
    joined = dict.fromkeys(d for info in infos for d in info.domains)
    header[DOMAINS_KEY] = ",".join(domains if domains is not None else joined)
    header[SOURCES_KEY] = ",".join(f"{p.path.name}*{p.weight:g}" for p in parts)
    # alpha = rank: llama.cpp's scale alpha / rank is 1, the weights carry the scales.
    write_adapter_file(out, architecture, float(written_rank), header, merged)
    return MergedAdapter(out, written_rank, kept)


def _core_svd(down: np.ndarray, up: np.ndarray):
    """``up @ down`` as ``Qu (U S V.T) Qd.T``: the SVD of a small core from two QRs
    (``up = Qu Ru``, ``down.T = Qd Rd``, ``Ru @ Rd.T = U S V.T``)."""
    q_up, r_up = np.linalg.qr(up.astype(np.float64))
    q_down, r_down = np.linalg.qr(down.T.astype(np.float64))
    u, singular, vt = np.linalg.svd(r_up @ r_down.T)
    return q_up, u, singular, vt, q_down


def truncate(down: np.ndarray, up: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """The best rank-``rank`` factors (in Frobenius norm) of ``up @ down``."""
    if down.shape[0] <= rank:
        return down, up
    q_up, u, singular, vt, q_down = _core_svd(down, up)
    root = np.sqrt(singular[:rank])
    new_up = (q_up @ u[:, :rank]) * root
    new_down = (root[:, None] * vt[:rank]) @ q_down.T
    return new_down.astype(np.float32), new_up.astype(np.float32)


def kept_energy(down: np.ndarray, up: np.ndarray, rank: int) -> float:
    """The share of ``up @ down``'s squared Frobenius norm its best rank-``rank`` factors keep."""
    singular = _core_svd(down, up)[2]
    return float((singular[:rank] ** 2).sum() / (singular**2).sum())


def _scale(alpha: float, rank: int) -> float:
    """llama.cpp's LoRA scale: alpha / rank, or 1 for an adapter without alpha."""
    return alpha / rank if alpha else 1.0

"""Choosing the next token from logits: one sampler for every local engine.

Both local engines hand this module a float32 array of the last position's logits, so
temperature, top-k, top-p, min-p and the seed mean the same thing whichever engine runs.
The filters are llama.cpp's defaults, applied in its order (top-k, top-p, min-p on the
untempered distribution, then temperature). ``temperature == 0`` is greedy.

Reproducibility: a ``TokenSampler`` draws from its own ``numpy.random.Generator`` seeded with
the request's seed (or the engine's), so the same seed over the same logits gives the same
tokens. Different evaluation paths (cold vs. cached prefix) can shift logits in the last
bits, which may flip a near-tie (see the notes in llama_cpp.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TOP_K = 40
TOP_P = 0.95
MIN_P = 0.05


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.0
    top_k: int = TOP_K
    top_p: float = TOP_P
    min_p: float = MIN_P


class TokenSampler:
    """Samples token ids from logits with fixed parameters and a seeded random stream."""

    def __init__(self, params: SamplingParams, seed: int):
        self.params = params
        self._rng = np.random.default_rng(seed)

    def sample(self, logits: np.ndarray) -> int:
        p = self.params
        if p.temperature <= 0:
            return int(np.argmax(logits))
        k = max(1, min(p.top_k, logits.shape[-1]))
        top = np.argpartition(-logits, k - 1)[:k]
        top = top[np.argsort(-logits[top], kind="stable")]  # likeliest first
        scores = logits[top].astype(np.float64)
        probs = _softmax(scores)
        keep = np.cumsum(probs) - probs < p.top_p  # the smallest set reaching top_p
        keep &= probs >= p.min_p * probs[0]
        keep[0] = True
        tempered = _softmax(np.where(keep, scores / p.temperature, -np.inf))
        return int(top[self._rng.choice(k, p=tempered)])


def _softmax(scores: np.ndarray) -> np.ndarray:
    finite = np.isfinite(scores)
    if not finite.any():
        return np.full(scores.shape, 1.0 / scores.size)
    shifted = np.where(finite, scores - scores[finite].max(), -np.inf)
    weights = np.exp(shifted)
    return weights / weights.sum()

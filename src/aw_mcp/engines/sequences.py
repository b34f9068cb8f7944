"""Small helpers on token and text sequences shared by the local engines."""

from __future__ import annotations

from collections.abc import Sequence


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share (what a KV cache can reuse)."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def first_stop(text: str, stops: list[str]) -> int | None:
    """Where the earliest stop string starts in ``text``, or None."""
    positions = [i for s in stops if (i := text.find(s)) >= 0]
    return min(positions) if positions else None

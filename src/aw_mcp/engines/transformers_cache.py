"""The name of a transformers model's key-value cache, in its calls and in its outputs.

transformers renamed it: ``past_key_values`` up to 5.17 at least, ``cache`` by 5.25 (the old
keyword deprecated until 5.40; outputs carry only the new field). aw-mcp takes transformers
from 5.17 (pyproject.toml; its engine and training tests pass on 5.17 and 5.25), so the
engine and the trainer ask the installed version's name here instead of writing either.
Found on a GPU machine whose image had 5.17: training and the engine's prefill both failed
there (benchmarks/gpu_training.py, gpu_check.py).
"""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def cache_name() -> str:
    """``cache`` where the installed transformers has it, else ``past_key_values``."""
    from transformers.modeling_outputs import BaseModelOutputWithPast

    return "cache" if "cache" in BaseModelOutputWithPast.__dataclass_fields__ else "past_key_values"


def cache_argument(cache: Any) -> dict[str, Any]:
    """The keyword argument that hands ``cache`` to a model's forward pass."""
    return {cache_name(): cache}


def output_cache(output: Any) -> Any:
    """The cache a forward pass returned (None where it kept none)."""
    return getattr(output, cache_name(), None)

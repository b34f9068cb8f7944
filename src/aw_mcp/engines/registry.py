"""Engines by name: ``--engine NAME`` picks one here.

An engine is one module with its engine class and its options (its settings section plus what
no flag sets); adding one is that module and one entry below. Modules are imported only when
their engine is chosen, so serving on llama.cpp never imports torch or httpx.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from aw_mcp.engines.base import Engine
from aw_mcp.engines.settings import EngineName


@dataclass(frozen=True)
class EngineKind:
    module: str  # where the engine lives
    engine: str  # its class
    options: str  # its options class: a ``Section``, built from the settings by field name
    local: bool  # runs the model in this process: ``--instances`` copies it, prompts warm up


ENGINES: dict[EngineName, EngineKind] = {
    "llama-cpp": EngineKind("aw_mcp.engines.llama_cpp", "LlamaCppEngine", "LlamaCppOptions", True),
    "transformers": EngineKind(
        "aw_mcp.engines.transformers_engine", "TransformersEngine", "TransformersOptions", True
    ),
    "openai": EngineKind(
        "aw_mcp.engines.openai_compat", "OpenAICompatEngine", "OpenAICompatOptions", False
    ),
}


def make_engine(name: EngineName, settings: Any, **overrides: Any) -> Engine:
    """The engine ``name``, its options taken from ``settings`` by field name (the serve
    settings, or anything with those attributes), ``overrides`` on top."""
    kind = ENGINES[name]
    module = importlib.import_module(kind.module)
    options = getattr(module, kind.options).of(settings, **overrides)
    engine: Engine = getattr(module, kind.engine)(options)
    return engine

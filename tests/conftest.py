"""Shared fixtures. The real embedded model (SmolLM2-135M-Instruct GGUF, CPU) is loaded once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from aw_mcp.engines.llama_cpp import LlamaCppEngine, LlamaCppOptions

REPO_ROOT = Path(__file__).resolve().parents[1]

# Plumbing tests serve the fast SmolLM2 (with its own bundled adapter), not the default world
# model: this reaches every ServeSettings and every `aw-mcp serve` a test starts. Tests of the
# default itself (tests/test_default_world_model.py) take it out of their server's environment.
os.environ.setdefault("AW_MCP_MODEL", "smollm2-135m")
# Real tools/list captures of 14 popular MCP servers (see that folder's README).
TOOL_SURFACES = REPO_ROOT / "tests" / "data" / "tool-surfaces"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# Inference threads in tests. One, not both cores: llama.cpp's and torch's OpenMP threads
# spin-wait for each other, so when anything else takes a core (the event loop, an HTTP
# server, another process) two threads run several times slower than one
# (benchmarks/concurrency.py shows it).
TEST_THREADS = 1


def small_embedded_engine(**overrides) -> LlamaCppEngine:
    """The embedded model with settings sized for tests."""
    options = {"n_ctx": 4096, "n_threads": TEST_THREADS, **overrides}
    return LlamaCppEngine(LlamaCppOptions(**options))


@pytest.fixture
def embedded_engine() -> LlamaCppEngine:
    """A fresh engine on the real embedded GGUF (loading takes ~0.1 s: mmap)."""
    return small_embedded_engine()


@pytest.fixture(scope="module")
def module_engine() -> LlamaCppEngine:
    """One engine for a whole test module, so calls reuse the KV cache of shared prompts."""
    return small_embedded_engine()


@pytest.fixture(scope="session")
def transformers_engine():
    """The embedded GGUF through transformers, loaded once per test session (~15 s: the
    GGUF is dequantized to float32)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from aw_mcp.engines.transformers_engine import TransformersEngine, TransformersOptions

    engine = TransformersEngine(TransformersOptions(n_ctx=4096, n_threads=TEST_THREADS))
    engine.load_now()
    return engine

"""Shared fixtures. The small real model (SmolLM2-135M-Instruct GGUF, CPU) is loaded once."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from aw_mcp.engines.llama_cpp import LlamaCppEngine, LlamaCppOptions
from aw_mcp.testing import SMALL_MODEL

REPO_ROOT = Path(__file__).resolve().parents[1]

# Plumbing tests serve the fast SmolLM2 (with its own bundled adapter), not the default world
# model: this reaches every ServeSettings and every `aw-mcp serve` a test starts. Tests of the
# default itself (tests/test_default_world_model.py) take it out of their server's environment.
os.environ.setdefault("AW_MCP_MODEL", SMALL_MODEL)
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


def small_engine(**overrides) -> LlamaCppEngine:
    """The small model (SmolLM2) on llama.cpp, with settings sized for tests."""
    options = {"model": SMALL_MODEL, "n_ctx": 4096, "threads": TEST_THREADS, **overrides}
    return LlamaCppEngine(LlamaCppOptions(**options))


@pytest.fixture
def small_model_engine() -> Iterator[LlamaCppEngine]:
    """A fresh engine on the small real GGUF (loading takes ~0.1 s: mmap), closed after the
    test (an engine left open keeps its model, and its batch loop's thread, until the
    garbage collector frees them at some other test's moment)."""
    engine = small_engine()
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def module_engine() -> Iterator[LlamaCppEngine]:
    """One engine for a whole test module, so calls reuse the KV cache of shared prompts."""
    engine = small_engine()
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def transformers_engine():
    """The small model's GGUF through transformers, loaded once per test session (~15 s: the
    GGUF is dequantized to float32)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from aw_mcp.engines.transformers_engine import TransformersEngine, TransformersOptions

    engine = TransformersEngine(
        TransformersOptions(model=SMALL_MODEL, n_ctx=4096, threads=TEST_THREADS)
    )
    engine.load_now()
    return engine


# -- tiers ------------------------------------------------------------------------------------
#
# Every test is in one tier: the markers below (declared in pyproject.toml), else "unit". The
# fast loop leaves the slow tiers out (docs/testing.md); CI runs them all, and the summary at
# the end of every run says how many tests each tier ran and how long they took.
TIERS = ("quality", "external", "sandbox", "transformers", "data", "slow")


def tier_of(item: pytest.Item) -> str:
    """The test's tier: its first tier marker in ``TIERS`` order, else "unit"."""
    return next((t for t in TIERS if item.get_closest_marker(t)), "unit")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        # Whatever runs the transformers engine needs torch: by its fixture, or by the
        # engine a parametrized fixture picks.
        callspec = getattr(item, "callspec", None)
        picks = callspec.params.values() if callspec is not None else ()
        if "transformers_engine" in getattr(item, "fixturenames", ()) or "transformers" in picks:
            item.add_marker(pytest.mark.transformers)
    config.stash[_TIER_OF] = {item.nodeid: tier_of(item) for item in items}


_TIER_OF = pytest.StashKey[dict[str, str]]()


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    """How many tests each tier ran, and the time they took (setup and teardown included,
    as ``--durations`` counts them)."""
    tier_of_test = config.stash.get(_TIER_OF, {})
    tests: dict[str, int] = {}
    seconds: dict[str, float] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            if not isinstance(report, pytest.TestReport):
                continue
            tier = tier_of_test.get(report.nodeid, "unit")
            seconds[tier] = seconds.get(tier, 0.0) + report.duration
            tests[tier] = tests.get(tier, 0) + (report.when == "call")
    if not seconds:
        return
    terminalreporter.section("time per tier")
    for tier in ("unit", *TIERS):
        if tier in seconds:
            terminalreporter.write_line(f"{tier:13} {tests[tier]:4d} tests {seconds[tier]:8.1f} s")

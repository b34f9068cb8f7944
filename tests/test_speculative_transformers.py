"""Speculative decoding on the transformers engine (the same LocalEngine loop as llama.cpp's,
through its ``_evaluate_all`` and ``_discard``): the answers with drafts against the answers
without, on the real small model in float32, and the cache left holding exactly the prompt
and the chosen tokens."""

from __future__ import annotations

import pytest

from tests.conftest import SMALL_MODEL, TEST_THREADS
from tests.test_speculative import CASES

pytestmark = [pytest.mark.transformers, pytest.mark.anyio]


@pytest.fixture(scope="module")
def drafting_engine():
    pytest.importorskip("torch")
    from aw_mcp.engines.transformers_engine import TransformersEngine, TransformersOptions

    engine = TransformersEngine(
        TransformersOptions(model=SMALL_MODEL, n_ctx=4096, threads=TEST_THREADS, speculative="on")
    )
    engine.load_now()
    return engine


def _cached(engine) -> tuple[int, int]:
    live = engine._live_cache()
    return len(live.tokens), live.cache.get_seq_length()


@pytest.mark.parametrize("case", list(CASES))
async def test_answers_with_drafts_are_the_same_on_transformers(
    transformers_engine, drafting_engine, case
):
    request, copies = CASES[case]
    off = await transformers_engine.generate(request)
    before = drafting_engine.counters.extra.get("draft_accepted", 0)
    on = await drafting_engine.generate(request)
    assert on.text == off.text
    assert on.stats.completion_tokens == off.stats.completion_tokens
    tokens, cells = _cached(drafting_engine)
    assert tokens == cells  # no rejected draft left in the cache
    if copies:
        assert drafting_engine.counters.extra.get("draft_accepted", 0) > before

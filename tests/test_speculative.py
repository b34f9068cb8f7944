"""Speculative decoding with drafts from the context (engines/drafting.py, LocalEngine's
``_decode_speculative``): the same answers, byte for byte, whatever is drafted (drafts
from the context against none: only the guesses that fill each step to two positions
where llama.cpp's build needs that), on the real small model and on the default model with
its adapter, and ``--speculative off``'s answers where the build computes a step of one as
the others; every step within the span of positions that computes alike (``_draft_span``,
measured at load, and checked here on other text); drafts
taken where the answer copies its context, or another episode's answer to the same call;
the KV cache left as the reference leaves it."""

from __future__ import annotations

import threading

import llama_cpp
import numpy as np
import pytest

from aw_mcp.domain.loader import load_domain
from aw_mcp.engines.base import ChatMessage, GenerationControl, GenerationRequest
from aw_mcp.engines.drafting import DraftSettings
from aw_mcp.engines.llama_cpp import LlamaCppEngine, LlamaCppOptions
from aw_mcp.models.adapters import bundled_adapters
from aw_mcp.models.catalogue import DEFAULT_MODEL
from tests.conftest import REPO_ROOT, TEST_THREADS, small_engine

# the small model decodes some thousand tokens here, twice each
pytestmark = pytest.mark.slow

SYSTEM = "You are a Linux terminal. Answer each command with its exact output, nothing else."
FILE = "\n".join(
    f"{i:02d}  total_{i} = compute(alpha_{i}, beta_{i % 5}, gamma='{'xyz'[i % 3]}')"
    for i in range(40)
)
LISTING = "\n".join(
    f"-rw-r--r-- 1 user user {100 + 37 * i:5d} Nov 30 12:{i:02d} {name}"
    for i, name in enumerate(
        ["README.md", "app.py", "config.yaml", "main.go", "notes.txt", "setup.cfg", "test_app.py"]
    )
)
SNAPSHOT = """```yaml
- generic [ref=e1]:
  - banner [ref=e2]:
    - link "Home" [ref=e3]:
      - /url: /
    - link "Docs" [ref=e4]:
      - /url: /docs
  - main [ref=e5]:
    - heading "Welcome to the example shop" [level=1] [ref=e6]
    - paragraph [ref=e7]: Everything you need, shipped the next day.
    - button "Add to cart" [ref=e8]
```"""
WEB = load_domain(REPO_ROOT / "simulators" / "web.yaml")
SNAPSHOT_GRAMMAR = next(
    t.simulation.answer_grammar for t in WEB.tools if t.name == "browser_snapshot"
)
SCHEMA = {
    "type": "object",
    "properties": {
        "files": {"type": "array", "items": {"type": "string"}},
        "total_bytes": {"type": "integer"},
    },
    "required": ["files", "total_bytes"],
}


def _messages(*turns: str) -> list[ChatMessage]:
    roles = ["user", "assistant"]
    return [
        ChatMessage(role="system", content=SYSTEM),
        *(ChatMessage(role=roles[i % 2], content=t) for i, t in enumerate(turns)),
    ]


# name -> (request, whether the answer copies its context)
CASES: dict[str, tuple[GenerationRequest, bool]] = {
    "cat of a file shown before": (
        GenerationRequest(
            messages=_messages(f"$ cat -n app.py\n{FILE}", "...", "$ cat -n app.py"),
            max_tokens=200,
        ),
        True,
    ),
    "cat, the file in the world facts": (
        GenerationRequest(
            messages=_messages(f"World facts: app.py holds:\n{FILE}\n\n$ cat app.py"),
            max_tokens=150,
        ),
        False,  # the small model writes a program here instead
    ),
    "ls -la after earlier listings": (
        GenerationRequest(
            messages=_messages("$ ls -l", LISTING, "$ touch new.txt", "", "$ ls -l"),
            max_tokens=200,
        ),
        True,
    ),
    "a stop string inside the copied text": (
        GenerationRequest(
            messages=_messages(f"$ cat -n app.py\n{FILE}", "...", "$ cat -n app.py"),
            max_tokens=200,
            stop=["beta_3"],
        ),
        True,
    ),
    "max_tokens in the middle of a draft": (
        GenerationRequest(
            messages=_messages(f"$ cat -n app.py\n{FILE}", "...", "$ cat -n app.py"),
            max_tokens=37,
        ),
        True,
    ),
    "JSON schema": (
        GenerationRequest(
            messages=_messages(
                "$ ls -l",
                LISTING,
                "Report the files above as JSON: their names and total size in bytes.",
            ),
            max_tokens=120,
            json_schema=SCHEMA,
        ),
        False,
    ),
    "a page snapshot under its grammar": (
        GenerationRequest(
            messages=[
                ChatMessage(role="system", content="You are Playwright MCP's browser_snapshot."),
                ChatMessage(role="user", content="browser_snapshot {} of http://shop.example/"),
                ChatMessage(role="assistant", content=SNAPSHOT),
                ChatMessage(role="user", content="browser_snapshot {} of http://shop.example/"),
            ],
            max_tokens=400,  # the grammar closes the answer in its last 160 tokens
            grammar=SNAPSHOT_GRAMMAR,
        ),
        False,  # the small model does not copy the snapshot: this checks the grammar
    ),
    "free-form": (
        GenerationRequest(
            messages=_messages("$ fortune", "", "$ echo write me a short poem about the sea"),
            max_tokens=80,
        ),
        False,
    ),
}


# The reference: the same steps, no drafts from the context (only guesses).
NO_DRAFTS = DraftSettings(from_context=False)


@pytest.fixture(scope="module")
def engines() -> dict[str, LlamaCppEngine]:
    pair = {
        "on": small_engine(speculative="on"),
        "reference": small_engine(speculative="on", drafting=NO_DRAFTS),
    }
    for engine in pair.values():
        engine.load_now()
    return pair


def _kv_positions(engine: LlamaCppEngine) -> int:
    """Positions sequence 0 of the live context holds (its highest position + 1)."""
    memory = llama_cpp.llama_get_memory(engine._llm._ctx.ctx)
    return int(llama_cpp.llama_memory_seq_pos_max(memory, 0)) + 1


def _drafts(engine: LlamaCppEngine) -> tuple[int, int]:
    extra = engine.counters.extra
    return extra.get("draft_tokens", 0), extra.get("draft_accepted", 0)


@pytest.mark.anyio
@pytest.mark.parametrize("case", list(CASES))
async def test_answers_with_drafts_are_byte_identical(engines, case):
    request, copies = CASES[case]
    reference = await engines["reference"].generate(request)
    on_engine = engines["on"]
    before = _drafts(on_engine)
    on = await on_engine.generate(request)
    assert on.text == reference.text
    assert on.finish_reason == reference.finish_reason
    assert on.stats.completion_tokens == reference.stats.completion_tokens
    # The live state is the prompt and the chosen tokens, no drafted cell beyond them.
    assert _kv_positions(on_engine) == on_engine._llm.n_tokens
    assert _kv_positions(engines["reference"]) == engines["reference"]._llm.n_tokens
    drafted, accepted = (n - m for n, m in zip(_drafts(on_engine), before, strict=True))
    assert not engines["reference"].counters.extra.get("draft_tokens")  # guesses only
    guesses = engines["reference"].counters.extra.get("draft_guesses", 0)
    assert (guesses > 0) == (engines["reference"]._draft_span()[0] == 2)
    if copies:
        assert accepted > 0, f"drafting never engaged on a copy-heavy answer: {on.text!r}"
    if case == "cat of a file shown before":  # an answer that is mostly a copy
        assert accepted >= 0.3 * on.stats.completion_tokens, (drafted, accepted, on.text)


@pytest.mark.anyio
async def test_episodes_switching_keep_identical_answers(engines):
    """Two episodes in turn, three calls each: snapshots are saved and restored between
    them, each call reuses its episode's KV state; the answers stay identical."""
    answers: dict[str, list[str]] = {}
    for mode, engine in engines.items():
        engine.forget_all()
        histories = {"a": [f"$ cat -n app.py\n{FILE}", "..."], "b": ["$ ls -l", LISTING]}
        commands = {"a": ["$ cat -n app.py", "$ head -n 5 app.py"], "b": ["$ ls -l", "$ ls"]}
        texts: list[str] = []
        for step in range(2):
            for key in ("a", "b"):
                turns = [*histories[key], commands[key][step]]
                request = GenerationRequest(messages=_messages(*turns), max_tokens=60)
                result = await engine.generate(request.model_copy(update={"cache_key": key}))
                assert _kv_positions(engine) == engine._llm.n_tokens
                texts.append(result.text)
                histories[key] = [*turns, result.text]
        answers[mode] = texts
        assert engine.counters.snapshot_restores > 0
    assert answers["on"] == answers["reference"]


@pytest.mark.anyio
async def test_the_same_call_in_another_episode_answers_alike_drafted_from_the_first(engines):
    """A free-form answer has nothing to copy from its own context; the same call in a
    second episode (a rollout run again) answers the same, byte for byte, as the first and
    as the reference. Where the span starts at one it is drafted from the first episode's
    answer (``AnswerMemory``), asserted here; from two, the memory drafts only what extends
    the episode's own tails (held by tests/test_drafting.py), so only the answers are. Both engines
    take the same requests (where a prompt's evaluation starts depends on what each holds)."""
    request, _ = CASES["free-form"]
    texts: dict[str, list[str]] = {}
    for mode, engine in engines.items():
        engine.answers.clear()
        engine.forget_all()
        texts[mode] = []
        for rollout in ("rollout-1", "rollout-2"):
            before = _drafts(engine)
            answer = await engine.generate(request.model_copy(update={"cache_key": rollout}))
            texts[mode].append(answer.text)
            assert _kv_positions(engine) == engine._llm.n_tokens
        drafted, accepted = (n - m for n, m in zip(_drafts(engine), before, strict=True))
        if mode == "on" and engine._draft_span()[0] == 1:
            assert answer.stats.completion_tokens > 10
            assert accepted >= 0.8 * answer.stats.completion_tokens, (drafted, accepted)
        # Where a step of one computes otherwise (span from 2), the memory drafts only
        # what extends the episode's own tails (``ContextDrafter.own_tails``): free text
        # decodes one position a step, as off, and is drafted no more.
    assert texts["on"] == texts["reference"]
    assert texts["on"][0] == texts["on"][1]


@pytest.mark.anyio
async def test_cancelling_mid_draft_stops_where_it_would_without_drafts(engines):
    request, _ = CASES["cat of a file shown before"]
    results = {}
    for mode, engine in engines.items():
        control = GenerationControl(cancelled=threading.Event())

        def cancel_at(n: int, control: GenerationControl = control) -> None:
            if n == 23:  # inside a draft: copies are drafted many tokens at a time
                control.cancel()

        control.on_token = cancel_at
        results[mode] = await engine.generate(request, control)
        assert _kv_positions(engine) == engine._llm.n_tokens
    assert results["on"].finish_reason == results["reference"].finish_reason == "cancelled"
    assert results["on"].text == results["reference"].text
    assert results["on"].stats.completion_tokens == 23


@pytest.mark.anyio
async def test_sampling_with_a_temperature_does_not_draft(engines):
    request, _ = CASES["cat of a file shown before"]
    request = request.model_copy(update={"temperature": 0.8, "seed": 7, "max_tokens": 60})
    engine = engines["on"]
    before = _drafts(engine)
    on = await engine.generate(request)
    assert _drafts(engine) == before
    assert on.text == (await engines["reference"].generate(request)).text


KINDS_CASES = ("cat of a file shown before", "ls -la after earlier listings", "free-form")


@pytest.mark.anyio
async def test_every_position_is_computed_in_a_step_of_the_same_kind_with_drafts_or_none(
    engines,
):
    """What makes answers independent of the drafts: each position of an answer is last
    computed in a step of the measured span (``_draft_span``), or alone where the span
    starts at two and the tail was never seen before, and which of the two it was is the
    same with drafts from the context and without."""
    kinds: dict[str, list[list[bool]]] = {}
    sizes: set[int] = set()
    fewest, most = engines["on"]._draft_span()
    assert (fewest, most) == engines["reference"]._draft_span()
    for mode, engine in engines.items():
        engine.forget_all()
        engine.answers.clear()
        evaluate_all = engine._evaluate_all
        steps: list[tuple[int, int]] = []

        def recording(tokens: list[int], evaluate_all=evaluate_all, engine=engine, steps=steps):
            steps.append((engine._llm.n_tokens, len(tokens)))
            sizes.add(len(tokens))
            return evaluate_all(tokens)

        engine._evaluate_all = recording  # type: ignore[method-assign]
        kinds[mode] = []
        try:
            for case in KINDS_CASES:
                steps.clear()
                await engine.generate(CASES[case][0])
                alone: dict[int, bool] = {}  # position -> last computed alone
                for start, size in steps:
                    for position in range(start, start + size):
                        alone[position] = size == 1
                kept = [alone[p] for p in sorted(alone) if p < engine._llm.n_tokens]
                kinds[mode].append(kept)
        finally:
            del engine._evaluate_all
    assert kinds["on"] == kinds["reference"]
    assert all(size == 1 or fewest <= size <= most for size in sizes), sorted(sizes)
    assert max(sizes) > 2  # drafts were checked
    if fewest == 2:  # steps alone where nothing could be drafted: free text decodes as off
        assert 1 in sizes and any(True in answer for answer in kinds["on"])


def test_the_measured_span_computes_alike_and_the_next_size_does_not(engines):
    """``measure_step_span``'s claim checked on other text: a continuation evaluated in
    steps of every size of the span gives the same logits, bit for bit; one step past it
    gives others (the kernel that takes over)."""
    engine = engines["on"]
    engine.forget_all()
    llm = engine._llm
    fewest, most = engine._draft_span()
    tokens = llm.tokenize(FILE.encode(), add_bos=False)
    count = -(-(most + 1) // fewest) * fewest  # past the span, in whole steps of ``fewest``
    prefix, continuation = tokens[:24], tokens[24 : 24 + count]

    def logits(step: int, count: int) -> np.ndarray:
        llm.reset()
        llm._ctx.kv_cache_clear()
        llm.eval(prefix)
        rows = []
        for start in range(0, count, step):
            chunk = continuation[start : min(start + step, count)]
            rows.append(engine._evaluate_all(chunk))
        return np.concatenate(rows).view(np.uint32)

    try:
        reference = logits(fewest, count)
        for size in range(fewest, most + 1):
            got = logits(size, size)
            assert np.array_equal(got, reference[:size]), f"a step of {size} computes otherwise"
        longest = 1 + engine.options.drafting.max_length  # what the measurement tries
        if most < longest - longest % fewest:  # it stopped at a size that computes otherwise
            past = logits(most + 1, most + 1)
            assert not np.array_equal(past, reference[: most + 1])
    finally:
        engine.forget_all()


def _default_engine(**overrides) -> LlamaCppEngine:
    adapter = next(p for p in bundled_adapters() if p.name == "qwen2.5-coder-0.5b.gguf")
    options = {"model": DEFAULT_MODEL, "lora": [adapter], "n_ctx": 4096, "threads": TEST_THREADS}
    return LlamaCppEngine(LlamaCppOptions(**(options | overrides)))


@pytest.mark.quality
@pytest.mark.anyio
async def test_the_default_model_answers_alike_with_and_without_drafts():
    """The default model with its adapter, where drafts once changed answers (a step of
    several positions summed otherwise than a step of one): now byte-identical to the
    reference, copying and free-form, and drafts taken on the copies."""
    engines = {
        "on": _default_engine(speculative="on"),
        "reference": _default_engine(speculative="on", drafting=NO_DRAFTS),
    }
    cases = ["cat of a file shown before", "ls -la after earlier listings", "free-form"]
    texts: dict[str, list[str]] = {}
    for mode, engine in engines.items():
        engine.load_now()
        texts[mode] = [(await engine.generate(CASES[case][0])).text for case in cases]
        assert _kv_positions(engine) == engine._llm.n_tokens
    assert texts["on"] == texts["reference"]
    drafted, accepted = _drafts(engines["on"])
    assert accepted > 0.5 * drafted > 0, (drafted, accepted)
    assert not engines["reference"].counters.extra.get("draft_tokens")
    for engine in engines.values():
        await engine.aclose()

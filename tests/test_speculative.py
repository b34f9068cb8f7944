"""Speculative decoding with drafts from the context (engines/drafting.py, LocalEngine's
``_decode_speculative``): the same answers, byte for byte, whatever is drafted (drafts
from the context against none, only the guesses that fill each step to the two positions
llama.cpp needs), on the real small model and on the default model with its adapter;
every step within the span of positions that computes alike (``_draft_span``); drafts
taken where the answer copies its context, or another episode's answer to the same call;
the KV cache left as the reference leaves it."""

from __future__ import annotations

import threading

import llama_cpp
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
    assert engines["reference"].counters.extra.get("draft_guesses")
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
async def test_another_episodes_answer_to_the_same_call_is_drafted(engines):
    """A free-form answer has nothing to copy from its own context; the same call in a
    second episode (a rollout run again) drafts it from the first episode's answer
    (``AnswerMemory``), and answers the same, byte for byte, as the reference. Both engines
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
        if mode == "on":
            assert answer.stats.completion_tokens > 10
            assert accepted >= 0.8 * answer.stats.completion_tokens, (drafted, accepted)
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


@pytest.mark.anyio
async def test_every_step_evaluates_two_to_seven_positions(engines):
    """llama.cpp computes a position alike only in steps of 2 to 7 (``_draft_span``): a step
    of one (no draft found) or of eight would change the numbers behind an answer."""
    sizes: list[int] = []
    for engine in engines.values():
        engine.forget_all()
        evaluate_all = engine._evaluate_all

        def recording(tokens: list[int], evaluate_all=evaluate_all) -> object:
            sizes.append(len(tokens))
            return evaluate_all(tokens)

        engine._evaluate_all = recording  # type: ignore[method-assign]
        try:
            for case in ("cat of a file shown before", "free-form"):
                await engine.generate(CASES[case][0])
        finally:
            del engine._evaluate_all
    assert sizes and min(sizes) == 2 and max(sizes) == 7, sorted(set(sizes))


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

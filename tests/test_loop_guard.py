"""The loop guard: a token that would extend a degenerate repeat is banned (loop_guard.py)."""

from __future__ import annotations

import json

import anyio
import numpy as np
import pytest
from pydantic import ValidationError

from aw_mcp.domain.loader import load_domain
from aw_mcp.engines.base import ChatMessage, GenerationRequest
from aw_mcp.engines.loop_guard import LoopGuard, LoopGuardSettings
from aw_mcp.records.reader import load_record_dir
from tests.conftest import REPO_ROOT, small_engine

# A tiny vocabulary: token id -> its text.
VOCAB = ["README.md\n", "[exit code: 0]", "tests\n", "x"]


def detokenize(tokens):
    return "".join(VOCAB[t] for t in tokens)


def greedy(logits: np.ndarray) -> int:
    return int(np.argmax(logits))


def test_a_long_repeat_is_a_loop_and_real_looking_output_is_not():
    guard = LoopGuard(detokenize)
    assert guard.loops("README.md\n" * 13)  # 130 characters of one 10-character block
    assert guard.loops("ab" * 64)
    assert not guard.loops("README.md\n" * 12)  # 120: shorter than min_span
    assert not guard.loops("=" * 67 + "\n")  # the longest repeat in the real records
    assert not guard.loops("\n".join(f"./src/module_{i}.py" for i in range(40)))


def test_the_token_that_would_continue_a_loop_is_banned_for_the_next_likeliest():
    guard = LoopGuard(detokenize)
    logits = np.array([5.0, 4.0, 3.0, 0.0], dtype=np.float32)  # README.md\n likeliest
    out = [0] * 12  # 120 characters: one more copy makes it a loop
    assert guard.choose(logits, out, greedy) == 1  # the exit-code line instead
    assert guard.bans == 1
    assert logits[0] == 5.0  # the caller's logits are left alone
    assert guard.choose(logits, [0] * 5, greedy) == 0  # a short repeat is let be
    # When every candidate continues the loop the guard gives up after max_bans.
    stubborn = LoopGuard(lambda ts: "ab" * 70, max_bans=2)
    assert stubborn.choose(logits, [0], greedy) == 2 and stubborn.bans == 2


def test_a_token_that_would_name_a_unique_name_again_is_banned():
    vocab = ["- a [ref=e", "1", "2", "]\n", "0", "text " * 100]
    rule = LoopGuardSettings(unique_names=r"\[ref=([^\]\s]+)\]")
    guard = LoopGuard(lambda tokens: "".join(vocab[t] for t in tokens), rule)
    logits = np.array([0.0, 0.0, 0.0, 5.0, 4.0, 0.0], dtype=np.float32)  # "]\n" likeliest
    out = [0, 1, 3, 0, 2, 3, 0, 1]  # e1 and e2 written; now "[ref=e1" again
    assert guard.choose(logits, out, greedy) == 4  # e10, not e1 twice
    assert guard.bans == 1
    assert guard.choose(logits, [*out, 4], greedy) == 3  # e10 is new: closed
    assert guard.choose(logits, [0, 2, 3, 0, 1], greedy) == 3  # e1 is new here
    # A name is remembered however long ago it was written (500 characters here).
    far = LoopGuard(guard._detokenize, rule)
    written = [0, 1, 3, 5, 0]
    for end in range(1, len(written) + 1):
        far.choose(logits, written[:end], greedy)  # the guard sees the answer grow
    assert far.choose(logits, [*written, 1], greedy) == 4
    # Without the rule the guard lets it be: the text is no loop.
    assert LoopGuard(guard._detokenize).choose(logits, out, greedy) == 3


def test_a_token_that_would_write_a_phrase_once_too_often_is_banned():
    # One sentence rewritten with a word changed: no exact repeat, one phrase again and again.
    vocab = [
        "it can also be used to reclaim space from the database, ",
        "it is also used to reclaim space from the database, ",
        "it can be used to reclaimspace from the database,but ",  # a space dropped
        "Done.",
    ]
    rule = LoopGuardSettings(phrase_chars=30, max_phrase_copies=2)
    guard = LoopGuard(lambda tokens: "".join(vocab[t] for t in tokens), rule)
    logits = np.array([5.0, 3.0, 4.0, 1.0], dtype=np.float32)
    assert not guard.loops("".join(vocab[t] for t in [0, 1, 0, 1, 0]))  # the exact rule misses it
    # "used to reclaim space from the database," is written twice: a third copy is banned,
    # whichever wording or spacing leads to it, and the model must say something else.
    assert guard.choose(logits, [0, 1], greedy) == 3
    assert guard.bans == 3
    # Twice is allowed, and the count holds however far apart the copies are.
    assert LoopGuard(guard._detokenize, rule).choose(logits, [0], greedy) == 0
    grown = LoopGuard(guard._detokenize, rule)
    written = [0, *[3] * 12, 1]
    for end in range(1, len(written) + 1):
        grown.choose(logits, written[:end], greedy)  # the guard sees the answer grow
    assert grown.choose(logits, written, greedy) == 3
    assert LoopGuard(guard._detokenize).choose(logits, [0, 1], greedy) == 0  # no rule: let be


def test_unique_names_is_a_regular_expression_with_a_group():
    with pytest.raises(ValidationError, match="needs a group"):
        LoopGuardSettings(unique_names=r"\[ref=\w+\]")
    with pytest.raises(ValidationError, match="not a regular expression"):
        LoopGuardSettings(unique_names=r"\[ref=(\w+\]")


@pytest.mark.data
def test_records_never_trip_the_guard():
    """Its threshold is measured on real observations (all of them, in the module docstring);
    here every 7th record file, each answer at every 16th length as it grows while decoded."""
    guard = LoopGuard(detokenize)
    tripped = []
    for path in sorted((REPO_ROOT / "data").rglob("*.jsonl"))[::7]:
        for line in path.read_text().splitlines():
            text = json.loads(line)["observation"]
            # Any prefix of a real answer is a state the guard sees while decoding it.
            if any(guard.loops(text[:end]) for end in range(128, len(text) + 1, 16)):
                tripped.append(f"{path.name}: {text[:60]!r}")
    assert not tripped, tripped[:5]


def _banned_in(rule: LoopGuardSettings, text: str) -> int | None:
    """Where a guard with ``rule`` would ban a character of ``text`` written one character a
    token (None: nowhere)."""
    alphabet = sorted(set(text))
    tokens = [alphabet.index(c) for c in text]
    guard = LoopGuard(lambda ts: "".join(alphabet[t] for t in ts), rule)
    written: list[int] = []
    for token in tokens:
        logits = np.zeros(len(alphabet), dtype=np.float32)
        logits[token] = 1.0
        if guard.choose(logits, written, greedy) != token:
            return len(written)
        written.append(token)
    return None


def _observations(folder: str) -> list[str]:
    return [
        record.observation
        for episode in load_record_dir(REPO_ROOT / "data" / folder)
        for record in episode.records
    ]


def _search_results() -> list[str]:
    """Real-looking Brave and Tavily answers naming five pages of one site."""
    pages = {  # as Python's docs title and describe them
        "asyncio": ("asyncio — Asynchronous I/O", "asyncio is a library to write concurrent code."),
        "asyncio-task": ("Coroutines and Tasks", "This section outlines high-level asyncio APIs."),
        "asyncio-stream": ("Streams", "Streams are high-level async/await-ready primitives."),
        "asyncio-sync": ("Synchronization Primitives", "asyncio primitives are like threading's."),
        "asyncio-queue": (
            "Queues",
            "asyncio queues are designed to be similar to classes of queue.",
        ),
    }
    results = [
        (f"https://docs.python.org/3/library/{page}.html", title, description)
        for page, (title, description) in pages.items()
    ]
    brave = "\n\n".join(
        json.dumps(
            {"url": url, "title": title, "description": description, "extra_snippets": []},
            separators=(",", ":"),
            ensure_ascii=False,
        )
        for url, title, description in results
    )
    tavily = "Detailed Results:" + "".join(
        f"\n\nTitle: {title}\nURL: {url}\nContent: {description}"
        for url, title, description in results
    )
    return [brave, tavily]


@pytest.mark.data
def test_real_answers_never_trip_the_search_worlds_rule():
    """The search world's rule (search.yaml) against the real pages of the fetch server its
    fetch tool copies (its search tools have no records) and real-looking results, every
    character checked as the answer grows."""
    rule = load_domain("search").generation.loop_guard
    assert rule is not None and rule.max_phrase_copies is not None
    answers = [*_observations("mcp/fetch"), *_search_results()]
    assert len(answers) > 100
    tripped = [
        f"{text[:60]!r} at {at}" for text in answers if (at := _banned_in(rule, text)) is not None
    ]
    assert not tripped, tripped[:5]


@pytest.mark.parametrize("loop_guard", [False, True])
def test_the_embedded_model_asked_to_repeat_stops_repeating_with_the_guard(loop_guard):
    engine = small_engine(loop_guard=loop_guard)
    request = GenerationRequest(
        messages=[
            ChatMessage(
                role="user", content="Continue this list exactly as it goes on:\n" + "tests\n" * 12
            )
        ],
        max_tokens=120,
    )

    async def run():
        await engine.start()
        try:
            return (await engine.generate(request)).text
        finally:
            await engine.aclose()

    text = anyio.run(run)
    looped = any(LoopGuard(detokenize).loops(text[:end]) for end in range(128, len(text) + 1))
    assert looped is not loop_guard, text[:300]

"""Batched decoding across episodes (engines/batching.py) on the real embedded model:
episodes share decode steps, keep their own outputs, cancel alone, and free their sequence."""

from __future__ import annotations

import threading

import anyio
import anyio.lowlevel
import pytest

from aw_mcp.engines.base import ChatMessage, GenerationControl, GenerationRequest
from aw_mcp.engines.batching import call_soon_in
from tests.conftest import small_engine

pytestmark = pytest.mark.anyio


@pytest.fixture
async def engine_of():
    """Makes small-model engines and closes them after the test: an engine left open keeps
    its batch loop's thread and its model to the end of the session."""
    made = []

    def make(**overrides):
        made.append(small_engine(**overrides))
        return made[-1]

    yield make
    for engine in made:
        await engine.aclose()


WORDS = ["apple", "banana", "orange", "dragon", "eagle", "falcon"]
COUNTING = [
    ChatMessage(role="user", content="Write the numbers from 1 to 400, separated by commas.")
]


def _echo(word: str) -> GenerationRequest:
    content = f"Repeat exactly this word and nothing else: {word}"
    return GenerationRequest(
        messages=[ChatMessage(role="user", content=content)], max_tokens=10, cache_key=word
    )


async def _all_at_once(engine, requests, controls=None):
    results = {}
    controls = controls or {}

    async def one(request):
        results[request.cache_key] = await engine.generate(request, controls.get(request.cache_key))

    async with anyio.create_task_group() as tg:
        for request in requests:
            tg.start_soon(one, request)
    return results


async def test_concurrent_episodes_share_decode_steps_and_keep_their_own_output(engine_of):
    engine = engine_of(batch_slots=8)
    results = await _all_at_once(engine, [_echo(w) for w in WORDS])
    extra = engine.counters.extra
    generated = engine.counters.completion_tokens
    assert generated == sum(r.stats.completion_tokens for r in results.values()) > len(WORDS)
    # One model call served several episodes: fewer calls than tokens generated.
    assert extra["batched_steps"] > 0
    assert extra["max_step_sequences"] == len(WORDS)
    assert extra["decode_steps"] < generated
    # No cross-talk: no answer speaks of another episode's word ...
    for word, result in results.items():
        text = result.text.lower()
        assert not [w for w in WORDS if w != word and w in text], (word, result.text)
    # ... and the answers speak of their own. Batched greedy decoding is not bit-stable (which
    # episodes share a step depends on timing, and with it ggml's kernels), so the tiny model
    # drifts on a word or two now and then ("falcon" -> "flea"; "eagle" and "falcon" in one
    # of ~40 runs); most of them never do.
    own = [word for word, result in results.items() if word in result.text.lower()]
    assert len(own) > len(WORDS) // 2, {w: r.text for w, r in results.items()}


async def test_one_setting_keeps_the_single_sequence_path(engine_of):
    engine = engine_of(batch_slots=1)
    results = await _all_at_once(engine, [_echo(w) for w in WORDS[:2]])
    assert engine.batch is None
    assert "decode_steps" not in engine.counters.extra
    assert all(r.stats.completion_tokens > 0 for r in results.values())
    assert engine.scheduler.turns_granted == 2


async def test_cancelling_one_episode_leaves_the_others_running(engine_of):
    engine = engine_of(batch_slots=4)
    control = GenerationControl()

    def on_token(n: int) -> None:
        if n == 5:
            control.cancel()

    control.on_token = on_token
    long = GenerationRequest(messages=COUNTING, max_tokens=300, cache_key="long")
    results = await _all_at_once(
        engine, [long, _echo("apple"), _echo("orange")], controls={"long": control}
    )
    assert results["long"].finish_reason == "cancelled"
    assert results["long"].stats.completion_tokens == 5
    for word in ("apple", "orange"):
        assert results[word].finish_reason != "cancelled"
        assert word in results[word].text.lower()
    assert engine.counters.extra["max_step_sequences"] == 3


async def test_a_new_prompt_is_prefilled_in_chunks_beside_running_episodes(engine_of):
    engine = engine_of(batch_slots=4, prefill_chunk=16)
    seen: list[int] = []
    control = GenerationControl(on_token=seen.append)  # called in the batch loop's thread
    story = "Once upon a time there was a lighthouse keeper who counted ships. " * 20
    late = GenerationRequest(
        messages=[ChatMessage(role="user", content=story)], max_tokens=4, cache_key="late"
    )
    results = {}

    async def counting() -> None:
        request = GenerationRequest(messages=COUNTING, max_tokens=120, cache_key="count")
        results["count"] = await engine.generate(request, control)

    async with anyio.create_task_group() as tg:
        tg.start_soon(counting)
        while len(seen) < 3:
            await anyio.sleep(0.005)
        results["late"] = await engine.generate(late)
    assert results["late"].stats.evaluated_prompt_tokens > 200
    # The long prompt went in 16 tokens a step while "count" went on decoding.
    assert engine.counters.extra["max_prefill_beside_decoding"] == 16
    assert results["count"].stats.completion_tokens == 120


async def test_more_episodes_than_sequences_swap_through_snapshots(engine_of):
    # reevaluate_below=0: always restore (these prompts differ in a few tokens only, which
    # by default are re-evaluated on a copied prefix instead).
    engine = engine_of(batch_slots=2, reevaluate_below=0)
    first = {}
    for word in ("apple", "banana", "cherry"):  # cherry takes apple's sequence
        first[word] = await engine.generate(_echo(word))
    assert "apple" not in engine.batch.resident_keys()
    again = await engine.generate(_echo("apple"))
    assert again.stats.restored_snapshot
    assert again.stats.reused_prompt_tokens == again.stats.prompt_tokens - 1
    assert engine.counters.snapshot_saves >= 1 and engine.counters.snapshot_restores == 1
    assert engine.snapshot_bytes > 0  # banana's, saved out for apple
    for word in first:
        engine.forget(word)
    assert engine.snapshot_bytes == 0 and engine.batch.resident_keys() == []


async def test_a_returning_episode_with_few_own_tokens_is_re_evaluated_on_a_shared_prefix(
    engine_of,
):
    engine = engine_of(batch_slots=2)
    for word in ("apple", "banana", "cherry"):
        await engine.generate(_echo(word))
    again = await engine.generate(_echo("apple"))
    assert not again.stats.restored_snapshot
    assert 0 < again.stats.evaluated_prompt_tokens < 16  # its own word, on cherry's prefix
    assert engine.counters.snapshot_restores == 0
    assert engine.snapshots.take("apple") is None  # the unused snapshot was dropped


async def test_forget_frees_the_episodes_sequence(engine_of):
    engine = engine_of(batch_slots=2)
    await engine.generate(_echo("apple"))
    assert engine.batch.resident_keys() == ["apple"]
    engine.forget("apple")
    assert engine.batch.resident_keys() == []
    again = await engine.generate(_echo("apple"))
    assert not again.stats.restored_snapshot
    assert again.stats.reused_prompt_tokens == 0  # nothing of it was kept anywhere
    assert engine.snapshot_bytes == 0


async def test_lora_adapters_apply_to_the_batched_context_too():
    """The bundled adapter changes batched answers as it changes single-sequence ones (the
    batched sequences live in a context of their own, which must get the adapters too)."""
    from aw_mcp.models.adapters import bundled_adapters

    adapter = next(p for p in bundled_adapters() if p.name.startswith("smollm2"))  # its base
    request = GenerationRequest(
        messages=[ChatMessage(role="user", content="Action: run_command\npwd")],
        max_tokens=12,
        cache_key="ep",
    )
    answers = {}
    for slots, lora in ((1, []), (1, [adapter]), (2, []), (2, [adapter])):
        engine = small_engine(batch_slots=slots, lora=lora)
        await engine.start()
        try:
            answers[slots, bool(lora)] = (await engine.generate(request)).text
        finally:
            await engine.aclose()
    assert answers[1, True] != answers[1, False]  # the adapter matters ...
    assert answers[2, True] != answers[2, False]  # ... batched too


async def test_ending_a_job_never_waits_for_the_event_loop():
    """The loop's thread tells the event loop a job ended without waiting for it: here the
    event loop is blocked until the thread returns (a waiting call would never return)."""
    token = anyio.lowlevel.current_token()
    ran: list[str] = []
    returned = threading.Event()

    def loop_thread() -> None:
        call_soon_in(token, lambda: ran.append("done"))
        returned.set()

    thread = threading.Thread(target=loop_thread)
    thread.start()
    assert returned.wait(timeout=30)  # blocks the event loop meanwhile
    thread.join()
    assert ran == []  # not run yet: the event loop was busy ...
    for _ in range(100):
        if ran:
            break
        await anyio.sleep(0.01)
    assert ran == ["done"]  # ... and run by it afterwards


def test_a_job_ending_after_its_event_loop_is_gone_is_dropped():
    async def token_of_a_run() -> anyio.lowlevel.EventLoopToken:
        return anyio.lowlevel.current_token()

    token = anyio.run(token_of_a_run)
    ran: list[str] = []
    call_soon_in(token, lambda: ran.append("done"))  # neither raises nor waits
    assert ran == []


PASSAGES = [
    "The river bends twice before it reaches the old mill, where the water slows and turns "
    "green under the willows.",
    "Invoice 4471: two boxes of screws, one drill bit set, delivery on Tuesday before noon, "
    "paid by card.",
    "def area(width, height):\n    return width * height\n\nprint(area(3, 4))\n",
    "Alice moved to Lisbon in May; Bob stayed in Oslo and kept the cat, whose name is Pepper.",
]


def _copy(i: int) -> GenerationRequest:
    content = f"Copy this text exactly, nothing else:\n\n{PASSAGES[i]}"
    return GenerationRequest(
        messages=[ChatMessage(role="user", content=content)], max_tokens=48, cache_key=f"c{i}"
    )


async def test_batched_drafts_answer_as_without_them_in_fewer_steps(engine_of):
    """Drafts in the batch loop on the real model, one episode at a time (which sequences
    share a step changes batched answers in near-ties, drafts or not): the answers of the
    loop without drafts, in far fewer steps."""
    answers, steps = {}, {}
    for speculative in ("on", "off"):
        engine = engine_of(batch_slots=4, speculative=speculative)
        answers[speculative] = [
            (await engine.generate(_copy(i))).text for i in range(len(PASSAGES))
        ]
        steps[speculative] = engine.counters.extra["decode_steps"]
    assert answers["on"] == answers["off"]
    assert PASSAGES[1] in answers["on"][1]  # it copied (the small model copies some)
    assert steps["on"] < 0.7 * steps["off"]


async def test_episodes_sharing_steps_take_drafts_each_from_its_own_context(engine_of):
    engine = engine_of(batch_slots=4)
    results = await _all_at_once(engine, [_copy(i) for i in range(len(PASSAGES))])
    extra = engine.counters.extra
    assert extra["max_step_sequences"] == len(PASSAGES)
    tokens = sum(r.stats.completion_tokens for r in results.values())
    assert extra["draft_accepted"] > 0.3 * tokens
    # Each episode answered from its own passage, never another's.
    for i, word in enumerate(["river", "Invoice", "area", "Lisbon"]):
        text = results[f"c{i}"].text
        assert word in text
        others = [p for j, p in enumerate(PASSAGES) if j != i]
        assert not any(p[:25] in text for p in others)

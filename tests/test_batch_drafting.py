"""Drafts in the batch loop (engines/batching.py), plumbing: a fake backend whose "model" is
a pure function of each sequence's tokens, so every answer has one right value. Drafting
must give the same tokens as one token a step, for many episodes sharing steps, with the
backend's KV always what the loop thinks it holds (a wrong position or a rejected draft
left behind changes the fake model's answers). The real model's batched drafts are in
tests/test_batching.py."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import anyio
import numpy as np
import pytest

from aw_mcp.engines.base import ChatMessage, GenerationControl, GenerationRequest
from aw_mcp.engines.batching import BatchEntry, BatchLoop, Job, run_job
from aw_mcp.engines.counters import EngineCounters, GenerationStats
from aw_mcp.engines.decoding import Decoding, DecodingSettings
from aw_mcp.engines.drafting import AnswerMemory, DraftSettings
from aw_mcp.engines.snapshots import Snapshot, SnapshotStore

pytestmark = pytest.mark.anyio

VOCAB = 48
END = 0


def fake_next(tokens: Sequence[int]) -> int:
    """The fake model's next token: mostly what followed the most recent earlier occurrence
    of the last two tokens, else of the last one (so drafts from the context are often
    right), but every seventh position something of its own (so drafts are also
    rejected); the end token after a 47."""
    n = len(tokens)
    if tokens[-1] == 47:
        return END
    if n % 7 != 0:
        for i in range(n - 3, 0, -1):
            if tokens[i - 1] == tokens[-2] and tokens[i] == tokens[-1]:
                return tokens[i + 1]
        for i in range(n - 2, -1, -1):
            if tokens[i] == tokens[-1]:
                return tokens[i + 1]
    return 1 + (tokens[-1] * 5 + n * 3) % (VOCAB - 2)


class CopyingBackend:
    """A ``BatchBackend`` whose KV is each sequence's token list. A step must start where
    the sequence ends (the loop's bookkeeping is checked on every call)."""

    def __init__(self, slots: int):
        self.kv: dict[int, list[int]] = {seq: [] for seq in range(slots)}
        self.checked_drafts = 0  # entries of a token and a draft after it

    def batch_decode(self, entries: list[BatchEntry]) -> list[np.ndarray]:
        outputs = []
        for entry in entries:
            held = self.kv[entry.seq]
            assert entry.start == len(held), "a step must continue the sequence's KV"
            held.extend(entry.tokens)
            rows = np.zeros((entry.logits, VOCAB), dtype=np.float32)
            first = len(held) - entry.logits
            for row in range(entry.logits):
                rows[row, fake_next(held[: first + row + 1])] = 10.0
            if entry.logits:
                outputs.append(rows)
        self.checked_drafts += sum(1 for e in entries if e.logits > 1)
        return outputs

    def seq_truncate(self, seq: int, n: int) -> bool:
        del self.kv[seq][n:]
        return True

    def seq_copy(self, src: int, dst: int, n: int) -> None:
        self.kv[dst] = self.kv[src][:n]

    def seq_save(self, seq: int, tokens: list[int]) -> Snapshot | None:
        assert self.kv[seq] == tokens
        return Snapshot(tokens=list(tokens), state=list(tokens), nbytes=8 * len(tokens))

    def seq_restore(self, seq: int, snapshot: Snapshot) -> bool:
        self.kv[seq] = list(snapshot.state)
        return True


class Letters:
    """A ``Vocabulary``: token t is the letter chr(64 + t); 0 ends."""

    def detokenize(self, tokens: Sequence[int]) -> str:
        return "".join(chr(64 + t) for t in tokens if t != END)

    def is_end(self, token: int) -> bool:
        return token == END

    def end_tokens(self) -> list[int]:
        return [END]

    def closing_tokens(self, chars: str, ranked: bool) -> list[list[int]]:
        return []

    def stop_strings(self) -> list[str]:
        return []


def make_loop(
    drafting: DraftSettings | None, slots: int = 4, answers: AnswerMemory | None = None
) -> tuple[BatchLoop, CopyingBackend]:
    backend = CopyingBackend(slots)
    counters = EngineCounters()
    loop = BatchLoop(
        backend,
        slots=slots,
        snapshots=SnapshotStore(1 << 30, counters),
        counters=counters,
        model_lock=threading.Lock(),
        prefill_chunk=16,
        reevaluate_below=4,
        max_tokens_per_step=256,
        context_window=4096,
        name="fake",
        drafting=drafting,
        answers=answers,
    )
    return loop, backend


def prompt(seed: int) -> list[int]:
    """A prompt with passages that repeat (something to draft from)."""
    rng = np.random.default_rng(seed)
    passage = [int(t) for t in rng.integers(1, VOCAB - 1, size=12)]
    return [*passage, *rng.integers(1, VOCAB - 1, size=5).tolist(), *passage[:3]]


async def generate(
    loop: BatchLoop,
    key: str,
    tokens: list[int],
    control: GenerationControl | None = None,
    **request_fields,
) -> str:
    request = GenerationRequest(
        messages=[ChatMessage(role="user", content="-")], **{"max_tokens": 60, **request_fields}
    )

    def make_job(on_done):
        decoding = Decoding(
            Letters(),
            DecodingSettings(loop_guard=False),
            request,
            control or GenerationControl(),
            None,
            loop_counters(loop),
        )
        stats = GenerationStats(prompt_tokens=len(tokens))
        return Job(key=key, tokens=tokens, decoding=decoding, stats=stats, on_done=on_done)

    result = await run_job(loop, make_job)
    return result.text


def loop_counters(loop: BatchLoop) -> EngineCounters:
    return loop._counters


async def answers(loop: BatchLoop, prompts: dict[str, list[int]], **request_fields) -> dict:
    out: dict[str, str] = {}

    async def one(key: str) -> None:
        out[key] = await generate(loop, key, prompts[key], **request_fields)

    async with anyio.create_task_group() as tg:
        for key in prompts:
            tg.start_soon(one, key)
    return out


def one_token_a_step(tokens: list[int], max_tokens: int) -> str:
    """The fake model's greedy answer, computed directly."""
    held, out = list(tokens), []
    while len(out) < max_tokens:
        token = fake_next(held)
        if token == END:
            break
        out.append(token)
        held.append(token)
    return Letters().detokenize(out)


async def test_drafted_answers_are_those_of_one_token_a_step_for_episodes_sharing_steps():
    prompts = {f"e{i}": prompt(i) for i in range(10)}  # more episodes than sequences
    loop, backend = make_loop(DraftSettings())
    try:
        drafted = await answers(loop, prompts)
        second = await answers(loop, prompts)  # episodes come back to their KV
    finally:
        loop.close()
    plain_loop, _ = make_loop(None)
    try:
        plain = await answers(plain_loop, prompts)
    finally:
        plain_loop.close()
    expected = {k: one_token_a_step(p, 60) for k, p in prompts.items()}
    assert plain == expected
    assert drafted == expected
    # The second call of each episode has the same prompt: the same answer again.
    assert second == expected
    extra = loop_counters(loop).extra
    assert extra["draft_accepted"] > 0  # drafts were taken ...
    assert extra["draft_tokens"] > extra["draft_accepted"]  # ... and rejected
    assert backend.checked_drafts > 0  # the backend was asked for drafts' logits


async def test_a_draft_is_cut_by_max_tokens_and_stop_strings_as_one_token_a_step_is():
    prompts = {f"e{i}": prompt(100 + i) for i in range(4)}
    for fields in ({"max_tokens": 5}, {"max_tokens": 13}):
        loop, _ = make_loop(DraftSettings())
        try:
            got = await answers(loop, prompts, **fields)
        finally:
            loop.close()
        assert got == {k: one_token_a_step(p, fields["max_tokens"]) for k, p in prompts.items()}
    full = {k: one_token_a_step(p, 60) for k, p in prompts.items()}
    for key, text in full.items():  # a stop string inside a copied passage
        assert len(text) > 10
        stop = text[8:10]
        loop, _ = make_loop(DraftSettings())
        try:
            got = await generate(loop, key, prompts[key], stop=[stop])
        finally:
            loop.close()
        assert got == text[: text.index(stop)]


async def test_a_generation_cancelled_mid_draft_keeps_only_the_tokens_before_it():
    """Cancelled after its 9th token (from inside the loop, as a token arrives): drafted
    tokens after it are not taken."""
    control = GenerationControl()
    control.on_token = lambda n: control.cancel() if n == 9 else None
    loop, _ = make_loop(DraftSettings())
    try:
        text = await generate(loop, "e", prompt(3), control)
    finally:
        loop.close()
    assert loop_counters(loop).extra["draft_accepted"] > 0
    assert text == one_token_a_step(prompt(3), 9)


async def test_no_rejected_draft_stays_in_the_kv_after_an_answer():
    loop, backend = make_loop(DraftSettings(), slots=2)
    try:
        text = await generate(loop, "e", prompt(7))
        slot = next(s for s in loop._slots if s.key == "e")
        chosen = [*prompt(7), *(ord(c) - 64 for c in text)]
        assert backend.kv[slot.seq] == slot.tokens
        # The prompt and the chosen tokens (the last one only if an end token followed).
        assert slot.tokens == chosen[: len(slot.tokens)]
        assert len(slot.tokens) >= len(chosen) - 1
    finally:
        loop.close()


async def test_a_second_episode_drafts_the_first_ones_answer_to_the_same_call():
    """Episode "b" is given the call episode "a" answered (a rollout run again): with the
    answer memory its answer is drafted from "a"'s nearly whole, the same tokens."""
    tokens = prompt(11)
    expected = one_token_a_step(tokens, 60)
    accepted: dict[bool, int] = {}
    for remembering in (False, True):
        memory = AnswerMemory(DraftSettings()) if remembering else None
        loop, _ = make_loop(DraftSettings(), answers=memory)
        try:
            assert await generate(loop, "a", tokens) == expected
            before = loop_counters(loop).extra.get("draft_accepted", 0)
            assert await generate(loop, "b", tokens) == expected
            accepted[remembering] = loop_counters(loop).extra["draft_accepted"] - before
        finally:
            loop.close()
        assert memory is None or len(memory) == 1  # the same call and answer, kept once
    assert len(expected) > 20
    assert accepted[True] >= 0.85 * len(expected) > accepted[False], accepted


async def test_sampled_answers_are_not_drafted():
    loop, _ = make_loop(DraftSettings())
    try:
        await answers(loop, {f"e{i}": prompt(i) for i in range(3)}, temperature=0.7, seed=1)
    finally:
        loop.close()
    assert loop_counters(loop).extra.get("draft_tokens", 0) == 0

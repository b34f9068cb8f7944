"""Continuous batching: the episodes ready to generate share each decode step.

A model instance decodes one token for one sequence at about the cost of one token for
several sequences (the weights are read once per step either way): on the 2-core build
machine 16 SmolLM2 sequences decoded together reached 1.7-2.7x one sequence's rate in total.
``BatchLoop`` is the generic part of that, used by ``LocalEngine`` when its backend can
decode several sequences in one call (``BatchBackend``; llama.cpp implements it):

- One worker thread owns the model and runs the loop; ``submit`` hands it a ``Job`` and
  returns at once (the caller awaits the job's end, ``run_job``). No other thread touches the model.
- The model's KV memory has ``slots`` sequences. An episode keeps its sequence (its own KV
  cells) between calls while it is resident; its next call evaluates only the new tokens.
  A new episode copies the longest matching prefix of a resident sequence (the domain's
  shared instructions), so it evaluates only what is its own.
- With more episodes than slots, the least recently used idle sequence is saved into the
  ``SnapshotStore`` (the same per-sequence state as the single-sequence path) and restored
  when its episode comes back. When the KV cells themselves run out, idle sequences are
  saved out first; if every sequence is running, the newest job is parked (its state kept
  with the job) and resumes when there is room.
- Each step: one token per decoding job, plus prompt tokens of jobs still prefilling, at
  most ``prefill_chunk`` of them while others decode (a long prompt cannot stall the running
  episodes), the whole ``max_tokens_per_step`` when nobody decodes.
- With ``drafting`` (speculative decoding, greedy jobs only), a decoding job's token goes
  with a draft from its own context or the engine's recent answers (``ContextDrafter``,
  ``AnswerMemory``, which every finished job adds to): the tokens that may follow it,
  checked in the same step with logits for every position. The chosen tokens are those
  the job would choose without drafts, from the same positions' logits; a draft's rejected
  tail leaves the sequence's KV at once. Unlike the single-sequence path (local.py), no
  step is padded to a span of positions: how many positions share a step already varies
  with the episodes running, and with it, on a CPU, which kernel computes them (answers may
  differ from one position a step in near-ties, batched or not).
- Jobs join between steps (round-robin across episodes, like ``FairScheduler``) and leave
  when done, cancelled or forgotten; each keeps its own sampler, seed, stop strings and
  constraint (``Decoding`` in local.py).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.lowlevel
import numpy as np

from aw_mcp.engines.base import GenerationResult
from aw_mcp.engines.counters import GenerationStats
from aw_mcp.engines.drafting import AnswerMemory, ContextDrafter, DraftSettings
from aw_mcp.engines.sequences import common_prefix
from aw_mcp.engines.snapshots import Snapshot, SnapshotStore
from aw_mcp.errors import EngineError

if TYPE_CHECKING:
    from aw_mcp.engines.counters import EngineCounters
    from aw_mcp.engines.decoding import Decoding

log = logging.getLogger(__name__)

NO_KEY = "\x00no-key"  # requests without a cache key: never kept in a sequence


class KVFull(Exception):
    """The model's KV memory has no room for this step's tokens (nothing was evaluated)."""


@dataclass
class BatchEntry:
    """Tokens of one sequence in one decode step, starting at position ``start``; the
    logits after each of its last ``logits`` tokens are wanted (0: none)."""

    seq: int
    tokens: list[int]
    start: int
    logits: int


class BatchBackend(Protocol):
    """What a backend provides for batched decoding (seq = a KV sequence id < slots)."""

    def batch_decode(self, entries: list[BatchEntry]) -> list[np.ndarray]:
        """Evaluate every entry in one model call; for each entry wanting logits, in order,
        an array of its last ``logits`` positions' logits (one row each, float32, the
        caller may modify). Raise ``KVFull`` if the cells ran out (no effect)."""
        ...

    def seq_truncate(self, seq: int, n: int) -> bool:
        """Keep the first ``n`` positions of ``seq``; False if the memory cannot (then
        the caller clears the whole sequence)."""
        ...

    def seq_copy(self, src: int, dst: int, n: int) -> None:
        """Make ``dst``'s first ``n`` positions those of ``src`` (dst is empty)."""
        ...

    def seq_save(self, seq: int, tokens: list[int]) -> Snapshot | None: ...

    def seq_restore(self, seq: int, snapshot: Snapshot) -> bool: ...


@dataclass
class Job:
    """One generation in the loop."""

    key: str
    tokens: list[int]  # the prompt
    decoding: Decoding
    stats: GenerationStats
    on_done: Callable[[], None]
    started: float = field(default_factory=time.perf_counter)
    seq: int | None = None
    fed: int = 0  # prompt tokens already in the sequence
    next_token: int | None = None  # sampled, not yet evaluated
    draft: list[int] = field(default_factory=list)  # evaluated after next_token, unchosen
    drafter: ContextDrafter | None = None  # drafts from its context, while it decodes
    parked: Snapshot | None = None  # its state while it waits for room
    result: GenerationResult | None = None
    error: BaseException | None = None

    @property
    def prefilling(self) -> bool:
        return self.fed < len(self.tokens)


@dataclass
class _Slot:
    seq: int
    key: str | None = None  # the episode whose KV the sequence holds
    tokens: list[int] = field(default_factory=list)  # evaluated, in order
    job: Job | None = None
    used: float = 0.0  # last use, for LRU eviction


class BatchLoop:
    def __init__(
        self,
        backend: BatchBackend,
        *,
        slots: int,
        snapshots: SnapshotStore,
        counters: EngineCounters,
        model_lock: threading.Lock,
        prefill_chunk: int,
        reevaluate_below: int,
        max_tokens_per_step: int,
        context_window: int,
        name: str,
        drafting: DraftSettings | None = None,
        answers: AnswerMemory | None = None,
    ):
        self._backend = backend
        self._slots = [_Slot(i) for i in range(slots)]
        self._snapshots = snapshots
        self._counters = counters
        self._model_lock = model_lock
        self._prefill_chunk = max(1, prefill_chunk)
        self._reevaluate_below = reevaluate_below
        self._step_budget = max(slots + 1, max_tokens_per_step)
        self._context_window = context_window
        self._drafting = drafting  # None: one token per decoding job a step
        self._answers = answers  # other episodes' answers to draft from, and to add to
        self._cond = threading.Condition()
        self._lanes: OrderedDict[str, deque[Job]] = OrderedDict()  # waiting, by episode
        self._parked: deque[Job] = deque()  # preempted for room; they go first
        self._forgotten: set[str] = set()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name=f"{name} batch loop", daemon=True)
        self._thread.start()

    # -- called from other threads ---------------------------------------------------------

    @property
    def load(self) -> int:
        with self._cond:
            waiting = sum(len(lane) for lane in self._lanes.values()) + len(self._parked)
            return waiting + sum(1 for s in self._slots if s.job is not None)

    def resident_keys(self) -> list[str]:
        """Episodes whose KV state sits in a sequence now (tests, benchmarks)."""
        with self._cond:
            return [s.key for s in self._slots if s.key is not None]

    def submit(self, job: Job) -> None:
        with self._cond:
            if self._closing:
                raise EngineError("the engine is closed")
            self._lanes.setdefault(job.key, deque()).append(job)
            self._cond.notify()

    def forget(self, key: str | None) -> None:
        """Drop ``key``'s sequence (all sequences for None) at the loop's next turn."""
        with self._cond:
            for slot in self._slots:
                if key is None or slot.key == key:
                    slot.key = None  # never matched again; cleared by the loop
            self._forgotten.add(key if key is not None else NO_KEY)
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join()

    # -- the loop (its own thread) ---------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closing and not self._has_work():
                    self._cond.wait()
                if self._closing:
                    break
            with self._model_lock:
                try:
                    self._step()
                except Exception as exc:  # a failing model call ends the jobs it touched
                    log.exception("batched decode step failed")
                    self._fail_running(EngineError(f"batched generation failed: {exc}"))
        self._cancel_all()

    def _has_work(self) -> bool:
        return bool(self._lanes or self._parked) or any(s.job for s in self._slots)

    def _step(self) -> None:
        self._admit()
        running = [s for s in self._slots if s.job is not None]
        for slot in running:
            assert slot.job is not None
            if slot.job.decoding.should_stop(len(slot.tokens), self._context_window):
                self._finish(slot)
        entries, owners = self._plan()
        if not entries:
            return
        try:
            logits = self._backend.batch_decode(entries)
        except KVFull:
            for slot in owners:
                if slot.job is not None:
                    slot.job.draft = []  # never evaluated: drafted again next step
            self._make_room([s for s in owners if s.job is not None])
            return
        self._count_step(entries, owners)
        outputs = iter(logits)
        for entry, slot in zip(entries, owners, strict=True):
            job = slot.job
            assert job is not None
            slot.tokens.extend(entry.tokens)
            slot.used = time.monotonic()
            if job.next_token is not None:
                job.next_token = None
            else:
                job.fed += len(entry.tokens)
            if entry.logits:
                self._advance(slot, next(outputs))

    def _plan(self) -> tuple[list[BatchEntry], list[_Slot]]:
        """This step's tokens: every decoding job's next token (and its draft), then prompt
        chunks."""
        entries: list[BatchEntry] = []
        owners: list[_Slot] = []
        decoding = [s for s in self._slots if s.job is not None and s.job.next_token is not None]
        prefilling = any(s.job is not None and s.job.prefilling for s in self._slots)
        budget = self._step_budget - len(decoding)
        # Drafts take what is left after the next tokens and one prompt chunk.
        draft_budget = budget - (self._prefill_chunk if prefilling else 0)
        for slot in decoding:
            job = slot.job
            assert job is not None and job.next_token is not None
            job.draft = self._draft_for(job, len(slot.tokens), draft_budget)
            draft_budget -= len(job.draft)
            budget -= len(job.draft)
            tokens = [job.next_token, *job.draft]
            entries.append(BatchEntry(slot.seq, tokens, len(slot.tokens), len(tokens)))
            owners.append(slot)
        if decoding:
            budget = min(budget, self._prefill_chunk)
        for slot in self._slots:
            job = slot.job
            if budget <= 0 or job is None or not job.prefilling:
                continue
            chunk = job.tokens[job.fed : job.fed + budget]
            budget -= len(chunk)
            last = job.fed + len(chunk) == len(job.tokens)
            entries.append(BatchEntry(slot.seq, chunk, len(slot.tokens), 1 if last else 0))
            owners.append(slot)
        return entries, owners

    def _draft_for(self, job: Job, n_live: int, budget: int) -> list[int]:
        """What may follow ``job``'s next token (evaluated at position ``n_live``), from its
        own context: nothing without drafting, for a job that samples, or without room."""
        if self._drafting is None or budget <= 0 or not job.decoding.greedy:
            return []
        if job.drafter is None:  # its first decoding step: the prompt and the chosen token
            answers = self._answers.tokens() if self._answers is not None else None
            job.drafter = ContextDrafter([*job.tokens, *job.decoding.out], self._drafting, answers)
        room = min(job.decoding.draft_room(n_live, self._context_window), budget)
        return job.decoding.usable_draft(job.drafter.draft(room)) if room > 0 else []

    def _count_step(self, entries: list[BatchEntry], owners: list[_Slot]) -> None:
        extra = self._counters.extra
        sequences = len(entries)
        extra["decode_steps"] = extra.get("decode_steps", 0) + 1
        extra["step_sequences"] = extra.get("step_sequences", 0) + sequences
        if sequences > 1:
            extra["batched_steps"] = extra.get("batched_steps", 0) + 1
        extra["max_step_sequences"] = max(extra.get("max_step_sequences", 0), sequences)
        decoded = prefill = 0
        for entry, slot in zip(entries, owners, strict=True):
            if slot.job is not None and slot.job.next_token is not None:
                decoded += len(entry.tokens)
            else:
                prefill += len(entry.tokens)
        if decoded and prefill:  # how long a new prompt held up running episodes
            key = "max_prefill_beside_decoding"
            extra[key] = max(extra.get(key, 0), prefill)

    def _advance(self, slot: _Slot, rows: np.ndarray) -> None:
        """Choose the job's next tokens from the logits just evaluated: one row after a
        prompt's last chunk; after a decoding step, the row of its token and one for each
        drafted token after it (``Decoding.take_checked``). A draft's rejected rest leaves
        the sequence; the token chosen after the taken part is the next to evaluate."""
        job = slot.job
        assert job is not None
        draft, job.draft = job.draft, []
        live = len(slot.tokens) - len(draft)  # positions of the prompt and chosen tokens
        accepted, token = job.decoding.take_checked(
            rows, draft, live, self._context_window, job.drafter
        )
        live += accepted
        if draft and job.drafter is not None:
            job.drafter.feedback(len(draft), accepted)
        if live < len(slot.tokens):
            del slot.tokens[live:]
            if not self._backend.seq_truncate(slot.seq, live):
                self._fail(slot, EngineError("could not drop a rejected draft from the KV memory"))
                return
        if token is None:
            self._finish(slot)
        else:
            job.next_token = token

    # -- admission, eviction, room ---------------------------------------------------------

    def _admit(self) -> None:
        self._clear_forgotten()
        while True:
            with self._cond:
                job = self._next_waiting()
                if job is None:
                    return
                slot = self._slot_for(job.key)
                if slot is None:
                    self._put_back(job)
                    return
            if job.decoding.control.cancelled.is_set():
                self._complete(job, GenerationResult(text="", finish_reason="cancelled"))
                continue
            self._seat(job, slot)

    def _next_waiting(self) -> Job | None:
        if self._parked:
            return self._parked.popleft()
        # One generation per episode at a time: an episode already running waits its turn.
        running = {s.job.key for s in self._slots if s.job is not None} - {NO_KEY}
        key = next((k for k in self._lanes if k not in running), None)
        if key is None:
            return None
        lane = self._lanes[key]
        job = lane.popleft()
        del self._lanes[key]  # the served lane goes to the back of the round
        if lane:
            self._lanes[key] = lane
        return job

    def _put_back(self, job: Job) -> None:
        if job.parked is not None or job.seq is not None:
            self._parked.appendleft(job)
        else:
            self._lanes[job.key] = deque([job, *self._lanes.pop(job.key, ())])
            self._lanes.move_to_end(job.key, last=False)

    def _slot_for(self, key: str) -> _Slot | None:
        """The episode's own sequence, a free one, or the least recently used idle one."""
        idle = [s for s in self._slots if s.job is None]
        own = [s for s in idle if s.key == key]  # no-key requests share theirs, like a live state
        if own:
            return own[0]
        free = [s for s in idle if s.key is None]
        if free:
            return free[0]
        return min(idle, key=lambda s: s.used) if idle else None

    def _seat(self, job: Job, slot: _Slot) -> None:
        """Give ``slot`` to ``job`` with as much of its prompt's KV as can be had."""
        if slot.key not in (None, job.key):
            self._save_out(slot)
        if job.parked is not None:  # resuming after it was parked for room
            self._load_into(slot, job.parked)
            job.parked = None
            slot.key, slot.job = job.key, job
            return
        if slot.key is None and not self._cheaper_to_copy(job) and self._snapshots_take(job, slot):
            job.stats.restored_snapshot = True
        elif slot.key is None:
            self._copy_prefix(job, slot)
        slot.key, slot.job = job.key, job
        keep = min(common_prefix(slot.tokens, job.tokens), len(job.tokens) - 1)
        if keep < len(slot.tokens) and not self._backend.seq_truncate(slot.seq, keep):
            self._backend.seq_truncate(slot.seq, 0)
            keep = 0
        del slot.tokens[keep:]
        job.seq, job.fed = slot.seq, keep
        job.stats.reused_prompt_tokens = keep
        job.stats.evaluated_prompt_tokens = len(job.tokens) - keep

    def _cheaper_to_copy(self, job: Job) -> bool:
        """A restored snapshot takes fresh KV cells for its whole length (its prefix is no
        longer shared with the sequences it was copied from); a copied prefix shares them.
        When a resident sequence shares all but a few of the episode's tokens, copying and
        evaluating the rest keeps the cells for the running episodes."""
        shared = max((common_prefix(s.tokens, job.tokens) for s in self._slots), default=0)
        if len(job.tokens) - shared < self._reevaluate_below:
            self._snapshots.drop(job.key)
            return True
        return False

    def _snapshots_take(self, job: Job, slot: _Slot) -> bool:
        if job.key == NO_KEY:
            return False
        snapshot = self._snapshots.take(job.key)
        if snapshot is None:
            return False
        if self._load_into(slot, snapshot):
            self._counters.snapshot_restores += 1
            return True
        log.warning("could not restore the KV state of %r; re-evaluating", job.key)
        return False

    def _load_into(self, slot: _Slot, snapshot: Snapshot) -> bool:
        """Restore ``snapshot`` into ``slot``. A restored state needs free cells in one run
        (its prefix is no longer shared), so idle sequences are saved out until it fits."""
        self._clear(slot)
        while not self._backend.seq_restore(slot.seq, snapshot):
            self._clear(slot)
            idle = [s for s in self._slots if s is not slot and s.job is None and s.tokens]
            if not idle:
                return False
            self._save_out(min(idle, key=lambda s: s.used))
        slot.tokens = list(snapshot.tokens)
        return True

    def _copy_prefix(self, job: Job, slot: _Slot) -> None:
        """Start a new episode from the resident sequence sharing most of its prompt."""
        self._clear(slot)
        best, n = None, 0
        for other in self._slots:
            if other is slot:
                continue
            shared = common_prefix(other.tokens, job.tokens)
            if shared > n:
                best, n = other, shared
        if best is not None:
            n = min(n, len(job.tokens) - 1)
            self._backend.seq_copy(best.seq, slot.seq, n)
            slot.tokens = job.tokens[:n]

    def _save_out(self, slot: _Slot) -> None:
        """Move an idle episode's KV into the snapshot store and empty its sequence."""
        if slot.key is not None and slot.key != NO_KEY and slot.tokens:
            snapshot = self._backend.seq_save(slot.seq, slot.tokens)
            if snapshot is not None:
                self._snapshots.put(slot.key, snapshot)
        self._clear(slot)

    def _clear(self, slot: _Slot) -> None:
        if slot.tokens:
            self._backend.seq_truncate(slot.seq, 0)
        slot.tokens = []
        slot.key = None if slot.job is None else slot.key

    def _clear_forgotten(self) -> None:
        with self._cond:
            forgotten, self._forgotten = self._forgotten, set()
        if not forgotten:
            return
        for slot in self._slots:
            if slot.key is None and slot.job is None and slot.tokens:
                self._clear(slot)
            elif slot.job is not None and (slot.job.key in forgotten or NO_KEY in forgotten):
                slot.key = None  # cleared when its job finishes

    def _make_room(self, running: list[_Slot]) -> None:
        """The KV cells ran out: save out an idle sequence, or park the newest job."""
        idle = [s for s in self._slots if s.job is None and s.tokens]
        if idle:
            self._save_out(min(idle, key=lambda s: s.used))
            return
        if len(running) <= 1:
            for slot in running:
                self._fail(slot, EngineError("the KV memory is too small for this prompt"))
            return
        newest = max(running, key=lambda s: s.job.started if s.job else 0.0)
        job = newest.job
        assert job is not None
        snapshot = self._backend.seq_save(newest.seq, newest.tokens)
        self._clear(newest)
        newest.job, newest.key = None, None
        if snapshot is None:  # it starts over from its prompt
            job.fed, job.next_token, job.drafter = 0, None, None
            job.decoding.restart()
        job.parked = snapshot
        self._counters.extra["parked_jobs"] = self._counters.extra.get("parked_jobs", 0) + 1
        with self._cond:
            self._parked.append(job)

    # -- leaving ---------------------------------------------------------------------------

    def _finish(self, slot: _Slot) -> None:
        job = slot.job
        assert job is not None
        slot.job = None
        if slot.key is None:  # forgotten while it ran: keep nothing
            self._clear(slot)
        text, finish, n_out = job.decoding.result()
        if self._drafting is not None and self._answers is not None:
            self._answers.remember(job.tokens, job.decoding.out)
        if job.drafter is not None:
            self._counters.add_extra(
                draft_rounds=job.drafter.drafts,
                draft_tokens=job.drafter.drafted,
                draft_accepted=job.drafter.accepted,
            )
        job.stats.completion_tokens = n_out
        job.stats.seconds = round(time.perf_counter() - job.started, 4)
        self._counters.add_generation(job.stats)
        self._complete(job, GenerationResult(text=text, finish_reason=finish, stats=job.stats))

    def _fail(self, slot: _Slot, error: BaseException) -> None:
        job = slot.job
        slot.job = None
        self._clear(slot)
        if job is not None:
            job.error = error
            job.decoding.close()
            job.on_done()

    def _fail_running(self, error: BaseException) -> None:
        for slot in self._slots:
            if slot.job is not None:
                self._fail(slot, error)

    def _complete(self, job: Job, result: GenerationResult) -> None:
        job.decoding.close()
        job.result = result
        job.on_done()

    def _cancel_all(self) -> None:
        with self._cond:
            waiting = [*self._parked, *(j for lane in self._lanes.values() for j in lane)]
            self._parked.clear()
            self._lanes.clear()
        for job in [*waiting, *(s.job for s in self._slots if s.job is not None)]:
            self._complete(job, GenerationResult(text="", finish_reason="cancelled"))
        for slot in self._slots:
            slot.job = None


async def run_job(loop: BatchLoop, make_job: Callable[[Callable[[], None]], Job]) -> Any:
    """Submit a job and wait for it on the event loop without holding a thread.

    Cancelling the caller sets the job's cancel flag; the loop drops it at its next step.
    """
    done = anyio.Event()
    token = anyio.lowlevel.current_token()

    def on_done() -> None:  # called in the loop's thread
        call_soon_in(token, done.set)

    job = make_job(on_done)
    loop.submit(job)
    try:
        await done.wait()
    except BaseException:
        job.decoding.control.cancel()
        raise
    if job.error is not None:
        raise job.error
    assert job.result is not None
    return job.result


def call_soon_in(token: anyio.lowlevel.EventLoopToken, func: Callable[[], object]) -> None:
    """Have ``func`` run in the event loop of ``token`` soon, without waiting for it.

    The batch loop's thread holds the model lock while it ends a job: waiting there for an
    event loop (``anyio.from_thread.run_sync``) would stall every episode behind one loop,
    and block forever on a loop that stopped without running the call. A loop that is gone
    has nobody waiting, so the call is dropped.
    """
    native: Any = token.native_token
    with contextlib.suppress(RuntimeError):  # closed (asyncio) or finished (trio)
        if hasattr(native, "call_soon_threadsafe"):  # an asyncio event loop
            native.call_soon_threadsafe(func)
        else:  # a trio token
            native.run_sync_soon(func)

"""Speculative decoding from the context (--speculative on) against one token at a time.

Every row runs the same calls through llama.cpp engines side by side in one run, modes
interleaved call by call (so load changes hit all alike):

- off:          one token per model call (today's serving default)
- on:           drafts from the episode's own context, checked in steps of the sizes the
                build computes alike (llama.cpp: ``LlamaCppEngine._draft_span``, measured
                at load: 2 to 7 for the default model as pip builds llama.cpp here, a
                guess where no draft was found; 1 to k where a build computes a step of
                one as it computes several)
- on, guesses:  the same steps with no drafts from the context (only the guesses that
                fill a step to 2 positions where the span starts at 2 and the tail was
                seen before): what checking
                costs by itself, and the reference "on" must answer as, byte for byte
                (drafts change no answer); where the span starts at 1, off's steps

Rows:
- copy-heavy calls, one episode each: a ``cat`` of a 40-line file shown in an earlier
  observation, ``ls -la`` after earlier listings, a page snapshot after a click;
- free-form calls: answers not in the context (a poem, a computed value, an error);
- 16 concurrent episodes, each one copy-heavy and one free-form call (the single-sequence
  path: episodes take turns, snapshots between them; ``batch_slots`` 1);
- a 30-call session: one episode whose history grows, copies and free-form alternating;
- rollouts: episodes of one session one after another (an RL task rolled out again, a test
  suite run again), timed from the second: calls met before are drafted from the earlier
  episodes' answers (``AnswerMemory``). Here "on, own context" drafts from the episode's
  own context only, what "on" did before the memory;
- free-form calls answered before in another episode (the memory's case: nothing to copy
  in the episode's own context).

Every row starts with no KV state kept and the answer memory empty, and the first two rows
empty it before every call (so repeats measure the context alone); the concurrent row's
episodes share calls (episode i and i + 3 make the same ones), as rollouts do.

``--batch-slots N`` (N > 1) runs every row through the batch loop (episodes share decode
steps; batching.py), off against on only: the batch loop pads no step with guesses, and
its answers depend on which episodes share a step, so "on" is compared with "off".

For each: seconds per call (median), tokens/s (completion tokens over the engine's
generation seconds, all calls; the concurrent row: over the wall time of all episodes),
the acceptance rate (drafted tokens the model chose too, and guesses), whether ``on``
wrote the same text as ``on, guesses`` for every call (it must), and how many of its
texts equal ``off``'s (all of them where the span starts at 1; otherwise other numerics,
and near-ties may go the other way).
Targets (issue 47): copy-heavy >= 1.5x faster, free-form no slower than 5%.

docs/engines.md has the table. Run:

    python benchmarks/speculative.py [--model smollm2-135m|PATH] [--lora FILE.gguf]
        [--threads 1] [--repeats 3] [--max-tokens 400] [--episodes 16] [--session 30]
        [--engine transformers] [--batch-slots 16]

``--engine transformers`` runs off and on on the transformers engine (the GGUF dequantized
to float32; no LoRA there): the same loop, its own numerics, so "on" is held to "off".
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from aw_mcp.engines.base import ChatMessage, GenerationRequest, GenerationResult
from aw_mcp.engines.drafting import DraftSettings
from aw_mcp.engines.llama_cpp import LlamaCppEngine, LlamaCppOptions
from aw_mcp.testing import SMALL_MODEL

MODES: dict[str, dict[str, Any]] = {
    "off": {"speculative": "off"},
    "on": {"speculative": "on"},
    "on, guesses": {"speculative": "on", "drafting": DraftSettings(from_context=False)},
    "on, own context": {"speculative": "on", "drafting": DraftSettings(memory_tokens=0)},
}
ROLLOUT_ONLY = {"on, own context"}  # a mode only rows 5 and 6 run
TRANSFORMERS_MODES: dict[str, dict[str, Any]] = {
    "off": {"speculative": "off"},
    "on": {"speculative": "on"},
}
SYSTEM = "You are a Linux terminal. Answer each command with its exact output, nothing else."
FILE = "\n".join(
    f"{i:02d}  total_{i} = compute(alpha_{i}, beta_{i % 5}, gamma='{'xyz'[i % 3]}')"
    for i in range(40)
)
NAMES = ["README.md", "app.py", "config.yaml", "main.go", "notes.txt", "setup.cfg", "tests"]
LISTING = "total 28\n" + "\n".join(
    f"-rw-r--r-- 1 user user {100 + 37 * i:5d} Nov 30 12:{i:02d} {name}"
    for i, name in enumerate(NAMES)
)
SNAPSHOT = (
    "```yaml\n"
    + "\n".join(
        f'- link "{name}" [ref=e{i + 3}]:\n  - /url: /files/{name}' for i, name in enumerate(NAMES)
    )
    + '\n- button "Upload" [ref=e20]\n```'
)


def _messages(*turns: str) -> list[ChatMessage]:
    return [
        ChatMessage(role="system", content=SYSTEM),
        *(
            ChatMessage(role="user" if i % 2 == 0 else "assistant", content=t)
            for i, t in enumerate(turns)
        ),
    ]


COPY_HEAVY = {
    "cat of a 40-line file": ["$ cat -n app.py", FILE, "$ echo done", "done", "$ cat -n app.py"],
    "ls -la after listings": ["$ ls -la", LISTING, "$ touch new.txt", "", "$ ls -la"],
    "snapshot after a click": ["browser_navigate /files", SNAPSHOT, "browser_click e20"],
}
FREE_FORM = {
    "a poem": ["$ echo write four lines about the sea"],
    "a computed value": ["$ python3 -c 'print(sum(i * i for i in range(40)))'"],
    "an error": ["$ gcc main.c -o main"],
}


@dataclass
class Tally:
    seconds: list[float] = field(default_factory=list)
    tokens: int = 0
    generation_seconds: float = 0.0
    texts: list[str] = field(default_factory=list)

    def add(self, result: GenerationResult, seconds: float) -> None:
        self.seconds.append(seconds)
        self.tokens += result.stats.completion_tokens
        self.generation_seconds += result.stats.seconds
        self.texts.append(result.text)

    @property
    def per_call(self) -> float:
        return statistics.median(self.seconds) if self.seconds else 0.0

    @property
    def tok_s(self) -> float:
        return self.tokens / self.generation_seconds if self.generation_seconds else 0.0


DRAFT_COUNTERS = ("draft_tokens", "draft_accepted", "draft_guesses", "draft_guesses_taken")


def _drafts(engine: LlamaCppEngine) -> tuple[int, ...]:
    extra = engine.counters.extra
    return tuple(extra.get(name, 0) for name in DRAFT_COUNTERS)


async def _call(engine: LlamaCppEngine, turns: list[str], key: str, max_tokens: int, tally: Tally):
    request = GenerationRequest(messages=_messages(*turns), max_tokens=max_tokens, cache_key=key)
    started = time.perf_counter()
    result = await engine.generate(request)
    tally.add(result, time.perf_counter() - started)
    return result


def _fresh(engine) -> None:
    """No episode's KV state kept, no earlier answer to draft from: every row starts so."""
    engine.forget_all()
    engine.answers.clear()


async def row_calls(
    engines, calls: dict[str, list[str]], repeats: int, max_tokens: int, again: bool = False
):
    """Each call ``repeats`` times per mode, modes interleaved; its prompt evaluated first
    (a one-token call, not counted), so what is timed is the answer, as in an episode whose
    history is already in the KV cache. ``again``: answered first in another episode (not
    timed), as in a rollout run again; otherwise with the answer memory empty."""
    tallies = {mode: Tally() for mode in engines}
    for r in range(repeats):
        for name, turns in calls.items():
            for mode, engine in engines.items():
                _fresh(engine)
                if again:
                    await _call(engine, turns, f"{name}-{r}-before", max_tokens, Tally())
                await _call(engine, turns, f"{name}-{r}", 1, Tally())
                await _call(engine, turns, f"{name}-{r}", max_tokens, tallies[mode])
    return tallies


async def row_concurrent(engines, episodes: int, max_tokens: int):
    """``episodes`` episodes at once per mode, one copy-heavy then one free-form call each."""
    tallies = {mode: Tally() for mode in engines}
    copies, frees = list(COPY_HEAVY.values()), list(FREE_FORM.values())
    for mode, engine in engines.items():
        _fresh(engine)

        async def episode(i: int, engine=engine, tally=tallies[mode]) -> None:
            turns = list(copies[i % len(copies)])
            answer = await _call(engine, turns, f"ep{i}", max_tokens, tally)
            turns += [answer.text, *frees[i % len(frees)]]
            await _call(engine, turns, f"ep{i}", max_tokens, tally)

        started = time.perf_counter()
        async with anyio.create_task_group() as group:
            for i in range(episodes):
                group.start_soon(episode, i)
        tallies[mode].generation_seconds = time.perf_counter() - started  # wall, all episodes
    return tallies


SESSION_SCRIPT = [
    ["$ cat -n app.py"],
    ["$ ls -la"],
    ["$ echo write four lines about the sea"],
    ["$ head -n 12 app.py"],
    ["$ python3 -c 'print(sum(i * i for i in range(40)))'"],
]


async def _session(engine, key: str, calls: int, max_tokens: int, tally: Tally) -> None:
    """One episode of ``calls`` calls, its history growing: copies and free-form in turn."""
    history = ["$ cat -n app.py", FILE, "$ ls -la", LISTING]
    for i in range(calls):
        turns = [*history, *SESSION_SCRIPT[i % len(SESSION_SCRIPT)]]
        answer = await _call(engine, turns, key, max_tokens, tally)
        history = [*turns, answer.text]


async def row_session(engines, calls: int, max_tokens: int):
    """One episode of ``calls`` calls (``_session``)."""
    tallies = {mode: Tally() for mode in engines}
    for mode, engine in engines.items():
        _fresh(engine)
        await _session(engine, "session", calls, max_tokens, tallies[mode])
    return tallies


async def row_rollouts(engines, rollouts: int, calls: int, max_tokens: int):
    """``rollouts`` episodes of one ``calls``-call session in turn; the calls of every
    episode after the first are timed."""
    tallies = {mode: Tally() for mode in engines}
    for mode, engine in engines.items():
        _fresh(engine)
        for rollout in range(rollouts):
            tally = tallies[mode] if rollout else Tally()
            await _session(engine, f"rollout-{rollout}", calls, max_tokens, tally)
    return tallies


def report(title: str, tallies: dict[str, Tally], drafts: tuple[int, ...], target: str) -> None:
    off, on = tallies["off"], tallies["on"]
    speedup = on.tok_s / off.tok_s if off.tok_s else 0.0
    drafted, accepted, guessed, guesses_taken = drafts
    reference = tallies.get("on, guesses", off)  # transformers: "on" is held to "off"
    same = "yes" if sorted(on.texts) == sorted(reference.texts) else "NO"
    as_off = sum((Counter(on.texts) & Counter(off.texts)).values())  # any order: concurrent
    print(
        f"\n{title}  (on/off tokens/s: {speedup:.2f}x; target {target}; same text as "
        f"the reference: {same}; as off: {as_off}/{len(on.texts)})"
    )
    print(
        f"  acceptance: {accepted}/{drafted} drafted tokens"
        + (f" ({accepted / drafted:.0%})" if drafted else "")
        + f", {guesses_taken}/{guessed} guesses"
    )
    for mode, tally in tallies.items():
        print(
            f"  {mode:15} {tally.per_call:7.2f} s/call  {tally.tok_s:7.1f} tok/s  "
            f"{tally.tokens:6d} tokens in {len(tally.seconds)} calls"
        )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=SMALL_MODEL, help="a catalogue name or a GGUF")
    parser.add_argument("--lora", type=Path, action="append", default=[])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=400)
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--session", type=int, default=30)
    parser.add_argument("--rollouts", type=int, default=3, help="episodes in the rollouts row")
    parser.add_argument("--rollout-calls", type=int, default=5, help="calls per rollout")
    parser.add_argument("--calls", type=int, help="smoke run: this many of each kind of call")
    parser.add_argument("--engine", choices=["llama-cpp", "transformers"], default="llama-cpp")
    parser.add_argument("--rows", help="comma-separated row numbers to run (1-6; default all)")
    parser.add_argument(
        "--batch-slots", type=int, default=1, help="above 1: every row through the batch loop"
    )
    args = parser.parse_args()
    copy_heavy, free_form = COPY_HEAVY, FREE_FORM
    if args.calls:
        copy_heavy = dict(list(COPY_HEAVY.items())[: args.calls])
        free_form = dict(list(FREE_FORM.items())[: args.calls])

    engines: dict[str, Any]
    if args.engine == "transformers":
        from aw_mcp.engines.transformers_engine import TransformersEngine, TransformersOptions

        engines = {
            mode: TransformersEngine(
                TransformersOptions(model=args.model, n_ctx=8192, threads=args.threads, **options)
            )
            for mode, options in TRANSFORMERS_MODES.items()
        }
    else:
        batched = args.batch_slots > 1
        engines = {
            mode: LlamaCppEngine(
                LlamaCppOptions(
                    model=args.model,
                    n_ctx=32768 if batched else 8192,  # batched: every episode's cells
                    threads=args.threads,
                    lora=args.lora,
                    batch_slots=args.batch_slots,
                    **options,
                )
            )
            for mode, options in MODES.items()
            if not (batched and mode == "on, guesses")
        }
    picked = {int(n) for n in args.rows.split(",")} if args.rows else set(range(1, 7))
    if not picked & {5, 6}:
        engines = {mode: e for mode, e in engines.items() if mode not in ROLLOUT_ONLY}
    common = {mode: e for mode, e in engines.items() if mode not in ROLLOUT_ONLY}
    for engine in engines.values():
        engine.load_now()
    span = engines["on"]._draft_span() if engines["on"]._checks_drafts() else None
    print(
        f"{args.engine}: model {args.model}, {args.threads} thread(s), max_tokens "
        f"{args.max_tokens}, batch slots {args.batch_slots}"
        + (f", draft checks of {span[0]} to {span[1]} positions" if span else "")
    )

    rows = [
        (
            "copy-heavy calls",
            lambda: row_calls(common, copy_heavy, args.repeats, args.max_tokens),
            ">= 1.5x",
        ),
        (
            "free-form calls",
            lambda: row_calls(common, free_form, args.repeats, args.max_tokens),
            ">= 0.95x",
        ),
        (
            f"{args.episodes} concurrent episodes",
            lambda: row_concurrent(common, args.episodes, args.max_tokens),
            "-",
        ),
        (
            f"a {args.session}-call session",
            lambda: row_session(common, args.session, args.max_tokens),
            "-",
        ),
        (
            f"{args.rollouts} rollouts of a {args.rollout_calls}-call session, from the second",
            lambda: row_rollouts(engines, args.rollouts, args.rollout_calls, args.max_tokens),
            "-",
        ),
        (
            "free-form calls answered before in another episode",
            lambda: row_calls(engines, free_form, args.repeats, args.max_tokens, again=True),
            "-",
        ),
    ]
    for number, (title, run, target) in enumerate(rows, start=1):
        if number not in picked:
            continue
        before = _drafts(engines["on"])
        tallies = await run()
        after = _drafts(engines["on"])
        report(title, tallies, tuple(a - b for a, b in zip(after, before, strict=True)), target)
    for engine in engines.values():
        await engine.aclose()


if __name__ == "__main__":
    anyio.run(main)

"""The worlds' own loop rules: what each costs per decoded token, beside the default rule.

Feeds real answers token by token (Qwen2.5-Coder-0.5B's vocabulary, loaded without weights)
through ``LoopGuard.choose`` as a decoding step would, the answer's own next token being the
likeliest of the whole vocabulary, and times the steps. Each repeat times every answer with
the default rule alone, then with the default rule plus a world's rule (``generation.loop_guard``
in its domain file); the best repeat of each counts, since other work only slows a run:

- search: its phrase rule and unique result URLs, on the real fetch server's pages
  (``data/mcp/fetch``: what the search world's fetch tool copies)
- web: its digit-masked rule and unique refs, on real Playwright MCP snapshots
  (``data/web``)

    python benchmarks/loop_rules.py [--answers 20] [--repeats 2] [--model NAME|PATH.gguf]

A decoded token of the 0.5B model took 96 ms on this machine (one thread, llama-cpp-python's
own eval and greedy sample, 100 tokens, 2026-12-05), so what matters is a rule's cost against
that, not against the default rule.

Measured 2026-12-05 on the 2-core build machine (one core free), 20 answers a world, best
of 2 (a step includes the argmax over the 151,936-token vocabulary, as a greedy sampler's):

    search  13244 steps (longest answer 1334 tokens): default 281.5 us/step,
            with the world's rule  324.3 us/step (1.15x)
    web     43522 steps (longest answer 2502 tokens): default 320.5 us/step,
            with the world's rule 1837.5 us/step (5.73x)

The search world's rule adds 0.04 ms a step, under 0.1% of a model step: its phrases are
counted as they come, a step reading only the new token. The web world's digit-masked rule
decodes its whole tail (up to 4,096 tokens) each step, 1.5 ms more, about 2% of a model step.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from aw_mcp.domain.loader import load_domain  # noqa: E402
from aw_mcp.engines.loop_guard import LoopGuard, LoopGuardSettings  # noqa: E402
from aw_mcp.models.fetch import resolve_model  # noqa: E402
from aw_mcp.records.reader import load_record_dir  # noqa: E402


def real_answers(folder: str, tool: str, count: int) -> list[str]:
    """The longest ``count`` real answers of ``tool`` under ``data/<folder>``."""
    answers = [
        record.observation
        for episode in load_record_dir(REPO / "data" / folder)
        for record in episode.records
        if record.tool == tool
    ]
    return sorted(answers, key=len, reverse=True)[:count]


def seconds(
    tokens: list[int], rule: LoopGuardSettings | None, detokenize, vocab_size: int
) -> float:
    """The time ``LoopGuard.choose`` takes over the whole answer, a step a token."""
    guard = LoopGuard(detokenize, rule)
    logits = np.zeros(vocab_size, dtype=np.float32)  # a sampler's argmax is in every step
    written: list[int] = []  # the answer so far, grown in place as the engines grow theirs
    start = time.perf_counter()
    for token in tokens:
        logits[token] = 1.0
        guard.choose(logits, written, lambda row: int(np.argmax(row)))
        logits[token] = 0.0
        written.append(token)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--answers", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    args = parser.parse_args()

    import llama_cpp

    vocab = llama_cpp.Llama(
        model_path=str(resolve_model(args.model)), vocab_only=True, verbose=False
    )

    def detokenize(tokens) -> str:
        return vocab.detokenize(list(tokens)).decode("utf-8", errors="replace")

    worlds = {
        "search": real_answers("mcp/fetch", "fetch", args.answers),
        "web": real_answers("web", "browser_snapshot", args.answers),
    }
    print(f"{args.model}'s vocabulary, {args.answers} answers a world, best of {args.repeats}")
    for world, answers in worlds.items():
        rule = load_domain(world).generation.loop_guard
        encoded = [vocab.tokenize(a.encode(), add_bos=False, special=False) for a in answers]
        steps = sum(len(t) for t in encoded)
        modes: dict[str, LoopGuardSettings | None] = {"default": None, "with rule": rule}
        best = dict.fromkeys(modes, float("inf"))
        for _ in range(args.repeats):
            for mode, mode_rule in modes.items():
                total = sum(seconds(t, mode_rule, detokenize, vocab.n_vocab()) for t in encoded)
                best[mode] = min(best[mode], total / steps)
        longest = max(len(t) for t in encoded)
        default, with_rule = best.values()
        print(
            f"{world:7} {steps:6} steps (longest answer {longest} tokens): "
            f"default {default * 1e6:7.1f} us/step, with the world's rule "
            f"{with_rule * 1e6:7.1f} us/step ({with_rule / default:.2f}x)"
        )


if __name__ == "__main__":
    main()

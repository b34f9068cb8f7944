"""What one llama.cpp decode step costs as more sequences share it: the bound of batching.

    python benchmarks/batch_decode.py [--threads 1] [--context 738] [--steps 20]

The embedded model's batched context (``LlamaSequences``, as the engine builds it with
``--batch-slots 16``): one sequence holds a shared prefix of ``--context`` tokens (the small
profile's Terminal prompt is 738), copied to 16 sequences that each add 200 tokens of their
own, like episodes. Then decode steps of B = 1, 2, 4, 8, 16 sequences (one token each) are
timed, and a prompt chunk of 256 tokens for comparison. Once for the embedded Q4_1 file and
once for its q8_0 conversion (``--requantize q8_0``). Total tok/s at B=16 over B=1 is the most
that batching can gain on this machine; row 1 of throughput.py also pays each call's prompt.
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src")]

from aw_mcp.engines.batching import BatchEntry  # noqa: E402
from aw_mcp.engines.llama_cpp import LlamaSequences  # noqa: E402
from aw_mcp.models.requantize import requantized  # noqa: E402
from aw_mcp.testing import small_model_path  # noqa: E402

SEQUENCES = 16
OWN_TOKENS = 200
BATCHES = (1, 2, 4, 8, 16)


def measure(model: Path, threads: int, context: int, steps: int) -> dict[str, float]:
    import llama_cpp

    llm = llama_cpp.Llama(
        model_path=str(model),
        n_ctx=512,
        n_threads=threads,
        n_threads_batch=threads,
        n_batch=512,
        verbose=False,
    )
    seqs = LlamaSequences(llm, 16384, SEQUENCES, 512)
    try:
        prefix = [100 + i % 1000 for i in range(context)]
        started = time.perf_counter()
        for at in range(0, context, 256):
            chunk = prefix[at : at + 256]
            seqs.batch_decode([BatchEntry(0, chunk, at, int(at + len(chunk) == context))])
        results = {"prompt tok/s": context / (time.perf_counter() - started)}
        for seq in range(1, SEQUENCES):
            seqs.seq_copy(0, seq, context)
        for seq in range(SEQUENCES):
            seqs.batch_decode([BatchEntry(seq, [500 + seq] * OWN_TOKENS, context, 1)])
        end = context + OWN_TOKENS
        for batch in BATCHES:
            started = time.perf_counter()
            for k in range(steps):
                seqs.batch_decode([BatchEntry(s, [7], end + k, 1) for s in range(batch)])
            step = (time.perf_counter() - started) / steps
            results[f"B={batch} ms/step"] = step * 1000
            results[f"B={batch} tok/s"] = batch / step
            for seq in range(batch):
                seqs.seq_truncate(seq, end)
        return results
    finally:
        seqs.close()
        llm.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--context", type=int, default=738, help="shared prefix tokens")
    parser.add_argument("--steps", type=int, default=20, help="decode steps timed per B")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        models = {
            "Q4_1 (embedded)": small_model_path(),
            "q8_0 (--requantize)": requantized(small_model_path(), "q8_0", Path(folder)),
        }
        table = {
            name: measure(path, args.threads, args.context, args.steps)
            for name, path in models.items()
        }
    print(
        f"\n{platform.processor() or platform.machine()}, {args.threads} thread(s), shared prefix "
        f"{args.context} + {OWN_TOKENS} own tokens per sequence, {SEQUENCES} sequences\n"
    )
    names = list(table)
    print("| measure | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for key in table[names[0]]:
        print(f"| {key} | " + " | ".join(f"{table[n][key]:.1f}" for n in names) + " |")
    for name in names:
        gain = table[name][f"B={BATCHES[-1]} tok/s"] / table[name]["B=1 tok/s"]
        print(f"\n{name}: B={BATCHES[-1]} decodes {gain:.2f}x the tokens/s of B=1")


if __name__ == "__main__":
    main()

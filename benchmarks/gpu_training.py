"""`aw-mcp train` on a GPU against the CPU: the same training sequences, step time and loss.

Two parts, so that the device need not tokenize (tokenizing reads the GGUF's vocabulary
through llama-cpp-python, which a GPU machine may lack):

    # where aw-mcp is installed: render record dirs into training sequences, as `aw-mcp
    # train` does, and write them to one JSON file
    python benchmarks/gpu_training.py prepare data/terminal/varied --out seqs.json \\
        [--model smollm2-135m] [--max-tokens 2048]
    # on each device: train on those sequences, print the step times and losses, and write
    # the adapter (the same export `aw-mcp train` writes)
    python benchmarks/gpu_training.py run seqs.json --base FILE.gguf --device cuda \\
        [--steps 40] [--out DIR]

`run` needs torch, transformers, peft and gguf, not llama-cpp-python. It reports the median
step time after the first (which includes CUDA's warm-up), the training loss of the first and
last steps and the validation loss before and after; the adapter's GGUF lands in --out.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path

from aw_mcp.training.examples import TrainingExample
from aw_mcp.training.gguf_adapter import AdapterMetadata
from aw_mcp.training.trainer import Trainer, TrainSettings, batches_by_length


def prepare(args: argparse.Namespace) -> int:
    """Render ``args.records`` as `aw-mcp train` does and write the sequences to JSON."""
    from aw_mcp.training.examples import shared_prefix_length, split_validation
    from aw_mcp.training.gguf_adapter import base_architecture
    from aw_mcp.training.job import TrainJob, build_training_set

    job = TrainJob(
        record_dirs=args.records,
        out=args.out.parent,
        simulator=args.simulator,
        profile=args.profile,
        model=args.model,
        max_tokens=args.max_tokens,
        val_fraction=args.val_fraction,
    )
    found = build_training_set(job)
    train, validation = split_validation(found.examples, job.val_fraction, 0)
    # The adapter's metadata but for the model's shape, which `run` reads from the model.
    meta = {
        "alpha": args.alpha,
        "profile": job.profile,
        "base_model": found.base.name,
        "domains": found.domains,
        "architecture": base_architecture(found.base),
    }
    args.out.write_text(
        json.dumps(
            {
                "prefix": shared_prefix_length(found.examples),
                "meta": meta,
                "train": [asdict(e) for e in train],
                "validation": [asdict(e) for e in validation],
            }
        )
    )
    tokens = sum(len(e) for e in found.examples)
    print(
        f"{args.out}: {len(train)} train / {len(validation)} validation sequences, {tokens} tokens"
    )
    return 0


def run(args: argparse.Namespace) -> int:
    import torch

    from aw_mcp.training.lora import load_for_training

    data = json.loads(args.sequences.read_text())
    train = [TrainingExample(**e) for e in data["train"]]
    validation = [TrainingExample(**e) for e in data["validation"]]
    per_epoch = len(batches_by_length(train, data["prefix"], args.batch_tokens, seed=0))
    settings = TrainSettings(
        rank=args.rank,
        alpha=data["meta"]["alpha"],
        lr=args.lr,
        warmup_steps=2,
        batch_tokens=args.batch_tokens,
        epochs=math.ceil(args.steps / per_epoch),  # as many passes as --steps takes
        max_steps=args.steps,
        eval_every=10**6,
        checkpoint_every=10**6,
    )
    torch.manual_seed(0)
    if args.threads:
        torch.set_num_threads(args.threads)
    started = time.monotonic()
    loaded = load_for_training(args.base, settings.rank, settings.alpha, args.device, args.dtype)
    loaded_s = time.monotonic() - started
    meta = AdapterMetadata(
        **data["meta"], n_layers=loaded.n_layers, n_head=loaded.n_head, n_kv_head=loaded.n_kv_head
    )
    trainer = Trainer(loaded, train, validation, data["prefix"], settings, args.out, meta)
    summary = trainer.run()
    steps = [h for h in trainer.history if "loss" in h]
    seconds = [b["seconds"] - a["seconds"] for a, b in itertools.pairwise(steps)]
    val = [h["val_loss"] for h in trainer.history if h.get("val_loss") is not None]
    device = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "CPU"
    print(
        json.dumps(
            {
                "device": device,
                "dtype": str(loaded.model.dtype),
                "load_seconds": round(loaded_s, 1),
                "steps": summary["step"],
                "median_step_seconds": round(statistics.median(seconds), 3) if seconds else None,
                "first_loss": steps[0]["loss"],
                "last_loss": steps[-1]["loss"],
                "val_loss_before": val[0],
                "val_loss_after": val[-1],
                "adapter": str(args.out / "adapter.gguf"),
            }
        )
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parts = parser.add_subparsers(dest="part", required=True)
    p = parts.add_parser("prepare")
    p.add_argument("records", type=Path, nargs="+")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--simulator", action="append")
    p.add_argument("--profile", default="small")
    p.add_argument("--max-tokens", type=int, default=2048)
    p.add_argument("--val-fraction", type=float, default=0.1)
    p.add_argument("--alpha", type=float, default=32.0)
    r = parts.add_parser("run")
    r.add_argument("sequences", type=Path)
    r.add_argument("--base", type=Path, required=True, help="the base GGUF the sequences are for")
    r.add_argument("--device", default="cuda")
    r.add_argument("--dtype", default="auto")
    r.add_argument("--steps", type=int, default=40)
    r.add_argument("--rank", type=int, default=16)
    r.add_argument("--lr", type=float, default=5e-4)
    r.add_argument("--batch-tokens", type=int, default=2048)
    r.add_argument("--threads", type=int)
    r.add_argument("--out", type=Path, default=Path("gpu-training-run"))
    args = parser.parse_args()
    return prepare(args) if args.part == "prepare" else run(args)


if __name__ == "__main__":
    sys.exit(main())

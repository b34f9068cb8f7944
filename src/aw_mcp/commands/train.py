"""``aw-mcp train``: fine-tune the embedded model on recorded episodes into a LoRA adapter."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import get_args

from aw_mcp.episode.prompt import PROFILES


def register(subparsers: argparse._SubParsersAction) -> None:
    from aw_mcp.training.trainer import TrainSettings

    p = subparsers.add_parser(
        "train",
        help="fine-tune the embedded model on recorded episodes; writes a GGUF LoRA adapter",
        description="Train a LoRA adapter on record directories (JSONL of CallRecords, e.g. "
        "real bash episodes). Each episode is rendered exactly as 'aw-mcp serve' renders its "
        "calls (same profile, world and chat template) and trained on its observations. "
        "OUT/adapter.gguf is rewritten at every checkpoint; serve it with --lora. "
        "Needs pip install 'aw-mcp[train]'.",
    )
    p.add_argument(
        "record_dirs",
        nargs="+",
        type=Path,
        metavar="RECORD_DIR",
        help="folders of recorded episodes (JSONL CallRecords, e.g. serve --record-dir output)",
    )
    p.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="DIR",
        help="where adapter.gguf, checkpoint.pt and the training metrics are written",
    )
    p.add_argument(
        "--simulator",
        action="append",
        metavar="NAME|FILE",
        help="domain of the episodes, as for serve (default: the bundled domains they name)",
    )
    p.add_argument("--world", type=Path, metavar="FILE.yaml", help="the --world served with")
    p.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        default="small",
        help="prompt profile the episodes are rendered with; recorded in the adapter and used "
        "when it is served (default small)",
    )
    p.add_argument(
        "--model",
        metavar="NAME|GGUF",
        help="base model: a known model (qwen2.5-coder-0.5b, qwen2.5-coder-1.5b, smollm2-135m) "
        "or a GGUF file (default: qwen2.5-coder-0.5b, the default of serve)",
    )
    p.add_argument("--max-tokens", type=int, default=2048, help="longest training sequence")
    p.add_argument(
        "--val-fraction",
        type=float,
        default=0.05,
        help="episodes of RECORD_DIR held back for validation loss (default 0.05)",
    )
    p.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda")
    p.add_argument(
        "--dtype",
        choices=["auto", "float32", "bfloat16"],
        default="auto",
        help="base model weights: auto = bfloat16 on CUDA, float32 on CPU; bfloat16 is ~2.7x "
        "faster on CPUs with AVX512-BF16",
    )
    p.add_argument("--threads", type=int, help="CPU threads (default: all cores but one)")
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    p.add_argument(
        "--init-from",
        type=Path,
        metavar="CHECKPOINT.pt|ADAPTER.gguf",
        help="start from another run's LoRA weights (fresh optimizer and schedule): its "
        "checkpoint, or a GGUF adapter such as a bundled one, e.g. to continue a trained "
        "adapter on new episodes; ignored with --resume",
    )
    # The training hyper-parameters are TrainSettings' fields, one flag each.
    for name, field in TrainSettings.model_fields.items():
        kind = next(t for t in (field.annotation, *get_args(field.annotation)) if t in (int, float))
        p.add_argument(
            "--" + name.replace("_", "-"),
            dest=name,
            type=kind,
            default=argparse.SUPPRESS,
            help=f"{field.description or ''} (default {field.default})".strip(),
        )
    p.set_defaults(handler=_train)


def _train(args: argparse.Namespace) -> int:
    from aw_mcp.training import TrainJob, run_training
    from aw_mcp.training.trainer import TrainSettings

    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s"
    )
    settings = TrainSettings(
        **{k: getattr(args, k) for k in TrainSettings.model_fields if hasattr(args, k)}
    )
    job = TrainJob(
        record_dirs=args.record_dirs,
        out_dir=args.out,
        simulators=args.simulator,
        world=args.world,
        profile=args.profile,
        base_model=args.model,
        max_tokens=args.max_tokens,
        val_fraction=args.val_fraction,
        device=args.device,
        dtype=args.dtype,
        threads=args.threads,
        resume=args.resume,
        init_from=args.init_from,
    )
    summary = run_training(job, settings)
    summary.pop("history")
    print(json.dumps(summary, indent=2))
    return 0

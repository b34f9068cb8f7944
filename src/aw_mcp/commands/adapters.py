"""``aw-mcp adapters``: work on GGUF LoRA adapters (merge: a weighted sum of several)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from aw_mcp.errors import UserInputError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "adapters",
        help="work on GGUF LoRA adapters (merge several into one)",
        description="Work on GGUF LoRA adapters that aw-mcp train writes.",
    )
    actions = p.add_subparsers(dest="action", required=True)
    merge = actions.add_parser(
        "merge",
        help="write one adapter whose change is the weighted sum of several adapters' changes",
        description="Write one adapter whose change of each weight is the weighted sum of the "
        "given adapters' changes (exact: the ranks add up). The adapters must share their base "
        "model, profile and tensors. Measure the result on held-out episodes like any "
        "checkpoint (aw-mcp eval closed-loop --lora OUT). One adapter alone is copied, scaled "
        "by its weight: with --domains, the same change served for other domains.",
    )
    merge.add_argument(
        "parts",
        nargs="+",
        metavar="ADAPTER[*WEIGHT]",
        help="an adapter file and its weight (1 when left out), e.g. q5.gguf*0.5",
    )
    merge.add_argument("--out", type=Path, required=True, metavar="FILE")
    merge.add_argument(
        "--rank",
        type=int,
        metavar="N",
        help="write the best rank-N approximation of the sum (exact where the summed rank "
        "is at most N); default: the summed rank, exact",
    )
    merge.add_argument(
        "--domains",
        type=lambda text: [d.strip() for d in text.split(",") if d.strip()],
        metavar="NAME[,NAME...]",
        help="the domains serving picks the result for by default (default: every part's); "
        "e.g. one that measured worse than the plain model in a domain it was trained on",
    )
    merge.set_defaults(handler=_merge)


def _merge(args: argparse.Namespace) -> int:
    from aw_mcp.training.adapter_soup import merge_adapters, parse_part

    try:
        parts = [parse_part(text) for text in args.parts]
        if args.rank is not None and args.rank < 1:
            raise UserInputError(f"--rank must be at least 1, not {args.rank}")
        if args.domains is not None and not args.domains:
            raise UserInputError("--domains needs at least one domain name")
        merged = merge_adapters(parts, args.out, args.rank, args.domains)
    except UserInputError as exc:
        print(f"aw-mcp adapters merge: {exc}", file=sys.stderr)
        return 2
    kept = "exact" if merged.kept == 1.0 else f"keeps at least {merged.kept:.4%} of each change"
    print(f"{merged.path}: rank {merged.rank}, {kept}")
    return 0

"""``aw-mcp view``: a record directory -> one self-contained HTML report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from aw_mcp.errors import UserInputError

if TYPE_CHECKING:
    from aw_mcp.records.reader import RecordedEpisode


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "view",
        help="write a self-contained HTML report of the episodes in a record dir",
        description="Render every episode of a record directory (--record-dir, aw-mcp record, "
        "generate or eval --closed-loop output) as one HTML file that needs no server and no "
        "network: a timeline per episode, charts of latency, tokens and faults per step, "
        "filters by domain, tool, source and error, each step's state where the records keep "
        "it (the view, the recall and change blocks, their problems), and a side-by-side view "
        "of each simulated episode with its real counterpart (the real episode of the same id, "
        "from RECORD_DIR or --real), with the state verdict of each step.",
    )
    p.add_argument("records", type=Path, metavar="RECORD_DIR")
    p.add_argument(
        "--out",
        type=Path,
        metavar="FILE.html",
        help="where to write the page (default: RECORD_DIR/report.html)",
    )
    p.add_argument(
        "--real",
        type=Path,
        metavar="DIR",
        help="a record dir of real episodes (trajectories) to show side by side with the "
        "simulated episodes of the same id",
    )
    p.add_argument("--title", help="the page's title (default: the record dir's name)")
    p.set_defaults(handler=_view)


def _load(directory: Path) -> list[RecordedEpisode]:
    from aw_mcp.records.reader import load_record_dir

    try:
        return load_record_dir(directory)
    except FileNotFoundError as exc:
        raise UserInputError(str(exc)) from None


def _view(args: argparse.Namespace) -> int:
    from aw_mcp.viewer.episodes import episode_views
    from aw_mcp.viewer.render import render_page

    episodes = _load(args.records)
    if not episodes:
        raise UserInputError(f"no records (*.jsonl) under {args.records}")
    real = _load(args.real) if args.real else []
    views = episode_views(episodes, real)
    out: Path = args.out or args.records / "report.html"
    title = args.title or f"aw-mcp episodes: {args.records.resolve().name}"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_page(views, title), encoding="utf-8")
    paired = sum(v.counterpart is not None for v in views)
    steps = sum(len(v.steps) for v in views)
    print(
        f"{out}: {len(views)} episodes, {steps} steps, {paired} side by side with reality",
        file=sys.stderr,
    )
    return 0

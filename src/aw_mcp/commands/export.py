"""``aw-mcp export``: record dirs -> AgentWorldBench samples, chat conversations or ATIF
trajectories."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from aw_mcp.errors import UserInputError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "export",
        help="render record dirs as AgentWorldBench JSONL or chat JSONL for fine-tuning, or as "
        "ATIF trajectories",
        description="Render recorded episodes (a --record-dir, aw-mcp record or generate "
        "output) as the world model's conversations: AgentWorldBench samples "
        "(<domain>_test.jsonl, one per turn) or chat messages (<domain>_chat.jsonl, one per "
        "episode); or as the agent's trajectories in ATIF, the Agent Trajectory Interchange "
        "Format of Harbor / Terminal-Bench (<domain>_atif/<episode>.json, one per episode).",
    )
    p.add_argument("records", type=Path, metavar="RECORD_DIR")
    p.add_argument("--out", type=Path, required=True, metavar="DIR")
    p.add_argument(
        "--format",
        dest="fmt",
        choices=["agentworldbench", "chat", "atif"],
        default="agentworldbench",
    )
    p.add_argument(
        "--profile",
        choices=["default", "small", "small-state", "agentworld"],
        default="agentworld",
        help="prompt format (default: agentworld; 'default' is what aw-mcp serve sends "
        "unless told otherwise; 'small-state' writes each step's state before its "
        "observation, as a state-keeping model does); atif does not render prompts",
    )
    p.add_argument(
        "--simulator",
        action="append",
        default=[],
        metavar="NAME|FILE",
        help="the domain rendering the episodes (default: each record's domain, bundled or "
        "captured by aw-mcp record in RECORD_DIR/tools/); repeatable",
    )
    p.add_argument(
        "--tools-from",
        dest="tools_from",
        action="append",
        type=Path,
        default=[],
        metavar="FILE.json",
        help="a captured tools/list whose mirrored domain renders the episodes; repeatable",
    )
    p.add_argument("--world", type=Path, metavar="FILE.yaml", help="extra world facts")
    p.set_defaults(handler=_export)


def _export(args: argparse.Namespace) -> int:
    from aw_mcp.domain.loader import load_domain, load_world
    from aw_mcp.domain.mirror import mirror_domain
    from aw_mcp.episode.prompt import PROFILES
    from aw_mcp.export.formats import export_records
    from aw_mcp.export.rendering import DomainResolver
    from aw_mcp.records.folder import record_dir_worlds
    from aw_mcp.records.reader import load_record_dir

    domains = [load_domain(name) for name in args.simulator]
    domains += [mirror_domain(path) for path in args.tools_from]
    world = load_world(args.world) if args.world else None
    try:
        episodes = load_record_dir(args.records)
    except FileNotFoundError as exc:
        raise UserInputError(str(exc)) from None
    if not episodes:
        raise UserInputError(f"no records (*.jsonl) under {args.records}")
    resolver = DomainResolver(
        domains,
        world,
        record_dir=args.records,
        episode_worlds=record_dir_worlds(args.records, episodes),
    )
    written = export_records(episodes, args.out, args.fmt, PROFILES[args.profile](), resolver)
    unit = {"agentworldbench": "samples", "chat": "episodes", "atif": "trajectory"}[args.fmt]
    for path, count in written.items():
        print(f"{path}: {count} {unit}")
    print(f"{len(episodes)} episodes exported", file=sys.stderr)
    return 0

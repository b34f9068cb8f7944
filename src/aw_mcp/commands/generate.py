"""``aw-mcp generate terminal``: real trajectories from scripted episodes in bash sandboxes."""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
from pathlib import Path

from aw_mcp.progress_bar import add_quiet_flag
from aw_mcp.trajectories.sandbox import CommandTimeout, SandboxUnavailable

log = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "generate",
        help="generate real trajectories (record dirs) by running scripted episodes",
        description="Run scripted episodes against real tools in throwaway sandboxes and "
        "write one record file per episode (the --record-dir format, source 'real').",
    )
    worlds = p.add_subparsers(dest="world", required=True)
    t = worlds.add_parser(
        "terminal",
        help="real bash as user dev in /home/dev/project (needs root and unshare)",
    )
    t.add_argument("--out", type=Path, required=True, metavar="DIR")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--episodes", type=int, default=10)
    t.add_argument(
        "--split",
        choices=["train", "heldout"],
        default="train",
        help="which script templates to draw from (held-out ones never appear in training)",
    )
    t.add_argument("--command-timeout", type=float, default=10.0, metavar="SECONDS")
    t.add_argument(
        "--world-fault",
        metavar="SCENARIO",
        help="run every episode under a real world condition from a bundled fault scenario "
        "(sandbox-disk-full, sandbox-read-only), its calls labelled with the condition text",
    )
    t.add_argument(
        "--worlds",
        choices=["fixed", "varied"],
        default="fixed",
        help="fixed: every episode as user dev in an empty /home/dev/project; varied: each "
        "episode in a machine of its own (user, host, working directory, files, git history; "
        "a quarter in the bundled Terminal world's), written to OUT/worlds/EPISODE.yaml",
    )
    add_quiet_flag(t)
    t.set_defaults(handler=_generate_terminal)
    for name, what in (
        (
            "os",
            "the real filesystem MCP server on a seeded /home/alex (needs root, node and "
            "npm package @modelcontextprotocol/server-filesystem)",
        ),
        (
            "swe",
            "the real git and filesystem MCP servers on a seeded /workspace/invoice-calc "
            "(needs root, mcp-server-git and the filesystem server)",
        ),
    ):
        w = worlds.add_parser(name, help=what)
        w.add_argument("--out", type=Path, required=True, metavar="DIR")
        w.add_argument("--seed", type=int, default=0)
        w.add_argument("--episodes", type=int, default=10)
        w.add_argument(
            "--server",
            action="append",
            default=[],
            metavar="LABEL=COMMAND",
            help="replace a server's command (labels: filesystem, git), e.g. "
            "git='/opt/mcp-git/bin/mcp-server-git'; it runs as the world's user",
        )
        add_quiet_flag(w)
        w.set_defaults(handler=_generate_mcp_world)


def _generate_terminal(args: argparse.Namespace) -> int:
    from aw_mcp.trajectories.generate_terminal import generate_terminal

    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(message)s")
    if args.episodes < 1:
        raise ValueError("--episodes must be at least 1")
    try:
        paths = generate_terminal(
            args.out,
            args.seed,
            args.episodes,
            args.split,
            args.command_timeout,
            args.quiet,
            args.world_fault,
            args.worlds,
        )
    except (SandboxUnavailable, CommandTimeout) as exc:
        print(f"aw-mcp generate: {exc}", file=sys.stderr)
        return 1
    worlds = "world.yaml" if args.worlds == "fixed" else "each one's world in worlds/"
    print(f"wrote {len(paths)} episodes and {worlds} to {args.out}")
    return 0


def _generate_mcp_world(args: argparse.Namespace) -> int:
    from aw_mcp.trajectories.generate_mcp import generate_mcp_world, prepare_world

    if args.episodes < 1:
        raise ValueError("--episodes must be at least 1")
    if bad := [item for item in args.server if "=" not in item]:
        raise ValueError(f"--server needs LABEL=COMMAND, got {bad[0]!r}")
    servers = {label: shlex.split(cmd) for label, cmd in (s.split("=", 1) for s in args.server)}
    try:
        world = prepare_world(args.world, servers)
        paths = generate_mcp_world(world, args.out, args.seed, args.episodes, args.quiet)
    except SandboxUnavailable as exc:
        print(f"aw-mcp generate: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {len(paths)} episodes and world.yaml to {args.out}")
    return 0

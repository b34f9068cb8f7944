"""``aw-mcp generate NAME``: real trajectories from scripted episodes against a real source."""

from __future__ import annotations

import argparse
import logging
import sys

from aw_mcp.generation.sandbox import CommandTimeout, SandboxUnavailable

log = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "generate",
        help="generate real trajectories (record dirs) by running scripted episodes",
        description="Run scripted episodes against a real source (real bash, real MCP "
        "servers, a real browser) in throwaway sandboxes and write one record file per "
        "episode (the --record-dir format, source 'real'). `aw-mcp generate --list` lists "
        "the sources; `aw-mcp generate NAME --help` shows a source's options.",
    )
    p.add_argument("--list", action="store_true", help="list the sources and exit")
    p.add_argument("source", nargs="?", metavar="NAME", help="the source to run")
    p.add_argument("options", nargs=argparse.REMAINDER, help="the source's options")
    p.set_defaults(handler=_generate)


def _generate(args: argparse.Namespace) -> int:
    # Sources are imported only here: `aw-mcp` itself starts without them.
    from aw_mcp.generation.sources import all_sources, source

    if args.list or args.source is None:
        for found in all_sources():
            pinned = ", ".join(f"{k} {v}" for k, v in found.versions.items())
            print(f"{found.name:<20} {found.summary}" + (f" [{pinned}]" if pinned else ""))
        return 0 if args.list else 2
    chosen = source(args.source)  # an unknown name: a ValueError naming the sources
    parser = argparse.ArgumentParser(
        prog=f"aw-mcp generate {chosen.name}", description=chosen.summary
    )
    chosen.add_arguments(parser)
    options = parser.parse_args(args.options)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(message)s")
    try:
        paths = chosen.generate(options)
    except (SandboxUnavailable, CommandTimeout) as exc:
        print(f"aw-mcp generate: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {len(paths)} episodes to {options.out}")
    return 0

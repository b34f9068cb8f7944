"""``aw-mcp capture``: save a real MCP server's tools (and resources, prompts) for
``serve --tools-from``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import anyio


def register(subparsers: argparse._SubParsersAction) -> None:
    from aw_mcp.capture.target import add_server_arguments

    p = subparsers.add_parser(
        "capture",
        help="save the tools (and resources, prompts) of a real MCP server, for --tools-from",
        description="Connect to a real MCP server as a client and save its tools/list as "
        "JSON. Examples: aw-mcp capture --out time.json -- uvx mcp-server-time; "
        "aw-mcp capture --out x.json --url http://127.0.0.1:8000/mcp",
    )
    p.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="FILE.json",
        help="where the captured tools/list (and resources, templates, prompts) is written",
    )
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait (default 60)")
    add_server_arguments(p)
    p.set_defaults(handler=_capture)


def _capture(args: argparse.Namespace) -> int:
    from aw_mcp.capture.target import server_target
    from aw_mcp.capture.tools_list import CaptureError, capture_tools, write_capture
    from aw_mcp.errors import UserInputError

    try:
        target = server_target(args)
    except UserInputError as exc:
        print(f"aw-mcp capture: {exc}", file=sys.stderr)
        return 2
    try:
        capture = anyio.run(capture_tools, target, args.timeout)
    except CaptureError as exc:
        print(f"aw-mcp capture: {exc}", file=sys.stderr)
        return 1
    write_capture(capture, args.out)
    counts = ", ".join(f"{len(items)} {key}" for key, items in capture.items())
    print(f"saved {counts} to {args.out}", file=sys.stderr)
    return 0

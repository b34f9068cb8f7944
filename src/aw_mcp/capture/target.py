"""The real MCP server a command talks to (``aw-mcp capture``, ``aw-mcp record``): flags and
their resolution. Kept light: building the command line must not import the MCP SDK."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from aw_mcp.errors import UserInputError

if TYPE_CHECKING:
    from mcp import StdioServerParameters


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    """``--url URL`` or ``-- COMMAND ARGS`` (with ``--env``): the real server to talk to."""
    parser.add_argument("--url", help="a Streamable HTTP server instead of a command")
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra environment for the server command; repeatable",
    )
    parser.add_argument(
        "server_command",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND ARGS",
        help="the server to launch over stdio",
    )


def server_target(args: argparse.Namespace) -> str | StdioServerParameters:
    """The server named by :func:`add_server_arguments`' flags; UserInputError if unclear."""
    command = args.server_command[1:] if args.server_command[:1] == ["--"] else args.server_command
    if bool(args.url) == bool(command):
        raise UserInputError("give either --url URL or -- COMMAND ARGS")
    if bad := [item for item in args.env if "=" not in item]:
        raise UserInputError(f"--env needs KEY=VALUE, got {bad[0]!r}")
    from aw_mcp.capture.tools_list import stdio_target

    return args.url or stdio_target(command, dict(item.split("=", 1) for item in args.env))

"""The ``aw-mcp`` command line: the parser of every command (``aw_mcp.commands``), and one
error contract for all of them.

A mistake of the user's (``UserInputError``: a bad flag, file or piece of data; a settings
value out of range) is one line on stderr and exit status 2; anything else aw-mcp could not
do (``AwMcpError``) is one line and exit status 1. Any other exception is a bug, and keeps its
traceback.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from argparse import Namespace
from collections.abc import Sequence

from aw_mcp import __version__
from aw_mcp.commands import register_all
from aw_mcp.errors import AwMcpError, UserInputError
from aw_mcp.files.yaml import DataFileError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="aw-mcp", description="MCP server of simulated worlds answered by a world model."
    )
    parser.add_argument("--version", action="version", version=f"aw-mcp {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    register_all(sub)
    return parser


def parse_arguments(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> Namespace:
    """``parser.parse_args``, and an unknown flag gets "did you mean" the command's closest."""
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        command = _chosen_parser(parser, args)
        message = f"unrecognized arguments: {' '.join(unknown)}"
        known = [o for o in command._option_string_actions if o.startswith("--")]
        flags = [u.split("=", 1)[0] for u in unknown if u.startswith("--")]
        if flags and (close := difflib.get_close_matches(flags[0], known, n=1)):
            message += f" (did you mean {close[0]}?)"
        command.error(message)
    return args


def _chosen_parser(parser: argparse.ArgumentParser, args: Namespace) -> argparse.ArgumentParser:
    """The (sub)command parser that ``args`` were parsed with, following nested commands."""
    while True:
        actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        chosen = getattr(args, actions[0].dest, None) if actions else None
        if not actions or chosen not in actions[0].choices:
            return parser
        parser = actions[0].choices[chosen]


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_arguments(build_parser(), argv)
    try:
        return args.handler(args)
    except DataFileError as exc:
        print(f"aw-mcp: invalid file\n{exc}", file=sys.stderr)
        return 2
    except UserInputError as exc:
        print(f"aw-mcp: {exc}", file=sys.stderr)
        return 2
    except AwMcpError as exc:
        print(f"aw-mcp: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

"""``aw-mcp record``: a transparent proxy in front of a real MCP server that records its calls."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from aw_mcp.capture.target import add_server_arguments, server_target
from aw_mcp.errors import UserInputError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "record",
        help="proxy a real MCP server and record every call (real trajectories)",
        description="Serve the tools of a real MCP server unchanged (stdio by default) and "
        "append every call to an episode record in DIR (the --record-dir format, source "
        "'real'). Example: aw-mcp record --out recs -- uvx mcp-server-time",
    )
    p.add_argument("--out", type=Path, required=True, metavar="DIR")
    p.add_argument(
        "--domain",
        help="domain name in the records (default: derived from the server's name)",
    )
    p.add_argument(
        "--episode",
        help="episode id for calls that name none (default: <domain>-<unix time>)",
    )
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8766)
    add_server_arguments(p)
    p.set_defaults(handler=_record)


PROXY_ARGUMENT_BYTES = 4 << 20


def _record(args: argparse.Namespace) -> int:
    import logging

    import anyio
    from mcp.server import Server

    from aw_mcp.capture.record_proxy import domain_name_for, run_record_proxy
    from aw_mcp.records.sink import RecordSink
    from aw_mcp.server.settings import ServerSettings
    from aw_mcp.server.transports import http_app, serve_http, serve_stdio

    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(levelname)s %(message)s")
    target = server_target(args)
    if args.domain is not None and domain_name_for(args.domain) != args.domain:
        raise UserInputError(
            f"record: --domain {args.domain!r} is no domain name (lowercase letters, digits, "
            f"'-' and '_'; e.g. {domain_name_for(args.domain)!r})"
        )
    # The proxy refuses no call the real server would take: its body limit is the SDK's own.
    http = ServerSettings(host=args.host, port=args.port, max_argument_bytes=PROXY_ARGUMENT_BYTES)

    async def serve_over_http(server: Server) -> None:
        await serve_http(http_app(server, http), http)

    serve = serve_stdio if args.transport == "stdio" else serve_over_http
    try:
        anyio.run(run_record_proxy, target, RecordSink(args.out), args.domain, args.episode, serve)
    except Exception as exc:  # a server that cannot start or dies: the SDK wraps it in groups
        print(f"aw-mcp record: the server failed: {_innermost(exc)}", file=sys.stderr)
        return 1
    return 0


def _innermost(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"

"""``aw-mcp serve``: serve simulated tools to MCP clients over stdio or Streamable HTTP."""

from __future__ import annotations

import argparse
import contextlib
import logging

import anyio

from aw_mcp import __version__
from aw_mcp.commands.console import configure_logging
from aw_mcp.commands.flags import add_settings_flags, settings_from_namespace
from aw_mcp.wiring.settings import ServeSettings

log = logging.getLogger("aw_mcp")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "serve",
        help="serve simulated tools over MCP (stdio by default)",
        description="Serve simulated tools to MCP clients. Every flag FLAG-NAME can also be "
        "set as the environment variable AW_MCP_FLAG_NAME; flags win.",
    )
    add_settings_flags(p, ServeSettings)
    p.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace) -> int:
    settings = settings_from_namespace(ServeSettings, args)
    configure_logging(settings.log_level)
    from aw_mcp.server.app import build_server
    from aw_mcp.server.transports import http_app, listen_socket, serve_http, serve_stdio
    from aw_mcp.wiring.assemble import build_simulator

    simulator = build_simulator(settings)  # bad domain/world/fault files fail here, clearly
    # The server's lifespan loads the engine in the background and closes it on the way out.
    key = settings.request_state_key
    server = build_server(
        simulator,
        owns_engine=True,
        max_argument_bytes=settings.max_argument_bytes,
        request_state_keys=[key.get_secret_value()] if key else None,
        episode=settings.episode,
    )
    # Unsafe HTTP settings and a port that cannot be had fail here, before anything starts
    # (the model would otherwise load, and "serving on" be logged, before the bind fails).
    http = settings.transport == "http"
    app = http_app(server, settings, simulator.episodes) if http else None
    listening = listen_socket(settings.host, settings.port) if http else None
    log.info(
        "aw-mcp %s: %d tools from %s on %s",
        __version__,
        len(simulator.catalogue),
        ", ".join(d.name for d in simulator.catalogue.domains),
        simulator.engine.name,
    )

    async def main() -> None:
        if app is not None:
            await serve_http(app, settings, listening)
        else:
            await serve_stdio(server)

    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(main)
    return 0

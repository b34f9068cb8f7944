"""Serve a built ``Server`` over stdio or Streamable HTTP (``/mcp``, via uvicorn)."""

from __future__ import annotations

import logging

from mcp.server import Server
from mcp.server.stdio import stdio_server
from starlette.types import ASGIApp

from aw_mcp.server.http_app import HTTP_PATH, HttpOptions, build_http_app

log = logging.getLogger(__name__)


async def serve_stdio(server: Server) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def http_app(server: Server, options: HttpOptions) -> ASGIApp:
    """The HTTP application; raises HttpConfigError (before anything starts) on unsafe options."""
    return build_http_app(server, options)


async def serve_http(app: ASGIApp, options: HttpOptions) -> None:
    import uvicorn

    config = uvicorn.Config(
        app, host=options.host, port=options.port, log_level="warning", lifespan="on"
    )
    log.info("serving Streamable HTTP on http://%s:%d%s", options.host, options.port, HTTP_PATH)
    await uvicorn.Server(config).serve()

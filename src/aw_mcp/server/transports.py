"""Serve a built ``Server`` over stdio or Streamable HTTP (``/mcp``, via uvicorn)."""

from __future__ import annotations

import logging

from mcp.server import Server
from mcp.server.stdio import stdio_server

log = logging.getLogger(__name__)

HTTP_PATH = "/mcp"


async def serve_stdio(server: Server) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def serve_http(server: Server, host: str, port: int) -> None:
    import uvicorn

    app = server.streamable_http_app(streamable_http_path=HTTP_PATH, host=host)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    log.info("serving Streamable HTTP on http://%s:%d%s", host, port, HTTP_PATH)
    await uvicorn.Server(config).serve()

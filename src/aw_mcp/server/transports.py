"""Serve a built ``Server`` over stdio or Streamable HTTP (``/mcp``, via uvicorn)."""

from __future__ import annotations

import errno
import io
import logging
import os
import socket
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCError
from starlette.types import ASGIApp

from aw_mcp.episode.store import EpisodeStore
from aw_mcp.errors import UserInputError
from aw_mcp.server.http_app import HTTP_PATH, build_http_app
from aw_mcp.server.malformed import screen_line
from aw_mcp.server.settings import ServerSettings

log = logging.getLogger(__name__)


class ScreenedLines:
    """stdin's lines for the SDK's stdio reader, minus those it would drop unanswered.

    The errors those lines are owed (``screen_line``) go to ``replies``; ``serve_stdio``
    writes them through the SDK's own writer, so they never interleave with its output.
    """

    def __init__(self, lines: AsyncIterable[str], replies: MemoryObjectSendStream[JSONRPCError]):
        self.lines = lines
        self.replies = replies

    async def __aiter__(self) -> AsyncIterator[str]:
        async with self.replies:
            async for line in self.lines:
                if not line.strip():
                    continue
                errors = screen_line(line)
                if errors is None:
                    yield line
                    continue
                for error in errors:
                    log.info("answered an unreadable message: %s", error.error.data)
                    await self.replies.send(error)


async def serve_stdio(server: Server) -> None:
    # Our own handle on fd 0 (the SDK would divert fd 0 to /dev/null for child processes;
    # simulated tools start none).
    stdin = anyio.wrap_file(
        # Bytes that are not UTF-8 stay recognisable (lone surrogates) for screen_line.
        io.TextIOWrapper(os.fdopen(os.dup(0), "rb"), encoding="utf-8", errors="surrogateescape")
    )
    replies, pending = anyio.create_memory_object_stream[JSONRPCError](16)
    screened: Any = ScreenedLines(stdin, replies)  # the SDK asks for an AsyncFile: lines do
    async with stdio_server(stdin=screened) as (read_stream, write_stream):

        async def answer_unreadable() -> None:
            async with pending:
                async for error in pending:
                    try:
                        await write_stream.send(SessionMessage(error))
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        log.debug("stdio closed before an error reply: %s", error.error.data)

        async with anyio.create_task_group() as tg:
            tg.start_soon(answer_unreadable)
            await server.run(read_stream, write_stream, server.create_initialization_options())
            tg.cancel_scope.cancel()


def http_app(
    server: Server, settings: ServerSettings, episodes: EpisodeStore | None = None
) -> ASGIApp:
    """The HTTP application; raises HttpConfigError (before anything starts) on unsafe
    settings. ``episodes`` feeds the ``/ui`` page when ``settings.ui`` is on."""
    return build_http_app(server, settings, episodes)


def listen_socket(host: str, port: int) -> socket.socket:
    """A socket bound to (host, port); UserInputError saying why when it cannot be had."""
    # The family as uvicorn picks it ("localhost" stays IPv4 even where it resolves to ::1).
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        hint = " (another server is using that port: pick another with --port)"
        problem = f"{exc.strerror or exc}{hint if exc.errno == errno.EADDRINUSE else ''}"
        raise UserInputError(f"cannot listen on {host}:{port}: {problem}") from None
    return sock


async def serve_http(
    app: ASGIApp, settings: ServerSettings, sock: socket.socket | None = None
) -> None:
    """Serve on ``sock``; bind it beforehand (``listen_socket``) so that a port in use fails
    before the model loads and before anything says it is serving."""
    import uvicorn

    sock = sock or listen_socket(settings.host, settings.port)
    config = uvicorn.Config(
        app, host=settings.host, port=settings.port, log_level="warning", lifespan="on"
    )
    port = sock.getsockname()[1]
    log.info("serving Streamable HTTP on http://%s:%d%s", settings.host, port, HTTP_PATH)
    if settings.ui:
        log.info("live episodes at http://%s:%d/ui", settings.host, port)
    await uvicorn.Server(config).serve(sockets=[sock])

"""What the HTTP layer learns about requests from the handlers that serve them, and back.

Two things the SDK's Streamable HTTP transport (handshake generation) does not do:

- **A client that disconnects gives up its request.** Over a legacy session, a POST whose
  client goes away (a ``curl --max-time``, a client timeout that sends no
  ``notifications/cancelled``) leaves its handler running: a hung or slow call keeps its
  episode's lock, and every later call of that episode waits behind it until the session
  expires. This server keeps no event store, so a dropped response stream can never be
  resumed: the answer could only be thrown away. ``RequestWatch`` rides in the ASGI scope
  of each POST; ``CancelWhenClientGone`` (server middleware) runs the request's handler in a
  cancel scope that the watch cancels when the response ends unfinished, exactly as a
  ``notifications/cancelled`` would. (The 2026-07-28 path of the SDK already cancels on
  disconnect.)
- **Which sessions a real client uses.** ``SessionActivity`` (server middleware) marks a
  session *established* once it sends anything past the handshake (``initialize``,
  ``notifications/initialized``); the bounded session manager closes sessions that never did
  before any that did.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio
from mcp import MCPError
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger(__name__)

WATCH_KEY = "aw-mcp.request-watch"  # in the ASGI scope of a POST
SESSION_HEADER = "mcp-session-id"
REQUEST_CANCELLED = -32800  # what the SDK answers a cancelled request with on this wire
HANDSHAKE = frozenset({"initialize", "notifications/initialized"})


class RequestWatch:
    """One POST: whether its response finished, and the handlers to cancel if it did not."""

    def __init__(self) -> None:
        self.client_gone = False
        self._scopes: set[anyio.CancelScope] = set()

    def add(self, scope: anyio.CancelScope) -> None:
        self._scopes.add(scope)
        if self.client_gone:  # the client left before the handler even started
            scope.cancel()

    def discard(self, scope: anyio.CancelScope) -> None:
        self._scopes.discard(scope)

    def give_up(self) -> None:
        self.client_gone = True
        for scope in self._scopes:
            scope.cancel()


class WatchedPosts:
    """ASGI wrapper: each POST carries a ``RequestWatch``; a response that ends before its last
    body part was sent (the client disconnected) gives the request up."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        watch = RequestWatch()
        scope[WATCH_KEY] = watch
        finished = False

        async def watched_send(message: Message) -> None:
            nonlocal finished
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                finished = True
            await send(message)

        try:
            await self.app(scope, receive, watched_send)
        finally:
            if not finished:
                watch.give_up()


def _watch_of(ctx: ServerRequestContext[Any, Any]) -> RequestWatch | None:
    scope = getattr(getattr(ctx, "request", None), "scope", None)
    return scope.get(WATCH_KEY) if isinstance(scope, dict) else None


class CancelWhenClientGone:
    """Server middleware: a request whose HTTP client went away is cancelled."""

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        watch = _watch_of(ctx)
        if watch is None:  # stdio, in memory, or a path that cancels by itself
            return await call_next(ctx)
        with anyio.CancelScope() as scope:
            watch.add(scope)
            try:
                return await call_next(ctx)
            finally:
                watch.discard(scope)
        log.info("%s %s cancelled: its HTTP client disconnected", ctx.method, ctx.request_id)
        # Nobody reads this answer (the response stream is gone); it only ends the request.
        raise MCPError(code=REQUEST_CANCELLED, message="Request cancelled: the client disconnected")


class SessionActivity:
    """Server middleware: tell ``mark`` the session id of every message past the handshake
    (the middleware chain sees notifications too)."""

    def __init__(self, mark: Callable[[str], None]):
        self.mark = mark

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        headers = getattr(getattr(ctx, "request", None), "headers", None)
        session_id = headers.get(SESSION_HEADER) if headers is not None else None
        if session_id and ctx.method not in HANDSHAKE:
            self.mark(session_id)
        return await call_next(ctx)

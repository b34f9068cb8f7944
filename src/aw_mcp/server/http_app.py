"""The Streamable HTTP application: bounded sessions, DNS-rebinding protection, bearer token.

Built here rather than with ``Server.streamable_http_app`` because things it does not do are
needed by a server that many agents (or a hostile client) reach over the network:
- sessions are bounded: idle ones expire after ``session_idle_timeout`` seconds, and at
  ``max_sessions`` an idle session makes room for a new client (the SDK refuses every new
  client with 503 until a session expires on its own): the least recently used of those that
  never sent anything past the handshake (what a flood of initializes leaves), and only
  when there is none the least recently used established one;
- a POST whose client disconnects before its answer cancels its request
  (``aw_mcp.server.http_watch``): a hung call must not hold its episode;
- bodies over ``max_body_bytes`` are refused before anything parses them: a large body takes
  the event loop (the JSON parsers hold the GIL) from every other client while it is parsed;
- Host/Origin checks on every bind address (the SDK checks them only when bound to exactly
  127.0.0.1, localhost or ::1); off loopback the allowed hosts must be given;
- an optional bearer token, compared in constant time;
- a POST body the SDK cannot read gets errors with the request's id and what is wrong.
With ``ui`` on, a read-only ``/ui`` page shows the live episodes (``aw_mcp.server.ui``),
behind the same checks.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import math
from typing import Any

from mcp.server import Server
from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import (
    DEFAULT_MAX_REQUEST_BODY_SIZE,
    TransportSecurityMiddleware,
    TransportSecuritySettings,
)
from mcp_types import INVALID_REQUEST, ErrorData, JSONRPCError
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from aw_mcp.episode.store import EpisodeStore
from aw_mcp.errors import UserInputError
from aw_mcp.server.http_watch import CancelWhenClientGone, SessionActivity, WatchedPosts
from aw_mcp.server.malformed import leading_id, screen_line
from aw_mcp.server.settings import ServerSettings

log = logging.getLogger(__name__)

HTTP_PATH = "/mcp"
LOOPBACK_HOSTS = ("127.0.0.1:*", "localhost:*", "[::1]:*")
ANY_HOST = "*"


class HttpConfigError(UserInputError):
    """The HTTP settings would expose the server unsafely; the message says what to set."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def transport_security(settings: ServerSettings) -> TransportSecuritySettings:
    """Host/Origin checks for ``settings``; raise HttpConfigError when off loopback unconfigured."""
    hosts = list(settings.allowed_host)
    if ANY_HOST in hosts:  # an explicit opt-out, e.g. behind a proxy that checks Host itself
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    if not hosts:
        if not is_loopback(settings.host):
            raise HttpConfigError(
                f"--host {settings.host} is not a loopback address: any web page could reach "
                "this server through DNS rebinding. Name the Host values clients use with "
                "--allowed-host (e.g. --allowed-host 'myserver.lan:*'; '*' turns the check off), "
                "and consider --auth-token."
            )
        bind = f"[{settings.host}]" if ":" in settings.host else settings.host
        hosts = [*LOOPBACK_HOSTS, f"{bind}:*"]
    origins = list(settings.allowed_origin) or [
        f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")
    ]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


class BoundedSessionManager(StreamableHTTPSessionManager):
    """Sessions expire when idle; at the limit an idle one is closed: the least recently used
    of those never used past the handshake, else the least recently used of all."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._established: set[str] = set()

    def mark_established(self, session_id: str) -> None:
        if session_id in self._server_instances:
            self._established.add(session_id)

    async def _discard_session(
        self, session_id: str, transport: StreamableHTTPServerTransport
    ) -> None:
        self._established.discard(session_id)
        await super()._discard_session(session_id, transport)

    def _admit_session(
        self, requestor: AuthorizationContext | None
    ) -> StreamableHTTPServerTransport | None:
        if self.max_sessions is not None and len(self._server_instances) >= self.max_sessions:
            self._evict_least_recently_used_idle_session()
        return super()._admit_session(requestor)

    def _evict_least_recently_used_idle_session(self) -> None:
        # (established?, idle since, id): sessions a client never used go first.
        idle = [
            (session_id in self._established, since, session_id)
            for session_id, transport in self._server_instances.items()
            if (since := idle_since(transport)) is not None
        ]
        if not idle:
            log.warning(
                "all %d HTTP sessions are busy: refusing a new one", len(self._server_instances)
            )
            return
        established, _, session_id = min(idle)
        transport = self._server_instances.pop(session_id)
        self._session_owners.pop(session_id, None)
        self._established.discard(session_id)
        # Cancelling the idle scope ends the session's server task, which terminates the
        # transport (its id then answers 404), as an idle timeout would.
        assert transport.idle_scope is not None
        transport.idle_scope.cancel()
        log.info(
            "HTTP session %s (%s) closed to make room for a new client",
            session_id,
            "established" if established else "never used past initialize",
        )


def idle_since(transport: StreamableHTTPServerTransport) -> float | None:
    """When the session's idle countdown started; None while a request is in flight.

    Reads the SDK transport's countdown (mcp 2.3 has no public accessor): its idle scope's
    deadline is set to ``last request end + idle timeout`` and is infinite while busy.
    """
    scope = transport.idle_scope
    if scope is None or scope.cancel_called or not math.isfinite(scope.deadline):
        return None
    return scope.deadline


class BearerTokenMiddleware:
    """Answer 401 unless the request carries ``Authorization: Bearer <token>`` (the scheme
    in any case, as RFC 9110 has it: ``bearer <token>`` too)."""

    def __init__(self, app: ASGIApp, token: str):
        self.app = app
        self.expected = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
        scheme, _, token = given.strip().partition(b" ")
        valid = scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self.expected)
        if not valid:
            response = JSONResponse(
                {"error": "unauthorized", "message": "send 'Authorization: Bearer <token>'"},
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="aw-mcp"'},
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


class ScreenedBodies:
    """Answer a POST body the SDK cannot read with the JSON-RPC errors its requests are owed.

    The SDK answers such a body with 400 and a null id; this puts the request's id and a
    ``data`` that says what is wrong in the 400 (``screen_line``, as on stdio). A body over
    ``max_body`` bytes gets 413 and a JSON-RPC error before any of it is parsed. Requests that
    fail the Host/Origin check go on to the SDK untouched.
    """

    def __init__(
        self,
        app: ASGIApp,
        security: TransportSecuritySettings,
        max_body: int = DEFAULT_MAX_REQUEST_BODY_SIZE,
    ):
        self.app = app
        self.security = TransportSecurityMiddleware(security)
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        if await self.security.validate_request(Request(scope), is_post=True) is not None:
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length", "")
        declared_size = int(declared) if declared.isdigit() else 0
        chunks: list[bytes] = []
        size, more = 0, True
        while more and size <= self.max_body:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
            if declared_size > self.max_body:
                break  # the first part is enough to read an id from
        body = b"".join(chunks)
        if more or max(size, declared_size) > self.max_body:
            await self._too_large(body, max(size, declared_size))(scope, receive, send)
            return
        if errors := screen_line(body.decode("utf-8", errors="surrogateescape"), answer_all=True):
            payload = [e.model_dump(mode="json", by_alias=True) for e in errors]
            await JSONResponse(payload if len(payload) > 1 else payload[0], status_code=400)(
                scope, receive, send
            )
            return
        replayed = False

        async def replay() -> Message:  # the body, already read, for the SDK
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    def _too_large(self, head: bytes, size: int) -> JSONResponse:
        """413 with the request's id when it comes first (read from the first bytes only)."""
        rid = leading_id(head[:4096].decode("utf-8", errors="replace"))
        problem = (
            f"the request body is {'at least ' if size <= self.max_body else ''}"
            f"{max(size, self.max_body + 1)} bytes; this server reads at most {self.max_body} "
            "(twice --max-argument-bytes, plus 64 KiB). Send smaller arguments, or raise "
            "--max-argument-bytes"
        )
        error = JSONRPCError(
            jsonrpc="2.0",
            id=rid,
            error=ErrorData(code=INVALID_REQUEST, message="Request body too large", data=problem),
        )
        return JSONResponse(error.model_dump(mode="json", by_alias=True), status_code=413)


def build_http_app(
    server: Server, settings: ServerSettings, episodes: EpisodeStore | None = None
) -> ASGIApp:
    """The application; with ``settings.ui``, ``episodes`` feeds the ``/ui`` page."""
    security = transport_security(settings)
    manager = BoundedSessionManager(
        app=server,
        security_settings=security,
        session_idle_timeout=settings.session_idle_timeout,
        max_sessions=settings.max_sessions,
        max_request_body_size=settings.max_body_bytes,
    )
    server._session_manager = manager  # what Server.streamable_http_app would record
    server.middleware.extend([CancelWhenClientGone(), SessionActivity(manager.mark_established)])
    endpoint = ScreenedBodies(
        WatchedPosts(StreamableHTTPASGIApp(manager)), security, settings.max_body_bytes
    )
    routes = [Route(HTTP_PATH, endpoint=endpoint)]
    if settings.ui:
        if episodes is None:
            raise HttpConfigError("the /ui page needs the server's episode store")
        from aw_mcp.server.ui import ui_route  # the templates load only when asked for

        routes.append(ui_route(episodes, security))
    app: ASGIApp = Starlette(
        routes=routes,
        lifespan=lambda _: manager.run(),
    )
    token = settings.auth_token.get_secret_value() if settings.auth_token else ""
    if token:
        app = BearerTokenMiddleware(app, token)
    return app

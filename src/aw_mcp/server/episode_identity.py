"""Which episode a request belongs to.

In order of precedence:
1. the ``Aw-Episode-Id`` HTTP header (any client that can set headers: the explicit way, and
   the only one that works for stateless 2026-07-28 HTTP clients);
2. ``_meta["aw-mcp/episode"]`` on the request (clients that cannot set headers, e.g. stdio);
3. the legacy MCP session id (``Mcp-Session-Id`` over HTTP, from the initialize handshake);
4. the connection: one episode per legacy stdio or in-memory connection; a stateless
   2026-07-28 client on stdio or in memory shares the episode ``"process"``.
An HTTP request with none of 1-3 falls into the shared episode ``"http-default"``.
"""

from __future__ import annotations

from typing import Any

from mcp_types.version import MODERN_PROTOCOL_VERSIONS

EPISODE_HEADER = "aw-episode-id"
EPISODE_META_KEY = "aw-mcp/episode"
SESSION_HEADER = "mcp-session-id"
HTTP_FALLBACK_EPISODE = "http-default"
PROCESS_EPISODE = "process"
MAX_EPISODE_ID_LENGTH = 200


def _meta_value(meta: Any, key: str) -> Any:
    if meta is None:
        return None
    if isinstance(meta, dict):
        return meta.get(key)
    extra = getattr(meta, "model_extra", None) or {}
    return extra.get(key, getattr(meta, key, None))


def episode_id_for(ctx: Any) -> str:
    """The episode id of the request handled with context ``ctx`` (a ServerRequestContext)."""
    headers = getattr(getattr(ctx, "request", None), "headers", None)
    if headers is not None and (value := headers.get(EPISODE_HEADER)):
        return value[:MAX_EPISODE_ID_LENGTH]
    value = _meta_value(getattr(ctx, "meta", None), EPISODE_META_KEY)
    if isinstance(value, str) and value:
        return value[:MAX_EPISODE_ID_LENGTH]
    if headers is not None:
        if session_id := headers.get(SESSION_HEADER):
            return f"session-{session_id}"
        return HTTP_FALLBACK_EPISODE
    if getattr(ctx, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS:
        # Stateless 2026-07-28: no connection outlives a request, so the process is the episode.
        return PROCESS_EPISODE
    # Handshake generation: the SDK builds a ServerSession per request, but the Connection
    # behind it lives as long as the stdio process or in-memory connection (no public
    # accessor in mcp 2.3, hence the private attribute).
    connection = getattr(ctx.session, "_connection", None)
    if connection is None:
        return PROCESS_EPISODE
    return f"connection-{id(connection):x}"

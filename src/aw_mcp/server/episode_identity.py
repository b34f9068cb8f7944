"""Which episode a request belongs to, and whether the client asks to reset or end it.

The episode id, in order of precedence:
1. the ``Aw-Episode-Id`` HTTP header (any client that can set headers: the explicit way, and
   the only one that works for stateless 2026-07-28 HTTP clients);
2. ``_meta["aw-mcp/episode"]`` on the request (clients that cannot set headers, e.g. stdio);
3. the legacy MCP session id (``Mcp-Session-Id`` over HTTP, from the initialize handshake);
4. the connection: one episode per legacy stdio or in-memory connection; a stateless
   2026-07-28 client on stdio or in memory shares the episode ``"process"``.
An HTTP request with none of 1-3 falls into the shared episode ``"http-default"``.

Episodes named by 3 or 4 end when their connection closes (an HTTP ``DELETE`` of the session,
its idle timeout, the end of a stdio process). Any episode can be reset or ended from a
``tools/call`` with ``_meta`` flags, so the simulated tool surface stays the domain's own:
``"aw-mcp/reset": true`` begins a new episode before the call, ``"aw-mcp/end": true`` ends the
episode after it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from mcp.types import RequestParamsMeta
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

EPISODE_HEADER = "aw-episode-id"
EPISODE_META_KEY = "aw-mcp/episode"
RESET_META_KEY = "aw-mcp/reset"
END_META_KEY = "aw-mcp/end"
# The world of this episode (a domain's ``world:`` block: facts, notes, replace_notes), layered
# on the served world from the episode's first call on: each rollout its own machine.
WORLD_META_KEY = "aw-mcp/world"
SESSION_HEADER = "mcp-session-id"
HTTP_FALLBACK_EPISODE = "http-default"
PROCESS_EPISODE = "process"
MAX_EPISODE_ID_LENGTH = 200
_WATCHED = "aw-mcp/episodes-ended-on-close"  # key in the SDK's per-connection state


def episode_meta(episode: str) -> RequestParamsMeta:
    """A client's ``_meta`` for a ``tools/call`` of episode ``episode`` (way 2 above)."""
    return cast(RequestParamsMeta, {EPISODE_META_KEY: episode})


@dataclass(frozen=True)
class EpisodeRequest:
    """What one request says about its episode."""

    episode_id: str
    reset: bool = False  # begin a new episode before this call
    end: bool = False  # end the episode after this call
    connection: Any | None = None  # the legacy connection whose close ends the episode
    world: Any | None = None  # _meta["aw-mcp/world"] as sent (validated by the simulator)


def _meta_value(meta: Any, key: str) -> Any:
    if meta is None:
        return None
    if isinstance(meta, dict):
        return meta.get(key)
    extra = getattr(meta, "model_extra", None) or {}
    return extra.get(key, getattr(meta, key, None))


def episode_request(ctx: Any) -> EpisodeRequest:
    """The episode of the request handled with context ``ctx`` (a ServerRequestContext)."""
    meta = getattr(ctx, "meta", None)
    episode_id, connection = _identify(ctx, meta)
    return EpisodeRequest(
        episode_id,
        reset=_meta_value(meta, RESET_META_KEY) is True,
        end=_meta_value(meta, END_META_KEY) is True,
        connection=connection,
        world=_meta_value(meta, WORLD_META_KEY),
    )


def _identify(ctx: Any, meta: Any) -> tuple[str, Any | None]:
    """(episode id, the legacy connection it is bound to, if any)."""
    headers = getattr(getattr(ctx, "request", None), "headers", None)
    if headers is not None and (value := headers.get(EPISODE_HEADER)):
        return value[:MAX_EPISODE_ID_LENGTH], None
    value = _meta_value(meta, EPISODE_META_KEY)
    if isinstance(value, str) and value:
        return value[:MAX_EPISODE_ID_LENGTH], None
    if getattr(ctx, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS:
        # Stateless 2026-07-28: no connection outlives a request, so none can end an episode.
        return (HTTP_FALLBACK_EPISODE if headers is not None else PROCESS_EPISODE), None
    # Handshake generation: the SDK builds a ServerSession per request, but the Connection
    # behind it lives as long as the HTTP session, stdio process or in-memory connection (no
    # public accessor in mcp 2.3, hence the private attribute).
    connection = getattr(getattr(ctx, "session", None), "_connection", None)
    if headers is not None:
        if session_id := headers.get(SESSION_HEADER):
            return f"session-{session_id}", connection
        return HTTP_FALLBACK_EPISODE, None
    if connection is None:
        return PROCESS_EPISODE, None
    return f"connection-{id(connection):x}", connection


def end_on_close(request: EpisodeRequest, end: Callable[[str], None]) -> None:
    """Call ``end(episode_id)`` when the request's legacy connection closes (once per id)."""
    connection = request.connection
    if connection is None:
        return
    watched: set[str] = connection.state.setdefault(_WATCHED, set())
    if request.episode_id in watched:
        return
    watched.add(request.episode_id)

    async def on_close() -> None:
        end(request.episode_id)

    connection.exit_stack.push_async_callback(on_close)
